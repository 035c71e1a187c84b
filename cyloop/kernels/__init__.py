"""Pure-Python numpy kernels, one registry (`registry.py`), grouped by format, family and opset.

A family's module registers its kernels as it imports, which the registry makes it do the first
time one of its ops is looked up (../data/kernel_index.txt lists which module registers which
op); `build(node, opsets)` resolves a node's kernel.
"""

from ._ir_attrs import as_bool
from ._shapes import flat_int_list
from .registry import (
    Kernel,
    KernelDef,
    build,
    definition_of,
    kernel,
    lookup,
    node_version,
    registered,
    type_keeping,
)

__all__ = ["Kernel", "KernelDef", "as_bool", "build", "definition_of", "flat_int_list", "kernel", "lookup",
           "node_version", "registered", "type_keeping"]
