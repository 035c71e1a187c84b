"""A recurrent step's gate passes as one call (`_gate_passes`: an LSTM's `lstm_tail`, a GRU's
`gru_gates` and `gru_blend`; numpy's own inner loops called from C): the values are exactly those
of the same passes made as ufunc calls, whatever the dtype, shapes, gate order and row strides;
operands they do not take are left untouched (None); floating-point errors are reported as numpy
reports them; and the kernels that use them make the same values through their ufunc passes
where they decline. `lstm_product_tail` is an LSTM step's product and passes as one call, on
one core or two: the same values as the product and then `lstm_tail`, and `lstm_product_steps`
is many such steps in one call, each the same as its own call; `product_tanh` is a plain RNN's
step, ``tanh(x + h @ r)``, likewise."""

import contextlib
import ctypes
import ctypes.util
import itertools
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cyloop.accel import _two_core, fused, gemm
from cyloop.accel._gate_passes import (
    gru_blend,
    gru_gates,
    gru_product_steps,
    gru_product_tail,
    lstm_product_steps,
    lstm_product_tail,
    lstm_tail,
    product_tanh,
    product_tanh_steps,
)
from cyloop.kernels import _math
from cyloop.kernels._gate_orders import ARRANGED_LSTM, OPENVINO_LSTM, LstmGateOrder
from cyloop.kernels.recurrent import cells
from cyloop.kernels.registry import abilities_of

from ..support import native

pytestmark = native.gate_passes


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _unaligned(a):
    """A copy of `a` one byte past an aligned address (its items misaligned)."""
    raw = np.empty(a.nbytes + 1, np.uint8)[1:]
    out = raw.view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _rows_on_one(a):
    """An array of a's shape whose rows all share one row's memory (row stride 0)."""
    return np.lib.stride_tricks.as_strided(a[:1].copy(), a.shape, (0, a.strides[1]))


def _declined_untouched(call, operands):
    """`call(*operands)` answers None and leaves every array among the operands as it was."""
    arrays = [a for a in operands if isinstance(a, np.ndarray)]
    before = [a.copy() for a in arrays]
    assert call(*operands) is None
    for was, now in zip(before, arrays):
        np.testing.assert_array_equal(now, was)


def _numpy_passes(gates, c, out, f_at, i_at, g_at, o_at, halve):
    """`lstm_tail`'s passes as numpy ufunc calls (the oracle: the same loops, dispatched)."""
    half = gates.dtype.type(0.5)
    sigmoids = [k for k in range(4) if k != g_at]
    if halve:
        for k in sigmoids:
            gates[k] *= half
    np.tanh(gates, out=gates)
    for k in sigmoids:
        gates[k] *= half
    for k in sigmoids:
        gates[k] += half
    c_new = np.multiply(gates[f_at], c)
    inp = gates[i_at]
    inp *= gates[g_at]
    c_new += inp
    h_new = np.tanh(c_new, out=out)
    h_new *= gates[o_at]
    return h_new, c_new


def _lstm_in_float64(pre, c, f_at, i_at, g_at, o_at, halved):
    """The LSTM equations from pre-activations (halved on the sigmoid blocks if `halved`)."""
    pre = pre.astype(np.float64) * np.array([2.0 if halved and k != g_at else 1.0
                                             for k in range(4)])[:, None, None]
    sigmoid = 1 / (1 + np.exp(-pre))
    c_new = sigmoid[f_at] * c + sigmoid[i_at] * np.tanh(pre[g_at])
    return sigmoid[o_at] * np.tanh(c_new), c_new


def _rows(rng, batch, hidden, dtype, strided):
    """A [B, H] array, contiguous or with rows strided apart (a slot of a [B, T, H] output)."""
    if strided:
        return rng.standard_normal((batch, 3, hidden)).astype(dtype)[:, 1]
    return rng.standard_normal((batch, hidden)).astype(dtype)


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64"]), batch=st.integers(1, 9),
       hidden=st.integers(1, 40), order=st.permutations(range(4)), halve=st.booleans(),
       out_form=st.sampled_from(["none", "contiguous", "strided"]), c_strided=st.booleans(),
       seed=st.integers(0, 2**16))
def test_the_passes_make_what_numpy_s_ufunc_calls_make(dtype, batch, hidden, order, halve,
                                                        out_form, c_strided, seed):
    rng = np.random.default_rng(seed)
    pre = (rng.standard_normal((4, batch, hidden)) * 3).astype(dtype)
    c = _rows(rng, batch, hidden, dtype, c_strided)
    c_before = c.copy()
    output = np.full((batch, 3, hidden), np.nan, dtype)  # [B, T, H]: slot 1 is strided
    out = {"none": None, "contiguous": np.full((batch, hidden), np.nan, dtype),
           "strided": output[:, 1]}[out_form]
    want_gates = pre.copy()
    want_h, want_c = _numpy_passes(want_gates, c, None, *order, halve)
    gates = pre.copy()
    h, c_new = lstm_tail(gates, c, out, LstmGateOrder(*order), halve)
    np.testing.assert_array_equal(h, want_h)
    np.testing.assert_array_equal(c_new, want_c)
    np.testing.assert_array_equal(gates, want_gates)  # overwritten as the ufunc calls do
    np.testing.assert_array_equal(c, c_before)
    assert h.dtype == c_new.dtype == np.dtype(dtype)
    assert c_new.flags.c_contiguous and not np.shares_memory(c_new, c)
    if out is not None:
        assert h is out
        if out_form == "strided":  # nothing beside the slot is written
            assert np.isnan(output[:, [0, 2]]).all()
    # ... and they are the LSTM's equations.
    exact_h, exact_c = _lstm_in_float64(pre, c, *order, halved=not halve)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(h, exact_h, rtol=tol, atol=tol)
    np.testing.assert_allclose(c_new, exact_c, rtol=tol, atol=tol)


def _unfit_cases(rng):
    f32 = np.float32

    def gates(dtype=f32, shape=(4, 3, 5)):
        return rng.standard_normal(shape).astype(dtype)

    def state(dtype=f32, shape=(3, 5)):
        return rng.standard_normal(shape).astype(dtype)

    blocks = OPENVINO_LSTM
    shared = gates()
    return {
        "float16": (gates(np.float16), state(np.float16), None, blocks),
        "int": (gates(np.int32), state(np.int32), None, blocks),
        "mixed dtypes": (gates(), state(np.float64), None, blocks),
        "out of another dtype": (gates(), state(), state(np.float64), blocks),
        "gates not contiguous": (gates(shape=(4, 3, 10))[..., ::2], state(), None, blocks),
        "gates not four blocks": (gates(shape=(3, 3, 5)), state(), None, blocks),
        "gates 2-D": (gates(shape=(4, 15)), state(), None, blocks),
        "c of another shape": (gates(), state(shape=(3, 4)), None, blocks),
        "c columns strided": (gates(), state(shape=(3, 10))[:, ::2], None, blocks),
        "out columns strided": (gates(), state(), state(shape=(3, 10))[:, ::2], blocks),
        "out not an array": (gates(), state(), [[0.0] * 5] * 3, blocks),
        "out overlapping the gates": (shared, state(), shared[2], blocks),
        "out read-only": (gates(), state(), _read_only(state()), blocks),
        "out rows on one row": (gates(), state(), _rows_on_one(state()), blocks),
        "out byte-swapped": (gates(), state(), state().astype(">f4"), blocks),
        "c byte-swapped": (gates(), state().astype(">f4"), None, blocks),
        "c unaligned": (gates(), _unaligned(state()), None, blocks),
        "gates read-only": (_read_only(gates()), state(), None, blocks),
        "gates byte-swapped": (gates().astype(">f4"), state(), None, blocks),
        "blocks not a permutation": (gates(), state(), None, LstmGateOrder(0, 1, 1, 3)),
        "blocks out of range": (gates(), state(), None, LstmGateOrder(0, 1, 2, 4)),
        "blocks not an order": (gates(), state(), None, list(OPENVINO_LSTM)),
        "empty": (gates(shape=(4, 0, 5)), state(shape=(0, 5)), None, blocks),
    }


@pytest.mark.parametrize("case", list(_unfit_cases(np.random.default_rng(0))))
def test_operands_it_does_not_take_are_declined_untouched(case, rng):
    gates, c, out, blocks = _unfit_cases(rng)[case]
    _declined_untouched(lambda *operands: lstm_tail(*operands, blocks, True), (gates, c, out))


def test_an_out_that_is_c_itself_is_declined(rng):
    """h' into c's own memory: declined (the ufunc passes, which read c first, then run)."""
    gates = rng.standard_normal((4, 2, 3)).astype(np.float32)
    c = rng.standard_normal((2, 3)).astype(np.float32)
    assert lstm_tail(gates, c, c, OPENVINO_LSTM, False) is None


# A cell state of inf with the forget gate shut (sigmoid 0): f * c is 0 * inf, an invalid
# value, in the first multiply after the activations.
def _invalid_operands():
    gates = np.full((4, 2, 3), -1e30, np.float32)
    return gates, np.full((2, 3), np.inf, np.float32)


class _Log:
    def __init__(self):
        self.lines = []

    def write(self, line):
        self.lines.append(line)


def _fp_outcome(run, operands, kind, mode, capfd):
    """What `run(*operands())` reports of its floating-point errors of `kind` under `mode`:
    (warnings, the FloatingPointError's message, errcall calls, log lines, stderr)."""
    calls, log = [], _Log()
    handler = log if mode == "log" else (lambda *args: calls.append(args))
    with warnings.catch_warnings(record=True) as caught, \
            np.errstate(all="ignore", **{kind: mode}, call=handler):
        warnings.simplefilter("always")
        try:
            run(*operands())
            raised = None
        except FloatingPointError as e:
            raised = str(e)
    return ([(w.category, str(w.message)) for w in caught], raised, calls, log.lines,
            capfd.readouterr().err)


@pytest.mark.parametrize("mode", ["ignore", "warn", "raise", "call", "log", "print"])
def test_floating_point_errors_are_reported_as_numpy_reports_them(mode, capfd):
    """Under each errstate mode, the same warning, exception, callback, log line or stderr line
    as the ufunc calls make (numpy itself is the oracle)."""
    def outcome(run):
        return _fp_outcome(run, _invalid_operands, "invalid", mode, capfd)

    want = outcome(lambda gates, c: _numpy_passes(gates, c, None, 0, 1, 2, 3, False))
    got = outcome(lambda gates, c: lstm_tail(gates, c, None, OPENVINO_LSTM, False))
    assert got == want
    assert any(want) == (mode != "ignore")


def test_a_warning_points_at_the_line_that_made_the_call():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lstm_tail(*_invalid_operands(), None, OPENVINO_LSTM, False)
    (warning,) = caught
    assert warning.filename == __file__


def test_flags_raised_before_the_call_are_not_reported(rng):
    """A flag left by earlier code (here numpy's own overflow, ignored) is not the passes'."""
    with np.errstate(over="ignore"):
        np.multiply(np.float32(3e38), np.float32(10))
    gates = rng.standard_normal((4, 2, 3)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lstm_tail(gates, rng.standard_normal((2, 3)).astype(np.float32), None, OPENVINO_LSTM, True)


def test_every_float_type_has_its_loops():
    """numpy's loop tables have what the passes need for float32 and float64 (else every call
    would decline, and a W4 step would quietly lose its fast path)."""
    gates = np.zeros((4, 1, 1), np.float64)
    for dtype in (np.float32, np.float64):
        assert lstm_tail(gates.astype(dtype), np.zeros((1, 1), dtype), None, OPENVINO_LSTM,
                         False) is not None


def _product_then_passes(h, w, x, c, order, halve):
    """The gates x + h @ w[k] as the blocked kernels made them before `lstm_product_tail`
    (one BLAS call per block, x copied in first: `_two_core.multiply` on one core), then
    `lstm_tail`."""
    hidden = w.shape[2]
    blocked_x = np.broadcast_to(x, (h.shape[0], 4 * hidden)).reshape(-1, 4, hidden)
    gates = _two_core.multiply(h, w, blocked_x.swapaxes(0, 1), False)
    return lstm_tail(gates, c, None, LstmGateOrder(*order), halve)


@pytest.fixture(scope="module")
def _blas():
    """numpy's own BLAS bound to `_two_core` (what the kernels' first product does)."""
    if not gemm._blas_bound():
        pytest.skip("numpy's own BLAS is not found here: lstm_product_tail declines everything")


@contextlib.contextmanager
def _pieces_split(two_cores=True):
    """Asserts that the one call in the block cut its job in pieces (on two cores) or did not
    (on one): what the block tests is the pieces' path."""
    split = _two_core.products_split()
    yield
    assert _two_core.products_split() == split + (1 if two_cores else 0)


@settings(max_examples=80, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64"]), batch=st.integers(1, 20),
       inputs=st.integers(1, 40), hidden=st.integers(1, 40), order=st.permutations(range(4)),
       halve=st.booleans(), x_form=st.sampled_from(["rows", "strided rows", "one row", "1-D"]),
       out_form=st.sampled_from(["none", "contiguous", "strided"]), two_cores=st.booleans(),
       seed=st.integers(0, 2**16))
def test_the_product_and_passes_make_what_the_product_then_the_passes_make(
        _blas, dtype, batch, inputs, hidden, order, halve, x_form, out_form, two_cores, seed):
    """On one core, exactly the product's own BLAS calls then `lstm_tail`; on two cores, where
    each piece's gemm makes its rows' gates, the same to rounding; both the LSTM's equations."""
    rng = np.random.default_rng(seed)
    h = rng.standard_normal((batch, inputs)).astype(dtype)
    w = (rng.standard_normal((4, inputs, hidden)) / np.sqrt(inputs)).astype(dtype)
    x = {"rows": lambda: rng.standard_normal((batch, 4 * hidden)),
         "strided rows": lambda: rng.standard_normal((batch, 3, 4 * hidden))[:, 1],
         "one row": lambda: rng.standard_normal((1, 4 * hidden)),
         "1-D": lambda: rng.standard_normal(4 * hidden)}[x_form]().astype(dtype)
    c = rng.standard_normal((batch, hidden)).astype(dtype)
    before = [a.copy() for a in (h, w, x, c)]
    output = np.full((batch, 3, hidden), np.nan, dtype)
    out = {"none": None, "contiguous": np.full((batch, hidden), np.nan, dtype),
           "strided": output[:, 1]}[out_form]
    want_h, want_c = _product_then_passes(h, w, x, c, order, halve)
    h_new, c_new = lstm_product_tail(h, w, x, c, out, LstmGateOrder(*order), halve, two_cores)
    if two_cores:
        tol = 1e-6 if dtype == "float32" else 1e-14
        np.testing.assert_allclose(h_new, want_h, rtol=tol, atol=tol)
        np.testing.assert_allclose(c_new, want_c, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(h_new, want_h)
        np.testing.assert_array_equal(c_new, want_c)
    for was, now in zip(before, (h, w, x, c)):
        np.testing.assert_array_equal(now, was)
    assert h_new.dtype == c_new.dtype == np.dtype(dtype)
    assert c_new.flags.c_contiguous and not np.shares_memory(c_new, c)
    if out is not None:
        assert h_new is out
        if out_form == "strided":
            assert np.isnan(output[:, [0, 2]]).all()
    pre = np.broadcast_to(x.astype(np.float64), (batch, 4 * hidden)).reshape(
        batch, 4, hidden).swapaxes(0, 1) + h.astype(np.float64) @ w.astype(np.float64)
    exact_h, exact_c = _lstm_in_float64(pre, c, *order, halved=not halve)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(h_new, exact_h, rtol=tol, atol=tol)
    np.testing.assert_allclose(c_new, exact_c, rtol=tol, atol=tol)


def _until_helped(call, pieces=10, seconds=5.0) -> int:
    """Calls `call()` until the helper thread has taken `pieces` pieces (asserted within
    `seconds`: BLAS's own threads, spinning for about 0.1 s after an earlier test's large
    product, keep the helper off the second core meanwhile); how many calls it took."""
    helped, calls = _two_core.pieces_helped(), 0
    deadline = time.monotonic() + seconds
    while _two_core.pieces_helped() < helped + pieces:
        assert time.monotonic() < deadline, "the helper thread took no turn"
        call()
        calls += 1
    return calls


def test_on_two_cores_the_batch_s_rows_are_cut_in_pieces(_blas, rng):
    """A batch of 8 runs as two pieces, which the helper thread takes its turn at."""
    if not gemm.helper_runs():
        pytest.skip("no helper thread's help here (one core, or BLAS held to one thread)")
    h, c = (rng.standard_normal((8, 64)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal((4, 64, 64)).astype(np.float32)
    x = rng.standard_normal((8, 256)).astype(np.float32)
    split = _two_core.products_split()
    calls = _until_helped(lambda: lstm_product_tail(h, w, x, c, None, OPENVINO_LSTM, False, True))
    assert _two_core.products_split() == split + calls
    lstm_product_tail(h, w, x, c, None, OPENVINO_LSTM, False, False)
    assert _two_core.products_split() == split + calls  # (one core: one piece)


def _product_unfit_cases(rng):
    f32 = np.float32

    def a(*shape, dtype=f32):
        return rng.standard_normal(shape).astype(dtype)

    h, w, x, c = a(3, 4), a(4, 4, 5), a(3, 20), a(3, 5)
    shared = a(3, 20)
    stacked = a(4, 5)  # (rows 0-2 and rows 1-3: one row apart)
    square = a(3, 5)  # (h [3, K=5] and out [3, H=5] both)
    slots = a(3, 2, 6)
    return {
        "float16": (h.astype(np.float16), w.astype(np.float16), x.astype(np.float16),
                    c.astype(np.float16), None),
        "int": (a(3, 4, dtype=np.int32), a(4, 4, 5, dtype=np.int32), a(3, 20, dtype=np.int32),
                a(3, 5, dtype=np.int32), None),
        "mixed dtypes": (h, w.astype(np.float64), x, c, None),
        "h columns strided": (a(3, 8)[:, ::2], w, x, c, None),
        "h 1-D": (a(4), w, x, c, None),
        "w not four blocks": (h, a(3, 4, 5), x, c, None),
        "w of another length": (h, a(4, 5, 5), x, c, None),
        "w columns strided": (h, a(4, 4, 10)[..., ::2], x, c, None),
        "w rows overlapping": (h, np.lib.stride_tricks.as_strided(a(40), (4, 4, 5), (40, 4, 4)),
                               x, c, None),
        "x of another width": (h, w, a(3, 21), c, None),
        "x of another batch": (h, w, a(2, 20), c, None),
        "x columns strided": (h, w, a(3, 40)[:, ::2], c, None),
        "x 3-D": (h, w, a(1, 3, 20), c, None),
        "x 0-D": (h, w, a(), c, None),
        "c of another shape": (h, w, x, a(3, 4), None),
        "c columns strided": (h, w, x, a(3, 10)[:, ::2], None),
        "out columns strided": (h, w, x, c, a(3, 10)[:, ::2]),
        "out of another dtype": (h, w, x, c, a(3, 5, dtype=np.float64)),
        "out not an array": (h, w, x, c, [[0.0] * 5] * 3),
        "out overlapping x": (h, w, shared, c, shared[:, :5]),
        "out overlapping h": (shared[:, :4], w, x, c, shared[:, 10:15]),
        "out that is h": (square, a(4, 5, 5), a(3, 20), c, square),
        "out one row past h": (stacked[:3], a(4, 5, 5), a(3, 20), c, stacked[1:]),
        "out h's rows, another column": (slots[:, 0, 1:6], a(4, 5, 5), a(3, 20), c,
                                         slots[:, 0, :5]),
        "out that is c": (h, w, x, c, c),
        "out read-only": (h, w, x, c, _read_only(c)),
        "out rows on one row": (h, w, x, c, _rows_on_one(c)),
        "out byte-swapped": (h, w, x, c, c.astype(">f4")),
        "c byte-swapped": (h, w, x, c.astype(">f4"), None),
        "c unaligned": (h, w, x, _unaligned(c), None),
        "h unaligned": (_unaligned(h), w, x, c, None),
        "empty": (a(0, 4), w, a(0, 20), a(0, 5), None),
        "not swapped": (h.astype(">f4"), w.astype(">f4"), x.astype(">f4"), c.astype(">f4"),
                        None),
    }


@pytest.mark.parametrize("two_cores", [False, True])
@pytest.mark.parametrize("case", list(_product_unfit_cases(np.random.default_rng(0))))
def test_product_operands_it_does_not_take_are_declined_untouched(_blas, case, two_cores, rng):
    _declined_untouched(lambda *operands: lstm_product_tail(*operands, OPENVINO_LSTM, True,
                                                             two_cores),
                        _product_unfit_cases(rng)[case])


@pytest.mark.parametrize("two_cores", [False, True])
def test_h_and_out_in_neighbouring_slots_of_one_output_are_taken(_blas, two_cores, rng):
    """The state read from slot t - 1 of a [B, T, H] output and h' written into slot t: their
    rows interleave, sharing no byte (a loop's emitted state living in its output)."""
    batch, steps, hidden = 8, 4, 16
    output = np.full((batch, steps, hidden), np.nan, np.float32)
    output[:, 1] = rng.standard_normal((batch, hidden))
    w = rng.standard_normal((4, hidden, hidden)).astype(np.float32) / 4
    x = rng.standard_normal((batch, 4 * hidden)).astype(np.float32)
    c = rng.standard_normal((batch, hidden)).astype(np.float32)
    h = output[:, 1]
    want_h, want_c = _product_then_passes(h, w, x, c, OPENVINO_LSTM, False)
    done = lstm_product_tail(h, w, x, c, output[:, 2], OPENVINO_LSTM, False, two_cores)
    assert done is not None and done[0].base is output
    np.testing.assert_allclose(output[:, 2], want_h, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(done[1], want_c, rtol=1e-6, atol=1e-6)
    assert np.isnan(output[:, [0, 3]]).all()


def _slots(layout, steps, batch, hidden, dtype):
    """(the output, its `steps` + 1 slots as [S + 1, B, H]) of an output laid out as `layout`:
    slot 0 is where the state before the first step lives, the rest are the steps' slots."""
    if layout == "[B, T, H]":  # (a TensorIterator's h, stacked on axis 1: rows interleave)
        output = np.full((batch, steps + 1, hidden), np.nan, dtype)
        return output, output.transpose(1, 0, 2)
    output = np.full((steps + 1, batch, hidden), np.nan, dtype)
    if layout == "[T, B, H] reversed":  # (a reverse scan's slots, last first)
        return output, output[::-1]
    if layout == "[T, B, H] padded rows":
        output = np.full((steps + 1, batch, hidden + 3), np.nan, dtype)
        return output, output[:, :, 1:hidden + 1]
    return output, output


@settings(max_examples=80, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64"]), batch=st.integers(1, 17),
       hidden=st.integers(1, 40), steps=st.integers(1, 6), order=st.permutations(range(4)),
       halve=st.booleans(),
       layout=st.sampled_from(["[B, T, H]", "[T, B, H]", "[T, B, H] reversed",
                               "[T, B, H] padded rows"]),
       h_in_slot=st.booleans(), x_form=st.sampled_from(["rows", "strided steps", "one row"]),
       two_cores=st.booleans(), staged=st.booleans(), seed=st.integers(0, 2**16))
def test_steps_in_one_call_make_what_a_call_a_step_makes(
        _blas, dtype, batch, hidden, steps, order, halve, layout, h_in_slot, x_form, two_cores,
        staged, seed):
    """Value for value what `lstm_product_tail` makes called once a step, each on the h' and c'
    of the call before, whatever the output's layout (h read from the slot before, or from an
    array of its own), h' made in its slot or staged; the other slots, the operands and step
    0's c are left as they were."""
    rng = np.random.default_rng(seed)
    blocks = LstmGateOrder(*order)
    w = (rng.standard_normal((4, hidden, hidden)) / np.sqrt(hidden)).astype(dtype)
    xs = {"rows": lambda: rng.standard_normal((steps, batch, 4 * hidden)),
          "strided steps": lambda: rng.standard_normal((2 * steps, batch, 4 * hidden))[::2],
          "one row": lambda: rng.standard_normal((steps, 1, 4 * hidden))}[x_form]().astype(dtype)
    c = rng.standard_normal((batch, hidden)).astype(dtype)
    want_output, want_slots = _slots(layout, steps, batch, hidden, dtype)
    output, slots = _slots(layout, steps, batch, hidden, dtype)
    start = rng.standard_normal((batch, hidden)).astype(dtype)
    want_slots[0] = slots[0] = start
    h = slots[0] if h_in_slot else start.copy()
    before = [a.copy() for a in (h, w, xs, c)]
    want_h, want_c = want_slots[0], c
    for s in range(steps):
        want_h, want_c = lstm_product_tail(want_h, w, xs[s], want_c, want_slots[s + 1], blocks,
                                           halve, two_cores)
    split = _two_core.products_split()
    done = lstm_product_steps(h, w, xs, c, slots[1:], blocks, halve, two_cores, staged)
    cut = two_cores and batch > 1 and 4 * batch * hidden * hidden >= _two_core.SMALLEST
    assert _two_core.products_split() - split == (steps if cut else 0)  # (a job a step)
    assert done is not None
    np.testing.assert_array_equal(output, want_output)  # (NaN where nothing was written)
    np.testing.assert_array_equal(done[1], want_c)
    assert np.shares_memory(done[0], slots[steps]) and done[0].shape == (batch, hidden)
    assert done[1].flags.c_contiguous and not np.shares_memory(done[1], c)
    for was, now in zip(before, (h, w, xs, c)):
        np.testing.assert_array_equal(now, was)


def _slot_one_in(rng, shape):
    """(a float32 operand of `shape`, [4, 3, 5] slots of which slot 1 is the operand's first
    bytes, slot 0 apart from it): what only a check of the later slots finds."""
    size = int(np.prod(shape))
    base = rng.standard_normal(4 * size).astype(np.float32)
    slots = np.lib.stride_tricks.as_strided(base, (4, 3, 5), (4 * size, 20, 4))
    return base[size:2 * size].reshape(shape), slots


def _steps_unfit_cases(rng):
    f32 = np.float32

    def a(*shape, dtype=f32):
        return rng.standard_normal(shape).astype(dtype)

    h, w, xs, c, outs = a(3, 5), a(4, 5, 5), a(4, 3, 20), a(3, 5), a(4, 3, 5)
    spans, weights = a(4, 3, 20), a(4, 5, 5)

    interleaved = a(3, 4, 5)  # [B, T, H]: slot t is [:, t]
    tight = a(4, 3, 5)  # (slots 20 B apart, batch rows 60: 4 slots need 80 B a row)
    xs_in, xs_slots = _slot_one_in(rng, (4, 3, 20))
    w_in, w_slots = _slot_one_in(rng, (4, 5, 5))
    c_in, c_slots = _slot_one_in(rng, (3, 5))
    return {
        "a later slot in xs": (h, w, xs_in, c, xs_slots),
        "a later slot in w": (h, w_in, xs, c, w_slots),
        "a later slot in c": (h, w, xs, c_in, c_slots),
        "xs 2-D": (h, w, a(4, 20), c, outs),
        "outs 2-D": (h, w, xs, c, a(4, 5)),
        "no steps": (h, w, a(0, 3, 20), c, a(0, 3, 5)),
        "steps disagree": (h, w, xs, c, a(3, 3, 5)),
        "h' unfit for h (K != H)": (a(3, 4), a(4, 4, 5), xs, c, outs),
        "outs of another dtype": (h, w, xs, c, a(4, 3, 5, dtype=np.float64)),
        "xs of another dtype": (h, w, xs.astype(np.float64), c, outs),
        "outs read-only": (h, w, xs, c, _read_only(outs)),
        "outs byte-swapped": (h, w, xs, c, outs.astype(">f4")),
        "outs all one slot": (h, w, xs, c, np.lib.stride_tricks.as_strided(
            a(3, 5), (4, 3, 5), (0, 20, 4))),
        "outs slots overlapping": (h, w, xs, c, np.lib.stride_tricks.as_strided(
            a(40), (4, 3, 5), (8, 20, 4))),
        "outs rows interleaved too tight": (h, w, xs, c, np.lib.stride_tricks.as_strided(
            tight, (4, 3, 5), (20, 60, 4))),
        "outs rows backward": (h, w, xs, c, a(4, 3, 5)[:, ::-1]),
        "outs overlapping xs": (h, w, spans, c, spans[:, :, :5]),
        "outs overlapping w": (h, weights, xs, c, weights[:, :3]),
        "outs overlapping c": (h, w, xs, c, np.lib.stride_tricks.as_strided(
            c, (4, 3, 5), (0, 20, 4))),
        "h a later slot": (interleaved[:, 3], w, xs[:3], c,
                           interleaved.transpose(1, 0, 2)[1:]),
        "h one slot apart, not the one before": (interleaved[:, 0], w, xs[:2], c,
                                                 interleaved.transpose(1, 0, 2)[2:]),
        "the step's own operands unfit (c of another shape)": (h, w, xs, a(3, 4), outs),
    }


@pytest.mark.parametrize("two_cores", [False, True])
@pytest.mark.parametrize("case", list(_steps_unfit_cases(np.random.default_rng(0))))
def test_steps_it_does_not_take_are_declined_untouched(_blas, case, two_cores, rng):
    _declined_untouched(lambda *operands: lstm_product_steps(*operands, OPENVINO_LSTM, False,
                                                              two_cores),
                        _steps_unfit_cases(rng)[case])


@pytest.mark.parametrize("mode", ["ignore", "warn", "raise", "call", "log", "print"])
def test_steps_report_floating_point_errors_once_after_the_last_step(_blas, mode, capfd):
    """An invalid value made by one step of four (its forget gate shut on an infinite c): the
    report of that step's own call, made once, after the steps."""
    batch, hidden, steps = 8, 64, 4
    w = np.zeros((4, hidden, hidden), np.float32)

    def operands():
        xs = np.zeros((steps, batch, 4 * hidden), np.float32)
        xs[2] = -1e30  # (steps 0 and 1 keep c infinite: f = 1/2, i * g = 0)
        c = np.full((batch, hidden), np.inf, np.float32)
        return np.zeros((batch, hidden), np.float32), xs, c

    def step_two(h, xs, c):
        return lstm_product_tail(h, w, xs[2], c, None, OPENVINO_LSTM, False, False)

    want = _fp_outcome(step_two, operands, "invalid", mode, capfd)
    assert any(want) == (mode != "ignore")
    for two_cores in (False, True):
        outs = np.empty((steps, batch, hidden), np.float32)
        got = _fp_outcome(lambda h, xs, c, two=two_cores, outs=outs: lstm_product_steps(
            h, w, xs, c, outs, OPENVINO_LSTM, False, two), operands, "invalid", mode, capfd)
        assert got == want, two_cores


def test_a_piece_s_product_too_long_for_one_core_s_blas_call_is_declined_on_two(_blas, rng):
    """K x H at OpenBLAS's threading threshold: a one-row piece's gemm would take BLAS's own
    threads, which the helper cannot share its core with; on one core it is the product's own
    call, as numpy would make it."""
    h, c = rng.standard_normal((2, 1024)).astype(np.float32), np.zeros((2, 512), np.float32)
    w = rng.standard_normal((4, 1024, 512)).astype(np.float32)
    x = np.zeros((2, 2048), np.float32)
    assert lstm_product_tail(h, w, x, c, None, OPENVINO_LSTM, False, True) is None
    assert lstm_product_tail(h, w, x, c, None, OPENVINO_LSTM, False, False) is not None


@pytest.mark.parametrize("mode", ["ignore", "warn", "raise", "call", "log", "print"])
def test_floating_point_errors_of_every_piece_are_reported_as_numpy_reports_them(_blas, mode,
                                                                                  capfd):
    """An invalid value in the batch's last rows only (the second piece, which the helper thread
    may run on two cores): reported as `lstm_tail` reports it, whichever thread ran it."""
    batch, hidden = 8, 64  # (a step large enough to be cut in pieces: `_pieces_split`)

    def operands():
        h = np.zeros((batch, hidden), np.float32)
        w = np.zeros((4, hidden, hidden), np.float32)
        x = np.zeros((batch, 4 * hidden), np.float32)
        x[batch // 2:] = -1e30  # (the forget gate shut: 0 * inf)
        c = np.zeros((batch, hidden), np.float32)
        c[batch // 2:] = np.inf
        return h, w, x, c

    def outcome(run):
        return _fp_outcome(run, operands, "invalid", mode, capfd)

    want = outcome(lambda h, w, x, c: _product_then_passes(h, w, x, c, OPENVINO_LSTM, False))
    assert any(want) == (mode != "ignore")
    for two_cores in [False] + [True] * 20:
        with _pieces_split(two_cores):
            got = outcome(lambda h, w, x, c, two=two_cores: lstm_product_tail(
                h, w, x, c, None, OPENVINO_LSTM, False, two))
        assert got == want, two_cores


@contextlib.contextmanager
def _rounding_upward():
    """The calling thread rounds toward +inf (C's fesetround), restored after."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    before = libm.fegetround()
    if libm.fesetround(0x800) != 0:  # (FE_UPWARD on x86)
        pytest.skip("no upward rounding to set here")
    try:
        yield
    finally:
        libm.fesetround(before)


def test_the_helper_computes_its_rows_under_the_caller_s_rounding(_blas):
    """With the caller's rounding changed after the helper thread started, the rows the helper
    computes round as the caller's do: the same values as on one core. (The gemm calls are exact
    here, integers, so that only the passes' rounding can differ.)"""
    if not gemm.helper_runs():
        pytest.skip("no helper thread's help here (one core, or BLAS held to one thread)")
    batch, inputs, hidden = 16, 32, 64
    rng = np.random.default_rng(5)
    h = rng.integers(-2, 3, (batch, inputs)).astype(np.float32)
    w = rng.integers(-2, 3, (4, inputs, hidden)).astype(np.float32) / 8
    x = rng.integers(-8, 9, (batch, 4 * hidden)).astype(np.float32) / 8
    c = rng.standard_normal((batch, hidden)).astype(np.float32)
    nearest = lstm_product_tail(h, w, x, c, None, OPENVINO_LSTM, False, False)
    with _rounding_upward():
        one_core = lstm_product_tail(h, w, x, c, None, OPENVINO_LSTM, False, False)

        def two_cores():
            for got, want in zip(lstm_product_tail(h, w, x, c, None, OPENVINO_LSTM, False, True),
                                 one_core):
                np.testing.assert_array_equal(got, want)

        _until_helped(two_cores, pieces=20)
    assert not np.array_equal(one_core[0], nearest[0])  # (the rounding mattered)


@contextlib.contextmanager
def _declining(monkeypatch):
    """The cell kernels with the passes of `_gate_passes` declining every call: their ufunc
    passes run."""
    with monkeypatch.context() as patch:
        for module in (cells, fused):
            patch.setattr(module, "lstm_product_tail", lambda *args: None)
            patch.setattr(module, "lstm_tail", lambda *args: None)
        patch.setattr(cells, "gru_product_tail", lambda *args: None)
        patch.setattr(cells, "gru_gates", lambda *args: None)
        patch.setattr(cells, "gru_blend", lambda *args: None)
        patch.setattr(cells, "product_tanh", lambda *args: None)
        yield


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kernel", ["LSTMCell blocked", "LSTMStep blocked"])
def test_the_kernels_make_the_same_values_where_it_declines(kernel, dtype, monkeypatch, rng):
    """Each LSTM kernel's blocked step, with every gate order the fused step takes, returns the
    same (h', c') and writes the same out= whether its passes are one call or ufunc calls."""
    batch, hidden = 3, 5
    if kernel == "LSTMCell blocked":
        orders = [None]
    else:
        orders = list(itertools.permutations(range(4)))[::5]
    for blocks in orders:
        if blocks is None:
            step = cells.lstm_step({}).candidates[cells.BLOCKED]
            r = rng.standard_normal((4 * hidden, hidden)).astype(dtype)
            xw = rng.standard_normal((batch, 4 * hidden)).astype(dtype)
            h, c = (rng.standard_normal((batch, hidden)).astype(dtype) for _ in range(2))
            args = (xw, h, c, r)
        else:
            step = fused.lstm_step({"axis": -1, "blocks": list(blocks)}, 2).candidates[
                "blocked gates"]
            r = rng.standard_normal((hidden, 4 * hidden)).astype(dtype)
            x = rng.standard_normal((batch, 4 * hidden)).astype(dtype)
            h, c = (rng.standard_normal((batch, hidden)).astype(dtype) for _ in range(2))
            args = (h, r, c, x)
        r.flags.writeable = False
        results = []
        for declining in (False, True):
            out = np.full((batch, 2, hidden), np.nan, dtype)[:, 1]
            with _declining(monkeypatch) if declining else contextlib.nullcontext():
                h_new, c_new = step(*args, out)
            assert h_new is out
            results.append((h_new.copy(), c_new))
        for one_call, ufunc_calls in zip(*results):
            np.testing.assert_array_equal(one_call, ufunc_calls, err_msg=str(blocks))



def _gru_numpy_gates(zr, h, reset_h):
    """`gru_gates`'s passes as the cell's numpy calls: (reset * h if `reset_h` else None, z,
    the reset gate)."""
    hidden = h.shape[1]
    _math.sigmoid(zr, out=zr)
    z, reset = zr[:, :hidden], zr[:, hidden:]
    return (reset * h if reset_h else None), z, reset


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64"]), batch=st.integers(1, 9),
       hidden=st.integers(1, 40), linear_before_reset=st.booleans(),
       out_form=st.sampled_from(["none", "contiguous", "strided"]), h_strided=st.booleans(),
       scale=st.sampled_from([3.0, 200.0]), seed=st.integers(0, 2**16))
def test_the_gru_passes_make_what_numpy_s_ufunc_calls_make(dtype, batch, hidden,
                                                           linear_before_reset, out_form,
                                                           h_strided, scale, seed):
    """(At scale 200, gates far past exp's cap: sigmoid's capped passes matter.)"""
    rng = np.random.default_rng(seed)
    pre_zr = (rng.standard_normal((batch, 2 * hidden)) * scale).astype(dtype)
    pre_n = (rng.standard_normal((batch, hidden)) * 3).astype(dtype)
    h = _rows(rng, batch, hidden, dtype, h_strided)
    h_before = h.copy()
    xw = rng.standard_normal((batch, 2, 3 * hidden)).astype(dtype)[:, 1] \
        if linear_before_reset else None
    output = np.full((batch, 3, hidden), np.nan, dtype)
    out = {"none": None, "contiguous": np.full((batch, hidden), np.nan, dtype),
           "strided": output[:, 1]}[out_form]
    # The oracle: the cell's ufunc calls.
    want_zr = pre_zr.copy()
    want_reset_h, z, reset = _gru_numpy_gates(want_zr, h, not linear_before_reset)
    n = pre_n.copy()
    if linear_before_reset:
        n *= reset
        n += xw[:, 2 * hidden:]
    np.tanh(n, out=n)
    want_h = np.subtract(h, n)
    want_h *= z
    want_h += n
    # The passes as calls.
    zr = pre_zr.copy()
    gated = gru_gates(zr, h, _math.sigmoid_cap(dtype), not linear_before_reset)
    np.testing.assert_array_equal(zr, want_zr)
    if linear_before_reset:
        assert gated is zr
    else:
        np.testing.assert_array_equal(gated, want_reset_h)
        assert gated.flags.c_contiguous and not np.shares_memory(gated, h)
    candidate = pre_n.copy()
    h_new = gru_blend(candidate, h, zr, out, xw)
    np.testing.assert_array_equal(h_new, want_h)
    np.testing.assert_array_equal(candidate, n)  # (overwritten with n, as the ufunc calls do)
    np.testing.assert_array_equal(h, h_before)
    if out is not None:
        assert h_new is out
        if out_form == "strided":
            assert np.isnan(output[:, [0, 2]]).all()
    # ... and they are the GRU's equations.
    with np.errstate(over="ignore"):
        sig = 1 / (1 + np.exp(-pre_zr.astype(np.float64)))
    exact_n = pre_n.astype(np.float64)
    if linear_before_reset:
        exact_n = exact_n * sig[:, hidden:] + xw[:, 2 * hidden:]
    exact_n = np.tanh(exact_n)
    exact = (1 - sig[:, :hidden]) * exact_n + sig[:, :hidden] * h
    tol = 1e-5 if dtype == "float32" else 1e-12
    with np.errstate(over="ignore"):  # (exp of -200 * -3 and so on, in the float64 oracle)
        np.testing.assert_allclose(h_new, exact, rtol=tol, atol=tol)


def _gru_unfit_cases(rng):
    f32 = np.float32

    def a(shape, dtype=f32):
        return rng.standard_normal(shape).astype(dtype)

    cap32 = _math.sigmoid_cap(f32)
    shared = a((3, 10))
    return {
        "gates: float16": ("gates", a((3, 10), np.float16), a((3, 5), np.float16),
                           np.asarray(np.float16(10)), True),
        "gates: h of another dtype": ("gates", a((3, 10)), a((3, 5), np.float64), cap32, True),
        "gates: cap of another dtype": ("gates", a((3, 10)), a((3, 5)),
                                        _math.sigmoid_cap(np.float64), True),
        "gates: cap not 0-d": ("gates", a((3, 10)), a((3, 5)), np.full(1, 80, f32), True),
        "gates: zr not contiguous": ("gates", a((3, 20))[:, ::2], a((3, 5)), cap32, True),
        "gates: zr not 2H wide": ("gates", a((3, 9)), a((3, 5)), cap32, True),
        "gates: h columns strided": ("gates", a((3, 10)), a((3, 10))[:, ::2], cap32, True),
        "gates: empty": ("gates", a((0, 10)), a((0, 5)), cap32, True),
        "blend: candidate not contiguous": ("blend", a((3, 10))[:, ::2], a((3, 5)), a((3, 10)),
                                            None, None),
        "blend: mixed dtypes": ("blend", a((3, 5)), a((3, 5), np.float64), a((3, 10)), None,
                                None),
        "blend: zr of another width": ("blend", a((3, 5)), a((3, 5)), a((3, 8)), None, None),
        "blend: xw of another width": ("blend", a((3, 5)), a((3, 5)), a((3, 10)), None,
                                       a((3, 10))),
        "blend: out overlapping h": ("blend", a((3, 5)), shared[:, :5], a((3, 10)),
                                     shared[:, 5:], None),
        "blend: out overlapping zr": ("blend", a((3, 5)), a((3, 5)), shared, shared[:, 5:],
                                      None),
        "blend: out of another dtype": ("blend", a((3, 5)), a((3, 5)), a((3, 10)),
                                        a((3, 5), np.float64), None),
        "blend: out not an array": ("blend", a((3, 5)), a((3, 5)), a((3, 10)),
                                    [[0.0] * 5] * 3, None),
        "blend: out read-only": ("blend", a((3, 5)), a((3, 5)), a((3, 10)),
                                 _read_only(a((3, 5))), None),
        "blend: out rows on one row": ("blend", a((3, 5)), a((3, 5)), a((3, 10)),
                                       _rows_on_one(a((3, 5))), None),
        "blend: candidate read-only": ("blend", _read_only(a((3, 5))), a((3, 5)), a((3, 10)),
                                       None, None),
        "blend: h byte-swapped": ("blend", a((3, 5)), a((3, 5)).astype(">f4"), a((3, 10)),
                                  None, None),
        "gates: zr read-only": ("gates", _read_only(a((3, 10))), a((3, 5)), cap32, True),
        "gates: zr byte-swapped": ("gates", a((3, 10)).astype(">f4"), a((3, 5)), cap32, True),
    }


@pytest.mark.parametrize("case", list(_gru_unfit_cases(np.random.default_rng(0))))
def test_gru_operands_it_does_not_take_are_declined_untouched(case, rng):
    which, *args = _gru_unfit_cases(rng)[case]
    _declined_untouched(gru_gates if which == "gates" else gru_blend, args)


@pytest.mark.parametrize("mode", ["ignore", "warn", "raise", "call", "log", "print"])
@pytest.mark.parametrize("which", ["gates", "blend"])
def test_gru_floating_point_errors_are_reported_as_numpy_reports_them(which, mode, capfd):
    """The gates: exp underflowing on large gates (sigmoid 1); the blend: an update gate of
    exactly 0 times a state of inf (invalid, in the multiply)."""
    def gates_by_numpy(zr, h):
        _gru_numpy_gates(zr, h, True)

    def gates_in_one_call(zr, h):
        gru_gates(zr, h, _math.sigmoid_cap(np.float32), True)

    def blend_by_numpy(candidate, h, zr):
        np.tanh(candidate, out=candidate)
        h_new = np.subtract(h, candidate)
        h_new *= zr[:, :h.shape[1]]
        h_new += candidate

    def blend_in_one_call(candidate, h, zr):
        gru_blend(candidate, h, zr, None, None)

    def operands():
        if which == "gates":
            return np.full((2, 6), 200.0, np.float32), np.ones((2, 3), np.float32)
        return (np.ones((2, 3), np.float32), np.full((2, 3), np.inf, np.float32),
                np.zeros((2, 6), np.float32))

    def outcome(run):
        return _fp_outcome(run, operands, "under" if which == "gates" else "invalid", mode,
                           capfd)

    by_numpy, in_one_call = {"gates": (gates_by_numpy, gates_in_one_call),
                             "blend": (blend_by_numpy, blend_in_one_call)}[which]
    want = outcome(by_numpy)
    assert outcome(in_one_call) == want
    assert any(want) == (mode != "ignore")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_the_gru_step_makes_the_same_values_where_they_decline(linear_before_reset, dtype,
                                                               monkeypatch, rng):
    """OpenVINO's GRUCell step, batch-major, returns the same h' and writes the same out=
    whether its passes are two calls or ufunc calls."""
    batch, hidden = 3, 5
    step = cells.gru_step({"linear_before_reset": linear_before_reset}).candidates[
        "batch-major gates"]
    r = rng.standard_normal((3 * hidden, hidden)).astype(dtype)
    r.flags.writeable = False
    xw = rng.standard_normal((batch, 3 * hidden)).astype(dtype)
    h = rng.standard_normal((batch, hidden)).astype(dtype)
    b = rng.standard_normal(4 * hidden).astype(dtype)
    results = []
    for declining in (False, True):
        out = np.full((batch, 2, hidden), np.nan, dtype)[:, 1]
        with _declining(monkeypatch) if declining else contextlib.nullcontext():
            got = step(xw, h, r, b, out)
        assert got is out
        results.append(got.copy())
    np.testing.assert_array_equal(*results)


def _gru_products_then_passes(h, w_zr, w_n, x, bias_n, cap):
    """A GRU step as the cell made it before `gru_product_tail`: each product one BLAS call with
    its addend copied in first (`_two_core.multiply` on one core), `gru_gates`, `gru_blend`."""
    batch, hidden = h.shape
    x = np.broadcast_to(x, (batch, 3 * hidden))
    zr = _two_core.multiply(h, w_zr, x[:, :2 * hidden], False)
    gated = gru_gates(zr, h, cap, bias_n is None)
    if bias_n is None:
        return gru_blend(_two_core.multiply(gated, w_n, x[:, 2 * hidden:], False), h, zr, None,
                         None)
    return gru_blend(_two_core.multiply(h, w_n, bias_n[None], False), h, zr, None, x)


def _gru_in_float64(h, w_zr, w_n, x, bias_n):
    h, w_zr, w_n, x = (a.astype(np.float64) for a in (h, w_zr, w_n, x))
    hidden = h.shape[1]
    with np.errstate(over="ignore"):
        zr = 1 / (1 + np.exp(-(x[:, :2 * hidden] + h @ w_zr)))
    z, reset = zr[:, :hidden], zr[:, hidden:]
    if bias_n is None:
        n = np.tanh(x[:, 2 * hidden:] + (reset * h) @ w_n)
    else:
        n = np.tanh(x[:, 2 * hidden:] + reset * (h @ w_n + bias_n.astype(np.float64)))
    return (1 - z) * n + z * h


@settings(max_examples=80, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64"]), batch=st.integers(1, 20),
       hidden=st.integers(1, 40), linear_before_reset=st.booleans(),
       x_form=st.sampled_from(["rows", "strided rows", "one row"]),
       out_form=st.sampled_from(["none", "contiguous", "strided"]), two_cores=st.booleans(),
       seed=st.integers(0, 2**16))
def test_the_gru_products_and_passes_make_what_the_products_then_the_passes_make(
        _blas, dtype, batch, hidden, linear_before_reset, x_form, out_form, two_cores, seed):
    """On one core exactly the products' own BLAS calls, `gru_gates` and `gru_blend`; on two
    cores the same to rounding; both the GRU's equations."""
    rng = np.random.default_rng(seed)
    h = rng.standard_normal((batch, hidden)).astype(dtype)
    w_zr = (rng.standard_normal((hidden, 2 * hidden)) / np.sqrt(hidden)).astype(dtype)
    w_n = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(dtype)
    x = {"rows": lambda: rng.standard_normal((batch, 3 * hidden)),
         "strided rows": lambda: rng.standard_normal((batch, 2, 3 * hidden))[:, 1],
         "one row": lambda: rng.standard_normal((1, 3 * hidden))}[x_form]().astype(dtype)
    bias_n = rng.standard_normal(hidden).astype(dtype) if linear_before_reset else None
    cap = _math.sigmoid_cap(dtype)
    before = [a.copy() for a in (h, w_zr, w_n, x)]
    output = np.full((batch, 3, hidden), np.nan, dtype)
    out = {"none": None, "contiguous": np.full((batch, hidden), np.nan, dtype),
           "strided": output[:, 1]}[out_form]
    want = _gru_products_then_passes(h, w_zr, w_n, x, bias_n, cap)
    got = gru_product_tail(h, w_zr, w_n, x, bias_n, cap, out, two_cores)
    if two_cores:
        tol = 1e-6 if dtype == "float32" else 1e-14
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)
    for was, now in zip(before, (h, w_zr, w_n, x)):
        np.testing.assert_array_equal(now, was)
    assert got.dtype == np.dtype(dtype)
    if out is not None:
        assert got is out
        if out_form == "strided":
            assert np.isnan(output[:, [0, 2]]).all()
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, _gru_in_float64(h, w_zr, w_n, x, bias_n), rtol=tol,
                               atol=tol)


def _gru_product_unfit_cases(rng):
    f32 = np.float32

    def a(*shape, dtype=f32):
        return rng.standard_normal(shape).astype(dtype)

    h, w_zr, w_n, x, cap = a(3, 5), a(5, 10), a(5, 5), a(3, 15), _math.sigmoid_cap(f32)
    slots = a(3, 2, 6)
    return {
        "float16": (h.astype(np.float16), w_zr.astype(np.float16), w_n.astype(np.float16),
                    x.astype(np.float16), None, np.asarray(np.float16(10)), None),
        "mixed dtypes": (h, w_zr.astype(np.float64), w_n, x, None, cap, None),
        "cap of another dtype": (h, w_zr, w_n, x, None, _math.sigmoid_cap(np.float64), None),
        "h columns strided": (a(3, 10)[:, ::2], w_zr, w_n, x, None, cap, None),
        "w_zr not 2H wide": (h, a(5, 9), w_n, x, None, cap, None),
        "w_n not square": (h, w_zr, a(5, 4), x, None, cap, None),
        "x not 3H wide": (h, w_zr, w_n, a(3, 14), None, cap, None),
        "x of another batch": (h, w_zr, w_n, a(2, 15), None, cap, None),
        "x 1-D": (h, w_zr, w_n, a(15), None, cap, None),
        "bias of another length": (h, w_zr, w_n, x, a(4), cap, None),
        "bias not an array": (h, w_zr, w_n, x, [0.0] * 5, cap, None),
        "out read-only": (h, w_zr, w_n, x, None, cap, _read_only(h)),
        "out rows on one row": (h, w_zr, w_n, x, None, cap, _rows_on_one(h)),
        "out that is h": (h, w_zr, w_n, x, None, cap, h),
        "out h's rows, another column": (slots[:, 0, 1:], w_zr, w_n, x, None, cap,
                                         slots[:, 0, :5]),
        "out overlapping x": (h, w_zr, w_n, x, None, cap, x[:, :5]),
        "empty": (a(0, 5), w_zr, w_n, a(0, 15), None, cap, None),
    }


@pytest.mark.parametrize("two_cores", [False, True])
@pytest.mark.parametrize("case", list(_gru_product_unfit_cases(np.random.default_rng(0))))
def test_gru_product_operands_it_does_not_take_are_declined_untouched(_blas, case, two_cores,
                                                                       rng):
    _declined_untouched(lambda *operands: gru_product_tail(*operands, two_cores),
                        _gru_product_unfit_cases(rng)[case])


@pytest.mark.parametrize("mode", ["ignore", "warn", "raise", "call", "log", "print"])
@pytest.mark.parametrize("where", ["gates", "blend"])
def test_gru_floating_point_errors_of_every_piece_are_reported_as_numpy_reports_them(
        _blas, where, mode, capfd):
    """A floating-point error in the batch's last rows only, whichever thread runs their piece,
    reported as the separate calls report it: in the gates, an underflow (sigmoid's reciprocal
    of 1 + exp(its cap), gates far below 0); in the blend, an overflow (linear_before_reset's
    n += xw's third block, both near float32's largest)."""
    batch, hidden = 8, 64  # (a step large enough to be cut in pieces: `_pieces_split`)
    big = np.float32(3e38)

    def operands():
        h = np.zeros((batch, hidden), np.float32)
        w_zr = np.zeros((hidden, 2 * hidden), np.float32)
        w_n = np.zeros((hidden, hidden), np.float32)
        x = np.zeros((batch, 3 * hidden), np.float32)
        if where == "gates":
            x[batch // 2:] = -1e30
            return h, w_zr, w_n, x, None
        x[:, :2 * hidden] = 1e30  # (the reset gate 1)
        x[batch // 2:, 2 * hidden:] = big
        return h, w_zr, w_n, x, np.full(hidden, big)

    kind = "under" if where == "gates" else "over"

    def outcome(run):
        return _fp_outcome(run, operands, kind, mode, capfd)

    cap = _math.sigmoid_cap(np.float32)
    want = outcome(lambda h, w_zr, w_n, x, b: _gru_products_then_passes(h, w_zr, w_n, x, b,
                                                                        cap))
    assert any(want) == (mode != "ignore")
    for two_cores in [False] + [True] * 20:
        with _pieces_split(two_cores):
            got = outcome(lambda h, w_zr, w_n, x, b, two=two_cores: gru_product_tail(
                h, w_zr, w_n, x, b, cap, None, two))
        assert got == want, two_cores


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64"]), batch=st.integers(1, 20),
       hidden=st.integers(1, 40), steps=st.integers(1, 6), linear_before_reset=st.booleans(),
       layout=st.sampled_from(["[B, T, H]", "[T, B, H]", "[T, B, H] reversed",
                               "[T, B, H] padded rows"]),
       h_in_slot=st.booleans(), x_form=st.sampled_from(["rows", "strided steps", "one row"]),
       two_cores=st.booleans(), staged=st.booleans(), seed=st.integers(0, 2**16))
def test_gru_steps_in_one_call_make_what_a_call_a_step_makes(
        _blas, dtype, batch, hidden, steps, linear_before_reset, layout, h_in_slot, x_form,
        two_cores, staged, seed):
    """Value for value what `gru_product_tail` makes called once a step on the h' of the call
    before, whatever the output's layout, h' made in its slot or staged; the other slots and
    the operands left as they were."""
    rng = np.random.default_rng(seed)
    w_zr = (rng.standard_normal((hidden, 2 * hidden)) / np.sqrt(hidden)).astype(dtype)
    w_n = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(dtype)
    xs = {"rows": lambda: rng.standard_normal((steps, batch, 3 * hidden)),
          "strided steps": lambda: rng.standard_normal((2 * steps, batch, 3 * hidden))[::2],
          "one row": lambda: rng.standard_normal((steps, 1, 3 * hidden))}[x_form]().astype(dtype)
    bias_n = rng.standard_normal(hidden).astype(dtype) if linear_before_reset else None
    cap = _math.sigmoid_cap(dtype)
    want_output, want_slots = _slots(layout, steps, batch, hidden, dtype)
    output, slots = _slots(layout, steps, batch, hidden, dtype)
    start = rng.standard_normal((batch, hidden)).astype(dtype)
    want_slots[0] = slots[0] = start
    h = slots[0] if h_in_slot else start.copy()
    operands = [a for a in (h, w_zr, w_n, xs, bias_n) if a is not None]
    before = [a.copy() for a in operands]
    want_h = want_slots[0]
    for s in range(steps):
        want_h = gru_product_tail(want_h, w_zr, w_n, xs[s], bias_n, cap, want_slots[s + 1],
                                  two_cores)
    split = _two_core.products_split()
    done = gru_product_steps(h, w_zr, w_n, xs, bias_n, cap, slots[1:], two_cores, staged)
    cut = two_cores and batch > 1 and 3 * batch * hidden * hidden >= _two_core.SMALLEST
    assert _two_core.products_split() - split == (steps if cut else 0)  # (a job a step)
    assert done is not None
    np.testing.assert_array_equal(output, want_output)  # (NaN where nothing was written)
    assert np.shares_memory(done, slots[steps]) and done.shape == (batch, hidden)
    for was, now in zip(before, operands):
        np.testing.assert_array_equal(now, was)


def _gru_steps_unfit_cases(rng):
    f32 = np.float32

    def a(*shape, dtype=f32):
        return rng.standard_normal(shape).astype(dtype)

    h, w_zr, w_n, xs, outs = a(3, 5), a(5, 10), a(5, 5), a(4, 3, 15), a(4, 3, 5)
    cap = _math.sigmoid_cap(f32)
    xs_in, xs_slots = _slot_one_in(rng, (4, 3, 15))
    w_zr_in, w_zr_slots = _slot_one_in(rng, (5, 10))
    w_n_in, w_n_slots = _slot_one_in(rng, (5, 5))
    bias_in, bias_slots = _slot_one_in(rng, (15,))  # (slots 15 values apart: the bias, 5)
    bias_in = bias_in[:5]
    tight = a(4, 3, 5)  # (as in _steps_unfit_cases)
    return {
        "a later slot in xs": (h, w_zr, w_n, xs_in, None, cap, xs_slots),
        "a later slot in w_zr": (h, w_zr_in, w_n, xs, None, cap, w_zr_slots),
        "a later slot in w_n": (h, w_zr, w_n_in, xs, None, cap, w_n_slots),
        "a later slot in the bias": (h, w_zr, w_n, xs, bias_in, cap, bias_slots),
        "xs 2-D": (h, w_zr, w_n, a(4, 15), None, cap, outs),
        "no steps": (h, w_zr, w_n, a(0, 3, 15), None, cap, a(0, 3, 5)),
        "steps disagree": (h, w_zr, w_n, xs, None, cap, a(3, 3, 5)),
        "outs of another dtype": (h, w_zr, w_n, xs, None, cap, a(4, 3, 5, dtype=np.float64)),
        "outs read-only": (h, w_zr, w_n, xs, None, cap, _read_only(outs)),
        "outs all one slot": (h, w_zr, w_n, xs, None, cap, np.lib.stride_tricks.as_strided(
            a(3, 5), (4, 3, 5), (0, 20, 4))),
        "outs rows interleaved too tight": (h, w_zr, w_n, xs, None, cap,
                                            np.lib.stride_tricks.as_strided(
                                                tight, (4, 3, 5), (20, 60, 4))),
        "outs overlapping h, not the slot before": (outs[1], w_zr, w_n, xs, None, cap, outs),
        "the step's own operands unfit (x of another width)": (h, w_zr, w_n, a(4, 3, 14), None,
                                                               cap, outs),
    }


@pytest.mark.parametrize("two_cores", [False, True])
@pytest.mark.parametrize("case", list(_gru_steps_unfit_cases(np.random.default_rng(0))))
def test_gru_steps_it_does_not_take_are_declined_untouched(_blas, case, two_cores, rng):
    _declined_untouched(lambda *operands: gru_product_steps(*operands, two_cores),
                        _gru_steps_unfit_cases(rng)[case])


@pytest.mark.parametrize("batch, hidden", [(8, 64), (16, 48), (17, 40), (3, 96)])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_step_cut_in_pieces_makes_what_the_whole_step_makes(_blas, cell, batch, hidden, rng):
    """Steps large enough to be cut in pieces of rows (the hypothesis tests' are mostly too
    small): each piece's rows as the products then the passes make them, to rounding, and
    within a piece-cut output slot nothing beside it written."""
    h = rng.standard_normal((batch, hidden)).astype(np.float32)
    output = np.full((batch, 3, hidden), np.nan, np.float32)
    if cell == "lstm":
        w = (rng.standard_normal((4, hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
        x = rng.standard_normal((batch, 4 * hidden)).astype(np.float32)
        c = rng.standard_normal((batch, hidden)).astype(np.float32)
        want = _product_then_passes(h, w, x, c, ARRANGED_LSTM, True)
        with _pieces_split():
            got = lstm_product_tail(h, w, x, c, output[:, 1], ARRANGED_LSTM, True, True)
    else:
        w_zr = (rng.standard_normal((hidden, 2 * hidden)) / np.sqrt(hidden)).astype(np.float32)
        w_n = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
        x = rng.standard_normal((batch, 3 * hidden)).astype(np.float32)
        bias_n = rng.standard_normal(hidden).astype(np.float32)
        cap = _math.sigmoid_cap(np.float32)
        want = (_gru_products_then_passes(h, w_zr, w_n, x, None, cap),
                _gru_products_then_passes(h, w_zr, w_n, x, bias_n, cap))
        with _pieces_split():
            got = (gru_product_tail(h, w_zr, w_n, x, None, cap, output[:, 1], True),)
        with _pieces_split():
            got += (gru_product_tail(h, w_zr, w_n, x, bias_n, cap, None, True),)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-6, atol=1e-6)
    assert got[0] is output[:, 1] or got[0].base is output
    assert np.isnan(output[:, [0, 2]]).all()


# -- product_tanh: a plain RNN's step, tanh(x + h @ r), as one call ---------------------------

def _product_then_tanh(h, r, x):
    """tanh(x + h @ r) as ProductPlus and Tanh made it before `product_tanh`: BLAS adding the
    product to a copy of x (`_two_core.multiply`, on one core), then np.tanh."""
    return np.tanh(_two_core.multiply(h, r, x, False))


@settings(max_examples=80, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64"]), batch=st.integers(1, 20),
       inputs=st.integers(1, 40), width=st.integers(1, 40),
       x_form=st.sampled_from(["rows", "strided rows", "one row", "1-D", "0-d",
                               "a numpy scalar"]),
       out_form=st.sampled_from(["none", "contiguous", "strided"]), two_cores=st.booleans(),
       seed=st.integers(0, 2**16))
def test_the_product_and_tanh_make_what_the_product_then_tanh_make(
        _blas, dtype, batch, inputs, width, x_form, out_form, two_cores, seed):
    """On one core, exactly BLAS's product into x's copy (a row of x's one value, for a 0-d x)
    then np.tanh; on two cores, where each piece's gemm makes its rows, the same to rounding;
    both tanh(x + h @ r) in float64."""
    rng = np.random.default_rng(seed)
    h = rng.standard_normal((batch, inputs)).astype(dtype)
    r = (rng.standard_normal((inputs, width)) / np.sqrt(inputs)).astype(dtype)
    x = {"rows": lambda: rng.standard_normal((batch, width)),
         "strided rows": lambda: rng.standard_normal((batch, 3, width))[:, 1],
         "one row": lambda: rng.standard_normal((1, width)),
         "1-D": lambda: rng.standard_normal(width),
         "0-d": lambda: np.asarray(rng.standard_normal()),
         "a numpy scalar": lambda: np.float64(rng.standard_normal())}[x_form]().astype(dtype)
    before = [a.copy() for a in (h, r, x)]
    output = np.full((batch, 3, width), np.nan, dtype)
    out = {"none": None, "contiguous": np.full((batch, width), np.nan, dtype),
           "strided": output[:, 1]}[out_form]
    want = _product_then_tanh(h, r, np.full(width, x) if np.ndim(x) == 0 else x)
    got = product_tanh(h, r, x, out, two_cores)
    if two_cores:
        tol = 1e-6 if dtype == "float32" else 1e-14
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)
    for was, now in zip(before, (h, r, x)):
        np.testing.assert_array_equal(now, was)
    assert got.dtype == np.dtype(dtype) and got.shape == (batch, width)
    if out is not None:
        assert got is out
        if out_form == "strided":
            assert np.isnan(output[:, [0, 2]]).all()
    exact = np.tanh(x.astype(np.float64) + h.astype(np.float64) @ r.astype(np.float64))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, exact, rtol=tol, atol=tol)


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64"]), batch=st.integers(1, 24),
       width=st.integers(1, 96), steps=st.integers(1, 6),
       layout=st.sampled_from(["[B, T, H]", "[T, B, H]", "[T, B, H] reversed",
                               "[T, B, H] padded rows"]),
       h_in_slot=st.booleans(), x_form=st.sampled_from(["rows", "strided steps", "one row"]),
       two_cores=st.booleans(), staged=st.booleans(), seed=st.integers(0, 2**16))
def test_rnn_steps_in_one_call_make_what_a_call_a_step_makes(
        _blas, dtype, batch, width, steps, layout, h_in_slot, x_form, two_cores, staged, seed):
    """Value for value what `product_tanh` makes called once a step on the h' of the call
    before, whatever the output's layout, h' made in its slot or staged; the other slots and
    the operands left as they were."""
    rng = np.random.default_rng(seed)
    r = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(dtype)
    xs = {"rows": lambda: rng.standard_normal((steps, batch, width)),
          "strided steps": lambda: rng.standard_normal((2 * steps, batch, width))[::2],
          "one row": lambda: rng.standard_normal((steps, 1, width))}[x_form]().astype(dtype)
    want_output, want_slots = _slots(layout, steps, batch, width, dtype)
    output, slots = _slots(layout, steps, batch, width, dtype)
    start = rng.standard_normal((batch, width)).astype(dtype)
    want_slots[0] = slots[0] = start
    h = slots[0] if h_in_slot else start.copy()
    before = [a.copy() for a in (h, r, xs)]
    want_h = want_slots[0]
    for s in range(steps):
        want_h = product_tanh(want_h, r, xs[s], want_slots[s + 1], two_cores)
    split = _two_core.products_split()
    done = product_tanh_steps(h, r, xs, slots[1:], two_cores, staged)
    cut = two_cores and batch > 1 and batch * width * width >= _two_core.SMALLEST
    assert _two_core.products_split() - split == (steps if cut else 0)  # (a job a step)
    assert done is not None
    np.testing.assert_array_equal(output, want_output)  # (NaN where nothing was written)
    assert np.shares_memory(done, slots[steps]) and done.shape == (batch, width)
    for was, now in zip(before, (h, r, xs)):
        np.testing.assert_array_equal(now, was)


def _rnn_steps_unfit_cases(rng):
    f32 = np.float32

    def a(*shape, dtype=f32):
        return rng.standard_normal(shape).astype(dtype)

    h, r, xs, outs = a(3, 5), a(5, 5), a(4, 3, 5), a(4, 3, 5)
    xs_in, xs_slots = _slot_one_in(rng, (4, 3, 5))
    r_in, r_slots = _slot_one_in(rng, (5, 5))
    tight = a(4, 3, 5)  # (as in _steps_unfit_cases)
    return {
        "a later slot in xs": (h, r, xs_in, xs_slots),
        "a later slot in r": (h, r_in, xs, r_slots),
        "xs 2-D": (h, r, a(4, 5), outs),
        "no steps": (h, r, a(0, 3, 5), a(0, 3, 5)),
        "steps disagree": (h, r, xs, a(3, 3, 5)),
        "h' unfit for h (K != N)": (a(3, 4), a(4, 5), xs, outs),
        "outs of another dtype": (h, r, xs, a(4, 3, 5, dtype=np.float64)),
        "outs read-only": (h, r, xs, _read_only(outs)),
        "outs all one slot": (h, r, xs, np.lib.stride_tricks.as_strided(
            a(3, 5), (4, 3, 5), (0, 20, 4))),
        "outs rows interleaved too tight": (h, r, xs, np.lib.stride_tricks.as_strided(
            tight, (4, 3, 5), (20, 60, 4))),
        "outs overlapping h, not the slot before": (outs[1], r, xs, outs),
        "the step's own operands unfit (x of another width)": (h, r, a(4, 3, 6), outs),
    }


@pytest.mark.parametrize("two_cores", [False, True])
@pytest.mark.parametrize("case", list(_rnn_steps_unfit_cases(np.random.default_rng(0))))
def test_rnn_steps_it_does_not_take_are_declined_untouched(_blas, case, two_cores, rng):
    _declined_untouched(lambda *operands: product_tanh_steps(*operands, two_cores),
                        _rnn_steps_unfit_cases(rng)[case])


@pytest.mark.parametrize("batch, inputs, width", [(16, 64, 64), (17, 128, 128), (3, 96, 256)])
def test_a_product_and_tanh_cut_in_pieces_makes_what_the_whole_makes(_blas, batch, inputs,
                                                                     width, rng):
    """Steps large enough to be cut in pieces of rows, written into a slot of an output whose
    neighbouring slot holds h where it is as wide (a loop's emitted state living in its
    output): each piece's rows as the product then tanh make them, and nothing beside the slot
    written."""
    output = np.full((batch, 3, width), np.nan, np.float32)
    h = output[:, 0] if inputs == width else np.empty((batch, inputs), np.float32)
    h[...] = rng.standard_normal(h.shape)
    r = (rng.standard_normal((inputs, width)) / np.sqrt(inputs)).astype(np.float32)
    x = rng.standard_normal((1, width)).astype(np.float32)
    want = _product_then_tanh(h, r, x)
    with _pieces_split():
        got = product_tanh(h, r, x, output[:, 1], True)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert got.base is output and np.isnan(output[:, 2]).all()


def _product_tanh_unfit_cases(rng):
    def a(*shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    h, r, x = a(3, 4), a(4, 5), a(3, 5)
    shared, square, tall = a(3, 10), a(3, 4), a(7, 5)
    return {
        "float16": (h.astype(np.float16), r.astype(np.float16), x.astype(np.float16), None),
        "int": (a(3, 4, dtype=np.int32), a(4, 5, dtype=np.int32), a(3, 5, dtype=np.int32),
                None),
        "mixed dtypes": (h, r.astype(np.float64), x, None),
        "h 1-D": (a(4), r, x, None),
        "h columns strided": (a(3, 8)[:, ::2], r, x, None),
        "h byte-swapped": (h.astype(">f4"), r, x, None),
        "h unaligned": (_unaligned(h), r, x, None),
        "r of another length": (h, a(5, 5), x, None),
        "r columns strided": (h, a(4, 10)[:, ::2], x, None),
        "r rows overlapping": (h, np.lib.stride_tricks.as_strided(a(12), (4, 5), (8, 4)), x,
                               None),
        "r one column, one row for all": (h, np.broadcast_to(a(1, 1), (4, 1)), a(3, 1), None),
        "x of another width": (h, r, a(3, 6), None),
        "x of another batch": (h, r, a(2, 5), None),
        "x 3-D": (h, r, a(1, 3, 5), None),
        "x 0-d of another dtype": (h, r, np.asarray(0.5), None),
        "x a numpy scalar of another dtype": (h, r, np.float64(0.5), None),
        "x 0-d byte-swapped": (h, r, np.asarray(0.5, ">f4"), None),
        "x a Python float": (h, r, 0.5, None),
        "empty": (a(0, 4), r, a(0, 5), None),
        "out of another dtype": (h, r, x, a(3, 5, dtype=np.float64)),
        "out columns strided": (h, r, x, a(3, 10)[:, ::2]),
        "out read-only": (h, r, x, _read_only(x)),
        "out rows on one row": (h, r, x, _rows_on_one(a(3, 5))),
        "out rows backwards": (h, r, x, a(3, 5)[::-1]),
        "out overlapping x": (h, r, shared[:, :5], shared[:, 5:]),
        "out that is x": (h, r, x, x),
        "out overlapping r": (h, tall[:4], x, tall[2:5]),
        "out that is h": (square, a(4, 4), a(3, 4), square),
        "out not an array": (h, r, x, [[0.0] * 5] * 3),
    }


@pytest.mark.parametrize("two_cores", [False, True])
@pytest.mark.parametrize("case", list(_product_tanh_unfit_cases(np.random.default_rng(0))))
def test_product_tanh_operands_it_does_not_take_are_declined_untouched(_blas, case, two_cores,
                                                                       rng):
    _declined_untouched(lambda *operands: product_tanh(*operands, two_cores),
                        _product_tanh_unfit_cases(rng)[case])


def test_a_product_and_tanh_too_long_for_one_core_s_blas_call_is_declined_on_two(_blas, rng):
    """K x N at OpenBLAS's threading threshold: a one-row piece's gemm would take BLAS's own
    threads (see the LSTM step's case); on one core it is the product's own call."""
    h = rng.standard_normal((2, 1024)).astype(np.float32)
    r = rng.standard_normal((1024, 512)).astype(np.float32)
    x = np.zeros(512, np.float32)
    assert product_tanh(h, r, x, None, True) is None
    np.testing.assert_array_equal(product_tanh(h, r, x, None, False), _product_then_tanh(h, r, x))


def test_flags_raised_before_the_product_and_tanh_are_not_reported(_blas, rng):
    with np.errstate(over="ignore"):
        np.multiply(np.float32(3e38), np.float32(10))
    h, r = rng.standard_normal((16, 64)).astype(np.float32), np.eye(64, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for two_cores in (False, True):
            product_tanh(h, r, np.zeros(64, np.float32), None, two_cores)


@pytest.mark.parametrize("candidate", [None, "rows", "columns", "halves"],
                         ids=["default", "rows", "columns", "halves"])
@pytest.mark.parametrize("two_cores", [False, True])
@pytest.mark.parametrize("r_rows", [False, True])
def test_the_product_plus_tanh_kernel_against_numpy(_blas, r_rows, two_cores, candidate,
                                                    monkeypatch, rng):
    """``tanh(h @ R + x)`` (R^T with r_rows, a read-only R laid out once) into its destination
    or a fresh array, for every layout of x the fusion hands it, on either choice of cores and
    in each of the one core's measured candidates; on two cores a step large enough runs as one
    job of pieces, on one core the product by R's rows (the default) as one call too."""
    taken = []

    def one_call(*args, one_call=fused.product_tanh):
        done = one_call(*args)
        taken.append(done is not None)
        return done

    monkeypatch.setattr(fused, "product_tanh", one_call)
    run = fused.product_plus_tanh({"r_rows": r_rows})
    if candidate is not None:
        abilities_of(run).measured.fix(candidate)
    h = rng.standard_normal((16, 64)).astype(np.float32)
    r = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    r.flags.writeable = False
    previous = gemm.set_products_on_two_cores(two_cores)
    try:
        for x in (rng.standard_normal((16, 64)).astype(np.float32),
                  rng.standard_normal(64).astype(np.float32),
                  rng.standard_normal((2, 16, 64)).astype(np.float32),
                  np.float32(0.5), 0.5):  # (a sum of biases of one value each, say)
            want = np.tanh(h @ (r.T if r_rows else r) + x)
            np.testing.assert_allclose(run(h, r, x), want, rtol=1e-6, atol=1e-6)
            if np.ndim(x) > 2 or not isinstance(x, np.float32 | np.ndarray):
                continue
            output = np.full((16, 3, 64), np.nan, np.float32)
            taken.clear()
            got = run(h, r, x, out=output[:, 1])
            assert got.base is output and np.shares_memory(got, output[:, 1])
            np.testing.assert_allclose(output[:, 1], want, rtol=1e-6, atol=1e-6)
            assert np.isnan(output[:, [0, 2]]).all()
            # The one call made it on two cores (its pieces all on this thread where there is
            # no helper) and on one core by R's rows; else the product and then np.tanh.
            one = two_cores or candidate in (None, "rows")
            assert taken == ([True] if one else []), taken
    finally:
        gemm.set_products_on_two_cores(previous)


@pytest.mark.parametrize("r_rows", [False, True])
def test_a_step_settled_on_rows_skips_the_look_up_and_follows_every_change(_blas, r_rows,
                                                                             monkeypatch, rng):
    """Once `rows` is kept for a shape, `product_plus_tanh`'s calls on that shape and weight on
    one core make no key; another weight, shape or type, a weight made writeable, products on
    two cores and a candidate fixed later each take the way they would have taken, and every
    result is numpy's."""
    keys, cores = [], []
    shapes = fused.product_key
    monkeypatch.setattr(fused, "product_key", lambda *args: keys.append(args) or shapes(*args))
    monkeypatch.setattr(fused, "product_tanh", lambda *args, one_call=fused.product_tanh:
                        cores.append(args[4]) or one_call(*args))
    run = fused.product_plus_tanh({"r_rows": r_rows})
    step = abilities_of(run).measured
    columns = []
    step.candidates["columns"] = lambda *args, fn=step.candidates["columns"]: \
        columns.append(args) or fn(*args)

    def weight(k=64, n=64, dtype=np.float32):
        return _read_only((rng.standard_normal((n, k) if r_rows else (k, n)) / 8).astype(dtype))

    def check(h, r, x):
        want = np.tanh(h @ (r.T if r_rows else r) + x)
        np.testing.assert_allclose(run(h, r, x), want, rtol=1e-6, atol=1e-6)
        out = np.full(want.shape, np.nan, want.dtype)
        assert run(h, r, x, out=out) is out
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)

    previous = gemm.set_products_on_two_cores(False)
    try:
        # (16 rows of 64 by 64: large enough to cut in pieces on two cores)
        r, h = weight(), rng.standard_normal((16, 64)).astype(np.float32)
        x = rng.standard_normal((16, 64)).astype(np.float32)
        step._chosen[shapes(h, r, x)] = "rows"  # as if chosen on this key by a trial
        step._chosen_fn[shapes(h, r, x)] = step.candidates["rows"]
        for _ in range(3):
            check(h, r, x)
        assert len(keys) == 1  # (the first call's, which found `rows` kept)
        r.flags.writeable = True  # (the caller's again: changed, it is read as it is now)
        r[...] = rng.standard_normal(r.shape) / 8
        check(h, r, x)
        r.flags.writeable = False
        for b, v, y in ((h, weight(), x), (h[:1], r, x[:1]),
                        (h.astype(np.float64), weight(dtype=np.float64), x),
                        (rng.standard_normal((16, 5)).astype(np.float32), weight(5), x)):
            check(b, v, y)
        check(h, r, x)  # (on r again: straight to the one call, from its second call on)
        keys.clear()
        cores.clear()
        check(h, r, x)
        assert not keys and cores == [False, False]
        gemm.set_products_on_two_cores(True)
        cores.clear()
        check(h, r, x)
        assert cores == [True, True]
        gemm.set_products_on_two_cores(False)
        step.fix("columns")
        check(h, r, x)
        assert len(columns) == 2
    finally:
        gemm.set_products_on_two_cores(previous)


@pytest.mark.parametrize("two_cores", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_rnn_step_makes_the_same_values_where_the_one_call_declines(_blas, dtype, two_cores,
                                                                       monkeypatch, rng):
    """OpenVINO's RNNCell recurrence, batch-major: h' into out= as one call (`product_tanh`,
    cut in pieces on two cores) or as the product and then tanh, the same values."""
    step = cells.rnn_step({}).candidates[cells.BATCH_MAJOR.name]
    batch, hidden = 16, 64
    r = (rng.standard_normal((hidden, hidden)) / 8).astype(dtype)
    r.flags.writeable = False
    xw, h = (rng.standard_normal((batch, hidden)).astype(dtype) for _ in range(2))
    taken = []

    def one_call(*args, one_call=cells.product_tanh):
        taken.append(one_call(*args))
        return taken[-1]

    previous = gemm.set_products_on_two_cores(two_cores)
    try:
        results = []
        for declining in (False, True):
            out = np.full((batch, 2, hidden), np.nan, dtype)[:, 1]
            with monkeypatch.context() as patch:
                patch.setattr(cells, "product_tanh", one_call)
                with _declining(monkeypatch) if declining else contextlib.nullcontext():
                    got = step(xw, h, r, out)
            assert got is out
            results.append(got.copy())
    finally:
        gemm.set_products_on_two_cores(previous)
    assert len(taken) == 1 and taken[0] is not None  # (the one call made h', not the fallback)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(results[0], np.tanh(xw + h @ r.T), rtol=1e-5, atol=1e-5)
