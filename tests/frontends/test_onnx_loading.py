"""Loading ONNX models: sources, feeds, the fallback warning, and every bad-model class failing at
load time with a ModelError that names the node and the reason."""

import errno
import pickle
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

import cyloop
from cyloop.sequence import TensorSequence

from ..support.arrays import held_arrays
from ..support.onnx_models import (
    FALLBACK_OPSET,
    const,
    fallback_node,
    fallback_result,
    loop_model,
    model,
    scan_model,
    tensor,
)


def test_load_from_path_bytes_and_proto(tmp_path, rng):
    onnx_model = loop_model(True, False, None)
    path = tmp_path / "loop.onnx"
    path.write_bytes(onnx_model.SerializeToString())
    feeds = {"M": np.array(3, np.int64), "v0": rng.standard_normal((2, 3)).astype(np.float32)}
    results = [cyloop.load(source).run(feeds) for source in
               (path, str(path), onnx_model.SerializeToString(), onnx_model)]
    for other in results[1:]:
        for name in results[0]:
            np.testing.assert_array_equal(results[0][name], other[name])
    m = cyloop.load(path)
    assert m.input_names == ["M", "v0"] and m.output_names == ["v_final", "ys"]


@pytest.mark.parametrize("blob", [b"\x08\x07\x12garbage\xff\xff", None], ids=["corrupt",
                                                                              "truncated"])
def test_corrupt_or_truncated_protobuf(blob, tmp_path):
    if blob is None:
        blob = loop_model(True, False, None).SerializeToString()[:-25]
    path = tmp_path / "bad.onnx"
    path.write_bytes(blob)
    with pytest.raises(cyloop.ModelError, match="corrupt or truncated protobuf"):
        cyloop.load(path)


def test_read_graph_is_the_frontend_loading_uses(rng):
    """`frontends.onnx.read_graph` gives the Graph `cyloop.load` compiles: a Model built from it
    runs the same."""
    from cyloop.frontends import onnx as onnx_frontend

    onnx_model = loop_model(True, False, None)
    graph = onnx_frontend.read_graph(onnx_model.SerializeToString())
    assert isinstance(graph, cyloop.Graph)
    feeds = {"M": np.array(3, np.int64), "v0": rng.standard_normal((2, 3)).astype(np.float32)}
    expected = cyloop.load(onnx_model).run(feeds)
    got = cyloop.Model(graph).run(feeds)
    assert list(got) == list(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


@pytest.mark.parametrize("op,key,number", [("Cast", "to", TensorProto.UNDEFINED),
                                           ("SequenceEmpty", "dtype", 12345)])
def test_an_element_type_without_numpy_equivalent_names_the_node(op, key, number):
    inputs = ["x"] if op == "Cast" else []
    node = helper.make_node(op, inputs, ["y"], name="typed", **{key: number})
    graph = helper.make_graph([node], "g", [tensor("x", np.float32, [2])][:len(inputs)],
                              [helper.make_empty_tensor_value_info("y")])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(cyloop.UnsupportedOpError, match=f"typed.*{key}={number}.*no numpy"):
        cyloop.load(onnx_model)


def _tensor_with(change):
    t = helper.make_tensor("W", TensorProto.FLOAT, [2], [1.0, 2.0])
    change(t)
    return t


def _raw(t):
    t.ClearField("float_data")
    t.raw_data = np.zeros(6, np.float32).tobytes()
    t.dims[:] = [3, 4]


@pytest.mark.parametrize("change, declared, held", [
    (_raw, "FLOAT of shape [3, 4]", "24 bytes of raw_data"),
    (lambda t: t.dims.__setitem__(slice(None), [3, 4]), "FLOAT of shape [3, 4]",
     "2 float_data entries"),
    (lambda t: setattr(t, "data_type", 99), "unknown element type 99 of shape [2]",
     "2 float_data entries"),
    (lambda t: setattr(t, "data_type", 0), "UNDEFINED of shape [2]", "2 float_data entries"),
    (lambda t: setattr(t, "data_type", TensorProto.INT64), "INT64 of shape [2]",
     "2 float_data entries"),
], ids=["raw-size", "entries-count", "unknown-type", "undefined-type", "wrong-field"])
@pytest.mark.parametrize("where", ["initializer", "attribute"])
def test_a_tensor_whose_data_does_not_match_its_type_is_a_model_error(change, declared, held,
                                                                      where):
    t = _tensor_with(change)
    if where == "initializer":
        nodes, initializers = [helper.make_node("Identity", ["W"], ["y"])], [t]
        named = "initializer 'W' of graph 'g'"
    else:
        nodes, initializers = [helper.make_node("Constant", [], ["y"], value=t)], []
        named = "tensor attribute 'value'"
    graph = helper.make_graph(nodes, "g", [], [tensor("y", np.float32, None)], initializers)
    with pytest.raises(cyloop.ModelError) as info:
        cyloop.load(model(graph, 13)).run({})
    message = str(info.value)
    assert message.startswith(f"{named}: declared {declared}, but its data holds {held}"), message


@pytest.mark.parametrize("name", ["nope.onnx", "nope.xml"])
def test_missing_file(tmp_path, name):
    """A missing model file is a ModelError and the FileNotFoundError Python code catches."""
    path = tmp_path / name
    with pytest.raises(cyloop.ModelError, match="no such file"):
        cyloop.load(path)
    with pytest.raises(FileNotFoundError) as caught:
        cyloop.load(str(path))
    assert caught.value.filename == str(path) and caught.value.errno == errno.ENOENT
    assert str(caught.value) == f"{path}: no such file"
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is cyloop.ModelNotFoundError and str(again) == str(caught.value)


def _loop_with_body(body, inputs=("M", "", "v0"), n_outputs=1, m_type=TensorProto.INT64):
    node = helper.make_node("Loop", list(inputs), [f"out{k}" for k in range(n_outputs)],
                            body=body, name="the_loop")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("M", m_type, []),
                      helper.make_tensor_value_info("c", TensorProto.FLOAT, []),
                      tensor("v0", np.float32, [2])],
        [helper.make_tensor_value_info(f"out{k}", TensorProto.FLOAT, None)
         for k in range(n_outputs)])
    return model(graph, 13)


def _body(n_in=3, n_out=2, cond_type=TensorProto.BOOL, extra_nodes=(), v_source="v_in"):
    names_in = ["iter", "cond_in", "v_in", "w_in"][:n_in]
    types_in = [TensorProto.INT64, TensorProto.BOOL, TensorProto.FLOAT, TensorProto.FLOAT]
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"])
             if cond_type == TensorProto.BOOL
             else helper.make_node("Cast", ["cond_in"], ["cond_out"], to=cond_type),
             helper.make_node("Neg", [v_source], ["v_out"]), *extra_nodes]
    outputs = [helper.make_tensor_value_info("cond_out", cond_type, []),
               helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2]),
               helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])][:n_out]
    return helper.make_graph(nodes, "body", [helper.make_tensor_value_info(n, t, [2] if k > 1
                                                                           else [])
                                             for k, (n, t) in enumerate(zip(names_in, types_in))],
                             outputs)


BAD_MODELS = {
    "body-inputs": (lambda: _loop_with_body(_body(n_in=4)), "body has 4 inputs.*needs 3"),
    "body-outputs": (lambda: _loop_with_body(_body(n_out=1)),
                     "body has 1 outputs.*needs at least 2"),
    "node-outputs": (lambda: _loop_with_body(_body(), n_outputs=2), "node has 2 outputs"),
    "cond-not-bool": (lambda: _loop_with_body(_body(cond_type=TensorProto.FLOAT)),
                      "condition output 'cond_out' must be bool"),
    "M-not-int64": (lambda: _loop_with_body(_body(), m_type=TensorProto.INT32),
                    "M \\('M'\\) must be int64"),
    "cond-input-not-bool": (lambda: _loop_with_body(_body(), inputs=("M", "c", "v0")),
                            "cond \\('c'\\) must be bool"),
    "undefined-name": (lambda: _loop_with_body(_body(v_source="ghost")),
                       "input 'ghost' is not defined"),
}


@pytest.mark.parametrize("case", BAD_MODELS, ids=list(BAD_MODELS))
def test_bad_loop_models_fail_at_load_time(case):
    build, error = BAD_MODELS[case]
    with pytest.raises(cyloop.ModelError, match=error) as info:
        cyloop.load(build())
    assert "the_loop" in str(info.value) or "ghost" in str(info.value)


def test_missing_body_attribute():
    node = helper.make_node("Loop", ["M", "", "v0"], ["out"], name="bodiless")
    graph = helper.make_graph([node], "g", [tensor("M", np.int64, []),
                                            tensor("v0", np.float32, [2])],
                              [tensor("out", np.float32, [2])])
    with pytest.raises(cyloop.ModelError, match="bodiless.*missing subgraph attribute 'body'"):
        cyloop.load(model(graph, 13))


def test_num_scan_inputs_inconsistent():
    onnx_model = scan_model((4, 3), 0, 0, 0, 0)
    attr = next(a for a in onnx_model.graph.node[0].attribute if a.name == "num_scan_inputs")
    attr.i = 3
    with pytest.raises(cyloop.ModelError, match="num_scan_inputs is 3"):
        cyloop.load(onnx_model)


def test_scan_length_mismatch_names_the_inputs():
    body = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "body",
        [tensor("a", np.float32, []), tensor("b", np.float32, [])], [tensor("y", np.float32, [])])
    node = helper.make_node("Scan", ["xa", "xb"], ["ys"], body=body, num_scan_inputs=2,
                            name="two_scans")
    graph = helper.make_graph([node], "g", [tensor("xa", np.float32, ["A"]),
                                            tensor("xb", np.float32, ["B"])],
                              [tensor("ys", np.float32, None)])
    m = cyloop.load(model(graph, 16))
    with pytest.raises(cyloop.ModelError, match="two_scans.*disagree.*'a': 3, 'b': 4"):
        m.run({"xa": np.ones(3, np.float32), "xb": np.ones(4, np.float32)})


def test_scan_output_changing_shape_is_named(rng):
    """Loop body emits Range(0, iter+1): its shape changes at iteration 1."""
    body = helper.make_graph(
        [const("zero", np.int64(0)), const("one", np.int64(1)),
         helper.make_node("Add", ["iter", "one"], ["limit"]),
         helper.make_node("Range", ["zero", "limit", "one"], ["y"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("iter", np.int64, []), tensor("cond_in", np.bool_, [])],
        [tensor("cond_out", np.bool_, []), tensor("y", np.int64, None)])
    node = helper.make_node("Loop", ["M", ""], ["ys"], body=body, name="growing")
    graph = helper.make_graph([node], "g", [tensor("M", np.int64, [])],
                              [tensor("ys", np.int64, None)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = cyloop.load(model(graph, 13))
    with pytest.raises(cyloop.ModelError, match=r"growing.*output #0 \(body output 'y'\) changed "
                                                r"shape at iteration 1: \(1,\) before, \(2,\) now"):
        m.run({"M": np.array(3, np.int64)})


def test_fallback_ops_are_listed_once_in_a_warning():
    graph = helper.make_graph(
        [*fallback_node("x", "r1"), *fallback_node("x", "r2"),
         helper.make_node("Add", ["r1", "r2"], ["y"])], "g",
        [tensor("x", np.float32, [3, 4])], [tensor("y", np.float32, [3, 4])])
    with pytest.warns(UserWarning, match="onnx.reference's kernels.*: "
                                         "ai.onnx.preview.training::Momentum$"):
        m = cyloop.load(model(graph, 13, more_opsets=[FALLBACK_OPSET]))
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(m.run({"x": x})["y"], 2 * fallback_result(x), rtol=1e-6)


def test_unknown_op_names_node_op_domain_and_version():
    node = helper.make_node("Frob", ["x"], ["y"], name="frob", domain="com.example")
    graph = helper.make_graph([node], "g", [tensor("x", np.float32, [2])],
                              [tensor("y", np.float32, [2])])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                         helper.make_opsetid("com.example", 2)])
    with pytest.raises(cyloop.UnsupportedOpError,
                       match="frob.*'Frob' in domain 'com.example' at version 2"):
        cyloop.load(onnx_model)


def _insert_loop(n_outputs_concat=True):
    body = helper.make_graph(
        [helper.make_node("Cast", ["iter"], ["it_f"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["row", "it_f"], ["item"]),
         helper.make_node("SequenceInsert", ["seq_in", "item"], ["seq_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("iter", np.int64, []), tensor("cond_in", np.bool_, []),
         helper.make_tensor_sequence_value_info("seq_in", TensorProto.FLOAT, None)],
        [tensor("cond_out", np.bool_, []),
         helper.make_tensor_sequence_value_info("seq_out", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
             helper.make_node("Loop", ["N", "", "empty"], ["seq"], body=body)]
    outputs = [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)]
    if n_outputs_concat:
        nodes.append(helper.make_node("ConcatFromSequence", ["seq"], ["joined"], axis=0,
                                      new_axis=1))
        outputs.append(tensor("joined", np.float32, None))
    graph = helper.make_graph(nodes, "g", [tensor("N", np.int64, []),
                                           tensor("row", np.float32, [64])], outputs)
    return model(graph, 13)


def test_sequence_insert_in_a_loop_never_copies_the_sequence(rng):
    m = cyloop.load(_insert_loop())
    row = rng.standard_normal(64).astype(np.float32)
    before = TensorSequence.list_copies
    out = m.run({"N": np.array(2000, np.int64), "row": row})
    assert TensorSequence.list_copies == before  # each insert extended the shared list in place
    assert len(out["seq"]) == 2000
    np.testing.assert_array_equal(out["joined"], row + np.arange(2000, dtype=np.float32)[:, None])


NO_ONNX = """
import sys
sys.modules["onnx"] = None  # as if the [onnx] extra were not installed
sys.modules["google.protobuf"] = None
import numpy as np
import cyloop
from cyloop import _examples
graph, feeds = _examples.counter(3)
print(cyloop.Model(graph).run(feeds)["acc"])
loaded = cyloop.load(sys.argv[1])
print(loaded.run({"M": np.array(3, np.int64), "v0": np.ones((2, 3), np.float32)})["ys"].shape)
try:
    cyloop.load(sys.argv[2])
except ImportError as e:
    print(e)
"""


def test_cyloop_loads_native_ops_without_onnx_and_says_which_extra_to_install(tmp_path):
    """A model whose ops all have native kernels loads and runs without the onnx package; one
    with an op only onnx.reference runs says which extra to install."""
    import subprocess
    import sys

    native, fallback = tmp_path / "loop.onnx", tmp_path / "momentum.onnx"
    native.write_bytes(loop_model(True, False, None).SerializeToString())
    graph = helper.make_graph(fallback_node("x", "y"), "g", [tensor("x", np.float32, [3, 4])],
                              [tensor("y", np.float32, [3, 4])])
    fallback.write_bytes(model(graph, 13, more_opsets=[FALLBACK_OPSET]).SerializeToString())
    proc = subprocess.run([sys.executable, "-c", NO_ONNX, str(native), str(fallback)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[:2] == ["3.0", "(3, 2, 3)"]
    assert "'Momentum'" in lines[2] and "pip install 'cyloop[onnx]'" in lines[2]


@pytest.mark.parametrize("feeds,error", [
    ({"M": np.array(2, np.int64)}, r"missing inputs \['v0'\]"),
    ({"M": np.array(2, np.int32), "v0": np.zeros((2, 3), np.float32)},
     "input 'M': expected dtype int64, got int32"),
    ({"M": np.array(2, np.int64), "v0": np.zeros((2, 4), np.float32)},
     "input 'v0': expected size 3 on axis 1"),
    ({"M": np.array(2, np.int64), "v0": np.zeros(3, np.float32)}, "input 'v0': expected rank 2"),
    ({"M": np.array(2, np.int64), "v0": np.zeros((2, 3), np.float32), "x": 1}, "unknown inputs"),
], ids=["missing", "dtype", "fixed-dim", "rank", "unknown"])
def test_bad_feeds_to_an_onnx_model(feeds, error):
    with pytest.raises(cyloop.InputError, match=error):
        cyloop.load(loop_model(True, False, None)).run(feeds)


def test_erasing_from_an_empty_sequence_is_an_error():
    graph = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x"], ["s1"]),
         helper.make_node("SequenceErase", ["s1"], ["s2"]),
         helper.make_node("SequenceErase", ["s2"], ["s3"])], "g",
        [tensor("x", np.float32, [2])],
        [helper.make_tensor_sequence_value_info("s3", TensorProto.FLOAT, None)])
    with pytest.raises(cyloop.ExecutionError, match="SequenceErase.*empty sequence"):
        cyloop.load(model(graph, 13)).run({"x": np.ones(2, np.float32)})


def test_an_input_with_an_initializer_is_optional_and_overridable():
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [tensor("x", np.float32, [2]), tensor("w", np.float32, [2])],
        [tensor("y", np.float32, [2])],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])])
    m = cyloop.load(model(graph, 13))
    assert m.input_names == ["x"]
    x = np.zeros(2, np.float32)
    np.testing.assert_array_equal(m.run({"x": x})["y"], [1, 2])
    np.testing.assert_array_equal(m.run({"x": x, "w": np.full(2, 5, np.float32)})["y"], [5, 5])


def test_python_lists_are_tensors_unless_the_input_is_a_sequence():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [tensor("x", np.float32, [2])], [tensor("y", np.float32, [2])])
    m = cyloop.load(model(graph, 13))
    np.testing.assert_array_equal(m.run({"x": [1.0, -2.0]})["y"], [1, 0])
    with pytest.raises(cyloop.InputError, match="expected rank 1"):
        m.run({"x": [[1.0, 2.0]]})


# Found by the fuzzer (tests/fuzz): each was an exception other than a CyloopError, or a feed
# written to.

def test_an_extra_input_is_a_model_error_not_a_write_into_the_feed(rng):
    onnx_model = scan_model((4, 3), 0, False, 0, False)
    add = next(node for node in onnx_model.graph.node[0].attribute[0].g.node
               if node.output[0] == "y")
    add.input.append("s_in")  # Add(s_out, s_out, s_in): a ufunc's third argument is its out
    feeds = {"s0": rng.standard_normal(3).astype(np.float32),
             "x": rng.standard_normal((4, 3)).astype(np.float32)}
    before = feeds["s0"].copy()
    for driver in ("cython", "python"):
        with pytest.raises(cyloop.ModelError, match=r"Add node producing 'y': Add-14 takes 2 "
                                                    r"inputs, got 3"):
            cyloop.load(onnx_model, driver=driver).run(feeds)
    np.testing.assert_array_equal(feeds["s0"], before)


def _loop_gather_model():
    body = helper.make_graph(
        [helper.make_node("Gather", ["X", "i"], ["x_t"], name="pick", axis=0),
         helper.make_node("Add", ["v_in", "x_t"], ["v_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []),
         tensor("v_in", np.float32, [3])],
        [tensor("cond_out", np.bool_, []), tensor("v_out", np.float32, [3])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "v0"], ["v_last"], body=body)], "g",
        [tensor("M", np.int64, []), tensor("v0", np.float32, [3]),
         tensor("X", np.float32, [4, 3])], [tensor("v_last", np.float32, [3])])
    return model(graph, 13)


@pytest.mark.parametrize("hoist", [True, False])
def test_an_attribute_of_the_wrong_type_names_the_node_and_attribute(hoist):
    onnx_model = _loop_gather_model()
    axis = onnx_model.graph.node[0].attribute[0].g.node[0].attribute[0]
    axis.type = TensorProto.INT64  # 7: INTS, the value kept (the hoisting pass read it)
    with pytest.raises(cyloop.ModelError, match=r"node 'pick' \(Gather\): attribute 'axis' of "
                                                r"Gather-13 must be INT, not INTS"):
        cyloop.load(onnx_model, hoist=hoist)


def test_a_required_attribute_missing_names_the_node():
    node = helper.make_node("Einsum", ["x"], ["y"], name="no_equation")
    graph = helper.make_graph([node], "g", [tensor("x", np.float32, [2])],
                              [tensor("y", np.float32, None)])
    with pytest.raises(cyloop.ModelError, match="no_equation.*Einsum-12 needs attribute "
                                                "'equation'"):
        cyloop.load(model(graph, 13))


def test_a_fallback_kernel_onnx_reference_cannot_build_is_a_model_error(monkeypatch):
    """An op on onnx.reference's kernels (Momentum) whose kernel onnx.reference fails to build:
    a ModelError naming the node and saying why (the reference's failure stood in for, as every
    op onnx.reference cannot build now has a native kernel)."""
    from cyloop.kernels.onnx import fallback

    class Refusing:
        def __init__(self, proto, run_params):
            raise RuntimeError("no coefficients")

    monkeypatch.setattr(fallback, "reference_op_class", lambda *args: Refusing)
    nodes = fallback_node("x", "y")
    nodes[-1].name = "momentum"
    graph = helper.make_graph(nodes, "g", [tensor("x", np.float32, [2, 4])],
                              [helper.make_empty_tensor_value_info("y")])
    onnx_model = model(graph, 13, more_opsets=[FALLBACK_OPSET])
    with warnings.catch_warnings(), pytest.raises(
            cyloop.ModelError, match="Momentum node 'momentum': onnx.reference cannot build "
                                     "its kernel: RuntimeError: no coefficients"):
        warnings.simplefilter("ignore")
        cyloop.load(onnx_model)


@pytest.mark.parametrize("value", [helper.make_tensor("t", TensorProto.INT64, [1], [0]),
                                   helper.make_graph([], "empty", [], [])],
                         ids=["tensor", "graph"])
def test_scan_axes_that_are_not_a_list_of_ints(value):
    onnx_model = scan_model((4, 3), 0, False, 0, False)
    scan = onnx_model.graph.node[0]
    axes = next(a for a in scan.attribute if a.name == "scan_input_axes")
    axes.CopyFrom(helper.make_attribute("scan_input_axes", value))
    with pytest.raises(cyloop.ModelError, match="scan_input_axes must be a list of ints, not "):
        cyloop.load(onnx_model)


def test_num_scan_inputs_that_is_not_an_int():
    onnx_model = scan_model((4, 3), 0, False, 0, False)
    attr = next(a for a in onnx_model.graph.node[0].attribute if a.name == "num_scan_inputs")
    attr.CopyFrom(helper.make_attribute("num_scan_inputs", [1]))
    with pytest.raises(cyloop.ModelError, match=r"num_scan_inputs must be an int, not list \[1\]"):
        cyloop.load(onnx_model)


def test_an_element_type_attribute_that_is_not_an_int():
    node = helper.make_node("SequenceEmpty", [], ["s"], name="empty", dtype=[1])
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_sequence_value_info(
        "s", TensorProto.FLOAT, None)])
    with pytest.raises(cyloop.ModelError, match=r"empty.*'dtype' must be an int .*list \[1\]"):
        cyloop.load(model(graph, 13))


@pytest.mark.parametrize("location", ["/etc/hostname", "../outside.bin", "missing.bin"])
def test_external_data_outside_the_model_or_missing_is_a_model_error(location, tmp_path):
    t = helper.make_tensor("W", TensorProto.FLOAT, [2], [1.0, 2.0])
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", location
    graph = helper.make_graph([helper.make_node("Identity", ["W"], ["y"])], "g", [],
                              [tensor("y", np.float32, None)], [t])
    onnx_model = model(graph, 13)
    with pytest.raises(cyloop.ModelError, match="initializer 'W'"):
        cyloop.load(onnx_model)  # from the proto: read relative to nothing
    path = tmp_path / "m.onnx"
    path.write_bytes(onnx_model.SerializeToString())
    with pytest.raises(cyloop.ModelError, match="cannot read the ONNX model|initializer 'W'"):
        cyloop.load(path)  # from a file: onnx.load reads the external data


def test_a_carried_sequence_needs_no_element_shape_nor_shape_inference(monkeypatch):
    """A loop of no iteration hands a carried sequence on as it came: its declared type need not
    give its elements' shape, and the model loads without shape inference."""
    import onnx

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes",
                        lambda *args, **kwargs: pytest.fail("shape inference ran"))
    loaded = cyloop.load(_insert_loop(n_outputs_concat=False))
    row = np.arange(64, dtype=np.float32)
    for trips in (0, 3):
        got = loaded.run({"N": np.array(trips, np.int64), "row": row})["seq"]
        assert len(got) == trips


def test_weights_are_read_onto_a_64_byte_boundary(rng):
    """So that a product uses a weight as it is, with no aligned copy beside it (accel/aligned.py):
    initializers, Constant nodes, in the outer graph and in a loop body (from SMALL_WEIGHT_BYTES
    up: a smaller one costs little misaligned)."""
    from onnx import numpy_helper

    w = rng.standard_normal((33, 70)).astype(np.float32)
    c = rng.standard_normal((5, 70)).astype(np.float32)  # (1400 bytes: a weight aligned)
    body = helper.make_graph(
        [const("c", c), helper.make_node("MatMul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "c"], ["y"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [tensor("i", np.int64, []), tensor("cond_in", np.bool_, [])],
        [tensor("cond_out", np.bool_, []), tensor("y", np.float32, [5, 70])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", ""], ["ys"], body=body)], "g",
        [tensor("M", np.int64, []), tensor("x", np.float32, [5, 33])],
        [tensor("ys", np.float32, None)], initializer=[numpy_helper.from_array(w, "w")])
    loaded = cyloop.load(model(graph, 13))
    weights = held_arrays(loaded.graph)
    assert sorted(a.shape for a in weights) == [(5, 70), (33, 70)]
    assert all(a.__array_interface__["data"][0] % 64 == 0 for a in weights)
    # Compiling keeps them (the model's own, read-only): no misaligned copy reaches a kernel.
    assert any(c is loaded.graph.initializers["w"] for c in loaded._compiled.constants.values())
    x = rng.standard_normal((5, 33)).astype(np.float32)
    ys = loaded.run({"M": np.array(2, np.int64), "x": x})["ys"]
    np.testing.assert_allclose(ys, np.stack([x @ w + c] * 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("typed", [True, "top", "carried", False],
                         ids=["typed", "model-output-without-shape",
                              "carried-value-without-shape", "scan-output-without-shape"])
def test_shape_inference_runs_only_where_a_declared_type_is_missing(monkeypatch, typed):
    """A model whose graphs declare their outputs' types (what exporters write) loads without
    ONNX shape inference, as does one whose own output leaves its shape out (what it declares is
    what the model says of it), and one whose loop body leaves a carried value's shape out (a
    loop of no iteration hands it on as it came); one whose loop body leaves a scan output's
    shape out is inferred. Its loop's outputs, after zero iterations too, are onnxruntime's."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle (test extra)")
    import onnx

    proto = loop_model(True, False, None)
    if typed == "top":
        proto.graph.output[1].type.tensor_type.ClearField("shape")
    body = proto.graph.node[0].attribute[0].g  # (outputs: cond, the carried v, a scan output)
    if typed == "carried":
        body.output[1].type.tensor_type.ClearField("shape")
    if not typed:
        body.output[2].type.tensor_type.ClearField("shape")
    inferred = []
    infer = onnx.shape_inference.infer_shapes
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes",
                        lambda m, *args, **kwargs: inferred.append(m) or infer(m, *args, **kwargs))
    loaded = cyloop.load(proto.SerializeToString())
    assert len(inferred) == (0 if typed else 1)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for trips in (0, 3):
        feeds = {"M": np.array(trips, np.int64), "v0": np.ones((2, 3), np.float32)}
        got = loaded.run(feeds)
        for name, expected in zip(("v_final", "ys"), session.run(None, feeds)):
            assert got[name].dtype == expected.dtype
            np.testing.assert_array_equal(got[name], expected)


@pytest.mark.parametrize("cleared", [0, 1], ids=["state", "scan-output"])
def test_a_scan_body_needs_inference_for_a_scan_output_only(monkeypatch, rng, cleared):
    """The same for Scan: a state whose shape the body leaves out loads without shape inference,
    a scan output's is inferred; both run as onnxruntime does (which refuses a scan of no
    step)."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle (test extra)")
    import onnx

    proto = scan_model((4, 3), 0, False, 0, False)
    proto.graph.node[0].attribute[0].g.output[cleared].type.tensor_type.ClearField("shape")
    proto.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "steps"
    inferred = []
    infer = onnx.shape_inference.infer_shapes
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes",
                        lambda m, *args, **kwargs: inferred.append(m) or infer(m, *args, **kwargs))
    loaded = cyloop.load(proto.SerializeToString())
    assert len(inferred) == cleared
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for steps in (1, 4):
        feeds = {"s0": rng.standard_normal(3).astype(np.float32),
                 "x": rng.standard_normal((steps, 3)).astype(np.float32)}
        got = loaded.run(feeds)
        for name, expected in zip(("s_final", "ys"), session.run(None, feeds)):
            assert got[name].shape == expected.shape
            np.testing.assert_array_equal(got[name], expected)
