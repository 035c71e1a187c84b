# Mirrors include/cyloop/aligned_alloc.h.

cdef extern from "cyloop/aligned_alloc.h" nogil:
    int CYL_ALIGNMENT
    void *cyl_aligned_alloc(size_t nbytes)
    void cyl_aligned_free(void *ptr)
