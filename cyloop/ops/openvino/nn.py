"""MatMul, Softmax, reductions, TopK and the recurrent cells of OpenVINO IR."""

import numpy as np

from ...ir import LOOP_DOMAIN
from .. import _math
from .._measured import Measured
from .._reductions import in_own_type, over_every_axis
from ..registry import kernel
from ._attrs import DOMAIN, as_bool, as_dtype, as_float, as_int


@kernel("MatMul", domain=DOMAIN, since=1, batch="matmul",
        batch_if=lambda attrs, batched: not as_bool(attrs, "transpose_a"))
def matmul(attrs):
    transpose_a, transpose_b = as_bool(attrs, "transpose_a"), as_bool(attrs, "transpose_b")

    def product(a, b):
        # 1-D operands are never transposed; the last two axes swap otherwise.
        if transpose_a and np.ndim(a) > 1:
            a = np.swapaxes(a, -1, -2)
        if transpose_b and np.ndim(b) > 1:
            b = np.swapaxes(b, -1, -2)
        return np.matmul(a, b)

    return product


def softmax(attrs):
    axis = as_int(attrs, "axis", 1)
    return lambda x: _math.softmax(x, axis)


# The IR spells the layer type "SoftMax" (v1 and v8, which adds negative axes).
for _name in ("SoftMax", "Softmax"):
    kernel(_name, domain=DOMAIN, since=1)(softmax)


@kernel("LogSoftmax", domain=DOMAIN, since=5)
def log_softmax(attrs):
    axis = as_int(attrs, "axis", 1)
    return lambda x: _math.softmax(x, axis, log=True)


def _positional(reducer):
    """`reducer` called as ``(x, axis, keepdims)``, as `over_every_axis` calls it."""
    return lambda x, axis=None, keepdims=False: reducer(x, axis=axis, keepdims=keepdims)


# Sums and products accumulate in the input's type, as OpenVINO's do (and its result type is).
_REDUCERS = {"ReduceSum": in_own_type(np.add), "ReduceMean": _positional(np.mean),
             "ReduceMax": _positional(np.max), "ReduceMin": _positional(np.min),
             "ReduceProd": in_own_type(np.multiply)}


def _register_reduction(op_type, reducer):
    @kernel(op_type, domain=DOMAIN, since=1)
    def factory(attrs):
        keep_dims = as_bool(attrs, "keep_dims")
        every = over_every_axis(reducer, keep_dims)

        # (axes array, rank of x, the axes to reduce or None for all) of the last call whose axes
        # were read-only (a constant): one tuple, replaced whole, so threads sharing the kernel
        # never see a half-updated entry.
        last = [(None, -1, None)]

        def reduce(x, axes):
            ndim = np.ndim(x)
            known, known_ndim, chosen = last[0]
            if axes is not known or ndim != known_ndim:
                listed = np.asarray(axes).ravel().tolist()
                every_axis = (len(listed) == ndim
                              and sorted(a % ndim for a in listed) == list(range(ndim)))
                chosen = None if every_axis else tuple(listed)
                if isinstance(axes, np.ndarray) and not axes.flags.writeable:
                    last[0] = (axes, ndim, chosen)
            if chosen is None:
                return every(x)  # every axis: the short path loop bodies mostly take
            return np.asarray(reducer(x, axis=chosen, keepdims=keep_dims), dtype=x.dtype)

        return reduce


for _op_type, _reducer in _REDUCERS.items():
    _register_reduction(_op_type, _reducer)


@kernel("TopK", domain=DOMAIN, since=1, multi=True)
def top_k(attrs, n_outputs):
    axis = as_int(attrs, "axis", -1)
    largest = attrs.get("mode", "max").lower() == "max"
    sort = attrs.get("sort", "value").lower()
    index_type = as_dtype(attrs, "index_element_type", np.int32)

    def top(x, k):
        k = int(np.asarray(k).reshape(-1)[0])
        keys = x.astype(np.int8) if x.dtype.kind == "b" else x
        if largest:
            keys = ~keys if keys.dtype.kind in "iu" else -keys
        indices = np.take(np.argsort(keys, axis=axis, kind="stable"), range(k), axis=axis)
        if sort == "index":
            indices = np.sort(indices, axis=axis)
        values = np.take_along_axis(x, indices, axis=axis)
        return (values, indices.astype(index_type))[:n_outputs]

    return top


def _relu(x, out=None):
    return np.maximum(x, x.dtype.type(0), out=out)


# Every activation takes out= (the cells apply them in place on their gate buffer).
_ACTIVATIONS = {"sigmoid": _math.sigmoid, "tanh": np.tanh, "relu": _relu}


def _activations(attrs, defaults):
    names = attrs.get("activations")
    names = [n.strip() for n in names.split(",")] if names else defaults
    return [_ACTIVATIONS[n.lower()] for n in names]


def _clip(x, clip):
    """Clip the pre-activations in place (x is a buffer the cell owns)."""
    return np.clip(x, -clip, clip, out=x) if clip else x


# A cell is split in two: the input projection X W^T + B, which needs nothing from the previous
# step (the hoisting pass runs it before the loop, for many steps at once), and the recurrence,
# which adds H R^T and applies the gates. The cells themselves are the two in sequence.
#
# Both work gate-major: [..., G, B], one row per gate unit, where W X^T and R H^T are faster GEMMs
# than X W^T and H R^T for small batches and every gate's block is contiguous. The recurrences
# take H (and C) batch-major, as the IR has them, and return views in that order.

def _gate_major(x):
    """[..., B, N] <-> [..., N, B], as a view (the method skips np.swapaxes's Python wrapper)."""
    return np.asarray(x).swapaxes(-1, -2)


@kernel("CellProjection", domain=LOOP_DOMAIN, since=1)
def cell_projection(attrs):
    """``W X^T + B[:rows of W]`` gate-major: X [..., B, I] gives [..., G, B], one GEMM for all
    leading dims."""
    def project(x, w, b):
        if np.ndim(x) < 2:
            raise ValueError(f"a cell's input X must be [batch, input_size], got shape "
                             f"{np.shape(x)}")
        rows = np.reshape(x, (-1, x.shape[-1]))
        gates = np.matmul(w, rows.T)  # [G, leading * B]
        gates += b[:w.shape[0], None]
        gates = gates.reshape((w.shape[0],) + x.shape[:-1])
        return np.moveaxis(gates, 0, -2)

    return project


def _lstm_recurrence(attrs):
    """The LSTM step after the input projection. With the default activations it is a measured
    choice between two equivalent spellings: ``split`` applies sigmoid and tanh to their gate
    blocks separately; ``fused`` pre-scales the sigmoid rows by 1/2 so that one tanh serves all
    four gates (sigmoid(x) = tanh(x/2)/2 + 1/2), fewer and longer passes."""
    f, g, h_act = _activations(attrs, ["sigmoid", "tanh", "tanh"])
    clip = as_float(attrs, "clip", 0.0)

    def gates_of(xw, h, r):
        gates = np.matmul(r, _gate_major(h))  # [4H, B], a fresh buffer the gates are made in
        gates += xw
        return _clip(gates, clip)

    def cell_and_hidden(gates, c, hidden, dtype):
        """f, i, candidate, o activated in `gates`: c' = f c + i candidate, h' = o act(c')."""
        candidate, o = gates[..., 2 * hidden:3 * hidden, :], gates[..., 3 * hidden:, :]
        c_new = np.multiply(gates[..., :hidden, :], _gate_major(c))
        c_new += np.multiply(gates[..., hidden:2 * hidden, :], candidate, out=candidate)
        h_new = h_act(c_new)
        h_new *= o
        return (_gate_major(h_new).astype(dtype, copy=False),
                _gate_major(c_new).astype(dtype, copy=False))

    def split(xw, h, c, r):
        hidden = h.shape[-1]
        gates = gates_of(xw, h, r)
        forget_input, candidate, o = (gates[..., :2 * hidden, :],
                                      gates[..., 2 * hidden:3 * hidden, :],
                                      gates[..., 3 * hidden:, :])
        f(forget_input, out=forget_input)
        g(candidate, out=candidate)
        f(o, out=o)
        return cell_and_hidden(gates, c, hidden, h.dtype)

    if (f, g, h_act) != (_math.sigmoid, np.tanh, np.tanh):
        return split

    def fused(xw, h, c, r):
        hidden = h.shape[-1]
        gates = gates_of(xw, h, r)
        half = gates.dtype.type(0.5)
        # The sigmoid blocks, f and i together, then o: contiguous in the gate-major buffer.
        sigmoids = (gates[..., :2 * hidden, :], gates[..., 3 * hidden:, :])
        for block in sigmoids:
            np.multiply(block, half, out=block)
        np.tanh(gates, out=gates)
        for block in sigmoids:
            np.multiply(block, half, out=block)
            np.add(block, half, out=block)
        return cell_and_hidden(gates, c, hidden, h.dtype)

    return Measured({"fused gates": fused, "split gates": split})


def _gru_recurrence(attrs):
    f, g = _activations(attrs, ["sigmoid", "tanh"])
    clip = as_float(attrs, "clip", 0.0)
    linear_before_reset = as_bool(attrs, "linear_before_reset")

    def step(xw, h, r, b):
        hidden = h.shape[-1]
        h_t = _gate_major(h)
        zr = np.matmul(r[:2 * hidden], h_t)
        zr += xw[..., :2 * hidden, :]
        f(_clip(zr, clip), out=zr)
        z, reset = zr[..., :hidden, :], zr[..., hidden:, :]
        if linear_before_reset:  # b holds 4 blocks: z, r, then h's input and recurrent biases
            candidate = np.matmul(r[2 * hidden:], h_t)
            candidate += b[3 * hidden:, None]
            candidate *= reset
        else:
            candidate = np.matmul(r[2 * hidden:], reset * h_t)
        candidate += xw[..., 2 * hidden:, :]
        g(_clip(candidate, clip), out=candidate)
        # (1 - z) * candidate + z * h
        h_new = np.subtract(h_t, candidate)
        h_new *= z
        h_new += candidate
        return _gate_major(h_new).astype(h.dtype, copy=False)

    return step


def _rnn_recurrence(attrs):
    (f,) = _activations(attrs, ["tanh"])
    clip = as_float(attrs, "clip", 0.0)

    def step(xw, h, r):
        pre = np.matmul(r, _gate_major(h))
        pre += xw
        return _gate_major(f(_clip(pre, clip), out=pre)).astype(h.dtype, copy=False)

    return step


def _showing(fn, step):
    """`fn` with `step`'s measured choice, if it makes one, as ``fn.measured`` (the engine fixes
    it when tuning is off; the plan shows it)."""
    if isinstance(step, Measured):
        fn.measured = step
    return fn


@kernel("LSTMCellRecurrence", domain=LOOP_DOMAIN, since=1, multi=True)
def lstm_recurrence(attrs, n_outputs):
    step = _lstm_recurrence(attrs)
    return _showing(lambda xw, h, c, r: step(xw, h, c, r)[:n_outputs], step)


@kernel("GRUCellRecurrence", domain=LOOP_DOMAIN, since=1, multi=True)
def gru_recurrence(attrs, n_outputs):
    step = _gru_recurrence(attrs)
    return lambda xw, h, r, b: (step(xw, h, r, b),)[:n_outputs]


@kernel("RNNCellRecurrence", domain=LOOP_DOMAIN, since=1, multi=True)
def rnn_recurrence(attrs, n_outputs):
    step = _rnn_recurrence(attrs)
    return lambda xw, h, r: (step(xw, h, r),)[:n_outputs]


_project = cell_projection({})


@kernel("LSTMCell", domain=DOMAIN, since=1, multi=True, batch="cell",
        cell=("LSTMCellRecurrence", 3, 5))
@kernel("LSTMCell", domain=DOMAIN, since=4, multi=True, batch="cell",
        cell=("LSTMCellRecurrence", 3, 5))
def lstm_cell(attrs, n_outputs):
    """Gates in OpenVINO's f, i, c, o order. LSTMCell-1's peephole input is refused at load time
    (by the frontend); without it the two versions compute the same."""
    step = _lstm_recurrence(attrs)
    return _showing(lambda x, h, c, w, r, b: step(_project(x, w, b), h, c, r)[:n_outputs], step)


@kernel("GRUCell", domain=DOMAIN, since=3, multi=True, batch="cell",
        cell=("GRUCellRecurrence", 2, 4))
def gru_cell(attrs, n_outputs):
    """Gates in OpenVINO's z, r, h order; ``linear_before_reset`` as in ONNX."""
    step = _gru_recurrence(attrs)
    return lambda x, h, w, r, b: (step(_project(x, w, b), h, r, b),)[:n_outputs]


@kernel("RNNCell", domain=DOMAIN, since=1, multi=True, batch="cell",
        cell=("RNNCellRecurrence", 2, 4))
def rnn_cell(attrs, n_outputs):
    step = _rnn_recurrence(attrs)
    return lambda x, h, w, r, b: (step(_project(x, w, b), h, r),)[:n_outputs]
