"""Linear algebra and activations beyond plain ufuncs: MatMul."""

import numpy as np

from .._gemm import weight_product
from ..registry import kernel


@kernel("MatMul", since=1, out=True, batch="matmul")
def matmul(attrs):
    """np.matmul; a product with a read-only matrix (a weight) in the measured orientation."""
    return weight_product()


@kernel("Gemm", since=1)  # (before 7, a `broadcast` attribute numpy's broadcasting subsumes)
def gemm(attrs):
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    trans_a, trans_b = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))

    def general(a, b, c=None):
        product = np.matmul(a.T if trans_a else a, b.T if trans_b else b)
        if alpha != 1.0:
            product *= product.dtype.type(alpha)
        if c is not None:
            product += c * product.dtype.type(beta) if beta != 1.0 else c
        return product

    return general
