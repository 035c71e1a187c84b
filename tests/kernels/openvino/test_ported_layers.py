"""The OpenVINO layers whose kernels share ONNX's maths (windows, scatters, padding, rounding,
normalizations), on the options the ONNX sweep does not reach: one-layer IRs built with the
openvino API, run by cyloop, against OpenVINO's CPU plugin (f32), or, where the plugin departs
from the op spec, a numpy re-implementation of the spec (SPEC_ORACLES).

OpenVINO builds, saves and runs every case in a child process of its own (as the sweep converts:
OpenVINO in-process can hang numpy's OpenBLAS later):

    python -m tests.kernels.openvino.test_ported_layers OUT_DIR

writes OUT_DIR/<case>/model.xml and OUT_DIR/<case>/expected.npz.
"""

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

import cyloop

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


def _v(version):
    return importlib.import_module(f"openvino.opset{version}")


def _c(value, dtype=np.int64):
    return _v(1).constant(np.array(value, dtype))


def _reverse(data, axes, mode):
    """Reverse-1 (the Python API has no function for it)."""
    from openvino.utils.node_factory import NodeFactory

    return NodeFactory("opset1").create("Reverse", [data.output(0), axes.output(0)],
                                        {"mode": mode})


def _scatter(reduction, use_init, updates):
    def build(p):
        return _v(12).scatter_elements_update(p[0], _c(DUPLICATES), _c(updates, updates.dtype),
                                              _c(0), reduction, use_init)

    return build


def _max_pool(version, strides, dilations, begin, end, kernel, rounding, auto_pad, axis=0,
              index_type="i64", port=1):
    def build(p):
        args = [p[0], strides] + ([dilations] if version > 1 else []) + [begin, end, kernel,
                                                                          rounding, auto_pad]
        if version > 1:
            args += [index_type, axis]
        return _v(version).max_pool(*args).output(port if version > 1 else 0)

    return build


def _avg_pool(version, strides, begin, end, kernel, exclude_pad, rounding, auto_pad,
              dilations=None):
    def build(p):
        if version == 16:
            return _v(16).avg_pool(p[0], strides, begin, end, kernel, exclude_pad, rounding,
                                   auto_pad, dilations)
        return _v(version).avg_pool(p[0], strides, begin, end, kernel, exclude_pad, rounding,
                                    auto_pad)

    return build


# name -> (build(params) -> output, feeds)
CASES = {
    # Windows: explicit, same_upper / same_lower and valid padding; floor, ceil, ceil_torch.
    "Convolution-same-upper": (lambda p: _v(1).convolution(p[0], p[1], [2, 1], [0, 0], [0, 0],
                                                           [1, 2], "same_upper"), [X4, W4]),
    "Convolution-explicit": (lambda p: _v(1).convolution(p[0], p[1], [1, 2], [2, 0], [1, 3],
                                                         [2, 1]), [X4, W4]),
    "GroupConvolution": (lambda p: _v(1).group_convolution(p[0], p[1], [1, 1], [1, 1], [0, 1],
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
    **{f"Pad-12-{mode}": (lambda p, mode=mode: _v(12).pad(p[0], _c([2, -1]), _c([-1, 3]), mode),
                          [M]) for mode in ("constant", "edge", "reflect", "symmetric")},
    "Pad-12-value": (lambda p: _v(12).pad(p[0], _c([1, 0]), _c([0, -2]), "constant",
                                          _c(7.5, np.float32)), [M]),
    "Pad-1-symmetric": (lambda p: _v(1).pad(p[0], _c([1, 2]), _c([2, 4]), "symmetric"), [M]),
    # Rounding, and the smaller elementwise layers.
    "Round-half-to-even": (lambda p: _v(5).round(p[0], "half_to_even"), [HALVES]),
    "Round-half-away": (lambda p: _v(5).round(p[0], "half_away_from_zero"), [HALVES]),
    "Round-int": (lambda p: _v(5).round(p[0], "half_away_from_zero"), [INTS]),
    "Sign": (lambda p: _v(1).sign(p[0]), [HALVES]),
    "IsInf-positive": (lambda p: _v(10).is_inf(p[0], {"detect_negative": False}),
                       [np.array([np.inf, -np.inf, 1, np.nan], np.float32)]),
    "IsNaN": (lambda p: _v(10).is_nan(p[0]), [np.array([np.inf, np.nan, 1], np.float32)]),
    "HardSigmoid": (lambda p: _v(1).hard_sigmoid(p[0], _c(0.3, np.float32), _c(0.4, np.float32)),
                    [X3 * 3]),
    "Selu": (lambda p: _v(1).selu(p[0], _c([1.5], np.float32), _c([1.1], np.float32)), [X3]),
    "SoftSign": (lambda p: _v(9).softsign(p[0]), [X3]),
    "Mish": (lambda p: _v(4).mish(p[0]), [X3 * 4]),
    "PReLU-per-channel": (lambda p: _v(1).prelu(p[0], _c([0.1, -0.2, 0.3], np.float32)), [X4]),
    "PReLU-broadcast": (lambda p: _v(1).prelu(p[0], _c(np.linspace(0, 1, 6), np.float32)), [X4]),
    "BitwiseAnd": (lambda p: _v(13).bitwise_and(p[0], p[1]), [INTS, INTS[:1] * 3]),
    "BitwiseXor-bool": (lambda p: _v(13).bitwise_xor(p[0], p[1]), [INTS > 0, INTS < 5]),
    "BitwiseNot": (lambda p: _v(13).bitwise_not(p[0]), [INTS]),
    # Normalizations.
    "MVN-inside-sqrt": (lambda p: _v(6).mvn(p[0], _c([1, 3]), True, 1e-3, "inside_sqrt"), [X4]),
    "MVN-outside-sqrt": (lambda p: _v(6).mvn(p[0], _c([-1]), True, 0.5, "outside_sqrt"), [X4]),
    "MVN-mean-only": (lambda p: _v(6).mvn(p[0], _c([0, 2]), False, 1e-9, "inside_sqrt"), [X4]),
    "NormalizeL2-max": (lambda p: _v(1).normalize_l2(p[0], _c([1]), 2.0, "max"), [X4]),
    "NormalizeL2-add": (lambda p: _v(1).normalize_l2(p[0], _c([2, 3]), 1e-3, "add"), [X4]),
    "GroupNormalization": (lambda p: _v(12).group_normalization(
        p[0], _c([0.5, 1, 2, -1], np.float32), _c([0, 1, 0, 2], np.float32), 2, 1e-4),
        [RNG.standard_normal((2, 4, 3, 2)).astype(np.float32)]),
    "LRN-odd": (lambda p: _v(1).lrn(p[0], _c([1]), 0.5, 0.75, 2.0, 3), [X4]),
    "LRN-even-two-axes": (lambda p: _v(1).lrn(p[0], _c([2, 3]), 0.3, 0.6, 1.5, 4), [X4]),
    "ReduceL1": (lambda p: _v(4).reduce_l1(p[0], _c([1, 2]), False), [X4]),
    "ReduceL2": (lambda p: _v(4).reduce_l2(p[0], _c([0]), True), [X4]),
    # Gathers and scatters, with repeated indices where a reduction combines them.
    "GatherElements": (lambda p: _v(6).gather_elements(p[0], _c([[2, -1, 0, 1]]), 0), [DATA]),
    # Gather-8: an index outside [-n, n) gives zeros (the plugin's; made positive first, -n-1
    # read row n-1).
    "Gather-8-out-of-range": (lambda p: _v(8).gather(p[0], _c([[-4, 0], [3, -1]]), _c(0)),
                              [DATA]),
    "Gather-8-batch-out-of-range": (lambda p: _v(8).gather(
        p[0], _c([[1, -5], [4, 0], [2, -3]]), _c(1), 1), [DATA]),
    "GatherND-5-batch": (lambda p: _v(5).gather_nd(p[0], _c([[[1], [0]], [[2], [3]]]), 2),
                         [X4[:, :2, :, :4]]),
    "GatherND-8-batch": (lambda p: _v(8).gather_nd(p[0], _c([[[1], [0]], [[2], [3]]]), 2),
                         [X4[:, :2, :, :4]]),
    "ScatterElementsUpdate-3": (lambda p: _v(3).scatter_elements_update(
        p[0], _c([[1, 0, 2, 1]]), _c(UPDATES[:1], np.float32), _c(0)), [DATA]),
    **{f"ScatterElementsUpdate-12-{r}-{init}": (_scatter(r, init, UPDATES), [DATA])
       for r in ("sum", "prod", "min", "max", "mean") for init in (True, False)},
    "ScatterElementsUpdate-12-mean-int": (_scatter("mean", True, INT_UPDATES), [INTS]),
    **{f"ScatterNDUpdate-15-{r}": (lambda p, r=r: _v(15).scatter_nd_update(
        p[0], _c([[1], [-1], [1]]), _c(DATA[:3] * 2, np.float32), r), [DATA])
       for r in ("none", "sum", "sub", "prod", "min", "max")},
    "OneHot-1-negative": (lambda p: _v(1).one_hot(p[0], _c(4), _c(2.0, np.float32),
                                                  _c(-1.0, np.float32), 1),
                          [np.array([[0, -1, 3], [5, -4, 2]], np.int64)]),
    "OneHot-16-normalize": (lambda p: _v(16).one_hot(p[0], _c(4), _c(2.0, np.float32),
                                                     _c(-1.0, np.float32), -1, "normalize"),
                            [np.array([[0, -1, 3], [5, -4, -5]], np.int64)]),
    # Data movement.
    "Reverse-mask": (lambda p: _reverse(p[0], _c([True, False, True, True], np.bool_), "mask"),
                     [X4]),
    "Reverse-index": (lambda p: _reverse(p[0], _c([3, 1]), "index"), [X4]),
    "ReverseSequence": (lambda p: _v(1).reverse_sequence(p[0], _c([5, 0, 2, 7], np.int32),
                                                         1, 2), [X3]),
    "CumSum-exclusive-reverse": (lambda p: _v(3).cumsum(p[0], _c(2), True, True), [X3]),
    "CumSum-int": (lambda p: _v(3).cumsum(p[0], _c(-2)), [INTS]),
    "Einsum": (lambda p: _v(7).einsum([p[0], p[1]], "bij,jk->bik"),
               [X3[:, :, :3], RNG.standard_normal((3, 5)).astype(np.float32)]),
    **{f"DepthToSpace-{mode}": (lambda p, mode=mode: _v(1).depth_to_space(p[0], mode, 2),
                                [RNG.standard_normal((2, 8, 3, 2)).astype(np.float32)])
       for mode in ("blocks_first", "depth_first")},
    **{f"SpaceToDepth-{mode}": (lambda p, mode=mode: _v(1).space_to_depth(p[0], mode, 2),
                                [RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)])
       for mode in ("blocks_first", "depth_first")},
    "DepthToSpace-3d": (lambda p: _v(1).depth_to_space(p[0], "depth_first", 2),
                        [RNG.standard_normal((1, 16, 2, 1, 3)).astype(np.float32)]),
    "Eye-batch": (lambda p: _v(9).eye(_c(3), _c(4), _c(-1), "f32", _c([2, 1])), []),
    "Eye-i32": (lambda p: _v(9).eye(_c(4), _c(2), _c(1), "i32"), []),
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


def _oracle_main(out_dir, cases=CASES, skip=()):
    """In the child: build, save and run every case with OpenVINO (the cases in `skip`, which
    the CPU plugin does not answer, are only built and saved)."""
    import openvino as ov

    core = ov.Core()
    for name, (build, feeds) in cases.items():
        params = [_v(1).parameter(list(x.shape), x.dtype, name=f"p{k}")
                  for k, x in enumerate(feeds)]
        model = ov.Model([build(params)], params, name)
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        ov.save_model(model, os.path.join(out_dir, name, "model.xml"), compress_to_fp16=False)
        if name in skip:
            continue
        compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        result = compiled(list(feeds))[compiled.outputs[0]]
        np.savez(os.path.join(out_dir, name, "expected.npz"), expected=result)


def plugin_answers(tmp_path_factory, module: str):
    """A directory of each case's IR and the plugin's answer, made by running `module` (whose
    __main__ calls `_oracle_main`) in a child process."""
    out = tmp_path_factory.mktemp(module.rsplit(".", 1)[-1])
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    subprocess.run([sys.executable, "-m", module, str(out)], check=True, env=env, timeout=600,
                   cwd=root)
    return out


def check_layer(oracle, name, cases, spec_oracles, atol):
    """cyloop's answer for case `name` against the plugin's, or the spec's where it departs."""
    feeds = cases[name][1]
    model = cyloop.load(oracle / name / "model.xml")
    got = model.run({f"p{k}": x for k, x in enumerate(feeds)})[model.output_names[0]]
    if name in spec_oracles:
        expected = spec_oracles[name](*feeds)
    else:
        expected = np.load(oracle / name / "expected.npz")["expected"]
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=atol)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    return plugin_answers(tmp_path_factory, "tests.kernels.openvino.test_ported_layers")


@pytest.mark.parametrize("name", list(CASES))
def test_layer_matches_the_cpu_plugin(name, oracle):
    check_layer(oracle, name, CASES, SPEC_ORACLES, atol=1e-6)


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _oracle_main(sys.argv[1])
    sys.stdout.flush()
    os._exit(0)  # skip OpenVINO's teardown
