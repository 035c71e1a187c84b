"""A run computes the values ONNX and OpenVINO define where numpy would warn (the log of 0 is
-inf, 0 / 0 and inf - inf are NaN, the square root of a negative is NaN) and says nothing:
numpy's floating-point warnings are off while a model runs (docs/design.md, "Errors and limits").
The caller's own numpy settings are left as they were, outside the run and on other threads.

numpy keeps that setting in a context variable. ``np.errstate`` sets and resets it with about
1 µs of Python around the two calls, half of a one-node model's run; where numpy's private
module has the variable and the maker of its value (`_extobj_contextvar`, `_make_extobj`: numpy
2.0 to 2.5 at least), a run sets and resets it directly, once the first use has checked that
doing so silences a warning and restores the setting. Elsewhere, or with
``CYLOOP_NATIVE_OFF=float-state``, `np.errstate` does it.
"""

from __future__ import annotations

import warnings

import numpy as np

from .native import native_off

__all__ = ["direct", "quiet", "restore", "status"]


def _direct():
    """(context variable, its "ignore everything" value) where setting it directly silences
    numpy's warnings and resetting restores the caller's setting; else why not (a str)."""
    if "float-state" in native_off():
        return "turned off (CYLOOP_NATIVE_OFF)"
    try:
        from numpy._core import _multiarray_umath as umath

        variable, ignore = umath._extobj_contextvar, umath._make_extobj(all="ignore")
    except (ImportError, AttributeError, TypeError) as e:
        return f"numpy has no context variable cyloop can set ({type(e).__name__})"
    before = np.geterr()
    token = variable.set(ignore)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            np.log(np.zeros(1))
            np.divide(np.zeros(1), np.zeros(1))
        silent = set(np.geterr().values()) == {"ignore"}
    except RuntimeWarning:
        silent = False
    finally:
        variable.reset(token)
    if not silent:
        return "setting numpy's context variable does not silence its warnings"
    if np.geterr() != before:
        return "resetting numpy's context variable does not restore the setting"
    return variable, ignore


_DIRECT = _direct()


def direct():
    """(numpy's context variable, its value with every warning off) where a run sets it
    directly (the engine's C code does, as `quiet` does), else None."""
    return None if isinstance(_DIRECT, str) else _DIRECT


def status() -> str | None:
    """None where runs set numpy's context variable directly, else why `np.errstate` does."""
    return _DIRECT if isinstance(_DIRECT, str) else None


if isinstance(_DIRECT, str):
    def quiet():
        """Turn numpy's floating-point warnings off in this context; returns what `restore`
        takes to turn them back."""
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def restore(token) -> None:
        """Undo the `quiet` call that returned `token`."""
        token.__exit__(None, None, None)
else:
    _VARIABLE, _IGNORE = _DIRECT

    def quiet():
        """Turn numpy's floating-point warnings off in this context; returns what `restore`
        takes to turn them back."""
        return _VARIABLE.set(_IGNORE)

    def restore(token) -> None:
        """Undo the `quiet` call that returned `token`."""
        _VARIABLE.reset(token)
