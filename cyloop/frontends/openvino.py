"""OpenVINO IR (.xml + .bin, IR v10/v11) -> cyloop IR, with the standard library only.

TensorIterator-1 and Loop-5 become cyloop Loop nodes with a `LoopSpec` (both Loop-5 dialects: the
current `internal_layer_id` / `purpose=` one and the older `internal_operation_id` /
`from-operation` / `condition="True"` one). Every other layer maps to a kernel of the
``openvino`` domain at the layer's own opset version.

Inputs are keyed by their Parameter layer's name, outputs by the first tensor name on the port
feeding each Result (else the Result layer's name). Body Parameters and Results are ordered as
the document orders them: a layer id is an identifier, not an index.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from xml.parsers import expat

import numpy as np

from .. import ops
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

__all__ = ["ELEMENT_TYPES", "read_graph"]

DOMAIN = OPENVINO_DOMAIN

# IR element type names -> numpy.
ELEMENT_TYPES = {
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
    "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
    "u64": np.uint64, "boolean": np.bool_,
}
try:  # bfloat16 and the 8-bit floats, when ml_dtypes is installed (the onnx extra brings it);
    # the 4-bit types OpenVINO packs two a byte are not read.
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None
if ml_dtypes is not None:
    ELEMENT_TYPES.update({"bf16": ml_dtypes.bfloat16, "f8e4m3": ml_dtypes.float8_e4m3fn,
                          "f8e5m2": ml_dtypes.float8_e5m2, "f8e8m0": ml_dtypes.float8_e8m0fnu})

# Layer attributes that name an element type: the kernels get them as numpy dtypes.
_TYPE_ATTRIBUTES = ("destination_type", "output_type", "index_element_type")


def _refuse_dtd(*_args):
    raise ModelError("the IR declares a DTD or entities; cyloop refuses them (entity expansion "
                     "can exhaust memory)")


def _parse_xml(data: bytes, path: str) -> ET.Element:
    """Parse with every DTD and entity declaration refused before any is expanded."""
    guard = expat.ParserCreate()
    guard.StartDoctypeDeclHandler = _refuse_dtd
    guard.EntityDeclHandler = _refuse_dtd
    try:
        guard.Parse(data, True)
        return ET.fromstring(data)
    except (expat.ExpatError, ET.ParseError) as e:
        raise ModelError(f"{path}: not a well-formed IR XML file ({e})") from e


def read_graph(xml_path, *, weights=None) -> Graph:
    """An OpenVINO IR as a cyloop `Graph`: `xml_path` and its weights (`weights`: a path; by
    default the .bin beside the .xml)."""
    xml_path = os.fspath(xml_path)
    try:
        with open(xml_path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelError(f"{xml_path}: cannot read the IR ({e.strerror})") from e
    root = _parse_xml(data, xml_path)
    if root.tag != "net":
        raise ModelError(f"{xml_path}: the root element is <{root.tag}>, not an IR <net>")
    bin_path = os.fspath(weights) if weights is not None else os.path.splitext(xml_path)[0] + ".bin"
    blob = b""
    if os.path.exists(bin_path):
        with open(bin_path, "rb") as f:
            blob = f.read()
    elif weights is not None:
        raise ModelError(f"{bin_path}: the weights file does not exist")
    reader = _Reader(blob, bin_path)
    graph, _ = reader.graph(root, prefix="", top=True, name=root.get("name", "ir"))
    return graph


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


def _element_type(name, where):
    """An IR element type name as a numpy dtype; "" (left to the layer's default) as None."""
    if name == "":
        return None
    if name not in ELEMENT_TYPES:
        raise ModelError(f"{where}: element type {name!r} is not supported (supported: "
                         f"{', '.join(ELEMENT_TYPES)})")
    return np.dtype(ELEMENT_TYPES[name])


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


class _Reader:
    def __init__(self, blob: bytes, bin_path: str):
        self.blob = blob
        self.bin_path = bin_path
        self.depth = 0  # graphs being read around the next one (its nesting level)

    # -- one graph (the net or a body) ---------------------------------------------------------

    def graph(self, element, prefix: str, top: bool, name: str):
        """(the Graph, {(layer id, port id or "result"): value name}) for a net or a body; bodies
        nested deeper than MAX_NESTING are a ModelError."""
        if self.depth > MAX_NESTING:
            raise ModelError(f"{name}: bodies nested more than {MAX_NESTING} deep; cyloop reads "
                             "at most that")
        self.depth += 1
        try:
            return self._graph(element, prefix, top, name)
        finally:
            self.depth -= 1

    def _graph(self, element, prefix: str, top: bool, name: str):
        layers_el = element.find("layers")
        if layers_el is None:
            layers_el = element.find("operations")  # the older Loop-5 dialect
        if layers_el is None:
            raise ModelError(f"{name}: no <layers> section")
        layers = list(layers_el)
        by_id = {}
        for layer in layers:
            lid = layer.get("id")
            if lid is None or lid in by_id:
                raise ModelError(f"{name}: a layer has a missing or repeated id ({lid!r})")
            by_id[lid] = layer
        sources = {}  # (to layer, to port) -> (from layer, from port)
        edges_el = element.find("edges")
        for edge in ([] if edges_el is None else list(edges_el)):
            src = (edge.get("from-layer", edge.get("from-operation")), edge.get("from-port"))
            dst = (edge.get("to-layer", edge.get("to-operation")), edge.get("to-port"))
            for layer_id, _ in (src, dst):
                if layer_id not in by_id:
                    raise ModelError(f"{name}: an edge names layer {layer_id}, which does not "
                                     "exist")
            sources[dst] = src

        inputs, outputs, nodes, initializers = [], [], [], {}
        value_names: dict[tuple[str, str], str] = {}

        def internal(lid, port):
            return f"{prefix}#{lid}:{port}"

        def read(layer, port_el):
            key = (layer.get("id"), port_el.get("id"))
            if key not in sources:
                raise ModelError(f"layer {layer.get('id')} ({layer.get('name')!r}, "
                                 f"{layer.get('type')}): input port {key[1]} is not connected")
            src = sources[key]
            if src not in value_names:
                raise ModelError(f"layer {layer.get('id')} ({layer.get('name')!r}): its input "
                                 f"comes from layer {src[0]} port {src[1]}, which produces "
                                 "nothing (or comes later in the document)")
            return value_names[src]

        def out_ports(layer):
            section = layer.find("output")
            return [] if section is None else list(section)

        def in_ports(layer):
            section = layer.find("input")
            return [] if section is None else list(section)

        public_outputs: list[tuple[str, str]] = []
        for layer in layers:
            lid, kind = layer.get("id"), layer.get("type")
            data = layer.find("data")
            attrs = dict(data.attrib) if data is not None else {}
            if kind == "Parameter":
                dtype = ELEMENT_TYPES.get(attrs.get("element_type", "f32"))
                # A body Parameter keeps its layer name (scoped), for readable plans.
                value = layer.get("name") if top else f"{prefix}{layer.get('name') or lid}"
                if not top and value in {v.name for v in inputs}:
                    value = internal(lid, "0")
                for port in out_ports(layer) or [ET.Element("port", id="0")]:
                    value_names[(lid, port.get("id"))] = value
                inputs.append(Value(value, dtype, _shape(attrs.get("shape"))))
            elif kind == "Const":
                value = self.const(layer, attrs)
                for port in out_ports(layer):
                    initializers[internal(lid, port.get("id"))] = value
                    value_names[(lid, port.get("id"))] = internal(lid, port.get("id"))
            elif kind == "Result":
                (port,) = in_ports(layer)[:1] or [None]
                if port is None:
                    raise ModelError(f"Result layer {lid} ({layer.get('name')!r}) has no input")
                source = read(layer, port)
                if top:
                    src_layer, src_port = sources[(lid, port.get("id"))]
                    public_outputs.append((source, self.tensor_name(by_id[src_layer], src_port)
                                           or layer.get("name")))
                else:
                    outputs.append(Value(source, *_port_type(port)))
                value_names[(lid, "result")] = source
            else:
                node_inputs = [read(layer, port) for port in in_ports(layer)]
                node_outputs = [internal(lid, port.get("id")) for port in out_ports(layer)]
                for port, value in zip(out_ports(layer), node_outputs):
                    value_names[(lid, port.get("id"))] = value
                nodes.append(self.node(layer, kind, attrs, node_inputs, node_outputs, prefix))
        if top:
            taken = {v.name for v in inputs}
            for source, public in public_outputs:
                if public in taken:
                    if source != public:
                        raise ModelError(f"output name {public!r} is also an input's name")
                else:
                    nodes.append(Node("Identity", [source], [public], {}, DOMAIN, public,
                                      version=1))
                    taken.add(public)
                outputs.append(Value(public))
        graph = Graph(nodes, inputs, outputs, initializers, {DOMAIN: 1, LOOP_DOMAIN: 1}, name)
        return graph, value_names

    @staticmethod
    def tensor_name(layer, port_id):
        section = layer.find("output")
        for port in ([] if section is None else list(section)):
            if port.get("id") == port_id and port.get("names"):
                return port.get("names").split(",")[0].strip()
        return None

    def const(self, layer, attrs):
        label = f"Const layer {layer.get('id')} ({layer.get('name')!r})"
        kind = attrs.get("element_type")
        if kind not in ELEMENT_TYPES:
            raise ModelError(f"{label}: element type {kind!r} is not supported (supported: "
                             f"{', '.join(ELEMENT_TYPES)})")
        try:
            offset, size = int(attrs["offset"]), int(attrs["size"])
        except (KeyError, ValueError) as e:
            raise ModelError(f"{label}: needs integer offset and size attributes") from e
        shape = _shape(attrs.get("shape", "")) or ()
        if any(d is None for d in shape):
            raise ModelError(f"{label}: a Const needs a static shape, got {attrs.get('shape')!r}")
        if offset < 0 or size < 0 or offset + size > len(self.blob):
            raise ModelError(f"{label}: bytes [{offset}, {offset + size}) run past the end of "
                             f"{self.bin_path} ({len(self.blob)} bytes); the .bin is missing, "
                             "truncated or not this IR's")
        dtype = np.dtype(ELEMENT_TYPES[kind])
        count = int(np.prod(shape)) if shape else 1
        # (OpenVINO writes an empty constant with a size of 1; no byte of it is read)
        if count * dtype.itemsize != size and not (count == 0 and size <= dtype.itemsize):
            raise ModelError(f"{label}: shape {list(shape)} of {kind} needs "
                             f"{count * dtype.itemsize} bytes, the layer says {size}")
        value = np.frombuffer(self.blob, dtype, count, offset).reshape(shape).copy()
        value.flags.writeable = False
        return value

    # -- layers ----------------------------------------------------------------------------------

    def node(self, layer, kind, attrs, node_inputs, node_outputs, prefix) -> Node:
        lid, lname = layer.get("id"), layer.get("name", "")
        label = f"layer {lid} ({lname!r}, {kind})"
        version_text = layer.get("version", "opset1")
        try:
            version = int(version_text.replace("opset", ""))
        except ValueError:
            raise ModelError(f"{label}: unknown version {version_text!r}") from None
        if kind in ("TensorIterator", "Loop"):
            return self.loop(layer, kind, node_inputs, node_outputs, prefix, label)
        if kind == "If":
            return self.if_(layer, node_inputs, node_outputs, prefix, label)
        try:
            ops.lookup(DOMAIN, kind, version)
        except ModelError as e:
            raise type(e)(f"{label}: {e}") from None
        for key in _TYPE_ATTRIBUTES:
            if key in attrs:
                attrs[key] = _element_type(attrs[key], f"{label}: {key}")
        if kind == "LSTMCell" and len(node_inputs) > 6:
            raise UnsupportedOpError(f"{label}: LSTMCell-{version} with peepholes (input P) is "
                                     "not supported")
        return Node(kind, node_inputs, node_outputs, attrs, DOMAIN, f"{lid}:{lname}",
                    version=version)

    def if_(self, layer, node_inputs, node_outputs, prefix, label) -> Node:
        """If-8, lowered as ONNX's If: a branch reads the layer's inputs its port map names (its
        Parameters become Identities of those outer values, which the branch captures) and
        yields the Results mapped to the layer's output ports, in port order."""
        if not node_inputs:
            raise ModelError(f"{label}: an If needs its condition input (port 0)")
        in_ports, out_ports = _port_ids(layer, "input"), _port_ids(layer, "output")
        branches = {}
        for key in ("then", "else"):
            body_el, port_map = layer.find(f"{key}_body"), layer.find(f"{key}_port_map")
            if body_el is None or port_map is None:
                raise ModelError(f"{label}: no <{key}_body> or <{key}_port_map>")
            scope = f"{prefix}{layer.get('id')}/{key}/"
            body, values = self.graph(body_el, scope, top=False, name=f"{label} {key} body")
            parameters = {v.name for v in body.inputs}
            nodes = []
            for entry in port_map.findall("input"):
                port, internal_id = entry.get("external_port_id"), entry.get("internal_layer_id")
                if port not in in_ports or in_ports.index(port) == 0:
                    raise ModelError(f"{label}: {key}_port_map maps input port {port}, which is "
                                     "not one of the layer's data inputs")
                param = next((value for (lid, _), value in values.items()
                              if lid == internal_id and value in parameters), None)
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
            by_port = {entry.get("external_port_id"): values.get((entry.get("internal_layer_id"),
                                                                  "result"))
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

    def loop(self, layer, kind, node_inputs, node_outputs, prefix, label) -> Node:
        body_el = layer.find("body")
        if body_el is None:
            raise ModelError(f"{label}: no <body>")
        body, body_values = self.graph(body_el, f"{prefix}{layer.get('id')}/", top=False,
                                       name=f"{label} body")
        params = {}  # body Parameter layer id -> its value name
        results = {}  # body Result layer id -> the value it reads
        layers_el = body_el.find("layers")
        if layers_el is None:
            layers_el = body_el.find("operations")
        for body_layer in layers_el:
            if body_layer.get("type") == "Parameter":
                params[body_layer.get("id")] = body_values[(body_layer.get("id"),
                                                            _first_port(body_layer))]
            elif body_layer.get("type") == "Result":
                results[body_layer.get("id")] = body_values[(body_layer.get("id"), "result")]
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
        return Node("Loop", node_inputs, node_outputs, {"spec": spec}, LOOP_DOMAIN,
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
    """(dtype, shape) a port declares; dims of -1 or ranges are unknown (None)."""
    dims = []
    for dim in port.findall("dim"):
        text = (dim.text or "").strip()
        dims.append(int(text) if text.isdigit() else None)
    return _PRECISIONS.get(port.get("precision", "").upper()), tuple(dims)


def _port_ids(layer, section: str) -> list:
    """The ids of a layer's input or output ports, in order."""
    ports = layer.find(section)
    return [] if ports is None else [port.get("id") for port in ports]


def _first_port(layer):
    section = layer.find("output")
    ports = [] if section is None else list(section)
    return ports[0].get("id") if ports else "0"
