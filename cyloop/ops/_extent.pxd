# Mirrors include/cyloop/extent.h (cimported by cyloop.ops._two_core and cyloop.engine._core).
# (intptr_t there; numpy's npy_intp here, which is that type, so shapes and strides pass as
# numpy keeps them.)

from numpy cimport npy_intp

cdef extern from "cyloop/extent.h" nogil:
    void cyl_extent(char *data, int ndim, const npy_intp *shape, const npy_intp *strides,
                    npy_intp itemsize, char **lo, char **hi)
    bint cyl_ranges_overlap(const char *a_lo, const char *a_hi, const char *b_lo,
                            const char *b_hi)
