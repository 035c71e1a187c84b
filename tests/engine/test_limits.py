"""A run's limits: max_iterations counts the iterations of all its loops, nested ones included;
time_limit bounds its wall-clock time; memory_limit caps the buffers the planner allocates. Both
drivers stop at the same iteration with the same error, and a run under its limits gives what an
unlimited run gives."""

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import cyloop
from cyloop._examples import counter
from cyloop.ir import CarriedInput, ConcatOutput, GraphBuilder
from cyloop.kernels.registry import kernel

from ..support.drivers import run_both
from ..support.loops import keep_going, nested

DRIVERS = ("cython", "python")


def _error(graph, feeds, driver, **options):
    """The error a run raises (it must raise one)."""
    model = cyloop.Model(graph, driver=driver, **options)
    with pytest.raises(cyloop.CyloopError) as caught:
        model.run(dict(feeds))
    return caught.value


@pytest.mark.parametrize("by_condition", [True, False], ids=["by-condition", "by-trip-count"])
def test_max_iterations_counts_nested_loops_together(by_condition):
    outer, inner = 4, 6
    graph, feeds = nested(outer, inner, by_condition)
    total = outer + outer * inner
    unlimited = run_both(graph, feeds, max_iterations=None)
    assert unlimited["total"] == outer * inner
    np.testing.assert_array_equal(run_both(graph, feeds, max_iterations=total)["totals"],
                                  unlimited["totals"])
    errors = [_error(graph, feeds, driver, max_iterations=total - 1) for driver in DRIVERS]
    assert all(type(e) is cyloop.LoopLimitError for e in errors)
    assert str(errors[0]) == str(errors[1])
    if by_condition:
        # The last inner iteration is the one past the budget.
        assert f"'counted': iteration {inner - 1} would pass max_iterations={total - 1}" \
            in str(errors[0])
    else:
        # The last inner loop, whose trip count is known, is refused before it starts.
        assert (f"'counted': its {inner} iterations would pass max_iterations={total - 1} "
                f"({total - inner} already run)") in str(errors[0])


def test_the_outer_loop_is_stopped_at_its_own_iteration():
    graph, feeds = nested(4, 6, by_condition=True)
    for driver in DRIVERS:
        error = _error(graph, feeds, driver, max_iterations=1 + 6)  # one outer iteration's worth
        assert "'total': iteration 1 would pass max_iterations=7" in str(error)


def test_a_known_trip_count_past_the_budget_is_refused_at_once():
    """A trip count of 2^62 is an error before the first iteration, not after 10^8 of them."""
    graph, feeds = counter(2**62)
    for driver in DRIVERS:
        error = _error(graph, feeds, driver)
        assert isinstance(error, cyloop.LoopLimitError)
        assert f"its {2**62} iterations would pass max_iterations=100000000 (0 already run)" \
            in str(error)


def test_a_loop_that_does_not_start_is_not_refused():
    graph, feeds = counter(2**62)
    graph.nodes[0].attrs["spec"].initial_cond = False
    assert run_both(graph, feeds)["acc"] == 0


def test_time_limit_stops_a_run_and_names_the_loop():
    """A limit far below one run's time: the first clock read, before the loop node runs, finds
    it passed."""
    graph, feeds = nested(50, 50, by_condition=True)
    for driver in DRIVERS:
        error = _error(graph, feeds, driver, time_limit=1e-9)
        assert type(error) is cyloop.LoopLimitError
        assert str(error).startswith("Loop node producing 'total': stopped before it ran: the "
                                     "run passed time_limit=1e-09 s")


def test_run_gives_its_own_time_limit():
    graph, feeds = nested(20, 20, by_condition=True)
    expected = run_both(graph, feeds)
    for driver in DRIVERS:
        strict = cyloop.Model(graph, driver=driver, time_limit=1e-9)
        got = strict.run(dict(feeds), time_limit=None)
        np.testing.assert_array_equal(got["totals"], expected["totals"])
        with pytest.raises(cyloop.LoopLimitError, match="time_limit=1e-09 s"):
            strict.run(dict(feeds))
        lax = cyloop.Model(graph, driver=driver)
        with pytest.raises(cyloop.LoopLimitError, match="time_limit=1e-09 s"):
            lax.run(dict(feeds), time_limit=1e-9)
        np.testing.assert_array_equal(lax.run(dict(feeds))["totals"], expected["totals"])


ENDLESS_SCRIPT = textwrap.dedent("""
    import sys, time
    import cyloop
    from tests.support.loops import nested
    graph, feeds = nested(None, int(sys.argv[2]), by_condition=True)
    model = cyloop.Model(graph, driver=sys.argv[1], max_iterations=None,
                         time_limit=float(sys.argv[3]))
    start = time.perf_counter()
    try:
        model.run(feeds)
    except cyloop.LoopLimitError as e:
        print(time.perf_counter() - start, e)
""")


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("inner", [1, 1000])
def test_time_limit_ends_an_endless_loop(driver, inner):
    """An outer loop that never stops, of short or long inner loops: time_limit ends it (in a
    child process, so that a failure is a timeout here, not a hung test run)."""
    proc = subprocess.run([sys.executable, "-c", ENDLESS_SCRIPT, driver, str(inner), "0.3"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    took, message = proc.stdout.split(" ", 1)
    assert float(took) >= 0.3
    assert "the run passed time_limit=0.3 s" in message


@pytest.mark.parametrize("value,error", [
    (0, "time_limit must be None or > 0 seconds, not 0"),
    (-1.5, "time_limit must be None or > 0 seconds, not -1.5"),
    (float("nan"), "time_limit must be None or > 0 seconds, not nan"),
    ("10", "time_limit must be None or a number of seconds, not str '10'"),
    (True, "time_limit must be None or a number of seconds, not bool True"),
])
def test_bad_time_limits_are_input_errors(value, error):
    graph, _ = counter(3)
    with pytest.raises(cyloop.InputError, match=error):
        cyloop.Model(graph, time_limit=value)
    model = cyloop.Model(graph)
    with pytest.raises(cyloop.InputError, match=error):
        model.run({"acc0": np.float32(0)}, time_limit=value)


@pytest.mark.parametrize("option,value,error", [
    ("memory_limit", 0, "memory_limit must be None or >= 1, not 0"),
    ("memory_limit", 2.5, "memory_limit must be None or an integer, not float 2.5"),
    ("max_iterations", -1, "max_iterations must be None or >= 0, not -1"),
    ("max_iterations", 1e6, "max_iterations must be None or an integer, not float 1000000.0"),
    ("driver", "c", "driver must be 'cython' or 'python', not 'c'"),
])
def test_bad_options_are_input_errors(option, value, error):
    graph, _ = counter(3)
    with pytest.raises(cyloop.InputError, match=error):
        cyloop.Model(graph, **{option: value})


def test_an_infinite_time_limit_is_none():
    graph, _ = counter(3)
    assert cyloop.Model(graph, time_limit=float("inf")).settings.time_limit is None


def _rows(trip_count, row_bytes, by_condition):
    """A loop emitting `trip_count` rows of `row_bytes` float32 bytes (row i filled with i),
    stopped by its trip count or by its condition result (then its length is not known before
    it runs)."""
    body = GraphBuilder("body")
    i = body.input("i", np.int64, ())
    body.input("c", np.bool_, ())
    acc = body.input("acc", np.float32, ())
    row = body.node("Add", body.const(np.zeros(row_bytes // 4, np.float32)), acc, outputs=["row"])
    results = [body.node("Add", acc, body.const(np.float32(1)), outputs=["acc_next"]), row]
    if by_condition:
        results.insert(0, keep_going(body, i, trip_count, "more"))
    body.output(*results)
    g = GraphBuilder()
    g.input("acc0", np.float32, ())
    g.loop(body.build(), inputs=[("acc0", CarriedInput(0, "acc", "acc_next"))],
           outputs=[ConcatOutput("row")], trip_count=None if by_condition else trip_count,
           iteration_param="i", cond_param="c", cond_result="more" if by_condition else None,
           output_names=["rows"])
    g.output("rows")
    return g.build(), {"acc0": np.array(0, np.float32)}


@pytest.mark.parametrize("by_condition", [True, False], ids=["by-condition", "by-trip-count"])
def test_memory_limit_caps_a_concatenated_output(by_condition):
    n, row_bytes = 1000, 1024
    graph, feeds = _rows(n, row_bytes, by_condition)
    expected = run_both(graph, feeds)["rows"]
    # At the limit exactly, the run is unchanged.
    np.testing.assert_array_equal(run_both(graph, feeds, memory_limit=n * row_bytes)["rows"],
                                  expected)
    limit = 100 * row_bytes + 10
    errors = [_error(graph, feeds, driver, memory_limit=limit) for driver in DRIVERS]
    assert all(type(e) is cyloop.ResourceLimitError for e in errors)
    assert str(errors[0]) == str(errors[1])
    # A known length is refused as soon as the row size is known; an unknown one when its
    # output grows past the limit.
    rows = 101 if by_condition else n
    assert (f"concatenated output #0 would take {rows * row_bytes} bytes (shape [{rows}, 256], "
            f"float32), past memory_limit={limit}") in str(errors[0])


def test_a_row_larger_than_the_memory_limit():
    graph, feeds = _rows(5, 4096, by_condition=True)
    for driver in DRIVERS:
        error = _error(graph, feeds, driver, memory_limit=1000)
        assert "would take 4096 bytes (shape [1, 1024], float32), past memory_limit=1000" \
            in str(error)


def test_a_kernel_out_of_memory_is_a_resource_limit_error():
    g = GraphBuilder()
    shape = g.input("shape", np.int64, (2,))
    g.output(g.node("ConstantOfShape", shape, outputs=["y"]))
    for driver in DRIVERS:
        error = _error(g.build(), {"shape": np.array([2**30, 2**30])}, driver)
        assert type(error) is cyloop.ResourceLimitError and isinstance(error, MemoryError)
        assert "ConstantOfShape node producing 'y' failed: Unable to allocate" in str(error)


@kernel("Sleep", domain="test.cyloop")
def _sleep(attrs):
    def sleep(x):
        _slept.append(x)
        time.sleep(attrs["seconds"])
        return x

    return sleep


_slept = []


@pytest.mark.parametrize("driver", DRIVERS)
def test_time_limit_is_read_between_the_nodes_outside_loops(driver):
    """Nodes outside loops, each longer than the limit: the run stops before the next one, not
    after all of them."""
    g = GraphBuilder(opsets={"test.cyloop": 1})
    value = g.input("x", np.float32, ())
    for k in range(5):
        value = g.node("Sleep", value, domain="test.cyloop", seconds=0.2, outputs=[f"y{k}"])
    g.output(value)
    _slept.clear()
    error = _error(g.build(), {"x": np.float32(1)}, driver, time_limit=0.1)
    assert "stopped before it ran: the run passed time_limit=0.1 s" in str(error)
    assert 1 <= len(_slept) < 5
