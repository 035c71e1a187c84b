"""Normalizations: LayerNormalization, BatchNormalization, InstanceNormalization.

Each is ``(x - mean) / sqrt(var + epsilon) * scale + bias`` over its own axes; they differ in which
axes the statistics cover and where they come from (the input itself, or BatchNormalization's
running statistics in inference)."""

import numpy as np

from ..registry import kernel


def _channel_shaped(parameter, ndim):
    """A per-channel parameter ([C]) shaped to broadcast against [N, C, D1, ...]; one of another
    rank (BatchNormalization's spatial=0 before opset 9: [C, D1, ...]) lines up after N."""
    parameter = np.asarray(parameter)
    if parameter.ndim == 1:
        return parameter.reshape((-1,) + (1,) * (ndim - 2))
    return parameter


@kernel("LayerNormalization", since=17, multi=True)
def layer_normalization(attrs, n_outputs):
    axis = int(attrs.get("axis", -1))
    epsilon = float(attrs.get("epsilon", 1e-5))
    stash = np.dtype(attrs.get("stash_type", np.float32))  # the frontend resolved the number

    def normalize(x, scale, bias=None):
        # The statistics in the stash type (float32 by default), as the schema's function body.
        first = axis % x.ndim if x.ndim else 0
        axes = tuple(range(first, x.ndim))
        wide = x.astype(stash, copy=False)
        mean = wide.mean(axis=axes, keepdims=True)
        centred = wide - mean
        variance = np.mean(centred * centred, axis=axes, keepdims=True)
        inverse_std = 1 / np.sqrt(variance + stash.type(epsilon))
        y = (centred * inverse_std).astype(x.dtype, copy=False) * scale
        if bias is not None:
            y += bias
        return (y.astype(x.dtype, copy=False), mean, inverse_std)[:n_outputs]

    return normalize


def _training_step(x, scale, bias, running_mean, running_var, epsilon, momentum):
    """Training: normalize with the batch's own statistics (biased variance); also return the
    running statistics moved toward them, and the batch's. All in x's type."""
    axes = (0,) + tuple(range(2, x.ndim))
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    y = _batch_normalize(x, scale, bias, mean, var, epsilon)
    new_mean = running_mean * momentum + mean * (1 - momentum)
    new_var = running_var * momentum + var * (1 - momentum)
    return tuple(r.astype(x.dtype, copy=False) for r in (y, new_mean, new_var, mean, var))


def _batch_normalize(x, scale, bias, mean, var, epsilon):
    shaped = [_channel_shaped(p, x.ndim) for p in (scale, bias, mean, var)]
    scale, bias, mean, var = shaped
    y = (x - mean) / np.sqrt(var + x.dtype.type(epsilon)) * scale + bias
    return y.astype(x.dtype, copy=False)


@kernel("BatchNormalization", since=14, multi=True)
def batch_normalization_14(attrs, n_outputs):
    epsilon = float(attrs.get("epsilon", 1e-5))
    momentum = float(attrs.get("momentum", 0.9))
    training = bool(attrs.get("training_mode", 0))

    def normalize(x, scale, bias, running_mean, running_var):
        if not training:
            return (_batch_normalize(x, scale, bias, running_mean, running_var, epsilon),)
        return _training_step(x, scale, bias, running_mean, running_var, epsilon,
                              momentum)[:min(n_outputs, 3)]

    return normalize


@kernel("BatchNormalization", since=1, multi=True)
def batch_normalization_1(attrs, n_outputs):
    """Opsets 1-13: inference when the node has one output; with the training outputs (running
    mean and variance, saved mean and variance) the batch's statistics, as opset 14's training."""
    epsilon = float(attrs.get("epsilon", 1e-5))
    momentum = float(attrs.get("momentum", 0.9))

    def normalize(x, scale, bias, running_mean, running_var):
        if n_outputs == 1:
            return (_batch_normalize(x, scale, bias, running_mean, running_var, epsilon),)
        return _training_step(x, scale, bias, running_mean, running_var, epsilon,
                              momentum)[:n_outputs]

    return normalize


@kernel("InstanceNormalization", since=1)
def instance_normalization(attrs):
    epsilon = float(attrs.get("epsilon", 1e-5))

    def normalize(x, scale, bias):
        axes = tuple(range(2, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        var = x.var(axis=axes, keepdims=True)
        y = (x - mean) / np.sqrt(var + x.dtype.type(epsilon))
        y = y * _channel_shaped(scale, x.ndim) + _channel_shaped(bias, x.ndim)
        return y.astype(x.dtype, copy=False)

    return normalize


@kernel("LpNormalization", since=1)
def lp_normalization(attrs):
    """LpNormalization-1 and 22: x over its L1 or L2 norm along `axis`, in x's type; a lane
    of norm 0 stays 0, as in onnxruntime."""
    axis, p = int(attrs.get("axis", -1)), int(attrs.get("p", 2))
    if p not in (1, 2):
        raise ValueError(f"LpNormalization: p must be 1 or 2, not {p}")

    def normalize(x):
        norm = np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1 else \
            np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
        norm = np.where(norm == 0, 1, norm).astype(x.dtype, copy=False)
        return (x / norm).astype(x.dtype, copy=False)

    return normalize


@kernel("LRN", since=1)
def lrn(attrs):
    """LRN-1 and 13: ``x / (bias + alpha / size * square_sum) ** beta``, the square sum over the
    channels ``c - (size - 1) // 2`` to ``c + size // 2`` (those there are)."""
    alpha, beta = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75))
    bias, size = float(attrs.get("bias", 1.0)), int(attrs["size"])
    before, after = (size - 1) // 2, size // 2

    def normalize(x):
        squares = np.square(x)
        # A running sum over channels: window c is cumulative[c + after + 1] - cumulative[c -
        # before], over squares padded with zeros on both sides.
        pads = [(0, 0)] * x.ndim
        pads[1] = (before + 1, after)
        cumulative = np.cumsum(np.pad(squares, pads), axis=1)
        channels = x.shape[1]
        window = np.take(cumulative, range(size, size + channels), axis=1) \
            - np.take(cumulative, range(channels), axis=1)
        scale = np.power(bias + alpha / size * window, beta)
        return (x / scale).astype(x.dtype, copy=False)

    return normalize
