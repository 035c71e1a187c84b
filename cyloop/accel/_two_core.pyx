"""Matrix products on two cores: one product cut into pieces that this thread and a helper thread
take in turn, each piece a call of numpy's own BLAS (include/cyloop/two_core.h says why and how).
A formulation among the measured ones of `_gemm` (docs/design.md, "Measured choices"): where it is
slower than numpy's single call, its trial drops it.

`bind` binds the entry points `_blas` finds (the helper thread starts with the first product that
needs it); `product` runs one product, or answers `UNFIT` (a negative number) for operands it does
not take, which the caller then hands to np.matmul.
"""

cimport numpy as cnp
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t

from cyloop.accel.extent cimport arrays_overlap

cnp.import_array()

cdef extern from "cyloop/two_core.h" nogil:
    ctypedef void (*cyl_sgemm_t)(int, int, int, int64_t, int64_t, int64_t, float, const float *,
                                 int64_t, const float *, int64_t, float, float *, int64_t)
    ctypedef void (*cyl_dgemm_t)(int, int, int, int64_t, int64_t, int64_t, double,
                                 const double *, int64_t, const double *, int64_t, double,
                                 double *, int64_t)
    ctypedef int (*cyl_threads_t)()
    ctypedef struct cyl_product_t:
        cyl_job_t job
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
    int CYL_HELPER
    cyl_threads_t cyl_blas_threads
    cyl_sgemm_t cyl_sgemm
    cyl_dgemm_t cyl_dgemm
    void cyl_two_core_bind(cyl_sgemm_t sgemm, cyl_dgemm_t dgemm, cyl_threads_t threads)
    void cyl_gemm(int double_precision, int64_t m, int64_t n, int64_t k, const char *a,
                  int64_t lda, const char *b, int64_t ldb, char *c, int64_t ldc,
                  int accumulate)
    void cyl_two_core_run(const cyl_job_t *job, int *helped)
    void cyl_two_core_product(cyl_product_t *job, int *helped)
    int64_t cyl_two_core_pieces_helped()
    int64_t cyl_two_core_products_split()
    int64_t cyl_two_core_woken_apart()

# `product`'s answers besides the helper's piece count.
ALONE = -1  # this thread ran every piece (no helper, the pair busy, or BLAS held to one thread)
UNFIT = -2  # operands it does not take (another dtype, layout or overlap): nothing was written

cdef bint _has_sgemm = False, _has_dgemm = False


def bind(size_t sgemm, size_t dgemm, size_t threads) -> None:
    """Binds BLAS's ``cblas_sgemm`` and ``cblas_dgemm`` (64-bit integers) and a function giving
    BLAS's thread count (addresses; 0 for one not found)."""
    global _has_sgemm, _has_dgemm
    cyl_two_core_bind(<cyl_sgemm_t>sgemm, <cyl_dgemm_t>dgemm, <cyl_threads_t>threads)
    _has_sgemm, _has_dgemm = sgemm != 0, dgemm != 0


# Products of fewer multiply-adds run as one piece, on the calling thread (a piece handed over
# would cost more than it saves).
SMALLEST = CYL_SMALLEST
# Whether this platform has the helper thread (POSIX threads): elsewhere nothing runs here.
HELPER = CYL_HELPER != 0


cdef int run_job(cyl_job_t *job) noexcept nogil:
    """Runs `job`'s pieces on two cores (`cyl_two_core_run`): how many the helper ran, or
    `ALONE`."""
    cdef int helped
    cyl_two_core_run(job, &helped)
    return helped


cdef bint has_gemm(bint double_precision) noexcept nogil:
    """Whether BLAS's gemm of that precision is bound (`bind`)."""
    return (cyl_dgemm if double_precision else cyl_sgemm) != NULL


cdef void gemm(bint double_precision, int64_t m, int64_t n, int64_t k, const char *a,
               int64_t lda, const char *b, int64_t ldb, char *c, int64_t ldc,
               bint accumulate) noexcept nogil:
    """c = a @ b (c += a @ b if `accumulate`) of row-major [m, k] and [k, n] matrices with unit
    column strides and row strides in elements, by BLAS's bound gemm (`has_gemm`)."""
    cyl_gemm(double_precision, m, n, k, a, lda, b, ldb, c, ldc, accumulate)


def blas_threads() -> int:
    """The threads the bound BLAS says it may use (a product is cut in pieces for the helper
    only where it may use two or more), or -1 where none is bound or it does not say."""
    return cyl_blas_threads() if cyl_blas_threads != NULL else -1


def pieces_helped() -> int:
    """How many pieces the helper thread has run in this process."""
    return cyl_two_core_pieces_helped()


def products_split() -> int:
    """How many products this process has cut in two pieces or more (jobs of other kinds, an
    LSTM step's rows, included: `run_job`)."""
    return cyl_two_core_products_split()


def woken_apart() -> int:
    """How many times the helper, woken off its caller's CPU by a product (Linux, where it may run
    on another; two_core.h says why), has taken its whole affinity back once running."""
    return cyl_two_core_woken_apart()


cdef int64_t _floor_power_of_two(int64_t x):
    cdef int64_t p = 1
    while p * 2 <= x:
        p *= 2
    return p


cdef inline bint _matrix(cnp.ndarray x, int64_t item, int64_t *row, int64_t *batch):
    """Whether x is in native byte order and aligned, its last axis is unit-strided and its
    other strides are whole, non-negative elements (a row stride at least a row); its row and
    batch strides, in elements."""
    cdef int nd = cnp.PyArray_NDIM(x)
    cdef cnp.npy_intp *strides = cnp.PyArray_STRIDES(x)
    cdef cnp.npy_intp *shape = cnp.PyArray_DIMS(x)
    if not (cnp.PyArray_ISNOTSWAPPED(x) and cnp.PyArray_ISALIGNED(x)):
        return False
    if strides[nd - 1] != item or strides[nd - 2] % item or strides[nd - 2] < 0:
        return False
    row[0] = strides[nd - 2] // item
    if row[0] < shape[nd - 1] and shape[nd - 2] > 1:
        return False
    if row[0] < shape[nd - 1]:
        row[0] = shape[nd - 1]  # one row: BLAS still asks for a stride of at least a row
    batch[0] = 0
    if nd == 3:
        if strides[0] % item or strides[0] < 0:
            return False
        batch[0] = strides[0] // item
    return True


cdef bint _addend(object addend, cnp.ndarray c, int kind, cyl_product_t *job):
    """Whether `addend` is an array of out's type `kind`, aligned, in native byte order, that
    broadcasts to c's shape and is apart from c; sets job's addend and its strides (elements,
    0 where it broadcasts)."""
    if type(addend) is not cnp.ndarray:
        return False
    cdef cnp.ndarray d = <cnp.ndarray>addend
    cdef int nd = cnp.PyArray_NDIM(d), nc = cnp.PyArray_NDIM(c)
    if cnp.PyArray_TYPE(d) != kind or nd > nc \
            or not (cnp.PyArray_ISNOTSWAPPED(d) and cnp.PyArray_ISALIGNED(d)):
        return False
    cdef cnp.npy_intp *shape = cnp.PyArray_DIMS(d)
    cdef cnp.npy_intp *strides = cnp.PyArray_STRIDES(d)
    cdef cnp.npy_intp *target = cnp.PyArray_DIMS(c)
    cdef int64_t item = cnp.PyArray_ITEMSIZE(c)
    cdef int64_t found[3]
    cdef int axis, at
    found[0] = found[1] = found[2] = 0
    for axis in range(nd):
        at = 3 - nd + axis  # (out's axes, aligned from the right, as [pair, row, column])
        if shape[axis] != 1 and shape[axis] != target[nc - nd + axis]:
            return False
        if shape[axis] != 1:
            if strides[axis] % item:
                return False
            found[at] = strides[axis] // item
    if arrays_overlap(c, d):
        return False
    job.d = <const char *>cnp.PyArray_DATA(d)
    job.sd, job.ldd, job.cold = found[0], found[1], found[2]
    return True


def product(a, b, out, addend=None, bint alone=False) -> int:
    """``out[...] = a @ b`` (``addend + a @ b`` with an addend) on two cores: a [M, K] or
    [P, M, K], b [K, N] or [P, K, N], out [M, N] or [P, M, N] (P the larger of a's and b's), all
    float32 or all float64 with a BLAS entry point bound, in native byte order, aligned and
    unit-strided along the last axis; out writeable, apart from a and b, its matrices one after
    another; K short enough for pieces of 8 rows by 16 columns. The addend, of their type,
    aligned and in native byte order, broadcasts to out's shape and is apart from out; any
    strides. `alone`: all on this thread, as one piece per matrix (the product's own BLAS call:
    a large one may take BLAS's own threads). Returns how many pieces the helper ran, `ALONE`,
    or `UNFIT` (then nothing is written).

    Each piece is a block of rows (and, where a row is too long, of columns) whose
    multiply-adds stay under OpenBLAS's threading threshold: at least 8 rows, so that BLAS's
    row tiles are full, and as many more as fit, in powers of two. It copies its block of the
    addend into out, and its gemm adds the product to it."""
    if type(a) is not cnp.ndarray or type(b) is not cnp.ndarray or type(out) is not cnp.ndarray:
        return UNFIT
    return _product(<cnp.ndarray>a, <cnp.ndarray>b, <cnp.ndarray>out, addend, alone)


def multiply(a, b, addend=None, bint two_cores=False):
    """`product` into a fresh array (C order), or None where `product` would answer `UNFIT`;
    on two cores if `two_cores`, else `alone`."""
    if type(a) is not cnp.ndarray or type(b) is not cnp.ndarray:
        return None
    cdef cnp.ndarray x = <cnp.ndarray>a, w = <cnp.ndarray>b
    cdef int nx = cnp.PyArray_NDIM(x), nw = cnp.PyArray_NDIM(w)
    if not (2 <= nx <= 3 and 2 <= nw <= 3):
        return None
    cdef cnp.npy_intp shape[3]
    cdef int nc = max(nx, nw)
    shape[nc - 2] = cnp.PyArray_DIMS(x)[nx - 2]
    shape[nc - 1] = cnp.PyArray_DIMS(w)[nw - 1]
    if nc == 3:
        shape[0] = max(cnp.PyArray_DIMS(x)[0] if nx == 3 else 1,
                       cnp.PyArray_DIMS(w)[0] if nw == 3 else 1)
    cdef cnp.ndarray c = cnp.PyArray_EMPTY(nc, shape, cnp.PyArray_TYPE(x), 0)
    if _product(x, w, c, addend, not two_cores) == UNFIT:
        return None
    return c


cdef int _product(cnp.ndarray x, cnp.ndarray w, cnp.ndarray c, object addend, bint alone):
    """`product` of arrays."""
    cdef int kind = cnp.PyArray_TYPE(c)
    if cnp.PyArray_TYPE(x) != kind or cnp.PyArray_TYPE(w) != kind \
            or not (kind == cnp.NPY_FLOAT32 and _has_sgemm
                    or kind == cnp.NPY_FLOAT64 and _has_dgemm):
        return UNFIT
    cdef int nx = cnp.PyArray_NDIM(x), nw = cnp.PyArray_NDIM(w), nc = cnp.PyArray_NDIM(c)
    if not (2 <= nx <= 3 and 2 <= nw <= 3 and nc == max(nx, nw)) \
            or not cnp.PyArray_ISWRITEABLE(c):
        return UNFIT
    cdef cnp.npy_intp *xs = cnp.PyArray_DIMS(x)
    cdef cnp.npy_intp *ws = cnp.PyArray_DIMS(w)
    cdef cnp.npy_intp *cs = cnp.PyArray_DIMS(c)
    cdef int64_t m = xs[nx - 2], k = xs[nx - 1], n = ws[nw - 1]
    cdef int64_t count = cs[0] if nc == 3 else 1
    if ws[nw - 2] != k or cs[nc - 2] != m or cs[nc - 1] != n or m < 1 or n < 1 or k < 1 \
            or (nx == 3 and xs[0] != count) or (nw == 3 and ws[0] != count) or count < 1:
        return UNFIT
    cdef cyl_product_t job
    cdef int64_t item = cnp.PyArray_ITEMSIZE(c)
    if not (_matrix(x, item, &job.lda, &job.sa) and _matrix(w, item, &job.ldb, &job.sb)
            and _matrix(c, item, &job.ldc, &job.sc)) \
            or arrays_overlap(c, x) or arrays_overlap(c, w):
        return UNFIT
    if count > 1 and job.sc < m * job.ldc:  # the results' matrices one after another, apart
        return UNFIT
    cdef int64_t budget = CYL_PIECE_LIMIT - 1
    if min(m, 8) * k * min(n, 16) > budget:  # too long a k for a piece of useful width
        return UNFIT
    job.d = NULL
    job.sd = job.ldd = job.cold = 0
    job.job.alone = alone
    if addend is not None and not _addend(addend, c, kind, &job):
        return UNFIT
    job.double_precision = kind == cnp.NPY_FLOAT64
    job.count, job.m, job.n, job.k = count, m, n, k
    job.a = <const char *>cnp.PyArray_DATA(x)
    job.b = <const char *>cnp.PyArray_DATA(w)
    job.c = <char *>cnp.PyArray_DATA(c)
    job.rows = min(m, max(8, _floor_power_of_two(max(budget // (k * n), 1))))
    job.cols = n
    if job.rows * k * n > budget:
        job.cols = min(n, _floor_power_of_two(max(budget // (job.rows * k), 1)))
    if alone or count * m * n * k < CYL_SMALLEST:  # (small: a piece handed over costs more)
        job.rows, job.cols = m, n
    elif count == 1 and job.rows >= m and job.cols >= n:  # one piece: two, for the two cores
        if m >= 2:
            job.rows = (m + 1) // 2
        else:
            job.cols = (n + 1) // 2
    if count * ((m + job.rows - 1) // job.rows) * ((n + job.cols - 1) // job.cols) >= 1 << 31:
        return UNFIT  # (a ticket counts pieces in 32 bits)
    cdef int helped
    with nogil:
        cyl_two_core_product(&job, &helped)
    return helped  # (UNFIT where there is no helper: nothing ran)


cdef bint _as_three_axes(cnp.ndarray a, int64_t item, cnp.npy_intp *shape,
                         cnp.npy_intp *strides):
    """`a`'s 2 or 3 axes as 3 (leading ones of size 1), its strides in elements; False where a
    stride is not a whole number of elements."""
    cdef int nd = cnp.PyArray_NDIM(a), axis
    shape[0] = shape[1] = 1
    strides[0] = strides[1] = 0
    for axis in range(nd):
        if cnp.PyArray_STRIDE(a, axis) % item:
            return False
        shape[3 - nd + axis] = cnp.PyArray_DIM(a, axis)
        strides[3 - nd + axis] = cnp.PyArray_STRIDE(a, axis) // item
    return True


def rows_and_ones(x):
    """`x` [..., K] (2 or 3 axes, float32 or float64, aligned, native byte order, any
    whole-element strides) as fresh C-order rows [..., K + 1] whose last column is 1: the rows
    a bias joins a product in as the weight of that column (kernels/recurrent/cells.py
    `cell_projection`), made in one call; None for other arrays."""
    if type(x) is not cnp.ndarray:
        return None
    cdef cnp.ndarray a = <cnp.ndarray>x
    cdef int nd = cnp.PyArray_NDIM(a), kind = cnp.PyArray_TYPE(a)
    if not (2 <= nd <= 3 and (kind == cnp.NPY_FLOAT32 or kind == cnp.NPY_FLOAT64)
            and cnp.PyArray_ISNOTSWAPPED(a) and cnp.PyArray_ISALIGNED(a)):
        return None
    cdef int64_t item = cnp.PyArray_ITEMSIZE(a), axis
    cdef cnp.npy_intp shape[3]
    cdef cnp.npy_intp strides[3]  # x's, in elements
    if not _as_three_axes(a, item, shape, strides):
        return None
    cdef cnp.npy_intp made[3]
    for axis in range(nd):
        made[axis] = cnp.PyArray_DIM(a, axis)
    made[nd - 1] += 1
    cdef cnp.ndarray rows = cnp.PyArray_EMPTY(nd, made, kind, 0)
    if kind == cnp.NPY_FLOAT32:
        _ones_joined(<const float *>cnp.PyArray_DATA(a), shape, strides,
                     <float *>cnp.PyArray_DATA(rows))
    else:
        _ones_joined(<const double *>cnp.PyArray_DATA(a), shape, strides,
                     <double *>cnp.PyArray_DATA(rows))
    return rows


def ones_product(x, w):
    """``[x 1] @ w`` (`rows_and_ones`' rows of x times w) as a fresh C-order [..., N] array, by
    the one gemm call of numpy's own BLAS that ``np.matmul(rows_and_ones(x) reshaped to [M, K +
    1], w)`` makes (the same function, the same arguments: the same values), the rows made in a
    scratch buffer of this call's: x as `rows_and_ones` takes it, w a [K + 1, N] array of x's
    type with unit-strided rows, M and N at least 2 (where numpy makes a matrix-vector call
    instead); None for other operands, or where that BLAS is not bound (nothing is made then).
    A cell's input projection in one call (kernels/recurrent/cells.py `cell_projection`)."""
    if type(x) is not cnp.ndarray or type(w) is not cnp.ndarray:
        return None
    cdef cnp.ndarray a = <cnp.ndarray>x, b = <cnp.ndarray>w
    cdef int nd = cnp.PyArray_NDIM(a), kind = cnp.PyArray_TYPE(a)
    if not (2 <= nd <= 3 and (kind == cnp.NPY_FLOAT32 and _has_sgemm
                              or kind == cnp.NPY_FLOAT64 and _has_dgemm)
            and cnp.PyArray_ISNOTSWAPPED(a) and cnp.PyArray_ISALIGNED(a)):
        return None
    cdef int64_t item = cnp.PyArray_ITEMSIZE(a), axis, ldb, batch
    cdef cnp.npy_intp shape[3]
    cdef cnp.npy_intp strides[3]  # x's, in elements
    if not _as_three_axes(a, item, shape, strides):
        return None
    cdef int64_t m = shape[0] * shape[1], k = shape[2] + 1
    if cnp.PyArray_NDIM(b) != 2 or cnp.PyArray_TYPE(b) != kind or cnp.PyArray_DIM(b, 0) != k \
            or not _matrix(b, item, &ldb, &batch):
        return None
    cdef int64_t n = cnp.PyArray_DIM(b, 1)
    if m < 2 or n < 2:
        return None
    cdef cnp.npy_intp made[3]
    for axis in range(nd - 1):
        made[axis] = cnp.PyArray_DIM(a, axis)
    made[nd - 1] = n
    cdef cnp.ndarray c = cnp.PyArray_EMPTY(nd, made, kind, 0)
    cdef char *rows = <char *>PyMem_Malloc(m * k * item)
    if rows == NULL:
        raise MemoryError()
    try:
        with nogil:
            if kind == cnp.NPY_FLOAT32:
                _ones_joined(<const float *>cnp.PyArray_DATA(a), shape, strides, <float *>rows)
            else:
                _ones_joined(<const double *>cnp.PyArray_DATA(a), shape, strides,
                             <double *>rows)
            cyl_gemm(kind == cnp.NPY_FLOAT64, m, n, k, rows, k,
                     <const char *>cnp.PyArray_DATA(b), ldb, <char *>cnp.PyArray_DATA(c), n, 0)
    finally:
        PyMem_Free(rows)
    return c


ctypedef fused _real:
    float
    double


cdef void _ones_joined(const _real *x, const cnp.npy_intp *shape, const cnp.npy_intp *strides,
                       _real *rows) noexcept nogil:
    """`rows_and_ones`' copy: x [P, M, K] (`strides` in elements) into rows [P, M, K + 1]."""
    cdef cnp.npy_intp p, m, k, width = shape[2]
    cdef const _real *row
    for p in range(shape[0]):
        for m in range(shape[1]):
            row = x + p * strides[0] + m * strides[1]
            for k in range(width):
                rows[k] = row[k * strides[2]]
            rows[width] = 1
            rows += width + 1
