"""Seeded, cached model builders shared by the benchmarks.

Append-only: never change what an existing builder returns, or results stop being comparable
across commits; add a new builder (or a new parameter value) instead.
"""

import functools
import time

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


# -- the workloads of the side-by-side comparison (W1-W6), as ONNX models and OpenVINO IRs ------
# Each returns (model, feeds, numpy_loop) where numpy_loop(feeds) -> list of expected outputs.

def _onnx_helpers():
    from onnx import TensorProto, helper

    def tensor(name, shape, elem=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, elem, shape)

    def model(graph, opset=13):
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                 ir_version=8)

    return TensorProto, helper, tensor, model


@functools.cache
def w1_counter_onnx(iterations=10_000):
    """W1 as ONNX: Loop(M) with acc = acc + 1 on a float scalar."""
    TensorProto, helper, tensor, model = _onnx_helpers()
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "one"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("i", [], TensorProto.INT64), tensor("cond_in", [], TensorProto.BOOL),
         tensor("acc_in", [])],
        [tensor("cond_out", [], TensorProto.BOOL), tensor("acc_out", [])],
        initializer=[helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "acc0"], ["acc"], body=body)], "w1",
        [tensor("M", [], TensorProto.INT64), tensor("acc0", [])], [tensor("acc", [])])
    feeds = {"M": np.array(iterations, np.int64), "acc0": np.array(0, np.float32)}

    def numpy_loop(feeds):
        acc, one = feeds["acc0"], np.float32(1)
        for _ in range(int(feeds["M"])):
            acc = acc + one
        return [acc]

    return model(graph), feeds, numpy_loop


def _rnn_weights(steps, batch, features, hidden, seed):
    rng = np.random.default_rng(seed)
    f = np.float32
    return (rng.standard_normal((steps, batch, features)).astype(f),
            (rng.standard_normal((features, hidden)) / np.sqrt(features)).astype(f),
            (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(f),
            (rng.standard_normal(hidden) * 0.1).astype(f))


def _rnn_numpy(feeds):
    x, w, u, b = feeds["X"], feeds["W"], feeds["U"], feeds["B"]
    h, hs = feeds["H0"], np.empty((x.shape[0], *feeds["H0"].shape), np.float32)
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ w + h @ u + b)
        hs[t] = h
    return [h, hs]


def _rnn_feeds(steps, batch, features, hidden, seed):
    x, w, u, b = _rnn_weights(steps, batch, features, hidden, seed)
    return {"X": x, "W": w, "U": u, "B": b, "H0": np.zeros((batch, hidden), np.float32)}


@functools.cache
def w2_rnn_loop_onnx(steps=1000, batch=16, features=128, hidden=256, seed=2):
    """W2 as an ONNX Loop reading x_t with Gather(X, i): h = tanh(x_t W + h U + b)."""
    TensorProto, helper, tensor, model = _onnx_helpers()
    body = helper.make_graph(
        [helper.make_node("Gather", ["X", "i"], ["x_t"], axis=0),
         helper.make_node("MatMul", ["x_t", "W"], ["xw"]),
         helper.make_node("MatMul", ["h_in", "U"], ["hu"]),
         helper.make_node("Add", ["xw", "hu"], ["s"]),
         helper.make_node("Add", ["s", "B"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]),
         helper.make_node("Identity", ["h_out"], ["y"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("i", [], TensorProto.INT64), tensor("cond_in", [], TensorProto.BOOL),
         tensor("h_in", [batch, hidden])],
        [tensor("cond_out", [], TensorProto.BOOL), tensor("h_out", [batch, hidden]),
         tensor("y", [batch, hidden])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["T", "", "H0"], ["h_last", "hs"], body=body)], "w2_loop",
        [tensor("T", [], TensorProto.INT64), tensor("X", [steps, batch, features]),
         tensor("W", [features, hidden]), tensor("U", [hidden, hidden]), tensor("B", [hidden]),
         tensor("H0", [batch, hidden])],
        [tensor("h_last", [batch, hidden]), tensor("hs", [steps, batch, hidden])])
    feeds = {"T": np.array(steps, np.int64), **_rnn_feeds(steps, batch, features, hidden, seed)}
    return model(graph), feeds, _rnn_numpy


@functools.cache
def w2_rnn_scan_onnx(steps=1000, batch=16, features=128, hidden=256, seed=2):
    """W2 as an ONNX Scan over X's axis 0 (W, U, B read from the outer scope)."""
    _TensorProto, helper, tensor, model = _onnx_helpers()
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "W"], ["xw"]),
         helper.make_node("MatMul", ["h_in", "U"], ["hu"]),
         helper.make_node("Add", ["xw", "hu"], ["s"]),
         helper.make_node("Add", ["s", "B"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]),
         helper.make_node("Identity", ["h_out"], ["y"])], "body",
        [tensor("h_in", [batch, hidden]), tensor("x_t", [batch, features])],
        [tensor("h_out", [batch, hidden]), tensor("y", [batch, hidden])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["H0", "X"], ["h_last", "hs"], body=body, num_scan_inputs=1)],
        "w2_scan",
        [tensor("X", [steps, batch, features]), tensor("W", [features, hidden]),
         tensor("U", [hidden, hidden]), tensor("B", [hidden]), tensor("H0", [batch, hidden])],
        [tensor("h_last", [batch, hidden]), tensor("hs", [steps, batch, hidden])])
    return model(graph, 16), _rnn_feeds(steps, batch, features, hidden, seed), _rnn_numpy


@functools.cache
def w2_rnn_ti_ir(directory, steps=1000, batch=16, features=128, hidden=256, seed=2):
    """W2 as an OpenVINO TensorIterator IR (weights as body constants). Returns (xml path,
    feeds, numpy_loop)."""
    import openvino as ov
    import openvino.opset8 as ops

    feeds = _rnn_feeds(steps, batch, features, hidden, seed)
    f = np.float32
    x = ops.parameter([steps, batch, features], f, name="X")
    h0 = ops.parameter([batch, hidden], f, name="H0")
    xt = ops.parameter([1, batch, features], f, name="xt")
    h = ops.parameter([batch, hidden], f, name="h")
    x2 = ops.squeeze(xt, ops.constant(np.array([0], np.int64)))
    pre = ops.add(ops.add(ops.matmul(x2, ops.constant(feeds["W"]), False, False),
                          ops.matmul(h, ops.constant(feeds["U"]), False, False)),
                  ops.constant(feeds["B"]))
    h_next = ops.tanh(pre)
    res_h = ops.result(h_next)
    res_y = ops.result(ops.unsqueeze(h_next, ops.constant(np.array([0], np.int64))))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([res_h, res_y], [xt, h], "rnn_body"))
    ti.set_sliced_input(xt, x.output(0), 0, 1, 1, -1, 0)
    ti.set_merged_input(h, h0.output(0), res_h.output(0))
    outputs = [ti.get_iter_value(res_h.output(0), -1),
               ti.get_concatenated_slices(res_y.output(0), 0, 1, 1, -1, 0)]
    path = f"{directory}/w2_ti.xml"
    ov.save_model(ov.Model(outputs, [x, h0], "w2_ti"), path, compress_to_fp16=False)
    return path, {"X": feeds["X"], "H0": feeds["H0"]}, lambda fd: _rnn_numpy({**feeds, **fd})


def _w3_numpy(part):
    def numpy_loop(feeds):
        x, acc = feeds["X"], feeds["ACC0"]
        n = x.shape[1] // part
        ys = np.empty_like(x)
        for i in range(n):  # reverse: part i covers the i-th block from the end
            lo = x.shape[1] - (i + 1) * part
            block = x[:, lo:lo + part]
            acc = acc + block
            # Reverse concatenation puts iteration i at slot n-1-i: where its block came from.
            ys[:, lo:lo + part] = 2 * block + 1
        return [acc, ys]

    return numpy_loop


@functools.cache
def w3_reverse_ti_ir(directory, part=1, batch=8, length=4096, features=64, seed=3):
    """W3 as a TensorIterator: X [8, 4096, 64] sliced along axis 1 in reverse (part 1 or 2),
    y = 2x + 1 concatenated in reverse, plus a carried running sum."""
    import openvino as ov
    import openvino.opset8 as ops

    f = np.float32
    rng = np.random.default_rng(seed)
    x = ops.parameter([batch, length, features], f, name="X")
    acc0 = ops.parameter([batch, part, features], f, name="ACC0")
    xt = ops.parameter([batch, part, features], f, name="xt")
    acc = ops.parameter([batch, part, features], f, name="acc")
    y = ops.add(ops.multiply(xt, ops.constant(np.float32(2))), ops.constant(np.float32(1)))
    res_y, res_acc = ops.result(y), ops.result(ops.add(acc, xt))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([res_y, res_acc], [xt, acc], "w3_body"))
    ti.set_sliced_input(xt, x.output(0), -1, -part, part, 0, 1)
    ti.set_merged_input(acc, acc0.output(0), res_acc.output(0))
    outputs = [ti.get_iter_value(res_acc.output(0), -1),
               ti.get_concatenated_slices(res_y.output(0), -1, -part, part, 0, 1)]
    path = f"{directory}/w3_ti_part{part}.xml"
    ov.save_model(ov.Model(outputs, [x, acc0], "w3_ti"), path, compress_to_fp16=False)
    feeds = {"X": rng.standard_normal((batch, length, features)).astype(f),
             "ACC0": np.zeros((batch, part, features), f)}
    return path, feeds, _w3_numpy(part)


@functools.cache
def w3_reverse_scan_onnx(batch=8, length=4096, features=64, seed=3):
    """W3 as an ONNX Scan over axis 1 in reverse, outputs stacked on axis 1 in reverse."""
    TensorProto, helper, tensor, model = _onnx_helpers()
    body = helper.make_graph(
        [helper.make_node("Mul", ["x_t", "two"], ["x2"]),
         helper.make_node("Add", ["x2", "one"], ["y"]),
         helper.make_node("Add", ["acc_in", "x_t"], ["acc_out"])], "body",
        [tensor("acc_in", [batch, features]), tensor("x_t", [batch, features])],
        [tensor("acc_out", [batch, features]), tensor("y", [batch, features])],
        initializer=[helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
                     helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["ACC0", "X"], ["acc", "ys"], body=body, num_scan_inputs=1,
                          scan_input_axes=[1], scan_input_directions=[1],
                          scan_output_axes=[1], scan_output_directions=[1])], "w3_scan",
        [tensor("ACC0", [batch, features]), tensor("X", [batch, length, features])],
        [tensor("acc", [batch, features]), tensor("ys", [batch, length, features])])
    rng = np.random.default_rng(seed)
    feeds = {"X": rng.standard_normal((batch, length, features)).astype(np.float32),
             "ACC0": np.zeros((batch, features), np.float32)}
    reference = _w3_numpy(1)

    def numpy_loop(fd):
        acc, ys = reference({"X": fd["X"], "ACC0": fd["ACC0"][:, None]})
        return [acc[:, 0], ys]

    return model(graph, 16), feeds, numpy_loop


@functools.cache
def w5_while_onnx(threshold=5000.0):
    """W5: an ONNX Loop with no trip count that stops when sum(acc) >= threshold (about 5,000
    iterations: acc grows by 0.25 per element and step), emitting acc [4] every iteration."""
    TensorProto, helper, tensor, model = _onnx_helpers()
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "step"], ["acc_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["y"])], "body",
        [tensor("i", [], TensorProto.INT64), tensor("cond_in", [], TensorProto.BOOL),
         tensor("acc_in", [4])],
        [tensor("cond_out", [], TensorProto.BOOL), tensor("acc_out", [4]), tensor("y", [4])],
        initializer=[helper.make_tensor("step", TensorProto.FLOAT, [4], [0.25] * 4),
                     helper.make_tensor("limit", TensorProto.FLOAT, [], [threshold])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["", "cond", "acc0"], ["acc", "ys"], body=body)], "w5",
        [tensor("cond", [], TensorProto.BOOL), tensor("acc0", [4])],
        [tensor("acc", [4]), tensor("ys", ["N", 4])])
    feeds = {"cond": np.array(True), "acc0": np.zeros(4, np.float32)}

    def numpy_loop(fd):
        acc, step, rows = fd["acc0"], np.full(4, 0.25, np.float32), []
        while True:
            acc = acc + step
            rows.append(acc)
            if not acc.sum() < np.float32(threshold):
                break
        return [acc, np.stack(rows)]

    return model(graph), feeds, numpy_loop


@functools.cache
def w4_lstm_loop_onnx(steps=200, batch=8, features=64, hidden=128, seed=4):
    """W4 as an ONNX Loop spelling the LSTM cell out (Gather, MatMul, Split, Sigmoid, Tanh,
    Mul, Add), gates in ONNX's i, o, f, c order; emits every h."""
    TensorProto, helper, tensor, model = _onnx_helpers()
    rng = np.random.default_rng(seed)
    f = np.float32
    feeds = {"T": np.array(steps, np.int64),
             "X": rng.standard_normal((steps, batch, features)).astype(f),
             "W": (rng.standard_normal((features, 4 * hidden)) / np.sqrt(features)).astype(f),
             "R": (rng.standard_normal((hidden, 4 * hidden)) / np.sqrt(hidden)).astype(f),
             "B": (rng.standard_normal(4 * hidden) * 0.1).astype(f),
             "H0": np.zeros((batch, hidden), f), "C0": np.zeros((batch, hidden), f)}
    node = helper.make_node
    body = helper.make_graph(
        [node("Gather", ["X", "i"], ["x_t"], axis=0),
         node("MatMul", ["x_t", "W"], ["xw"]),
         node("MatMul", ["h_in", "R"], ["hr"]),
         node("Add", ["xw", "hr"], ["s"]),
         node("Add", ["s", "B"], ["gates"]),
         node("Split", ["gates"], ["gi", "go", "gf", "gc"], axis=1),
         node("Sigmoid", ["gi"], ["i_t"]), node("Sigmoid", ["go"], ["o_t"]),
         node("Sigmoid", ["gf"], ["f_t"]), node("Tanh", ["gc"], ["c_hat"]),
         node("Mul", ["f_t", "c_in"], ["fc"]), node("Mul", ["i_t", "c_hat"], ["ic"]),
         node("Add", ["fc", "ic"], ["c_out"]), node("Tanh", ["c_out"], ["tc"]),
         node("Mul", ["o_t", "tc"], ["h_out"]), node("Identity", ["h_out"], ["y"]),
         node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("i", [], TensorProto.INT64), tensor("cond_in", [], TensorProto.BOOL),
         tensor("h_in", [batch, hidden]), tensor("c_in", [batch, hidden])],
        [tensor("cond_out", [], TensorProto.BOOL), tensor("h_out", [batch, hidden]),
         tensor("c_out", [batch, hidden]), tensor("y", [batch, hidden])])
    graph = helper.make_graph(
        [node("Loop", ["T", "", "H0", "C0"], ["h_last", "c_last", "hs"], body=body)], "w4_loop",
        [tensor("T", [], TensorProto.INT64), tensor("X", [steps, batch, features]),
         tensor("W", [features, 4 * hidden]), tensor("R", [hidden, 4 * hidden]),
         tensor("B", [4 * hidden]), tensor("H0", [batch, hidden]),
         tensor("C0", [batch, hidden])],
        [tensor("h_last", [batch, hidden]), tensor("c_last", [batch, hidden]),
         tensor("hs", [steps, batch, hidden])])

    def numpy_loop(fd):
        h, c, hs = fd["H0"], fd["C0"], []
        for t in range(fd["X"].shape[0]):
            gates = fd["X"][t] @ fd["W"] + h @ fd["R"] + fd["B"]
            gi, go, gf, gc = np.split(gates, 4, axis=1)
            c = _sigmoid(gf) * c + _sigmoid(gi) * np.tanh(gc)
            h = _sigmoid(go) * np.tanh(c)
            hs.append(h)
        return [h, c, np.stack(hs)]

    return model(graph), feeds, numpy_loop


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# -- the functional API: each workload's step as one Python function, run by a plain Python loop
# (its floor) and by cyloop.scan / while_loop / fori_loop. Each returns (iterations, loop, api)
# where loop() and api() return the same outputs as a list.

def functional_w1(iterations=10_000, dtype=np.float32):
    """W1 (float32, or int64 with `dtype`): fori_loop with acc = acc + 1."""
    one = dtype(1)

    def step(i, acc):
        return acc + one

    def loop():
        acc = np.zeros((), dtype)
        for i in range(iterations):
            acc = step(i, acc)
        return [acc]

    return iterations, loop, lambda: [cyloop.fori_loop(0, iterations, step, np.zeros((), dtype))]


def functional_w2(steps=1000, batch=16, features=128, hidden=256, seed=2):
    """W2: scan of h = tanh(x_t W + h U + b), emitting every h."""
    x, w, u, b = _rnn_weights(steps, batch, features, hidden, seed)
    h0 = np.zeros((batch, hidden), np.float32)

    def step(h, x_t):
        h = np.tanh(x_t @ w + h @ u + b)
        return h, h

    def loop():
        h, hs = h0, []
        for x_t in x:
            h, y = step(h, x_t)
            hs.append(y)
        return [h, np.stack(hs)]

    return steps, loop, lambda: list(cyloop.scan(step, h0, x))


def functional_w3(batch=8, length=4096, features=64, seed=3):
    """W3: a reverse scan over axis 1 of [8, 4096, 64] (xs given as a strided view, axis 1 in
    front): acc += x_t, emitting 2 x_t + 1."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, length, features)).astype(np.float32)
    acc0 = np.zeros((batch, features), np.float32)
    xs = x.transpose(1, 0, 2)

    def step(acc, x_t):
        return acc + x_t, 2 * x_t + 1

    def loop():
        acc, ys = acc0, [None] * length
        for i in range(length - 1, -1, -1):
            acc, ys[i] = step(acc, xs[i])
        return [acc, np.stack(ys)]

    return length, loop, lambda: list(cyloop.scan(step, acc0, xs, reverse=True))


def functional_w4(steps=200, batch=8, features=64, hidden=128, seed=4):
    """W4: scan of an LSTM cell spelled in numpy (gates i, o, f, c), emitting every h."""
    _, feeds, _ = w4_lstm_loop_onnx(steps, batch, features, hidden, seed)
    w, r, b = feeds["W"], feeds["R"], feeds["B"]

    def step(state, x_t):
        h, c = state
        gates = x_t @ w + h @ r + b
        gi, go, gf, gc = np.split(gates, 4, axis=1)
        c = _sigmoid(gf) * c + _sigmoid(gi) * np.tanh(gc)
        h = _sigmoid(go) * np.tanh(c)
        return (h, c), h

    init = (feeds["H0"], feeds["C0"])

    def loop():
        state, hs = init, []
        for x_t in feeds["X"]:
            state, y = step(state, x_t)
            hs.append(y)
        return [*state, np.stack(hs)]

    def api():
        state, hs = cyloop.scan(step, init, feeds["X"])
        return [*state, hs]

    return steps, loop, api


def functional_w5(threshold=5000.0, capacity=5000):
    """W5 in its in-place form: while_loop whose carry holds a buffer it writes row k of, as numpy
    code does (acc += 0.25 per element until sum(acc) >= threshold)."""
    step = np.full(4, 0.25, np.float32)
    limit = np.float32(threshold)

    def cond(state):
        return state[0].sum() < limit

    def body(state):
        acc, buf, k = state
        acc = acc + step
        buf[k] = acc
        return acc, buf, k + 1

    def init():
        return np.zeros(4, np.float32), np.empty((capacity, 4), np.float32), 0

    def loop():
        state = init()
        while cond(state):
            state = body(state)
        acc, buf, k = state
        return [acc, buf[:k]]

    def api():
        acc, buf, k = cyloop.while_loop(cond, body, init())
        return [acc, buf[:int(k)]]

    return 5000, loop, api


def functional_w6(n=2000, seed=6):
    """W6: rows row + i for i < n (what the SequenceInsert loop builds), as a scan over i."""
    row = np.random.default_rng(seed).standard_normal(64).astype(np.float32)
    xs = np.arange(n, dtype=np.float32)

    def step(carry, i):
        return carry, row + i

    def loop():
        rows = []
        for i in xs:
            _, y = step(None, i)
            rows.append(y)
        return [np.stack(rows)]

    return n, loop, lambda: [cyloop.scan(step, np.zeros(()), xs)[1]]


FUNCTIONAL = {
    "W1": functional_w1,
    "W1-int64": lambda: functional_w1(dtype=np.int64),
    "W2": functional_w2,
    "W3": functional_w3,
    "W4": functional_w4,
    "W5-in-place": functional_w5,
    "W6": functional_w6,
}


def converted_ir(directory, name, onnx_workload):
    """An ONNX workload as the IR `openvino.convert_model` writes for it (the spelling OpenVINO
    users have): (xml path, feeds, numpy_loop). Inputs keep their ONNX names.

    The conversion runs in a child interpreter: after converting some ONNX models (W4's Loop),
    OpenVINO 2026.4 leaves the process in a state where numpy's multi-threaded OpenBLAS GEMMs
    spin forever (seen on a 2-core machine; plain numpy, no cyloop involved)."""
    import subprocess
    import sys

    import onnx

    model, feeds, numpy_loop = onnx_workload()
    onnx_path = f"{directory}/{name}.onnx"
    onnx.save(model, onnx_path)
    path = f"{directory}/{name}.xml"
    convert = ("import sys, openvino as ov; ov.save_model(ov.convert_model(sys.argv[1]), "
               "sys.argv[2], compress_to_fp16=False)")
    subprocess.run([sys.executable, "-c", convert, onnx_path, path], check=True)
    return path, feeds, numpy_loop


@functools.cache
def w1_counter_int64_onnx(iterations=10_000):
    """W1 on an int64 accumulator: Loop(M) with acc = acc + 1."""
    TensorProto, helper, tensor, model = _onnx_helpers()
    i64 = TensorProto.INT64
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "one"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("i", [], i64), tensor("cond_in", [], TensorProto.BOOL), tensor("acc_in", [], i64)],
        [tensor("cond_out", [], TensorProto.BOOL), tensor("acc_out", [], i64)],
        initializer=[helper.make_tensor("one", i64, [], [1])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "acc0"], ["acc"], body=body)], "w1_int64",
        [tensor("M", [], i64), tensor("acc0", [], i64)], [tensor("acc", [], i64)])
    feeds = {"M": np.array(iterations, np.int64), "acc0": np.array(0, np.int64)}

    def numpy_loop(feeds):
        acc, one = feeds["acc0"], np.int64(1)
        for _ in range(int(feeds["M"])):
            acc = acc + one
        return [acc]

    return model(graph), feeds, numpy_loop


def sequence_insert_kept_model():
    """W6-seq: W6 with the grown sequence returned beside its stack, so that the sequence must
    be made. (Stacked alone, cyloop's Cython driver runs W6 as a loop with a concatenated output,
    engine/stacking.py; this keeps the sequence's own cost in view.) Returns the ModelProto."""
    from onnx import TensorProto, helper

    onnx_model = sequence_insert_model()
    onnx_model.graph.output.append(
        helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None))
    return onnx_model


# -- models jax2onnx exports: each workload's cell written in JAX as a `lax.scan` step and
# exported by jax2onnx (what its users run). jax2onnx passes the weights through the Loop as
# carried state, broadcasts the biases inside the body and casts each step's carry; each
# builder returns (ModelProto, feeds by the model's input names, numpy_loop). They need jax and
# jax2onnx (the test extra); `exported_available()` says whether they are here.

def exported_available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("jax", "jax2onnx"))


def _exported(step, inputs, name):
    """(the ModelProto jax2onnx writes for a `lax.scan` of `step` over inputs[0] carrying
    inputs[1] (a tuple for several), the other inputs its weights; feeds)."""
    import jax
    import jax2onnx

    carries = inputs[1] if isinstance(inputs[1], tuple) else (inputs[1],)
    flat = [inputs[0], *carries, *inputs[2:]]
    n_carries = len(carries)

    def scan(xs, *rest):
        carry, weights = rest[:n_carries], rest[n_carries:]
        init = carry if n_carries > 1 else carry[0]
        return jax.lax.scan(lambda c, x: step(c, x, *weights), init, xs)

    onnx_model = jax2onnx.to_onnx(scan, [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in flat],
                                  model_name=name)
    return onnx_model, {spec.name: v for spec, v in zip(onnx_model.graph.input, flat)}


@functools.cache
def exported_rnn(steps=1000, batch=16, features=128, hidden=256, seed=2):
    """W2's RNN, h = tanh(x_t W + h U + b), as jax2onnx exports a `lax.scan` of it."""
    import jax.numpy as jnp

    x, w, u, b = _rnn_weights(steps, batch, features, hidden, seed)
    h0 = np.zeros((batch, hidden), np.float32)

    def step(h, x_t, w, u, b):
        h = jnp.tanh(x_t @ w + h @ u + b)
        return h, h

    onnx_model, feeds = _exported(step, [x, h0, w, u, b], "exported_rnn")

    def numpy_loop(fd):
        h, hs = h0, []
        for x_t in x:
            h = np.tanh(x_t @ w + h @ u + b)
            hs.append(h)
        return [h, np.stack(hs)]

    return onnx_model, feeds, numpy_loop


@functools.cache
def exported_lstm(steps=200, batch=8, features=64, hidden=128, seed=4):
    """W4's LSTM cell (gates i, f, g, o) as jax2onnx exports a `lax.scan` of it."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((steps, batch, features)).astype(np.float32)
    w = (rng.standard_normal((features, 4 * hidden)) * 0.1).astype(np.float32)
    r = (rng.standard_normal((hidden, 4 * hidden)) * 0.1).astype(np.float32)
    b = (rng.standard_normal(4 * hidden) * 0.1).astype(np.float32)
    h0 = np.zeros((batch, hidden), np.float32)
    c0 = np.zeros((batch, hidden), np.float32)

    def step(carry, x_t, w, r, b):
        h, c = carry
        i, f, g, o = jnp.split(x_t @ w + h @ r + b, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    onnx_model, feeds = _exported(step, [x, (h0, c0), w, r, b], "exported_lstm")

    def numpy_loop(fd):
        h, c, hs = h0, c0, []
        for x_t in x:
            i, f, g, o = np.split(x_t @ w + h @ r + b, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
            hs.append(h)
        return [h, c, np.stack(hs)]

    return onnx_model, feeds, numpy_loop


@functools.cache
def exported_gru(steps=200, batch=8, features=64, hidden=128, seed=5):
    """A GRU cell with the reset gate after the recurrent product (gates r, z, n, as PyTorch
    and Keras write it) as jax2onnx exports a `lax.scan` of it."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((steps, batch, features)).astype(np.float32)
    wx = (rng.standard_normal((features, 3 * hidden)) * 0.1).astype(np.float32)
    wh = (rng.standard_normal((hidden, 3 * hidden)) * 0.1).astype(np.float32)
    bx, bh = ((rng.standard_normal(3 * hidden) * 0.1).astype(np.float32) for _ in range(2))
    h0 = np.zeros((batch, hidden), np.float32)

    def step(h, x_t, wx, wh, bx, bh):
        xr, xz, xn = jnp.split(x_t @ wx + bx, 3, axis=-1)
        hr, hz, hn = jnp.split(h @ wh + bh, 3, axis=-1)
        r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
        h = (1 - z) * jnp.tanh(xn + r * hn) + z * h
        return h, h

    onnx_model, feeds = _exported(step, [x, h0, wx, wh, bx, bh], "exported_gru")

    def numpy_loop(fd):
        h, hs = h0, []
        for x_t in x:
            xr, xz, xn = np.split(x_t @ wx + bx, 3, axis=1)
            hr, hz, hn = np.split(h @ wh + bh, 3, axis=1)
            r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
            h = (1 - z) * np.tanh(xn + r * hn) + z * h
            hs.append(h)
        return [h, np.stack(hs)]

    return onnx_model, feeds, numpy_loop


EXPORTED = {"J2O-rnn": exported_rnn, "J2O-lstm": exported_lstm, "J2O-gru": exported_gru}


def exported_file(directory, name):
    """`EXPORTED[name]` made in a child interpreter and saved in `directory`: (the model's path,
    its feeds, None). jax is then imported there, not in the caller's process, whose peak memory
    (asv's peakmem) would count it (about 450 MiB)."""
    import os
    import subprocess
    import sys

    path, feeds_path = os.path.join(directory, f"{name}.onnx"), os.path.join(directory, name)
    make = ("import sys, numpy as np, onnx; sys.path.insert(0, sys.argv[1]); import common; "
            "m, f, _ = common.EXPORTED[sys.argv[2]](); onnx.save(m, sys.argv[3]); "
            "np.savez(sys.argv[4], **f)")
    subprocess.run([sys.executable, "-c", make, os.path.dirname(os.path.abspath(__file__)),
                    name, path, feeds_path], check=True)
    with np.load(feeds_path + ".npz") as saved:
        return path, dict(saved), None


def _exported_row_writes(write, model_name, steps, width, seed):
    """A `lax.fori_loop` writing row k of a preallocated [steps, width] buffer each step with
    ``write(buf, acc, k)``, exported by jax2onnx: (model, feeds, numpy loop)."""
    import jax
    import jax.numpy as jnp
    import jax2onnx

    x = np.random.default_rng(seed).standard_normal(width).astype(np.float32)

    def fill(x):
        def body(k, state):
            acc, buf, x = state  # (x carried: jax2onnx cannot export a body reading it)
            acc = acc * 0.5 + x
            return acc, write(buf, acc, k), x
        init = (jnp.zeros(width, jnp.float32), jnp.zeros((steps, width), jnp.float32), x)
        return jax.lax.fori_loop(0, steps, body, init)[:2]

    onnx_model = jax2onnx.to_onnx(fill, [jax.ShapeDtypeStruct(x.shape, x.dtype)],
                                  model_name=model_name)
    feeds = {onnx_model.graph.input[0].name: x}

    def numpy_loop(fd):
        acc, buf = np.zeros(width, np.float32), np.zeros((steps, width), np.float32)
        for k in range(steps):
            acc = acc * np.float32(0.5) + x
            buf[k] = acc
        return [acc, buf]

    return onnx_model, feeds, numpy_loop


@functools.cache
def exported_buffer(steps=4000, width=64, seed=7):
    """A row written into a preallocated buffer each step (``buf.at[k].set(acc)`` in a
    `lax.fori_loop`), as jax2onnx exports it: a ScatterND of the carried [steps, width] buffer,
    which an engine copying its operand copies whole every step."""
    return _exported_row_writes(lambda buf, acc, k: buf.at[k].set(acc), "exported_buffer",
                                steps, width, seed)


EXPORTED["J2O-buffer"] = exported_buffer


def exported_dynamic_update(steps=2000, width=64, seed=8):
    """A row written into a preallocated buffer each step by ``lax.dynamic_update_slice`` in a
    `lax.fori_loop`, as jax2onnx exports it: a ScatterND whose indices it computes from the
    update's Shape every step (about fifty nodes)."""
    import jax

    return _exported_row_writes(
        lambda buf, acc, k: jax.lax.dynamic_update_slice(buf, acc[None], (k, 0)),
        "exported_dynamic_update", steps, width, seed)


def exported_row_read(steps=2000, width=64, seed=9):
    """A row of a carried table read each step (``xs[k]`` in a `lax.fori_loop`), as jax2onnx
    exports it: a Slice whose starts it computes from k every step."""
    import jax
    import jax.numpy as jnp
    import jax2onnx

    xs = np.random.default_rng(seed).standard_normal((steps, width)).astype(np.float32)

    def read(xs):
        def body(k, state):
            acc, xs = state
            return acc * 0.5 + xs[k], xs
        return jax.lax.fori_loop(0, steps, body, (jnp.zeros(width, jnp.float32), xs))[0]

    onnx_model = jax2onnx.to_onnx(read, [jax.ShapeDtypeStruct(xs.shape, xs.dtype)],
                                  model_name="exported_row_read")
    feeds = {onnx_model.graph.input[0].name: xs}

    def numpy_loop(fd):
        acc = np.zeros(width, np.float32)
        for k in range(steps):
            acc = acc * np.float32(0.5) + xs[k]
        return [acc]

    return onnx_model, feeds, numpy_loop


EXPORTED["J2O-dus"] = exported_dynamic_update
EXPORTED["J2O-rows"] = exported_row_read


def exported_while_data(steps=2000, width=64, seed=10):
    """A `lax.while_loop` whose condition reads the carried data as well as the counter,
    ``(k < steps) & (acc.sum() < limit)``, as jax2onnx exports it (the counter's comparison cast
    to bool before the And); the limit is never reached, so it runs `steps` steps."""
    import jax
    import jax.numpy as jnp
    import jax2onnx

    x = np.random.default_rng(seed).standard_normal(width).astype(np.float32)
    limit = 1e9

    def run(x):
        def cond(state):
            k, acc = state
            return (k < steps) & (acc.sum() < limit)

        def body(state):
            k, acc = state
            return k + 1, acc * 0.5 + x
        return jax.lax.while_loop(cond, body, (0, jnp.zeros(width, jnp.float32)))[1]

    onnx_model = jax2onnx.to_onnx(run, [jax.ShapeDtypeStruct(x.shape, x.dtype)],
                                  model_name="exported_while_data")
    feeds = {onnx_model.graph.input[0].name: x}

    def numpy_loop(fd):
        acc, k = np.zeros(width, np.float32), 0
        while k < steps and acc.sum() < limit:
            acc, k = acc * np.float32(0.5) + x, k + 1
        return [acc]

    return onnx_model, feeds, numpy_loop


EXPORTED["J2O-while"] = exported_while_data


def fixed_cost_onnx(kind, trip_count=1):
    """Models whose run is mostly fixed cost: one Add on [2, 3] ("add"), or a Loop of one Add
    ("loop", `trip_count` iterations). Returns (ONNX model, feeds)."""
    TensorProto, helper, tensor, model = _onnx_helpers()
    x = np.ones((2, 3), np.float32)
    if kind == "add":
        graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "add",
                                  [tensor("x", [2, 3])], [tensor("y", [2, 3])])
        return model(graph), {"x": x}
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Add", ["v", "v"], ["v_out"])], "body",
        [tensor("i", [], TensorProto.INT64), tensor("c", [], TensorProto.BOOL),
         tensor("v", [2, 3])],
        [tensor("c_out", [], TensorProto.BOOL), tensor("v_out", [2, 3])])
    graph = helper.make_graph([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)],
                              "loop", [tensor("M", [], TensorProto.INT64), tensor("x", [2, 3])],
                              [tensor("y", [2, 3])])
    return model(graph), {"M": np.array(trip_count, np.int64), "x": x}


# A model's warm-up: runs until its measured choices are made (`warm_up`), within these bounds.
# (A model whose choices open in turn, the hoisting choice after its driver's own, can take more
# than a hundred runs of a few hundred microseconds; the time bounds a large one.)
WARM_RUNS_MAX = 256
WARM_SECONDS = 30.0


def choices_settled(model) -> bool:
    """Whether no measured choice of cyloop `model` (`Model.plan()`) is on trial or waiting for
    the work on its key to pay for one (a choice never called has nothing to settle)."""
    plan = model.plan()
    choices = [c for loop in plan.loops for c in loop.choices] + plan.choices
    return all(t.chosen is not None for c in choices for t in c.trials)


def warm_up(model, run) -> int:
    """Calls ``run()`` (a run of cyloop `model`) until its measured choices are settled
    (`choices_settled`): a choice's trial opens once the work on its key pays for one, a few
    runs or many, and the steady state is what comes after. At least one run, at most
    `WARM_RUNS_MAX` or `WARM_SECONDS` of them: a key met too rarely to pay for its trial within
    them keeps its default, as it would for a user. Returns the runs made."""
    started, runs = time.perf_counter(), 0
    while True:
        run()
        runs += 1
        if (choices_settled(model) or runs >= WARM_RUNS_MAX
                or time.perf_counter() - started > WARM_SECONDS):
            return runs
