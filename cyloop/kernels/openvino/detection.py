"""Object detection layers of OpenVINO IR: NonMaxSuppression-9 and ROIAlign-3/9.

NonMaxSuppression follows OpenVINO's reference implementation step by step (a priority queue per
class, scores rescored lazily against the boxes selected since a candidate was last seen), in
float32 as it computes, so that which box survives a tie or a threshold is decided as there."""

import functools
import heapq

import numpy as np

from .._ir_attrs import DOMAIN, as_bool, as_choice, as_dtype, as_float, as_int
from .._spatial import roi_batches
from ..registry import kernel

_F32 = np.float32


def _corners(boxes, encoding):
    """[..., 4] boxes as float32 (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2: corner boxes give
    any two opposite corners, center boxes (x_center, y_center, width, height)."""
    boxes = boxes.astype(_F32)
    if encoding == "center":
        x, y, half_w, half_h = boxes[..., 0], boxes[..., 1], boxes[..., 2] / 2, boxes[..., 3] / 2
        return np.stack([y - half_h, x - half_w, y + half_h, x + half_w], axis=-1)
    y = np.sort(boxes[..., 0::2], axis=-1)
    x = np.sort(boxes[..., 1::2], axis=-1)
    return np.stack([y[..., 0], x[..., 0], y[..., 1], x[..., 1]], axis=-1)


def _iou(a, b):
    """Intersection over union of two (y1, x1, y2, x2) float32 boxes; 0 if either is empty."""
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    if area_a <= 0 or area_b <= 0:
        return _F32(0)
    height = max(min(a[2], b[2]) - max(a[0], b[0]), _F32(0))
    width = max(min(a[3], b[3]) - max(a[1], b[1]), _F32(0))
    intersection = height * width
    return intersection / (area_a + area_b - intersection)


def _select(boxes, scores, limit, iou_threshold, score_threshold, sigma):
    """[(box index, score)] one class keeps, in the order it keeps them.

    Candidates (score > score_threshold) come off a queue best first, the lower index first
    among equals. A candidate is weighed against each box selected since it was last queued,
    newest first: hard NMS (sigma 0) drops it at an IoU past iou_threshold; Soft-NMS scales its
    score by exp(-0.5 IoU^2 / sigma) (and by 0 past iou_threshold). Unchanged, it is selected;
    lowered but still above score_threshold, it is queued again."""
    scale = _F32(-0.5) / sigma if sigma > 0 else _F32(0)
    soft = sigma > 0
    queue = [(-score, int(index), 0) for index, score in enumerate(scores)
             if score > score_threshold]
    heapq.heapify(queue)
    selected = []
    while queue and len(selected) < limit:
        negative, index, first = heapq.heappop(queue)
        original = score = -negative
        suppressed = False
        for j in range(len(selected) - 1, first - 1, -1):
            iou = _iou(boxes[index], boxes[selected[j][0]])
            weight = np.exp(scale * iou * iou) if soft or iou <= iou_threshold else _F32(0)
            score = _F32(score * weight)
            if iou > iou_threshold and not soft:
                suppressed = True
                break
            if score <= score_threshold:
                break
        if suppressed:
            continue
        if score == original:
            selected.append((index, score))
        elif score > score_threshold:
            heapq.heappush(queue, (-score, index, len(selected)))
    return selected


def _by_score(left, right):
    """The order of a descending sort across batches and classes: score (equal within 1e-6),
    then batch, class and box index."""
    if abs(left[3] - right[3]) >= 1e-6:
        return -1 if left[3] > right[3] else 1
    return (left[:3] > right[:3]) - (left[:3] < right[:3])


def _scalar(value, default, dtype):
    return default if value is None or not np.size(value) else \
        dtype(np.asarray(value).reshape(-1)[0])


@kernel("NonMaxSuppression", domain=DOMAIN, since=9, multi=True)
def non_max_suppression(attrs, n_outputs):
    """(boxes [B, N, 4], scores [B, C, N][, max_output_boxes_per_class, iou_threshold,
    score_threshold, soft_nms_sigma]) -> selected_indices [K, 3] (batch, class, box),
    selected_scores [K, 3] (batch, class, score), valid_outputs [1] = K. Each class of each batch
    element is suppressed on its own (`_select`); ``sort_result_descending`` orders the result
    by score across them all, else it stays by batch, class and selection."""
    encoding = as_choice(attrs, "box_encoding", ("corner", "center"))
    descending = as_bool(attrs, "sort_result_descending", True)
    index_type = as_dtype(attrs, "output_type", np.int64)

    def suppress(boxes, scores, max_boxes=None, iou_threshold=None, score_threshold=None,
                 sigma=None):
        if boxes.ndim != 3 or boxes.shape[-1] != 4 or scores.ndim != 3 \
                or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
            raise ValueError(f"NonMaxSuppression needs boxes [B, N, 4] and scores [B, C, N], "
                             f"got {list(boxes.shape)} and {list(scores.shape)}")
        limit = _scalar(max_boxes, 0, int)
        thresholds = [_scalar(v, _F32(0), _F32) for v in (iou_threshold, score_threshold, sigma)]
        corners = _corners(boxes, encoding)
        found = []  # (batch, class, box, score)
        for batch in range(scores.shape[0]):
            for class_ in range(scores.shape[1]):
                kept = _select(corners[batch], scores[batch, class_].astype(_F32), limit,
                               *thresholds)
                found += [(batch, class_, index, score) for index, score in kept]
        if descending:
            found.sort(key=functools.cmp_to_key(_by_score))
        indices = np.array([entry[:3] for entry in found], index_type).reshape(-1, 3)
        score_type = scores.dtype if scores.dtype.kind == "f" else np.dtype(_F32)
        chosen = np.array(found, score_type).reshape(-1, 4)[:, [0, 1, 3]]
        valid = np.array([len(found)], index_type)
        return (indices, chosen, valid)[:n_outputs]

    return suppress


# ROIAlign-9's aligned_mode: (added to a box coordinate before the spatial scale, after it).
# A bound on sampling_ratio 0's points a side of a bin (a box far larger than its feature map
# would otherwise ask for any number of them).
_MAX_ADAPTIVE_SAMPLES = 1 << 16
_ALIGNED_OFFSETS = {"asymmetric": (0.0, 0.0), "half_pixel_for_nn": (0.0, -0.5),
                    "half_pixel": (0.5, -0.5)}


def _bilinear_taps(positions, size):
    """(low index, high index, low weight, high weight, inside) of bilinear sampling at
    `positions` along an axis of `size`: a position below -1 or past `size` is outside (it
    weighs nothing), one in [-1, 0] reads position 0, one at or past size - 1 the last."""
    inside = (positions >= -1) & (positions <= size)  # (False for NaN)
    clamped = np.where(inside, np.clip(positions, 0, size - 1), 0)
    low = clamped.astype(np.intp)
    high = np.where(low >= size - 1, low, low + 1)
    fraction = clamped - low.astype(clamped.dtype)
    return low, high, 1 - fraction, fraction, inside


def _interpolate_axis(data, axis, positions):
    """`data` read bilinearly at `positions` along `axis` (outside positions give 0)."""
    low, high, w_low, w_high, inside = _bilinear_taps(positions, data.shape[axis])
    shape = (-1,) + (1,) * (data.ndim - axis - 1)
    w_low = np.where(inside, w_low, 0).reshape(shape)
    w_high = np.where(inside, w_high, 0).reshape(shape)
    return np.take(data, low, axis=axis) * w_low + np.take(data, high, axis=axis) * w_high


def _align_box(features, box, pooled, sampling_ratio, average):
    """One box's [C, pooled_h, pooled_w] of `features` [C, H, W]: `box` (x1, y1, width,
    height) in feature coordinates is divided into pooled_h x pooled_w bins, each sampled at a
    grid of points (``sampling_ratio`` a side, or ceil(bin size) when 0) at the centres of its
    cells; each point is read bilinearly (0 outside [-1, size]), and a bin is the mean of its
    points or, with max, the largest of them and 0."""
    x1, y1, width, height = box
    grids = []
    for start, extent, bins in ((y1, height, pooled[0]), (x1, width, pooled[1])):
        step = extent / extent.dtype.type(bins)
        if not sampling_ratio and not (np.isfinite(step) and step <= _MAX_ADAPTIVE_SAMPLES):
            raise ValueError(f"ROIAlign with sampling_ratio 0 samples a bin {step} wide or "
                             f"high at ceil({step}) points a side; cyloop takes at most "
                             f"{_MAX_ADAPTIVE_SAMPLES}")
        count = sampling_ratio or int(np.ceil(step))
        if count <= 0:  # an empty box with an adaptive grid: no sample point, and so 0
            return np.zeros((features.shape[0],) + tuple(pooled), features.dtype)
        spacing = step / extent.dtype.type(count)
        cells = np.arange(bins, dtype=extent.dtype)[:, None] * step \
            + spacing * (np.arange(count, dtype=extent.dtype) + extent.dtype.type(0.5))[None, :]
        grids.append((start + cells, count))
    (rows, count_y), (columns, count_x) = grids
    # Bilinear reading is separable: the rows first ([C, bins_h * count_y, W]), then columns.
    sampled = _interpolate_axis(features, 1, rows.reshape(-1))
    sampled = _interpolate_axis(sampled, 2, columns.reshape(-1))
    sampled = sampled.reshape(features.shape[0], pooled[0], count_y, pooled[1], count_x)
    if average:
        return sampled.mean(axis=(2, 4))
    return np.maximum(sampled.max(axis=(2, 4)), 0)


def _roi_align(attrs, aligned_mode):
    pooled = (as_int(attrs, "pooled_h"), as_int(attrs, "pooled_w"))
    if any(p is None or p < 1 for p in pooled):
        raise ValueError(f"ROIAlign needs positive pooled_h and pooled_w, got {pooled}")
    sampling_ratio = as_int(attrs, "sampling_ratio", 0)
    if sampling_ratio < 0:
        raise ValueError(f"ROIAlign sampling_ratio must not be negative, got {sampling_ratio}")
    spatial_scale = as_float(attrs, "spatial_scale", 1.0)
    average = as_choice(attrs, "mode", ("avg", "max")) == "avg"
    before, after = _ALIGNED_OFFSETS[aligned_mode]

    def align(features, rois, batch_indices):
        batches = roi_batches("ROIAlign", features, rois, batch_indices)
        # Coordinates in the maps' precision (float16 and bfloat16 in float32), as OpenVINO.
        work = np.dtype(np.float64) if features.dtype == np.float64 else np.dtype(np.float32)
        boxes = (rois.astype(work) + work.type(before)) * work.type(spatial_scale) \
            + work.type(after)
        sizes = boxes[:, 2:] - boxes[:, :2]  # (width, height)
        if aligned_mode == "asymmetric":  # a malformed box is a box of 1 x 1
            sizes = np.maximum(sizes, work.type(1))
        maps = features.astype(work, copy=False)
        out = np.empty((rois.shape[0], features.shape[1]) + pooled, features.dtype)
        for k, batch in enumerate(batches):
            box = (boxes[k, 0], boxes[k, 1], sizes[k, 0], sizes[k, 1])
            out[k] = _align_box(maps[batch], box, pooled, sampling_ratio, average)
        return out

    return align


@kernel("ROIAlign", domain=DOMAIN, since=3)
def roi_align_3(attrs):
    """(feature maps [N, C, H, W], rois [R, 4] of (x1, y1, x2, y2), batch indices [R]) ->
    [R, C, pooled_h, pooled_w] (`_align_box`): the box corners times ``spatial_scale``, its
    width and height at least 1."""
    return _roi_align(attrs, "asymmetric")


@kernel("ROIAlign", domain=DOMAIN, since=9)
def roi_align_9(attrs):
    """ROIAlign-3 with ``aligned_mode``: asymmetric (ROIAlign-3's), half_pixel_for_nn (corners
    scaled, less a half, any size) or half_pixel (corners plus a half, scaled, less a half)."""
    return _roi_align(attrs, as_choice(attrs, "aligned_mode", tuple(_ALIGNED_OFFSETS)))
