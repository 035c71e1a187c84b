"""The random ops: RandomNormal, RandomUniform, their Like forms, and Multinomial.

Each node draws from a stream of its own, numpy's RandomState (MT19937) seeded with the node's
`seed` (its integer part, modulo 2^32) when the kernel is built, or from fresh entropy where the
node has none. A call draws what onnx.reference's kernel draws (``randn`` / ``rand`` of the
output shape, cast to the type, then scaled and shifted in that type), so the first call of a
seeded node gives onnx.reference's numbers; later calls go on along the stream, as
onnxruntime's kernels do (onnx.reference seeds its generator again at every call, so each
iteration of a loop would draw the same numbers). onnxruntime's generator is another one: its
numbers are not these, only their distribution is.
"""

import numpy as np

from ...narrow import is_narrow
from ..registry import kernel

_FLOATS = ("float16", "float32", "float64", "bfloat16")


def _stream(attrs):
    seed = attrs.get("seed")
    if seed is None or np.isnan(seed):
        return np.random.RandomState()
    return np.random.RandomState(int(seed) % 2 ** 32)


def _float_type(dtype, op_type):
    dtype = np.dtype(dtype)
    if dtype.name not in _FLOATS:
        raise ValueError(f"{op_type} makes float16, float32, float64 or bfloat16, not {dtype}")
    return dtype


def _normal(state, shape, dtype, mean, scale):
    result = state.randn(*shape).astype(dtype)
    result *= scale
    result += mean
    return result


def _uniform(state, shape, dtype, low, high):
    result = state.rand(*shape).astype(dtype)
    result *= high - low
    result += low
    return result


def _shape(attrs, op_type):
    shape = [int(d) for d in attrs["shape"]]
    if any(d < 0 for d in shape):
        raise ValueError(f"{op_type}: a negative dimension in shape {shape}")
    return shape


@kernel("RandomNormal", since=1, stateful=True)
def random_normal(attrs):
    """RandomNormal-1 and 22: numbers of N(mean, scale^2) of `shape`, of `dtype` (float32)."""
    dtype = _float_type(attrs.get("dtype", np.float32), "RandomNormal")
    shape, state = _shape(attrs, "RandomNormal"), _stream(attrs)
    mean, scale = float(attrs.get("mean", 0.0)), float(attrs.get("scale", 1.0))
    return lambda: _normal(state, shape, dtype, mean, scale)


@kernel("RandomUniform", since=1, stateful=True)
def random_uniform(attrs):
    """RandomUniform-1 and 22: numbers uniform in [low, high) of `shape`, of `dtype`
    (float32)."""
    dtype = _float_type(attrs.get("dtype", np.float32), "RandomUniform")
    shape, state = _shape(attrs, "RandomUniform"), _stream(attrs)
    low, high = float(attrs.get("low", 0.0)), float(attrs.get("high", 1.0))
    return lambda: _uniform(state, shape, dtype, low, high)


def _like_type(attrs, x, op_type):
    if "dtype" in attrs:
        return _float_type(attrs["dtype"], op_type)
    if x.dtype.kind != "f" and not is_narrow(x.dtype):
        raise ValueError(f"{op_type} of a {x.dtype} input needs a dtype attribute")
    return _float_type(x.dtype, op_type)


@kernel("RandomNormalLike", since=1, stateful=True)
def random_normal_like(attrs):
    """RandomNormalLike-1 and 22: RandomNormal of the input's shape, of `dtype` (the input's
    type where it has none)."""
    state = _stream(attrs)
    mean, scale = float(attrs.get("mean", 0.0)), float(attrs.get("scale", 1.0))
    return lambda x: _normal(state, x.shape, _like_type(attrs, x, "RandomNormalLike"), mean,
                             scale)


@kernel("RandomUniformLike", since=1, stateful=True)
def random_uniform_like(attrs):
    """RandomUniformLike-1 and 22: RandomUniform of the input's shape, of `dtype` (the input's
    type where it has none)."""
    state = _stream(attrs)
    low, high = float(attrs.get("low", 0.0)), float(attrs.get("high", 1.0))
    return lambda x: _uniform(state, x.shape, _like_type(attrs, x, "RandomUniformLike"), low,
                              high)


@kernel("Multinomial", since=7, stateful=True)
def multinomial(attrs):
    """Multinomial-7 and 22: x [batch, classes] of unnormalized log-probabilities -> [batch,
    sample_size] class indices (int32, or `dtype`), each drawn with probability softmax(x) of its
    row: a uniform number in [0, 1) placed in the row's cumulative probabilities."""
    dtype = np.dtype(attrs.get("dtype", np.int32))
    if dtype not in (np.int32, np.int64):
        raise ValueError(f"Multinomial makes int32 or int64, not {dtype}")
    samples, state = int(attrs.get("sample_size", 1)), _stream(attrs)
    if samples < 0:
        raise ValueError(f"Multinomial: a negative sample_size {samples}")

    def drawn(x):
        if x.ndim != 2 or not x.shape[1]:
            raise ValueError(f"Multinomial takes [batch, classes] of at least one class, got "
                             f"shape {list(x.shape)}")
        logits = x.astype(np.float64)
        weights = np.exp(logits - logits.max(axis=1, keepdims=True))
        cumulative = np.cumsum(weights, axis=1)
        cumulative /= cumulative[:, -1:]
        # One search over every row: row b's probabilities are offset by b, as its numbers.
        rows, classes = np.arange(x.shape[0])[:, None], x.shape[1]
        u = state.random_sample((x.shape[0], samples)) + rows
        found = np.searchsorted((cumulative + rows).reshape(-1), u.reshape(-1), side="right")
        found = found.reshape(u.shape) - rows * classes
        return np.minimum(found, classes - 1).astype(dtype)

    return drawn
