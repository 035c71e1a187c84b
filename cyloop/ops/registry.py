"""The one kernel table: `(domain, op_type)` -> kernels by the opset version they appeared in.

A kernel is registered with `@kernel(op_type, domain=..., since=...)` on a factory. The factory gets
the node's attributes once, when the graph is compiled, and returns a callable of arrays only, so a
run does no attribute work. A kernel declared with ``out=True`` takes an ``out=`` keyword and writes
its single result there; such a kernel's result shape and dtype must follow from its inputs' shapes
and dtypes alone (no data-dependent shapes), which is what lets the planner reuse a destination.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import UnsupportedOpError

__all__ = ["KernelDef", "kernel", "lookup", "registered"]


@dataclass(frozen=True)
class KernelDef:
    """One registered kernel. `factory(attrs) -> callable(*arrays)`."""

    op_type: str
    domain: str
    since: int
    factory: Callable[[dict[str, Any]], Callable]
    out: bool = False
    multi: bool = False

    def build(self, attrs: dict[str, Any], n_outputs: int = 1) -> Callable:
        """Bind `attrs`; a ``multi`` factory also learns how many outputs the node has."""
        if self.multi:
            return self.factory(attrs, n_outputs)
        return self.factory(attrs)


_TABLE: dict[tuple[str, str], list[KernelDef]] = {}


def kernel(op_type: str, domain: str = "", since: int = 1, out: bool = False, multi: bool = False):
    """Register the decorated factory for `op_type` in `domain` from opset `since` on.

    ``out=True``: the kernel accepts ``out=`` (see the module docstring). ``multi=True``: the
    factory is called as ``factory(attrs, n_outputs)`` and the kernel returns a tuple of results,
    one per node output.
    """

    def register(factory):
        entries = _TABLE.setdefault((domain, op_type), [])
        if any(entry.since == since for entry in entries):
            raise RuntimeError(f"kernel {domain or 'ai.onnx'}::{op_type} since {since} is "
                               "registered twice")
        bisect.insort(entries, KernelDef(op_type, domain, since, factory, out, multi),
                      key=lambda entry: entry.since)
        return factory

    return register


def lookup(domain: str, op_type: str, version: int, where: str = "") -> KernelDef:
    """The kernel with the highest `since` <= `version`; `UnsupportedOpError` naming what exists."""
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


def registered() -> list[KernelDef]:
    """Every registered kernel, sorted by domain, op type and version."""
    return sorted((entry for entries in _TABLE.values() for entry in entries),
                  key=lambda entry: (entry.domain, entry.op_type, entry.since))
