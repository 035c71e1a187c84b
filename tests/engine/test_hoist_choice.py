"""Whether a loop's hoisted work runs before its iterations or in them, a measured choice of
whole runs (engine/hoist_choice.py): both candidates compute what the reference driver does, the
plan shows the choice, and tune=False keeps the hoisted driver alone. (The Cython driver's: the
reference driver hoists nothing.)"""

import numpy as np
import pytest

import cyloop
from cyloop.engine.hoist_choice import HOISTED, IN_THE_LOOP, HoistChoice

from ..support.onnx_models import lstm_loop_model
from ..support.plans import loop_plan


def _feeds(rng, steps=6, batch=2, features=3, hidden=8):
    return {"T": np.array(steps, np.int64),
            "X": rng.standard_normal((steps, batch, features)).astype(np.float32),
            "W": rng.standard_normal((features, 4 * hidden)).astype(np.float32),
            "R": rng.standard_normal((hidden, 4 * hidden)).astype(np.float32) * 0.3,
            "B": rng.standard_normal(4 * hidden).astype(np.float32),
            "h0": np.zeros((batch, hidden), np.float32),
            "c0": np.zeros((batch, hidden), np.float32)}


@pytest.mark.parametrize("candidate", [HOISTED, IN_THE_LOOP])
def test_each_candidate_computes_what_the_reference_driver_does(rng, candidate):
    source = lstm_loop_model().SerializeToString()
    model = cyloop.load(source, driver="cython")
    (choice,) = model._compiled.loops
    assert isinstance(choice, HoistChoice)
    choice.choice.fix(candidate)
    want = cyloop.load(source, driver="python")
    for steps in (1, 6, 0):
        feeds = _feeds(rng, steps=steps)
        expected = want.run(feeds)
        for name, value in model.run(feeds).items():
            np.testing.assert_allclose(value, expected[name], rtol=1e-5, atol=1e-6,
                                       err_msg=name)
    iterations = model.counters()[choice.label]["iterations"]
    assert iterations == 7  # (1 + 6 + 0: the counters of whichever driver ran, summed)
    assert (choice._plain is not None) == (candidate == IN_THE_LOOP)


def test_the_plan_shows_the_choice_and_tune_false_keeps_the_hoisted_driver(rng):
    source = lstm_loop_model().SerializeToString()
    model = cyloop.load(source, driver="cython", tune="at once")
    feeds = _feeds(rng)
    for _ in range(400):  # (until its work pays for a trial, after the driver's own trials)
        model.run(feeds)
        (choice,) = loop_plan(model).choices_of("hoisting")
        if choice.trials and not choice.trials[0].waiting:
            break
    assert choice.candidates == (HOISTED, IN_THE_LOOP)
    assert choice.trials and choice.trials[0].waiting == 0
    fixed = cyloop.load(source, driver="cython", tune=False)
    (loop,) = fixed._compiled.loops
    assert not isinstance(loop, HoistChoice)
    assert not loop_plan(fixed).choices_of("hoisting")
    unhoisted = cyloop.load(source, driver="cython", hoist=False)
    assert not isinstance(unhoisted._compiled.loops[0], HoistChoice)


def test_the_choice_waits_while_a_trial_of_the_hoisting_driver_runs(rng):
    """Runs taken from the hoisting driver while one of its own choices is on trial would starve
    that trial: meanwhile every run is the hoisting driver's, and the choice counts none."""
    model = cyloop.load(lstm_loop_model().SerializeToString(), driver="cython", tune="at once")
    (choice,) = model._compiled.loops
    feeds = _feeds(rng, steps=2)  # (two calls a run of the step, whose trial takes a few runs)
    model.run(feeds)
    assert choice._inner_trial_open()  # (with tune="at once", the driver's trials open at once)
    (trial,) = choice.choice.trials.values()  # (its first run, before they opened)
    counted, runs = trial.waited, 0
    while choice._inner_trial_open():
        model.run(feeds)
        assert trial.waited == counted and choice._plain is None
        runs += 1
        assert runs < 500, "the hoisting driver's trials never ended"
    for _ in range(3):
        model.run(feeds)
    assert trial.waited > counted  # (then it counts the default's runs towards its own trial)


def test_the_other_driver_settles_its_own_choices_before_its_runs_count(rng):
    """The driver that hoists nothing is timed as it runs once its own choices are made: at its
    first run (the trial is open), the trials of its own choices that still wait for their work
    to pay open, and while one of them is on trial its runs are that trial's, the choice counting
    none of them."""
    model = cyloop.load(lstm_loop_model().SerializeToString(), driver="cython")
    (choice,) = model._compiled.loops
    feeds = _feeds(rng, steps=2)
    _run_until(model, feeds, lambda: choice._plain is not None, "ran the other driver")
    trials = [t for measured in choice._plain_inner for t in measured.trials.values()]
    assert trials and all(t.open or t.choice is not None for t in trials)
    assert choice._plain_trial_open()  # (at its first run, none of them could end)
    (trial,) = choice.choice.trials.values()
    samples = {name: len(times) for name, times in trial.samples.items()}

    def settled():
        assert {name: len(times) for name, times in trial.samples.items()} == samples
        return not choice._plain_trial_open()

    _run_until(model, feeds, settled, "ended the other driver's trials")
    _run_until(model, feeds, lambda: trial.choice is not None, "made the choice")
    assert trial.samples[IN_THE_LOOP]  # (the other driver's runs were timed, once settled)


def test_a_trial_no_run_meets_holds_the_choice_a_bounded_number_of_runs(rng, monkeypatch):
    """A driver's own trial on a key no later run meets (an earlier feed's shapes, say) would hold
    the choice for good: after HOIST_WAIT_RUNS runs left to the drivers' trials, it counts runs
    again."""
    from cyloop.accel.measured import Trial
    from cyloop.engine import hoist_choice

    model = cyloop.load(lstm_loop_model().SerializeToString(), driver="cython")
    (choice,) = model._compiled.loops
    feeds = _feeds(rng, steps=2)
    _run_until(model, feeds, lambda: choice._plain is not None, "ran the other driver")
    _run_until(model, feeds, lambda: not choice._plain_trial_open(),
               "ended the other driver's trials")
    waited = choice._waited
    monkeypatch.setattr(hoist_choice, "HOIST_WAIT_RUNS", waited + 6)
    measured = choice._plain_inner[0]
    measured.trials["a key no run meets"] = Trial("a key no run meets",
                                                  list(measured.candidates), 1)  # (open)
    assert choice._plain_trial_open()
    (trial,) = choice.choice.trials.values()
    for _ in range(6):
        model.run(feeds)
    assert choice._waited == waited + 6 and choice._plain_trial_open()
    samples = sum(map(len, trial.samples.values()))
    for _ in range(8):
        model.run(feeds)
    assert trial.choice is not None or sum(map(len, trial.samples.values())) > samples


def _run_until(model, feeds, done, what: str, most: int = 2000) -> None:
    """Run `model` on `feeds` until `done()` (checked before each run), at most `most` runs."""
    for _ in range(most):
        if done():
            return
        model.run(feeds)
    raise AssertionError(f"{most} runs never {what}")
