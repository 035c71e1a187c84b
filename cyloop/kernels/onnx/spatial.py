"""Convolution and pooling over the spatial axes of [N, C, D1, D2, ...] tensors: Conv, MaxPool,
AveragePool, GlobalAveragePool, GlobalMaxPool. The window maths is shared with OpenVINO's layers
(kernels/_spatial.py); here ONNX's attributes become a `Geometry`."""

import numpy as np

from .. import _spatial
from ..registry import kernel


def _geometry(attrs, spatial_shape, kernel_shape):
    """ONNX's spelling: ``pads`` (all begins, then all ends), ``auto_pad`` NOTSET for explicit,
    ``ceil_mode`` (no window starting past the input and its begin padding)."""
    rank = len(spatial_shape)
    pads = [int(p) for p in attrs.get("pads", [0] * 2 * rank)]
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise ValueError(f"auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got "
                         f"{auto_pad!r}")
    return _spatial.Geometry(spatial_shape, kernel_shape, attrs.get("strides"),
                             attrs.get("dilations"), pads[:rank], pads[rank:],
                             "explicit" if auto_pad == "NOTSET" else auto_pad.lower(),
                             # (VALID's output size ignores ceil_mode)
                             "ceil_torch" if attrs.get("ceil_mode", 0) and auto_pad != "VALID"
                             else "floor")


@kernel("MaxPool", since=1, multi=True)
def max_pool(attrs, n_outputs):
    column_major = bool(int(attrs.get("storage_order", 0)))

    def pool(x):
        geometry = _geometry(attrs, x.shape[2:], attrs["kernel_shape"])
        y, windows = _spatial.max_pool(x, geometry)
        if n_outputs == 1:
            return (y,)
        return y, _spatial.argmax_indices(x.shape, geometry, windows, column_major)

    return pool


@kernel("AveragePool", since=1)
def average_pool(attrs):
    include_pad = bool(attrs.get("count_include_pad", 0))

    def pool(x):
        geometry = _geometry(attrs, x.shape[2:], attrs["kernel_shape"])
        return _spatial.average_pool(x, geometry, include_pad)

    return pool


@kernel("GlobalAveragePool", since=1)
def global_average_pool(attrs):
    return lambda x: np.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@kernel("GlobalMaxPool", since=1)
def global_max_pool(attrs):
    return lambda x: np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@kernel("Conv", since=1)
def conv(attrs):
    """Y[n, m] = sum over c, t of X_padded[n, c, window t] W[m, c, t] (+ B[m]), per group."""
    groups = int(attrs.get("group", 1))

    def convolve(x, w, b=None):
        geometry = _geometry(attrs, x.shape[2:], attrs.get("kernel_shape", w.shape[2:]))
        y = _spatial.convolve(x, w, geometry, groups)
        if b is not None:
            y += b.reshape((w.shape[0],) + (1,) * (x.ndim - 2))
        return y

    return convolve


@kernel("GlobalLpPool", since=2)
def global_lp_pool(attrs):
    """GlobalLpPool-2 and 22: ``(sum |x| ** p) ** (1 / p)`` over the spatial axes."""
    p = float(attrs.get("p", 2))

    def pooled(x):
        axes = tuple(range(2, x.ndim))
        total = np.sum(np.power(np.abs(x), x.dtype.type(p)), axis=axes, keepdims=True)
        return np.power(total, x.dtype.type(1 / p)).astype(x.dtype, copy=False)

    return pooled
