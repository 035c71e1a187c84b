# Mirrors include/cyloop/aligned_alloc.h.

cdef extern from "cyloop/aligned_alloc.h" nogil:
    int CYL_ALIGNMENT
    size_t CYL_KEEP_FROM
    size_t CYL_KEPT_BLOCKS
    size_t CYL_KEPT_BYTES
    void *cyl_aligned_alloc(size_t nbytes)
    void cyl_aligned_free(void *ptr)
    void *cyl_block_take(size_t nbytes)
    void cyl_block_give(void *ptr, size_t nbytes, int keep)
    void cyl_blocks_release()
    size_t cyl_blocks_kept()
