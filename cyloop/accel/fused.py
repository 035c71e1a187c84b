"""Kernels of the nodes the engine's rewriting passes (engine/fuse.py, engine/stacking.py) put in
place of a pattern of ordinary ops: each computes what the nodes it replaces computed, to
rounding, in fewer numpy passes."""

import weakref

import numpy as np

from ..ir import LOOP_DOMAIN
from ..kernels.registry import Recurrence, abilities_of, declare, kernel
from .gemm import (
    Prepared,
    _mode,
    matmul_plus,
    plus,
    product_key,
    product_label,
    products_on_two_cores,
    rows_apart,
    splits_now,
    weight_product,
)
from .measured import Measured

_NDARRAY = np.ndarray
# The native passes some kernels here call. This module loads with the first fused node a model
# has, most often an AtLeast or a ProductPlus that calls none of them, so each module of them is
# imported at the first call of one of its passes (`_at_first_call`); and the kernels' shared
# maths (`kernels._math`) by the factories of the LSTM and GRU steps, which use it.


def _at_first_call(module: str, name: str):
    """A stand-in for the native pass `name` of `module` (in this package) that imports it at its
    first call and puts it in its own place here, so that later calls go straight to it (unless
    something else took the place meanwhile: a test's spy)."""

    def first_call(*args, **kwargs):
        from importlib import import_module

        function = getattr(import_module(f".{module}", __package__), name)
        if globals().get(name) is first_call:
            globals()[name] = function
        return function(*args, **kwargs)

    first_call.__name__ = first_call.__qualname__ = name
    return first_call


squared_distances = _at_first_call("_distances", "squared_distances")
gru_product_steps = _at_first_call("_gate_passes", "gru_product_steps")
gru_product_tail = _at_first_call("_gate_passes", "gru_product_tail")
lstm_product_steps = _at_first_call("_gate_passes", "lstm_product_steps")
lstm_product_tail = _at_first_call("_gate_passes", "lstm_product_tail")
lstm_tail = _at_first_call("_gate_passes", "lstm_tail")
product_tanh = _at_first_call("_gate_passes", "product_tanh")
product_tanh_steps = _at_first_call("_gate_passes", "product_tanh_steps")


class _AtLeast:
    """A value broadcast to at least a shape, as OpenVINO's ``Broadcast(s, Maximum(ShapeOf(s),
    shape))`` does (numpy broadcasting throughout; engine/fuse.py `_match_at_least`): the value
    itself where its shape covers `shape`, the usual case, else its broadcast copy. Raises as
    the Maximum or the Broadcast would."""

    def __init__(self, shape):
        self.shape = np.asarray(shape, np.int64).reshape(-1)
        self.targets = {}  # a value's shape -> its broadcast shape

    def target(self, shape: tuple) -> tuple:
        found = self.targets.get(shape)
        if found is None:
            found = tuple(int(d) for d in np.maximum(np.array(shape, np.int64), self.shape))
            if len(self.targets) < 16:  # not one entry per shape of an ever-changing series
                self.targets[shape] = found
        return found

    def covers(self, shape: tuple | None) -> bool:
        """Whether a value of `shape` is left as it is (None, or a shape the Maximum refuses:
        no)."""
        try:
            return shape is not None and self.target(shape) == shape
        except ValueError:
            return False

    def __call__(self, value):
        shape = np.shape(value)
        target = self.target(shape)
        return value if target == shape else np.array(np.broadcast_to(value, target))


def _at_least(attrs, key="at_least"):
    """The `_AtLeast` of a fused node's `key` attribute, or None where it has none."""
    return _AtLeast(attrs[key]) if key in attrs else None


@kernel("AtLeast", domain=LOOP_DOMAIN, since=1)
def at_least(attrs):
    """``s -> s`` broadcast to at least ``shape``: OpenVINO's ``Broadcast(s, Maximum(ShapeOf(s),
    shape))``, which convert_model writes for jax2onnx's bias broadcast; s itself (no copy)
    where its shape covers ``shape``."""
    return _AtLeast(attrs["shape"])


def _gate_order(attrs) -> "LstmGateOrder":  # noqa: F821 - (kernels._gate_orders')
    """A fused LSTM node's ``blocks``: the parts of its gate axis holding f, i, g, o, in the
    order the matched graph had them (engine/fuse.py)."""
    from ..kernels import LstmGateOrder

    return LstmGateOrder(*(int(k) for k in attrs["blocks"]))


@kernel("LSTMGates", domain=LOOP_DOMAIN, since=1, multi=True)
def lstm_gates(attrs, n_outputs):
    """``(pre, c) -> (h', c')``: pre split in 4 equal parts along ``axis``; ``blocks`` gives the
    parts holding f, i, g, o; f, i, o go through a sigmoid and g through tanh; c' = f c + i g and
    h' = o tanh(c'), broadcasting as the Mul and Add nodes did. One tanh activates every gate
    (see `kernels.lstm_gate_affine`). A gate axis that does not split in 4 equal parts (an uneven
    opset-18 Split) runs the replaced nodes' arithmetic as written. ``part``, if given, is the
    size of each part the Split gave (jax2onnx gives them): an axis of another length fails, as
    the Split did; ``even``, that the axis must split in 4 equal parts (OpenVINO's Split
    refuses it otherwise). ``at_least``, if given, is the shape pre is broadcast to at least
    first (`_AtLeast`)."""
    axis = int(attrs["axis"])
    from ..kernels import lstm_gate_affine, sigmoid

    f_at, i_at, g_at, o_at = _gate_order(attrs)
    part, even = attrs.get("part"), bool(attrs.get("even"))
    widen = _at_least(attrs)

    def as_written(pre, c, index, step):
        parts = []
        for k in range(4):
            index[axis] = slice(k * step, (k + 1) * step if k < 3 else None)
            parts.append(pre[tuple(index)])
        f, i, o = (sigmoid(parts[k]) for k in (f_at, i_at, o_at))
        c_new = f * c + i * np.tanh(parts[g_at])
        return o * np.tanh(c_new), c_new

    def layout(shape, dtype):
        """The gate affine and the index of f, i, g, o in an activated buffer of `shape`, or
        None if the gate axis does not split in 4 equal parts."""
        length = shape[axis]
        if part is not None and length != 4 * part:
            raise ValueError(f"Split: 4 parts of {part} do not make axis {axis}'s {length}")
        if length % 4:
            if even:
                raise ValueError(f"Split: an axis of {length} does not split into 4 equal parts")
            return None
        trailing = len(shape) - 1 - (axis % len(shape))
        scale, offset = lstm_gate_affine(length, trailing, dtype, g_at)
        block, index = length // 4, [slice(None)] * len(shape)
        blocks = []
        for k in (f_at, i_at, g_at, o_at):
            index[axis] = slice(k * block, (k + 1) * block)
            blocks.append(tuple(index))
        return scale, offset, blocks

    layouts = {}

    def gates(pre, c):
        if widen is not None:
            pre = widen(pre)
        key = pre.shape, pre.dtype
        found = layouts.get(key, False)
        if found is False:
            found = layout(*key)
            if len(layouts) < 16:  # not one entry per shape of an ever-changing series
                layouts[key] = found
        if found is None:
            return as_written(pre, c, [slice(None)] * pre.ndim, -(-pre.shape[axis] // 4))
        scale, offset, blocks = found
        activated = np.multiply(pre, scale)  # a fresh buffer; `pre` is not written
        np.tanh(activated, out=activated)
        activated *= scale
        activated += offset
        f, i, g, o = (activated[index] for index in blocks)
        c_new = np.multiply(f, c)
        i *= g
        c_new += i
        h_new = np.tanh(c_new)
        h_new *= o
        return h_new, c_new

    return gates


def _gate_affine(state_shape, dtype, g_at):
    """(scale, offset) over blocked gates [4, B, H] of a [B, H] state, read-only: 1/2, 1/2 on the
    sigmoid blocks, 1, 0 on block `g_at` (see `kernels.lstm_gate_affine`), as whole arrays (a
    broadcast operand costs a ufunc call two to three times a contiguous one)."""
    from ..kernels import lstm_gate_affine

    scale, offset = lstm_gate_affine(4, 2, dtype, g_at)
    shape = (4, *state_shape)
    scale, offset = np.broadcast_to(scale, shape).copy(), np.broadcast_to(offset, shape).copy()
    scale.flags.writeable = offset.flags.writeable = False
    return scale, offset


@kernel("LSTMStep", domain=LOOP_DOMAIN, since=1, multi=True, out=True)
def lstm_step(attrs, n_outputs):
    """``(h, r, c, x) -> (h', c')``: the gates' pre-activations are ``x + h @ r`` (``h @ r^T``
    if ``r_rows``), then `lstm_gates` with the same ``axis`` and ``blocks``. A measured choice
    (docs/design.md, "Measured choices") between the ops as written (``h @ r`` batch-major, the sum,
    the gate arithmetic) and *blocked gates*: one batched GEMM writes each gate's [B, H] block
    contiguous, [4, B, H], and every pass after it is contiguous. The blocked form needs a 2-D
    state [B, H], r [H, 4H] (or [4H, H]), c [B, H], the gates on the last axis and x of
    [B, 4H], [1, 4H] or [4H], all of one float type; other shapes run as written. The blocked
    form writes h' into ``out=`` (the slot of an emitted output the planner gives it); as written,
    h' is a fresh array the engine copies there. The blocked form's product and gate passes are
    one call (`lstm_product_tail`: BLAS, then numpy's own loops; on two cores, the batch's
    rows cut in two) where it takes the operands. ``to``: Casts joined (`_cast_joined`).
    ``at_least``: as `lstm_gates`' (the blocked form wants pre-activations it leaves as they
    are)."""
    axis = int(attrs["axis"])
    order = _gate_order(attrs)
    f_at, i_at, g_at, o_at = order
    r_rows = bool(attrs.get("r_rows"))
    part = attrs.get("part")  # (checked by the gate arithmetic: blocked wants it to be H)
    widen = _at_least(attrs)  # (applied by the gate arithmetic: blocked wants it to do nothing)
    gate_arithmetic = lstm_gates(attrs, 2)

    def as_written(h, r, c, x, out=None):
        return gate_arithmetic(matmul_plus(h, np.swapaxes(r, -1, -2) if r_rows else r, x), c)

    def block_weights(r):
        """r's four column blocks, [4, H, H], each the right operand of h @ (its block)."""
        if r_rows:
            blocked = r.reshape(4, r.shape[0] // 4, r.shape[1]).swapaxes(1, 2)
        else:
            blocked = r.reshape(r.shape[0], 4, r.shape[1] // 4).swapaxes(0, 1)
        return blocked  # (a view: `Prepared` lays a read-only r's out in one aligned copy)

    weights = Prepared(block_weights)
    plans = {}  # operand shapes and dtypes -> plan_for's answer

    def plan_for(h, r, c, x):
        """(gate scale, gate offset, x's blocked shape) if the blocked form fits operands of
        these shapes and dtypes, else None."""
        if h.ndim != 2 or r.ndim != 2 or axis not in (1, -1) or c.shape != h.shape \
                or h.dtype.kind != "f" or not h.dtype == r.dtype == c.dtype == x.dtype:
            return None
        batch, hidden = h.shape
        gates = 4 * hidden
        if part is not None and part != hidden \
                or r.shape != ((gates, hidden) if r_rows else (hidden, gates)) \
                or x.shape not in ((batch, gates), (gates,), (1, gates)) \
                or widen is not None and not widen.covers((batch, gates)):
            return None
        return (*_gate_affine(h.shape, h.dtype, g_at), (-1, 4, hidden))

    def blocked(h, r, c, x, out=None):
        # One dict look-up per step instead of the checks (a measurable share of a small step).
        signature = (h.shape, r.shape, c.shape, x.shape, h.dtype, r.dtype, c.dtype, x.dtype)
        plan = plans.get(signature, False)
        if plan is False:
            plan = plan_for(h, r, c, x)
            if len(plans) < 16:  # not one entry per shape of an ever-changing series
                plans[signature] = plan
        if plan is None:
            return as_written(h, r, c, x)
        scale, offset, blocked_x = plan
        prepared = weights(r)
        # The product and the passes below, as one call:
        done = lstm_product_tail(h, prepared, x, c, out, order, True, products_on_two_cores())
        if done is not None:
            return done
        gates = matmul_plus(h, prepared, x.reshape(blocked_x).swapaxes(0, 1))  # [4, B, H]
        done = lstm_tail(gates, c, out, order, True)  # the passes below
        if done is not None:
            return done
        gates *= scale
        np.tanh(gates, out=gates)
        gates *= scale
        gates += offset
        c_new = np.multiply(gates[f_at], c)
        inp = gates[i_at]
        inp *= gates[g_at]
        c_new += inp
        h_new = np.tanh(c_new, out=out)
        h_new *= gates[o_at]
        return h_new, c_new

    def steps(args, rows, outs, staged):
        """`blocked` over ``len(rows)`` steps in one call (cyloop/abilities.py `Recurrence`):
        `lstm_product_steps`, the same job step after step."""
        h, r, c, x = args
        if plan_for(h, r, c, x) is None:
            return None
        return lstm_product_steps(h, weights(r), rows, c, outs, order, True,
                                  products_on_two_cores(), staged)

    blocked.weights = weights
    declare(blocked, steps_for=lambda *args: steps)

    def settled(in_use):
        if "blocked gates" not in in_use:  # (the form as written keeps no copy of r)
            weights.forget()

    step = Measured({"batch-major gates": as_written, "blocked gates": blocked}, streak=2,
                    key=lambda h, r, c, x: (h.shape, r.shape, h.dtype.char), on_settled=settled,
                    label=lambda key: f"state {list(key[0])} {np.dtype(key[2]).name}")

    if n_outputs == 2:  # (h', c') as the step returns them: no wrapper call per step (but
        # a joined Cast's, `_cast_joined`; a loop's steps in one call make none)
        # (its product follows the loop's choice of cores; its steps, the chosen candidate's)
        declare(step, measured=step, products=True, steps_for=step.steps_for,
                recurrence=Recurrence(per_step=3, feedback=(0, 2)))  # (h, r, c, x) -> (h', c')
        return _cast_joined(step, attrs.get("to"))

    def run(h, r, c, x, out=None):
        return step(h, r, c, x, out=out)[:n_outputs]

    return _cast_joined(declare(run, measured=step, products=True), attrs.get("to"))


@kernel("ProductPlus", domain=LOOP_DOMAIN, since=1)
def product_plus(attrs):
    """``(h, r, x) -> h @ r + x`` (``h @ r^T + x`` if ``r_rows``). Where the product runs on
    two cores (`splits_now`), BLAS writes it into a copy of x (`matmul_plus`; a read-only r^T
    laid out once); else the MatMul's own product, in its measured formulation
    (`weight_product`), then x added in place."""
    r_rows = bool(attrs.get("r_rows"))
    product = weight_product(transposed=r_rows)
    as_rows = product.prepared["rows"]  # r, or r^T laid out

    def on_two_cores(h, r):
        """Whether h @ r runs on two cores now (then as `as_rows(r)`, BLAS's operand)."""
        return h.ndim == 2 and r.ndim == 2 and splits_now(h.size * r.shape[0 if r_rows else 1])

    def run(h, r, x):
        # (This thread's products on one core, the usual case: no call to find out more.)
        if getattr(_mode, "on", False) and on_two_cores(h, r):
            return matmul_plus(h, as_rows(r), x)
        return plus(product(h, r), x)

    run.on_two_cores, run.as_rows, run.prepared = on_two_cores, as_rows, product.prepared
    # (its product follows the loop's choice of cores)
    return declare(run, measured=abilities_of(product).measured, products=True)


def _sum_shape(h_shape: tuple, r_shape: tuple, x_shape: tuple, r_rows: bool) -> tuple | None:
    """The shape of ``h @ r + x`` (``h @ r^T`` if `r_rows`) for a 2-D r, or None where r is not
    2-D or the operands make no sum."""
    if len(r_shape) != 2 or not h_shape:
        return None
    inner, columns = r_shape[::-1] if r_rows else r_shape
    if h_shape[-1] != inner:
        return None
    try:
        return np.broadcast_shapes((*h_shape[:-1], columns), x_shape)
    except ValueError:
        return None


@kernel("ProductPlusTanh", domain=LOOP_DOMAIN, since=1, out=True)
def product_plus_tanh(attrs):
    """``(h, r, x) -> tanh(h @ r + x)`` (``h @ r^T`` if ``r_rows``): a plain RNN's step,
    written into ``out=`` (the slot of an emitted output the planner gives it). Where the
    product runs on two cores, one call (`product_tanh`: each core copies x's rows into its rows
    of the result, BLAS adds their product, then tanh runs over them) where it takes the
    operands. On one core the whole step is measured (`step`), each candidate one of the
    product's formulations followed by the add and the tanh: BLAS's on r's rows as that same
    one call with one piece on this thread, the others as the product, x added, then np.tanh
    into the destination; a product with no formulation to choose (`weight_product`'s
    conditions) runs `product_plus`, then np.tanh. ``to``: a Cast joined
    (`_cast_joined`). ``at_least``, if given, is the shape the sum is broadcast to at least
    before the tanh (`_AtLeast`): where that changes it, the sum, broadcast, then a fresh
    tanh."""
    summed = product_plus(attrs)
    on_two_cores, as_rows = summed.on_two_cores, summed.as_rows
    r_rows = bool(attrs.get("r_rows"))
    widen = _at_least(attrs)
    left = {}  # operands' shapes -> whether `widen` leaves their sum as it is

    def widens(h, r, x) -> bool:
        key = np.shape(h), np.shape(r), np.shape(x)
        found = left.get(key)
        if found is None:
            found = widen.covers(_sum_shape(*key, r_rows))
            if len(left) < 16:  # not one entry per shape of an ever-changing series
                left[key] = found
        return not found

    formulations = abilities_of(summed).measured.candidates  # the product's: (h, r, out)

    def whole_step(name):
        product = formulations[name]

        def whole(h, r, x, out=None):
            return np.tanh(plus(product(h, r, None), x), out=out)

        return whole

    plain_rows = whole_step("rows")

    def rows_in_one_call(h, r, x, out=None):
        done = product_tanh(h, as_rows(r), x, out, False)
        return plain_rows(h, r, x, out) if done is None else done

    def settled(in_use):
        """A formulation no shape uses any more lets go of its copy of the weight."""
        for name, weight in summed.prepared.items():
            if name not in in_use:
                weight.forget()

    # The candidates are whole steps, so that the one call's add and tanh count in its favour
    # as they do in its time (a trial of the products alone would time them in the others' only
    # after the choice).
    step = Measured({"rows": rows_in_one_call, "columns": whole_step("columns"),
                     "halves": whole_step("halves")},
                    key=product_key, label=product_label(r_rows), on_settled=settled)

    def measurable(h, r) -> bool:
        """Whether h @ r has formulations to choose from (`weight_product`'s conditions)."""
        return h.ndim == 2 and r.ndim == 2 and not r.flags.writeable and h.dtype == r.dtype \
            and h.dtype.kind == "f"

    # The last call settled on `rows` (its key chosen so, or every key fixed so), as
    # `weight_product`'s: (h's shape, h's dtype, a weak reference to r, r as `rows` multiplies
    # it, `step`'s fixed candidate then). A call of that shape and type on that very weight, on
    # one core, is that candidate's one call, with no key made and looked up: a loop body makes
    # one such call each iteration.
    last_rows = [None]

    def run(h, r, x, out=None):
        if widen is not None and widens(h, r, x):
            return np.tanh(widen(summed(h, r, x)))
        # (`on_two_cores` and `measurable` written out: this is a loop body's step, each call
        # of a function more a share of a small step's time)
        if type(h) is _NDARRAY and type(r) is _NDARRAY and h.ndim == 2 and r.ndim == 2:
            last = last_rows[0]
            if last is not None and last[2]() is r and h.shape == last[0] \
                    and h.dtype is last[1] and not r.flags.writeable and step._all is last[4] \
                    and not getattr(_mode, "on", False):
                done = product_tanh(h, last[3], x, out, False)
                return plain_rows(h, r, x, out) if done is None else done
            if splits_now(h.size * r.shape[0 if r_rows else 1]):
                done = product_tanh(h, as_rows(r), x, out, True)
                if done is not None:
                    return done
            elif not r.flags.writeable and h.dtype == r.dtype and h.dtype.kind == "f":
                chosen = step.chosen(h, r, x)
                if chosen is None:  # (on trial: as `step` calls it, its key not made again)
                    return step._call((h, r, x), (h, r, x) if out is None else (h, r, x, out))
                if chosen != "rows":
                    return step(h, r, x, out=out)
                derived = as_rows(r)
                last_rows[0] = (h.shape, h.dtype, weakref.ref(r), derived, step._all)
                done = product_tanh(h, derived, x, out, False)
                return plain_rows(h, r, x, out) if done is None else done
        return np.tanh(summed(h, r, x), out=out)

    def steps_on(two_cores: bool):
        def steps(args, rows, outs, staged):
            """`run` over ``len(rows)`` steps in one call (cyloop/abilities.py `Recurrence`):
            `product_tanh_steps`, the same job step after step."""
            h, r, _ = args
            done = product_tanh_steps(h, as_rows(r), rows, outs, two_cores, staged)
            return None if done is None else (done,)

        return steps

    steps_on_two_cores, steps_on_one = steps_on(True), steps_on(False)

    def steps_for(h, r, x):
        # On one core, steps where the product's measured formulation is BLAS's on r's rows,
        # the steps' own: otherwise `run`, the product in the chosen formulation, then np.tanh.
        if widen is not None and widens(h, r, x):
            return None
        if on_two_cores(h, r):
            return steps_on_two_cores
        if not measurable(h, r):
            return None  # (no measured formulation: `weight_product` runs np.matmul)
        chosen = step.chosen(h, r, x)
        if chosen is None:  # ("rows", the default's, while the trial waits: counted)
            return step.waiting_steps(steps_on_one, h, r, x)
        return steps_on_one if chosen == "rows" else None

    # (steps_hold: its answer is the run's cores' and the operands' shapes', not a trial's)
    declare(run, measured=step, products=True, steps_for=steps_for, steps_hold=True,
            recurrence=Recurrence(per_step=2, feedback=(0,)))  # (h, r, x) -> h'
    return _cast_joined(run, attrs.get("to"))


def _cast_joined(step, to):
    """`step` (a kernel, which may take ``out=`` for its first result) with a Cast to float type
    `to` joined (engine/fuse.py), or `step` itself if `to` is None. Where its operands are all
    of type `to`, as in the exports that write the Cast, it is `step`: nothing converts, and its
    steps run in one call as ever. Elsewhere each result is converted, as the Cast would, and no
    steps run in one call."""
    if to is None:
        return step
    to = np.dtype(to)

    def converting(args) -> bool:
        return any(getattr(a, "dtype", None) != to for a in args)

    def run(*args, out=None):
        if not converting(args):
            return step(*args) if out is None else step(*args, out=out)
        results = step(*args)
        several = isinstance(results, tuple)
        converted = [np.asarray(v).astype(to) for v in (results if several else (results,))]
        if out is not None:
            np.copyto(out, converted[0], casting="unsafe")
            converted[0] = out
        return tuple(converted) if several else converted[0]

    # What `step` can do, `run` can (a wrapper's abilities are its step's), but its steps run
    # where nothing converts.
    abilities = abilities_of(step)
    steps_for = abilities.steps_for
    if steps_for is None:
        return declare(run, abilities)
    return declare(run, abilities,
                   steps_for=lambda *args: None if converting(args) else steps_for(*args))


@kernel("GRUGates", domain=LOOP_DOMAIN, since=1)
def gru_gates(attrs):
    """``(x, r, h) -> h'``: x and r (the input and recurrent pre-activations) split in 3 equal
    parts along ``axis``; ``x_blocks`` and ``r_blocks`` give the parts holding z, g (the reset
    gate) and n. z = sigmoid(xz + rz), g = sigmoid(xg + rg), n = tanh(xn + g rn), and
    h' = (1 - z) n + z h, or (1 - z) h + z n if ``z_scales`` is "n"; broadcasting as the
    replaced nodes did. Sigmoids are tanh(t/2)/2 + 1/2, one pass for both gates when their
    blocks sit side by side in the same order in x and r. ``x_part`` and ``r_part``, if given,
    are the sizes of the parts x's and r's Splits gave (jax2onnx gives them): an axis of
    another length fails, as the Split did; ``x_even`` and ``r_even``, that the axis must split
    in 3 equal parts (OpenVINO's Split refuses it otherwise). ``x_slices`` and ``r_slices``, if
    given, cut the axis as three Slices do (tf2onnx's spelling): parts [0, P), [P, 2P) and
    [2P, 3P), or [2P, end) where ``x_open`` / ``r_open``, each clamped to the axis as a Slice
    is. ``r_axis``, if given, is r's axis, spelled otherwise than x's (1 and -1 on [B, 3H]
    operands, say). ``x_at_least`` and ``r_at_least``,
    if given, are the shapes x and r are broadcast to at least first (`_AtLeast`).
    ``one_rank``, if given, is the rank of the 1 of 1 - z (OpenVINO writes [1, 1]), which h'
    has at least, as the Sub broadcasts it. ``to``: a Cast joined (`_cast_joined`)."""
    axis = int(attrs["axis"])
    r_axis = int(attrs.get("r_axis", axis))
    one_rank = int(attrs.get("one_rank", 0))
    widen_x, widen_r = _at_least(attrs, "x_at_least"), _at_least(attrs, "r_at_least")
    xz_at, xg_at, xn_at = (int(k) for k in attrs["x_blocks"])
    rz_at, rg_at, rn_at = (int(k) for k in attrs["r_blocks"])
    sizes = (("x", attrs.get("x_part")), ("r", attrs.get("r_part")))
    evens = (bool(attrs.get("x_even")), bool(attrs.get("r_even")))
    sliced = [(attrs.get(f"{key}_slices"), bool(attrs.get(f"{key}_open"))) for key in "xr"]
    z_scales_n = attrs["z_scales"] == "n"
    side_by_side = (xz_at, xg_at) == (rz_at, rg_at) and abs(xz_at - xg_at) == 1 \
        and r_axis == axis and sliced[0][0] is None and sliced[1][0] is None

    def cut(ndim, start, stop, at=axis):
        index = [slice(None)] * ndim
        index[at] = slice(start, stop)
        return tuple(index)

    def blocks(shape, at, blocks_at, step, slices):
        """The index of each of x's or r's blocks z, g, n: parts of `step` (the last to the
        axis's end where `slices` says it is open)."""
        size, open_end = slices
        if size is not None:
            step = int(size)
        return [cut(len(shape), k * step, None if k == 2 and open_end else (k + 1) * step, at)
                for k in blocks_at]

    def indices(x_shape, r_shape):
        """The index of each part (as Split cuts an axis in 3: ceil-sized parts, the last shorter
        on an uneven axis): x's z, g, n, r's z, g, n, and the zg pair's if one pass serves both
        gates (its z, g within it)."""
        for (name, part), even, shape, at in zip(sizes, evens, (x_shape, r_shape),
                                                 (axis, r_axis)):
            if part is not None and shape[at] != 3 * part:
                raise ValueError(f"Split: 3 parts of {part} do not make axis {at}'s "
                                 f"{shape[at]} (of {name})")
            if even and shape[at] % 3:
                raise ValueError(f"Split: an axis of {shape[at]} does not split into 3 "
                                 f"equal parts (of {name})")
        x_step, r_step = -(-x_shape[axis] // 3), -(-r_shape[r_axis] // 3)
        parts = blocks(x_shape, axis, (xz_at, xg_at, xn_at), x_step, sliced[0])
        parts += blocks(r_shape, r_axis, (rz_at, rg_at, rn_at), r_step, sliced[1])
        if side_by_side and x_shape == r_shape and x_shape[axis] % 3 == 0:
            first = min(xz_at, xg_at)
            pair = cut(len(x_shape), first * x_step, (first + 2) * x_step)
            within = [cut(len(x_shape), (k - first) * x_step, (k - first + 1) * x_step)
                      for k in (xz_at, xg_at)]
            return parts, pair, within
        return parts, None, None

    shapes = {}

    def gates(x, r, h):
        if widen_x is not None:
            x = widen_x(x)
        if widen_r is not None:
            r = widen_r(r)
        key = x.shape, r.shape
        found = shapes.get(key)
        if found is None:
            found = indices(*key)
            if len(shapes) < 16:  # not one entry per shape of an ever-changing series
                shapes[key] = found
        (xz, xg, xn, rz, rg, rn), pair, within = found
        if pair is not None:
            zg = _sigmoid_in_place(np.add(x[pair], r[pair]))
            z, g = zg[within[0]], zg[within[1]]
        else:
            z = _sigmoid_in_place(np.add(x[xz], r[rz]))
            g = _sigmoid_in_place(np.add(x[xg], r[rg]))
        n = _accumulate(np.multiply(g, r[rn]), x[xn])
        np.tanh(n, out=n)
        p, q = (h, n) if z_scales_n else (n, h)
        blended = _accumulate(_scale(np.subtract(q, p), z), p)  # (1 - z) p + z q = p + z (q - p)
        if blended.ndim < one_rank:
            return blended.reshape((1,) * (one_rank - blended.ndim) + blended.shape)
        return blended

    return _cast_joined(gates, attrs.get("to"))


def _sigmoid_in_place(t):
    """sigmoid(t) = tanh(t/2)/2 + 1/2, in t's buffer."""
    t *= 0.5
    np.tanh(t, out=t)
    t *= 0.5
    t += 0.5
    return t


def _accumulate(total, addend):
    """total + addend, in `total`'s buffer where the sum has its shape."""
    if _keeps_shape(total, addend):
        return np.add(total, addend, out=total)
    return np.add(total, addend)


def _scale(total, factor):
    """total * factor, in `total`'s buffer where the product has its shape."""
    if _keeps_shape(total, factor):
        return np.multiply(total, factor, out=total)
    return np.multiply(total, factor)


def _keeps_shape(total, other) -> bool:
    """Whether broadcasting `other` against `total` gives `total`'s shape (the usual case, equal
    shapes, without np.broadcast_shapes' few microseconds)."""
    shape = np.shape(other)
    return shape == total.shape or np.broadcast_shapes(total.shape, shape) == total.shape


_DISTANCE_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _distance_rows(a, b):
    """``sum((a - b) ** 2, axis=-1)`` by `_distances.squared_distances`, or None where the
    operands are not one of its cases: one float type, last axes equal, and the broadcast a
    table of one operand's rows against the other's (each of the result's leading axes taken
    from one operand only: a row against rows, or rows against rows on new axes, as a hoisted
    chunk of rows is); then each operand is a matrix of its rows, and the table their
    distances. None too where the loop raised a floating-point flag (an overflow, an inf - inf),
    for numpy to compute and report as the unfused nodes would."""
    if a.dtype != b.dtype or a.dtype not in _DISTANCE_TYPES or a.ndim == 0 or b.ndim == 0 \
            or a.shape[-1] != b.shape[-1] or a.shape[-1] == 0:
        return None
    lead = max(a.ndim, b.ndim) - 1
    a_lead = (1,) * (lead - a.ndim + 1) + a.shape[:-1]
    b_lead = (1,) * (lead - b.ndim + 1) + b.shape[:-1]
    for first, second, first_lead, second_lead in ((b, a, b_lead, a_lead),
                                                   (a, b, a_lead, b_lead)):
        # (out[i, j]: row i of `first`, over its own leading axes, against row j of `second`)
        split = next((s for s in range(lead + 1) if all(d == 1 for d in second_lead[:s])
                      and all(d == 1 for d in first_lead[s:])), None)
        if split is None:
            continue
        shape = first_lead[:split] + second_lead[split:]
        out = np.empty(shape, a.dtype)
        features = a.shape[-1]
        rows = np.ascontiguousarray(first).reshape(-1, features)
        against = np.ascontiguousarray(second).reshape(-1, features)
        if squared_distances(against, rows, out.reshape(len(rows), len(against))):
            return None
        return out
    return None


@kernel("SquaredDistance", domain=LOOP_DOMAIN, since=1, batch="elementwise")
def squared_distance(attrs):
    """``(a, b) -> sum((a - b) ** 2, axis=-1)`` (the axis kept as 1 if ``keepdims``): a Sub
    and the sum of its squares over the last axis (ReduceSumSquare, or ReduceSum of a Mul of the
    difference by itself; engine/fuse.py), numpy broadcasting between a and b. Where one is a
    row and the other rows, or each rows on axes of its own (a hoisted chunk of rows against a
    static matrix), each distance is summed where it is written (`_distances`), the difference
    never stored; else, and where that loop raised a floating-point flag, as the nodes compute
    it: the difference, its squares, their sum in the operands' type."""
    keepdims = bool(attrs.get("keepdims", 1))

    def run(a, b):
        out = _distance_rows(a, b)
        if out is None:
            difference = np.subtract(a, b)
            return np.add.reduce(np.multiply(difference, difference), -1, difference.dtype,
                                 None, keepdims)
        return out[..., None] if keepdims else out

    return run


@kernel("StackedSequence", domain=LOOP_DOMAIN, since=1)
def stacked_sequence(attrs):
    """``rows -> rows``: a loop's concatenated output that engine/stacking.py made of the items
    appended to a sequence, handed on in place of their ConcatFromSequence (new axis 0). As
    np.stack of an empty sequence is, zero rows are an error."""
    def stacked(rows):
        if rows.shape[0] == 0:
            raise ValueError("need at least one array to stack (the loop appended none)")
        return rows

    return stacked


@kernel("GRUStep", domain=LOOP_DOMAIN, since=1, out=True)
def gru_step(attrs):
    """``(h, r, x, b) -> h'``: `gru_gates` (this node's attributes) of x, ``h @ r + b`` (``h @
    r^T`` if ``r_rows``) and h: GRUGates fed by a ProductPlus of the state (engine/fuse.py), in
    one call where it takes the operands: OpenVINO's GRU step with linear_before_reset
    (`gru_product_tail`: the products and the passes as one call; and a loop's steps many in one
    call, `gru_product_steps`), for which r's gate blocks are laid out once in its order (z,
    reset, n), x's z and reset blocks take b's, and b's n block is the recurrent candidate bias.
    As the GRU cells' (kernels/recurrent/cells.py), that form is no measured choice: a call at a
    time cannot see what its steps save (a call alone runs about as fast as the two as written;
    the loop of them runs faster, since its steps go many to a call). It wants
    a [B, H] state, the gates on the last axis in parts of H, z scaling h, x [B, 3H], r [H, 3H]
    (or [3H, H]), b [3H] or rows of one [3H] (its n block, at least), all of one float type;
    other operands run as the two as written, as do x or ``h @ r + b`` that ``x_at_least`` or
    ``r_at_least`` would broadcast. ``to``: a Cast joined (`_cast_joined`)."""
    from ..kernels import sigmoid_cap

    gates = gru_gates({key: value for key, value in attrs.items() if key != "to"})
    widen_x, widen_r = _at_least(attrs, "x_at_least"), _at_least(attrs, "r_at_least")
    one_rank = int(attrs.get("one_rank", 0))  # (one call makes h' of h's rank: 2)
    summed = product_plus({"r_rows": attrs.get("r_rows", False)})
    r_rows = bool(attrs.get("r_rows"))
    axes = {int(attrs["axis"]), int(attrs.get("r_axis", attrs["axis"]))}
    xz_at, xg_at, xn_at = (int(k) for k in attrs["x_blocks"])
    rz_at, rg_at, rn_at = (int(k) for k in attrs["r_blocks"])
    z_scales_h = attrs["z_scales"] == "h"
    parts = {attrs.get(key) for key in ("x_part", "r_part", "x_slices", "r_slices")} - {None}

    def as_written(h, r, x, b, out=None):
        return gates(x, summed(h, r, b), h)

    def reordered(r):
        """r's gate blocks as OpenVINO's step takes them: ([H, 2H] of z and reset, [H, H] of n),
        each the right operand of h @ (it)."""
        columns = r.T if r_rows else r  # [H, 3H]
        hidden = columns.shape[0]
        z, g, n = (columns[:, k * hidden:(k + 1) * hidden] for k in (rz_at, rg_at, rn_at))
        return np.concatenate([z, g], axis=1), np.ascontiguousarray(n)

    weights = Prepared(reordered)
    plans = {}  # operand shapes and dtypes -> plan_for's answer

    def plan_for(h, r, x, b):
        """(hidden, the sigmoid's cap) if one call takes operands of these shapes and types,
        else None."""
        signature = (h.shape, r.shape, x.shape, np.shape(b), h.dtype, r.dtype, x.dtype,
                     getattr(b, "dtype", None))
        plan = plans.get(signature, False)
        if plan is False:
            plan = None
            cap = sigmoid_cap(h.dtype)
            if z_scales_h and cap is not None and h.ndim == 2 >= one_rank and axes <= {1, -1} \
                    and h.dtype == r.dtype == x.dtype == getattr(b, "dtype", None):
                batch, hidden = h.shape
                r_shape = (3 * hidden, hidden) if r_rows else (hidden, 3 * hidden)
                if batch and hidden and parts <= {hidden} and r.shape == r_shape \
                        and x.shape == (batch, 3 * hidden) \
                        and b.shape in ((3 * hidden,), (1, 3 * hidden), (batch, 3 * hidden)) \
                        and all(widen is None or widen.covers(x.shape)
                                for widen in (widen_x, widen_r)):  # (h @ r + b: x's shape)
                    plan = hidden, cap
            if len(plans) < 16:  # not one entry per shape of an ever-changing series
                plans[signature] = plan
        return plan

    def bias_parts(b):
        """b as one call takes it: ([rows, 3H] in OpenVINO's gate order, its z and reset blocks
        b's and its n block 0, added to x; b's n block [H], the recurrent candidate bias), or
        () if b's rows differ in their n block (as written then; not None, which `Prepared`
        would take for b itself)."""
        hidden = b.shape[-1] // 3
        rows = b.reshape(-1, 3 * hidden)
        z, g, n = (rows[:, k * hidden:(k + 1) * hidden] for k in (rz_at, rg_at, rn_at))
        if len(rows) > 1 and not (n == n[:1]).all():
            return ()
        return np.concatenate([z, g, np.zeros_like(n)], axis=1), n[0].copy()

    biases = Prepared(bias_parts)

    def joined(x, b, hidden):
        """(x [..., B, 3H] in OpenVINO's gate order plus b's z and reset blocks, the recurrent
        candidate bias [H]), or None (`bias_parts`)."""
        parts = biases(b)
        if not parts:
            return None
        order = x_orders.get(hidden)
        if order is None:
            order = x_orders[hidden] = np.concatenate(
                [np.arange(k * hidden, (k + 1) * hidden) for k in (xz_at, xg_at, xn_at)])
        xw = np.take(x, order, axis=-1)
        xw += parts[0]
        return xw, parts[1]

    x_orders = {}  # hidden -> the columns of x in OpenVINO's gate order

    def one_call(h, r, x, b, out=None):
        plan = plan_for(h, r, x, b)
        made = None if plan is None else joined(x, b, plan[0])
        if made is not None:
            update_reset, candidate = weights(r)
            done = gru_product_tail(h, update_reset, candidate, made[0], made[1], plan[1], out,
                                    products_on_two_cores())
            if done is not None:
                return done
        return as_written(h, r, x, b)

    def steps(args, rows, outs, staged):
        """`one_call` over ``len(rows)`` steps in one call (cyloop/abilities.py `Recurrence`):
        `gru_product_steps`, `gru_product_tail`'s job step after step."""
        h, r, x, b = args
        plan = plan_for(h, r, x, b)
        made = None if plan is None else joined(rows, b, plan[0])
        if made is None:
            return None
        update_reset, candidate = weights(r)
        done = gru_product_steps(rows_apart(h), update_reset, candidate, made[0], made[1],
                                 plan[1], outs, products_on_two_cores(), staged)
        return None if done is None else (done,)

    # (measured: the product's formulation, as written; its products follow the loop's choice
    # of cores; steps_hold: its answer is the operands' shapes' and types', for a run)
    declare(one_call, measured=abilities_of(summed).measured, products=True,
            steps_for=lambda h, r, x, b: None if plan_for(h, r, x, b) is None else steps,
            steps_hold=True, recurrence=Recurrence(per_step=2, feedback=(0,)))  # (h, r, x, b) -> h'
    return _cast_joined(one_call, attrs.get("to"))
