"""TensorIterators whose body is an LSTMCell / GRUCell / RNNCell: numpy re-implementations of
the OpenVINO cell equations (gate orders f,i,c,o and z,r,h) are the oracle, the plugin a second
opinion."""

import re

import numpy as np
import pytest

import cyloop
from cyloop.accel.measured import EARLY_ROUNDS, MAX_ROUNDS_FACTOR
from cyloop.peers import openvino_compiled

from ...support.cells import numpy_cells
from ...support.openvino_models import cell_ti_model, save
from ...support.plans import loop_plan, measured_steps


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
    h, hs, c = numpy_cells(cell, feeds["X"], feeds["H0"], feeds.get("C0"), weights["W"],
                            weights["R"], weights["B"], attrs.get("linear_before_reset", False))
    names = model.output_names
    np.testing.assert_allclose(got[names[0]], h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[names[1]], hs, rtol=1e-4, atol=1e-5)
    if cell == "lstm":
        np.testing.assert_allclose(got[names[2]], c, rtol=1e-4, atol=1e-5)
    plugin = list(openvino_compiled(ov_model)(list(feeds.values())).values())
    np.testing.assert_allclose(plugin[1], hs, rtol=1e-3, atol=1e-4)


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
    cell's step (batch- or gate-major gates, an LSTM's blocked ones too; its arranged, halved or
    not, clipped or not), forced in turn, against the numpy cell equations; the plan names the
    choice."""
    cell, attrs = _MEASURED_CASES[case]
    ov_model, weights = cell_ti_model(cell, steps=9, **attrs)
    path = save(ov_model, tmp_path / "cell.xml")
    feeds = {"X": (rng.standard_normal((3, 9, 5)) * 2).astype(np.float32),
             "H0": rng.standard_normal((3, 7)).astype(np.float32)}
    if cell == "lstm":
        feeds["C0"] = rng.standard_normal((3, 7)).astype(np.float32)
    expected = numpy_cells(cell, feeds["X"], feeds["H0"], feeds.get("C0"), weights["W"],
                            weights["R"], weights["B"], **attrs)
    model = cyloop.load(path, driver=driver)
    (measured,) = measured_steps(model)
    layouts = {"batch-major gates", "gate-major gates"}
    if cell == "lstm":
        layouts.add("blocked gates")
    assert set(measured.candidates) == layouts
    for name in measured.candidates:
        measured.fix(name)
        got = list(model.run(feeds).values())
        for value, want in zip(got, expected):
            np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5, err_msg=name)
        plan = loop_plan(model)
        (choice,) = [c for c in plan.choices_of("formulation") if not c.hoisted]
        (cell_node,) = choice.nodes  # (the cell, as the model names it)
        assert re.fullmatch(r"\d+:\w+Cell_\d+", cell_node.name), plan
        assert re.fullmatch(r"\w+Cell", cell_node.op) and choice.fixed == name, plan
        if driver == "cython":  # h, carried and emitted on axis 1: its slot or a pool, measured
            h = plan.alias("h")
            assert h.how == "measured slot or pool" and h.writer_op.endswith("CellRecurrence")


def test_the_planner_keeps_the_fastest_and_tune_false_the_default(tmp_path, rng):
    """The step's choice and the hoisted projection's GEMM orientation are both measured (per
    shape), shown in the plan, and both fixed to their default by tune=False. (The projection's
    rows have a column of ones for the bias: 5 inputs make 6 columns.)"""
    ov_model, _ = cell_ti_model("lstm", steps=40)
    path = save(ov_model, tmp_path / "cell.xml")
    feeds = {"X": rng.standard_normal((3, 40, 5)).astype(np.float32),
             "H0": np.zeros((3, 7), np.float32), "C0": np.zeros((3, 7), np.float32)}
    tuned = cyloop.load(path, driver="cython", tune="at once")  # (trials from the first calls)
    (measured,) = measured_steps(tuned)
    # Enough steps for every candidate's warm-up call and its most rounds (close medians), in
    # streaks.
    calls = len(measured.candidates) * (1 + MAX_ROUNDS_FACTOR * measured.rounds) * measured.streak
    for _ in range(-(-calls // 40)):
        tuned.run(feeds)
    (trial,) = measured.trials.values()  # one state shape
    # Every candidate ran its early rounds; those clearly slower then dropped out, and of the
    # rest (each with its rounds) the lowest median is kept.
    assert all(len(s) >= EARLY_ROUNDS for s in trial.samples.values())
    medians = {name: float(np.median(trial.samples[name])) for name in trial.active}
    assert len(medians) == 1 or all(len(trial.samples[name]) >= measured.rounds
                                    for name in medians)
    assert trial.choice == min(medians, key=medians.get)
    for name, step in measured.candidates.items():  # the losing layouts let go of their weights
        assert step.weights.remembers() == (name == trial.choice), name
    plan = loop_plan(tuned)
    (step,) = [c for c in plan.choices_of("formulation") if not c.hoisted]
    assert step.trial("state [3, 7] float32").chosen == trial.choice, plan
    (projection,) = [c for c in plan.choices_of("formulation") if c.hoisted]
    assert [(r.op, bool(re.fullmatch(r"\d+:LSTMCell_\d+", r.name))) for r in projection.nodes] \
        == [("LSTMCell", True)], plan
    assert re.fullmatch(r"\[[\d.]+,6\] @ \[28,6\]\^T float32", projection.trials[0].on), plan
    fixed = cyloop.load(path, driver="cython", tune=False)
    fixed.run(feeds)
    fixed_choices = [c.fixed for c in loop_plan(fixed).choices]
    assert "blocked gates" in fixed_choices and "rows" in fixed_choices
    (default,) = measured_steps(fixed)
    assert default.fixed == next(iter(default.candidates)) and not default.trials


def test_every_lstm_step_layout_takes_leading_dims(rng):
    """A step on states with leading dims [2, B, H] is the step of each [B, H] slice, whichever
    layout runs it (the blocked one folds them into its batch)."""
    from cyloop.kernels.recurrent.cells import lstm_step

    hidden, batch = 6, 3
    r = (rng.standard_normal((4 * hidden, hidden)) * 0.5).astype(np.float32)
    r.flags.writeable = False
    xw, h, c = (rng.standard_normal((2, batch, n)).astype(np.float32)
                for n in (4 * hidden, hidden, hidden))
    step = lstm_step({})
    for name, fn in step.candidates.items():
        whole = fn(xw, h, c, r)
        for k in range(2):
            for got, want in zip(whole, fn(xw[k], h[k], c[k], r)):
                assert got.shape == (2, batch, hidden)
                np.testing.assert_array_equal(got[k], want, err_msg=name)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_step_writes_its_new_h_into_out_or_declines(cell, dtype, rng):
    """Given out= (a slot of an emitted output: strided, as an output stacked on axis 1 has it),
    every candidate step writes h' there and returns that array itself, equal to what it returns
    without one, writing nothing beside the slot; with a state of another type than the gates it
    declines, returning a fresh h' (which the engine copies)."""
    from cyloop.kernels.recurrent.cells import gru_step, lstm_step, rnn_step

    hidden, batch, gates = 6, 3, {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    r = (rng.standard_normal((gates * hidden, hidden)) * 0.5).astype(dtype)
    r.flags.writeable = False
    xw = rng.standard_normal((batch, gates * hidden)).astype(dtype)
    h, c = (rng.standard_normal((batch, hidden)).astype(dtype) for _ in range(2))
    b = rng.standard_normal(4 * hidden).astype(dtype)
    step = {"lstm": lstm_step, "gru": gru_step, "rnn": rnn_step}[cell]({})
    args = {"lstm": (xw, h, c, r), "gru": (xw, h, r, b), "rnn": (xw, h, r)}[cell]

    def first(result):
        return result[0] if cell == "lstm" else result

    for name, fn in step.candidates.items():
        want = first(fn(*args))
        output = np.full((batch, 5, hidden), np.nan, dtype)  # [B, T, H], slot 2 is [B, H]
        slot = output[:, 2]
        got = fn(*args, slot)
        assert first(got) is slot, name
        np.testing.assert_array_equal(slot, want, err_msg=name)
        assert np.isnan(np.delete(output, 2, axis=1)).all(), name
        # A float16 state with gates of `dtype`: h' is float16, rounded from the gates' type.
        narrow = tuple(a.astype(np.float16) if a is h or a is c else a for a in args)
        want = first(fn(*narrow))
        assert want.dtype == np.float16
        slot = np.full((batch, hidden), np.nan, np.float16)
        declined = first(fn(*narrow, slot))
        assert declined is not slot and np.isnan(slot).all(), name
        np.testing.assert_array_equal(declined, want, err_msg=name)


@pytest.mark.parametrize("x_type,w_type", [("float32", "float32"), ("float64", "float64"),
                                           ("float16", "float16"), ("float64", "float32")])
def test_the_projection_adds_its_bias_in_the_gemm_or_after(x_type, w_type, rng):
    """X W^T + B, the bias inside the GEMM (a column of ones, operands of one float type) or
    added after it (mixed types), with leading dims, against numpy in float64; an LSTM's rows
    come out arranged (f, i, o, c; the sigmoid rows halved)."""
    from cyloop.kernels.recurrent.cells import projection_for

    x = rng.standard_normal((3, 2, 5)).astype(x_type)
    w, b = (rng.standard_normal(shape).astype(w_type) for shape in ((8, 5), (8,)))
    want = x.astype(np.float64) @ w.T.astype(np.float64) + b
    tolerance = {"float16": 1e-2, "float32": 1e-5, "float64": 1e-12}[w_type]
    got = projection_for("RNNCellRecurrence", {})(x, w, b)
    assert got.shape == (3, 2, 8) and got.dtype == np.result_type(x, w)
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    f, i, c, o = np.split(want, 4, axis=-1)
    arranged = projection_for("LSTMCellRecurrence", {})(x, w, b)
    np.testing.assert_allclose(arranged, np.concatenate([f / 2, i / 2, o / 2, c], axis=-1),
                               rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape", [(3, 2, 5), (4, 5), (1, 5)], ids=["3-D", "2-D", "one row"])
@pytest.mark.parametrize("layout", ["C", "strided"])
def test_a_settled_projection_makes_its_rows_and_product_in_one_call(dtype, x_shape, layout,
                                                                    rng, monkeypatch):
    """Once the projection's product settles on `rows` (here fixed), a call of the shape of the
    call before makes the rows of ones and the product in one native call, with the values
    of the rows' np.matmul bit for bit; one row (a matrix-vector product in numpy) is left to
    numpy."""
    from cyloop.abilities import abilities_of
    from cyloop.accel import _two_core, gemm
    from cyloop.kernels.recurrent import cells

    if gemm.blas_status() is not None:
        pytest.skip(gemm.blas_status())
    calls = []
    monkeypatch.setattr(cells, "ones_product",
                        lambda *args: calls.append(1) or _two_core.ones_product(*args))
    project = cells.projection_for("RNNCellRecurrence", {})
    abilities_of(project).measured.fix("rows")
    base = rng.standard_normal(x_shape[:-1] + (2 * x_shape[-1],)).astype(dtype)
    x = base[..., ::2] if layout == "strided" else base[..., :x_shape[-1]]
    w, b = (np.ascontiguousarray(rng.standard_normal(shape).astype(dtype))
            for shape in ((8, x_shape[-1]), (8,)))
    w.flags.writeable = b.flags.writeable = False
    rows = np.concatenate([x, np.ones(x.shape[:-1] + (1,), dtype)], axis=-1).reshape(-1, 6)
    want = np.matmul(rows, np.ascontiguousarray(np.concatenate([w, b[:, None]], axis=1).T))
    for _ in range(3):
        got = project(x, w, b)
        assert got.shape == x.shape[:-1] + (8,) and got.flags.c_contiguous
        assert got.tobytes() == want.tobytes()
    assert len(calls) == (0 if x.size == x.shape[-1] else 2)


def test_ones_product_declines_what_numpy_would_not_multiply_by_one_gemm(rng):
    from cyloop.accel import _two_core, gemm

    if gemm.blas_status() is not None:
        pytest.skip(gemm.blas_status())
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((4, 5)).astype(np.float32)
    assert _two_core.ones_product(x, w) is not None
    for args in ((x[:1], w), (x, w[:, :1]), (x, w[:3]), (x, w.astype(np.float64)),
                 (x.astype(np.float16), w), (x[0], w), (x, np.asfortranarray(w)), (x, [1.0])):
        assert _two_core.ones_product(*args) is None
