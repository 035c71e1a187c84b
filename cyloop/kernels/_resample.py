"""Resampling one axis at a time, for ONNX's Resize and OpenVINO's Interpolate.

Every mode is a weighted sum of input positions along each resized axis in turn: output position
y maps to a source coordinate x (the coordinate transformation), and the input position p gets
the weight K((p - x) * s) of the mode's kernel K, s being 1 or, with antialias, the scale (a
wider, lower kernel when shrinking). Positions past the edges take the edge's value, or, excluded,
no weight (the others then renormalized). Nearest is a gather (exact in every dtype).

The op families differ in how they spell this (which resized length a transformation divides by,
when an antialiased kernel widens, whether outside taps are clamped or dropped); each translates
its attributes into these calls.
"""

import math

import numpy as np

__all__ = ["NEAREST_RULES", "TRANSFORMS", "cubic_kernel", "linear_kernel", "nearest_axis",
           "source_coordinates", "weighted_axis"]

TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "asymmetric",
              "align_corners", "tf_crop_and_resize", "tf_half_pixel_for_nn")
# How a source coordinate rounds to an input position; truncate drops the fraction (toward 0).
NEAREST_RULES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "truncate")


def linear_kernel(t):
    return np.maximum(0.0, 1.0 - np.abs(t))


def cubic_kernel(a):
    """Keys' cubic convolution kernel with coefficient `a` (support [-2, 2])."""
    def cubic(t):
        t = np.abs(t)
        near = ((a + 2) * t - (a + 3)) * t * t + 1
        far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return np.where(t <= 1, near, np.where(t < 2, far, 0.0))

    return cubic


def source_coordinates(transform, out, size, scale, length, roi=(0.0, 1.0)):
    """Each of `out` output positions' coordinate in an input axis of `size` (float64).

    `scale` is the axis's scale, `length` the resized length the formulas name: ONNX takes it as
    size * scale unrounded (as the spec's own expected outputs do), OpenVINO as `out`. `roi` is
    the axis's (start, end) for tf_crop_and_resize."""
    y = np.arange(out, dtype=np.float64)
    if transform == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if transform == "half_pixel_symmetric":
        offset = size / 2 * (1 - out / (scale * size))
        return offset + (y + 0.5) / scale - 0.5
    if transform == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if length > 1 else np.zeros(out)
    if transform == "asymmetric":
        return y / scale
    if transform == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    if transform == "align_corners":
        return y * (size - 1) / (length - 1) if length != 1 else np.zeros(out)
    if transform == "tf_crop_and_resize":
        start, end = roi
        if length != 1:
            return start * (size - 1) + y * (end - start) * (size - 1) / (length - 1)
        return np.full(out, (start + end) / 2 * (size - 1))
    raise ValueError(f"coordinate_transformation_mode must be one of {', '.join(TRANSFORMS)}, "
                     f"got {transform!r}")


def _nearest_positions(x, rule):
    floor = np.floor(x)
    fraction = x - floor
    if rule == "round_prefer_floor":
        return np.where(fraction <= 0.5, floor, floor + 1)
    if rule == "round_prefer_ceil":
        return np.where(fraction < 0.5, floor, floor + 1)
    if rule == "floor":
        return floor
    if rule == "ceil":
        return np.ceil(x)
    if rule == "truncate":
        return np.trunc(x)
    raise ValueError(f"nearest_mode must be one of {', '.join(NEAREST_RULES)}, got {rule!r}")


def nearest_axis(data, axis, x, rule):
    """`data` along `axis` read at the input positions nearest the coordinates `x` by `rule`,
    clamped to the axis."""
    index = np.clip(_nearest_positions(x, rule), 0, data.shape[axis] - 1).astype(np.intp)
    return np.take(data, index, axis=axis)


def weighted_axis(data, axis, x, kernel, radius, shrink=1.0, exclude_outside=False,
                  normalize=False):
    """`data` along `axis` resampled at the coordinates `x` (float64): position p weighs
    kernel((p - x) * shrink), the kernel being zero past `radius`. Taps outside the axis read its
    edge, or with `exclude_outside` weigh nothing; `normalize` divides by the weights' sum (a
    position whose weights are all zero gives 0)."""
    size = data.shape[axis]
    first = math.floor(-radius / shrink) + 1
    taps = np.floor(x)[:, None] + np.arange(first, 1 - first + 1)[None, :]
    weights = kernel((taps - x[:, None]) * shrink)
    if exclude_outside:
        weights = np.where((taps < 0) | (taps > size - 1), 0.0, weights)
    if normalize:
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    index = np.clip(taps, 0, size - 1).astype(np.intp)
    gathered = np.take(data, index, axis=axis)  # [..., out, taps, ...]
    shape = (1,) * axis + weights.shape + (1,) * (data.ndim - axis - 1)
    return np.sum(gathered * weights.reshape(shape), axis=axis + 1)
