"""The Cython runner's conversions: a Cast step given an array or a numpy scalar of a number type
is converted by the runner itself (engine/_core.pyx `_cast`), not by its kernel. It must make
what the kernel makes, ``np.asarray(x).astype(to)``, or, given a destination, what
``np.copyto(out, x, casting="unsafe")`` writes there: the pure-Python driver, which always calls
the kernel, is the oracle."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cyloop
from cyloop.ir import CarriedInput, ConcatOutput, GraphBuilder, InvariantInput, LastOutput
from cyloop.kernels.registry import kernel

from ..support.drivers import run_both

NUMBERS = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float16, np.float32,
           np.float64]


def _loop(src, to, shape, n=3):
    """x_next = x + k (or x | k, booleans) carried, k invariant: Cast(x_next) to `to` emitted
    each iteration (written into its row: a destination) and Cast(x) kept last (a fresh array).
    With 0-d operands, x_next is the scalar path's numpy scalar."""
    body = GraphBuilder("body")
    body.input("x", src, shape)
    body.input("k", src, shape)
    body.node("Or" if src is np.bool_ else "Add", "x", "k", outputs=["x_next"])
    body.node("Cast", "x_next", outputs=["emitted"], to=np.dtype(to))
    body.node("Cast", "x", outputs=["kept"], to=np.dtype(to))
    outputs = [ConcatOutput("emitted", new_axis=True), LastOutput("kept")]
    body.output("x_next", "emitted", "kept")
    g = GraphBuilder("outer")
    g.input("x0", src, shape)
    g.input("k0", src, shape)
    g.loop(body.build(), inputs=[("x0", CarriedInput(0, "x", "x_next")),
                                 ("k0", InvariantInput(0, "k"))],
           outputs=[LastOutput("x_next")] + outputs, trip_count=n, name="loop",
           output_names=["last", "emitted", "kept"])
    g.output("emitted", "kept")
    return g.build()


@settings(max_examples=80, deadline=None)
@given(data=st.data(), src=st.sampled_from(NUMBERS), to=st.sampled_from(NUMBERS),
       shape=st.sampled_from([(), (3,), (2, 3)]), transposed=st.booleans())
def test_conversions_agree_with_the_kernel(data, src, to, shape, transposed):
    values = hnp.arrays(src, shape, elements=hnp.from_dtype(np.dtype(src), allow_nan=True,
                                                             allow_infinity=True))
    x0, k0 = data.draw(values), data.draw(values)
    if transposed:  # (an operand in Fortran order: astype keeps its order)
        x0 = np.array(x0, order="F")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow / invalid, in both drivers
        out = run_both(_loop(src, to, shape), {"x0": x0, "k0": k0})
    assert out["emitted"].dtype == np.dtype(to) and out["kept"].dtype == np.dtype(to)


# -- rows taken by an index ----------------------------------------------------------------------
# A Gather on axis 0 by one integer is a row of its data, which the Cython runner hands over as a
# read-only view (engine/_core.pyx `_row_at`) where the kernel copies it.

_ROWS: list = []  # what the "RowSeen" kernel below was given, call by call


@kernel("RowSeen", domain="test.cyloop")
def _row_seen(attrs):
    """Its operand, recorded, plus one."""
    def seen(x):
        _ROWS.append(x)
        return x + 1

    return seen


def _gather_loop(index_dtype, offset):
    """Each iteration i gathers row (i + offset) of `data` (an invariant), its index of
    `index_dtype`, as a 0-d array (the iteration number cast) or a numpy scalar (the scalar
    path's sum); the row is emitted plus one, through a kernel that records it."""
    body = GraphBuilder("body", opsets={"test.cyloop": 1})
    i = body.input("i", np.int64, ())
    body.input("cond", np.bool_, ())
    data = body.input("data", np.float32)
    index = body.node("Add", body.node("Cast", i, to=np.dtype(index_dtype)),
                      body.const(np.array(offset, index_dtype)))
    row = body.node("Gather", data, index, axis=0)
    body.output(body.node("Identity", "cond", outputs=["cond_out"]),
                body.node("RowSeen", row, domain="test.cyloop", outputs=["y"]))
    g = GraphBuilder("g", opsets={"test.cyloop": 1})
    g.input("n", np.int64, ())
    g.input("d", np.float32)
    g.loop(body.build(), inputs=[("d", InvariantInput(0, "data"))], outputs=[ConcatOutput("y")],
           trip_count="n", iteration_param="i", cond_param="cond", cond_result="cond_out",
           output_names=["ys"])
    g.output("ys")
    return g.build()


@pytest.mark.parametrize("index_dtype, offset", [(np.int64, 0), (np.int64, 2), (np.int64, -5),
                                                 (np.int32, -5), (np.uint8, 2)])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_a_row_by_an_index_is_a_view_with_the_kernels_values(rng, index_dtype, offset, layout):
    data = rng.standard_normal((5, 3, 4)).astype(np.float32)
    data = {"C": data, "F": np.asfortranarray(data), "strided": data[:, ::2, ::-1]}[layout]
    n = 3 if offset >= 0 else 5
    graph = _gather_loop(index_dtype, offset)
    _ROWS.clear()
    out = run_both(graph, {"n": np.array(n), "d": data}, hoist=False)
    np.testing.assert_array_equal(out["ys"], data[np.arange(n) + offset] + 1)
    fast = _ROWS[:n]  # (the Cython driver's calls: run_both runs it first)
    assert all(not row.flags.writeable and row.base is not None for row in fast)


def test_an_index_out_of_range_fails_as_the_kernel_does(rng):
    graph = _gather_loop(np.int64, 3)
    data = rng.standard_normal((5, 2)).astype(np.float32)
    for n in (2, 3):  # (rows 3, 4; then 3, 4, 5: out of range)
        outcomes = []
        for driver in ("cython", "python"):
            try:
                outcomes.append(cyloop.Model(graph, driver=driver, hoist=False).run(
                    {"n": np.array(n), "d": data})["ys"])
            except cyloop.CyloopError as e:
                outcomes.append(f"{type(e).__name__}: {e}")
        if n == 2:
            np.testing.assert_array_equal(outcomes[0], outcomes[1])
        else:
            assert isinstance(outcomes[0], str) and outcomes[0] == outcomes[1]
