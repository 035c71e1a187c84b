"""What a compiled model is told once (`Settings`) and the engine's constants, each stated once
(its tuning constants in cyloop/tuning.py, which this module passes on).

Both drivers, the compiler, the hoisting pass and the plan read them from here.
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import FrozenInstanceError, dataclass

import numpy as np

from .._records import dataclass_eq, dataclass_repr
from ..errors import InputError
from ..tuning import (  # (the engine's tuning, read from here too)
    CHUNK_BUDGETS,
    FIRST_CHUNK_ROWS,
    FIRST_GROWING_BYTES,
    MAX_CHUNK_ROWS,
    MIN_CHUNK_ROWS,
    PROGRESS_EVERY,
)

__all__ = ["CHUNK_BUDGETS", "COUNTERS", "DEFAULT_MAX_ITERATIONS", "FIRST_CHUNK_ROWS",
           "FIRST_GROWING_BYTES", "MAX_CHUNK_ROWS", "MIN_CHUNK_ROWS", "PROGRESS_EVERY", "Settings",
           "count_limit", "time_limit_of"]

# The iterations one run may make in all its loops before LoopLimitError (None in Settings: no
# limit).
DEFAULT_MAX_ITERATIONS = 100_000_000

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
    "step_calls",               # calls running many iterations of a recurrent step at once
    "stepped_iterations",       # iterations those calls ran
)


# ``tune=AT_ONCE``: each measured choice opens its trials on their key's first calls, not once the
# work there pays for them (accel/measured.py `PAYBACK`): for tests of the trials themselves. (But
# whether to hoist, whose runs the hoisting driver's own trials wait for: engine/hoist_choice.py.)
AT_ONCE = "at once"


# (A frozen dataclass, its methods written, not generated: see cyloop/_records.py.)
@dataclass(init=False, repr=False, eq=False)
class Settings:
    """Choices fixed when a model is compiled.

    ``driver``: "cython" or "python" (the reference driver). ``max_iterations``: the iterations
    one run may make in all its loops, nested ones included; the one that would pass it raises
    `LoopLimitError`, and a loop whose trip count would is refused before its first (None: no
    limit). ``time_limit``: seconds a run may take; a loop that finds it passed raises
    `LoopLimitError` (None: no limit; `Model.run` may give its own). ``memory_limit``: bytes any
    one buffer the planner allocates may take (a concatenated output grows to it, then raises
    `ResourceLimitError`, before allocating; None: no limit). ``progress``: called as
    ``progress(label, done, total_or_None, finished)`` every `PROGRESS_EVERY` iterations of a loop
    and once when it ends. ``hoist``: the Cython driver runs body work that does not depend on
    the loop's state before the loop, a chunk of iterations at a time (engine/hoist.py), where a
    trial of whole runs finds that faster (engine/hoist_choice.py).
    ``tune``: kernels with equivalent formulations run their default until the work on a shape
    pays for a trial, then time them and keep the fastest on this machine (accel/measured.py);
    ``"at once"`` times them from their first calls; False keeps each one's default,
    reproducibly.
    """

    driver: str = "cython"
    max_iterations: int | None = DEFAULT_MAX_ITERATIONS
    progress: object = None
    hoist: bool = True
    tune: bool | str = True
    time_limit: float | None = None
    memory_limit: int | None = None

    def __init__(self, driver: str = "cython",
                 max_iterations: int | None = DEFAULT_MAX_ITERATIONS, progress: object = None,
                 hoist: bool = True, tune: bool | str = True, time_limit: float | None = None,
                 memory_limit: int | None = None):
        set_field = object.__setattr__
        set_field(self, "driver", driver)
        set_field(self, "max_iterations", max_iterations)
        set_field(self, "progress", progress)
        set_field(self, "hoist", hoist)
        set_field(self, "tune", tune)
        set_field(self, "time_limit", time_limit)
        set_field(self, "memory_limit", memory_limit)

    __repr__ = dataclass_repr
    __eq__ = dataclass_eq

    def __hash__(self) -> int:
        return hash((self.driver, self.max_iterations, self.progress, self.hoist, self.tune,
                     self.time_limit, self.memory_limit))

    def __setattr__(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    @classmethod
    def make(cls, driver: str | None = None, max_iterations: int | None = DEFAULT_MAX_ITERATIONS,
             progress=None, hoist: bool = True, tune: bool | str = True, time_limit=None,
             memory_limit=None) -> Settings:
        """Checked settings (`InputError` for a bad one); ``driver=None`` reads
        ``CYLOOP_PURE_PYTHON`` (set: "python")."""
        if driver is None:
            driver = "python" if os.environ.get("CYLOOP_PURE_PYTHON", "") not in ("", "0") \
                else "cython"
        if driver not in ("cython", "python"):
            raise InputError(f"driver must be 'cython' or 'python', not {driver!r}")
        return cls(driver, count_limit(max_iterations, "max_iterations", 0), progress,
                   bool(hoist), AT_ONCE if tune == AT_ONCE else bool(tune),
                   time_limit_of(time_limit),
                   count_limit(memory_limit, "memory_limit", 1))


def count_limit(value, name: str, least: int) -> int | None:
    """`value` checked as a limit counted in whole units: None, or an integer >= `least`."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name} must be None or an integer, not {type(value).__name__} "
                         f"{value!r}")
    if value < least:
        raise InputError(f"{name} must be None or >= {least}, not {value}")
    return int(value)


def time_limit_of(value) -> float | None:
    """`value` checked as a time limit: None (or infinity: no limit), or seconds > 0."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InputError(f"time_limit must be None or a number of seconds, not "
                         f"{type(value).__name__} {value!r}")
    seconds = float(value)
    if not seconds > 0:  # (nan included)
        raise InputError(f"time_limit must be None or > 0 seconds, not {value}")
    return None if math.isinf(seconds) else seconds
