"""NonMaxSuppression, RoiAlign and MaxRoiPool against onnxruntime, under both drivers, on seeded
random boxes: ties in scores, boxes whose IoU lands on the threshold, corners in any order, both
box encodings, regions reaching past the feature map, and empty inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.nodes import assert_native_matches, one_node

DRIVERS = ["cython", "python"]


def _boxes(rng, batches, n, center):
    """Boxes on a coarse integer grid (so that IoUs repeat and land on thresholds exactly)."""
    corners = rng.integers(0, 6, (batches, n, 4)).astype(np.float32)
    if center:  # (x_center, y_center, width, height), some widths 0 or negative
        corners[..., 2:] = rng.integers(-1, 5, (batches, n, 2))
    return corners


def _nms_case(seed):
    rng = np.random.default_rng(seed)
    batches, classes, n = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(0, 12))
    center = int(rng.integers(2))
    boxes = _boxes(rng, batches, n, center)
    scores = (rng.integers(0, 5, (batches, classes, n)) / 4).astype(np.float32)  # ties
    inputs = [boxes, scores]
    given_inputs = int(rng.integers(0, 4))
    if given_inputs >= 1:
        inputs.append(np.array([int(rng.choice([0, 1, 2, 5, 100]))], np.int64))
    if given_inputs >= 2:
        inputs.append(np.array([rng.choice([0.0, 0.25, 1 / 3, 0.5, 1.0])], np.float32))
    if given_inputs >= 3:
        inputs.append(np.array([rng.choice([-1.0, 0.0, 0.25, 0.5])], np.float32))
    if given_inputs == 2 and seed % 3 == 0:  # an omitted input between given ones
        inputs += [np.array([0.3], np.float32)]
        inputs[3] = None
    return center, inputs


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("opset", [10, 11])
@pytest.mark.parametrize("seed", range(40))
def test_non_max_suppression_matches_onnxruntime(seed, opset, driver):
    center, inputs = _nms_case(seed)
    model, feeds = one_node("NonMaxSuppression", opset, {"center_point_box": center}, inputs)
    assert_native_matches(model, feeds, driver=driver)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), iou=st.floats(0, 1, width=32))
def test_non_max_suppression_on_random_boxes_matches_onnxruntime(seed, n, iou):
    rng = np.random.default_rng(seed)
    boxes = rng.standard_normal((2, n, 4)).astype(np.float32)
    scores = rng.random((2, 3, n)).astype(np.float32)
    scores[:, :, ::3] = 0.5  # (ties)
    model, feeds = one_node("NonMaxSuppression", 11, {"center_point_box": seed % 2},
                            [boxes, scores, np.array([n // 2 + 1], np.int64),
                             np.array([iou], np.float32), np.array([0.1], np.float32)])
    assert_native_matches(model, feeds)


@pytest.mark.parametrize("iou", [-0.1, 1.5])
def test_non_max_suppression_refuses_an_iou_threshold_outside_0_1(iou):
    rng = np.random.default_rng(0)
    model, feeds = one_node("NonMaxSuppression", 11, {},
                            [_boxes(rng, 1, 3, False), rng.random((1, 1, 3)).astype(np.float32),
                             np.array([3], np.int64), np.array([iou], np.float32)])
    assert_native_matches(model, feeds)  # (onnxruntime refuses it: so must cyloop)


def _roi_case(seed, dtype):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, int(rng.integers(1, 9)), int(rng.integers(1, 9)))).astype(dtype)
    r = int(rng.integers(0, 6))
    corners = rng.uniform(-3, 11, (r, 4))
    if seed % 4 == 0:  # some regions of no size, or inverted
        corners[:, 2:] = corners[:, :2] - rng.integers(0, 2, (r, 2))
    rois = corners.astype(dtype)
    batch_indices = rng.integers(0, 2, r).astype(np.int64)
    attrs = {"output_height": int(rng.integers(1, 4)), "output_width": int(rng.integers(1, 4)),
             "sampling_ratio": int(rng.integers(0, 3)),
             "spatial_scale": float(rng.choice([1.0, 0.5, 0.25])),
             "mode": ["avg", "max"][seed % 2]}
    return attrs, [x, rois, batch_indices]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("version", ["10", "16-half_pixel", "16-output_half_pixel", "22"])
@pytest.mark.parametrize("seed", range(16))
def test_roi_align_matches_onnxruntime(seed, version, dtype, driver):
    attrs, inputs = _roi_case(seed, dtype)
    opset = int(version.split("-")[0])
    if "-" in version:
        attrs["coordinate_transformation_mode"] = version.split("-")[1]
    model, feeds = one_node("RoiAlign", opset, attrs, inputs)
    # onnxruntime has no RoiAlign-22 (whose change is bfloat16), and fails on an inverted region
    # (x2 < x1 or y2 < y1) it samples at ceil(its negative bin size) points: onnx.reference,
    # which samples none.
    inverted = opset >= 16 and version != "16-output_half_pixel" \
        and not attrs["sampling_ratio"] and (inputs[1][:, 2:] < inputs[1][:, :2]).any()
    assert_native_matches(model, feeds, reference=opset == 22 or inverted, rtol=1e-5, atol=1e-6,
                          driver=driver)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("opset", [1, 22])
@pytest.mark.parametrize("seed", range(12))
def test_max_roi_pool_matches_onnxruntime(seed, opset, driver):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, int(rng.integers(1, 9)), int(rng.integers(1, 9)))).astype(
        np.float32)
    r = int(rng.integers(0, 5))
    rois = np.concatenate([rng.integers(0, 2, (r, 1)), rng.uniform(-2, 10, (r, 4))], axis=1)
    if seed % 3 == 0:
        rois[:, 1:] = np.round(rois[:, 1:] * 2) / 2  # (halves: C's round takes them away from 0)
    attrs = {"pooled_shape": [int(v) for v in rng.integers(1, 4, 2)],
             "spatial_scale": float(rng.choice([1.0, 0.5]))}
    model, feeds = one_node("MaxRoiPool", opset, attrs, [x, rois.astype(np.float32)])
    # (neither onnxruntime nor onnx.reference has MaxRoiPool-22, whose change is bfloat16:
    # MaxRoiPool-1 on onnxruntime)
    assert_native_matches(model, feeds, driver=driver, oracle_opset=1)
