"""Appends stacked in place: a loop that appends one tensor per iteration to a sequence which
is then stacked runs as a loop with a concatenated output.

Exporters write "collect a tensor each iteration, stack them after the loop" (PyTorch's
``torch.stack`` of a list appended to in a loop, for one) as

    empty = SequenceEmpty()
    ..., seq = Loop(..., empty)           the body: seq_out = SequenceInsert(seq_in, item)
    joined = ConcatFromSequence(seq, axis=0, new_axis=1)

which is a scan output spelled through a sequence. Run as written, every iteration makes a new
sequence and the stack at the end copies every element once more. This pass rewrites it to what
it means: `item` becomes a concatenated output of the loop (preallocated and written in place;
copied from whole chunks where it is hoisted), and the ConcatFromSequence becomes a
``StackedSequence`` node (accel/fused.py) that hands that output on. Its values are the same, bit
for bit: np.stack copies the same elements to the same places.

The rewrite applies only where nothing else can tell: the sequence starts as a SequenceEmpty
this graph makes, the body reads it only to append to it (a SequenceInsert without a position)
and hands out nothing else of it, and the loop's final sequence is read only by that
ConcatFromSequence (new axis 0), not returned. Zero iterations stay an error, as np.stack of no
arrays is; an item that changes shape between iterations is a ModelError naming the iteration
(it was an ExecutionError of the stack).

Only the Cython driver rewrites; the reference driver runs the sequence as written, and the
tests compare the two.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import (
    LOOP_DOMAIN,
    CarriedInput,
    ConcatOutput,
    Graph,
    LastOutput,
    LoopSpec,
    Node,
    OuterInput,
    Value,
)
from .fuse import Uses

__all__ = ["stack_appended_sequences"]

_ONNX_DOMAINS = ("", "ai.onnx")


def stack_appended_sequences(graph: Graph) -> Graph:
    """`graph` with every appended-then-stacked sequence of its loops rewritten (see the module
    docstring); the same graph if there is none."""
    nodes = list(graph.nodes)
    changed = False
    for loop in [node for node in graph.nodes if _is_loop(node)]:
        while True:  # one sequence at a time: each rewrite makes a new loop node
            uses = Uses(dataclasses.replace(graph, nodes=nodes))
            found = _appended_sequence(loop, nodes, uses)
            if found is None:
                break
            nodes, loop = _rewritten(nodes, loop, *found, uses)
            changed = True
    return dataclasses.replace(graph, nodes=nodes) if changed else graph


def _is_loop(node: Node) -> bool:
    return node.domain == LOOP_DOMAIN and node.op_type == "Loop" \
        and isinstance(node.attrs.get("spec"), LoopSpec)


def _is_onnx(node: Node | None, op_type: str) -> bool:
    return node is not None and node.domain in _ONNX_DOMAINS and node.op_type == op_type


def _attr_is(node: Node, name: str, default, value: int) -> bool:
    """Whether `node`'s integer attribute `name` (`default` if absent) is `value`; an attribute
    of another type is left for the kernel to refuse."""
    attr = node.attrs.get(name, default)
    return isinstance(attr, (int, np.integer)) and not isinstance(attr, bool) and attr == value


def _appended_sequence(loop: Node, nodes: list[Node], uses: Uses):
    """(carried input index, output index, the body's SequenceInsert, the stacking node) of the
    first sequence of `loop` the rewrite applies to, or None."""
    spec: LoopSpec = loop.attrs["spec"]
    producers = {name: node for node in nodes for name in node.outputs if name}
    body_uses = Uses(spec.body)
    body_outputs = [v.name for v in spec.body.outputs]
    for k, inp in enumerate(spec.inputs):
        if not isinstance(inp, CarriedInput) or not _is_onnx(producers.get(
                loop.inputs[inp.outer]), "SequenceEmpty"):
            continue
        insert = body_uses.only_reader(inp.param)
        if not (_is_onnx(insert, "SequenceInsert") and len(insert.outputs) == 1
                and len(insert.inputs) >= 2 and insert.inputs[0] == inp.param
                and insert.inputs[1] and not any(insert.inputs[2:])
                and insert.outputs[0] == inp.result
                and not body_uses.readers.get(inp.result)
                and body_outputs.count(inp.result) == 1 and inp.result != spec.cond_result):
            continue
        finals = [j for j, out in enumerate(spec.outputs) if out.result == inp.result]
        if len(finals) != 1 or not isinstance(spec.outputs[finals[0]], LastOutput):
            continue
        final = loop.outputs[finals[0]]
        stack = uses.only_reader(final) if final else None
        if not (_is_onnx(stack, "ConcatFromSequence") and stack.inputs == [final]
                and _attr_is(stack, "new_axis", 0, 1) and _attr_is(stack, "axis", None, 0)):
            continue
        return k, finals[0], insert, stack
    return None


def _rewritten(nodes: list[Node], loop: Node, k: int, j: int, insert: Node, stack: Node,
               uses: Uses) -> tuple[list[Node], Node]:
    """`nodes` with carried input #k (whose final value is output #j) of `loop` turned into a
    concatenated output of the inserted item, and `stack` into a StackedSequence of it."""
    spec: LoopSpec = loop.attrs["spec"]
    carried = spec.inputs[k]
    item, final, empty = insert.inputs[1], loop.outputs[j], loop.inputs[carried.outer]
    body = spec.body
    outputs = [v for v in body.outputs if v.name != carried.result]
    if item not in {v.name for v in outputs}:
        outputs.append(Value(item))
    body = dataclasses.replace(
        body, nodes=[node for node in body.nodes if node is not insert],
        inputs=[v for v in body.inputs if v.name != carried.param], outputs=outputs)

    def shifted(index):  # loop input numbers after the carried one's is removed
        return index - 1 if index > carried.outer else index

    def operand(value):
        return OuterInput(shifted(value.index)) if isinstance(value, OuterInput) else value

    def renumbered(out):  # (a final value's carried input, past the one removed: one less)
        if isinstance(out, LastOutput) and out.carried is not None and out.carried > k:
            return dataclasses.replace(out, carried=out.carried - 1)
        return out

    inputs = [dataclasses.replace(inp, outer=shifted(inp.outer))
              for m, inp in enumerate(spec.inputs) if m != k]
    spec = dataclasses.replace(
        spec, body=body, inputs=inputs,
        outputs=[renumbered(out) for m, out in enumerate(spec.outputs) if m != j]
        + [ConcatOutput(item, axis=0, new_axis=True, sequence=(
            final, insert.ref, stack.ref))],
        trip_count=operand(spec.trip_count), initial_cond=operand(spec.initial_cond))
    new_loop = Node(loop.op_type, [name for m, name in enumerate(loop.inputs)
                                   if m != carried.outer],
                    [name for m, name in enumerate(loop.outputs) if m != j] + [final],
                    {**loop.attrs, "spec": spec}, loop.domain, loop.name, loop.version)
    stacked = Node("StackedSequence", [final], list(stack.outputs), {}, LOOP_DOMAIN, stack.name)
    # The SequenceEmpty goes too if nothing else reads what it makes.
    unread = uses.only_reader(empty) is loop and loop.inputs.count(empty) == 1
    rewritten = []
    for node in nodes:
        if node is loop:
            rewritten.append(new_loop)
        elif node is stack:
            rewritten.append(stacked)
        elif not (unread and node.outputs == [empty] and _is_onnx(node, "SequenceEmpty")):
            rewritten.append(node)
    return rewritten, new_loop
