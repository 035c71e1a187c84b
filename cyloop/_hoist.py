"""Hoisting: body work that does not depend on the loop's state runs before it, batched.

A value is *batched* when iteration i sees row i of something known before the loop starts: part
i of a sliced input, the iteration number i itself, or ``Gather(x, i)`` of a loop-invariant x by
the iteration number (ONNX Loop's spelling of a sliced input). A value is *static* when it is the
same at every iteration: an invariant input, an outer-scope value, a body constant.

A body node whose inputs are all batched or static, with at least one batched, and whose op
treats each row on its own (elementwise ops, MatMul with the batched operand on the left, the
axis ops, an RNN cell's input projection) gives at iteration i exactly row i of the same op run
on all rows at once. Such nodes leave the body and run on blocks of rows (*chunks*) just before
the iterations that read them; the body reads row i of each hoisted value something left in it
still needs. This is the cuDNN trick the ONNX Loop specification points to: W2's ``x_t @ W``
becomes one GEMM per chunk, and a TensorIterator's LSTMCell is split into its input projection
(hoisted) and its recurrence (left in the body).

Chunks keep memory bounded (about `CHUNK_BYTES` of hoisted rows at a time, not a whole
sequence), so a loop that stops early wastes at most one chunk, and a chunk is computed only
when an iteration that reads it is about to run: a loop of zero iterations computes nothing, and
an error a hoisted node raises surfaces at the iteration that would have raised it. Results
agree with the unhoisted body to rounding (one large GEMM may sum in another order than many
small ones).

Only the Cython driver hoists; the pure-Python driver runs bodies as written, and the tests
compare the two.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ._compile import node_kernel, node_version
from .errors import CyloopError, ExecutionError
from .ir import LOOP_DOMAIN, Graph, InvariantInput, LoopSpec, Node, SlicedInput, Value, slice_count

__all__ = ["CHUNK_BYTES", "FIRST_CHUNK_ROWS", "Hoist", "hoist_loop"]

CHUNK_BYTES = 256 * 1024  # hoisted rows made per chunk (after the first): big GEMMs, little memory
FIRST_CHUNK_ROWS = 16  # the first chunk is small: many loops stop early, and it sizes the rest
MIN_CHUNK_ROWS = 32  # later chunks: enough rows for a GEMM to run at full speed
MAX_CHUNK_ROWS = 4096

# Ufuncs whose result has its inputs' common type, so one of their inputs may take the result
# when it is a buffer the chunk made and nothing reads afterwards.
_IN_PLACE_UFUNCS = {np.add, np.subtract, np.multiply, np.true_divide, np.maximum, np.minimum,
                    np.negative, np.absolute, np.tanh, np.exp, np.log, np.sqrt, np.floor,
                    np.ceil, np.reciprocal}
_TYPE_KEEPING = {np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.negative,
                 np.absolute}  # on integers too (the others make floats of them)

_ELEMENTWISE = {
    "": {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Equal", "Less",
         "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Neg", "Abs",
         "Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "Relu", "Sin", "Cos", "Erf", "Floor", "Ceil",
         "Reciprocal", "Sign", "Cast", "Where", "LeakyRelu", "Elu", "Softplus", "HardSigmoid",
         "Mod", "Round", "Clip"},
    "openvino": {"Add", "Subtract", "Multiply", "Divide", "Power", "Maximum", "Minimum",
                 "SquaredDifference", "FloorMod", "Mod", "Negative", "Abs", "Exp", "Log", "Sqrt",
                 "Sigmoid", "Tanh", "ReLU", "Relu", "Clamp", "Elu", "Gelu", "HSigmoid", "HSwish",
                 "SoftPlus", "Erf", "Floor", "Ceiling", "Equal", "NotEqual", "Less", "LessEqual",
                 "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot",
                 "LogicalXor", "Select", "Convert"},
}
_AXES = {"": {"Squeeze", "Unsqueeze"}, "openvino": {"Squeeze", "Unsqueeze"}}
_RESHAPE = {"": {"Reshape"}, "openvino": {"Reshape"}}
_CELLS = {"LSTMCell": "LSTMCellRecurrence", "GRUCell": "GRUCellRecurrence",
          "RNNCell": "RNNCellRecurrence"}
_CELL_WEIGHTS = {"LSTMCell": (3, 5), "GRUCell": (2, 4), "RNNCell": (2, 4)}  # W, B positions


def _domain(node: Node) -> str:
    return "" if node.domain == "ai.onnx" else node.domain


@dataclasses.dataclass
class _Step:
    """One hoisted node: its batched kernel, reading and writing names of the chunk's scope."""

    call: object  # call(args, rows, reusable buffers) -> tuple of outputs
    inputs: list[str]
    outputs: list[str]
    label: str
    probe: object = None  # the node's own kernel, run on row 0 first (see Hoist.chunk)
    batched: list = dataclasses.field(default_factory=list)  # which inputs have rows
    shown: str = ""  # how plans name the step, if not by its label


class Hoist:
    """The hoisted part of one loop body, computed a chunk of rows at a time (see the module
    docstring). The driver calls `limit` once per run and `chunk` before each block of
    iterations."""

    def __init__(self, sources, statics, steps, frontier, iteration_dtype):
        self.sources = sources  # name -> ("sliced", SlicedInput) | ("iteration",)
        #                                 | ("gather", static name, axis, label)
        self.statics = statics  # name -> ("outer", index) | ("capture", j) | ("const", value)
        self.steps = steps
        self.frontier = frontier  # names the body reads row i of, in the new body's input order
        self.iteration_dtype = iteration_dtype
        self.labels = [source[3] for source in sources.values() if source[0] == "gather"] \
            + [step.shown or step.label for step in steps]
        self._last_use = {}  # name -> the last step reading it
        for index, step in enumerate(steps):
            for name in step.inputs:
                if name:
                    self._last_use[name] = index
        self._kept = set(frontier)

    def _static(self, name, args, n_captures):
        kind, where = self.statics[name]
        if kind == "outer":
            return args[where]
        if kind == "capture":
            return args[len(args) - n_captures + where]
        return where

    def _gather_rows(self, source, args, n_captures):
        """(rows a Gather source has, its data, its axis); no rows for an axis out of range."""
        data = np.asarray(self._static(source[1], args, n_captures))
        axis = source[2] + data.ndim if source[2] < 0 else source[2]
        return (data.shape[axis] if 0 <= axis < data.ndim else 0), data, axis

    def limit(self, args, n_captures: int) -> int:
        """How many iterations the Gather sources and the iteration number's type allow (-1: no
        limit); past it, `past_end`."""
        cap = self._iteration_cap()
        limit = -1 if cap is None else cap
        for source in self.sources.values():
            if source[0] == "gather":
                size = self._gather_rows(source, args, n_captures)[0]
                limit = size if limit < 0 else min(limit, size)
        return limit

    def _iteration_cap(self):
        """Iterations a (narrow) integer iteration number can count, if the hoisted part reads
        it."""
        if np.dtype(self.iteration_dtype).itemsize < 8 and any(
                source[0] == "iteration" for source in self.sources.values()):
            return int(np.iinfo(self.iteration_dtype).max) + 1
        return None  # 64 bits: no loop gets that far

    def past_end(self, i: int, args, n_captures: int) -> Exception:
        """The error iteration i would have raised: a Gather out of rows, or an iteration number
        out of its type's range (the driver's own OverflowError)."""
        cap = self._iteration_cap()
        if cap is not None and i >= cap:
            return OverflowError(f"Python integer {i} out of bounds for "
                                 f"{np.dtype(self.iteration_dtype)}")
        for source in self.sources.values():
            if source[0] == "gather":
                size, data, axis = self._gather_rows(source, args, n_captures)
                if not 0 <= axis < data.ndim:
                    return ExecutionError(f"{source[3]} failed: AxisError: axis {source[2]} is "
                                          f"out of bounds for array of dimension {data.ndim}")
                if size <= i:
                    return ExecutionError(f"{source[3]} failed: IndexError: index {i} is out of "
                                          f"bounds for axis {axis} with size {size}")
        return ExecutionError(f"iteration {i} is past the end of a hoisted input")

    def chunk(self, args, n_captures: int, start: int, rows: int) -> list:
        """The frontier values for iterations [start, start + rows): arrays of `rows` rows."""
        env = {}
        for name, source in self.sources.items():
            if source[0] == "sliced":
                env[name] = _sliced_rows(source[1], args[source[1].outer], start, rows)
            elif source[0] == "iteration":
                env[name] = np.arange(start, start + rows, dtype=self.iteration_dtype)
            else:
                data = np.asarray(self._static(source[1], args, n_captures))
                env[name] = _rows_along(data, source[2], start, rows)
        for name in self.statics:
            env[name] = self._static(name, args, n_captures)
        own = set()  # names of buffers this chunk made, which nothing outside can see
        for index, step in enumerate(self.steps):
            inputs = [env[name] if name else None for name in step.inputs]
            # Inputs dying here whose buffer the chunk made may take the result (in place).
            dying = [name for name in dict.fromkeys(step.inputs) if name in own
                     and self._last_use[name] == index and name not in self._kept]
            try:
                if step.probe is not None and start == 0:
                    # The node as the body has it, on the first row: whatever rank or shape
                    # error it raises at every iteration (every row has one shape) is raised
                    # here, as the body would raise it.
                    step.probe(*[a[0] if b else a for a, b in zip(inputs, step.batched)])
                results = step.call(inputs, rows, [env[name] for name in dying])
            except CyloopError:
                raise
            except Exception as e:
                raise ExecutionError(f"{step.label} failed: {type(e).__name__}: {e}") from e
            for name in dying:
                own.discard(name)
                del env[name]
            for name in list(own):  # a buffer some result views is never reused
                if name in step.inputs and any(isinstance(r, np.ndarray)
                                               and np.may_share_memory(r, env[name])
                                               for r in results):
                    own.discard(name)
            for name, value in zip(step.outputs, results):
                if name:
                    env[name] = value
                    if (isinstance(value, np.ndarray) and value.base is None
                            and value.flags.writeable and all(value is not a for a in inputs)):
                        own.add(name)
        return [np.asarray(env[name]) for name in self.frontier]

    @staticmethod
    def next_rows(done_rows: int, row_bytes: int) -> int:
        """Rows for the next chunk: a small first one, then about `CHUNK_BYTES`' worth."""
        if done_rows == 0:
            return FIRST_CHUNK_ROWS
        return int(min(max(CHUNK_BYTES // max(row_bytes, 1), MIN_CHUNK_ROWS), MAX_CHUNK_ROWS))


def _readonly(arr):
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


def _sliced_rows(desc: SlicedInput, value, start: int, rows: int):
    """Parts start .. start+rows-1 of a sliced input, stacked on a new leading axis (a view)."""
    x = np.asarray(value)
    axis = desc.axis + x.ndim if desc.axis < 0 else desc.axis
    _, first = slice_count(x.shape[axis], desc.start, desc.end, desc.stride, desc.part_size)
    begin = first + start * desc.stride
    index = [slice(None)] * x.ndim
    index[axis] = slice(begin, begin + desc.part_size)
    part = x[tuple(index)]  # a view (an integer index would give a scalar copy when 1-D)
    if not desc.keep_axis:
        part = np.squeeze(part, axis)
    step = desc.stride * x.strides[axis] if rows > 1 else 0
    return as_strided(part, (rows,) + part.shape, (step,) + part.strides, writeable=False)


def _rows_along(data, axis: int, start: int, rows: int):
    """data[start : start+rows] along `axis`, that axis moved to the front (a view)."""
    axis = axis + data.ndim if axis < 0 else axis
    index = [slice(None)] * data.ndim
    index[axis] = slice(start, start + rows)
    return _readonly(np.moveaxis(data[tuple(index)], axis, 0))


# ---------------------------------------------------------------------------------------------
# Batched kernels: call(args, rows), where a batched arg has the rows on a new leading axis.

def _elementwise(fn, batched):
    in_place = isinstance(fn, np.ufunc) and fn in _IN_PLACE_UFUNCS

    def call(args, rows, reusable=()):
        ranks = [np.ndim(a) - 1 if b else np.ndim(a) for a, b in zip(args, batched)
                 if a is not None]
        rank = max(ranks)
        aligned = []
        for a, b in zip(args, batched):
            if b and np.ndim(a) - 1 < rank:  # align the row axis in front of static operands
                a = np.reshape(a, (rows,) + (1,) * (rank - np.ndim(a) + 1) + np.shape(a)[1:])
            aligned.append(a)
        if in_place and reusable:
            shape = np.broadcast_shapes(*[np.shape(a) for a in aligned])
            dtype = np.result_type(*aligned)
            for buffer in reusable:
                if (buffer.shape == shape and buffer.dtype == dtype
                        and (dtype.kind == "f" or fn in _TYPE_KEEPING)):
                    return (fn(*aligned, out=buffer),)
        return (fn(*aligned),)

    return call


def _matmul(transpose_b):
    def call(args, rows, reusable=()):
        a, w = args
        w = np.asarray(w)
        if transpose_b and w.ndim > 1:
            w = np.swapaxes(w, -1, -2)
        if w.ndim == 2 and a.ndim > 2:  # one GEMM over every row of every part
            flat = np.reshape(a, (-1, a.shape[-1]))
            return (np.reshape(np.matmul(flat, w), a.shape[:-1] + (w.shape[-1],)),)
        if w.ndim <= 2:
            return (np.matmul(a, w),)
        return (np.stack([np.matmul(a[k], w) for k in range(rows)]),)

    return call


def _pack(args, rows, reusable=()):
    """Rows of a sliced input, contiguous: as they are if each part already is, else copied."""
    (parts,) = args
    if rows == 0 or parts[0].flags.c_contiguous:
        return (parts,)
    return (np.ascontiguousarray(parts),)


def _shift_axes(axes):
    axes = np.asarray(axes, dtype=np.int64)
    return np.where(axes >= 0, axes + 1, axes)


def _with_axes(fn):
    def call(args, rows, reusable=()):
        data, *rest = args
        if rest and rest[0] is not None:
            return (fn(data, _shift_axes(rest[0]), *rest[1:]),)
        return (fn(data),)

    return call


def _reshaped(fn):
    def call(args, rows, reusable=()):
        data, shape = args
        return (fn(data, np.concatenate([[rows], np.asarray(shape, np.int64).ravel()])),)

    return call


def _leading(fn, multi):
    def call(args, rows, reusable=()):
        result = fn(*args)
        return tuple(result) if multi else (result,)

    return call


# ---------------------------------------------------------------------------------------------
# The analysis

def hoist_loop(spec: LoopSpec, captures: list[str], opsets: dict[str, int]):
    """(new spec, Hoist) with the hoistable part of `spec`'s body taken out, or None."""
    body = spec.body
    params = {v.name for v in body.inputs}
    statics: dict[str, tuple] = {}
    for name, value in body.initializers.items():
        if name not in params:
            statics[name] = ("const", value)
    for j, name in enumerate(captures):
        statics[name] = ("capture", j)
    sources: dict[str, tuple] = {}
    for inp in spec.inputs:
        if isinstance(inp, InvariantInput):
            statics[inp.param] = ("outer", inp.outer)
        elif isinstance(inp, SlicedInput):
            sources[inp.param] = ("sliced", inp)
    iteration_dtype = np.int64
    if spec.iteration_param:
        declared = next(v for v in body.inputs if v.name == spec.iteration_param).dtype
        if declared is not None and declared.kind in "iu":
            iteration_dtype = declared
        sources[spec.iteration_param] = ("iteration",)

    batched = set(sources)
    steps: list[_Step] = []
    kept: list[Node] = []
    hoisted_any = False
    for node in body.nodes:
        version = node_version(node, opsets)
        gather = _as_gather(node, spec.iteration_param, statics)
        if gather is not None:
            sources[node.outputs[0]] = gather
            batched.add(node.outputs[0])
            hoisted_any = True
            continue
        plan = _batchable(node, batched, statics, version, opsets)
        if plan is None:
            kept.append(node)
            continue
        for step, outputs in plan:
            steps.append(step)
            batched.update(o for o in outputs if o)
        kept.extend(node_ for node_ in _kept_part(node, plan))
        hoisted_any = True
    # A sliced part the body still reads, if it is not contiguous (say a column block, or an
    # axis-1 slice), is packed a chunk at a time: one bulk copy, then kernels on contiguous rows.
    packed = {}
    for inp in spec.inputs:
        if isinstance(inp, SlicedInput) and any(inp.param in node.inputs for node in kept):
            packed[inp.param] = f"{inp.param}/packed"
    for param, name in packed.items():
        steps.append(_Step(_pack, [param], [name], f"packing sliced input {param!r}"))
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
    frontier = [name for name in read if name in batched and name not in params]
    new_inputs = list(body.inputs) + [Value(name) for name in frontier]
    new_body = Graph(kept, new_inputs, list(body.outputs), dict(body.initializers),
                     dict(body.opsets), body.name)
    new_spec = dataclasses.replace(spec, body=new_body)
    # Every hoisted node runs, read or not: one that fails must fail as it would in the body.
    needed = set(frontier)
    for step in steps:
        needed.update(n for n in step.inputs if n)
    used_statics = {name: ref for name, ref in statics.items() if name in needed}
    used_sources = {name: src for name, src in sources.items()
                    if name in needed or src[0] == "gather"}
    for src in used_sources.values():
        if src[0] == "gather":
            used_statics.setdefault(src[1], statics[src[1]])
    return new_spec, Hoist(used_sources, used_statics, steps, frontier, iteration_dtype)


def _as_gather(node: Node, iteration_param, statics):
    """``Gather(x, i)`` of a static x by the iteration number: row i of x along the axis."""
    if (iteration_param and _domain(node) == "" and node.op_type == "Gather"
            and len(node.inputs) == 2 and node.inputs[0] in statics
            and node.inputs[1] == iteration_param and len(node.outputs) == 1):
        return ("gather", node.inputs[0], int(node.attrs.get("axis", 0)), node.label)
    return None


def _batchable(node: Node, batched, statics, version, opsets):
    """[(step, outputs)] computing `node`'s outputs from batched rows, or None if it cannot.

    A recurrent cell whose input is batched is split: its input projection is hoisted and a
    recurrence node stays in the body (see `_kept_part`)."""
    domain = _domain(node)
    names = [name for name in node.inputs if name]
    if not names or any(n not in batched and n not in statics for n in names):
        if domain == "openvino" and node.op_type in _CELLS:
            return _split_cell(node, batched, statics, opsets)
        return None
    mask = [bool(name) and name in batched for name in node.inputs]
    if not any(mask) or node.subgraphs():
        return None
    op = node.op_type

    def step(batched_form, attrs=None):
        """The step running `batched_form` of the node's kernel (built from `attrs`), probed
        with the node's own."""
        own = node_kernel(node, opsets)[0]
        fn = own if attrs is None else node_kernel(node, opsets, attrs)[0]
        return [(_Step(batched_form(fn), list(node.inputs), list(node.outputs), node.label, own,
                       mask), node.outputs)]

    if op in _ELEMENTWISE.get(domain, ()):
        if op == "Clip" and any(mask[1:]):
            return None
        mode = str(node.attrs.get("auto_broadcast", "numpy")).lower()
        if mode == "pdpd" or (mode == "none" and not all(mask)):
            return None
        return step(lambda fn: _elementwise(fn, mask))
    if op == "MatMul" and domain in ("", "openvino") and mask == [True, False]:
        if domain == "openvino" and str(node.attrs.get("transpose_a", "false")).lower() \
                in ("true", "1"):
            return None
        transpose_b = domain == "openvino" and str(node.attrs.get("transpose_b", "false")) \
            .lower() in ("true", "1")
        return step(lambda fn: _matmul(transpose_b))
    if op in _AXES.get(domain, ()) and mask[0] and not any(mask[1:]):
        if domain == "" and version < 13:
            axes = node.attrs.get("axes")
            if axes is None:
                return None
            attrs = dict(node.attrs, axes=[a + 1 if a >= 0 else a for a in axes])
            return step(lambda fn: _leading(fn, False), attrs)
        if len(node.inputs) < 2 or not node.inputs[1]:
            return None  # squeezing every unit axis would squeeze a one-row chunk's row axis
        return step(_with_axes)
    if op in _RESHAPE.get(domain, ()) and mask == [True, False] and (domain or version >= 5):
        return step(_reshaped)
    if domain == "openvino" and op in _CELLS:
        return _split_cell(node, batched, statics, opsets)
    return None


def _split_cell(node: Node, batched, statics, opsets):
    """An OpenVINO cell whose input X is batched and W, B static: hoist ``X W^T + B``."""
    w_at, b_at = _CELL_WEIGHTS[node.op_type]
    if len(node.inputs) <= b_at or node.inputs[0] not in batched \
            or node.inputs[w_at] not in statics or node.inputs[b_at] not in statics:
        return None
    projected = f"{node.outputs[0] or node.label}/x_projection"
    projection = Node("CellProjection", [node.inputs[0], node.inputs[w_at], node.inputs[b_at]],
                      [projected], {}, LOOP_DOMAIN, f"{node.name}/x_projection", version=1)
    fn, _, _ = node_kernel(projection, opsets)
    # Errors name the cell, as the body's own kernel would.
    return [(_Step(_leading(fn, False), list(projection.inputs), [projected], node.label,
                   fn, [True, False, False], f"{node.label}: its input projection "
                   "(CellProjection)"), [projected])]


def _kept_part(node: Node, plan):
    """What of `node` stays in the body: nothing, or a split cell's recurrence."""
    if _domain(node) == "openvino" and node.op_type in _CELLS:
        projected = plan[0][1][0]
        w_at, b_at = _CELL_WEIGHTS[node.op_type]
        rest = [name for k, name in enumerate(node.inputs[1:], 1) if k not in (w_at, b_at)]
        inputs = [projected] + rest
        if node.op_type == "GRUCell":
            inputs.append(node.inputs[b_at])  # the recurrent bias of linear_before_reset
        return [Node(_CELLS[node.op_type], inputs, list(node.outputs), dict(node.attrs),
                     LOOP_DOMAIN, node.name, version=1)]
    return []

