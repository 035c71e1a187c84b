"""Normalization layers of OpenVINO IR: MVN, NormalizeL2, GroupNormalization and LRN."""

import numpy as np

from .._ir_attrs import DOMAIN, as_bool, as_choice, as_float, as_int
from ..registry import kernel


def _axes(axes, ndim):
    return tuple(sorted({int(a) % ndim for a in np.asarray(axes).ravel()})) if ndim else ()


@kernel("MVN", domain=DOMAIN, since=6)
def mvn(attrs):
    """(data, axes) -> data minus its mean over axes, divided, with ``normalize_variance``, by
    sqrt(variance + eps) (``eps_mode`` inside_sqrt) or sqrt(variance) + eps (outside_sqrt)."""
    normalize_variance = as_bool(attrs, "normalize_variance")
    eps = as_float(attrs, "eps", 1e-9)
    mode = as_choice(attrs, "eps_mode", ("inside_sqrt", "outside_sqrt"))

    def normalize(x, axes):
        axes = _axes(axes, x.ndim)
        centred = x - x.mean(axis=axes, keepdims=True)
        if not normalize_variance:
            return centred.astype(x.dtype, copy=False)
        variance = np.mean(centred * centred, axis=axes, keepdims=True)
        t = x.dtype.type
        scale = np.sqrt(variance + t(eps)) if mode == "inside_sqrt" else np.sqrt(variance) + t(eps)
        return (centred / scale).astype(x.dtype, copy=False)

    return normalize


@kernel("NormalizeL2", domain=DOMAIN, since=1)
def normalize_l2(attrs):
    """(data, axes) -> data / sqrt(eps_mode(sum of squares over axes, eps)), eps_mode add or
    max; no axes: each element divided by its own magnitude."""
    eps = as_float(attrs, "eps", 1e-10)
    mode = as_choice(attrs, "eps_mode", ("add", "max"))

    def normalize(x, axes):
        axes = _axes(axes, x.ndim)
        squares = np.sum(x * x, axis=axes, keepdims=True) if axes else x * x
        t = x.dtype.type
        bounded = squares + t(eps) if mode == "add" else np.maximum(squares, t(eps))
        return (x / np.sqrt(bounded)).astype(x.dtype, copy=False)

    return normalize


@kernel("GroupNormalization", domain=DOMAIN, since=12)
def group_normalization(attrs):
    """(data [N, C, ...], scale [C], bias [C]) -> each of ``num_groups`` channel groups
    standardized over its channels and spatial positions, then scale * y + bias per channel."""
    groups, eps = as_int(attrs, "num_groups", 1), as_float(attrs, "epsilon", 1e-5)

    def normalize(x, scale, bias):
        grouped = x.reshape((x.shape[0], groups, -1))
        centred = grouped - grouped.mean(axis=-1, keepdims=True)
        variance = np.mean(centred * centred, axis=-1, keepdims=True)
        y = (centred / np.sqrt(variance + x.dtype.type(eps))).reshape(x.shape)
        channel = (-1,) + (1,) * (x.ndim - 2)
        return (y * np.reshape(scale, channel) + np.reshape(bias, channel)).astype(
            x.dtype, copy=False)

    return normalize


@kernel("LRN", domain=DOMAIN, since=1)
def lrn(attrs):
    """(data, axes) -> data / (bias + alpha / size^len(axes) * sum of squares)^beta, the sum over
    the window along each axis centred on the element (zeros outside): (size - 1) // 2 positions
    either side, as OpenVINO's reference implementation has it (the spec's example says size / 2,
    the same for the odd sizes models use)."""
    alpha, beta = as_float(attrs, "alpha", 1e-4), as_float(attrs, "beta", 0.75)
    bias, size = as_float(attrs, "bias", 1.0), as_int(attrs, "size", 1)
    half = (size - 1) // 2

    def normalize(x, axes):
        axes = _axes(axes, x.ndim)
        total = x * x
        for axis in axes:  # the window sums along one axis, then the next
            widths = [(0, 0)] * x.ndim
            widths[axis] = (half, half)
            windows = np.lib.stride_tricks.sliding_window_view(np.pad(total, widths),
                                                               2 * half + 1, axis=axis)
            total = windows.sum(axis=-1)
        t = x.dtype.type
        scale = (t(bias) + t(alpha / size ** len(axes)) * total) ** t(beta)
        return (x / scale).astype(x.dtype, copy=False)

    return normalize
