"""OpenVINO IRs built in the tests with the openvino Python API and saved under tmp_path."""

import shutil
import xml.etree.ElementTree as ET

import numpy as np
import openvino as ov
import openvino.opset8 as ops


def i64_constant(values):
    """An OpenVINO constant of int64 `values`."""
    return ops.constant(np.array(values, np.int64))


def save(model, path):
    ov.save_model(model, str(path), compress_to_fp16=False)
    return path


def ti_last_values(path, inputs, results, params, sliced, merged):
    """A TensorIterator model saved at `path`, of `inputs`: its body makes `results` of
    `params`; `sliced` = (param, outer value, axis) takes one element of that axis a step,
    `merged` = (param, initial value, result) is carried; it returns the last value of each of
    `results`."""
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model(results, params, "body"))
    param, outer, axis = sliced
    ti.set_sliced_input(param, outer.output(0), 0, 1, 1, -1, axis)
    param, initial, result = merged
    ti.set_merged_input(param, initial.output(0), result.output(0))
    outputs = [ti.get_iter_value(result.output(0), -1) for result in results]
    return save(ov.Model(outputs, inputs, "ti"), path)


def converted(onnx_model, feeds, path):
    """`onnx_model` as the IR openvino.convert_model writes for it, saved at `path`, its inputs
    declared with the shapes of `feeds` (the IR's take the shapes declared). Converted in a
    child interpreter: OpenVINO's conversion of some Loops leaves numpy's threaded products
    spinning after it."""
    import subprocess
    import sys

    import onnx

    onnx_model = onnx.ModelProto.FromString(onnx_model.SerializeToString())  # (a copy)
    for declared in onnx_model.graph.input:
        dims = declared.type.tensor_type.shape
        dims.ClearField("dim")
        for size in feeds[declared.name].shape:
            dims.dim.add().dim_value = size
    source = f"{path}.onnx"
    onnx.save(onnx_model, source)
    convert = ("import sys, openvino as ov; ov.save_model(ov.convert_model(sys.argv[1]), "
               "sys.argv[2], compress_to_fp16=False)")
    subprocess.run([sys.executable, "-c", convert, source, str(path)], check=True)
    return path


def ti_model(x_shape, axis, start, end, stride, part, out_axis, out_stride, dtype=np.float32):
    """TensorIterator: h <- h + x_t * w (x sliced by the port map), y_t = 2 h emitted.

    h has the part's shape; w is an invariant input; outputs: the last h and the y parts
    concatenated along out_axis (reverse when out_stride < 0)."""
    part_shape = list(x_shape)
    part_shape[axis] = part
    x = ops.parameter(list(x_shape), dtype, name="X")
    h0 = ops.parameter(part_shape, dtype, name="H0")
    w = ops.parameter(part_shape, dtype, name="W")
    xt = ops.parameter(part_shape, dtype, name="xt")
    h = ops.parameter(part_shape, dtype, name="h")
    wb = ops.parameter(part_shape, dtype, name="wb")
    h_next = ops.add(h, ops.multiply(xt, wb))
    res_h = ops.result(h_next)
    res_y = ops.result(ops.multiply(h_next, ops.constant(np.array(2, dtype))))
    body = ov.Model([res_h, res_y], [xt, h, wb], "body")
    ti = ops.tensor_iterator()
    ti.set_body(body)
    ti.set_sliced_input(xt, x.output(0), start, stride, part, end, axis)
    ti.set_merged_input(h, h0.output(0), res_h.output(0))
    ti.set_invariant_input(wb, w.output(0))
    last = ti.get_iter_value(res_h.output(0), -1)
    ys = ti.get_concatenated_slices(res_y.output(0), 0, out_stride, 1, -1, out_axis)
    return ov.Model([last, ys], [x, h0, w], "ti")


def loop_model(trip_count, stop_at=None, dtype=np.float32, sliced=False, rows=6):
    """Loop-5: acc <- acc + i (the current iteration) [+ x_i when sliced]; emits acc each
    iteration along axis 0; the body condition is i < stop_at (always true when None).

    trip_count: an int (a Const), or "param" (a model input named "N")."""
    acc0 = ops.parameter([1, 3], dtype, name="ACC0")
    inputs = [acc0]
    if trip_count == "param":
        n = ops.parameter([], np.int64, name="N")
        inputs.append(n)
        trip = n
    else:
        trip = i64_constant(trip_count)
    x = ops.parameter([rows, 3], dtype, name="X") if sliced else None
    if sliced:
        inputs.append(x)
    it = ops.parameter([], np.int64, name="it")
    acc = ops.parameter([1, 3], dtype, name="acc")
    body_params = [it, acc]
    step = ops.convert(it, dtype)
    acc_next = ops.add(acc, step)
    if sliced:
        xt = ops.parameter([1, 3], dtype, name="xt")
        body_params.append(xt)
        acc_next = ops.add(acc_next, xt)
    limit = i64_constant(stop_at if stop_at is not None else 2**62)
    cond = ops.less(it, limit)
    res_cond = ops.result(cond)
    res_acc = ops.result(acc_next)
    body = ov.Model([res_cond, res_acc], body_params, "body")
    loop = ops.loop(trip, ops.constant(np.array(True)))
    loop.set_function(body)
    loop.set_special_body_ports([0, 0])  # current iteration: param 0; condition: result 0
    loop.set_merged_input(acc, acc0.output(0), res_acc.output(0))
    if sliced:
        loop.set_sliced_input(xt, x.output(0), 0, 1, 1, -1, 0)
    last = loop.get_iter_value(res_acc.output(0), -1)
    all_acc = loop.get_concatenated_slices(res_acc.output(0), 0, 1, 1, -1, 0)
    return ov.Model([last, all_acc], inputs, "loop")


def defect_model():
    """The TensorIterator OpenVINO's CPU plugin computes wrong: h <- h + squeeze(x_t) * w with a
    constant w, emitting unsqueeze(h)."""
    x = ops.parameter([5, 2, 3], np.float32, name="X")
    h0 = ops.parameter([2, 3], np.float32, name="H0")
    xt = ops.parameter([1, 2, 3], np.float32, name="xt")
    h = ops.parameter([2, 3], np.float32, name="h")
    w = ops.constant(np.full((2, 3), 0.5, np.float32))
    h_next = ops.add(h, ops.multiply(ops.squeeze(xt, i64_constant([0])), w))
    res_h = ops.result(h_next)
    res_y = ops.result(ops.unsqueeze(h_next, i64_constant([0])))
    body = ov.Model([res_h, res_y], [xt, h], "body")
    ti = ops.tensor_iterator()
    ti.set_body(body)
    ti.set_sliced_input(xt, x.output(0), 0, 1, 1, -1, 0)
    ti.set_merged_input(h, h0.output(0), res_h.output(0))
    out_h = ti.get_iter_value(res_h.output(0), -1)
    out_y = ti.get_concatenated_slices(res_y.output(0), 0, 1, 1, -1, 0)
    return ov.Model([out_h, out_y], [x, h0], "ti_defect")


def cell_ti_model(cell, steps=6, batch=3, features=5, hidden=7, seed=0, scale=0.5,
                  **cell_attrs):
    """A TensorIterator over axis 1 of X [batch, steps, features] whose body is one LSTMCell,
    GRUCell or RNNCell; emits every h (concatenated on axis 1) and the last h (and c). W and R
    are standard normal times `scale`.

    Returns (ov.Model, weights dict) with the weights as constants of the body."""
    rng = np.random.default_rng(seed)
    version1 = cell == "lstm1"  # LSTMCell-1 (opset1) rather than LSTMCell-4
    cell = "lstm" if version1 else cell
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    f = np.float32
    weights = {"W": (rng.standard_normal((gates * hidden, features)) * scale).astype(f),
               "R": (rng.standard_normal((gates * hidden, hidden)) * scale).astype(f),
               "B": rng.standard_normal(((gates + (1 if cell_attrs.get("linear_before_reset")
                                                   else 0)) * hidden,)).astype(f)}
    x = ops.parameter([batch, steps, features], f, name="X")
    h0 = ops.parameter([batch, hidden], f, name="H0")
    xt = ops.parameter([batch, 1, features], f, name="xt")
    h = ops.parameter([batch, hidden], f, name="h")
    x2 = ops.squeeze(xt, i64_constant([1]))
    w, r, b = (ops.constant(weights[k]) for k in ("W", "R", "B"))
    params, outer = [xt, h], [x, h0]
    if cell == "lstm":
        c0 = ops.parameter([batch, hidden], f, name="C0")
        c = ops.parameter([batch, hidden], f, name="c")
        params.append(c)
        outer.append(c0)
        if version1:
            from openvino import opset1

            node = opset1.lstm_cell(x2, h, c, w, r, b, hidden, ["sigmoid", "tanh", "tanh"], [],
                                    [], 0.0)
        else:
            node = ops.lstm_cell(x2, h, c, w, r, b, hidden, **cell_attrs)
        h_next, c_next = node.output(0), node.output(1)
    elif cell == "gru":
        h_next = ops.gru_cell(x2, h, w, r, b, hidden, **cell_attrs).output(0)
    else:
        h_next = ops.rnn_cell(x2, h, w, r, b, hidden, ["tanh"], [], [], **cell_attrs).output(0)
    res_h = ops.result(h_next)
    res_y = ops.result(ops.unsqueeze(h_next, i64_constant([1])))
    results = [res_h, res_y]
    if cell == "lstm":
        res_c = ops.result(c_next)
        results.append(res_c)
    body = ov.Model(results, params, "cell_body")
    ti = ops.tensor_iterator()
    ti.set_body(body)
    ti.set_sliced_input(xt, x.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(h, h0.output(0), res_h.output(0))
    outputs = [ti.get_iter_value(res_h.output(0), -1),
               ti.get_concatenated_slices(res_y.output(0), 0, 1, 1, -1, 1)]
    if cell == "lstm":
        ti.set_merged_input(c, c0.output(0), res_c.output(0))
        outputs.append(ti.get_iter_value(res_c.output(0), -1))
    return ov.Model(outputs, outer, f"{cell}_ti"), weights


_PORT = '<port id="{}" precision="FP32"><dim>1</dim><dim>2</dim></port>'


def nested_ti_xml(depth: int) -> str:
    """IR XML of `depth` TensorIterators nested one in the other's body, each slicing its [1, 2]
    input along axis 0 and concatenating its output back: y = x. Written as text, since the
    openvino API builds (and checks) nothing this deep quickly."""
    def graph(level):
        param = ('<layer id="0" name="x" type="Parameter" version="opset1"><data shape="1,2" '
                 f'element_type="f32"/><output>{_PORT.format(0)}</output></layer>')
        result = ('<layer id="2" name="y" type="Result" version="opset1"><input>'
                  f'{_PORT.format(0)}</input></layer>')
        if level == 0:
            return (f'<layers>{param}{result}</layers><edges><edge from-layer="0" '
                    'from-port="0" to-layer="2" to-port="0"/></edges>')
        ti = ('<layer id="1" name="ti" type="TensorIterator" version="opset1"><input>'
              f'{_PORT.format(0)}</input><output>{_PORT.format(1)}</output><port_map>'
              '<input axis="0" external_port_id="0" internal_layer_id="0" start="0" end="-1" '
              'stride="1" part_size="1"/><output axis="0" external_port_id="1" '
              'internal_layer_id="2" start="0" end="-1" stride="1" part_size="1"/></port_map>'
              f'<back_edges/><body>{graph(level - 1)}</body></layer>')
        return (f'<layers>{param}{ti}{result}</layers><edges><edge from-layer="0" from-port="0" '
                'to-layer="1" to-port="0"/><edge from-layer="1" from-port="1" to-layer="2" '
                'to-port="0"/></edges>')

    return f'<?xml version="1.0"?><net name="nested" version="11">{graph(depth)}</net>'


def to_older_dialect(path, out_path, condition=True):
    """Rewrite a current-dialect Loop-5 IR into the older doc's dialect; without `condition`,
    as the doc's `for` loop: no condition input (its port and edge removed), the body's
    condition Result left without a port_map entry."""
    tree = ET.parse(path)
    loop = next(layer for layer in tree.iter("layer") if layer.get("type") == "Loop")
    if not condition:
        port = next(p for p in loop.find("input") if p.get("id") == "1")
        loop.find("input").remove(port)
        edges = tree.getroot().find("edges")
        for edge in [e for e in edges if e.get("to-layer") == loop.get("id")
                     and e.get("to-port") == "1"]:
            edges.remove(edge)
    port_map, back_edges = loop.find("port_map"), loop.find("back_edges")
    body_layers = loop.find("body").find("layers")
    cond_result = None
    for entry in list(port_map):
        entry.set("internal_operation_id", entry.attrib.pop("internal_layer_id"))
        purpose = entry.attrib.pop("purpose", None)
        if purpose == "current_iteration":
            port_map.remove(entry)  # the unmapped Parameter is the current iteration
        elif purpose == "execution_condition":
            cond_result = entry.get("internal_operation_id")
            port_map.remove(entry)
    if not condition:
        for edge in back_edges:
            edge.set("from-operation", edge.attrib.pop("from-layer"))
            edge.set("to-operation", edge.attrib.pop("to-layer"))
        tree.write(out_path)
        shutil.copy(path.with_suffix(".bin"), out_path.with_suffix(".bin"))
        return out_path
    cond_param = ET.SubElement(body_layers, "layer", id="999", name="cond_in",
                               type="Parameter", version="opset1")
    ET.SubElement(cond_param, "data", shape="", element_type="boolean")
    ET.SubElement(ET.SubElement(cond_param, "output"), "port", id="0", precision="BOOL")
    ET.SubElement(port_map, "input", external_port_id="1", internal_operation_id="999",
                  condition="True")
    for edge in back_edges:
        edge.set("from-operation", edge.attrib.pop("from-layer"))
        edge.set("to-operation", edge.attrib.pop("to-layer"))
    ET.SubElement(back_edges, "edge", {"from-operation": cond_result, "to-operation": "999"})
    tree.write(out_path)
    shutil.copy(path.with_suffix(".bin"), out_path.with_suffix(".bin"))
    return out_path
