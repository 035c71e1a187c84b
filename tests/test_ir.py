"""The format-neutral IR: `LoopSpec.resolve`, the one reading of a loop's operands both drivers
share (trip count, first condition, slices, where a run must stop), checked against
docs/design.md's rules written out here as a small oracle, and against what both drivers then
run."""

import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import cyloop
from cyloop.engine import _core
from cyloop.ir import (
    CarriedInput,
    ConcatOutput,
    GraphBuilder,
    LastOutput,
    LoopSpec,
    OuterInput,
    SlicedInput,
    slice_count,
)

from .support.drivers import run_both

LABEL = "node 'loop' (Loop)"


def _body():
    body = GraphBuilder("body")
    body.input("x", np.float32, None)
    body.input("acc", np.float32, ())
    body.output(body.node("Add", "acc", body.const(np.float32(1)), outputs=["acc_next"]),
                body.node("Neg", "x", outputs=["y"]))
    return body.build()


def _spec(n_sliced=1, **fields):
    inputs = [CarriedInput(0, "acc", "acc_next")]
    inputs += [SlicedInput(1 + k, "x" if k == 0 else f"x{k}") for k in range(n_sliced)]
    return LoopSpec(_body(), inputs, [LastOutput("acc_next"), ConcatOutput("y")], **fields)


def _expected(trip, cond, lengths, negative_unbounded, slices_set):
    """docs/design.md's rules, independently: (trip count, first condition, stop_at)."""
    if trip is not None and trip < 0:
        trip = None if negative_unbounded else 0
    go = True if cond is None else bool(cond)
    stop_at = None
    if lengths:
        if slices_set:
            trip = min(lengths) if trip is None else min(trip, min(lengths))
        else:
            stop_at = min(lengths)
    return trip, go, stop_at


@settings(max_examples=200, deadline=None)
@given(trip=st.none() | st.integers(-3, 12), cond=st.none() | st.booleans(),
       length=st.integers(0, 9), max_iterations=st.none() | st.integers(1, 10),
       negative_unbounded=st.booleans(), slices_set=st.booleans(), sliced=st.booleans())
@example(trip=-1, cond=None, length=3, max_iterations=None, negative_unbounded=True,
         slices_set=True, sliced=False)
@example(trip=-1, cond=True, length=3, max_iterations=None, negative_unbounded=False,
         slices_set=True, sliced=True)
def test_resolve_follows_the_rules(trip, cond, length, max_iterations, negative_unbounded,
                                   slices_set, sliced):
    spec = _spec(n_sliced=int(sliced), trip_count=OuterInput(2 if sliced else 1),
                 initial_cond=OuterInput(3 if sliced else 2),
                 negative_trip_count_unbounded=negative_unbounded,
                 slices_set_trip_count=slices_set)
    xs = [np.zeros(length, np.float32)] if sliced else []
    args = [np.float32(0), *xs, None if trip is None else np.array(trip, np.int64),
            None if cond is None else np.array(cond)]
    trip_count, go, stop_at = _expected(trip, cond, [length] if sliced else [],
                                        negative_unbounded, slices_set)
    limits = _core.RunLimits(max_iterations)
    # The body has no condition result: a loop that starts runs trip_count iterations unless
    # an error stops it; if that is the budget's end, it is refused before it starts.
    certain = trip_count if go else None
    if (certain is not None and max_iterations is not None and certain > max_iterations
            and (stop_at is None or stop_at > max_iterations)):
        with pytest.raises(cyloop.LoopLimitError, match=f"its {certain} iterations would pass "
                           f"max_iterations={max_iterations} "):
            spec.resolve(args, LABEL, limits)
        return
    run = spec.resolve(args, LABEL, limits)
    assert (run.trip_count, run.go, run.stop_at) == (trip_count, go, stop_at)
    if certain is not None and (stop_at is None or certain <= stop_at):
        assert run.exact == certain
    else:
        assert run.exact is None
    assert run.bound == min([n for n in (trip_count, stop_at, max_iterations) if n is not None],
                            default=None)


def test_a_condition_result_makes_the_count_unknown():
    body = GraphBuilder("body")
    body.input("acc", np.float32, ())
    body.output(body.node("Add", "acc", body.const(np.float32(1)), outputs=["acc_next"]),
                body.node("Less", "acc", body.const(np.float32(3)), outputs=["more"]))
    spec = LoopSpec(body.build(), [CarriedInput(0, "acc", "acc_next")], [LastOutput("acc_next")],
                    trip_count=10, cond_result="more")
    run = spec.resolve([np.float32(0)], LABEL)
    assert (run.trip_count, run.exact, run.bound) == (10, None, 10)


@pytest.mark.parametrize("trip,error", [
    (np.array([1, 2]), r"trip count must be one integer, got shape \(2,\)"),
    (np.array(2.0), "trip count must be one integer.*float64"),
])
def test_bad_trip_counts_name_the_loop(trip, error):
    spec = _spec(n_sliced=0, trip_count=OuterInput(1))
    with pytest.raises(cyloop.ModelError, match=re.escape(LABEL) + ": the " + error):
        spec.resolve([np.float32(0), trip], LABEL)


def test_a_condition_of_many_values_is_refused():
    spec = _spec(n_sliced=0, initial_cond=OuterInput(1))
    with pytest.raises(cyloop.ModelError, match=r"condition must be one boolean, got shape \(3,\)"):
        spec.resolve([np.float32(0), np.ones(3, bool)], LABEL)


def test_sliced_inputs_that_set_the_count_must_agree():
    spec = _spec(n_sliced=2)
    with pytest.raises(cyloop.ModelError, match=r"disagree .*'x': 4, 'x1': 5"):
        spec.resolve([np.float32(0), np.zeros(4), np.zeros(5)], LABEL)


def test_stopping_past_the_fewest_parts_or_the_limit_says_which():
    spec = _spec(n_sliced=2, trip_count=OuterInput(3), slices_set_trip_count=False)
    args = [np.float32(0), np.zeros(4), np.zeros(6), np.array(10)]
    run = spec.resolve(args, LABEL)
    assert run.stop_at == 4
    error = run.stop_error(4, LABEL)
    assert isinstance(error, cyloop.ModelError) and "past the last slice of sliced input 'x' " \
        "(4 parts)" in str(error)
    # The slices run out at iteration 4, before a budget of 5 does: that is the error it meets.
    assert spec.resolve(args, LABEL, _core.RunLimits(5)).stop_at == 4
    with pytest.raises(cyloop.LoopLimitError, match="its 10 iterations would pass "
                       r"max_iterations=3 \(0 already run\)"):
        spec.resolve(args, LABEL, _core.RunLimits(3))


@pytest.mark.parametrize("stride,part", [(1, 1), (-1, 1), (2, 2), (-3, 1)])
def test_the_part_count_is_slice_count_and_both_drivers_run_it(stride, part):
    spec_args = {"axis": 0, "stride": stride, "part_size": part, "keep_axis": True}
    x = np.arange(11, dtype=np.float32)
    count, _ = slice_count(len(x), *((0, -1) if stride > 0 else (-1, 0)), stride, part)
    spec = LoopSpec(_body(), [CarriedInput(0, "acc", "acc_next"), SlicedInput(1, "x", **spec_args)],
                    [LastOutput("acc_next"), ConcatOutput("y", new_axis=False)])
    assert spec.resolve([np.float32(0), x], LABEL).trip_count == count
    g = GraphBuilder()
    g.input("acc0", np.float32, ())
    g.input("X", np.float32, (11,))
    g.loop(_body(), [("acc0", spec.inputs[0]), ("X", spec.inputs[1])], spec.outputs,
           output_names=["acc", "ys"])
    g.output("acc", "ys")
    out = run_both(g.build(), {"acc0": np.float32(0), "X": x})
    assert out["acc"] == count and len(out["ys"]) == count * part


def test_zero_iteration_values_are_the_initial_carried_values():
    spec = _spec(n_sliced=0)
    initial = np.float32(7)
    assert spec.zero_iteration_value(0, {0: initial}, LABEL) is initial
    with pytest.raises(cyloop.ModelError, match="output #1 .*'y'.*ran zero iterations"):
        spec.zero_iteration_value(1, {0: initial}, LABEL)
