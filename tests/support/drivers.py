"""A model run by both drivers, or by both and onnxruntime, for the tests that compare them.
The default driver follows CYLOOP_PURE_PYTHON, so CI runs every test under both drivers; tests
about the Cython planner's own counters ask for the Cython driver by name."""

import numpy as np

import cyloop

__all__ = ["run_both", "run_three_ways"]


def run_both(graph, feeds, **kwargs):
    """Run `graph` on both drivers; assert they agree exactly; return the default driver's
    result."""
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
