"""Sequences and optionals. A sequence is a `TensorSequence` (O(1) amortized append, elements
never copied); an empty optional is None and a full one is its element."""

import numpy as np

from ...sequence import TensorSequence
from ..registry import kernel


def _position(position, length, inserting=False):
    if position is None:
        return None
    p = int(np.asarray(position).reshape(-1)[0])
    limit = length + 1 if inserting else length
    if not -length <= p < limit:
        raise IndexError(f"position {p} is out of range for a sequence of length {length}")
    return p + length if p < 0 else p


@kernel("SequenceEmpty", since=11)
def sequence_empty(attrs):
    dtype = np.dtype(attrs.get("dtype", np.float32))  # resolved by the frontend
    return lambda: TensorSequence(dtype=dtype)


@kernel("SequenceConstruct", since=11)
def sequence_construct(attrs):
    return lambda *tensors: TensorSequence(tensors)


@kernel("SequenceInsert", since=11)
def sequence_insert(attrs):
    def insert(sequence, tensor, position=None):
        if position is None:
            return sequence.appended(tensor)
        return sequence.inserted(tensor, _position(position, len(sequence), inserting=True))

    return insert


@kernel("SequenceAt", since=11)
def sequence_at(attrs):
    def at(sequence, position):
        return sequence[_position(position, len(sequence))]

    return at


@kernel("SequenceErase", since=11)
def sequence_erase(attrs):
    def erase(sequence, position=None):
        return sequence.erased(_position(position, len(sequence)))

    return erase


@kernel("SequenceLength", since=11)
def sequence_length(attrs):
    return lambda sequence: np.array(len(sequence), dtype=np.int64)


@kernel("ConcatFromSequence", since=11)
def concat_from_sequence(attrs):
    axis, new_axis = int(attrs["axis"]), bool(attrs.get("new_axis", 0))

    def concat(sequence):
        items = list(sequence)
        return np.stack(items, axis=axis) if new_axis else np.concatenate(items, axis=axis)

    return concat


@kernel("SplitToSequence", since=11)
def split_to_sequence(attrs):
    axis, keepdims = int(attrs.get("axis", 0)), bool(attrs.get("keepdims", 1))

    def split(data, split=None):
        length = data.shape[axis]
        if split is None:
            parts = [np.take(data, [k], axis=axis) for k in range(length)]
            if not keepdims:
                parts = [np.squeeze(p, axis=axis) for p in parts]
            return TensorSequence(parts, dtype=data.dtype)
        split = np.asarray(split)
        if split.ndim == 0:
            step = int(split)
            bounds = list(range(step, length, step))
        else:
            bounds = np.cumsum(split)[:-1].tolist()
        return TensorSequence(np.split(data, bounds, axis=axis), dtype=data.dtype)

    return split


@kernel("Optional", since=15)
def optional(attrs):
    return lambda value=None: value


@kernel("OptionalHasElement", since=15)
def optional_has_element(attrs):
    return lambda value=None: np.array(value is not None)


@kernel("OptionalGetElement", since=15)
def optional_get_element(attrs):
    def get(value):
        if value is None:
            raise ValueError("OptionalGetElement on an empty optional")
        return value

    return get
