"""Appends stacked in place (engine/stacking.py): a loop that appends a tensor to a sequence each
iteration, stacked by ConcatFromSequence after the loop, runs under the Cython driver as a loop
with a concatenated output. The pure-Python driver runs the sequence as written and is the oracle
(onnxruntime too); cases the rewrite must leave alone check that it did, and still agree."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import cyloop
from cyloop.ir import NodeRef

from ..support.drivers import run_three_ways
from ..support.onnx_models import model, tensor
from ..support.plans import loop_plan

node = helper.make_node


def _sequence(name):
    return helper.make_tensor_sequence_value_info(name, TensorProto.FLOAT, None)


def _appending_loop(item="scaled", *, stop_at=None, start="empty", position=False,
                    stack=None, returned=False, read_after=False, read_in_body=False,
                    second=False):
    """Outer inputs T (trip count), X [T', 3], h0 [3]. The body carries h (h + x_t) and a
    sequence, appending `item` to it: "scaled" (x_t * i, hoistable), "h_out" (the carried
    state), "X" (an outer value), "i" (the iteration number, cast), "prefix" (x_t's first i + 1
    elements: a shape that changes). ConcatFromSequence stacks the loop's sequence (`stack`: its
    attributes, default axis 0 on a new axis). The other flags spell what the rewrite must leave
    alone; `second` appends x_t to a second sequence, carried after h."""
    stack = {"axis": 0, "new_axis": 1} if stack is None else stack
    body_nodes = [_const("one", np.array([1], np.int64)), _const("zero", np.array([0], np.int64)),
                  node("Gather", ["X", "i"], ["x_t"], axis=0),
                  node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
                  node("Mul", ["x_t", "i_f"], ["scaled"]),
                  node("Add", ["h_in", "x_t"], ["h_out"]),
                  node("Unsqueeze", ["i", "zero"], ["i_1"]),
                  node("Add", ["i_1", "one"], ["i_next"]),
                  node("Slice", ["x_t", "zero", "i_next"], ["prefix"])]
    insert_inputs = ["seq_in", item if item != "i" else "i_f"]
    if position:
        body_nodes.append(_const("at", np.array(0, np.int64)))
        insert_inputs.append("at")
    body_nodes.append(node("SequenceInsert", insert_inputs, ["seq_out"]))
    if read_in_body:
        body_nodes.append(node("SequenceLength", ["seq_in"], ["length_in"]))
    if stop_at is None:
        body_nodes.append(node("Identity", ["cond_in"], ["cond_out"]))
    else:
        body_nodes += [_const("stop", np.array(stop_at, np.int64)),
                       node("Less", ["i", "stop"], ["cond_out"])]
    params = [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []), _sequence("seq_in"),
              tensor("h_in", np.float32, [3])]
    results = [tensor("cond_out", np.bool_, []), _sequence("seq_out"),
               tensor("h_out", np.float32, [3])]
    loop_inputs = ["T", "", "start", "h0"]
    loop_outputs = ["seq", "h_last"]
    if second:
        body_nodes.append(node("SequenceInsert", ["seq2_in", "x_t"], ["seq2_out"]))
        params.append(_sequence("seq2_in"))
        results.append(_sequence("seq2_out"))
        loop_inputs.append("start2")
        loop_outputs.append("seq2")
    if read_in_body:
        results.append(tensor("length_in", np.int64, []))
        loop_outputs.append("lengths")
    body = helper.make_graph(body_nodes, "body", params, results)
    outer = []
    if start == "empty":
        outer.append(node("SequenceEmpty", [], ["start"], dtype=TensorProto.FLOAT))
    else:  # a sequence that starts with one element
        outer.append(node("SequenceConstruct", ["h0"], ["start"]))
    if second:
        outer.append(node("SequenceEmpty", [], ["start2"], dtype=TensorProto.FLOAT))
    outer.append(node("Loop", loop_inputs, loop_outputs, body=body))
    outer.append(node("ConcatFromSequence", ["seq"], ["stacked"], **stack))
    outputs = [tensor("stacked", np.float32, None), tensor("h_last", np.float32, [3])]
    if second:
        outer.append(node("ConcatFromSequence", ["seq2"], ["stacked2"], axis=0, new_axis=1))
        outputs.append(tensor("stacked2", np.float32, None))
    if returned:
        outputs.append(_sequence("seq"))
    if read_after:
        outer.append(node("SequenceLength", ["seq"], ["length"]))
        outputs.append(tensor("length", np.int64, []))
    if read_in_body:
        outputs.append(tensor("lengths", np.int64, None))
    graph = helper.make_graph(
        outer, "appending", [tensor("T", np.int64, []), tensor("X", np.float32, ["N", 3]),
                             tensor("h0", np.float32, [3])], outputs)
    return model(graph, 13)


def _const(name, value):
    return node("Constant", [], [name], value=helper.make_tensor(
        name, TensorProto.INT64, value.shape, value.reshape(-1).tolist()))


def _feeds(trips, rows=6):
    rng = np.random.default_rng(trips)
    return {"T": np.array(trips, np.int64),
            "X": rng.standard_normal((rows, 3)).astype(np.float32),
            "h0": rng.standard_normal(3).astype(np.float32)}


def _stacked(model) -> list:
    """The outputs standing for a stacked sequence, in every loop of `model`'s plan."""
    found, loops = [], list(model.plan().loops)
    while loops:
        loop = loops.pop()
        found += loop.stacked()
        loops += loop.nested
    return found


def _check(onnx_model, feeds, rewritten: bool) -> dict:
    """Both drivers (and onnxruntime) agree exactly; whether the Cython driver's plan shows the
    sequence rewritten. Returns the Cython driver's results."""
    fast, reference, got, want, peer = run_three_ways(onnx_model, feeds)
    assert got.keys() == want.keys()
    for name in want:
        for other in (want[name], peer[name]):
            if isinstance(other, list):  # a sequence output
                other = [np.asarray(x) for x in other]
                assert len(got[name]) == len(other), name
                for x, y in zip(got[name], other):
                    np.testing.assert_array_equal(x, y, err_msg=name)
            else:
                assert got[name].dtype == other.dtype, name
                np.testing.assert_array_equal(got[name], other, err_msg=name)
    assert bool(_stacked(fast)) == rewritten, fast.plan()
    assert not _stacked(reference)
    return got


@pytest.mark.parametrize("item", ["scaled", "h_out", "X", "i"],
                         ids=["hoisted", "carried-state", "outer-value", "iteration-number"])
@pytest.mark.parametrize("trips", [1, 5])
def test_appends_then_stack_run_as_a_concatenated_output(item, trips):
    onnx_model = _appending_loop(item)
    got = _check(onnx_model, _feeds(trips), rewritten=True)
    assert got["stacked"].shape[0] == trips


def test_the_plan_names_the_sequence_and_the_nodes():
    plan = loop_plan(cyloop.load(_appending_loop(), driver="cython"))
    assert plan.port(None, 1).sequence == (
        "seq", NodeRef("SequenceInsert", "", "seq_out"),
        NodeRef("ConcatFromSequence", "", "stacked")), plan
    assert plan.port(None, 1).lives == "hoisted rows", plan


def test_a_loop_that_stops_on_its_condition_stacks_what_it_appended():
    got = _check(_appending_loop(stop_at=2), _feeds(5), rewritten=True)
    assert got["stacked"].shape == (3, 3)


def test_two_sequences_around_a_carried_tensor_are_both_rewritten():
    """The loop's inputs are renumbered after each rewrite (T, cond, seq, h0, seq2)."""
    onnx_model = _appending_loop(second=True)
    _check(onnx_model, _feeds(4), rewritten=True)
    plan = loop_plan(cyloop.load(onnx_model, driver="cython"))
    assert len(plan.stacked()) == 2, plan


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_zero_iterations_are_an_error_as_the_stack_of_nothing_is(driver):
    model = cyloop.load(_appending_loop(), driver=driver)
    with pytest.raises(cyloop.ExecutionError, match="need at least one array to stack"):
        model.run(_feeds(0))


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_an_item_that_changes_shape_is_an_error(driver):
    model = cyloop.load(_appending_loop("prefix"), driver=driver)
    assert model.run(_feeds(1))["stacked"].shape == (1, 1)
    with pytest.raises(cyloop.CyloopError, match="shape"):
        model.run(_feeds(3))


@pytest.mark.parametrize("variant", [
    {"returned": True}, {"read_after": True}, {"read_in_body": True}, {"position": True},
    {"start": "construct"}, {"stack": {"axis": 0, "new_axis": 0}},
    {"stack": {"axis": 1, "new_axis": 1}}, {"stack": {"axis": -2, "new_axis": 1}}],
    ids=["sequence-returned", "sequence-read-after", "sequence-read-in-body",
         "insert-at-a-position", "non-empty-start", "concatenated", "stacked-on-axis-1",
         "negative-axis"])
def test_what_could_tell_the_difference_is_left_as_written(variant):
    _check(_appending_loop(**variant), _feeds(4), rewritten=False)


def test_a_loop_inside_a_loop_body_is_rewritten_there():
    """The outer loop runs the appending loop (and its stack) each iteration, emitting the
    stacked rows: the rewrite happens where the inner graph is compiled."""
    inner = _appending_loop().graph
    body = helper.make_graph(
        list(inner.node) + [node("Identity", ["go_in"], ["go_out"])], "outer_body",
        [tensor("j", np.int64, []), tensor("go_in", np.bool_, [])],
        [tensor("go_out", np.bool_, []), tensor("stacked", np.float32, None)])
    graph = helper.make_graph(
        [node("Loop", ["J", ""], ["all_stacked"], body=body)], "nested",
        [tensor("J", np.int64, []), *inner.input],
        [tensor("all_stacked", np.float32, None)])
    feeds = {"J": np.array(2, np.int64), **_feeds(3)}
    got = _check(model(graph, 13), feeds, rewritten=True)
    assert got["all_stacked"].shape == (2, 3, 3)
