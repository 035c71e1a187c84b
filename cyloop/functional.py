"""`scan`, `while_loop` and `fori_loop` over Python callables, shaped like ``jax.lax``.

They call the function once per step, so their floor is the plain Python loop that calls it; after
the first step has fixed the structure and types of the pytrees, a step is that call plus, for
`scan`, storing each ``y`` leaf into its preallocated row of ``ys`` (row i of ``ys`` goes with
``xs[i]``, ``reverse=True`` included). Nothing is flattened, validated or dispatched per step
beyond the type check a ``y`` leaf needs to be stored. The steps after the first of `scan` run in
Cython (engine/_steps.pyx: the copy of a ``y`` into its row is there); `while_loop`'s and
`fori_loop`'s stay Python loops, which call a Python function more cheaply than C can
(docs/performance.md has the functional loops against the plain Python loop).

The carry the function receives is the loop's own: the initial one is a copy of `init`, writable,
and later ones are what the function returned, so it may update its carry in place
(``buf[k] = y; return buf, ...``). ``xs`` rows are read-only views, and no ``ys`` row is ever a
carry (rows are written by copy), so nothing the caller passed is written. A Python int or bool
in `init` (immutable) is handed on as it is, as the plain loop would hand it, and its type is
numpy's for it (``np.asarray``); other scalars become 0-d arrays.

Pytrees are nested tuples, lists and dicts (dict keys sorted) of arrays; scalars become arrays in
the results. A carry must keep its structure, shapes and dtypes: a change raises `LoopCarryError`
naming the component's path and both types, after the first step or, for a later step, when the
loop ends (the check is not repeated per step). A ``y`` that changes is reported at its step.

Bad arguments are `InputError`s. An exception the user's function raises passes through
unchanged, with a note naming the loop and the step. Like a model's loops, each loop is bounded by
``max_iterations`` (default 10^8, None for no limit): a scan or fori_loop longer than that is
refused before its first step, a while_loop raises `LoopLimitError` when it reaches it.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from itertools import repeat
from typing import Any

import numpy as np

from .engine import _steps
from .engine.settings import DEFAULT_MAX_ITERATIONS
from .errors import CyloopError, InputError, LoopCarryError, LoopLimitError

__all__ = ["fori_loop", "scan", "while_loop"]

# The body calls of a while_loop without max_iterations: a bound no loop reaches.
_NO_LIMIT = sys.maxsize


# -- pytrees ----------------------------------------------------------------------------------

def _flatten(tree) -> tuple[list, Any]:
    """(leaves, structure). Structure: None for a leaf, else (type, keys, child structures)."""
    if isinstance(tree, dict):
        keys = sorted(tree)
        leaves, children = [], []
        for key in keys:
            sub, structure = _flatten(tree[key])
            leaves += sub
            children.append(structure)
        return leaves, (dict, keys, children)
    if isinstance(tree, (tuple, list)):
        leaves, children = [], []
        for item in tree:
            sub, structure = _flatten(item)
            leaves += sub
            children.append(structure)
        return leaves, (type(tree), len(tree), children)
    return [tree], None


def _unflatten(structure, leaves):
    if structure is None:  # one leaf
        return leaves[0]
    if not any(structure[2]):  # a flat tuple, list or dict of leaves
        kind, keys, _ = structure
        return dict(zip(keys, leaves)) if kind is dict else kind(leaves)
    iterator = iter(leaves)

    def build(node):
        if node is None:
            return next(iterator)
        kind, keys, children = node
        if kind is dict:
            return {key: build(child) for key, child in zip(keys, children)}
        return kind(build(child) for child in children)

    return build(structure)


def _paths(structure, prefix="") -> list[str]:
    if structure is None:
        return [prefix or "value"]
    kind, keys, children = structure
    names = [f"[{k!r}]" for k in keys] if kind is dict else [f"[{k}]" for k in range(keys)]
    out = []
    for name, child in zip(names, children):
        out += _paths(child, prefix + name)
    return out


def _describe(structure) -> str:
    if structure is None:
        return "leaf"
    kind, keys, children = structure
    inner = ", ".join(_describe(c) for c in children)
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {_describe(c)}" for k, c in zip(keys, children)) + "}"
    return f"{kind.__name__}({inner})"


def _type_of(value) -> str:
    return f"{value.dtype}{list(value.shape)}"


def _as_arrays(leaves):
    return [np.asarray(leaf) for leaf in leaves]


def _read_only(leaves):
    """Views the callable cannot write through (the caller's arrays stay untouched)."""
    views = []
    for leaf in leaves:
        view = np.asarray(leaf).view()
        view.flags.writeable = False
        views.append(view)
    return views


class _Checked:
    """Flattens a pytree and checks it against a reference structure and types (once per loop,
    not per step)."""

    def __init__(self, what: str, structure, leaves):
        self.what = what
        self.structure = structure
        self.types = [(leaf.shape, leaf.dtype) for leaf in _as_arrays(leaves)]

    def __call__(self, tree, when: str = "now") -> list:
        leaves, structure = _flatten(tree)
        if structure != self.structure:
            raise LoopCarryError(f"{self.what} changed structure: {_describe(self.structure)} "
                                 f"at the start, {_describe(structure)} {when}")
        leaves = _as_arrays(leaves)
        for k, (leaf, (shape, dtype)) in enumerate(zip(leaves, self.types)):
            if leaf.shape != shape or leaf.dtype != dtype:
                raise _changed(_paths(self.structure, self.what)[k], shape, dtype, leaf, when)
        return leaves


def _changed(path, shape, dtype, leaf, when="now") -> LoopCarryError:
    return LoopCarryError(
        f"{path} changed type: {dtype}{list(shape)} at the start, {_type_of(leaf)} {when}; a "
        f"loop carry must keep its shape and dtype (cast it, e.g. np.asarray(..., dtype={dtype}))")


# Leaves of these types are immutable values a loop hands on as they are: the function computes
# with them as the plain loop would (a Python int counter stays a Python int, whose arithmetic
# and indexing cost a fraction of a numpy scalar's). A Python float is not among them: it would
# take the type of the first numpy float it meets (0.0 + a float32 is a float32, NEP 50), where
# the carry keeps the float64 its 0-d array has.
_SCALARS = (int, bool)


def _own(leaves) -> list:
    """The loop's own copies of the caller's leaves (writable; the caller's stay untouched), and
    Python scalars as they are (`_SCALARS`)."""
    return [leaf if type(leaf) in _SCALARS else np.array(leaf) for leaf in leaves]


# -- steps ------------------------------------------------------------------------------------

def _x_trees(structure, leaves, reverse: bool):
    """The ``x`` of each step, in step order: rows of the (read-only) xs leaves, as `structure`."""
    views = [leaf[::-1] if reverse else leaf for leaf in leaves]
    if structure is None:
        return iter(views[0])
    kind, keys, children = structure
    if all(child is None for child in children):  # a flat tuple, list or dict of leaves
        if kind is tuple:
            return zip(*views)
        if kind is dict:
            return (dict(zip(keys, row)) for row in zip(*views))
        return (kind(row) for row in zip(*views))
    return (_unflatten(structure, row) for row in zip(*views))


class _Rows:
    """The preallocated ``ys``: one array of `steps` rows per ``y`` leaf of the first step, and
    `store(i, y)`, which writes a step's ``y`` into row i after the checks storing needs (the
    structure, and each leaf's shape and dtype)."""

    def __init__(self, first_y, steps: int):
        leaves, self.structure = _flatten(first_y)
        leaves = _as_arrays(leaves)
        self.types = [(leaf.shape, leaf.dtype) for leaf in leaves]
        self.rows = [np.empty((steps, *leaf.shape), leaf.dtype) for leaf in leaves]
        self.check = _Checked("y", self.structure, leaves)
        # The rows the step loop copies leaves into itself (`_steps.scan_steps`): those of one
        # leaf or of a flat tuple of leaves, unless a dtype holds objects (copied by reference).
        self.copied = None
        if self.structure is None:
            self.store = self._leaf_storer()
            self.copied = self.rows
        elif self.structure[0] is tuple and all(c is None for c in self.structure[2]):
            self.store = self._store_tuple
            self.copied = self.rows
        else:
            self.store = self._store_tree
        if self.copied is not None and any(rows.dtype.hasobject for rows in self.rows):
            self.copied = None

    def _put(self, k: int, i: int, leaf) -> None:
        shape, dtype = self.types[k]
        try:  # dtypes of the built-in types are shared objects: `is` spares most comparisons
            if leaf.shape == shape and (leaf.dtype is dtype or leaf.dtype == dtype):
                self.rows[k][i] = leaf
                return
        except AttributeError:  # a Python scalar: checked below as an array
            pass
        array = np.asarray(leaf)
        if array.shape != shape or array.dtype != dtype:
            raise _changed(_paths(self.structure, "y")[k], shape, dtype, array, f"at step {i}")
        self.rows[k][i] = array

    def _leaf_storer(self):
        """`store` for a ``y`` that is one leaf: `_put` inlined, as it runs once a step."""
        (rows,), ((shape, dtype),) = self.rows, self.types
        put = self._put

        def store(i, y):
            try:
                if y.shape == shape and (y.dtype is dtype or y.dtype == dtype):
                    rows[i] = y
                    return
            except AttributeError:
                pass
            put(0, i, y)

        return store

    def _store_tuple(self, i: int, y) -> None:
        if type(y) is not tuple or len(y) != len(self.rows):
            self.check(y, f"at step {i}")  # raises, naming the structures
        for k, leaf in enumerate(y):
            self._put(k, i, leaf)

    def _store_tree(self, i: int, y) -> None:
        for k, leaf in enumerate(self.check(y, f"at step {i}")):
            self.rows[k][i] = leaf

    def result(self):
        return _unflatten(self.structure, self.rows)


def _finished(check: _Checked, structure, tree):
    """The final carry, checked once and with scalars as arrays."""
    return _unflatten(structure, check(tree, "at the end of the loop"))


def _shown(value) -> str:
    """A short description of an argument for an error message (an array is not printed)."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {list(value.shape)} {value.dtype}"
    return f"{type(value).__name__} {value!r}"


def _integer(value, what: str) -> int:
    """A count or bound: a Python or numpy integer, or a 0-d integer array (not a bool)."""
    if not isinstance(value, (bool, np.bool_)):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise InputError(f"{what} must be an integer, got {_shown(value)}")


def _limit(max_iterations, loop: str) -> int:
    """`max_iterations` checked as Model's is (a 0-d integer array accepted too); -1 for None
    (no limit)."""
    if max_iterations is None:
        return -1
    what = f"{loop}: max_iterations"
    limit = _integer(max_iterations, what)
    if limit < 0:  # (count_limit's rule, without its abstract-class check: a loop's fixed cost)
        raise InputError(f"{what} must be None or >= 0, not {limit}")
    return limit


def _steps_allowed(steps: int, max_iterations: int | None, loop: str) -> None:
    """Refuse, before the first step, a loop of known length past `max_iterations`."""
    limit = _limit(max_iterations, loop)
    if 0 <= limit < steps:
        raise LoopLimitError(f"{loop}: {steps} steps would pass max_iterations={limit}; raise "
                             "max_iterations (None: no limit)")


def _noted(error: BaseException, loop: str, step) -> None:
    """Add to the user's own exception where it was raised (it then passes through unchanged)."""
    if not isinstance(error, CyloopError):
        error.add_note(f"(raised at step {step} of cyloop.{loop})")


_UNPACKING = ("cannot unpack", "not enough values to unpack", "too many values to unpack")


def _unpacking(error: BaseException) -> bool:
    """Whether `error` is unpacking f's result into (carry, y) in the frame that caught it."""
    return error.__traceback__.tb_next is None and str(error).startswith(_UNPACKING)


def _pair(error: BaseException, step) -> LoopCarryError:
    """f's result did not unpack into (carry, y)."""
    return LoopCarryError(f"scan: f must return a (carry, y) pair; at step {step}: {error}")


# -- the loops ----------------------------------------------------------------------------------

def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         max_iterations: int | None = DEFAULT_MAX_ITERATIONS):
    """Scan `f` over the leading axis of `xs`, carrying state; returns ``(carry, ys)``.

    Semantics, as a plain-Python loop::

        carry, ys = init, []
        for x in (reversed(xs) if reverse else xs):      # x: each xs leaf indexed at i
            carry, y = f(carry, x)
            ys.append(y)
        return carry, stack(ys[::-1] if reverse else ys)  # ys[i] goes with xs[i]

    `xs` may be None (then `length` gives the number of steps and `f` gets ``x=None``). With zero
    steps, `f` is called once on the initial carry and a zero-filled x to learn the shapes of
    `ys` (its result is discarded). More than `max_iterations` steps are refused.
    """
    if not callable(f):
        raise InputError(f"scan: f must be callable, got {_shown(f)}")
    carry_leaves, carry_structure = _flatten(init)
    carry_leaves = _own(carry_leaves)
    carry_check = _Checked("carry", carry_structure, carry_leaves)
    xs_leaves, xs_structure = ([], None) if xs is None else _flatten(xs)
    xs_leaves = _read_only(xs_leaves)
    lengths = {leaf.shape[0] for leaf in xs_leaves if leaf.ndim}
    if any(leaf.ndim == 0 or leaf.dtype.kind not in "biufcmM" for leaf in xs_leaves):
        raise InputError("scan: every xs leaf must be a numeric array with a leading axis to "
                         "scan over")
    if length is not None:
        length = _integer(length, "scan: length")
        if length < 0:
            raise InputError(f"scan: length must be >= 0, got {length}")
        lengths.add(length)
    if len(lengths) != 1:
        raise InputError(f"scan: the leading axes of xs and `length` disagree: {sorted(lengths)}"
                         if lengths else "scan: give xs or length")
    (steps,) = lengths
    _steps_allowed(steps, max_iterations, "scan")
    carry = _unflatten(carry_structure, carry_leaves)

    if steps == 0:  # no step to learn ys' shapes from: probe f on zeros
        probe_x = [np.zeros(leaf.shape[1:], leaf.dtype) for leaf in xs_leaves]
        try:
            carry_out, y = f(carry, None if xs is None else _unflatten(xs_structure, probe_x))
        except (TypeError, ValueError) as error:
            if _unpacking(error):
                raise _pair(error, "0 (probing ys' shapes)") from None
            raise
        carry_check(carry_out)
        y_leaves, y_structure = _flatten(y)
        empty = [np.empty((0, *leaf.shape), leaf.dtype) for leaf in _as_arrays(y_leaves)]
        carry = [np.array(leaf) for leaf in carry_leaves]  # (arrays, apart from the caller's)
        return _unflatten(carry_structure, carry), _unflatten(y_structure, empty)

    x_trees = repeat(None, steps) if xs is None else _x_trees(xs_structure, xs_leaves, reverse)
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    at = _steps.Steps()
    at.at = order[0]
    try:
        # The first step fixes the structure and types of the carry (checked here) and of ys.
        carry, y = f(carry, next(x_trees))
        carry_check(carry, "after the first step")
        ys = _Rows(y, steps)
        ys.store(at.at, y)
        pairs = zip(order[1:], x_trees)
        while True:
            carry, result = _steps.scan_steps(f, carry, pairs, ys.copied, ys.store, at)
            if result is _steps.END:
                break
            carry, y = result  # (not a tuple of two: unpacked here, as a loop would)
            ys.store(at.at, y)
    except Exception as error:
        if _unpacking(error):
            raise _pair(error, at.at) from None
        _noted(error, "scan", at.at)
        raise
    return _finished(carry_check, carry_structure, carry), ys.result()


def while_loop(cond_fun: Callable, body_fun: Callable, init_val,
               max_iterations: int | None = DEFAULT_MAX_ITERATIONS):
    """``while cond_fun(val): val = body_fun(val)``; returns the final `val`.

    `cond_fun` must return one boolean (a Python or numpy bool, or a one-element bool array).
    Reaching `max_iterations` steps with the condition still true raises `LoopLimitError`
    (None: no limit; Ctrl-C stops the loop).
    """
    for name, fn in (("cond_fun", cond_fun), ("body_fun", body_fun)):
        if not callable(fn):
            raise InputError(f"while_loop: {name} must be callable, got {_shown(fn)}")
    limit = _limit(max_iterations, "while_loop")
    leaves, structure = _flatten(init_val)
    leaves = _own(leaves)
    check = _Checked("val", structure, leaves)
    val = _unflatten(structure, leaves)
    made = 0  # body_fun calls made: the step a call of either belongs to
    steps = None  # the loop's steps not yet taken, while it runs (they say `made`)
    try:
        go = cond_fun(val)
        if _truth(go):
            if limit == 0:
                raise _reached(limit)
            val = body_fun(val)
            made = 1
            check(val, "after the first step")
            # (A Python loop, as fori_loop's: CPython calls a Python function from its own loop
            # more cheaply than from C. Its steps are counted by `repeat`, which makes no int
            # a step as a range past 256 does, so it costs less than a range would. A condition
            # whose truth raises, an array
            # of several values, ends it; `_truth` then refuses it.)
            stop = limit if limit >= 0 else _NO_LIMIT
            steps = repeat(None, stop - 1)
            for _ in steps:
                go = cond_fun(val)
                try:
                    if not go:
                        break
                except ValueError:
                    break
                val = body_fun(val)
            else:  # `limit` calls made (no limit: a bound no loop reaches)
                steps, made = None, stop
                go = cond_fun(val)
                if _truth(go):  # one more true condition is one too many
                    raise _reached(limit)
            _truth(go)  # (the falsy result that ended it must be a boolean: checked once, here)
    except Exception as error:
        if steps is not None:  # (raised in the loop: at the step it was taking)
            made = stop - 1 - operator.length_hint(steps)
        _noted(error, "while_loop", made)
        raise
    return _finished(check, structure, val)


def _reached(limit: int) -> LoopLimitError:
    return LoopLimitError(f"while_loop: reached max_iterations={limit} with cond_fun still "
                          "true; raise max_iterations (None: no limit), or check the condition")


def _truth(value) -> bool:
    """`cond_fun`'s result: one boolean (a Python or numpy bool, or a one-element bool array)."""
    array = np.asarray(value)
    if array.size != 1 or array.dtype != np.bool_:
        shown = f"shape {array.shape}" if array.size != 1 else _shown(value)
        raise InputError(f"while_loop: cond_fun must return one boolean, got {shown}")
    return bool(array.reshape(-1)[0])


def fori_loop(lower: int, upper: int, body_fun: Callable, init_val,
              max_iterations: int | None = DEFAULT_MAX_ITERATIONS):
    """``for i in range(lower, upper): val = body_fun(i, val)``; returns the final `val`. The
    bounds are integers (Python or numpy); more than `max_iterations` steps are refused."""
    if not callable(body_fun):
        raise InputError(f"fori_loop: body_fun must be callable, got {_shown(body_fun)}")
    lower, upper = _integer(lower, "fori_loop: lower"), _integer(upper, "fori_loop: upper")
    _steps_allowed(max(upper - lower, 0), max_iterations, "fori_loop")
    leaves, structure = _flatten(init_val)
    leaves = _own(leaves)
    check = _Checked("val", structure, leaves)
    val = _unflatten(structure, leaves)
    i = lower
    try:
        if lower < upper:
            val = body_fun(lower, val)
            check(val, "after the first step")
            # (A Python loop: CPython calls a Python function from its own loop more cheaply
            # than from C, and a fori_loop's step has nothing else to do.)
            for i in range(lower + 1, upper):
                val = body_fun(i, val)
    except Exception as error:
        _noted(error, "fori_loop", i - lower)
        raise
    return _finished(check, structure, val)
