"""The compiler: a graph to a flat schedule of steps over slots, read from kernel traits."""

import numpy as np
import pytest

import cyloop
from cyloop.engine.compile import compile_graph
from cyloop.engine.settings import Settings
from cyloop.ir import MAX_NESTING, CarriedInput, GraphBuilder, LastOutput
from cyloop.ops.registry import kernel

DOMAIN = "test.compile"


@kernel("Rename", domain=DOMAIN, identity=True)
def _rename(attrs):
    return lambda x: x


@kernel("Identity", domain=DOMAIN)
def _copying_identity(attrs):
    """Named Identity but not declared one: it must run as a step (it copies)."""
    return lambda x: np.array(x, copy=True)


def _graph(op_type, domain):
    g = GraphBuilder(opsets={DOMAIN: 1})
    g.input("x", np.float32, (3,))
    g.output(g.node("Neg", g.node(op_type, "x", domain=domain, outputs=["r"]), outputs=["y"]),
             "r")
    return g.build()


@pytest.mark.parametrize("op_type,domain", [("Rename", DOMAIN), ("Identity", ""),
                                            ("Identity", "ai.onnx")])
def test_a_kernel_declared_identity_is_a_new_name_not_a_step(op_type, domain):
    compiled = compile_graph(_graph(op_type, domain), Settings())
    assert [step.op_type for step in compiled.steps] == ["Neg"]
    assert compiled.slot("r") == compiled.slot("x")


def test_an_identity_by_name_only_runs_as_a_step():
    graph = _graph("Identity", DOMAIN)
    compiled = compile_graph(graph, Settings())
    assert [step.op_type for step in compiled.steps] == ["Identity", "Neg"]
    x = np.arange(3, dtype=np.float32)
    out = cyloop.Model(graph).run({"x": x})
    np.testing.assert_array_equal(out["y"], -x)
    assert not np.shares_memory(out["r"], x)


def _nested_loops(depth):
    """`depth` loops, each one iteration carrying v through the next: y = v."""
    g = GraphBuilder()
    g.input("v", np.float64, (2,))
    if depth == 0:
        g.output(g.node("Identity", "v", outputs=["y"]))
        return g.build()
    body = _nested_loops(depth - 1)
    g.loop(body, inputs=[("v", CarriedInput(0, "v", "y"))], outputs=[LastOutput("y")],
           trip_count=1, output_names=["y"])
    g.output("y")
    return g.build()


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_subgraphs_nested_past_the_limit_are_a_model_error_not_a_recursion_error(driver):
    v = np.arange(2.0)
    np.testing.assert_array_equal(
        cyloop.Model(_nested_loops(MAX_NESTING), driver=driver).run({"v": v})["y"], v)
    for depth in (MAX_NESTING + 1, 450):
        with pytest.raises(cyloop.ModelError, match=f"subgraphs nested more than {MAX_NESTING} "
                                                    "deep"):
            cyloop.Model(_nested_loops(depth), driver=driver)
