"""Reading layer attributes and the shared broadcasting rules.

Attributes arrive as the IR writes them (strings), except element types (``destination_type``,
``output_type``, ``index_element_type``), which the frontend has already resolved to numpy dtypes.
"""

import numpy as np

from ..ir import OPENVINO_DOMAIN

DOMAIN = OPENVINO_DOMAIN


def as_dtype(attrs, key, default=None):
    """An element-type attribute as a numpy dtype (`default` where the layer leaves it out)."""
    value = attrs.get(key)
    return default if value is None else np.dtype(value)


# The integer element types by their IR names, for an element-type attribute the frontend leaves
# as the IR wrote it (it resolves only the ones it knows of, such as index_element_type).
_INTEGER_TYPES = {"i32": np.int32, "i64": np.int64}


def as_integer_type(attrs, key, default=np.int64):
    """An integer element-type attribute (i32 or i64), resolved or as the IR spells it."""
    value = attrs.get(key)
    if value in (None, ""):
        return np.dtype(default)
    if isinstance(value, str):
        if value.lower() not in _INTEGER_TYPES:
            raise ValueError(f"{key} must be i32 or i64, got {value!r}")
        return np.dtype(_INTEGER_TYPES[value.lower()])
    return np.dtype(value)


def as_int(attrs, key, default=None):
    value = attrs.get(key)
    return default if value in (None, "") else int(value)


def as_float(attrs, key, default=None):
    value = attrs.get(key)
    return default if value in (None, "") else float(value)


def as_bool(attrs, key, default=False):
    value = attrs.get(key)
    if value in (None, ""):
        return default
    return str(value).lower() in ("true", "1")


def as_ints(attrs, key, default=None):
    value = attrs.get(key)
    if value in (None, ""):
        return default
    return [int(v) for v in str(value).split(",") if v.strip()]


def as_choice(attrs, key, choices):
    """A keyword attribute, lower-cased, one of `choices` (the first is the default)."""
    value = str(attrs.get(key) or choices[0]).lower()
    if value not in choices:
        raise ValueError(f"{key} must be one of {', '.join(choices)}, got {value!r}")
    return value


def broadcast_batches(attrs, batched):
    """Whether rows of some operands can be batched under the layer's ``auto_broadcast``: numpy
    broadcasting aligns them; with ``none`` only if every operand has rows; never with pdpd."""
    mode = str(attrs.get("auto_broadcast", "numpy")).lower()
    return mode == "numpy" or (mode == "none" and all(batched))


def broadcasting(fn, attrs):
    """`fn` under the layer's ``auto_broadcast``: numpy (default), none (shapes must match) or
    pdpd (the second operand aligned at ``axis``)."""
    mode = attrs.get("auto_broadcast", "numpy").lower()
    if mode == "numpy":
        return fn
    if mode == "none":
        def strict(a, b, out=None):
            if np.shape(a) != np.shape(b):
                raise ValueError(f"auto_broadcast='none' needs equal shapes, got {np.shape(a)} "
                                 f"and {np.shape(b)}")
            return fn(a, b, out=out)

        return strict
    if mode == "pdpd":
        axis = as_int(attrs, "axis", -1)

        def paddle(a, b, out=None):
            a_rank, b_rank = np.ndim(a), np.ndim(b)
            start = a_rank - b_rank if axis == -1 else axis
            b = np.reshape(b, (1,) * start + np.shape(b) + (1,) * (a_rank - start - b_rank))
            return fn(a, b, out=out)

        return paddle
    raise ValueError(f"unknown auto_broadcast {mode!r}")
