"""`TensorSequence`: values that never change once made, with O(1) appends to the newest one.
A plain Python list, copied on every change, is the oracle for every operation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cyloop.sequence import TensorSequence

# An operation on one of the sequences made so far: (which, "insert", position or None, value)
# or (which, "erase", position or None).
operations = st.lists(st.tuples(
    st.integers(0, 50),
    st.sampled_from(["insert", "erase"]),
    st.none() | st.integers(-4, 4),
    st.integers(0, 100)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_every_version_keeps_its_own_elements(ops):
    """Build a tree of versions by inserting into and erasing from any earlier one; every
    version always reads as the list it was made as."""
    versions = [(TensorSequence(dtype=np.int64), [])]
    for which, op, position, value in ops:
        seq, expected = versions[which % len(versions)]
        expected = list(expected)
        if op == "insert":
            if position is not None and not -len(expected) <= position <= len(expected):
                continue
            item = np.array(value, np.int64)
            if position is None:
                expected.append(value)
            else:
                expected.insert(position, value)
            seq = seq.inserted(item, position)
        else:
            if not expected or (position is not None
                                and not -len(expected) <= position < len(expected)):
                continue
            del expected[-1 if position is None else position]
            seq = seq.erased(position)
        versions.append((seq, expected))
        for old, old_expected in versions:
            assert [int(x) for x in old] == old_expected
            assert len(old) == len(old_expected)


def test_appending_to_the_newest_version_copies_no_list():
    seq = TensorSequence(dtype=np.float32)
    before = TensorSequence.list_copies
    for k in range(1000):
        seq = seq.inserted(np.full(2, k, np.float32))
    assert TensorSequence.list_copies == before
    shorter = seq.erased()  # dropping the last element is a shorter view, no copy either
    assert TensorSequence.list_copies == before and len(shorter) == 999
    seq.erased(0)  # in the middle: one copy of the references (never of the arrays)
    assert TensorSequence.list_copies == before + 1


def test_indexing_follows_python_lists():
    items = [np.array(k) for k in range(4)]
    seq = TensorSequence(items)
    for index in range(-4, 4):
        assert seq[index] is items[index]
    assert [int(x) for x in seq[1:3]] == [1, 2]
    for index in (4, -5):
        with pytest.raises(IndexError, match=f"index {index} out of range for length 4"):
            seq[index]


def test_the_dtype_is_declared_or_taken_from_the_first_element():
    assert TensorSequence(dtype=np.float16).dtype == np.float16
    assert TensorSequence([np.zeros(2, np.int8)]).dtype == np.int8
    assert TensorSequence().inserted(np.zeros(1, np.uint16)).dtype == np.uint16


def test_erasing_from_an_empty_sequence_is_an_error():
    with pytest.raises(IndexError, match="empty sequence"):
        TensorSequence().erased()
