"""Reduction helpers both op families share."""

import numpy as np

from ._shapes import is_constant

__all__ = ["axes_reader", "cumulative", "in_own_type", "over_every_axis", "reducing",
           "with_identity"]


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
    ufunc reduce is called directly, and its 0-d result may be a numpy scalar, as a ufunc's is."""
    direct = getattr(reducer, "in_own_type", None)
    if direct is not None:
        return lambda x: direct(x, None, x.dtype, None, keepdims)
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
