"""The ai.onnx.ml kernels (kernels/onnx/ml.py) against onnxruntime, on the input types its ML
kernels implement (Binarizer and LinearRegressor: float32 only)."""

import numpy as np
import pytest

import cyloop
from tests.support.nodes import assert_native_matches, one_node

RNG = np.random.default_rng(5)
X = RNG.standard_normal((4, 3)).astype(np.float32) * 5
TYPES = [np.float32, np.float64, np.int64, np.int32]


def _cases():
    for dtype in TYPES:
        x = X.astype(dtype)
        for attrs in ({"offset": [1.0], "scale": [2.0]},
                      {"offset": [1.0, 2.0, 3.0], "scale": [0.5, 1.0, 2.0]}):
            yield "Scaler", attrs, [x]
            yield "Scaler", attrs, [x[0]]
        for norm in ("MAX", "L1", "L2"):
            for data in (x, x[0], np.zeros((2, 3), dtype), -np.abs(x)):
                yield "Normalizer", {"norm": norm}, [data]
        for indices in ([0, 2], [1], [2, 2, 0]):
            for data in (x, x[0], x.reshape(2, 2, 3)):
                yield "ArrayFeatureExtractor", {}, [data, np.array(indices, np.int64)]
    for attrs in ({"threshold": 0.5}, {}):
        yield "Binarizer", attrs, [X]
    for targets in (1, 2):
        attrs = {"coefficients": RNG.standard_normal(3 * targets).tolist(),
                 "intercepts": RNG.standard_normal(targets).tolist(), "targets": targets}
        yield "LinearRegressor", attrs, [X]
        yield "LinearRegressor", attrs, [X[0]]
    yield "LinearRegressor", {"coefficients": [1.0, 2.0, 3.0]}, [X]


CASES = list(_cases())


@pytest.mark.parametrize("op, attrs, inputs", CASES,
                         ids=[f"{op}-{inputs[0].dtype}-{inputs[0].ndim}d-{k}"
                              for k, (op, attrs, inputs) in enumerate(CASES)])
def test_ml_kernels_match_onnxruntime(op, attrs, inputs):
    model, feeds = one_node(op, 1, attrs, inputs, domain="ai.onnx.ml")
    assert_native_matches(model, feeds)


def test_array_feature_extractor_refuses_an_index_past_the_axis():
    model, feeds = one_node("ArrayFeatureExtractor", 1, {}, [X, np.array([3], np.int64)],
                            domain="ai.onnx.ml")
    with pytest.raises(cyloop.ExecutionError, match="ArrayFeatureExtractor"):
        cyloop.load(model).run(feeds)
