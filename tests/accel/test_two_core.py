"""Products on two cores (`_two_core`, include/cyloop/two_core.h): every product equals numpy's,
whatever its pieces, layouts and dtype; operands it does not take are left to numpy untouched;
the helper thread takes pieces, is woken off its caller's CPU, stays out of the way where BLAS is
held to one thread, starts again in a forked child, and is shared safely by threads."""

import multiprocessing
import os
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from cyloop.accel import _two_core, blas
from cyloop.accel.gemm import helper_runs, on_two_cores, two_cores_here

pytestmark = pytest.mark.skipif(not two_cores_here(), reason="numpy's own BLAS is not found "
                                "here, or the process has one core: products stay numpy's")
# Tests of the helper's own work: where BLAS is held to one thread, every piece runs on its
# caller (the values are checked by the tests without this mark).
needs_helper = pytest.mark.skipif(not helper_runs(), reason="numpy's BLAS is held to one thread "
                                  "(OPENBLAS_NUM_THREADS=1): the helper takes no pieces")


def _tolerance(dtype):
    return {"rtol": 1e-5, "atol": 1e-4} if dtype == np.float32 else {"rtol": 1e-12,
                                                                      "atol": 1e-10}


def _wide(shape, dtype, rng, step):
    """An array of `shape` whose rows are `step` times as wide as needed (a slot of a wider
    array, as the engine hands out), the columns between them NaN."""
    base = np.full((*shape[:-1], shape[-1] * step), np.nan, dtype)
    view = base[..., :shape[-1]]
    view[...] = rng.standard_normal(shape)
    return view


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 70), k=st.integers(1, 300), n=st.integers(1, 600),
       count=st.sampled_from([None, 1, 3]), shared=st.sampled_from(["a", "b", "none"]),
       dtype=st.sampled_from([np.float32, np.float64]), step=st.sampled_from([1, 2]),
       seed=st.integers(0, 2**16))
def test_every_product_is_numpys(m, k, n, count, shared, dtype, step, seed):
    """2-D products and stacks of them (one operand shared by the stack, or neither), the
    operands and the result C-contiguous or rows of a wider array: the result is numpy's, and
    nothing beside the result's rows is written."""
    rng = np.random.default_rng(seed)
    a_shape = (m, k) if count is None or shared == "a" else (count, m, k)
    b_shape = (k, n) if count is None or shared == "b" else (count, k, n)
    a = _wide(a_shape, dtype, rng, step)
    b = _wide(b_shape, dtype, rng, step)
    expected = np.matmul(a, b)
    out = np.full((*expected.shape[:-1], n * 2), np.nan, dtype)
    helped = _two_core.product(a, b, out[..., :n])
    assert helped >= _two_core.ALONE
    np.testing.assert_allclose(out[..., :n], expected, **_tolerance(dtype))
    assert np.isnan(out[..., n:]).all()


def _addend(shape, dtype, rng, how):
    """An addend of `shape` (the product's): C-contiguous, strided (the rows of a transposed
    wider array, as a hoisted projection's row is read in gate blocks), reversed, or
    broadcasting from one row or one column."""
    if how == "contiguous":
        return rng.standard_normal(shape).astype(dtype)
    if how == "transposed":
        return np.swapaxes(rng.standard_normal(shape[:-2] + shape[:-3:-1]).astype(dtype), -1, -2)
    if how == "reversed":
        return rng.standard_normal(shape).astype(dtype)[..., ::-1, ::-1]
    if how == "row":
        return rng.standard_normal(shape[-1]).astype(dtype)
    return rng.standard_normal(shape[:-1] + (1,)).astype(dtype)  # a column


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 40), k=st.integers(1, 200), n=st.integers(1, 300),
       count=st.sampled_from([None, 1, 4]),
       how=st.sampled_from(["contiguous", "transposed", "reversed", "row", "column"]),
       dtype=st.sampled_from([np.float32, np.float64]), alone=st.booleans(),
       seed=st.integers(0, 2**16))
def test_a_product_plus_an_addend_is_numpys(m, k, n, count, how, dtype, alone, seed):
    """``addend + a @ b`` for addends of any strides (broadcast ones too), on two cores or
    alone, into a result that is a slot of a wider array: numpy's sum of numpy's product, and
    nothing beside the result's rows written; `multiply` gives the same in a fresh array."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k) if count is None else (count, m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    shape = (m, n) if count is None else (count, m, n)
    addend = _addend(shape, dtype, rng, how)
    expected = np.matmul(a, b) + addend
    out = np.full((*shape[:-1], n * 2), np.nan, dtype)
    assert _two_core.product(a, b, out[..., :n], addend, alone) >= _two_core.ALONE
    np.testing.assert_allclose(out[..., :n], expected, **_tolerance(dtype))
    assert np.isnan(out[..., n:]).all()
    fresh = _two_core.multiply(a, b, addend, not alone)
    assert fresh.shape == shape and fresh.flags.c_contiguous
    np.testing.assert_allclose(fresh, expected, **_tolerance(dtype))


def test_alone_keeps_the_product_on_its_caller(rng):
    """`alone`: every piece on the calling thread, and the product not counted as split."""
    a, b, out = _large(rng)
    helped, split = _two_core.pieces_helped(), _two_core.products_split()
    for _ in range(50):
        assert _two_core.product(a, b, out, None, True) == _two_core.ALONE
        assert _two_core.multiply(a, b, out[0], False) is not None
    assert _two_core.pieces_helped() == helped and _two_core.products_split() == split
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-4)


def _unfit_addends(rng):
    f = np.float32
    a, b = rng.standard_normal((16, 64)).astype(f), rng.standard_normal((64, 32)).astype(f)
    out = np.zeros((16, 64), f)
    unaligned = np.zeros(16 * 32 * 4 + 1, np.uint8)[1:].view(f).reshape(16, 32)
    assert not unaligned.flags.aligned
    return a, b, out, {
        "another dtype": rng.standard_normal((16, 32)),
        "byte-swapped": rng.standard_normal((16, 32)).astype(">f4"),
        "unaligned": unaligned,
        "widening": rng.standard_normal((2, 16, 32)).astype(f),
        "shape disagrees": rng.standard_normal((16, 31)).astype(f),
        "over the result": out[:, 16:48],
        "a list": [[1.0] * 32] * 16,
    }


@pytest.mark.parametrize("case", list(_unfit_addends(np.random.default_rng(0))[3]))
def test_addends_it_does_not_take_are_refused(case, rng):
    """An addend of another type or byte order, an unaligned one, one that widens the product
    or does not broadcast to it, or one over the result: nothing written, and `multiply` gives
    None."""
    a, b, out, cases = _unfit_addends(rng)
    addend = cases[case]
    target = out[:, :32]
    before = out.copy()
    assert _two_core.product(a, b, target, addend) == _two_core.UNFIT
    np.testing.assert_array_equal(out, before)
    if case == "over the result":  # (a fresh result is apart from it)
        np.testing.assert_allclose(_two_core.multiply(a, b, addend), a @ b + addend, rtol=1e-5,
                                   atol=1e-4)
    else:
        assert _two_core.multiply(a, b, addend) is None


def _unfit_cases(rng):
    f = np.float32
    a, b = rng.standard_normal((16, 64)).astype(f), rng.standard_normal((64, 32)).astype(f)
    overlapping = np.zeros((64, 64), f)
    read_only = np.empty((16, 32), f)
    read_only.flags.writeable = False
    return {
        "int": (a.astype(np.int32), b.astype(np.int32), np.empty((16, 32), np.int32)),
        "mixed": (a, b.astype(np.float64), np.empty((16, 32), f)),
        "half": (a.astype(np.float16), b.astype(np.float16), np.empty((16, 32), np.float16)),
        "strided columns": (np.repeat(a, 2, axis=1)[:, ::2], b, np.empty((16, 32), f)),
        "reversed rows": (a[::-1], b, np.empty((16, 32), f)),
        "broadcast rows": (np.broadcast_to(a[:1], (16, 64)), b, np.empty((16, 32), f)),
        "out over a": (overlapping[:16], overlapping[:, :32], overlapping[:16, 32:]),
        "read-only out": (a, b, read_only),
        "1-D": (a[0], b, np.empty(32, f)),
        "shapes disagree": (a, b[:32], np.empty((16, 32), f)),
        "empty": (a[:0], b, np.empty((0, 32), f)),
        "a list": (a.tolist(), b, np.empty((16, 32), f)),
        "byte-swapped": (a.astype(">f4"), b.astype(">f4"), np.empty((16, 32), ">f4")),
        "one byte-swapped": (a, b.astype(">f4"), np.empty((16, 32), f)),
        "batches over each other": (a, np.stack([b, b]), np.lib.stride_tricks.as_strided(
            np.empty((16, 32), f), (2, 16, 32), (0, 128, 4))),
        "k too long": (rng.standard_normal((16, 5000)).astype(f),
                       rng.standard_normal((5000, 32)).astype(f), np.empty((16, 32), f)),
    }


@pytest.mark.parametrize("case", list(_unfit_cases(np.random.default_rng(0))))
def test_operands_it_does_not_take_are_left_to_numpy(case, rng):
    """Another dtype, a layout BLAS cannot read, a result over an operand, or one it may not
    write: nothing is written, and `on_two_cores` hands the product to numpy."""
    a, b, out = _unfit_cases(rng)[case]
    before = out.copy()
    assert _two_core.product(a, b, out) == _two_core.UNFIT
    np.testing.assert_array_equal(out, before)
    if case in ("read-only out", "shapes disagree", "a list", "1-D", "batches over each other"):
        return  # (numpy refuses these too, or takes them without `out`)
    expected = np.matmul(np.array(a), np.array(b))
    got = on_two_cores(a, b, None if case == "out over a" else out)
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)


def _large(rng, dtype=np.float32):
    a = rng.standard_normal((32, 256)).astype(dtype)
    b = rng.standard_normal((256, 256)).astype(dtype)
    return a, b, np.empty((32, 256), dtype)


@needs_helper
def test_the_helper_takes_pieces_of_a_large_product(rng):
    """Products called one after another (as a loop calls them) find the helper awake: it runs
    pieces of them. (For a while after numpy ran a product on BLAS's own threads, those threads
    spin on the helper's core and it seldom runs: products keep coming until it has helped with
    three.) A small one runs as one piece, on its caller."""
    a, b, out = _large(rng)
    helped, deadline = 0, time.monotonic() + 10
    while helped < 3 and time.monotonic() < deadline:
        helped += _two_core.product(a, b, out) > 0
    assert helped == 3
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-4)
    split = _two_core.products_split()
    small = rng.standard_normal((4, 8)).astype(np.float32)
    assert _two_core.product(small, small.T.copy(), np.empty((4, 4), np.float32)) == \
        _two_core.ALONE
    assert _two_core.products_split() == split


@needs_helper
def test_a_product_longer_than_the_helpers_spin_is_helped(rng):
    """A product that runs longer than the helper spins idle (1 ms) still gets its help: the
    helper does not go to sleep while a product is under way, and joins the one that woke it
    when many of its pieces are left."""
    a = rng.standard_normal((1024, 256)).astype(np.float32)
    b = rng.standard_normal((256, 1024)).astype(np.float32)
    out = np.empty((1024, 1024), np.float32)
    helped, deadline = 0, time.monotonic() + 10  # (see the test above)
    while not helped and time.monotonic() < deadline:
        time.sleep(0.005)  # the helper asleep: this product wakes it
        helped = _two_core.product(a, b, out)
    assert helped > 0
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-3)


def _affinities() -> dict[int, set[int]]:
    """Every thread of this process: its CPU affinity."""
    return {int(tid): os.sched_getaffinity(int(tid)) for tid in os.listdir("/proc/self/task")}


def _affinities_once_the_helper_ran(a, b, out) -> dict[int, set[int]]:
    """`_affinities`, once a product's piece ran on the helper: the helper takes its whole
    affinity back as it wakes, before it takes a piece, so no earlier wake has it narrowed then
    (a snapshot taken while it had not run yet saw it apart: {0} before, {0, 1} after)."""
    deadline = time.monotonic() + 10
    while not _two_core.product(a, b, out) and time.monotonic() < deadline:
        pass  # (no pause: the helper, once woken, spins and takes a piece of the next)
    return _affinities()


@needs_helper
@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="Linux with two CPUs or more: the helper is woken apart only there")
def test_a_product_wakes_the_helper_off_its_callers_cpu_and_leaves_affinities_be(rng):
    """A product that finds the helper asleep takes its own CPU out of the helper's affinity
    (Linux would wake the helper on the caller's CPU, behind it); the helper, running, takes its
    whole affinity back: every thread's affinity is then what it was."""
    a, b, out = _large(rng)
    before, woken = _affinities_once_the_helper_ran(a, b, out), _two_core.woken_apart()
    deadline = time.monotonic() + 10
    while _two_core.woken_apart() < woken + 3 and time.monotonic() < deadline:
        time.sleep(0.005)  # the helper asleep: this product wakes it
        _two_core.product(a, b, out)
    assert _two_core.woken_apart() >= woken + 3

    def changed():  # (threads of the process that ended meanwhile aside)
        now = _affinities()
        return {tid: (before[tid], now[tid]) for tid in before
                if tid in now and now[tid] != before[tid]}

    deadline = time.monotonic() + 10
    while changed() and time.monotonic() < deadline:  # (the last woken may not have run yet)
        time.sleep(0.001)
    assert changed() == {}
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-4)


def _pinned_child(queue):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    rng = np.random.default_rng(2)
    a, b, out = _large(rng)
    woken = _two_core.woken_apart()
    for _ in range(5):
        time.sleep(0.005)
        _two_core.product(a, b, out)
    queue.put((bool(np.allclose(out, a @ b, rtol=1e-5, atol=1e-4)),
               _two_core.woken_apart() - woken, set(map(len, _affinities().values()))))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:"
                            "DeprecationWarning")  # (what the test is about: fork() with threads)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CPU affinity is Linux's")
def test_a_process_held_to_one_cpu_keeps_its_helper_there(rng):
    """Where the caller may run on one CPU only (its helper, started by it, likewise), no wake
    moves the helper: nothing is taken out of an affinity of one, and products are right."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_pinned_child, args=(queue,))
    child.start()
    right, woken, sizes = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0 and right
    assert woken == 0 and sizes == {1}


def test_matmul_in_two_core_mode_takes_any_operands_numpy_does(rng):
    """While products run on two cores, `matmul` hands what `_two_core` does not take (1-D,
    4-D, lists) to numpy."""
    from cyloop.accel.gemm import matmul, set_products_on_two_cores

    h, r = rng.standard_normal(256).astype(np.float32), \
        rng.standard_normal((256, 256)).astype(np.float32)
    stack = rng.standard_normal((2, 3, 64, 256)).astype(np.float32)
    previous = set_products_on_two_cores(True)
    try:
        for x, y in ((h, r), (r, h), (stack, r), (r.tolist(), r), (r, r)):
            np.testing.assert_allclose(matmul(x, y), np.matmul(x, y), rtol=1e-4, atol=1e-3)
    finally:
        set_products_on_two_cores(previous)


def test_blas_held_to_one_thread_keeps_products_on_their_caller(rng):
    """threadpoolctl (or OPENBLAS_NUM_THREADS=1) holding numpy's BLAS to one thread holds the
    products to their calling thread too."""
    a, b, out = _large(rng)
    with threadpool_limits(limits=1, user_api="blas"):
        assert {_two_core.product(a, b, out) for _ in range(50)} == {_two_core.ALONE}
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-4)


def _in_child(queue):
    rng = np.random.default_rng(1)
    a, b, out = _large(rng, np.float64)
    helped, deadline = 0, time.monotonic() + 10  # (see test_the_helper_takes_pieces...)
    while helped < 3 and time.monotonic() < deadline:
        helped += _two_core.product(a, b, out) > 0
    queue.put((bool(np.allclose(out, a @ b)), helped))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:"
                            "DeprecationWarning")  # (what the test is about: fork() with threads)
@needs_helper
def test_a_forked_child_has_a_helper_of_its_own(rng):
    """fork() copies only the forking thread: the child's first product starts a helper of its
    own (it would otherwise wait for pieces nobody takes), and its products are right."""
    a, b, out = _large(rng, np.float64)
    _two_core.product(a, b, out)  # the parent's helper runs
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    right, helped = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0 and right
    assert helped == 3


def test_threads_share_the_pair(rng):
    """Threads calling products at once: one holds the pair, the others run theirs alone; every
    result is right."""
    cases = [(rng.standard_normal((24, 200)).astype(np.float32),
              rng.standard_normal((200, 300)).astype(np.float32)) for _ in range(4)]
    results, errors = [None] * len(cases), []

    def work(k):
        try:
            a, b = cases[k]
            out = np.empty((24, 300), np.float32)
            for _ in range(200):
                _two_core.product(a, b, out)
            results[k] = out
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for (a, b), got in zip(cases, results):
        np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-4)


def test_numpys_blas_is_found_with_the_entry_points_it_names():
    """The entries found are the ones this numpy's bundled OpenBLAS exports (64-bit integers)."""
    found = blas.entries()
    assert found is not None and found.sgemm and found.dgemm and found.threads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("view", ["C", "swapped", "strided", "2-D", "2-D transposed"])
def test_rows_and_ones_are_the_rows_with_a_column_of_ones(dtype, view, rng):
    base = rng.standard_normal((4, 6, 10)).astype(dtype)
    x = {"C": base, "swapped": base.swapaxes(0, 1), "strided": base[:, ::2, 1::3],
         "2-D": base[1], "2-D transposed": base[2].T}[view]
    expected = np.concatenate([x, np.ones(x.shape[:-1] + (1,), dtype)], axis=-1)
    got = _two_core.rows_and_ones(x)
    assert got.flags.c_contiguous and got.dtype == dtype
    assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("case", ["1-D", "4-D", "int", "float16", "byte-swapped", "list"])
def test_rows_and_ones_leave_other_arrays_to_numpy(case):
    x = {"1-D": np.ones(3), "4-D": np.ones((2, 2, 2, 2)), "int": np.ones((2, 3), np.int64),
         "float16": np.ones((2, 3), np.float16), "byte-swapped": np.ones((2, 3), ">f8"),
         "list": [[1.0, 2.0]]}[case]
    assert _two_core.rows_and_ones(x) is None
