/* Every tuning constant of cyloop's native code, each with the reason for its value (those of
 * its Python code are in cyloop/tuning.py). The headers that use them include this one. */
#ifndef CYLOOP_TUNING_H
#define CYLOOP_TUNING_H

/* -- products on two cores (two_core.h, two_core_job.h) -- */

/* The helper spins this long (ns) after its last product, so that a loop's next product, a
 * step later, finds it awake; then it sleeps. */
#define CYL_SPIN_NS 1000000.0
/* A helper woken by a product joins it if at least this many of its pieces are left: fewer
 * are done by the caller before a woken thread could take one. */
#define CYL_JOIN_LATE 8
/* Pauses between the idle helper's yields of its core (x86's pause is some 10-150 cycles). */
#define CYL_WATCH_PAUSES 256
/* A gemm call in a piece stays under this many multiply-adds, so that OpenBLAS runs it on the
 * calling thread (its interface splits a product over threads from 2 * 65536 * 4 up). */
#define CYL_PIECE_LIMIT 524288
/* A job of fewer multiply-adds runs as one piece, on the calling thread (a piece handed over
 * would cost more than it saves). */
#define CYL_SMALLEST 65536

/* -- planner blocks kept between runs (aligned_alloc.h) -- */

/* A block this large or larger given back between runs is kept for the next run: glibc serves
 * one from fresh pages, whose faults cost more than the block's reuse. */
#define CYL_KEEP_FROM ((size_t)256 * 1024)
/* At most this many blocks are kept ... */
#define CYL_KEPT_BLOCKS 8
/* ... and this many bytes in all (what is kept stays resident after the caller is done with
 * it, so not much: a run making an output larger than this spends longer on its values than
 * on faulting its pages in). */
#define CYL_KEPT_BYTES ((size_t)64 * 1024 * 1024)

#endif
