"""Kernels for the ONNX default domain (ai.onnx), by family."""

from . import (  # noqa: F401  (registration happens on import)
    detection,
    elementwise,
    fallback,
    indexing,
    ml,
    ml_encoders,
    ml_linear,
    ml_trees,
    nn,
    normalization,
    quantization,
    reduction,
    resize,
    rnn,
    sequence,
    signal,
    spatial,
    tensor,
)
