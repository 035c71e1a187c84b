"""The recurrent cells of OpenVINO IR (LSTMCell, GRUCell, RNNCell) and the two halves the
hoisting pass splits a cell into (engine/hoist.py): ``CellProjection``, the input projection
``X W^T + B``, which needs nothing from the previous step and so runs before the loop on many
steps at once, and ``*CellRecurrence``, the rest. The whole cells are the two in sequence.

Gate orders are OpenVINO's: f, i, c, o (LSTM) and z, r, h (GRU); weights are [gates, inputs].

How a step runs is a measured choice (docs/design.md, "Measured choices"): its gates are made
*batch-major*, [B, G] = ``h R^T``, or *gate-major*, [G, B] = ``R h^T`` (every gate's block
contiguous). Which GEMM is faster depends on the CPU and on the shapes. Either way the projection
is batch-major, [..., B, G], and the states come back [B, H] (views, after a gate-major step).

A step takes ``out=``, where it writes its new h (the first result: the slot of an emitted output
the planner gives it), unless its types differ from h's; it returns that h either way, and the
engine copies one it did not write there.

An LSTM's gates are *arranged* (`ARRANGED_LSTM`): the rows of W, R and B are reordered to f, i, o,
c, so that the three sigmoid gates are one block, and, with the default activations, those rows are
halved, so that one tanh serves all four gates: sigmoid(x) = tanh(x/2)/2 + 1/2. Halving is exact in
binary floating point (bar underflow), so the arranged pre-activations are exactly the plain ones
halved. The arranged weights are made once per weight array (`Prepared`), not per step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ...accel._gate_passes import (
    gru_blend,
    gru_gates,
    gru_product_steps,
    gru_product_tail,
    lstm_product_steps,
    lstm_product_tail,
    lstm_tail,
    product_tanh,
    product_tanh_steps,
)
from ...accel._two_core import ones_product, rows_and_ones
from ...accel.gemm import (
    Prepared,
    PreparedPair,
    matmul,
    matmul_plus,
    products_on_two_cores,
    rows_plus,
    splits_now,
    weight_product,
)
from ...accel.measured import Measured
from ...ir import LOOP_DOMAIN
from .. import _math
from .._gate_orders import ARRANGED_LSTM, OPENVINO_LSTM
from .._ir_attrs import DOMAIN, as_bool, as_float
from ..registry import Recurrence, abilities_of, declare, kernel


def _relu(x, out=None):
    return np.maximum(x, x.dtype.type(0), out=out)


# Every activation takes out= (the cells apply them in place on their gate buffer).
_ACTIVATIONS = {"sigmoid": _math.sigmoid, "tanh": np.tanh, "relu": _relu}


def _activations(attrs, defaults):
    names = attrs.get("activations")
    names = [n.strip() for n in names.split(",")] if names else defaults
    return [_ACTIVATIONS[n.lower()] for n in names]


def _clip(x, limit):
    """Clip pre-activations in place (x is a buffer the cell owns)."""
    return np.clip(x, -limit, limit, out=x) if limit else x


class _Layout:
    """Where a step keeps its gates: batch-major [..., B, G] or gate-major [..., G, B]. (Two of
    them, made at import: a plain class, as a typing.NamedTuple costs an RNN model's load.)"""

    __slots__ = ("gate_major", "name")

    def __init__(self, name: str, gate_major: bool):
        self.name, self.gate_major = name, gate_major

    def oriented(self, x):
        """A [..., B, N] array in this layout's orientation, or back (a view)."""
        return x.swapaxes(-1, -2) if self.gate_major else x

    def prepared(self, w):
        """Weight rows [G, N] as the operand `product` takes (a view: `Prepared` lays a read-only
        weight's out in one aligned copy)."""
        return w if self.gate_major else w.T

    def product(self, h, w, addend=None):
        """The gates from an oriented state and a prepared weight: h R^T or R h^T (a fresh
        array), plus an oriented `addend` if given."""
        if addend is None:
            return matmul(w, h) if self.gate_major else matmul(h, w)
        return matmul_plus(w, h, addend) if self.gate_major else matmul_plus(h, w, addend)


BATCH_MAJOR = _Layout("batch-major gates", False)
GATE_MAJOR = _Layout("gate-major gates", True)
_LAYOUTS = (BATCH_MAJOR, GATE_MAJOR)  # the first is the default (tune=False), but see lstm_step
BLOCKED = "blocked gates"  # an LSTM's third candidate: [..., 4, B, H] (see lstm_step)


@functools.lru_cache(maxsize=64)
def _blocks(gate_major: bool, hidden: int, count: int) -> tuple:
    """Index tuples of gate blocks 0..count-1, `hidden` rows each, along the gate axis."""
    rows = [slice(k * hidden, (k + 1) * hidden) for k in range(count)]
    return tuple((Ellipsis, r, slice(None)) if gate_major else (Ellipsis, r) for r in rows)


def _span(gate_major: bool, lo: int, hi: int) -> tuple:
    return (Ellipsis, slice(lo, hi), slice(None)) if gate_major else (Ellipsis, slice(lo, hi))


def _state_shape(xw, h, *rest):
    return h.shape, xw.dtype.char


def _measured(steps: dict[str, Callable]) -> Measured:
    """The steps (each with its `Prepared` weights as ``.weights``) as one measured choice."""
    def settled(in_use):
        """A layout no state shape uses any more lets go of its copy of the weights."""
        for name, step in steps.items():
            if name not in in_use:
                step.weights.forget()

    # In streaks of two: a timed step reads the state its own layout left (a gate-major step
    # hands on transposed views).
    return Measured(steps, key=_state_shape, streak=2, on_settled=settled,
                    label=lambda key: f"state {list(key[0])} {np.dtype(key[1]).name}")


def _halves_sigmoids(attrs) -> bool:
    """Whether an LSTM's sigmoid rows are halved (its activations are the default ones)."""
    return _activations(attrs, ["sigmoid", "tanh", "tanh"]) == [_math.sigmoid, np.tanh, np.tanh]


# The arranged gates' blocks: the sigmoid gates' (f, i, o) are the first three, the cell's last.
_F_AT, _I_AT, _G_AT, _O_AT = ARRANGED_LSTM
_SIGMOIDS = _G_AT  # (how many blocks the sigmoid gates make, from the first)


def _lstm_arranged(halved: bool) -> Callable:
    """Rows (W, R or B) in OpenVINO's gate order -> a read-only copy in the arranged order, the
    sigmoid gates' rows halved if `halved`."""
    taken = OPENVINO_LSTM.taken_by(ARRANGED_LSTM)

    def arrange(rows):
        blocks = np.split(np.asarray(rows), 4, axis=0)
        arranged = np.concatenate([blocks[k] for k in taken])
        if halved:
            sigmoids = arranged[:_SIGMOIDS * blocks[0].shape[0]]
            sigmoids *= sigmoids.dtype.type(0.5)
        arranged.flags.writeable = False
        return arranged

    return arrange


@kernel("CellProjection", domain=LOOP_DOMAIN, since=1)
def cell_projection(attrs):
    """``X W^T + B[:rows of W]`` batch-major: X [..., B, I] gives [..., B, G], one GEMM for all
    leading dims. `attrs` are the cell's, with ``recurrence`` naming the recurrence op the
    projection feeds: an LSTM's gates come out arranged, as its recurrence expects.

    The bias joins the GEMM as the weight of a column of ones, ``[X 1] [W B]^T``: X is copied
    into the wider rows (a chunk of a sliced input is strided and would be copied anyway), and
    no pass adds B afterwards; where the product runs on two cores (`splits_now`), BLAS adds B
    instead (`matmul_plus`: the product is K long, not K + 1)."""
    arrange = (_lstm_arranged(_halves_sigmoids(attrs))
               if attrs.get("recurrence") == "LSTMCellRecurrence" else (lambda rows: rows))

    def with_bias(w, b):
        b = b[:w.shape[0]]  # a GRU's linear_before_reset bias has a fourth block
        joined = np.concatenate([arrange(w), arrange(b)[:, None]], axis=1)
        joined.flags.writeable = False
        return joined

    weights = PreparedPair(with_bias)
    # Operands of mixed or narrow types add the bias after the GEMM, from weights arranged once.
    arranged_w, arranged_b = Prepared(arrange), Prepared(arrange)
    product = weight_product(transposed=True)

    def project(x, w, b):
        if (x.ndim if isinstance(x, np.ndarray) else np.ndim(x)) < 2:
            raise ValueError(f"a cell's input X must be [batch, input_size], got shape "
                             f"{np.shape(x)}")
        if not (x.dtype == w.dtype == b.dtype and x.dtype.kind == "f"):
            gates = product(np.reshape(x, (-1, x.shape[-1])), arranged_w(w))
            gates += arranged_b(b)[:w.shape[0]]
            return gates.reshape(x.shape[:-1] + (w.shape[0],))
        if splits_now(x.size * w.shape[0]):  # BLAS adds B, copied into each piece's rows
            return rows_plus(x, product.prepared["rows"](arranged_w(w)),
                             arranged_b(b)[:w.shape[0]])
        joined = weights(w, b)
        # Where the product of the rows goes straight to BLAS (`weight_product`'s `rows`,
        # settled), the rows and the product in one native call, its gates shaped [..., G].
        direct = product.direct_weight(joined, x.size // x.shape[-1] if x.shape[-1] else 0,
                                       x.dtype)
        if direct is not None:
            gates = ones_product(x, direct)
            if gates is not None:
                return gates
        rows = rows_and_ones(x)  # (one native call where it takes x)
        if rows is None:
            rows = np.empty(x.shape[:-1] + (x.shape[-1] + 1,), x.dtype)
            rows[..., :-1] = x
            rows[..., -1] = 1
        gates = product(rows.reshape(-1, rows.shape[-1]), joined)  # a fresh [leading * B, G]
        return gates.reshape(x.shape[:-1] + (w.shape[0],))

    return declare(project, measured=abilities_of(product).measured, products=True)


def lstm_step(attrs) -> Measured:
    """The LSTM step after the input projection, from arranged gates: xw [..., B, 4H] (rows
    f, i, o, c), h and c [..., B, H], r [4H, H] as the model has it. Three candidate layouts of
    its gates: batch-major, gate-major, and *blocked*, [..., 4, B, H], where one batched GEMM
    writes each gate's [B, H] block contiguous (no strided passes, at the cost of reading the
    projection's row strided once)."""
    f, g, h_act = _activations(attrs, ["sigmoid", "tanh", "tanh"])
    halved = _halves_sigmoids(attrs)
    clip = as_float(attrs, "clip", 0.0)
    arrange = _lstm_arranged(halved)

    def activate(gates, sigmoids, candidate):
        """The gate activations, in place on the gate buffer (`sigmoids` and `candidate` are
        views of it), unless the whole buffer's affine is left to the caller."""
        if not halved:
            _clip(gates, clip)
            f(sigmoids, out=sigmoids)
            g(candidate, out=candidate)
            return
        if clip:
            _clip(sigmoids, clip / 2)
            _clip(candidate, clip)
        np.tanh(gates, out=gates)

    def update(forget, inp, out_gate, candidate, c, dtype, out=None):
        """(h', c') from the activated gates' blocks (`inp` is overwritten); h' in `out` (in the
        blocks' orientation) when the gates have h's type."""
        c_new = np.multiply(forget, c)
        inp *= candidate
        c_new += inp
        if out is not None and c_new.dtype == dtype:
            h_new = h_act(c_new, out=out)
        else:
            h_new = h_act(c_new)
        h_new *= out_gate
        return h_new.astype(dtype, copy=False), c_new.astype(dtype, copy=False)

    def step_in(layout):
        gate_major = layout.gate_major
        # Batch-major gate blocks are strided [B, H] views, on which a ufunc call costs about
        # twice what it does on a contiguous block: there the sigmoid's affine part is two
        # calls over the whole contiguous buffer (per-column scale and offset) instead.
        whole_buffer = not gate_major and halved
        # (the arranged gates' tanh block: the cell's)
        weights = Prepared(lambda r: (layout.prepared(arrange(r)),
                                      _math.lstm_gate_affine(4 * r.shape[-1], 0, r.dtype, _G_AT)))

        def step(xw, h, c, r, out=None):
            hidden = h.shape[-1]
            prepared, (scale, offset) = weights(r)
            forget, inp, out_at, cand = _blocks(gate_major, hidden, 4)  # (arranged: f, i, o, c)
            if gate_major:
                h, c, xw = h.swapaxes(-1, -2), c.swapaxes(-1, -2), xw.swapaxes(-1, -2)
            gates = layout.product(h, prepared, xw)  # a fresh buffer the gates are made in
            sigmoids = gates[_span(gate_major, 0, _SIGMOIDS * hidden)]
            candidate = gates[cand]
            activate(gates, sigmoids, candidate)
            if halved and whole_buffer:
                gates *= scale
                gates += offset
            elif halved:
                half = gates.dtype.type(0.5)
                sigmoids *= half
                sigmoids += half
            dest = None if out is None else layout.oriented(out)
            h_new, c_new = update(gates[forget], gates[inp], gates[out_at], candidate, c, h.dtype,
                                  dest)
            if gate_major:
                return (out if h_new is dest else h_new.swapaxes(-1, -2)), c_new.swapaxes(-1, -2)
            return h_new, c_new

        step.weights = weights
        return step

    def blocked():
        # R_k^T of each arranged gate block k, [4, H, H]: h [B, H] @ it is [4, B, H].
        weights = Prepared(lambda r: arrange(r).reshape(4, r.shape[0] // 4,
                                                         r.shape[-1]).swapaxes(-1, -2))

        def step(xw, h, c, r, out=None):
            shape = h.shape
            hidden = shape[-1]
            if len(shape) != 2:  # leading dims join the batch: each row's step is its own
                h, c, xw = h.reshape(-1, hidden), c.reshape(-1, hidden), xw.reshape(-1, 4 * hidden)
                out = None  # (a strided destination would not reshape to a view)
            gates = matmul_plus(h, weights(r),  # a fresh buffer
                                xw.reshape(h.shape[0], 4, hidden).transpose(1, 0, 2))
            sigmoids, candidate = gates[:_SIGMOIDS], gates[_G_AT]
            activate(gates, sigmoids, candidate)
            if halved:
                half = gates.dtype.type(0.5)
                sigmoids *= half
                sigmoids += half
            h_new, c_new = update(gates[_F_AT], gates[_I_AT], gates[_O_AT], candidate, c, h.dtype,
                                  out)
            if len(shape) != 2:
                return h_new.reshape(shape), c_new.reshape(shape)
            return h_new, c_new

        step.weights = weights
        if not halved or clip:
            return step
        halves = {}  # dtype -> its 0.5 (a numpy scalar: a Python float costs a conversion a call)

        def plain_step(xw, h, c, r, out=None):
            """`step` with the default activations and no clip on a [B, H] state, xw [B, 4H]
            and r of its type: the same product and passes, without the Python around them
            (a share of a step worth saving where it was measured), as one call
            (`lstm_product_tail`; the batch's rows cut in two for two cores) where it takes the
            operands, else the product and one call for the passes (`lstm_tail`)."""
            dtype = h.dtype
            if h.ndim != 2 or dtype.kind != "f" or not xw.dtype == c.dtype == r.dtype == dtype:
                return step(xw, h, c, r, out)
            prepared = weights(r)
            done = lstm_product_tail(h, prepared, xw, c, out, ARRANGED_LSTM, False,
                                     products_on_two_cores())
            if done is not None:
                return done
            batch, hidden = h.shape
            gates = matmul_plus(h, prepared, xw.reshape(batch, 4, hidden).transpose(1, 0, 2))
            done = lstm_tail(gates, c, out, ARRANGED_LSTM, False)
            if done is not None:
                return done
            np.tanh(gates, out=gates)
            half = halves.get(dtype)
            if half is None:
                half = halves[dtype] = dtype.type(0.5)
            sigmoids = gates[:_SIGMOIDS]
            sigmoids *= half
            sigmoids += half
            c_new = np.multiply(gates[_F_AT], c)
            inp = gates[_I_AT]
            inp *= gates[_G_AT]
            c_new += inp
            h_new = np.tanh(c_new, out=out)
            h_new *= gates[_O_AT]
            return h_new, c_new

        def steps(args, rows, outs, staged):
            """`plain_step` over ``len(rows)`` steps in one call (cyloop/abilities.py
            `Recurrence`): `lstm_product_steps`, the same job step after step (which checks the
            operands' types and shapes itself, and takes states of any layout)."""
            _, h, c, r = args
            return lstm_product_steps(h, weights(r), rows, c, outs, ARRANGED_LSTM, False,
                                      products_on_two_cores(), staged)

        plain_step.weights = weights
        return declare(plain_step, steps_for=lambda *args: steps)

    steps = {layout.name: step_in(layout) for layout in _LAYOUTS}
    if halved and not clip:
        # The blocked form first, so the default (the first runs' and tune=False's): its steps
        # run in one native call, where the others make a few numpy calls a step (measured on
        # the exported LSTMs at B x H = 2 x 8 and 4 x 128: about half the others' time a step).
        steps = {BLOCKED: blocked(), **steps}
    else:
        steps[BLOCKED] = blocked()
    return _measured(steps)


def _gru_in_one_call(attrs) -> bool:
    """Whether a GRU's batch-major step runs as one call (`gru_product_tail`, and many steps
    as `gru_product_steps`): the default activations, no clip."""
    f, g = _activations(attrs, ["sigmoid", "tanh"])
    return f is _math.sigmoid and g is np.tanh and not as_float(attrs, "clip", 0.0)


def gru_step(attrs) -> Measured:
    """The GRU step after the input projection: xw [..., B, 3H] (z, r, h), h [..., B, H],
    r [3H, H], b the cell's bias (its fourth block, with linear_before_reset, is the recurrent
    bias of h)."""
    f, g = _activations(attrs, ["sigmoid", "tanh"])
    clip = as_float(attrs, "clip", 0.0)
    linear_before_reset = as_bool(attrs, "linear_before_reset")
    # The default activations without clip, batch-major on a [B, H] state: the two products and
    # the passes around them as one call (`gru_product_tail`), else the passes as two calls
    # (`gru_gates`, `gru_blend`), where they take the operands.
    one_call = _gru_in_one_call(attrs)

    def step_in(layout):
        def split(r):
            hidden = r.shape[-1]
            return layout.prepared(r[:2 * hidden]), layout.prepared(r[2 * hidden:])

        weights = Prepared(split)
        gate_major = layout.gate_major
        passes = one_call and not gate_major

        def step(xw, h, r, b, out=None):
            hidden = h.shape[-1]
            update_reset, candidate_weights = weights(r)
            if passes and h.ndim == 2 and xw.ndim == 2:
                # The products and the passes as one call (`gru_product_tail`; the batch's rows
                # cut in two for two cores), where it takes the operands.
                cap = _math.sigmoid_cap(h.dtype)
                if cap is not None:
                    done = gru_product_tail(h, update_reset, candidate_weights, xw,
                                            b[3 * hidden:] if linear_before_reset else None,
                                            cap, out, products_on_two_cores())
                    if done is not None:
                        return done
            z_at, reset_at, candidate_at = _blocks(gate_major, hidden, 3)
            h_t, xw_t = layout.oriented(h), layout.oriented(xw)
            zr = layout.product(h_t, update_reset, xw_t[_span(gate_major, 0, 2 * hidden)])
            gated = None
            if passes and h.ndim == 2:
                cap = _math.sigmoid_cap(zr.dtype)
                if cap is not None:  # (reset * h with the gates, where the product takes it)
                    gated = gru_gates(zr, h_t, cap, not linear_before_reset)
            if gated is None:
                f(_clip(zr, clip), out=zr)
            z, reset = zr[z_at], zr[reset_at]
            if linear_before_reset:
                candidate = layout.product(h_t, candidate_weights,
                                           layout.oriented(b[None, 3 * hidden:]))
            else:
                candidate = layout.product(reset * h_t if gated is None else gated,
                                           candidate_weights, xw_t[candidate_at])
            dest = layout.oriented(out) if out is not None and candidate.dtype == h.dtype else None
            h_new = None
            if gated is not None:
                h_new = gru_blend(candidate, h_t, zr, dest,
                                  xw_t if linear_before_reset else None)
            if h_new is None:
                if linear_before_reset:
                    candidate *= reset
                    candidate += xw_t[candidate_at]
                g(_clip(candidate, clip), out=candidate)
                # (1 - z) * candidate + z * h
                h_new = np.subtract(h_t, candidate, out=dest)
                h_new *= z
                h_new += candidate
            return out if dest is not None else layout.oriented(h_new).astype(h.dtype, copy=False)

        def steps(args, rows, outs, staged):
            """`step` over ``len(rows)`` steps in one call (cyloop/abilities.py `Recurrence`):
            `gru_product_steps`, `gru_product_tail`'s job step after step."""
            _, h, r, b = args
            cap = _math.sigmoid_cap(h.dtype)
            if cap is None:
                return None
            update_reset, candidate_weights = weights(r)
            # (the call checks the operands' types and shapes itself, and takes any layout)
            done = gru_product_steps(h, update_reset, candidate_weights, rows,
                                     b[3 * h.shape[-1]:] if linear_before_reset else None, cap,
                                     outs, products_on_two_cores(), staged)
            return None if done is None else (done,)

        step.weights = weights
        return declare(step, steps_for=(lambda *args: steps) if passes else (lambda *args: None))

    return _measured({layout.name: step_in(layout) for layout in _LAYOUTS})


def _rnn_in_one_call(attrs) -> bool:
    """Whether an RNN's batch-major step runs as one call (`product_tanh`, and many steps as
    `product_tanh_steps`): tanh, no clip."""
    (f,) = _activations(attrs, ["tanh"])
    return f is np.tanh and not as_float(attrs, "clip", 0.0)


def rnn_step(attrs) -> Measured:
    """The RNN step after the input projection: xw [..., B, H], h [..., B, H], r [H, H]."""
    (f,) = _activations(attrs, ["tanh"])
    clip = as_float(attrs, "clip", 0.0)
    in_one_call = _rnn_in_one_call(attrs)

    def step_in(layout):
        weights = Prepared(layout.prepared)
        # Batch-major, tanh without clip on a [B, H] state: the product and the tanh as one call
        # (`product_tanh`; the batch's rows cut in two for two cores), where it takes them.
        one_call = not layout.gate_major and in_one_call

        def step(xw, h, r, out=None):
            prepared = weights(r)
            if one_call and h.ndim == 2:
                done = product_tanh(h, prepared, xw, out, products_on_two_cores())
                if done is not None:
                    return done
            pre = layout.product(layout.oriented(h), prepared, layout.oriented(xw))
            if out is not None and pre.dtype == h.dtype:
                f(_clip(pre, clip), out=layout.oriented(out))
                return out
            return layout.oriented(f(_clip(pre, clip), out=pre)).astype(h.dtype, copy=False)

        def steps(args, rows, outs, staged):
            """`step` over ``len(rows)`` steps in one call (cyloop/abilities.py `Recurrence`):
            `product_tanh_steps`, `product_tanh`'s job step after step."""
            _, h, r = args
            # (the call checks the operands' types and shapes itself, and takes any layout)
            done = product_tanh_steps(h, weights(r), rows, outs, products_on_two_cores(),
                                      staged)
            return None if done is None else (done,)

        step.weights = weights
        return declare(step,
                       steps_for=(lambda *args: steps) if one_call else (lambda *args: None))

    return _measured({layout.name: step_in(layout) for layout in _LAYOUTS})


def showing(fn, step: Measured, **abilities):
    """`fn` declaring `step`'s measured choice as its `measured` ability (the engine fixes it
    when tuning is off; the plan shows it), and `abilities` besides."""
    # (its products follow the loop's choice of cores: `accel.gemm.matmul`)
    return declare(fn, measured=step, products=True, **abilities)


# The recurrences and cells write their new h (their first result) into ``out=`` (see above).

@kernel("LSTMCellRecurrence", domain=LOOP_DOMAIN, since=1, multi=True, out=True)
def lstm_recurrence(attrs, n_outputs):
    step = lstm_step(attrs)
    if n_outputs == 2:  # (h', c') as the step returns them: no wrapper call per step
        # (xw, h, c, r) -> (h', c'); its steps, the chosen candidate's
        return showing(step, step, recurrence=Recurrence(per_step=0, feedback=(1, 2)),
                       steps_for=step.steps_for)
    return showing(lambda xw, h, c, r, out=None: step(xw, h, c, r, out=out)[:n_outputs], step)


@kernel("GRUCellRecurrence", domain=LOOP_DOMAIN, since=1, multi=True, out=True)
def gru_recurrence(attrs, n_outputs):
    step = gru_step(attrs)

    def run(xw, h, r, b, out=None):
        return (step(xw, h, r, b, out=out),)[:n_outputs]

    if not _gru_in_one_call(attrs):  # (no candidate has steps)
        return showing(run, step)
    # (xw, h, r, b) -> (h',); its steps, the chosen candidate's: `Measured.steps_for`
    return showing(run, step, recurrence=Recurrence(per_step=0, feedback=(1,)),
                   steps_for=step.steps_for)


@kernel("RNNCellRecurrence", domain=LOOP_DOMAIN, since=1, multi=True, out=True)
def rnn_recurrence(attrs, n_outputs):
    step = rnn_step(attrs)

    def run(xw, h, r, out=None):
        return (step(xw, h, r, out=out),)[:n_outputs]

    if not _rnn_in_one_call(attrs):  # (no candidate has steps)
        return showing(run, step)
    # (xw, h, r) -> (h',); its steps, the chosen candidate's: `Measured.steps_for`
    return showing(run, step, recurrence=Recurrence(per_step=0, feedback=(1,)),
                   steps_for=step.steps_for)


def projection_for(recurrence, attrs):
    """The input projection of a cell whose recurrence op is `recurrence` (with its gates laid
    out as that recurrence expects)."""
    return cell_projection(dict(attrs, recurrence=recurrence))


@kernel("LSTMCell", domain=DOMAIN, since=1, multi=True, out=True, batch="cell",
        cell=("LSTMCellRecurrence", 3, 5))
@kernel("LSTMCell", domain=DOMAIN, since=4, multi=True, out=True, batch="cell",
        cell=("LSTMCellRecurrence", 3, 5))
def lstm_cell(attrs, n_outputs):
    """Gates in OpenVINO's f, i, c, o order. LSTMCell-1's peephole input is refused at load time
    (by the frontend); without it the two versions compute the same."""
    project, step = projection_for("LSTMCellRecurrence", attrs), lstm_step(attrs)
    return showing(lambda x, h, c, w, r, b, out=None:
                   step(project(x, w, b), h, c, r, out=out)[:n_outputs], step)


@kernel("GRUCell", domain=DOMAIN, since=3, multi=True, out=True, batch="cell",
        cell=("GRUCellRecurrence", 2, 4))
def gru_cell(attrs, n_outputs):
    """Gates in OpenVINO's z, r, h order; ``linear_before_reset`` as in ONNX."""
    project, step = projection_for("GRUCellRecurrence", attrs), gru_step(attrs)
    return showing(lambda x, h, w, r, b, out=None:
                   (step(project(x, w, b), h, r, b, out=out),)[:n_outputs], step)


@kernel("RNNCell", domain=DOMAIN, since=1, multi=True, out=True, batch="cell",
        cell=("RNNCellRecurrence", 2, 4))
def rnn_cell(attrs, n_outputs):
    project, step = projection_for("RNNCellRecurrence", attrs), rnn_step(attrs)
    return showing(lambda x, h, w, r, b, out=None:
                   (step(project(x, w, b), h, r, out=out),)[:n_outputs], step)
