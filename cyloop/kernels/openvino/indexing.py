"""Indexing and data movement layers of OpenVINO IR: gathers and scatters by index tensors,
OneHot, Pad, Reverse, ReverseSequence, CumSum, Einsum, DepthToSpace, SpaceToDepth, Eye and
Unique, on the maths ONNX's kernels use too (kernels/_indexing.py, _reductions.py, _math.py)."""

import numpy as np

from .. import _indexing, _math, _reductions
from .._ir_attrs import DOMAIN, as_bool, as_dtype, as_int, as_integer_type
from ..registry import declare, kernel


def _ints(values):
    return [int(v) for v in np.asarray(values).ravel()]


def _scalar_int(value):
    return int(np.asarray(value).reshape(-1)[0])


@kernel("GatherElements", domain=DOMAIN, since=6)
def gather_elements(attrs):
    axis = as_int(attrs, "axis", 0)
    return lambda data, indices: _indexing.gather_elements(data, indices, axis)


@kernel("GatherND", domain=DOMAIN, since=5)
def gather_nd_5(attrs):
    """GatherND-5: the batch axes come out flattened into one."""
    batch_dims = as_int(attrs, "batch_dims", 0)

    def gathered(data, indices):
        result = _indexing.gather_nd(data, indices, batch_dims)
        if batch_dims <= 1:
            return result
        return result.reshape((-1,) + result.shape[batch_dims:])

    return gathered


@kernel("GatherND", domain=DOMAIN, since=8)
def gather_nd_8(attrs):
    """GatherND-8: the batch axes kept as they are."""
    batch_dims = as_int(attrs, "batch_dims", 0)
    return lambda data, indices: _indexing.gather_nd(data, indices, batch_dims)


def _scatter_reduction(attrs, allowed):
    reduction = str(attrs.get("reduction", "none")).lower()
    if reduction not in allowed:
        raise ValueError(f"reduction must be one of {allowed}, got {reduction!r}")
    return None if reduction == "none" else reduction


@kernel("ScatterElementsUpdate", domain=DOMAIN, since=3, out=True)
def scatter_elements_update(attrs):
    """(data, indices, updates, axis); -12 adds ``reduction`` (none, sum, prod, min, max, mean)
    and ``use_init_val`` (whether data's values take part in a reduction). Made in ``out=``
    where given; in data's own buffer where the engine hands it that (`updates_first`)."""
    reduction = _scatter_reduction(attrs, ("none", "sum", "prod", "min", "max", "mean"))
    use_init = as_bool(attrs, "use_init_val", True)

    def scattered(data, indices, updates, axis, out=None):
        axis = _scalar_int(axis) % data.ndim
        return _indexing.scatter_elements(data, indices, updates, axis, reduction, use_init,
                                          out=out)

    return declare(scattered, updates_first=True)


kernel("ScatterElementsUpdate", domain=DOMAIN, since=12, out=True)(scatter_elements_update)


@kernel("ScatterNDUpdate", domain=DOMAIN, since=3, out=True)
def scatter_nd_update(attrs):
    """(data, indices, updates); -15 adds ``reduction`` (none, sum, sub, prod, min, max). As
    ScatterElementsUpdate's, in ``out=`` or data's own buffer."""
    reduction = _scatter_reduction(attrs, ("none", "sum", "sub", "prod", "min", "max"))

    def scattered(data, indices, updates, out=None):
        return _indexing.scatter_nd(data, indices, updates, reduction, out=out)

    return declare(scattered, updates_first=True)


kernel("ScatterNDUpdate", domain=DOMAIN, since=15, out=True)(scatter_nd_update)


@kernel("OneHot", domain=DOMAIN, since=1)
def one_hot(attrs):
    """(indices, depth, on_value, off_value); indices outside [0, depth) give off_value, but
    with OneHot-16's ``negative_indices_mode=normalize`` those in [-depth, 0) count back."""
    axis = as_int(attrs, "axis", -1)
    mode = str(attrs.get("negative_indices_mode", "ignore-negative")).lower().replace("_", "-")
    if mode not in ("ignore-negative", "normalize"):
        raise ValueError(f"negative_indices_mode must be ignore-negative or normalize, got "
                         f"{mode!r}")

    def encoded(indices, depth, on, off):
        on, off = np.asarray(on), np.asarray(off)
        hot = _indexing.one_hot(indices, _scalar_int(depth), on.reshape(-1)[0],
                                off.reshape(-1)[0], axis, mode == "normalize")
        return hot.astype(on.dtype, copy=False)

    return encoded


kernel("OneHot", domain=DOMAIN, since=16)(one_hot)


@kernel("Pad", domain=DOMAIN, since=1)
def pad(attrs):
    """(data, pads_begin, pads_end[, pad_value]); ``pad_mode`` constant, edge, reflect or
    symmetric. Pad-12 allows negative pads, which crop after the padding is added (so a
    mirror reflects the uncropped data)."""
    mode = str(attrs.get("pad_mode", "constant")).lower()
    if mode not in ("constant", "edge", "reflect", "symmetric"):
        raise ValueError(f"pad_mode must be constant, edge, reflect or symmetric, got {mode!r}")

    def padded(x, begins, ends, value=None):
        value = x.dtype.type(0) if value is None else np.asarray(value).reshape(-1)[0]
        return _indexing.pad(x, _ints(begins), _ints(ends), mode, value, crop_first=False)

    return padded


kernel("Pad", domain=DOMAIN, since=12)(pad)


@kernel("Reverse", domain=DOMAIN, since=1)
def reverse(attrs):
    """(data, axes): ``mode`` index (axes lists axes) or mask (one bool per axis)."""
    mode = str(attrs.get("mode", "index")).lower()
    if mode not in ("index", "mask"):
        raise ValueError(f"Reverse mode must be index or mask, got {mode!r}")

    def reversed_(x, axes):
        axes = np.asarray(axes).ravel()
        chosen = np.flatnonzero(axes) if mode == "mask" else axes % max(x.ndim, 1)
        return np.flip(x, tuple(int(a) for a in chosen)).copy()

    return reversed_


@kernel("ReverseSequence", domain=DOMAIN, since=1)
def reverse_sequence(attrs):
    """(data, seq_lengths): along ``seq_axis``, each element of ``batch_axis`` has its first
    seq_lengths[b] entries reversed, the rest kept."""
    batch_axis, seq_axis = as_int(attrs, "batch_axis", 0), as_int(attrs, "seq_axis", 1)

    def reversed_(x, lengths):
        batch, seq = batch_axis % x.ndim, seq_axis % x.ndim
        lengths = np.asarray(lengths).astype(np.int64).ravel()
        steps = x.shape[seq]
        positions = np.arange(steps)
        # source[b, t]: where output position t of batch element b reads from.
        lengths = np.clip(lengths, 0, steps)[:, None]
        source = np.where(positions < lengths, lengths - 1 - positions, positions)
        shape = [1] * x.ndim
        shape[batch], shape[seq] = source.shape
        source = source.reshape(shape) if batch < seq else \
            source.T.reshape(shape)
        return np.take_along_axis(x, np.broadcast_to(source, x.shape), axis=seq)

    return reversed_


@kernel("CumSum", domain=DOMAIN, since=3)
def cum_sum(attrs):
    """(data[, axis]) -> cumulative sums along axis (default 0), ``exclusive`` and
    ``reverse`` as ONNX's CumSum."""
    exclusive, reverse_ = as_bool(attrs, "exclusive"), as_bool(attrs, "reverse")

    def cumulative(x, axis=None):
        axis = 0 if axis is None else _scalar_int(axis)
        return _reductions.cumulative(x, axis, np.cumsum, 0, exclusive, reverse_)

    return cumulative


@kernel("Einsum", domain=DOMAIN, since=7)
def einsum(attrs):
    equation = str(attrs["equation"]).replace(" ", "")
    return lambda *operands: _math.einsum(equation, *operands)


def _block_mode(attrs):
    mode = str(attrs.get("mode", "blocks_first")).lower()
    if mode not in ("blocks_first", "depth_first"):
        raise ValueError(f"mode must be blocks_first or depth_first, got {mode!r}")
    return mode == "blocks_first", as_int(attrs, "block_size", 1)


@kernel("DepthToSpace", domain=DOMAIN, since=1)
def depth_to_space(attrs):
    """[N, C * bs^K, D1, ..., DK] -> [N, C, D1 * bs, ..., DK * bs]: the channel axis read as
    (bs, ..., bs, C) with ``mode`` blocks_first, as (C, bs, ..., bs) with depth_first."""
    blocks_first, bs = _block_mode(attrs)

    def moved(x):
        n, spatial = x.shape[0], x.shape[2:]
        k = len(spatial)
        c = x.shape[1] // bs ** k
        if blocks_first:
            split = x.reshape((n,) + (bs,) * k + (c,) + spatial)
            c_axis, block_axes = k + 1, list(range(1, k + 1))
        else:
            split = x.reshape((n, c) + (bs,) * k + spatial)
            c_axis, block_axes = 1, list(range(2, k + 2))
        order = [0, c_axis]
        for d in range(k):
            order += [k + 2 + d, block_axes[d]]
        return split.transpose(order).reshape((n, c) + tuple(s * bs for s in spatial))

    return moved


@kernel("SpaceToDepth", domain=DOMAIN, since=1)
def space_to_depth(attrs):
    """[N, C, D1 * bs, ..., DK * bs] -> [N, C * bs^K, D1, ..., DK], DepthToSpace undone (the
    same ``mode``)."""
    blocks_first, bs = _block_mode(attrs)

    def moved(x):
        n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
        k = len(spatial)
        inner = tuple(s // bs for s in spatial)
        split = x.reshape((n, c) + tuple(v for s in inner for v in (s, bs)))
        blocks = [3 + 2 * d for d in range(k)]
        outer = [2 + 2 * d for d in range(k)]
        order = [0] + (blocks + [1] if blocks_first else [1] + blocks) + outer
        return split.transpose(order).reshape((n, c * bs ** k) + inner)

    return moved


@kernel("Eye", domain=DOMAIN, since=9)
def eye(attrs):
    """(num_rows, num_columns, diagonal_index[, batch_shape]) -> ones on the diagonal shifted
    by diagonal_index (up for positive), in ``output_type``."""
    dtype = as_dtype(attrs, "output_type", np.float32)

    def identity(rows, columns, diagonal, batch_shape=None):
        matrix = np.eye(_scalar_int(rows), _scalar_int(columns), _scalar_int(diagonal), dtype)
        if batch_shape is None:
            return matrix
        shape = tuple(_ints(batch_shape)) + matrix.shape
        return np.array(np.broadcast_to(matrix, shape))

    return identity


@kernel("Unique", domain=DOMAIN, since=10, multi=True)
def unique(attrs, n_outputs):
    """(data[, axis]) -> the unique elements (or, along axis, slices), the index of each one's
    first occurrence, each input element's (slice's) index among them, and how often each
    occurs. ``sorted``: ascending (slices lexicographically), else in order of first
    occurrence. Without an axis the input is read flattened."""
    ordered = as_bool(attrs, "sorted", True)
    index_type = as_integer_type(attrs, "index_element_type")
    count_type = as_integer_type(attrs, "count_element_type")

    def found(x, axis=None):
        axis = None if axis is None else _scalar_int(axis) % max(x.ndim, 1)
        data = x.reshape(-1) if axis is None else x
        values, first, inverse, counts = np.unique(
            data, return_index=True, return_inverse=True, return_counts=True,
            axis=None if axis is None else axis)
        inverse = inverse.reshape(-1)
        if not ordered:  # renumber in order of first occurrence
            order = np.argsort(first, kind="stable")
            values = np.take(values, order, axis=0 if axis is None else axis)
            first, counts = first[order], counts[order]
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            inverse = rank[inverse]
        return (values, first.astype(index_type), inverse.astype(index_type),
                counts.astype(count_type))[:n_outputs]

    return found
