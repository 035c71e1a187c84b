"""MatMul, Softmax, reductions and TopK of OpenVINO IR (the recurrent cells: cells.py)."""

import numpy as np

from ...accel.gemm import weight_product
from .. import _math
from .._ir_attrs import DOMAIN, as_bool, as_dtype, as_int
from .._reductions import axes_reader, in_own_type, mean, reducing, sum_abs, with_identity
from ..registry import abilities_of, declare, kernel


@kernel("MatMul", domain=DOMAIN, since=1, batch="matmul",
        batch_if=lambda attrs, batched: not as_bool(attrs, "transpose_a"))
def matmul(attrs):
    """A product with a read-only matrix (a weight) runs in the measured orientation."""
    transpose_a, transpose_b = as_bool(attrs, "transpose_a"), as_bool(attrs, "transpose_b")
    by_weight, transposed_weight = weight_product(), weight_product(transposed=True)

    def product(a, b):
        # 1-D operands are never transposed; the last two axes swap otherwise.
        if transpose_a and np.ndim(a) > 1:
            a = np.swapaxes(a, -1, -2)
        if transpose_b and np.ndim(b) > 1:
            return transposed_weight(a, b)
        return by_weight(a, b)

    return declare(product, measured=abilities_of(transposed_weight if transpose_b else
                                                  by_weight).measured, products=True)


def softmax(attrs):
    axis = as_int(attrs, "axis", 1)
    return lambda x: _math.softmax(x, axis)


# The IR spells the layer type "SoftMax" (v1 and v8, which adds negative axes).
for _name in ("SoftMax", "Softmax"):
    kernel(_name, domain=DOMAIN, since=1)(softmax)


@kernel("LogSoftmax", domain=DOMAIN, since=5)
def log_softmax(attrs):
    axis = as_int(attrs, "axis", 1)
    return lambda x: _math.softmax(x, axis, log=True)


def _positional(reducer):
    """`reducer` called as ``(x, axis, keepdims)``, as `over_every_axis` calls it."""
    return lambda x, axis=None, keepdims=False: reducer(x, axis=axis, keepdims=keepdims)


# Sums and products accumulate in the input's type, as OpenVINO's do (and its result type is).
_REDUCERS = {"ReduceSum": in_own_type(np.add), "ReduceMean": mean,
             "ReduceMax": _positional(with_identity(np.max, True)),
             "ReduceMin": _positional(with_identity(np.min, False)),
             "ReduceProd": in_own_type(np.multiply),
             "ReduceLogicalAnd": _positional(np.all), "ReduceLogicalOr": _positional(np.any)}


def _l2(x, axis=None, keepdims=False):
    """The square root of the sum of squares (ReduceL2-4)."""
    return np.sqrt(np.add.reduce(x * x, axis, x.dtype, None, keepdims))


# ReduceL1 and ReduceL2 arrived in opset4, the others in opset1.
_SINCE = {"ReduceL1": 4, "ReduceL2": 4}
_REDUCERS |= {"ReduceL1": sum_abs, "ReduceL2": _l2}


def _register_reduction(op_type, reducer):
    @kernel(op_type, domain=DOMAIN, since=_SINCE.get(op_type, 1))
    def factory(attrs):
        keep_dims = as_bool(attrs, "keep_dims")
        read, by = axes_reader(), reducing(reducer, keep_dims)

        def reduce(x, axes):
            try:
                ndim = x.ndim  # (np.ndim's dispatch weighs on a tiny step)
            except AttributeError:
                ndim = np.ndim(x)
            return by(x, read(ndim, axes))  # (every axis, None: the short path bodies take)

        return reduce


for _op_type, _reducer in _REDUCERS.items():
    _register_reduction(_op_type, _reducer)


@kernel("TopK", domain=DOMAIN, since=1, multi=True)
def top_k(attrs, n_outputs):
    axis = as_int(attrs, "axis", -1)
    largest = attrs.get("mode", "max").lower() == "max"
    sort = attrs.get("sort", "value").lower()
    index_type = as_dtype(attrs, "index_element_type", np.int32)

    def top(x, k):
        k = int(np.asarray(k).reshape(-1)[0])
        keys = x.astype(np.int8) if x.dtype.kind == "b" else x
        if largest:
            keys = ~keys if keys.dtype.kind in "iu" else -keys
        indices = np.take(np.argsort(keys, axis=axis, kind="stable"), range(k), axis=axis)
        if sort == "index":
            indices = np.sort(indices, axis=axis)
        values = np.take_along_axis(x, indices, axis=axis)
        return (values, indices.astype(index_type))[:n_outputs]

    return top


@kernel("ScaledDotProductAttention", domain=DOMAIN, since=13)
def scaled_dot_product_attention(attrs):
    """(query [N, ..., L, E], key [N, ..., S, E], value [N, ..., S, Ev][, attention_mask,
    scale]) -> softmax(query key^T scale + bias) value, [N, ..., L, Ev]; the batch axes
    broadcast. ``scale`` defaults to 1 / sqrt(E). The bias is -inf above the diagonal with
    ``causal`` (the mask then ignored), else -inf where a boolean mask is false, or a float mask
    itself. 16-bit types are computed in float32 and rounded once at the end."""
    causal = as_bool(attrs, "causal")

    def attend(query, key, value, mask=None, scale=None):
        if min(query.ndim, key.ndim, value.ndim) < 3 or query.shape[-1] != key.shape[-1] \
                or key.shape[-2] != value.shape[-2]:
            raise ValueError(f"ScaledDotProductAttention needs query [N, ..., L, E], key "
                             f"[N, ..., S, E] and value [N, ..., S, Ev], got "
                             f"{list(query.shape)}, {list(key.shape)}, {list(value.shape)}")
        wide = np.dtype(np.float32) if query.dtype.itemsize < 4 else query.dtype
        q, k, v = (a.astype(wide, copy=False) for a in (query, key, value))
        factor = 1 / np.sqrt(wide.type(query.shape[-1])) if scale is None else \
            np.asarray(scale).astype(wide).reshape(-1)[0]
        weights = np.matmul(q, np.swapaxes(k, -1, -2)) * factor
        if causal:
            rows, columns = weights.shape[-2:]
            weights = weights + np.triu(np.full((rows, columns), -np.inf, wide), k=1)
        elif mask is not None:
            mask = np.asarray(mask)
            if mask.dtype == np.bool_:
                weights = np.where(mask, weights, wide.type(-np.inf))
            else:
                weights = weights + mask.astype(wide, copy=False)
        result = np.matmul(_math.softmax(weights, -1), v)
        return result.astype(query.dtype, copy=False)

    return attend
