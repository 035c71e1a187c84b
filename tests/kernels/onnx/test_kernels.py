"""The kernel registry and the kernels this issue ships, checked against onnx.reference."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import cyloop
from cyloop import kernels
from cyloop.abilities import abilities_of
from cyloop.frontends.onnx import ELEMENT_TYPES
from cyloop.kernels.registry import kernel


def test_lookup_picks_the_highest_version_not_above_the_opset():
    assert kernels.lookup("", "Squeeze", 11).since == 1
    assert kernels.lookup("", "Squeeze", 13).since == 13
    assert kernels.lookup("", "Squeeze", 21).since == 13


def test_lookup_failure_names_what_exists():
    with pytest.raises(cyloop.UnsupportedOpError, match=r"ai.onnx::NoSuchOp \(opset 17\).*no "
                                                        "kernel"):
        kernels.lookup("", "NoSuchOp", 17)
    with pytest.raises(cyloop.UnsupportedOpError, match="Resize at opset 9.*versions 10, 11"):
        kernels.lookup("", "Resize", 9)


def test_registering_twice_is_refused():
    kernels.lookup("", "Add", 1)  # (imports the module that registers Add-1, run alone too)
    with pytest.raises(RuntimeError, match="registered twice"):
        kernel("Add", since=1)(lambda attrs: np.add)


def test_unknown_op_fails_at_compile_time_naming_the_node():
    g = cyloop.GraphBuilder()
    g.input("x", np.float32, (2,))
    g.output(g.node("Frobnicate", "x", name="frob1"))
    with pytest.raises(cyloop.UnsupportedOpError, match="node 'frob1'.*Frobnicate"):
        cyloop.Model(g.build())


def _rand(rng, shape, dtype):
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(1, 9, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype) + 2  # positive for Sqrt/Log


CASES = [
    # op, attrs, input shapes, dtype, extra constant inputs
    ("Add", {}, [(3, 4), (4,)], np.float32),
    ("Sub", {}, [(3, 4), (3, 1)], np.float64),
    ("Mul", {}, [(2, 3), (2, 3)], np.int32),
    ("Div", {}, [(2, 3), (2, 3)], np.float32),
    ("Div", {}, [(2, 3), (2, 3)], np.int64),
    ("Pow", {}, [(2, 3), (2, 3)], np.float32),
    ("Neg", {}, [(5,)], np.float32),
    ("Abs", {}, [(5,)], np.int64),
    ("Sqrt", {}, [(5,)], np.float32),
    ("Exp", {}, [(5,)], np.float64),
    ("Log", {}, [(5,)], np.float32),
    ("Reciprocal", {}, [(5,)], np.float32),
    ("Floor", {}, [(5,)], np.float32),
    ("Ceil", {}, [(5,)], np.float32),
    ("Tanh", {}, [(3, 2)], np.float32),
    ("Sigmoid", {}, [(3, 2)], np.float32),
    ("Relu", {}, [(3, 2)], np.float32),
    ("Max", {}, [(3, 2), (2,), (3, 1)], np.float32),
    ("Min", {}, [(3, 2), (3, 2)], np.int32),
    ("Sum", {}, [(3, 2), (2,), (3, 2)], np.float64),
    ("Mean", {}, [(3, 2), (3, 2)], np.float32),
    ("Equal", {}, [(4,), (4,)], np.int64),
    ("Less", {}, [(4,), (4,)], np.float32),
    ("LessOrEqual", {}, [(4,), (4,)], np.float32),
    ("Greater", {}, [(4,), (4,)], np.int32),
    ("GreaterOrEqual", {}, [(4,), (4,)], np.float64),
    ("And", {}, [(4,), (4,)], np.bool_),
    ("Or", {}, [(4,), (4,)], np.bool_),
    ("Xor", {}, [(4,), (4,)], np.bool_),
    ("Not", {}, [(4,)], np.bool_),
    ("Identity", {}, [(2, 2)], np.float32),
    ("MatMul", {}, [(2, 3, 4), (4, 5)], np.float32),
    ("Concat", {"axis": 1}, [(2, 3), (2, 1)], np.float32),
    ("Concat", {"axis": -1}, [(2, 3), (2, 2), (2, 1)], np.int64),
    ("Cast", {"to": 7}, [(3,)], np.float32),
    ("Shape", {}, [(3, 4, 5)], np.float32),
    ("Mod", {}, [(6,), (6,)], np.int64),
    ("Mod", {"fmod": 1}, [(6,), (6,)], np.float32),
    ("LeakyRelu", {"alpha": 0.3}, [(3, 4)], np.float32),
    ("Elu", {"alpha": 0.7}, [(3, 4)], np.float32),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, [(3, 4)], np.float32),
    ("Softplus", {}, [(3, 4)], np.float32),
    ("Softmax", {"axis": 1}, [(2, 3, 4)], np.float32),
    ("Softmax", {"axis": -1}, [(2, 3, 4)], np.float64),
    ("LogSoftmax", {"axis": 0}, [(2, 3, 4)], np.float32),
    ("Transpose", {"perm": [2, 0, 1]}, [(2, 3, 4)], np.float32),
    ("Transpose", {}, [(2, 3, 4)], np.int64),
    ("Flatten", {"axis": 2}, [(2, 3, 4, 5)], np.float32),
    ("Flatten", {"axis": -1}, [(2, 3, 4)], np.float32),
    ("Size", {}, [(2, 3, 4)], np.float32),
    ("Gemm", {"alpha": 0.5, "beta": 2.0, "transB": 1}, [(3, 4), (5, 4), (5,)], np.float32),
    ("Gemm", {"transA": 1}, [(4, 3), (4, 5)], np.float64),
]


X3 = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4) % 7 - 3


@pytest.mark.parametrize("op,opset,attrs,inputs", [
    ("Softmax", 11, {"axis": 1}, [np.arange(24.0).reshape(2, 3, 4) / 7]),
    ("LogSoftmax", 11, {}, [np.arange(24.0).reshape(2, 3, 4) / 7]),
    ("Expand", 13, {}, [np.arange(3.0).reshape(3, 1), np.array([2, 1, 4])]),
    ("Tile", 13, {}, [np.arange(6).reshape(2, 3), np.array([2, 3])]),
    ("ConstantOfShape", 13, {"value": numpy_helper.from_array(np.array([7], np.int32))},
     [np.array([2, 3])]),
    ("Range", 13, {}, [np.float32(1), np.float32(3.2), np.float32(0.5)]),
    ("Range", 13, {}, [np.int64(10), np.int64(-3), np.int64(-4)]),
    ("Clip", 11, {}, [np.arange(-5.0, 5.0, dtype=np.float32), np.float32(-2), np.float32(3)]),
    ("Clip", 6, {"min": -1.0, "max": 2.0}, [np.arange(-5.0, 5.0, dtype=np.float32)]),
    ("CastLike", 15, {}, [np.arange(3.7, step=0.6), np.zeros(1, np.int32)]),
    ("ReduceSum", 11, {"axes": [1], "keepdims": 0}, [X3]),
    ("ReduceSum", 13, {}, [X3, np.array([0, -1])]),
    ("ReduceSum", 13, {"noop_with_empty_axes": 1}, [X3, np.array([], np.int64)]),
    ("ReduceSum", 13, {"keepdims": 0}, [X3]),  # no axes: over every axis, a 0-d result
    ("ReduceSum", 13, {}, [np.arange(24, dtype=np.int32).reshape(2, 3, 4)]),
    ("ReduceProd", 18, {"keepdims": 0}, [X3[:, :, 1:] + 4]),
    ("ReduceMean", 18, {"keepdims": 0}, [X3]),
    ("ReduceMean", 13, {"axes": [2]}, [X3]),
    ("ReduceMean", 18, {"keepdims": 0}, [X3, np.array([1])]),
    ("ReduceMax", 13, {}, [X3]),
    ("ReduceMax", 18, {}, [X3, np.array([0, 2])]),
    ("ReduceMin", 13, {"axes": [-1], "keepdims": 0}, [X3]),
    ("ReduceProd", 18, {}, [X3, np.array([1])]),
    ("ArgMax", 13, {"axis": 1}, [X3]),
    ("ArgMax", 13, {"axis": -1, "keepdims": 0, "select_last_index": 1}, [X3]),
    ("ArgMin", 13, {"axis": 0, "select_last_index": 1}, [X3]),
    ("CumSum", 14, {}, [X3, np.array(1)]),
    ("CumSum", 14, {"exclusive": 1, "reverse": 1}, [X3, np.array(-1)]),
    ("TopK", 11, {"axis": 1}, [X3, np.array([2])]),
    ("TopK", 11, {"largest": 0, "axis": -1}, [X3, np.array([3])]),
    ("TopK", 9, {"k": 2, "axis": 0}, [X3]),
    ("Split", 11, {"axis": 1, "split": [1, 2]}, [X3]),
    ("Split", 13, {"axis": 2}, [X3, np.array([3, 1])]),
    ("Split", 13, {"axis": -1}, [X3]),
    ("Slice", 9, {"starts": [0, 1], "ends": [2, 100], "axes": [0, 2]}, [X3]),
    ("Slice", 13, {}, [X3, np.array([-1, 3]), np.array([-2**63, 0]), np.array([1, 2]),
                       np.array([-1, -2])]),
    ("Slice", 13, {}, [X3, np.array([0]), np.array([2**62]), np.array([-1])]),
    ("GatherElements", 13, {"axis": 1}, [X3, np.array([[[0, 2, 1, -1]], [[1, 1, 0, 0]]])]),
    ("GatherND", 13, {}, [X3, np.array([[0, 1], [1, 2]])]),
    ("GatherND", 13, {"batch_dims": 1}, [X3, np.array([[2], [0]])]),
    ("ScatterElements", 13, {"axis": 2}, [X3, np.array([[[0, 3]], [[1, 2]]]),
                                          np.ones((2, 1, 2), np.float32)]),
    ("ScatterElements", 18, {"axis": 0, "reduction": "add"},
     [X3, np.zeros((2, 3, 4), np.int64), np.ones((2, 3, 4), np.float32)]),
    ("ScatterND", 13, {}, [X3, np.array([[1, 0], [0, 2]]), np.ones((2, 4), np.float32)]),
    ("ScatterND", 13, {}, [X3, np.array([[-1, 0], [0, -3]]), np.ones((2, 4), np.float32)]),
    ("ScatterND", 18, {"reduction": "mul"}, [X3, np.array([[1], [1]]),
                                             np.full((2, 3, 4), 2, np.float32)]),
    ("NonZero", 13, {}, [X3]),
    ("OneHot", 11, {"axis": 1}, [np.array([[0, 2], [-1, 1]]), np.array(3),
                                 np.array([0.0, 5.0], np.float32)]),
    ("Pad", 11, {"mode": "constant"}, [X3, np.array([0, 1, 2, 0, 0, 1]), np.float32(9)]),
    ("Pad", 13, {"mode": "reflect"}, [X3, np.array([0, 0, 2, 0, 0, 1])]),
    ("Pad", 13, {"mode": "edge"}, [X3, np.array([1, 0, -1, 0, 2, 0])]),
    ("Pad", 2, {"pads": [0, 1, 0, 0, 1, 0], "value": 2.0}, [X3]),
    ("Einsum", 12, {"equation": "bij,bjk->bik"}, [X3, np.ones((2, 4, 5), np.float32)]),
    ("Einsum", 12, {"equation": "ij -> ji"}, [X3[0]]),
    # Review regressions: clamping, overflow-free ordering, integer powers, 0-d and empty inputs.
    ("Slice", 13, {}, [X3, np.array([-10]), np.array([-2**63]), np.array([2]), np.array([-1])]),
    ("Slice", 13, {}, [X3, np.array([10]), np.array([-10]), np.array([1]), np.array([-2])]),
    ("TopK", 11, {}, [np.array([-2**63, 0, 5], np.int64), np.array([2])]),
    ("TopK", 11, {}, [np.array([-2**31, 7, 7, 3], np.int32), np.array([3])]),
    ("Pow", 13, {}, [np.array([2, 3, -2, 1, -1], np.int64), np.array([-1, 2, -1, -3, -3])]),
    ("NonZero", 13, {}, [np.float32(3.0)]),
    ("NonZero", 13, {}, [np.array([0, 2, 0, -1], np.float32)]),
    ("NonZero", 13, {}, [np.zeros(3, np.bool_)]),
    ("Reshape", 13, {}, [X3, np.array([0, -1, 2])]),
    ("Squeeze", 13, {}, [X3[:1, :, None], np.array([-2, 0])]),
    ("NonZero", 13, {}, [np.float32(0.0)]),
    ("Softmax", 11, {}, [np.zeros((0, 3), np.float32)]),
    ("Softmax", 13, {"axis": 0}, [np.zeros((0, 3), np.float32)]),
    ("Flatten", 13, {}, [np.zeros((0, 3), np.float32)]),
    ("GatherND", 13, {}, [X3, np.zeros((0, 2), np.int64)]),
    ("CumSum", 14, {"exclusive": 1}, [np.zeros((2, 0), np.float32), np.array(1)]),
    ("ReduceMax", 18, {}, [np.zeros((0, 3), np.float32), np.array([0])]),
    ("ReduceMin", 18, {"keepdims": 0}, [np.zeros((0, 3), np.int32), np.array([0])]),
    ("Dropout", 13, {}, [X3]),
    ("Cast", 13, {"to": 8}, [np.array([1.5, 2.0, 0.1], np.float32)]),
], ids=lambda v: v if isinstance(v, str) else None)
def test_versioned_kernels_match_onnxruntime(op, opset, attrs, inputs):
    """onnxruntime is the oracle here: onnx.reference computes Softmax-1/11 with opset 13's
    per-axis semantics instead of the flatten-to-2-D the older opsets specify."""
    names = [f"in{k}" for k in range(len(inputs))]
    outs = {"TopK": ["out", "out_indices"], "Split": ["a", "b"], "Dropout": ["out", "mask"]}.get(
        op, ["out"])
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph([node], "g", [], [helper.make_empty_tensor_value_info(o)
                                                for o in outs])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {n: np.asarray(v) for n, v in zip(names, inputs)}
    onnx_model.graph.input.extend(helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items())
    onnx_model.ir_version = 8
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    definition = kernels.lookup("", op, opset)
    got = definition.build(_as_the_frontend_passes(op, attrs), len(outs))(*feeds.values())
    got = got if definition.multi else (got,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert g.dtype == e.dtype and g.shape == e.shape
        if e.dtype == object:
            assert g.tolist() == e.tolist()
        else:
            np.testing.assert_allclose(g, e, rtol=1e-6)


@pytest.mark.parametrize("op", ["ScatterND", "ScatterElements", "GatherElements"])
@pytest.mark.parametrize("index", [-3, 2], ids=["one past the start", "one past the end"])
def test_an_index_out_of_range_fails_as_in_onnxruntime(op, index):
    """Index `index` on an axis of 2 (axis 0 of X3): onnxruntime refuses it, and so does cyloop
    (a -3 made positive first would count back a second time, to row 1)."""
    if op == "ScatterND":
        feeds = {"data": X3, "indices": np.array([[index, 0]]),
                 "updates": np.ones((1, 4), np.float32)}
    else:
        indices = np.zeros((1, 3, 4), np.int64)
        indices[0, 1, 2] = index
        feeds = {"data": X3, "indices": indices}
        if op == "ScatterElements":
            feeds["updates"] = np.ones((1, 3, 4), np.float32)
    node = helper.make_node(op, list(feeds), ["out"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items()],
        [helper.make_empty_tensor_value_info("out")])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx_model.ir_version = 8
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=r"(?i)ind(ex|ice)[^\n]*(-3|2)|out of (range|bounds)"):
        session.run(None, feeds)
    with pytest.raises(cyloop.ExecutionError, match=f"{op} .*IndexError: index {index} is out "
                                                    "of bounds for axis 0 with size 2"):
        cyloop.load(onnx_model.SerializeToString()).run(feeds)


_CONSTANT_AXES = {"every": [0, 1, 2], "every, permuted": [2, 0, 1], "every, negative": [-1, 0, 1],
                  "one": [1], "two, one negative": [0, -1], "none": [],
                  "out of range": [3], "out of range, negative": [-4],
                  "one out of range, negative": [0, -4], "twice": [1, -2]}


# (axes, how they are given, noop_with_empty_axes): that came with axes as an input, and an
# empty attribute is one left out.
_AXES_CASES = [(axes, "an initializer", noop) for axes in _CONSTANT_AXES for noop in (0, 1)] \
    + [(axes, "an attribute", 0) for axes in _CONSTANT_AXES if axes != "none"]


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMean", "ReduceSumSquare",
                                "ReduceL2", "ReduceLogSumExp"])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes, axes_as, noop", _AXES_CASES,
                         ids=[f"{axes}, {given}, noop {noop}" for axes, given, noop in _AXES_CASES])
def test_reductions_by_constant_axes_match_onnxruntime(op, keepdims, axes, axes_as, noop):
    """Axes that cannot change (an initializer, or an attribute before opset 18: the kernel
    reads them once and remembers them, every axis taking the short path), read by two
    reductions of inputs of other ranks (nodes with one attributes share a kernel), run twice:
    onnxruntime's results (an axis named twice counts once), or its refusal."""
    axes = np.array(_CONSTANT_AXES[axes], np.int64)
    flat = X3.reshape(-1)[:12].reshape(3, 4).astype(np.int32)  # (a sum in int32 stays int32)
    as_input = axes_as == "an initializer"
    attrs = {"noop_with_empty_axes": noop} if as_input else {"axes": axes.tolist()}
    nodes = [helper.make_node(op, [x, "axes"] if as_input else [x], [out], keepdims=keepdims,
                              **attrs)
             for x, out in (("x3", "out3"), ("x2", "out2"))]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x3", 1, X3.shape),
                     helper.make_tensor_value_info("x2", 6, flat.shape)],
        [helper.make_empty_tensor_value_info(out) for out in ("out3", "out2")],
        [numpy_helper.from_array(axes, "axes")] if as_input else [])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18 if as_input
                                                                             else 11)])
    onnx_model.ir_version = 8
    feeds = {"x3": X3, "x2": flat}
    model = cyloop.load(onnx_model.SerializeToString())
    try:
        expected = ort.InferenceSession(onnx_model.SerializeToString(),
                                        providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception:  # noqa: BLE001 - onnxruntime refuses it: so must cyloop, every run
        for _ in range(2):
            with pytest.raises(cyloop.ExecutionError, match=op):
                model.run(feeds)
        return
    for _ in range(2):
        got = model.run(feeds)
        for g, e in zip(got.values(), expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-6)


@pytest.mark.parametrize("domain, op, attrs, extra", [
    ("", "ScatterND", {}, []), ("", "ScatterND", {"reduction": "add"}, []),
    ("", "ScatterElements", {"axis": 1}, []),
    ("openvino", "ScatterNDUpdate", {}, []),
    ("openvino", "ScatterElementsUpdate", {}, [np.array(1)])])
@pytest.mark.parametrize("into", ["a buffer", "data itself"])
def test_scatters_made_in_out_or_in_their_data_give_their_result(domain, op, attrs, extra, into,
                                                                 rng):
    """A scatter given ``out=`` makes its result there: a buffer of data's shape (data is
    left as it is), or data's own buffer (updated in place, as the engine hands it where data
    dies at the step), the same values as without."""
    data = rng.standard_normal((3, 4)).astype(np.float32)
    if op.startswith("ScatterND"):
        indices, updates = np.array([[2], [0]]), rng.standard_normal((2, 4)).astype(np.float32)
    else:
        indices = np.array([[3, 0], [1, 1], [2, 0]])
        updates = rng.standard_normal((3, 2)).astype(np.float32)
    opset = {"": 18, "openvino": 15 if op == "ScatterNDUpdate" else 12}[domain]
    fn = kernels.lookup(domain, op, opset).build(attrs)
    assert abilities_of(fn).updates_first
    want = fn(data, indices, updates, *extra)
    kept = data.copy()
    out = data if into == "data itself" else np.full_like(data, np.nan)
    got = fn(data, indices, updates, *extra, out=out)
    assert got is out
    np.testing.assert_array_equal(got, want)
    if into == "a buffer":
        np.testing.assert_array_equal(data, kept)


def test_dropout_mask_type_follows_the_opset():
    """Before opset 10 the mask has the input's type (onnxruntime returns zeros there, and
    onnx.reference a bool mask, so neither is an oracle for the values)."""
    x = np.ones(3, np.float32)
    assert kernels.lookup("", "Dropout", 7).build({}, 2)(x)[1].dtype == np.float32
    assert kernels.lookup("", "Dropout", 12).build({}, 2)(x)[1].dtype == np.bool_


def test_reflect_padding_past_the_axis_is_refused():
    with pytest.raises(ValueError, match="reflect padding"):
        kernels.lookup("", "Pad", 13).build({"mode": "reflect"})(np.ones((3, 4)),
                                                            np.array([0, 4, 0, 0]))


def _as_the_frontend_passes(op, attrs):
    """ONNX attributes as the frontend hands them to a kernel: tensors as arrays, element type
    numbers as numpy dtypes."""
    if op == "ConstantOfShape":
        return {"value": numpy_helper.to_array(attrs["value"])}
    if op == "Cast":
        return {"to": ELEMENT_TYPES[attrs["to"]]}
    return attrs


@pytest.mark.parametrize("op,attrs,shapes,dtype", CASES,
                         ids=[f"{c[0]}-{np.dtype(c[3]).name}-{i}" for i, c in enumerate(CASES)])
def test_kernel_matches_onnx_reference(op, attrs, shapes, dtype, rng):
    inputs = [_rand(rng, s, dtype) for s in shapes]
    names = [f"in{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, ["out"], **attrs)
    expected = ReferenceEvaluator(node).run(None, dict(zip(names, inputs)))[0]
    fn = kernels.lookup("", op, 17).build(_as_the_frontend_passes(op, attrs))
    got = np.asarray(fn(*inputs))
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    if kernels.lookup("", op, 17).out:
        dest = np.empty_like(expected)
        assert fn(*inputs, out=dest) is dest
        np.testing.assert_allclose(dest, expected, rtol=1e-6)


SHAPE_CASES = [
    ("Reshape", {}, np.arange(24.0).reshape(2, 3, 4), [np.array([0, -1], np.int64)]),
    ("Reshape", {}, np.arange(24.0).reshape(2, 3, 4), [np.array([4, 0, 2], np.int64)]),
    ("Squeeze", {}, np.ones((1, 3, 1)), [np.array([0], np.int64)]),
    ("Squeeze", {}, np.ones((1, 3, 1)), []),
    ("Unsqueeze", {}, np.ones((3, 4)), [np.array([0, -1], np.int64)]),
    ("Gather", {"axis": 1}, np.arange(12.0).reshape(3, 4), [np.array([[0, -1], [2, 1]])]),
    ("Gather", {"axis": 0}, np.arange(12.0).reshape(3, 4), [np.array(2, np.int64)]),
]


@pytest.mark.parametrize("op,attrs,data,extra", SHAPE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(SHAPE_CASES)])
def test_shape_kernels_match_onnx_reference(op, attrs, data, extra):
    names = ["data"] + [f"in{k}" for k in range(len(extra))]
    node = helper.make_node(op, names, ["out"], **attrs)
    expected = ReferenceEvaluator(node).run(None, dict(zip(names, [data, *extra])))[0]
    got = kernels.lookup("", op, 17).build(attrs)(data, *extra)
    np.testing.assert_array_equal(got, expected)
    assert got.shape == expected.shape


def test_opset_11_squeeze_and_unsqueeze_take_axes_as_attributes():
    assert kernels.lookup("", "Squeeze", 11).build({"axes": [0]})(np.ones((1, 2))).shape == (2,)
    assert kernels.lookup("", "Unsqueeze", 11).build({"axes": [1]})(np.ones(2)).shape == (2, 1)


def test_constant_is_read_only():
    value = kernels.lookup("", "Constant", 17).build({"value": np.arange(3)})()
    assert not value.flags.writeable


def test_a_slice_keeps_its_index_for_constant_operands_only(rng):
    """A Slice whose operands are constants makes its index once and keeps it; starts fed as an
    input are read at every run (the same shape of feed, other values)."""
    x = rng.standard_normal((4, 6)).astype(np.float32)
    constant = helper.make_graph(
        [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(v, np.int64), n)
         for n, v in (("s", [1]), ("e", [5]), ("a", [1]))])
    model = cyloop.load(helper.make_model(constant, opset_imports=[helper.make_opsetid("", 13)]))
    for _ in range(3):
        np.testing.assert_array_equal(model.run({"x": x})["y"], x[:, 1:5])
    fed = helper.make_graph(
        [helper.make_node("Slice", ["x", "s", "e"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([4, 6], np.int64), "e")])
    model = cyloop.load(helper.make_model(fed, opset_imports=[helper.make_opsetid("", 13)]))
    starts = np.zeros(2, np.int64)
    for k in range(3):
        starts[:] = k  # (the caller's array changes between runs)
        np.testing.assert_array_equal(model.run({"x": x, "s": starts})["y"], x[k:, k:])


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_a_slice_reads_carried_starts_anew_though_their_buffer_is_the_same(rng, driver):
    """A loop-carried start that a scatter updates in place reaches Slice as the same array
    object at every iteration, with other values, and each iteration slices where its start
    says. (Two guards hold this: Slice keeps an index for constant operands only, and the
    engine updates no buffer in place that a kernel still holds, so either alone suffices.)"""
    x = rng.standard_normal((4, 6)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Slice", ["x", "s", "end", "axis"], ["part"]),
         helper.make_node("ReduceSum", ["part", "axis"], ["y"]),
         helper.make_node("Add", ["s", "one"], ["s_plus_one"]),
         helper.make_node("ScatterND", ["s", "first", "s_plus_one"], ["s_next"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_next", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1])],
        [numpy_helper.from_array(np.array(v, np.int64), n)
         for n, v in (("one", [1]), ("end", [6]), ("axis", [1]), ("first", [[0]]))])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "s0"], ["s_last", "ys"], body=body)], "g",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("s0", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("s_last", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [None, 4, 1])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    feeds = {"M": np.array(5, np.int64), "s0": np.array([0], np.int64), "x": x}
    expected = ort.InferenceSession(proto.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, feeds)
    model = cyloop.load(proto, driver=driver)
    if driver == "cython":  # (the case this test is for: one buffer, updated in place)
        (loop,) = model.plan().loops
        assert any(alias.how == "in place" for alias in loop.aliasing), model.plan()
    for _ in range(2):
        got = model.run(feeds)
        np.testing.assert_array_equal(got["s_last"], expected[0])
        np.testing.assert_allclose(got["ys"], expected[1], rtol=1e-6)
