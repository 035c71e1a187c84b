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
