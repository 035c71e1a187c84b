"""Linear quantization: QuantizeLinear and DequantizeLinear (per tensor, per axis from opset 13,
blocked from 21), MatMulInteger and QLinearMatMul, as onnxruntime computes them.

A scale and a zero point apply to x per tensor (a scalar, or one element), per axis (a 1-D
tensor along `axis`) or per block (x's rank, `axis` cut in blocks of `block_size`: element i
along it takes entry ``i // block_size``)."""

import numpy as np

from ...narrow import is_narrow, ml_dtypes
from ..registry import kernel
from .tensor import cast_to

_UINT8 = np.dtype(np.uint8)
_FLOAT32 = np.dtype(np.float32)
# The 8-bit floats QuantizeLinear casts to (saturating unless saturate=0) and
# DequantizeLinear reads, by their ml_dtypes names; the other ml_dtypes floats have 4 and 6 bits
# and no infinities.
_FLOAT8 = frozenset(["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"])


def _is_float8(dtype) -> bool:
    return is_narrow(dtype) and dtype.name in _FLOAT8


def _integer_range(dtype):
    """(lowest, highest) of an integer type, numpy's or ml_dtypes' (int4, uint2, ...); None
    for a float type."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    if is_narrow(dtype):
        try:
            info = ml_dtypes().iinfo(dtype)
        except ValueError:
            return None
        return int(info.min), int(info.max)
    return None


_FLOATS = frozenset([np.dtype(np.float16), _FLOAT32, np.dtype(np.float64)])


def _is_float(dtype) -> bool:
    """Whether `dtype` is float16, float32, float64 or bfloat16."""
    return dtype in _FLOATS or (is_narrow(dtype) and dtype.name == "bfloat16")


def _saturated(rounded, bounds, dtype):
    """Rounded floats, clipped to `bounds`, in integer type `dtype`; NaN becomes the lowest
    value, as onnxruntime's clamp makes it (fmax takes the number over a NaN)."""
    np.fmax(rounded, bounds[0], out=rounded)
    np.minimum(rounded, bounds[1], out=rounded)
    return rounded.astype(dtype)


def _compute_type(*dtypes):
    """The float type a quantizer divides or multiplies in before opset 23: float32, or float64
    when an operand is float64 (16-bit floats widen to float32, as onnxruntime computes them)."""
    return np.dtype(np.float64) if any(d == np.float64 for d in dtypes) else _FLOAT32


def _along(param, shape, axis, block_size):
    """`param` (a scale or zero point) shaped to broadcast against an x of `shape`."""
    param = np.asarray(param)
    if param.size == 1 and param.ndim <= 1 and not block_size:
        return param.reshape(())
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape):
        raise ValueError(f"axis {axis} is out of range for an input of rank {len(shape)}")
    if not block_size:
        if param.ndim != 1 or param.shape[0] != shape[axis]:
            raise ValueError(f"a per-axis scale or zero point must be 1-D of {shape[axis]} "
                             f"(input dimension {axis}), not of shape {param.shape}")
        return param.reshape((-1,) + (1,) * (len(shape) - axis - 1))
    blocks = -(-shape[axis] // block_size)
    wanted = shape[:axis] + (blocks,) + shape[axis + 1:]
    if param.shape != wanted:
        raise ValueError(f"a blocked scale or zero point for an input of shape {shape} with "
                         f"block_size {block_size} along axis {axis} must have shape "
                         f"{wanted}, not {param.shape}")
    return np.take(param, np.arange(shape[axis]) // block_size, axis=axis)


def _quantize_factory(attrs, with_axis=True, scale_precision=False):
    axis = int(attrs.get("axis", 1)) if with_axis else 0
    saturate = bool(attrs.get("saturate", 1))
    block_size = int(attrs.get("block_size", 0))
    declared = attrs.get("output_dtype")
    declared = None if declared is None else np.dtype(declared)
    precision = attrs.get("precision")
    precision = None if precision is None else np.dtype(precision)

    def quantize(x, y_scale, y_zero_point=None):
        dtype = declared if y_zero_point is None else np.dtype(y_zero_point.dtype)
        if declared is not None and dtype != declared:
            raise ValueError(f"output_dtype {declared} differs from the zero point's type "
                             f"{dtype}")
        dtype = dtype or _UINT8
        if not with_axis and np.size(y_scale) != 1:
            raise ValueError(f"y_scale must be a scalar before opset 13, not of shape "
                             f"{np.shape(y_scale)}")
        scale = _along(y_scale, x.shape, axis, block_size)
        if precision is not None:
            wide = precision
        elif scale_precision and _is_float(scale.dtype):  # (not an int32 or e8m0 scale)
            wide = np.dtype(scale.dtype)
        else:
            wide = _compute_type(x.dtype, scale.dtype)
        scaled = np.divide(x.astype(wide, copy=False), scale.astype(wide, copy=False),
                           dtype=wide)
        if scaled.dtype.itemsize < 4:  # rounded, offset and clipped in float32, exactly
            scaled = scaled.astype(np.float32)
        bounds = _integer_range(dtype)
        if bounds is None:  # a float type: a cast, rounding to nearest even (and saturating)
            if not _is_float8(dtype) and y_zero_point is not None:
                scaled += _along(y_zero_point, x.shape, axis, block_size).astype(wide)
            return cast_to(scaled, dtype, saturate, "up")
        rounded = np.rint(scaled, out=scaled)  # (half to even)
        if y_zero_point is not None:
            rounded += _along(y_zero_point, x.shape, axis, block_size).astype(wide)
        return _saturated(rounded, bounds, dtype)

    return quantize


@kernel("QuantizeLinear", since=10)
def quantize_linear_10(attrs):
    """QuantizeLinear-10: ``saturate(round(x / y_scale) + y_zero_point)`` per tensor, round
    half to even; into the zero point's type (uint8 without one)."""
    return _quantize_factory(attrs, with_axis=False)


@kernel("QuantizeLinear", since=13)
def quantize_linear_13(attrs):
    """QuantizeLinear-13 to 21: per axis (13), 16-bit floats and float8 outputs, `saturate`
    (19), blocks, `output_dtype` and 16- and 4-bit integers (21); the division in float32."""
    return _quantize_factory(attrs)


@kernel("QuantizeLinear", since=23)
def quantize_linear(attrs):
    """QuantizeLinear-23 to 25: the division in the scale's type, or `precision`'s (a
    float16 scale divides in float16); 2-bit integers (25)."""
    return _quantize_factory(attrs, scale_precision=True)


def _dequantize_factory(attrs, with_axis=True):
    axis = int(attrs.get("axis", 1)) if with_axis else 0
    block_size = int(attrs.get("block_size", 0))
    declared = attrs.get("output_dtype")
    declared = None if declared is None else np.dtype(declared)

    def dequantize(x, x_scale, x_zero_point=None):
        if not with_axis and np.size(x_scale) != 1:
            raise ValueError(f"x_scale must be a scalar before opset 13, not of shape "
                             f"{np.shape(x_scale)}")
        scale = _along(x_scale, x.shape, axis, block_size)
        dtype = declared or np.dtype(scale.dtype)
        wide = _compute_type(scale.dtype, dtype)
        if _integer_range(x.dtype) is not None:  # differences of integers, exact in int64
            difference = x.astype(np.int64)
            if x_zero_point is not None:
                difference -= _along(x_zero_point, x.shape, axis, block_size).astype(np.int64)
            values = difference.astype(wide)
        else:  # float8 (whose zero point must be 0)
            values = x.astype(wide)
        values *= scale.astype(wide, copy=False)
        with np.errstate(over="ignore"):  # (past a float16's range: infinity, as onnxruntime)
            return values.astype(dtype, copy=False)

    return dequantize


@kernel("DequantizeLinear", since=10)
def dequantize_linear_10(attrs):
    """DequantizeLinear-10: ``(x - x_zero_point) * x_scale`` per tensor, in float32."""
    return _dequantize_factory(attrs, with_axis=False)


@kernel("DequantizeLinear", since=13)
def dequantize_linear(attrs):
    """DequantizeLinear-13 to 25: per axis (13), float8 inputs and 16-bit float scales, whose
    type the result takes (19), blocks and 16- and 4-bit integers (21), `output_dtype` (23).
    Computed in float32 (float64 for a float64 scale), then cast."""
    return _dequantize_factory(attrs)


@kernel("DynamicQuantizeLinear", since=11, multi=True)
def dynamic_quantize_linear(attrs, n_outputs):
    """DynamicQuantizeLinear-11: x to uint8 by the scale and zero point that map x's range
    (widened to hold 0) onto [0, 255], as onnxruntime computes them: a scale of 1 where that
    range is empty (x all zeros, or no x), where the schema's function body would divide 0 by 0
    (and onnx.reference takes 1/255)."""

    def quantize(x):
        low = min(float(np.min(x, initial=0.0)), 0.0)
        high = max(float(np.max(x, initial=0.0)), 0.0)
        scale = np.float32(1.0) if high == low else \
            (np.float32(high) - np.float32(low)) / np.float32(255)
        zero = np.rint(np.clip(np.float32(0) - np.float32(low) / scale, 0, 255))
        zero_point = np.array(zero, np.uint8)
        scaled = np.divide(x, scale, dtype=np.float32)
        y = np.rint(scaled, out=scaled)
        y += zero
        y = _saturated(y, (0, 255), np.uint8)
        return (y, np.array(scale, np.float32), zero_point)[:n_outputs]

    return quantize


def _centred(values, zero_point, per_row=False):
    """``values - zero_point`` in float64 (exact for 8- and 16-bit integers), a 1-D zero point
    taken per row (A's, ``per_row``) or per column (B's: its last axis)."""
    centred = np.asarray(values).astype(np.float64)
    if zero_point is None:
        return centred
    zero_point = np.asarray(zero_point).astype(np.float64)
    if per_row and zero_point.ndim == 1 and zero_point.size != 1:
        zero_point = zero_point.reshape(-1, 1)
    elif zero_point.size == 1:
        zero_point = zero_point.reshape(())
    centred -= zero_point
    return centred


def _integer_product(a, b, a_zero_point, b_zero_point):
    """The int32 product of the centred matrices, computed by a float64 BLAS product: every
    partial sum is an integer below 2**53 (a product of two 8-bit differences is below 2**17),
    so it is exact, as onnxruntime's int32 accumulation is (short of its int32 overflow, past
    32768 terms of extreme values)."""
    return np.matmul(_centred(a, a_zero_point, per_row=True), _centred(b, b_zero_point))


@kernel("MatMulInteger", since=10)
def matmul_integer(attrs):
    """MatMulInteger-10: ``(A - a_zero_point) @ (B - b_zero_point)`` in int32, numpy's
    matmul broadcasting; a zero point per tensor, or per row of A and per column of B."""

    def product(a, b, a_zero_point=None, b_zero_point=None):
        return _integer_product(a, b, a_zero_point, b_zero_point).astype(np.int32)

    return product


@kernel("QLinearMatMul", since=10)
def qlinear_matmul(attrs):
    """QLinearMatMul-10 and 21: the integer product of the centred a and b, requantized as
    onnxruntime does: ``saturate(round(acc * (a_scale * b_scale / y_scale)) + y_zero_point)``,
    the multiplier and the product in float32, rounding half to even; b's scale and zero point
    per tensor or per column."""

    def product(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
        dtype = np.dtype(y_zero_point.dtype)
        bounds = _integer_range(dtype)
        if bounds is None:
            raise ValueError(f"QLinearMatMul to {dtype} is not supported")
        multiplier = np.asarray(a_scale, np.float32) * np.asarray(b_scale, np.float32) \
            / np.asarray(y_scale, np.float32)
        if multiplier.size == 1:
            multiplier = multiplier.reshape(())
        accumulated = _integer_product(a, b, a_zero_point, b_zero_point).astype(np.float32)
        accumulated *= multiplier
        rounded = np.rint(accumulated, out=accumulated)
        rounded += np.asarray(y_zero_point).astype(np.float32).reshape(
            () if np.size(y_zero_point) == 1 else -1)
        return _saturated(rounded, bounds, dtype)

    return product
