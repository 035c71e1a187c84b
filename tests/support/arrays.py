"""Where arrays live: copies at a chosen offset from an alignment boundary, addresses, and the
arrays a graph holds."""

import numpy as np

__all__ = ["address", "at_offset", "held_arrays"]


def at_offset(values, offset):
    """A C-contiguous copy of `values` starting `offset` bytes past a 64-byte boundary."""
    raw = np.empty(values.nbytes + 2 * 64, np.uint8)
    start = -raw.ctypes.data % 64 + offset
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


def address(a):
    return a.__array_interface__["data"][0]


def held_arrays(graph):
    """Every array a graph holds (initializers, node attributes), its subgraphs' included."""
    found = [a for a in graph.initializers.values() if isinstance(a, np.ndarray)]
    for node in graph.nodes:
        found += [a for a in node.attrs.values() if isinstance(a, np.ndarray)]
        for body in node.subgraphs():
            found += held_arrays(body)
    return found
