"""The Cython runner's conversions: a Cast step given an array or a numpy scalar of a number type
is converted by the runner itself (engine/_core.pyx `_cast`), not by its kernel. It must make
what the kernel makes, ``np.asarray(x).astype(to)``, or, given a destination, what
``np.copyto(out, x, casting="unsafe")`` writes there: the pure-Python driver, which always calls
the kernel, is the oracle."""

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cyloop.ir import CarriedInput, ConcatOutput, GraphBuilder, InvariantInput, LastOutput

from ..support.drivers import run_both

NUMBERS = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float16, np.float32,
           np.float64]


def _loop(src, to, shape, n=3):
    """x_next = x + k (or x | k, booleans) carried, k invariant: Cast(x_next) to `to` emitted
    each iteration (written into its row: a destination) and Cast(x) kept last (a fresh array).
    With 0-d operands, x_next is the scalar path's numpy scalar."""
    body = GraphBuilder("body")
    body.input("x", src, shape)
    body.input("k", src, shape)
    body.node("Or" if src is np.bool_ else "Add", "x", "k", outputs=["x_next"])
    body.node("Cast", "x_next", outputs=["emitted"], to=np.dtype(to))
    body.node("Cast", "x", outputs=["kept"], to=np.dtype(to))
    outputs = [ConcatOutput("emitted", new_axis=True), LastOutput("kept")]
    body.output("x_next", "emitted", "kept")
    g = GraphBuilder("outer")
    g.input("x0", src, shape)
    g.input("k0", src, shape)
    g.loop(body.build(), inputs=[("x0", CarriedInput(0, "x", "x_next")),
                                 ("k0", InvariantInput(0, "k"))],
           outputs=[LastOutput("x_next")] + outputs, trip_count=n, name="loop",
           output_names=["last", "emitted", "kept"])
    g.output("emitted", "kept")
    return g.build()


@settings(max_examples=80, deadline=None)
@given(data=st.data(), src=st.sampled_from(NUMBERS), to=st.sampled_from(NUMBERS),
       shape=st.sampled_from([(), (3,), (2, 3)]), transposed=st.booleans())
def test_conversions_agree_with_the_kernel(data, src, to, shape, transposed):
    values = hnp.arrays(src, shape, elements=hnp.from_dtype(np.dtype(src), allow_nan=True,
                                                             allow_infinity=True))
    x0, k0 = data.draw(values), data.draw(values)
    if transposed:  # (an operand in Fortran order: astype keeps its order)
        x0 = np.array(x0, order="F")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow / invalid, in both drivers
        out = run_both(_loop(src, to, shape), {"x0": x0, "k0": k0})
    assert out["emitted"].dtype == np.dtype(to) and out["kept"].dtype == np.dtype(to)
