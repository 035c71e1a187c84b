"""The Cython runner's scalar path: a binary ufunc step given two 0-d operands of one type runs as
the numpy scalar's operator. It must compute exactly what the ufunc computes (the pure-Python
driver, which always calls the ufunc, is the oracle), fall back wherever it would not, and keep
numpy's floating-point error handling."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cyloop
from cyloop.engine.compile import compile_graph, program
from cyloop.engine.settings import Settings
from cyloop.ir import CarriedInput, ConcatOutput, GraphBuilder, InvariantInput, LastOutput

from ..support.drivers import run_both

ARITHMETIC = ["Add", "Sub", "Mul", "Div"]
COMPARISONS = ["Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"]


def _loop(op, dtype, k_dtype=None, n=5, domain=""):
    """acc_next = op(acc, k) carried (or, for a comparison, acc_next = acc + k and op(acc, k)
    emitted each step), k a 0-d body constant; every acc_next emitted too. `domain`: op's."""
    k_dtype = k_dtype or dtype
    body = GraphBuilder("body")
    body.input("acc", dtype, ())
    body.input("k", k_dtype, ())
    outputs = [LastOutput("acc_next"), ConcatOutput("acc_next", new_axis=True)]
    if op in COMPARISONS:
        body.node("Add", "acc", "k", outputs=["acc_next"])
        body.node(op, "acc", "k", outputs=["flag"])
        outputs.append(ConcatOutput("flag", new_axis=True))
    else:
        body.node(op, "acc", "k", outputs=["acc_next"], domain=domain)
    body.output(*(out.result for out in outputs))
    g = GraphBuilder("outer")
    g.input("acc0", dtype, ())
    g.input("k0", k_dtype, ())
    names = [f"out{j}" for j in range(len(outputs))]
    g.loop(body.build(), inputs=[("acc0", CarriedInput(0, "acc", "acc_next")),
                                 ("k0", InvariantInput(0, "k"))],
           outputs=outputs, trip_count=n, name="loop", output_names=names)
    g.output(*names)
    return g.build()


def _scalar_steps(model):
    (plan,) = model.plan().loops
    return plan.scalar


FLOATS = [np.float16, np.float32, np.float64]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), op=st.sampled_from(ARITHMETIC + COMPARISONS),
       dtype=st.sampled_from(FLOATS))
def test_float_operators_agree_with_the_ufunc(data, op, dtype):
    value = hnp.from_dtype(np.dtype(dtype), allow_nan=True, allow_infinity=True)
    feeds = {"acc0": np.asarray(data.draw(value), dtype), "k0": np.asarray(data.draw(value), dtype)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow / invalid, in both drivers
        out = run_both(_loop(op, dtype), feeds)
    assert all(isinstance(v, np.ndarray) for v in out.values())


def test_float_steps_take_the_scalar_path_and_allocate_nothing():
    model = cyloop.Model(_loop("Add", np.float32), driver="cython")
    assert _scalar_steps(model) == []  # nothing is listed before a run
    model.run({"acc0": np.zeros((), np.float32), "k0": np.ones((), np.float32)})
    assert len(_scalar_steps(model)) == 1
    (counters,) = model.counters().values()
    assert counters["allocations"] == 1  # the emitted rows only: no back-edge buffers


INTEGERS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_arithmetic_takes_the_scalar_path_and_wraps_silently(op, dtype):
    """Overflow wraps around as the ufunc's does, with no warning (numpy's own integer scalar
    operators would warn, an error under -W error)."""
    info = np.iinfo(dtype)
    feeds = {"acc0": np.asarray(info.max, dtype), "k0": np.asarray(info.max, dtype)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = run_both(_loop(op, dtype), feeds)
    assert out["out0"].dtype == dtype
    model = cyloop.Model(_loop(op, dtype), driver="cython")
    model.run(feeds)
    assert len(_scalar_steps(model)) == 1


@settings(max_examples=80, deadline=None)
@given(data=st.data(), op=st.sampled_from(["Add", "Sub", "Mul"] + COMPARISONS),
       dtype=st.sampled_from(INTEGERS))
def test_integer_operators_agree_with_the_ufunc(data, op, dtype):
    value = hnp.from_dtype(np.dtype(dtype))
    feeds = {"acc0": np.asarray(data.draw(value), dtype), "k0": np.asarray(data.draw(value), dtype)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_both(_loop(op, dtype), feeds)


def test_integer_division_keeps_the_ufunc():
    feeds = {"acc0": np.asarray(100, np.int32), "k0": np.asarray(3, np.int32)}
    run_both(_loop("Div", np.int32), feeds)
    model = cyloop.Model(_loop("Div", np.int32), driver="cython")
    model.run(feeds)
    assert _scalar_steps(model) == []


@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("dtype", [np.int32, np.uint64, np.float64])
def test_comparisons_take_the_scalar_path_on_every_number_type(op, dtype):
    feeds = {"acc0": np.asarray(3, dtype), "k0": np.asarray(1, dtype)}
    run_both(_loop(op, dtype), feeds)
    model = cyloop.Model(_loop(op, dtype), driver="cython")
    model.run(feeds)
    steps = _scalar_steps(model)
    assert any(op in s for s in steps), steps


@pytest.mark.parametrize("op, domain", [("And", ""), ("Or", ""), ("Xor", ""),
                                        ("LogicalAnd", "openvino"), ("LogicalOr", "openvino"),
                                        ("LogicalXor", "openvino")])
@pytest.mark.parametrize("acc, k", [(False, False), (False, True), (True, False),
                                    (True, True)])
def test_logical_operators_take_the_scalar_path_on_bools(op, domain, acc, k):
    feeds = {"acc0": np.asarray(acc), "k0": np.asarray(k)}
    out = run_both(_loop(op, np.bool_, domain=domain), feeds)
    assert out["out1"].dtype == np.bool_
    model = cyloop.Model(_loop(op, np.bool_, domain=domain), driver="cython")
    model.run(feeds)
    steps = _scalar_steps(model)
    assert any(op in s for s in steps), steps


def test_mixed_types_fall_back_to_the_ufunc():
    # Where ONNX would refuse the types, the engine still computes what numpy does, in one way.
    # One iteration: after it the carried value is a float64 like k, and the path applies.
    graph = _loop("Mul", np.float32, k_dtype=np.float64, n=1)
    feeds = {"acc0": np.asarray(1.5, np.float32), "k0": np.asarray(1 / 3, np.float64)}
    out = run_both(graph, feeds)
    assert out["out0"].dtype == np.float64
    model = cyloop.Model(graph, driver="cython")
    model.run(feeds)
    assert _scalar_steps(model) == []


def test_the_scalar_path_honours_numpy_error_state():
    feeds = {"acc0": np.ones((), np.float32), "k0": np.zeros((), np.float32)}
    for driver in ("cython", "python"):
        model = cyloop.Model(_loop("Div", np.float32), driver=driver)
        with np.errstate(divide="raise"), pytest.raises(cyloop.ExecutionError, match="divide"):
            model.run(feeds)


def test_a_constant_only_scalar_steps_read_serves_their_ufunc_fallback_too():
    """A 0-d body constant read only by scalar-capable steps is held as a numpy scalar; where a
    reader's other operand is not 0-d, the ufunc takes it and broadcasts as before."""
    body = GraphBuilder("body")
    body.input("acc", np.float32, ())
    body.input("v", np.float32, (3,))
    k = body.const(np.float32(0.5))
    body.node("Add", "acc", k, outputs=["acc_next"])
    body.node("Mul", "v", k, outputs=["v_next"])
    body.output("acc_next", "v_next")
    g = GraphBuilder("outer")
    g.input("acc0", np.float32, ())
    g.input("v0", np.float32, (3,))
    g.loop(body.build(), inputs=[("acc0", CarriedInput(0, "acc", "acc_next")),
                                 ("v0", CarriedInput(0, "v", "v_next"))],
           outputs=[LastOutput("acc_next"), ConcatOutput("v_next", new_axis=True)],
           trip_count=4, output_names=["acc", "vs"])
    g.output("acc", "vs")
    out = run_both(g.build(), {"acc0": np.zeros((), np.float32),
                               "v0": np.arange(3, dtype=np.float32)})
    np.testing.assert_array_equal(out["acc"], np.float32(2))
    np.testing.assert_array_equal(out["vs"][-1], np.arange(3, dtype=np.float32) / 16)


def test_a_step_whose_operand_type_changes_between_calls_follows_it():
    """The runner remembers the type a step's scalar path last took (a loop sees one type call
    after call); a program called again with another type must read that type afresh: int8 wraps,
    float32 does not, and int8 wraps again. The ufunc, called directly, is the oracle."""
    g = GraphBuilder("add")
    g.input("x", np.int8, ())
    g.input("y", np.int8, ())
    g.output(g.node("Add", "x", "y", outputs=["z"]))
    compiled = compile_graph(g.build(), Settings())
    runner = program(compiled, Settings(driver="cython"))
    calls = [(np.int8(127), np.int8(1)), (np.float32(127.5), np.float32(1)),
             (np.int8(-128), np.int8(-1)), (np.uint64(2**64 - 1), np.uint64(2)),
             (np.float64(0.25), np.float64(0.5))]
    for x, y in calls * 2:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (numpy's integer scalar operators warn on overflow)
            (z,) = runner.run([x, y])
        expected = np.add(x, y)
        assert type(z) is type(expected) and z == expected, (x, y, z)
    assert runner.scalar_steps() == [0]
