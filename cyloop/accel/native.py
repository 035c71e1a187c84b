"""The native paths, and the switch that turns them off (``CYLOOP_NATIVE_OFF``).

Each native path reads something that is not numpy's public API: the gate passes call numpy's
ufunc inner loops from its C loop table (`_gate_passes`), the products on two cores call the
OpenBLAS bundled in numpy's wheels (`_blas`, `_two_core`), and a run turns numpy's floating-point
warnings off through the context variable numpy keeps them in (`float_state`). Each checks what
it reads where it reads it and, where that differs, declines, leaving the work to numpy's public
calls, so the values never depend on it. ``CYLOOP_NATIVE_OFF`` (comma-separated names of
`PATHS`, or "all") turns paths off from the start, to see or test the fallback.
"""

from __future__ import annotations

import functools
import os
import warnings

__all__ = ["PATHS", "native_off"]

PATHS = ("ufunc-loops", "blas", "float-state")


@functools.cache
def native_off() -> frozenset[str]:
    """The paths ``CYLOOP_NATIVE_OFF`` turns off (read once); an unknown name warns."""
    names = {name.strip() for name in os.environ.get("CYLOOP_NATIVE_OFF", "").split(",")}
    names.discard("")
    if "all" in names:
        return frozenset(PATHS)
    unknown = sorted(names - set(PATHS))
    if unknown:
        warnings.warn(f"CYLOOP_NATIVE_OFF: unknown {', '.join(unknown)} (ignored); the native "
                      f"paths are {', '.join(PATHS)} or all", RuntimeWarning, stacklevel=2)
    return frozenset(names & set(PATHS))
