/* A job for the two cores of include/cyloop/two_core.h: `pieces` pieces, which the calling thread
 * and the helper thread take in turn. `run(job, index)` runs piece `index`, on either thread,
 * without the GIL; the job stays alive until its caller returns. A product (`cyl_product_t`) is
 * one; a job of another kind (an LSTM step: cyloop/accel/_gate_passes.pyx) begins with one. Apart
 * from two_core.h, whose static state belongs to the one extension running the helper. */
#ifndef CYLOOP_TWO_CORE_JOB_H
#define CYLOOP_TWO_CORE_JOB_H

#include <stdint.h>

/* (CYL_PIECE_LIMIT, CYL_SMALLEST: the sizes of pieces, in tuning.h) */
#include "cyloop/tuning.h"

typedef struct {
    void (*run)(const void *job, int64_t index);
    int64_t pieces;
    int alone;  /* the calling thread runs every piece */
} cyl_job_t;

/* *target |= value, for flags the pieces of a job gather (from either thread). */
static inline void cyl_job_or(int *target, int value)
{
#if defined(_WIN32)
    *target |= value;  /* (no helper there: every piece runs on the calling thread) */
#else
    __atomic_fetch_or(target, value, __ATOMIC_RELAXED);
#endif
}

#endif /* CYLOOP_TWO_CORE_JOB_H */
