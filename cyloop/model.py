"""`Model`: a compiled graph with validated feeds, safe outputs, its plan and its counters."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from .batching import join_outputs, run_chunks, split_feeds
from .engine._core import RunLimits, accepted_arguments, handed_outputs
from .engine.compile import compile_graph, program
from .engine.settings import DEFAULT_MAX_ITERATIONS, Settings, time_limit_of
from .errors import InputError
from .ir import Graph, Value
from .sequence import TensorSequence

if TYPE_CHECKING:
    from .engine.plan import Plan

__all__ = ["Model"]

_MODELS = object()  # Model.run's time_limit when not given: the model's own


class Model:
    """A graph compiled once and run many times.

    ``driver``: ``"cython"`` (default) or ``"python"`` (the reference driver; the default when
    ``CYLOOP_PURE_PYTHON=1``).
    Limits, each None for none: ``max_iterations`` (default 10^8), the iterations one run may make
    in all its loops, nested ones included: the iteration that would pass it raises
    `LoopLimitError`, and a loop whose trip count would pass what is left is refused before its
    first iteration. ``time_limit`` (default None; `run` may give its own), the seconds one run
    may take: a loop that finds it passed raises `LoopLimitError` naming the loop, the iteration
    and the limit (loops read the clock every few milliseconds of work, so it is exact to about
    that, or to one iteration of a slow body). ``memory_limit`` (default None), the bytes any one
    buffer the planner allocates may take: a concatenated output grows up to it, and the
    allocation that would pass it raises `ResourceLimitError` naming the loop, the shape and the
    limit before it is made (one whose trip count is known, as soon as its size is). A kernel
    that runs out of memory raises `ResourceLimitError` too.
    ``progress``: ``progress(label, done, total, finished)`` is called every
    1,024 iterations (``cyloop.tuning.PROGRESS_EVERY``) of each loop and when it ends (total is
    None when unknown).
    ``hoist``: the Cython driver runs body work that depends only on sliced inputs, the iteration
    number and loop invariants before the loop, many iterations at once (results agree to
    rounding; see ``cyloop/engine/hoist.py``), where a trial of whole runs finds it faster than
    running that work in the loop (``cyloop/engine/hoist_choice.py``; tune=False keeps it
    hoisted); False runs every body as written.
    ``tune``: where a kernel has equivalent formulations (an LSTM step's gates fused through one
    tanh or split), it runs its default first and, once the work on a shape has paid for a
    trial, times them and keeps the fastest on this machine; `plan()` shows the choice and the
    times, or that the default runs until the work pays. ``tune="at once"`` times them from
    the first calls. Results agree to rounding whichever runs; False keeps each kernel's
    default, for runs that must repeat bit for bit (on one machine: another CPU's BLAS kernels
    round differently).
    """

    def __init__(self, graph: Graph, *, driver: str | None = None,
                 max_iterations: int | None = DEFAULT_MAX_ITERATIONS,
                 time_limit: float | None = None, memory_limit: int | None = None,
                 progress=None, hoist: bool = True, tune: bool | str = True):
        self.graph = graph
        self.settings = Settings.make(driver, max_iterations, progress, hoist, tune, time_limit,
                                      memory_limit)
        self._compiled = compile_graph(graph, self.settings)
        self._program = program(self._compiled, self.settings)
        self._output_index = {v.name: k for k, v in enumerate(graph.outputs)}
        self._output_names = [v.name for v in graph.outputs]  # (read, never changed, by `run`)
        # An input that is also an initializer may be fed; otherwise it takes that value.
        self._defaults = {v.name: graph.initializers[v.name] for v in graph.inputs
                          if v.name in graph.initializers}
        # The last feeds accepted, as (how many, what each declared input took): feeds of the
        # same names, dtypes and shapes pass every check again (`_check_feeds`).
        self._accepted: tuple[int, tuple] | None = None

    @property
    def input_names(self) -> list[str]:
        """The inputs a run needs (inputs with a default value are not listed, but accepted)."""
        return [v.name for v in self.graph.inputs if v.name not in self._defaults]

    @property
    def output_names(self) -> list[str]:
        """The outputs a run returns, in order."""
        return [v.name for v in self.graph.outputs]

    @property
    def inputs(self) -> list[Value]:
        """The inputs a run needs (those of `input_names`), each a `cyloop.Value`: its `name`,
        element type (`dtype`; None where the model does not declare it), `shape` (an int per
        dimension, a str naming a symbolic one, None for one the model leaves unnamed; None for
        an unknown rank) and `kind` ("tensor", "sequence", "optional", "optional_sequence", "map"
        or "sequence_map"; a map's keys are of `key_dtype`).
        Copies: changing one changes nothing in the model."""
        return [dataclasses.replace(v) for v in self.graph.inputs if v.name not in self._defaults]

    @property
    def outputs(self) -> list[Value]:
        """The outputs a run returns, in order, described as `inputs` describes the inputs."""
        return [dataclasses.replace(v) for v in self.graph.outputs]

    def run(self, feeds: dict, output_names: list[str] | None = None, *,
            time_limit=_MODELS) -> dict[str, np.ndarray]:
        """Run on `feeds` (input name -> array); returns output name -> array. `time_limit`:
        seconds this run may take (None: no limit; by default the model's). A map input takes a
        dict, a sequence of maps a list of dicts; such outputs are returned as new dicts (see
        `cyloop.maps`).

        Feeds are checked against the declared inputs (`InputError`) and never written to. Every
        returned array is the caller's own: writeable, sharing memory with no feed, no constant of
        the model and no other returned array.
        """
        settings = self.settings
        time_limit = settings.time_limit if time_limit is _MODELS else time_limit_of(time_limit)
        args = self._check_feeds(feeds)
        if output_names is not None:
            unknown = [name for name in output_names if name not in self._output_index]
            if unknown:
                raise InputError(f"unknown output names {unknown}; the model's outputs are "
                                 f"{self.output_names}")
        limits = RunLimits(settings.max_iterations, time_limit, settings.memory_limit)
        values = self._program.run(args, limits)
        names = self._output_names if output_names is None else list(output_names)
        handed = handed_outputs(values, names, self._output_index, args)
        if handed is not None:
            return handed
        results: dict = {}
        handed = _Handed()
        for arg in args:
            for item in arg if isinstance(arg, TensorSequence) else [arg]:
                if isinstance(item, np.ndarray):
                    handed.add(item)

        def own(value):
            value = np.asarray(value)
            if not value.flags.writeable or handed.overlaps(value):
                value = value.copy()
            handed.add(value)
            return value

        def nbytes(name):
            value = values[self._output_index[name]]
            if not isinstance(value, (np.ndarray, np.generic, TensorSequence)):
                return 0  # (an empty optional, a map: handed over as new objects)
            items = value if isinstance(value, TensorSequence) else [value]
            return sum(np.asarray(item).nbytes for item in items if item is not None)

        # The largest outputs are handed over first: when two share memory (say a loop's last
        # value, which lives in the final row of its concatenated output), the small one is
        # copied, not the whole sequence of rows.
        for name in sorted(dict.fromkeys(names), key=nbytes, reverse=True):
            value = values[self._output_index[name]]
            if value is None:
                results[name] = None  # an empty optional
            elif isinstance(value, TensorSequence):
                results[name] = [own(item) for item in value]
            elif not isinstance(value, (np.ndarray, np.generic)) and _is_map(value):
                from .maps import handed as handed_map

                results[name] = handed_map(value)  # (a dict or list of dicts of its own)
            else:
                results[name] = own(value)
        return {name: results[name] for name in names}

    def _check_feeds(self, feeds: dict) -> list:
        """The program's arguments from `feeds`: in the declared order, each array a read-only
        view of its own; an InputError for what does not match the declared inputs. Feeds of
        the names, dtypes and shapes last accepted pass unchecked: those alone decide the checks
        (`_accepted`)."""
        accepted = self._accepted
        if accepted is not None and type(feeds) is dict and len(feeds) == accepted[0]:
            args = accepted_arguments(feeds, accepted[1])
            if args is not None:
                return args
        args = self._checked_feeds(feeds)
        self._accepted = _accepted_form(self.graph.inputs, feeds, self._defaults)
        return args

    def _checked_feeds(self, feeds: dict) -> list:
        if not isinstance(feeds, dict):
            raise InputError(f"feeds must be a dict of input name -> array, not "
                             f"{type(feeds).__name__}")
        named = [key for key in feeds if not isinstance(key, str)]
        if named:
            raise InputError(f"feeds are keyed by input name (a str), not {named[0]!r} "
                             f"({type(named[0]).__name__}); the model's inputs are "
                             f"{self.input_names}")
        unknown = sorted(set(feeds) - set(self.input_names) - set(self._defaults))
        if unknown:
            raise InputError(f"unknown inputs {unknown}; the model's inputs are "
                             f"{self.input_names}")
        missing = [name for name in self.input_names if name not in feeds]
        if missing:
            raise InputError(f"missing inputs {missing}; the model's inputs are "
                             f"{self.input_names}")
        args = []
        bound: dict[str, tuple[int, str]] = {}
        for declared in self.graph.inputs:
            if declared.name not in feeds:
                args.append(self._defaults[declared.name])
                continue
            value = feeds[declared.name]
            if declared.kind in ("optional", "optional_sequence") and value is None:
                args.append(None)
                continue
            if declared.kind in ("map", "sequence_map"):
                from . import maps  # (loaded where a model has maps)

                args.append(maps.map_feed(declared, value) if declared.kind == "map"
                            else maps.map_sequence_feed(declared, value))
                continue
            if declared.kind in ("sequence", "optional_sequence"):
                if not isinstance(value, (list, tuple, TensorSequence)):
                    raise InputError(f"input {declared.name!r}: expected a sequence (a list of "
                                     f"arrays), got {type(value).__name__}")
                # Elements may differ in size: symbolic dims bind per element.
                items = [self._check_tensor(declared, item, {}) for item in value]
                args.append(TensorSequence(items, dtype=declared.dtype))
                continue
            args.append(self._check_tensor(declared, value, bound))
        return args

    def _check_tensor(self, declared, value, bound: dict[str, tuple[int, str]]) -> np.ndarray:
        """`value` as an array matching `declared`; `bound` ties symbolic dims across inputs."""
        if not isinstance(value, np.ndarray):
            value = _converted(declared, value)
        if declared.dtype is not None and value.dtype != declared.dtype:
            raise InputError(f"input {declared.name!r}: expected dtype {declared.dtype}, got "
                             f"{value.dtype}")
        if declared.shape is not None:
            if value.ndim != len(declared.shape):
                raise InputError(f"input {declared.name!r}: expected rank "
                                 f"{len(declared.shape)} (shape {list(declared.shape)}), got "
                                 f"rank {value.ndim} (shape {list(value.shape)})")
            for axis, (want, got) in enumerate(zip(declared.shape, value.shape)):
                if isinstance(want, int) and want >= 0 and want != got:
                    raise InputError(f"input {declared.name!r}: expected size {want} on "
                                     f"axis {axis} (shape {list(declared.shape)}), got "
                                     f"{got} (shape {list(value.shape)})")
                if isinstance(want, str) and want:
                    if want in bound and bound[want][0] != got:
                        size, first = bound[want]
                        raise InputError(f"input {declared.name!r}: dimension {want!r} is "
                                         f"{got} on axis {axis}, but {size} in input "
                                         f"{first!r}")
                    bound.setdefault(want, (got, declared.name))
        # A view of its own for this run, read-only: kernels remember what they derive from a
        # read-only array by its identity (`accel.gemm.Prepared`), and a caller's array, even a
        # read-only one, may change between runs (through a writeable base).
        value = value.view()
        value.flags.writeable = False
        return value

    def run_batched(self, feeds: dict, batch_axis=0, *, chunk_size: int, output_axis=None,
                    executor=None, output_names: list[str] | None = None,
                    time_limit=_MODELS) -> dict[str, np.ndarray]:
        """`run` on `feeds` split into chunks of `chunk_size` along a batch axis, the chunks run
        on `executor` and their outputs joined back in order.

        ``batch_axis``: the axis every feed is split along (an int), or a dict of input name ->
        axis; an input the dict does not name, or names with None, goes whole into every chunk.
        ``output_axis``: the axis every output is joined along (default: `batch_axis` if an int,
        else 0), or a dict naming every output (None: an output that does not depend on the
        batch, taken from the first chunk). ``executor``: None runs the chunks here, one after
        another; an executor (anything whose ``submit(fn, *args)`` returns a future: a
        `concurrent.futures.Executor`, Ray tasks behind a small adapter) runs them on its
        workers (a process pool gets the model pickled with each chunk, so make chunks large); a
        `dask.distributed.Client`
        gets the model once per worker (`Client.scatter`). For a model that treats batch elements
        independently, the result is one run's over the whole batch: exactly where its kernels
        are elementwise, to rounding where a matrix product's blocking depends on the rows.
        """
        time_limit = self.settings.time_limit if time_limit is _MODELS \
            else time_limit_of(time_limit)
        chunks = split_feeds(feeds, batch_axis, chunk_size)
        if output_axis is None:
            output_axis = 0 if isinstance(batch_axis, Mapping) else batch_axis
        results = run_chunks(self, chunks, executor, output_names, time_limit)
        return join_outputs(results, output_axis)

    def __reduce__(self):
        """A Model pickles as its graph and settings, and compiles again when unpickled (its
        measured choices are measured afresh, on the machine that unpickles it)."""
        return _compiled, (self.graph, dataclasses.asdict(self.settings))

    def plan(self) -> Plan:
        """The memory plan of every loop, with what the last runs measured, and the measured
        choices of the kernels outside loops."""
        from .engine.plan import Plan, describe, outside_loops  # (loaded when first asked for)

        memo = getattr(self._program, "memo_facts", lambda: None)()
        steps, kept = ([], []) if memo is None else memo
        return Plan([describe(loop.facts()) for loop in self._compiled.loops],
                    outside_loops(self._compiled),
                    [self._compiled.steps[s].node.label for s in steps], len(kept))

    def counters(self) -> dict[str, dict[str, int]]:
        """Each loop's planner counters (bytes copied, allocations, ...), by loop label;
        nested loops are listed after their parent."""
        found = {}

        def walk(loops):
            for loop in loops:
                found[loop.label] = loop.counters()
                walk(loop.loops)

        walk(self._compiled.loops)
        return found

    def reset_counters(self) -> None:
        def walk(loops):
            for loop in loops:
                loop.reset_counters()
                walk(loop.loops)

        walk(self._compiled.loops)


class _Handed:
    """Arrays a run has handed out (or was fed), grouped by the memory they view, so that a
    new output is checked for overlap only against those of its own buffer: a run returning a
    sequence of 10^4 arrays checks them in linear time, not quadratic."""

    def __init__(self):
        self._by_memory: dict[int, list[np.ndarray]] = {}

    @staticmethod
    def _memory(array: np.ndarray) -> int:
        """The identity of the object owning `array`'s memory: the end of its chain of bases
        (through the non-array objects `as_strided` and buffers put in it)."""
        owner = array
        while getattr(owner, "base", None) is not None:
            owner = owner.base
        return id(owner)

    def add(self, array: np.ndarray) -> None:
        self._by_memory.setdefault(self._memory(array), []).append(array)

    def overlaps(self, array: np.ndarray) -> bool:
        return any(np.may_share_memory(array, other)
                   for other in self._by_memory.get(self._memory(array), ()))


def _accepted_form(inputs: list[Value], feeds: dict, defaults: dict) -> tuple[int, tuple] | None:
    """What accepted `feeds` were, for `accepted_arguments`: per declared input, (name, dtype,
    shape, None) of its array, or (None, None, None, default) where it took its default; None where
    a feed is not a plain array (a scalar converted, a sequence, an empty optional: checked every
    run)."""
    form = []
    for declared in inputs:
        if declared.name not in feeds:
            form.append((None, None, None, defaults[declared.name]))
            continue
        value = feeds[declared.name]
        if type(value) is not np.ndarray or declared.kind != "tensor":
            return None
        form.append((declared.name, value.dtype, value.shape, None))
    return len(feeds), tuple(form)


def _is_map(value) -> bool:
    """Whether a run's value is a map or a sequence of maps (`cyloop.maps`, loaded only where
    a model has one)."""
    maps = sys.modules.get(f"{__package__}.maps")
    return maps is not None and maps.is_map_value(value)


def _compiled(graph: Graph, settings: dict) -> Model:
    """An unpickled Model (see `Model.__reduce__`)."""
    return Model(graph, **settings)


# Element kinds in the order a scalar may widen into: bool only to bool, integers to integers and
# floats, floats to floats, complex to complex.
_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _converted(declared, value) -> np.ndarray:
    """A feed that is not an array (a Python or numpy scalar, a nested list) as an array of the
    declared type, if its values are of a kind that converts (numpy's ``same_kind`` casting:
    np.int32(3) or 3 for an int64 input, 3 or 2.5 for a float32 one) and fit; anything else is an
    InputError naming the input (2.5 or True for an int64 input, "False" or None for a bool one).
    Arrays are not converted: an array of another dtype is refused in `_check_tensor`."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:  # ragged nesting, say
        raise InputError(f"input {declared.name!r}: expected an array or a number, got "
                         f"{type(value).__name__} ({error})") from None
    want = declared.dtype
    if want is None or array.dtype == want:
        return array
    have, rank = array.dtype.kind, _rank(want)
    if have not in _KIND_RANK or rank is None or (have == "b") != (rank == 0) \
            or _KIND_RANK[have] > rank:
        shown = repr(value) if np.ndim(value) == 0 else f"{array.dtype} values"
        raise InputError(f"input {declared.name!r}: expected {want} values, got "
                         f"{type(value).__name__} {shown}")
    with np.errstate(over="ignore", invalid="ignore"):
        converted = array.astype(want)
    if have in "iu" and rank == 1:
        lost = converted != array
        if np.any(lost):
            raise InputError(f"input {declared.name!r}: {array[lost].flat[0]} does not fit in "
                             f"{want}")
    return converted


def _rank(dtype: np.dtype) -> int | None:
    """`dtype`'s place in _KIND_RANK; ml_dtypes' types (kind "V") by their name."""
    if dtype.kind in _KIND_RANK:
        return _KIND_RANK[dtype.kind]
    if dtype.name.startswith(("float", "bfloat")):
        return 2
    return 1 if dtype.name.startswith(("int", "uint")) else None
