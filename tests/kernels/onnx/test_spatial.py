"""Conv and the pools on random window geometries (kernel, strides, dilations, pads, auto_pad,
ceil_mode, count_include_pad, groups; 1-3 spatial axes), against onnxruntime (onnx.reference's
pools fail or disagree with the spec on several of these: SAME padding with strides, ceil_mode)."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import cyloop

AUTO_PADS = ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]


def _geometry(rng, rank, ceil_allowed):
    kernel = [int(k) for k in rng.integers(1, 4, rank)]
    attrs = {"kernel_shape": kernel,
             "strides": [int(s) for s in rng.integers(1, 4, rank)],
             "dilations": [int(d) for d in rng.integers(1, 3, rank)]}
    auto_pad = AUTO_PADS[rng.integers(len(AUTO_PADS))]
    if auto_pad == "NOTSET":
        # Pads smaller than the kernel's extent, as the spec requires.
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel * 2]
        if ceil_allowed:
            attrs["ceil_mode"] = int(rng.integers(2))
    else:
        attrs["auto_pad"] = auto_pad
        if auto_pad != "VALID":
            # onnxruntime's output size for SAME with dilations is not the spec's ceil(in /
            # stride) (nor its own shape inference's); onnx.reference ignores the dilations.
            # Where the stride outruns the kernel the spec's total padding is negative:
            # onnxruntime then fails or shifts the windows; cyloop pads nothing (TensorFlow's
            # SAME). Neither is tested against it.
            attrs["dilations"] = [1] * rank
            attrs["strides"] = [min(s, k) for s, k in zip(attrs["strides"], kernel)]
    return attrs


def _run_both(node, inputs, opset):
    names = [f"i{k}" for k in range(len(inputs))]
    outputs = list(node.output)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in zip(names, inputs)],
        [helper.make_tensor_value_info(o, TensorProto.INT64 if o == "indices" else
                                       TensorProto.FLOAT, None) for o in outputs])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = dict(zip(names, inputs))
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    got = cyloop.load(onnx_model).run(feeds)
    for name, want in zip(outputs, expected):
        assert got[name].shape == want.shape, (name, node)
        assert got[name].dtype == want.dtype, (name, node)
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5, err_msg=str(node))


@pytest.mark.parametrize("seed", range(40))
def test_pools_match_the_reference(seed):
    rng = np.random.default_rng(seed)
    rank = 1 + seed % 3
    attrs = _geometry(rng, rank, ceil_allowed=True)
    x = rng.standard_normal([2, 3] + [int(n) for n in rng.integers(5, 10, rank)]).astype(
        np.float32)
    _run_both(helper.make_node("MaxPool", ["i0"], ["y", "indices"] if rank <= 3 else ["y"],
                               storage_order=int(rng.integers(2)) if rank == 2 else 0, **attrs),
              [x], 22)
    average = {k: v for k, v in attrs.items() if k != "dilations" or seed % 2}
    _run_both(helper.make_node("AveragePool", ["i0"], ["y"],
                               count_include_pad=int(rng.integers(2)), **average), [x], 22)


@pytest.mark.parametrize("seed", range(30))
def test_conv_matches_the_reference(seed):
    rng = np.random.default_rng(100 + seed)
    rank = 1 + seed % 3
    attrs = _geometry(rng, rank, ceil_allowed=False)
    groups = [1, 2, 3][seed % 3]
    x = rng.standard_normal([2, 6] + [int(n) for n in rng.integers(5, 9, rank)]).astype(
        np.float32)
    w = rng.standard_normal([groups * 2, 6 // groups] + attrs["kernel_shape"]).astype(np.float32)
    inputs = [x, w] + ([rng.standard_normal(groups * 2).astype(np.float32)] if seed % 2 else [])
    node = helper.make_node("Conv", [f"i{k}" for k in range(len(inputs))], ["y"], group=groups,
                            **attrs)
    _run_both(node, inputs, 22)


def test_conv_refuses_channels_that_do_not_split_into_groups():
    x = np.zeros((1, 5, 4), np.float32)
    w = np.zeros((2, 2, 1), np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=2)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
        helper.make_tensor_value_info("w", TensorProto.FLOAT, w.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = cyloop.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]))
    with pytest.raises(cyloop.CyloopError, match="group=2.*do not divide"):
        model.run({"x": x, "w": w})
