"""Generated Loop / Scan / If models, run by cyloop (default driver) and by onnxruntime."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import cyloop

from ..support.onnx_models import const, loop_model, lstm_loop_model, model, scan_model, tensor

FORMS = {  # (M given, cond given, body stops at, feeds for M/cond)
    "M-and-cond": (True, True, None, {"M": np.int64(5), "cond": np.bool_(True)}),
    "M-only": (True, False, None, {"M": np.int64(4)}),
    "M-zero": (True, False, None, {"M": np.int64(0)}),
    "M-and-body-stop": (True, True, 2, {"M": np.int64(9), "cond": np.bool_(True)}),
    "cond-only": (False, True, 6, {"cond": np.bool_(True)}),
    "cond-false": (False, True, 6, {"cond": np.bool_(False)}),
    "neither": (False, False, 3, {}),
    "omitted-cond-body-stop": (True, False, 1, {"M": np.int64(7)}),
}


def _ort(onnx_model, feeds):
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def _compare(onnx_model, feeds):
    feeds = {name: np.asarray(value) for name, value in feeds.items()}
    expected = _ort(onnx_model, feeds)
    got = cyloop.load(onnx_model).run(feeds)
    for name, value in expected.items():
        assert got[name].dtype == value.dtype, name
        assert got[name].shape == value.shape, (name, got[name].shape, value.shape)
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
@pytest.mark.parametrize("opset", [11, 13, 16])
def test_loop_forms(form, opset, rng):
    m_given, cond_given, stop_at, feeds = FORMS[form]
    onnx_model = loop_model(m_given, cond_given, stop_at, opset=opset)
    _compare(onnx_model, {**feeds, "v0": rng.standard_normal((2, 3)).astype(np.float32)})


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.int64,
                                   np.bool_])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 1, 3)], ids=["rank0", "rank1", "rank2",
                                                                      "rank3"])
def test_loop_dtypes_and_scan_output_ranks(dtype, shape, rng):
    onnx_model = loop_model(True, False, None, dtype=dtype, shape=shape)
    v0 = (rng.standard_normal(shape) > 0) if dtype == np.bool_ else \
        rng.integers(-5, 5, shape).astype(dtype)
    _compare(onnx_model, {"M": np.int64(4), "v0": np.asarray(v0, dtype)})


@pytest.mark.parametrize("in_axis", [0, 1, -1])
@pytest.mark.parametrize("out_axis", [0, 1, -1])
@pytest.mark.parametrize("in_reverse,out_reverse", [(0, 0), (1, 0), (0, 1), (1, 1)],
                         ids=["fwd-fwd", "rev-fwd", "fwd-rev", "rev-rev"])
def test_scan_axes_and_directions(in_axis, out_axis, in_reverse, out_reverse, rng):
    shape = (4, 5, 3)
    onnx_model = scan_model(shape, in_axis, in_reverse, out_axis, out_reverse)
    part = [d for k, d in enumerate(shape) if k != in_axis % 3]
    _compare(onnx_model, {"s0": rng.standard_normal(part).astype(np.float32),
                          "x": rng.standard_normal(shape).astype(np.float32)})


def test_nested_loop_with_outer_scope_reads_and_if_inside(rng):
    """Outer Loop (3 iterations) -> inner Loop (M from the outer graph) whose body reads `w`
    from the top graph and branches on the iteration parity with an If."""
    then_g = helper.make_graph([helper.make_node("Add", ["acc_in", "w"], ["r"])], "then", [],
                               [tensor("r", np.float32, [2])])
    else_g = helper.make_graph([helper.make_node("Sub", ["acc_in", "w"], ["r2"])], "else", [],
                               [tensor("r2", np.float32, [2])])
    inner = helper.make_graph(
        [const("two", np.int64(2)), helper.make_node("Mod", ["j", "two"], ["parity"]),
         const("zero", np.int64(0)), helper.make_node("Equal", ["parity", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["acc_out"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["c_in"], ["c_out"])], "inner",
        [tensor("j", np.int64, []), tensor("c_in", np.bool_, []),
         tensor("acc_in", np.float32, [2])],
        [tensor("c_out", np.bool_, []), tensor("acc_out", np.float32, [2])])
    outer = helper.make_graph(
        [helper.make_node("Loop", ["inner_m", "", "a_in"], ["a_mid"], body=inner),
         helper.make_node("Mul", ["a_mid", "w"], ["a_out"]),
         helper.make_node("Identity", ["oc_in"], ["oc_out"])], "outer",
        [tensor("i", np.int64, []), tensor("oc_in", np.bool_, []), tensor("a_in", np.float32, [2])],
        [tensor("oc_out", np.bool_, []), tensor("a_out", np.float32, [2]),
         tensor("a_mid", np.float32, [2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["outer_m", "", "a0"], ["a_final", "mids"], body=outer)], "g",
        [tensor("outer_m", np.int64, []), tensor("inner_m", np.int64, []),
         tensor("a0", np.float32, [2]), tensor("w", np.float32, [2])],
        [tensor("a_final", np.float32, [2]), tensor("mids", np.float32, ["N", 2])])
    _compare(model(graph, 13), {"outer_m": np.int64(3), "inner_m": np.int64(5),
                                "a0": rng.standard_normal(2).astype(np.float32),
                                "w": rng.standard_normal(2).astype(np.float32)})


@pytest.mark.parametrize("flag", [True, False])
def test_loop_inside_if(flag, rng):
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "x"], ["v_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [tensor("i", np.int64, []), tensor("c_in", np.bool_, []), tensor("v_in", np.float32, [3])],
        [tensor("c_out", np.bool_, []), tensor("v_out", np.float32, [3])])
    then_g = helper.make_graph([helper.make_node("Loop", ["m", "", "x"], ["looped"], body=body)],
                               "then", [], [tensor("looped", np.float32, [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["negated"])], "else", [],
                               [tensor("negated", np.float32, [3])])
    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["out"], then_branch=then_g, else_branch=else_g)], "g",
        [tensor("flag", np.bool_, []), tensor("m", np.int64, []), tensor("x", np.float32, [3])],
        [tensor("out", np.float32, [3])])
    _compare(model(graph, 13), {"flag": np.bool_(flag), "m": np.int64(4),
                                "x": rng.standard_normal(3).astype(np.float32)})


def test_lstm_written_as_an_onnx_loop(rng):
    steps, batch, features, hidden = 7, 3, 5, 8
    feeds = {"T": np.array(steps, np.int64),
             "X": rng.standard_normal((steps, batch, features)).astype(np.float32),
             "W": (rng.standard_normal((features, 4 * hidden)) * 0.4).astype(np.float32),
             "R": (rng.standard_normal((hidden, 4 * hidden)) * 0.4).astype(np.float32),
             "B": rng.standard_normal(4 * hidden).astype(np.float32),
             "h0": np.zeros((batch, hidden), np.float32),
             "c0": np.zeros((batch, hidden), np.float32)}
    onnx_model = lstm_loop_model(hidden)
    expected = _ort(onnx_model, feeds)
    got = cyloop.load(onnx_model).run(feeds)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def _growing_loop(direct):
    nodes = [helper.make_node("Concat", ["v_in", "w"], ["v_out"], axis=0),
             helper.make_node("Identity", ["c_in"], ["c_out"])]
    emitted = "w"
    if not direct:  # onnxruntime refuses a subgraph output naming an outer value
        nodes.append(helper.make_node("Identity", ["w"], ["w_copy"]))
        emitted = "w_copy"
    body = helper.make_graph(
        nodes, "body",
        [tensor("i", np.int64, []), tensor("c_in", np.bool_, []),
         tensor("v_in", np.float32, ["N", 2]), tensor("u_in", np.float32, [2])],
        [tensor("c_out", np.bool_, []), tensor("v_out", np.float32, ["N", 2]),
         tensor("u_in", np.float32, [2]), tensor(emitted, np.float32, [1, 2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["m", "", "v0", "u0"], ["v_final", "u_final", "ws"],
                          body=body)], "g",
        [tensor("m", np.int64, []), tensor("v0", np.float32, [1, 2]),
         tensor("u0", np.float32, [2]), tensor("w", np.float32, [1, 2])],
        [tensor("v_final", np.float32, ["N", 2]), tensor("u_final", np.float32, [2]),
         tensor("ws", np.float32, ["M", 1, 2])])
    return model(graph, 13)


def test_carried_value_that_grows_and_outputs_naming_inputs_or_outer_values(rng):
    """v grows by one row per iteration (a carried value changing shape); the body's outputs
    name a body input (u passes through) and an outer value (w, emitted every iteration). The
    oracle is onnxruntime on the same model with an Identity in front of w."""
    feeds = {"m": np.array(4, np.int64), "v0": rng.standard_normal((1, 2)).astype(np.float32),
             "u0": rng.standard_normal(2).astype(np.float32),
             "w": rng.standard_normal((1, 2)).astype(np.float32)}
    expected = _ort(_growing_loop(direct=False), feeds)
    got = cyloop.load(_growing_loop(direct=True)).run(feeds)
    for name, value in expected.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.parametrize("lens", [None, [4, 1, 2, 3]], ids=["no-lens", "lens"])
@pytest.mark.parametrize("reverse", [0, 1], ids=["forward", "reverse"])
def test_scan8_batch_axis_and_sequence_lens(lens, reverse, rng):
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "x_t"], ["y"])], "body",
        [tensor("s_in", np.float32, [2]), tensor("x_t", np.float32, [2])],
        [tensor("s_out", np.float32, [2]), tensor("y", np.float32, [2])])
    node = helper.make_node("Scan", ["lens" if lens else "", "s0", "x"], ["s_final", "ys"],
                            body=body, num_scan_inputs=1, directions=[reverse])
    inputs = [tensor("s0", np.float32, [4, 2]), tensor("x", np.float32, [4, 4, 2])]
    if lens:
        inputs.insert(0, tensor("lens", np.int64, [4]))
    graph = helper.make_graph([node], "g", inputs, [tensor("s_final", np.float32, [4, 2]),
                                                   tensor("ys", np.float32, [4, 4, 2])])
    feeds = {"s0": rng.standard_normal((4, 2)).astype(np.float32),
             "x": rng.standard_normal((4, 4, 2)).astype(np.float32)}
    if lens:
        feeds["lens"] = np.array(lens, np.int64)
    _compare(model(graph, 8), feeds)


def test_scan8_zero_length_sequence_keeps_the_initial_state(rng):
    """onnxruntime refuses a length of 0, so a numpy loop is the oracle here."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y"])], "body",
        [tensor("s_in", np.float32, [2]), tensor("x_t", np.float32, [2])],
        [tensor("s_out", np.float32, [2]), tensor("y", np.float32, [2])])
    node = helper.make_node("Scan", ["lens", "s0", "x"], ["s_final", "ys"], body=body,
                            num_scan_inputs=1)
    graph = helper.make_graph([node], "g", [tensor("lens", np.int64, [2]),
                                            tensor("s0", np.float32, [2, 2]),
                                            tensor("x", np.float32, [2, 3, 2])],
                              [tensor("s_final", np.float32, [2, 2]),
                               tensor("ys", np.float32, [2, 3, 2])])
    s0 = rng.standard_normal((2, 2)).astype(np.float32)
    x = rng.standard_normal((2, 3, 2)).astype(np.float32)
    got = cyloop.load(model(graph, 8)).run({"lens": np.array([0, 3]), "s0": s0, "x": x})
    np.testing.assert_array_equal(got["s_final"][0], s0[0])
    np.testing.assert_array_equal(got["ys"][0], np.zeros((3, 2), np.float32))
    np.testing.assert_allclose(got["s_final"][1], s0[1] + x[1].sum(axis=0), rtol=1e-6)
    np.testing.assert_allclose(got["ys"][1], s0[1] + np.cumsum(x[1], axis=0), rtol=1e-6)
