"""cyloop.scan / while_loop / fori_loop against plain Python loops (and jax.lax where jax is
installed): pytrees, reverse, length without xs, zero length, carry errors."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cyloop


def python_scan(f, init, xs=None, length=None, reverse=False):
    """The documented semantics, literally."""
    n = length if xs is None else len(_first_leaf(xs))
    order = range(n - 1, -1, -1) if reverse else range(n)
    carry, ys = init, [None] * n
    for i in order:
        x = None if xs is None else _index(xs, i)
        carry, ys[i] = f(carry, x)
    return carry, _stack(ys)


def _first_leaf(tree):
    while isinstance(tree, (tuple, list, dict)):
        tree = tree[min(tree)] if isinstance(tree, dict) else tree[0]
    return tree


def _index(tree, i):
    if isinstance(tree, dict):
        return {k: _index(v, i) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_index(v, i) for v in tree)
    return tree[i]


def _stack(items):
    first = items[0]
    if isinstance(first, dict):
        return {k: _stack([it[k] for it in items]) for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(_stack([it[k] for it in items]) for k in range(len(first)))
    return np.stack([np.asarray(it) for it in items])


def assert_tree_equal(a, b):
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b)
        for k in a:
            assert_tree_equal(a[k], b[k])
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_tree_equal(x, y)
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=1e-12)


def rnn_step(carry, x):
    h, count = carry["h"], carry["count"]
    h_next = np.tanh(h @ x["w"] + x["b"])
    return {"h": h_next, "count": count + 1}, (h_next, h_next.sum())


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_scan_with_pytrees(reverse, rng):
    init = {"h": rng.standard_normal(4), "count": np.int64(0)}
    xs = {"w": rng.standard_normal((6, 4, 4)), "b": rng.standard_normal((6, 4))}
    assert_tree_equal(cyloop.scan(rnn_step, init, xs, reverse=reverse),
                      python_scan(rnn_step, init, xs, reverse=reverse))


def test_scan_with_length_and_no_xs():
    def step(c, x):
        assert x is None
        return c * 2, c

    assert_tree_equal(cyloop.scan(step, np.int64(1), length=5),
                      python_scan(step, np.int64(1), length=5))


def test_zero_length_scan(rng):
    xs = rng.standard_normal((0, 3))
    carry, ys = cyloop.scan(lambda c, x: (c + x, (x * 2, c)), np.zeros(3), xs)
    np.testing.assert_array_equal(carry, np.zeros(3))
    assert ys[0].shape == (0, 3) and ys[1].shape == (0, 3)


def test_scan_calls_f_once_per_step(rng):
    calls = []

    def step(c, x):
        calls.append(1)
        return c + x, c

    cyloop.scan(step, np.zeros(2), rng.standard_normal((7, 2)))
    assert len(calls) == 7


def test_scalars_are_promoted():
    carry, ys = cyloop.scan(lambda c, x: (c + x, c), 0.0, np.arange(3.0))
    assert carry == 3.0 and ys.tolist() == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("step,error", [
    (lambda c, x: ({"h": c["h"].astype(np.float32), "n": c["n"]}, x),
     r"carry\['h'\] changed type: float64\[3\] at the start, float32\[3\] after the first step"),
    (lambda c, x: ({"h": c["h"][:2], "n": c["n"]}, x),
     r"carry\['h'\] changed type: float64\[3\] at the start, float64\[2\] after the first step"),
    (lambda c, x: ({"h": c["h"]}, x),
     r"carry changed structure: \{'h': leaf, 'n': leaf\} at the start, \{'h': leaf\} after the"
     + " first step"),
    (lambda c, x: (c, x if x < 1 else np.zeros(4)),
     r"y changed type: float64\[\] at the start, float64\[4\] at step 1"),
    (lambda c, x: (c, (x, x) if x < 2 else x),
     r"y changed structure: tuple\(leaf, leaf\) at the start, leaf at step 2"),
    (lambda c, x: ({"h": c["h"] if x < 1 else c["h"][:1], "n": c["n"]}, x),
     r"carry\['h'\] changed type: float64\[3\] at the start, float64\[1\] at the end of the loop"),
], ids=["dtype", "shape", "structure", "y-shape", "y-structure", "later-carry-shape"])
def test_carry_errors_name_the_component(step, error):
    """The first step is checked at once; a y at its step (it must fit its row); a carry that
    changes later, once, when the loop ends."""
    init = {"h": np.zeros(3), "n": np.int64(0)}
    xs = np.arange(3.0)
    with pytest.raises(cyloop.LoopCarryError, match=error):
        cyloop.scan(step, init, xs)


def test_a_carry_may_be_updated_in_place(rng):
    """The carry is the loop's own writable array (W5's form: write row k of a buffer)."""
    init = (np.zeros((5, 2)), np.int64(0))
    xs = rng.standard_normal((5, 2))

    def step(carry, x):
        buf, k = carry
        buf[k] = x * 2
        return (buf, k + 1), buf[k].sum()

    (buf, k), sums = cyloop.scan(step, init, xs)
    np.testing.assert_array_equal(buf, xs * 2)
    np.testing.assert_array_equal(sums, (xs * 2).sum(axis=1))
    assert int(k) == 5 and not init[0].any()

    def grow(val):
        buf, k = val
        buf[k] = k
        return buf, k + 1

    buf, k = cyloop.while_loop(lambda v: v[1] < 4, grow, (np.zeros(4), 0))
    np.testing.assert_array_equal(buf, np.arange(4.0))
    buf = cyloop.fori_loop(0, 3, lambda i, b: (b.__setitem__(i, i + 1), b)[1], np.zeros(3))
    np.testing.assert_array_equal(buf, [1.0, 2.0, 3.0])


@pytest.mark.parametrize("first", [True, False], ids=["first-call", "later-call"])
def test_a_condition_of_several_values_is_refused(first):
    calls = []

    def cond(v):
        calls.append(1)
        return np.ones(3, bool) if first or len(calls) > 2 else np.True_

    with pytest.raises(TypeError, match=r"cond_fun must return one boolean, got shape \(3,\)"):
        cyloop.while_loop(cond, lambda v: v + 1, np.int64(0))


def test_rows_of_ys_never_alias_the_carry():
    """A step that emits its carry and then updates it in place leaves the emitted rows alone."""
    def step(buf, x):
        buf += x
        return buf, buf

    carry, ys = cyloop.scan(step, np.zeros(2), np.ones((3, 2)))
    np.testing.assert_array_equal(ys, [[1, 1], [2, 2], [3, 3]])
    assert not np.shares_memory(carry, ys)


def test_while_loop_and_fori_loop():
    def cond(v):
        return v[0] < 100

    def body(v):
        return (v[0] * 2 + 1, v[1] + 1)

    val = (np.int64(1), np.int64(0))
    expected = val
    while cond(expected):
        expected = body(expected)
    assert_tree_equal(cyloop.while_loop(cond, body, val), expected)
    assert_tree_equal(cyloop.while_loop(lambda v: False, body, val), val)
    total = np.zeros(2)
    for i in range(3, 9):
        total = total + i
    assert_tree_equal(cyloop.fori_loop(3, 9, lambda i, v: v + i, np.zeros(2)), total)
    assert_tree_equal(cyloop.fori_loop(5, 2, lambda i, v: v + i, np.zeros(2)), np.zeros(2))


def test_caller_arrays_are_not_written(rng):
    init, xs = rng.standard_normal(3), rng.standard_normal((4, 3))
    before = init.copy(), xs.copy()

    def step(c, x):
        with pytest.raises(ValueError, match="read-only"):
            x[0] = 1.0
        if c is not None and np.shares_memory(c, init):
            with pytest.raises(ValueError, match="read-only"):
                c[0] = 1.0
        return c + x, c

    cyloop.scan(step, init, xs)
    np.testing.assert_array_equal(init, before[0])
    np.testing.assert_array_equal(xs, before[1])


OPS = [np.add, np.subtract, np.multiply, np.maximum, np.minimum]


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.integers(0, len(OPS) - 1), min_size=1, max_size=4),
       steps=st.integers(0, 6), reverse=st.booleans(), seed=st.integers(0, 1000))
def test_random_scans_match_plain_loops(ops, steps, reverse, seed):
    rng = np.random.default_rng(seed)

    def step(carry, x):
        a, b = carry
        for k in ops:
            a, b = OPS[k](a, x), OPS[k](b, a)
        return (np.tanh(a), np.tanh(b)), {"a": a, "ab": a * b}

    init = (rng.standard_normal(3), rng.standard_normal(3))
    xs = rng.standard_normal((steps, 3))
    got = cyloop.scan(step, init, xs, reverse=reverse)
    if steps == 0:
        assert_tree_equal(got[0], init)
        assert got[1]["a"].shape == (0, 3)
    else:
        assert_tree_equal(got, python_scan(step, init, xs, reverse=reverse))


JAX_OPS = ["add", "subtract", "multiply", "maximum", "minimum"]


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.integers(0, len(JAX_OPS) - 1), min_size=1, max_size=4),
       steps=st.integers(1, 6), reverse=st.booleans(), seed=st.integers(0, 1000))
def test_random_scans_match_jax(ops, steps, reverse, seed):
    import jax
    import jax.numpy as jnp

    def make_step(xp):
        def step(carry, x):
            a, b = carry["a"], carry["b"]
            for k in ops:
                fn = getattr(xp, JAX_OPS[k])
                a, b = fn(a, x), fn(b, a)
            # clip, not tanh, keeps the carry bounded: XLA's float32 tanh differs from numpy's
            # in the last bits, and a later add that cancels can make that 1e-4 (seen: 0.053389
            # against 0.053373, ops add, add, multiply, multiply)
            return {"a": xp.clip(a, -1, 1), "b": xp.clip(b, -1, 1)}, (a, a * b)

        return step

    rng = np.random.default_rng(seed)
    init = {"a": rng.standard_normal(3).astype(np.float32),
            "b": rng.standard_normal(3).astype(np.float32)}
    xs = rng.standard_normal((steps, 3)).astype(np.float32)
    got = cyloop.scan(make_step(np), init, xs, reverse=reverse)
    expected = jax.lax.scan(make_step(jnp), jax.tree_util.tree_map(jnp.asarray, init),
                            jnp.asarray(xs), reverse=reverse)
    expected = jax.tree_util.tree_map(np.asarray, expected)
    # XLA's results still differ from numpy's in the last bit now and then, and subtract can
    # cancel O(1) values to ~1e-6 (seen: 0.0 vs -1.2e-6; 3.8e-6 at most over 400 random cases
    # with clip): the absolute tolerance is a few float32 ulps of the values.
    np.testing.assert_allclose(got[0]["a"], expected[0]["a"], rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(got[0]["b"], expected[0]["b"], rtol=2e-5, atol=1e-5)
    for g, e in zip(got[1], expected[1]):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-5)


def test_while_and_fori_loops_match_jax():
    import jax

    def body(v):
        return (v[0] * 3 + 1, v[1] + 2)

    init = (np.int32(1), np.int32(0))
    expected = jax.lax.while_loop(lambda v: v[0] < 500, body, init)
    got = cyloop.while_loop(lambda v: v[0] < 500, body, init)
    assert [int(x) for x in got] == [int(x) for x in expected]
    expected = jax.lax.fori_loop(2, 7, lambda i, v: v * 2 + i, np.int32(1))
    assert int(cyloop.fori_loop(2, 7, lambda i, v: v * 2 + i, np.int32(1))) == int(expected)


def _add(c, x):
    return c + x, c


@pytest.mark.parametrize("call, error", [
    (lambda: cyloop.scan(_add, 0.0, np.float64(3)), "every xs leaf must be a numeric array"),
    (lambda: cyloop.scan(_add, 0.0, [[1.0], [2.0, 3.0]]),
     "every xs leaf must be a numeric array"),
    (lambda: cyloop.scan(_add, 0.0, {"a": object()}), "every xs leaf must be a numeric array"),
    (lambda: cyloop.scan(_add, 0.0, ["a", "b"]), "every xs leaf must be a numeric array"),
    (lambda: cyloop.scan(_add, 0.0, np.zeros(3), length=4),
     r"the leading axes of xs and `length` disagree: \[3, 4\]"),
    (lambda: cyloop.scan(_add, 0.0, (np.zeros(3), np.zeros(2))),
     r"the leading axes of xs and `length` disagree: \[2, 3\]"),
    (lambda: cyloop.scan(_add, 0.0), "give xs or length"),
    (lambda: cyloop.scan(_add, 0.0, length=-1), "length must be >= 0, got -1"),
    (lambda: cyloop.scan(_add, 0.0, length=2.0), "length must be an integer, got float 2.0"),
    (lambda: cyloop.scan(None, 0.0, length=2), "f must be callable, got NoneType None"),
    (lambda: cyloop.fori_loop(0.0, 3, lambda i, v: v, 0.0),
     "fori_loop: lower must be an integer, got float 0.0"),
    (lambda: cyloop.fori_loop(0, np.array([3]), lambda i, v: v, 0.0),
     r"fori_loop: upper must be an integer, got an array of shape \[1\] int64"),
    (lambda: cyloop.fori_loop(0, True, lambda i, v: v, 0.0),
     "fori_loop: upper must be an integer, got bool True"),
    (lambda: cyloop.while_loop(lambda v: np.array([True, False, True]), _add, 0.0),
     r"cond_fun must return one boolean, got shape \(3,\)"),
    (lambda: cyloop.while_loop(lambda v: None, lambda v: v, 0.0),
     "cond_fun must return one boolean, got NoneType None"),
    (lambda: cyloop.while_loop(lambda v: 1, lambda v: v, 0.0),
     "cond_fun must return one boolean, got int 1"),
    (lambda: cyloop.while_loop(lambda v: v < 3, lambda v: v + 1, 0.0, max_iterations=-1),
     "while_loop: max_iterations must be None or >= 0, not -1"),
], ids=["0-d-xs", "ragged-xs", "object-xs", "string-xs", "length-disagrees", "xs-disagree",
        "nothing", "negative-length", "float-length", "f-none", "float-bound", "array-bound",
        "bool-bound", "cond-shape", "cond-none", "cond-int", "negative-limit"])
def test_bad_arguments_are_input_errors(call, error):
    with pytest.raises(cyloop.InputError, match=error):
        call()


def test_a_cond_returning_none_later_is_refused_not_taken_as_false():
    with pytest.raises(cyloop.InputError, match="cond_fun must return one boolean, got NoneType"):
        cyloop.while_loop(lambda v: True if v < 3 else None, lambda v: v + 1, np.int64(0))


@pytest.mark.parametrize("result, step", [(lambda c, x: None, 0), (lambda c, x: (c,), 0),
                                          (lambda c, x: (c, x, x), 0),
                                          (lambda c, x: (c + x, c) if x < 2 else None, 2)],
                         ids=["none", "1-tuple", "3-tuple", "later-none"])
def test_f_not_returning_a_pair_is_a_carry_error(result, step):
    with pytest.raises(cyloop.LoopCarryError,
                       match=rf"scan: f must return a \(carry, y\) pair; at step {step}: "):
        cyloop.scan(result, np.float64(0), np.arange(4.0))


def test_a_type_error_inside_f_is_the_users_not_a_pair_error():
    def step(c, x):
        return c + "oops", c

    with pytest.raises(TypeError) as info:
        cyloop.scan(step, np.float64(0), np.arange(4.0))
    assert not isinstance(info.value, cyloop.CyloopError)


class Boom(Exception):
    pass


def _boom_at(step):
    def raise_at(i):
        if i == step:
            raise Boom("the user's own")

    return raise_at


@pytest.mark.parametrize("loop, where", [
    (lambda r: cyloop.scan(lambda c, x: (r(int(x)), c)[1:] * 2, 0.0, np.arange(5.0)), "scan"),
    (lambda r: cyloop.fori_loop(10, 15, lambda i, v: (r(i - 10), v)[1], 0.0), "fori_loop"),
    (lambda r: cyloop.while_loop(lambda v: v < 5, lambda v: (r(int(v)), v + 1)[1],
                                 np.float64(0)), "while_loop"),
])
def test_the_users_exception_passes_through_with_the_step_noted(loop, where):
    with pytest.raises(Boom, match="the user's own") as info:
        loop(_boom_at(3))
    assert type(info.value) is Boom
    assert info.value.__notes__ == [f"(raised at step 3 of cyloop.{where})"]


@pytest.mark.parametrize("raising, step", [("cond_fun", 0), ("cond_fun", 1), ("cond_fun", 2),
                                           ("cond_fun", 5), ("body_fun", 0), ("body_fun", 1),
                                           ("body_fun", 2), ("body_fun", 4)])
def test_a_while_loop_notes_the_step_of_either_function(raising, step):
    """The step a call belongs to: the body calls made before it (the condition after the
    fifth body call, the last max_iterations=5 allows, is step 5)."""
    def fails_at(v):
        if int(v) == step:
            raise Boom("the user's own")

    def cond_fun(v):
        if raising == "cond_fun":
            fails_at(v)
        return v < 100

    def body_fun(v):
        if raising == "body_fun":
            fails_at(v)
        return v + 1

    with pytest.raises(Boom) as info:
        cyloop.while_loop(cond_fun, body_fun, np.int64(0), max_iterations=5)
    assert info.value.__notes__ == [f"(raised at step {step} of cyloop.while_loop)"]


def test_max_iterations_bounds_every_loop():
    with pytest.raises(cyloop.LoopLimitError, match="reached max_iterations=1000 with cond_fun "
                                                    "still true"):
        cyloop.while_loop(lambda v: True, lambda v: v + 1, np.int64(0), max_iterations=1000)
    with pytest.raises(cyloop.LoopLimitError,
                       match=r"fori_loop: 4611686018427387904 steps would pass "
                             r"max_iterations=100000000"):
        cyloop.fori_loop(0, 2**62, lambda i, v: v, 0.0)
    with pytest.raises(cyloop.LoopLimitError, match="scan: 11 steps would pass max_iterations=10"):
        cyloop.scan(_add, 0.0, length=11, max_iterations=10)
    calls = []

    def count(v):
        calls.append(v)
        return v + 1

    # Exactly max_iterations steps are allowed; None is no limit.
    assert cyloop.while_loop(lambda v: v < 10, count, np.int64(0), max_iterations=10) == 10
    assert len(calls) == 10
    assert cyloop.fori_loop(0, 10, lambda i, v: v + 1, np.int64(0), max_iterations=10) == 10
    assert cyloop.while_loop(lambda v: v < 3, count, np.int64(0), max_iterations=None) == 3
    for limit in (1, 2, 3):  # `limit` steps run; the next true condition is one too many
        assert cyloop.while_loop(lambda v, n=limit: v < n, count, np.int64(0),
                                 max_iterations=limit) == limit
        calls.clear()
        with pytest.raises(cyloop.LoopLimitError, match=f"max_iterations={limit} "):
            cyloop.while_loop(lambda v, n=limit: v <= n, count, np.int64(0), max_iterations=limit)
        assert len(calls) == limit
    with pytest.raises(cyloop.LoopLimitError):
        cyloop.while_loop(lambda v: True, count, np.int64(0), max_iterations=0)


def _ys_in_every_form(c, x):
    """y in the forms scan stores: a C-contiguous row, a strided view, a numpy scalar, a Python
    float, an object row, changing form from step to step."""
    k = int(x)
    row = np.arange(6.0).reshape(2, 3) * x
    return c + x, (row if k % 2 else np.asfortranarray(row), row.T[::-1],
                   np.float64(x) if k % 3 else float(x), np.array([k, None], dtype=object))


@pytest.mark.parametrize("reverse", [False, True])
def test_every_form_of_y_is_stored_as_a_loop_stacks_it(reverse):
    """Leaves the step loop copies itself (C-contiguous arrays and numpy scalars of their row's
    type) and those it hands to the checked store (strided views, Python scalars, objects) land
    in their rows alike, in either order."""
    xs = np.arange(7.0)
    carry, ys = cyloop.scan(_ys_in_every_form, 0.0, xs, reverse=reverse)
    expected_carry, expected = python_scan(_ys_in_every_form, 0.0, xs, reverse=reverse)
    assert_tree_equal(carry, expected_carry)
    for got, want in zip(ys[:3], expected[:3]):
        assert_tree_equal(got, want)
    assert ys[3].dtype == object and ys[3].tolist() == expected[3].tolist()


@pytest.mark.parametrize("leaf, bad, types", [
    (1, lambda x: np.float32(x), ("float64[]", "float32[]")),
    (1, lambda x: np.zeros(2), ("float64[]", "float64[2]")),
    (1, lambda x: "four", ("float64[]", "<U4[]")),
    (0, lambda x: np.ones(2), ("float64[3]", "float64[2]")),
    (0, lambda x: np.ones(3, np.int64), ("float64[3]", "int64[3]")),
])
def test_a_y_leaf_that_changes_later_is_refused_at_its_step(leaf, bad, types):
    """A leaf of a flat tuple y that changes type at a later step (one the step loop would
    otherwise copy bytewise) is refused there, naming it."""
    def step(c, x):
        y = [np.ones(3) * x, np.float64(x)]
        if x == 4:
            y[leaf] = bad(x)
        return c, tuple(y)

    error = re.escape(f"y[{leaf}] changed type: {types[0]} at the start, {types[1]} at step 4")
    with pytest.raises(cyloop.LoopCarryError, match=error):
        cyloop.scan(step, 0.0, np.arange(6.0))


def test_a_step_returning_a_list_pair_is_taken_as_a_loop_would():
    """``carry, y = f(carry, x)`` unpacks any pair, not only a tuple: a list works at every
    step, mixed with tuples."""
    def step(c, x):
        pair = (c + x, c * 2)
        return list(pair) if int(x) % 2 else pair

    xs = np.arange(9.0)
    assert_tree_equal(cyloop.scan(step, 1.0, xs), python_scan(step, 1.0, xs))


def test_python_ints_are_handed_on_as_they_are():
    """A Python int (or bool) in init reaches the function as itself (as the plain loop hands
    it: no numpy scalar arithmetic per step); the result holds it as an array of numpy's type
    for it. A Python float becomes a 0-d float64 array, which adding float32 values keeps
    float64 (as a Python float it would turn float32 and change the carry's type)."""
    seen = []

    def body(val):
        buf, k, total = val
        seen.append((type(k), type(total)))
        buf[k] = total
        return buf, k + 1, total + np.float32(0.5)

    buf, k, total = cyloop.while_loop(lambda v: v[1] < 4, body, (np.zeros(4), 0, 1.0))
    assert {kind for kind, _ in seen} == {int}
    assert isinstance(k, np.ndarray) and k.dtype == np.asarray(0).dtype and k == 4
    assert isinstance(total, np.ndarray) and total.dtype == np.float64 and total == 3.0
    np.testing.assert_array_equal(buf, [1.0, 1.5, 2.0, 2.5])
    carry, ys = cyloop.scan(lambda c, x: (c + x, c), 0.0, np.arange(4, dtype=np.float32))
    assert carry.dtype == np.float64 and carry == 6.0 and ys.dtype == np.float64
    assert [type(v) for v in cyloop.fori_loop(0, 3, lambda i, v: (v[0] + i, v[1]),
                                              (0, True))] == [np.ndarray, np.ndarray]
