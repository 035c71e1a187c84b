"""The C helpers behind the planner: strided copy and 64-byte-aligned allocation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cyloop.engine import _core


@st.composite
def strided_sources(draw):
    """A view with arbitrary strides (steps, reversals, transposes) into a larger array."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    dtype = draw(st.sampled_from([np.int8, np.float32, np.float64, np.complex128]))
    big_shape = [2 * s for s in shape]
    big = np.arange(int(np.prod(big_shape))).astype(dtype).reshape(big_shape)
    steps = tuple(slice(None, None, draw(st.sampled_from([1, 2, -1]))) for _ in shape)
    src = big[steps + (Ellipsis,)][tuple(slice(0, s) for s in shape) + (Ellipsis,)]
    if draw(st.booleans()):
        src = src.transpose()
    return src


@settings(max_examples=200, deadline=None)
@given(src=strided_sources(), order=st.sampled_from(["C", "F", "reversed"]))
def test_strided_copy_matches_numpy(src, order):
    if order == "reversed":
        flip = tuple(slice(None, None, -1) for _ in src.shape)
        dst = np.zeros(src.shape, src.dtype)[flip + (Ellipsis,)]
    else:
        dst = np.zeros(src.shape, src.dtype, order=order)
    nbytes = _core.strided_copy(dst, src)
    np.testing.assert_array_equal(dst, src)
    assert nbytes == src.nbytes


def test_strided_copy_refuses_mismatches():
    with pytest.raises(ValueError, match="one shape and dtype"):
        _core.strided_copy(np.zeros(3), np.zeros(4))
    read_only = np.zeros(3)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _core.strided_copy(read_only, np.zeros(3))


@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16])
def test_aligned_empty_is_aligned_and_usable(shape, dtype):
    arr = _core.aligned_empty(shape, dtype)
    assert arr.shape == shape and arr.dtype == dtype
    assert arr.ctypes.data % 64 == 0
    assert arr.flags.c_contiguous and arr.flags.writeable
    arr[...] = 1
    assert np.all(arr == 1)


def test_strided_copy_between_overlapping_arrays():
    a = np.arange(8.0)
    _core.strided_copy(a, a[::-1])
    np.testing.assert_array_equal(a, np.arange(8.0)[::-1])
