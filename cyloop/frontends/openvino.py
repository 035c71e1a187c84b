"""OpenVINO IR (.xml + .bin, IR v10/v11) -> cyloop IR, with the standard library only.

TensorIterator-1 and Loop-5 become cyloop Loop nodes with a `LoopSpec` (both Loop-5 dialects: the
current `internal_layer_id` / `purpose=` one and the older `internal_operation_id` /
`from-operation` / `condition="True"` one). Every other layer maps to a kernel of the
``openvino`` domain at the layer's own opset version.

Inputs are keyed by their Parameter layer's name, outputs by the first tensor name on the port
feeding each Result (else the Result layer's name), typed as that Result's port declares. Every
other value goes by its port's first tensor name, else its layer's name (``name:port id`` for a
layer of several outputs), unique across the net and its bodies (`_Reader.name`): plans and errors
show the names a user of the model knows. Body Parameters and Results are ordered as the document
orders them: a layer id is an identifier, not an index.

The XML is streamed (`_Reader.read`): each layer is converted as its element ends and then
dropped, and each Const reads just its own bytes of the .bin, so reading a large IR peaks near
the size of the Graph it makes, not at several times the size of the file.
"""

from __future__ import annotations

import gc
import io
import math
import os
import re
import sys
import xml.etree.ElementTree as ET
from typing import NamedTuple
from xml.parsers import expat

import numpy as np

from .. import kernels
from ..accel.aligned import aligned_empty
from ..errors import ModelError, UnsupportedOpError
from ..ir import (
    LOOP_DOMAIN,
    MAX_NESTING,
    OPENVINO_DOMAIN,
    CarriedInput,
    ConcatOutput,
    Graph,
    InvariantInput,
    LastOutput,
    LoopSpec,
    Node,
    OuterInput,
    SlicedInput,
    Value,
)
from ..narrow import ElementTypes
from ..tuning import IR_CHUNK, SMALL_WEIGHT_BYTES

__all__ = ["ELEMENT_TYPES", "read_graph"]

DOMAIN = OPENVINO_DOMAIN

# IR element type names -> numpy; those numpy lacks by their ml_dtypes names (imported when a
# model first names one): bfloat16, the 8-bit floats and the 4-bit types OpenVINO packs two a
# byte in the .bin (`_unpack_nibbles`).
_ML_DTYPES = {"bf16": "bfloat16", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
              "f8e8m0": "float8_e8m0fnu", "i4": "int4", "u4": "uint4",
              "f4e2m1": "float4_e2m1fn"}
ELEMENT_TYPES = ElementTypes({
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
    "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
    "u64": np.uint64, "boolean": np.bool_,
}, _ML_DTYPES)
_PACKED_4BIT = frozenset(["i4", "u4", "f4e2m1"])

# Layer attributes that name an element type: the kernels get them as numpy dtypes.
_TYPE_ATTRIBUTES = ("destination_type", "output_type", "index_element_type", "count_element_type")


def _refuse_dtd(*_args):
    raise ModelError("the IR declares a DTD or entities; cyloop refuses them (entity expansion "
                     "can exhaust memory)")


_CHUNK = IR_CHUNK  # (the IR is read a chunk at a time: see `_Reader.read`)
# The bytes of XML one token (a comment, a tag with its attributes) may take: an IR keeps its
# data in the .bin, so a larger one is refused rather than held.
TOKEN_LIMIT = 256 << 20


class _Events:
    """An XML parser's target: builds the elements (`ET.TreeBuilder`), notes ("start" | "end",
    element) as each starts and ends, and refuses a DTD as it begins, before any entity in it is
    declared (entities are declared only in a DTD, so none is ever expanded)."""

    def __init__(self):
        self.builder, self.events = ET.TreeBuilder(), []
        self.data = self.builder.data

    def start(self, tag, attrib):
        self.events.append(("start", self.builder.start(tag, attrib)))

    def end(self, tag):
        self.events.append(("end", self.builder.end(tag)))

    def doctype(self, *_args):
        _refuse_dtd()

    def close(self):
        return self.builder.close()


def _parse_events(file, path: str):
    """The ("start" | "end", element) events of the XML in `file`, read a chunk at a time.

    expat before 2.6 scans an unfinished token again from its start at each chunk it is fed, so
    a token of n bytes fed in chunks of c would cost n^2 / 2c: where a chunk ends no element, the
    next is four times as large, and a token costs a few times its size (up to TOKEN_LIMIT)."""
    target = _Events()
    parser = ET.XMLParser(target=target)
    size, pending = _CHUNK, 0  # the next chunk's size; bytes read since the last element event
    try:
        while chunk := file.read(size):
            parser.feed(chunk)
            if target.events:
                size, pending = _CHUNK, 0
                yield from target.events
                target.events.clear()
                continue
            pending += len(chunk)
            if pending > TOKEN_LIMIT:
                raise ModelError(f"{path}: more than {TOKEN_LIMIT >> 20} MiB of XML without an "
                                 "element starting or ending (a comment, tag or attribute that "
                                 "long); an IR keeps its data in the .bin, and cyloop refuses it")
            size = min(4 * size, TOKEN_LIMIT + 1 - pending)
        parser.close()
        yield from target.events
    except (expat.ExpatError, ET.ParseError) as e:
        raise ModelError(f"{path}: not a well-formed IR XML file ({e})") from e


class _Weights:
    """The .bin, read one Const at a time into that Const's own array (never whole, never
    mapped): a constant is a copy of its bytes, so it does not change if the file does later."""

    def __init__(self, path, required: bool):
        """`path`: the .bin's path, or its bytes (then `path` is named "the weights bytes")."""
        if isinstance(path, (bytes, bytearray, memoryview)):
            self.path, self.file = "the weights bytes", io.BytesIO(path)
            self.size = len(self.file.getbuffer())
            return
        self.path, self.size, self.file = path, 0, None
        if not os.path.exists(path):
            if required:
                raise ModelError(f"{path}: the weights file does not exist")
            return
        try:
            self.file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
            self.size = os.fstat(self.file.fileno()).st_size
        except OSError as e:
            self.close()
            raise ModelError(f"{path}: cannot read the weights ({e.strerror})") from e

    def read_into(self, array: np.ndarray, offset: int) -> bool:
        """Fill the C-contiguous `array` from the bytes at `offset`; False if the file ends
        first (it was checked long enough, but may have shrunk since)."""
        view = memoryview(array.reshape(-1).view(np.uint8))
        done = 0
        self.file.seek(offset)
        while done < len(view):
            count = self.file.readinto(view[done:])
            if not count:
                return False
            done += count
        return True

    def close(self):
        if self.file is not None:
            self.file.close()


def read_graph(xml_path, *, weights=None) -> Graph:
    """An OpenVINO IR as a cyloop `Graph`: `xml_path` (or the XML's bytes) and its weights
    (`weights`: a path or the bytes; by default the .bin beside the .xml)."""
    xml_bytes = isinstance(xml_path, (bytes, bytearray, memoryview))
    if xml_bytes:
        source, xml_path = io.BytesIO(xml_path), "the IR bytes"
    else:
        xml_path = os.fspath(xml_path)
    if isinstance(weights, (bytes, bytearray, memoryview)):
        bin_path = weights
    elif weights is not None:
        bin_path = os.fspath(weights)
    else:
        bin_path = "(no weights given)" if xml_bytes else os.path.splitext(xml_path)[0] + ".bin"
    blob = _Weights(bin_path, required=weights is not None)
    bin_path = blob.path
    # Reading makes millions of short-lived objects while the graph grows, and no reference
    # cycles: the cyclic collector would walk the growing graph again and again for nothing
    # (two thirds of the reading time of a large IR), so it pauses until the graph is read.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with source if xml_bytes else open(xml_path, "rb") as xml_file:
            return _Reader(blob, bin_path).read(_parse_events(xml_file, xml_path), xml_path)
    except OSError as e:
        raise ModelError(f"{xml_path}: cannot read the IR ({e.strerror})") from e
    finally:
        blob.close()
        if collecting:
            gc.enable()


def _int(element, key, where, default=None):
    """An integer attribute of `element` (decimal, as the IR writes it), `default` if absent; any
    other text is a ModelError naming `where`, the element and the attribute."""
    value = element.get(key)
    if value is None:
        return default
    try:
        return int(value, 10)
    except ValueError:
        raise ModelError(f"{where}: <{element.tag}> attribute {key}={value!r} is not an "
                         "integer") from None


def _unknown_type(name, where) -> ModelError:
    """The error for an element type cyloop cannot read (the ml_dtypes ones without ml_dtypes)."""
    if name in _ML_DTYPES:
        return UnsupportedOpError(f"{where}: element type {name!r} needs the ml_dtypes package "
                                  f"(numpy has no {_ML_DTYPES[name]}): pip install ml_dtypes")
    return ModelError(f"{where}: element type {name!r} is not supported (supported: "
                      f"{', '.join(ELEMENT_TYPES)})")


def _element_type(name, where):
    """An IR element type name as a numpy dtype; "" (left to the layer's default) as None."""
    if name == "":
        return None
    if name not in ELEMENT_TYPES:
        raise _unknown_type(name, where)
    return np.dtype(ELEMENT_TYPES[name])


def _unpack_nibbles(packed: np.ndarray, count: int, dtype: np.dtype) -> np.ndarray:
    """`count` 4-bit values packed two a byte, the first in the low nibble (OpenVINO's layout of
    i4, u4 and f4e2m1 in the .bin), as an array of `dtype`, one value a byte: ml_dtypes keeps a
    4-bit value in the low nibble of its byte, so each nibble is the value's bits."""
    nibbles = np.empty(2 * packed.size, np.uint8)
    np.bitwise_and(packed, 0x0F, out=nibbles[0::2])
    np.right_shift(packed, 4, out=nibbles[1::2])
    return nibbles[:count].view(dtype)


def _shape(text):
    """An IR shape attribute: "5,2,3"; "" is a scalar; "?", "-1" and "1..10" are dynamic."""
    if text is None:
        return None
    text = text.strip()
    if text in ("", "[]"):
        return ()
    dims = []
    for item in text.strip("[]").split(","):
        item = item.strip()
        dims.append(int(item) if item.lstrip("-").isdigit() and int(item) >= 0 else None)
    return tuple(dims)


class _Body(NamedTuple):
    """A body read from the IR, with what its layer's port map needs to know of it."""

    graph: Graph
    params: dict  # Parameter layer id -> its value name, in document order
    results: dict  # Result layer id -> the value it reads, in document order


class _Unread(NamedTuple):
    """An input whose edge names a port that no earlier layer produces."""

    layer: str
    port: str


_UNCONNECTED = object()  # an input no edge has reached (yet); an output no port has
_READ_LAST = ("TensorIterator", "Loop", "If")  # their readers need their input values


class _Layer:
    """What the rest of its graph needs of a layer once read: its place in the document, the
    values on its output ports, and the values on its input ports, filled in as the edges arrive
    (they follow the layers). One small record a layer: a large graph holds very many."""

    __slots__ = ("in_ports", "inputs", "node", "out_ports", "outputs", "position")

    def __init__(self, position, out_ports, outputs, in_ports=(), inputs=None, node=None):
        self.position = position  # the layer's place in the document
        self.out_ports, self.outputs = out_ports, outputs  # port ids; the value on each
        # Port ids; the value each reads (a Result: the (layer, port) it reads), or None
        self.in_ports, self.inputs = in_ports, inputs
        self.node = node  # the Node read; for a layer read when the graph ends, its element

    def output(self, port):
        """The value on output `port` (the last port of that id), or _UNCONNECTED."""
        for k in range(len(self.out_ports) - 1, -1, -1):
            if self.out_ports[k] == port:
                return self.outputs[k]
        return _UNCONNECTED

    def describe(self, lid):
        """The layer's (name, type), for errors."""
        if isinstance(self.node, Node):
            return self.node.name[len(lid) + 1:], self.node.op_type
        return self.node.get("name"), self.node.get("type")


class _GraphReading:
    """One graph, the net or a body, read as the parser streams it (see `_Reader.read`).

    A layer is read when its element ends, and the element is dropped. The edges come after the
    layers, so a node's input values are filled in as they arrive and checked when the graph
    ends; Results, and TensorIterator, Loop and If layers (whose readers need their input values),
    are kept until then: they are few, and small once their bodies are read."""

    def __init__(self, reader, top: bool, name: str):
        self.reader, self.top, self.name = reader, top, name
        self.scope = reader.new_scope()
        self.inputs, self.nodes, self.initializers = [], [], {}
        self.input_names = set()
        self.layers = {}  # layer id -> _Layer
        self.last = []  # (index in nodes or None for a Result, layer id, what reading needs)
        self.params = {}  # Parameter layer id -> its value name
        self.port_names = {}  # (layer id, port id) -> the port's first tensor name (the net only)
        self.has_layers = self.has_edges = self.layers_done = False
        self.early_edges = []  # edges met before the <layers> section ended

    def port_values(self, layer, lid, section) -> list:
        """The value names of a layer's output ports (see `_Reader.name`): each port's first
        tensor name, else the layer's name (with ":<port id>" when it has several ports)."""
        if section is None:
            return []
        own = layer.get("name") or f"#{lid}"
        several = len(section) > 1
        values = []
        for port in section:
            port_id = port.get("id")
            tensor = _first_name(port.get("names"))
            if self.top and tensor is not None:
                self.port_names[(lid, port_id)] = tensor
            values.append(self.reader.name(self.scope, tensor,
                                           f"{own}:{port_id}" if several else own))
        return values

    def claim_input_name(self, value, lid):
        """Give the net's Parameter `lid` its own name, `value` (the name its feed goes by): a
        value an earlier layer of the net took that name for is renamed (the net's edges are
        not connected yet, so only its layer names it); one of an earlier body keeps it (that
        body is closed: no value of the net is in it)."""
        if value in self.input_names:
            first = next(other for other, name in self.params.items() if name == value)
            raise ModelError(f"{self.name}: Parameter layers {first} and {lid} are both named "
                             f"{value!r}; inputs need distinct names")
        reader = self.reader
        if reader.taken.get(value) == self.scope:
            fresh = reader.name(self.scope, None, value)
            for entry in self.layers.values():
                if entry.outputs is not None and value in entry.outputs:
                    renamed = [fresh if name == value else name for name in entry.outputs]
                    if isinstance(entry.outputs, list):  # shared with its node: edit in place
                        entry.outputs[:] = renamed
                    else:  # a Const's
                        entry.outputs = tuple(renamed)
                        if value in self.initializers:
                            self.initializers[fresh] = self.initializers.pop(value)
        reader.taken[value] = self.scope

    def layer(self, layer, bodies):
        """Read one layer element (its bodies, if any, already read into `bodies`)."""
        lid, kind = layer.get("id"), layer.get("type")
        if lid is None or lid in self.layers:
            raise ModelError(f"{self.name}: a layer has a missing or repeated id ({lid!r})")
        position = len(self.layers)
        data = layer.find("data")
        attrs = {} if data is None else data.attrib
        section = layer.find("output")
        out_ports = () if section is None else self.reader.shared(
            tuple(port.get("id") for port in section))
        if kind == "Parameter":
            dtype = ELEMENT_TYPES.get(attrs.get("element_type", "f32"))
            # The net's Parameter is named by its layer name: its feed's key. A body's keeps its
            # layer name too when no other value has it, else takes its tensor name.
            value = layer.get("name")
            if self.top:
                self.claim_input_name(value, lid)
                for port in () if section is None else section:  # (for a Result reading it)
                    tensor = _first_name(port.get("names"))
                    if tensor is not None:
                        self.port_names[(lid, port.get("id"))] = tensor
            else:
                first = None if section is None or not len(section) else section[0]
                tensor = None if first is None else _first_name(first.get("names"))
                value = self.reader.name(self.scope, value or f"#{lid}", tensor)
            out_ports = out_ports or ("0",)
            self.layers[lid] = _Layer(position, out_ports, (value,) * len(out_ports))
            self.inputs.append(Value(value, dtype, _shape(attrs.get("shape"))))
            self.input_names.add(value)
            self.params[lid] = value
            return
        if kind == "Const":
            value = self.reader.const(layer, attrs)
            outputs = tuple(self.port_values(layer, lid, section))
            for name in outputs:
                self.initializers[name] = value
            self.layers[lid] = _Layer(position, out_ports, outputs)
            return
        in_section = layer.find("input")
        in_ports = [] if in_section is None else list(in_section)
        if kind == "Result":
            if not in_ports:
                raise ModelError(f"Result layer {lid} ({layer.get('name')!r}) has no input")
            self.layers[lid] = _Layer(position, (), None, (in_ports[0].get("id"),),
                                      [_UNCONNECTED], layer)
            self.last.append((None, lid, in_ports[0]))
            return
        # Shared objects for what many layers repeat: op types, port lists, attribute values.
        kind = sys.intern(kind) if kind is not None else kind
        ports = self.reader.shared(tuple(port.get("id") for port in in_ports))
        inputs = [_UNCONNECTED] * len(ports)
        outputs = self.port_values(layer, lid, section)
        if kind in _READ_LAST:
            self.layers[lid] = _Layer(position, out_ports, outputs, ports, inputs, layer)
            self.last.append((len(self.nodes), lid, (layer, kind, dict(attrs), outputs, bodies)))
            self.nodes.append(None)
            return
        attrs = {key: sys.intern(value) for key, value in attrs.items()}
        node = self.reader.node(layer, kind, attrs, inputs, outputs)
        self.nodes.append(node)
        self.layers[lid] = _Layer(position, out_ports, node.outputs, ports,
                                  node.inputs if ports else None, node)

    def edge(self, edge):
        src = (edge.get("from-layer", edge.get("from-operation")), edge.get("from-port"))
        dst = (edge.get("to-layer", edge.get("to-operation")), edge.get("to-port"))
        if self.layers_done:
            self.connect(src, dst)
        else:
            self.early_edges.append((src, dst))

    def end_layers(self):
        self.layers_done = True
        for src, dst in self.early_edges:
            self.connect(src, dst)
        self.early_edges = []

    def connect(self, src, dst):
        """Fill the input `dst` (layer, port) reads with the value `src` names."""
        for layer_id in (src[0], dst[0]):
            if layer_id not in self.layers:
                raise ModelError(f"{self.name}: an edge names layer {layer_id}, which does not "
                                 "exist")
        entry = self.layers[dst[0]]
        if entry.inputs is None:  # a layer without inputs
            return
        # (a Result keeps where its value comes from: the net's output takes the port's name)
        value = src if entry.outputs is None else self.value(src, entry.position)
        for k, port in enumerate(entry.in_ports):
            if port == dst[1]:
                entry.inputs[k] = value

    def value(self, src, position):
        """The value on output `src` = (layer, port) for the layer at `position`: an `_Unread`
        unless an earlier layer produces it (an error when the graph ends, unless a later edge
        to the same input replaces it)."""
        source = self.layers[src[0]]
        value = source.output(src[1])
        if value is _UNCONNECTED or source.position >= position:
            return _Unread(*src)
        return value

    def finish(self) -> _Body:
        if not self.has_layers:
            raise ModelError(f"{self.name}: no <layers> section")
        self.end_layers()
        for lid, entry in self.layers.items():
            if entry.inputs is None:
                continue
            for port, value in zip(entry.in_ports, entry.inputs):
                if value is _UNCONNECTED:
                    name, kind = entry.describe(lid)
                    raise ModelError(f"layer {lid} ({name!r}, {kind}): input port {port} is not "
                                     "connected")
                if entry.outputs is None:  # a Result
                    value = self.value(value, entry.position)
                if type(value) is _Unread:
                    name, _ = entry.describe(lid)
                    raise ModelError(f"layer {lid} ({name!r}): its input comes from layer "
                                     f"{value.layer} port {value.port}, which produces nothing "
                                     "(or comes later in the document)")
        outputs, public_outputs, results = [], [], {}
        for index, lid, kept in self.last:
            entry = self.layers[lid]
            if index is not None:
                layer, kind, attrs, node_outputs, bodies = kept
                self.nodes[index] = self.reader.node(layer, kind, attrs, entry.inputs,
                                                     node_outputs, bodies)
                continue
            src = entry.inputs[0]
            source = results[lid] = self.value(src, entry.position)
            # The output is typed as the Result's input port declares (the graph's outputs are
            # not checked against it when it runs: as ONNX's, they document the model).
            declared = _port_type(kept)
            if self.top:
                public_outputs.append((lid, source, declared, (
                    self.port_names.get(src), entry.node.get("name"))))
            else:
                outputs.append(Value(source, *declared))
        graph = Graph(self.nodes, self.inputs, outputs, self.initializers,
                      {DOMAIN: 1, LOOP_DOMAIN: 1}, self.name)
        for lid, source, declared, candidates in public_outputs:
            self.add_output(graph, lid, source, declared, candidates)
        return _Body(graph, self.params, results)

    def add_output(self, graph: Graph, lid, source: str, declared, candidates):
        """Make `source` an output of the net, named by Result `lid`'s `candidates`: the first
        tensor name of the port it reads, else its layer's name; the first that no other output
        has (two Results may read one port)."""
        named = {v.name for v in graph.outputs}
        public = next((name for name in candidates if name and name not in named), None)
        if public is None:
            raise ModelError(f"Result layer {lid}: its output names {list(candidates)} are "
                             "other outputs' names")
        if public != source:
            if public in self.input_names:
                raise ModelError(f"output name {public!r} is also an input's name")
            if self.reader.taken.get(public) == self.scope:
                # Another value of the net took the name first (see `_Reader.name`): it yields
                # it to the output, whose name is the model's interface.
                _rename_outer(graph, public, self.reader.name(self.scope, None, public))
            self.reader.taken[public] = self.scope
            graph.nodes.append(Node("Identity", [source], [public], {}, DOMAIN, public,
                                    version=1))
        graph.outputs.append(Value(public, *declared))


# What an open element is to `_Reader.read`.
_GRAPH, _LAYERS, _LAYER, _EDGES, _EDGE = "graph", "layers", "layer", "edges", "edge"
_INERT = (None, None, None)  # anything else: kept in the tree until its layer is read


def _is_body(kind, tag: str) -> bool:
    """Whether element `tag` of a layer of type `kind` is a body (read as a graph)."""
    if kind in ("TensorIterator", "Loop"):
        return tag == "body"
    return kind == "If" and tag in ("then_body", "else_body")


class _Reader:
    def __init__(self, blob: _Weights, bin_path: str):
        self.blob = blob
        self.bin_path = bin_path
        self._shared = {}  # one object for each repeated tuple of port ids
        self.taken = {}  # value name -> the scope (graph reading) that has it; see `name`
        self._suffixes = {}  # name -> the last n of "name~n" given
        self._scopes = 0

    def shared(self, ports: tuple) -> tuple:
        return self._shared.setdefault(ports, ports)

    def new_scope(self) -> int:
        self._scopes += 1
        return self._scopes

    def name(self, scope: int, *candidates) -> str:
        """A name for a new value of graph `scope`: the first of `candidates` (the model's own
        names: a tensor name, a layer name) that no value has yet, else the last one with "~2",
        "~3", ... appended.

        Names are unique across the net and all its bodies, each taken in document order: so a
        body never hides a value its graph captures (an If branch reads the values its port map
        names from the graph around it). The one exception, a net's Parameter, always has its
        layer name (`_GraphReading.claim_input_name`), and so has a net output its tensor name.
        """
        taken = self.taken
        for candidate in candidates:
            if candidate and candidate not in taken:
                taken[candidate] = scope
                return candidate
        base = candidates[-1]
        n = self._suffixes.get(base, 1)
        while True:
            n += 1
            candidate = f"{base}~{n}"
            if candidate not in taken:
                self._suffixes[base] = n
                taken[candidate] = scope
                return candidate

    def shared_attrs(self, attrs: dict) -> dict:
        """One dict for every layer with these attributes (a large IR repeats a few sets; see
        `Node`: nodes never change their attrs)."""
        try:
            key = ("attrs", *attrs.items())
            return self._shared.setdefault(key, attrs)
        except TypeError:  # an unhashable value
            return attrs

    def read(self, events, path: str) -> Graph:
        """The Graph of the IR whose parse events (see `_parse_events`) are `events`.

        The document is never held whole: a layer is read when its element ends, and the element
        removed from the tree (an edge likewise), so the tree holds about one layer per open
        graph. A body is read the same way, as a graph of its own, and handed to its layer."""
        stack = []  # per open element: (role, element, its graph reading or its layer's bodies)
        graphs = []  # the graphs being read, the net first
        net = None
        for event, element in events:
            if event == "start":
                if not stack:
                    if element.tag != "net":
                        raise ModelError(f"{path}: the root element is <{element.tag}>, not an "
                                         "IR <net>")
                    graphs.append(_GraphReading(self, True, element.get("name", "ir")))
                    stack.append((_GRAPH, element, graphs[-1]))
                    continue
                role, parent, owner = stack[-1]
                tag = element.tag
                if role is _LAYERS:
                    stack.append((_LAYER, element, {}))
                elif role is _EDGES:
                    stack.append((_EDGE, element, owner))
                elif role is _GRAPH and tag in ("layers", "operations") and not owner.has_layers:
                    owner.has_layers = True  # ("operations": the older Loop-5 dialect)
                    stack.append((_LAYERS, element, owner))
                elif role is _GRAPH and tag == "edges" and not owner.has_edges:
                    owner.has_edges = True
                    stack.append((_EDGES, element, owner))
                elif role is _LAYER and tag not in owner and _is_body(parent.get("type"), tag):
                    graphs.append(self.body_reading(parent, tag, graphs))
                    stack.append((_GRAPH, element, graphs[-1]))
                else:
                    stack.append(_INERT)
                continue
            role, _, owner = stack.pop()
            if role is None:
                continue
            if role is _LAYER:
                graphs[-1].layer(element, owner)
                stack[-1][1].remove(element)
            elif role is _EDGE:
                owner.edge(element)
                stack[-1][1].remove(element)
            elif role is _LAYERS:
                owner.end_layers()
            elif role is _GRAPH:
                body = graphs.pop().finish()
                if stack:
                    stack[-1][2][element.tag] = body
                    stack[-1][1].remove(element)
                else:
                    net = body.graph
        return net

    def body_reading(self, layer, tag: str, graphs: list) -> _GraphReading:
        """The reading of body `tag` of `layer`; bodies nested deeper than MAX_NESTING are a
        ModelError."""
        lid, kind = layer.get("id"), layer.get("type")
        label = f"layer {lid} ({layer.get('name', '')!r}, {kind})"
        name = f"{label} body" if tag == "body" else f"{label} {tag.removesuffix('_body')} body"
        if len(graphs) > MAX_NESTING:
            raise ModelError(f"{name}: bodies nested more than {MAX_NESTING} deep; cyloop reads "
                             "at most that")
        return _GraphReading(self, False, name)

    def const(self, layer, attrs):
        label = f"Const layer {layer.get('id')} ({layer.get('name')!r})"
        kind = attrs.get("element_type")
        if kind not in ELEMENT_TYPES:
            raise _unknown_type(kind, label)
        try:
            offset, size = int(attrs["offset"]), int(attrs["size"])
        except (KeyError, ValueError) as e:
            raise ModelError(f"{label}: needs integer offset and size attributes") from e
        shape = _shape(attrs.get("shape", "")) or ()
        if any(d is None for d in shape):
            raise ModelError(f"{label}: a Const needs a static shape, got {attrs.get('shape')!r}")
        past_end = ModelError(f"{label}: bytes [{offset}, {offset + size}) run past the end of "
                              f"{self.bin_path} ({self.blob.size} bytes); the .bin is missing, "
                              "truncated or not this IR's")
        if size > 0 and self.blob.file is None:
            raise ModelError(f"{label}: its weights are in {self.bin_path}, which does not "
                             "exist (give the .bin with weights=)")
        if offset < 0 or size < 0 or offset + size > self.blob.size:
            raise past_end
        dtype = np.dtype(ELEMENT_TYPES[kind])
        count = math.prod(shape)  # (exact: np.prod wraps past 2**63, and a wrapped 0 passed)
        packed = kind in _PACKED_4BIT  # two values a byte, the last byte's high nibble unused
        needed = (count + 1) // 2 if packed else count * dtype.itemsize
        # (OpenVINO writes an empty constant with a size of 1; no byte of it is read)
        if needed != size and not (count == 0 and size <= dtype.itemsize):
            raise ModelError(f"{label}: shape {list(shape)} of {kind} needs {needed} bytes, the "
                             f"layer says {size}")
        if count == 0:  # (no element, but numpy refuses a dimension past what it indexes)
            try:
                np.empty(shape, np.uint8)
            except ValueError as e:
                raise ModelError(f"{label}: numpy cannot make an array of shape {list(shape)} "
                                 f"({e})") from None
        if packed:
            raw = np.empty(needed, np.uint8)
            if needed and not self.blob.read_into(raw, offset):
                raise past_end
            value = _unpack_nibbles(raw, count, dtype).reshape(shape)
        else:  # aligned, so that a product reads it as it is (accel/aligned.py)
            value = aligned_empty(shape, dtype, SMALL_WEIGHT_BYTES)
            if count and not self.blob.read_into(value, offset):
                raise past_end
        value.flags.writeable = False
        return value

    # -- layers ----------------------------------------------------------------------------------

    def node(self, layer, kind, attrs, node_inputs, node_outputs, bodies=None) -> Node:
        """The Node of a layer; `bodies`: its bodies, read (see `_Reader.read`)."""
        lid, lname = layer.get("id"), layer.get("name", "")
        label = f"layer {lid} ({lname!r}, {kind})"
        version_text = layer.get("version", "opset1")
        try:
            version = int(version_text.replace("opset", ""))
        except ValueError:
            raise ModelError(f"{label}: unknown version {version_text!r}") from None
        if kind in ("TensorIterator", "Loop"):
            return self.loop(layer, kind, node_inputs, node_outputs, label, bodies)
        if kind == "If":
            return self.if_(layer, node_inputs, node_outputs, label, bodies)
        try:
            kernels.lookup(DOMAIN, kind, version)
        except ModelError as e:
            raise type(e)(f"{label}: {e}") from None
        for key in _TYPE_ATTRIBUTES:
            if key in attrs:
                attrs[key] = _element_type(attrs[key], f"{label}: {key}")
        if kind == "LSTMCell" and len(node_inputs) > 6:
            raise UnsupportedOpError(f"{label}: LSTMCell-{version} with peepholes (input P) is "
                                     "not supported")
        return Node(kind, node_inputs, node_outputs, self.shared_attrs(attrs), DOMAIN,
                    f"{lid}:{lname}", version=version)

    def if_(self, layer, node_inputs, node_outputs, label, bodies) -> Node:
        """If-8, lowered as ONNX's If: a branch reads the layer's inputs its port map names (its
        Parameters become Identities of those outer values, which the branch captures) and
        yields the Results mapped to the layer's output ports, in port order."""
        if not node_inputs:
            raise ModelError(f"{label}: an If needs its condition input (port 0)")
        in_ports, out_ports = _port_ids(layer, "input"), _port_ids(layer, "output")
        branches = {}
        for key in ("then", "else"):
            read, port_map = bodies.get(f"{key}_body"), layer.find(f"{key}_port_map")
            if read is None or port_map is None:
                raise ModelError(f"{label}: no <{key}_body> or <{key}_port_map>")
            body, params, results = read
            nodes = []
            for entry in port_map.findall("input"):
                port, internal_id = entry.get("external_port_id"), entry.get("internal_layer_id")
                if port not in in_ports or in_ports.index(port) == 0:
                    raise ModelError(f"{label}: {key}_port_map maps input port {port}, which is "
                                     "not one of the layer's data inputs")
                param = params.get(internal_id)
                if param is None:
                    raise ModelError(f"{label}: {key}_port_map names body layer {internal_id}, "
                                     "which is not a body Parameter")
                nodes.append(Node("Identity", [node_inputs[in_ports.index(port)]], [param], {},
                                  DOMAIN, f"{label} {key} input {port}", version=1))
            mapped = {node.outputs[0] for node in nodes}
            unmapped = [v.name for v in body.inputs if v.name not in mapped]
            if unmapped:
                raise ModelError(f"{label}: {key}_body Parameters {unmapped} have no port_map "
                                 "entry")
            by_port = {entry.get("external_port_id"): results.get(entry.get("internal_layer_id"))
                       for entry in port_map.findall("output")}
            missing = [port for port in out_ports if by_port.get(port) is None]
            if missing:
                raise ModelError(f"{label}: {key}_port_map maps no body Result to output ports "
                                 f"{missing}")
            declared = {v.name: v for v in body.outputs}
            outputs = [declared.get(by_port[port], Value(by_port[port])) for port in out_ports]
            branches[f"{key}_branch"] = Graph(nodes + body.nodes, [], outputs, body.initializers,
                                              body.opsets, f"{label} {key}")
        return Node("If", node_inputs[:1], node_outputs, branches, "",
                    f"{layer.get('id')}:{layer.get('name', '')}")

    def loop(self, layer, kind, node_inputs, node_outputs, label, bodies) -> Node:
        if "body" not in bodies:
            raise ModelError(f"{label}: no <body>")
        # params: body Parameter layer id -> its value name; results: body Result layer id ->
        # the value it reads
        body, params, results = bodies["body"]
        in_ports, out_ports = _port_ids(layer, "input"), _port_ids(layer, "output")
        back = {}
        back_el = layer.find("back_edges")
        for edge in ([] if back_el is None else list(back_el)):
            src = edge.get("from-layer", edge.get("from-operation"))
            dst = edge.get("to-layer", edge.get("to-operation"))
            if src not in results or dst not in params:
                raise ModelError(f"{label}: back edge {src} -> {dst} must join a body Result to "
                                 "a body Parameter")
            back[dst] = src

        def param(layer_id):
            if layer_id not in params:
                raise ModelError(f"{label}: port_map names body layer {layer_id}, which is not "
                                 "a body Parameter")
            return params[layer_id]

        def result(layer_id):
            if layer_id not in results:
                raise ModelError(f"{label}: port_map names body layer {layer_id}, which is not "
                                 "a body Result")
            return results[layer_id]

        def position(ports, port_id, what):
            if port_id not in ports:
                raise ModelError(f"{label}: port_map names {what} port {port_id}, which the "
                                 f"layer does not have (ports: {ports})")
            return ports.index(port_id)

        port_map = layer.find("port_map")
        entries_in = [] if port_map is None else port_map.findall("input")
        entries_out = [] if port_map is None else port_map.findall("output")
        spec = LoopSpec(body, negative_trip_count_unbounded=kind == "Loop",
                        slices_set_trip_count=kind == "TensorIterator")
        mapped_params, cond_param_layer = set(), None
        for entry in entries_in:
            internal_id = entry.get("internal_layer_id", entry.get("internal_operation_id"))
            external = entry.get("external_port_id")
            purpose = entry.get("purpose")
            mapped_params.add(internal_id)
            if purpose == "current_iteration":
                spec.iteration_param = param(internal_id)
                continue
            outer = position(in_ports, external, "input")
            if entry.get("condition", "").lower() == "true":  # older dialect
                spec.initial_cond = OuterInput(outer)
                spec.cond_param = param(internal_id)
                cond_param_layer = internal_id
                continue
            if entry.get("axis") is not None:
                spec.inputs.append(SlicedInput(
                    outer, param(internal_id), _int(entry, "axis", label),
                    _int(entry, "start", label), _int(entry, "end", label),
                    _int(entry, "stride", label, 1), _int(entry, "part_size", label, 1),
                    keep_axis=True))
            elif internal_id in back:
                spec.inputs.append(CarriedInput(outer, param(internal_id),
                                                result(back[internal_id])))
            else:
                spec.inputs.append(InvariantInput(outer, param(internal_id)))
        outputs_by_port = {}
        for entry in entries_out:
            internal_id = entry.get("internal_layer_id", entry.get("internal_operation_id"))
            if entry.get("purpose") == "execution_condition":
                spec.cond_result = result(internal_id)
                continue
            external = entry.get("external_port_id")
            position(out_ports, external, "output")
            if entry.get("axis") is not None:
                outputs_by_port[external] = ConcatOutput(
                    result(internal_id), _int(entry, "axis", label),
                    _int(entry, "stride", label, 1) < 0, False)
            else:
                outputs_by_port[external] = LastOutput(result(internal_id))
        missing = [p for p in out_ports if p not in outputs_by_port]
        if missing:
            raise ModelError(f"{label}: output ports {missing} have no port_map entry")
        spec.outputs = [outputs_by_port[p] for p in out_ports]
        if kind == "Loop":
            unmapped = [lid for lid in params if lid not in mapped_params]
            older = cond_param_layer is not None or any(
                "internal_operation_id" in entry.attrib for entry in entries_in + entries_out)
            if older:
                # The older doc's dialect: the condition input, if connected, is the entry marked
                # condition="True" (its back edge brings the body's condition); the trip count,
                # if connected, is the input port no entry maps. Without a condition input the
                # body's condition is not checked (the doc's `for` loop), so it needs no entry.
                if cond_param_layer is not None:
                    cond_back = back.pop(cond_param_layer, None)
                    spec.inputs = [i for i in spec.inputs if i.param != spec.cond_param]
                    if cond_back is not None:
                        spec.cond_result = result(cond_back)
                used = {i.outer for i in spec.inputs}
                if spec.initial_cond is not None:
                    used.add(spec.initial_cond.index)
                free_ports = [k for k in range(len(in_ports)) if k not in used]
                if len(free_ports) > 1:
                    raise ModelError(f"{label}: input ports {[in_ports[k] for k in free_ports]} "
                                     "have no port_map entry; only the trip count may have none")
                spec.trip_count = OuterInput(free_ports[0]) if free_ports else None
                if spec.iteration_param is None and unmapped:
                    spec.iteration_param = params[unmapped[0]]
            else:
                if len(in_ports) < 2:
                    raise ModelError(f"{label}: a Loop needs its trip count and execution "
                                     "condition inputs (ports 0 and 1)")
                spec.trip_count, spec.initial_cond = OuterInput(0), OuterInput(1)
                if spec.iteration_param is None and len(unmapped) == 1:
                    spec.iteration_param = params[unmapped[0]]
        _stack_unsqueezed(spec)
        return Node("Loop", node_inputs, node_outputs,
                    {"spec": spec, "model_op": layer.get("type")}, LOOP_DOMAIN,
                    f"{layer.get('id')}:{layer.get('name', '')}")


def _stack_unsqueezed(spec: LoopSpec) -> None:
    """Read ``concat(Unsqueeze(v, axis), axis)`` as a stack of v on a new axis.

    OpenVINO's converters write a scan output that stacks per-iteration values as an Unsqueeze in
    the body and a concatenation along the unsqueezed axis; ONNX says the same with a scan output
    alone. Read both the same way: the output stacks v itself, so the kernel making v can write
    it straight into its row, and the Unsqueeze is dropped when nothing else reads it.
    """
    body = spec.body
    producer = {name: node for node in body.nodes for name in node.outputs}
    declared = {value.name: value for value in body.outputs}
    for k, out in enumerate(spec.outputs):
        if not isinstance(out, ConcatOutput) or out.new_axis:
            continue
        node = producer.get(out.result)
        value = declared[out.result]
        if (node is None or node.op_type != "Unsqueeze" or node.domain != DOMAIN
                or len(node.inputs) != 2 or value.shape is None):
            continue
        axes = body.initializers.get(node.inputs[1])
        rank = len(value.shape)
        if axes is None or np.size(axes) != 1 or not -rank <= out.axis < rank:
            continue
        axis = out.axis % rank
        if int(np.ravel(axes)[0]) % rank != axis or value.shape[axis] not in (1, None):
            continue
        source = node.inputs[0]
        if source not in declared:
            shape = value.shape[:axis] + value.shape[axis + 1:]
            body.outputs.append(Value(source, value.dtype, shape))
            declared[source] = body.outputs[-1]
        spec.outputs[k] = ConcatOutput(source, axis, out.reverse, new_axis=True)
        if not _reads(spec, out.result):
            body.outputs.remove(value)
            body.nodes.remove(node)


def _reads(spec: LoopSpec, name: str) -> bool:
    """Whether a loop port or a body node (subgraphs included) reads body value `name`."""
    ports = {out.result for out in spec.outputs} | {spec.cond_result}
    ports |= {inp.result for inp in spec.inputs if isinstance(inp, CarriedInput)}
    return name in ports or any(
        name in node.inputs or any(name in sub.free_names() for sub in node.subgraphs())
        for node in spec.body.nodes)


_PRECISIONS = {"FP16": np.float16, "FP32": np.float32, "FP64": np.float64, "I8": np.int8,
               "I16": np.int16, "I32": np.int32, "I64": np.int64, "U8": np.uint8,
               "U16": np.uint16, "U32": np.uint32, "U64": np.uint64, "BOOL": np.bool_}


def _port_type(port):
    """(dtype, shape) a port declares; dims of -1 or ranges are unknown (None). A port without
    dims declares no shape: OpenVINO writes a scalar and a tensor of dynamic rank alike."""
    dims = []
    for dim in port.findall("dim"):
        text = (dim.text or "").strip()
        dims.append(int(text) if text.isdigit() else None)
    return _PRECISIONS.get(port.get("precision", "").upper()), tuple(dims) if dims else None


def _first_name(names):
    """The first of a port's tensor names, or None. The ``names`` attribute lists them
    comma-separated, a comma inside a name escaped as ``\\,``; OpenVINO writes them sorted, so
    the first is the one its ``get_any_name()`` gives."""
    if not names:
        return None
    if "\\" in names:
        first = _TENSOR_NAME.match(names)
        first = "" if first is None else first.group().replace("\\,", ",")
    else:
        first = names.split(",", 1)[0]
    return first.strip() or None


_TENSOR_NAME = re.compile(r"(?:[^\\,]|\\.)+")


def _rename_outer(graph: Graph, old: str, new: str) -> None:
    """Rename value `old` of the net `graph` to `new`, where the net and its If branches (which
    capture the net's values by name) name it. Loop bodies read no outer value by name, and no
    body has a value of that name (see `_Reader.name`)."""
    graphs = [graph]
    while graphs:
        current = graphs.pop()
        for value in current.outputs:
            if value.name == old:
                value.name = new
        if old in current.initializers:
            current.initializers[new] = current.initializers.pop(old)
        for node in current.nodes:
            for names in (node.inputs, node.outputs):
                for k, name in enumerate(names):
                    if name == old:
                        names[k] = new
            graphs.extend(sub for sub in node.attrs.values() if isinstance(sub, Graph))


def _port_ids(layer, section: str) -> list:
    """The ids of a layer's input or output ports, in order."""
    ports = layer.find(section)
    return [] if ports is None else [port.get("id") for port in ports]
