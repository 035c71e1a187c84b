"""Fusion (engine/fuse.py): an LSTM cell's gate arithmetic spelled op by op in a loop body runs as
one LSTMGates kernel under the Cython driver. Every case runs the pure-Python driver, which runs
the body as written, as the oracle (onnxruntime too for the ONNX spellings); cases the pass must
leave alone check that it did."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

import cyloop
from cyloop.abilities import abilities_of
from cyloop.accel import fused
from cyloop.ir import LOOP_DOMAIN, OPENVINO_DOMAIN, ConcatOutput, GraphBuilder, SlicedInput
from cyloop.kernels.registry import lookup

from ..support import native
from ..support.drivers import run_three_ways
from ..support.loops import cell_loop_feeds, leaked, lstm_loop
from ..support.onnx_models import model, tensor
from ..support.openvino_models import converted
from ..support.plans import fused_making, loop_plan, measured_steps

_ROLES = "fiog"  # forget, input, output gates and the candidate g


def _check(onnx_model, feeds, fused_expected, blockable=True):
    """Both drivers agree, with each candidate of each measured choice in the body forced in
    turn; whether the cell was fused (h @ R, the sums and the gate arithmetic: one LSTMStep);
    the blocked form, where it can run (`blockable`), writes h' into its row of the output."""
    fast = cyloop.load(onnx_model, driver="cython")
    reference = cyloop.load(onnx_model, driver="python")
    got, want = fast.run(feeds), reference.run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
    for measured in measured_steps(fast):
        for candidate in measured.candidates:
            measured.fix(candidate)
            fast.reset_counters()
            forced = fast.run(feeds)
            for name in want:
                np.testing.assert_allclose(forced[name], want[name], rtol=2e-5, atol=2e-6,
                                           err_msg=f"{name} ({candidate})")
            if candidate == "blocked gates" and blockable:  # h' written into its row of 'hs'
                (counters,) = fast.counters().values()
                assert counters["steady_bytes_copied"] == 0, candidate
                assert counters["in_place_writes"] == counters["iterations"] - 1, candidate
    loop = loop_plan(fast)
    assert fused_making(loop, "LSTMStep", "h_out") == fused_expected, loop
    assert not loop_plan(reference).fused  # the reference driver runs the body as written
    return got


@pytest.mark.parametrize("order", ["ifgo", "iofg", "fiog", "gofi"])
@pytest.mark.parametrize("swapped", [False, True])
@pytest.mark.parametrize("axis", [1, -1])
def test_any_gate_order_and_operand_order_is_fused_and_computes_the_same(order, swapped, axis,
                                                                         rng):
    import onnxruntime as ort

    onnx_model, state, gates = lstm_loop(order, swapped, axis)
    feeds = cell_loop_feeds(rng, state, gates)
    got = _check(onnx_model, feeds, fused_expected=True)
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for name, value in zip([o.name for o in session.get_outputs()], session.run(None, feeds)):
        np.testing.assert_allclose(got[name], value, rtol=2e-5, atol=2e-6, err_msg=name)


@pytest.mark.parametrize("leak", ["f_t", "c_hat", "fc", "tc", "g_o"])
def test_an_intermediate_read_elsewhere_keeps_the_body_as_written(leak, rng):
    onnx_model, state, gates = lstm_loop(leak=leak)
    _check(onnx_model, cell_loop_feeds(rng, state, gates), fused_expected=False)


@pytest.mark.parametrize("sizes_as, opset", [("constant", 13), ("initializer", 13),
                                             ("attribute", 11)])
def test_explicit_equal_split_sizes_are_fused_and_others_left_alone(sizes_as, opset, rng):
    """jax2onnx gives its Split the parts' sizes: equal ones split as the fused gates do."""
    onnx_model, state, gates = lstm_loop(sizes=[4] * 4, sizes_as=sizes_as, opset=opset)
    _check(onnx_model, cell_loop_feeds(rng, state, gates), fused_expected=True)
    onnx_model, _, _ = lstm_loop(sizes=[3, 5, 4, 4], sizes_as=sizes_as, opset=opset)
    loop = loop_plan(cyloop.load(onnx_model.SerializeToString()))
    assert not any("LSTM" in kind for kind in loop.fused_kinds()), loop


@pytest.mark.parametrize("hidden", [3, 5])
def test_equal_split_sizes_that_do_not_make_the_gate_axis_fail_as_the_split(hidden, rng):
    """Parts of 4 over a gate axis of 4 * hidden columns: the Split fails, and so does the fused
    step (blocked or as written), in both drivers."""
    onnx_model, state, gates = lstm_loop(sizes=[4] * 4, hidden=hidden)
    feeds = cell_loop_feeds(rng, state, gates)
    for driver in ("cython", "python"):
        model_ = cyloop.load(onnx_model.SerializeToString(), driver=driver)
        for _ in range(3):  # (the blocked form too, once the choice is made)
            with pytest.raises(cyloop.ExecutionError, match="Split"):
                model_.run(feeds)
    fused = cyloop.load(onnx_model.SerializeToString(), driver="cython")
    assert fused_making(loop_plan(fused), "LSTMStep", "h_out")
    for measured in measured_steps(fused):
        for candidate in measured.candidates:
            measured.fix(candidate)
            with pytest.raises(cyloop.ExecutionError, match="Split: 4 parts of 4 do not make"):
                fused.run(feeds)


def test_casts_of_both_results_join_the_step_in_its_place(rng):
    """h' and c' each cast to their own type, the emitted copy of h' read between the Casts:
    the Casts join the LSTMStep, which takes the step's place (before that reader)."""
    onnx_model, state, gates = lstm_loop(casts=True)
    _check(onnx_model, cell_loop_feeds(rng, state, gates), fused_expected=True)
    loop = loop_plan(cyloop.load(onnx_model.SerializeToString(), driver="cython"))
    step = loop.fused_step("LSTMStep")
    replaced = [(ref.op, ref.output) for ref in step.replaces]
    assert step.makes[0] == "h_out" \
        and _runs_of(replaced, [("Cast", "h_out"), ("Cast", "c_out")]), loop


def test_an_uneven_opset18_split_runs_the_arithmetic_as_written(rng):
    """num_outputs=4 over 10 columns: parts of 3, 3, 3 and 1 that broadcast (o is [B, 1])."""
    onnx_model, state, gates = lstm_loop("ifgo", hidden=3, gates=10, opset=18)
    _check(onnx_model, cell_loop_feeds(rng, state, gates), fused_expected=True, blockable=False)


def _runs_of(items, run) -> bool:
    """Whether `run` occurs in `items` as consecutive items."""
    return any(items[k:k + len(run)] == run for k in range(len(items)))


def _through_openvino_ir(tmp_path, onnx_model, feeds):
    """Convert `onnx_model` to IR with openvino.convert_model, run the IR under both drivers,
    compare them; returns the Cython driver's plan of the loop."""
    import onnx
    import openvino as ov

    onnx.save(onnx_model, str(tmp_path / "model.onnx"))
    path = tmp_path / "model.xml"
    ov.save_model(ov.convert_model(str(tmp_path / "model.onnx")), str(path),
                  compress_to_fp16=False)
    fast, reference = cyloop.load(path, driver="cython"), cyloop.load(path, driver="python")
    got, want = fast.run(feeds), reference.run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
    return loop_plan(fast)


def _names(refs) -> list[tuple[str, str]]:
    """(op, name) of each node."""
    return [(ref.op, ref.name) for ref in refs]


def test_the_ir_openvino_converts_from_the_onnx_spelling_is_fused_and_hoisted(tmp_path, rng):
    onnx_model, state, gates = lstm_loop("iofg")
    loop = _through_openvino_ir(tmp_path, onnx_model, cell_loop_feeds(rng, state, gates))
    step = loop.fused_step("LSTMStep")
    matmul, pre, s, split = _names(step.replaces[:4])
    assert [matmul[0], pre[0], s[0], split[0]] == ["MatMul", "Add", "Add", "Split"], loop
    assert re.fullmatch(r"\d+:hr", matmul[1]) and re.fullmatch(r"\d+:pre", pre[1]) \
        and re.fullmatch(r"\d+:s", s[1]) and re.fullmatch(r"\d+:\w+", split[1]), loop
    # OpenVINO's Gather(X, i, axis) by the iteration number is hoisted as ONNX's is, and so is
    # the sum of x W and the bias the fusion makes (one product, the bias joined to it).
    gather, joined = loop.hoisted[:2]
    assert gather.how == "gather" and gather.nodes[0].op == "Gather" \
        and re.fullmatch(r"\d+:x_t", gather.nodes[0].name), loop
    assert joined.how == "bias joined" and [r.op for r in joined.nodes] == ["MatMul", "Add"], loop
    assert re.fullmatch(r"\d+:xw", joined.nodes[0].name), loop
    # (the sum the fusion makes, named as the model's sum without the state's product)
    assert re.fullmatch(r".+ - .+@.+", joined.nodes[1].output), loop


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(4)), st.integers(1, 3), st.integers(0, 2), st.integers(1, 4),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_the_kernel_against_the_cell_equations(blocks, rank, axis_pick, hidden, broadcast_c,
                                               seed):
    """LSTMGates on any rank and gate axis (trailing axes included), c broadcasting or not,
    against sigmoid/tanh written out in float64."""
    rng = np.random.default_rng(seed)
    axis = axis_pick % rank
    shape = [2, 3, 2][:rank]
    shape[axis] = 4 * hidden
    pre = (rng.standard_normal(shape) * 3).astype(np.float32)
    part_shape = list(shape)
    part_shape[axis] = hidden
    c_shape = [1 if broadcast_c and k != axis else d for k, d in enumerate(part_shape)]
    c = rng.standard_normal(c_shape).astype(np.float32)
    kernel = fused.lstm_gates({"axis": axis - rank if seed % 2 else axis,
                               "blocks": list(blocks)}, 2)
    h_new, c_new = kernel(pre, c)
    parts = np.split(pre.astype(np.float64), 4, axis=axis)
    f, i, g, o = (parts[k] for k in blocks)
    want_c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    np.testing.assert_allclose(c_new, want_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h_new, _sigmoid(o) * np.tanh(want_c), rtol=1e-5, atol=1e-6)
    assert h_new.dtype == c_new.dtype == np.float32


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(4)), st.booleans(), st.sampled_from(["BG", "G", "1G", "B1"]),
       st.integers(1, 3), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_the_step_kernel_against_the_cell_equations(blocks, r_rows, x_form, rank, hidden,
                                                    seed):
    """LSTMStep, each candidate, on R as [H, 4H] or [4H, H], x of [B, 4H], [4H], [1, 4H] or
    [B, 1] (broadcast), states of any rank (the blocked form takes rank 2 and runs the others
    as written), against the cell equations in float64."""
    rng = np.random.default_rng(seed)
    batch = 3
    state_shape = [2, batch, hidden][-rank:] if rank > 1 else [hidden]
    gates = 4 * hidden
    x_shape = {"BG": [batch, gates], "G": [gates], "1G": [1, gates], "B1": [batch, 1]}[x_form]
    h, c = (rng.standard_normal(state_shape).astype(np.float32) for _ in range(2))
    r = (rng.standard_normal((gates, hidden) if r_rows else (hidden, gates)) * 0.5)
    r = r.astype(np.float32)
    r.flags.writeable = False
    x = rng.standard_normal(x_shape).astype(np.float32)
    pre = x.astype(np.float64) + h.astype(np.float64) @ (r.T if r_rows else r)
    parts = np.split(pre, 4, axis=-1)
    f, i, g, o = (parts[k] for k in blocks)
    want_c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    want_h = _sigmoid(o) * np.tanh(want_c)
    kernel = fused.lstm_step({"axis": -1, "blocks": list(blocks), "r_rows": r_rows}, 2)
    for name in abilities_of(kernel).measured.candidates:
        abilities_of(kernel).measured.fix(name)
        h_new, c_new = kernel(h, r, c, x)
        np.testing.assert_allclose(c_new, want_c, rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(h_new, want_h, rtol=1e-5, atol=1e-5, err_msg=name)
        assert h_new.dtype == c_new.dtype == np.float32
        # out= (a slot of an emitted output): the blocked form writes h' there and returns it;
        # as written, h' is fresh and the slot untouched (the engine copies it). Same values.
        output = np.full((3,) + h_new.shape, np.nan, np.float32)
        slot = output[1]
        into, _ = kernel(h, r, c, x, out=slot)
        blocked = name == "blocked gates" and len(state_shape) == 2 and x_form != "B1"
        assert (into is slot) if blocked else (into.base is not output), name
        np.testing.assert_array_equal(into, h_new, err_msg=name)
        assert np.isnan(output[0]).all() and np.isnan(output[2]).all()


def test_the_blocked_step_lets_go_of_its_weights_when_not_chosen(rng):
    """The blocked form keeps r's blocks, laid out once; once the choice falls elsewhere (or is
    fixed elsewhere, as tune=False does) it lets go of them."""
    hidden = 8
    h, c = (rng.standard_normal((3, hidden)).astype(np.float32) for _ in range(2))
    r = rng.standard_normal((4 * hidden, hidden)).astype(np.float32)
    r.flags.writeable = False
    x = rng.standard_normal((3, 4 * hidden)).astype(np.float32)
    kernel = fused.lstm_step({"axis": -1, "blocks": [0, 1, 2, 3], "r_rows": True}, 2)
    weights = abilities_of(kernel).measured.candidates["blocked gates"].weights
    abilities_of(kernel).measured.fix("blocked gates")
    blocked = kernel(h, r, c, x)
    assert weights.remembers(r) and weights(r).flags.c_contiguous
    abilities_of(kernel).measured.fix("batch-major gates")
    assert not weights.remembers()
    for got, want in zip(kernel(h, r, c, x), blocked):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _gru_loop(x_order="zrn", r_order="zrn", blend="keras", swapped=False, one="initializer",
              leak=None, hidden=4, gates=None, opset=13, sizes=None, r_slices=None, x_axis=1,
              r_axis=1):
    """An ONNX Loop whose body spells the GRU cell with the reset gate after the recurrent
    product: x = x_t W + Bx and r = h R + Br, each split in 3 (gates in `x_order` / `r_order`),
    then z, g (reset), n and the blend: "keras" (1 - z) n + z h, "keras_n" (1 - z) h + z n
    (the one that z scales is n), "torch" n + z (h - n). `one` is the 1 of 1 - z as an
    initializer ("initializer", or "[1, 1, 1]" of that shape) or a Constant node; operands of
    every Mul and Add swapped if `swapped`; `leak` also returns that intermediate value; `gates`
    is the width of the gate axis (3 * hidden unless an uneven split is wanted); `sizes`, the
    parts' sizes both Splits give (an initializer), as jax2onnx gives them. `r_slices`: r cut
    by three Slices along `r_axis` instead, as tf2onnx writes it, the last to the end of the axis
    ("open", with tf2onnx's 2^31 - 1) or to 3 * hidden ("closed"); `x_axis`, x's Split's axis."""
    gates = 3 * hidden if gates is None else gates
    state = hidden if gates == 3 * hidden else -(-gates // 3)
    node = helper.make_node

    def two(op, a, b, out):
        return node(op, [b, a] if swapped else [a, b], [out])

    split_attrs = {"axis": 1, **({"num_outputs": 3} if opset >= 18 else {})}
    initializers = [helper.make_tensor("sizes", 7, [3], sizes)] if sizes else []
    if r_slices is None:
        r_parts = [node("Split", ["r"] + (["sizes"] if sizes else []),
                        [f"r_{g}" for g in r_order], **split_attrs)]
    else:
        r_parts = []
        for k, g in enumerate(r_order):
            end = 2**31 - 1 if k == 2 and r_slices == "open" else (k + 1) * hidden
            initializers += [helper.make_tensor(f"starts_{g}", 7, [2], [0, k * hidden]),
                             helper.make_tensor(f"ends_{g}", 7, [2], [2**31 - 1, end]),
                             helper.make_tensor(f"axes_{g}", 7, [2], [0, r_axis])]
            r_parts.append(node("Slice", ["r", f"starts_{g}", f"ends_{g}", f"axes_{g}"],
                                [f"r_{g}"]))
    nodes = [node("Gather", ["X", "i"], ["x_t"], axis=0),
             node("MatMul", ["x_t", "W"], ["xw"]), two("Add", "xw", "Bx", "x"),
             node("MatMul", ["h_in", "R"], ["hr"]), two("Add", "hr", "Br", "r"),
             node("Split", ["x"] + (["sizes"] if sizes else []), [f"x_{g}" for g in x_order],
                  **dict(split_attrs, axis=x_axis)),
             *r_parts,
             two("Add", "x_z", "r_z", "sz"), node("Sigmoid", ["sz"], ["z"]),
             two("Add", "x_r", "r_r", "sg"), node("Sigmoid", ["sg"], ["g"]),
             two("Mul", "g", "r_n", "gr"), two("Add", "x_n", "gr", "sn"),
             node("Tanh", ["sn"], ["n"])]
    if blend == "torch":
        nodes += [node("Sub", ["h_in", "n"], ["d"]), two("Mul", "z", "d", "zd"),
                  two("Add", "n", "zd", "h_out")]
    else:
        p, q = ("n", "h_in") if blend == "keras" else ("h_in", "n")
        if one == "constant":
            nodes.append(node("Constant", [], ["one"], value_float=1.0))
        else:
            initializers.append(helper.make_tensor("one", 1, [1, 1, 1] if one == "[1, 1, 1]"
                                                   else [], [1.0]))
        nodes += [node("Sub", ["one", "z"], ["omz"]), two("Mul", "omz", p, "a"),
                  two("Mul", "z", q, "b"), two("Add", "a", "b", "h_out")]
    nodes += [node("Identity", ["h_out"], ["y"]), node("Identity", ["cond_in"], ["cond_out"])]
    outputs = [tensor("cond_out", np.bool_, []), tensor("h_out", np.float32, None),
               tensor("y", np.float32, None)]
    outer_outputs = ["h_last", "hs"]
    leaked(leak, nodes, outputs, outer_outputs)
    body = helper.make_graph(
        nodes, "body", [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []),
                        tensor("h_in", np.float32, None)], outputs, initializer=initializers)
    graph = helper.make_graph(
        [node("Loop", ["T", "", "h0"], outer_outputs, body=body)], "gru",
        [tensor("T", np.int64, []), tensor("X", np.float32, ["T", "N", "F"]),
         tensor("W", np.float32, ["F", gates]), tensor("R", np.float32, [state, gates]),
         tensor("Bx", np.float32, [gates]), tensor("Br", np.float32, [gates]),
         tensor("h0", np.float32, ["N", state])],
        [tensor(name, np.float32, None) for name in outer_outputs])
    return model(graph, opset), state, gates


def _gru_feeds(rng, state, gates, **sizes):
    return cell_loop_feeds(rng, state, gates, biases=("Bx", "Br"), states=("h0",), **sizes)


def _agree_three_ways(onnx_model, feeds, peer_atol=2e-6) -> str:
    """Both drivers and onnxruntime agree on `onnx_model`; the reference driver fused nothing.
    Returns the Cython driver's plan of the loop."""
    fast, reference, got, want, peer = run_three_ways(onnx_model, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
        np.testing.assert_allclose(got[name], peer[name], rtol=2e-5, atol=peer_atol,
                                   err_msg=name)
    assert not loop_plan(reference).fused  # the reference driver runs the body as written
    return loop_plan(fast)


def test_gru_splits_giving_equal_sizes_are_fused_and_others_fail_as_the_split(rng):
    onnx_model, state, gates = _gru_loop(sizes=[4] * 3)
    _check_gru(onnx_model, _gru_feeds(rng, state, gates), fused_expected=True)
    onnx_model, state, gates = _gru_loop(sizes=[4] * 3, hidden=5)  # (parts of 4 over 15)
    feeds = _gru_feeds(rng, state, gates)
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ExecutionError, match="Split"):
            cyloop.load(onnx_model.SerializeToString(), driver=driver).run(feeds)
    fused = cyloop.load(onnx_model.SerializeToString(), driver="cython")
    assert fused_making(loop_plan(fused), "GRUStep", "h_out")
    with pytest.raises(cyloop.ExecutionError, match="Split: 3 parts of 4 do not make"):
        fused.run(feeds)


def _check_gru(onnx_model, feeds, fused_expected):
    """The gates fused (with the recurrent product, its sum a ProductPlus of the state read by
    them alone: one GRUStep) or not, agreeing three ways either way."""
    loop = _agree_three_ways(onnx_model, feeds)
    fused = fused_making(loop, "GRUGates", "h_out") or fused_making(loop, "GRUStep", "h_out")
    assert fused == fused_expected, loop
    return loop


@pytest.mark.parametrize("x_order, r_order", [("zrn", "zrn"), ("rzn", "rzn"), ("nzr", "nzr"),
                                              ("zrn", "rnz"), ("znr", "znr")])
@pytest.mark.parametrize("blend", ["keras", "keras_n", "torch"])
@pytest.mark.parametrize("swapped", [False, True])
def test_gru_any_gate_order_blend_and_operand_order_is_fused_and_computes_the_same(
        x_order, r_order, blend, swapped, rng):
    onnx_model, state, gates = _gru_loop(x_order, r_order, blend, swapped)
    _check_gru(onnx_model, _gru_feeds(rng, state, gates), fused_expected=True)


@pytest.mark.parametrize("r_slices", ["open", "closed"])
@pytest.mark.parametrize("x_axis, r_axis", [(1, 1), (-1, 1), (1, -1)])
@pytest.mark.parametrize("r_order", ["zrn", "rzn"])
def test_gru_r_cut_by_three_slices_is_fused_and_computes_the_same(r_slices, x_axis, r_axis,
                                                                   r_order, rng):
    """tf2onnx's GRU cell: x split in 3, r = h R + Br cut by three Slices along its last axis
    (spelled 1 or -1), the last Slice to the axis's end."""
    onnx_model, state, gates = _gru_loop(r_order=r_order, r_slices=r_slices, x_axis=x_axis,
                                         r_axis=r_axis)
    loop = _check_gru(onnx_model, _gru_feeds(rng, state, gates), fused_expected=True)
    assert sum(ref.op == "Slice" for f in loop.fused for ref in f.replaces) == 3, loop


@pytest.mark.parametrize("case", ["another value", "a part twice", "one row"])
def test_gru_slices_that_do_not_cut_r_in_three_are_left_alone(case, rng):
    onnx_model, state, gates = _gru_loop(r_slices="closed")
    body = onnx_model.graph.node[0].attribute[0].g
    slices = [n for n in body.node if n.op_type == "Slice"]

    def replace(name, values):
        (tensor,) = [t for t in body.initializer if t.name == name]
        tensor.CopyFrom(helper.make_tensor(name, 7, [2], values))

    if case == "another value":  # n's part cut from h R, not from h R + Br
        slices[2].input[0] = "hr"
    elif case == "a part twice":  # n's Slice cuts z's part again
        replace("starts_n", [0, 0])
        replace("ends_n", [2**31 - 1, state])
    else:  # z's Slice keeps only the first row of the batch (broadcast as written)
        replace("ends_z", [1, state])
    _check_gru(onnx_model, _gru_feeds(rng, state, gates), fused_expected=False)


@native.steps
@pytest.mark.parametrize("blend", ["keras", "keras_n"])
def test_a_gru_loop_runs_its_steps_many_in_one_call(blend, rng):
    """The gates and the recurrent product as one GRUStep: where z scales h (as in OpenVINO's
    GRU), the loop's steps run many in one call; where it scales n, one at a time, as written.
    Either way as the reference driver and onnxruntime."""
    from cyloop.accel.gemm import _blas_bound

    if not _blas_bound():  # (the one call wants BLAS)
        pytest.skip("numpy's own BLAS is not found here: the one call declines everything")
    onnx_model, state, gates = _gru_loop(blend=blend)
    feeds = _gru_feeds(rng, state, gates, steps=40)
    fast, _, got, want, peer = run_three_ways(onnx_model, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
        np.testing.assert_allclose(got[name], peer[name], rtol=2e-5, atol=2e-6, err_msg=name)
    assert fused_making(loop_plan(fast), "GRUStep", "h_out")
    (counters,) = fast.counters().values()
    assert (counters["stepped_iterations"] > 0) == (blend == "keras"), counters


def test_gru_one_as_a_constant_node_is_fused(rng):
    onnx_model, state, gates = _gru_loop(one="constant")
    _check_gru(onnx_model, _gru_feeds(rng, state, gates), fused_expected=True)


def test_gru_one_of_a_higher_rank_is_fused_and_broadcasts_as_written(rng):
    """A 1 of rank 3 (OpenVINO writes [1, 1]) makes h' [1, B, H]: fused, it does too, as the
    reference driver has it. (One step: the next would split r's batch axis, as written.)"""
    onnx_model, state, gates = _gru_loop(one="[1, 1, 1]")
    feeds = _gru_feeds(rng, state, gates, steps=1)
    fast = cyloop.load(onnx_model, driver="cython")
    got, want = fast.run(feeds), cyloop.load(onnx_model, driver="python").run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
        assert got[name].shape == want[name].shape
    assert want["h_last"].shape == (1, *feeds["h0"].shape)
    loop = loop_plan(fast)
    assert fused_making(loop, "GRUGates", "h_out") or fused_making(loop, "GRUStep", "h_out")


@pytest.mark.parametrize("leak, blend", [("z", "keras"), ("g", "keras"), ("n", "keras"),
                                         ("omz", "keras"), ("a", "keras"), ("sn", "torch"),
                                         ("d", "torch"), ("x_r", "torch"), ("gr", "torch")])
def test_gru_an_intermediate_read_elsewhere_keeps_the_body_as_written(leak, blend, rng):
    onnx_model, state, gates = _gru_loop(blend=blend, leak=leak)
    _check_gru(onnx_model, _gru_feeds(rng, state, gates), fused_expected=False)


def test_gru_a_blend_that_is_not_one_minus_z_is_left_alone(rng):
    """2 - z is not 1 - z: the body runs as written."""
    onnx_model, state, gates = _gru_loop()
    body = onnx_model.graph.node[0].attribute[0].g
    body.initializer[0].CopyFrom(helper.make_tensor("one", 1, [], [2.0]))
    _check_gru(onnx_model, _gru_feeds(rng, state, gates), fused_expected=False)


def test_gru_an_uneven_opset18_split_runs_as_split_cuts_it(rng):
    """num_outputs=3 over 7 columns: parts of 3, 3 and 1 (n, which broadcasts)."""
    onnx_model, state, gates = _gru_loop(hidden=3, gates=7, opset=18)
    _check_gru(onnx_model, _gru_feeds(rng, state, gates), fused_expected=True)


def test_gru_the_ir_openvino_converts_is_fused(tmp_path, rng):
    onnx_model, state, gates = _gru_loop("rzn", "rzn", "torch")
    loop = _through_openvino_ir(tmp_path, onnx_model, _gru_feeds(rng, state, gates))
    ops = loop.fused_step("GRUStep").ops
    assert "MatMul" in ops and "Split" in ops[ops.index("MatMul"):-1], loop


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(3)), st.permutations(range(3)), st.integers(1, 3),
       st.integers(0, 2), st.integers(1, 4), st.booleans(), st.integers(0, 3),
       st.integers(0, 2**32 - 1))
def test_the_gru_kernel_against_the_cell_equations(x_blocks, r_blocks, rank, axis_pick, hidden,
                                                   z_scales_n, one_rank, seed):
    """GRUGates on any rank and gate axis, any block placement, both blends, the 1 of 1 - z
    of any rank (OpenVINO's is [1, 1]), against the equations written out in float64."""
    rng = np.random.default_rng(seed)
    axis = axis_pick % rank
    shape = [2, 3, 2][:rank]
    shape[axis] = 3 * hidden
    x, r = ((rng.standard_normal(shape) * 3).astype(np.float32) for _ in range(2))
    h_shape = list(shape)
    h_shape[axis] = hidden
    h = rng.standard_normal(h_shape).astype(np.float32)
    kernel = fused.gru_gates({"axis": axis - rank if seed % 2 else axis, "x_blocks": x_blocks,
                              "r_blocks": r_blocks, "z_scales": "n" if z_scales_n else "h",
                              "one_rank": one_rank})
    got = kernel(x, r, h)
    xs, rs = (np.split(a.astype(np.float64), 3, axis=axis) for a in (x, r))
    (xz, xg, xn), (rz, rg, rn) = ([parts[k] for k in blocks]
                                  for parts, blocks in ((xs, x_blocks), (rs, r_blocks)))
    z, g = _sigmoid(xz + rz), _sigmoid(xg + rg)
    n = np.tanh(xn + g * rn)
    one = np.ones((1,) * one_rank)
    want = (one - z) * h + z * n if z_scales_n else (one - z) * n + z * h
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got.dtype == np.float32 and got.shape == want.shape


def _gru_equations(h, r, x, b, x_blocks, r_blocks, z_scales_n, r_rows, x_at_least=None,
                   r_at_least=None):
    """h' of ``GRUGates(x, h @ r + b, h)`` (``h @ r^T`` if `r_rows`), written out in float64;
    x and the recurrent pre-activations broadcast at least to the shapes given first, as
    OpenVINO spells it (`_broadcast_at_least`)."""
    pre = h.astype(np.float64) @ (r.T if r_rows else r).astype(np.float64) + b
    x, pre = (a if shape is None else _broadcast_at_least(a, shape)
              for a, shape in ((x, x_at_least), (pre, r_at_least)))
    xs, rs = (np.split(a.astype(np.float64), 3, axis=-1) for a in (x, pre))
    (xz, xg, xn), (rz, rg, rn) = ([parts[k] for k in blocks]
                                  for parts, blocks in ((xs, x_blocks), (rs, r_blocks)))
    z, g = _sigmoid(xz + rz), _sigmoid(xg + rg)
    n = np.tanh(xn + g * rn)
    return (1 - z) * h + z * n if z_scales_n else (1 - z) * n + z * h


@settings(max_examples=40, deadline=None)
@given(st.permutations(range(3)), st.permutations(range(3)), st.booleans(), st.booleans(),
       st.sampled_from(["[3H]", "[1, 3H]", "[B, 3H] rows alike", "[B, 3H]"]),
       st.sampled_from([np.float32, np.float64]), st.booleans(), st.integers(0, 2**32 - 1))
@native.steps
def test_the_gru_step_kernel_in_one_call_and_in_steps(x_blocks, r_blocks, z_scales_n, r_rows,
                                                       bias, dtype, two_cores, seed):
    """GRUStep against the equations: one call where it takes the operands (z scaling h, b's
    n block one row), as written elsewhere; its steps in one call, where it offers them,
    against one call a step."""
    from cyloop.accel.gemm import _blas_bound, set_products_on_two_cores

    if not _blas_bound():  # (what a loop's first product does: the one call wants BLAS)
        pytest.skip("numpy's own BLAS is not found here: the one call declines everything")
    rng = np.random.default_rng(seed)
    batch, hidden, count = 3, 4, 5
    h = rng.standard_normal((batch, hidden)).astype(dtype)
    r = (rng.standard_normal((3 * hidden, hidden) if r_rows else (hidden, 3 * hidden))
         * 0.5).astype(dtype)
    r.flags.writeable = False
    xs = rng.standard_normal((count, batch, 3 * hidden)).astype(dtype)
    b = {"[3H]": lambda: rng.standard_normal(3 * hidden),
         "[1, 3H]": lambda: rng.standard_normal((1, 3 * hidden)),
         "[B, 3H] rows alike": lambda: np.repeat(rng.standard_normal((1, 3 * hidden)), batch, 0),
         "[B, 3H]": lambda: rng.standard_normal((batch, 3 * hidden))}[bias]().astype(dtype)
    b.flags.writeable = False
    kernel = fused.gru_step({"axis": 1, "x_blocks": x_blocks, "r_blocks": r_blocks,
                             "z_scales": "n" if z_scales_n else "h", "r_rows": r_rows})
    tolerance = ({"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32
                 else {"rtol": 1e-12, "atol": 1e-12})  # (sums in another order)
    previous = set_products_on_two_cores(two_cores)
    try:
        state, want = h, []
        for x in xs:
            state = _gru_equations(state, r, x, b, x_blocks, r_blocks, z_scales_n, r_rows)
            want.append(state)
        out = np.empty((batch, hidden), dtype)
        got = kernel(h, r, xs[0], b, out=out)
        np.testing.assert_allclose(got, want[0], **tolerance)
        assert got.dtype == dtype
        one_call = not z_scales_n and bias != "[B, 3H]"
        assert (got is out) == one_call  # (one call writes its destination; as written not)
        steps = abilities_of(kernel).steps_for(h, r, xs[0], b)
        assert (steps is not None) == (not z_scales_n)
        if steps is not None:
            outs = np.empty((count, batch, hidden), dtype)
            done = steps((h, r, xs[0], b), xs, outs, False)
            assert (done is None) == (bias == "[B, 3H]")  # (rows of b unlike: declined)
            if done is not None:
                np.testing.assert_allclose(outs, np.stack(want), **tolerance)
                np.testing.assert_array_equal(done[0], outs[-1])
    finally:
        set_products_on_two_cores(previous)


def _broadcast_at_least(s, shape):
    """OpenVINO's ``Broadcast(s, Maximum(ShapeOf(s), shape))``, by the kernels of those ops the
    reference driver runs."""
    def op(op_type):
        return lookup(OPENVINO_DOMAIN, op_type, 8).build({"mode": "numpy"})

    return op("Broadcast")(s, op("Maximum")(op("ShapeOf")(s), np.array(shape, np.int64)))


# AtLeast shapes against pre-activations [B, G] (B 3, or 1 where the shape "widens" them): what
# jax2onnx's export gives (left as they are), smaller ones, and ones the Broadcast or the
# Maximum refuses.
_AT_LEAST = {"as exported": lambda g: [3, g], "smaller": lambda g: [1, 1],
             "one number": lambda g: [1], "widens": lambda g: [3, g],
             "too long": lambda g: [5, g], "of another rank": lambda g: [1, 1, 1]}


def _step_at_least(cell, shape, r, b):
    """(the fused step kernel of `cell` with `shape` as its ``at_least``, the same without it,
    the step's equations: (state, x) -> the next state, a tuple (h',) or (h', c'))."""
    if cell == "rnn":
        def equations(state, x):
            return (np.tanh(_broadcast_at_least(x + state[0].astype(np.float64) @ r, shape)),)
        return (fused.product_plus_tanh({"at_least": shape}), fused.product_plus_tanh({}),
                equations)
    if cell == "lstm":
        def equations(state, x):
            h, c = state
            pre = _broadcast_at_least(x + h.astype(np.float64) @ r, shape)
            i, f, g, o = np.split(pre, 4, axis=-1)
            c_new = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            return _sigmoid(o) * np.tanh(c_new), c_new
        attrs = {"axis": -1, "blocks": [1, 0, 2, 3]}
        return (fused.lstm_step({**attrs, "at_least": shape}, 2), fused.lstm_step(attrs, 2),
                equations)
    key = "x_at_least" if cell == "gru x" else "r_at_least"

    def equations(state, x):
        return (_gru_equations(state[0], r, x, b, [0, 1, 2], [0, 1, 2], False, False,
                               **{key: shape}),)
    attrs = {"axis": 1, "x_blocks": [0, 1, 2], "r_blocks": [0, 1, 2], "z_scales": "h"}
    return fused.gru_step({**attrs, key: shape}), fused.gru_step(attrs), equations


@native.steps
@pytest.mark.parametrize("kind", list(_AT_LEAST))
@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru x", "gru r"])
def test_step_kernels_broadcast_their_pre_activations_at_least_as_openvino_spells_it(cell, kind,
                                                                                      rng,
                                                                                      monkeypatch):
    """ProductPlusTanh, LSTMStep (each candidate) and GRUStep given the shape their
    pre-activations are broadcast to at least (fuse.py `_match_at_least`) against their
    equations after OpenVINO's ops, on one core and on two: the same values where the shape
    leaves them as they are, in one call and in steps wherever the kernel without it offers
    them; a broadcast state where it widens them (as written, no steps); the ops' errors where
    they refuse it."""
    from cyloop.accel import gemm

    hidden, count = 4, 3
    batch = 1 if kind == "widens" else 3
    gates = {"rnn": 1, "lstm": 4}.get(cell, 3) * hidden
    shape = _AT_LEAST[kind](gates)
    r = (rng.standard_normal((hidden, gates)) * 0.5).astype(np.float32)
    r.flags.writeable = False
    b = rng.standard_normal(gates).astype(np.float32)
    b.flags.writeable = False
    kernel, plain, equations = _step_at_least(cell, shape, r, b)
    state = tuple(rng.standard_normal((batch, hidden)).astype(np.float32)
                  for _ in range(2 if cell == "lstm" else 1))
    xs = rng.standard_normal((count, batch, gates)).astype(np.float32)

    def args(state, x):
        h, *c = state
        return (h, r, *c, x, b) if cell.startswith("gru") else (h, r, *c, x)

    refused = kind in _REFUSED
    # (ProductPlusTanh's one call and steps are its two cores' form: taken here at any size)
    monkeypatch.setattr(fused, "splits_now", lambda multiply_adds: gemm.splits_now(1 << 40))
    for two_cores in (False, True):
        previous = gemm.set_products_on_two_cores(two_cores)
        try:
            measured = abilities_of(kernel).measured
            candidates = list(measured.candidates) if cell == "lstm" else [None]
            for candidate in candidates:
                if candidate is not None:
                    measured.fix(candidate)
                if refused:
                    with pytest.raises(ValueError):
                        kernel(*args(state, xs[0]))
                    continue
                got, want = _each(kernel(*args(state, xs[0]))), equations(state, xs[0])
                for g, w in zip(got, want, strict=True):
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5,
                                               err_msg=f"{candidate}, two cores {two_cores}")
                    assert g.shape == w.shape and g.dtype == np.float32
            if candidates[-1] is not None:  # (the steps are the blocked form's)
                abilities_of(plain).measured.fix(candidates[-1])
            outs, plain_outs = (np.empty((count, batch, hidden), np.float32) for _ in range(2))
            ran, plain_ran = (_steps_ran(k, args(state, xs[0]), xs, into)
                              for k, into in ((kernel, outs), (plain, plain_outs)))
            assert ran == (plain_ran and kind not in ("widens", *_REFUSED)), two_cores
            if gemm._blas_bound():  # (the one calls and steps want numpy's own BLAS)
                # (rnn on one core: its product's default formulation's steps, offered while
                # that choice's trial waits for the work to pay for it)
                assert plain_ran
            if ran:
                now, want = state, []
                for x in xs:
                    now = equations(now, x)
                    want.append(now[0])
                np.testing.assert_allclose(outs, np.stack(want), rtol=1e-5, atol=1e-5)
        finally:
            gemm.set_products_on_two_cores(previous)


_REFUSED = ("too long", "of another rank")


@pytest.mark.parametrize("width", [12, 10])
def test_openvino_gates_split_unevenly_fail_as_openvino_split(width, tmp_path, rng):
    """LSTM gates whose pre-activations OpenVINO's Split cuts in 4: fused, and where the axis
    does not split evenly they fail as that Split does (ONNX's opset-18 Split would make the
    last part shorter, which the fused gates compute for it)."""
    import openvino as ov
    import openvino.opset8 as ops

    from ..support.openvino_models import ti_last_values

    steps, batch, f = 4, 2, np.float32
    x = ops.parameter(ov.PartialShape([batch, steps, -1]), f, name="X")  # (OpenVINO refuses
    c0 = ops.parameter(ov.PartialShape([batch, -1]), f, name="C0")      # a known width of 10)
    xt = ops.parameter(ov.PartialShape([-1, 1, -1]), f, name="xt")
    c = ops.parameter(ov.PartialShape([-1, -1]), f, name="c")
    pre = ops.squeeze(xt, ops.constant(np.array([1], np.int64)))
    g_f, g_i, g_g, g_o = ops.split(pre, ops.constant(np.array(1, np.int64)), 4).outputs()
    c_new = ops.add(ops.multiply(ops.sigmoid(g_f), c),
                    ops.multiply(ops.sigmoid(g_i), ops.tanh(g_g)))
    res_h, res_c = ops.result(ops.multiply(ops.sigmoid(g_o), ops.tanh(c_new))), ops.result(c_new)
    path = ti_last_values(tmp_path / "gates.xml", [x, c0], [res_h, res_c], [xt, c], (xt, x, 1),
                          (c, c0, res_c))
    feeds = {"X": rng.standard_normal((batch, steps, width)).astype(f),
             "C0": rng.standard_normal((batch, width // 4)).astype(f)}
    fast, reference = cyloop.load(path, driver="cython"), cyloop.load(path, driver="python")
    assert "Split" in loop_plan(fast).fused_step("LSTMGates").ops, fast.plan()
    if width % 4:
        for model in (fast, reference):
            with pytest.raises(cyloop.ExecutionError, match="does not split into 4 equal parts"):
                model.run(feeds)
        return
    got, want = fast.run(feeds), reference.run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_gates_split_as_openvino_splits_refuse_an_uneven_axis(rng):
    """``even`` (LSTM) and ``x_even`` / ``r_even`` (GRU): an axis their parts do not cut
    evenly fails, as OpenVINO's Split does; without them the LSTM's parts are ceil-sized, as
    ONNX's opset-18 Split cuts them."""
    openvino_split = lookup(OPENVINO_DOMAIN, "Split", 1).build({"num_splits": 4}, 4)
    pre, c = rng.standard_normal((2, 10)).astype(np.float32), np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError) as refused:
        openvino_split(pre, np.array(1))
    lstm = {"axis": 1, "blocks": [0, 1, 2, 3]}
    with pytest.raises(ValueError, match=re.escape(str(refused.value))):
        fused.lstm_gates({**lstm, "even": True}, 2)(pre, c)
    assert fused.lstm_gates(lstm, 2)(pre, c)[0].shape == (2, 3)
    gru = {"axis": 1, "x_blocks": [0, 1, 2], "r_blocks": [0, 1, 2], "z_scales": "h"}
    x, h = rng.standard_normal((2, 12)).astype(np.float32), np.zeros((2, 4), np.float32)
    r = rng.standard_normal((2, 10)).astype(np.float32)
    for key, operands in (("r_even", (x, r, h)), ("x_even", (r, x, h))):
        with pytest.raises(ValueError, match="does not split into 3 equal parts"):
            fused.gru_gates({**gru, key: True})(*operands)


def _broadcast_body(variant):
    """A body of OpenVINO's ``Broadcast(s, Maximum(ShapeOf(s), c))``, or a `variant` of it
    that is something else."""
    from cyloop.ir import Graph, Node, Value

    def ov(op_type, inputs, outputs, **attrs):
        return Node(op_type, inputs, outputs, attrs, OPENVINO_DOMAIN, f"{op_type}_1", version=8)

    c = {"c of floats": np.array([3.0, 4.0]), "c of rank 2": np.array([[3, 4]])}.get(
        variant, np.array([3, 4]))
    maximum = ["c", "shape"] if variant == "operands swapped" else ["shape", "c"]
    nodes = [ov("ShapeOf", ["s"], ["shape"]),
             ov("Maximum", maximum, ["target"],
                auto_broadcast="none" if variant == "maximum not numpy" else "numpy"),
             ov("Broadcast", ["s", "target"], ["wide"],
                mode="bidirectional" if variant == "bidirectional" else "numpy")]
    outputs = [Value("wide"), *([Value("shape")] if variant == "shape read elsewhere" else [])]
    return Graph(nodes, [Value("s")], outputs, {"c": c})


@pytest.mark.parametrize("variant, rewritten", [
    ("as convert_model writes it", True), ("operands swapped", True), ("bidirectional", False),
    ("maximum not numpy", False), ("c of floats", False), ("c of rank 2", False),
    ("shape read elsewhere", False)])
def test_only_a_broadcast_to_at_least_a_constant_shape_becomes_at_least(variant, rewritten):
    from cyloop.engine import fuse

    body = fuse._fuse(_broadcast_body(variant), "Broadcast", fuse._match_at_least,
                     fuse._UsesOf())
    at_least = [node for node in body.nodes if node.op_type == "AtLeast"]
    assert bool(at_least) == rewritten
    if rewritten:
        (node,) = at_least
        assert node.inputs == ["s"] and node.outputs == ["wide"] and node.attrs["shape"] == [3, 4]
        assert node.name == "Broadcast_1" and len(body.nodes) == 1


def test_a_broadcast_at_least_of_an_invariant_runs_once_a_run(tmp_path, rng):
    """An AtLeast no cell reads through, of an invariant bias, runs once a run (as the
    Broadcast it stands for did), and the product it is added to is hoisted with the bias
    joined to it; the feed is handed back as it was (AtLeast's result is the bias itself)."""
    import openvino as ov
    import openvino.opset8 as ops

    from ..support.openvino_models import save

    steps, batch, features, hidden, f = 6, 3, 4, 5, np.float32
    x = ops.parameter([batch, steps, features], f, name="X")
    bias = ops.parameter([hidden], f, name="B")
    xt = ops.parameter(ov.PartialShape([-1, 1, features]), f, name="xt")
    b = ops.parameter(ov.PartialShape([-1]), f, name="b")
    w = ops.constant((rng.standard_normal((features, hidden)) * 0.5).astype(f))
    wide = ops.broadcast(b, ops.maximum(ops.shape_of(b), ops.constant(np.array([1], np.int64))))
    x_t = ops.squeeze(xt, ops.constant(np.array([1], np.int64)))
    res_y = ops.result(ops.unsqueeze(ops.add(ops.matmul(x_t, w, False, False), wide),
                                     ops.constant(np.array([1], np.int64))))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([res_y], [xt, b], "body"))
    ti.set_sliced_input(xt, x.output(0), 0, 1, 1, -1, 1)
    ti.set_invariant_input(b, bias.output(0))
    ys = ti.get_concatenated_slices(res_y.output(0), 0, 1, 1, -1, 1)
    path = save(ov.Model([ys], [x, bias], "biased"), tmp_path / "biased.xml")
    feeds = {"X": rng.standard_normal((batch, steps, features)).astype(f),
             "B": rng.standard_normal(hidden).astype(f)}
    fast = cyloop.load(path, driver="cython")
    got, want = fast.run(feeds), cyloop.load(path, driver="python").run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
    loop = loop_plan(fast)
    assert any(w.how == "once" and w.op == "AtLeast" for w in loop.hoisted), loop
    assert any(w.how == "bias joined" for w in loop.hoisted), loop
    assert feeds["B"].flags.writeable


@pytest.mark.parametrize("case", ["as exported", "read elsewhere", "sum read elsewhere",
                                  "widens"])
def test_an_openvino_broadcast_after_the_sum_is_read_through(case, tmp_path, rng):
    """A TensorIterator whose RNN body broadcasts its sum as convert_model writes jax2onnx's
    (Broadcast(s, Maximum(ShapeOf(s), c))): read through into one ProductPlusTanh; kept as its
    own AtLeast where the broadcast value or the sum is also returned (the sum then a
    ProductPlus of its own, the tanh apart); and where it widens the state
    (batch 1 broadcast to 3 in the first step), the same values as the reference driver."""
    import openvino as ov
    import openvino.opset8 as ops

    from ..support.openvino_models import ti_last_values

    steps, features, hidden, f = 5, 4, 6, np.float32
    batch = 1 if case == "widens" else 3
    x = ops.parameter([batch, steps, features], f, name="X")
    h0 = ops.parameter([batch, hidden], f, name="H0")
    xt = ops.parameter(ov.PartialShape([-1, 1, features]), f, name="xt")
    h = ops.parameter(ov.PartialShape([-1, hidden]), f, name="h")
    w, r = (ops.constant((rng.standard_normal(shape) * 0.5).astype(f))
            for shape in ((features, hidden), (hidden, hidden)))
    b = ops.constant(rng.standard_normal(hidden).astype(f))
    x_t = ops.squeeze(xt, ops.constant(np.array([1], np.int64)))
    total = ops.add(ops.add(ops.matmul(x_t, w, False, False), ops.matmul(h, r, False, False)), b)
    at_least = ops.constant(np.array([3, hidden], np.int64))
    wide = ops.broadcast(total, ops.maximum(ops.shape_of(total), at_least))
    res_h = ops.result(ops.tanh(wide))
    results = [res_h, *{"read elsewhere": [ops.result(wide)],
                        "sum read elsewhere": [ops.result(total)]}.get(case, [])]
    path = ti_last_values(tmp_path / "rnn.xml", [x, h0], results, [xt, h], (xt, x, 1),
                          (h, h0, res_h))
    feeds = {"X": rng.standard_normal((batch, steps, features)).astype(f),
             "H0": rng.standard_normal((batch, hidden)).astype(f)}
    fast, reference = cyloop.load(path, driver="cython"), cyloop.load(path, driver="python")
    got, want = fast.run(feeds), reference.run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert next(iter(got.values())).shape == (3, hidden)  # (the last h)
    loop = loop_plan(fast)
    apart = case in ("read elsewhere", "sum read elsewhere")
    assert ("AtLeast" in loop.fused_kinds()) == apart, loop
    assert any(f.kind == "ProductPlusTanh" and "Broadcast" in f.ops for f in loop.fused) == \
        (not apart), loop


def _steps_ran(kernel, args, xs, outs) -> bool:
    """Whether `kernel` ran the steps of `xs` in one call (into `outs`) from `args`."""
    steps = abilities_of(kernel).steps_for(*args)
    return steps is not None and steps(args, xs, outs, False) is not None


def _each(results):
    """A kernel's results as a tuple."""
    return results if isinstance(results, tuple) else (results,)


@pytest.mark.parametrize("batch, hidden", [(0, 4), (3, 0)])
def test_the_gru_step_kernel_on_an_empty_batch_or_state(batch, hidden):
    """Nothing to compute: as the two as written, an empty h'."""
    kernel = fused.gru_step({"axis": 1, "x_blocks": [0, 1, 2], "r_blocks": [0, 1, 2],
                             "z_scales": "h"})
    h = np.zeros((batch, hidden), np.float32)
    r, x = np.zeros((hidden, 3 * hidden), np.float32), np.zeros((batch, 3 * hidden), np.float32)
    b = np.zeros((batch, 3 * hidden), np.float32)
    want = fused.gru_gates({"axis": 1, "x_blocks": [0, 1, 2], "r_blocks": [0, 1, 2],
                            "z_scales": "h"})(x, h @ r + b, h)
    got = kernel(h, r, x, b)
    assert got.shape == want.shape == (batch, hidden) and got.dtype == want.dtype


def test_an_openvino_body_with_r_transposed_is_fused(tmp_path, rng):
    """A TensorIterator whose body spells the cell with OpenVINO ops, h R^T as MatMul with
    transpose_b (R stored [4H, H]), the gates f, g, i, o: fused into one LSTMStep and agreeing
    with the reference driver under each candidate."""
    import openvino as ov
    import openvino.opset8 as ops

    from ..support.openvino_models import save

    steps, batch, features, hidden, f = 5, 3, 4, 6, np.float32
    x = ops.parameter([batch, steps, features], f, name="X")
    h0, c0 = (ops.parameter([batch, hidden], f, name=n) for n in ("H0", "C0"))
    xt = ops.parameter([batch, 1, features], f, name="xt")
    h, c = (ops.parameter([batch, hidden], f, name=n) for n in ("h", "c"))
    w = ops.constant((rng.standard_normal((features, 4 * hidden)) * 0.5).astype(f))
    r = ops.constant((rng.standard_normal((4 * hidden, hidden)) * 0.5).astype(f))
    b = ops.constant(rng.standard_normal(4 * hidden).astype(f))
    x_t = ops.squeeze(xt, ops.constant(np.array([1], np.int64)))
    pre = ops.add(ops.add(ops.matmul(x_t, w, False, False), ops.matmul(h, r, False, True)), b)
    g_f, g_g, g_i, g_o = ops.split(pre, ops.constant(np.array(1, np.int64)), 4).outputs()
    c_new = ops.add(ops.multiply(ops.sigmoid(g_f), c),
                    ops.multiply(ops.sigmoid(g_i), ops.tanh(g_g)))
    h_new = ops.multiply(ops.sigmoid(g_o), ops.tanh(c_new))
    res_h, res_c = ops.result(h_new), ops.result(c_new)
    res_y = ops.result(ops.unsqueeze(h_new, ops.constant(np.array([1], np.int64))))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([res_h, res_c, res_y], [xt, h, c], "body"))
    ti.set_sliced_input(xt, x.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(h, h0.output(0), res_h.output(0))
    ti.set_merged_input(c, c0.output(0), res_c.output(0))
    outputs = [ti.get_concatenated_slices(res_y.output(0), 0, 1, 1, -1, 1),
               ti.get_iter_value(res_c.output(0), -1)]
    path = save(ov.Model(outputs, [x, h0, c0], "cell"), tmp_path / "cell.xml")
    feeds = {"X": rng.standard_normal((batch, steps, features)).astype(f),
             "H0": rng.standard_normal((batch, hidden)).astype(f),
             "C0": rng.standard_normal((batch, hidden)).astype(f)}
    fast, reference = cyloop.load(path, driver="cython"), cyloop.load(path, driver="python")
    want = reference.run(feeds)
    for candidate in [None, "batch-major gates", "blocked gates"]:
        (measured,) = [m for m in measured_steps(fast) if "blocked gates" in m.candidates]
        if candidate is not None:
            measured.fix(candidate)
        fast.reset_counters()
        got = fast.run(feeds)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6,
                                       err_msg=f"{name} ({candidate})")
    loop = loop_plan(fast)
    first = loop.fused_step("LSTMStep").replaces[0]
    assert first.op == "MatMul" and re.fullmatch(r"\d+:\w+", first.name), loop
    # h, emitted on axis 1 (strided slots) and carried: in its slot or a pool buffer, measured.
    h = loop.alias("h")
    assert (h.how, h.output, h.writer_op) == ("measured slot or pool", 0, "LSTMStep"), loop


# -- ProductPlus: any other Add tree of a carried state's product and other addends -----------

def _rnn_loop(terms=("xw", "hr", "B"), leak=None, dtype=np.float32, feeds=None, gemm=None,
              casts=None):
    """An ONNX Loop whose body is ``h' = Tanh(sum of terms)``, the terms summed left to right
    by Add nodes: "xw" = x_t @ W (hoisted), "hr" = h @ R (the recurrent product; with `gemm`,
    a Gemm of those attributes, and B as its C if ``gemm["C"]``), "hr2" = a second product of
    h, "B" a bias, "h" the state itself; `leak` names a value the body also returns. Emits
    every h'. Inputs of unknown shape, unless `feeds` gives them. `casts`: Casts after the Tanh
    (made as 't'), in one of `_CASTS`' spellings."""
    node = helper.make_node
    hr = node("MatMul", ["h_in", "R"], ["hr"]) if gemm is None else node(
        "Gemm", ["h_in", "R"] + (["B"] if gemm.get("C") else []), ["hr"],
        **{k: v for k, v in gemm.items() if k != "C"})
    products = {"xw": node("MatMul", ["x_t", "W"], ["xw"]), "hr": hr,
                "hr2": node("MatMul", ["h_in", "R"], ["hr2"])}
    nodes = [node("Gather", ["X", "i"], ["x_t"], axis=0)]
    nodes += [products[t] for t in terms if t in products]
    names = {"h": "h_in"}
    total = names.get(terms[0], terms[0])
    for k, term in enumerate(terms[1:]):
        nodes.append(node("Add", [total, names.get(term, term)], [f"s{k}"]))
        total = f"s{k}"
    if casts is None:
        nodes += [node("Tanh", [total], ["h_out"]), node("Identity", ["h_out"], ["y"])]
    else:
        nodes += [node("Tanh", [total], ["t"])] + [
            node("Cast", [source], [made], to=helper.np_dtype_to_tensor_dtype(np.dtype(to)))
            for source, made, to in _CASTS[casts](dtype)]
        nodes += [node("Identity", ["t"], ["y"])] if casts == "t read twice" else []
    nodes += [node("Identity", ["cond_in"], ["cond_out"])]
    outputs = [tensor("cond_out", np.bool_, []), tensor("h_out", dtype, None),
               tensor("y", dtype, None)]
    if leak is not None:
        outputs.append(tensor(leak, dtype, None))
    body = helper.make_graph(nodes, "body", [tensor("i", np.int64, []),
                                             tensor("cond_in", np.bool_, []),
                                             tensor("h_in", dtype, None)], outputs)
    loop_outputs = ["h_last", "hs"] + (["leaked"] if leak is not None else [])
    graph = helper.make_graph(
        [node("Loop", ["T", "", "H0"], loop_outputs, body=body)], "rnn",
        [tensor("T", np.int64, [])] + [tensor(name, dtype, None if feeds is None else
                                              list(feeds[name].shape))
                                       for name in ("X", "W", "R", "B", "H0")],
        [tensor(name, dtype, None) for name in loop_outputs])
    return model(graph, 13)


# Casts after an RNN step's Tanh (made as 't'), as (source, result, type) triples: jax2onnx's
# two to the carry's type (the carried h' a Cast of t, the emitted y a Cast of h'); one whose
# source something else reads too (t emitted as y); and, of the emitted copy, to another type.
_CASTS = {
    "jax2onnx": lambda dtype: [("t", "h_out", dtype), ("h_out", "y", dtype)],
    "t read twice": lambda dtype: [("t", "h_out", dtype)],
    "y in float64": lambda dtype: [("t", "h_out", dtype), ("h_out", "y", np.float64)],
}


def _rnn_feeds(rng, dtype=np.float32, h_shape=(3, 6), x_rows=3, steps=6, features=4):
    hidden = h_shape[-1]
    scale = 1 if np.dtype(dtype).kind == "f" else 3

    def draw(*shape):
        values = rng.standard_normal(shape) * 0.5 * scale
        return values.astype(dtype)

    return {"T": np.array(steps, np.int64), "X": draw(steps, x_rows, features),
            "W": draw(features, hidden), "R": draw(hidden, hidden), "B": draw(hidden),
            "H0": draw(*h_shape)}


@pytest.mark.parametrize("terms, fused_expected", [
    (("xw", "hr", "B"), True), (("hr", "xw"), True), (("B", "xw", "hr"), True),
    (("hr", "B"), True), (("xw", "hr", "B", "h"), True),
    (("hr", "hr2"), False),  # two products of the state: neither is the one
    (("hr",), False),  # no sum
])
def test_a_sum_with_the_states_product_is_fused_and_computes_the_same(terms, fused_expected,
                                                                     rng):
    """``Tanh(x W + h R + b)`` in any order, with more addends (the state itself too), becomes
    one ProductPlusTanh node (the other addends summed before it, hoisted where they can be)
    and agrees with the reference driver and onnxruntime; a sum of two products of the state,
    or none, is left as written."""
    loop = _agree_three_ways(_rnn_loop(terms), _rnn_feeds(rng), peer_atol=2e-5)
    assert fused_making(loop, "ProductPlusTanh") == fused_expected, loop
    assert "ProductPlus" not in loop.fused_kinds()  # (the Tanh alone reads the sum: it joins)
    if fused_expected and "xw" in terms and "B" in terms:  # x W + b: one hoisted product
        assert any(w.how == "bias joined" for w in loop.hoisted), loop


@pytest.mark.parametrize("gemm, fused_expected", [
    ({}, True), ({"transB": 1}, True), ({"C": True, "beta": 0.0}, True),
    ({"C": True}, False),  # (beta 1: C is one more addend, the Gemm left as written)
    ({"alpha": 2.0}, False),
])
def test_a_state_product_spelled_as_gemm_is_fused_where_it_is_only_the_product(gemm,
                                                                                fused_expected,
                                                                                rng):
    """A Gemm that is only ``h R`` (or ``h R^T``): alpha 1 and no C, or a C beta 0 leaves out
    (jax2onnx's spelling of ``h @ u``), is the recurrent product of a ProductPlusTanh; others
    stay as written. The reference driver and onnxruntime agree either way."""
    loop = _agree_three_ways(_rnn_loop(("xw", "hr", "B"), gemm=gemm), _rnn_feeds(rng),
                             peer_atol=2e-5)
    assert fused_making(loop, "ProductPlusTanh") == fused_expected, loop


@pytest.mark.parametrize("casts", list(_CASTS))
def test_casts_after_the_step_join_it_or_change_nothing(casts, rng):
    """A Cast that alone reads the step joins it (its ``to``), and a Cast of a value of its own
    type is an Identity, so jax2onnx's step is one node that runs its steps in one call; a Cast
    to another type stays a node. The reference driver and onnxruntime agree each way."""
    onnx_model = _rnn_loop(casts=casts)
    y_type = onnx_model.graph.node[0].attribute[0].g.output[2]
    y_type.type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(
        np.dtype(_CASTS[casts](np.float32)[-1][2]))
    onnx_model.graph.output[1].type.tensor_type.elem_type = y_type.type.tensor_type.elem_type
    plan = _agree_three_ways(onnx_model, _rnn_feeds(rng), peer_atol=2e-5)
    fused = plan.fused_step("ProductPlusTanh")
    assert fused.makes[0] == ("t" if casts == "t read twice" else "h_out")
    assert (("Cast", "h_out") in [(r.op, r.output) for r in fused.replaces]) == \
        (casts != "t read twice")
    (loop,) = cyloop.load(onnx_model.SerializeToString(), driver="cython")._compiled.loops
    kinds = [type(step.fn).__name__ for step in loop.body.compiled.steps]
    assert len(kinds) == {"jax2onnx": 1, "t read twice": 2, "y in float64": 2}[casts], kinds
    assert (plan.steps is not None and (plan.steps.kind, plan.steps.makes)
            == ("ProductPlusTanh", "h_out")) == (casts == "jax2onnx"), plan


def test_a_cast_of_a_value_of_its_type_already_runs_no_step(rng):
    """A Cast to bool of a comparison, and to int64 of a Shape, is an Identity (no step), and
    so is a Cast of that; a Cast that converts (a comparison to float, a float to bool, a Shape
    to int32) stays. The reference driver, which runs the body as written, and onnxruntime
    agree."""
    node = helper.make_node
    casts = {"lt_b": ("lt", "BOOL"), "lt_bb": ("lt_b", "BOOL"), "shape_i": ("shape", "INT64"),
             "lt_f": ("lt", "FLOAT"),
             "v_b": ("v_out", "BOOL"), "shape_s": ("shape", "INT32")}
    nodes = [node("Mul", ["v_in", "half"], ["v_out"]),
             node("ReduceSum", ["v_out"], ["s"], keepdims=0),
             node("Less", ["s", "limit"], ["lt"]), node("Shape", ["v_out"], ["shape"]),
             *(node("Cast", [source], [made], to=getattr(helper.TensorProto, to))
               for made, (source, to) in casts.items()),
             node("Identity", ["shape_s"], ["shape_s_out"]),
             node("And", ["lt_bb", "cond_in"], ["cond_out"])]
    types = {"lt_f": np.float32, "v_b": np.bool_, "shape_i": np.int64,
             "shape_s_out": np.int32}
    body = helper.make_graph(
        nodes, "body", [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []),
                        tensor("v_in", np.float32, [3])],
        [tensor("cond_out", np.bool_, []), tensor("v_out", np.float32, [3]),
         *(tensor(name, dtype, None) for name, dtype in types.items())],
        initializer=[helper.make_tensor("half", 1, [], [0.5]),
                     helper.make_tensor("limit", 1, [], [1.0])])
    outer = ["v_last", *(f"{name}s" for name in types)]
    graph = helper.make_graph(
        [helper.make_node("Loop", ["T", "", "v0"], outer, body=body)], "casts",
        [tensor("T", np.int64, []), tensor("v0", np.float32, [3])],
        [helper.make_empty_tensor_value_info(name) for name in outer])
    plan = _agree_three_ways(model(graph, 17), {"T": np.array(9, np.int64),
                                                 "v0": rng.random(3).astype(np.float32) + 4})
    identities = [(f.makes[0], f.already) for f in plan.fused if f.kind == "Identity"
                  and [(r.op, r.output) for r in f.replaces] == [("Cast", f.makes[0])]]
    assert sorted(identities) == [("lt_b", "bool"), ("lt_bb", "bool"), ("shape_i", "int64")], plan


def test_a_cast_without_a_type_is_refused_however_it_is_placed():
    """(np.dtype(None) is float64: a Cast without ``to`` must not pass for a Cast to it.)"""
    body = GraphBuilder("b")
    wide = body.node("Cast", body.input("x_t", np.float64), to=np.dtype(np.float64))
    body.output(body.node("Cast", wide, outputs=["y"]))
    g = GraphBuilder("g")
    g.loop(body.build(), inputs=[(g.input("x", np.float64), SlicedInput(0, "x_t"))],
           outputs=[ConcatOutput("y")], output_names=["ys"])
    g.output("ys")
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ModelError, match="bad attributes for Cast"):
            cyloop.Model(g.build(), driver=driver)


def test_a_step_joined_by_a_cast_converts_where_its_operands_are_of_another_type(rng):
    """ProductPlusTanh with a ``to``: the Cast's plain conversion of the result, with or without
    a destination, on one core or two; steps in one call only where nothing converts."""
    from cyloop.accel.gemm import set_products_on_two_cores

    h, r, x = (rng.standard_normal(shape) for shape in ((64, 128), (128, 128), (64, 128)))
    step = lookup(LOOP_DOMAIN, "ProductPlusTanh", 1).build({"to": np.dtype(np.float32)})
    want = np.tanh(h @ r + x).astype(np.float32)
    same = [a.astype(np.float32) for a in (h, r, x)]
    for two_cores in (False, True):
        previous = set_products_on_two_cores(two_cores)
        try:
            got = step(h, r, x)
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            out = np.empty(want.shape, np.float32)
            assert step(h, r, x, out=out) is out
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
            assert abilities_of(step).steps_for(h, r, x) is None
            np.testing.assert_allclose(step(*same), want, rtol=1e-4, atol=1e-5)
            assert (abilities_of(step).steps_for(*same) is not None) == two_cores
        finally:
            set_products_on_two_cores(previous)


def test_a_gemm_leaves_c_out_where_beta_is_0(rng):
    """As ONNX's reference implementation and onnxruntime: an infinite C makes no NaN."""
    from onnx.reference import ReferenceEvaluator


    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3, 2)).astype(np.float32)
    c = np.array([np.inf, np.nan], np.float32)
    got = lookup("", "Gemm", 13).build({"beta": 0.0})(a, b, c)
    graph = helper.make_graph([helper.make_node("Gemm", ["a", "b", "c"], ["y"], beta=0.0)], "g",
                              [tensor(n, np.float32, list(v.shape))
                               for n, v in (("a", a), ("b", b), ("c", c))],
                              [tensor("y", np.float32, None)])
    (want,) = ReferenceEvaluator(model(graph, 13)).run(None, {"a": a, "b": b, "c": c})
    assert np.isfinite(want).all()
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_product_read_elsewhere_keeps_the_sum_as_written(rng):
    plan = _agree_three_ways(_rnn_loop(("xw", "hr", "B"), leak="hr"), _rnn_feeds(rng),
                             peer_atol=2e-5)
    assert not any(kind.startswith("ProductPlus") for kind in plan.fused_kinds()), plan


def test_a_sum_read_elsewhere_keeps_its_tanh_apart(rng):
    """The sum the Tanh reads is also returned by the body: ProductPlus makes it, and the Tanh
    stays a node of its own."""
    plan = _agree_three_ways(_rnn_loop(("xw", "hr", "B"), leak="s1"), _rnn_feeds(rng),
                             peer_atol=2e-5)
    assert fused_making(plan, "ProductPlus", "s1") and not fused_making(plan, "ProductPlusTanh")


@pytest.mark.parametrize("dtype, h_shape, x_rows", [
    (np.float64, (3, 6), 3),
    (np.int32, (3, 6), 3),  # numpy's product, then the add
    (np.float32, (1, 6), 3),  # a state of one row: the sum widens the product
    (np.float32, (2, 3, 6), 3),  # a stack of states: numpy's product, the add in place
])
def test_product_plus_of_other_types_and_shapes_computes_the_same(dtype, h_shape, x_rows, rng):
    onnx_model = _rnn_loop(("xw", "hr", "B"), dtype=dtype)
    feeds = _rnn_feeds(rng, dtype=dtype, h_shape=h_shape, x_rows=x_rows)
    fast = cyloop.load(onnx_model, driver="cython")
    got, want = fast.run(feeds), cyloop.load(onnx_model, driver="python").run(feeds)
    assert fused_making(loop_plan(fast), "ProductPlusTanh")
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6, err_msg=name)


def test_the_rnn_ir_openvino_converts_is_fused(tmp_path, rng):
    """The IR openvino.convert_model writes for the ONNX spelling: fused, agreeing with the
    reference driver."""
    feeds = _rnn_feeds(rng)
    loop = _through_openvino_ir(tmp_path, _rnn_loop(("xw", "hr", "B"), feeds=feeds), feeds)
    first = loop.fused_step("ProductPlusTanh").replaces[0]
    assert first.op == "MatMul" and re.fullmatch(r"\d+:hr", first.name), loop


@pytest.mark.parametrize("r_rows", [False, True])
def test_the_product_plus_kernel_against_numpy(r_rows, rng):
    """``h @ R + x`` (R^T with r_rows, a read-only R laid out once), for every layout of x the
    fusion hands it: a row, a broadcast bias, a wider sum."""
    run = fused.product_plus({"r_rows": r_rows})
    h = rng.standard_normal((4, 6)).astype(np.float32)
    r = rng.standard_normal((6, 6)).astype(np.float32)
    r.flags.writeable = False
    for x in (rng.standard_normal((4, 6)).astype(np.float32),
              rng.standard_normal(6).astype(np.float32),
              rng.standard_normal((2, 4, 6)).astype(np.float32)):
        want = h @ (r.T if r_rows else r) + x
        for _ in range(2):
            np.testing.assert_allclose(run(h, r, x), want, rtol=1e-5, atol=1e-5)


def _passing_loop(through):
    """An ONNX Loop h <- tanh(x_t @ W + h) over the rows of X, where X and W are carried values
    the body returns unchanged (`through`: "identity", through Identity nodes, as jax2onnx
    writes a scan's weights and xs; "itself", the body input returned as it is)."""
    f = np.float32
    nodes = [helper.make_node("Gather", ["xs_in", "i"], ["x_t"], axis=0),
             helper.make_node("MatMul", ["x_t", "w_in"], ["xw"]),
             helper.make_node("Add", ["xw", "h_in"], ["pre"]),
             helper.make_node("Tanh", ["pre"], ["h_out"]),
             helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    if through == "identity":
        nodes += [helper.make_node("Identity", ["w_in"], ["w_mid"]),
                  helper.make_node("Identity", ["w_mid"], ["w_out"]),
                  helper.make_node("Identity", ["xs_in"], ["xs_out"])]
        w_out, xs_out = "w_out", "xs_out"
    else:
        w_out, xs_out = "w_in", "xs_in"
    body = helper.make_graph(
        nodes, "body",
        [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []), tensor("w_in", f, None),
         tensor("xs_in", f, None), tensor("h_in", f, None)],
        [tensor("cond_out", np.bool_, []), tensor(w_out, f, None), tensor(xs_out, f, None),
         tensor("h_out", f, None)])
    loop = helper.make_node("Loop", ["M", "", "W", "X", "h0"], ["w_last", "xs_last", "h_last"],
                            body=body)
    graph = helper.make_graph(
        [loop], "passing",
        [tensor("M", np.int64, []), tensor("W", f, [4, 4]), tensor("X", f, [6, 3, 4]),
         tensor("h0", f, [3, 4])],
        [tensor(name, f, None) for name in ("w_last", "xs_last", "h_last")])
    return model(graph, 13)


@pytest.mark.parametrize("trips", [6, 0])
@pytest.mark.parametrize("through", ["identity", "itself"])
def test_a_carried_value_the_body_returns_unchanged_is_read_as_invariant(through, trips, rng):
    """Under the Cython driver, as an invariant input (`fuse.passed_through`): its products and
    the rows read from it hoisted; its last value the initial one, after zero iterations too.
    The reference driver (the body as written) and onnxruntime agree."""
    feeds = {"M": np.array(trips, np.int64),
             "W": (rng.standard_normal((4, 4)) * 0.5).astype(np.float32),
             "X": rng.standard_normal((6, 3, 4)).astype(np.float32),
             "h0": rng.standard_normal((3, 4)).astype(np.float32)}
    fast, _, got, want, peer = run_three_ways(_passing_loop(through), feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(got[name], peer[name], rtol=1e-5, atol=1e-5, err_msg=name)
    np.testing.assert_array_equal(got["w_last"], feeds["W"])
    loop = loop_plan(fast)
    for param in ("w_in", "xs_in"):  # (carried, the body returns them unchanged)
        port = loop.port(param)
        assert port.role == "invariant" and port.source is not None, loop
    assert [(r.op, r.output) for r in loop.hoisted_nodes()[:2]] == [("Gather", "x_t"),
                                                                   ("MatMul", "xw")], loop


def _passed_through(loop) -> list[str]:
    """The invariant inputs the body returns unchanged (carried values in the model)."""
    return [p.name for p in loop.inputs if p.role == "invariant" and p.source is not None]


def _once(loop, op) -> bool:
    """Whether a node of `op` runs once a run, hoisted (its inputs do not change)."""
    return any(w.how == "once" and w.op == op for w in loop.hoisted)


def _joined(loop, op) -> bool:
    """Whether a product of `op` is hoisted with the Add of its bias joined to it."""
    return any(w.how == "bias joined" and [r.op for r in w.nodes] == [op, "Add"]
               for w in loop.hoisted)


def _draws(rng, *shapes):
    """float32 normal draws of these shapes; a (shape, scale) pair scales its draw."""
    return [(rng.standard_normal(shape) * scale).astype(np.float32) for shape, scale in
            (item if isinstance(item[0], tuple) else (item, 1.0) for item in shapes)]


def _exported(fn, inputs, name):
    """(the ONNX model jax2onnx exports for `fn` on arrays like `inputs`, feeds of them)."""
    jax = pytest.importorskip("jax")
    jax2onnx = pytest.importorskip("jax2onnx")
    onnx_model = jax2onnx.to_onnx(fn, [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in inputs],
                                  model_name=name)
    return onnx_model, {spec.name: value for spec, value in zip(onnx_model.graph.input, inputs)}


def _rnn_scan(jax, jnp, biased=True):
    """A plain RNN step as JAX code writes it, and arrays like its inputs (`_draws`)."""
    def rnn(xs, h0, w, u, b):
        def step(h, x):
            h = jnp.tanh(x @ w + h @ u + b) if biased else jnp.tanh(x @ w + h @ u)
            return h, h
        return jax.lax.scan(step, h0, xs)
    return rnn, ((12, 3, 4), (3, 5), ((4, 5), 0.5), ((5, 5), 0.5), (5,))


@pytest.mark.parametrize("biased", [False, True])
def test_a_scan_jax2onnx_exports_has_its_weights_hoisted(biased, rng):
    """jax2onnx passes a lax.scan's weights and xs through the Loop as carried state: read as
    invariants, x_t @ W is hoisted, and h @ u (a Gemm whose C beta 0 leaves out) joins the sum,
    the tanh and the Casts after it in one ProductPlusTanh. The bias's broadcast (Concat,
    Reshape, Expand of static values) runs once a run, and the steps run many in one call."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    rnn, shapes = _rnn_scan(jax, jnp, biased)
    onnx_model, feeds = _exported(rnn, _draws(rng, *shapes), "rnn")
    plan = _agree_three_ways(onnx_model, feeds, peer_atol=2e-5)
    assert len(_passed_through(plan)) >= 3  # (xs, w, u)
    assert plan.hoisted
    fused = plan.fused_step("ProductPlusTanh")
    assert fused.replaces[0].op == "Gemm" and fused.replaces[0].name \
        and "Cast" in fused.ops, plan
    assert _once(plan, "Expand") == biased
    assert plan.steps is not None and plan.steps.kind == "ProductPlusTanh", plan


def _lstm_scan(jax, jnp, emits="h"):
    """An LSTM step as JAX code writes it (gates i, f, g, o), emitting h or (h, c), and arrays
    like its inputs (`_draws`)."""
    def lstm(xs, h0, c0, w, r, b):
        def step(carry, x):
            h, c = carry
            i, f, g, o = jnp.split(x @ w + h @ r + b, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), (h if emits == "h" else (h, c))
        return jax.lax.scan(step, (h0, c0), xs)
    return lstm, ((9, 3, 4), (3, 5), (3, 5), ((4, 20), 0.5), ((5, 20), 0.5), (20,))


@pytest.mark.parametrize("emits", ["h", "h and c"])
def test_an_lstm_scan_jax2onnx_exports_is_one_step(emits, rng):
    """jax2onnx's LSTM step: its Split gives the gates' sizes, the bias is broadcast in the body
    and h', c' are each cast to the carry's type. It becomes one LSTMStep (the Casts joined),
    whose steps run many in one call where it emits h alone, and agrees with the reference
    driver and onnxruntime. (Each emitted copy is a Cast of a Cast: an Identity of its own.)"""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    lstm, shapes = _lstm_scan(jax, jnp, emits)
    onnx_model, feeds = _exported(lstm, _draws(rng, *shapes), "lstm")
    plan = _agree_three_ways(onnx_model, feeds, peer_atol=2e-5)
    ops = plan.fused_step("LSTMStep").ops
    assert "Split" in ops and ops.count("Cast") == 2, plan
    # x W (a Gemm whose C beta 0 leaves out) and the bias broadcast to the batch's rows are one
    # hoisted GEMM.
    assert _joined(plan, "Gemm"), plan
    assert (plan.steps is not None and plan.steps.kind == "LSTMStep") == (emits == "h"), plan


def _gru_scan(jax, jnp):
    """A GRU step as JAX code writes it (the reset gate after the recurrent product)."""
    def gru(xs, h0, wx, wh, bx, bh):
        def step(h, x):
            xr, xz, xn = jnp.split(x @ wx + bx, 3, axis=-1)
            hr, hz, hn = jnp.split(h @ wh + bh, 3, axis=-1)
            r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
            n = jnp.tanh(xn + r * hn)
            h = (1 - z) * n + z * h
            return h, h
        return jax.lax.scan(step, h0, xs)
    return gru, ((9, 3, 4), (3, 5), ((4, 15), 0.5), ((5, 15), 0.5), (15,), (15,))


def test_a_gru_scan_jax2onnx_exports_has_its_gates_fused(rng):
    """jax2onnx's GRU step: Splits giving the parts' sizes, the biases broadcast in the body, a
    Cast after the blend. The gates and the recurrent product become one GRUStep (the Cast
    joined) whose steps run many in one call, the broadcasts run once a run, x W + b is
    hoisted; it agrees with the reference driver and onnxruntime."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    gru, shapes = _gru_scan(jax, jnp)
    onnx_model, feeds = _exported(gru, _draws(rng, *shapes), "gru")
    plan = _agree_three_ways(onnx_model, feeds, peer_atol=2e-5)
    ops = plan.fused_step("GRUStep").ops
    assert ops.count("Split") == 2 and "Cast" in ops, plan
    assert _once(plan, "Expand")
    assert _joined(plan, "Gemm"), plan
    assert plan.steps is not None and plan.steps.kind == "GRUStep", plan


def test_an_ir_of_a_jax2onnx_scan_reads_its_passed_through_weights_as_invariants(tmp_path, rng):
    """convert_model keeps jax2onnx's pass-through of the weights, as OpenVINO Identity nodes:
    read as invariants, x_t W is hoisted there too; both drivers agree."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    pytest.importorskip("openvino")

    def rnn(xs, h0, w, u):
        def step(h, x):
            h = jnp.tanh(x @ w + h @ u)
            return h, h
        return jax.lax.scan(step, h0, xs)

    inputs = _draws(rng, (12, 3, 4), (3, 5), ((4, 5), 0.5), ((5, 5), 0.5))
    onnx_model, feeds = _exported(rnn, inputs, "rnn")
    path = converted(onnx_model, feeds, str(tmp_path / "rnn.xml"))
    fast = cyloop.load(path, driver="cython")
    got, want = fast.run(feeds), cyloop.load(path, driver="python").run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
    plan = loop_plan(fast)
    assert len(_passed_through(plan)) >= 3, plan  # (xs, w, u)
    assert "MatMul" in [r.op for r in plan.hoisted_nodes()], plan


_SCANS = {"rnn": (_rnn_scan, "ProductPlusTanh"), "lstm": (_lstm_scan, "LSTMStep"),
          "gru": (_gru_scan, "GRUStep")}


@native.steps
@pytest.mark.parametrize("cell", list(_SCANS))
def test_the_ir_convert_model_writes_for_a_jax2onnx_cell_is_one_step(cell, tmp_path, rng):
    """convert_model writes jax2onnx's bias broadcast after the sum, as Broadcast(s,
    Maximum(ShapeOf(s), c)), and its Splits giving sizes as VariadicSplit: each cell is still
    one fused step, the broadcast's nodes and the Splits in it, whose steps run many in one
    call; it agrees with the reference driver and with onnxruntime on the ONNX model."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    pytest.importorskip("openvino")
    make, step = _SCANS[cell]
    fn, shapes = make(jax, jnp)
    onnx_model, feeds = _exported(fn, _draws(rng, *shapes), cell)
    _, _, _, _, peer = run_three_ways(onnx_model, feeds)
    path = converted(onnx_model, feeds, str(tmp_path / f"{cell}.xml"))
    fast, reference = cyloop.load(path, driver="cython"), cyloop.load(path, driver="python")
    for measured in measured_steps(fast):
        if "blocked gates" in measured.candidates:  # (the LSTM's steps: the blocked form's)
            measured.fix("blocked gates")
    got, want = fast.run(feeds), reference.run(feeds)
    for name, peer_value in zip(want, peer.values()):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(got[name], peer_value, rtol=1e-5, atol=2e-5, err_msg=name)
    plan = loop_plan(fast)
    ops = plan.fused_step(step).ops
    assert "AtLeast" not in plan.fused_kinds() + [w.op for w in plan.hoisted], plan
    broadcasts = {"rnn": 1, "lstm": 1, "gru": 2}[cell]
    assert ops.count("Broadcast") == ops.count("ShapeOf") == broadcasts
    assert ops.count("VariadicSplit") == {"rnn": 0, "lstm": 1, "gru": 2}[cell]
    # The steps ran (no shape widened; the RNN's take two cores, which products this small
    # never do: the kernel's test above runs them).
    assert plan.steps is not None and plan.steps.kind == step, plan
    assert plan.steps.iterations > 0 or cell == "rnn", plan


def test_an_lstm_step_joined_by_casts_converts_where_its_operands_are_of_another_type(rng):
    """LSTMStep with a ``to``: h' and c' converted as the Casts would, in each formulation."""

    attrs = {"axis": 1, "blocks": [1, 0, 2, 3], "r_rows": False}
    plain = lookup(LOOP_DOMAIN, "LSTMStep", 1).build(attrs, 2)
    joined = lookup(LOOP_DOMAIN, "LSTMStep", 1).build(dict(attrs, to=np.float32), 2)
    h, c = rng.standard_normal((2, 3, 5))
    r, x = rng.standard_normal((5, 20)), rng.standard_normal((3, 20))
    for candidate in abilities_of(joined).measured.candidates:
        abilities_of(joined).measured.fix(candidate)
        abilities_of(plain).measured.fix(candidate)
        want = [v.astype(np.float32) for v in plain(h, r, c, x)]
        out = np.empty((3, 5), np.float32)
        got = joined(h, r, c, x, out=out)
        assert got[0] is out and [v.dtype for v in got] == [np.float32] * 2
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        assert abilities_of(joined).steps_for(h, r, c, x) is None


@pytest.mark.parametrize("trips", [3, 0])
def test_two_carried_values_returning_one_body_output_keep_their_own_initial_values(trips, rng):
    """ONNX pairs a Loop's carried values with its outputs by position: a and w both return w
    (a <- w, w <- w); after zero iterations each is its own initial value, after some both are
    w. Both drivers and onnxruntime."""
    f = np.float32
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []), tensor("a_in", f, None),
         tensor("w_in", f, None)],
        [tensor("cond_out", np.bool_, []), tensor("w_in", f, None), tensor("w_in", f, None)])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "A", "W"], ["a_last", "w_last"], body=body)], "pair",
        [tensor("M", np.int64, []), tensor("A", f, [2]), tensor("W", f, [2])],
        [tensor(name, f, None) for name in ("a_last", "w_last")])
    feeds = {"M": np.array(trips, np.int64), "A": rng.standard_normal(2).astype(f),
             "W": rng.standard_normal(2).astype(f)}
    _, _, got, want, peer = run_three_ways(model(graph, 13), feeds)
    for name in ("a_last", "w_last"):
        np.testing.assert_array_equal(got[name], peer[name], err_msg=name)
        np.testing.assert_array_equal(want[name], peer[name], err_msg=name)
    np.testing.assert_array_equal(got["a_last"], feeds["A"] if trips == 0 else feeds["W"])


# -- squared distances -------------------------------------------------------------------------

def _distance_scan(dtype, spelling="ReduceSumSquare", axis=1, keepdims=0, swapped=False,
                   leak=False):
    """skl2onnx's pairwise squared distances: a Scan over the rows of T whose state X is passed
    through, each step ``sum((X - t) ** 2, axis)`` (or ``t - X``: `swapped`) over X's last axis,
    spelled as ReduceSumSquare (axes an attribute at opset 13, an input at 18: ``/18``) or as
    ReduceSum of a Mul of the difference by itself; `leak`: the difference is a scan output
    too."""
    opset = 18 if spelling.endswith("/18") or spelling == "ReduceSum" else 13
    sub = helper.make_node("Sub", ["t", "x_in"] if swapped else ["x_in", "t"], ["d"])
    reduce_attrs = {"keepdims": keepdims}
    inputs = ["d"]
    if spelling == "ReduceSum":
        squares = [helper.make_node("Mul", ["d", "d"], ["dd"])]
        inputs = ["dd", "axes"]
    else:
        squares = []
        if opset == 18:
            inputs = ["d", "axes"]
        else:
            reduce_attrs["axes"] = [axis]
    nodes = [helper.make_node("Identity", ["x_in"], ["x_out"]), sub, *squares,
             helper.make_node("ReduceSum" if spelling == "ReduceSum" else "ReduceSumSquare",
                              inputs, ["row"], **reduce_attrs)]
    outputs = [tensor("x_out", dtype, None), tensor("row", dtype, None)]
    if leak:
        outputs.append(tensor("d", dtype, None))
    body = helper.make_graph(
        nodes, "body", [tensor("x_in", dtype, [None, None]), tensor("t", dtype, [None])],
        outputs, initializer=[numpy_helper.from_array(np.array([axis], np.int64), "axes")]
        if "axes" in inputs else [])
    scan = helper.make_node("Scan", ["X", "T"], ["X_last", "D"] + (["Ds"] if leak else []),
                            body=body, num_scan_inputs=1)
    graph = helper.make_graph(
        [scan], "distances", [tensor("X", dtype, [None, None]), tensor("T", dtype, [None, None])],
        [tensor("X_last", dtype, None), tensor("D", dtype, None)]
        + ([tensor("Ds", dtype, None)] if leak else []))
    return model(graph, opset)


def _distance_feeds(rng, dtype, queries, rows, features):
    return {"X": rng.standard_normal((queries, features)).astype(dtype),
            "T": rng.standard_normal((rows, features)).astype(dtype)}


def _check_distances(onnx_model, feeds, fused_expected, ir=None):
    """onnxruntime's results from the reference driver (the body as written) and from the
    Cython driver hoisting the distances (a chunk of rows a step) and not (a row a step), the
    second with the distances fused where `fused_expected`; `ir`: run the IR convert_model
    made of the model there instead (onnxruntime still runs the ONNX model)."""
    import onnxruntime as ort

    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    tolerance = {"rtol": 2e-6, "atol": 1e-6} if feeds["X"].dtype == np.float32 else \
        {"rtol": 1e-13, "atol": 1e-13}
    for settings_ in ({"driver": "python"}, {"driver": "cython", "tune": False},
                      {"driver": "cython", "hoist": False}):
        loaded = cyloop.load(ir or onnx_model.SerializeToString(), **settings_)
        for _ in range(2):  # (the second run in the steady state: buffers reused)
            got = list(loaded.run(feeds).values())
            for k, value in enumerate(want):
                assert got[k].dtype == value.dtype and got[k].shape == value.shape, k
                np.testing.assert_allclose(got[k], value, err_msg=f"{k} {settings_}",
                                           **tolerance)
        loop = loop_plan(loaded)
        fused = fused_making(loop, "SquaredDistance") or any(
            w.fused is not None and w.fused.kind == "SquaredDistance" for w in loop.hoisted)
        assert fused == (fused_expected and settings_["driver"] == "cython"), (settings_, loop)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("spelling, axis, keepdims", [
    ("ReduceSumSquare", 1, 0), ("ReduceSumSquare", -1, 1), ("ReduceSumSquare/18", 1, 0),
    ("ReduceSum", -1, 0), ("ReduceSum", 1, 1)], ids=["rss", "rss-1-keep", "rss18", "mul-sum",
                                                      "mul-sum-keep"])
@pytest.mark.parametrize("swapped", [False, True], ids=["x-t", "t-x"])
@pytest.mark.parametrize("queries, rows, features", [(7, 13, 3), (33, 40, 70), (1, 9, 1),
                                                     (17, 1, 8)])
def test_squared_distances_are_fused_and_agree_with_onnxruntime(dtype, spelling, axis, keepdims,
                                                                swapped, queries, rows,
                                                                features, rng):
    onnx_model = _distance_scan(dtype, spelling, axis, keepdims, swapped)
    feeds = _distance_feeds(rng, dtype, queries, rows, features)
    _check_distances(onnx_model, feeds, fused_expected=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_distances_of_equal_and_far_points(dtype, rng):
    """Repeated points (distance 0 exactly), values far apart (the squares overflow to inf in
    float32 where the difference does not) and a NaN: as onnxruntime computes them."""
    feeds = _distance_feeds(rng, dtype, 11, 12, 5)
    feeds["T"][3] = feeds["X"][4]
    feeds["T"][5, 2] = np.finfo(dtype).max / 2
    feeds["X"][6, 1] = np.nan
    _check_distances(_distance_scan(dtype), feeds, fused_expected=True)


def test_a_difference_read_elsewhere_keeps_the_body_as_written(rng):
    feeds = _distance_feeds(rng, np.float32, 5, 6, 4)
    _check_distances(_distance_scan(np.float32, leak=True), feeds, fused_expected=False)


def test_a_sum_over_another_axis_is_not_fused(rng):
    """Axis 0 of the difference (the queries), not the features: left as written."""
    feeds = _distance_feeds(rng, np.float32, 5, 6, 4)
    _check_distances(_distance_scan(np.float32, axis=0), feeds, fused_expected=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("spelling", ["ReduceSumSquare", "ReduceSum"])
def test_the_ir_openvino_converts_from_the_distances_is_fused(dtype, spelling, tmp_path, rng):
    """convert_model writes Subtract, Multiply and ReduceSum, the row squeezed out of its part
    of the sliced input."""
    import onnx
    import openvino as ov

    onnx_model = _distance_scan(dtype, spelling)
    onnx.save(onnx_model, str(tmp_path / "model.onnx"))
    ov.save_model(ov.convert_model(str(tmp_path / "model.onnx")), str(tmp_path / "model.xml"),
                  compress_to_fp16=False)
    feeds = _distance_feeds(rng, dtype, 19, 23, 6)
    _check_distances(onnx_model, feeds, fused_expected=True, ir=tmp_path / "model.xml")
