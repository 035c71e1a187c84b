"""`cyloop.load`: a model file (or bytes, or an in-memory model) to a compiled `Model`."""

from __future__ import annotations

import os

from .engine.settings import DEFAULT_MAX_ITERATIONS
from .errors import ModelError, ModelNotFoundError
from .model import Model

__all__ = ["load"]


def load(source, *, weights=None, driver: str | None = None,
         max_iterations: int | None = DEFAULT_MAX_ITERATIONS, time_limit: float | None = None,
         memory_limit: int | None = None, progress=None, hoist: bool = True,
         tune: bool | str = True) -> Model:
    """Load and compile a model: an ONNX file, its bytes or an ``onnx.ModelProto``; or an
    OpenVINO IR ``.xml`` or its bytes (weights from the ``.bin`` beside it, or `weights`: a path
    or the bytes).

    ``driver``, the limits (``max_iterations``: iterations of one run's loops in all, default
    10^8; ``time_limit``: seconds a run may take; ``memory_limit``: bytes of one buffer the
    planner allocates; None: no limit), ``progress``, ``hoist`` and ``tune`` are passed to `Model`,
    whose docstring says what each does.
    """
    options = {"driver": driver, "max_iterations": max_iterations, "time_limit": time_limit,
               "memory_limit": memory_limit, "progress": progress, "hoist": hoist, "tune": tune}
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.exists(path):
            raise ModelNotFoundError(path)
        if os.path.isdir(path):
            raise ModelError(f"{path}: a directory, not a model file")
        if os.path.getsize(path) == 0:
            raise ModelError(f"{path}: the file is empty, not a model")
        if path.endswith(".xml"):
            return Model(_openvino().read_graph(path, weights=weights), **options)
    elif isinstance(source, (bytes, bytearray, memoryview)) and _is_xml(source):
        return Model(_openvino().read_graph(source, weights=weights), **options)
    from .frontends import onnx  # (each frontend loads with its first model, not with cyloop)

    return Model(onnx.read_graph(source), **options)


def _openvino():
    from .frontends import openvino

    return openvino


def _is_xml(data) -> bool:
    """Whether model bytes are XML (an IR) rather than an ONNX protobuf, which never starts with
    '<' (its first byte is a field tag: 0x08 for ir_version, 0x12, 0x1a, ...)."""
    head = bytes(data[:64]).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"<")
