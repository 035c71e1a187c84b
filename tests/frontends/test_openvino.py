"""OpenVINO IR: TensorIterator and Loop-5 IRs built with the openvino API, read by cyloop without
OpenVINO, checked against numpy implementations of docs/design.md's rules (OpenVINO's CPU plugin
is only a second opinion: it is wrong for some bodies)."""

import os

import numpy as np
import openvino as ov
import pytest

import cyloop
from cyloop.accel.aligned import SMALL_WEIGHT_BYTES
from cyloop.peers import openvino_compiled

from ..support.arrays import held_arrays
from ..support.openvino_models import defect_model, loop_model, save, ti_model
from ..support.slicing import oracle_parts

TI_CASES = [  # x shape, axis, start, end, stride, part, output axis, output stride
    ((5, 2, 3), 0, 0, -1, 1, 1, 0, 1),
    ((5, 2, 3), 0, -1, 0, -1, 1, 0, 1),
    ((5, 2, 3), 0, 0, -1, 1, 1, 0, -1),
    ((4, 6, 3), 1, 0, -1, 2, 2, 1, 1),
    ((4, 6, 3), 1, -1, 0, -2, 2, 1, -1),
    ((4, 7, 3), 1, 1, 5, 1, 1, 2, 1),
    ((3, 4, 8), 2, 2, -2, 3, 2, 0, 1),
    ((3, 4, 8), 2, -2, 1, -2, 1, 2, -1),
    # A positive end at or past the axis ("to the end", as IRs write end = D) is clamped:
    ((5, 2, 3), 0, 0, 5, 1, 1, 0, 1),
    ((4, 7, 3), 1, 2, 9, 2, 2, 1, 1),
]


def test_a_tensor_iterator_start_outside_the_axis_is_a_model_error(tmp_path, rng):
    path = save(ti_model((4, 6, 3), 1, 6, 0, -2, 2, 1, -1), tmp_path / "ti.xml")
    feeds = {"X": rng.standard_normal((4, 6, 3)).astype(np.float32),
             "H0": np.zeros((4, 2, 3), np.float32), "W": np.ones((4, 2, 3), np.float32)}
    with pytest.raises(cyloop.ModelError, match="start 6 is outside the axis of size 6"):
        cyloop.load(path).run(feeds)


def _ti_oracle(x, h0, w, axis, start, end, stride, part, out_axis, out_stride):
    parts = oracle_parts(x, axis, start, end, stride, part, keep_axis=True)
    h, ys = h0, []
    for x_t in parts:
        h = h + x_t * w
        ys.append(2 * h)
    if out_stride < 0:
        ys = ys[::-1]
    return h, np.concatenate(ys, axis=out_axis)


@pytest.mark.parametrize("case", TI_CASES, ids=[str(c) for c in TI_CASES])
def test_tensor_iterator_port_maps(case, tmp_path, rng):
    x_shape, axis, start, end, stride, part, out_axis, out_stride = case
    path = save(ti_model(*case), tmp_path / "ti.xml")
    part_shape = list(x_shape)
    part_shape[axis] = part
    feeds = {"X": rng.standard_normal(x_shape).astype(np.float32),
             "H0": rng.standard_normal(part_shape).astype(np.float32),
             "W": rng.standard_normal(part_shape).astype(np.float32)}
    model = cyloop.load(path)
    got = model.run(feeds)
    last, ys = _ti_oracle(feeds["X"], feeds["H0"], feeds["W"], axis, start, end, stride, part,
                          out_axis, out_stride)
    np.testing.assert_allclose(got[model.output_names[0]], last, rtol=1e-5)
    np.testing.assert_allclose(got[model.output_names[1]], ys, rtol=1e-5)


def test_cpu_plugin_is_wrong_where_cyloop_is_right(tmp_path, rng):
    """The known defect in docs/design.md: `h_next = h + x_t * w` in a TensorIterator (here with
    a squeezed slice and a constant w). numpy is the oracle; the plugin is shown to disagree."""
    ov_model = defect_model()
    path = save(ov_model, tmp_path / "ti.xml")
    feeds = {"X": rng.standard_normal((5, 2, 3)).astype(np.float32),
             "H0": np.zeros((2, 3), np.float32)}
    h, rows = feeds["H0"], []
    for x_t in feeds["X"]:
        h = h + x_t * np.float32(0.5)
        rows.append(h)
    model = cyloop.load(path)
    got = model.run(feeds)
    np.testing.assert_allclose(got[model.output_names[0]], h, rtol=1e-6)
    np.testing.assert_allclose(got[model.output_names[1]], np.stack(rows), rtol=1e-6)
    plugin = openvino_compiled(ov_model)
    plugin_last = next(iter(plugin(list(feeds.values())).values()))
    assert not np.allclose(plugin_last, h, atol=1e-3), \
        "OpenVINO's CPU plugin now computes this body right: update docs/design.md's note"


def _loop_oracle(acc0, trip, stop_at, x=None):
    acc, rows, i = acc0, [], 0
    while (trip < 0 or i < trip):
        acc = acc + np.float32(i) + (x[i:i + 1] if x is not None else 0)
        rows.append(acc)
        if stop_at is not None and not i < stop_at:
            break
        i += 1
    return acc, (np.concatenate(rows, 0) if rows else np.zeros((0, 3), np.float32))


@pytest.mark.parametrize("trip,stop_at,sliced", [
    (5, None, False), (5, 2, False), (-1, 3, False), (0, None, False), ("param", None, True),
    (6, None, True), (4, 1, True),
], ids=["for", "for-with-cond", "while", "zero", "trip-param-sliced", "sliced", "sliced-stop"])
def test_loop5_forms(trip, stop_at, sliced, tmp_path, rng):
    ov_model = loop_model(trip, stop_at, sliced=sliced)
    path = save(ov_model, tmp_path / "loop.xml")
    feeds = {"ACC0": rng.standard_normal((1, 3)).astype(np.float32)}
    n = 6 if trip == "param" else trip
    if trip == "param":
        feeds["N"] = np.array(n, np.int64)
    if sliced:
        feeds["X"] = rng.standard_normal((6, 3)).astype(np.float32)
    model = cyloop.load(path)
    got = model.run(feeds)
    last, rows = _loop_oracle(feeds["ACC0"], n, stop_at, feeds.get("X"))
    np.testing.assert_allclose(got[model.output_names[0]], last, rtol=1e-5)
    np.testing.assert_allclose(got[model.output_names[1]], rows, rtol=1e-5)
    if trip != 0:  # a second opinion (the plugin handles these bodies)
        plugin = openvino_compiled(ov_model)
        values = list(plugin(list(feeds.values())).values())
        np.testing.assert_allclose(values[1], rows, rtol=1e-5)


def test_loop5_running_past_the_last_slice(tmp_path):
    path = save(loop_model(9, sliced=True), tmp_path / "loop.xml")
    with pytest.raises(cyloop.ModelError, match="runs past the last slice"):
        cyloop.load(path).run({"ACC0": np.zeros((1, 3), np.float32),
                               "X": np.zeros((6, 3), np.float32)})


def _ort(onnx_model, feeds):
    import onnxruntime as ort

    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def _converted_cases(rng):
    from ..support.onnx_models import if_in_loop_model, lstm_loop_model, scan_model
    from ..support.onnx_models import loop_model as onnx_loop

    steps, batch, features, hidden = 6, 2, 5, 8
    return {
        "loop-with-body-stop": (onnx_loop(True, True, 2), {
            "M": np.array(6, np.int64), "cond": np.array(True),
            "v0": rng.standard_normal((2, 3)).astype(np.float32)}),
        "loop-M-only": (onnx_loop(True, False, None), {
            "M": np.array(4, np.int64), "v0": rng.standard_normal((2, 3)).astype(np.float32)}),
        "scan-axis1-reversed": (scan_model((4, 5, 3), 1, 1, 0, 1), {
            "s0": rng.standard_normal((4, 3)).astype(np.float32),
            "x": rng.standard_normal((4, 5, 3)).astype(np.float32)}),
        "lstm-as-loop": (lstm_loop_model(hidden), {
            "T": np.array(steps, np.int64),
            "X": rng.standard_normal((steps, batch, features)).astype(np.float32),
            "W": (rng.standard_normal((features, 4 * hidden)) * 0.4).astype(np.float32),
            "R": (rng.standard_normal((hidden, 4 * hidden)) * 0.4).astype(np.float32),
            "B": rng.standard_normal(4 * hidden).astype(np.float32),
            "h0": np.zeros((batch, hidden), np.float32),
            "c0": np.zeros((batch, hidden), np.float32)}),
        # If-8, at the top and inside a Loop body, its branches capturing outer values.
        "if-in-loop": (if_in_loop_model(), {
            "M": np.array(5, np.int64), "v0": rng.standard_normal((2, 3)).astype(np.float32),
            "x": rng.standard_normal((2, 3)).astype(np.float32)}),
        "if-in-loop-negative": (if_in_loop_model(), {
            "M": np.array(3, np.int64), "v0": -np.ones((2, 3), np.float32),
            "x": -np.ones((2, 3), np.float32)}),
    }


@pytest.mark.parametrize("name", ["loop-with-body-stop", "loop-M-only", "scan-axis1-reversed",
                                  "lstm-as-loop", "if-in-loop", "if-in-loop-negative"])
def test_ir_converted_from_onnx_matches_onnxruntime_on_the_original(name, tmp_path, rng):
    import onnx

    onnx_model, feeds = _converted_cases(rng)[name]
    onnx.save(onnx_model, str(tmp_path / "model.onnx"))
    path = save(ov.convert_model(str(tmp_path / "model.onnx")), tmp_path / "model.xml")
    if name.startswith("if-"):
        assert 'type="If"' in path.read_text()
    expected = _ort(onnx_model, feeds)
    model = cyloop.load(path)
    got = model.run({k: v for k, v in feeds.items() if k in model.input_names})
    for out_name, value in expected.items():
        np.testing.assert_allclose(got[out_name], value, rtol=1e-5, atol=1e-6, err_msg=out_name)


def test_constants_are_read_onto_a_64_byte_boundary():
    """So that a product uses a weight as it is, with no aligned copy beside it (accel/aligned.py):
    the embedded LSTM TensorIterator's weights (from SMALL_WEIGHT_BYTES up: a smaller one costs
    little misaligned)."""
    path = os.path.join(os.path.dirname(cyloop.__file__), "data", "lstm_ti.xml")
    model = cyloop.load(path)
    weights = [a for a in held_arrays(model.graph) if a.nbytes >= SMALL_WEIGHT_BYTES]
    assert len(weights) >= 2  # W and R at least
    assert all(a.__array_interface__["data"][0] % 64 == 0 for a in weights)
    assert not any(a.flags.writeable for a in weights)
    # Compiling keeps them as they are: no misaligned copy beside them reaches a kernel.
    compiled = {id(c) for c in model._compiled.constants.values()}
    assert all(id(a) in compiled for a in model.graph.initializers.values()
               if a.nbytes >= SMALL_WEIGHT_BYTES)
