"""Small loop programs built with the IR builder: the CLI's demo, benchmarks and tests share them.

Each builder returns ``(graph, feeds)`` with seeded random feeds.
"""

import numpy as np

from .ir import CarriedInput, ConcatOutput, GraphBuilder, InvariantInput, LastOutput, SlicedInput


def rnn(steps=64, batch=4, features=16, hidden=32, seed=0):
    """``h = tanh(x_t W + h U + b)`` over x's first axis; outputs the last h and every h."""
    rng = np.random.default_rng(seed)
    body = GraphBuilder("rnn_body")
    x_t = body.input("x_t", np.float32, (batch, features))
    h = body.input("h", np.float32, (batch, hidden))
    w = body.input("w", np.float32, (features, hidden))
    u = body.input("u", np.float32, (hidden, hidden))
    b = body.input("b", np.float32, (hidden,))
    pre = body.node("Add", body.node("MatMul", x_t, w), body.node("MatMul", h, u))
    h_next = body.node("Tanh", body.node("Add", pre, b), outputs=["h_next"])
    body.output(h_next, dtype=np.float32, shape=(batch, hidden))

    g = GraphBuilder("rnn")
    x = g.input("x", np.float32, ("T", batch, features))
    h0 = g.input("h0", np.float32, (batch, hidden))
    scale = np.float32(1 / np.sqrt(hidden))
    weights = {
        "w": g.const((rng.standard_normal((features, hidden)) * scale).astype(np.float32), "W"),
        "u": g.const((rng.standard_normal((hidden, hidden)) * scale).astype(np.float32), "U"),
        "b": g.const((rng.standard_normal(hidden) * 0.1).astype(np.float32), "B"),
    }
    h_last, h_all = g.loop(
        body.build(),
        inputs=[(x, SlicedInput(0, "x_t", axis=0)), (h0, CarriedInput(0, "h", "h_next"))]
        + [(weights[k], InvariantInput(0, k)) for k in ("w", "u", "b")],
        outputs=[LastOutput("h_next"), ConcatOutput("h_next", axis=0)],
        name="rnn_loop",
        output_names=["h_last", "h_all"],
    )
    g.output(h_last)
    g.output(h_all)
    feeds = {
        "x": rng.standard_normal((steps, batch, features)).astype(np.float32),
        "h0": np.zeros((batch, hidden), np.float32),
    }
    return g.build(), feeds


def counter(iterations=10_000):
    """A tiny body: ``acc = acc + 1`` carried for `iterations` steps (per-iteration overhead)."""
    body = GraphBuilder("counter_body")
    acc = body.input("acc", np.float32, ())
    body.output(body.node("Add", acc, body.const(np.float32(1)), outputs=["acc_next"]))
    g = GraphBuilder("counter")
    acc0 = g.input("acc0", np.float32, ())
    g.output(g.loop(body.build(), inputs=[(acc0, CarriedInput(0, "acc", "acc_next"))],
                    outputs=[LastOutput("acc_next")], trip_count=iterations, name="counter_loop",
                    output_names=["acc"]))
    return g.build(), {"acc0": np.zeros((), np.float32)}
