"""Shape helpers both op families share."""

import numpy as np

__all__ = ["unsqueeze"]


def unsqueeze(x, axes):
    """``np.expand_dims(x, axes)`` as one reshape: axes index the result (negative from its end).

    expand_dims normalizes its axes in Python, which costs several times the reshape itself on
    the small tensors loop bodies pass around; bad axes still get numpy's own error."""
    axes = axes.tolist() if isinstance(axes, np.ndarray) else np.asarray(axes).tolist()
    if not isinstance(axes, list):
        axes = [axes]  # a 0-d array
    array = isinstance(x, np.ndarray)
    shape = list(x.shape) if array else list(np.shape(x))
    rank = len(shape) + len(axes)
    positions = sorted([a + rank if a < 0 else a for a in axes])
    if (not positions or len(set(positions)) != len(positions) or positions[0] < 0
            or positions[-1] >= rank):
        return np.expand_dims(x, tuple(axes))
    for a in positions:
        shape.insert(a, 1)
    return x.reshape(shape) if array else np.reshape(x, shape)
