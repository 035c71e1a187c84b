"""Compile a `Graph` once into a flat schedule both drivers execute.

A compiled program numbers every value with a slot. Each step names a kernel (already bound to its
node's attributes, with the traits the registry declares for it), the slots it reads (-1: an
omitted optional input, passed as None), the slots it writes (-1: an unused output) and the slots
whose last reader it is, so they can be dropped right after it (liveness). Constants live in their
slots from the start and are never dropped.

A loop node becomes a step whose kernel is a loop driver (Cython's `_core.LoopDriver` or the
reference `reference.LoopDriver`) holding its own compiled body. Values a body reads from an
enclosing scope by name become extra inputs of that step, after the node's own, so the runner and
the liveness analysis see them like any other input.
"""

from __future__ import annotations

import dataclasses
import gc
import threading

import numpy as np

from .._records import Record
from ..accel.aligned import owns_memory
from ..errors import ModelError, UnsupportedOpError
from ..ir import LOOP_DOMAIN, MAX_NESTING, Graph, LoopSpec, Node
from ..kernels import registry
from ..kernels.registry import FIRST_INPUT, abilities_of
from . import _core, reference
from .control import BatchedScanRunner, IfRunner, SequenceMapRunner
from .counters import counters_as_iterations
from .destinations import plan_destinations, plan_steps
from .fuse import fuse_loop
from .hoist import hoist_loop
from .hoist_choice import HoistChoice
from .settings import AT_ONCE, Settings
from .shape_memo import ShapeMemo, shape_memo
from .stacking import stack_appended_sequences

__all__ = ["CompiledProgram", "CompiledStep", "compile_graph", "program"]


def _driver(settings: Settings):
    """The module whose Program and LoopDriver run graphs under `settings`."""
    return reference if settings.driver == "python" else _core


def program(compiled: CompiledProgram, settings: Settings):
    """A runnable program (the driver's `Program`) for a compiled graph."""
    return _driver(settings).Program(compiled)


class CompiledStep(Record):
    """One node of the schedule: its kernel and traits, and the slots it reads, writes, frees.

    `fn`, the kernel; `inputs`, `outputs` and `kills`, slots; `multi`: it returns a tuple, one
    value per output; `out`: it takes ``out=`` for its (first) result, whose shape follows from
    its inputs' shapes (`positional_out`: as one more positional argument); `scalar`:
    (operator, scalar types), see kernels/registry.py; `node`, what errors and plans name (a
    label string per step would cost as much as the rest of the step on a large model: it is
    made when asked for); `keeps`: for a ufunc step that is the last reader of an input, the
    operand kinds on which that input's buffer may take the result (registry.type_keeping; 0:
    never), or FIRST_INPUT, a kernel that updates its first input in place, that input dying
    here and read by it once. The Cython runner checks at each call that nothing else holds the
    buffer (`Program._spare_input`)."""

    __slots__ = _fields = ("fn", "inputs", "outputs", "kills", "multi", "out", "positional_out",
                           "scalar", "node", "keeps")

    def __init__(self, fn, inputs: tuple[int, ...], outputs: tuple[int, ...],
                 kills: tuple[int, ...], multi: bool, out: bool, positional_out: bool,
                 scalar: tuple | None, node: Node, keeps: int = 0):
        self.fn = fn
        self.inputs = inputs
        self.outputs = outputs
        self.kills = kills
        self.multi = multi
        self.out = out
        self.positional_out = positional_out
        self.scalar = scalar
        self.node = node
        self.keeps = keeps

    @property
    def label(self) -> str:
        return self.node.label

    @property
    def op_type(self) -> str:
        return self.node.op_type


class CompiledProgram(Record):
    """A graph as a flat schedule; `loops` holds the loop drivers in schedule order (for plans).

    `names`: the slots of the graph's inputs (captures included) and outputs, by name, what loop
    drivers and plans look up (every slot's name is in `slot_names`; a map of all the names
    would cost as much as the schedule on a large model)."""

    _fields = ("name", "slot_names", "constants", "input_slots", "output_slots", "steps",
               "loops", "names", "memo")

    def __init__(self, name: str, slot_names: list[str], constants: dict[int, object],
                 input_slots: tuple[int, ...], output_slots: tuple[int, ...],
                 steps: list[CompiledStep], loops: list | None = None,
                 names: dict[str, int] | None = None, memo: ShapeMemo | None = None):
        self.name = name
        self.slot_names = slot_names
        self.constants = constants
        self.input_slots = input_slots
        self.output_slots = output_slots
        self.steps = steps
        self.loops = [] if loops is None else loops
        self.names = {} if names is None else names
        self.memo = memo  # (its shape arithmetic, remembered per input shapes: shape_memo.py)

    def slot(self, name: str) -> int:
        return self.names[name]


def _constant(value) -> np.ndarray:
    """An initializer as the model's own read-only array: as it is when it already is one (a
    read-only array holding its own memory, as the frontends make them, aligned or not: no
    second copy of the weights), else a read-only copy (a caller's array may change after
    compiling)."""
    if owns_memory(value) and not value.flags.writeable:
        return value
    constant = np.array(value, copy=True)
    constant.flags.writeable = False
    return constant


def compile_graph(graph: Graph, settings: Settings, captures: list[str] = (),
                  opsets: dict[str, int] | None = None) -> CompiledProgram:
    """Schedule `graph`. `captures` are outer-scope names the graph reads; they become inputs after
    the graph's own. `opsets` (a subgraph inherits its parent's) picks kernel versions. Subgraphs
    nested deeper than MAX_NESTING are a ModelError."""
    depth = getattr(_nesting, "depth", 0)  # graphs being compiled around this one
    if depth > MAX_NESTING:
        raise ModelError(f"graph {graph.name!r}: subgraphs nested more than {MAX_NESTING} deep; "
                         "cyloop runs at most that")
    _nesting.depth = depth + 1
    # Compiling makes many small objects and few reference cycles: the cyclic collector would
    # walk the growing schedule again and again (half the compile time of a large IR), so it
    # pauses until the outermost graph is compiled.
    pause = depth == 0 and gc.isenabled()
    if pause:
        gc.disable()
    try:
        return _compile_graph(graph, settings, captures, opsets, top=depth == 0)
    finally:
        _nesting.depth = depth
        if pause:
            gc.enable()


_nesting = threading.local()  # this thread's depth of compile_graph calls


def constants_folded(graph: Graph, opsets: dict[str, int]) -> Graph:
    """`graph` with each ONNX Constant node (no inputs) made an initializer of the value its
    attribute holds, made once here: in a loop's body it would otherwise run each iteration, or
    be hoisted and made again each run. Itself where it has none."""
    opsets = {**opsets, **graph.opsets}
    folded, nodes = {}, []
    for node in graph.nodes:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and not node.inputs \
                and len(node.outputs) == 1 and node.outputs[0]:
            folded[node.outputs[0]] = registry.build(node, opsets).fn()
        else:
            nodes.append(node)
    if not folded:
        return graph
    return dataclasses.replace(graph, nodes=nodes, initializers={**graph.initializers, **folded})


def _compile_graph(graph: Graph, settings: Settings, captures, opsets,
                   top: bool = False) -> CompiledProgram:
    opsets = dict(opsets or {})
    if settings.driver == "cython":  # (the reference driver runs every graph as written)
        graph = counters_as_iterations(constants_folded(stack_appended_sequences(graph), opsets))
    opsets.update(graph.opsets)
    slots: dict[str, int] = {}  # name -> slot; an Identity's output names its input's slot
    slot_names: list[str] = []

    def slot_of(name: str) -> int:
        if name not in slots:
            slots[name] = len(slot_names)
            slot_names.append(name)
        return slots[name]

    input_names = [v.name for v in graph.inputs] + list(captures)
    if len(set(input_names)) != len(input_names):
        raise ModelError(f"graph {graph.name!r}: an input name is repeated: {input_names}")
    input_slots = tuple(slot_of(name) for name in input_names)
    constants = {}
    for name, value in graph.initializers.items():
        if name in slots:  # an input with a default: the feed wins, as in ONNX
            continue
        constants[slot_of(name)] = _constant(value)
    defined = set(slots)

    steps: list[CompiledStep] = []
    loops = []
    kernels: dict[tuple, registry.Kernel] = {}  # see _shared_kernel
    maps = {v.name for v in graph.inputs if v.kind in MAP_KINDS}
    for node in graph.nodes:
        extra = _node_captures(node)
        if node.domain == MAP_DOMAIN and node.op_type in MAP_OPS:
            maps.update(node.outputs)
        elif extra or node.subgraphs():
            _refuse_maps(node, maps, extra)
        for name in list(node.inputs) + extra:
            if name and name not in defined:
                raise ModelError(f"graph {graph.name!r}, {node.label}: input {name!r} is not "
                                 "defined by any earlier node, input or initializer")
        if not node.outputs:  # (the runner gives every step at least one output slot)
            raise ModelError(f"graph {graph.name!r}, {node.label}: a node with no outputs")
        if _is_identity(node, opsets):
            # No step: the output is another name for the input's value (so, for instance, a
            # carried value emitted through an Identity is still stored once).
            slots[node.outputs[0]] = slot_of(node.inputs[0])
            defined.add(node.outputs[0])
            continue
        kernel = _build_kernel(node, extra, settings, opsets, kernels)
        if hasattr(kernel.fn, "facts"):
            loops.append(kernel.fn)
        elif hasattr(kernel.fn, "loops"):  # If / SequenceMap: the loops inside their subgraphs
            loops.extend(kernel.fn.loops)
        inputs = tuple(slot_of(name) if name else -1 for name in list(node.inputs) + extra)
        outputs = tuple(slot_of(name) if name else -1 for name in node.outputs)
        defined.update(name for name in node.outputs if name)
        steps.append(CompiledStep(kernel.fn, inputs, outputs, (), kernel.multi, kernel.out,
                                  kernel.positional_out, kernel.definition.scalar
                                  if kernel.definition is not None else None, node))

    for out in graph.outputs:
        if out.name not in defined:
            raise ModelError(f"graph {graph.name!r}: output {out.name!r} is not defined by any "
                             "node, input or initializer")
    output_slots = tuple(slots[out.name] for out in graph.outputs)

    # Liveness: a slot dies after its last reader, unless it is a constant or a graph output.
    # (Lists by slot and by step, not dicts: a large graph has hundreds of thousands of each.)
    kept = set(output_slots)
    last_reader = [-1] * len(slot_names)
    for index, step in enumerate(steps):
        for slot in step.inputs:
            if slot >= 0:
                last_reader[slot] = index
        for slot in step.outputs:  # a value never read dies where it is made
            if slot >= 0 and last_reader[slot] < 0:
                last_reader[slot] = index
    kills = [()] * len(steps)
    for slot, index in enumerate(last_reader):  # (in slot order: each step's kills sorted)
        if index >= 0 and slot not in constants and slot not in kept:
            kills[index] += (slot,)
    for step, killed in zip(steps, kills):
        step.kills = killed
        if step.out and set(killed) & set(step.inputs):
            step.keeps = registry.type_keeping(step.fn)
            if step.keeps == FIRST_INPUT and not (step.inputs[0] in killed
                                                  and step.inputs.count(step.inputs[0]) == 1):
                step.keeps = 0

    names = {name: slots[name] for name in input_names}
    names.update((out.name, slots[out.name]) for out in graph.outputs)
    # (The reference driver runs every graph as written; a subgraph's shape work is its loop's.)
    memo = shape_memo(steps, input_slots, graph.inputs, constants, output_slots) \
        if top and settings.driver == "cython" else None
    return CompiledProgram(graph.name, slot_names, constants, input_slots, output_slots, steps,
                           loops, names, memo)


# Maps (cyloop/maps.py) are values of graph inputs and of these ops' results; they run outside
# subgraphs only: the loop drivers, and what they hoist and fuse, plan for tensors and sequences.
MAP_KINDS = ("map", "sequence_map")
MAP_DOMAIN = "ai.onnx.ml"
MAP_OPS = ("ZipMap", "CastMap", "DictVectorizer")


def _refuse_maps(node: Node, maps: set[str], captures: list[str]) -> None:
    """A ModelError naming `node` (a loop or a branch) where it reads a map, or its subgraphs
    hold an op on maps."""
    read = [name for name in [*node.inputs, *captures] if name in maps]
    if read:
        raise ModelError(f"{node.label}: reads the map {read[0]!r}; cyloop runs maps outside "
                         f"loops and branches only (run the ops on maps before or after it)")
    pending = list(node.subgraphs())
    while pending:
        sub = pending.pop()
        for inner in sub.nodes:
            if inner.domain == MAP_DOMAIN and inner.op_type in MAP_OPS:
                raise ModelError(f"{node.label}: its subgraph {sub.name!r} holds "
                                 f"{inner.label}, an op on maps; cyloop runs maps outside "
                                 f"loops and branches only")
            pending.extend(inner.subgraphs())
        if any(v.kind in MAP_KINDS for v in [*sub.inputs, *sub.outputs]):
            raise ModelError(f"{node.label}: its subgraph {sub.name!r} has a map among its "
                             f"inputs or outputs; cyloop runs maps outside loops and branches "
                             f"only")


def _is_identity(node: Node, opsets: dict[str, int]) -> bool:
    """Whether the node's kernel declares ``identity`` (and the node renames one value)."""
    if not (len(node.inputs) == 1 and len(node.outputs) == 1 and node.inputs[0]
            and node.outputs[0] and node.outputs[0] != node.inputs[0]):
        return False
    try:
        return registry.definition_of(node, opsets).identity
    except UnsupportedOpError:
        return False


def _node_captures(node: Node) -> list[str]:
    """Outer-scope names the node's subgraphs read, in first-use order."""
    names: dict[str, None] = {}
    for sub in node.subgraphs():
        for name in sub.free_names():
            names[name] = None
    return list(names)


def _runner(fn) -> registry.Kernel:
    """A control-flow runner or loop driver, as a kernel returning one value per output."""
    return registry.Kernel(fn, None, True, False, False)


def _build_kernel(node: Node, captures: list[str], settings: Settings,
                  opsets: dict[str, int], kernels: dict | None = None) -> registry.Kernel:
    """The kernel of one node; loop nodes get a driver around a compiled body. `kernels`: the
    graph's shareable kernels (see `_op_kernel`)."""
    if node.domain == LOOP_DOMAIN and node.op_type == "BatchedScan":
        inner = Node("Loop", node.inputs[1:], node.outputs, {"spec": node.attrs["spec"]},
                     LOOP_DOMAIN, node.name)
        driver = _build_kernel(inner, captures, settings, opsets).fn
        return _runner(BatchedScanRunner(driver, node.attrs["num_states"],
                                         len(node.inputs) - 1, node.label))
    if node.domain == LOOP_DOMAIN and node.op_type == "Loop":
        spec = node.attrs.get("spec")
        if not isinstance(spec, LoopSpec):
            raise ModelError(f"{node.label}: a cyloop Loop node needs a LoopSpec 'spec' attribute")
        spec.validate(node.label, len(node.inputs))
        if len(spec.outputs) != len(node.outputs):
            raise ModelError(f"{node.label}: the spec declares {len(spec.outputs)} outputs but "
                             f"the node has {len(node.outputs)}")
        if settings.driver == "python":
            body = compile_graph(spec.body, settings, captures=captures, opsets=opsets)
            return _runner(reference.LoopDriver(spec, body, node.label, settings, node=node.ref))
        spec = fuse_loop(dataclasses.replace(spec, body=constants_folded(spec.body, opsets)))
        hoist, not_hoisted, whole = None, [], spec
        if settings.hoist:
            hoisted = hoist_loop(spec, captures, opsets, not_hoisted)
            if hoisted is not None:
                spec, hoist = hoisted
                for step in hoist.steps:
                    _untuned(step.probe, settings)
                _untuned_choices(settings, hoist.sizing)  # its chunk size
        driver = _cython_driver(node, spec, hoist, not_hoisted, captures, settings, opsets)
        if hoist is None or not settings.tune:
            return _runner(driver)
        # Hoisted or not, as measured (engine/hoist_choice.py); tune=False keeps it hoisted.
        # (With tune="at once" too its trial waits for the work to pay: the runs it takes from
        # the hoisted driver are runs the driver's own trials, open at once, wait for.)
        return _runner(HoistChoice(driver, lambda: _cython_driver(node, whole, None, [],
                                                                  captures, settings, opsets)))
    if node.domain in ("", "ai.onnx") and node.op_type in ("If", "SequenceMap"):
        return _runner(_build_control(node, captures, settings, opsets))
    return _op_kernel(node, opsets, settings, kernels)


def _cython_driver(node: Node, spec: LoopSpec, hoist, not_hoisted: list, captures: list[str],
                   settings: Settings, opsets: dict[str, int]):
    """The Cython loop driver of `spec` (its body fused), with `hoist`'s work (or none) run a
    chunk of iterations at a time before them."""
    body = compile_graph(spec.body, settings, captures=captures, opsets=opsets)
    steps = None
    if hoist is not None:
        steps = plan_steps(spec, body, {body.slot(name) for name in hoist.frontier},
                           frozenset(body.slot(name) for name in hoist.computed
                                     if name in hoist.frontier))
    return _core.LoopDriver(spec, body, node.label, settings, plan_destinations(spec, body),
                            hoist, steps, node=node.ref, not_hoisted=not_hoisted)


def _op_kernel(node: Node, opsets: dict[str, int], settings: Settings,
               kernels: dict | None) -> registry.Kernel:
    """The kernel of a plain op node; the one built for an earlier node of the same op, arity
    and attributes dict when there is one in `kernels` (this graph's, by that key).

    Kernels are pure functions of their attributes, so nodes that share one `attrs` dict (an IR
    reader shares equal ones; see `Node`) share one kernel, unless it keeps state of its own
    node (a measured choice; a ``stateful`` one's random stream): a large IR of repeated layers
    keeps one kernel per distinct layer, not one per layer. (The ONNX reader gives each node
    its own dict: nothing is shared.)"""
    key = (node.domain, node.op_type, node.version, id(node.attrs), len(node.inputs),
           len(node.outputs))
    kernel = kernels.get(key) if kernels is not None else None
    if kernel is None:
        kernel = registry.build(node, opsets)
        _untuned(kernel.fn, settings)
        if (kernels is not None and not kernel.definition.stateful
                and not abilities_of(kernel.fn).own_node_state):
            kernels[key] = kernel
    return kernel


def _untuned(fn, settings: Settings) -> None:
    """A kernel with a measured choice keeps its default formulation, untimed, if tuning is off
    (and a layer's products, outside loops, one core); with ``tune="at once"`` its trials open
    on their first calls."""
    abilities = abilities_of(fn)
    _untuned_choices(settings, abilities.measured, abilities.cores)


def _untuned_choices(settings: Settings, measured, cores=None) -> None:
    """`_untuned` of a measured choice (and a layer's choice of cores)."""
    if measured is not None and not settings.tune:
        measured.fix()
    if cores is not None and not settings.tune:
        cores.fix()
    if settings.tune == AT_ONCE:
        for choice in (measured, getattr(cores, "measured", None)):
            if choice is not None:
                choice.payback = 0


def _build_control(node: Node, captures: list[str], settings: Settings, opsets: dict[str, int]):
    def subgraph(key):
        graph = node.attrs.get(key)
        if not isinstance(graph, Graph):
            raise ModelError(f"{node.label}: the {node.op_type} node has no {key!r} subgraph")
        return program(compile_graph(graph, settings, captures=captures, opsets=opsets),
                       settings)

    if node.op_type == "If":
        then_program, else_program = subgraph("then_branch"), subgraph("else_branch")
        for branch, key in ((then_program, "then_branch"), (else_program, "else_branch")):
            if len(branch.compiled.output_slots) != len(node.outputs):
                raise ModelError(f"{node.label}: {key} has {len(branch.compiled.output_slots)} "
                                 f"outputs, the node {len(node.outputs)}")
        return IfRunner(then_program, else_program, len(node.outputs), node.label)
    body = subgraph("body")
    n_params = len(node.attrs["body"].inputs)
    if n_params != len(node.inputs):
        raise ModelError(f"{node.label}: the body has {n_params} inputs, the node "
                         f"{len(node.inputs)}")
    return SequenceMapRunner(body, len(node.inputs), len(node.outputs), node.label)
