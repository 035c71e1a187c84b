"""`Measured`: the default first, then, once the work on a key pays for it, the candidates timed in
turn and the fastest kept. Tests of the trial itself open it at once (``payback=0``)."""

import time

import pytest

from cyloop.abilities import declare
from cyloop.accel import measured as _measured
from cyloop.accel.measured import Measured


def _candidates(calls):
    def slow(x):
        calls.append("slow")
        time.sleep(0.002)
        return x + 1

    def fast(x):
        calls.append("fast")
        return x + 1

    return {"slow": slow, "fast": fast}


def _costing(clock, calls):
    """``run(name, cost)``: a candidate that logs its call and moves the fake clock on by its
    cost."""
    def run(name, cost):
        def candidate(x):
            calls.append(name)
            clock[0] += cost
            return x
        return candidate

    return run


def test_each_candidate_warms_up_then_runs_its_rounds_and_the_fastest_is_kept(monkeypatch):
    """Candidates within the early margin (here 1.25x) run all their rounds."""
    clock, cost = [0.0], {"slow": 1.25, "fast": 1.0}
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    calls = []

    def run(name):
        def candidate(x):
            calls.append(name)
            clock[0] += cost[name]
            return x + 1
        return candidate

    measured = Measured({"slow": run("slow"), "fast": run("fast")}, rounds=3, payback=0)
    assert measured.describe() == "not timed yet (slow, the default, until then)"
    assert measured(0) == 1 and measured.describe().startswith("still measuring (slow not timed")
    results = [1] + [measured(k) for k in range(1, 12)]
    assert results == [k + 1 for k in range(12)]  # every call computes, measured or not
    assert calls[:8] == ["slow", "fast"] * 4  # in turn: a warm-up and 3 timed rounds each
    (trial,) = measured.trials.values()
    assert trial.choice == "fast" and calls[8:] == ["fast"] * 4
    assert trial.samples == {"slow": [1.25] * 3, "fast": [1.0] * 3}
    assert measured.describe().startswith("fast, the fastest here (slow ")


def test_a_clearly_slower_candidate_drops_out_after_two_rounds(monkeypatch):
    """Past the early margin (1.3x between the slow one's fastest sample and the best one's
    slowest), a candidate stops taking turns after two timed calls; of three, the two close
    ones go on to their rounds."""
    clock, calls = [0.0], []
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    run = _costing(clock, calls)

    pair = Measured({"slow": run("slow", 2.5), "fast": run("fast", 1.0)}, rounds=5, payback=0)
    while not pair.trials or pair.trials[None].choice is None:
        pair(0)
    assert calls == ["slow", "fast"] * 3 and pair.trials[None].choice == "fast"
    calls.clear()
    trio = Measured({"a": run("a", 1.125), "b": run("b", 3.0), "c": run("c", 1.0)}, rounds=3,
                    payback=0)
    while not trio.trials or trio.trials[None].choice is None:
        trio(0)
    assert calls[:9] == ["a", "b", "c"] * 3 and "b" not in calls[9:]
    assert trio.trials[None].choice == "c"
    assert trio.trials[None].samples == {"a": [1.125] * 3, "b": [3.0] * 2, "c": [1.0] * 3}


@pytest.mark.parametrize("streak, kept", [(1, "steady"), (2, "own-layout")])
def test_a_streak_times_calls_that_read_what_the_same_candidate_wrote(streak, kept, monkeypatch):
    """A recurrent step's candidates hand their state on in their own layout: "own-layout" is
    free on a state it wrote and slow on another's, "steady" always costs a little. Taking
    turns call by call, own-layout only ever reads the other's state and looks slow; in
    streaks of two its timed call reads its own, as every call will once it is kept."""
    clock, calls = [0.0], []
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])

    def own_layout(state):
        calls.append("own-layout")
        clock[0] += 0.0 if state == "own-layout" else 10.0
        return "own-layout"

    def steady(state):
        calls.append("steady")
        clock[0] += 1.0
        return "steady"

    measured = Measured({"own-layout": own_layout, "steady": steady}, rounds=3, streak=streak,
                        payback=0)
    state = "start"
    for _ in range(40):
        state = measured(state)
    (trial,) = measured.trials.values()
    assert trial.choice == kept
    turns = ["own-layout"] * streak + ["steady"] * streak
    assert calls[:4 * streak] == turns * 2
    # Clearly apart (0 or 1 against 10): decided after two timed calls each.
    assert all(len(samples) == 2 for samples in trial.samples.values())


def test_consecutive_candidates_take_all_their_turns_in_a_row(monkeypatch):
    """`consecutive`: a candidate that slows whatever follows it ("noisy": a run on BLAS's
    own threads leaves them spinning) takes all its turns before the next one takes any, so
    only the other's warm-up call, which is no sample, follows it. Taking turns call by call,
    the other would be timed after it every time, and lose."""
    clock, noisy_ran_last = [0.0], [False]
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    calls = []

    def quiet(x):
        calls.append("quiet")
        clock[0] += 3.0 if noisy_ran_last[0] else 1.0
        noisy_ran_last[0] = False
        return x

    def noisy(x):
        calls.append("noisy")
        clock[0] += 2.0
        noisy_ran_last[0] = True
        return x

    for consecutive, kept in ((True, "quiet"), (False, "noisy")):
        calls.clear()
        noisy_ran_last[0] = False
        measured = Measured({"quiet": quiet, "noisy": noisy}, rounds=2, consecutive=consecutive,
                            payback=0)
        while not measured.trials or measured.trials[None].choice is None:
            measured(0)
        assert measured.trials[None].choice == kept
        if consecutive:  # quiet: a warm-up call and two timed ones; noisy, clearly slower
            # (2 against 1), drops out after its first timed call
            assert calls == ["quiet"] * 3 + ["noisy"] * 2
        else:
            assert calls[:6] == ["quiet", "noisy"] * 3


@pytest.mark.parametrize("later_cost, later_calls", [(1.5, 2), (1.2, 3), (0.9, 3), (0.5, 2)])
def test_a_consecutive_candidate_is_compared_from_its_first_timed_call(monkeypatch, later_cost,
                                                                      later_calls):
    """Past the early margin (1.3x the first candidate's slowest sample), a later consecutive
    candidate drops out after its warm-up and one timed call; within it, or faster, it runs its
    rounds, and the faster is kept."""
    clock, calls = [0.0], []
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    run = _costing(clock, calls)
    measured = Measured({"first": run("first", 1.0), "later": run("later", later_cost)},
                        rounds=2, consecutive=True, payback=0)
    while not measured.trials or measured.trials[None].choice is None:
        measured(0)
    assert calls == ["first"] * 3 + ["later"] * later_calls
    assert measured.trials[None].choice == ("later" if later_cost < 1 else "first")


def test_a_streak_must_be_positive_and_timed_by_call():
    with pytest.raises(ValueError, match="streak must be at least 1"):
        Measured(_candidates([]), streak=0)
    with pytest.raises(ValueError, match="a streak needs timing='call'"):
        Measured(_candidates([]), streak=2, timing="period")
    Measured(_candidates([]), streak=1, timing="period")  # no streak: periods are fine
    with pytest.raises(ValueError, match="give no streak"):
        Measured(_candidates([]), streak=2, consecutive=True)


def test_fix_uses_one_candidate_without_timing():
    calls = []
    measured = Measured(_candidates(calls))
    measured.fix()
    assert measured(1) == 2 and calls == ["slow"]  # the first candidate is the default
    assert measured.describe() == "slow (fixed, not measured)"
    measured.fix("fast")
    measured(1)
    assert calls[-1] == "fast" and not measured.trials
    with pytest.raises(ValueError, match="no candidate 'medium'"):
        measured.fix("medium")


def test_untimed_calls_take_the_choice_or_the_default_and_open_no_trial():
    calls = []
    measured = Measured(_candidates(calls), rounds=1, key=lambda x: x)
    with _measured.untimed():
        with _measured.untimed():  # nested blocks: untimed until the outer one ends
            assert measured(1) == 2
        assert measured(1) == 2
    assert calls == ["slow", "slow"] and not measured.trials
    while 1 not in measured.trials or measured.trials[1].choice is None:
        measured(1)
    chosen = measured.trials[1].choice
    with _measured.untimed():
        measured(1)
        assert measured(5) == 6  # a new key: the default, still no trial for it
    assert calls[-2:] == [chosen, "slow"] and list(measured.trials) == [1]


def test_each_key_is_measured_on_its_own_and_unbounded_keys_take_the_default(monkeypatch):
    """Keyed by the argument (think: operand shapes): a choice per key; past `max_keys`
    distinct keys, new ones run the default untimed and no trial is kept for them."""
    clock, calls = [0.0], []
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])

    def cheap_on_small(x):
        calls.append("a")
        clock[0] += 2.0 if x >= 100 else 0.0
        return -x

    def cheap_on_large(x):
        calls.append("b")
        clock[0] += 2.0 if x < 100 else 0.0
        return -x

    measured = Measured({"a": cheap_on_small, "b": cheap_on_large}, rounds=2,
                        key=lambda x: x >= 100, label=lambda big: "large" if big else "small",
                        max_keys=2, payback=0)
    for _ in range(6):
        assert measured(1) == -1 and measured(500) == -500
    assert measured.trials[False].choice == "a" and measured.trials[True].choice == "b"
    text = measured.describe()
    assert text.startswith("on small: a, the fastest here") and "; on large: b, the fastest" in text

    many = Measured({"a": lambda x: x, "b": lambda x: x}, key=lambda x: x, max_keys=3)
    for x in range(10):
        assert many(x) == x
    assert list(many.trials) == [0, 1, 2]


def test_medians_too_close_to_call_take_more_rounds_before_the_choice(monkeypatch):
    """Two candidates timed alike (a clock that ticks once a reading): each runs three times
    `rounds` timed calls, the most there are, before the first is kept."""
    ticks = iter(range(10**6))
    monkeypatch.setattr(_measured, "perf_counter", lambda: next(ticks))
    measured = Measured({"a": lambda x: x, "b": lambda x: x}, rounds=2, payback=0)
    calls = 0
    while not measured.trials or measured.trials[None].choice is None:
        assert measured(calls) == calls
        calls += 1
    trial = measured.trials[None]
    assert {len(s) for s in trial.samples.values()} == {3 * 2}  # after a warm-up call each
    assert calls == 2 * (1 + 3 * 2) and trial.choice == "a"


def test_period_timing_times_from_one_call_to_the_next_on_the_same_key(monkeypatch):
    """timing="period": a call's sample is the time until the next call on its key (in a loop
    body, the iteration around it), so a candidate whose cost falls downstream is seen."""
    clock = [0.0]
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    # "lazy" is free itself but makes whatever follows it take 3 s; "eager" takes 1 s in all.
    after = {"lazy": 3.0, "eager": 1.0}
    calls = []

    def run(name):
        def candidate(x):
            calls.append(name)
            return x
        return candidate

    measured = Measured({"lazy": run("lazy"), "eager": run("eager")}, rounds=2,
                        timing="period", payback=0)
    while not measured.trials or measured.trials[None].choice is None:
        measured(0)
        clock[0] += after[calls[-1]]
    trial = measured.trials[None]
    assert trial.choice == "eager"
    assert trial.samples == {"lazy": [3.0, 3.0], "eager": [1.0, 1.0]}
    assert measured.describe().startswith("eager, the fastest here (lazy 3000000.0 us")
    with pytest.raises(ValueError, match="timing must be"):
        Measured({"a": len}, timing="sometimes")


def test_pick_and_report_time_what_the_caller_chooses():
    """A caller that times something other than a call (the hoisted chunks do) picks the
    candidate, runs it as it likes and reports the time."""
    measured = Measured({"small": 8, "big": 64}, rounds=1, key=None, unit="us/row")
    seconds = {"small": 2e-6, "big": 1e-6}
    while True:
        name, trial = measured.pick(None)
        if trial is None:
            break
        measured.report(trial, name, seconds[name])
    assert name == "big" and measured.pick(None) == ("big", None)
    assert measured.describe() == "big, the fastest here (small 2.0 us/row, big 1.0 us/row)"
    measured.fix("small")
    assert measured.pick(None) == ("small", None)


def test_a_destination_reaches_the_candidate_but_not_the_key():
    """``out=`` goes to whichever candidate runs as one more positional argument, in a trial,
    once chosen and when fixed; the key (and so the trial) sees the other arguments only."""
    calls, keys = [], []

    def write(name):
        def candidate(x, out=None):
            calls.append((name, out is not None))
            if out is None:
                return [x + 1]
            out[0] = x + 1
            return out

        return candidate

    measured = Measured({"a": write("a"), "b": write("b")}, rounds=1,
                        key=lambda x: keys.append(x) or x % 2)
    while not all(trial.choice for trial in measured.trials.values()) or not measured.trials:
        slot = [None]
        assert measured(4, out=slot) is slot and slot == [5]
    assert set(measured.trials) == {0} and set(keys) == {4}  # one key: out was not part of it
    chosen = measured.trials[0].choice
    slot = [None]
    assert measured(6, out=slot) is slot and slot == [7] and calls[-1] == (chosen, True)
    assert measured(6) == [7] and calls[-1] == (chosen, False)
    measured.fix("b")
    slot = [None]
    assert measured(8, out=slot) is slot and slot == [9] and calls[-1] == ("b", True)


def test_settled_hears_which_candidates_are_still_in_use(monkeypatch):
    """`on_settled` hears, whenever a candidate leaves a trial, the candidates some key still
    uses (chosen, or still on trial), and on fix, the fixed one."""
    heard = []
    times = iter([0.0, 0.001, 0.0, 0.005, 0.0, 0.001, 0.0, 0.005] * 40)
    monkeypatch.setattr(_measured, "perf_counter", lambda: next(times))
    measured = Measured({"a": lambda x: x, "b": lambda x: x}, rounds=2, key=lambda x: x,
                        on_settled=heard.append)
    while 1 not in measured.trials or measured.trials[1].choice is None:
        measured(1)
    assert heard and heard[-1] == {measured.trials[1].choice}
    measured(2)  # a new shape: its trial uses both again
    measured.fix("b")
    assert heard[-1] == {"b"}


@pytest.mark.parametrize("extend", [True, False])
def test_a_trial_too_close_to_call_takes_more_rounds_unless_told_not_to(monkeypatch, extend):
    """Two candidates within 10% of each other: by default each takes up to three times its
    rounds before the choice; with ``extend=False`` (choices whose calls are whole runs) the
    faster after its rounds is kept then."""
    clock, calls = [0.0], []
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    run = _costing(clock, calls)

    measured = Measured({"a": run("a", 1.05), "b": run("b", 1.0)}, rounds=2, extend=extend,
                        payback=0)
    while not measured.trials or measured.trials[None].choice is None:
        measured(0)
    rounds = _measured.MAX_ROUNDS_FACTOR * 2 if extend else 2
    assert calls == ["a", "b"] * (1 + rounds)
    assert measured.trials[None].choice == "b"


def test_without_warm_up_each_candidate_s_first_call_is_a_sample(monkeypatch):
    """``warm_up=False``: the rounds start with each candidate's first call (a trial of whole
    runs whose candidates pay no one-time cost takes that many runs fewer)."""
    clock = [0.0]
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    calls = []
    run = _costing(clock, calls)
    for warm_up, calls_before_choice in ((True, 6), (False, 4)):
        calls.clear()
        measured = Measured({"a": run("a", 1.0), "b": run("b", 1.25)}, rounds=2,
                            warm_up=warm_up, extend=False, payback=0)
        while not measured.trials or measured.trials[None].choice is None:
            measured(0)
        assert len(calls) == calls_before_choice
        assert measured.trials[None].samples == {"a": [1.0, 1.0], "b": [1.25, 1.25]}
        assert measured.trials[None].choice == "a"


def test_steps_for_are_the_chosen_candidate_s_once_chosen():
    """A recurrent step's `steps_for` (cyloop/abilities.py `Recurrence`) answers for the candidate
    chosen on its arguments' key: None while that key is on trial (each call must be timed),
    the chosen one's answer after, None from a chosen candidate that has none; a fixed
    candidate's at once."""
    def plain(x):
        return x

    def stepping(x):
        return x

    declare(stepping, steps_for=lambda x: ("steps for", x))
    for kept, answer in (("stepping", ("steps for", 3)), ("plain", None)):
        step = Measured({"plain": plain, "stepping": stepping}, rounds=1, key=lambda x: x > 0,
                        payback=0)
        step.pick(True)
        trial = step.trials[True]
        assert step.steps_for(3) is None
        for name in step.candidates:  # (a warm-up call each, then one timed)
            step.report(trial, name, 0.0)
            step.report(trial, name, 1.0 if name == kept else 2.0)
        assert trial.choice == kept
        assert step.steps_for(3) == answer
        assert step.steps_for(-3) is None  # (another key, not measured yet)
    step = Measured({"plain": plain, "stepping": stepping})
    step.fix("stepping")
    assert step.steps_for(-3) == ("steps for", -3)


def test_settled_says_whether_a_trial_can_still_change_the_candidate():
    """Fixed, the only candidate, or chosen on the arguments' key: settled; on trial or never
    called on that key: not."""
    measured = Measured({"a": lambda x: x, "b": lambda x: x}, rounds=1, key=lambda x: x)
    assert not measured.settled(1)
    for _ in range(20):  # (warm-ups and a round each: the trial ends well within these)
        name, trial = measured.pick(1)
        if trial is None:
            break
        assert not measured.settled(1)
        measured.report(trial, name, 1.0 if name == "a" else 2.0)
    assert measured.settled(1) and not measured.settled(2)
    assert Measured({"only": lambda x: x}).settled(3)
    measured.fix("b")
    assert measured.settled(2)


def test_the_default_runs_alone_until_the_work_on_its_key_pays_for_a_trial(monkeypatch):
    """The first calls run the default alone, each timed as it goes (its first one aside); the
    trial opens once the default has made `PAYBACK` times as many calls as the trial adds of
    the others ((2 - 1) candidates x (3 rounds + a warm-up) x `PAYBACK`), and needs no warm-up
    of the default then. Every call computes the same, whichever runs."""
    clock, calls = [0.0], []
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    run = _costing(clock, calls)
    measured = Measured({"slow": run("slow", 1.25), "fast": run("fast", 1.0)}, rounds=3)
    due = _measured.PAYBACK * (2 - 1) * (3 + 1)
    for x in range(1 + due):
        assert measured(x) == x
    (trial,) = measured.trials.values()
    assert calls == ["slow"] * (1 + due) and trial.open and trial.waited == due
    assert all(not s for s in trial.samples.values()) and trial.warm == {"slow"}
    results = [measured(x) for x in range(20)]
    assert results == list(range(20)) and trial.choice == "fast"
    # In turn from the trial's first call: the default straight to its rounds, the other
    # after its warm-up call (the default's turn meanwhile is one sample more).
    assert calls[1 + due:1 + due + 8] == ["slow", "fast"] * 4
    assert trial.samples == {"slow": [1.25] * 4, "fast": [1.0] * 3}
    assert calls[-5:] == ["fast"] * 5


def test_a_key_met_a_few_times_never_trials_and_says_so(monkeypatch):
    """Calls short of paying for a trial run the default, however slow it is next to the
    others; `describe` and the plan's `Timing` say the default runs until the work pays."""
    from cyloop.engine.plan import choice_of

    clock, calls = [0.0], []
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    run = _costing(clock, calls)
    measured = Measured({"slow": run("slow", 3.0), "fast": run("fast", 1.0)}, rounds=2,
                        key=lambda x: x)
    for _ in range(5):
        measured(7)
    trial = measured.trials[7]
    due = _measured.PAYBACK * (2 - 1) * (2 + 1)
    assert calls == ["slow"] * 5 and not trial.open and trial.choice is None
    assert trial.waited == 4 and not measured.settled(7) and measured.chosen(7) is None
    assert measured.describe() == (f"on 7: slow until the work pays for a trial (4 of {due} "
                                   f"calls; slow 3000000.0 us, fast not timed)")
    (timing,) = choice_of("formulation", "a step", measured).trials
    assert timing.waiting == due - 4 and timing.chosen is None
    assert timing.times == {"slow": 3.0, "fast": None}
    (line,) = choice_of("formulation", "a step", measured).lines()
    assert line == (f"a step on 7: the default, slow, until the work pays for a trial "
                    f"({due - 4} calls more; slow 3000000.0 µs, fast not timed)")


def test_a_default_too_quick_to_time_apart_is_kept_untried(monkeypatch):
    """A default whose calls take less than ten times what timing one costs is kept without a
    trial once it has `rounds` timings: a tenth of its time, the least difference a trial
    calls, is lost in the timings' own."""
    clock, calls = [0.0], []
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    run = _costing(clock, calls)
    quick = _measured.timer_cost() * 2  # (a fifth of the least call it would time)
    measured = Measured({"slow": run("slow", quick), "fast": run("fast", quick / 4)},
                        rounds=3)
    for x in range(10):
        assert measured(x) == x
    (trial,) = measured.trials.values()
    assert calls == ["slow"] * 10 and trial.choice == "slow" and trial.untried
    assert measured.settled(0) and not trial.open
    assert "slow, untried: its calls are too quick to time apart" in measured.describe()
    calls.clear()
    long_enough = Measured({"slow": run("slow", quick * 10), "fast": run("fast", quick)},
                           rounds=3)
    for x in range(10):
        long_enough(x)
    assert not long_enough.trials[None].untried and long_enough.trials[None].choice is None


@pytest.mark.parametrize("rounds, costs, streak", [
    (3, {"d": 1.0, "e": 2.0}, 1),
    (5, {"d": 1.0, "e": 1.25, "f": 1.5}, 1),
    (2, {"d": 1.0, "e": 1.9}, 2),
])
def test_a_trial_costs_a_bounded_share_of_the_work_before_it(monkeypatch, rounds, costs, streak):
    """What the trial's calls of the other candidates cost more than the default's would have
    is at most the default's work before it over `PAYBACK`, times how much slower they are."""
    clock, calls = [0.0], []
    monkeypatch.setattr(_measured, "perf_counter", lambda: clock[0])
    run = _costing(clock, calls)
    measured = Measured({name: run(name, cost) for name, cost in costs.items()},
                        rounds=rounds, streak=streak)
    while not measured.trials or measured.trials[None].choice is None:
        measured(0)
    before = calls.index(next(n for n in calls if n != "d"))  # (the default's calls alone)
    extra = sum(costs[n] - costs["d"] for n in calls[before:])
    slower = max(costs.values()) / costs["d"] - 1
    assert before > 1 and 0 < extra <= before * costs["d"] * slower / _measured.PAYBACK
    assert measured.trials[None].choice == "d"


def test_steps_while_a_trial_waits_are_the_default_s_and_count_each_step():
    """A recurrent step's `steps_for` offers the default's steps while its key's trial waits;
    each call of them counts as the steps it made, and once they pay for the trial the answer
    is None (the steps one at a time take their turns)."""
    made = []

    def plain(x):
        return x

    def steps(args, rows, outs, staged):
        made.append(len(rows))
        return (args[0],)

    declare(plain, steps_for=lambda x: steps)
    step = Measured({"plain": plain, "other": lambda x: x}, rounds=1, key=lambda x: x > 0)
    due = _measured.PAYBACK * (2 - 1) * (1 + 1)
    many = step.steps_for(3)
    assert many is not None and many((3,), [0] * 5, None, True) == (3,)
    trial = step.trials[True]
    assert trial.waited == 4 and not trial.open  # (its first step pays one-time costs)
    assert step.steps_for(3)((3,), [0] * (due - 4), None, True) == (3,)
    assert trial.open and step.steps_for(3) is None and made == [5, due - 4]
    with _measured.untimed():  # (one-offs: the default's steps, uncounted)
        assert step.steps_for(-3) is steps and False not in step.trials
