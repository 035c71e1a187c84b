"""The native paths' fallbacks: each path turned off at import (``CYLOOP_NATIVE_OFF``), as it
turns itself off where what it reads outside numpy's public API differs. cyloop still imports,
says which paths are off and why (`cyloop info --system`), and computes the same values."""

import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from cyloop.accel.native import PATHS
from cyloop.cli import EXAMPLES

# Runs the embedded LSTM TensorIterator and an RNN loop large enough for products on two cores,
# and saves their outputs to the .npz named by argv[1].
_RUN = """
import sys
import numpy as np
import cyloop
from cyloop import _examples

outputs = {}
lstm = cyloop.load(sys.argv[2])
rng = np.random.default_rng(0)
feeds = {v.name: rng.standard_normal(v.shape).astype(v.dtype) for v in lstm.graph.inputs}
outputs.update({"lstm_" + k: v for k, v in lstm.run(feeds).items()})
graph, feeds = _examples.rnn(steps=24, batch=16, features=64, hidden=256)
model = cyloop.Model(graph)
for _ in range(3):  # (the first runs try the measured choices' candidates)
    result = model.run(feeds)
outputs.update({"rnn_" + k: v for k, v in result.items()})
np.savez(sys.argv[1], **outputs)
"""


def _run(tmp_path, off: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CYLOOP_NATIVE_OFF"}
    if off is not None:
        env["CYLOOP_NATIVE_OFF"] = off
    path = tmp_path / f"{off}.npz"
    proc = subprocess.run([sys.executable, "-c", _RUN, str(path), EXAMPLES[0]], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    with np.load(path) as saved:
        return dict(saved)


def _system(off: str | None) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CYLOOP_NATIVE_OFF"}
    if off is not None:
        env["CYLOOP_NATIVE_OFF"] = off
    proc = subprocess.run([sys.executable, "-m", "cyloop.cli", "info", "--system"], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("off", [*PATHS, "all"])
def test_a_path_turned_off_computes_the_same_values(tmp_path, off):
    default, fallback = _run(tmp_path, None), _run(tmp_path, off)
    assert sorted(default) == sorted(fallback)
    for name, value in default.items():
        # (BLAS cuts a product into other sums than numpy's call may: equal within rounding)
        np.testing.assert_allclose(fallback[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
        assert fallback[name].dtype == value.dtype


@pytest.mark.parametrize("off", [*PATHS, "all"])
def test_info_system_says_which_paths_are_off(off):
    code, out, err = _system(off)
    assert code == 0, err
    lines = dict(line.strip().split(": ", 1) for line in out.splitlines() if ": " in line)
    gate = lines["gate passes on numpy's ufunc loops"]
    blas = lines["products through numpy's bundled BLAS"]
    two = lines["products on two cores"]
    assert gate.startswith("off: turned off") == (off in ("ufunc-loops", "all"))
    assert blas.startswith("off: turned off") == (off in ("blas", "all"))
    floats = lines["numpy's warnings off in runs by its context variable"]
    assert floats.startswith("off: turned off") == (off in ("float-state", "all"))
    if off in ("blas", "all"):
        assert two.startswith("off: ")


def test_info_system_names_python_numpy_and_the_cores():
    code, out, err = _system(None)
    assert code == 0, err
    assert f"numpy: {np.__version__} " in out
    assert f"python: {platform.python_implementation()} {platform.python_version()} " in out
    if hasattr(os, "sched_getaffinity"):
        assert f"cores: {len(os.sched_getaffinity(0))} this process may use" in out
    assert "blas: " in out


def test_an_unknown_path_warns_and_turns_nothing_off():
    code, out, err = _system("gate")
    assert code == 0, err
    assert "CYLOOP_NATIVE_OFF: unknown gate" in err
    assert "turned off" not in out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_loop_taken_from_numpy_s_table_must_compute_what_its_ufunc_computes(dtype):
    """The check each loop read from numpy's loop table passes before the gate passes use it:
    the loop computes its own ufunc's values and no other's (np.add's loop is no np.subtract,
    np.exp's no np.tanh), and a type the table lacks finds nothing."""
    from cyloop.accel import _gate_passes

    for name in ("tanh", "multiply", "add", "subtract", "negative", "minimum", "exp",
                 "reciprocal"):
        ufunc = getattr(np, name)
        assert _gate_passes._table_loop_computes(ufunc, ufunc, dtype) is True, name
    assert _gate_passes._table_loop_computes(np.add, np.subtract, dtype) is False
    assert _gate_passes._table_loop_computes(np.exp, np.tanh, dtype) is False
    assert _gate_passes._table_loop_computes(np.tanh, np.tanh, np.bool_) is None


@pytest.mark.parametrize("wrong", ["transposed", "one off", "float32 only"])
def test_a_bound_blas_whose_products_differ_from_matmul_is_refused(wrong, monkeypatch):
    """The check products through numpy's bundled BLAS pass before they are used: a product
    that differs from np.matmul's, in either float type, names that type; one that agrees, or
    that declines (None), passes."""
    from cyloop.accel import _two_core, gemm

    def product(a, b, out, rows):
        right = np.matmul(a, b)
        if wrong == "transposed":
            return np.matmul(a, b.T.copy().reshape(b.shape))
        if wrong == "one off":
            return right + 1
        return right if a.dtype == np.float32 else right * (1 + 1e-12)

    monkeypatch.setattr(_two_core, "multiply", product)
    found = gemm._product_disagrees()
    dtype = "float64" if wrong == "float32 only" else "float32"
    assert found == f"a {dtype} product through numpy's bundled BLAS disagrees with matmul"
    monkeypatch.setattr(_two_core, "multiply", lambda a, b, out, rows: np.matmul(a, b))
    assert gemm._product_disagrees() is None
    monkeypatch.setattr(_two_core, "multiply", lambda a, b, out, rows: None)
    assert gemm._product_disagrees() is None
