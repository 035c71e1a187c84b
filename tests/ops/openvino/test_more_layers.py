"""Interpolate, GridSample, the BackpropData convolutions, FakeQuantize, NonMaxSuppression, Unique
and ScaledDotProductAttention on the options the ONNX sweep does not reach (Interpolate's linear
mode and antialias, pads, tf_half_pixel_for_nn, the simple rounding, unordered axes, sizes
rounding; output_shape; sorted and Soft-NMS results; unsorted Unique; boolean masks...): one-layer
IRs built with the openvino API, run by cyloop, against OpenVINO's CPU plugin (f32), or, where
the plugin departs from the op spec, a numpy re-implementation of the spec (SPEC_ORACLES), with
the harness of test_ported_layers.py (OpenVINO runs in a child process of its own):

    python -m tests.ops.openvino.test_more_layers OUT_DIR
"""

import math
import os
import sys

import numpy as np
import pytest

import cyloop

from .test_ported_layers import _c, _oracle_main, _v, check_layer, plugin_answers

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


def _interpolate(target, mode, calculation, axes=None, **options):
    def build(p):
        dtype = np.float32 if calculation == "scales" else np.int64
        return _v(11).interpolate(p[0], _c(target, dtype), mode, calculation,
                                  axes=None if axes is None else _c(axes), **options)

    return build


def _interpolate_4(p):
    """Interpolate-4 (data, sizes, scales, axes): the Python API's function is opset1's."""
    from openvino.utils.node_factory import NodeFactory

    return NodeFactory("opset4").create(
        "Interpolate", [p[0].output(0), _c([3, 4]).output(0),
                        _c([0.7, 0.7], np.float32).output(0), _c([2, 3]).output(0)],
        {"mode": "linear_onnx", "shape_calculation_mode": "scales",
         "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor",
         "antialias": False, "pads_begin": [0, 0, 1, 0], "pads_end": [0, 0, 0, 1],
         "cube_coeff": -0.75})


def _channels(values):
    """A per-channel [1, C, 1, 1] float32 constant."""
    return _c(np.reshape(values, (1, -1, 1, 1)), np.float32)


def _grid_sample(mode, padding, align_corners):
    return lambda p: _v(9).grid_sample(p[0], p[1], {"mode": mode, "padding_mode": padding,
                                                    "align_corners": align_corners})


def _nms(port, sigma=0.0, encoding="corner", descending=True, output_type="i64"):
    def build(p):
        return _v(9).non_max_suppression(
            p[0], p[1], _c(3), _c(0.3, np.float32), _c(0.15, np.float32),
            _c(sigma, np.float32), encoding, descending, output_type).output(port)

    return build


def _unique(port, axis, ordered, index_type="i64"):
    def build(p):
        return _v(10).unique(p[0], None if axis is None else _c(axis), ordered, index_type,
                             "i32").output(port)

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
    "ConvolutionBackpropData-explicit": (lambda p: _v(1).convolution_backprop_data(
        p[0], p[1], [2, 1], None, [1, 0], [0, 1], [1, 2], "explicit", [1, 0]),
        [BACKPROP_X, BACKPROP_W]),
    "ConvolutionBackpropData-output-shape-same-upper": (lambda p: _v(1).convolution_backprop_data(
        p[0], p[1], [2, 2], _c([6, 9]), None, None, None, "same_upper"),
        [BACKPROP_X, BACKPROP_W]),
    "ConvolutionBackpropData-output-shape-explicit": (lambda p: _v(1).convolution_backprop_data(
        p[0], p[1], [2, 1], _c([10, 7]), [1, 1], [0, 0], None, "explicit"),
        [BACKPROP_X, BACKPROP_W]),
    "GroupConvolutionBackpropData-same-lower": (
        lambda p: _v(1).group_convolution_backprop_data(
            p[0], p[1], [1, 2], _c([5, 8]), None, None, [2, 1], "same_lower"),
        [BACKPROP_X, GROUP_W]),
    # FakeQuantize: per-channel limits, one channel's input range inverted.
    "FakeQuantize-per-channel": (lambda p: _v(1).fake_quantize(
        p[0], _channels([-1, 0.5, -0.2]), _channels([1, -0.5, 1.5]), _c(-2.0, np.float32),
        _channels([3, 1, 2]), 5), [X4]),
    "FakeQuantize-256": (lambda p: _v(1).fake_quantize(
        p[0], _c(-1.5, np.float32), _c(1.2, np.float32), _c(0, np.float32),
        _c(255, np.float32), 256), [X4]),
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
    "SDPA-boolean-mask": (lambda p: _v(13).scaled_dot_product_attention(
        p[0], p[1], p[2], _c(RNG.uniform(size=(1, 4, 6)) > 0.3, np.bool_)),
        [QUERY, KEY, VALUE]),
    "SDPA-float-mask-scale": (lambda p: _v(13).scaled_dot_product_attention(
        p[0], p[1], p[2], _c(RNG.standard_normal((2, 1, 4, 6)), np.float32),
        _c(0.3, np.float32)), [QUERY, KEY, VALUE]),
    "SDPA-causal-short-query": (lambda p: _v(13).scaled_dot_product_attention(
        p[0], p[1], p[2], causal=True), [QUERY, KEY, VALUE]),
    "SDPA-broadcast-batch": (lambda p: _v(13).scaled_dot_product_attention(p[0], p[1], p[2]),
                             [QUERY, KEY[:1], VALUE[:, :1]]),
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


# Where the CPU plugin departs from the op spec, a numpy re-implementation of the spec instead:
SPEC_ORACLES = {
    # The plugin's linear antialias differs from the spec's code by up to 0.48 here.
    "Interpolate-linear-antialias-pads": _linear_spec([0.5, 1.5], [2, 3], [0, 0, 1, 0],
                                                      [0, 0, 0, 2]),
    # The plugin assumes input_low <= input_high (the spec takes their min and max).
    "FakeQuantize-per-channel": _fake_quantize_spec([-1, 0.5, -0.2], [1, -0.5, 1.5], [-2.0],
                                                    [3, 1, 2], 5),
    # The plugin gives zeros for the first-occurrence output alone.
    "Unique-unsorted-first-index": _first_occurrences,
}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    return plugin_answers(tmp_path_factory, "tests.ops.openvino.test_more_layers")


@pytest.mark.parametrize("name", list(CASES))
def test_layer_matches_the_cpu_plugin(name, oracle):
    check_layer(oracle, name, CASES, SPEC_ORACLES, atol=1e-5)


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _oracle_main(sys.argv[1], CASES)
    sys.stdout.flush()
    os._exit(0)  # skip OpenVINO's teardown


@pytest.mark.parametrize("name,old,new,message", [
    ("Interpolate-4", 'mode="linear_onnx"', 'mode="bilinear_pillow"', "mode must be one of"),
    ("Interpolate-nearest-simple-asymmetric", 'nearest_mode="simple"', 'nearest_mode="up"',
     "nearest_mode must be one of"),
    ("FakeQuantize-256", 'levels="256"', 'levels="1"', "levels >= 2"),
    ("GridSample-nearest-border", 'padding_mode="border"', 'padding_mode="wrap"',
     "padding_mode must be one of"),
    ("NMS-valid-i32", 'box_encoding="corner"', 'box_encoding="polar"',
     "box_encoding must be one of"),
], ids=["interpolate-mode", "nearest-mode", "levels", "padding-mode", "box-encoding"])
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
