"""The table of operator schemas the ONNX frontend checks nodes against (data/onnx_schemas.txt),
against the installed onnx's: a newer onnx that changes a schema, or a new native kernel whose
op the table lacks, fails here (regenerate: python -m cyloop.data.make_onnx_schemas)."""

import re

import onnx
import onnx.defs
import pytest

from cyloop.data import make_onnx_schemas
from cyloop.frontends import onnx_schemas


def _version(text):
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_the_table_is_what_onnx_defs_says():
    """The same schemas, for an onnx as new as the one the table was made from; for an older one
    (the oldest the extras allow), the schemas it knows are the table's."""
    with open(onnx_schemas.TABLE, encoding="utf-8") as f:
        header, *table = [line.rstrip("\n") for line in f]
    expected = make_onnx_schemas.table_lines()
    if _version(onnx.__version__) >= _version(header.split("from onnx ")[1]):
        assert table == expected, ("data/onnx_schemas.txt differs from the installed onnx's "
                                   "schemas: run python -m cyloop.data.make_onnx_schemas")
    else:
        assert set(expected) <= set(table)


@pytest.mark.parametrize("domain", ["", "ai.onnx.ml"], ids=["ai.onnx", "ai.onnx.ml"])
def test_each_version_finds_the_schema_onnx_defs_finds(domain):
    newest = max(s.since_version for s in onnx.defs.get_all_schemas_with_history()
                 if s.domain == domain) + 1
    ops = sorted(op for d, op in make_onnx_schemas.native_ops() if d == domain)
    assert ops
    for op in ops:
        assert onnx_schemas.in_table(domain, op), op
        for version in range(1, newest + 1):
            try:
                expected = onnx.defs.get_schema(op, version, domain)
            except onnx.defs.SchemaError:
                expected = None
            got = onnx_schemas.get_schema(domain, op, version)
            if expected is None:
                assert got is None, (op, version)
                continue
            assert (got.since_version, got.min_input, got.max_input, got.min_output,
                    got.max_output) == (expected.since_version, expected.min_input,
                                        expected.max_input, expected.min_output,
                                        expected.max_output), (op, version)
            assert got.attributes == {name: (int(a.type), a.required)
                                      for name, a in expected.attributes.items()}, (op, version)
