"""Slicing and concatenation arithmetic: Cython driver == pure-Python driver == a direct numpy
computation of docs/design.md's rules, on random shapes, axes, start/end, strides, part sizes and
orders."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cyloop
from cyloop.ir import (
    ConcatOutput,
    GraphBuilder,
    SlicedInput,
    slice_count,
)

from ..support.drivers import run_both
from ..support.slicing import oracle_parts, sliced_cases, sliced_loop


@given(dim=st.integers(0, 12), start=st.integers(-14, 14), end=st.integers(-14, 14),
       stride=st.integers(-4, 4).filter(bool), part=st.integers(1, 4))
def test_slice_count_matches_the_rule(dim, start, end, stride, part):
    x = np.arange(max(dim, 1))[:dim]
    expected = oracle_parts(x, 0, start, end, stride, part, True)
    if expected is None:
        with pytest.raises(ValueError, match="size"):
            slice_count(dim, start, end, stride, part)
        return
    n, first = slice_count(dim, start, end, stride, part)
    assert n == len(expected)
    for i, block in enumerate(expected):
        assert block[0] == first + i * stride


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=sliced_cases())
def test_sliced_loop_matches_numpy(case):
    shape, axis, start, end, stride, part, keep_axis, out_axis, reverse = case
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    graph = sliced_loop(*case)
    parts = oracle_parts(x, axis % len(shape), start, end, stride, part, keep_axis)
    acc0 = np.zeros(parts[0].shape if parts else graph.inputs[1].shape)
    feeds = {"x": x, "acc0": acc0}
    if parts is None:
        for driver in ("cython", "python"):
            with pytest.raises(cyloop.ModelError, match="outside axis|fall outside"):
                cyloop.Model(graph, driver=driver).run(feeds)
        return
    got = {driver: cyloop.Model(graph, driver=driver).run(feeds) for driver in ("cython",
                                                                                 "python")}
    ys = [2 * p + 1 for p in parts]
    if reverse:
        ys = ys[::-1]
    if not ys:
        assert got["cython"]["ys"].size == 0 and got["python"]["ys"].size == 0
    else:
        expected = np.concatenate(ys, out_axis) if keep_axis else np.stack(ys, out_axis)
        for driver in ("cython", "python"):
            np.testing.assert_array_equal(got[driver]["ys"], expected, err_msg=driver)
    expected_acc = acc0 + sum(parts) if parts else acc0
    for driver in ("cython", "python"):
        np.testing.assert_array_equal(got[driver]["acc"], expected_acc, err_msg=driver)


def test_loop5_sliced_inputs_limit_but_do_not_set_the_trip_count():
    """Loop-5: the trip count decides; running past a sliced input's last part is a model error."""
    body = GraphBuilder("body")
    body.input("x_t", np.float32, (1, 2))
    body.output(body.node("Identity", "x_t", outputs=["y"]))
    g = GraphBuilder()
    g.input("x", np.float32, (3, 2))
    g.input("n", np.int64, ())
    g.loop(body.build(), inputs=[("x", SlicedInput(0, "x_t", 0, 0, -1, 1, 1, True))],
           outputs=[ConcatOutput("y", 0, new_axis=False)], trip_count="n",
           slices_set_trip_count=False, output_names=["ys"])
    g.output("ys")
    graph = g.build()
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for driver in ("cython", "python"):
        model = cyloop.Model(graph, driver=driver)
        np.testing.assert_array_equal(model.run({"x": x, "n": np.int64(2)})["ys"], x[:2])
        with pytest.raises(cyloop.ModelError, match="runs past the last slice of sliced input "
                                                    "'x_t'"):
            model.run({"x": x, "n": np.int64(4)})


def test_sliced_inputs_must_agree_on_the_count():
    body = GraphBuilder("body")
    body.input("a_t", np.float32, ())
    body.input("b_t", np.float32, ())
    body.output(body.node("Add", "a_t", "b_t", outputs=["y"]))
    g = GraphBuilder()
    g.input("a", np.float32, ("N",))
    g.input("b", np.float32, ("M",))
    g.loop(body.build(), inputs=[("a", SlicedInput(0, "a_t")), ("b", SlicedInput(0, "b_t"))],
           outputs=[ConcatOutput("y")], output_names=["ys"])
    g.output("ys")
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ModelError, match="disagree.*'a_t': 3, 'b_t': 4"):
            cyloop.Model(g.build(), driver=driver).run({"a": np.ones(3, np.float32),
                                                        "b": np.ones(4, np.float32)})


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
