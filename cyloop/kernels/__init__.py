"""Pure-Python numpy kernels, one registry (`registry.py`), grouped by format, family and opset.

The modules of each format register their kernels as they import, which the registry does the
first time a kernel is looked up; `build(node, opsets)` resolves a node's kernel.
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
