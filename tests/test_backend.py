"""The official ONNX backend test suite, run through `cyloop.backend` (onnx's own runner, cases and
tolerances): every node, simple, pytorch-converted and pytorch-operator case, on the CPU.

Not collected: the "real" models (downloaded from the network on first use) and the light models
(whose expected outputs onnx generates on the spot with its own ReferenceEvaluator, minutes for the
big convolutional ones). CUDA variants are dropped (cyloop runs on the CPU only).

Every case not listed in EXPECTED_FAILURES must pass, and every listed one must fail: an
unexpected success fails the run, so the list cannot go stale."""

import importlib.util
import re
import warnings

import numpy as np
import onnx
import onnx.backend.test
import pytest
from onnx import TensorProto, helper
from onnx.backend.test.loader import load_model_tests

import cyloop
import cyloop.backend

# The suite checks values; that cyloop warns of the ops it runs on onnx.reference's kernels is
# tested where loading is (tests/frontends/test_onnx_loading.py), so it is not repeated here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:cyloop runs these ops with onnx.reference's kernels:UserWarning")

# Case name patterns (regular expressions over the test names) expected to fail, each with why.
EXPECTED_FAILURES = {
    # Random output: the expected values are one draw of onnx's generator; the spec fixes the
    # distribution, not the draw.
    r"^test_bernoulli": "random output (Bernoulli draws)",
    # The Gradient op (ai.onnx.preview.training) differentiates the graph around it: neither
    # onnx.reference nor onnxruntime implements it, and it has no function body.
    r"^test_gradient_of_add": "Gradient needs automatic differentiation of the enclosing graph",
    # onnx's runner cannot compare a sequence holding a 0-d tensor (it calls len() on each
    # element); cyloop's output is checked against the expected one directly below
    # (test_loop16_seq_none_gives_the_expected_sequence).
    r"^test_loop16_seq_none_cpu$": "the runner's comparison fails on a 0-d sequence element",
}
if importlib.util.find_spec("PIL") is None:
    EXPECTED_FAILURES[r"^test_image_decoder"] = "onnx.reference's ImageDecoder needs Pillow"

# (onnx makes its cases' expected values with numpy as the runner collects them, and numpy warns
# of the overflows, divisions by zero and deprecated reshapes in onnx's own code while it does)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    _runner = onnx.backend.test.BackendTest(cyloop.backend, __name__)
for _pattern in EXPECTED_FAILURES:
    _runner.xfail(_pattern)
_CATEGORIES = ("OnnxBackendNodeModelTest", "OnnxBackendSimpleModelTest",
               "OnnxBackendPyTorchConvertedModelTest", "OnnxBackendPyTorchOperatorModelTest")
for _name, _case in _runner.test_cases.items():
    if _name not in _CATEGORIES:
        continue
    for _attr in [a for a in vars(_case) if a.startswith("test_") and not a.endswith("_cpu")]:
        delattr(_case, _attr)  # the CUDA variants
    globals()[_name] = _case
del _name, _case


def test_the_suite_is_all_here():
    """Each category contributes its cases (a changed onnx layout would not go unnoticed)."""
    counts = {name: sum(a.startswith("test_") for a in vars(globals()[name]))
              for name in _CATEGORIES}
    assert counts["OnnxBackendNodeModelTest"] > 1500
    assert all(count > 0 for count in counts.values()), counts


def _node_case(name):
    (case,) = [c for c in load_model_tests(kind="node") if c.name == name]
    return case


def test_loop16_seq_none_gives_the_expected_sequence():
    case = _node_case("test_loop16_seq_none")
    (inputs, (expected,)) = case.data_sets[0]
    (got,) = cyloop.backend.prepare(case.model).run(inputs)
    assert len(got) == len(expected)
    for value, want in zip(got, expected):
        assert value.dtype == want.dtype
        np.testing.assert_allclose(value, want, rtol=1e-6)


# -- the Backend interface itself ------------------------------------------------------------

def test_devices():
    assert cyloop.backend.supports_device("CPU")
    assert not cyloop.backend.supports_device("CUDA")
    assert not cyloop.backend.supports_device("TPU")
    with pytest.raises(RuntimeError, match="CPU only"):
        cyloop.backend.prepare(_add_model(), "CUDA")


def _add_model():
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"])], "add",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("b", TensorProto.FLOAT, [2, 3], np.arange(6, dtype=np.float32))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_run_model_takes_a_list_or_a_dict_and_returns_outputs_by_position_and_name(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = _add_model()
    (by_list,) = cyloop.backend.run_model(model, [a])  # b has an initializer: not needed
    np.testing.assert_array_equal(by_list, a + b)
    outputs = cyloop.backend.run_model(model, {"a": a, "b": 2 * b})
    np.testing.assert_array_equal(outputs.c, a + 2 * b)
    np.testing.assert_array_equal(outputs["c"], outputs[0])
    both = cyloop.backend.run_model(model, [a, 3 * b])  # every graph input, in order
    np.testing.assert_array_equal(both[0], a + 3 * b)
    with pytest.raises(cyloop.InputError, match="3 inputs given; the model takes 2"):
        cyloop.backend.run_model(model, [a, b, b])


def test_prepare_passes_cyloops_options_through(rng):
    rep = cyloop.backend.prepare(_add_model(), driver="python", tune=False, unknown_option=1)
    assert rep.model.settings.driver == "python" and not rep.model.settings.tune


def test_run_node_runs_one_node_at_the_given_opset(rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    (y,) = cyloop.backend.run_node(helper.make_node("Relu", ["x"], ["y"]), [x])
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    # Split at opset 11 takes its sizes as an attribute; at 13 as an input.
    parts = cyloop.backend.run_node(
        helper.make_node("Split", ["x"], ["p", "q"], axis=1, split=[2, 4]), [x],
        opset_version=11)
    np.testing.assert_array_equal(parts.p, x[:, :2])
    np.testing.assert_array_equal(parts.q, x[:, 2:])
    parts = cyloop.backend.run_node(helper.make_node("Split", ["x", "s"], ["p", "q"], axis=1),
                                    [x, np.array([5, 1], np.int64)])
    np.testing.assert_array_equal(parts[1], x[:, 5:])
    # Omitted optional inputs ("") are skipped.
    (clipped,) = cyloop.backend.run_node(helper.make_node("Clip", ["x", "", "hi"], ["y"]),
                                         [x, np.array(0.5, np.float32)])
    np.testing.assert_array_equal(clipped, np.minimum(x, 0.5))


def test_an_op_with_a_function_body_runs_it_natively(rng):
    """HardSwish has no cyloop kernel: its schema's body (HardSigmoid, Mul) runs instead of
    onnx.reference's kernel, and no fallback warning is given."""
    x = rng.standard_normal((3, 5)).astype(np.float32) * 4
    node = helper.make_node("HardSwish", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [3, 5])],
                              [helper.make_tensor_value_info("y", 1, [3, 5])])
    model = cyloop.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]))
    assert [n.op_type for n in model.graph.nodes] == ["HardSigmoid", "Mul"]
    np.testing.assert_allclose(model.run({"x": x})["y"],
                               x * np.clip(x / 6 + 0.5, 0, 1), rtol=1e-6, atol=1e-7)


def test_reference_kernels_outputs_are_trimmed_to_the_nodes(rng):
    """A reference kernel may return more outputs than the node declares (Attention computes its
    optional ones always): the node gets its own."""
    case = _node_case("test_attention_3d")
    (inputs, expected) = case.data_sets[0]
    got = cyloop.backend.prepare(case.model).run(inputs)
    assert len(got) == len(expected) == 1
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-6)


def test_expected_failure_patterns_each_match_a_case():
    names = {c.name for kind in ("node", "simple", "pytorch-converted", "pytorch-operator")
             for c in load_model_tests(kind=kind)}
    for pattern in EXPECTED_FAILURES:
        assert any(re.search(pattern, name + "_cpu") for name in names), pattern
