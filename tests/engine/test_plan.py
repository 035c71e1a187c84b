"""`Model.plan()`: the printable plan, built from each driver's `LoopFacts`: every loop operand's
kind and place, the planner's aliasing, hoisting and what the runs measured."""

import pytest

import cyloop
from cyloop import _examples


def test_plan_shows_aliasing():
    graph, feeds = _examples.rnn(steps=8)
    model = cyloop.Model(graph, driver="cython")
    model.run(feeds)
    text = str(model.plan())
    assert "h <- h_next: lives in slot i of output #1" in text
    assert "Tanh writes slot i in place" in text
    assert "sliced" in text and "invariant" in text and "carried" in text
    (loop,) = model.plan().loops
    assert loop.preallocated_bytes == 8 * 4 * 32 * 4
    assert loop.copied_bytes_per_iteration == 0


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_both_drivers_describe_the_same_loop_operands(driver):
    """The spec's reading (input kinds, outputs, trip count) is the same whatever the driver;
    only the placement lines differ."""
    graph, feeds = _examples.rnn(steps=8)
    model = cyloop.Model(graph, driver=driver, hoist=False)
    text = str(model.plan())
    assert f"[{'cython' if driver == 'cython' else 'pure-Python'} driver]" in text
    assert "not run yet" in text
    kinds = [line.split()[2] for line in text.splitlines() if line.strip().startswith("input")]
    assert kinds == ["sliced", "carried", "invariant", "invariant", "invariant"]
    model.run(feeds)
    assert "measured over 1 run(s), 8 iteration(s)" in str(model.plan())

