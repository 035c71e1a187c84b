"""Indexing and data movement with index tensors: Split, Slice, GatherElements, GatherND,
ScatterElements (and Scatter), ScatterND, TensorScatter, NonZero, Unique, OneHot, Pad, Einsum,
Dropout."""

from itertools import repeat

import numpy as np

from .. import _shapes
from ..registry import abilities_of, declare, kernel

# The maths of gathers, scatters, OneHot, Pad (`.._indexing`) and Einsum (`.._math`) is imported
# by their factories, the first time a model has one: a model whose indexing is its Slices and
# Splits, as a loop's body's mostly is, does not pay for importing it.


def _ints(values):
    return _shapes.flat_int_list(values)


def _split(axis, n_outputs, equal=False):
    """ONNX Split: explicit sizes, one per output, none negative, that add up to the axis's
    length (the specification's rule, which onnxruntime enforces too), or `n_outputs` equal
    parts (opset 18 allows a smaller last; `equal`: the parts must be equal, as opsets 1 and 2
    say and onnxruntime enforces)."""
    parts = _shapes.split_kernel()

    def split(x, sizes=None):
        length = x.shape[axis]
        if sizes is None and equal and length % n_outputs:
            raise ValueError(f"Split: axis {axis} of length {length} does not split into "
                             f"{n_outputs} equal parts")
        if sizes is None:
            step = -(-length // n_outputs)
            sizes = [min(step, length - k * step) for k in range(n_outputs)]
        elif len(sizes) != n_outputs or min(sizes) < 0 or sum(sizes) != length:
            raise ValueError(f"Split: sizes {list(sizes)} do not split axis {axis} of length "
                             f"{length} into {n_outputs} parts")
        return parts(x, axis, sizes)

    return declare(split, abilities_of(parts))


@kernel("Split", since=1, multi=True)
def split_1(attrs, n_outputs):
    """Split-1: the sizes an optional second input (of the data's float type) or the `split`
    attribute, else equal parts."""
    split, sizes = _split(int(attrs.get("axis", 0)), n_outputs, equal=True), attrs.get("split")

    def split_by_input_or_attribute(x, split_input=None):
        if split_input is None:
            return split(x, None if sizes is None else list(sizes))
        return split(x, [int(v) for v in np.asarray(split_input).reshape(-1)])

    return declare(split_by_input_or_attribute, abilities_of(split))


@kernel("Split", since=2, multi=True, batch="split")
def split_2(attrs, n_outputs):
    split, sizes = _split(int(attrs.get("axis", 0)), n_outputs, equal=True), attrs.get("split")

    def split_by_attribute(x):
        return split(x, sizes)

    return declare(split_by_attribute, abilities_of(split))


@kernel("Split", since=13, multi=True, batch="split")
def split_13(attrs, n_outputs):
    split = _split(int(attrs.get("axis", 0)), n_outputs)

    def split_by_input(x, sizes=None):
        return split(x, None if sizes is None else _ints(sizes))

    return declare(split_by_input, abilities_of(split))


def _slice_index(x, starts, ends, axes, steps) -> tuple:
    """The index tuple ONNX Slice's operands (as int lists; axes, steps None for their default)
    make of `x`."""
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, range(len(starts)) if axes is None else axes,
                                      repeat(1) if steps is None else steps):
        if step > 0:  # (Python's slice counts negative indices from the end and clamps to
            index[axis] = slice(start, end, step)  # [0, dim], as ONNX does going forward)
            continue
        # Going backward ONNX clamps start to [0, dim-1] (Python's slice would make a start
        # before the first element an empty slice) and end to [-1, dim-1], where an end of -1
        # means "past the first element" (to Python, the last). A step of 0 is Python's error.
        dim = x.shape[axis]
        start = min(max(start + dim if start < 0 else start, 0), dim - 1)
        end = min(end + dim if end < 0 else end, dim - 1)
        index[axis] = slice(start, None if end < 0 else end, step) if dim else slice(0, 0)
    return tuple(index)


def _slice(x, starts, ends, axes, steps):
    return x[_slice_index(x, starts, ends, axes, steps)]


@kernel("Slice", since=1)
def slice_1(attrs):
    starts, ends, axes = attrs["starts"], attrs["ends"], attrs.get("axes")
    return lambda x: _slice(x, starts, ends, axes, None)


@kernel("Slice", since=10)
def slice_10(attrs):
    """Slice-10 on: where its starts, ends, axes and steps are constants (`is_constant`, as an
    exporter's gate slices mostly are) and every step is positive, the index they make depends
    on x's rank alone: it is made once and kept for the next call with the same operands. Other
    operands (a dynamic slice's computed starts) are read at each call."""
    kept = [None]  # (starts, ends, axes, steps, x's rank, the index), replaced whole

    def sliced(x, starts, ends, axes=None, steps=None):
        last = kept[0]
        if last is not None and last[0] is starts and last[1] is ends and last[2] is axes \
                and last[3] is steps and last[4] == x.ndim:
            return x[last[5]]
        read = [None if v is None else _ints(v) for v in (starts, ends, axes, steps)]
        index = _slice_index(x, *read)
        if all(v is None or _shapes.is_constant(v) for v in (starts, ends, axes, steps)) \
                and (read[3] is None or min(read[3], default=1) > 0):
            kept[0] = (starts, ends, axes, steps, x.ndim, index)
        return x[index]

    return sliced


@kernel("GatherElements", since=11)
def gather_elements(attrs):
    from .. import _indexing

    axis = int(attrs.get("axis", 0))
    return lambda data, indices: _indexing.gather_elements(data, indices, axis)


@kernel("GatherND", since=11)
def gather_nd(attrs):
    from .. import _indexing

    batch_dims = int(attrs.get("batch_dims", 0))
    return lambda data, indices: _indexing.gather_nd(data, indices, batch_dims)


# ONNX's reduction names -> the shared ones.
_REDUCTIONS = {"none": None, "add": "sum", "mul": "prod", "max": "max", "min": "min"}


@kernel("Scatter", since=9, out=True)  # deprecated at 11 for ScatterElements, which it is
@kernel("ScatterElements", since=11, out=True)
def scatter_elements(attrs):
    """Made in ``out=`` where given; in data's own buffer where the engine hands it that
    (its `updates_first` ability: a loop updating a carried buffer copies none a step)."""
    from .. import _indexing

    axis = int(attrs.get("axis", 0))
    reduction = _REDUCTIONS[attrs.get("reduction", "none")]

    def scattered(data, indices, updates, out=None):
        return _indexing.scatter_elements(data, indices, updates, axis, reduction, out=out)

    return declare(scattered, updates_first=True)


@kernel("ScatterND", since=11, out=True)
def scatter_nd(attrs):
    """As ScatterElements' (jax2onnx writes ``buf.at[k].set(y)`` as one)."""
    from .. import _indexing

    reduction = _REDUCTIONS[attrs.get("reduction", "none")]

    def scattered(data, indices, updates, out=None):
        return _indexing.scatter_nd(data, indices, updates, reduction, out=out)

    return declare(scattered, updates_first=True)


@kernel("TensorScatter", since=24, out=True)
def tensor_scatter(attrs):
    """TensorScatter-24: a copy of ``past_cache`` with ``update`` written along ``axis`` (not
    the batch axis 0) from each batch element's ``write_indices`` entry on (default 0); mode
    circular wraps the positions around the axis, linear must fit them in it. One scatter of
    every position at once; in the cache's own buffer where the engine hands it that
    (``updates_first``: a loop appending to a carried key/value cache copies none a step)."""
    from .. import _indexing

    axis = int(attrs.get("axis", -2))
    mode = attrs.get("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ValueError(f"TensorScatter mode must be linear or circular, got {mode!r}")

    def scattered(past_cache, update, write_indices=None, out=None):
        rank = past_cache.ndim
        if not -rank <= axis < rank or axis % rank == 0:
            raise ValueError(f"TensorScatter: axis {axis} must name an axis after the batch "
                             f"axis of a rank-{rank} cache")
        at = axis % rank
        if update.ndim != rank or update.dtype != past_cache.dtype or any(
                u != c for k, (u, c) in enumerate(zip(update.shape, past_cache.shape))
                if k != at) or update.shape[at] > past_cache.shape[at]:
            raise ValueError(f"TensorScatter: update {list(update.shape)} ({update.dtype}) does "
                             f"not fit cache {list(past_cache.shape)} ({past_cache.dtype}) "
                             f"along axis {at}")
        batch, length, capacity = past_cache.shape[0], update.shape[at], past_cache.shape[at]
        starts = np.zeros(batch, np.int64) if write_indices is None \
            else np.asarray(write_indices).astype(np.int64).reshape(-1)
        if starts.shape != (batch,):
            raise ValueError(f"TensorScatter: write_indices needs one index per batch element "
                             f"({batch}), got shape {list(np.shape(write_indices))}")
        positions = starts[:, None] + np.arange(length)  # [batch, length]
        if mode == "circular":
            positions %= capacity
        elif positions.size and (positions.min() < 0 or positions.max() >= capacity):
            raise ValueError(f"TensorScatter: writing {length} positions from write_indices "
                             f"{starts.tolist()} overruns the cache's {capacity}")
        index = positions.reshape((batch,) + (1,) * (at - 1) + (length,)
                                  + (1,) * (rank - at - 1))
        return _indexing.scatter_elements(past_cache, np.broadcast_to(index, update.shape),
                                          update, at, out=out)

    return declare(scattered, updates_first=True)


@kernel("NonZero", since=9)
def non_zero(attrs):
    def nonzero(x):
        if np.ndim(x) == 0:  # numpy refuses 0-d; ONNX gives shape (1, 1 or 0)
            return np.zeros((1, int(bool(x))), np.int64)
        found = np.nonzero(x)
        if len(found) == 1:  # (1-D: its one index array as the row, not stacked by np.array)
            return found[0].astype(np.int64, copy=False).reshape(1, -1)
        return np.array(found, dtype=np.int64).reshape(np.ndim(x), -1)

    return nonzero


@kernel("Unique", since=11, multi=True)
def unique(attrs, n_outputs):
    """Unique-11 and 28: X -> (Y, indices, inverse_indices, counts): the distinct elements of X
    flattened (or, with ``axis``, its distinct slices along it), each one's first index, each
    element's (slice's) index in Y, and how often each occurs. ``sorted`` (the default): Y
    ascends (slices lexicographically), else it keeps the order of first occurrence.

    Slices compare by the ranks of their elements among all of X's values (one np.unique of
    X's elements, then one of the rows of ranks), which works for every element type alike,
    strings included, and makes -0.0 and 0.0 one value as onnxruntime does."""
    axis = attrs.get("axis")
    ordered = bool(int(attrs.get("sorted", 1)))

    def found(x):
        if axis is None:
            keys = x.reshape(-1)
            first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True,
                                               return_counts=True)[1:]
        else:
            if not -x.ndim <= int(axis) < x.ndim:
                raise ValueError(f"Unique: axis {axis} is out of range for rank {x.ndim}")
            moved = np.moveaxis(x, int(axis), 0)
            rows = moved.reshape(moved.shape[0], int(np.prod(moved.shape[1:])))
            if rows.size:
                ranks = np.unique(rows.reshape(-1), return_inverse=True)[1].reshape(rows.shape)
            else:  # (slices of no element are all equal)
                ranks = np.zeros((rows.shape[0], 1), np.intp)
            first, inverse, counts = np.unique(ranks, axis=0, return_index=True,
                                               return_inverse=True, return_counts=True)[1:]
        inverse = inverse.reshape(-1)
        if not ordered:  # renumbered in order of first occurrence
            order = np.argsort(first, kind="stable")
            first, counts = first[order], counts[order]
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            inverse = rank[inverse]
        values = x.reshape(-1)[first] if axis is None else np.take(x, first, axis=int(axis))
        return (values, first.astype(np.int64), inverse.astype(np.int64),
                counts.astype(np.int64))[:n_outputs]

    return found


@kernel("OneHot", since=9)
def one_hot(attrs):
    from .. import _indexing

    axis = int(attrs.get("axis", -1))

    def encoded(indices, depth, values):
        depth = int(np.asarray(depth).reshape(-1)[0])
        return _indexing.one_hot(indices, depth, values[1], values[0], axis).astype(values.dtype)

    return encoded


def _pad(pad, x, pads, mode, value, axes=None):
    """ONNX's spelling: ``pads`` all begins then all ends, for `axes` (default: every axis);
    `pad`: `_indexing.pad`."""
    rank = x.ndim
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    begins, ends = [0] * rank, [0] * rank
    half = len(pads) // 2
    for k, axis in enumerate(axes):
        begins[axis], ends[axis] = pads[k], pads[k + half]
    return pad(x, begins, ends, mode, value, crop_first=True)


@kernel("Pad", since=1)
def pad_1(attrs):
    """Pad-1: Pad-2 with the pads named `paddings` (all begins, then all ends, as the attribute
    says; the schema's example pairs them per axis, which neither onnx.reference nor
    onnxruntime's Pad-2 does)."""
    return pad_2({**attrs, "pads": attrs["paddings"]})


@kernel("Pad", since=2)
def pad_2(attrs):
    from .._indexing import pad

    pads, mode, value = attrs["pads"], attrs.get("mode", "constant"), attrs.get("value", 0.0)
    return lambda x: _pad(pad, x, list(pads), mode, x.dtype.type(value))


@kernel("Pad", since=11)
def pad_11(attrs):
    from .._indexing import pad

    mode = attrs.get("mode", "constant")

    def padded(x, pads, constant_value=None, axes=None):
        value = x.dtype.type(0) if constant_value is None else \
            np.asarray(constant_value).reshape(-1)[0]
        return _pad(pad, x, _ints(pads), mode, value, None if axes is None else _ints(axes))

    return padded


@kernel("Einsum", since=12)
def einsum(attrs):
    from .. import _math

    equation = attrs["equation"].replace(" ", "")
    return lambda *operands: _math.einsum(equation, *operands)


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


@kernel("Compress", since=9)
def compress(attrs):
    """Compress-9 and 11: the slices along `axis` (of the flattened input without one) whose
    condition is true; a condition shorter than the axis leaves out the slices past it, the
    entries of a longer one past the axis are not read (onnxruntime's reading)."""
    axis = attrs.get("axis")
    axis = None if axis is None else int(axis)

    def compressed(x, condition):
        length = x.size if axis is None else x.shape[axis]
        condition = np.asarray(condition, np.bool_).reshape(-1)[:length]
        return np.compress(condition, x, axis=axis)

    return compressed


@kernel("ReverseSequence", since=10)
def reverse_sequence(attrs):
    """ReverseSequence-10: batch element b's first ``sequence_lens[b]`` steps along
    `time_axis` in reverse order, the steps after them as they are."""
    batch_axis, time_axis = int(attrs.get("batch_axis", 1)), int(attrs.get("time_axis", 0))

    def reversed_(x, sequence_lens):
        lengths = np.asarray(sequence_lens, np.int64).reshape(-1)
        steps = x.shape[time_axis]
        if lengths.shape[0] != x.shape[batch_axis] or (lengths < 0).any() \
                or (lengths > steps).any():
            raise ValueError(f"ReverseSequence: sequence_lens {lengths.tolist()} do not fit "
                             f"{x.shape[batch_axis]} sequences of {steps} steps")
        # For each (batch, step): the step read, ``length - 1 - t`` within the length.
        t = np.arange(steps)
        source = np.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)  # [batch, time]
        shape = [1] * x.ndim
        shape[batch_axis], shape[time_axis] = source.shape[0], steps
        if batch_axis > time_axis:
            source = source.T
        return np.take_along_axis(x, source.reshape(shape), axis=time_axis)

    return reversed_
