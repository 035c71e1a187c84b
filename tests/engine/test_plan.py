"""`Model.plan()`: the printable plan, built from each driver's `LoopFacts`: every loop operand's
kind and place, the planner's aliasing, hoisting and what the runs measured."""

import pytest

import cyloop
from cyloop import _examples


def test_plan_shows_aliasing():
    graph, feeds = _examples.rnn(steps=8)
    model = cyloop.Model(graph, driver="cython")
    model.run(feeds)
    text = str(model.plan())
    assert "h <- h_next: lives in slot i of output #1" in text
    assert "Tanh writes slot i in place" in text
    assert "sliced" in text and "invariant" in text and "carried" in text
    (loop,) = model.plan().loops
    assert loop.preallocated_bytes == 8 * 4 * 32 * 4
    assert loop.copied_bytes_per_iteration == 0
    # (sizes as people read them: 4,096 B of h rows)
    assert "preallocated 4.0 KiB in the last run" in text and "0 B copied per iteration" in text


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_both_drivers_describe_the_same_loop_operands(driver):
    """The spec's reading (input kinds, outputs, trip count) is the same whatever the driver;
    only the placement lines differ."""
    graph, feeds = _examples.rnn(steps=8)
    model = cyloop.Model(graph, driver=driver, hoist=False)
    text = str(model.plan())
    assert f"[{'cython' if driver == 'cython' else 'pure-Python'} driver]" in text
    assert "not run yet" in text
    kinds = [line.split()[2] for line in text.splitlines() if line.strip().startswith("input")]
    assert kinds == ["sliced", "carried", "invariant", "invariant", "invariant"]
    model.run(feeds)
    assert "measured over 1 run(s), 8 iteration(s)" in str(model.plan())


def test_the_measured_choices_outside_loops_are_shown(rng):
    """A recurrent layer outside any loop (an ONNX LSTM): its step's measured choice, "not
    timed yet" before a run, then the one kept, under "outside loops"; a model with neither
    loops nor measured kernels says so."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    hidden = 8
    weights = {"W": rng.standard_normal((1, 4 * hidden, 4)), "R": rng.standard_normal(
        (1, 4 * hidden, hidden))}
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=hidden)], "layer",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [200, 2, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array((v * 0.3).astype(np.float32), k) for k, v in weights.items()])
    model = cyloop.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert str(model.plan()).startswith("outside loops:\n  measured choice: LSTM node "
                                        "producing 'Y': not timed yet")
    model.run({"X": rng.standard_normal((200, 2, 4)).astype(np.float32)})  # (the trial: <200)
    (label, choice), *_ = model.plan().choices  # (then where its products run: test_sequences)
    assert label == "LSTM node producing 'Y'" and "the fastest here" in choice
    assert model.plan().loops == []
    plain = helper.make_graph([helper.make_node("Relu", ["X"], ["Y"])], "plain",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    assert str(cyloop.load(helper.make_model(plain)).plan()) == "no loops"
