"""Interpolate, GridSample, the BackpropData convolutions, FakeQuantize, NonMaxSuppression, Unique,
ScaledDotProductAttention, the Fourier transforms, ROIAlign, FakeConvert and 4-bit constants on
the options the ONNX sweep does not reach (Interpolate's linear mode and antialias, pads,
tf_half_pixel_for_nn, the simple rounding, unordered axes, sizes rounding; output_shape; sorted
and Soft-NMS results; unsorted Unique; boolean masks; signal sizes and negative axes; ROIAlign's
modes and aligned modes; FakeConvert's scale, shift and saturation...): one-layer IRs built with
the openvino API, run by cyloop, against OpenVINO's CPU plugin (f32), or, where the plugin
departs from the op spec, a numpy re-implementation of the spec (SPEC_ORACLES), with the harness
in tests/support/openvino_layers.py (OpenVINO runs in a child process of its own):

    python -m tests.kernels.openvino.test_image_signal_detection_layers OUT_DIR

RandomUniform and a Convert to a 4-bit type are checked against OpenVINO's reference
implementation instead (each layer's own evaluate, in the child too): the CPU plugin generates
RandomUniform's f16, f64 and i64 numbers as f32 or i32, and converts to 4-bit types in 8 bits.
Later runs of a RandomUniform layer, and a Loop running one, are checked against the plugin
(RANDOM_CASES, `_random_main`).
"""

import math
import os
import sys

import numpy as np
import pytest

import cyloop

from ...support.openvino_layers import check_layer, const, opset, oracle_main, plugin_answers

RNG = np.random.default_rng(23)
X4 = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
TALL = RNG.standard_normal((1, 2, 10, 5)).astype(np.float32)
INTS = RNG.integers(-50, 50, (1, 2, 4, 5)).astype(np.int32)
GRID = RNG.uniform(-1.7, 1.7, (2, 4, 3, 2)).astype(np.float32)
BACKPROP_X = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
BACKPROP_W = RNG.standard_normal((3, 2, 3, 2)).astype(np.float32)
GROUP_W = RNG.standard_normal((3, 1, 2, 3, 3)).astype(np.float32)  # 3 groups, 1 in, 2 out
_CORNERS = RNG.uniform(0, 10, (2, 7, 2, 2)).astype(np.float32)
BOXES = np.concatenate([_CORNERS[:, :, 0], _CORNERS[:, :, 0] + RNG.uniform(
    1, 6, (2, 7, 2)).astype(np.float32)], axis=-1)  # [2, 7, 4]: y1, x1, y2, x2
SCORES = RNG.uniform(0, 1, (2, 3, 7)).astype(np.float32)
ROWS = np.array([[3, 1, 2], [0, 5, 5], [3, 1, 2], [0, 5, 4], [0, 5, 5], [-1, 0, 0]], np.int32)
QUERY = RNG.standard_normal((2, 3, 4, 8)).astype(np.float32)
KEY = RNG.standard_normal((2, 3, 6, 8)).astype(np.float32)
VALUE = RNG.standard_normal((2, 3, 6, 5)).astype(np.float32)


# For the Fourier transforms, ROIAlign, FakeConvert and 4-bit constants (a generator of their own,
# so that the arrays above stay what they were).
MORE = np.random.default_rng(29)
SIGNAL = MORE.standard_normal((2, 5, 6, 2)).astype(np.float32)  # complex [2, 5, 6]
REAL = MORE.standard_normal((2, 5, 6)).astype(np.float32)
HALF_SPECTRUM = MORE.standard_normal((2, 5, 4, 2)).astype(np.float32)  # complex [2, 5, 4]
FEATURES = MORE.standard_normal((2, 3, 8, 9)).astype(np.float32)
# (x1, y1, x2, y2): inside, partly and wholly outside, reversed (x2 < x1), a point, negative.
ROI_BOXES = np.array([[1.0, 2.0, 7.5, 6.0], [-3.0, 5.0, 4.0, 19.0], [10.0, 1.0, 2.0, 3.5],
                      [4.2, 4.2, 4.2, 4.2], [-6.0, -5.0, -1.5, -0.5], [20.0, 17.0, 30.0, 22.0],
                      [0.0, 0.0, 17.9, 15.9]], np.float32)
ROI_BATCHES = np.array([0, 1, 1, 0, 1, 0, 1], np.int32)
# Float8 roundings: ties (1.0625 between 1 and 1.125), a value past a tie that float16 rounds
# onto it, saturation past the largest value and at infinity, the smallest subnormals.
FLOAT8_EDGES = np.array(
    [0, 1, -1, 1.0625, 1.0625001, 1.06249, 1.1875, 448, 460, 464, 470, 500, 1e5, -1e5, np.inf,
     -np.inf, 2.0 ** -10, 2.0 ** -9 * 0.75, 2.0 ** -9, 2.0 ** -9 * 1.5, 1e-3, -1e-3, 2.0 ** -16,
     2.0 ** -17, 57344, 60000, 61440, 65504, 65520, 7e4, 0.3, 3.3, -7.77, 123.4], np.float32)
NIBBLES = MORE.integers(-8, 8, (3, 5)).astype(np.int8)  # 15 values: an odd count
FLOAT4 = np.array([[0, 0.5, 1, 1.5, 2, 3, 4], [6, -0.5, -1, -1.5, -2, -4, -6]], np.float32)
TO_FOUR_BITS = np.array([-9.5, -8.7, -8, -2.5, -0.5, 0.4, 1.25, 1.5, 2.7, 5.2, 7.9, 8, 15.3, 16.5,
                         100], np.float32)


def _interpolate(target, mode, calculation, axes=None, **options):
    def build(p):
        dtype = np.float32 if calculation == "scales" else np.int64
        return opset(11).interpolate(p[0], const(target, dtype), mode, calculation,
                                  axes=None if axes is None else const(axes), **options)

    return build


def _interpolate_4(p):
    """Interpolate-4 (data, sizes, scales, axes): the Python API's function is opset1's."""
    from openvino.utils.node_factory import NodeFactory

    return NodeFactory("opset4").create(
        "Interpolate", [p[0].output(0), const([3, 4]).output(0),
                        const([0.7, 0.7], np.float32).output(0), const([2, 3]).output(0)],
        {"mode": "linear_onnx", "shape_calculation_mode": "scales",
         "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor",
         "antialias": False, "pads_begin": [0, 0, 1, 0], "pads_end": [0, 0, 0, 1],
         "cube_coeff": -0.75})


def _channels(values):
    """A per-channel [1, C, 1, 1] float32 constant."""
    return const(np.reshape(values, (1, -1, 1, 1)), np.float32)


def _grid_sample(mode, padding, align_corners):
    return lambda p: opset(9).grid_sample(p[0], p[1], {"mode": mode, "padding_mode": padding,
                                                    "align_corners": align_corners})


def _nms(port, sigma=0.0, encoding="corner", descending=True, output_type="i64"):
    def build(p):
        return opset(9).non_max_suppression(
            p[0], p[1], const(3), const(0.3, np.float32), const(0.15, np.float32),
            const(sigma, np.float32), encoding, descending, output_type).output(port)

    return build


def _unique(port, axis, ordered, index_type="i64"):
    def build(p):
        return opset(10).unique(p[0], None if axis is None else const(axis), ordered, index_type,
                             "i32").output(port)

    return build


def _fourier(op, axes, sizes=None, version=7):
    def build(p):
        return getattr(opset(version), op)(p[0], const(axes),
                                           None if sizes is None else const(sizes))

    return build


def _roi_align(version, mode, sampling_ratio, spatial_scale, aligned_mode=None, pooled=(3, 4)):
    def build(p):
        args = [p[0], p[1], const(ROI_BATCHES, np.int32), *pooled, sampling_ratio, spatial_scale,
                mode]
        return opset(version).roi_align(*args, *([aligned_mode] if aligned_mode else []))

    return build


def _fake_convert(destination, scale, shift=None, dtype=np.float32):
    def build(p):
        return opset(13).fake_convert(p[0], const(scale, dtype),
                                   None if shift is None else const(shift, dtype), destination)

    return build


def _packed(values, element_type):
    """A 4-bit Const (OpenVINO packs it two values a byte) converted to f32."""
    def build(p):
        import openvino as ov

        return opset(1).convert(opset(1).constant(values, dtype=getattr(ov.Type, element_type)),
                             "f32")

    return build


# name -> (build(params) -> output, feeds)
CASES = {
    # Interpolate: modes, coordinate transformations, roundings, pads, axes, sizes and scales.
    "Interpolate-linear-antialias-pads": (_interpolate(
        [0.5, 1.5], "linear", "scales", [2, 3], pads_begin=[0, 0, 1, 0], pads_end=[0, 0, 0, 2],
        antialias=True), [X4]),
    "Interpolate-linear-upsample-unordered-axes": (_interpolate(
        [9, 4], "linear", "sizes", [3, 2], coordinate_transformation_mode="asymmetric"), [X4]),
    "Interpolate-linear-no-antialias-shrink": (_interpolate(
        [0.4, 0.5], "linear", "scales", [2, 3]), [X4]),
    "Interpolate-nearest-simple-tf-half-pixel": (_interpolate(
        [3, 11], "nearest", "sizes", [2, 3], nearest_mode="simple",
        coordinate_transformation_mode="tf_half_pixel_for_nn"), [X4]),
    "Interpolate-nearest-simple-asymmetric": (_interpolate(
        [1.5, 0.5], "nearest", "scales", [2, 3], nearest_mode="simple",
        coordinate_transformation_mode="asymmetric"), [X4]),
    "Interpolate-nearest-ceil-align-corners": (_interpolate(
        [1.7, 0.6], "nearest", "scales", [2, 3], nearest_mode="ceil",
        coordinate_transformation_mode="align_corners"), [X4]),
    "Interpolate-nearest-prefer-ceil-int": (_interpolate(
        [8, 15], "nearest", "sizes", [2, 3], nearest_mode="round_prefer_ceil"), [INTS]),
    "Interpolate-cubic-pytorch-half-pixel": (_interpolate(
        [1, 7], "cubic", "sizes", [2, 3], cube_coeff=-0.5,
        coordinate_transformation_mode="pytorch_half_pixel"), [X4]),
    "Interpolate-linear-onnx-every-axis": (_interpolate(
        [1.0, 1.0, 0.6, 1.3], "linear_onnx", "scales"), [X4]),
    "Interpolate-scales-size-rounding": (_interpolate(
        [0.7, 0.6], "linear_onnx", "scales", [2, 3]), [TALL]),
    "Interpolate-4": (_interpolate_4, [X4]),
    # GridSample: coordinates past [-1, 1] under every padding.
    "GridSample-bicubic-reflection-align": (_grid_sample("bicubic", "reflection", True),
                                            [X4, GRID]),
    "GridSample-bilinear-reflection": (_grid_sample("bilinear", "reflection", False),
                                       [X4, GRID]),
    "GridSample-nearest-border": (_grid_sample("nearest", "border", False), [X4, GRID]),
    "GridSample-bicubic-zeros": (_grid_sample("bicubic", "zeros", False), [X4, GRID]),
    # The transposed convolutions: pads, dilations, output_padding, output_shape.
    "ConvolutionBackpropData-explicit": (lambda p: opset(1).convolution_backprop_data(
        p[0], p[1], [2, 1], None, [1, 0], [0, 1], [1, 2], "explicit", [1, 0]),
        [BACKPROP_X, BACKPROP_W]),
    "ConvolutionBackpropData-output-shape-same-upper": (
        lambda p: opset(1).convolution_backprop_data(
            p[0], p[1], [2, 2], const([6, 9]), None, None, None, "same_upper"),
        [BACKPROP_X, BACKPROP_W]),
    "ConvolutionBackpropData-output-shape-explicit": (lambda p: opset(1).convolution_backprop_data(
        p[0], p[1], [2, 1], const([10, 7]), [1, 1], [0, 0], None, "explicit"),
        [BACKPROP_X, BACKPROP_W]),
    "GroupConvolutionBackpropData-same-lower": (
        lambda p: opset(1).group_convolution_backprop_data(
            p[0], p[1], [1, 2], const([5, 8]), None, None, [2, 1], "same_lower"),
        [BACKPROP_X, GROUP_W]),
    # FakeQuantize: per-channel limits, one channel's input range inverted.
    "FakeQuantize-per-channel": (lambda p: opset(1).fake_quantize(
        p[0], _channels([-1, 0.5, -0.2]), _channels([1, -0.5, 1.5]), const(-2.0, np.float32),
        _channels([3, 1, 2]), 5), [X4]),
    "FakeQuantize-256": (lambda p: opset(1).fake_quantize(
        p[0], const(-1.5, np.float32), const(1.2, np.float32), const(0, np.float32),
        const(255, np.float32), 256), [X4]),
    # NonMaxSuppression: sorted across batches, Soft-NMS, center boxes, i32.
    "NMS-descending-indices": (_nms(0), [BOXES, SCORES]),
    "NMS-descending-scores": (_nms(1), [BOXES, SCORES]),
    "NMS-per-class-indices": (_nms(0, descending=False), [BOXES, SCORES]),
    "NMS-soft-scores": (_nms(1, sigma=0.5), [BOXES, SCORES]),
    "NMS-soft-center-indices": (_nms(0, sigma=0.5, encoding="center"), [BOXES, SCORES]),
    "NMS-valid-i32": (_nms(2, output_type="i32"), [BOXES, SCORES]),
    # Unique: unsorted (first occurrence order), along an axis, i32 indices and counts.
    "Unique-unsorted-rows": (_unique(0, 0, False), [ROWS]),
    "Unique-unsorted-rows-inverse-i32": (_unique(2, 0, False, "i32"), [ROWS]),
    "Unique-unsorted-first-index": (_unique(1, None, False), [ROWS]),
    "Unique-sorted-columns-counts": (_unique(3, -1, True), [ROWS]),
    # ScaledDotProductAttention: masks, scale, causal with L < S, batch broadcasting.
    "SDPA-boolean-mask": (lambda p: opset(13).scaled_dot_product_attention(
        p[0], p[1], p[2], const(RNG.uniform(size=(1, 4, 6)) > 0.3, np.bool_)),
        [QUERY, KEY, VALUE]),
    "SDPA-float-mask-scale": (lambda p: opset(13).scaled_dot_product_attention(
        p[0], p[1], p[2], const(RNG.standard_normal((2, 1, 4, 6)), np.float32),
        const(0.3, np.float32)), [QUERY, KEY, VALUE]),
    "SDPA-causal-short-query": (lambda p: opset(13).scaled_dot_product_attention(
        p[0], p[1], p[2], causal=True), [QUERY, KEY, VALUE]),
    "SDPA-broadcast-batch": (lambda p: opset(13).scaled_dot_product_attention(p[0], p[1], p[2]),
                             [QUERY, KEY[:1], VALUE[:, :1]]),
    # The Fourier transforms: signal sizes trimming and padding, -1, unordered and negative axes.
    "DFT-signal-size-unordered": (_fourier("dft", [2, 1], [8, 3]), [SIGNAL]),
    "DFT-negative-axes-minus-one": (_fourier("dft", [-1, -3], [-1, 3]), [SIGNAL]),
    "DFT-one-axis": (_fourier("dft", [1]), [SIGNAL]),
    "IDFT-every-axis": (_fourier("idft", [0, 1, 2]), [SIGNAL]),
    "IDFT-signal-size": (_fourier("idft", [-2], [7]), [SIGNAL]),
    "RDFT-signal-size-pads": (_fourier("rdft", [1, 2], [4, 9], version=9), [REAL]),
    "RDFT-signal-size-trims": (_fourier("rdft", [2, 1], [5, 3], version=9), [REAL]),
    "RDFT-halved-first-axis": (_fourier("rdft", [-1, 0], version=9), [REAL]),
    "IRDFT-default": (_fourier("irdft", [1, 2], version=9), [HALF_SPECTRUM]),
    "IRDFT-signal-size-trims": (_fourier("irdft", [2], [4], version=9), [HALF_SPECTRUM]),
    "IRDFT-odd-signal": (_fourier("irdft", [-1], [7], version=9), [HALF_SPECTRUM]),
    "IRDFT-signal-size-unordered": (_fourier("irdft", [2, 1], [5, 7], version=9),
                                    [HALF_SPECTRUM]),
    "IRDFT-signal-size-pads": (_fourier("irdft", [-1], [11], version=9), [HALF_SPECTRUM]),
    # ROIAlign: both modes, every aligned mode, adaptive sampling, boxes outside the maps.
    "ROIAlign-9-avg-adaptive": (_roi_align(9, "avg", 0, 0.5, "asymmetric"),
                                [FEATURES, ROI_BOXES]),
    "ROIAlign-9-max-half-pixel": (_roi_align(9, "max", 2, 0.75, "half_pixel"),
                                  [FEATURES, ROI_BOXES]),
    "ROIAlign-9-avg-half-pixel-for-nn": (_roi_align(9, "avg", 3, 1.0, "half_pixel_for_nn",
                                                    (2, 5)), [FEATURES, ROI_BOXES]),
    "ROIAlign-9-max-adaptive-asymmetric": (_roi_align(9, "max", 0, 1.0, "asymmetric"),
                                           [FEATURES, ROI_BOXES]),
    "ROIAlign-3-max": (_roi_align(3, "max", 2, 0.5), [FEATURES, ROI_BOXES]),
    # FakeConvert: per-channel scale and shift, both types, saturation, ties, subnormals.
    "FakeConvert-e4m3-channels": (_fake_convert("f8e4m3", np.reshape([2, 0.5, 30], (1, 3, 1, 1)),
                                                np.reshape([0, 0.25, -3], (1, 3, 1, 1))),
                                  [X4 * 20]),
    "FakeConvert-e4m3-f16": (_fake_convert("f8e4m3", 0.5, 0.125, np.float16),
                             [FLOAT8_EDGES[np.isinf(FLOAT8_EDGES) | (abs(FLOAT8_EDGES) <= 65504)]
                              .astype(np.float16)]),
    "FakeConvert-e5m2-scalar": (_fake_convert("f8e5m2", 3.0, 0.5), [X4 * 1e4]),
    "FakeConvert-e4m3-edges": (_fake_convert("f8e4m3", 1.0), [FLOAT8_EDGES]),
    "FakeConvert-e5m2-edges": (_fake_convert("f8e5m2", 1.0), [FLOAT8_EDGES]),
    # 4-bit constants (two values a byte, the first in the low nibble), an odd count.
    "Const-i4": (_packed(NIBBLES, "i4"), []),
    "Const-u4": (_packed(NIBBLES + 8, "u4"), []),
    "Const-f4e2m1": (_packed(FLOAT4, "f4e2m1"), []),
    # Convert to a 4-bit type: integers truncate and wrap, f4e2m1 rounds and saturates.
    **{f"Convert-to-{t}-and-back": (
        lambda p, t=t: opset(1).convert(opset(1).convert(p[0], t), "f32"), [TO_FOUR_BITS])
       for t in ("i4", "u4", "f4e2m1")},
}


def _linear_spec(scales, axes, pads_begin, pads_end):
    """Interpolate's linear mode with antialias and pads (scales mode, half_pixel), an output
    element at a time as the Python code in OpenVINO's Interpolate-4 spec computes it: taps
    round(x) - r ... round(x) + r inside the input, weighed by the triangle a (x - p) with
    a = scale when some axis shrinks, renormalized."""
    def oracle(x):
        data = np.pad(x.astype(np.float64), list(zip(pads_begin, pads_end)))
        shape = list(data.shape)
        for axis, scale in zip(axes, scales):
            shape[axis] = math.floor(scale * data.shape[axis] + 1e-6)
        a = [s if any(t < 1 for t in scales) else 1.0 for s in scales]
        r = [2 if s > 1 else math.ceil(2 / w) for s, w in zip(scales, a)]
        out = np.zeros(shape)
        for coordinate in np.ndindex(*shape):
            source = {axis: (coordinate[axis] + 0.5) / scale - 0.5
                      for axis, scale in zip(axes, scales)}
            total = weights = 0.0
            for offsets in np.ndindex(*[2 * k + 1 for k in r]):
                tap = list(coordinate)
                for i, axis in enumerate(axes):
                    nearest = math.floor(abs(source[axis]) + 0.5) * (1 if source[axis] >= 0
                                                                      else -1)
                    tap[axis] = nearest + offsets[i] - r[i]
                if not all(0 <= tap[axis] < data.shape[axis] for axis in axes):
                    continue
                w = math.prod(max(0.0, 1 - abs(a[i] * (source[axis] - tap[axis])))
                              for i, axis in enumerate(axes))
                total += w * data[tuple(tap)]
                weights += w
            out[coordinate] = total / weights if weights else 0.0
        return out.astype(x.dtype)

    return oracle


def _fake_quantize_spec(low, high, out_low, out_high, levels):
    """FakeQuantize-1 an element at a time by the spec's formula, in float64, rounding half to
    even (Python's round); the limits per channel."""
    def oracle(x):
        out = np.empty(x.shape, np.float64)
        for (n, c, h, w), value in np.ndenumerate(x):
            lo, hi, olo, ohi = (float(np.ravel(v)[c % np.size(v)])
                                for v in (low, high, out_low, out_high))
            if value <= min(lo, hi):
                out[n, c, h, w] = olo
            elif value > max(lo, hi):
                out[n, c, h, w] = ohi
            else:
                step = round((value - lo) / (hi - lo) * (levels - 1))
                out[n, c, h, w] = step / (levels - 1) * (ohi - olo) + olo
        return out.astype(x.dtype)

    return oracle


def _first_occurrences(x):
    """Unique's second output without an axis, unsorted: where each value first occurs."""
    first = {}
    for position, value in enumerate(x.ravel().tolist()):
        first.setdefault(value, position)
    return np.array(list(first.values()), np.int64)


def _rdft_spec(axes, sizes):
    """RDFT-9 by the spec's sum, in float64: each axis trimmed or zero-padded to its size, then
    multiplied by its matrix exp(-2 pi i m j / S); the last axis keeps S // 2 + 1 frequencies."""
    def oracle(x):
        data = x.astype(np.complex128)
        for k, (axis, size) in enumerate(zip(axes, sizes)):
            data = np.moveaxis(data, axis, -1)
            length = data.shape[-1]
            data = data[..., :size] if size <= length else \
                np.concatenate([data, np.zeros(data.shape[:-1] + (size - length,))], axis=-1)
            kept = size // 2 + 1 if k == len(axes) - 1 else size
            m, j = np.arange(kept)[:, None], np.arange(size)[None, :]
            data = np.moveaxis(data @ np.exp(-2j * np.pi * m * j / size).T, -1, axis)
        return np.stack([data.real, data.imag], axis=-1).astype(x.dtype)

    return oracle


def _fit(data, length):
    """`data` trimmed or zero-padded to `length` along its last axis."""
    if length <= data.shape[-1]:
        return data[..., :length]
    return np.concatenate([data, np.zeros(data.shape[:-1] + (length - data.shape[-1],))], -1)


def _inverse_dft(data, size):
    """The inverse DFT along the last axis (of `size` values), by its sum."""
    m, j = np.arange(size)[:, None], np.arange(size)[None, :]
    return data @ np.exp(2j * np.pi * m * j / size).T / size


def _irdft_spec(axes, sizes):
    """IRDFT-9 as OpenVINO's reference implementation computes it, by the sums, in float64: the
    inverse DFT over each axis but the last, trimmed or zero-padded to its size S; then over the
    last, its first S // 2 + 1 values (zero-padded) extended to S by conjugate symmetry
    (value S - j the conjugate of value j), keeping the real part."""
    def oracle(x):
        data = x[..., 0].astype(np.complex128) + 1j * x[..., 1]
        for axis, size in zip(axes[:-1], sizes[:-1]):
            data = np.moveaxis(_inverse_dft(_fit(np.moveaxis(data, axis, -1), size), size), -1,
                               axis)
        axis, size = axes[-1], sizes[-1]
        kept = size // 2 + 1
        half = _fit(np.moveaxis(data, axis, -1), kept)
        full = np.zeros(half.shape[:-1] + (size,), np.complex128)
        full[..., :kept] = half[..., :size]
        for j in range(1, size - kept + 1):
            full[..., size - j] = np.conj(half[..., j])
        return np.moveaxis(_inverse_dft(full, size).real, -1, axis).astype(x.dtype)

    return oracle


# Where the CPU plugin departs from the op spec, a numpy re-implementation of the spec instead:
SPEC_ORACLES = {
    # The plugin refuses an RDFT signal longer than its input ("not supported yet").
    "RDFT-signal-size-pads": _rdft_spec([1, 2], [4, 9]),
    # The plugin's IRDFT gives wrong values for a last axis padded past its input (by up to
    # 0.57 here) and garbage (to 1e20) for another axis padded or trimmed.
    "IRDFT-signal-size-unordered": _irdft_spec([2, 1], [5, 7]),
    "IRDFT-signal-size-pads": _irdft_spec([2], [11]),
    # The plugin's linear antialias differs from the spec's code by up to 0.48 here.
    "Interpolate-linear-antialias-pads": _linear_spec([0.5, 1.5], [2, 3], [0, 0, 1, 0],
                                                      [0, 0, 0, 2]),
    # The plugin assumes input_low <= input_high (the spec takes their min and max).
    "FakeQuantize-per-channel": _fake_quantize_spec([-1, 0.5, -0.2], [1, -0.5, 1.5], [-2.0],
                                                    [3, 1, 2], 5),
    # The plugin gives zeros for the first-occurrence output alone.
    "Unique-unsorted-first-index": _first_occurrences,
}


# RandomUniform: name -> (output_type, minval, maxval, shape, global_seed, op_seed, alignment).
RANDOM_CASES = {
    "philox-f32": ("f32", -2.5, 7.0, [7, 151], 1234, 77, "tensorflow"),
    "philox-f16": ("f16", -2.5, 7.0, [5, 9], 1234, 77, "tensorflow"),
    "philox-bf16": ("bf16", -2.5, 7.0, [5, 9], 3, 11, "tensorflow"),
    "philox-f64": ("f64", 2.0, 10.0, [3, 5], 80, 100, "tensorflow"),
    "philox-i32": ("i32", -20, 1000, [4, 7], 5, 9, "tensorflow"),
    "philox-i64-wide": ("i64", -5, 2 ** 40, [3, 3], 5, 0, "tensorflow"),
    "philox-seeds-past-32-bits": ("f32", 0.0, 1.0, [9], 2 ** 40 + 17, 2 ** 33 + 5, "tensorflow"),
    "mersenne-f32": ("f32", -2.5, 7.0, [1300], 1234, 77, "pytorch"),  # past MT's 624 words
    "mersenne-f16": ("f16", -2.5, 7.0, [5, 9], 42, 0, "pytorch"),
    "mersenne-bf16": ("bf16", -2.5, 7.0, [5, 9], 42, 0, "pytorch"),
    "mersenne-f64": ("f64", 2.0, 10.0, [3, 5], 80, 0, "pytorch"),
    "mersenne-i32": ("i32", -20, 1000, [4, 7], 7, 0, "pytorch"),
    "mersenne-i64": ("i64", -5, 100000, [4, 7], 7, 0, "pytorch"),
    "mersenne-i64-wide": ("i64", -5, 2 ** 40, [3, 3], 7, 0, "pytorch"),
}
# The cases whose later runs the CPU plugin answers (it computes f32 and i32 in those types;
# OpenVINO's reference implementation moves its Philox stream on otherwise between runs than
# the plugin, which moves it 256 counters an element, as cyloop does).
_LATER_RUNS = ("philox-f32", "philox-i32", "philox-seeds-past-32-bits", "mersenne-f32",
               "mersenne-i32")
_RUNS = 3
_LOOP_LAYER = ("f32", 0.0, 1.0, [4], 21, 8, "tensorflow")
_NUMPY_TYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32,
                "i64": np.int64, "bf16": np.float32}  # (bf16 through float32)


def _tensor(value, element_type):
    """An openvino Tensor of `value` (bf16 through its bits: numpy has no bfloat16)."""
    import ml_dtypes
    import openvino as ov

    if element_type != "bf16":
        return ov.Tensor(np.asarray(value))
    bits = np.asarray(value, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    tensor = ov.Tensor(ov.Type.bf16, ov.Shape(list(bits.shape)))
    tensor.data.view(np.uint16)[...] = bits
    return tensor


def _random_layer(element_type, low, high, shape, global_seed, op_seed, alignment):
    bounds = [opset(1).constant(np.array(v, _NUMPY_TYPES[element_type])) for v in (low, high)]
    if element_type == "bf16":
        bounds = [opset(1).convert(b, "bf16") for b in bounds]
    return opset(8).random_uniform(const(shape), *bounds, element_type, global_seed, op_seed,
                                alignment)


def _reference_run(case):
    """A fresh layer's first answer from OpenVINO's reference implementation (its evaluate);
    bf16 as its bits (uint16)."""
    import openvino as ov

    element_type, low, high, shape = case[:4]
    bounds = [_tensor(np.array(v, _NUMPY_TYPES[element_type]), element_type)
              for v in (low, high)]
    out = _tensor(np.zeros(shape, _NUMPY_TYPES[element_type]), element_type)
    assert _random_layer(*case).evaluate([out], [ov.Tensor(np.array(shape, np.int64)), *bounds])
    data = np.array(out.data)
    return data.view(np.uint16) if element_type == "bf16" else data


def _plugin_runs(model, runs):
    """The CPU plugin's answers to `runs` inferences of one compiled `model`."""
    import openvino as ov

    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    return [np.array(request.infer([])[compiled.outputs[0]]) for _ in range(runs)]


def _random_main(out_dir):
    """In the child: each RANDOM_CASES layer's IR, the reference's first answer and, for
    _LATER_RUNS, the plugin's answers to _RUNS inferences; and a Loop running _LOOP_LAYER at
    each of its _RUNS iterations, with the plugin's answers to as many runs of that layer."""
    import openvino as ov

    for name, case in RANDOM_CASES.items():
        folder = os.path.join(out_dir, f"RandomUniform-{name}")
        os.makedirs(folder, exist_ok=True)
        model = ov.Model([_random_layer(*case)], [], name)
        ov.save_model(model, os.path.join(folder, "model.xml"), compress_to_fp16=False)
        runs = _plugin_runs(model, _RUNS) if name in _LATER_RUNS else []
        np.savez(os.path.join(folder, "expected.npz"), first=_reference_run(case),
                 runs=np.array(runs))
    row = opset(1).unsqueeze(_random_layer(*_LOOP_LAYER), const([0]))
    body = ov.Model([opset(1).constant(np.array(True)), row], [], "body")
    loop = opset(5).loop(const(_RUNS), const(True, np.bool_))
    loop.set_function(body)
    loop.set_special_body_ports([-1, 0])  # no iteration input; the condition is Result 0
    stacked = loop.get_concatenated_slices(row.output(0), 0, 1, 1, -1, 0)
    folder = os.path.join(out_dir, "RandomUniform-loop")
    os.makedirs(folder, exist_ok=True)
    ov.save_model(ov.Model([stacked], [], "loop"), os.path.join(folder, "model.xml"),
                  compress_to_fp16=False)
    runs = _plugin_runs(ov.Model([_random_layer(*_LOOP_LAYER)], [], "layer"), _RUNS)
    np.savez(os.path.join(folder, "expected.npz"), expected=np.stack(runs))


# The cases OpenVINO's reference implementation answers (each layer's evaluate): the CPU plugin
# computes a Convert to a 4-bit type in 8 bits (-9.5 becomes -9, 100 stays 100).
REFERENCE_CASES = tuple(f"Convert-to-{t}-and-back" for t in ("i4", "u4", "f4e2m1"))
# The cases the CPU plugin does not answer: those, and one it refuses to run (a spec oracle).
NOT_BY_THE_PLUGIN = REFERENCE_CASES + ("RDFT-signal-size-pads",)


def _reference_main(out_dir):
    """In the child: REFERENCE_CASES' answers, each Convert evaluated in turn."""
    import openvino as ov

    for name in REFERENCE_CASES:
        element_type = getattr(ov.Type, name.split("-")[2])
        (x,) = CASES[name][1]
        narrow = ov.Tensor(element_type, ov.Shape(list(x.shape)))
        back = ov.Tensor(np.zeros(x.shape, np.float32))
        for source, target, source_type, target_type in ((x, narrow, np.float32, element_type),
                                                         (narrow, back, element_type, "f32")):
            convert = opset(1).convert(opset(1).parameter(list(x.shape), source_type), target_type)
            assert convert.evaluate([target], [ov.Tensor(source) if source is x else source])
        np.savez(os.path.join(out_dir, name, "expected.npz"), expected=np.array(back.data))


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    return plugin_answers(tmp_path_factory,
                          "tests.kernels.openvino.test_image_signal_detection_layers")


@pytest.mark.parametrize("name", list(CASES))
def test_layer_matches_the_cpu_plugin(name, oracle):
    check_layer(oracle, name, CASES, SPEC_ORACLES, atol=1e-5)


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    oracle_main(sys.argv[1], CASES, NOT_BY_THE_PLUGIN)
    _reference_main(sys.argv[1])
    _random_main(sys.argv[1])
    sys.stdout.flush()
    os._exit(0)  # skip OpenVINO's teardown


@pytest.mark.parametrize("name", list(RANDOM_CASES))
def test_random_uniform_matches_openvino(name, oracle):
    """A fresh layer's numbers are OpenVINO's reference implementation's, word for word; its
    later runs the CPU plugin's (the next numbers of its Philox stream; the Mersenne Twister's
    first numbers again), to float32 rounding (the plugin's JIT fuses a multiply-add)."""
    model = cyloop.load(oracle / f"RandomUniform-{name}" / "model.xml")
    expected = np.load(oracle / f"RandomUniform-{name}" / "expected.npz")
    first = model.run({})[model.output_names[0]]
    want = expected["first"]
    if RANDOM_CASES[name][0] == "bf16":  # (saved as its bits)
        import ml_dtypes

        want = want.view(ml_dtypes.bfloat16)
    assert first.dtype == want.dtype
    assert first.shape == want.shape
    np.testing.assert_array_equal(first, want)
    if name in _LATER_RUNS:
        runs = [first] + [model.run({})[model.output_names[0]] for _ in range(_RUNS - 1)]
        span = RANDOM_CASES[name][2] - RANDOM_CASES[name][1]
        np.testing.assert_allclose(np.stack(runs), expected["runs"], rtol=0, atol=2e-7 * span)


def test_random_uniform_in_a_loop_draws_anew_each_iteration(oracle):
    """A RandomUniform in a Loop body runs once an iteration, each run the next numbers."""
    model = cyloop.load(oracle / "RandomUniform-loop" / "model.xml")
    got = model.run({})[model.output_names[0]]
    expected = np.load(oracle / "RandomUniform-loop" / "expected.npz")["expected"]
    assert got.shape == expected.shape == (_RUNS, 4)
    np.testing.assert_allclose(got, expected, rtol=0, atol=2e-7 * _LOOP_LAYER[2])
    assert not np.array_equal(got[0], got[1])


def test_random_uniform_is_deterministic_per_load_and_in_range(oracle):
    """Two loads of one model give the same numbers; every number is in [minval, maxval)."""
    path = oracle / "RandomUniform-philox-f32" / "model.xml"
    first, again = (cyloop.load(path) for _ in range(2))
    values = first.run({})[first.output_names[0]]
    np.testing.assert_array_equal(values, again.run({})[again.output_names[0]])
    low, high = RANDOM_CASES["philox-f32"][1:3]
    assert values.min() >= low and values.max() < high


def test_random_uniform_without_seeds_differs_between_loads(oracle, tmp_path):
    """Both seeds 0 ask for numbers that differ each time: each load draws its own seed."""
    folder = oracle / "RandomUniform-philox-f32"
    text = (folder / "model.xml").read_text()
    assert 'global_seed="1234"' in text and 'op_seed="77"' in text
    (tmp_path / "model.xml").write_text(text.replace('global_seed="1234"', 'global_seed="0"')
                                        .replace('op_seed="77"', 'op_seed="0"'))
    (tmp_path / "model.bin").write_bytes((folder / "model.bin").read_bytes())
    runs = [cyloop.load(tmp_path / "model.xml") for _ in range(2)]
    a, b = (model.run({})[model.output_names[0]] for model in runs)
    assert a.shape == b.shape == (7, 151) and a.dtype == b.dtype == np.float32
    assert not np.array_equal(a, b)
    assert a.min() >= -2.5 and a.max() < 7.0


@pytest.mark.parametrize("name,old,new,message", [
    ("Interpolate-4", 'mode="linear_onnx"', 'mode="bilinear_pillow"', "mode must be one of"),
    ("Interpolate-nearest-simple-asymmetric", 'nearest_mode="simple"', 'nearest_mode="up"',
     "nearest_mode must be one of"),
    ("FakeQuantize-256", 'levels="256"', 'levels="1"', "levels >= 2"),
    ("GridSample-nearest-border", 'padding_mode="border"', 'padding_mode="wrap"',
     "padding_mode must be one of"),
    ("NMS-valid-i32", 'box_encoding="corner"', 'box_encoding="polar"',
     "box_encoding must be one of"),
    ("ROIAlign-9-avg-adaptive", 'mode="avg"', 'mode="min"', "mode must be one of avg, max"),
    ("ROIAlign-9-max-half-pixel", 'aligned_mode="half_pixel"', 'aligned_mode="corner"',
     "aligned_mode must be one of"),
    ("ROIAlign-9-max-half-pixel", 'sampling_ratio="2"', 'sampling_ratio="-1"',
     "sampling_ratio must not be negative"),
    ("FakeConvert-e5m2-scalar", 'destination_type="f8e5m2"', 'destination_type="f16"',
     "destination_type must be f8e4m3 or f8e5m2"),
    ("Const-i4", 'shape="3, 5" offset="0" size="8"', 'shape="3, 5" offset="0" size="7"',
     "needs 8 bytes, the layer says 7"),
], ids=["interpolate-mode", "nearest-mode", "levels", "padding-mode", "box-encoding",
        "roialign-mode", "roialign-aligned-mode", "roialign-sampling", "fakeconvert-type",
        "packed-const-size"])
def test_bad_attributes_name_the_layer(name, old, new, message, oracle, tmp_path):
    """A layer attribute outside the spec's values is a ModelError naming it."""
    with open(oracle / name / "model.xml") as f:
        text = f.read()
    assert old in text
    (tmp_path / "model.xml").write_text(text.replace(old, new))
    (tmp_path / "model.bin").write_bytes((oracle / name / "model.bin").read_bytes())
    feeds = CASES[name][1]
    with pytest.raises(cyloop.ModelError, match=message):
        cyloop.load(tmp_path / "model.xml").run({f"p{k}": x for k, x in enumerate(feeds)})


@pytest.mark.parametrize("old,new,message", [
    ('alignment="tensorflow"', 'alignment="jax"', "alignment must be one of"),
    ('output_type="f32"', 'output_type="u8"', "output_type must be one of"),
    ('global_seed="1234"', 'global_seed="-3"', "seeds must not be negative"),
], ids=["alignment", "output-type", "seed"])
def test_bad_random_uniform_attributes_name_the_layer(old, new, message, oracle, tmp_path):
    folder = oracle / "RandomUniform-philox-f32"
    text = (folder / "model.xml").read_text()
    assert old in text
    (tmp_path / "model.xml").write_text(text.replace(old, new))
    (tmp_path / "model.bin").write_bytes((folder / "model.bin").read_bytes())
    with pytest.raises(cyloop.ModelError, match=rf"'\d+:RandomUniform\w*'.*{message}"):
        cyloop.load(tmp_path / "model.xml").run({})


def test_dft_axes_past_the_signal_fail_naming_the_layer(oracle, tmp_path):
    """DFT's axes count the axes before the (real, imaginary) one: [3] of a [2, 5, 6, 2] signal
    is out of range, an ExecutionError naming the layer."""
    import xml.etree.ElementTree as ET

    folder = oracle / "DFT-one-axis"
    (tmp_path / "model.xml").write_bytes((folder / "model.xml").read_bytes())
    blob = bytearray((folder / "model.bin").read_bytes())
    consts = [layer.find("data") for layer in ET.parse(folder / "model.xml").iter("layer")
              if layer.get("type") == "Const"]
    assert len(consts) == 1 and consts[0].get("element_type") == "i64"
    offset = int(consts[0].get("offset"))
    blob[offset:offset + 8] = np.array([3], np.int64).tobytes()
    (tmp_path / "model.bin").write_bytes(bytes(blob))
    model = cyloop.load(tmp_path / "model.xml")
    with pytest.raises(cyloop.ExecutionError,
                       match=r"DFT.*DFT axes must be distinct, in \[-3, 2\], got \[3\]"):
        model.run({"p0": SIGNAL})


@pytest.mark.parametrize("op_type,version,args,message", [
    ("DFT", 7, (SIGNAL[..., :1], [1]), r"complex data \[\.\.\., 2\]"),
    ("IDFT", 7, (SIGNAL, [1, -2]), "axes must be distinct"),
    ("RDFT", 9, (REAL, [1], [4, 4]), "one signal_size per axis"),
    ("IRDFT", 9, (HALF_SPECTRUM, [], None), "at least one axis"),
    ("DFT", 7, (SIGNAL, [1], [0]), "signal sizes must be positive or -1"),
    ("IRDFT", 9, (HALF_SPECTRUM[:, :, :1], [2]), "empty signal"),
    ("RDFT", 9, (REAL.astype(np.int32), [1]), "floating-point data"),
], ids=["not-complex", "repeated-axis", "sizes-per-axis", "no-axes", "zero-size",
        "empty-irdft", "integers"])
def test_fourier_inputs_are_checked(op_type, version, args, message):
    from cyloop import kernels
    from cyloop.ir import OPENVINO_DOMAIN

    fourier = kernels.lookup(OPENVINO_DOMAIN, op_type, version).build({})
    data, axes, *sizes = args
    sizes = [None if s is None else np.array(s) for s in sizes]
    with pytest.raises(ValueError, match=message):
        fourier(data, np.array(axes, np.int64), *sizes)


def test_roi_align_checks_its_inputs():
    from cyloop import kernels
    from cyloop.ir import OPENVINO_DOMAIN

    align = kernels.lookup(OPENVINO_DOMAIN, "ROIAlign", 9).build(
        {"pooled_h": "2", "pooled_w": "2", "sampling_ratio": "1", "spatial_scale": "1",
         "mode": "avg"})
    with pytest.raises(ValueError, match=r"batch indices must be in \[0, 2\), got \[0, 2\]"):
        align(FEATURES, ROI_BOXES[:2], np.array([0, 2], np.int32))
    with pytest.raises(ValueError, match=r"rois \[R, 4\]"):
        align(FEATURES, ROI_BOXES[:, :3], ROI_BATCHES)
    adaptive = kernels.lookup(OPENVINO_DOMAIN, "ROIAlign", 9).build(
        {"pooled_h": "2", "pooled_w": "2", "sampling_ratio": "0", "spatial_scale": "1",
         "mode": "avg"})
    huge = np.array([[0, 0, 1e12, 3]], np.float32)  # 5e11 sample points a side of a bin
    with pytest.raises(ValueError, match="at most 65536"):
        adaptive(FEATURES, huge, np.array([0], np.int32))


def test_fake_convert_keeps_nan(oracle):
    """NaN stays NaN through FakeConvert (the CPU plugin answers -448, an artifact of its clamp:
    the spec's Convert of NaN is NaN)."""
    model = cyloop.load(oracle / "FakeConvert-e4m3-edges" / "model.xml")
    edges = FLOAT8_EDGES.copy()
    edges[[0, 5]] = np.nan
    got = model.run({"p0": edges})[model.output_names[0]]
    assert np.isnan(got[[0, 5]]).all() and not np.isnan(np.delete(got, [0, 5])).any()
    plain = model.run({"p0": FLOAT8_EDGES})[model.output_names[0]]
    np.testing.assert_array_equal(np.delete(got, [0, 5]), np.delete(plain, [0, 5]))


def test_packed_4bit_types_need_ml_dtypes(oracle, monkeypatch):
    """Without ml_dtypes (simulated: its types taken out of the table) a 4-bit Const is an
    UnsupportedOpError naming the layer, the type and the package."""
    from cyloop.frontends import openvino as frontend

    monkeypatch.setattr(frontend, "ELEMENT_TYPES", {k: v for k, v in
                                                    frontend.ELEMENT_TYPES.items() if k != "i4"})
    with pytest.raises(cyloop.UnsupportedOpError,
                       match=r"Const layer \d+ .*element type 'i4' needs the ml_dtypes package"):
        cyloop.load(oracle / "Const-i4" / "model.xml")
