"""DeformConv against onnxruntime under both drivers: random offsets reaching past the input,
masks, biases, groups and offset groups, strides, dilations and pads; in float16, which
onnxruntime lacks, against onnx.reference."""

import numpy as np
import pytest

import cyloop
from tests.support.nodes import assert_native_matches, one_node


def _case(seed):
    rng = np.random.default_rng(seed)
    groups, offset_groups = [(1, 1), (2, 1), (1, 2), (2, 2), (1, 3)][seed % 5]
    channels = 6
    kernel = [int(k) for k in rng.integers(1, 4, 2)]
    strides = [int(s) for s in rng.integers(1, 3, 2)]
    dilations = [int(d) for d in rng.integers(1, 3, 2)]
    pads = [int(p) for p in rng.integers(0, 2, 4)]
    size = [int(v) for v in rng.integers(4, 7, 2)]
    out = [(n + pads[a] + pads[2 + a] - (k - 1) * d - 1) // s + 1
           for a, (n, k, d, s) in enumerate(zip(size, kernel, dilations, strides))]
    x = rng.standard_normal([2, channels] + size).astype(np.float32)
    w = rng.standard_normal([4, channels // groups] + kernel).astype(np.float32)
    offset = (rng.standard_normal([2, offset_groups * 2 * int(np.prod(kernel))] + out)
              * 2).astype(np.float32)
    offset.flat[::5] = np.round(offset.flat[::5])  # (taps landing on pixels exactly)
    inputs = [x, w, offset]
    if seed % 2:
        inputs.append(rng.standard_normal(4).astype(np.float32))
    if seed % 3 == 0:
        if len(inputs) == 3:
            inputs.append(None)
        inputs.append(rng.random([2, offset_groups * int(np.prod(kernel))] + out).astype(
            np.float32))
    attrs = {"group": groups, "offset_group": offset_groups, "strides": strides,
             "dilations": dilations, "pads": pads}
    if seed % 4 == 0:
        attrs["kernel_shape"] = kernel
    return attrs, inputs


@pytest.mark.parametrize("driver", ["cython", "python"])
@pytest.mark.parametrize("opset", [19, 22])
@pytest.mark.parametrize("seed", range(15))
def test_deform_conv_matches_onnxruntime(seed, opset, driver):
    attrs, inputs = _case(seed)
    model, feeds = one_node("DeformConv", opset, attrs, inputs)
    assert_native_matches(model, feeds, rtol=1e-4, atol=1e-4, driver=driver)


def test_deform_conv_with_zero_offsets_is_conv():
    attrs, inputs = _case(3)
    inputs[2] = np.zeros_like(inputs[2])
    model, feeds = one_node("DeformConv", 19, attrs, inputs[:3])
    conv, conv_feeds = one_node("Conv", 19, {k: v for k, v in attrs.items()
                                             if k != "offset_group"}, inputs[:2])
    expected = assert_native_matches(model, feeds, rtol=1e-4, atol=1e-4)
    got = cyloop.load(conv).run(conv_feeds)["out0"]
    np.testing.assert_allclose(got, expected[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("opset", [19, 22])
@pytest.mark.parametrize("dtype", [np.float64, np.float16], ids=str)
def test_deform_conv_in_other_float_types_matches_the_oracles(dtype, opset):
    attrs, inputs = _case(6)
    model, feeds = one_node("DeformConv", opset, attrs,
                            [None if v is None else v.astype(dtype) for v in inputs])
    if dtype == np.float64:
        assert_native_matches(model, feeds, rtol=1e-12, atol=1e-12)
    else:  # (onnxruntime has no float16 DeformConv)
        assert_native_matches(model, feeds, reference=True, rtol=2e-2, atol=2e-2)
