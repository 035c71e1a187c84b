"""The OpenVINO layers whose kernels share ONNX's maths (windows, scatters, padding, rounding,
normalizations), on the options the ONNX sweep does not reach: one-layer IRs built with the
openvino API, run by cyloop, against OpenVINO's CPU plugin (f32), or, where the plugin departs
from the op spec, a numpy re-implementation of the spec (SPEC_ORACLES).

OpenVINO builds, saves and runs every case in a child process of its own (as the sweep converts:
OpenVINO in-process can hang numpy's OpenBLAS later):

    python -m tests.kernels.openvino.test_layers_sharing_onnx_maths OUT_DIR

writes OUT_DIR/<case>/model.xml and OUT_DIR/<case>/expected.npz.
"""

import os
import sys

import numpy as np
import pytest

from ...support.openvino_layers import check_layer, const, opset, oracle_main, plugin_answers

RNG = np.random.default_rng(11)
X4 = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
X3 = RNG.standard_normal((2, 4, 7)).astype(np.float32)
W4 = RNG.standard_normal((4, 3, 3, 2)).astype(np.float32)
GW = RNG.standard_normal((3, 2, 1, 3, 3)).astype(np.float32)  # 3 groups of 2 outputs, 1 input
M = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.49999997, 3.7, -3.2],
                  np.float32)
INTS = RNG.integers(-20, 20, (3, 4)).astype(np.int32)
DATA = RNG.standard_normal((3, 4)).astype(np.float32)
DUPLICATES = np.array([[0, 1, 0, 2], [2, 2, 1, 0]], np.int64)  # indices into axis 0 of (3, 4)
UPDATES = RNG.standard_normal((2, 4)).astype(np.float32)
INT_UPDATES = RNG.integers(-9, 9, (2, 4)).astype(np.int32)


def _reverse(data, axes, mode):
    """Reverse-1 (the Python API has no function for it)."""
    from openvino.utils.node_factory import NodeFactory

    return NodeFactory("opset1").create("Reverse", [data.output(0), axes.output(0)],
                                        {"mode": mode})


def _scatter(reduction, use_init, updates):
    def build(p):
        return opset(12).scatter_elements_update(p[0], const(DUPLICATES),
                                                 const(updates, updates.dtype), const(0),
                                                 reduction, use_init)

    return build


def _max_pool(version, strides, dilations, begin, end, kernel, rounding, auto_pad, axis=0,
              index_type="i64", port=1):
    def build(p):
        args = [p[0], strides] + ([dilations] if version > 1 else []) + [begin, end, kernel,
                                                                          rounding, auto_pad]
        if version > 1:
            args += [index_type, axis]
        return opset(version).max_pool(*args).output(port if version > 1 else 0)

    return build


def _avg_pool(version, strides, begin, end, kernel, exclude_pad, rounding, auto_pad,
              dilations=None):
    def build(p):
        if version == 16:
            return opset(16).avg_pool(p[0], strides, begin, end, kernel, exclude_pad, rounding,
                                   auto_pad, dilations)
        return opset(version).avg_pool(p[0], strides, begin, end, kernel, exclude_pad, rounding,
                                    auto_pad)

    return build


# name -> (build(params) -> output, feeds)
CASES = {
    # Windows: explicit, same_upper / same_lower and valid padding; floor, ceil, ceil_torch.
    "Convolution-same-upper": (lambda p: opset(1).convolution(p[0], p[1], [2, 1], [0, 0], [0, 0],
                                                           [1, 2], "same_upper"), [X4, W4]),
    "Convolution-explicit": (lambda p: opset(1).convolution(p[0], p[1], [1, 2], [2, 0], [1, 3],
                                                         [2, 1]), [X4, W4]),
    "GroupConvolution": (lambda p: opset(1).group_convolution(p[0], p[1], [1, 1], [1, 1], [0, 1],
                                                           [1, 1]), [X4, GW]),
    "MaxPool-8-axis0": (_max_pool(8, [2, 2], [1, 1], [1, 0], [1, 1], [3, 2], "floor",
                                  "explicit"), [X4]),
    "MaxPool-8-axis2-i32": (_max_pool(8, [1, 2], [2, 1], [0, 1], [1, 0], [2, 2], "ceil",
                                      "explicit", 2, "i32"), [X4]),
    "MaxPool-8-axis1-same-lower": (_max_pool(8, [2, 2], [1, 1], [0, 0], [0, 0], [2, 3], "floor",
                                             "same_lower", 1), [X4]),
    "MaxPool-8-values-valid-ceil": (_max_pool(8, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2], "ceil",
                                              "valid", port=0), [X4]),
    "MaxPool-14-ceil-torch": (_max_pool(14, [2, 2], [1, 1], [1, 1], [1, 1], [2, 2],
                                        "ceil_torch", "explicit"), [X4]),
    "MaxPool-1": (_max_pool(1, [2, 3], None, [1, 1], [0, 1], [2, 2], "ceil", "explicit"),
                  [X4]),
    "AvgPool-1-exclude-pad": (_avg_pool(1, [2, 2], [1, 1], [1, 0], [3, 3], True, "floor",
                                        "explicit"), [X4]),
    "AvgPool-1-include-pad-ceil": (_avg_pool(1, [2, 2], [1, 1], [1, 0], [3, 3], False, "ceil",
                                             "explicit"), [X4]),
    "AvgPool-1-same-upper": (_avg_pool(1, [2, 2], [0, 0], [0, 0], [2, 3], False, "floor",
                                       "same_upper"), [X4]),
    "AvgPool-16-dilated-ceil-torch": (_avg_pool(16, [2, 2], [1, 1], [1, 1], [2, 2], False,
                                                "ceil_torch", "explicit", [2, 1]), [X4]),
    # Padding: every mode, negative pads cropping after a mirror.
    **{f"Pad-12-{mode}": (lambda p, mode=mode: opset(12).pad(p[0], const([2, -1]),
                                                             const([-1, 3]), mode),
                          [M]) for mode in ("constant", "edge", "reflect", "symmetric")},
    "Pad-12-value": (lambda p: opset(12).pad(p[0], const([1, 0]), const([0, -2]), "constant",
                                          const(7.5, np.float32)), [M]),
    "Pad-1-symmetric": (lambda p: opset(1).pad(p[0], const([1, 2]), const([2, 4]), "symmetric"),
                        [M]),
    # Rounding, and the smaller elementwise layers.
    "Round-half-to-even": (lambda p: opset(5).round(p[0], "half_to_even"), [HALVES]),
    "Round-half-away": (lambda p: opset(5).round(p[0], "half_away_from_zero"), [HALVES]),
    "Round-int": (lambda p: opset(5).round(p[0], "half_away_from_zero"), [INTS]),
    "Sign": (lambda p: opset(1).sign(p[0]), [HALVES]),
    "IsInf-positive": (lambda p: opset(10).is_inf(p[0], {"detect_negative": False}),
                       [np.array([np.inf, -np.inf, 1, np.nan], np.float32)]),
    "IsNaN": (lambda p: opset(10).is_nan(p[0]), [np.array([np.inf, np.nan, 1], np.float32)]),
    "HardSigmoid": (lambda p: opset(1).hard_sigmoid(p[0], const(0.3, np.float32),
                                                    const(0.4, np.float32)),
                    [X3 * 3]),
    "Selu": (lambda p: opset(1).selu(p[0], const([1.5], np.float32), const([1.1], np.float32)),
             [X3]),
    "SoftSign": (lambda p: opset(9).softsign(p[0]), [X3]),
    "Mish": (lambda p: opset(4).mish(p[0]), [X3 * 4]),
    "PReLU-per-channel": (lambda p: opset(1).prelu(p[0], const([0.1, -0.2, 0.3], np.float32)),
                          [X4]),
    "PReLU-broadcast": (lambda p: opset(1).prelu(p[0], const(np.linspace(0, 1, 6), np.float32)),
                        [X4]),
    "BitwiseAnd": (lambda p: opset(13).bitwise_and(p[0], p[1]), [INTS, INTS[:1] * 3]),
    "BitwiseXor-bool": (lambda p: opset(13).bitwise_xor(p[0], p[1]), [INTS > 0, INTS < 5]),
    "BitwiseNot": (lambda p: opset(13).bitwise_not(p[0]), [INTS]),
    # Normalizations.
    "MVN-inside-sqrt": (lambda p: opset(6).mvn(p[0], const([1, 3]), True, 1e-3, "inside_sqrt"),
                        [X4]),
    "MVN-outside-sqrt": (lambda p: opset(6).mvn(p[0], const([-1]), True, 0.5, "outside_sqrt"),
                         [X4]),
    "MVN-mean-only": (lambda p: opset(6).mvn(p[0], const([0, 2]), False, 1e-9, "inside_sqrt"),
                      [X4]),
    "NormalizeL2-max": (lambda p: opset(1).normalize_l2(p[0], const([1]), 2.0, "max"), [X4]),
    "NormalizeL2-add": (lambda p: opset(1).normalize_l2(p[0], const([2, 3]), 1e-3, "add"), [X4]),
    "GroupNormalization": (lambda p: opset(12).group_normalization(
        p[0], const([0.5, 1, 2, -1], np.float32), const([0, 1, 0, 2], np.float32), 2, 1e-4),
        [RNG.standard_normal((2, 4, 3, 2)).astype(np.float32)]),
    "LRN-odd": (lambda p: opset(1).lrn(p[0], const([1]), 0.5, 0.75, 2.0, 3), [X4]),
    "LRN-even-two-axes": (lambda p: opset(1).lrn(p[0], const([2, 3]), 0.3, 0.6, 1.5, 4), [X4]),
    "ReduceL1": (lambda p: opset(4).reduce_l1(p[0], const([1, 2]), False), [X4]),
    "ReduceL2": (lambda p: opset(4).reduce_l2(p[0], const([0]), True), [X4]),
    # Gathers and scatters, with repeated indices where a reduction combines them.
    "GatherElements": (lambda p: opset(6).gather_elements(p[0], const([[2, -1, 0, 1]]), 0), [DATA]),
    # Gather-8: an index outside [-n, n) gives zeros (the plugin's; made positive first, -n-1
    # read row n-1).
    "Gather-8-out-of-range": (lambda p: opset(8).gather(p[0], const([[-4, 0], [3, -1]]), const(0)),
                              [DATA]),
    "Gather-8-batch-out-of-range": (lambda p: opset(8).gather(
        p[0], const([[1, -5], [4, 0], [2, -3]]), const(1), 1), [DATA]),
    "GatherND-5-batch": (lambda p: opset(5).gather_nd(p[0], const([[[1], [0]], [[2], [3]]]), 2),
                         [X4[:, :2, :, :4]]),
    "GatherND-8-batch": (lambda p: opset(8).gather_nd(p[0], const([[[1], [0]], [[2], [3]]]), 2),
                         [X4[:, :2, :, :4]]),
    "ScatterElementsUpdate-3": (lambda p: opset(3).scatter_elements_update(
        p[0], const([[1, 0, 2, 1]]), const(UPDATES[:1], np.float32), const(0)), [DATA]),
    **{f"ScatterElementsUpdate-12-{r}-{init}": (_scatter(r, init, UPDATES), [DATA])
       for r in ("sum", "prod", "min", "max", "mean") for init in (True, False)},
    "ScatterElementsUpdate-12-mean-int": (_scatter("mean", True, INT_UPDATES), [INTS]),
    **{f"ScatterNDUpdate-15-{r}": (lambda p, r=r: opset(15).scatter_nd_update(
        p[0], const([[1], [-1], [1]]), const(DATA[:3] * 2, np.float32), r), [DATA])
       for r in ("none", "sum", "sub", "prod", "min", "max")},
    "OneHot-1-negative": (lambda p: opset(1).one_hot(p[0], const(4), const(2.0, np.float32),
                                                  const(-1.0, np.float32), 1),
                          [np.array([[0, -1, 3], [5, -4, 2]], np.int64)]),
    "OneHot-16-normalize": (lambda p: opset(16).one_hot(p[0], const(4), const(2.0, np.float32),
                                                     const(-1.0, np.float32), -1, "normalize"),
                            [np.array([[0, -1, 3], [5, -4, -5]], np.int64)]),
    # Data movement.
    "Reverse-mask": (lambda p: _reverse(p[0], const([True, False, True, True], np.bool_), "mask"),
                     [X4]),
    "Reverse-index": (lambda p: _reverse(p[0], const([3, 1]), "index"), [X4]),
    "ReverseSequence": (lambda p: opset(1).reverse_sequence(p[0], const([5, 0, 2, 7], np.int32),
                                                         1, 2), [X3]),
    "CumSum-exclusive-reverse": (lambda p: opset(3).cumsum(p[0], const(2), True, True), [X3]),
    "CumSum-int": (lambda p: opset(3).cumsum(p[0], const(-2)), [INTS]),
    "Einsum": (lambda p: opset(7).einsum([p[0], p[1]], "bij,jk->bik"),
               [X3[:, :, :3], RNG.standard_normal((3, 5)).astype(np.float32)]),
    **{f"DepthToSpace-{mode}": (lambda p, mode=mode: opset(1).depth_to_space(p[0], mode, 2),
                                [RNG.standard_normal((2, 8, 3, 2)).astype(np.float32)])
       for mode in ("blocks_first", "depth_first")},
    **{f"SpaceToDepth-{mode}": (lambda p, mode=mode: opset(1).space_to_depth(p[0], mode, 2),
                                [RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)])
       for mode in ("blocks_first", "depth_first")},
    "DepthToSpace-3d": (lambda p: opset(1).depth_to_space(p[0], "depth_first", 2),
                        [RNG.standard_normal((1, 16, 2, 1, 3)).astype(np.float32)]),
    "Eye-batch": (lambda p: opset(9).eye(const(3), const(4), const(-1), "f32", const([2, 1])), []),
    "Eye-i32": (lambda p: opset(9).eye(const(4), const(2), const(1), "i32"), []),
}


def _round_half_away(x):
    """Round-5 half_away_from_zero by its definition, in float64 (exact for float32 input)."""
    wide = x.astype(np.float64)
    return (np.sign(wide) * np.floor(np.abs(wide) + 0.5)).astype(x.dtype)


def _scatter_mean(data, indices, updates):
    """ScatterElementsUpdate-12 mean along axis 0 with use_init_val, an element at a time: each
    touched place the floored mean of its value and its updates (Python integers)."""
    places = {}
    for (i, j), index in np.ndenumerate(indices):
        places.setdefault((int(index), j), [int(data[index, j])]).append(int(updates[i, j]))
    out = data.copy()
    for place, values in places.items():
        out[place] = sum(values) // len(values)
    return out


def _lrn(alpha, beta, bias, size, axes):
    """LRN-1 an element at a time: its window (size - 1) // 2 either side along each axis."""
    def oracle(x):
        wide, out = x.astype(np.float64), np.empty(x.shape)
        half = (size - 1) // 2
        for coordinate in np.ndindex(x.shape):
            window = tuple(slice(max(0, c - half), c + half + 1) if a in axes else c
                           for a, c in enumerate(coordinate))
            total = np.sum(wide[window] ** 2)
            out[coordinate] = wide[coordinate] / (bias + alpha / size ** len(axes) * total) ** beta
        return out.astype(x.dtype)

    return oracle


# Where the CPU plugin departs from the op spec and OpenVINO's reference implementation, numpy
# computes the spec's rule instead:
SPEC_ORACLES = {
    # The plugin rounds 0.49999997 to 1 (it adds a half first).
    "Round-half-away": _round_half_away,
    # The plugin truncates an integer mean toward zero; the spec floors it.
    "ScatterElementsUpdate-12-mean-int": lambda x: _scatter_mean(x, DUPLICATES, INT_UPDATES),
    # The plugin's results fit a bias of 1 for a bias of 1.5.
    "LRN-odd": _lrn(0.5, 0.75, 2.0, 3, [1]),
    "LRN-even-two-axes": _lrn(0.3, 0.6, 1.5, 4, [2, 3]),
}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    return plugin_answers(tmp_path_factory, "tests.kernels.openvino.test_layers_sharing_onnx_maths")


@pytest.mark.parametrize("name", list(CASES))
def test_layer_matches_the_cpu_plugin(name, oracle):
    check_layer(oracle, name, CASES, SPEC_ORACLES, atol=1e-6)


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    oracle_main(sys.argv[1], CASES)
    sys.stdout.flush()
    os._exit(0)  # skip OpenVINO's teardown
