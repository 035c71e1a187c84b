"""Indexing and data movement both op families share: gathers and scatters by index tensors,
one-hot encoding and padding. Each takes plain arguments; the kernels read their attributes."""

import numpy as np

__all__ = ["REDUCTIONS", "gather_elements", "gather_nd", "one_hot", "pad", "scatter_elements",
           "scatter_nd"]

# The reductions a scatter can combine an update with: (ufunc, ufunc on booleans). On booleans a
# sum is or, a product and, a difference xor (OpenVINO's rule; ONNX's too, as numpy's ufuncs).
REDUCTIONS = {
    "sum": (np.add, np.logical_or), "sub": (np.subtract, np.logical_xor),
    "prod": (np.multiply, np.logical_and), "min": (np.minimum, np.logical_and),
    "max": (np.maximum, np.logical_or),
}


def gather_elements(data, indices, axis):
    """out[i, j, k] = data[i, indices[i, j, k], k] (for axis 1); negative indices count back."""
    return np.take_along_axis(data, np.asarray(indices), axis=axis)  # (numpy counts back)


def gather_nd(data, indices, batch_dims=0):
    """Slices of `data` at the index tuples along the last axis of `indices`, the first
    `batch_dims` axes of both walked together: shape ``indices.shape[:-1] +
    data.shape[batch_dims + indices.shape[-1]:]``."""
    batch = data.shape[:batch_dims]
    depth = indices.shape[-1]
    if indices.size == 0 or data.size == 0:
        return np.zeros(indices.shape[:-1] + data.shape[batch_dims + depth:], data.dtype)
    flat_data = data.reshape((-1, *data.shape[batch_dims:]))
    flat_idx = indices.reshape((-1, *indices.shape[batch_dims:]))
    parts = [d[tuple(np.moveaxis(i, -1, 0))] if depth else d[None]
             for d, i in zip(flat_data, flat_idx)]
    result = np.stack(parts) if parts else np.empty((0,), data.dtype)
    return result.reshape(batch + result.shape[1:])


def _identity(reduction, dtype):
    """The value a reduction starts from where the data's own value is not used."""
    if reduction in ("sum", "sub", "mean"):
        return dtype.type(0)
    if reduction == "prod":
        return dtype.type(1)
    if dtype.kind == "b":
        return np.True_ if reduction == "min" else np.False_
    # The type's largest / lowest finite value, as OpenVINO's reference implementation has it.
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    return dtype.type(info.max if reduction == "min" else info.min)


def _scatter(data, index, updates, reduction, use_init, out=None):
    """A copy of `data` with `updates` combined in at `index` (a numpy index tuple): overwritten
    (reduction None: where two updates meet one place, the last wins), or reduced (see
    REDUCTIONS, and "mean": the mean of the updates and, with `use_init`, the data's value;
    floored on integers). Without `use_init` a reduction starts from its identity. `out`: the
    buffer of `data`'s shape and type the result is made in (`data` itself: updated in place,
    nothing copied)."""
    if out is None:
        result = np.array(data, copy=True)
    else:
        if out is not data:
            np.copyto(out, data)
        result = out
    if reduction is None:
        result[index] = updates
        return result
    updates = np.asarray(updates, dtype=result.dtype)
    if not use_init:
        result[index] = _identity(reduction, result.dtype)
    if reduction == "mean":
        counts = np.zeros(result.shape, np.int64)
        np.add.at(counts, index, 1)
        np.add.at(result, index, updates)
        touched = counts > 0
        divisor = counts[touched] + (1 if use_init else 0)
        if result.dtype.kind in "iu":
            result[touched] = np.floor_divide(result[touched], divisor)
        else:
            result[touched] = result[touched] / divisor
        return result
    ufunc, logical = REDUCTIONS[reduction]
    (logical if result.dtype.kind == "b" else ufunc).at(result, index, updates)
    return result


def scatter_elements(data, indices, updates, axis, reduction=None, use_init=True, out=None):
    """A copy of `data` with ``out[i, indices[i, j, k], k] = updates[i, j, k]`` (for axis 1),
    or combined per `reduction` (`_scatter`, which says `out`); negative indices count back."""
    indices = np.asarray(indices)  # (numpy counts a negative index back, once)
    index = list(np.indices(indices.shape, sparse=True))
    index[axis] = indices
    return _scatter(data, tuple(index), updates, reduction, use_init, out)


def scatter_nd(data, indices, updates, reduction=None, out=None):
    """A copy of `data` with the slices at the index tuples along the last axis of `indices`
    set to (or combined per `reduction` with) `updates` (`_scatter`, which says `out`); negative
    indices count back, as numpy's own do (one past the range is an IndexError: it would count
    back twice if made positive first)."""
    indices = np.asarray(indices)
    depth = indices.shape[-1]
    updates = np.asarray(updates).reshape(indices.shape[:-1] + data.shape[depth:])
    # (no moveaxis: its checks cost a small step)
    index = tuple(indices[..., k] for k in range(depth))
    return _scatter(data, index, updates, reduction, True, out)


def one_hot(indices, depth, on, off, axis, normalize_negative=True):
    """`on` where the new axis (at `axis` of the result) equals the index, `off` elsewhere;
    indices outside [0, depth) give only `off` (`normalize_negative`: those in [-depth, 0) count
    back from depth first)."""
    indices = np.asarray(indices).astype(np.int64)
    if normalize_negative:
        indices = np.where(indices < 0, indices + depth, indices)
    hot = np.arange(depth) == indices[..., None]
    hot = np.moveaxis(hot, -1, axis if axis >= 0 else hot.ndim + axis)
    return np.where(hot, on, off)


_NUMPY_MODES = {"edge": "edge", "reflect": "reflect", "symmetric": "symmetric", "wrap": "wrap"}


def pad(x, begins, ends, mode="constant", value=0, crop_first=True):
    """`x` with begins[a] / ends[a] elements added before / after axis a (negative: that many
    removed), the new ones `value` (mode constant), copies of the edge (edge), a mirror without
    (reflect) or with (symmetric) the edge, or the other end (wrap). `crop_first`: remove before
    adding, so that mirrors reflect the cropped array (ONNX); else after (OpenVINO)."""
    widths = list(zip(begins, ends))
    crop = tuple(slice(-lo if lo < 0 else 0, None if hi >= 0 else hi) for lo, hi in widths)
    if crop_first:
        x = x[crop]
    positive = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    limit = {"reflect": 1, "symmetric": 0}.get(mode)
    if limit is not None and any(max(w) > x.shape[a] - limit
                                 for a, w in enumerate(positive) if any(w)):
        raise ValueError(f"{mode} padding {positive} needs pads of at most the padded axis' "
                         f"length{' - 1' if limit else ''} (shape {list(x.shape)})")
    if mode == "constant":
        x = np.pad(x, positive, mode="constant", constant_values=value)
    elif mode in _NUMPY_MODES:
        x = np.pad(x, positive, mode=_NUMPY_MODES[mode])
    else:
        raise ValueError(f"unknown pad mode {mode!r}")
    return x if crop_first else x[crop]
