/* 64-byte-aligned allocation (one cache line, and the widest SIMD load) for planner buffers. */
#ifndef CYLOOP_ALIGNED_ALLOC_H
#define CYLOOP_ALIGNED_ALLOC_H

#include <stddef.h>
#include <stdlib.h>

#include "cyloop/tuning.h"

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

/* Planner blocks their arrays let go of between runs, kept for the next allocation of the same
 * size. A model run again allocates its outputs afresh, and memory the process has not touched
 * since it was mapped costs a page fault per 4 KiB page on its first write (a 16 MB output:
 * about 4000 faults a run, which can cost as much as the run's own work; docs/performance.md);
 * glibc serves such a block from fresh pages (a mapping of its own, or heap it grows) until
 * its free lists happen to hold one that fits. So a block of `CYL_KEEP_FROM` bytes or more
 * given back while no run is under way is kept (up to `CYL_KEPT_BLOCKS` of them and
 * `CYL_KEPT_BYTES` in all, the oldest making room for a newer one), and `cyl_block_take` hands
 * it out again; blocks given back during a run (an output's buffer outgrown, a ping-pong pool)
 * are freed, so that a run's peak memory is what it was. `cyl_blocks_release` frees the kept
 * ones. Callers hold the GIL (the state is unguarded). */

static void *cyl_kept[CYL_KEPT_BLOCKS];
static size_t cyl_kept_size[CYL_KEPT_BLOCKS];
static unsigned long long cyl_kept_when[CYL_KEPT_BLOCKS];  /* order of keeping (0: empty) */
static unsigned long long cyl_kept_count;
static size_t cyl_kept_bytes;

/* Frees kept block `k`. */
static inline void cyl_kept_drop(int k)
{
    cyl_aligned_free(cyl_kept[k]);
    cyl_kept_bytes -= cyl_kept_size[k];
    cyl_kept[k] = NULL;
    cyl_kept_when[k] = 0;
}

/* Frees every kept block. */
static inline void cyl_blocks_release(void)
{
    for (int k = 0; k < CYL_KEPT_BLOCKS; k++)
        if (cyl_kept[k] != NULL)
            cyl_kept_drop(k);
}

/* A block of `nbytes`: a kept one of that size if there is one, else a new one, the kept ones
 * freed first if the memory cannot be had otherwise (NULL when it cannot be had at all). */
static inline void *cyl_block_take(size_t nbytes)
{
    void *ptr;
    if (nbytes >= CYL_KEEP_FROM)
        for (int k = 0; k < CYL_KEPT_BLOCKS; k++)
            if (cyl_kept[k] != NULL && cyl_kept_size[k] == nbytes) {
                ptr = cyl_kept[k];
                cyl_kept_bytes -= nbytes;
                cyl_kept[k] = NULL;
                cyl_kept_when[k] = 0;
                return ptr;
            }
    ptr = cyl_aligned_alloc(nbytes);
    if (ptr == NULL && cyl_kept_bytes > 0) {
        cyl_blocks_release();
        ptr = cyl_aligned_alloc(nbytes);
    }
    return ptr;
}

/* Gives back a block of `nbytes` from `cyl_block_take`: kept if `keep` (no run under way) and it
 * is large enough, the oldest kept blocks freed to make room; else freed. */
static inline void cyl_block_give(void *ptr, size_t nbytes, int keep)
{
    if (!keep || nbytes < CYL_KEEP_FROM || nbytes > CYL_KEPT_BYTES) {
        cyl_aligned_free(ptr);
        return;
    }
    for (;;) {
        int empty = -1, oldest = -1;
        for (int k = 0; k < CYL_KEPT_BLOCKS; k++) {
            if (cyl_kept[k] == NULL)
                empty = k;
            else if (oldest < 0 || cyl_kept_when[k] < cyl_kept_when[oldest])
                oldest = k;
        }
        if (empty >= 0 && cyl_kept_bytes + nbytes <= CYL_KEPT_BYTES) {
            cyl_kept[empty] = ptr;
            cyl_kept_size[empty] = nbytes;
            cyl_kept_when[empty] = ++cyl_kept_count;
            cyl_kept_bytes += nbytes;
            return;
        }
        cyl_kept_drop(oldest);  /* (some block is kept: else there would be room) */
    }
}

/* The bytes kept. */
static inline size_t cyl_blocks_kept(void)
{
    return cyl_kept_bytes;
}

#endif /* CYLOOP_ALIGNED_ALLOC_H */
