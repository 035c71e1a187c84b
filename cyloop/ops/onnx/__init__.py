"""Kernels for the ONNX default domain (ai.onnx), by family."""

from . import elementwise, fallback, indexing, nn, reduction, sequence, tensor  # noqa: F401
