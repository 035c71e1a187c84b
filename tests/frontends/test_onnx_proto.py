"""cyloop's own reader of ONNX files (frontends/onnx_proto.py) and of their tensors
(onnx_tensor.py), against onnx's: its protobuf parser for every field cyloop reads, and
onnx.numpy_helper.to_array for every element type, in raw_data and in the typed fields, and for
external data."""

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cyloop
from cyloop.frontends import onnx_proto
from cyloop.frontends.onnx_tensor import ELEMENT_TYPES, to_array

from ..support.onnx_models import model, tensor

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "asv_benchmarks" / "corpus").glob("*.onnx")) + sorted(
    (ROOT / "cyloop" / "data").glob("*.onnx"))


def _same(mine, theirs, where="model"):
    """Every field cyloop's message class reads equals onnx's (presence and oneofs included)."""
    for name, kind, _ in mine.FIELDS.values():
        expected, got = getattr(theirs, name), getattr(mine, name)
        here = f"{where}.{name}"
        if isinstance(got, onnx_proto.Message):
            assert mine.HasField(name) == theirs.HasField(name), here
            if theirs.HasField(name):
                _same(got, expected, here)
        elif isinstance(got, (list, tuple)) and got and isinstance(got[0], onnx_proto.Message):
            assert len(got) == len(expected), here
            for k, (a, b) in enumerate(zip(got, expected)):
                _same(a, b, f"{here}[{k}]")
        elif isinstance(got, np.ndarray):
            np.testing.assert_array_equal(got, np.array(list(expected), got.dtype), err_msg=here)
        elif isinstance(got, memoryview):
            assert bytes(got) == expected, here
        else:
            assert list(got) == list(expected) if isinstance(got, (list, tuple)) \
                else got == expected, here
        if not isinstance(got, (list, tuple, np.ndarray)):
            assert mine.HasField(name) == theirs.HasField(name), here
    for group in set(mine.ONEOFS.values()):
        assert mine.WhichOneof(group) == theirs.WhichOneof(group), f"{where}: oneof {group}"


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_every_field_cyloop_reads_is_what_onnx_reads(path):
    data = path.read_bytes()
    _same(onnx_proto.read_model(data, str(path)), onnx.load_from_string(data))


def _values(number, dtype):
    """Values every element type holds exactly (e8m0: powers of two; unsigned: no negatives)."""
    if number == TensorProto.STRING:
        return np.array(["a", "bé", "", "long string"] * 3, dtype=object).reshape(3, 4)
    if number == TensorProto.BOOL:
        return np.array([1, 0, 1, 1, 0, 0, 1], bool)
    if number == TensorProto.FLOAT8E8M0:
        base = [1, 2, 4, 0.5, 8, 1, 2]
    elif dtype.kind == "u" or number in (TensorProto.UINT4, TensorProto.UINT2):
        base = [1, 2, 0, 3, 1, 2, 1]
    else:
        base = [1, 2, -1, 3, -2, 1, 2]
    # 7 elements: an odd count, so the packed 4-, 2- and 6-bit types end on a part-filled byte
    return np.array(base, np.float32).astype(dtype)


TYPES = [(number, dtype, field) for number, dtype in sorted(ELEMENT_TYPES.items())
         for field in ("raw_data", "typed")
         if not (number == TensorProto.STRING and field == "raw_data")]  # (string_data only)


@pytest.mark.parametrize("number,dtype,field", TYPES,
                         ids=[f"{TensorProto.DataType.Name(n)}-{f}" for n, _, f in TYPES])
def test_every_element_type_reads_as_numpy_helper_reads_it(number, dtype, field):
    values = _values(number, dtype)
    if field == "raw_data":
        proto = numpy_helper.from_array(values, "t")
        assert proto.HasField("raw_data")
    else:
        proto = helper.make_tensor("t", number, values.shape, values)
        assert not proto.HasField("raw_data")
    expected = numpy_helper.to_array(proto)
    got = to_array(onnx_proto.TensorProto.FromString(proto.SerializeToString()))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if number == TensorProto.STRING:
        assert got.tolist() == expected.tolist()
    else:
        assert got.tobytes() == expected.tobytes()


def _varint(value):
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _field(number, wire, payload):
    if wire == 2:
        payload = _varint(len(payload)) + payload
    return _varint(number << 3 | wire) + payload


@pytest.mark.parametrize("count", [3, 200], ids=["few", "many"])
@pytest.mark.parametrize("packed", [True, False], ids=["packed", "unpacked"])
@pytest.mark.parametrize("number,field", [(TensorProto.INT64, 7), (TensorProto.INT32, 5),
                                          (TensorProto.UINT64, 11), (TensorProto.FLOAT, 4),
                                          (TensorProto.DOUBLE, 10)],
                         ids=["int64", "int32", "uint64", "float", "double"])
def test_repeated_numbers_packed_or_not(number, field, packed, count):
    """protobuf writes TensorProto's numbers packed and AttributeProto's not; a reader takes
    either (and negative ints as 10-byte varints)."""
    rng = np.random.default_rng(count)
    if number in (TensorProto.FLOAT, TensorProto.DOUBLE):
        values = rng.standard_normal(count).astype(np.float32 if field == 4 else np.float64)
        encode = lambda v: v.tobytes()
        wire = 5 if field == 4 else 1
    else:
        big = 2**62 if number != TensorProto.INT32 else 2**31 - 1
        values = rng.integers(-big if number != TensorProto.UINT64 else 0, big, count)
        values[:3] = [0, 1, 300] if count > 3 else values[:3]
        encode = lambda v: _varint(int(v))
        wire = 0
    elements = b"".join(encode(v) for v in values)
    body = b"".join(_field(1, 0, _varint(d)) for d in [count])
    body += _field(2, 0, _varint(number))
    if packed:
        body += _field(field, 2, elements)
    else:
        body += b"".join(_field(field, wire, encode(v)) for v in values)
    expected = numpy_helper.to_array(TensorProto.FromString(body))
    got = to_array(onnx_proto.TensorProto.FromString(body))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_a_message_pickles_and_copies_as_its_bytes():
    """A graph may keep a message (a sparse tensor or type attribute, which no kernel reads):
    it pickles, and copies, as its own bytes."""
    import copy
    import pickle

    node = helper.make_node("Foo", ["x"], ["y"], ints=[1, 2], name="n",
                            tp=helper.make_tensor_type_proto(1, [2, 3]))
    mine = onnx_proto.NodeProto.FromString(node.SerializeToString(), "m.onnx", "/models")
    for other in (pickle.loads(pickle.dumps(mine)), copy.deepcopy(mine), copy.copy(mine)):
        assert type(other) is onnx_proto.NodeProto
        _same(other, node)
    tp = pickle.loads(pickle.dumps(mine.attribute[1].tp))
    assert tp.tensor_type.shape.dim[1].dim_value == 3


def test_attribute_lists_as_onnx_reads_them():
    node = helper.make_node("Foo", ["x"], ["y"], ints=[-1, 2, 2**40], floats=[0.1, -2.5],
                            strings=["a", "b"], f=0.1, i=-7, s="text")
    mine = onnx_proto.NodeProto.FromString(node.SerializeToString())
    _same(mine, node)
    by_name = {a.name: a for a in mine.attribute}
    assert by_name["ints"].ints.tolist() == [-1, 2, 2**40]
    assert by_name["floats"].floats.tolist() == list(node.attribute[1].floats)


def test_raw_data_is_a_view_of_the_model_bytes():
    """A large tensor is not copied from the model's bytes to read it (the converter then
    copies it once, onto an aligned buffer of its own)."""
    weights = np.arange(1 << 16, dtype=np.float32)
    data = numpy_helper.from_array(weights, "w").SerializeToString()
    got = to_array(onnx_proto.TensorProto.FromString(data))
    np.testing.assert_array_equal(got, weights)
    assert not got.flags.writeable and np.shares_memory(got, np.frombuffer(data, np.uint8))


def test_the_loaded_model_holds_none_of_the_models_bytes(rng):
    """Every array the graph keeps is its own (an empty one too: a view of no bytes would still
    hold them all), so the model's bytes are freed once it is loaded."""
    graph = helper.make_graph(
        [helper.make_node("Concat", ["x", "empty"], ["y"], axis=0),
         helper.make_node("Add", ["y", "w"], ["z"])], "g",
        [tensor("x", np.float32, [300])], [tensor("z", np.float32, [300])],
        [numpy_helper.from_array(np.zeros(0, np.float32), "empty"),
         numpy_helper.from_array(rng.standard_normal(300).astype(np.float32), "w")])
    loaded = cyloop.load(model(graph, 13).SerializeToString())
    for name, array in loaded.graph.initializers.items():
        while array is not None:
            assert not isinstance(array, (memoryview, bytes)), name
            array = getattr(array, "base", None)


def _external(tmp_path, location, offset=None, length=None):
    t = TensorProto()
    t.name, t.data_type = "W", TensorProto.FLOAT
    t.dims[:] = [2, 3]
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = t.external_data.add()
            entry.key, entry.value = key, str(value)
    return t


@pytest.mark.parametrize("offset,length", [(None, None), (8, 24), (8, None)],
                         ids=["whole-file", "offset-and-length", "offset-to-end"])
def test_external_data_reads_as_numpy_helper_reads_it(tmp_path, offset, length):
    values = np.arange(6, dtype=np.float32)
    (tmp_path / "weights.bin").write_bytes(b"\0" * (offset or 0) + values.tobytes())
    proto = _external(tmp_path, "weights.bin", offset, length)
    expected = numpy_helper.to_array(proto, str(tmp_path))
    got = to_array(onnx_proto.TensorProto.FromString(proto.SerializeToString(),
                                                     base_dir=str(tmp_path)))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, values.reshape(2, 3))


def test_a_model_saved_with_external_data_loads(tmp_path, rng):
    w = rng.standard_normal((4, 3)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [tensor("x", np.float32, [2, 4])], [tensor("y", np.float32, [2, 3])],
                              [numpy_helper.from_array(w, "w")])
    proto = model(graph, 13)
    (tmp_path / "sub").mkdir()
    onnx.save_model(proto, tmp_path / "sub" / "m.onnx", save_as_external_data=True,
                    all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)  # (relative to the model's directory, not to the working one)
        got = cyloop.load(Path("sub") / "m.onnx").run({"x": x})["y"]
    finally:
        os.chdir(cwd)
    np.testing.assert_allclose(got, x @ w, rtol=1e-6)


@pytest.mark.parametrize("location", ["/etc/hostname", "../outside.bin", "a/../../outside.bin",
                                      "link.bin", "missing.bin", ""],
                         ids=["absolute", "parent", "parent-inside", "symlink-out", "missing",
                              "empty"])
def test_external_data_outside_the_models_directory_is_refused(tmp_path, location):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (tmp_path / "outside.bin").write_bytes(np.zeros(6, np.float32).tobytes())
    os.symlink(tmp_path / "outside.bin", model_dir / "link.bin")
    proto = _external(tmp_path, location)
    with pytest.raises((ValueError, OSError)):
        to_array(onnx_proto.TensorProto.FromString(proto.SerializeToString(),
                                                   base_dir=str(model_dir)))


def test_a_tensor_in_segments_is_refused():
    proto = helper.make_tensor("t", TensorProto.FLOAT, [2], [1.0, 2.0])
    proto.segment.begin, proto.segment.end = 0, 2
    with pytest.raises(ValueError, match="segments"):
        to_array(onnx_proto.TensorProto.FromString(proto.SerializeToString()))


def _nested_graphs(depth):
    """A model whose graph holds a node whose attribute holds a graph ... `depth` times."""
    graph = b""
    for _ in range(depth):
        attribute = _field(1, 2, b"g") + _field(20, 0, _varint(5)) + _field(6, 2, graph)
        graph = _field(1, 2, _field(4, 2, b"If") + _field(5, 2, attribute))
    return _field(7, 2, graph)


@pytest.mark.parametrize("blob,why", [
    (b"\x08\x07\x12garbage\xff\xff", "runs past"),
    (b"\x08\xff\xff", "varint runs past"),
    (b"\x0f\x00", "wire type 7"),
    (b"\x08" + b"\xff" * 10 + b"\x01", "longer than 10 bytes"),
    (_field(7, 2, _field(1, 2, b"\x22\x03ab")), "runs past"),
    (_field(7, 2, _field(1, 2, _field(4, 2, b"\xff\xfe"))), "not UTF-8"),
    (_nested_graphs(60), "nested more than 100 deep"),
], ids=["length", "varint", "wire-type", "long-varint", "nested-length", "utf8", "depth"])
def test_bytes_that_are_not_a_protobuf_are_a_model_error(blob, why, tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(blob)
    with pytest.raises(cyloop.ModelError, match=f"bad.onnx: not an ONNX model \\(corrupt or "
                                                f"truncated protobuf: .*{why}"):
        cyloop.load(path)


def _relu_model(note: str | None = None) -> onnx.ModelProto:
    """y = Relu(x), its node's doc string `note` if given."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], doc_string=note)]
    graph = helper.make_graph(nodes, "relu", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [5])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# A model whose size is one field: a doc string of 50 MB before the model's own bytes (its
# ModelProto field 6; a field given twice reads as the last, as protobuf reads it), or a node's
# doc string of as many bytes.
_LONG = 50 * 10**6


@pytest.mark.parametrize("where", ["doc_string", "node"])
def test_a_model_whose_size_is_one_long_field_loads_and_runs(tmp_path, where):
    path = tmp_path / "long.onnx"
    with open(path, "wb") as f:
        if where == "doc_string":
            f.write(bytes([6 << 3 | 2]) + _varint(_LONG))
            f.write(b"x" * _LONG)
            f.write(_relu_model().SerializeToString())
        else:
            f.write(_relu_model("x" * _LONG).SerializeToString())
    x = np.array([-2, -0.5, 0, 0.5, 2], np.float32)
    got = cyloop.load(path).run({"x": x})["y"]
    np.testing.assert_array_equal(got, np.maximum(x, 0))


def test_a_file_past_protobufs_limit_is_refused_unread(tmp_path):
    path = tmp_path / "huge.onnx"
    with open(path, "wb") as f:  # (sparse: no disk taken)
        f.write(_relu_model().SerializeToString())
        f.truncate(onnx_proto.MESSAGE_LIMIT + 1)
    with pytest.raises(cyloop.ModelError, match=r"the file is 2147483648 bytes, past protobuf's "
                       r"limit of 2147483647 \(2 GiB\) for one message; save the model with its "
                       r"tensors as external data"):
        cyloop.load(path)


def test_a_field_past_protobufs_limit_is_refused(tmp_path):
    data = _relu_model().SerializeToString() + bytes([6 << 3 | 2]) + \
        _varint(onnx_proto.MESSAGE_LIMIT + 1) + b"x" * 16
    with pytest.raises(cyloop.ModelError, match=r"field 6 at byte \d+ is 2147483648 bytes, past "
                       r"protobuf's limit"):
        cyloop.load(data)
    # (a field within the limit that runs past the end is a truncation, as before)
    data = _relu_model().SerializeToString() + bytes([6 << 3 | 2]) + \
        _varint(onnx_proto.MESSAGE_LIMIT) + b"x" * 16
    with pytest.raises(cyloop.ModelError, match="runs past its message's end"):
        cyloop.load(data)
