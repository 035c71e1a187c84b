"""One-layer OpenVINO IRs against the CPU plugin: each case is built, saved and answered by
OpenVINO in a child process of its own (OpenVINO in-process can hang numpy's OpenBLAS later),
then run by cyloop and compared (tests/kernels/openvino's ported and more layers)."""

import importlib
import os
import subprocess
import sys

import numpy as np

import cyloop

__all__ = ["check_layer", "const", "opset", "oracle_main", "plugin_answers"]


def opset(version):
    """The openvino.opsetN module."""
    return importlib.import_module(f"openvino.opset{version}")


def const(value, dtype=np.int64):
    """An OpenVINO Constant of `value`."""
    return opset(1).constant(np.array(value, dtype))


def oracle_main(out_dir, cases, skip=()):
    """In the child: build, save and run every case with OpenVINO (the cases in `skip`, which
    the CPU plugin does not answer, are only built and saved)."""
    import openvino as ov

    core = ov.Core()
    for name, (build, feeds) in cases.items():
        params = [opset(1).parameter(list(x.shape), x.dtype, name=f"p{k}")
                  for k, x in enumerate(feeds)]
        model = ov.Model([build(params)], params, name)
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        ov.save_model(model, os.path.join(out_dir, name, "model.xml"), compress_to_fp16=False)
        if name in skip:
            continue
        compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        result = compiled(list(feeds))[compiled.outputs[0]]
        np.savez(os.path.join(out_dir, name, "expected.npz"), expected=result)


def plugin_answers(tmp_path_factory, module: str):
    """A directory of each case's IR and the plugin's answer, made by running `module` (whose
    __main__ calls `oracle_main`) in a child process."""
    out = tmp_path_factory.mktemp(module.rsplit(".", 1)[-1])
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, "-m", module, str(out)], check=True, env=env, timeout=600,
                   cwd=root)
    return out


def check_layer(oracle, name, cases, spec_oracles, atol):
    """cyloop's answer for case `name` against the plugin's, or the spec's where it departs."""
    feeds = cases[name][1]
    model = cyloop.load(oracle / name / "model.xml")
    got = model.run({f"p{k}": x for k, x in enumerate(feeds)})[model.output_names[0]]
    if name in spec_oracles:
        expected = spec_oracles[name](*feeds)
    else:
        expected = np.load(oracle / name / "expected.npz")["expected"]
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=atol)
