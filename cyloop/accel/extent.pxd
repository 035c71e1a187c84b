# Mirrors include/cyloop/extent.h (cimported by cyloop.accel._two_core, cyloop.accel._gate_passes
# and cyloop.engine._core), and whether two arrays' bytes overlap, from it.
# (intptr_t there; numpy's npy_intp here, which is that type, so shapes and strides pass as
# numpy keeps them.)

cimport numpy as cnp
from numpy cimport npy_intp

cdef extern from "cyloop/extent.h" nogil:
    void cyl_extent(char *data, int ndim, const npy_intp *shape, const npy_intp *strides,
                    npy_intp itemsize, char **lo, char **hi)
    bint cyl_ranges_overlap(const char *a_lo, const char *a_hi, const char *b_lo,
                            const char *b_hi)


cdef inline bint arrays_overlap(cnp.ndarray a, cnp.ndarray b) noexcept:
    """Whether the bytes `a` spans and those `b` spans overlap."""
    cdef char *a_lo
    cdef char *a_hi
    cdef char *b_lo
    cdef char *b_hi
    cyl_extent(<char *>cnp.PyArray_DATA(a), cnp.PyArray_NDIM(a), cnp.PyArray_DIMS(a),
               cnp.PyArray_STRIDES(a), cnp.PyArray_ITEMSIZE(a), &a_lo, &a_hi)
    cyl_extent(<char *>cnp.PyArray_DATA(b), cnp.PyArray_NDIM(b), cnp.PyArray_DIMS(b),
               cnp.PyArray_STRIDES(b), cnp.PyArray_ITEMSIZE(b), &b_lo, &b_hi)
    return cyl_ranges_overlap(a_lo, a_hi, b_lo, b_hi)


cdef inline bint rows_overlap(cnp.ndarray a, cnp.ndarray b) noexcept:
    """Whether `a` and `b` share a byte: exactly for two [rows, n] arrays of one item size whose
    rows are contiguous and one positive stride apart, at least a row (two slots of one [B, T, H]
    output, say, whose rows interleave and share no byte); else as `arrays_overlap` (the bytes
    each spans)."""
    cdef npy_intp item = cnp.PyArray_ITEMSIZE(a), n, stride, d, k, nearest
    if not arrays_overlap(a, b):
        return False
    if cnp.PyArray_NDIM(a) != 2 or cnp.PyArray_NDIM(b) != 2 \
            or cnp.PyArray_ITEMSIZE(b) != item or cnp.PyArray_DIM(a, 1) != cnp.PyArray_DIM(b, 1):
        return True
    n, stride = cnp.PyArray_DIM(a, 1), cnp.PyArray_STRIDE(a, 0)
    if cnp.PyArray_STRIDE(b, 0) != stride or stride < n * item \
            or n > 1 and (cnp.PyArray_STRIDE(a, 1) != item or cnp.PyArray_STRIDE(b, 1) != item):
        return True
    # Row r of a and row r - k of b overlap iff b's start lies within n items of a's row k
    # start: |d - k stride| < n item, for k from -(b's rows - 1) to a's rows - 1.
    d = <char *>cnp.PyArray_DATA(b) - <char *>cnp.PyArray_DATA(a)
    nearest = d // stride
    for k in (nearest, nearest + 1):
        if -(cnp.PyArray_DIM(b, 0) - 1) <= k <= cnp.PyArray_DIM(a, 0) - 1 \
                and -n * item < d - k * stride < n * item:
            return True
    return False
