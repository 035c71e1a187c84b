"""Squared euclidean distances between the rows of two matrices, each computed where it is
written: ``out[i, j] = sum_k (a[j, k] - b[i, k]) ** 2``.

skl2onnx writes a pairwise distance as a Scan over one matrix's rows whose body subtracts the
row from the other matrix and sums the squares of the difference over its last axis. Run as
written, that difference is a whole [rows, features] array an iteration (or, hoisted, a chunk of
them at once), whose last axis, a few features long, is the inner loop of every ufunc pass over
it: the passes cost their calls and their short loops, not their arithmetic. Here each distance
is its features' differences squared and summed in one loop, in feature order, with nothing
stored but the sum; no norms are expanded (``|a|^2 + |b|^2 - 2 a.b`` cancels where points are
close, and would change which neighbours tie).

A block of `_WIDTH` rows of `a` is copied feature-major into a small buffer and then met by
every row of `b`, so that the block's sums are independent lanes the compiler keeps in vector
registers; each sum is still the plain sequential sum of its own terms (no lane adds another's),
so the values do not depend on the block.

The caller (`accel/fused.py`) checks the operands (one float type, C-contiguous, features equal)
and reads the floating-point flags this returns: where the loop raised any, it computes the
distances with numpy's ufuncs instead, which report them as the unfused nodes would have.
"""

from cython cimport floating
from libc.string cimport memset

cimport numpy as cnp
from numpy cimport npy_intp

cnp.import_array()

cdef extern from "<fenv.h>" nogil:
    int FE_DIVBYZERO, FE_OVERFLOW, FE_UNDERFLOW, FE_INVALID
    int feclearexcept(int excepts)
    int fetestexcept(int excepts)

cdef int _WATCHED = FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID

cdef enum:
    _WIDTH = 8  # rows of `a` whose sums run side by side (two SSE vectors of float32)


cdef void _block(const floating *a, npy_intp rows, const floating *b, npy_intp nb,
                 npy_intp features, floating *out, npy_intp out_stride,
                 floating *panel) noexcept nogil:
    """The distances of `rows` (at most `_WIDTH`) rows of `a` to each of the `nb` rows of `b`,
    into ``out[i * out_stride + j]``; `panel` holds ``features * _WIDTH`` values."""
    cdef npy_intp i, j, k
    cdef floating c, d
    cdef floating s[_WIDTH]
    cdef const floating *row
    if rows < _WIDTH:  # (the lanes past the rows: zeros, which raise no flag)
        memset(panel, 0, features * _WIDTH * sizeof(floating))
    for j in range(rows):
        for k in range(features):
            panel[k * _WIDTH + j] = a[j * features + k]
    for i in range(nb):
        row = b + i * features
        for j in range(_WIDTH):
            s[j] = 0
        for k in range(features):
            c = row[k]
            for j in range(_WIDTH):
                d = panel[k * _WIDTH + j] - c
                s[j] = s[j] + d * d
        for j in range(rows):
            out[i * out_stride + j] = s[j]


cdef int _distances(const floating *a, npy_intp na, const floating *b, npy_intp nb,
                    npy_intp features, floating *out, floating *panel) noexcept nogil:
    """Every distance, `a`'s rows a block at a time; returns the floating-point flags raised."""
    cdef npy_intp j
    feclearexcept(_WATCHED)
    j = 0
    while j < na:
        _block(a + j * features, min(_WIDTH, na - j), b, nb, features, out + j, na, panel)
        j += _WIDTH
    return fetestexcept(_WATCHED)


def squared_distances(cnp.ndarray a, cnp.ndarray b, cnp.ndarray out):
    """``out[i, j] = sum_k (a[j, k] - b[i, k]) ** 2`` for C-contiguous float32 or float64
    matrices a [na, f], b [nb, f] and out [nb, na] of one type; returns the floating-point
    flags the loop raised (0: none)."""
    cdef npy_intp na = cnp.PyArray_DIM(a, 0), nb = cnp.PyArray_DIM(b, 0)
    cdef npy_intp features = cnp.PyArray_DIM(a, 1)
    cdef cnp.ndarray panel = cnp.PyArray_EMPTY(1, [features * _WIDTH], cnp.PyArray_TYPE(a), 0)
    cdef int flags
    if cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT32:
        with nogil:
            flags = _distances(<const float *>cnp.PyArray_DATA(a), na,
                               <const float *>cnp.PyArray_DATA(b), nb, features,
                               <float *>cnp.PyArray_DATA(out),
                               <float *>cnp.PyArray_DATA(panel))
    else:
        with nogil:
            flags = _distances(<const double *>cnp.PyArray_DATA(a), na,
                               <const double *>cnp.PyArray_DATA(b), nb, features,
                               <double *>cnp.PyArray_DATA(out),
                               <double *>cnp.PyArray_DATA(panel))
    return flags
