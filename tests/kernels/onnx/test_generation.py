"""The random ops under both drivers. A seeded node's first call draws onnx.reference's numbers
(its generator, numpy's RandomState, seeded alike); later calls go on along the stream, which
the same seed repeats in every load and both drivers, and a Loop draws new numbers each
iteration. onnxruntime's generator is another: against it, the shapes and types, and the
distributions (a two-sample Kolmogorov-Smirnov bound on many draws; Multinomial's class
frequencies)."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import cyloop
from cyloop.narrow import ml_dtypes
from tests.support.nodes import assert_native_matches, one_node, oracle

DRIVERS = ["cython", "python"]
RNG = np.random.default_rng(5)
TYPES = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64,
         TensorProto.FLOAT16: np.float16}


def _generator(op, opset, attrs, like=None):
    """A one-node model of a generator op (`like`: its input)."""
    return one_node(op, opset, attrs, [] if like is None else [like])


CASES = [
    ("RandomNormal", {"shape": [3, 4], "seed": 3.0}),
    ("RandomNormal", {"shape": [5], "seed": 7.9, "mean": 2.0, "scale": 0.5}),
    ("RandomUniform", {"shape": [2, 3, 2], "seed": 1.0}),
    ("RandomUniform", {"shape": [6], "seed": 12.0, "low": -3.0, "high": 5.0}),
    ("RandomNormalLike", {"seed": 4.0, "mean": -1.0, "scale": 3.0}),
    ("RandomUniformLike", {"seed": 9.0, "low": 1.0, "high": 1.5}),
]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("opset", [1, 22])
@pytest.mark.parametrize("element", list(TYPES), ids=[str(t) for t in TYPES.values()])
@pytest.mark.parametrize("op, attrs", CASES, ids=[f"{op}-{a}" for op, a in CASES])
def test_a_seeded_first_draw_is_onnx_references(op, attrs, element, opset, driver):
    like = RNG.standard_normal((4, 2)).astype(TYPES[element]) if op.endswith("Like") else None
    attrs = {**attrs, **({"dtype": element} if like is None or element != TensorProto.FLOAT
                         else {})}  # (a Like op of float32: the input's type)
    model, feeds = _generator(op, opset, attrs, like)
    assert_native_matches(model, feeds, reference=True, driver=driver)


@pytest.mark.parametrize("op, attrs", CASES[:4], ids=[op for op, _ in CASES[:4]])
def test_a_seeded_first_draw_in_bfloat16_is_onnx_references(op, attrs):
    model, feeds = _generator(op, 22, {**attrs, "dtype": TensorProto.BFLOAT16})
    expected = assert_native_matches(model, feeds, reference=True)
    assert expected[0].dtype == ml_dtypes().bfloat16


def test_a_like_op_takes_its_type_from_dtype_over_the_input():
    x = np.zeros((2, 5), np.int64)
    model, feeds = _generator("RandomUniformLike", 1, {"seed": 2.0, "dtype": TensorProto.DOUBLE},
                              x)
    assert_native_matches(model, feeds, reference=True)


def test_a_like_op_of_integers_without_dtype_is_refused():
    model, feeds = _generator("RandomNormalLike", 1, {"seed": 2.0}, np.zeros(3, np.int32))
    with pytest.raises(cyloop.CyloopError, match="int32 input needs a dtype attribute"):
        cyloop.load(model).run(feeds)


def _runs(model, feeds, n, driver=None):
    loaded = cyloop.load(model, driver=driver)
    return [next(iter(loaded.run(feeds).values())) for _ in range(n)]


@pytest.mark.parametrize("op, attrs", CASES + [("Multinomial", {"seed": 5.0,
                                                               "sample_size": 6})],
                         ids=[op for op, _ in CASES] + ["Multinomial"])
def test_a_seed_repeats_its_stream_in_every_load_and_driver(op, attrs):
    like = RNG.standard_normal((3, 4)).astype(np.float32) \
        if op.endswith("Like") or op == "Multinomial" else None
    model, feeds = _generator(op, 7 if op == "Multinomial" else 1, attrs, like)
    first = _runs(model, feeds, 3, "cython")
    assert not np.array_equal(first[0], first[1])  # (the stream goes on)
    for again in (_runs(model, feeds, 3, "cython"), _runs(model, feeds, 3, "python")):
        for mine, theirs in zip(again, first):
            np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("op", ["RandomNormal", "RandomUniform"])
def test_without_a_seed_each_load_draws_its_own(op):
    model, feeds = _generator(op, 1, {"shape": [16]})
    assert not np.array_equal(_runs(model, feeds, 1)[0], _runs(model, feeds, 1)[0])


def _loop_of(op, attrs, trips):
    """A Loop of `trips` iterations emitting each iteration's draw of `op` (no inputs)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node(op, [], ["draw"], **attrs)], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("draw", TensorProto.FLOAT, attrs["shape"])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "keep"], ["draws"], body=body)], "g",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("keep", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("draws", TensorProto.FLOAT, [trips, *attrs["shape"]])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model, {"M": np.array(trips, np.int64), "keep": np.array(True)}


@pytest.mark.parametrize("op", ["RandomNormal", "RandomUniform"])
def test_a_loop_draws_new_numbers_each_iteration_the_first_onnx_references(op):
    model, feeds = _loop_of(op, {"shape": [2, 3], "seed": 11.0}, 4)
    cython, python = (cyloop.load(model, driver=d).run(feeds)["draws"] for d in DRIVERS)
    np.testing.assert_array_equal(cython, python)
    assert len({row.tobytes() for row in cython}) == 4
    (first,) = oracle(*_generator(op, 13, {"shape": [2, 3], "seed": 11.0}), reference=True)
    np.testing.assert_array_equal(cython[0], first)


def _ks_distance(a, b):
    """The two-sample Kolmogorov-Smirnov statistic of samples a and b."""
    a, b = np.sort(a.reshape(-1)), np.sort(b.reshape(-1))
    points = np.concatenate([a, b])
    return np.max(np.abs(np.searchsorted(a, points, side="right") / a.size
                         - np.searchsorted(b, points, side="right") / b.size))


DISTRIBUTIONS = [("RandomNormal", {"mean": 1.5, "scale": 2.0}),
                 ("RandomUniform", {"low": -2.0, "high": 3.0}),
                 ("RandomNormalLike", {"scale": 0.5}), ("RandomUniformLike", {"high": 4.0})]


@pytest.mark.parametrize("element", list(TYPES), ids=[str(t) for t in TYPES.values()])
@pytest.mark.parametrize("op, attrs", DISTRIBUTIONS, ids=[op for op, _ in DISTRIBUTIONS])
def test_draws_are_distributed_as_onnxruntimes(op, attrs, element):
    n = 20000

    def model_of(element):
        if op.endswith("Like"):
            return _generator(op, 1, attrs, np.zeros((100, n // 100), TYPES[element]))
        return _generator(op, 1, {**attrs, "shape": [100, n // 100], "dtype": element})

    # (onnxruntime has no float16 random ops: its float32 draws, rounded)
    (theirs,) = oracle(*model_of(TensorProto.FLOAT if element == TensorProto.FLOAT16
                                 else element))
    mine = cyloop.load(model_of(element)[0]).run(model_of(element)[1])["out0"]
    assert mine.dtype == TYPES[element] and mine.shape == theirs.shape
    theirs = theirs.astype(mine.dtype)
    if op.startswith("RandomUniform"):
        low, high = attrs.get("low", 0.0), attrs.get("high", 1.0)
        assert low <= mine.min() and mine.max() <= high
    # (at 20000 draws each, a distance past 0.025 has a chance under 1e-5 if they agree)
    assert _ks_distance(mine.astype(np.float64), theirs.astype(np.float64)) < 0.025


MULTINOMIAL_ROWS = np.array([[0.0, 1.0, 2.0, -1.0], [5.0, 5.0, -np.inf, 0.0],
                             [-3.0, 0.0, 0.0, 0.0]], np.float32)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("opset, dtype", [(7, None), (7, TensorProto.INT64), (22, None)])
def test_multinomial_frequencies_are_onnxruntimes(opset, dtype, driver):
    n = 20000
    attrs = {"sample_size": n, "seed": 3.0, **({"dtype": dtype} if dtype else {})}
    model, feeds = one_node("Multinomial", opset, attrs, [MULTINOMIAL_ROWS])
    (theirs,) = oracle(model, feeds, reference=False) if opset == 7 else oracle(
        *one_node("Multinomial", 7, attrs, [MULTINOMIAL_ROWS]))
    mine = cyloop.load(model, driver=driver).run(feeds)["out0"]
    assert mine.dtype == theirs.dtype and mine.shape == theirs.shape == (3, n)
    for row in range(3):
        ours = np.bincount(mine[row], minlength=4) / n
        onnxruntimes = np.bincount(theirs[row], minlength=4) / n
        # (both estimate one probability p from n draws: their difference's deviation is
        # sqrt(2 p (1 - p) / n) <= 0.0071; 6 of those)
        np.testing.assert_allclose(ours, onnxruntimes, atol=0.03)
    assert not (mine[1] == 2).any()  # (a class of probability 0)


@pytest.mark.parametrize("dtype", [np.float16, np.float64], ids=str)
def test_multinomial_on_other_types_draws_the_float32_classes(dtype):
    attrs = {"sample_size": 50, "seed": 8.0}
    model, feeds = one_node("Multinomial", 7, attrs, [MULTINOMIAL_ROWS.astype(dtype)])
    float32, float32_feeds = one_node("Multinomial", 7, attrs, [MULTINOMIAL_ROWS])
    np.testing.assert_array_equal(cyloop.load(model).run(feeds)["out0"],
                                  cyloop.load(float32).run(float32_feeds)["out0"])


def test_multinomial_refuses_a_tensor_not_2d():
    model, feeds = one_node("Multinomial", 7, {"sample_size": 2}, [MULTINOMIAL_ROWS[0]])
    assert isinstance(oracle(model, feeds), Exception)
    with pytest.raises(cyloop.CyloopError, match=r"Multinomial takes \[batch, classes\]"):
        cyloop.load(model).run(feeds)
