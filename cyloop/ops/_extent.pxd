# Mirrors include/cyloop/extent.h (cimported by cyloop.ops._two_core, cyloop.ops._gate_passes
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
