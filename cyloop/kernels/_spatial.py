"""Window operators over the spatial axes of [N, C, D1, D2, ...] tensors, for both op families:
convolution, max pooling (with the argmax's flat indices) and average pooling, and the transposed
convolution, which scatters through the same windows.

All of them look at windows: along each spatial axis, output position j reads input positions
``j * stride - pad_begin + t * dilation`` for t < kernel. The windows are a strided view of the
padded input (`Geometry.windows`), so pooling is one numpy reduction and convolution one GEMM per
group on the gathered windows (im2col), with no Python loop over positions.

The frontends differ only in how they spell the geometry (ONNX ``pads``/``auto_pad=NOTSET``/
``ceil_mode``, OpenVINO ``pads_begin``/``pads_end``/``auto_pad=explicit``/``rounding_type``),
which each translates into a `Geometry`.
"""

import math

import numpy as np

__all__ = ["AUTO_PADS", "ROUNDINGS", "Geometry", "argmax_indices", "average_pool", "convolve",
           "max_pool", "roi_batches", "transposed_convolve"]

AUTO_PADS = ("explicit", "same_upper", "same_lower", "valid")
# floor, ceil, and ceil_torch: ceil, but no window may start past the input and its begin padding
# (PyTorch's rule, and ONNX's ceil_mode; OpenVINO's plain ceil keeps such a window).
ROUNDINGS = ("floor", "ceil", "ceil_torch")


class Geometry:
    """Output sizes and padding of one window operator on an input of `spatial_shape`.

    ``begin``/``end`` are the padding to apply before/after each spatial axis so that every
    window lies inside the padded array: the given (or auto_pad's) pads, plus what a ceil
    rounding's last partial window needs at the end. ``counted_end`` is the given end padding
    alone (what an average that counts the padding counts)."""

    def __init__(self, spatial_shape, kernel, strides=None, dilations=None, pads_begin=None,
                 pads_end=None, auto_pad="explicit", rounding="floor"):
        rank = len(spatial_shape)
        self.kernel = [int(k) for k in kernel]
        self.strides = [int(s) for s in strides] if strides else [1] * rank
        self.dilations = [int(d) for d in dilations] if dilations else [1] * rank
        pads_begin = [int(p) for p in pads_begin] if pads_begin else [0] * rank
        pads_end = [int(p) for p in pads_end] if pads_end else [0] * rank
        if auto_pad not in AUTO_PADS:
            raise ValueError(f"auto_pad must be one of {AUTO_PADS}, got {auto_pad!r}")
        if rounding not in ROUNDINGS:
            raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
        if not len(self.kernel) == len(self.strides) == len(self.dilations) == rank:
            raise ValueError(f"kernel {self.kernel}, strides {self.strides} and dilations "
                             f"{self.dilations} must have one value per spatial axis ({rank})")
        self.begin, self.counted_end, self.out = [], [], []
        for axis, size in enumerate(spatial_shape):
            stride, extent = self.strides[axis], self.extent(axis)
            if auto_pad in ("same_upper", "same_lower"):
                out = -(-size // stride)
                total = max(0, (out - 1) * stride + extent - size)
                small, large = total // 2, total - total // 2
                begin, end = (small, large) if auto_pad == "same_upper" else (large, small)
            else:  # explicit pads, or none (valid: OpenVINO rounds these as explicit ones)
                begin, end = (0, 0) if auto_pad == "valid" else (pads_begin[axis], pads_end[axis])
                span = size + begin + end - extent
                out = (math.floor if rounding == "floor" else math.ceil)(span / stride) + 1
                if rounding == "ceil_torch" and (out - 1) * stride >= size + begin:
                    out -= 1  # the last window must start inside the input or its left pad
                out = max(out, 0)
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


def max_pool(x, geometry):
    """(maxima, the windows view they came from) of [N, C, *spatial] `x`; padding never wins."""
    windows = geometry.windows(geometry.pad(x, _lowest(x.dtype)))
    return windows.max(axis=tuple(range(x.ndim, windows.ndim))), windows


def argmax_indices(shape, geometry, windows, column_major=False, first_axis=0):
    """Each window maximum's flat index into the (unpadded) input of `shape`, the first maximum
    in window order winning: the spatial part row-major (or `column_major`), then the leading
    axes from `first_axis` on (ONNX's MaxPool Indices: 0; OpenVINO's MaxPool-8 ``axis``)."""
    rank = len(geometry.kernel)
    lead = windows.shape[:len(shape)]
    flat = windows.reshape(lead + (-1,))
    offsets = np.unravel_index(np.argmax(flat, axis=-1), geometry.kernel)
    spatial = shape[2:]
    index = np.zeros(lead, np.int64)
    step = 1
    order = range(rank) if column_major else reversed(range(rank))
    for axis in order:
        positions = np.arange(geometry.out[axis]) * geometry.strides[axis] - geometry.begin[axis]
        coordinate = positions.reshape((-1,) + (1,) * (rank - 1 - axis)) \
            + offsets[axis] * geometry.dilations[axis]
        index += coordinate * step
        step *= spatial[axis]
    for axis in reversed(range(first_axis, len(shape) - rank)):
        index += np.arange(shape[axis]).reshape((-1,) + (1,) * (len(shape) - 1 - axis)) * step
        step *= shape[axis]
    return index


def average_pool(x, geometry, count_padding):
    """The window means of [N, C, *spatial] `x`, over the positions inside the input, or with
    `count_padding` inside the given padding too (never a ceil rounding's extra)."""
    rank = len(geometry.kernel)
    window_axes = tuple(range(x.ndim, x.ndim + rank))
    wide = np.promote_types(x.dtype, np.float32)  # float16 sums in float32
    total = geometry.windows(geometry.pad(x, 0)).sum(axis=window_axes, dtype=wide)
    counted = np.zeros([b + n + e for b, n, e in
                        zip(geometry.begin, x.shape[2:], geometry.end)], wide)
    inner = tuple(slice(0 if count_padding else b, b + n + (c if count_padding else 0))
                  for b, n, c in zip(geometry.begin, x.shape[2:], geometry.counted_end))
    counted[inner] = 1
    count = geometry.windows(counted).sum(axis=tuple(range(rank, 2 * rank)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (total / count).astype(x.dtype, copy=False)


def convolve(x, w, geometry, groups=1):
    """Y[n, m] = sum over c, t of X_padded[n, c, window t] W[m, c, t], per group: `x` [N, C,
    *spatial], `w` [M, C/groups, *kernel]."""
    rank = x.ndim - 2
    windows = geometry.windows(geometry.pad(x, 0))  # [N, C, *out, *kernel]
    n, channels, out = x.shape[0], x.shape[1], windows.shape[2:2 + rank]
    m = w.shape[0]
    per_group = channels // groups
    if per_group * groups != channels or w.shape[1] != per_group or m % groups:
        raise ValueError(f"a convolution with group={groups}: input channels {channels} and "
                         f"weight shape {list(w.shape)} do not divide into the groups")
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
    return y


def transposed_convolve(x, w, strides, dilations, begin, lengths, groups=1):
    """The transposed convolution (a convolution's gradient with respect to its input): input
    position i scatters X[n, c, i] W[c, m, t] to output position i * stride + t * dilation, per
    group; the result is then read from `begin` on, `lengths` positions per spatial axis (zeros
    where the scatter reaches nothing: past its end, or before 0 for a negative `begin`, as a
    SAME padding whose stride outruns the kernel gives). `x` [N, C, *spatial], `w` [C,
    M/groups, *kernel].

    One GEMM per group gives every (input position, kernel tap) product; each tap then adds its
    products to a strided slice of the output, so the Python loop runs over the kernel's taps."""
    rank = x.ndim - 2
    n, channels, spatial = x.shape[0], x.shape[1], x.shape[2:]
    kernel = w.shape[2:]
    per_group = channels // groups if groups else 0
    if w.ndim != x.ndim or per_group * groups != channels or w.shape[0] != channels:
        raise ValueError(f"a transposed convolution with {groups} group(s): input channels "
                         f"{channels} and weight shape {list(w.shape)} do not match")
    if not len(strides) == len(dilations) == len(begin) == len(lengths) == rank:
        raise ValueError(f"strides {strides}, dilations {dilations}, pads and output lengths "
                         f"must have one value per spatial axis ({rank})")
    if any(length < 0 for length in lengths):
        raise ValueError(f"a transposed convolution's output lengths must not be negative, "
                         f"got {list(lengths)}")
    lead = [max(0, -b) for b in begin]  # (positions before the scatter's first)
    begin = [b + a for b, a in zip(begin, lead)]
    rows = w.shape[1]
    reach = [(size - 1) * stride + (k - 1) * dilation + 1 if size and k else 0
             for size, k, stride, dilation in zip(spatial, kernel, strides, dilations)]
    full = [max(a + r, b + length) for a, r, b, length in zip(lead, reach, begin, lengths)]
    y = np.zeros((n, groups * rows) + tuple(full), np.result_type(x.dtype, w.dtype))
    for g in range(groups):
        part = x[:, g * per_group:(g + 1) * per_group]
        products = np.tensordot(part, w[g * per_group:(g + 1) * per_group],
                                axes=([1], [0]))  # [N, *spatial, M/G, *kernel]
        products = np.moveaxis(products, 1 + rank, 1)  # [N, M/G, *spatial, *kernel]
        for tap in np.ndindex(*kernel):
            region = tuple(slice(a + t * d, a + t * d + (size - 1) * s + 1, s)
                           for a, t, d, size, s in zip(lead, tap, dilations, spatial, strides))
            y[(slice(None), slice(g * rows, (g + 1) * rows)) + region] += \
                products[(Ellipsis,) + tap]
    window = tuple(slice(b, b + length) for b, length in zip(begin, lengths))
    return np.ascontiguousarray(y[(slice(None), slice(None)) + window])


def roi_batches(op: str, maps, rois, batch_indices) -> np.ndarray:
    """The batch index of each region of a region-of-interest op (ONNX RoiAlign, OpenVINO
    ROIAlign), as int64: feature maps [N, C, H, W], rois [R, 4] and batch indices [R] in
    [0, N); else a ValueError naming `op`."""
    if maps.ndim != 4 or rois.ndim != 2 or rois.shape[-1] != 4 \
            or np.shape(batch_indices) != rois.shape[:1]:
        raise ValueError(f"{op} needs feature maps [N, C, H, W], rois [R, 4] and batch indices "
                         f"[R], got {list(maps.shape)}, {list(rois.shape)} and "
                         f"{list(np.shape(batch_indices))}")
    batches = np.asarray(batch_indices).astype(np.int64)
    if batches.size and (batches.min() < 0 or batches.max() >= maps.shape[0]):
        raise ValueError(f"{op} batch indices must be in [0, {maps.shape[0]}), got "
                         f"{batches.tolist()}")
    return batches
