"""Build the corpus of loop-bearing ONNX models written by real exporters.

Each case here builds a small source model in its own framework (torch, TensorFlow/Keras, jax,
scikit-learn), exports it with that framework's ONNX exporter (torch.onnx, tf2onnx, jax2onnx,
skl2onnx) and writes, beside this file:

- ``<name>.onnx``: the model exactly as the exporter wrote it;
- ``<name>.npz``: the feeds under ``in:<input name>`` and the source framework's own outputs on
  those feeds (not onnxruntime's) under ``out:<output name>``, for every model output;
- ``manifest.json``: one entry per model (exporter, versions, source, size, loop ops,
  tolerances, notes).

A model is written only if it holds a loop (a Loop or Scan node, possibly nested, or a
recurrent LSTM/GRU/RNN op) and onnxruntime reproduces the source outputs; otherwise the case is
skipped with the reason printed. The recorded ``rtol``/``atol`` are what onnxruntime and the
source agree within, loosened 10x and no tighter than 1e-6 relative (see ``tolerance``), for
comparing another runtime to the stored source outputs with ``np.allclose(got, want, rtol,
atol)``.

Run it with the exporters of the ``corpus`` extra installed (all of it: ~8 minutes on 2 cores)::

    pip install -e ".[onnx,corpus]"
    python asv_benchmarks/corpus/build.py [--only name1,name2]

It is seeded: the feeds and outputs are the same on every run, and so are the torch, jax and
skl2onnx files (each case is built in a fresh interpreter, so exporters' name counters restart);
tf2onnx's files may differ in the names of constants it folded, not in what they compute.

The built files are committed, so benchmarks and tests need no exporter: only this script does.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
LOOP_OPS = {"Loop", "Scan", "LSTM", "GRU", "RNN"}
MAX_PAIR_BYTES = 3 * 1024 * 1024
RTOL_FLOOR = 1e-6

TS = "torch.onnx.export (TorchScript)"
DYNAMO = "torch.onnx.export (dynamo)"
TF2ONNX = "tf2onnx"
JAX2ONNX = "jax2onnx"
SKL2ONNX = "skl2onnx"

# Opsets passed to the exporters (jax2onnx keeps its default, recorded in the notes): 17 is
# widely supported; 18 is the dynamo exporter's lowest.
TS_OPSET = 17
DYNAMO_OPSET = 18
TF_OPSET = 17
SKL_OPSET = {"": 17, "ai.onnx.ml": 3}


@dataclass
class Built:
    """What a builder hands back: the exporter's bytes, the feeds and the source's outputs."""
    onnx_bytes: bytes
    feeds: dict[str, np.ndarray]
    outputs: list[np.ndarray]  # (the source framework's, in the model's output order)
    options: str  # (the exporter options passed, for the notes)


@dataclass
class Case:
    name: str
    exporter: str
    size: str
    builder: Callable[..., Built]
    params: dict = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.builder.__doc__.strip().splitlines()[0]


CASES: list[Case] = []


def case(stem: str, exporter: str, sizes: dict[str, dict]):
    """Register a builder under ``<stem>-<size>`` for each size and its parameters."""
    def register(builder):
        for size, params in sizes.items():
            CASES.append(Case(f"{stem}-{size}", exporter, size, builder, params))
        return builder
    return register


def seed_for(name: str) -> int:
    return zlib.crc32(name.encode())


def weights(rng, rows: int, cols: int) -> np.ndarray:
    """Random float32 weights of gain 0.4: a recurrence through them contracts, so rounding
    differences between runtimes fade instead of growing over many steps."""
    return (0.4 / math.sqrt(rows)) * rng.standard_normal((rows, cols), dtype=np.float32)


# The data-dependent while loops (torch.jit.script, torch while_loop, tf.while_loop,
# lax.while_loop) share one design: x = tanh(xW + 0.5) and s += mean|x| until s reaches a limit;
# they return x and the step count. s grows by about 0.5 a step and its rounding adds up
# linearly, so the count is robust; the limits below give ~10 and ~4500 steps.
WHILE_SIZES = {"small": {"batch": 2, "hidden": 8, "limit": 5.0},
               "large": {"batch": 16, "hidden": 64, "limit": 2000.0}}


def versions(exporter: str) -> dict[str, str]:
    packages = {
        TS: ["torch", "onnx"],
        DYNAMO: ["torch", "onnxscript", "onnx"],
        TF2ONNX: ["tf2onnx", "tensorflow", "keras"],
        JAX2ONNX: ["jax2onnx", "jax", "jaxlib"],
        SKL2ONNX: ["skl2onnx", "scikit-learn"],
    }[exporter]
    found = {}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:  # (tensorflow may be installed as tensorflow-cpu)
            found[package] = version(package + "-cpu")
    return found


# ---------------------------------------------------------------------------------------------
# torch

def torch_export(module, args, input_names, output_names, dynamo: bool) -> tuple[bytes, str]:
    """Export with torch.onnx (TorchScript or dynamo exporter); return the bytes and options."""
    import torch

    if dynamo:
        program = torch.onnx.export(module, tuple(args), dynamo=True, opset_version=DYNAMO_OPSET,
                                    input_names=input_names, output_names=output_names,
                                    verbose=False)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            program.save(path)
            return Path(path).read_bytes(), f"dynamo=True, opset_version={DYNAMO_OPSET}"
    buffer = io.BytesIO()
    torch.onnx.export(module, tuple(args), buffer, dynamo=False, opset_version=TS_OPSET,
                      input_names=input_names, output_names=output_names)
    return buffer.getvalue(), f"dynamo=False, opset_version={TS_OPSET}"


def torch_case(module, feeds: dict[str, np.ndarray], output_names, dynamo: bool) -> Built:
    """Run ``module`` on the feeds (the source outputs) and export it."""
    import torch

    args = [torch.from_numpy(value) for value in feeds.values()]
    with torch.no_grad():
        result = module(*args)
    result = result if isinstance(result, tuple) else (result,)
    outputs = [t.detach().numpy() for t in result]
    data, options = torch_export(module, args, list(feeds), output_names, dynamo)
    return Built(data, feeds, outputs, options)


class _Recurrent:
    """Wraps torch's nn.LSTM/GRU/RNN so initial states are inputs and states are outputs."""

    @staticmethod
    def make(kind: str, features: int, hidden: int):
        import torch

        class Recurrent(torch.nn.Module):
            def __init__(self):
                super().__init__()
                layer = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[kind]
                self.rnn = layer(features, hidden, batch_first=True)

            def forward(self, x, h0, *c0):
                if c0:
                    y, (h, c) = self.rnn(x, (h0, c0[0]))
                    return y, h, c
                y, h = self.rnn(x, h0)
                return y, h

        return Recurrent().eval()


def torch_recurrent(name, kind, batch, steps, features, hidden, dynamo=False) -> Built:
    import torch

    torch.manual_seed(seed_for(name))
    rng = np.random.default_rng(seed_for(name))
    module = _Recurrent.make(kind, features, hidden)
    feeds = {"x": rng.standard_normal((batch, steps, features), dtype=np.float32),
             "h0": rng.standard_normal((1, batch, hidden), dtype=np.float32)}
    names = ["y", "h"]
    if kind == "lstm":
        feeds["c0"] = rng.standard_normal((1, batch, hidden), dtype=np.float32)
        names.append("c")
    return torch_case(module, feeds, names, dynamo)


RNN_SIZES = {"small": {"batch": 2, "steps": 8, "features": 4, "hidden": 8},
             "large": {"batch": 4, "steps": 256, "features": 32, "hidden": 128}}


@case("torch-lstm", TS, RNN_SIZES)
def torch_lstm(name, **params) -> Built:
    """torch nn.LSTM (batch_first, initial h0/c0 as inputs), outputs y, h_n, c_n."""
    return torch_recurrent(name, "lstm", **params)


@case("torch-gru", TS, RNN_SIZES)
def torch_gru(name, **params) -> Built:
    """torch nn.GRU (batch_first, initial h0 as input), outputs y, h_n."""
    return torch_recurrent(name, "gru", **params)


@case("torch-rnn", TS, RNN_SIZES)
def torch_rnn(name, **params) -> Built:
    """torch nn.RNN, tanh (batch_first, initial h0 as input), outputs y, h_n."""
    return torch_recurrent(name, "rnn", **params)


@case("torch-lstm-dynamo", DYNAMO, {"small": RNN_SIZES["small"]})
def torch_lstm_dynamo(name, **params) -> Built:
    """torch nn.LSTM (batch_first, initial h0/c0 as inputs), outputs y, h_n, c_n."""
    return torch_recurrent(name, "lstm", dynamo=True, **params)


@case("torch-gru-dynamo", DYNAMO, {"small": RNN_SIZES["small"]})
def torch_gru_dynamo(name, **params) -> Built:
    """torch nn.GRU (batch_first, initial h0 as input), outputs y, h_n."""
    return torch_recurrent(name, "gru", dynamo=True, **params)


@case("torch-rnn-dynamo", DYNAMO, {"small": RNN_SIZES["small"]})
def torch_rnn_dynamo(name, **params) -> Built:
    """torch nn.RNN, tanh (batch_first, initial h0 as input), outputs y, h_n."""
    return torch_recurrent(name, "rnn", dynamo=True, **params)


def _script_for_if(hidden: int):
    import torch

    class ForIf(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = torch.nn.Linear(2 * hidden, hidden)

        def forward(self, xs, h):
            for t in range(xs.shape[0]):
                z = torch.tanh(self.cell(torch.cat([xs[t], h], dim=-1)))
                if bool(xs[t].sum() > 0):
                    h = z
                else:
                    h = 0.5 * (h + z)
            return h

    return torch.jit.script(ForIf().eval())


@case("torch-script-for-if", TS, {"small": {"steps": 8, "batch": 2, "hidden": 8},
                                  "large": {"steps": 1000, "batch": 4, "hidden": 64}})
def torch_script_for_if(name, steps, batch, hidden) -> Built:
    """torch.jit.script: for over time steps, a Linear+tanh cell, an if on the step's sign."""
    import torch

    torch.manual_seed(seed_for(name))
    rng = np.random.default_rng(seed_for(name))
    feeds = {"xs": rng.standard_normal((steps, batch, hidden), dtype=np.float32),
             "h": rng.standard_normal((batch, hidden), dtype=np.float32)}
    return torch_case(_script_for_if(hidden), feeds, ["h_out"], dynamo=False)


def _script_while(w: np.ndarray, limit: float):
    import torch

    class Budget(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.from_numpy(w))
            self.limit = limit

        def forward(self, x):
            n = torch.zeros((), dtype=torch.int64)
            s = torch.zeros(())
            while bool(s < self.limit):
                x = torch.tanh(x @ self.w + 0.5)
                s = s + x.abs().mean()
                n = n + 1
            return x, n

    return torch.jit.script(Budget().eval())


@case("torch-script-while", TS, WHILE_SIZES)
def torch_script_while(name, batch, hidden, limit) -> Built:
    """torch.jit.script while: x = tanh(xW + 0.5), s += mean|x| until s >= limit; counts steps."""
    rng = np.random.default_rng(seed_for(name))
    module = _script_while(weights(rng, hidden, hidden), limit)
    feeds = {"x": rng.standard_normal((batch, hidden), dtype=np.float32)}
    return torch_case(module, feeds, ["x_out", "steps"], dynamo=False)


def _while_loop_module(w: np.ndarray, limit: float):
    import torch
    from torch._higher_order_ops.while_loop import while_loop

    class Budget(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.from_numpy(w))

        def forward(self, x):
            def body(n, s, x):
                x = torch.tanh(x @ self.w + 0.5)
                return n + 1, s + x.abs().mean(), x

            start = (torch.zeros((), dtype=torch.int64), torch.zeros(()), x)
            n, _, x = while_loop(lambda n, s, x: s < limit, body, start)
            return x, n

    return Budget().eval()


@case("torch-while-loop-dynamo", DYNAMO, WHILE_SIZES)
def torch_while_loop(name, batch, hidden, limit) -> Built:
    """torch._higher_order_ops while_loop: x = tanh(xW + 0.5), s += mean|x| until s >= limit."""
    rng = np.random.default_rng(seed_for(name))
    module = _while_loop_module(weights(rng, hidden, hidden), limit)
    feeds = {"x": rng.standard_normal((batch, hidden), dtype=np.float32)}
    return torch_case(module, feeds, ["x_out", "steps"], dynamo=True)


def _scan_module(u: np.ndarray, w: np.ndarray, with_cond: bool):
    import torch
    from torch._higher_order_ops.scan import scan

    class ScanRNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.u = torch.nn.Parameter(torch.from_numpy(u))
            self.w = torch.nn.Parameter(torch.from_numpy(w))

        def forward(self, h0, xs):
            def step(h, x):
                z = torch.tanh(x @ self.u + h @ self.w)
                if with_cond:
                    z = torch.cond(x.sum() > 0, lambda z, h: z.clone(),
                                   lambda z, h: 0.5 * (z + h), (z, h))
                return z, z.clone()

            return scan(step, h0, xs)

    return ScanRNN().eval()


SCAN_SIZES = {"small": {"steps": 8, "batch": 2, "features": 4, "hidden": 8},
              "large": {"steps": 1000, "batch": 4, "features": 16, "hidden": 64}}


def torch_scan_case(name, steps, batch, features, hidden, with_cond) -> Built:
    rng = np.random.default_rng(seed_for(name))
    module = _scan_module(weights(rng, features, hidden), weights(rng, hidden, hidden), with_cond)
    feeds = {"h0": rng.standard_normal((batch, hidden), dtype=np.float32),
             "xs": rng.standard_normal((steps, batch, features), dtype=np.float32)}
    return torch_case(module, feeds, ["h_last", "hs"], dynamo=True)


@case("torch-scan-dynamo", DYNAMO, SCAN_SIZES)
def torch_scan(name, **params) -> Built:
    """torch._higher_order_ops scan: an RNN cell h = tanh(xU + hW) over time, all h stacked."""
    return torch_scan_case(name, with_cond=False, **params)


@case("torch-cond-in-scan-dynamo", DYNAMO, {"small": SCAN_SIZES["small"]})
def torch_cond_in_scan(name, **params) -> Built:
    """torch scan whose RNN cell takes a torch.cond on the step's sign (keep or average)."""
    return torch_scan_case(name, with_cond=True, **params)


# ---------------------------------------------------------------------------------------------
# TensorFlow / Keras via tf2onnx

def tf_case(fn, feeds: dict[str, np.ndarray], note: str = "") -> Built:
    """Export tf.function ``fn`` (whose signature names the feeds) with tf2onnx.from_function."""
    import tensorflow as tf
    import tf2onnx

    signature = [tf.TensorSpec((None,) * value.ndim if value.ndim else (), tf.as_dtype(value.dtype),
                               name=key) for key, value in feeds.items()]
    function = tf.function(fn, input_signature=signature)
    result = function(*[tf.constant(value) for value in feeds.values()])
    result = result if isinstance(result, (tuple, list)) else (result,)
    outputs = [np.asarray(t) for t in tf.nest.flatten(result)]
    proto, _ = tf2onnx.convert.from_function(function, input_signature=signature, opset=TF_OPSET)
    options = f"tf2onnx.convert.from_function, opset={TF_OPSET}" + (f"; {note}" if note else "")
    return Built(proto.SerializeToString(), feeds, outputs, options)


def tf_seed(name: str):
    import keras

    keras.backend.clear_session()  # (layer names restart, whatever was built before)
    keras.utils.set_random_seed(seed_for(name) % 2 ** 31)
    return np.random.default_rng(seed_for(name))


def tf_recurrent(name, layer_name, batch, steps, features, hidden) -> Built:
    import keras

    rng = tf_seed(name)
    layer_type = getattr(keras.layers, layer_name)
    layer = layer_type(hidden, return_sequences=True, return_state=True)
    model = keras.Sequential([keras.Input((steps, features)), layer])
    feeds = {"x": rng.standard_normal((batch, steps, features), dtype=np.float32)}
    return tf_case(lambda x: model(x), feeds,
                   "a Keras 3 model called in a tf.function (from_keras fails on Keras 3)")


@case("tf-lstm", TF2ONNX, RNN_SIZES)
def tf_lstm(name, **params) -> Built:
    """Keras LSTM(return_sequences=True, return_state=True): outputs sequence, h, c."""
    return tf_recurrent(name, "LSTM", **params)


@case("tf-gru", TF2ONNX, RNN_SIZES)
def tf_gru(name, **params) -> Built:
    """Keras GRU(return_sequences=True, return_state=True): outputs sequence, h."""
    return tf_recurrent(name, "GRU", **params)


@case("tf-simplernn", TF2ONNX, RNN_SIZES)
def tf_simplernn(name, **params) -> Built:
    """Keras SimpleRNN(return_sequences=True, return_state=True): outputs sequence, h."""
    return tf_recurrent(name, "SimpleRNN", **params)


@case("tf-while-loop", TF2ONNX, WHILE_SIZES)
def tf_while_loop(name, batch, hidden, limit) -> Built:
    """tf.while_loop: x = tanh(xW + 0.5), s += mean|x| until s >= limit; counts steps."""
    import tensorflow as tf

    rng = tf_seed(name)
    w = weights(rng, hidden, hidden)

    def fn(x):
        def body(n, s, x):
            x = tf.tanh(x @ w + 0.5)
            return n + 1, s + tf.reduce_mean(tf.abs(x)), x

        n, _, x = tf.while_loop(lambda n, s, x: s < limit, body, (0, 0.0, x))
        return x, n

    feeds = {"x": rng.standard_normal((batch, hidden), dtype=np.float32)}
    return tf_case(fn, feeds)


@case("tf-scan", TF2ONNX, SCAN_SIZES)
def tf_scan(name, steps, batch, features, hidden) -> Built:
    """tf.scan of an RNN cell h = tanh(xU + hW) over time-major xs, all h stacked."""
    import tensorflow as tf

    rng = tf_seed(name)
    u, w = weights(rng, features, hidden), weights(rng, hidden, hidden)

    def fn(h0, xs):
        return tf.scan(lambda h, x: tf.tanh(x @ u + h @ w), xs, initializer=h0)

    feeds = {"h0": rng.standard_normal((batch, hidden), dtype=np.float32),
             "xs": rng.standard_normal((steps, batch, features), dtype=np.float32)}
    return tf_case(fn, feeds)


@case("tf-foldl", TF2ONNX, {"small": {"steps": 8, "batch": 2, "features": 4},
                            "large": {"steps": 2000, "batch": 4, "features": 32}})
def tf_foldl(name, steps, batch, features) -> Built:
    """tf.foldl: a decaying sum acc = 0.9 acc + sin(x) * x over time-major xs."""
    import tensorflow as tf

    rng = tf_seed(name)

    def fn(xs):
        return tf.foldl(lambda acc, x: 0.9 * acc + tf.sin(x) * x, xs,
                        initializer=tf.zeros_like(xs[0]))

    feeds = {"xs": rng.standard_normal((steps, batch, features), dtype=np.float32)}
    return tf_case(fn, feeds)


@case("tf-greedy-decoder", TF2ONNX, {"small": {"batch": 2, "vocab": 12, "embed": 6, "hidden": 8,
                                                   "steps": 6},
                                     "large": {"batch": 8, "vocab": 200, "embed": 32, "hidden": 128,
                                                   "steps": 100}})
def tf_greedy_decoder(name, batch, vocab, embed, hidden, steps) -> Built:
    """TensorArray greedy decoder: Embedding -> Keras GRUCell -> Dense -> argmax fed back."""
    import keras
    import tensorflow as tf

    rng = tf_seed(name)
    embedding = keras.layers.Embedding(vocab, embed)
    cell = keras.layers.GRUCell(hidden)
    project = keras.layers.Dense(vocab)
    cell(embedding(tf.zeros((1,), tf.int32)), [tf.zeros((1, hidden))])  # (builds the weights)
    project(tf.zeros((1, hidden)))

    def fn(start, h0):
        tokens = tf.TensorArray(tf.int32, size=steps)
        token, h = start, h0
        for t in tf.range(steps):
            out, states = cell(embedding(token), [h])
            h = states[0]
            token = tf.argmax(project(out), axis=-1, output_type=tf.int32)
            tokens = tokens.write(t, token)
        return tf.transpose(tokens.stack()), h

    feeds = {"start": rng.integers(0, vocab, (batch,), dtype=np.int32),
             "h0": rng.standard_normal((batch, hidden), dtype=np.float32)}
    return tf_case(fn, feeds)


# ---------------------------------------------------------------------------------------------
# jax via jax2onnx

def jax_case(fn, feeds: dict[str, np.ndarray]) -> Built:
    """Export ``fn`` with jax2onnx.to_onnx (its default opset) and run it under jax.jit."""
    import jax
    from jax2onnx import to_onnx

    names = list(feeds)
    outputs = jax.jit(fn)(*feeds.values())
    outputs = [np.asarray(o) for o in jax.tree_util.tree_leaves(outputs)]
    specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in feeds.values()]
    proto = to_onnx(fn, inputs=specs, input_names=names)
    return Built(proto.SerializeToString(), feeds, outputs,
                 "jax2onnx.to_onnx(fn, inputs=[ShapeDtypeStruct...]), default opset")


@case("jax-scan", JAX2ONNX, SCAN_SIZES)
def jax_scan(name, steps, batch, features, hidden) -> Built:
    """lax.scan of an RNN cell h = tanh(xU + hW) over time-major xs, all h stacked."""
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(seed_for(name))
    u, w = weights(rng, features, hidden), weights(rng, hidden, hidden)

    def fn(h0, xs):
        def step(h, x):
            h = jnp.tanh(x @ u + h @ w)
            return h, h
        return lax.scan(step, h0, xs)

    feeds = {"h0": rng.standard_normal((batch, hidden), dtype=np.float32),
             "xs": rng.standard_normal((steps, batch, features), dtype=np.float32)}
    return jax_case(fn, feeds)


@case("jax-fori-loop", JAX2ONNX, {"small": {"batch": 2, "hidden": 8, "steps": 10},
                                  "large": {"batch": 16, "hidden": 64, "steps": 4000}})
def jax_fori_loop(name, batch, hidden, steps) -> Built:
    """lax.fori_loop: a fixed number of steps of x = 0.8 tanh(xW + sin(i/100)) + 0.2x."""
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(seed_for(name))
    w = weights(rng, hidden, hidden)

    def fn(x):
        def body(i, x):
            return 0.8 * jnp.tanh(x @ w + jnp.sin(i / 100.0)) + 0.2 * x
        return lax.fori_loop(0, steps, body, x)

    feeds = {"x": rng.standard_normal((batch, hidden), dtype=np.float32)}
    return jax_case(fn, feeds)


@case("jax-while-loop", JAX2ONNX, WHILE_SIZES)
def jax_while_loop(name, batch, hidden, limit) -> Built:
    """lax.while_loop: x = tanh(xW + 0.5), s += mean|x| until s >= limit; counts steps."""
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(seed_for(name))
    w = weights(rng, hidden, hidden)

    def fn(x):
        def body(state):
            n, s, x = state
            x = jnp.tanh(x @ w + 0.5)
            return n + 1, s + jnp.abs(x).mean(), x
        n, _, x = lax.while_loop(lambda state: state[1] < limit, body,
                                 (jnp.int32(0), jnp.float32(0), x))
        return x, n

    feeds = {"x": rng.standard_normal((batch, hidden), dtype=np.float32)}
    return jax_case(fn, feeds)


@case("jax-cond-in-scan", JAX2ONNX, {"small": SCAN_SIZES["small"]})
def jax_cond_in_scan(name, steps, batch, features, hidden) -> Built:
    """lax.scan of an RNN cell with a lax.cond on the step's sign (keep or average)."""
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(seed_for(name))
    u, w = weights(rng, features, hidden), weights(rng, hidden, hidden)

    def fn(h0, xs):
        def step(h, x):
            z = jnp.tanh(x @ u + h @ w)
            h = lax.cond(x.sum() > 0, lambda z, h: z, lambda z, h: 0.5 * (z + h), z, h)
            return h, h
        return lax.scan(step, h0, xs)

    feeds = {"h0": rng.standard_normal((batch, hidden), dtype=np.float32),
             "xs": rng.standard_normal((steps, batch, features), dtype=np.float32)}
    return jax_case(fn, feeds)


@case("jax-nested-scan", JAX2ONNX, {"small": {"outer": 4, "inner": 5, "batch": 2, "hidden": 8}})
def jax_nested_scan(name, outer, inner, batch, hidden) -> Built:
    """Nested lax.scan: an outer scan over chunks, each an inner scan of h = tanh(x + hW)."""
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(seed_for(name))
    w = weights(rng, hidden, hidden)

    def fn(h0, xs):
        def inner_step(h, x):
            h = jnp.tanh(x + h @ w)
            return h, h.sum(-1)

        def outer_step(h, chunk):
            h, sums = lax.scan(inner_step, h, chunk)
            return 0.9 * h, sums
        return lax.scan(outer_step, h0, xs)

    feeds = {"h0": rng.standard_normal((batch, hidden), dtype=np.float32),
             "xs": rng.standard_normal((outer, inner, batch, hidden), dtype=np.float32)}
    return jax_case(fn, feeds)


# ---------------------------------------------------------------------------------------------
# scikit-learn via skl2onnx

KNN_SIZES = {"small": {"train": 100, "features": 4, "queries": 10},
             "large": {"train": 4000, "features": 16, "queries": 400}}
GP_SIZES = {"small": {"train": 100, "features": 4, "queries": 10},
            "large": {"train": 600, "features": 16, "queries": 300}}


def skl_data(name, train, features, queries, dtype=np.float32):
    rng = np.random.default_rng(seed_for(name))
    x = rng.standard_normal((train, features)).astype(dtype)
    y = np.sin(x).sum(axis=1) + 0.1 * rng.standard_normal(train)
    q = rng.standard_normal((queries, features)).astype(dtype)
    return x, y, q


def skl_convert(model, name, features, dtype, options=None) -> tuple[bytes, str]:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    tensor_type = DoubleTensorType if dtype == np.float64 else FloatTensorType
    proto = convert_sklearn(model, name, initial_types=[("X", tensor_type([None, features]))],
                            options=options, target_opset=SKL_OPSET)
    return proto.SerializeToString(), (f"convert_sklearn(name=<model name>, initial_types=[('X', "
                                       f"{tensor_type.__name__}([None, {features}]))], "
                                       f"options={options}, target_opset={SKL_OPSET})")


@case("skl-knn-classifier", SKL2ONNX, KNN_SIZES)
def skl_knn_classifier(name, train, features, queries) -> Built:
    """KNeighborsClassifier(n_neighbors=5), 3 classes; outputs label and probabilities."""
    from sklearn.neighbors import KNeighborsClassifier

    x, y, q = skl_data(name, train, features, queries)
    model = KNeighborsClassifier(n_neighbors=5).fit(x, np.digitize(y, [-0.5, 0.5]))
    data, options = skl_convert(model, name, features, np.float32, {id(model): {"zipmap": False}})
    options = options.replace(str(id(model)), "id(model)")
    outputs = [model.predict(q), model.predict_proba(q).astype(np.float32)]
    return Built(data, {"X": q}, outputs, options)


@case("skl-knn-regressor", SKL2ONNX, KNN_SIZES)
def skl_knn_regressor(name, train, features, queries) -> Built:
    """KNeighborsRegressor(n_neighbors=5); output the mean target of the neighbours."""
    from sklearn.neighbors import KNeighborsRegressor

    x, y, q = skl_data(name, train, features, queries)
    model = KNeighborsRegressor(n_neighbors=5).fit(x, y)
    data, options = skl_convert(model, name, features, np.float32)
    outputs = [model.predict(q).astype(np.float32).reshape(-1, 1)]
    return Built(data, {"X": q}, outputs, options)


@case("skl-nearest-neighbors", SKL2ONNX, KNN_SIZES)
def skl_nearest_neighbors(name, train, features, queries) -> Built:
    """NearestNeighbors(n_neighbors=5, radius=None).kneighbors: neighbour indices, distances."""
    from sklearn.neighbors import NearestNeighbors

    x, _, q = skl_data(name, train, features, queries)
    model = NearestNeighbors(n_neighbors=5, radius=None).fit(x)  # (skl2onnx: not both)
    data, options = skl_convert(model, name, features, np.float32)
    distances, indices = model.kneighbors(q)
    return Built(data, {"X": q}, [indices, distances.astype(np.float32)], options)


def skl_gp(name, train, features, queries, return_std: bool) -> Built:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF

    x, y, q = skl_data(name, train, features, queries, np.float64)
    model = GaussianProcessRegressor(kernel=RBF(length_scale=1.0), alpha=1e-2,
                                     random_state=0).fit(x, y)
    options = {GaussianProcessRegressor: {"return_std": True}} if return_std else None
    data, text = skl_convert(model, name, features, np.float64, options)
    text = text.replace(str(GaussianProcessRegressor), "GaussianProcessRegressor")
    if return_std:
        mean, std = model.predict(q, return_std=True)
        outputs = [mean.reshape(-1, 1), std]
    else:
        outputs = [model.predict(q).reshape(-1, 1)]
    return Built(data, {"X": q}, outputs, text)


@case("skl-gp", SKL2ONNX, GP_SIZES)
def skl_gp_mean(name, **params) -> Built:
    """GaussianProcessRegressor(RBF kernel), float64; the predicted mean."""
    return skl_gp(name, return_std=False, **params)


@case("skl-gp-std", SKL2ONNX, GP_SIZES)
def skl_gp_std(name, **params) -> Built:
    """GaussianProcessRegressor(RBF kernel), float64, return_std: the mean and its std."""
    return skl_gp(name, return_std=True, **params)


# ---------------------------------------------------------------------------------------------
# checks and writing

class Skip(Exception):
    """A case that is not written, with the reason."""


def loop_ops(model) -> list[str]:
    """The loop-bearing op types in ``model``, looking inside every subgraph."""
    found = set()

    def walk(graph):
        for node in graph.node:
            if node.op_type in LOOP_OPS:
                found.add(node.op_type)
            for attr in node.attribute:
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    walk(sub)

    walk(model.graph)
    return sorted(found)


def tolerance(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float, float]:
    """rtol, atol covering |got - want| loosened 10x, and the max abs difference.

    Per output, rtol covers the relative difference of the values of at least a tenth of the
    output's largest magnitude, and atol the absolute difference of the smaller ones, so that
    ``np.allclose(got, want, rtol, atol)`` holds. Neither is tighter than 1e-6 relative: rtol
    >= 1e-6, atol >= 1e-6 times the output's largest magnitude (a runtime that happens to
    round as the source does sets no bar for others). Integer and bool outputs must match
    exactly."""
    rtol, atol, worst = RTOL_FLOOR, 0.0, 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            raise Skip(f"shape {g.shape} from onnxruntime, {w.shape} from the source")
        if not np.issubdtype(w.dtype, np.floating):
            if not np.array_equal(g, w):
                raise Skip(f"{np.count_nonzero(g != w)} of {w.size} exact values differ")
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        err, mag = np.abs(g64 - w64), np.abs(w64)
        worst = max(worst, float(err.max(initial=0.0)))
        big = mag >= 0.1 * mag.max(initial=0.0)
        rtol = max(rtol, round_up(10 * float((err[big] / mag[big]).max(initial=0.0))))
        atol = max(atol, round_up(10 * float(err[~big].max(initial=0.0))),
                   round_up(RTOL_FLOOR * float(mag.max(initial=0.0))))
    if rtol > 1e-2:
        raise Skip(f"onnxruntime and the source differ by {rtol / 10:.3g} (relative)")
    return rtol, atol, worst


def round_up(x: float) -> float:
    """``x`` rounded up to one significant digit (0 stays 0)."""
    if x <= 0:
        return 0.0
    scale = 10.0 ** math.floor(math.log10(x))
    return float(f"{math.ceil(x / scale - 1e-9) * scale:.1g}")


def check(c: Case, built: Built):
    """Check the model: a loop, the right outputs, onnxruntime agreeing; return its entry."""
    import onnx
    import onnxruntime as ort

    model = onnx.load_from_string(built.onnx_bytes)
    ops = loop_ops(model)
    if not ops:
        raise Skip("no Loop, Scan or recurrent op: the exporter unrolled the loop")
    inputs = [i.name for i in model.graph.input if i.name not in
              {t.name for t in model.graph.initializer}]
    if inputs != list(built.feeds):
        raise Skip(f"model inputs {inputs}, feeds {list(built.feeds)}")
    outputs = [o.name for o in model.graph.output]
    if len(outputs) != len(built.outputs):
        raise Skip(f"{len(outputs)} model outputs, {len(built.outputs)} source outputs")
    settings = ort.SessionOptions()
    settings.log_severity_level = 3  # (not jax2onnx's unused initializers)
    session = ort.InferenceSession(built.onnx_bytes, settings, providers=["CPUExecutionProvider"])
    got = session.run(None, built.feeds)
    rtol, atol, worst = tolerance(got, built.outputs)
    return model, {
        "name": c.name, "exporter": c.exporter, "versions": versions(c.exporter),
        "source": c.source, "size": c.size, "loop_ops": ops, "rtol": rtol, "atol": atol,
        "notes": "; ".join(filter(None, [
            built.options, "params: " + ", ".join(f"{k}={v}" for k, v in c.params.items()),
            f"onnxruntime {ort.__version__} vs source: max abs difference {worst:.3g}"])),
    }


def write(c: Case, built: Built, model) -> int:
    """Write ``<name>.onnx`` and ``<name>.npz``; return their size on disk."""
    arrays = {f"in:{k}": np.asarray(v) for k, v in built.feeds.items()}
    for out, value in zip(model.graph.output, built.outputs):
        arrays[f"out:{out.name}"] = np.asarray(value)
    npz = io.BytesIO()
    np.savez_compressed(npz, **arrays)
    size = len(built.onnx_bytes) + npz.getbuffer().nbytes
    if size > MAX_PAIR_BYTES:
        raise Skip(f"{size / 2**20:.1f} MiB on disk, over the 3 MiB a model may take")
    (HERE / f"{c.name}.onnx").write_bytes(built.onnx_bytes)
    (HERE / f"{c.name}.npz").write_bytes(npz.getvalue())
    return size


def build(c: Case):
    """Build, check and write one case; return its manifest entry or None (skipped)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = c.builder(c.name, **c.params)
        model, entry = check(c, built)
        size = write(c, built, model)
    except Skip as reason:
        print(f"skip {c.name}: {reason}")
        return None
    except Exception as error:  # noqa: BLE001 - an exporter that cannot export the case
        first = (str(error).strip().splitlines() or [""])[0][:300]
        print(f"skip {c.name}: {c.exporter} failed: {type(error).__name__}: {first}")
        return None
    print(f"wrote {c.name}: {', '.join(entry['loop_ops'])}, {size / 1024:.0f} KiB, "
          f"rtol={entry['rtol']:g} atol={entry['atol']:g}")
    return entry


ENTRY = "manifest entry: "  # (how a case's build hands its entry back)


def build_apart(c: Case):
    """Build one case in a fresh interpreter (hash seed 0), so that the exporters' generated
    names (counters, hash-ordered sets) and so the files are the same, whatever else is built."""
    env = dict(os.environ, PYTHONHASHSEED="0", TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, __file__, "--case", c.name], env=env, text=True,
                         stdout=subprocess.PIPE, check=False)
    lines = run.stdout.splitlines()
    for line in lines:
        if not line.startswith(ENTRY):
            print(line)
    if run.returncode:
        print(f"skip {c.name}: its build exited with {run.returncode}")
    entries = [json.loads(line[len(ENTRY):]) for line in lines if line.startswith(ENTRY)]
    return entries[0] if entries and not run.returncode else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model names to (re)build")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # (one case, in this process)
    args = parser.parse_args(argv)
    by_name = {c.name: c for c in CASES}
    if args.case:
        entry = build(by_name[args.case])
        if entry is not None:
            print(ENTRY + json.dumps(entry), flush=True)
        return 0
    only = set(args.only.split(",")) if args.only else set(by_name)
    unknown = only - set(by_name)
    if unknown:
        parser.error(f"unknown models: {', '.join(sorted(unknown))}")
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else []
    entries = {e["name"]: e for e in manifest if e["name"] in by_name}
    for c in CASES:
        if c.name in only:
            entry = build_apart(c)
            if entry is None:
                entries.pop(c.name, None)
                for suffix in (".onnx", ".npz"):
                    (HERE / f"{c.name}{suffix}").unlink(missing_ok=True)
            else:
                entries[c.name] = entry
    order = list(by_name)
    manifest = sorted(entries.values(), key=lambda e: order.index(e["name"]))
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum((HERE / f"{e['name']}{suffix}").stat().st_size
                for e in manifest for suffix in (".onnx", ".npz"))
    print(f"manifest: {len(manifest)} models, {total / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
