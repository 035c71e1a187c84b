"""The one kernel table: `(domain, op_type)` -> kernels by the opset version they appeared in.

A kernel is registered with `@kernel(op_type, domain=..., since=...)` on a factory. The factory gets
the node's attributes once, when the graph is compiled, and returns a callable of arrays only, so a
run does no attribute work.

A kernel declares its traits where it is registered, and the engine reads them from here:

- ``out=True``: it takes an ``out=`` keyword and writes its result there (a ``multi`` kernel: its
  first result, say a recurrent cell's new h), returning that array itself; that result's shape
  and dtype follow from its inputs' shapes and dtypes alone (no data-dependent shapes), which is
  what lets the planner reuse a destination. A kernel may decline (its operands' types differ,
  say) and return a fresh result instead, which the engine then copies.
- ``multi=True``: the factory is called as ``factory(attrs, n_outputs)`` and the kernel returns a
  tuple of results, one per node output.
- ``batch``: how the node runs on many iterations' rows at once (hoisting, engine/hoist.py), one
  of `BATCH_FORMS`; ``batch_if(attrs, batched)`` may refuse it for some attributes or for some
  operands being batched (``batched``: one bool per input).
- ``scalar=(operator, types)``: on two numpy scalars (or 0-d arrays) of one type in ``types``, the
  kernel computes exactly ``operator(x, y)`` (the same IEEE operation in the same type), which the
  runner calls instead of the ufunc machinery; on integers, only ``operator.add``, ``sub`` and
  ``mul`` (`ARITHMETIC_SCALARS`), which the runner computes wrapping around as the ufunc does.
- ``cell=(recurrence op, W position, B position)``: an RNN cell whose input projection
  ``X W^T + B`` can be hoisted, the rest running as the named recurrence op.
- ``identity=True``: it returns its one input unchanged, so the compiler runs no step for it and
  its output is another name for its input's value (hoisted with ``batch="elementwise"``, its
  rows are its input's: an Identity stops no chain of hoisted nodes).
- ``stateful=True``: its calls depend on the calls before (a random stream moving on), so each
  node has a kernel of its own. Any other kernel is a pure function of its attributes and
  inputs, which lets nodes with one attributes dict share one (engine/compile.py).

What one built kernel can do beyond that (a measured choice, products that follow a loop's
choice of cores, a recurrent step's many steps in one call, a scatter updating its first input
in place) it declares where it is built, as one record: `Abilities` (cyloop/abilities.py, which
this module re-exports), stated with `declare` and read with `abilities_of`.
"""

from __future__ import annotations

import bisect
import importlib
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .._records import FrozenRecord, set_field
from ..abilities import NO_ABILITIES, Abilities, Recurrence, abilities_of, declare
from ..errors import ModelError, UnsupportedOpError
from ..ir import Node

__all__ = [
    "ARITHMETIC_SCALARS",
    "BATCH_FORMS",
    "BOOL_SCALARS",
    "FLOAT_SCALARS",
    "INTEGER_SCALARS",
    "NO_ABILITIES",
    "NUMBER_SCALARS",
    "Abilities",
    "Kernel",
    "KernelDef",
    "Recurrence",
    "abilities_of",
    "build",
    "declare",
    "definition_of",
    "kernel",
    "lookup",
    "node_version",
    "registered",
]

# How a kernel runs on a block of rows (each batched operand has the rows on a new leading axis):
BATCH_FORMS = (
    "elementwise",  # numpy broadcasting over its operands, any of them batched
    "first",        # elementwise in its first operand only; the others must be the same each row
    "axes",         # Squeeze / Unsqueeze with axes as an input: they count the part's dims, so
                    # they shift by one
    "axes_attribute",  # the same with axes as an attribute (ONNX opsets < 13)
    "reduction",    # a reduction with axes as an input: they shift by one, and none (every
                    # axis of a part) reduce every axis but the row axis
    "reduction_attribute",  # the same with axes as an attribute
    "reshape",      # Reshape: the target shape gains the row count in front
    "broadcast",    # Expand (or a Broadcast) of rows to a static target shape: the row count
                    # goes in front of the target, the rows' dims are aligned behind it
    "axis",         # Gather of rows by static indices along a static axis input (OpenVINO's),
                    # which counts the part's dims: one past it when it is not negative
    "axis_attribute",  # the same with the axis an attribute (ONNX's Gather)
    "concat",       # Concat of rows and static operands (each then the same in every row)
                    # along an `axis` attribute, shifted as `axis_attribute`'s
    "split",        # Split of rows along an `axis` attribute (default 0), shifted as
                    # `axis_attribute`'s, by static sizes
    "matmul",       # the left operand batched, the right one not: one GEMM over every row
    "gemm",         # ONNX Gemm: A batched (not transposed), B and C not; the kernel says its
                    # attributes (alpha, beta, trans_b) and its weight product
    "cell",         # an RNN cell (see `cell`)
)

FLOAT_SCALARS = frozenset([np.float16, np.float32, np.float64])
INTEGER_SCALARS = frozenset([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                             np.uint32, np.uint64])
# Add, subtract and multiply: on integers the runner wraps around as the ufunc does, computing
# them itself (numpy's integer scalar operators warn on the overflow a ufunc wraps silently).
ARITHMETIC_SCALARS = FLOAT_SCALARS | INTEGER_SCALARS
# Comparisons are exact on every number type.
NUMBER_SCALARS = ARITHMETIC_SCALARS | frozenset([np.bool_])
# And, Or and Xor: numpy's bool scalar's &, | and ^ are its logical ufuncs'.
BOOL_SCALARS = frozenset([np.bool_])


class KernelDef(FrozenRecord):
    """One registered kernel: `factory(attrs) -> callable(*arrays)` and its traits (above)."""

    _fields = ("op_type", "domain", "since", "factory", "out", "multi", "batch", "batch_if",
               "scalar", "cell", "identity", "stateful")

    def __init__(self, op_type: str, domain: str, since: int, factory: Callable[..., Callable],
                 out: bool = False, multi: bool = False, batch: str | None = None,
                 batch_if: Callable[[dict, list[bool]], bool] | None = None,
                 scalar: tuple[Callable, frozenset] | None = None,
                 cell: tuple[str, int, int] | None = None, identity: bool = False,
                 stateful: bool = False):
        # (one update of the instance's dict, not a `set_field` a field: every kernel module
        # registers dozens of kernels as it loads, and a model's load imports several)
        vars(self).update(op_type=op_type, domain=domain, since=since, factory=factory, out=out,
                          multi=multi, batch=batch, batch_if=batch_if, scalar=scalar, cell=cell,
                          identity=identity, stateful=stateful)

    def build(self, attrs: dict[str, Any], n_outputs: int = 1) -> Callable:
        """Bind `attrs`; a ``multi`` factory also learns how many outputs the node has."""
        if self.multi:
            return self.factory(attrs, n_outputs)
        return self.factory(attrs)

    def batches(self, attrs: dict, batched: list[bool]) -> bool:
        """Whether a node with `attrs`, with these inputs batched, runs on rows (`batch`)."""
        return self.batch is not None and (self.batch_if is None or self.batch_if(attrs, batched))


class Kernel(FrozenRecord):
    """A kernel built for one node: the callable and what the runner needs to know of it:
    whether it is `multi`, whether it takes ``out=`` for its (first) result (`out`), and
    whether it takes its destination as one more positional argument (`positional_out`: a ufunc
    of the node's arity, so no keyword dict per call)."""

    _fields = ("fn", "definition", "multi", "out", "positional_out")

    def __init__(self, fn: Callable, definition: KernelDef, multi: bool, out: bool,
                 positional_out: bool):
        set_field(self, "fn", fn)
        set_field(self, "definition", definition)
        set_field(self, "multi", multi)
        set_field(self, "out", out)
        set_field(self, "positional_out", positional_out)


_TABLE: dict[tuple[str, str], list[KernelDef]] = {}
# Kernel modules register their kernels as they import. The registry imports those of an op the
# first time the op is looked up, as ../data/kernel_index.txt lists them (made by
# ../data/make_kernel_index.py), so `import cyloop` imports none and loading a model imports
# what its ops need. (`registered()` imports them all.)
_INDEX_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                           "kernel_index.txt")
_index: dict[tuple[str, str], tuple[str, ...]] | None = None
_imported: set[tuple[str, str]] = set()  # the ops whose modules are imported
_everything_imported = False


def _read_index() -> dict[tuple[str, str], tuple[str, ...]]:
    """(domain, op type) -> the modules that register its kernels."""
    # (read as bytes and decoded at once, into the tuples directly: a text file's line by line
    # reading, and lists made tuples after, cost a fresh process's load three times as much)
    with open(_INDEX_PATH, "rb") as f:
        text = f.read().decode("utf-8")
    index: dict[tuple[str, str], tuple[str, ...]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        module, domain, *ops = line.split()
        if domain == "-":
            domain = ""
        owner = (module,)
        for op_type in ops:
            key = (domain, op_type)
            index[key] = index[key] + owner if key in index else owner
    return index


def _the_index() -> dict[tuple[str, str], tuple[str, ...]]:
    global _index
    if _index is None:
        _index = _read_index()
    return _index


def _import_kernels(domain: str, op_type: str) -> None:
    """Import the modules that register the op's kernels. (An op the index does not list is one
    no cyloop module registers: a control-flow op the engine runs itself, a user's kernel, which
    registered as its module imported, or none at all.)"""
    _imported.add((domain, op_type))
    for module in _the_index().get((domain, op_type), ()):
        importlib.import_module(module)


def _import_every_kernel() -> None:
    global _everything_imported
    if not _everything_imported:
        _everything_imported = True
        for module in sorted({m for owners in _the_index().values() for m in owners}):
            importlib.import_module(module)


# Ufuncs whose result has the type of their operands when those share one float type: given a
# buffer of that type and of the result's shape as `out=`, they compute what they would into a
# fresh array, so a dead operand's buffer may take the result. On integers only those that keep
# the type (the others make floats of them).
_FLOAT_KEEPING = {np.add, np.subtract, np.multiply, np.true_divide, np.maximum, np.minimum,
                  np.negative, np.absolute, np.tanh, np.exp, np.log, np.sqrt, np.floor, np.ceil,
                  np.reciprocal}
_INTEGER_KEEPING = {np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.negative,
                    np.absolute}
FLOATS, INTEGERS = 1, 2  # the operand kinds `type_keeping` reports, as bits
FIRST_INPUT = 4  # ... and a kernel updating its first input's buffer in place (`updates_first`)


def type_keeping(fn) -> int:
    """For which operand kinds (`FLOATS`, `INTEGERS`, or'ed) ufunc `fn`'s result has the type
    its operands share, so that one of them may be written over with the result; `FIRST_INPUT`
    for a kernel that declares `updates_first` (`Abilities`); 0 for anything else."""
    if abilities_of(fn).updates_first:
        return FIRST_INPUT
    if not isinstance(fn, np.ufunc):
        return 0
    return (FLOATS if fn in _FLOAT_KEEPING else 0) | (INTEGERS if fn in _INTEGER_KEEPING else 0)


def kernel(op_type: str, domain: str = "", since: int = 1, out: bool = False, multi: bool = False,
           batch: str | None = None, batch_if=None, scalar=None, cell=None,
           identity: bool = False, stateful: bool = False):
    """Register the decorated factory for `op_type` in `domain` from opset `since` on, with the
    traits in the module docstring."""
    if batch is not None and batch not in BATCH_FORMS:
        raise ValueError(f"batch must be one of {BATCH_FORMS}, not {batch!r}")

    def register(factory):
        definition = KernelDef(op_type, domain, since, factory, out, multi, batch, batch_if,
                               scalar, cell, identity, stateful)
        entries = _TABLE.get((domain, op_type))
        if entries is None:  # (most ops: their one kernel)
            _TABLE[domain, op_type] = [definition]
            return factory
        if any(entry.since == since for entry in entries):
            raise RuntimeError(f"kernel {domain or 'ai.onnx'}::{op_type} since {since} is "
                               "registered twice")
        bisect.insort(entries, definition, key=_since)
        return factory

    return register


def _since(definition: KernelDef) -> int:
    return definition.since


def lookup(domain: str, op_type: str, version: int, where: str = "") -> KernelDef:
    """The kernel with the highest `since` <= `version`; `UnsupportedOpError` naming what exists."""
    if (domain, op_type) not in _imported:
        _import_kernels(domain, op_type)
    entries = _TABLE.get((domain, op_type), [])
    index = bisect.bisect_right([entry.since for entry in entries], version)
    if index:
        return entries[index - 1]
    shown = domain or "ai.onnx"
    prefix = f"{where}: " if where else ""
    if entries:
        versions = ", ".join(str(entry.since) for entry in entries)
        raise UnsupportedOpError(f"{prefix}{shown}::{op_type} at opset {version} is not supported; "
                                 f"cyloop has it from opset versions {versions}")
    raise UnsupportedOpError(f"{prefix}{shown}::{op_type} (opset {version}) is not supported; "
                             f"cyloop has no kernel for {op_type} in domain {shown!r}")


def node_version(node: Node, opsets: dict[str, int]) -> int:
    """The op version a node runs at: its own (OpenVINO states it per layer), else its graph's
    opset for its domain."""
    return node.version if node.version is not None else \
        opsets.get(node.domain, opsets.get("", 1))


def definition_of(node: Node, opsets: dict[str, int]) -> KernelDef:
    """The registered kernel a node runs (`UnsupportedOpError` naming the node if none)."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    version = node_version(node, opsets)
    try:
        return lookup(domain, node.op_type, version)
    except UnsupportedOpError:  # (the node's label only then: compiling looks up every node)
        return lookup(domain, node.op_type, version, where=node.label)


def build(node: Node, opsets: dict[str, int], attrs: dict | None = None) -> Kernel:
    """The kernel of a plain op node, bound to `attrs` (default: its own); a bad attribute is a
    `ModelError` naming the node."""
    definition = definition_of(node, opsets)
    try:
        fn = definition.build(node.attrs if attrs is None else attrs, len(node.outputs))
    except (KeyError, ValueError, TypeError) as e:
        raise ModelError(f"{node.label}: bad attributes for {node.op_type}: {e}") from e
    if isinstance(fn, np.ufunc) and len(node.inputs) != fn.nin:
        # (a ufunc would take an input past its arity as its destination)
        raise ModelError(f"{node.label}: {node.op_type} takes {fn.nin} inputs, got "
                         f"{len(node.inputs)}")
    out = definition.out and (len(node.outputs) == 1 or definition.multi)
    # (numpy 2.4 deprecates a positional destination for maximum and minimum: `out=` for them.)
    positional = (out and isinstance(fn, np.ufunc) and fn.nout == 1
                  and fn not in (np.maximum, np.minimum))
    return Kernel(fn, definition, definition.multi, out, positional)


def registered() -> list[KernelDef]:
    """Every registered kernel, sorted by domain, op type and version."""
    _import_every_kernel()
    return sorted((entry for entries in _TABLE.values() for entry in entries),
                  key=lambda entry: (entry.domain, entry.op_type, entry.since))
