"""Aligned arrays (accel/aligned.py): every one starts on a 64-byte boundary, and a large one is a
mapping of its own that goes back to the system with its last view (a prepared weight that lost
its trial does not stay resident)."""

import gc
import mmap
import sys

import numpy as np
import pytest

from cyloop.accel.aligned import ALIGNMENT, MAPPED_BYTES, aligned, aligned_empty, owns_memory

from ..support.arrays import address, at_offset


def in_mapping(a) -> bool:
    """Whether an array's memory is an `mmap` of its own (through any views)."""
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a.obj if isinstance(a, memoryview) else a, mmap.mmap)


def _mapped(where: int) -> bool:
    """Whether an address lies in one of this process's mappings (Linux: /proc/self/maps)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            low, high = (int(end, 16) for end in line.split()[0].split("-"))
            if low <= where < high:
                return True
    return False


@pytest.mark.parametrize("nbytes", [0, 4, 1000, MAPPED_BYTES - 8, MAPPED_BYTES,
                                    3 * MAPPED_BYTES + 8])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
def test_aligned_empty_starts_on_a_boundary_and_is_mapped_from_mapped_bytes_up(nbytes, dtype):
    dtype = np.dtype(dtype)
    count = nbytes // dtype.itemsize
    got = aligned_empty((count // 2, 2) if count % 2 == 0 and count else (count,), dtype)
    assert got.size == count and got.dtype == dtype
    assert got.flags.c_contiguous and got.flags.writeable
    assert address(got) % ALIGNMENT == 0 or count == 0  # (an empty array has no memory)
    assert in_mapping(got) == (got.nbytes >= MAPPED_BYTES)
    got[...] = 7  # all of it is memory of its own
    assert (got == 7).all()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_a_mapped_array_goes_back_to_the_system_with_its_last_view():
    big = aligned_empty((4 * MAPPED_BYTES // 4,), np.float32)
    big[...] = 1
    where = address(big)
    view = big[10:20]
    del big
    gc.collect()
    assert _mapped(where) and (view == 1).all()  # a view keeps the mapping
    del view
    gc.collect()
    assert not _mapped(where)


@pytest.mark.parametrize("offset", [0, 4, 16, 32, 48])
@pytest.mark.parametrize("read_only", [False, True])
def test_aligned_copies_only_an_array_off_a_64_byte_boundary(offset, read_only, rng):
    values = rng.standard_normal((3, 5)).astype(np.float32)
    x = at_offset(values, offset)
    x.flags.writeable = not read_only
    got = aligned(x)
    assert (got is x) == (offset == 0)
    assert address(got) % ALIGNMENT == 0 and got.flags.c_contiguous
    assert got.flags.writeable == (not read_only) and got.dtype == x.dtype
    np.testing.assert_array_equal(got, values)
    strided = aligned(at_offset(values, 0)[:, ::2])  # aligned but not contiguous: copied
    assert strided.flags.c_contiguous and address(strided) % ALIGNMENT == 0
    np.testing.assert_array_equal(strided, values[:, ::2])
    assert aligned(x, smallest=x.nbytes + 1) is x  # a small weight is left where it is
    pair = aligned((x, None))
    assert pair[1] is None and address(pair[0]) % ALIGNMENT == 0
    objects = np.array([1, "a"], object)
    assert aligned(objects) is objects and aligned(3.0) == 3.0


def test_aligned_lays_out_a_large_view_in_one_mapping_of_its_own(rng):
    """A transposed weight (what a product's formulation prepares) is copied once, into a
    mapping, read-only as the weight is."""
    w = rng.standard_normal((64, 2 * MAPPED_BYTES // 256)).astype(np.float32)
    w.flags.writeable = False
    got = aligned(w.T)
    assert in_mapping(got) and got.flags.c_contiguous
    assert not got.flags.writeable and address(got) % ALIGNMENT == 0
    np.testing.assert_array_equal(got, w.T)


def test_owns_memory_is_true_of_what_aligned_empty_made_and_not_of_views():
    small, mapped = aligned_empty((3, 5), np.float32), aligned_empty((MAPPED_BYTES,), np.int8)
    assert owns_memory(small) and owns_memory(mapped) and owns_memory(np.zeros(3))
    assert not any(owns_memory(v) for v in (small[1:], small.T, mapped[:10], small.view(),
                                            np.frombuffer(bytearray(8), np.uint8), 3.0))


@pytest.mark.parametrize("nbytes", [40, 4000, 2 * MAPPED_BYTES], ids=["small", "aligned", "mapped"])
def test_own_copies_a_view_even_on_a_boundary(nbytes, rng):
    """`own=True` (how the ONNX frontend takes onnx's arrays, often views of a tensor's bytes):
    what comes back holds its own memory, whether or not the view was aligned."""
    values = rng.standard_normal(nbytes // 4).astype(np.float32)
    block = at_offset(np.concatenate([values, values]), 0)
    view = block[:values.size]  # on a boundary, but another array's memory
    view.flags.writeable = False
    got = aligned(view, smallest=1024, own=True)
    assert got is not view and owns_memory(got) and not np.shares_memory(got, block)
    assert not got.flags.writeable and got.flags.c_contiguous
    assert address(got) % ALIGNMENT == 0 or nbytes < 1024
    np.testing.assert_array_equal(got, values)
    mine = aligned_empty(values.shape, np.float32)
    assert aligned(mine, own=True) is mine  # already its own, and aligned
