"""ONNX models built in the tests with onnx.helper (no files), shared by the ONNX test modules."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

T = {np.dtype(k): v for k, v in {
    np.float16: TensorProto.FLOAT16, np.float32: TensorProto.FLOAT,
    np.float64: TensorProto.DOUBLE, np.int32: TensorProto.INT32, np.int64: TensorProto.INT64,
    np.bool_: TensorProto.BOOL}.items()}


def tensor(name, dtype, shape):
    return helper.make_tensor_value_info(name, T[np.dtype(dtype)], shape)


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.asarray(value), name))


# The domain of the op `fallback_node` makes, which cyloop has no kernels in.
FALLBACK_OPSET = helper.make_opsetid("ai.onnx.preview.training", 1)
_MOMENTUM = {"alpha": 0.5, "beta": 0.25, "norm_coefficient": 0.125, "mode": "standard"}


def fallback_node(x, y):
    """Nodes of an op cyloop runs on onnx.reference's kernels (ai.onnx.preview.training's
    Momentum, in `FALLBACK_OPSET`: no native kernel, no function body, no onnxruntime kernel
    outside its training builds): float32 x -> y, one momentum step with x as the weights,
    gradient and velocity (`fallback_result`)."""
    rate, step = f"{y}_rate", f"{y}_step"
    return [const(rate, np.float32(0.5)), const(step, np.int64(1)),
            helper.make_node("Momentum", [rate, step, x, x, x], [y, f"{y}_velocity"],
                             domain=FALLBACK_OPSET.domain, **_MOMENTUM)]


def fallback_result(x):
    """What `fallback_node` computes of x: ONNX's momentum step, in numpy."""
    velocity = _MOMENTUM["alpha"] * x + _MOMENTUM["beta"] * (_MOMENTUM["norm_coefficient"] * x + x)
    return x - np.float32(0.5) * velocity


def model(graph, opset, ir_version=8, more_opsets=()):
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *more_opsets],
                             ir_version=ir_version)


def loop_model(m_given, cond_given, stop_at, dtype=np.float32, shape=(2, 3), opset=13):
    """v <- v (+) f(iteration); emits y = v_next (+) v each iteration; the body's condition turns
    false once iteration == stop_at (None: it passes cond_in through)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        update = [helper.make_node("Not", ["v_in"], ["v_out"]),
                  helper.make_node("And", ["v_out", "v_in"], ["y"])]
    else:
        update = [helper.make_node("Cast", ["iter"], ["iter_t"], to=T[dtype]),
                  helper.make_node("Add", ["v_in", "iter_t"], ["v_out"]),
                  helper.make_node("Add", ["v_out", "v_in"], ["y"])]
    if stop_at is None:
        cond = [helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    else:
        cond = [const("stop", np.int64(stop_at)),
                helper.make_node("Less", ["iter", "stop"], ["cond_out"])]
    body = helper.make_graph(
        update + cond, "body",
        [tensor("iter", np.int64, []), tensor("cond_in", np.bool_, []),
         tensor("v_in", dtype, list(shape))],
        [tensor("cond_out", np.bool_, []), tensor("v_out", dtype, list(shape)),
         tensor("y", dtype, list(shape))])
    inputs = []
    if m_given:
        inputs.append(tensor("M", np.int64, []))
    if cond_given:
        inputs.append(tensor("cond", np.bool_, []))
    inputs.append(tensor("v0", dtype, list(shape)))
    node = helper.make_node("Loop", ["M" if m_given else "", "cond" if cond_given else "", "v0"],
                            ["v_final", "ys"], body=body)
    graph = helper.make_graph([node], "loop", inputs,
                              [tensor("v_final", dtype, list(shape)),
                               tensor("ys", dtype, ["N", *shape])])
    return model(graph, opset)


def scan_model(shape, in_axis, in_reverse, out_axis, out_reverse, opset=16):
    """s <- s + x_t; emits y = 2 s_next; x sliced along in_axis, y stacked along out_axis."""
    part = [d for k, d in enumerate(shape) if k != in_axis % len(shape)]
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Add", ["s_out", "s_out"], ["y"])], "body",
        [tensor("s_in", np.float32, part), tensor("x_t", np.float32, part)],
        [tensor("s_out", np.float32, part), tensor("y", np.float32, part)])
    node = helper.make_node("Scan", ["s0", "x"], ["s_final", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[in_axis], scan_input_directions=[int(in_reverse)],
                            scan_output_axes=[out_axis],
                            scan_output_directions=[int(out_reverse)])
    graph = helper.make_graph([node], "scan", [tensor("s0", np.float32, part),
                                               tensor("x", np.float32, list(shape))],
                              [tensor("s_final", np.float32, part),
                               helper.make_tensor_value_info("ys", TensorProto.FLOAT, None)])
    return model(graph, opset)


def lstm_loop_model(hidden=8, opset=13):
    """An LSTM spelled as an ONNX Loop: Gather(X, i), MatMul, Split, Sigmoid, Tanh, Mul."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["X", "i"], ["x_t"], axis=0),
         helper.make_node("MatMul", ["x_t", "W"], ["xw"]),
         helper.make_node("MatMul", ["h_in", "R"], ["hr"]),
         helper.make_node("Add", ["xw", "hr"], ["pre"]),
         helper.make_node("Add", ["pre", "B"], ["gates"]),
         helper.make_node("Split", ["gates"], ["gi", "gf", "gg", "go"], axis=1),
         helper.make_node("Sigmoid", ["gi"], ["i_t"]),
         helper.make_node("Sigmoid", ["gf"], ["f_t"]),
         helper.make_node("Tanh", ["gg"], ["g_t"]),
         helper.make_node("Sigmoid", ["go"], ["o_t"]),
         helper.make_node("Mul", ["f_t", "c_in"], ["fc"]),
         helper.make_node("Mul", ["i_t", "g_t"], ["ig"]),
         helper.make_node("Add", ["fc", "ig"], ["c_out"]),
         helper.make_node("Tanh", ["c_out"], ["c_act"]),
         helper.make_node("Mul", ["o_t", "c_act"], ["h_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["h_out"], ["y"])], "lstm_body",
        [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []),
         tensor("h_in", np.float32, ["B", hidden]), tensor("c_in", np.float32, ["B", hidden])],
        [tensor("cond_out", np.bool_, []), tensor("h_out", np.float32, ["B", hidden]),
         tensor("c_out", np.float32, ["B", hidden]), tensor("y", np.float32, ["B", hidden])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["T", "", "h0", "c0"], ["h_last", "c_last", "hs"], body=body)],
        "lstm_loop",
        [tensor("T", np.int64, []), tensor("X", np.float32, ["T", "B", "I"]),
         tensor("W", np.float32, ["I", 4 * hidden]), tensor("R", np.float32, [hidden, 4 * hidden]),
         tensor("B", np.float32, [4 * hidden]), tensor("h0", np.float32, ["B", hidden]),
         tensor("c0", np.float32, ["B", hidden])],
        [tensor("h_last", np.float32, ["B", hidden]), tensor("c_last", np.float32, ["B", hidden]),
         tensor("hs", np.float32, ["T", "B", hidden])])
    return model(graph, opset)


def if_in_loop_model():
    """A Loop over M whose body picks, by the iteration's parity, v * 0.5 or v + x (an If whose
    branches capture the body's values and the outer x), emitting each v; then an If on the
    final v's sum that returns it negated or as is."""
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT

    def branch(name, node):
        return helper.make_graph([node], name, [],
                                 [helper.make_tensor_value_info(node.output[0], f, None)])

    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two"], ["parity"]),
         helper.make_node("Equal", ["parity", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["v_out"],
                          then_branch=branch("halve", helper.make_node("Mul", ["v_in", "half"],
                                                                       ["halved"])),
                          else_branch=branch("add", helper.make_node("Add", ["v_in", "x"],
                                                                     ["added"]))),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["v_out"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", f, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", f, [2, 3]),
         helper.make_tensor_value_info("scan", f, [2, 3])],
        [helper.make_tensor("two", TensorProto.INT64, [], [2]),
         helper.make_tensor("zero", TensorProto.INT64, [], [0]),
         helper.make_tensor("half", f, [], [0.5])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "v0"], ["v_last", "vs"], body=body),
         helper.make_node("ReduceSum", ["v_last"], ["total"], keepdims=0),
         helper.make_node("Greater", ["total", "zero_f"], ["positive"]),
         helper.make_node("If", ["positive"], ["y"],
                          then_branch=branch("negate", helper.make_node("Neg", ["v_last"],
                                                                        ["negated"])),
                          else_branch=branch("keep", helper.make_node("Identity", ["v_last"],
                                                                      ["kept"])))],
        "if_in_loop",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("v0", f, [2, 3]),
         helper.make_tensor_value_info("x", f, [2, 3])],
        [helper.make_tensor_value_info("y", f, [2, 3]),
         helper.make_tensor_value_info("vs", f, [None, 2, 3])],
        [helper.make_tensor("zero_f", f, [], [0.0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
