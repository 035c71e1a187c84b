"""Convolution and pooling over the spatial axes of [N, C, D1, D2, ...] tensors: Conv,
ConvTranspose, ConvInteger, QLinearConv, DeformConv, MaxPool, AveragePool, LpPool,
GlobalAveragePool, GlobalMaxPool, GlobalLpPool; and their inverses MaxUnpool and Col2Im. The
window maths is shared with OpenVINO's layers (kernels/_spatial.py); here ONNX's attributes become
a `Geometry`."""

import itertools

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


@kernel("LpPool", since=1)
def lp_pool(attrs):
    """LpPool-1 (``p`` a float), 2, 11, 18 (``ceil_mode``, ``dilations``) and 22: each window's
    ``(sum |x| ** p) ** (1 / p)``, the padding counting as zeros; float16 in float32."""
    p = float(attrs.get("p", 2))

    def pool(x):
        geometry = _geometry(attrs, x.shape[2:], attrs["kernel_shape"])
        work = np.promote_types(x.dtype, np.float32)
        powered = np.power(np.abs(x.astype(work, copy=False)), work.type(p))
        windows = geometry.windows(geometry.pad(powered, 0))
        total = windows.sum(axis=tuple(range(x.ndim, windows.ndim)))
        return np.power(total, work.type(1 / p)).astype(x.dtype, copy=False)

    return pool


@kernel("MaxUnpool", since=9)
def max_unpool(attrs):
    """MaxUnpool-9, 11 and 22: (X, I[, output_shape]) -> zeros with X's values at MaxPool's
    flat indices I into the pooled-from shape, each spatial size ``(in - 1) * stride + kernel
    - pads``; a larger ``output_shape`` pads that at the end of each axis with zeros (the
    specification's own expected output, and onnx.reference's; onnxruntime reads I as flat
    indices into output_shape instead)."""
    kernel_shape = [int(k) for k in attrs["kernel_shape"]]
    rank = len(kernel_shape)
    strides = [int(v) for v in attrs.get("strides", [1] * rank)]
    pads = [int(v) for v in attrs.get("pads", [0] * 2 * rank)]

    def unpool(x, indices, output_shape=None):
        if x.shape != indices.shape or x.ndim != rank + 2:
            raise ValueError(f"MaxUnpool needs X and I of one shape [N, C, {rank} spatial "
                             f"sizes], got {list(x.shape)} and {list(indices.shape)}")
        inferred = list(x.shape[:2]) + [
            (n - 1) * s + k - b - e
            for n, s, k, b, e in zip(x.shape[2:], strides, kernel_shape, pads[:rank],
                                     pads[rank:])]
        y = np.zeros(inferred, x.dtype)
        flat = indices.reshape(-1)
        if flat.size and (flat.min() < 0 or flat.max() >= y.size):
            raise ValueError(f"MaxUnpool: indices must be in [0, {y.size}) for the pooled-from "
                             f"shape {inferred}, got [{flat.min()}, {flat.max()}]")
        y.reshape(-1)[flat] = x.reshape(-1)
        if output_shape is None:
            return y
        shape = [int(v) for v in np.asarray(output_shape).reshape(-1)]
        if len(shape) != x.ndim or any(o < i for o, i in zip(shape, inferred)):
            raise ValueError(f"MaxUnpool: output_shape {shape} must hold the pooled-from shape "
                             f"{inferred}")
        if shape == inferred:
            return y
        padded = np.zeros(shape, x.dtype)
        padded[tuple(slice(0, i) for i in inferred)] = y
        return padded

    return unpool


@kernel("Col2Im", since=18)
def col2im(attrs):
    """Col2Im-18: (input [N, C * prod(block), L], image_shape, block_shape) -> [N, C, *image]:
    the inverse of im2col, each column's block added back into the (padded) image at its
    window's place; L is the number of windows of the block (``strides``, ``dilations``) over
    the image and its ``pads``. The Python loop runs over the block's taps."""
    def rebuilt(columns, image_shape, block_shape):
        image = [int(v) for v in np.asarray(image_shape).reshape(-1)]
        block = [int(v) for v in np.asarray(block_shape).reshape(-1)]
        rank = len(image)
        strides = [int(v) for v in attrs.get("strides", [1] * rank)]
        dilations = [int(v) for v in attrs.get("dilations", [1] * rank)]
        pads = [int(v) for v in attrs.get("pads", [0] * 2 * rank)]
        if not len(block) == len(strides) == len(dilations) == rank or len(pads) != 2 * rank:
            raise ValueError(f"Col2Im: image_shape {image}, block_shape {block}, strides "
                             f"{strides}, dilations {dilations} and pads {pads} do not agree "
                             f"on the number of spatial axes")
        padded = [n + b + e for n, b, e in zip(image, pads[:rank], pads[rank:])]
        counts = [(size - (k - 1) * d - 1) // s + 1
                  for size, k, d, s in zip(padded, block, dilations, strides)]
        taps = int(np.prod(block))
        if columns.ndim != 3 or not taps or columns.shape[1] % taps \
                or columns.shape[2] != int(np.prod(counts)) or min(counts) < 1:
            raise ValueError(f"Col2Im: input of shape {list(columns.shape)} is not [N, C * "
                             f"{taps}, {int(np.prod(counts))}] for blocks {block} over the "
                             f"image {image}")
        n, channels = columns.shape[0], columns.shape[1] // taps
        blocks = columns.reshape([n, channels] + block + counts)
        y = np.zeros([n, channels] + padded, columns.dtype)
        for tap in itertools.product(*(range(k) for k in block)):
            region = tuple(slice(t * d, t * d + (c - 1) * s + 1, s)
                           for t, d, c, s in zip(tap, dilations, counts, strides))
            y[(slice(None), slice(None)) + region] += blocks[(slice(None), slice(None)) + tap]
        inner = tuple(slice(b, b + size) for b, size in zip(pads[:rank], image))
        return np.ascontiguousarray(y[(slice(None), slice(None)) + inner])

    return rebuilt


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


@kernel("GlobalLpPool", since=1)
@kernel("GlobalLpPool", since=2)
def global_lp_pool(attrs):
    """GlobalLpPool-1, 2 and 22: ``(sum |x| ** p) ** (1 / p)`` over the spatial axes (p a float
    at opset 1, an int after)."""
    p = float(attrs.get("p", 2))

    def pooled(x):
        axes = tuple(range(2, x.ndim))
        total = np.sum(np.power(np.abs(x), x.dtype.type(p)), axis=axes, keepdims=True)
        return np.power(total, x.dtype.type(1 / p)).astype(x.dtype, copy=False)

    return pooled


def _deformed_columns(x, offset, mask, kernel, strides, dilations, pads_begin, groups):
    """[N, C, *kernel, *out] of `x` [N, C, *in] read bilinearly at each window tap moved by its
    `offset` (one per offset group, tap and spatial axis), times its `mask`; a tap outside the
    input reads 0. The Python loop runs over the 2 ** rank corners of the bilinear taps."""
    rank = x.ndim - 2
    n, channels = x.shape[:2]
    out = offset.shape[2:]
    offset = offset.reshape((n, groups) + tuple(kernel) + (rank,) + tuple(out))
    work = offset.dtype.type
    corners_by_axis = []
    for axis in range(rank):
        # p = o * stride - pad + k * dilation + offset, [N, G, *kernel, *out]
        start = (np.arange(out[axis]) * strides[axis] - pads_begin[axis]).reshape(
            (-1,) + (1,) * (rank - 1 - axis))
        tap = (np.arange(kernel[axis]) * dilations[axis]).reshape(
            (-1,) + (1,) * (rank - 1 - axis) + (1,) * rank)
        position = offset[(slice(None), slice(None)) + (slice(None),) * rank + (axis,)] \
            + (start + tap).astype(offset.dtype)
        low = np.floor(position)
        fraction = position - low
        size = x.shape[2 + axis]
        corners = []
        for index, weight in ((low, work(1) - fraction), (low + 1, fraction)):
            inside = (index >= 0) & (index <= size - 1)
            corners.append((np.where(inside, index, 0).astype(np.intp),
                            np.where(inside, weight, work(0))))
        corners_by_axis.append(corners)
    grouped = x.reshape((n, groups, channels // groups) + x.shape[2:])
    batch = np.arange(n).reshape((n,) + (1,) * (rank + 1 + rank))
    group = np.arange(groups).reshape((1, groups) + (1,) * (2 * rank))
    columns = 0
    for combination in itertools.product(*corners_by_axis):
        weight = mask.reshape((n, groups) + tuple(kernel) + tuple(out)).astype(offset.dtype) \
            if mask is not None else None
        for _, w in combination:
            weight = w if weight is None else weight * w
        read = grouped[(batch, group, slice(None)) + tuple(i for i, _ in combination)]
        columns = columns + read * weight[..., None]  # [N, G, *kernel, *out, C/G]
    columns = np.moveaxis(columns, -1, 2)  # [N, G, C/G, *kernel, *out]
    return columns.reshape((n, channels) + tuple(kernel) + tuple(out))


@kernel("DeformConv", since=19)
def deform_conv(attrs):
    """DeformConv-19 and 22: (X [N, C, *in], W [M, C/group, *kernel], offset [N, offset_group *
    rank * prod(kernel), *out][, B [M], mask [N, offset_group * prod(kernel), *out]]) -> [N, M,
    *out]: a convolution whose every window tap reads X bilinearly at its place moved by its
    offset (per offset group of the input channels; zeros outside X) and weighed by its mask.
    The deformed windows are gathered once (im2col), then one GEMM per group."""
    groups = int(attrs.get("group", 1))
    offset_groups = int(attrs.get("offset_group", 1))

    def convolve(x, w, offset, b=None, mask=None):
        rank = x.ndim - 2
        kernel = [int(k) for k in attrs.get("kernel_shape", w.shape[2:])]
        strides = [int(v) for v in attrs.get("strides", [1] * rank)]
        dilations = [int(v) for v in attrs.get("dilations", [1] * rank)]
        pads = [int(v) for v in attrs.get("pads", [0] * 2 * rank)]
        n, channels = x.shape[:2]
        out = [(size + pads[a] + pads[rank + a] - (k - 1) * d - 1) // s + 1
               for a, (size, k, d, s) in enumerate(zip(x.shape[2:], kernel, dilations, strides))]
        taps = int(np.prod(kernel))
        m = w.shape[0]
        if rank < 1 or w.ndim != x.ndim or list(w.shape[2:]) != kernel \
                or channels != w.shape[1] * groups or m % groups or channels % offset_groups:
            raise ValueError(f"DeformConv: X {list(x.shape)}, W {list(w.shape)} with group "
                             f"{groups} and offset_group {offset_groups} do not match")
        if list(offset.shape) != [n, offset_groups * rank * taps] + out:
            raise ValueError(f"DeformConv: offset must be [{n}, {offset_groups * rank * taps}, "
                             f"*{out}], got {list(offset.shape)}")
        if mask is not None and list(mask.shape) != [n, offset_groups * taps] + out:
            raise ValueError(f"DeformConv: mask must be [{n}, {offset_groups * taps}, *{out}], "
                             f"got {list(mask.shape)}")
        work = np.float64 if x.dtype == np.float64 else np.float32
        columns = _deformed_columns(x.astype(work, copy=False), offset.astype(work), mask,
                                    kernel, strides, dilations, pads[:rank], offset_groups)
        positions = int(np.prod(out))
        per_group, rows = channels // groups, m // groups
        columns = columns.reshape(n, groups, per_group * taps, positions)
        weights = w.astype(work, copy=False).reshape(groups, rows, per_group * taps)
        y = np.matmul(weights[None], columns)  # [N, groups, M/groups, positions]
        y = y.reshape([n, m] + out)
        if b is not None:
            y += b.astype(work).reshape((m,) + (1,) * rank)
        return y.astype(x.dtype, copy=False)

    return convolve


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
