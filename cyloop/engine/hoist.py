"""Hoisting: which body work does not depend on the loop's state, and so runs before it, batched.

A value is *batched* when iteration i sees row i of something known before the loop starts: part
i of a sliced input, the iteration number i itself, or ``Gather(x, i)`` of a loop-invariant x by
the iteration number (ONNX Loop's spelling of a sliced input). A value is *static* when it is the
same at every iteration: an invariant input, an outer-scope value, a body constant.

A body node whose inputs are all batched or static, with at least one batched, and whose kernel
declares a batched form (the registry's ``batch`` trait: elementwise ops, MatMul with the batched
operand on the left, the axis ops, an RNN cell's input projection) gives at iteration i exactly
row i of the same op run on all rows at once. Such nodes leave the body and run on blocks of rows
(*chunks*, `chunks.py`) just before the iterations that read them; the body reads row i of each
hoisted value something left in it still needs. This is the cuDNN trick the ONNX Loop
specification points to: an RNN's ``x_t @ W`` becomes one GEMM per chunk, and a TensorIterator's
LSTMCell is split into its input projection (hoisted) and its recurrence (left in the body).
A hoisted MatMul (or an ONNX Gemm that is only its product) whose only reader adds a static
bias takes the bias into its GEMM (one more row of the weight against a column of ones:
`chunks.bias_joined`), so no pass over the chunk adds it; a bias of rows all alike (jax2onnx
broadcasts one row to the batch's) joins as its one row.

A body node whose inputs are all static (and which is a pure tensor op) is static too: it runs
once a run, when the first chunk is computed, in its place among the hoisted steps
(loop-invariant code motion), and its result counts as static for the nodes after it.
Exporters build shapes and broadcasts inside bodies this way (jax2onnx broadcasts a scan's bias
with a Concat, a Reshape and an Expand every step). Something left in the body reads such a
value as a row like any hoisted one, every row a view of it. A node making a body output stays
in the body: that value is kept or emitted an iteration at a time.

A Shape (Size, ShapeOf) whose input has the same shape at every iteration runs once a run too:
of a batched value (every row of a chunk has one shape: row 0's), of a carried value no
iteration reshapes (the body makes it from its own param through Identity or a scatter updating
it, `_kept_shapes`: its initial value's), and of a value the body computes whose shape follows
from those and from static values by the rules of `_Shapes` (a state reshaped to a constant
shape, say, or broadcast to one), whatever its values. jax2onnx bounds a ``buf.at[k].set(y)``
scatter's index by ``Shape(buf)``, and computes a ``dynamic_update_slice``'s indices from the
update's Shape; with these, that index arithmetic leaves the body.

Chunks keep memory bounded (one of `tuning.CHUNK_BUDGETS` of hoisted rows at a time, the one
measured fastest here, not a whole sequence), so a loop that stops early wastes at most one
chunk, and a chunk is computed only when an iteration that reads it is about to run: a loop of
zero iterations computes nothing, and an error a hoisted node raises surfaces at the iteration
that would have raised it. Results agree
with the unhoisted body to rounding (one large GEMM may sum in another order than many small
ones).

Only the Cython driver hoists; the reference driver runs bodies as written, and the tests compare
the two.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import UnsupportedOpError
from ..ir import (
    LOOP_DOMAIN,
    OPENVINO_DOMAIN,
    CarriedInput,
    Graph,
    InvariantInput,
    LoopSpec,
    Node,
    SlicedInput,
    Value,
    fresh_name,
)
from ..kernels import as_bool, flat_int_list, registry
from ..kernels.registry import FIRST_INPUT, abilities_of
from ..tuning import FOLDED_SIZE
from . import chunks
from .chunks import (
    CaptureStatic,
    ComputedStatic,
    ConstStatic,
    GatherSource,
    Hoist,
    HoistStep,
    IterationSource,
    OuterStatic,
    SlicedSource,
)
from .facts import Fused, HoistedWork, NotHoisted
from .fuse import is_gemm_product

__all__ = ["hoist_loop"]

# The registry's batch forms that a node's own kernel runs through (see chunks.py).
# The forms whose call on a chunk fails where, and only where, the node fails on a row: numpy
# broadcasting over operands whose row axis is aligned in front (`chunks.elementwise`) meets a
# row's shapes as the node does. A chunk of their steps is probed only when it fails (`chunks.
# HoistStep.exact`).
_EXACT = ("elementwise", "first")

_ADAPTERS = {"elementwise": chunks.elementwise, "first": chunks.elementwise,
             "matmul": chunks.matmul, "axes": chunks.with_axes, "reshape": chunks.reshaped,
             "gemm": chunks.gemm, "broadcast": chunks.broadcast,
             "axis": lambda fn, batched: chunks.gathered(chunks.axis_shifted(fn), fn)}


def hoist_loop(spec: LoopSpec, captures: list[str], opsets: dict[str, int],
               not_hoisted: list | None = None):
    """(new spec, Hoist) with the hoistable part of `spec`'s body taken out, or None.
    `not_hoisted`, if given, receives a `plan.NotHoisted` for each node that reads no state of
    the loop yet stays in the body, saying why."""
    body = spec.body
    params = {v.name for v in body.inputs}
    statics: dict[str, object] = {}
    for name, value in body.initializers.items():
        if name not in params:
            statics[name] = ConstStatic(value)
    for j, name in enumerate(captures):
        statics[name] = CaptureStatic(j)
    sources: dict[str, object] = {}
    for k, inp in enumerate(spec.inputs):
        if isinstance(inp, InvariantInput):
            statics[inp.param] = OuterStatic(inp.outer)
        elif isinstance(inp, SlicedInput):
            sources[inp.param] = SlicedSource(k, inp)
    if spec.iteration_param:
        sources[spec.iteration_param] = IterationSource()

    batched = set(sources)
    taken = body.names() | set(captures)  # names a value the pass adds must not take
    shapes = _Shapes(body, statics, batched, _kept_shapes(spec, opsets), taken, opsets)
    readers = _readers(body)
    results = {out.name for out in body.outputs}
    steps: list[HoistStep] = []
    products: dict[str, tuple[int, Node]] = {}  # hoisted weight products read by one node
    kept: list[Node] = []
    hoisted_any = False
    counts: dict[str, np.dtype] = {}  # the iteration number cast to an integer type
    for node in body.nodes:
        counted = _iteration_cast(node, spec.iteration_param)
        if counted is not None:
            counts[node.outputs[0]] = counted
        gather = _as_gather(node, spec.iteration_param, statics, counts)
        if gather is not None:
            sources[node.outputs[0]] = gather
            batched.add(node.outputs[0])
            hoisted_any = True
            continue
        step = _invariant(node, statics, opsets, results) or _shape_once(
            node, shapes, opsets, results, steps)
        if step is not None:
            _fused_shown(node, step)
            shapes.fold(node)
            steps.append(step)
            statics.update((name, ComputedStatic()) for name in node.outputs if name)
            hoisted_any = True
            continue
        plan = _batchable(node, batched, statics, opsets, taken)
        if not isinstance(plan, tuple):
            shapes.derive(node)
            kept.append(node)
            why = plan or _why_static_kept(node, statics, opsets, results)
            if why and not_hoisted is not None:
                not_hoisted.append(NotHoisted(node.model_nodes, why))
            continue
        hoisted, rest = plan
        _fused_shown(node, hoisted)
        if _weight_product(node, hoisted) and readers.get(node.outputs[0]) == 1:
            products[node.outputs[0]] = (len(steps), node)
        joined = _bias_joined(node, products, statics, opsets)
        if joined is not None:
            index, hoisted = joined
            del steps[index]  # nothing between reads the product: its only reader is `node`
            products = {name: (k - (k > index), n) for name, (k, n) in products.items()}
        steps.append(hoisted)
        batched.update(o for o in hoisted.outputs if o)
        kept.extend(rest)
        hoisted_any = True
    # A sliced part the body still reads, if it is not contiguous (say a column block, or an
    # axis-1 slice), is packed a chunk at a time: one bulk copy, then kernels on contiguous rows.
    packed = {}
    for inp in spec.inputs:
        if isinstance(inp, SlicedInput) and any(inp.param in node.inputs for node in kept):
            packed[inp.param] = fresh_name(f"{inp.param}, packed", taken)
    for param, name in packed.items():
        steps.append(HoistStep(chunks.pack, [param], [name], f"packing sliced input {param!r}",
                               work=HoistedWork("packing", makes=(name,), op="copy",
                                                 value=param)))
        batched.add(name)
    kept = [dataclasses.replace(node, inputs=[packed.get(n, n) for n in node.inputs])
            if any(n in packed for n in node.inputs) else node for node in kept]
    if not hoisted_any and not packed:
        return None

    # The frontier: batched values something left in the body (or the loop itself) reads.
    read: dict[str, None] = {}
    for node in kept:
        for name in list(node.inputs) + [n for sub in node.subgraphs() for n in sub.free_names()]:
            if name:
                read[name] = None
    for out in body.outputs:
        read[out.name] = None
    frontier = [name for name in read if (name in batched or isinstance(
        statics.get(name), ComputedStatic)) and name not in params]
    new_inputs = list(body.inputs) + [Value(name) for name in frontier]
    new_body = Graph(kept, new_inputs, list(body.outputs), dict(body.initializers),
                     dict(body.opsets), body.name)
    new_spec = dataclasses.replace(spec, body=new_body)
    # Every hoisted node runs, read or not: one that fails must fail as it would in the body.
    needed = set(frontier)
    for step in steps:
        needed.update(n for n in step.inputs if n)
    used_statics = {name: ref for name, ref in statics.items()
                    if name in needed and not isinstance(ref, ComputedStatic)}
    used_sources = {name: src for name, src in sources.items()
                    if name in needed or isinstance(src, GatherSource)}
    for src in used_sources.values():
        if isinstance(src, GatherSource):
            used_statics.setdefault(src.data, statics[src.data])
    return new_spec, Hoist(used_sources, used_statics, steps, frontier, spec.iteration_dtype)


def _work(how: str, node: Node, why: str = "", value: str = "") -> HoistedWork:
    """What hoisting `node` runs, for the plan."""
    return HoistedWork(how, node.model_nodes, tuple(o for o in node.outputs if o), node.op_type,
                       why, value=value)


def _fused_shown(node: Node, step: HoistStep) -> None:
    """A hoisted node fusion made (a Cast become an Identity, say) is shown with what it runs,
    as the plan shows such a node left in the body."""
    if "fused_from" in node.attrs:
        step.work = step.work.replace(fused=Fused.of(node))


def _readers(body: Graph) -> dict[str, int]:
    """How many times each value is read: by the body's nodes (their subgraphs' free names
    included) and as a body output."""
    count: dict[str, int] = {}
    for node in body.nodes:
        for name in list(node.inputs) + [n for sub in node.subgraphs() for n in sub.free_names()]:
            if name:
                count[name] = count.get(name, 0) + 1
    for out in body.outputs:
        count[out.name] = count.get(out.name, 0) + 1
    return count


def _weight_product(node: Node, step: HoistStep) -> bool:
    """Whether `node` is a product hoisted as rows times a static operand: a MatMul (ONNX's, or
    OpenVINO's, which hoists only untransposed rows), or an ONNX Gemm that is only its product
    (`is_gemm_product`: jax2onnx writes ``x W`` so, with a C that beta 0 leaves out)."""
    if is_gemm_product(node):
        return len(node.outputs) == 1 and step.batched[:2] == [True, False]
    return (node.op_type == "MatMul" and len(node.inputs) == 2 and len(node.outputs) == 1
            and step.batched == [True, False]
            and (node.domain in ("", "ai.onnx") and not node.attrs
                 or node.domain == OPENVINO_DOMAIN))


def _bias_joined(node: Node, products: dict, statics, opsets):
    """(index of the product's step, the joined step) when `node` adds a static bias to a
    hoisted weight product that nothing else reads (see `chunks.bias_joined`), else None."""
    if node.op_type != "Add" or len(node.inputs) != 2 or len(node.outputs) != 1 or not (
            node.domain in ("", "ai.onnx") and not node.attrs
            or node.domain == OPENVINO_DOMAIN
            and str(node.attrs.get("auto_broadcast", "numpy")).lower() == "numpy"):
        return None  # (ONNX's Add before opset 7 may broadcast along an `axis`)
    for bias_first in (False, True):
        product, bias = node.inputs[::-1] if bias_first else node.inputs
        if product in products and bias in statics and bias != product:
            break
    else:
        return None
    index, matmul = products.pop(product)
    product_fn, add_fn = registry.build(matmul, opsets).fn, registry.build(node, opsets).fn
    transposed = abilities_of(product_fn).gemm.trans_b if matmul.op_type == "Gemm" else \
        matmul.domain == OPENVINO_DOMAIN and as_bool(matmul.attrs, "transpose_b")
    call, probe = chunks.bias_joined(product_fn, add_fn, transposed, bias_first,
                                     (matmul.label, node.label))
    step = HoistStep(call, [matmul.inputs[0], matmul.inputs[1], bias], list(node.outputs),
                     matmul.label, probe, [True, False, False],
                     work=HoistedWork("bias joined", matmul.model_nodes + node.model_nodes,
                                      tuple(node.outputs), matmul.op_type))
    return index, step


def _iteration_cast(node: Node, iteration_param) -> np.dtype | None:
    """The integer type an ONNX ``Cast(i, to=...)`` of the iteration number converts to (a step
    counter read as the iteration number is one: engine/counters.py), else None."""
    if (not iteration_param or node.op_type != "Cast" or node.domain not in ("", "ai.onnx")
            or node.inputs != [iteration_param] or len(node.outputs) != 1
            or not node.outputs[0]):
        return None
    try:
        to = np.dtype(node.attrs.get("to"))
    except TypeError:
        return None
    # (A type of fewer than 32 bits wraps within loops of ordinary length: row i is not read.)
    return to if to.kind in "iu" and to.itemsize >= 4 and node.attrs.get("to") is not None \
        else None


def _as_gather(node: Node, iteration_param, statics, counts: dict[str, np.dtype]):
    """``Gather(x, i)`` of a static x by the (scalar) iteration number: row i of x along the
    axis. ONNX's Gather has the axis as an attribute; OpenVINO's as a constant third input
    (with ``batch_dims`` 0). An ONNX Gather's index may be i cast to an integer type
    (`counts`): row i too, for as many iterations as that type counts."""
    if (not iteration_param or node.op_type != "Gather" or len(node.outputs) != 1
            or len(node.inputs) < 2 or node.inputs[0] not in statics
            or isinstance(statics[node.inputs[0]], ComputedStatic)):  # (`limit` reads the data
        return None                                                  # before any is computed)
    if node.domain in ("", "ai.onnx") and len(node.inputs) == 2 and (
            node.inputs[1] == iteration_param or node.inputs[1] in counts):
        axis = _integer(node.attrs.get("axis", 0))
        return None if axis is None else GatherSource(node.inputs[0], axis, node.label,
                                                      _work("gather", node),
                                                      counts.get(node.inputs[1]))
    if node.inputs[1] != iteration_param:
        return None
    if node.domain == OPENVINO_DOMAIN and len(node.inputs) == 3 \
            and _integer(node.attrs.get("batch_dims", 0) or 0) == 0:
        axis = statics.get(node.inputs[2])
        if isinstance(axis, ConstStatic) and np.size(axis.value) == 1 \
                and np.asarray(axis.value).dtype.kind in "iu":
            return GatherSource(node.inputs[0], int(np.asarray(axis.value).reshape(())),
                                node.label, _work("gather", node))
    return None


# Ops besides those with a batch form (pure tensor ops all) that may run once a run when their
# inputs are all static: what exporters build shapes and broadcasts with. Not the sequence and
# optional ops (a body may change a sequence in place), nor random ones.
_INVARIANT_OPS = {
    "": {"Shape", "Size", "Concat", "Expand", "Gather", "Slice", "Transpose", "Tile",
         "ConstantOfShape", "Range", "Constant", "Flatten", "Split", "CastLike", "Trilu",
         "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin"},
    OPENVINO_DOMAIN: {"ShapeOf", "Concat", "Broadcast", "Gather", "StridedSlice", "Slice",
                      "Transpose", "Tile", "Range", "Split", "VariadicSplit", "ConvertLike",
                      "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin"},
    LOOP_DOMAIN: {"AtLeast"},  # (engine/fuse.py's Broadcast(s, Maximum(ShapeOf(s), c)))
}


def _invariant(node: Node, statics, opsets, results: set[str]) -> HoistStep | None:
    """A step running `node` once a run, if its inputs are all static (it is then the same at
    every iteration: loop-invariant code motion) and it is a pure tensor op, else None.

    Not a node making a body output (`results`): the loop keeps or emits that value an
    iteration at a time, and a chunk's rows of it would be copies made ahead of the iterations
    (a loop stopping early would have copied it for nothing)."""
    if node.subgraphs() or any(name and name not in statics for name in node.inputs) \
            or any(name in results for name in node.outputs):
        return None
    try:
        definition = registry.definition_of(node, opsets)
    except UnsupportedOpError:
        return None  # compiling the body says so, naming the node
    domain = "" if node.domain == "ai.onnx" else node.domain
    if definition.stateful or definition.batch is None \
            and node.op_type not in _INVARIANT_OPS.get(domain, ()):
        return None
    kernel = registry.build(node, opsets)
    abilities = abilities_of(kernel.fn)
    for choice in (abilities.measured, abilities.cores):
        if choice is not None:
            choice.fix()  # (a call once a run is no trial's sample: the default formulation)
    return HoistStep(chunks.once(kernel.fn, kernel.multi), list(node.inputs), list(node.outputs),
                     node.label, kernel.fn, [False] * len(node.inputs),
                     work=_work("once", node), once=True)


# The ops reading only their input's shape (Shape's start and end included).
_SHAPE_OPS = {"": {"Shape", "Size"}, OPENVINO_DOMAIN: {"ShapeOf"}}


# Ops whose result has the numpy broadcast of their operands' shapes (one operand: its shape),
# as ONNX (opset 7 on) and OpenVINO (auto_broadcast numpy or none) define them.
_BROADCASTING = {
    "": {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Where", "Equal", "Less",
         "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Neg", "Abs",
         "Sqrt", "Exp", "Log", "Tanh", "Sigmoid", "Relu", "Floor", "Ceil", "Round", "Sign",
         "Reciprocal", "Cast", "Identity"},
    OPENVINO_DOMAIN: {"Add", "Subtract", "Multiply", "Divide", "Power", "FloorMod", "Mod",
                      "Maximum", "Minimum", "Select", "Equal", "NotEqual", "Less", "LessEqual",
                      "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalXor",
                      "LogicalNot", "Negative", "Abs", "Sqrt", "Exp", "Log", "Tanh", "Sigmoid",
                      "ReLU", "Relu", "Floor", "Ceiling", "Sign", "Convert", "Identity"},
}
# Ops read through their own kernel on an array of the input's shape holding nothing, their
# other inputs static: the result's shape depends on no value of the first.
_ON_SHAPE = {"": {"Unsqueeze", "Squeeze", "Transpose", "Flatten"},
             OPENVINO_DOMAIN: {"Unsqueeze", "Squeeze", "Transpose"}}
# Constants folded while hoisting, to decide what a Reshape's target holds: shape arithmetic
# (ops whose result is no larger than their inputs', or their product's), of at most
# FOLDED_SIZE elements.
_FOLDED = {"": {"Constant", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Cast", "Gather",
                "Slice", "Add", "Sub", "Mul", "Neg", "Max", "Min", "Identity"},
           OPENVINO_DOMAIN: {"Concat", "Unsqueeze", "Squeeze", "Reshape", "Convert", "Gather",
                             "StridedSlice", "Add", "Subtract", "Multiply", "Negative",
                             "Maximum", "Minimum"}}


class _Shapes:
    """The shapes the hoisted part can tell before the loop starts, of values whose values
    change but whose shape does not: a batched value's (its rows'), a carried value's that no
    iteration reshapes (`_kept_shapes`: its initial value's), and, through the rules of
    `derive`, those of what the body computes from such values and static ones (an RNN state
    reshaped to a constant shape, say, or broadcast to one). Each has an *entry*: a value of
    the chunk's scope, computed once a run, holding the shape as a tuple.

    `known` holds the body constants and the small values folded from them while hoisting,
    which tell whether a Reshape's target copies or infers a dimension."""

    def __init__(self, body: Graph, statics: dict, batched: set, kept_shapes: dict,
                 taken: set, opsets):
        self.statics, self.batched, self.kept_shapes = statics, batched, kept_shapes
        self.taken, self.opsets = taken, opsets
        self.entries: dict[str, str] = {}  # value -> its entry's name
        self.rules: dict[str, tuple] = {}  # a derived value -> (its node, rule, inputs read)
        self.known = {name: value for name, value in body.initializers.items()
                      if name in statics and np.size(value) <= FOLDED_SIZE}

    def entry(self, name: str, steps: list) -> str | None:
        """The entry of `name`'s shape, its once step (and those of the entries it is computed
        from) appended to `steps` if new, or None when its shape may change."""
        if name in self.entries:
            return self.entries[name]
        # The values it is computed from, each after those it reads (a walk, not a recursion:
        # a chain of thousands of nodes has no depth limit).
        order, stack, opened, finished = [], [(name, False)], set(), set()
        while stack:
            value, done = stack.pop()
            if done:
                order.append(value)
                finished.add(value)
                continue
            if value in self.entries or value in finished:
                continue
            if value in opened:
                return None  # (a body reading a name before making it)
            opened.add(value)
            stack.append((value, True))
            if value in self.batched or value in self.kept_shapes:
                continue
            if value not in self.rules:
                return None  # (its shape may change: so may `name`'s)
            node, _, needed = self.rules[value]
            stack.extend((n, False) for n in node.inputs if n in needed and n not in self.statics)
        for value in order:
            steps.append(self._step(value))
        return self.entries[name]

    def why(self, name: str) -> str:
        """Why `name`'s shape is the same at every iteration (plan.HoistedWork ``why``): "every
        row" (a batched value: every row of it has one shape), "initial value" (no iteration
        changes it: the initial value's) or "follows" (it follows from shapes and values that
        do not change)."""
        if name in self.batched:
            return "every row"
        if name in self.kept_shapes:
            return "initial value"
        return "follows"

    def _step(self, name: str) -> HoistStep:
        """The once step making `name`'s entry (the entries it reads made before)."""
        entry = fresh_name(f"{name}/shape", self.taken)
        self.entries[name] = entry
        if name in self.batched:
            return HoistStep(chunks.once(lambda rows: rows.shape[1:], False), [name], [entry],
                             f"the shape of the rows of {name!r}", batched=[True],
                             work=HoistedWork("shape entry", makes=(entry,), op="shape",
                                              value=name),
                             once=True)
        if name in self.kept_shapes:
            initial = fresh_name(f"{name}/initial", self.taken)
            self.statics[initial] = OuterStatic(self.kept_shapes[name])
            return HoistStep(chunks.once(np.shape, False), [initial], [entry],
                             f"the shape of {name!r}", batched=[False],
                             work=HoistedWork("shape entry", makes=(entry,), op="shape",
                                              value=name),
                             once=True)
        node, rule, needed = self.rules[name]
        names, read = [], []  # (an input the rule does not read: none, "")
        for inp in node.inputs:
            shape_read = inp in needed and inp not in self.statics
            names.append(self.entries[inp] if shape_read else inp if inp in self.statics
                         else "")
            read.append(shape_read)
        # Errors are the node's own: a rule fails where the node fails, and the node's kernel
        # then says why, on inputs of the shapes the rule was given.
        return HoistStep(chunks.once(_ruled(rule, read, registry.build(node, self.opsets).fn),
                                     False),
                         names, [entry], node.label, batched=[False] * len(names),
                         work=HoistedWork("shape entry", node.model_nodes, (entry,),
                                          node.op_type, value=name), once=True)

    def fold(self, node: Node) -> None:
        """Fold a node of shape arithmetic (`_FOLDED`) into `known` where all its inputs are
        known (it still runs once a run: this only tells what it makes)."""
        domain = "" if node.domain == "ai.onnx" else node.domain
        if node.op_type not in _FOLDED.get(domain, ()) or len(node.outputs) != 1 \
                or any(n not in self.known for n in node.inputs if n):
            return
        try:
            with np.errstate(all="ignore"):
                value = registry.build(node, self.opsets).fn(
                    *[self.known[n] if n else None for n in node.inputs])
        except Exception:  # noqa: BLE001 - it fails once a run, where the body would
            return
        if isinstance(value, (np.ndarray, np.generic)) and np.size(value) <= FOLDED_SIZE:
            self.known[node.outputs[0]] = value

    def derive(self, node: Node) -> None:
        """Note how the (one) result of a node left in the body has its shape told (its entry
        made when a Shape asks for it, `entry`), where a rule tells it from its inputs' shapes
        and static values:
        - broadcasting ops (`_BROADCASTING`): the broadcast of their operands' shapes;
        - Reshape to a static target: the target, its 0s and negative dimensions resolved
          against the input's shape (which needs the input's entry only if the target has
          them);
        - Expand, and OpenVINO's Broadcast (numpy, bidirectional), to a static target;
        - `_ON_SHAPE` ops (their other inputs static): their own kernel on an array of the
          input's shape holding nothing."""
        if len(node.outputs) != 1 or not node.outputs[0] or node.subgraphs():
            return
        domain = "" if node.domain == "ai.onnx" else node.domain
        op, attrs, inputs = node.op_type, node.attrs, node.inputs
        rule = None
        if op in _BROADCASTING.get(domain, ()) and inputs and all(inputs) and (
                domain == OPENVINO_DOMAIN and str(attrs.get("auto_broadcast", "numpy")).lower()
                in ("numpy", "none") or domain == "" and _since(node, self.opsets, 7)):
            rule, needed = _broadcast_rule, list(inputs)
        elif op == "Reshape" and len(inputs) == 2 and inputs[1] in self.statics and (
                domain == "" and _since(node, self.opsets, 5) or domain == OPENVINO_DOMAIN):
            copies = domain == OPENVINO_DOMAIN and as_bool(attrs, "special_zero") or \
                domain == "" and not attrs.get("allowzero", 0)
            rule = _reshape_rule(copies)
            target = self.known.get(inputs[1])
            needed = [inputs[1]] if target is not None and not np.any(
                (np.asarray(target) < 0) | copies & (np.asarray(target) == 0)) \
                else list(inputs)
        elif (op == "Expand" and domain == "" or op == "Broadcast" and domain == OPENVINO_DOMAIN
              and str(attrs.get("mode", "numpy")).lower() in ("numpy", "bidirectional")) \
                and len(inputs) == 2 and inputs[1] in self.statics:
            rule, needed = _expand_rule, list(inputs)
        elif op in _ON_SHAPE.get(domain, ()) and inputs and all(
                n in self.statics for n in inputs[1:] if n):
            rule, needed = _on_shape_rule, list(inputs)
        if rule is not None:
            self.rules[node.outputs[0]] = (node, rule, set(needed))


def _since(node: Node, opsets, version: int) -> bool:
    """Whether an ONNX node's opset is `version` or later."""
    return (node.version or opsets.get("", opsets.get("ai.onnx", 1))) >= version


def _ruled(rule, read: list, fn):
    """A shape rule called with its inputs' shapes (`read`: a shape from an entry, else the
    shape of a static value), the static values themselves and the node's kernel `fn`. Where
    the rule fails, the node fails: `fn` is run on inputs of those shapes to raise its own
    error (the rule's if it does not)."""
    def shape_of(*args):
        shapes = [a if r else np.shape(a) for a, r in zip(args, read)]
        try:
            return tuple(rule(shapes, args, fn))
        except Exception:
            with np.errstate(all="ignore"):
                fn(*[_of_shape(a) if r else a for a, r in zip(args, read)])
            raise

    return shape_of


def _broadcast_rule(shapes, values, fn):
    return np.broadcast_shapes(*shapes)


def _expand_rule(shapes, values, fn):
    """Expand and Broadcast: the broadcast of the input's shape and the target (numpy-mode
    Broadcast's result is its target, which that broadcast is wherever the node runs)."""
    return np.broadcast_shapes(shapes[0], tuple(flat_int_list(values[1])))


def _reshape_rule(copies: bool):
    """Reshape: a target without 0s that copy nor negative dimensions (numpy infers any, as
    -1) is the shape itself, read without the input's; any other, the node's kernel on an
    input of the input's shape."""
    def rule(shapes, values, fn):
        dims = flat_int_list(values[1])
        if any(d < 0 for d in dims) or copies and 0 in dims:
            return fn(_of_shape(shapes[0]), values[1]).shape
        return dims

    return rule


def _on_shape_rule(shapes, values, fn):
    return fn(_of_shape(shapes[0]), *values[1:]).shape


def _kept_shapes(spec: LoopSpec, opsets) -> dict[str, int]:
    """The carried values whose shape no iteration changes: param -> the loop input holding its
    initial value. The body makes each from its own param through ops whose result has the shape
    of their first input: another name for it (Identity), or a scatter updating it
    (``updates_first``, ScatterND say: jax2onnx's ``buf.at[k].set(y)``)."""
    producer = {name: node for node in spec.body.nodes for name in node.outputs if name}
    kept = {}
    for inp in spec.inputs:
        if not isinstance(inp, CarriedInput):
            continue
        name, seen = inp.result, set()
        while name != inp.param:
            node = producer.get(name)
            if node is None or name in seen or node.subgraphs() or not node.inputs \
                    or not _keeps_first_shape(node, opsets):
                break  # (a name seen again: a body reading a name before making it)
            seen.add(name)
            name = node.inputs[0]
        else:
            kept[inp.param] = inp.outer
    return kept


def _keeps_first_shape(node: Node, opsets) -> bool:
    try:
        definition = registry.definition_of(node, opsets)
    except UnsupportedOpError:
        return False  # compiling the body says so, naming the node
    if definition.identity:
        return True
    return registry.type_keeping(registry.build(node, opsets).fn) == FIRST_INPUT


def _shape_once(node: Node, shapes: _Shapes, opsets, results: set[str], steps: list):
    """A step running a Shape (Size, ShapeOf) node once a run, if its input's shape is the same
    at every iteration (its entry, `_Shapes.entry`, the steps making it appended to `steps`),
    else None. The node's kernel runs on an array of that shape holding nothing."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    if node.op_type not in _SHAPE_OPS.get(domain, ()) or len(node.inputs) != 1 \
            or len(node.outputs) != 1 or node.outputs[0] in results:
        return None  # (the loop keeps or emits a body output an iteration at a time)
    (name,) = node.inputs
    entry = shapes.entry(name, steps)
    if entry is None:
        return None
    fn = registry.build(node, opsets).fn
    return HoistStep(chunks.once(lambda shape: fn(_of_shape(shape)), False), [entry],
                     list(node.outputs), node.label, fn, [False],
                     work=_work("shape", node, shapes.why(name), name), once=True)


def _of_shape(shape):
    """An array of `shape` holding nothing (every element a view of one), for a Shape op."""
    return np.broadcast_to(np.int8(0), shape)


def _integer(value) -> int | None:
    """An integer attribute, or None for anything else (the node then stays in the body, where
    its kernel reports the bad attribute)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _reduced_rows(node: Node, opsets, own, by_attribute: bool):
    """A reduction's call on rows: its axes (an attribute, or a static input) shifted past the
    row axis; none, or none named, every axis of a row, which is every axis of the chunk but the
    row axis (or none, with noop_with_empty_axes, as on a row). Rows of one number (a chunk of
    one axis) each reduce as the node does, a row at a time: a reduction over no axis is no
    reduction to numpy."""
    if by_attribute:
        axes = node.attrs.get("axes")
        if axes is not None and len(axes) > 0:
            shifted = registry.build(node, opsets, dict(
                node.attrs, axes=[a + 1 if a >= 0 else a for a in axes])).fn
            return chunks.leading(shifted)
        every: dict[int, object] = {}  # a chunk's rank -> the kernel over all its axes but one

        def over_each_row(x):
            kernel = every.get(x.ndim)
            if kernel is None:
                kernel = every[x.ndim] = registry.build(node, opsets, dict(
                    node.attrs, axes=list(range(1, x.ndim)))).fn
            return kernel(x)

        return chunks.reduced(over_each_row, own, by_attribute=True)
    noop = bool(node.attrs.get("noop_with_empty_axes", 0))
    return chunks.reduced(own, own, by_attribute=False, noop=noop)


def _batchable(node: Node, batched, statics, opsets, taken: set[str]):
    """(hoisted step, nodes left in the body) computing `node` from batched rows; else why not,
    for a node reading no state of the loop and a row at least (a key of `plan.NOT_HOISTED`),
    or "" for any other.

    A recurrent cell whose input is batched is split: its input projection is hoisted (as a
    value named by nothing in `taken`, which the name joins) and a recurrence node stays in the
    body."""
    names = [name for name in node.inputs if name]
    free = bool(names) and all(n in batched or n in statics for n in names) \
        and any(n in batched for n in names)  # (it reads no state of the loop)
    if node.subgraphs():
        return "subgraph" if free else ""
    try:
        definition = registry.definition_of(node, opsets)
    except UnsupportedOpError:
        return ""  # compiling the body says so, naming the node
    if definition.batch == "cell":  # (its state aside: the projection of its input row)
        return _split_cell(node, definition, batched, statics, opsets, taken) or (
            "cell operands" if free else "")
    if not free:
        return ""
    mask = [bool(name) and name in batched for name in node.inputs]
    if not definition.batches(node.attrs, mask):
        return "no rows form" if definition.batch is None else "attributes"
    form = definition.batch
    if form == "first" and any(mask[1:]):
        return "operand place"
    if form in ("matmul", "reshape", "axis_attribute") and mask != [True, False] \
            or form in ("broadcast", "axis", "split") \
            and mask != [True] + [False] * (len(mask) - 1):
        return "operand place"
    if form == "axes" and (not mask[0] or any(mask[1:])):
        return "operand place"
    if form == "axes" and (len(node.inputs) < 2 or not node.inputs[1]):
        return "no axes"  # squeezing every unit axis would squeeze a one-row chunk's row axis
    own = registry.build(node, opsets).fn
    if form in ("reduction", "reduction_attribute"):
        if not mask[0] or any(mask[1:]):
            return "operand place"
        call = _reduced_rows(node, opsets, own, form == "reduction_attribute")
    elif form == "axes_attribute":
        axes = node.attrs.get("axes")
        if not mask[0] or any(mask[1:]):
            return "operand place"
        if axes is None or len(axes) == 0:
            return "no axes"  # (none or empty: every axis, the row axis too)
        attrs = dict(node.attrs, axes=[a + 1 if a >= 0 else a for a in axes])
        call = chunks.leading(registry.build(node, opsets, attrs).fn)
    elif form in ("axis_attribute", "concat", "split"):
        axis = _integer(node.attrs.get("axis"))
        if axis is None:  # (Gather's and Split's default 0 is a real default; Concat-1's 1 is
            if form == "concat" or "axis" in node.attrs:  # not read)
                return "axis"
            axis = 0
        attrs = dict(node.attrs, axis=axis + 1 if axis >= 0 else axis)
        shifted = registry.build(node, opsets, attrs).fn
        call = chunks.gathered(shifted, own) if form == "axis_attribute" else \
            chunks.concatenated(shifted, mask) if form == "concat" else chunks.parts(shifted)
    else:
        call = _ADAPTERS[form](own, mask)
    return HoistStep(call, list(node.inputs), list(node.outputs), node.label, own, mask,
                     work=_work("rows", node), exact=form in _EXACT), []


def _why_static_kept(node: Node, statics, opsets, results: set[str]) -> str:
    """Why `node`, whose inputs are all static, stays in the body (`_invariant` declined it): a
    key of `plan.NOT_HOISTED`, or "" for a node with no inputs or another's."""
    names = [name for name in node.inputs if name]
    if not names or any(n not in statics for n in names):
        return ""
    if node.subgraphs():
        return "subgraph"
    if any(name in results for name in node.outputs):
        return "body output"
    try:
        definition = registry.definition_of(node, opsets)
    except UnsupportedOpError:
        return ""
    return "stateful" if definition.stateful else "not pure"


def _split_cell(node: Node, definition, batched, statics, opsets, taken: set[str]):
    """A cell whose input X is batched and W, B static: hoist ``X W^T + B`` (CellProjection);
    the recurrence op the kernel names stays in the body."""
    recurrence, w_at, b_at = definition.cell
    if len(node.inputs) <= b_at or node.inputs[0] not in batched \
            or node.inputs[w_at] not in statics or node.inputs[b_at] not in statics:
        return None
    # (Named as what it is, in the model's terms: the cell's input times its weight, plus bias.)
    projected = fresh_name(f"{node.inputs[0]} W + b", taken)
    # The projection gets the cell's attributes and the recurrence it feeds: it lays out the
    # gates as that recurrence expects.
    projection = Node("CellProjection", [node.inputs[0], node.inputs[w_at], node.inputs[b_at]],
                      [projected], dict(node.attrs, recurrence=recurrence, split_from=node.ref),
                      LOOP_DOMAIN,
                      f"{node.name}/x_projection", version=1)
    fn = registry.build(projection, opsets).fn
    # Errors name the cell, as the body's own kernel would.
    step = HoistStep(chunks.leading(fn), list(projection.inputs), [projected], node.label, fn,
                     [True, False, False],
                     work=HoistedWork("input projection", node.model_nodes, (projected,),
                                      "CellProjection"))
    rest = [name for k, name in enumerate(node.inputs[1:], 1) if k not in (w_at, b_at)]
    inputs = [projected] + rest
    if recurrence == "GRUCellRecurrence":
        inputs.append(node.inputs[b_at])  # the recurrent bias of linear_before_reset
    kept = Node(recurrence, inputs, list(node.outputs), dict(node.attrs, split_from=node.ref),
                LOOP_DOMAIN, node.name, version=1)
    return step, [kept]
