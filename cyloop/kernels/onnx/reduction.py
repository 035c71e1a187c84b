"""Reductions (ReduceSum/Mean/Max/Min/Prod, ReduceSumSquare/L1/L2/LogSum/LogSumExp; axes an
attribute before opset 13 for ReduceSum and 18 for the others, an input after), ArgMax/ArgMin,
CumSum/CumProd, TopK, Hardmax."""

import math

import numpy as np

from .. import _reductions
from .._reductions import axes_reader, in_own_type, over_every_axis, reducing, with_identity
from ..registry import kernel

# Every reducer takes (x, axis, keepdims), positionally too. With noop_with_empty_axes (opset 18)
# and no axes the first five return their input; onnxruntime reduces each element of the
# others by itself (squares it for ReduceSumSquare, takes its log for ReduceLogSum), and so
# does their reducer over no axis: they are marked True.
_REDUCERS = {"ReduceSum": (in_own_type(np.add), 13, False),
             "ReduceMean": (_reductions.mean, 18, False),
             "ReduceMax": (with_identity(np.max, True), 18, False),
             "ReduceMin": (with_identity(np.min, False), 18, False),
             "ReduceProd": (in_own_type(np.multiply), 18, False),
             "ReduceSumSquare": (_reductions.sum_square, 18, True),
             "ReduceL1": (_reductions.sum_abs, 18, True),
             "ReduceL2": (_reductions.l2_norm, 18, True),
             "ReduceLogSum": (_reductions.log_sum, 18, True),
             "ReduceLogSumExp": (_reductions.log_sum_exp, 18, True)}


def _register_reduction(op_type, reducer, input_since, noop_reduces):
    # (Rows of a loop's hoisted part reduce with the axes shifted past the row axis, and every
    # axis of a row as every axis but the row axis: engine/hoist.py.)
    @kernel(op_type, since=1, batch="reduction_attribute")
    def with_attribute(attrs):
        axes, keepdims = attrs.get("axes"), bool(attrs.get("keepdims", 1))
        if axes is None or len(axes) == 0:
            return over_every_axis(reducer, keepdims)
        axes, read, by = tuple(axes), axes_reader(), reducing(reducer, keepdims)
        every = over_every_axis(reducer, keepdims)

        def reduce(x):
            named = read(x.ndim, axes)
            return every(x) if named is None else by(x, named)

        return reduce

    @kernel(op_type, since=input_since, batch="reduction")
    def with_input(attrs):
        keepdims = bool(attrs.get("keepdims", 1))
        noop = bool(attrs.get("noop_with_empty_axes", 0))
        read, by = axes_reader(), reducing(reducer, keepdims)
        every = over_every_axis(reducer, keepdims)

        def unreduced(x):
            return reducer(x, (), True) if noop_reduces else np.array(x, copy=True)

        def reduce(x, axes=None):
            if axes is not None:
                axes = read(x.ndim, axes)
                if axes == ():  # none named: every axis, or none with noop_with_empty_axes
                    return unreduced(x) if noop else every(x)
            elif noop:
                return unreduced(x)
            return every(x) if axes is None else by(x, axes)

        return reduce


for _op_type, (_reducer, _since, _noop_reduces) in _REDUCERS.items():
    _register_reduction(_op_type, _reducer, _since, _noop_reduces)


def _arg(pick):
    def factory(attrs):
        axis, keepdims = int(attrs.get("axis", 0)), bool(attrs.get("keepdims", 1))
        last = bool(attrs.get("select_last_index", 0))

        def arg(x):
            if last:  # the last occurrence: search the flipped axis, then map the index back
                index = x.shape[axis] - 1 - pick(np.flip(x, axis), axis=axis)
            else:
                index = pick(x, axis=axis)
            index = np.asarray(index, dtype=np.int64)
            return np.expand_dims(index, axis) if keepdims else index

        return arg

    return factory


kernel("ArgMax", since=1)(_arg(np.argmax))
kernel("ArgMin", since=1)(_arg(np.argmin))


def _cumulative(accumulate, identity):
    """CumSum / CumProd: `accumulate` along the axis input, optionally exclusive (each position
    leaves itself out, the first gets `identity`) and reversed (from the end)."""

    def factory(attrs):
        exclusive, reverse = bool(attrs.get("exclusive", 0)), bool(attrs.get("reverse", 0))

        def cumulative(x, axis):
            axis = int(np.asarray(axis).reshape(()))
            return _reductions.cumulative(x, axis, accumulate, identity, exclusive, reverse)

        return cumulative

    return factory


kernel("CumSum", since=11)(_cumulative(np.cumsum, 0))
kernel("CumProd", since=26)(_cumulative(np.cumprod, 1))


def _smallest(keys, k: int, axis: int):
    """The indices of the k smallest of `keys` along `axis`, smallest first, equal keys in index
    order (a stable sort's first k). Where k is small against the axis, float32 and float64
    lanes are read once each against a heap of the k best (`accel/_selection.pyx`), other types'
    k-th smallest is found by np.partition, the keys below it and the first of those equal to it
    picked, and only those k sorted (a k-NN model's TopK of a few of thousands of distances for
    each of hundreds of queries would otherwise sort every row whole); keys holding a NaN are
    sorted whole."""
    n = keys.shape[axis]
    if k < 1 or 4 * k >= n or keys.dtype.kind in "fc" and np.isnan(keys).any():
        return np.take(np.argsort(keys, axis=axis, kind="stable"), range(k), axis=axis)
    lanes = np.moveaxis(keys, axis, -1)
    if keys.dtype in _SELECTED:
        # (the native selection loads with the first TopK that runs, not with the reductions:
        # most models reduce without a TopK)
        from ...accel._selection import smallest_columns, smallest_rows

        indices = np.empty(lanes.shape[:-1] + (k,), np.int64)
        across = np.moveaxis(keys, axis, 0)  # (lanes are columns, where that is contiguous)
        if across.flags.c_contiguous and not lanes.flags.c_contiguous:
            smallest_columns(across.reshape(n, -1), k, indices.reshape(-1, k))
        else:
            smallest_rows(np.ascontiguousarray(lanes).reshape(-1, n), k, indices.reshape(-1, k))
        return np.moveaxis(indices, -1, axis)
    kth = np.partition(lanes, k - 1, axis=-1)[..., k - 1:k]
    below, equal = lanes < kth, lanes == kth
    room = k - np.count_nonzero(below, axis=-1, keepdims=True)
    picked = below | equal
    if (np.count_nonzero(equal, axis=-1, keepdims=True) > room).any():  # (ties at the k-th:
        picked = below | equal & (np.cumsum(equal, axis=-1) <= room)  # the first ones only)
    columns = np.broadcast_to(np.arange(n), lanes.shape)[picked].reshape(*lanes.shape[:-1], k)
    order = np.argsort(np.take_along_axis(lanes, columns, -1), axis=-1, kind="stable")
    return np.moveaxis(np.take_along_axis(columns, order, -1), -1, axis)


_SELECTED = (np.dtype(np.float32), np.dtype(np.float64))


@kernel("TopK", since=1, multi=True)
def top_k_1(attrs, n_outputs):
    k = int(attrs["k"])
    top = top_k(attrs, n_outputs)
    return lambda x: top(x, k)


@kernel("TopK", since=10, multi=True)
def top_k(attrs, n_outputs):
    axis = int(attrs.get("axis", -1))
    largest, ordered = bool(attrs.get("largest", 1)), bool(attrs.get("sorted", 1))

    def top(x, k):
        k = int(np.asarray(k).reshape(-1)[0])
        # A stable sort keeps equal values in index order, as onnxruntime returns them.
        keys = x.astype(np.int8) if x.dtype.kind == "b" else x
        if largest:  # order-reversing keys: ~ for integers (no overflow at the minimum)
            keys = ~keys if keys.dtype.kind in "iu" else -keys
        indices = _smallest(keys, k, axis)
        if not ordered:
            indices = np.sort(indices, axis=axis)
        return np.take_along_axis(x, indices, axis=axis), indices.astype(np.int64)

    return top


@kernel("Hardmax", since=1)
def hardmax_1(attrs):
    """Hardmax-1 and 11: the input coerced to 2-D at `axis` (default 1), [a_0 * ... * a_{k-1},
    a_k * ... * a_{n-1}], one 1 in each row at its first maximum."""
    axis = int(attrs.get("axis", 1))
    rows = hardmax({"axis": -1})

    def one_hot_of_max(x):
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(f"Hardmax: axis {axis} is out of range for rank {x.ndim}")
        k = axis + x.ndim if axis < 0 else axis
        coerced = x.reshape(math.prod(x.shape[:k]), math.prod(x.shape[k:]))
        if coerced.shape[1] == 0:
            return np.zeros_like(x)
        return rows(coerced).reshape(x.shape)

    return one_hot_of_max


@kernel("Hardmax", since=13)
def hardmax(attrs):
    axis = int(attrs.get("axis", -1))

    def one_hot_of_max(x):
        # One 1 per lane, at the first maximum (argmax's tie rule, as the spec's).
        result = np.zeros_like(x)
        np.put_along_axis(result, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
        return result

    return one_hot_of_max
