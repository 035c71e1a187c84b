"""ONNX tensors as numpy arrays: a `TensorProto` (onnx_proto.py's) read as onnx.numpy_helper's
`to_array` reads it, for every element type cyloop maps, without importing onnx.

The data is in `raw_data` (little-endian, the 4-, 2- and 6-bit types packed), in a file beside the
model (external data: its location, offset and length), or in the typed field the element type is
stored in: `float_data` (float, complex64 as pairs), `double_data` (double, complex128),
`int64_data`, `uint64_data` (uint32, uint64), `string_data`, and `int32_data` for every other type,
one element an entry (float16 and bfloat16 as their 16 bits, the float8 types, bool and the small
integers as their 8; the 4- and 2-bit types a packed byte an entry, as in raw_data).
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

from ..narrow import ElementTypes

__all__ = ["DATA_TYPE_NAMES", "ELEMENT_TYPES", "to_array"]

# TensorProto element types -> numpy; the narrow ones by their ml_dtypes names (imported when a
# model first names one).
ELEMENT_TYPES = ElementTypes({
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
    8: object, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
    14: np.complex64, 15: np.complex128,
}, {
    16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2",
    20: "float8_e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu",
    25: "uint2", 26: "int2", 27: "float6_e2m3fn", 28: "float6_e3m2fn",
})

# TensorProto.DataType's names, by number.
DATA_TYPE_NAMES = (
    "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL",
    "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
    "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4",
    "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2", "FLOAT6E2M3", "FLOAT6E3M2")

# Where each element type's values are when not in raw_data: (field, the type read from it).
_FIELD = {1: ("float_data", np.float32), 11: ("double_data", np.float64),
          14: ("float_data", np.float32), 15: ("double_data", np.float64),
          7: ("int64_data", np.int64), 12: ("uint64_data", np.uint64),
          13: ("uint64_data", np.uint64)}
_SIXTEEN_BITS = {4, 5, 10, 16}            # int32_data: an element's 16 bits an entry
_EIGHT_BITS = {9, 17, 18, 19, 20, 24}     # ... its 8 bits an entry
_SIX_BITS = {27, 28}                      # ... its 6 bits
_PACKED = {21: 2, 22: 2, 23: 2, 25: 4, 26: 4}  # ... a byte of packed elements an entry: how many
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL


def to_array(tensor) -> np.ndarray:
    """`tensor`'s value. ValueError (TypeError for an element type cyloop has no numpy type for,
    OSError for external data it cannot read) if its data does not make its declared type and
    shape. The array may be a read-only view of the model's bytes."""
    if tensor.HasField("segment"):
        raise ValueError("a tensor in segments is not supported")
    number = tensor.data_type
    dtype = ELEMENT_TYPES.get(number)
    if dtype is None:
        shown = DATA_TYPE_NAMES[number] if 0 <= number < len(DATA_TYPE_NAMES) else number
        raise TypeError(f"no numpy type for element type {shown}")
    dims = tuple(int(d) for d in tensor.dims)
    if number == 8:  # STRING
        try:
            strings = [bytes(s).decode() for s in tensor.string_data]
        except UnicodeDecodeError as e:
            raise ValueError(f"a string that is not UTF-8: {e}") from None
        return np.array(strings, dtype=object).reshape(dims)
    if tensor.HasField("data_location") and tensor.data_location == _EXTERNAL:
        raw = read_external(tensor)
    elif tensor.HasField("raw_data"):
        raw = tensor.raw_data
    else:
        return _from_typed_field(tensor, number, dtype, dims)
    if number in _PACKED:
        return _unpack(np.frombuffer(raw, np.uint8), _PACKED[number], dims).view(dtype)
    if number in _SIX_BITS:
        return _unpack6(np.frombuffer(raw, np.uint8), dims).view(dtype)
    values = np.frombuffer(raw, dtype)
    if sys.byteorder == "big":  # pragma: no cover - (raw data is little-endian)
        values = values.byteswap()
    return values.reshape(dims)


def _from_typed_field(tensor, number, dtype, dims) -> np.ndarray:
    if number in _FIELD:
        field, stored = _FIELD[number]
        values = np.asarray(getattr(tensor, field)).astype(stored, copy=False)
        if number in (14, 15):  # complex: (real, imaginary) pairs
            return values.view(dtype).reshape(dims)
        return values.astype(dtype).reshape(dims)
    # Every other type is in int32_data, one entry an element (or a byte of packed elements);
    # an entry past 32 bits is cut to 32, as protobuf reads an int32.
    entries = np.asarray(tensor.int32_data).astype(np.int32).view(np.uint32)
    if number in _SIXTEEN_BITS:
        return entries.astype(np.uint16).reshape(dims).view(dtype)
    if number in _EIGHT_BITS:
        return entries.astype(np.uint8).view(dtype).reshape(dims)
    if number in _SIX_BITS:
        return (entries.astype(np.uint8) & 0x3F).view(dtype).reshape(dims)
    if number in _PACKED:
        return _unpack(entries.astype(np.uint8), _PACKED[number], dims).view(dtype)
    return entries.view(np.int32).astype(dtype).reshape(dims)  # int32, int8, uint8


def _unpack(packed: np.ndarray, per_byte: int, dims) -> np.ndarray:
    """Elements of 8 / `per_byte` bits, packed low bits first, as a uint8 each, shaped `dims`."""
    bits = 8 // per_byte
    mask = np.uint8((1 << bits) - 1)
    values = np.empty((packed.size, per_byte), np.uint8)
    for k in range(per_byte):
        values[:, k] = (packed >> np.uint8(k * bits)) & mask
    count = math.prod(dims)
    if count > values.size:
        raise ValueError(f"{packed.size} bytes of packed {bits}-bit data hold {values.size} "
                         f"elements, fewer than the {count} of shape {list(dims)}")
    return values.reshape(-1)[:count].reshape(dims)


def _unpack6(packed: np.ndarray, dims) -> np.ndarray:
    """6-bit elements, four in three bytes, low bits first, as a uint8 each, shaped `dims`."""
    count = math.prod(dims)
    if packed.size < -(-count * 6 // 8):
        raise ValueError(f"{packed.size} bytes of packed 6-bit data hold fewer than the {count} "
                         f"elements of shape {list(dims)}")
    groups = -(-count // 4)
    padded = np.zeros(groups * 3, np.uint8)
    used = min(packed.size, padded.size)
    padded[:used] = packed[:used]
    b0, b1, b2 = padded[0::3], padded[1::3], padded[2::3]
    values = np.empty((groups, 4), np.uint8)
    values[:, 0] = b0 & 0x3F
    values[:, 1] = (b0 >> 6) | ((b1 & 0x0F) << 2)
    values[:, 2] = (b1 >> 4) | ((b2 & 0x03) << 4)
    values[:, 3] = b2 >> 2
    return values.reshape(-1)[:count].reshape(dims)


def read_external(tensor) -> bytes:
    """The bytes of a tensor whose data is in a file beside the model: its ``location`` (a path
    relative to the model's directory, which it may not leave), from ``offset``, ``length`` of
    them (default: the rest of the file)."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    location = entries.get("location", "")
    try:
        offset = int(entries.get("offset") or 0)
        length = int(entries["length"]) if entries.get("length") else None
    except ValueError as e:
        raise ValueError(f"external data offset or length is not a number: {e}") from None
    if offset < 0 or (length is not None and length < 0):
        raise ValueError(f"external data offset {offset} and length {length}: negative")
    path = _external_path(tensor.base_dir, location)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if offset > size or (length is not None and length > size - offset):
            raise ValueError(f"external data {location!r}: bytes {offset} to "
                             f"{offset + (length or 0)} are past its end ({size} bytes)")
        f.seek(offset)
        return f.read() if length is None else f.read(length)


def _external_path(base_dir: str, location: str) -> str:
    """The file `location` names, refused (as onnx refuses it) unless it is a relative path that
    stays in `base_dir`, symbolic links resolved, and names a regular file."""
    if not location:
        raise ValueError("external data without a location")
    if os.path.isabs(location) or location.startswith(("\\", "/")) or ":" in location[:2]:
        raise ValueError(f"external data location {location!r} must be a path relative to the "
                         "model's directory")
    normal = os.path.normpath(location)
    if normal == os.pardir or normal.startswith(os.pardir + os.sep):
        raise ValueError(f"external data location {location!r} is outside the model's "
                         "directory")
    base = os.path.realpath(base_dir or os.curdir)
    path = os.path.realpath(os.path.join(base, normal))
    if os.path.commonpath([base, path]) != base:
        raise ValueError(f"external data location {location!r} leads outside the model's "
                         "directory")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"external data file {location!r} not found in "
                                f"{base_dir or os.curdir!r}")
    return path
