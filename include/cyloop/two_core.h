/* Products on two cores: a matrix product cut into pieces, which this thread and one helper
 * thread take in turn, each piece a call of numpy's own BLAS `gemm` (cyloop/accel/_two_core.pyx).
 * A product is one kind of job (`cyl_job_t`, two_core_job.h); another extension's job (an LSTM
 * step's rows, each a gemm per gate and its passes: cyloop/accel/_gate_passes.pyx) runs the same
 * way, through `_two_core.run_job`.
 *
 * Why not BLAS's own threads: OpenBLAS runs a product of under 10^6 multiply-adds on one core,
 * and one over it through a packing path that is slower on the shapes of a recurrent step (a
 * [16,256] @ [256,256] product ran fastest as four pieces on two cores, then as two halves on
 * one, slowest as one call, where it was measured). Each piece here stays under OpenBLAS's
 * threading threshold (`CYL_PIECE_LIMIT`), so no piece wakes OpenBLAS's own threads: two
 * pools taking turns on one spare core is what costs.
 *
 * The helper spins (watching for a product between pauses, yielding its core every
 * `CYL_WATCH_PAUSES` of them) for `CYL_SPIN_NS` after the last product, so that the next
 * product of a loop finds it awake, then sleeps on a condition variable. The calling thread
 * never waits for the helper to wake: both take pieces from one counter, so a sleeping or
 * descheduled helper only means this thread takes more of them, and a product that wakes the
 * helper runs on its caller alone unless many of its pieces are left. One product runs on the
 * pair at a time; a thread that finds it busy runs its product's pieces alone. A product small
 * enough that handing a piece over costs more than it saves (under `CYL_SMALLEST`
 * multiply-adds) runs as one piece.
 *
 * Nor can it share its core with its caller. Linux wakes a sleeping thread on its waker's CPU
 * when it can ("wake affine"), and there the helper waits behind the busy caller, often for the
 * whole loop (docs/performance.md, "Waking the helper away from its caller's CPU": no product
 * of a run helped in most runs). So the caller
 * that wakes it from its wait first takes its own CPU out of the helper's affinity
 * (`cyl_wake_apart`), and the helper, running elsewhere, puts its whole affinity back
 * (`cyl_woken_apart`): once per wake, never per product. (Linux only: the affinity calls want
 * _GNU_SOURCE, which Python.h, included first by Cython, defines.)
 *
 * The helper cannot share its core with BLAS's own threads: OpenBLAS's idle threads spin
 * (without yielding) for about 0.1 s after a product it ran on several threads, and the helper
 * then runs only when the scheduler takes the core from them. So a loop's products run on two
 * cores all together or not at all, a measured choice made a run at a time (engine/_core.pyx).
 *
 * POSIX threads only: elsewhere every product runs on the calling thread. */
#ifndef CYLOOP_TWO_CORE_H
#define CYLOOP_TWO_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cyloop/tuning.h"
#include "cyloop/two_core_job.h"

typedef void (*cyl_sgemm_t)(int, int, int, int64_t, int64_t, int64_t, float, const float *,
                            int64_t, const float *, int64_t, float, float *, int64_t);
typedef void (*cyl_dgemm_t)(int, int, int, int64_t, int64_t, int64_t, double, const double *,
                            int64_t, const double *, int64_t, double, double *, int64_t);
typedef int (*cyl_threads_t)(void);

/* A product of `count` pairs of matrices: c[p] = a[p] @ b[p] (row-major, unit inner strides;
 * strides in elements), cut into blocks of `rows` rows and `cols` columns; with an addend d,
 * c[p] = d[p] + a[p] @ b[p]: each piece copies its block of d into c, and its gemm adds to it
 * (beta = 1), so that no pass over c adds d afterwards. d's strides are any whole elements (0
 * where it broadcasts); it is apart from c. `cyl_two_core_product` sets `job` but its `alone`. */
typedef struct {
    cyl_job_t job;
    int double_precision;
    int64_t count, m, n, k;
    const char *a, *b;
    char *c;
    int64_t lda, ldb, ldc;      /* row strides */
    int64_t sa, sb, sc;         /* strides from one pair to the next (a's may be 0) */
    int64_t rows, cols;         /* a piece's block */
    const char *d;              /* the addend, or NULL */
    int64_t sd, ldd, cold;      /* its strides: pair, row, column */
} cyl_product_t;


static cyl_sgemm_t cyl_sgemm;
static cyl_dgemm_t cyl_dgemm;
static cyl_threads_t cyl_blas_threads;

/* Binds the gemm entry points (either may be NULL) and the function giving BLAS's thread count. */
static void cyl_two_core_bind(cyl_sgemm_t sgemm, cyl_dgemm_t dgemm, cyl_threads_t threads)
{
    cyl_sgemm = sgemm;
    cyl_dgemm = dgemm;
    cyl_blas_threads = threads;
}

/* c = a @ b (c += a @ b if `accumulate`) of row-major matrices, unit column strides, row strides
 * in elements, by the bound gemm of that precision. */
static void cyl_gemm(int double_precision, int64_t m, int64_t n, int64_t k, const char *a,
                     int64_t lda, const char *b, int64_t ldb, char *c, int64_t ldc,
                     int accumulate)
{
    /* 101, 111: CblasRowMajor, CblasNoTrans */
    if (double_precision)
        cyl_dgemm(101, 111, 111, m, n, k, 1.0, (const double *)a, lda, (const double *)b, ldb,
                  accumulate ? 1.0 : 0.0, (double *)c, ldc);
    else
        cyl_sgemm(101, 111, 111, m, n, k, 1.0f, (const float *)a, lda, (const float *)b, ldb,
                  accumulate ? 1.0f : 0.0f, (float *)c, ldc);
}

/* d's block of piece (pair, row, col), m by n, into c's. */
static void cyl_copy_addend(const cyl_product_t *job, int64_t pair, int64_t row, int64_t col,
                            int64_t m, int64_t n, char *c)
{
    size_t item = job->double_precision ? sizeof(double) : sizeof(float);
    for (int64_t i = 0; i < m; i++) {
        const char *from = job->d + (pair * job->sd + (row + i) * job->ldd + col * job->cold) *
                                    (int64_t)item;
        char *to = c + (size_t)(i * job->ldc) * item;
        if (job->cold == 1)
            memcpy(to, from, (size_t)n * item);
        else if (job->double_precision)
            for (int64_t j = 0; j < n; j++)
                ((double *)to)[j] = *(const double *)(from + j * job->cold * (int64_t)item);
        else
            for (int64_t j = 0; j < n; j++)
                ((float *)to)[j] = *(const float *)(from + j * job->cold * (int64_t)item);
    }
}

static void cyl_product_piece(const void *product, int64_t index)
{
    const cyl_product_t *job = (const cyl_product_t *)product;
    int64_t row_blocks = (job->m + job->rows - 1) / job->rows;
    int64_t col_blocks = (job->n + job->cols - 1) / job->cols;
    int64_t pair = index / (row_blocks * col_blocks);
    int64_t row = (index / col_blocks) % row_blocks * job->rows;
    int64_t col = index % col_blocks * job->cols;
    int64_t m = job->m - row < job->rows ? job->m - row : job->rows;
    int64_t n = job->n - col < job->cols ? job->n - col : job->cols;
    size_t item = job->double_precision ? sizeof(double) : sizeof(float);
    const char *a = job->a + (size_t)(pair * job->sa + row * job->lda) * item;
    const char *b = job->b + (size_t)(pair * job->sb + col) * item;
    char *c = job->c + (size_t)(pair * job->sc + row * job->ldc + col) * item;
    if (job->d != NULL)
        cyl_copy_addend(job, pair, row, col, m, n, c);
    cyl_gemm(job->double_precision, m, n, job->k, a, job->lda, b, job->ldb, c, job->ldc,
             job->d != NULL);
}

static int64_t cyl_two_core_pieces(const cyl_product_t *job)
{
    return job->count * ((job->m + job->rows - 1) / job->rows) *
           ((job->n + job->cols - 1) / job->cols);
}

#if defined(_WIN32)

/* No helper: `CYL_HELPER` tells the binding, which then offers no products on two cores; the
 * calling thread runs every piece. */
#define CYL_HELPER 0
static void cyl_two_core_run(const cyl_job_t *job, int *helped)
{
    for (int64_t index = 0; index < job->pieces; index++)
        job->run(job, index);
    *helped = -1;
}
static int64_t cyl_two_core_pieces_helped(void) { return 0; }
static int64_t cyl_two_core_products_split(void) { return 0; }
static int64_t cyl_two_core_woken_apart(void) { return 0; }

#else

#define CYL_HELPER 1

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CYL_RELAX() _mm_pause()
/* The floating-point control (rounding, flush-to-zero, denormals-are-zero, masks) of SSE/AVX
 * arithmetic, which numpy's loops and BLAS use: MXCSR less its flags. */
#define CYL_FP_CONTROL() (_mm_getcsr() & ~0x3fu)
#define CYL_SET_FP_CONTROL(control) _mm_setcsr((_mm_getcsr() & 0x3fu) | (control))
#else
#include <fenv.h>
#define CYL_RELAX() ((void)0)
#define CYL_FP_CONTROL() ((unsigned)fegetround())
#define CYL_SET_FP_CONTROL(control) fesetround((int)(control))
#endif


/* The current job and its pieces. A ticket holds the product's generation (high 32 bits) and
 * the next piece to take (low 32): the helper takes a piece by a compare-and-swap that fails if
 * another product has been posted since it read the ticket, so it never runs a piece of a
 * product whose caller has returned. */
static const cyl_job_t *cyl_job;
static int64_t cyl_job_pieces;
/* The caller's floating-point control, which the helper takes on for the job's pieces: a thread
 * starts with its creator's, and the caller's may change later (a library setting
 * flush-to-zero), so that the rows the helper computes would round otherwise. */
static unsigned cyl_job_fp_control;
static uint64_t cyl_ticket;
static int64_t cyl_done;                 /* pieces of the current product finished */
static int64_t cyl_helped;               /* pieces the helper has run, over the process */
static int64_t cyl_split;                /* jobs cut in two pieces or more, likewise */
static int cyl_sleeping, cyl_busy, cyl_running;
static pid_t cyl_owner;                  /* the process the helper runs in (fork) */
#if defined(__linux__)
static pid_t cyl_helper_tid;             /* the helper's thread id, once it runs */
static cpu_set_t cyl_helper_cpus;        /* its affinity to restore once woken apart */
static int cyl_apart;                    /* whether a wake took a CPU out of it */
#endif
static int cyl_waiting;                  /* the helper is in its condition wait (cyl_mutex) */
static int64_t cyl_woken_apart_count;    /* affinities taken back after a wake apart */
static pthread_mutex_t cyl_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cyl_wake = PTHREAD_COND_INITIALIZER;

static double cyl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The caller's share of its product: pieces from the ticket until none is left. */
static void cyl_take_pieces(const cyl_job_t *job, int64_t pieces)
{
    for (;;) {
        int64_t index = (int64_t)(__atomic_fetch_add(&cyl_ticket, 1, __ATOMIC_ACQ_REL) &
                                  0xffffffffu);
        if (index >= pieces)
            return;
        job->run(job, index);
        __atomic_fetch_add(&cyl_done, 1, __ATOMIC_ACQ_REL);
    }
}

/* The helper's share of the product of generation `generation`, while it is the current one. */
static void cyl_help(uint32_t generation)
{
    for (;;) {
        uint64_t ticket = __atomic_load_n(&cyl_ticket, __ATOMIC_ACQUIRE);
        if ((uint32_t)(ticket >> 32) != generation)
            return;
        /* Read after the ticket: this product's, or a later one's (then the swap fails). */
        const cyl_job_t *job = __atomic_load_n(&cyl_job, __ATOMIC_ACQUIRE);
        int64_t pieces = __atomic_load_n(&cyl_job_pieces, __ATOMIC_ACQUIRE);
        int64_t index = (int64_t)(ticket & 0xffffffffu);
        if (index >= pieces)
            return;
        if (!__atomic_compare_exchange_n(&cyl_ticket, &ticket, ticket + 1, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        /* Piece `index` is ours and not done: its caller waits for it, so `job` is alive. */
        unsigned control = __atomic_load_n(&cyl_job_fp_control, __ATOMIC_RELAXED);
        if (CYL_FP_CONTROL() != control)
            CYL_SET_FP_CONTROL(control);
        job->run(job, index);
        __atomic_fetch_add(&cyl_helped, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&cyl_done, 1, __ATOMIC_ACQ_REL);
    }
}

/* Called by the caller waking the helper, under `cyl_mutex` (Linux): takes the caller's CPU out
 * of the helper's affinity, if the helper is in its wait (not about to run on its own) with
 * its whole affinity (no earlier wake has narrowed it) and may run on another CPU, so that the
 * scheduler wakes it there (see the top of this file). */
static void cyl_wake_apart(void)
{
#if defined(__linux__)
    cpu_set_t cpus;
    int cpu = sched_getcpu();
    pid_t helper = __atomic_load_n(&cyl_helper_tid, __ATOMIC_ACQUIRE);
    if (!cyl_waiting || cyl_apart || helper == 0 || cpu < 0 || cpu >= CPU_SETSIZE ||
            sched_getaffinity(helper, sizeof cpus, &cpus) != 0 || !CPU_ISSET(cpu, &cpus) ||
            CPU_COUNT(&cpus) < 2)
        return;
    cyl_helper_cpus = cpus;
    CPU_CLR(cpu, &cpus);
    cyl_apart = sched_setaffinity(helper, sizeof cpus, &cpus) == 0;
#endif
}

/* The woken helper's side of `cyl_wake_apart`, under `cyl_mutex`: running apart now, it takes
 * its whole affinity back (the scheduler does not move a running thread onto a busy CPU). If
 * that fails (its cpuset changed meanwhile), it stays narrowed, no later wake narrows it
 * further, and the next wake tries again. */
static void cyl_woken_apart(void)
{
#if defined(__linux__)
    if (cyl_apart && sched_setaffinity(0, sizeof cyl_helper_cpus, &cyl_helper_cpus) == 0) {
        cyl_apart = 0;
        __atomic_fetch_add(&cyl_woken_apart_count, 1, __ATOMIC_RELEASE);
    }
#endif
}

static void *cyl_helper(void *unused)
{
    uint32_t seen = (uint32_t)(__atomic_load_n(&cyl_ticket, __ATOMIC_ACQUIRE) >> 32);
    (void)unused;
#if defined(__linux__)
    __atomic_store_n(&cyl_helper_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
#endif
    for (;;) {
        double idle_since = cyl_now_ns();
        for (;;) {
            uint32_t generation = (uint32_t)(__atomic_load_n(&cyl_ticket, __ATOMIC_ACQUIRE) >> 32);
            if (generation != seen) {
                seen = generation;
                cyl_help(generation);
                idle_since = cyl_now_ns();
                continue;
            }
            /* Watches the ticket between pauses, so that it takes a piece within a pause of
             * the product's start, and yields its core now and then to any thread with work
             * for it (a yield is a system call: after each pause, it would be the delay). */
            int posted = 0;
            for (int k = 0; k < CYL_WATCH_PAUSES && !posted; k++) {
                CYL_RELAX();
                posted = (uint32_t)(__atomic_load_n(&cyl_ticket, __ATOMIC_ACQUIRE) >> 32) != seen;
            }
            if (posted)
                continue;
            sched_yield();
            if (__atomic_load_n(&cyl_busy, __ATOMIC_ACQUIRE))
                idle_since = cyl_now_ns();  /* a product under way: the next comes soon */
            else if (cyl_now_ns() - idle_since > CYL_SPIN_NS)
                break;
        }
        pthread_mutex_lock(&cyl_mutex);
        /* (sequentially consistent with the caller's ticket store and load of `cyl_sleeping`:
         * one of the two sees the other's store, so a product never finds it awake when it is
         * about to sleep through it) */
        __atomic_store_n(&cyl_sleeping, 1, __ATOMIC_SEQ_CST);
        while ((uint32_t)(__atomic_load_n(&cyl_ticket, __ATOMIC_SEQ_CST) >> 32) == seen) {
            cyl_waiting = 1;
            pthread_cond_wait(&cyl_wake, &cyl_mutex);
            cyl_waiting = 0;
        }
        __atomic_store_n(&cyl_sleeping, 0, __ATOMIC_RELEASE);
        cyl_woken_apart();
        pthread_mutex_unlock(&cyl_mutex);
        /* The product that woke it is its caller's, unless many of its pieces are left: a
         * helper just woken (its core perhaps idle in the hypervisor, its caches cold) that took
         * one of the last pieces late would hold the caller up. */
        uint64_t ticket = __atomic_load_n(&cyl_ticket, __ATOMIC_ACQUIRE);
        seen = (uint32_t)(ticket >> 32);
        if (__atomic_load_n(&cyl_job_pieces, __ATOMIC_ACQUIRE) -
                (int64_t)(ticket & 0xffffffffu) >= CYL_JOIN_LATE)
            cyl_help(seen);
    }
    return NULL;
}

/* In a child of fork() the helper is gone (only the forking thread is copied): start afresh. */
static void cyl_after_fork_in_child(void)
{
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
    cyl_mutex = mutex;
    cyl_wake = wake;
    cyl_running = cyl_sleeping = cyl_busy = cyl_waiting = 0;
    cyl_owner = 0;
#if defined(__linux__)
    cyl_helper_tid = 0;
    cyl_apart = 0;
#endif
}

/* Starts the helper in this process (the caller holds `cyl_busy`); whether it runs. */
static int cyl_two_core_start(void)
{
    static int registered;
    pthread_t thread;
    pthread_attr_t attributes;
    if (!registered) {
        if (pthread_atfork(NULL, NULL, cyl_after_fork_in_child) != 0)
            return 0;
        registered = 1;
    }
    cyl_owner = getpid();  /* (tried once per process: a failure is not tried again) */
    if (pthread_attr_init(&attributes) != 0)
        return 0;
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    cyl_running = pthread_create(&thread, &attributes, cyl_helper, NULL) == 0;
    pthread_attr_destroy(&attributes);
    return cyl_running;
}

/* Runs `job`'s pieces (gemm's entry points bound, for a job that calls them). *helped: the pieces
 * the helper ran, or -1 if this thread ran them all alone (`alone`; one piece; BLAS held to one
 * thread, as threadpoolctl or OPENBLAS_NUM_THREADS=1 hold it; the pair busy with another
 * thread's job; or no helper could start). The first job in a process starts the helper (in a
 * child of fork() too). */
static void cyl_two_core_run(const cyl_job_t *job, int *helped)
{
    int64_t pieces = job->pieces;
    int expected = 0;
    if (pieces > 1 && !job->alone)
        __atomic_fetch_add(&cyl_split, 1, __ATOMIC_RELAXED);
    int alone = job->alone || pieces < 2 || (cyl_blas_threads != NULL && cyl_blas_threads() < 2) ||
                !__atomic_compare_exchange_n(&cyl_busy, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE);
    if (!alone && !(cyl_owner == getpid() ? cyl_running : cyl_two_core_start())) {
        __atomic_store_n(&cyl_busy, 0, __ATOMIC_RELEASE);
        alone = 1;
    }
    if (alone) {
        for (int64_t index = 0; index < pieces; index++)
            job->run(job, index);
        *helped = -1;
        return;
    }
    int64_t before = __atomic_load_n(&cyl_helped, __ATOMIC_ACQUIRE);
    uint64_t generation = (__atomic_load_n(&cyl_ticket, __ATOMIC_ACQUIRE) >> 32) + 1;
    __atomic_store_n(&cyl_done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&cyl_job_pieces, pieces, __ATOMIC_RELAXED);
    __atomic_store_n(&cyl_job, job, __ATOMIC_RELAXED);
    __atomic_store_n(&cyl_job_fp_control, CYL_FP_CONTROL(), __ATOMIC_RELAXED);
    /* Publishes the four above: a reader of this ticket sees them. */
    __atomic_store_n(&cyl_ticket, (generation & 0xffffffffu) << 32, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&cyl_sleeping, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&cyl_mutex);
        cyl_wake_apart();
        pthread_cond_signal(&cyl_wake);
        pthread_mutex_unlock(&cyl_mutex);
    }
    cyl_take_pieces(job, pieces);
    while (__atomic_load_n(&cyl_done, __ATOMIC_ACQUIRE) < pieces)
        CYL_RELAX();
    *helped = (int)(__atomic_load_n(&cyl_helped, __ATOMIC_ACQUIRE) - before);
    __atomic_store_n(&cyl_busy, 0, __ATOMIC_RELEASE);
}

static int64_t cyl_two_core_pieces_helped(void)
{
    return __atomic_load_n(&cyl_helped, __ATOMIC_ACQUIRE);
}

static int64_t cyl_two_core_products_split(void)
{
    return __atomic_load_n(&cyl_split, __ATOMIC_ACQUIRE);
}

static int64_t cyl_two_core_woken_apart(void)
{
    return __atomic_load_n(&cyl_woken_apart_count, __ATOMIC_ACQUIRE);
}

#endif /* _WIN32 */

/* Runs the product `job` (its `job.alone` set) as a job of pieces: see `cyl_two_core_run`. */
static void cyl_two_core_product(cyl_product_t *job, int *helped)
{
    job->job.run = cyl_product_piece;
    job->job.pieces = cyl_two_core_pieces(job);
    cyl_two_core_run(&job->job, helped);
}

#endif /* CYLOOP_TWO_CORE_H */
