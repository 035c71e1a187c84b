"""ai.onnx.ml's tree ensembles: TreeEnsembleRegressor and TreeEnsembleClassifier (1 and 3) and
TreeEnsemble (5), as onnxruntime computes them.

Every ensemble becomes one `Forest`: flat arrays of nodes (feature, threshold, comparison, the
positions of both children; a leaf is its own child) and of the weights each leaf gives each
target. A prediction walks every (row, tree) pair at once, one level a step: the positions of
all pairs move together, so the Python loop runs once per level of the deepest tree, never per
row. The leaves' weights are then gathered and aggregated over the trees in tree order.

onnxruntime compares a number input with the thresholds in float32 (float64 for a float64 input,
whose thresholds are nodes_values_as_tensor's where given) and sums in that type; a NaN feature
takes the true branch where the node's missing value tracks true.
"""

import numpy as np

from .. import _ml
from ..registry import kernel

ML = "ai.onnx.ml"
_F = np.float32
_MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ",
          "BRANCH_MEMBER", "LEAF")
LEAF = 7
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")


class Forest:
    """Trees over flat node arrays; see the module docstring.

    `features`, `thresholds` (float64; `members` for BRANCH_MEMBER nodes: a set of values a
    node), `modes` (indices into _MODES), `missing_true`, `true`, `false` (child positions), one
    entry a node; `roots` one a tree; `weights` [nodes, targets] and `scored` (whether the node
    gives the target a weight) for the aggregation, `first` the first weight a node gives (its
    threshold where it gives none), which a single-target onnxruntime ensemble sums instead."""

    def __init__(self, features, thresholds, modes, missing_true, true, false, roots, weights,
                 scored, first, members=None):
        self.features = np.asarray(features, np.intp)
        self.thresholds = np.asarray(thresholds, np.float64)
        self.modes = np.asarray(modes, np.int8)
        self.missing_true = np.asarray(missing_true, bool)
        self.true = np.asarray(true, np.intp)
        self.false = np.asarray(false, np.intp)
        self.roots = np.asarray(roots, np.intp)
        self.weights = weights
        self.scored = scored
        self.first = first
        self.members = members or {}
        # (onnxruntime requires every node's feature, leaves' too, to be in the input)
        self.width = int(self.features.max()) + 1 if self.features.size else 0
        if self.features.size and self.features.min() < 0:
            raise ValueError("a tree node reads a negative feature index")

    def leaves(self, x, threshold_type):
        """[N, trees] positions of the leaf each row reaches in each tree."""
        thresholds = self.thresholds.astype(threshold_type)
        n = x.shape[0]
        if x.shape[1] < self.width:
            raise ValueError(f"the trees read feature {self.width - 1}, the input has "
                             f"{x.shape[1]}")
        values = x if x.dtype == threshold_type else x.astype(threshold_type)
        at = np.broadcast_to(self.roots, (n, self.roots.size)).copy()
        rows = np.arange(n)[:, None]
        for _ in range(self.modes.size + 1):
            mode = self.modes[at]
            inner = mode != LEAF
            if not inner.any():
                return at
            value = values[rows, np.where(inner, self.features[at], 0)] if x.shape[1] else \
                np.zeros(at.shape, threshold_type)
            threshold = thresholds[at]
            with np.errstate(invalid="ignore"):
                go = np.select([mode == 0, mode == 1, mode == 2, mode == 3, mode == 4, mode == 5],
                               [value <= threshold, value < threshold, value >= threshold,
                                value > threshold, value == threshold, value != threshold],
                               False)
            if self.members:
                for node, members in self.members.items():
                    here = at == node
                    if here.any():
                        go[here] = np.isin(value[here], members)
            go |= self.missing_true[at] & np.isnan(value)
            at = np.where(go, self.true[at], self.false[at])
        raise ValueError("the trees have a cycle")


def _aggregate(forest, leaves, aggregate, single, dtype):
    """(scores [N, targets] of `dtype`, scored [N, targets]) of the leaves reached, tree by
    tree in order; `single`: the one-target form (each leaf's first weight, always scored)."""
    n, trees = leaves.shape
    if single:
        weights = forest.first.astype(dtype)[:, None]
        scored = np.ones((weights.shape[0], 1), bool)
    else:
        weights, scored = forest.weights.astype(dtype), forest.scored
    total = np.zeros((n, weights.shape[1]), dtype)
    has = np.zeros(total.shape, bool)
    for t in range(trees):
        w, s = weights[leaves[:, t]], scored[leaves[:, t]]
        if aggregate in ("SUM", "AVERAGE"):
            total += np.where(s, w, dtype.type(0))
        elif aggregate == "MIN":
            total = np.where(s & (~has | (w < total)), w, total)
        else:
            total = np.where(s & (~has | (w > total)), w, total)
        has |= s
    if aggregate == "AVERAGE":
        total /= dtype.type(trees) if trees else dtype.type(1)
    return total, has


def _finish_regression(total, has, base, aggregate, transform, single):
    """The regressor's scores: base values added (one a target, or one for a single target),
    then the post_transform (a single target: only PROBIT)."""
    if single:
        origin = base[0] if base.size == 1 else 0
        if aggregate in ("MIN", "MAX"):
            total = np.where(has, total + origin, origin)
        else:
            total = total + origin
        scores = total.astype(_F)
        return _ml.probit(scores) if transform == "PROBIT" else scores
    if base.size == total.shape[1]:
        total = total + base.astype(total.dtype)
    return _ml.post_transform(total.astype(_F), transform)


def _ids(attrs, prefix):
    return [int(v) for v in attrs.get(prefix, [])]


def _legacy_forest(attrs, weight_prefix, n_outputs):
    """A Forest of TreeEnsembleRegressor's (``target_``) or TreeEnsembleClassifier's
    (``class_``) attributes, with `n_outputs` targets or classes."""
    tree_ids = _ids(attrs, "nodes_treeids")
    node_ids = _ids(attrs, "nodes_nodeids")
    count = len(tree_ids)
    modes = list(attrs.get("nodes_modes", []))
    if not (len(node_ids) == len(modes) == count):
        raise ValueError("nodes_treeids, nodes_nodeids and nodes_modes must have one entry a "
                         "node")
    unknown = set(modes) - set(_MODES)
    if unknown or "BRANCH_MEMBER" in modes:
        raise ValueError(f"unknown node modes {sorted(unknown or {'BRANCH_MEMBER'})}")
    position = {}
    for k, key in enumerate(zip(tree_ids, node_ids)):
        if key in position:
            raise ValueError(f"node {key[1]} of tree {key[0]} appears twice")
        position[key] = k
    mode_codes = [_MODES.index(m) for m in modes]
    values = attrs.get("nodes_values_as_tensor")
    values = np.asarray(values if values is not None else attrs.get("nodes_values", [0.0] * count),
                        np.float64 if values is not None else _F).astype(np.float64)
    true, false = list(range(count)), list(range(count))
    for k, (tree, t_id, f_id) in enumerate(zip(tree_ids, _ids(attrs, "nodes_truenodeids"),
                                              _ids(attrs, "nodes_falsenodeids"))):
        if mode_codes[k] != LEAF:
            try:
                true[k], false[k] = position[(tree, t_id)], position[(tree, f_id)]
            except KeyError as e:
                raise ValueError(f"a node of tree {tree} points to node {e.args[0][1]}, which "
                                 "is not in the tree") from None
    missing = _ids(attrs, "nodes_missing_value_tracks_true")
    missing = [bool(m) for m in missing] + [False] * (count - len(missing))
    # A tree starts where the tree id changes; its first node is its root (onnxruntime's).
    roots = [k for k in range(count) if k == 0 or tree_ids[k] != tree_ids[k - 1]]
    weights = np.zeros((count, n_outputs), np.float64)
    scored = np.zeros((count, n_outputs), bool)
    first = values.copy()
    given = np.zeros(count, bool)
    w_values = attrs.get(f"{weight_prefix}weights_as_tensor")
    w_values = np.asarray(w_values if w_values is not None
                          else np.asarray(attrs.get(f"{weight_prefix}weights", []), _F),
                          np.float64)
    for tree, node, target, w in zip(_ids(attrs, f"{weight_prefix}treeids"),
                                     _ids(attrs, f"{weight_prefix}nodeids"),
                                     _ids(attrs, f"{weight_prefix}ids"), w_values):
        k = position.get((tree, node))
        if k is None or mode_codes[k] != LEAF:
            continue  # (onnxruntime ignores weights on branches, as old converters wrote)
        if not 0 <= target < n_outputs:
            raise ValueError(f"a weight for target {target}, of {n_outputs}")
        if not given[k]:
            first[k], given[k] = w, True
        weights[k, target] = w if not scored[k, target] else weights[k, target] + w
        scored[k, target] = True
    return Forest(_ids(attrs, "nodes_featureids"), values, mode_codes, missing, true, false, roots,
                  weights, scored, first)


def _threshold_type(x):
    return np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(_F)


def _rows(x):
    if not 1 <= x.ndim <= 2:
        raise ValueError(f"a tree ensemble takes a 1-D or 2-D input, not {x.ndim}-D")
    return x.reshape(1, -1) if x.ndim == 1 else x.reshape(x.shape[0], -1)


@kernel("TreeEnsembleRegressor", domain=ML, since=1)
def tree_ensemble_regressor(attrs):
    """TreeEnsembleRegressor-1 and 3 (3: the values, weights and base values as tensors):
    [N, n_targets] float32, the leaves' weights aggregated over the trees (SUM, AVERAGE, MIN,
    MAX), plus the base values, then the post_transform."""
    targets = int(attrs.get("n_targets", 1))
    forest = _legacy_forest(attrs, "target_", targets)
    aggregate = attrs.get("aggregate_function", "SUM")
    if aggregate not in _AGGREGATES:
        raise ValueError(f"aggregate_function must be one of {_AGGREGATES}, not {aggregate!r}")
    transform = _ml.check_transform(attrs.get("post_transform", "NONE"))
    base = attrs.get("base_values_as_tensor")
    base = np.asarray(base if base is not None else attrs.get("base_values", []), np.float64)

    def regressed(x):
        rows = _rows(x)
        dtype = _threshold_type(x)
        leaves = forest.leaves(rows, dtype)
        total, has = _aggregate(forest, leaves, aggregate, targets == 1, dtype)
        return _finish_regression(total, has, base.astype(dtype), aggregate, transform,
                                  targets == 1)

    return regressed


@kernel("TreeEnsembleClassifier", domain=ML, since=1, multi=True)
def tree_ensemble_classifier(attrs, n_outputs):
    """TreeEnsembleClassifier-1 and 3: the classes' summed weights plus base values; the label
    of the largest score, then the scores' post_transform. Two classes follow onnxruntime's
    binary rules: with weights for one class only, that class's score decides (above 0.5 where
    every weight is positive, else above 0) and the scores are widened to two columns."""
    labels, strings = ((list(attrs["classlabels_strings"]), True)
                       if attrs.get("classlabels_strings") else
                       ([int(v) for v in attrs.get("classlabels_int64s", [])], False))
    classes = len(labels)
    if classes < 2:
        raise ValueError("TreeEnsembleClassifier needs two class labels at least")
    forest = _legacy_forest(attrs, "class_", classes)
    transform = _ml.check_transform(attrs.get("post_transform", "NONE"))
    base = attrs.get("base_values_as_tensor")
    base = np.asarray(base if base is not None else attrs.get("base_values", []), np.float64)
    w_all = attrs.get("class_weights_as_tensor")
    w_all = np.asarray(w_all if w_all is not None else attrs.get("class_weights", []))
    all_positive = bool(np.all(w_all >= 0))
    binary = classes == 2 and len(set(_ids(attrs, "class_ids"))) == 1
    choices = _ml.labels_array(labels, strings)
    # onnxruntime's labels of a binary model that is not `binary`: positions 1 and 0, which
    # are the labels themselves for integer labels and index the string labels.
    plain = choices if strings else np.array([0, 1], np.int64)

    def classify(x):
        rows = _rows(x)
        dtype = _threshold_type(x)
        leaves = forest.leaves(rows, dtype)
        total, has = _aggregate(forest, leaves, "SUM", False, dtype)
        if classes > 2:
            for k in range(min(base.size, classes)):
                total[:, k] += dtype.type(base[k])
                has[:, k] = True
            scores = np.where(has, total, 0)
            top = _ml.first_max(np.where(has, total, -np.inf))
            label = choices[top]
            return (label, _ml.post_transform(scores.astype(_F), transform))[:n_outputs]
        return _binary(total, has, dtype)

    def _binary(total, has, dtype):
        """onnxruntime's two-class rules, row by row as vectors."""
        n = total.shape[0]
        score0, score1 = total[:, 0].copy(), total[:, 1].copy()
        has0, has1 = has[:, 0].copy(), has[:, 1].copy()
        second = np.full(n, -1)
        if base.size == 2:
            new1 = dtype.type(base[1]) + score0
            score1 = np.where(has1, new1, score1 + dtype.type(base[1]))
            score0 = np.where(has1, -new1, score0 + dtype.type(base[0]))
            width = np.full(n, 2)
        elif base.size == 1:
            score0 = score0 + dtype.type(base[0])
            width = np.where(has1, 2, 1)
        else:
            if base.size == 0:
                second[:] = 3
            width = np.where(has1, 2, 1)
        weight = np.where(has1 & (width == 2), score1, np.where(has0, score0, 0))
        if binary:
            if all_positive:
                positive = weight > 0.5
                second = np.where(positive, 0, 1)
            else:
                positive = weight > 0
                second = np.where(positive, 2, 3)
            label = np.where(positive, choices[1], choices[0])
        else:
            label = np.where(weight > 0, plain[1], plain[0])
        label = label.astype(choices.dtype, copy=False)
        # (a class with no weight scores 0, whatever base value was added to it)
        pairs = np.stack([np.where(has0, score0, 0), np.where(has1, score1, 0)],
                         axis=1).astype(_F)
        z = np.zeros((n, 2), _F)
        wide = width == 2
        if wide.any():
            z[wide] = _ml.post_transform(pairs[wide], transform)
        for rule in (-1, 0, 1, 2, 3):
            narrow = ~wide & (second == rule)
            if narrow.any():
                # (rule -1 and PROBIT: onnxruntime writes the first column only; here the
                # second is 0)
                part = _ml.post_transform(pairs[narrow, :1], transform, rule)
                z[narrow, :part.shape[1]] = part
        return (label, z)[:n_outputs]

    return classify


@kernel("TreeEnsemble", domain=ML, since=5)
def tree_ensemble(attrs):
    """TreeEnsemble-5: nodes and leaves in separate lists (`tree_roots`, a node's children
    nodes or leaves), BRANCH_MEMBER sets, integer enums for the aggregation (AVERAGE, SUM,
    MIN, MAX) and the transform (0 to 4: NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT, as
    onnxruntime numbers them); the result [N, n_targets] in the input's type."""
    modes = np.asarray(attrs["nodes_modes"]).reshape(-1).astype(np.int64)
    count = modes.size
    splits = np.asarray(attrs["nodes_splits"]).reshape(-1).astype(np.float64)
    leaf_targets = np.asarray(attrs["leaf_targetids"], np.int64)
    leaf_weights = np.asarray(attrs["leaf_weights"]).reshape(-1)
    weight_type = leaf_weights.dtype
    targets = int(attrs["n_targets"])
    aggregate = _AGGREGATES[int(attrs.get("aggregate_function", 1))]
    # onnxruntime reads 1 as LOGISTIC and 2 as SOFTMAX (its own enum's order), where the
    # schema's text says 1 SOFTMAX, 2 LOGISTIC: cyloop computes what models scored there give.
    transform = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")[
        int(attrs.get("post_transform", 0))]
    if np.any((modes < 0) | (modes > 6)):
        raise ValueError("nodes_modes must be 0 to 6")
    if np.any((leaf_targets < 0) | (leaf_targets >= targets)):
        raise ValueError(f"leaf_targetids must be in [0, {targets})")
    leaves = leaf_targets.size
    members = {}
    if np.any(modes == 6):
        values = np.asarray(attrs["membership_values"]).reshape(-1).astype(np.float64)
        sets = np.split(values, np.flatnonzero(np.isnan(values)))
        sets = [s[~np.isnan(s)] for s in sets]
        for k, node in enumerate(np.flatnonzero(modes == 6)):
            members[int(node)] = sets[k] if k < len(sets) else np.empty(0)

    def child(ids, leafs):
        return [count + int(i) if leaf else int(i) for i, leaf in zip(ids, leafs)]

    true = child(attrs["nodes_truenodeids"], attrs["nodes_trueleafs"])
    false = child(attrs["nodes_falsenodeids"], attrs["nodes_falseleafs"])
    missing = list(attrs.get("nodes_missing_value_tracks_true", [0] * count))
    weights = np.zeros((count + leaves, targets), np.float64)
    scored = np.zeros((count + leaves, targets), bool)
    weights[count + np.arange(leaves), leaf_targets] = leaf_weights.astype(np.float64)
    scored[count + np.arange(leaves), leaf_targets] = True
    roots = [int(r) for r in attrs["tree_roots"]]
    forest = Forest(list(attrs["nodes_featureids"]) + [0] * leaves,
                    np.concatenate([splits, np.zeros(leaves)]),
                    list(modes) + [LEAF] * leaves,
                    [bool(m) for m in missing] + [False] * leaves,
                    true + list(range(count, count + leaves)),
                    false + list(range(count, count + leaves)),
                    roots, weights, scored, None, members)

    def predicted(x):
        rows = _rows(x)
        dtype = np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(_F)
        reached = forest.leaves(rows, dtype)
        total, has = _aggregate(forest, reached, aggregate, False, dtype)
        if aggregate in ("MIN", "MAX"):
            total = np.where(has, total, 0)
        scores = total if transform == "NONE" else \
            _ml.post_transform(total.astype(_F), transform).astype(dtype)
        return scores.astype(x.dtype if x.dtype != object else weight_type, copy=False)

    return predicted
