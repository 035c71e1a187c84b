"""Object detection operators: NonMaxSuppression, RoiAlign and MaxRoiPool.

NonMaxSuppression's greedy selection is sequential by nature: each class of each batch element
runs a loop over the boxes it keeps, each step dropping, in one numpy expression, every remaining
candidate that overlaps the kept box too much. The overlap is computed in float32 in onnxruntime's
order of operations, so that a box whose IoU lands on the threshold is decided as there.

RoiAlign and MaxRoiPool loop over the regions (each has its own sampling grid); within a region,
every bin, sample point and channel is one numpy expression."""

import numpy as np

from .._spatial import roi_batches
from ..registry import kernel

_F32 = np.float32


def _corner_bounds(boxes, center_point_box):
    """(y_min, x_min, y_max, x_max) float32 arrays of [..., 4] boxes: [y1, x1, y2, x2] of any two
    opposite corners, or with `center_point_box` [x_center, y_center, width, height]."""
    boxes = boxes.astype(_F32, copy=False)
    if center_point_box:
        x, y = boxes[..., 0], boxes[..., 1]
        half_w, half_h = boxes[..., 2] / _F32(2), boxes[..., 3] / _F32(2)
        return y - half_h, x - half_w, y + half_h, x + half_w
    y_min = np.minimum(boxes[..., 0], boxes[..., 2])
    y_max = np.maximum(boxes[..., 0], boxes[..., 2])
    x_min = np.minimum(boxes[..., 1], boxes[..., 3])
    x_max = np.maximum(boxes[..., 1], boxes[..., 3])
    return y_min, x_min, y_max, x_max


def _overlapping(bounds, index, others, iou_threshold):
    """Which boxes `others` (indices) overlap box `index` by an IoU above `iou_threshold`; no
    box overlaps one of no area, nor one it does not intersect (onnxruntime's SuppressByIOU)."""
    y_min, x_min, y_max, x_max = bounds
    width = np.minimum(x_max[others], x_max[index]) - np.maximum(x_min[others], x_min[index])
    height = np.minimum(y_max[others], y_max[index]) - np.maximum(y_min[others], y_min[index])
    intersection = width * height
    area = (x_max[others] - x_min[others]) * (y_max[others] - y_min[others])
    area_index = (x_max[index] - x_min[index]) * (y_max[index] - y_min[index])
    union = area_index + area - intersection
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = intersection / union
    return ((width > 0) & (height > 0) & (intersection > 0) & (area > 0) & (area_index > 0)
            & (union > 0) & (iou > iou_threshold))


def _scalar_input(value, default, dtype):
    if value is None or not np.size(value):
        return default
    return dtype(np.asarray(value).reshape(-1)[0])


@kernel("NonMaxSuppression", since=10)
def non_max_suppression(attrs):
    """NonMaxSuppression-10 and 11: (boxes [B, N, 4], scores [B, C, N][, max_output_boxes_per_class,
    iou_threshold, score_threshold]) -> selected_indices [K, 3] int64 (batch, class, box).

    For each batch element and class: the boxes whose score passes ``score_threshold`` (all of
    them when it is omitted), best score first, the lower index first among equal scores; each
    is kept unless it overlaps a box kept before it by an IoU above ``iou_threshold``, until
    ``max_output_boxes_per_class`` are kept (none by default). The result lists them by batch,
    class, then the order they were kept in."""
    center_point_box = int(attrs.get("center_point_box", 0))
    if center_point_box not in (0, 1):
        raise ValueError(f"center_point_box must be 0 or 1, got {center_point_box}")

    def suppress(boxes, scores, max_boxes=None, iou_threshold=None, score_threshold=None):
        if boxes.ndim != 3 or boxes.shape[-1] != 4 or scores.ndim != 3 \
                or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
            raise ValueError(f"NonMaxSuppression needs boxes [B, N, 4] and scores [B, C, N] of "
                             f"one B and N, got {list(boxes.shape)} and {list(scores.shape)}")
        limit = max(_scalar_input(max_boxes, 0, int), 0)
        iou = _scalar_input(iou_threshold, _F32(0), _F32)
        if not 0 <= iou <= 1:
            raise ValueError(f"NonMaxSuppression's iou_threshold must be in [0, 1], got {iou}")
        bounds = _corner_bounds(boxes, center_point_box)
        scores = scores.astype(_F32, copy=False)
        found = []
        for batch in range(scores.shape[0] if limit else 0):
            batch_bounds = tuple(b[batch] for b in bounds)
            for class_ in range(scores.shape[1]):
                class_scores = scores[batch, class_]
                order = np.argsort(-class_scores, kind="stable")  # (ties: lower index first)
                if score_threshold is not None and np.size(score_threshold):
                    order = order[class_scores[order] > _scalar_input(score_threshold, 0, _F32)]
                kept = []
                while order.size and len(kept) < limit:
                    best, order = order[0], order[1:]
                    kept.append(best)
                    order = order[~_overlapping(batch_bounds, best, order, iou)]
                selected = np.empty((len(kept), 3), np.int64)
                selected[:, 0], selected[:, 1], selected[:, 2] = batch, class_, kept
                found.append(selected)
        return np.concatenate(found) if found else np.empty((0, 3), np.int64)

    return suppress


def _working(dtype):
    """The float type a region's coordinates and samples are computed in."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _bilinear_corners(positions, size):
    """(low, high, low weight, high weight) of onnxruntime's RoiAlign bilinear sampling at
    `positions` along an axis of `size`: a position below -1 or past `size` reads nothing (both
    weights 0); one in [-1, 0] reads position 0, one at or past size - 1 the last one."""
    dtype = positions.dtype.type
    outside = (positions < -1) | (positions > size)
    clamped = np.maximum(positions, dtype(0))
    low = clamped.astype(np.intp)
    last = low >= size - 1
    low = np.where(last, size - 1, low)
    high = np.where(last, low, low + 1)
    clamped = np.where(last, low.astype(dtype), clamped)
    fraction = clamped - low
    w_low, w_high = dtype(1) - fraction, fraction
    w_low[outside] = 0
    w_high[outside] = 0
    low[outside] = 0
    high[outside] = 0
    return low, high, w_low, w_high


def _roi_align(attrs, half_pixel):
    average = attrs.get("mode", "avg")
    if average not in ("avg", "max"):
        raise ValueError(f"RoiAlign mode must be avg or max, got {average!r}")
    average = average == "avg"
    pooled = (int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1)))
    if min(pooled) < 1:
        raise ValueError(f"RoiAlign needs positive output_height and output_width, got {pooled}")
    sampling_ratio = int(attrs.get("sampling_ratio", 0))
    if sampling_ratio < 0:
        raise ValueError(f"RoiAlign sampling_ratio must not be negative, got {sampling_ratio}")
    spatial_scale = float(attrs.get("spatial_scale", 1.0))

    def align(x, rois, batch_indices):
        batches = roi_batches("RoiAlign", x, rois, batch_indices)
        work = _working(x.dtype)
        height, width = x.shape[2:]
        boxes = rois.astype(work) * work.type(spatial_scale)
        if half_pixel:
            boxes -= work.type(0.5)
        sizes = boxes[:, 2:] - boxes[:, :2]  # (width, height)
        if not half_pixel:  # (a malformed box is a box of 1 x 1)
            sizes = np.maximum(sizes, work.type(1))
        bins = sizes / np.array(pooled[::-1], work)  # (bin width, bin height)
        if sampling_ratio:
            grids = np.full(sizes.shape, sampling_ratio, np.int64)
        else:
            grids = np.ceil(bins).astype(np.int64)
        out = np.empty((rois.shape[0], x.shape[1]) + pooled, x.dtype)
        maps = x.astype(work, copy=False)
        for k, batch in enumerate(batches.tolist()):
            axes = []
            for axis, size, bins_k in ((1, height, pooled[0]), (0, width, pooled[1])):
                count = max(int(grids[k, axis]), 0)
                step = bins[k, axis]
                offsets = (np.arange(count, dtype=work) + work.type(0.5)) * step \
                    / work.type(max(count, 1))
                positions = boxes[k, axis] + (np.arange(bins_k, dtype=work) * step)[:, None] \
                    + offsets[None, :]
                axes.append((_bilinear_corners(positions.reshape(-1), size), count))
            (ys, count_y), (xs, count_x) = axes
            if not count_y or not count_x:  # (no sample point: the average of none is 0)
                out[k] = 0
                continue
            image = maps[batch]
            corners = [image[:, ys[i][:, None], xs[j][None, :]] * (ys[2 + i][:, None]
                                                                     * xs[2 + j][None, :])
                       for i in (0, 1) for j in (0, 1)]  # 4 x [C, bins_h * n_y, bins_w * n_x]
            shape = (x.shape[1], pooled[0], count_y, pooled[1], count_x)
            if average:
                total = (corners[0] + corners[1]) + (corners[2] + corners[3])
                out[k] = total.reshape(shape).sum(axis=(2, 4)) / work.type(count_y * count_x)
            else:  # (onnxruntime's max: of each sample's largest weighted corner)
                largest = np.maximum(np.maximum(np.maximum(corners[0], corners[1]), corners[2]),
                                     corners[3])
                out[k] = largest.reshape(shape).max(axis=(2, 4))
        return out

    return align


@kernel("RoiAlign", since=10)
def roi_align_10(attrs):
    """RoiAlign-10: (X [N, C, H, W], rois [R, 4] of (x1, y1, x2, y2), batch_indices [R]) ->
    [R, C, output_height, output_width]. Each region, scaled by ``spatial_scale`` (and at least
    1 x 1), splits into bins, each sampled at a grid of ``sampling_ratio`` points a side (or
    ceil(bin size) when 0) at the centres of its cells, read bilinearly; a bin is their mean or,
    with mode max, the largest of each point's weighted corners."""
    return _roi_align(attrs, half_pixel=False)


@kernel("RoiAlign", since=16)
def roi_align_16(attrs):
    """RoiAlign-16 and 22: with ``coordinate_transformation_mode`` half_pixel (the default), the
    scaled corners shift by -0.5 and a region keeps its size however small; output_half_pixel
    is RoiAlign-10's."""
    mode = attrs.get("coordinate_transformation_mode", "half_pixel")
    if mode not in ("half_pixel", "output_half_pixel"):
        raise ValueError(f"RoiAlign coordinate_transformation_mode must be half_pixel or "
                         f"output_half_pixel, got {mode!r}")
    return _roi_align(attrs, half_pixel=mode == "half_pixel")


@kernel("MaxRoiPool", since=1)
def max_roi_pool(attrs):
    """MaxRoiPool-1 and 22: (X [N, C, H, W], rois [R, 5] of (batch, x1, y1, x2, y2)) -> [R, C,
    pooled_h, pooled_w]. A region's corners, scaled by ``spatial_scale`` and rounded, span at
    least 1 x 1 positions; bin (i, j) is the maximum over rows floor(i h / pooled_h) to
    ceil((i + 1) h / pooled_h) (clipped to the map) and the columns likewise, or 0 if empty."""
    pooled = [int(v) for v in attrs["pooled_shape"]]
    if len(pooled) != 2 or min(pooled) < 1:
        raise ValueError(f"MaxRoiPool needs pooled_shape of two positive sizes, got {pooled}")
    spatial_scale = float(attrs.get("spatial_scale", 1.0))

    def bin_edges(start, extent, bins, size):
        step = _F32(extent) / _F32(bins)  # (in float32, as onnxruntime)
        index = np.arange(bins, dtype=_F32)
        low = np.clip(np.floor(index * step).astype(np.int64) + start, 0, size)
        high = np.clip(np.ceil((index + _F32(1)) * step).astype(np.int64) + start, 0, size)
        return low, high

    def pool(x, rois):
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
            raise ValueError(f"MaxRoiPool needs X [N, C, H, W] and rois [R, 5], got "
                             f"{list(x.shape)} and {list(rois.shape)}")
        height, width = x.shape[2:]
        out = np.zeros((rois.shape[0], x.shape[1]) + tuple(pooled), x.dtype)
        scaled = rois[:, 1:].astype(_working(x.dtype)) * _working(x.dtype).type(spatial_scale)
        # (C's round: halves away from 0)
        corners = (np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)).astype(np.int64)
        for k, batch in enumerate(rois[:, 0].astype(np.int64).tolist()):
            if not 0 <= batch < x.shape[0]:
                raise ValueError(f"MaxRoiPool: region {k} names batch {batch}, X has "
                                 f"{x.shape[0]}")
            x1, y1, x2, y2 = corners[k].tolist()
            rows = bin_edges(y1, max(y2 - y1 + 1, 1), pooled[0], height)
            cols = bin_edges(x1, max(x2 - x1 + 1, 1), pooled[1], width)
            # A mask per bin and axis ([bins, size]); the maximum over a bin's rectangle.
            row_mask = (np.arange(height) >= rows[0][:, None]) \
                & (np.arange(height) < rows[1][:, None])
            col_mask = (np.arange(width) >= cols[0][:, None]) \
                & (np.arange(width) < cols[1][:, None])
            lowest = np.array(-np.inf, x.dtype)
            by_rows = np.where(row_mask[None, :, :, None], x[batch][:, None], lowest).max(
                axis=2, initial=lowest)  # [C, pooled_h, W]
            maxima = np.where(col_mask[None, None], by_rows[:, :, None], lowest).max(
                axis=3, initial=lowest)  # [C, pooled_h, pooled_w]
            empty = (rows[1] <= rows[0])[:, None] | (cols[1] <= cols[0])[None, :]
            out[k] = np.where(empty, 0, maxima)
        return out

    return pool
