"""Shape and data movement OpenVINO layers."""

import numpy as np

from .. import _shapes
from .._ir_attrs import DOMAIN, as_bool, as_dtype, as_int, as_ints
from ..registry import abilities_of, declare, kernel


def _ints(values):
    return _shapes.flat_int_list(values)


@kernel("Identity", domain=DOMAIN, since=1, identity=True, batch="elementwise")
def identity(attrs):
    return lambda x: x


@kernel("Concat", domain=DOMAIN, since=1, out=True, batch="concat")
def concat(attrs):
    axis = as_int(attrs, "axis", 0)
    return lambda *inputs, out=None: np.concatenate(inputs, axis=axis, out=out)


@kernel("Split", domain=DOMAIN, since=1, multi=True)
def split(attrs, n_outputs):
    """`num_splits` equal parts (the axis must divide evenly, as np.split has it)."""
    parts, n = _shapes.split_kernel(), int(attrs.get("num_splits", n_outputs))

    def equal_parts(x, axis):
        axis = int(np.asarray(axis).reshape(()))
        length = x.shape[axis]
        if n <= 0 or length % n:
            raise ValueError(f"Split: an axis of {length} does not split into {n} equal parts")
        return parts(x, axis, [length // n] * n)

    return declare(equal_parts, abilities_of(parts))


@kernel("VariadicSplit", domain=DOMAIN, since=1, multi=True)
def variadic_split(attrs, n_outputs):
    """Parts of the given lengths, which must make the axis; one length of -1 takes what the
    others leave."""
    parts = _shapes.split_kernel()

    def by_lengths(x, axis, lengths):
        axis = int(np.asarray(axis).reshape(()))
        given = lengths = _ints(lengths)
        length = x.shape[axis]
        if lengths.count(-1) == 1:
            lengths = list(lengths)
            lengths[lengths.index(-1)] = length - (sum(lengths) + 1)
        if sum(lengths) != length or any(size < 0 for size in lengths):
            raise ValueError(f"VariadicSplit: lengths {given} do not make axis {axis}'s "
                             f"{length}")
        return parts(x, axis, lengths)

    return declare(by_lengths, abilities_of(parts))


@kernel("Reshape", domain=DOMAIN, since=1, batch="reshape")
def reshape(attrs):
    special_zero = as_bool(attrs, "special_zero")

    def reshaped(x, shape):
        dims = _ints(shape)
        if special_zero:
            dims = [x.shape[k] if d == 0 else d for k, d in enumerate(dims)]
        return np.reshape(x, dims)

    return reshaped


@kernel("Squeeze", domain=DOMAIN, since=1, batch="axes")
def squeeze(attrs):
    def squeezed(x, axes=None):
        if axes is None:
            return np.squeeze(x)
        axes = tuple(a % x.ndim for a in _ints(axes) if x.shape[a] == 1) if x.ndim else ()
        return np.squeeze(x, axis=axes)

    return squeezed


@kernel("Unsqueeze", domain=DOMAIN, since=1, batch="axes")
def unsqueeze(attrs):
    return _shapes.unsqueeze_kernel()


@kernel("Transpose", domain=DOMAIN, since=1)
def transpose(attrs):
    def transposed(x, order):
        order = _ints(order)
        return np.transpose(x, order if order else None)

    return transposed


@kernel("ShapeOf", domain=DOMAIN, since=1)
def shape_of_1(attrs):
    return lambda x: np.array(np.shape(x), dtype=np.int64)


@kernel("ShapeOf", domain=DOMAIN, since=3)
def shape_of_3(attrs):
    dtype = as_dtype(attrs, "output_type", np.int64)
    return lambda x: np.array(np.shape(x), dtype=dtype)


def _gather(batch_dims_attr):
    def factory(attrs):
        batch_dims = as_int(attrs, "batch_dims", 0) if batch_dims_attr else 0

        def gathered(data, indices, axis):
            axis = int(np.asarray(axis).reshape(()))
            axis = axis + data.ndim if axis < 0 else axis
            indices = np.asarray(indices)
            batch = batch_dims + indices.ndim if batch_dims < 0 else batch_dims
            if batch == 0:
                return _taken(data, indices, axis)
            # batch_dims: the leading dims of data and indices are walked together.
            lead = data.shape[:batch]
            flat_data = data.reshape((-1, *data.shape[batch:]))
            flat_idx = indices.reshape((-1, *indices.shape[batch:]))
            parts = [_taken(d, i, axis - batch) for d, i in zip(flat_data, flat_idx)]
            return np.stack(parts).reshape(lead + parts[0].shape) if parts else \
                np.empty(lead + indices.shape[batch:] + data.shape[axis + 1:], data.dtype)

        return gathered

    return factory


def _taken(data, indices, axis):
    """``np.take`` along `axis`, an index outside [-n, n) giving zeros, as OpenVINO's CPU plugin
    gives them (numpy counts a negative index back once; one made positive first counted back
    twice, -n-1 reading row n-1)."""
    try:
        return np.take(data, indices, axis=axis)
    except IndexError:
        n = data.shape[axis]
        inside = (indices >= -n) & (indices < n)
        shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
        if n == 0:
            return np.zeros(shape, data.dtype)
        taken = np.take(data, np.where(inside, indices, 0), axis=axis)
        inside = inside.reshape((1,) * axis + indices.shape + (1,) * (data.ndim - axis - 1))
        return np.where(inside, taken, np.zeros((), data.dtype))


def _batches_gather(attrs, batched):
    """Rows of data gathered by static indices along a static axis, without batch dims."""
    return attrs.get("batch_dims") in (None, "", 0, "0")


for _since in (1, 7, 8):
    kernel("Gather", domain=DOMAIN, since=_since, batch="axis",
           batch_if=_batches_gather)(_gather(_since > 1))


def _batches_broadcast(attrs, batched):
    """Rows broadcast to a target shape as each row is (not `explicit`'s axes mapping)."""
    return str(attrs.get("mode", "numpy")).lower() in ("numpy", "bidirectional")


@kernel("Broadcast", domain=DOMAIN, since=1, batch="broadcast", batch_if=_batches_broadcast)
def broadcast(attrs):
    mode = attrs.get("mode", "numpy").lower()

    def broadcasted(x, target, axes_mapping=None):
        target = tuple(_ints(target))
        if mode == "bidirectional":
            target = np.broadcast_shapes(np.shape(x), target)
        elif mode == "explicit":
            shape = [1] * len(target)
            for k, axis in enumerate(_ints(axes_mapping)):
                shape[axis] = x.shape[k]
            x = np.reshape(x, shape)
        return np.array(np.broadcast_to(x, target))

    return broadcasted


@kernel("Tile", domain=DOMAIN, since=1)
def tile(attrs):
    def tiled(x, repeats):
        repeats = _ints(repeats)
        if len(repeats) < x.ndim:
            repeats = [1] * (x.ndim - len(repeats)) + repeats
        return np.tile(x, repeats)

    return tiled


@kernel("Range", domain=DOMAIN, since=1)
def range_(attrs):
    dtype = as_dtype(attrs, "output_type")  # Range-4; Range-1 infers it

    def arange(start, stop, step):
        start, stop, step = (np.asarray(v).reshape(()) for v in (start, stop, step))
        out_dtype = dtype or np.result_type(start, stop, step)
        count = max(int(np.ceil((stop - start) / step)), 0)
        return (start + np.arange(count) * step).astype(out_dtype)

    return arange


@kernel("NonZero", domain=DOMAIN, since=3)
def non_zero(attrs):
    dtype = as_dtype(attrs, "output_type", np.int64)

    def nonzero(x):
        if np.ndim(x) == 0:
            return np.zeros((1, int(bool(x))), dtype)
        return np.array(np.nonzero(x), dtype=dtype).reshape(np.ndim(x), -1)

    return nonzero


@kernel("ScatterUpdate", domain=DOMAIN, since=3)
def scatter_update(attrs):
    def scattered(data, indices, updates, axis):
        axis = int(np.asarray(axis).reshape(()))
        axis = axis + data.ndim if axis < 0 else axis
        result = np.array(data, copy=True)
        indices = np.asarray(indices)
        flat = indices.reshape(-1)
        moved = np.moveaxis(updates.reshape(data.shape[:axis] + (flat.size,)
                                            + data.shape[axis + 1:]), axis, 0)
        target = np.moveaxis(result, axis, 0)
        for k, i in enumerate(flat):
            target[i] = moved[k]
        return result

    return scattered


def _strided_slice_index(x, begin, end, stride, attrs):
    begin_mask = as_ints(attrs, "begin_mask", [])
    end_mask = as_ints(attrs, "end_mask", [])
    new_axis = as_ints(attrs, "new_axis_mask", [])
    shrink = as_ints(attrs, "shrink_axis_mask", [])
    ellipsis = as_ints(attrs, "ellipsis_mask", [])

    def flag(mask, k):
        return k < len(mask) and mask[k] == 1

    index = []
    for k in range(len(begin)):
        if flag(ellipsis, k):
            index.append(Ellipsis)
        elif flag(new_axis, k):
            index.append(None)
        elif flag(shrink, k):
            index.append(begin[k])
        else:
            index.append(slice(None if flag(begin_mask, k) else begin[k],
                               None if flag(end_mask, k) else end[k], stride[k]))
    return tuple(index)


@kernel("StridedSlice", domain=DOMAIN, since=1)
def strided_slice(attrs):
    def sliced(x, begin, end, stride=None):
        begin, end = _ints(begin), _ints(end)
        stride = [1] * len(begin) if stride is None else _ints(stride)
        return np.array(x[_strided_slice_index(x, begin, end, stride, attrs)])

    return sliced


@kernel("Slice", domain=DOMAIN, since=8)
def slice_8(attrs):
    def sliced(x, start, stop, step, axes=None):
        start, stop, step = _ints(start), _ints(stop), _ints(step)
        axes = list(range(len(start))) if axes is None else _ints(axes)
        index = [slice(None)] * x.ndim
        for s, e, st, a in zip(start, stop, step, axes):
            index[a % x.ndim] = slice(s, e, st)
        return np.array(x[tuple(index)])

    return sliced
