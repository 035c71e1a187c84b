"""Whether a loop's hoisted work runs before its iterations or in them, measured per run.

Hoisting (engine/hoist.py) computes the body's work that reads no state of the loop a chunk of
iterations at a time. On a long loop or large rows that is the cheaper way; on a loop of a few
iterations of small steps, making the rows costs more than the iterations it spares (the
exporters' small models: docs/performance.md, "Measured effects of the engine's paths"). Which
one wins depends on the machine and on the run's operands, so it is a measured choice of whole
runs of the loop (accel/measured.py), keyed by the operands' shapes and small integer values (a
trip count): the hoisted driver, the default, until the work pays for a trial, then each in turn.
The drivers are compared as they run once their own choices are made: when the trial opens, so
do the trials of the hoisting driver's own choices that still wait for their work to pay, and
those of the other driver after its first run; while one of a driver's own choices is on trial,
the runs are that driver's and this choice counts none (a driver timed on its default kernels can
be twice as slow as it settles: tf2onnx's small tf.scan), for at most HOIST_WAIT_RUNS runs in
all. Both compute the same values: the hoisted rows are what the body would compute each
iteration.
"""

from __future__ import annotations

import threading

from ..abilities import abilities_of
from ..accel.measured import Measured
from ..tuning import HOIST_ROUNDS, HOIST_WAIT_RUNS
from ._core import operand_key

__all__ = ["HOISTED", "IN_THE_LOOP", "HoistChoice"]

HOISTED, IN_THE_LOOP = "hoisted", "in the loop"


class HoistChoice:
    """A loop node's runner: its hoisted driver, or, as `choice` measures, a driver of the same
    loop that hoists nothing (made at its first run by `plain`). It stands for the hoisted
    driver, the default (in the plan: its facts, with the choice; its spec, its measured
    choices), and sums the two drivers' counters."""

    def __init__(self, hoisted, plain):
        self.hoisted = hoisted
        self.label = hoisted.label
        self._make_plain, self._plain = plain, None
        self._lock = threading.Lock()
        self._inner = None  # (the hoisting driver's own measured choices, found at the first run)
        self._plain_inner = None  # (the other driver's, found after its first run)
        self._decided = False  # (the choice made on every key met: no inner trial is waited for)
        self._waited = 0  # (runs left to the drivers' own trials, uncounted: HOIST_WAIT_RUNS)
        # (A whole run of the loop a sample; two candidates within 10% cost within 10% whichever
        # is kept: no more rounds for them. Each candidate's first run warms up.)
        self.choice = Measured({HOISTED: hoisted, IN_THE_LOOP: self._run_plain},
                               rounds=HOIST_ROUNDS,
                               key=operand_key, label=_label, extend=False, unit="us/run")

    def _run_plain(self, *args):
        plain = self._plain
        if plain is None:
            with self._lock:
                if self._plain is None:
                    self._plain = self._make_plain()
                plain = self._plain
        return plain(*args)

    def __call__(self, *args):
        if self._decided:
            return self.choice(*args)
        if self._waited < HOIST_WAIT_RUNS:
            if self._inner_trial_open():
                # (A trial of the hoisting driver's own is timing its runs: this one waits, and
                # its own calls are not counted meanwhile.)
                self._waited += 1
                return self.hoisted(*args)
            if self._plain is not None and self._plain_trial_open():
                self._waited += 1
                return self._plain(*args)  # (the same, for the other driver's)
        trials = self.choice.trials
        self._decided = bool(trials) and all(t.choice is not None for t in trials.values())
        opening = self._plain is None
        result = self.choice(*args)
        if opening and self._plain is not None:  # (the trial is open: its first run made it)
            self._plain_inner = _choices_of(self._plain.facts())
            for measured in self._inner + self._plain_inner:
                measured.open_waiting()
        return result

    def _inner_trial_open(self) -> bool:
        """Whether one of the hoisting driver's measured choices is on trial now."""
        driver = self.hoisted
        if self._inner is None:  # (its kernels' choices and its chunk size stay; the driver may
            self._inner = _choices_of(driver.facts())  # let go of its run-level ones: below)
        return _on_trial(driver, self._inner)

    def _plain_trial_open(self) -> bool:
        """Whether one of the other driver's measured choices is on trial now."""
        return _on_trial(self._plain, self._plain_inner or [])

    def __getattr__(self, name):
        # (What else is asked of a loop driver, its spec, say, is the hoisted one's: the default.)
        return getattr(self.hoisted, name)

    @property
    def loops(self):
        return self.hoisted.loops

    def facts(self):
        """The hoisted driver's facts, with this choice and both drivers' counters."""
        facts = self.hoisted.facts()
        facts.hoisting = self.choice
        facts.counters = self.counters()
        return facts

    def counters(self):
        found = dict(self.hoisted.counters())
        if self._plain is not None:
            for name, count in self._plain.counters().items():
                found[name] = found.get(name, 0) + count
        return found

    def reset_counters(self):
        self.hoisted.reset_counters()
        if self._plain is not None:
            self._plain.reset_counters()


def _on_trial(driver, inner: list) -> bool:
    """Whether one of a loop driver's measured choices (`inner`, its kernels', and its run-level
    ones) is on trial now."""
    run_level = [driver.products, driver.steps_placement, *driver.placements.values()]
    return any(trial.open and trial.choice is None
               for measured in inner + [m for m in run_level if m is not None]
               for trial in measured.trials.values())


def _choices_of(facts) -> list:
    """The measured choices of a loop driver's kernels (destinations.LoopFacts): its steps' and
    hoisted kernels' formulations, and its chunk size. (A layer's own choice of cores is not
    one: in a loop, the loop's decides.)"""
    kernels = [step.fn for step in facts.body.steps] + [fn for _, fn in facts.hoisted_kernels]
    found = [abilities_of(fn).measured for fn in kernels] + [facts.chunk_sizing]
    return [measured for measured in found if isinstance(measured, Measured)]


def _label(key) -> str:
    shown = []
    for part in key:
        if isinstance(part, tuple):
            shape, _, value = part
            shown.append(str(value) if value is not None else "x".join(map(str, shape)) or "[]")
    return f"operands {', '.join(shown)}" if shown else "its operands"
