"""QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger and QLinearMatMul
against onnxruntime at each opset version it implements; the float8 and 4- and 2-bit types,
which onnxruntime's Python API neither takes nor returns, against onnx.reference."""

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.support.nodes import assert_native_matches, one_node

RNG = np.random.default_rng(7)
# Quarters of integers: x / 0.5 lands on halves, which round to even.
X = RNG.integers(-600, 600, (3, 8, 5)) / 4
EXTREMES = np.array([1.5, np.nan, np.inf, -np.inf, 1e9, -1e9, 0.25, -0.25])

# (opset, x type, zero point type or None, granularity): onnxruntime's implemented pairs
# (float16 from 19, 16-bit integers from 21; per axis from 13, blocks from 21)
_Q_CASES = [
    (opset, xt, zt, granularity)
    for opset in (10, 13, 19, 21, 23, 25)
    for xt in (np.float32, np.float16) if xt == np.float32 or opset >= 19
    for zt in (np.uint8, np.int8, np.uint16, np.int16, None)
    if opset >= 21 or zt not in (np.uint16, np.int16)
    for granularity in ("tensor", "axis", "block")
    if (granularity != "axis" or opset >= 13) and (granularity != "block" or opset >= 21)]


def _params(granularity, scale_type, zero_type, integers=False):
    """(scale, zero point or None, attributes) for an x of X's shape."""
    def zeros(shape):
        return None if zero_type is None else RNG.integers(0, 6, shape).astype(zero_type)

    if granularity == "tensor":
        return np.array(0.5, scale_type), zeros(()), {}
    if granularity == "axis":
        scale = (RNG.integers(1, 9, 8) / 8).astype(scale_type)
        return scale, zeros(8), {"axis": -2}
    scale = (RNG.integers(1, 9, (3, 8, 2)) / 8).astype(scale_type)
    return scale, zeros((3, 8, 2)), {"axis": 2, "block_size": 3}


@pytest.mark.parametrize("opset, x_type, zero_type, granularity", _Q_CASES,
                         ids=[f"opset{o}-{np.dtype(x).name}-"
                              f"{'none' if z is None else np.dtype(z).name}-{g}"
                              for o, x, z, g in _Q_CASES])
def test_quantize_linear_matches_onnxruntime(opset, x_type, zero_type, granularity):
    """Halves round to even; the scale's type is x's from 19 (float32 before), and from 23
    the division is in the scale's type (float16 divides in float16)."""
    scale_type = np.float32 if opset < 19 else x_type
    scale, zero, attrs = _params(granularity, scale_type, zero_type)
    model, feeds = one_node("QuantizeLinear", opset, attrs, [X.astype(x_type), scale, zero])
    assert_native_matches(model, feeds)


@pytest.mark.parametrize("opset", [10, 13, 19, 21, 25])
@pytest.mark.parametrize("zero_type", [np.uint8, np.int8])
def test_quantize_linear_saturates_as_onnxruntime(opset, zero_type):
    """Past the range and infinities saturate; NaN becomes the lowest value."""
    model, feeds = one_node("QuantizeLinear", opset, {},
                            [EXTREMES.astype(np.float32), np.float32(0.1), zero_type(3)])
    assert_native_matches(model, feeds)


@pytest.mark.parametrize("opset", [21, 25])
@pytest.mark.parametrize("output_type", [TensorProto.UINT8, TensorProto.INT8,
                                         TensorProto.UINT16, TensorProto.INT16])
def test_quantize_linear_output_dtype_matches_onnxruntime(opset, output_type):
    model, feeds = one_node("QuantizeLinear", opset, {"output_dtype": output_type},
                            [X.astype(np.float32), np.float32(0.37)])
    assert_native_matches(model, feeds)


@pytest.mark.parametrize("opset", [23, 25])
@pytest.mark.parametrize("x_type, scale_type", [(np.float16, np.float32),
                                                (np.float32, np.float16),
                                                (np.float16, np.float16)])
@pytest.mark.parametrize("precision", [None, TensorProto.FLOAT, TensorProto.FLOAT16])
def test_quantize_linear_precision_matches_onnxruntime(opset, x_type, scale_type, precision):
    x = (RNG.standard_normal((4, 50)) * 100).astype(x_type)
    attrs = {} if precision is None else {"precision": precision}
    model, feeds = one_node("QuantizeLinear", opset, attrs,
                            [x, np.array(0.0731, scale_type), np.int8(5)])
    assert_native_matches(model, feeds)


_NARROW = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "int4", "uint4",
           "int2", "uint2"]


def _takes(opset, name):
    """Whether (De)QuantizeLinear-`opset` has type `name`: float8 from 19, 4-bit integers from
    21, 2-bit from 25."""
    return opset >= (19 if name.startswith("float8") else 25 if name.endswith("int2") else 21)


_NARROW_Q = [(opset, name, saturate, given_by) for opset in (19, 21, 25) for name in _NARROW
             for saturate in (0, 1) for given_by in ("zero point", "output_dtype")
             if _takes(opset, name) and (opset >= 21 or given_by == "zero point")]


@pytest.mark.parametrize("opset, name, saturate, given_by", _NARROW_Q,
                         ids=[f"opset{o}-{n}-saturate{s}-by {g}" for o, n, s, g in _NARROW_Q])
def test_quantize_linear_to_narrow_types_matches_onnx_reference(opset, name, saturate, given_by):
    """float8 rounds to nearest even, saturating or not (then to NaN or infinity as the type
    has them; onnxruntime saturates e4m3fn below 512 even then); the 4- and 2-bit integers
    clip."""
    dtype = np.dtype(getattr(ml_dtypes, name))
    # (onnx.reference makes -inf of inf for the 4- and 2-bit integers: finite extremes there)
    extremes = EXTREMES if name.startswith("float8") else EXTREMES[np.isfinite(EXTREMES)]
    spread = 1000 if name.startswith("float8") else 10
    x = np.concatenate([RNG.standard_normal(60) * spread, extremes]).astype(np.float32)
    inputs = [x, np.float32(0.7)]
    attrs = {"saturate": saturate}
    if given_by == "zero point":
        inputs.append(np.zeros((), dtype))
    else:
        attrs["output_dtype"] = helper.np_dtype_to_tensor_dtype(dtype)
    model, feeds = one_node("QuantizeLinear", opset, attrs, inputs)
    with np.errstate(all="ignore"):
        assert_native_matches(model, feeds, reference=True, rtol=0)


_DQ_CASES = [
    (opset, xt, st, granularity, zero)
    for opset in (10, 13, 19, 21, 23, 25)
    for xt in (np.uint8, np.int8, np.uint16, np.int16, np.int32)
    if opset >= 21 or xt not in (np.uint16, np.int16)
    for st in (np.float32, np.float16) if st == np.float32 or opset >= 19
    for granularity in ("tensor", "axis", "block")
    if (granularity != "axis" or opset >= 13) and (granularity != "block" or opset >= 21)
    for zero in (True, False) if not (zero and xt == np.int32)]


@pytest.mark.parametrize("opset, x_type, scale_type, granularity, with_zero", _DQ_CASES,
                         ids=[f"opset{o}-{np.dtype(x).name}-{np.dtype(s).name}-{g}-"
                              f"{'zero' if z else 'nozero'}" for o, x, s, g, z in _DQ_CASES])
def test_dequantize_linear_matches_onnxruntime(opset, x_type, scale_type, granularity,
                                               with_zero):
    info = np.iinfo(x_type)
    x = RNG.integers(max(info.min, -2**20), min(info.max, 2**20), X.shape).astype(x_type)
    scale, zero, attrs = _params(granularity, scale_type, x_type if with_zero else None)
    scale = (scale * np.asarray(0.0731, scale_type)).astype(scale_type)
    model, feeds = one_node("DequantizeLinear", opset, attrs, [x, scale, zero])
    assert_native_matches(model, feeds, rtol=0)
    if opset >= 23 and scale_type == np.float32:
        model, feeds = one_node("DequantizeLinear", opset,
                                dict(attrs, output_dtype=TensorProto.FLOAT16), [x, scale, zero])
        assert_native_matches(model, feeds, rtol=0)


_NARROW_DQ = [(opset, name) for opset in (19, 21, 25) for name in _NARROW if _takes(opset, name)]


@pytest.mark.parametrize("opset, name", _NARROW_DQ, ids=[f"opset{o}-{n}" for o, n in _NARROW_DQ])
def test_dequantize_linear_from_narrow_types_matches_onnx_reference(opset, name):
    dtype = np.dtype(getattr(ml_dtypes, name))
    low, high = (-2, 2) if name.endswith("int2") else (-8, 8)
    values = RNG.standard_normal(40) * 20 if name.startswith("float8") else \
        RNG.integers(low, high, 40)
    x = (np.abs(values) if name.startswith("u") else values).astype(dtype)
    model, feeds = one_node("DequantizeLinear", opset, {}, [x, np.float32(0.37)])
    assert_native_matches(model, feeds, reference=True, rtol=0)


_DYNAMIC = {"normal": RNG.standard_normal((3, 7)) * 4 + 1, "zeros": np.zeros((3, 7)),
            "positive": np.abs(RNG.standard_normal((3, 7))) + 2,
            "negative": -np.abs(RNG.standard_normal((3, 7))) - 2, "empty": np.zeros((0, 3))}


@pytest.mark.parametrize("data", list(_DYNAMIC))
def test_dynamic_quantize_linear_matches_onnxruntime(data):
    """All zeros (or none) take a scale of 1, as in onnxruntime (the function body's divides
    0 by 0, onnx.reference's is 1/255)."""
    model, feeds = one_node("DynamicQuantizeLinear", 11, {}, [_DYNAMIC[data].astype(np.float32)],
                            n_outputs=3)
    assert_native_matches(model, feeds, rtol=0)


_SHAPES = [((4, 5), (5, 3)), ((2, 4, 5), (5, 3)), ((4, 5), (2, 5, 3)), ((0, 5), (5, 3))]


@pytest.mark.parametrize("a_type", [np.uint8, np.int8])
@pytest.mark.parametrize("b_type", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes", _SHAPES, ids=str)
@pytest.mark.parametrize("zero_points", ["none", "a", "both", "b per column"])
def test_matmul_integer_matches_onnxruntime(a_type, b_type, shapes, zero_points):
    a = RNG.integers(np.iinfo(a_type).min, np.iinfo(a_type).max, shapes[0]).astype(a_type)
    b = RNG.integers(np.iinfo(b_type).min, np.iinfo(b_type).max, shapes[1]).astype(b_type)
    a_zero = None if zero_points in ("none", "b per column") else a_type(7)
    # (per column of a batched B: onnxruntime wants one row of them per matrix)
    per_column = shapes[1][:-2] + (1,) * (len(shapes[1]) > 2) + shapes[1][-1:]
    b_zero = {"none": None, "a": None, "both": b_type(3),
              "b per column": RNG.integers(0, 9, per_column).astype(b_type)}[zero_points]
    model, feeds = one_node("MatMulInteger", 10, {}, [a, b, a_zero, b_zero])
    assert_native_matches(model, feeds)


@pytest.mark.parametrize("opset", [10, 21])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("depth", [1, 17, 290])
@pytest.mark.parametrize("per_column", [False, True])
def test_qlinear_matmul_matches_onnxruntime(opset, dtype, depth, per_column):
    """Requantized with the multiplier a_scale * b_scale / y_scale in float32, rounding half
    to even: exact agreement, on depths that fill the output range."""
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, (7, depth)).astype(dtype)
    b = RNG.integers(info.min, info.max, (depth, 9)).astype(dtype)
    b_scale = (RNG.random(9) * 0.05 + 1e-4).astype(np.float32) if per_column else \
        np.float32(0.013)
    b_zero = RNG.integers(0, 20, 9).astype(dtype) if per_column else dtype(3)
    y_scale = np.float32(0.02 * np.sqrt(depth) * 3)
    model, feeds = one_node("QLinearMatMul", opset, {},
                            [a, np.float32(0.02), dtype(5), b, b_scale, b_zero, y_scale,
                             dtype(11)])
    assert_native_matches(model, feeds)
