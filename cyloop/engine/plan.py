"""The memory plan, for people: what each loop's inputs and outputs are, what aliases what, bytes
preallocated and bytes copied per iteration (``Model.plan()``, ``cyloop plan``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..accel.gemm import two_cores_here
from ..ir import CarriedInput, ConcatOutput, InvariantInput, OuterInput, SlicedInput
from .destinations import (
    LoopFacts,
    MeasuredPlacement,
    PoolDestination,
    RowDestination,
    updated_in_place,
)

__all__ = ["LoopPlan", "Plan", "describe"]


def _size(nbytes: float) -> str:
    """A byte count as people read it: B, KiB or MiB."""
    if nbytes < 1024:
        return f"{nbytes:g} B"
    if nbytes < 1024 * 1024:
        return f"{nbytes / 1024:.1f} KiB"
    return f"{nbytes / (1024 * 1024):.1f} MiB"


@dataclass
class LoopPlan:
    """One loop: rows of (port, kind, where it lives), aliasing notes, and measured counters."""

    label: str
    driver: str
    trip_count: str
    inputs: list[tuple[str, str, str]]
    outputs: list[tuple[str, str, str]]
    aliasing: list[str]
    counters: dict[str, int]
    nested: list[LoopPlan] = field(default_factory=list)
    hoisted: list[str] = field(default_factory=list)  # nodes run before the loop, in chunks
    scalar: list[str] = field(default_factory=list)  # steps that took their scalar path
    overwriting: list[str] = field(default_factory=list)  # steps written over a dying operand
    # Measured choices (accel/measured.py): (step label, the choice and each candidate's time).
    choices: list[tuple[str, str]] = field(default_factory=list)
    # Patterns rewritten: run as one kernel (engine/fuse.py), a sequence as an output (stacking.py)
    fused: list[str] = field(default_factory=list)
    steps: str | None = None  # the recurrent step that may run many iterations in one call

    @property
    def preallocated_bytes(self) -> int:
        return self.counters.get("last_preallocated_bytes", 0)

    @property
    def copied_bytes_per_iteration(self) -> float:
        """Bytes copied per iteration in steady state (after the first two), as last measured."""
        steady = self.counters.get("steady_iterations", 0)
        return self.counters.get("steady_bytes_copied", 0) / steady if steady else 0.0

    def lines(self, indent: str = "") -> list[str]:
        out = [f"{indent}loop {self.label} [{self.driver} driver]  trip count: {self.trip_count}"]
        rows = [("input", *row) for row in self.inputs] + [("output", *row) for row in self.outputs]
        widths = [max(len(r[k]) for r in rows) for k in range(3)] if rows else [0, 0, 0]
        for row in rows:
            out.append(f"{indent}  {row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  "
                       f"{row[2]:<{widths[2]}}  {row[3]}")
        for note in self.hoisted:
            out.append(f"{indent}  hoisted (run before the loop on chunks of rows): {note}")
        for note in self.fused:
            out.append(f"{indent}  fused: {note}")
        for note in self.aliasing:
            out.append(f"{indent}  alias: {note}")
        if self.steps is not None:
            c = self.counters
            done = (f": {c['stepped_iterations']} of {c['iterations']} iteration(s) in "
                    f"{c['step_calls']} call(s)" if c.get("runs") else "")
            out.append(f"{indent}  steps: {self.steps} may run a hoisted chunk's iterations in "
                       f"one call (once iteration 0 has sized the outputs){done}")
        if self.scalar:
            out.append(f"{indent}  scalar path taken (two 0-d operands of one type: the "
                       f"scalar's operator, no destination): {', '.join(self.scalar)}")
        if self.overwriting:
            out.append(f"{indent}  written over a dying operand (no buffer allocated): "
                       f"{', '.join(self.overwriting)}")
        for label, choice in self.choices:
            out.append(f"{indent}  measured choice: {label}: {choice}")
        c = self.counters
        if c.get("runs"):
            out.append(f"{indent}  measured over {c['runs']} run(s), {c['iterations']} "
                       f"iteration(s): preallocated {_size(self.preallocated_bytes)} in the last "
                       f"run, {c['allocations']} planner allocation(s), "
                       f"{_size(self.copied_bytes_per_iteration)} copied per iteration in steady "
                       f"state, {_size(c['growth_bytes_copied'])} moved by growth")
            if c.get("hoist_chunks"):
                out.append(f"{indent}  hoisted: {c['hoist_chunks']} chunk(s), "
                           f"{_size(c['hoisted_bytes'])} of hoisted rows")
        else:
            out.append(f"{indent}  not run yet: sizes and copies are measured on the first run")
        for inner in self.nested:
            out.extend(inner.lines(indent + "    "))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


@dataclass
class Plan:
    """Every loop of a model, outermost first, and the measured choices of the kernels outside
    them (a recurrent layer, a weight's product), as (label, choice)."""

    loops: list[LoopPlan]
    choices: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        parts = [str(loop) for loop in self.loops]
        if self.choices:
            parts.append("\n".join(["outside loops:"] + [f"  measured choice: {label}: {choice}"
                                                         for label, choice in self.choices]))
        return "\n\n".join(parts) if parts else "no loops"


def outside_loops(program) -> list[tuple[str, str]]:
    """The measured choices of a compiled program's own steps (not its loops' bodies): their
    formulations, and where a layer's products run."""
    choices = []
    for step in program.steps:
        if getattr(step.fn, "measured", None) is not None:
            choices.append((step.label, step.fn.measured.describe()))
        if getattr(step.fn, "cores", None) is not None and two_cores_here():
            choices.append((f"where the products of {step.label} run",
                            step.fn.cores.describe()))
    return choices


def _operand(value) -> str:
    if isinstance(value, OuterInput):
        return f"input #{value.index}"
    return "none" if value is None else repr(value)


def describe(facts: LoopFacts) -> LoopPlan:
    """The plan of one loop, from what its driver says of itself (`LoopFacts`)."""
    spec, body, destinations = facts.spec, facts.body, facts.destinations
    producer = {slot: step.op_type for step in body.steps for slot in step.outputs if slot >= 0}
    scalar_slots = {slot for k in facts.scalar_steps for slot in body.steps[k].outputs}
    updating = updated_in_place(body)  # (results a scatter makes in its input's buffer)
    params = {v.name for v in spec.body.inputs}
    trip = _operand(spec.trip_count)
    if spec.slices_set_trip_count and any(isinstance(i, SlicedInput) for i in spec.inputs):
        trip = "set by the sliced inputs" if spec.trip_count is None else f"{trip} and the slices"
    if spec.cond_result:
        trip += f", until {spec.cond_result!r} is false"

    inputs, outputs, aliasing, hoisted_nodes = [], [], [], []
    if spec.iteration_param:
        inputs.append((spec.iteration_param, "iteration", "a fresh int scalar each iteration"))
    if spec.cond_param:
        inputs.append((spec.cond_param, "condition", "true while the body runs"))
    for inp in spec.inputs:
        if isinstance(inp, CarriedInput):
            inputs.append((inp.param, "carried", f"back edge from {inp.result!r}"))
        elif isinstance(inp, SlicedInput):
            dropped = "" if inp.keep_axis else ", axis dropped"
            where = (f"read-only view: axis {inp.axis}, start {inp.start}, end {inp.end}, "
                     f"stride {inp.stride}, part {inp.part_size}{dropped}")
            inputs.append((inp.param, "sliced", where))
        elif isinstance(inp, InvariantInput):
            inputs.append((inp.param, "invariant", "read-only view, bound once" + (
                f" (carried, the body returns it unchanged as {inp.result!r})" if inp.result
                else "")))
    hoisted = set(facts.hoisted_inputs)
    for slot in body.input_slots[len(spec.body.inputs):]:
        inputs.append((body.slot_names[slot], "captured", "outer-scope value, read-only view"))
    for name in facts.hoisted_inputs:
        inputs.append((name, "hoisted",
                       "row i of a chunk computed before its iterations, read-only view"))
    if facts.hoisted_nodes:
        hoisted_nodes.append(", ".join(facts.hoisted_nodes))

    for j, out in enumerate(spec.outputs):
        slot = body.slot(out.result)
        if isinstance(out, ConcatOutput):
            order = "reverse" if out.reverse else "forward"
            how = "stacked on new" if out.new_axis else "joined along"
            if not facts.writes_into:
                where = "collected, joined once after the loop"
            elif destinations.get(slot) == RowDestination(j):
                where = (f"preallocated; {producer.get(slot)} writes slot i in place "
                         f"({order})")
            elif isinstance(destinations.get(slot), MeasuredPlacement):
                where = (f"preallocated; {producer[slot]} writes slot i in place, or a "
                         f"ping-pong buffer copied there (measured) ({order})")
            elif out.result in hoisted:
                where = (f"preallocated; a hoisted value, its chunks after the first written "
                         f"in their slots when an elementwise node makes it, else copied there "
                         f"({order})")
            else:
                source = "a body input" if out.result in params else \
                    f"{producer.get(slot, 'an outer value')} (no out=)"
                where = f"preallocated; copied into slot i from {source} ({order})"
            outputs.append((f"#{j} {out.result}", "concatenated", f"{how} axis {out.axis}: {where}"))
        else:
            outputs.append((f"#{j} {out.result}", "last", "value after the final iteration"))
    for inp in spec.inputs:
        if not isinstance(inp, CarriedInput):
            continue
        slot = body.slot(inp.result)
        destination = destinations.get(slot)
        if inp.result in params:
            aliasing.append(f"{inp.param} <- {inp.result}: a body input passed through, handed "
                            "over by reference (0 copies)")
        elif not facts.writes_into:
            aliasing.append(f"{inp.param} <- {inp.result}: handed over by reference")
        elif isinstance(destination, RowDestination):
            aliasing.append(f"{inp.param} <- {inp.result}: lives in slot i of output "
                            f"#{destination.output}; the next iteration reads it there (0 copies)")
        elif isinstance(destination, MeasuredPlacement):
            stepped = facts.steps is not None and facts.steps.output == destination.output
            aliasing.append(f"{inp.param} <- {inp.result}: lives in slot i of output "
                            f"#{destination.output} (strided; the next iteration reads it "
                            f"there, 0 copies) or {producer[slot]} writes a ping-pong buffer "
                            "pair, copied into the slot (1 copy): measured, a run at a time"
                            + (", and within a call of the steps a call at a time" if stepped
                               else ""))
        elif isinstance(destination, PoolDestination):
            aliasing.append(f"{inp.param} <- {inp.result}: {producer[slot]} writes into a "
                            "ping-pong buffer pair (0 copies, 2 buffers in steady state)"
                            + ("; a scalar it makes is handed over by reference"
                               if slot in scalar_slots else ""))
        elif updating.get(slot, -1) == body.slot(inp.param):
            aliasing.append(f"{inp.param} <- {inp.result}: {producer[slot]} updates "
                            f"{inp.param}'s buffer in place where nothing else holds it (the "
                            "first iteration copies the initial value), handed over by "
                            "reference")
        else:
            aliasing.append(f"{inp.param} <- {inp.result}: handed over by reference "
                            f"({producer.get(slot, 'an outer value')} allocates it)")
    nested = [describe(inner) for inner in facts.nested]
    scalar = [body.steps[k].label for k in facts.scalar_steps]
    kernels = [(step.label, step.fn) for step in body.steps]
    kernels += [(f"{shown} (hoisted)", fn) for shown, fn in facts.hoisted_kernels]
    choices = [(label, fn.measured.describe()) for label, fn in kernels
               if getattr(fn, "measured", None) is not None]
    if facts.chunk_sizing is not None:
        choices.append(("hoisting chunk size", facts.chunk_sizing.describe()))
    choices += [(f"where {body.slot_names[slot]!r} lives", placement.describe())
                for slot, placement in facts.placements.items()]
    if facts.steps_placement is not None:
        stepped = body.slot(spec.outputs[facts.steps.output].result)
        choices.append((f"where {body.slot_names[stepped]!r} lives within a call of the steps",
                        facts.steps_placement.describe()))
    if facts.products is not None:
        choices.append(("where the matrix products run", facts.products.describe()))
    fused = [f"{node.label} runs {node.attrs['fused_from']}" for node in spec.body.nodes
             if "fused_from" in node.attrs]
    fused += [f"output #{j} is the sequence {out.sequence}" for j, out in enumerate(spec.outputs)
              if isinstance(out, ConcatOutput) and out.sequence]
    overwriting = [f"{body.steps[k].label} ({calls} calls)"
                   for k, calls in facts.overwriting.items()]
    steps = body.steps[0].label if facts.steps is not None else None
    return LoopPlan(facts.label, facts.driver, trip, inputs, outputs, aliasing, facts.counters,
                    nested, hoisted_nodes, scalar, overwriting, choices, fused, steps)
