"""How the IR reader names values and declares outputs (issue 15): a value goes by the model's
own names (a port's first tensor name, else its layer's name), unique across the net and its
bodies; a net output is typed as its Result's port declares, and that declaration is not a
constraint at run time."""

import re
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset8 as ops
import pytest

import cyloop
from cyloop.frontends.openvino import read_graph
from cyloop.ir import LoopSpec

from ..support.drivers import run_both
from ..support.openvino_models import save, ti_model

DATA = Path(cyloop.__file__).parent / "data" / "lstm_ti.xml"


def _defined(graph, found=None):
    """Every value name each graph (the net, then each body) defines, in one list."""
    found = [] if found is None else found
    found += [v.name for v in graph.inputs] + list(graph.initializers)
    for node in graph.nodes:
        found += [name for name in node.outputs if name]
        for attr in node.attrs.values():
            body = attr.body if isinstance(attr, LoopSpec) else attr
            if isinstance(body, cyloop.ir.Graph):
                _defined(body, found)
    return found


def test_values_go_by_tensor_and_layer_names():
    graph = read_graph(DATA)
    loop = next(node for node in graph.nodes if node.op_type == "Loop")
    spec = loop.attrs["spec"]
    assert [v.name for v in spec.body.inputs] == ["xt", "h", "c"]
    # The cell's ports carry tensor names; the Squeeze's has none: its layer's name.
    cell = next(node for node in spec.body.nodes if node.op_type == "LSTMCell")
    assert cell.outputs == ["Result_13", "Result_14"]
    assert cell.inputs[0] == "Squeeze_11" and cell.inputs[3] == "Constant_8"
    assert loop.outputs == ["all_h", "last_h", "last_c"]
    names = _defined(graph)
    assert not [name for name in names if re.search(r"#\d|^\d+/", name)], names


def test_a_layer_with_several_unnamed_ports_names_each_by_its_port_id(tmp_path):
    (tmp_path / "m.xml").write_text(re.sub(r' names="Result_1[34]"', "", DATA.read_text()))
    (tmp_path / "m.bin").write_bytes(DATA.with_suffix(".bin").read_bytes())
    loop = next(n for n in read_graph(tmp_path / "m.xml").nodes if n.op_type == "Loop")
    spec = loop.attrs["spec"]
    assert [i.result for i in spec.inputs[1:]] == ["LSTMCell_12:6", "LSTMCell_12:7"]


def test_an_escaped_comma_stays_in_the_name(tmp_path, rng):
    p = ops.parameter([2], np.float32, name="P")
    relu = ops.relu(p)
    relu.output(0).set_names({"a,b", "c"})
    path = save(ov.Model([relu], [p], "comma"), tmp_path / "comma.xml")
    assert 'names="a\\,b,c"' in path.read_text()
    model = cyloop.load(path)
    assert model.output_names == ["a,b"]
    x = rng.standard_normal(2).astype(np.float32)
    np.testing.assert_array_equal(model.run({"P": x})["a,b"], np.maximum(x, 0))


def test_body_names_that_repeat_outer_names_stay_apart(tmp_path, rng):
    """A body whose Parameters and tensors have the names of the net's: every value keeps a
    name of its own, and the model computes what the port map says."""
    model = ti_model((4, 2, 3), 0, 0, -1, 1, 1, 0, 1)
    path = save(model, tmp_path / "ti.xml")
    text = path.read_text()
    for body_name, outer_name in (("xt", "X"), ("h", "H0"), ("wb", "W")):
        text = text.replace(f'name="{body_name}"', f'name="{outer_name}"')
        text = text.replace(f'names="{body_name}"', f'names="{outer_name}"')
    xml = tmp_path / "same_names.xml"
    xml.write_text(text)
    (tmp_path / "same_names.bin").write_bytes(path.with_suffix(".bin").read_bytes())
    graph = read_graph(xml)
    names = _defined(graph)
    assert len(names) == len(set(names)), names
    body = next(n for n in graph.nodes if n.op_type == "Loop").attrs["spec"].body
    assert [v.name for v in body.inputs] == ["X~2", "H0~2", "W~2"]
    feeds = {"X": rng.standard_normal((4, 2, 3)), "H0": rng.standard_normal((1, 2, 3)),
             "W": rng.standard_normal((1, 2, 3))}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    want = cyloop.load(path).run(feeds)
    got = run_both(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, err_msg=name)


def test_an_if_branch_parameter_named_as_the_value_it_captures(tmp_path, rng):
    """If-8's branches read the net's values by name: a branch Parameter named "x", fed by the
    net's "x", must not hide it."""
    cond = ops.parameter([], np.bool_, name="c")
    x = ops.parameter([3], np.float32, name="x")
    then_x = ops.parameter([3], np.float32, name="x")
    else_x = ops.parameter([3], np.float32, name="x")
    then_body = ov.Model([ops.result(ops.relu(then_x))], [then_x], "then")
    else_body = ov.Model([ops.result(ops.negative(else_x))], [else_x], "else")
    branch = ops.if_op(cond)
    branch.set_then_body(then_body)
    branch.set_else_body(else_body)
    branch.set_input(x.output(0), then_x, else_x)
    out = branch.set_output(then_body.get_results()[0], else_body.get_results()[0])
    path = save(ov.Model([out], [cond, x], "if_same_name"), tmp_path / "if.xml")
    graph = read_graph(path)
    names = _defined(graph)
    assert len(names) == len(set(names)), names
    value = rng.standard_normal(3).astype(np.float32)
    for flag, want in ((True, np.maximum(value, 0)), (False, -value)):
        got = run_both(graph, {"c": np.array(flag), "x": value})
        np.testing.assert_array_equal(got[graph.outputs[0].name], want)


_CONST_THEN_PARAMETER = """<?xml version="1.0"?>
<net name="order" version="11">
  <layers>
    <layer id="0" name="P" type="Const" version="opset1">
      <data element_type="f32" shape="2" offset="0" size="8" />
      <output><port id="0" precision="FP32"><dim>2</dim></port></output>
    </layer>
    <layer id="1" name="P" type="Parameter" version="opset1">
      <data shape="2" element_type="f32" />
      <output><port id="0" precision="FP32"><dim>2</dim></port></output>
    </layer>
    <layer id="2" name="y" type="Add" version="opset1">
      <input><port id="0" precision="FP32"><dim>2</dim></port>
        <port id="1" precision="FP32"><dim>2</dim></port></input>
      <output><port id="2" precision="FP32"><dim>2</dim></port></output>
    </layer>
    <layer id="3" name="neg" type="Negative" version="opset1">
      <input><port id="0" precision="FP32"><dim>2</dim></port></input>
      <output><port id="1" precision="FP32" names="y"><dim>2</dim></port></output>
    </layer>
    <layer id="4" name="out" type="Result" version="opset1">
      <input><port id="0" precision="FP32"><dim>2</dim></port></input>
    </layer>
  </layers>
  <edges>
    <edge from-layer="0" from-port="0" to-layer="2" to-port="0" />
    <edge from-layer="1" from-port="0" to-layer="2" to-port="1" />
    <edge from-layer="2" from-port="2" to-layer="3" to-port="0" />
    <edge from-layer="3" from-port="1" to-layer="4" to-port="0" />
  </edges>
</net>
"""


def test_inputs_and_outputs_keep_their_names_when_a_layer_took_them_first(tmp_path, rng):
    """The Const "P" comes before the Parameter "P", and the Add "y" before the tensor "y" the
    Result outputs: the feed and the output keep the model's names, the layers yield theirs."""
    (tmp_path / "order.xml").write_text(_CONST_THEN_PARAMETER)
    (tmp_path / "order.bin").write_bytes(np.array([1, 2], np.float32).tobytes())
    graph = read_graph(tmp_path / "order.xml")
    assert [v.name for v in graph.inputs] == ["P"] and [v.name for v in graph.outputs] == ["y"]
    assert list(graph.initializers) == ["P~2"]
    names = _defined(graph)
    assert len(names) == len(set(names)), names
    x = rng.standard_normal(2).astype(np.float32)
    got = run_both(graph, {"P": x})
    np.testing.assert_array_equal(got["y"], -(x + np.array([1, 2], np.float32)))


def test_two_results_of_one_port_are_two_outputs(tmp_path, rng):
    p = ops.parameter([2], np.float32, name="P")
    relu = ops.relu(p)
    relu.output(0).set_names({"r"})
    first, second = ops.result(relu), ops.result(relu)
    second.set_friendly_name("second")
    path = save(ov.Model([first, second], [p], "twice"), tmp_path / "twice.xml")
    model = cyloop.load(path)
    assert model.output_names == ["r", "second"]
    x = rng.standard_normal(2).astype(np.float32)
    got = model.run({"P": x})
    np.testing.assert_array_equal(got["r"], np.maximum(x, 0))
    np.testing.assert_array_equal(got["second"], np.maximum(x, 0))


def test_outputs_are_typed_as_their_results_declare():
    graph = read_graph(DATA)
    assert [(v.name, v.dtype, v.shape) for v in graph.outputs] == [
        ("all_h", np.float32, (2, 16, 16)), ("last_h", np.float32, (2, 16)),
        ("last_c", np.float32, (2, 16))]


@pytest.mark.parametrize("declared", ["dynamic", "wrong"])
def test_a_declared_output_shape_is_not_checked_at_run_time(declared, tmp_path, rng):
    """Dynamic dims (-1, and ranges such as 1..10, which OpenVINO writes as -1 on ports) are
    unknown; a static declaration that the run does not match is not an error either (it
    documents the model, as an ONNX graph output's does)."""
    p = ops.parameter(ov.PartialShape([ov.Dimension(1, 10), -1, 3]), np.float32, name="P")
    path = save(ov.Model([ops.relu(p)], [p], "dynamic"), tmp_path / "dyn.xml")
    if declared == "wrong":  # the Result's port claims [5, 5, 3]
        text = path.read_text()
        result = text.index('type="Result"')
        path.write_text(text[:result] + text[result:].replace("<dim>-1</dim>", "<dim>5</dim>"))
    graph = read_graph(path)
    shape = (5, 5, 3) if declared == "wrong" else (None, None, 3)
    assert (graph.outputs[0].dtype, graph.outputs[0].shape) == (np.float32, shape)
    model = cyloop.load(path)
    for rows in (1, 7):
        x = rng.standard_normal((rows, 2, 3)).astype(np.float32)
        np.testing.assert_array_equal(model.run({"P": x})[model.output_names[0]],
                                      np.maximum(x, 0))


def test_a_port_without_dims_declares_no_shape(tmp_path):
    """OpenVINO writes a scalar and a tensor of dynamic rank alike: no <dim> at all."""
    scalar = ops.parameter([], np.float32, name="S")
    anything = ops.parameter(ov.PartialShape.dynamic(), np.float32, name="A")
    path = save(ov.Model([ops.relu(scalar), ops.relu(anything)], [scalar, anything], "dims"),
                tmp_path / "dims.xml")
    graph = read_graph(path)
    assert [(v.dtype, v.shape) for v in graph.outputs] == [(np.float32, None)] * 2


def test_an_output_read_straight_from_an_input_is_named_by_its_tensor(tmp_path, rng):
    p = ops.parameter([2], np.float32, name="input_1")
    p.output(0).set_names({"x"})
    path = save(ov.Model([ops.result(p), ops.relu(p)], [p], "through"), tmp_path / "through.xml")
    model = cyloop.load(path)
    assert model.input_names == ["input_1"] and model.output_names[0] == "x"
    value = rng.standard_normal(2).astype(np.float32)
    np.testing.assert_array_equal(model.run({"input_1": value})["x"], value)


def test_two_parameters_of_one_name_are_a_model_error(tmp_path):
    text = DATA.read_text().replace('name="H0" type="Parameter"', 'name="X" type="Parameter"')
    (tmp_path / "m.xml").write_text(text)
    (tmp_path / "m.bin").write_bytes(DATA.with_suffix(".bin").read_bytes())
    with pytest.raises(cyloop.ModelError, match="Parameter layers 0 and 1 are both named 'X'; "
                                                "inputs need distinct names"):
        read_graph(tmp_path / "m.xml")
