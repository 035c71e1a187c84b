"""Kernels of the nodes the engine's fusion pass (engine/fuse.py) puts in place of a pattern of
ordinary ops: each computes what the nodes it replaces computed, to rounding, in fewer numpy
passes."""

import numpy as np

from ..ir import LOOP_DOMAIN
from . import _math
from .registry import kernel


@kernel("LSTMGates", domain=LOOP_DOMAIN, since=1, multi=True)
def lstm_gates(attrs, n_outputs):
    """``(pre, c) -> (h', c')``: pre split in 4 equal parts along ``axis``; ``blocks`` gives the
    parts holding f, i, g, o; f, i, o go through a sigmoid and g through tanh; c' = f c + i g and
    h' = o tanh(c'), broadcasting as the Mul and Add nodes did. One tanh activates every gate
    (see `_math.lstm_gate_affine`). A gate axis that does not split in 4 equal parts (an uneven opset-18
    Split) runs the replaced nodes' arithmetic as written."""
    axis = int(attrs["axis"])
    f_at, i_at, g_at, o_at = (int(k) for k in attrs["blocks"])

    def as_written(pre, c, index, step):
        parts = []
        for k in range(4):
            index[axis] = slice(k * step, (k + 1) * step if k < 3 else None)
            parts.append(pre[tuple(index)])
        f, i, o = (_math.sigmoid(parts[k]) for k in (f_at, i_at, o_at))
        c_new = f * c + i * np.tanh(parts[g_at])
        return o * np.tanh(c_new), c_new

    def gates(pre, c):
        length = pre.shape[axis]
        index = [slice(None)] * pre.ndim
        if length % 4:
            return as_written(pre, c, index, -(-length // 4))
        block = length // 4
        trailing = pre.ndim - 1 - (axis % pre.ndim)
        scale, offset = _math.lstm_gate_affine(length, trailing, pre.dtype, g_at)
        activated = np.multiply(pre, scale)  # a fresh buffer; `pre` is not written
        np.tanh(activated, out=activated)
        activated *= scale
        activated += offset
        blocks = []
        for k in (f_at, i_at, g_at, o_at):
            index[axis] = slice(k * block, (k + 1) * block)
            blocks.append(activated[tuple(index)])
        f, i, g, o = blocks
        c_new = np.multiply(f, c)
        i *= g
        c_new += i
        h_new = np.tanh(c_new)
        h_new *= o
        return h_new, c_new

    return gates
