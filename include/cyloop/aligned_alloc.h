/* 64-byte-aligned allocation (one cache line, and the widest SIMD load) for planner buffers. */
#ifndef CYLOOP_ALIGNED_ALLOC_H
#define CYLOOP_ALIGNED_ALLOC_H

#include <stddef.h>
#include <stdlib.h>

#define CYL_ALIGNMENT 64

#ifdef _WIN32
#include <malloc.h>
static inline void *cyl_aligned_alloc(size_t nbytes)
{
    return _aligned_malloc(nbytes ? nbytes : 1, CYL_ALIGNMENT);
}
static inline void cyl_aligned_free(void *ptr)
{
    _aligned_free(ptr);
}
#else
/* Returns NULL when the memory cannot be had. */
static inline void *cyl_aligned_alloc(size_t nbytes)
{
    void *ptr = NULL;
    if (posix_memalign(&ptr, CYL_ALIGNMENT, nbytes ? nbytes : 1) != 0) {
        return NULL;
    }
    return ptr;
}
static inline void cyl_aligned_free(void *ptr)
{
    free(ptr);
}
#endif

#endif /* CYLOOP_ALIGNED_ALLOC_H */
