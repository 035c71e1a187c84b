"""ai.onnx.ml's ops on maps: ZipMap, which every classifier skl2onnx exports ends in (its
probabilities as a sequence of maps, one a row), and CastMap and DictVectorizer, which read a
map into a tensor. A map is a `cyloop.maps.TensorMap` (keys ascending, values beside them), as
onnxruntime computes them; where onnxruntime and the ONNX-ML specification differ,
docs/semantics.md says which is followed."""

import re

import numpy as np

from ...maps import TensorMap
from ..registry import kernel

ML = "ai.onnx.ml"
_OBJECT = np.dtype(object)


@kernel("ZipMap", domain=ML, since=1)
def zip_map(attrs):
    """ZipMap-1: each row of X (float32; a 1-D X is one row) as a map of the class labels
    (`classlabels_int64s` or `classlabels_strings`, exactly one) to the row's columns, one
    column a label, in a sequence of one map a row. A label given twice takes its last column,
    as in onnxruntime."""
    strings = list(attrs.get("classlabels_strings", []))
    ints = list(attrs.get("classlabels_int64s", []))
    if bool(strings) == bool(ints):
        raise ValueError("ZipMap needs classlabels_strings or classlabels_int64s (one of them, "
                         "not empty)")
    labels = np.array(strings, dtype=object) if strings else np.array(ints, dtype=np.int64)
    width = len(labels)
    # The keys in ascending order, each with its last column.
    last = {label: column for column, label in enumerate(labels.tolist())}
    keys = np.array(sorted(last), dtype=labels.dtype).reshape(-1)
    columns = np.array([last[key] for key in keys.tolist()], dtype=np.intp)
    keys.flags.writeable = False
    identity = np.array_equal(columns, np.arange(width))

    def zipped(x):
        if x.ndim not in (1, 2):
            raise ValueError(f"ZipMap: X must be 1-D or 2-D, got shape {list(x.shape)}")
        if x.dtype != np.float32:
            raise ValueError(f"ZipMap: X must be float32, got {x.dtype}")
        if x.shape[-1] != width:
            raise ValueError(f"ZipMap: X has {x.shape[-1]} columns (shape {list(x.shape)}) for "
                             f"{width} class labels")
        rows = x.reshape(-1, width)
        rows = rows.copy() if identity else rows[:, columns]  # (a run's own, read-only)
        rows.flags.writeable = False
        return tuple(TensorMap(keys, row) for row in rows)

    return zipped


_CAST_TO = {"TO_FLOAT": np.dtype(np.float32), "TO_INT64": np.dtype(np.int64),
            "TO_STRING": _OBJECT}
# The numbers C's strtof / strtoll read at the start of a text (after white space), which
# onnxruntime's CastMap converts with (std::stof, std::stoll); the rest of the text is ignored.
_FLOAT_TEXT = re.compile(r"\s*([+-]?(?:inf(?:inity)?|nan|0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)"
                         r"(?:p[+-]?\d+)?|(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?))", re.IGNORECASE)
_INT_TEXT = re.compile(r"\s*([+-]?\d+)")
_INT64 = np.iinfo(np.int64)


def _text_float(text: str) -> float:
    match = _FLOAT_TEXT.match(text)
    if match is None:
        raise ValueError(f"CastMap: {text!r} does not start with a number")
    number = match.group(1)
    if "x" in number.lower():
        sign = -1.0 if number.startswith("-") else 1.0
        body = number.lstrip("+-")
        value = sign * float.fromhex(body if "p" in body.lower() else body + "p0")
    else:
        value = float(number)
    with np.errstate(over="ignore"):
        result = np.float32(value)
    if np.isinf(result) and "inf" not in number.lower():
        raise ValueError(f"CastMap: {text!r} is out of float's range")
    return float(result)


def _text_int(text: str) -> int:
    match = _INT_TEXT.match(text)
    if match is None:
        raise ValueError(f"CastMap: {text!r} does not start with an integer")
    value = int(match.group(1))
    if not _INT64.min <= value <= _INT64.max:
        raise ValueError(f"CastMap: {text!r} is out of int64's range")
    return value


def _cast(values: np.ndarray, to: np.dtype) -> np.ndarray:
    """The map's values (float32 or str) as `to`, each as onnxruntime's CastMap converts it: a
    float to int64 truncated toward 0, to a string as C's ``%f`` writes it; a string to a
    number as C's strtof / strtoll read its start."""
    if values.dtype == _OBJECT:
        if to == _OBJECT:
            return values.copy()
        read = _text_float if to.kind == "f" else _text_int
        return np.array([read(text) for text in values.tolist()], dtype=to).reshape(-1)
    if to == _OBJECT:
        return np.array([f"{value:f}" for value in values.astype(np.float32).tolist()],
                        dtype=object).reshape(-1)
    with np.errstate(invalid="ignore"):
        return values.astype(np.float32).astype(to)


@kernel("CastMap", domain=ML, since=1)
def cast_map(attrs):
    """CastMap-1: a map of int64 keys to float or string values as a [1, n] tensor of
    `cast_to`'s type, in ascending order of the keys: DENSE, the values (n: the map's size);
    SPARSE, n = `max_map`, key k's value at k and a pad elsewhere (0, or "0.f" for strings, as
    onnxruntime writes it). A negative key is refused under SPARSE; keys from `max_map` on are
    left out, as onnxruntime leaves them."""
    cast_to = attrs.get("cast_to", "TO_FLOAT")
    form = attrs.get("map_form", "DENSE")
    size = int(attrs.get("max_map", 1))
    if cast_to not in _CAST_TO:
        raise ValueError(f"CastMap: cast_to must be TO_FLOAT, TO_STRING or TO_INT64, not "
                         f"{cast_to!r}")
    if form not in ("DENSE", "SPARSE"):
        raise ValueError(f"CastMap: map_form must be DENSE or SPARSE, not {form!r}")
    if form == "SPARSE" and size <= 0:
        raise ValueError(f"CastMap: max_map must be above 0 with map_form SPARSE, not {size}")
    to = _CAST_TO[cast_to]

    def cast(x):
        if not isinstance(x, TensorMap) or x.keys.dtype != np.int64 \
                or not isinstance(x.values, np.ndarray):
            raise TypeError("CastMap: X must be a map of int64 keys to float or string values")
        values = _cast(x.values, to)
        if form == "DENSE":
            return values.reshape(1, -1)
        if len(x.keys) and x.keys[0] < 0:
            raise ValueError(f"CastMap: a negative key ({x.keys[0]}) with map_form SPARSE")
        result = np.full((1, size), "0.f" if to == _OBJECT else 0, dtype=to)
        kept = x.keys < size
        result[0, x.keys[kept]] = values[kept]
        return result

    return cast


@kernel("DictVectorizer", domain=ML, since=1)
def dict_vectorizer(attrs):
    """DictVectorizer-1: a map as a [1, V] tensor of its value type, entry i the value of the
    vocabulary's key i (`string_vocabulary` for a map of string keys, `int64_vocabulary` for
    int64 keys), 0 (or "") where the map has no such key. Keys outside the vocabulary are left
    out, as onnxruntime leaves them (the specification requires every key in it)."""
    strings = attrs.get("string_vocabulary")
    ints = attrs.get("int64_vocabulary")
    if strings is None and ints is None:
        raise ValueError("DictVectorizer needs string_vocabulary or int64_vocabulary")
    vocabularies = {}
    if strings is not None:
        vocabularies["string"] = np.array(list(strings), dtype=object).reshape(-1)
    if ints is not None:
        vocabularies["int64"] = np.array(list(ints), dtype=np.int64).reshape(-1)

    def vectorized(x):
        if not isinstance(x, TensorMap) or not isinstance(x.values, np.ndarray):
            raise TypeError("DictVectorizer: X must be a map of scalar values")
        which = "string" if x.keys.dtype == _OBJECT else "int64"
        vocabulary = vocabularies.get(which)
        if vocabulary is None or x.keys.dtype not in (_OBJECT, np.int64):
            raise ValueError(f"DictVectorizer: a map of {x.keys.dtype} keys needs the "
                             f"{which}_vocabulary attribute")
        result = np.full((1, len(vocabulary)), "" if x.values.dtype == _OBJECT else 0,
                         dtype=x.values.dtype)
        if len(x.keys) and len(vocabulary):
            at = np.minimum(np.searchsorted(x.keys, vocabulary), len(x.keys) - 1)
            found = x.keys[at] == vocabulary
            result[0, found] = x.values[at[found]]
        return result

    return vectorized
