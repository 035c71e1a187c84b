"""Loop graphs several test modules run."""

import numpy as np
from onnx import helper

from cyloop.ir import CarriedInput, ConcatOutput, GraphBuilder, LastOutput

from .onnx_models import model, tensor

__all__ = ["cell_loop_feeds", "keep_going", "leaked", "lstm_loop", "nested", "rnn_loop_feeds",
           "rnn_loop_model"]


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


def lstm_loop(order="ifgo", swapped=False, axis=1, leak=None, sizes=None, hidden=4,
               gates=None, opset=13, sizes_as="constant", casts=False):
    """An ONNX Loop whose body spells the LSTM cell: Split into gates in `order`, operands of
    every Mul and Add swapped if `swapped`; `leak` also returns that intermediate value;
    `sizes` passes explicit split sizes, `sizes_as` a Constant node, an initializer or an
    attribute (opsets < 13); `gates` is the width of the gate axis (4 * hidden unless an
    uneven split is wanted); `casts`: h' and c' each cast to float32 (as jax2onnx does), with
    the emitted copy of h' read between the two Casts."""
    gates = 4 * hidden if gates is None else gates
    part = -(-gates // 4)
    state = hidden if gates == 4 * hidden else part
    node = helper.make_node

    def two(op, a, b, out):
        return node(op, [b, a] if swapped else [a, b], [out])

    split_inputs = ["pre"]
    nodes = [node("Gather", ["X", "i"], ["x_t"], axis=0),
             node("MatMul", ["x_t", "W"], ["xw"]),
             node("MatMul", ["h_in", "R"], ["hr"]),
             two("Add", "xw", "hr", "s"), two("Add", "s", "B", "pre")]
    split_attrs = {"axis": axis}
    initializers = []
    if sizes is not None and sizes_as == "attribute":
        split_attrs["split"] = list(sizes)
    elif sizes is not None:
        value = helper.make_tensor("sizes", 7, [4], list(sizes))
        if sizes_as == "constant":
            nodes.append(node("Constant", [], ["sizes"], value=value))
        else:
            initializers.append(value)
        split_inputs.append("sizes")
    if opset >= 18 and not sizes:
        split_attrs["num_outputs"] = 4
    nodes += [node("Split", split_inputs, [f"g_{r}" for r in order], **split_attrs),
              node("Sigmoid", ["g_f"], ["f_t"]), node("Sigmoid", ["g_i"], ["i_t"]),
              node("Sigmoid", ["g_o"], ["o_t"]), node("Tanh", ["g_g"], ["c_hat"]),
              two("Mul", "f_t", "c_in", "fc"), two("Mul", "i_t", "c_hat", "ic"),
              two("Add", "fc", "ic", "c_out"), node("Tanh", ["c_out"], ["tc"]),
              two("Mul", "o_t", "tc", "h_out"), node("Identity", ["h_out"], ["y"]),
              node("Identity", ["cond_in"], ["cond_out"])]
    if casts:  # (h_new, c_new made, then Cast(h_new), y read, then Cast(c_new))
        renamed = {"c_out": "c_new", "h_out": "h_new"}
        nodes = [node(n.op_type, [renamed.get(v, v) for v in n.input],
                      [renamed.get(v, v) for v in n.output],
                      **{a.name: helper.get_attribute_value(a) for a in n.attribute})
                 if n.op_type != "Identity" else n for n in nodes]
        y_at = next(k for k, n in enumerate(nodes) if list(n.output) == ["y"])
        nodes[y_at:y_at] = [node("Cast", ["h_new"], ["h_out"], to=1)]
        nodes.append(node("Cast", ["c_new"], ["c_out"], to=1))
    outputs = [tensor("cond_out", np.bool_, []), tensor("h_out", np.float32, None),
               tensor("c_out", np.float32, None), tensor("y", np.float32, None)]
    outer_outputs = ["h_last", "c_last", "hs"]
    leaked(leak, nodes, outputs, outer_outputs)
    body = helper.make_graph(
        nodes, "body", [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []),
                        tensor("h_in", np.float32, None), tensor("c_in", np.float32, None)],
        outputs, initializer=initializers)
    graph = helper.make_graph(
        [node("Loop", ["T", "", "h0", "c0"], outer_outputs, body=body)], "lstm",
        [tensor("T", np.int64, []), tensor("X", np.float32, ["T", "N", "F"]),
         tensor("W", np.float32, ["F", gates]), tensor("R", np.float32, [state, gates]),
         tensor("B", np.float32, [gates]), tensor("h0", np.float32, ["N", state]),
         tensor("c0", np.float32, ["N", state])],
        [tensor(name, np.float32, None) for name in outer_outputs])
    return model(graph, opset), state, gates


def leaked(value, nodes, outputs, outer_outputs):
    """Also return the body's `value` (if one is named) each iteration, as the loop's "leaks"."""
    if value:
        nodes.append(helper.make_node("Identity", [value], ["leaked"]))
        outputs.append(tensor("leaked", np.float32, None))
        outer_outputs.append("leaks")


def cell_loop_feeds(rng, state, gates, steps=7, batch=3, features=5, biases=("B",),
                    states=("h0", "c0")):
    """Feeds of `lstm_loop` and of test_fuse's other cell loops: X, W, R, each of `biases`
    [gates] and `states` [B, H]."""
    f = np.float32
    feeds = {"T": np.array(steps, np.int64),
             "X": rng.standard_normal((steps, batch, features)).astype(f),
             "W": (rng.standard_normal((features, gates)) * 0.6).astype(f),
             "R": (rng.standard_normal((state, gates)) * 0.6).astype(f)}
    feeds.update({name: rng.standard_normal(gates).astype(f) for name in biases})
    feeds.update({name: rng.standard_normal((batch, state)).astype(f) for name in states})
    return feeds
