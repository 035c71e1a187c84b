"""Kernels for OpenVINO IR layers (domain ``openvino``), registered by the opset version each
behaviour appeared in. IR attributes arrive as strings; `../_ir_attrs.py` parses them. The cell and
sequence layers are in ../recurrent/, which both formats share."""

from . import (  # noqa: F401  (registration happens on import)
    detection,
    elementwise,
    generation,
    image,
    indexing,
    nn,
    normalization,
    signals,
    spatial,
    tensor,
)
