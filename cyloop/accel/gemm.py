"""Products with a weight matrix, in the formulation this machine runs fastest
(docs/design.md, "Measured choices").

``a @ w`` with a 2-D `a` (a batch of rows: a state, a chunk of inputs) and a 2-D `w` that is the
same read-only matrix call after call (a body constant, a loop invariant) can be handed to BLAS
three ways: as it is (``rows``: ``a @ w``, `w` C-contiguous), transposed (``columns``:
``(w^T @ a^T)^T``, `w^T` C-contiguous, the result copied back to C order so that nothing
downstream sees another layout; a block of rows at a time, so that a tall product's scratch is
not a second result), or as two products over the halves of w's columns, each written
straight into its half of the result (``halves``: some of OpenBLAS's kernels take a product of
at most 10^6 multiply-adds by a small-matrix path that does not repack the weight, and a half
may fall under that where the whole does not). Which is fastest depends on the CPU and on the
shapes, the winner changing from one shape to the next on one machine, so each shape is timed
(`Measured`).

Where numpy's own BLAS is found and a second core is there, a loop may instead run all its
products on two cores (`on_two_cores`, `_two_core`: each product cut into pieces that this
thread and a helper thread take in turn; OpenBLAS keeps a product under 10^6 multiply-adds on
one core). That is a loop's choice, made a run at a time by the driver
(`set_products_on_two_cores`), not a product's: see include/cyloop/two_core.h for why.

The contiguous copy a candidate needs (``w`` transposed, its halves, or a transposed view made
contiguous) is made once per weight and kept while the same read-only array, or a feed of the
same values, comes back (`_Remembered`); it is what the kernel keeps between calls, and only for
the last weight it saw (from 64 KiB up in a
mapping of its own, given back when a losing formulation lets go of it: `_aligned`). It starts
on a 64-byte boundary: OpenBLAS's small-matrix kernels read the weight with vector loads, and
at a 16-byte offset (where a large numpy allocation starts) every 64-byte load spans two cache
lines, which products repeated on a weight held in L1 pay for every time (the other operands'
alignment made no difference).

A weight used as it is is not copied to align it. The frontends read a model's weights
aligned already; what else comes here read-only is a feed or a value the outer graph computes,
a new array every run, whose copy would be made again every run and held through it, for a
gain within noise: inside a loop body, where the weight comes back from L2, aligning it gained a
step too little to tell from noise where it was measured.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable

import numpy as np

from ..abilities import declare
from ..tuning import COLUMNS_SCRATCH
from . import _two_core, blas
from .aligned import aligned, owns_memory
from .measured import Measured, timed_now
from .native import native_off

__all__ = ["Prepared", "PreparedPair", "bit_view_type", "blas_candidate", "blas_cores",
           "blas_status", "bound_blas_threads", "constant_holder", "helper_candidate",
           "helper_runs", "is_constant", "matmul", "matmul_plus", "narrowed", "no_choice",
           "on_two_cores", "plus", "product_candidates", "products_decided",
           "products_on_two_cores", "products_split", "release_blas_threads", "rows_apart",
           "rows_plus", "set_products_on_two_cores", "splits_now", "two_cores_here",
           "weight_product"]

# Products the helper thread took pieces of, since the process began (`_two_core`).
products_split = _two_core.products_split



class _Remembered:
    """What a `Prepared` or `PreparedPair` derived from its last read-only operands, and whether
    it still stands for the operands of a call.

    The same read-only arrays coming back stand for the same values (nothing writes a read-only
    array while the engine holds it), and so does the same read-only view made again of a
    read-only array that owns its memory (a layer's weights of direction d, ``w[d]``, each call:
    `_constant_view`). A weight fed to the model is another array every run (the
    engine views the caller's array anew, read-only), though its values rarely change: from the
    second time such operands come, a copy of their values is kept beside what was derived from
    them, and later operands of the same bits (compared in full: a caller may have changed their
    array in place) take it over without deriving again. Operands found changed once are taken to
    change (a weight updated every run, or sliced from an input per iteration): nothing is copied
    or compared for them again."""

    def __init__(self):
        # (weak references to the operands, the derived value, copies of the operands' values
        # or None, the operands' `_constant_view`s), replaced whole so that a thread reads one
        # consistent tuple
        self.last: tuple = ((), None, None, ())
        self.changing = False

    def recall(self, operands: tuple):
        """The derived value standing for `operands` (read-only arrays), or None."""
        operands = tuple(map(_whole, operands))
        refs, derived, values, views = self.last
        if derived is None or len(refs) != len(operands):
            return None
        if all(ref() is x for ref, x in zip(refs, operands)):
            return derived
        if all(view is not None and view == _constant_view(x) for view, x in zip(views, operands)):
            # (these views, not the ones kept, are met next: a row of a value computed once a
            # run is the same view each iteration of the run)
            self.last = (tuple(weakref.ref(x) for x in operands), derived, values, views)
            return derived
        if values is None:
            return None
        if all(_same_bits(v, x) for v, x in zip(values, operands)):
            self.last = (tuple(weakref.ref(x) for x in operands), derived, values, views)
            return derived
        self.changing = True
        return None

    def keep(self, operands: tuple, derived) -> None:
        """`derived` stands for `operands` from now on (None: nothing is remembered). It stands
        for other operands of the same values only if it is none of their memory (an aligned,
        contiguous view of a weight is used as it is: it would follow its operand's changes)."""
        operands = tuple(map(_whole, operands))
        refs = self.last[0]
        again = bool(refs) and not self.changing  # other operands came before these
        if again and all(bit_view_type(x.dtype) is not None for x in operands) \
                and not any(np.may_share_memory(d, x) for d in _arrays(derived)
                            for x in operands):
            values = tuple(np.array(x, copy=True) for x in operands)
        else:
            values = None
        self.last = (tuple(weakref.ref(x) for x in operands), derived, values,
                     tuple(map(_constant_view, operands)))

    def forget(self) -> None:
        self.last = ((), None, None, ())


class _Owner:
    """A weak reference to the array owning a view's memory that compares by identity (a view's
    `_constant_view` holds one, so that it neither keeps the array alive nor compares arrays
    element by element)."""

    __slots__ = ("ref",)

    def __init__(self, owner: np.ndarray):
        self.ref = weakref.ref(owner)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Owner) and self.ref() is not None and self.ref() is other.ref()

    __hash__ = None


def constant_holder(a: np.ndarray):
    """The array holding `a`'s memory (or the immutable bytes object it lies in) where nobody
    writes it: every array from `a` down to the one holding its memory (`owns_memory`: a
    model's constants, the engine's aligned copies) is read-only, or the chain ends in bytes
    (onnx's initializers); else None (a caller's array may change through a writeable base)."""
    owner = a
    while True:
        if owner.flags.writeable:
            return None
        if owns_memory(owner):
            return owner
        base = owner.base
        if isinstance(base, bytes):
            return owner
        if not isinstance(base, np.ndarray):
            return None
        owner = base


def is_constant(a) -> bool:
    """Whether `a` is an array whose values nobody changes while it lives (`constant_holder`)."""
    return isinstance(a, np.ndarray) and constant_holder(a) is not None


def _constant_view(a: np.ndarray):
    """What a read-only view `a` of a constant (`constant_holder`) stands for: (the array holding
    its memory, the address it starts at, its shape, strides and dtype), so that the same view
    made again stands for the same values; None for anything else."""
    if a.base is None:
        return None
    owner = constant_holder(a)
    if owner is None:
        return None
    return (_Owner(owner), a.__array_interface__["data"][0], a.shape, a.strides, a.dtype)


def _whole(a: np.ndarray) -> np.ndarray:
    """The read-only array `a` is a read-only view of all of, if it is one, else `a`: the row a
    loop binds each iteration of a value computed once a run is a new view of that value, and
    stands for it (what was derived from one such row is then recalled for the next by identity,
    not by comparing their values each call)."""
    base = a.base
    if isinstance(base, np.ndarray) and base.shape == a.shape and base.dtype == a.dtype \
            and not base.flags.writeable and not a.flags.writeable \
            and all(s == t for s, t, n in zip(a.strides, base.strides, a.shape) if n > 1) \
            and np.may_share_memory(a, base):
        return base
    return a


def rows_apart(state: np.ndarray) -> np.ndarray:
    """A [B, H] state as the steps kernels take it, rows of contiguous elements: a copy of one
    with another layout (the gate-major step hands on transposed views, and a trial's last step
    may be one), else itself."""
    return state if state.strides[-1] == state.itemsize else np.ascontiguousarray(state)


# Unsigned integers by size: two arrays are compared bit for bit through views of these (so that
# -0.0 and 0.0 differ, and a NaN equals itself).
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _arrays(derived):
    """The arrays in a derived value (an array, or nested tuples holding some)."""
    if isinstance(derived, np.ndarray):
        yield derived
    elif isinstance(derived, tuple):
        for item in derived:
            yield from _arrays(item)


def bit_view_type(dtype):
    """The unsigned type an array of `dtype` is compared through, or None (not comparable)."""
    return None if dtype.hasobject else _BITS.get(dtype.itemsize)


def _same_bits(kept: np.ndarray, x: np.ndarray) -> bool:
    """Whether `x` holds exactly the values `kept` (a copy made earlier) holds."""
    bits = bit_view_type(x.dtype)
    if bits is None or kept.shape != x.shape or kept.dtype != x.dtype:
        return False
    return bool(np.array_equal(kept.view(bits), x.view(bits)))


class Prepared:
    """``make(w)``, remembered for the last read-only `w` (`_Remembered`: the same array, or a
    feed of the same values, takes it again), laid out in one `aligned` copy unless it is `w`
    itself (see the module's docstring). The weight itself is held weakly: a caller's feed is not
    kept alive by a kernel. A writeable `w` gets ``make(w)`` afresh each call, not aligned (that
    would copy it each call)."""

    def __init__(self, make: Callable[[np.ndarray], np.ndarray]):
        self._make = make
        self._remembered = _Remembered()

    def __call__(self, w: np.ndarray) -> np.ndarray:
        last = self._remembered.last
        refs, derived = last[0], last[1]
        if refs and refs[0]() is w:  # (the common case, first: one weight, call after call)
            return w if derived is None else derived
        if not w.flags.writeable:
            derived = self._remembered.recall((w,))
            if derived is not None:
                return derived
        derived = self._make(w)
        if w.flags.writeable:
            return derived
        if derived is w:  # w itself: nothing to remember but w
            self._remembered.last = ((weakref.ref(w),), None, None, ())
            return w
        derived = aligned(derived)
        self._remembered.keep((w,), derived)
        return derived

    def forget(self) -> None:
        """Let go of the derived array (made again if asked for)."""
        self._remembered.forget()

    def remembers(self, w: np.ndarray | None = None) -> bool:
        """Whether it holds what it made of a weight (of the array `w`, if given)."""
        refs = self._remembered.last[0]
        return bool(refs) and (w is None or refs[0]() is w)


class PreparedPair:
    """``make(w, b)`` of two arrays, `aligned` and remembered for the last pair of read-only
    ones (as `Prepared`: held weakly, derived once while the same two, or two of the same
    values, come back)."""

    def __init__(self, make: Callable[[np.ndarray, np.ndarray], np.ndarray]):
        self._make = make
        self._remembered = _Remembered()

    def __call__(self, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        last = self._remembered.last
        refs = last[0]
        if refs and refs[0]() is w and refs[1]() is b:  # (the common case, first)
            return last[1]
        read_only = not (w.flags.writeable or b.flags.writeable)
        if read_only:
            derived = self._remembered.recall((w, b))
            if derived is not None:
                return derived
        derived = self._make(w, b)
        if read_only:
            derived = aligned(derived)
            self._remembered.keep((w, b), derived)
        return derived


def product_key(a, w, *_):
    """The trial key of ``a @ w``: the shapes, with a's rows past 16 in power-of-two classes (a
    hoisted product's chunks come in many row counts, alike in what suits them: a trial each
    would keep half their calls on the slower candidate for longer). Operands after the two (a
    destination, an addend) are no part of it."""
    m, k = a.shape
    return (m if m <= 16 else 1 << (m - 1).bit_length(), k), w.shape, a.dtype.char


def product_label(transposed):
    def label(key):
        (m, k), w_shape, char = key
        rows = m if m <= 16 else f"{m // 2 + 1}..{m}"
        return f"[{rows},{k}] @ [{','.join(map(str, w_shape))}]{'^T' if transposed else ''} " \
               f"{np.dtype(char).name}"

    return label


def _narrow_product(a, b, out):
    """a @ b of ml_dtypes' narrow floats (bfloat16, float8): numpy computes their product in
    float32 and returns float32; MatMul returns its operands' type, rounded from that."""
    result = np.matmul(a, b).astype(a.dtype)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _itself(w: np.ndarray) -> np.ndarray:
    return w


def _halves(rows: np.ndarray) -> tuple:
    """A [K, N] weight as the operands of `halves`: (its column halves stacked [2, K, N/2],
    None, None) for an even N, else (None, the first N//2 + 1 columns, the rest); views."""
    k, n = rows.shape
    if n % 2 == 0:
        return rows.reshape(k, 2, n // 2).swapaxes(0, 1), None, None
    split = n // 2 + 1
    return None, rows[:, :split], rows[:, split:]


_bound: bool | None = None  # whether numpy's own BLAS is bound to `_two_core` (None: not tried)
_blas_status: str | None = None  # why it is not, where it is not


def _blas_bound() -> bool:
    """Whether numpy's own BLAS is found (`blas`), bound to `_two_core` and checked (this binds
    it, the first time). Its entry points are read from a library numpy bundles, not from numpy's
    API: a product of each float type through them must agree with np.matmul, else they are
    unbound and every product stays numpy's."""
    global _bound, _blas_status
    if _bound is None:
        found = None if "blas" in native_off() else blas.entries()
        if found is None:
            _blas_status = ("turned off (CYLOOP_NATIVE_OFF)" if "blas" in native_off() else
                            "numpy bundles no OpenBLAS whose entry points say their width")
        else:
            _two_core.bind(found.sgemm, found.dgemm, found.threads)
            _bind_thread_setter(found.set_threads)
            _blas_status = _product_disagrees()
            if _blas_status is not None:
                _two_core.bind(0, 0, 0)
        _bound = _blas_status is None
    return _bound


# The operands of `_product_disagrees`: distinct odd integers, signed, none of them zero (so no
# product is a signed zero), whose products and sums of seven are exact in float32 (under 2^24),
# so that every correct product computes them bit for bit. (Made from lists: a fresh process's
# first np.sin, np.cos and np.allclose-like test cost several times the products; nor
# numpy.random, whose import would slow a load.)
_LEFT = [2 * (i * 37 % 71) - 71 for i in range(70)]  # [2, 5, 7]
_RIGHT = [2 * (i * 17 % 23) - 23 for i in range(21)]  # [7, 3]


def _product_disagrees() -> str | None:
    """Why products through the bound BLAS cannot be used (one of a float type differs from
    np.matmul's, on operands both compute exactly), or None."""
    for dtype in (np.float32, np.float64):
        a = np.array(_LEFT, dtype).reshape(2, 5, 7)
        b = np.array(_RIGHT, dtype).reshape(7, 3)
        got = _two_core.multiply(a, b, None, False)
        if got is not None and got.tobytes() != np.matmul(a, b).tobytes():
            return f"a {np.dtype(dtype)} product through numpy's bundled BLAS disagrees with matmul"
    return None


def blas_status() -> str | None:
    """Why matrix products never call numpy's bundled BLAS directly here (a sentence), or None
    where they may (binding it, the first time)."""
    _blas_bound()
    return _blas_status


def two_cores_here() -> bool:
    """Whether products may run on two cores here (`_two_core`): numpy's own BLAS is found and
    the process may use a second core now. Binds BLAS's entry points the first time, on one
    core too: a recurrent step's one call (accel/_gate_passes.pyx) makes its products through
    them wherever it runs, and declines where they are not bound."""
    bound = _blas_bound()
    return bool(_two_core.HELPER) and blas.spare_core() and bound


def helper_runs() -> bool:
    """Whether a product on two cores gets the helper's help now: `two_cores_here`, and numpy's
    BLAS may use two threads or more (OPENBLAS_NUM_THREADS=1 or threadpoolctl's limits hold it
    to one, and then every piece runs on its caller: include/cyloop/two_core.h)."""
    return two_cores_here() and not 0 <= _two_core.blas_threads() < 2


# How many cores a product runs on. numpy's OpenBLAS sizes its thread pool when it loads, from
# the affinity the process has then, and keeps it: a process narrowed afterwards (`taskset -a
# -p`, a cpuset, a worker pinning itself) keeps all of BLAS's threads, more than its cores, and
# a large product then runs several times slower than on one thread (OpenBLAS's threads wait by
# spinning). So while cyloop runs a model, BLAS's thread count is held to the cores the process
# may use (`bound_blas_threads`), and given back when no run is under way.

def blas_cores() -> int:
    """The cores a large product through numpy's BLAS runs on in a run here: BLAS's thread
    count, bounded by the cores the process may use; 0 where it is not known (numpy's BLAS is
    not the bundled OpenBLAS, or is off)."""
    threads = _two_core.blas_threads() if _blas_bound() else -1
    return min(threads, blas.cores_available()) if threads > 0 else 0


def blas_candidate(cores: int | None = None) -> str:
    """The name of the candidate that leaves a loop's products to numpy (each in its own
    measured formulation), by the cores BLAS's threads take for a large one (`blas_cores`, or
    `cores`; a product under OpenBLAS's threading threshold runs on one)."""
    cores = blas_cores() if cores is None else cores
    if cores == 1:
        return "on one core"
    if cores < 1:
        return "on numpy's BLAS (its own threads)"
    return f"on up to {cores} cores (BLAS's own threads)"


def helper_candidate(helped: bool | None = None) -> str:
    """The name of the candidate that runs a loop's products in pieces on this thread and the
    helper (`on_two_cores`): on two cores where the helper runs (`helper_runs`, or `helped`),
    else on one (BLAS held to one thread: every piece runs on the caller)."""
    helped = helper_runs() if helped is None else helped
    return "on two cores (this thread and a helper)" if helped else "in pieces on one core"


def product_candidates() -> dict[str, bool] | None:
    """Where a loop's (or a layer's) products may run here: each candidate, named by the cores
    it takes, -> whether it runs them in pieces with the helper (`set_products_on_two_cores`);
    the helper's first, the default. None where there is no choice (`two_cores_here`)."""
    if not two_cores_here():
        return None
    return {helper_candidate(): True, blas_candidate(): False}


def no_choice() -> tuple[str, str]:
    """Where products run where there is no choice (`product_candidates` is None), and why."""
    if not _two_core.HELPER:
        why = "no POSIX threads here"
    elif not blas.spare_core():
        why = "the process may use one core"
    else:
        why = "numpy's bundled BLAS is not found or is off"
    return blas_candidate(), why


_set_threads: Callable[[int], None] | None = None  # OpenBLAS's thread count setter, once bound


def _bind_thread_setter(address: int) -> None:
    global _set_threads
    import ctypes  # (only where numpy's BLAS is bound)

    _set_threads = ctypes.CFUNCTYPE(None, ctypes.c_int)(address) if address else None


_CPUS = os.cpu_count() or 1
_hold = threading.Lock()
_holding = 0  # runs under way while BLAS's threads are held to the process's cores
_held_from = 0  # BLAS's thread count before they were held (0: not held)


def narrowed() -> bool:
    """Whether the process may use fewer cores than the machine has (BLAS may then have more
    threads than its cores: `bound_blas_threads`). A run's start asks at most every
    `tuning.AFFINITY_EVERY` seconds (engine/_core.pyx)."""
    return blas.cores_available() < _CPUS


def bound_blas_threads() -> bool:
    """Holds numpy's BLAS to the cores the process may use, where it has more threads than
    that, until `release_blas_threads` (a run's start and end, where the process is
    `narrowed`: engine/_core.pyx). Returns whether it holds (the caller then releases it). Runs
    under way on several threads share one hold: the first sets it, the last gives BLAS its
    thread count back."""
    global _holding, _held_from
    with _hold:
        if _holding:
            _holding += 1
            return True
        cores = blas.cores_available()
        if not _blas_bound() or _set_threads is None:
            return False
        threads = _two_core.blas_threads()
        if threads <= cores:
            return False
        _set_threads(cores)
        _holding, _held_from = 1, threads
        return True


def release_blas_threads() -> None:
    """Ends one `bound_blas_threads` that returned True."""
    global _holding, _held_from
    with _hold:
        _holding -= 1
        if _holding == 0 and _held_from:
            _set_threads(_held_from)
            _held_from = 0


# Where the matrix products of the loop running on this thread go: in pieces with the helper
# (`on_two_cores`) while ``_mode.on``, else to numpy (BLAS's own threads for a large product, as
# many as the process's cores allow). The loop driver sets it a run at a time
# (`set_products_on_two_cores`): the two cannot be mixed in a run (see
# include/cyloop/two_core.h), so which runs a loop faster is measured a run at a time.
_mode = threading.local()


def set_products_on_two_cores(on: bool | None) -> bool | None:
    """Run this thread's matrix products on two cores (or not) from now on; returns the setting
    it replaces (None: no loop decided it; they run on one core)."""
    previous = getattr(_mode, "on", None)
    _mode.on = on
    return previous


def products_on_two_cores() -> bool:
    """Whether this thread's matrix products run on two cores (see `set_products_on_two_cores`)."""
    return bool(getattr(_mode, "on", False))


def products_decided() -> bool:
    """Whether a loop running on this thread has decided where its products run (a kernel
    outside loops finds it undecided)."""
    return getattr(_mode, "on", None) is not None


def on_two_cores(a, w, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, w, out=out)``: for arrays a [M, K] or [P, M, K] and w [K, N] or
    [P, K, N] on two cores where `_two_core` takes the operands (see `two_cores_here`), else
    numpy's."""
    if not _stackable(a, w):
        return np.matmul(a, w, out=out)
    return _on_two_cores(a, w, out)


def _on_two_cores(a: np.ndarray, w: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """`on_two_cores` of two arrays known to be 2-D or 3-D (the hot path: no checks twice)."""
    if out is None:
        result = _two_core.multiply(a, w, None, True)
        return np.matmul(a, w) if result is None else result
    if _two_core.product(a, w, out) == _two_core.UNFIT:
        return np.matmul(a, w, out=out)
    return out


def splits_now(multiply_adds: int) -> bool:
    """Whether a product of this many multiply-adds runs on two cores now: this thread's
    products run there and it is large enough to cut in pieces (see `_splits`)."""
    return bool(getattr(_mode, "on", False)) and multiply_adds >= _two_core.SMALLEST


def _stackable(a, b) -> bool:
    """Whether a and b are arrays of 2 or 3 dimensions (what `_two_core` multiplies)."""
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) \
        and 2 <= a.ndim <= 3 and 2 <= b.ndim <= 3


def _splits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a @ b, of 2-D or 3-D arrays, is large enough to cut in pieces for two cores
    (`_two_core.SMALLEST`): a smaller one runs as it would on one core."""
    return a.size * b.shape[-1] * (b.shape[0] if b.ndim == 3 and a.ndim == 2 else 1) \
        >= _two_core.SMALLEST


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b, out=out)``, on two cores while this thread's products run there and
    the product is large enough to split (a kernel's products go through this, or
    `weight_product`, so that the loop's choice reaches them; such a kernel declares it:
    `Abilities.products`)."""
    if getattr(_mode, "on", False) and _stackable(a, b) and _splits(a, b):
        return _on_two_cores(a, b, out)
    return np.matmul(a, b, out=out)


def matmul_plus(a: np.ndarray, b: np.ndarray, addend: np.ndarray) -> np.ndarray:
    """``a @ b + addend`` as a fresh array: BLAS adds the product to a copy of the addend
    (`_two_core.product`), so that no pass over the result adds it afterwards, on two cores under
    the same conditions as `matmul`, else on this thread. Where `_two_core` does not take the
    operands (other types, an addend widening the product), numpy's product and then the add,
    in place where the addend broadcasts to the product. A recurrent step's gates: the product
    of the state and the hoisted projection's row."""
    if _blas_bound():
        result = _two_core.multiply(a, b, addend, bool(getattr(_mode, "on", False)))
        if result is not None:
            return result
    return plus(matmul(a, b), addend)


def plus(product: np.ndarray, addend) -> np.ndarray:
    """``product + addend``, written over `product` (a fresh array of the caller's) where the
    addend broadcasts to it, else a new array (the addend widens it)."""
    try:
        return np.add(product, addend, out=product)
    except ValueError:  # (a non-broadcastable output: the sum is wider)
        return np.add(product, addend)


def rows_plus(x: np.ndarray, w: np.ndarray, addend: np.ndarray) -> np.ndarray:
    """``x @ w + addend`` for rows x [..., K] and w [K, N], as [..., N] (`matmul_plus`): the
    rows multiplied where they lie, a 3-D x whose matrices are strided apart (a chunk of an
    input sliced along axis 1) as a stack of products, where making them one matrix would copy
    them."""
    if x.ndim == 3 and not x.flags.c_contiguous:
        return matmul_plus(x, w, addend)
    result = matmul_plus(np.reshape(x, (-1, x.shape[-1])), w, addend)
    return result.reshape(x.shape[:-1] + result.shape[-1:])


def direct_product(a: np.ndarray, w: np.ndarray) -> bool:
    """Whether ``a @ w`` may call numpy's own BLAS directly (`_direct`) with the values
    ``np.matmul`` gives: 2-D float32 or float64 operands of one type, bound BLAS, and a product
    numpy itself makes by one gemm call, not by a matrix-vector one (two rows or more in `a`,
    two columns or more in `w`); the call checks the layouts."""
    return a.ndim == 2 and w.ndim == 2 and a.dtype == w.dtype \
        and a.dtype in (_FLOAT32, _FLOAT64) and a.shape[0] >= 2 and w.shape[1] >= 2 \
        and _blas_bound()


def _direct(a: np.ndarray, w: np.ndarray, out: np.ndarray | None) -> np.ndarray | None:
    """``np.matmul(a, w, out=out)`` of operands `direct_product` takes, as the one gemm call numpy
    makes for them (the same function of numpy's bundled BLAS, the same arguments: the same
    values), made here without numpy's dispatch around it (the most of a small product's time),
    on this thread; None where `_two_core` does not take the layouts (nothing is written then)."""
    if out is None:
        return _two_core.multiply(a, w, None, False)
    return None if _two_core.product(a, w, out, None, True) == _two_core.UNFIT else out


_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)


def weight_product(transposed: bool = False) -> Callable:
    """``product(a, w, out=None)`` = ``a @ w`` (``a @ w^T`` if `transposed`), in the measured
    formulation when both are 2-D of one dtype and `w` is read-only; plain ``np.matmul``
    otherwise. Its `measured` ability is the choice (the plan shows it, tune=False fixes it)."""
    # Each makes views; `Prepared` lays a read-only weight's out in one aligned copy.
    if transposed:
        as_rows = Prepared(lambda w: w.T)
        as_columns = Prepared(_itself)
        as_halves = Prepared(lambda w: _halves(w.T))
    else:
        as_rows = Prepared(_itself)
        as_columns = Prepared(lambda w: w.T)
        as_halves = Prepared(_halves)

    def rows(a, w, out):
        return np.matmul(a, as_rows(w), out=out)

    def columns(a, w, out):
        w_t = as_columns(w)
        m = a.shape[0]
        result = np.empty((m, w_t.shape[0]), a.dtype) if out is None else out
        # A block of a's rows at a time, so that the transposed product's scratch stays small
        # (a hoisted chunk's product would otherwise need a second buffer of the result's size).
        block = max(1, COLUMNS_SCRATCH // max(w_t.shape[0] * result.itemsize, 1))
        if m <= block:
            np.copyto(result, np.matmul(w_t, a.T).T)
            return result
        for start in range(0, m, block):
            np.copyto(result[start:start + block], np.matmul(w_t, a[start:start + block].T).T)
        return result

    def halves(a, w, out):
        stacked, left, right = as_halves(w)
        m, n = a.shape[0], (w.shape[0] if transposed else w.shape[1])
        # The halves are written in place: into `out` when a view of it can take them.
        whole = out if out is not None and out.flags.c_contiguous else np.empty((m, n), a.dtype)
        if stacked is not None:  # [2, K, N/2]: one batched call writes both halves
            np.matmul(a, stacked, out=whole.reshape(m, 2, n // 2).swapaxes(0, 1))
        else:
            split = left.shape[1]
            np.matmul(a, left, out=whole[:, :split])
            np.matmul(a, right, out=whole[:, split:])
        if out is None or whole is out:
            return whole
        np.copyto(out, whole)
        return out

    prepared = {"rows": as_rows, "columns": as_columns, "halves": as_halves}

    def settled(in_use):
        """A formulation no shape uses any more lets go of its copy of the weight."""
        for name, weight in prepared.items():
            if name not in in_use:
                weight.forget()

    measured = Measured({"rows": rows, "columns": columns, "halves": halves}, key=product_key,
                        label=product_label(transposed), on_settled=settled)
    # The last call settled on `rows` (its key chosen so, or every key fixed so): (a's shape,
    # a's dtype, a weak reference to w, w as `rows` multiplies it, `measured`'s fixed candidate
    # then, whether `direct_product` takes such operands). A call of that shape and type on
    # that very weight goes straight to BLAS, with no key made and looked up: a loop body's
    # step makes one such call each iteration.
    last_rows = [None]

    def product(a, w, out=None):
        last = last_rows[0]
        if last is not None and last[2]() is w and a.shape == last[0] and a.dtype is last[1] \
                and not w.flags.writeable and measured._all is last[4] \
                and not getattr(_mode, "on", False):
            if last[5]:
                done = _direct(a, last[3], out)
                if done is not None:
                    return done
            return np.matmul(a, last[3], out=out)
        if a.dtype.kind == "V" or w.dtype.kind == "V":
            return _narrow_product(a, np.swapaxes(w, -1, -2) if transposed else w, out)
        if a.ndim == 2 and w.ndim == 2 and not w.flags.writeable and a.dtype == w.dtype:
            if getattr(_mode, "on", False) and _splits(a, w):  # w as it is (w^T laid out)
                return _on_two_cores(a, as_rows(w), out)
            fixed = measured.fixed
            chosen = fixed if fixed is not None else measured._chosen.get(product_key(a, w))
            if chosen is None:  # (on trial: `measured` times it; a one-off runs the default)
                return measured(a, w, out) if timed_now() else rows(a, w, out)
            if chosen == "rows":
                derived = as_rows(w)
                last_rows[0] = (a.shape, a.dtype, weakref.ref(w), derived, measured._all,
                                direct_product(a, derived))
                return np.matmul(a, derived, out=out)
            return measured.candidates[chosen](a, w, out)
        return matmul(a, np.swapaxes(w, -1, -2) if transposed else w, out=out)

    def direct_weight(w, rows, dtype):
        """The weight as `rows` multiplies it where ``product(a, w)`` of `rows` rows of `dtype`
        would take the way straight to BLAS by `_direct` (the last call's: see `last_rows`),
        else None: for a caller that makes `a` and the product in one call of its own (the
        same gemm call, `_two_core.ones_product`)."""
        last = last_rows[0]
        if last is not None and last[5] and last[2]() is w and last[0][0] == rows \
                and last[1] is dtype and measured._all is last[4] and not w.flags.writeable \
                and not getattr(_mode, "on", False):
            return last[3]
        return None

    product.prepared = prepared  # each formulation's `Prepared` weight (tests look at them)
    product.direct_weight = direct_weight
    return declare(product, measured=measured, products=True)
