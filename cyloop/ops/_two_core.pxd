# Mirrors include/cyloop/two_core.h.

from libc.stdint cimport int64_t

cdef extern from "cyloop/two_core.h" nogil:
    ctypedef void (*cyl_sgemm_t)(int, int, int, int64_t, int64_t, int64_t, float, const float *,
                                 int64_t, const float *, int64_t, float, float *, int64_t)
    ctypedef void (*cyl_dgemm_t)(int, int, int, int64_t, int64_t, int64_t, double,
                                 const double *, int64_t, const double *, int64_t, double,
                                 double *, int64_t)
    ctypedef int (*cyl_threads_t)()
    ctypedef struct cyl_product_t:
        int double_precision
        int64_t count, m, n, k
        const char *a
        const char *b
        char *c
        int64_t lda, ldb, ldc
        int64_t sa, sb, sc
        int64_t rows, cols
        const char *d
        int64_t sd, ldd, cold
        int alone
    int64_t CYL_PIECE_LIMIT
    int64_t CYL_SMALLEST
    int CYL_HELPER
    void cyl_two_core_bind(cyl_sgemm_t sgemm, cyl_dgemm_t dgemm, cyl_threads_t threads)
    void cyl_two_core_run(const cyl_product_t *job, int *helped)
    int64_t cyl_two_core_pieces_helped()
    int64_t cyl_two_core_products_split()
