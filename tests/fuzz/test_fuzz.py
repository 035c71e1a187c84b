"""The CI fuzz run: mutated models and feeds end in a result or a CyloopError, never another
exception, a signal, a hang, a written feed.

Deterministic (hypothesis derandomized: the cases are a function of the code) and small: about
half a minute for the directory on 2 cores. The long run is ``python -m tests.fuzz`` (see
``tests/fuzz/__main__.py``). A failure names each failing case's mutations and the directory its
reproducer was saved to (``python -m tests.fuzz --replay DIR`` runs it in-process).
"""

import re

import numpy as np
import pytest

from .campaign import campaign
from .corpus import ir_seeds, onnx_seeds
from .harness import Report, Worker, replay, save_reproducer
from .mutate import feed_cases, model_cases

# Failures already reported, whose fix belongs to files this suite's authors do not edit
# (status pattern, message pattern, what to fix): when every failure of a run is one of these, the
# test xfails naming them; any other failure fails it. Remove an entry once its fix lands.
# Failures already reported and not yet fixed: (outcome status, message pattern, what to fix).
# A run whose every failure is listed here xfails naming the fixes; any other failure fails it.
KNOWN: list[tuple[str, str, str]] = []


def _known(outcome):
    """What to fix, if `outcome` is a known failure."""
    for status, message, fix in KNOWN:
        if re.fullmatch(status, outcome["status"]) and re.search(message, outcome["message"]):
            return fix
    return None


# Per CI run: cases per kind (about 150 cases/s on one core).
BUDGET = {"onnx-models": 1500, "ir-models": 1200, "feeds": 1000}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return onnx_seeds() + ir_seeds(tmp_path_factory.mktemp("seeds"))


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    # max_iterations small, so that a loop a mutation made endless stops in well under a second
    with Worker(tmp_path_factory.mktemp("worker"), timeout=15.0, address_space=3 << 30,
                max_iterations=10**4, time_limit=5.0, memory_limit=512 << 20) as w:
        yield w


def _check(report: Report):
    if not report.failures:
        return
    unknown = [failure for failure in report.failures if _known(failure[1]) is None]
    if unknown:
        report.failures = unknown
        pytest.fail(f"{len(unknown)} cases escaped:\n{report.describe_failures()}\n\n"
                    f"{report.table()}", pytrace=False)
    known = sorted({_known(outcome) for _, outcome, _ in report.failures})
    pytest.xfail(f"{len(report.failures)} known failures: " + "; ".join(known))


def test_the_harness_reports_every_kind_of_failure(tmp_path):
    """Outcomes and restarts, on cases that misbehave on purpose (the worker's self-test)."""
    actions = ["ok", "escape", "segfault", "hang", "memory", "write_feed", "exit", "ok"]
    cases = [{"id": k, "kind": "selftest", "action": action, "seed": action,
              "classes": ["selftest"], "feeds": ("dict", [("x", ("value", np.zeros(2), []))])}
             for k, action in enumerate(actions)]
    report = Report()
    with Worker(tmp_path / "worker", timeout=1.0, selftest=True, address_space=2 << 30) as w:
        outcomes = w.run(cases)
        starts = w.starts
    for case, outcome in zip(cases, outcomes):
        report.add(case, outcome, tmp_path / "failures")
    assert [o["status"] for o in outcomes] == [
        "result", "escape:KeyError", "signal:SIGSEGV", "timeout", "MemoryError", "bad-result",
        "exit:3", "result"]
    assert starts == 4  # the first, then after the crash, the hang and the exit
    assert [o["id"] for o in outcomes] == list(range(len(actions)))
    failed = {outcome["status"]: where for _, outcome, where in report.failures}
    assert set(failed) == {"escape:KeyError", "signal:SIGSEGV", "timeout", "bad-result",
                           "exit:3"}
    assert "Segmentation fault" in (failed["signal:SIGSEGV"] / "outcome.txt").read_text()
    assert "in run" in (failed["timeout"] / "outcome.txt").read_text()  # where it hung
    assert "KeyError: 'a deliberate escape'" in (failed["escape:KeyError"]
                                                 / "outcome.txt").read_text()
    assert "a feed array was written to" in (failed["bad-result"] / "outcome.txt").read_text()
    assert report.outcomes["result"] == 2
    assert "selftest" in report.table()


def test_a_saved_reproducer_replays_in_process(seeds, tmp_path):
    import cyloop

    seed = next(s for s in seeds if s.name == "onnx.loop")
    case = {"id": 0, "kind": "onnx", "seed": seed.name, "classes": ["feeds.keys"],
            "notes": ["drop 'M'"], "model": seed.model,
            "feeds": ("dict", [(k, ("value", v, [])) for k, v in seed.feeds.items()
                               if k != "M"])}
    where = save_reproducer(case, {"status": "cyloop:InputError", "message": "missing"},
                            tmp_path, 0)
    assert (where / "model.onnx").read_bytes() == seed.model
    with pytest.raises(cyloop.InputError, match="missing inputs"):
        replay(where)


def test_every_seed_runs(worker, seeds):
    cases = [{"id": k, "kind": s.kind, "seed": s.name, "classes": [s.name], "model": s.model,
              "xml": s.xml, "bin": s.bin,
              "feeds": ("dict", [(name, ("value", v, [])) for name, v in s.feeds.items()])}
             for k, s in enumerate(seeds)]
    outcomes = worker.run(cases)
    assert {c["seed"]: o["status"] for c, o in zip(cases, outcomes)} == \
        {c["seed"]: "result" for c in cases}, [o["message"] for o in outcomes]


@pytest.mark.parametrize("kind", sorted(BUDGET))
def test_mutants_end_in_a_result_or_a_cyloop_error(kind, worker, seeds, tmp_path):
    if kind == "feeds":
        strategy = feed_cases(seeds)
    else:
        strategy = model_cases([s for s in seeds if s.kind == kind.split("-")[0]])
    report = campaign(worker, strategy, BUDGET[kind], Report(), save_dir=tmp_path,
                      derandomize=True)
    print(report.table())
    assert report.cases == BUDGET[kind]
    assert report.outcomes["result"] > 0  # the mutants are not all refused at the door
    _check(report)
