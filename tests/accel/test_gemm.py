"""Products with a weight in the measured orientation: every candidate equals np.matmul, the
prepared weight is made once per weight, and nothing is kept alive or written behind a caller's
back."""

import gc
import weakref

import numpy as np
import pytest

import cyloop
from cyloop.abilities import abilities_of
from cyloop.accel import gemm
from cyloop.accel.aligned import ALIGNMENT
from cyloop.accel.gemm import (
    Prepared,
    matmul_plus,
    rows_plus,
    set_products_on_two_cores,
    weight_product,
)
from cyloop.accel.measured import MAX_ROUNDS_FACTOR

from ..support.arrays import address, at_offset
from ..support.loops import rnn_loop_feeds, rnn_loop_model


def _read_only(a):
    a.flags.writeable = False
    return a


CANDIDATES = ["rows", "columns", "halves"]


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("candidate", CANDIDATES)
@pytest.mark.parametrize("out_layout", [None, "C", "strided"])
@pytest.mark.parametrize("n", [1, 7, 8])  # halves: uneven, as two products; even, as one
def test_every_candidate_is_the_plain_product(transposed, candidate, out_layout, n, rng):
    a = rng.standard_normal((5, 6)).astype(np.float32)
    w = _read_only(rng.standard_normal((n, 6) if transposed else (6, n)).astype(np.float32))
    expected = np.matmul(a, w.T if transposed else w)
    product = weight_product(transposed)
    abilities_of(product).measured.fix(candidate)
    # `out` as the engine hands it: none, a fresh buffer, or a slot of a wider array.
    out = {None: None, "C": np.empty((5, n), np.float32),
           "strided": np.full((5, 2 * n), np.nan, np.float32)[:, ::2]}[out_layout]
    for _ in range(2):  # the second call reads the prepared weight
        got = product(a, w, out=out)
        assert got.shape == (5, n)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        if out is None:
            assert got.flags.c_contiguous
        else:
            assert got is out
    if out_layout == "strided":
        assert np.isnan(out.base[:, 1::2]).all()  # nothing written beside the slot


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("out_layout", [None, "C", "strided"])
def test_the_transposed_formulation_of_a_tall_product_works_in_row_blocks(transposed, out_layout,
                                                                          rng, monkeypatch):
    """``columns`` computes (w^T a^T)^T a block of a's rows at a time, so its scratch stays
    within `COLUMNS_SCRATCH` however many rows a hoisted chunk has: the result agrees, and the
    call allocates no second buffer of the result's size."""
    import tracemalloc

    from cyloop.accel import gemm

    # (Small enough for OpenBLAS to stay on one thread: its worker threads can hang after
    # OpenVINO's ran in the same process, as they do when other tests ran first.)
    rows, k, n = 512, 4, 64
    monkeypatch.setattr(gemm, "COLUMNS_SCRATCH", 24 * n * 4)  # 24 rows a block: 22 blocks
    a = rng.standard_normal((rows, k)).astype(np.float32)
    w = _read_only(rng.standard_normal((n, k) if transposed else (k, n)).astype(np.float32))
    product = weight_product(transposed)
    abilities_of(product).measured.fix("columns")
    out = {None: None, "C": np.empty((rows, n), np.float32),
           "strided": np.full((rows, 2 * n), np.nan, np.float32)[:, ::2]}[out_layout]
    product(a, w, out=out)  # prepares the weight
    tracemalloc.start()
    try:
        got = product(a, w, out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(got, a @ (w.T if transposed else w), rtol=1e-5, atol=1e-5)
    result_bytes = rows * n * 4
    # The result itself (when no out= is given) and a block's scratch, far under a second result.
    assert peak < result_bytes * (out is None) + result_bytes // 4
    if out is not None:
        assert got is out
    if out_layout == "strided":
        assert np.isnan(out.base[:, 1::2]).all()


def test_the_orientation_is_measured_per_shape_and_other_operands_take_np_matmul(rng):
    product = weight_product()
    measured = abilities_of(product).measured
    measured.payback = 0  # (trials from the first calls: accel/measured.py)
    w = _read_only(rng.standard_normal((6, 4)).astype(np.float32))
    for rows in (3, 9, 40, 50, 64, 65):  # past 16 rows, one trial per power-of-two class
        a = rng.standard_normal((rows, 6)).astype(np.float32)
        # Enough calls for a choice even when the two medians are too close to call early.
        for _ in range(2 * (MAX_ROUNDS_FACTOR * measured.rounds + 1)):
            np.testing.assert_allclose(product(a, w), a @ w, rtol=1e-5, atol=1e-6)
    assert set(measured.trials) == {((3, 6), (6, 4), "f"), ((9, 6), (6, 4), "f"),
                                    ((64, 6), (6, 4), "f"), ((128, 6), (6, 4), "f")}
    assert all(t.choice in CANDIDATES for t in measured.trials.values())
    described = measured.describe()
    assert "on [3,6] @ [6,4] float32: " in described and "on [33..64,6] @ [6,4]" in described
    # A writeable weight (it may change between calls), a batch of matrices, a vector, mixed
    # dtypes: plain np.matmul, nothing timed.
    writeable = w.copy()
    batched = rng.standard_normal((2, 3, 6)).astype(np.float32)
    for a, b in ((batched[0], writeable), (batched, w), (batched[0], w[:, 0]),
                 (batched[0].astype(np.float64), w)):
        np.testing.assert_allclose(product(a, b), np.matmul(a, b), rtol=1e-5, atol=1e-6)
    assert len(measured.trials) == 4  # none added


@pytest.mark.parametrize("transposed", [False, True])
def test_a_product_settled_on_rows_goes_straight_to_blas_and_follows_every_change(transposed,
                                                                                    rng,
                                                                                    monkeypatch):
    """Once `rows` is chosen for a shape, calls on that shape and weight skip the choice's
    look-up; another weight, shape or type, a candidate fixed later and products on two cores
    each take the way they would have taken, and every result is the plain product."""
    keys = []
    shapes = gemm.product_key
    monkeypatch.setattr(gemm, "product_key", lambda *args: keys.append(args) or shapes(*args))
    product = weight_product(transposed)
    measured = abilities_of(product).measured
    called = {name: 0 for name in CANDIDATES}
    for name, fn in list(measured.candidates.items()):
        def counted(*args, name=name, fn=fn):
            called[name] += 1
            return fn(*args)
        measured.candidates[name] = counted
    measured.fix("rows")

    def weight(n=4):
        return _read_only(rng.standard_normal((n, 6) if transposed else (6, n))
                          .astype(np.float32))

    def plain(a, w):
        return np.matmul(a, w.T if transposed else w)

    w, a = weight(), rng.standard_normal((3, 6)).astype(np.float32)
    out = np.empty((3, 4), np.float32)
    for _ in range(3):
        np.testing.assert_allclose(product(a, w), plain(a, w), rtol=1e-5, atol=1e-6)
        assert product(a, w, out=out) is out
        np.testing.assert_allclose(out, plain(a, w), rtol=1e-5, atol=1e-6)
    assert len(keys) == 0  # (fixed: no key; settled on a key, one, at the first call)
    measured.fixed, measured._all = None, None  # as if chosen on this key by a trial
    measured._chosen[shapes(a, w)] = "rows"
    for _ in range(3):
        np.testing.assert_allclose(product(a, w), plain(a, w), rtol=1e-5, atol=1e-6)
    assert len(keys) == 1 and called["rows"] == 0
    w.flags.writeable = True  # (the caller's again: changed, it is read as it is now)
    w[...] = rng.standard_normal(w.shape)
    np.testing.assert_allclose(product(a, w), plain(a, w), rtol=1e-5, atol=1e-6)
    for b, v in ((a, weight()), (a[:2], w), (a.astype(np.float64), w.astype(np.float64)),
                 (a, weight(5))):
        v.flags.writeable = False
        np.testing.assert_allclose(product(b, v), plain(b, v), rtol=1e-5, atol=1e-6)
    measured.fix("columns")
    np.testing.assert_allclose(product(a, w), plain(a, w), rtol=1e-5, atol=1e-6)
    assert called["columns"] == 1
    previous = set_products_on_two_cores(True)
    try:
        np.testing.assert_allclose(product(a, w), plain(a, w), rtol=1e-5, atol=1e-6)
    finally:
        set_products_on_two_cores(previous)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, n", [(1, 4), (3, 1), (5, 8), (40, 33)])
@pytest.mark.parametrize("out_layout", [None, "C", "strided"])
def test_a_product_settled_on_rows_has_numpys_values_bit_for_bit(dtype, m, n, out_layout, rng,
                                                                 monkeypatch):
    """The settled `rows` product calls numpy's own BLAS directly where numpy's matmul makes one
    gemm call (two rows and two columns or more) into a fresh array or a C-order destination,
    and leaves the rest (a matrix-vector product, a strided destination) to np.matmul: either
    way the values are np.matmul's into a destination of that layout, bit for bit."""
    direct = []  # (the calls `_direct` made, not declined)
    real = gemm._direct

    def counted(*args):
        made = real(*args)
        if made is not None:
            direct.append(1)
        return made

    monkeypatch.setattr(gemm, "_direct", counted)
    product = weight_product(True)
    abilities_of(product).measured.fix("rows")
    a = rng.standard_normal((m, 6)).astype(dtype)
    w = _read_only(rng.standard_normal((n, 6)).astype(dtype))

    def destination():
        return {None: None, "C": np.empty((m, n), dtype),
                "strided": np.full((m, 2 * n), np.nan, dtype)[:, ::2]}[out_layout]

    out = destination()
    for _ in range(3):  # (the first call settles the way; the next take it)
        got = product(a, w, out=out)
        assert got is out or out is None
        # (np.matmul's own values into a destination of that layout: numpy 2.0 fills a strided
        # one otherwise than a fresh one, to other roundings)
        expected = np.matmul(a, np.ascontiguousarray(w.T), out=destination())
        assert got.tobytes() == np.ascontiguousarray(expected).tobytes()
    one_gemm = m >= 2 and n >= 2 and out_layout != "strided" and gemm.blas_status() is None
    assert bool(direct) == one_gemm


def test_prepared_is_made_once_per_read_only_weight_and_holds_it_weakly(rng):
    made = []
    prepared = Prepared(lambda w: made.append(w) or w * 2)
    w = _read_only(rng.standard_normal(3))
    first = prepared(w)
    assert prepared(w) is first and len(made) == 1
    writeable = w.copy()
    prepared(writeable)
    writeable *= 3  # a writeable weight may change: it is made again each call
    np.testing.assert_array_equal(prepared(writeable), writeable * 2)
    assert len(made) == 3
    other = _read_only(w.copy())
    prepared(other)
    ref = weakref.ref(other)
    made.clear()
    del other
    gc.collect()
    assert ref() is None  # the kernel does not keep a caller's array alive


def test_a_feed_of_the_same_values_takes_what_was_made_and_a_changed_one_is_made_again(rng):
    """A weight fed to a model comes as a new read-only view of the caller's array every run:
    while its bits stay the same, what was made of it is taken again (from the third run: the
    second keeps a copy of its values); once they change it is made afresh, and from then on
    nothing is copied or compared for it."""
    made = []
    prepared = Prepared(lambda w: made.append(w) or w.T)
    caller = rng.standard_normal((3, 5)).astype(np.float32)

    def fed():  # as the engine sees a feed: a read-only view made anew
        view = caller.view()
        view.flags.writeable = False
        return view

    results = [prepared(fed()) for _ in range(4)]
    assert len(made) == 2 and results[3] is results[2] is results[1]
    assert not results[1].flags.writeable
    caller[1, 2] += 1  # the caller changes their array in place between runs
    np.testing.assert_array_equal(prepared(fed()), caller.T)
    results = [prepared(fed()) for _ in range(3)]  # found changing: made every time, no copy
    assert len(made) == 6 and prepared._remembered.last[2] is None
    for got in results:
        np.testing.assert_array_equal(got, caller.T)
    # Compared bit for bit: -0.0 is not 0.0 (a product's zeros would keep the wrong sign).
    prepared = Prepared(lambda w: w.T)
    caller[0, 0] = 0.0
    prepared(fed()), prepared(fed())
    caller[0, 0] = -0.0
    assert np.signbit(prepared(fed())[0, 0])


def test_a_derived_view_of_a_weight_never_stands_for_another_array(rng):
    """What is made of a weight may be a view of it (one already aligned and contiguous is used
    as it is): it follows that array's changes, so it never stands for another array of the
    same values."""
    values = rng.standard_normal((4, 6)).astype(np.float32)
    prepared = Prepared(lambda w: w[:2])
    first, second = at_offset(values, 0), at_offset(values, 0)

    def fed(a):
        view = a.view()
        view.flags.writeable = False
        return view

    prepared(fed(first)), prepared(fed(first))
    got = prepared(fed(second))
    first[:] = 7
    assert not np.shares_memory(got, first)
    np.testing.assert_array_equal(prepared(fed(second)), values[:2])


@pytest.mark.parametrize("read_only", [False, True], ids=["writeable", "read-only-view"])
def test_a_weight_changed_in_place_between_runs_is_read_again(read_only):
    """A model whose weights are feeds: the caller updating them in place between runs gets
    results from the new values, on every candidate formulation, as the reference driver
    gives them; a read-only view of the caller's array too (changed through its base)."""
    hidden = 8
    feeds = rnn_loop_feeds(np.random.default_rng(3), hidden, steps=5, batch=3, features=4)
    bases = {name: feeds[name] for name in ("W", "R")}
    if read_only:
        for name, base in bases.items():
            feeds[name] = base.view()
            feeds[name].flags.writeable = False
    reference = cyloop.load(rnn_loop_model(), driver="python", tune=False)
    for candidate in CANDIDATES:
        fast = cyloop.load(rnn_loop_model(), driver="cython")
        for measured in _measured_kernels(fast):
            measured.fix(candidate)
        for run in range(4):
            if run >= 2:  # the same arrays, changed in place
                bases["R"][run % hidden] *= 0.5
                bases["W"][:, run] += 1
            got, want = fast.run(feeds), reference.run(feeds)
            for name in want:
                np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5,
                                           err_msg=f"{candidate}, run {run}")


@pytest.mark.parametrize("offset", [0, 16], ids=["on-a-boundary", "16-bytes-off"])
def test_a_read_only_weight_laid_out_anew_is_prepared_aligned_once(rng, offset):
    values = rng.standard_normal((4, 6)).astype(np.float32)
    prepared = Prepared(lambda w: w.T)
    weight = _read_only(at_offset(values, offset))
    first = prepared(weight)
    assert first.flags.c_contiguous and address(first) % ALIGNMENT == 0
    assert prepared(weight) is first and not first.flags.writeable
    np.testing.assert_array_equal(first, values.T)


def test_a_weight_used_as_it_is_is_never_copied(rng):
    """Aligned or not: a read-only one that is not a model's own (a feed) is new every run, and
    a writeable one is made afresh every call, so a copy to align it would be made again."""
    values = rng.standard_normal((4, 6)).astype(np.float32)
    prepared = Prepared(np.ascontiguousarray)
    for offset in (16, 0):
        weight = _read_only(at_offset(values, offset))
        assert prepared(weight) is weight and prepared(weight) is weight
        ref = weakref.ref(weight)
        del weight
        gc.collect()
        assert ref() is None  # remembered without a strong reference
    writeable = at_offset(values, 16)
    assert prepared(writeable) is writeable


def _measured_kernels(fast) -> list:
    """The measured choices of a model's one loop: its body's and its hoisted kernels'."""
    (loop,) = fast._compiled.loops
    facts = loop.facts()
    kernels = [step.fn for step in facts.body.steps] + [fn for _, fn in facts.hoisted_kernels]
    return [abilities_of(fn).measured for fn in kernels if abilities_of(fn).measured is not None]


@pytest.mark.parametrize("candidate", CANDIDATES)
def test_loop_body_and_hoisted_matmuls_run_either_orientation_like_the_reference(candidate, rng):
    """h @ R in an ONNX Loop body and the hoisted x_t @ W: the choices show in the plan; each
    formulation, forced, matches the pure-Python driver running the body as written."""
    feeds = rnn_loop_feeds(rng, hidden=8, steps=6, batch=3, features=5)
    fast = cyloop.load(rnn_loop_model(), driver="cython")
    reference = cyloop.load(rnn_loop_model(), driver="python", tune=False)
    measured = _measured_kernels(fast)
    assert len(measured) == 2  # h_in @ R in the body, x_t @ W hoisted
    for m in measured:
        m.fix(candidate)
    got, want = fast.run(feeds), reference.run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
    (plan,) = fast.plan().loops
    assert [c.hoisted for c in plan.choices if c.fixed == candidate] == [False, True], plan


def test_a_formulation_no_shape_uses_lets_go_of_its_copy_of_the_weight(rng):
    """Once the trial on a shape is decided, the formulations it dropped release their prepared
    weight (a copy as large as the weight): only the chosen one keeps one; fixing a formulation
    (tune=False) releases the others at once, and a dropped one is prepared again when asked."""
    product = weight_product()
    w = _read_only(rng.standard_normal((8, 6)).astype(np.float32))
    a = rng.standard_normal((4, 8)).astype(np.float32)
    trial_key = ((4, 8), (8, 6), "f")
    measured = abilities_of(product).measured
    while trial_key not in measured.trials or measured.trials[trial_key].choice is None:
        np.testing.assert_allclose(product(a, w), a @ w, rtol=1e-5, atol=1e-6)
    chosen = measured.trials[trial_key].choice
    for name, weight in product.prepared.items():
        assert weight.remembers() == (name == chosen), name
    measured.fix("columns")
    assert not any(weight.remembers() for name, weight in product.prepared.items()
                   if name != "columns")
    np.testing.assert_allclose(product(a, w), a @ w, rtol=1e-5, atol=1e-6)
    assert product.prepared["columns"].remembers(w)


def _plus_cases(rng):
    f = np.float32
    a, b = rng.standard_normal((8, 32)).astype(f), rng.standard_normal((4, 32, 16)).astype(f)
    gates = rng.standard_normal((8, 64)).astype(f)
    return {
        "gate blocks": (a, b, gates.reshape(8, 4, 16).transpose(1, 0, 2)),
        "a bias row": (a, b[0], gates[0, :16]),
        "float64": (a.astype(np.float64), b.astype(np.float64), gates[:, :16].astype(np.float64)),
        "int32": (a.astype(np.int32), b.astype(np.int32), gates[:, :16].astype(np.int32)),
        "4-D": (a[None, None], b[None], gates.reshape(8, 4, 16).transpose(1, 0, 2)[None]),
        "mixed types": (a, b[0], gates[:, :16].astype(np.float64)),
        "empty": (a[:0], b[0], gates[:0, :16]),
        "widening": (a[:1], b[0], gates[:, :16]),
    }


@pytest.mark.parametrize("two_cores", [False, True])
@pytest.mark.parametrize("case", list(_plus_cases(np.random.default_rng(0))))
def test_matmul_plus_is_the_product_plus_the_addend(case, two_cores, rng):
    """`matmul_plus` (a recurrent step's gates: the product and the projection's row) is
    ``a @ b + addend`` in a fresh array of the product's type, whether BLAS adds the addend or
    numpy does (other types and ranks, an addend widening the product), and leaves its operands
    as they were."""
    a, b, addend = _plus_cases(rng)[case]
    before = [x.copy() for x in (a, b, addend)]
    expected = np.matmul(a, b)
    if case == "widening":
        expected = expected + addend
    else:  # (in the product's type)
        expected += addend
    previous = set_products_on_two_cores(two_cores)
    try:
        got = matmul_plus(a, b, addend)
    finally:
        set_products_on_two_cores(previous)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert not any(np.shares_memory(got, x) for x in (a, b, addend))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    for x, kept in zip((a, b, addend), before):
        np.testing.assert_array_equal(x, kept)


@pytest.mark.parametrize("two_cores", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "axis-1 chunk", "4-D", "transposed"])
def test_rows_plus_multiplies_rows_where_they_lie(layout, two_cores, rng):
    """`rows_plus` (a hoisted projection with its bias): ``x @ w + b`` as [..., N] for rows of
    any layout, a chunk of an input sliced along axis 1 among them (its matrices strided apart:
    a stack of products, no copy of x), and x left as it was."""
    f = np.float32
    whole = rng.standard_normal((16, 40, 64)).astype(f)
    x = {"contiguous": whole[:, :8].copy(), "axis-1 chunk": whole[:, 8:40].swapaxes(0, 1),
         "4-D": whole[:4].reshape(4, 2, 20, 64), "transposed": whole[:, 3].T[:, :16].T}[layout]
    w = rng.standard_normal((64, 96)).astype(f)
    b = rng.standard_normal(96).astype(f)
    before = x.copy()
    previous = set_products_on_two_cores(two_cores)
    try:
        got = rows_plus(x, w, b)
    finally:
        set_products_on_two_cores(previous)
    assert got.shape == x.shape[:-1] + (96,)
    np.testing.assert_allclose(got, x @ w + b, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(x, before)


def test_a_kernel_sees_through_a_view_of_all_of_a_read_only_value():
    """`_whole`: the row a loop binds each iteration of a value computed once a run (a view of
    all of it, read-only) stands for that value; a row of a chunk, or anything writeable, for
    itself. `Prepared` recalls what it derived from one such view for the next."""
    value = np.ones((1, 6))
    value.flags.writeable = False
    rows = np.broadcast_to(value, (4, 1, 6))
    assert gemm._whole(rows[2]) is value
    chunk = np.ones((4, 1, 6))
    chunk.flags.writeable = False
    row = chunk[2]
    assert gemm._whole(row) is row
    writeable = np.ones((1, 6))
    view = writeable.view()
    view.flags.writeable = False
    assert gemm._whole(view) is view
    made = []
    prepared = gemm.Prepared(lambda w: made.append(w) or w * 2)
    for k in range(4):  # (each a new view of all of `value`, as a loop binds it)
        np.testing.assert_array_equal(prepared(rows[k]), value * 2)
    assert len(made) == 1
