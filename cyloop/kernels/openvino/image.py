"""Image processing layers of OpenVINO IR: Interpolate-4/11, on the resampling maths ONNX's Resize
uses too (kernels/_resample.py), and GridSample-9."""

import numpy as np

from .. import _resample
from .._ir_attrs import DOMAIN, as_bool, as_choice, as_float, as_ints
from ..registry import kernel

_INTERPOLATE_MODES = ("nearest", "linear", "linear_onnx", "cubic")
_TRANSFORMS = ("half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn",
               "align_corners")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


def _resized_length(size, scale):
    """Interpolate's output length for a scale: the scale nudged up by 1e-6 and the product
    truncated, in float32 (OpenVINO's shape inference; the spec says floor(scale * size))."""
    if scale == np.float32(1):
        return size
    return int(np.float32(size) * (scale + np.float32(1e-6)))


def _to_type(result, dtype, rounds):
    """The float64 `result` in the layer's `dtype`: integers rounded half away from zero
    (`rounds`, linear mode) or truncated (the other modes), clamped to the type's range."""
    if dtype.kind not in "iu":
        return result.astype(dtype, copy=False)
    result = np.sign(result) * np.floor(np.abs(result) + 0.5) if rounds else np.trunc(result)
    info = np.iinfo(dtype)
    return np.clip(result, info.min, info.max).astype(dtype)


class _Interpolation:
    """Interpolate's attributes, bound once; `__call__` resizes padded data to a target given as
    the sizes or the scales of `axes`.

    Each resized axis is resampled in turn (every mode is separable). Nearest reads the position
    its coordinate rounds to; linear_onnx and cubic weigh the neighbours with the triangle and
    Keys' cubic kernel, reading the edge's value past the ends; linear weighs the neighbours
    inside the axis only, renormalized, its kernel widened by the scale on every axis when
    ``antialias`` is set and some axis shrinks. An axis whose scale is 1 or whose length does not
    change maps each position to itself (OpenVINO's rule), so it is left as it is."""

    def __init__(self, attrs):
        self.mode = as_choice(attrs, "mode", _INTERPOLATE_MODES)
        self.by_scales = as_choice(attrs, "shape_calculation_mode", ("sizes", "scales")) \
            == "scales"
        self.transform = as_choice(attrs, "coordinate_transformation_mode", _TRANSFORMS)
        self.nearest = as_choice(attrs, "nearest_mode", _NEAREST)
        self.antialias = as_bool(attrs, "antialias")
        self.pads = (as_ints(attrs, "pads_begin", []), as_ints(attrs, "pads_end", []))
        if any(p < 0 for pads in self.pads for p in pads):
            raise ValueError(f"pads_begin and pads_end must not be negative, got {self.pads}")
        self.cubic = _resample.cubic_kernel(as_float(attrs, "cube_coeff", -0.75))

    def _padded(self, x):
        """`x` with zeros added before and after each axis (pads past the rank ignored, missing
        ones 0)."""
        begin, end = ((list(pads) + [0] * x.ndim)[:x.ndim] for pads in self.pads)
        widths = list(zip(begin, end))
        return np.pad(x, widths) if any(begin) or any(end) else x

    def __call__(self, x, sizes, scales, axes):
        x = self._padded(x)
        rank = x.ndim
        axes = list(range(rank)) if axes is None else \
            [int(a) for a in np.asarray(axes).reshape(-1)]
        if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
            raise ValueError(f"Interpolate axes must be distinct and in [0, {rank}), got {axes}")
        if self.by_scales:
            factors = np.asarray(scales, np.float32).reshape(-1)
            if len(factors) != len(axes) or not np.all(factors > 0):
                raise ValueError(f"Interpolate needs {len(axes)} positive scales, got "
                                 f"{factors.tolist()}")
            lengths = [_resized_length(x.shape[a], f) for a, f in zip(axes, factors)]
        else:
            lengths = [int(v) for v in np.asarray(sizes).reshape(-1)]
            if len(lengths) != len(axes) or min(lengths, default=1) < 0:
                raise ValueError(f"Interpolate needs {len(axes)} sizes, got {lengths}")
            # (in float64: OpenVINO's spec divides the sizes in Python floats, and its plugin
            # agrees, where float32 puts 5.5 / (11 / 6) a hair under 3)
            factors = np.float64(lengths) / np.float64([x.shape[a] for a in axes])
        shrinks = self.antialias and any(f < 1 for f in factors)
        result = x if self.mode == "nearest" else x.astype(np.float64)
        for axis, out, scale in zip(axes, lengths, (float(f) for f in factors)):
            size = result.shape[axis]
            if scale == 1 or out == size:
                continue
            if size == 0 or out == 0:
                shape = list(result.shape)
                shape[axis] = out
                result = np.zeros(shape, result.dtype)
                continue
            coordinates = _resample.source_coordinates(self.transform, out, size, scale, out)
            result = self._resample_axis(result, axis, coordinates, scale, shrinks)
        if result is x:
            return x.copy()
        return _to_type(result, x.dtype, self.mode == "linear")

    def _resample_axis(self, data, axis, x, scale, shrinks):
        if self.mode == "nearest":
            rule = self.nearest
            if rule == "simple":  # ceil when shrinking, else the fraction dropped
                rule = "ceil" if scale < 1 else "truncate"
            return _resample.nearest_axis(data, axis, x, rule)
        if self.mode == "cubic":
            return _resample.weighted_axis(data, axis, x, self.cubic, 2)
        if self.mode == "linear_onnx":
            return _resample.weighted_axis(data, axis, x, _resample.linear_kernel, 1)
        return _resample.weighted_axis(data, axis, x, _resample.linear_kernel, 1,
                                       shrink=scale if shrinks else 1.0, exclude_outside=True,
                                       normalize=True)


@kernel("Interpolate", domain=DOMAIN, since=4)
def interpolate_4(attrs):
    """(data, sizes, scales[, axes]): ``shape_calculation_mode`` says which of the two sets the
    output shape."""
    interpolation = _Interpolation(attrs)
    return lambda x, sizes, scales, axes=None: interpolation(x, sizes, scales, axes)


@kernel("Interpolate", domain=DOMAIN, since=11)
def interpolate_11(attrs):
    """(image, scales_or_sizes[, axes]), read as ``shape_calculation_mode`` says."""
    interpolation = _Interpolation(attrs)
    return lambda x, target, axes=None: interpolation(x, target, target, axes)


def _grid_taps(mode):
    """(offsets, weights(fraction)) of the taps a sample reads along one axis, from the floor of
    its coordinate (bilinear, bicubic) or from its coordinate rounded half to even (nearest)."""
    if mode == "nearest":
        return (0,), lambda d: (np.ones_like(d),)
    if mode == "bilinear":
        return (0, 1), lambda d: (1 - d, d)
    cubic = _resample.cubic_kernel(-0.75)
    return (-1, 0, 1, 2), lambda d: tuple(cubic(d - k) for k in (-1, 0, 1, 2))


def _padded_index(index, size, padding, align_corners):
    """(input position, whether it reads data) for the integer positions `index` along an axis
    of `size` under ``padding_mode``: zeros reads nothing outside; border reads the nearest edge;
    reflection mirrors about the edges (about the outer pixels' borders, or with align_corners
    their centres), repeatedly."""
    if padding == "zeros":
        inside = (index >= 0) & (index < size)
        return np.clip(index, 0, size - 1), inside
    if padding == "border":
        return np.clip(index, 0, size - 1), True
    if align_corners:
        period = 1 if size == 1 else 2 * (size - 1)
        index = np.abs(index) % period
        return np.where(index >= size, period - index, index), True
    index = index % (2 * size)
    return np.where(index >= size, 2 * size - 1 - index, index), True


@kernel("GridSample", domain=DOMAIN, since=9)
def grid_sample(attrs):
    """(data [N, C, H, W], grid [N, H_out, W_out, 2]) -> [N, C, H_out, W_out]: each output
    samples data at the grid's (x, y) in [-1, 1], denormalized to (x + 1) * (W - 1) / 2 with
    ``align_corners``, else ((x + 1) * W - 1) / 2. ``mode`` bilinear, bicubic (Keys' kernel,
    a = -0.75) or nearest (rounded half to even) weighs the taps around it; ``padding_mode``
    says what a tap outside the image reads (`_padded_index`)."""
    align_corners = as_bool(attrs, "align_corners")
    mode = as_choice(attrs, "mode", ("bilinear", "bicubic", "nearest"))
    padding = as_choice(attrs, "padding_mode", ("zeros", "border", "reflection"))
    offsets, weights_of = _grid_taps(mode)

    def denormalized(value, size):
        if align_corners:
            return (value + 1) * (size - 1) / 2
        return ((value + 1) * size - 1) / 2

    def sample(data, grid):
        if data.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 \
                or grid.shape[0] != data.shape[0]:
            raise ValueError(f"GridSample needs data [N, C, H, W] and grid [N, H_out, W_out, 2], "
                             f"got {list(data.shape)} and {list(grid.shape)}")
        n, height, width = data.shape[0], data.shape[2], data.shape[3]
        grid = grid.astype(np.float64)
        y = denormalized(grid[..., 1], height)
        x = denormalized(grid[..., 0], width)
        y0, x0 = (np.rint(y), np.rint(x)) if mode == "nearest" else (np.floor(y), np.floor(x))
        wy, wx = weights_of(y - y0), weights_of(x - x0)
        batch = np.arange(n).reshape(n, 1, 1)
        total = np.zeros((n,) + grid.shape[1:3] + (data.shape[1],))
        for dy, weight_y in zip(offsets, wy):
            rows, rows_in = _padded_index(y0.astype(np.int64) + dy, height, padding,
                                          align_corners)
            for dx, weight_x in zip(offsets, wx):
                columns, columns_in = _padded_index(x0.astype(np.int64) + dx, width, padding,
                                                    align_corners)
                weight = weight_y * weight_x * (rows_in & columns_in)
                total += data[batch, :, rows, columns] * weight[..., None]  # [N, Ho, Wo, C]
        result = np.moveaxis(total, -1, 1)
        if data.dtype.kind in "iu":
            result = np.trunc(result)
        return result.astype(data.dtype)

    return sample
