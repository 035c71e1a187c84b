"""Models exported by jax2onnx (lax.scan / while_loop / fori_loop / cond, nested), run by cyloop
and checked against JAX itself. Nobody here wrote these graphs: they are what the exporter writes
for ordinary JAX loops (Loop with scan outputs, Loop with a computed condition, If inside a
body)."""


import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax2onnx = pytest.importorskip("jax2onnx")

import cyloop

# (jax2onnx 0.17 reads a dimension with int() of a value that delegates to __trunc__, which
# Python 3.13 deprecates: its warning, not cyloop's)
pytestmark = pytest.mark.filterwarnings(
    "ignore:The delegation of int\\(\\) to __trunc__ is deprecated:DeprecationWarning")

F32 = jnp.float32


def scan_rnn(xs, h0, w):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, (h, jnp.sum(h))
    return jax.lax.scan(step, h0, xs)


def scan_rank3(xs, c0):  # (jax2onnx 0.17 refuses reverse=True: "not supported in IR pipeline")
    def step(c, x):
        c = c * 0.5 + x
        return c, c * c
    return jax.lax.scan(step, c0, xs)


def scan_two_carries(xs, a0, b0):
    def step(carry, x):
        a, b = carry
        return (b, a + x * b), a - b
    return jax.lax.scan(step, (a0, b0), xs)


def scan_length_only(c0):
    def step(c, _):
        return c * 1.5 - 0.25, c
    return jax.lax.scan(step, c0, None, length=6)


def scan_nested(xs, c0):
    def outer(c, row):
        def inner(d, x):
            return d + x * c, d
        d, ds = jax.lax.scan(inner, c, row)
        return d * 0.5, ds
    return jax.lax.scan(outer, c0, xs)


def scan_with_cond(xs, c0):
    def step(c, x):
        c = jax.lax.cond(jnp.sum(x) > 0, lambda v: v + x, lambda v: v * 0.5 - x, c)
        return c, jnp.max(c)
    return jax.lax.scan(step, c0, xs)


def while_data_dependent(x):
    def cond(state):
        i, v = state
        return jnp.logical_and(jnp.sum(jnp.abs(v)) < 100.0, i < 50)

    def body(state):
        i, v = state
        return i + 1, v * 1.7 + 0.3
    return jax.lax.while_loop(cond, body, (jnp.int32(0), x))


def while_data_bitwise_and(x):
    """A condition joined by ``&`` (jax2onnx casts the comparison of the counter to bool
    before the And: an Identity to cyloop) over a sum of the carried state."""
    def cond(state):
        k, acc = state
        return (k < 40) & (acc.sum() < 7.5)

    def body(state):
        k, acc = state
        return k + 1, acc * 0.5 + x
    return jax.lax.while_loop(cond, body, (0, jnp.zeros_like(x)))


def fori_static(x):
    return jax.lax.fori_loop(0, 7, lambda i, v: v * 0.9 + i.astype(F32), x)


def while_counted(n, x):  # fori_loop with a traced bound, spelled as JAX lowers it (jax2onnx 0.17
    # cannot export fori_loop(0, n, ...) with a traced n)
    def body(state):
        i, v = state
        return i + 1, jnp.sin(v) + i.astype(F32) * 0.1
    return jax.lax.while_loop(lambda state: state[0] < n, body, (jnp.int32(0), x))[1]


def fori_nested(x):
    def outer(i, v):
        # (jax2onnx 0.17 cannot export an inner fori_loop body that reads the outer one's values)
        return jax.lax.fori_loop(0, 3, lambda j, u: jnp.cos(u) + j.astype(F32), v) * 0.5 + v
    return jax.lax.fori_loop(0, 4, outer, x)


def fori_buffer(x):
    """A row written into a buffer each step, ``buf.at[k].set(...)`` (jax2onnx: a ScatterND of
    the carried buffer)."""
    def body(k, state):
        acc, buf, x = state  # (x carried: jax2onnx 0.17 cannot export a body reading it)
        acc = acc * 0.5 + x
        return acc, buf.at[k].set(acc), x
    return jax.lax.fori_loop(0, 6, body, (jnp.zeros_like(x), jnp.zeros((8, 3), F32), x))[:2]


def fori_dynamic_update(x):
    """A row written into a buffer each step by ``lax.dynamic_update_slice`` (jax2onnx: a
    ScatterND whose indices it computes from the update's Shape, every step)."""
    def body(k, state):
        acc, buf, x = state
        acc = acc * 0.5 + x
        return acc, jax.lax.dynamic_update_slice(buf, acc[None], (k, 0)), x
    return jax.lax.fori_loop(0, 6, body, (jnp.zeros_like(x), jnp.zeros((8, 3), F32), x))[:2]


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


CASES = {  # name: (function, inputs from a seeded generator)
    "scan-rnn": (scan_rnn, lambda r: [_f32(r, 9, 4), _f32(r, 4), _f32(r, 4, 4) * 0.5]),
    "scan-rank3": (scan_rank3, lambda r: [_f32(r, 7, 2, 3), _f32(r, 2, 3)]),
    "scan-two-carries": (scan_two_carries, lambda r: [_f32(r, 5, 3), _f32(r, 3), _f32(r, 3)]),
    "scan-length-only": (scan_length_only, lambda r: [_f32(r, 2, 2)]),
    "scan-nested": (scan_nested, lambda r: [_f32(r, 4, 5, 3), _f32(r, 3)]),
    "scan-with-cond": (scan_with_cond, lambda r: [_f32(r, 8, 3), _f32(r, 3)]),
    "while-data-dependent": (while_data_dependent, lambda r: [_f32(r, 3) * 0.1]),
    "while-data-bitwise-and": (while_data_bitwise_and, lambda r: [_f32(r, 4) * 0.1 + 1]),
    "fori-static": (fori_static, lambda r: [_f32(r, 2, 3)]),
    "while-counted": (while_counted, lambda r: [np.int32(5), _f32(r, 3)]),
    "fori-nested": (fori_nested, lambda r: [_f32(r, 3)]),
    "fori-buffer": (fori_buffer, lambda r: [_f32(r, 3)]),
    "fori-dynamic-update": (fori_dynamic_update, lambda r: [_f32(r, 3)]),
}


@pytest.mark.parametrize("name", CASES, ids=list(CASES))
def test_jax2onnx_export_runs_like_jax(name, rng):
    function, make_inputs = CASES[name]
    inputs = make_inputs(rng)
    specs = [jax.ShapeDtypeStruct(np.shape(v), np.asarray(v).dtype) for v in inputs]
    onnx_model = jax2onnx.to_onnx(function, specs, model_name=name.replace("-", "_"))
    loop_ops = {node.op_type for node in onnx_model.graph.node} & {"Loop", "Scan"}
    assert loop_ops, "the export has no loop: the test would not test cyloop's loops"

    expected = jax.tree_util.tree_leaves(function(*inputs))
    model = cyloop.load(onnx_model.SerializeToString())
    feeds = {spec.name: np.asarray(value) for spec, value in zip(onnx_model.graph.input, inputs)}
    got = model.run(feeds)
    assert len(got) == len(expected)
    for output, want in zip(onnx_model.graph.output, expected):
        value, want = got[output.name], np.asarray(want)
        assert value.shape == want.shape, output.name
        assert value.dtype == want.dtype, output.name
        np.testing.assert_allclose(value, want, rtol=2e-6, atol=2e-6, err_msg=output.name)
    if name not in ("fori-buffer", "while-data-bitwise-and", "fori-dynamic-update"):
        return
    # What the Cython driver made of the exporter's body, and that it computes the same.
    fast = cyloop.load(onnx_model.SerializeToString(), driver="cython")
    for output, value in zip(onnx_model.graph.output, fast.run(feeds).values()):
        np.testing.assert_array_equal(value, got[output.name], err_msg=output.name)
    (plan,) = fast.plan().loops
    overwritten = [(use.ops, use.calls) for use in plan.overwriting]
    shapes = [w.why for w in plan.hoisted if w.how == "shape" and w.op == "Shape"]
    if name == "fori-buffer":  # (the buffer updated in place from the second step on)
        assert (["ScatterND"], 5) in overwritten, plan
        # Its index arithmetic leaves the body: the buffer's Shape read once a run, from the
        # initial buffer, and that of the index broadcast from k, from its first row.
        assert sorted(shapes) == ["every row", "initial value"], plan
    if name == "while-data-bitwise-and":  # (its Cast of a bool to bool runs no step)
        assert any(f.kind == "Identity" and f.ops == ["Cast"] and f.already == "bool"
                   for f in plan.fused), plan
    if name == "fori-dynamic-update":  # (the update's Shape, of a value made from the carried
        # acc: its index arithmetic leaves the body, the buffer updated in place)
        assert "follows" in shapes, plan
        assert (["ScatterND"], 5) in overwritten, plan
