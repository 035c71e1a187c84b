"""Fusion: a pattern of ordinary ops in a loop body replaced by one kernel that computes the same.

A loop body runs its nodes once per iteration, so a node costs its dispatch plus one numpy pass
or more every step. Where exporters spell a recurrent cell out op by op, the pass recognises it
and puts one node of the engine's domain in its place, whose kernel (accel/fused.py) makes fewer,
longer passes. The values the pattern hands out keep their names; every value only the pattern
read disappears with it. Results agree with the unfused body to rounding.

The patterns, as ONNX models write them (and as an OpenVINO IR converted from them does).
The LSTM cell's gate arithmetic, from the pre-activations ``pre`` and the cell state ``c``:

    f, i, g, o = Split(pre, 4 equal parts, axis)        (in any order)
    c' = Add(Mul(Sigmoid(f), c), Mul(Sigmoid(i), Tanh(g)))
    h' = Mul(Sigmoid(o), Tanh(c'))                      (operands of Mul and Add in any order)

which becomes ``LSTMGates(pre, c) -> (h', c')``; and when ``pre`` is an Add tree of a carried
state's product ``h @ R`` (MatMul; OpenVINO's may take R transposed) and other addends (x W, a
bias), the product and the sum join it too: ``LSTMStep(h, R, c, x) -> (h', c')``, where x is the
sum of the other addends, made by Add nodes of the model's spelling placed before it (they need
nothing from the state, so a hoisted x W and a bias become one hoisted row).

Any other Add tree of a carried state's product (a MatMul, or a Gemm that is only ``h R``:
jax2onnx's spelling) and other addends (a plain RNN's ``Tanh(x W + h R + b)``) becomes
``ProductPlus(h, R, x)``, x again the other addends' sum: BLAS
adds the product to x, and no pass over the sum is left; a Tanh that alone reads it joins it,
``ProductPlusTanh(h, R, x)``, so that the tanh runs where the product is made (on two cores, each
core over its own rows) and writes the step's destination.

The GRU cell's, with the reset gate applied after the recurrent product (PyTorch's and Keras'
GRU, ONNX's linear_before_reset), from the input and recurrent pre-activations ``x`` and ``r``
and the state ``h``:

    xz, xr, xn = Split(x, 3 equal parts, axis)          (in any order; r's split likewise)
    z = Sigmoid(Add(xz, rz))    g = Sigmoid(Add(xr, rr))    n = Tanh(Add(xn, Mul(g, rn)))
    h' = Add(Mul(Sub(1, z), p), Mul(z, q))  or  Add(p, Mul(z, Sub(q, p)))    ({p, q} = {n, h})

which becomes ``GRUGates(x, r, h) -> h'``; where r is ``h R + b`` (a ProductPlus, below) of the
state it blends, the two become one recurrent step, ``GRUStep(h, R, x, b)``. The input
products are left to their own kernels (measured orientation, hoisted).

OpenVINO's convert_model rewrites jax2onnx's bias broadcast, ``s + Expand(b, c)``, as the sum
broadcast after it, ``Broadcast(s, Maximum(ShapeOf(s), c))``: that becomes ``AtLeast(s)`` (s
itself wherever its shape covers c, as it does at the shapes the model was exported for), and the
patterns above read through it, the fused kernel taking c as its pre-activation's ``at_least``
(GRUGates': ``x_at_least``, ``r_at_least``) and running as written, broadcast included, where a
shape does not cover it. OpenVINO's VariadicSplit giving equal lengths is a Split in equal parts
(its Split refuses an axis it does not cut evenly, and so do the fused gates: ``even``), and the
1 of GRU's 1 - z may be of any rank (OpenVINO's is [1, 1]: ``one_rank``).

Casts to a float type that alone read each result of a ProductPlusTanh, an LSTMStep or GRUGates
join it (its ``to``), and a Cast of a value already of its type is an Identity: jax2onnx ends
each step with Casts to the carry's type, which would copy the state a step and keep its steps
from running in one call, and casts each comparison of a while_loop's condition to bool (an
Identity runs no step). jax2onnx's Splits give the parts' sizes: equal ones count as equal
parts.

A sum of squares over the last axis of a difference that nothing else reads,
``ReduceSumSquare(Sub(a, b))`` or ``ReduceSum(Mul(d, d))`` of ``d = Sub(a, b)`` (skl2onnx's
pairwise distances: a Scan over one matrix's rows, each subtracted from the other matrix; the
IR convert_model makes of it writes the second, Subtract, Multiply and ReduceSum), becomes
``SquaredDistance(a, b)``: each distance is summed where it is written and the
difference is never stored, a row at a time or, hoisted, a chunk of rows against the matrix.
The axis is the last where it is -1, or where it is the last of the rank the Sub's operands
have (body inputs of declared shape, constants, and those squeezed or unsqueezed); the sum is
still one of the same squares, in another order.

Before any of them, a carried value the body returns unchanged (the value itself, or through
Identity nodes, ONNX's or OpenVINO's) is read as an invariant input (`passed_through`):
jax2onnx passes a scan's weights and its xs through as carried state, which would keep the
products on them, the row of xs and the pattern's weights from being hoisted or fused.

Only the Cython driver fuses; the reference driver runs bodies as written, and the tests compare
the two.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np

from ..ir import (
    LOOP_DOMAIN,
    OPENVINO_DOMAIN,
    CarriedInput,
    Graph,
    InvariantInput,
    LoopSpec,
    Node,
    NodeRef,
    fresh_name,
)

__all__ = ["Uses", "fuse_loop", "is_gemm_product", "passed_through"]

# The ops of the pattern in each format's spelling.
_ONNX = {"Sigmoid": "Sigmoid", "Tanh": "Tanh", "Mul": "Mul", "Add": "Add", "Sub": "Sub",
         "MatMul": "MatMul"}
_OPENVINO = {"Sigmoid": "Sigmoid", "Tanh": "Tanh", "Mul": "Multiply", "Add": "Add",
             "Sub": "Subtract", "MatMul": "MatMul"}
_SPELLINGS = {"": _ONNX, "ai.onnx": _ONNX, OPENVINO_DOMAIN: _OPENVINO}


def passed_through(spec: LoopSpec) -> LoopSpec:
    """`spec` with each carried input whose result is its own value (the param itself, or the
    param through Identity nodes) an `InvariantInput` that keeps that result (the same spec if
    there is none): the body sees the same value every iteration either way, and a last-value
    output of it is the initial value, after zero iterations too."""
    producer = {out: node for node in spec.body.nodes for out in node.outputs}

    def source(name):
        node = producer.get(name)
        while node is not None and node.op_type == "Identity" \
                and node.domain in ("", "ai.onnx", OPENVINO_DOMAIN) \
                and len(node.inputs) == 1 and not node.subgraphs():
            name, node = node.inputs[0], producer.get(node.inputs[0])
        return name

    inputs = [InvariantInput(inp.outer, inp.param, inp.result)
              if isinstance(inp, CarriedInput) and source(inp.result) == inp.param else inp
              for inp in spec.inputs]
    if all(new is old for new, old in zip(inputs, spec.inputs)):
        return spec
    return dataclasses.replace(spec, inputs=inputs)


def fuse_loop(spec: LoopSpec) -> LoopSpec:
    """`spec` with every recognised pattern in its body fused, its passed-through carried
    values read as invariants first (`passed_through`; the same spec if nothing changes)."""
    spec = passed_through(spec)
    uses = _UsesOf()
    body = _fuse(spec.body, "Broadcast", _match_at_least, uses)
    body = _fuse(body, "Split", _match_lstm_gates, uses)
    body = _fuse(body, "VariadicSplit", _match_lstm_gates, uses)
    carried = {inp.param for inp in spec.inputs if isinstance(inp, CarriedInput)}
    body = _fuse(body, "LSTMGates",
                 lambda gates, graph, uses: _match_lstm_step(gates, graph, uses, carried), uses)
    body = _fuse(body, "Tanh", _match_gru_gates, uses)
    roots = _product_sum_roots(body, carried)  # (met once each: a body may have many Adds)
    body = _fuse(body, "Add",
                 lambda root, graph, uses: _match_product_plus(root, graph, uses, carried), uses,
                 wanted=lambda node: id(node) in roots)
    body = _fuse(body, "Tanh", _match_product_tanh, uses)
    body = _fuse(body, "GRUGates",
                 lambda gates, graph, uses: _match_gru_step(gates, graph, uses, carried), uses)
    body = _fuse(body, "Cast", _match_cast, uses)
    for anchor in ("ReduceSumSquare", "ReduceSum"):
        body = _fuse(body, anchor, _match_squared_distance, uses)
    return spec if body is spec.body else dataclasses.replace(spec, body=body)


class Uses:
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
        self.trios: dict[tuple, Node] = {}  # `_slice_trio`'s answers, one node per trio

    def only_reader(self, name: str) -> Node | None:
        """The one node reading `name`, if exactly one does and the graph does not return it."""
        readers = self.readers.get(name, [])
        return readers[0] if len(readers) == 1 and name not in self.results else None


class _UsesOf:
    """The `Uses` of the last graph asked for, made once: the passes of one loop's fusion hand on
    the graph they were given where they fuse nothing, and most fuse nothing."""

    def __init__(self):
        self.graph: Graph | None = None
        self.uses: Uses | None = None

    def __call__(self, graph: Graph) -> Uses:
        if graph is not self.graph:
            self.graph, self.uses = graph, Uses(graph)
        return self.uses


def _is(node: Node | None, role: str) -> bool:
    spelling = _SPELLINGS.get(node.domain) if node is not None else None
    return spelling is not None and node.op_type == spelling[role]


def _split_axis(node: Node | None, graph: Graph, parts: int, sized: bool = False) -> int | None:
    """The axis of a Split into `parts` equal parts, or None if `node` is not one. `sized`: an
    ONNX Split that gives its parts' sizes, all equal, counts too, as does OpenVINO's
    VariadicSplit of equal lengths (`_part_size`; the fused kernel then checks the axis has
    that many of them, as the Split would)."""
    if node is None or len(node.outputs) != parts or not all(node.outputs):
        return None
    if node.domain in ("", "ai.onnx") and node.op_type == "Split":
        if int(node.attrs.get("num_outputs", parts)) != parts:
            return None
        if (any(node.inputs[1:]) or "split" in node.attrs) \
                and (not sized or _part_size(node, graph) is None):
            return None
        return int(node.attrs.get("axis", 0))
    if node.domain == OPENVINO_DOMAIN and (node.op_type == "Split" and len(node.inputs) == 2
                                           or node.op_type == "VariadicSplit" and sized
                                           and len(node.inputs) == 3):
        axis = graph.initializers.get(node.inputs[1])
        if axis is None or np.size(axis) != 1 \
                or int(node.attrs.get("num_splits", parts)) != parts \
                or node.op_type == "VariadicSplit" and _part_size(node, graph) is None:
            return None
        return int(np.asarray(axis).reshape(()))
    return None


def _part_size(node: Node, graph: Graph) -> int | None:
    """The size of each part of a Split whose parts' sizes are given, all equal, as jax2onnx
    gives them (ONNX's Split: an attribute or a constant input; OpenVINO's VariadicSplit: its
    constant lengths); None for any other."""
    if node.domain == OPENVINO_DOMAIN:  # (a Split of OpenVINO's gives none)
        sizes = _constant(graph, node.inputs[2]) \
            if node.op_type == "VariadicSplit" and len(node.inputs) == 3 else None
    else:
        sizes = node.attrs["split"] if "split" in node.attrs else \
            _constant(graph, node.inputs[1]) if len(node.inputs) == 2 else None
    if sizes is None:
        return None
    sizes = np.asarray(sizes).reshape(-1)
    if sizes.dtype.kind not in "iu" or sizes.size != len(node.outputs) \
            or len(set(sizes.tolist())) != 1 or sizes[0] <= 0:
        return None
    return int(sizes[0])


def _other(node: Node, name: str) -> str | None:
    """The other input of a two-input node, one of whose inputs is `name`."""
    if len(node.inputs) != 2 or name not in node.inputs:
        return None
    a, b = node.inputs
    return b if a == name else a


def _match_lstm_gates(split: Node, graph: Graph, uses: Uses):
    """(fused node, the nodes it replaces, the last of them) for the LSTM gate arithmetic fed by
    `split`, or None."""
    axis = _split_axis(split, graph, 4, sized=True)
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
    pre, at_least, widening = _widened(graph, uses, split.inputs[0], split)
    replaced = [*widening, split, *activations, mul_ig, mul_fc, add, tanh_c, mul_h]
    part = _part_size(split, graph)
    fused = Node("LSTMGates", [pre, c_in], [mul_h.outputs[0], c_out],
                 {"axis": axis, "blocks": blocks, "fused_from": _labels(replaced),
                  **({} if part is None else {"part": part}),
                  **({"even": True} if _even(split) else {}),
                  **({} if at_least is None else {"at_least": at_least})},
                 LOOP_DOMAIN, version=1)
    return fused, replaced, add  # h' is made after c', and c' is read before h' is


def _match_at_least(broadcast: Node, graph: Graph, uses: Uses):
    """(the node in its place, the nodes it replaces, the last of them) for OpenVINO's
    ``Broadcast(s, Maximum(ShapeOf(s), c))`` of a constant c, numpy broadcasting throughout, that
    alone reads the ShapeOf and the Maximum, or None: ``AtLeast(s)``, s broadcast to at least c
    (accel/fused.py `at_least`), which the patterns read through (`_widened`)."""
    if broadcast.domain != OPENVINO_DOMAIN or len(broadcast.inputs) != 2 \
            or str(broadcast.attrs.get("mode", "numpy")).lower() != "numpy":
        return None
    s, target = broadcast.inputs
    maximum = _producer(graph, target)
    if maximum is None or maximum.domain != OPENVINO_DOMAIN or maximum.op_type != "Maximum" \
            or len(maximum.inputs) != 2 or uses.only_reader(target) is not broadcast \
            or str(maximum.attrs.get("auto_broadcast", "numpy")).lower() != "numpy":
        return None
    for shape in maximum.inputs:
        shape_of = _producer(graph, shape)
        at_least = _constant(graph, _other(maximum, shape))
        if shape_of is None or shape_of.domain != OPENVINO_DOMAIN \
                or shape_of.op_type != "ShapeOf" or shape_of.inputs != [s] \
                or uses.only_reader(shape) is not maximum or at_least is None:
            continue
        at_least = np.asarray(at_least)
        if at_least.ndim != 1 or at_least.dtype.kind not in "iu":
            continue
        replaced = [shape_of, maximum, broadcast]
        fused = Node("AtLeast", [s], list(broadcast.outputs),
                     {"shape": [int(d) for d in at_least], "fused_from": _labels(replaced)},
                     LOOP_DOMAIN, broadcast.name, version=1)  # (errors name the Broadcast)
        return fused, replaced, broadcast
    return None


def _even(split: Node) -> bool:
    """Whether `split` is OpenVINO's Split, which refuses an axis its parts do not cut evenly
    (ONNX's at opset 18 makes the last part shorter): the fused kernel then refuses it too."""
    return split.domain == OPENVINO_DOMAIN and split.op_type == "Split"


def _widened(graph: Graph, uses: Uses, name: str, reader: Node):
    """(the value, AtLeast's shape, [the AtLeast node]) if `name` is made by an AtLeast that
    only `reader` reads, else (`name`, None, [])."""
    node = _producer(graph, name)
    if node is None or node.domain != LOOP_DOMAIN or node.op_type != "AtLeast" \
            or uses.only_reader(name) is not reader:
        return name, None, []
    return node.inputs[0], node.attrs["shape"], [node]


def _labels(nodes: list[Node]) -> tuple[NodeRef, ...]:
    """The model's nodes a fused node replaces (its ``fused_from``, `Node.model_nodes`): a node
    an earlier pattern made by the nodes it replaced in turn."""
    return tuple(ref for node in nodes for ref in node.model_nodes)


def _sum_tree(graph: Graph, uses: Uses, name: str, reader: Node, leaves: list, nodes: list):
    """The Add tree making `name` (read only by `reader`), as nested pairs of leaf indices into
    `leaves` (which it fills, in operand order); its Add nodes go to `nodes`."""
    add = _producer(graph, name)
    if _is(add, "Add") and len(add.inputs) == 2 and uses.only_reader(name) is reader \
            and name not in uses.results:
        nodes.append(add)
        return [_sum_tree(graph, uses, operand, add, leaves, nodes) for operand in add.inputs]
    leaves.append(name)
    return len(leaves) - 1


def is_gemm_product(node: Node | None) -> bool:
    """Whether `node` is an ONNX Gemm that is only its product ``A B`` (or ``A B^T``): alpha 1,
    A not transposed, and no C, or a C that beta 0 leaves out (as ONNX's reference and
    onnxruntime leave it: kernels/onnx/nn.py `gemm`)."""
    if node is None or node.domain not in ("", "ai.onnx") or node.op_type != "Gemm" \
            or len(node.inputs) < 2:
        return False
    attrs = node.attrs
    c_given = len(node.inputs) > 2 and bool(node.inputs[2])
    return float(attrs.get("alpha", 1.0)) == 1.0 and not int(attrs.get("transA", 0)) \
        and (not c_given or float(attrs.get("beta", 1.0)) == 0.0)


def _is_product(node: Node | None) -> bool:
    return _is(node, "MatMul") and len(node.inputs) == 2 or is_gemm_product(node)


def _recurrent_product(graph: Graph, uses: Uses, name: str, reader: Node, carried: set[str]):
    """(the MatMul, its weight is [4H, H]) if `name` is ``h @ r`` of a carried `h` (ONNX's
    MatMul or a Gemm that is only its product, or OpenVINO's MatMul without transpose_a), read
    only by `reader`, else None."""
    matmul = _producer(graph, name)
    if not _is_product(matmul) or matmul.inputs[0] not in carried \
            or uses.only_reader(name) is not reader:
        return None
    if matmul.op_type == "Gemm":  # (transB: the weight given as rows, as transpose_b)
        return matmul, bool(int(matmul.attrs.get("transB", 0)))
    if matmul.domain == OPENVINO_DOMAIN:
        flag = {k: str(matmul.attrs.get(k, "false")).lower() for k in ("transpose_a",
                                                                       "transpose_b")}
        if flag["transpose_a"] not in ("false", "0") or flag["transpose_b"] not in \
                ("false", "0", "true", "1"):
            return None
        return matmul, flag["transpose_b"] in ("true", "1")
    return matmul, False


def _match_lstm_step(gates: Node, graph: Graph, uses: Uses, carried: set[str]):
    """(fused node, the nodes it replaces, the last of them) for the sum of a carried state's
    product ``h @ R`` and other addends that feeds fused LSTM gates, or None."""
    if gates.domain != LOOP_DOMAIN:
        return None
    leaves, adds = [], []
    _sum_tree(graph, uses, gates.inputs[0], gates, leaves, adds)
    if not adds:
        return None
    split = _one_product(graph, uses, leaves, adds, carried)
    if split is None:
        return None
    matmul, r_rows, others = split
    made, addend = _summed(graph, adds[0], others, _without_product(adds[0].outputs[0], matmul))
    replaced = [matmul, *adds, gates]
    fused = Node("LSTMStep", [matmul.inputs[0], matmul.inputs[1], gates.inputs[1], addend],
                 list(gates.outputs),
                 {"axis": gates.attrs["axis"], "blocks": gates.attrs["blocks"],
                  "r_rows": r_rows,
                  **{k: gates.attrs[k] for k in ("part", "at_least", "even")
                     if k in gates.attrs},
                  "fused_from": _labels([matmul, *adds, gates])},
                 LOOP_DOMAIN, version=1)
    return [*made, fused], replaced, gates


def _one_product(graph: Graph, uses: Uses, leaves: list[str], adds: list[Node],
                 carried: set[str]):
    """(the MatMul, whether it takes its weight transposed, the other leaves) if exactly
    one of an Add tree's `leaves` (`_sum_tree`) is a carried state's product, else None."""
    found = [(k, _recurrent_product(graph, uses, leaf, next(a for a in adds if leaf in a.inputs),
                                    carried)) for k, leaf in enumerate(leaves)]
    products = [(k, p) for k, p in found if p is not None]
    if len(products) != 1:
        return None
    (at, (matmul, r_rows)), = products
    return matmul, r_rows, [leaf for k, leaf in enumerate(leaves) if k != at]


def _summed(graph: Graph, add: Node, others: list[str], made_of: str) -> tuple[list, str]:
    """(Add nodes of `add`'s spelling summing `others`, the name of their sum). They need
    nothing from the state (a hoisted x W and a bias become one hoisted row): with the product
    added last, the sum is the same to rounding, in another order. `made_of` says what the sum
    is in the model's terms (``pre - h@R``: the model's sum without the state's product), and
    names it."""
    made, taken = [], graph.names()
    addend = others[0]
    for k, other in enumerate(others[1:], 1):
        last = k == len(others) - 1
        name = fresh_name(made_of if last else f"{made_of}, part {k}", taken)
        made.append(Node(add.op_type, [addend, other], [name], dict(add.attrs), add.domain,
                         version=add.version))
        addend = name
    return made, addend


def _without_product(total: str, matmul: Node) -> str:
    """The name of a sum without its state's product, in the model's terms: ``pre - h@R``."""
    return f"{total} - {matmul.inputs[0]}@{matmul.inputs[1]}"


def _product_sum_roots(graph: Graph, carried: set[str]) -> set[int]:
    """The ids of the Add nodes at the root of a chain of Adds reading a carried state's
    product (the only candidates of `_match_product_plus`)."""
    uses, roots = Uses(graph), set()
    for node in graph.nodes:
        if _is_product(node) and node.inputs[0] in carried:
            add, root = uses.only_reader(node.outputs[0]), None
            while _is(add, "Add") and root is not add:
                root, add = add, uses.only_reader(add.outputs[0])
            if root is not None:
                roots.add(id(root))
    return roots


def _match_product_plus(root: Node, graph: Graph, uses: Uses, carried: set[str]):
    """(fused nodes, the nodes they replace, the last of them) for an Add tree summing a carried
    state's product ``h @ R`` and other addends (x W, a bias) that no Add reads (a plain RNN's
    pre-activations, say), or None: ``ProductPlus(h, R, x)``, where BLAS adds the product to x,
    the other addends' sum (`_summed`)."""
    if not _is(root, "Add") or len(root.inputs) != 2:
        return None
    reader = uses.only_reader(root.outputs[0])
    if _is(reader, "Add"):
        return None  # not the tree's root: its root is met in turn
    leaves, adds = [], [root]
    for operand in root.inputs:
        _sum_tree(graph, uses, operand, root, leaves, adds)
    split = _one_product(graph, uses, leaves, adds, carried)
    if split is None:
        return None
    matmul, r_rows, others = split
    made, addend = _summed(graph, root, others, _without_product(root.outputs[0], matmul))
    replaced = [matmul, *adds]
    fused = Node("ProductPlus", [matmul.inputs[0], matmul.inputs[1], addend], list(root.outputs),
                 {"r_rows": r_rows,
                  "fused_from": _labels(replaced)},
                 LOOP_DOMAIN, version=1)
    return [*made, fused], replaced, root


def _match_product_tanh(tanh: Node, graph: Graph, uses: Uses):
    """(the fused node, the nodes it replaces, the last of them) for a Tanh of a ProductPlus that
    nothing else reads (a plain RNN's step), or of an AtLeast of one that only it reads (its
    ``at_least``), or None: ``ProductPlusTanh(h, R, x)``, the tanh made where the product is,
    in its destination."""
    if not _is(tanh, "Tanh") or len(tanh.inputs) != 1 or len(tanh.outputs) != 1:
        return None
    pre, at_least, widening = _widened(graph, uses, tanh.inputs[0], tanh)
    product = _producer(graph, pre)
    if product is None or product.domain != LOOP_DOMAIN or product.op_type != "ProductPlus" \
            or uses.only_reader(pre) is not (widening[0] if widening else tanh):
        return None
    fused = Node("ProductPlusTanh", list(product.inputs), list(tanh.outputs),
                 {"r_rows": product.attrs.get("r_rows", False),
                  "fused_from": _labels([product, *widening, tanh]),
                  **({} if at_least is None else {"at_least": at_least})},
                 LOOP_DOMAIN, version=1)
    return fused, [product, *widening, tanh], tanh


def _match_gru_step(gates: Node, graph: Graph, uses: Uses, carried: set[str]):
    """(the fused node, the nodes it replaces, the last of them) for fused GRU gates whose
    recurrent pre-activations are a ProductPlus of the carried state they blend (``h @ R + b``),
    read by them alone, or None: ``GRUStep(h, R, x, b)``, one recurrent step."""
    if gates.domain != LOOP_DOMAIN or gates.op_type != "GRUGates" or "to" in gates.attrs:
        return None
    x, pre, h = gates.inputs
    product = _producer(graph, pre)
    if product is None or product.domain != LOOP_DOMAIN or product.op_type != "ProductPlus" \
            or uses.only_reader(pre) is not gates or product.inputs[0] != h or h not in carried:
        return None
    attrs = dict(gates.attrs, r_rows=product.attrs.get("r_rows", False),
                 fused_from=_labels([product, gates]))
    fused = Node("GRUStep", [h, product.inputs[1], x, product.inputs[2]], list(gates.outputs),
                 attrs, LOOP_DOMAIN, version=1)
    return fused, [product, gates], gates


# The types a Cast may join a step as (no saturation, no rounding mode: a plain conversion).
_PLAIN_CASTS = tuple(np.dtype(t) for t in (np.float16, np.float32, np.float64))


def _cast_type(node: Node | None):
    """The type an ONNX Cast converts to, or None for any other node."""
    if node is None or node.domain not in ("", "ai.onnx") or node.op_type != "Cast" \
            or len(node.inputs) != 1 or len(node.outputs) != 1 or not node.inputs[0]:
        return None
    if node.attrs.get("to") is None:  # (np.dtype(None) would be float64)
        return None  # (the kernel reports a missing or bad type)
    try:
        return np.dtype(node.attrs["to"])
    except TypeError:
        return None


def _cast_to(node: Node | None):
    """The type an ONNX Cast to a float type converts to, or None for any other node."""
    to = _cast_type(node)
    return to if to in _PLAIN_CASTS else None


# ONNX ops whose result has one type whatever their operands' (the spec's output type).
_MADE_TYPES = {
    **dict.fromkeys(("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or",
                     "Xor", "Not", "IsNaN", "IsInf"), np.dtype(bool)),
    **dict.fromkeys(("Shape", "Size", "NonZero", "ArgMax", "ArgMin"), np.dtype(np.int64)),
}


def _made_type(node: Node | None, graph: Graph):
    """The type `node`'s first result always has, when the node alone says it (a comparison's
    bool, a Cast's ``to``, a fused step's ``to``; an ONNX Identity's is its input's), else
    None."""
    while node is not None and node.op_type == "Identity" and node.domain in ("", "ai.onnx") \
            and len(node.inputs) == 1:
        node = _producer(graph, node.inputs[0])
    if node is None:
        return None
    if _is_step(node):
        return node.attrs.get("to")
    if node.domain not in ("", "ai.onnx"):
        return None
    return _cast_type(node) if node.op_type == "Cast" else _MADE_TYPES.get(node.op_type)


def _is_step(node: Node | None) -> bool:
    """Whether `node` is a fused RNN step, which Casts may join (accel/fused.py `_cast_joined`)."""
    return node is not None and node.domain == LOOP_DOMAIN \
        and node.op_type in ("ProductPlusTanh", "LSTMStep", "GRUGates", "GRUStep")


def _match_cast(cast: Node, graph: Graph, uses: Uses):
    """(the node in its place, the nodes it replaces, the last of them) for a Cast that changes
    nothing or joins the step before it, or None. jax2onnx ends each lax.scan step with
    two Casts to the carry's type, and casts a comparison to bool before the And of a
    while_loop's condition:

    - a Cast of a value that has its type already (a Cast's, a fused step's, or a comparison's
      bool, `_made_type`) is an Identity of it, which runs no step;
    - Casts to one type that alone read each result of a fused step (ProductPlusTanh, LSTMStep,
      GRUGates) join it as its ``to``: the step's results are of that type (nothing to convert
      where its operands are, the usual case), written into their destinations, with no copy a
      step."""
    wanted = _cast_type(cast)
    if wanted is None:
        return None
    source = _producer(graph, cast.inputs[0])
    made = _made_type(source, graph)
    if made is not None and made == wanted:  # (np.dtype(...) == None holds for float64)
        attrs = {"fused_from": (cast.ref,), "already": str(np.dtype(made))}
        return Node("Identity", list(cast.inputs), list(cast.outputs), attrs,
                    cast.domain, cast.name, version=cast.version), [cast], cast
    to = wanted if wanted in _PLAIN_CASTS else None
    if to is None or not _is_step(source) or "to" in source.attrs:
        return None
    casts = [uses.only_reader(result) for result in source.outputs]
    if any(_cast_to(c) is None or _cast_to(c) != to for c in casts):
        return None
    fused = Node(source.op_type, list(source.inputs), [c.outputs[0] for c in casts],
                 dict(source.attrs, to=to, fused_from=_labels([source, *casts])),
                 LOOP_DOMAIN, version=1)
    # In the step's place: its inputs are made before it, and what reads a Cast comes after.
    return fused, [source, *casts], source


def _split_part(graph: Graph, uses: Uses, name: str | None, reader: Node):
    """(the Split, the part's index) if `name` is a part of a Split into 3 equal parts that only
    `reader` reads, else None. Three Slices cutting one value in parts of one size (the last
    to the axis's end: tf2onnx's spelling of a split) count as a Split (`_slice_trio`)."""
    split = _producer(graph, name)
    if _split_axis(split, graph, 3, sized=True) is None:
        split = _slice_trio(graph, uses, split)
    if split is None or uses.only_reader(name) is not reader:
        return None
    return split, split.outputs.index(name)


_OPEN_END = 2**31 - 1  # a Slice's end at or past it: the axis's end, whatever its length


def _slice_cut(node: Node | None, graph: Graph):
    """(data, axis, start, end) if `node` is an ONNX Slice (opset 10 on: operands, not
    attributes) by constants cutting one axis and keeping every other it names whole (start
    0, end at least `_OPEN_END`), step 1; end None for an open one; else None."""
    if node is None or node.domain not in ("", "ai.onnx") or node.op_type != "Slice" \
            or node.attrs or not 4 <= len(node.inputs) <= 5 or len(node.outputs) != 1 \
            or not all(node.inputs[:4]):
        return None
    operands = [_constant(graph, name) for name in node.inputs[1:]]
    if any(value is None for value in operands[:3]):
        return None
    starts, ends, axes, *steps = (np.asarray(v).reshape(-1) if v is not None else None
                                  for v in operands)
    if any(v.dtype.kind not in "iu" for v in (starts, ends, axes)) \
            or not starts.size == ends.size == axes.size \
            or steps and steps[0] is not None and (steps[0].shape != starts.shape
                                                   or (steps[0] != 1).any()):
        return None
    cut = [k for k in range(starts.size) if not (starts[k] == 0 and ends[k] >= _OPEN_END)]
    if len(cut) != 1 or len(set(axes.tolist())) != axes.size:
        return None
    (k,) = cut
    start, end = int(starts[k]), int(ends[k])
    if start < 0 or end < 0:
        return None
    return node.inputs[0], int(axes[k]), start, None if end >= _OPEN_END else end


def _slice_trio(graph: Graph, uses: Uses, node: Node | None) -> Node | None:
    """A stand-in Split for `node` if it is one of three Slices (`_slice_cut`) of one value
    along one axis into [0, P), [P, 2P) and [2P, end) (the last open, or 3P): a Node("Split")
    with ``axis``, ``split`` [P, P, P], the three Slices' outputs as its outputs and the Slices
    themselves as ``slices`` (what a fused node replaces), or None. The same node each time a
    trio is asked for (`Uses.trios`), so that its parts are known as one split's."""
    found = _slice_cut(node, graph)
    if found is None:
        return None
    data, axis = found[:2]
    parts = {}
    for reader in uses.readers.get(data, []):
        cut = _slice_cut(reader, graph) if reader.inputs[:1] == [data] else None
        if cut is not None and cut[1] == axis:
            parts.setdefault(cut[2], []).append((reader, cut[3]))
    size = found[2] // 2 if found[2] and found[3] is None else \
        (found[3] - found[2]) if found[3] is not None else None
    if not size or size <= 0 or sorted(parts) != [0, size, 2 * size] \
            or any(len(at) != 1 for at in parts.values()) \
            or parts[0][0][1] != size or parts[size][0][1] != 2 * size \
            or parts[2 * size][0][1] not in (None, 3 * size):
        return None
    slices = [parts[start][0][0] for start in (0, size, 2 * size)]
    key = (data, axis, size, tuple(id(s) for s in slices))
    if key not in uses.trios:
        uses.trios[key] = Node("Split", [data], [s.outputs[0] for s in slices],
                               {"axis": axis, "split": [size] * 3, "slices": slices,
                                "open": parts[2 * size][0][1] is None})
    return uses.trios[key]


def _replaced_by(split: Node) -> list[Node]:
    """The model's nodes a split stands for: itself, or a trio's Slices (`_slice_trio`)."""
    return list(split.attrs.get("slices", [split]))


def _constant(graph: Graph, name: str | None):
    """The value of `name` if it is a constant of the graph (an initializer, or the output of
    an ONNX Constant node), else None."""
    value = graph.initializers.get(name) if name else None
    producer = _producer(graph, name) if value is None else None
    if producer is not None and producer.domain in ("", "ai.onnx") \
            and producer.op_type == "Constant":
        value = next((producer.attrs[key] for key in ("value", "value_float", "value_ints")
                      if key in producer.attrs), None)
    return value


def _one_rank(graph: Graph, name: str | None) -> int | None:
    """The rank of `name` if it is a constant float 1 of any rank (a scalar, [1], OpenVINO's
    [1, 1]), else None."""
    value = _constant(graph, name)
    if value is None:
        return None
    value = np.asarray(value)
    ok = value.size == 1 and value.dtype.kind == "f" and value.item() == 1
    return value.ndim if ok else None


def _sum_of_parts(graph: Graph, uses: Uses, name: str | None, reader: Node):
    """(the Add, its part of x's split, its part of r's split as (split, index) pairs, in operand
    order) if `name` is an Add of two split parts read only by it and itself only by `reader`."""
    add = _producer(graph, name)
    if not _is(add, "Add") or len(add.inputs) != 2 or uses.only_reader(name) is not reader:
        return None
    parts = [_split_part(graph, uses, operand, add) for operand in add.inputs]
    return None if None in parts else (add, *parts)


def _match_gru_gates(tanh: Node, graph: Graph, uses: Uses):
    """(fused node, the nodes it replaces, the last of them) for the GRU gate arithmetic whose
    candidate activation is `tanh`, or None."""
    add_n = _producer(graph, tanh.inputs[0])
    if not _is(tanh, "Tanh") or not _is(add_n, "Add") \
            or uses.only_reader(tanh.inputs[0]) is not tanh:
        return None
    for x_n in add_n.inputs:  # Add(xn, Mul(g, rn)), in either order
        mul_r = _producer(graph, _other(add_n, x_n))
        x_part = _split_part(graph, uses, x_n, add_n)
        if x_part is None or not _is(mul_r, "Mul") or uses.only_reader(mul_r.outputs[0]) \
                is not add_n:
            continue
        for r_n in mul_r.inputs:  # Mul(g, rn), in either order
            r_part = _split_part(graph, uses, r_n, mul_r)
            reset = _producer(graph, _other(mul_r, r_n))
            if r_part is None or r_part[0] is x_part[0] or not _is(reset, "Sigmoid") \
                    or uses.only_reader(reset.outputs[0]) is not mul_r:
                continue
            found = _match_gru_rest(graph, uses, tanh, add_n, mul_r, reset, x_part, r_part)
            if found is not None:
                return found
    return None


def _match_gru_rest(graph, uses, tanh, add_n, mul_r, reset, x_part, r_part):
    """The rest of `_match_gru_gates`, from the candidate's nodes: the two gates' sums, the
    update gate and the blend."""
    (x_split, xn_at), (r_split, rn_at) = x_part, r_part
    axis = _split_axis(x_split, graph, 3, sized=True)
    r_axis = _split_axis(r_split, graph, 3, sized=True)
    if axis != r_axis and ("slices" not in x_split.attrs and "slices" not in r_split.attrs):
        return None  # (a trio's axis is the Slices' own spelling: -1 or 1, say, on a [B, 3H])
    reset_sum = _sum_of_parts(graph, uses, reset.inputs[0], reset)
    if reset_sum is None:
        return None
    add_g, *reset_parts = reset_sum
    by_split = {id(split): at for split, at in reset_parts}
    if set(by_split) != {id(x_split), id(r_split)}:
        return None
    xg_at, rg_at = by_split[id(x_split)], by_split[id(r_split)]
    xz_at, rz_at = 3 - xn_at - xg_at, 3 - rn_at - rg_at
    if len({xn_at, xg_at, xz_at}) != 3 or len({rn_at, rg_at, rz_at}) != 3:
        return None
    add_z = uses.only_reader(x_split.outputs[xz_at])
    update = uses.only_reader(add_z.outputs[0]) if _is(add_z, "Add") else None
    if not _is(update, "Sigmoid") or uses.only_reader(r_split.outputs[rz_at]) is not add_z \
            or _sum_of_parts(graph, uses, add_z.outputs[0], update) is None:
        return None
    blend = _match_blend(graph, uses, update.outputs[0], tanh.outputs[0])
    if blend is None:
        return None
    final, blend_nodes, z_scales, h, one_rank = blend
    x, x_at_least, x_widening = _widened(graph, uses, x_split.inputs[0], x_split)
    r, r_at_least, r_widening = _widened(graph, uses, r_split.inputs[0], r_split)
    replaced = [*x_widening, *_replaced_by(x_split), *r_widening, *_replaced_by(r_split), add_g,
                reset, add_z, update, mul_r, add_n, tanh, *blend_nodes]
    fused = Node("GRUGates", [x, r, h], [final.outputs[0]],
                 {"axis": axis, "x_blocks": [xz_at, xg_at, xn_at],
                  "r_blocks": [rz_at, rg_at, rn_at], "z_scales": z_scales,
                  "fused_from": _labels(replaced),
                  **({"r_axis": r_axis} if r_axis != axis else {}),
                  **_cuts("x", x_split, graph), **_cuts("r", r_split, graph),
                  **{key: shape for key, shape in (("x_at_least", x_at_least),
                                                   ("r_at_least", r_at_least))
                     if shape is not None},
                  **{key: True for key, split in (("x_even", x_split), ("r_even", r_split))
                     if _even(split)},
                  **({"one_rank": one_rank} if one_rank > 1 else {})},
                 LOOP_DOMAIN, version=1)
    return fused, replaced, final


def _cuts(key: str, split: Node, graph: Graph) -> dict:
    """GRUGates' attributes for how `split` cuts x's or r's axis (`key`): ``x_part``, the
    size of a Split's given parts; ``x_slices`` and ``x_open``, a Slice trio's part and whether
    its last runs to the axis's end (`_slice_trio`); none for a Split of equal parts."""
    size = _part_size(split, graph)
    if size is None:
        return {}
    if "slices" in split.attrs:
        return {f"{key}_slices": size, f"{key}_open": split.attrs["open"]}
    return {f"{key}_part": size}


def _match_blend(graph: Graph, uses: Uses, z: str, n: str):
    """(the final Add, the blend's nodes, what z scales ("n" or "h"), h, the rank of the 1 (0
    if none)) for ``Add(Mul(Sub(1, z), p), Mul(z, q))`` or ``Add(p, Mul(z, Sub(q, p)))`` with
    {p, q} = {n, h} (operands of Add and Mul in any order), or None."""
    readers = uses.readers.get(z, [])
    if z in uses.results or len(readers) not in (1, 2):
        return None
    if len(readers) == 2:  # Add(Mul(Sub(1, z), p), Mul(z, q))
        sub = next((r for r in readers if _is(r, "Sub") and list(r.inputs[1:]) == [z]), None)
        mul_q = next((r for r in readers if _is(r, "Mul")), None)
        one_rank = _one_rank(graph, sub.inputs[0]) if sub is not None else None
        if one_rank is None or mul_q is None:
            return None
        mul_p = uses.only_reader(sub.outputs[0])
        final = uses.only_reader(mul_q.outputs[0])
        if not _is(mul_p, "Mul") or not _is(final, "Add") or _other(mul_q, z) is None \
                or uses.only_reader(mul_p.outputs[0]) is not final \
                or _other(final, mul_q.outputs[0]) != mul_p.outputs[0]:
            return None
        p, q = _other(mul_p, sub.outputs[0]), _other(mul_q, z)
        nodes = [sub, mul_p, mul_q, final]
        n_readers = (mul_p,) if p == n else (mul_q,)
    else:  # Add(p, Mul(z, Sub(q, p)))
        (mul,), one_rank = readers, 0
        sub = _producer(graph, _other(mul, z)) if _is(mul, "Mul") else None
        final = uses.only_reader(mul.outputs[0])
        if not _is(sub, "Sub") or len(sub.inputs) != 2 or not _is(final, "Add") \
                or uses.only_reader(sub.outputs[0]) is not mul:
            return None
        q, p = sub.inputs
        if _other(final, mul.outputs[0]) != p:
            return None
        nodes = [sub, mul, final]
        n_readers = (sub, final) if p == n else (sub,)
    if n not in (p, q) or p == q or n in uses.results \
            or sorted(map(id, uses.readers.get(n, []))) != sorted(map(id, n_readers)):
        return None
    return final, nodes, "n" if q == n else "h", p if q == n else q, one_rank


def _rank(graph: Graph, name: str) -> int | None:
    """The rank of `name` where the graph says it: a body input of declared shape, a constant,
    or a Squeeze or Unsqueeze of one by constant axes (OpenVINO's converted Scan squeezes the
    sliced part's axis so); else None."""
    constant = _constant(graph, name)
    if constant is not None:
        return np.ndim(constant)
    declared = next((value.shape for value in graph.inputs if value.name == name), None)
    if declared is not None:
        return len(declared)
    node = _producer(graph, name)
    if node is None or node.op_type not in ("Squeeze", "Unsqueeze") or len(node.inputs) != 2 \
            or node.domain not in ("", "ai.onnx", OPENVINO_DOMAIN):
        return None
    axes, rank = _constant(graph, node.inputs[1]), _rank(graph, node.inputs[0])
    if axes is None or rank is None:
        return None
    return rank + (np.size(axes) if node.op_type == "Unsqueeze" else -np.size(axes))


def _last_axis(reduce: Node, graph: Graph, difference: Node) -> bool:
    """Whether `reduce` reduces the last axis of `difference`'s result and it alone: its one
    axis (an attribute, or a constant input: ONNX's from opset 13 or 18, OpenVINO's) is -1, or
    is the last of the rank the difference's operands give it (`_rank`)."""
    axes = _constant(graph, reduce.inputs[1]) if len(reduce.inputs) > 1 and reduce.inputs[1] \
        else reduce.attrs.get("axes")
    if axes is None or np.size(axes) != 1:
        return False
    axis = int(np.asarray(axes).reshape(-1)[0])
    if axis < 0:
        return axis == -1
    ranks = [_rank(graph, name) for name in difference.inputs]
    return None not in ranks and axis == max(ranks) - 1


def _is_openvino(node: Node) -> bool:
    return node.domain == OPENVINO_DOMAIN


def _numpy_broadcast(node: Node) -> bool:
    """Whether `node` broadcasts as numpy does (ONNX's from opset 7; OpenVINO's by default)."""
    if node.domain == OPENVINO_DOMAIN:
        return str(node.attrs.get("auto_broadcast", "numpy")).lower() == "numpy"
    return not node.attrs


def _match_squared_distance(reduce: Node, graph: Graph, uses: Uses):
    """(the fused node, the nodes it replaces, the last of them) for a sum of squares over the
    last axis of a difference that nothing else reads, ``ReduceSumSquare(Sub(a, b))`` or
    ``ReduceSum(Mul(d, d))`` of ``d = Sub(a, b)`` (skl2onnx's pairwise distances; OpenVINO's
    convert_model writes the second), or None: ``SquaredDistance(a, b)``, each distance summed
    where it is written."""
    onnx = reduce.domain in ("", "ai.onnx")
    if len(reduce.outputs) != 1 or not reduce.inputs \
            or not (onnx and reduce.op_type in ("ReduceSumSquare", "ReduceSum")
                    or reduce.domain == OPENVINO_DOMAIN and reduce.op_type == "ReduceSum"):
        return None
    squares = None
    difference = reduce.inputs[0]
    if reduce.op_type == "ReduceSum":
        squares = _producer(graph, difference)
        if not _is(squares, "Mul") or _is_openvino(squares) != _is_openvino(reduce) \
                or uses.only_reader(difference) is not reduce or len(squares.inputs) != 2 \
                or squares.inputs[0] != squares.inputs[1] or not _numpy_broadcast(squares):
            return None
        difference = squares.inputs[0]
        readers = uses.readers.get(difference, [])
        if difference in uses.results or any(node is not squares for node in readers):
            return None
    elif uses.only_reader(difference) is not reduce:
        return None
    sub = _producer(graph, difference)
    if not _is(sub, "Sub") or _is_openvino(sub) != _is_openvino(reduce) or len(sub.inputs) != 2 \
            or not all(sub.inputs) or not _numpy_broadcast(sub) \
            or not _last_axis(reduce, graph, sub):
        return None
    keepdims = int(reduce.attrs.get("keepdims", 1)) if onnx else \
        int(str(reduce.attrs.get("keep_dims", "false")).lower() in ("true", "1"))
    replaced = [sub] + ([squares] if squares is not None else []) + [reduce]
    fused = Node("SquaredDistance", list(sub.inputs), list(reduce.outputs),
                 {"keepdims": keepdims, "fused_from": _labels(replaced)}, LOOP_DOMAIN,
                 version=1)
    return fused, replaced, reduce


def _producer(graph: Graph, name: str | None) -> Node | None:
    """The node of `graph` whose outputs include `name`."""
    if name:
        for node in graph.nodes:
            if name in node.outputs:
                return node
    return None


def _fuse(graph: Graph, anchor: str, match, uses_of: _UsesOf, wanted=None) -> Graph:
    """`graph` with every pattern `match` finds (from each node of type `anchor`, or of those
    `wanted` accepts) fused. The fused node (or nodes, in order) takes the place of the replaced
    node `match` names as its last: every input of the pattern is made before that, and every
    reader of what it hands out comes after. `uses_of` gives a graph's readers (made again only
    for a graph a match has changed)."""
    nodes = list(graph.nodes)
    present = {id(node) for node in nodes}
    current = graph  # (the graph as fused so far)
    for start in [node for node in graph.nodes if node.op_type == anchor
                  and (wanted is None or wanted(node))]:
        if id(start) not in present:
            continue  # replaced by an earlier match
        found = match(start, current, uses_of(current))
        if found is None:
            continue
        fused, replaced, last = found
        fused = fused if isinstance(fused, list) else [fused]
        gone = {id(node) for node in replaced}
        nodes = [made for node in nodes if node is last or id(node) not in gone
                 for made in (fused if node is last else [node])]
        present = {id(node) for node in nodes}
        current = dataclasses.replace(graph, nodes=nodes)
    return current
