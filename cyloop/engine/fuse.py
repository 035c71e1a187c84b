"""Fusion: a pattern of ordinary ops in a loop body replaced by one kernel that computes the same.

A loop body runs its nodes once per iteration, so a node costs its dispatch plus one numpy pass
or more every step. Where exporters spell a recurrent cell out op by op, the pass recognises it
and puts one node of the engine's domain in its place, whose kernel (ops/fused.py) makes fewer,
longer passes. The values the pattern hands out keep their names; every value only the pattern
read disappears with it. Results agree with the unfused body to rounding.

The one pattern so far is the LSTM cell's gate arithmetic as ONNX models write it (and as an
OpenVINO IR converted from them does), from the pre-activations ``pre`` and the cell state ``c``:

    f, i, g, o = Split(pre, 4 equal parts, axis)        (in any order)
    c' = Add(Mul(Sigmoid(f), c), Mul(Sigmoid(i), Tanh(g)))
    h' = Mul(Sigmoid(o), Tanh(c'))                      (operands of Mul and Add in any order)

which becomes ``LSTMGates(pre, c) -> (h', c')``. The matrix products that make ``pre`` are left
to their own kernels (measured orientation, the input one hoisted).

Only the Cython driver fuses; the reference driver runs bodies as written, and the tests compare
the two.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np

from ..ir import LOOP_DOMAIN, OPENVINO_DOMAIN, Graph, LoopSpec, Node

__all__ = ["fuse_loop"]

# The ops of the pattern in each format's spelling.
_ONNX = {"Sigmoid": "Sigmoid", "Tanh": "Tanh", "Mul": "Mul", "Add": "Add"}
_OPENVINO = {"Sigmoid": "Sigmoid", "Tanh": "Tanh", "Mul": "Multiply", "Add": "Add"}
_SPELLINGS = {"": _ONNX, "ai.onnx": _ONNX, OPENVINO_DOMAIN: _OPENVINO}


def fuse_loop(spec: LoopSpec) -> LoopSpec:
    """`spec` with every recognised pattern in its body fused (the same spec if none is)."""
    body = _fuse_lstm_gates(spec.body)
    return spec if body is spec.body else dataclasses.replace(spec, body=body)


class _Uses:
    """Who reads each value of a graph, and which values leave it."""

    def __init__(self, graph: Graph):
        self.readers: dict[str, list[Node]] = defaultdict(list)
        for node in graph.nodes:
            for name in node.inputs:
                if name:
                    self.readers[name].append(node)
            for sub in node.subgraphs():  # a nested graph's outer reads count as reads
                for name in sub.free_names():
                    self.readers[name].append(node)
        self.results = {v.name for v in graph.outputs}

    def only_reader(self, name: str) -> Node | None:
        """The one node reading `name`, if exactly one does and the graph does not return it."""
        readers = self.readers.get(name, [])
        return readers[0] if len(readers) == 1 and name not in self.results else None


def _is(node: Node | None, role: str) -> bool:
    spelling = _SPELLINGS.get(node.domain) if node is not None else None
    return spelling is not None and node.op_type == spelling[role]


def _split_axis(node: Node, graph: Graph) -> int | None:
    """The axis of a Split into 4 equal parts, or None if `node` is not one."""
    if len(node.outputs) != 4 or not all(node.outputs):
        return None
    if node.domain in ("", "ai.onnx") and node.op_type == "Split":
        if any(node.inputs[1:]) or "split" in node.attrs \
                or node.attrs.get("num_outputs", 4) != 4:
            return None
        return int(node.attrs.get("axis", 0))
    if node.domain == OPENVINO_DOMAIN and node.op_type == "Split" and len(node.inputs) == 2:
        axis = graph.initializers.get(node.inputs[1])
        if axis is None or np.size(axis) != 1 or int(node.attrs.get("num_splits", 4)) != 4:
            return None
        return int(np.asarray(axis).reshape(()))
    return None


def _other(node: Node, name: str) -> str | None:
    """The other input of a two-input node, one of whose inputs is `name`."""
    if len(node.inputs) != 2 or name not in node.inputs:
        return None
    a, b = node.inputs
    return b if a == name else a


def _match_lstm_gates(split: Node, graph: Graph, uses: _Uses):
    """(fused node, the nodes it replaces) for the gate arithmetic fed by `split`, or None."""
    axis = _split_axis(split, graph)
    if axis is None:
        return None
    activations = [uses.only_reader(part) for part in split.outputs]
    if not all(a is not None and len(a.inputs) == 1 and len(a.outputs) == 1
               for a in activations):
        return None
    tanh_at = [k for k, a in enumerate(activations) if _is(a, "Tanh")]
    if len(tanh_at) != 1 or sum(_is(a, "Sigmoid") for a in activations) != 3:
        return None
    g_at = tanh_at[0]
    g_value = activations[g_at].outputs[0]
    mul_ig = uses.only_reader(g_value)
    if not _is(mul_ig, "Mul"):
        return None
    sigmoid_outputs = {activations[k].outputs[0]: k for k in range(4) if k != g_at}
    i_value = _other(mul_ig, g_value)
    if i_value not in sigmoid_outputs or uses.only_reader(i_value) is not mul_ig:
        return None
    add = uses.only_reader(mul_ig.outputs[0])
    if not _is(add, "Add"):
        return None
    mul_fc = _producer(graph, _other(add, mul_ig.outputs[0]))
    if not _is(mul_fc, "Mul") or uses.only_reader(mul_fc.outputs[0]) is not add:
        return None
    f_value = next((v for v in mul_fc.inputs if v in sigmoid_outputs and v != i_value), None)
    if f_value is None or uses.only_reader(f_value) is not mul_fc:
        return None
    c_in = _other(mul_fc, f_value)
    c_out = add.outputs[0]
    tanh_c = next((n for n in uses.readers.get(c_out, []) if _is(n, "Tanh")), None)
    if tanh_c is None:
        return None
    mul_h = uses.only_reader(tanh_c.outputs[0])
    if not _is(mul_h, "Mul"):
        return None
    o_value = _other(mul_h, tanh_c.outputs[0])
    if o_value not in sigmoid_outputs or o_value in (i_value, f_value) \
            or uses.only_reader(o_value) is not mul_h:
        return None
    blocks = [sigmoid_outputs[f_value], sigmoid_outputs[i_value], g_at, sigmoid_outputs[o_value]]
    replaced = [split, *activations, mul_ig, mul_fc, add, tanh_c, mul_h]
    fused = Node("LSTMGates", [split.inputs[0], c_in], [mul_h.outputs[0], c_out],
                 {"axis": axis, "blocks": blocks,
                  "fused_from": ", ".join(node.label for node in replaced)},
                 LOOP_DOMAIN, version=1)
    return fused, replaced


def _producer(graph: Graph, name: str | None) -> Node | None:
    """The node of `graph` whose outputs include `name`."""
    if name:
        for node in graph.nodes:
            if name in node.outputs:
                return node
    return None


def _fuse_lstm_gates(graph: Graph) -> Graph:
    nodes = list(graph.nodes)
    fused_any = False
    for split in [n for n in graph.nodes if n.op_type == "Split"]:
        current = dataclasses.replace(graph, nodes=nodes)
        found = _match_lstm_gates(split, current, _Uses(current))
        if found is None:
            continue
        fused, replaced = found
        # In the place of the Add making c': every input of the fused node is made before it,
        # and every reader of c' or h' comes after it.
        at = next(k for k, node in enumerate(nodes) if node is replaced[-3])
        gone = {id(node) for node in replaced}
        nodes = [fused if k == at else node for k, node in enumerate(nodes)
                 if k == at or id(node) not in gone]
        fused_any = True
    return dataclasses.replace(graph, nodes=nodes) if fused_any else graph
