"""Aliasing hazards: the planner's in-place writes must never change what a body computes, touch a
caller's array, or overwrite an array already handed back."""


import numpy as np
import pytest

import cyloop
from cyloop.ir import (
    CarriedInput,
    ConcatOutput,
    GraphBuilder,
    InvariantInput,
    LastOutput,
    NodeRef,
    SlicedInput,
)
from cyloop.kernels.registry import kernel

from ..support.drivers import run_both
from ..support.plans import loop_plan, placements


def _loop(build_body, carried, sliced=(), invariant=(), outputs=(), n=6, shape=(3,)):
    """A graph with one loop; `build_body(b)` adds the body nodes and outputs."""
    body = GraphBuilder("body")
    g = GraphBuilder("outer")
    inputs = []
    for param, result in carried:
        body.input(param, np.float64, shape)
        inputs.append((g.input(f"{param}0", np.float64, shape), CarriedInput(0, param, result)))
    for param in sliced:
        body.input(param, np.float64, shape)
        inputs.append((g.input(f"{param}_seq", np.float64, ("T", *shape)),
                       SlicedInput(0, param)))
    for param, outer in invariant:
        body.input(param, np.float64, None)
        g.input(outer, np.float64, None)
        inputs.append((outer, InvariantInput(0, param)))
    build_body(body)
    names = [f"out{j}" for j in range(len(outputs))]
    g.loop(body.build(), inputs=inputs, outputs=list(outputs),
           trip_count=None if sliced else n, output_names=names)
    g.output(*names)
    return g.build()


def test_body_reads_carried_value_after_computing_the_next(rng):
    def body(b):
        c_next = b.node("Add", "c", b.const(1.0), outputs=["c_next"])
        y = b.node("Mul", "c", b.const(2.0), outputs=["y"])  # reads the old c afterwards
        b.output(c_next, y)

    graph = _loop(body, [("c", "c_next")],
                  outputs=[LastOutput("c_next"), ConcatOutput("y"), ConcatOutput("c_next")])
    c0 = rng.standard_normal(3)
    out = run_both(graph, {"c0": c0})
    c, cs, ys = c0, [], []
    for _ in range(6):
        c_next = c + 1.0
        ys.append(c * 2.0)
        cs.append(c_next)
        c = c_next
    expected_c = np.stack(cs)
    np.testing.assert_array_equal(out["out2"], expected_c)
    np.testing.assert_array_equal(out["out1"], np.stack(ys))
    np.testing.assert_array_equal(out["out0"], expected_c[-1])


def test_body_returning_its_input_unchanged(rng):
    def body(b):
        b.output("c")

    graph = _loop(body, [("c", "c")], outputs=[LastOutput("c"), ConcatOutput("c")])
    c0 = rng.standard_normal(3)
    out = run_both(graph, {"c0": c0})
    np.testing.assert_array_equal(out["out0"], c0)
    np.testing.assert_array_equal(out["out1"], np.stack([c0] * 6))
    assert not np.may_share_memory(out["out0"], c0)


def test_one_result_feeds_a_back_edge_and_two_outputs(rng):
    def body(b):
        b.output(b.node("Add", "c", "x_t", outputs=["r"]))

    graph = _loop(body, [("c", "r")], sliced=["x_t"],
                  outputs=[LastOutput("r"), ConcatOutput("r"), ConcatOutput("r", reverse=True)])
    c0, xs = rng.standard_normal(3), rng.standard_normal((5, 3))
    out = run_both(graph, {"c0": c0, "x_t_seq": xs})
    c, rows = c0, []
    for x_t in xs:
        c = c + x_t
        rows.append(c)
    expected = np.stack(rows)
    np.testing.assert_array_equal(out["out1"], expected)
    np.testing.assert_array_equal(out["out2"], expected[::-1])
    np.testing.assert_array_equal(out["out0"], expected[-1])
    assert not np.may_share_memory(out["out0"], out["out1"])


def test_where_a_carried_result_emitted_into_strided_slots_lives_is_measured(rng):
    """A result both carried and emitted lives in its output slot when the output stacks on axis
    0 (contiguous slots: the next iteration reads it there). On axis 1 its slots are strided, and
    where it lives is measured a run at a time: its slot, or a ping-pong pool buffer (read
    contiguous) copied into the slot. Either way, and after the choice, both drivers agree and
    the loop computes c <- tanh(c + x_t), emitting 2c too (only emitted: written in its strided
    slot); tune=False keeps the slot."""
    def body(b):
        b.output(b.node("Tanh", b.node("Add", "c", "x_t"), outputs=["r"]),
                 b.node("Mul", "c", b.const(2.0), outputs=["twice"]))

    c0, xs = rng.standard_normal(3), rng.standard_normal((5, 3))
    c, rows, twice = c0, [], []
    for x_t in xs:
        twice.append(c * 2.0)
        c = np.tanh(c + x_t)
        rows.append(c)
    feeds = {"c0": c0, "x_t_seq": xs}
    for axis in (0, 1):
        graph = _loop(body, [("c", "r")], sliced=["x_t"],
                      outputs=[ConcatOutput("r", axis=axis), ConcatOutput("twice", axis=1)])
        want = cyloop.Model(graph, driver="python").run(feeds)
        np.testing.assert_allclose(want["out0"], np.stack(rows, axis=axis), rtol=1e-12)
        np.testing.assert_allclose(want["out1"], np.stack(twice, axis=1), rtol=1e-12)
        model = cyloop.Model(graph, driver="cython")
        plan = loop_plan(model)
        assert _written(plan, 1) == ("in place", "Mul", 1)
        if axis == 0:
            assert not placements(model)
            assert _written(plan, 0) == ("in place", "Tanh", 0)
            assert (plan.alias("c").how, plan.alias("c").output) == ("output slot", 0)
            for _ in range(2):
                for name, value in model.run(feeds).items():
                    np.testing.assert_array_equal(value, want[name], err_msg=name)
            continue
        assert _written(plan, 0) == ("measured slot or pool", "Tanh", 1)
        assert (plan.alias("c").how, plan.alias("c").output) == ("measured slot or pool", 0)
        (placement,) = placements(model)
        in_place = {}
        for forced in placement.candidates:  # each in turn
            placement.fix(forced)
            model.reset_counters()
            for _ in range(3):
                for name, value in model.run(feeds).items():
                    np.testing.assert_array_equal(value, want[name], err_msg=f"{name} {forced}")
            (counters,) = model.counters().values()
            in_place[forced] = counters["in_place_writes"]
        # 2c goes into its slot at iterations 1-4 of each run either way; h too when it lives
        # there, and otherwise is copied from its pool buffer.
        assert in_place == {"in its slot": 3 * 8, "a ping-pong pool, copied into its slot": 3 * 4}
        measured = cyloop.Model(graph, driver="cython")
        (placement,) = placements(measured)
        for _ in range(30):  # runs enough for each candidate's warm-up and rounds
            for name, value in measured.run(feeds).items():
                np.testing.assert_array_equal(value, want[name], err_msg=name)
        choice = placement.trials[None].choice
        assert choice in placement.candidates
        (where,) = loop_plan(measured).choices_of("placement")
        assert (where.value, where.chosen, where.fixed) == ("r", choice, None)
        untuned = cyloop.Model(graph, driver="cython", tune=False)
        (fixed,) = placements(untuned)
        assert fixed.fixed == "in its slot"
        (where,) = loop_plan(untuned).choices_of("placement")
        assert (where.value, where.fixed) == ("r", "in its slot")


def test_swapped_carried_values(rng):
    """a <- b and b <- a + 1: each pool buffer is read through the other carried value."""
    def body(b):
        a_next = b.node("Identity", "b", outputs=["a_next"])
        b_next = b.node("Add", "a", b.const(1.0), outputs=["b_next"])
        b.output(a_next, b_next)

    graph = _loop(body, [("a", "a_next"), ("b", "b_next")], n=9,
                  outputs=[LastOutput("a_next"), LastOutput("b_next")])
    a, b = rng.standard_normal(3), rng.standard_normal(3)
    out = run_both(graph, {"a0": a, "b0": b})
    for _ in range(9):
        a, b = b, a + 1
    np.testing.assert_array_equal(out["out0"], a)
    np.testing.assert_array_equal(out["out1"], b)


def test_carried_view_of_another_carried_buffer(rng):
    """c <- reshape(d) (a view) while d <- c * 2 is written in place: the view must survive."""
    def body(b):
        shape = b.const(np.array([3], np.int64))
        c_next = b.node("Reshape", "d", shape, outputs=["c_next"])
        d_next = b.node("Mul", "c", b.const(2.0), outputs=["d_next"])
        b.output(c_next, d_next)

    graph = _loop(body, [("c", "c_next"), ("d", "d_next")], n=8,
                  outputs=[LastOutput("c_next"), LastOutput("d_next")])
    c, d = rng.standard_normal(3), rng.standard_normal(3)
    out = run_both(graph, {"c0": c, "d0": d})
    for _ in range(8):
        c, d = d, c * 2
    np.testing.assert_array_equal(out["out0"], c)
    np.testing.assert_array_equal(out["out1"], d)


def test_sliced_input_also_used_as_invariant(rng):
    body = GraphBuilder("body")
    body.input("x_t", np.float64, (3,))
    body.input("x_all", np.float64, (4, 3))
    first_row = body.node("Gather", "x_all", body.const(np.int64(0)), axis=0)
    body.output(body.node("Add", "x_t", first_row, outputs=["y"]))
    g = GraphBuilder()
    g.input("x", np.float64, (4, 3))
    g.loop(body.build(), inputs=[("x", SlicedInput(0, "x_t")), ("x", InvariantInput(0, "x_all"))],
           outputs=[ConcatOutput("y")], output_names=["ys"])
    g.output("ys")
    x = rng.standard_normal((4, 3))
    out = run_both(g.build(), {"x": x})
    np.testing.assert_array_equal(out["ys"], x + x[0])


def test_caller_arrays_unchanged_and_never_aliased(rng):
    def body(b):
        b.output(b.node("Add", "c", "x_t", outputs=["c_next"]), "w")

    graph = _loop(body, [("c", "c_next")], sliced=["x_t"], invariant=[("w", "w_outer")],
                  outputs=[LastOutput("c_next"), ConcatOutput("c_next"), LastOutput("w")])
    feeds = {"c0": rng.standard_normal(3), "x_t_seq": rng.standard_normal((5, 3)),
             "w_outer": rng.standard_normal(2)}
    before = {k: v.copy() for k, v in feeds.items()}
    for driver in ("cython", "python"):
        out = cyloop.Model(graph, driver=driver).run(feeds)
        for name, value in feeds.items():
            assert value.tobytes() == before[name].tobytes(), name
            for result in out.values():
                assert not np.may_share_memory(result, value)
        np.testing.assert_array_equal(out["out2"], feeds["w_outer"])


def test_zero_iterations_return_copies_of_initial_values(rng):
    def body(b):
        b.output(b.node("Add", "c", b.const(1.0), outputs=["c_next"]), dtype=np.float64,
                 shape=(3,))

    graph = _loop(body, [("c", "c_next")], n=0, outputs=[LastOutput("c_next"),
                                                         ConcatOutput("c_next")])
    c0 = rng.standard_normal(3)
    out = run_both(graph, {"c0": c0})
    np.testing.assert_array_equal(out["out0"], c0)
    assert not np.may_share_memory(out["out0"], c0)
    assert out["out1"].shape == (0, 3) and out["out1"].dtype == np.float64


def test_outputs_of_an_earlier_run_are_not_overwritten(rng):
    def body(b):
        b.output(b.node("Add", "c", "x_t", outputs=["c_next"]))

    graph = _loop(body, [("c", "c_next")], sliced=["x_t"],
                  outputs=[LastOutput("c_next"), ConcatOutput("c_next")])
    model = cyloop.Model(graph)
    first_feeds = {"c0": rng.standard_normal(3), "x_t_seq": rng.standard_normal((5, 3))}
    first = model.run(first_feeds)
    kept = {k: v.copy() for k, v in first.items()}
    model.run({"c0": rng.standard_normal(3), "x_t_seq": rng.standard_normal((5, 3))})
    for name in first:
        np.testing.assert_array_equal(first[name], kept[name])


@kernel("EmptyList", domain="test.cyloop")
def _empty_list(attrs):
    return list


@kernel("Append", domain="test.cyloop")
def _append(attrs):
    return lambda items, x: [*items, x]


def test_pool_buffer_held_by_a_carried_list_is_not_reused():
    body = GraphBuilder("body", opsets={"test.cyloop": 1})
    body.input("h", np.float64, (2,))
    body.input("s", None, None)
    h_next = body.node("Add", "h", body.const(1.0), outputs=["h_next"])
    body.output(h_next, body.node("Append", "s", h_next, domain="test.cyloop", outputs=["s_next"]))
    g = GraphBuilder(opsets={"test.cyloop": 1})
    g.input("h0", np.float64, (2,))
    start = g.node("EmptyList", domain="test.cyloop")
    g.loop(body.build(), [("h0", CarriedInput(0, "h", "h_next")), (start, CarriedInput(0, "s",
                                                                                       "s_next"))],
           [LastOutput("s_next")], trip_count=5, output_names=["history"])
    g.output("history")
    out = run_both(g.build(), {"h0": np.zeros(2)})
    np.testing.assert_array_equal(out["history"], np.repeat(np.arange(1.0, 6.0)[:, None], 2, 1))


@kernel("Kept", domain="test.cyloop")
def _kept(attrs):
    """Returns the one writeable array it keeps, every call (as a kernel's cache would)."""
    kept = np.arange(3.0)
    return lambda x: kept


def _written(loop, output) -> tuple[str, str, int]:
    """How concatenated output #`output` of `loop`'s plan is written: (`Port.lives`, the op
    writing it, its axis)."""
    port = loop.port(None, output)
    return port.lives, port.writer_op, port.desc.axis


def _overwriting(model) -> dict[str, int]:
    """Label -> calls, of the loop body's steps that wrote their result over a dying operand."""
    (loop,) = model._compiled.loops
    steps = loop.body.compiled.steps
    return {steps[s].label: calls for s, calls in loop.body.overwriting_steps().items()}


def test_a_dying_temporary_takes_a_ufunc_result_only_when_nothing_else_can_see_it(rng):
    """The Cython runner writes a ufunc's result over an operand whose last reader it is when
    only the operand's slot holds it (invariant 8): not over a feed's slice, a value a view or a
    kernel still holds, a smaller operand it broadcasts, or an operand of another type."""
    def body(b):
        b.node("Mul", "x_t", "c", outputs=["a"])  # x_t: a read-only slice (c: read again)
        b.node("Add", "a", b.const(1.0), outputs=["b"])  # a: a fresh temporary
        b.node("Reshape", "b", b.const(np.array([3], np.int64)), outputs=["v"])  # views b
        b.node("Mul", "b", b.const(3.0), outputs=["d"])  # b's last reader; v still sees it
        b.node("Add", "v", "d", outputs=["e"])  # d: fresh; v: a view
        b.node("Add", "e", "w", outputs=["wide"])  # e [3] broadcast to w's [2, 3]
        b.node("Cast", "wide", outputs=["narrow"], to=np.float32)
        b.node("Add", "narrow", "c", outputs=["mixed"])  # float32 + float64: float64
        b.node("Cast", "mixed", outputs=["y"], to=np.float64)
        b.node("Kept", "c", domain="test.cyloop", outputs=["k"])
        b.node("Mul", "k", b.const(2.0), outputs=["twice"])  # k: held by the kernel too
        b.output(b.node("Add", "c", "twice", outputs=["c_next"]), "y")

    graph = _loop(body, [("c", "c_next")], sliced=["x_t"], invariant=[("w", "w_outer")],
                  outputs=[LastOutput("c_next"), ConcatOutput("y")])
    graph.opsets["test.cyloop"] = 1
    feeds = {"c0": rng.standard_normal(3), "x_t_seq": rng.standard_normal((7, 3)),
             "w_outer": rng.standard_normal((2, 3))}
    before = {k: v.copy() for k, v in feeds.items()}
    out = run_both(graph, feeds)  # the reference driver writes over nothing
    model = cyloop.Model(graph, driver="cython")
    np.testing.assert_array_equal(model.run(feeds)["out1"], out["out1"])
    c, ys = feeds["c0"], []
    for x_t in feeds["x_t_seq"]:
        b = x_t * c + 1.0
        narrow = (b + b * 3.0 + feeds["w_outer"]).astype(np.float32)
        ys.append(narrow + c)
        c = c + np.arange(3.0) * 2.0
    np.testing.assert_array_equal(out["out1"], np.stack(ys))
    np.testing.assert_array_equal(out["out0"], c)
    assert _overwriting(model) == {"Add node producing 'b'": 7, "Add node producing 'e'": 7}
    assert [(use.nodes, use.calls) for use in loop_plan(model).overwriting] == [
        ((NodeRef("Add", "", "b"),), 7), ((NodeRef("Add", "", "e"),), 7)]
    for name, value in feeds.items():
        assert value.tobytes() == before[name].tobytes(), name


def test_a_ufunc_at_the_top_level_never_writes_over_a_feed(rng):
    g = GraphBuilder()
    g.input("x", np.float64, (4,))
    g.output(g.node("Add", "x", g.const(1.0), outputs=["y"]))
    model = cyloop.Model(g.build(), driver="cython")
    x = rng.standard_normal(4)
    kept = x.copy()
    np.testing.assert_array_equal(model.run({"x": x})["y"], kept + 1.0)
    np.testing.assert_array_equal(x, kept)
    assert model._program.overwriting_steps() == {}


# A scatter on a carried buffer (jax2onnx writes ``buf.at[i].set(x)`` in a fori_loop so) updates
# the buffer in place where it dies there and nothing else holds it (invariant 8): no copy of
# the buffer a step, where onnxruntime copies it each step.

def _scatter_loop(case, reduction="none"):
    """An ONNX Loop over i < T: buf <- ScatterND(buf, [[i]], [xs[i]]); "in place" returns the
    final buf; "read after" also emits the sum of the old buf, read after the scatter; "emitted"
    also emits each new buf; "two readers" scatters the old buf twice (a second buffer); "its
    own updates" adds buf's rows, reversed, to buf (ScatterND(buf, [[8], ..., [0]], buf));
    "initial kept" loops over a buffer computed before the loop and also returned; "from a
    capture" scatters into xs, read from the outer scope, each step (not the carried buffer)."""
    from onnx import helper

    from ..support.onnx_models import const, model, tensor

    node = helper.make_node
    nodes = [const("shape", np.array([1, 1], np.int64)), const("axes", np.array([0], np.int64)),
             node("Reshape", ["i", "shape"], ["index"]), node("Gather", ["xs", "i"], ["x_t"]),
             node("Unsqueeze", ["x_t", "axes"], ["update"]),
             node("ScatterND", ["buf_in", "index", "update"], ["buf_out"],
                  **({} if reduction == "none" else {"reduction": reduction})),
             node("Identity", ["cond_in"], ["cond_out"])]
    outputs = [tensor("cond_out", np.bool_, []), tensor("buf_out", np.float32, None)]
    outer = ["buf_last"]
    if case == "read after":
        nodes.append(node("ReduceSum", ["buf_in"], ["total"], keepdims=0))
        outputs.append(tensor("total", np.float32, None))
        outer.append("totals")
    elif case == "emitted":
        nodes.append(node("Identity", ["buf_out"], ["buf_y"]))
        outputs.append(tensor("buf_y", np.float32, None))
        outer.append("bufs")
    elif case == "from a capture":
        nodes[5] = node("ScatterND", ["xs", "index", "update"], ["buf_out"])
    elif case == "its own updates":
        nodes[5] = node("ScatterND", ["buf_in", "reversed", "buf_in"], ["buf_out"],
                        reduction="add")
        nodes.insert(0, const("reversed", np.arange(8, -1, -1).reshape(9, 1)))
    elif case == "two readers":
        nodes.append(node("ScatterND", ["buf_in", "index", "update"], ["other"]))
        nodes.append(node("ReduceSum", ["other"], ["total"], keepdims=0))
        outputs.append(tensor("total", np.float32, None))
        outer.append("totals")
    body = helper.make_graph(nodes, "body", [tensor("i", np.int64, []),
                                             tensor("cond_in", np.bool_, []),
                                             tensor("buf_in", np.float32, None)], outputs)
    before = [const("zero", np.float32(0)), node("Add", ["buf0", "zero"], ["start"])] \
        if case == "initial kept" else []
    start = "start" if before else "buf0"
    graph = helper.make_graph(
        [*before, node("Loop", ["T", "", start], outer, body=body)], "scatter",
        [tensor("T", np.int64, []), tensor("buf0", np.float32, ["N", "D"]),
         tensor("xs", np.float32, ["M", "D"])],
        [tensor(name, np.float32, None) for name in outer + ["start"] * bool(before)])
    return model(graph, 16)


@pytest.mark.parametrize("trips", [7, 1, 0])
@pytest.mark.parametrize("case, reduction", [("in place", "none"), ("in place", "add"),
                                             ("read after", "none"), ("emitted", "none"),
                                             ("two readers", "none"),
                                             ("its own updates", "add"),
                                             ("initial kept", "none"),
                                             ("from a capture", "none")])
def test_a_scatter_updates_a_carried_buffer_in_place_where_nothing_else_holds_it(case, reduction,
                                                                                 trips, rng):
    """The same values as the reference driver and onnxruntime, the caller's buffer untouched;
    written in place from the second step on (the first scatters the caller's buffer, which it
    copies) where the old buffer dies at the scatter and is kept nowhere; a buffer emitted every
    step is made in its slot of the output."""
    from ..support.drivers import run_three_ways

    feeds = {"T": np.array(trips, np.int64),
             "buf0": rng.standard_normal((9, 4)).astype(np.float32),
             "xs": rng.standard_normal((9, 4)).astype(np.float32)}
    kept = {name: value.copy() for name, value in feeds.items()}
    fast, _, got, want, peer = run_three_ways(_scatter_loop(case, reduction), feeds)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        np.testing.assert_allclose(got[name], peer[name], rtol=1e-6, atol=1e-6, err_msg=name)
        assert not np.shares_memory(got[name], feeds["buf0"])
    if case == "initial kept":  # (the loop's initial value, returned as the graph made it)
        np.testing.assert_array_equal(got["start"], feeds["buf0"])
    for name, value in feeds.items():
        np.testing.assert_array_equal(value, kept[name], err_msg=name)
        assert value.flags.writeable, name
    in_place = case in ("in place", "initial kept") and trips > 1
    plan = loop_plan(fast)
    calls = [use.calls for use in plan.overwriting
             if use.nodes == (NodeRef("ScatterND", "", "buf_out"),)]
    assert bool(calls) == in_place, plan
    if in_place:
        assert calls == [trips - 1]
        buf = plan.alias("buf_in")
        assert (buf.how, buf.writer_op) == ("in place", "ScatterND"), plan
    if case == "emitted":  # (each buffer is kept: made in its slot of the output, read there)
        assert ("in place", "ScatterND") in [(p.lives, p.writer_op) for p in plan.outputs]
    if case == "from a capture":  # (a copy of xs each step, into a buffer of a pool)
        assert (plan.alias("buf_in").how, plan.alias("buf_in").writer_op) == \
            ("pool", "ScatterND"), plan


def test_an_openvino_scatter_updates_a_carried_buffer_in_place(tmp_path, rng):
    """A TensorIterator carrying a buffer ScatterNDUpdate writes a row of each step into (its
    last value an output, as OpenVINO pairs them: by the body result): in place from the second
    step on, the same values as the reference driver, the caller's buffer untouched."""
    import openvino.opset8 as ops

    from ..support.openvino_models import ti_last_values

    steps, rows, width, f = 6, 5, 3, np.float32
    x = ops.parameter([steps, 1, width], f, name="X")
    buf0 = ops.parameter([rows, width], f, name="B0")
    xt = ops.parameter([1, 1, width], f, name="xt")
    buf = ops.parameter([rows, width], f, name="buf")
    update = ops.squeeze(xt, ops.constant(np.array([0], np.int64)))  # [1, width]
    written = ops.scatter_nd_update(buf, ops.constant(np.array([[2]], np.int64)), update)
    res = ops.result(ops.add(written, ops.constant(np.zeros((), f))))  # (a fresh result too)
    res_buf = ops.result(written)
    path = ti_last_values(tmp_path / "scatter.xml", [x, buf0], [res_buf, res], [xt, buf],
                          (xt, x, 0), (buf, buf0, res_buf))
    feeds = {"X": rng.standard_normal((steps, 1, width)).astype(f),
             "B0": rng.standard_normal((rows, width)).astype(f)}
    kept = feeds["B0"].copy()
    fast = cyloop.load(path, driver="cython")
    got, want = fast.run(feeds), cyloop.load(path, driver="python").run(feeds)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    np.testing.assert_array_equal(feeds["B0"], kept)
    plan = loop_plan(fast)
    assert any(use.ops == ["ScatterNDUpdate"] and use.calls == 5 for use in plan.overwriting), plan
