"""LSTMSequence-5 / GRUSequence-5 / RNNSequence-5: every direction, with and without sequence
lengths, each measured formulation forced, against the cell equations run per batch element in
numpy (an oracle written from the spec) and against OpenVINO's plugin; and the IR
`openvino.convert_model` writes for ONNX's LSTM / GRU / RNN nodes, against onnxruntime."""

import time

import numpy as np
import openvino as ov
import openvino.opset8 as ops
import pytest
from onnx import helper

import cyloop
from cyloop.abilities import abilities_of
from cyloop.accel import _two_core
from cyloop.accel import measured as _measured
from cyloop.accel.gemm import (
    blas_candidate,
    helper_candidate,
    set_products_on_two_cores,
    two_cores_here,
)
from cyloop.kernels.recurrent.sequences import sequence_layer
from cyloop.peers import openvino_compiled

from ...support import native
from ...support.cells import numpy_cells, steps_spy
from ...support.onnx_models import model as onnx_model
from ...support.onnx_models import tensor
from ...support.openvino_models import save

# Where a loop's products may run, each candidate named by the cores it takes here: numpy's
# BLAS (its own threads), or in pieces on this thread and the helper.
BY_BLAS = blas_candidate()
BY_HELPER = helper_candidate()


_GATES = {"lstm": 4, "gru": 3, "rnn": 1}


def _sequence_model(cell, direction, attrs, batch=3, steps=6, features=5, hidden=4, seed=0):
    rng = np.random.default_rng(seed)
    directions = 2 if direction == "bidirectional" else 1
    gates = _GATES[cell]
    f = np.float32
    bias_blocks = gates + (1 if attrs.get("linear_before_reset") else 0)
    weights = {"W": (rng.standard_normal((directions, gates * hidden, features)) * 0.5).astype(f),
               "R": (rng.standard_normal((directions, gates * hidden, hidden)) * 0.5).astype(f),
               "B": rng.standard_normal((directions, bias_blocks * hidden)).astype(f)}
    x = ops.parameter([batch, steps, features], f, name="X")
    h0 = ops.parameter([batch, directions, hidden], f, name="H0")
    lengths = ops.parameter([batch], np.int32, name="L")
    w, r, b = (ops.constant(weights[k]) for k in ("W", "R", "B"))
    params = [x, h0]
    if cell == "lstm":
        c0 = ops.parameter([batch, directions, hidden], f, name="C0")
        params.append(c0)
        node = ops.lstm_sequence(x, h0, c0, lengths, w, r, b, hidden, direction, **attrs)
    elif cell == "gru":
        node = ops.gru_sequence(x, h0, lengths, w, r, b, hidden, direction, **attrs)
    else:
        node = ops.rnn_sequence(x, h0, lengths, w, r, b, hidden, direction, **attrs)
    results = [ops.result(node.output(k)) for k in range(len(node.outputs()))]
    return ov.Model(results, params + [lengths], f"{cell}_sequence"), weights


def _numpy_sequence(cell, feeds, weights, direction, attrs):
    """Y [B, D, T, H] and the final states, one batch element and direction at a time: the
    element's first L steps (reversed for a reverse direction) through the cell equations."""
    x, h0, lengths = feeds["X"], feeds["H0"], feeds["L"]
    c0 = feeds.get("C0")
    batch, steps = x.shape[:2]
    directions, hidden = h0.shape[1], h0.shape[2]
    y = np.zeros((batch, directions, steps, hidden))
    h_final = np.zeros((batch, directions, hidden))
    c_final = np.zeros((batch, directions, hidden))
    for b in range(batch):
        for d in range(directions):
            reverse = direction == "reverse" or d == 1
            length = int(lengths[b])
            positions = list(range(length))[::-1] if reverse else list(range(length))
            # A zero-length sequence ends in zero states (OpenVINO's reference implementation).
            h = np.zeros((1, hidden))
            c = None if c0 is None else np.zeros((1, hidden))
            if length:
                h = h0[b:b + 1, d].astype(np.float64)
                c = None if c0 is None else c0[b:b + 1, d].astype(np.float64)
                h, hs, c = numpy_cells(cell, x[b:b + 1, positions], h, c, weights["W"][d],
                                        weights["R"][d], weights["B"][d], **attrs)
                y[b, d, positions] = hs[0]
            h_final[b, d] = h[0]
            if c is not None:
                c_final[b, d] = c[0]
    return [y, h_final] + ([c_final] if cell == "lstm" else [])


_CASES = {"lstm": ("lstm", {}), "lstm-clip": ("lstm", {"clip": 0.6}), "gru": ("gru", {}),
          "gru-linear-before-reset": ("gru", {"linear_before_reset": True}), "rnn": ("rnn", {})}


@pytest.mark.parametrize("lengths", ["full", "varying"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("case", list(_CASES))
def test_sequence_layers_match_the_cell_equations_and_the_plugin(case, direction, lengths,
                                                                 tmp_path, rng):
    cell, attrs = _CASES[case]
    ov_model, weights = _sequence_model(cell, direction, attrs)
    path = save(ov_model, tmp_path / "sequence.xml")
    directions = 2 if direction == "bidirectional" else 1
    feeds = {"X": rng.standard_normal((3, 6, 5)).astype(np.float32),
             "H0": rng.standard_normal((3, directions, 4)).astype(np.float32)}
    if cell == "lstm":
        feeds["C0"] = rng.standard_normal((3, directions, 4)).astype(np.float32)
    feeds["L"] = np.array([6, 6, 6] if lengths == "full" else [6, 2, 0], np.int32)
    expected = _numpy_sequence(cell, feeds, weights, direction, attrs)
    model = cyloop.load(path)
    (kernel,) = [step.fn for step in model._compiled.steps]
    for name in abilities_of(kernel).measured.candidates:
        abilities_of(kernel).measured.fix(name)
        got = list(model.run(feeds).values())
        for value, want in zip(got, expected):
            np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5, err_msg=name)
    plugin = list(openvino_compiled(ov_model)(feeds).values())
    for value, want in zip(got, plugin):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-4)


def test_sequence_lengths_out_of_range_are_refused(tmp_path, rng):
    ov_model, _ = _sequence_model("rnn", "forward", {})
    model = cyloop.load(save(ov_model, tmp_path / "sequence.xml"))
    feeds = {"X": rng.standard_normal((3, 6, 5)).astype(np.float32),
             "H0": np.zeros((3, 1, 4), np.float32), "L": np.array([6, 7, 1], np.int32)}
    with pytest.raises(cyloop.CyloopError, match=r"sequence_lengths must lie in \[0, 6\]"):
        model.run(feeds)


def _onnx_rnn(op, direction, hidden=4, features=5):
    directions = 2 if direction == "bidirectional" else 1
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, ["X", "W", "R", "B"], outputs, hidden_size=hidden,
                            direction=direction)
    f = np.float32
    graph = helper.make_graph(
        [node], op.lower(),
        [tensor("X", f, [7, 3, features]), tensor("W", f, [directions, gates * hidden, features]),
         tensor("R", f, [directions, gates * hidden, hidden]),
         tensor("B", f, [directions, 2 * gates * hidden])],
        [tensor(name, f, None) for name in outputs])
    return onnx_model(graph, 14)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_ir_converted_from_onnx_rnn_layers_matches_onnxruntime(op, direction, tmp_path, rng):
    """convert_model writes ONNX's LSTM / GRU / RNN as *Sequence-5 (with the gate reordering
    and layout changes around it): cyloop runs that IR as onnxruntime runs the ONNX."""
    import onnx
    import onnxruntime as ort

    proto = _onnx_rnn(op, direction)
    onnx.save(proto, str(tmp_path / "rnn.onnx"))
    path = save(ov.convert_model(str(tmp_path / "rnn.onnx")), tmp_path / "rnn.xml")
    directions = 2 if direction == "bidirectional" else 1
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    feeds = {"X": rng.standard_normal((7, 3, 5)).astype(np.float32),
             "W": (rng.standard_normal((directions, gates * 4, 5)) * 0.5).astype(np.float32),
             "R": (rng.standard_normal((directions, gates * 4, 4)) * 0.5).astype(np.float32),
             "B": rng.standard_normal((directions, 2 * gates * 4)).astype(np.float32)}
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    model = cyloop.load(path)
    got = model.run({k: v for k, v in feeds.items() if k in model.input_names})
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5, err_msg=name)


# A layer's steps in one call: the cell and its attributes, the kernel, where the kernel takes
# xs, and the candidate of the step that has it.
_STEPS = {"lstm": ("lstm", {}, "lstm_product_steps", 2, "blocked gates"),
          "gru": ("gru", {}, "gru_product_steps", 3, "batch-major gates"),
          "gru-linear-before-reset": ("gru", {"linear_before_reset": True}, "gru_product_steps",
                                      3, "batch-major gates"),
          "rnn": ("rnn", {}, "product_tanh_steps", 2, "batch-major gates")}


@native.steps
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("case", list(_STEPS))
def test_a_layer_runs_its_steps_in_one_call_as_one_at_a_time(case, direction, tmp_path, rng,
                                                             monkeypatch):
    """Every element running every step, a layer's steps (on its step's candidate that has
    them) run in one call a direction (`lstm_product_steps`, `gru_product_steps`,
    `product_tanh_steps`; staged as one at a time is: h' made contiguous, copied into Y), bit
    for bit what the steps one at a time make (the oracle: the same layer with the call
    declining)."""
    from cyloop.kernels.recurrent import cells

    cell, attrs, kernel_name, xs_at, candidate = _STEPS[case]
    ov_model, _ = _sequence_model(cell, direction, attrs, batch=4, steps=40, features=8,
                                  hidden=16)
    path = save(ov_model, tmp_path / "sequence.xml")
    directions = 2 if direction == "bidirectional" else 1
    feeds = {"X": rng.standard_normal((4, 40, 8)).astype(np.float32),
             "H0": rng.standard_normal((4, directions, 16)).astype(np.float32),
             "L": np.full(4, 40, np.int32)}
    if cell == "lstm":
        feeds["C0"] = rng.standard_normal((4, directions, 16)).astype(np.float32)
    spy, calls = steps_spy(kernel_name, xs_at)

    def run(steps):
        monkeypatch.setattr(cells, kernel_name, steps)
        model = cyloop.load(path)
        (kernel,) = [step.fn for step in model._compiled.steps]
        abilities_of(kernel).measured.fix(candidate)
        return model.run(feeds)

    got = run(spy)
    assert calls == [(40, True, True)] * directions  # (taken: not declined)
    declined = []
    want = run(lambda *args: declined.append(1))  # (asked once: not again in the run)
    assert len(declined) == 1
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@native.steps
@pytest.mark.parametrize("case", list(_STEPS))
def test_a_layer_runs_the_steps_left_once_its_step_is_chosen(case, tmp_path, rng, monkeypatch):
    """While the step's formulations are on trial the steps run one at a time; once the one with
    steps is chosen, the rest of each direction runs in one call, from a step's own h (and c),
    whatever layout the trial's last step left them in (the others made slow here: the RNN's
    gate-major step, dropped on its own call, hands on transposed views)."""
    from cyloop.kernels.recurrent import cells

    cell, attrs, kernel_name, xs_at, candidate = _STEPS[case]
    ov_model, weights = _sequence_model(cell, "bidirectional", attrs, batch=4, steps=300,
                                        features=8, hidden=16)
    feeds = {"X": rng.standard_normal((4, 300, 8)).astype(np.float32),
             "H0": rng.standard_normal((4, 2, 16)).astype(np.float32),
             "L": np.full(4, 300, np.int32)}
    if cell == "lstm":
        feeds["C0"] = rng.standard_normal((4, 2, 16)).astype(np.float32)
    spy, calls = steps_spy(kernel_name, xs_at)
    monkeypatch.setattr(cells, kernel_name, spy)
    model = cyloop.load(save(ov_model, tmp_path / "sequence.xml"), tune="at once")
    (kernel,) = [step.fn for step in model._compiled.steps]
    candidates = abilities_of(kernel).measured.candidates
    for name, slow in list(candidates.items()):
        if name != candidate:
            candidates[name] = lambda *args, slow=slow: (time.sleep(0.002), slow(*args))[1]
    got = list(model.run(feeds).values())
    (trial,) = abilities_of(kernel).measured.trials.values()
    assert trial.choice == candidate
    assert len(calls) == 2 and all(taken for *_, taken in calls)
    assert 0 < calls[0][0] < 300 and calls[1][0] == 300  # (the second direction: all of it)
    expected = _numpy_sequence(cell, feeds, weights, "bidirectional", attrs)
    for value, want in zip(got, expected):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)


def test_a_layer_whose_step_has_no_steps_is_not_asked_again(tmp_path, rng, monkeypatch):
    """Once the step's formulation is settled on one without steps (here fixed, as tune=False
    fixes the first), the layer stops asking for them: one question a run, not one a step."""
    ov_model, _ = _sequence_model("lstm", "forward", {}, batch=4, steps=50, features=8,
                                  hidden=16)
    model = cyloop.load(save(ov_model, tmp_path / "sequence.xml"))
    (kernel,) = [step.fn for step in model._compiled.steps]
    abilities_of(kernel).measured.fix("batch-major gates")
    asked, real = [], abilities_of(kernel).measured.steps_for
    monkeypatch.setattr(abilities_of(kernel).measured, "steps_for",
                        lambda *args: asked.append(1) or real(*args))
    model.run({"X": rng.standard_normal((4, 50, 8)).astype(np.float32),
               "H0": np.zeros((4, 1, 16), np.float32), "C0": np.zeros((4, 1, 16), np.float32),
               "L": np.full(4, 50, np.int32)})
    assert len(asked) == 1


def _lstm_layer(tmp_path, rng, batch=8, hidden=64, steps=60):
    ov_model, _ = _sequence_model("lstm", "forward", {}, batch=batch, steps=steps, features=8,
                                  hidden=hidden)
    feeds = {"X": rng.standard_normal((batch, steps, 8)).astype(np.float32),
             "H0": rng.standard_normal((batch, 1, hidden)).astype(np.float32),
             "C0": rng.standard_normal((batch, 1, hidden)).astype(np.float32),
             "L": np.full(batch, steps, np.int32)}
    return save(ov_model, tmp_path / "layer.xml"), feeds


two_cores = pytest.mark.skipif(not two_cores_here(), reason="products cannot run on two cores "
                               "here (one CPU, or numpy's BLAS not found)")


@two_cores
def test_a_layer_outside_loops_measures_where_its_products_run(tmp_path, rng):
    """Two cores' calls first, then one core's (a warm-up and two timed calls each), then the
    faster kept and shown in the plan; on two cores the step's products were cut in pieces, and
    the values are one core's to rounding."""
    source, feeds = _lstm_layer(tmp_path, rng)
    model = cyloop.load(source, tune="at once")
    cores = abilities_of(model._compiled.steps[0].fn).cores
    split, runs = _two_core.products_split(), []
    for _ in range(6):
        runs.append(model.run(feeds))
        if len(runs) == 3:
            assert _two_core.products_split() > split  # (two cores' calls: warm-up, 2 timed)
            split = _two_core.products_split()
    (trial,) = cores.measured.trials.values()
    assert trial.choice in (BY_BLAS, BY_HELPER)
    first, two = trial.samples[BY_BLAS][0], trial.samples[BY_HELPER]
    clear = first > _measured.CLEAR * max(two) or min(two) > _measured.CLEAR * first
    assert len(two) == 2 and len(trial.samples[BY_BLAS]) == (1 if clear else 2)
    (choice,) = [c for c in model.plan().choices if c.kind == "cores"]
    assert choice.nodes == model._compiled.steps[0].node.model_nodes
    assert choice.chosen == trial.choice and choice.trials[0].chosen == trial.choice
    for run in runs[3:]:  # (one core's, then the choice's)
        for name in run:
            np.testing.assert_allclose(run[name], runs[0][name], rtol=1e-4, atol=1e-5)


@two_cores
def test_a_layer_in_a_loop_leaves_its_products_to_the_loop(tmp_path, rng):
    """Where a loop has decided where its products run, a layer in its body follows it: its own
    choice is not asked (the loop measures its runs)."""
    source, feeds = _lstm_layer(tmp_path, rng)
    model = cyloop.load(source)
    cores = abilities_of(model._compiled.steps[0].fn).cores
    for on in (True, False):
        previous = set_products_on_two_cores(on)
        try:
            model.run(feeds)
        finally:
            set_products_on_two_cores(previous)
    assert not cores.measured.trials


@two_cores
def test_tune_false_keeps_a_layer_on_one_core(tmp_path, rng):
    source, feeds = _lstm_layer(tmp_path, rng)
    model = cyloop.load(source, tune=False)
    split = _two_core.products_split()
    model.run(feeds)
    assert _two_core.products_split() == split
    assert [c.fixed for c in model.plan().choices if c.kind == "cores"] == [BY_BLAS]


@native.steps
@two_cores
def test_a_layer_too_small_to_split_has_no_choice_of_cores(tmp_path, rng):
    """Its products run on one core either way: after a first call finds so, the choice goes;
    not after a call of no steps (nothing multiplied, nothing found)."""
    layer, _, cores = sequence_layer("rnn", {})
    f = np.float32
    layer(np.zeros((2, 0, 3), f), [np.zeros((2, 1, 4), f)], np.zeros(2, np.int32),
          np.zeros((1, 4, 3), f), np.zeros((1, 4, 4), f), np.zeros((1, 4), f))
    assert cores.measured is not None
    source, feeds = _lstm_layer(tmp_path, rng, batch=2, hidden=4)
    model = cyloop.load(source)
    cores = abilities_of(model._compiled.steps[0].fn).cores
    model.run(feeds)
    assert cores.measured is None
    (choice,) = [c for c in model.plan().choices if c.kind == "cores"]
    assert choice.declined and choice.chosen == BY_BLAS and choice.settled
