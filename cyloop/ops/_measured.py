"""`Measured`: equivalent formulations of one computation, timed where they run (DESIGN,
"Measured choices").

Which of two equivalent numpy spellings is faster depends on the CPU (its SIMD width, its BLAS
kernels, its caches), so a kernel with candidates does not pick one: its first calls rotate
through them, timing each, and from then on it keeps the fastest on this machine. Results agree
to rounding whichever runs. ``Model(..., tune=False)`` fixes the first (default) candidate, for
reproducible runs; tests force each candidate in turn (`fix`).
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable
from time import perf_counter

__all__ = ["Measured"]


class Measured:
    """Call one of `candidates` (name -> callable, the first the default) per call, in turn; after
    each has run once to warm up and `rounds` times more, keep the one with the lowest median
    time."""

    def __init__(self, candidates: dict[str, Callable], rounds: int = 5):
        self.candidates = dict(candidates)
        self.rounds = rounds
        self.samples: dict[str, list[float]] = {name: [] for name in self.candidates}
        self.choice: str | None = None if len(self.candidates) > 1 else next(iter(candidates))
        self.fixed = False
        self._chosen = self.candidates[self.choice] if self.choice else None
        self._turn = 0
        self._warm: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, *args):
        chosen = self._chosen
        if chosen is not None:
            return chosen(*args)
        names = list(self.candidates)
        with self._lock:
            name = names[self._turn % len(names)]
            self._turn += 1
        start = perf_counter()
        result = self.candidates[name](*args)
        elapsed = perf_counter() - start
        with self._lock:
            if name in self._warm:
                self.samples[name].append(elapsed)
            else:  # a first call pays one-time costs (caches, page faults): not a sample
                self._warm.add(name)
            if self._chosen is None and all(len(s) >= self.rounds for s in self.samples.values()):
                self.choice = min(self.samples, key=lambda n: statistics.median(self.samples[n]))
                self._chosen = self.candidates[self.choice]
        return result

    def fix(self, name: str | None = None) -> None:
        """Use `name` (default: the first candidate) from now on, without timing."""
        name = next(iter(self.candidates)) if name is None else name
        if name not in self.candidates:
            raise ValueError(f"no candidate {name!r} (candidates: {list(self.candidates)})")
        self.choice, self._chosen, self.fixed = name, self.candidates[name], True

    def describe(self) -> str:
        """The choice and the median time of each candidate, for the plan."""
        times = ", ".join(f"{name} {statistics.median(s) * 1e6:.1f} us" if s else
                          f"{name} not timed" for name, s in self.samples.items())
        if self.fixed:
            return f"{self.choice} (fixed, not measured)"
        if self._chosen is None:
            return f"still measuring ({times})"
        return f"{self.choice}, the fastest here ({times})"
