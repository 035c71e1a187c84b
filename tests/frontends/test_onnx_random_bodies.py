"""Hypothesis-generated small Loop bodies, run by cyloop and by onnxruntime."""

import numpy as np
import onnxruntime as ort
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import cyloop

from ..support.onnx_models import model, tensor

UNARY = ["Neg", "Tanh", "Sigmoid", "Abs", "Relu", "Identity"]
BINARY = ["Add", "Sub", "Mul", "Max", "Min"]
SHAPE = [2, 3]


@st.composite
def loop_bodies(draw):
    """A body over values v_in (carried), x_t (row `iter` of the outer X) and w (outer scope)."""
    values = ["v_in", "x_t", "w"]
    nodes = [helper.make_node("Gather", ["X", "iter"], ["x_t"], axis=0)]
    for k in range(draw(st.integers(1, 6))):
        name = f"t{k}"
        if draw(st.booleans()):
            op = draw(st.sampled_from(UNARY))
            nodes.append(helper.make_node(op, [draw(st.sampled_from(values))], [name]))
        else:
            op = draw(st.sampled_from(BINARY))
            nodes.append(helper.make_node(op, [draw(st.sampled_from(values)),
                                               draw(st.sampled_from(values))], [name]))
        values.append(name)
    v_out = draw(st.sampled_from(values[3:] + ["v_in"]))
    emitted = draw(st.lists(st.sampled_from(values), max_size=2))
    nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    nodes.append(helper.make_node("Identity", [v_out], ["v_out"]))
    for j, name in enumerate(emitted):
        nodes.append(helper.make_node("Identity", [name], [f"y{j}"]))
    body = helper.make_graph(
        nodes, "body",
        [tensor("iter", np.int64, []), tensor("cond_in", np.bool_, []),
         tensor("v_in", np.float32, SHAPE)],
        [tensor("cond_out", np.bool_, []), tensor("v_out", np.float32, SHAPE)]
        + [tensor(f"y{j}", np.float32, SHAPE) for j in range(len(emitted))])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "v0"], ["v_final"] + [f"ys{j}" for j in
                                                                   range(len(emitted))],
                          body=body)], "g",
        [tensor("M", np.int64, []), tensor("v0", np.float32, SHAPE),
         tensor("X", np.float32, ["T", *SHAPE]), tensor("w", np.float32, SHAPE)],
        [tensor("v_final", np.float32, SHAPE)]
        + [tensor(f"ys{j}", np.float32, ["T", *SHAPE]) for j in range(len(emitted))])
    return model(graph, draw(st.sampled_from([11, 13, 16]))), draw(st.integers(0, 5))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=loop_bodies(), seed=st.integers(0, 2**16))
def test_random_loop_bodies_match_onnxruntime(case, seed):
    onnx_model, steps = case
    rng = np.random.default_rng(seed)
    feeds = {"M": np.array(steps, np.int64),
             "v0": rng.standard_normal(SHAPE).astype(np.float32),
             "X": rng.standard_normal((max(steps, 1), *SHAPE)).astype(np.float32),
             "w": rng.standard_normal(SHAPE).astype(np.float32)}
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    got = cyloop.load(onnx_model).run(feeds)
    for name, value in expected.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
