"""A loop whose body is one recurrent step (OpenVINO's LSTMCell, GRUCell or RNNCell; an ONNX Loop
spelling an LSTM cell or a plain RNN, fused, and the IR convert_model writes for one) runs a
hoisted chunk's iterations in one call of its kernel's steps (engine/destinations.py
`plan_steps`, cyloop/abilities.py `Recurrence`). The oracles: the same driver with the steps turned
off, calling the step once an iteration (value for value the same), and the reference driver.
Limits, progress and the plan hold as for any loop; loops the steps do not fit run an iteration
at a time."""

import numpy as np
import openvino as ov
import openvino.opset8 as ops
import pytest
from onnx import numpy_helper

import cyloop
from cyloop.accel import fused
from cyloop.accel.gemm import blas_candidate, helper_candidate, two_cores_here
from cyloop.accel.measured import Measured
from cyloop.engine import compile as compiling
from cyloop.errors import LoopLimitError
from cyloop.kernels.recurrent import cells

from ..support import native
from ..support.loops import cell_loop_feeds, lstm_loop, rnn_loop_feeds, rnn_loop_model
from ..support.onnx_models import model, tensor
from ..support.openvino_models import cell_ti_model, converted, i64_constant, save
from ..support.plans import loop_plan, measured_steps, placements

# Where a loop's products may run, each candidate named by the cores it takes here: numpy's
# BLAS (its own threads), or in pieces on this thread and the helper.
BY_BLAS = blas_candidate()
BY_HELPER = helper_candidate()


pytestmark = native.steps

# The candidates of the cells' steps that have `steps`: an LSTM's blocked gates, an RNN's
# batch-major ones.
STEPPED = ("blocked gates", "batch-major gates")
CORES = [BY_BLAS, BY_HELPER] if two_cores_here() else [None]


def _openvino_lstm(tmp_path, rng, steps, hidden=32, batch=4):
    ov_model, _ = cell_ti_model("lstm", steps=steps, batch=batch, features=8, hidden=hidden,
                                scale=0.25)
    feeds = {"X": rng.standard_normal((batch, steps, 8)).astype(np.float32),
             "H0": rng.standard_normal((batch, hidden)).astype(np.float32),
             "C0": rng.standard_normal((batch, hidden)).astype(np.float32)}
    return save(ov_model, tmp_path / "lstm.xml"), feeds


def _onnx_lstm(tmp_path, rng, steps, hidden=32, batch=4, leak=None):
    onnx_model, state, gates = lstm_loop(hidden=hidden, leak=leak)
    feeds = cell_loop_feeds(rng, state, gates, steps=steps, batch=batch, features=8)
    for name in ("W", "R"):
        feeds[name] *= 0.25
    return onnx_model, feeds


def _onnx_rnn(tmp_path, rng, steps, hidden=64, batch=16):
    """h = tanh(x_t W + h R + B), fused into one ProductPlusTanh: its steps run where its
    product runs on two cores ([16, 64] @ [64, 64]: enough multiply-adds to split)."""
    feeds = rnn_loop_feeds(rng, hidden=hidden, steps=steps, batch=batch, features=8)
    for name in ("W", "R"):
        feeds[name] *= 0.125
    return rnn_loop_model(), feeds


def _openvino_rnn(tmp_path, rng, steps, hidden=64, batch=16, features=8):
    """h = tanh(x_t W + h R + B) in a TensorIterator as OpenVINO's ops spell it (MatMul, Add,
    Tanh; as `convert_model` writes W2), every h emitted on axis 1 ([B, T, H]: a strided slot),
    fused into one ProductPlusTanh."""
    f = np.float32
    w = (rng.standard_normal((features, hidden)) * 0.3).astype(f)
    r = (rng.standard_normal((hidden, hidden)) * 0.125).astype(f)
    b = rng.standard_normal(hidden).astype(f)
    x = ops.parameter([batch, steps, features], f, name="X")
    h0 = ops.parameter([batch, hidden], f, name="H0")
    xt = ops.parameter([batch, 1, features], f, name="xt")
    h = ops.parameter([batch, hidden], f, name="h")
    xw = ops.matmul(ops.squeeze(xt, i64_constant([1])), ops.constant(w), False, False)
    h_next = ops.tanh(ops.add(ops.add(xw, ops.matmul(h, ops.constant(r), False, False)),
                              ops.constant(b)))
    res_h, res_y = ops.result(h_next), ops.result(ops.unsqueeze(h_next, i64_constant([1])))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([res_h, res_y], [xt, h], "body"))
    ti.set_sliced_input(xt, x.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(h, h0.output(0), res_h.output(0))
    outputs = [ti.get_iter_value(res_h.output(0), -1),
               ti.get_concatenated_slices(res_y.output(0), 0, 1, 1, -1, 1)]
    feeds = {"X": rng.standard_normal((batch, steps, features)).astype(f),
             "H0": rng.standard_normal((batch, hidden)).astype(f)}
    return save(ov.Model(outputs, [x, h0], "rnn_ti"), tmp_path / "rnn.xml"), feeds


def _openvino_rnn_cell(tmp_path, rng, steps, hidden=64, batch=16):
    """OpenVINO's RNNCell in a TensorIterator, h emitted on axis 1: its recurrence's steps run
    on one core or two (`product_tanh`'s job, whichever; [16, 64] @ [64, 64]: enough to
    split)."""
    ov_model, _ = cell_ti_model("rnn", steps=steps, batch=batch, features=8, hidden=hidden,
                                scale=0.1)  # (R's spectral radius about 0.8: rounding dies out)
    feeds = {"X": rng.standard_normal((batch, steps, 8)).astype(np.float32),
             "H0": rng.standard_normal((batch, hidden)).astype(np.float32)}
    return save(ov_model, tmp_path / "rnn_cell.xml"), feeds


def _openvino_gru_cell(tmp_path, rng, steps, hidden=64, batch=16, **attrs):
    """OpenVINO's GRUCell in a TensorIterator, h emitted on axis 1 (`attrs`, say
    linear_before_reset, are the cell's): its steps run on one core or two ([16, 64] with
    [64, 192] and [64, 64] products: enough to split)."""
    ov_model, _ = cell_ti_model("gru", steps=steps, batch=batch, features=8, hidden=hidden,
                                scale=0.1, **attrs)
    feeds = {"X": rng.standard_normal((batch, steps, 8)).astype(np.float32),
             "H0": rng.standard_normal((batch, hidden)).astype(np.float32)}
    return save(ov_model, tmp_path / "gru_cell.xml"), feeds


def _converted_lstm(tmp_path, rng, steps, hidden=32, batch=4):
    """`_onnx_lstm` as the IR openvino.convert_model writes for it: a Loop whose body's
    condition is a constant true (the ONNX body passes its condition through)."""
    onnx_model, feeds = _onnx_lstm(tmp_path, rng, steps, hidden, batch)
    return converted(onnx_model, feeds, tmp_path / "lstm.xml"), feeds


LOOPS = {"openvino-lstm": _openvino_lstm, "onnx-lstm-fused": _onnx_lstm, "onnx-rnn": _onnx_rnn,
         "openvino-rnn": _openvino_rnn, "openvino-rnn-cell": _openvino_rnn_cell,
         "openvino-gru-cell": _openvino_gru_cell,
         "openvino-gru-cell-linear": lambda *args: _openvino_gru_cell(*args,
                                                                      linear_before_reset=True),
         "converted-lstm": _converted_lstm}
# The cores each loop's steps run on (a plain RNN fused from its ops: where its product runs on
# two).
STEPPING = {name: [c for c in CORES if name not in ("onnx-rnn", "openvino-rnn") or c == BY_HELPER]
            for name in LOOPS}
CASES = [(name, cores) for name in LOOPS for cores in STEPPING[name]]


def _loaded(source, cores, **options):
    """The model, its step fixed on the candidate that has steps, and its cores fixed."""
    model = cyloop.load(source, driver="cython", **options)
    for measured in measured_steps(model):
        stepped = [name for name in STEPPED if name in measured.candidates]
        if stepped:
            measured.fix(stepped[0])
    (loop,) = model._compiled.loops
    if cores is not None and loop.products is not None:
        loop.products.fix(cores)
    return model


def _counters(model):
    (counters,) = model.counters().values()
    return counters


def _spied(monkeypatch, name, answer=None):
    """Each call of `name`'s steps kernel, in a list: (its flag `staged`, its steps); `answer`, if
    given, replaces the kernel (say, declining every call)."""
    module, kernel = (cells, "lstm_product_steps") if "lstm" in name else \
        (cells, "gru_product_steps") if "gru" in name else \
        (cells, "product_tanh_steps") if name == "openvino-rnn-cell" else \
        (fused, "product_tanh_steps")
    real = getattr(module, kernel) if answer is None else answer
    at = 3 if "gru" in name else 2  # (xs: after h and the weights)
    calls = []

    def spy(*args):
        calls.append((args[-1], len(args[at])))
        return real(*args)

    monkeypatch.setattr(module, kernel, spy)
    return calls


def _assert_as_one_at_a_time(got, source, feeds, no_steps, load):
    """Each of the runs `got` is value for value what the model makes with the steps off (an
    iteration at a time, `load`ed after `no_steps`), and the reference driver's to rounding."""
    want = cyloop.load(source, driver="python").run(feeds)
    no_steps()
    oracle = load()
    same = oracle.run(feeds)
    assert _counters(oracle)["step_calls"] == 0
    for key in want:
        for run in got:
            np.testing.assert_array_equal(run[key], same[key], err_msg=key)
            np.testing.assert_allclose(run[key], want[key], rtol=2e-5, atol=2e-5, err_msg=key)


@pytest.fixture
def no_steps(monkeypatch):
    """The steps turned off for models loaded from now on: every iteration calls the step
    once (the oracle)."""
    def off():
        monkeypatch.setattr(compiling, "plan_steps", lambda *args: None)
    return off


@pytest.mark.parametrize("name, cores", CASES)
@pytest.mark.parametrize("steps", [3, 70])
def test_steps_make_what_an_iteration_at_a_time_makes(name, steps, cores, tmp_path, rng,
                                                      no_steps):
    """Over several hoisted chunks (70 iterations: the first chunk has 16 rows), and over as
    few as three iterations (two of them in a call of the steps, the fewest it runs), on one
    core and two."""
    source, feeds = LOOPS[name](tmp_path, rng, steps)
    model = _loaded(source, cores)
    got = [model.run(feeds) for _ in range(2)]
    counters = _counters(model)
    # Iteration 0 sizes the outputs; the rest, bar a chunk's last row left alone, are steps.
    assert counters["step_calls"] >= 2
    assert 2 * (steps - 1) - counters["stepped_iterations"] <= 2 * (steps // 16)
    _assert_as_one_at_a_time(got, source, feeds, no_steps, lambda: _loaded(source, cores))


@pytest.mark.parametrize("name, cores", CASES)
def test_the_plan_shows_the_iterations_run_many_at_a_time(name, cores, tmp_path, rng):
    source, feeds = LOOPS[name](tmp_path, rng, 40)
    model = _loaded(source, cores)
    assert loop_plan(model).steps is not None
    model.run(feeds)
    calls, stepped = (_counters(model)[k] for k in ("step_calls", "stepped_iterations"))
    steps = loop_plan(model).steps
    assert (steps.iterations, steps.total, steps.calls) == (stepped, 40, calls)


@pytest.mark.parametrize("where", ["in its slot", "a ping-pong pool, copied into its slot"])
@pytest.mark.parametrize("name, cores", [(name, cores) for name, cores in CASES
                                         if name.startswith("openvino")])
def test_where_a_strided_state_lives_holds_within_a_call(name, cores, where, tmp_path, rng,
                                                         no_steps, monkeypatch):
    """A TensorIterator's h, carried and emitted on axis 1 ([B, T, H]: its slot's rows far
    apart), lives in its slot or in a pool it is copied from (a measured choice,
    test_products_on_cores.py); within a call of the steps, the next step reads it there, or from a
    contiguous buffer each step makes it in ("staged"), copied into its slot (counted as
    copies). Either way the values of an iteration at a time."""
    source, feeds = LOOPS[name](tmp_path, rng, 40)
    calls = _spied(monkeypatch, name)

    def placed(model):
        (placement,) = placements(model)
        placement.fix(where)
        (loop,) = model._compiled.loops
        if loop.steps_placement is not None:  # (within a call: staged or not)
            loop.steps_placement.fix(where)
        return model

    model = placed(_loaded(source, cores))
    got = model.run(feeds)
    counters = _counters(model)
    assert counters["step_calls"] >= 2
    assert {staged for staged, _ in calls} == {where != "in its slot"}
    # (Iteration 0 aside, each step's h' is written in its slot or copied there: one or other.)
    assert counters["in_place_writes" if where == "in its slot" else "copies"] >= \
        counters["stepped_iterations"]
    no_steps()
    want = placed(_loaded(source, cores)).run(feeds)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


@pytest.mark.parametrize("name, cores", [(name, cores) for name, cores in CASES
                                         if name.startswith("openvino")])
def test_where_the_steps_state_lives_is_measured_a_call_at_a_time(name, cores, tmp_path, rng,
                                                                  no_steps, monkeypatch):
    """Where a strided state the steps carry lives within a call of them is timed call by
    call (staged or not, in turn), not run by run: in one run of many calls each placement has
    its rounds, and the run-level choice is not timed. The chunk sizes are fixed here, as no
    call a chunk-size trial times is a placement's sample."""
    source, feeds = LOOPS[name](tmp_path, rng, 400)
    calls = _spied(monkeypatch, name)
    model = _loaded(source, cores, tune="at once")
    (loop,) = model._compiled.loops
    loop.hoist.sizing.fix("128 KiB")
    (by_runs,) = placements(model)
    got = model.run(feeds)
    assert {staged for staged, _ in calls} == {True, False}
    counters = _counters(model)  # (a staged call's steps are copies, the others' writes in place)
    assert counters["copies"] >= sum(steps for staged, steps in calls if staged)
    assert counters["in_place_writes"] >= sum(steps for staged, steps in calls if not staged)
    (trial,) = loop.steps_placement.trials.values()
    assert trial.choice is not None
    assert sorted(map(len, trial.samples.values())) == [2, 2]  # (a run-level trial's: one a run)
    assert not by_runs.trials
    plan = loop_plan(model)
    assert any(a.how == "measured slot or pool" and a.per_steps_call for a in plan.aliasing)
    (within,) = plan.choices_of("placement in steps")
    assert within.chosen == trial.choice and within.fixed is None, plan
    no_steps()
    want = _loaded(source, cores).run(feeds)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_no_call_a_chunk_size_trial_times_is_a_placement_sample(tmp_path, rng):
    """One trial at a time: while a chunk's time is a sample of the chunk sizes' trial, no call
    of the steps inside it is a sample of where their state lives."""
    source, feeds = LOOPS["openvino-lstm"](tmp_path, rng, 1000)
    model = _loaded(source, CORES[0], tune="at once")
    (loop,) = model._compiled.loops
    placement = loop.steps_placement
    during, report = [], placement.report

    def spy(*args):
        during.append(loop.hoist.sizes_on_trial())
        report(*args)

    placement.report = spy
    for _ in range(10):
        model.run(feeds)
    assert loop.hoist.sizing.trials and all(t.choice for t in loop.hoist.sizing.trials.values())
    assert during and not any(during)


@pytest.mark.parametrize("why", ["they decline", "the step kept has none"])
def test_the_state_of_steps_that_never_run_is_placed_by_runs(why, tmp_path, rng, monkeypatch):
    """Steps that never run (they decline the operands, or the candidate the step's trial kept
    has no steps) time no placement within a call: after a run without a call of them, where
    the state lives is measured a run at a time, as without steps (two runs each)."""
    source, feeds = LOOPS["openvino-lstm"](tmp_path, rng, 40)
    asked = _spied(monkeypatch, "openvino-lstm",
                   answer=(lambda *args: None) if why == "they decline" else None)
    model = _loaded(source, CORES[0], tune="at once")
    if why != "they decline":
        for measured in measured_steps(model):
            measured.fix("batch-major gates")
    (loop,) = model._compiled.loops
    (by_runs,) = placements(model)
    for _ in range(5):  # (the first expects the steps to run: it is not a sample)
        model.run(feeds)
    assert len(asked) == (5 if why == "they decline" else 0)  # (declined: once a run)
    (trial,) = by_runs.trials.values()
    assert trial.choice is not None
    assert sorted(map(len, trial.samples.values())) == [2, 2]
    assert not any(s for t in loop.steps_placement.trials.values() for s in t.samples.values())
    assert _counters(model)["step_calls"] == 0


def test_a_run_the_steps_ran_in_is_no_sample_of_the_run_level_placement(tmp_path, rng,
                                                                        monkeypatch):
    """A run after one without a call of the steps times the run-level placement; if the steps
    run in it after all, its time is theirs, and no sample of it."""
    source, feeds = LOOPS["openvino-lstm"](tmp_path, rng, 40)
    real, runs = cells.lstm_product_steps, []
    monkeypatch.setattr(cells, "lstm_product_steps",  # (declines in the first run only)
                        lambda *args: None if len(runs) == 0 else real(*args))
    model = _loaded(source, CORES[0])
    (by_runs,) = placements(model)
    for _ in range(3):
        model.run(feeds)
        runs.append(1)
    assert _counters(model)["step_calls"] > 0
    assert not any(s for t in by_runs.trials.values() for s in t.samples.values())


def test_runs_after_runs_of_steps_take_the_choice_within_a_call(tmp_path, rng):
    """Once the steps have run, a run's own iterations (iteration 0, a chunk's last) put the
    state where the calls' choice does, untimed."""
    source, feeds = LOOPS["openvino-lstm"](tmp_path, rng, 40)
    model = _loaded(source, CORES[0])
    (loop,) = model._compiled.loops
    loop.steps_placement.fix("a ping-pong pool, copied into its slot")
    for _ in range(6):
        model.run(feeds)
    (by_runs,) = placements(model)
    assert not by_runs.trials
    # Every h' is copied into its slot: the steps' (staged) and the others' (from the pool).
    counters = _counters(model)
    assert 0 < counters["stepped_iterations"] < counters["copies"] == 6 * 40


@pytest.mark.parametrize("limit", [20, 21, 39])
def test_max_iterations_stops_at_the_same_iteration(limit, tmp_path, rng, no_steps):
    """A limit passed within what a call of the steps would run (the trip count an input the
    loop learns at run time, read with the condition: an ONNX Loop's): the same error, at the
    same iteration, as an iteration at a time."""
    source, feeds = _onnx_lstm(tmp_path, rng, 40)
    model = _loaded(source, CORES[0], max_iterations=limit)
    with pytest.raises(LoopLimitError) as stepped:
        model.run(feeds)
    assert _counters(model)["step_calls"] >= 1
    no_steps()
    oracle = _loaded(source, CORES[0], max_iterations=limit)
    with pytest.raises(LoopLimitError) as alone:
        oracle.run(feeds)
    assert str(stepped.value) == str(alone.value)
    assert f"iteration {limit} would pass max_iterations={limit}" in str(alone.value)


def test_progress_hears_of_every_1024_iterations_and_the_end(tmp_path, rng, no_steps):
    """Reported as an iteration at a time reports it: a call of the steps ends at a multiple of
    1024 (a chunk here holds 2048 rows)."""
    def heard(model_source, feeds):
        calls = []
        model = _loaded(model_source, CORES[0],
                        progress=lambda label, done, total, end: calls.append((done, total, end)))
        model.run(feeds)
        return calls, _counters(model)["step_calls"]

    source, feeds = _onnx_lstm(tmp_path, rng, 2100, hidden=8, batch=2)
    calls, step_calls = heard(source, feeds)
    assert step_calls > 0
    no_steps()
    want, _ = heard(source, feeds)
    assert calls == want == [(1024, 2100, False), (2048, 2100, False), (2100, 2100, True)]


@pytest.mark.parametrize("case", ["c emitted too", "a GRU cell with clip", "steps fixed off"])
def test_loops_the_steps_do_not_fit_run_an_iteration_at_a_time(case, tmp_path, rng):
    """A body that also emits c (so its step is not all it does), a GRU step with a clip (its
    candidates have no steps), and an LSTM step on its candidate that has none: no call of
    steps, the reference's values."""
    if case == "c emitted too":
        source, feeds = _onnx_lstm(tmp_path, rng, 40, leak="c_out")
    elif case == "a GRU cell with clip":
        source, feeds = _openvino_gru_cell(tmp_path, rng, 40, hidden=32, batch=4, clip=2.0)
    else:
        source, feeds = _openvino_lstm(tmp_path, rng, 40)
    model = cyloop.load(source, driver="cython")
    for measured in measured_steps(model):
        measured.fix("batch-major gates" if case == "steps fixed off" else None)
    got = model.run(feeds)
    assert _counters(model)["step_calls"] == 0
    assert (loop_plan(model).steps is not None) == (case == "steps fixed off")
    want = cyloop.load(source, driver="python").run(feeds)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=2e-5, atol=2e-5, err_msg=key)


def test_a_step_settled_on_a_formulation_without_steps_is_asked_once_a_run(tmp_path, rng,
                                                                            monkeypatch):
    """Its answer holds for the run (its operands' kinds and cores do): no question an
    iteration."""
    source, feeds = _openvino_lstm(tmp_path, rng, 40)
    # (counted from the load on: the step declares its `steps_for` as it is built)
    asked, real = [], Measured.steps_for
    monkeypatch.setattr(Measured, "steps_for",
                        lambda self, *args: asked.append(1) or real(self, *args))
    model = cyloop.load(source, driver="cython")
    (measured,) = measured_steps(model)
    measured.fix("batch-major gates")
    assert not asked
    for _ in range(2):
        model.run(feeds)
    assert len(asked) == 2 and _counters(model)["step_calls"] == 0


def test_with_a_time_limit_the_clock_is_still_read_between_calls(tmp_path, rng):
    """A call of the steps runs no further than the run's next clock read (`RunLimits`: every
    iteration at first, further apart while reads come quickly), so a time limit is checked as
    often as an iteration at a time checks it: the first run makes more, shorter calls than
    without one, and the same values."""
    source, feeds = _onnx_lstm(tmp_path, rng, 70)
    free, timed = _loaded(source, CORES[0]), _loaded(source, CORES[0], time_limit=1000.0)
    want, got = free.run(feeds), timed.run(feeds)
    assert _counters(timed)["step_calls"] > _counters(free)["step_calls"] >= 2
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


@pytest.mark.parametrize("x", ["a row per batch row", "one row for all"])
def test_an_output_growing_mid_loop_grows_between_calls(x, tmp_path, rng, no_steps):
    """An output of unknown length (an ONNX Loop stops when its condition says so) past
    FIRST_GROWING_BYTES (1100 slots of [2050, 8] float32) grows an iteration at a time: a call
    of the steps stops at the buffer's last slot. Where the steps decline
    every call (x one row for all, [4H]: three axes wanted), each iteration writes its own
    slot, in the buffer as grown."""
    source, feeds = _onnx_lstm(tmp_path, rng, 1100, hidden=8, batch=2050)
    if x == "one row for all":
        feeds["X"] = np.ascontiguousarray(feeds["X"][:, 0])
        del source.graph.input[1].type.tensor_type.shape.dim[1]  # X [T, N, F] -> [T, F]
    model = _loaded(source, CORES[0])
    got = model.run(feeds)
    counters = _counters(model)
    assert counters["growth_bytes_copied"] > 0
    assert (counters["step_calls"] > 0) == (x == "a row per batch row")
    no_steps()
    want = _loaded(source, CORES[0]).run(feeds)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_a_carried_value_read_where_the_step_wants_one_that_stays_put_is_no_steps(tmp_path,
                                                                                 rng):
    """An LSTMCell whose recurrent weight R is its own state h (batch 4H, so the shapes fit):
    a call of the steps would keep iteration i's R for all its steps. No steps; the
    reference's values."""
    hidden, steps = 4, 40
    batch = 4 * hidden
    f = np.float32
    w = (rng.standard_normal((4 * hidden, 8)) * 0.25).astype(f)
    b = rng.standard_normal(4 * hidden).astype(f)
    x = ops.parameter([batch, steps, 8], f, name="X")
    h0, c0 = (ops.parameter([batch, hidden], f, name=n) for n in ("H0", "C0"))
    xt = ops.parameter([batch, 1, 8], f, name="xt")
    h, c = (ops.parameter([batch, hidden], f, name=n) for n in ("h", "c"))
    cell = ops.lstm_cell(ops.squeeze(xt, i64_constant([1])), h, c, ops.constant(w), h,
                         ops.constant(b), hidden)
    res_h, res_c = ops.result(cell.output(0)), ops.result(cell.output(1))
    res_y = ops.result(ops.unsqueeze(cell.output(0), i64_constant([1])))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([res_h, res_y, res_c], [xt, h, c], "body"))
    ti.set_sliced_input(xt, x.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(h, h0.output(0), res_h.output(0))
    ti.set_merged_input(c, c0.output(0), res_c.output(0))
    outputs = [ti.get_iter_value(res_h.output(0), -1),
               ti.get_concatenated_slices(res_y.output(0), 0, 1, 1, -1, 1),
               ti.get_iter_value(res_c.output(0), -1)]
    source = save(ov.Model(outputs, [x, h0, c0], "r_is_h"), tmp_path / "r_is_h.xml")
    feeds = {"X": rng.standard_normal((batch, steps, 8)).astype(f),
             "H0": (rng.standard_normal((batch, hidden)) * 0.3).astype(f),
             "C0": rng.standard_normal((batch, hidden)).astype(f)}
    model = _loaded(source, CORES[0])
    got = model.run(feeds)
    assert _counters(model)["step_calls"] == 0
    assert loop_plan(model).steps is None
    want = cyloop.load(source, driver="python").run(feeds)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=2e-5, atol=2e-5, err_msg=key)


@pytest.mark.parametrize("value", [True, False])
def test_a_constant_condition_true_lets_the_steps_run(value, tmp_path, rng):
    """A body whose condition is a constant (as in the IR convert_model writes for an ONNX body
    passing its condition through): true, the loop's iterations run many at a time; false, the
    loop stops after iteration 0. The reference's values."""
    source, feeds = _onnx_lstm(tmp_path, rng, 40)
    body = source.graph.node[-1].attribute[0].g
    (k,) = [k for k, node in enumerate(body.node) if node.output[0] == "cond_out"]
    del body.node[k]
    body.initializer.append(numpy_helper.from_array(np.array(value), "cond_out"))
    model = _loaded(source, CORES[0])
    got = model.run(feeds)
    assert (_counters(model)["step_calls"] > 0) == value
    assert got["hs"].shape[0] == (40 if value else 1)
    want = cyloop.load(source, driver="python").run(feeds)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=2e-5, atol=2e-5, err_msg=key)


def test_steps_that_decline_are_not_asked_again_in_the_run(tmp_path, rng, monkeypatch):
    """x one row for all ([4H]: the steps want three axes) declines the first call of a run;
    its other iterations run alone without asking again (no Python per iteration for nothing)."""
    source, feeds = _onnx_lstm(tmp_path, rng, 40)
    feeds["X"] = np.ascontiguousarray(feeds["X"][:, 0])
    del source.graph.input[1].type.tensor_type.shape.dim[1]  # X [T, N, F] -> [T, F]
    calls = []
    real = fused.lstm_product_steps

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(fused, "lstm_product_steps", spy)
    model = _loaded(source, CORES[0])
    got = model.run(feeds)
    assert len(calls) == 1 and _counters(model)["step_calls"] == 0
    want = cyloop.load(source, driver="python").run(feeds)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=2e-5, atol=2e-5, err_msg=key)


def _counted_rnn(steps, stop, batch=16, hidden=64, features=8, rng=None):
    """The plain RNN of `rnn_loop_model` as tf2onnx writes a Keras loop: a counter carried from
    a constant 0 (x_t gathered by it, c' = c + 1 returned), the condition c' < `stop` computed
    in the body, T = `steps` iterations at most. The hoisted part makes the counter's rows and
    the condition's; the step reads neither."""
    from onnx import helper

    node = helper.make_node
    body = helper.make_graph(
        [node("Gather", ["X", "c_in"], ["x_t"], axis=0), node("MatMul", ["x_t", "W"], ["xw"]),
         node("MatMul", ["h_in", "R"], ["hr"]), node("Add", ["xw", "hr"], ["s"]),
         node("Add", ["s", "B"], ["pre"]), node("Tanh", ["pre"], ["h_out"]),
         node("Identity", ["h_out"], ["y"]), node("Add", ["c_in", "one"], ["c_out"]),
         node("Less", ["c_out", "N"], ["cond_out"])],
        "body", [tensor("i", np.int64, []), tensor("cond_in", np.bool_, []),
                 tensor("c_in", np.int64, []), tensor("h_in", np.float32, None)],
        [tensor("cond_out", np.bool_, []), tensor("c_out", np.int64, []),
         tensor("h_out", np.float32, None), tensor("y", np.float32, None)],
        [numpy_helper.from_array(np.array(1, np.int64), "one")])
    graph = helper.make_graph(
        [node("Loop", ["T", "", "c0", "h0"], ["c_last", "h_last", "hs"], body=body)], "rnn",
        [tensor("T", np.int64, []), tensor("N", np.int64, []), tensor("X", np.float32, None),
         tensor("W", np.float32, None), tensor("R", np.float32, None),
         tensor("B", np.float32, None), tensor("h0", np.float32, None)],
        [tensor("c_last", np.int64, []), tensor("h_last", np.float32, None),
         tensor("hs", np.float32, None)], [numpy_helper.from_array(np.array(0, np.int64), "c0")])
    feeds = rnn_loop_feeds(rng, hidden=hidden, steps=steps, batch=batch, features=features)
    for name in ("W", "R"):
        feeds[name] *= 0.125
    feeds["N"] = np.array(stop, np.int64)
    return model(graph, 13), feeds


def _rows_stepped(source, **options):
    """The model with its fused step kept on the formulation whose steps run on one core (or
    two, where the products run there) and its products on BLAS's threads."""
    model = cyloop.load(source, driver="cython", **options)
    for measured in measured_steps(model):
        if "rows" in measured.candidates:
            measured.fix("rows")
    (loop,) = model._compiled.loops
    if loop.products is not None:
        loop.products.fix(BY_BLAS)
    return model


@pytest.mark.parametrize("steps, stop", [(70, 100), (70, 37), (70, 16), (70, 17), (70, 2),
                                         (70, 1), (70, 0), (3, 3)])
def test_a_counted_loop_with_its_condition_hoisted_runs_in_steps(steps, stop, rng, no_steps):
    """tf2onnx's loops (a counter carried and returned, the condition c' < n made of it): the
    counter's and the condition's rows are hoisted, so the iterations run many at a time, each
    call no further than the condition's rows say true; the loop stops where an iteration at a
    time stops it (within a call of the steps, at a chunk's end, after iteration 0), the counter
    and h its last iteration's. Value for value what an iteration at a time makes; the
    reference driver's values."""
    source, feeds = _counted_rnn(steps, stop, rng=rng)
    model = _rows_stepped(source)
    assert loop_plan(model).steps is not None
    got = [model.run(feeds) for _ in range(2)]
    ran = max(1, min(steps, stop))
    assert got[0]["hs"].shape[0] == ran and int(got[0]["c_last"]) == ran
    if ran > 2:
        assert _counters(model)["stepped_iterations"] > 0
    _assert_as_one_at_a_time(got, source, feeds, no_steps, lambda: _rows_stepped(source))
