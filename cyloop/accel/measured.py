"""`Measured`: equivalent formulations of one computation, timed where they run (docs/design.md,
"Measured choices").

Which of two equivalent numpy spellings is faster depends on the CPU (its SIMD width, its BLAS
kernels, its caches) and on the operands' shapes, so a kernel with candidates does not pick one:
on each shape it runs its default first, timing those calls as they go, and once the work done
on that shape has paid for a trial (`PAYBACK`) its calls rotate through the candidates, timing
each; from then on it keeps the fastest on this machine for that shape. A shape met a few times
never trials, and one whose calls are too quick to time apart settles on the default untried.
Results agree to rounding whichever runs. ``Model(..., tune=False)`` fixes the first (default)
candidate, for reproducible runs; tests force each candidate in turn (`fix`).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Hashable
from time import perf_counter

from ..abilities import abilities_of
from ..tuning import (
    CLEAR,
    CLOSE,
    EARLY_ROUNDS,
    MAX_KEYS,
    MAX_ROUNDS_FACTOR,
    PAYBACK,
    ROUNDS,
    TIMER_SAMPLES,
)

__all__ = ["Measured", "Trial", "timed_now", "untimed"]

# A default whose median call is under timer_cost() / CLOSE is settled untried: the timings'
# own cost is then over a tenth of the call, and no difference a trial could call is resolved.


def _median(samples) -> float:
    """The median of `samples`, as `statistics.median` has it (whose module's import would cost
    `import cyloop` a few milliseconds)."""
    ordered = sorted(samples)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


@functools.cache
def timer_cost() -> float:
    """The median time between two `perf_counter` readings in a row on this machine: what timing
    a call adds to it, the grain below which two timings cannot be told apart. (Read with
    `time.perf_counter` itself, once a process.)"""
    clock = time.perf_counter
    gaps = []
    for _ in range(TIMER_SAMPLES):
        start = clock()
        gaps.append(clock() - start)
    return _median(gaps)


class _Depth(threading.local):
    depth = 0  # (a class default: a thread's first look finds 0 without raising)


_untimed = _Depth()  # .depth > 0: this thread's calls are one-offs (see `untimed`)


class _Untimed:
    """The context manager `untimed` gives (one object for every block: a class's ``with`` costs
    a third of a generator's, and a loop's hoisted chunk enters a few such blocks a run)."""

    __slots__ = ()

    def __enter__(self):
        _untimed.depth += 1

    def __exit__(self, *raised):
        _untimed.depth -= 1


_UNTIMED = _Untimed()


def untimed() -> _Untimed:
    """Calls in this block (on this thread) are one-offs, not samples: a `Measured` runs the
    candidate it chose for the key, or else its default, and opens no trial. For a call that
    will not come back on its shape (the hoisted part's first-row probe, engine/chunks.py): a
    trial it opened would never finish, and every candidate it names would keep what it holds
    (a prepared weight) for good."""
    return _UNTIMED


def timed_now() -> bool:
    """Whether this thread's calls may be samples now: not inside an `untimed` block."""
    return not _untimed.depth


class Trial:
    """The timings of the candidates on one key (one set of shapes) and, once each has run its
    rounds, the choice. Before it opens (`open`), the default's calls on the key are counted
    (`waited`) until they number `due`."""

    def __init__(self, key, names, rounds: int, due: int = 0):
        self.key = key
        self.samples: dict[str, list[float]] = {name: [] for name in names}
        self.default = names[0]
        self.needed = rounds  # timed calls each candidate needs before the choice
        self.active = list(names)  # the candidates still taking turns
        self.choice: str | None = None
        self.turn = 0
        self.warm: set[str] = set()
        self.due = due  # the default's calls before the candidates take turns
        self.open = due <= 0
        self.waited = 0  # the default's calls counted so far (its first aside: one-time costs)
        self.ran = False  # whether the default has made its first call on the key
        self.recent: list[float] = []  # the default's last timings while the trial waits
        self.untried = False  # settled on the default untried: its calls too quick to time

    def times(self) -> dict[str, float | None]:
        """Each candidate's median time so far (None: not timed); while the trial waits, the
        default's recent calls'."""
        if not self.open:
            return {name: _median(self.recent) if name == self.default
                    and self.recent else None for name in self.samples}
        return {name: _median(s) if s else None for name, s in self.samples.items()}

    def describe(self, unit: str = "us") -> str:
        times = ", ".join(f"{name} {t * 1e6:.1f} {unit}" if t is not None else
                          f"{name} not timed" for name, t in self.times().items())
        if self.untried:
            return f"{self.choice}, untried: its calls are too quick to time apart ({times})"
        if not self.open:
            return (f"{self.default} until the work pays for a trial ({self.waited} of "
                    f"{self.due} calls; {times})")
        if self.choice is None:
            return f"still measuring ({times})"
        return f"{self.choice}, the fastest here ({times})"


class Measured:
    """Call one of `candidates` (name -> callable, the first the default) per call. On each key
    (``key(*args)``, say the operands' shapes; one key if None) the default runs alone at first,
    each call timed (its first aside: one-time costs); its trial opens once it has made `payback`
    times as many calls there as the trial will add of the other candidates (``(candidates - 1)
    * (rounds + 1) * streak``), so that the trial costs a bounded share of the work done, the
    first results come at the default's speed, and a key met a few times never trials. A default
    whose median call is under ten times what a timing costs (`timer_cost`) is kept untried: no
    difference a trial could resolve would be worth its timings (calls timed whole, that is: a
    `unit` per row or iteration is a share of a longer span). ``payback=0`` opens each trial
    on its key's first call. In a trial the candidates run in turn, each once to warm up (the
    default has, unless the trial opened at once) and `rounds` times more (up to three times as
    many while the two best medians are within 10%), then the one with the lowest median time is
    kept for that key. A candidate clearly slower after two timed calls each (its fastest sample
    over 1.3 times the slowest of the best one's) stops taking turns then, and the last one left
    is kept. `label(key)` names a key in the plan. Past `max_keys` keys (shapes that keep
    changing, say a growing operand), new keys take the default without timing: no trial is kept
    per shape of an unbounded series.

    ``timing="call"`` times each call. ``timing="period"`` times from one call to the next on the
    same key instead: inside a loop body that is one iteration with the candidate in effect, for
    choices whose cost shows downstream of the call (a Split's views make its consumers read
    strided memory; copies cost a copy but leave them contiguous). A period that spans a gap
    between runs is an outlier the median absorbs.

    ``out=``, if given, reaches the candidate as one more positional argument (the key sees the
    others only): an engine destination for kernels whose candidates all take one.

    ``streak``: each candidate runs that many calls in a row, and only the last of them is
    timed (with ``timing="call"`` only). For a recurrent step whose outputs are its own next
    inputs (a state in the candidate's layout): a timed call then reads what the same candidate
    wrote, as every call will once it is chosen, not what the previous candidate left (a
    gate-major step hands on transposed views, which a batch-major one reads strided).

    ``consecutive``: each candidate takes all its turns (its warm-up call and its rounds) before
    the next one starts, instead of taking turns call by call. For choices whose candidates
    leave something behind that slows the next one (a run with BLAS's own threads leaves them
    spinning on the core the next run's helper thread needs: `_gemm.set_products_on_two_cores`):
    then only a candidate's warm-up call follows another candidate. A later candidate clearly
    slower than the best before it (by the margin above) drops out after its first timed call.

    ``extend=False``: a trial too close to call after its rounds keeps the faster candidate then,
    without more rounds. For choices whose calls are whole runs of a model, which the user waits
    for: between runs the time moves by more than 10% on a shared machine, which three times as
    many rounds do not resolve, and two candidates within 10% cost within 10% whichever is kept.

    ``warm_up=False``: each candidate's first call is a sample too. For choices whose
    candidates pay no one-time cost on their first call (where a value lives: a pool's first
    run makes two small buffers), so that a trial of whole runs takes two fewer.

    A caller that times something other than a call (say, a hoisted chunk and the iterations it
    feeds, or a whole run) uses `pick` and `report` directly, and reports the default's calls
    while the trial waits too (`pick` gives their `Trial`, not yet `open`): a call is then what
    it times, a run for a run-level choice. `unit` names what the samples measure."""

    def __init__(self, candidates: dict[str, Callable], rounds: int = ROUNDS,
                 key: Callable[..., Hashable] | None = None,
                 label: Callable[[Hashable], str] = str, max_keys: int = MAX_KEYS,
                 timing: str = "call", unit: str = "us", streak: int = 1,
                 on_settled: Callable[[set], None] | None = None, consecutive: bool = False,
                 extend: bool = True, warm_up: bool = True, payback: float = PAYBACK):
        if timing not in ("call", "period"):
            raise ValueError(f"timing must be 'call' or 'period', not {timing!r}")
        if streak < 1:
            raise ValueError(f"streak must be at least 1, not {streak}")
        if streak > 1 and consecutive:
            raise ValueError("consecutive candidates take their turns in one streak each: "
                             "give no streak")
        if streak > 1 and timing == "period":
            # A period runs from one call to the next: the period a streak's last call begins
            # would end in the next candidate's first call, and time both.
            raise ValueError("a streak needs timing='call': a timed period would run into the "
                             "next candidate's streak")
        self.candidates = dict(candidates)
        self.rounds = rounds
        self.streak = streak
        self.consecutive = consecutive
        self.extend = extend
        self.warm_up = warm_up
        self.payback = payback
        self.max_keys = max_keys
        self.unit = unit
        self.trials: dict[Hashable, Trial] = {}
        self.fixed: str | None = None
        self._key, self._label, self._period = key, label, timing == "period"
        self._chosen: dict[Hashable, str] = {}  # key -> the kept candidate
        self._chosen_fn: dict[Hashable, Callable] = {}
        self._pending: dict[Hashable, tuple] = {}  # period timing: key -> (trial, name, start)
        self._all = next(iter(self.candidates.values())) if len(self.candidates) == 1 else None
        self._lock = threading.Lock()
        self._on_settled = on_settled

    def __call__(self, *args, out=None):
        # (``out``, a destination, reaches the candidates as one more positional; the chosen
        # one is called from here, the hot path of a loop body's step: no call more.)
        if self._all is not None:
            return self._all(*args) if out is None else self._all(*args, out)
        key = self._key(*args) if self._key is not None else None
        chosen = self._chosen_fn.get(key)
        if chosen is not None:
            return chosen(*args) if out is None else chosen(*args, out)
        return self._call(args, args if out is None else args + (out,))

    def _call(self, keyed, args):
        """A call with `args`, keyed and chosen by `keyed` (args but a destination)."""
        if self._all is not None:
            return self._all(*args)
        key = self._key(*keyed) if self._key is not None else None
        chosen = self._chosen_fn.get(key)
        if chosen is not None:
            return chosen(*args)
        trial = self.trials.get(key)
        if trial is not None and not trial.open and trial.choice is None and not self._period \
                and self.fixed is None and not _untimed.depth:
            # (waiting: the default, timed; `pick`'s own checks are these)
            default = trial.default
            start = perf_counter()
            result = self.candidates[default](*args)
            self.report(trial, default, perf_counter() - start)
            return result
        name, trial = self.pick(key)
        if self._period:
            self._next_period(key, trial, name)
            return self.candidates[name](*args)
        if trial is None:
            return self.candidates[name](*args)
        start = perf_counter()
        result = self.candidates[name](*args)
        self.report(trial, name, perf_counter() - start)
        return result

    def _next_period(self, key, trial, name):
        now = perf_counter()
        with self._lock:
            pending = self._pending.pop(key, None)
            if trial is not None:
                self._pending[key] = (trial, name, now)
        if pending is not None:
            self.report(pending[0], pending[1], now - pending[2])

    def steps_for(self, *args):
        """The `steps` of the candidate chosen for these arguments' key (a recurrent step's,
        cyloop/abilities.py `Recurrence`: each candidate's `steps_for` ability), or None while
        that choice is on trial, or if the chosen candidate has none. While the key's trial
        waits, the default's steps, each call of them counted as the steps it makes (until the
        trial is due: then None, and the steps one at a time take their turns)."""
        chosen = self._all
        if chosen is None:
            key = self._key(*args) if self._key is not None else None
            chosen = self._chosen_fn.get(key)
            if chosen is None:
                return self._waiting_steps(key, args)
        steps_for = abilities_of(chosen).steps_for
        return None if steps_for is None else steps_for(*args)

    def _waiting_steps(self, key, args):
        """`steps_for` on a key not settled: the default's steps while its trial waits."""
        steps_for = abilities_of(next(iter(self.candidates.values()))).steps_for
        steps = None if steps_for is None else steps_for(*args)
        return None if steps is None else self._counted(steps, key)

    def waiting_steps(self, steps, *args):
        """`steps` (the default's, a recurrent step's: cyloop/abilities.py `Recurrence`), each
        call of them counted as the steps it makes, while the trial on these arguments' key
        waits (or they are one-offs: `untimed`; then uncounted); None once it is due or open.
        For a kernel that offers its default's steps itself (accel/fused.py)."""
        if self._all is not None or self.fixed is not None:
            return None
        key = self._key(*args) if self._key is not None else None
        return None if key in self._chosen_fn else self._counted(steps, key)

    def _counted(self, steps, key):
        trial = None
        if not _untimed.depth:
            with self._lock:
                trial = self._trial(key)
            if trial is not None and (trial.open or trial.choice is not None):
                return None  # (on trial; or just chosen: the next call's answer)
        if trial is None:
            return steps
        default = trial.default

        def counted(call_args, rows, outs, staged):
            start = perf_counter()
            done = steps(call_args, rows, outs, staged)
            if done is not None:
                with self._lock:
                    self._wait(trial, default, (perf_counter() - start) / len(rows), False,
                               len(rows))
            return done

        return counted

    def chosen(self, *args) -> str | None:
        """The name of the candidate these arguments' key runs from now on (fixed, the only
        one, or chosen), or None while it is on trial."""
        if self.fixed is not None:
            return self.fixed
        if self._all is not None:
            return next(iter(self.candidates))
        return self._chosen.get(self._key(*args) if self._key is not None else None)

    def settled(self, *args) -> bool:
        """Whether the candidate for these arguments is settled: fixed, the only one, or chosen
        on their key (no trial will change it)."""
        if self._all is not None:
            return True
        return (self._key(*args) if self._key is not None else None) in self._chosen_fn

    def pick(self, key: Hashable = None) -> tuple[str, Trial | None]:
        """The candidate to run now on `key`, and the trial its time goes to (None when nothing
        is to be timed: fixed, chosen already, a key past `max_keys`, or a call of a streak but
        its last)."""
        if self.fixed is not None:
            return self.fixed, None
        chosen = self._chosen.get(key)
        if chosen is not None:
            return chosen, None
        names = list(self.candidates)
        if _untimed.depth:
            return names[0], None
        with self._lock:
            trial = self._trial(key)
            if trial is None or trial.choice is not None:
                return (names[0] if trial is None else trial.choice), None
            if not trial.open:  # (the default, its time counted: `_wait`)
                return names[0], trial
            turn, trial.turn = trial.turn, trial.turn + 1
        active = trial.active
        if self.consecutive:  # the first candidate still short of samples (see the class)
            name = next((n for n in active if n not in trial.warm
                         or len(trial.samples[n]) < trial.needed), active[-1])
            return name, trial
        name = active[turn // self.streak % len(active)]
        # Within a streak only the last call is timed.
        return name, (trial if turn % self.streak == self.streak - 1 else None)

    def _trial(self, key) -> Trial | None:
        """The trial on `key`, made on its first call; None past `max_keys` (under the lock)."""
        trial = self.trials.get(key)
        if trial is None and len(self.trials) < self.max_keys:
            names = list(self.candidates)
            extra = (len(names) - 1) * (self.rounds + (1 if self.warm_up else 0)) * self.streak
            trial = self.trials[key] = Trial(key, names, self.rounds,
                                             int(self.payback * extra))
            if not self.warm_up:
                trial.warm.update(names)
        return trial

    def report(self, trial: Trial, name: str, seconds: float) -> None:
        """One timing of candidate `name` on `trial` (as `pick` gave them): a call of the default
        while the trial waits, or a sample; the choice is made once every candidate still in the
        trial has its rounds, or one is left. When a candidate leaves a trial, ``on_settled``
        hears which candidates some key still uses (chosen, or still on trial or waiting): the
        others may let go of what they keep (a prepared weight)."""
        with self._lock:
            before = len(trial.active), trial.choice
            if trial.open:
                self._report(trial, name, seconds)
            else:  # (a time "per" something is a share of a longer span: no call too quick)
                self._wait(trial, name, seconds, "/" not in self.unit)
            changed = (len(trial.active), trial.choice) != before
            in_use = self._in_use() if changed and self._on_settled is not None else None
        if in_use is not None:
            self._on_settled(in_use)

    def _in_use(self) -> set:
        """The candidates chosen for some key or still on some trial (and the default, once keys
        past `max_keys` take it untimed)."""
        names = set(self._chosen.values())
        if len(self.trials) >= self.max_keys:
            names.add(next(iter(self.candidates)))
        for trial in self.trials.values():
            if trial.choice is None:
                names.update(trial.active)
        return names

    def _wait(self, trial: Trial, name: str, seconds: float, whole: bool,
              calls: int = 1) -> None:
        """A call of the default (`calls` of them, `seconds` each) while `trial` waits (under
        the lock): counted, and the trial opens once they number its `due`, or the default is
        kept untried if its calls are too quick to time apart."""
        if trial.open or trial.choice is not None or name != trial.default:
            return
        if not trial.ran:  # (its first call pays one-time costs: no guide to the rest)
            trial.ran = True
            calls -= 1
            if calls <= 0:
                return
        trial.waited += calls
        recent = trial.recent
        recent.append(seconds)
        if len(recent) > 2 * self.rounds:
            del recent[0]
        # (Looked at every `rounds` calls: a median each call would cost more than a timing.)
        if whole and trial.waited % self.rounds == 0 \
                and _median(recent) * CLOSE < timer_cost():
            trial.untried = True
            self._choose(trial, trial.default)
        elif trial.waited >= trial.due:
            trial.open = True
            trial.recent = []
            trial.warm.add(trial.default)  # (its one-time costs are paid)

    def _report(self, trial: Trial, name: str, seconds: float) -> None:
        """`report`'s work, under the lock."""
        if trial.choice is not None or name not in trial.active:
            return
        if name in trial.warm:
            trial.samples[name].append(seconds)
        else:  # a first call pays one-time costs (caches, page faults): not a sample
            trial.warm.add(name)
        samples = {n: trial.samples[n] for n in trial.active}
        # Consecutive candidates are compared from the later one's first sample on (those before
        # it have all their rounds): a whole run on the clearly slower one is what it saves.
        early = 1 if self.consecutive else EARLY_ROUNDS
        if all(len(s) >= early for s in samples.values()):
            best = min(samples, key=lambda n: _median(samples[n]))
            ceiling = CLEAR * max(samples[best])
            trial.active = [n for n in trial.active if n == best or min(samples[n]) <= ceiling]
            if len(trial.active) == 1:
                self._choose(trial, best)
                return
            samples = {n: trial.samples[n] for n in trial.active}
        if all(len(s) >= trial.needed for s in samples.values()):
            medians = sorted((_median(s), n) for n, s in samples.items())
            close = medians[1][0] < medians[0][0] * (1 + CLOSE)
            if close and self.extend and trial.needed < MAX_ROUNDS_FACTOR * self.rounds:
                trial.needed += self.rounds  # too close to call on this many: more rounds
            else:
                self._choose(trial, medians[0][1])

    def _choose(self, trial: Trial, name: str) -> None:
        trial.choice = name
        key = trial.key
        self._chosen[key] = name
        self._chosen_fn[key] = self.candidates[name]
        self._pending.pop(key, None)

    def open_waiting(self) -> None:
        """Open every trial still waiting for its default's calls to pay for it, now: for a
        choice inside a candidate of a larger choice (a loop's two drivers, engine/
        hoist_choice.py), which is to time its candidates as they run once their own choices
        are made. A default too quick to time apart is kept untried, as `_wait` keeps it."""
        with self._lock:
            for trial in self.trials.values():
                if trial.open or trial.choice is not None:
                    continue
                if trial.recent and _median(trial.recent) * CLOSE < timer_cost():
                    trial.untried = True
                    self._choose(trial, trial.default)
                    continue
                trial.open, trial.recent = True, []
                if trial.ran:
                    trial.warm.add(trial.default)  # (its one-time costs are paid)

    def fix(self, name: str | None = None) -> None:
        """Use `name` (default: the first candidate) for every key from now on, without timing."""
        name = next(iter(self.candidates)) if name is None else name
        if name not in self.candidates:
            raise ValueError(f"no candidate {name!r} (candidates: {list(self.candidates)})")
        self.fixed, self._all = name, self.candidates[name]
        if self._on_settled is not None:
            self._on_settled({name})

    def key_label(self, key: Hashable) -> str:
        """How the plan names `key` (its ``label``)."""
        return self._label(key)

    def describe(self) -> str:
        """The choice and the median time of each candidate, per key, in one line (the plan
        reads `trials` and `fixed` itself: engine/plan.py `Choice`)."""
        if self.fixed is not None:
            return f"{self.fixed} (fixed, not measured)"
        if len(self.candidates) == 1:
            return f"{next(iter(self.candidates))} (the only candidate)"
        if not self.trials:  # (calls made untimed, or none: they run the default)
            return f"not timed yet ({next(iter(self.candidates))}, the default, until then)"
        if list(self.trials) == [None]:
            return self.trials[None].describe(self.unit)
        return "; ".join(f"on {self._label(key)}: {trial.describe(self.unit)}"
                         for key, trial in self.trials.items())
