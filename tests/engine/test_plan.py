"""`Model.plan()`: the plan's facts, built from each driver's `LoopFacts` (every loop value's role
and place, the planner's aliasing, hoisting and fusion, what the runs measured), and their
rendering for people, in the model's own names. Only the tests here read the rendering's words;
the others read the facts."""

import re
from importlib.resources import files

import numpy as np
import pytest

import cyloop
from cyloop import _examples
from cyloop.cli import main
from cyloop.engine.plan import Choice, Timing
from cyloop.ir import NodeRef

from ..support.plans import loop_plan


def test_plan_shows_aliasing():
    graph, feeds = _examples.rnn(steps=8)
    model = cyloop.Model(graph, driver="cython")
    model.run(feeds)
    loop = loop_plan(model)
    h = loop.alias("h")
    assert (h.how, h.output) == ("output slot", 1)
    assert loop.port(None, 1).lives == "in place"  # (the fused step making h writes its slot)
    assert {"sliced", "invariant", "carried"} <= set(loop.roles())
    assert loop.preallocated_bytes == 8 * 4 * 32 * 4
    assert loop.copied_bytes_per_iteration == 0
    # (sizes as people read them: 4,096 B of h rows)
    text = str(model.plan())
    assert "4.0 KiB preallocated in the last run" in text and "0 B copied an" in text


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_both_drivers_describe_the_same_loop_operands(driver):
    """The spec's reading (input roles, outputs, trip count) is the same whatever the driver;
    only the placement differs."""
    graph, feeds = _examples.rnn(steps=8)
    model = cyloop.Model(graph, driver=driver, hoist=False)
    loop = loop_plan(model)
    assert loop.driver == ("cython" if driver == "cython" else "pure-Python")
    assert not loop.counters.get("runs")
    assert loop.roles() == ["sliced", "carried", "invariant", "invariant", "invariant"]
    assert [(p.name, p.role) for p in loop.outputs] == [("h_next", "last"),
                                                         ("h_next", "concatenated")]
    assert loop.node == NodeRef("Loop", "rnn_loop", "h_last")
    text = str(model.plan())
    assert f"[{loop.driver} driver]" in text.splitlines()[0]
    assert "sizes: not run yet" in text
    model.run(feeds)
    loop = loop_plan(model)
    assert (loop.counters["runs"], loop.counters["iterations"]) == (1, 8)
    assert "sizes (1 run, 8 iterations)" in str(model.plan())


def test_the_measured_choices_outside_loops_are_shown(rng):
    """A recurrent layer outside any loop (an ONNX LSTM): its step's measured choice, not timed
    before a run, then the one kept, under "outside loops"; a model with neither loops nor
    measured kernels says so."""
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
    step, *_ = model.plan().choices  # (then where its products run: test_sequences)
    assert (step.kind, step.nodes, step.trials, step.settled) == (
        "formulation", (NodeRef("LSTM", "", "Y"),), (), False)
    assert str(model.plan()).startswith("outside loops:\n  measured: LSTM 'Y': not timed yet")
    x = {"X": rng.standard_normal((200, 2, 4)).astype(np.float32)}
    # The first run's steps are the default's, in one call, which opens the trial; the second
    # run's steps take it (it needs fewer than 200).
    model.run(x)
    model.run(x)
    step, *_ = model.plan().choices
    assert step.nodes == (NodeRef("LSTM", "", "Y"),) and step.settled
    assert step.chosen in step.candidates
    assert model.plan().loops == []
    plain = helper.make_graph([helper.make_node("Relu", ["X"], ["Y"])], "plain",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    assert str(cyloop.load(helper.make_model(plain)).plan()) == "no loops"


# -- the rendering ----------------------------------------------------------------------------

def test_the_rendering_is_a_table_of_the_models_values():
    """A header (the loop by the model's name and op, its trip count in words, the driver), an
    aligned table of the loop's values and where each lives, then short lines: what was hoisted
    and fused (by the model's nodes), the steps, the measured choices and the sizes."""
    graph, feeds = _examples.rnn(steps=8)
    model = cyloop.Model(graph, driver="cython", tune=False)
    lines = str(model.plan()).splitlines()
    assert lines[:10] == [
        "Loop 'rnn_loop' [cython driver]: one iteration per part of the sliced inputs",
        "  value        role             where it lives, what is copied",
        ("  x_t          sliced, axis 0   part i of the outer value, a read-only view "
         "(axis dropped)"),
        ("  h            carried          'h_next', read where it lives: slot i of output #1 "
         "(0 copies)"),
        "  w            invariant        the outer value, a read-only view",
        "  u            invariant        the outer value, a read-only view",
        "  b            invariant        the outer value, a read-only view",
        ("  add_4 - h@u  hoisted          row i of rows computed a chunk at a time before the "
         "iterations"),
        "  #0 h_next    last value       its value after the final iteration",
        ("  #1 h_next    stacked, axis 0  preallocated; the fused step making 'h_next' writes "
         "slot i in place")]
    text = "\n".join(lines)
    assert "  hoisted, a chunk of rows at a time: MatMul 'matmul_1' and Add 'add_4 - h@u' (the " \
           "bias joined to\n      the product)" in text
    assert "  fused: MatMul 'matmul_2', Add 'add_4', Add 'add_3' and Tanh 'h_next' run as one " \
           "step" in text
    assert "one call: not yet\n      run" in text  # (the steps, before a run)
    assert "  measured: the fused step making 'h_next': rows (fixed, not measured)" in text
    assert "  measured: the hoisted chunks' size: 512 KiB (fixed, not measured)" in text
    assert lines[-1] == "  sizes: not run yet (measured on the first run)"
    model.run(feeds)
    text = str(model.plan())
    assert "  sizes (1 run, 8 iterations): 4.0 KiB preallocated in the last run (1 allocation), " \
           "0 B copied an\n      iteration in steady state, 0 B moved by growth\n" \
           "  hoisted rows: 4.0 KiB in 1 chunk" in text


def test_a_measured_choice_says_what_was_timed_and_kept():
    """Chosen, on trial and not yet timed, in plain words, with µs."""
    times = {"rows": 2.1e-6, "columns": 5.2e-6}
    chosen = Choice("formulation", "MatMul 'hu'", ("rows", "columns"),
                    trials=(Timing("[4,16] @ [16,16] float32", "rows", times),))
    assert chosen.lines() == [("MatMul 'hu' on [4,16] @ [16,16] float32: chosen here: rows "
                               "(rows 2.1 µs, columns 5.2 µs)")]
    assert chosen.settled and chosen.chosen == "rows" and chosen.times == times
    on_trial = Choice("chunk size", "the hoisted chunks' size", ("512 KiB", "256 KiB"), "row",
                      trials=(Timing(None, None, {"512 KiB": 3e-7, "256 KiB": None}),))
    assert on_trial.lines() == [("the hoisted chunks' size: on trial: 512 KiB 0.3 µs/row, "
                                 "256 KiB not timed")]
    assert not on_trial.settled and on_trial.chosen is None
    untimed = Choice("placement", "where 'h' lives", ("in its slot", "a pool"))
    assert untimed.lines() == [("where 'h' lives: not timed yet, meanwhile the default: in its "
                                "slot")]
    waiting = Choice("placement", "where 'h' lives", ("in its slot", "a pool"), "iteration",
                     trials=(Timing(None, None, {"in its slot": 2e-6, "a pool": None}, 7),))
    assert waiting.lines() == [("where 'h' lives: the default, in its slot, until the work pays "
                                "for a trial (7 runs more; in its slot 2.0 µs/iteration, a pool "
                                "not timed)")]
    assert not waiting.settled and waiting.chosen is None
    untried = Choice("formulation", "MatMul 'hu'", ("rows", "columns"),
                     trials=(Timing("[1,2] @ [2,2] float32", "rows", {"rows": 4e-7,
                                                                      "columns": None},
                                    untried=True),))
    assert untried.lines() == [("MatMul 'hu' on [1,2] @ [2,2] float32: the default, rows, "
                                "untried: its calls are too quick to time apart (rows 0.4 µs, "
                                "columns not timed)")]
    assert untried.settled and untried.chosen == "rows"


@pytest.mark.parametrize("tune", [True, "at once"])
def test_a_first_run_runs_each_default_until_the_work_pays_for_a_trial(tune):
    """A fresh model's first run of a few iterations runs each measured choice's default (its
    calls counted, no other candidate's), and the plan says so; with ``tune="at once"`` the
    trials open on the first calls, but whether to hoist, whose trial waits for the work to pay
    (its runs are runs the other trials wait for). Both compute what tune=False does, to
    rounding."""
    graph, feeds = _examples.rnn(steps=8)
    model = cyloop.Model(graph, driver="cython", tune=tune)
    got = model.run(feeds)
    plan = model.plan()
    choices = [c for loop in plan.loops for c in loop.choices] + plan.choices
    trials = [t for c in choices for t in c.trials]
    assert trials  # (the example has measured choices, and the run met them)
    if tune is True:
        assert all(t.chosen is None or t.untried for t in trials)
        for c in choices:  # (only the default ran, where anything was timed)
            assert all(set(t.times) - {c.candidates[0]} <= {n for n, s in t.times.items()
                                                              if s is None} for t in c.trials)
        assert any(t.waiting for t in trials)
    else:
        assert not any(t.waiting for c in choices if c.kind != "hoisting" for t in c.trials)
        assert all(t.waiting for c in choices if c.kind == "hoisting" for t in c.trials)
    want = cyloop.Model(graph, driver="cython", tune=False).run(feeds)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("example", ["rnn_scan.onnx", "lstm_ti.xml", "loop_sequence.onnx"])
def test_the_rendering_speaks_the_models_language(example, capsys):
    """No op or value the engine made up (its fused ops, its sums' and projections' names), and
    lines of 100 characters at most (`cyloop plan`, after a run on generated inputs)."""
    assert main(["plan", str(files("cyloop.data") / example), "--random-inputs"]) == 0
    text = capsys.readouterr().out
    for made_up in ("ProductPlus", "LSTMStep", "LSTMCellRecurrence", "CellProjection",
                    "addends", "x_projection", "node producing", "(s)"):
        assert made_up not in text, (made_up, text)
    plan = text.split("\n", 1)[1]  # (after the line on the inputs the command made)
    assert all(len(line) <= 100 for line in plan.splitlines()), text
    assert re.search(r"^(Loop|Scan|TensorIterator) '[^']+' \[", text, re.MULTILINE), text
