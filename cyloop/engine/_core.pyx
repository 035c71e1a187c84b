"""The Cython core: the flat program runner and the loop driver with its memory plan (mechanism
only: the policy, where each value lives, is decided in destinations.py; the loop's semantics are
read by `LoopSpec.resolve`, shared with the reference driver).

Design: the planner's invariants, each with the code that keeps it.

1. A run does no dict look-ups and no attribute work: a compiled program is arrays of slot numbers
   and a list of kernels bound once, with their traits from the registry (`Program.__init__`);
   numpy's types are read once, at import (`_GENERIC` and its neighbours: `np.generic` written in
   a per-call path is a global and a module attribute look-up on every call).
2. Sliced inputs are read-only views built from a data pointer: part i of an input starts at
   ``first + i * stride`` elements along its axis; nothing is copied, for any axis, stride sign or
   part size, and no transpose is ever made (`_make_sliced`, `_Sliced.part`).
3. Concatenated outputs are preallocated once the first iteration shows the per-iteration shape:
   exactly n slots when the trip count is known, else min(bound, FIRST_GROWING_BYTES' worth) and
   geometric growth (`_Concat.allocate`, `_Concat.ensure`). Iteration i's slot is i (forward) or
   cap-1-i (reverse), so nothing is flipped or concatenated afterwards. The output is a view of the
   slots used, except when a loop that stopped early used under half of them: then it is a copy of
   those slots, so no dead rows are kept alive (`_Concat.finish`).
4. Write-into: the step making a result that goes to a slot row or a back edge is called with its
   destination as ``out=`` only when its inputs have the shapes and dtypes of the call that sized
   the destination (an ``out=`` kernel's result shape follows from those alone; signatures in
   `Program._kernel_call`). A result both carried and emitted lives in its output row and the next
   iteration reads it there, when that row is contiguous (an output stacked on axis 0). On another
   axis the slot is strided, and whether it lives there or in a pool (5), read contiguous and
   copied into its slot, is measured a run at a time (`LoopDriver.placements`, chosen per run in
   `_start`, timed at the loop's end; within the calls of 10, a call at a time), as is where the
   loop's matrix products run, on one core or on two (`LoopDriver.products`, accel/gemm.py). A
   multi-output kernel's destination is its first result's. An emitted hoisted value's chunk is
   made in its slots: once the buffer has room for a chunk's rows, they are offered to the
   hoisted step making the value (and to the steps making what only it reads:
   `chunks.Hoist._chain`), which writes there if it takes ``out=``; else, and for the first
   chunk, which sizes the buffer, the rows are copied (`LoopDriver._next_chunk`,
   `_Concat.slots`).
5. Back edges alias: a carried value is handed over by reference. A carried result written in
   place gets a pool of buffers, two in steady state (`_Pool`). A buffer is picked only when the
   pool's own list holds the sole reference to it (`_Pool.pick`: refcount 1), so no value the
   iteration reads — directly, through a view, a carried value or a sequence holding it — is ever
   overwritten; a body may read the old value after making the new one. For that rule to hold the
   driver drops every reference it keeps itself before the next iteration (`_reset_slots`), and
   while an iteration runs holds each carried value in its slot alone (so a kernel updating its
   first input in place may take a carried buffer nothing else holds: 8).
6. Liveness: a step drops each value whose last reader it is (`Program.execute`, kill lists from
   compile.py), so a run holds the outputs plus one iteration's live set.
7. The planner writes only into buffers it allocated in this call. Feeds, invariants and slices
   are read-only views; per-call state (pools, output buffers) is never reused by the next call, so
   arrays handed back earlier are never overwritten.
8. Temporaries are written over: a ufunc step that is the last reader of an operand whose buffer
   nothing else holds (the slot's is the only reference: no caller, view, pool, sequence or
   kernel cache can see it), owns its writeable memory and has the result's shape and the type
   every operand shares, of a kind the ufunc keeps, is given that buffer as its destination
   (`Program._spare_input`). Feeds, constants, slices and rows are views or held elsewhere, so
   they never qualify. A kernel that updates its first input in place (a scatter declaring
   `updates_first`: cyloop/abilities.py) is given that input's buffer so, where it dies at the step.
9. Limits are per run, not per loop: every loop of a run counts each iteration on the run's
   `RunLimits` before running it (a decrement; the clock is read every few milliseconds of work),
   and no output buffer is allocated past its memory limit (`_Concat.allocate`, `ensure`). A
   thread's run finds its limits in a thread-local (`current_limits`), so runs of one Model in
   several threads each have their own.
10. Many iterations in one call: a body that is one recurrent step reading a hoisted row
   (`destinations.RecurrentSteps`; its kernel's `Recurrence`, cyloop/abilities.py) runs the rest of
   each hoisted chunk in one call of the kernel's steps once iteration 0 has sized the outputs.
   Each step's first result is written into its slot and read there by the next step or, where
   the placement keeps the result in a pool, made in a contiguous buffer and copied there (4's
   choice, measured within the calls a call at a time: `LoopDriver.steps_placement`); the
   carried and last values are the last step's results. A call ends no later than an
   iteration at a time would look up: at the loop's end, where it must stop, at the run's next
   clock read (`RunLimits.ticks_free`), at the next multiple of PROGRESS_EVERY and at the
   output's last slot, so a growing output grows an iteration at a time (`_run_steps`). The
   steps compute value for value what calls one at a time would, and decline (nothing
   written) what they do not take: that iteration runs alone.
"""

cimport numpy as cnp
from cpython.contextvars cimport PyContextVar_Reset, PyContextVar_Set, get_value
from cpython.exc cimport PyErr_CheckSignals
from cpython.object cimport Py_TYPE
from cpython.list cimport PyList_GET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject
from libc.math cimport INFINITY
from libc.string cimport memcmp, memcpy

from cyloop.engine._aligned_alloc cimport CYL_KEEP_FROM, CYL_KEPT_BLOCKS, CYL_KEPT_BYTES, \
    cyl_block_give, cyl_block_take, cyl_blocks_kept, cyl_blocks_release
from cyloop.engine._strided_copy cimport cyl_strided_copy
from cyloop.accel.extent cimport arrays_overlap, cyl_extent, cyl_ranges_overlap

import itertools
import operator
import threading
from typing import NamedTuple
from contextlib import nullcontext
from sys import byteorder, getswitchinterval
from time import monotonic, perf_counter

import numpy as np

from ..errors import CyloopError, ExecutionError, LoopLimitError, ModelError, ResourceLimitError
from ..sequence import TensorSequence
from ..ir import (CarriedInput, ConcatOutput, InvariantInput, LastOutput, SlicedInput, read_only,
                  truth)
from .destinations import LoopFacts, MeasuredPlacement, PoolDestination, RowDestination
from ..accel.float_state import QUIET as _QUIET_FLOATS, direct as direct_float_state, \
    quiet as quiet_floats, quiet_for, restore as restore_floats
from ..accel.gemm import (bound_blas_threads, is_constant, narrowed, product_candidates,
                          products_split, release_blas_threads, set_products_on_two_cores)
from ..accel.measured import PAYBACK, Measured, untimed
from ..kernels.registry import FIRST_INPUT, FLOATS, INTEGERS, abilities_of
from .settings import AT_ONCE, COUNTERS, FIRST_GROWING_BYTES, PROGRESS_EVERY
from ..tuning import AFFINITY_EVERY, CHECK_LATE, CHECK_SOON, MAX_CLOCK_STRIDE, RUN_ROUNDS
from ..tuning import SHAPE_MEMO_BYTES, SHAPE_MEMO_KEYS

cnp.import_array()

# numpy's types, read once (invariant 1; looked up each step, they weigh on a tiny body's).
cdef type _NDARRAY = np.ndarray
cdef type _GENERIC = np.generic
cdef type _NUMPY_BOOL = np.bool_
cdef type _INTEGER = np.integer


cdef extern from "Python.h":
    # The reference count behind a borrowed pointer (no temporary reference taken).
    Py_ssize_t _refcount "Py_REFCNT"(PyObject *obj)

cdef extern from "numpy/arrayobject.h":
    # Steals a reference to `descr`.
    object PyArray_NewFromDescr(type subtype, cnp.dtype descr, int nd, cnp.npy_intp *dims,
                                cnp.npy_intp *strides, void *data, int flags, object obj)
    # A new numpy scalar of type `descr` from the bytes at `data` (`descr` is not stolen).
    object PyArray_Scalar(void *data, cnp.dtype descr, PyObject *base)
    # A view of `arr` (NULL `dtype` and `ptype`: of its own dtype and type).
    object PyArray_View(cnp.ndarray arr, PyObject *dtype, PyObject *ptype)
    # An uninitialized array of `prototype`'s shape and memory order (with NPY_KEEPORDER), of
    # type `descr`, as `astype` makes its result. Steals a reference to `descr`.
    object PyArray_NewLikeArray(cnp.ndarray prototype, cnp.NPY_ORDER order, cnp.dtype descr,
                                int subok)

cdef extern from "Python.h":
    # A call without an argument tuple or a keyword dict: `args` holds the positional arguments,
    # then the values of the keywords `kwnames` (NULL: none) names; `nargsf` counts the first.
    object PyObject_Vectorcall(object callable, PyObject **args, size_t nargsf, PyObject *kwnames)
    size_t PY_VECTORCALL_ARGUMENTS_OFFSET

# The keyword of a destination given to a kernel that takes it by name.
cdef tuple _OUT_KEYWORD = ("out",)
# Arguments a step's kernel gets from an array on the C stack (more: from one allocated per call).
cdef enum:
    _STACK_ARGS = 16

cdef Py_ssize_t _FIRST_GROWING_BYTES = FIRST_GROWING_BYTES
cdef Py_ssize_t _PROGRESS_EVERY = PROGRESS_EVERY


cdef inline object _read_only(object value):
    """`ir.read_only` (a read-only view of a writeable array; anything else as it is) without a
    Python call per operand of a loop's run."""
    if type(value) is _NDARRAY:
        return read_only(value) if cnp.PyArray_ISWRITEABLE(<cnp.ndarray>value) else value
    return read_only(value) if isinstance(value, _NDARRAY) else value


cdef object _read_only_true():
    """A 0-d True no one can write: a read-only view of a read-only array (so that not even its
    flags can be made writeable again)."""
    value = np.ones((), dtype=np.bool_)
    value.flags.writeable = False
    return value.view()


# The condition a body reads before its own first result: one for every call and thread.
cdef object _TRUE = _read_only_true()


cdef double _released_at = 0.0


cdef int _let_other_threads_run() except -1:
    """Let other Python threads run, every two switch intervals (`sys.getswitchinterval()`).

    A body of scalar-path steps and out= kernels may run no Python bytecode, and so never reach
    the interpreter's switch points: without this, every other thread (a timer, a watchdog, a
    server's workers) would wait for the whole loop. Releasing the GIL hands it over only to a
    thread that has asked for it, which a waiting thread does after one switch interval without
    getting it; a release wakes it and restarts that wait, so releasing as often as (or more
    often than) once a switch interval would keep it from ever asking."""
    global _released_at
    cdef double now = monotonic()
    if now - _released_at >= 2 * getswitchinterval():
        _released_at = now
        with nogil:
            pass
    return 0

__all__ = ["LoopDriver", "Program", "RunLimits", "accepted_arguments", "aligned_empty",
           "current_limits", "handed_outputs", "kept_bytes", "release_memory", "running",
           "strided_copy"]


# ---------------------------------------------------------------------------------------------
# Run limits

# What `left` starts at when a run may make any number of iterations (never reached).
cdef long long _UNLIMITED = 1LL << 62
# Clock reads come every _CHECK_SOON to _CHECK_LATE seconds of work, at most every _MAX_STRIDE
# iterations (cyloop/tuning.py; typed here, read once).
cdef double _CHECK_SOON = CHECK_SOON
cdef double _CHECK_LATE = CHECK_LATE
cdef long long _MAX_STRIDE = MAX_CLOCK_STRIDE

cdef object _this_thread = threading.local()
cdef str _ITERATIONS_HINT = (
    ", the iterations one run may make in all its loops, nested ones included; raise "
    "max_iterations (None: no limit), or check the loop's trip count and condition")


def accepted_arguments(dict feeds, tuple form):
    """`Model.run`'s arguments from `feeds` where each input's is an array of the dtype and
    shape its accepted one had (`form`: per declared input, (name, dtype, shape, None), or
    (None, None, None, default) for one that took its default): a read-only view of each (the
    caller's array is never written through it), or the default; None where one differs."""
    cdef list args = []
    cdef cnp.ndarray array
    cdef tuple shape
    cdef int d, nd
    for name, dtype, shape, default in form:
        if name is None:
            args.append(default)
            continue
        value = feeds.get(name)
        if type(value) is not _NDARRAY:
            return None
        array = <cnp.ndarray>value
        nd = cnp.PyArray_NDIM(array)
        if nd != len(shape) or not cnp.PyArray_EquivTypes(
                <cnp.dtype><PyObject *>cnp.PyArray_DESCR(array), <cnp.dtype>dtype):
            return None
        for d in range(nd):
            if cnp.PyArray_DIM(array, d) != <cnp.npy_intp>shape[d]:
                return None
        array = PyArray_View(array, NULL, NULL)
        cnp.PyArray_CLEARFLAGS(array, cnp.NPY_ARRAY_WRITEABLE)
        args.append(array)
    return args


def operand_key(*args):
    """A loop run's operands as a choice of whole runs tells them apart (engine/hoist_choice.py):
    each array by its shape and type, and the value of an integer scalar (a trip count, a
    start); anything else by its type. Made every run of a loop: here, no Python frame."""
    cdef list key = []
    cdef object a, item
    cdef cnp.dtype descr
    for a in args:
        if not isinstance(a, _NDARRAY):
            key.append(type(a))
            continue
        descr = <cnp.dtype><PyObject *>cnp.PyArray_DESCR(<cnp.ndarray>a)
        item = None
        if cnp.PyArray_NDIM(<cnp.ndarray>a) == 0 and (descr.kind == b'i' or descr.kind == b'u'):
            item = a.item()
        key.append((a.shape, a.dtype.char, item))
    return tuple(key)


cdef object _memory_holder(cnp.ndarray array):
    """What holds `array`'s memory: the array at the end of its chain of bases, or the planner's
    block (`_AlignedBlock`) the chain ends in; None where another kind of object holds it (a
    buffer, a mapping) or an array not owning it (C memory)."""
    cdef PyObject *base = cnp.PyArray_BASE(array)
    while base != NULL:
        if type(<object>base) is _AlignedBlock:
            return <object>base
        if type(<object>base) is not _NDARRAY:
            return None
        array = <cnp.ndarray><object>base
        base = cnp.PyArray_BASE(array)
    return array if cnp.PyArray_CHKFLAGS(array, cnp.NPY_ARRAY_OWNDATA) else None


def handed_outputs(list values, list names, dict index, list args):
    """Output name -> the caller's own value for `names` (`index`: name -> position in
    `values`), as `Model.run` hands them over: each as it is where it is a writeable array (or a
    numpy scalar made one) whose memory an array or a planner's block holds (`_memory_holder`),
    not a feed's, and no larger output returned spans its bytes too (a kernel's fresh result, a
    planner's output, a view of either); else a copy of it (a constant or a feed passed through,
    a view of a feed, a last value living in a row of a concatenated output). None where a name
    is asked twice, another kind of object holds an output's memory (a mapping) or one is not
    an array (a sequence, an empty optional): the caller's checks then decide what to copy."""
    cdef dict results = {}
    cdef dict held = {}  # id of what holds the memory -> names of the outputs on it, kept as is
    cdef set feeds = None
    cdef cnp.ndarray array, other
    cdef object holder
    cdef list sharing
    cdef bint own
    for name in names:
        value = values[index[name]]
        if type(value) is not _NDARRAY:
            if not isinstance(value, _GENERIC):
                return None
            value = np.asarray(value)
        if name in results:
            return None
        array = <cnp.ndarray>value
        holder = _memory_holder(array)
        if holder is None:
            return None  # (memory another kind of object holds: a mapping)
        own = cnp.PyArray_ISWRITEABLE(array)
        if own and holder is not value:  # (a view: of a feed's memory?)
            if feeds is None:
                feeds = _feed_holders(args)
            own = id(holder) not in feeds
        if not own:
            results[name] = array.copy()
            continue
        sharing = held.setdefault(id(holder), [])
        for kept in list(sharing):  # (the smaller of two outputs spanning common bytes: a copy)
            other = <cnp.ndarray>results[kept]
            if not arrays_overlap(array, other):
                continue
            if cnp.PyArray_NBYTES(array) <= cnp.PyArray_NBYTES(other):
                array = array.copy()
                break
            results[kept] = other.copy()
            sharing.remove(kept)
        else:
            sharing.append(name)
        results[name] = array
    return results


cdef set _feed_holders(list args):
    """The ids of the arrays holding the memory of the run's arguments (a sequence's items too)."""
    cdef set found = set()
    for arg in args:
        for item in (arg if isinstance(arg, TensorSequence) else (arg,)):
            if type(item) is _NDARRAY:
                holder = _memory_holder(<cnp.ndarray>item)
                if holder is not None:
                    found.add(id(holder))
    return found


def current_limits():
    """The `RunLimits` of the run this thread is in, or None outside a run."""
    return getattr(_this_thread, "limits", None)


# numpy's context variable of its floating-point error setting, set directly by a run where
# `float_state` found it can be (else None: `quiet_floats`), to the caller's setting with what it
# would warn of ignored (`_QUIET_FLOATS`, made by `quiet_for`).
cdef object _FLOAT_STATE = direct_float_state()


# Runs under way, on any thread (`running`): a planner block given back meanwhile is freed, not
# kept for the next run (`_AlignedBlock`).
cdef Py_ssize_t _runs_under_way = 0


# Whether the process may use fewer cores than the machine has, as last read (`_narrowed`), and
# when to read it again (monotonic seconds).
cdef bint _was_narrowed = False
cdef double _read_affinity_at = 0.0
cdef double _AFFINITY_EVERY = AFFINITY_EVERY


cdef bint _narrowed() except -1:
    """Whether the process may use fewer cores than the machine has (`gemm.narrowed`), read at
    most every `tuning.AFFINITY_EVERY` seconds: a read costs a one-node model's run a sixth."""
    global _was_narrowed, _read_affinity_at
    cdef double now = monotonic()
    if now >= _read_affinity_at:
        _was_narrowed = narrowed()
        _read_affinity_at = now + _AFFINITY_EVERY
    return _was_narrowed


cdef tuple _enter_run(object limits):
    """The loops this thread runs from now on share `limits` (None: no change), with numpy's
    floating-point warnings off (`accel.float_state`); returns what `_leave_run` restores."""
    global _runs_under_way
    previous = getattr(_this_thread, "limits", None)
    if limits is not None:
        _this_thread.limits = limits
    _runs_under_way += 1
    if _FLOAT_STATE is None:
        floats = quiet_floats()
    else:
        current = get_value(_FLOAT_STATE)
        value = _QUIET_FLOATS.get(current)
        if value is None:
            value = quiet_for(current)
        floats = PyContextVar_Set(_FLOAT_STATE, value)
    # numpy's BLAS held to the cores the process may use while the run is under way (it may
    # have more threads: accel/gemm.py, `bound_blas_threads`), where the process is narrowed
    return previous, floats, _narrowed() and bound_blas_threads()


cdef int _leave_run(tuple entered) except -1:
    global _runs_under_way
    _this_thread.limits = entered[0]
    _runs_under_way -= 1
    if entered[2]:
        release_blas_threads()
    if _FLOAT_STATE is None:
        restore_floats(entered[1])
    else:
        PyContextVar_Reset(_FLOAT_STATE, entered[1])
    return 0


cdef class running:
    """``with running(limits):`` the loops this thread runs share `limits` (None: no change),
    with numpy's floating-point warnings off."""
    cdef object limits
    cdef tuple entered

    def __init__(self, limits):
        self.limits = limits

    def __enter__(self):
        self.entered = _enter_run(self.limits)
        return self.limits

    def __exit__(self, *exc):
        _leave_run(self.entered)
        return False


cdef class RunLimits:
    """What one run may spend, shared by every loop it runs, nested ones included: iterations in
    all (`max_iterations`), wall-clock seconds (`time_limit`) and the bytes of any one buffer the
    planner allocates (`memory_limit`); None is no limit.

    A loop counts each iteration before it runs it (`tick`: a decrement and a comparison). When
    `left` drops below `check_at` — past the last iteration allowed, or `stride` iterations after
    the last clock read — `_checkpoint` raises or reads the clock. `stride` doubles while reads
    come under _CHECK_SOON apart and halves past _CHECK_LATE, so the clock is read every few
    milliseconds of work however much an iteration costs, never every iteration."""

    def __init__(self, max_iterations=None, time_limit=None, memory_limit=None):
        self.max_iterations = max_iterations
        self.time_limit = time_limit
        self.memory_limit = memory_limit
        self.left = _UNLIMITED if max_iterations is None else max_iterations
        self.started = self.checked = monotonic()
        self.deadline = INFINITY if time_limit is None else self.started + time_limit
        self.stride = 1
        self._schedule()

    @property
    def budget(self):
        """Iterations the run may still make (None: no limit)."""
        return None if self.max_iterations is None else self.left

    def step(self, str label, Py_ssize_t i):
        """`tick`, for the reference driver."""
        self.tick(label, i)

    def refuse(self, str label, Py_ssize_t n):
        """The error for loop `label`, whose n iterations would pass what the run has left."""
        return LoopLimitError(f"{label}: its {n} iterations would pass max_iterations="
                              f"{self.max_iterations} ({self.max_iterations - self.left} already "
                              f"run){_ITERATIONS_HINT}")

    def too_large(self, str what, shape, dtype):
        """The error for a buffer of `shape` and `dtype` (`what` names it) past memory_limit."""
        nbytes = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
        return ResourceLimitError(f"{what} would take {nbytes} bytes (shape {list(shape)}, "
                                  f"{np.dtype(dtype)}), past memory_limit={self.memory_limit}; "
                                  "raise memory_limit (None: no limit)")

    cdef inline int tick(self, str label, Py_ssize_t i) except -1:
        """Count iteration i of loop `label`, about to run."""
        self.left -= 1
        if self.left < self.check_at:
            self._checkpoint(label, i)
        return 0

    cdef long long ticks_free(self):
        """How many iterations may be counted (``left -= n``) before a `tick` would find a
        checkpoint due: what a caller running many iterations at once may run."""
        return self.left - self.check_at

    cdef int _checkpoint(self, str label, Py_ssize_t i) except -1:
        cdef double now, elapsed
        if self.left < 0:
            self.left = 0
            raise LoopLimitError(f"{label}: iteration {i} would pass max_iterations="
                                 f"{self.max_iterations}{_ITERATIONS_HINT}")
        if self.time_limit is not None:
            now = monotonic()
            if now >= self.deadline:
                raise LoopLimitError(f"{label}: stopped at iteration {i}: the run passed "
                                     f"time_limit={self.time_limit} s ({now - self.started:.3g} "
                                     "s); raise time_limit (None: no limit), or check the "
                                     "loop's trip count and condition")
            elapsed = now - self.checked
            self.checked = now
            if elapsed < _CHECK_SOON and self.stride < _MAX_STRIDE:
                self.stride *= 2
            elif elapsed > _CHECK_LATE and self.stride > 1:
                self.stride //= 2
        self._schedule()
        return 0

    cpdef int before(self, str label, str work) except -1:
        """Raises LoopLimitError where the run has passed time_limit: read before work that no
        iteration count measures (each node outside loops), so that a run passes its limit by
        one such piece of work at most."""
        cdef double now
        if self.time_limit is not None:
            now = monotonic()
            if now >= self.deadline:
                raise LoopLimitError(f"{label}: stopped before {work}: the run passed time_limit="
                                     f"{self.time_limit} s ({now - self.started:.3g} s); raise "
                                     "time_limit (None: no limit)")
        return 0

    cdef void _schedule(self):
        self.check_at = 0
        if self.time_limit is not None and self.left > self.stride:
            self.check_at = self.left - self.stride


cdef RunLimits _limits_of(settings):
    """Limits for a loop run on its own (outside `Program.run`), from its model's settings."""
    return RunLimits(settings.max_iterations, settings.time_limit, settings.memory_limit)


# ---------------------------------------------------------------------------------------------
# Memory helpers

cdef class _AlignedBlock:
    """Owns one block from `cyl_block_take`; an array built on it keeps it alive as its base.
    Given back when the last such array goes: kept for the next run's block of its size if no run
    is under way then (include/cyloop/aligned_alloc.h), else freed."""
    cdef void *ptr
    cdef size_t nbytes

    def __dealloc__(self):
        if self.ptr != NULL:
            cyl_block_give(self.ptr, self.nbytes, _runs_under_way == 0)


# What is kept for the next run: blocks of KEEP_FROM bytes or more, KEPT_BLOCKS of them at most,
# KEPT_BYTES in all (include/cyloop/aligned_alloc.h).
KEEP_FROM, KEPT_BLOCKS, KEPT_BYTES = CYL_KEEP_FROM, CYL_KEPT_BLOCKS, CYL_KEPT_BYTES


def kept_bytes() -> int:
    """The bytes of planner blocks kept for the next run (see `_AlignedBlock`)."""
    return cyl_blocks_kept()


def release_memory() -> None:
    """Free the planner blocks kept for the next run: the outputs of earlier runs that their
    callers let go of, which a run of the same shapes would otherwise take again (`KEPT_BLOCKS`
    blocks of `KEEP_FROM` bytes or more at most, `KEPT_BYTES` in all)."""
    cyl_blocks_release()


cdef cnp.ndarray _aligned_empty(tuple shape, cnp.dtype dtype):
    cdef int nd = len(shape)
    cdef cnp.npy_intp dims[MAX_DIMS]
    cdef Py_ssize_t k
    cdef size_t nbytes = dtype.itemsize
    cdef _AlignedBlock block
    if dtype.hasobject or nd > MAX_DIMS:
        return np.empty(shape, dtype)
    for k in range(nd):
        dims[k] = shape[k]
        nbytes *= <size_t>dims[k]
    block = _AlignedBlock()
    block.ptr = cyl_block_take(nbytes)
    block.nbytes = nbytes
    if block.ptr == NULL:
        raise MemoryError(f"cannot allocate {nbytes} bytes for an array of shape {shape}")
    Py_INCREF(dtype)  # PyArray_NewFromDescr steals it
    arr = PyArray_NewFromDescr(np.ndarray, dtype, nd, dims, NULL, block.ptr,
                               cnp.NPY_ARRAY_CARRAY, None)
    cnp.set_array_base(arr, block)
    return arr


def aligned_empty(shape, dtype):
    """An uninitialized C-ordered array whose data is 64-byte aligned."""
    return _aligned_empty(tuple(int(d) for d in shape), np.dtype(dtype))


cdef object _view(cnp.ndarray base, char *data, int nd, cnp.npy_intp *dims,
                  cnp.npy_intp *strides, bint writeable):
    """A view of `base`'s memory starting at `data`: no copy, `base` kept alive."""
    cdef cnp.dtype descr = <cnp.dtype><PyObject *>cnp.PyArray_DESCR(base)
    Py_INCREF(descr)
    view = PyArray_NewFromDescr(np.ndarray, descr, nd, dims, strides, data,
                                cnp.NPY_ARRAY_WRITEABLE if writeable else 0, None)
    cnp.set_array_base(view, base)
    return view


def repeated_rows(cnp.ndarray part, Py_ssize_t rows, Py_ssize_t step):
    """`part` as `rows` rows on a new leading axis, row i `i * step` bytes past it: a read-only
    view of its memory (``as_strided(part, (rows, *part.shape), (step, *part.strides),
    writeable=False)``, without numpy's Python for it: a hoisted chunk's rows of a sliced input,
    made every run)."""
    cdef int nd = cnp.PyArray_NDIM(part), k
    cdef cnp.npy_intp dims[MAX_DIMS]
    cdef cnp.npy_intp strides[MAX_DIMS]
    if nd + 1 > MAX_DIMS:
        from numpy.lib.stride_tricks import as_strided
        return as_strided(part, (rows,) + (<object>part).shape, (step,) + (<object>part).strides,
                          writeable=False)  # (past numpy's own limit: as_strided's error)
    dims[0] = rows
    strides[0] = step
    for k in range(nd):
        dims[k + 1] = cnp.PyArray_DIM(part, k)
        strides[k + 1] = cnp.PyArray_STRIDE(part, k)
    return _view(part, cnp.PyArray_BYTES(part), nd + 1, dims, strides, False)


cdef Py_ssize_t _copy_into(cnp.ndarray dst, cnp.ndarray src) except -1:
    """Copy `src` into `dst` (same shape and dtype); returns the number of bytes copied."""
    if _overlaps(dst, src):
        np.copyto(dst, src)
        return cnp.PyArray_NBYTES(src)
    if cyl_strided_copy(<char *>cnp.PyArray_DATA(dst), <Py_ssize_t *>cnp.PyArray_STRIDES(dst),
                        <const char *>cnp.PyArray_DATA(src),
                        <Py_ssize_t *>cnp.PyArray_STRIDES(src),
                        <Py_ssize_t *>cnp.PyArray_DIMS(src), cnp.PyArray_NDIM(src),
                        cnp.PyArray_ITEMSIZE(src)) != 0:
        np.copyto(dst, src)
    return cnp.PyArray_NBYTES(src)


def strided_copy(dst, src):
    """Copy `src` into `dst` through the C helper; both arrays must have one shape and dtype."""
    if not isinstance(dst, np.ndarray) or not isinstance(src, np.ndarray):
        raise TypeError("strided_copy takes two numpy arrays")
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise ValueError(f"strided_copy needs one shape and dtype, got {dst.shape} {dst.dtype} "
                         f"and {src.shape} {src.dtype}")
    if not dst.flags.writeable:
        raise ValueError("strided_copy: the destination is read-only")
    if dst.dtype.hasobject:
        raise TypeError("strided_copy cannot copy object arrays")
    return _copy_into(dst, src)


cdef void _extent(object value, char **lo, char **hi):
    """The byte range [lo, hi) an array's elements occupy (empty for non-arrays)."""
    cdef cnp.ndarray arr
    lo[0] = NULL
    hi[0] = NULL
    if not cnp.PyArray_Check(value):
        return
    arr = <cnp.ndarray>value
    cyl_extent(<char *>cnp.PyArray_DATA(arr), cnp.PyArray_NDIM(arr), cnp.PyArray_DIMS(arr),
               cnp.PyArray_STRIDES(arr), cnp.PyArray_ITEMSIZE(arr), lo, hi)


cdef bint _overlaps(object a, object b):
    cdef char *alo
    cdef char *ahi
    cdef char *blo
    cdef char *bhi
    _extent(a, &alo, &ahi)
    _extent(b, &blo, &bhi)
    return cyl_ranges_overlap(alo, ahi, blo, bhi)


cdef Py_ssize_t _signature(PyObject **args, Py_ssize_t count, cnp.npy_intp *sig) except -2:
    """Write the shapes and dtypes of the first `count` args into `sig`; the entry count, or -1 if
    not plannable."""
    cdef Py_ssize_t n = 0, k, d, nd
    cdef cnp.ndarray arr
    cdef object value
    for k in range(count):
        value = <object>args[k]
        if cnp.PyArray_Check(value):
            arr = <cnp.ndarray>value
            nd = cnp.PyArray_NDIM(arr)
            if n + 2 + nd > MAX_SIG:
                return -1
            sig[n] = cnp.PyArray_TYPE(arr)
            sig[n + 1] = nd
            for d in range(nd):
                sig[n + 2 + d] = cnp.PyArray_DIMS(arr)[d]
            n += 2 + nd
        elif isinstance(value, _GENERIC):
            if n + 2 > MAX_SIG:
                return -1
            sig[n] = (<cnp.dtype>cnp.PyArray_DescrFromScalar(value)).type_num
            sig[n + 1] = 0
            n += 2
        elif value is None:
            if n + 1 > MAX_SIG:
                return -1
            sig[n] = -1
            n += 1
        else:
            return -1
    return n


# ---------------------------------------------------------------------------------------------
# Program runner

# A step whose kernel declares a scalar operator (the registry's ``scalar`` trait) and gets two
# numpy scalars (or 0-d arrays) of one of the declared types calls the operator instead: the same
# IEEE operation in the same type, honouring np.errstate, without the ufunc machinery's set-up.
# Integer add, subtract and multiply are computed here instead (`_wrapping`): numpy's integer
# scalar operators warn on overflow (an error under -W error), where the ufunc wraps silently.

# The operand kinds a ufunc step keeps the type of (CompiledStep.keeps), as C constants.
cdef int _KEEPS_FLOATS = FLOATS, _KEEPS_INTEGERS = INTEGERS, _KEEPS_FIRST = FIRST_INPUT

cdef dict _WRAPPING_OPS = {operator.add: 0, operator.sub: 1, operator.mul: 2}
cdef frozenset _INTEGERS = frozenset([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                      np.uint32, np.uint64])


cdef extern from "numpy/arrayscalars.h":
    # A numpy integer scalar holds its value right after the object header, whatever its size
    # (the layout `PyArrayScalar_VAL` reads), so one struct reads them all; `_integers_readable`
    # checks that at import.
    ctypedef struct PyByteScalarObject:
        signed char obval


cdef inline cnp.npy_uint64 _integer_bits(object x, Py_ssize_t itemsize):
    """The bytes of integer scalar x (of `itemsize` bytes) at the start of a 64-bit word: its
    low-order bits, on a little-endian machine."""
    cdef cnp.npy_uint64 bits = 0
    memcpy(&bits, &(<PyByteScalarObject *><PyObject *>x).obval, itemsize)
    return bits


def _integers_readable():
    """Whether `_integer_bits` reads every integer type's value (and the machine is
    little-endian): if not, integer steps keep their ufunc."""
    if byteorder != "little":
        return False
    for t in _INTEGERS:
        high = np.iinfo(t).max  # (no byte zero: 0x7f.. or 0xff..)
        if _integer_bits(t(high), np.dtype(t).itemsize) != high:
            return False
    return True


cdef bint _READS_INTEGERS = _integers_readable()


cdef object _wrapping(int op, object x, object y, cnp.dtype descr):
    """x + y, x - y or x * y (op 0, 1, 2) in their integer type (`descr`), wrapping around modulo
    2**bits as numpy's ufuncs do: the low-order bits of a sum, difference or product depend only
    on the operands' low-order bits, so 64-bit unsigned arithmetic on the raw bytes gives them."""
    cdef Py_ssize_t itemsize = descr.itemsize
    cdef cnp.npy_uint64 a = _integer_bits(x, itemsize), b = _integer_bits(y, itemsize), r
    if op == 0:
        r = a + b
    elif op == 1:
        r = a - b
    else:
        r = a * b
    return PyArray_Scalar(&r, descr, NULL)


cdef inline object _scalar_of(object value):
    """`value` as a numpy scalar if it is one or a 0-d array, else None."""
    if cnp.PyArray_Check(value):
        if cnp.PyArray_NDIM(<cnp.ndarray>value) == 0:
            return cnp.PyArray_ToScalar(cnp.PyArray_DATA(<cnp.ndarray>value),
                                        <cnp.ndarray>value)
        return None
    if isinstance(value, _GENERIC):
        return value
    return None


cdef inline bint _is_number_type(int type_num):
    """Whether numpy type number `type_num` is bool or one of numpy's own number types."""
    return cnp.PyTypeNum_ISBOOL(type_num) or cnp.PyTypeNum_ISNUMBER(type_num)


def _cast_type(step):
    """The type step `step`'s kernel converts its one input to (`casts_to`), where that is one
    of numpy's own number types in native byte order; else None."""
    to = abilities_of(step.fn).casts_to
    if to is None or len(step.inputs) != 1 or step.inputs[0] < 0 or step.multi:
        return None
    to = np.dtype(to)
    return to if _is_number_type(to.num) and to.isnative else None


cdef object _cast(object value, cnp.dtype to, object dest):
    """A conversion step's result made here, as its kernel would (`casts_to`:
    ``np.asarray(value).astype(to)``, or into `dest` as ``np.copyto(dest, value,
    casting="unsafe")``), or None where `value` is not an array or numpy scalar of a number type
    or `dest` not an array: the kernel's then. A loop's body converts its counters, 0-d, every
    iteration: its kernel's call would cost more than the conversion."""
    cdef cnp.ndarray arr
    if type(value) is _NDARRAY:
        arr = <cnp.ndarray>value
    elif isinstance(value, _GENERIC):
        arr = cnp.PyArray_FROM_O(value)  # (as np.asarray makes a 0-d array of it)
    else:
        return None
    if not _is_number_type(cnp.PyArray_TYPE(arr)):
        return None
    if dest is None:
        # astype's own steps: an array like `arr` (shape, memory order), then numpy's cast of
        # every element into it, unsafe casting.
        Py_INCREF(to)  # (stolen)
        result = PyArray_NewLikeArray(arr, cnp.NPY_KEEPORDER, to, 1)
        cnp.PyArray_CopyInto(<cnp.ndarray>result, arr)
        return result
    if type(dest) is not _NDARRAY:
        return None
    cnp.PyArray_CopyInto(<cnp.ndarray>dest, arr)
    return dest


cdef object _row_at(object data, object index):
    """A step's result made here, as its kernel would (`row_by_index`): the row of array `data`
    at `index` along axis 0, for an index that is a numpy integer or a 0-d integer array within
    [-n, n), as a read-only view (its memory is `data`'s, which the view keeps alive: a buffer
    the runner hands out again checks that nothing else holds it); else None, the kernel's call
    (which raises for an index out of range). A loop's body reads a row of a sequence by the
    iteration number every iteration: the kernel would copy it."""
    cdef cnp.ndarray arr
    cdef Py_ssize_t i, n
    if type(data) is not _NDARRAY:
        return None
    arr = <cnp.ndarray>data
    if cnp.PyArray_NDIM(arr) < 1:
        return None
    if type(index) is _NDARRAY:
        if cnp.PyArray_NDIM(<cnp.ndarray>index) != 0 \
                or not cnp.PyArray_ISINTEGER(<cnp.ndarray>index):
            return None
    elif not isinstance(index, _INTEGER):
        return None
    n = cnp.PyArray_DIM(arr, 0)
    try:
        i = index
    except OverflowError:  # (a uint64 past the index type: out of range, the kernel says so)
        return None
    if i < 0:
        i += n
    if not 0 <= i < n:
        return None
    return _view(arr, cnp.PyArray_BYTES(arr) + i * cnp.PyArray_STRIDE(arr, 0),
                 cnp.PyArray_NDIM(arr) - 1, cnp.PyArray_DIMS(arr) + 1,
                 cnp.PyArray_STRIDES(arr) + 1, False)


cdef class Program:
    """A compiled graph (see `compile.py`) as flat arrays, run without any dict work."""

    def __init__(self, compiled):
        self.compiled = compiled
        steps = compiled.steps
        self.n_steps = len(steps)
        self.n_slots = len(compiled.slot_names)
        self.fns = [step.fn for step in steps]
        self.template = [None] * self.n_slots
        for slot, value in compiled.constants.items():
            self.template[slot] = value
        self.sigs = [None] * self.n_steps

        if self.n_slots >= 2**31:
            raise ModelError(f"program {compiled.name!r}: {self.n_slots} values, past 2^31")

        def flatten(field):  # a tuple field of every step, as offsets and one flat array
            # (made from lists: a fresh process's first np.cumsum and np.fromiter cost several
            # times a small program's lists)
            offsets = itertools.accumulate([len(getattr(s, field)) for s in steps], initial=0)
            flat = [slot for s in steps for slot in getattr(s, field)]
            return np.array(list(offsets), dtype=np.intc), np.array(flat, dtype=np.intc)

        self.in_off, self.in_idx = flatten("inputs")
        self.out_off, self.out_idx = flatten("outputs")
        self.kill_off, self.kill_idx = flatten("kills")
        self.multi = np.array([s.multi for s in steps] + [0], dtype=np.int8)
        # A ufunc takes its destination as one more positional argument: no keyword dict per call.
        self.positional_out = np.array([s.positional_out for s in steps] + [0], dtype=np.int8)
        self.keeps = np.array([s.keeps for s in steps] + [0], dtype=np.int8)
        self.overwrites = np.zeros(self.n_steps + 1, dtype=np.intp)
        # Per step: (operator, scalar types) when it may take the scalar path, else None.
        self.scalar_ops = [s.scalar if len(s.inputs) == 2 and min(s.inputs) >= 0
                           and not s.multi else None for s in steps]
        self.scalar_calls = np.zeros(self.n_steps + 1, dtype=np.intp)
        # Per step: (the operand type its scalar path last took, its dtype, whether it is an
        # integer), one tuple so that a thread reads the three together.
        self.scalar_taken = [(None, None, False)] * self.n_steps
        # Per step: the number type a conversion makes, which the runner makes itself (`_cast`),
        # else None.
        self.casts = [_cast_type(step) for step in steps]
        # Per step: whether the runner takes the row its kernel would copy (`_row_at`).
        self.rows = np.array([abilities_of(s.fn).row_by_index and len(s.inputs) == 2
                              and min(s.inputs) >= 0 and not s.multi for s in steps] + [0],
                             dtype=np.int8)
        # Per step, for integer operands: its `_wrapping` op; -1: its own operator (a
        # comparison); -2: the kernel (integer arithmetic where `_wrapping` cannot read bytes).
        self.wrapping = np.array([-1 if op is None or op[0] not in _WRAPPING_OPS else
                                  _WRAPPING_OPS[op[0]] if _READS_INTEGERS else -2
                                  for op in self.scalar_ops] + [-1], dtype=np.int8)
        # A 0-d constant only scalar-path steps read is kept as a numpy scalar (a ufunc takes it
        # all the same), so the scalar path does not convert it on every call.
        scalar_only = {slot: None for slot, value in compiled.constants.items()
                       if isinstance(value, np.ndarray) and value.ndim == 0
                       and slot not in compiled.output_slots}  # slot -> all readers scalar
        for step, op in zip(steps, self.scalar_ops):
            for slot in step.inputs:
                if slot in scalar_only:
                    scalar_only[slot] = op is not None and scalar_only[slot] is not False
        for slot, only in scalar_only.items():
            if only:
                self.template[slot] = _scalar_of(compiled.constants[slot])
        self.planned = np.zeros(self.n_steps + 1, dtype=np.int8)
        self.generation = np.zeros(self.n_steps + 1, dtype=np.intp)
        self.input_slots = np.array(compiled.input_slots, dtype=np.intp)
        self.output_slots = np.array(compiled.output_slots, dtype=np.intp)
        # (read only where the graph has shape arithmetic: `run` never asks otherwise)
        memo = compiled.memo
        self.memo_step = np.zeros(1 if memo is None else self.n_steps + 1, dtype=np.int8)
        self.memo_place = np.full(1 if memo is None else self.n_slots + 1, -1, dtype=np.intp)
        self.memo = None
        if memo is not None:
            for step in memo.steps:
                self.memo_step[<Py_ssize_t>step] = 1
            for k, slot in enumerate(memo.slots):
                self.memo_place[<Py_ssize_t>slot] = k
            self.memo_keys, self.memo_slots, self.memo = memo.keys, memo.slots, {}

    def scalar_steps(self):
        """The indices of the steps that have taken their scalar path (two 0-d operands of one
        type run as the scalar's operator) in some call so far."""
        return [s for s in range(self.n_steps) if self.scalar_calls[s]]

    def overwriting_steps(self):
        """The steps that have written their result over a dying operand (`_spare_input`) in some
        call so far, with how many times."""
        return {s: self.overwrites[s] for s in range(self.n_steps) if self.overwrites[s]}

    def plan_step(self, Py_ssize_t step):
        """Mark `step` as writing into a destination the driver supplies (docs/design.md, "The
        memory plan")."""
        self.planned[step] = 1

    def run(self, args, limits=None):
        """Run on `args` (the program's inputs in order); returns the outputs as a list. `limits`:
        the `RunLimits` its loops share (None: those of the run it is part of)."""
        cdef list slots = list(self.template)
        cdef Py_ssize_t k
        cdef tuple key = None, known = None
        cdef list made = None
        if len(args) != self.input_slots.shape[0]:
            raise TypeError(f"program {self.compiled.name!r} takes {self.input_slots.shape[0]} "
                            f"inputs, got {len(args)}")
        for k in range(self.input_slots.shape[0]):
            slots[self.input_slots[k]] = args[k]
        memo = self.memo
        if memo is not None:
            # Shape arithmetic on inputs of shapes seen before: the values it made then.
            key = tuple([getattr(args[k], "shape", None) for k in self.memo_keys])
            known = memo.get(key)
            if known is not None:
                for k in range(len(self.memo_slots)):
                    slots[self.memo_slots[k]] = known[k]
            else:
                made = [None] * len(self.memo_slots)
        if limits is None:
            self.execute(slots, None, None, known is not None, made)
        else:  # (a run's own program: its time limit is read between its nodes too)
            entered = _enter_run(limits)
            try:
                self.execute(slots, None, limits if limits.time_limit is not None else None,
                             known is not None, made)
            finally:
                _leave_run(entered)
        if made is not None:
            self._remember(key, made)
        return [slots[self.output_slots[k]] for k in range(self.output_slots.shape[0])]

    cdef _remember(self, tuple key, list made):
        """Keep the values a run's shape arithmetic `made` for inputs of shapes `key`: copies,
        read-only (a returned one is the caller's, and a copy of a read-only one is handed
        over), at most SHAPE_MEMO_KEYS keys. Values of another kind than arrays and numpy
        scalars, or larger than SHAPE_MEMO_BYTES in all, are not kept, nor asked for again."""
        cdef Py_ssize_t total = 0
        kept = []
        for value in made:
            if isinstance(value, np.ndarray) and not value.dtype.hasobject:
                total += value.nbytes
                value = value.copy()
                value.flags.writeable = False
            elif not (isinstance(value, np.generic) and not value.dtype.hasobject):
                self.memo = None
                return
            kept.append(value)
        if total > SHAPE_MEMO_BYTES:
            self.memo = None
            return
        memo = self.memo
        if memo is None:
            return
        if len(memo) >= SHAPE_MEMO_KEYS:
            memo.pop(next(iter(memo)), None)
        memo[key] = tuple(kept)

    def memo_facts(self):
        """(steps of shape arithmetic, input shapes remembered), or None where the graph has
        none or its values are not kept (`_remember`)."""
        if self.memo is None:
            return None
        return [s for s in range(self.n_steps) if self.memo_step[s]], list(self.memo)

    cdef str _label(self, Py_ssize_t s):
        """How errors name step s (made when one is raised)."""
        return self.compiled.steps[s].label

    cdef object _scalar_call(self, Py_ssize_t s, list slots):
        """Step s on two scalars (or 0-d arrays) of one type: its operator, no destination; None
        when the inputs are not such. A planned step's signature and generation are left as they
        are: its destination is used only when a later call's inputs match the call that sized
        it."""
        cdef Py_ssize_t a = self.in_off[s]
        cdef tuple scalar_op = self.scalar_ops[s]
        # (the operand type this step took last, its dtype, whether it is an integer)
        cdef tuple taken = <tuple>PyList_GET_ITEM(self.scalar_taken, s)
        x = slots[self.in_idx[a]]
        y = slots[self.in_idx[a + 1]]
        if type(x) is not taken[0] or type(y) is not taken[0]:
            # 0-d arrays, or another type than the one this step took last (a loop's step sees
            # one type call after call: the type sets are read only when it changes).
            x = _scalar_of(x)
            y = _scalar_of(y)
            if x is None or y is None or type(x) is not type(y):
                return None
            if type(x) is not taken[0]:
                if type(x) not in <frozenset>scalar_op[1]:
                    return None
                taken = (type(x), cnp.PyArray_DescrFromScalar(x), type(x) in _INTEGERS)
                self.scalar_taken[s] = taken
        if taken[2] and self.wrapping[s] == -2:
            return None
        try:
            if taken[2] and self.wrapping[s] >= 0:
                result = _wrapping(self.wrapping[s], x, y, <cnp.dtype>taken[1])
            else:
                result = scalar_op[0](x, y)
        except Exception as e:
            raise ExecutionError(f"{self._label(s)} failed: {type(e).__name__}: {e}") from e
        self.scalar_calls[s] += 1
        return result

    cdef object _spare_input(self, Py_ssize_t s, list slots):
        """A buffer step s's ufunc may write its result into (invariant 8), or None: an operand
        the step is the last reader of and only its slot holds, a plain array owning its
        writeable, aligned, native-order memory, of the kind and the type every operand has
        (array or numpy scalar: so the result has it too) and of the shape they broadcast to.
        For a kernel updating its first input in place, that input under the same conditions
        of ownership."""
        cdef Py_ssize_t a = self.in_off[s], n = self.in_off[s + 1] - a, k, j, d, slot, other
        cdef int nd, nd_other, kind = self.keeps[s]
        cdef bint read
        cdef cnp.ndarray arr, operand
        cdef cnp.dtype descr
        cdef object value
        if kind == _KEEPS_FIRST:  # (the first input, which dies here and is read once: compile)
            value = slots[self.in_idx[a]]
            if type(value) is not _NDARRAY or _refcount(<PyObject *>value) != 2:
                return None
            arr = <cnp.ndarray>value
            if (cnp.PyArray_BASE(arr) != NULL
                    or not cnp.PyArray_CHKFLAGS(arr, cnp.NPY_ARRAY_OWNDATA)
                    or not cnp.PyArray_ISBEHAVED(arr)):
                return None
            return arr
        for k in range(self.kill_off[s], self.kill_off[s + 1]):
            slot = self.kill_idx[k]
            value = slots[slot]
            # One reference from the slot, one from `value`: nothing else can read the buffer.
            if type(value) is not _NDARRAY or _refcount(<PyObject *>value) != 2:
                continue
            arr = <cnp.ndarray>value
            if (cnp.PyArray_BASE(arr) != NULL
                    or not cnp.PyArray_CHKFLAGS(arr, cnp.NPY_ARRAY_OWNDATA)
                    or not cnp.PyArray_ISBEHAVED(arr)
                    or not (kind & _KEEPS_FLOATS and cnp.PyArray_ISFLOAT(arr)
                            or kind & _KEEPS_INTEGERS and cnp.PyArray_ISINTEGER(arr))):
                continue
            nd = cnp.PyArray_NDIM(arr)
            descr = <cnp.dtype><PyObject *>cnp.PyArray_DESCR(arr)
            read = False  # (a slot that dies here may be an output nothing reads)
            for j in range(n):
                other = self.in_idx[a + j]
                if other < 0:
                    return None
                if other == slot:
                    read = True
                    continue
                value = slots[other]
                if Py_TYPE(value) == descr.typeobj:  # a numpy scalar of the type (a constant)
                    continue
                if type(value) is not _NDARRAY:
                    return None
                operand = <cnp.ndarray>value
                nd_other = cnp.PyArray_NDIM(operand)
                if nd_other > nd or not cnp.PyArray_EquivTypes(
                        <cnp.dtype><PyObject *>cnp.PyArray_DESCR(operand), descr):
                    return None
                for d in range(nd_other):
                    if (operand.shape[d] != 1
                            and operand.shape[d] != arr.shape[nd - nd_other + d]):
                        return None
            if read:
                return arr
        return None

    cdef object _kernel_call(self, Py_ssize_t s, list slots, list dests):
        """Step s's kernel, given its planned destination when its inputs match the call that
        sized it, else a dying operand's buffer when one may take the result."""
        cdef Py_ssize_t k, slot, n_sig = -1
        cdef Py_ssize_t a = self.in_off[s], n = self.in_off[s + 1] - a
        cdef object fn = self.fns[s], result = None, dest = None
        cdef object cast = <object>PyList_GET_ITEM(self.casts, s)
        cdef cnp.npy_intp sig[MAX_SIG]
        cdef bytes stored
        # The arguments, as a vectorcall takes them: no tuple, and no keyword dict for ``out=``.
        # Each holds a reference of its own for the call, as an argument tuple's item did (a
        # kernel sees the reference counts it saw then). Item 0 is left free for the callee
        # (PY_VECTORCALL_ARGUMENTS_OFFSET: a bound method puts its self there), the inputs
        # follow, then the destination: one more positional argument for a ufunc, else ``out``.
        cdef PyObject *stack[_STACK_ARGS + 2]
        cdef PyObject **argv = stack
        cdef PyObject *value
        # (Looked for before the arguments take references of their own.)
        cdef object spare = (self._spare_input(s, slots) if self.keeps[s] and not self.planned[s]
                             else None)
        if n > _STACK_ARGS:
            argv = <PyObject **>PyMem_Malloc((n + 2) * sizeof(PyObject *))
            if argv == NULL:
                raise MemoryError()
        try:
            for k in range(n):
                slot = self.in_idx[a + k]
                value = PyList_GET_ITEM(slots, slot) if slot >= 0 else <PyObject *>None
                Py_INCREF(<object>value)
                argv[1 + k] = value
            argv[1 + n] = NULL
            try:
                if self.planned[s]:
                    n_sig = _signature(argv + 1, n, sig)
                    stored = self.sigs[s]
                    if dests is not None:
                        dest = dests[self.out_idx[self.out_off[s]]]
                    if dest is not None and (stored is None or n_sig < 0
                                             or len(stored) != n_sig * <Py_ssize_t>sizeof(
                                                 cnp.npy_intp)
                                             or memcmp(<char *>stored, sig,
                                                       n_sig * sizeof(cnp.npy_intp)) != 0):
                        dest = None
                if spare is not None:
                    dest = spare
                    self.overwrites[s] += 1
                if dest is not None:
                    Py_INCREF(dest)
                    argv[1 + n] = <PyObject *>dest
                try:
                    if cast is not None:
                        result = _cast(<object>argv[1], <cnp.dtype>cast, dest)
                    elif self.rows[s] and dest is None:
                        result = _row_at(<object>argv[1], <object>argv[2])
                    if result is not None:
                        pass
                    elif dest is None:
                        result = PyObject_Vectorcall(fn, argv + 1,
                                                     n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                    elif self.positional_out[s]:
                        result = PyObject_Vectorcall(fn, argv + 1,
                                                     (n + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                     NULL)
                    else:
                        result = PyObject_Vectorcall(fn, argv + 1,
                                                     n | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                     <PyObject *>_OUT_KEYWORD)
                except CyloopError:
                    raise
                except MemoryError as e:
                    raise ResourceLimitError(f"{self._label(s)} failed: {e}") from e
                except Exception as e:
                    raise ExecutionError(
                        f"{self._label(s)} failed: {type(e).__name__}: {e}") from e
            finally:
                for k in range(n + 1):
                    Py_XDECREF(argv[1 + k])
        finally:
            if argv != stack:
                PyMem_Free(argv)
        if self.planned[s] and dest is None:
            # Remember the input signature this result's shape follows from.
            if n_sig < 0:
                self.sigs[s] = None
                self.generation[s] += 1
            else:
                fresh = (<char *>sig)[:n_sig * sizeof(cnp.npy_intp)]
                if fresh != self.sigs[s]:
                    self.sigs[s] = fresh
                    self.generation[s] += 1
        return result

    cdef int execute(self, list slots, list dests, RunLimits timed=None, bint skip=False,
                     list made=None) except -1:
        """Runs every step; with `timed`, reads its time limit before each step. `skip`: the
        shape arithmetic's values are bound already (`run`), its steps are not run; `made`
        (else): where its values go as they are made."""
        cdef Py_ssize_t s, k, a, b, slot
        cdef object result
        for s in range(self.n_steps):
            if skip and self.memo_step[s]:
                for k in range(self.kill_off[s], self.kill_off[s + 1]):
                    slots[self.kill_idx[k]] = None
                continue
            if timed is not None:
                timed.before(self._label(s), "it ran")
            result = None
            if self.scalar_ops[s] is not None:
                result = self._scalar_call(s, slots)
            if result is None:
                result = self._kernel_call(s, slots, dests)
            a = self.out_off[s]
            b = self.out_off[s + 1]
            if self.multi[s]:
                result = tuple(result)
                if len(result) != b - a:
                    raise ExecutionError(f"{self._label(s)} returned {len(result)} values for "
                                         f"{b - a} outputs")
                for k in range(a, b):
                    slot = self.out_idx[k]
                    if slot >= 0:
                        slots[slot] = result[k - a]
            else:
                slot = self.out_idx[a]
                if slot >= 0:
                    slots[slot] = result
            if made is not None and self.memo_step[s]:
                for k in range(a, b):
                    slot = self.out_idx[k]
                    if slot >= 0 and self.memo_place[slot] >= 0:
                        made[self.memo_place[slot]] = slots[slot]
            for k in range(self.kill_off[s], self.kill_off[s + 1]):
                slots[self.kill_idx[k]] = None
        return 0


# ---------------------------------------------------------------------------------------------
# Slicing

cdef class _Sliced:
    """One sliced input for one call: part i is a read-only view at data0 + i * step. Where step
    is 0 (a hoisted value computed once a run, every row the same), every part is one view, so
    that a kernel keeping what it derived from an operand finds it again by identity; where
    that value is one nobody writes, the view an earlier run bound (`_same_row`)."""
    cdef Py_ssize_t param_slot
    cdef cnp.ndarray base
    cdef char *data0
    cdef Py_ssize_t step
    cdef Py_ssize_t n
    cdef int nd
    cdef cnp.npy_intp dims[MAX_DIMS]
    cdef cnp.npy_intp strides[MAX_DIMS]
    cdef object same  # step 0: the view every part is, once made

    cdef object part(self, Py_ssize_t i):
        if self.step == 0:
            if self.same is None:
                self.same = _view(self.base, self.data0, self.nd, self.dims, self.strides, False)
            return self.same
        return _view(self.base, self.data0 + i * self.step, self.nd, self.dims, self.strides,
                     False)


cdef _Sliced _rows_of(cnp.ndarray a, Py_ssize_t param_slot):
    """Row i of `a` (along axis 0) as part i: how the body reads a hoisted value."""
    cdef _Sliced sl = _Sliced()
    cdef int k
    sl.param_slot = param_slot
    sl.base = a
    sl.n = a.shape[0]
    sl.data0 = <char *>cnp.PyArray_DATA(a)
    sl.step = a.strides[0]
    sl.nd = a.ndim - 1
    for k in range(sl.nd):
        sl.dims[k] = a.shape[k + 1]
        sl.strides[k] = a.strides[k + 1]
    return sl


cdef object _same_row(dict same_rows, _Sliced sl):
    """The view every row of `sl` is (a value computed once a run: step 0): the one an
    earlier run bound, where it has the same memory, layout and type and nobody writes it
    (`is_constant`: read-only down to its memory, which the view kept here holds alive, so
    its bytes are the same), else a new one. A kernel keeping what it derived from an
    operand (accel/gemm.py `Prepared`) then finds it by identity run after run, not by
    comparing views or values (invariant 7 holds: the planner writes nothing here)."""
    cdef cnp.ndarray kept
    cdef int k
    found = same_rows.get(sl.param_slot)
    if found is not None:
        kept = <cnp.ndarray>found
        if (<char *>cnp.PyArray_DATA(kept) == sl.data0 and cnp.PyArray_NDIM(kept) == sl.nd
                and cnp.PyArray_EquivTypes(<cnp.dtype><PyObject *>cnp.PyArray_DESCR(kept),
                                           <cnp.dtype><PyObject *>cnp.PyArray_DESCR(sl.base))):
            for k in range(sl.nd):
                if kept.shape[k] != sl.dims[k] or kept.strides[k] != sl.strides[k]:
                    break
            else:
                if is_constant(kept):  # (still: no array on its way made writeable since)
                    return kept
    view = _view(sl.base, sl.data0, sl.nd, sl.dims, sl.strides, False)
    if is_constant(view):
        same_rows[sl.param_slot] = view
    elif found is not None:
        same_rows.pop(sl.param_slot, None)
    return view


cdef _Sliced _make_sliced(object slicing, Py_ssize_t param_slot):
    """Part i of a sliced input (`ir.Slicing`: already checked against the value's shape) as a
    view at ``data0 + i * step``."""
    cdef _Sliced sl = _Sliced()
    cdef cnp.ndarray x = slicing.value
    cdef object desc = slicing.desc
    cdef int ndim = x.ndim, axis = slicing.axis, k, j = 0
    cdef Py_ssize_t n = slicing.count
    sl.param_slot = param_slot
    sl.base = x
    sl.n = n
    # With one part or none, the step is never taken (and a huge stride must not overflow it).
    cdef Py_ssize_t offset = slicing.first * x.strides[axis] if n else 0
    sl.data0 = <char *>cnp.PyArray_DATA(x) + offset
    sl.step = desc.stride * x.strides[axis] if n > 1 else 0
    for k in range(ndim):
        if k == axis and not desc.keep_axis:
            continue
        sl.dims[j] = desc.part_size if k == axis else x.shape[k]
        sl.strides[j] = x.strides[k]
        j += 1
    sl.nd = j
    return sl


# ---------------------------------------------------------------------------------------------
# Counters

cdef class _Counters:
    """What one loop's planner did, summed over its calls (settings.COUNTERS names each)."""

    def as_dict(self):
        return {name: getattr(self, name) for name in COUNTERS}

    def reset(self):
        for name in COUNTERS:
            setattr(self, name, 0)


# ---------------------------------------------------------------------------------------------
# Concatenated outputs

cdef class _Concat:
    """A concatenated output for one call: preallocated slots, written in their final position."""
    cdef Py_ssize_t index
    cdef Py_ssize_t result_slot
    cdef object desc
    cdef object label
    cdef object declared
    cdef bint reverse
    cdef bint new_axis
    cdef bint in_place
    cdef int axis
    cdef Py_ssize_t cap
    cdef Py_ssize_t bound
    cdef Py_ssize_t part
    cdef cnp.ndarray buffer
    cdef tuple part_shape
    cdef cnp.dtype dtype
    cdef int nd
    cdef cnp.npy_intp dims[MAX_DIMS]
    cdef cnp.npy_intp strides[MAX_DIMS]
    cdef Py_ssize_t slot_bytes
    cdef Py_ssize_t hoisted  # index of the hoisted value this output emits, else -1
    cdef RunLimits limits
    cdef Py_ssize_t max_rows  # the most slots memory_limit allows, -1: no limit

    cdef Py_ssize_t position(self, Py_ssize_t i):
        return self.cap - 1 - i if self.reverse else i

    cdef object row(self, Py_ssize_t i):
        """The writeable view iteration i's result goes to (None before the first result)."""
        if self.buffer is None or i >= self.cap:
            return None
        return _view(self.buffer, <char *>cnp.PyArray_DATA(self.buffer)
                     + self.position(i) * self.slot_bytes, self.nd, self.dims, self.strides, True)

    cdef int allocate(self, _Counters tally, object first, Py_ssize_t n_exact,
                      Py_ssize_t bound) except -1:
        """Size the buffer from the first result: n_exact slots if known, else min(bound, cap);
        never more than `limits.memory_limit` bytes (an exact size past it is refused now)."""
        cdef cnp.ndarray value = np.asarray(first)
        cdef int rank = value.ndim, axis = self.desc.axis
        cdef Py_ssize_t row_bytes, rows
        if self.new_axis:
            if axis < 0:
                axis += rank + 1
            if not 0 <= axis <= rank:
                raise ModelError(f"{self.label}: concatenated output #{self.index} stacks on axis "
                                 f"{self.desc.axis}, but the result has rank {rank}")
            self.part = 1
        else:
            if axis < 0:
                axis += rank
            if not 0 <= axis < rank:
                raise ModelError(f"{self.label}: concatenated output #{self.index} joins axis "
                                 f"{self.desc.axis}, but the result has rank {rank}")
            self.part = (<object>value).shape[axis]
        self.axis = axis
        self.part_shape = (<object>value).shape
        self.dtype = value.dtype
        self.bound = bound
        row_bytes = max(value.nbytes, 1)
        self.max_rows = -1
        if self.limits.memory_limit is not None:
            self.max_rows = self.limits.memory_limit // row_bytes
        if n_exact >= 0:
            rows = n_exact
            if 0 <= self.max_rows < rows:
                raise self._too_large(rows)
        else:
            rows = max(1, _FIRST_GROWING_BYTES // row_bytes)
            if bound >= 0 and bound < rows:
                rows = bound
            if 0 <= self.max_rows < rows:
                if self.max_rows == 0:
                    raise self._too_large(1)
                rows = self.max_rows
        self._resize(tally, rows, 0)
        return 0

    cdef object _too_large(self, Py_ssize_t rows):
        return self.limits.too_large(f"{self.label}: concatenated output #{self.index}",
                                     self._shape(rows), self.dtype)

    cdef tuple _shape(self, Py_ssize_t rows):
        """The buffer's shape with `rows` slots."""
        cdef list shape = list(self.part_shape)
        if self.new_axis:
            shape.insert(self.axis, rows)
        else:
            shape[self.axis] = rows * self.part
        return tuple(shape)

    cdef int _resize(self, _Counters tally, Py_ssize_t rows, Py_ssize_t filled) except -1:
        """(Re)allocate for `rows` slots, keeping the `filled` ones already written."""
        cdef tuple shape = self._shape(rows)
        cdef cnp.ndarray old = self.buffer
        cdef Py_ssize_t old_cap = self.cap, k, j = 0
        self.buffer = _aligned_empty(shape, self.dtype)
        self.cap = rows
        tally.allocations += 1
        tally.bytes_allocated += self.buffer.nbytes
        tally.last_preallocated_bytes += self.buffer.nbytes
        # Slot geometry: the part's dims/strides, and the bytes from one slot to the next.
        self.slot_bytes = self.buffer.strides[self.axis] * self.part
        for k in range(len(shape)):
            if k == self.axis and self.new_axis:
                continue
            self.dims[j] = self.part if k == self.axis else shape[k]
            self.strides[j] = self.buffer.strides[k]
            j += 1
        self.nd = j
        if old is not None and filled:
            lo_old, hi_old = self._span(old_cap, filled)
            lo_new, hi_new = self._span(rows, filled)
            dst = self._along(self.buffer, lo_new, hi_new)
            np.copyto(dst, self._along(old, lo_old, hi_old))
            tally.growth_bytes_copied += dst.nbytes
        return 0

    cdef tuple _span(self, Py_ssize_t cap, Py_ssize_t n):
        if self.reverse:
            return (cap - n, cap)
        return (0, n)

    cdef object _along(self, cnp.ndarray arr, Py_ssize_t lo, Py_ssize_t hi):
        index = [slice(None)] * arr.ndim
        index[self.axis] = slice(lo * self.part, hi * self.part)
        return arr[tuple(index)]

    cdef int ensure(self, _Counters tally, Py_ssize_t i, Py_ssize_t filled=-1) except -1:
        """Make room for slot i (geometric growth, never past the bound nor memory_limit),
        keeping the `filled` slots already written (by default, all before i)."""
        cdef Py_ssize_t rows
        if self.buffer is not None and i >= self.cap:
            if 0 <= self.max_rows <= i:
                raise self._too_large(self.max_rows + 1)
            rows = max(2 * self.cap, i + 1)
            if self.bound >= 0 and rows > self.bound:
                rows = self.bound
            if 0 <= self.max_rows < rows:
                rows = self.max_rows
            self._resize(tally, rows, i if filled < 0 else filled)
        return 0

    cdef int emit(self, _Counters tally, Py_ssize_t i, object value, object row) except -1:
        """Put iteration i's result in its slot unless the kernel already wrote it there."""
        cdef cnp.ndarray arr
        cdef Py_ssize_t nbytes
        if row is not None and value is row:
            tally.in_place_writes += 1
            return 0
        arr = np.asarray(value)
        if (<object>arr).shape != self.part_shape:
            raise self.desc.changed(self.label, self.index, i, "shape", self.part_shape,
                                    (<object>arr).shape)
        if arr.dtype != self.dtype:
            raise self.desc.changed(self.label, self.index, i, "dtype", self.dtype, arr.dtype)
        if row is None:
            row = self.row(i)
        if self.dtype.hasobject:
            np.copyto(row, arr)
            nbytes = arr.nbytes
        else:
            nbytes = _copy_into(<cnp.ndarray>row, arr)
        tally.copies += 1
        tally.bytes_copied += nbytes
        if i >= 2:
            tally.steady_bytes_copied += nbytes
        return 0

    cdef object slots(self, Py_ssize_t i, Py_ssize_t rows):
        """The slots of iterations i .. i+rows-1 (all within the buffer) as one writeable array
        whose row k is iteration i+k's slot: a view, reversed for a reverse output."""
        cdef Py_ssize_t lo, hi
        if self.reverse:
            lo, hi = self.cap - i - rows, self.cap - i
        else:
            lo, hi = i, i + rows
        dst = self._along(self.buffer, lo, hi)
        if not self.new_axis:  # split the joined axis into (slot, part) (a view)
            shape = dst.shape
            dst = dst.reshape(shape[:self.axis] + (rows, self.part) + shape[self.axis + 1:])
        if self.axis != 0:  # (np.moveaxis's order, without its axis checks)
            dst = dst.transpose((self.axis, *[d for d in range(dst.ndim) if d != self.axis]))
        return dst[::-1] if self.reverse else dst

    cdef int fill(self, _Counters tally, Py_ssize_t i, object block) except -1:
        """Put a hoisted chunk, the results of iterations i .. i+rows-1, in their slots at once
        (for an output whose result is a hoisted value; see hoist.py)."""
        cdef Py_ssize_t rows = block.shape[0]
        if block.shape[1:] != self.part_shape or block.dtype != self.dtype:
            raise self.desc.changed(self.label, self.index, i, "shape and dtype",
                                    f"{self.part_shape} {self.dtype}",
                                    f"{block.shape[1:]} {block.dtype}")
        self.ensure(tally, i + rows - 1, i)
        np.copyto(self.slots(i, rows), block)
        tally.copies += 1
        tally.bytes_copied += block.nbytes
        # Rows of iterations 2 and on count as steady state, as emit counts them.
        tally.steady_bytes_copied += block.nbytes // rows * max(i + rows - max(i, 2), 0)
        return 0

    cdef object finish(self, _Counters tally, Py_ssize_t n):
        """The output after n iterations: a view of the slots written, in final order; a copy
        when under half the buffer was used, so a loop that stopped early holds no dead rows."""
        if self.buffer is None:
            return self.desc.empty(self.declared)
        lo, hi = self._span(self.cap, n)
        used = self._along(self.buffer, lo, hi)
        if 2 * n >= self.cap:
            return used
        compact = np.array(used, copy=True)
        tally.growth_bytes_copied += compact.nbytes
        return compact


# ---------------------------------------------------------------------------------------------
# Back-edge pools

cdef class _Pool:
    """Buffers a carried result is written into; two suffice in steady state."""
    cdef Py_ssize_t result_slot
    cdef Py_ssize_t step
    cdef Py_ssize_t generation
    cdef tuple shape
    cdef object dtype
    cdef list buffers
    cdef bint scalar_path  # the producing step may apply its scalar operator

    cdef object pick(self, _Counters tally):
        """A buffer nothing else references (so nothing this iteration reads it, through a view,
        a carried value or a sequence holding it); allocated if none is free."""
        cdef Py_ssize_t k
        if self.shape is None:
            return None
        for k in range(len(self.buffers)):
            # Free when the pool's list holds the only reference.
            if _refcount(PyList_GET_ITEM(self.buffers, k)) == 1:
                return self.buffers[k]
        buf = _aligned_empty(self.shape, self.dtype)
        self.buffers.append(buf)
        tally.allocations += 1
        tally.bytes_allocated += buf.nbytes
        tally.last_preallocated_bytes += buf.nbytes
        return buf

    cdef void observe(self, object result, Py_ssize_t generation):
        """After a step ran without a destination: re-size the pool if its signature changed. A
        numpy scalar from a step that has a scalar path gets no buffer (it is a value handed over
        by reference, and the next call takes the scalar path again)."""
        if generation != self.generation:
            self.generation = generation
            self.buffers = []
            if cnp.PyArray_Check(result) or (isinstance(result, _GENERIC)
                                             and not self.scalar_path):
                self.shape = tuple(result.shape)
                self.dtype = result.dtype
            else:
                self.shape = None


# ---------------------------------------------------------------------------------------------
# The loop driver

cdef inline bint _condition(object value, str what, str label) except -1:
    """A condition's truth: one-element arrays and numpy bools directly, else `ir.truth`."""
    if cnp.PyArray_Check(value) and cnp.PyArray_SIZE(<cnp.ndarray>value) == 1:
        if cnp.PyArray_TYPE(<cnp.ndarray>value) == cnp.NPY_BOOL:  # (any stride: one element)
            return (<cnp.npy_bool *>cnp.PyArray_DATA(<cnp.ndarray>value))[0] != 0
        return bool(value)
    if isinstance(value, _NUMPY_BOOL):
        return bool(value)
    return truth(value, what, label)


cdef class _CoresSample:
    """A run timed for the trial of where the loop's products run (fields: _core.pxd)."""

    def __cinit__(self, choice, name, trial, split_before):
        self.choice, self.name, self.trial, self.split_before = choice, name, trial, split_before


cdef class _Run:
    """The per-call state of one loop run (its fields are listed in _core.pxd)."""


cdef class _ConcatOutput:
    """A concatenated output as the spec and the plan have it, read once (`LoopDriver.__init__`)
    for every run's `_Concat`."""
    cdef Py_ssize_t index
    cdef Py_ssize_t result_slot
    cdef object desc
    cdef object declared  # the body's declaration of its result (`LoopSpec.declared_output`)
    cdef Py_ssize_t hoisted  # index of the hoisted value it emits, else -1
    cdef object row  # RowDestination(index), what a destination in its row is
    cdef bint in_place  # whether the plan's own destinations put its result in its row


class _CarriedSlots(NamedTuple):
    """A carried input of the loop: its index in the spec's inputs, and the body slots of its
    parameter and of the result carried into it."""
    input: int
    param_slot: int
    result_slot: int


class _SlicedSlots(NamedTuple):
    """A sliced input: its index in the spec's inputs, and its part's body slot (-1 when nothing
    in the body reads the part: its readers were hoisted)."""
    input: int
    param_slot: int


class _InvariantSlots(NamedTuple):
    """An invariant input: the outer operand it is, and its body slot."""
    outer: int
    param_slot: int


cdef class LoopDriver:
    """Runs one loop node: its `LoopSpec`, a compiled body, and the memory plan (docs/design.md)."""

    def __init__(self, spec, compiled_body, label, settings, destinations, hoist=None,
                 steps=None, node=None, not_hoisted=()):
        cdef _ConcatOutput concat
        self.spec = spec
        self.node = node
        self.hoist = hoist  # the body's hoisted part (see hoist.py), or None
        # The body nodes that read no state of the loop yet stay in it, and why (plan facts).
        self.not_hoisted = tuple(not_hoisted)
        # Iterations run many at a time by the body's one recurrent step (a
        # destinations.RecurrentSteps), or None.
        self.steps = steps
        self.label = label
        self.settings = settings
        self.body = Program(compiled_body)
        self.destinations = dict(destinations)
        # Where a result both carried and emitted into strided slots lives is measured a run at
        # a time: its slot (the first, kept untuned) or a ping-pong pool copied into it. (Run-level
        # trials take two rounds, and no more when close: each round is a run the user waits
        # for, and the slower candidate's runs are half a trial's runs.)
        # Where the state the steps carry (when the body is one recurrent step) lives within a
        # call of them, staged or not (`_run_steps`), is measured a call at a time: six calls, not
        # four runs. A run after one that made such calls takes that choice (or the default)
        # untimed; a run after one that made none times the run-level choice, as without steps.
        self.placements = {}
        payback = 0 if settings.tune == AT_ONCE else PAYBACK  # (accel/measured.py)
        self.steps_slot = compiled_body.slot(spec.outputs[steps.output].result) \
            if steps is not None else -1
        self.steps_placement = None
        self.steps_ran = steps is not None
        for result_slot, destination in self.destinations.items():
            if isinstance(destination, MeasuredPlacement):
                candidates = {"in its slot": destination.as_row,
                              "a ping-pong pool, copied into its slot": destination.as_pool}
                # (No warm-up run: neither pays a one-time cost in its first, the pool's two
                # small buffers aside, so the trial takes four runs, not six.)
                placement = Measured(candidates, rounds=RUN_ROUNDS, unit="us/iteration",
                                     extend=False, warm_up=False, payback=payback)
                self.placements[result_slot] = placement
                if result_slot == self.steps_slot:
                    self.steps_placement = Measured(dict(candidates), rounds=RUN_ROUNDS,
                                                    unit="us/iteration", extend=False,
                                                    payback=payback)
                    if not settings.tune:
                        self.steps_placement.fix()
                if not settings.tune:
                    placement.fix()
        # Where the body's and the hoisted part's matrix products run is measured a run at a
        # time, all of them together (accel/gemm.py, `product_candidates`, each named by the
        # cores it takes): left to numpy, each in its own measured formulation (BLAS's own
        # threads for a large one, as many as the process's cores; what tune=False keeps), or
        # in pieces on this thread and the helper. The helper's take their runs first: BLAS's
        # threads spin for a while after a run of theirs, on the core the helper would need.
        kernels = [step.fn for step in compiled_body.steps]
        kernels += [step.probe for step in hoist.steps] if hoist is not None else []
        self.products = None
        self.runs_products = any(abilities_of(fn).products for fn in kernels)
        candidates = product_candidates() if self.runs_products else None
        if candidates is not None:
            self.products = Measured(candidates, rounds=RUN_ROUNDS, unit="us/iteration",
                                     consecutive=True, extend=False, payback=payback)
            if not settings.tune:
                self.products.fix(next(n for n, on in candidates.items() if not on))
        self.tally = _Counters()
        params = spec.body.inputs
        self.n_params = len(params)
        self.n_captures = len(compiled_body.input_slots) - self.n_params
        slot = compiled_body.slot
        # The iteration number and the condition are bound only if the body reads them (or
        # returns them): most bodies ignore one or both, and making a scalar each iteration
        # would cost more than many a body's whole work.
        read = {s for step in compiled_body.steps for s in step.inputs}
        read.update(compiled_body.output_slots)
        self.iter_slot = slot(spec.iteration_param) if spec.iteration_param else -1
        self.cond_slot = slot(spec.cond_param) if spec.cond_param else -1
        if self.iter_slot not in read:
            self.iter_slot = -1
        if self.cond_slot not in read:
            self.cond_slot = -1
        self.cond_result_slot = slot(spec.cond_result) if spec.cond_result else -1
        self.iter_type = spec.iteration_dtype.num
        self.carried = []  # _CarriedSlots
        self.sliced = []  # _SlicedSlots
        self.invariants = []  # _InvariantSlots
        for k, inp in enumerate(spec.inputs):
            if isinstance(inp, CarriedInput):
                self.carried.append(_CarriedSlots(k, slot(inp.param), slot(inp.result)))
            elif isinstance(inp, SlicedInput):
                # A part nothing reads (its readers were hoisted) is not bound.
                part = slot(inp.param)
                self.sliced.append(_SlicedSlots(k, part if part in read else -1))
            else:
                self.invariants.append(_InvariantSlots(inp.outer, slot(inp.param)))
        self.capture_slots = list(compiled_body.input_slots[self.n_params:])
        self.fixed_slot = np.array([s for _, s in self.invariants] + self.capture_slots,
                                   dtype=np.intp)
        self.hoist_slots = [slot(name) for name in hoist.frontier] if hoist is not None else []
        # A hoisted value is bound each iteration only if something reads it there: a step, a
        # back edge, a last value or the condition (a concatenated output of one is filled a
        # chunk at a time).
        needed = {s for step in compiled_body.steps for s in step.inputs}
        needed.update(slot(spec.inputs[k].result) for k, _, _ in self.carried)
        needed.update(slot(out.result) for out in spec.outputs
                      if not isinstance(out, ConcatOutput))
        if spec.cond_result:
            needed.add(slot(spec.cond_result))
        self.hoist_bound = [s for s in self.hoist_slots if s in needed]
        self.same_rows = {}
        self.producer = [-1] * len(compiled_body.slot_names)
        for index, step in enumerate(compiled_body.steps):
            for out_slot in step.outputs:
                if out_slot >= 0:
                    self.producer[out_slot] = index
        for result_slot in self.destinations:
            self.body.plan_step(self.producer[result_slot])
        self.reset_slots = np.array(sorted((set(compiled_body.output_slots)
                                            | set(compiled_body.input_slots))
                                           - set(compiled_body.constants)), dtype=np.intp)
        self.carried_param = np.array([c.param_slot for c in self.carried], dtype=np.intp)
        self.carried_result = np.array([c.result_slot for c in self.carried], dtype=np.intp)
        if steps is not None:
            step = compiled_body.steps[0]
            abilities = abilities_of(step.fn)  # (read here once: `_run_steps` asks a chunk)
            self.steps_inputs = tuple(step.inputs)
            self.steps_row_slot = step.inputs[abilities.recurrence.per_step]
            self.steps_for, self.steps_hold = abilities.steps_for, abilities.steps_hold
            self.steps_measured = abilities.measured
        # A carried value's final value (its own output, or, as OpenVINO pairs them, any
        # last-value output of the body result it is carried from) is read from the run's
        # carried values, not kept as a last value too: while an iteration runs, its slot then
        # holds the carried value alone (Design 5, 8).
        carried_at = {k: c for c, (k, _, _) in enumerate(self.carried)}
        carried_from = {}
        for c, (_, _, result_slot) in enumerate(self.carried):
            carried_from.setdefault(result_slot, c)
        self.last_carried = {}
        for j, out in enumerate(spec.outputs):
            if isinstance(out, LastOutput):
                c = carried_at.get(out.carried) if out.carried is not None \
                    else carried_from.get(slot(out.result))
                if c is not None and self.carried[c].result_slot == slot(out.result):
                    self.last_carried[j] = c
        last = [(j, slot(out.result)) for j, out in enumerate(spec.outputs)
                if not isinstance(out, ConcatOutput) and j not in self.last_carried]
        self.last_index = np.array([j for j, _ in last], dtype=np.intp)
        self.last_slot = np.array([s for _, s in last], dtype=np.intp)
        self.carried_outer = [spec.inputs[k].outer for k, _, _ in self.carried]
        self.concat_outputs = []
        for j, out in enumerate(spec.outputs):
            if isinstance(out, ConcatOutput):
                concat = _ConcatOutput()
                concat.index = j
                concat.result_slot = slot(out.result)
                concat.desc = out
                concat.declared = spec.declared_output(j)
                concat.hoisted = self.hoist_slots.index(concat.result_slot) \
                    if concat.result_slot in self.hoist_slots else -1
                concat.row = RowDestination(j)
                concat.in_place = self.destinations.get(concat.result_slot) == concat.row
                self.concat_outputs.append(concat)

    @property
    def loops(self):
        return self.body.compiled.loops

    def counters(self):
        """What the planner did, summed over every call: copies, bytes, allocations."""
        return self.tally.as_dict()

    def reset_counters(self):
        self.tally.reset()

    def facts(self):
        """This loop described for the plan (`destinations.LoopFacts`)."""
        hoist = self.hoist
        return LoopFacts(self.label, "cython", self.spec, self.body.compiled, True,
                         dict(self.destinations), self.counters(),
                         hoisted_inputs=list(hoist.frontier) if hoist is not None else [],
                         hoisted=list(hoist.work) if hoist is not None else [],
                         scalar_steps=self.body.scalar_steps(),
                         nested=[loop.facts() for loop in self.loops],
                         hoisted_kernels=[(step.work, step.probe) for step in hoist.steps]
                         if hoist is not None else [],
                         chunk_sizing=hoist.sizing if hoist is not None else None,
                         overwriting=self.body.overwriting_steps(),
                         placements=dict(self.placements), products=self.products,
                         runs_products=self.runs_products,
                         steps=self.steps, steps_placement=self.steps_placement,
                         computed_once=frozenset(hoist.computed) if hoist is not None
                         else frozenset(), node=self.node,
                         not_hoisted=list(self.not_hoisted))

    def __call__(self, *args):
        """Run the loop; it shares the limits of the run it is part of (`current_limits`), or,
        called on its own, has its own, from its settings."""
        limits = current_limits()
        cores = set_products_on_two_cores(False)  # (each run sets its own: `_start`)
        try:
            if limits is not None:
                return self._loop(list(args), limits)
            with running(_limits_of(self.settings)) as limits:
                return self._loop(list(args), limits)
        finally:
            set_products_on_two_cores(cores)

    cdef tuple _loop(self, list args, RunLimits limits):
        cdef _Run r = self._start(args, limits)
        cdef _CoresSample cores = r.cores
        # A run of the products trial times no other measured choice (each runs its choice so
        # far, or its default), so that one core and two are timed doing the same work:
        # - on one core, the one-core formulations of its products would otherwise be on trial,
        #   their slow candidates timed as part of one core's run, and they are moot if two
        #   cores are kept;
        # - on two cores, the chunk sizes' trial would otherwise run in the two-core runs, its
        #   slower sizes timed as two cores', enough to make one core look faster
        #   (docs/performance.md, "The measurements behind some of the rules").
        # Only the runs before the trial opens (two cores, the default's, counted, not
        # compared) and, where it opened at once, its first run (a warm-up whose time counts
        # for nothing) let the others take their samples: the kernels' own per-call trials
        # settle within them. The rest take theirs once the cores are chosen, under that choice.
        quiet = cores is not None and cores.trial.open and (
            not cores.choice.candidates[cores.name] or cores.name in cores.trial.warm)
        if not quiet:
            return self._iterate(r, limits)
        with untimed():
            return self._iterate(r, limits)

    cdef tuple _iterate(self, _Run r, RunLimits limits):
        """The iterations of a run `_start` set up."""
        cdef str label = self.label
        cdef Py_ssize_t i = 0, k, count, n_carried = len(self.carried)
        cdef Py_ssize_t n_last = self.last_index.shape[0], n_fixed = len(r.fixed)
        cdef bint go = r.run.go, has_cond_result = self.cond_result_slot >= 0
        cdef list slots = list(self.body.template)
        cdef list dests = r.dests
        cdef _Sliced sl
        cdef _Concat cc
        cdef _Pool pool
        cdef object iteration, row, value
        cdef Py_ssize_t[::1] generation = self.body.generation
        cdef object progress = self.settings.progress

        while go and (r.n_max < 0 or i < r.n_max):
            if i == r.stop_at:
                raise r.run.stop_error(i, label)
            limits.tick(label, i)
            # Bind the body inputs.
            if self.iter_slot >= 0:
                iteration = cnp.PyArray_ZEROS(0, NULL, self.iter_type, 0)
                cnp.PyArray_SETITEM(iteration, cnp.PyArray_DATA(iteration), i)
                slots[self.iter_slot] = iteration
            if self.cond_slot >= 0:
                slots[self.cond_slot] = _TRUE
            for k in range(n_carried):  # (then held by its slot alone: a step may update it
                slots[self.carried_param[k]] = r.values[k]  # in place, Design 8; the
                r.values[k] = None  # iteration's results take its place)
            for sl in r.sliced:
                slots[sl.param_slot] = sl.part(i)
            if self.hoist is not None:
                if i >= r.chunk_end:
                    sl = None  # (the loop variable may hold a view of the old chunk)
                    self._next_chunk(r, i)
                for sl in r.hoisted:
                    slots[sl.param_slot] = sl.part(i - r.chunk_start)
            for k in range(n_fixed):
                slots[r.fixed_slot[k]] = r.fixed[k]
            # Destinations: the output row for emitted results, a free pool buffer for carried.
            for cc in r.concats:
                cc.ensure(self.tally, i)
            for cc in r.in_place:
                dests[cc.result_slot] = cc.row(i)
            for pool in r.pools:
                dests[pool.result_slot] = None
                dests[pool.result_slot] = pool.pick(self.tally)

            # Iterations i, i+1, ... in one call of a recurrent step, or iteration i alone.
            count = self._run_steps(r, i, slots, limits) if r.steps_out is not None else 0
            if count > 0:
                go = r.steps_go
            else:
                count = 1
                self.body.execute(slots, dests)
                if has_cond_result:
                    go = _condition(slots[self.cond_result_slot], "condition result", label)
                for cc in r.per_iteration:
                    value = slots[cc.result_slot]
                    row = None
                    if cc.buffer is None:
                        cc.allocate(self.tally, value, r.exact, r.bound)
                    elif cc.in_place:
                        row = dests[cc.result_slot]
                    cc.emit(self.tally, i, value, row)
                for pool in r.pools:
                    value = slots[pool.result_slot]
                    if value is not dests[pool.result_slot]:
                        pool.observe(value, generation[pool.step])
                value = None  # (no reference of its own to what the next iteration carries)
                for k in range(n_last):
                    r.last_values[self.last_index[k]] = slots[self.last_slot[k]]
                for k in range(n_carried):
                    r.values[k] = slots[self.carried_result[k]]
            self._reset_slots(slots)
            i += count
            PyErr_CheckSignals()
            if i % _PROGRESS_EVERY == 0:  # (steps end at one: `_run_steps`)
                _let_other_threads_run()
                if progress is not None:
                    progress(label, i, None if r.n_max < 0 else r.n_max, False)

        if progress is not None and i >= _PROGRESS_EVERY:
            progress(label, i, None if r.n_max < 0 else r.n_max, True)
        if r.chunk_end > 0:
            self.hoist.finish(i)
        if self.steps is not None:
            self.steps_ran = r.stepped
        if (r.placing or r.cores is not None) and i > 1:
            # The run's time an iteration, under the placement and cores it tried (where the
            # placement's steps ran after all, theirs: not a sample of the run-level choice).
            elapsed = (perf_counter() - r.started) / i
            for placement, name, trial in r.placing:
                if not (r.stepped and placement is self.placements.get(self.steps_slot)):
                    placement.report(trial, name, elapsed)
            if r.cores is not None:
                r.cores.choice.report(r.cores.trial, r.cores.name, elapsed)
        if r.cores is not None and i > 1 and r.cores.choice.candidates[r.cores.name] \
                and products_split() == r.cores.split_before:
            # Its products were all too small to split: on two cores they ran as on one, and
            # the choice is no choice (the next runs take the default), and none to show.
            self.products = None
            self.runs_products = False
        return self._finish(r, i)

    cdef _Run _start(self, list args, RunLimits limits):
        """Read the operands (`LoopSpec.resolve`) and set up this call's views, outputs and
        pools; nothing is allocated for outputs before the first result shows their shape."""
        cdef _Run r = _Run()
        cdef _Concat cc
        cdef _ConcatOutput concat
        cdef _Pool pool
        cdef Py_ssize_t n_node = len(args) - self.n_captures, k
        spec = self.spec
        self.tally.runs += 1
        self.tally.last_preallocated_bytes = 0
        r.run = run = spec.resolve(args, self.label, limits)
        r.n_max = -1 if run.trip_count is None else run.trip_count
        r.stop_at = -1 if run.stop_at is None else run.stop_at
        r.exact = -1 if run.exact is None else run.exact
        r.bound = -1 if run.bound is None else run.bound
        # The hoisted part reads outer values as the body does: read-only views, made once a run
        # (a kernel may keep what it derives from one while the same view comes back).
        r.args = [_read_only(a) for a in args]
        r.sliced = [_make_sliced(run.slicings[k], param_slot)
                    for k, param_slot in self.sliced if param_slot >= 0]
        # Values that stay put: invariants and outer-scope captures, as read-only views.
        r.fixed = [r.args[outer] for outer, _ in self.invariants]
        r.fixed += [r.args[n_node + k] for k in range(self.n_captures)]
        r.fixed_slot = self.fixed_slot
        r.values = [args[outer] for outer in self.carried_outer]
        r.last_values = [None] * len(spec.outputs)
        # Where this run's products run (the caller restores the setting: `__call__`).
        r.cores = None
        products = self.products  # (another thread's run may let go of it: see _loop)
        if products is not None:
            name, trial = products.pick(None)
            set_products_on_two_cores(products.candidates[name])
            if trial is not None:
                r.cores = _CoresSample(products, name, trial, products_split())
        # This run's destinations: a measured placement is one or the other for the whole run.
        # One run-level trial at a time: while the choice of cores is on trial, a placement
        # keeps its choice, or its default, untimed (a run on one core, with that core's own
        # trials of its products' formulations, would be timed as the placement's).
        destinations = self.destinations
        r.placing = []
        if self.placements:
            destinations = dict(destinations)
            for result_slot, placement in self.placements.items():
                if result_slot == self.steps_slot and self.steps_ran:
                    placement = self.steps_placement  # (see __init__)
                with untimed() if r.cores is not None and r.cores.trial.open \
                        or placement is self.steps_placement else nullcontext():
                    name, trial = placement.pick(None)
                destinations[result_slot] = placement.candidates[name]
                if trial is not None:
                    r.placing.append((placement, name, trial))
        r.concats, r.per_iteration, r.in_place, r.emitted = [], [], [], []
        for concat in self.concat_outputs:
            cc = _Concat()
            cc.index = concat.index
            cc.result_slot = concat.result_slot
            cc.desc = concat.desc
            cc.label = self.label
            cc.limits = limits
            cc.declared = concat.declared
            cc.reverse = concat.desc.reverse
            cc.new_axis = concat.desc.new_axis
            cc.buffer = None
            cc.cap = 0
            # (A measured placement makes this run's destinations its own: compared then.)
            cc.in_place = concat.in_place if destinations is self.destinations \
                else destinations.get(cc.result_slot) == concat.row
            cc.hoisted = concat.hoisted
            r.concats.append(cc)
            if cc.in_place:
                r.in_place.append(cc)
            if cc.hoisted >= 0:
                r.emitted.append(cc)
            else:
                r.per_iteration.append(cc)
        r.pools = []
        for result_slot, destination in destinations.items():
            if isinstance(destination, PoolDestination):
                pool = _Pool()
                pool.result_slot = result_slot
                pool.step = self.producer[result_slot]
                pool.scalar_path = self.body.scalar_ops[pool.step] is not None
                pool.generation = -1
                pool.shape = None
                pool.buffers = []
                r.pools.append(pool)
        r.steps_out = None
        r.stepped = False
        if self.steps is not None:
            for cc in r.concats:
                if cc.index == self.steps.output:
                    r.steps_out = cc
        r.dests = [None] * self.body.n_slots
        r.hoisted = []
        r.computed = {}
        r.chunk_start = r.chunk_end = r.row_bytes = 0
        r.hoist_limit = self.hoist.limit(args, self.n_captures) if self.hoist is not None else -1
        r.started = perf_counter()
        return r

    cdef int _next_chunk(self, _Run r, Py_ssize_t i) except -1:
        """Compute the hoisted rows of the iterations from i on: never past the last iteration
        that can run, nor past what the hoisted inputs hold (that iteration raises instead)."""
        cdef Py_ssize_t rows
        cdef _Concat cc
        cdef _Sliced sl
        hoist = self.hoist
        if r.hoist_limit >= 0 and i >= r.hoist_limit:
            raise hoist.past_end(i, r.args, self.n_captures)
        rows = hoist.next_rows(i, r.row_bytes)
        for limit in (r.bound, r.hoist_limit):
            if limit >= 0 and rows > limit - i:
                rows = limit - i
        # Free the old chunk first, so that its memory is reused rather than the heap grown
        # chunk after chunk.
        r.hoisted = []
        # An output whose buffer already has room for these rows offers its slots to the step
        # making them (Design, 3), unless another output emitting the same value took them.
        into, owner = {}, {}
        for cc in r.emitted:
            if cc.buffer is not None and i + rows <= cc.cap and cc.hoisted not in into:
                into[cc.hoisted] = cc.slots(i, rows)
                owner[cc.hoisted] = cc
        arrays = hoist.chunk(r.args, self.n_captures, r.run.slicings, i, rows, into, r.computed)
        r.hoisted = [_rows_of(<cnp.ndarray>a, s) for a, s in zip(arrays, self.hoist_slots)
                     if s in self.hoist_bound]
        for sl in r.hoisted:
            if sl.step == 0:
                sl.same = _same_row(self.same_rows, sl)
        for cc in r.emitted:
            block = arrays[cc.hoisted]
            if owner.get(cc.hoisted) is cc and block is into[cc.hoisted]:
                self.tally.in_place_writes += rows  # written in its slots: nothing to copy
                continue
            if cc.buffer is None:
                cc.allocate(self.tally, block[0], r.exact, r.bound)
            cc.fill(self.tally, i, block)
        r.row_bytes = hoist.row_bytes(arrays, rows)
        r.chunk_start = i
        r.chunk_end = i + rows
        self.tally.hoist_chunks += 1
        self.tally.hoisted_bytes += r.row_bytes * rows
        return 0

    cdef Py_ssize_t _run_steps(self, _Run r, Py_ssize_t i, list slots,
                               RunLimits limits) except -1:
        """Run iterations i, i+1, ... (the rest of the hoisted chunk, none past the loop's end,
        the next multiple of _PROGRESS_EVERY, what `limits` let run before a checkpoint, or the
        output's last slot) in one call of the body's
        recurrent step (`RecurrentSteps`), whose operands iteration i's are (bound in `slots`,
        its destinations made, and counted: the driver's own iteration); returns how many it
        ran, or 0 (nothing run) where it cannot: before iteration 1 (iteration 0 sizes the
        output), for fewer than two, or when the kernel's `steps` decline the operands."""
        cdef _Concat cc = <_Concat>r.steps_out
        cdef _Sliced sl
        cdef Py_ssize_t count, k, first, last
        cdef bint staged
        cdef double started
        if i == 0 or cc.buffer is None:
            return 0
        count = r.chunk_end - i
        if r.n_max >= 0 and count > r.n_max - i:
            count = r.n_max - i
        if r.stop_at >= 0 and count > r.stop_at - i:
            count = r.stop_at - i
        if count > 1 + limits.ticks_free():  # (iteration i is counted already)
            count = 1 + limits.ticks_free()
        if count > _PROGRESS_EVERY - i % _PROGRESS_EVERY:  # (progress heard as ever)
            count = _PROGRESS_EVERY - i % _PROGRESS_EVERY
        # Nor past the output's slots: a buffer grows an iteration at a time (`_iterate` has
        # made room for slot i), never here, where its rows were handed out as destinations.
        if count > cc.cap - i:
            count = cc.cap - i
        if count < 2:
            return 0
        spec = self.steps
        if spec.cond_rows >= 0:
            # Iteration i + 1 runs where row i of the condition says true, and so on: no more
            # iterations than the leading true rows allow (the last one's row, read after the
            # call, says whether the loop goes on).
            count = self._while_true(r, i, count, spec.cond_rows)
            if count < 2:
                return 0
        args = tuple([slots[k] for k in self.steps_inputs])
        steps = self.steps_for(*args)
        if steps is None:
            # Not now: its measured formulation is on trial (asked again next iteration), or
            # settled on one without steps, or its answer holds for a run (`steps_hold`: it
            # depends on the run's cores and operand kinds): not asked again in the run.
            measured = self.steps_measured
            if self.steps_hold or measured is None or measured.settled(*args):
                r.steps_out = None
            return 0
        rows = None
        for sl in r.hoisted:
            if sl.param_slot == self.steps_row_slot:
                rows = sl.base
        if rows is None:
            return 0
        first = i - r.chunk_start
        # Staged (each result made in a contiguous buffer, then copied into its slot, as where
        # it lives in a pool between iterations) or not: the measured choice within a call, each
        # call a sample while it is on trial (none inside a chunk the chunk sizes' trial times).
        staged = not cc.in_place
        placement, trial = self.steps_placement, None
        if placement is not None:
            with untimed() if self.hoist.sizes_on_trial() else nullcontext():
                name, trial = placement.pick(None)
            staged = isinstance(placement.candidates[name], PoolDestination)
        started = perf_counter()
        results = steps(args, rows[first:first + count], cc.slots(i, count), staged)
        if results is None:  # declined: the operands' kinds hold for the run, so no more asking
            r.steps_out = None
            return 0
        r.stepped = True
        if trial is not None:
            placement.report(trial, name, (perf_counter() - started) / count)
        for k in range(len(spec.carried)):
            if spec.carried[k] >= 0:
                r.values[k] = results[spec.carried[k]]
        for j, k in spec.last:
            r.last_values[j] = results[k]
        # (the hoisted values the last iteration had: a counter carried, its condition)
        last = first + count - 1
        for k, slot in spec.carried_rows:
            r.values[k] = (<_Sliced>self._hoisted(r, slot)).part(last)
        for j, slot in spec.last_rows:
            r.last_values[j] = (<_Sliced>self._hoisted(r, slot)).part(last)
        r.steps_go = spec.cond_rows < 0 or _condition(
            (<_Sliced>self._hoisted(r, spec.cond_rows)).part(last), "condition result",
            self.label)
        limits.left -= count - 1
        if not staged:
            self.tally.in_place_writes += count
        else:  # (counted as `emit` counts a copy into a slot)
            slot_bytes = cc.dtype.itemsize * int(np.prod(cc.part_shape))
            self.tally.copies += count
            self.tally.bytes_copied += count * slot_bytes
            self.tally.steady_bytes_copied += (count - max(2 - i, 0)) * slot_bytes
        self.tally.step_calls += 1
        self.tally.stepped_iterations += count
        return count

    cdef object _hoisted(self, _Run r, Py_ssize_t slot):
        """The current chunk's rows of hoisted body slot `slot` (`plan_steps` names only slots
        the body reads, so bound each iteration: in `r.hoisted`)."""
        cdef _Sliced sl
        for sl in r.hoisted:
            if sl.param_slot == slot:
                return sl
        raise AssertionError(f"{self.label}: no hoisted rows of slot {slot}")

    cdef Py_ssize_t _while_true(self, _Run r, Py_ssize_t i, Py_ssize_t count,
                                Py_ssize_t slot) except -1:
        """How many of iterations i, ..., i + count - 1 run: 1, and one more for each leading
        true row of the condition result (hoisted body slot `slot`) from row i on."""
        cdef _Sliced cond = <_Sliced>self._hoisted(r, slot)
        cdef Py_ssize_t first = i - r.chunk_start, k, d, size = 1
        for d in range(cond.nd):
            size *= cond.dims[d]
        if cnp.PyArray_TYPE(cond.base) == cnp.NPY_BOOL and size == 1:
            # (a bool a row, read where it lies: no view made a row)
            for k in range(count - 1):
                if (<cnp.npy_bool *>(cond.data0 + (first + k) * cond.step))[0] == 0:
                    return k + 1
            return count
        for k in range(count - 1):
            if not _condition(cond.part(first + k), "condition result", self.label):
                return k + 1
        return count

    cdef void _reset_slots(self, list slots):
        """Drop this iteration's inputs and results (never constants), so that the only
        references left to a pool buffer are real ones (Design, 5)."""
        cdef Py_ssize_t k
        for k in range(self.reset_slots.shape[0]):
            slots[self.reset_slots[k]] = None

    cdef tuple _zero_iterations(self, _Run r, dict finished):
        """The loop's outputs when it ran no iteration (`finished`: its concatenated ones)."""
        carried = {k: value for (k, _, _), value in zip(self.carried, r.values)}
        # (and the invariants a body passes through: `InvariantInput.result`)
        carried.update((k, r.args[inp.outer]) for k, inp in enumerate(self.spec.inputs)
                       if isinstance(inp, InvariantInput) and inp.result)
        return tuple(finished[j] if j in finished
                     else self.spec.zero_iteration_value(j, carried, self.label)
                     for j in range(len(self.spec.outputs)))

    cdef tuple _finish(self, _Run r, Py_ssize_t n):
        """The loop's outputs after n iterations."""
        cdef _Concat cc
        self.tally.iterations += n
        self.tally.steady_iterations += max(n - 2, 0)
        self.tally.last_iterations = n
        finished = {cc.index: cc.finish(self.tally, n) for cc in r.concats}
        if n == 0:
            return self._zero_iterations(r, finished)
        results = []
        for j in range(len(self.spec.outputs)):
            if j in finished:
                results.append(finished[j])
            elif j in self.last_carried:
                results.append(r.values[self.last_carried[j]])
            else:
                results.append(r.last_values[j])
        return tuple(results)
