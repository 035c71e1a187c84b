"""Regenerate ``onnx_schemas.txt``, the schemas of the ONNX ops cyloop runs natively, every
version, in domains ai.onnx and ai.onnx.ml (frontends/onnx_schemas.py reads it; needs onnx):

    python -m cyloop.data.make_onnx_schemas

tests/frontends/test_onnx_schemas.py compares the table with the installed onnx's schemas.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
DOMAINS = ("", "ai.onnx.ml")


def native_ops() -> set[tuple[str, str]]:
    """(domain, op type) of every op cyloop has a kernel for, in `DOMAINS`."""
    from cyloop import kernels

    return {(d.domain, d.op_type) for d in kernels.registered() if d.domain in DOMAINS}


def schema_line(schema) -> str:
    """One schema as a line of the table (format: frontends/onnx_schemas.py)."""
    attrs = [f"{name}:{int(attr.type)}{'!' if attr.required else ''}"
             for name, attr in sorted(schema.attributes.items())]
    return " ".join([schema.domain or "-", schema.name, str(schema.since_version),
                     str(schema.min_input), str(schema.max_input), str(schema.min_output),
                     str(schema.max_output), *attrs])


def table_lines() -> list[str]:
    import onnx.defs

    ops = native_ops()
    return sorted((schema_line(s) for s in onnx.defs.get_all_schemas_with_history()
                   if (s.domain, s.name) in ops),
                  key=lambda line: (line.split()[0], line.split()[1], int(line.split()[2])))


def main(path=None):
    import onnx

    path = path or os.path.join(HERE, "onnx_schemas.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"# made by cyloop/data/make_onnx_schemas.py from onnx {onnx.__version__}\n")
        f.write("\n".join(table_lines()) + "\n")


if __name__ == "__main__":
    main()
