"""Split as a measured choice (ops/_shapes.split_kernel): parts as views or contiguous copies,
timed by period in a loop body. Every candidate is checked against np.split and, inside a loop,
against the reference driver; the plan shows the choice."""

import numpy as np
import pytest

import cyloop
from cyloop import kernels
from cyloop.abilities import abilities_of
from cyloop.ir import OPENVINO_DOMAIN, CarriedInput, ConcatOutput, GraphBuilder, Node, NodeRef

CANDIDATES = ["views", "copies"]
OPSETS = {"": 18, OPENVINO_DOMAIN: 1}


def _kernel(op_type, domain="", n_outputs=3, **attrs):
    node = Node(op_type, ["x"], [f"y{k}" for k in range(n_outputs)], attrs, domain)
    return kernels.build(node, OPSETS).fn


@pytest.mark.parametrize("candidate", CANDIDATES)
@pytest.mark.parametrize("shape, axis", [((4, 12), 1), ((2, 3, 12), -1), ((12, 5), 0),
                                         ((1, 12, 3), 1)])
def test_each_candidate_splits_as_numpy_does(rng, candidate, shape, axis):
    x = rng.standard_normal(shape).astype(np.float32)
    length = x.shape[axis]
    sizes = [length // 4, length // 4, length // 2]
    expected_even = np.split(x, 3, axis=axis)
    expected_sized = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    axis_input = np.array(axis, np.int64)
    cases = [(_kernel("Split", axis=axis), (x,), expected_even),
             (_kernel("Split", axis=axis), (x, np.array(sizes, np.int64)), expected_sized),
             (_kernel("Split", OPENVINO_DOMAIN, num_splits=3), (x, axis_input), expected_even),
             (_kernel("VariadicSplit", OPENVINO_DOMAIN), (x, axis_input,
                                                          np.array(sizes[:2] + [-1])),
              expected_sized)]
    for kernel, args, expected in cases:
        abilities_of(kernel).measured.fix(candidate)
        got = kernel(*args)
        assert len(got) == 3
        for part, want in zip(got, expected):
            np.testing.assert_array_equal(part, want)
            if candidate == "copies":
                assert part.flags.c_contiguous
    inner = any(d > 1 for d in x.shape[:axis % x.ndim])
    assert all(np.shares_memory(p, x) != (candidate == "copies" and inner)
               for kernel, args, _ in cases for p in kernel(*args))


def test_parts_that_are_contiguous_views_anyway_are_not_timed(rng):
    kernel = _kernel("Split", axis=0)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    for _ in range(30):
        parts = kernel(x)
        assert all(np.shares_memory(p, x) for p in parts)
    assert not abilities_of(kernel).measured.trials


def _split_loop():
    """A carried [B, 3H] split along axis 1 each iteration; the parts recombined (read by an
    elementwise chain), every state emitted."""
    body = GraphBuilder("split_body")
    s = body.input("s", np.float32)
    a, b, c = body.node("Split", s, outputs=["a", "b", "c"], axis=1)
    mixed = body.node("Mul", body.node("Tanh", a), body.node("Sigmoid", b))
    body.output(body.node("Concat", mixed, body.node("Mul", c, body.const(np.float32(0.9))), a,
                          axis=1, outputs=["s_next"]))
    g = GraphBuilder("split_loop")
    s0 = g.input("s0", np.float32)
    g.loop(body.build(), inputs=[(s0, CarriedInput(0, "s", "s_next"))],
           outputs=[ConcatOutput("s_next", 0)], trip_count=60, output_names=["states"])
    g.output("states")
    return g.build()


@pytest.mark.parametrize("candidate", CANDIDATES + [None])
def test_in_a_loop_body_every_candidate_matches_the_reference_driver(rng, candidate):
    graph = _split_loop()
    feeds = {"s0": rng.standard_normal((8, 3 * 16)).astype(np.float32)}
    expected = cyloop.Model(graph, driver="python").run(feeds)["states"]
    model = cyloop.Model(graph, driver="cython")
    (loop,) = model._compiled.loops
    (split,) = [step.fn for step in loop.body.compiled.steps if step.op_type == "Split"]
    if candidate is not None:
        abilities_of(split).measured.fix(candidate)
    for _ in range(3 if candidate else 10):
        np.testing.assert_allclose(model.run(feeds)["states"], expected, rtol=1e-6, atol=1e-6)
    (plan,) = model.plan().loops
    (choice,) = [c for c in plan.choices if c.nodes == (NodeRef("Split", "", "a"),)]
    if candidate is not None:
        assert choice.fixed == candidate
    else:  # 600 iterations: 2 x 9 rounds (x3 at most) of one iteration each are enough
        (trial,) = abilities_of(split).measured.trials.values()
        assert trial.choice in CANDIDATES
        assert choice.trial("float32[8, 48] along axis 1").chosen == trial.choice


@pytest.mark.parametrize("lengths, built", [([2, 2], False), ([4, 4], False), ([-1, -1], False),
                                            ([-1, 6], True)])
def test_variadic_split_lengths_that_do_not_make_the_axis_are_refused(rng, lengths, built):
    """The lengths must make the axis, one -1 taking what the others leave (a length of 0 at
    least), as the specification has it; OpenVINO refuses such lengths at the model's build,
    but for a -1 left negative (`built`: its part's shape unknown there)."""
    x = rng.standard_normal((2, 5)).astype(np.float32)
    kernel = _kernel("VariadicSplit", OPENVINO_DOMAIN, n_outputs=len(lengths))
    with pytest.raises(ValueError, match=r"VariadicSplit: lengths .* do not make axis 1's 5"):
        kernel(x, np.array(1, np.int64), np.array(lengths, np.int64))
    assert [p.shape[1] for p in kernel(x, np.array(1, np.int64), np.array([2, -1]))] == [2, 3]
    ov_ops = pytest.importorskip("openvino.opset8")
    try:
        ov_ops.variadic_split(ov_ops.parameter([2, 5], np.float32),
                              ov_ops.constant(np.array(1, np.int64)),
                              ov_ops.constant(np.array(lengths, np.int64)))
    except RuntimeError:
        assert not built
    else:
        assert built
