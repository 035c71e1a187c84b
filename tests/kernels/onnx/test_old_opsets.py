"""The opset-1 (and Hardmax-11) versions of ops whose later versions took their attributes as
inputs or changed their semantics, under both drivers: against onnxruntime where it has the
version (Hardmax-1 and 11, Reshape-1), else against the version that replaced it run on the same
values by onnxruntime (Clip-6, Split-2, Tile-6, Upsample-7, GlobalLpPool-2), and Pad-1 against
onnx.reference's Pad-1 and onnxruntime's Pad-2."""

import numpy as np
import pytest

import cyloop
from tests.support.nodes import assert_native_matches, one_node, oracle

DRIVERS = ["cython", "python"]
RNG = np.random.default_rng(41)
X = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
TIES = RNG.integers(0, 3, (3, 4, 2)).astype(np.float32)  # (repeated maxima: the first wins)


HARDMAX_CASES = [(X, {}), (X, {"axis": 0}), (X, {"axis": 2}), (X, {"axis": 3}),
                 (X, {"axis": -1}), (X, {"axis": -4}), (TIES, {}),
                 (TIES, {"axis": 2}), (X[0, 0], {}), (np.zeros((0, 3), np.float32), {}),
                 (np.zeros((2, 0), np.float32), {"axis": 0})]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("opset", [1, 11])
@pytest.mark.parametrize("x, attrs", HARDMAX_CASES,
                         ids=[f"{x.shape}-{a}" for x, a in HARDMAX_CASES])
def test_hardmax_coerced_to_2d_matches_onnxruntime(x, attrs, opset, driver):
    model, feeds = one_node("Hardmax", opset, attrs, [x])
    assert_native_matches(model, feeds, driver=driver)


# (onnxruntime's Hardmax before 13 is float32 only, and onnx.reference's takes the last axis
# whatever the version: onnxruntime on the same values in float32)
@pytest.mark.parametrize("opset", [1, 11])
@pytest.mark.parametrize("dtype", [np.float16, np.float64], ids=str)
def test_hardmax_coerced_on_other_types_matches_onnxruntime_in_float32(dtype, opset):
    for x, attrs in [(X, {}), (TIES, {"axis": 2}), (X, {"axis": 0}), (X, {"axis": -2})]:
        x = x.astype(dtype)
        model, feeds = one_node("Hardmax", opset, attrs, [x])
        (expected,) = oracle(*one_node("Hardmax", opset, attrs, [x.astype(np.float32)]))
        got = cyloop.load(model).run(feeds)["out0"]
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.astype(np.float32), expected)


def test_hardmax_1_refuses_an_axis_past_the_rank():
    model, feeds = one_node("Hardmax", 11, {"axis": 4}, [X])
    assert_native_matches(model, feeds)  # (onnxruntime refuses it: so must cyloop)


RESHAPE_CASES = [[5, 24], [0, -1], [-1], [2, 0, 20], [120], [0, 3, 0, 5], [1, 2, 1, 60]]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=str)
@pytest.mark.parametrize("shape", RESHAPE_CASES, ids=str)
def test_reshape_1_matches_onnxruntime(shape, dtype, driver):
    model, feeds = one_node("Reshape", 1, {"shape": shape, "consumed_inputs": [0]},
                            [X.astype(dtype)])
    assert_native_matches(model, feeds, driver=driver)


def test_reshape_1_refuses_a_shape_of_another_size():
    model, feeds = one_node("Reshape", 1, {"shape": [7, -1]}, [X])
    assert_native_matches(model, feeds)


CLIP_BOUNDS = [{}, {"min": -0.5}, {"max": 0.25}, {"min": -1.0, "max": 1.0},
               {"min": 0.5, "max": 0.5}]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("bounds", CLIP_BOUNDS, ids=str)
def test_clip_1_matches_onnxruntimes_clip_6(bounds, driver):
    x = np.concatenate([X.reshape(-1), [np.inf, -np.inf, 0.0, np.nan]]).astype(np.float32)
    model, feeds = one_node("Clip", 1, {**bounds, "consumed_inputs": [0]}, [x])
    assert_native_matches(model, feeds, driver=driver,
                          oracle_model=one_node("Clip", 6, bounds, [x]))


# (onnxruntime's Clip-6 is float32 only; onnx.reference's bounds default to None, not the
# type's limits, which only infinities tell apart)
@pytest.mark.parametrize("dtype", [np.float64, np.float16], ids=str)
@pytest.mark.parametrize("bounds", CLIP_BOUNDS, ids=str)
def test_clip_1_on_other_types_matches_onnx_references_clip_6(bounds, dtype):
    model, feeds = one_node("Clip", 1, bounds, [X.astype(dtype)])
    assert_native_matches(model, feeds, reference=True,
                          oracle_model=one_node("Clip", 6, bounds, [X.astype(dtype)]))


def test_clip_1_refuses_a_min_above_its_max():
    model, _ = one_node("Clip", 1, {"min": 0.5, "max": -0.5}, [X])
    assert isinstance(oracle(*one_node("Clip", 6, {"min": 0.5, "max": -0.5}, [X])), Exception)
    with pytest.raises(cyloop.ModelError, match="Clip's min 0.5 is above its max -0.5"):
        cyloop.load(model)


PAD_CASES = [("constant", [0, 1, 2, 0, 0, 1, 0, 3], 0.0),
             ("constant", [1, 0, 0, 0, 2, 0, 0, 1], 1.5),
             ("edge", [0, 2, 1, 0, 0, 1, 0, 2]), ("reflect", [0, 2, 1, 3, 1, 0, 2, 1]),
             ("constant", [0] * 8, 0.0)]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("case", PAD_CASES, ids=[c[0] + str(c[1]) for c in PAD_CASES])
def test_pad_1_matches_onnx_reference_and_onnxruntimes_pad_2(case, dtype, driver):
    mode, paddings, *value = case
    attrs = {"mode": mode, **({"value": value[0]} if value else {})}
    x = X.astype(dtype)
    model, feeds = one_node("Pad", 1, {**attrs, "paddings": paddings}, [x])
    assert_native_matches(model, feeds, reference=True, driver=driver)
    assert_native_matches(model, feeds, driver=driver,
                          oracle_model=one_node("Pad", 2, {**attrs, "pads": paddings}, [x]))


def test_pad_1_in_float16_matches_onnx_reference():
    model, feeds = one_node("Pad", 1, {"paddings": [0, 1, 0, 2, 1, 0, 3, 0], "value": 2.0},
                            [X.astype(np.float16)])
    assert_native_matches(model, feeds, reference=True)


SPLIT_CASES = [(axis, sizes, n, how)
               for axis, sizes, n in [(0, [1, 1], 2), (1, [1, 2], 2), (2, [1, 1, 2], 3),
                                      (3, [5], 1), (-1, [2, 0, 3], 3)]
               for how in ("attribute", "input")] + [(1, None, 3, "equal"), (3, None, 2, "equal")]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=str)
@pytest.mark.parametrize("axis, sizes, n, how", SPLIT_CASES, ids=[str(c) for c in SPLIT_CASES])
def test_split_1_matches_onnxruntimes_split_2(axis, sizes, n, how, dtype, driver):
    x = X.astype(dtype)
    if how == "equal":  # (5 does not split in 2 equal parts, which both refuse)
        attrs, inputs = {"axis": axis}, [x]
    elif how == "attribute":
        attrs, inputs = {"axis": axis, "split": sizes}, [x]
    else:  # (an input of the data's type, as the schema has it)
        attrs, inputs = {"axis": axis}, [x, np.array(sizes, dtype)]
    model, feeds = one_node("Split", 1, attrs, inputs, n_outputs=n)
    oracle_attrs = {"axis": axis, **({"split": sizes} if sizes is not None else {})}
    assert_native_matches(model, feeds, driver=driver,
                          oracle_model=one_node("Split", 2, oracle_attrs, [x], n_outputs=n))


def test_split_1_refuses_sizes_that_do_not_add_up():
    model, feeds = one_node("Split", 1, {"axis": 1, "split": [1, 1]}, [X], n_outputs=2)
    assert_native_matches(model, feeds, oracle_model=one_node(
        "Split", 2, {"axis": 1, "split": [1, 1]}, [X], n_outputs=2))


TILE_CASES = [(2, 0), (3, 1), (1, 2), (2, -1), (0, 1), (4, 3)]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=str)
@pytest.mark.parametrize("index_type", [np.int64, "data"], ids=["int64", "data-type"])
@pytest.mark.parametrize("tiles, axis", TILE_CASES, ids=str)
def test_tile_1_matches_onnxruntimes_tile_6(tiles, axis, index_type, dtype, driver):
    x = X.astype(dtype)
    index_type = dtype if index_type == "data" else index_type
    model, feeds = one_node("Tile", 1, {}, [x, np.array(tiles, index_type),
                                            np.array(axis, index_type)])
    repeats = np.ones(x.ndim, np.int64)
    repeats[axis] = tiles
    assert_native_matches(model, feeds, driver=driver,
                          oracle_model=one_node("Tile", 6, {}, [x, repeats]))


UPSAMPLE_CASES = [("nearest", 2.0, 2.0), ("nearest", 1.0, 3.0), ("nearest", 1.5, 2.5),
                  ("bilinear", 2.0, 2.0), ("bilinear", 1.0, 1.5), ("bilinear", 3.0, 1.0)]


def _upsample_1(mode, height, width, x):
    attrs = {"mode": mode, "height_scale": height, "width_scale": width}
    new_mode = "linear" if mode == "bilinear" else mode
    scales = [1.0, 1.0, height, width]
    return (one_node("Upsample", 1, attrs, [x]),
            one_node("Upsample", 7, {"mode": new_mode, "scales": scales}, [x]),
            one_node("Upsample", 9, {"mode": new_mode}, [x, np.array(scales, np.float32)]))


# (onnxruntime interpolates integers in float32 and truncates: 30.999998 for the 31 a third of 30
# and two thirds of 31.5 make; by halves, float32 is exact)
UPSAMPLE_TYPED = [(dtype, *case) for dtype in (np.float32, np.int32, np.uint8)
                  for case in UPSAMPLE_CASES
                  if dtype == np.float32 or case[0] == "nearest" or case[1:] == (2.0, 2.0)]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("dtype, mode, height, width", UPSAMPLE_TYPED,
                         ids=[f"{np.dtype(c[0])}-{c[1:]}" for c in UPSAMPLE_TYPED])
def test_upsample_1_matches_onnxruntimes_upsample_7(dtype, mode, height, width, driver):
    (model, feeds), oracle_model, _ = _upsample_1(mode, height, width,
                                                  (np.abs(X) * 40).astype(dtype))
    assert_native_matches(model, feeds, driver=driver, rtol=1e-5, atol=1e-6,
                          oracle_model=oracle_model)


# (onnxruntime's Upsample-7 has none of these types; onnx.reference's is nearest by whole
# factors only, its scales an input whatever the version)
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.bool_, np.float16], ids=str)
@pytest.mark.parametrize("height, width", [(2.0, 2.0), (1.0, 3.0), (3.0, 1.0)], ids=str)
def test_upsample_1_nearest_on_other_types_matches_onnx_reference(height, width, dtype):
    (model, feeds), _, oracle_model = _upsample_1("nearest", height, width,
                                                  (X * 10).astype(dtype))
    assert_native_matches(model, feeds, reference=True, oracle_model=oracle_model)


def test_upsample_1_refuses_a_tensor_not_4d():
    (model, feeds), oracle_model, _ = _upsample_1("nearest", 2.0, 2.0, X[0])
    assert_native_matches(model, feeds, oracle_model=oracle_model)


LP_SHAPES = [(2, 3, 4, 5), (2, 3, 7), (1, 2, 2, 3, 2)]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("p", [None, 1, 2, 3])
@pytest.mark.parametrize("shape", LP_SHAPES, ids=str)
def test_global_lp_pool_1_matches_onnxruntimes_global_lp_pool_2(shape, p, driver):
    x = RNG.standard_normal(shape).astype(np.float32)
    model, feeds = one_node("GlobalLpPool", 1, {} if p is None else {"p": float(p)}, [x])
    oracle_model = one_node("GlobalLpPool", 2, {} if p is None else {"p": p}, [x])
    assert_native_matches(model, feeds, driver=driver, rtol=1e-5, oracle_model=oracle_model)


# (neither oracle has GlobalLpPool in float64: onnxruntime's float32 result on the same values)
@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape", LP_SHAPES, ids=str)
def test_global_lp_pool_1_in_float64_is_near_onnxruntimes_float32(shape, p):
    x = RNG.standard_normal(shape)
    model, feeds = one_node("GlobalLpPool", 1, {"p": float(p)}, [x])
    (expected,) = oracle(*one_node("GlobalLpPool", 2, {"p": p}, [x.astype(np.float32)]))
    got = cyloop.load(model).run(feeds)["out0"]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=1e-5)
