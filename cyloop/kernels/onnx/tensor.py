"""Shape and data movement: Identity, Constant, Cast, Shape, Reshape, Squeeze, Unsqueeze, Concat,
Gather, Trilu, ... Kernels that only re-view their input return numpy views (no copy)."""

import numpy as np

from .. import _shapes
from ..registry import declare, kernel


def _axes_tuple(axes):
    return tuple(_shapes.flat_int_list(axes))


def _to_text(value):
    if isinstance(value, (np.floating, float)):
        return np.format_float_positional(value, trim="-")
    return str(value)


@kernel("Identity", identity=True, batch="elementwise")
def identity(attrs):
    def same(x):
        return x

    return same


@kernel("Constant")
def constant(attrs):
    if "value" in attrs:
        value = np.asarray(attrs["value"])
    elif "value_float" in attrs:
        value = np.array(attrs["value_float"], dtype=np.float32)
    elif "value_floats" in attrs:
        value = np.array(attrs["value_floats"], dtype=np.float32)
    elif "value_int" in attrs:
        value = np.array(attrs["value_int"], dtype=np.int64)
    elif "value_ints" in attrs:
        value = np.array(attrs["value_ints"], dtype=np.int64)
    else:
        raise ValueError(f"Constant needs one of value, value_float(s), value_int(s); got "
                         f"{sorted(attrs)}")
    value = value.copy()
    value.flags.writeable = False

    def produce():
        return value

    return produce


@kernel("Cast", out=True, batch="elementwise")
def cast(attrs):
    dtype = np.dtype(attrs["to"])  # the frontend resolved ONNX's type number
    saturate = bool(attrs.get("saturate", 1))
    round_mode = attrs.get("round_mode", "up")
    if _special_cast(dtype):
        return lambda x: cast_to(x, dtype, saturate, round_mode)

    if dtype == object:
        def to_text(x, out=None):
            """To STRING: the shortest text that reads back to the number, element by element,
            keeping each element's own precision."""
            x = np.asarray(x)
            return np.array([_to_text(v) for v in x.ravel()], dtype=object).reshape(x.shape)

        return to_text

    def convert(x, out=None):
        if out is None:
            return np.asarray(x).astype(dtype)
        np.copyto(out, x, casting="unsafe")
        return out

    return declare(convert, casts_to=dtype)


# The float8 types a Cast saturates to (the spec's saturate=1, the default: values past the
# type's largest finite value, infinities included, become that value; NaN stays NaN), and
# float8 e8m0 (powers of two, rounded per round_mode), by their ml_dtypes names.
_SATURATING = frozenset(["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"])
_E8M0 = "float8_e8m0fnu"


def _special_cast(dtype) -> bool:
    """Whether a Cast to `dtype` saturates or rounds as `cast_to` does, not as astype."""
    if dtype.name not in _SATURATING and dtype.name != _E8M0:
        return False  # (numpy's own types, by their names: cyloop.narrow is not imported for them)
    from ...narrow import is_narrow

    return is_narrow(dtype)


def cast_to(x, dtype, saturate: bool, round_mode: str):
    """ONNX Cast of `x` to `dtype`, float8 saturation and e8m0 rounding included."""
    x = np.asarray(x)
    if not _special_cast(dtype):
        return x.astype(dtype)
    if dtype.name == _E8M0:
        from onnx.numpy_helper import to_float8e8m0  # e8m0 only comes from ONNX models

        return to_float8e8m0(x, saturate, round_mode).astype(dtype)
    if saturate and x.dtype.kind in "fV":
        from ...narrow import ml_dtypes

        info = ml_dtypes().finfo(dtype)
        x = np.clip(x.astype(np.float32), np.float32(info.min), np.float32(info.max))
    return x.astype(dtype)


# Element types narrower than their numpy storage (ml_dtypes keeps one in each byte's low bits).
_SUB_BYTE_BITS = {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2}


def _bit_width(dtype):
    return _SUB_BYTE_BITS.get(dtype.name, dtype.itemsize * 8)


@kernel("BitCast", since=26)
def bit_cast(attrs):
    """BitCast-26: the input's bits read as ``to`` (of the same bit width, strings neither way):
    a view of the same buffer, no copy."""
    dtype = np.dtype(attrs["to"])  # (resolved by the frontend)
    if dtype.kind in "OUS":
        raise ValueError("BitCast cannot cast to strings")

    def reinterpret(x):
        if x.dtype.kind in "OUS" or _bit_width(x.dtype) != _bit_width(dtype):
            raise ValueError(f"BitCast needs types of one bit width: {x.dtype} "
                             f"({_bit_width(x.dtype)} bits) to {dtype} ({_bit_width(dtype)} "
                             f"bits)")
        return (x if x.flags.c_contiguous else x.copy()).view(dtype)

    return reinterpret


_INT64 = np.dtype(np.int64)


@kernel("Shape")
def shape(attrs):
    start, end = attrs.get("start", 0), attrs.get("end")
    whole = start == 0 and end is None

    def shape_of(x):  # (an array's own shape: np.shape is a Python wrapper)
        dims = x.shape if isinstance(x, np.ndarray) else np.shape(x)
        # (the dtype as a positional, a dtype already: np.array parses a keyword slowly)
        return np.array(dims if whole else dims[start:end], _INT64)

    return shape_of


@kernel("Reshape", since=1)
def reshape_1(attrs):
    """Reshape-1: the target shape an attribute (0 copies the input's dimension, -1 is
    inferred); consumed_inputs is a legacy hint."""
    new_shape = np.array(attrs.get("shape", []), np.int64)
    reshaped = reshape({})
    return lambda data: reshaped(data, new_shape)


@kernel("Reshape", since=5, batch="reshape")
def reshape(attrs):
    allow_zero = bool(attrs.get("allowzero", 0))

    dims_of = _shapes.remembered(_shapes.int_list)  # (a constant shape read once)

    def reshaped(data, new_shape):
        dims = dims_of(new_shape)
        if not allow_zero and 0 in dims:
            # ONNX: a 0 copies the input's dimension at that position.
            dims = [np.shape(data)[k] if d == 0 else d for k, d in enumerate(dims)]
        return data.reshape(dims) if isinstance(data, np.ndarray) else np.reshape(data, dims)

    return reshaped


@kernel("Squeeze", since=1, batch="axes_attribute")
def squeeze_1(attrs):
    axes = attrs.get("axes")

    def squeezed(data):
        return np.squeeze(data, axis=None if axes is None else _axes_tuple(axes))

    return squeezed


@kernel("Squeeze", since=13, batch="axes")
def squeeze_13(attrs):
    axes_of = _shapes.remembered(_axes_tuple)

    def squeezed(data, axes=None):
        axis = None if axes is None else axes_of(axes)
        return data.squeeze(axis) if isinstance(data, np.ndarray) else np.squeeze(data, axis)

    return squeezed


@kernel("Unsqueeze", since=1, batch="axes_attribute")
def unsqueeze_1(attrs):
    axes = np.array(attrs["axes"], np.int64)
    return lambda data: _shapes.unsqueeze(data, axes)


@kernel("Unsqueeze", since=13, batch="axes")
def unsqueeze_13(attrs):
    return _shapes.unsqueeze_kernel()


@kernel("Concat", since=1, out=True, batch="concat")
def concat(attrs):
    axis = int(attrs.get("axis", 1))

    def joined(*inputs, out=None):
        return np.concatenate(inputs, axis=axis, out=out)

    return joined


@kernel("Gather", since=1, out=True, batch="axis_attribute")
def gather(attrs):
    axis = int(attrs.get("axis", 0))

    def gathered(data, indices, out=None):
        if type(data) is np.ndarray:  # (what np.take calls, without its dispatch: a loop's body
            return data.take(indices, axis, out)  # reads a row an iteration this way)
        return np.take(data, indices, axis=axis, out=out)

    # (The runner takes a row by one index along axis 0 as a view: abilities.py.)
    return declare(gathered, row_by_index=True) if axis == 0 else gathered


@kernel("Transpose", since=1)
def transpose(attrs):
    perm = attrs.get("perm")
    perm = None if perm is None else tuple(perm)

    def transposed(x):  # (the method: np.transpose is a Python wrapper around it)
        return x.transpose(perm) if isinstance(x, np.ndarray) else np.transpose(x, perm)

    return transposed


@kernel("Flatten", since=1)
def flatten(attrs):
    axis = int(attrs.get("axis", 1))

    def flattened(x):
        axis_ = axis + x.ndim if axis < 0 else axis
        return np.reshape(x, (int(np.prod(x.shape[:axis_])), int(np.prod(x.shape[axis_:]))))

    return flattened


@kernel("Expand", since=8, batch="broadcast")
def expand(attrs):
    def expanded(x, shape):
        x = np.asarray(x)
        # A real array, not a read-only broadcast: x copied into it (np.copyto broadcasts).
        result = np.empty(_shapes.broadcast_shape(x.shape, tuple(_shapes.int_list(shape))),
                          x.dtype)
        np.copyto(result, x)
        return result

    return expanded


@kernel("Tile", since=1)
def tile_1(attrs):
    """Tile-1: `tiles` copies of the input along one `axis`, both scalar inputs (int64 as the
    schema's constraint says, though its inputs name the data's float type: either is read)."""

    def tiled(x, tiles, axis):
        axis, reps = int(np.asarray(axis).reshape(-1)[0]), [1] * x.ndim
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(f"Tile: axis {axis} is out of range for rank {x.ndim}")
        reps[axis] = int(np.asarray(tiles).reshape(-1)[0])
        return np.tile(x, reps)

    return tiled


@kernel("Tile", since=6)
def tile(attrs):
    return lambda x, repeats: np.tile(x, tuple(int(r) for r in repeats))


@kernel("Size", since=1)
def size(attrs):
    return lambda x: np.array(np.size(x), dtype=np.int64)


@kernel("ConstantOfShape", since=9)
def constant_of_shape(attrs):
    value = np.asarray(attrs.get("value", np.zeros(1, np.float32))).reshape(-1)[0]
    return lambda shape: np.full(tuple(_shapes.int_list(shape)), value, dtype=value.dtype)


@kernel("Range", since=11)
def range_(attrs):
    def arange(start, limit, delta):
        start, limit, delta = (np.asarray(v).reshape(()) for v in (start, limit, delta))
        count = max(int(np.ceil((limit - start) / delta)), 0)
        return (start + np.arange(count, dtype=start.dtype) * delta).astype(start.dtype)

    return arange


@kernel("CastLike", since=15)
def cast_like(attrs):
    """Cast to the type of `like`, float8 saturation and e8m0 rounding as Cast has them."""
    saturate = bool(attrs.get("saturate", 1))
    round_mode = attrs.get("round_mode", "up")

    def cast_as(x, like):
        return cast_to(x, np.dtype(like.dtype), saturate, round_mode)

    return cast_as



@kernel("Trilu", since=14)
def trilu(attrs):
    keep = np.triu if attrs.get("upper", 1) else np.tril

    def triangle(x, k=None):
        # numpy's triu/tril keep the last two axes' triangle; k shifts the diagonal up (k > 0).
        return keep(x, 0 if k is None else int(np.asarray(k).reshape(())))

    return triangle


@kernel("EyeLike", since=9)
def eye_like(attrs):
    """EyeLike-9 and 22: ones on the `k`-th diagonal of a 2-D tensor of the input's shape, in
    `dtype` (the frontend resolved its number) or the input's type."""
    dtype, k = attrs.get("dtype"), int(attrs.get("k", 0))

    def eye(x):
        if x.ndim != 2:
            raise ValueError(f"EyeLike takes a 2-D input, not one of shape {x.shape}")
        return np.eye(x.shape[0], x.shape[1], k, dtype=x.dtype if dtype is None else dtype)

    return eye


def _space_factory(to_depth):
    """DepthToSpace (1, 11: `mode` DCR or CRD, 13, 28) and SpaceToDepth (1, 13, 28: `mode`) on
    [N, C, H, W], as reshapes and one transpose."""

    def factory(attrs):
        block = int(attrs["blocksize"])
        column_major = attrs.get("mode", "DCR") == "CRD"

        def moved(x):
            n, c, h, w = x.shape
            if to_depth:
                y = x.reshape(n, c, h // block, block, w // block, block)
                y = y.transpose((0, 1, 3, 5, 2, 4) if column_major else (0, 3, 5, 1, 2, 4))
                return y.reshape(n, c * block * block, h // block, w // block)
            depth = c // (block * block)
            if column_major:
                y = x.reshape(n, depth, block, block, h, w).transpose(0, 1, 4, 2, 5, 3)
            else:
                y = x.reshape(n, block, block, depth, h, w).transpose(0, 3, 4, 1, 5, 2)
            return y.reshape(n, depth, h * block, w * block)

        return moved

    return factory


kernel("DepthToSpace", since=1)(_space_factory(to_depth=False))
kernel("SpaceToDepth", since=1)(_space_factory(to_depth=True))
