"""Hoisted chunks of a chosen size, for tests of what hoisting does at chunk boundaries."""

import contextlib

import pytest

import cyloop
from cyloop.engine import chunks as _chunks

CHUNKS = [None, 1, 3]  # the default sizes, and boundaries at every row / every third row


@contextlib.contextmanager
def chunks_of(rows):
    """Chunks of exactly `rows` rows (the first included); None: the default sizes."""
    if not rows:
        yield
        return
    saved = _chunks.FIRST_CHUNK_ROWS, _chunks.MIN_CHUNK_ROWS, _chunks.MAX_CHUNK_ROWS
    _chunks.FIRST_CHUNK_ROWS = _chunks.MIN_CHUNK_ROWS = _chunks.MAX_CHUNK_ROWS = rows
    try:
        yield
    finally:
        _chunks.FIRST_CHUNK_ROWS, _chunks.MIN_CHUNK_ROWS, _chunks.MAX_CHUNK_ROWS = saved


def failures_of_both_drivers(model_of, feeds, chunk_rows, match: str) -> list[str]:
    """The messages of the `ExecutionError` (matching `match`) a run on `feeds` raises under the
    Cython driver, compiled with chunks of `chunk_rows` rows, and under the reference driver;
    `model_of(driver)` makes the model."""
    messages = []
    for driver in ("cython", "python"):
        with chunks_of(chunk_rows):
            model = model_of(driver)
        with pytest.raises(cyloop.ExecutionError, match=match) as info:
            model.run(feeds)
        messages.append(str(info.value))
    return messages
