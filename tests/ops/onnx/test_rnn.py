"""ONNX RNN / GRU / LSTM and Erf / Gelu kernels against onnxruntime."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from cyloop import ops

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


def _inputs(op, rng, dirs, bias=True, lens=False, initial=False, peep=False, layout=0):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    f = np.float32
    x_shape = (BATCH, SEQ, INPUT) if layout else (SEQ, BATCH, INPUT)
    h_shape = (BATCH, dirs, HIDDEN) if layout else (dirs, BATCH, HIDDEN)
    feeds = {
        "X": rng.standard_normal(x_shape).astype(f),
        "W": (rng.standard_normal((dirs, gates * HIDDEN, INPUT)) * 0.5).astype(f),
        "R": (rng.standard_normal((dirs, gates * HIDDEN, HIDDEN)) * 0.5).astype(f),
        "B": rng.standard_normal((dirs, 2 * gates * HIDDEN)).astype(f) if bias else None,
        "sequence_lens": (np.array(lens if isinstance(lens, list) else [5, 2, 4], np.int32)
                          if lens else None),
        "initial_h": rng.standard_normal(h_shape).astype(f) if initial else None,
    }
    if op == "LSTM":
        feeds["initial_c"] = rng.standard_normal(h_shape).astype(f) if initial else None
        feeds["P"] = rng.standard_normal((dirs, 3 * HIDDEN)).astype(f) if peep else None
    return feeds


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
    if attrs.get("layout"):
        # onnxruntime has no batch-first layout: its layout-0 run on transposed inputs, transposed
        # back, is the oracle.
        seq_first = {k: (None if v is None else np.swapaxes(v, 0, 1) if k in
                         ("X", "initial_h", "initial_c") else v) for k, v in feeds.items()}
        y, *states = _run_ort(op, 14, {**full, "layout": 0}, seq_first, n_outputs)
        expected = [np.transpose(y, (2, 0, 1, 3))] + [np.swapaxes(st, 0, 1) for st in states]
    else:
        expected = _run_ort(op, 14, full, feeds, n_outputs)
    got = ops.lookup("", op, 14).build(full, n_outputs)(*feeds.values())
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,opset,attrs", [("Erf", 13, {}), ("Gelu", 20, {}),
                                             ("Gelu", 20, {"approximate": "tanh"})])
def test_erf_and_gelu(op, opset, attrs, rng):
    x = rng.standard_normal((4, 5)).astype(np.float32) * 2
    expected = _run_ort(op, opset, attrs, {"x": x}, 1)[0]
    got = ops.lookup("", op, opset).build(attrs)(x)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


