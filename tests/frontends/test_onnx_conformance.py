"""ONNX backend node cases with Loop, Scan, If or SequenceMap, and the expanded Range cases,
generated at test time from the installed onnx (no copied data files)."""

import warnings

import numpy as np
import pytest
from onnx.backend.test.case.node import collect_testcases

import cyloop

CONTROL_FLOW = {"Loop", "Scan", "If", "SequenceMap"}


def _selected():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases("")
    return [case for case in cases if case.model is not None and (
        any(node.op_type in CONTROL_FLOW for node in case.model.graph.node)
        or (case.name.startswith("test_range_") and case.name.endswith("_expanded")))]


CASES = _selected()


def _assert_close(got, expected, case, name):
    if isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), name
        for g, e in zip(got, expected):
            _assert_close(g, e, case, name)
    elif expected is None:
        assert got is None, name
    else:
        expected = np.asarray(expected)
        assert got.dtype == expected.dtype, (name, got.dtype, expected.dtype)
        assert got.shape == expected.shape, (name, got.shape, expected.shape)
        np.testing.assert_allclose(got.astype(np.float64) if got.dtype.kind == "V" else got,
                                   expected, rtol=case.rtol, atol=case.atol, err_msg=name)


def test_the_selection_is_not_empty():
    names = {case.name for case in CASES}
    assert {"test_loop11", "test_loop13_seq", "test_scan9_sum", "test_if"} <= names


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_backend_case(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback list; asserted in test_onnx_loading
        model = cyloop.load(case.model)
    for inputs, outputs in case.data_sets:
        got = model.run(dict(zip(model.input_names, inputs)))
        for name, expected in zip(model.output_names, outputs):
            _assert_close(got[name], expected, case, name)
