"""Convolution and pooling layers of OpenVINO IR: Convolution, GroupConvolution, their
BackpropData (transposed) forms, MaxPool and AvgPool, on the window maths ONNX's Conv and pools
use too (kernels/_spatial.py)."""

import numpy as np

from .. import _spatial
from .._ir_attrs import DOMAIN, as_bool, as_dtype, as_int, as_ints
from ..registry import kernel


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


def _backprop_geometry(attrs, spatial, kernel, output_shape):
    """(strides, dilations, where the output starts in the full scatter, output lengths) of a
    BackpropData layer. Without ``output_shape`` the output is the full scatter plus
    ``output_padding``, less ``pads_begin``/``pads_end`` (none with an ``auto_pad``). With it,
    same_upper / same_lower split the difference between the full scatter and the given shape
    (the odd one at the start for same_upper: OpenVINO's rule, and ONNX's), explicit pads say
    where the output starts (OpenVINO's shape inference; positions past the scatter are 0)."""
    rank = len(spatial)
    strides = as_ints(attrs, "strides") or [1] * rank
    dilations = as_ints(attrs, "dilations") or [1] * rank
    extra = as_ints(attrs, "output_padding") or [0] * rank
    auto_pad = str(attrs.get("auto_pad", "explicit")).lower()
    auto_pad = "explicit" if auto_pad in ("", "notset") else auto_pad
    if auto_pad not in _spatial.AUTO_PADS:
        raise ValueError(f"auto_pad must be one of {', '.join(_spatial.AUTO_PADS)}, got "
                         f"{auto_pad!r}")
    if auto_pad == "explicit":
        begin = as_ints(attrs, "pads_begin") or [0] * rank
        end = as_ints(attrs, "pads_end") or [0] * rank
    else:
        begin, end = [0] * rank, [0] * rank
    full = [(size - 1) * s + (k - 1) * d + 1 + e
            for size, k, s, d, e in zip(spatial, kernel, strides, dilations, extra)]
    if output_shape is None:
        return strides, dilations, begin, [f - b - e for f, b, e in zip(full, begin, end)]
    lengths = [int(v) for v in np.asarray(output_shape).reshape(-1)]
    if len(lengths) != rank:
        raise ValueError(f"output_shape must give the {rank} spatial length(s), got {lengths}")
    if auto_pad in ("same_upper", "same_lower"):
        totals = [max(f - length, 0) for f, length in zip(full, lengths)]
        begin = [t - t // 2 if auto_pad == "same_upper" else t // 2 for t in totals]
    return strides, dilations, begin, lengths


@kernel("ConvolutionBackpropData", domain=DOMAIN, since=1)
def convolution_backprop_data(attrs):
    """(data [N, C, *spatial], filters [C, M, *kernel][, output_shape]) -> [N, M, *out]: the
    transposed convolution."""
    def transposed(x, w, output_shape=None):
        geometry = _backprop_geometry(attrs, x.shape[2:], w.shape[2:], output_shape)
        return _spatial.transposed_convolve(x, w, *geometry)

    return transposed


@kernel("GroupConvolutionBackpropData", domain=DOMAIN, since=1)
def group_convolution_backprop_data(attrs):
    """(data [N, G*C, *spatial], filters [G, C, M, *kernel][, output_shape]) -> [N, G*M, *out]."""
    def transposed(x, w, output_shape=None):
        groups = w.shape[0]
        flat = w.reshape((groups * w.shape[1],) + w.shape[2:])
        geometry = _backprop_geometry(attrs, x.shape[2:], w.shape[3:], output_shape)
        return _spatial.transposed_convolve(x, flat, *geometry, groups=groups)

    return transposed


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
