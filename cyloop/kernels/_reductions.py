"""Reduction helpers both op families share."""

import functools

import numpy as np

from ._shapes import is_constant

__all__ = ["axes_reader", "cumulative", "in_own_type", "l2_norm", "log_sum", "log_sum_exp", "mean",
           "over_every_axis", "reducing", "sum_abs", "sum_square", "with_identity"]


def in_own_type(ufunc):
    """A sum or product accumulated in the input's own type (ONNX keeps it; numpy would widen
    small integers, then the result would be cast back: the same modular result, slower), called
    as ``ufunc.reduce`` directly rather than through np.sum's Python wrapper."""
    reduce_ = ufunc.reduce

    def reduce(x, axis=None, keepdims=True):
        return reduce_(x, axis, x.dtype, None, keepdims)  # (array, axis, dtype, out, keepdims)

    reduce.in_own_type = reduce_  # the result has x's type already: no cast needed after it
    return reduce


def over_every_axis(reducer, keepdims):
    """The reduction over every axis, the common case in loop bodies, kept short: an own-type
    ufunc reduce is called directly, a reducer's own form over every axis (its
    ``over_every_axis(keepdims)``, whose result has x's type) is taken as it is; their 0-d
    result may be a numpy scalar, as a ufunc's is."""
    direct = getattr(reducer, "in_own_type", None)
    if direct is not None:
        return lambda x: direct(x, None, x.dtype, None, keepdims)
    own = getattr(reducer, "over_every_axis", None)
    if own is not None:
        return own(keepdims)
    return lambda x: np.asarray(reducer(x, None, keepdims), x.dtype)


def reducing(reducer, keepdims):
    """``by(x, axes)``: the reduction over `axes` (a tuple an `axes_reader` gave, None for every
    axis), in x's type; an own-type ufunc's called directly."""
    every = over_every_axis(reducer, keepdims)
    direct = getattr(reducer, "in_own_type", None)

    def by(x, axes):
        if axes is None:
            return every(x)
        if direct is not None:  # (its result has x's type already: no cast after it)
            return direct(x, axes, x.dtype, None, keepdims)
        return np.asarray(reducer(x, axis=axes, keepdims=keepdims), dtype=x.dtype)

    return by


def axes_reader():
    """A reader of a reduction's axes: ``read(ndim, axes)`` is the axes of an array of rank
    `ndim` that `axes` names, as a tuple (``()`` for none), each once: onnxruntime and OpenVINO
    reduce over an axis named twice (-1 and 1, say) once, where numpy refuses it. An axis out of
    range is kept as given, for numpy to refuse. Where `axes` cannot change (a constant,
    `is_constant`, or a tuple, an attribute) and names every axis, the answer is None (the short
    path loop bodies mostly take), and it is remembered for the next call with `axes` and
    `ndim`: one entry, replaced whole, so threads sharing the kernel never see a half-updated
    one. An axes array that may change is read afresh each call."""
    last = [(None, -1, None)]  # (axes, rank, answer)

    def read(ndim, axes):
        known, known_ndim, chosen = last[0]
        if axes is known and ndim == known_ndim:
            return chosen
        listed = np.asarray(axes).ravel().tolist()
        named = tuple(listed) if len(listed) < 2 else \
            tuple(dict.fromkeys(a + ndim if -ndim <= a < 0 else a for a in listed))
        if type(axes) is not tuple and not is_constant(axes):
            return named
        every = 0 < len(named) == ndim \
            and sorted(a + ndim if a < 0 else a for a in named) == list(range(ndim))
        chosen = None if every else named
        last[0] = (axes, ndim, chosen)
        return chosen

    return read


def with_identity(reducer, pick_low):
    """np.max / np.min (`pick_low`: max) over possibly empty axes: the identity (-inf / +inf, or
    the integer limits) as ONNX 18 specifies and OpenVINO computes, instead of numpy's error."""

    def reduce(x, axis=None, keepdims=True):
        if x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            initial = info.min if pick_low else info.max
        elif x.dtype.kind == "b":
            initial = not pick_low
        else:
            initial = -np.inf if pick_low else np.inf
        return reducer(x, axis=axis, keepdims=keepdims, initial=initial)

    return reduce


def cumulative(x, axis, accumulate, identity, exclusive=False, reverse=False):
    """`accumulate` (np.cumsum / np.cumprod) along `axis` in x's type, `exclusive` (each
    position leaves itself out, the first gets `identity`) and `reverse` (from the end)."""
    if x.shape[axis] == 0:
        return np.array(x, copy=True)
    data = np.flip(x, axis) if reverse else x
    total = accumulate(data, axis=axis, dtype=x.dtype)
    if exclusive:
        first = np.full_like(np.take(total, [0], axis=axis), identity)
        total = np.concatenate(
            [first, np.take(total, range(total.shape[axis] - 1), axis=axis)], axis=axis)
    return np.flip(total, axis) if reverse else total


# The norms and log-sums below take (x, axis, keepdims) as `reducing` calls them and return x's
# type. An axis of () reduces nothing: each element by itself (ONNX's noop_with_empty_axes).
# Integers take onnxruntime's readings: a result computed in floats is truncated toward zero,
# one that is not finite (the log of 0 or of a negative sum) is the type's minimum.
_FLOAT16 = np.dtype(np.float16)


def _wide(x):
    """The type a float result is computed in: float32 for the 16-bit floats (whose squares
    and exponentials overflow where onnxruntime's, computed in float32, do not), float64 for
    integers, else x's own."""
    if x.dtype.kind in "iub":
        return np.dtype(np.float64)
    half = x.dtype == _FLOAT16 or (x.dtype.name == "bfloat16" and _is_narrow(x.dtype))
    return np.dtype(np.float32) if half else x.dtype


def _is_narrow(dtype) -> bool:
    """`narrow.is_narrow`, imported only for a type named as one of ml_dtypes' (a float16 or
    float32 reduction's process need not load it)."""
    from ..narrow import is_narrow

    return is_narrow(dtype)


def _to_own_type(result, dtype):
    """A float result in `dtype`: an integer type truncates it toward zero and takes its
    minimum for what is not finite (the log of 0 or of a negative number)."""
    result = np.asarray(result)
    if dtype.kind in "iu" and result.dtype.kind == "f":
        finite = np.isfinite(result)
        if not finite.all():
            result = np.where(finite, result, 0)
            return np.where(finite, result.astype(dtype), np.iinfo(dtype).min)
    return result.astype(dtype, copy=False)


def mean(x, axis=None, keepdims=True):
    """np.mean's value: for float32 and float64, its sum (np.add.reduce, in the type) divided by
    the count, without np.mean's Python around them (seven times the time of both on a small
    array); other types (float16 sums in float32, integers in float64) through np.mean."""
    if x.dtype.kind != "f" or x.dtype.itemsize < 4:
        return np.mean(x, axis=axis, keepdims=keepdims)
    total = np.add.reduce(x, axis, None, None, keepdims)
    if axis is None:
        count = x.size
    else:
        count = 1
        for a in (axis,) if isinstance(axis, int) else axis:
            count *= x.shape[a]
    return np.true_divide(total, count)


def _mean_over_every_axis(keepdims):
    """`mean` over every axis (`over_every_axis`): its float32 and float64 sum and division
    called directly."""
    add_reduce, divide = np.add.reduce, np.true_divide

    def over_all(x):
        if x.dtype.kind != "f" or x.dtype.itemsize < 4:
            return np.asarray(np.mean(x, axis=None, keepdims=keepdims), x.dtype)
        return divide(add_reduce(x, None, None, None, keepdims), x.size)

    return over_all


mean.over_every_axis = _mean_over_every_axis  # (see `over_every_axis`)


def sum_square(x, axis=None, keepdims=True):
    """The sum of squares in x's type (ONNX ReduceSumSquare). Over the last axis of float32 or
    float64 (skl2onnx's squared distances: rows of a few features), the squares times a column
    of ones, which BLAS sums several times faster than a ufunc reduces a short axis (equal to
    rounding: another order of the sum)."""
    if axis is not None and x.dtype in _BLAS_SUMS and x.ndim >= 1 and x.shape[-1] > 1 \
            and tuple(axis) in ((-1,), (x.ndim - 1,)):
        summed = np.matmul(np.multiply(x, x), _ones(x.shape[-1], x.dtype))
        return summed[..., None] if keepdims else summed
    return np.add.reduce(np.multiply(x, x), axis, x.dtype, None, keepdims)


_BLAS_SUMS = (np.dtype(np.float32), np.dtype(np.float64))


@functools.lru_cache(maxsize=32)
def _ones(n: int, dtype) -> np.ndarray:
    """A read-only column of n ones (one array per size: `sum_square`'s summing vector)."""
    ones = np.ones(n, dtype)
    ones.flags.writeable = False
    return ones


def sum_abs(x, axis=None, keepdims=True):
    """The sum of magnitudes in x's type (ONNX ReduceL1, OpenVINO ReduceL1-4)."""
    return np.add.reduce(np.absolute(x), axis, x.dtype, None, keepdims)


def _sum_abs_over_every_axis(keepdims):
    add_reduce, absolute = np.add.reduce, np.absolute
    return lambda x: add_reduce(absolute(x), None, x.dtype, None, keepdims)


sum_abs.over_every_axis = _sum_abs_over_every_axis  # (see `over_every_axis`)


def l2_norm(x, axis=None, keepdims=True):
    """The square root of the sum of squares (ONNX ReduceL2), computed in `_wide`'s type."""
    wide = x.astype(_wide(x), copy=False)
    return _to_own_type(np.sqrt(np.add.reduce(wide * wide, axis, None, None, keepdims)),
                        x.dtype)


def log_sum(x, axis=None, keepdims=True):
    """The log of the sum, the sum in x's type (ONNX ReduceLogSum)."""
    total = np.add.reduce(x, axis, x.dtype, None, keepdims)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _to_own_type(np.log(total.astype(_wide(x), copy=False)), x.dtype)


def log_sum_exp(x, axis=None, keepdims=True):
    """log(sum(exp(x))) as onnxruntime computes it (ONNX ReduceLogSumExp): the largest element
    m taken out first, ``m + log(sum(exp(x - m)))``, so no exponential overflows; an m that is
    not finite is not taken out (a lane of +inf gives +inf, of -inf only, or of none, -inf).

    On integers onnxruntime accumulates the exponentials in the integer type, where each
    ``exp(x - m) < 1`` is lost: the result is ``m + log(count of m)``, truncated."""
    if x.dtype.kind in "iu":
        low = np.iinfo(x.dtype).min
        top = np.max(x, axis=axis, keepdims=True, initial=low)
        count = np.add.reduce(x == top, axis, np.float64, None, keepdims)
        top = top if keepdims else np.squeeze(top, axis=axis)
        with np.errstate(divide="ignore"):
            return _to_own_type(top + np.log(count), x.dtype)
    wide = x.astype(_wide(x), copy=False)
    top = np.max(wide, axis=axis, keepdims=True, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        total = np.add.reduce(np.exp(wide - top), axis, None, None, keepdims)
        result = np.log(total) + (top if keepdims else np.squeeze(top, axis=axis))
    return result.astype(x.dtype, copy=False)
