"""Kernels for the ONNX default domain (ai.onnx), by family."""

from . import elementwise, nn, tensor  # noqa: F401  (registration happens on import)
