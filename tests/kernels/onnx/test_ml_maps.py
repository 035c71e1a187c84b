"""ZipMap, CastMap and DictVectorizer (kernels/onnx/ml_maps.py) against onnxruntime, under both
drivers, on every key and value type their schemas allow that onnxruntime's Python API takes; a
map of string values, which that API cannot feed, against C's own strtof / strtoll (what
onnxruntime's CastMap converts with) and the specification's loop."""

import ctypes
import ctypes.util
import warnings

import numpy as np
import pytest

import cyloop
from tests.support.maps import (
    assert_same_maps,
    classifier_with_zipmap,
    map_in_model,
    ort_run,
    zipmap_model,
)

DRIVERS = ["cython", "python"]
RNG = np.random.default_rng(48)


def _load(model, driver):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*onnx.reference's kernels")
        return cyloop.load(model.SerializeToString(), driver=driver)


def _assert_tensors(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got, expected)
    np.testing.assert_array_equal(got, expected)


ZIP_LABELS = {"ints": [0, 1, 2], "unsorted": [5, -3, 2, 9], "repeated": [1, 0, 1],
              "one": [7], "strings": ["b", "a", "c"], "text": ["ζ", "chat", "Chat", ""]}
ZIP_ROWS = {"rows": (4,), "no rows": (0,), "one row (1-D)": ()}


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("rows", list(ZIP_ROWS.values()), ids=list(ZIP_ROWS))
@pytest.mark.parametrize("labels", list(ZIP_LABELS.values()), ids=list(ZIP_LABELS))
def test_zipmap_matches_onnxruntime(labels, rows, driver):
    x = RNG.random((*rows, len(labels))).astype(np.float32)
    model = zipmap_model(labels, (None,) * x.ndim)
    expected = ort_run(model, {"X": x})
    got = _load(model, driver).run({"X": x})
    assert_same_maps(got["Z"], expected["Z"])


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("shape, message", [
    ((2, 3), r"X has 3 columns \(shape \[2, 3\]\) for 2 class labels"),
    ((1, 2, 2), r"X must be 1-D or 2-D, got shape \[1, 2, 2\]"),
])
def test_zipmap_refuses_what_onnxruntime_refuses(shape, message, driver):
    model = zipmap_model([0, 1], (None,) * len(shape))
    x = np.ones(shape, np.float32)
    assert isinstance(ort_run(model, {"X": x}), Exception)
    with pytest.raises(cyloop.ExecutionError, match=message):
        _load(model, driver).run({"X": x})


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("labels", [(0, 1, 2), (4, 1), ("no", "yes", "maybe")],
                         ids=["ints", "two", "strings"])
def test_a_classifier_exported_with_zipmap_matches_onnxruntime(labels, driver):
    model = classifier_with_zipmap(labels=labels)
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    expected = ort_run(model, {"X": x})
    got = _load(model, driver).run({"X": x})
    _assert_tensors(got["label"], expected["label"])
    # (LinearClassifier's softmax rounds its last bit differently from onnxruntime's)
    assert_same_maps(got["output_probability"], expected["output_probability"], rtol=1e-6)


FLOAT_MAPS = {"keys 0..4": {k: float(v) for k, v in enumerate(RNG.standard_normal(5))},
              "unsorted, gaps": {7: 1.5, 2: -0.25, 5: 3e38, 0: 1e-3},
              "negative keys": {-2: 1.0, 3: 2.5},
              "past max_map": {1: 4.0, 6: 2.0, 3: -7.75},
              "special": {0: float("nan"), 1: float("inf"), 2: -float("inf"), 3: -0.0},
              "one": {2: 9.5}}


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("form", [{}, {"map_form": "DENSE"}, {"map_form": "SPARSE",
                                                              "max_map": 5}],
                         ids=["default", "dense", "sparse"])
@pytest.mark.parametrize("cast_to, element", [("TO_FLOAT", "float"), ("TO_INT64", "int64"),
                                              ("TO_STRING", "string")])
@pytest.mark.parametrize("feed", list(FLOAT_MAPS.values()), ids=list(FLOAT_MAPS))
def test_castmap_of_floats_matches_onnxruntime(feed, cast_to, element, form, driver):
    if cast_to == "TO_INT64" and any(not np.isfinite(v) for v in feed.values()):
        pytest.skip("a NaN or an infinity as int64 is undefined in C (onnxruntime's cast)")
    model = map_in_model("CastMap", {"cast_to": cast_to, **form}, "int64", "float", element)
    expected = ort_run(model, {"X": feed})
    loaded = _load(model, driver)
    if isinstance(expected, Exception):
        with pytest.raises(cyloop.ExecutionError, match="negative key"):
            loaded.run({"X": feed})
        return
    got = loaded.run({"X": feed})["Y"]
    if element == "float":
        np.testing.assert_array_equal(got, expected["Y"])  # (NaN equal to NaN)
        assert got.dtype == expected["Y"].dtype and got.shape == expected["Y"].shape
    else:
        _assert_tensors(got, expected["Y"])


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c"))


def _strtof(text):
    libc = _libc()
    libc.strtof.restype = ctypes.c_float
    libc.strtof.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]
    return np.float32(libc.strtof(text.encode(), None))


def _strtoll(text):
    libc = _libc()
    libc.strtoll.restype = ctypes.c_longlong
    libc.strtoll.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]
    return np.int64(libc.strtoll(text.encode(), None, 10))


TEXT_MAP = {3: " 2.5xyz", 0: "-.5", 1: "1e3", 8: "+7", 4: "12.75e-1", 2: "0x1.8p1", 6: "inf"}


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("form", [{"map_form": "DENSE"}, {"map_form": "SPARSE", "max_map": 6}],
                         ids=["dense", "sparse"])
@pytest.mark.parametrize("cast_to", ["TO_FLOAT", "TO_INT64", "TO_STRING"])
def test_castmap_of_strings_reads_them_as_c_does(cast_to, form, driver):
    feed = TEXT_MAP if cast_to != "TO_INT64" else {k: v for k, v in TEXT_MAP.items()
                                                   if k not in (0, 2, 6)}
    element = {"TO_FLOAT": "float", "TO_INT64": "int64", "TO_STRING": "string"}[cast_to]
    model = map_in_model("CastMap", {"cast_to": cast_to, **form}, "int64", "string", element)
    got = _load(model, driver).run({"X": feed})["Y"]
    convert = {"TO_FLOAT": _strtof, "TO_INT64": _strtoll, "TO_STRING": str}[cast_to]
    dtype = {"TO_FLOAT": np.float32, "TO_INT64": np.int64, "TO_STRING": object}[cast_to]
    keys = sorted(feed)
    if form["map_form"] == "DENSE":
        expected = np.array([[convert(feed[k]) for k in keys]], dtype=dtype)
    else:  # (the pad onnxruntime writes: 0, or "0.f")
        pad = "0.f" if cast_to == "TO_STRING" else 0
        expected = np.array([[convert(feed[k]) if k in feed else pad for k in range(6)]],
                            dtype=dtype)
    _assert_tensors(got, expected)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("text, cast_to, message", [
    ("abc", "TO_FLOAT", "'abc' does not start with a number"),
    ("1e50", "TO_FLOAT", "'1e50' is out of float's range"),
    ("x1", "TO_INT64", "'x1' does not start with an integer"),
    ("99999999999999999999", "TO_INT64", "out of int64's range"),
])
def test_castmap_refuses_text_that_c_does_not_read(text, cast_to, message, driver):
    element = "float" if cast_to == "TO_FLOAT" else "int64"
    model = map_in_model("CastMap", {"cast_to": cast_to}, "int64", "string", element)
    with pytest.raises(cyloop.ExecutionError, match=message):
        _load(model, driver).run({"X": {0: text}})


# onnxruntime's Python API feeds maps of float values only: the others are checked against the
# specification's loop, in the layout the float ones pin to onnxruntime's ([1, V]).
DICT_CASES = {
    "string keys, float": ("string", "float", ["a", "c", "b", "z"], {"a": 4.0, "c": 8.5,
                                                                     "q": 1.0}),
    "int keys, float": ("int64", "float", [5, 1, 9, -2], {1: 2.5, -2: 7.0, 4: 1.0}),
}
SPEC_CASES = {
    "string keys, double": ("string", "double", ["x", "y", "x"], {"y": 0.1, "x": -2.0}),
    "string keys, int64": ("string", "int64", ["b", "a", "d"], {"a": 3, "b": -9, "c": 1}),
    "int keys, double": ("int64", "double", [0, 3], {3: 1e-300, 0: 2.0}),
    "int keys, string": ("int64", "string", [4, 1, 7, 4], {1: "one", 4: "four", 9: "nine"}),
}


def _vectorizer(key, value, vocabulary):
    attr = "string_vocabulary" if key == "string" else "int64_vocabulary"
    return map_in_model("DictVectorizer", {attr: vocabulary}, key, value, value)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("case", list(DICT_CASES.values()), ids=list(DICT_CASES))
def test_dictvectorizer_matches_onnxruntime(case, driver):
    key, value, vocabulary, feed = case
    model = _vectorizer(key, value, vocabulary)
    expected = ort_run(model, {"X": feed})
    assert not isinstance(expected, Exception), expected
    _assert_tensors(_load(model, driver).run({"X": feed})["Y"], expected["Y"])


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("case", list(SPEC_CASES.values()), ids=list(SPEC_CASES))
def test_dictvectorizer_follows_the_specification(case, driver):
    key, value, vocabulary, feed = case
    got = _load(_vectorizer(key, value, vocabulary), driver).run({"X": feed})["Y"]
    # Each vocabulary entry's value, the type's zero ("" for strings) where the map has none;
    # keys outside the vocabulary are left out, as onnxruntime leaves them.
    dtype = {"double": np.float64, "int64": np.int64, "string": object}[value]
    zero = "" if value == "string" else 0
    expected = np.array([[feed.get(word, zero) for word in vocabulary]], dtype=dtype)
    _assert_tensors(got, expected)


@pytest.mark.parametrize("driver", DRIVERS)
def test_dictvectorizer_refuses_a_map_of_the_other_key_type(driver):
    model = map_in_model("DictVectorizer", {"string_vocabulary": ["a"]}, "int64", "float",
                         "float")
    assert isinstance(ort_run(model, {"X": {1: 1.0}}), Exception)
    with pytest.raises(cyloop.ExecutionError, match="needs the int64_vocabulary attribute"):
        _load(model, driver).run({"X": {1: 1.0}})
