"""Linear algebra and activations beyond plain ufuncs: MatMul, Gemm, Det."""

import numpy as np

from ...abilities import GemmForm
from ...accel.gemm import weight_product
from ..registry import abilities_of, declare, kernel


@kernel("MatMul", since=1, out=True, batch="matmul")
def matmul(attrs):
    """np.matmul; a product with a read-only matrix (a weight) in the measured orientation."""
    return weight_product()


def _batches_gemm(attrs, batched):
    """Rows of A times a static B (plus a static C), A not transposed: see engine/chunks.py."""
    return batched[0] and not any(batched[1:]) and not int(attrs.get("transA", 0))


# (Before 7, a `broadcast` attribute numpy's broadcasting subsumes.)
@kernel("Gemm", since=1, batch="gemm", batch_if=_batches_gemm)
def gemm(attrs):
    """``alpha * A' B' + beta * C``; a product with a read-only B (a weight) in the measured
    orientation. A beta of 0 leaves C out (as ONNX's reference implementation and onnxruntime
    do: 0 * C would make NaN of an infinite or NaN C). The kernel declares its attributes and its
    product (its `GemmForm`), which the hoisted form reads."""
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    trans_a, trans_b = bool(int(attrs.get("transA", 0))), bool(int(attrs.get("transB", 0)))
    product = weight_product(transposed=trans_b)

    def general(a, b, c=None):
        if trans_a:
            a = a.T
        result = product(a, b) if np.ndim(b) == 2 else np.matmul(a, b.T if trans_b else b)
        if alpha != 1.0:
            result *= result.dtype.type(alpha)
        if c is not None and beta != 0.0:
            result += c * result.dtype.type(beta) if beta != 1.0 else c
        return result

    return declare(general, measured=abilities_of(product).measured, products=True,
                   gemm=GemmForm(alpha, beta, trans_b, product))


@kernel("Det", since=11)
def det(attrs):
    """Det-11 and 22: X [..., M, M] -> the determinants [...], by LU factorization in X's
    precision (float16 and bfloat16 in float32)."""
    def determinant(x):
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise ValueError(f"Det needs square matrices [..., M, M], got {list(x.shape)}")
        work = np.float64 if x.dtype == np.float64 else np.float32
        return np.asarray(np.linalg.det(x.astype(work, copy=False))).astype(x.dtype)

    return determinant
