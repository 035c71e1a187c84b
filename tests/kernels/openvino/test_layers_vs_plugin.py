"""OpenVINO layers one at a time: a one-op IR saved by the openvino API, run by cyloop and by
OpenVINO's CPU plugin (a second opinion that is right for single ops like these)."""

import numpy as np
import openvino as ov
import openvino.opset8 as ops
import pytest

import cyloop
from cyloop.peers import openvino_compiled

from ...support.openvino_models import save

RNG = np.random.default_rng(7)
A = RNG.standard_normal((2, 3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
POS = (np.abs(A) + 0.5).astype(np.float32)
I = RNG.integers(-6, 7, (2, 3, 4)).astype(np.int32)
J = (RNG.integers(1, 5, (3, 4)) * np.where(RNG.random((3, 4)) > 0.5, 1, -1)).astype(np.int32)


def c(value, dtype=np.int64):
    return ops.constant(np.array(value, dtype))


# name -> (build(params) -> output node, feeds)
CASES = {
    "Add": (lambda p: ops.add(*p), [A, B]),
    "Subtract": (lambda p: ops.subtract(*p), [A, B]),
    "Multiply-int": (lambda p: ops.multiply(*p), [I, J]),
    "Divide": (lambda p: ops.divide(*p), [A, POS[0]]),
    "Divide-int-python": (lambda p: ops.divide(*p), [I, J]),
    "Maximum": (lambda p: ops.maximum(*p), [A, B]),
    "Minimum": (lambda p: ops.minimum(*p), [I, J]),
    "Power": (lambda p: ops.power(*p), [POS, B]),
    "SquaredDifference": (lambda p: ops.squared_difference(*p), [A, B]),
    "FloorMod": (lambda p: ops.floor_mod(*p), [I, J]),
    "Mod": (lambda p: ops.mod(*p), [I, J]),
    "Negative": (lambda p: ops.negative(*p), [A]),
    "Abs": (lambda p: ops.abs(*p), [I]),
    "Exp": (lambda p: ops.exp(*p), [A]),
    "Log": (lambda p: ops.log(*p), [POS]),
    "Sqrt": (lambda p: ops.sqrt(*p), [POS]),
    "Sigmoid": (lambda p: ops.sigmoid(*p), [A]),
    "Tanh": (lambda p: ops.tanh(*p), [A]),
    "Relu": (lambda p: ops.relu(*p), [A]),
    "Clamp": (lambda p: ops.clamp(p[0], -0.5, 0.7), [A]),
    "Elu": (lambda p: ops.elu(p[0], 0.3), [A]),
    "Gelu-erf": (lambda p: ops.gelu(p[0], "erf"), [A]),
    "Gelu-tanh": (lambda p: ops.gelu(p[0], "tanh"), [A]),
    "Swish": (lambda p: ops.swish(p[0]), [A]),
    "HSigmoid": (lambda p: ops.hsigmoid(*p), [A * 4]),
    "HSwish": (lambda p: ops.hswish(*p), [A * 4]),
    "SoftPlus": (lambda p: ops.softplus(*p), [A]),
    "Erf": (lambda p: ops.erf(*p), [A]),
    "Floor": (lambda p: ops.floor(*p), [A * 3]),
    "Ceiling": (lambda p: ops.ceiling(*p), [A * 3]),
    "Sin": (lambda p: ops.sin(*p), [A * 3]),
    "Cos": (lambda p: ops.cos(*p), [A * 3]),
    "Tan": (lambda p: ops.tan(*p), [A]),
    "Asin": (lambda p: ops.asin(*p), [np.tanh(A)]),
    "Acos": (lambda p: ops.acos(*p), [np.tanh(A)]),
    "Atan": (lambda p: ops.atan(*p), [A * 3]),
    "Sinh": (lambda p: ops.sinh(*p), [A]),
    "Cosh": (lambda p: ops.cosh(*p), [A]),
    "Asinh": (lambda p: ops.asinh(*p), [A * 3]),
    "Acosh": (lambda p: ops.acosh(*p), [POS + 1]),
    "Atanh": (lambda p: ops.atanh(*p), [np.tanh(A)]),
    "Equal": (lambda p: ops.equal(*p), [I, J]),
    "NotEqual": (lambda p: ops.not_equal(*p), [I, J]),
    "Less": (lambda p: ops.less(*p), [A, B]),
    "LessEqual": (lambda p: ops.less_equal(*p), [I, J]),
    "Greater": (lambda p: ops.greater(*p), [A, B]),
    "GreaterEqual": (lambda p: ops.greater_equal(*p), [I, J]),
    "LogicalAnd": (lambda p: ops.logical_and(*p), [A > 0, B > 0]),
    "LogicalOr": (lambda p: ops.logical_or(*p), [A > 0, B > 0]),
    "LogicalXor": (lambda p: ops.logical_xor(*p), [A > 0, B > 0]),
    "LogicalNot": (lambda p: ops.logical_not(*p), [A > 0]),
    "Select": (lambda p: ops.select(*p), [A > 0, A, B]),
    "Convert-f2i": (lambda p: ops.convert(p[0], "i32"), [A * 5]),
    "Convert-i2f": (lambda p: ops.convert(p[0], "f32"), [I]),
    "ConvertLike": (lambda p: ops.convert_like(*p), [A * 5, I]),
    "MatMul": (lambda p: ops.matmul(p[0], p[1], False, True), [A, B]),
    "MatMul-tA": (lambda p: ops.matmul(p[0], p[1], True, False),
                  [A, RNG.standard_normal((3, 5)).astype(np.float32)]),
    "Concat": (lambda p: ops.concat(p, 1), [A, A[:, :1]]),
    "Split": (lambda p: ops.split(p[0], c(2), 2).outputs()[1], [A]),
    "VariadicSplit": (lambda p: ops.variadic_split(p[0], c(1), c([1, -1])).outputs()[1], [A]),
    "Reshape-special-zero": (lambda p: ops.reshape(p[0], c([0, -1]), True), [A]),
    "Reshape": (lambda p: ops.reshape(p[0], c([4, 6]), False), [A]),
    "Squeeze": (lambda p: ops.squeeze(p[0], c([0])), [A[:1]]),
    "Unsqueeze": (lambda p: ops.unsqueeze(p[0], c([0, 3])), [B]),
    "Transpose": (lambda p: ops.transpose(p[0], c([2, 0, 1])), [A]),
    "ShapeOf": (lambda p: ops.shape_of(p[0]), [A]),
    "ShapeOf-i32": (lambda p: ops.shape_of(p[0], "i32"), [A]),
    "Gather": (lambda p: ops.gather(p[0], c([2, 0, -1]), c(2)), [A]),
    "Gather-batch-dims": (lambda p: ops.gather(p[0], c([[1, 0], [2, 2]]), c(1), 1), [A]),
    "StridedSlice": (lambda p: ops.strided_slice(p[0], c([0, 1, 3]), c([2, 3, 0]), c([1, 1, -2]),
                                                 [0, 0, 0], [0, 0, 0]), [A]),
    "StridedSlice-masks": (lambda p: ops.strided_slice(p[0], c([1, 0]), c([0, 2]), c([1, 1]),
                                                       [1, 0], [1, 0], [0, 0], [0, 1]), [A]),
    "Slice": (lambda p: ops.slice(p[0], c([3, 0]), c([0, 2]), c([-1, 1]), c([2, 0])), [A]),
    "Broadcast-numpy": (lambda p: ops.broadcast(p[0], c([2, 3, 4])), [B]),
    "Broadcast-bidirectional": (lambda p: ops.broadcast(p[0], c([2, 1, 1]),
                                                        broadcast_spec="BIDIRECTIONAL"), [B]),
    "Tile": (lambda p: ops.tile(p[0], c([2, 1])), [A]),
    "Range": (lambda p: ops.range(c(1.0, np.float32), c(4.0, np.float32), c(0.75, np.float32),
                                  "f32"), []),
    "ReduceSum": (lambda p: ops.reduce_sum(p[0], c([1]), True), [A]),
    "ReduceMean": (lambda p: ops.reduce_mean(p[0], c([0, 2]), False), [A]),
    "ReduceMax": (lambda p: ops.reduce_max(p[0], c([-1]), False), [I]),
    "ReduceMin": (lambda p: ops.reduce_min(p[0], c([1]), True), [A]),
    "ReduceProd": (lambda p: ops.reduce_prod(p[0], c([2]), False), [POS]),
    "ReduceLogicalAnd": (lambda p: ops.reduce_logical_and(p[0], c([1]), True), [A > -0.5]),
    "ReduceLogicalOr": (lambda p: ops.reduce_logical_or(p[0], c([0, 2]), False), [A > 1]),
    "ReduceLogicalAnd-all": (lambda p: ops.reduce_logical_and(p[0], c([0, 1, 2]), False),
                             [A > -3]),
    # Every axis (the short path), in any order and sign:
    "ReduceSum-all": (lambda p: ops.reduce_sum(p[0], c([2, 0, -2]), False), [A]),
    "ReduceSum-all-int": (lambda p: ops.reduce_sum(p[0], c([0, 1, 2]), True), [I]),
    "ReduceMax-all": (lambda p: ops.reduce_max(p[0], c([0, 1, 2]), True), [A]),
    "ReduceMean-all": (lambda p: ops.reduce_mean(p[0], c([-1, -2, -3]), False), [A]),
    "ReduceMean-all-kept": (lambda p: ops.reduce_mean(p[0], c([0, 1, 2]), True), [A]),
    "ReduceMean-int": (lambda p: ops.reduce_mean(p[0], c([1]), False), [I]),
    "ReduceMean-all-int": (lambda p: ops.reduce_mean(p[0], c([0, 1, 2]), True), [I]),
    "ReduceProd-all": (lambda p: ops.reduce_prod(p[0], c([1, 0, 2]), False), [POS]),
    "Softmax": (lambda p: ops.softmax(p[0], -1), [A]),
    "LogSoftmax": (lambda p: ops.log_softmax(p[0], 1), [A]),
    "TopK-max": (lambda p: ops.topk(p[0], c(2), 2, "max", "value").outputs()[0], [A]),
    "TopK-min-indices": (lambda p: ops.topk(p[0], c(3), 1, "min", "index").outputs()[1], [A]),
    "NonZero": (lambda p: ops.non_zero(p[0], "i64"), [I]),
    "ScatterUpdate": (lambda p: ops.scatter_update(p[0], c([2, 0]), p[1], c(1)),
                      [A, RNG.standard_normal((2, 2, 4)).astype(np.float32)]),
}


# Where the plugin departs from the OpenVINO op spec, numpy computes the spec's rule instead.
SPEC_ORACLES = {
    # Divide-1 with m_pythondiv=true (the default) floors integer quotients, as OpenVINO core's
    # reference implementation does; the CPU plugin truncates them.
    "Divide-int-python": lambda i, j: np.floor_divide(i, j),
}


@pytest.mark.parametrize("name", list(CASES))
def test_single_layer_matches_the_cpu_plugin(name, tmp_path):
    build, feeds = CASES[name]
    params = [ops.parameter(list(x.shape), x.dtype, name=f"p{k}") for k, x in enumerate(feeds)]
    output = build(params)
    ov_model = ov.Model([output], params, name)
    path = save(ov_model, tmp_path / "op.xml")
    model = cyloop.load(path)
    got = model.run({f"p{k}": x for k, x in enumerate(feeds)})[model.output_names[0]]
    if name in SPEC_ORACLES:
        expected = SPEC_ORACLES[name](*feeds)
    else:
        expected = next(iter(openvino_compiled(ov_model)(feeds).values()))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected.astype(got.dtype) if got.dtype != expected.dtype
                               and got.dtype.kind != "f" else expected, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("mode,a_shape,b_shape,axis", [
    ("numpy", (2, 3, 4), (3, 4), None), ("pdpd", (2, 3, 4), (3,), 1), ("pdpd", (2, 3, 4), (3, 4),
                                                                        -1)])
def test_auto_broadcast_rules(mode, a_shape, b_shape, axis):
    """numpy re-implementation as the oracle: pdpd aligns the second operand at `axis`."""
    from cyloop import kernels as registry

    a, b = np.ones(a_shape), np.arange(np.prod(b_shape), dtype=float).reshape(b_shape)
    attrs = {"auto_broadcast": mode} | ({"axis": str(axis)} if axis is not None else {})
    got = registry.lookup("openvino", "Add", 1).build(attrs)(a, b)
    start = len(a_shape) - len(b_shape) if axis in (None, -1) else axis
    aligned = b.reshape((1,) * start + b_shape + (1,) * (len(a_shape) - start - len(b_shape)))
    np.testing.assert_array_equal(got, a + aligned)
    with pytest.raises(ValueError, match="equal shapes"):
        registry.lookup("openvino", "Add", 1).build({"auto_broadcast": "none"})(a, b)


def test_reductions_reread_axes_that_can_change():
    """A read-only axes array (a constant) is read once; a writable one every call."""
    from cyloop import kernels as registry

    reduce = registry.lookup("openvino", "ReduceSum", 1).build({"keep_dims": "false"})
    x = np.arange(6.0).reshape(2, 3)
    axes = np.array([0])
    np.testing.assert_array_equal(reduce(x, axes), x.sum(0))
    axes[0] = 1
    np.testing.assert_array_equal(reduce(x, axes), x.sum(1))
    constant = np.array([1, 0])
    constant.flags.writeable = False
    for _ in range(2):
        assert reduce(x, constant) == x.sum()
    np.testing.assert_array_equal(reduce(x.reshape(6), np.array([0])), x.sum())


def _plugin_sum(x, axes):
    """The CPU plugin's ReduceSum of `x` over the constant `axes`, or None where the core
    refuses the model ("Check 'is_axis_valid(axis, r)' failed")."""
    param = ops.parameter(list(x.shape), x.dtype, name="p0")
    try:
        ov_model = ov.Model([ops.reduce_sum(param, ops.constant(np.array(axes, np.int64)))],
                            [param])
    except RuntimeError:
        return None
    return next(iter(openvino_compiled(ov_model)([x]).values()))


@pytest.mark.parametrize("axes", [[1, -1], [0, 0], [0, 1, 1], [-2, 1], [1], [0], [2], [-3],
                                  [1, 2], [0, -3]])
@pytest.mark.parametrize("constant", [True, False], ids=["a constant", "may change"])
def test_reductions_read_axes_as_the_cpu_plugin_does(axes, constant):
    """An axis named twice counts once, and one out of range is refused (the core refuses the
    model), as the plugin reads them, whether the axes are a constant (read once, every axis
    the short path) or may change (read every call); then the same axes for an array of
    another rank (layers with equal attributes share a kernel)."""
    from cyloop import kernels as registry

    reduce = registry.lookup("openvino", "ReduceSum", 1).build({"keep_dims": "false"})
    given = np.array(axes, np.int64)
    given.flags.writeable = not constant
    flat = np.arange(6, dtype=np.float32)
    for x in (flat.reshape(2, 3), flat.reshape(2, 3), flat):
        expected = _plugin_sum(x, axes)
        if expected is None:
            with pytest.raises(np.exceptions.AxisError):
                reduce(x, given)
        else:
            np.testing.assert_array_equal(reduce(x, given), expected)


def test_trigonometric_layers_refuse_integer_input(tmp_path):
    """OpenVINO computes an integer Sin in floating point and converts back; cyloop says it does
    not, by name, rather than return another dtype."""
    param = ops.parameter([3], np.int32, name="p0")
    path = save(ov.Model([ops.sin(param)], [param], "sin"), tmp_path / "sin.xml")
    with pytest.raises(cyloop.CyloopError, match="Sin of int32 input is not supported"):
        cyloop.load(path).run({"p0": np.arange(3, dtype=np.int32)})
