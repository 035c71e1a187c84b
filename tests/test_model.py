"""`Model`: feed validation, output names, compile-time model errors, and kernel failures."""

import re

import numpy as np
import pytest

import cyloop
from cyloop import _examples
from cyloop.ir import CarriedInput, GraphBuilder, LastOutput, SlicedInput


@pytest.fixture
def rnn():
    graph, feeds = _examples.rnn(steps=4)
    return cyloop.Model(graph), feeds


@pytest.mark.parametrize("change,error", [
    (lambda f: f.pop("h0"), r"missing inputs \['h0'\]"),
    (lambda f: f.update(extra=np.zeros(1)), r"unknown inputs \['extra'\]"),
    (lambda f: f.update(h0=f["h0"].astype(np.float64)),
     "input 'h0': expected dtype float32, got float64"),
    (lambda f: f.update(h0=f["h0"][0]),
     r"input 'h0': expected rank 2 \(shape \[4, 32\]\), got rank 1"),
    (lambda f: f.update(h0=np.zeros((4, 31), np.float32)),
     r"input 'h0': expected size 32 on axis 1 .* got 31"),
    (lambda f: f.update({None: np.zeros(1), b"x": np.zeros(1)}),
     r"feeds are keyed by input name \(a str\), not None \(NoneType\)"),
    (lambda f: f.update(h1=f.pop("h0")), r"unknown inputs \['h1'\]"),
    (lambda f: f.update(h0=f["h0"].tolist()), None),  # (a list converts: no error)
    (lambda f: f.update(h0=np.asfortranarray(f["h0"])), None),
], ids=["missing", "unknown", "dtype", "rank", "fixed-dim", "not-a-name", "renamed", "a-list",
        "fortran-order"])
@pytest.mark.parametrize("after_a_run", [False, True], ids=["first-run", "after-a-run"])
def test_bad_feeds_raise_input_error(rnn, change, error, after_a_run):
    """The same checks on a model's first run and after a run accepted feeds (whose names,
    dtypes and shapes later feeds of the same kind need not be checked again)."""
    model, feeds = rnn
    if after_a_run:
        model.run(dict(feeds))
    changed = dict(feeds)
    change(changed)
    if error is None:
        got = model.run(changed)
        want = cyloop.Model(model.graph).run(feeds)
        for name in want:  # (to rounding: each model measures its own choices)
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
        return
    with pytest.raises(cyloop.InputError, match=error):
        model.run(changed)


def test_symbolic_dimensions_accept_any_size_but_must_agree():
    g = GraphBuilder()
    g.input("a", np.float32, ("N", 2))
    g.input("b", np.float32, ("N",))
    g.output(g.node("Identity", "a"))
    model = cyloop.Model(g.build())
    for n in (1, 5, 5):
        model.run({"a": np.zeros((n, 2), np.float32), "b": np.zeros(n, np.float32)})
    with pytest.raises(cyloop.InputError, match="dimension 'N' is 3 on axis 0, but 2 in input "
                                                "'a'"):
        model.run({"a": np.zeros((2, 2), np.float32), "b": np.zeros(3, np.float32)})
    with pytest.raises(cyloop.InputError, match="dimension 'N' is 4 on axis 0, but 5 in input "
                                                "'a'"):  # (after runs of N = 5)
        model.run({"a": np.zeros((5, 2), np.float32), "b": np.zeros(4, np.float32)})


def test_output_names_select_and_order(rnn):
    model, feeds = rnn
    assert model.input_names == ["x", "h0"] and model.output_names == ["h_last", "h_all"]
    out = model.run(feeds, output_names=["h_all"])
    assert list(out) == ["h_all"]
    with pytest.raises(cyloop.InputError, match="unknown output names"):
        model.run(feeds, output_names=["nope"])


def test_identity_graph_output_is_a_copy():
    g = GraphBuilder()
    g.input("x", np.float32, (3,))
    g.output(g.node("Identity", "x", outputs=["y"]))
    x = np.arange(3, dtype=np.float32)
    y = cyloop.Model(g.build()).run({"x": x})["y"]
    np.testing.assert_array_equal(y, x)
    assert not np.may_share_memory(x, y)


def test_undefined_name_is_a_model_error():
    g = GraphBuilder()
    g.input("x", np.float32, (3,))
    g.output(g.node("Add", "x", "ghost", name="adder"))
    with pytest.raises(cyloop.ModelError, match="node 'adder'.*'ghost' is not defined"):
        cyloop.Model(g.build())


@pytest.mark.parametrize("desc,error", [
    (SlicedInput(0, "x_t", stride=0), "stride 0"),
    (SlicedInput(0, "x_t", part_size=0, keep_axis=True), "part_size 0"),
    (SlicedInput(0, "x_t", part_size=2), "part_size must be 1"),
    (SlicedInput(0, "nope"), "names body input 'nope'"),
    (CarriedInput(0, "x_t", "missing"), "names body output 'missing'"),
], ids=["stride-0", "part-0", "drop-axis-part-2", "unknown-param", "unknown-result"])
def test_bad_loop_specs_fail_at_compile_time(desc, error):
    body = GraphBuilder("body")
    body.input("x_t", np.float32, None)
    body.output(body.node("Neg", "x_t", outputs=["y"]))
    g = GraphBuilder()
    g.input("x", np.float32, None)
    g.loop(body.build(), inputs=[("x", desc)], outputs=[LastOutput("y")], name="L")
    g.output(g._nodes[-1].outputs[0])
    with pytest.raises(cyloop.ModelError, match=f"node 'L'.*{error}"):
        cyloop.Model(g.build())


def test_unfed_body_input_is_a_model_error():
    body = GraphBuilder("body")
    body.input("a", np.float32, None)
    body.input("b", np.float32, None)
    body.output(body.node("Add", "a", "b", outputs=["y"]))
    g = GraphBuilder()
    g.input("x", np.float32, None)
    g.loop(body.build(), inputs=[("x", CarriedInput(0, "a", "y"))], outputs=[LastOutput("y")],
           trip_count=2, name="L")
    g.output(g._nodes[-1].outputs[0])
    with pytest.raises(cyloop.ModelError, match=r"body inputs \['b'\] are fed by nothing"):
        cyloop.Model(g.build())


def test_kernel_failure_names_the_node():
    g = GraphBuilder()
    g.input("a", np.float32, (2, 3))
    g.input("b", np.float32, (4, 5))
    g.output(g.node("MatMul", "a", "b", name="mm"))
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ExecutionError, match="node 'mm' \\(MatMul\\) failed"):
            cyloop.Model(g.build(), driver=driver).run(
                {"a": np.ones((2, 3), np.float32), "b": np.ones((4, 5), np.float32)})


def test_outer_scope_values_are_read_by_name_in_nested_loops():
    """The inner body reads `w` from the outermost graph without it being a loop input."""
    inner = GraphBuilder("inner")
    inner.input("c", np.float64, (2,))
    inner.output(inner.node("Add", "c", "w", outputs=["c_next"]))
    outer = GraphBuilder("outer_body")
    outer.input("d", np.float64, (2,))
    outer.loop(inner.build(), inputs=[("d", CarriedInput(0, "c", "c_next"))],
               outputs=[LastOutput("c_next")], trip_count=3, output_names=["d3"])
    outer.output(outer.node("Mul", "d3", outer.const(2.0), outputs=["d_next"]))
    g = GraphBuilder()
    g.input("d0", np.float64, (2,))
    g.input("w", np.float64, (2,))
    g.loop(outer.build(), inputs=[("d0", CarriedInput(0, "d", "d_next"))],
           outputs=[LastOutput("d_next")], trip_count=4, output_names=["out"])
    g.output("out")
    d, w = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    expected = d
    for _ in range(4):
        expected = (expected + 3 * w) * 2
    for driver in ("cython", "python"):
        model = cyloop.Model(g.build(), driver=driver)
        np.testing.assert_allclose(model.run({"d0": d, "w": w})["out"], expected)
        assert len(model.plan().loops[0].nested) == 1


def test_graph_builder_loop_leaves_the_callers_descriptors_alone():
    body = GraphBuilder("body")
    body.input("c", np.float32, ())
    body.output(body.node("Neg", "c", outputs=["c_next"]))
    desc = CarriedInput(99, "c", "c_next")
    g = GraphBuilder()
    g.input("pad", np.float32, ())
    g.input("c0", np.float32, ())
    g.loop(body.build(), inputs=[("c0", desc)], outputs=[LastOutput("c_next")], trip_count=3,
           output_names=["out"])
    assert desc.outer == 99
    assert g._nodes[-1].attrs["spec"].inputs[0].outer == 0


def test_returned_constants_are_the_callers_own():
    g = GraphBuilder()
    g.input("x", np.float32, (3,))
    k = g.const(np.ones(3, np.float32), "K")
    g.output(k, g.node("Add", "x", k, outputs=["y"]))
    model = cyloop.Model(g.build())
    x = np.zeros(3, np.float32)
    first = model.run({"x": x})
    first["K"][:] = 100  # the caller may write to what it got back...
    again = model.run({"x": x})  # ...without changing the model
    np.testing.assert_array_equal(again["K"], np.ones(3))
    np.testing.assert_array_equal(again["y"], np.ones(3))


def _identity_model(dtype, shape=()):
    g = GraphBuilder()
    g.input("a", dtype, shape)
    g.output(g.node("Identity", "a", outputs=["y"]))
    return cyloop.Model(g.build())


@pytest.mark.parametrize("dtype, value", [
    (np.int64, 3), (np.int64, np.int32(3)), (np.int64, np.uint8(200)), (np.uint8, 255),
    (np.float32, 3), (np.float32, 2.5), (np.float32, np.float64(0.1)), (np.float64, [1, 2.5]),
    (np.bool_, True), (np.bool_, np.bool_(False)), (np.complex64, 1.5), (np.int32, [[1], [2]]),
])
def test_scalars_and_lists_convert_by_same_kind_casting(dtype, value):
    """A feed that is not an array converts to the declared type when numpy's same_kind casting
    allows it and the values fit; the result is what numpy's own conversion gives."""
    want = np.asarray(value).astype(dtype)
    got = _identity_model(dtype, want.shape).run({"a": value})["y"]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype, value, error", [
    (np.int64, 2.5, "input 'a': expected int64 values, got float 2.5"),
    (np.int64, True, "input 'a': expected int64 values, got bool True"),
    (np.int64, np.float32(1), "input 'a': expected int64 values, got float32"),
    (np.bool_, None, "input 'a': expected bool values, got NoneType None"),
    (np.bool_, "False", "input 'a': expected bool values, got str 'False'"),
    (np.bool_, 1, "input 'a': expected bool values, got int 1"),
    (np.float32, "hello", "input 'a': expected float32 values, got str 'hello'"),
    (np.float32, None, "input 'a': expected float32 values, got NoneType None"),
    (np.float32, 1j, "input 'a': expected float32 values, got complex 1j"),
    (np.uint8, 300, "input 'a': 300 does not fit in uint8"),
    (np.uint8, -1, "input 'a': -1 does not fit in uint8"),
    (np.int64, [1, 2.5], "input 'a': expected int64 values, got list float64 values"),
    (np.int64, [1, [2]], "input 'a': expected an array or a number, got list"),
    (np.float32, {"x": 1}, "input 'a': expected float32 values, got dict"),
])
def test_feeds_of_another_kind_are_input_errors_naming_the_input(dtype, value, error):
    with pytest.raises(cyloop.InputError, match=re.escape(error)):
        _identity_model(dtype).run({"a": value})



def test_an_elementwise_node_with_an_input_too_many_is_a_model_error():
    """A ufunc kernel would take a third input as its destination and write into it (a feed,
    on the reference driver; found by the fuzzer)."""
    g = GraphBuilder()
    a, b, c = (g.input(name, np.float32, (2,)) for name in "abc")
    g.output(g.node("Add", a, b, c, outputs=["y"]))
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ModelError, match="node producing 'y'.*: Add takes 2 inputs, "
                           "got 3"):
            cyloop.Model(g.build(), driver=driver)


def test_outputs_are_checked_for_overlap_through_any_chain_of_bases():
    """Handed-out arrays are grouped by the object owning their memory (so that a run returning
    10^4 arrays checks them in linear time); views through as_strided or of one buffer still
    count as overlapping."""
    from cyloop.model import _Handed

    x = np.arange(10.0)
    handed = _Handed()
    handed.add(x)
    assert handed.overlaps(np.lib.stride_tricks.sliding_window_view(x, 3))
    assert handed.overlaps(x[::2]) and handed.overlaps(x.reshape(2, 5).T)
    assert not handed.overlaps(np.arange(3.0)) and not handed.overlaps(x[:5].copy())
    raw = bytes(80)
    handed.add(np.frombuffer(raw))
    assert handed.overlaps(np.frombuffer(raw)[2:])


def test_a_node_with_no_outputs_is_a_model_error():
    """(The runner reads each step's first output slot; an IR Result retyped by the fuzzer
    crashed the Cython runner.)"""
    g = GraphBuilder()
    a = g.input("a", np.float32, (2,))
    g.node("ShapeOf", a, outputs=[], domain="org.openvinotoolkit")
    g.output(g.node("Neg", a, outputs=["y"]))
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ModelError, match="ShapeOf node producing '\\?': a node with "
                           "no outputs"):
            cyloop.Model(g.build(), driver=driver)


def _onnx_signature_models(tmp_path):
    """ONNX models with static, symbolic and unnamed dims, a scalar and a sequence output."""
    from onnx import TensorProto, helper, save

    from cyloop.cli import EXAMPLES

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Shape", ["y"], ["s"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", None, 3]),
              helper.make_tensor_value_info("w", TensorProto.FLOAT16, [3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", None, 2]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [3])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
         tmp_path / "m.onnx")
    return [EXAMPLES[1], str(tmp_path / "m.onnx")]


def _ort_value(arg):
    """An onnxruntime NodeArg as (name, dtype, shape, kind)."""
    kind, inner = "tensor", arg.type
    if inner.startswith("seq("):
        kind, inner = "sequence", inner[len("seq("):-1]
    dtype = np.dtype({"tensor(float)": np.float32, "tensor(float16)": np.float16,
                      "tensor(int64)": np.int64}[inner])
    shape = None if arg.shape is None or kind == "sequence" else tuple(
        None if isinstance(d, str) and d.startswith("unk__") else d  # (onnxruntime's names for
        for d in arg.shape)                                         # dims the model leaves bare)
    return arg.name, dtype, shape, kind


def test_a_model_describes_its_inputs_and_outputs_as_onnxruntime_does(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    for path in _onnx_signature_models(tmp_path):
        model = cyloop.load(path)
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        for ours, theirs in ((model.inputs, session.get_inputs()),
                             (model.outputs, session.get_outputs())):
            assert [(v.name, v.dtype, v.shape, v.kind) for v in ours] == \
                [_ort_value(arg) for arg in theirs]
        assert [v.name for v in model.inputs] == model.input_names
        model.inputs[0].shape = (99,)  # (a copy: the model is unchanged)
        assert model.inputs[0].shape != (99,)


def test_an_ir_describes_its_inputs_and_outputs_as_openvino_does():
    ov = pytest.importorskip("openvino")
    from cyloop.cli import EXAMPLES

    model, theirs = cyloop.load(EXAMPLES[0]), ov.Core().read_model(EXAMPLES[0])
    for ours, ports in ((model.inputs, theirs.inputs), (model.outputs, theirs.outputs)):
        assert [(v.dtype, v.shape) for v in ours] == \
            [(np.dtype(port.get_element_type().to_dtype()),
              tuple(port.get_partial_shape().to_shape())) for port in ports]


def test_outputs_are_the_callers_own_run_after_run():
    """A fresh result, the same result under two names, a feed passed through and a 0-d
    result: each output writeable and sharing memory with no feed and no other output, on
    the first run and on runs whose feeds need no checks again."""
    g = GraphBuilder()
    g.input("x", np.float32, (3,))
    y = g.node("Add", "x", "x", outputs=["y"])
    g.output(y, g.node("Identity", y, outputs=["z"]), g.node("Identity", "x", outputs=["w"]),
             g.node("ReduceSum", y, keepdims=0, outputs=["s"]))
    model = cyloop.Model(g.build())
    x = np.arange(3, dtype=np.float32)
    for _ in range(3):
        out = model.run({"x": x})
        _assert_the_callers_own(out, x)
        np.testing.assert_array_equal(out["z"], x + x)
        assert out["s"].shape == () and out["s"] == 6


@pytest.mark.parametrize("outputs", [("t",), ("y", "t"), ("t", "r"), ("r",)])
def test_views_of_results_and_of_feeds_are_the_callers_own(outputs):
    """A view of a fresh result (a Transpose of an Add) is handed over as it is when nothing
    else returned holds that memory, copied when another output does; a view of a feed (a
    Reshape of x) is always copied: each output writeable, sharing memory with no feed and no
    other output, run after run."""
    g = GraphBuilder()
    g.input("x", np.float32, (2, 3))
    y = g.node("Add", "x", "x", outputs=["y"])
    made = {"y": y, "t": g.node("Transpose", y, outputs=["t"]),
            "r": g.node("Reshape", "x", g.const(np.array([3, 2], np.int64)), outputs=["r"])}
    g.output(*(made[name] for name in outputs))
    model = cyloop.Model(g.build())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = {"y": x + x, "t": (x + x).T, "r": x.reshape(3, 2)}
    for _ in range(3):
        out = model.run({"x": x})
        _assert_the_callers_own(out, x)
        for name, value in out.items():
            np.testing.assert_array_equal(value, expected[name])


def _assert_the_callers_own(outputs: dict, feed: np.ndarray) -> None:
    """Each output writeable, sharing memory with no other and not with the feed."""
    arrays = [feed, *outputs.values()]
    for k, a in enumerate(arrays):
        for b in arrays[k + 1:]:
            assert not np.shares_memory(a, b)
    assert all(v.flags.writeable for v in outputs.values())
