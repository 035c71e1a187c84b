"""The shared kernel helpers in cyloop/kernels/_math.py and _shapes.py, against numpy."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cyloop.kernels import _math, _shapes


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sigmoid_is_accurate_over_the_whole_range_without_warnings(dtype):
    info = np.finfo(dtype)
    x = np.concatenate([np.linspace(-50, 50, 1001), [-1e4, -800, -100, 100, 800, 1e4],
                        [info.min, info.max, -0.0, info.tiny]]).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning may escape
        got = _math.sigmoid(x)
        out = np.empty_like(x)
        written = _math.sigmoid(x, out=out)
    with np.errstate(over="ignore"):
        exact = 1 / (1 + np.exp(-x.astype(np.longdouble)))
    assert got.dtype == x.dtype and written is out
    np.testing.assert_array_equal(out, got)
    # Within a few units of the last place of the exact value, or below the smallest normal.
    error = np.abs(got.astype(np.longdouble) - exact)
    assert np.all((error <= 4 * np.spacing(exact.astype(dtype)).astype(np.longdouble))
                  | (exact < info.tiny))


@given(rank=st.integers(0, 3), data=st.data())
def test_unsqueeze_matches_expand_dims(rank, data):
    shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    x = np.zeros(shape)
    n_axes = data.draw(st.integers(1, 3))
    axes = data.draw(st.lists(st.integers(-(rank + n_axes) - 1, rank + n_axes),
                              min_size=n_axes, max_size=n_axes))
    try:
        expected = np.expand_dims(x, tuple(axes))
    except (ValueError, IndexError) as e:
        with pytest.raises(type(e)):
            _shapes.unsqueeze(x, np.array(axes, np.int64))
        return
    got = _shapes.unsqueeze(x, np.array(axes, np.int64))
    assert got.shape == expected.shape and np.shares_memory(got, x) == (x.size > 0)
