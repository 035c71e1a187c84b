"""The kernel registry and the kernels this issue ships, checked against onnx.reference."""

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import cyloop
from cyloop import ops
from cyloop.ops.registry import kernel


def test_lookup_picks_the_highest_version_not_above_the_opset():
    assert ops.lookup("", "Squeeze", 11).since == 1
    assert ops.lookup("", "Squeeze", 13).since == 13
    assert ops.lookup("", "Squeeze", 21).since == 13


def test_lookup_failure_names_what_exists():
    with pytest.raises(cyloop.UnsupportedOpError, match=r"ai.onnx::NoSuchOp \(opset 17\).*no "
                                                        "kernel"):
        ops.lookup("", "NoSuchOp", 17)
    with pytest.raises(cyloop.UnsupportedOpError, match="Reshape at opset 4.*versions 5"):
        ops.lookup("", "Reshape", 4)


def test_registering_twice_is_refused():
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
]


@pytest.mark.parametrize("op,attrs,shapes,dtype", CASES,
                         ids=[f"{c[0]}-{np.dtype(c[3]).name}-{i}" for i, c in enumerate(CASES)])
def test_kernel_matches_onnx_reference(op, attrs, shapes, dtype, rng):
    inputs = [_rand(rng, s, dtype) for s in shapes]
    names = [f"in{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, ["out"], **attrs)
    expected = ReferenceEvaluator(node).run(None, dict(zip(names, inputs)))[0]
    fn = ops.lookup("", op, 17).build(attrs)
    got = np.asarray(fn(*inputs))
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    if ops.lookup("", op, 17).out:
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
    got = ops.lookup("", op, 17).build(attrs)(data, *extra)
    np.testing.assert_array_equal(got, expected)
    assert got.shape == expected.shape


def test_opset_11_squeeze_and_unsqueeze_take_axes_as_attributes():
    assert ops.lookup("", "Squeeze", 11).build({"axes": [0]})(np.ones((1, 2))).shape == (2,)
    assert ops.lookup("", "Unsqueeze", 11).build({"axes": [1]})(np.ones(2)).shape == (2, 1)


def test_constant_is_read_only():
    value = ops.lookup("", "Constant", 17).build({"value": np.arange(3)})()
    assert not value.flags.writeable
