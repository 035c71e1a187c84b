"""TensorIterators whose body is an LSTMCell / GRUCell / RNNCell: numpy re-implementations of
the OpenVINO cell equations (gate orders f,i,c,o and z,r,h) are the oracle, the plugin a second
opinion."""

import re

import numpy as np
import pytest

import cyloop
from cyloop.peers import openvino_compiled

from ...frontends.openvino_models import cell_ti_model, save


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _numpy_cells(cell, x, h0, c0, w, r, b, linear_before_reset=False):
    h, c, hs = h0.astype(np.float64), None if c0 is None else c0.astype(np.float64), []
    hidden = h0.shape[-1]
    for t in range(x.shape[1]):
        xt = x[:, t].astype(np.float64)
        if cell == "lstm":
            f, i, g, o = np.split(xt @ w.T + h @ r.T + b, 4, axis=-1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
        elif cell == "gru":
            xz, xr, xh = np.split(xt @ w.T, 3, axis=-1)
            rz, rr, rh = np.split(r, 3, axis=0)
            z = _sigmoid(xz + h @ rz.T + b[:hidden])
            reset = _sigmoid(xr + h @ rr.T + b[hidden:2 * hidden])
            if linear_before_reset:
                cand = np.tanh(xh + b[2 * hidden:3 * hidden]
                               + reset * (h @ rh.T + b[3 * hidden:]))
            else:
                cand = np.tanh(xh + (reset * h) @ rh.T + b[2 * hidden:])
            h = (1 - z) * cand + z * h
        else:
            h = np.tanh(xt @ w.T + h @ r.T + b)
        hs.append(h)
    return h, np.stack(hs, axis=1), c


@pytest.mark.parametrize("cell,attrs", [("lstm", {}), ("lstm1", {}), ("gru", {}),
                                        ("gru", {"linear_before_reset": True}), ("rnn", {})],
                         ids=["lstm", "lstm-opset1", "gru", "gru-linear-before-reset", "rnn"])
def test_cell_tensor_iterator(cell, attrs, tmp_path, rng):
    ov_model, weights = cell_ti_model(cell, **attrs)
    path = save(ov_model, tmp_path / "cell.xml")
    feeds = {"X": rng.standard_normal((3, 6, 5)).astype(np.float32),
             "H0": rng.standard_normal((3, 7)).astype(np.float32)}
    if cell.startswith("lstm"):
        feeds["C0"] = rng.standard_normal((3, 7)).astype(np.float32)
        cell = "lstm"
    model = cyloop.load(path)
    got = model.run(feeds)
    h, hs, c = _numpy_cells(cell, feeds["X"], feeds["H0"], feeds.get("C0"), weights["W"],
                            weights["R"], weights["B"], attrs.get("linear_before_reset", False))
    names = model.output_names
    np.testing.assert_allclose(got[names[0]], h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[names[1]], hs, rtol=1e-4, atol=1e-5)
    if cell == "lstm":
        np.testing.assert_allclose(got[names[2]], c, rtol=1e-4, atol=1e-5)
    plugin = list(openvino_compiled(ov_model)(list(feeds.values())).values())
    np.testing.assert_allclose(plugin[1], hs, rtol=1e-3, atol=1e-4)


def _measured_steps(model):
    return [step.fn.measured for loop in model._compiled.loops for step in loop.facts().body.steps
            if getattr(step.fn, "measured", None) is not None]


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_every_measured_formulation_matches_the_oracle(driver, tmp_path, rng):
    """Whatever the planner picks on a machine, the result is right: each candidate of the LSTM
    step, forced in turn, against the numpy cell equations; the plan names the choice."""
    ov_model, weights = cell_ti_model("lstm", steps=9)
    path = save(ov_model, tmp_path / "cell.xml")
    feeds = {"X": rng.standard_normal((3, 9, 5)).astype(np.float32),
             "H0": rng.standard_normal((3, 7)).astype(np.float32),
             "C0": rng.standard_normal((3, 7)).astype(np.float32)}
    h, hs, c = _numpy_cells("lstm", feeds["X"], feeds["H0"], feeds["C0"], weights["W"],
                            weights["R"], weights["B"])
    model = cyloop.load(path, driver=driver)
    (measured,) = _measured_steps(model)
    assert set(measured.candidates) == {"fused gates", "split gates"}
    for name in measured.candidates:
        measured.fix(name)
        got = list(model.run(feeds).values())
        for value, expected in zip(got, (h, hs, c)):
            np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-5, err_msg=name)
        assert re.search(rf"measured choice: node '\d+:LSTMCell_\d+' \(LSTMCell(Recurrence)?\): "
                         rf"{name} \(fixed, not measured\)", str(model.plan()))


def test_the_planner_keeps_the_fastest_and_tune_false_the_default(tmp_path, rng):
    ov_model, _ = cell_ti_model("lstm", steps=40)
    path = save(ov_model, tmp_path / "cell.xml")
    feeds = {"X": rng.standard_normal((3, 40, 5)).astype(np.float32),
             "H0": np.zeros((3, 7), np.float32), "C0": np.zeros((3, 7), np.float32)}
    tuned = cyloop.load(path)
    tuned.run(feeds)
    (measured,) = _measured_steps(tuned)
    medians = {name: float(np.median(s)) for name, s in measured.samples.items()}
    assert all(len(s) >= measured.rounds for s in measured.samples.values())
    assert measured.choice == min(medians, key=medians.get)
    assert f"{measured.choice}, the fastest here" in str(tuned.plan())
    fixed = cyloop.load(path, tune=False)
    fixed.run(feeds)
    (default,) = _measured_steps(fixed)
    assert default.choice == next(iter(default.candidates)) and default.fixed
    assert not any(default.samples.values())
