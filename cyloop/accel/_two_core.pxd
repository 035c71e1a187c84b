# What other extensions take from `_two_core`: jobs of pieces run on two cores, and the gemm of
# numpy's own BLAS (include/cyloop/two_core_job.h; the helper's own state is in two_core.h,
# which only _two_core.pyx includes).

from libc.stdint cimport int64_t

cdef extern from "cyloop/two_core_job.h" nogil:
    int64_t CYL_PIECE_LIMIT
    int64_t CYL_SMALLEST
    void cyl_job_or(int *target, int value)
    ctypedef struct cyl_job_t:
        void (*run)(const void *job, int64_t index) noexcept nogil
        int64_t pieces
        int alone

cdef int run_job(cyl_job_t *job) noexcept nogil
cdef bint has_gemm(bint double_precision) noexcept nogil
cdef void gemm(bint double_precision, int64_t m, int64_t n, int64_t k, const char *a,
               int64_t lda, const char *b, int64_t ldb, char *c, int64_t ldc,
               bint accumulate) noexcept nogil
