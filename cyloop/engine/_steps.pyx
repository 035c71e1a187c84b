"""The step loops of the functional API (cyloop/functional.py): once the first step has fixed the
structure and types of the pytrees, a step is a call of the user's function and, for `scan`, the
copy of its ``y`` leaves into their preallocated rows, with no Python-level loop around them (the
plain Python loop calling the same function is the floor it must not be above).

The first step, every check and every error message stay in functional.py: this loop only steps,
notes in `Steps.at` which step is running (the caller names it when the function raises), and
hands back whatever it cannot handle alone. while_loop and fori_loop have none: calling a
Python function costs less from CPython's own loop than from C, and their steps do nothing else.
"""

cimport numpy as cnp
from cpython.exc cimport PyErr_CheckSignals
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.string cimport memcpy

cnp.import_array()

END = object()  # `scan_steps`' answer when its steps are done (a function may return None)


cdef class Steps:
    """The step a loop is running: its row of ``ys``."""

    cdef public Py_ssize_t at


cdef inline bint _put(cnp.ndarray rows, Py_ssize_t i, object leaf):
    """Copy `leaf` into row i of `rows` (C-contiguous, of a dtype holding no objects) if it is a
    C-contiguous array of the row's shape and dtype, or a numpy scalar of a one-dimensional
    `rows`' dtype; whether it did (else nothing is written)."""
    cdef cnp.dtype dtype = rows.dtype
    cdef cnp.ndarray y
    cdef int axis, nd = cnp.PyArray_NDIM(rows) - 1
    cdef char *row = cnp.PyArray_BYTES(rows) + i * cnp.PyArray_STRIDES(rows)[0]
    if type(leaf) is not cnp.ndarray:
        if nd == 0 and isinstance(leaf, cnp.generic) \
                and cnp.PyArray_EquivTypes(cnp.PyArray_DescrFromScalar(leaf), dtype):
            cnp.PyArray_ScalarAsCtype(leaf, row)
            return True
        return False
    y = <cnp.ndarray>leaf
    if cnp.PyArray_NDIM(y) != nd or not cnp.PyArray_IS_C_CONTIGUOUS(y):
        return False
    for axis in range(nd):
        if cnp.PyArray_DIMS(y)[axis] != cnp.PyArray_DIMS(rows)[axis + 1]:
            return False
    if not cnp.PyArray_EquivTypes(y.dtype, dtype):
        return False
    memcpy(row, cnp.PyArray_BYTES(y), cnp.PyArray_NBYTES(y))
    return True


def scan_steps(f, carry, pairs, list rows, store, Steps steps):
    """The steps of (i, x) in `pairs`: ``carry, y = f(carry, x)``, then y into row i of ``ys``:
    copied here when `rows` holds its leaves' arrays (one leaf: [rows]; a flat tuple of leaves:
    one per leaf; C-contiguous, of dtypes holding no objects, whose bytes are copied) and each
    is an array of its row's shape and dtype (`_put`), else by
    ``store(i, y)``. ``steps.at`` is i. Returns (carry, `END`) when `pairs` ends, or (carry, the
    result) at the first result that is not a tuple of two: the caller unpacks it (raising as
    its own unpacking does), stores its y and calls again for the rest."""
    cdef Py_ssize_t k, count = len(rows) if rows is not None else 0
    cdef cnp.ndarray only = rows[0] if count == 1 else None
    for i, x in pairs:
        steps.at = i
        result = f(carry, x)
        if type(result) is not tuple or PyTuple_GET_SIZE(result) != 2:
            return carry, result
        carry = <object>PyTuple_GET_ITEM(result, 0)
        y = <object>PyTuple_GET_ITEM(result, 1)
        if count == 1:
            if not _put(only, steps.at, y):
                store(i, y)
        elif count and type(y) is tuple and PyTuple_GET_SIZE(y) == count:
            for k in range(count):
                if not _put(<cnp.ndarray>rows[k], steps.at, <object>PyTuple_GET_ITEM(y, k)):
                    store(i, y)  # (stores every leaf again, checking each)
                    break
        else:
            store(i, y)
        PyErr_CheckSignals()
    return carry, END
