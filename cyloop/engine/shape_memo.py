"""Shape arithmetic computed once per input shapes (docs/design.md, "Shape arithmetic").

Exporters surround a model's loops with nodes computing from the inputs' shapes alone: tf2onnx
reads a batch size with Shape, slices it, casts it, packs it with constants into the shape of
an initial state, Expands zeros to it, and compares a time-step count with 0 for the loop's
first condition; a dozen nodes of a few numbers each, at a µs or so each, on every run. Their
values follow from the shapes of the graph's inputs (and constants) alone, so a graph's runner
remembers them per input shapes (`_core.Program`): a run whose inputs have shapes seen before
binds the values that run computed and skips those nodes.

A node counts as shape arithmetic (`ShapeMemo.steps`) when its op is a pure function of its
operands (`_PURE`) and each operand is a constant or shape arithmetic, or when it reads only its
operand's shape (`_SHAPE_READERS`) and that operand's shape follows from the inputs' shapes: an
input, a constant, shape arithmetic, or what an op keeping its operand's shape (`_SHAPE_KEEPING`:
a Transpose, a Cast, ...) makes of such a value. The graph's top level only: a loop body's shape
work is hoisted (engine/hoist.py), and a branch runs when its condition says.
"""

from __future__ import annotations

from .._records import Record
from ..ir import OPENVINO_DOMAIN

__all__ = ["ShapeMemo", "shape_memo"]

# Ops that read only their first operand's shape.
_SHAPE_READERS = {("", "Shape"), ("", "Size"), (OPENVINO_DOMAIN, "ShapeOf")}

# Ops whose result's shape is their first operand's, or a permutation of it by an attribute.
_SHAPE_KEEPING = {("", op) for op in ("Transpose", "Cast", "Identity", "Neg", "Abs", "Relu",
                                       "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Sin", "Cos",
                                       "Erf", "Softplus", "Floor", "Ceil", "Round", "Sign",
                                       "Not", "IsNaN", "IsInf")} \
    | {(OPENVINO_DOMAIN, op) for op in ("Convert", "Negative", "Abs", "Relu", "Sigmoid", "Tanh",
                                         "Exp", "Log", "Sqrt", "Sin", "Cos", "Erf", "Floor",
                                         "Ceiling", "Sign", "LogicalNot")}

# Ops whose results are a function of their operands' values alone: no randomness, no state,
# no subgraph, nothing read from outside.
_PURE = _SHAPE_READERS | _SHAPE_KEEPING | {("", op) for op in (
    "CastLike", "Slice", "Squeeze", "Unsqueeze", "Concat", "Gather", "Reshape", "Add", "Sub",
    "Mul", "Div", "Mod", "Max", "Min", "Equal", "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "And", "Or", "Xor", "Where", "Range", "ConstantOfShape", "Expand",
    "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin", "Tile", "Flatten")} \
    | {(OPENVINO_DOMAIN, op) for op in (
        "Squeeze", "Unsqueeze", "Concat", "Gather", "StridedSlice", "Slice", "Broadcast",
        "Reshape", "Add", "Subtract", "Multiply", "Divide", "FloorMod", "Maximum", "Minimum",
        "Equal", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr",
        "LogicalXor", "Select", "Range", "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin",
        "Tile")}


class ShapeMemo(Record):
    """A graph's shape arithmetic: `steps`, the indices of its steps; `keys`, the positions
    among the graph's inputs whose shapes key the values; `slots`, the slots of the values the
    rest of the graph reads (or returns), which a run binds in place of running `steps`."""

    _fields = ("steps", "keys", "slots")

    def __init__(self, steps: tuple[int, ...], keys: tuple[int, ...], slots: tuple[int, ...]):
        self.steps = steps
        self.keys = keys
        self.slots = slots


def shape_memo(steps: list, input_slots: tuple[int, ...], inputs: list, constants: dict,
               output_slots: tuple[int, ...]) -> ShapeMemo | None:
    """The shape arithmetic among compiled `steps` (compile.CompiledStep, in schedule order),
    or None where there is none the rest of the graph reads. `inputs`: the graph's declared
    inputs (ir.Value), whose slots `input_slots` begins with; only tensors' shapes count."""
    tensors = {slot: k for k, (slot, value) in enumerate(zip(input_slots, inputs))
               if value.kind == "tensor"}
    fixed = set(constants)  # slots whose values follow from the inputs' shapes
    shaped = set(constants) | set(tensors)  # slots whose shapes do
    read_shapes: set[int] = set()  # inputs whose shapes some shape arithmetic reads
    sources: dict[int, set[int]] = {slot: {slot} for slot in tensors}  # slot -> inputs shaping it
    chosen = []
    for index, step in enumerate(steps):
        node = step.node
        op = (node.domain, node.op_type)
        operands = [slot for slot in step.inputs if slot >= 0]
        if not operands or node.subgraphs() or op not in _PURE:
            continue
        if op in _SHAPE_READERS and operands[0] in shaped \
                and all(slot in fixed for slot in operands[1:]):
            read_shapes |= sources.get(operands[0], set())
        elif not all(slot in fixed for slot in operands):
            if op in _SHAPE_KEEPING and operands[0] in shaped:
                for slot in step.outputs:
                    if slot >= 0:
                        shaped.add(slot)
                        sources[slot] = sources.get(operands[0], set())
            continue
        chosen.append(index)
        for slot in step.outputs:
            if slot >= 0:
                fixed.add(slot)
                shaped.add(slot)
    if not chosen:
        return None
    made = {slot for index in chosen for slot in steps[index].outputs if slot >= 0}
    skipped = set(chosen)
    read = {slot for index, step in enumerate(steps) if index not in skipped
            for slot in step.inputs if slot in made}
    read.update(slot for slot in output_slots if slot in made)
    if not read:
        return None
    keys = tuple(sorted(tensors[slot] for slot in read_shapes))
    return ShapeMemo(tuple(chosen), keys, tuple(sorted(read)))
