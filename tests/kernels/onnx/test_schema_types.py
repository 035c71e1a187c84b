"""Every native ONNX kernel whose inputs share one type variable and need no attribute, on every
element type its schema allows: the output's dtype is the one onnx's shape inference derives from
the schema, and the values are onnx.reference's (within a tolerance fit for float16/bfloat16).

Ops for which [2, 3] inputs are not valid (shape inference refuses them: MatMul, Conv, RNNs,
...) are left out at collection; the backend suite covers them with real shapes."""

import warnings

import numpy as np
import onnx
import pytest
from onnx import defs, helper, shape_inference
from onnx.reference import ReferenceEvaluator

import cyloop
from cyloop.frontends.onnx import ELEMENT_TYPES
from cyloop.kernels import registry

_OPTIONAL = defs.OpSchema.FormalParameterOption.Optional
_VARIADIC = defs.OpSchema.FormalParameterOption.Variadic
# Inputs that are not an arbitrary [2, 3] tensor of the type: Range takes scalars,
# InstanceNormalization a [C] scale and bias; the global pools want spatial axes after [N, C];
# DFT a last axis of 1 (a real signal) or 2 (a complex one).
_SHAPES = {"GlobalAveragePool": (2, 3, 4), "GlobalMaxPool": (2, 3, 4), "GlobalLpPool": (2, 3, 4),
           "DFT": (2, 3, 1)}
# The random ops draw numbers of their own without a seed (tests/kernels/onnx/test_generation.py).
_SKIP = {"Range", "InstanceNormalization", "Multinomial", "RandomNormalLike", "RandomUniformLike"}
# Where onnx.reference is wrong, a numpy oracle: its GlobalMaxPool reduces the channel axis too;
# it has no GlobalLpPool (p=2 by default).
_NUMPY = {"GlobalMaxPool": lambda x: [np.max(x, axis=2, keepdims=True)],
          "GlobalLpPool": lambda x: [np.sqrt(np.sum(np.square(x.astype(np.float64)), axis=2,
                                                    keepdims=True))]}
# Cases whose oracle, onnx.reference, is right only from numpy 2.1 on.
_ORACLE_NEEDS_NUMPY_2_1 = {("LayerNormalization", onnx.TensorProto.BFLOAT16)}


def _model(op_type, element_type, n_inputs):
    """A one-node model of the op on [2, 3] inputs (or _SHAPES'), and its outputs' types as shape
    inference derives them; None where shape inference refuses the inputs."""
    schema = defs.get_schema(op_type)
    n_outputs = sum(o.option != _OPTIONAL for o in schema.outputs)
    shape = _SHAPES.get(op_type, (2, 3))
    names = [f"x{k}" for k in range(n_inputs)]
    outputs = [f"y{k}" for k in range(n_outputs)]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, outputs)], "g",
        [helper.make_tensor_value_info(n, element_type, shape) for n in names],
        [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outputs])
    onnx_model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", schema.since_version)])
    try:
        inferred = shape_inference.infer_shapes(onnx_model, strict_mode=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
        return None
    declared = {o.name: o.type.tensor_type.elem_type for o in inferred.graph.output}
    if not all(declared.values()):
        return None
    return onnx_model, shape, names, declared


def _cases():
    for op_type in sorted({k.op_type for k in registry.registered() if k.domain == ""}):
        if op_type in _SKIP or not defs.has(op_type):
            continue
        schema = defs.get_schema(op_type)
        inputs = [i for i in schema.inputs if i.option != _OPTIONAL]
        if not inputs or len({i.type_str for i in inputs}) != 1 \
                or any(a.required for a in schema.attributes.values()):
            continue
        constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
        n_inputs = 2 if inputs[-1].option == _VARIADIC else len(inputs)
        for type_str in constraints.get(inputs[0].type_str, []):
            name = type_str[len("tensor("):-1] if type_str.startswith("tensor(") else None
            number = getattr(onnx.TensorProto, (name or "").upper(), None)
            if number in ELEMENT_TYPES and ELEMENT_TYPES[number].kind not in "OSU" \
                    and _model(op_type, number, n_inputs) is not None:
                yield pytest.param(op_type, number, n_inputs, id=f"{op_type}-{name}")


_CASES = list(_cases())


def test_the_audit_covers_the_kernels():
    assert len(_CASES) > 500
    assert len({case.values[0] for case in _CASES}) > 60


def _data(rng, dtype, shape):
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    if dtype.kind in "iu":
        return rng.integers(1, 5, shape).astype(dtype)
    return (rng.random(shape) * 0.8 + 0.1).astype(np.float32).astype(dtype)


@pytest.mark.parametrize(("op_type", "element_type", "n_inputs"), _CASES)
def test_kernel_output_type_is_the_schemas(op_type, element_type, n_inputs):
    if (op_type, element_type) in _ORACLE_NEEDS_NUMPY_2_1 and np.lib.NumpyVersion(
            np.__version__) < "2.1.0":
        pytest.skip(f"onnx.reference's {op_type} rounds this type otherwise under numpy 2.0's "
                    "type promotion (its bfloat16 results move by 1-2 ulps); checked on numpy "
                    ">= 2.1")
    onnx_model, shape, names, declared = _model(op_type, element_type, n_inputs)

    rng = np.random.default_rng(0)
    feeds = {n: _data(rng, ELEMENT_TYPES[element_type], shape) for n in names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's overflow and invalid-value warnings
        got = cyloop.load(onnx_model).run(feeds)
        expected = _NUMPY[op_type](*feeds.values()) if op_type in _NUMPY else \
            ReferenceEvaluator(onnx_model).run(None, feeds)
    for name, want in zip(declared, expected):
        assert got[name].dtype == ELEMENT_TYPES[declared[name]], name
        assert got[name].shape == want.shape, name
        # (compared as float64, or complex128: the imaginary parts count too)
        wide = np.complex128 if got[name].dtype.kind == "c" else np.float64
        np.testing.assert_allclose(np.asarray(got[name], wide), np.asarray(want, wide),
                                   rtol=1e-2, atol=1e-3, err_msg=name)
