"""Kernels for OpenVINO IR layers (domain ``openvino``), registered by the opset version each
behaviour appeared in. IR attributes arrive as strings; `_attrs.py` parses them."""

from . import (  # noqa: F401  (registration happens on import)
    cells,
    detection,
    elementwise,
    generation,
    image,
    indexing,
    nn,
    normalization,
    sequences,
    signals,
    spatial,
    tensor,
)
