"""The indices of the k smallest keys of each row, smallest first, equal keys in index order: a
stable sort's first k, in one pass over the row.

A k-NN model's TopK takes the 5 nearest of thousands of distances for each query. np.partition
then np.argsort of the k found make several passes over every row and select with
introselect, whose swaps dominate for small k. Here each row is read once against a max-heap of
the k best so far, ordered by (key, index): a key enters only where it is below the heap's top
(an equal key comes later, so it sorts after every key already there), one comparison for
most keys; the heap is sorted at the row's end. Keys must hold no NaN (the caller sorts such
rows whole). A table whose lanes are its columns (the transpose of a table of rows, as a
model's Transpose then an elementwise op leave it) is read row by row, a heap per column.
"""

cimport numpy as cnp
from numpy cimport npy_intp
from cython cimport floating
from libc.stdint cimport int64_t

cnp.import_array()


cdef inline bint _after(floating key_a, int64_t at_a, floating key_b,
                        int64_t at_b) noexcept nogil:
    """Whether (key_a, at_a) sorts after (key_b, at_b)."""
    return key_a > key_b or (key_a == key_b and at_a > at_b)


cdef void _sift_down(floating *keys, int64_t *at, npy_intp size,
                     npy_intp i) noexcept nogil:
    """Restore the max-heap of `size` entries below entry `i`."""
    cdef npy_intp child, largest
    cdef floating key
    cdef int64_t index
    while True:
        largest = i
        child = 2 * i + 1
        if child < size and _after(keys[child], at[child], keys[largest], at[largest]):
            largest = child
        child += 1
        if child < size and _after(keys[child], at[child], keys[largest], at[largest]):
            largest = child
        if largest == i:
            return
        key, index = keys[i], at[i]
        keys[i], at[i] = keys[largest], at[largest]
        keys[largest], at[largest] = key, index
        i = largest


cdef inline void _heapify(floating *keys, int64_t *at, npy_intp k) noexcept nogil:
    cdef npy_intp i
    for i in range(k // 2 - 1, -1, -1):
        _sift_down(keys, at, k, i)


cdef inline void _drain(floating *keys, int64_t *at, npy_intp k, int64_t *out) noexcept nogil:
    """The heap's indices into `out`, smallest first (the heap is used up)."""
    cdef npy_intp size = k
    while size > 0:  # (the top is the largest left: it goes last)
        size -= 1
        out[size] = at[0]
        keys[0], at[0] = keys[size], at[size]
        _sift_down(keys, at, size, 0)


cdef void _row(const floating *row, npy_intp n, npy_intp k, floating *keys,
               int64_t *at, int64_t *out) noexcept nogil:
    """The k smallest of `row` (n keys) into `out`, by way of the heap `keys`, `at`."""
    cdef npy_intp i
    for i in range(k):
        keys[i], at[i] = row[i], i
    _heapify(keys, at, k)
    for i in range(k, n):
        if row[i] < keys[0]:
            keys[0], at[0] = row[i], i
            _sift_down(keys, at, k, 0)
    _drain(keys, at, k, out)


cdef void _columns(const floating *table, npy_intp n, npy_intp lanes, npy_intp k,
                   floating *keys, int64_t *at, int64_t *out) noexcept nogil:
    """The k smallest of each column of `table` ([n, lanes]) into `out` ([lanes, k]), read row
    by row, each column with its heap (``keys[c * k:]``, ``at[c * k:]``)."""
    cdef npy_intp c, i
    cdef const floating *row
    for i in range(k):
        row = table + i * lanes
        for c in range(lanes):
            keys[c * k + i], at[c * k + i] = row[c], i
    for c in range(lanes):
        _heapify(keys + c * k, at + c * k, k)
    for i in range(k, n):
        row = table + i * lanes
        for c in range(lanes):
            if row[c] < keys[c * k]:
                keys[c * k], at[c * k] = row[c], i
                _sift_down(keys + c * k, at + c * k, k, 0)
    for c in range(lanes):
        _drain(keys + c * k, at + c * k, k, out + c * k)


def smallest_rows(cnp.ndarray keys, npy_intp k, cnp.ndarray out):
    """Into `out` (C-contiguous int64 [rows, k]): the indices of the k smallest of each row of
    `keys` (C-contiguous float32 or float64 [rows, n], no NaN, 1 <= k <= n), smallest first,
    equal keys in index order."""
    cdef npy_intp rows = cnp.PyArray_DIM(keys, 0), n = cnp.PyArray_DIM(keys, 1), r
    cdef cnp.ndarray heap = cnp.PyArray_EMPTY(1, [k], cnp.PyArray_TYPE(keys), 0)
    cdef cnp.ndarray at = cnp.PyArray_EMPTY(1, [k], cnp.NPY_INT64, 0)
    cdef int64_t *at_data = <int64_t *>cnp.PyArray_DATA(at)
    cdef int64_t *out_data = <int64_t *>cnp.PyArray_DATA(out)
    if cnp.PyArray_TYPE(keys) == cnp.NPY_FLOAT32:
        with nogil:
            for r in range(rows):
                _row(<const float *>cnp.PyArray_DATA(keys) + r * n, n, k,
                     <float *>cnp.PyArray_DATA(heap), at_data, out_data + r * k)
    else:
        with nogil:
            for r in range(rows):
                _row(<const double *>cnp.PyArray_DATA(keys) + r * n, n, k,
                     <double *>cnp.PyArray_DATA(heap), at_data, out_data + r * k)


def smallest_columns(cnp.ndarray keys, npy_intp k, cnp.ndarray out):
    """`smallest_rows` of keys' columns: `keys` C-contiguous [n, lanes], `out` [lanes, k] (a
    table whose lanes are its columns, as a transposed one's rows are, is read in its own
    order, never copied)."""
    cdef npy_intp n = cnp.PyArray_DIM(keys, 0), lanes = cnp.PyArray_DIM(keys, 1)
    cdef cnp.ndarray heaps = cnp.PyArray_EMPTY(1, [lanes * k], cnp.PyArray_TYPE(keys), 0)
    cdef cnp.ndarray at = cnp.PyArray_EMPTY(1, [lanes * k], cnp.NPY_INT64, 0)
    cdef int64_t *at_data = <int64_t *>cnp.PyArray_DATA(at)
    cdef int64_t *out_data = <int64_t *>cnp.PyArray_DATA(out)
    if cnp.PyArray_TYPE(keys) == cnp.NPY_FLOAT32:
        with nogil:
            _columns(<const float *>cnp.PyArray_DATA(keys), n, lanes, k,
                     <float *>cnp.PyArray_DATA(heaps), at_data, out_data)
    else:
        with nogil:
            _columns(<const double *>cnp.PyArray_DATA(keys), n, lanes, k,
                     <double *>cnp.PyArray_DATA(heaps), at_data, out_data)
