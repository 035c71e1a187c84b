"""Regressions found in review: overflow in slicing arithmetic, pools reused while a container
holds them, constants handed out, outputs sized past a Loop-5 slice, oversized growth buffers."""

import numpy as np
import pytest

import cyloop
from cyloop.engine import _core
from cyloop.ir import CarriedInput, ConcatOutput, GraphBuilder, LastOutput, SlicedInput
from cyloop.ops.registry import kernel

from .conftest import run_both


@kernel("EmptyList", domain="test.cyloop")
def _empty_list(attrs):
    return list


@kernel("Append", domain="test.cyloop")
def _append(attrs):
    return lambda items, x: [*items, x]


def _neg_loop(desc, x_dtype=np.int8, size=5):
    body = GraphBuilder("b")
    body.input("x", x_dtype, None)
    body.output(body.node("Neg", "x", outputs=["y"]))
    g = GraphBuilder()
    g.input("X", x_dtype, (size,))
    g.loop(body.build(), [("X", desc)], [ConcatOutput("y", new_axis=False)], output_names=["ys"])
    g.output("ys")
    return g.build()


@pytest.mark.parametrize("end,stride", [(2**63 - 1, 2**63 - 1), (2**63 - 1, 1), (-2**62, -2**62)],
                         ids=["huge-end-huge-stride", "huge-end", "huge-negative"])
def test_huge_slice_parameters_neither_crash_nor_disagree(end, stride):
    graph = _neg_loop(SlicedInput(0, "x", end=end, stride=stride, keep_axis=True))
    x = np.arange(5, dtype=np.int8)
    outcomes = []
    for driver in ("cython", "python"):
        try:
            outcomes.append(cyloop.Model(graph, driver=driver).run({"X": x})["ys"].tolist())
        except cyloop.ModelError as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]


def test_negative_stride_defaults_to_the_whole_axis_reversed():
    desc = SlicedInput(0, "x", stride=-1, keep_axis=True)
    assert (desc.start, desc.end) == (-1, 0)
    x = np.arange(5, dtype=np.int8)
    out = run_both(_neg_loop(desc), {"X": x})
    np.testing.assert_array_equal(out["ys"], -x[::-1])


def test_pool_buffer_held_by_a_carried_list_is_not_reused():
    body = GraphBuilder("body", opsets={"test.cyloop": 1})
    body.input("h", np.float64, (2,))
    body.input("s", None, None)
    h_next = body.node("Add", "h", body.const(1.0), outputs=["h_next"])
    body.output(h_next, body.node("Append", "s", h_next, domain="test.cyloop", outputs=["s_next"]))
    g = GraphBuilder(opsets={"test.cyloop": 1})
    g.input("h0", np.float64, (2,))
    start = g.node("EmptyList", domain="test.cyloop")
    g.loop(body.build(), [("h0", CarriedInput(0, "h", "h_next")), (start, CarriedInput(0, "s",
                                                                                       "s_next"))],
           [LastOutput("s_next")], trip_count=5, output_names=["history"])
    g.output("history")
    out = run_both(g.build(), {"h0": np.zeros(2)})
    np.testing.assert_array_equal(out["history"], np.repeat(np.arange(1.0, 6.0)[:, None], 2, 1))


def test_returned_constants_are_the_callers_own():
    g = GraphBuilder()
    g.input("x", np.float32, (3,))
    k = g.const(np.ones(3, np.float32), "K")
    g.output(k, g.node("Add", "x", k, outputs=["y"]))
    model = cyloop.Model(g.build())
    x = np.zeros(3, np.float32)
    first = model.run({"x": x})
    first["K"][:] = 100  # the caller may write to what it got back...
    again = model.run({"x": x})  # ...without changing the model
    np.testing.assert_array_equal(again["K"], np.ones(3))
    np.testing.assert_array_equal(again["y"], np.ones(3))


def test_loop5_outputs_are_not_sized_past_the_last_slice():
    body = GraphBuilder("b")
    body.input("x", np.float32, (1, 1024))
    body.output(body.node("Neg", "x", outputs=["y"]))
    g = GraphBuilder()
    g.input("X", np.float32, (10, 1024))
    g.loop(body.build(), [("X", SlicedInput(0, "x", keep_axis=True))],
           [ConcatOutput("y", new_axis=False)], trip_count=50_000_000,
           slices_set_trip_count=False, output_names=["ys"])
    g.output("ys")
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ModelError, match="runs past the last slice"):
            cyloop.Model(g.build(), driver=driver).run({"X": np.ones((10, 1024), np.float32)})


def _owner(arr):
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def test_early_stop_does_not_keep_a_large_buffer_alive():
    """An unbounded loop with 8 MiB rows that stops after one iteration."""
    body = GraphBuilder("body")
    body.input("cond_in", np.bool_, ())
    body.input("x", np.float32, (2**21,))
    body.output(body.node("Not", "cond_in", outputs=["stop"]),
                body.node("Neg", "x", outputs=["y"]))
    g = GraphBuilder()
    g.input("X", np.float32, (2**21,))
    g.loop(body.build(), [("X", cyloop.InvariantInput(0, "x"))], [ConcatOutput("y")],
           cond_param="cond_in", cond_result="stop", output_names=["ys"])
    g.output("ys")
    model = cyloop.Model(g.build(), driver="cython")
    out = model.run({"X": np.ones(2**21, np.float32)})["ys"]
    assert out.shape == (1, 2**21)
    (counters,) = model.counters().values()
    assert counters["last_preallocated_bytes"] <= 64 * 2**20
    assert _owner(out).nbytes == out.nbytes


def test_strided_copy_between_overlapping_arrays():
    a = np.arange(8.0)
    _core.strided_copy(a, a[::-1])
    np.testing.assert_array_equal(a, np.arange(8.0)[::-1])
