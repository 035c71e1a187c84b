"""cyloop: a fast engine for the loops inside ML models.

Graphs built with `GraphBuilder` (or lowered from a model format by a frontend) compile into a
`Model`; every loop runs on one Cython driver whose memory planner slices inputs as views, hands
back edges over in place and writes scan outputs straight into their final position.
"""

import os as _os

try:  # the compiled core first, so that a missing build says what to do
    from .engine import _core  # noqa: F401
except ImportError as _error:
    raise ImportError(
        f"cyloop's compiled core (cyloop.engine._core, a Cython extension) cannot be imported "
        f"from {_os.path.dirname(_os.path.abspath(__file__))} ({_error}). In a source checkout "
        "(an unpacked sdist, a git clone), build it in place with `pip install -e .`; if cyloop "
        "is installed elsewhere, run Python from another directory, so that this checkout does "
        "not shadow it.") from _error

from .engine._core import release_memory
from .errors import (
    CyloopError,
    ExecutionError,
    InputError,
    LoopCarryError,
    LoopLimitError,
    ModelError,
    ModelNotFoundError,
    ResourceLimitError,
    UnsupportedOpError,
)
from .functional import fori_loop, scan, while_loop
from .ir import (
    CarriedInput,
    ConcatOutput,
    Graph,
    GraphBuilder,
    InvariantInput,
    LastOutput,
    LoopSpec,
    Node,
    SlicedInput,
    Value,
)
from .loading import load
from .model import Model

__version__ = "0.1.0"

__all__ = [
    "CarriedInput",
    "ConcatOutput",
    "CyloopError",
    "ExecutionError",
    "Graph",
    "GraphBuilder",
    "InputError",
    "InvariantInput",
    "LastOutput",
    "LoopCarryError",
    "LoopLimitError",
    "LoopSpec",
    "Model",
    "ModelError",
    "ModelNotFoundError",
    "Node",
    "ResourceLimitError",
    "SlicedInput",
    "UnsupportedOpError",
    "Value",
    "__version__",
    "fori_loop",
    "load",
    "release_memory",
    "scan",
    "while_loop",
]
