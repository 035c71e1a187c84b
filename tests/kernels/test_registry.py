"""The registry's index of kernel modules (cyloop/data/kernel_index.txt): it is what the modules
register, and a look-up imports the modules of its op only. Each check that depends on what is
imported runs in a fresh interpreter."""

import json
import subprocess
import sys

import pytest

from cyloop.data import make_kernel_index
from cyloop.kernels import registry


def _fresh(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(proc.stdout)


def test_the_index_is_what_the_modules_register():
    """(Regenerate it with ``python -m cyloop.data.make_kernel_index`` after adding a kernel.)"""
    with open(registry._INDEX_PATH, encoding="utf-8") as f:
        stored = [line.rstrip("\n") for line in f if not line.startswith("#")]
    assert stored == make_kernel_index.table_lines()


def test_every_registered_kernel_is_in_the_index():
    """(In a fresh interpreter: tests register kernels of their own.)"""
    registered = _fresh("""
import json
from cyloop.kernels import registry
print(json.dumps(sorted({(d.domain, d.op_type) for d in registry.registered()})))
""")
    missing = sorted(set(map(tuple, registered)) - set(registry._read_index()))
    assert not missing, f"kernels the index does not list: {missing}"


_LOOK_UP = """
import json, sys
from cyloop.kernels import registry
before = set(sys.modules)
found = registry.lookup({domain!r}, {op_type!r}, {version})
print(json.dumps({{"since": found.since, "factory": found.factory.__qualname__,
                   "modules": sorted(set(sys.modules) - before)}}))
"""


@pytest.mark.parametrize("domain, op_type, version", [
    ("", "Add", 14), ("", "LSTM", 22), ("", "Reshape", 5), ("ai.onnx.ml", "Scaler", 1),
    ("openvino", "MatMul", 1), ("cyloop", "LSTMStep", 1)])
def test_a_look_up_imports_its_ops_modules_and_finds_what_everything_would(domain, op_type,
                                                                            version):
    got = _fresh(_LOOK_UP.format(domain=domain, op_type=op_type, version=version))
    owners = registry._read_index()[(domain, op_type)]
    assert set(owners) <= set(got["modules"])
    other_format = "cyloop.kernels.onnx." if domain == "openvino" else "cyloop.kernels.openvino."
    assert not [m for m in got["modules"] if m.startswith(other_format)]
    everything = registry.lookup(domain, op_type, version)  # (this process has them all)
    registry.registered()
    assert (got["since"], got["factory"]) == (everything.since, everything.factory.__qualname__)


@pytest.mark.parametrize("op_type", ["NoSuchOp", "If"])
def test_an_op_no_module_registers_imports_no_kernel_module(op_type):
    """... and is an UnsupportedOpError naming it (If: the engine runs it, no kernel does)."""
    got = _fresh(f"""
import json, sys
from cyloop.kernels import registry
try:
    registry.lookup("", {op_type!r}, 21)
except Exception as e:
    error = f"{{type(e).__name__}}: {{e}}"
print(json.dumps({{"error": error, "modules": sorted(sys.modules)}}))
""")
    assert got["error"].startswith("UnsupportedOpError:") and op_type in got["error"]
    every = {m for modules in registry._read_index().values() for m in modules}
    assert not every & set(got["modules"])


def test_a_kernel_registered_outside_the_index_is_found():
    """A user's own kernel, in a domain of its own and in ai.onnx beside cyloop's."""
    got = _fresh("""
import json
import numpy as np
from cyloop.kernels import registry

@registry.kernel("Twice", domain="example.custom")
def twice(attrs):
    return lambda x: 2 * x

@registry.kernel("Add", since=1000)
def add_later(attrs):
    return np.add

print(json.dumps([registry.lookup("example.custom", "Twice", 1).factory.__name__,
                  registry.lookup("", "Add", 1000).factory.__name__,
                  registry.lookup("", "Add", 14).factory.__module__]))
""")
    assert got == ["twice", "add_later", registry.lookup("", "Add", 14).factory.__module__]


def test_versions_registered_in_any_order_are_looked_up_by_opset():
    """An op's kernels, registered out of order: each opset finds the highest `since` at or
    below it, and a version registered twice is refused."""
    got = _fresh("""
import json
from cyloop.kernels import registry

for since in (5, 2, 9):
    registry.kernel("Versioned", domain="example.order", since=since)(lambda attrs: since)
try:
    registry.kernel("Versioned", domain="example.order", since=2)(lambda attrs: None)
except RuntimeError as e:
    twice = str(e)
print(json.dumps([[registry.lookup("example.order", "Versioned", v).since for v in (2, 4, 5, 8,
                                                                                   9, 20)],
                  twice]))
""")
    assert got == [[2, 2, 5, 5, 9, 9],
                   "kernel example.order::Versioned since 2 is registered twice"]


def test_a_model_loads_without_the_other_families():
    """Loading and running a model whose ops are all elementwise imports no spatial, ML or
    recurrent kernels."""
    from cyloop.cli import DATA

    got = _fresh(f"""
import json, sys
import numpy as np
import cyloop
model = cyloop.load({DATA + '/loop_sequence.onnx'!r})
print(json.dumps(sorted(m for m in sys.modules if m.startswith("cyloop.kernels."))))
""")
    families = {m for m in got if m.startswith("cyloop.kernels.onnx.")}
    assert "cyloop.kernels.onnx.ml_trees" not in families
    assert "cyloop.kernels.onnx.spatial" not in families
    assert families, "the model's kernels imported no family module"
