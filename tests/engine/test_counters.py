"""The Cython planner's counters: what it copies and allocates. These tests ask for the Cython
driver by name, since the counters describe its memory plan (the reference driver has none)."""

import subprocess
import sys

import numpy as np
import pytest

import cyloop
from cyloop import _examples
from cyloop.ir import ConcatOutput, GraphBuilder


def _counters(model):
    (counters,) = model.counters().values()
    return counters


@pytest.mark.parametrize("steps", [5, 50], ids=["5-steps", "50-steps"])
def test_carried_and_emitted_value_costs_no_copy_in_steady_state(steps):
    graph, feeds = _examples.rnn(steps=steps)
    # Not hoisted and not tuned (test_hoist.py covers the hoisted plan, test_gemm.py every
    # formulation of a product); the fused h U + (x W + b) (ProductPlus) sums in another order
    # than the body's (x W + h U) + b, so the values agree with the reference driver's to
    # rounding.
    model = cyloop.Model(graph, driver="cython", hoist=False, tune=False)
    out = model.run(feeds)
    c = _counters(model)
    assert c["steady_bytes_copied"] == 0
    # Only the first result is copied (it sizes the buffer); every later one is written in place.
    assert c["copies"] == 1 and c["in_place_writes"] == steps - 1
    # One allocation: the scan output itself, no final concatenation and no carried buffers.
    assert c["allocations"] == 1
    assert c["last_preallocated_bytes"] == out["h_all"].nbytes
    reference = cyloop.Model(graph, driver="python", tune=False).run(feeds)
    np.testing.assert_allclose(out["h_all"], reference["h_all"], rtol=1e-5, atol=1e-6)


def _vector_counter(n):
    """``acc = acc + 1`` on a [3] vector (a 0-d float counter takes the scalar path instead, and
    has no buffers at all: test_scalar_path)."""
    body = cyloop.GraphBuilder("body")
    body.input("acc", np.float32, (3,))
    body.output(body.node("Add", "acc", body.const(np.ones(3, np.float32)), outputs=["acc_next"]))
    g = cyloop.GraphBuilder("outer")
    g.input("acc0", np.float32, (3,))
    g.loop(body.build(), inputs=[("acc0", cyloop.CarriedInput(0, "acc", "acc_next"))],
           outputs=[cyloop.LastOutput("acc_next")], trip_count=n, output_names=["acc"])
    g.output("acc")
    return g.build(), {"acc0": np.zeros(3, np.float32)}


def test_planner_allocations_do_not_grow_with_the_iteration_count():
    allocations = []
    for n in (10, 1000):
        graph, feeds = _vector_counter(n)
        model = cyloop.Model(graph, driver="cython")
        np.testing.assert_array_equal(model.run(feeds)["acc"], np.full(3, n, np.float32))
        c = _counters(model)
        assert c["steady_bytes_copied"] == 0
        allocations.append(c["allocations"])
    assert allocations[0] == allocations[1] == 2  # a ping-pong pair


def test_pass_through_result_is_copied_into_its_slot():
    """The plan is honest: a body input emitted as is must be copied, and the counter says so."""
    b = cyloop.GraphBuilder("body")
    b.input("x_t", np.float32, (4,))
    b.output("x_t")
    g = cyloop.GraphBuilder()
    g.input("x", np.float32, (6, 4))
    g.loop(b.build(), inputs=[("x", cyloop.SlicedInput(0, "x_t"))],
           outputs=[cyloop.ConcatOutput("x_t")], output_names=["ys"])
    g.output("ys")
    model = cyloop.Model(g.build(), driver="cython")
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    np.testing.assert_array_equal(model.run({"x": x})["ys"], x)
    c = _counters(model)
    assert c["copies"] == 6 and c["bytes_copied"] == x.nbytes
    assert model.plan().loops[0].copied_bytes_per_iteration == 16


def test_identity_in_front_of_an_output_does_not_cost_a_copy(rng):
    """y = Identity(h_next) emitted while h_next is carried: one value, stored once."""
    b = cyloop.GraphBuilder("body")
    b.input("h", np.float32, (4,))
    h_next = b.node("Tanh", b.node("Add", "h", b.const(np.float32(0.5))), outputs=["h_next"])
    b.output(h_next, b.node("Identity", h_next, outputs=["y"]))
    g = cyloop.GraphBuilder()
    g.input("h0", np.float32, (4,))
    g.loop(b.build(), inputs=[("h0", cyloop.CarriedInput(0, "h", "h_next"))],
           outputs=[cyloop.LastOutput("h_next"), cyloop.ConcatOutput("y")], trip_count=20,
           output_names=["last", "ys"])
    g.output("last", "ys")
    graph = g.build()
    feeds = {"h0": rng.standard_normal(4).astype(np.float32)}
    model = cyloop.Model(graph, driver="cython")
    out = model.run(feeds)
    assert _counters(model)["steady_bytes_copied"] == 0
    reference = cyloop.Model(graph, driver="python").run(feeds)
    for name in out:
        np.testing.assert_array_equal(out[name], reference[name])
    assert not np.may_share_memory(out["last"], out["ys"])


PEAK_SCRIPT = """
import tracemalloc
import numpy as np
import cyloop
from cyloop import _examples
graph, feeds = _examples.rnn(steps=4000)  # every h: 2 MB; hoisting's chunks: ~0.5 MB
model = cyloop.Model(graph, driver="cython", tune=False)  # chunks of the default size
model.run(feeds)
tracemalloc.start()
out = model.run(feeds)
_, peak = tracemalloc.get_traced_memory()  # numpy allocations; the planner's are not traced
tracemalloc.stop()
assert not np.shares_memory(out["h_last"], out["h_all"])
assert list(out) == model.output_names
print(peak, out["h_all"].nbytes)
"""


def test_a_last_value_living_in_an_output_row_is_copied_not_the_whole_output():
    """The last h lives in the final row of the concatenated output: handing both to the caller
    must copy that one row, not the rows (which would double peak memory). Measured in a fresh
    interpreter: tracemalloc's peak counts every thread's allocations, and a suite's earlier
    modules leave threads behind."""
    proc = subprocess.run([sys.executable, "-c", PEAK_SCRIPT], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    peak, output_bytes = map(int, proc.stdout.split())
    assert peak < output_bytes / 2


def _owner(arr):
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def test_early_stop_does_not_keep_a_large_buffer_alive():
    """An unbounded loop with 8 MiB rows that stops after one iteration."""
    body = GraphBuilder("body")
    body.input("cond_in", np.bool_, ())
    body.input("x", np.float32, (2**21,))
    body.output(body.node("Not", "cond_in", outputs=["stop"]),
                body.node("Neg", "x", outputs=["y"]))
    g = GraphBuilder()
    g.input("X", np.float32, (2**21,))
    g.loop(body.build(), [("X", cyloop.InvariantInput(0, "x"))], [ConcatOutput("y")],
           cond_param="cond_in", cond_result="stop", output_names=["ys"])
    g.output("ys")
    model = cyloop.Model(g.build(), driver="cython")
    out = model.run({"X": np.ones(2**21, np.float32)})["ys"]
    assert out.shape == (1, 2**21)
    (counters,) = model.counters().values()
    assert counters["last_preallocated_bytes"] <= 64 * 2**20
    assert _owner(out).nbytes == out.nbytes


def test_a_run_takes_the_memory_of_an_output_its_caller_let_go_of():
    """A model run again, its outputs of the last run dropped, writes its output where the last
    one was (memory the process has touched: no page fault per page); an output the caller keeps
    is left as it was."""
    graph, feeds = _examples.rnn(steps=1024, batch=8, features=8, hidden=16)  # h_all: 512 KiB
    model = cyloop.Model(graph, driver="cython", tune=False)
    cyloop.release_memory()
    first = model.run(feeds)["h_all"]
    kept, address = first.copy(), _owner(first).ctypes.data
    again = model.run(feeds)["h_all"]  # `first` still held: fresh memory
    assert _owner(again).ctypes.data != address
    np.testing.assert_array_equal(first, kept)
    del first
    third = model.run(feeds)["h_all"]
    assert _owner(third).ctypes.data == address
    np.testing.assert_array_equal(third, kept)
    np.testing.assert_array_equal(again, kept)
    cyloop.release_memory()
