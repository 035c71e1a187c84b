"""numpy's own BLAS, for the products on two cores (`_two_core`): the OpenBLAS that numpy's wheels
bundle, found beside numpy, and the addresses of its ``cblas_sgemm`` / ``cblas_dgemm`` (64-bit
integers) and of the functions giving and setting its thread count.

Only libraries whose symbol names say their integer width are taken (the table below): a gemm
called with integers of the wrong width would crash, not fail. A numpy built on another BLAS
(MKL, Accelerate, a system OpenBLAS) has none of them, and its products stay numpy's own.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import NamedTuple

import numpy as np

__all__ = ["Entries", "cores_available", "entries", "spare_core"]

# (what the library's file name contains, the names of sgemm, dgemm, the thread count and its
# setter), each with 64-bit integers.
_LIBRARIES = (
    # numpy >= 2.0 wheels: scipy-openblas64
    ("scipy_openblas64_", "scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_",
     "scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    # numpy 1.2x wheels: openblas64_
    ("openblas64_", "cblas_sgemm64_", "cblas_dgemm64_", "openblas_get_num_threads64_",
     "openblas_set_num_threads64_"),
)


class Entries(NamedTuple):
    """Addresses of numpy's BLAS entry points (0: not found)."""

    sgemm: int
    dgemm: int
    threads: int
    set_threads: int


def _directories() -> list[str]:
    """Where numpy's wheels put their bundled libraries (Linux, Windows / macOS)."""
    root = os.path.dirname(os.path.abspath(np.__file__))
    return [root + ".libs", os.path.join(root, ".dylibs")]


@functools.cache
def entries() -> Entries | None:
    """numpy's bundled BLAS entry points, or None where numpy has no such library."""
    for part, *names in _LIBRARIES:
        for directory in _directories():
            # (not glob: its pattern's regular expression, compiled in a fresh process, costs a
            # first model's load more than the rest of this)
            try:
                files = sorted(file for file in os.listdir(directory) if part in file)
            except OSError:
                continue
            for path in (os.path.join(directory, file) for file in files):
                try:
                    library = ctypes.CDLL(path)  # loaded already by numpy: the same handle
                except OSError:
                    continue
                found = [ctypes.cast(getattr(library, name), ctypes.c_void_p).value
                         if hasattr(library, name) else 0 for name in names]
                if found[0] or found[1]:
                    return Entries(*(address or 0 for address in found))
    return None


def cores_available() -> int:
    """The cores this process may run on: the calling thread's affinity (where the platform has
    one; a process narrowed from outside, `taskset -a` or a cpuset, narrows every thread), else
    every core."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (no affinity on macOS or Windows)
        return os.cpu_count() or 1


def spare_core() -> bool:
    """Whether this process may run on two cores or more."""
    return cores_available() >= 2
