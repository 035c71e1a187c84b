"""`Model.run_batched`'s mechanics: feeds split into chunks along a batch axis, the chunks run on
an executor (none, anything with `submit`, or a `dask.distributed.Client`), and the results
joined back in order."""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np

from .errors import InputError

__all__ = ["join_outputs", "run_chunks", "split_feeds"]


def _axis_of(axes, name: str, rank: int, what: str) -> int | None:
    """The axis `axes` (an int for every name, or a mapping) gives `name`, checked against
    `rank`; None (or a name the mapping lacks): not split / not joined."""
    axis = axes.get(name) if isinstance(axes, Mapping) else axes
    if axis is None:
        return None
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise InputError(f"{what} {name!r}: the batch axis must be an integer or None, not "
                         f"{type(axis).__name__} {axis!r}")
    if not -rank <= axis < rank:
        raise InputError(f"{what} {name!r}: batch axis {axis} is out of range for rank {rank}")
    return int(axis) % rank


def split_feeds(feeds: dict, batch_axis, chunk_size) -> list[dict]:
    """`feeds` as chunks of `chunk_size` along each split input's batch axis (views, in order);
    inputs `batch_axis` does not split go whole into every chunk."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral) \
            or chunk_size < 1:
        raise InputError(f"chunk_size must be a positive integer, not {chunk_size!r}")
    if not isinstance(feeds, dict):
        raise InputError(f"feeds must be a dict of input name -> array, not "
                         f"{type(feeds).__name__}")
    if isinstance(batch_axis, Mapping):
        unknown = sorted(set(batch_axis) - set(feeds), key=str)
        if unknown:
            raise InputError(f"batch_axis names inputs that are not fed: {unknown}")
    split, sizes = {}, {}
    for name, value in feeds.items():
        if isinstance(value, (list, tuple)) and isinstance(batch_axis, Mapping) \
                and batch_axis.get(name) is None:
            continue  # a sequence input, passed whole
        array = np.asarray(value) if not isinstance(value, np.ndarray) else value
        axis = _axis_of(batch_axis, name, max(array.ndim, 1), "input")
        if axis is None:
            continue
        if array.ndim == 0:
            raise InputError(f"input {name!r} is a scalar: it has no batch axis to split (give "
                             "batch_axis as a dict, with None for inputs every chunk takes whole)")
        split[name], sizes[name] = (array, axis), array.shape[axis]
    if not split:
        raise InputError("batch_axis splits no input")
    if len(set(sizes.values())) > 1:
        raise InputError(f"the split inputs disagree on the batch size: {sizes}")
    total = next(iter(sizes.values()))
    chunks = []
    for start in range(0, max(total, 1), chunk_size):
        chunk = dict(feeds)
        for name, (array, axis) in split.items():
            index = [slice(None)] * array.ndim
            index[axis] = slice(start, start + chunk_size)
            chunk[name] = array[tuple(index)]
        chunks.append(chunk)
    return chunks


def run_chunk(model, feeds: dict, output_names, time_limit):
    """One chunk's run (a module-level function, so that executors can pickle it)."""
    return model.run(feeds, output_names, time_limit=time_limit)


def run_chunks(model, chunks: list[dict], executor, output_names, time_limit) -> list[dict]:
    """Every chunk's outputs, in order: here, on an executor (anything whose ``submit(fn,
    *args)`` returns a future with ``result()``: a `concurrent.futures.Executor`, Ray tasks
    behind a small adapter), or on a `dask.distributed.Client` (which gets the model once per
    worker)."""
    args = (output_names, time_limit)
    if executor is None:
        return [run_chunk(model, chunk, *args) for chunk in chunks]
    if hasattr(executor, "scatter") and hasattr(executor, "gather"):  # dask.distributed.Client
        [shared] = executor.scatter([model], broadcast=True)
        futures = [executor.submit(run_chunk, shared, chunk, *args, pure=False)
                   for chunk in chunks]
        return executor.gather(futures)
    if not hasattr(executor, "submit"):
        raise InputError(f"executor must be None, a dask.distributed.Client or an object "
                         f"whose submit(fn, *args) returns a future (a "
                         f"concurrent.futures.Executor), not {type(executor).__name__}")
    futures = [executor.submit(run_chunk, model, chunk, *args) for chunk in chunks]
    return [future.result() for future in futures]


def join_outputs(results: list[dict], output_axis) -> dict:
    """The chunks' outputs joined along each one's batch axis (`output_axis`: an int for every
    output, or a mapping; None: the output does not depend on the batch, the first chunk's)."""
    if isinstance(output_axis, Mapping):
        unsaid = [name for name in results[0] if name not in output_axis]
        if unsaid:
            raise InputError(f"output_axis does not say how to join outputs {unsaid} (an axis, "
                             "or None for an output every chunk gives whole)")
    joined = {}
    for name, first in results[0].items():
        if first is None or isinstance(first, list):
            if isinstance(output_axis, Mapping) and output_axis[name] is None:
                joined[name] = first
                continue
            kind = "an empty optional" if first is None else "a sequence"
            raise InputError(f"output {name!r} is {kind}: it cannot be joined along a batch "
                             "axis (give output_axis as a dict, with None for it)")
        axis = _axis_of(output_axis, name, max(first.ndim, 1), "output")
        if axis is None:
            joined[name] = first
        elif first.ndim == 0:
            raise InputError(f"output {name!r} is a scalar: it has no batch axis to join on "
                             "(give output_axis as a dict, with None for it)")
        else:
            joined[name] = np.concatenate([r[name] for r in results], axis=axis) \
                if len(results) > 1 else first
    return joined
