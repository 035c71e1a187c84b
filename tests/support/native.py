"""Marks for the tests of a native path (see cyloop/accel/native.py): each skips, saying why,
where its path is off here (one it turned off itself, or ``CYLOOP_NATIVE_OFF``). The values
those paths compute are numpy's; the tests of everything else assert them wherever they run."""

import pytest

from cyloop.accel import _gate_passes, gemm


def _steps_off() -> str | None:
    """Why a recurrent step's native calls (the gate passes around a product through numpy's
    bundled BLAS, a step or many steps a call) decline everything here, or None."""
    if _gate_passes.status() is not None:
        return f"the gate passes are off here: {_gate_passes.status()}"
    if gemm.blas_status() is not None:
        return f"products through numpy's bundled BLAS are off here: {gemm.blas_status()}"
    return None


# The gate passes on numpy's ufunc loops.
gate_passes = pytest.mark.skipif(_gate_passes.status() is not None,
                                 reason=f"the gate passes are off here: {_gate_passes.status()}")
# A recurrent step's native calls: the gate passes and the products through numpy's BLAS.
steps = pytest.mark.skipif(_steps_off() is not None, reason=_steps_off() or "")
