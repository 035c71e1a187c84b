"""The maths kernels of both op families share: sigmoid, softmax, erf, gelu, and the LSTM gate
activation through one tanh."""

import functools
import math

import numpy as np

__all__ = ["erf", "gelu", "lstm_gate_affine", "power", "sigmoid", "softmax"]

_scalar_erf = np.frompyfunc(math.erf, 1, 1)


def _exp_cap(dtype):
    """The largest t of `dtype` with exp(t) + 1 finite."""
    t = dtype.type(np.log(np.finfo(dtype).max))
    with np.errstate(over="ignore"):
        while not np.isfinite(np.exp(t) + dtype.type(1)):
            t = np.nextafter(t, dtype.type(0))
    return t


# Per dtype, as 0-d arrays: a ufunc skips converting a 0-d array operand, which it must do for a
# numpy or Python scalar on every call; the gates of a cell make many such calls per step.
_EXP_CAPS = {np.dtype(t): np.asarray(_exp_cap(np.dtype(t))) for t in (np.float32, np.float64)}
_ONES = {t: np.ones((), t) for t in _EXP_CAPS}


def sigmoid(x, out=None):
    """1 / (1 + exp(-x)), writing `out`. exp's argument is capped so that it cannot overflow
    (past the cap the exact result is below the smallest normal number anyway)."""
    dtype = x.dtype
    cap = _EXP_CAPS.get(dtype)
    if cap is None and dtype == np.float16:  # too small an exponent range for the cap: in f32
        result = sigmoid(np.asarray(x, np.float32)).astype(np.float16)
        if out is None:
            return result
        out[...] = result
        return out
    if out is None:
        out = np.empty_like(x)
    result = np.negative(x, out=out)
    if cap is not None:
        np.minimum(result, cap, out=result)
    np.exp(result, out=result)
    np.add(result, _ONES[dtype] if cap is not None else dtype.type(1), out=result)
    return np.reciprocal(result, out=result)


def softmax(x, axis, log=False):
    """(Log-)softmax along `axis`, shifted by the maximum for stability; empty input allowed."""
    if x.size == 0:
        return np.empty_like(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    if log:
        return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def erf(x):
    """The error function, element by element with math.erf (numpy has none; scipy is not a
    dependency): exact, but a Python call per element."""
    return _scalar_erf(x).astype(x.dtype)


def gelu(x, tanh_approximation=False):
    if tanh_approximation:
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
        return (0.5 * x * (1 + np.tanh(inner))).astype(x.dtype)
    return (0.5 * x * (1 + _scalar_erf(x / math.sqrt(2)).astype(np.float64))).astype(x.dtype)


@functools.lru_cache(maxsize=64)
def lstm_gate_affine(length: int, trailing: int, dtype, g_at: int):
    """(scale, offset), read-only, along a gate axis of `length` (4 equal blocks) followed by
    `trailing` axes: 1/2, 1/2 over the three sigmoid blocks, 1, 0 over the tanh block `g_at`.
    With them ``tanh(x * scale) * scale + offset`` is sigmoid(x) = tanh(x/2)/2 + 1/2 on the
    sigmoid blocks and tanh(x) on the other (halving is exact, and x * 1 + 0 is x)."""
    block = length // 4
    scale = np.full(length, 0.5, dtype)
    offset = np.full(length, 0.5, dtype)
    scale[g_at * block:(g_at + 1) * block] = 1
    offset[g_at * block:(g_at + 1) * block] = 0
    shape = (length,) + (1,) * trailing
    scale, offset = scale.reshape(shape), offset.reshape(shape)
    scale.flags.writeable = offset.flags.writeable = False
    return scale, offset


def power(base, exponent, out=None):
    """base ** exponent in the base's type, as ONNX Pow and OpenVINO Power compute it: an integer
    to a negative integer power is the truncated real power (2 ** -1 == 0, 1 ** -3 == 1), where
    numpy refuses."""
    base = np.asarray(base)
    if base.dtype.kind in "iu" and np.asarray(exponent).dtype.kind in "iu" \
            and np.any(exponent < 0):
        as_float = np.trunc(np.power(base.astype(np.float64), exponent))
        as_int = np.power(base, np.maximum(exponent, 0))
        result = np.where(exponent < 0, as_float, as_int).astype(base.dtype)
    else:
        result = np.power(base, exponent).astype(base.dtype, copy=False)
    if out is None:
        return result
    np.copyto(out, result)
    return out
