"""ai.onnx.ml ops that scikit-learn converters (skl2onnx) write on tensors: Scaler, Normalizer,
Binarizer, ArrayFeatureExtractor, LinearRegressor, as onnxruntime computes them (their results
in float32, whatever the input's number type, where the schema says so)."""

import numpy as np

from ..registry import kernel

ML = "ai.onnx.ml"
_FLOAT32 = np.dtype(np.float32)


def _rows(x):
    """x as float32 rows: a 1-D x is one row (ONNX-ML's [N, C] or [C] inputs)."""
    x = np.asarray(x)
    return x.reshape(1, -1) if x.ndim == 1 else x


@kernel("Scaler", domain=ML, since=1)
def scaler(attrs):
    """Scaler-1: ``(x - offset) * scale`` in float32, offset and scale one value or one a
    column."""
    offset = np.asarray(attrs.get("offset", [0.0]), np.float32)
    scale = np.asarray(attrs.get("scale", [1.0]), np.float32)

    def scaled(x):
        if offset.size not in (1, x.shape[-1]) or scale.size not in (1, x.shape[-1]):
            raise ValueError(f"Scaler: offset ({offset.size}) and scale ({scale.size}) need 1 "
                             f"or {x.shape[-1]} values (the input's last dimension)")
        return (np.asarray(x, np.float32) - offset) * scale

    return scaled


@kernel("Normalizer", domain=ML, since=1)
def normalizer(attrs):
    """Normalizer-1: each row over its MAX (largest value), L1 or L2 norm, in float32; a row
    of norm 0 is left as it is (onnxruntime divides only by a norm that is not 0)."""
    norm = attrs.get("norm", "MAX")
    if norm not in ("MAX", "L1", "L2"):
        raise ValueError(f"Normalizer: norm must be MAX, L1 or L2, not {norm!r}")

    def normalized(x):
        rows = _rows(x).astype(np.float32)
        if norm == "MAX":
            size = np.max(rows, axis=1, keepdims=True, initial=-np.inf)
        elif norm == "L1":
            size = np.sum(np.abs(rows), axis=1, keepdims=True)
        else:
            size = np.sqrt(np.sum(rows * rows, axis=1, keepdims=True))
        result = rows / np.where(size == 0, np.float32(1), size)
        return result.reshape(np.shape(x))

    return normalized


@kernel("Binarizer", domain=ML, since=1)
def binarizer(attrs):
    """Binarizer-1: 1 where x is above `threshold`, else 0, in x's type."""
    threshold = float(attrs.get("threshold", 0.0))

    def binarized(x):
        return (x > threshold).astype(x.dtype)

    return binarized


@kernel("ArrayFeatureExtractor", domain=ML, since=1)
def array_feature_extractor(attrs):
    """ArrayFeatureExtractor-1: the entries of x's last axis that the indices name (a 1-D x
    gives one row, as in onnxruntime); an index out of range is refused."""

    def extracted(x, indices):
        indices = np.asarray(indices, np.int64).reshape(-1)
        width = x.shape[-1]
        if indices.size and (indices.min() < 0 or indices.max() >= width):
            raise IndexError(f"ArrayFeatureExtractor: indices {indices.tolist()} past the last "
                             f"axis of {width}")
        taken = np.take(x, indices, axis=-1)
        return taken.reshape(1, -1) if x.ndim == 1 else taken

    return extracted


@kernel("LinearRegressor", domain=ML, since=1)
def linear_regressor(attrs):
    """LinearRegressor-1: ``x @ coefficients.T + intercepts`` in float32, coefficients one row a
    target; post_transform NONE only (the schema's other values are for classifiers)."""
    targets = int(attrs.get("targets", 1))
    coefficients = np.asarray(attrs.get("coefficients", []), np.float32).reshape(targets, -1).T
    intercepts = np.asarray(attrs.get("intercepts", np.zeros(targets)), np.float32)
    if attrs.get("post_transform", "NONE") != "NONE":
        raise ValueError(f"LinearRegressor: post_transform {attrs['post_transform']!r} is not "
                         "supported (NONE only)")

    def predicted(x):
        return _rows(x).astype(np.float32) @ coefficients + intercepts

    return predicted
