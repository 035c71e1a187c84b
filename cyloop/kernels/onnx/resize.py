"""Resize (opsets 10-19) and Upsample: nearest, (n-)linear and (n-)cubic interpolation, separable
by axis, on the resampling maths OpenVINO's Interpolate uses too (kernels/_resample.py); and
GridSample, which reads an image at arbitrary points with the same three kinds of taps.

With antialias, shrinking widens the kernel by the scale; exclude_outside gives positions past the
edges no weight (the others renormalized) instead of the edge's value.
"""

import itertools
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


@kernel("Upsample", since=1)
def upsample_1(attrs):
    """Upsample-1: a 4-D NCHW input scaled by `height_scale` and `width_scale`, mode nearest or
    bilinear (Upsample-7's nearest and linear)."""
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "bilinear"):
        raise ValueError(f"Upsample-1's mode must be nearest or bilinear, got {mode!r}")
    scales = [1.0, 1.0, float(attrs["height_scale"]), float(attrs["width_scale"])]
    resize = resize_10({"mode": "linear" if mode == "bilinear" else "nearest"})

    def upsampled(x):
        if x.ndim != 4:
            raise ValueError(f"Upsample-1 takes a 4-D NCHW input, got shape {list(x.shape)}")
        return resize(x, np.asarray(scales))

    return upsampled


@kernel("Upsample", since=7)
def upsample_7(attrs):
    resize = resize_10(attrs)
    scales = [float(v) for v in attrs["scales"]]
    return lambda x: resize(x, np.asarray(scales))  # an attribute before opset 9


@kernel("Upsample", since=9)
def upsample_9(attrs):
    return resize_10(attrs)


# GridSample-16's names for the modes, and GridSample-20's (either is taken at any version).
_GRID_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic",
               "nearest": "nearest"}


def _reflected(x, low, high):
    """`x` mirrored about `low` and `high` until it lies between them (onnxruntime's GsReflect,
    in x's precision)."""
    span = x.dtype.type(high - low)
    if span <= 0:
        return np.full_like(x, low)
    below = x < low
    distance = np.where(below, low - x, x - high)
    folds = np.trunc(distance / span)
    rest = distance - folds * span
    even = folds % 2 == 0
    mirrored = np.where(below, np.where(even, low + rest, high - rest),
                        np.where(even, high - rest, low + rest))
    return np.where(below | (x > high), mirrored, x).astype(x.dtype, copy=False)


def _cubic_weights(t):
    """Keys' cubic kernel (a = -0.75) at the four taps floor(x) - 1 .. floor(x) + 2 of a sample
    at floor(x) + t."""
    a = t.dtype.type(-0.75)

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    one = t.dtype.type(1)
    return far(t + one), near(t), near(one - t), far(2 * one - t)


@kernel("GridSample", since=16)
def grid_sample(attrs):
    """GridSample-16, 20 and 22: (X [N, C, D1, ..., Dr], grid [N, O1, ..., Or, r]) -> [N, C,
    O1, ..., Or] (r = 2 before opset 20). Each output reads X at the grid's point, whose last
    coordinate indexes the last axis, from [-1, 1] to [0, D - 1] with ``align_corners``, else to
    [-0.5, D - 0.5]. A point past those bounds is first moved onto them by ``padding_mode``
    border (clamped to [0, D - 1]; in cubic mode only its taps are) or reflection (mirrored);
    the taps around it (``mode`` nearest: the point rounded half to even; linear: its floor and
    the next; cubic: four, Keys' kernel with a = -0.75) read X, a tap outside reading 0
    (zeros), the edge (border) or its mirror image (reflection). The coordinates and weights are
    computed in the grid's precision (float16 in float32), as onnxruntime does."""
    align_corners = bool(int(attrs.get("align_corners", 0)))
    mode = attrs.get("mode", "linear")
    if mode not in _GRID_MODES:
        raise ValueError(f"GridSample mode must be one of {', '.join(_GRID_MODES)}, got "
                         f"{mode!r}")
    mode = _GRID_MODES[mode]
    padding = attrs.get("padding_mode", "zeros")
    if padding not in ("zeros", "border", "reflection"):
        raise ValueError(f"GridSample padding_mode must be zeros, border or reflection, got "
                         f"{padding!r}")

    def bounds(size):
        return (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)

    def taps(x, size):
        """[(index, weight or None)] of the taps a sample at `x` reads along an axis."""
        if mode == "nearest":
            return [(x, None)]
        floor = np.floor(x)
        if mode == "linear":
            return [(floor, floor + 1 - x), (floor + 1, x - floor)]
        return [(floor + (k - 1), w) for k, w in enumerate(_cubic_weights(x - floor))]

    def read(index, size):
        """(positions into the axis, whether the tap reads X) of integer-valued `index`."""
        if padding == "zeros":
            inside = (index >= 0) & (index <= size - 1)
            return np.where(inside, index, 0).astype(np.intp), inside
        if padding == "border":
            return np.clip(index, 0, size - 1).astype(np.intp), None
        return np.trunc(_reflected(index, *bounds(size))).astype(np.intp), None

    def sample(x, grid):
        rank = x.ndim - 2
        if rank < 1 or grid.ndim != x.ndim or grid.shape[-1] != rank \
                or grid.shape[0] != x.shape[0]:
            raise ValueError(f"GridSample needs X [N, C, D1, ..., Dr] and grid [N, O1, ..., Or, "
                             f"r] of one N, got {list(x.shape)} and {list(grid.shape)}")
        work = np.float64 if np.float64 in (x.dtype, grid.dtype) else np.float32
        coordinates = grid.astype(work if grid.dtype == np.float64 else np.float32)
        positions = []
        for axis, size in enumerate(x.shape[2:]):
            normal = coordinates[..., rank - 1 - axis]
            one = normal.dtype.type(1)
            if align_corners:
                position = (normal + one) / normal.dtype.type(2) * normal.dtype.type(size - 1)
            else:
                position = ((normal + one) * normal.dtype.type(size) - one) \
                    / normal.dtype.type(2)
            positions.append(np.rint(position) if mode == "nearest" else position)
        # A point outside the bounds on any axis is clamped (border) on every axis, which moves
        # a coordinate within half a pixel outside [0, D - 1] too, except in cubic mode, whose
        # taps alone are clamped (as onnxruntime); reflection moves only the coordinates
        # outside their own bounds.
        if padding == "border" and mode != "cubic":
            outside = np.zeros(grid.shape[:-1], bool)
            for position, size in zip(positions, x.shape[2:]):
                low, high = bounds(size)
                outside |= (position < low) | (position > high)
            positions = [np.where(outside, np.clip(p, 0, size - 1), p).astype(p.dtype)
                         for p, size in zip(positions, x.shape[2:])]
        elif padding == "reflection":
            positions = [_reflected(p, *bounds(size)) for p, size in zip(positions, x.shape[2:])]
        per_axis = [[(*read(index, size), weight) for index, weight in taps(position, size)]
                    for position, size in zip(positions, x.shape[2:])]
        n = x.shape[0]
        batch = np.arange(n).reshape((n,) + (1,) * rank)
        total = np.zeros(grid.shape[:-1] + (x.shape[1],), work)  # [N, *O, C]
        values = x.astype(work, copy=False)
        for combination in itertools.product(*per_axis):
            weight, reads = None, None
            for _, inside, w in combination:
                if w is not None:
                    weight = w if weight is None else weight * w
                if inside is not None:
                    reads = inside if reads is None else reads & inside
            if reads is not None:
                weight = reads.astype(work) if weight is None else np.where(reads, weight, 0)
            gathered = values[(batch, slice(None)) + tuple(c[0] for c in combination)]
            total += gathered if weight is None else gathered * weight[..., None].astype(work)
        result = np.moveaxis(total, -1, 1)
        if x.dtype.kind in "iu":
            result = np.rint(result)
        return result.astype(x.dtype)

    return sample
