"""The Fourier transform layers of OpenVINO IR: DFT-7 and IDFT-7 (complex to complex), RDFT-9
(real to complex) and IRDFT-9 (complex to real), on kernels/_fourier.py.

Each takes (data, axes[, signal_size]). A complex tensor is [..., 2] (real, imaginary), and its
axes count the dimensions before that last one: an axis a < 0 of a complex input of rank r means
a + r - 1 (of RDFT's real input, a + r). ``signal_size[i]`` trims or zero-pads axis ``axes[i]``
(-1: its own length; IRDFT's last axis: 2 * (length - 1), the real signal its input holds the
first half of). The order of ``axes`` only pairs them with ``signal_size``; the last one is
RDFT's halved axis and IRDFT's restored one."""

import numpy as np

from .. import _fourier
from .._ir_attrs import DOMAIN
from ..registry import kernel


def _ints(values):
    return [int(v) for v in np.asarray(values).reshape(-1)]


def _geometry(op_type, x, axes, signal_size, complex_input, halved):
    """(normalized axes, signal lengths) of a layer's inputs, checked."""
    if complex_input and (x.ndim < 2 or x.shape[-1] != 2):
        raise ValueError(f"{op_type} needs complex data [..., 2] (real, imaginary), got shape "
                         f"{list(x.shape)}")
    rank = x.ndim - 1 if complex_input else x.ndim
    axes = _ints(axes)
    if halved and not axes:
        raise ValueError(f"{op_type} needs at least one axis")
    normalized = [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in normalized) or len(set(normalized)) != len(normalized):
        raise ValueError(f"{op_type} axes must be distinct, in [{-rank}, {rank - 1}], got {axes} "
                         f"for data of shape {list(x.shape)}")
    lengths = [x.shape[a] for a in normalized]
    if halved == "restored":
        lengths[-1] = 2 * (lengths[-1] - 1)
    if signal_size is not None:
        sizes = _ints(signal_size)
        if len(sizes) != len(axes):
            raise ValueError(f"{op_type} needs one signal_size per axis, got {sizes} for axes "
                             f"{axes}")
        if any(s < 1 and s != -1 for s in sizes):
            raise ValueError(f"{op_type} signal sizes must be positive or -1, got {sizes}")
        lengths = [length if s == -1 else s for length, s in zip(lengths, sizes)]
    if any(length < 1 for length in lengths):
        raise ValueError(f"{op_type} of shape {list(x.shape)} over axes {axes} has an empty "
                         f"signal ({lengths})")
    return normalized, lengths


def _register(op_type, since, kind, complex_input, halved=None):
    @kernel(op_type, domain=DOMAIN, since=since)
    def factory(attrs):
        def fourier(x, axes, signal_size=None):
            if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
                raise ValueError(f"{op_type} needs floating-point data, got {x.dtype}")
            normalized, lengths = _geometry(op_type, x, axes, signal_size, complex_input, halved)
            return _fourier.transform(x, normalized, lengths, kind)

        return fourier

    factory.__name__ = op_type.lower()
    return factory


dft = _register("DFT", 7, "forward", True)
idft = _register("IDFT", 7, "inverse", True)
rdft = _register("RDFT", 9, "real_forward", False, halved="halved")
irdft = _register("IRDFT", 9, "real_inverse", True, halved="restored")
