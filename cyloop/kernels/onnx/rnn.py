"""ONNX RNN, GRU and LSTM (all directions, sequence_lens, layout, clip, activations, peepholes):
what torch.onnx.export writes for nn.RNN, nn.GRU and nn.LSTM.

With the default activations and no clip, input_forget or peepholes, in float32 or float64 (every
layer PyTorch exports), a layer runs on OpenVINO's layer runner (kernels/recurrent/sequences.py: the
same semantics, which OpenVINO takes from ONNX): the cells' measured steps, every element's steps
in one call where all run every step, Y written in place in ONNX's layout. Its operands are
converted once per weight array (an LSTM's gates reordered from i, o, f, c to f, i, c, o; the two
biases summed, bar a GRU's recurrent candidate bias with linear_before_reset).

Other layers take the general path below: the input projection ``X W^T + Wb`` of every time step
is one matrix product before the time loop; only ``H R^T`` runs per step.
"""

import functools

import numpy as np

from ...accel.gemm import Prepared, is_constant
from .. import _math
from .._gate_orders import ONNX_LSTM, OPENVINO_LSTM
from ..recurrent.cells import showing
from ..recurrent.sequences import sequence_layer
from ..registry import kernel

_ACTIVATIONS = {  # name -> (function of (x, alpha, beta), default alpha, default beta)
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: _math.sigmoid(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(x, 0), None, None),
}

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # the types the layer runner takes
_DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _activations(op_type, attrs, n_dirs):
    """One list of activation callables per direction."""
    names = attrs.get("activations") or _DEFAULTS[op_type] * n_dirs
    alphas = list(attrs.get("activation_alpha") or [])
    betas = list(attrs.get("activation_beta") or [])
    functions = []
    for name in names:
        fn, alpha, beta = _ACTIVATIONS[name.lower()]
        if alpha is not None:
            alpha = alphas.pop(0) if alphas else alpha
        if beta is not None:
            beta = betas.pop(0) if betas else beta
        functions.append(lambda x, fn=fn, a=alpha, b=beta: fn(x, a, b))
    per = len(_DEFAULTS[op_type])
    if len(functions) != per * n_dirs:
        raise ValueError(f"{op_type} needs {per * n_dirs} activations for {n_dirs} direction(s), "
                         f"got {names}")
    return [functions[d * per:(d + 1) * per] for d in range(n_dirs)]


# An LSTM's gate blocks in OpenVINO's order (f, i, c, o), by their place in ONNX's (i, o, f, c).
_OPENVINO_ORDER = ONNX_LSTM.taken_by(OPENVINO_LSTM)


def _gates_reordered(rows):
    """[D, 4H, ...] rows of an LSTM's W or R, their gate blocks in OpenVINO's order (read-only,
    as the weights it is made of: the cells lay out their own forms of it once, not per call)."""
    blocks = rows.reshape(rows.shape[0], 4, rows.shape[1] // 4, *rows.shape[2:])
    # A copy of its own: the index may hand back a view of a writeable temporary, which no one
    # could then tell is constant (accel/gemm.py `is_constant`), so that what the cells derive
    # from each direction's view of it would be looked for by value, call after call.
    reordered = blocks[:, _OPENVINO_ORDER].reshape(rows.shape).copy()
    reordered.flags.writeable = False
    return reordered


def _biases_joined(op_type, linear_before_reset):
    """ONNX's B [D, 2GH] (Wb, then Rb) -> OpenVINO's [D, GH]: the two summed (gate blocks
    reordered for an LSTM); a GRU with linear_before_reset keeps its recurrent candidate bias
    apart, as a fourth block ([D, 4H]: it is multiplied by the reset gate)."""
    def join(b):
        width = b.shape[1] // 2
        joined = b[:, :width] + b[:, width:]
        if op_type == "LSTM":
            return _gates_reordered(joined)
        if op_type == "GRU" and linear_before_reset:
            third = width // 3
            joined[:, 2 * third:] = b[:, 2 * third:width]
            joined = np.concatenate([joined, b[:, width + 2 * third:]], axis=1)
        joined.flags.writeable = False
        return joined

    return join


@functools.lru_cache(maxsize=16)
def _zeros(shape, dtype):
    """A read-only zero array: a bias the node leaves out (one array, so its derived weights are
    made once)."""
    zeros = np.zeros(shape, dtype)
    zeros.flags.writeable = False
    return zeros


def _on_layer_runner(op_type, attrs, n_outputs, acts_given, clip, input_forget, general):
    """``run(x, w, r, b, seq_lens, h0, c0, p)`` on OpenVINO's layer runner (see the module), or
    None for a node it does not serve (activations other than the defaults, a clip,
    input_forget); ``run`` hands operands it does not take (peepholes, other types) to
    `general`, the general path."""
    direction = str(attrs.get("direction", "forward")).lower()
    n_dirs = 2 if direction == "bidirectional" else 1
    defaults = [name.lower() for name in _DEFAULTS[op_type]] * n_dirs
    if acts_given and [str(name).lower() for name in acts_given] != defaults \
            or clip is not None or input_forget:
        return None
    linear_before_reset = bool(attrs.get("linear_before_reset", 0))
    n_states = 2 if op_type == "LSTM" else 1
    layer, step, cores = sequence_layer(op_type.lower(),
                                        {"direction": direction,
                                         "linear_before_reset": linear_before_reset})
    layout = int(attrs.get("layout", 0))
    # (W and R each their own: a `Prepared` remembers one weight; None: used as they are)
    input_rows, recurrent_rows = (Prepared(_gates_reordered) if op_type == "LSTM" else None
                                  for _ in range(2))
    biases = Prepared(_biases_joined(op_type, linear_before_reset))
    lstm, bias_width = op_type == "LSTM", 2 * _GATES[op_type]
    # The last constant (`is_constant`) W, R and B (B as given: None where left out), their
    # type, and their forms for the layer: the same three, call after call, skip the three
    # look-ups and their types' checks. (Held as the model holds its constants; a feed, never
    # constant, is not kept.)
    last_constants = [None]

    def run(x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None):
        dtype = x.dtype
        last = last_constants[0]
        # (types compared by identity here, as numpy hands them out: any other, by value below)
        if last is not None and last[0] is w and last[1] is r and last[2] is b \
                and last[3] is dtype and p is None and (h0 is None or h0.dtype is dtype) \
                and (c0 is None or c0.dtype is dtype):
            w, r, b = last[4]
        else:
            if p is not None or dtype not in _FLOATS or w.dtype != dtype or r.dtype != dtype \
                    or b is not None and b.dtype != dtype \
                    or h0 is not None and h0.dtype != dtype \
                    or c0 is not None and c0.dtype != dtype:
                return general(x, w, r, b, seq_lens, h0, c0, p)
            given = (w, r, b)
            if b is None:
                b = _zeros((n_dirs, bias_width * r.shape[-1]), dtype)
            if input_rows is not None:
                w, r = input_rows(w), recurrent_rows(r)
            b = biases(b)
            if all(is_constant(a) for a in given if a is not None):
                last_constants[0] = (*given, dtype, (w, r, b))
        hidden = r.shape[-1]
        if h0 is None or lstm and c0 is None:
            shape = (n_dirs, x.shape[1], hidden) if layout == 0 else (x.shape[0], n_dirs, hidden)
            h0 = np.zeros(shape, dtype) if h0 is None else h0
            c0 = np.zeros(shape, dtype) if lstm and c0 is None else c0
        if layout == 0:  # (X [T, B, I], states [D, B, H], Y [T, D, B, H]: seen batch-first)
            x = x.swapaxes(0, 1)
            batch, steps = x.shape[0], x.shape[1]
            out = np.zeros((steps, n_dirs, batch, hidden), dtype)
            states = [h0.swapaxes(0, 1), c0.swapaxes(0, 1)] if lstm else [h0.swapaxes(0, 1)]
            if n_dirs == 1:  # (the layer's [B, 1, H] final states: seen [1, B, H], C order)
                _, finals = layer(x, states, seq_lens, w, r, b, out.transpose(2, 1, 0, 3))
                finals = [f.swapaxes(0, 1) for f in finals]
            else:  # the final states made [D, B, H] where they are written, seen [B, D, H]
                finals = [np.empty((n_dirs, batch, hidden), dtype) for _ in range(n_states)]
                layer(x, states, seq_lens, w, r, b, out.transpose(2, 1, 0, 3),
                      [f.swapaxes(0, 1) for f in finals])
        else:
            batch, steps = x.shape[0], x.shape[1]
            out = np.zeros((batch, steps, n_dirs, hidden), dtype)
            _, finals = layer(x, [h0, c0] if lstm else [h0], seq_lens, w, r, b,
                              out.transpose(0, 2, 1, 3))
        return (out, *finals)[:n_outputs]

    return showing(run, step, cores=cores)


def _factory(op_type):
    def factory(attrs, n_outputs):
        direction = attrs.get("direction", "forward")
        n_dirs = 2 if direction == "bidirectional" else 1
        acts = _activations(op_type, attrs, n_dirs)
        clip = attrs.get("clip")
        layout = int(attrs.get("layout", 0))
        linear_before_reset = bool(attrs.get("linear_before_reset", 0))
        input_forget = bool(attrs.get("input_forget", 0))
        gates = _GATES[op_type]

        def general(x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None):
            if layout:
                x = np.swapaxes(x, 0, 1)
                h0 = None if h0 is None else np.swapaxes(h0, 0, 1)
                c0 = None if c0 is None else np.swapaxes(c0, 0, 1)
            steps, batch, _ = x.shape
            hidden = r.shape[-1]
            dtype = x.dtype
            lens = np.full(batch, steps, np.int64) if seq_lens is None else \
                np.asarray(seq_lens, np.int64)
            y = np.zeros((steps, n_dirs, batch, hidden), dtype)
            y_h = np.zeros((n_dirs, batch, hidden), dtype)
            y_c = np.zeros((n_dirs, batch, hidden), dtype)
            rows = np.arange(batch)
            for d in range(n_dirs):
                reverse = direction == "reverse" or d == 1
                bias_w = np.zeros(gates * hidden, dtype) if b is None else b[d, :gates * hidden]
                bias_r = np.zeros(gates * hidden, dtype) if b is None else b[d, gates * hidden:]
                projected = x @ w[d].T + bias_w  # [steps, batch, gates*hidden]: one GEMM
                h = np.zeros((batch, hidden), dtype) if h0 is None else h0[d].astype(dtype)
                c = np.zeros((batch, hidden), dtype) if c0 is None else c0[d].astype(dtype)
                peep = None if p is None else p[d]
                for s in range(steps):
                    active = s < lens
                    # Per batch entry, the time index this step reads and writes.
                    t = np.where(active, lens - 1 - s, 0) if reverse else np.full(batch, s)
                    xt = projected[t, rows]
                    h_new, c_new = _cell(op_type, xt, h, c, r[d], bias_r, peep, acts[d], clip,
                                         linear_before_reset, input_forget, hidden)
                    mask = active[:, None]
                    h = np.where(mask, h_new, h)
                    c = np.where(mask, c_new, c)
                    y[t[active], d, rows[active]] = h_new[active]
                y_h[d], y_c[d] = h, c
                y_h[d, lens == 0] = 0  # an empty sequence has no last state
                y_c[d, lens == 0] = 0
            if layout:
                y = np.transpose(y, (2, 0, 1, 3))
                y_h, y_c = np.swapaxes(y_h, 0, 1), np.swapaxes(y_c, 0, 1)
            outputs = (y, y_h, y_c) if op_type == "LSTM" else (y, y_h)
            return outputs[:n_outputs]

        fast = _on_layer_runner(op_type, attrs, n_outputs, attrs.get("activations"), clip,
                                input_forget, general)
        return general if fast is None else fast

    return factory


def _clip(x, clip):
    return x if clip is None else np.clip(x, -clip, clip)


def _cell(op_type, xt, h, c, r, bias_r, peep, acts, clip, linear_before_reset, input_forget,
          hidden):
    if op_type == "RNN":
        return acts[0](_clip(xt + h @ r.T + bias_r, clip)), c
    if op_type == "GRU":
        f, g = acts
        xz, xr, xh = np.split(xt, 3, axis=-1)
        rz, rr, rh = np.split(r, 3, axis=0)
        bz, br, bh = np.split(bias_r, 3)
        z = f(_clip(xz + h @ rz.T + bz, clip))
        reset = f(_clip(xr + h @ rr.T + br, clip))
        if linear_before_reset:
            candidate = g(_clip(xh + reset * (h @ rh.T + bh), clip))
        else:
            candidate = g(_clip(xh + (reset * h) @ rh.T + bh, clip))
        return (1 - z) * candidate + z * h, c
    f, g, act_h = acts
    gates = xt + h @ r.T + bias_r
    gi, go, gf, gc = np.split(gates, 4, axis=-1)
    if peep is not None:
        pi, po, pf = np.split(peep, 3)
        gi, gf = gi + pi * c, gf + pf * c
    i = f(_clip(gi, clip))
    forget = 1 - i if input_forget else f(_clip(gf, clip))
    c_new = forget * c + i * g(_clip(gc, clip))
    if peep is not None:
        go = go + po * c_new
    o = f(_clip(go, clip))
    return o * act_h(c_new), c_new


# One kernel serves every version: later opsets only added attributes (layout at 14) that default
# to the older behaviour.
for _op_type in ("RNN", "GRU", "LSTM"):
    kernel(_op_type, since=1, multi=True)(_factory(_op_type))


@kernel("Erf", since=9, batch="elementwise")
def erf(attrs):
    return _math.erf


@kernel("Gelu", since=20)
def gelu(attrs):
    tanh = attrs.get("approximate", "none") == "tanh"
    return lambda x: _math.gelu(x, tanh)
