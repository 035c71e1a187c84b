"""Indexing and data movement with index tensors: Split, Slice, GatherElements, GatherND,
ScatterElements (and Scatter), ScatterND, NonZero, OneHot, Pad, Einsum, Dropout."""

import numpy as np

from .. import _shapes
from ..registry import kernel


def _ints(values):
    return [int(v) for v in np.asarray(values).ravel()]


def _split(axis, n_outputs):
    """ONNX Split: explicit sizes, or `n_outputs` equal parts (opset 18 allows a smaller last)."""
    parts = _shapes.split_kernel()

    def split(x, sizes=None):
        if sizes is None:
            length = x.shape[axis]
            step = -(-length // n_outputs)
            sizes = [min(step, length - k * step) for k in range(n_outputs)]
        return parts(x, axis, sizes)

    split.measured = parts.measured
    return split


@kernel("Split", since=2, multi=True)
def split_2(attrs, n_outputs):
    split, sizes = _split(int(attrs.get("axis", 0)), n_outputs), attrs.get("split")

    def split_by_attribute(x):
        return split(x, sizes)

    split_by_attribute.measured = split.measured
    return split_by_attribute


@kernel("Split", since=13, multi=True)
def split_13(attrs, n_outputs):
    split = _split(int(attrs.get("axis", 0)), n_outputs)

    def split_by_input(x, sizes=None):
        return split(x, None if sizes is None else _ints(sizes))

    split_by_input.measured = split.measured
    return split_by_input


def _slice(x, starts, ends, axes, steps):
    index = [slice(None)] * x.ndim
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = axis + x.ndim if axis < 0 else axis
        dim = x.shape[axis]
        # ONNX: negative indices count from the end, then clamp to the axis: start to [0, dim]
        # and end to [0, dim] going forward; start to [0, dim-1] and end to [-1, dim-1] going
        # backward, where an end of -1 means "past the first element".
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        index[axis] = slice(start, None if end < 0 else end, step) if dim else slice(0, 0)
    return x[tuple(index)]


@kernel("Slice", since=1)
def slice_1(attrs):
    starts, ends, axes = attrs["starts"], attrs["ends"], attrs.get("axes")
    return lambda x: _slice(x, starts, ends, axes, None)


@kernel("Slice", since=10)
def slice_10(attrs):
    def sliced(x, starts, ends, axes=None, steps=None):
        return _slice(x, _ints(starts), _ints(ends), None if axes is None else _ints(axes),
                      None if steps is None else _ints(steps))

    return sliced


@kernel("GatherElements", since=11)
def gather_elements(attrs):
    axis = int(attrs.get("axis", 0))

    def gathered(data, indices):
        indices = np.where(indices < 0, indices + data.shape[axis], indices)
        return np.take_along_axis(data, indices, axis=axis)

    return gathered


@kernel("GatherND", since=11)
def gather_nd(attrs):
    batch_dims = int(attrs.get("batch_dims", 0))

    def gathered(data, indices):
        batch = data.shape[:batch_dims]
        depth = indices.shape[-1]
        if indices.size == 0 or data.size == 0:
            shape = indices.shape[:-1] + data.shape[batch_dims + depth:]
            return np.zeros(shape, data.dtype)
        flat_data = data.reshape((-1, *data.shape[batch_dims:]))
        flat_idx = indices.reshape((-1, *indices.shape[batch_dims:]))
        depth = indices.shape[-1]
        parts = [d[tuple(np.moveaxis(i, -1, 0))] if depth else d[None]
                 for d, i in zip(flat_data, flat_idx)]
        result = np.stack(parts) if parts else np.empty((0,), data.dtype)
        return result.reshape(batch + result.shape[1:])

    return gathered


_REDUCTIONS = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum,
               "min": np.minimum}


@kernel("Scatter", since=9)  # deprecated at 11 for ScatterElements, which it is
@kernel("ScatterElements", since=11)
def scatter_elements(attrs):
    axis = int(attrs.get("axis", 0))
    reduce = _REDUCTIONS[attrs.get("reduction", "none")]

    def scattered(data, indices, updates):
        result = np.array(data, copy=True)
        indices = np.where(indices < 0, indices + data.shape[axis], indices)
        index = list(np.indices(indices.shape, sparse=True))
        index[axis] = indices
        if reduce is None:
            result[tuple(index)] = updates
        else:
            reduce.at(result, tuple(index), updates)
        return result

    return scattered


@kernel("ScatterND", since=11)
def scatter_nd(attrs):
    reduce = _REDUCTIONS[attrs.get("reduction", "none")]

    def scattered(data, indices, updates):
        result = np.array(data, copy=True)
        index = tuple(np.moveaxis(indices, -1, 0))
        if reduce is None:
            result[index] = updates
        else:
            reduce.at(result, index, updates)
        return result

    return scattered


@kernel("NonZero", since=9)
def non_zero(attrs):
    def nonzero(x):
        if np.ndim(x) == 0:  # numpy refuses 0-d; ONNX gives shape (1, 1 or 0)
            return np.zeros((1, int(bool(x))), np.int64)
        return np.array(np.nonzero(x), dtype=np.int64).reshape(np.ndim(x), -1)

    return nonzero


@kernel("OneHot", since=9)
def one_hot(attrs):
    axis = int(attrs.get("axis", -1))

    def encoded(indices, depth, values):
        depth = int(np.asarray(depth).reshape(-1)[0])
        indices = np.asarray(indices).astype(np.int64)
        indices = np.where(indices < 0, indices + depth, indices)
        hot = np.arange(depth) == indices[..., None]
        hot = np.moveaxis(hot, -1, axis if axis >= 0 else hot.ndim + axis)
        return np.where(hot, values[1], values[0]).astype(values.dtype)

    return encoded


def _pad(x, pads, mode, value, axes=None):
    rank = x.ndim
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    width = [(0, 0)] * rank
    half = len(pads) // 2
    for k, axis in enumerate(axes):
        width[axis] = (pads[k], pads[k + half])
    # Negative pads crop.
    crop = tuple(slice(-lo if lo < 0 else 0, x.shape[a] + hi if hi < 0 else None)
                 for a, (lo, hi) in enumerate(width))
    x = x[crop]
    width = [(max(lo, 0), max(hi, 0)) for lo, hi in width]
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=value)
    if mode == "reflect" and any(max(lo, hi) > x.shape[a] - 1 for a, (lo, hi) in enumerate(width)
                                 if lo or hi):
        raise ValueError(f"reflect padding {width} needs pads smaller than each padded axis "
                         f"(shape {x.shape})")
    return np.pad(x, width, mode={"edge": "edge", "reflect": "reflect", "wrap": "wrap"}[mode])


@kernel("Pad", since=2)
def pad_2(attrs):
    pads, mode, value = attrs["pads"], attrs.get("mode", "constant"), attrs.get("value", 0.0)
    return lambda x: _pad(x, list(pads), mode, x.dtype.type(value))


@kernel("Pad", since=11)
def pad_11(attrs):
    mode = attrs.get("mode", "constant")

    def padded(x, pads, constant_value=None, axes=None):
        value = x.dtype.type(0) if constant_value is None else \
            np.asarray(constant_value).reshape(-1)[0]
        return _pad(x, _ints(pads), mode, value, None if axes is None else _ints(axes))

    return padded


@kernel("Einsum", since=12)
def einsum(attrs):
    equation = attrs["equation"].replace(" ", "")

    def contract(*operands):
        narrow = [x.dtype for x in operands if x.dtype.kind == "V"]
        if narrow:  # ml_dtypes' bfloat16 / float8: numpy's einsum has no loop for them
            wide = [x.astype(np.float32) if x.dtype.kind == "V" else x for x in operands]
            return np.einsum(equation, *wide).astype(narrow[0])
        return np.einsum(equation, *operands)

    return contract


def _dropout(mask_is_bool):
    """Dropout: the identity (and a mask of ones) at inference, as for a ratio of 0 in training
    mode; in training mode with a ratio r > 0, each element is kept with probability 1 - r (the
    node's `seed`, if any, seeds numpy's generator) and scaled by 1 / (1 - r)."""
    def factory(attrs, n_outputs):
        seed = attrs.get("seed")
        default_ratio = float(attrs.get("ratio", 0.5))  # opsets before 12: an attribute

        def dropout(x, ratio=None, training_mode=None):
            x = np.asarray(x)
            ratio = default_ratio if ratio is None else float(np.asarray(ratio).reshape(()))
            training = training_mode is not None and bool(np.asarray(training_mode))
            if not training or ratio == 0:
                mask = np.ones(x.shape, dtype=np.bool_ if mask_is_bool else x.dtype)
                return (x, mask)[:n_outputs]
            if not 0 <= ratio < 1:
                raise ValueError(f"Dropout ratio must be in [0, 1), got {ratio}")
            keep = np.random.RandomState(seed).uniform(0, 1.0, x.shape) >= ratio
            scale = np.asarray(1 / (1 - ratio), dtype=x.dtype)
            y = (x * keep * scale).astype(x.dtype)
            return (y, keep if mask_is_bool else keep.astype(x.dtype))[:n_outputs]

        return dropout

    return factory


# Before opset 10 the mask has the input's type; from 10 on it is bool.
kernel("Dropout", since=1, multi=True)(_dropout(False))
kernel("Dropout", since=10, multi=True)(_dropout(True))
