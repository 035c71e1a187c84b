"""GridSample against onnxruntime under both drivers: every mode, padding_mode and align_corners,
at each version's mode names, on grids reaching well past [-1, 1] (and landing on pixel centres
and halfway points, where rounding and flooring decide), in 2-D and (from opset 20) 3-D."""

import itertools

import numpy as np
import pytest

from tests.support.nodes import assert_native_matches, one_node

MODES = {16: ["bilinear", "nearest", "bicubic"], 20: ["linear", "nearest", "cubic"],
         22: ["linear", "nearest", "cubic"]}
CASES = [(opset, mode, padding, align)
         for opset, modes in MODES.items() for mode in modes
         for padding in ("zeros", "border", "reflection") for align in (0, 1)]


def _grid(rng, shape, dtype):
    grid = rng.uniform(-3.5, 3.5, shape)
    grid.flat[::3] = np.round(grid.flat[::3] * 4) / 4  # (centres and halves of small images)
    return grid.astype(dtype)


@pytest.mark.parametrize("driver", ["cython", "python"])
@pytest.mark.parametrize("opset, mode, padding, align", CASES,
                         ids=[f"{o}-{m}-{p}-{a}" for o, m, p, a in CASES])
def test_grid_sample_2d_matches_onnxruntime(opset, mode, padding, align, driver):
    rng = np.random.default_rng(len(mode) + 7 * len(padding) + align)
    for height, width in ((5, 7), (1, 4), (3, 1)):
        x = rng.standard_normal((2, 3, height, width)).astype(np.float32)
        grid = _grid(rng, (2, 4, 6, 2), np.float32)
        model, feeds = one_node("GridSample", opset,
                                {"mode": mode, "padding_mode": padding, "align_corners": align},
                                [x, grid])
        # onnxruntime has no GridSample-22, whose change is bfloat16 (and onnx.reference reads
        # some taps past the edges otherwise): GridSample-20 on onnxruntime
        assert_native_matches(model, feeds, rtol=1e-5, atol=1e-5, driver=driver,
                              oracle_opset=20 if opset == 22 else None)


@pytest.mark.parametrize("mode, padding, align",
                         list(itertools.product(["linear", "nearest"],
                                                ["zeros", "border", "reflection"], [0, 1])))
def test_grid_sample_3d_matches_onnxruntime(mode, padding, align):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 2, 3, 4, 5))
    grid = _grid(rng, (2, 3, 2, 4, 3), np.float64)
    model, feeds = one_node("GridSample", 20,
                            {"mode": mode, "padding_mode": padding, "align_corners": align},
                            [x, grid])
    assert_native_matches(model, feeds, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float16], ids=["float64", "float16"])
def test_grid_sample_in_other_float_types_matches_onnxruntime(dtype):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 2, 4, 5)).astype(dtype)
    grid = _grid(rng, (1, 3, 3, 2), dtype)
    model, feeds = one_node("GridSample", 20, {"mode": "cubic", "padding_mode": "reflection"},
                            [x, grid])
    assert_native_matches(model, feeds, rtol=1e-3 if dtype == np.float16 else 1e-9,
                          atol=1e-3 if dtype == np.float16 else 1e-12)
