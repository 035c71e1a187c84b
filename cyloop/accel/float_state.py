"""A run computes the values ONNX and OpenVINO define where numpy would warn (the log of 0 is
-inf, 0 / 0 and inf - inf are NaN, the square root of a negative is NaN) and says nothing: within
a run, each floating-point error numpy would warn of (its default) is ignored (docs/design.md,
"Errors and limits"). What the caller set otherwise holds: an error set to raise raises (as an
`ExecutionError` naming the node), one set to call its function calls it. Outside the run, and
on other threads, nothing changes.

numpy keeps that setting in a context variable. ``np.errstate`` sets and resets it with a
context manager's Python around the two calls, a large part of a one-node model's run
(docs/performance.md, "Measured effects of the engine's paths"); where numpy's private
module has the variable and the maker of its value (`_extobj_contextvar`, `_make_extobj`: numpy
2.0 to 2.5 at least), a run sets and resets it directly, the quiet value made once for each
setting the caller had (`QUIET`), once the first use has checked that doing so silences a
warning and restores the setting. Elsewhere, or with ``CYLOOP_NATIVE_OFF=float-state``,
`np.errstate` does it.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..tuning import QUIET_KEEP
from .native import native_off

__all__ = ["QUIET", "direct", "quiet", "quiet_for", "restore", "status"]

# numpy's setting (its context variable's value) -> the same with each "warn" made "ignore"
# (most programs have one setting, numpy's default; a program making a new one per call would
# fill this: it stops at `QUIET_KEEP`, and quiet values are made anew past it).
QUIET: dict = {}


def _ignoring_warnings() -> dict:
    """The changes that make numpy's current setting ignore what it would warn of."""
    return {name: "ignore" for name, mode in np.geterr().items() if mode == "warn"}


def _direct():
    """(numpy's context variable, the maker of its values) where setting the variable directly
    silences numpy's warnings and resetting it restores the caller's setting; else why not (a
    str)."""
    if "float-state" in native_off():
        return "turned off (CYLOOP_NATIVE_OFF)"
    try:
        from numpy._core import _multiarray_umath as umath

        variable, make = umath._extobj_contextvar, umath._make_extobj
        before = np.geterr()
        token = variable.set(make(**_ignoring_warnings()))
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        return f"numpy has no context variable cyloop can set ({type(e).__name__})"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            np.log(np.zeros(1))
            np.divide(np.zeros(1), np.zeros(1))
        silent = "warn" not in np.geterr().values()
    except RuntimeWarning:
        silent = False
    finally:
        variable.reset(token)
    if not silent:
        return "setting numpy's context variable does not silence its warnings"
    if np.geterr() != before:
        return "resetting numpy's context variable does not restore the setting"
    return variable, make


_DIRECT = _direct()


def direct():
    """numpy's context variable where a run sets it directly (the engine's C code does, with
    `QUIET` and `quiet_for`), else None."""
    return None if isinstance(_DIRECT, str) else _DIRECT[0]


def status() -> str | None:
    """None where runs set numpy's context variable directly, else why `np.errstate` does."""
    return _DIRECT if isinstance(_DIRECT, str) else None


def quiet_for(current):
    """numpy's setting `current` (its context variable's value, the one in effect) with each
    error it would warn of ignored; kept in `QUIET`."""
    value = _DIRECT[1](**_ignoring_warnings())
    if len(QUIET) < QUIET_KEEP:
        QUIET[current] = value
    return value


if isinstance(_DIRECT, str):
    def quiet():
        """Ignore, in this context, the floating-point errors numpy would warn of; returns what
        `restore` takes to undo it."""
        state = np.errstate(**_ignoring_warnings())
        state.__enter__()
        return state

    def restore(token) -> None:
        """Undo the `quiet` call that returned `token`."""
        token.__exit__(None, None, None)
else:
    _VARIABLE = _DIRECT[0]

    def quiet():
        """Ignore, in this context, the floating-point errors numpy would warn of; returns what
        `restore` takes to undo it."""
        current = _VARIABLE.get()
        value = QUIET.get(current)
        return _VARIABLE.set(quiet_for(current) if value is None else value)

    def restore(token) -> None:
        """Undo the `quiet` call that returned `token`."""
        _VARIABLE.reset(token)
