"""Loop graphs several test modules run."""

import numpy as np

from cyloop.ir import CarriedInput, ConcatOutput, GraphBuilder, LastOutput

from ..frontends.onnx_models import model, tensor

__all__ = ["keep_going", "nested", "rnn_loop_feeds", "rnn_loop_model"]


def keep_going(body, i, n, name):
    """The condition result of a loop of n iterations (i < n - 1); n None: always true."""
    if n is None:
        return body.node("Identity", body.const(np.bool_(True)), outputs=[name])
    return body.node("Less", i, body.const(np.int64(n - 1)), outputs=[name])


def nested(outer, inner, by_condition):
    """An outer loop of `outer` iterations, each running an inner loop of `inner` iterations
    that adds 1 to a carried count; the outer loop emits the count after each inner loop.
    `by_condition`: each loop stops by its condition result (its length is not known before it
    runs; None: it never stops), else by its trip count. Runs outer + outer * inner iterations.
    The inner loop's label names 'counted', the outer one's 'total'."""
    inner_body = GraphBuilder("inner_body")
    j = inner_body.input("j", np.int64, ())
    inner_body.input("j_cond", np.bool_, ())
    acc = inner_body.input("acc", np.int64, ())
    results = [inner_body.node("Add", acc, inner_body.const(np.int64(1)), outputs=["acc_next"])]
    if by_condition:
        results.insert(0, keep_going(inner_body, j, inner, "j_more"))
    inner_body.output(*results)

    outer_body = GraphBuilder("outer_body")
    i = outer_body.input("i", np.int64, ())
    outer_body.input("i_cond", np.bool_, ())
    count = outer_body.input("count", np.int64, ())
    outer_body.loop(inner_body.build(), inputs=[(count, CarriedInput(0, "acc", "acc_next"))],
                    outputs=[LastOutput("acc_next")],
                    trip_count=None if by_condition else inner, iteration_param="j",
                    cond_param="j_cond", cond_result="j_more" if by_condition else None,
                    output_names=["counted"])
    results = ["counted"]
    if by_condition:
        results.insert(0, keep_going(outer_body, i, outer, "i_more"))
    outer_body.output(*results)

    g = GraphBuilder()
    g.input("acc0", np.int64, ())
    g.loop(outer_body.build(), inputs=[("acc0", CarriedInput(0, "count", "counted"))],
           outputs=[LastOutput("counted"), ConcatOutput("counted")],
           trip_count=None if by_condition else outer, iteration_param="i", cond_param="i_cond",
           cond_result="i_more" if by_condition else None, output_names=["total", "totals"])
    g.output("total", "totals")
    return g.build(), {"acc0": np.array(0, np.int64)}


def rnn_loop_model():
    """An ONNX Loop over h = tanh(x_t W + h R + B) (no cell the fusion pass takes whole, so
    h @ R stays a MatMul node of the body)."""
    from onnx import helper

    node = helper.make_node
    body = helper.make_graph(
        [node("Gather", ["X", "i"], ["x_t"], axis=0), node("MatMul", ["x_t", "W"], ["xw"]),
         node("MatMul", ["h_in", "R"], ["hr"]), node("Add", ["xw", "hr"], ["s"]),
         node("Add", ["s", "B"], ["pre"]), node("Tanh", ["pre"], ["h_out"]),
         node("Identity", ["h_out"], ["y"]), node("Identity", ["cond_in"], ["cond_out"])],
        "body", [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []),
                 tensor("h_in", np.float32, None)],
        [tensor("cond_out", np.bool_, []), tensor("h_out", np.float32, None),
         tensor("y", np.float32, None)])
    graph = helper.make_graph(
        [node("Loop", ["T", "", "h0"], ["h_last", "hs"], body=body)], "rnn",
        [tensor("T", np.int64, []), tensor("X", np.float32, None),
         tensor("W", np.float32, None), tensor("R", np.float32, None),
         tensor("B", np.float32, None), tensor("h0", np.float32, None)],
        [tensor("h_last", np.float32, None), tensor("hs", np.float32, None)])
    return model(graph, 13)


def rnn_loop_feeds(rng, hidden, steps, batch, features):
    """Seeded feeds of `rnn_loop_model`."""
    return {"T": np.array(steps, np.int64),
            "X": rng.standard_normal((steps, batch, features)).astype(np.float32),
            "W": rng.standard_normal((features, hidden)).astype(np.float32),
            "R": rng.standard_normal((hidden, hidden)).astype(np.float32),
            "B": rng.standard_normal(hidden).astype(np.float32),
            "h0": rng.standard_normal((batch, hidden)).astype(np.float32)}
