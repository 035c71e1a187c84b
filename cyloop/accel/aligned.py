"""Arrays that start on a 64-byte boundary, and that give their memory back when they go.

A model's weights, which a product reads over and over, are read aligned (the frontends): at
the 16-byte offset a large numpy allocation has, every 64-byte vector load of it spans two cache
lines (see `_gemm`). So is what a measured choice prepares of a weight once per candidate
(a transposed copy, the column halves) and lets go of when the candidate loses its trial
(`_measured`, ``on_settled``). Released into the C heap, a 256 KiB copy stays resident: glibc
serves blocks above its mmap threshold from the heap once it has freed one such block, and does
not hand freed heap memory back to the system. So an array of `MAPPED_BYTES` or more gets an
anonymous mapping of its own (page-aligned, so aligned), unmapped when its last view goes: a
trial's losing copies no longer count in a run's peak resident memory, which they did as long as
the run lasted (compare.py's peak memory column shows what a run holds). Smaller arrays are
carved out of a numpy allocation.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from ..tuning import MAPPED_BYTES, SMALL_WEIGHT_BYTES

__all__ = ["ALIGNMENT", "MAPPED_BYTES", "SMALL_WEIGHT_BYTES", "aligned", "aligned_empty",
           "owns_memory"]

# Bytes an array is aligned to: a cache line, and the widest SIMD load (AVX-512).
ALIGNMENT = 64
# id -> weak reference, of every array `aligned_empty` made that is still alive: each is the one
# array on a block of memory allocated for it (see `owns_memory`).
_MADE: dict[int, weakref.ref] = {}


def _made(array: np.ndarray) -> np.ndarray:
    """`array`, remembered as one `aligned_empty` made while it lives."""
    key = id(array)
    _MADE[key] = weakref.ref(array, lambda _, key=key: _MADE.pop(key, None))
    return array


def owns_memory(x) -> bool:
    """Whether `x` is an array holding its own memory: it owns its data, or it is an array
    `aligned_empty` made (on a block allocated for it alone; a view of it is not). The engine
    keeps such a read-only constant as it is instead of copying it."""
    if not isinstance(x, np.ndarray):
        return False
    if x.flags.owndata:
        return True
    ref = _MADE.get(id(x))
    return ref is not None and ref() is x


def aligned_empty(shape, dtype, smallest: int = 0) -> np.ndarray:
    """A writeable, C-contiguous, uninitialised array starting on an `ALIGNMENT`-byte boundary
    (below `smallest` bytes: a plain ``np.empty``); in a mapping of its own (unmapped when the
    last view of it goes) from `MAPPED_BYTES` up."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < smallest or nbytes == 0:
        return np.empty(shape, dtype)
    if nbytes >= MAPPED_BYTES:
        # (mmap is imported here, the first time an array this large is made: most models have
        # none, and importing it took a tenth of `import cyloop`)
        import mmap

        # A private anonymous mapping where the platform has one (not on Windows: there the C
        # heap).
        private = getattr(mmap, "MAP_PRIVATE", None), getattr(mmap, "MAP_ANONYMOUS", None)
        if None not in private:
            mapping = mmap.mmap(-1, nbytes, flags=private[0] | private[1])
            return _made(np.ndarray(shape, dtype, buffer=mapping))
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    return _made(np.ndarray(shape, dtype, buffer=raw, offset=-raw.ctypes.data % ALIGNMENT))


def aligned(x, smallest: int = 0, own: bool = False):
    """`x` if it is a C-contiguous array starting on an `ALIGNMENT`-byte boundary (or of fewer
    than `smallest` bytes), else an `aligned_empty` copy (read-only if `x` is); the arrays of a
    tuple each so. Anything else as it is. A view (a transpose, a slice) is laid out contiguous
    by this one copy. `own`: an array that does not hold its own memory (`owns_memory`: a view
    of another's, aligned or not) is copied as well (below `smallest` bytes into numpy's own
    allocation), so that what comes back is the caller's alone."""
    if isinstance(x, tuple):
        return tuple(aligned(item, smallest, own) for item in x)
    if not isinstance(x, np.ndarray) or x.dtype.hasobject or x.size == 0:
        return x
    if own and not owns_memory(x):
        copy = aligned_empty(x.shape, x.dtype, smallest)
    elif x.nbytes < smallest or x.flags.c_contiguous and x.ctypes.data % ALIGNMENT == 0:
        return x
    else:
        copy = aligned_empty(x.shape, x.dtype)
    copy[...] = x
    copy.flags.writeable = x.flags.writeable
    return copy
