"""Pure-Python numpy kernels, one registry (`registry.py`), grouped by format, family and opset.

Importing this package registers every kernel.
"""

from . import onnx, openvino  # noqa: F401  (registers the ONNX and OpenVINO kernels)
from .registry import KernelDef, kernel, lookup, registered

__all__ = ["KernelDef", "kernel", "lookup", "registered"]
