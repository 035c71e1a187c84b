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
         tune: bool | str = True, cache=None) -> Model:
    """Load and compile a model: an ONNX file, its bytes or an ``onnx.ModelProto``; or an
    OpenVINO IR ``.xml`` or its bytes (weights from the ``.bin`` beside it, or `weights`: a path
    or the bytes).

    ``driver``, the limits (``max_iterations``: iterations of one run's loops in all, default
    10^8; ``time_limit``: seconds a run may take; ``memory_limit``: bytes of one buffer the
    planner allocates; None: no limit), ``progress``, ``hoist`` and ``tune`` are passed to `Model`,
    whose docstring says what each does.

    ``cache``: keep what reading a model file makes (its graph, before compiling) in an on-disk
    cache, so that loading the same model again, in any process, skips reading it (for an ONNX
    model, ``import onnx`` too). True: in ``$CYLOOP_CACHE_DIR``, else the user's cache directory
    (``~/.cache/cyloop`` on Linux); a path: in that directory; False: no cache; None (the
    default): in ``$CYLOOP_CACHE_DIR`` if it is set, else no cache. Entries are keyed by the
    model's bytes, cyloop's, Python's and the packages' versions and the machine; an entry that
    cannot be read, is corrupt or was made for another key is a miss, with a warning, never an
    error. Entries are pickles, trusted as the user's own files are: a directory others may
    write into is not used. The model compiles on every load as without the cache (its measured
    choices are measured afresh); an ``onnx.ModelProto``, and an ONNX model with external data
    files, are not cached. The user guide's "The on-disk cache" says more.
    """
    options = {"driver": driver, "max_iterations": max_iterations, "time_limit": time_limit,
               "memory_limit": memory_limit, "progress": progress, "hoist": hoist, "tune": tune}
    directory = None
    if cache is not False and (cache is not None or os.environ.get("CYLOOP_CACHE_DIR")):
        from . import cache as disk  # (cache.ENVIRONMENT_VARIABLE; loaded only when asked for)

        directory = disk.directory_of(cache)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.exists(path):
            raise ModelNotFoundError(path)
        if os.path.isdir(path):
            raise ModelError(f"{path}: a directory, not a model file")
        if os.path.getsize(path) == 0:
            raise ModelError(f"{path}: the file is empty, not a model")
        xml = path.endswith(".xml")
    elif isinstance(source, (bytes, bytearray, memoryview)):
        xml = _is_xml(source)
    else:  # (an in-memory model: nothing to cache)
        xml, directory = False, None
    if directory is not None:
        return Model(disk.read_graph(source, xml, weights, directory), **options)
    if xml:
        from .frontends import openvino

        return Model(openvino.read_graph(source, weights=weights), **options)
    from .frontends import onnx  # (each frontend loads with its first model, not with cyloop)

    return Model(onnx.read_graph(source), **options)


def _is_xml(data) -> bool:
    """Whether model bytes are XML (an IR) rather than an ONNX protobuf, which never starts with
    '<' (its first byte is a field tag: 0x08 for ir_version, 0x12, 0x1a, ...)."""
    head = bytes(data[:64]).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"<")
