"""Regenerate the embedded example models (needs the test extras: onnx and openvino).

    python -m cyloop.data.make_examples

- ``lstm_ti.xml`` / ``lstm_ti.bin``: an OpenVINO IR TensorIterator over an LSTMCell body
  (batch 2, 16 steps, input 8, hidden 16), emitting every h and the last h and c.
- ``loop_sequence.onnx``: an ONNX Loop (opset 13) that grows a sequence by SequenceInsert of a
  row computed from the iteration number, then returns the sequence and its concatenation.
- ``rnn_scan.onnx``: an ONNX Scan (opset 13) running an RNN cell, h = tanh(x_t W + h U + b),
  over X [time, batch, 8] from H0 [batch, 16], both dims symbolic (batches split and join);
  returns the last h and every h.
"""

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def lstm_ti(path, steps=16, batch=2, features=8, hidden=16, seed=5):
    import openvino as ov
    import openvino.opset8 as ops

    rng = np.random.default_rng(seed)
    f = np.float32
    x = ops.parameter([batch, steps, features], f, name="X")
    h0 = ops.parameter([batch, hidden], f, name="H0")
    c0 = ops.parameter([batch, hidden], f, name="C0")
    xt = ops.parameter([batch, 1, features], f, name="xt")
    h = ops.parameter([batch, hidden], f, name="h")
    c = ops.parameter([batch, hidden], f, name="c")
    axis = ops.constant(np.array([1], np.int64))
    weights = [ops.constant((rng.standard_normal(shape) * 0.3).astype(f)) for shape in
               ((4 * hidden, features), (4 * hidden, hidden), (4 * hidden,))]
    cell = ops.lstm_cell(ops.squeeze(xt, axis), h, c, *weights, hidden)
    res_h, res_c = ops.result(cell.output(0)), ops.result(cell.output(1))
    res_y = ops.result(ops.unsqueeze(cell.output(0), axis))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([res_h, res_c, res_y], [xt, h, c], "lstm_body"))
    ti.set_sliced_input(xt, x.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(h, h0.output(0), res_h.output(0))
    ti.set_merged_input(c, c0.output(0), res_c.output(0))
    outputs = [ti.get_concatenated_slices(res_y.output(0), 0, 1, 1, -1, 1),
               ti.get_iter_value(res_h.output(0), -1), ti.get_iter_value(res_c.output(0), -1)]
    for output, name in zip(outputs, ("all_h", "last_h", "last_c")):
        output.get_tensor().set_names({name})
    ov.save_model(ov.Model(outputs, [x, h0, c0], "lstm_ti"), path, compress_to_fp16=False)


def loop_sequence(path):
    import onnx
    from onnx import TensorProto, helper

    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["row", "i_f"], ["scaled"]),
         helper.make_node("SequenceInsert", ["seq_in", "scaled"], ["seq_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_out", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
         helper.make_node("Loop", ["trip_count", "", "empty"], ["rows"], body=body),
         helper.make_node("ConcatFromSequence", ["rows"], ["stacked"], axis=0, new_axis=1)],
        "loop_sequence",
        [helper.make_tensor_value_info("trip_count", TensorProto.INT64, []),
         helper.make_tensor_value_info("row", TensorProto.FLOAT, [4])],
        [helper.make_tensor_sequence_value_info("rows", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("stacked", TensorProto.FLOAT, ["N", 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                                ir_version=8), path)


def rnn_scan(path, features=8, hidden=16, seed=7):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    f = np.float32
    weights = {"W": rng.standard_normal((features, hidden)) / np.sqrt(features),
               "U": rng.standard_normal((hidden, hidden)) / np.sqrt(hidden),
               "B": rng.standard_normal(hidden) * 0.1}

    def tensor(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "W"], ["xw"]),
         helper.make_node("MatMul", ["h", "U"], ["hu"]),
         helper.make_node("Add", ["xw", "hu"], ["s"]),
         helper.make_node("Add", ["s", "B"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_next"]),
         helper.make_node("Identity", ["h_next"], ["h_out"])], "rnn_cell",
        [tensor("h", ["batch", hidden]), tensor("x_t", ["batch", features])],
        [tensor("h_next", ["batch", hidden]), tensor("h_out", ["batch", hidden])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["H0", "X"], ["h_last", "hs"], body=body,
                          num_scan_inputs=1)],
        "rnn_scan", [tensor("X", ["time", "batch", features]), tensor("H0", ["batch", hidden])],
        [tensor("h_last", ["batch", hidden]), tensor("hs", ["time", "batch", hidden])],
        initializer=[numpy_helper.from_array(value.astype(f), name)
                     for name, value in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                                ir_version=8), path)


if __name__ == "__main__":
    lstm_ti(os.path.join(HERE, "lstm_ti.xml"))
    loop_sequence(os.path.join(HERE, "loop_sequence.onnx"))
    rnn_scan(os.path.join(HERE, "rnn_scan.onnx"))
