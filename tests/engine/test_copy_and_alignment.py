"""The C helpers behind the planner: strided copy and 64-byte-aligned allocation."""

import subprocess
import sys

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


# Blocks kept for the next run (include/cyloop/aligned_alloc.h): what a run's caller lets go of
# is handed out again, and never while anything still uses it.

@pytest.fixture
def nothing_kept():
    _core.release_memory()
    yield
    _core.release_memory()


def _address(arr):
    return arr.__array_interface__["data"][0]


def test_a_large_block_let_go_of_between_runs_is_handed_out_again(nothing_kept):
    nbytes = _core.KEEP_FROM
    first = _core.aligned_empty((nbytes // 4,), np.float32)
    address = _address(first)
    del first
    assert _core.kept_bytes() == nbytes
    larger = _core.aligned_empty((2 * nbytes,), np.int8)  # no block of another size
    assert _address(larger) != address and _core.kept_bytes() == nbytes
    again = _core.aligned_empty((nbytes // 8,), np.float64)  # the same bytes, another shape
    assert _address(again) == address and _core.kept_bytes() == 0
    assert again.ctypes.data % 64 == 0


def test_a_block_in_use_is_never_handed_out(nothing_kept):
    arr = _core.aligned_empty((_core.KEEP_FROM,), np.int8)
    view = arr[10:]  # the block lives while any view of it does
    del arr
    assert _core.kept_bytes() == 0
    view[...] = 7
    other = _core.aligned_empty((_core.KEEP_FROM,), np.int8)
    other[...] = 1
    assert np.all(view == 7) and not np.shares_memory(view, other)


def test_small_blocks_and_blocks_let_go_of_during_a_run_are_freed(nothing_kept):
    small = _core.aligned_empty((_core.KEEP_FROM - 1,), np.int8)
    del small
    assert _core.kept_bytes() == 0
    with _core.running(None):  # an output outgrown, a ping-pong pool: the run's peak stays
        during = _core.aligned_empty((_core.KEEP_FROM,), np.int8)
        del during
    assert _core.kept_bytes() == 0


def test_the_oldest_kept_blocks_make_room_for_newer_ones(nothing_kept):
    sizes = [_core.KEEP_FROM + 64 * k for k in range(_core.KEPT_BLOCKS + 3)]
    for nbytes in sizes:
        block = _core.aligned_empty((nbytes,), np.int8)
        del block
    assert _core.kept_bytes() == sum(sizes[-_core.KEPT_BLOCKS:])
    whole = _core.aligned_empty((_core.KEPT_BYTES,), np.int8)  # as much as may be kept
    del whole
    assert _core.kept_bytes() == _core.KEPT_BYTES
    too_large = _core.aligned_empty((_core.KEPT_BYTES + 64,), np.int8)
    del too_large
    assert _core.kept_bytes() == _core.KEPT_BYTES
    _core.release_memory()
    assert _core.kept_bytes() == 0


def test_kept_blocks_are_freed_when_a_new_block_cannot_be_had_otherwise(nothing_kept):
    """Under an address-space limit that the kept blocks and a new one cannot both fit in, the
    kept ones make room (in a child process: the limit is the child's alone)."""
    script = """
import resource
import numpy as np
from cyloop.engine import _core
kept = [_core.aligned_empty((_core.KEPT_BYTES // 2 - 64 * k,), np.int8) for k in range(2)]
for block in kept:
    block[::4096] = 1  # (mapped and touched: part of the address space)
del kept, block
assert _core.kept_bytes() > _core.KEPT_BYTES // 2
with open("/proc/self/statm") as statm:
    size = int(statm.read().split()[0]) * resource.getpagesize()
limit = size + _core.KEPT_BYTES // 4
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
big = _core.aligned_empty((_core.KEPT_BYTES // 2 + 4096,), np.int8)
assert _core.kept_bytes() == 0
print("ok")
"""
    if not sys.platform.startswith("linux"):
        pytest.skip("RLIMIT_AS and /proc/self/statm: Linux")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
