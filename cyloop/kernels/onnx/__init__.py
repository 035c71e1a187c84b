"""Kernels for the ONNX default domain (ai.onnx) and ai.onnx.ml, a module a family. The registry
imports a module the first time one of its ops is looked up (../registry.py)."""
