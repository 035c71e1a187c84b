"""The maths kernels of both op families share: sigmoid, softmax, erf, gelu, the smaller
activations, rounding, einsum, and the LSTM gate activation through one tanh."""

import functools
import math

import numpy as np

__all__ = ["einsum", "erf", "gelu", "hard_sigmoid", "inf_test", "lstm_gate_affine", "mish",
           "power", "prelu", "round_half_away", "selu", "sigmoid", "sigmoid_cap", "softmax",
           "softsign"]

_scalar_erf = np.frompyfunc(math.erf, 1, 1)


def _exp_cap(dtype):
    """The largest t of `dtype` with exp(t) + 1 finite."""
    t = dtype.type(np.log(np.finfo(dtype).max))
    with np.errstate(over="ignore"):
        while not np.isfinite(np.exp(t) + dtype.type(1)):
            t = np.nextafter(t, dtype.type(0))
    return t


class _ByType(dict):
    """dtype -> a value made by `make` at the dtype's first look-up, and kept (at import, the
    float types' exp caps cost every process that loads these kernels their search)."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, dtype):
        value = self[dtype] = self.make(dtype)
        return value


def _read_only(value: np.ndarray) -> np.ndarray:
    value.flags.writeable = False
    return value


# Per dtype, as 0-d arrays: a ufunc skips converting a 0-d array operand, which it must do for a
# numpy or Python scalar on every call; the gates of a cell make many such calls per step. None
# for a type with no cap.
_EXP_CAPS = _ByType(lambda dtype: _read_only(np.asarray(_exp_cap(dtype)))
                    if dtype in (np.float32, np.float64) else None)
_ONES = _ByType(lambda dtype: _read_only(np.ones((), dtype)))


_UNSEEN = object()


def sigmoid_cap(dtype):
    """The cap `sigmoid` puts on exp's argument for `dtype` (a read-only 0-d array), or None where
    it has none (it then computes another way: float16 in float32)."""
    cap = _EXP_CAPS.get(dtype, _UNSEEN)  # (a dtype looked up before: no conversion, a step's)
    return _EXP_CAPS[np.dtype(dtype)] if cap is _UNSEEN else cap


def sigmoid(x, out=None):
    """1 / (1 + exp(-x)), writing `out`. exp's argument is capped so that it cannot overflow
    (past the cap the exact result is below the smallest normal number anyway)."""
    dtype = x.dtype
    cap = _EXP_CAPS[dtype]
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


def hard_sigmoid(x, alpha, beta):
    """max(0, min(1, alpha x + beta)) in x's type."""
    t = x.dtype.type
    return np.clip(x * t(alpha) + t(beta), 0, 1).astype(x.dtype, copy=False)


def elu(x, alpha):
    """x for x > 0, alpha (exp(x) - 1) otherwise, in x's type (its zero is of x's type too: numpy
    2.0 promotes a bfloat16 array with a Python 0 to float32)."""
    negative = x.dtype.type(alpha) * np.expm1(np.minimum(x, x.dtype.type(0)))
    return np.where(x > 0, x, negative)


def selu(x, alpha, gamma):
    """gamma x for x > 0, gamma alpha (exp(x) - 1) otherwise."""
    negative = x.dtype.type(alpha) * np.expm1(np.minimum(x, x.dtype.type(0)))
    return (x.dtype.type(gamma) * np.where(x > 0, x, negative)).astype(x.dtype, copy=False)


def softsign(x):
    return x / (np.absolute(x) + x.dtype.type(1))


def mish(x):
    """x tanh(softplus(x))."""
    return (x * np.tanh(np.logaddexp(x, x.dtype.type(0)))).astype(x.dtype, copy=False)


def prelu(x, slope, per_channel=False):
    """x where x >= 0, x * slope elsewhere. `per_channel`: a 1-D slope as long as axis 1 of x (of
    rank 3 or more) lines up with that axis, as ONNX PRelu before opset 7 and OpenVINO's PReLU
    have it; otherwise slope broadcasts from the right."""
    slope = np.asarray(slope)
    if per_channel and slope.ndim == 1 and x.ndim > 2 and slope.size == x.shape[1] \
            and slope.size > 1:
        slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
    return np.where(x < 0, x * slope, x).astype(x.dtype, copy=False)


def round_half_away(x, out=None):
    """Round to the nearest integer, halves away from zero (integers unchanged). x - trunc(x) is
    exact, so no sum can round up a value just below a half."""
    if x.dtype.kind not in "fc":
        if out is None:
            return np.array(x, copy=True)
        np.copyto(out, x)
        return out
    whole = np.trunc(x)
    bump = np.where(np.absolute(x - whole) >= x.dtype.type(0.5), np.sign(x), x.dtype.type(0))
    return np.add(whole, bump, out=out)


def inf_test(negative: bool, positive: bool):
    """The ufunc (or function) telling which elements are -inf (`negative`) or +inf
    (`positive`)."""
    if negative and positive:
        return np.isinf
    if positive:
        return np.isposinf
    if negative:
        return np.isneginf
    return lambda x: np.zeros(np.shape(x), np.bool_)


def einsum(equation, *operands):
    """np.einsum, through float32 for ml_dtypes' bfloat16 / float8 (numpy has no loop for
    them), the result in the first such type."""
    narrow = [x.dtype for x in operands if x.dtype.kind == "V"]
    if narrow:
        wide = [x.astype(np.float32) if x.dtype.kind == "V" else x for x in operands]
        return np.einsum(equation, *wide).astype(narrow[0])
    return np.einsum(equation, *operands)
