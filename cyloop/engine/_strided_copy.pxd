# Mirrors include/cyloop/strided_copy.h.

cdef extern from "cyloop/strided_copy.h" nogil:
    int CYL_MAX_NDIM
    int cyl_strided_copy(char *dst, const Py_ssize_t *dst_strides, const char *src,
                         const Py_ssize_t *src_strides, const Py_ssize_t *shape, int ndim,
                         Py_ssize_t itemsize)
