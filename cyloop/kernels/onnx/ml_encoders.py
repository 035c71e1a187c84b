"""ai.onnx.ml's feature encoders as skl2onnx writes them: Imputer, FeatureVectorizer,
OneHotEncoder and LabelEncoder, as onnxruntime computes them. String tensors are numpy object
arrays of str; a look-up of numbers is a sorted search, of strings a dict."""

import numpy as np

from ..registry import kernel

ML = "ai.onnx.ml"
_F = np.float32


@kernel("Imputer", domain=ML, since=1)
def imputer(attrs):
    """Imputer-1: the values equal to the replaced value (NaN: every NaN) become the imputed
    value, one for all or one a column, in x's type. As in onnxruntime, a list of one value a
    column is read along the flat index modulo the second dimension (the first of a 1-D x)."""
    floats = list(attrs.get("imputed_value_floats", []))
    ints = list(attrs.get("imputed_value_int64s", []))
    if bool(floats) == bool(ints):
        raise ValueError("Imputer needs imputed_value_floats or imputed_value_int64s, not both")
    replaced_float = float(attrs.get("replaced_value_float", 0.0))
    replaced_int = int(attrs.get("replaced_value_int64", 0))

    def imputed(x):
        if x.ndim == 0:
            raise ValueError("Imputer: the input needs at least one dimension")
        if x.dtype.kind == "f":
            values, replaced = floats, x.dtype.type(replaced_float)
        else:
            values, replaced = ints, x.dtype.type(replaced_int)
        if not values:
            raise ValueError(f"Imputer: no imputed values for a {x.dtype} input")
        values = np.asarray(values).astype(x.dtype)
        stride = x.shape[0] if x.ndim == 1 else x.shape[1]
        hit = np.isnan(x) if x.dtype.kind == "f" and np.isnan(replaced) else x == replaced
        flat = x.reshape(-1)
        if values.size == stride and stride:
            fill = values[np.arange(flat.size) % stride].reshape(x.shape)
        else:
            fill = values[0]
        return np.where(hit, fill, x)

    return imputed


@kernel("FeatureVectorizer", domain=ML, since=1)
def feature_vectorizer(attrs):
    """FeatureVectorizer-1: the inputs' rows side by side in float32, input i giving
    `inputdimensions[i]` columns: its first ones, padded with zeros where it has fewer. A 1-D
    input is one row; every input has the first one's row count and type."""
    widths = [int(v) for v in attrs.get("inputdimensions", [])]

    def vectorized(*inputs):
        if len(inputs) != len(widths):
            raise ValueError(f"FeatureVectorizer: {len(inputs)} inputs for {len(widths)} "
                             "inputdimensions")
        first = inputs[0]
        if any(x.dtype != first.dtype for x in inputs):
            raise ValueError(f"FeatureVectorizer: inputs of types "
                             f"{sorted({str(x.dtype) for x in inputs})}; they share one (T1)")
        n = 1 if first.ndim == 1 else first.shape[0]
        y = np.zeros((n, sum(widths)), _F)
        offset = 0
        for x, width in zip(inputs, widths):
            rows = x.reshape(1, -1) if x.ndim == 1 else x.reshape(x.shape[0], -1)
            if rows.shape[0] != n:
                raise ValueError(f"FeatureVectorizer: inputs of {n} and {rows.shape[0]} rows")
            taken = min(width, rows.shape[1])
            y[:, offset:offset + taken] = rows[:, :taken]
            offset += width
        return y

    return vectorized


def _lookup(keys):
    """A vectorized map from each of `keys` to its position (the last one where a key is
    repeated, as onnxruntime's map assignment), or -1: sorted keys for numbers, a dict for
    strings. NaN keys match NaN."""
    if keys.dtype == object:
        table = {key: k for k, key in enumerate(keys.tolist())}

        def positions(x):
            flat = [table.get(v, -1) for v in x.reshape(-1).tolist()]
            return np.asarray(flat, np.intp).reshape(x.shape)

        return positions
    order = np.argsort(keys, kind="stable")[::-1]  # later duplicates first
    unique, first = np.unique(keys[order], return_index=True)
    where = order[first]

    def positions(x):
        if not unique.size:
            return np.full(x.shape, -1, np.intp)
        index = np.clip(np.searchsorted(unique, x), 0, unique.size - 1)
        found = unique[index] == x
        if unique.dtype.kind == "f" and np.isnan(unique[-1]):
            found |= np.isnan(x) & (index == unique.size - 1)
        return np.where(found, where[index], -1)

    return positions


@kernel("OneHotEncoder", domain=ML, since=1)
def one_hot_encoder(attrs):
    """OneHotEncoder-1: x [..] -> [.., categories] float32, 1 at each value's category; numbers
    are truncated to int64 and looked up among cats_int64s, strings among cats_strings. An
    unknown value gives a row of zeros, or with ``zeros=0`` an error."""
    strings = list(attrs.get("cats_strings", []))
    ints = list(attrs.get("cats_int64s", []))
    if bool(strings) == bool(ints):
        raise ValueError("OneHotEncoder needs cats_int64s or cats_strings, not both")
    categories = np.array(strings, dtype=object) if strings else np.asarray(ints, np.int64)
    find = _lookup(categories)
    zeros = bool(attrs.get("zeros", 1))

    def encoded(x):
        if x.ndim > 2:
            raise ValueError(f"OneHotEncoder: the input has rank {x.ndim}, at most 2")
        if (x.dtype == object) != bool(strings):
            raise ValueError(f"OneHotEncoder: a {x.dtype} input for "
                             f"{'string' if strings else 'integer'} categories")
        keys = x if x.dtype == object else x.astype(np.int64)
        where = find(keys)
        if not zeros and np.any(where < 0):
            raise ValueError("OneHotEncoder: a value in no category, and zeros = 0")
        y = np.zeros(x.shape + (categories.size,), _F)
        np.put_along_axis(y, np.maximum(where, 0)[..., None], _F(1), axis=-1)
        if np.any(where < 0):
            y[where < 0] = 0
        return y

    return encoded


def _label_encoder_table(attrs, version):
    """(keys, values, default) of a LabelEncoder, keys and values as numpy arrays."""
    if version == 1:
        classes = np.array(list(attrs.get("classes_strings", [])), dtype=object)
        return classes, np.arange(classes.size, dtype=np.int64), None
    keys = values = None
    for name, dtype in (("keys_strings", object), ("keys_int64s", np.int64),
                        ("keys_floats", _F), ("keys_tensor", None)):
        if name in attrs:
            keys = np.asarray(attrs[name], dtype).reshape(-1)
    for name, dtype in (("values_strings", object), ("values_int64s", np.int64),
                        ("values_floats", _F), ("values_tensor", None)):
        if name in attrs:
            values = np.asarray(attrs[name], dtype).reshape(-1)
    if keys is None or values is None:
        raise ValueError("LabelEncoder needs keys and values")
    if keys.size != values.size:
        raise ValueError(f"LabelEncoder: {keys.size} keys and {values.size} values")
    return keys, values, attrs.get("default_tensor")


def _label_default(attrs, version, value_dtype, tensor):
    """The value of a key with no entry: default_tensor (4), else the default_* attribute of
    the values' type, else onnxruntime's own default (-1, "_Unused", -0.0; 0.0 for
    floats from keys that are not floats, at version 4)."""
    if tensor is not None and tensor.size:
        return tensor.reshape(-1)[0]
    if value_dtype == object:
        return attrs.get("default_string", "_Unused")
    if value_dtype.kind in "iu":
        return attrs.get("default_int64", -1)
    return attrs.get("default_float", None)


def _label_encoder(attrs, version):
    keys, values, tensor = _label_encoder_table(attrs, version)
    first_keys = keys  # (version 2 and 4 keep the first of repeated keys)

    def encoded(x):
        if version == 1:
            if x.dtype == object:
                table_keys, table_values = keys, values
                default = np.int64(attrs.get("default_int64", -1))
            else:
                table_keys, table_values = values, keys
                default = attrs.get("default_string", "_Unused")
        else:
            table_keys, table_values = first_keys, values
            default = _label_default(attrs, version, values.dtype, tensor)
            if default is None:  # float values
                default = -0.0 if version == 2 or x.dtype.kind == "f" else 0.0
        if (x.dtype == object) != (table_keys.dtype == object):
            raise ValueError(f"LabelEncoder: a {x.dtype} input for {table_keys.dtype} keys")
        # First of repeated keys: look up the reversed table (its last is the first).
        positions = _lookup(table_keys[::-1])(x if x.dtype == object
                                              else x.astype(table_keys.dtype, copy=False))
        if version == 2 and x.dtype.kind == "f":  # (no NaN key matches before version 4)
            positions = np.where(np.isnan(x), -1, positions)
        found = positions >= 0
        reversed_values = table_values[::-1]
        y = np.empty(x.shape, table_values.dtype)
        y[...] = np.asarray(default).astype(table_values.dtype) \
            if table_values.dtype != object else default
        y[found] = reversed_values[positions[found]]
        return y

    return encoded


@kernel("LabelEncoder", domain=ML, since=1)
def label_encoder_1(attrs):
    """LabelEncoder-1: strings to their index in classes_strings (default_int64 for none),
    int64 to the string at that index (default_string)."""
    return _label_encoder(attrs, 1)


@kernel("LabelEncoder", domain=ML, since=2)
def label_encoder_2(attrs):
    """LabelEncoder-2: keys_* to values_* (strings, int64s, floats), the first of repeated
    keys winning; default_* for other values."""
    return _label_encoder(attrs, 2)


@kernel("LabelEncoder", domain=ML, since=4)
def label_encoder_4(attrs):
    """LabelEncoder-4: as 2, the keys and values also as tensors (keys_tensor, values_tensor,
    default_tensor: int16 and double too), and a NaN key matching NaN."""
    return _label_encoder(attrs, 4)


@kernel("CategoryMapper", domain=ML, since=1)
def category_mapper(attrs):
    """CategoryMapper-1: strings to the int64 paired with them (cats_strings[k] with
    cats_int64s[k]; default_int64 for none), int64s to their string (default_string); the last
    of repeated keys wins, as in onnxruntime's map."""
    strings = np.empty(len(attrs.get("cats_strings", [])), object)
    strings[:] = list(attrs.get("cats_strings", []))
    ints = np.asarray(list(attrs.get("cats_int64s", [])), np.int64)
    if strings.size != ints.size:
        raise ValueError(f"CategoryMapper: {strings.size} cats_strings and {ints.size} "
                         "cats_int64s")
    by_string, by_int = _lookup(strings), _lookup(ints)
    default_int = np.int64(attrs.get("default_int64", -1))
    default_string = attrs.get("default_string", "_Unused")

    def mapped(x):
        if x.dtype == object:
            positions, values, y = by_string(x), ints, np.full(x.shape, default_int)
        elif x.dtype == np.int64:
            positions, values = by_int(x), strings
            y = np.empty(x.shape, object)
            y[...] = default_string
        else:
            raise ValueError(f"CategoryMapper maps strings or int64s, not {x.dtype}")
        found = positions >= 0
        y[found] = values[positions[found]]
        return y

    return mapped
