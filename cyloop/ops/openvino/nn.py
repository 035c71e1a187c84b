"""MatMul, Softmax, reductions, TopK and the recurrent cells of OpenVINO IR."""

import numpy as np

from ...ir import LOOP_DOMAIN
from .. import _math
from ..registry import kernel
from ._attrs import DOMAIN, ELEMENT_TYPES, as_bool, as_float, as_int


@kernel("MatMul", domain=DOMAIN, since=1)
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


_REDUCERS = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max,
             "ReduceMin": np.min, "ReduceProd": np.prod}


def _register_reduction(op_type, reducer):
    @kernel(op_type, domain=DOMAIN, since=1)
    def factory(attrs):
        keep_dims = as_bool(attrs, "keep_dims")

        def reduce(x, axes):
            axes = tuple(int(a) for a in np.asarray(axes).ravel())
            return np.asarray(reducer(x, axis=axes, keepdims=keep_dims), dtype=x.dtype)

        return reduce


for _op_type, _reducer in _REDUCERS.items():
    _register_reduction(_op_type, _reducer)


@kernel("TopK", domain=DOMAIN, since=1, multi=True)
def top_k(attrs, n_outputs):
    axis = as_int(attrs, "axis", -1)
    largest = attrs.get("mode", "max").lower() == "max"
    sort = attrs.get("sort", "value").lower()
    index_type = ELEMENT_TYPES[attrs.get("index_element_type", "i32")]

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

@kernel("CellProjection", domain=LOOP_DOMAIN, since=1)
def cell_projection(attrs):
    """``X W^T + B[:rows of W]`` for X of any leading dims: one GEMM over all of them."""
    def project(x, w, b):
        rows = np.reshape(x, (-1, x.shape[-1]))
        gates = np.matmul(rows, w.T).reshape(x.shape[:-1] + (w.shape[0],))
        gates += b[:w.shape[0]]
        return gates

    return project


def _lstm_recurrence(attrs):
    f, g, h_act = _activations(attrs, ["sigmoid", "tanh", "tanh"])
    clip = as_float(attrs, "clip", 0.0)

    def step(xw, h, c, r):
        gates = np.matmul(h, r.T)  # a fresh buffer: gates are computed in place in it
        gates += xw
        _clip(gates, clip)
        hidden = h.shape[-1]
        f(gates[..., :2 * hidden], out=gates[..., :2 * hidden])  # forget and input gates
        forget, inp = gates[..., :hidden], gates[..., hidden:2 * hidden]
        candidate = g(gates[..., 2 * hidden:3 * hidden], out=gates[..., 2 * hidden:3 * hidden])
        o = f(gates[..., 3 * hidden:], out=gates[..., 3 * hidden:])
        c_new = np.multiply(forget, c)
        c_new += np.multiply(inp, candidate, out=candidate)
        h_new = h_act(c_new)
        h_new *= o
        return h_new.astype(h.dtype, copy=False), c_new.astype(h.dtype, copy=False)

    return step


def _gru_recurrence(attrs):
    f, g = _activations(attrs, ["sigmoid", "tanh"])
    clip = as_float(attrs, "clip", 0.0)
    linear_before_reset = as_bool(attrs, "linear_before_reset")

    def step(xw, h, r, b):
        hidden = h.shape[-1]
        zr = np.matmul(h, r[:2 * hidden].T)
        zr += xw[..., :2 * hidden]
        f(_clip(zr, clip), out=zr)
        z, reset = zr[..., :hidden], zr[..., hidden:]
        rh = r[2 * hidden:]
        if linear_before_reset:  # b holds 4 blocks: z, r, then h's input and recurrent biases
            candidate = np.matmul(h, rh.T)
            candidate += b[3 * hidden:]
            candidate *= reset
        else:
            candidate = np.matmul(reset * h, rh.T)
        candidate += xw[..., 2 * hidden:]
        g(_clip(candidate, clip), out=candidate)
        # (1 - z) * candidate + z * h
        h_new = np.subtract(h, candidate)
        h_new *= z
        h_new += candidate
        return h_new.astype(h.dtype, copy=False)

    return step


def _rnn_recurrence(attrs):
    (f,) = _activations(attrs, ["tanh"])
    clip = as_float(attrs, "clip", 0.0)

    def step(xw, h, r):
        pre = np.matmul(h, r.T)
        pre += xw
        return f(_clip(pre, clip), out=pre).astype(h.dtype, copy=False)

    return step


@kernel("LSTMCellRecurrence", domain=LOOP_DOMAIN, since=1, multi=True)
def lstm_recurrence(attrs, n_outputs):
    step = _lstm_recurrence(attrs)
    return lambda xw, h, c, r: step(xw, h, c, r)[:n_outputs]


@kernel("GRUCellRecurrence", domain=LOOP_DOMAIN, since=1, multi=True)
def gru_recurrence(attrs, n_outputs):
    step = _gru_recurrence(attrs)
    return lambda xw, h, r, b: (step(xw, h, r, b),)[:n_outputs]


@kernel("RNNCellRecurrence", domain=LOOP_DOMAIN, since=1, multi=True)
def rnn_recurrence(attrs, n_outputs):
    step = _rnn_recurrence(attrs)
    return lambda xw, h, r: (step(xw, h, r),)[:n_outputs]


_project = cell_projection({})


@kernel("LSTMCell", domain=DOMAIN, since=1, multi=True)
@kernel("LSTMCell", domain=DOMAIN, since=4, multi=True)
def lstm_cell(attrs, n_outputs):
    """Gates in OpenVINO's f, i, c, o order. LSTMCell-1's peephole input is refused at load time
    (by the frontend); without it the two versions compute the same."""
    step = _lstm_recurrence(attrs)
    return lambda x, h, c, w, r, b: step(_project(x, w, b), h, c, r)[:n_outputs]


@kernel("GRUCell", domain=DOMAIN, since=3, multi=True)
def gru_cell(attrs, n_outputs):
    """Gates in OpenVINO's z, r, h order; ``linear_before_reset`` as in ONNX."""
    step = _gru_recurrence(attrs)
    return lambda x, h, w, r, b: (step(_project(x, w, b), h, r, b),)[:n_outputs]


@kernel("RNNCell", domain=DOMAIN, since=1, multi=True)
def rnn_cell(attrs, n_outputs):
    step = _rnn_recurrence(attrs)
    return lambda x, h, w, r, b: (step(_project(x, w, b), h, r),)[:n_outputs]
