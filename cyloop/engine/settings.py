"""What a compiled model is told once (`Settings`) and the engine's constants, each stated once.

Both drivers, the compiler, the hoisting pass and the plan read them from here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["CHUNK_BUDGETS", "COUNTERS", "DEFAULT_MAX_ITERATIONS", "FIRST_CHUNK_ROWS",
           "GROWTH_CAP_BYTES", "MAX_CHUNK_ROWS", "MIN_CHUNK_ROWS", "PROGRESS_EVERY", "Settings"]

# A loop that reaches this many iterations raises LoopLimitError (None in Settings: no limit).
DEFAULT_MAX_ITERATIONS = 100_000_000
# A progress callback hears from a loop every this many iterations, and once when it ends; the
# Cython driver also lets other Python threads run this often (it holds the GIL otherwise).
PROGRESS_EVERY = 1024
# Bytes a concatenated output may take before its length is known; past it, geometric growth.
GROWTH_CAP_BYTES = 64 * 1024 * 1024

# Hoisting (engine/hoist.py): the first chunk is small, since many loops stop early and it sizes
# the rest; later chunks hold about one of CHUNK_BUDGETS' bytes of hoisted rows, the one that runs
# fastest here (a measured choice, engine/chunks.py; the first is the default): bigger chunks make
# bigger GEMMs, smaller ones stay in a smaller cache until the body reads them. The largest is
# the memory a chunk may take (a loop's peak stays within ~1.15x its outputs on sequences of a
# few MiB). Whatever the budget, a chunk has MIN_CHUNK_ROWS to MAX_CHUNK_ROWS rows.
CHUNK_BUDGETS = {"512 KiB": 512 * 1024, "256 KiB": 256 * 1024, "128 KiB": 128 * 1024}
FIRST_CHUNK_ROWS = 16
MIN_CHUNK_ROWS = 4
MAX_CHUNK_ROWS = 4096

# What a loop driver counts, summed over its calls (``Model.counters()``; both drivers keep every
# one of them, the reference driver's hoisting counters stay 0).
COUNTERS = (
    "runs",                     # calls of the loop
    "iterations",               # iterations over all calls
    "copies",                   # values copied into their destination (a row, a joined output)
    "bytes_copied",
    "steady_bytes_copied",      # bytes copied by iterations 2 and on (the steady state)
    "growth_bytes_copied",      # bytes moved when a growing output was reallocated or compacted
    "allocations",              # buffers the planner allocated
    "bytes_allocated",
    "in_place_writes",          # results a kernel wrote straight into their output row
    "last_preallocated_bytes",  # bytes the planner allocated in the last call
    "last_iterations",          # iterations of the last call
    "steady_iterations",        # iterations 2 and on, over all calls
    "hoist_chunks",             # chunks of hoisted rows computed
    "hoisted_bytes",            # bytes of hoisted rows computed
)


@dataclass(frozen=True)
class Settings:
    """Choices fixed when a model is compiled.

    ``driver``: "cython" or "python" (the reference driver). ``max_iterations``: any loop that
    reaches it raises `LoopLimitError` (None: no limit). ``progress``: called as
    ``progress(label, done, total_or_None, finished)`` every `PROGRESS_EVERY` iterations of a loop
    and once when it ends. ``hoist``: the Cython driver runs body work that does not depend on
    the loop's state before the loop, a chunk of iterations at a time (engine/hoist.py).
    ``tune``: kernels with equivalent formulations time them on their first calls and keep the
    fastest on this machine (ops/_measured.py); False keeps each one's default, reproducibly.
    """

    driver: str = "cython"
    max_iterations: int | None = DEFAULT_MAX_ITERATIONS
    progress: object = None
    hoist: bool = True
    tune: bool = True

    @classmethod
    def make(cls, driver: str | None = None, max_iterations: int | None = DEFAULT_MAX_ITERATIONS,
             progress=None, hoist: bool = True, tune: bool = True) -> Settings:
        """Checked settings; ``driver=None`` reads ``CYLOOP_PURE_PYTHON`` (set: "python")."""
        if driver is None:
            driver = "python" if os.environ.get("CYLOOP_PURE_PYTHON", "") not in ("", "0") \
                else "cython"
        if driver not in ("cython", "python"):
            raise ValueError(f"driver must be 'cython' or 'python', not {driver!r}")
        if max_iterations is not None and max_iterations < 0:
            raise ValueError(f"max_iterations must be None or >= 0, not {max_iterations}")
        return cls(driver, max_iterations, progress, bool(hoist), bool(tune))
