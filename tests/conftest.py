"""Shared helpers. The default driver follows CYLOOP_PURE_PYTHON, so CI runs every test under both
drivers; tests about the Cython planner's own counters ask for the Cython driver by name."""

import numpy as np
import pytest

import cyloop
from cyloop.abilities import abilities_of


def run_both(graph, feeds, **kwargs):
    """Run `graph` on both drivers; assert they agree exactly; return the default driver's result."""
    results = {}
    for driver in ("cython", "python"):
        model = cyloop.Model(graph, driver=driver, **kwargs)
        results[driver] = model.run({k: v.copy() for k, v in feeds.items()})
    for name, value in results["cython"].items():
        other = results["python"][name]
        assert value.shape == other.shape, name
        assert value.dtype == other.dtype, name
        np.testing.assert_array_equal(value, other, err_msg=name)
    return results[cyloop.Model(graph).settings.driver]


def run_three_ways(onnx_model, feeds):
    """`onnx_model` run by the Cython driver, the reference driver and onnxruntime: (the two
    drivers' models, their results, onnxruntime's), results by output name."""
    import onnxruntime as ort

    fast = cyloop.load(onnx_model, driver="cython")
    reference = cyloop.load(onnx_model, driver="python")
    session = ort.InferenceSession(onnx_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    peer = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    return fast, reference, fast.run(feeds), reference.run(feeds), peer


def measured_steps(model):
    """The measured choices (`Measured`) of the kernels in `model`'s loop bodies, in body order:
    tests force each candidate in turn with ``fix``."""
    return [abilities_of(step.fn).measured for loop in model._compiled.loops
            for step in loop.facts().body.steps if abilities_of(step.fn).measured is not None]


def steps_spy(kernel_name, xs_at):
    """(spy, calls): `spy` calls the cells' steps kernel `kernel_name` (kernels/recurrent/cells.py,
    taking xs as its argument `xs_at` and `staged` last) and records each call in `calls` as
    (steps, staged, taken: not declined); a test puts it in the kernel's place."""
    from cyloop.kernels.recurrent import cells

    real, calls = getattr(cells, kernel_name), []

    def spy(*args):
        done = real(*args)
        calls.append((len(args[xs_at]), args[-1], done is not None))
        return done

    return spy, calls


def at_offset(values, offset):
    """A C-contiguous copy of `values` starting `offset` bytes past a 64-byte boundary."""
    raw = np.empty(values.nbytes + 2 * 64, np.uint8)
    start = -raw.ctypes.data % 64 + offset
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


def address(a):
    return a.__array_interface__["data"][0]


def held_arrays(graph):
    """Every array a graph holds (initializers, node attributes), its subgraphs' included."""
    found = [a for a in graph.initializers.values() if isinstance(a, np.ndarray)]
    for node in graph.nodes:
        found += [a for a in node.attrs.values() if isinstance(a, np.ndarray)]
        for body in node.subgraphs():
            found += held_arrays(body)
    return found


def placements(model):
    """Every `Measured` choice of where a loop result lives (`MeasuredPlacement`), in the
    model's Cython loop drivers, nested loops included."""
    found = []

    def walk(loops):
        for loop in loops:
            found.extend(getattr(loop, "placements", {}).values())
            walk(loop.loops)

    walk(model._compiled.loops)
    return found


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def loop_plan(model):
    """The plan (`engine.plan.LoopPlan`) of `model`'s one loop."""
    (loop,) = model.plan().loops
    return loop


def fused_making(loop, kind, value=None) -> bool:
    """Whether `loop`'s plan has a step of `kind` fused, making `value` first (any if None)."""
    return any(f.kind == kind and (value is None or f.makes[0] == value) for f in loop.fused)
