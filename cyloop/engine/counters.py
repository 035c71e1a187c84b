"""A loop's own step counter read as the iteration number, so that what it indexes is hoisted.

Exporters of while loops (tf2onnx's) carry a step counter of their own beside ONNX Loop's
iteration number and index their inputs by it: ``x_t = Gather(xs, t)``, with ``t + 1`` carried
to the next iteration. A carried value depends on the previous iteration, so nothing read
through it could leave the body (engine/hoist.py): not the row of `xs`, nor the input
projection made of it, which then runs as one small product an iteration.

When the counter's initial value is a constant 0 of the outer graph and its carried result is
``Add(t, 1)`` with a body constant 1 (both 0-d, of the counter's integer type), t at iteration i
is i, wrapping as its type wraps: ``Cast(i, to=t's type)``, or i itself where the types agree.
The body reads that instead of its param. The counter stays carried (its final value may be a
loop output, and ``t + 1`` now reads the iteration number too); nothing reads its param.

Only a counter some Gather indexes by is read so: then the rows it reads, and what is made of
them, leave the body. A counter only stepped and compared would take the loop's scalar
arithmetic out of the body alone, for the fixed cost a run of a hoisted part (a loop of a few
iterations, tf2onnx's and jax2onnx's while loops, ran slower so).

The Cython driver alone rewrites; the reference driver runs bodies as written, the oracle.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import LOOP_DOMAIN, CarriedInput, Graph, LoopSpec, Node, fresh_name

__all__ = ["counters_as_iterations"]


def counters_as_iterations(graph: Graph) -> Graph:
    """`graph` with each of its loops' step counters read as the iteration number (the same
    graph when no loop has one)."""
    nodes = [_counted(node, graph.initializers) for node in graph.nodes]
    if all(new is old for new, old in zip(nodes, graph.nodes)):
        return graph
    return dataclasses.replace(graph, nodes=nodes)


def _counted(node: Node, initializers: dict) -> Node:
    """A loop node whose body reads its counters as the iteration number, or `node` itself."""
    spec = node.attrs.get("spec")
    if node.domain != LOOP_DOMAIN or node.op_type != "Loop" or not isinstance(spec, LoopSpec) \
            or not spec.iteration_param:
        return node
    body = spec.body
    declared = {value.name: value.dtype for value in body.inputs}
    producers = {name: made for made in body.nodes for name in made.outputs if name}
    # Read other than by the body's own nodes: an output, or a name a nested graph reads.
    elsewhere = {value.name for value in body.outputs}
    for made in body.nodes:
        for sub in made.subgraphs():
            elsewhere.update(sub.free_names())
    taken = body.names()
    # Values some ONNX Gather indexes by (its rows are what reading the counter so hoists).
    indexing = {made.inputs[1] for made in body.nodes
                if made.op_type == "Gather" and made.domain in ("", "ai.onnx")
                and len(made.inputs) == 2 and made.inputs[0] != made.inputs[1]}
    counters: dict[str, str] = {}  # counter param -> the name of what the body reads instead
    made: list[Node] = []
    for inp in spec.inputs:
        if not isinstance(inp, CarriedInput) or not 0 <= inp.outer < len(node.inputs):
            continue
        dtype = declared.get(inp.param)
        if dtype is None or dtype.kind not in "iu" or inp.param in elsewhere \
                or inp.param not in indexing \
                or not _is(initializers.get(node.inputs[inp.outer]), dtype, 0) \
                or not _steps_by_one(producers.get(inp.result), inp.param, body, dtype):
            continue
        if dtype == spec.iteration_dtype:
            counters[inp.param] = spec.iteration_param
            continue
        name = fresh_name(f"{inp.param}, the iteration number", taken)
        made.append(Node("Cast", [spec.iteration_param], [name], {"to": dtype}))
        counters[inp.param] = name
    if not counters:
        return node
    nodes = made + [dataclasses.replace(n, inputs=[counters.get(name, name) for name in n.inputs])
                    if any(name in counters for name in n.inputs) else n for n in body.nodes]
    new_body = dataclasses.replace(body, nodes=nodes)
    return dataclasses.replace(node, attrs={**node.attrs,
                                            "spec": dataclasses.replace(spec, body=new_body)})


def _is(value, dtype: np.dtype, number: int) -> bool:
    """Whether `value` is a 0-d array of `dtype` holding `number`."""
    return isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype == dtype \
        and int(value) == number


def _steps_by_one(add: Node | None, param: str, body: Graph, dtype: np.dtype) -> bool:
    """Whether `add` is an ONNX ``Add(param, 1)`` (either order) by a 0-d body constant of
    `dtype` (opset 7's Add: no broadcast attributes)."""
    if add is None or add.op_type != "Add" or add.domain not in ("", "ai.onnx") or add.attrs \
            or len(add.inputs) != 2 or add.inputs.count(param) != 1:
        return False
    step = add.inputs[1] if add.inputs[0] == param else add.inputs[0]
    return _is(body.initializers.get(step), dtype, 1)
