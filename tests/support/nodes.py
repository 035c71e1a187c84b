"""One-node ONNX models, run by cyloop and an oracle (onnxruntime, or onnx.reference where
onnxruntime lacks the op or the type), for the kernel tests."""

import copy
import warnings

import numpy as np
import onnxruntime as ort
from onnx import helper
from onnx.reference import ReferenceEvaluator

import cyloop

__all__ = ["assert_native_matches", "one_node", "oracle"]


def one_node(op, opset, attrs, inputs, n_outputs=1, domain=""):
    """A model of one `op` node at `opset` (of `domain`; the default domain at 18 beside a
    non-default one) on `inputs` (None: an omitted optional input), and its feeds. The inputs are
    graph inputs, so that the kernel reads them as a run's values, not as constants."""
    names = ["" if v is None else f"in{k}" for k, v in enumerate(inputs)]
    while names and not names[-1]:
        names.pop()
    outputs = [f"out{k}" for k in range(n_outputs)]
    feeds = {n: np.asarray(v) for n, v in zip(names, inputs) if n}
    node = helper.make_node(op, names, outputs, domain=domain or None, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in feeds.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs])
    opsets = [helper.make_opsetid("", opset if not domain else 18)]
    if domain:
        opsets.append(helper.make_opsetid(domain, opset))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10 if opset >= 21 and not domain else 8
    return model, feeds


def oracle(model, feeds, reference=False):
    """onnxruntime's results (`reference`: onnx.reference's), or the exception it raised."""
    try:
        if reference:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # numpy's warnings inside onnx.reference
                return ReferenceEvaluator(model).run(None, feeds)
        options = ort.SessionOptions()
        options.log_severity_level = 3  # (no warnings of old opsets: errors only)
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        return session.run(None, feeds)
    except Exception as error:  # noqa: BLE001 - each oracle raises its own types
        return error


def assert_native_matches(model, feeds, reference=False, rtol=1e-6, atol=0.0, driver=None,
                          oracle_opset=None, oracle_model=None):
    """cyloop runs `model` with its own kernels (no fallback warning at load) and its results
    have the oracle's types, shapes and values; where the oracle refuses the model, cyloop's run
    fails too. `driver`: the one to run (default: the default one). `oracle_opset`: the oracle
    runs the model at this default-domain opset instead (for an op version whose change is a
    type neither oracle has). `oracle_model`: a (model, feeds) the oracle runs instead, one
    computing the same by other means (an old op version neither oracle has, as the newer one
    that replaced its attributes by inputs). Returns the oracle's results (or its exception)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*onnx.reference's kernels")
        loaded = cyloop.load(model.SerializeToString(), driver=driver)
    if oracle_opset is not None:
        model = copy.deepcopy(model)
        (default,) = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
        default.version = oracle_opset
    expected = oracle(*(oracle_model or (model, feeds)), reference)
    if isinstance(expected, Exception):
        try:
            loaded.run(feeds)
        except cyloop.CyloopError:
            return expected
        raise AssertionError(f"the oracle refuses the model ({expected}), cyloop runs it")
    got = list(loaded.run(feeds).values())
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert g.dtype == e.dtype and g.shape == e.shape, (k, g.dtype, e.dtype, g.shape, e.shape)
        if e.dtype.kind in "iubO":  # (O: strings)
            np.testing.assert_array_equal(g, e, err_msg=f"output {k}")
        elif e.dtype.kind == "c":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {k}")
        else:  # (floats, and ml_dtypes' narrow floats, numpy kind "V")
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(e, np.float64),
                                       rtol=rtol, atol=atol, err_msg=f"output {k}")
    return expected
