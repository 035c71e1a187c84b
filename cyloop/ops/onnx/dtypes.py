"""ONNX TensorProto element types <-> numpy dtypes (shared by kernels and the ONNX frontend)."""

import numpy as np

ONNX_TO_NUMPY = {
    1: np.dtype(np.float32),
    2: np.dtype(np.uint8),
    3: np.dtype(np.int8),
    4: np.dtype(np.uint16),
    5: np.dtype(np.int16),
    6: np.dtype(np.int32),
    7: np.dtype(np.int64),
    8: np.dtype(object),
    9: np.dtype(np.bool_),
    10: np.dtype(np.float16),
    11: np.dtype(np.float64),
    12: np.dtype(np.uint32),
    13: np.dtype(np.uint64),
    14: np.dtype(np.complex64),
    15: np.dtype(np.complex128),
}

try:  # bfloat16 and the float8 types, where ml_dtypes (an onnx dependency) is installed
    import ml_dtypes

    ONNX_TO_NUMPY[16] = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    pass


def to_numpy_dtype(to) -> np.dtype:
    """An ONNX element type number, or anything `np.dtype` accepts, as a numpy dtype."""
    if isinstance(to, (int, np.integer)) and not isinstance(to, bool):
        try:
            return ONNX_TO_NUMPY[int(to)]
        except KeyError:
            raise ValueError(f"ONNX element type {to} has no numpy equivalent in cyloop") from None
    return np.dtype(to)
