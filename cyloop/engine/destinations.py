"""The memory planner's policy: where each loop value lives, as typed records.

The Cython driver carries these decisions out (``_core.pyx``); the plan (``plan.py``) prints them.
Neither reads the other's internals: a driver describes itself as a `LoopFacts`.
"""

from __future__ import annotations

import numpy as np

from .._records import FrozenRecord, Record, set_field
from ..ir import CarriedInput, ConcatOutput, InvariantInput, LoopSpec, SlicedInput
from ..kernels.registry import FIRST_INPUT, abilities_of

__all__ = ["Destination", "LoopFacts", "MeasuredPlacement", "PoolDestination", "RecurrentSteps",
           "RowDestination", "plan_destinations", "plan_steps", "updated_in_place"]


# (Records, not named tuples: a RowDestination(0) must not equal a PoolDestination(0).)
class RowDestination(FrozenRecord):
    """The result is written into its slot of concatenated output #`output`; a result that is
    also carried is read there by the next iteration (zero copies)."""

    __slots__ = _fields = ("output",)

    def __init__(self, output: int):
        set_field(self, "output", output)


class PoolDestination(FrozenRecord):
    """The result, carried back into input #`input` (and emitted only into strided slots, if at
    all: copied there from the pool buffer), is written into a free buffer of a ping-pong pool
    (two buffers in steady state)."""

    __slots__ = _fields = ("input",)

    def __init__(self, input: int):
        set_field(self, "input", input)


class MeasuredPlacement(FrozenRecord):
    """The result, carried back into input #`input` and emitted into concatenated output
    #`output` on an axis other than 0 (strided slots), lives either in its slot (`as_row`: the
    next iteration reads it there, strided) or in a ping-pong pool, copied into its slot
    (`as_pool`: read contiguous, one copy an iteration). Which is faster depends on the CPU and
    the shapes, so the driver measures it, a run at a time, and, where the body's steps run
    many iterations in one call, a call of them at a time (docs/design.md, "Measured choices")."""

    __slots__ = _fields = ("output", "input")

    def __init__(self, output: int, input: int):
        set_field(self, "output", output)
        set_field(self, "input", input)

    @property
    def as_row(self) -> RowDestination:
        return RowDestination(self.output)

    @property
    def as_pool(self) -> PoolDestination:
        return PoolDestination(self.input)


Destination = RowDestination | PoolDestination | MeasuredPlacement


def updated_in_place(body) -> dict[int, int]:
    """Result slot -> the slot of the input its step updates in place (a scatter on its first
    input, `FIRST_INPUT`), for the compiled `body`'s steps that may."""
    return {step.outputs[0]: step.inputs[0] for step in body.steps if step.keeps == FIRST_INPUT}


def plan_destinations(spec: LoopSpec, body) -> dict[int, Destination]:
    """Which body results a kernel may write straight into their destination, by result slot.

    A result emitted on axis 0 lives in its output row (if it is also carried, the next
    iteration reads it there); one only carried gets a pool. One both carried and emitted on
    another axis has strided slots, which the next iteration would read strided: where it lives
    is a `MeasuredPlacement` (W4's TensorIterator, h emitted on axis 1 and read by the next
    step's GEMM, ran slower in its slot than from a pool buffer copied there on one machine;
    elsewhere it may be the other way).
    Only the (first) result of an ``out=``-capable step qualifies (`body`: the compiled body): a
    recurrent cell's h, not its c; a body input passed through is never written. A result only
    carried that a step makes by updating its first input in place (a scatter on the carried
    buffer) gets no pool: it is made in that input's buffer, which the back edge hands on (the
    runner's invariant 8, `_core.pyx`), with no copy a step.
    """
    producer = {step.outputs[0] for step in body.steps if step.out}
    in_place = updated_in_place(body)
    carried = {body.slot(inp.result): k for k, inp in enumerate(spec.inputs)
               if isinstance(inp, CarriedInput)}
    destinations: dict[int, Destination] = {}
    for j, out in enumerate(spec.outputs):
        slot = body.slot(out.result)
        if isinstance(out, ConcatOutput) and slot in producer and slot not in destinations:
            destinations[slot] = RowDestination(j) if out.axis == 0 or slot not in carried \
                else MeasuredPlacement(j, carried[slot])
    for k, inp in enumerate(spec.inputs):
        if isinstance(inp, CarriedInput):
            slot = body.slot(inp.result)
            if slot in producer and slot not in destinations \
                    and in_place.get(slot, -1) != body.slot(inp.param):
                destinations[slot] = PoolDestination(k)
    return destinations


class RecurrentSteps(FrozenRecord):
    """The body is one recurrent step (a kernel with a `Recurrence`, cyloop/abilities.py) reading a
    hoisted row, its back edges and values that stay put, so the driver may run a chunk's
    iterations in one call of the kernel's ``steps`` (once iteration 0 has sized the outputs):
    each iteration's first result goes into its slot of concatenated output #`output`, carried
    input k (in `LoopSpec.inputs` order among the carried) takes result ``carried[k]`` (-1: a
    hoisted value's), and each ``(j, result)`` in `last` gives last-value output #j.

    The rest is read from the hoisted rows of the call's last iteration (body slots): carried
    input k takes slot s for each ``(k, s)`` in `carried_rows` and last-value output #j for each
    ``(j, s)`` in `last_rows` (a loop counter tf2onnx carries and returns: the iteration number
    plus one), and `cond_rows`, unless -1, is the condition result's slot, hoisted: a call runs
    iterations only while the rows before them say true (tf2onnx's ``i < n``)."""

    __slots__ = _fields = ("output", "carried", "last", "carried_rows", "last_rows", "cond_rows")

    def __init__(self, output: int, carried: tuple[int, ...], last: tuple[tuple[int, int], ...],
                 carried_rows: tuple[tuple[int, int], ...] = (),
                 last_rows: tuple[tuple[int, int], ...] = (), cond_rows: int = -1):
        set_field(self, "output", output)
        set_field(self, "carried", carried)
        set_field(self, "last", last)
        set_field(self, "carried_rows", carried_rows)
        set_field(self, "last_rows", last_rows)
        set_field(self, "cond_rows", cond_rows)


def plan_steps(spec: LoopSpec, body, hoisted: set[int],
               computed: frozenset[int] = frozenset()) -> RecurrentSteps | None:
    """Whether a loop's iterations may run many at a time, in one call of its body's one step
    (see `RecurrentSteps`): its kernel is a `Recurrence` whose per-step argument is a hoisted row
    (`hoisted`: the slots of the body's hoisted values), whose fed-back arguments are exactly the
    loop's carried values, each the back edge of the result that feeds it, and whose other
    arguments stay put (invariants, captures, constants, hoisted values computed once a run:
    `computed`, a subset of `hoisted`); nothing else is bound per iteration
    (no iteration number or slice read; a condition passed through, constant true or a hoisted
    row); its first result is emitted into one concatenated output; the other carried values and
    last-value outputs are its results, invariants or hoisted rows. None otherwise.
    """
    if len(body.steps) != 1:
        return None
    step = body.steps[0]
    recurrence = abilities_of(step.fn).recurrence
    if recurrence is None or not step.out or len(step.outputs) != len(recurrence.feedback) \
            or min(step.outputs) < 0:
        return None
    slot = body.slot
    # Bound per iteration, apart from the hoisted row and the back edges: the iteration number,
    # the condition (passed through, it stays the true the driver binds) and slices.
    per_iteration = {slot(inp.param) for inp in spec.inputs if isinstance(inp, SlicedInput)}
    if spec.iteration_param:
        per_iteration.add(slot(spec.iteration_param))
    # Hoisted values a row an iteration (read from the rows of a call's last iteration).
    rows = hoisted - computed
    cond_rows = -1
    if spec.cond_result and not _stays_true(spec, body):
        if slot(spec.cond_result) not in rows:
            return None
        cond_rows = slot(spec.cond_result)
    passed = set()  # the condition, passed through to the condition result
    if spec.cond_param:
        per_iteration.add(slot(spec.cond_param))
        passed.add(slot(spec.cond_param))
    if per_iteration & (set(step.inputs) | set(body.output_slots) - passed):
        return None
    feeding = dict(zip(recurrence.feedback, range(len(step.outputs))))  # argument -> result
    carried, carried_rows = [], []
    fed = set()
    params = {slot(inp.param) for inp in spec.inputs if isinstance(inp, CarriedInput)}
    for inp in spec.inputs:
        if isinstance(inp, CarriedInput):
            param, result = slot(inp.param), slot(inp.result)
            if result in rows:  # (its parameter is read by the hoisted work alone: below)
                carried_rows.append((len(carried), result))
                carried.append(-1)
                continue
            if result not in step.outputs:
                return None
            j = step.outputs.index(result)
            if step.inputs[recurrence.feedback[j]] != param:
                return None
            carried.append(j)
            fed.add(recurrence.feedback[j])
    if fed != set(feeding):
        return None
    for k, arg in enumerate(step.inputs):
        if k == recurrence.per_step:
            if arg not in hoisted:
                return None
        elif k not in feeding and (arg < 0 or arg in hoisted and arg not in computed
                                   or arg in per_iteration or arg in step.outputs
                                   or arg in params):
            return None  # (an argument that stays put: a carried value changes)
    # Values no iteration changes: a last-value output of one keeps what iteration 0 gave it
    # (jax2onnx returns each weight it passes through; fuse.passed_through).
    invariants = {slot(inp.param) for inp in spec.inputs if isinstance(inp, InvariantInput)}
    output, last, last_rows = None, [], []
    for j, out in enumerate(spec.outputs):
        result = slot(out.result)
        if isinstance(out, ConcatOutput):
            if result in hoisted:  # (filled a chunk at a time, as ever)
                continue
            if result != step.outputs[0] or output is not None:
                return None
            output = j
        elif result in step.outputs:
            last.append((j, step.outputs.index(result)))
        elif result in rows:
            last_rows.append((j, result))
        elif result not in invariants:
            return None
    if output is None:
        return None
    return RecurrentSteps(output, tuple(carried), tuple(last), tuple(carried_rows),
                          tuple(last_rows), cond_rows)


def _stays_true(spec: LoopSpec, body) -> bool:
    """Whether a loop's condition result is true in every iteration the driver binds a true
    condition to: the condition passed through, or a constant true (what `convert_model` writes
    for an ONNX Loop whose body passes its condition through)."""
    result = body.slot(spec.cond_result)
    if spec.cond_param and result == body.slot(spec.cond_param):
        return True
    value = body.constants.get(result)
    return value is not None and np.size(value) == 1 and bool(np.reshape(value, -1)[0])


class LoopFacts(Record):
    """One loop driver, described for the plan: its spec and compiled body, where values live,
    what was hoisted, which steps took the scalar path, and its counters.

    ``label``; ``driver``, "cython" or "pure-Python"; ``spec``, its `LoopSpec`; ``body``, the
    CompiledProgram of the body; ``writes_into``, False where emitted results are joined after
    the loop (the reference driver); ``destinations``, result slot -> `Destination`;
    ``counters``. The others, given by keyword, each default to none:

    - ``hoisted_inputs``: the rows the body reads, by name;
    - ``hoisted``: what runs before the loop (plan.HoistedWork records, chunks.Hoist.work);
    - ``scalar_steps``: the steps that took their scalar path;
    - ``nested``: the nested loops' `LoopFacts`;
    - ``hoisted_kernels``: the hoisted steps' own kernels, with what each runs:
      (plan.HoistedWork, kernel);
    - ``chunk_sizing``: the hoisted part's measured chunk size (chunks.Hoist.sizing);
    - ``overwriting``: the steps that wrote their result over a dying operand, with how many
      times (Cython driver);
    - ``placements``: result slot -> the measured choice of where it lives (a
      `MeasuredPlacement`'s);
    - ``products``: the measured choice of where the loop's matrix products run (accel/gemm.py,
      `product_candidates`), or None;
    - ``runs_products``: whether the loop runs matrix products that follow its choice of cores
      (with no choice: where they run, and why: accel/gemm.py, `no_choice`);
    - ``steps``: whether its iterations may run many at a time (`RecurrentSteps`), or None;
    - ``steps_placement``: the measured choice of where the state those calls carry lives
      within a call (staged or not), when it is a `MeasuredPlacement`, or None;
    - ``computed_once``: the hoisted inputs computed once a run (not a row an iteration);
    - ``node``: the loop node as the model names it (an ir.NodeRef), or None;
    - ``not_hoisted``: the body nodes that read no state of the loop yet stay in it
      (plan.NotHoisted records);
    - ``hoisting``: the measured choice of running the hoisted work before the iterations or in
      them (engine/hoist_choice.py), or None.
    """

    _fields = ("label", "driver", "spec", "body", "writes_into", "destinations", "counters",
               "hoisted_inputs", "hoisted", "scalar_steps", "nested", "hoisted_kernels",
               "chunk_sizing", "overwriting", "placements", "products", "runs_products", "steps",
               "steps_placement", "computed_once", "node", "not_hoisted", "hoisting")

    def __init__(self, label: str, driver: str, spec: LoopSpec, body, writes_into: bool,
                 destinations: dict[int, Destination], counters: dict[str, int],
                 hoisted_inputs: list[str] | None = None, hoisted: list | None = None,
                 scalar_steps: list[int] | None = None, nested: list[LoopFacts] | None = None,
                 hoisted_kernels: list[tuple[object, object]] | None = None,
                 chunk_sizing=None, overwriting: dict[int, int] | None = None,
                 placements: dict[int, object] | None = None, products=None,
                 runs_products: bool = False, steps: RecurrentSteps | None = None,
                 steps_placement=None, computed_once: frozenset = frozenset(), node=None,
                 not_hoisted: list | None = None, hoisting=None):
        self.label = label
        self.driver = driver
        self.spec = spec
        self.body = body
        self.writes_into = writes_into
        self.destinations = destinations
        self.counters = counters
        self.hoisted_inputs = [] if hoisted_inputs is None else hoisted_inputs
        self.hoisted = [] if hoisted is None else hoisted
        self.scalar_steps = [] if scalar_steps is None else scalar_steps
        self.nested = [] if nested is None else nested
        self.hoisted_kernels = [] if hoisted_kernels is None else hoisted_kernels
        self.chunk_sizing = chunk_sizing
        self.overwriting = {} if overwriting is None else overwriting
        self.placements = {} if placements is None else placements
        self.products = products
        self.runs_products = runs_products
        self.steps = steps
        self.steps_placement = steps_placement
        self.computed_once = computed_once
        self.node = node
        self.not_hoisted = [] if not_hoisted is None else not_hoisted
        self.hoisting = hoisting
