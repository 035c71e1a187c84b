"""The gate arithmetic of a recurrent step as one call: numpy's own ufunc inner loops, called
from C.

After its product, an LSTM step (B=8, H=128 on W4) is eight elementwise passes over 1K-4K
values, a GRU step eleven around its two products, and a ufunc call has a fixed cost before it
touches data that is, on such sizes, of the order of its work: the calls, not the data, are most
of their cost. `lstm_tail`, `gru_gates` and
`gru_blend` make the same passes, in the same order, with the inner loops numpy's ufuncs run
(found in each ufunc's loop table at import, so its SIMD kernels for this CPU), handed the
operands' pointers directly. The values are numpy's: each element goes through the same loop as
in the ufunc calls (tests compare the two exactly).

What a ufunc call does besides its loop and this does not: casting, broadcasting, buffering
(operands are checked instead: one float type, rows contiguous, nothing written that is read
later), and its floating-point error report, which is made here after the passes, from the
flags each pass raised, as numpy makes it (`np.errstate`: ignore, warn, raise, call, print,
log; the message names the ufunc).
"""

import sys
import warnings

cimport numpy as cnp
from numpy cimport npy_intp

import numpy as np

from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from cyloop.accel.extent cimport arrays_overlap, rows_overlap
from cyloop.accel.native import native_off
from cyloop.accel._two_core cimport (
    CYL_PIECE_LIMIT,
    CYL_SMALLEST,
    cyl_job_or,
    cyl_job_t,
    gemm,
    has_gemm,
    run_job,
)

cnp.import_array()
cnp.import_ufunc()

cdef extern from "<fenv.h>" nogil:
    int FE_DIVBYZERO, FE_OVERFLOW, FE_UNDERFLOW, FE_INVALID
    int feclearexcept(int excepts)
    int fetestexcept(int excepts)

ctypedef void (*loop_t)(char **args, npy_intp *dimensions, npy_intp *steps,
                        void *data) noexcept nogil


cdef struct Loop:
    loop_t fn
    void *data


cdef struct Loops:  # one float type's loops (fn NULL: numpy has none of that type)
    Loop tanh, multiply, add, subtract, negative, minimum, exp, reciprocal


cdef Loops _f32, _f64


cdef Loop _lookup(cnp.ufunc ufunc, str signature):
    """`ufunc`'s inner loop of `signature` ("ff->f"), or fn NULL.

    Which loop is the public ``ufunc.types`` says; its function and data are the same entry of
    numpy's C loop table, reached through numpy's own Cython declarations, which is read only
    where its length and arity are those the public attributes give."""
    cdef object public = ufunc  # (Python attributes: numpy's public API)
    cdef Loop found
    found.fn, found.data = NULL, NULL
    types = public.types
    if ufunc.ntypes == len(types) and ufunc.nargs == public.nargs and ufunc.nin == public.nin \
            and signature in types:
        i = types.index(signature)
        # (numpy's inner loops run without the GIL: its ufuncs release it around them)
        found.fn, found.data = <loop_t><void *>ufunc.functions[i], ufunc.data[i]
    return found


cdef Loop _find(cnp.ufunc ufunc, tuple sample):
    """`ufunc`'s inner loop over operands all of the type of `sample` (`_sample`), where it
    computes what the ufunc computes on it (`_agrees`); else fn NULL, and `_declined` says why.
    A loop table laid out otherwise than this reads it finds nothing rather than a wrong
    entry."""
    cdef object public = ufunc
    code = sample[0].dtype.char
    signature = code * public.nin + "->" + code * public.nout
    cdef Loop found = _lookup(ufunc, signature)
    if found.fn == NULL:
        _declined.append(f"numpy {np.__version__}'s loop table has no {signature} loop of "
                         f"np.{public.__name__} where its public ufunc.types says")
    elif not _agrees(found, public, sample):
        found.fn = NULL
        _declined.append(f"numpy {np.__version__}'s {signature} loop of np.{public.__name__} "
                         "computes otherwise than the ufunc")
    return found


def _table_loop_computes(cnp.ufunc table, object reference, object dtype):
    """Whether `table`'s loop over `dtype` computes what the ufunc `reference` computes on
    `_agrees`' sample (None: `table` has no such loop): the check `_find` makes, for tests."""
    code = np.dtype(dtype).char
    cdef Loop found = _lookup(table, code * table.nin + "->" + code * table.nout)
    if found.fn == NULL:
        return None
    with np.errstate(all="ignore"):
        return bool(_agrees(found, reference, _sample(dtype)))


cdef Loops _loops(object dtype):
    # (one sample and one errstate for the type's eight checks: a fresh process's first pass
    # pays for these checks, and np.linspace and np.errstate cost more than a check's loop)
    cdef tuple sample = _sample(dtype)
    cdef Loops loops
    memset(&loops, 0, sizeof(Loops))
    with np.errstate(all="ignore"):
        loops.tanh = _find(np.tanh, sample)
        loops.multiply = _find(np.multiply, sample)
        loops.add = _find(np.add, sample)
        loops.subtract = _find(np.subtract, sample)
        loops.negative = _find(np.negative, sample)
        loops.minimum = _find(np.minimum, sample)
        loops.exp = _find(np.exp, sample)
        loops.reciprocal = _find(np.reciprocal, sample)
    return loops


cdef Loops *_loops_of(int type_num):
    """The loops of float32 or float64, all found; else NULL (its operands are declined)."""
    cdef Loops *loops
    if not _looked:
        _look_for_loops()
    if type_num == cnp.NPY_FLOAT:
        loops = &_f32
    elif type_num == cnp.NPY_DOUBLE:
        loops = &_f64
    else:
        return NULL
    if loops.tanh.fn == NULL or loops.multiply.fn == NULL or loops.add.fn == NULL \
            or loops.subtract.fn == NULL or loops.negative.fn == NULL \
            or loops.minimum.fn == NULL or loops.exp.fn == NULL or loops.reciprocal.fn == NULL:
        return NULL
    return loops


# The passes of `lstm_tail`, in order, by the ufunc each runs (the error report names it).
cdef enum:
    HALVE, TANH, SIGMOID_SCALE, SIGMOID_OFFSET, FORGET, INPUT, CELL, HIDDEN, OUTPUT, PASSES
_UFUNC_OF_PASS = ("multiply", "tanh", "multiply", "add", "multiply", "multiply", "add", "tanh",
                  "multiply")
cdef int _WATCHED = FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID


cdef tuple _sample(object dtype):
    """Two operands of `dtype` for `_agrees` (long enough for SIMD bodies and tails; no zero, so
    reciprocal stays finite)."""
    a = np.arange(-18.5, 18.5, dtype=dtype)  # (37 halves, none of them zero)
    a *= 0.1459  # (-2.7 to 2.55: not round numbers; np.linspace costs more at its first call)
    return a, np.ascontiguousarray(a[::-1])


cdef bint _agrees(Loop loop, object ufunc, tuple sample):
    """Whether `loop` computes what `ufunc` computes, bit for bit, on `sample` (`_sample`), under
    the caller's ``np.errstate(all="ignore")``."""
    cdef cnp.ndarray a = sample[0]
    cdef cnp.ndarray b = sample[1]
    cdef cnp.ndarray out = np.empty_like(a)
    cdef char *args[3]
    cdef npy_intp steps[3]
    cdef npy_intp count = cnp.PyArray_DIM(a, 0)
    cdef int nin = ufunc.nin
    args[0], args[1] = <char *>cnp.PyArray_DATA(a), <char *>cnp.PyArray_DATA(b)
    args[nin] = <char *>cnp.PyArray_DATA(out)
    steps[0] = steps[1] = steps[2] = cnp.PyArray_ITEMSIZE(a)
    loop.fn(args, &count, steps, loop.data)
    expected = ufunc(a) if nin == 1 else ufunc(a, b)
    feclearexcept(_WATCHED)
    return out.tobytes() == expected.tobytes()


# Why a loop was not taken (`_find`), in the order they were looked for.
_declined = []
# Why the gate passes decline every operand here, or None where they run on numpy's loops.
_status = None
# Whether the loops are looked for: at the first pass (or `status()`), not at import, which a
# process that loads an RNN model without running its passes would pay for.
cdef bint _looked = False


cdef void _look_for_loops() noexcept:
    """Find both float types' loops (`_f32`, `_f64`) and `_status`; every loop NULL where one
    of them is not found, or where looking raises."""
    global _looked, _status, _f32, _f64
    _looked = True
    try:
        if "ufunc-loops" in native_off():
            _declined.append("turned off (CYLOOP_NATIVE_OFF)")
        else:
            _f32, _f64 = _loops(np.float32), _loops(np.float64)
    except Exception as e:  # (not a reason to fail a pass: the passes decline, and say why)
        _declined.append(f"looking for numpy's loops raised {type(e).__name__}: {e}")
    _status = _declined[0] if _declined else None
    if _status is not None:
        memset(&_f32, 0, sizeof(Loops))
        memset(&_f64, 0, sizeof(Loops))


def status():
    """Why the gate passes decline every operand here (a sentence), or None where they run on
    numpy's own inner loops."""
    if not _looked:
        _look_for_loops()
    return _status


cdef struct Rows:  # a [rows, n] operand whose rows are contiguous
    char *data
    npy_intp stride  # bytes from one row to the next


cdef inline void _unary(Loop loop, Rows a, Rows out, npy_intp rows, npy_intp n,
                        npy_intp item) noexcept nogil:
    cdef char *args[2]
    cdef npy_intp steps[2]
    cdef npy_intp r, count = n
    steps[0] = steps[1] = item
    if a.stride == n * item and out.stride == n * item:  # one run over all the rows
        count, rows = n * rows, 1
    for r in range(rows):
        args[0], args[1] = a.data + r * a.stride, out.data + r * out.stride
        loop.fn(args, &count, steps, loop.data)


cdef inline void _binary(Loop loop, Rows a, Rows b, npy_intp b_step, Rows out, npy_intp rows,
                         npy_intp n, npy_intp item) noexcept nogil:
    """out = a (op) b over [rows, n]; b_step 0: b is one value (its stride is ignored)."""
    cdef char *args[3]
    cdef npy_intp steps[3]
    cdef npy_intp r, count = n
    steps[0], steps[1], steps[2] = item, b_step, item
    if a.stride == n * item and out.stride == n * item \
            and (b_step == 0 or b.stride == n * item):
        count, rows = n * rows, 1
    for r in range(rows):
        args[0], args[2] = a.data + r * a.stride, out.data + r * out.stride
        args[1] = b.data if b_step == 0 else b.data + r * b.stride
        loop.fn(args, &count, steps, loop.data)


cdef inline int _flags_of(int *raised, int at) noexcept nogil:
    """Records the floating-point flags pass `at` raised (then clears them); nonzero if any."""
    cdef int flags = fetestexcept(_WATCHED)
    raised[at] = flags
    if flags:
        feclearexcept(_WATCHED)
    return flags


cdef bint _native(cnp.ndarray a, int type_num) noexcept:
    """Whether `a` is of `type_num`, aligned and in native byte order (what numpy's loops and
    BLAS read)."""
    return cnp.PyArray_TYPE(a) == type_num and cnp.PyArray_ISNOTSWAPPED(a) \
        and cnp.PyArray_ISALIGNED(a)


cdef bint _written(cnp.ndarray a) noexcept:
    """Whether the passes may write `a`, a [rows, n] array: writeable, and its rows apart (each
    element written once)."""
    return cnp.PyArray_ISWRITEABLE(a) and (
        cnp.PyArray_DIM(a, 0) < 2
        or abs(cnp.PyArray_STRIDE(a, 0)) >= cnp.PyArray_DIM(a, 1) * cnp.PyArray_ITEMSIZE(a))


cdef bint _rows_of(cnp.ndarray a, int type_num, npy_intp rows, npy_intp n, Rows *into):
    """Whether `a` is a [rows, n] array of `type_num` (`_native`) with contiguous rows (then in
    `into`)."""
    if not _native(a, type_num) or cnp.PyArray_NDIM(a) != 2 \
            or cnp.PyArray_DIM(a, 0) != rows or cnp.PyArray_DIM(a, 1) != n:
        return False
    if n > 1 and cnp.PyArray_STRIDE(a, 1) != cnp.PyArray_ITEMSIZE(a):
        return False
    into.data = <char *>cnp.PyArray_DATA(a)
    into.stride = cnp.PyArray_STRIDE(a, 0) if rows > 1 else n * cnp.PyArray_ITEMSIZE(a)
    return True


cdef int _lstm_passes(const Loops *loops, char *gates, npy_intp gate_stride, Rows cell,
                      Rows c_new, Rows h_new, npy_intp rows, npy_intp hidden, npy_intp item,
                      const int *at, bint halve, int *raised) noexcept nogil:
    """`lstm_tail`'s passes over `rows` rows of the batch: block k of the gates starts at
    ``gates + k * gate_stride``, its rows one after another (one run of rows * hidden values),
    and ``at`` says which block is f, i, g and o; cell, c_new and h_new are [rows, hidden]. Each
    pass's flags go to `raised` (the flags are cleared first); nonzero if any was raised."""
    cdef Rows blocks[4]
    cdef Rows one
    cdef double half64 = 0.5
    cdef float half32 = 0.5
    cdef npy_intp block = rows * hidden, k
    cdef int flagged = 0
    for k in range(4):
        blocks[k].data, blocks[k].stride = gates + k * gate_stride, hidden * item
    one.data = <char *>&half64 if item == sizeof(double) else <char *>&half32
    one.stride = 0
    feclearexcept(_WATCHED)
    raised[HALVE] = 0
    if halve:
        for k in range(4):
            if k != at[2]:
                _binary(loops.multiply, blocks[k], one, 0, blocks[k], 1, block, item)
        flagged |= _flags_of(raised, HALVE)
    if gate_stride == block * item:  # the blocks one after another: one run over them all
        _unary(loops.tanh, blocks[0], blocks[0], 1, 4 * block, item)
    else:
        for k in range(4):
            _unary(loops.tanh, blocks[k], blocks[k], 1, block, item)
    flagged |= _flags_of(raised, TANH)
    for k in range(4):
        if k != at[2]:
            _binary(loops.multiply, blocks[k], one, 0, blocks[k], 1, block, item)
    flagged |= _flags_of(raised, SIGMOID_SCALE)
    for k in range(4):
        if k != at[2]:
            _binary(loops.add, blocks[k], one, 0, blocks[k], 1, block, item)
    flagged |= _flags_of(raised, SIGMOID_OFFSET)
    _binary(loops.multiply, blocks[at[0]], cell, item, c_new, rows, hidden, item)
    flagged |= _flags_of(raised, FORGET)
    _binary(loops.multiply, blocks[at[1]], blocks[at[2]], item, blocks[at[1]], rows, hidden, item)
    flagged |= _flags_of(raised, INPUT)
    _binary(loops.add, c_new, blocks[at[1]], item, c_new, rows, hidden, item)
    flagged |= _flags_of(raised, CELL)
    _unary(loops.tanh, c_new, h_new, rows, hidden, item)
    flagged |= _flags_of(raised, HIDDEN)
    _binary(loops.multiply, h_new, blocks[at[3]], item, h_new, rows, hidden, item)
    flagged |= _flags_of(raised, OUTPUT)
    return flagged


cdef int _gate_blocks(object order, int *at) except -1:
    """Reads an LSTM's gate order ``order`` into ``at``: the blocks of f, i, g, o, its fields
    (kernels/_gate_orders.py `LstmGateOrder`: forget, input, cell, output), read as the tuple
    it is. 1 if they are a permutation of 0-3, else 0."""
    cdef int k, seen = 0
    if not isinstance(order, tuple) or len(<tuple>order) != 4:
        return 0
    for k in range(4):
        at[k] = (<tuple>order)[k]
        if at[k] < 0 or at[k] > 3:
            return 0
        seen |= 1 << at[k]
    return seen == 15


def lstm_tail(cnp.ndarray gates, cnp.ndarray c, object out, object order, bint halve):
    """(h', c') of an LSTM step from its gates' pre-activations ``gates`` [4, B, H], C-contiguous,
    whose blocks f, i, g, o are ``gates[order.forget]``, ``gates[order.input]``,
    ``gates[order.cell]``, ``gates[order.output]`` (``order``, an `LstmGateOrder`), and its cell
    state c [B, H]; or None for operands it does not take (nothing is written then).

    The passes, as numpy's ufunc calls would make them: with ``halve``, the sigmoid blocks are
    halved first (else they come halved: weights scaled by 1/2); then tanh over all of ``gates``,
    the sigmoid blocks times 1/2 plus 1/2 (sigmoid(x) = tanh(x/2)/2 + 1/2), ``c' = f * c``,
    ``i *= g``, ``c' += i``, ``h' = tanh(c')``, ``h' *= o``. ``gates`` is overwritten; c' is a
    fresh array, h' is written into ``out`` (a [B, H] array with contiguous rows that overlaps
    neither ``gates`` nor c) or a fresh array. Every operand has one float type (float32 or
    float64) and contiguous rows.
    """
    cdef int type_num = cnp.PyArray_TYPE(gates)
    cdef Loops *loops = _loops_of(type_num)
    cdef npy_intp batch, hidden, item
    cdef Rows cell, c_new, h_new
    cdef int at[4]
    cdef int raised[PASSES]
    cdef int flagged
    if loops == NULL or cnp.PyArray_NDIM(gates) != 3 or cnp.PyArray_DIM(gates, 0) != 4 \
            or not cnp.PyArray_IS_C_CONTIGUOUS(gates) or not _native(gates, type_num) \
            or not cnp.PyArray_ISWRITEABLE(gates) or not _gate_blocks(order, at):
        return None
    batch, hidden = cnp.PyArray_DIM(gates, 1), cnp.PyArray_DIM(gates, 2)
    if not _rows_of(c, type_num, batch, hidden, &cell):
        return None
    if out is not None and (not isinstance(out, np.ndarray)
                            or not _rows_of(out, type_num, batch, hidden, &h_new)
                            or not _written(out)
                            or arrays_overlap(out, gates) or arrays_overlap(out, c)):
        return None
    if batch * hidden == 0:
        return None
    c_out = np.empty((batch, hidden), c.dtype)
    _rows_of(c_out, type_num, batch, hidden, &c_new)
    h_out = out if out is not None else np.empty((batch, hidden), c.dtype)
    _rows_of(h_out, type_num, batch, hidden, &h_new)
    item = cnp.PyArray_ITEMSIZE(gates)
    with nogil:
        flagged = _lstm_passes(loops, <char *>cnp.PyArray_DATA(gates), batch * hidden * item,
                               cell, c_new, h_new, batch, hidden, item, at, halve, raised)
    if flagged:
        _report_raised(raised, PASSES, _UFUNC_OF_PASS)
    return h_out, c_out


cdef npy_intp _piece_rows(npy_intp batch, npy_intp step_macs, npy_intp gemm_row_macs,
                          bint two_cores) noexcept:
    """Rows of a piece of a step's job: the whole batch on one core, or for a step of under
    `CYL_SMALLEST` multiply-adds (a piece handed over would cost more than it saves); on two
    cores, rows of 8 (BLAS's row tiles full) from a batch of 16 on, else halves, fewer where a
    gemm call of the piece (`gemm_row_macs` multiply-adds a row) would reach OpenBLAS's
    threading threshold; 0 where one row's would (the step is declined)."""
    cdef npy_intp rows
    if not two_cores or step_macs < CYL_SMALLEST:
        return batch
    if gemm_row_macs >= CYL_PIECE_LIMIT:
        return 0
    rows = 8 if batch >= 16 else (batch + 1) // 2
    while rows > 1 and rows * gemm_row_macs >= CYL_PIECE_LIMIT:
        rows = (rows + 1) // 2
    return rows


cdef void _run_pieces(cyl_job_t *job, npy_intp batch, npy_intp rows,
                      bint two_cores) noexcept nogil:
    """Runs `job` (its piece function set) as blocks of `rows` of the batch's rows."""
    job.pieces = (batch + rows - 1) // rows
    job.alone = not two_cores
    run_job(job)


cdef _report_raised(const int *raised, int passes, tuple ufunc_of_pass):
    """`_report` of the passes that raised flags (``raised[k]``: pass k's)."""
    cdef int k, any_raised = 0
    for k in range(passes):
        any_raised |= raised[k]
    if not any_raised:  # (the common case: no list made)
        return
    _report([(ufunc_of_pass[k], raised[k]) for k in range(passes) if raised[k]])


cdef struct LstmJob:  # `lstm_product_tail` as a job of pieces, each a block of the batch's rows
    cyl_job_t job  # (first: the runner sees a cyl_job_t)
    const Loops *loops
    bint double_precision
    npy_intp batch, hidden, inputs, item, rows  # rows: a piece's (the last may have fewer)
    const char *h  # [batch, inputs], rows `h_stride` elements apart
    npy_intp h_stride
    const char *w  # [4, inputs, hidden]: rows `w_stride` elements apart, blocks `w_block`
    npy_intp w_stride, w_block
    const char *x  # [batch, 4 * hidden], rows `x_stride` bytes apart (0: one row for all)
    npy_intp x_stride
    char *gates  # [4, batch, hidden], C-contiguous
    Rows cell, c_new, h_new
    int at[4]  # the blocks of f, i, g, o (`_gate_blocks`)
    bint halve
    int *raised  # each pass's flags, over every piece


cdef void _lstm_piece(const void *job_, int64_t index) noexcept nogil:
    """Piece `index` of an `LstmJob`: its rows' gates (x's row copied in, then h's rows times
    each block of w added by one gemm), then their passes."""
    cdef const LstmJob *job = <const LstmJob *>job_
    cdef npy_intp first = index * job.rows, hidden = job.hidden, item = job.item
    cdef npy_intp rows = min(job.rows, job.batch - first), gate_stride = job.batch * hidden * item
    cdef npy_intp k, r
    cdef char *block
    cdef Rows cell = job.cell, c_new = job.c_new, h_new = job.h_new
    cdef int raised[PASSES]
    for k in range(4):
        block = job.gates + k * gate_stride + first * hidden * item
        for r in range(rows):
            memcpy(block + r * hidden * item,
                   job.x + (first + r) * job.x_stride + k * hidden * item, hidden * item)
        gemm(job.double_precision, rows, hidden, job.inputs,
             job.h + first * job.h_stride * item, job.h_stride, job.w + k * job.w_block * item,
             job.w_stride, block, hidden, True)
    cell.data += first * cell.stride
    c_new.data += first * c_new.stride
    h_new.data += first * h_new.stride
    if _lstm_passes(job.loops, job.gates + first * hidden * item, gate_stride, cell, c_new,
                    h_new, rows, hidden, item, job.at, job.halve, raised):
        for k in range(PASSES):
            if raised[k]:
                cyl_job_or(&job.raised[k], raised[k])


cdef bint _value(cnp.ndarray a, int type_num) noexcept:
    """Whether `a` is 0-d, of `type_num`, aligned and in native byte order."""
    return cnp.PyArray_NDIM(a) == 0 and cnp.PyArray_TYPE(a) == type_num \
        and cnp.PyArray_ISNOTSWAPPED(a) and cnp.PyArray_ISALIGNED(a)


cdef bint _operand(cnp.ndarray a, int type_num, int nd) noexcept:
    """Whether `a` has `nd` axes, is of `type_num`, aligned, in native byte order, unit-strided
    along its last axis and with whole-element, non-negative other strides."""
    cdef npy_intp item = cnp.PyArray_ITEMSIZE(a), k
    if nd < 1 or cnp.PyArray_TYPE(a) != type_num or cnp.PyArray_NDIM(a) != nd \
            or not (cnp.PyArray_ISNOTSWAPPED(a) and cnp.PyArray_ISALIGNED(a)):
        return False
    if cnp.PyArray_DIM(a, nd - 1) > 1 and cnp.PyArray_STRIDE(a, nd - 1) != item:
        return False
    for k in range(nd - 1):
        if cnp.PyArray_STRIDE(a, k) < 0 or cnp.PyArray_STRIDE(a, k) % item:
            return False
    return True


def lstm_product_tail(cnp.ndarray h, cnp.ndarray w, cnp.ndarray x, cnp.ndarray c, object out,
                      object order, bint halve, bint two_cores):
    """(h', c') of an LSTM step whose gates' pre-activations are, block k of four,
    ``x[:, k H : (k + 1) H] + h @ w[k]``, followed by `lstm_tail`'s passes; or None for operands
    it does not take (nothing is written then).

    h [B, K], w [4, K, H], x [B, 4H] (or one row for every batch row: [1, 4H] or [4H]) and c
    [B, H], all of one float type, aligned, in native byte order and unit-strided along their
    last axis; ``out`` as `lstm_tail`'s, overlapping no operand. One job of pieces, each a block
    of the batch's rows: its four gemm calls (numpy's own BLAS, `_two_core.gemm`), each under
    OpenBLAS's threading threshold, and its passes (`lstm_tail`'s, the same loops); with
    ``two_cores``, this thread and `_two_core`'s helper take the pieces in turn (rows of 8 from
    16 on, else halves; one piece for a step of under `CYL_SMALLEST` multiply-adds), else it is
    one piece on this thread. The passes' values are `lstm_tail`'s on the gates the gemm calls
    make, and its floating-point report is `lstm_tail`'s of every piece's flags (the gemm
    calls' own are not reported, as those of `_two_core`'s products are not)."""
    cdef LstmJob job
    cdef int raised[PASSES]
    cdef int type_num = cnp.PyArray_TYPE(c)
    cdef npy_intp batch, hidden
    gates = _lstm_job(&job, h, w, x, c, out, order, halve, two_cores, raised)
    if gates is None:
        return None
    batch, hidden = job.batch, job.hidden
    c_out = cnp.PyArray_EMPTY(2, [batch, hidden], type_num, 0)
    _rows_of(c_out, type_num, batch, hidden, &job.c_new)
    h_out = _made_into(out, type_num, batch, hidden, &job.h_new)
    with nogil:
        _run_pieces(&job.job, batch, job.rows, two_cores)
    _report_raised(raised, PASSES, _UFUNC_OF_PASS)
    return h_out, c_out


cdef cnp.ndarray _rows_apart(cnp.ndarray state):
    """A state as the steps take it, rows of contiguous elements: a C-order copy of one whose
    last axis is strided (a gate-major step hands on transposed views), else itself (what
    accel/gemm.py `rows_apart` makes of it)."""
    cdef int nd = cnp.PyArray_NDIM(state)
    if nd >= 1 and cnp.PyArray_STRIDE(state, nd - 1) != cnp.PyArray_ITEMSIZE(state):
        return cnp.PyArray_GETCONTIGUOUS(state)
    return state


def lstm_product_steps(cnp.ndarray h not None, cnp.ndarray w not None, cnp.ndarray xs not None,
                       cnp.ndarray c not None, cnp.ndarray outs not None, object order,
                       bint halve, bint two_cores, bint staged=False):
    """The last (h', c') of ``len(xs)`` consecutive LSTM steps, each `lstm_product_tail`'s, in
    one call: step s takes ``xs[s]`` and writes its h' into ``outs[s]``, and its h and c are
    the step before's h' and c' (step 0's: `h` and `c`); or None for operands it does not take
    (nothing is written then). What a recurrent loop's iterations would compute calling
    `lstm_product_tail` once each, value for value, without returning to Python between them
    (the Python around a call a step is a good part of a small step's time).

    xs [S, B, 4H] and outs [S, B, H] (S >= 1) hold, step after step, operands step 0 would take
    as x and ``out`` (each step's at one stride from the one before), and h' must fit h's place:
    K = H; a state whose last axis is strided is taken as a C-order copy (`_rows_apart`). The
    slots of outs share no byte, with each other nor with any operand, unless `h` is
    the slot just before ``outs[0]`` of the same layout (an output's previous slot). The c' of
    each step but the last is a buffer of this call's, written over two steps later; the last
    is a fresh array, and the h' returned is ``outs[-1]``. With `staged`, each step makes its h'
    in a contiguous buffer of this call's, which the next step reads, and copies it into its
    slot (for slots whose rows lie far apart: a [B, T, H] output's). The floating-point report
    is made once, after the last step, of every step's flags."""
    cdef LstmJob job
    cdef int raised[PASSES]
    cdef npy_intp steps, s, batch, hidden, item, step_bytes, x_step, row
    cdef int type_num
    cdef char *out_data
    cdef const char *x_data
    cdef Rows cells[2]
    cdef Rows made[2]
    cdef Rows slot
    if not _steps_of(xs, outs):
        return None
    h, c = _rows_apart(h), _rows_apart(c)
    steps = cnp.PyArray_DIM(xs, 0)
    gates = _lstm_job(&job, h, w, xs[0], c, outs[0], order, halve, two_cores, raised)
    type_num, batch, hidden, item = cnp.PyArray_TYPE(c), job.batch, job.hidden, job.item
    row = cnp.PyArray_STRIDE(outs, 1)
    # Every step's operands as step 0's, one stride on (aligned: whole elements apart), and
    # h' rows a gemm reads as the next step's h (rows forward, at least a row apart).
    if gates is None or hidden != job.inputs or not _native(xs, type_num) \
            or not _native(outs, type_num) \
            or batch > 1 and (row < hidden * item or row % item) \
            or arrays_overlap(outs, xs) or arrays_overlap(outs, w) or arrays_overlap(outs, c) \
            or not _slots_apart(outs, h, batch, hidden * item):
        return None
    step_bytes, x_step = cnp.PyArray_STRIDE(outs, 0), cnp.PyArray_STRIDE(xs, 0)
    out_data, x_data = <char *>cnp.PyArray_DATA(outs), <const char *>cnp.PyArray_DATA(xs)
    c_last = cnp.PyArray_EMPTY(2, [batch, hidden], type_num, 0)
    c_spare = cnp.PyArray_EMPTY(2, [batch, hidden], type_num, 0) if steps > 1 else c_last
    # Step s writes its c' into cells[(steps - 1 - s) % 2]: the last step's is c_last.
    _rows_of(c_last, type_num, batch, hidden, &cells[0])
    _rows_of(c_spare, type_num, batch, hidden, &cells[1])
    slot = job.h_new  # (outs[0]'s rows)
    _kept = _staging(made, type_num, batch, hidden) if staged else None
    with nogil:
        for s in range(steps):
            if s > 0:  # h and c: the step before's h' and c'
                job.h, job.h_stride = job.h_new.data, job.h_new.stride // item
                if batch == 1:
                    job.h_stride = hidden
                job.cell = job.c_new
            job.x = x_data + s * x_step
            job.h_new = made[s % 2] if staged else slot
            if not staged:
                job.h_new.data = out_data + s * step_bytes
            job.c_new = cells[(steps - 1 - s) % 2]
            _run_pieces(&job.job, batch, job.rows, two_cores)
            if staged:
                _copy_rows(made[s % 2], slot.data + s * step_bytes, slot.stride, batch,
                           hidden * item)
    _report_raised(raised, PASSES, _UFUNC_OF_PASS)
    return outs[steps - 1], c_last


cdef bint _steps_of(cnp.ndarray xs, cnp.ndarray outs) noexcept:
    """Whether xs [S, B, ...] and outs [S, B, ...] hold one and the same number S >= 1 of steps'
    operands (what a call of many steps takes; each step's are checked as its own)."""
    return cnp.PyArray_NDIM(xs) == 3 and cnp.PyArray_NDIM(outs) == 3 \
        and cnp.PyArray_DIM(xs, 0) == cnp.PyArray_DIM(outs, 0) and cnp.PyArray_DIM(xs, 0) >= 1


cdef object _made_into(object out, int type_num, npy_intp rows, npy_intp n, Rows *into):
    """Where a step makes its [rows, n] result: `out` (already checked by the caller), or a
    fresh array; its rows in `into`."""
    result = out if out is not None else cnp.PyArray_EMPTY(2, [rows, n], type_num, 0)
    _rows_of(result, type_num, rows, n, into)
    return result


cdef list _staging(Rows *made, int type_num, npy_intp rows, npy_intp n):
    """The two contiguous [rows, n] buffers a staged call of steps makes its states in, turn
    about (`made[0]`, `made[1]`); the caller keeps the list (their memory) while it runs."""
    return [_made_into(None, type_num, rows, n, &made[k]) for k in range(2)]


cdef inline void _copy_rows(Rows source, char *to, npy_intp to_stride, npy_intp rows,
                            npy_intp row_bytes) noexcept nogil:
    cdef npy_intp k
    for k in range(rows):
        memcpy(to + k * to_stride, source.data + k * source.stride, row_bytes)


cdef bint _slots_apart(cnp.ndarray outs, cnp.ndarray h, npy_intp batch,
                       npy_intp row_bytes) noexcept:
    """Whether the [batch, n] slots of `outs` [S, batch, n] (rows of `row_bytes` contiguous, as
    `_rows_of` found slot 0's) share no byte with each other nor with `h`, read at step 0
    (`h` may be the slot before outs[0], of the same layout: it is counted as one more slot).
    Each slot's whole span apart from the next, or the slots' rows interleaved (one batch row of
    every slot, then the next batch row: a [B, T, H] output's slots)."""
    cdef npy_intp count = cnp.PyArray_DIM(outs, 0), step = cnp.PyArray_STRIDE(outs, 0)
    cdef npy_intp row = cnp.PyArray_STRIDE(outs, 1) if batch > 1 else 0
    cdef bint before = (cnp.PyArray_NDIM(h) == 2 and cnp.PyArray_DIM(h, 0) == batch
                        and (batch == 1 or cnp.PyArray_STRIDE(h, 0) == row)
                        and <char *>cnp.PyArray_DATA(h) + step == <char *>cnp.PyArray_DATA(outs))
    if not before and arrays_overlap(outs, h):
        return False
    count += before
    if count == 1:
        return True
    step, row = abs(step), abs(row)
    if step >= (batch - 1) * row + row_bytes:  # each slot's span apart from the next's
        return True
    # Interleaved: slots a step of at least a row apart, and one batch row of all of them
    # within the next's start.
    return step >= row_bytes and (batch == 1 or row >= (count - 1) * step + row_bytes)


cdef object _lstm_job(LstmJob *job, cnp.ndarray h, cnp.ndarray w, cnp.ndarray x, cnp.ndarray c,
                      object out, object order, bint halve, bint two_cores, int *raised):
    """`job` set up for `lstm_product_tail`'s step on these operands, all but where c' and h'
    go (``job.c_new``; ``job.h_new`` is `out`'s rows if given), with `raised` (PASSES flags,
    cleared) for its flags; returns the gate buffer it writes, or None if the step is declined
    (nothing allocated)."""
    cdef int type_num = cnp.PyArray_TYPE(c)
    cdef Loops *loops = _loops_of(type_num)
    cdef npy_intp batch, hidden, inputs, item
    cdef int k
    if loops == NULL or not has_gemm(type_num == cnp.NPY_DOUBLE) \
            or not _gate_blocks(order, job.at) \
            or not (_operand(h, type_num, 2) and _operand(w, type_num, 3)
                    and _operand(x, type_num, cnp.PyArray_NDIM(x))):
        return None
    batch, inputs = cnp.PyArray_DIM(h, 0), cnp.PyArray_DIM(h, 1)
    hidden = cnp.PyArray_DIM(c, 1) if cnp.PyArray_NDIM(c) == 2 else 0
    item = cnp.PyArray_ITEMSIZE(c)
    if batch * hidden * inputs == 0 or cnp.PyArray_DIM(w, 0) != 4 \
            or cnp.PyArray_DIM(w, 1) != inputs or cnp.PyArray_DIM(w, 2) != hidden \
            or cnp.PyArray_STRIDE(w, 1) < hidden * item \
            or cnp.PyArray_STRIDE(h, 0) < inputs * item and batch > 1 \
            or not 1 <= cnp.PyArray_NDIM(x) <= 2 or cnp.PyArray_DIM(x, cnp.PyArray_NDIM(x) - 1) \
            != 4 * hidden or cnp.PyArray_NDIM(x) == 2 and cnp.PyArray_DIM(x, 0) not in (1, batch) \
            or not _rows_of(c, type_num, batch, hidden, &job.cell):
        return None
    if out is not None and (not isinstance(out, np.ndarray)
                            or not _rows_of(out, type_num, batch, hidden, &job.h_new)
                            or not _written(out) or rows_overlap(out, h)
                            or arrays_overlap(out, w) or arrays_overlap(out, x)
                            or arrays_overlap(out, c)):
        return None
    job.rows = _piece_rows(batch, 4 * batch * inputs * hidden, inputs * hidden, two_cores)
    if job.rows == 0:
        return None
    gates = cnp.PyArray_EMPTY(3, [4, batch, hidden], type_num, 0)
    job.loops = loops
    job.double_precision = type_num == cnp.NPY_DOUBLE
    job.batch, job.hidden, job.inputs, job.item = batch, hidden, inputs, item
    job.h, job.h_stride = <const char *>cnp.PyArray_DATA(h), cnp.PyArray_STRIDE(h, 0) // item
    if batch == 1:
        job.h_stride = inputs
    job.w = <const char *>cnp.PyArray_DATA(w)
    job.w_stride, job.w_block = cnp.PyArray_STRIDE(w, 1) // item, cnp.PyArray_STRIDE(w, 0) // item
    job.x = <const char *>cnp.PyArray_DATA(x)
    job.x_stride = 0 if cnp.PyArray_NDIM(x) == 1 or cnp.PyArray_DIM(x, 0) == 1 \
        else cnp.PyArray_STRIDE(x, 0)
    job.gates = <char *>cnp.PyArray_DATA(gates)
    job.halve = halve
    for k in range(PASSES):
        raised[k] = 0
    job.raised = raised
    job.job.run = _lstm_piece
    return gates


cdef struct TanhJob:  # `product_tanh` as a job of pieces, each a block of the batch's rows
    cyl_job_t job  # (first: the runner sees a cyl_job_t)
    const Loops *loops
    bint double_precision
    npy_intp batch, inputs, width, item, rows  # rows: a piece's (the last may have fewer)
    const char *h  # [batch, inputs], rows `h_stride` elements apart
    npy_intp h_stride
    const char *r  # [inputs, width], rows `r_stride` elements apart
    npy_intp r_stride
    const char *x  # [batch, width], rows `x_stride` bytes apart (0: one row for all)
    npy_intp x_stride
    bint x_one  # x is one value for every element (a 0-d x)
    Rows out  # [batch, width]
    int *raised  # the tanh pass's flags, over every piece


cdef inline void _fill(char *row, const char *value, npy_intp width,
                       npy_intp item) noexcept nogil:
    """`width` elements of `item` bytes (4 or 8) at `row`, each the bits of the one at `value`."""
    cdef npy_intp j
    cdef uint32_t bits32
    cdef uint64_t bits64
    if item == 4:
        memcpy(&bits32, value, 4)
        for j in range(width):
            (<uint32_t *>row)[j] = bits32
    else:
        memcpy(&bits64, value, 8)
        for j in range(width):
            (<uint64_t *>row)[j] = bits64


cdef void _tanh_piece(const void *job_, int64_t index) noexcept nogil:
    """Piece `index` of a `TanhJob`: x's rows copied into its rows of out (x's one value into
    each element, for a 0-d x), h's rows times r added by one gemm, then tanh over them in
    place."""
    cdef const TanhJob *job = <const TanhJob *>job_
    cdef npy_intp first = index * job.rows, width = job.width, item = job.item, k
    cdef npy_intp rows = min(job.rows, job.batch - first)
    cdef Rows out = job.out
    cdef int raised[1]
    out.data += first * out.stride
    for k in range(rows):
        if job.x_one:
            _fill(out.data + k * out.stride, job.x, width, item)
        else:
            memcpy(out.data + k * out.stride, job.x + (first + k) * job.x_stride, width * item)
    gemm(job.double_precision, rows, width, job.inputs, job.h + first * job.h_stride * item,
         job.h_stride, job.r, job.r_stride, out.data, out.stride // item, True)
    feclearexcept(_WATCHED)
    _unary(job.loops.tanh, out, out, rows, width, item)
    if _flags_of(raised, 0):
        cyl_job_or(&job.raised[0], raised[0])


def product_tanh(cnp.ndarray h, cnp.ndarray r, object x, object out, bint two_cores):
    """``tanh(x + h @ r)`` (a plain RNN's step) as one call, or None for operands it does not
    take (nothing is written then).

    h [B, K], r [K, N] and x [B, N] (or one row for every batch row: [1, N] or [N]; or one
    value for every element: 0-d, a numpy scalar too), all of one float type, aligned, in
    native byte order and unit-strided along their last axis; ``out`` a
    [B, N] array with contiguous rows apart from one another, overlapping no operand (h only by
    whole rows of another slot), or None (a fresh one). One job of pieces, each a block of the
    batch's rows: x's rows copied into out's, one gemm call (numpy's own BLAS, `_two_core.gemm`,
    under OpenBLAS's threading threshold) adding h's rows times r to them, then numpy's own
    tanh loop over them; on two cores with ``two_cores`` (rows as `lstm_product_tail` cuts
    them), else one piece on this thread. The values are the product's, then np.tanh's, and so
    is the floating-point report (tanh's; the gemm call's own flags are not reported, as those of
    `_two_core`'s products are not)."""
    cdef TanhJob job
    cdef int raised[1]
    if isinstance(x, np.generic):
        x = np.asarray(x)
    if not isinstance(x, np.ndarray) or not _tanh_job(&job, h, r, x, out, two_cores, raised):
        return None
    result = _made_into(out, cnp.PyArray_TYPE(h), job.batch, job.width, &job.out)
    with nogil:
        _run_pieces(&job.job, job.batch, job.rows, two_cores)
    _report_raised(raised, 1, ("tanh",))
    return result


def product_tanh_steps(cnp.ndarray h not None, cnp.ndarray r not None,
                       cnp.ndarray xs not None, cnp.ndarray outs not None, bint two_cores,
                       bint staged=False):
    """The last h' of ``len(xs)`` consecutive plain RNN steps, each `product_tanh`'s, in one
    call: step s takes ``xs[s]`` and writes its h' into ``outs[s]``, and its h is the step
    before's h' (step 0's: `h`); or None for operands it does not take (nothing is written
    then). What a recurrent loop's iterations would compute calling `product_tanh` once each,
    value for value, without returning to Python between them.

    xs [S, B, N] and outs [S, B, N] (S >= 1) hold, step after step, operands step 0 would take
    as x and ``out`` (each step's at one stride from the one before), and h' must fit h's place:
    K = N; an h whose last axis is strided is taken as a C-order copy (`_rows_apart`). The
    slots of outs share no byte, with each other nor with any operand, unless `h` is
    the slot just before ``outs[0]`` of the same layout (an output's previous slot). The h'
    returned is ``outs[-1]``; `staged` as `lstm_product_steps`'; the floating-point report is
    made once, after the last step, of every step's flags."""
    cdef TanhJob job
    cdef int raised[1]
    cdef npy_intp steps, s, item, step_bytes, x_step, row
    cdef int type_num = cnp.PyArray_TYPE(h)
    cdef char *out_data
    cdef const char *x_data
    cdef Rows made[2]
    cdef Rows slot
    if not _steps_of(xs, outs):
        return None
    h = _rows_apart(h)
    if not _tanh_job(&job, h, r, xs[0], outs[0], two_cores, raised):
        return None
    steps, item, row = cnp.PyArray_DIM(xs, 0), job.item, cnp.PyArray_STRIDE(outs, 1)
    # Every step's operands as step 0's, one stride on (aligned: whole elements apart), and
    # h' rows a gemm reads as the next step's h (rows forward, at least a row apart).
    if job.inputs != job.width or not _native(xs, type_num) or not _native(outs, type_num) \
            or job.batch > 1 and (row < job.width * item or row % item) \
            or arrays_overlap(outs, xs) or arrays_overlap(outs, r) \
            or not _slots_apart(outs, h, job.batch, job.width * item):
        return None
    step_bytes, x_step = cnp.PyArray_STRIDE(outs, 0), cnp.PyArray_STRIDE(xs, 0)
    out_data, x_data = <char *>cnp.PyArray_DATA(outs), <const char *>cnp.PyArray_DATA(xs)
    slot = job.out  # (outs[0]'s rows)
    _kept = _staging(made, type_num, job.batch, job.width) if staged else None
    with nogil:
        for s in range(steps):
            if s > 0:  # h: the step before's h'
                job.h = job.out.data
                job.h_stride = job.out.stride // item if job.batch > 1 else job.inputs
            job.x = x_data + s * x_step
            job.out = made[s % 2] if staged else slot
            if not staged:
                job.out.data = out_data + s * step_bytes
            _run_pieces(&job.job, job.batch, job.rows, two_cores)
            if staged:
                _copy_rows(made[s % 2], slot.data + s * step_bytes, slot.stride, job.batch,
                           job.width * item)
    _report_raised(raised, 1, ("tanh",))
    return outs[steps - 1]


cdef bint _tanh_job(TanhJob *job, cnp.ndarray h, cnp.ndarray r, cnp.ndarray x, object out,
                    bint two_cores, int *raised):
    """Whether `product_tanh` takes these operands; if so `job` is set up for its step, all but
    where h' goes when `out` is None (``job.out``), with `raised` (cleared) for its flags."""
    cdef int type_num = cnp.PyArray_TYPE(h), x_nd = cnp.PyArray_NDIM(x)
    cdef Loops *loops = _loops_of(type_num)
    cdef npy_intp batch, inputs, width, item
    if loops == NULL or not has_gemm(type_num == cnp.NPY_DOUBLE) \
            or not (_operand(h, type_num, 2) and _operand(r, type_num, 2)
                    and (_operand(x, type_num, x_nd) if x_nd else _value(x, type_num))):
        return False
    batch, inputs = cnp.PyArray_DIM(h, 0), cnp.PyArray_DIM(h, 1)
    width, item = cnp.PyArray_DIM(r, 1), cnp.PyArray_ITEMSIZE(h)
    if batch * inputs * width == 0 or cnp.PyArray_DIM(r, 0) != inputs \
            or cnp.PyArray_STRIDE(r, 0) < width * item and inputs > 1 \
            or cnp.PyArray_STRIDE(h, 0) < inputs * item and batch > 1 \
            or x_nd > 2 or x_nd and cnp.PyArray_DIM(x, x_nd - 1) != width \
            or x_nd == 2 and cnp.PyArray_DIM(x, 0) not in (1, batch):
        return False
    if out is not None and (not isinstance(out, np.ndarray)
                            or not _rows_of(out, type_num, batch, width, &job.out)
                            or job.out.stride < width * item  # (gemm's rows go forward)
                            or not _written(out) or rows_overlap(out, h)
                            or arrays_overlap(out, r) or arrays_overlap(out, x)):
        return False
    job.rows = _piece_rows(batch, batch * inputs * width, inputs * width, two_cores)
    if job.rows == 0:
        return False
    job.loops = loops
    job.double_precision = type_num == cnp.NPY_DOUBLE
    job.batch, job.inputs, job.width, job.item = batch, inputs, width, item
    job.h = <const char *>cnp.PyArray_DATA(h)
    job.h_stride = cnp.PyArray_STRIDE(h, 0) // item if batch > 1 else inputs
    job.r = <const char *>cnp.PyArray_DATA(r)
    job.r_stride = cnp.PyArray_STRIDE(r, 0) // item if inputs > 1 else width
    job.x = <const char *>cnp.PyArray_DATA(x)
    job.x_one = x_nd == 0
    job.x_stride = 0 if x_nd <= 1 or cnp.PyArray_DIM(x, 0) == 1 else cnp.PyArray_STRIDE(x, 0)
    raised[0] = 0
    job.raised = raised
    job.job.run = _tanh_piece
    return True


# The passes of `gru_gates` and `gru_blend`, in order, by the ufunc each runs.
cdef enum:
    G_NEGATIVE, G_MINIMUM, G_EXP, G_ADD, G_RECIPROCAL, G_RESET, G_PASSES
_UFUNC_OF_GATES_PASS = ("negative", "minimum", "exp", "add", "reciprocal", "multiply")
cdef enum:
    B_RESET, B_INPUT, B_TANH, B_SUBTRACT, B_SCALE, B_ADD, B_PASSES
_UFUNC_OF_BLEND_PASS = ("multiply", "add", "tanh", "subtract", "multiply", "add")


cdef int _gru_gates_passes(const Loops *loops, char *zr, Rows state, Rows product, Rows limit,
                           npy_intp rows, npy_intp hidden, npy_intp item, bint reset_h,
                           int *raised) noexcept nogil:
    """`gru_gates`'s passes over `rows` rows: zr [rows, 2H] (one run of values), h (`state`)
    and reset * h (`product`, with `reset_h`) [rows, H], the cap a 0-d operand (`limit`). Each
    pass's flags go to `raised` (the flags are cleared first); nonzero if any was raised."""
    cdef Rows whole, reset, one
    cdef double one64 = 1
    cdef float one32 = 1
    cdef npy_intp count = 2 * rows * hidden
    cdef int flagged = 0
    whole.data, whole.stride = zr, count * item
    reset.data, reset.stride = zr + hidden * item, 2 * hidden * item
    one.data = <char *>&one64 if item == sizeof(double) else <char *>&one32
    one.stride = 0
    feclearexcept(_WATCHED)
    _unary(loops.negative, whole, whole, 1, count, item)
    flagged |= _flags_of(raised, G_NEGATIVE)
    _binary(loops.minimum, whole, limit, 0, whole, 1, count, item)
    flagged |= _flags_of(raised, G_MINIMUM)
    _unary(loops.exp, whole, whole, 1, count, item)
    flagged |= _flags_of(raised, G_EXP)
    _binary(loops.add, whole, one, 0, whole, 1, count, item)
    flagged |= _flags_of(raised, G_ADD)
    _unary(loops.reciprocal, whole, whole, 1, count, item)
    flagged |= _flags_of(raised, G_RECIPROCAL)
    raised[G_RESET] = 0
    if reset_h:
        _binary(loops.multiply, reset, state, item, product, rows, hidden, item)
        flagged |= _flags_of(raised, G_RESET)
    return flagged


cdef int _gru_blend_passes(const Loops *loops, Rows n, Rows state, Rows z, Rows x_n,
                           Rows h_new, npy_intp rows, npy_intp hidden, npy_intp item,
                           bint linear_before_reset, int *raised) noexcept nogil:
    """`gru_blend`'s passes over `rows` rows: the candidate n, h (`state`), the activated gates
    z [rows, 2H] (z, then the reset gate), xw's third block (`x_n`, with
    `linear_before_reset`) and h' [rows, H]. Each pass's flags go to `raised` (the flags are
    cleared first); nonzero if any was raised."""
    cdef Rows reset
    cdef int flagged = 0
    reset.data, reset.stride = z.data + hidden * item, z.stride
    feclearexcept(_WATCHED)
    raised[B_RESET] = raised[B_INPUT] = 0
    if linear_before_reset:
        _binary(loops.multiply, n, reset, item, n, rows, hidden, item)
        flagged |= _flags_of(raised, B_RESET)
        _binary(loops.add, n, x_n, item, n, rows, hidden, item)
        flagged |= _flags_of(raised, B_INPUT)
    _unary(loops.tanh, n, n, rows, hidden, item)
    flagged |= _flags_of(raised, B_TANH)
    _binary(loops.subtract, state, n, item, h_new, rows, hidden, item)
    flagged |= _flags_of(raised, B_SUBTRACT)
    _binary(loops.multiply, h_new, z, item, h_new, rows, hidden, item)
    flagged |= _flags_of(raised, B_SCALE)
    _binary(loops.add, h_new, n, item, h_new, rows, hidden, item)
    flagged |= _flags_of(raised, B_ADD)
    return flagged


def gru_gates(cnp.ndarray zr, cnp.ndarray h, cnp.ndarray cap, bint reset_h):
    """A GRU step's update and reset gates: sigmoid over ``zr`` [B, 2H] (C-contiguous: z, then
    the reset gate), in place, with the passes of `_math.sigmoid` (negative, minimum with
    ``cap``, a 0-d array of zr's type, exp, plus 1, reciprocal); with ``reset_h``, then also the
    reset gate times h [B, H] (rows contiguous), as a fresh array, which it returns (else zr).
    None for operands it does not take (nothing is written then)."""
    cdef int type_num = cnp.PyArray_TYPE(zr)
    cdef Loops *loops = _loops_of(type_num)
    cdef npy_intp batch, hidden, item
    cdef Rows whole, state, product, limit
    cdef int raised[G_PASSES]
    cdef int flagged
    if loops == NULL or cnp.PyArray_NDIM(zr) != 2 or not cnp.PyArray_IS_C_CONTIGUOUS(zr) \
            or not _native(zr, type_num) or not cnp.PyArray_ISWRITEABLE(zr) \
            or cnp.PyArray_NDIM(h) != 2 or not _native(cap, type_num) \
            or cnp.PyArray_NDIM(cap) != 0:
        return None
    batch, hidden = cnp.PyArray_DIM(h, 0), cnp.PyArray_DIM(h, 1)
    if cnp.PyArray_DIM(zr, 0) != batch or cnp.PyArray_DIM(zr, 1) != 2 * hidden \
            or batch * hidden == 0 or not _rows_of(h, type_num, batch, hidden, &state):
        return None
    item = cnp.PyArray_ITEMSIZE(zr)
    whole.data, whole.stride = <char *>cnp.PyArray_DATA(zr), 2 * batch * hidden * item
    limit.data, limit.stride = <char *>cnp.PyArray_DATA(cap), 0
    result = np.empty((batch, hidden), zr.dtype) if reset_h else zr
    product.data, product.stride = <char *>cnp.PyArray_DATA(result), hidden * item
    with nogil:
        flagged = _gru_gates_passes(loops, whole.data, state, product, limit, batch, hidden,
                                    item, reset_h, raised)
    if flagged:
        _report_raised(raised, G_PASSES, _UFUNC_OF_GATES_PASS)
    return result


def gru_blend(cnp.ndarray candidate, cnp.ndarray h, cnp.ndarray zr, object out, object xw):
    """A GRU step's new state from its candidate's pre-activation [B, H] (C-contiguous,
    overwritten), h [B, H] and the activated gates ``zr`` [B, 2H] (`gru_gates`), with the passes
    of the cell's step: with ``xw`` (the input projection [B, 3H]: linear_before_reset), first
    the candidate times the reset gate plus xw's third block; then tanh over the candidate n,
    and ``h' = h - n``, ``h' *= z``, ``h' += n`` ((1 - z) n + z h). h' goes into ``out`` (a
    [B, H] array overlapping no operand) or a fresh array, which it returns; None for operands
    it does not take (nothing is written then). Every operand has one float type and contiguous
    rows."""
    cdef int type_num = cnp.PyArray_TYPE(candidate)
    cdef Loops *loops = _loops_of(type_num)
    cdef npy_intp batch, hidden, item
    cdef Rows n, state, z, x_n, h_new
    cdef int raised[B_PASSES]
    cdef int flagged
    cdef bint linear_before_reset = xw is not None
    if loops == NULL or cnp.PyArray_NDIM(candidate) != 2 \
            or not cnp.PyArray_IS_C_CONTIGUOUS(candidate) or not _native(candidate, type_num) \
            or not cnp.PyArray_ISWRITEABLE(candidate) or cnp.PyArray_NDIM(zr) != 2 \
            or not cnp.PyArray_IS_C_CONTIGUOUS(zr) or not _native(zr, type_num):
        return None
    batch, hidden = cnp.PyArray_DIM(candidate, 0), cnp.PyArray_DIM(candidate, 1)
    if batch * hidden == 0 or cnp.PyArray_DIM(zr, 0) != batch \
            or cnp.PyArray_DIM(zr, 1) != 2 * hidden \
            or not _rows_of(h, type_num, batch, hidden, &state) \
            or arrays_overlap(candidate, h) or arrays_overlap(candidate, zr):
        return None
    if linear_before_reset and (not isinstance(xw, np.ndarray)
                                or not _rows_of(xw, type_num, batch, 3 * hidden, &x_n)
                                or arrays_overlap(candidate, xw)):
        return None
    if out is not None and (not isinstance(out, np.ndarray)
                            or not _rows_of(out, type_num, batch, hidden, &h_new)
                            or not _written(out)
                            or arrays_overlap(out, candidate) or arrays_overlap(out, h)
                            or arrays_overlap(out, zr)
                            or linear_before_reset and arrays_overlap(out, xw)):
        return None
    result = out if out is not None else np.empty((batch, hidden), candidate.dtype)
    _rows_of(result, type_num, batch, hidden, &h_new)
    item = cnp.PyArray_ITEMSIZE(candidate)
    n.data, n.stride = <char *>cnp.PyArray_DATA(candidate), hidden * item
    z.data, z.stride = <char *>cnp.PyArray_DATA(zr), 2 * hidden * item
    if linear_before_reset:
        x_n.data += 2 * hidden * item  # (its third block)
    else:
        x_n.data, x_n.stride = NULL, 0
    with nogil:
        flagged = _gru_blend_passes(loops, n, state, z, x_n, h_new, batch, hidden, item,
                                    linear_before_reset, raised)
    if flagged:
        _report_raised(raised, B_PASSES, _UFUNC_OF_BLEND_PASS)
    return result


cdef struct GruJob:  # `gru_product_tail` as a job of pieces, each a block of the batch's rows
    cyl_job_t job  # (first: the runner sees a cyl_job_t)
    const Loops *loops
    bint double_precision, linear_before_reset
    npy_intp batch, hidden, item, rows  # rows: a piece's (the last may have fewer)
    const char *h  # [batch, hidden], rows `h_stride` elements apart
    npy_intp h_stride
    const char *w_zr  # [hidden, 2 hidden], rows `w_zr_stride` elements apart
    npy_intp w_zr_stride
    const char *w_n  # [hidden, hidden], rows `w_n_stride` elements apart
    npy_intp w_n_stride
    const char *x  # [batch, 3 hidden], rows `x_stride` bytes apart (0: one row for all)
    npy_intp x_stride
    const char *bias_n  # [hidden]: n's recurrent bias (linear_before_reset), else NULL
    char *zr  # [batch, 2 hidden], C-contiguous
    char *gated  # [batch, hidden], C-contiguous: the reset gate times h
    char *n  # [batch, hidden], C-contiguous: the candidate
    Rows state, h_new, limit
    int *gates_raised  # each pass's flags, over every piece
    int *blend_raised


cdef void _gru_piece(const void *job_, int64_t index) noexcept nogil:
    """Piece `index` of a `GruJob`: its rows' update and reset gates (x's row copied in, then h's
    rows times w_zr added by a gemm) and their passes, its candidate's pre-activation (x's third
    block plus (reset * h) @ w_n, or n's bias plus h @ w_n) and the blend's passes."""
    cdef const GruJob *job = <const GruJob *>job_
    cdef npy_intp first = index * job.rows, hidden = job.hidden, item = job.item
    cdef npy_intp rows = min(job.rows, job.batch - first), r, k
    cdef char *zr = job.zr + first * 2 * hidden * item
    cdef char *n = job.n + first * hidden * item
    cdef const char *h = job.h + first * job.h_stride * item
    cdef Rows state = job.state, h_new = job.h_new, product, candidate, z, x_n
    cdef int gates_raised[G_PASSES]
    cdef int blend_raised[B_PASSES]
    state.data += first * state.stride
    h_new.data += first * h_new.stride
    product.data, product.stride = job.gated + first * hidden * item, hidden * item
    for r in range(rows):
        memcpy(zr + r * 2 * hidden * item, job.x + (first + r) * job.x_stride, 2 * hidden * item)
    gemm(job.double_precision, rows, 2 * hidden, hidden, h, job.h_stride, job.w_zr,
         job.w_zr_stride, zr, 2 * hidden, True)
    if _gru_gates_passes(job.loops, zr, state, product, job.limit, rows, hidden, item,
                         not job.linear_before_reset, gates_raised):
        for k in range(G_PASSES):
            if gates_raised[k]:
                cyl_job_or(&job.gates_raised[k], gates_raised[k])
    for r in range(rows):
        memcpy(n + r * hidden * item,
               job.bias_n if job.linear_before_reset
               else job.x + (first + r) * job.x_stride + 2 * hidden * item, hidden * item)
    if job.linear_before_reset:
        gemm(job.double_precision, rows, hidden, hidden, h, job.h_stride, job.w_n,
             job.w_n_stride, n, hidden, True)
    else:
        gemm(job.double_precision, rows, hidden, hidden, product.data, hidden, job.w_n,
             job.w_n_stride, n, hidden, True)
    candidate.data, candidate.stride = n, hidden * item
    z.data, z.stride = zr, 2 * hidden * item
    x_n.data = <char *>job.x + first * job.x_stride + 2 * hidden * item
    x_n.stride = job.x_stride
    if _gru_blend_passes(job.loops, candidate, state, z, x_n, h_new, rows, hidden, item,
                         job.linear_before_reset, blend_raised):
        for k in range(B_PASSES):
            if blend_raised[k]:
                cyl_job_or(&job.blend_raised[k], blend_raised[k])


def gru_product_tail(cnp.ndarray h, cnp.ndarray w_zr, cnp.ndarray w_n, cnp.ndarray x,
                     object bias_n, cnp.ndarray cap, object out, bint two_cores):
    """h' of a GRU step (batch-major gates, the default activations, no clip) as one call: the
    update and reset gates ``x[:, :2H] + h @ w_zr`` through `gru_gates`'s passes, the candidate
    ``x[:, 2H:] + (reset * h) @ w_n`` (or, given ``bias_n``, linear_before_reset: ``bias_n + h
    @ w_n``) through `gru_blend`'s; or None for operands it does not take (nothing is written
    then).

    h [B, H], w_zr [H, 2H], w_n [H, H], x [B, 3H] (or one row for every batch row: [1, 3H]),
    ``bias_n`` [H] or None and ``cap`` (`_math.sigmoid_cap`) all of one float type, aligned,
    in native byte order and unit-strided along their last axis; ``out`` a [B, H] array with
    contiguous rows apart from one another, overlapping no operand (h only by whole rows of
    another slot), or None (a fresh h'). One job of pieces, each a block of the batch's rows
    with its two gemm calls and its passes, as `lstm_product_tail`'s: on two cores with
    ``two_cores``. The values are those of the products then `gru_gates` and `gru_blend`, and
    so is the floating-point report (the gates' passes, then the blend's)."""
    cdef GruJob job
    cdef int gates_raised[G_PASSES]
    cdef int blend_raised[B_PASSES]
    buffers = _gru_job(&job, h, w_zr, w_n, x, bias_n, cap, out, two_cores, gates_raised,
                       blend_raised)
    if buffers is None:
        return None
    h_out = _made_into(out, cnp.PyArray_TYPE(h), job.batch, job.hidden, &job.h_new)
    with nogil:
        _run_pieces(&job.job, job.batch, job.rows, two_cores)
    _report_raised(gates_raised, G_PASSES, _UFUNC_OF_GATES_PASS)
    _report_raised(blend_raised, B_PASSES, _UFUNC_OF_BLEND_PASS)
    return h_out


def gru_product_steps(cnp.ndarray h not None, cnp.ndarray w_zr not None,
                      cnp.ndarray w_n not None, cnp.ndarray xs not None, object bias_n,
                      cnp.ndarray cap not None, cnp.ndarray outs not None, bint two_cores,
                      bint staged=False):
    """The last h' of ``len(xs)`` consecutive GRU steps, each `gru_product_tail`'s, in one
    call: step s takes ``xs[s]`` and writes its h' into ``outs[s]``, and its h is the step
    before's h' (step 0's: `h`); or None for operands it does not take (nothing is written
    then). What a recurrent loop's iterations would compute calling `gru_product_tail` once
    each, value for value, without returning to Python between them.

    xs [S, B, 3H] and outs [S, B, H] (S >= 1) hold, step after step, operands step 0 would take
    as x and ``out`` (each step's at one stride from the one before); an h whose last axis is
    strided is taken as a C-order copy (`_rows_apart`). The slots of outs share no
    byte, with each other nor with any operand, unless `h` is the slot just before ``outs[0]``
    of the same layout (an output's previous slot). The h' returned is ``outs[-1]``; `staged`
    as `lstm_product_steps`'; the floating-point report is made once, after the last step, of
    every step's flags."""
    cdef GruJob job
    cdef int gates_raised[G_PASSES]
    cdef int blend_raised[B_PASSES]
    cdef npy_intp steps, s, batch, hidden, item, step_bytes, x_step, row
    cdef int type_num = cnp.PyArray_TYPE(h)
    cdef char *out_data
    cdef const char *x_data
    cdef Rows made[2]
    cdef Rows slot
    if not _steps_of(xs, outs):
        return None
    h = _rows_apart(h)
    buffers = _gru_job(&job, h, w_zr, w_n, xs[0], bias_n, cap, outs[0], two_cores,
                       gates_raised, blend_raised)
    if buffers is None:
        return None
    steps, batch, hidden, item = cnp.PyArray_DIM(xs, 0), job.batch, job.hidden, job.item
    row = cnp.PyArray_STRIDE(outs, 1)
    # Every step's operands as step 0's, one stride on (aligned: whole elements apart), and
    # h' rows a gemm reads as the next step's h (rows forward, at least a row apart).
    if not _native(xs, type_num) or not _native(outs, type_num) \
            or batch > 1 and (row < hidden * item or row % item) \
            or arrays_overlap(outs, xs) or arrays_overlap(outs, w_zr) \
            or arrays_overlap(outs, w_n) or arrays_overlap(outs, cap) \
            or bias_n is not None and arrays_overlap(outs, bias_n) \
            or not _slots_apart(outs, h, batch, hidden * item):
        return None
    step_bytes, x_step = cnp.PyArray_STRIDE(outs, 0), cnp.PyArray_STRIDE(xs, 0)
    out_data, x_data = <char *>cnp.PyArray_DATA(outs), <const char *>cnp.PyArray_DATA(xs)
    slot = job.h_new  # (outs[0]'s rows)
    _kept = _staging(made, type_num, batch, hidden) if staged else None
    with nogil:
        for s in range(steps):
            if s > 0:  # h: the step before's h'
                job.state = job.h_new
                job.h, job.h_stride = job.state.data, job.state.stride // item
            job.x = x_data + s * x_step
            job.h_new = made[s % 2] if staged else slot
            if not staged:
                job.h_new.data = out_data + s * step_bytes
            _run_pieces(&job.job, batch, job.rows, two_cores)
            if staged:
                _copy_rows(made[s % 2], slot.data + s * step_bytes, slot.stride, batch,
                           hidden * item)
    _report_raised(gates_raised, G_PASSES, _UFUNC_OF_GATES_PASS)
    _report_raised(blend_raised, B_PASSES, _UFUNC_OF_BLEND_PASS)
    return outs[steps - 1]


cdef object _gru_job(GruJob *job, cnp.ndarray h, cnp.ndarray w_zr, cnp.ndarray w_n,
                     cnp.ndarray x, object bias_n, cnp.ndarray cap, object out, bint two_cores,
                     int *gates_raised, int *blend_raised):
    """`job` set up for `gru_product_tail`'s step on these operands, all but where h' goes when
    `out` is None (``job.h_new``; `out`'s rows if given), with `gates_raised` and
    `blend_raised` (G_PASSES and B_PASSES flags, cleared) for its flags; returns the buffers it
    writes (the gates, reset * h, the candidate: the caller keeps them), or None if the step is
    declined (nothing allocated)."""
    cdef int type_num = cnp.PyArray_TYPE(h)
    cdef Loops *loops = _loops_of(type_num)
    cdef npy_intp batch, hidden, item
    cdef int k
    cdef bint linear_before_reset = bias_n is not None
    if loops == NULL or not has_gemm(type_num == cnp.NPY_DOUBLE) \
            or not (_operand(h, type_num, 2) and _operand(w_zr, type_num, 2)
                    and _operand(w_n, type_num, 2) and _operand(x, type_num, 2)
                    and _native(cap, type_num) and cnp.PyArray_NDIM(cap) == 0):
        return None
    if linear_before_reset and not (isinstance(bias_n, np.ndarray)
                                    and _operand(bias_n, type_num, 1)):
        return None
    batch, hidden = cnp.PyArray_DIM(h, 0), cnp.PyArray_DIM(h, 1)
    item = cnp.PyArray_ITEMSIZE(h)
    if batch * hidden == 0 or cnp.PyArray_DIM(w_zr, 0) != hidden \
            or cnp.PyArray_DIM(w_zr, 1) != 2 * hidden or cnp.PyArray_DIM(w_n, 0) != hidden \
            or cnp.PyArray_DIM(w_n, 1) != hidden \
            or hidden > 1 and (cnp.PyArray_STRIDE(w_zr, 0) < 2 * hidden * item
                               or cnp.PyArray_STRIDE(w_n, 0) < hidden * item) \
            or cnp.PyArray_STRIDE(h, 0) < hidden * item and batch > 1 \
            or cnp.PyArray_DIM(x, 1) != 3 * hidden or cnp.PyArray_DIM(x, 0) not in (1, batch) \
            or linear_before_reset and cnp.PyArray_DIM(<cnp.ndarray>bias_n, 0) != hidden:
        return None
    if out is not None and (not isinstance(out, np.ndarray)
                            or not _rows_of(out, type_num, batch, hidden, &job.h_new)
                            or not _written(out) or rows_overlap(out, h)
                            or arrays_overlap(out, w_zr) or arrays_overlap(out, w_n)
                            or arrays_overlap(out, x)
                            or linear_before_reset and arrays_overlap(out, bias_n)):
        return None
    job.rows = _piece_rows(batch, 3 * batch * hidden * hidden, 2 * hidden * hidden, two_cores)
    if job.rows == 0:
        return None
    zr = cnp.PyArray_EMPTY(2, [batch, 2 * hidden], type_num, 0)
    gated = cnp.PyArray_EMPTY(2, [batch, hidden], type_num, 0)
    candidate = cnp.PyArray_EMPTY(2, [batch, hidden], type_num, 0)
    job.state.data = <char *>cnp.PyArray_DATA(h)
    job.state.stride = cnp.PyArray_STRIDE(h, 0) if batch > 1 else hidden * item
    job.limit.data, job.limit.stride = <char *>cnp.PyArray_DATA(cap), 0
    job.loops = loops
    job.double_precision = type_num == cnp.NPY_DOUBLE
    job.linear_before_reset = linear_before_reset
    job.batch, job.hidden, job.item = batch, hidden, item
    job.h, job.h_stride = <const char *>cnp.PyArray_DATA(h), job.state.stride // item
    job.w_zr = <const char *>cnp.PyArray_DATA(w_zr)
    job.w_zr_stride = cnp.PyArray_STRIDE(w_zr, 0) // item if hidden > 1 else 2 * hidden
    job.w_n = <const char *>cnp.PyArray_DATA(w_n)
    job.w_n_stride = cnp.PyArray_STRIDE(w_n, 0) // item if hidden > 1 else hidden
    job.x = <const char *>cnp.PyArray_DATA(x)
    job.x_stride = 0 if cnp.PyArray_DIM(x, 0) == 1 else cnp.PyArray_STRIDE(x, 0)
    job.bias_n = <const char *>cnp.PyArray_DATA(<cnp.ndarray>bias_n) if linear_before_reset \
        else NULL
    job.zr = <char *>cnp.PyArray_DATA(zr)
    job.gated = <char *>cnp.PyArray_DATA(gated)
    job.n = <char *>cnp.PyArray_DATA(candidate)
    for k in range(G_PASSES):
        gates_raised[k] = 0
    for k in range(B_PASSES):
        blend_raised[k] = 0
    job.gates_raised, job.blend_raised = gates_raised, blend_raised
    job.job.run = _gru_piece
    return zr, gated, candidate


# numpy's errstate kinds in the order it reports them: (errstate key, fenv flag, numpy's bit
# for it, the words of its messages: "overflow encountered in multiply").
_KINDS = (("divide", FE_DIVBYZERO, 1, "divide by zero"), ("over", FE_OVERFLOW, 2, "overflow"),
          ("under", FE_UNDERFLOW, 4, "underflow"), ("invalid", FE_INVALID, 8, "invalid value"))


def _report(raised) -> None:
    """Reports the flags each pass raised, [(ufunc name, fenv flags)], as numpy reports those of
    a ufunc call under the current `np.errstate` (numpy/_core/src/umath/extobj.c): nothing
    ('ignore'), a RuntimeWarning ('warn'), FloatingPointError ('raise', at the first), the
    errcall with the kind and every flag raised ('call'), its ``write`` ('log') or a line on
    stderr ('print')."""
    modes = np.geterr()
    for name, flags in raised:
        status = sum(bit for _, flag, bit, _ in _KINDS if flags & flag)
        for kind, flag, _, words in _KINDS:
            mode = modes[kind]
            if not flags & flag or mode == "ignore":
                continue
            message = f"{words} encountered in {name}"
            if mode == "warn":
                # (Cython functions have no Python frames: 1 is the line calling lstm_tail)
                warnings.warn(message, RuntimeWarning, stacklevel=1)
            elif mode == "raise":
                raise FloatingPointError(message)
            elif mode == "print":
                sys.stderr.write(f"Warning: {message}\n")
            elif np.geterrcall() is None:
                raise NameError(f"{'python callback' if mode == 'call' else 'log'} specified "
                                f"for {words} (in {name}) but no "
                                f"{'function' if mode == 'call' else 'object with write method'}"
                                " found.")
            elif mode == "call":
                np.geterrcall()(words, status)
            else:  # log
                np.geterrcall().write(f"Warning: {message}\n")
