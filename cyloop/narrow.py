"""The element types numpy lacks: bfloat16 and the 8-, 6-, 4- and 2-bit floats and integers, from
ml_dtypes (the onnx extra brings it).

ml_dtypes is imported the first time a model names one of them, so a process that loads a
float32 model does not pay for it. A narrow dtype exists only once ml_dtypes is imported, so a
kernel asks `is_narrow(dtype)` first: on numpy's own types the answer costs no import, and on a
narrow one its name (ml_dtypes' own, as ``np.dtype(ml_dtypes.bfloat16).name == "bfloat16"``)
says which it is.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping

import numpy as np

__all__ = ["ElementTypes", "is_narrow", "ml_dtypes"]


@functools.cache
def ml_dtypes():
    """The ml_dtypes module, imported at the first call; None where it is not installed."""
    try:
        import ml_dtypes as module
    except ImportError:  # pragma: no cover - the onnx extra brings it
        return None
    return module


def is_narrow(dtype: np.dtype) -> bool:
    """Whether `dtype` is one of ml_dtypes' types (user-defined to numpy, defined in ml_dtypes)."""
    return dtype.isbuiltin == 2 and getattr(dtype.type, "__module__", None) == "ml_dtypes"


class ElementTypes(Mapping):
    """A format's element types, key -> numpy dtype: numpy's own, and the narrow ones by their
    ml_dtypes names, which import ml_dtypes when first looked up. A narrow type is absent where
    ml_dtypes is not installed or lacks it (an older release)."""

    def __init__(self, common: dict, narrow: dict[object, str]):
        self._common = {key: np.dtype(value) for key, value in common.items()}
        self._narrow = dict(narrow)

    def __getitem__(self, key) -> np.dtype:
        found = self._common.get(key)
        if found is not None:
            return found
        name = self._narrow[key]  # (KeyError: no such type at all)
        module = ml_dtypes()
        if module is None or not hasattr(module, name):
            raise KeyError(key)
        return np.dtype(getattr(module, name))

    def __contains__(self, key) -> bool:
        if key in self._common:
            return True
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator:
        yield from self._common
        yield from (key for key in self._narrow if key in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def narrow_name(self, key) -> str | None:
        """ml_dtypes' name of a narrow type's key (None for numpy's own or an unknown key),
        whether or not ml_dtypes is installed."""
        return self._narrow.get(key)
