"""`scan`, `while_loop` and `fori_loop` over Python callables, shaped like ``jax.lax``.

Each call builds a one-node loop body around the callable and runs it on the same driver as a
model: ``xs`` are sliced as views, ``ys`` are preallocated after the first step and written in
place (slot n-1-i for ``reverse=True``), and carries are handed over by reference.

Pytrees are nested tuples, lists and dicts (dict keys sorted) of arrays; scalars become arrays.
A carry must keep its structure, shapes and dtypes from one step to the next; a change raises
`LoopCarryError` naming the component's path and both types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import LoopCarryError
from .ir import (
    CarriedInput,
    ConcatOutput,
    GraphBuilder,
    LastOutput,
    SlicedInput,
)
from .model import Model
from .ops.registry import kernel

__all__ = ["fori_loop", "scan", "while_loop"]

_DOMAIN = "cyloop.python"


# -- pytrees ----------------------------------------------------------------------------------

def _flatten(tree, path="") -> tuple[list, Any]:
    """(leaves, structure). Structure: None for a leaf, else (type, keys, child structures)."""
    if isinstance(tree, dict):
        keys = sorted(tree)
        leaves, children = [], []
        for key in keys:
            sub, structure = _flatten(tree[key], f"{path}[{key!r}]")
            leaves += sub
            children.append(structure)
        return leaves, (dict, keys, children)
    if isinstance(tree, (tuple, list)):
        leaves, children = [], []
        for k, item in enumerate(tree):
            sub, structure = _flatten(item, f"{path}[{k}]")
            leaves += sub
            children.append(structure)
        return leaves, (type(tree), len(tree), children)
    return [tree], None


def _unflatten(structure, leaves):
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
    """Flattens a callable's results and checks them against a reference structure and types."""

    def __init__(self, what: str, structure, leaves):
        self.what = what
        self.structure = structure
        self.types = [(leaf.shape, leaf.dtype) for leaf in leaves]
        self.paths = _paths(structure, what)

    def __call__(self, tree) -> list:
        leaves, structure = _flatten(tree)
        if structure != self.structure:
            raise LoopCarryError(f"{self.what} changed structure: {_describe(self.structure)} "
                                 f"at the start, {_describe(structure)} now")
        leaves = _as_arrays(leaves)
        for path, leaf, (shape, dtype) in zip(self.paths, leaves, self.types):
            if leaf.shape != shape or leaf.dtype != dtype:
                raise LoopCarryError(
                    f"{path} changed type: {dtype}{list(shape)} at the start, {_type_of(leaf)} "
                    "now; a loop carry must keep its shape and dtype (cast it, e.g. "
                    f"np.asarray(..., dtype={dtype}))")
        return leaves


@kernel("Call", domain=_DOMAIN, multi=True)
def _call(attrs, n_outputs):
    return attrs["fn"]


def _run(body_fn, n_carry, carry_leaves, xs_leaves, reverse, iteration, trip_count,
         initial_cond, cond_result, n_y):
    """Build the one-node loop and run it; returns (carry leaves, ys leaves)."""
    body = GraphBuilder("python_body", opsets={_DOMAIN: 1})
    params = []
    if iteration:
        params.append(body.input("i", np.int64, ()))
    carry_params = [body.input(f"c{k}") for k in range(n_carry)]
    x_params = [body.input(f"x{k}") for k in range(len(xs_leaves))]
    outputs = [f"c{k}_out" for k in range(n_carry)] + [f"y{k}" for k in range(n_y)]
    if cond_result:
        outputs.append("cond")
    body.node("Call", *params, *carry_params, *x_params, outputs=outputs, domain=_DOMAIN,
              fn=body_fn)
    body.output(*outputs)
    g = GraphBuilder("python_loop", opsets={_DOMAIN: 1})
    inputs = []
    for k, leaf in enumerate(carry_leaves):
        inputs.append((g.input(f"carry{k}"), CarriedInput(0, f"c{k}", f"c{k}_out")))
    for k, leaf in enumerate(xs_leaves):
        inputs.append((g.input(f"xs{k}"), SlicedInput(0, f"x{k}", 0, stride=-1 if reverse else 1)))
    results = [LastOutput(f"c{k}_out") for k in range(n_carry)]
    results += [ConcatOutput(f"y{k}", 0, reverse, True) for k in range(n_y)]
    names = [f"out{k}" for k in range(len(results))]
    g.loop(body.build(), inputs, results, trip_count=trip_count, initial_cond=initial_cond,
           iteration_param="i" if iteration else None, cond_result="cond" if cond_result else None,
           output_names=names, name="python_loop")
    g.output(*names)
    feeds = {f"carry{k}": leaf for k, leaf in enumerate(carry_leaves)}
    feeds.update({f"xs{k}": leaf for k, leaf in enumerate(xs_leaves)})
    out = Model(g.build(), max_iterations=None).run(feeds)
    values = [out[name] for name in names]
    return values[:n_carry], values[n_carry:]


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False):
    """Scan `f` over the leading axis of `xs`, carrying state; returns ``(carry, ys)``.

    Semantics, as a plain-Python loop::

        carry, ys = init, []
        for x in (reversed(xs) if reverse else xs):      # x: each xs leaf indexed at i
            carry, y = f(carry, x)
            ys.append(y)
        return carry, stack(ys[::-1] if reverse else ys)  # ys[i] goes with xs[i]

    `xs` may be None (then `length` gives the number of steps and `f` gets ``x=None``). With zero
    steps, `f` is called once on the initial carry and a zero-filled x to learn the shapes of
    `ys` (its result is discarded).
    """
    carry_leaves, carry_structure = _flatten(init)
    carry_leaves = _read_only(carry_leaves)
    carry_check = _Checked("carry", carry_structure, carry_leaves)
    xs_leaves, xs_structure = ([], None) if xs is None else _flatten(xs)
    xs_leaves = _read_only(xs_leaves)
    lengths = {leaf.shape[0] for leaf in xs_leaves if leaf.ndim}
    if any(leaf.ndim == 0 for leaf in xs_leaves):
        raise ValueError("scan: every xs leaf needs a leading axis to scan over")
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise ValueError(f"scan: the leading axes of xs and `length` disagree: {sorted(lengths)}"
                         if lengths else "scan: give xs or length")
    (steps,) = lengths

    def unpack_x(x_leaves):
        return None if xs is None else _unflatten(xs_structure, x_leaves)

    if steps == 0:  # no step to learn ys' shapes from: probe f on zeros
        probe_x = [np.zeros(leaf.shape[1:], leaf.dtype) for leaf in xs_leaves]
        carry_out, y = f(_unflatten(carry_structure, carry_leaves), unpack_x(probe_x))
        carry_check(carry_out)
        y_leaves, y_structure = _flatten(y)
        y_leaves = _as_arrays(y_leaves)
        empty = [np.empty((0, *leaf.shape), leaf.dtype) for leaf in y_leaves]
        return _unflatten(carry_structure, [np.array(leaf) for leaf in carry_leaves]), \
            _unflatten(y_structure, empty)
    # The first step runs here: its result fixes the structure and types of ys (so the loop
    # can be built with one output per y leaf) and is handed to the loop as its first step, so
    # `f` runs exactly once per step.
    first_x = [leaf[-1 if reverse else 0] for leaf in xs_leaves]
    first_carry, first_y = f(_unflatten(carry_structure, carry_leaves), unpack_x(first_x))
    y_leaves, y_structure = _flatten(first_y)
    y_check = _Checked("y", y_structure, _as_arrays(y_leaves))
    pending = [(first_carry, first_y)]

    def body_fn(*args):
        if pending:
            carry_out, y = pending.pop()
        else:
            carry = _unflatten(carry_structure, args[:len(carry_leaves)])
            carry_out, y = f(carry, unpack_x(list(args[len(carry_leaves):])))
        return (*carry_check(carry_out), *y_check(y))

    carry_out, ys_out = _run(body_fn, len(carry_leaves), carry_leaves, xs_leaves, reverse,
                             False, steps, None, False, len(y_leaves))
    return _unflatten(carry_structure, carry_out), _unflatten(y_structure, ys_out)


def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``while cond_fun(val): val = body_fun(val)``; returns the final `val`.

    `cond_fun` must return one boolean. The loop is unbounded (Ctrl-C stops it).
    """
    leaves, structure = _flatten(init_val)
    leaves = _read_only(leaves)
    check = _Checked("val", structure, leaves)

    def truth(value):
        value = np.asarray(value)
        if value.size != 1:
            raise TypeError(f"while_loop: cond_fun must return one boolean, got shape "
                            f"{value.shape}")
        return np.asarray(bool(value.reshape(-1)[0]))

    def body_fn(*args):
        new = check(body_fun(_unflatten(structure, list(args))))
        return (*new, truth(cond_fun(_unflatten(structure, new))))

    first = bool(truth(cond_fun(init_val)))
    out, _ = _run(body_fn, len(leaves), leaves, [], False, False, None, first, True, 0)
    return _unflatten(structure, out)


def fori_loop(lower: int, upper: int, body_fun: Callable, init_val):
    """``for i in range(lower, upper): val = body_fun(i, val)``; returns the final `val`."""
    leaves, structure = _flatten(init_val)
    leaves = _read_only(leaves)
    check = _Checked("val", structure, leaves)
    lower, upper = int(lower), int(upper)

    def body_fn(i, *args):
        return tuple(check(body_fun(lower + int(i), _unflatten(structure, list(args)))))

    out, _ = _run(body_fn, len(leaves), leaves, [], False, True, max(upper - lower, 0), None,
                  False, 0)
    return _unflatten(structure, out)
