"""`cyloop.load`: a model file (or bytes, or an in-memory model) to a compiled `Model`."""

from __future__ import annotations

import os

from .engine.settings import DEFAULT_MAX_ITERATIONS
from .errors import ModelError
from .frontends import onnx, openvino
from .model import Model

__all__ = ["load"]


def load(source, *, weights=None, driver: str | None = None,
         max_iterations: int | None = DEFAULT_MAX_ITERATIONS, progress=None,
         hoist: bool = True, tune: bool = True) -> Model:
    """Load and compile a model: an ONNX file, its bytes or an ``onnx.ModelProto``; or an
    OpenVINO IR ``.xml`` (weights from the ``.bin`` beside it, or `weights`).

    ``driver``, ``max_iterations``, ``progress``, ``hoist`` and ``tune`` are passed to `Model`.
    """
    options = {"driver": driver, "max_iterations": max_iterations, "progress": progress,
               "hoist": hoist, "tune": tune}
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.exists(path):
            raise ModelError(f"{path}: no such file")
        if path.endswith(".xml"):
            return Model(openvino.read_graph(path, weights=weights), **options)
    return Model(onnx.read_graph(source), **options)
