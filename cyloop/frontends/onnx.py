"""ONNX -> cyloop IR. Loop and Scan become cyloop Loop nodes with a `LoopSpec`; If and SequenceMap
keep their subgraphs; every other node maps to a registered kernel; an op cyloop has no kernel for
is replaced by its schema's function body (HardSwish, Mish, GroupNormalization, ...) where it has
one, and runs onnx.reference's kernel otherwise (listed once in a warning at load time).

The model is read by onnx_proto.py, its tensors by onnx_tensor.py, and its nodes are checked
against the schemas in onnx_schemas.py, none of which imports onnx: a model whose ops all have
native kernels loads without it. What onnx does that cyloop does not (function bodies, the
reference kernels, shape inference where a graph output's type is missing) needs the `onnx`
package (the ``[onnx]`` extra), imported when first needed.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import NamedTuple

import numpy as np

from .. import kernels
from ..accel.aligned import SMALL_WEIGHT_BYTES, aligned
from ..errors import ModelError, UnsupportedOpError
from ..ir import (
    LOOP_DOMAIN,
    CarriedInput,
    ConcatOutput,
    Graph,
    LastOutput,
    LoopSpec,
    Node,
    OuterInput,
    SlicedInput,
    Value,
)
from ..kernels.onnx.fallback import FALLBACK_DOMAIN, reference_op_class
from . import onnx_schemas
from .onnx_proto import MESSAGE_LIMIT, AttributeProto, ModelProto, NodeProto, read_model, too_large
from .onnx_tensor import DATA_TYPE_NAMES, ELEMENT_TYPES, to_array

__all__ = ["ELEMENT_TYPES", "Lowered", "lower", "read_graph"]

# Ops the converter maps to loops and control nodes itself (never expanded as functions).
_STRUCTURAL = {"Loop", "Scan", "If", "SequenceMap"}
# Function bodies may use ops defined by function bodies: this deep at most.
_MAX_FUNCTION_DEPTH = 16
_OMITTED = object()  # an omitted optional input (its type is not passed to onnx)

# Attributes of natively run ops that name an element type: the kernels get numpy dtypes.
_TYPE_ATTRIBUTES = {("Cast", "to"), ("SequenceEmpty", "dtype"), ("EyeLike", "dtype"),
                    ("LayerNormalization", "stash_type"), ("QuantizeLinear", "output_dtype"),
                    ("QuantizeLinear", "precision"), ("DequantizeLinear", "output_dtype"),
                    ("MelWeightMatrix", "output_datatype"), ("BitCast", "to"),
                    ("RandomNormal", "dtype"), ("RandomUniform", "dtype"),
                    ("RandomNormalLike", "dtype"), ("RandomUniformLike", "dtype"),
                    ("Multinomial", "dtype")}
# ... of which these read 0 (UNDEFINED) as not given: the kernel then has no such attribute.
_UNSET_BY_ZERO = {("QuantizeLinear", "output_dtype"), ("QuantizeLinear", "precision"),
                  ("DequantizeLinear", "output_dtype")}


def read_graph(source) -> Graph:
    """An ONNX model (a path, its bytes or an ``onnx.ModelProto``) as a cyloop `Graph`."""
    return lower(source).graph


class Lowered(NamedTuple):
    """An ONNX model read (`lower`): its `graph`, the messages of the warnings reading it gave
    (`warned`, each warned already), and whether it read tensors from external data files
    (`external_data`): what the on-disk cache (cyloop/cache.py) keeps and checks besides the
    graph."""

    graph: Graph
    warned: list[str]
    external_data: bool


def lower(source) -> Lowered:
    """`read_graph`, with what reading found besides the graph."""
    warned: list[str] = []
    converter = _Converter({}, _model_proto(source), warned)
    graph = _to_graph(converter)
    return Lowered(graph, warned, converter.external_data)


def _onnx(needed_for: str = "reading this ONNX model"):
    """The onnx package, imported on first need (`needed_for` says what for, if it is missing)."""
    try:
        import onnx
    except ImportError:  # exercised only without the extra
        raise ImportError(f"{needed_for} needs the onnx package: pip install "
                          "'cyloop[onnx]'") from None
    return onnx


def _model_proto(source) -> ModelProto:
    """The `ModelProto` (onnx_proto.py's) in a file, in bytes, or in an ``onnx.ModelProto``
    (read from its serialized bytes: one path for every source)."""
    base_dir = ""  # (bytes and protos: external data relative to the working directory, as in onnx)
    if isinstance(source, (bytes, bytearray, memoryview)):
        where, data = "the ONNX bytes", bytes(source)
    elif hasattr(source, "SerializeToString") and not isinstance(source, (str, os.PathLike)):
        where, data = "the ONNX model", source.SerializeToString()
    else:
        where = os.fspath(source)
        try:
            with open(where, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size > MESSAGE_LIMIT:  # (refused unread)
                    raise too_large(where, size)
                data = f.read()
        except OSError as e:
            raise ModelError(f"{where}: cannot read the ONNX model ({type(e).__name__}: {e})") \
                from e
        base_dir = os.path.dirname(os.path.abspath(where))
    model = read_model(data, where, base_dir)
    if not model.HasField("graph"):  # what an empty file or stray bytes parse as
        raise ModelError(f"{where}: not an ONNX model (it holds no graph)")
    return model


def _to_graph(converter) -> Graph:
    """Lower `converter`'s `ModelProto` to a cyloop `Graph`; the message of each warning it gives
    is added to the converter's `warned`."""
    model = converter.model
    # The graph's own inputs and outputs as the model declares them: shape inference names each
    # dimension it cannot tell "unk__N", a name no user of the model knows.
    declared = {info.name: info.type for info in [*model.graph.input, *model.graph.output]
                if info.type.WhichOneof("value") is not None}
    opsets = {}
    for entry in model.opset_import:
        opsets["" if entry.domain == "ai.onnx" else entry.domain] = entry.version
    opsets.setdefault("", 1)
    opsets[LOOP_DOMAIN] = 1
    opsets[FALLBACK_DOMAIN] = 1
    converter.opsets.update(opsets)
    if not _outputs_typed(model.graph, opsets[""]):
        converter.infer()
        model = converter.model
    graph = converter.graph(model.graph, top=True)
    for values in (graph.inputs, graph.outputs):
        values[:] = [converter._typed(v.name, declared[v.name]) if v.name in declared else v
                     for v in values]
    if converter.fallback:
        listed = ", ".join(sorted(converter.fallback))
        converter.warn(f"cyloop runs these ops with onnx.reference's kernels (no native kernel "
                       f"yet): {listed}")
    return graph


def _complete(type_proto) -> bool:
    """Whether a value's declared type says all a zero-iteration output needs: a tensor's element
    type and rank (a loop's scan output is made from them); a sequence's or an optional's
    element type (such a value is a carried one, which a loop of no iteration hands on as it
    came: the shape of its elements is never read)."""
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        return type_proto.tensor_type.elem_type != 0 and type_proto.tensor_type.HasField("shape")
    if which in ("sequence_type", "optional_type"):
        inner = getattr(type_proto, which).elem_type
        if inner.WhichOneof("value") == "tensor_type":
            return inner.tensor_type.elem_type != 0
        return _complete(inner)
    return which is not None


def _declared(type_proto) -> bool:
    """Whether a value declares its kind (a tensor, or a sequence or optional of what: the element
    type of their tensors), what is read of a loop's carried value (a loop of no iteration hands
    it on as it came) and of a model's output (what it declares replaces what inference would
    say)."""
    which = type_proto.WhichOneof("value")
    return _complete(type_proto) if which in ("sequence_type", "optional_type") else \
        which is not None


def _first_scan_output(node, opset: int) -> int:
    """Where the scan outputs begin among the outputs of a Loop's or a Scan's body (at the model's
    ai.onnx `opset`): those need `_complete` types, the carried values before them `_declared`
    ones. 0 for any other node's graphs."""
    if node.domain not in ("", "ai.onnx"):
        return 0
    if node.op_type == "Loop":  # (M, cond, carried...) -> body (cond, carried..., scans...)
        return max(len(node.input) - 1, 0)
    if node.op_type == "Scan":  # (states..., scanned...); Scan-8 (sequence_lens, states, ...)
        scanned = next((attr.i for attr in node.attribute if attr.name == "num_scan_inputs"), 0)
        return max(len(node.input) - scanned - (1 if opset < 9 else 0), 0)
    return 0


def _outputs_typed(graph, opset: int, scans_from: int | None = None) -> bool:
    """Whether `graph`'s outputs, and those of every graph nested in it, declare what is read of
    them (what exporters write): then no shape inference is needed to read it. The outputs from
    `scans_from` on (None: none, the model's own graph) need `_complete` types, those before it
    `_declared` ones. (`opset`: the model's ai.onnx opset.)"""
    kinds = AttributeProto
    return all(_complete(info.type) if scans_from is not None and k >= scans_from
               else _declared(info.type) for k, info in enumerate(graph.output)) and all(
        _outputs_typed(g, opset, _first_scan_output(node, opset)) for node in graph.node
        for attr in node.attribute if attr.type in (kinds.GRAPH, kinds.GRAPHS)
        for g in ([attr.g] if attr.type == kinds.GRAPH else attr.graphs))


class _Converter:
    """Reads one model's graphs as cyloop's. ONNX shape inference (its cost is a fresh process's
    largest after importing onnx) runs only where what it adds is read: a loop's scan output
    that declares no element type or rank (a loop that runs no iteration makes it from them),
    a carried value or a model output that declares no kind, or a function body that depends on
    input types nobody declared."""

    def __init__(self, opsets, model=None, warned: list[str] | None = None):
        self.opsets = opsets
        self.model = model
        self.warned = [] if warned is None else warned  # (what its warnings said)
        self.external_data = False  # whether a tensor it read keeps its data in a file
        self.inferred = False
        self.fallback: set[str] = set()
        self.types: dict[str, object] = {}

    @property
    def onnx(self):
        return _onnx("this ONNX model (an op without a native kernel)")

    def warn(self, message: str) -> None:
        """Warn of `message` (at the caller of `cyloop.load`), and note it in `warned`."""
        self.warned.append(message)
        warnings.warn(message, stacklevel=6)

    def infer(self) -> None:
        """Run ONNX shape inference on the model (once), and read the types it adds to every
        graph's values."""
        if self.inferred or self.model is None:
            return
        self.inferred = True
        try:
            onnx = _onnx("ONNX shape inference (a graph output's type is missing)")
        except ImportError as e:
            self.warn(f"loading without ONNX shape inference: {e}")
            return
        try:
            inferred = onnx.shape_inference.infer_shapes(
                onnx.ModelProto.FromString(self.model.SerializeToString()))
            self.model = self.model.reread(inferred.SerializeToString())
        except Exception as e:  # noqa: BLE001 - inference only adds types; the model may still run
            self.warn(f"ONNX shape inference failed, loading without it: {e}")
            return
        self._read_types(self.model.graph)

    def _read_types(self, g) -> None:
        for info in [*g.value_info, *g.input, *g.output]:
            self.types.setdefault(info.name, info.type)
        kinds = AttributeProto
        for node in g.node:
            for attr in node.attribute:
                if attr.type == kinds.GRAPH:
                    self._read_types(attr.g)
                elif attr.type == kinds.GRAPHS:
                    for inner in attr.graphs:
                        self._read_types(inner)

    # -- values and attributes -------------------------------------------------------------

    def value(self, info) -> Value:
        return self._typed(info.name, info.type)


    def _typed(self, name, type_proto) -> Value:
        which = type_proto.WhichOneof("value")
        if which == "tensor_type":
            dtype, shape = self._tensor(type_proto.tensor_type)
            return Value(name, dtype, shape)
        if which == "sequence_type":
            inner = self._typed(name, type_proto.sequence_type.elem_type)
            if inner.kind == "map":
                return dataclasses.replace(inner, kind="sequence_map")
            return Value(name, inner.dtype, inner.shape, "sequence")
        if which == "optional_type":
            inner = self._typed(name, type_proto.optional_type.elem_type)
            kind = "optional_sequence" if inner.kind == "sequence" else "optional"
            return Value(name, inner.dtype, inner.shape, kind)
        if which == "map_type":
            return self._map(name, type_proto.map_type)
        return Value(name)

    def _map(self, name, map_type) -> Value:
        """A ``map(K, V)`` type: K an integer type or string, V a tensor type (scalar values)
        or a sequence of tensors; another key or value type is a ModelError naming the value."""
        key = ELEMENT_TYPES.get(map_type.key_type)
        key = None if key is None else np.dtype(key)
        if key is None or not (key.kind in "iu" or key == np.dtype(object)):
            raise ModelError(f"value {name!r}: a map's keys must be of an integer type or "
                             f"string, not element type {map_type.key_type}")
        inner = self._typed(name, map_type.value_type)
        if inner.kind == "tensor" and inner.dtype is not None:
            return Value(name, inner.dtype, inner.shape, "map", key)
        if inner.kind == "sequence" and inner.dtype is not None:
            return Value(name, inner.dtype, inner.shape, "map", key, "sequence")
        raise ModelError(f"value {name!r}: a map's values must be tensors or sequences of "
                         f"tensors of a known element type, not {inner.kind} values")

    @staticmethod
    def _tensor(tensor_type):
        dtype = ELEMENT_TYPES.get(tensor_type.elem_type)
        if not tensor_type.HasField("shape"):
            return dtype, None
        dims = []
        for dim in tensor_type.shape.dim:
            if dim.HasField("dim_value"):
                dims.append(dim.dim_value)
            elif dim.HasField("dim_param"):
                dims.append(dim.dim_param)
            else:
                dims.append(None)
        return dtype, tuple(dims)

    def array(self, tensor, where: str) -> np.ndarray:
        """A TensorProto's value; data that does not match its declared type and shape is a
        ModelError saying what was declared and what the data holds."""
        if tensor.HasField("data_location") and tensor.data_location == 1:  # EXTERNAL
            self.external_data = True
        try:
            value = to_array(tensor)
        except ModelError:  # (its bytes are not a protobuf)
            raise
        except Exception as error:  # noqa: BLE001 - ValueError, TypeError, OSError, ...
            declared = (DATA_TYPE_NAMES[tensor.data_type]
                        if 0 <= tensor.data_type < len(DATA_TYPE_NAMES)
                        else f"unknown element type {tensor.data_type}")
            held = [f"{len(getattr(tensor, field))} {field} entries"
                    for field in ("float_data", "double_data", "int32_data", "int64_data",
                                  "uint64_data", "string_data") if len(getattr(tensor, field))]
            if tensor.raw_data:
                held.append(f"{len(tensor.raw_data)} bytes of raw_data")
            raise ModelError(f"{where}: declared {declared} of shape {tensor.dims.tolist()}, "
                             f"but its data holds {', '.join(held) or 'nothing'} "
                             f"({error})") from None
        if value.size == 0:  # (a view of no bytes still holds all the model's)
            value = np.empty(value.shape, value.dtype)
        # The model's own array (to_array may give a view of the tensor's bytes), read-only, so
        # that compiling keeps it without a copy; aligned, so that a product reads a weight as it
        # is (accel/aligned.py).
        value = aligned(value, SMALL_WEIGHT_BYTES, own=True)
        value.flags.writeable = False
        return value

    def attribute(self, attr):
        kind = AttributeProto
        if attr.type == kind.GRAPH:
            return self.graph(attr.g, top=False)
        if attr.type == kind.GRAPHS:
            return [self.graph(g, top=False) for g in attr.graphs]
        if attr.type == kind.TENSOR:
            return self.array(attr.t, f"tensor attribute {attr.name!r}")
        if attr.type == kind.TENSORS:
            return [self.array(t, f"tensor attribute {attr.name!r}") for t in attr.tensors]
        if attr.ref_attr_name:
            raise ValueError(f"attribute {attr.name!r} refers to attribute "
                             f"{attr.ref_attr_name!r} of a function, outside a function")
        # (as onnx.helper.get_attribute_value reads an attribute: by its type)
        read = _ATTRIBUTE_VALUES.get(attr.type)
        if read is None:
            raise ValueError(f"attribute {attr.name!r} of unknown type {attr.type}")
        return read(attr)

    # -- graphs and nodes -----------------------------------------------------------------------

    def graph(self, g, top: bool) -> Graph:
        for info in list(g.value_info) + list(g.input) + list(g.output):
            if not self.inferred or info.name not in self.types:  # (inference may add a shape)
                self.types[info.name] = info.type
        initializers = {t.name: self.array(t, f"initializer {t.name!r} of graph {g.name!r}")
                        for t in g.initializer}
        # An input that is also an initializer takes that value unless it is fed (Model).
        inputs = [self.value(v) for v in g.input]
        nodes = [node for proto in g.node for node in self.nodes(proto)]
        outputs = [self.value(v) for v in g.output]
        return Graph(nodes, inputs, outputs, initializers, dict(self.opsets), g.name or "graph")

    def nodes(self, proto, depth: int = 0) -> list[Node]:
        """`proto` as cyloop nodes: itself, or, where cyloop has no kernel for its op and its
        schema defines it by a function body, the nodes of that body, expanded in place."""
        body = self._function_body(proto)
        if body is None:
            return [self.node(proto)]
        if depth > _MAX_FUNCTION_DEPTH:
            raise ModelError(f"{proto.op_type} node {proto.name or proto.output[0]!r}: function "
                             f"bodies nest more than {_MAX_FUNCTION_DEPTH} deep")
        return [node for inner in body for node in self.nodes(inner, depth + 1)]

    def _function_body(self, proto):
        """The nodes of `proto`'s schema function at the model's opset, renamed into the graph
        (None: cyloop has a kernel, or the schema has no function body it can instantiate)."""
        domain = "" if proto.domain == "ai.onnx" else proto.domain
        if domain != "" or proto.op_type in _STRUCTURAL:
            return None
        version = self.opsets[""]
        try:
            kernels.lookup(domain, proto.op_type, version)
            return None
        except UnsupportedOpError:
            pass
        defs = _onnx(f"op {proto.op_type!r}, which cyloop has no native kernel for,").defs
        try:
            schema = defs.get_schema(proto.op_type, version, domain)
            if schema.has_function:
                encoded = schema.get_function_with_opset_version(version)
            elif schema.has_context_dependent_function:
                types = [self._type_of(name) for name in proto.input]
                if any(t is None for t in types):
                    return None  # the body depends on input types nobody declared
                encoded = schema.get_context_dependent_function_with_opset_version(
                    version, proto.SerializeToString(),
                    [t.SerializeToString() for t in types if t is not _OMITTED])
            else:
                return None
        except Exception:  # noqa: BLE001 - no schema, or one onnx cannot instantiate here
            return None
        if not encoded:
            return None
        function = self.onnx.FunctionProto()
        function.ParseFromString(encoded)
        for entry in function.opset_import:
            if entry.domain in ("", "ai.onnx") and entry.version > version:
                return None  # written for a newer opset than the model's
        nodes = _instantiate(self.onnx, function, proto, schema)
        # (read back as the model's own nodes are: one path for every node)
        return None if nodes is None else [
            NodeProto.FromString(node.SerializeToString(), f"{proto.op_type}'s function body")
            for node in nodes]

    def _type_of(self, name):
        if not name:
            return _OMITTED
        if name not in self.types:
            self.infer()
        return self.types.get(name)

    def node(self, proto) -> Node:
        domain = "" if proto.domain == "ai.onnx" else proto.domain
        node = Node(proto.op_type, list(proto.input), list(proto.output), {}, domain, proto.name)
        try:
            node.attrs = {a.name: self.attribute(a) for a in proto.attribute}
        except ModelError:
            raise
        except Exception as e:
            raise ModelError(f"{node.label}: cannot read its attributes: {e}") from e
        for op_type, key in _TYPE_ATTRIBUTES:
            if domain == "" and proto.op_type == op_type and key in node.attrs:
                if (op_type, key) in _UNSET_BY_ZERO and node.attrs[key] == 0:
                    del node.attrs[key]
                else:
                    node.attrs[key] = self._element_type(node, key)
        if domain == "" and proto.op_type == "Loop":
            return self.loop(node)
        if domain == "" and proto.op_type == "Scan":
            return self.scan(node)
        if domain == "" and proto.op_type in ("If", "SequenceMap"):
            return node
        version = self.opsets.get(domain, self.opsets[""])
        if domain == "":
            self._check_schema(node, proto, version)
        try:
            kernels.lookup(domain, proto.op_type, version)
            return node
        except UnsupportedOpError:
            if not self._reference_has(domain, proto.op_type, version):
                raise UnsupportedOpError(
                    f"{node.label}: op {proto.op_type!r} in domain {domain or 'ai.onnx'!r} at "
                    f"version {version} has no kernel in cyloop or onnx.reference") from None
        self.fallback.add(proto.op_type if not domain else f"{domain}::{proto.op_type}")
        # (onnx.reference builds its kernel from onnx's own NodeProto)
        onnx_node = self.onnx.NodeProto.FromString(proto.SerializeToString())
        return Node("OnnxReference", node.inputs, node.outputs,
                    {"node": onnx_node, "opsets": dict(self.opsets), "version": version},
                    FALLBACK_DOMAIN, proto.name)

    def _check_schema(self, node, proto, version):
        """The node's input and output counts, and its attributes' types, against its schema at
        `version`; its required attributes present. (An extra input would reach a ufunc kernel
        as its `out` argument and be written to; an attribute of another type would reach a
        kernel, or the hoisting pass, that cannot read it.)"""
        schema = _schema("", node.op_type, version)
        if schema is None:  # no schema: the kernel look-up says what is missing
            return
        names = AttributeProto.TYPE_NAMES
        given = {attr.name: attr for attr in proto.attribute}
        for name, (declared, required) in schema.attributes.items():
            attr = given.get(name)
            if attr is None:
                if required:
                    raise ModelError(f"{node.label}: {node.op_type}-{schema.since_version} "
                                     f"needs attribute {name!r}")
            elif attr.type != declared:
                shown = names[attr.type] if 0 <= attr.type < len(names) else attr.type
                raise ModelError(f"{node.label}: attribute {name!r} of {node.op_type}-"
                                 f"{schema.since_version} must be {names[declared]}, not "
                                 f"{shown}")
        for what, count, low, high in (
                ("inputs", len(node.inputs), schema.min_input, schema.max_input),
                ("outputs", len(node.outputs), schema.min_output, schema.max_output)):
            if low <= count <= high:
                continue
            wanted = (f"{low}" if low == high else f"at least {low}" if high >= 2**31 - 1
                      else f"{low} to {high}")
            raise ModelError(f"{node.label}: {node.op_type}-{schema.since_version} takes "
                             f"{wanted} {what}, got {count}")

    @staticmethod
    def _element_type(node, key):
        number = node.attrs[key]
        if not isinstance(number, int) or isinstance(number, bool):
            raise ModelError(f"{node.label}: {node.op_type} attribute {key!r} must be an int "
                             f"(an ONNX element type), not {type(number).__name__} {number!r}")
        if number not in ELEMENT_TYPES:
            raise UnsupportedOpError(f"{node.label}: {node.op_type} with {key}={number}: cyloop "
                                     "has no numpy equivalent of that ONNX element type")
        return ELEMENT_TYPES[number]

    def _reference_has(self, domain, op_type, version) -> bool:
        _onnx(f"op {op_type!r}, which cyloop has no native kernel for,")  # (installed?)
        try:
            reference_op_class(domain, op_type, version)
        except Exception:  # noqa: BLE001 - onnx raises several types for "not found"
            return False
        return True

    def _body(self, node, key="body") -> Graph:
        body = node.attrs.get(key)
        if not isinstance(body, Graph):
            raise ModelError(f"{node.label}: missing subgraph attribute {key!r}")
        return body

    def _elem_type(self, name):
        type_proto = self.types.get(name)
        if type_proto is None or type_proto.WhichOneof("value") != "tensor_type":
            return None
        return ELEMENT_TYPES.get(type_proto.tensor_type.elem_type)

    def loop(self, node) -> Node:
        """ONNX Loop: inputs (M, cond, v_initial...), body (iter, cond, v...) -> (cond, v...,
        scan outputs...)."""
        body = self._body(node)
        if len(node.inputs) < 2:
            raise ModelError(f"{node.label}: Loop needs its M and cond inputs (empty names for "
                             f"omitted ones), got {len(node.inputs)} inputs")
        n_carried = len(node.inputs) - 2
        if len(body.inputs) != 2 + n_carried:
            raise ModelError(f"{node.label}: the body has {len(body.inputs)} inputs; a Loop with "
                             f"{n_carried} loop-carried values needs {2 + n_carried} (iteration "
                             "number, condition, then one per carried value)")
        n_scan = len(body.outputs) - 1 - n_carried
        if n_scan < 0:
            raise ModelError(f"{node.label}: the body has {len(body.outputs)} outputs; a Loop "
                             f"with {n_carried} loop-carried values needs at least "
                             f"{1 + n_carried} (condition, then one per carried value)")
        if len(node.outputs) != n_carried + n_scan:
            raise ModelError(f"{node.label}: the node has {len(node.outputs)} outputs but the "
                             f"body makes {n_carried} carried values and {n_scan} scan outputs")
        m_name, cond_name = node.inputs[0], node.inputs[1]
        if m_name and self._elem_type(m_name) not in (None, np.dtype(np.int64)):
            raise ModelError(f"{node.label}: M ({m_name!r}) must be int64, not "
                             f"{self._elem_type(m_name)}")
        if cond_name and self._elem_type(cond_name) not in (None, np.dtype(np.bool_)):
            raise ModelError(f"{node.label}: cond ({cond_name!r}) must be bool, not "
                             f"{self._elem_type(cond_name)}")
        cond_out = body.outputs[0]
        if cond_out.dtype is not None and cond_out.dtype != np.bool_:
            raise ModelError(f"{node.label}: the body's condition output {cond_out.name!r} must "
                             f"be bool, not {cond_out.dtype}")
        results = [v.name for v in body.outputs]
        spec = LoopSpec(
            body,
            inputs=[CarriedInput(2 + k, body.inputs[2 + k].name, results[1 + k])
                    for k in range(n_carried)],
            outputs=[LastOutput(results[1 + k], carried=k) for k in range(n_carried)]
            + [ConcatOutput(results[1 + n_carried + j], axis=0, new_axis=True)
               for j in range(n_scan)],
            trip_count=OuterInput(0) if m_name else None,
            initial_cond=OuterInput(1) if cond_name else None,
            iteration_param=body.inputs[0].name,
            cond_param=body.inputs[1].name,
            cond_result=results[0],
        )
        return Node("Loop", node.inputs, node.outputs, {"spec": spec, "model_op": node.op_type},
                    LOOP_DOMAIN, node.name or node.outputs[0])

    def scan(self, node, min_version=None) -> Node:
        """ONNX Scan 9+: inputs (states..., scan inputs...), body (states, slices) -> (states,
        scan outputs): sliced views along each input's axis, outputs stacked on their axis."""
        body = self._body(node)
        if (min_version or self.opsets[""]) < 9:
            return self.scan8(node)
        n_scan_in = _int_attribute(node, "num_scan_inputs")
        if n_scan_in is None or not 0 < n_scan_in <= len(node.inputs):
            raise ModelError(f"{node.label}: num_scan_inputs is {n_scan_in}, but the node has "
                             f"{len(node.inputs)} inputs")
        n_state = len(node.inputs) - n_scan_in
        if len(body.inputs) != len(node.inputs):
            raise ModelError(f"{node.label}: num_scan_inputs is inconsistent: the body has "
                             f"{len(body.inputs)} inputs, the node {len(node.inputs)} "
                             f"({n_state} states + {n_scan_in} scan inputs)")
        n_scan_out = len(body.outputs) - n_state
        if n_scan_out < 0 or len(node.outputs) != len(body.outputs):
            raise ModelError(f"{node.label}: the body has {len(body.outputs)} outputs, the node "
                             f"{len(node.outputs)}; both need {n_state} states then the scan "
                             "outputs")

        def per_input(key, count):
            values = node.attrs.get(key)
            if values is None:
                return [0] * count
            if not isinstance(values, list) or not all(_is_int(v) for v in values):
                raise ModelError(f"{node.label}: {key} must be a list of ints, not "
                                 f"{type(values).__name__} {_shown(values)}")
            if len(values) != count:
                raise ModelError(f"{node.label}: {key} has {len(values)} entries for {count} "
                                 "inputs/outputs")
            return values

        in_axes = per_input("scan_input_axes", n_scan_in)
        in_dirs = per_input("scan_input_directions", n_scan_in)
        out_axes = per_input("scan_output_axes", n_scan_out)
        out_dirs = per_input("scan_output_directions", n_scan_out)
        results = [v.name for v in body.outputs]
        inputs = [CarriedInput(k, body.inputs[k].name, results[k]) for k in range(n_state)]
        for j in range(n_scan_in):
            stride = -1 if in_dirs[j] else 1
            inputs.append(SlicedInput(n_state + j, body.inputs[n_state + j].name, in_axes[j],
                                      stride=stride))
        outputs = [LastOutput(results[k], carried=k) for k in range(n_state)]
        outputs += [ConcatOutput(results[n_state + j], out_axes[j], bool(out_dirs[j]), True)
                    for j in range(n_scan_out)]
        spec = LoopSpec(body, inputs=inputs, outputs=outputs)
        return Node("Loop", node.inputs, node.outputs, {"spec": spec, "model_op": node.op_type},
                    LOOP_DOMAIN, node.name or node.outputs[0])

    def scan8(self, node) -> Node:
        """ONNX Scan-8: (sequence_lens, states..., scan inputs...), each with a leading batch
        axis. The per-batch-element scan is a Scan-9 loop; a `BatchedScan` node runs it on each
        batch element, on the first sequence_lens[b] steps, and zero-pads the scan outputs."""
        body = self._body(node)
        inner_inputs = node.inputs[1:]
        n_scan_in = _int_attribute(node, "num_scan_inputs")
        if n_scan_in is None or not 0 < n_scan_in <= len(inner_inputs):
            raise ModelError(f"{node.label}: num_scan_inputs is {n_scan_in}, but the node has "
                             f"{len(inner_inputs)} state and scan inputs")
        attrs = {"body": body, "num_scan_inputs": n_scan_in,
                 "scan_input_directions": node.attrs.get("directions")}
        inner = self.scan(Node("Scan", inner_inputs, node.outputs, attrs, "", node.name),
                          min_version=9)
        n_states = len(inner_inputs) - n_scan_in
        return Node("BatchedScan", node.inputs, node.outputs,
                    {"spec": inner.attrs["spec"], "num_states": n_states}, LOOP_DOMAIN,
                    node.name or node.outputs[0])


def _schema(domain, op_type, version):
    """An op's schema at `version` (onnx_schemas.Schema's fields), or None: from cyloop's table
    for the ops it runs natively, else from onnx.defs (imported then, if installed)."""
    if onnx_schemas.in_table(domain, op_type):
        return onnx_schemas.get_schema(domain, op_type, version)
    try:
        defs = _onnx().defs
        found = defs.get_schema(op_type, version, domain)
    except Exception:  # noqa: BLE001 - no onnx, or no such schema
        return None
    return onnx_schemas.Schema(
        found.name, found.domain, found.since_version, found.min_input, found.max_input,
        found.min_output, found.max_output,
        {name: (int(a.type), a.required) for name, a in found.attributes.items()})


def _text(value) -> str:
    return bytes(value).decode()


# How each attribute type reads (the structured ones are read by `_Converter.attribute`).
_ATTRIBUTE_VALUES = {
    AttributeProto.UNDEFINED: lambda a: None,
    AttributeProto.FLOAT: lambda a: a.f,
    AttributeProto.INT: lambda a: a.i,
    AttributeProto.STRING: lambda a: _text(a.s),
    AttributeProto.FLOATS: lambda a: a.floats.tolist(),
    AttributeProto.INTS: lambda a: a.ints.tolist(),
    AttributeProto.STRINGS: lambda a: [_text(s) for s in a.strings],
    AttributeProto.SPARSE_TENSOR: lambda a: a.sparse_tensor,
    AttributeProto.SPARSE_TENSORS: lambda a: list(a.sparse_tensors),
    AttributeProto.TYPE_PROTO: lambda a: a.tp,
    AttributeProto.TYPE_PROTOS: lambda a: list(a.type_protos),
}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _int_attribute(node, key):
    """Attribute `key` of `node`, an int or None (absent); another type is a ModelError."""
    value = node.attrs.get(key)
    if value is not None and not _is_int(value):
        raise ModelError(f"{node.label}: {key} must be an int, not {type(value).__name__} "
                         f"{_shown(value)}")
    return value


def _instantiate(onnx, function, proto, schema) -> list | None:
    """`function`'s nodes for one call, `proto`: its formal inputs and outputs renamed to the
    call's actual names (an omitted optional one to ""), its internal values to names prefixed by
    the call's first output (unique in the graph), attribute references (``ref_attr_name``)
    replaced by the call's attribute or the schema's default. None if a body node carries a
    subgraph (its captured names would need renaming too)."""
    prefix = f"{proto.output[0] if proto.output else proto.op_type}::{proto.op_type}::"
    names = {"": ""}
    for k, formal in enumerate(function.input):
        names[formal] = proto.input[k] if k < len(proto.input) else ""
    for k, formal in enumerate(function.output):
        names[formal] = proto.output[k] if k < len(proto.output) else ""
    # (`proto` and its attributes are onnx_proto.py's: onnx's are parsed from their bytes)
    given = {a.name: a for a in proto.attribute}
    nodes = []
    for inner in function.node:
        node = onnx.NodeProto()
        node.CopyFrom(inner)
        del node.input[:]
        del node.output[:]
        node.input.extend(names.get(n, prefix + n) for n in inner.input)
        node.output.extend(names.setdefault(n, prefix + n) if n else "" for n in inner.output)
        node.name = prefix + (inner.name or inner.output[0] if inner.output else inner.op_type)
        del node.attribute[:]
        for attr in inner.attribute:
            if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                return None
            if not attr.ref_attr_name:
                node.attribute.append(attr)
                continue
            value = given.get(attr.ref_attr_name)
            if value is None:
                default = schema.attributes.get(attr.ref_attr_name)
                value = default.default_value if default is not None else None
                if value is None or value.type == onnx.AttributeProto.UNDEFINED:
                    continue  # not given, no default: the inner op's own default applies
            bound = onnx.AttributeProto.FromString(value.SerializeToString())
            bound.name = attr.name
            node.attribute.append(bound)
        nodes.append(node)
    return nodes
