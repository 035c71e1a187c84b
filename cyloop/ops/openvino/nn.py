"""MatMul, Softmax, reductions, TopK and the recurrent cells of OpenVINO IR."""

import numpy as np

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


_ACTIVATIONS = {"sigmoid": _math.sigmoid, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0)}


def _activations(attrs, defaults):
    names = attrs.get("activations")
    names = [n.strip() for n in names.split(",")] if names else defaults
    return [_ACTIVATIONS[n.lower()] for n in names]


def _clip(x, clip):
    return x if not clip else np.clip(x, -clip, clip)


@kernel("LSTMCell", domain=DOMAIN, since=1, multi=True)
@kernel("LSTMCell", domain=DOMAIN, since=4, multi=True)
def lstm_cell(attrs, n_outputs):
    """Gates in OpenVINO's f, i, c, o order. LSTMCell-1's peephole input is refused at load time
    (by the frontend); without it the two versions compute the same."""
    f, g, h_act = _activations(attrs, ["sigmoid", "tanh", "tanh"])
    clip = as_float(attrs, "clip", 0.0)

    def cell(x, h, c, w, r, b):
        gates = x @ w.T + h @ r.T + b
        gf, gi, gc, go = np.split(gates, 4, axis=-1)
        i, forget = f(_clip(gi, clip)), f(_clip(gf, clip))
        c_new = forget * c + i * g(_clip(gc, clip))
        o = f(_clip(go, clip))
        return ((o * h_act(c_new)).astype(x.dtype), c_new.astype(x.dtype))[:n_outputs]

    return cell


@kernel("GRUCell", domain=DOMAIN, since=3, multi=True)
def gru_cell(attrs, n_outputs):
    """Gates in OpenVINO's z, r, h order; ``linear_before_reset`` as in ONNX."""
    f, g = _activations(attrs, ["sigmoid", "tanh"])
    clip = as_float(attrs, "clip", 0.0)
    linear_before_reset = as_bool(attrs, "linear_before_reset")

    def cell(x, h, w, r, b):
        hidden = h.shape[-1]
        xz, xr, xh = np.split(x @ w.T, 3, axis=-1)
        rz, rr, rh = np.split(r, 3, axis=0)
        bz, br = b[:hidden], b[hidden:2 * hidden]
        z = f(_clip(xz + h @ rz.T + bz, clip))
        reset = f(_clip(xr + h @ rr.T + br, clip))
        if linear_before_reset:  # b holds 4 blocks: z, r, then h's input and recurrent biases
            bh_w, bh_r = b[2 * hidden:3 * hidden], b[3 * hidden:]
            candidate = g(_clip(xh + bh_w + reset * (h @ rh.T + bh_r), clip))
        else:
            candidate = g(_clip(xh + (reset * h) @ rh.T + b[2 * hidden:], clip))
        return (((1 - z) * candidate + z * h).astype(x.dtype),)[:n_outputs]

    return cell


@kernel("RNNCell", domain=DOMAIN, since=1, multi=True)
def rnn_cell(attrs, n_outputs):
    (f,) = _activations(attrs, ["tanh"])
    clip = as_float(attrs, "clip", 0.0)

    def cell(x, h, w, r, b):
        return ((f(_clip(x @ w.T + h @ r.T + b, clip))).astype(x.dtype),)[:n_outputs]

    return cell
