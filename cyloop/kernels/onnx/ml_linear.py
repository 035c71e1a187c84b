"""ai.onnx.ml's linear and kernel models as skl2onnx writes them: LinearClassifier,
SVMRegressor and SVMClassifier, computed in float32 whatever the input's number type, with
onnxruntime's labels and score transforms (kernels/_ml.py)."""

import numpy as np

from .. import _ml
from ..registry import kernel

ML = "ai.onnx.ml"
_F = np.float32


def _labels(attrs):
    """(labels, whether they are strings): classlabels_strings, else classlabels_ints."""
    strings = list(attrs.get("classlabels_strings", []))
    if strings:
        return strings, True
    return [int(v) for v in attrs.get("classlabels_ints", [])], False


@kernel("LinearClassifier", domain=ML, since=1, multi=True)
def linear_classifier(attrs, n_outputs):
    """LinearClassifier-1: scores ``x @ coefficients.T + intercepts`` (one class an intercept),
    the label of the largest raw score (or, with one class, the second label where the score is
    above 0, else the first), then the scores' post_transform; one class with two labels gives
    two columns ``[1 - s, s]``, as onnxruntime computes them."""
    intercepts = np.asarray(attrs.get("intercepts", []), _F)
    classes = intercepts.size
    if not classes:
        raise ValueError("LinearClassifier needs intercepts (one a class)")
    coefficients = np.asarray(attrs["coefficients"], _F).reshape(classes, -1)
    labels, strings = _labels(attrs)
    transform = _ml.check_transform(attrs.get("post_transform", "NONE"))
    second = 1 if classes == 1 and len(labels) == 2 else -1
    if classes == 1:
        pair = labels if len(labels) == 2 else (["0", "1"] if strings else [0, 1])
        choices = _ml.labels_array(pair, strings)
    else:
        if len(labels) < classes:
            raise ValueError(f"LinearClassifier has {classes} classes but {len(labels)} labels")
        choices = _ml.labels_array(labels, strings)

    def classify(x):
        rows = _ml.as_float_rows(x)
        if rows.shape[1] != coefficients.shape[1]:
            raise ValueError(f"LinearClassifier: {rows.shape[1]} features, the coefficients "
                             f"have {coefficients.shape[1]}")
        scores = rows @ coefficients.T + intercepts
        if classes == 1:
            label = choices[(scores[:, 0] > 0).astype(np.intp)]
        else:
            label = choices[_ml.first_max(scores)]
        return (label, _ml.post_transform(scores, transform, second))[:n_outputs]

    return classify


class _SVM:
    """The kernel of an SVM: K(x, v) for rows x and support vectors v, as onnxruntime computes
    it in float32 (``kernel_params``: gamma, coef0, degree)."""

    def __init__(self, attrs, linear=False):
        self.kind = "LINEAR" if linear else attrs.get("kernel_type", "LINEAR")
        if self.kind not in ("LINEAR", "POLY", "RBF", "SIGMOID"):
            raise ValueError(f"kernel_type must be LINEAR, POLY, RBF or SIGMOID, not "
                             f"{self.kind!r}")
        params = list(attrs.get("kernel_params", [])) + [0.0, 0.0, 0.0]
        self.gamma, self.coef0, self.degree = (_F(v) for v in params[:3])

    def __call__(self, x, vectors, offset=0.0):
        if self.kind == "RBF":
            differences = x[:, None, :] - vectors[None, :, :]
            return np.exp(-self.gamma * np.sum(differences * differences, axis=2, dtype=_F))
        if self.kind == "LINEAR":
            return x @ vectors.T + _F(offset)
        products = self.gamma * (x @ vectors.T) + self.coef0
        if self.kind == "SIGMOID":
            return np.tanh(products)
        return np.power(products, self.degree)


@kernel("SVMRegressor", domain=ML, since=1)
def svm_regressor(attrs):
    """SVMRegressor-1: ``sum_v coefficients[v] K(x, v) + rho`` over the `n_supports` support
    vectors, or with none ``x @ coefficients + rho`` (a linear model); `one_class` gives the
    sign (1 or -1). Results [N, 1] float32."""
    n_supports = int(attrs.get("n_supports", 0))
    coefficients = np.asarray(attrs["coefficients"], _F)
    rho = _F(attrs["rho"][0])
    one_class = bool(attrs.get("one_class", 0))
    svm = _SVM(attrs, linear=n_supports == 0)
    if n_supports:
        vectors = np.asarray(attrs["support_vectors"], _F).reshape(n_supports, -1)
    else:
        vectors = coefficients.reshape(1, -1)

    def regressed(x):
        rows = _ml.as_float_rows(x)
        if rows.shape[1] != vectors.shape[1]:
            raise ValueError(f"SVMRegressor: {rows.shape[1]} features, the model has "
                             f"{vectors.shape[1]}")
        if n_supports:
            y = svm(rows, vectors) @ coefficients.reshape(-1, 1) + rho
        else:
            y = svm(rows, vectors, rho)
        if one_class:
            y = np.where(y > 0, _F(1), _F(-1))
        return y.astype(_F, copy=False)

    return regressed


def _pair_probabilities(scores, prob_a, prob_b, classes):
    """libsvm's multi-class probabilities from the one-against-one decision values `scores`
    [N, pairs] (Wu, Lin and Weng's second method), as onnxruntime iterates it in float32:
    every row at once, each stopping where onnxruntime's loop would."""
    n = scores.shape[0]
    r = np.zeros((n, classes, classes), _F)
    k = 0
    for i in range(classes - 1):
        for j in range(i + 1, classes):
            value = _F(1) - _ml.logistic(scores[:, k] * prob_a[k] + prob_b[k])
            value = np.minimum(np.maximum(value, _F(1e-7)), _F(1) - _F(1e-7))
            r[:, i, j] = value
            r[:, j, i] = _F(1) - value
            k += 1
    q = np.zeros((n, classes, classes), _F)
    for i in range(classes):
        for j in range(classes):
            if j != i:
                q[:, i, i] += r[:, j, i] * r[:, j, i]
        for j in range(i):
            q[:, i, j] = q[:, j, i]
        for j in range(i + 1, classes):
            q[:, i, j] = -r[:, j, i] * r[:, i, j]
    p = np.full((n, classes), _F(1) / _F(classes), _F)
    eps = _F(0.005) / _F(classes)
    running = np.ones(n, bool)
    for _ in range(100):
        qp = np.zeros((n, classes), _F)
        pqp = np.zeros(n, _F)
        for i in range(classes):
            for j in range(classes):
                qp[:, i] += q[:, i, j] * p[:, j]
            pqp += p[:, i] * qp[:, i]
        error = np.max(np.abs(qp - pqp[:, None]), axis=1)
        running &= ~(error < eps)
        if not running.any():
            break
        rows = running
        for i in range(classes):
            diff = (-qp[rows, i] + pqp[rows]) / q[rows, i, i]
            p[rows, i] += diff
            one = _F(1) + diff
            pqp[rows] = (pqp[rows] + diff * (diff * q[rows, i, i] + _F(2) * qp[rows, i])) \
                / one / one
            qp[rows] = (qp[rows] + diff[:, None] * q[rows, i, :]) / one[:, None]
            p[rows] /= one[:, None]
    return p


@kernel("SVMClassifier", domain=ML, since=1, multi=True)
def svm_classifier(attrs, n_outputs):
    """SVMClassifier-1: with support vectors, libsvm's one-against-one classifiers (the label
    with the most votes; scores the decision values, or with prob_a and prob_b the pairwise
    probabilities coupled into one a class); without, a linear model (liblinear: scores
    ``x @ coefficients.T + rho[0]``, the label of the largest). Then the post_transform, with
    onnxruntime's rules for two classes."""
    labels, strings = _labels(attrs)
    if not labels:
        raise ValueError("SVMClassifier needs classlabels_ints or classlabels_strings")
    choices = _ml.labels_array(labels, strings)
    classes = len(labels)
    transform = _ml.check_transform(attrs.get("post_transform", "NONE"))
    coefficients = np.asarray(attrs["coefficients"], _F)
    rho = np.asarray(attrs["rho"], _F)
    prob_a = np.asarray(attrs.get("prob_a", []), _F)
    prob_b = np.asarray(attrs.get("prob_b", []), _F)
    if prob_a.size != prob_b.size:
        raise ValueError("SVMClassifier: prob_a and prob_b must have as many values")
    per_class = [int(v) for v in attrs.get("vectors_per_class", [])]
    starts = np.concatenate([[0], np.cumsum(per_class)]).astype(np.intp)
    n_vectors = int(starts[-1])
    svc = n_vectors > 0
    svm = _SVM(attrs, linear=not svc)
    all_positive = bool(np.all(coefficients >= 0))
    with_probabilities = prob_a.size > 0
    pairs = classes * (classes - 1) // 2
    if svc:
        vectors = np.asarray(attrs["support_vectors"], _F).reshape(n_vectors, -1)
        coefficients = coefficients.reshape(classes - 1, n_vectors)
    else:
        vectors = coefficients.reshape(classes, -1)

    def decisions(kernels):
        """[N, pairs] decision values (float64 sums of float32 products, as onnxruntime's)
        and [N, classes] votes."""
        n = kernels.shape[0]
        scores = np.empty((n, pairs), _F)
        votes = np.zeros((n, classes), np.int64)
        k = 0
        for i in range(classes - 1):
            si = slice(starts[i], starts[i + 1])
            for j in range(i + 1, classes):
                sj = slice(starts[j], starts[j + 1])
                total = np.sum((coefficients[j - 1, si] * kernels[:, si]).astype(np.float64),
                               axis=1)
                total += np.sum((coefficients[i, sj] * kernels[:, sj]).astype(np.float64),
                                axis=1)
                total += np.float64(rho[k])
                scores[:, k] = total
                wins = total > 0
                votes[wins, i] += 1
                votes[~wins, j] += 1
                k += 1
        return scores, votes

    def classify(x):
        rows = _ml.as_float_rows(x)
        if rows.shape[1] != vectors.shape[1]:
            raise ValueError(f"SVMClassifier: {rows.shape[1]} features, the model has "
                             f"{vectors.shape[1]}")
        second = -1
        if svc:
            scores, votes = decisions(svm(rows, vectors))
            # (np.argmax: the first of the most votes, as std::max_element)
            label = choices[np.argmax(votes, axis=1)] if classes else choices[:0]
            if with_probabilities:
                scores = _pair_probabilities(scores, prob_a, prob_b, classes)
            elif classes <= 2:
                second = 2 if transform == "NONE" else 0
        else:
            scores = svm(rows, vectors, rho[0]).astype(_F, copy=False)
            top = _ml.first_max(scores)
            if classes == 2 and not with_probabilities:
                weight = scores[np.arange(len(top)), top]
                positive = (weight >= 0.5) if all_positive else (weight > 0)
                label = np.where(positive, choices[1], choices[top])
                label = label.astype(choices.dtype, copy=False)
            else:
                label = choices[top]
        return (label, _ml.post_transform(scores, transform, second))[:n_outputs]

    return classify
