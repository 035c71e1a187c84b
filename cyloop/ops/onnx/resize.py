"""Resize (opsets 10-19) and Upsample: nearest, (n-)linear and (n-)cubic interpolation, separable
by axis.

Every mode is a weighted sum of input positions along each resized axis in turn: output position
y maps to a source coordinate x (the coordinate transformation), and the input position p gets
the weight K((p - x) * s) of the mode's kernel K, s being 1 or, with antialias when shrinking, the
scale (a wider, lower kernel). Positions past the edges take the edge's value; exclude_outside
gives them no weight instead. Nearest is a gather (exact in every dtype).
"""

import math

import numpy as np

from ..registry import kernel


def _linear_kernel(t):
    return np.maximum(0.0, 1.0 - np.abs(t))


def _cubic_kernel(a):
    def cubic(t):
        t = np.abs(t)
        near = ((a + 2) * t - (a + 3)) * t * t + 1
        far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return np.where(t <= 1, near, np.where(t < 2, far, 0.0))

    return cubic


class _Mode:
    """The attributes that fix how one axis is interpolated."""

    def __init__(self, attrs, opset_10=False):
        self.mode = attrs.get("mode", "nearest")
        if opset_10:  # Resize-10 is Upsample's: asymmetric coordinates, nearest rounds down
            self.transform, self.nearest = "asymmetric", "floor"
        else:
            self.transform = attrs.get("coordinate_transformation_mode", "half_pixel")
            self.nearest = attrs.get("nearest_mode", "round_prefer_floor")
        self.antialias = bool(attrs.get("antialias", 0))
        self.exclude_outside = bool(attrs.get("exclude_outside", 0))
        self.extrapolation = float(attrs.get("extrapolation_value", 0.0))
        if self.mode == "linear":
            self.kernel, self.radius = _linear_kernel, 1
        elif self.mode == "cubic":
            self.kernel, self.radius = _cubic_kernel(float(attrs.get("cubic_coeff_a", -0.75))), 2
        elif self.mode != "nearest":
            raise ValueError(f"mode must be nearest, linear or cubic, got {self.mode!r}")

    def source(self, out, size, scale, roi):
        """Each output position's coordinate in the input. Where the spec's formula has
        length_resized, it is size * scale, not rounded (as the spec's own expected outputs)."""
        y = np.arange(out, dtype=np.float64)
        length = size * scale
        transform = self.transform
        if transform == "half_pixel":
            return (y + 0.5) / scale - 0.5
        if transform == "half_pixel_symmetric":
            offset = size / 2 * (1 - out / (scale * size))
            return offset + (y + 0.5) / scale - 0.5
        if transform == "pytorch_half_pixel":
            return (y + 0.5) / scale - 0.5 if length > 1 else np.zeros(out)
        if transform == "asymmetric":
            return y / scale
        if transform == "align_corners":
            return y * (size - 1) / (length - 1) if length != 1 else np.zeros(out)
        if transform == "tf_crop_and_resize":
            start, end = roi
            if length != 1:
                return start * (size - 1) + y * (end - start) * (size - 1) / (length - 1)
            return np.full(out, (start + end) / 2 * (size - 1))
        raise ValueError(f"unknown coordinate_transformation_mode {transform!r}")

    def nearest_index(self, x):
        floor = np.floor(x)
        fraction = x - floor
        if self.nearest == "round_prefer_floor":
            return np.where(fraction <= 0.5, floor, floor + 1)
        if self.nearest == "round_prefer_ceil":
            return np.where(fraction < 0.5, floor, floor + 1)
        if self.nearest == "floor":
            return floor
        if self.nearest == "ceil":
            return np.ceil(x)
        raise ValueError(f"unknown nearest_mode {self.nearest!r}")

    def resize_axis(self, data, axis, out, scale, roi):
        size = data.shape[axis]
        x = self.source(out, size, scale, roi)
        if self.mode == "nearest":
            index = np.clip(self.nearest_index(x), 0, size - 1).astype(np.intp)
            result = np.take(data, index, axis=axis)
        else:
            shrink = min(scale, 1.0) if self.antialias else 1.0
            first = math.floor(-self.radius / shrink) + 1
            taps = np.floor(x)[:, None] + np.arange(first, 1 - first + 1)[None, :]
            weights = self.kernel((taps - x[:, None]) * shrink)
            if self.exclude_outside:
                weights = np.where((taps < 0) | (taps > size - 1), 0.0, weights)
            if self.antialias or self.exclude_outside:
                total = weights.sum(axis=1, keepdims=True)
                weights = weights / np.where(total == 0, 1.0, total)
            index = np.clip(taps, 0, size - 1).astype(np.intp)
            gathered = np.take(data, index, axis=axis)  # [..., out, taps, ...]
            shape = (1,) * axis + weights.shape + (1,) * (data.ndim - axis - 1)
            result = np.sum(gathered * weights.reshape(shape), axis=axis + 1)
        if self.transform == "tf_crop_and_resize":
            outside = (x < 0) | (x > size - 1)
            if outside.any():
                shape = (1,) * axis + (out,) + (1,) * (data.ndim - axis - 1)
                result = np.where(outside.reshape(shape), self.extrapolation, result)
        return result


def _target(x, axes, scales, sizes, policy):
    """(output size, scale) per resized axis, from the scales or the sizes input."""
    shape = [x.shape[axis] for axis in axes]
    if sizes is not None and np.size(sizes):
        sizes = [int(v) for v in np.asarray(sizes).reshape(-1)]
        factors = [out / size for out, size in zip(sizes, shape)]
        if policy in ("not_larger", "not_smaller"):
            scale = min(factors) if policy == "not_larger" else max(factors)
            sizes = [int(scale * size + 0.5) for size in shape]  # rounded half up
            factors = [scale] * len(shape)
        elif policy != "stretch":
            raise ValueError(f"keep_aspect_ratio_policy must be stretch, not_larger or "
                             f"not_smaller, got {policy!r}")
        return sizes, factors
    if scales is None or not np.size(scales):
        raise ValueError("Resize needs the scales or the sizes input")
    factors = [float(v) for v in np.asarray(scales).reshape(-1)]
    if any(f <= 0 for f in factors):
        raise ValueError(f"Resize scales must be positive, got {factors}")
    return [math.floor(size * f) for size, f in zip(shape, factors)], factors


def _resize(mode, axes_attr, policy):
    def resize(x, roi=None, scales=None, sizes=None):
        axes = [a % x.ndim for a in axes_attr] if axes_attr is not None else list(range(x.ndim))
        sizes_out, factors = _target(x, axes, scales, sizes, policy)
        rois = np.asarray(roi, np.float64).reshape(-1) if roi is not None else np.empty(0)
        result = x if mode.mode == "nearest" else x.astype(np.float64)
        for k, (axis, out, scale) in enumerate(zip(axes, sizes_out, factors)):
            axis_roi = (rois[k], rois[len(axes) + k]) if rois.size else (0.0, 1.0)
            if out == result.shape[axis] and scale == 1.0 and axis_roi == (0.0, 1.0):
                continue
            result = mode.resize_axis(result, axis, out, scale, axis_roi)
        if result.dtype == x.dtype:
            return result if result is not x else x.copy()
        if x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            result = np.clip(result, info.min, info.max)
        return result.astype(x.dtype)

    return resize


@kernel("Resize", since=10)
def resize_10(attrs):
    resize = _resize(_Mode(attrs, opset_10=True), None, "stretch")
    return lambda x, scales: resize(x, None, scales)  # Resize-10 has no roi input


@kernel("Resize", since=11)
def resize_11(attrs):
    axes = attrs.get("axes")
    return _resize(_Mode(attrs), [int(a) for a in axes] if axes is not None else None,
                   attrs.get("keep_aspect_ratio_policy", "stretch"))


@kernel("Upsample", since=7)
def upsample_7(attrs):
    resize = resize_10(attrs)
    scales = [float(v) for v in attrs["scales"]]
    return lambda x: resize(x, np.asarray(scales))  # an attribute before opset 9


@kernel("Upsample", since=9)
def upsample_9(attrs):
    return resize_10(attrs)
