"""Convolution and pooling over the spatial axes of [N, C, D1, D2, ...] tensors: Conv,
ConvTranspose, ConvInteger, QLinearConv, MaxPool, AveragePool, GlobalAveragePool,
GlobalMaxPool. The window maths is shared with OpenVINO's layers (kernels/_spatial.py); here
ONNX's attributes become a `Geometry`."""

import numpy as np

from .. import _spatial
from ..registry import kernel
from .quantization import _integer_range, _saturated


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


def _transposed_geometry(attrs, spatial, kernel):
    """(strides, dilations, begin, lengths) of a ConvTranspose on `spatial` input sizes: the
    output's sizes and the part of the full scatter they read, from ``output_shape`` (its last
    dims), ``auto_pad`` SAME_* (input size times stride) or the explicit ``pads``, with
    ``output_padding`` added at the end, as the operator's formulas give them."""
    rank = len(spatial)
    strides = [int(s) for s in attrs.get("strides", [1] * rank)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * rank)]
    extra = [int(p) for p in attrs.get("output_padding", [0] * rank)]
    pads = [int(p) for p in attrs.get("pads", [0] * 2 * rank)]
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise ValueError(f"auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got "
                         f"{auto_pad!r}")
    if not len(strides) == len(dilations) == len(extra) == rank or len(pads) != 2 * rank:
        raise ValueError(f"strides, dilations, output_padding and pads must have one value "
                         f"per spatial axis ({rank}; pads two)")
    full = [s * (n - 1) + e + (k - 1) * d + 1
            for n, k, s, d, e in zip(spatial, kernel, strides, dilations, extra)]
    shape = attrs.get("output_shape")
    if shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if shape is not None:
            lengths = [int(v) for v in shape][-rank:]
            total = [f - length for f, length in zip(full, lengths)]
        else:  # input size times stride, where the padding that takes is not negative (else
            # the full scatter, as onnxruntime clamps it)
            total = [max(0, f - n * s) for f, n, s in zip(full, spatial, strides)]
            lengths = [f - t for f, t in zip(full, total)]
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        return strides, dilations, begin, lengths
    if auto_pad == "VALID":
        pads = [0] * 2 * rank
    lengths = [f - b - e for f, b, e in zip(full, pads[:rank], pads[rank:])]
    return strides, dilations, pads[:rank], lengths


@kernel("ConvTranspose", since=1)
def conv_transpose(attrs):
    """ConvTranspose-1, 11 and 22: X [N, C, *spatial], W [C, M/group, *kernel] (+ B [M]) ->
    [N, M, *out]; each input position scatters through the kernel's taps (one GEMM a group,
    kernels/_spatial.py)."""
    groups = int(attrs.get("group", 1))

    def convolve(x, w, b=None):
        kernel_shape = attrs.get("kernel_shape", w.shape[2:])
        geometry = _transposed_geometry(attrs, x.shape[2:], [int(k) for k in kernel_shape])
        y = _spatial.transposed_convolve(x, w, *geometry, groups=groups)
        if b is not None:
            y += b.reshape((-1,) + (1,) * (x.ndim - 2))
        return y

    return convolve


def _centred(values, zero_point, per_channel_axis=None):
    """``values - zero_point`` in float64 (exact for 8-bit integers); a zero point of one value
    a channel along `per_channel_axis`."""
    centred = values.astype(np.float64)
    if zero_point is not None:
        zero = np.asarray(zero_point).astype(np.float64)
        if zero.size > 1:
            zero = zero.reshape((-1,) + (1,) * (values.ndim - 1 - per_channel_axis))
        else:
            zero = zero.reshape(())
        centred -= zero
    return centred


def _integer_conv(attrs, x, w, x_zero_point, w_zero_point):
    """The convolution of the centred x and w, exact in float64 (each partial sum an integer
    below 2**53), padding the centred x with 0 (x's zero point)."""
    groups = int(attrs.get("group", 1))
    geometry = _geometry(attrs, x.shape[2:], attrs.get("kernel_shape", w.shape[2:]))
    return _spatial.convolve(_centred(x, x_zero_point), _centred(w, w_zero_point, 0), geometry,
                             groups)


@kernel("ConvInteger", since=10)
def conv_integer(attrs):
    """ConvInteger-10: ``conv(x - x_zero_point, w - w_zero_point)`` in int32; w's zero point
    one for all or one an output channel."""

    def convolve(x, w, x_zero_point=None, w_zero_point=None):
        return _integer_conv(attrs, x, w, x_zero_point, w_zero_point).astype(np.int32)

    return convolve


@kernel("QLinearConv", since=10)
def qlinear_conv(attrs):
    """QLinearConv-10: the integer convolution of the centred x and w plus the int32 bias,
    requantized as onnxruntime does: ``saturate(round(acc * (x_scale * w_scale / y_scale)) +
    y_zero_point)``, the multiplier (one an output channel where w's scale is) and the product
    in float32, rounding half to even."""
    def convolve(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
                 b=None):
        dtype = np.dtype(y_zero_point.dtype)
        bounds = _integer_range(dtype)
        accumulated = _integer_conv(attrs, x, w, x_zero_point, w_zero_point)
        if b is not None:
            accumulated += b.astype(np.float64).reshape((-1,) + (1,) * (x.ndim - 2))
        accumulated = accumulated.astype(np.float32)
        multiplier = np.asarray(x_scale, np.float32) * np.asarray(w_scale, np.float32) \
            / np.asarray(y_scale, np.float32)
        multiplier = multiplier.reshape((-1,) + (1,) * (x.ndim - 2) if multiplier.size > 1
                                        else ())
        accumulated *= multiplier
        rounded = np.rint(accumulated, out=accumulated)
        rounded += np.float32(np.asarray(y_zero_point).reshape(()))
        return _saturated(rounded, bounds, dtype)

    return convolve
