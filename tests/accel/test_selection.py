"""A TopK's selection (`_selection`: each lane read once against a heap of the k best): the
indices of a stable sort's first k, whichever way the lanes lie in memory (rows, or columns of a
transposed table) and however many keys tie; and TopK with it against onnxruntime, under both
drivers."""

import numpy as np
import pytest
from onnx import helper

from cyloop.accel._selection import smallest_columns, smallest_rows
from cyloop.kernels.onnx.reduction import _smallest

from ..support.nodes import assert_native_matches
from ..support.onnx_models import model, tensor


def _stable_first(keys, k, axis):
    return np.take(np.argsort(keys, axis=axis, kind="stable"), range(k), axis=axis)


def _keys(rng, dtype, shape, ties):
    """Random keys; `ties`: few distinct values (most keys tie), signed zeros among them."""
    keys = rng.standard_normal(shape)
    if ties:
        keys = np.round(keys * 2) / 2 * np.where(rng.random(shape) < 0.5, 1, -1)
    return keys.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("rows, n, k", [(1, 1, 1), (3, 7, 7), (5, 40, 1), (6, 40, 5),
                                        (4, 100, 33), (0, 9, 2)])
def test_rows_and_columns_against_a_stable_sort(dtype, ties, rows, n, k, rng):
    keys = _keys(rng, dtype, (rows, n), ties)
    want = _stable_first(keys, k, -1)
    out = np.full((rows, k), -1, np.int64)
    smallest_rows(keys, k, out)
    np.testing.assert_array_equal(out, want)
    out = np.full((rows, k), -1, np.int64)
    smallest_columns(np.ascontiguousarray(keys.T), k, out)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32], ids=["f32", "f64", "i32"])
@pytest.mark.parametrize("layout", ["C", "F", "reversed", "3-d"])
@pytest.mark.parametrize("order", ["random", "ascending", "descending"])
def test_smallest_on_any_layout_against_a_stable_sort(dtype, layout, order, rng):
    keys = _keys(rng, np.float64, (12, 60), ties=True) * 4
    if order != "random":
        keys = np.sort(keys, axis=-1)[:, ::1 if order == "ascending" else -1]
    keys = keys.astype(dtype)
    keys = {"C": keys, "F": np.asfortranarray(keys), "reversed": keys[:, ::-1],
            "3-d": keys.reshape(3, 4, 60).transpose(2, 0, 1)}[layout]
    for axis in range(keys.ndim):
        for k in (1, 3, keys.shape[axis] // 4 - 1):
            if k >= 1:
                np.testing.assert_array_equal(_smallest(keys, k, axis),
                                              _stable_first(keys, k, axis), err_msg=(axis, k))


def _transposed_top_k(dtype, k, largest, axis):
    """TopK of the transpose of the input (a k-NN model's spelling: a Scan's table of distances,
    transposed, then the k nearest), as one model."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Sqrt", ["t"], ["s"]),
             helper.make_node("TopK", ["s", "k"], ["values", "indices"], largest=largest,
                              axis=axis)]
    graph = helper.make_graph(
        nodes, "top_k", [tensor("x", dtype, [None, None])],
        [tensor("values", dtype, None), tensor("indices", np.int64, None)],
        initializer=[helper.make_tensor("k", 7, [1], [k])])
    return model(graph, 13)


@pytest.mark.parametrize("driver", ["cython", "python"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("largest", [0, 1], ids=["smallest", "largest"])
@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_top_k_of_a_transposed_table_against_onnxruntime(driver, dtype, largest, axis, ties,
                                                         rng):
    x = np.abs(_keys(rng, dtype, (50, 30), ties))
    assert_native_matches(_transposed_top_k(dtype, 4, largest, axis), {"x": x}, driver=driver)
