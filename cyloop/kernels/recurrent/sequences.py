"""OpenVINO's recurrent sequence layers, LSTMSequence-5, GRUSequence-5 and RNNSequence-5: the
whole of an RNN layer in one op, as `openvino.convert_model` writes PyTorch's nn.LSTM / nn.GRU /
nn.RNN and ONNX's LSTM / GRU / RNN.

Each direction runs the cell of cells.py over the sequence: the input projection of every step
at once (one GEMM: the hoisting a TensorIterator's cell gets), then the recurrence step by step,
with the same measured choices. Where every element runs every step, the steps from the first
its step's chosen formulation takes on (one with `steps`: cyloop/abilities.py `Recurrence`) run in
one call (`lstm_product_steps`, `gru_product_steps`, `product_tanh_steps`; docs/performance.md
has what that gains). Shapes, with D
directions (2 if bidirectional):

    X [B, T, I], initial states [B, D, H], sequence_lengths [B], W [D, G*H, I], R [D, G*H, H],
    B [D, G*H] (GRU with linear_before_reset: [D, 4*H]) -> Y [B, D, T, H], final states [B, D, H]

Batch element b runs only its first ``sequence_lengths[b]`` steps: a reverse direction runs them
from the last of those back to the first, Y is zero past them, and the final states are those
after them (ONNX's semantics, which OpenVINO follows); an element of length 0 ends in zero states
(OpenVINO's reference implementation and plugin), not its initial ones.
"""

from __future__ import annotations

from contextlib import nullcontext
from time import perf_counter

import numpy as np

from ...accel._two_core import products_split
from ...accel.gemm import (
    blas_candidate,
    is_constant,
    no_choice,
    product_candidates,
    products_decided,
    set_products_on_two_cores,
)
from ...accel.measured import Measured, untimed
from ...tuning import RUN_ROUNDS
from .._ir_attrs import DOMAIN
from ..registry import kernel
from .cells import gru_step, lstm_step, projection_for, rnn_step, showing


def _directions(attrs, count):
    direction = str(attrs.get("direction", "forward")).lower()
    expected = 2 if direction == "bidirectional" else 1
    if direction not in ("forward", "reverse", "bidirectional") or count != expected:
        raise ValueError(f"direction {direction!r} needs weights for {expected} direction(s), "
                         f"got {count}")
    return [direction == "reverse" or (direction == "bidirectional" and d == 1)
            for d in range(count)]


def _lengths(lengths, batch, steps):
    lengths = np.asarray(lengths).reshape(-1)
    if lengths.shape != (batch,) or lengths.dtype.kind not in "iu":
        raise ValueError(f"sequence_lengths must be {batch} integers, got "
                         f"{lengths.dtype} {list(lengths.shape)}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > steps):
        raise ValueError(f"sequence_lengths must lie in [0, {steps}], got {lengths.tolist()}")
    return lengths.astype(np.intp)


class _Directions:
    """A layer's weights split by direction, ``w[d]``, as the same view objects call after call
    while the same constant `w` comes back: what the cells derive from a read-only weight is
    recalled by its identity (accel/gemm.py `Prepared`), which a view made anew each call would
    miss. Views of anything else (a weight fed to the model: a caller's array, which a kernel
    does not keep alive) are made each call."""

    def __init__(self):
        self._last = (None, ())

    def __call__(self, w: np.ndarray) -> tuple:
        kept, views = self._last
        if kept is w:
            return views
        views = tuple(w[d] for d in range(w.shape[0]))
        if is_constant(w):
            self._last = (w, views)
        return views

    def keeps(self, w: np.ndarray) -> bool:
        """Whether the views it hands out are those it keeps for `w` (a constant)."""
        return self._last[0] is w


def _run(states, x, lengths, w, b, reverses, project, recurrence, arguments, states_out, r,
         y=None, finals=None):
    """Run every direction. `states`: the initial states [B, D, H] (h, and c for an LSTM);
    `lengths`: each element's sequence length (None: every element runs every step); `w`, `r`,
    `b`: the input weights, recurrent weights and biases of each direction (sequences of D);
    `reverses`: whether each direction runs in reverse (`_directions`); `project(x, w[d], b[d])`
    makes every step's input projection; `recurrence` is the cell's measured step, taking
    ``arguments(xw_t, states, r[d], b[d])`` and giving what `states_out` makes the new states of.
    Returns (Y, final states); Y is `y` if given (a zeroed [B, D, T, H] array or view, of the
    states' type), else a fresh one; the final states likewise `finals` ([B, D, H] arrays or
    views) if given, else arrays of their own (with one direction whose every element ran every
    step, on states of X's type: the last step's h copied out of Y, whose last row holds it, and
    views of its other states, which no one else holds).

    Where every element runs every step, ``recurrence.steps_for(*args)`` may offer, for the step
    at hand, ``steps(args, xs, outs, staged)``: the rest of the direction's steps in one call (xs
    [S, B, G], each h' into outs[s], [S, B, H]; the cell's `Recurrence`, staged as each step one
    at a time is: h' made contiguous, then copied into its slot of Y), the final states or None
    where it declines; or it answers None: not now (the step's formulations are on trial), or,
    where ``recurrence.settled(*args)``, not in this run. After a decline or a settled None
    nothing more is asked in the run. The values are those of the steps one at a time."""
    batch, steps = x.shape[0], x.shape[1]
    full = lengths is None
    if not full:
        lengths = _lengths(lengths, batch, steps)
        full = bool(np.all(lengths == steps))
        rows = np.arange(batch)
    hidden = states[0].shape[-1]
    dtype = x.dtype
    if dtype is not states[0].dtype or not dtype.isnative:
        dtype = np.result_type(x, states[0])
    if y is None:
        y = np.zeros((batch, len(reverses), steps, hidden), dtype)
    # (the last step's states as the final ones: see above)
    own = finals is None and full and steps > 0 and len(reverses) == 1 \
        and dtype is states[0].dtype
    if finals is None and not own:
        finals = [np.empty((batch, len(reverses), hidden), dtype) for _ in states]
    asking = full
    for d, reverse in enumerate(reverses):
        xw = project(x, w[d], b[d])  # [B, T, G]: every step's input projection, one GEMM
        current = [s[:, d] for s in states]
        r_d, b_d = r[d], b[d]
        for k in range(steps):
            if full:
                at = steps - 1 - k if reverse else k
                args = arguments(xw[:, at], current, r_d, b_d)
                if asking:
                    many = recurrence.steps_for(*args)
                    if many is not None:  # (the rest, in step order: ``at`` down to 0 if reverse)
                        if at == 0 and not reverse:  # (all of them: no slice to make)
                            rest_x, rest_y = xw, y[:, d]
                        else:
                            order = slice(at, None, -1) if reverse else slice(at, None)
                            rest_x, rest_y = xw[:, order], y[:, d, order]
                        done = many(args, rest_x.transpose(1, 0, 2), rest_y.transpose(1, 0, 2),
                                    True)
                        if done is not None:
                            current = done
                            break
                        asking = False
                    elif recurrence.settled(*args):
                        asking = False
                current = states_out(recurrence(*args))
                y[:, d, at] = current[0]
                continue
            active = k < lengths  # [B]: the elements still inside their sequence
            if not active.any():
                break
            at = np.where(active, lengths - 1 - k if reverse else k, 0)
            new = states_out(recurrence(*arguments(xw[rows, at], current, r_d, b_d)))
            keep = active[:, None]
            current = [np.where(keep, n, s) for n, s in zip(new, current)]
            y[rows[active], d, at[active]] = new[0][active]
        if own:
            finals = [current[0][:, None].copy()] + [value[:, None] for value in current[1:]]
            break
        for final, value in zip(finals, current):
            final[:, d] = value
            # No step run: zero states, as OpenVINO's reference has it.
            if lengths is not None:
                final[lengths == 0, d] = 0
            elif steps == 0:
                final[:, d] = 0
    return y, finals


class _Cores:
    """Where a layer's matrix products run where no loop decides it (a layer outside loops): one
    of `product_candidates`, a measured choice timed a call at a time (per step) as a loop's is a
    run at a time (engine/_core.pyx `LoopDriver.products`): two cores' calls first, the default's,
    until they pay for a trial; then each candidate a warm-up call (the default has had its) and two
    timed ones. Only the calls before the trial opens (or, opened at once, its first call) let
    the layer's own trials (its step's formulations) take samples. A layer whose products never
    split in pieces (too small) drops the choice. `fix` keeps one (tune=False: BLAS's)."""

    def __init__(self):
        candidates = product_candidates()
        self.measured = None if candidates is None else \
            Measured(candidates, rounds=RUN_ROUNDS, unit="us/step", consecutive=True, extend=False)
        self.small = False  # dropped: its products are too small to split

    def __call__(self, run, steps: int):
        """``run()`` with its products where this choice puts them."""
        measured = self.measured
        if measured is None or products_decided():
            return run()
        name, trial = measured.pick(None)
        two = measured.candidates[name]
        quiet = trial is not None and trial.open and (not two or name in trial.warm)
        split = products_split()
        previous = set_products_on_two_cores(two)
        start = perf_counter()
        try:
            with untimed() if quiet else nullcontext():
                result = run()
        finally:
            set_products_on_two_cores(previous)
        if trial is not None and steps > 0:
            measured.report(trial, name, (perf_counter() - start) / steps)
        if trial is not None and two and steps > 0 and products_split() == split:
            self.measured = None  # (too small to split: no choice; BLAS's from now on)
            self.small = True
        return result

    def declined(self) -> tuple[str, str]:
        """Where the products run with no choice (`measured` is None), and why."""
        if self.small:
            return blas_candidate(), "its products are too small to split here"
        return no_choice()

    def describe(self) -> str:
        if self.measured is None:
            return ": ".join(self.declined())
        return self.measured.describe()

    def fix(self, name: str | None = None) -> None:
        if self.measured is not None:
            self.measured.fix(name if name is not None else
                              next(n for n, on in self.measured.candidates.items() if not on))


# Each cell's recurrence op, its measured step, and how the step takes a direction's operands.
_CELLS = {
    "lstm": ("LSTMCellRecurrence", lstm_step, lambda xw_t, states, r, b: (xw_t, *states, r)),
    "gru": ("GRUCellRecurrence", gru_step, lambda xw_t, states, r, b: (xw_t, states[0], r, b)),
    "rnn": ("RNNCellRecurrence", rnn_step, lambda xw_t, states, r, b: (xw_t, states[0], r)),
}


def sequence_layer(cell: str, attrs):
    """A layer of `cell` ("lstm", "gru" or "rnn") with OpenVINO's attributes and gate orders
    (f, i, c, o; z, r, h): ``(run, step, cores)``, where ``run(x, states, lengths, w, r, b,
    y=None, finals=None)`` makes (Y, final states) as `_run` does (`y` and `finals`, if given,
    arrays or views they are written into: another layout's outputs, seen so), `step` is the
    cell's measured step and `cores` where its products run outside loops (`_Cores`; both for
    the plan and tune=False). ONNX's LSTM, GRU and RNN run on it too (kernels/onnx/rnn.py)."""
    op, make_step, arguments = _CELLS[cell]
    project, recurrence = projection_for(op, attrs), make_step(attrs)
    states_out = tuple if cell == "lstm" else (lambda h: (h,))  # (an LSTM's step gives (h, c))
    cores = _Cores()
    w_of, r_of, b_of = _Directions(), _Directions(), _Directions()
    reverses_of = {}  # weights' directions -> `_directions`' answer (the attributes' only)
    # The last three weights `_Directions` kept views of (constants all), with those views and
    # their directions: the same three call after call take them with no call.
    last = [None]

    def run(x, states, lengths, w, r, b, y=None, finals=None):
        known = last[0]
        if known is not None and known[0] is w and known[1] is r and known[2] is b:
            ws, rs, bs, reverses = known[3]
        else:
            ws, rs, bs = w_of(w), r_of(r), b_of(b)
            reverses = reverses_of.get(len(ws))
            if reverses is None:
                reverses = reverses_of[len(ws)] = _directions(attrs, len(ws))
            if w_of.keeps(w) and r_of.keeps(r) and b_of.keeps(b):
                last[0] = (w, r, b, (ws, rs, bs, reverses))
        if cores.measured is None:  # (no choice of cores: the run as it is, no wrapper)
            return _run(states, x, lengths, ws, bs, reverses, project, recurrence, arguments,
                        states_out, rs, y, finals)
        return cores(lambda: _run(states, x, lengths, ws, bs, reverses, project, recurrence,
                                  arguments, states_out, rs, y, finals),
                     x.shape[1] * len(ws))

    return run, recurrence, cores


@kernel("LSTMSequence", domain=DOMAIN, since=5, multi=True)
def lstm_sequence(attrs, n_outputs):
    """LSTMSequence-5 (gates f, i, c, o): (X, H0, C0, sequence_lengths, W, R, B) -> (Y, Ho,
    Co)."""
    layer, step, cores = sequence_layer("lstm", attrs)

    def run(x, h0, c0, lengths, w, r, b):
        y, (h, c) = layer(x, [h0, c0], lengths, w, r, b)
        return (y, h, c)[:n_outputs]

    return showing(run, step, cores=cores)


@kernel("GRUSequence", domain=DOMAIN, since=5, multi=True)
def gru_sequence(attrs, n_outputs):
    """GRUSequence-5 (gates z, r, h; ``linear_before_reset`` as in GRUCell): (X, H0,
    sequence_lengths, W, R, B) -> (Y, Ho)."""
    layer, step, cores = sequence_layer("gru", attrs)

    def run(x, h0, lengths, w, r, b):
        y, (h,) = layer(x, [h0], lengths, w, r, b)
        return (y, h)[:n_outputs]

    return showing(run, step, cores=cores)


@kernel("RNNSequence", domain=DOMAIN, since=5, multi=True)
def rnn_sequence(attrs, n_outputs):
    """RNNSequence-5: (X, H0, sequence_lengths, W, R, B) -> (Y, Ho)."""
    layer, step, cores = sequence_layer("rnn", attrs)

    def run(x, h0, lengths, w, r, b):
        y, (h,) = layer(x, [h0], lengths, w, r, b)
        return (y, h)[:n_outputs]

    return showing(run, step, cores=cores)
