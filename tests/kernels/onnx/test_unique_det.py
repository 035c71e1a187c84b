"""Unique and Det against onnxruntime under both drivers (onnx.reference for the types and
versions onnxruntime lacks): Unique sorted and not, flattened and along every axis, with repeated
values, slices and strings, and empty inputs; Det on singular, negative-pivot and batched
matrices."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cyloop
from tests.support.nodes import assert_native_matches, one_node, oracle

DRIVERS = ["cython", "python"]
RNG = np.random.default_rng(11)
REPEATS = RNG.integers(-2, 3, (4, 3, 4))
REPEATS[2] = REPEATS[0]  # (a repeated slice along axis 0)
REPEATS[:, :, 3] = REPEATS[:, :, 1]  # (and along axis 2)

UNIQUE_CASES = [
    *[(attrs, REPEATS.astype(dtype))
      for dtype in (np.float32, np.int64, np.int8, np.float64)
      for attrs in ({}, {"sorted": 0}, {"axis": 0}, {"axis": 2, "sorted": 0}, {"axis": -1},
                    {"axis": 1})],
    ({}, np.array([0.0, -0.0, 1.5, 0.0, -1.5, 1.5], np.float32)),
    ({"sorted": 0}, np.array(["b", "a", "c", "a", "b"], object)),
    ({}, np.array([["b", "a"], ["c", "a"]], object)),
    ({}, np.zeros((0,), np.float32)),
    ({"axis": 0}, np.zeros((0, 3), np.int64)),
    ({"axis": 1}, np.zeros((0, 3), np.int64)),  # (3 slices of no element: one unique slice)
    ({}, np.array(3.0, np.float32)),
]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("attrs, x", UNIQUE_CASES,
                         ids=[f"{k}-{a}-{x.dtype}" for k, (a, x) in enumerate(UNIQUE_CASES)])
def test_unique_matches_onnxruntime(attrs, x, driver):
    model, feeds = one_node("Unique", 11, attrs, [x], n_outputs=4)
    assert_native_matches(model, feeds, driver=driver)


@pytest.mark.parametrize("attrs", [{}, {"sorted": 0}, {"axis": 1}, {"axis": 0, "sorted": 0}])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int8], ids=str)
def test_unique_28_matches_onnxruntime(attrs, dtype):
    model, feeds = one_node("Unique", 28, attrs, [REPEATS[:, :, :2].astype(dtype)], n_outputs=4)
    assert_native_matches(model, feeds)


# (onnxruntime has neither type; onnx.reference's unsorted order indexes past its own arrays)
@pytest.mark.parametrize("opset", [11, 28])
@pytest.mark.parametrize("attrs", [{}, {"axis": 1}, {"axis": 0}])
@pytest.mark.parametrize("dtype", [np.uint16, np.bool_, np.int32], ids=str)
def test_unique_on_other_types_matches_onnx_reference(attrs, dtype, opset):
    model, feeds = one_node("Unique", opset, attrs, [REPEATS.astype(dtype)], n_outputs=4)
    assert_native_matches(model, feeds, reference=True)


@settings(max_examples=50, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), seed=st.integers(0, 2**16),
       axis=st.integers(-3, 3) | st.none(), ordered=st.integers(0, 1),
       outputs=st.integers(1, 4))
def test_unique_on_random_tensors_matches_onnxruntime(shape, seed, axis, ordered, outputs):
    x = np.random.default_rng(seed).integers(0, 3, shape).astype(np.float32)
    # (onnxruntime aborts the process on some empty X with an axis: one that X has slices
    # along, and, in a process earlier tests had run in, one out of X's range, [0] with axis 3;
    # UNIQUE_CASES holds the one it takes)
    assume(not (x.size == 0 and axis is not None
                and not (-len(shape) <= axis < len(shape) and shape[axis] == 0)))
    attrs = {"sorted": ordered}
    if axis is not None:
        attrs["axis"] = axis % len(shape) if seed % 2 else axis
    model, feeds = one_node("Unique", 11, attrs, [x], n_outputs=outputs)
    assert_native_matches(model, feeds)  # (an axis out of range: both refuse it)


def _matrices(dtype):
    x = RNG.standard_normal((3, 2, 4, 4))
    x[0, 0, 3] = x[0, 0, 1]  # singular
    x[0, 1] = np.triu(x[0, 1])
    x[0, 1, 0, 0] = 0  # a zero pivot: rows exchanged
    x[1, 0] = -np.eye(4)  # negative pivots
    return x.astype(dtype)


DET_CASES = [(11, _matrices(np.float32)), (22, _matrices(np.float32)),
             (11, _matrices(np.float32)[0, 0]),
             (11, RNG.standard_normal((5, 1, 1)).astype(np.float32)),
             (11, np.zeros((0, 3, 3), np.float32)), (11, _matrices(np.float32)[..., :2, :2])]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("opset, x", DET_CASES, ids=[str(x.shape) for _, x in DET_CASES])
def test_det_matches_onnxruntime(opset, x, driver):
    model, feeds = one_node("Det", opset, {}, [x])
    assert_native_matches(model, feeds, rtol=1e-5, atol=1e-6, driver=driver)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("opset", [11, 22])
def test_det_in_float64_matches_onnx_reference(opset, driver):
    model, feeds = one_node("Det", opset, {}, [_matrices(np.float64)])
    assert_native_matches(model, feeds, reference=True, rtol=1e-12, atol=1e-12, driver=driver)


@pytest.mark.parametrize("opset", [11, 22])
def test_det_in_float16_is_onnxruntimes_float32_result_rounded(opset):
    x = _matrices(np.float16)
    model, feeds = one_node("Det", opset, {}, [x])
    (expected,) = oracle(*one_node("Det", opset, {}, [x.astype(np.float32)]))
    got = cyloop.load(model).run(feeds)["out0"]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float16), rtol=1e-3)


def test_det_refuses_a_non_square_matrix():
    model, feeds = one_node("Det", 11, {}, [np.zeros((2, 3), np.float32)])
    assert_native_matches(model, feeds)  # (onnxruntime refuses it: so must cyloop)
