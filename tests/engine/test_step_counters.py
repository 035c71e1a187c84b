"""A loop's own step counter (engine/counters.py): a carried integer starting at a constant 0 and
stepped by a constant 1, as tf2onnx writes ``x_t = Gather(xs, t)``, is read as the iteration
number by the Cython driver, so that the Gather and the product made of its row are hoisted.
Every case runs the reference driver, which runs the body as written, and onnxruntime as
oracles; cases the rewrite must leave alone check that it did and still agree."""


import numpy as np
import pytest
from onnx import TensorProto, helper

import cyloop

from ..support.chunks import CHUNKS, chunks_of, failures_of_both_drivers
from ..support.drivers import run_three_ways
from ..support.plans import loop_plan

# (Gather's indices: the two types its schema allows.)
_TYPES = {"int32": (TensorProto.INT32, np.int32), "int64": (TensorProto.INT64, np.int64)}


def _counted_loop(counter="int32", start=0, step=1, start_fed=False, counter_emitted=False,
                  gathered=True):
    """A tf2onnx-style RNN: a carried counter t (from `start`, by `step`), h' = tanh(xs[t] W +
    h U); the loop returns t, h and every h (and every t, `counter_emitted`). Not `gathered`:
    xs[0] every step, the counter only stepped."""
    f = TensorProto.FLOAT
    elem = _TYPES[counter][0]
    nodes = [helper.make_node("Add", ["t", "step"], ["t_next"]),
             helper.make_node("Gather", ["X", "t" if gathered else "zero"], ["x_t"], axis=0),
             helper.make_node("MatMul", ["x_t", "W"], ["xw"]),
             helper.make_node("MatMul", ["h", "U"], ["hu"]),
             helper.make_node("Add", ["xw", "hu"], ["pre"]),
             helper.make_node("Tanh", ["pre"], ["h_next"]),
             helper.make_node("Identity", ["h_next"], ["y"]),
             helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    outputs = [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
               helper.make_tensor_value_info("t_next", elem, []),
               helper.make_tensor_value_info("h_next", f, None),
               helper.make_tensor_value_info("y", f, None)]
    loop_outputs = ["t_final", "h_final", "ys"]
    if counter_emitted:  # (the param itself a body output: the rewrite leaves the loop alone)
        outputs.append(helper.make_tensor_value_info("t", elem, []))
        loop_outputs.append("ts")
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("t", elem, []),
         helper.make_tensor_value_info("h", f, None)],
        outputs, [helper.make_tensor("step", elem, [], [step]),
                  helper.make_tensor("zero", elem, [], [0])])
    inputs = [helper.make_tensor_value_info(name, f, None) for name in ("X", "W", "U", "h0")]
    inputs.append(helper.make_tensor_value_info("M", TensorProto.INT64, []))
    initializers = []
    if start_fed:
        inputs.append(helper.make_tensor_value_info("t0", elem, []))
    else:
        initializers.append(helper.make_tensor("t0", elem, [], [start]))
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "t0", "h0"], loop_outputs, body=body)], "counted",
        inputs, [helper.make_tensor_value_info(name, f if name[0] != "t" else elem, None)
                 for name in loop_outputs], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _feeds(rng, rows=11, trip_count=9, counter="int32", start_fed=None):
    feeds = {"X": rng.standard_normal((rows, 3, 4)).astype(np.float32),
             "W": rng.standard_normal((4, 5)).astype(np.float32),
             "U": rng.standard_normal((5, 5)).astype(np.float32) * 0.5,
             "h0": rng.standard_normal((3, 5)).astype(np.float32),
             "M": np.array(trip_count, np.int64)}
    if start_fed is not None:
        feeds["t0"] = np.array(start_fed, _TYPES[counter][1])
    return feeds


def _agree(fast, reference, got, want, peer):
    for name, value in peer.items():
        assert got[name].dtype == value.dtype, name
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(want[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("counter", sorted(_TYPES))
def test_a_step_counter_indexes_rows_hoisted(rng, counter, chunk_rows):
    with chunks_of(chunk_rows):
        fast, reference, got, want, peer = run_three_ways(_counted_loop(counter),
                                                          _feeds(rng, counter=counter))
    _agree(fast, reference, got, want, peer)
    assert int(got["t_final"]) == 9
    hoisted = [ref.op for ref in loop_plan(fast).hoisted_nodes()]
    assert "Gather" in hoisted and "MatMul" in hoisted, hoisted


@pytest.mark.parametrize("case", [{"start": 1}, {"step": 2}, {"start_fed": True},
                                  {"counter_emitted": True}, {"gathered": False}],
                         ids=["starts-at-1", "steps-by-2", "start-fed", "counter-emitted",
                              "only-counted"])
def test_other_counters_stay_in_the_body_and_agree(rng, case):
    feeds = _feeds(rng, rows=30, start_fed=0 if case.get("start_fed") else None)
    fast, reference, got, want, peer = run_three_ways(_counted_loop(**case), feeds)
    _agree(fast, reference, got, want, peer)
    hoisted = [ref.op for ref in loop_plan(fast).hoisted_nodes()]
    assert "Add" not in hoisted, hoisted  # t + 1 stays in the body
    if case.get("gathered", True):  # (xs[0] is the same every step: it is hoisted, once)
        assert "Gather" not in hoisted, hoisted


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_a_counter_past_the_rows_fails_at_the_same_iteration_with_the_same_error(rng,
                                                                                 chunk_rows):
    onnx_model = _counted_loop("int32")
    feeds = _feeds(rng, rows=5, trip_count=9)
    messages = failures_of_both_drivers(lambda driver: cyloop.load(onnx_model, driver=driver),
                                        feeds, chunk_rows, "Gather")
    assert messages[0] == messages[1]
    assert "index 5 is out of bounds" in messages[0]
