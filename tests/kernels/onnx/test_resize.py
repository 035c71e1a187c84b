"""Resize on random attribute combinations (mode, coordinate transformation, nearest rounding,
antialias, exclude_outside, scales or sizes, axes) on 2-D inputs, against onnxruntime.

onnx.reference is not the oracle here: for pytorch_half_pixel with one output position it takes
the source coordinate -0.5 (the spec, and onnxruntime, say 0), and where a source coordinate is
within rounding of an integer its cubic taps can land one position off (x = 2 - 1e-16 reads
around 1). onnxruntime runs cubic on 2-D (or 4-D) inputs only, hence 2-D."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import cyloop

TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def _case(rng):
    mode = ["nearest", "linear", "cubic"][rng.integers(3)]
    attrs = {"mode": mode, "coordinate_transformation_mode": TRANSFORMS[rng.integers(5)]}
    if mode == "nearest":
        attrs["nearest_mode"] = NEAREST[rng.integers(4)]
    else:
        attrs["antialias"] = int(rng.integers(2))
        # (onnxruntime takes exclude_outside for cubic, or linear with antialias)
        attrs["exclude_outside"] = int(rng.integers(2)) if mode == "cubic" or \
            attrs["antialias"] else 0
        if mode == "cubic":
            attrs["cubic_coeff_a"] = float(rng.choice([-0.75, -0.5]))
    shape = [int(n) for n in rng.integers(4, 9, 2)]
    if rng.integers(2):
        attrs["axes"] = [1]
        resized = shape[1:]
    else:
        resized = shape
    return attrs, shape, resized


def _run(attrs, x, scales, sizes):
    names = ["x", "", "scales"] if sizes is None else ["x", "", "", "sizes"]
    node = helper.make_node("Resize", names, ["y"], **attrs)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)]
    feeds = {"x": x}
    for name, value in (("scales", scales), ("sizes", sizes)):
        if value is not None:
            inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
            feeds[name] = value
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)[0]
    got = cyloop.load(onnx_model).run(feeds)["y"]
    assert got.shape == expected.shape and got.dtype == expected.dtype, attrs
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=str(attrs))


@pytest.mark.parametrize("seed", range(60))
def test_resize_matches_onnxruntime(seed):
    rng = np.random.default_rng(seed)
    attrs, shape, resized = _case(rng)
    x = rng.standard_normal(shape).astype(np.float32)
    if seed % 2:
        sizes = np.array([int(n) for n in rng.integers(2, 12, len(resized))], np.int64)
        if seed % 4 == 1 and attrs["coordinate_transformation_mode"] != "align_corners":
            # (the policy's scale gives an unrounded length too: see the scales case below)
            attrs["keep_aspect_ratio_policy"] = ["not_larger", "not_smaller"][seed % 8 // 4]
        _run(attrs, x, None, sizes)
    else:
        if attrs["coordinate_transformation_mode"] == "align_corners":
            # With scales, onnxruntime divides by the rounded output length, the spec's expected
            # outputs (the backend suite) by the unrounded one, as cyloop.
            attrs["coordinate_transformation_mode"] = "asymmetric"
        scales = rng.choice([0.5, 0.6, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0], len(resized))
        _run(attrs, x, scales.astype(np.float32), None)


def test_tf_crop_and_resize_extrapolates_outside_the_roi():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    for mode in ("nearest", "linear", "cubic"):
        attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
                 "extrapolation_value": 9.5}
        node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], **attrs)
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [helper.make_tensor("roi", TensorProto.FLOAT, [4], [-0.25, 0.375, 0.875, 1.375]),
             helper.make_tensor("sizes", TensorProto.INT64, [2], [7, 4])])
        onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
        session = ort.InferenceSession(onnx_model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        expected = session.run(None, {"x": x})[0]
        got = cyloop.load(onnx_model).run({"x": x})["y"]
        assert (got == 9.5).any()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=mode)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_pytorch_half_pixel_reads_position_zero_for_a_single_output(mode):
    # The spec: length_resized > 1 ? (y + 0.5) / scale - 0.5 : 0 (onnx.reference takes -0.5).
    x = np.random.default_rng(3).standard_normal((3, 6)).astype(np.float32)
    _run({"mode": mode, "coordinate_transformation_mode": "pytorch_half_pixel"}, x, None,
         np.array([3, 1], np.int64))
