"""Discrete Fourier transforms over chosen axes, with a signal length per axis, for OpenVINO's
DFT, IDFT, RDFT and IRDFT (and ONNX's DFT, which says the same with other attributes).

A complex tensor is kept as real numbers with a last axis of 2 (real, imaginary), as both formats
store it. A signal length trims an axis to its first `length` positions or pads it with zeros at
the end before the transform; an inverse transform divides by the product of the lengths. The
real-input transform keeps the first ``length // 2 + 1`` frequencies of its last axis (the rest
are their complex conjugates); the real-output inverse extends its last axis back to `length`
positions by that symmetry and returns the real part.

numpy's pocketfft computes each in the input's precision: float32 as complex64, float64 as
complex128; float16 and bfloat16 go through float32 and are rounded once at the end.
"""

import numpy as np

__all__ = ["complex_pairs", "from_pairs", "transform"]

KINDS = ("forward", "inverse", "real_forward", "real_inverse")


def _working_type(dtype):
    """The real type numpy transforms `dtype` in."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def from_pairs(x):
    """[..., 2] (real, imaginary) as a complex array of the working precision."""
    real = _working_type(x.dtype)
    pairs = np.ascontiguousarray(x, dtype=real)
    return pairs.view(np.result_type(real, np.complex64))[..., 0]


def complex_pairs(y, dtype):
    """A complex array as [..., 2] (real, imaginary) of `dtype`."""
    return np.stack([y.real, y.imag], axis=-1).astype(dtype, copy=False)


def transform(x, axes, lengths, kind):
    """`kind` of the transform (one of KINDS) of `x` over `axes` (normalized, distinct), each
    trimmed or padded to its entry of `lengths` (for "real_inverse", the last one is the length
    of the real output's axis). `x` is real for "real_forward", else [..., 2] pairs; the result
    has x's dtype and is [..., 2] pairs except for "real_inverse"."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "real_forward":
        data = np.asarray(x, _working_type(x.dtype))
    else:
        data = from_pairs(x)
    if not axes:
        result = data
    elif kind == "forward":
        result = np.fft.fftn(data, s=lengths, axes=axes)
    elif kind == "inverse":
        result = np.fft.ifftn(data, s=lengths, axes=axes)
    elif kind == "real_forward":
        result = np.fft.rfftn(data, s=lengths, axes=axes)
    else:
        result = np.fft.irfftn(data, s=lengths, axes=axes)
    if kind == "real_inverse":
        return np.real(result).astype(x.dtype, copy=False)
    return complex_pairs(result, x.dtype)
