"""The maths kernels of both op families share: sigmoid, softmax, erf, gelu."""

import math

import numpy as np

__all__ = ["erf", "gelu", "sigmoid", "softmax"]

_scalar_erf = np.frompyfunc(math.erf, 1, 1)


def sigmoid(x, out=None):
    """1 / (1 + exp(-x)), as 0.5 * tanh(0.5 x) + 0.5, which cannot overflow; writes `out`."""
    half = x.dtype.type(0.5)
    if out is None:
        out = np.empty(np.shape(x), x.dtype)
    result = np.multiply(x, half, out=out)
    np.tanh(result, out=result)
    np.multiply(result, half, out=result)
    return np.add(result, half, out=result)


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
