"""Squared distances (`_distances.squared_distances`, and the fused SquaredDistance kernel of
accel/fused.py that calls it): the values of the unfused nodes, the difference and the sum of
its squares over the last axis computed by numpy, to rounding (each sum in another order), for
every broadcast of the two operands, the kernel's own cases (a row against rows, rows against
rows on axes of their own) and the others it leaves to numpy; floating-point errors are
reported as numpy's passes report them."""

import numpy as np
import pytest

from cyloop.accel import fused
from cyloop.accel._distances import squared_distances

_TOLERANCE = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-14,
              np.dtype(np.float16): 1e-3}


def _unfused(a, b, keepdims):
    """Sub, then ReduceSumSquare over the last axis: numpy's passes, in the operands' type."""
    difference = np.subtract(a, b)
    return np.add.reduce(difference * difference, -1, difference.dtype, None, keepdims)


def _assert_unfused(a, b, keepdims=False):
    got = fused.squared_distance({"keepdims": int(keepdims)})(a, b)
    want = _unfused(a, b, keepdims)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=_TOLERANCE[want.dtype], atol=0)
    else:
        np.testing.assert_array_equal(got, want)
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("na, nb, features", [(1, 1, 1), (7, 3, 5), (8, 8, 16), (9, 17, 16),
                                              (33, 2, 65), (0, 4, 3), (5, 0, 3)])
def test_the_loop_against_numpy(dtype, na, nb, features, rng):
    a = rng.standard_normal((na, features)).astype(dtype)
    b = rng.standard_normal((nb, features)).astype(dtype)
    out = np.full((nb, na), np.nan, dtype)
    assert squared_distances(a, b, out) == 0
    want = _unfused(a[None], b[:, None], False)
    np.testing.assert_allclose(out, want, rtol=_TOLERANCE[np.dtype(dtype)], atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("a_shape, b_shape", [
    ((6, 4), (4,)),            # a row against rows, as a loop body meets them
    ((4,), (6, 4)),
    ((6, 4), (1, 4)),
    ((6, 4), (5, 1, 4)),       # a hoisted chunk of rows against a static matrix
    ((5, 1, 4), (6, 4)),
    ((2, 1, 3, 4), (1, 6, 1, 4)),
    ((4,), (4,)),
    ((6, 4), (6, 4)),          # pairs, not a table: numpy's passes
    ((2, 6, 4), (6, 4)),
    ((6, 1), (1, 4)),          # features broadcast: numpy's passes
    ((6, 0), (0,)),            # no features
])
@pytest.mark.parametrize("keepdims", [False, True], ids=["dropped", "kept"])
def test_the_kernel_broadcasts_as_the_nodes(dtype, a_shape, b_shape, keepdims, rng):
    a = rng.standard_normal(a_shape).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    _assert_unfused(a, b, keepdims)


def test_strided_operands_and_other_types(rng):
    """Operands that are not contiguous (a column block, a reversed row), and types the loop
    does not take (float16, int32, mixed): the nodes' values."""
    a = rng.standard_normal((9, 12))
    _assert_unfused(a[:, 3:7], a[2, 8:])
    _assert_unfused(a[::2, :5], a[0, 5::-1][:5])
    _assert_unfused(a.astype(np.float16), a[0].astype(np.float16))
    _assert_unfused((a * 100).astype(np.int32), (a[1] * 100).astype(np.int32))
    _assert_unfused(a.astype(np.float32), a[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_floating_point_errors_are_reported_as_numpy_reports_them(dtype, rng):
    """A square that overflows: inf as numpy computes it, quietly where numpy's setting
    ignores it, a FloatingPointError where it is set to raise, a warning where to warn."""
    a = rng.standard_normal((5, 3)).astype(dtype)
    b = a[2].copy()
    a[4, 1] = np.finfo(dtype).max / 2
    kernel = fused.squared_distance({"keepdims": 0})
    with np.errstate(over="ignore"):
        got = _assert_unfused(a, b)
    assert np.isinf(got[4]) and np.isfinite(got[:4]).all()
    with np.errstate(over="raise"), pytest.raises(FloatingPointError, match="overflow"):
        kernel(a, b)
    with np.errstate(over="warn"), pytest.warns(RuntimeWarning, match="overflow"):
        kernel(a, b)
    with np.errstate(over="raise"):  # (no flag: nothing raised)
        _assert_unfused(a[:4], a[0])
