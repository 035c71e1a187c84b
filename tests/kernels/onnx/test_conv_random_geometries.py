"""ConvTranspose, ConvInteger and QLinearConv (kernels/onnx/spatial.py) against onnxruntime, on
random geometries: groups, strides, dilations, pads, output_padding, output_shape, auto_pad;
1-3 spatial axes."""

import numpy as np
import pytest

from tests.support.nodes import assert_native_matches, one_node

RNG = np.random.default_rng(17)


def _transpose_case(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    groups = int(rng.integers(1, 3))
    channels, per_group = groups * int(rng.integers(1, 3)), int(rng.integers(1, 3))
    kernel = [int(k) for k in rng.integers(1, 4, rank)]
    strides = [int(s) for s in rng.integers(1, 4, rank)]
    dilations = [int(d) for d in rng.integers(1, 3, rank)]
    attrs = {"group": groups, "strides": strides, "dilations": dilations}
    if rng.random() < 0.5:
        attrs["kernel_shape"] = kernel
    form = ("pads", "output_shape", "same_upper", "same_lower", "valid")[seed % 5]
    spatial = [int(n) for n in rng.integers(2, 6, rank)]
    if form == "pads":
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel * 2]
        attrs["output_padding"] = [int(rng.integers(0, max(s, d))) if min(s, d) > 1 or s > 1
                                   else 0 for s, d in zip(strides, dilations)]
    elif form == "output_shape":
        full = [s * (n - 1) + (k - 1) * d + 1
                for n, k, s, d in zip(spatial, kernel, strides, dilations)]
        attrs["output_shape"] = [f - int(rng.integers(0, 2)) for f in full]
    else:
        attrs["auto_pad"] = form.upper()
    x = rng.standard_normal([2, channels] + spatial).astype(np.float32)
    w = rng.standard_normal([channels, per_group] + kernel).astype(np.float32)
    b = rng.standard_normal(per_group * groups).astype(np.float32) if seed % 3 else None
    return attrs, [x, w] + ([b] if b is not None else [])


TRANSPOSE = [_transpose_case(seed) for seed in range(60)]


@pytest.mark.parametrize("attrs, inputs", TRANSPOSE,
                         ids=[f"{inputs[0].ndim - 2}d-{k}" for k, (_, inputs) in
                              enumerate(TRANSPOSE)])
@pytest.mark.parametrize("opset", [1, 11, 22])
def test_conv_transpose_matches_onnxruntime(attrs, inputs, opset):
    model, feeds = one_node("ConvTranspose", opset, attrs, inputs)
    assert_native_matches(model, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, case", [(np.float16, 2), (np.float16, 3), (np.float16, 10),
                                         (np.float64, 2), (np.float64, 12)])
def test_conv_transpose_keeps_the_type(dtype, case):
    """onnxruntime has float16 (to opset 21) and no float64: onnx.reference is the float64
    oracle, on cases where it follows onnxruntime (it pads SAME to the input size times the
    stride even where that padding is negative; onnxruntime clamps it at 0, as cyloop)."""
    attrs, inputs = TRANSPOSE[case]
    model, feeds = one_node("ConvTranspose", 11, attrs, [v.astype(dtype) for v in inputs])
    assert_native_matches(model, feeds, reference=dtype == np.float64, rtol=1e-2, atol=1e-2)


def _integer_case(seed, per_channel=False):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 3))
    groups = int(rng.integers(1, 3))
    kernel = [int(k) for k in rng.integers(1, 4, rank)]
    attrs = {"group": groups, "strides": [int(s) for s in rng.integers(1, 3, rank)],
             "dilations": [int(d) for d in rng.integers(1, 3, rank)],
             "pads": [int(rng.integers(0, k)) for k in kernel * 2]}
    if seed % 4 == 3:
        del attrs["pads"]
        attrs["auto_pad"] = "SAME_UPPER"
        attrs["dilations"] = [1] * rank
    x_type = (np.uint8, np.int8)[seed % 2]
    # (onnxruntime has no int8 x with a uint8 w)
    w_type = (np.uint8, np.int8)[(seed // 2) % 2] if x_type == np.uint8 else np.int8
    channels, out = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
    info = np.iinfo(x_type), np.iinfo(w_type)
    x = rng.integers(info[0].min, info[0].max, [2, channels] + [5] * rank).astype(x_type)
    w = rng.integers(info[1].min, info[1].max, [out, channels // groups] + kernel).astype(w_type)
    x_zero = x_type(rng.integers(0, 20))
    w_zero = rng.integers(0, 20, out if per_channel else ()).astype(w_type)
    return attrs, x, w, x_zero, w_zero


INTEGER = [_integer_case(seed) for seed in range(24)]


@pytest.mark.parametrize("attrs, x, w, x_zero, w_zero", INTEGER,
                         ids=[f"{c[1].dtype}-{c[2].dtype}-{k}" for k, c in enumerate(INTEGER)])
def test_conv_integer_matches_onnxruntime(attrs, x, w, x_zero, w_zero):
    model, feeds = one_node("ConvInteger", 10, attrs, [x, w, x_zero, w_zero])
    assert_native_matches(model, feeds)


@pytest.mark.parametrize("seed", [0, 2, 3, 4])
def test_conv_integer_per_channel_matches_onnx_reference(seed):
    """(onnxruntime takes one w zero point only; onnx.reference's fails on one spatial axis,
    so these cases have two.)"""
    attrs, x, w, x_zero, w_zero = _integer_case(seed, per_channel=True)
    model, feeds = one_node("ConvInteger", 10, attrs, [x, w, x_zero, w_zero])
    assert_native_matches(model, feeds, reference=True)


def test_conv_integer_without_zero_points_matches_onnxruntime():
    attrs, x, w, _, _ = INTEGER[0]
    model, feeds = one_node("ConvInteger", 10, attrs, [x, w])
    assert_native_matches(model, feeds)


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("opset", [10])
def test_qlinear_conv_matches_onnxruntime(seed, opset):
    attrs, x, w, x_zero, w_zero = _integer_case(seed)
    rng = np.random.default_rng(seed)
    out = w.shape[0]
    if w.dtype == np.uint8:  # (onnxruntime: a uint8 w takes one zero point)
        w_zero = np.asarray(w_zero).reshape(-1)[:1].reshape(())
    else:  # (and an int8 w's zero points are 0)
        w_zero = np.zeros(np.shape(w_zero), np.int8)
    w_scale = np.float32(0.02) if seed % 2 else (rng.random(out) * 0.05 + 0.01).astype(
        np.float32)
    y_zero = x.dtype.type(rng.integers(0, 30))
    inputs = [x, np.float32(0.05), x_zero, w, w_scale, w_zero, np.float32(0.7), y_zero]
    if seed % 3:
        inputs.append(rng.integers(-2000, 2000, out).astype(np.int32))
    model, feeds = one_node("QLinearConv", opset, attrs, inputs)
    assert_native_matches(model, feeds)
