"""Compress, ReverseSequence, EyeLike, DepthToSpace, SpaceToDepth, LpNormalization, LRN and
GlobalLpPool, run natively, against onnxruntime at each version it implements."""

import numpy as np
import pytest

from tests.support.nodes import assert_native_matches, one_node

RNG = np.random.default_rng(3)
X = RNG.standard_normal((2, 8, 3, 4)).astype(np.float32)
BY_BATCH = RNG.standard_normal((4, 3, 2)).astype(np.float32)  # [time, batch, feature]

CASES = [
    *[("Compress", opset, attrs, [X, condition])
      for opset in (9, 11)
      for attrs in ({}, {"axis": 0}, {"axis": 1}, {"axis": -1})
      for condition in (np.array([1, 0, 1], bool), np.zeros(8, bool), np.ones(200, bool))],
    ("Compress", 11, {"axis": 1}, [X.astype(np.int64), np.array([0, 1, 1, 0, 1], bool)]),
    ("ReverseSequence", 10, {}, [BY_BATCH, np.array([4, 0, 2], np.int64)]),
    ("ReverseSequence", 10, {"batch_axis": 0, "time_axis": 1},
     [BY_BATCH.transpose(1, 0, 2).copy(), np.array([1, 4, 3], np.int64)]),
    ("ReverseSequence", 10, {}, [BY_BATCH.astype(np.int32), np.array([2, 2, 2], np.int64)]),
    *[("EyeLike", opset, attrs, [np.zeros((3, 4), dtype)])
      for opset in (9, 22) for dtype in (np.float32, np.int32)
      for attrs in ({}, {"k": 1}, {"k": -2}, {"k": 5}, {"dtype": 7}, {"dtype": 11})],
    *[("DepthToSpace", opset, attrs, [X])
      for opset, attrs in ((1, {"blocksize": 2}), (11, {"blocksize": 2, "mode": "CRD"}),
                           (13, {"blocksize": 2}), (13, {"blocksize": 2, "mode": "CRD"}))],
    ("DepthToSpace", 13, {"blocksize": 2}, [X.astype(np.float64)]),
    ("SpaceToDepth", 1, {"blocksize": 2}, [X]),
    ("SpaceToDepth", 13, {"blocksize": 2}, [X.astype(np.int64)]),
    # (mode arrived at 28, which onnxruntime has not: onnx.reference, below)
    *[("LpNormalization", opset, {"p": p, "axis": axis}, [X])
      for opset in (1, 22) for p in (1, 2) for axis in (-1, 1, 0)],
    ("LpNormalization", 22, {}, [np.zeros((2, 3), np.float32)]),  # a zero norm: zeros
    ("LpNormalization", 1, {"axis": 0}, [X.astype(np.float64)]),
    # (onnxruntime takes only odd sizes and [N, C, H, W] inputs)
    *[("LRN", opset, {"size": size, "alpha": 0.01, "beta": 0.6, "bias": 2.0}, [X])
      for opset in (1, 13) for size in (1, 3, 5, 11)],
    ("LRN", 13, {"size": 3}, [X]),
    *[("GlobalLpPool", 2, {"p": p}, [x]) for p in (1, 2, 3) for x in (X, X[:, :, 0])],
]


@pytest.mark.parametrize("op, opset, attrs, inputs", CASES,
                         ids=[f"{op}-{opset}-{attrs}-{k}"
                              for k, (op, opset, attrs, _) in enumerate(CASES)])
def test_tensor_ops_match_onnxruntime(op, opset, attrs, inputs):
    model, feeds = one_node(op, opset, attrs, inputs)
    assert_native_matches(model, feeds)


@pytest.mark.parametrize("op", ["SpaceToDepth", "DepthToSpace"])
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_and_depth_modes_at_opset_28_match_onnx_reference(op, mode):
    model, feeds = one_node(op, 28, {"blocksize": 2, "mode": mode}, [X])
    assert_native_matches(model, feeds, reference=True, rtol=0)


def test_reverse_sequence_refuses_a_length_past_the_sequence():
    import cyloop

    model, feeds = one_node("ReverseSequence", 10, {}, [BY_BATCH, np.array([5, 0, 2], np.int64)])
    with pytest.raises(cyloop.ExecutionError, match="sequence_lens"):
        cyloop.load(model).run(feeds)
