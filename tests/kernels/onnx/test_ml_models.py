"""The ai.onnx.ml encoders, linear and kernel models and tree ensembles (kernels/onnx/
ml_encoders.py, ml_linear.py, ml_trees.py) against onnxruntime, on the types its ML kernels
implement; onnx.reference for the types onnxruntime lacks."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import cyloop
from tests.support.nodes import assert_native_matches, one_node, oracle

ML = "ai.onnx.ml"
RNG = np.random.default_rng(11)
X = (RNG.standard_normal((6, 4)) * 3).astype(np.float32)
TRANSFORMS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]
NUMBER_TYPES = [np.float32, np.float64, np.int64, np.int32]


def _run(op, attrs, inputs, opset=1, n_outputs=1, reference=False, rtol=1e-5, atol=1e-6):
    model, feeds = one_node(op, opset, attrs, inputs, n_outputs=n_outputs, domain=ML)
    return assert_native_matches(model, feeds, reference=reference, rtol=rtol, atol=atol)


# -- encoders -------------------------------------------------------------------------------------

def _imputer_cases():
    data = X.copy()
    data[0, 1] = data[2, 3] = np.nan
    data[1, 2] = data[3, 0] = 0
    for values in ([1.5], [1.0, 2.0, 3.0, 4.0], [7.0, 8.0]):
        for replaced in (0.0, float("nan")):
            yield np.float32, {"imputed_value_floats": values,
                               "replaced_value_float": replaced}, data
    ints = np.rint(X).astype(np.int64)
    for values in ([9], [1, 2, 3, 4]):
        for replaced in (0, 2):
            yield np.int64, {"imputed_value_int64s": values, "replaced_value_int64": replaced}, ints
    yield np.int64, {"imputed_value_int64s": [1, 2, 3, 4], "replaced_value_int64": 0}, ints[0]


IMPUTER = list(_imputer_cases())


@pytest.mark.parametrize("dtype, attrs, x", IMPUTER,
                         ids=[f"{np.dtype(d).name}-{k}" for k, (d, _, _) in enumerate(IMPUTER)])
def test_imputer_matches_onnxruntime(dtype, attrs, x):
    _run("Imputer", attrs, [x.astype(dtype)])


@pytest.mark.parametrize("dtype, attrs", [
    (np.float64, {"imputed_value_floats": [1.0, 2.0, 3.0, 4.0], "replaced_value_float": 0.0}),
    (np.int32, {"imputed_value_int64s": [5], "replaced_value_int64": 1})])
def test_imputer_double_and_int32_match_onnx_reference(dtype, attrs):
    x = np.rint(X).astype(dtype)
    _run("Imputer", attrs, [x], reference=True)


FEATURE_VECTORS = [
    ([X], [4]),
    ([X, X * 2], [2, 6]),
    ([X[:, :3], X, X[:, :1]], [3, 3, 2]),
    ([X[0], X[1, :2]], [4, 3]),
    ([X.reshape(6, 2, 2), X], [4, 1]),
    ([X, X[:3]], [4, 4]),  # (rows that differ: an error)
    ([X, np.rint(X).astype(np.int64)], [4, 4]),  # (types that differ: an error)
]


@pytest.mark.parametrize("inputs, widths", FEATURE_VECTORS,
                         ids=[f"case{k}" for k in range(len(FEATURE_VECTORS))])
@pytest.mark.parametrize("dtype", NUMBER_TYPES)
def test_feature_vectorizer_matches_onnxruntime(inputs, widths, dtype):
    inputs = [np.rint(x).astype(dtype) if k == 0 else x.astype(dtype) if x.dtype == X.dtype
              else x for k, x in enumerate(inputs)]
    _run("FeatureVectorizer", {"inputdimensions": widths}, inputs)


def _one_hot_cases():
    ints = RNG.integers(-1, 5, (5, 3))
    for dtype in (np.int64, np.float32, np.float64):
        for x in (ints.astype(dtype), ints[0].astype(dtype), (ints + 0.7).astype(dtype)):
            yield {"cats_int64s": [0, 2, 3, 1]}, x
    yield {"cats_int64s": [4, 2, 4]}, ints.astype(np.int64)  # (the last of repeated wins)
    strings = np.array([["a", "b", "zz"], ["c", "", "a"]], dtype=object)
    yield {"cats_strings": ["a", "b", "c", ""]}, strings
    yield {"cats_strings": ["b", "a"], "zeros": 1}, strings[0]
    yield {"cats_int64s": [0, 1, 2, 3, 4, -1], "zeros": 0}, ints.astype(np.int64)
    yield {"cats_int64s": [0, 1], "zeros": 0}, ints.astype(np.int64)  # (an error)
    yield {"cats_strings": ["a"], "zeros": 0}, strings  # (an error)


ONE_HOT = list(_one_hot_cases())


@pytest.mark.parametrize("attrs, x", ONE_HOT,
                         ids=[f"{x.dtype}-{x.ndim}d-{k}" for k, (_, x) in enumerate(ONE_HOT)])
def test_one_hot_encoder_matches_onnxruntime(attrs, x):
    _run("OneHotEncoder", attrs, [x])


def _label_encoder_cases():
    words = np.array([["cat", "dog"], ["bird", "cow"], ["dog", ""]], dtype=object)
    numbers = np.array([[3, -1], [7, 0], [3, 12]], np.int64)
    floats = np.array([[0.5, -0.0], [np.nan, 2.0], [1.25, 7.0]], np.float32)
    yield 1, {"classes_strings": ["dog", "cat", "cow"], "default_int64": -7}, words
    yield 1, {"classes_strings": ["dog", "cat", "cow"], "default_string": "?"}, numbers
    kinds = {
        "strings": (["dog", "cat", "dog", ""], words),
        "int64s": ([3, 7, 0, 3], numbers),
        "floats": ([0.5, 0.0, 2.0, 0.5], floats),
    }
    values = {"strings": ["x", "y", "z", "w"], "int64s": [10, 20, 30, 40],
              "floats": [0.25, -1.5, 8.0, 3.0]}
    defaults = {"strings": {"default_string": "none"}, "int64s": {"default_int64": 99},
                "floats": {"default_float": 4.5}}
    for version in (2, 4):
        for key_kind, (keys, x) in kinds.items():
            for value_kind, vals in values.items():
                attrs = {f"keys_{key_kind}": keys, f"values_{value_kind}": vals}
                yield version, attrs, x
                yield version, {**attrs, **defaults[value_kind]}, x
    nan_keys = np.array([np.nan, 2.0, -0.0], np.float32)
    yield 4, {"keys_floats": nan_keys.tolist(), "values_int64s": [1, 2, 3]}, floats
    yield 2, {"keys_floats": nan_keys.tolist(), "values_int64s": [1, 2, 3]}, floats
    tensor = helper.make_tensor
    yield 4, {"keys_tensor": tensor("k", TensorProto.DOUBLE, [3], [0.5, 2.0, np.nan]),
              "values_tensor": tensor("v", TensorProto.DOUBLE, [3], [1.0, 2.0, 3.0]),
              "default_tensor": tensor("d", TensorProto.DOUBLE, [1], [-8.0])}, \
        floats.astype(np.float64)
    yield 4, {"keys_tensor": tensor("k", TensorProto.DOUBLE, [2], [0.5, 7.0]),
              "values_strings": ["a", "b"]}, floats.astype(np.float64)
    yield 4, {"keys_strings": ["dog", "cow"],
              "values_tensor": tensor("v", TensorProto.INT16, [2], [5, -6]),
              "default_tensor": tensor("d", TensorProto.INT16, [1], [42])}, words
    yield 4, {"keys_strings": ["dog", "cow"],
              "values_tensor": tensor("v", TensorProto.DOUBLE, [2], [5.5, -6.0])}, words


LABELS = list(_label_encoder_cases())


@pytest.mark.parametrize("version, attrs, x", LABELS,
                         ids=[f"v{v}-{x.dtype}-{k}" for k, (v, _, x) in enumerate(LABELS)])
def test_label_encoder_matches_onnxruntime(version, attrs, x):
    _run("LabelEncoder", attrs, [x], opset=version)


def _category_mapper_cases():
    words = np.array(["dog", "cow", "cat", "", "Dog", "emu"], object)[RNG.integers(0, 6, (3, 5))]
    ints = RNG.integers(-2, 6, (4, 3))
    cats = {"cats_strings": ["dog", "cow", "cat", "", "yak"], "cats_int64s": [3, 1, 4, 0, -2]}
    repeated = {"cats_strings": ["dog", "cow", "dog"], "cats_int64s": [1, 2, 1]}  # (the last wins)
    for attrs in (cats, repeated, {**cats, "default_int64": 99, "default_string": "none"},
                  {"cats_strings": ["cow"], "cats_int64s": [4]}):
        for x in (words, words[0], ints, ints[:0], np.int64(4)):
            yield attrs, x


CATEGORIES = list(_category_mapper_cases())


@pytest.mark.parametrize("driver", ["cython", "python"])
@pytest.mark.parametrize("attrs, x", CATEGORIES,
                         ids=[f"{k}-{np.asarray(x).dtype}" for k, (_, x) in enumerate(CATEGORIES)])
def test_category_mapper_matches_onnxruntime(attrs, x, driver):
    model, feeds = one_node("CategoryMapper", 1, attrs, [x], domain=ML)
    assert_native_matches(model, feeds, driver=driver)


# -- linear and kernel models ---------------------------------------------------------------------

def _linear_classifier_cases():
    for classes, labels in ((3, {"classlabels_ints": [4, 7, 9]}),
                            (3, {"classlabels_strings": ["a", "b", "c"]}),
                            (1, {"classlabels_ints": [2, 5]}),
                            (1, {"classlabels_strings": ["no", "yes"]}),
                            (2, {"classlabels_ints": [0, 1]})):
        attrs = {"coefficients": RNG.standard_normal(classes * 4).tolist(),
                 "intercepts": RNG.standard_normal(classes).tolist(), **labels}
        for transform in TRANSFORMS:
            if transform == "PROBIT" and classes == 1:
                continue  # (test_linear_classifier_binary_probit)
            yield {**attrs, "post_transform": transform}, X
    for dtype in NUMBER_TYPES:
        attrs = {"coefficients": RNG.standard_normal(8).tolist(), "intercepts": [0.5, -0.5],
                 "classlabels_ints": [1, 2], "post_transform": "SOFTMAX"}
        yield attrs, np.rint(X).astype(dtype)
        yield attrs, np.rint(X[0]).astype(dtype)


LINEAR = list(_linear_classifier_cases())


@pytest.mark.parametrize("attrs, x", LINEAR,
                         ids=[f"{a['post_transform']}-{x.dtype}-{k}"
                              for k, (a, x) in enumerate(LINEAR)])
def test_linear_classifier_matches_onnxruntime(attrs, x):
    _run("LinearClassifier", attrs, [x], n_outputs=2)


@pytest.mark.parametrize("labels", [{"classlabels_ints": [2, 5]}, {}], ids=["labels", "none"])
def test_linear_classifier_binary_probit_matches_onnxruntime(labels):
    """One class with two labels: onnxruntime writes the N probits into the first half of the
    [N, 2] scores and leaves the rest unwritten (here 0): only that half is compared."""
    attrs = {"coefficients": [0.3, -0.2, 0.1, 0.05], "intercepts": [0.1],
             "post_transform": "PROBIT", **labels}
    x = X / 40  # (scores in (0, 1), where the probit is defined)
    model, feeds = one_node("LinearClassifier", 1, attrs, [x], n_outputs=2, domain=ML)
    expected = oracle(model, feeds)
    got = list(cyloop.load(model).run(feeds).values())
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1].shape == expected[1].shape
    n = x.shape[0]
    np.testing.assert_allclose(got[1].reshape(-1)[:n], expected[1].reshape(-1)[:n], rtol=1e-5)
    if labels:
        assert not got[1].reshape(-1)[n:].any()


KERNELS = [("LINEAR", [0.0, 0.0, 0.0]), ("POLY", [0.1, 0.5, 3.0]), ("POLY", [0.2, 1.0, 2.0]),
           ("RBF", [0.3, 0.0, 0.0]), ("SIGMOID", [0.05, 0.2, 0.0])]


def _svm_regressor_cases():
    for kernel_type, params in KERNELS:
        for one_class in (0, 1):
            yield {"kernel_type": kernel_type, "kernel_params": params, "n_supports": 5,
                   "support_vectors": RNG.standard_normal(20).tolist(),
                   "coefficients": RNG.standard_normal(5).tolist(), "rho": [0.3],
                   "one_class": one_class}
    yield {"coefficients": RNG.standard_normal(4).tolist(), "rho": [-0.2],
           "kernel_params": [0.0, 0.0, 0.0]}


SVR = list(_svm_regressor_cases())


@pytest.mark.parametrize("attrs", SVR, ids=[f"{a.get('kernel_type', 'linear')}-{k}"
                                            for k, a in enumerate(SVR)])
@pytest.mark.parametrize("rows", [6, 1], ids=["2d", "1d"])
def test_svm_regressor_matches_onnxruntime(attrs, rows):
    _run("SVMRegressor", attrs, [X if rows == 6 else X[0]])


def _svm_classifier_cases():
    for kernel_type, params in KERNELS:
        for classes in (2, 3, 4):
            per_class = RNG.integers(1, 4, classes).tolist()
            vectors = sum(per_class)
            attrs = {"kernel_type": kernel_type, "kernel_params": params,
                     "vectors_per_class": per_class,
                     "support_vectors": RNG.standard_normal(vectors * 4).tolist(),
                     "coefficients": RNG.standard_normal((classes - 1) * vectors).tolist(),
                     "rho": RNG.standard_normal(classes * (classes - 1) // 2).tolist(),
                     "classlabels_ints": list(range(10, 10 + classes))}
            for transform in ("NONE", "LOGISTIC", "SOFTMAX"):
                yield {**attrs, "post_transform": transform}
            pairs = classes * (classes - 1) // 2
            yield {**attrs, "prob_a": (-RNG.random(pairs) - 0.5).tolist(),
                   "prob_b": (RNG.standard_normal(pairs) * 0.1).tolist()}
    for classes in (2, 3):
        for positive in (False, True):
            coefficients = RNG.standard_normal(classes * 4)
            coefficients = np.abs(coefficients) * 0.1 if positive else coefficients
            for transform in ("NONE", "SOFTMAX"):
                yield {"coefficients": coefficients.tolist(), "rho": [0.1],
                       "kernel_params": [0.0, 0.0, 0.0],
                       "classlabels_strings": list("abcd"[:classes]),
                       "post_transform": transform}


SVC = list(_svm_classifier_cases())


@pytest.mark.parametrize("attrs", SVC, ids=[f"{a.get('kernel_type', 'linear')}-"
                                            f"{len(a.get('vectors_per_class', []))}-{k}"
                                            for k, a in enumerate(SVC)])
def test_svm_classifier_matches_onnxruntime(attrs):
    _run("SVMClassifier", attrs, [X], n_outputs=2, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", NUMBER_TYPES)
def test_svm_classifier_reads_each_number_type(dtype):
    attrs = SVC[1]
    _run("SVMClassifier", attrs, [np.rint(X).astype(dtype)], n_outputs=2, rtol=1e-4, atol=1e-5)


# -- trees ----------------------------------------------------------------------------------------

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def _random_trees(n_trees, features, rng, modes=("BRANCH_LEQ",), depth=3, missing=False):
    """Node attributes of `n_trees` random trees (node ids shuffled within each tree) and the
    ids of their leaves."""
    nodes = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values",
                             "truenodeids", "falsenodeids", "missing_value_tracks_true")}
    leaves = []
    for tree in range(n_trees):
        next_id = [0]

        def grow(level, tree=tree, next_id=next_id):
            """Append a subtree in preorder (its root first, as exporters write trees)."""
            node = next_id[0]
            next_id[0] += 1
            k = len(nodes["treeids"])
            nodes["treeids"].append(tree)
            nodes["missing_value_tracks_true"].append(int(missing and rng.random() < 0.5))
            for key in ("nodeids", "featureids", "modes", "values", "truenodeids",
                        "falsenodeids"):
                nodes[key].append(None)
            if level == depth or (level and rng.random() < 0.25):
                entry = (node, 0, "LEAF", 0.0, 0, 0)
                leaves.append((tree, node))
            else:
                feature, mode = int(rng.integers(features)), str(rng.choice(modes))
                value = float(np.round(rng.standard_normal() * 2, 1))
                true, false = grow(level + 1), grow(level + 1)
                entry = (node, feature, mode, value, true, false)
            for key, value in zip(("nodeids", "featureids", "modes", "values", "truenodeids",
                                   "falsenodeids"), entry):
                nodes[key][k] = value
            return node

        grow(0)
    return {f"nodes_{k}": v for k, v in nodes.items()}, leaves


def _tree_input(dtype):
    x = np.round(np.random.default_rng(2).standard_normal((20, 4)) * 2, 1)
    x[::3] = np.rint(x[::3])  # (on membership values)
    x[3, 1] = x[7, 0] = np.nan
    x[5] = 0.3  # (on no threshold)
    return x.astype(dtype) if np.dtype(dtype).kind == "f" else np.rint(
        np.nan_to_num(x)).astype(dtype)


def _regressor_cases():
    for targets in (1, 3):
        for aggregate in ("SUM", "AVERAGE", "MIN", "MAX"):
            for transform in ("NONE", "SOFTMAX", "LOGISTIC", "PROBIT"):
                if transform == "PROBIT" and aggregate != "SUM":
                    continue
                rng = np.random.default_rng(len(aggregate) + targets)
                nodes, leaves = _random_trees(3, 4, rng, MODES, missing=True)
                weights = {"target_treeids": [], "target_nodeids": [], "target_ids": [],
                           "target_weights": []}
                for tree, node in leaves:
                    for target in rng.choice(targets, rng.integers(1, targets + 1),
                                             replace=False):
                        weights["target_treeids"].append(tree)
                        weights["target_nodeids"].append(node)
                        weights["target_ids"].append(int(target))
                        weights["target_weights"].append(
                            float(rng.random() * 0.9 if transform == "PROBIT"
                                  else rng.standard_normal()))
                attrs = {**nodes, **weights, "n_targets": targets,
                         "aggregate_function": aggregate, "post_transform": transform}
                yield attrs
                if transform == "NONE":
                    yield {**attrs, "base_values": (rng.standard_normal(targets)).tolist()}


REGRESSORS = list(_regressor_cases())


@pytest.mark.parametrize("attrs", REGRESSORS, ids=[
    f"{a['n_targets']}-{a['aggregate_function']}-{a['post_transform']}-{k}"
    for k, a in enumerate(REGRESSORS)])
@pytest.mark.parametrize("opset", [1, 3])
def test_tree_ensemble_regressor_matches_onnxruntime(attrs, opset):
    _run("TreeEnsembleRegressor", attrs, [_tree_input(np.float32)], opset=opset)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opset", [1, 3])
def test_tree_ensemble_regressor_reads_each_number_type(dtype, opset):
    """(Neither onnxruntime nor onnx.reference runs the schema's integer inputs.)"""
    _run("TreeEnsembleRegressor", REGRESSORS[1], [_tree_input(dtype)], opset=opset)


def test_tree_ensemble_regressor_tensor_attributes_match_onnxruntime():
    """Opset 3's float64 thresholds, weights and base values (a float64 input compares and
    sums in float64)."""
    attrs = dict(REGRESSORS[0])
    tensor = helper.make_tensor
    values = np.asarray(attrs.pop("nodes_values"), np.float64) + 1e-9
    weights = np.asarray(attrs.pop("target_weights"), np.float64)
    attrs["nodes_values_as_tensor"] = tensor("v", TensorProto.DOUBLE, [values.size], values)
    attrs["target_weights_as_tensor"] = tensor("w", TensorProto.DOUBLE, [weights.size], weights)
    attrs["base_values_as_tensor"] = tensor("b", TensorProto.DOUBLE, [1], [0.25])
    _run("TreeEnsembleRegressor", attrs, [_tree_input(np.float64)], opset=3)


def _classifier_cases():
    rng = np.random.default_rng(3)
    for classes, class_sets in ((3, "all"), (2, "all"), (2, "one"), (4, "some")):
        nodes, leaves = _random_trees(4, 4, rng, ("BRANCH_LEQ", "BRANCH_GT"), missing=True)
        for signs in ("positive", "mixed"):
            weights = {"class_treeids": [], "class_nodeids": [], "class_ids": [],
                       "class_weights": []}
            for tree, node in leaves:
                ids = {"all": range(classes), "one": [1],
                       "some": rng.choice(classes, 2, replace=False)}[class_sets]
                for c in ids:
                    weights["class_treeids"].append(tree)
                    weights["class_nodeids"].append(node)
                    weights["class_ids"].append(int(c))
                    w = rng.random() * 0.5
                    weights["class_weights"].append(float(w if signs == "positive"
                                                          else w - 0.25))
            for labels in ({"classlabels_int64s": list(range(3, 3 + classes))},
                           {"classlabels_strings": [f"c{k}" for k in range(classes)]}):
                for transform in ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"):
                    attrs = {**nodes, **weights, **labels, "post_transform": transform}
                    yield attrs
                    yield {**attrs, "base_values": (rng.standard_normal(classes) * 0.1).tolist()}
                    if classes == 2:
                        yield {**attrs, "base_values": [0.2]}


CLASSIFIERS = list(_classifier_cases())


@pytest.mark.parametrize("attrs", CLASSIFIERS, ids=[
    f"{len(a.get('classlabels_int64s', a.get('classlabels_strings')))}-{a['post_transform']}-"
    f"{len(a.get('base_values', []))}-{k}" for k, a in enumerate(CLASSIFIERS)])
def test_tree_ensemble_classifier_matches_onnxruntime(attrs):
    _run("TreeEnsembleClassifier", attrs, [_tree_input(np.float32)], opset=3, n_outputs=2)


@pytest.mark.parametrize("dtype", NUMBER_TYPES)
@pytest.mark.parametrize("opset", [1, 3])
def test_tree_ensemble_classifier_reads_each_number_type(dtype, opset):
    _run("TreeEnsembleClassifier", CLASSIFIERS[0], [_tree_input(dtype)], opset=opset,
         n_outputs=2)


def _v5_trees(targets, positive, rng):
    """Node and leaf lists of three random TreeEnsemble-5 trees (each leaf one target; weights
    in (0, 0.9) where `positive`)."""
    lists = {k: [] for k in ("modes", "splits", "features", "missing", "true_ids", "true_leaf",
                             "false_ids", "false_leaf", "roots", "leaf_targets", "leaf_weights",
                             "members")}

    def grow(level):
        """(position, is a leaf) of a new subtree."""
        if level == 3 or (level and rng.random() < 0.25):
            lists["leaf_targets"].append(int(rng.integers(targets)))
            lists["leaf_weights"].append(float(rng.random() * 0.9 if positive
                                               else rng.standard_normal()))
            return len(lists["leaf_targets"]) - 1, 1
        position = len(lists["modes"])
        mode = int(rng.integers(0, 7))
        lists["modes"].append(mode)
        lists["splits"].append(float(np.round(rng.standard_normal() * 2, 1)))
        lists["features"].append(int(rng.integers(4)))
        lists["missing"].append(int(rng.random() < 0.5))
        if mode == 6:  # (onnxruntime takes integer members only)
            lists["members"].extend(rng.integers(-3, 4, 3).astype(float).tolist() + [np.nan])
        for key in ("true_ids", "true_leaf", "false_ids", "false_leaf"):
            lists[key].append(0)
        lists["true_ids"][position], lists["true_leaf"][position] = grow(level + 1)
        lists["false_ids"][position], lists["false_leaf"][position] = grow(level + 1)
        return position, 0

    for _ in range(3):
        lists["roots"].append(grow(0)[0])
    return lists


def _tree_ensemble_cases():
    """TreeEnsemble-5 forms of random regressors: interior nodes and leaves apart."""
    tensor = helper.make_tensor
    for targets, aggregate, transform in ((1, 1, 0), (3, 1, 0), (3, 0, 0), (2, 2, 0),
                                          (2, 3, 0), (3, 1, 1), (3, 1, 2), (1, 1, 4)):
        rng = np.random.default_rng(targets * 10 + aggregate + transform)
        trees = _v5_trees(targets, transform == 4, rng)
        for dtype, proto in ((np.float32, TensorProto.FLOAT), (np.float64, TensorProto.DOUBLE)):
            attrs = {"n_targets": targets, "aggregate_function": aggregate,
                     "post_transform": transform, "tree_roots": trees["roots"],
                     "nodes_modes": tensor("m", TensorProto.UINT8, [len(trees["modes"])],
                                           trees["modes"]),
                     "nodes_splits": tensor("s", proto, [len(trees["splits"])], trees["splits"]),
                     "nodes_featureids": trees["features"],
                     "nodes_missing_value_tracks_true": trees["missing"],
                     "nodes_truenodeids": trees["true_ids"], "nodes_trueleafs": trees["true_leaf"],
                     "nodes_falsenodeids": trees["false_ids"],
                     "nodes_falseleafs": trees["false_leaf"],
                     "leaf_targetids": trees["leaf_targets"],
                     "leaf_weights": tensor("w", proto, [len(trees["leaf_weights"])],
                                            trees["leaf_weights"])}
            if trees["members"]:
                attrs["membership_values"] = tensor("v", proto, [len(trees["members"])],
                                                    trees["members"])
            yield attrs, dtype


ENSEMBLES = list(_tree_ensemble_cases())


@pytest.mark.parametrize("attrs, dtype", ENSEMBLES, ids=[
    f"{a['n_targets']}-agg{a['aggregate_function']}-pt{a['post_transform']}-"
    f"{np.dtype(d).name}" for a, d in ENSEMBLES])
def test_tree_ensemble_matches_onnxruntime(attrs, dtype):
    """On integer features: onnxruntime's BRANCH_MEMBER matches some fractions to a member
    (-2.2 is in {1, -2, -1}, 1.5 in {1, 31, 40}, but not in {1, 2, 3}), where the schema and
    cyloop test equality."""
    _run("TreeEnsemble", attrs, [np.rint(_tree_input(dtype))], opset=5)


def test_tree_walk_is_level_by_level():
    """A deep ensemble on many rows: the walk's loop runs per level, not per row, so this
    stays fast."""
    rng = np.random.default_rng(0)
    nodes, leaves = _random_trees(50, 4, rng, depth=8)
    attrs = {**nodes, "n_targets": 1, "target_treeids": [t for t, _ in leaves],
             "target_nodeids": [n for _, n in leaves], "target_ids": [0] * len(leaves),
             "target_weights": rng.standard_normal(len(leaves)).tolist()}
    x = RNG.standard_normal((5000, 4)).astype(np.float32)
    _run("TreeEnsembleRegressor", attrs, [x], opset=3, rtol=1e-5, atol=1e-5)


def test_one_hot_encoder_refuses_rank_three():
    model, feeds = one_node("OneHotEncoder", 1, {"cats_int64s": [1]},
                            [np.zeros((2, 2, 2), np.int64)], domain=ML)
    with pytest.raises(cyloop.ExecutionError, match="rank 3"):
        cyloop.load(model).run(feeds)
