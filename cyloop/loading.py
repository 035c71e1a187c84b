"""`cyloop.load`: a model file (or bytes, or an in-memory model) to a compiled `Model`."""

from __future__ import annotations

import os

from ._compile import DEFAULT_MAX_ITERATIONS
from .errors import ModelError
from .model import Model

__all__ = ["load"]


def load(source, *, driver: str | None = None,
         max_iterations: int | None = DEFAULT_MAX_ITERATIONS) -> Model:
    """Load an ONNX model (a path, its bytes, or an ``onnx.ModelProto``) and compile it.

    ``driver`` and ``max_iterations`` are passed to `Model`.
    """
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path.endswith(".xml"):
            raise ModelError(f"{path}: OpenVINO IR is not supported by this version of cyloop")
        if not os.path.exists(path):
            raise ModelError(f"{path}: no such file")
    from .frontends.onnx import load_onnx, onnx_to_graph

    return Model(onnx_to_graph(load_onnx(source)), driver=driver, max_iterations=max_iterations)
