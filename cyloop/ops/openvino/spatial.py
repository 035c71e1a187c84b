"""Convolution and pooling layers of OpenVINO IR: Convolution, GroupConvolution, MaxPool and
AvgPool, on the window maths ONNX's Conv and pools use too (ops/_spatial.py)."""

import numpy as np

from .. import _spatial
from ..registry import kernel
from ._attrs import DOMAIN, as_bool, as_dtype, as_int, as_ints


def _geometry(attrs, spatial_shape, kernel_shape):
    """OpenVINO's spelling: ``pads_begin``/``pads_end`` (ignored unless ``auto_pad`` is explicit),
    ``rounding_type`` floor, ceil or ceil_torch."""
    auto_pad = str(attrs.get("auto_pad", "explicit")).lower()
    auto_pad = "explicit" if auto_pad in ("", "notset") else auto_pad
    rounding = str(attrs.get("rounding_type", "floor")).lower()
    return _spatial.Geometry(spatial_shape, kernel_shape, as_ints(attrs, "strides"),
                             as_ints(attrs, "dilations"), as_ints(attrs, "pads_begin"),
                             as_ints(attrs, "pads_end"), auto_pad, rounding)


@kernel("Convolution", domain=DOMAIN, since=1)
def convolution(attrs):
    """(data [N, C, *spatial], filters [M, C, *kernel]) -> [N, M, *out]."""
    def convolve(x, w):
        return _spatial.convolve(x, w, _geometry(attrs, x.shape[2:], w.shape[2:]))

    return convolve


@kernel("GroupConvolution", domain=DOMAIN, since=1)
def group_convolution(attrs):
    """(data [N, G*C, *spatial], filters [G, M, C, *kernel]) -> [N, G*M, *out]."""
    def convolve(x, w):
        groups = w.shape[0]
        flat = w.reshape((groups * w.shape[1],) + w.shape[2:])
        return _spatial.convolve(x, flat, _geometry(attrs, x.shape[2:], w.shape[3:]), groups)

    return convolve


@kernel("MaxPool", domain=DOMAIN, since=1, multi=True)
def max_pool(attrs, n_outputs):
    """MaxPool-1: the maxima; MaxPool-8 (dilations, ``axis``) and -14 (ceil_torch) also the
    argmax's indices into the input flattened from ``axis`` on, padding not counted."""
    first_axis = as_int(attrs, "axis", 0)
    index_type = as_dtype(attrs, "index_element_type", np.int64)
    window = as_ints(attrs, "kernel")

    def pool(x):
        geometry = _geometry(attrs, x.shape[2:], window)
        y, windows = _spatial.max_pool(x, geometry)
        if n_outputs == 1:
            return (y,)
        indices = _spatial.argmax_indices(x.shape, geometry, windows,
                                          first_axis=first_axis % x.ndim)
        return y, indices.astype(index_type)

    return pool


@kernel("AvgPool", domain=DOMAIN, since=1)
def avg_pool(attrs):
    """AvgPool-1; -14 and -16 add ceil_torch and dilations. ``exclude-pad``: average over the
    positions inside the input only, else over those inside the given padding too."""
    count_padding = not as_bool(attrs, "exclude-pad")
    window = as_ints(attrs, "kernel")

    def pool(x):
        return _spatial.average_pool(x, _geometry(attrs, x.shape[2:], window), count_padding)

    return pool


# The later versions only add attributes the kernels read when present.
kernel("MaxPool", domain=DOMAIN, since=8, multi=True)(max_pool)
kernel("MaxPool", domain=DOMAIN, since=14, multi=True)(max_pool)
kernel("AvgPool", domain=DOMAIN, since=14)(avg_pool)
kernel("AvgPool", domain=DOMAIN, since=16)(avg_pool)
