"""DFT, STFT and MelWeightMatrix against onnxruntime under both drivers (onnx.reference for what
onnxruntime lacks: the one-sided inverse), on real and complex signals, every axis, trimmed and
zero-padded lengths."""

import numpy as np
import pytest

from tests.support.nodes import assert_native_matches, one_node

DRIVERS = ["cython", "python"]
RNG = np.random.default_rng(17)
REAL = RNG.standard_normal((2, 6, 5, 1)).astype(np.float32)
COMPLEX = RNG.standard_normal((2, 6, 5, 2)).astype(np.float32)

# (signal, axis, dft_length or None, inverse, onesided)
DFT_CASES = [(x, axis, length, inverse, onesided)
             for x in (REAL, COMPLEX) for axis in (1, 2, -2, -3)
             for length in (None, 4, 9) for inverse in (0, 1) for onesided in (0, 1)
             if not (inverse and onesided)]


def _ids(cases):
    return [f"{'real' if c[0].shape[-1] == 1 else 'complex'}-axis{c[1]}-n{c[2]}-inv{c[3]}"
            f"-one{c[4]}" for c in cases]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("x, axis, length, inverse, onesided", DFT_CASES, ids=_ids(DFT_CASES))
def test_dft_20_matches_onnxruntime(x, axis, length, inverse, onesided, driver):
    inputs = [x, None if length is None else np.array(length, np.int64), np.array(axis, np.int64)]
    model, feeds = one_node("DFT", 20, {"inverse": inverse, "onesided": onesided}, inputs)
    assert_native_matches(model, feeds, rtol=1e-4, atol=1e-5, driver=driver)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("x, axis, length, inverse, onesided",
                         [c for c in DFT_CASES if c[1] in (1, 2)],
                         ids=_ids([c for c in DFT_CASES if c[1] in (1, 2)]))
def test_dft_17_matches_onnxruntime(x, axis, length, inverse, onesided, driver):
    inputs = [x] if length is None else [x, np.array(length, np.int64)]
    model, feeds = one_node("DFT", 17, {"axis": axis, "inverse": inverse, "onesided": onesided},
                            inputs)
    assert_native_matches(model, feeds, rtol=1e-4, atol=1e-5, driver=driver)


def test_dft_defaults_and_float64_match_onnxruntime():
    for opset in (17, 20):
        model, feeds = one_node("DFT", opset, {}, [COMPLEX.astype(np.float64)])
        assert_native_matches(model, feeds, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("x", [REAL, COMPLEX], ids=["real", "complex"])
@pytest.mark.parametrize("length", [None, 8, 7])
def test_one_sided_inverse_dft_matches_onnx_reference(x, length, opset):
    attrs = {"inverse": 1, "onesided": 1}
    length_input = None if length is None else np.array(length, np.int64)
    if opset == 17:
        inputs = [x] if length is None else [x, length_input]
        attrs["axis"] = 2
    else:
        inputs = [x, length_input, np.array(2, np.int64)]
    model, feeds = one_node("DFT", opset, attrs, inputs)
    assert_native_matches(model, feeds, reference=True, rtol=1e-4, atol=1e-5)


# (signal, frame_step, window or None, frame_length or None, onesided)
STFT_CASES = [(RNG.standard_normal((2, 32, channels)).astype(dtype), step, window, length,
               onesided)
              for dtype in (np.float32, np.float64) for channels in (1, 2)
              for step in (1, 5, 8)
              for window, length in ((np.hanning(10).astype(dtype), None),
                                     (None, 10), (np.hamming(9).astype(dtype), 9),
                                     (None, 32))
              for onesided in (0, 1)]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("signal, step, window, length, onesided", STFT_CASES,
                         ids=[f"{k}" for k in range(len(STFT_CASES))])
def test_stft_matches_onnxruntime(signal, step, window, length, onesided, driver):
    inputs = [signal, np.array(step, np.int64), window,
              None if length is None else np.array(length, np.int64)]
    model, feeds = one_node("STFT", 17, {"onesided": onesided}, inputs)
    tolerance = 1e-4 if signal.dtype == np.float32 else 1e-10
    assert_native_matches(model, feeds, rtol=tolerance, atol=tolerance, driver=driver)


MEL_CASES = [(8, 64, 8000, 0.0, 4000.0), (5, 128, 16000, 100.0, 7000.0),
             (40, 512, 16000, 20.0, 8000.0), (3, 16, 100, 0.0, 50.0), (1, 10, 1000, 100.0, 300.0)]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("output_datatype", [None, 11, 10])
@pytest.mark.parametrize("bins, length, rate, low, high", MEL_CASES)
def test_mel_weight_matrix_matches_onnxruntime(bins, length, rate, low, high, output_datatype,
                                               driver):
    attrs = {} if output_datatype is None else {"output_datatype": output_datatype}
    inputs = [np.array(bins, np.int64), np.array(length, np.int64), np.array(rate, np.int64),
              np.array(low, np.float32), np.array(high, np.float32)]
    model, feeds = one_node("MelWeightMatrix", 17, attrs, inputs)
    # (onnxruntime's is float32 and float64 only: onnx.reference for float16)
    assert_native_matches(model, feeds, reference=output_datatype == 10, rtol=1e-6, atol=1e-7,
                          driver=driver)
