"""OpenVINO IR structure: nesting (TensorIterator inside Loop, Loop inside Loop), every element
type through Parameter and Const, dynamic input shapes, document order of body ports."""

import re

import numpy as np
import openvino as ov
import openvino.opset8 as ops
import pytest

import cyloop
from cyloop.frontends.openvino import read_graph

from ..support.openvino_models import save


def _i64(v):
    return ops.constant(np.array(v, np.int64))


def _sum_rows_ti(x_all, acc):
    """A TensorIterator adding the rows of x_all [n, 3] to acc [1, 3]."""
    xt = ops.parameter([1, 3], np.float32, name="xt")
    s = ops.parameter([1, 3], np.float32, name="s")
    res = ops.result(ops.add(s, xt))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([res], [xt, s], "rows"))
    ti.set_sliced_input(xt, x_all, 0, 1, 1, -1, 0)
    ti.set_merged_input(s, acc, res.output(0))
    return ti.get_iter_value(res.output(0), -1)


def _outer_loop(trip, make_body_value):
    acc0 = ops.parameter([1, 3], np.float32, name="ACC0")
    x = ops.parameter([4, 3], np.float32, name="X")
    acc = ops.parameter([1, 3], np.float32, name="acc")
    x_in = ops.parameter([4, 3], np.float32, name="x_in")
    value = make_body_value(acc, x_in)
    res_acc = ops.result(value)
    res_cond = ops.result(ops.constant(np.array(True)))
    body = ov.Model([res_cond, res_acc], [acc, x_in], "outer_body")
    loop = ops.loop(_i64(trip), ops.constant(np.array(True)))
    loop.set_function(body)
    loop.set_special_body_ports([-1, 0])
    loop.set_merged_input(acc, acc0.output(0), res_acc.output(0))
    loop.set_invariant_input(x_in, x.output(0))
    out = loop.get_iter_value(res_acc.output(0), -1)
    return ov.Model([out], [acc0, x], "nested")


def test_tensor_iterator_inside_a_loop(tmp_path, rng):
    model = _outer_loop(3, lambda acc, x_in: ops.multiply(
        _sum_rows_ti(x_in.output(0), acc.output(0)), ops.constant(np.float32(0.5))))
    path = save(model, tmp_path / "nested.xml")
    acc0 = rng.standard_normal((1, 3)).astype(np.float32)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    expected = acc0
    for _ in range(3):
        expected = (expected + x.sum(axis=0, keepdims=True)) * np.float32(0.5)
    m = cyloop.load(path)
    np.testing.assert_allclose(m.run({"ACC0": acc0, "X": x})[m.output_names[0]], expected,
                               rtol=1e-5)


def test_loop_inside_a_loop(tmp_path, rng):
    def inner(acc, x_in):
        a = ops.parameter([1, 3], np.float32, name="a")
        it = ops.parameter([], np.int64, name="j")
        res = ops.result(ops.add(a, ops.convert(it, "f32")))
        cond = ops.result(ops.constant(np.array(True)))
        loop = ops.loop(_i64(4), ops.constant(np.array(True)))
        loop.set_function(ov.Model([cond, res], [it, a], "inner"))
        loop.set_special_body_ports([0, 0])
        loop.set_merged_input(a, acc.output(0), res.output(0))
        return loop.get_iter_value(res.output(0), -1)

    path = save(_outer_loop(2, inner), tmp_path / "nested.xml")
    acc0 = rng.standard_normal((1, 3)).astype(np.float32)
    m = cyloop.load(path)
    got = m.run({"ACC0": acc0, "X": np.zeros((4, 3), np.float32)})[m.output_names[0]]
    np.testing.assert_allclose(got, acc0 + 2 * (0 + 1 + 2 + 3), rtol=1e-6)
    assert len(m.plan().loops[0].nested) == 1


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.int16,
                                   np.int32, np.int64, np.uint8, np.bool_])
def test_element_types_through_parameter_const_and_convert(dtype, tmp_path, rng):
    values = rng.integers(0, 5, (2, 3)).astype(dtype)  # exact in every type
    p = ops.parameter([2, 3], dtype, name="P")
    const = ops.constant(values[::-1].copy())
    if dtype == np.bool_:
        out = ops.logical_xor(p, const)
        expected = np.logical_xor(values, values[::-1])
    else:
        out = ops.add(p, const)
        expected = values + values[::-1]
    converted = ops.convert(out, "f64")
    path = save(ov.Model([out, converted], [p], "types"), tmp_path / "types.xml")
    m = cyloop.load(path)
    got = m.run({"P": values})
    first, second = m.output_names
    assert got[first].dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got[first], expected)
    np.testing.assert_array_equal(got[second], expected.astype(np.float64))


def test_dynamic_dimensions_accept_any_size(tmp_path, rng):
    p = ops.parameter(ov.PartialShape([-1, 3]), np.float32, name="P")
    path = save(ov.Model([ops.relu(p)], [p], "dynamic"), tmp_path / "dyn.xml")
    m = cyloop.load(path)
    for rows in (1, 7):
        x = rng.standard_normal((rows, 3)).astype(np.float32)
        np.testing.assert_array_equal(m.run({"P": x})[m.output_names[0]], np.maximum(x, 0))
    with pytest.raises(cyloop.InputError, match="expected size 3 on axis 1"):
        m.run({"P": np.zeros((2, 4), np.float32)})


def test_body_ports_follow_document_order_not_layer_ids(tmp_path, rng):
    """Renumber the body's layers so ids run against document order: results must not move."""
    from ..support.openvino_models import ti_model

    path = save(ti_model((5, 2, 3), 0, 0, -1, 1, 1, 0, 1), tmp_path / "ti.xml")
    feeds = {"X": rng.standard_normal((5, 2, 3)).astype(np.float32),
             "H0": np.zeros((1, 2, 3), np.float32), "W": np.ones((1, 2, 3), np.float32)}
    before = cyloop.load(path).run(feeds)
    text = path.read_text()
    # From the TI's port_map to the end of its body: map each body id k to 100 - k in layer ids,
    # edges, the port_map and the back edges alike.
    start, end = text.index("<port_map>"), text.index("</body>")
    middle = re.sub(r'(layer id|from-layer|to-layer|internal_layer_id)="(\d+)"',
                    lambda m: f'{m.group(1)}="{100 - int(m.group(2))}"', text[start:end])
    path.write_text(text[:start] + middle + text[end:])
    after = cyloop.load(path).run(feeds)
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])


def _stacking_loop(unsqueeze_axis, concat_axis, also_read=False, steps=5):
    """Loop-5: acc <- acc + step, emitting Unsqueeze(acc, unsqueeze_axis) concatenated along
    concat_axis (as openvino.convert_model writes an ONNX scan output); with `also_read` the
    unsqueezed value also feeds a second output (its ReduceSum)."""
    acc0 = ops.parameter([4], np.float32, name="ACC0")
    acc = ops.parameter([4], np.float32, name="acc")
    acc_next = ops.add(acc, ops.constant(np.full(4, 0.25, np.float32)))
    unsqueezed = ops.unsqueeze(acc_next, _i64([unsqueeze_axis]))
    results = [ops.result(ops.constant(np.array(True))), ops.result(acc_next),
               ops.result(unsqueezed)]
    if also_read:
        results.append(ops.result(ops.reduce_sum(unsqueezed, _i64([0, 1]), True)))
    loop = ops.loop(_i64(steps), ops.constant(np.array(True)))
    loop.set_function(ov.Model(results, [acc], "body"))
    loop.set_special_body_ports([-1, 0])
    loop.set_merged_input(acc, acc0.output(0), results[1].output(0))
    outputs = [loop.get_iter_value(results[1].output(0), -1),
               loop.get_concatenated_slices(results[2].output(0), 0, 1, 1, -1, concat_axis)]
    if also_read:
        outputs.append(loop.get_concatenated_slices(results[3].output(0), 0, 1, 1, -1, 0))
    return ov.Model(outputs, [acc0], "stacking")


@pytest.mark.parametrize("unsqueeze_axis,concat_axis,also_read,stacked", [
    (0, 0, False, True), (-1, 1, False, True), (0, -2, True, True), (1, 0, False, False)],
    ids=["axis-0", "last-axis", "unsqueezed-also-read", "other-axis"])
def test_an_unsqueezed_concatenation_is_read_as_a_stack(tmp_path, unsqueeze_axis, concat_axis,
                                                        also_read, stacked):
    """What openvino.convert_model writes for a scan output runs as ONNX's stack does: the Add
    writes each row in place and the Unsqueeze is gone unless something else reads it. numpy is
    the oracle (the CPU plugin refuses the other-axis case)."""
    path = save(_stacking_loop(unsqueeze_axis, concat_axis, also_read), tmp_path / "stack.xml")
    acc0 = np.arange(4, dtype=np.float32)
    model = cyloop.load(path)
    got = list(model.run({"ACC0": acc0}).values())
    rows = [np.expand_dims(acc0 + np.float32(0.25) * (k + 1), unsqueeze_axis) for k in range(5)]
    expected = [acc0 + np.float32(1.25), np.concatenate(rows, concat_axis)]
    if also_read:
        expected.append(np.concatenate([r.sum(keepdims=True) for r in rows], 0))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-6)
    (plan,) = model.plan().loops
    assert any(p.role == "concatenated" and p.desc.new_axis for p in plan.outputs) == stacked
    loop = next(node for node in read_graph(path).nodes if node.op_type == "Loop")
    body_ops = [node.op_type for node in loop.attrs["spec"].body.nodes]
    assert ("Unsqueeze" in body_ops) == (also_read or not stacked)
