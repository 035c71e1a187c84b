"""LpPool, MaxUnpool and Col2Im against onnxruntime under both drivers (onnx.reference for the
versions onnxruntime lacks), on random window geometries in 1-3 spatial axes."""

import numpy as np
import pytest

from tests.support.nodes import assert_native_matches, one_node, oracle

DRIVERS = ["cython", "python"]


def _window(rng, rank, dilations=True):
    kernel = [int(k) for k in rng.integers(1, 4, rank)]
    attrs = {"kernel_shape": kernel, "strides": [int(s) for s in rng.integers(1, 3, rank)],
             "pads": [int(rng.integers(0, k)) for k in kernel * 2]}
    if dilations:
        attrs["dilations"] = [int(d) for d in rng.integers(1, 3, rank)]
    return attrs


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("opset", [1, 2, 11, 18, 22])
@pytest.mark.parametrize("seed", range(8))
def test_lp_pool_matches_onnxruntime(seed, opset, driver):
    rng = np.random.default_rng(seed)
    rank = 1 + seed % 3 if opset >= 11 else 2  # (onnxruntime's LpPool-1 and 2 are 2-D only)
    attrs = _window(rng, rank, dilations=opset >= 18)
    if opset >= 18 and seed % 4 != 3:
        attrs["ceil_mode"] = seed % 2
    if seed % 4 == 3:
        del attrs["pads"]
        attrs["auto_pad"] = "SAME_UPPER" if seed % 8 == 3 else "VALID"
        attrs.pop("dilations", None)
        attrs["strides"] = [1] * rank
    attrs["p"] = float(1 + seed % 3) if opset == 1 else 1 + seed % 3
    x = rng.standard_normal([2, 3] + [int(n) for n in rng.integers(4, 8, rank)]).astype(
        np.float32)
    model, feeds = one_node("LpPool", opset, attrs, [x])
    # (onnxruntime has LpPool from 2 to 18: onnx.reference for 1; for 22, whose change is
    # bfloat16, LpPool-18 on onnxruntime)
    assert_native_matches(model, feeds, reference=opset == 1, rtol=1e-5, atol=1e-6,
                          driver=driver, oracle_opset=18 if opset == 22 else None)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("opset", [9, 11, 22])
@pytest.mark.parametrize("seed", range(8))
def test_max_unpool_of_max_pool_indices_matches_onnxruntime(seed, opset, driver):
    rng = np.random.default_rng(seed)
    rank = 1 + seed % 3
    attrs = _window(rng, rank, dilations=False)
    x = rng.standard_normal([2, 3] + [int(n) for n in rng.integers(4, 8, rank)]).astype(
        np.float32)
    pool, pool_feeds = one_node("MaxPool", 12, attrs, [x], n_outputs=2)
    values, indices = oracle(pool, pool_feeds)
    inputs = [values, indices]
    if seed % 2:  # the pooled-from shape, which the inferred one may miss by the rounding
        inputs.append(np.array(x.shape, np.int64))
    model, feeds = one_node("MaxUnpool", opset, attrs, inputs)
    # onnxruntime has no MaxUnpool-22, whose change is bfloat16: MaxUnpool-11. Given an
    # output_shape, onnxruntime reads I as flat indices into it, the specification (its own
    # expected output) and onnx.reference into the inferred shape, padded to it: the latter.
    assert_native_matches(model, feeds, driver=driver, reference=len(inputs) == 3,
                          oracle_opset=11 if opset == 22 and len(inputs) == 2 else None)


@pytest.mark.parametrize("dtype", [np.float64, np.float16], ids=str)
def test_max_unpool_of_any_indices_matches_onnxruntime(dtype):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 2, 3, 3)).astype(dtype)
    indices = rng.permutation(2 * 2 * 7 * 7)[:x.size].reshape(x.shape).astype(np.int64)
    model, feeds = one_node("MaxUnpool", 11, {"kernel_shape": [3, 3], "strides": [2, 2]},
                            [x, indices])
    # (onnxruntime's MaxUnpool is float32 only)
    assert_native_matches(model, feeds, reference=True)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("seed", range(24))
def test_col2im_matches_onnxruntime(seed, driver):
    rng = np.random.default_rng(seed)
    rank = [2, 2, 1, 3][seed % 4]
    attrs = _window(rng, rank)
    block = attrs.pop("kernel_shape")
    image = [int(n) for n in rng.integers(4, 8, rank)]
    counts = [(n + b + e - (k - 1) * d - 1) // s + 1
              for n, b, e, k, d, s in zip(image, attrs["pads"][:rank], attrs["pads"][rank:],
                                          block, attrs["dilations"], attrs["strides"])]
    columns = rng.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(counts)))).astype(
        np.float32)
    model, feeds = one_node("Col2Im", 18, attrs,
                            [columns, np.array(image, np.int64), np.array(block, np.int64)])
    # (onnxruntime's Col2Im is 2-D only: onnx.reference for the others)
    assert_native_matches(model, feeds, reference=rank != 2, rtol=1e-5, atol=1e-6,
                          driver=driver)
