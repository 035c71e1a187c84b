"""Shape arithmetic outside loops, run once per input shapes (engine/shape_memo.py): a run on
inputs of shapes seen before binds the values it made then. The reference driver runs every node
every run: each run here gives what it gives, and what a kept value becomes in the caller's hands
never reaches a later run."""

import numpy as np

import cyloop
from cyloop.engine import shape_memo
from cyloop.ir import GraphBuilder
from cyloop.kernels.registry import kernel
from cyloop.tuning import SHAPE_MEMO_KEYS


def _zeros_like_rows_graph():
    """tf2onnx's initial state: zeros of shape [batch, 3], the batch read from x's shape after a
    Transpose, returned with x's row sums added and the batch size itself."""
    b = GraphBuilder("g", opset=17)
    x = b.input("x", np.float32)
    xt = b.node("Transpose", x, perm=[1, 0])
    batch = b.node("Slice", b.node("Shape", xt), b.const(np.array([1])), b.const(np.array([2])),
                   b.const(np.array([0])))
    shape = b.node("Concat", batch, b.const(np.array([3])), axis=0)
    zeros = b.node("Expand", b.const(np.float32(0)), shape)
    sums = b.node("ReduceSum", x, b.const(np.array([1])), keepdims=1)
    b.output(b.node("Add", zeros, sums, outputs=["state"]))
    b.output(b.node("Cast", batch, to=np.int32, outputs=["batch"]))
    return b.build()


def _both(graph):
    return cyloop.Model(graph, driver="cython"), cyloop.Model(graph, driver="python")


def test_values_follow_the_shapes_run_after_run(rng):
    fast, reference = _both(_zeros_like_rows_graph())
    for rows in (2, 2, 5, 2, 5, 7):
        feeds = {"x": rng.standard_normal((rows, 4)).astype(np.float32)}
        got, want = fast.run(feeds), reference.run(feeds)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
            assert got[name].dtype == want[name].dtype
    plan = fast.plan()
    ops = [label.split()[0] for label in plan.shape_arithmetic]
    assert ops == ["Shape", "Slice", "Concat", "Expand", "Cast"] and plan.shapes_kept == 3


def test_a_kept_value_returned_is_the_callers_own(rng):
    """The batch size is a graph output: each run hands over a copy the caller may write."""
    fast, _ = _both(_zeros_like_rows_graph())
    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32)}
    first = fast.run(feeds)["batch"]
    first[...] = -1
    second = fast.run(feeds)["batch"]
    assert second.flags.writeable and not np.shares_memory(first, second)
    np.testing.assert_array_equal(second, [3])


def test_values_made_of_data_are_made_each_run(rng):
    """The shape of NonZero's result follows x's values, not its shape: Shape of it is no shape
    arithmetic, nor is what is made of it."""
    b = GraphBuilder("g", opset=17)
    x = b.input("x", np.float32, (None,))
    count = b.node("Shape", b.node("NonZero", x))
    b.output(b.node("Concat", count, b.node("Shape", x), axis=0, outputs=["y"]))
    fast, reference = _both(b.build())
    for _ in range(3):
        feeds = {"x": (rng.standard_normal(6) > 0).astype(np.float32)}
        np.testing.assert_array_equal(fast.run(feeds)["y"], reference.run(feeds)["y"])
    (only,) = fast.plan().shape_arithmetic  # (the Shape of x)
    assert only.startswith("Shape ") and "shape_3" in only


def test_errors_are_the_nodes_errors_whatever_ran_before():
    """A rank-1 input makes the Gather of its shape fail, before and after shapes that work."""
    b = GraphBuilder("g", opset=17)
    x = b.input("x", np.float32)
    b.output(b.node("Gather", b.node("Shape", x), b.const(np.int64(1)), outputs=["y"]))
    fast, reference = _both(b.build())
    for shape in ((2,), (2, 3), (2,), (4, 5), (2, 3)):
        outcomes = []
        for model in (fast, reference):
            try:
                outcomes.append(model.run({"x": np.ones(shape, np.float32)})["y"])
            except cyloop.CyloopError as e:
                outcomes.append(f"{type(e).__name__}: {e}")
        if len(shape) == 1:
            assert isinstance(outcomes[0], str) and outcomes[0] == outcomes[1]
        else:
            np.testing.assert_array_equal(outcomes[0], outcomes[1])


_COUNTED: list = []


@kernel("Counted", domain="test.cyloop")
def _counted(attrs):
    """``x + 1``, each call counted."""
    def counted(x):
        _COUNTED.append(x.shape)
        return x + 1

    return counted


def test_a_run_on_shapes_seen_before_runs_none_of_it(monkeypatch):
    monkeypatch.setattr(shape_memo, "_PURE", shape_memo._PURE | {("test.cyloop", "Counted")})
    b = GraphBuilder("g", opset=17, opsets={"test.cyloop": 1})
    x = b.input("x", np.float32)
    b.output(b.node("Counted", b.node("Shape", x), domain="test.cyloop", outputs=["y"]))
    model = cyloop.Model(b.build(), driver="cython")
    _COUNTED.clear()
    shapes = [(2, 3), (2, 3), (4, 1), (2, 3), (4, 1), (4, 1)]
    for shape in shapes:
        got = model.run({"x": np.zeros(shape, np.float32)})["y"]
        np.testing.assert_array_equal(got, np.array(shape) + 1)
    assert _COUNTED == [(2,), (2,)]  # (once for each of the two shapes)
    # Past SHAPE_MEMO_KEYS shapes, the first one kept makes way.
    for k in range(SHAPE_MEMO_KEYS):
        model.run({"x": np.zeros((1, k + 5), np.float32)})
    _COUNTED.clear()
    model.run({"x": np.zeros((2, 3), np.float32)})
    assert _COUNTED == [(2,)]


def test_values_too_large_to_keep_are_made_each_run():
    b = GraphBuilder("g", opset=17)
    x = b.input("x", np.float32)
    filled = b.node("ConstantOfShape", b.node("Shape", x), value=np.array([1], np.float64))
    b.output(b.node("Cast", filled, to=np.float32, outputs=["y"]))
    graph = b.build()
    model = cyloop.Model(graph, driver="cython")
    for _ in range(2):  # (a returned float32 of 1.1 MB, past SHAPE_MEMO_BYTES)
        y = model.run({"x": np.zeros((700, 400), np.float32)})["y"]
        assert y.shape == (700, 400) and (y == 1).all()
    assert not model.plan().shape_arithmetic  # (nothing kept, nor asked for again)
    small = cyloop.Model(graph, driver="cython")
    small.run({"x": np.zeros((2, 2), np.float32)})
    assert small.plan().shapes_kept == 1
