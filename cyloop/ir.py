"""The format-neutral intermediate representation every frontend lowers to.

A `Graph` is a list of `Node`s over named values, with typed inputs, outputs and initializers. Every
iteration operator of every format (ONNX Loop and Scan, OpenVINO Loop-5 and TensorIterator) becomes
one node of op type ``Loop`` in the ``cyloop`` domain whose ``spec`` attribute is a `LoopSpec`; the
engine knows nothing of formats.

Semantics of a `LoopSpec`, as a plain-Python loop (the real driver differs only in where values
live, never in what they are; see ``_core.pyx``)::

    n_max = trip count (None: unbounded); go = initial condition (None: true)
    carried = [initial values]; i = 0
    while (n_max is None or i < n_max) and go:
        body inputs: carried values, part i of each sliced input, the invariants,
                     the iteration number i and the condition
        run the body
        carried = [the back-edge results]; emit the concatenated results; i += 1
        go = body's condition result (if it has one)
    last outputs: the final value of their result (a carried value's initial value if i == 0)

A `SlicedInput` both bounds the loop (``slices_set_trip_count``: TensorIterator, Scan) or only
limits it (Loop-5: running past its last part is a model error). The slicing rule, for an axis of
size D::

    s = start + D if start < 0 else start;  e = end + D if end < 0 else end;  P = part_size
    stride > 0: part i is [s + i*stride, s + i*stride + P) while its last element <= e
    stride < 0: part i is [s - i*|stride| - P + 1, s - i*|stride|] while its first element >= e
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._records import FrozenRecord, Record, dataclass_eq, dataclass_repr, set_field
from .errors import ModelError

__all__ = [
    "LOOP_DOMAIN",
    "MAX_NESTING",
    "OPENVINO_DOMAIN",
    "CarriedInput",
    "ConcatOutput",
    "Graph",
    "GraphBuilder",
    "InvariantInput",
    "LastOutput",
    "LoopRun",
    "LoopSpec",
    "Node",
    "NodeRef",
    "OuterInput",
    "SlicedInput",
    "Slicing",
    "Value",
    "read_only",
    "slice_count",
    "truth",
]

LOOP_DOMAIN = "cyloop"
# Subgraphs (loop bodies, If branches) nest at most this deep: deeper is a ModelError where a
# frontend reads or the engine compiles one, not a RecursionError (real models nest a few levels).
MAX_NESTING = 100
# The domain of OpenVINO layers' kernels (opset versions are per node, `Node.version`).
OPENVINO_DOMAIN = "openvino"

# The IR's classes are dataclasses (`dataclasses.fields`, `replace` and `asdict` work on them)
# whose methods are written here, not generated (see `_records`): their __init__ takes the fields
# in order, with their defaults (None for a field whose default is a new list or dict); __repr__
# and __eq__ (where the class has one) are those a dataclass makes.
_ir_class = dataclass(init=False, repr=False, eq=False)


@dataclass(init=False, repr=False, eq=False, slots=True)
class Value:
    """A named, optionally typed graph input or output. Shape entries: int, str (symbolic) or None.

    `kind` is "tensor", "sequence" (of tensors of `dtype`/`shape`), "optional" (None, or a tensor
    of `dtype`/`shape`), "optional_sequence" (None, or a sequence), "map" (ONNX's ``map(K, V)``: a
    dict whose keys are of `key_dtype`, an integer type or str's object, and whose values are
    scalars of `dtype`, or, where `value_kind` is "sequence", sequences of tensors of
    `dtype`/`shape`) or "sequence_map" (ONNX's ``seq(map(K, V))``: a list of such maps).
    """

    name: str
    dtype: np.dtype | None = None
    shape: tuple | None = None
    kind: str = "tensor"
    key_dtype: np.dtype | None = None  # a map's keys (kinds "map" and "sequence_map")
    value_kind: str = "tensor"  # a map's values: "tensor" (scalars) or "sequence"

    def __init__(self, name: str, dtype: np.dtype | None = None, shape: tuple | None = None,
                 kind: str = "tensor", key_dtype: np.dtype | None = None,
                 value_kind: str = "tensor"):
        self.name = name
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.shape = None if shape is None else tuple(shape)
        self.kind = kind
        self.key_dtype = None if key_dtype is None else np.dtype(key_dtype)
        self.value_kind = value_kind

    def __repr__(self) -> str:
        # (a map's fields only where it is one: a tensor's repr reads as it always has)
        shown = [f"name={self.name!r}", f"dtype={self.dtype!r}", f"shape={self.shape!r}",
                 f"kind={self.kind!r}"]
        if self.kind in ("map", "sequence_map"):
            shown += [f"key_dtype={self.key_dtype!r}", f"value_kind={self.value_kind!r}"]
        return f"Value({', '.join(shown)})"


class NodeRef(FrozenRecord):
    """A node of the model as the plan and errors name it, kept where the engine puts nodes of
    its own in the model's place (a fused step's ``fused_from``, a split cell's ``split_from``):
    its op, its name ("" if none) and its first output."""

    __slots__ = _fields = ("op", "name", "output")

    def __init__(self, op: str, name: str, output: str):
        set_field(self, "op", op)
        set_field(self, "name", name)
        set_field(self, "output", output)

    @property
    def label(self) -> str:
        """As errors name it (`Node.label`): its name if it has one, else its op and output."""
        if self.name:
            return f"node {self.name!r} ({self.op})"
        return f"{self.op} node producing {self.output!r}"

    @property
    def shown(self) -> str:
        """As the plan names it: its op and its name, or else the value it makes."""
        return f"{self.op} {(self.name or self.output)!r}"

    def __str__(self) -> str:
        return self.shown


def and_list(items) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = [str(item) for item in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


@dataclass(init=False, repr=False, eq=False, slots=True)
class Node:
    """One operation. An empty input name means the optional input is omitted. `version` is the
    op's version where the format states it per node (OpenVINO's ``opsetN``); otherwise the
    graph's opset for the node's domain applies. A frontend may hand nodes with equal
    attributes one shared `attrs` dict (a large IR repeats a few): read it, never change it.

    A node the engine puts in the model's place keeps the model's nodes it stands for, as
    `NodeRef`s: a fused step (engine/fuse.py) its ``fused_from``, the parts of a cell split in
    two (engine/hoist.py) the cell as ``split_from``; errors and the plan name it by them."""

    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    name: str = ""
    version: int | None = None

    def __init__(self, op_type: str, inputs: list[str], outputs: list[str],
                 attrs: dict[str, Any] | None = None, domain: str = "", name: str = "",
                 version: int | None = None):
        self.op_type = op_type
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = {} if attrs is None else attrs
        self.domain = domain
        self.name = name
        self.version = version

    __repr__ = dataclass_repr

    @property
    def ref(self) -> NodeRef:
        """This node as a `NodeRef` (a model node; see `model_nodes` for the engine's), by the
        model's op where a frontend kept it (``model_op``: the Scan or TensorIterator a loop node
        stands for)."""
        return NodeRef(self.attrs.get("model_op", self.op_type), self.name,
                       self.outputs[0] if self.outputs else "?")

    @property
    def model_nodes(self) -> tuple[NodeRef, ...]:
        """The model's nodes this node runs: those it was fused from, the cell it is a part of,
        or itself."""
        fused = self.attrs.get("fused_from")
        if fused:
            return tuple(fused)
        split = self.attrs.get("split_from")
        return (split,) if split is not None else (self.ref,)

    @property
    def label(self) -> str:
        """How errors name this node: its name if it has one, else its op and first output; a
        node of the engine's by the model's nodes it runs."""
        fused = self.attrs.get("fused_from")
        if fused:
            if len(fused) == 1:
                return fused[0].label
            first = self.outputs[0] if self.outputs else "?"
            return f"the step making {first!r} ({and_list(fused)}, fused)"
        split = self.attrs.get("split_from")
        if split is not None:
            return split.label
        return self.ref.label

    @property
    def shown(self) -> str:
        """How the plan names this node, in the model's terms (see `label`)."""
        fused = self.attrs.get("fused_from")
        if fused:
            if len(fused) == 1:
                return fused[0].shown
            return f"the fused step making {(self.outputs or ['?'])[0]!r}"
        split = self.attrs.get("split_from")
        if split is not None:
            part = "input projection" if self.op_type == "CellProjection" else "recurrence"
            return f"the {part} of {split.shown}"
        return self.ref.shown

    def subgraphs(self) -> list[Graph]:
        """The graphs this node runs (a loop's body, an If's branches)."""
        found = []
        for value in self.attrs.values():
            if isinstance(value, Graph):
                found.append(value)
            elif isinstance(value, LoopSpec):
                found.append(value.body)
        return found


@_ir_class
class Graph:
    """A computation: inputs, initializers (constants), nodes in topological order, outputs."""

    nodes: list[Node]
    inputs: list[Value]
    outputs: list[Value]
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    opsets: dict[str, int] = field(default_factory=dict)
    name: str = "graph"

    def __init__(self, nodes: list[Node], inputs: list[Value], outputs: list[Value],
                 initializers: dict[str, np.ndarray] | None = None,
                 opsets: dict[str, int] | None = None, name: str = "graph"):
        self.nodes = nodes
        self.inputs = inputs
        self.outputs = outputs
        self.initializers = {} if initializers is None else initializers
        self.opsets = {} if opsets is None else opsets
        self.name = name

    __repr__ = dataclass_repr

    def free_names(self) -> list[str]:
        """Names this graph (or any graph nested in it) reads but does not define: outer-scope
        reads.

        In first-use order, without repeats.
        """
        defined = {v.name for v in self.inputs} | set(self.initializers)
        free: dict[str, None] = {}
        for node in self.nodes:
            for name in node.inputs:
                if name and name not in defined:
                    free[name] = None
            for sub in node.subgraphs():
                for name in sub.free_names():
                    if name not in defined:
                        free[name] = None
            defined.update(o for o in node.outputs if o)
        for out in self.outputs:
            if out.name not in defined:
                free[out.name] = None
        return list(free)

    def names(self) -> set[str]:
        """Every value name this graph and the graphs nested in it use (outer-scope reads
        included): what a pass that adds a value must not name it."""
        names = {v.name for v in self.inputs} | {v.name for v in self.outputs}
        names |= set(self.initializers)
        for node in self.nodes:
            names.update(node.inputs)
            names.update(node.outputs)
            for sub in node.subgraphs():
                names |= sub.names()
        return names


def fresh_name(name: str, taken: set[str]) -> str:
    """`name`, or `name~k` for the first k that makes it unused; it is added to `taken`."""
    candidate, k = name, 1
    while candidate in taken:
        k += 1
        candidate = f"{name}~{k}"
    taken.add(candidate)
    return candidate


class OuterInput(FrozenRecord):
    """A loop operand read from the loop node's input at `index` (trip count, initial condition)."""

    __slots__ = _fields = ("index",)

    def __init__(self, index: int):
        set_field(self, "index", index)


@_ir_class
class CarriedInput:
    """Initial value from the loop node's input `outer`; then `result` of the previous iteration."""

    outer: int
    param: str
    result: str

    def __init__(self, outer: int, param: str, result: str):
        self.outer = outer
        self.param = param
        self.result = result

    __repr__ = dataclass_repr
    __eq__ = dataclass_eq


@_ir_class
class SlicedInput:
    """Part i of the loop node's input `outer` along `axis` feeds `param` at iteration i.

    With ``keep_axis=False`` (ONNX Scan) the part must have ``part_size == 1`` and the axis is
    dropped. `start` and `end` default to the whole axis in the stride's direction: 0 and -1 for a
    positive stride, -1 and 0 for a negative one.
    """

    outer: int
    param: str
    axis: int = 0
    start: int | None = None
    end: int | None = None
    stride: int = 1
    part_size: int = 1
    keep_axis: bool = False

    def __init__(self, outer: int, param: str, axis: int = 0, start: int | None = None,
                 end: int | None = None, stride: int = 1, part_size: int = 1,
                 keep_axis: bool = False):
        self.outer = outer
        self.param = param
        self.axis = axis
        self.start = (0 if stride > 0 else -1) if start is None else start
        self.end = (-1 if stride > 0 else 0) if end is None else end
        self.stride = stride
        self.part_size = part_size
        self.keep_axis = keep_axis

    __repr__ = dataclass_repr
    __eq__ = dataclass_eq


@_ir_class
class InvariantInput:
    """The loop node's input `outer` feeds `param` unchanged at every iteration. `result`, if
    set, is a body output returning it unchanged (a carried value its body passes through, read
    as invariant: engine/fuse.py `passed_through`): a last-value output of it is the input's
    value, after zero iterations too."""

    outer: int
    param: str
    result: str | None = None

    def __init__(self, outer: int, param: str, result: str | None = None):
        self.outer = outer
        self.param = param
        self.result = result

    __repr__ = dataclass_repr
    __eq__ = dataclass_eq


@_ir_class
class LastOutput:
    """The value of body output `result` after the final iteration. `carried`, if set, is the
    index (in `LoopSpec.inputs`) of the carried input whose final value it is (ONNX's Loop and
    Scan pair them by position): after zero iterations, that input's initial value, even where
    two carried values return the same body output."""

    result: str
    carried: int | None = None

    def __init__(self, result: str, carried: int | None = None):
        self.result = result
        self.carried = carried

    __repr__ = dataclass_repr
    __eq__ = dataclass_eq


@_ir_class
class ConcatOutput:
    """The values of body output `result`, one per iteration, joined along `axis`.

    ``new_axis=True`` stacks them on a new axis (ONNX Loop and Scan); otherwise they are joined
    along an existing axis (TensorIterator, Loop-5), each iteration's part as large as the result is
    along it. ``reverse=True`` (a negative stride) puts iteration i at slot n-1-i.
    """

    result: str
    axis: int = 0
    reverse: bool = False
    new_axis: bool = True
    # Set where the output stands for a sequence the body appended `result` to and that was
    # stacked after the loop (engine/stacking.py), for the plan: (the sequence's name, the
    # `NodeRef` of the node appending to it, that of the node stacking it).
    sequence: tuple | None = None

    def __init__(self, result: str, axis: int = 0, reverse: bool = False, new_axis: bool = True,
                 sequence: tuple | None = None):
        self.result = result
        self.axis = axis
        self.reverse = reverse
        self.new_axis = new_axis
        self.sequence = sequence

    __repr__ = dataclass_repr
    __eq__ = dataclass_eq

    def empty(self, declared: Value | None) -> np.ndarray:
        """The output of zero iterations: `declared`'s dims with 0 slots (unknown dims count 0)."""
        dtype = declared.dtype if declared is not None and declared.dtype is not None \
            else np.float32
        dims = list(declared.shape) if declared is not None and declared.shape is not None else []
        dims = [d if isinstance(d, int) and d >= 0 else 0 for d in dims]
        if self.new_axis:
            axis = self.axis + len(dims) + 1 if self.axis < 0 else self.axis
            dims.insert(min(max(axis, 0), len(dims)), 0)
        elif dims:
            dims[self.axis] = 0
        else:
            dims = [0]
        return np.empty(dims, dtype)

    def changed(self, label: str, index: int, i: int, what: str, before, now) -> ModelError:
        """The error for a result that changed `what` (shape, dtype) at iteration `i`."""
        return ModelError(f"{label}: concatenated output #{index} (body output {self.result!r}) "
                          f"changed {what} at iteration {i}: {before} before, {now} now")


LoopInput = CarriedInput | SlicedInput | InvariantInput
LoopOutput = LastOutput | ConcatOutput


@_ir_class
class LoopSpec:
    """One iteration operator, whatever format it came from. See the module docstring."""

    body: Graph
    inputs: list[LoopInput] = field(default_factory=list)
    outputs: list[LoopOutput] = field(default_factory=list)
    trip_count: int | OuterInput | None = None
    initial_cond: bool | OuterInput | None = None
    iteration_param: str | None = None
    cond_param: str | None = None
    cond_result: str | None = None
    negative_trip_count_unbounded: bool = False
    slices_set_trip_count: bool = True

    def __init__(self, body: Graph, inputs: list[LoopInput] | None = None,
                 outputs: list[LoopOutput] | None = None,
                 trip_count: int | OuterInput | None = None,
                 initial_cond: bool | OuterInput | None = None,
                 iteration_param: str | None = None, cond_param: str | None = None,
                 cond_result: str | None = None, negative_trip_count_unbounded: bool = False,
                 slices_set_trip_count: bool = True):
        self.body = body
        self.inputs = [] if inputs is None else inputs
        self.outputs = [] if outputs is None else outputs
        self.trip_count = trip_count
        self.initial_cond = initial_cond
        self.iteration_param = iteration_param
        self.cond_param = cond_param
        self.cond_result = cond_result
        self.negative_trip_count_unbounded = negative_trip_count_unbounded
        self.slices_set_trip_count = slices_set_trip_count

    __repr__ = dataclass_repr
    __eq__ = dataclass_eq

    def validate(self, label: str, n_outer: int) -> None:
        """Check the spec against its body; raise `ModelError` naming `label` and the port."""
        params = [v.name for v in self.body.inputs]
        results = {v.name for v in self.body.outputs}
        claimed: dict[str, str] = {}

        def claim(param, what):
            if param not in params:
                raise ModelError(f"{label}: {what} names body input {param!r}, which the body does "
                                 f"not have (body inputs: {params})")
            if param in claimed:
                raise ModelError(f"{label}: body input {param!r} is both {claimed[param]} "
                                 f"and {what}")
            claimed[param] = what

        def check_outer(index, what):
            if not 0 <= index < n_outer:
                raise ModelError(f"{label}: {what} reads loop input #{index}, but the loop has "
                                 f"{n_outer} inputs")

        def check_result(result, what):
            if result not in results:
                raise ModelError(f"{label}: {what} names body output {result!r}, which the body "
                                 f"does not have (body outputs: {sorted(results)})")

        if self.iteration_param is not None:
            claim(self.iteration_param, "the iteration number")
        if self.cond_param is not None:
            claim(self.cond_param, "the condition")
        if self.cond_result is not None:
            check_result(self.cond_result, "the condition")
        for operand, what in ((self.trip_count, "trip count"), (self.initial_cond, "condition")):
            if isinstance(operand, OuterInput):
                check_outer(operand.index, f"the {what}")
        for k, inp in enumerate(self.inputs):
            kind = type(inp).__name__
            what = f"{kind} #{k}"
            check_outer(inp.outer, what)
            claim(inp.param, what)
            if isinstance(inp, CarriedInput) or isinstance(inp, InvariantInput) and inp.result:
                check_result(inp.result, what)
            elif isinstance(inp, SlicedInput):
                if inp.stride == 0:
                    raise ModelError(f"{label}: sliced input {inp.param!r} has stride 0")
                if inp.part_size < 1:
                    raise ModelError(f"{label}: sliced input {inp.param!r} has part_size "
                                     f"{inp.part_size}; it must be at least 1")
                if not inp.keep_axis and inp.part_size != 1:
                    raise ModelError(f"{label}: sliced input {inp.param!r} drops its axis, so its "
                                     f"part_size must be 1, not {inp.part_size}")
        unclaimed = [p for p in params if p not in claimed]
        if unclaimed:
            raise ModelError(f"{label}: body inputs {unclaimed} are fed by nothing (neither the "
                             "iteration number, the condition, nor a loop input)")
        for k, out in enumerate(self.outputs):
            check_result(out.result, f"{type(out).__name__} #{k}")
            paired = getattr(out, "carried", None)
            if paired is not None and not (0 <= paired < len(self.inputs) and isinstance(
                    self.inputs[paired], (CarriedInput, InvariantInput))
                    and self.inputs[paired].result == out.result):
                raise ModelError(f"{label}: LastOutput #{k} names input #{paired} as its carried "
                                 f"value, which is not a carried input returning {out.result!r}")


    @property
    def iteration_dtype(self) -> np.dtype:
        """The type of the iteration number: the body's declared integer type, else int64."""
        declared = next((v.dtype for v in self.body.inputs if v.name == self.iteration_param),
                        None)
        return declared if declared is not None and declared.kind in "iu" \
            else np.dtype(np.int64)

    def resolve(self, args, label: str, limits=None) -> LoopRun:
        """How one run of this loop goes, from the loop node's operands `args`.

        The one reading of the spec both drivers share: the trip count (a negative one is zero,
        or unbounded where `negative_trip_count_unbounded`), the first condition (an omitted one
        is true), every sliced input's part count (they must agree where they set the trip
        count; otherwise, as in Loop-5, running past the fewest parts is an error), and where the
        run must stop with an error. Raises `ModelError` naming `label` for bad operands.
        `limits` (the run's `RunLimits`, or None): a loop that will run more iterations than the
        run has left (its `budget`) is refused before its first, with `limits.refuse`'s error.
        """
        trip = self.trip_count
        if isinstance(trip, OuterInput):
            trip = args[trip.index]
            if trip is not None:
                trip = _one_integer(trip, label)
        if trip is not None and trip < 0:
            trip = None if self.negative_trip_count_unbounded else 0
        go = True
        if isinstance(self.initial_cond, OuterInput):
            if args[self.initial_cond.index] is not None:
                go = truth(args[self.initial_cond.index], "condition", label)
        elif self.initial_cond is not None:
            go = bool(self.initial_cond)

        slicings = {}
        for k, inp in enumerate(self.inputs):
            if type(inp) is SlicedInput:
                slicings[k] = Slicing.of(inp, args[inp.outer], label)
        slice_limit = None
        if slicings:
            counts = {s.count for s in slicings.values()}
            if self.slices_set_trip_count:
                if len(counts) > 1:
                    detail = ", ".join(f"{s.desc.param!r}: {s.count}" for s in slicings.values())
                    raise ModelError(f"{label}: sliced inputs disagree on the number of "
                                     f"iterations ({detail})")
                n_slices = counts.pop()
                trip = n_slices if trip is None else min(trip, n_slices)
            else:
                slice_limit = min(counts)
        stop_at = slice_limit
        budget = None if limits is None else limits.budget
        # Without a condition result, a loop that starts runs `trip` iterations unless an error
        # stops it; it will meet the budget's end first if the slices do not run out before.
        exact = trip if self.cond_result is None and go else None
        if (exact is not None and budget is not None and exact > budget
                and (stop_at is None or stop_at > budget)):
            raise limits.refuse(label, exact)
        if exact is not None and stop_at is not None and exact > stop_at:
            exact = None
        bound = trip
        for n in (stop_at, budget):
            if n is not None and (bound is None or n < bound):
                bound = n
        return LoopRun(trip, go, slicings, stop_at, exact, bound)

    def zero_iteration_value(self, index: int, carried: dict[int, object], label: str):
        """Last-value output #index of a loop that ran no iteration: the initial value of the
        carried input its result feeds, or of the invariant it passes through (`carried`: input
        index -> value)."""
        out = self.outputs[index]
        result = out.result
        if getattr(out, "carried", None) is not None:
            return carried[out.carried]
        for k, inp in enumerate(self.inputs):
            if isinstance(inp, (CarriedInput, InvariantInput)) and inp.result == result:
                return carried[k]
        raise ModelError(f"{label}: output #{index} (body output {result!r}) has no value: the "
                         "loop ran zero iterations and it is not a carried value")

    def declared_output(self, index: int) -> Value | None:
        """The body's declaration of output #index's result (for its zero-iteration shape)."""
        return next((v for v in self.body.outputs if v.name == self.outputs[index].result),
                    None)


class Slicing(FrozenRecord):
    """One sliced input in one run: its value (read-only), the axis, how many parts it has and
    where part 0 starts along the axis (part i starts at ``first + i * desc.stride``)."""

    _fields = ("desc", "value", "axis", "count", "first")

    def __init__(self, desc: SlicedInput, value: np.ndarray, axis: int, count: int, first: int):
        set_field(self, "desc", desc)
        set_field(self, "value", value)
        set_field(self, "axis", axis)
        set_field(self, "count", count)
        set_field(self, "first", first)

    @classmethod
    def of(cls, desc: SlicedInput, value, label: str) -> Slicing:
        x = read_only(np.asarray(value))
        axis = desc.axis + x.ndim if desc.axis < 0 else desc.axis
        if not 0 <= axis < x.ndim:
            raise ModelError(f"{label}: sliced input {desc.param!r} has axis {desc.axis}, but the "
                             f"value has rank {x.ndim} (shape {x.shape})")
        try:
            count, first = slice_count(x.shape[axis], desc.start, desc.end, desc.stride,
                                       desc.part_size)
        except ValueError as e:
            raise ModelError(f"{label}: sliced input {desc.param!r}: {e}") from None
        return cls(desc, x, axis, count, first)

    def part(self, i: int) -> np.ndarray:
        """Part i, by plain indexing (a read-only view)."""
        lo = self.first + i * self.desc.stride
        index = [slice(None)] * self.value.ndim
        index[self.axis] = slice(lo, lo + self.desc.part_size) if self.desc.keep_axis else lo
        return self.value[tuple(index)]


class LoopRun(Record):
    """One run of a loop, read from its operands by `LoopSpec.resolve`.

    The loop runs while its condition holds and fewer than `trip_count` iterations have run
    (None: unbounded); iteration `stop_at` (past a Loop-5 input's last part) must not run:
    `stop_error` is what it raises. `exact` is the number of iterations when nothing can stop
    the loop early, `bound` the most it can run (with what the run's limits leave; both None
    when unknown). Made for each run and read, never changed.
    """

    __slots__ = _fields = ("trip_count", "go", "slicings", "stop_at", "exact", "bound")

    def __init__(self, trip_count: int | None, go: bool, slicings: dict[int, Slicing],
                 stop_at: int | None, exact: int | None, bound: int | None):
        self.trip_count = trip_count
        self.go = go
        self.slicings = slicings
        self.stop_at = stop_at
        self.exact = exact
        self.bound = bound

    def stop_error(self, i: int, label: str) -> ModelError:
        short = next(s for s in self.slicings.values() if s.count <= i)
        return ModelError(f"{label}: iteration {i} runs past the last slice of sliced input "
                          f"{short.desc.param!r} ({short.count} parts)")


def truth(value, what: str, label: str) -> bool:
    """A condition's value: one boolean (any one-element array); `ModelError` otherwise."""
    if type(value) is not np.ndarray:
        value = np.asarray(value)
    if value.size != 1:
        raise ModelError(f"{label}: the {what} must be one boolean, got shape {value.shape}")
    return bool(value.item())


def _one_integer(value, label: str) -> int:
    """A trip count's value: one integer (any one-element integer array); `ModelError`
    otherwise."""
    if type(value) is not np.ndarray:
        value = np.asarray(value)
    if value.size != 1 or value.dtype.kind not in "iu":
        raise ModelError(f"{label}: the trip count must be one integer, got shape "
                         f"{value.shape} dtype {value.dtype}")
    return value.item()


def read_only(value):
    """A read-only view of an array (the caller's data is never written through it); anything
    else as it is."""
    if isinstance(value, np.ndarray) and value.flags.writeable:
        value = value.view()
        value.flags.writeable = False
    return value


def slice_count(dim: int, start: int, end: int, stride: int, part_size: int) -> tuple[int, int]:
    """docs/design.md's TensorIterator slicing rule: (number of parts, first index of part 0) for
    an axis of size `dim`.

    Part i starts at ``first + i * stride``. A positive `end` at or past the axis is clamped to its
    last index. Raises ValueError (the caller names the input) for a start outside a non-empty
    axis, if a part would fall outside the axis, or for a zero stride or a part size below 1
    (an empty axis has no parts wherever they start: a zero-iteration Scan).

    docs/design.md also gives ``n = (abs(e - s) + 1 - P) // abs(stride) + 1``; that agrees with
    the rule whenever the range runs in the stride's direction, and where it does not (say
    stride > 0 and e < s) the rule, which yields no parts, is what is implemented.
    """
    if stride == 0 or part_size < 1:
        raise ValueError(f"stride must be non-zero and part_size at least 1 (stride={stride}, "
                         f"part_size={part_size})")
    s = start + dim if start < 0 else start
    if dim and not 0 <= s < dim:
        raise ValueError(f"start {start} is outside the axis of size {dim}")
    # An end at or past the axis means "to the end" (IRs write end = D): clamped to D - 1.
    e = end + dim if end < 0 else min(end, dim - 1)
    size = part_size
    if stride > 0:
        n = (e - s + 1 - size) // stride + 1
        first = s
    else:
        n = (s - e + 1 - size) // -stride + 1
        first = s - size + 1
    n = max(n, 0)
    if n:
        last = first + (n - 1) * stride
        low, high = min(first, last), max(first, last) + size
        if low < 0 or high > dim:
            raise ValueError(f"parts span [{low}, {high}) but the axis has size {dim} "
                             f"(start={start}, end={end}, stride={stride}, part_size={part_size})")
    return n, first


class GraphBuilder:
    """Build a `Graph` in code, with no file format involved.

    >>> b = GraphBuilder(opset=17)
    >>> x = b.input("x", np.float32, (3,))
    >>> b.output(b.node("Add", x, b.const(np.float32(1))))
    >>> graph = b.build()
    """

    def __init__(self, name: str = "graph", opset: int = 17, opsets: dict[str, int] | None = None):
        self.name = name
        self.opsets = {"": opset, LOOP_DOMAIN: 1}
        self.opsets.update(opsets or {})
        self._inputs: list[Value] = []
        self._outputs: list[Value] = []
        self._nodes: list[Node] = []
        self._initializers: dict[str, np.ndarray] = {}
        self._counter = 0

    def fresh(self, hint: str = "t") -> str:
        self._counter += 1
        return f"{hint}_{self._counter}"

    def input(self, name: str, dtype=None, shape=None) -> str:
        self._inputs.append(Value(name, dtype, shape))
        return name

    def const(self, value, name: str | None = None) -> str:
        name = name or self.fresh("const")
        self._initializers[name] = np.asarray(value)
        return name

    def node(self, op_type: str, *inputs: str, outputs: int | list[str] = 1, domain: str = "",
             name: str = "", **attrs) -> Any:
        """Add a node; returns its output name (or a tuple of names for several outputs)."""
        if isinstance(outputs, int):
            outputs = [self.fresh(op_type.lower()) for _ in range(outputs)]
        self._nodes.append(Node(op_type, list(inputs), list(outputs), attrs, domain, name))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def loop(self, body: Graph, inputs: list[tuple[str, LoopInput]], outputs: list[LoopOutput],
             trip_count: int | str | None = None, initial_cond: bool | str | None = None,
             name: str = "", output_names: list[str] | None = None, **spec_fields) -> Any:
        """Add a loop node. `inputs` pairs each outer value name with its descriptor, whose own
        ``outer`` field is filled in on a copy; a str trip count or condition names an outer
        value.
        Returns the output name(s): `output_names`, or fresh ones."""
        node_inputs: list[str] = []

        def operand(value):
            if isinstance(value, str):
                node_inputs.append(value)
                return OuterInput(len(node_inputs) - 1)
            return value

        spec = LoopSpec(body, trip_count=operand(trip_count), initial_cond=operand(initial_cond),
                        outputs=list(outputs), **spec_fields)
        for outer_name, desc in inputs:
            node_inputs.append(outer_name)
            spec.inputs.append(dataclasses.replace(desc, outer=len(node_inputs) - 1))
        names = list(output_names) if output_names else [self.fresh("loop_out") for _ in outputs]
        self._nodes.append(Node("Loop", node_inputs, names, {"spec": spec}, LOOP_DOMAIN, name))
        return names[0] if len(names) == 1 else tuple(names)

    def output(self, *names: str, dtype=None, shape=None) -> None:
        for name in names:
            self._outputs.append(Value(name, dtype, shape))

    def build(self) -> Graph:
        return Graph(list(self._nodes), list(self._inputs), list(self._outputs),
                     dict(self._initializers), dict(self.opsets), self.name)
