"""TensorIterators whose body is an LSTMCell / GRUCell / RNNCell: numpy re-implementations of
the OpenVINO cell equations (gate orders f,i,c,o and z,r,h) are the oracle, the plugin a second
opinion."""

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
