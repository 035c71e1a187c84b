"""If's condition as its runner reads it (engine/control.py `IfRunner`): a numpy bool, a 0-d
array, or an array of one element, each picking the branch onnxruntime picks; one of several
elements refused, naming the node."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import cyloop

from ..support.onnx_models import model, tensor


def _if_model(cond_shape):
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["negated"])], "then", [],
                               [tensor("negated", np.float32, [3])])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["magnitude"])], "else", [],
                               [tensor("magnitude", np.float32, [3])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g,
                          name="pick")], "g",
        [tensor("c", np.bool_, cond_shape), tensor("x", np.float32, [3])],
        [tensor("out", np.float32, [3])])
    return model(graph, 13)


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("shape", [[], [1], [1, 1]], ids=["0-d", "[1]", "[1,1]"])
def test_each_form_of_one_boolean_picks_onnxruntime_s_branch(shape, flag, rng):
    onnx_model = _if_model(shape)
    feeds = {"c": np.full(shape, flag), "x": rng.standard_normal(3).astype(np.float32)}
    (want,) = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"]).run(None, feeds)
    loaded = cyloop.load(onnx_model)
    np.testing.assert_array_equal(loaded.run(feeds)["out"], want)
    (step,) = loaded._compiled.steps  # the runner itself, on a numpy bool too
    assert isinstance(step.fn(np.bool_(flag), feeds["x"])[0], np.ndarray)
    np.testing.assert_array_equal(step.fn(np.bool_(flag), feeds["x"])[0], want)


def test_a_condition_of_several_elements_is_refused():
    loaded = cyloop.load(_if_model([3]))
    with pytest.raises(cyloop.ExecutionError, match=r"condition must be one boolean, got "
                                                     r"shape \(3,\)"):
        loaded.run({"c": np.ones(3, bool), "x": np.zeros(3, np.float32)})
