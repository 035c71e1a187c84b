"""ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum and ReduceLogSumExp at every opset version
(axes an attribute before 18, an input from 18), against onnxruntime: native kernels at every
version (before 18 the schema has no function body to expand, from 18 the body would square or
exponentiate in the input's type, where onnxruntime does not)."""

import numpy as np
import pytest

from cyloop import kernels
from tests.support.nodes import assert_native_matches, one_node

OPS = ["ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"]
X3 = np.arange(24.0).reshape(2, 3, 4) % 7 - 3

# name -> (data as float64, to be cast; the integer types take only the integer ones)
DATA = {
    "small": X3,
    "large": X3 * 300,  # float16 squares overflow; exp overflows without the max taken out
    "empty": np.zeros((0, 3, 2)),
    "ties": np.array([[[5, 4, 4, 4], [0, 0, 0, 0], [-9, -9, -9, -9]]], np.float64),
    "infinite": np.array([[[np.inf, 1], [-np.inf, -np.inf], [-np.inf, 0]]]),
    # (not with infinities: onnxruntime's ReduceLogSumExp of a NaN and an inf is inf or NaN
    # as the two fall in its loop)
    "nan": np.array([[[np.nan, 1], [2, 0], [1, np.nan]]]),
}
# (opset, axes, keepdims, noop_with_empty_axes): axes None leaves them out
FORMS = [(1, [1], 1, None), (11, [-1, 0], 0, None), (13, None, 1, None), (13, [2], 0, None),
         (18, [0, -1], 1, 0), (18, None, 0, 0), (18, [], 1, 1), (18, None, 1, 1)]
DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64]


def _cases():
    for op in OPS:
        for data in DATA:
            for dtype in DTYPES:
                if np.dtype(dtype).kind == "i" and data in ("infinite", "nan"):
                    continue
                for form in FORMS:
                    if dtype == np.float16 and form[0] == 1:
                        continue  # onnxruntime cannot cast float16 for opset-1 kernels
                    if (op, dtype, data) == ("ReduceLogSumExp", np.float16, "large") \
                            and form[0] >= 18:
                        # onnxruntime has no float16 kernel at 18: it runs the function body,
                        # whose exp(900) overflows float64 (cyloop takes the maximum out, as
                        # onnxruntime's own kernels do at 13 and for float32 at 18).
                        continue
                    yield pytest.param(op, data, dtype, form,
                                       id=f"{op}-{data}-{np.dtype(dtype).name}-opset{form[0]}"
                                          f"-axes{form[1]}-keep{form[2]}-noop{form[3]}")


@pytest.mark.parametrize("op, data, dtype, form", list(_cases()))
def test_norm_reductions_match_onnxruntime(op, data, dtype, form):
    """On integers onnxruntime truncates a float result toward zero, gives the type's minimum
    for the log of 0 or of a negative sum, and accumulates ReduceLogSumExp's exponentials in the
    integer type (each below 1 is lost); float16 ReduceL2 and ReduceLogSumExp are computed in
    float32. With noop_with_empty_axes and no axes each element is reduced by itself."""
    opset, axes, keepdims, noop = form
    x = DATA[data].astype(dtype)
    attrs = {"keepdims": keepdims}
    inputs = [x]
    if opset < 18:
        if axes is not None:
            attrs["axes"] = axes
    else:
        attrs["noop_with_empty_axes"] = noop
        if axes is not None:
            inputs.append(np.array(axes, np.int64))
    model, feeds = one_node(op, opset, attrs, inputs)
    with np.errstate(all="ignore"):
        assert_native_matches(model, feeds, rtol=2e-3 if dtype == np.float16 else 1e-6)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset", [1, 11, 13, 18])
def test_norm_reductions_are_native_at_every_version(op, opset):
    """A kernel of cyloop's own at each version, whose axes come the version's way."""
    assert kernels.lookup("", op, opset).since == (1 if opset < 18 else 18)


# ReduceMean and ReduceL1 over every axis, however the model says it (axes left out, or named
# each in any order and sign), against onnxruntime: the form loop bodies mostly take.
EVERY_AXIS = [(13, None, 0), (13, None, 1), (13, [0, 1, 2], 0), (13, [-1, 0, 1], 1),
              (18, None, 0), (18, None, 1), (18, [2, 0, 1], 0), (18, [-3, -2, -1], 1)]


@pytest.mark.parametrize("form", EVERY_AXIS, ids=[f"opset{o}-axes{a}-keep{k}"
                                                  for o, a, k in EVERY_AXIS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("data", ["small", "large", "nan", "one element"])
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceL1"])
def test_reductions_over_every_axis_match_onnxruntime(op, data, dtype, form):
    opset, axes, keepdims = form
    x = (np.array([[[2.5]]]) if data == "one element" else DATA[data]).astype(dtype)
    attrs, inputs = {"keepdims": keepdims}, [x]
    if axes is not None:  # (an attribute before 18, an input from 18)
        if opset < 18:
            attrs["axes"] = axes
        else:
            inputs.append(np.array(axes, np.int64))
    model, feeds = one_node(op, opset, attrs, inputs)
    with np.errstate(all="ignore"):
        assert_native_matches(model, feeds, rtol=2e-3 if dtype == np.float16 else 1e-6)
