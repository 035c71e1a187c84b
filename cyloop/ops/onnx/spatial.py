"""Convolution and pooling over the spatial axes of [N, C, D1, D2, ...] tensors: Conv, MaxPool,
AveragePool, GlobalAveragePool, GlobalMaxPool.

All of them look at windows: along each spatial axis, output position j reads input positions
``j * stride - pad_begin + t * dilation`` for t < kernel. The windows are a strided view of the
padded input (`_windows`), so pooling is one numpy reduction and Conv one GEMM per group on the
gathered windows (im2col), with no Python loop over positions.
"""

import math

import numpy as np

from ..registry import kernel


class _Geometry:
    """Output sizes and padding of one window operator, from its attributes and input shape.

    ``begin``/``end`` are the padding to apply before/after each spatial axis so that every
    window lies inside the padded array: the attribute's pads, plus what ceil_mode's last partial
    window needs at the end. ``counted_end`` is the attribute's end padding alone (what
    AveragePool's count_include_pad counts)."""

    def __init__(self, attrs, spatial_shape, kernel_shape):
        rank = len(spatial_shape)
        self.kernel = [int(k) for k in kernel_shape]
        self.strides = [int(s) for s in attrs.get("strides", [1] * rank)]
        self.dilations = [int(d) for d in attrs.get("dilations", [1] * rank)]
        auto_pad = attrs.get("auto_pad", "NOTSET")
        ceil_mode = bool(attrs.get("ceil_mode", 0))
        pads = [int(p) for p in attrs.get("pads", [0] * 2 * rank)]
        self.begin, self.counted_end, self.out = [], [], []
        for axis, size in enumerate(spatial_shape):
            stride, extent = self.strides[axis], self.extent(axis)
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                out = -(-size // stride)
                total = max(0, (out - 1) * stride + extent - size)
                small, large = total // 2, total - total // 2
                begin, end = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
            elif auto_pad == "VALID":
                begin = end = 0
                out = max(0, (size - extent) // stride + 1)
            elif auto_pad == "NOTSET":
                begin, end = pads[axis], pads[rank + axis]
                span = size + begin + end - extent
                out = (math.ceil if ceil_mode else math.floor)(span / stride) + 1
                if ceil_mode and (out - 1) * stride >= size + begin:
                    out -= 1  # the last window must start inside the input or its left pad
                out = max(out, 0)
            else:
                raise ValueError(f"auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got "
                                 f"{auto_pad!r}")
            self.begin.append(begin)
            self.counted_end.append(end)
            self.out.append(out)
        self.end = [max(end, (out - 1) * self.strides[axis] + self.extent(axis) - size - begin)
                    for axis, (size, begin, end, out)
                    in enumerate(zip(spatial_shape, self.begin, self.counted_end, self.out))]

    def extent(self, axis):
        """How many input positions one window spans along `axis` (dilation included)."""
        return (self.kernel[axis] - 1) * self.dilations[axis] + 1

    def pad(self, x, value):
        widths = [(0, 0)] * (x.ndim - len(self.kernel)) + list(zip(self.begin, self.end))
        if not any(any(w) for w in widths):
            return x
        return np.pad(x, widths, constant_values=value)

    def windows(self, padded):
        """[..., *out, *kernel] view of the windows of `padded` (no copy)."""
        rank = len(self.kernel)
        if not all(self.out):  # no window fits (VALID on an axis shorter than the kernel)
            return np.empty(padded.shape[:padded.ndim - rank] + tuple(self.out)
                            + tuple(self.kernel), padded.dtype)
        axes = tuple(range(padded.ndim - rank, padded.ndim))
        extents = [self.extent(axis) for axis in range(rank)]
        view = np.lib.stride_tricks.sliding_window_view(padded, extents, axis=axes)
        lead = (slice(None),) * (padded.ndim - rank)
        return view[lead + tuple(slice(None, (o - 1) * s + 1 if o else 0, s)
                                 for o, s in zip(self.out, self.strides))
                    + tuple(slice(None, None, d) for d in self.dilations)]


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@kernel("MaxPool", since=1, multi=True)
def max_pool(attrs, n_outputs):
    storage_order = int(attrs.get("storage_order", 0))

    def pool(x):
        rank = x.ndim - 2
        geometry = _Geometry(attrs, x.shape[2:], attrs["kernel_shape"])
        windows = geometry.windows(geometry.pad(x, _lowest(x.dtype)))
        window_axes = tuple(range(x.ndim, x.ndim + rank))
        y = windows.max(axis=window_axes)
        if n_outputs == 1:
            return (y,)
        return y, _argmax_indices(x.shape, geometry, windows, storage_order)

    return pool


def _argmax_indices(shape, geometry, windows, storage_order):
    """MaxPool's Indices: each maximum's flat index into the (unpadded) input, the spatial part
    row-major (storage_order 0) or column-major (1); the first maximum in window order wins."""
    rank = len(geometry.kernel)
    lead = windows.shape[:len(shape)]
    flat = windows.reshape(lead + (-1,))
    offsets = np.unravel_index(np.argmax(flat, axis=-1), geometry.kernel)
    spatial = shape[2:]
    index = np.zeros(lead, np.int64)
    step = 1
    order = range(rank) if storage_order else reversed(range(rank))
    for axis in order:
        positions = np.arange(geometry.out[axis]) * geometry.strides[axis] - geometry.begin[axis]
        coordinate = positions.reshape((-1,) + (1,) * (rank - 1 - axis)) \
            + offsets[axis] * geometry.dilations[axis]
        index += coordinate * step
        step *= spatial[axis]
    channel = np.arange(shape[0] * shape[1]).reshape(shape[:2] + (1,) * rank)
    return index + channel * step


def _average_pool(attrs):
    include_pad = bool(attrs.get("count_include_pad", 0))

    def pool(x):
        rank = x.ndim - 2
        geometry = _Geometry(attrs, x.shape[2:], attrs["kernel_shape"])
        window_axes = tuple(range(x.ndim, x.ndim + rank))
        wide = np.promote_types(x.dtype, np.float32)  # float16 sums in float32
        total = geometry.windows(geometry.pad(x, 0)).sum(axis=window_axes, dtype=wide)
        # How many positions each window averages: those inside the input, or with
        # count_include_pad those inside the attribute's padding too (never ceil_mode's extra).
        counted = np.zeros([b + n + e for b, n, e in
                            zip(geometry.begin, x.shape[2:], geometry.end)], wide)
        inner = tuple(slice(0 if include_pad else b, b + n + (c if include_pad else 0))
                      for b, n, c in zip(geometry.begin, x.shape[2:], geometry.counted_end))
        counted[inner] = 1
        count = geometry.windows(counted).sum(axis=tuple(range(rank, 2 * rank)))
        with np.errstate(invalid="ignore", divide="ignore"):
            return (total / count).astype(x.dtype, copy=False)

    return pool


kernel("AveragePool", since=1)(_average_pool)


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
        rank = x.ndim - 2
        geometry = _Geometry(attrs, x.shape[2:], attrs.get("kernel_shape", w.shape[2:]))
        windows = geometry.windows(geometry.pad(x, 0))  # [N, C, *out, *kernel]
        n, channels, out = x.shape[0], x.shape[1], windows.shape[2:2 + rank]
        m = w.shape[0]
        per_group = channels // groups
        if per_group * groups != channels or w.shape[1] != per_group or m % groups:
            raise ValueError(f"Conv with group={groups}: input channels {channels} and weight "
                             f"shape {w.shape} do not divide into the groups")
        positions = int(np.prod(out))
        y = np.empty((n, m) + tuple(out), np.result_type(x.dtype, w.dtype))
        rows = m // groups
        for g in range(groups):
            part = windows[:, g * per_group:(g + 1) * per_group]
            # im2col: [N, *out, C/G, *kernel] -> [N * positions, C/G * prod(kernel)]
            columns = np.moveaxis(part, 1, 1 + rank).reshape(n * positions, -1)
            weights = w[g * rows:(g + 1) * rows].reshape(rows, -1)
            product = columns @ weights.T  # [N * positions, M/G]
            y[:, g * rows:(g + 1) * rows] = np.moveaxis(
                product.reshape((n,) + tuple(out) + (rows,)), -1, 1)
        if b is not None:
            y += b.reshape((m,) + (1,) * rank)
        return y

    return convolve
