"""The operator schemas the ONNX frontend checks a node against (input and output counts,
attribute types, required attributes), for the ops cyloop runs natively, read from a table in the
package (``data/onnx_schemas.txt``, made from onnx.defs by ``python -m
cyloop.data.make_onnx_schemas``) instead of from onnx.defs, whose import costs a fresh process
more than reading a model does. An op the table does not hold (one without a native kernel, which
needs onnx to run anyway) is looked up in onnx.defs.

The table has a line per schema version: ``domain op since_version min_input max_input
min_output max_output attribute...``, the domain ``-`` for the default one, each attribute
``name:type`` (the number of its AttributeProto.AttributeType), ``!`` after the required ones.
"""

from __future__ import annotations

import bisect
import os

__all__ = ["Schema", "get_schema"]

TABLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                     "onnx_schemas.txt")


class Schema:
    """What `_check_schema` reads of an onnx.defs OpSchema (a plain class: a dataclass costs a
    fresh process more to define than the look-ups it serves)."""

    __slots__ = ("attributes", "domain", "max_input", "max_output", "min_input", "min_output",
                 "op_type", "since_version")

    def __init__(self, op_type: str, domain: str, since_version: int, min_input: int,
                 max_input: int, min_output: int, max_output: int, attributes: dict):
        self.op_type, self.domain, self.since_version = op_type, domain, since_version
        self.min_input, self.max_input = min_input, max_input
        self.min_output, self.max_output = min_output, max_output
        self.attributes = attributes  # name -> (AttributeType number, required)


_text: str | None = None
_parsed: dict[tuple[str, str], tuple[list[int], list[Schema]] | None] = {}


def _lines_of(domain: str, op_type: str) -> list[str]:
    """The table's lines for one op (contiguous: the table is sorted by domain, then op)."""
    global _text
    if _text is None:
        with open(TABLE, encoding="utf-8") as f:
            _text = "\n" + f.read()
    key = f"\n{domain or '-'} {op_type} "
    start = _text.find(key)
    lines = []
    while start >= 0:
        end = _text.find("\n", start + 1)
        lines.append(_text[start + 1:end if end >= 0 else len(_text)])
        start = end if end >= 0 and _text.startswith(key, end) else -1
    return lines


def _parse(line: str) -> Schema:
    domain, op_type, since, min_in, max_in, min_out, max_out, *attrs = line.split()
    attributes = {}
    for attr in attrs:
        name, kind = attr.split(":")
        attributes[name] = (int(kind.rstrip("!")), kind.endswith("!"))
    return Schema(op_type, "" if domain == "-" else domain, int(since), int(min_in), int(max_in),
                  int(min_out), int(max_out), attributes)


def _schemas(domain: str, op_type: str):
    key = (domain, op_type)
    if key not in _parsed:
        schemas = sorted((_parse(line) for line in _lines_of(domain, op_type)),
                         key=lambda s: s.since_version)
        _parsed[key] = ([s.since_version for s in schemas], schemas) if schemas else None
    return _parsed[key]


def in_table(domain: str, op_type: str) -> bool:
    """Whether the table holds `op_type`'s schemas (every version of them)."""
    return _schemas(domain, op_type) is not None


def get_schema(domain: str, op_type: str, version: int) -> Schema | None:
    """The schema of `op_type` in `domain` at opset `version` (its highest since_version at most
    `version`), as onnx.defs.get_schema finds it; None if the op has none there. KeyError if the
    table does not hold the op."""
    found = _schemas(domain, op_type)
    if found is None:
        raise KeyError(f"{domain or 'ai.onnx'}::{op_type} is not in {TABLE}")
    versions, schemas = found
    index = bisect.bisect_right(versions, version)
    return schemas[index - 1] if index else None
