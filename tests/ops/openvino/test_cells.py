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


_NUMPY_ACTIVATIONS = {"sigmoid": _sigmoid, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0)}


def _numpy_cells(cell, x, h0, c0, w, r, b, linear_before_reset=False, clip=0.0,
                 activations=None):
    """The cell equations in float64, step by step, as OpenVINO's opset documents them."""
    if activations is None:
        activations = {"lstm": ["sigmoid", "tanh", "tanh"], "gru": ["sigmoid", "tanh"],
                       "rnn": ["tanh"]}[cell]
    act = [_NUMPY_ACTIVATIONS[name] for name in activations]

    def clipped(v):
        return np.clip(v, -clip, clip) if clip else v

    h, c, hs = h0.astype(np.float64), None if c0 is None else c0.astype(np.float64), []
    hidden = h0.shape[-1]
    for t in range(x.shape[1]):
        xt = x[:, t].astype(np.float64)
        if cell == "lstm":
            f, i, g, o = np.split(clipped(xt @ w.T + h @ r.T + b), 4, axis=-1)
            c = act[0](f) * c + act[0](i) * act[1](g)
            h = act[0](o) * act[2](c)
        elif cell == "gru":
            xz, xr, xh = np.split(xt @ w.T, 3, axis=-1)
            rz, rr, rh = np.split(r, 3, axis=0)
            z = act[0](clipped(xz + h @ rz.T + b[:hidden]))
            reset = act[0](clipped(xr + h @ rr.T + b[hidden:2 * hidden]))
            if linear_before_reset:
                cand = act[1](clipped(xh + b[2 * hidden:3 * hidden]
                                      + reset * (h @ rh.T + b[3 * hidden:])))
            else:
                cand = act[1](clipped(xh + (reset * h) @ rh.T + b[2 * hidden:]))
            h = (1 - z) * cand + z * h
        else:
            h = act[0](clipped(xt @ w.T + h @ r.T + b))
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


_MEASURED_CASES = {
    "lstm": ("lstm", {}),
    "lstm-clip": ("lstm", {"clip": 0.7}),
    "lstm-activations": ("lstm", {"activations": ["relu", "sigmoid", "tanh"], "clip": 1.5}),
    "gru": ("gru", {}),
    "gru-linear-before-reset-clip": ("gru", {"linear_before_reset": True, "clip": 0.9}),
    "rnn-clip": ("rnn", {"clip": 0.5}),
}


@pytest.mark.parametrize("driver", ["cython", "python"])
@pytest.mark.parametrize("case", list(_MEASURED_CASES))
def test_every_measured_formulation_matches_the_oracle(case, driver, tmp_path, rng):
    """Whatever the planner picks on a machine, the result is right: each candidate of each
    cell's step (batch- or gate-major gates; an LSTM's arranged, halved or not, clipped or
    not), forced in turn, against the numpy cell equations; the plan names the choice."""
    cell, attrs = _MEASURED_CASES[case]
    ov_model, weights = cell_ti_model(cell, steps=9, **attrs)
    path = save(ov_model, tmp_path / "cell.xml")
    feeds = {"X": (rng.standard_normal((3, 9, 5)) * 2).astype(np.float32),
             "H0": rng.standard_normal((3, 7)).astype(np.float32)}
    if cell == "lstm":
        feeds["C0"] = rng.standard_normal((3, 7)).astype(np.float32)
    expected = _numpy_cells(cell, feeds["X"], feeds["H0"], feeds.get("C0"), weights["W"],
                            weights["R"], weights["B"], **attrs)
    model = cyloop.load(path, driver=driver)
    (measured,) = _measured_steps(model)
    assert set(measured.candidates) == {"batch-major gates", "gate-major gates"}
    for name in measured.candidates:
        measured.fix(name)
        got = list(model.run(feeds).values())
        for value, want in zip(got, expected):
            np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5, err_msg=name)
        assert re.search(rf"measured choice: node '\d+:\w+Cell_\d+' \(\w+Cell(Recurrence)?\): "
                         rf"{name} \(fixed, not measured\)", str(model.plan()))


def test_the_planner_keeps_the_fastest_and_tune_false_the_default(tmp_path, rng):
    """The step's choice and the hoisted projection's GEMM orientation are both measured (per
    shape), shown in the plan, and both fixed to their default by tune=False."""
    ov_model, _ = cell_ti_model("lstm", steps=40)
    path = save(ov_model, tmp_path / "cell.xml")
    feeds = {"X": rng.standard_normal((3, 40, 5)).astype(np.float32),
             "H0": np.zeros((3, 7), np.float32), "C0": np.zeros((3, 7), np.float32)}
    tuned = cyloop.load(path, driver="cython")
    tuned.run(feeds)
    (measured,) = _measured_steps(tuned)
    (trial,) = measured.trials.values()  # one state shape
    medians = {name: float(np.median(s)) for name, s in trial.samples.items()}
    assert all(len(s) >= measured.rounds for s in trial.samples.values())
    assert trial.choice == min(medians, key=medians.get)
    plan = str(tuned.plan())
    assert f"on state [3, 7] float32: {trial.choice}, the fastest here" in plan
    assert re.search(r"measured choice: node '\d+:LSTMCell_\d+' \(LSTMCell\): its input "
                     r"projection \(CellProjection\) \(hoisted\): on \[\d+,5\] @ \[28,5\]\^T "
                     r"float32: ", plan)
    fixed = cyloop.load(path, driver="cython", tune=False)
    fixed.run(feeds)
    plan = str(fixed.plan())
    assert "batch-major gates (fixed, not measured)" in plan
    assert "rows (fixed, not measured)" in plan
    (default,) = _measured_steps(fixed)
    assert default.fixed == next(iter(default.candidates)) and not default.trials
