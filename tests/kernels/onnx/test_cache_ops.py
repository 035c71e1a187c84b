"""TensorScatter and BitCast against onnxruntime under both drivers (onnx.reference for the types
onnxruntime's Python API cannot pass), and TensorScatter appending to a key/value cache carried
through a Loop, in place or not, against onnxruntime and the reference driver."""

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import cyloop
from tests.support.nodes import assert_native_matches, one_node

from ...support.onnx_models import model, tensor

DRIVERS = ["cython", "python"]
RNG = np.random.default_rng(24)


def _scatter_case(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(2, 5))
    shape = [int(n) for n in rng.integers(1, 5, rank)]
    axis = int(rng.integers(1, rank))
    capacity = shape[axis] + int(rng.integers(0, 4))
    cache_shape = shape[:axis] + [capacity] + shape[axis + 1:]
    mode = ["linear", "circular"][seed % 2]
    dtype = [np.float32, np.int64, np.float16, np.bool_][seed % 4]
    cache = rng.integers(0, 2, cache_shape).astype(dtype) if dtype == np.bool_ \
        else rng.standard_normal(cache_shape).astype(dtype)
    update = rng.integers(0, 2, shape).astype(dtype) if dtype == np.bool_ \
        else rng.standard_normal(shape).astype(dtype)
    high = capacity - shape[axis] + 1 if mode == "linear" else 2 * capacity
    indices = rng.integers(0, high, shape[0]).astype(np.int64) if seed % 3 else None
    attrs = {"mode": mode, "axis": axis - rank if seed % 5 == 0 else axis}
    if seed % 7 == 0 and axis == rank - 2:
        del attrs["axis"]
    return attrs, [cache, update, indices]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("seed", range(30))
def test_tensor_scatter_matches_onnxruntime(seed, driver):
    attrs, inputs = _scatter_case(seed)
    model_, feeds = one_node("TensorScatter", 24, attrs, inputs)
    assert_native_matches(model_, feeds, driver=driver)


def test_tensor_scatter_refuses_a_linear_write_past_the_cache():
    model_, feeds = one_node("TensorScatter", 24, {},
                             [np.zeros((2, 4, 3), np.float32), np.ones((2, 2, 3), np.float32),
                              np.array([1, 3], np.int64)])
    with pytest.raises(cyloop.CyloopError, match="overruns the cache's 4"):
        cyloop.load(model_).run(feeds)


def _kv_loop(steps, capacity, mode):
    """A Loop of `steps` iterations appending row [i, ...] of xs to a carried [2, capacity, 3]
    cache at position i (then i + 1 for the second batch element), and emitting it."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["xs", "i"], ["row"], axis=0),
         helper.make_node("Unsqueeze", ["row", "one"], ["update"]),
         helper.make_node("Add", ["i", "offsets"], ["at"]),
         helper.make_node("TensorScatter", ["cache", "update", "at"], ["cache_next"], mode=mode),
         helper.make_node("Identity", ["cond"], ["cond_next"]),
         helper.make_node("Identity", ["cache_next"], ["emitted"])], "body",
        [tensor("i", np.int64, []), tensor("cond", np.bool_, []),
         tensor("cache", np.float32, [2, capacity, 3])],
        [tensor("cond_next", np.bool_, []), tensor("cache_next", np.float32, [2, capacity, 3]),
         tensor("emitted", np.float32, [2, capacity, 3])],
        [helper.make_tensor("one", TensorProto.INT64, [1], [1]),
         helper.make_tensor("offsets", TensorProto.INT64, [2], [0, 1])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "cache0"], ["cache", "caches"], body=body)], "g",
        [tensor("M", np.int64, []), tensor("cache0", np.float32, [2, capacity, 3]),
         tensor("xs", np.float32, [steps, 2, 3])],
        [tensor("cache", np.float32, [2, capacity, 3]),
         tensor("caches", np.float32, [steps, 2, capacity, 3])])
    return model(graph, 24, ir_version=10)


@pytest.mark.parametrize("mode, steps", [("linear", 5), ("circular", 9)])
def test_tensor_scatter_in_a_loop_matches_onnxruntime_and_the_reference_driver(mode, steps):
    import onnxruntime as ort

    from ...support.drivers import run_three_ways

    onnx_model = _kv_loop(steps, 6, mode)
    feeds = {"M": np.array(steps, np.int64), "cache0": RNG.standard_normal((2, 6, 3)).astype(
        np.float32), "xs": RNG.standard_normal((steps, 2, 3)).astype(np.float32)}
    _, _, fast, reference, peer = run_three_ways(onnx_model, feeds)
    assert ort is not None
    for name in ("cache", "caches"):
        np.testing.assert_array_equal(fast[name], reference[name])
        np.testing.assert_array_equal(fast[name], peer[name])


# (from, to): onnxruntime's own types; then bool and ml_dtypes' narrow types, which only
# onnx.reference takes
BITCASTS = [(np.float32, TensorProto.INT32), (np.int32, TensorProto.FLOAT),
            (np.float32, TensorProto.UINT32), (np.float64, TensorProto.INT64),
            (np.uint64, TensorProto.DOUBLE), (np.float16, TensorProto.INT16),
            (np.int16, TensorProto.FLOAT16), (np.int8, TensorProto.UINT8),
            (np.int64, TensorProto.UINT64), (np.float32, TensorProto.FLOAT)]
NARROW = [(ml_dtypes.bfloat16, TensorProto.FLOAT16), (np.uint16, TensorProto.BFLOAT16),
          (np.uint8, TensorProto.FLOAT8E4M3FN), (ml_dtypes.float8_e5m2, TensorProto.INT8),
          (ml_dtypes.int4, TensorProto.UINT4), (ml_dtypes.uint4, TensorProto.FLOAT4E2M1),
          (np.float64, TensorProto.COMPLEX64), (np.uint8, TensorProto.BOOL),
          (np.bool_, TensorProto.INT8)]


def _bits_of(dtype, rng):
    """Values of `dtype` with every bit pattern likely (via random bytes; narrow types from
    their valid codes)."""
    dtype = np.dtype(dtype)
    if dtype.name in ("int4", "uint4", "float4_e2m1fn"):
        return rng.integers(0, 16, (3, 4)).astype(np.uint8).view(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, (3, 4)).astype(np.bool_)
    raw = rng.integers(0, 256, (3, 4 * dtype.itemsize)).astype(np.uint8)
    values = raw.view(dtype)
    if dtype.kind == "f":  # (NaNs compare unequal: finite values only)
        values[~np.isfinite(values.astype(np.float64))] = 0
    return values


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("source, to", BITCASTS, ids=[f"{np.dtype(s)}-{t}" for s, t in BITCASTS])
def test_bit_cast_matches_onnxruntime(source, to, driver):
    model_, feeds = one_node("BitCast", 26, {"to": to}, [_bits_of(source, RNG)])
    assert_native_matches(model_, feeds, driver=driver)


@pytest.mark.parametrize("source, to", NARROW, ids=[f"{np.dtype(s)}-{t}" for s, t in NARROW])
def test_bit_cast_of_narrow_types_matches_onnx_reference(source, to):
    model_, feeds = one_node("BitCast", 26, {"to": to}, [_bits_of(source, RNG)])
    expected = assert_native_matches(model_, feeds, reference=True)
    got = cyloop.load(model_).run(feeds)["out0"]
    np.testing.assert_array_equal(got.view(np.uint8), expected[0].view(np.uint8))  # (bit for bit)


@pytest.mark.parametrize("driver", DRIVERS)
def test_bit_cast_of_a_scalar_and_a_strided_view_matches_onnxruntime(driver):
    for x in (np.float32(1.5).reshape(()), np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]):
        model_, feeds = one_node("BitCast", 26, {"to": TensorProto.FLOAT}, [x])
        assert_native_matches(model_, feeds, driver=driver)
