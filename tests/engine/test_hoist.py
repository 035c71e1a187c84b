"""Hoisting (cyloop/_chunks.py): body work that depends only on sliced inputs, the iteration number
and loop invariants runs before the loop, a chunk of rows at a time.

Every test runs the Cython driver, which hoists, against the pure-Python driver, which runs the body
as written (and, where the body is not plain elementwise arithmetic, against numpy too), and reads
the driver's counters to check that hoisting really happened. Most run with tiny chunks as well, so
that chunk boundaries fall inside the loop."""

import signal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import cyloop
from cyloop.abilities import abilities_of
from cyloop.accel.gemm import blas_candidate
from cyloop.accel.measured import EARLY_ROUNDS
from cyloop.engine import chunks as _chunks
from cyloop.ir import (
    OPENVINO_DOMAIN,
    CarriedInput,
    ConcatOutput,
    GraphBuilder,
    InvariantInput,
    LastOutput,
    SlicedInput,
    Value,
)
from cyloop.kernels.registry import kernel

from ..support.chunks import CHUNKS, chunks_of, failures_of_both_drivers
from ..support.openvino_models import cell_ti_model, save
from ..support.plans import loop_plan
from ..support.slicing import oracle_parts, sliced_cases, sliced_loop

# Where a loop's products may run, each candidate named by the cores it takes here: numpy's
# BLAS (its own threads), or in pieces on this thread and the helper.
BY_BLAS = blas_candidate()



def _run(graph, feeds, chunk_rows, **kwargs):
    """(Cython model, its outputs, the pure-Python driver's outputs)."""
    with chunks_of(chunk_rows):
        fast = cyloop.Model(graph, driver="cython", **kwargs)
        got = fast.run(feeds)
    expected = cyloop.Model(graph, driver="python", **kwargs).run(feeds)
    return fast, got, expected


def _packed(loop) -> list[str]:
    """The sliced inputs `loop`'s plan packs into contiguous rows."""
    return [w.value for w in loop.hoisted if w.how == "packing"]


def _shape_once(model, node) -> list[str]:
    """Why the Shape node `node` (op, output) runs once a run, hoisted (see `HoistedWork`)."""
    return [w.why for w in loop_plan(model).hoisted
            if w.how == "shape" and [(r.op, r.output) for r in w.nodes] == [node]]


def _counters(model):
    (counters,) = model.counters().values()
    return counters


def _rnn_graph(axis, stride, keep_axis, reverse_out):
    """h = tanh(x_t W + h U + b) over axis `axis` of X, every h emitted."""
    body = GraphBuilder("rnn_body")
    x_t = body.input("x_t", np.float32)
    h = body.input("h", np.float32)
    w, u, b = body.input("w"), body.input("u"), body.input("b")
    if keep_axis:  # a TensorIterator-style part keeps its unit axis: squeeze it first
        x_t = body.node("Squeeze", x_t, body.const(np.array([axis], np.int64)))
    xw = body.node("MatMul", x_t, w)
    pre = body.node("Add", body.node("Add", xw, body.node("MatMul", h, u)), b)
    body.output(body.node("Tanh", pre, outputs=["h_next"]))
    g = GraphBuilder("rnn")
    x, h0 = g.input("x", np.float32), g.input("h0", np.float32)
    w_, u_, b_ = g.input("W"), g.input("U"), g.input("B")
    g.loop(body.build(),
           inputs=[(x, SlicedInput(0, "x_t", axis, stride=stride, keep_axis=keep_axis)),
                   (h0, CarriedInput(0, "h", "h_next")), (w_, InvariantInput(0, "w")),
                   (u_, InvariantInput(0, "u")), (b_, InvariantInput(0, "b"))],
           outputs=[LastOutput("h_next"), ConcatOutput("h_next", 0, reverse_out)],
           output_names=["h_last", "hs"])
    g.output("h_last", "hs")
    return g.build()


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("axis, stride, keep_axis, reverse_out",
                         [(0, 1, False, False), (1, -1, False, True), (1, 2, True, False),
                          (0, -3, True, True)])
def test_input_projection_is_one_gemm_per_chunk(rng, chunk_rows, axis, stride, keep_axis,
                                                reverse_out):
    steps, batch, features, hidden = 37, 3, 5, 4
    shape = [steps, batch, features] if axis == 0 else [batch, steps, features]
    feeds = {"x": rng.standard_normal(shape).astype(np.float32),
             "h0": rng.standard_normal((batch, hidden)).astype(np.float32),
             "W": rng.standard_normal((features, hidden)).astype(np.float32),
             "U": rng.standard_normal((hidden, hidden)).astype(np.float32),
             "B": rng.standard_normal(hidden).astype(np.float32)}
    graph = _rnn_graph(axis, stride, keep_axis, reverse_out)
    model, got, expected = _run(graph, feeds, chunk_rows)
    # numpy: the parts in iteration order, the recurrence written out.
    xs = np.moveaxis(feeds["x"], axis, 0)[::stride]
    h, hs = feeds["h0"], []
    for x_t in xs:
        h = np.tanh(x_t @ feeds["W"] + h @ feeds["U"] + feeds["B"])
        hs.append(h)
    hs = np.stack(hs[::-1] if reverse_out else hs)
    for name, value in (("h_last", h), ("hs", hs)):
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5)
    counters = _counters(model)
    rows = len(xs)
    assert counters["hoist_chunks"] >= (-(-rows // chunk_rows) if chunk_rows else 1)
    # The hoisted rows are x_t W: one [batch, hidden] row per iteration, none computed twice.
    assert counters["hoisted_bytes"] == rows * batch * hidden * 4
    assert "MatMul" in [r.op for r in loop_plan(model).hoisted_nodes()]


def _onnx_gather_loop(axis, trip_count, stop_after=None):
    """An ONNX Loop reading Gather(X, i, axis) and emitting x_t W + 1 (+ a running sum)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    nodes = [helper.make_node("Gather", ["X", "i"], ["x_t"], axis=axis),
             helper.make_node("MatMul", ["x_t", "W"], ["xw"]),
             helper.make_node("Add", ["xw", "one"], ["y"]),
             helper.make_node("Add", ["acc_in", "y"], ["acc_out"])]
    if stop_after is None:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    else:
        nodes.append(helper.make_node("Less", ["i", "stop"], ["cond_out"]))
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", f, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", f, None),
         helper.make_tensor_value_info("y", f, None)],
        [helper.make_tensor("one", f, [], [1.0]),
         helper.make_tensor("stop", TensorProto.INT64, [], [stop_after or 0])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "acc0"], ["acc", "ys"], body=body)], "gather_loop",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("X", f, None), helper.make_tensor_value_info("W", f, None),
         helper.make_tensor_value_info("acc0", f, None)],
        [helper.make_tensor_value_info("acc", f, None),
         helper.make_tensor_value_info("ys", f, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return onnx.ModelProto.FromString(model.SerializeToString())


def _gather_feeds(rng, axis, rows, trip_count):
    shape = [rows, 3, 4] if axis == 0 else [3, rows, 4]
    return {"M": np.array(trip_count, np.int64),
            "X": rng.standard_normal(shape).astype(np.float32),
            "W": rng.standard_normal((4, 2)).astype(np.float32),
            "acc0": np.zeros((3, 2), np.float32)}


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("axis", [0, 1])
def test_gather_by_the_iteration_number_is_a_sliced_input(rng, chunk_rows, axis):
    feeds = _gather_feeds(rng, axis, rows=20, trip_count=17)
    graph = cyloop.load(_onnx_gather_loop(axis, 17)).graph
    model, got, expected = _run(graph, feeds, chunk_rows)
    parts = np.moveaxis(feeds["X"], axis, 0)[:17]
    ys = parts @ feeds["W"] + 1
    np.testing.assert_allclose(got["ys"], expected["ys"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["ys"], ys, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["acc"], ys.sum(0), rtol=1e-4, atol=1e-5)
    counters = _counters(model)
    assert counters["hoist_chunks"] >= 1
    assert "Gather" in [r.op for r in loop_plan(model).hoisted_nodes()]


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_gather_past_the_end_fails_at_the_same_iteration_with_the_same_error(rng, chunk_rows):
    feeds = _gather_feeds(rng, 0, rows=5, trip_count=9)
    graph = cyloop.load(_onnx_gather_loop(0, 9)).graph
    messages = failures_of_both_drivers(lambda driver: cyloop.Model(graph, driver=driver), feeds,
                                        chunk_rows, "Gather")
    assert messages[0] == messages[1]
    assert "index 5 is out of bounds" in messages[0]


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_a_loop_stopping_early_hoists_at_most_one_chunk_too_many(rng, chunk_rows):
    feeds = _gather_feeds(rng, 0, rows=200, trip_count=200)
    graph = cyloop.load(_onnx_gather_loop(0, 200, stop_after=6)).graph
    model, got, expected = _run(graph, feeds, chunk_rows)
    np.testing.assert_allclose(got["ys"], expected["ys"], rtol=1e-5, atol=1e-6)
    assert got["ys"].shape[0] == 7  # iterations 0..6 ran; the condition read at 6 is false
    row_bytes = 3 * 2 * 4
    first = chunk_rows or _chunks.FIRST_CHUNK_ROWS
    assert _counters(model)["hoisted_bytes"] <= (7 + first) * row_bytes


def test_zero_iterations_compute_nothing_and_errors_surface_when_the_body_would_run(rng):
    feeds = _gather_feeds(rng, 0, rows=5, trip_count=0)
    feeds["W"] = np.ones((7, 2), np.float32)  # x_t W cannot be computed
    graph = cyloop.load(_onnx_gather_loop(0, 0)).graph
    fast = cyloop.Model(graph, driver="cython")
    got = fast.run(feeds)
    expected = cyloop.Model(graph, driver="python").run(feeds)
    np.testing.assert_array_equal(got["acc"], expected["acc"])
    assert got["ys"].shape == expected["ys"].shape
    assert _counters(fast)["hoist_chunks"] == 0
    feeds["M"] = np.array(1, np.int64)
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ExecutionError, match="MatMul node producing 'xw' failed"):
            cyloop.Model(graph, driver=driver).run(feeds)


def _iteration_sequence_graph(n):
    """Cast(i) + row inserted into a sequence each iteration (W6's body)."""
    body = GraphBuilder("seq_body")
    i = body.input("i", np.int64, ())
    body.input("cond_in", np.bool_, ())
    seq = body.input("seq_in")
    item = body.node("Add", body.input("row_in"), body.node("Cast", i, to=np.float32))
    body.output(body.node("SequenceInsert", seq, item, outputs=["seq_out"]))
    body.output(body.node("Mul", item, item, outputs=["square"]))
    g = GraphBuilder("seq")
    row = g.input("row", np.float32, (4,))
    empty = g.node("SequenceEmpty", dtype=np.float32)
    g.loop(body.build(), inputs=[(empty, CarriedInput(0, "seq_in", "seq_out")),
                                 (row, InvariantInput(0, "row_in"))],
           outputs=[LastOutput("seq_out"), ConcatOutput("square")], trip_count=n,
           iteration_param="i", cond_param="cond_in", output_names=["seq", "squares"])
    g.output("seq", "squares")
    return g.build()


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_work_on_the_iteration_number_is_hoisted(rng, chunk_rows):
    feeds = {"row": rng.standard_normal(4).astype(np.float32)}
    model, got, expected = _run(_iteration_sequence_graph(23), feeds, chunk_rows)
    items = [feeds["row"] + np.float32(i) for i in range(23)]
    for a, b, c in zip(got["seq"], expected["seq"], items):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(got["squares"], expected["squares"])
    np.testing.assert_array_equal(got["squares"], np.square(items))
    assert _counters(model)["hoist_chunks"] >= 1
    # The outputs are the caller's own: writeable, sharing no memory with the engine's chunks.
    assert all(a.flags.writeable for a in got["seq"]) and got["squares"].flags.writeable


def _outputs_graph():
    """A hoisted value emitted (reverse), carried, returned last, and read inside an If."""
    then_b = GraphBuilder("then")
    then_b.output(then_b.node("Neg", "y"))
    else_b = GraphBuilder("else")
    else_b.output(else_b.node("Identity", "y"))
    body = GraphBuilder("body")
    x_t = body.input("x_t", np.float64)
    body.input("prev")
    flag = body.input("flag_in")
    y = body.node("Add", body.node("Mul", x_t, body.const(2.0)), body.const(1.0), outputs=["y"])
    branch = body.node("If", flag, then_branch=then_b.build(), else_branch=else_b.build())
    body.output(y, body.node("Identity", branch, outputs=["signed"]))
    g = GraphBuilder("outputs")
    x, flag_ = g.input("x", np.float64), g.input("flag", np.bool_)
    prev0 = g.input("prev0", np.float64)
    g.loop(body.build(),
           inputs=[(x, SlicedInput(0, "x_t", axis=1, stride=-1)),
                   (prev0, CarriedInput(0, "prev", "y")), (flag_, InvariantInput(0, "flag_in"))],
           outputs=[ConcatOutput("y", 0, reverse=True), LastOutput("y"),
                    ConcatOutput("signed", 1)],
           output_names=["ys", "y_last", "signed"])
    g.output("ys", "y_last", "signed")
    return g.build()


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("flag", [True, False])
def test_hoisted_values_as_outputs_carried_values_and_subgraph_reads(rng, chunk_rows, flag):
    x = rng.standard_normal((3, 11))
    feeds = {"x": x, "flag": np.array(flag), "prev0": np.zeros(3)}
    before = x.copy()
    model, got, expected = _run(_outputs_graph(), feeds, chunk_rows)
    for name in ("ys", "y_last", "signed"):
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    parts = [x[:, t] for t in range(10, -1, -1)]
    np.testing.assert_array_equal(got["ys"], np.stack([2 * p + 1 for p in parts][::-1]))
    np.testing.assert_array_equal(got["signed"],
                                  np.stack([(-1 if flag else 1) * (2 * p + 1) for p in parts], 1))
    np.testing.assert_array_equal(x, before)
    assert _counters(model)["hoist_chunks"] >= 1


def _axes_graph(version):
    """Squeeze / Unsqueeze / Reshape of a kept-axis part (negative axes too), then a MatMul."""
    body = GraphBuilder("axes_body", opset=version)
    x_t = body.input("x_t", np.float32)  # [2, 1, 3]
    if version >= 13:
        s = body.node("Squeeze", x_t, body.const(np.array([-2], np.int64)))
        u = body.node("Unsqueeze", s, body.const(np.array([0, -1], np.int64)))
    else:
        s = body.node("Squeeze", x_t, axes=[-2])
        u = body.node("Unsqueeze", s, axes=[0, -1])
    r = body.node("Reshape", u, body.const(np.array([0, -1], np.int64)))  # [1, 6]
    body.output(body.node("MatMul", r, body.const(np.arange(12, dtype=np.float32).reshape(6, 2)),
                          outputs=["z"]))
    g = GraphBuilder("axes", opset=version)
    x = g.input("x", np.float32, (2, 9, 3))
    g.loop(body.build(), inputs=[(x, SlicedInput(0, "x_t", axis=1, stride=2, keep_axis=True))],
           outputs=[ConcatOutput("z", 0, new_axis=False)], output_names=["zs"])
    g.output("zs")
    return g.build()


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("version", [11, 13])
def test_axis_ops_shift_their_axes_past_the_row_axis(rng, chunk_rows, version):
    feeds = {"x": rng.standard_normal((2, 9, 3)).astype(np.float32)}
    model, got, expected = _run(_axes_graph(version), feeds, chunk_rows)
    np.testing.assert_allclose(got["zs"], expected["zs"], rtol=1e-6)
    parts = [feeds["x"][:, t].reshape(1, 6) for t in range(0, 9, 2)]
    w = np.arange(12, dtype=np.float32).reshape(6, 2)
    np.testing.assert_allclose(got["zs"], np.concatenate([p @ w for p in parts]), rtol=1e-6)
    assert {"Squeeze", "Reshape"} <= {r.op for r in loop_plan(model).hoisted_nodes()}


@pytest.mark.parametrize("cell, attrs", [
    ("lstm", {}), ("lstm", {"clip": 0.7}), ("lstm1", {}),
    ("lstm", {"activations": ["relu", "tanh", "sigmoid"]}),
    ("gru", {}), ("gru", {"linear_before_reset": True}), ("gru", {"clip": 0.5}),
    ("rnn", {}), ("rnn", {"clip": 0.3})])
def test_cells_are_split_into_a_hoisted_projection_and_a_recurrence(tmp_path, rng, cell, attrs):
    ov_model, _ = cell_ti_model(cell, steps=13, **attrs)
    path = save(ov_model, tmp_path / "cell.xml")
    feeds = {"X": rng.standard_normal((3, 13, 5)).astype(np.float32),
             "H0": rng.standard_normal((3, 7)).astype(np.float32)}
    if cell.startswith("lstm"):
        feeds["C0"] = rng.standard_normal((3, 7)).astype(np.float32)
    for chunk_rows in CHUNKS:
        with chunks_of(chunk_rows):
            fast = cyloop.load(path, driver="cython")
        got = fast.run(feeds)
        # One formulation for both (tune=False: each kernel's default), so that they can agree
        # bit for bit: hoisting is what differs.
        expected = cyloop.load(path, driver="python", tune=False).run(feeds)
        unsplit = cyloop.load(path, driver="cython", hoist=False, tune=False).run(feeds)
        for name in got:
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(unsplit[name], expected[name])
        assert "input projection" in [w.how for w in loop_plan(fast).hoisted]
        assert _counters(fast)["hoist_chunks"] >= 1


def test_hoist_false_runs_every_body_as_written(rng):
    graph = _rnn_graph(0, 1, False, False)
    feeds = {"x": rng.standard_normal((9, 2, 3)).astype(np.float32),
             "h0": np.zeros((2, 4), np.float32),
             "W": rng.standard_normal((3, 4)).astype(np.float32),
             "U": rng.standard_normal((4, 4)).astype(np.float32),
             "B": np.zeros(4, np.float32)}
    model = cyloop.Model(graph, driver="cython", hoist=False)
    got = model.run(feeds)
    expected = cyloop.Model(graph, driver="python").run(feeds)
    for name in got:
        np.testing.assert_array_equal(got[name], expected[name])
    assert _counters(model)["hoist_chunks"] == 0
    loop = loop_plan(model)
    assert not loop.hoisted and "hoisted" not in loop.roles(), loop


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=sliced_cases())
def test_any_slicing_with_chunk_boundaries_everywhere(case):
    """test_slicing's property (y = 2x + 1 hoisted, a running sum left in the body), with a chunk
    boundary after every row and after every second row."""
    shape, axis, start, end, stride, part, keep_axis, _, _ = case
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    if oracle_parts(x, axis % len(shape), start, end, stride, part, keep_axis) is None:
        return  # parts outside the axis: test_slicing checks the error
    graph = sliced_loop(*case)
    acc0 = np.zeros(graph.inputs[1].shape)
    feeds = {"x": x, "acc0": acc0}
    expected = cyloop.Model(graph, driver="python").run(feeds)
    for rows in (1, 2):
        with chunks_of(rows):
            got = cyloop.Model(graph, driver="cython").run(feeds)
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def _chain_graph():
    """Hoisted chains whose buffers the chunk may reuse in place, and ones it must not: a value
    read twice, a value that is also an output, a Cast to its own type (which may return its
    input) feeding an in-place-able Add."""
    body = GraphBuilder("chain_body")
    x_t = body.input("x_t", np.float32)
    x2 = body.node("Mul", x_t, body.const(np.float32(2)), outputs=["x2"])
    y = body.node("Add", x2, body.const(np.float32(1)), outputs=["y"])
    z = body.node("Sub", x2, body.const(np.float32(3)), outputs=["z"])
    same = body.node("Cast", body.node("Neg", x_t), to=np.float32)  # to its own type
    w = body.node("Add", same, body.node("Tanh", same), outputs=["w"])
    v = body.node("Mul", body.node("Exp", z), y, outputs=["v"])
    body.output(x2, y, z, w, v)
    g = GraphBuilder("chain")
    x = g.input("x", np.float32, (40, 3, 2))
    g.loop(body.build(), inputs=[(x, SlicedInput(0, "x_t", axis=0))],
           outputs=[ConcatOutput(name) for name in ("x2", "y", "z", "w", "v")],
           output_names=["x2s", "ys", "zs", "ws", "vs"])
    g.output("x2s", "ys", "zs", "ws", "vs")
    return g.build()


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_chunk_buffers_are_reused_only_when_nothing_else_reads_them(rng, chunk_rows):
    x = rng.standard_normal((40, 3, 2)).astype(np.float32)
    model, got, expected = _run(_chain_graph(), {"x": x}, chunk_rows)
    x2 = x * np.float32(2)
    numpy = {"x2s": x2, "ys": x2 + 1, "zs": x2 - 3, "ws": -x + np.tanh(-x),
             "vs": np.exp(x2 - 3) * (x2 + 1)}
    for name, value in numpy.items():
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
        np.testing.assert_allclose(got[name], value, rtol=1e-6, err_msg=name)
    assert _counters(model)["hoist_chunks"] >= 1


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("domain", ["", OPENVINO_DOMAIN], ids=["onnx", "openvino"])
@pytest.mark.parametrize("first", ["added", "doubled"])
def test_an_identity_of_hoisted_rows_is_hoisted_and_its_rows_never_written_over(rng, chunk_rows,
                                                                               domain, first):
    """An Identity of a batched value (say a Cast to its own type, which the Cython driver
    makes an Identity) leaves the body with it, its rows those of its input: nothing after it
    stays in the body for it, and neither name's buffer is written over by an in-place-able
    step where it dies while the other is read after it (`first`: which dies first)."""
    spell = {"Neg": "Negative", "Add": "Add", "Mul": "Multiply"} if domain else {}
    body = GraphBuilder("identity_body")
    x_t = body.input("x_t", np.float32)
    neg = body.node(spell.get("Neg", "Neg"), x_t, domain=domain)
    same = body.node("Identity", neg, domain=domain, outputs=["same"])
    steps = {"added": lambda: body.node("Add", neg, body.const(np.float32(1)), domain=domain,
                                        outputs=["added"]),
             "doubled": lambda: body.node(spell.get("Mul", "Mul"), same,
                                          body.const(np.float32(2)), domain=domain,
                                          outputs=["doubled"])}
    made = {name: steps[name]() for name in sorted(steps, key=lambda name: name != first)}
    body.output(made["added"], made["doubled"])
    g = GraphBuilder("identity")
    x = g.input("x", np.float32, (10, 3))
    g.loop(body.build(), inputs=[(x, SlicedInput(0, "x_t"))],
           outputs=[ConcatOutput("added"), ConcatOutput("doubled")],
           output_names=["addeds", "doubleds"])
    g.output("addeds", "doubleds")
    x = rng.standard_normal((10, 3)).astype(np.float32)
    model, got, expected = _run(g.build(), {"x": x}, chunk_rows)
    for name, value in {"addeds": 1 - x, "doubleds": -2 * x}.items():
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    assert len(loop_plan(model).hoisted_nodes()) == 4, model.plan()


@pytest.mark.parametrize("cast_to", ["INT64", "INT32"])
def test_a_cast_made_an_identity_of_values_computed_once_runs_once_too(rng, cast_to):
    """A row's Shape, cast to int64 (an Identity to the Cython driver: a Shape is int64
    already) or to int32 (a Cast), then index arithmetic on it: all of it runs once a run, the
    plan saying what the Identity runs; both drivers and onnxruntime agree."""
    from onnx import TensorProto, helper

    from ..support.drivers import run_three_ways
    from ..support.onnx_models import model, tensor

    made = getattr(TensorProto, cast_to)
    nodes = [helper.make_node("Shape", ["x_t"], ["shape"]),
             helper.make_node("Cast", ["shape"], ["cast"], to=made),
             helper.make_node("Gather", ["cast", "zero"], ["n"], axis=0),
             helper.make_node("Sub", ["n", "one"], ["last"]),
             helper.make_node("Gather", ["x_t", "last"], ["x_last"], axis=0),
             helper.make_node("Add", ["s_in", "x_last"], ["s_out"])]
    body = helper.make_graph(
        nodes, "body", [tensor("s_in", np.float32, []), tensor("x_t", np.float32, [3])],
        [tensor("s_out", np.float32, [])],
        [helper.make_tensor(name, made, [], [value]) for name, value in (("zero", 0),
                                                                         ("one", 1))])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "X"], ["s_last"], body=body, num_scan_inputs=1)], "g",
        [tensor("s0", np.float32, []), tensor("X", np.float32, [None, 3])],
        [helper.make_empty_tensor_value_info("s_last")])
    feeds = {"s0": np.array(0, np.float32), "X": rng.standard_normal((10, 3)).astype(np.float32)}
    fast, _, got, expected, peer = run_three_ways(model(graph, 17), feeds)
    np.testing.assert_array_equal(got["s_last"], expected["s_last"])
    np.testing.assert_allclose(got["s_last"], peer["s_last"], rtol=1e-6)
    plan = loop_plan(fast)
    kinds = [w.op for w in plan.hoisted if w.how in ("once", "shape")]
    assert kinds == ["Shape", "Identity" if cast_to == "INT64" else "Cast", "Gather", "Sub"], plan
    assert any(w.fused is not None and w.fused.already == "int64"
               and [(r.op, r.output) for r in w.nodes] == [("Cast", "cast")]
               for w in plan.hoisted) == (cast_to == "INT64"), plan


def _emitting_graph(axis, part, reverse, new_axis):
    """y = 2x + 1 of each part (hoisted, as a chain: the Mul's result is read only by the Add)
    emitted as a concatenated output, and a running sum left in the body."""
    body = GraphBuilder("emit_body")
    x_t = body.input("x_t", np.float32)
    acc = body.input("acc", np.float32)
    y = body.node("Add", body.node("Mul", x_t, body.const(np.float32(2))),
                  body.const(np.float32(1)), outputs=["y"])
    body.output(y, body.node("Add", acc, x_t, outputs=["acc_next"]))
    g = GraphBuilder("emit")
    x = g.input("x", np.float32, None)
    acc0 = g.input("acc0", np.float32, None)
    stride = -part if reverse else part
    sliced = SlicedInput(0, "x_t", axis=axis, stride=stride, part_size=part, keep_axis=not new_axis)
    g.loop(body.build(), inputs=[(x, sliced), (acc0, CarriedInput(0, "acc", "acc_next"))],
           outputs=[ConcatOutput("y", axis, reverse=reverse, new_axis=new_axis),
                    LastOutput("acc_next")],
           output_names=["ys", "acc_last"])
    g.output("ys", "acc_last")
    return g.build()


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("part, new_axis", [(1, True), (2, False)], ids=["scan", "ti-part-2"])
def test_a_hoisted_value_emitted_is_written_in_its_slots(rng, axis, reverse, part, new_axis):
    """A chunk writes the rows of an emitted hoisted value straight into the output's slots
    (reverse order and a joined axis included): after the first chunk, which sizes the buffer,
    nothing is copied, and the output is the reference driver's."""
    shape = (3, 40, 5) if axis == 1 else (40, 3, 5)
    x = rng.standard_normal(shape).astype(np.float32)
    acc0 = np.zeros((3, part, 5) if axis == 1 and not new_axis else
                    (part, 3, 5) if not new_axis else (3, 5), np.float32)
    with chunks_of(4):
        model, got, expected = _run(_emitting_graph(axis, part, reverse, new_axis),
                                    {"x": x, "acc0": acc0}, None)
        model.run({"x": x, "acc0": acc0})
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    counters, n = _counters(model), 40 // part
    assert counters["in_place_writes"] == 2 * (n - 4)  # every chunk but the first, two runs
    assert counters["steady_bytes_copied"] == 2 * 2 * x.nbytes // n  # the first chunk's rows 2, 3


def test_a_step_with_two_chained_inputs_writes_only_one_of_them_in_the_slots():
    """y = 2x + 3x: each addend is read by the Add alone, but only one of them may be made in
    y's slots (the other would overwrite it before the Add reads it)."""
    body = GraphBuilder("b")
    x_t = body.input("x_t", np.float32)
    twice = body.node("Mul", x_t, body.const(np.float32(2)))
    thrice = body.node("Mul", x_t, body.const(np.float32(3)))
    body.output(body.node("Add", twice, thrice, outputs=["y"]))
    x = np.arange(60, dtype=np.float32).reshape(20, 3)
    with chunks_of(4):
        out = _same_outcome(*_one_loop(body, x))
    np.testing.assert_array_equal(out["ys"], 5 * x)


def test_a_value_two_steps_read_is_not_made_in_the_slots_of_either():
    """a = 2x feeds y = a + 1 (emitted) and z = a - 3 (summed in the body): made in y's slots,
    a would be y by the time z reads it."""
    body = GraphBuilder("b")
    twice = body.node("Mul", body.input("x_t", np.float32), body.const(np.float32(2)))
    acc = body.input("acc", np.float32)
    y = body.node("Add", twice, body.const(np.float32(1)), outputs=["y"])  # (y first)
    z = body.node("Sub", twice, body.const(np.float32(3)))
    body.output(y, body.node("Add", acc, z, outputs=["acc_next"]))
    g = GraphBuilder("g")
    x, acc0 = g.input("x", np.float32, (20, 3)), g.input("acc0", np.float32, (3,))
    g.loop(body.build(), inputs=[(x, SlicedInput(0, "x_t")),
                                 (acc0, CarriedInput(0, "acc", "acc_next"))],
           outputs=[ConcatOutput("y"), LastOutput("acc_next")], output_names=["ys", "total"])
    g.output("ys", "total")
    x = np.arange(60, dtype=np.float32).reshape(20, 3)
    with chunks_of(4):
        out = _same_outcome(g.build(), {"x": x, "acc0": np.zeros(3, np.float32)})
    np.testing.assert_array_equal(out["total"], (2 * x - 3).sum(axis=0))


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("axis", [0, 1])
def test_sliced_parts_the_body_reads_are_packed(rng, chunk_rows, axis):
    """A running sum over the parts (nothing to hoist): the parts are handed to the body as rows
    of a chunk, copied to be contiguous when they are not (axis 1), as they are otherwise."""
    body = GraphBuilder("sum_body")
    x_t, acc = body.input("x_t", np.float32), body.input("acc", np.float32)
    body.output(body.node("Add", acc, x_t, outputs=["acc_next"]))
    g = GraphBuilder("running_sum")
    x, acc0 = g.input("x", np.float32), g.input("acc0", np.float32)
    g.loop(body.build(), inputs=[(x, SlicedInput(0, "x_t", axis=axis, stride=-1)),
                                 (acc0, CarriedInput(0, "acc", "acc_next"))],
           outputs=[LastOutput("acc_next"), ConcatOutput("acc_next")],
           output_names=["total", "partial"])
    g.output("total", "partial")
    x = rng.standard_normal((21, 3, 4) if axis == 0 else (3, 21, 4)).astype(np.float32)
    feeds = {"x": x, "acc0": np.zeros((3, 4), np.float32)}
    model, got, expected = _run(g.build(), feeds, chunk_rows)
    for name in ("total", "partial"):
        np.testing.assert_array_equal(got[name], expected[name])
    parts = np.moveaxis(x, axis, 0)[::-1]
    np.testing.assert_array_equal(got["partial"], np.cumsum(parts, axis=0, dtype=np.float32))
    assert _packed(loop_plan(model)) == ["x_t"]
    np.testing.assert_array_equal(feeds["x"], x)


def test_a_gather_on_a_bad_axis_fails_only_when_the_body_would_run(rng):
    feeds = _gather_feeds(rng, 0, rows=5, trip_count=0)
    feeds["X"] = feeds["X"][:, 0, 0]  # rank 1: Gather's axis 1 does not exist
    graph = cyloop.load(_onnx_gather_loop(1, 0)).graph
    for driver in ("cython", "python"):
        assert cyloop.Model(graph, driver=driver).run(feeds)["ys"].shape[0] == 0
    feeds["M"] = np.array(2, np.int64)
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ExecutionError, match="Gather node producing 'x_t' failed"):
            cyloop.Model(graph, driver=driver).run(feeds)


# Regressions from a review: each a body the hoisted run must treat exactly as the body does.

def _one_loop(body, x, extra=None, outputs=("y",), opset=17):
    """A loop over axis 0 of `x` (invariants `extra`: name -> array) emitting `outputs`."""
    g = GraphBuilder("g", opset=opset)
    x_name = g.input("x", x.dtype, x.shape)
    inputs = [(x_name, SlicedInput(0, "x_t"))]
    extra = extra or {}
    for name, value in extra.items():
        inputs.append((g.input(name.upper(), value.dtype, value.shape), InvariantInput(0, name)))
    g.loop(body.build(), inputs=inputs, outputs=[ConcatOutput(o) for o in outputs],
           output_names=[f"{o}s" for o in outputs])
    g.output(*[f"{o}s" for o in outputs])
    feeds = {"x": x, **{name.upper(): value for name, value in extra.items()}}
    return g.build(), feeds


def _same_outcome(graph, feeds):
    """Both drivers give equal outputs, or both raise the same error."""
    outcomes = []
    for driver in ("cython", "python"):
        try:
            outcomes.append(cyloop.Model(graph, driver=driver).run(feeds))
        except cyloop.CyloopError as e:
            outcomes.append(f"{type(e).__name__}: {e}")
    if isinstance(outcomes[1], str):
        assert outcomes[0] == outcomes[1]
    else:
        assert not isinstance(outcomes[0], str), outcomes[0]
        for name in outcomes[1]:
            np.testing.assert_array_equal(outcomes[0][name], outcomes[1][name], err_msg=name)
    return outcomes[1]


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("opset, axis, sizes",
                         [(13, -1, None), (13, 1, None), (13, 0, [1, 3]), (13, 1, [2, 1, 3]),
                          (11, -1, [2, 2, 2]), (11, 1, None), (18, -1, None)],
                         ids=["13-last", "13-axis1", "13-axis0-sizes", "13-uneven",
                              "11-attribute", "11-axis1", "18-num-outputs"])
def test_a_split_of_rows_is_hoisted(rng, chunk_rows, opset, axis, sizes):
    """Split of a sliced row along its axis attribute (shifted past the row axis), by static
    sizes (an input from opset 13, an attribute before), its parts read by the body."""
    parts = len(sizes) if sizes else 3 if axis else 2
    body = GraphBuilder("b", opset=opset)
    x_t = body.input("x_t", np.float32)
    h = body.input("h", np.float32)
    if opset >= 13:
        inputs = (x_t, body.const(np.array(sizes, np.int64))) if sizes else (x_t,)
        extra = {"num_outputs": parts} if opset >= 18 else {}
        pieces = body.node("Split", *inputs, axis=axis, outputs=parts, **extra)
    else:
        pieces = body.node("Split", x_t, axis=axis, outputs=parts,
                           **({"split": sizes} if sizes else {}))
    total = h
    for piece in pieces:
        total = body.node("Add", total, body.node("ReduceSum", piece, keepdims=0))
    body.output(body.node("Identity", total, outputs=["h_next"]),
                body.node("Mul", pieces[0], body.const(np.float32(2)), outputs=["y"]))
    g = GraphBuilder("g", opset=opset)
    g.loop(body.build(), inputs=[(g.input("x", np.float32), SlicedInput(0, "x_t")),
                                 (g.input("h0", np.float32), CarriedInput(0, "h", "h_next"))],
           outputs=[LastOutput("h_next"), ConcatOutput("y")], output_names=["h", "ys"])
    g.output("h", "ys")
    x = rng.standard_normal((7, 4, 6)).astype(np.float32)
    feeds = {"x": x, "h0": np.float32(0.5) * np.ones((), np.float32)}
    model, got, expected = _run(g.build(), feeds, chunk_rows)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["h"], 0.5 + x.sum(), rtol=1e-4)
    assert "Split" in [r.op for r in loop_plan(model).hoisted_nodes()]


def test_a_hoisted_split_of_bad_sizes_fails_as_the_body_does():
    body = GraphBuilder("b")
    x_t = body.input("x_t", np.float32)
    first, _ = body.node("Split", x_t, body.const(np.array([2, 5], np.int64)), axis=1,
                         outputs=2)
    body.node("Identity", first, outputs=["y"])
    body.output("y")
    outcome = _same_outcome(*_one_loop(body, np.ones((5, 3, 6), np.float32)))
    assert isinstance(outcome, str) and "do not split axis 1" in outcome, outcome


_REDUCTION_CASES = [  # (opset, axes, keepdims, noop_with_empty_axes, a row's shape)
    (opset, axes, keepdims, noop, row_shape)
    for opset in (11, 18) for axes in (None, [], [0], [-1], [1, 0])
    for keepdims, noop in ((1, 0), (0, 0), (1, 1)) for row_shape in ((3, 4), ())
    if (row_shape or axes in (None, [])) and not (noop and opset < 18)]


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceSumSquare",
                                "ReduceL2", "ReduceLogSumExp"])
@pytest.mark.parametrize("opset, axes, keepdims, noop, row_shape", _REDUCTION_CASES, ids=str)
def test_reductions_of_rows_are_hoisted(rng, op, opset, axes, keepdims, noop, row_shape):
    """A reduction of a sliced row, its axes (an attribute before opset 18, an input from it)
    counted from the row's axes: as the reference driver runs it a row at a time, every axis of
    a row (none named) too, and a row of one number."""
    body = GraphBuilder("b", opset=opset)
    x_t = body.input("x_t", np.float32)
    attrs = {"keepdims": keepdims, **({"noop_with_empty_axes": noop} if opset >= 18 else {})}
    if opset < 18:
        inputs = [x_t]
        if axes:
            attrs["axes"] = axes
    else:
        inputs = [x_t] if axes is None else [x_t, body.const(np.array(axes, np.int64))]
    reduced = body.node(op, *inputs, **attrs)
    body.output(body.node("Add", reduced, body.const(np.float32(1)), outputs=["y"]))
    x = (np.abs(rng.standard_normal((6, *row_shape))) + 0.5).astype(np.float32)
    graph, feeds = _one_loop(body, x, opset=opset)
    for rows in (None, 4):
        with chunks_of(rows):
            _same_outcome(graph, feeds)
    hoisted = [r.output for w in loop_plan(cyloop.Model(graph, driver="cython")).hoisted
               for r in w.nodes]
    assert reduced in hoisted


def test_a_buffer_a_view_still_reads_is_not_reused_in_place():
    body = GraphBuilder("b")
    x2 = body.node("Mul", body.input("x_t", np.float32), body.const(np.float32(2)))
    body.output(body.node("Unsqueeze", x2, body.const(np.array([0], np.int64)), outputs=["u"]),
                body.node("Add", x2, body.const(np.float32(1)), outputs=["z"]))
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    out = _same_outcome(*_one_loop(body, x, outputs=("u", "z")))
    np.testing.assert_array_equal(out["us"][:, 0], 2 * x)


def test_in_place_reuse_never_changes_a_result_type():
    body = GraphBuilder("b")
    a = body.node("Add", body.input("x_t", np.int32), body.const(np.int32(1)), domain="openvino")
    body.output(body.node("Sqrt", a, domain="openvino", outputs=["y"]))
    x = np.arange(15, dtype=np.int32).reshape(5, 3)
    assert _same_outcome(*_one_loop(body, x))["ys"].dtype == np.float64


@pytest.mark.parametrize("case", ["dead matmul", "0-d matmul", "unsqueeze -3", "squeeze -2",
                                  "openvino squeeze -2", "add of another shape",
                                  "prelu of another shape"])
def test_errors_of_hoisted_nodes_are_the_body_errors(case):
    """(An elementwise step is probed on its first row only when its call on the chunk fails:
    the error is still the row's, whose shapes it names, not the chunk's.)"""
    body = GraphBuilder("b")
    x_t = body.input("x_t", np.float32)
    extra = {}
    x = np.ones((5, 3), np.float32)
    if case in ("add of another shape", "prelu of another shape"):
        op = "Add" if case.startswith("add") else "PRelu"
        y = body.node(op, x_t, body.const(np.ones(4, np.float32)), outputs=["y"])
    elif case == "dead matmul":  # read by nothing: it must still fail
        body.node("MatMul", x_t, body.input("w", np.float32))
        extra = {"w": np.ones((4, 2), np.float32)}
        y = body.node("Add", x_t, body.const(np.float32(1)), outputs=["y"])
    elif case == "0-d matmul":
        x = np.ones(4, np.float32)
        y = body.node("MatMul", x_t, body.input("w", np.float32), outputs=["y"])
        extra = {"w": np.ones((4, 2), np.float32)}
    elif case == "unsqueeze -3":
        y = body.node("Unsqueeze", x_t, body.const(np.array([-3], np.int64)), outputs=["y"])
    else:
        domain = "openvino" if case.startswith("openvino") else ""
        y = body.node("Squeeze", x_t, body.const(np.array([-2], np.int64)), domain=domain,
                      outputs=["y"])
    body.output(y)
    for rows in (None, 1):
        with chunks_of(rows):
            outcome = _same_outcome(*_one_loop(body, x, extra))
        assert isinstance(outcome, str)


def test_a_model_that_ran_still_raises_the_body_error_on_new_shapes():
    """A hoisted step's probe (its own kernel on the first row) runs once per input signature:
    after runs that passed, feeds of another shape or, for a small operand, other values are
    probed again and fail as the body fails. Each bad feed here makes an Unsqueeze's axis
    out of range for a row, but not for the chunk, which has one axis more: only the probe
    can tell."""
    body = GraphBuilder("b")
    y = body.node("MatMul", body.input("x_t", np.float32), body.input("w", np.float32))
    body.output(body.node("Unsqueeze", y, body.input("axes", np.int64), outputs=["y"]))
    g = GraphBuilder("g")  # shapes not declared: the feeds may change them
    g.loop(body.build(), inputs=[(g.input("x", np.float32), SlicedInput(0, "x_t")),
                                 (g.input("W", np.float32), InvariantInput(0, "w")),
                                 (g.input("AXES", np.int64), InvariantInput(0, "axes"))],
           outputs=[ConcatOutput("y")], output_names=["ys"])
    g.output("ys")
    graph = g.build()
    good = {"x": np.ones((5, 4), np.float32), "W": np.ones((2, 4, 70), np.float32),
            "AXES": np.array([-3])}
    models = [cyloop.Model(graph, driver=driver) for driver in ("cython", "python")]
    lower_rank = dict(good, W=np.ones((4, 70), np.float32))  # too large to count by value
    other_axis = dict(good, AXES=np.array([-4]))
    for feeds in (good, good, lower_rank, good, other_axis, good):
        outcomes = []
        for model in models:
            try:
                outcomes.append(model.run(feeds)["ys"])
            except cyloop.CyloopError as e:
                outcomes.append(f"{type(e).__name__}: {e}")
        if feeds is good:
            np.testing.assert_array_equal(outcomes[0], outcomes[1])
        else:
            assert isinstance(outcomes[0], str) and isinstance(outcomes[1], str)
            assert outcomes[0] == outcomes[1]


def test_a_probe_on_scalar_rows_runs_once_per_signature(monkeypatch):
    """Row 0 of a value with one element a row (the iteration number cast, say) is a numpy
    scalar: its probe is remembered by type and value like a small array's, not run again on
    every run. (Elementwise steps are probed only when their call fails: the Unsqueeze alone
    is.)"""
    body = GraphBuilder("b")
    i = body.input("i", np.int64, ())
    body.input("cond_in", np.bool_, ())
    shifted = body.node("Add", body.node("Cast", i, to=np.float32), body.input("k", np.float32))
    body.output(body.node("Identity", "cond_in", outputs=["c"]),
                body.node("Unsqueeze", shifted, body.const(np.array([0], np.int64)),
                          outputs=["f"]))
    g = GraphBuilder("g")
    g.loop(body.build(), inputs=[(g.input("K", np.float32), InvariantInput(0, "k"))],
           outputs=[ConcatOutput("f")], trip_count=5, iteration_param="i",
           cond_param="cond_in", cond_result="c", output_names=["fs"])
    g.output("fs")
    model = cyloop.Model(g.build(), driver="cython")
    fresh, real = [], _chunks._probe

    def counted(step, row):
        key = tuple(_chunks._signature(a) for a in row)
        if key not in step.probed:
            fresh.append(step.label)
        real(step, row)

    monkeypatch.setattr(_chunks, "_probe", counted)
    for k in (2.0, 2.0, 2.0, 3.0):
        got = model.run({"K": np.array(k, np.float32)})["fs"]
        np.testing.assert_array_equal(got, (np.arange(5, dtype=np.float32) + k)[:, None])
    # The Unsqueeze once, and again for K = 3 (its row 0, K itself, counts by value).
    assert len(fresh) == 2 and all("Unsqueeze" in label for label in fresh), fresh


def test_a_narrow_iteration_number_overflows_where_the_body_would():
    body = GraphBuilder("b")
    i = body.input("i", np.uint8, ())
    body.input("cond_in", np.bool_, ())
    body.output(body.node("Identity", "cond_in", outputs=["c"]),
                body.node("Cast", i, to=np.float32, outputs=["f"]))
    g = GraphBuilder("g")
    g.loop(body.build(), inputs=[], outputs=[ConcatOutput("f")], trip_count=300,
           iteration_param="i", cond_param="cond_in", cond_result="c", output_names=["fs"])
    g.output("fs")
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ExecutionError, match="256 out of bounds for uint8"):
            cyloop.Model(g.build(), driver=driver).run({})


# The chunk size is a measured choice (chunks.Hoist.sizing): every budget gives the reference
# driver's results, each is timed per row (the last, cut-short chunk of a run included) and the
# plan shows the choice; tune=False keeps the default.

def _rnn_feeds(rng, steps, batch=4, features=8, hidden=16):
    return {"x": rng.standard_normal((steps, batch, features)).astype(np.float32),
            "h0": rng.standard_normal((batch, hidden)).astype(np.float32),
            "W": rng.standard_normal((features, hidden)).astype(np.float32),
            "U": rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.3,
            "B": rng.standard_normal(hidden).astype(np.float32)}


def _hoist_of(model):
    (loop,) = model._compiled.loops
    return loop.hoist


@pytest.mark.parametrize("budget", list(_chunks.CHUNK_BUDGETS))
def test_every_chunk_size_candidate_gives_the_reference_drivers_results(rng, budget):
    graph = _rnn_graph(0, 1, False, False)
    feeds = _rnn_feeds(rng, steps=3000)
    fast = cyloop.Model(graph, driver="cython")
    _hoist_of(fast).sizing.fix(budget)
    got = fast.run(feeds)
    expected = cyloop.Model(graph, driver="python").run(feeds)
    for name in ("h_last", "hs"):
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6)
    row_bytes = 4 * 16 * 4  # one [batch, hidden] row of x_t W
    rows = min(max(_chunks.CHUNK_BUDGETS[budget] // row_bytes, _chunks.MIN_CHUNK_ROWS),
               _chunks.MAX_CHUNK_ROWS)
    first = _chunks.FIRST_CHUNK_ROWS
    assert _counters(fast)["hoist_chunks"] == 1 + -(-(3000 - first) // rows)
    (sizing,) = loop_plan(fast).choices_of("chunk size")
    assert sizing.fixed == budget


def test_the_chunk_size_is_timed_per_row_and_the_fastest_kept(rng):
    """Chunks are timed from one to the next; a chunk the loop's end cuts short is timed up to
    that end (per row, whatever its length), so candidates bigger than the loop still complete
    their trial."""
    graph = _rnn_graph(0, 1, False, False)
    steps = 1200  # 16 first rows, then 1184: 512-row chunks (128 KiB), or cut short
    feeds = _rnn_feeds(rng, steps)
    model = cyloop.Model(graph, driver="cython", tune="at once")
    sizing = _hoist_of(model).sizing
    (choice,) = loop_plan(model).choices_of("chunk size")
    assert not choice.trials and choice.fixed is None and choice.candidates[0] == "512 KiB"
    expected = cyloop.Model(graph, driver="python").run(feeds)
    for _ in range(40):
        got = model.run(feeds)
        np.testing.assert_allclose(got["hs"], expected["hs"], rtol=1e-5, atol=1e-6)
    (trial,) = sizing.trials.values()
    assert trial.choice in _chunks.CHUNK_BUDGETS
    # Each budget ran its early rounds at least (a clearly slower one then drops out).
    assert all(len(samples) >= EARLY_ROUNDS for samples in trial.samples.values())
    # Seconds per row, not per chunk: a chunk and its iterations take milliseconds.
    assert all(0 < s < 1e-3 for samples in trial.samples.values() for s in samples)
    (choice,) = loop_plan(model).choices_of("chunk size")
    (timing,) = choice.trials
    assert timing.on.startswith("rows of 256 B (512 KiB = 2048 rows"), timing
    assert timing.chosen == trial.choice and choice.per == "row" and choice.settled


def test_the_first_row_probe_opens_no_trial_on_the_hoisted_product(rng):
    """The probe runs the hoisted MatMul's own kernel on one row's shapes, once: it takes the
    default formulation untimed, so no trial on that shape waits forever for calls that never
    come (nor keeps every formulation's copy of the weight), and the plan does not list it."""
    graph = _rnn_graph(0, 1, False, False)
    feeds = _rnn_feeds(rng, steps=200)
    model = cyloop.Model(graph, driver="cython")
    expected = cyloop.Model(graph, driver="python").run(feeds)
    np.testing.assert_allclose(model.run(feeds)["hs"], expected["hs"], rtol=1e-5, atol=1e-6)
    ((_, product),) = model._compiled.loops[0].facts().hoisted_kernels
    one_row = ((4, 8), (8, 16), "f")  # x_t [batch, features] @ W
    assert one_row not in abilities_of(product).measured.trials
    assert all(m > 4 for (m, _), _, _ in abilities_of(product).measured.trials)
    assert not any((t.on or "").startswith("[4,8] @ [8,16]")
                   for c in loop_plan(model).choices for t in c.trials)


def test_a_runs_first_chunk_opens_no_trial_on_the_hoisted_product(rng):
    """A run's first chunk is a few rows, a shape of its own met once a run: its product runs
    the default formulation untimed, so a loop that fits in it opens no trial (which would take
    a run a sample) and no other formulation makes a copy of the weight; a longer loop's later
    chunks do open one."""
    graph = _rnn_graph(0, 1, False, False)
    model = cyloop.Model(graph, driver="cython")
    ((_, product),) = model._compiled.loops[0].facts().hoisted_kernels
    short = _rnn_feeds(rng, steps=_chunks.FIRST_CHUNK_ROWS)
    expected = cyloop.Model(graph, driver="python").run(short)
    for _ in range(3):
        np.testing.assert_allclose(model.run(short)["hs"], expected["hs"], rtol=1e-5,
                                   atol=1e-6)
    assert abilities_of(product).measured.trials == {}
    assert not any(weights.remembers() for name, weights in product.prepared.items()
                   if name != "rows")
    model.run(_rnn_feeds(rng, steps=4 * _chunks.FIRST_CHUNK_ROWS))
    assert abilities_of(product).measured.trials


def test_chunks_of_a_size_on_trial_are_no_samples_of_the_kernels_trials(rng):
    """While chunk sizes are on trial, only the default size's chunks time the hoisted product:
    the others' shapes are met only while that trial lasts, so trials on them would never
    end (and hold every candidate's copy of the weight)."""
    graph = _rnn_graph(0, 1, False, False)
    model = cyloop.Model(graph, driver="cython", tune="at once")
    (loop,) = model._compiled.loops
    if loop.products is not None:  # (on one core, where each product's formulation is measured)
        loop.products.fix(BY_BLAS)
    hoist = _hoist_of(model)
    ((_, product),) = loop.facts().hoisted_kernels
    events = []
    next_rows, report = hoist.next_rows, abilities_of(product).measured.report

    def chunk_rows(done, row_bytes):
        rows = next_rows(done, row_bytes)
        picked = hoist._timing.picked
        events.append(("chunk", done, None if picked is None else picked[1]))
        return rows

    def sample(trial, name, seconds):
        events.append(("sample",))
        return report(trial, name, seconds)

    hoist.next_rows, abilities_of(product).measured.report = chunk_rows, sample
    # rows of 64 x 64 floats (16 KiB): the three sizes make chunks of 32, 16 and 8 rows
    feeds = _rnn_feeds(rng, steps=600, batch=64, hidden=64)
    np.testing.assert_allclose(model.run(feeds)["hs"],
                               cyloop.Model(graph, driver="python").run(feeds)["hs"],
                               rtol=1e-4, atol=1e-5)
    default = next(iter(_chunks.CHUNK_BUDGETS))
    sized = [e for e in events if e[0] == "chunk"]
    assert {e[2] for e in sized} >= set(_chunks.CHUNK_BUDGETS)  # every size had its turn
    current = None
    for event in events:
        if event[0] == "chunk":
            current = event
        else:  # a product sample: never the first chunk, nor another size's while on trial
            assert current[1] > 0 and current[2] in (None, default), current
    assert any(e[0] == "sample" for e in events)


def test_untuned_models_keep_the_default_chunk_size(rng):
    graph = _rnn_graph(0, 1, False, False)
    model = cyloop.Model(graph, driver="cython", tune=False)
    model.run(_rnn_feeds(rng, 100))
    sizing = _hoist_of(model).sizing
    assert sizing.fixed == next(iter(_chunks.CHUNK_BUDGETS)) and not sizing.trials


def test_a_gather_with_a_bad_axis_is_not_hoisted_and_its_kernel_says_why():
    """Hoisting reads Gather's axis before any kernel is built: a bad one leaves the node in
    the body, where building its kernel reports it (found by the fuzzer: it was a ValueError)."""
    graph = cyloop.load(_onnx_gather_loop(0, 17)).graph
    body = graph.nodes[0].attrs["spec"].body
    gather = next(node for node in body.nodes if node.op_type == "Gather")
    gather.attrs["axis"] = "abc"
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ModelError, match="bad attributes for Gather"):
            cyloop.Model(graph, driver=driver)


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_values_the_pass_adds_take_names_the_body_does_not_use(rng, chunk_rows):
    """Hoisting names a packed sliced part '<part>, packed' and a cell's input projection
    '<input> W + b'. Where the body already has a value of that name (here invariant inputs it
    reads), the pass picks another: the body still reads its own values."""
    body = GraphBuilder("clash_body", opsets={OPENVINO_DOMAIN: 5})
    x_t, h, acc = body.input("x_t", np.float32), body.input("h", np.float32), \
        body.input("acc", np.float32)
    packed_twin, projection_twin = body.input("x_t, packed"), body.input("x_t W + b")
    w, r, b = body.input("w"), body.input("r"), body.input("b")
    body.node("RNNCell", x_t, h, w, r, b, outputs=["h_next"], domain=OPENVINO_DOMAIN,
              hidden_size=4)
    total = body.node("Add", body.node("Add", acc, x_t), packed_twin)
    body.output(body.node("Add", body.node("Mul", total, projection_twin), acc,
                          outputs=["acc_next"]))
    body.output("h_next")
    g = GraphBuilder("clash", opsets={OPENVINO_DOMAIN: 5})
    names = ["x", "h0", "acc0", "P", "Q", "W", "R", "B"]
    x, h0, acc0, p, q, w_, r_, b_ = (g.input(name, np.float32) for name in names)
    g.loop(body.build(), inputs=[(x, SlicedInput(0, "x_t", axis=1)),
                                 (h0, CarriedInput(0, "h", "h_next")),
                                 (acc0, CarriedInput(0, "acc", "acc_next")),
                                 (p, InvariantInput(0, "x_t, packed")),
                                 (q, InvariantInput(0, "x_t W + b")),
                                 (w_, InvariantInput(0, "w")), (r_, InvariantInput(0, "r")),
                                 (b_, InvariantInput(0, "b"))],
           outputs=[LastOutput("acc_next"), ConcatOutput("h_next")],
           output_names=["total", "hs"])
    g.output("total", "hs")
    feeds = {"x": rng.standard_normal((2, 9, 4)).astype(np.float32),
             "h0": rng.standard_normal((2, 4)).astype(np.float32),
             "acc0": np.zeros((2, 4), np.float32),
             "P": rng.standard_normal((2, 4)).astype(np.float32),
             "Q": rng.standard_normal((2, 4)).astype(np.float32),
             "W": rng.standard_normal((4, 4)).astype(np.float32),
             "R": rng.standard_normal((4, 4)).astype(np.float32),
             "B": rng.standard_normal(4).astype(np.float32)}
    model, got, expected = _run(g.build(), feeds, chunk_rows)
    for name in ("total", "hs"):
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)
    plan = loop_plan(model)
    assert "input projection" in [w.how for w in plan.hoisted] and _packed(plan) == ["x_t"], plan


# A hoisted MatMul whose only reader adds a static bias joins the bias to its GEMM as one more
# row of the weight (chunks.bias_joined); operands the joined form does not cover run the two
# kernels in turn. Either way both drivers agree, errors included.

def _biased_loop(x, w, b, domain, transposed, bias_first, emit_product=False, gemm=None):
    """``y = x_t @ w + b`` (w^T if `transposed`): a MatMul, or with `gemm` (its attributes) an
    ONNX Gemm, given a C of ones where ``gemm["C"]``; then an Add of the bias."""
    ov = domain == OPENVINO_DOMAIN
    body = GraphBuilder("biased", opsets={OPENVINO_DOMAIN: 5} if ov else None)
    attrs = {"transpose_a": "false", "transpose_b": "true" if transposed else "false"} \
        if ov else {}
    if gemm is not None:
        gemm = dict(gemm)
        c = [body.const(np.ones(w.shape[0 if transposed else 1], w.dtype))] \
            if gemm.pop("C") else []
        xw = body.node("Gemm", body.input("x_t", x.dtype), body.input("w", w.dtype), *c,
                       outputs=["xw"], transB=int(transposed), **gemm)
    else:
        xw = body.node("MatMul", body.input("x_t", x.dtype), body.input("w", w.dtype),
                       domain=domain, outputs=["xw"], **attrs)
    bias = body.input("b", b.dtype)
    body.node("Add", *((bias, xw) if bias_first else (xw, bias)), domain=domain,
              outputs=["y"])
    body.output("y", *(["xw"] if emit_product else []))
    return _one_loop(body, x, {"w": w, "b": b}, ("y", "xw") if emit_product else ("y",))


def _joined_keys(model):
    """The weight shapes the hoisted product was called with (its trial keys)."""
    ((_, probe),) = model._compiled.loops[0].facts().hoisted_kernels
    return {key[1] for key in abilities_of(probe).measured.trials}


@pytest.mark.parametrize("chunk_rows", [None, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("row_rank, bias_shape", [(2, "n"), (2, "1n"), (2, "bn"), (2, "11n"),
                                                   (1, "n"), (1, "1n"), (2, "bn alike"),
                                                   (2, "bn alike but a -0.0"),
                                                   (1, "bn alike")])
@pytest.mark.parametrize("bias_first", [False, True])
@pytest.mark.parametrize("domain, transposed", [("", False), (OPENVINO_DOMAIN, False),
                                                (OPENVINO_DOMAIN, True)])
def test_a_static_bias_joins_the_hoisted_product(rng, chunk_rows, dtype, row_rank, bias_shape,
                                                 bias_first, domain, transposed):
    steps, batch, k, n = 40, 3, 5, 4  # (past the first chunk, which opens no trial)
    x = (rng.standard_normal((steps,) + (batch, k)[-row_rank:]) * 4).astype(dtype)
    w = (rng.standard_normal((n, k) if transposed else (k, n)) * 4).astype(dtype)
    b = (rng.standard_normal({"n": (n,), "1n": (1, n), "bn": (batch, n),
                              "11n": (1, 1, n)}.get(bias_shape, (1, n))) * 4).astype(dtype)
    if bias_shape.startswith("bn alike"):  # (rows of one, as jax2onnx's Expand of a bias)
        b = np.repeat(b, batch, axis=0)
        if bias_shape.endswith("-0.0"):
            b[:, 0], b[-1, 0] = 0, -0.0
    graph, feeds = _biased_loop(x, w, b, domain, transposed, bias_first)
    fast, got, expected = _run(graph, feeds, chunk_rows)
    row = x[0] @ (w.T if transposed else w)
    want = np.stack([x_t @ (w.T if transposed else w) + b for x_t in x])
    assert expected["ys"].shape == want.shape == got["ys"].shape and row.ndim == row_rank
    np.testing.assert_allclose(got["ys"], expected["ys"], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got["ys"], want, rtol=1e-5, atol=1e-4)
    assert "bias joined" in [w.how for w in loop_plan(fast).hoisted]
    assert _counters(fast)["hoist_chunks"] >= 1
    # A float bias of one row of the product's width, or of rows alike bit for bit (a -0.0 is
    # no 0.0), goes into the GEMM: its weight gains a row (a column, transposed) and the weight
    # alone is never multiplied.
    joined = dtype == np.float32 and bias_shape in ("n", "1n", "bn alike") \
        and b.ndim <= row_rank
    extra = 1 if joined else 0  # otherwise (integers, a bias it does not cover) the two kernels
    assert _joined_keys(fast) == {(n, k + extra) if transposed else (k + extra, n)}


def test_a_bias_of_rows_alike_that_widens_the_product_stays_apart(rng):
    """A row's product [1, N] plus a bias of 3 alike rows is [3, N]: the bias's one row would
    not widen it, so the Add runs as written."""
    x = rng.standard_normal((40, 1, 5)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    b = np.repeat(rng.standard_normal((1, 4)).astype(np.float32), 3, axis=0)
    graph, feeds = _biased_loop(x, w, b, "", False, False)
    fast, got, expected = _run(graph, feeds, None)
    assert got["ys"].shape == expected["ys"].shape == (40, 3, 4)
    np.testing.assert_allclose(got["ys"], expected["ys"], rtol=1e-5, atol=1e-5)
    assert _joined_keys(fast) == {(5, 4)}  # (the weight as it is: nothing joined)


@pytest.mark.parametrize("x_shape, n, bias_shape, dtype, joined", [
    ((40, 0, 5), 4, (0, 4), np.float32, False),    # an empty batch, its bias broadcast to it
    ((40, 1, 5), 0, (3, 0), np.float32, False),    # a width of 0 whose bias widens the product
    ((40, 3, 5), 0, (3, 0), np.float32, False),    # a width of 0, rows of the product's count
    ((40, 3, 5), 4, (3, 4), np.longdouble, False),  # rows alike of a type not compared
    ((40, 2, 3, 5), 4, (1, 3, 4), np.float32, True),  # rows alike of a rank-3 bias
    ((40, 3, 2, 5), 4, (3, 1, 4), np.float32, True)])
def test_odd_biases_of_rows_alike_join_or_run_as_written(rng, x_shape, n, bias_shape, dtype,
                                                           joined):
    """Biases of rows alike that are empty, widen a row's product, are of a type whose bits
    are not compared, or are of rank 3: the same as the body as written, joined where they can
    be."""
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal((x_shape[-1], n)).astype(dtype)
    b = np.broadcast_to(rng.standard_normal(n).astype(dtype), bias_shape).copy()
    graph, feeds = _biased_loop(x, w, b, "", False, False)
    fast, got, expected = _run(graph, feeds, None)
    want = np.stack([x_t @ w + b for x_t in x])
    assert got["ys"].shape == expected["ys"].shape == want.shape
    np.testing.assert_allclose(got["ys"], expected["ys"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["ys"].astype(np.float64), want.astype(np.float64),
                               rtol=1e-5, atol=1e-5)
    if x.size and n:  # (an empty product opens no trial)
        assert _joined_keys(fast) == {(x_shape[-1] + joined, n)}


@pytest.mark.parametrize("gemm, joined", [
    ({"C": False}, True), ({"C": True, "beta": 0.0}, True), ({"C": False, "alpha": 2.0}, False),
    ({"C": True}, False), ({"C": False, "transA": 1}, False)])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("alike", [False, True])
def test_a_gemm_that_is_only_its_product_joins_its_bias(rng, gemm, joined, transposed, alike):
    """An ONNX Gemm that is only ``A B`` (alpha 1, A as it is, no C or one beta 0 leaves out:
    jax2onnx writes x W so) joins the bias added to it as a MatMul does, one row or rows alike
    (jax2onnx broadcasts its bias to the batch's rows); any other Gemm keeps the Add apart."""
    steps, batch, k, n = 40, 3, 5, 4
    x = rng.standard_normal((steps, k if gemm.get("transA") else batch,
                             batch if gemm.get("transA") else k)).astype(np.float32)
    w = rng.standard_normal((n, k) if transposed else (k, n)).astype(np.float32)
    b = rng.standard_normal((1, n)).astype(np.float32)
    b = np.repeat(b, batch, axis=0) if alike else b
    graph, feeds = _biased_loop(x, w, b, "", transposed, False, gemm=gemm)
    fast, got, expected = _run(graph, feeds, None)
    np.testing.assert_allclose(got["ys"], expected["ys"], rtol=1e-5, atol=1e-5)
    a = x.swapaxes(1, 2) if gemm.get("transA") else x
    c = 1.0 if gemm["C"] and gemm.get("beta", 1.0) else 0.0  # (a C of ones)
    want = gemm.get("alpha", 1.0) * a @ (w.T if transposed else w) + c + b
    np.testing.assert_allclose(got["ys"], want, rtol=1e-5, atol=1e-5)
    plan = loop_plan(fast)
    assert any(w.how == "bias joined" and [(r.op, r.output) for r in w.nodes]
               == [("Gemm", "xw"), ("Add", "y")] for w in plan.hoisted) == joined, plan
    if joined:  # (the weight gained the bias's row: the product of x's rows and ones)
        assert _joined_keys(fast) == {(n, k + 1) if transposed else (k + 1, n)}


def test_a_product_something_else_reads_keeps_its_bias_apart(rng):
    x = rng.standard_normal((9, 3, 5)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    graph, feeds = _biased_loop(x, w, b, "", False, False, emit_product=True)
    fast, got, expected = _run(graph, feeds, None)
    assert "bias joined" not in [w.how for w in loop_plan(fast).hoisted]
    for name in ("ys", "xws"):
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["ys"], got["xws"] + b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bad", ["bias", "bias rows", "weight"])
@pytest.mark.parametrize("domain", ["", OPENVINO_DOMAIN])
def test_a_joined_step_fails_as_the_node_that_fails_would(domain, bad):
    """A bias of the wrong width, or of rows alike but not the product's count, fails in the
    Add, a weight of the wrong height in the MatMul, each named as the body names it."""
    x = np.ones((6, 3, 5), np.float32)
    w = np.ones((5 if bad == "bias" else 6 if bad == "weight" else 5, 4), np.float32)
    b = np.ones({"bias": (5,), "bias rows": (2, 4)}.get(bad, (4,)), np.float32)
    graph, feeds = _biased_loop(x, w, b, domain, False, False)
    message = _same_outcome(graph, feeds)
    assert isinstance(message, str)
    assert ("producing 'xw' failed" if bad == "weight" else "producing 'y' failed") in message


def test_untuned_a_joined_product_keeps_the_default_formulation(rng):
    x = rng.standard_normal((40, 3, 5)).astype(np.float32)
    graph, feeds = _biased_loop(x, rng.standard_normal((5, 4)).astype(np.float32),
                                rng.standard_normal(4).astype(np.float32), "", False, False)
    fast, got, expected = _run(graph, feeds, None, tune=False)
    np.testing.assert_allclose(got["ys"], expected["ys"], rtol=1e-5, atol=1e-5)
    plan = loop_plan(fast)
    assert any(c.hoisted and [r.op for r in c.nodes] == ["MatMul", "Add"] and c.fixed == "rows"
               for c in plan.choices), plan


@pytest.mark.parametrize("chunk_rows", [None, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("c_shape", [None, (), (4,), (1, 4), (3, 4), (3, 1)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (0.5, 2.0)])
@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (0, 1), (1, 0)])
def test_gemm_rows_are_one_product(rng, chunk_rows, dtype, c_shape, alpha, beta, trans_a,
                                   trans_b):
    """ONNX Gemm of x_t and static B, C: hoisted as one product over the chunk (A not
    transposed), its C joined to the product when alpha and beta are 1 and C is one row; a C
    of other rows, one Gemm per row. Both drivers and numpy agree."""
    steps, m, k, n = 40, 3, 5, 4  # (past the first chunk, which opens no trial)
    x = (rng.standard_normal((steps, k, m) if trans_a else (steps, m, k)) * 4).astype(dtype)
    w = (rng.standard_normal((n, k) if trans_b else (k, n)) * 4).astype(dtype)
    body = GraphBuilder("gemm")
    inputs = [body.input("x_t", dtype), body.input("w", dtype)]
    extra = {"w": w}
    if c_shape is not None:
        c = (rng.standard_normal(c_shape) * 4).astype(dtype)
        inputs.append(body.input("c", dtype))
        extra["c"] = c
    body.node("Gemm", *inputs, outputs=["y"], alpha=alpha, beta=beta, transA=trans_a,
              transB=trans_b)
    body.output("y")
    graph, feeds = _one_loop(body, x, extra)
    fast, got, expected = _run(graph, feeds, chunk_rows)
    a_rows = x.transpose(0, 2, 1) if trans_a else x
    want = alpha * (a_rows @ (w.T if trans_b else w))
    if c_shape is not None:
        want = want + beta * c
    if dtype == np.int32:
        np.testing.assert_array_equal(got["ys"], expected["ys"])
    else:
        np.testing.assert_allclose(got["ys"], expected["ys"], rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(got["ys"], want, rtol=1e-5, atol=1e-3)
    assert got["ys"].shape == want.shape
    hoisted = not trans_a
    assert (("Gemm", "y") in [(r.op, r.output) for r in loop_plan(fast).hoisted_nodes()]) == \
        hoisted
    if not hoisted:
        return
    ((_, kernel),) = fast._compiled.loops[0].facts().hoisted_kernels
    shapes = {key[1] for key in abilities_of(kernel).measured.trials}
    joined = (alpha, beta) == (1.0, 1.0) and dtype == np.float32 and c_shape in ((4,), (1, 4))
    per_row = c_shape in ((3, 4), (3, 1))
    extra_row = 1 if joined else 0
    plain = (n, k + extra_row) if trans_b else (k + extra_row, n)
    # One product over the chunk's rows (m rows a part), or one per part.
    assert shapes == {plain}
    rows_seen = {key[0][0] for key in abilities_of(kernel).measured.trials}
    assert rows_seen == {m} if per_row else rows_seen - {m}


# Nodes of static values alone (invariants, constants and what they make) run once a run.

def _broadcast_bias_graph(batch=3, hidden=4, stop_after=None, bias=None):
    """A loop whose body broadcasts an invariant bias b to [batch, hidden] as exporters spell it
    (a Concat of constants, a Reshape, an Expand: all of static values), adds it to x_t (a
    hoisted Add reading the broadcast) and scales the carried h by it (a node left in the body,
    reading the broadcast as a row). Stopping after `stop_after` iterations if given; the bias
    a constant of the model if given, else a feed "B"."""
    body = GraphBuilder("b")
    x_t, h_in, b = (body.input(name, np.float32) for name in ("x_t", "h_in", "b"))
    shape = body.node("Concat", body.const(np.array([1], np.int64)),
                      body.const(np.array([hidden], np.int64)), axis=0)
    wide = body.node("Expand", body.node("Reshape", b, shape),
                     body.const(np.array([batch, hidden], np.int64)), outputs=["wide"])
    y = body.node("Add", x_t, wide, outputs=["y"])
    h_out = body.node("Add", body.node("Mul", h_in, wide), y, outputs=["h_out"])
    outputs = [h_out, y]
    fields = {}
    if stop_after is not None:
        i = body.input("i", np.int64)
        body.input("cond_in", np.bool_, ())
        outputs.append(body.node("Less", i, body.const(np.int64(stop_after)), outputs=["go"]))
        fields = {"iteration_param": "i", "cond_param": "cond_in", "cond_result": "go"}
    body.output(*outputs)
    g = GraphBuilder("g")
    g.loop(body.build(), inputs=[(g.input("x", np.float32), SlicedInput(0, "x_t")),
                                 (g.input("h0", np.float32), CarriedInput(0, "h_in", "h_out")),
                                 (g.input("B", np.float32) if bias is None else g.const(bias, "B"),
                                  InvariantInput(0, "b"))],
           outputs=[LastOutput("h_out"), ConcatOutput("y")], output_names=["h", "ys"], **fields)
    g.output("h", "ys")
    return g.build()


def _once_steps(model) -> list:
    return [step for step in _hoist_of(model).steps if step.once]


def _counted_once_steps(model) -> dict:
    """Count the calls of the model's loop's once-a-run steps, by label (from now on)."""
    calls = {}
    for step in _once_steps(model):
        def counted(args, call=step.call, label=step.label):
            calls[label] = calls.get(label, 0) + 1
            return call(args)
        step.call = counted
        calls[step.label] = 0
    return calls


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_nodes_of_static_values_alone_run_once_a_run(rng, chunk_rows):
    graph = _broadcast_bias_graph()
    feeds = {"x": rng.standard_normal((7, 3, 4)).astype(np.float32),
             "h0": rng.standard_normal((3, 4)).astype(np.float32),
             "B": rng.standard_normal(4).astype(np.float32)}
    given = {name: value.copy() for name, value in feeds.items()}
    with chunks_of(chunk_rows):
        fast = cyloop.Model(graph, driver="cython")
        calls = _counted_once_steps(fast)
        runs = [fast.run(feeds), fast.run(dict(feeds, B=feeds["B"] * 2))]
    for name, value in given.items():  # (nothing the caller passed is written)
        np.testing.assert_array_equal(feeds[name], value, err_msg=name)
    model = cyloop.Model(graph, driver="python")
    for got, b in zip(runs, (feeds["B"], feeds["B"] * 2)):
        expected = model.run(dict(feeds, B=b))
        for name in expected:
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-6, err_msg=name)
    # The Reshape and the Expand, each once a run, however many chunks there were; the Concat,
    # of the body's constants alone, at the first run only (its result is kept: `_once`).
    assert sorted(label.split()[0] for label in calls) == ["Concat", "Expand", "Reshape"]
    assert {label.split()[0]: count for label, count in calls.items()} == {
        "Concat": 1, "Expand": 2, "Reshape": 2}
    assert _counters(fast)["hoist_chunks"] >= (7 if chunk_rows == 1 else 1) * 2
    assert _counters(fast)["hoisted_bytes"] == 2 * 7 * feeds["x"][0].nbytes  # (y's rows alone)
    plan = loop_plan(fast)
    assert any(w.how == "once" and [(r.op, r.output) for r in w.nodes] == [("Expand", "wide")]
               for w in plan.hoisted), plan
    assert plan.port("wide").role == "hoisted", plan  # the Mul reads it in the body


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_static_nodes_of_constants_alone_keep_their_results_from_run_to_run(rng, chunk_rows):
    """The same constant objects coming back make the same results: a once step runs at the
    first run only, and what it made is the same object in the next (a kernel recalls what it
    derived from it by identity). A feed, even of the same values, is computed again."""
    bias = rng.standard_normal(4).astype(np.float32)
    graph = _broadcast_bias_graph(bias=bias)
    with chunks_of(chunk_rows):
        fast = cyloop.Model(graph, driver="cython")
        calls = _counted_once_steps(fast)
        runs = []
        for _ in range(3):
            feeds = {"x": rng.standard_normal((7, 3, 4)).astype(np.float32),
                     "h0": rng.standard_normal((3, 4)).astype(np.float32)}
            runs.append((feeds, fast.run(feeds)))
    model = cyloop.Model(graph, driver="python")
    for feeds, got in runs:
        expected = model.run(feeds)
        for name in expected:
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-6, err_msg=name)
    assert sorted(label.split()[0] for label in calls) == ["Concat", "Expand", "Reshape"]
    assert set(calls.values()) == {1}
    (expand,) = [s for s in _once_steps(fast) if s.label.startswith("Expand")]
    wide = expand.kept[1]["wide"]
    assert not wide.flags.writeable
    np.testing.assert_array_equal(wide, np.broadcast_to(bias, (3, 4)))

    fed = cyloop.Model(_broadcast_bias_graph(), driver="cython")
    calls = _counted_once_steps(fed)
    feeds = {"x": rng.standard_normal((7, 3, 4)).astype(np.float32),
             "h0": rng.standard_normal((3, 4)).astype(np.float32), "B": bias.copy()}
    first = fed.run(feeds)
    feeds["B"] *= 2  # (the caller's array, changed in place between runs)
    second = fed.run(feeds)
    assert {label.split()[0]: count for label, count in calls.items()} == {
        "Concat": 1, "Expand": 2, "Reshape": 2}
    expected = cyloop.Model(_broadcast_bias_graph(), driver="python").run(feeds)
    for name in expected:
        np.testing.assert_allclose(second[name], expected[name], rtol=1e-6, err_msg=name)
        assert not np.allclose(first[name], second[name])


_SEEN: list = []  # what the "Seen" kernel was given as its second operand, call by call


@kernel("Seen", domain="test.cyloop")
def _seen(attrs):
    """``x + w``, keeping each w it is given (no batch form: it stays in the body)."""
    def seen(x, w):
        _SEEN.append(w)
        return x + w

    return seen


def _seen_graph(weight: np.ndarray | None):
    """A loop whose body reads Neg(W) (static: made once a run) as a row, in the body: W a
    constant of the model if `weight` is given, else a feed."""
    body = GraphBuilder("b", opsets={"test.cyloop": 1})
    x_t, w = body.input("x_t", np.float32), body.input("w", np.float32)
    body.output(body.node("Seen", x_t, body.node("Neg", w, outputs=["nw"]), domain="test.cyloop",
                          outputs=["y"]))
    g = GraphBuilder("g", opsets={"test.cyloop": 1})
    outer = g.input("W", np.float32) if weight is None else g.const(weight, "W")
    g.loop(body.build(), inputs=[(g.input("x", np.float32), SlicedInput(0, "x_t")),
                                 (outer, InvariantInput(0, "w"))],
           outputs=[ConcatOutput("y")], output_names=["ys"])
    g.output("ys")
    return g.build()


def test_a_row_of_a_static_value_of_constants_is_one_object_from_run_to_run(rng):
    """Every row of a value computed once a run is one view; made of constants alone, it is
    the same view the next run binds too (a kernel finds what it derived from it by identity).
    Made of a feed, it is made again each run, and follows the caller's changes."""
    weight = rng.standard_normal(3).astype(np.float32)
    fast = cyloop.Model(_seen_graph(weight), driver="cython")
    reference = cyloop.Model(_seen_graph(weight), driver="python")
    bound = []
    for _ in range(3):
        feeds = {"x": rng.standard_normal((4, 3)).astype(np.float32)}
        _SEEN.clear()
        got = fast.run(feeds)["ys"]
        bound += _SEEN
        np.testing.assert_array_equal(got, reference.run(feeds)["ys"])
    assert len(bound) == 12 and all(w is bound[0] for w in bound)
    np.testing.assert_array_equal(bound[0], -weight)

    fed = cyloop.Model(_seen_graph(None), driver="cython")
    feeds = {"x": rng.standard_normal((4, 3)).astype(np.float32), "W": weight.copy()}
    _SEEN.clear()
    first = fed.run(feeds)["ys"]
    feeds["W"] *= 2  # (the caller's array, changed in place between runs)
    second = fed.run(feeds)["ys"]
    assert _SEEN[0] is _SEEN[3] and _SEEN[4] is not _SEEN[0]
    np.testing.assert_array_equal(first, feeds["x"] - weight)
    np.testing.assert_array_equal(second, feeds["x"] - 2 * weight)


def test_a_static_node_of_small_values_keeps_its_results_while_the_values_stay(rng):
    """A node run once a run whose inputs are small values the run makes afresh (a feed here; a
    bound or a counter in exported loops) keeps the last run's results while the values are the
    same, whatever the objects; other values, in a new array or written in place, run it
    again."""
    weight = rng.standard_normal(3).astype(np.float32)
    fed = cyloop.Model(_seen_graph(None), driver="cython")
    x = rng.standard_normal((4, 3)).astype(np.float32)
    seen = []
    for w in (weight.copy(), weight.copy(), 2 * weight):
        _SEEN.clear()
        np.testing.assert_array_equal(fed.run({"x": x, "W": w})["ys"], x - w)
        seen.append(_SEEN[0])
    assert np.shares_memory(seen[1], seen[0]) and not np.shares_memory(seen[2], seen[0])
    feeds = {"x": x, "W": weight.copy()}
    fed.run(feeds)
    feeds["W"] *= 3  # (the caller's array, changed in place between runs)
    np.testing.assert_array_equal(fed.run(feeds)["ys"], x - 3 * weight)


@kernel("Recalled", domain="test.cyloop")
def _recalled(attrs):
    """``x + w``, from a copy of w kept while the same w object comes back (as a kernel keeping
    what it derived from a weight recalls it: accel/gemm.py `Prepared`)."""
    last = [None, None]

    def recalled(x, w):
        if last[0] is not w:
            last[:] = w, np.array(w, copy=True)
        return x + last[1]

    return recalled


def test_a_row_viewing_a_read_only_feed_made_writeable_is_viewed_anew(rng):
    """The caller's own read-only array, fed as the invariant a static Transpose views: once
    the caller makes it writeable and changes it, the next run's row is another view, so what
    a kernel derived from the last one is not taken for it."""
    body = GraphBuilder("b", opsets={"test.cyloop": 1})
    x_t, w = body.input("x_t", np.float32), body.input("w", np.float32)
    body.output(body.node("Recalled", x_t, body.node("Transpose", w, outputs=["tw"]),
                          domain="test.cyloop", outputs=["y"]))
    g = GraphBuilder("g", opsets={"test.cyloop": 1})
    g.loop(body.build(), inputs=[(g.input("x", np.float32), SlicedInput(0, "x_t")),
                                 (g.input("W", np.float32), InvariantInput(0, "w"))],
           outputs=[ConcatOutput("y")], output_names=["ys"])
    g.output("ys")
    fast = cyloop.Model(g.build(), driver="cython")
    weight = rng.standard_normal(3).astype(np.float32)
    weight.flags.writeable = False
    feeds = {"x": rng.standard_normal((4, 3)).astype(np.float32), "W": weight}
    for _ in range(2):
        np.testing.assert_array_equal(fast.run(feeds)["ys"], feeds["x"] + weight)
    weight.flags.writeable = True
    weight *= 2
    np.testing.assert_array_equal(fast.run(feeds)["ys"], feeds["x"] + weight)


def test_static_nodes_run_once_only_in_runs_that_iterate_and_fail_as_the_body_would(rng):
    graph = _broadcast_bias_graph(stop_after=2)
    feeds = {"x": rng.standard_normal((7, 3, 4)).astype(np.float32),
             "h0": rng.standard_normal((3, 4)).astype(np.float32),
             "B": rng.standard_normal(5).astype(np.float32)}  # [5] does not reshape to [1, 4]
    outcome = _same_outcome(graph, feeds)
    assert isinstance(outcome, str) and "Reshape node producing" in outcome
    empty = dict(feeds, x=feeds["x"][:0])  # no iteration: nothing computed, nothing raised
    fast = cyloop.Model(graph, driver="cython")
    calls = _counted_once_steps(fast)
    got = fast.run(empty)
    expected = cyloop.Model(graph, driver="python").run(empty)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
        assert got[name].shape == expected[name].shape
    assert set(calls.values()) == {0}
    good = dict(feeds, B=feeds["B"][:4])
    got = _same_outcome(graph, good)
    assert got["ys"].shape == (3, 3, 4)  # iterations 0..2: the condition read at 2 is false


def test_a_static_node_making_a_body_output_stays_in_the_body(rng):
    """Its value is kept or emitted an iteration at a time: rows of it made a chunk ahead
    would be copies a loop stopping early made for nothing."""
    body = GraphBuilder("b")
    x_t, b = body.input("x_t", np.float32), body.input("b", np.float32)
    body.output(body.node("Neg", b, outputs=["nb"]), body.node("Add", x_t, b, outputs=["y"]))
    graph, feeds = _one_loop(body, rng.standard_normal((5, 3)).astype(np.float32),
                             {"b": rng.standard_normal(3).astype(np.float32)}, ("nb", "y"))
    fast, got, expected = _run(graph, feeds, None)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert _once_steps(fast) == []


def test_a_gather_of_a_computed_static_by_the_iteration_number_stays_in_the_body(rng):
    """A Gather source's rows are counted before the run's first chunk (`Hoist.limit`), before
    any static value is computed: Gather(Neg(w), i) is read in the body, from Neg's row."""
    body = GraphBuilder("b")
    i, w = body.input("i", np.int64), body.input("w", np.float32)
    x_t = body.input("x_t", np.float32)
    row = body.node("Gather", body.node("Neg", w, outputs=["nw"]), i, axis=0)
    body.output(body.node("Add", x_t, row, outputs=["y"]))
    g = GraphBuilder("g")
    g.loop(body.build(), inputs=[(g.input("x", np.float32), SlicedInput(0, "x_t")),
                                 (g.input("W", np.float32), InvariantInput(0, "w"))],
           outputs=[ConcatOutput("y")], output_names=["ys"], iteration_param="i")
    g.output("ys")
    feeds = {"x": rng.standard_normal((6, 3)).astype(np.float32),
             "W": rng.standard_normal((6, 3)).astype(np.float32)}
    fast, got, expected = _run(g.build(), feeds, 2)
    np.testing.assert_array_equal(got["ys"], expected["ys"])
    np.testing.assert_array_equal(got["ys"], feeds["x"] - feeds["W"])
    assert [step.label for step in _once_steps(fast)] == ["Neg node producing 'nw'"]
    assert not _hoist_of(fast).gathers


def test_random_nodes_are_never_computed_once(rng):
    """A random node's value changes each iteration, though its inputs are all static."""
    body = GraphBuilder("b")
    x_t = body.input("x_t", np.float32)
    noise = body.node("RandomUniform", body.const(np.array([3], np.int64)),
                      body.const(np.float32(0)), body.const(np.float32(1)), domain="openvino",
                      output_type="float32", global_seed=1, op_seed=2)
    body.output(body.node("Add", x_t, noise, outputs=["y"]))
    graph, feeds = _one_loop(body, np.zeros((4, 3), np.float32))
    fast, got, expected = _run(graph, feeds, None)
    np.testing.assert_array_equal(got["ys"], expected["ys"])
    assert not np.array_equal(got["ys"][0], got["ys"][1])
    assert _once_steps(fast) == []


@pytest.mark.parametrize("failing", ["row step first", "once step first"])
def test_the_first_failing_node_in_the_body_fails_first(failing):
    """Static nodes run in their place among the hoisted ones: of two nodes that fail, the one
    the body meets first raises, as in the body."""
    body = GraphBuilder("b")
    x_t, w, b = (body.input(name, np.float32) for name in ("x_t", "w", "b"))

    def row():  # fails on the first row: x_t [3] + w [4]
        return body.node("Add", x_t, w, outputs=["y"])

    def static():  # fails once a run: b [5] as [2, 2]
        return body.node("Reshape", b, body.const(np.array([2, 2], np.int64)))

    made = [row(), static()] if failing == "row step first" else [static(), row()]
    body.output(made[0] if failing == "row step first" else made[1])
    graph, feeds = _one_loop(body, np.ones((4, 3), np.float32),
                             {"w": np.ones(4, np.float32), "b": np.ones(5, np.float32)})
    outcome = _same_outcome(graph, feeds)
    first = "Add node producing 'y'" if failing == "row step first" else "Reshape node"
    assert isinstance(outcome, str) and first in outcome, outcome


def test_a_static_node_with_an_unnamed_output_and_one_out_of_memory():
    """A Split of a static value with an output nobody names; a ConstantOfShape too large to
    make fails as the body fails: a ResourceLimitError naming the node."""
    body = GraphBuilder("b")
    x_t, w = body.input("x_t", np.float32), body.input("w", np.float32)
    body.node("Split", w, body.const(np.array([2, 2], np.int64)), outputs=["first", ""], axis=0)
    body.output(body.node("Add", x_t, "first", outputs=["y"]))
    graph, feeds = _one_loop(body, np.ones((4, 2), np.float32),
                             {"w": np.arange(4.0, dtype=np.float32)})
    out = _same_outcome(graph, feeds)
    np.testing.assert_array_equal(out["ys"], np.ones((4, 2)) + [0, 1])
    assert len(_once_steps(cyloop.Model(graph, driver="cython"))) == 1

    body = GraphBuilder("b")
    x_t = body.input("x_t", np.float32)
    huge = body.node("ConstantOfShape", body.const(np.array([2 ** 50], np.int64)))
    body.output(body.node("Add", x_t, body.node("ReduceMax", huge, keepdims=0), outputs=["y"]))
    graph, feeds = _one_loop(body, np.ones((4, 2), np.float32))
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ResourceLimitError, match="ConstantOfShape node producing"):
            cyloop.Model(graph, driver=driver).run(feeds)


def test_values_computed_once_are_each_runs_own_under_threads(rng):
    """Threads sharing a model, each with its own bias: each run's broadcast is its own."""
    import concurrent.futures

    graph = _broadcast_bias_graph()
    fast, reference = (cyloop.Model(graph, driver=driver) for driver in ("cython", "python"))
    feeds = [{"x": rng.standard_normal((1000, 3, 4)).astype(np.float32),
              "h0": rng.standard_normal((3, 4)).astype(np.float32),
              "B": np.full(4, 0.2 * k - 0.3, np.float32)} for k in range(4)]
    want = [reference.run(f) for f in feeds]
    with chunks_of(2), concurrent.futures.ThreadPoolExecutor(4) as pool:
        for _ in range(5):
            for got, expected in zip(pool.map(fast.run, feeds), want):
                for name in expected:
                    np.testing.assert_allclose(got[name], expected[name], rtol=1e-6)


def test_a_value_computed_once_read_inside_an_if():
    """A subgraph's outer read of a static node's result: its row, each iteration."""
    then_b, else_b = GraphBuilder("then"), GraphBuilder("else")
    then_b.output(then_b.node("Add", "x_t", "nb"))
    else_b.output(else_b.node("Identity", "x_t"))
    body = GraphBuilder("b")
    body.input("x_t", np.float32)  # (read by the branches)
    b, flag = body.input("b", np.float32), body.input("flag")
    body.node("Neg", b, outputs=["nb"])
    branch = body.node("If", flag, then_branch=then_b.build(), else_branch=else_b.build())
    body.output(body.node("Identity", branch, outputs=["y"]))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for value in (True, False):
        graph, feeds = _one_loop(body, x, {"b": np.ones(3, np.float32),
                                           "flag": np.array(value)})
        out = _same_outcome(graph, feeds)
        np.testing.assert_array_equal(out["ys"], x - 1 if value else x)
    assert [step.label for step in _once_steps(cyloop.Model(graph, driver="cython"))] == \
        ["Neg node producing 'nb'"]


def test_a_once_step_marks_its_results_read_only_but_not_an_input_it_hands_back():
    """A value computed once a run is read-only (kernels may keep what they derive from it); a
    step that hands back one of its inputs (AtLeast, where the shape covers) gets a read-only
    view of it, and the input itself keeps its flags."""
    given_input, made = np.zeros(3), None

    def call(args):
        nonlocal made
        made = np.ones(2)
        return args[0], made

    step = _chunks.HoistStep(call, ["a"], ["same", "new"], "a step", once=True)
    values = _chunks._once(step, [given_input])
    assert given_input.flags.writeable and values["same"].base is given_input
    assert not values["same"].flags.writeable and not values["new"].flags.writeable
    assert values["new"] is made


def test_a_hoisted_kernel_out_of_memory_fails_as_the_body_would():
    """Out of memory in a hoisted kernel (a joined step's fallback, say) is the ResourceLimitError
    the body raises for it; another error an ExecutionError; each naming the node."""
    def failing(error):
        def fn():
            raise error
        return fn

    with pytest.raises(cyloop.ResourceLimitError, match="node 'xw' failed: no room"):
        _chunks._labelled("node 'xw'", failing(MemoryError("no room")))
    with pytest.raises(cyloop.ExecutionError, match="node 'xw' failed: ValueError: bad"):
        _chunks._labelled("node 'xw'", failing(ValueError("bad")))


# Shapes that no iteration changes: of rows (every row of a chunk has one), and of a carried
# buffer a scatter updates (jax2onnx bounds its scatter's index by the buffer's shape).

def _hoisted_labels(model) -> list[str]:
    return [step.label for step in _hoist_of(model).steps]


def _broadcast_body(x_rank, target, op, attrs):
    """y = 2 * Expand(x_t, target) (or OpenVINO's Broadcast with `attrs`), y made in the body."""
    body = GraphBuilder("b")
    x_t = body.input("x_t", np.float32)
    domain = "openvino" if op == "Broadcast" else ""
    wide = body.node(op, x_t, body.const(np.array(target, np.int64)), domain=domain,
                     outputs=["wide"], **attrs)
    body.output(body.node("Mul", wide, body.const(np.float32(2)), outputs=["y"]))
    return body, np.arange(5 * 3 ** x_rank, dtype=np.float32).reshape((5,) + (3,) * x_rank)


@pytest.mark.parametrize("chunk_rows", [None, 2])
@pytest.mark.parametrize("x_rank, target", [(1, [2, 1, 3]), (1, [4, 1]), (1, [3]), (1, [1]),
                                            (2, [3]), (2, [1, 1, 3, 1]), (0, [2, 2])])
@pytest.mark.parametrize("op, attrs", [("Expand", {}), ("Broadcast", {"mode": "bidirectional"}),
                                       ("Broadcast", {})], ids=["expand", "bidirectional", "numpy"])
def test_rows_broadcast_to_a_static_shape_are_hoisted(chunk_rows, x_rank, target, op, attrs):
    body, x = _broadcast_body(x_rank, target, op, attrs)
    with chunks_of(chunk_rows):
        outcome = _same_outcome(*_one_loop(body, x))
        model = cyloop.Model(_one_loop(body, x)[0], driver="cython")
    numpy_mode = op == "Broadcast" and not attrs
    fits = np.broadcast_shapes(x.shape[1:], tuple(target)) == tuple(target)
    if numpy_mode and not fits:  # (numpy mode: the target is the result's shape, or it fails)
        assert isinstance(outcome, str) and "Broadcast node producing 'wide' failed" in outcome
    else:
        np.testing.assert_array_equal(
            outcome["ys"], 2 * np.stack([np.broadcast_to(x_t, np.broadcast_shapes(
                x_t.shape, tuple(target))) for x_t in x]))
    assert f"{op} node producing 'wide'" in _hoisted_labels(model)


def _operand_rows_loop(body, operand, rows, x, data_rows):
    """`body`'s outcome over the rows of `rows` (its input `operand`) and of x (``x_t``), or
    with x[0] as the invariant ``table`` (not `data_rows`), emitting y; both drivers agree."""
    g = GraphBuilder("g")
    inputs = [(g.input("rows", rows.dtype), SlicedInput(0, operand)),
              (g.input("x", np.float32), SlicedInput(0, "x_t")) if data_rows else
              (g.input("T", np.float32), InvariantInput(0, "table"))]
    g.loop(body.build(), inputs=inputs, outputs=[ConcatOutput("y")], output_names=["ys"])
    g.output("ys")
    out = _same_outcome(g.build(), {"rows": rows, **({"x": x} if data_rows else {"T": x[0]})})
    assert not isinstance(out, str), out
    return out


@pytest.mark.parametrize("data_rows", [False, True])
def test_an_expand_to_shapes_that_are_rows_is_right(data_rows):
    """The target shape sliced from the loop's input (the same at every iteration), x a row or
    an invariant: right, hoisted or not."""
    body = GraphBuilder("b")
    wide = body.node("Expand", body.input("x_t" if data_rows else "table", np.float32),
                     body.input("shape_t", np.int64))
    body.output(body.node("Mul", wide, body.const(np.float32(2)), outputs=["y"]))
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    out = _operand_rows_loop(body, "shape_t", np.tile(np.array([2, 1], np.int64), (5, 1)), x,
                             data_rows)
    np.testing.assert_array_equal(out["ys"], 2 * np.stack(
        [np.broadcast_to(x[k] if data_rows else x[0], (2, 3)) for k in range(5)]))


def test_rows_broadcast_by_an_axes_mapping_stay_in_the_body():
    body = GraphBuilder("b")
    x_t = body.input("x_t", np.float32)
    wide = body.node("Broadcast", x_t, body.const(np.array([3, 2], np.int64)),
                     body.const(np.array([0], np.int64)), domain="openvino", mode="explicit")
    body.output(body.node("Mul", wide, body.const(np.float32(2)), outputs=["y"]))
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    out = _same_outcome(*_one_loop(body, x))
    np.testing.assert_array_equal(out["ys"], 2 * np.repeat(x[:, :, None], 2, axis=2))
    model = cyloop.Model(_one_loop(body, x)[0], driver="cython")
    assert not any(label.startswith("Broadcast") for label in _hoisted_labels(model))


@pytest.mark.parametrize("chunk_rows", [None, 2])
@pytest.mark.parametrize("indices", [np.array([2, 0]), np.int64(-1), np.array([[1], [0]]),
                                     np.array([3])], ids=["list", "scalar", "2-d", "too far"])
@pytest.mark.parametrize("domain, axis", [(domain, axis) for domain in ("", "openvino")
                                          for axis in (0, 1, -1, -2)] + [("", None)])
def test_rows_gathered_by_static_indices_are_hoisted(chunk_rows, indices, domain, axis):
    """(axis None: ONNX's attribute left out, 0 by default)"""
    body = GraphBuilder("b", opsets={"openvino": 8} if domain else None)
    x_t = body.input("x_t", np.float32)
    if domain:  # (the axis an input)
        picked = body.node("Gather", x_t, body.const(indices), body.const(np.int64(axis)),
                           domain=domain, outputs=["picked"], batch_dims=0)
    else:
        picked = body.node("Gather", x_t, body.const(indices), outputs=["picked"],
                           **({} if axis is None else {"axis": axis}))
    axis = axis or 0
    body.output(body.node("Mul", picked, body.const(np.float32(2)), outputs=["y"]))
    x = np.arange(5 * 3 * 4, dtype=np.float32).reshape(5, 3, 4)
    with chunks_of(chunk_rows):
        outcome = _same_outcome(*_one_loop(body, x))
    if x.shape[1:][axis] <= np.max(indices) and not domain:
        assert isinstance(outcome, str) and "Gather node producing 'picked' failed" in outcome
    else:  # (OpenVINO's: zeros where an index is out of range, as its CPU plugin gives them)
        np.testing.assert_array_equal(
            outcome["ys"], 2 * np.stack([_taken_or_zeros(x_t, indices, axis) for x_t in x]))
    model = cyloop.Model(_one_loop(body, x)[0], driver="cython")
    assert "Gather node producing 'picked'" in _hoisted_labels(model)


def _taken_or_zeros(x, indices, axis):
    """``np.take``, zeros where an index is outside [-n, n) (OpenVINO's Gather)."""
    axis = axis + x.ndim if axis < 0 else axis
    n = x.shape[axis]
    inside = (indices >= -n) & (indices < n)
    taken = np.take(x, np.where(inside, indices, 0), axis=axis)
    inside = np.reshape(inside, (1,) * axis + np.shape(indices) + (1,) * (x.ndim - axis - 1))
    return np.where(inside, taken, 0)


@pytest.mark.parametrize("domain", ["", "openvino"])
@pytest.mark.parametrize("data_rows", [False, True])
def test_a_gather_by_indices_that_are_rows_is_right(rng, domain, data_rows):
    """Indices sliced from the loop's input, data an invariant (or sliced too): right, hoisted
    or not."""
    body = GraphBuilder("b", opsets={"openvino": 8} if domain else None)
    data = body.input("x_t" if data_rows else "table", np.float32)
    if domain:
        picked = body.node("Gather", data, body.input("idx_t", np.int64),
                           body.const(np.int64(1)), domain=domain, outputs=["picked"])
    else:
        picked = body.node("Gather", data, body.input("idx_t", np.int64), axis=1,
                           outputs=["picked"])
    body.output(body.node("Mul", picked, body.const(np.float32(2)), outputs=["y"]))
    x = rng.standard_normal((5, 3, 4)).astype(np.float32)
    indices = rng.integers(0, 4, (5, 2))
    out = _operand_rows_loop(body, "idx_t", indices, x, data_rows)
    np.testing.assert_array_equal(out["ys"], 2 * np.stack(
        [np.take(x[k] if data_rows else x[0], indices[k], axis=1) for k in range(5)]))


@pytest.mark.parametrize("chunk_rows", [None, 1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
@pytest.mark.parametrize("parts", [("x", "c"), ("c", "x", "x"), ("x", "bad")])
@pytest.mark.parametrize("domain", ["", "openvino"])
def test_rows_concatenated_with_static_values_are_hoisted(chunk_rows, axis, parts, domain):
    """x_t [3, 4] joined with a constant [3, 4] (or, "bad", [3]: refused as the node refuses
    it), y = 2 * the join made in the body."""
    body = GraphBuilder("b")
    x_t = body.input("x_t", np.float32)
    values = {"x": x_t, "c": body.const(np.arange(12, dtype=np.float32).reshape(3, 4)),
              "bad": body.const(np.arange(3, dtype=np.float32))}
    joined = body.node("Concat", *[values[p] for p in parts], axis=axis, outputs=["joined"],
                       domain=domain)
    body.output(body.node("Mul", joined, body.const(np.float32(2)), outputs=["y"]))
    x = np.arange(5 * 3 * 4, dtype=np.float32).reshape(5, 3, 4)
    with chunks_of(chunk_rows):
        outcome = _same_outcome(*_one_loop(body, x))
    if "bad" in parts:
        assert isinstance(outcome, str) and "Concat node producing 'joined' failed" in outcome
    else:
        c = np.arange(12, dtype=np.float32).reshape(3, 4)
        np.testing.assert_array_equal(outcome["ys"], 2 * np.stack(
            [np.concatenate([x_t if p == "x" else c for p in parts], axis) for x_t in x]))
    model = cyloop.Model(_one_loop(body, x)[0], driver="cython")
    assert "Concat node producing 'joined'" in _hoisted_labels(model)


@pytest.mark.parametrize("domain", ["", "openvino"])
def test_a_hoisted_gather_out_of_range_names_the_rows_axis_on_every_run(domain):
    """Indices too many to be remembered by value (a run with good ones does not spare a
    later run with a bad one its first-row probe): the error names the node's own axis
    (OpenVINO's Gather gives zeros there instead, on every run)."""
    body = GraphBuilder("b", opsets={"openvino": 8} if domain else None)
    x_t, idx = body.input("x_t", np.float32), body.input("idx", np.int64)
    if domain:
        picked = body.node("Gather", x_t, idx, body.const(np.int64(1)), domain=domain,
                           outputs=["picked"])
    else:
        picked = body.node("Gather", x_t, idx, axis=1, outputs=["picked"])
    body.output(body.node("Mul", picked, body.const(np.float32(2)), outputs=["y"]))
    x = np.arange(5 * 3 * 4, dtype=np.float32).reshape(5, 3, 4)
    good = np.arange(100) % 4
    graph, feeds = _one_loop(body, x, {"idx": good})
    fast = cyloop.Model(graph, driver="cython")
    fast.run(feeds)
    bad = good.copy()
    bad[7] = 9
    if domain:
        got = fast.run(dict(feeds, IDX=bad))["ys"]
        np.testing.assert_array_equal(
            got, cyloop.Model(graph, driver="python").run(dict(feeds, IDX=bad))["ys"])
        assert not got[:, :, 7].any() and got[:, :, 6].all()
        return
    with pytest.raises(cyloop.ExecutionError, match="index 9 is out of bounds for axis 1 "):
        fast.run(dict(feeds, IDX=bad))
    assert isinstance(_same_outcome(graph, dict(feeds, IDX=bad)), str)


def test_a_carried_value_made_from_a_name_read_before_it_is_made_is_no_kept_shape():
    """s1 = ScatterND(s2, ...) reads the outer s2 (a capture), then s2 = ScatterND(s1, ...)
    makes a body value of that name: the walk back from the carried s1 must end (it looped
    forever), and both drivers agree."""
    from onnx import helper

    from ..support.onnx_models import model, tensor

    node = helper.make_node
    body = helper.make_graph(
        [node("ScatterND", ["s2", "idx", "upd"], ["s1"]),
         node("ScatterND", ["s1", "idx", "upd"], ["s2"]),
         node("Shape", ["buf_in"], ["shape"]),
         node("Identity", ["cond_in"], ["cond_out"])],
        "body", [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []),
                 tensor("buf_in", np.float32, None)],
        [tensor("cond_out", np.bool_, []), tensor("s1", np.float32, None),
         tensor("shape", np.int64, None)],
        [helper.make_tensor("idx", 7, [1, 1], [1]), helper.make_tensor("upd", 1, [1, 2],
                                                                          [5.0, 6.0])])
    onnx_model = model(helper.make_graph(
        [node("Loop", ["M", "", "buf0"], ["buf", "shapes"], body=body)], "g",
        [tensor("M", np.int64, []), tensor("buf0", np.float32, None),
         tensor("s2", np.float32, None)],
        [tensor("buf", np.float32, None), tensor("shapes", np.int64, None)]), 13)
    feeds = {"M": np.array(3, np.int64), "buf0": np.zeros((3, 2), np.float32),
             "s2": np.ones((3, 2), np.float32)}
    signal.signal(signal.SIGALRM, _timed_out)
    signal.alarm(60)  # (a hang fails the test instead of the suite)
    try:
        outcome = _same_outcome(cyloop.load(onnx_model.SerializeToString()).graph, feeds)
    finally:
        signal.alarm(0)
    assert not isinstance(outcome, str), outcome


def _timed_out(signum, frame):
    raise TimeoutError("the model did not load within a minute")


def test_rows_gathered_with_batch_dims_stay_in_the_body():
    body = GraphBuilder("b", opsets={"openvino": 8})
    picked = body.node("Gather", body.input("x_t", np.float32),
                       body.const(np.array([[1], [0], [1]])), body.const(np.int64(1)),
                       domain="openvino", outputs=["picked"], batch_dims=1)
    body.output(body.node("Mul", picked, body.const(np.float32(2)), outputs=["y"]))
    x = np.arange(5 * 3 * 4, dtype=np.float32).reshape(5, 3, 4)
    out = _same_outcome(*_one_loop(body, x))
    np.testing.assert_array_equal(out["ys"], 2 * x[:, :, [1, 0, 1]][:, [0, 1, 2], [0, 1, 2]][
        ..., None])
    model = cyloop.Model(_one_loop(body, x)[0], driver="cython")
    assert "Gather node producing 'picked'" not in _hoisted_labels(model)


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("op, attrs", [("Shape", {}), ("Shape", {"start": -2}),
                                       ("Shape", {"start": 1, "end": 2}), ("Size", {}),
                                       ("ShapeOf", {})])
def test_the_shape_of_rows_is_computed_once_a_run(rng, chunk_rows, op, attrs):
    """Each iteration emits x_t (flattened) followed by the shape of Expand(x_t, [2, 1, 1]), a
    hoisted value: its rows have one shape, read once a run from the first row."""
    body = GraphBuilder("b")
    x_t = body.input("x_t", np.float32)
    wide = body.node("Expand", x_t, body.const(np.array([2, 1, 1], np.int64)))
    shape = body.node(op, wide, domain="openvino" if op == "ShapeOf" else "", outputs=["shape"],
                      **attrs)
    shape = body.node("Reshape", body.node("Cast", shape, to=np.float32),
                      body.const(np.array([-1], np.int64)))
    flat = body.node("Reshape", x_t, body.const(np.array([-1], np.int64)))
    body.output(body.node("Concat", flat, shape, axis=0, outputs=["y"]))
    x = rng.standard_normal((7, 3, 4)).astype(np.float32)
    graph, feeds = _one_loop(body, x)
    graph.inputs = [Value("x", np.float32)]  # (any shape: the second run's rows are narrower)
    with chunks_of(chunk_rows):
        fast = cyloop.Model(graph, driver="cython")
        calls = _counted_once_steps(fast)
        runs = [fast.run(feeds), fast.run({"x": x[:, :2]})]
    model = cyloop.Model(graph, driver="python")
    for got, x_fed in zip(runs, (x, x[:, :2])):
        expected = model.run({"x": x_fed})
        np.testing.assert_array_equal(got["ys"], expected["ys"])
        wide_shape = (2,) + x_fed.shape[1:]
        tail = np.size(np.empty(wide_shape)) if op == "Size" else \
            wide_shape[attrs.get("start", 0):attrs.get("end")]
        np.testing.assert_array_equal(got["ys"][:, x_fed[0].size:],
                                      np.broadcast_to(np.float32(tail), (7, np.size(tail))))
    assert calls[f"{op} node producing 'shape'"] == 2  # (once in each run)
    assert _shape_once(fast, (op, "shape")) == ["every row"]


def _kept_shape_loop(case):
    """T iterations writing x_t into row i mod N of a carried buffer [N, W], N read from the
    buffer's shape as jax2onnx reads it. `case`: "scatter" (the buffer is the scatter's result),
    "identity" (an Identity after it), "openvino" (ShapeOf and ScatterNDUpdate), "grows" (a row
    is also appended: its shape changes, so its Shape stays in the body) and "other" (the Shape
    read is another carried value's, one that grows)."""
    body = GraphBuilder("b")
    i = body.input("i", np.int64, ())
    body.input("cond_in", np.bool_, ())
    x_t, buf = body.input("x_t", np.float32), body.input("buf_in", np.float32)
    grown = body.input("grown_in", np.float32)
    ov = {"domain": "openvino"} if case == "openvino" else {}
    read = grown if case == "other" else buf
    if case == "transposed":  # (the Shape of a value computed from the buffer: [W, N])
        rows = body.node("Gather", body.node("Shape", body.node("Transpose", buf, perm=[1, 0]),
                                             outputs=["t_shape"]), body.const(np.int64(1)))
        index = body.node("Reshape", body.node("Mod", i, rows),
                          body.const(np.array([1, 1], np.int64)))
    elif case == "openvino":
        rows = body.node("Gather", body.node("ShapeOf", read, **ov), body.const(np.int64(0)),
                         body.const(np.int64(0)), **ov)
        index = body.node("Reshape", body.node("FloorMod", i, rows, **ov),
                          body.const(np.array([1, 1], np.int64)), special_zero=False, **ov)
    else:
        rows = body.node("Gather", body.node("Shape", read), body.const(np.int64(0)))
        index = body.node("Reshape", body.node("Mod", i, rows),
                          body.const(np.array([1, 1], np.int64)))
    update = body.node("Unsqueeze", x_t, body.const(np.array([0], np.int64)), **ov)
    out = body.node("ScatterNDUpdate" if ov else "ScatterND", buf, index, update, **ov)
    if case == "identity":
        out = body.node("Identity", out)
    elif case == "grows":
        out = body.node("Concat", out, update, axis=0)
    grown_out = body.node("Concat", grown, update, axis=0)
    body.output(out, grown_out, body.node("Identity", "cond_in", outputs=["cond_out"]))
    g = GraphBuilder("g")
    g.loop(body.build(), inputs=[(g.input("x", np.float32), SlicedInput(0, "x_t")),
                                 (g.input("buf0", np.float32), CarriedInput(0, "buf_in", out)),
                                 (g.input("grown0", np.float32),
                                  CarriedInput(0, "grown_in", grown_out))],
           outputs=[LastOutput(out)], output_names=["buf"], iteration_param="i",
           cond_param="cond_in", cond_result="cond_out")
    g.output("buf")
    return g.build()


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("case", ["scatter", "identity", "openvino", "grows", "other",
                                  "transposed"])
def test_the_shape_of_a_carried_buffer_a_scatter_updates_is_read_once_a_run(rng, chunk_rows,
                                                                            case):
    feeds = {"x": rng.standard_normal((7, 4)).astype(np.float32),
             "buf0": rng.standard_normal((9 if case == "other" else 3, 4)).astype(np.float32),
             "grown0": rng.standard_normal((2, 4)).astype(np.float32)}
    given = {name: value.copy() for name, value in feeds.items()}
    graph = _kept_shape_loop(case)
    with chunks_of(chunk_rows):
        fast = cyloop.Model(graph, driver="cython")
        calls = _counted_once_steps(fast)
        got = fast.run(feeds)
    expected = cyloop.Model(graph, driver="python").run(feeds)
    np.testing.assert_array_equal(got["buf"], expected["buf"])
    for name, value in given.items():
        np.testing.assert_array_equal(feeds[name], value, err_msg=name)
    # numpy: row i mod N (N the buffer's rows at that iteration) takes x_t.
    buf, grown = feeds["buf0"].copy(), feeds["grown0"]
    for k, x_t in enumerate(feeds["x"]):
        buf[k % len(grown if case == "other" else buf)] = x_t
        buf = np.concatenate([buf, x_t[None]]) if case == "grows" else buf
        grown = np.concatenate([grown, x_t[None]])
    np.testing.assert_array_equal(got["buf"], buf)
    shape = f"{'ShapeOf' if case == 'openvino' else 'Shape'} node producing"
    once = [label for label in calls if label.startswith(shape)]
    assert len(once) == (case in ("scatter", "identity", "openvino", "transposed"))
    assert all(calls[label] == 1 for label in once)
    if case == "transposed":
        assert _shape_once(fast, ("Shape", "t_shape")) == ["follows"]
    elif once:
        assert [(w.why, w.value) for w in loop_plan(fast).hoisted if w.how == "shape"] == \
            [("initial value", "buf_in")]


def _derived_shape_loop(case):
    """Five iterations over a carried h [6] (which grows by a row of 3 each iteration in the
    "grows" cases) and rows x_t [2, 1]; each emits the shape of v, a value computed from h
    (`case`), as floats. The shape of v follows from static values alone (or from x_t's rows),
    except where the case says it grows."""
    body = GraphBuilder("b", opset=6 if case == "opset 6" else 17, opsets={"openvino": 8})
    body.input("i", np.int64, ())
    body.input("cond_in", np.bool_, ())
    h, x_t = body.input("h", np.float32), body.input("x_t", np.float32)
    ov = {"domain": "openvino"}

    def const(*values):
        return body.const(np.array(values, np.int64))

    if case == "reshape":
        v = body.node("Reshape", h, const(2, 3))
    elif case in ("reshape -1, grows", "reshape 0, grows"):
        v = body.node("Reshape", h, const(-1, 3) if "-1" in case else const(0))
    elif case == "reshape 0 -1 of a told shape":
        v = body.node("Reshape", body.node("Reshape", h, const(2, 3)), const(0, -1, 1))
    elif case == "reshape 0 of a told shape":
        v = body.node("Reshape", body.node("Reshape", h, const(2, 3)), const(0, 3, 1))
    elif case == "reshape -2 of a told shape":  # (the kernel's numpy infers it, as a -1)
        v = body.node("Reshape", body.node("Reshape", h, const(2, 3)), const(3, -2))
    elif case == "expand":
        v = body.node("Expand", body.node("Reshape", h, const(1, 6)), const(4, 1))
    elif case == "unsqueeze":
        v = body.node("Unsqueeze", body.node("Reshape", h, const(6)), const(0, -1))
    elif case == "with rows":
        v = body.node("Add", body.node("Reshape", h, const(1, 6)), x_t)
    elif case == "openvino reshape":
        v = body.node("Reshape", h, const(3, 2), special_zero=False, **ov)
    elif case == "600 nodes on":
        v = body.node("Reshape", h, const(2, 3))
        for _ in range(600):
            v = body.node("Neg", v)
    elif case == "a Constant node's target":
        target = body.node("Constant", value=np.array([3, 2], np.int64))
        v = body.node("Reshape", h, target)
    elif case == "where":
        v = body.node("Where", body.const(np.array([True, False, True])),
                      body.node("Reshape", h, const(2, 3)), body.const(np.float32(0)))
    elif case == "opset 6":  # (Add broadcast by its attributes before opset 7: not told)
        v = body.node("Add", body.node("Reshape", h, const(2, 3)), body.const(np.float32(1)))
    elif case == "openvino broadcast":
        v = body.node("Broadcast", body.node("Reshape", h, const(1, 6), special_zero=False,
                                             **ov), const(5, 6), **ov)
    shape = body.node("Cast", body.node("Shape", v, outputs=["shape"]), to=np.float32,
                      outputs=["y"])
    grows = case.endswith("grows")
    h_out = body.node("Concat", h, body.const(np.ones(3, np.float32)), axis=0) if grows \
        else body.node("Mul", h, body.const(np.float32(0.5)))
    body.output(body.node("Identity", "cond_in", outputs=["cond_out"]), h_out, shape)
    g = GraphBuilder("g", opset=6 if case == "opset 6" else 17)
    g.loop(body.build(), inputs=[(g.input("x", np.float32), SlicedInput(0, "x_t")),
                                 (g.input("h0", np.float32), CarriedInput(0, "h", h_out))],
           outputs=[LastOutput(h_out), ConcatOutput(shape)], output_names=["h_last", "ys"],
           iteration_param="i", cond_param="cond_in", cond_result="cond_out")
    g.output("h_last", "ys")
    return g.build()


@pytest.mark.parametrize("chunk_rows", [None, 1, 2])
@pytest.mark.parametrize("case", ["reshape", "reshape 0 -1 of a told shape",
                                  "reshape 0 of a told shape", "reshape -2 of a told shape",
                                  "expand",
                                  "unsqueeze", "with rows", "600 nodes on",
                                  "a Constant node's target", "where", "opset 6",
                                  "openvino reshape", "openvino broadcast",
                                  "reshape -1, grows", "reshape 0, grows"])
def test_the_shape_of_a_value_made_from_carried_values_is_read_once_a_run(rng, chunk_rows,
                                                                          case):
    feeds = {"x": rng.standard_normal((5, 2, 1)).astype(np.float32),
             "h0": rng.standard_normal(6).astype(np.float32)}
    graph = _derived_shape_loop(case)
    with chunks_of(chunk_rows):
        fast = cyloop.Model(graph, driver="cython")
        calls = _counted_once_steps(fast) if _hoist_of(fast) is not None else {}
        got = fast.run(feeds)
    expected = cyloop.Model(graph, driver="python").run(feeds)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    empty = cyloop.Model(graph, driver="cython").run(dict(feeds, x=feeds["x"][:0]))
    for name, value in cyloop.Model(graph, driver="python").run(
            dict(feeds, x=feeds["x"][:0])).items():  # (no iteration: nothing computed)
        np.testing.assert_array_equal(empty[name], value, err_msg=name)
        assert empty[name].shape == value.shape
    if case.endswith("grows"):  # (the emitted shapes change: the Shape ran in the body)
        assert len({tuple(row) for row in got["ys"]}) == 5
        assert "Shape node producing 'shape'" not in calls
    elif case == "opset 6":
        assert "Shape node producing 'shape'" not in calls
    else:
        assert calls["Shape node producing 'shape'"] == 1
        assert _shape_once(fast, ("Shape", "shape")) == ["follows"]


@pytest.mark.parametrize("case", ["broadcast", "two -1s"])
def test_a_told_shape_that_cannot_be_fails_as_its_node_fails_in_the_body(case):
    """The node whose shape a rule tells fails in the body at iteration 0: the run fails with
    that node's own error, not the rule's."""
    body = GraphBuilder("b")
    h = body.input("h", np.float32)
    told = body.node("Reshape", h, body.const(np.array([2, 3], np.int64)))
    if case == "broadcast":
        v = body.node("Add", told, body.const(np.zeros(4, np.float32)), outputs=["v"])
    else:
        v = body.node("Reshape", told, body.const(np.array([-1, -1], np.int64)), outputs=["v"])
    shape = body.node("Cast", body.node("Shape", v), to=np.float32, outputs=["y"])
    h_out = body.node("Mul", h, body.const(np.float32(0.5)), outputs=["h_out"])
    body.output(h_out, shape)
    g = GraphBuilder("g")
    g.loop(body.build(), inputs=[(g.input("h0", np.float32), CarriedInput(0, "h", h_out))],
           outputs=[LastOutput(h_out), ConcatOutput(shape)], output_names=["h_last", "ys"],
           trip_count=3)
    g.output("h_last", "ys")
    outcome = _same_outcome(g.build(), {"h0": np.ones(6, np.float32)})
    assert isinstance(outcome, str) and "node producing 'v' failed" in outcome


def test_the_plan_says_why_work_reading_no_state_stays_in_the_body(rng):
    """A node reading only the sliced row (and constants) stays in the body where its op has
    no form on rows (Softmax) or would squeeze the rows too (Squeeze-11 without axes): the plan
    names it and the reason; a node reading the carried state, or one whose inputs stayed in
    the body, is not listed; and what stays computes what the reference driver does."""
    body = GraphBuilder("body", opset=11)
    x_t, h = body.input("x_t", np.float32), body.input("h", np.float32)
    p = body.node("Softmax", x_t, axis=-1, outputs=["p"])
    total = body.node("Squeeze", body.node("ReduceMean", x_t, axes=[0], keepdims=1),
                      outputs=["total"])
    scaled = body.node("Mul", p, total, outputs=["scaled"])
    doubled = body.node("Add", x_t, x_t, outputs=["doubled"])  # (hoisted: no reason to give)
    body.output(body.node("Add", body.node("Add", scaled, h, outputs=["mixed"]), doubled,
                          outputs=["h_next"]))
    g = GraphBuilder("scan")
    x, h0 = g.input("x", np.float32), g.input("h0", np.float32)
    g.loop(body.build(),
           inputs=[(x, SlicedInput(0, "x_t", 0)), (h0, CarriedInput(0, "h", "h_next"))],
           outputs=[LastOutput("h_next"), ConcatOutput("h_next", 0)],
           output_names=["h_last", "hs"])
    g.output("h_last", "hs")
    feeds = {"x": rng.standard_normal((6, 5)).astype(np.float32),
             "h0": rng.standard_normal(5).astype(np.float32)}
    model, got, expected = _run(g.build(), feeds, None)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-6)
    loop = loop_plan(model)
    assert {(n.nodes[0].output, n.reason) for n in loop.not_hoisted} == {
        ("p", "no rows form"), ("total", "no axes")}
    assert "doubled" in [r.output for w in loop.hoisted for r in w.nodes]
    assert cyloop.Model(g.build(), driver="cython", hoist=False).plan().loops[0].not_hoisted == []
