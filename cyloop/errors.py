"""The exceptions cyloop raises.

Every error is a `CyloopError`, itself a `ValueError`, so callers can catch one type; each subclass
also inherits the built-in that matches its meaning.
"""

import errno

__all__ = [
    "CyloopError",
    "ExecutionError",
    "InputError",
    "LoopCarryError",
    "LoopLimitError",
    "ModelError",
    "ModelNotFoundError",
    "ResourceLimitError",
    "UnsupportedOpError",
]


class CyloopError(ValueError):
    """Base class of every error cyloop raises on purpose."""


class ModelError(CyloopError):
    """The model is malformed: the message names the node or layer, the op and the port."""


class ModelNotFoundError(ModelError, FileNotFoundError):
    """The model file does not exist: a `ModelError`, and the `FileNotFoundError` (errno ENOENT,
    `filename` the path) Python code catches for a missing file."""

    def __init__(self, path: str):
        super().__init__(f"{path}: no such file")
        self.errno, self.strerror, self.filename = errno.ENOENT, "no such file", path

    __str__ = BaseException.__str__  # ("PATH: no such file", not OSError's "[Errno 2] ...")

    def __reduce__(self):  # (pickled by its path, as it is made)
        return type(self), (self.filename,)


class InputError(CyloopError, TypeError):
    """The feeds do not match the model's inputs: the message names the input, expected vs got."""


class UnsupportedOpError(ModelError, NotImplementedError):
    """No kernel is registered for an op: names the op, domain, version and what exists."""


class LoopLimitError(CyloopError, RuntimeError):
    """A run reached `max_iterations` (its loops' iterations in all) or `time_limit` before it
    finished: names the loop, the iteration it reached and the limit."""


class ResourceLimitError(CyloopError, MemoryError):
    """An allocation would pass `memory_limit`, or the system refused one: names the node, the
    shape and the limit. Raised before the planner allocates."""


class ExecutionError(CyloopError, RuntimeError):
    """A kernel failed while the model ran: names the node and the op, chained to the cause."""


class LoopCarryError(CyloopError, TypeError):
    """A loop's carry (or a scan's per-step output) changed structure, shape or dtype between
    iterations of the functional API: names the component's path and both types."""
