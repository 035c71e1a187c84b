"""Pure-Python numpy kernels, one registry (`registry.py`), grouped by format, family and opset.

Importing this package registers every kernel; `build(node, opsets)` resolves a node's kernel.
"""

from ..accel import fused  # noqa: F401  (registers every kernel)
from . import onnx, openvino, recurrent  # noqa: F401
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

__all__ = ["Kernel", "KernelDef", "build", "definition_of", "flat_int_list", "kernel", "lookup",
           "node_version", "registered", "type_keeping"]
