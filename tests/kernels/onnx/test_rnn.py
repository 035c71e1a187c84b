"""ONNX RNN / GRU / LSTM and Erf / Gelu kernels against onnxruntime; the layers PyTorch exports
against the general path too (they run on OpenVINO's layer runner)."""

import gc
import weakref

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from cyloop import kernels
from cyloop.abilities import abilities_of
from cyloop.kernels.onnx import rnn
from cyloop.kernels.recurrent import cells

from ...support import native
from ...support.cells import steps_spy

SEQ, BATCH, INPUT, HIDDEN = 5, 3, 4, 6


def _run_ort(op, opset, attrs, feeds, n_outputs):
    names = [name if value is not None else "" for name, value in feeds.items()]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, [f"o{k}" for k in range(n_outputs)], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in feeds.items() if v is not None],
        [helper.make_empty_tensor_value_info(f"o{k}") for k in range(n_outputs)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {n: v for n, v in feeds.items() if v is not None})


def _inputs(op, rng, dirs, bias=True, lens=False, initial=False, peep=False, layout=0,
            sizes=(SEQ, BATCH, INPUT, HIDDEN), f=np.float32):
    seq, batch, inputs, hidden = sizes
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    x_shape = (batch, seq, inputs) if layout else (seq, batch, inputs)
    h_shape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    scale = 0.5 / np.sqrt(max(hidden, inputs) / HIDDEN)  # (sums of one size, whatever the width)
    feeds = {
        "X": rng.standard_normal(x_shape).astype(f),
        "W": (rng.standard_normal((dirs, gates * hidden, inputs)) * scale).astype(f),
        "R": (rng.standard_normal((dirs, gates * hidden, hidden)) * scale).astype(f),
        "B": rng.standard_normal((dirs, 2 * gates * hidden)).astype(f) if bias else None,
        "sequence_lens": (np.array(lens if isinstance(lens, list) else [5, 2, 4], np.int32)
                          if lens else None),
        "initial_h": rng.standard_normal(h_shape).astype(f) if initial else None,
    }
    if op == "LSTM":
        feeds["initial_c"] = rng.standard_normal(h_shape).astype(f) if initial else None
        feeds["P"] = rng.standard_normal((dirs, 3 * hidden)).astype(f) if peep else None
    return feeds


def _onnxruntime(op, attrs, feeds, n_outputs):
    """onnxruntime's outputs; for layout 1, which it lacks, its layout-0 run on transposed
    inputs, transposed back."""
    if not attrs.get("layout"):
        return _run_ort(op, 14, attrs, feeds, n_outputs)
    seq_first = {k: (None if v is None else np.swapaxes(v, 0, 1) if k in
                     ("X", "initial_h", "initial_c") else v) for k, v in feeds.items()}
    y, *states = _run_ort(op, 14, {**attrs, "layout": 0}, seq_first, n_outputs)
    return [np.transpose(y, (2, 0, 1, 3))] + [np.swapaxes(st, 0, 1) for st in states]


CONFIGS = [
    ("RNN", {}, {}),
    ("RNN", {"direction": "reverse", "activations": ["Relu"], "clip": 1.5}, {"lens": True}),
    ("RNN", {"direction": "bidirectional"}, {"initial": True, "lens": True}),
    ("GRU", {}, {}),
    ("GRU", {"linear_before_reset": 1}, {"initial": True}),
    ("GRU", {"direction": "bidirectional"}, {"lens": True, "bias": False}),
    ("LSTM", {}, {}),
    ("LSTM", {"direction": "reverse"}, {"initial": True, "lens": True, "peep": True}),
    ("LSTM", {"direction": "bidirectional", "clip": 2.0}, {"initial": True}),
    ("LSTM", {"layout": 1}, {"initial": True}),
    ("LSTM", {"activations": ["HardSigmoid", "Tanh", "Softsign"], "activation_alpha": [0.3],
              "activation_beta": [0.6]}, {}),
    ("LSTM", {"direction": "bidirectional"}, {"initial": True, "lens": [4, 2, 0]}),
    ("GRU", {"direction": "reverse"}, {"initial": True, "lens": [0, 5, 1]}),
]


@pytest.mark.parametrize("op,attrs,options", CONFIGS,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(CONFIGS)])
def test_recurrent_op_matches_onnxruntime(op, attrs, options, rng):
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    feeds = _inputs(op, rng, dirs, layout=attrs.get("layout", 0), **options)
    n_outputs = 3 if op == "LSTM" else 2
    full = {"hidden_size": HIDDEN, **attrs}
    expected = _onnxruntime(op, full, feeds, n_outputs)
    got = kernels.lookup("", op, 14).build(full, n_outputs)(*feeds.values())
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


LAYERS = [("LSTM", {}), ("GRU", {}), ("GRU", {"linear_before_reset": 1}), ("RNN", {})]


def _general_path(monkeypatch):
    """From now on, layers built take the general path (the oracle of the layer runner's)."""
    monkeypatch.setattr(rnn, "_on_layer_runner", lambda *args: None)


@pytest.mark.parametrize("f", [np.float32, np.float64])
@pytest.mark.parametrize("options", [{}, {"lens": True, "initial": True}, {"bias": False},
                                     {"lens": [5, 0, 3], "initial": True}])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op, attrs", LAYERS, ids=["LSTM", "GRU", "GRU-lbr", "RNN"])
def test_layers_with_the_defaults_run_on_the_layer_runner(op, attrs, direction, layout, options,
                                                          f, rng, monkeypatch):
    """The default activations, no clip, input_forget or peepholes (what torch.onnx.export
    writes): the OpenVINO layer runner's values, the general path's (whose cell equations then
    never run) and onnxruntime's, in ONNX's layouts."""
    dirs = 2 if direction == "bidirectional" else 1
    full = {"hidden_size": HIDDEN, "direction": direction, "layout": layout, **attrs}
    feeds = _inputs(op, rng, dirs, layout=layout, f=f, **options)
    n_outputs = 3 if op == "LSTM" else 2
    layer = kernels.lookup("", op, 14).build(full, n_outputs)
    assert abilities_of(layer).measured is not None  # (the cells' measured step: the plan shows it)
    with monkeypatch.context() as patch:
        patch.setattr(rnn, "_cell", None)  # (not called)
        got = layer(*feeds.values())
    _general_path(monkeypatch)
    want = kernels.lookup("", op, 14).build(full, n_outputs)(*feeds.values())
    # (onnxruntime has no float64 LSTM: float64 is checked against its float32 run)
    expected = _onnxruntime(op, full, {k: v if v is None or v.dtype.kind != "f" else
                                       v.astype(np.float32) for k, v in feeds.items()},
                            n_outputs)
    tol = 1e-5 if f == np.float32 else 1e-12
    for g, w, e in zip(got, want, expected):
        assert g.shape == w.shape == e.shape and g.dtype == w.dtype == np.dtype(f)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-5)


# The kernel that runs a layer's steps in one call, where it takes xs, and the candidate of the
# cell's step that has it.
_STEPS = {"LSTM": ("lstm_product_steps", 2, "blocked gates"),
          "GRU": ("gru_product_steps", 3, "batch-major gates"),
          "RNN": ("product_tanh_steps", 2, "batch-major gates")}


@native.steps
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("op, attrs", LAYERS, ids=["LSTM", "GRU", "GRU-lbr", "RNN"])
def test_a_layer_runs_its_steps_in_one_call(op, attrs, direction, layout, rng, monkeypatch):
    """Every element running every step, on the step's candidate that has them, each direction
    runs in one call of the cell's steps, writing Y in ONNX's layout: the general path's
    values."""
    dirs = 2 if direction == "bidirectional" else 1
    full = {"hidden_size": 16, "direction": direction, "layout": layout, **attrs}
    feeds = _inputs(op, rng, dirs, layout=layout, initial=True, sizes=(300, 4, 8, 16))
    for value in feeds.values():  # (read-only, as the engine hands a kernel its operands)
        if value is not None:
            value.flags.writeable = False
    n_outputs = 3 if op == "LSTM" else 2
    kernel_name, xs_at, candidate = _STEPS[op]
    spy, calls = steps_spy(kernel_name, xs_at)
    monkeypatch.setattr(cells, kernel_name, spy)
    layer = kernels.lookup("", op, 14).build(full, n_outputs)
    abilities_of(layer).measured.fix(candidate)
    runs = [layer(*feeds.values()) for _ in range(2)]
    # (each run: a call a direction, all of it, staged as a layer's steps one at a time are)
    assert calls == [(300, True, True)] * (2 * dirs)
    _general_path(monkeypatch)
    want = kernels.lookup("", op, 14).build(full, n_outputs)(*feeds.values())
    for got in runs:
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, attrs", LAYERS, ids=["LSTM", "GRU", "GRU-lbr", "RNN"])
def test_a_layer_given_other_constant_weights_runs_on_them(op, attrs, rng, monkeypatch):
    """A layer keeps what it made of the last constant W, R and B it ran on: other constant
    weights (other arrays, the same shapes, or another hidden size), or a bias left out, run on
    their own values, and the first come back again, each the general path's values."""
    full = {"hidden_size": HIDDEN, **attrs}
    n_outputs = 3 if op == "LSTM" else 2
    first = _inputs(op, rng, 1, initial=True)
    sets = [first, {**_inputs(op, rng, 1, initial=True), "X": first["X"]}, {**first, "B": None},
            _inputs(op, rng, 1, initial=True, sizes=(SEQ, BATCH, INPUT, HIDDEN + 2)), first]
    for feeds in sets:  # (read-only, as the engine hands a kernel a model's constants)
        for value in feeds.values():
            if value is not None:
                value.flags.writeable = False
    layer = kernels.lookup("", op, 14).build(full, n_outputs)
    got = [[layer(*feeds.values()) for _ in range(2)] for feeds in sets]
    _general_path(monkeypatch)
    for runs, feeds in zip(got, sets):
        hidden = feeds["R"].shape[-1]
        want = kernels.lookup("", op, 14).build({**full, "hidden_size": hidden},
                                                n_outputs)(*feeds.values())
        for run in runs:
            for g, w in zip(run, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lens", [False, [5, 5, 5], [5, 2, 4]], ids=["all", "full", "some"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op, attrs", LAYERS, ids=["LSTM", "GRU", "GRU-lbr", "RNN"])
def test_a_layers_final_states_are_arrays_of_their_own(op, attrs, direction, layout, lens, rng,
                                                        monkeypatch):
    """The final states share no memory with Y, the initial states or each other, and are in C
    order (one direction's are the last step's own states, h copied out of Y): the general
    path's values."""
    dirs = 2 if direction == "bidirectional" else 1
    full = {"hidden_size": HIDDEN, "direction": direction, "layout": layout, **attrs}
    feeds = _inputs(op, rng, dirs, layout=layout, initial=True, lens=lens)
    n_outputs = 3 if op == "LSTM" else 2
    layer = kernels.lookup("", op, 14).build(full, n_outputs)
    for _ in range(2):  # (the second call on the weights' forms made by the first)
        y, *finals = layer(*feeds.values())
        for k, final in enumerate(finals):
            assert final.flags.c_contiguous
            others = [y, feeds["initial_h"], feeds.get("initial_c"), *finals[k + 1:]]
            assert not any(np.shares_memory(final, a) for a in others if a is not None)
    _general_path(monkeypatch)
    want = kernels.lookup("", op, 14).build(full, n_outputs)(*feeds.values())
    for g, w in zip([y, *finals], want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, attrs", LAYERS, ids=["LSTM", "GRU", "GRU-lbr", "RNN"])
def test_a_layer_keeps_no_weight_that_is_not_constant(op, attrs, rng):
    """Weights a caller may still change (writeable: a feed, as the engine hands one over) are
    read afresh each call and never kept alive by the layer; a change between calls is seen."""
    full = {"hidden_size": HIDDEN, **attrs}
    n_outputs = 3 if op == "LSTM" else 2
    feeds = _inputs(op, rng, 1, initial=True)
    layer = kernels.lookup("", op, 14).build(full, n_outputs)
    first = layer(*feeds.values())
    feeds["W"][...] = rng.standard_normal(feeds["W"].shape)  # (the same array, new values)
    second = layer(*feeds.values())
    want = rnn._factory(op)(full, n_outputs)(*feeds.values())  # (a layer of its own)
    for g, w in zip(second, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert not np.allclose(first[0], second[0])
    weights = [weakref.ref(feeds[name]) for name in ("W", "R", "B")]
    del feeds, first, second, want
    gc.collect()
    assert all(ref() is None for ref in weights)


@pytest.mark.parametrize("case", ["peepholes", "float16", "mixed types"])
def test_layers_the_runner_does_not_take_take_the_general_path(case, rng, monkeypatch):
    """A layer's operands the runner declines (an LSTM's peepholes, float16, inputs of two
    types) run on the general path (its cell equations, a call a step): onnxruntime's values."""
    feeds = _inputs("LSTM", rng, 1, initial=True, peep=case == "peepholes",
                    f=np.float16 if case == "float16" else np.float32)
    if case == "mixed types":
        feeds["initial_c"] = feeds["initial_c"].astype(np.float64)
    full = {"hidden_size": HIDDEN}
    layer = kernels.lookup("", "LSTM", 14).build(full, 3)
    cells_run = []
    monkeypatch.setattr(rnn, "_cell", lambda *args, real=rnn._cell: cells_run.append(1) or
                        real(*args))
    got = layer(*feeds.values())
    assert len(cells_run) == SEQ
    if case == "mixed types":  # (onnxruntime refuses it: the general path's float32 arithmetic)
        feeds["initial_c"] = feeds["initial_c"].astype(np.float32)
    expected = _onnxruntime("LSTM", full, feeds, 3)
    tol = 2e-3 if case == "float16" else 1e-5
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", ["peepholes", "a state of another type",
                                  "an input of another type"])
def test_a_layer_that_ran_on_the_runner_declines_other_operands_with_the_same_weights(
        case, rng, monkeypatch):
    """The same constant W, R and B as a call the runner took, with operands it declines, take
    the general path: onnxruntime's values (the general path's float32 arithmetic, for a state
    or an input of another type, which onnxruntime refuses)."""
    feeds = _inputs("LSTM", rng, 1, initial=True, peep=True)
    for value in feeds.values():  # (read-only: constants, as the engine hands them over)
        if value is not None:
            value.flags.writeable = False
    full = {"hidden_size": HIDDEN}
    layer = kernels.lookup("", "LSTM", 14).build(full, 3)
    cells_run = []
    monkeypatch.setattr(rnn, "_cell", lambda *args, real=rnn._cell: cells_run.append(1) or
                        real(*args))
    layer(*{**feeds, "P": None}.values())
    assert not cells_run  # (the runner's)
    declined = dict(feeds)
    if case != "peepholes":
        declined["P"] = None
        name = "initial_c" if case == "a state of another type" else "X"
        declined[name] = feeds[name].astype(np.float64)
    got = layer(*declined.values())
    assert len(cells_run) == SEQ
    expected = _onnxruntime("LSTM", full, {**declined, "X": feeds["X"],
                                           "initial_c": feeds["initial_c"]}, 3)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,opset,attrs", [("Erf", 13, {}), ("Gelu", 20, {}),
                                             ("Gelu", 20, {"approximate": "tanh"})])
def test_erf_and_gelu(op, opset, attrs, rng):
    x = rng.standard_normal((4, 5)).astype(np.float32) * 2
    expected = _run_ort(op, opset, attrs, {"x": x}, 1)[0]
    got = kernels.lookup("", op, opset).build(attrs)(x)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)




@pytest.mark.parametrize("dirs", [1, 2])
def test_an_lstms_weights_in_the_cells_gate_order_are_a_constant_of_their_own(dirs, rng):
    """W and R reordered for the cells are an array nobody writes (`is_constant`), as the
    model's weights they are made of: what the cells derive from each direction's view of them
    is then recalled by identity, not by comparing values each call."""
    from cyloop.accel.gemm import is_constant

    hidden, inputs = 3, 2
    rows = rng.standard_normal((dirs, 4 * hidden, inputs)).astype(np.float32)
    rows.flags.writeable = False
    reordered = rnn._gates_reordered(rows)
    assert is_constant(reordered) and not np.shares_memory(reordered, rows)
    blocks = rows.reshape(dirs, 4, hidden, inputs)
    np.testing.assert_array_equal(reordered.reshape(blocks.shape),
                                  blocks[:, list(rnn._OPENVINO_ORDER)])
