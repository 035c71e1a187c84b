"""kernels/_shapes.py: the readers kernels use for small integer operands (axes, starts, shapes)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cyloop import kernels
from cyloop.accel.aligned import aligned_empty
from cyloop.kernels import _shapes


def _read_only(array):
    array.flags.writeable = False
    return array


def _aligned(values):
    array = aligned_empty((len(values),), np.int64)
    array[:] = values
    return _read_only(array)


@pytest.mark.parametrize("value, constant", [
    (_read_only(np.array([1, 2])), True),
    (_aligned([1, 2]), True),  # (what the frontends make: owning its block, not its data)
    (np.array([1, 2]), False),  # writeable
    (_read_only(np.array([[1, 2]])[0]), False),  # a read-only view: its base may be written
    ((1, 2), False),
], ids=["read-only", "aligned, read-only", "writeable", "read-only view", "tuple"])
def test_is_constant_only_for_arrays_nothing_writes(value, constant):
    assert _shapes.is_constant(value) == constant


def test_remembered_reads_a_constant_once_and_anything_else_every_call():
    calls = []

    def convert(values):
        calls.append(values)
        return _shapes.flat_int_list(values)

    read = _shapes.remembered(convert)
    constant = _read_only(np.array([0, 1]))
    assert read(constant) == [0, 1] and read(constant) == [0, 1] and len(calls) == 1
    base = np.array([[3, 4]])
    view = _read_only(base[0])
    assert read(view) == [3, 4]
    base[0, 0] = 5
    assert read(view) == [5, 4]
    changing = np.array([6, 7])
    assert read(changing) == [6, 7]
    changing[1] = 8
    assert read(changing) == [6, 8]
    assert read(constant) == [0, 1] and len(calls) == 5  # (one entry: the last constant's)
    attribute = (2, 3)
    assert read(attribute) == [2, 3] and read(attribute) == [2, 3] and len(calls) == 6


@pytest.mark.parametrize("op, extra, data", [
    ("Slice", 2, np.arange(24).reshape(4, 6)), ("Squeeze", 0, np.arange(6).reshape(1, 6, 1))])
def test_kernels_follow_operands_that_change_and_keep_constant_ones(op, extra, data):
    """Slice's axes and steps, Squeeze's axes: a constant read once, a writeable operand or a
    read-only view of one read again when it changes, against numpy's own indexing."""
    kernel = kernels.lookup("", op, 13).build({})
    for make in (lambda v: _read_only(np.array(v)), np.array,
                 lambda v: _read_only(np.array([v])[0])):
        if op == "Slice":
            starts, ends = np.array([1, 0]), np.array([3, 6])
            axes, steps = make([0, 1]), make([1, 2])
            np.testing.assert_array_equal(kernel(data, starts, ends, axes, steps),
                                          data[1:3, 0:6:2])
            if axes.flags.writeable:
                axes[:], steps[:] = [1, 0], [3, 1]
            elif axes.base is not None:
                axes.base[0], steps.base[0] = [1, 0], [3, 1]
            else:
                continue
            np.testing.assert_array_equal(kernel(data, starts, ends, axes, steps),
                                          data[0:6, 1:3][:, ::3])
        else:
            axes = make([0])
            assert kernel(data, axes).shape == (6, 1)
            if axes.flags.writeable:
                axes[0] = 2
            elif axes.base is not None:
                axes.base[0, 0] = 2
            else:
                continue
            assert kernel(data, axes).shape == (1, 6)


def test_reshape_follows_shapes_that_change_and_keeps_constant_ones():
    """Reshape's shape: a constant read once, a writeable operand or a read-only view of one
    read again when it changes (a 0 copying the input's dimension), against numpy's reshape."""
    kernel = kernels.lookup("", "Reshape", 14).build({})
    data = np.arange(24).reshape(2, 3, 4)
    for make in (lambda v: _read_only(np.array(v)), np.array,
                 lambda v: _read_only(np.array([v, v])[0])):
        shape = make([0, -1, 1])
        np.testing.assert_array_equal(kernel(data, shape), data.reshape(2, 12, 1))
        if shape.flags.writeable:
            shape[:] = [4, 0, -1]
        elif shape.base is not None:
            shape.base[0] = [4, 0, -1]
        else:
            np.testing.assert_array_equal(kernel(data.T, shape), data.T.reshape(4, 6, 1))
            continue
        np.testing.assert_array_equal(kernel(data, shape), data.reshape(4, 3, 2))


@pytest.mark.parametrize("domain", ["", "openvino"])
def test_unsqueeze_follows_axes_and_ranks_that_change_and_keeps_constant_axes(domain):
    """Unsqueeze's axes: a constant's places read once per input rank, a writeable operand or a
    read-only view of one read again when it changes, against np.expand_dims."""
    kernel = kernels.lookup(domain, "Unsqueeze", 13 if not domain else 1).build({})
    inputs = [np.arange(6).reshape(2, 3), np.arange(6), np.arange(6).reshape(1, 2, 3),
              np.arange(6).reshape(2, 3)]
    for make in (lambda v: _read_only(np.array(v)), np.array,
                 lambda v: _read_only(np.array([v])[0])):
        axes = make([0, -1])
        for data in inputs:  # (one axes array, inputs of other ranks)
            got = kernel(data, axes)
            assert got.shape == np.expand_dims(data, (0, -1)).shape
            np.testing.assert_array_equal(got.ravel(), data.ravel())
        if axes.flags.writeable:
            axes[:] = [1, 2]
        elif axes.base is not None:
            axes.base[0] = [1, 2]
        else:
            continue
        for data in inputs:
            assert kernel(data, axes).shape == np.expand_dims(data, (1, 2)).shape
    with pytest.raises(ValueError):  # (numpy's own error for repeated axes)
        kernel(inputs[0], _read_only(np.array([1, 1])))


@given(st.lists(st.integers(0, 3), max_size=5), st.lists(st.integers(0, 3), max_size=5))
def test_broadcast_shape_is_numpys(have, want):
    have, want = tuple(have), tuple(want)
    try:
        expected = np.broadcast_shapes(have, want)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e).split("(")[0].strip()):
            _shapes.broadcast_shape(have, want)
    else:
        assert _shapes.broadcast_shape(have, want) == expected
