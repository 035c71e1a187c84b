"""Resize (opsets 10-19) and Upsample: nearest, (n-)linear and (n-)cubic interpolation, separable
by axis, on the resampling maths OpenVINO's Interpolate uses too (kernels/_resample.py).

With antialias, shrinking widens the kernel by the scale; exclude_outside gives positions past the
edges no weight (the others renormalized) instead of the edge's value.
"""

import math

import numpy as np

from .. import _resample
from ..registry import kernel

_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "asymmetric",
               "align_corners", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


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
            self.kernel, self.radius = _resample.linear_kernel, 1
        elif self.mode == "cubic":
            a = float(attrs.get("cubic_coeff_a", -0.75))
            self.kernel, self.radius = _resample.cubic_kernel(a), 2
        elif self.mode != "nearest":
            raise ValueError(f"mode must be nearest, linear or cubic, got {self.mode!r}")
        if self.transform not in _TRANSFORMS:
            raise ValueError(f"unknown coordinate_transformation_mode {self.transform!r}")
        if self.nearest not in _NEAREST:
            raise ValueError(f"unknown nearest_mode {self.nearest!r}")

    def resize_axis(self, data, axis, out, scale, roi):
        size = data.shape[axis]
        # Where the spec's formula has length_resized, it is size * scale, not rounded (as the
        # spec's own expected outputs).
        x = _resample.source_coordinates(self.transform, out, size, scale, size * scale, roi)
        if self.mode == "nearest":
            result = _resample.nearest_axis(data, axis, x, self.nearest)
        else:
            result = _resample.weighted_axis(
                data, axis, x, self.kernel, self.radius,
                shrink=min(scale, 1.0) if self.antialias else 1.0,
                exclude_outside=self.exclude_outside,
                normalize=self.antialias or self.exclude_outside)
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
