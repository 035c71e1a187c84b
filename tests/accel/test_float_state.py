"""A run computes the values ONNX defines where numpy would warn (log of 0, 0 / 0, inf - inf)
without a warning, under both drivers and inside loops; an error the caller set to raise still
raises, and the caller's setting is as it was after the run, a failing one too; with the direct
path off, np.errstate does the same."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import cyloop
from cyloop import CarriedInput, LastOutput
from cyloop.accel import float_state


def _edges_model(driver):
    """log(x), x / x and (x * inf) - (x * inf) on x, outside a loop and in a loop body run
    twice."""
    inf = np.float32(np.inf)
    body = cyloop.GraphBuilder("body")
    v = body.input("v", np.float32, (3,))
    scaled = body.node("Mul", v, body.const(inf))
    body.output(body.node("Sub", scaled, scaled, outputs=["v_next"]))
    g = cyloop.GraphBuilder("edges")
    x = g.input("x", np.float32, (3,))
    g.output(g.node("Log", x, outputs=["log"]))
    g.output(g.node("Div", x, x, outputs=["ratio"]))
    g.output(g.loop(body.build(), inputs=[(x, CarriedInput(0, "v", "v_next"))],
                    outputs=[LastOutput("v_next")], trip_count=2, output_names=["nan"]))
    return cyloop.Model(g.build(), driver=driver)


_X = np.array([0.0, -1.0, 2.0], np.float32)


def _expected():
    with np.errstate(all="ignore"):
        nan = _X * np.float32(np.inf) - _X * np.float32(np.inf)
        return {"log": np.log(_X), "ratio": _X / _X,
                "nan": nan * np.float32(np.inf) - nan * np.float32(np.inf)}


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_values_numpy_warns_of_come_without_a_warning(driver):
    model = _edges_model(driver)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = model.run({"x": _X})
    for name, value in _expected().items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_an_error_the_caller_set_to_raise_raises_and_the_setting_holds(driver):
    model = _edges_model(driver)
    with np.errstate(divide="raise"):
        with pytest.raises(cyloop.ExecutionError, match="divide"):
            model.run({"x": _X})
        assert np.geterr()["divide"] == "raise"
        with warnings.catch_warnings():  # (the other errors, numpy's default "warn": ignored)
            warnings.simplefilter("error")
            got = model.run({"x": np.array([1.0, 2.0, np.inf], np.float32)})
        assert np.isnan(got["nan"]).all()
    assert np.geterr()["divide"] == "warn"


def test_a_failing_run_gives_the_setting_back():
    g = cyloop.GraphBuilder("bad")
    x = g.input("x", np.float32, (6,))
    g.output(g.node("Reshape", x, g.const(np.array([4, -1], np.int64)), outputs=["y"]))
    model = cyloop.Model(g.build())
    before = np.geterr()
    with pytest.raises(cyloop.ExecutionError):
        model.run({"x": np.ones(6, np.float32)})
    assert np.geterr() == before


def test_the_path_says_how_it_runs():
    reason = float_state.status()
    assert (reason is None) == (float_state.direct() is not None)


def test_np_errstate_stands_in_where_the_path_is_off(tmp_path):
    script = tmp_path / "off.py"
    script.write_text(textwrap.dedent("""
        import warnings
        import numpy as np
        from cyloop.accel import float_state
        from tests.accel.test_float_state import _X, _edges_model, _expected

        assert float_state.direct() is None
        assert float_state.status() == "turned off (CYLOOP_NATIVE_OFF)"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = _edges_model("cython").run({"x": _X})
        for name, value in _expected().items():
            np.testing.assert_array_equal(got[name], value, err_msg=name)
        print("ok")
    """))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "CYLOOP_NATIVE_OFF": "float-state",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(script)], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
