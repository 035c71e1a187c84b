"""Where a loop's matrix products run, measured a run at a time (`LoopDriver.products`): on one
core, each product in its own measured formulation, or all on two cores (accel/_two_core.pyx).
Either way the loop computes what the reference driver computes; the choice shows in the plan,
tune=False keeps one core, a loop whose products are too small to split is offered no choice,
and the setting a run makes never outlives it."""

import threading

import numpy as np
import pytest

import cyloop
from cyloop.abilities import abilities_of
from cyloop.accel import _two_core
from cyloop.accel import measured as _measured
from cyloop.accel.gemm import (
    blas_candidate,
    helper_candidate,
    products_on_two_cores,
    set_products_on_two_cores,
    two_cores_here,
)

from ..support.loops import cell_loop_feeds, lstm_loop, rnn_loop_feeds, rnn_loop_model
from ..support.openvino_models import cell_ti_model, converted, save
from ..support.plans import loop_plan, measured_steps, placements

# Where a loop's products may run, each candidate named by the cores it takes here: numpy's
# BLAS (its own threads), or in pieces on this thread and the helper.
BY_BLAS = blas_candidate()
BY_HELPER = helper_candidate()


pytestmark = pytest.mark.skipif(not two_cores_here(), reason="numpy's own BLAS is not found "
                                "here, or the process has one core: no choice to make")


# Weights scaled so that a step's sums stay near 1 (no saturated gates, whose rounding a loop
# would amplify): the products are 64 long.
STEPS, SCALE = 12, 0.125


def _rnn(tmp_path, rng, steps=STEPS):
    """h = tanh(x_t W + h R + B) as ONNX MatMul nodes: h @ R [16,64] @ [64,64] in the body,
    x_t @ W hoisted."""
    feeds = rnn_loop_feeds(rng, hidden=64, steps=steps, batch=16, features=32)
    for name in ("W", "R"):
        feeds[name] *= SCALE
    return rnn_loop_model(), feeds


def _fused_lstm(tmp_path, rng):
    """An ONNX Loop spelling the LSTM cell, fused into one LSTMStep ([8,64] @ [4,64,64])."""
    onnx_model, state, gates = lstm_loop(hidden=64)
    feeds = cell_loop_feeds(rng, state, gates, steps=STEPS, batch=8, features=16)
    for name in ("W", "R"):
        feeds[name] *= SCALE
    return onnx_model, feeds


def _cell(kind, batch, **attrs):
    def build(tmp_path, rng, steps=STEPS):
        ov_model, _ = cell_ti_model(kind, steps=steps, batch=batch, features=16, hidden=64,
                                    scale=SCALE, **attrs)
        feeds = {"X": rng.standard_normal((batch, steps, 16)).astype(np.float32),
                 "H0": rng.standard_normal((batch, 64)).astype(np.float32)}
        if kind == "lstm":
            feeds["C0"] = rng.standard_normal((batch, 64)).astype(np.float32)
        return save(ov_model, tmp_path / f"{kind}.xml"), feeds
    return build


def _converted_rnn(tmp_path, rng):
    """`_rnn` as the IR openvino.convert_model writes for it (OpenVINO's MatMul and Add: the
    hoisted x W + B, joined, and h @ R + the rest, fused)."""
    onnx_model, feeds = _rnn(tmp_path, rng)
    return converted(onnx_model, feeds, tmp_path / "rnn.xml"), feeds


LOOPS = {"onnx-rnn": _rnn, "onnx-lstm-fused": _fused_lstm, "openvino-lstm": _cell("lstm", 8),
         "openvino-gru": _cell("gru", 8), "openvino-rnn": _cell("rnn", 16),
         "openvino-converted-rnn": _converted_rnn}


def _cores_choice(model):
    """The measured choice of where `model`'s loop's products run, from its plan."""
    (choice,) = loop_plan(model).choices_of("cores")
    return choice


def _loop_of(model):
    (loop,) = model._compiled.loops
    return loop


@pytest.mark.parametrize("cores", [BY_HELPER, BY_BLAS])
@pytest.mark.parametrize("name", list(LOOPS))
def test_either_way_a_loop_computes_what_the_reference_does(name, cores, tmp_path, rng):
    """Forced to each (and with each candidate of the body's own measured steps), the Cython
    driver matches the pure-Python one; on two cores, products were cut in pieces."""
    source, feeds = LOOPS[name](tmp_path, rng)
    fast = cyloop.load(source, driver="cython")
    want = cyloop.load(source, driver="python").run(feeds)
    loop = _loop_of(fast)
    assert loop.products is not None
    loop.products.fix(cores)
    for measured in measured_steps(fast) or [None]:
        for candidate in measured.candidates if measured is not None else [None]:
            if measured is not None:
                measured.fix(candidate)
            split = _two_core.products_split()
            got = fast.run(feeds)
            assert (_two_core.products_split() > split) == (cores == BY_HELPER), candidate
            for key in want:
                np.testing.assert_allclose(got[key], want[key], rtol=2e-5, atol=2e-5,
                                           err_msg=f"{key} ({cores}, {candidate})")
    assert _cores_choice(fast).fixed == cores


def test_two_cores_take_their_runs_first_and_the_faster_is_kept(tmp_path, rng):
    """Two cores run first, a warm-up run and two timed ones, then one core likewise (its
    second timed run only if its first was not clearly apart), and the choice is made then; it
    and both times show in the plan."""
    source, feeds = _rnn(tmp_path, rng)
    model = cyloop.load(source, driver="cython", tune="at once")
    loop = _loop_of(model)
    seen = []
    for _ in range(6):
        model.run(feeds)
        (trial,) = loop.products.trials.values()
        seen.append(tuple(len(trial.samples[name]) + (name in trial.warm)
                          for name in (BY_HELPER, BY_BLAS)))
    assert seen[:3] == [(1, 0), (2, 0), (3, 0)]
    assert seen[3:5] == [(3, 1), (3, 2)]
    first, two = trial.samples[BY_BLAS][0], trial.samples[BY_HELPER]
    clear = first > _measured.CLEAR * max(two) or min(two) > _measured.CLEAR * first
    assert seen[5] == ((3, 2) if clear else (3, 3))
    assert trial.choice is not None  # (close or not: each round is a run the user waits for)
    choice = _cores_choice(model)
    assert choice.chosen == trial.choice and next(iter(choice.times)) == BY_HELPER
    assert choice.per == "iteration"


def _timed_calls(measured) -> int:
    """Calls a `Measured` has taken as samples or warm-ups, over all its trials."""
    return sum(sum(map(len, trial.samples.values())) + len(trial.warm)
               for trial in measured.trials.values())


@pytest.mark.parametrize("name", ["onnx-rnn", "openvino-lstm"])
def test_a_timed_run_of_the_cores_trial_times_nothing_else(name, tmp_path, rng):
    """While the cores are on trial, a run times no other measured choice (the body's kernels,
    the hoisted ones, the chunk sizes: one core's formulations would be timed as part of its
    run, and the slower chunk sizes as part of two cores'), but for the trial's first run, a
    warm-up on two cores, in which the others take their samples."""
    source, feeds = LOOPS[name](tmp_path, rng, steps=40)  # (chunks past the first: sized)
    model = cyloop.load(source, driver="cython", tune="at once")
    loop = _loop_of(model)
    others = measured_steps(model) + [loop.hoist.sizing] + [
        abilities_of(step.probe).measured for step in loop.hoist.steps
        if abilities_of(step.probe).measured is not None]
    runs = []  # (the cores a run had, whether they were warm, whether it timed nothing else)
    while loop.products.trials.get(None) is None or loop.products.trials[None].choice is None:
        trial = loop.products.trials.get(None)
        counts = {n: 0 for n in (BY_HELPER, BY_BLAS)} if trial is None else \
            {n: len(trial.samples[n]) + (n in trial.warm) for n in (BY_HELPER, BY_BLAS)}
        warm = set() if trial is None else set(trial.warm)
        before = [_timed_calls(m) for m in others]
        model.run(feeds)
        trial = loop.products.trials[None]
        (cores,) = [n for n in counts if len(trial.samples[n]) + (n in trial.warm) > counts[n]]
        runs.append((cores, cores in warm, [_timed_calls(m) for m in others] == before))
    assert runs[0] == (BY_HELPER, False, False)
    assert all(quiet for _, _, quiet in runs[1:]), runs
    assert (BY_BLAS, False, True) in runs and (BY_BLAS, True, True) in runs
    assert runs[1] == (BY_HELPER, True, True)
    settled = [_timed_calls(m) for m in others]
    model.run(feeds)  # the choice made, the others take their samples again
    assert [_timed_calls(m) for m in others] != settled


def test_where_a_value_lives_is_tried_once_the_cores_are_chosen(tmp_path, rng):
    """One run-level trial at a time: while the cores are on trial, the placement of the GRU
    cell's h (carried, and emitted on axis 1) keeps its default untimed; its own trial starts in
    the first run after the choice of cores, and ends with a choice four runs later. (A clip:
    its step has no steps. Where a cell's iterations run many at a time, where their h lives
    is measured a call at a time: test_steps.py.)"""
    source, feeds = _cell("gru", 8, clip=4.0)(tmp_path, rng)
    model = cyloop.load(source, driver="cython", tune="at once")
    loop = _loop_of(model)
    (placement,) = placements(model)
    runs = 0
    while loop.products.trials.get(None) is None or loop.products.trials[None].choice is None:
        model.run(feeds)
        runs += 1
        assert not placement.trials, runs  # (no trial opened: no warm-up run, no sample)
    model.run(feeds)
    (trial,) = placement.trials.values()
    assert any(trial.samples.values())  # (no warm-up run: its first run is a sample)
    for _ in range(2):
        model.run(feeds)
    assert trial.choice is None
    model.run(feeds)  # (two timed runs each)
    assert trial.choice in placement.candidates


@pytest.mark.parametrize("cores", [BY_HELPER, BY_BLAS])
def test_the_plan_says_a_formulation_no_call_needed_on_two_cores_is_unused(cores, tmp_path,
                                                                         rng):
    """The fused step's formulation on one core, with the products fixed on two cores (where
    its product runs in pieces) and never called: "unused", not a trial still to come; on one
    core its default runs (the key's trial waits or is made)."""
    source, feeds = _rnn(tmp_path, rng)
    model = cyloop.load(source, driver="cython")
    _loop_of(model).products.fix(cores)
    model.run(feeds)
    (choice,) = [c for c in loop_plan(model).choices_of("formulation") if not c.hoisted]
    if cores == BY_HELPER:
        assert choice.declined.startswith("unused") and cores in choice.declined, choice
        assert choice.settled and choice.lines() == [f"{choice.subject}: {choice.declined}"]
    else:
        assert not choice.declined and choice.trials, choice


def test_tune_false_keeps_one_core(tmp_path, rng):
    source, feeds = _rnn(tmp_path, rng)
    model = cyloop.load(source, driver="cython", tune=False)
    split = _two_core.products_split()
    model.run(feeds)
    assert _two_core.products_split() == split
    assert _cores_choice(model).fixed == BY_BLAS


def test_a_loop_of_products_too_small_to_split_is_offered_no_choice(rng):
    """Its products run on one core either way: after a first run finds so, the choice goes
    (and with it the runs it would take)."""
    model = cyloop.load(rnn_loop_model(), driver="cython")
    assert _loop_of(model).products is not None
    model.run(rnn_loop_feeds(rng, hidden=8, steps=6, batch=3, features=5))
    assert _loop_of(model).products is None
    assert not loop_plan(model).choices_of("cores")


def test_a_loop_without_products_is_offered_no_choice(rng):
    from onnx import helper

    from ..support.onnx_models import model, tensor

    body = helper.make_graph(
        [helper.make_node("Add", ["a_in", "one"], ["a_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []),
         tensor("a_in", np.float32, None)],
        [tensor("cond_out", np.bool_, []), tensor("a_out", np.float32, None)],
        [helper.make_tensor("one", 1, [], [1.0])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["T", "", "a0"], ["a"], body=body)], "count",
        [tensor("T", np.int64, []), tensor("a0", np.float32, None)],
        [tensor("a", np.float32, None)])
    loaded = cyloop.load(model(graph, 13), driver="cython")
    assert _loop_of(loaded).products is None


@pytest.mark.parametrize("before", [False, True])
def test_a_run_restores_the_setting_it_found(before, tmp_path, rng):
    """A run sets where its products run, and puts back what it found, after an error too."""
    source, feeds = _rnn(tmp_path, rng)
    model = cyloop.load(source, driver="cython")
    _loop_of(model).products.fix(BY_HELPER if not before else BY_BLAS)
    previous = set_products_on_two_cores(before)
    try:
        model.run(feeds)
        assert products_on_two_cores() == before
        bad = dict(feeds, X=feeds["X"][:, :, :7])  # x_t @ W fails: 7 columns against 32 rows
        with pytest.raises(cyloop.CyloopError):
            model.run(bad)
        assert products_on_two_cores() == before
    finally:
        set_products_on_two_cores(previous)


def test_a_body_product_of_a_vector_runs_on_two_cores_like_the_reference(rng):
    """MatMul of a 1-D state by a matrix (no 2-D product to cut) in a loop on two cores."""
    from onnx import helper

    from ..support.onnx_models import model, tensor

    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "R"], ["hr"]),
         helper.make_node("Tanh", ["hr"], ["h_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []),
         tensor("h_in", np.float32, None)],
        [tensor("cond_out", np.bool_, []), tensor("h_out", np.float32, None)])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["T", "", "h0"], ["h"], body=body)], "vector",
        [tensor("T", np.int64, []), tensor("h0", np.float32, None),
         tensor("R", np.float32, None)], [tensor("h", np.float32, None)])
    onnx_model = model(graph, 13)
    feeds = {"T": np.array(5, np.int64), "h0": rng.standard_normal(256).astype(np.float32),
             "R": (rng.standard_normal((256, 256)) / 16).astype(np.float32)}
    fast = cyloop.load(onnx_model, driver="cython")
    _loop_of(fast).products.fix(BY_HELPER)
    np.testing.assert_allclose(fast.run(feeds)["h"],
                               cyloop.load(onnx_model, driver="python").run(feeds)["h"],
                               rtol=1e-5, atol=1e-6)


def test_threads_running_one_model_share_its_choice_of_cores(tmp_path, rng):
    """One model run from several threads while its choice of cores is on trial (and a run may
    end it): every run is right."""
    source, feeds = _rnn(tmp_path, rng)
    model = cyloop.load(source, driver="cython")
    want = cyloop.load(source, driver="python").run(feeds)["hs"]
    errors = []

    def work():
        try:
            for _ in range(8):
                np.testing.assert_allclose(model.run(feeds)["hs"], want, rtol=2e-5, atol=2e-5)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
