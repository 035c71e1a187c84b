"""Sliced loops and the slicing rule written element by element: the oracle the slicing, hoisting
and OpenVINO tests check the drivers against."""

import numpy as np
from hypothesis import strategies as st

from cyloop.ir import CarriedInput, ConcatOutput, GraphBuilder, LastOutput, SlicedInput

__all__ = ["oracle_parts", "sliced_cases", "sliced_loop"]


def oracle_parts(x, axis, start, end, stride, part, keep_axis):
    """docs/design.md's TensorIterator slicing rule, element by element. None if a part leaves
    the axis."""
    dim = x.shape[axis]
    s = start + dim if start < 0 else start
    if dim and not 0 <= s < dim:
        return None  # a start outside a non-empty axis is a model error
    e = end + dim if end < 0 else min(end, dim - 1)  # an end at or past the axis: its last index
    parts, i = [], 0
    while True:
        if stride > 0:
            lo = s + i * stride
            hi = lo + part - 1
            if hi > e:
                break
        else:
            hi = s - i * -stride
            lo = hi - part + 1
            if lo < e:
                break
        if lo < 0 or hi >= dim:
            return None
        block = np.take(x, list(range(lo, hi + 1)), axis=axis)
        parts.append(block if keep_axis else np.squeeze(block, axis))
        i += 1
    return parts


def sliced_loop(shape, axis, start, end, stride, part, keep_axis, out_axis, reverse):
    """y_i = 2 x_i + 1 emitted (joined or stacked on out_axis), and acc = acc + x_i carried."""
    part_shape = list(shape)
    if keep_axis:
        part_shape[axis] = part
    else:
        del part_shape[axis]
    body = GraphBuilder("body")
    x_t = body.input("x_t", np.float64, tuple(part_shape))
    acc = body.input("acc", np.float64, tuple(part_shape))
    y = body.node("Add", body.node("Mul", x_t, body.const(2.0)), body.const(1.0), outputs=["y"])
    acc_next = body.node("Add", acc, x_t, outputs=["acc_next"])
    body.output(y, dtype=np.float64, shape=tuple(part_shape))
    body.output(acc_next)
    g = GraphBuilder("sliced")
    x = g.input("x", np.float64, tuple(shape))
    acc0 = g.input("acc0", np.float64, tuple(part_shape))
    g.loop(body.build(),
           inputs=[(x, SlicedInput(0, "x_t", axis, start, end, stride, part, keep_axis)),
                   (acc0, CarriedInput(0, "acc", "acc_next"))],
           outputs=[ConcatOutput("y", out_axis, reverse, new_axis=not keep_axis),
                    LastOutput("acc_next")],
           output_names=["ys", "acc"])
    g.output("ys", "acc")
    return g.build()


@st.composite
def sliced_cases(draw):
    """A random `sliced_loop` case: (shape, axis, start, end, stride, part, keep_axis, out_axis,
    reverse), its start and end anywhere on the axis (some make parts leave it)."""
    rank = draw(st.integers(1, 3))
    shape = draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    axis = draw(st.integers(-rank, rank - 1))
    dim = shape[axis]
    keep_axis = draw(st.booleans())
    part = draw(st.integers(1, min(dim, 3))) if keep_axis else 1
    stride_size = draw(st.integers(1, 3))
    stride = stride_size if draw(st.booleans()) else -stride_size
    start = draw(st.integers(-dim, dim - 1))
    end = draw(st.integers(-dim, dim - 1))
    part_rank = rank if keep_axis else rank - 1
    if keep_axis:
        out_axis = draw(st.integers(-part_rank, part_rank - 1))
    else:
        out_axis = draw(st.integers(-(part_rank + 1), part_rank))
    reverse = draw(st.booleans())
    return shape, axis, start, end, stride, part, keep_axis, out_axis, reverse
