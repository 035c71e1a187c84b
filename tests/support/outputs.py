"""Feeds for the embedded examples, and comparisons of two runs' outputs."""

import numpy as np

__all__ = ["assert_close_outputs", "assert_same_outputs", "example_feeds"]


def example_feeds(path, seed):
    """Feeds for an example model: an LSTM TensorIterator IR, or an ONNX Loop (its trip count
    varies with the seed, so threads run loops of different lengths)."""
    rng = np.random.default_rng(seed)
    if path.endswith(".xml"):
        return {"X": rng.standard_normal((2, 16, 8), np.float32),
                "H0": rng.standard_normal((2, 16), np.float32),
                "C0": rng.standard_normal((2, 16), np.float32)}
    return {"trip_count": np.array(50 + 10 * seed, np.int64),
            "row": rng.standard_normal(4, np.float32)}


def assert_same_outputs(a, b, check=np.testing.assert_array_equal):
    """The same outputs: the same names, lengths and values (compared by `check`)."""
    assert a.keys() == b.keys()
    for name in a:
        got, want = a[name], b[name]
        if isinstance(want, list):
            assert len(got) == len(want), name
            for x, y in zip(got, want):
                check(x, y, err_msg=name)
        else:
            check(got, want, err_msg=name)


def assert_close_outputs(a, b):
    """The same outputs to float32 rounding: what runs of one model agree to when a matrix
    product's shapes or formulation differ between them (a measured choice on trial, a chunk of a
    batch with fewer rows: BLAS picks its kernels by the shapes, and with OpenBLAS's Haswell
    kernels a 1-row and a 10-row product can differ in the last bit)."""
    def check(x, y, err_msg):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, err_msg=err_msg)

    assert_same_outputs(a, b, check)
