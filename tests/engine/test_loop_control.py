"""Trip counts and conditions: zero iterations, loops stopped by their condition (bounded or not,
forward or reverse, with growth), max_iterations, and Ctrl-C."""

import math
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import cyloop
from cyloop.ir import ConcatOutput, GraphBuilder, LastOutput
from cyloop.kernels.registry import kernel

from ..support.drivers import run_both


def _counting_loop(stop_after, row=(2,), trip_count=None, reverse=False, new_axis=True):
    """Emits rows filled with the iteration number; the body's condition turns false at
    iteration `stop_after` (that iteration is still emitted)."""
    body = GraphBuilder("body")
    i = body.input("i", np.int64, ())
    body.input("cond_in", np.bool_, ())
    limit = body.const(np.int64(stop_after))
    cond = body.node("Less", i, limit, outputs=["cond_out"])
    filled = body.node("Add", body.const(np.zeros(row, np.int64)), i, outputs=["y"])
    body.output(cond, filled)
    g = GraphBuilder()
    g.input("m", np.int64, ())
    g.loop(body.build(), inputs=[],
           outputs=[ConcatOutput("y", reverse=reverse, new_axis=new_axis)],
           trip_count="m" if trip_count else None, iteration_param="i", cond_param="cond_in",
           cond_result="cond_out", output_names=["ys"])
    g.output("ys")
    return g.build(), {"m": np.int64(trip_count or 0)}


def _expected(n, row, reverse):
    rows = [np.full(row, i, np.int64) for i in range(n)]
    return np.stack(rows[::-1] if reverse else rows)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("trip_count", [None, 100, 5], ids=["unbounded", "bound-100", "bound-5"])
def test_condition_stops_the_loop(trip_count, reverse):
    graph, feeds = _counting_loop(9, trip_count=trip_count, reverse=reverse)
    out = run_both(graph, feeds)
    n = min(10, trip_count or 10)
    np.testing.assert_array_equal(out["ys"], _expected(n, (2,), reverse))


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_unbounded_output_grows_geometrically(reverse):
    """Rows of 256 KiB, more than the first buffer of an output of unknown length holds: the
    buffer doubles as 600 iterations run past it, so it is allocated about log2(600) times and
    the rows are copied less than twice more in all."""
    graph, feeds = _counting_loop(599, row=(32768,), reverse=reverse)
    model = cyloop.Model(graph, driver="cython")
    out = model.run(feeds)["ys"]
    np.testing.assert_array_equal(out, _expected(600, (32768,), reverse))
    (counters,) = model.counters().values()
    assert 0 < counters["growth_bytes_copied"] < 2 * out.nbytes
    assert 2 < counters["allocations"] <= 2 + math.log2(600)


def test_zero_trip_count_gives_empty_outputs():
    body = GraphBuilder("body")
    body.input("c", np.float32, (2, 3))
    body.output(body.node("Neg", "c", outputs=["c_next"]), dtype=np.float32, shape=(2, 3))
    g = GraphBuilder()
    g.input("c0", np.float32, (2, 3))
    g.loop(body.build(), inputs=[("c0", cyloop.CarriedInput(0, "c", "c_next"))],
           outputs=[LastOutput("c_next"), ConcatOutput("c_next", axis=1)], trip_count=0,
           output_names=["last", "all"])
    g.output("last", "all")
    c0 = np.ones((2, 3), np.float32)
    out = run_both(g.build(), {"c0": c0})
    np.testing.assert_array_equal(out["last"], c0)
    assert out["all"].shape == (2, 0, 3)


def test_max_iterations_stops_an_endless_loop():
    graph, feeds = _counting_loop(10**12)
    for driver in ("cython", "python"):
        model = cyloop.Model(graph, driver=driver, max_iterations=50)
        with pytest.raises(cyloop.LoopLimitError, match="'ys': iteration 50 would pass "
                           "max_iterations=50"):
            model.run(feeds)


def test_initial_condition_false_runs_nothing():
    graph, feeds = _counting_loop(3)
    graph.nodes[0].attrs["spec"].initial_cond = False
    out = run_both(graph, feeds)
    assert out["ys"].shape == (0,)


INTERRUPT_SCRIPT = textwrap.dedent("""
    import signal, sys
    from cyloop import _examples, Model
    # As in a terminal, whatever the test runner's own SIGINT disposition (a background job's is
    # "ignore", and Python then installs no handler).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    graph, feeds = _examples.counter(10**8 - 1)
    model = Model(graph, driver=sys.argv[1])
    print("started", flush=True)
    try:
        model.run(feeds)
    except KeyboardInterrupt:
        (counters,) = model.counters().values()
        print("interrupted", counters["iterations"])
    else:
        print("finished")
""")


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_ctrl_c_interrupts_a_long_loop(driver):
    """SIGINT from outside, as a terminal's Ctrl-C sends it, stops a loop of ~10^8 iterations."""
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPT_SCRIPT, driver],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "started\n", proc.stderr.read()
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.startswith("interrupted"), out


THREAD_SCRIPT = textwrap.dedent("""
    import sys, threading, time
    from cyloop import _examples, Model
    graph, feeds = _examples.counter(int(sys.argv[2]))
    model = Model(graph, driver=sys.argv[1])
    stop = threading.Event()
    ticks = []

    def tick():  # what a watchdog or a progress bar's thread does
        while not stop.wait(0.01):
            ticks.append(time.perf_counter())

    threading.Thread(target=tick, daemon=True).start()
    time.sleep(0.05)
    start = time.perf_counter()
    model.run(feeds)
    end = time.perf_counter()
    stop.set()
    print(sum(start < t < end for t in ticks), end - start)
""")


@pytest.mark.parametrize("driver,iterations", [("cython", 10**7), ("python", 10**5)])
def test_other_threads_run_while_a_loop_runs(driver, iterations):
    """The driver holds the GIL, but lets other Python threads in as it goes (a body of scalar
    steps runs no bytecode, so the interpreter alone would not)."""
    proc = subprocess.run([sys.executable, "-c", THREAD_SCRIPT, driver, str(iterations)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    ticks, took = proc.stdout.split()
    # A thread that wakes every 10 ms woke during the loop (without the GIL it would not once).
    assert int(ticks) >= min(5, float(took) / 0.02), (ticks, took)


def test_condition_result_that_is_a_constant():
    """The body's condition output reads a constant directly (as OpenVINO's converter writes)."""
    body = GraphBuilder("body")
    body.input("i", np.int64, ())
    body.input("acc", np.int64, ())
    always = body.const(np.array([True]))
    body.output(always, body.node("Add", "acc", "i", outputs=["acc_next"]))
    g = GraphBuilder()
    g.input("acc0", np.int64, ())
    g.loop(body.build(), inputs=[("acc0", cyloop.CarriedInput(0, "acc", "acc_next"))],
           outputs=[LastOutput("acc_next")], trip_count=5, iteration_param="i",
           cond_result=always, output_names=["total"])
    g.output("total")
    out = run_both(g.build(), {"acc0": np.array(0, np.int64)})
    assert out["total"] == sum(range(5))


DOMAIN = "test.loop_control"

# A condition result in each form a body may hand the driver, from the truth it stands for.
CONDITION_FORMS = {
    "0-d bool array": np.array,
    "1-element bool array, negative stride": lambda go: np.full(4, go)[::-3][:1],
    "bool byte 2 (a uint8 view)": lambda go: np.array([2 * go], np.uint8).view(np.bool_),
    "numpy bool": np.bool_,
    "1-element float array": lambda go: np.array([[0.5 * go]], np.float32),
}


@kernel("ConditionForm", domain=DOMAIN)
def _condition_form(attrs):
    form = CONDITION_FORMS[attrs["form"]]
    return lambda i, limit: form(bool(i < limit))


@pytest.mark.parametrize("form", CONDITION_FORMS)
def test_a_condition_result_in_any_form_means_its_truth(form):
    """The Cython driver reads some forms directly (a bool array's byte); every form must stop
    the loop where its truth says, as the reference driver's `ir.truth` reads it."""
    body = GraphBuilder("body", opsets={DOMAIN: 1})
    i = body.input("i", np.int64, ())
    cond = body.node("ConditionForm", i, body.const(np.int64(4)), domain=DOMAIN,
                     outputs=["cond_out"], form=form)
    body.output(cond, body.node("Identity", i, outputs=["y"]))
    g = GraphBuilder()
    g.loop(body.build(), inputs=[], outputs=[ConcatOutput("y", new_axis=True)],
           iteration_param="i", cond_result="cond_out", output_names=["ys"])
    g.output("ys")
    out = run_both(g.build(), {})
    np.testing.assert_array_equal(out["ys"], np.arange(5))


class _Branch:
    """A branch program's stand-in: what it was run on, and its name as its one output."""

    def __init__(self, name):
        self.name, self.ran = name, []
        self.compiled = type("Compiled", (), {"loops": []})()

    def run(self, args):
        self.ran.append(tuple(args))
        return [self.name]


@pytest.mark.parametrize("cond", [np.True_, np.False_, True, False, np.array(True),
                                  np.array([False]), np.array([[1]], np.int64), np.float32(0.0)],
                         ids=repr)
def test_an_if_takes_the_branch_its_condition_says(cond):
    """A numpy bool (a comparison's scalar path makes one) is read as it is, any other
    condition of one element as numpy reads its truth; the captures reach the branch."""
    from cyloop.engine.control import IfRunner

    then_branch, else_branch = _Branch("then"), _Branch("else")
    runner = IfRunner(then_branch, else_branch, 1, "If 'c'")
    taken = "then" if bool(np.asarray(cond).reshape(-1)[0]) else "else"
    assert runner(cond, 1, 2) == (taken,)
    assert (then_branch if taken == "then" else else_branch).ran == [(1, 2)]
    with pytest.raises(cyloop.ExecutionError, match=r"If 'c': the condition must be one "
                                                    r"boolean, got shape \(2,\)"):
        runner(np.array([True, False]))
