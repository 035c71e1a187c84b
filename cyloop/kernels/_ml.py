"""What the ai.onnx.ml classifiers and regressors share: the score post-transforms (NONE,
LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT) and the label outputs, as onnxruntime computes them.

Scores are float32 rows [N, C]. On rows of two or more scores a transform applies to each row;
a single score a row is a binary model's, which onnxruntime widens to two columns by one of four
rules (`second_class`, its ``add_second_class``), or leaves alone (-1). PROBIT is onnxruntime's:
``sqrt(2) * erfinv(2 p - 1)`` with Winitzki's approximation of erfinv (a = 0.147), not the exact
quantile, so that results agree with models scored there.
"""

import numpy as np

__all__ = ["TRANSFORMS", "as_float_rows", "labels_array", "logistic", "post_transform",
           "probit"]

TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
_F = np.float32


def as_float_rows(x):
    """x as float32 rows [N, F]: a 1-D x is one row (the ML ops' [N, F] or [F] inputs)."""
    x = np.asarray(x)
    if x.ndim == 0:
        raise ValueError("the input needs at least one dimension")
    rows = x.reshape(1, -1) if x.ndim == 1 else x.reshape(x.shape[0], -1)
    return rows.astype(_F, copy=False)


def check_transform(name):
    if name not in TRANSFORMS:
        raise ValueError(f"post_transform must be one of {', '.join(TRANSFORMS)}, not {name!r}")
    return name


def logistic(x):
    """``1 / (1 + exp(-x))`` in float32, computed on |x| (no overflow) as onnxruntime does."""
    v = _F(1) / (_F(1) + np.exp(-np.abs(x)))
    return np.where(x < 0, _F(1) - v, v).astype(_F, copy=False)


def probit(p):
    """onnxruntime's ``sqrt(2) * ErfInv(2 p - 1)`` (Winitzki's approximation) in float32."""
    x = _F(2) * np.asarray(p, _F) - _F(1)
    sign = np.where(x < 0, _F(-1), _F(1))
    log = np.log((_F(1) - x) * (_F(1) + x))
    v = _F(2) / (_F(np.pi) * _F(0.147)) + _F(0.5) * log
    v2 = _F(1) / _F(0.147) * log
    return (_F(np.sqrt(2)) * sign * np.sqrt(-v + np.sqrt(v * v - v2))).astype(_F, copy=False)


def _softmax(rows, zero):
    top = np.max(rows, axis=1, keepdims=True, initial=-np.finfo(_F).max)
    if not zero:
        e = np.exp(rows - top)
        return e / np.sum(e, axis=1, keepdims=True, dtype=_F)
    # SOFTMAX_ZERO: scores of (nearly) 0 stay (nearly) 0 and count nothing in the sum.
    nonzero = np.abs(rows) > _F(1e-7)
    e = np.where(nonzero, np.exp(rows - top), rows * np.exp(-top))
    total = np.sum(np.where(nonzero, e, _F(0)), axis=1, keepdims=True, dtype=_F)
    return e / total


def post_transform(scores, transform, second_class=-1):
    """`scores` [N, C] float32 after `transform`; with C == 1, widened to [N, 2] by rule
    `second_class` (0 or 1: ``[1 - s, s]``; 2 or 3: ``[-s, s]``; with LOGISTIC both rules
    give ``[1 - logistic(s), logistic(s)]``) unless the rule is -1.

    PROBIT on a single score widened so is onnxruntime's own layout: the N transformed scores
    fill the first half of the [N, 2] result, row-major, and the rest is 0 (it transforms the
    packed scores and never widens them)."""
    scores = np.asarray(scores, _F)
    with np.errstate(all="ignore"):
        if scores.shape[1] == 1:
            if transform == "PROBIT":
                if second_class < 0:
                    return probit(scores)
                packed = np.zeros(2 * scores.shape[0], _F)
                packed[:scores.shape[0]] = probit(scores[:, 0])
                return packed.reshape(-1, 2)
            if second_class < 0:
                return scores
            if transform == "LOGISTIC":
                p = logistic(scores)
                return np.concatenate([_F(1) - p, p], axis=1)
            if second_class in (0, 1):
                return np.concatenate([_F(1) - scores, scores], axis=1)
            return np.concatenate([-scores, scores], axis=1)
        if transform == "PROBIT":
            return probit(scores)
        if transform == "LOGISTIC":
            return logistic(scores)
        if transform in ("SOFTMAX", "SOFTMAX_ZERO"):
            return _softmax(scores, transform == "SOFTMAX_ZERO").astype(_F, copy=False)
        return scores


def first_max(scores):
    """The index of each row's largest score, as a C loop keeping the first strictly larger
    value finds it: NaN never wins, and a row starting with NaN keeps 0."""
    if scores.shape[1] == 0:
        return np.zeros(scores.shape[0], np.int64)
    filled = np.where(np.isnan(scores), -np.inf, scores)
    index = np.argmax(filled, axis=1)
    return np.where(np.isnan(scores[:, 0]), 0, index)


def labels_array(labels, strings):
    """A label list as the array its op returns: str objects or int64."""
    return np.array(labels, dtype=object) if strings else np.asarray(labels, np.int64)
