"""The memory plan of each loop, as facts a program reads and as a table people read
(``Model.plan()``, ``cyloop plan``).

`describe` turns what a driver says of itself (`destinations.LoopFacts`) into a `LoopPlan`: the
loop's values (`Port`), how each carried value reaches the next iteration (`Alias`), the work
moved out of the body (`HoistedWork`) or run as one step (`Fused`), the recurrent steps' use
(`Steps`), the measured choices (`Choice`) and the planner's counters. Everything is named as
the model names it: its nodes by op and name (`ir.NodeRef`), its values by name; a value the
engine makes of the model's (a sum without the state's product, fuse.py) is named by what it is.
Tests read these facts; `LoopPlan.lines` renders them, and only the rendering's own tests read
its words.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from ..accel.gemm import no_choice
from ..ir import (
    CarriedInput,
    ConcatOutput,
    InvariantInput,
    NodeRef,
    OuterInput,
    SlicedInput,
    and_list,
)
from ..kernels.registry import abilities_of
from .destinations import (
    LoopFacts,
    MeasuredPlacement,
    PoolDestination,
    RowDestination,
    updated_in_place,
)
from .facts import NOT_HOISTED, Fused, HoistedWork, NotHoisted

__all__ = [
    "NOT_HOISTED",
    "Alias",
    "Choice",
    "Fused",
    "HoistedWork",
    "LoopPlan",
    "NodeRef",
    "NotHoisted",
    "Plan",
    "Port",
    "StepUse",
    "Steps",
    "Timing",
    "describe",
]

WIDTH = 100  # the rendering's lines, at most (a table row may pass it)


def _size(nbytes: float) -> str:
    """A byte count as people read it: B, KiB or MiB."""
    if nbytes < 1024:
        return f"{nbytes:g} B"
    if nbytes < 1024 * 1024:
        return f"{nbytes / 1024:.1f} KiB"
    return f"{nbytes / (1024 * 1024):.1f} MiB"


def _count(n: int, what: str) -> str:
    """``1 run``, ``4 runs``."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


# -- the facts ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Port:
    """One value of a loop: an input its body reads or an output it hands out.

    `role`, for inputs: "iteration" (the iteration number), "condition", "carried", "sliced",
    "invariant", "captured" (an outer-scope value the body reads by name) or "hoisted" (a value
    computed before the iterations, a chunk of rows at a time, or once a run: `once`); for
    outputs: "last" (the value after the final iteration) or "concatenated".
    `output`: an output's index. `desc`: the loop's descriptor of it where it has one
    (`ir.SlicedInput`, `CarriedInput`, `InvariantInput`, `ConcatOutput`, `LastOutput`).
    `source`: the body result a carried input takes back, or the one an invariant is returned
    as (a carried value the body passes through, fuse.passed_through).
    `lives`, for a concatenated output: "in place" (`writer` writes slot i itself), "measured
    slot or pool" (or in a pair of buffers copied there, measured), "hoisted rows" (filled from
    the hoisted rows), "copied" (from `writer`'s result, or a body or outer value where it is
    ""), "joined after" (collected, joined after the loop: the reference driver); `writer_op`
    is the writer's op.
    `sequence`: a concatenated output standing for a sequence the body appends to (stacking.py):
    (its name, the node appending, the node stacking).
    """

    name: str
    role: str
    output: int | None = None
    desc: object = None
    source: str | None = None
    lives: str = ""
    writer: str = ""
    writer_op: str = ""
    once: bool = False
    sequence: tuple[str, NodeRef, NodeRef] | None = None


# How a carried value reaches the next iteration (`Alias.how`).
ALIAS_HOWS = ("output slot", "measured slot or pool", "pool", "in place", "by reference",
              "passed through")


@dataclass(frozen=True)
class Alias:
    """Carried input `param` taking body result `result` back, and how (`how`, one of
    `ALIAS_HOWS`): "output slot" (the result lives in slot i of concatenated output `output`
    and the next iteration reads it there), "measured slot or pool" (there, strided, or in a
    pair of buffers copied into the slot: measured a run at a time, and a call of the steps at
    a time too where `per_steps_call`), "pool" (made in a pair of buffers used in turn; a
    scalar it makes handed over as is where `scalar_by_reference`), "in place" (`writer`
    updates the param's own buffer), "by reference" (the new array handed over) or "passed
    through" (a body input returned as is). `writer`: the step making the result, as the plan
    names it ("" for none), `writer_op` its op."""

    param: str
    result: str
    how: str
    output: int | None = None
    writer: str = ""
    writer_op: str = ""
    per_steps_call: bool = False
    scalar_by_reference: bool = False


@dataclass(frozen=True)
class Steps:
    """The body's one recurrent step `step` may run a hoisted chunk's iterations in one call
    (destinations.RecurrentSteps): `kind` is its op, `makes` its first result, `calls` the
    calls that did so and `iterations` the iterations they ran, of `total` (the counters' sums
    over runs)."""

    step: str
    kind: str
    makes: str
    calls: int
    iterations: int
    total: int


@dataclass(frozen=True)
class StepUse:
    """A body step (`step`, as the plan names it; `nodes`, the model's nodes it runs) and how
    many `calls` of it took some path (written over a dying operand, say)."""

    step: str
    nodes: tuple[NodeRef, ...]
    calls: int = 0

    @property
    def ops(self) -> list[str]:
        return [ref.op for ref in self.nodes]


@dataclass(frozen=True)
class Timing:
    """A measured choice's trial on one key (shapes, say; `on` names it, None where there is
    one key): the candidate `chosen` (None while on trial or waiting) and each candidate's
    median time (seconds a `Choice.per`), None for one not timed (yet, or dropped early).
    `waiting`: the default's calls still to come before the trial opens (0 once it has), while
    the work done on the key has not yet paid for a trial; `times` has the default's alone
    then. `untried`: `chosen` is the default, kept untried: its calls are too quick to time
    apart."""

    on: str | None
    chosen: str | None
    times: dict[str, float | None]
    waiting: int = 0
    untried: bool = False


# What a measured choice decides (`Choice.kind`).
CHOICE_KINDS = ("formulation", "chunk size", "placement", "placement in steps", "cores",
                "hoisting")
# What one call of a choice is, where it is not a kernel's call (`Timing.waiting` counts them).
_CALLS = {"chunk size": "chunk", "placement": "run", "cores": "run", "hoisting": "run"}


@dataclass(frozen=True)
class Choice:
    """A measured choice (accel/measured.py, docs/design.md "Measured choices").

    `kind`: one of `CHOICE_KINDS`: a step's formulation ("formulation": the step of `nodes`,
    `hoisted` if it runs before the iterations), the hoisted chunks' size, where a value
    lives (`value`; "placement in steps": within a call of the steps), where the matrix
    products run ("cores"), or whether the hoisted work runs before the iterations or in them
    ("hoisting"). `subject` says it in the model's words. `candidates`: the first
    is the default. `fixed`: the candidate fixed untimed (tune=False), if any. `trials`: one
    `Timing` per key met. `declined`: why there is nothing to choose ("" if there is)."""

    kind: str
    subject: str
    candidates: tuple[str, ...]
    per: str = "call"
    nodes: tuple[NodeRef, ...] = ()
    hoisted: bool = False
    value: str = ""
    fixed: str | None = None
    trials: tuple[Timing, ...] = ()
    declined: str = ""

    @property
    def settled(self) -> bool:
        """Whether nothing more is timed: fixed, one candidate, declined, or chosen on every key
        met (at least one)."""
        if self.fixed is not None or len(self.candidates) == 1 or self.declined:
            return True
        return bool(self.trials) and all(t.chosen is not None for t in self.trials)

    @property
    def chosen(self) -> str | None:
        """The candidate in use from now on, where it is one: fixed, the only one, or chosen
        on every key met; else None."""
        if self.fixed is not None:
            return self.fixed
        if len(self.candidates) == 1:
            return self.candidates[0]
        kept = {t.chosen for t in self.trials}
        return kept.pop() if len(kept) == 1 and None not in kept and self.trials else None

    @property
    def times(self) -> dict[str, float | None]:
        """The candidates' median times on the one key met (empty if none or several)."""
        return dict(self.trials[0].times) if len(self.trials) == 1 else {}

    def trial(self, on: str | None = None) -> Timing:
        """The trial on key `on` (the only one if None)."""
        if on is None:
            (only,) = self.trials
            return only
        return next(t for t in self.trials if t.on == on)

    def lines(self) -> list[str]:
        """This choice for people: one line a key."""
        unit = "µs" if self.per == "call" else f"µs/{self.per}"
        default = self.candidates[0]
        if self.declined:
            chosen = self.chosen
            return [f"{self.subject}: {self.declined}" if chosen is None else
                    f"{self.subject}: {chosen}: {self.declined}"]
        if self.fixed is not None:
            return [f"{self.subject}: {self.fixed} (fixed, not measured)"]
        if len(self.candidates) == 1:
            return [f"{self.subject}: {default} (the only way)"]
        if not self.trials:
            return [f"{self.subject}: not timed yet, meanwhile the default: {default}"]
        out = []
        for t in self.trials:
            times = ", ".join(f"{n} {s * 1e6:.1f} {unit}" if s is not None else
                              f"{n} not timed" for n, s in t.times.items())
            on = f" on {t.on}" if t.on is not None else ""
            if t.untried:
                out.append(f"{self.subject}{on}: the default, {t.chosen}, untried: its calls "
                           f"are too quick to time apart ({times})")
            elif t.chosen is not None:
                out.append(f"{self.subject}{on}: chosen here: {t.chosen} ({times})")
            elif t.waiting:
                call = _CALLS.get(self.kind, "call")
                out.append(f"{self.subject}{on}: the default, {default}, until the work pays "
                           f"for a trial ({_count(t.waiting, call)} more; {times})")
            else:
                out.append(f"{self.subject}{on}: on trial: {times}")
        return out


@dataclass
class LoopPlan:
    """One loop's plan: its values (`ports`), how carried values reach the next iteration
    (`aliasing`), the work hoisted out of its body (`hoisted`), the nodes that read no state of
    the loop but stay in it, and why (`not_hoisted`), the work fused (`fused`), whether its
    iterations may run many in one call (`steps`), the steps that took the scalar path
    (`scalar`) or wrote over a dying operand (`overwriting`), its measured `choices`, the
    planner's `counters` (summed over runs) and the loops its body runs (`nested`).

    `label` names the loop as errors do; `node` as the model does (None if unknown)."""

    label: str
    driver: str
    trip_count: str
    ports: list[Port]
    aliasing: list[Alias]
    counters: dict[str, int]
    nested: list[LoopPlan] = field(default_factory=list)
    hoisted: list[HoistedWork] = field(default_factory=list)
    fused: list[Fused] = field(default_factory=list)
    steps: Steps | None = None
    scalar: list[str] = field(default_factory=list)
    overwriting: list[StepUse] = field(default_factory=list)
    choices: list[Choice] = field(default_factory=list)
    node: NodeRef | None = None
    not_hoisted: list[NotHoisted] = field(default_factory=list)

    # -- queries (for tests and tools) --

    @property
    def inputs(self) -> list[Port]:
        return [p for p in self.ports if p.output is None]

    @property
    def outputs(self) -> list[Port]:
        return [p for p in self.ports if p.output is not None]

    def port(self, name: str, output: int | None = None) -> Port:
        """The input named `name` (or, given `output`, that output)."""
        if output is not None:
            return next(p for p in self.outputs if p.output == output)
        return next(p for p in self.inputs if p.name == name)

    def roles(self) -> list[str]:
        """The inputs' roles, in the plan's order."""
        return [p.role for p in self.inputs]

    def alias(self, param: str) -> Alias:
        return next(a for a in self.aliasing if a.param == param)

    def fused_kinds(self) -> list[str]:
        return [f.kind for f in self.fused]

    def fused_step(self, kind: str) -> Fused:
        """The one fused step of `kind`."""
        (found,) = [f for f in self.fused if f.kind == kind]
        return found

    def hoisted_nodes(self) -> list[NodeRef]:
        """The model's nodes hoisted, in order."""
        return [ref for work in self.hoisted for ref in work.nodes]

    def choices_of(self, kind: str) -> list[Choice]:
        return [c for c in self.choices if c.kind == kind]

    def stacked(self) -> list[Port]:
        """The outputs standing for a stacked sequence."""
        return [p for p in self.outputs if p.sequence is not None]

    @property
    def preallocated_bytes(self) -> int:
        return self.counters.get("last_preallocated_bytes", 0)

    @property
    def copied_bytes_per_iteration(self) -> float:
        """Bytes copied per iteration in steady state (after the first two), as last measured."""
        steady = self.counters.get("steady_iterations", 0)
        return self.counters.get("steady_bytes_copied", 0) / steady if steady else 0.0

    # -- the rendering --

    def lines(self, indent: str = "") -> list[str]:
        """The plan for people: a header, a table of the loop's values, then what was hoisted,
        fused and measured, and the sizes."""
        name = self.node.shown if self.node is not None else self.label
        out = textwrap.wrap(f"{name} [{self.driver} driver]: {self.trip_count}", WIDTH,
                            initial_indent=indent, subsequent_indent=indent + "    ",
                            break_on_hyphens=False)
        rows = [("value", "role", "where it lives, what is copied")]
        rows += [_port_row(p, self) for p in self.ports]
        widths = [max(len(r[k]) for r in rows) for k in range(2)]
        lead = len(indent) + 2 + widths[0] + 2 + widths[1] + 2
        for row in rows:
            where = textwrap.wrap(row[2], max(WIDTH - lead, 40), break_on_hyphens=False) or [""]
            out.append(f"{indent}  {row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {where[0]}")
            out.extend(" " * lead + more for more in where[1:])
        notes = []
        for how, heading in (("rows", "hoisted, a chunk of rows at a time"),
                             ("once", "hoisted, once a run (its inputs do not change)"),
                             ("shape", "hoisted, once a run (the shape read does not change)")):
            work = [w for w in self.hoisted if _hoisted_group(w) == how]
            if work:
                notes.append(f"{heading}: " + "; ".join(_hoisted_item(w) for w in work))
        if self.not_hoisted:
            notes.append("not hoisted, though it reads no state of the loop: " + "; ".join(
                f"{n.shown} ({n.why})" for n in self.not_hoisted))
        for f in self.fused:
            notes.append(_fused_note(f))
        for p in self.stacked():
            seq, appends, stacks = p.sequence
            notes.append(f"stacked: the sequence {seq!r} {appends.shown} appends to is output "
                         f"#{p.output}, and {stacks.shown} stacks nothing")
        if self.steps is not None:
            s = self.steps
            ran = ("not yet run" if not self.counters.get("runs") else
                   "none ran so yet" if not s.iterations else
                   f"{s.iterations} of {_count(s.total, 'iteration')} ran so, in "
                   f"{_count(s.calls, 'call')}")
            notes.append(f"steps: {s.step} may run a hoisted chunk's iterations in one call: "
                         f"{ran}")
        if self.scalar:
            notes.append("scalar path (two 0-d operands of one type: no buffer): "
                         + ", ".join(self.scalar))
        if self.overwriting:
            notes.append("written over a dying operand (no buffer allocated): " + ", ".join(
                f"{u.step} ({_count(u.calls, 'call')})" for u in self.overwriting))
        for choice in self.choices:
            notes.extend(f"measured: {line}" for line in choice.lines())
        c = self.counters
        if c.get("runs"):
            notes.append(f"sizes ({_count(c['runs'], 'run')}, "
                         f"{_count(c['iterations'], 'iteration')}): "
                         f"{_size(self.preallocated_bytes)} preallocated in the last run "
                         f"({_count(c['allocations'], 'allocation')}), "
                         f"{_size(self.copied_bytes_per_iteration)} copied an iteration in "
                         f"steady state, {_size(c['growth_bytes_copied'])} moved by growth")
            if c.get("hoist_chunks"):
                notes.append(f"hoisted rows: {_size(c['hoisted_bytes'])} in "
                             f"{_count(c['hoist_chunks'], 'chunk')}")
        else:
            notes.append("sizes: not run yet (measured on the first run)")
        for note in notes:
            out.extend(textwrap.wrap(note, WIDTH, initial_indent=indent + "  ",
                                     subsequent_indent=indent + "      ",
                                     break_on_hyphens=False))
        for inner in self.nested:
            out.extend(inner.lines(indent + "    "))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


@dataclass
class Plan:
    """Every loop of a model, outermost first, and the measured choices of the kernels outside
    them (a recurrent layer, a weight's product)."""

    loops: list[LoopPlan]
    choices: list[Choice] = field(default_factory=list)
    # The nodes of shape arithmetic outside loops, run once per input shapes (engine/
    # shape_memo.py), and how many input shapes their values are kept for.
    shape_arithmetic: list[str] = field(default_factory=list)
    shapes_kept: int = 0

    def __str__(self) -> str:
        parts = [str(loop) for loop in self.loops]
        lines = [f"  measured: {line}" for choice in self.choices for line in choice.lines()]
        if self.shape_arithmetic:
            lines += textwrap.wrap(f"shape arithmetic, run once per input shapes (values kept "
                                   f"for {self.shapes_kept}): {'; '.join(self.shape_arithmetic)}",
                                   WIDTH, initial_indent="  ", subsequent_indent="      ")
        if lines:
            parts.append("\n".join(["outside loops:"] + lines))
        return "\n\n".join(parts) if parts else "no loops"


# -- the rendering's pieces --------------------------------------------------------------------

def _port_row(p: Port, loop: LoopPlan) -> tuple[str, str, str]:
    if p.output is not None:
        name = f"#{p.output} {p.name}"
        if p.role == "last":
            return name, "last value", "its value after the final iteration"
        out = p.desc
        role = ("stacked" if out.new_axis else "joined") + f", axis {out.axis}" + (
            ", reversed" if out.reverse else "")
        where = {
            "in place": f"preallocated; {p.writer} writes slot i in place",
            "measured slot or pool": f"preallocated; {p.writer} writes slot i in place, or a "
                                     "pair of buffers copied there (measured)",
            "hoisted rows": "preallocated; filled from the hoisted rows, a chunk at a time",
            "copied": f"preallocated; slot i copied from {p.writer or 'a body input'}",
            "joined after": "collected, joined once after the loop",
        }[p.lives]
        if p.sequence is not None:
            where += f" (the sequence {p.sequence[0]!r})"
        return name, role, where
    role = p.role
    if p.role == "iteration":
        return p.name, role, "the iteration number, a fresh integer each iteration"
    if p.role == "condition":
        return p.name, role, "true while the body runs"
    if p.role == "sliced":
        s = p.desc
        extra = [f"from {s.start}" if s.start else "", f"to {s.end}" if s.end != -1 else "",
                 f"stride {s.stride}" if s.stride != 1 else "",
                 f"parts of {s.part_size}" if s.part_size != 1 else "",
                 "" if s.keep_axis else "axis dropped"]
        extra = [e for e in extra if e]
        return p.name, f"sliced, axis {s.axis}", "part i of the outer value, a read-only view" + (
            f" ({', '.join(extra)})" if extra else "")
    if p.role == "invariant":
        where = "the outer value, a read-only view"
        if p.source:
            where += f"; the body returns it unchanged as {p.source!r} (carried in the model)"
        return p.name, role, where
    if p.role == "captured":
        return p.name, role, "an outer-scope value, a read-only view"
    if p.role == "hoisted":
        return p.name, role, ("computed once a run, a read-only view" if p.once else
                              "row i of rows computed a chunk at a time before the iterations")
    return p.name, role, _alias_words(loop.alias(p.name)) if p.role == "carried" else ""


def _alias_words(a: Alias) -> str:
    result = repr(a.result)
    return {
        "output slot": f"{result}, read where it lives: slot i of output #{a.output} (0 copies)",
        "measured slot or pool": f"{result}, in slot i of output #{a.output} (strided, 0 copies)"
                                 " or a pair of buffers copied there (1 copy): measured",
        "pool": f"{result}, made in a pair of buffers used in turn (0 copies)",
        "in place": f"{result}: {a.writer} updates its buffer in place (0 copies; the first "
                    "iteration copies the initial value)",
        "by reference": f"{result}, handed over as made" + (
            f" ({a.writer} allocates it)" if a.writer else "") + " (0 copies)",
        "passed through": f"{result}, a body input passed through (0 copies)",
    }[a.how]


def _hoisted_group(work: HoistedWork) -> str | None:
    if work.how in ("once",):
        return "once"
    if work.how in ("shape", "shape entry"):
        return "shape" if work.how == "shape" else None
    return "rows"


def _hoisted_item(work: HoistedWork) -> str:
    if work.how == "shape":
        why = {"every row": "every row has one shape",
               "initial value": "the initial value's",
               "follows": "it follows from shapes that do not change"}[work.why]
        return f"{work.shown} ({why})"
    return work.shown


def _fused_note(f: Fused) -> str:
    if f.already:
        return f"fused: {and_list(r.shown for r in f.replaces)} runs as nothing: its input " \
            f"is {f.already} already"
    return f"fused: {and_list(r.shown for r in f.replaces)} run as one step"


# -- from a driver's facts ---------------------------------------------------------------------

def _trip_words(spec) -> str:
    """How many iterations a loop runs, in words."""
    trip = spec.trip_count
    sliced = spec.slices_set_trip_count and any(isinstance(i, SlicedInput) for i in spec.inputs)
    parts = []
    if isinstance(trip, OuterInput):
        parts.append(f"as many iterations as input #{trip.index} says")
    elif trip is not None:
        parts.append(f"{_count(int(trip), 'iteration')}")
    if sliced:
        parts.append("one iteration per part of the sliced inputs" if not parts else
                     "at most one per part of the sliced inputs")
    if spec.cond_result:
        parts.append(f"until {spec.cond_result!r} is false")
    return ", ".join(parts) if parts else "until max_iterations stops it"


def choice_of(kind: str, subject: str, measured, **facts) -> Choice:
    """A `Choice` read from a `Measured` (accel/measured.py)."""
    unit = measured.unit
    per = unit.split("/", 1)[1] if "/" in unit else "call"
    trials = tuple(
        Timing(None if key is None and len(measured.trials) == 1 else measured.key_label(key),
               trial.choice, trial.times(),
               0 if trial.open or trial.choice is not None else max(trial.due - trial.waited, 1),
               trial.untried)
        for key, trial in measured.trials.items())
    return Choice(kind, subject, tuple(measured.candidates), per, fixed=measured.fixed,
                  trials=trials, **facts)


def _on_two_cores(products) -> str:
    """The candidate of a loop's products choice (a `Measured`, or None) that runs them on two
    cores, where it is chosen or fixed; else ""."""
    if products is None:
        return ""
    name = products.chosen()
    return name if name is not None and products.candidates[name] else ""


def outside_loops(program) -> list[Choice]:
    """The measured choices of a compiled program's own steps (not its loops' bodies): their
    formulations, and where a layer's products run."""
    choices = []
    for step in program.steps:
        nodes = step.node.model_nodes
        abilities = abilities_of(step.fn)
        if abilities.measured is not None:
            choices.append(choice_of("formulation", step.node.shown, abilities.measured,
                                     nodes=nodes))
        cores = abilities.cores
        if cores is not None:
            subject = f"where the products of {step.node.shown} run"
            if cores.measured is None:
                name, why = cores.declined()
                choices.append(Choice("cores", subject, (name,), nodes=nodes, declined=why))
            else:
                choices.append(choice_of("cores", subject, cores.measured, nodes=nodes))
    return choices


def describe(facts: LoopFacts) -> LoopPlan:
    """The plan of one loop, from what its driver says of itself (`LoopFacts`)."""
    spec, body, destinations = facts.spec, facts.body, facts.destinations
    producer = {slot: step.node.shown for step in body.steps for slot in step.outputs
                if slot >= 0}
    producer_op = {slot: step.node.op_type for step in body.steps for slot in step.outputs
                   if slot >= 0}
    scalar_slots = {slot for k in facts.scalar_steps for slot in body.steps[k].outputs}
    updating = updated_in_place(body)  # (results a scatter makes in its input's buffer)
    params = {v.name for v in spec.body.inputs}

    ports, aliasing = [], []
    if spec.iteration_param:
        ports.append(Port(spec.iteration_param, "iteration"))
    if spec.cond_param:
        ports.append(Port(spec.cond_param, "condition"))
    for inp in spec.inputs:
        if isinstance(inp, CarriedInput):
            ports.append(Port(inp.param, "carried", desc=inp, source=inp.result))
        elif isinstance(inp, SlicedInput):
            ports.append(Port(inp.param, "sliced", desc=inp))
        elif isinstance(inp, InvariantInput):
            ports.append(Port(inp.param, "invariant", desc=inp, source=inp.result))
    hoisted = set(facts.hoisted_inputs)
    for slot in body.input_slots[len(spec.body.inputs):]:
        ports.append(Port(body.slot_names[slot], "captured"))
    for name in facts.hoisted_inputs:
        ports.append(Port(name, "hoisted", once=name in facts.computed_once))

    for j, out in enumerate(spec.outputs):
        slot = body.slot(out.result)
        if not isinstance(out, ConcatOutput):
            ports.append(Port(out.result, "last", output=j, desc=out))
            continue
        writer = ""
        if not facts.writes_into:
            lives = "joined after"
        elif destinations.get(slot) == RowDestination(j):
            lives, writer = "in place", producer.get(slot, "")
        elif isinstance(destinations.get(slot), MeasuredPlacement):
            lives, writer = "measured slot or pool", producer[slot]
        elif out.result in hoisted:
            lives = "hoisted rows"
        else:
            lives = "copied"
            writer = "" if out.result in params else producer.get(slot, "an outer value")
        ports.append(Port(out.result, "concatenated", output=j, desc=out, lives=lives,
                          writer=writer, writer_op=producer_op.get(slot, "") if writer else "",
                          sequence=out.sequence))

    for inp in spec.inputs:
        if not isinstance(inp, CarriedInput):
            continue
        slot = body.slot(inp.result)
        destination = destinations.get(slot)
        writer = producer.get(slot, "")
        if inp.result in params:
            how, output = "passed through", None
        elif not facts.writes_into:
            how, output, writer = "by reference", None, ""
        elif isinstance(destination, RowDestination):
            how, output = "output slot", destination.output
        elif isinstance(destination, MeasuredPlacement):
            how, output = "measured slot or pool", destination.output
        elif isinstance(destination, PoolDestination):
            how, output = "pool", None
        elif updating.get(slot, -1) == body.slot(inp.param):
            how, output = "in place", None
        else:
            how, output = "by reference", None
        stepped = isinstance(destination, MeasuredPlacement) and facts.steps is not None \
            and facts.steps.output == destination.output
        aliasing.append(Alias(inp.param, inp.result, how, output, writer,
                              producer_op.get(slot, "") if writer else "", stepped,
                              how == "pool" and slot in scalar_slots))

    # A step's formulation that no call has needed while the loop's products run on two
    # cores, where a product in pieces takes none of them (its kernel follows the loop's
    # choice: `Abilities.products`), is said to be unused, not to wait for a trial.
    on_two_cores = _on_two_cores(facts.products)
    choices = []
    for step in body.steps:
        abilities = abilities_of(step.fn)
        measured = abilities.measured
        if measured is None:
            continue
        if on_two_cores and abilities.products and not measured.trials \
                and measured.fixed is None and len(measured.candidates) > 1:
            choices.append(Choice("formulation", step.node.shown, tuple(measured.candidates),
                                  nodes=step.node.model_nodes,
                                  declined=f"unused: the loop's products run {on_two_cores}, "
                                           f"where no call of it has needed one"))
            continue
        choices.append(choice_of("formulation", step.node.shown, measured,
                                 nodes=step.node.model_nodes))
    for work, fn in facts.hoisted_kernels:
        measured = abilities_of(fn).measured
        if measured is not None:
            choices.append(choice_of("formulation", f"{work.shown} (hoisted)", measured,
                                     nodes=work.nodes, hoisted=True))
    if facts.hoisting is not None:
        choices.append(choice_of("hoisting", "whether the hoisted work runs before the "
                                 "iterations or in them", facts.hoisting))
    if facts.chunk_sizing is not None:
        choices.append(choice_of("chunk size", "the hoisted chunks' size", facts.chunk_sizing))
    for slot, placement in facts.placements.items():
        name = body.slot_names[slot]
        choices.append(choice_of("placement", f"where {name!r} lives", placement, value=name))
    if facts.steps_placement is not None:
        name = body.slot_names[body.slot(spec.outputs[facts.steps.output].result)]
        choices.append(choice_of("placement in steps",
                                 f"where {name!r} lives within a call of the steps",
                                 facts.steps_placement, value=name))
    if facts.products is not None:
        choices.append(choice_of("cores", "where the matrix products run", facts.products))
    elif facts.runs_products:
        name, why = no_choice()
        choices.append(Choice("cores", "where the matrix products run", (name,), declined=why))

    fused = [Fused.of(node) for node in spec.body.nodes if "fused_from" in node.attrs]
    steps = None
    if facts.steps is not None:
        c = facts.counters
        node = body.steps[0].node
        steps = Steps(node.shown, node.op_type, node.outputs[0], c.get("step_calls", 0),
                      c.get("stepped_iterations", 0), c.get("iterations", 0))
    overwriting = [StepUse(body.steps[k].node.shown, body.steps[k].node.model_nodes, calls)
                   for k, calls in facts.overwriting.items()]
    return LoopPlan(facts.label, facts.driver, _trip_words(spec), ports, aliasing,
                    facts.counters, [describe(inner) for inner in facts.nested],
                    list(facts.hoisted), fused, steps,
                    [body.steps[k].node.shown for k in facts.scalar_steps], overwriting,
                    choices, facts.node, list(facts.not_hoisted))
