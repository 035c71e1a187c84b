"""Seeded, cached model builders shared by the benchmarks.

Append-only: never change what an existing builder returns, or results stop being comparable
across commits; add a new builder (or a new parameter value) instead.
"""

import functools

import numpy as np

import cyloop


@functools.cache
def counter_graph(iterations):
    """W1: a tiny body, ``acc = acc + 1`` carried for `iterations` steps (per-iteration overhead).

    Returns (graph, feeds)."""
    body = cyloop.GraphBuilder("counter_body")
    acc = body.input("acc", np.float32, ())
    body.output(body.node("Add", acc, body.const(np.float32(1)), outputs=["acc_next"]))
    g = cyloop.GraphBuilder("counter")
    acc0 = g.input("acc0", np.float32, ())
    g.loop(body.build(), inputs=[(acc0, cyloop.CarriedInput(0, "acc", "acc_next"))],
           outputs=[cyloop.LastOutput("acc_next")], trip_count=iterations, name="counter_loop",
           output_names=["acc"])
    g.output("acc")
    return g.build(), {"acc0": np.zeros((), np.float32)}


def counter_numpy(iterations, acc0):
    """The same loop written by hand in numpy: the floor for per-iteration overhead."""
    acc = acc0
    one = np.float32(1)
    for _ in range(iterations):
        acc = np.add(acc, one)
    return acc


@functools.cache
def sequence_insert_model():
    """W6: an ONNX Loop carrying a sequence grown by SequenceInsert of a [64] f32 tensor (N from
    the input ``N``), then ConcatFromSequence. Returns the ModelProto."""
    from onnx import TensorProto, helper

    def tensor(name, elem, shape):
        return helper.make_tensor_value_info(name, elem, shape)

    body = helper.make_graph(
        [helper.make_node("Cast", ["iter"], ["it_f"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["row", "it_f"], ["item"]),
         helper.make_node("SequenceInsert", ["seq_in", "item"], ["seq_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("iter", TensorProto.INT64, []), tensor("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_in", TensorProto.FLOAT, None)],
        [tensor("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_out", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
         helper.make_node("Loop", ["N", "", "empty"], ["seq"], body=body),
         helper.make_node("ConcatFromSequence", ["seq"], ["joined"], axis=0, new_axis=1)],
        "sequence_insert", [tensor("N", TensorProto.INT64, []),
                            tensor("row", TensorProto.FLOAT, [64])],
        [tensor("joined", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@functools.cache
def lstm_cell_ti_ir(directory, steps=200, batch=8, features=64, hidden=128):
    """W4: a TensorIterator over an LSTMCell body (seq 200, batch 8, input 64, hidden 128),
    saved as IR under `directory`. Returns (xml path, feeds, openvino Model)."""
    import openvino as ov
    import openvino.opset8 as ops

    rng = np.random.default_rng(4)
    f = np.float32
    x = ops.parameter([batch, steps, features], f, name="X")
    h0 = ops.parameter([batch, hidden], f, name="H0")
    c0 = ops.parameter([batch, hidden], f, name="C0")
    xt = ops.parameter([batch, 1, features], f, name="xt")
    h = ops.parameter([batch, hidden], f, name="h")
    c = ops.parameter([batch, hidden], f, name="c")
    squeezed = ops.squeeze(xt, ops.constant(np.array([1], np.int64)))
    weights = [ops.constant((rng.standard_normal(shape) * 0.1).astype(f)) for shape in
               ((4 * hidden, features), (4 * hidden, hidden), (4 * hidden,))]
    cell = ops.lstm_cell(squeezed, h, c, *weights, hidden)
    res_h, res_c = ops.result(cell.output(0)), ops.result(cell.output(1))
    res_y = ops.result(ops.unsqueeze(cell.output(0), ops.constant(np.array([1], np.int64))))
    body = ov.Model([res_h, res_c, res_y], [xt, h, c], "lstm_body")
    ti = ops.tensor_iterator()
    ti.set_body(body)
    ti.set_sliced_input(xt, x.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(h, h0.output(0), res_h.output(0))
    ti.set_merged_input(c, c0.output(0), res_c.output(0))
    outputs = [ti.get_concatenated_slices(res_y.output(0), 0, 1, 1, -1, 1),
               ti.get_iter_value(res_h.output(0), -1), ti.get_iter_value(res_c.output(0), -1)]
    model = ov.Model(outputs, [x, h0, c0], "lstm_ti")
    path = f"{directory}/lstm_ti.xml"
    ov.save_model(model, path, compress_to_fp16=False)
    feeds = {"X": rng.standard_normal((batch, steps, features)).astype(f),
             "H0": np.zeros((batch, hidden), f), "C0": np.zeros((batch, hidden), f)}
    return path, feeds, model
