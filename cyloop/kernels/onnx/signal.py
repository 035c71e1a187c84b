"""Signal processing: DFT (opsets 17 and 20), STFT and MelWeightMatrix, on numpy's FFT in the
input's precision (kernels/_fourier.py: float16 and bfloat16 through float32).

A complex tensor is ONNX's [..., 2] (real, imaginary); a real one [..., 1]. The one-sided forward
transform (of a real input only) keeps the first ``n // 2 + 1`` frequencies; the one-sided
inverse reads those and returns the real signal of length n ([..., 1]), as onnx.reference does."""

import numpy as np

from .. import _fourier
from ..registry import kernel


def _signal(x):
    """[..., 1] as a real array, [..., 2] as a complex one, in the working precision."""
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise ValueError(f"a signal's last axis holds 1 (real) or 2 (real, imaginary) values, "
                         f"got shape {list(x.shape)}")
    if x.shape[-1] == 2:
        return _fourier.from_pairs(x)
    return np.asarray(x[..., 0], np.float64 if x.dtype == np.float64 else np.float32)


def _scalar(value, name):
    value = np.asarray(value)
    if value.size != 1:
        raise ValueError(f"{name} must be a single value, got shape {list(value.shape)}")
    return int(value.reshape(-1)[0])


def _dft(x, length, axis, inverse, onesided):
    """The DFT of [..., 1 | 2] `x` along `axis` (of x), trimmed or zero-padded to `length`
    (None: the axis's, or for the one-sided inverse 2 * (size - 1))."""
    if not (-x.ndim <= axis <= -2 or 0 <= axis <= x.ndim - 2):
        raise ValueError(f"DFT: axis {axis} is not a signal axis of a rank-{x.ndim} input "
                         f"(its last axis holds the real and imaginary parts)")
    axis %= x.ndim
    if length is None:
        length = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    if length < 1:
        raise ValueError(f"DFT: dft_length must be positive, got {length}")
    if onesided and not inverse and x.shape[-1] != 1:
        raise ValueError("DFT: a one-sided transform needs a real input (its last axis of 1)")
    signal = _signal(x)
    if inverse and onesided:
        return np.fft.irfft(signal, n=length, axis=axis)[..., None].astype(x.dtype, copy=False)
    if inverse:
        result = np.fft.ifft(signal, n=length, axis=axis)
    else:
        result = np.fft.fft(signal, n=length, axis=axis)
        if onesided:
            result = result[(slice(None),) * axis + (slice(0, length // 2 + 1),)]
    return _fourier.complex_pairs(result, x.dtype)


@kernel("DFT", since=17)
def dft_17(attrs):
    """DFT-17: (input [batch, n1, ..., nk, 1 | 2][, dft_length]) -> the transform along the
    ``axis`` attribute (default 1), ``inverse`` (divided by n) and ``onesided``."""
    axis = int(attrs.get("axis", 1))
    inverse, onesided = bool(int(attrs.get("inverse", 0))), bool(int(attrs.get("onesided", 0)))

    def transform(x, dft_length=None):
        length = None if dft_length is None else _scalar(dft_length, "dft_length")
        return _dft(x, length, axis, inverse, onesided)

    return transform


@kernel("DFT", since=20)
def dft_20(attrs):
    """DFT-20 and later: the axis an input (default -2, the last signal axis)."""
    inverse, onesided = bool(int(attrs.get("inverse", 0))), bool(int(attrs.get("onesided", 0)))

    def transform(x, dft_length=None, axis=None):
        length = None if dft_length is None or not np.size(dft_length) \
            else _scalar(dft_length, "dft_length")
        axis = -2 if axis is None or not np.size(axis) else _scalar(axis, "axis")
        return _dft(x, length, axis, inverse, onesided)

    return transform


@kernel("STFT", since=17)
def stft(attrs):
    """STFT-17: (signal [batch, length, 1 | 2], frame_step[, window [L], frame_length]) ->
    [batch, frames, bins, 2]: frames of L samples every ``frame_step`` (``1 + (length - L) //
    frame_step`` of them), each times the window (default ones), transformed; ``onesided``
    (the default) keeps ``L // 2 + 1`` bins (of a complex signal too, as onnxruntime does). All
    frames are one strided view and one FFT."""
    onesided = bool(int(attrs.get("onesided", 1)))

    def transform(signal, frame_step, window=None, frame_length=None):
        if signal.ndim != 3 or signal.shape[-1] not in (1, 2):
            raise ValueError(f"STFT needs a signal [batch, length, 1 | 2], got shape "
                             f"{list(signal.shape)}")
        step = _scalar(frame_step, "frame_step")
        if frame_length is not None and np.size(frame_length):
            length = _scalar(frame_length, "frame_length")
            if window is not None and window.shape != (length,):
                raise ValueError(f"STFT: window of shape {list(window.shape)} for frames of "
                                 f"{length} samples")
        elif window is not None:
            length = window.shape[0]
        else:
            raise ValueError("STFT needs a window or a frame_length")
        if step < 1 or not 1 <= length <= signal.shape[1]:
            raise ValueError(f"STFT: frames of {length} samples every {step} do not fit a "
                             f"signal of {signal.shape[1]}")
        values = _signal(signal)  # [batch, length]
        frames = np.lib.stride_tricks.sliding_window_view(values, length, axis=1)[:, ::step]
        if window is not None:
            frames = frames * np.asarray(window, values.real.dtype)
        result = np.fft.fft(frames, axis=-1)
        if onesided:
            result = result[..., :length // 2 + 1]
        return _fourier.complex_pairs(result, signal.dtype)

    return transform


def _hertz_to_mel(hertz):
    return 2595 * np.log1p(hertz / 700) / np.log(10)


@kernel("MelWeightMatrix", since=17)
def mel_weight_matrix(attrs):
    """MelWeightMatrix-17: (num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
    upper_edge_hertz) -> [dft_length // 2 + 1, num_mel_bins] of ``output_datatype``: mel bin i
    is a triangle over the spectrogram bins from edge i to edge i + 2 peaking (1) at edge i + 1,
    the num_mel_bins + 2 edges evenly spaced in mels (a step of their span over num_mel_bins +
    2, as onnx.reference and onnxruntime compute it) and rounded down to bins."""
    dtype = np.dtype(attrs.get("output_datatype", np.float32))  # (resolved by the frontend)

    def matrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
        bins, length = _scalar(num_mel_bins, "num_mel_bins"), _scalar(dft_length, "dft_length")
        rate = _scalar(sample_rate, "sample_rate")
        low = float(np.asarray(lower_edge_hertz).reshape(-1)[0])
        high = float(np.asarray(upper_edge_hertz).reshape(-1)[0])
        spectrogram_bins = length // 2 + 1
        low_mel, high_mel = _hertz_to_mel(low), _hertz_to_mel(high)
        mels = np.arange(bins + 2) * ((high_mel - low_mel) / (bins + 2)) + low_mel
        hertz = 700 * np.expm1(mels / 2595 * np.log(10))
        edges = ((length + 1) * hertz // rate).astype(np.int64)
        if edges.min() < 0 or edges[:-1].max() >= spectrogram_bins \
                or edges[-1] > spectrogram_bins:
            raise ValueError(f"MelWeightMatrix: the band [{low}, {high}] Hz reaches past the "
                             f"{spectrogram_bins} bins of a {length}-point DFT at {rate} Hz")
        left, centre, right = edges[:-2], edges[1:-1], edges[2:]
        j = np.arange(spectrogram_bins)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            rising = (j - left) / (centre - left)
            falling = (right - j) / (right - centre)
        out = np.where((j >= centre) & (j < right), falling,
                       np.where((j >= left) & (j <= centre) & (centre > left), rising,
                                np.where((j == centre) & (centre == left), 1.0, 0.0)))
        return out.astype(dtype)

    return matrix
