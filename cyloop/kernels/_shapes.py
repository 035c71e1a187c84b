"""Shape helpers both op families share."""

import numpy as np

from ..abilities import declare
from ..accel.aligned import owns_memory
from ..accel.measured import Measured
from ..tuning import SPLIT_ROUNDS

__all__ = ["flat_int_list", "int_list", "is_constant", "remembered", "split", "split_kernel",
           "unsqueeze", "unsqueeze_kernel"]


def int_list(values) -> list:
    """A 1-D integer tensor (a shape, axes, starts) as Python ints: `tolist` converts them in C,
    where int() of each element costs more than the reshape or slice they are for on a loop
    body's small tensors. Anything else is read as int() reads it, errors included."""
    if type(values) is not np.ndarray:  # (an array, the common case, is taken as it is)
        values = np.asarray(values)
    if values.ndim == 1 and values.dtype.kind in "iu":
        return values.tolist()
    return [int(v) for v in values]


def broadcast_shape(have: tuple, want: tuple) -> tuple:
    """np.broadcast_shapes of two shapes, in a few Python steps (its own take microseconds, as
    much as expanding a loop's small state); numpy's error where they do not broadcast."""
    if have == want or not have:  # (a scalar broadcasts to any shape)
        return want
    n = max(len(have), len(want))
    have, want = (1,) * (n - len(have)) + have, (1,) * (n - len(want)) + want
    shape = []
    for a, b in zip(have, want):
        if a == b or b == 1:
            shape.append(a)
        elif a == 1:
            shape.append(b)
        else:
            return np.broadcast_shapes(have, want)  # (raises numpy's own error)
    return tuple(shape)


def is_constant(value) -> bool:
    """Whether `value` is an array nothing writes while a model holds it: read-only and holding
    its own memory, as the engine keeps an initializer (engine/compile.py `_constant`). (A
    read-only view may see its base written; a loop's hoisted rows are such views.)"""
    return type(value) is np.ndarray and not value.flags.writeable and owns_memory(value)


def remembered(convert):
    """`convert` (of a small tensor: axes, a shape, starts) remembering its answer for the last
    constant it read (`is_constant`, or a tuple): a kernel's constant operand is converted once,
    not at every call. One entry, replaced whole, so threads sharing the kernel never see a
    half-updated one; other values are converted afresh each call."""
    last = [(None, None)]

    def read(values):
        known, answer = last[0]
        if values is known:
            return answer
        answer = convert(values)
        if type(values) is tuple or is_constant(values):
            last[0] = (values, answer)
        return answer

    return read


def flat_int_list(values) -> list:
    """`int_list` of an integer tensor of any shape (a scalar too), its values in order."""
    if type(values) is not np.ndarray or values.ndim != 1:
        values = np.asarray(values).ravel()
    return int_list(values)


def _new_axes(axes, ndim: int) -> tuple[list, list | None]:
    """`unsqueeze`'s axes as a list, and where they go in the result of an input of `ndim` axes,
    in increasing order (None for axes numpy must judge: repeated, out of range, none)."""
    axes = axes.tolist() if isinstance(axes, np.ndarray) else np.asarray(axes).tolist()
    if not isinstance(axes, list):
        axes = [axes]  # a 0-d array
    rank = ndim + len(axes)
    positions = sorted([a + rank if a < 0 else a for a in axes])
    if (not positions or len(set(positions)) != len(positions) or positions[0] < 0
            or positions[-1] >= rank):
        return axes, None
    return axes, positions


def _inserted(x, positions: list):
    """`x` reshaped with an axis of one at each of `positions` (increasing)."""
    array = isinstance(x, np.ndarray)
    shape = list(x.shape) if array else list(np.shape(x))
    for a in positions:
        shape.insert(a, 1)
    return x.reshape(shape) if array else np.reshape(x, shape)


def unsqueeze(x, axes):
    """``np.expand_dims(x, axes)`` as one reshape: axes index the result (negative from its end).

    expand_dims normalizes its axes in Python, which costs several times the reshape itself on
    the small tensors loop bodies pass around; bad axes still get numpy's own error."""
    axes, positions = _new_axes(axes, np.ndim(x) if type(x) is not np.ndarray else x.ndim)
    if positions is None:
        return np.expand_dims(x, tuple(axes))
    return _inserted(x, positions)


def unsqueeze_kernel():
    """`unsqueeze` remembering where the last constant axes (`is_constant`) go in the result of
    an array of the rank it last saw: a node's constant axes are read once, not at every call.
    One entry, replaced whole (threads sharing the kernel never see half of one)."""
    last = [(None, -1, None)]  # (axes, the input's rank, positions)

    def unsqueezed(x, axes):
        known, rank, positions = last[0]
        if axes is known and type(x) is np.ndarray and x.ndim == rank:
            return _inserted(x, positions)
        ndim = np.ndim(x) if type(x) is not np.ndarray else x.ndim
        listed, positions = _new_axes(axes, ndim)
        if positions is None:
            return np.expand_dims(x, tuple(listed))
        if is_constant(axes):
            last[0] = (axes, ndim, positions)
        return _inserted(x, positions)

    return unsqueezed


def split(x, axis: int, sizes) -> tuple:
    """Parts of `x` along `axis` of the given sizes, as views by basic slicing (np.split's Python
    overhead is many times the work on a loop body's small tensors). As with np.split at the
    running sums of `sizes`, the last part is whatever remains."""
    index = [slice(None)] * x.ndim
    index_axis = axis + x.ndim if axis < 0 else axis
    parts, start = [], 0
    for k, size in enumerate(sizes):
        index[index_axis] = slice(start, start + size if k < len(sizes) - 1 else None)
        parts.append(x[tuple(index)])
        start += size
    return tuple(parts)


def _contiguous_copies(x, axis, sizes):
    return tuple(np.ascontiguousarray(part) for part in split(x, axis, sizes))


def split_kernel():
    """``parts(x, axis, sizes)``: `split`, its parts either views or contiguous copies, a measured
    choice (its `measured` ability). Views of a split along an inner axis are strided, and every
    consumer pays for that at each read; copies pay once. Which costs less shows downstream of
    the split, so the candidates are timed by period (one call to the next: in a loop body, an
    iteration). Parts that are contiguous views anyway (a C-contiguous `x` split along its first
    axis of more than one element) are views, untimed."""
    measured = Measured({"views": split, "copies": _contiguous_copies}, rounds=SPLIT_ROUNDS,
                        key=lambda x, axis, sizes: (x.shape, x.strides, x.dtype.str, axis),
                        label=lambda key: f"{np.dtype(key[2]).name}{list(key[0])} along axis "
                                          f"{key[3]}",
                        timing="period")

    def parts(x, axis, sizes):
        leading = x.shape[:axis + x.ndim if axis < 0 else axis]
        if x.flags.c_contiguous and all(d == 1 for d in leading):
            return split(x, axis, sizes)
        return measured(x, axis, sizes)

    return declare(parts, measured=measured)
