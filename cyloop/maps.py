"""Maps: ONNX's ``map(K, V)`` values, which ai.onnx.ml's ZipMap makes (a sequence of them) and
CastMap and DictVectorizer read.

A user gives and takes a map as a dict, as onnxruntime's Python API does. In a run a map is a
`TensorMap`: its keys in ascending order (as onnxruntime's ``std::map`` holds them) as one array
of the key type, its values in the same order as one array of the value type. The kernels read
arrays, and the value type a dict of Python numbers cannot tell (float or double) travels with
the map. A feed is converted once (`map_feed`) into arrays of its own, so nothing a run does
reaches the caller's dict; an output becomes a fresh dict of Python scalars (`handed`), as
onnxruntime returns one (``{0: 0.57, 1: 0.43}``: int or str keys, float, int or str values).

This module loads where a model has a map: `import cyloop` does not load it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .errors import InputError

__all__ = ["TensorMap", "handed", "is_map_value", "map_feed", "map_sequence_feed", "map_type",
           "type_name"]

_OBJECT = np.dtype(object)


class TensorMap:
    """An immutable map: `keys` (1-D, ascending, no two equal) and `values` (1-D, the value of
    each key; a tuple of lists of arrays where the values are sequences), both read-only."""

    __slots__ = ("keys", "values")

    def __init__(self, keys: np.ndarray, values):
        self.keys = keys
        self.values = values

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        return f"TensorMap({self.as_dict()!r})"

    def as_dict(self) -> dict:
        """A fresh dict of Python scalars (a sequence value: a list of fresh arrays)."""
        keys = self.keys.tolist()
        if isinstance(self.values, np.ndarray):
            return dict(zip(keys, self.values.tolist()))
        return dict(zip(keys, ([np.array(item) for item in items] for items in self.values)))


def is_map_value(value) -> bool:
    """Whether a run's value is a map or a sequence of maps (a tuple of TensorMaps)."""
    return isinstance(value, TensorMap) or (
        type(value) is tuple and all(isinstance(item, TensorMap) for item in value))


def handed(value):
    """A map as the caller gets it: a dict; a sequence of maps: a list of dicts."""
    if isinstance(value, TensorMap):
        return value.as_dict()
    return [item.as_dict() for item in value]


def type_name(dtype: np.dtype | None) -> str:
    """A key or value type as ONNX writes it in ``map(int64, float)``: str's object is string."""
    if dtype is None:
        return "?"
    return {"object": "string", "float32": "float", "float64": "double"}.get(dtype.name,
                                                                            dtype.name)


def map_type(declared) -> str:
    """``map(int64, float)``, ``map(string, seq(float))``: what an input declares."""
    value = type_name(declared.dtype)
    if declared.value_kind == "sequence":
        value = f"seq({value})"
    return f"map({type_name(declared.key_dtype)}, {value})"


def map_sequence_feed(declared, value) -> tuple:
    """A ``seq(map(K, V))`` feed (a list or tuple of dicts) as a tuple of TensorMaps."""
    if not isinstance(value, (list, tuple)):
        raise InputError(f"input {declared.name!r}: expected a sequence of maps (a list of "
                         f"dicts, {map_type(declared)}), got {type(value).__name__}")
    return tuple(map_feed(declared, item, f" element {k}") for k, item in enumerate(value))


def map_feed(declared, value, where: str = "") -> TensorMap:
    """A ``map(K, V)`` feed (a dict) as a TensorMap of arrays of its own; an InputError naming
    the input, the key or value and the declared type for what does not fit. Integer keys and
    values must be integers (Python's or numpy's, not bool) that fit the type, float values
    integers or floats (made the declared float type, as onnxruntime does), string keys and
    values str."""
    name = f"input {declared.name!r}{where}"
    if not isinstance(value, Mapping):
        raise InputError(f"{name}: expected a map (a dict, {map_type(declared)}), got "
                         f"{type(value).__name__}")
    keys = _keys(name, declared, list(value.keys()))
    if declared.value_kind == "sequence":
        values = tuple(_sequence(name, declared, key, item) for key, item in value.items())
    else:
        values = _scalars(name, declared, list(value.values()), list(value.keys()))
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    if len(keys) > 1 and np.any(keys[1:] == keys[:-1]):  # (equal keys of two Python types)
        raise InputError(f"{name}: the key {keys[1:][keys[1:] == keys[:-1]][0]!r} is given "
                         "twice")
    values = values[order] if isinstance(values, np.ndarray) else tuple(values[k] for k in order)
    keys.flags.writeable = False
    if isinstance(values, np.ndarray):
        values.flags.writeable = False
    return TensorMap(keys, values)


def _keys(name: str, declared, keys: list) -> np.ndarray:
    want = declared.key_dtype
    if want == _OBJECT:
        for key in keys:
            if not isinstance(key, str):
                raise InputError(f"{name}: a key of a {map_type(declared)} must be a str, got "
                                 f"{type(key).__name__} {key!r}")
        return np.array(keys, dtype=object).reshape(len(keys))
    for key in keys:
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)):
            raise InputError(f"{name}: a key of a {map_type(declared)} must be an integer, got "
                             f"{type(key).__name__} {key!r}")
    info = np.iinfo(want)
    for key in keys:
        if not info.min <= int(key) <= info.max:
            raise InputError(f"{name}: the key {int(key)} does not fit in {want}")
    return np.array([int(key) for key in keys], dtype=want)


def _scalars(name: str, declared, values: list, keys: list) -> np.ndarray:
    want = declared.dtype
    if want == _OBJECT:
        for key, value in zip(keys, values):
            if not isinstance(value, str):
                raise InputError(f"{name}: the value of key {key!r} must be a str (the map is "
                                 f"{map_type(declared)}), got {type(value).__name__} "
                                 f"{value!r}")
        return np.array(values, dtype=object).reshape(len(values))
    allowed = "b" if want.kind == "b" else "iu" if want.kind in "iu" else "iuf" \
        if want.kind == "f" else "iufc"
    for key, value in zip(keys, values):
        kind = np.asarray(value).dtype.kind if isinstance(value, (np.ndarray, np.generic)) \
            else "b" if isinstance(value, bool) else "i" if isinstance(value, int) \
            else "f" if isinstance(value, float) else "c" if isinstance(value, complex) else None
        if kind is None or kind not in allowed or (isinstance(value, np.ndarray) and value.ndim):
            shown = f"{type(value).__name__} {value!r}" if np.ndim(value) == 0 \
                else f"an array of shape {list(np.shape(value))}"
            raise InputError(f"{name}: the value of key {key!r} must be a "
                             f"{type_name(want)} scalar (the map is {map_type(declared)}), "
                             f"got {shown}")
    if want.kind in "iu":
        info = np.iinfo(want)
        for key, value in zip(keys, values):
            if not info.min <= int(value) <= info.max:
                raise InputError(f"{name}: the value {int(value)} of key {key!r} does not fit "
                                 f"in {want}")
        return np.array([int(value) for value in values], dtype=want)
    with np.errstate(over="ignore"):  # (1e300 as float32 is inf, as in onnxruntime)
        return np.array([value.item() if isinstance(value, (np.ndarray, np.generic)) else value
                         for value in values], dtype=want).reshape(len(values))


def _sequence(name: str, declared, key, items) -> list:
    if not isinstance(items, (list, tuple)):
        raise InputError(f"{name}: the value of key {key!r} must be a sequence (a list of "
                         f"arrays; the map is {map_type(declared)}), got "
                         f"{type(items).__name__}")
    arrays = []
    for item in items:
        array = np.array(item)  # (a copy of its own)
        if array.dtype != declared.dtype:
            raise InputError(f"{name}: the value of key {key!r} holds an array of "
                             f"{array.dtype}, expected {declared.dtype}")
        if declared.shape is not None and array.ndim != len(declared.shape):
            raise InputError(f"{name}: the value of key {key!r} holds an array of rank "
                             f"{array.ndim}, expected rank {len(declared.shape)}")
        array.flags.writeable = False
        arrays.append(array)
    return arrays
