"""Compile a `Graph` once into a flat schedule both drivers execute.

A compiled program numbers every value with a slot. Each step names a kernel (already bound to its
node's attributes), the slots it reads (-1: an omitted optional input, passed as None), the slots it
writes (-1: an unused output) and the slots whose last reader it is, so they can be dropped right
after it (liveness). Constants live in their slots from the start and are never dropped.

A loop node becomes a step whose kernel is a loop driver (Cython's `_core.LoopDriver` or the
pure-Python `_pydriver.LoopDriver`) holding its own compiled body. Values a body reads from an
enclosing scope by name become extra inputs of that step, after the node's own, so the runner and
the liveness analysis see them like any other input.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from . import ops
from .errors import ModelError
from .ir import LOOP_DOMAIN, CarriedInput, ConcatOutput, Graph, LoopSpec, Node

__all__ = ["CompiledProgram", "CompiledStep", "Settings", "compile_graph", "driver_module",
           "node_kernel", "node_version"]

DEFAULT_MAX_ITERATIONS = 100_000_000
PROGRESS_EVERY = 1024


@dataclass
class Settings:
    """Choices fixed at compile time: which driver runs loops, the iteration guard, and an
    optional progress callback ``progress(label, done, total_or_None, finished)``, called every
    `PROGRESS_EVERY` iterations of a loop and once when it ends."""

    driver: str = "cython"
    max_iterations: int | None = DEFAULT_MAX_ITERATIONS
    progress: object = None
    hoist: bool = True  # the Cython driver hoists loop-invariant batched work (see _hoist.py)

    @classmethod
    def make(cls, driver: str | None = None, max_iterations: int | None = DEFAULT_MAX_ITERATIONS,
             progress=None, hoist: bool = True):
        if driver is None:
            driver = "python" if os.environ.get("CYLOOP_PURE_PYTHON", "") not in ("", "0") \
                else "cython"
        if driver not in ("cython", "python"):
            raise ValueError(f"driver must be 'cython' or 'python', not {driver!r}")
        if max_iterations is not None and max_iterations < 0:
            raise ValueError(f"max_iterations must be None or >= 0, not {max_iterations}")
        return cls(driver, max_iterations, progress, bool(hoist))


def driver_module(settings: Settings):
    if settings.driver == "python":
        from . import _pydriver

        return _pydriver
    from . import _core

    return _core


@dataclass
class CompiledStep:
    fn: object
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    kills: tuple[int, ...]
    multi: bool
    out_ok: bool
    label: str
    op_type: str


@dataclass
class CompiledProgram:
    """A graph as a flat schedule; `loops` holds the loop drivers in schedule order (for plans)."""

    name: str
    slot_names: list[str]
    constants: dict[int, object]
    input_slots: tuple[int, ...]
    output_slots: tuple[int, ...]
    steps: list[CompiledStep]
    loops: list = field(default_factory=list)
    names: dict[str, int] = field(default_factory=dict)  # every name, aliases included

    def slot(self, name: str) -> int:
        return self.names[name]


def compile_graph(graph: Graph, settings: Settings, captures: list[str] = (),
                  opsets: dict[str, int] | None = None) -> CompiledProgram:
    """Schedule `graph`. `captures` are outer-scope names the graph reads; they become inputs after
    the graph's own. `opsets` (a subgraph inherits its parent's) picks kernel versions."""
    opsets = dict(opsets or {})
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
        constant = np.array(value, copy=True)  # the model's own, never handed out writeable
        constant.flags.writeable = False
        constants[slot_of(name)] = constant
    defined = set(slots)

    steps: list[CompiledStep] = []
    loops = []
    for node in graph.nodes:
        extra = _node_captures(node)
        for name in list(node.inputs) + extra:
            if name and name not in defined:
                raise ModelError(f"graph {graph.name!r}, {node.label}: input {name!r} is not "
                                 "defined by any earlier node, input or initializer")
        if _is_identity(node):
            # No step: the output is another name for the input's value (so, for instance, a
            # carried value emitted through an Identity is still stored once).
            slots[node.outputs[0]] = slot_of(node.inputs[0])
            defined.add(node.outputs[0])
            continue
        fn, multi, out_ok = _build_kernel(node, extra, settings, opsets)
        if hasattr(fn, "plan"):
            loops.append(fn)
        elif hasattr(fn, "loops"):  # If / SequenceMap: the loops inside their subgraphs
            loops.extend(fn.loops)
        inputs = tuple(slot_of(name) if name else -1 for name in list(node.inputs) + extra)
        outputs = tuple(slot_of(name) if name else -1 for name in node.outputs)
        defined.update(name for name in node.outputs if name)
        steps.append(CompiledStep(fn, inputs, outputs, (), multi, out_ok, node.label, node.op_type))

    for out in graph.outputs:
        if out.name not in defined:
            raise ModelError(f"graph {graph.name!r}: output {out.name!r} is not defined by any "
                             "node, input or initializer")
    output_slots = tuple(slots[out.name] for out in graph.outputs)

    # Liveness: a slot dies after its last reader, unless it is a constant or a graph output.
    keep = set(constants) | set(output_slots)
    last_reader: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in step.inputs:
            if slot >= 0:
                last_reader[slot] = index
        for slot in step.outputs:  # a value never read dies where it is made
            if slot >= 0:
                last_reader.setdefault(slot, index)
    kills: dict[int, list[int]] = {}
    for slot, index in last_reader.items():
        if slot not in keep:
            kills.setdefault(index, []).append(slot)
    for index, step in enumerate(steps):
        step.kills = tuple(sorted(kills.get(index, ())))

    return CompiledProgram(graph.name, slot_names, constants, input_slots, output_slots, steps,
                           loops, dict(slots))


def _is_identity(node: Node) -> bool:
    return (node.op_type == "Identity" and node.domain in ("", "ai.onnx", "openvino")
            and len(node.inputs) == 1 and len(node.outputs) == 1 and bool(node.inputs[0])
            and bool(node.outputs[0]) and node.outputs[0] != node.inputs[0])


def _node_captures(node: Node) -> list[str]:
    """Outer-scope names the node's subgraphs read, in first-use order."""
    names: dict[str, None] = {}
    for sub in node.subgraphs():
        for name in sub.free_names():
            names[name] = None
    return list(names)


def _build_kernel(node: Node, captures: list[str], settings: Settings, opsets: dict[str, int]):
    """(callable, multi, out_ok) for one node; loop nodes get a driver around a compiled body."""
    if node.domain == LOOP_DOMAIN and node.op_type == "BatchedScan":
        from ._control import BatchedScanRunner

        inner = Node("Loop", node.inputs[1:], node.outputs, {"spec": node.attrs["spec"]},
                     LOOP_DOMAIN, node.name)
        driver, _, _ = _build_kernel(inner, captures, settings, opsets)
        runner = BatchedScanRunner(driver, node.attrs["num_states"], len(node.inputs) - 1,
                                   node.label)
        return runner, True, False
    if node.domain == LOOP_DOMAIN and node.op_type == "Loop":
        spec = node.attrs.get("spec")
        if not isinstance(spec, LoopSpec):
            raise ModelError(f"{node.label}: a cyloop Loop node needs a LoopSpec 'spec' attribute")
        spec.validate(node.label, len(node.inputs))
        if len(spec.outputs) != len(node.outputs):
            raise ModelError(f"{node.label}: the spec declares {len(spec.outputs)} outputs but "
                             f"the node has {len(node.outputs)}")
        hoist = None
        if settings.driver == "cython" and settings.hoist:
            from ._hoist import hoist_loop

            hoisted = hoist_loop(spec, captures, opsets)
            if hoisted is not None:
                spec, hoist = hoisted
        body = compile_graph(spec.body, settings, captures=captures, opsets=opsets)
        driver = driver_module(settings).LoopDriver(spec, body, node.label, settings,
                                                    plan_destinations(spec, body), hoist)
        return driver, True, False
    if node.domain in ("", "ai.onnx") and node.op_type in ("If", "SequenceMap"):
        return _build_control(node, captures, settings, opsets)
    return node_kernel(node, opsets)


def node_version(node: Node, opsets: dict[str, int]) -> int:
    """The op version a node runs at: its own (OpenVINO), else its graph's opset."""
    return node.version if node.version is not None else \
        opsets.get(node.domain, opsets.get("", 1))


def node_kernel(node: Node, opsets: dict[str, int], attrs: dict | None = None):
    """(callable, multi, out_ok) of a plain op node, built from `attrs` (default: its own)."""
    definition = ops.lookup(node.domain, node.op_type, node_version(node, opsets),
                            where=node.label)
    try:
        fn = definition.build(node.attrs if attrs is None else attrs, len(node.outputs))
    except (KeyError, ValueError, TypeError) as e:
        raise ModelError(f"{node.label}: bad attributes for {node.op_type}: {e}") from e
    return fn, definition.multi, definition.out and len(node.outputs) == 1


def _build_control(node: Node, captures: list[str], settings: Settings, opsets: dict[str, int]):
    from ._control import IfRunner, SequenceMapRunner

    Program = driver_module(settings).Program

    def subgraph(key):
        graph = node.attrs.get(key)
        if not isinstance(graph, Graph):
            raise ModelError(f"{node.label}: the {node.op_type} node has no {key!r} subgraph")
        return Program(compile_graph(graph, settings, captures=captures, opsets=opsets))

    if node.op_type == "If":
        then_program, else_program = subgraph("then_branch"), subgraph("else_branch")
        for program, key in ((then_program, "then_branch"), (else_program, "else_branch")):
            if len(program.compiled.output_slots) != len(node.outputs):
                raise ModelError(f"{node.label}: {key} has {len(program.compiled.output_slots)} "
                                 f"outputs, the node {len(node.outputs)}")
        return IfRunner(then_program, else_program, len(node.outputs), node.label), True, False
    body = subgraph("body")
    n_params = len(node.attrs["body"].inputs)
    if n_params != len(node.inputs):
        raise ModelError(f"{node.label}: the body has {n_params} inputs, the node "
                         f"{len(node.inputs)}")
    return SequenceMapRunner(body, len(node.inputs), len(node.outputs), node.label), True, False


def plan_destinations(spec: LoopSpec, body: CompiledProgram) -> dict[int, tuple[str, int]]:
    """Which body results a kernel may write straight into their destination.

    Returns {result slot: ("row", output index) or ("pool", carried input index)}. A result that is
    both emitted and carried lives in its output row (the next iteration reads it there); one that
    is only carried gets a ping-pong pool. Only results made by an ``out=``-capable single-output
    step qualify; a body input passed through is never written.
    """
    producer = {}
    for index, step in enumerate(body.steps):
        if step.out_ok:
            producer[step.outputs[0]] = index
    destinations: dict[int, tuple[str, int]] = {}
    for j, out in enumerate(spec.outputs):
        slot = body.slot(out.result)
        if isinstance(out, ConcatOutput) and slot in producer and slot not in destinations:
            destinations[slot] = ("row", j)
    for k, inp in enumerate(spec.inputs):
        if isinstance(inp, CarriedInput):
            slot = body.slot(inp.result)
            if slot in producer and slot not in destinations:
                destinations[slot] = ("pool", k)
    return destinations
