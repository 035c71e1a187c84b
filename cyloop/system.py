"""What this machine gives cyloop: Python, numpy, its BLAS, the cores the process may use, and
which native paths are on (`cyloop info --system`).

Every native path checks, when first used, what it reads outside numpy's public API; where that
differs from what it expects, it declines and numpy's public calls do the work, with the same
values. `native_paths` says, for each, whether it is on and, if not, why.
"""

from __future__ import annotations

import os
import platform
import sys

import numpy as np

from .accel import _gate_passes, _two_core, float_state, gemm
from .accel.blas import cores_available

__all__ = ["describe", "native_paths"]


def native_paths() -> dict[str, str]:
    """Each native path -> "on", or "off: <why>"."""
    gate = _gate_passes.status()
    quiet = float_state.status()
    blas = gemm.blas_status()
    if not _two_core.HELPER:
        two = "no POSIX threads on this platform"
    elif cores_available() < 2:
        two = "the process may use one core"
    elif blas is not None:
        two = "they call numpy's bundled BLAS, which is off"
    elif not gemm.helper_runs():
        two = "numpy's BLAS is held to one thread (OPENBLAS_NUM_THREADS=1 or threadpoolctl)"
    else:
        two = None
    return {
        "gate passes on numpy's ufunc loops": "on" if gate is None else f"off: {gate}",
        "products through numpy's bundled BLAS": "on" if blas is None else f"off: {blas}",
        "products on two cores": "on" if not two else f"off: {two}",
        "numpy's warnings off in runs by its context variable":
            "on" if quiet is None else f"off: {quiet} (np.errstate instead)",
    }


def _blas_libraries() -> list[str]:
    """numpy's BLAS as threadpoolctl reports it (library, version, kernel, threads), or why
    not."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["unknown (threadpoolctl is not installed: pip install threadpoolctl)"]
    found = [f"{info.get('internal_api')} {info.get('version')} ({info.get('prefix')}), "
             f"kernel {info.get('architecture')}, {info.get('num_threads')} threads"
             for info in threadpool_info() if info.get("user_api") == "blas"]
    return found or ["none that threadpoolctl recognises"]


def _products() -> str:
    """Where a loop's matrix products may run here, each candidate by the cores it takes, and
    how many threads numpy's BLAS takes in a run."""
    candidates = gemm.product_candidates()
    threads = _two_core.blas_threads() if gemm.blas_status() is None else -1
    held = "" if threads <= cores_available() else \
        f"; numpy's BLAS has {threads} threads, held to {cores_available()} while a model runs"
    if candidates is None:
        name, why = gemm.no_choice()
        return f"{name} ({why}){held}"
    return f"measured a run at a time among: {', '.join(candidates)}{held}"


def describe() -> dict[str, object]:
    """This machine as cyloop sees it: a dict of plain values, in the order to print them."""
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()} "
                  f"({sys.executable})",
        "platform": f"{platform.system()} {platform.machine()}",
        "numpy": f"{np.__version__} ({os.path.dirname(np.__file__)})",
        "blas": _blas_libraries(),
        "cores": f"{cores_available()} this process may use, of {os.cpu_count()}",
        "products": _products(),
        "native paths": native_paths(),
    }
