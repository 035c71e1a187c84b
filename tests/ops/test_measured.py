"""`Measured`: candidates timed in turn on their first calls, the fastest kept."""

import time

import pytest

from cyloop.ops._measured import Measured


def _candidates(calls):
    def slow(x):
        calls.append("slow")
        time.sleep(0.002)
        return x + 1

    def fast(x):
        calls.append("fast")
        return x + 1

    return {"slow": slow, "fast": fast}


def test_each_candidate_warms_up_then_runs_its_rounds_and_the_fastest_is_kept():
    calls = []
    measured = Measured(_candidates(calls), rounds=3)
    assert "still measuring" in measured.describe()
    results = [measured(k) for k in range(12)]
    assert results == [k + 1 for k in range(12)]  # every call computes, measured or not
    assert calls[:8] == ["slow", "fast"] * 4  # in turn: a warm-up and 3 timed rounds each
    assert measured.choice == "fast" and calls[8:] == ["fast"] * 4
    assert all(len(samples) == 3 for samples in measured.samples.values())
    assert measured.describe().startswith("fast, the fastest here (slow ")


def test_fix_uses_one_candidate_without_timing():
    calls = []
    measured = Measured(_candidates(calls))
    measured.fix()
    assert measured(1) == 2 and calls == ["slow"]  # the first candidate is the default
    assert measured.describe() == "slow (fixed, not measured)"
    measured.fix("fast")
    measured(1)
    assert calls[-1] == "fast" and not any(measured.samples.values())
    with pytest.raises(ValueError, match="no candidate 'medium'"):
        measured.fix("medium")
