"""What `import cyloop` loads: numpy and the engine, not the frontends, the kernels of a format,
the onnx.reference fallback, the CLI's extras or any peer; they load when first used. (Checked by
the modules loaded, in a fresh interpreter: import time is a benchmark's business.)"""

import os
import subprocess
import sys

import pytest

from cyloop.cli import DATA, EXAMPLES

# Modules `import cyloop` must leave unloaded: by name, or a package with everything under it.
_LATER = ("cyloop.frontends", "cyloop.kernels.onnx", "cyloop.kernels.openvino",
          "cyloop.kernels.recurrent", "cyloop.accel.fused", "cyloop.accel._gate_passes",
          "cyloop.engine.plan", "cyloop.cli", "cyloop.maps", "cyloop.system",
          "cyloop.backend", "statistics",
          "mmap",  # (accel/aligned.py's mappings: for the largest weights only)
          "onnx", "onnxruntime", "openvino",
          "jax", "ml_dtypes", "threadpoolctl", "tqdm", "matplotlib", "dask")

_LOADED = """
import sys
before = set(sys.modules)
import cyloop
print(" ".join(sorted(set(sys.modules) - before)))
if len(sys.argv) > 1:
    import numpy as np
    before = set(sys.modules)
    model = cyloop.load(sys.argv[1])
    if sys.argv[2:] == ["run"]:  # on ones, each symbolic dim 2
        model.run({v.name: np.ones([d if isinstance(d, int) else 2 for d in v.shape], v.dtype)
                   for v in model.graph.inputs})
    print(" ".join(sorted(set(sys.modules) - before)))
"""


def _loaded(*args) -> list[set[str]]:
    proc = subprocess.run([sys.executable, "-c", _LOADED, *args], capture_output=True, text=True,
                          timeout=120, check=True)
    return [set(line.split()) for line in proc.stdout.splitlines()]


def _under(modules: set[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(package + "."))


def test_import_cyloop_loads_the_engine_and_nothing_of_a_format():
    (loaded,) = _loaded()
    assert "cyloop.engine._core" in loaded and "cyloop.model" in loaded
    early = [m for package in _LATER for m in _under(loaded, package)]
    assert not early, f"import cyloop loads {early}"


@pytest.mark.parametrize("example", ["loop_sequence.onnx", "rnn_scan.onnx"])
def test_loading_an_onnx_model_loads_its_frontend_and_kernels_only(example):
    """... and not onnx, nor protobuf: cyloop reads the model itself (frontends/onnx_proto.py)
    and checks its nodes against its own table of their schemas."""
    _, loaded = _loaded(os.path.join(DATA, example), "run")
    assert "cyloop.frontends.onnx" in loaded and "cyloop.frontends.onnx_proto" in loaded
    assert "cyloop.kernels.onnx.elementwise" in loaded
    # ... nothing of the other format's, of onnx's, nor numpy's random generators (the check of
    # the BLAS binding the RNN's products use once made its operands with them), nor ml_dtypes
    # (these models name none of its types)
    other = [m for package in ("cyloop.frontends.openvino", "cyloop.kernels.openvino",
                               "numpy.random", "onnx", "google.protobuf", "ml_dtypes")
             for m in _under(loaded, package)]
    assert not other, f"loading {example} loads {other}"


def test_loading_an_ir_loads_its_frontend_and_kernels():
    _, loaded = _loaded(EXAMPLES[0])  # (an OpenVINO IR)
    assert "cyloop.frontends.openvino" in loaded and "cyloop.kernels.recurrent.cells" in loaded
    assert not _under(loaded, "onnx") and not _under(loaded, "cyloop.frontends.onnx")
    assert not _under(loaded, "cyloop.kernels.onnx") and "ml_dtypes" not in loaded


def test_a_cache_hit_loads_the_kernels_its_ops_use_and_no_frontend(tmp_path):
    """A model whose ops are a Transpose and a Slice, read from the on-disk cache: its kernel
    modules load, not the frontend, nor the narrow types (a Cast's business) nor the maths of
    the gathers, scatters and pads that share the Slice's module."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
         helper.make_node("Slice", ["t", "starts", "ends"], ["y"])], "hit",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("starts", TensorProto.INT64, [1], [1]),
         helper.make_tensor("ends", TensorProto.INT64, [1], [3])])
    path = tmp_path / "hit.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    env = {**os.environ, "CYLOOP_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):  # (the first writes the entry, the second reads it)
        proc = subprocess.run([sys.executable, "-c", _LOADED, str(path), "run"],
                              capture_output=True, text=True, timeout=120, check=True, env=env)
    loaded = set(proc.stdout.splitlines()[1].split())
    assert {"cyloop.cache", "cyloop.kernels.onnx.tensor", "cyloop.kernels.onnx.indexing"} <= loaded
    early = [m for package in ("cyloop.frontends", "cyloop.narrow", "cyloop.kernels._indexing",
                               "cyloop.kernels._math", "onnx")
             for m in _under(loaded, package)]
    assert not early, f"a cache hit on {path.name} loads {early}"


_FUSED = """
import sys
import numpy as np
from cyloop.accel import _distances, fused
print("cyloop.accel._gate_passes" in sys.modules)
stand_in = fused.squared_distances
rows = np.arange(6.0).reshape(3, 2)
print(fused.squared_distance({"keepdims": 0})(rows, rows[:1]).tolist())
print(stand_in is not fused.squared_distances is _distances.squared_distances)
"""


def test_the_fused_kernels_import_their_native_passes_at_their_first_call():
    """accel/fused.py loads with a model's first fused node; the gate passes only when a kernel
    first calls one, and then each pass takes its stand-in's place."""
    proc = subprocess.run([sys.executable, "-c", _FUSED], capture_output=True, text=True,
                          timeout=120, check=True)
    assert proc.stdout.split("\n")[:3] == ["False", "[0.0, 8.0, 32.0]", "True"]


@pytest.mark.parametrize("with_top_k", [False, True], ids=["reductions", "top k"])
def test_the_native_selection_loads_with_a_top_k_only(with_top_k, tmp_path):
    """A model that reduces (ReduceSum, ArgMax) runs without `accel/_selection`, TopK's heap;
    one with a TopK loads it."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=1),
             helper.make_node("ArgMax", ["s"], ["y"], axis=1)]
    if with_top_k:
        nodes.append(helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1))
    graph = helper.make_graph(
        nodes, "reduce",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 40])],
        [helper.make_tensor_value_info(name, TensorProto.INT64, None)
         for name in ["y", "indices"][:1 + with_top_k]],
        [helper.make_tensor("k", TensorProto.INT64, [1], [2])])
    _, loaded = _loaded(_written(tmp_path, graph), "run")
    assert "cyloop.kernels.onnx.reduction" in loaded
    assert ("cyloop.accel._selection" in loaded) == with_top_k


def _written(tmp_path, graph) -> str:
    """The path of an opset-17 model of `graph` written in `tmp_path`."""
    from onnx import helper

    path = tmp_path / f"{graph.name}.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return str(path)


@pytest.mark.parametrize("op_type, loads", [("Add", False), ("Sigmoid", True)])
def test_the_shared_maths_loads_with_a_kernel_that_uses_it(op_type, loads, tmp_path):
    """Elementwise ops that are numpy's ufuncs (Add) run without `kernels/_math`; one whose
    kernel is its maths (Sigmoid) loads it as it is built."""
    from onnx import TensorProto, helper

    inputs = ["x", "x"] if op_type == "Add" else ["x"]
    graph = helper.make_graph(
        [helper.make_node(op_type, inputs, ["y"])], "elementwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    _, loaded = _loaded(_written(tmp_path, graph), "run")
    assert "cyloop.kernels.onnx.elementwise" in loaded
    assert ("cyloop.kernels._math" in loaded) == loads


_FUSED_MATHS = """
import sys
from cyloop.accel import fused
print("cyloop.kernels._math" in sys.modules)
fused.product_plus_tanh({})
print("cyloop.kernels._math" in sys.modules)
fused.lstm_gates({"axis": -1, "blocks": [0, 1, 2, 3]}, 2)
print("cyloop.kernels._math" in sys.modules)
"""


def test_the_fused_kernels_load_the_shared_maths_with_an_lstm_s_gates():
    """accel/fused.py loads without `kernels/_math`, and builds a ProductPlusTanh without it;
    an LSTM's gates, which use it, load it as they are built."""
    proc = subprocess.run([sys.executable, "-c", _FUSED_MATHS], capture_output=True, text=True,
                          timeout=120, check=True)
    assert proc.stdout.split() == ["False", "False", "True"]
