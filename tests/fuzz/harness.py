"""Drives the fuzzing worker: batches of cases in, one outcome per case out; a case that kills or
hangs the worker is reported as such, saved as a reproducer, and the worker restarted for the rest.

Outcomes (``status``): ``result``; ``cyloop:<CyloopError subclass>``; ``MemoryError`` (numpy
meeting the address-space cap: allowed unless cyloop was given a ``memory_limit``); and the
failures: ``escape:<exception type>``, ``timeout``, ``signal:<name>``, ``exit:<code>``,
``bad-result`` (not a dict of arrays, an output sharing a feed's memory, a feed written to),
``harness:<exception type>`` (the fuzzer could not build a case's feeds: its own bug).
"""

from __future__ import annotations

import collections
import json
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .worker import allowed, write_frame

ROOT = Path(__file__).resolve().parents[2]  # the checkout: `tests` imports from here
_LOG_TAIL = 6000


class Worker:
    """One worker subprocess at a time (restarted as needed), run with a per-case timeout and an
    address-space cap (``resource.RLIMIT_AS``, in bytes); `time_limit` / `memory_limit` go to
    `cyloop.load` where it accepts them (the hello frame says which it took)."""

    def __init__(self, scratch, *, timeout=10.0, address_space=3 << 30, max_iterations=10**5,
                 time_limit=None, memory_limit=None, selftest=False, recycle=2000,
                 startup_timeout=120.0):
        self.scratch = Path(scratch)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.recycle = recycle
        self.options = {"max_iterations": max_iterations, "address_space": address_space,
                        "time_limit": time_limit, "memory_limit": memory_limit,
                        "selftest": selftest, "scratch": str(self.scratch)}
        self.proc = None
        self.load_options: dict = {}
        self.starts = 0
        self._buffer = b""
        self._served = 0

    @property
    def memory_limited(self) -> bool:
        return "memory_limit" in self.load_options

    # -- the process ---------------------------------------------------------------------------

    def _start(self):
        self.starts += 1
        self._log = self.scratch / "worker.log"
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in
                                                          [env.get("PYTHONPATH")] if p])
        with open(self._log, "ab") as log:  # appending: the worker empties it before each case
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.fuzz.worker", json.dumps(self.options)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=str(ROOT),
                env=env, start_new_session=True)  # Ctrl-C reaches the harness, not the worker
        self._buffer = b""
        self._served = 0
        hello = self._receive(self.startup_timeout)
        if not isinstance(hello, dict) or not hello.get("hello"):
            tail = self._log_tail()
            self._kill()
            raise RuntimeError(f"the fuzz worker did not start ({hello!r}):\n{tail}")
        self.load_options = hello["load_options"]

    def _kill(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.proc = None

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # end of input: the worker exits
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _log_tail(self) -> str:
        try:
            return self._log.read_bytes()[-_LOG_TAIL:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _receive(self, timeout):
        """The next frame; "timeout" or "eof" (the worker died)."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            if len(self._buffer) >= 4:
                size = struct.unpack(">I", self._buffer[:4])[0]
                if len(self._buffer) >= 4 + size:
                    frame, self._buffer = self._buffer[4:4 + size], self._buffer[4 + size:]
                    return pickle.loads(frame)
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return "eof"
                self._buffer += chunk

    # -- cases ---------------------------------------------------------------------------------

    def run(self, cases: list[dict]) -> list[dict]:
        """One outcome per case, in order."""
        outcomes = []
        pending = list(cases)
        while pending:
            if self.proc is None or self._served >= self.recycle:
                self._kill()
                self._start()
            batch = pending[: max(1, self.recycle - self._served)]
            try:
                write_frame(self.proc.stdin.fileno(), batch)
            except (BrokenPipeError, OSError):
                self._kill()
                continue
            for case in batch:
                outcome = self._receive(self.timeout)
                if isinstance(outcome, dict):
                    outcomes.append(outcome)
                    pending.pop(0)
                    self._served += 1
                    continue
                outcomes.append(self._death(case, outcome))
                pending.pop(0)
                break
        return outcomes

    def _death(self, case, how) -> dict:
        """The outcome of the case that hung or killed the worker; the worker is gone after."""
        if how == "timeout":
            try:
                self.proc.send_signal(signal.SIGUSR1)  # faulthandler: where it hangs
                time.sleep(0.5)
            except OSError:
                pass
            self._kill()
            status, message = "timeout", f"no outcome within {self.timeout:g} s"
        else:
            code = self._kill_and_wait()
            if code is not None and code < 0:
                status = f"signal:{signal.Signals(-code).name}"
            else:
                status = f"exit:{code}"
            message = f"the worker died ({status})"
        return {"id": case.get("id"), "status": status, "error": status, "message": message,
                "traceback": self._log_tail(), "seconds": None}

    def _kill_and_wait(self):
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        self._kill()
        return code


# -- counting and reproducers ----------------------------------------------------------------------

@dataclass
class Report:
    """Outcomes counted per mutation class and overall; failures with their reproducer paths."""

    memory_limited: bool = False
    per_class: dict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    outcomes: collections.Counter = field(default_factory=collections.Counter)
    failures: list = field(default_factory=list)  # (case, outcome, reproducer dir)
    seconds: float = 0.0
    cases: int = 0
    slowest: list = field(default_factory=list)  # (seconds, seed, status, notes), the 5 slowest

    def add(self, case, outcome, save_dir=None):
        self.cases += 1
        status = outcome["status"]
        if outcome.get("seconds") is not None:
            self.slowest.append((outcome["seconds"], case.get("seed"), status,
                                 case.get("notes", [])))
            self.slowest = sorted(self.slowest, key=lambda item: -item[0])[:5]
        self.outcomes[status] += 1
        for cls in case.get("classes", ()):
            self.per_class[cls][status] += 1
        if not allowed(status, self.memory_limited):
            where = save_reproducer(case, outcome, save_dir, len(self.failures)) \
                if save_dir is not None else None
            self.failures.append((case, outcome, where))

    def table(self) -> str:
        """Counts per mutation class (rows) and outcome (columns), then the totals."""
        columns = sorted(self.outcomes, key=lambda s: (not allowed(s, self.memory_limited), s))
        short = {s: s.removeprefix("cyloop:") for s in columns}
        width = max([len("mutation class")] + [len(c) for c in self.per_class])
        lines = ["  ".join([f"{'mutation class':<{width}}", f"{'cases':>6}"]
                           + [f"{short[s]:>{max(6, len(short[s]))}}" for s in columns])]
        for cls in sorted(self.per_class):
            counts = self.per_class[cls]
            lines.append("  ".join([f"{cls:<{width}}", f"{sum(counts.values()):>6}"]
                                   + [f"{counts.get(s, 0):>{max(6, len(short[s]))}}"
                                      for s in columns]))
        lines.append("  ".join([f"{'all':<{width}}", f"{self.cases:>6}"]
                               + [f"{self.outcomes[s]:>{max(6, len(short[s]))}}"
                                  for s in columns]))
        return "\n".join(lines)

    def describe_slowest(self) -> str:
        return "\n".join(f"  {seconds:6.2f} s  {seed}  {status}  {'; '.join(notes)[:200]}"
                         for seconds, seed, status, notes in self.slowest)

    def describe_failures(self, limit=10) -> str:
        parts = []
        for case, outcome, where in self.failures[:limit]:
            parts.append(f"- {outcome['status']} on {case.get('seed')} "
                         f"[{', '.join(case.get('notes', []))[:300]}]: "
                         f"{outcome['message'][:300]}\n  reproducer: {where}\n"
                         + _indent(outcome.get("traceback", "")[-1500:]))
        if len(self.failures) > limit:
            parts.append(f"... and {len(self.failures) - limit} more")
        return "\n".join(parts)


def _indent(text):
    return "".join(f"    {line}\n" for line in text.strip().splitlines())


def save_reproducer(case, outcome, save_dir, index) -> Path:
    """Write `case` under `save_dir`: the model file(s), the case (``case.pkl``: feeds spec and
    options) and what happened; ``python -m tests.fuzz --replay DIR`` runs it in-process."""
    kind = outcome["status"].replace(":", "-")
    where = Path(save_dir) / f"{index:03d}-{kind}-{case.get('seed', 'case')}"
    where.mkdir(parents=True, exist_ok=True)
    if case.get("kind") == "onnx":
        (where / "model.onnx").write_bytes(case["model"])
    elif case.get("kind") == "ir":
        (where / "model.xml").write_bytes(case["xml"])
        if case.get("bin") is not None:
            (where / "model.bin").write_bytes(case["bin"])
    with open(where / "case.pkl", "wb") as f:
        pickle.dump(case, f)
    (where / "outcome.txt").write_text(
        f"status: {outcome['status']}\nseed model: {case.get('seed')}\nclasses: "
        f"{', '.join(case.get('classes', []))}\nmutations:\n"
        + "".join(f"  - {note}\n" for note in case.get("notes", []))
        + f"options: {case.get('options')}\nmessage: {outcome['message']}\n\n"
        + f"{outcome.get('traceback', '')}\n\nreplay: cd {ROOT} && {sys.executable} -m "
        f"tests.fuzz --replay {where}\n")
    return where


def replay(where) -> int:
    """Run a saved reproducer in this process, exceptions and crashes included."""
    import warnings

    from .worker import CaseRunner, build_feeds

    with open(Path(where) / "case.pkl", "rb") as f:
        case = pickle.load(f)
    print(Path(where, "outcome.txt").read_text().split("\n\n")[0])
    warnings.simplefilter("ignore")
    runner = CaseRunner({"max_iterations": 10**5}, str(where))
    print("feeds:", {k: _summary(v) for k, v in build_feeds(case["feeds"]).items()}
          if case["feeds"][0] == "dict" else _summary(build_feeds(case["feeds"])))
    print("outcome:", runner.run(case, catch=False)["status"])
    return 0


def _summary(value):
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        return f"{type(value).__name__} {value.dtype}{list(shape)}"
    return repr(value)[:80]
