"""`TensorSequence`: an immutable sequence of arrays whose append is O(1) amortized.

ONNX sequences are values: SequenceInsert returns a new sequence and leaves its input unchanged.
Copying the element list on every insert makes a loop that grows a sequence quadratic (what
onnxruntime does). Here every sequence is a view ``items[:length]`` of a shared Python list: an
append to the newest view extends the shared list in place and returns a longer view, so older
views still see exactly their own elements. Only an append to an older view, or an insert or erase
in the middle, copies the element list (references, never the arrays themselves).
"""

from __future__ import annotations

import numpy as np

__all__ = ["TensorSequence"]


class TensorSequence:
    """A read-only sequence of numpy arrays (see the module docstring)."""

    __slots__ = ("_items", "_length", "dtype")

    # How many times an element list was copied, summed over all sequences (for tests).
    list_copies = 0

    def __init__(self, items=(), dtype=None):
        self._items = [np.asarray(x) for x in items]
        self._length = len(self._items)
        self.dtype = None if dtype is None else np.dtype(dtype)
        if self.dtype is None and self._length:
            self.dtype = self._items[0].dtype

    @classmethod
    def _view(cls, items: list, length: int, dtype) -> TensorSequence:
        """The first `length` elements of the shared list `items` (`dtype` already a np.dtype
        or None): no checks, as an append in a loop body builds one per iteration."""
        view = object.__new__(cls)
        view._items, view._length, view.dtype = items, length, dtype
        return view

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(self)[index]
        if not -self._length <= index < self._length:
            raise IndexError(f"sequence index {index} out of range for length {self._length}")
        return self._items[index % self._length]

    def __iter__(self):
        return iter(self._items[: self._length])

    def __repr__(self) -> str:
        return f"TensorSequence(length={self._length}, dtype={self.dtype})"

    def _copied(self) -> list:
        TensorSequence.list_copies += 1
        return self._items[: self._length]

    def _dtype_with(self, value):
        return value.dtype if self.dtype is None else self.dtype

    def appended(self, value) -> TensorSequence:
        """A new sequence with `value` appended (SequenceInsert without a position)."""
        if type(value) is not np.ndarray:
            value = np.asarray(value)
        items = self._items
        if len(items) != self._length:  # an older view: appending goes to a copy of the list
            items = self._copied()
        items.append(value)  # the newest view extends the shared list in place
        return TensorSequence._view(items, self._length + 1, self._dtype_with(value))

    def inserted(self, value, position: int | None = None) -> TensorSequence:
        """A new sequence with `value` inserted at `position` (default: at the end)."""
        if position is None or position == self._length:
            return self.appended(value)
        value = np.asarray(value)
        items = self._copied()
        items.insert(position, value)
        return TensorSequence._view(items, len(items), self._dtype_with(value))

    def erased(self, position: int | None = None) -> TensorSequence:
        """A new sequence without the element at `position` (default: the last)."""
        if self._length == 0:
            raise IndexError("cannot erase from an empty sequence")
        if position is None or position in (-1, self._length - 1):
            return TensorSequence._view(self._items, self._length - 1, self.dtype)
        items = self._copied()
        del items[position]
        return TensorSequence._view(items, len(items), self.dtype)
