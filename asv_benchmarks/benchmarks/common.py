"""Seeded, cached model builders shared by the benchmarks.

Append-only: never change what an existing builder returns, or results stop being comparable
across commits; add a new builder (or a new parameter value) instead.
"""

import functools

import numpy as np

import cyloop


@functools.cache
def counter_graph(iterations):
    """W1: a tiny body, ``acc = acc + 1`` carried for `iterations` steps (per-iteration overhead).

    Returns (graph, feeds)."""
    body = cyloop.GraphBuilder("counter_body")
    acc = body.input("acc", np.float32, ())
    body.output(body.node("Add", acc, body.const(np.float32(1)), outputs=["acc_next"]))
    g = cyloop.GraphBuilder("counter")
    acc0 = g.input("acc0", np.float32, ())
    g.loop(body.build(), inputs=[(acc0, cyloop.CarriedInput(0, "acc", "acc_next"))],
           outputs=[cyloop.LastOutput("acc_next")], trip_count=iterations, name="counter_loop",
           output_names=["acc"])
    g.output("acc")
    return g.build(), {"acc0": np.zeros((), np.float32)}


def counter_numpy(iterations, acc0):
    """The same loop written by hand in numpy: the floor for per-iteration overhead."""
    acc = acc0
    one = np.float32(1)
    for _ in range(iterations):
        acc = np.add(acc, one)
    return acc
