"""The ONNX messages cyloop reads, decoded from protobuf's wire format by hand, so that reading a
model costs what parsing it costs (importing the onnx package and protobuf's runtime costs a fresh
process more than reading most models does).

The field numbers are onnx.proto's (stable: fields are only ever added); the wire format is
protobuf's (varint, 64-bit, length-delimited, 32-bit; a repeated number packed or not). A message
is decoded when one of its fields is first read, one level deep: its sub-messages are spans of the
same bytes, decoded in their turn; `raw_data` is a zero-copy view of them. Fields cyloop does not
read are skipped, as protobuf skips unknown ones. Each message offers the names protobuf's Python
API gives the same field (``model.graph.node``, ``attr.ints``, ``HasField``, ``WhichOneof``,
``SerializeToString``), so the converter reads like code over onnx's classes.

Bytes that are not a protobuf (a length past the end, a wire type that does not exist, nesting
past protobuf's own limit) are a `ModelError` that says so, raised where the bad message is first
read. A model, or one field of it, past protobuf's size limit (`MESSAGE_LIMIT`: protobuf's parsers
refuse a message over 2 GiB) is refused before it is read. Every field is read once, where it
lies, so a model's load time is linear in its size, however its bytes are spread over fields.
"""

from __future__ import annotations

import os
import struct
from types import MappingProxyType as _spec

import numpy as np

from ..errors import ModelError

__all__ = ["MESSAGE_LIMIT", "AttributeProto", "GraphProto", "ModelProto", "NodeProto",
           "TensorProto", "TypeProto", "ValueInfoProto", "read_model", "too_large"]

# protobuf's own limit on nested messages (its parsers refuse deeper nesting).
_MAX_DEPTH = 100

# protobuf's limit on a message's size, and so on any field of one: 2 GiB less a byte (its
# parsers count bytes in a signed 32-bit integer). A model past it has to keep its tensors as
# external data (`onnx.save_model(..., save_as_external_data=True)`).
MESSAGE_LIMIT = (1 << 31) - 1

# Kinds of field, by how their bytes read.
_INT, _FLOAT, _STR, _BYTES, _RAW, _MSG, _INTS, _UINTS, _FLOATS, _DOUBLES, _STRS, _BYTES_LIST, \
    _MSGS, _ENUM = range(14)
_REPEATED = {_INTS, _UINTS, _FLOATS, _DOUBLES, _STRS, _BYTES_LIST, _MSGS}
_NUMBERS = {_INTS: 0, _UINTS: 0, _FLOATS: 5, _DOUBLES: 1}  # (the wire type of one element)
_DEFAULTS = {_INT: 0, _ENUM: 0, _FLOAT: 0.0, _STR: "", _BYTES: b"", _RAW: memoryview(b"")}
_ABSENT_MESSAGE = object()  # (the default of a message field: an empty message of its class)
_FLOAT32 = struct.Struct("<f")
_FLOAT64 = struct.Struct("<d")


class _Source:
    """What every message of one model shares: its bytes, what to call them in an error, and the
    directory its external data is read relative to."""

    __slots__ = ("base_dir", "data", "where")

    def __init__(self, data: bytes, where: str, base_dir: str):
        self.data, self.where, self.base_dir = data, where, base_dir

    def too_large(self, size: int, what: str) -> ModelError:
        return ModelError(f"{self.where}: {what} is {size} bytes, past protobuf's limit of "
                          f"{MESSAGE_LIMIT} (2 GiB) for one message; save the model with its "
                          f"tensors as external data (onnx.save_model(..., "
                          f"save_as_external_data=True))")

    def corrupt(self, why: str) -> ModelError:
        return ModelError(f"{self.where}: not an ONNX model (corrupt or truncated protobuf: "
                          f"{why})")


class Message:
    """One message: a span of its model's bytes, decoded at the first read of a field."""

    __slots__ = ("_depth", "_end", "_fields", "_source", "_start")
    # field number -> (name, kind, message class or None); the class's oneofs: field -> group
    FIELDS = _spec({})
    ONEOFS = _spec({})

    def __init__(self, source: _Source, start: int = 0, end: int = 0, depth: int = 0):
        self._source, self._start, self._end, self._depth = source, start, end, depth
        self._fields = None

    @classmethod
    def FromString(cls, data: bytes, where: str = "the ONNX bytes", base_dir: str = ""):
        """A message of this class read from `data` (protobuf's name for it)."""
        data = bytes(data)
        source = _Source(data, where, base_dir)
        if len(data) > MESSAGE_LIMIT:
            raise source.too_large(len(data), "the message")
        return cls(source, 0, len(data))

    def __getattr__(self, name):
        if name.startswith("_"):  # (no field's name: what copy and pickle look for, say)
            raise AttributeError(name)
        fields = self._fields if self._fields is not None else self._decode()
        try:
            return fields[name]
        except KeyError:
            pass
        default = _defaults(type(self)).get(name)
        if default is None:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")
        if default is _ABSENT_MESSAGE:  # an absent message reads as an empty one, as in protobuf
            cls = next(spec[2] for spec in self.FIELDS.values() if spec[0] == name)
            return cls(self._source, 0, 0, self._depth + 1)
        return default

    def HasField(self, name: str) -> bool:
        fields = self._fields if self._fields is not None else self._decode()
        return name in fields

    def WhichOneof(self, group: str):
        fields = self._fields if self._fields is not None else self._decode()
        return fields.get(("oneof", group))

    def SerializeToString(self) -> bytes:
        """The message's bytes, as they are in the model."""
        return self._source.data[self._start:self._end]

    def reread(self, data: bytes):
        """A message of this class read from `data`, named and placed as this one's model."""
        source = self._source
        data = bytes(data)
        return type(self)(_Source(data, source.where, source.base_dir), 0, len(data))

    def __reduce__(self):
        # (a message kept in a graph, a sparse tensor attribute say, pickles as its own bytes)
        source = self._source
        return type(self).FromString, (self.SerializeToString(), source.where, source.base_dir)

    def ListFields(self):
        fields = self._fields if self._fields is not None else self._decode()
        return [(name, value) for name, value in fields.items() if isinstance(name, str)]

    def __repr__(self):
        shown = ", ".join(f"{name}={value!r}" for name, value in self.ListFields())
        return f"{type(self).__name__}({shown})"

    def _decode(self) -> dict:
        source = self._source
        if self._depth > _MAX_DEPTH:
            raise source.corrupt(f"messages nested more than {_MAX_DEPTH} deep")
        data, pos, end = source.data, self._start, self._end
        specs, oneofs = self.FIELDS, self.ONEOFS
        fields: dict = {}
        while pos < end:
            # The tag: a varint, field number << 3 | wire type.
            tag = data[pos]
            pos += 1
            if tag >= 0x80:
                tag, pos = _varint(data, pos, tag, end, source)
            number, wire = tag >> 3, tag & 7
            if wire == 0:
                value = data[pos] if pos < end else -1
                if 0 <= value < 0x80:
                    pos += 1
                else:
                    value, pos = _varint(data, pos, 0, end, source, first=True)
            elif wire == 2:
                length = data[pos] if pos < end else -1
                if 0 <= length < 0x80:
                    pos += 1
                else:
                    length, pos = _varint(data, pos, 0, end, source, first=True)
                    if length > MESSAGE_LIMIT:
                        raise source.too_large(length, f"field {number} at byte {pos}")
                value = pos
                pos += length
            elif wire == 5:
                value = pos
                pos += 4
            elif wire == 1:
                value = pos
                pos += 8
            else:
                raise source.corrupt(f"wire type {wire} of field {number} at byte {pos - 1}")
            if pos > end or number == 0:
                raise source.corrupt(f"field {number} at byte {value} runs past its message's "
                                     f"end (byte {end})" if number else
                                     f"field number 0 at byte {value}")
            spec = specs.get(number)
            if spec is None:
                continue  # a field cyloop does not read
            name, kind, cls = spec
            if kind in _NUMBERS:
                values = fields.get(name)
                if values is None:
                    values = fields[name] = _Numbers(kind)
                if wire == 2:
                    values.chunks.append((value, pos))
                elif wire == _NUMBERS[kind]:
                    values.chunks.append(value if wire == 0
                                         else _FLOAT32.unpack_from(data, value)[0] if wire == 5
                                         else _FLOAT64.unpack_from(data, value)[0])
                continue
            if wire != (2 if kind in (_STR, _BYTES, _RAW, _MSG, _STRS, _BYTES_LIST, _MSGS) else
                        0 if kind in (_INT, _ENUM) else 5):
                continue  # (protobuf reads a field of another wire type as an unknown one)
            if kind == _INT:
                fields[name] = value - (1 << 64) if value >= 1 << 63 else value
            elif kind == _ENUM:
                # onnx.proto's enums are closed (proto2): protobuf reads a number the enum does
                # not define as an unknown field, leaving the field unset.
                if value < cls:
                    fields[name] = value
            elif kind == _STR:
                fields[name] = _text(data, value, pos, source)
            elif kind == _MSG:
                # A message field given twice merges; cyloop's models never do that, so the last
                # one wins (what protobuf gives for every field it holds once).
                fields[name] = cls(source, value, pos, self._depth + 1)
            elif kind == _MSGS:
                fields.setdefault(name, []).append(cls(source, value, pos, self._depth + 1))
            elif kind == _STRS:
                fields.setdefault(name, []).append(_text(data, value, pos, source))
            elif kind == _RAW:  # (a tensor's data: a view, not a copy)
                fields[name] = memoryview(data)[value:pos]
            elif kind == _BYTES:
                fields[name] = data[value:pos]
            elif kind == _BYTES_LIST:
                fields.setdefault(name, []).append(data[value:pos])
            else:  # _FLOAT
                fields[name] = _FLOAT32.unpack_from(data, value)[0]
            if name in oneofs:
                fields[("oneof", oneofs[name])] = name
        for name, values in fields.items():
            if isinstance(values, _Numbers):
                fields[name] = values.array(data, source)
        self._fields = fields
        return fields


def _varint(data, pos, value, end, source, first=False):
    """A varint's value and the position after it; `value`: its first byte, already read (the
    caller checked that byte's continuation bit; with `first`, it reads the first byte itself)."""
    if first:
        value, shift = 0, 0
    else:
        value, shift = value & 0x7F, 7
    while True:
        if pos >= end or shift > 63:
            raise source.corrupt(f"a varint runs past byte {pos}" if pos >= end
                                 else f"a varint longer than 10 bytes at byte {pos}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7


def _text(data, start, end, source) -> str:
    try:
        return data[start:end].decode()
    except UnicodeDecodeError as e:
        raise source.corrupt(f"a string field is not UTF-8 ({e})") from None


class _Numbers:
    """A repeated number field as its chunks come: (start, end) spans of packed values, or single
    values (unpacked: a varint's unsigned value, or a float)."""

    __slots__ = ("chunks", "kind")

    def __init__(self, kind):
        self.kind, self.chunks = kind, []

    def array(self, data, source) -> np.ndarray:
        kind, parts, singles = self.kind, [], []
        for chunk in self.chunks:
            if not isinstance(chunk, tuple):  # one varint, unpacked
                singles.append(chunk)
                continue
            if singles:
                parts.append(np.array(singles, _SINGLE[kind]))
                singles = []
            start, end = chunk
            if kind in (_INTS, _UINTS):
                parts.append(_packed_varints(data, start, end, source))
                continue
            width = 4 if kind == _FLOATS else 8
            if (end - start) % width:
                raise source.corrupt(f"packed {width}-byte values of {end - start} bytes")
            parts.append(np.frombuffer(data, "<f4" if width == 4 else "<f8",
                                       (end - start) // width, start))
        if singles:
            parts.append(np.array(singles, _SINGLE[kind]))
        if len(parts) == 1:
            values = parts[0]
        else:
            values = np.concatenate(parts) if parts else _EMPTY[kind]
        if kind == _INTS:
            return values.view(np.int64) if values.dtype == np.uint64 else values
        return values


def _packed_varints(data, start, end, source) -> np.ndarray:
    """The varints in ``data[start:end]``, as uint64 (an int64's two's complement)."""
    if end - start < 64:
        values, pos = [], start
        while pos < end:
            byte = data[pos]
            if byte < 0x80:
                values.append(byte)
                pos += 1
            else:
                value, pos = _varint(data, pos + 1, byte, end, source)
                values.append(value)
        return np.array(values, np.uint64)
    raw = np.frombuffer(data, np.uint8, end - start, start)
    stops = np.flatnonzero(raw < 0x80)  # the last byte of each varint
    if not len(stops) or stops[-1] != len(raw) - 1:
        raise source.corrupt(f"a packed varint runs past byte {end}")
    starts = np.empty_like(stops)
    starts[0], starts[1:] = 0, stops[:-1] + 1
    lengths = stops - starts + 1
    if lengths.max() > 10:
        raise source.corrupt(f"a varint longer than 10 bytes in bytes {start} to {end}")
    values = np.zeros(len(stops), np.uint64)
    for k in range(int(lengths.max())):
        has = lengths > k
        byte = raw[starts[has] + k].astype(np.uint64) & np.uint64(0x7F)
        values[has] |= byte << np.uint64(7 * k)
    return values


_SINGLE = {_INTS: np.uint64, _UINTS: np.uint64, _FLOATS: np.float32, _DOUBLES: np.float64}
_DEFAULTS_OF: dict[type, dict] = {}


def _defaults(cls) -> dict:
    found = _DEFAULTS_OF.get(cls)
    if found is None:
        found = _DEFAULTS_OF[cls] = {
            name: () if kind in _REPEATED and kind not in _NUMBERS
            else _EMPTY[kind] if kind in _NUMBERS else _ABSENT_MESSAGE if kind == _MSG
            else _DEFAULTS[kind]
            for name, kind, _ in cls.FIELDS.values()}
    return found


_EMPTY = {_INTS: np.empty(0, np.int64), _UINTS: np.empty(0, np.uint64),
          _FLOATS: np.empty(0, np.float32), _DOUBLES: np.empty(0, np.float64)}
for _array in _EMPTY.values():
    _array.flags.writeable = False


# -- the messages ---------------------------------------------------------------------------------

class StringStringEntryProto(Message):
    __slots__ = ()
    FIELDS = _spec({1: ("key", _STR, None), 2: ("value", _STR, None)})


class OperatorSetIdProto(Message):
    __slots__ = ()
    FIELDS = _spec({1: ("domain", _STR, None), 2: ("version", _INT, None)})


class TensorShapeProto(Message):
    __slots__ = ()

    class Dimension(Message):
        __slots__ = ()
        FIELDS = _spec({1: ("dim_value", _INT, None), 2: ("dim_param", _STR, None),
                  3: ("denotation", _STR, None)})
        ONEOFS = _spec({"dim_value": "value", "dim_param": "value"})

    FIELDS = _spec({1: ("dim", _MSGS, Dimension)})


class TypeProto(Message):
    __slots__ = ()

    class Tensor(Message):
        __slots__ = ()
        FIELDS = _spec({1: ("elem_type", _INT, None), 2: ("shape", _MSG, TensorShapeProto)})

    class SparseTensor(Tensor):
        __slots__ = ()

    class Sequence(Message):
        __slots__ = ()
        FIELDS = _spec({})  # (elem_type: set below, a TypeProto)

    class Optional(Sequence):
        __slots__ = ()

    class Map(Message):
        __slots__ = ()
        FIELDS = _spec({})

    class Opaque(Message):
        __slots__ = ()
        FIELDS = _spec({1: ("domain", _STR, None), 2: ("name", _STR, None)})

    FIELDS = _spec({1: ("tensor_type", _MSG, Tensor), 4: ("sequence_type", _MSG, Sequence),
              5: ("map_type", _MSG, Map), 9: ("optional_type", _MSG, Optional),
              8: ("sparse_tensor_type", _MSG, SparseTensor), 7: ("opaque_type", _MSG, Opaque),
              6: ("denotation", _STR, None)})
    ONEOFS = _spec(dict.fromkeys(("tensor_type", "sequence_type", "map_type", "optional_type",
                            "sparse_tensor_type", "opaque_type"), "value"))


TypeProto.Sequence.FIELDS = _spec({1: ("elem_type", _MSG, TypeProto)})
TypeProto.Optional.FIELDS = TypeProto.Sequence.FIELDS
TypeProto.Map.FIELDS = _spec({1: ("key_type", _INT, None), 2: ("value_type", _MSG, TypeProto)})


class ValueInfoProto(Message):
    __slots__ = ()
    FIELDS = _spec({1: ("name", _STR, None), 2: ("type", _MSG, TypeProto),
              3: ("doc_string", _STR, None)})


class TensorProto(Message):
    __slots__ = ()
    # TensorProto.DataLocation
    DEFAULT, EXTERNAL = 0, 1

    class Segment(Message):
        __slots__ = ()
        FIELDS = _spec({1: ("begin", _INT, None), 2: ("end", _INT, None)})

    FIELDS = _spec({1: ("dims", _INTS, None), 2: ("data_type", _INT, None),
              3: ("segment", _MSG, Segment), 4: ("float_data", _FLOATS, None),
              5: ("int32_data", _INTS, None), 6: ("string_data", _BYTES_LIST, None),
              7: ("int64_data", _INTS, None), 8: ("name", _STR, None),
              9: ("raw_data", _RAW, None), 10: ("double_data", _DOUBLES, None),
              11: ("uint64_data", _UINTS, None),
              13: ("external_data", _MSGS, StringStringEntryProto),
              14: ("data_location", _ENUM, 2)})

    @property
    def base_dir(self) -> str:
        """The directory external data is read relative to: the model file's ("" for a model
        given as bytes or as an ``onnx.ModelProto``: the working directory, as onnx reads it)."""
        return self._source.base_dir


class SparseTensorProto(Message):
    __slots__ = ()
    FIELDS = _spec({1: ("values", _MSG, TensorProto), 2: ("indices", _MSG, TensorProto),
              3: ("dims", _INTS, None)})


class AttributeProto(Message):
    __slots__ = ()
    # AttributeProto.AttributeType
    UNDEFINED, FLOAT, INT, STRING, TENSOR, GRAPH, FLOATS, INTS, STRINGS, TENSORS, GRAPHS, \
        SPARSE_TENSOR, SPARSE_TENSORS, TYPE_PROTO, TYPE_PROTOS = range(15)
    TYPE_NAMES = ("UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS",
                  "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO",
                  "TYPE_PROTOS")
    FIELDS = _spec({})  # (set below: it holds graphs, which hold attributes)


class NodeProto(Message):
    __slots__ = ()
    FIELDS = _spec({1: ("input", _STRS, None), 2: ("output", _STRS, None), 3: ("name", _STR, None),
              4: ("op_type", _STR, None), 7: ("domain", _STR, None),
              8: ("overload", _STR, None), 5: ("attribute", _MSGS, AttributeProto),
              6: ("doc_string", _STR, None)})


class GraphProto(Message):
    __slots__ = ()
    FIELDS = _spec({1: ("node", _MSGS, NodeProto), 2: ("name", _STR, None),
              5: ("initializer", _MSGS, TensorProto),
              15: ("sparse_initializer", _MSGS, SparseTensorProto),
              10: ("doc_string", _STR, None), 11: ("input", _MSGS, ValueInfoProto),
              12: ("output", _MSGS, ValueInfoProto), 13: ("value_info", _MSGS, ValueInfoProto)})


AttributeProto.FIELDS = _spec({
    1: ("name", _STR, None), 21: ("ref_attr_name", _STR, None), 13: ("doc_string", _STR, None),
    20: ("type", _ENUM, 15), 2: ("f", _FLOAT, None), 3: ("i", _INT, None),
    4: ("s", _BYTES, None), 5: ("t", _MSG, TensorProto), 6: ("g", _MSG, GraphProto),
    22: ("sparse_tensor", _MSG, SparseTensorProto), 14: ("tp", _MSG, TypeProto),
    7: ("floats", _FLOATS, None), 8: ("ints", _INTS, None), 9: ("strings", _BYTES_LIST, None),
    10: ("tensors", _MSGS, TensorProto), 11: ("graphs", _MSGS, GraphProto),
    23: ("sparse_tensors", _MSGS, SparseTensorProto), 15: ("type_protos", _MSGS, TypeProto)})


class ModelProto(Message):
    __slots__ = ()
    FIELDS = _spec({1: ("ir_version", _INT, None), 8: ("opset_import", _MSGS, OperatorSetIdProto),
              2: ("producer_name", _STR, None), 3: ("producer_version", _STR, None),
              4: ("domain", _STR, None), 5: ("model_version", _INT, None),
              6: ("doc_string", _STR, None), 7: ("graph", _MSG, GraphProto),
              14: ("metadata_props", _MSGS, StringStringEntryProto)})


def too_large(where: str, size: int) -> ModelError:
    """The error for a model file of `size` bytes, past `MESSAGE_LIMIT`."""
    return _Source(b"", where, "").too_large(size, "the file")


def read_model(data: bytes, where: str, base_dir: str = "") -> ModelProto:
    """`data` as a `ModelProto`: its top level decoded, which finds any truncation (every message
    inside is a span of it); `where` names the model in errors, `base_dir` is where its external
    data lives."""
    source = _Source(data, where, base_dir)
    if len(data) > MESSAGE_LIMIT:
        raise source.too_large(len(data), "the model")
    model = ModelProto(source, 0, len(data))
    model._decode()
    return model


def read_file(path: str) -> ModelProto:
    """The model in the file at `path` (its external data read relative to its directory)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MESSAGE_LIMIT:  # (refused unread)
            raise too_large(path, size)
        data = f.read()
    return read_model(data, path, os.path.dirname(os.path.abspath(path)))
