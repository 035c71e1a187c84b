"""cyloop's own reader of ONNX files (frontends/onnx_proto.py), against onnx's protobuf parser
for every field cyloop reads."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from cyloop.frontends import onnx_proto

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


def test_attribute_lists_as_onnx_reads_them():
    node = helper.make_node("Foo", ["x"], ["y"], ints=[-1, 2, 2**40], floats=[0.1, -2.5],
                            strings=["a", "b"], f=0.1, i=-7, s="text")
    mine = onnx_proto.NodeProto.FromString(node.SerializeToString())
    _same(mine, node)
    by_name = {a.name: a for a in mine.attribute}
    assert by_name["ints"].ints.tolist() == [-1, 2, 2**40]
    assert by_name["floats"].floats.tolist() == list(node.attribute[1].floats)
