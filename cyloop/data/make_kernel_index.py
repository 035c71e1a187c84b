"""Regenerate ``kernel_index.txt``, which module registers each op's kernels, so that the registry
imports only the modules a model's ops need (kernels/registry.py reads it):

    python -m cyloop.data.make_kernel_index

Each kernel module is imported alone in a fresh interpreter, which lists the kernels registered
then and the kernel modules imported with it. A kernel belongs to the module of the smallest such
import that registers it (a module importing another's helpers registers that one's kernels too).
tests/kernels/test_registry.py checks the table against a new one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The packages whose modules register kernels as they import, and the modules that do elsewhere.
PACKAGES = ("cyloop.kernels.onnx", "cyloop.kernels.openvino", "cyloop.kernels.recurrent")
MODULES = ("cyloop.accel.fused",)

_PROBE = """
import importlib, json, sys
from cyloop.kernels import registry
importlib.import_module(sys.argv[1])
print(json.dumps({"kernels": sorted([d, op, e.since] for (d, op), entries in
                                    registry._TABLE.items() for e in entries),
                  "modules": sorted(sys.modules)}))
"""


def kernel_modules() -> list[str]:
    """Every module of `PACKAGES` (their `__init__` excepted) and `MODULES`."""
    import importlib
    import pkgutil

    found = list(MODULES)
    for package in PACKAGES:
        path = importlib.import_module(package).__path__
        found += [f"{package}.{info.name}" for info in pkgutil.iter_modules(path)]
    return sorted(found)


def _registers(module: str) -> tuple[set[tuple], set[str]]:
    """The kernels importing `module` alone registers, and the modules it imports."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, module], capture_output=True,
                          text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"importing {module} alone failed:\n{proc.stderr}")
    found = json.loads(proc.stdout)
    return {tuple(k) for k in found["kernels"]}, set(found["modules"])


def index() -> dict[tuple[str, str], set[str]]:
    """(domain, op type) -> the modules that own its kernels."""
    modules = kernel_modules()
    registers, size = {}, {}
    for module in modules:
        registers[module], imported = _registers(module)
        size[module] = len(imported & set(modules))
    owners: dict[tuple[str, str], set[str]] = {}
    for entry in set().union(*registers.values()):
        owner = min((m for m in modules if entry in registers[m]), key=lambda m: (size[m], m))
        owners.setdefault(entry[:2], set()).add(owner)
    return owners


def table_lines() -> list[str]:
    """The table's lines: ``module domain op op ...`` (domain "-" for ai.onnx), sorted."""
    by_module: dict[tuple[str, str], list[str]] = {}
    for (domain, op_type), owners in index().items():
        for owner in owners:
            by_module.setdefault((owner, domain or "-"), []).append(op_type)
    return [" ".join([module, domain, *sorted(ops)])
            for (module, domain), ops in sorted(by_module.items())]


def main(path=None):
    path = path or os.path.join(HERE, "kernel_index.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("# made by cyloop/data/make_kernel_index.py: module, domain, its kernels' ops\n")
        f.write("\n".join(table_lines()) + "\n")


if __name__ == "__main__":
    main()
