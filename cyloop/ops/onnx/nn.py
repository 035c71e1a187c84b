"""Linear algebra and activations beyond plain ufuncs: MatMul."""

import numpy as np

from ..registry import kernel


@kernel("MatMul", since=1, out=True)
def matmul(attrs):
    return np.matmul
