"""Hypothesis strategies that turn the seed corpus into fuzz cases.

`model_cases` mutates a seed model and keeps its feeds; `feed_cases` keeps the model and mutates
its feeds. A case is a plain dict (picklable, for the worker): ``kind`` ("onnx" or "ir"),
``seed``, ``classes`` (the mutation classes applied), ``notes`` (what each did), the model
(``model`` bytes, or ``xml`` and ``bin`` bytes), ``feeds`` (a feed spec, see `worker`) and
``options`` (load options, number of runs).

Mutation classes (one to three per case; a byte-level one always last):

- ONNX, on the ModelProto: ``onnx.attribute`` (values, types, removal, unknown ones, subgraph
  attributes swapped or emptied), ``onnx.dtype`` (element types, tensor/sequence/optional
  kinds), ``onnx.shape`` (dims, ranks, symbols), ``onnx.wiring`` (node inputs and outputs,
  graph and subgraph inputs and outputs), ``onnx.initializer`` (data_type against the data,
  dims, raw/typed/external data, names), ``onnx.node`` (op types, domains, deleted, duplicated
  and reordered nodes), ``onnx.opset`` (opset and IR versions, imports); ``onnx.bytes`` on the
  serialized proto (bit flips, truncation, insertion, deletion, duplication).
- IR, on the XML document: ``ir.attribute`` (layer <data> values), ``ir.dtype`` (element types,
  port precisions), ``ir.shape`` (Parameter/Const shapes, port dims), ``ir.wiring`` (edges, port
  ids), ``ir.port_map`` (TensorIterator/Loop/If port map entries), ``ir.back_edge``,
  ``ir.layer`` (types, versions, ids, deleted/duplicated/moved layers and sections),
  ``ir.weights`` (Const offset/size against the .bin, and the .bin's bytes); ``ir.bytes`` on the
  XML text.
- Feeds: ``feeds.type`` (None, strings, numbers, lists, dicts, numpy scalars of other kinds),
  ``feeds.dtype``, ``feeds.shape``, ``feeds.layout`` (non-contiguous, Fortran, negative strides,
  broadcast and overlapping views, read-only, unaligned, masked, matrix, subclass, byte-swapped),
  ``feeds.values`` (NaN, inf, extremes, huge and negative trip counts), ``feeds.keys`` (missing,
  extra and odd keys; feeds that are not a dict).
"""

from __future__ import annotations

import copy
import math
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import onnx
from hypothesis import strategies as st

from .worker import LAYOUTS

# -- shared pools of odd values ------------------------------------------------------------------

INTS = [0, 1, -1, 2, 3, -2, 5, 7, 64, 10**5, 2**31 - 1, -2**31, 2**62, 2**63 - 1, -2**63]
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-45, 1e38, math.nan, math.inf, -math.inf]
STRINGS = [b"", b"x", b"\xff\xfe\x00", b"NOTSET", b"SAME_UPPER", b"VALID", b"nearest", b"linear",
           b"half_pixel", b"Tanh", b"Sigmoid", b"Relu", b"forward", b"reverse", b"bidirectional",
           b"constant", b"reflect", b"a" * 300]
DIMS = [0, 1, 2, 3, 4, 5, 7, 16, -1, -2**63, 2**40, 2**63 - 1]
ELEM_TYPES = list(range(29)) + [40, -1]
ATTR_NAMES = ["axis", "axes", "to", "keepdims", "num_scan_inputs", "scan_input_axes",
              "scan_output_axes", "scan_input_directions", "scan_output_directions",
              "directions", "body", "then_branch", "else_branch", "value", "perm", "split",
              "direction", "hidden_size", "dtype", "new_axis", "seed", "mode", "value_float",
              "value_ints", "activations", "noop_with_empty_axes", "saturate"]
ONNX_OPS = ["Loop", "Scan", "If", "SequenceMap", "Identity", "Add", "Mul", "Div", "Gather",
            "Concat", "Reshape", "Squeeze", "Unsqueeze", "Split", "Cast", "CastLike", "Less",
            "Not", "MatMul", "Tanh", "SequenceInsert", "SequenceEmpty", "SequenceAt",
            "ConcatFromSequence", "SplitToSequence", "Constant", "Range", "ConstantOfShape",
            "Expand", "Tile", "NonZero", "Where", "LSTM", "GRU", "Resize", "Pad", "CumSum",
            "Einsum", "TopK", "OneHot", "Optional", "OptionalGetElement", "Mish", "HardSwish",
            "GroupNormalization", "Dropout", "Softmax", "ReduceSum", "Transpose", "Slice",
            "ScatterND", "NoSuchOp", ""]
DOMAINS = ["", "ai.onnx", "ai.onnx.ml", "com.microsoft", "ai.onnx.preview.training", "cyloop",
           "x.y"]
OPSETS = [0, 1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 99,
          -1, 2**40]

IR_VALUES = ["0", "1", "-1", "2", "-2", "3", "7", "64", "100000", "2147483648",
             "9223372036854775807", "-9223372036854775808", "99999999999999999999", "1.5",
             "-0.5", "nan", "inf", "-inf", "1e309", "", "abc", " 1", "0x10", "1,2", "-1,-1",
             "0,0,0", "true", "false", "True", "f32", "i64", "u8", "boolean", "bf16", "u1",
             "i4", "dynamic", "numpy", "none", "explicit", "same_upper", "valid",
             "sigmoid,tanh,tanh", "relu", "floor", "ceil", "\u00e9", "1..5", "?", "[2,3]"]
IR_ATTRS = ["axis", "axes", "special_zero", "keep_dims", "auto_broadcast", "destination_type",
            "output_type", "hidden_size", "activations", "clip", "mode", "pads_begin",
            "pads_end", "strides", "kernel", "dilations", "shape", "element_type", "offset",
            "size", "m_pythondiv", "batch_dims", "linear_before_reset", "direction"]
IR_TYPES = ["f32", "f16", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "boolean",
            "bf16", "f8e4m3", "f8e5m2", "u1", "i4", "u4", "f4e2m1", "nf4", "string", "dynamic",
            "undefined", "", "XYZ"]
IR_PRECISIONS = ["FP32", "FP16", "FP64", "I64", "I32", "I8", "U8", "BOOL", "BF16", "U1", "XYZ",
                 "", "fp32"]
IR_SHAPES = ["", "?", "-1", "1..10", "0", "1", "2,3", "5,2,3", "1,2,3", "3,0", "99999999999",
             "-5", "a,b", "2,,3", "[]", "[2,3]", "1,1,1,1,1,1,1,1", "1000000,1000000"]
IR_DIMS = ["0", "1", "2", "3", "-1", "?", "99999999999", "", "x", "1..3"]
IR_LAYER_TYPES = ["Parameter", "Result", "Const", "TensorIterator", "Loop", "If", "Add",
                  "Multiply", "Concat", "Unsqueeze", "Squeeze", "Convert", "Less", "LSTMCell",
                  "GRUCell", "RNNCell", "Gather", "Reshape", "ShapeOf", "Range", "Broadcast",
                  "NoSuchLayer", ""]
IR_VERSIONS = ["opset1", "opset3", "opset5", "opset8", "opset13", "opset99", "", "abc",
               "opset-1", "opset"]


# -- byte-level mutation (either format) ---------------------------------------------------------

def mutate_bytes(draw, data: bytes, what: str) -> tuple[bytes, str]:
    """`data` with one byte-level change: bit flips, truncation, insertion, deletion,
    duplication, or a run overwritten with 0x00 or 0xff."""
    if not data:
        return draw(st.binary(min_size=1, max_size=8)), f"{what}: empty -> random bytes"
    action = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "duplicate",
                                   "overwrite"]))
    pos = draw(st.integers(0, len(data) - 1))
    if action == "flip":
        out = bytearray(data)
        flips = draw(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 7)),
                              min_size=1, max_size=8))
        for at, bit in flips:
            out[at] ^= 1 << bit
        return bytes(out), f"{what}: flip bits {flips}"
    if action == "truncate":
        return data[:pos], f"{what}: truncate to {pos} of {len(data)} bytes"
    if action == "insert":
        extra = draw(st.binary(min_size=1, max_size=16))
        return data[:pos] + extra + data[pos:], f"{what}: insert {extra!r} at {pos}"
    size = draw(st.integers(1, 64))
    if action == "delete":
        return data[:pos] + data[pos + size:], f"{what}: delete {size} bytes at {pos}"
    if action == "duplicate":
        return data[:pos] + data[pos:pos + size] + data[pos:], \
            f"{what}: duplicate {size} bytes at {pos}"
    fill = draw(st.sampled_from([b"\x00", b"\xff"]))
    run = fill * min(size, len(data) - pos)
    return data[:pos] + run + data[pos + len(run):], f"{what}: overwrite {len(run)} at {pos}"


class _NothingToMutate(Exception):
    """The part a mutation picks from is empty (an earlier mutation removed it)."""


def _pick(draw, items):
    if not items:
        raise _NothingToMutate
    return items[draw(st.integers(0, len(items) - 1))]


def _apply(draw, mutation, target) -> str:
    try:
        return mutation(draw, target)
    except _NothingToMutate:
        return f"{mutation.__name__}: nothing to mutate"


# -- ONNX ------------------------------------------------------------------------------------------

def _graphs(graph, path="graph"):
    """(path, graph) for `graph` and every subgraph in it."""
    found = [(path, graph)]
    for node in graph.node:
        for attr in node.attribute:
            where = f"{path}/{node.op_type}:{node.name or (node.output[0] if node.output else '')}"
            if attr.type == onnx.AttributeProto.GRAPH:
                found += _graphs(attr.g, f"{where}.{attr.name}")
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for k, sub in enumerate(attr.graphs):
                    found += _graphs(sub, f"{where}.{attr.name}[{k}]")
    return found


def _nodes(model):
    return [(path, graph, node) for path, graph in _graphs(model.graph) for node in graph.node]


def _node_label(path, node):
    return f"{path}/{node.op_type}:{node.name or (node.output[0] if node.output else '')}"


def _names(model) -> list[str]:
    names = set()
    for _, graph in _graphs(model.graph):
        names.update(v.name for v in list(graph.input) + list(graph.output))
        names.update(t.name for t in graph.initializer)
        for node in graph.node:
            names.update(node.input)
            names.update(node.output)
    return sorted(names) + ["", "missing_value"]


def _random_tensor(draw, name=""):
    kind = draw(st.sampled_from(["float32", "int64", "int32", "bool", "float16", "uint8",
                                 "float64", "int8"]))
    shape = draw(st.lists(st.sampled_from([0, 1, 2, 3]), max_size=3))
    values = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) - 1
    return onnx.numpy_helper.from_array(values.astype(kind), name)


def _set_attribute(draw, model, attr, keep_type: bool) -> str:
    kinds = onnx.AttributeProto
    kind = attr.type if keep_type and attr.type else draw(st.sampled_from(
        [kinds.INT, kinds.INTS, kinds.FLOAT, kinds.FLOATS, kinds.STRING, kinds.STRINGS,
         kinds.GRAPH, kinds.GRAPHS, kinds.TENSOR]))
    for name in ("f", "i", "s", "t", "g", "sparse_tensor", "tp"):
        attr.ClearField(name)
    for name in ("floats", "ints", "strings", "tensors", "graphs"):
        attr.ClearField(name)
    attr.type = kind
    if kind == kinds.INT:
        attr.i = draw(st.sampled_from(INTS))
        return f"int {attr.i}"
    if kind == kinds.INTS:
        attr.ints.extend(draw(st.lists(st.sampled_from(INTS), max_size=5)))
        return f"ints {list(attr.ints)}"
    if kind == kinds.FLOAT:
        attr.f = draw(st.sampled_from(FLOATS))
        return f"float {attr.f}"
    if kind == kinds.FLOATS:
        attr.floats.extend(draw(st.lists(st.sampled_from(FLOATS), max_size=5)))
        return f"floats {list(attr.floats)}"
    if kind == kinds.STRING:
        attr.s = draw(st.sampled_from(STRINGS))
        return f"string {attr.s[:20]!r}"
    if kind == kinds.STRINGS:
        attr.strings.extend(draw(st.lists(st.sampled_from(STRINGS), max_size=4)))
        return f"{len(attr.strings)} strings"
    if kind in (kinds.GRAPH, kinds.GRAPHS):
        graphs = _graphs(model.graph)
        choices = [onnx.GraphProto()] + [g for _, g in graphs]
        picked = onnx.GraphProto.FromString(_pick(draw, choices).SerializeToString())
        if kind == kinds.GRAPH:
            attr.g.CopyFrom(picked)
        else:
            attr.graphs.append(picked)
        return f"graph {picked.name!r} ({len(picked.node)} nodes)"
    attr.t.CopyFrom(_random_tensor(draw))
    return f"tensor {onnx.TensorProto.DataType.Name(attr.t.data_type)}{list(attr.t.dims)}"


def onnx_attribute(draw, model) -> str:
    path, _, node = _pick(draw, _nodes(model))
    label = _node_label(path, node)
    actions = ["set", "set", "retype", "delete", "add"] if node.attribute else ["add"]
    action = draw(st.sampled_from(actions))
    if action == "add":
        attr = node.attribute.add()
        attr.name = draw(st.sampled_from(ATTR_NAMES))
        return f"{label}: add attribute {attr.name} = {_set_attribute(draw, model, attr, False)}"
    index = draw(st.integers(0, len(node.attribute) - 1))
    attr = node.attribute[index]
    if action == "delete":
        name = attr.name
        del node.attribute[index]
        return f"{label}: delete attribute {name}"
    if action == "retype":
        old = attr.type
        attr.type = draw(st.sampled_from([t for t in onnx.AttributeProto.AttributeType.values()
                                          if t != old]))
        return f"{label}: attribute {attr.name} type {old} -> {attr.type} (value kept)"
    keep = draw(st.booleans())
    return f"{label}: attribute {attr.name} = {_set_attribute(draw, model, attr, keep)}"


def _value_infos(model):
    found = []
    for path, graph in _graphs(model.graph):
        for field in ("input", "output", "value_info"):
            found += [(f"{path} {field} {v.name!r}", v) for v in getattr(graph, field)]
    return found


def _tensor_type(type_proto):
    """The tensor type inside `type_proto` (through sequences and optionals), or None."""
    for _ in range(4):
        which = type_proto.WhichOneof("value")
        if which == "tensor_type":
            return type_proto.tensor_type
        if which == "sequence_type":
            type_proto = type_proto.sequence_type.elem_type
        elif which == "optional_type":
            type_proto = type_proto.optional_type.elem_type
        else:
            return None
    return None


def onnx_dtype(draw, model) -> str:
    values = _value_infos(model)
    if not values:
        return "no value infos"
    label, info = _pick(draw, values)
    tensor = _tensor_type(info.type)
    action = draw(st.sampled_from(["elem_type", "elem_type", "kind"])) if tensor is not None \
        else "kind"
    if action == "elem_type":
        tensor.elem_type = draw(st.sampled_from(ELEM_TYPES))
        return f"{label}: elem_type {tensor.elem_type}"
    kind = draw(st.sampled_from(["sequence", "optional", "none", "map", "sparse"]))
    old = onnx.TypeProto()
    old.CopyFrom(info.type)
    info.ClearField("type")
    if kind == "sequence":
        info.type.sequence_type.elem_type.CopyFrom(old)
    elif kind == "optional":
        info.type.optional_type.elem_type.CopyFrom(old)
    elif kind == "map":
        info.type.map_type.key_type = onnx.TensorProto.INT64
        info.type.map_type.value_type.CopyFrom(old)
    elif kind == "sparse":
        info.type.sparse_tensor_type.elem_type = onnx.TensorProto.FLOAT
    return f"{label}: type becomes {kind}"


def onnx_shape(draw, model) -> str:
    values = [(label, _tensor_type(v.type)) for label, v in _value_infos(model)]
    values = [(label, t) for label, t in values if t is not None]
    if not values:
        return "no tensor types"
    label, tensor = _pick(draw, values)
    dims = tensor.shape.dim
    action = draw(st.sampled_from(["clear", "scalar", "add", "remove", "value", "param",
                                   "unknown"]))
    if action in ("remove", "value", "param", "unknown") and not len(dims):
        action = "add"
    if action == "clear":
        tensor.ClearField("shape")
        return f"{label}: no shape"
    if action == "scalar":
        tensor.shape.ClearField("dim")
        return f"{label}: rank 0"
    if action == "add":
        dim = tensor.shape.dim.add()
        dim.dim_value = draw(st.sampled_from(DIMS))
        return f"{label}: add dim {dim.dim_value}"
    index = draw(st.integers(0, len(dims) - 1))
    if action == "remove":
        del tensor.shape.dim[index]
        return f"{label}: remove dim {index}"
    if action == "value":
        dims[index].dim_value = draw(st.sampled_from(DIMS))
        return f"{label}: dim {index} = {dims[index].dim_value}"
    if action == "param":
        dims[index].dim_param = draw(st.sampled_from(["N", "T", "B", "", "x y", "0"]))
        return f"{label}: dim {index} = {dims[index].dim_param!r}"
    dims[index].Clear()
    return f"{label}: dim {index} unknown"


def onnx_wiring(draw, model) -> str:
    names = _names(model)
    if draw(st.integers(0, 3)) == 0:  # a graph's (or subgraph's) inputs or outputs
        path, graph = _pick(draw, _graphs(model.graph))
        field = draw(st.sampled_from(["input", "output"]))
        items = getattr(graph, field)
        action = draw(st.sampled_from(["drop", "duplicate", "reverse", "rename"]))
        if not len(items):
            return f"{path}: no {field}s"
        index = draw(st.integers(0, len(items) - 1))
        if action == "drop":
            del items[index]
        elif action == "duplicate":
            items.add().CopyFrom(items[index])
        elif action == "reverse":
            copies = [copy.deepcopy(v) for v in items][::-1]
            del items[:]
            items.extend(copies)
        else:
            items[index].name = _pick(draw, names)
        return f"{path}: {action} {field} {index}"
    path, _, node = _pick(draw, _nodes(model))
    label = _node_label(path, node)
    action = draw(st.sampled_from(["input", "input", "output", "swap", "drop_input",
                                   "add_input", "drop_output", "add_output"]))
    if action in ("input", "swap", "drop_input") and not node.input:
        action = "add_input"
    if action in ("output", "drop_output") and not node.output:
        action = "add_output"
    if action == "input":
        index = draw(st.integers(0, len(node.input) - 1))
        node.input[index] = _pick(draw, names)
        return f"{label}: input {index} <- {node.input[index]!r}"
    if action == "output":
        index = draw(st.integers(0, len(node.output) - 1))
        node.output[index] = _pick(draw, names)
        return f"{label}: output {index} -> {node.output[index]!r}"
    if action == "swap":
        reordered = list(node.input)[::-1]
        del node.input[:]
        node.input.extend(reordered)
        return f"{label}: inputs reversed"
    if action == "drop_input":
        index = draw(st.integers(0, len(node.input) - 1))
        del node.input[index]
        return f"{label}: drop input {index}"
    if action == "drop_output":
        index = draw(st.integers(0, len(node.output) - 1))
        del node.output[index]
        return f"{label}: drop output {index}"
    if action == "add_input":
        node.input.append(_pick(draw, names))
        return f"{label}: add input {node.input[-1]!r}"
    node.output.append(_pick(draw, names + ["fresh_output"]))
    return f"{label}: add output {node.output[-1]!r}"


def _tensors(model):
    """(label, TensorProto, graph or None) for initializers and tensor attributes."""
    found = []
    for path, graph in _graphs(model.graph):
        found += [(f"{path} initializer {t.name!r}", t, graph) for t in graph.initializer]
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    found.append((f"{_node_label(path, node)}.{attr.name}", attr.t, None))
    return found


def onnx_initializer(draw, model) -> str:
    tensors = _tensors(model)
    action = draw(st.sampled_from(["data_type", "data_type", "dims", "raw_truncate",
                                   "raw_extend", "to_field", "external", "segment", "rename",
                                   "add"]))
    if action == "add" or not tensors:
        path, graph = _pick(draw, _graphs(model.graph))
        tensor = graph.initializer.add()
        tensor.CopyFrom(_random_tensor(draw, _pick(draw, _names(model))))
        return f"{path}: add initializer {tensor.name!r} {list(tensor.dims)}"
    label, tensor, graph = _pick(draw, tensors)
    if action == "data_type":
        tensor.data_type = draw(st.sampled_from(ELEM_TYPES))
        return f"{label}: data_type {tensor.data_type}"
    if action == "dims":
        dims = list(tensor.dims)
        change = draw(st.sampled_from(["add", "remove", "set"]))
        if change == "add" or not dims:
            dims.insert(draw(st.integers(0, len(dims))), draw(st.sampled_from(DIMS)))
        elif change == "remove":
            dims.pop(draw(st.integers(0, len(dims) - 1)))
        else:
            dims[draw(st.integers(0, len(dims) - 1))] = draw(st.sampled_from(DIMS))
        tensor.ClearField("dims")
        tensor.dims.extend(dims)
        return f"{label}: dims {dims}"
    if action == "raw_truncate":
        size = len(tensor.raw_data)
        tensor.raw_data = tensor.raw_data[:draw(st.integers(0, max(0, size - 1)))]
        return f"{label}: raw_data {size} -> {len(tensor.raw_data)} bytes"
    if action == "raw_extend":
        tensor.raw_data = tensor.raw_data + bytes(draw(st.integers(1, 9)))
        return f"{label}: raw_data extended to {len(tensor.raw_data)} bytes"
    if action == "to_field":
        field = draw(st.sampled_from(["float_data", "int32_data", "int64_data", "double_data",
                                      "uint64_data", "string_data"]))
        count = draw(st.integers(0, 7))
        tensor.ClearField("raw_data")
        values = [b"s"] * count if field == "string_data" else list(range(count))
        getattr(tensor, field).extend(values)
        return f"{label}: data as {count} {field} entries"
    if action == "external":
        tensor.data_location = onnx.TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key = "location"
        entry.value = draw(st.sampled_from(["", "missing.bin", "/etc/hostname", "../x.bin",
                                            "model.onnx"]))
        for key in draw(st.lists(st.sampled_from(["offset", "length", "checksum"]),
                                 max_size=2)):
            extra = tensor.external_data.add()
            extra.key = key
            extra.value = draw(st.sampled_from(["0", "4", "-1", "x", "99999999999"]))
        return f"{label}: external data at {entry.value!r}"
    if action == "segment":
        tensor.segment.begin = draw(st.sampled_from([0, 1, -1]))
        tensor.segment.end = draw(st.sampled_from([0, 1, 5, -1]))
        return f"{label}: segment {tensor.segment.begin}..{tensor.segment.end}"
    tensor.name = _pick(draw, _names(model))
    return f"{label}: renamed {tensor.name!r}"


def onnx_node(draw, model) -> str:
    path, graph, node = _pick(draw, _nodes(model))
    label = _node_label(path, node)
    index = list(graph.node).index(node)
    action = draw(st.sampled_from(["op_type", "op_type", "domain", "delete", "duplicate",
                                   "move"]))
    if action == "op_type":
        node.op_type = draw(st.sampled_from(ONNX_OPS))
        return f"{label}: op_type -> {node.op_type!r}"
    if action == "domain":
        node.domain = draw(st.sampled_from(DOMAINS))
        return f"{label}: domain -> {node.domain!r}"
    nodes = [copy.deepcopy(n) for n in graph.node]
    if action == "delete":
        nodes.pop(index)
    elif action == "duplicate":
        nodes.insert(draw(st.integers(0, len(nodes))), copy.deepcopy(nodes[index]))
    else:
        moved = nodes.pop(index)
        nodes.insert(draw(st.integers(0, len(nodes))), moved)
    del graph.node[:]
    graph.node.extend(nodes)
    return f"{label}: {action}"


def onnx_opset(draw, model) -> str:
    action = draw(st.sampled_from(["version", "version", "domain", "clear", "ir_version"]))
    if action == "version":
        if not model.opset_import:
            model.opset_import.add().domain = ""
        entry = _pick(draw, list(model.opset_import))
        entry.version = draw(st.sampled_from(OPSETS))
        return f"opset {entry.domain!r} -> {entry.version}"
    if action == "domain":
        entry = model.opset_import.add()
        entry.domain = draw(st.sampled_from(DOMAINS))
        entry.version = draw(st.sampled_from(OPSETS))
        return f"import {entry.domain!r} {entry.version}"
    if action == "clear":
        model.ClearField("opset_import")
        return "no opset imports"
    model.ir_version = draw(st.sampled_from([0, 1, 3, 4, 7, 8, 9, 10, 11, 12, 99, -1]))
    return f"ir_version {model.ir_version}"


ONNX_CLASSES = {"onnx.attribute": onnx_attribute, "onnx.dtype": onnx_dtype,
                "onnx.shape": onnx_shape, "onnx.wiring": onnx_wiring,
                "onnx.initializer": onnx_initializer, "onnx.node": onnx_node,
                "onnx.opset": onnx_opset, "onnx.bytes": None}


# -- OpenVINO IR -----------------------------------------------------------------------------------

class _IRDoc:
    """An IR being mutated: its XML tree and its weights."""

    def __init__(self, xml: bytes, weights):
        self.root = ET.fromstring(xml)
        self.bin = weights

    def parents(self):
        return {child: parent for parent in self.root.iter() for child in parent}

    def layers(self):
        return list(self.root.iter("layer"))

    def ids(self):
        return sorted({layer.get("id", "") for layer in self.layers()}) + ["999", "-1", "", "x"]


def _layer_label(layer):
    return f"layer {layer.get('id')} ({layer.get('type')} {layer.get('name')!r})"


def ir_attribute(draw, doc) -> str:
    layer = _pick(draw, doc.layers())
    data = layer.find("data")
    if data is None:
        data = ET.SubElement(layer, "data")
    keys = sorted(data.attrib)
    action = draw(st.sampled_from(["set", "set", "delete", "add"])) if keys else "add"
    if action == "add":
        key = draw(st.sampled_from(IR_ATTRS))
        data.set(key, draw(st.sampled_from(IR_VALUES)))
        return f"{_layer_label(layer)}: add {key}={data.get(key)!r}"
    key = _pick(draw, keys)
    if action == "delete":
        del data.attrib[key]
        return f"{_layer_label(layer)}: delete {key}"
    data.set(key, draw(st.sampled_from(IR_VALUES)))
    return f"{_layer_label(layer)}: {key}={data.get(key)!r}"


def ir_dtype(draw, doc) -> str:
    typed = [(f"{_layer_label(layer)} {key}", layer.find("data"), key)
             for layer in doc.layers() if layer.find("data") is not None
             for key in ("element_type", "destination_type", "output_type",
                         "index_element_type") if key in layer.find("data").attrib]
    ports = [port for port in doc.root.iter("port") if port.get("precision") is not None]
    if ports and (not typed or draw(st.booleans())):
        port = _pick(draw, ports)
        port.set("precision", draw(st.sampled_from(IR_PRECISIONS)))
        return f"port {port.get('id')}: precision {port.get('precision')!r}"
    if not typed:
        return "nothing typed"
    label, data, key = _pick(draw, typed)
    data.set(key, draw(st.sampled_from(IR_TYPES)))
    return f"{label} = {data.get(key)!r}"


def ir_shape(draw, doc) -> str:
    shaped = [layer for layer in doc.layers() if layer.find("data") is not None
              and "shape" in layer.find("data").attrib]
    ports = list(doc.root.iter("port"))
    if shaped and (not ports or draw(st.booleans())):
        layer = _pick(draw, shaped)
        layer.find("data").set("shape", draw(st.sampled_from(IR_SHAPES)))
        return f"{_layer_label(layer)}: shape {layer.find('data').get('shape')!r}"
    if not ports:
        return "no ports"
    port = _pick(draw, ports)
    dims = port.findall("dim")
    action = draw(st.sampled_from(["set", "add", "remove"])) if dims else "add"
    if action == "add":
        ET.SubElement(port, "dim").text = draw(st.sampled_from(IR_DIMS))
        return f"port {port.get('id')}: add dim"
    dim = _pick(draw, dims)
    if action == "remove":
        port.remove(dim)
        return f"port {port.get('id')}: remove a dim"
    dim.text = draw(st.sampled_from(IR_DIMS))
    return f"port {port.get('id')}: dim {dim.text!r}"


_EDGE_KEYS = ("from-layer", "from-port", "to-layer", "to-port")


def ir_wiring(draw, doc) -> str:
    parents = doc.parents()
    edges = [edge for edge in doc.root.iter("edge") if parents[edge].tag == "edges"]
    action = draw(st.sampled_from(["end", "end", "delete", "duplicate", "reverse", "add",
                                   "port_id"]))
    if action == "port_id":
        port = _pick(draw, list(doc.root.iter("port")))
        port.set("id", draw(st.sampled_from(["0", "1", "2", "3", "5", "-1", "", "x"])))
        return f"a port id -> {port.get('id')!r}"
    if not edges or action == "add":
        holders = [e for e in doc.root.iter("edges")]
        if not holders:
            return "no edges"
        edge = ET.SubElement(_pick(draw, holders), "edge")
        for key in _EDGE_KEYS:
            edge.set(key, draw(st.sampled_from(doc.ids() + ["0", "1", "2", "3"])))
        return f"add edge {dict(edge.attrib)}"
    edge = _pick(draw, edges)
    if action == "end":
        key = draw(st.sampled_from(_EDGE_KEYS))
        edge.set(key, draw(st.sampled_from(doc.ids() + ["0", "1", "2", "3", "7"])))
        return f"edge {key} -> {edge.get(key)!r}"
    if action == "delete":
        parents[edge].remove(edge)
        return f"delete edge {dict(edge.attrib)}"
    if action == "duplicate":
        parents[edge].append(copy.deepcopy(edge))
        return f"duplicate edge {dict(edge.attrib)}"
    old = dict(edge.attrib)
    edge.set("from-layer", old.get("to-layer", ""))
    edge.set("from-port", old.get("to-port", ""))
    edge.set("to-layer", old.get("from-layer", ""))
    edge.set("to-port", old.get("from-port", ""))
    return f"reverse edge {old}"


_PORT_MAP_KEYS = ("axis", "start", "end", "stride", "part_size", "external_port_id",
                  "internal_layer_id", "purpose", "condition")


def ir_port_map(draw, doc) -> str:
    maps = [m for tag in ("port_map", "then_port_map", "else_port_map")
            for m in doc.root.iter(tag)]
    if not maps:
        return "no port maps"
    port_map = _pick(draw, maps)
    entries = list(port_map)
    action = draw(st.sampled_from(["set", "set", "set", "delete_attr", "delete", "duplicate",
                                   "retag", "clear"])) if entries else "clear"
    if action == "clear":
        port_map.clear()
        return f"{port_map.tag}: emptied"
    entry = _pick(draw, entries)
    if action == "set":
        key = draw(st.sampled_from(_PORT_MAP_KEYS))
        value = draw(st.sampled_from(IR_VALUES[:16] + doc.ids()
                                     + ["current_iteration", "execution_condition"]))
        entry.set(key, value)
        return f"{port_map.tag} {entry.tag}: {key}={value!r}"
    if action == "delete_attr":
        if not entry.attrib:
            return "entry without attributes"
        key = _pick(draw, sorted(entry.attrib))
        del entry.attrib[key]
        return f"{port_map.tag} {entry.tag}: delete {key}"
    if action == "delete":
        port_map.remove(entry)
        return f"{port_map.tag}: delete {entry.tag} {dict(entry.attrib)}"
    if action == "duplicate":
        port_map.append(copy.deepcopy(entry))
        return f"{port_map.tag}: duplicate {entry.tag} {dict(entry.attrib)}"
    entry.tag = "output" if entry.tag == "input" else "input"
    return f"{port_map.tag}: entry becomes <{entry.tag}> {dict(entry.attrib)}"


def ir_back_edge(draw, doc) -> str:
    holders = list(doc.root.iter("back_edges"))
    if not holders:
        return "no back edges"
    holder = _pick(draw, holders)
    edges = list(holder)
    action = draw(st.sampled_from(["end", "end", "delete", "duplicate", "add", "clear"])) \
        if edges else "add"
    if action == "clear":
        holder.clear()
        return "back edges removed"
    if action == "add":
        edge = ET.SubElement(holder, "edge")
        for key in _EDGE_KEYS:
            edge.set(key, draw(st.sampled_from(doc.ids() + ["0", "1"])))
        return f"add back edge {dict(edge.attrib)}"
    edge = _pick(draw, edges)
    if action == "end":
        key = draw(st.sampled_from(_EDGE_KEYS))
        edge.set(key, draw(st.sampled_from(doc.ids() + ["0", "1", "2"])))
        return f"back edge {key} -> {edge.get(key)!r}"
    if action == "delete":
        holder.remove(edge)
        return f"delete back edge {dict(edge.attrib)}"
    holder.append(copy.deepcopy(edge))
    return f"duplicate back edge {dict(edge.attrib)}"


def ir_layer(draw, doc) -> str:
    parents = doc.parents()
    layer = _pick(draw, doc.layers())
    label = _layer_label(layer)
    action = draw(st.sampled_from(["type", "type", "version", "id", "name", "delete",
                                   "duplicate", "move", "section", "port", "add_port"]))
    if action in ("type", "version", "id", "name"):
        pool = {"type": IR_LAYER_TYPES, "version": IR_VERSIONS, "id": doc.ids(),
                "name": ["", "X", "x", "H0", "ti", "y", "a/b", "\u00e9"]}[action]
        layer.set(action, draw(st.sampled_from(pool)))
        return f"{label}: {action} -> {layer.get(action)!r}"
    holder = parents[layer]
    if action == "delete":
        holder.remove(layer)
        return f"{label}: deleted"
    if action == "duplicate":
        holder.insert(draw(st.integers(0, len(holder))), copy.deepcopy(layer))
        return f"{label}: duplicated"
    if action == "move":
        holder.remove(layer)
        holder.insert(draw(st.integers(0, len(holder))), layer)
        return f"{label}: moved"
    if action == "add_port":  # one more input, wired to another layer's first output
        inputs = layer.find("input")
        if inputs is None:
            inputs = ET.SubElement(layer, "input")
        port_id = draw(st.sampled_from(["0", "1", "2", "3", "9"]))
        port = ET.SubElement(inputs, "port", id=port_id, precision="FP32")
        source = _pick(draw, [other for other in holder if other.find("output") is not None
                              and len(other.find("output"))])
        edges = next((e for e in parents[holder] if e.tag == "edges"), None)
        if edges is not None:
            ET.SubElement(edges, "edge", {"from-layer": source.get("id", ""),
                                          "from-port": source.find("output")[0].get("id", ""),
                                          "to-layer": layer.get("id", ""), "to-port": port_id})
        return f"{label}: input port {port_id} from {_layer_label(source)}"
    sections = list(layer)
    if action == "section" and sections:
        section = _pick(draw, sections)
        layer.remove(section)
        return f"{label}: <{section.tag}> removed"
    ports = [(section, port) for section in layer if section.tag in ("input", "output")
             for port in section]
    if not ports:
        return f"{label}: nothing to remove"
    section, port = _pick(draw, ports)
    section.remove(port)
    return f"{label}: {section.tag} port {port.get('id')} removed"


def ir_weights(draw, doc) -> str:
    consts = [layer for layer in doc.layers() if layer.get("type") == "Const"
              and layer.find("data") is not None]
    action = draw(st.sampled_from(["offset", "size", "bytes", "bytes", "missing", "empty"]))
    if action in ("offset", "size") and consts:
        data = _pick(draw, consts).find("data")
        size = len(doc.bin or b"")
        data.set(action, draw(st.sampled_from(["0", "1", "4", "-1", "-4", "999999999999", "",
                                               "x", str(size), str(max(0, size - 1))])))
        return f"Const {action} -> {data.get(action)!r}"
    if action == "missing":
        doc.bin = None
        return "no .bin"
    if action == "empty" or not doc.bin:
        doc.bin = b""
        return "empty .bin"
    doc.bin, note = mutate_bytes(draw, doc.bin, ".bin")
    return note


IR_CLASSES = {"ir.attribute": ir_attribute, "ir.dtype": ir_dtype, "ir.shape": ir_shape,
              "ir.wiring": ir_wiring, "ir.port_map": ir_port_map, "ir.back_edge": ir_back_edge,
              "ir.layer": ir_layer, "ir.weights": ir_weights, "ir.bytes": None}


# -- cases -----------------------------------------------------------------------------------------

def _seed_feeds(seed):
    return ("dict", [(name, ("value", value, [])) for name, value in seed.feeds.items()])


@st.composite
def _options(draw, drivers):
    load = {"hoist": draw(st.sampled_from([True, True, False]))}
    driver = draw(st.sampled_from(drivers))
    if driver is not None:
        load["driver"] = driver
    return {"load": load, "runs": draw(st.sampled_from([1, 1, 1, 2]))}


@st.composite
def model_cases(draw, seeds, drivers=(None,)):
    """A seed model with one to three mutations, run on its own feeds."""
    seed = draw(st.sampled_from(seeds))
    table = ONNX_CLASSES if seed.kind == "onnx" else IR_CLASSES
    count = draw(st.sampled_from([1, 1, 1, 1, 2, 3]))
    picked = [draw(st.sampled_from(sorted(table))) for _ in range(count)]
    picked.sort(key=lambda name: table[name] is None)  # byte-level mutations last
    notes = []
    case = {"kind": seed.kind, "seed": seed.name, "classes": list(dict.fromkeys(picked)),
            "notes": notes, "feeds": _seed_feeds(seed), "options": draw(_options(drivers))}
    if seed.kind == "onnx":
        model = onnx.ModelProto.FromString(seed.model)
        for name in picked:
            if table[name] is not None:
                notes.append(_apply(draw, table[name], model))
        data = model.SerializeToString()
        for name in picked:
            if table[name] is None:
                data, note = mutate_bytes(draw, data, "model bytes")
                notes.append(note)
        case["model"] = data
        return case
    doc = _IRDoc(seed.xml, seed.bin)
    for name in picked:
        if table[name] is not None:
            notes.append(_apply(draw, table[name], doc))
    data = ET.tostring(doc.root)
    for name in picked:
        if table[name] is None:
            data, note = mutate_bytes(draw, data, "xml bytes")
            notes.append(note)
    case.update(xml=data, bin=doc.bin)
    return case


# -- feeds -----------------------------------------------------------------------------------------

ODD_VALUES = [None, "", "abc", b"\x00\x01", 0, 1, -1, 2**63, -2**63 - 1, 2**100, 0.5, math.nan,
              math.inf, True, False, 1j, [], [1, 2, 3], [[1, 2], [3]], [[1.0, 2.0], [3.0, 4.0]],
              ["a", "b"], (1, 2), {"a": 1}, np.float32(1.5), np.int8(-3), np.float16(math.nan),
              np.str_("x"), np.datetime64("2020-01-01"), np.timedelta64(5, "s"), object(),
              np.array("abc"), np.array([b"a"]), np.array(None), np.array([1, "a"], object),
              Ellipsis, slice(0, 1), range(3), np.uint64(2**64 - 1), np.bool_(True)]
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", "complex64", "complex128", "object", "<U3", "S2",
          ">f4", ">i8", "datetime64[s]", "timedelta64[ms]", "V4", "struct", "bfloat16",
          "float8_e4m3fn", "int4"]
ODD_KEYS = ["", "extra", 0, None, b"M", "m", "M ", ("M",), 1.5, "\u00e9"]


def _dtype(name):
    if name == "struct":
        return np.dtype([("a", "<f4"), ("b", "<i2")])
    if name in ("bfloat16", "float8_e4m3fn", "int4"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def _filled(shape, dtype, rng):
    values = rng.standard_normal(shape) * 3
    try:
        if dtype.kind == "b":
            return values > 0
        return values.astype(dtype)
    except (TypeError, ValueError, OverflowError):
        return np.zeros(shape, dtype)


class _Feeds:
    """Feeds being mutated: (key, value spec) entries, or a raw (non-dict) value spec."""

    def __init__(self, seed):
        self.entries = list(_seed_feeds(seed)[1])
        self.raw = None

    def spec(self):
        return ("raw", self.raw) if self.raw is not None else ("dict", self.entries)

    def pick(self, draw):
        """(index, key, the entry's array or None) of one entry."""
        index = draw(st.integers(0, len(self.entries) - 1))
        key, value = self.entries[index]
        array = np.asarray(value[1]) if value[0] == "value" and isinstance(
            value[1], (np.ndarray, np.generic)) else None
        return index, key, array


def feeds_type(draw, feeds, rng) -> str:
    index, key, array = feeds.pick(draw)
    if array is not None and draw(st.integers(0, 3)) == 0:  # a sequence of arrays
        count = draw(st.integers(0, 3))
        container = draw(st.sampled_from(["list", "tuple"]))
        feeds.entries[index] = (key, ("seq", [("value", array.copy(), [])] * count, container))
        return f"{key!r}: a {container} of {count} arrays"
    value = draw(st.sampled_from(ODD_VALUES))
    feeds.entries[index] = (key, ("value", value, []))
    return f"{key!r}: {type(value).__name__} {repr(value)[:40]}"


def feeds_dtype(draw, feeds, rng) -> str:
    index, key, array = feeds.pick(draw)
    if array is None:
        return f"{key!r}: not an array"
    name = draw(st.sampled_from(DTYPES))
    dtype = _dtype(name)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = array.astype(dtype)
    except (TypeError, ValueError, OverflowError):
        value = _filled(array.shape, dtype, rng)
    feeds.entries[index] = (key, ("value", value, []))
    return f"{key!r}: {array.dtype} -> {value.dtype}"


def feeds_shape(draw, feeds, rng) -> str:
    index, key, array = feeds.pick(draw)
    if array is None:
        return f"{key!r}: not an array"
    shape = list(array.shape)
    action = draw(st.sampled_from(["add", "remove", "zero", "bigger", "scalar", "reverse",
                                   "flat"]))
    if action in ("remove", "zero", "bigger") and not shape:
        action = "add"
    if action == "add":
        shape.insert(draw(st.integers(0, len(shape))), draw(st.sampled_from([1, 2, 3])))
    elif action == "remove":
        shape.pop(draw(st.integers(0, len(shape) - 1)))
    elif action == "zero":
        shape[draw(st.integers(0, len(shape) - 1))] = 0
    elif action == "bigger":
        at = draw(st.integers(0, len(shape) - 1))
        shape[at] = draw(st.sampled_from([shape[at] + 1, 2 * shape[at] + 1, 64, 1000]))
    elif action == "scalar":
        shape = []
    elif action == "reverse":
        shape = shape[::-1]
    else:
        shape = [int(np.prod(shape))]
    if int(np.prod(shape)) > 10**6:
        shape = [1]
    value = _filled(tuple(shape), array.dtype, rng)
    feeds.entries[index] = (key, ("value", value, []))
    return f"{key!r}: shape {list(array.shape)} -> {shape}"


def feeds_layout(draw, feeds, rng) -> str:
    index, key, array = feeds.pick(draw)
    if array is None:
        return f"{key!r}: not an array"
    layouts = draw(st.lists(st.sampled_from(LAYOUTS), min_size=1, max_size=2))
    feeds.entries[index] = (key, ("value", array, layouts))
    return f"{key!r}: layout {layouts}"


def _specials(dtype):
    if dtype.kind == "b":
        return [True, False]
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return [0, -1, 1, info.min, info.max, 10**5, 10**5 + 1, 2**31]
    if dtype.kind in "fc":
        return [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-30, 1e30, 65504.0]
    return [0]


def feeds_values(draw, feeds, rng) -> str:
    index, key, array = feeds.pick(draw)
    if array is None:
        return f"{key!r}: not an array"
    special = draw(st.sampled_from(_specials(array.dtype)))
    value = array.copy()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if array.dtype.kind in "iu" and not np.can_cast(np.min_scalar_type(special),
                                                        array.dtype):
            special = np.array(special).astype(array.dtype)
        try:
            if value.size and draw(st.booleans()):
                value.flat[draw(st.integers(0, value.size - 1))] = special
            else:
                value[...] = special
        except (TypeError, ValueError):
            return f"{key!r}: {array.dtype} does not take {special!r}"
    feeds.entries[index] = (key, ("value", value, []))
    return f"{key!r}: values {special!r}"


def feeds_keys(draw, feeds, rng) -> str:
    action = draw(st.sampled_from(["drop", "extra", "rename", "not_dict", "empty"]))
    if action == "empty":
        feeds.entries = []
        return "no feeds"
    if action == "not_dict":
        values = [value for _, value in feeds.entries]
        raw = draw(st.sampled_from(["none", "list", "tuple", "string", "pairs"]))
        feeds.raw = {"none": ("value", None, []), "list": ("seq", values, "list"),
                     "tuple": ("seq", values, "tuple"), "string": ("value", "feeds", []),
                     "pairs": ("value", [key for key, _ in feeds.entries], [])}[raw]
        return f"feeds as {raw}"
    if action == "extra" or not feeds.entries:
        key = draw(st.sampled_from(ODD_KEYS))
        value = feeds.entries[0][1] if feeds.entries else ("value", 1, [])
        feeds.entries.append((key, value))
        return f"extra key {key!r}"
    index = draw(st.integers(0, len(feeds.entries) - 1))
    key, value = feeds.entries[index]
    if action == "drop":
        feeds.entries.pop(index)
        return f"drop {key!r}"
    new = draw(st.sampled_from(ODD_KEYS + [str(key).lower(), str(key).upper()]))
    feeds.entries[index] = (new, value)
    return f"rename {key!r} -> {new!r}"


FEED_CLASSES = {"feeds.type": feeds_type, "feeds.dtype": feeds_dtype,
                "feeds.shape": feeds_shape, "feeds.layout": feeds_layout,
                "feeds.values": feeds_values, "feeds.keys": feeds_keys}


@st.composite
def feed_cases(draw, seeds, drivers=(None,)):
    """A seed model run on its feeds with one to three mutations."""
    seed = draw(st.sampled_from(seeds))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    feeds = _Feeds(seed)
    picked, notes = [], []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        if feeds.raw is not None:
            break
        name = draw(st.sampled_from(sorted(FEED_CLASSES)))
        if not feeds.entries and name != "feeds.keys":
            continue
        picked.append(name)
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                notes.append(FEED_CLASSES[name](draw, feeds, rng))
        except (TypeError, ValueError, OverflowError) as e:  # numpy refused the conversion
            notes.append(f"{name}: not applicable ({type(e).__name__})")
    case = {"kind": seed.kind, "seed": seed.name, "classes": list(dict.fromkeys(picked)),
            "notes": notes, "feeds": feeds.spec(), "options": draw(_options(drivers))}
    if seed.kind == "onnx":
        case["model"] = seed.model
    else:
        case.update(xml=seed.xml, bin=seed.bin)
    return case
