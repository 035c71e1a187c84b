"""The compiler: a graph to a flat schedule of steps over slots, read from kernel traits."""

import numpy as np
import pytest

import cyloop
from cyloop.abilities import abilities_of
from cyloop.accel.aligned import MAPPED_BYTES, aligned_empty
from cyloop.engine.compile import _constant, compile_graph
from cyloop.engine.settings import Settings
from cyloop.ir import MAX_NESTING, OPENVINO_DOMAIN, CarriedInput, GraphBuilder, LastOutput
from cyloop.kernels.registry import kernel

from ..support import openvino_large

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


def test_an_irs_repeated_layers_share_one_kernel(tmp_path):
    """The IR reader hands equal layers one attrs dict, and the compiler builds their kernel
    once: a large IR keeps one kernel per distinct layer (here three Clamps), and runs as
    before (the numpy re-implementation is the oracle)."""
    blocks = 6
    model = cyloop.load(openvino_large.write(tmp_path / "chain.xml", blocks))
    clamps = [step.fn for step in model._compiled.steps if step.op_type == "Clamp"]
    assert len(clamps) == 3 and all(fn is clamps[0] for fn in clamps)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((openvino_large.STEPS, openvino_large.WIDTH)).astype(np.float32)
    h0 = rng.standard_normal((1, openvino_large.WIDTH)).astype(np.float32)
    got = model.run({"X": x, "H0": h0})
    for name, value in openvino_large.expected(blocks, x, h0).items():
        np.testing.assert_array_equal(got[name], value)


def test_kernels_are_shared_by_attrs_identity_and_never_when_they_measure():
    """Sharing keys on the attrs dict itself (the ONNX reader gives each node its own: nothing
    is shared), and a kernel with a measured choice of its own (MatMul's GEMM orientation)
    is built per node even when the attrs are shared."""
    rng = np.random.default_rng(1)
    g = GraphBuilder(opsets={OPENVINO_DOMAIN: 1})
    h = g.input("x", np.float32, (4, 8))
    for _ in range(2):
        h = g.node("MatMul", h, g.const(rng.standard_normal((8, 8)).astype(np.float32)),
                   domain=OPENVINO_DOMAIN)
    for _ in range(3):
        h = g.node("Clamp", h, domain=OPENVINO_DOMAIN)
    g.output(h)
    graph = g.build()
    matmul_attrs = {"transpose_a": "false", "transpose_b": "false"}
    clamp_attrs = {"min": "-1", "max": "1"}
    for node in graph.nodes:
        node.attrs = matmul_attrs if node.op_type == "MatMul" else clamp_attrs
    graph.nodes[-1].attrs = dict(clamp_attrs)  # equal, not the same dict
    fns = [step.fn for step in compile_graph(graph, Settings()).steps]
    assert fns[0] is not fns[1] and abilities_of(fns[0]).measured is not None
    assert fns[2] is fns[3] and fns[4] is not fns[2]
    x = rng.standard_normal((4, 8)).astype(np.float32)
    for driver in ("cython", "python"):
        got = cyloop.Model(graph, driver=driver).run({"x": x})[graph.outputs[0].name]
        w1, w2 = (graph.initializers[node.inputs[1]] for node in graph.nodes[:2])
        np.testing.assert_allclose(got, np.clip(x @ w1 @ w2, -1, 1), rtol=1e-5, atol=1e-5)


def test_stateful_kernels_are_never_shared():
    """Two RandomUniform layers with one attrs dict each keep their own stream (OpenVINO's
    numbers per layer): shared, the second would draw the numbers after the first's."""
    attrs = {"output_type": np.dtype(np.float32), "global_seed": "7", "op_seed": "11"}
    g = GraphBuilder(opsets={OPENVINO_DOMAIN: 8})
    shape, low, high = (g.const(np.array([2, 3], np.int64)), g.const(np.float32(0)),
                        g.const(np.float32(1)))
    for name in ("a", "b"):
        g.output(g.node("RandomUniform", shape, low, high, domain=OPENVINO_DOMAIN,
                        outputs=[name]))
    graph = g.build()
    for node in graph.nodes:
        node.attrs = attrs
    compiled = compile_graph(graph, Settings())
    assert compiled.steps[0].fn is not compiled.steps[1].fn
    got = cyloop.Model(graph).run({})
    np.testing.assert_array_equal(got["a"], got["b"])


def _read_only(x):
    x.flags.writeable = False
    return x


@pytest.mark.parametrize("make", [
    lambda: np.arange(12.0).reshape(3, 4).copy(),  # owns its data
    lambda: aligned_empty((3, 4), np.float64),  # a block of its own, from numpy
    lambda: aligned_empty((MAPPED_BYTES // 8 + 1,), np.float64),  # a mapping of its own
], ids=["owndata", "aligned", "mapped"])
def test_a_read_only_array_holding_its_own_memory_is_kept_as_the_constant(make):
    """What the frontends read weights into is the model's own: compiling keeps it, no copy
    (and so the aligned weights are what the kernels get)."""
    x = make()
    x[...] = 1
    assert _constant(_read_only(x)) is x


@pytest.mark.parametrize("make", [
    lambda: np.arange(12.0),  # writeable: the caller may change it
    lambda: _read_only(np.arange(12.0)[2:]),  # a view: another array shares its memory
    lambda: _read_only(aligned_empty((12,), np.float64)[2:]),
    lambda: _read_only(aligned_empty((MAPPED_BYTES // 8 + 12,), np.float64)[12:]),
], ids=["writeable", "view", "view-of-aligned", "view-of-mapped"])
def test_any_other_initializer_is_copied_read_only(make):
    x = make()
    constant = _constant(x)
    assert constant is not x and not constant.flags.writeable
    assert not np.shares_memory(constant, x)
    np.testing.assert_array_equal(constant, x)
