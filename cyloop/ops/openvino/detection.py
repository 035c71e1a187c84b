"""Object detection layers of OpenVINO IR: NonMaxSuppression-9.

NonMaxSuppression follows OpenVINO's reference implementation step by step (a priority queue per
class, scores rescored lazily against the boxes selected since a candidate was last seen), in
float32 as it computes, so that which box survives a tie or a threshold is decided as there."""

import functools
import heapq

import numpy as np

from ..registry import kernel
from ._attrs import DOMAIN, as_bool, as_choice, as_dtype

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
