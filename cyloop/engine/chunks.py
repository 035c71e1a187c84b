"""The hoisted part of a loop body at run time: computed a chunk of iterations' rows at a time.

`hoist.py` decides what is hoisted and builds a `Hoist`; the Cython driver asks it, before each
block of iterations, for the rows those iterations read (see hoist.py for the contract).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from time import perf_counter

import numpy as np

from .._records import FrozenRecord, Record, set_field
from ..accel.gemm import Prepared, PreparedPair, bit_view_type, is_constant, rows_plus, splits_now
from ..accel.measured import Measured, untimed
from ..errors import CyloopError, ExecutionError, ResourceLimitError
from ..ir import SlicedInput, Slicing, read_only
from ..kernels.registry import FLOATS, INTEGERS, abilities_of, declare, type_keeping
from ..tuning import CHUNK_ROUNDS, PROBED_KEYS, PROBED_VALUES
from ._core import repeated_rows
from .settings import CHUNK_BUDGETS, FIRST_CHUNK_ROWS, MAX_CHUNK_ROWS, MIN_CHUNK_ROWS

__all__ = ["CaptureStatic", "ComputedStatic", "ConstStatic", "GatherSource", "Hoist", "HoistStep",
           "IterationSource", "OuterStatic", "SlicedSource", "bias_joined", "gemm", "once"]


# Where batched values come from: row i is what iteration i sees. (Records, not named tuples: a
# SlicedSource(0, desc) must not equal a tuple, nor an IterationSource() a ComputedStatic().)
class SlicedSource(FrozenRecord):
    """Part i of the loop's sliced input #`index`."""

    __slots__ = _fields = ("index", "desc")

    def __init__(self, index: int, desc: SlicedInput):
        set_field(self, "index", index)
        set_field(self, "desc", desc)


class IterationSource(FrozenRecord):
    """The iteration number i itself."""

    __slots__ = _fields = ()


class GatherSource(FrozenRecord):
    """``Gather(data, i)`` of a static `data` along `axis`; `label` names the Gather node (as
    errors do), `work` what it is for the plan (a plan.HoistedWork); `index_type`, the integer
    type i was cast to before the Gather read it (None: the iteration number itself)."""

    __slots__ = _fields = ("data", "axis", "label", "work", "index_type")

    def __init__(self, data: str, axis: int, label: str, work=None,
                 index_type: np.dtype | None = None):
        set_field(self, "data", data)
        set_field(self, "axis", axis)
        set_field(self, "label", label)
        set_field(self, "work", work)
        set_field(self, "index_type", index_type)


def _counts(source: GatherSource) -> int:
    """The iterations up to which a Gather source's index, the iteration number cast to its
    `index_type`, is the iteration number (not wrapped)."""
    if source.index_type is None or source.index_type.itemsize >= 8:
        return 1 << 62  # (no loop gets that far)
    return int(np.iinfo(source.index_type).max) + 1


# Where static values come from: the same at every iteration.
class OuterStatic(FrozenRecord):
    """The loop node's input #`index` (an invariant input)."""

    __slots__ = _fields = ("index",)

    def __init__(self, index: int):
        set_field(self, "index", index)


class CaptureStatic(FrozenRecord):
    """Outer-scope value #`index` the body captures."""

    __slots__ = _fields = ("index",)

    def __init__(self, index: int):
        set_field(self, "index", index)


class ConstStatic(FrozenRecord):
    """A body constant."""

    __slots__ = _fields = ("value",)

    def __init__(self, value):
        set_field(self, "value", value)


class ComputedStatic(FrozenRecord):
    """A result of a body node whose inputs are all static: the same at every iteration, so
    computed once a run (a `HoistStep` with ``once``), at the run's first chunk."""

    __slots__ = _fields = ()


class HoistStep(Record):
    """One hoisted node: its batched kernel, reading and writing names of the chunk's scope.

    `call`: ``call(args, rows, reusable buffers) -> tuple of outputs``; `probe`: the node's own
    kernel, run on row 0 first (see Hoist.chunk); `batched`: which inputs have rows; `work`:
    what the step runs, for the plan (a plan.HoistedWork); `probed`: the input signatures the
    probe passed on; `once`: a node of static values alone, ``call(args) -> outputs``, once a
    run; `kept`: a once step's last inputs and results, while those inputs are constants or
    small values (`_once`); `exact`: the call fails on a chunk where, and only where, the node
    fails on its rows (the elementwise form, `elementwise`): then the probe runs only when the
    call fails, to raise the node's own error."""

    _fields = ("call", "inputs", "outputs", "label", "probe", "batched", "work", "probed", "once",
               "kept", "exact")

    def __init__(self, call, inputs: list[str], outputs: list[str], label: str, probe=None,
                 batched: list | None = None, work=None, probed: set | None = None,
                 once: bool = False, kept: tuple | None = None, exact: bool = False):
        self.call = call
        self.inputs = inputs
        self.outputs = outputs
        self.label = label
        self.probe = probe
        self.batched = [] if batched is None else batched
        self.work = work
        self.probed = set() if probed is None else probed
        self.once = once
        self.kept = kept
        self.exact = exact


class Hoist:
    """The hoisted part of one loop body. The driver calls `limit` once per run, `chunk` before
    each block of iterations (`next_rows` says how many) and `finish` when the loop ends.

    Steps marked ``once``, nodes whose inputs are all static, run at a run's first chunk, in
    their place among the others (a node fails where the body would meet it first); their
    results (`ComputedStatic`) are kept for the run's later chunks in the dict the driver hands
    `chunk`, and the body reads one as a row like any hoisted value (every row a read-only view
    of it).

    The chunk size is a measured choice (`sizing`, keyed by the bytes of one row): each budget of
    `CHUNK_BUDGETS` in turn sizes a chunk, timed from its start to the next chunk's (or the loop's
    end) per row, so the chunk's own work and the iterations reading it both count."""

    def __init__(self, sources: dict, statics: dict, steps: list[HoistStep],
                 frontier: list[str], iteration_dtype):
        self.sources = sources  # name -> SlicedSource | IterationSource | GatherSource
        self.statics = statics  # name -> OuterStatic | CaptureStatic | ConstStatic
        self.steps = steps
        self.frontier = frontier  # names the body reads row i of, in the new body's input order
        # The values computed once a run (`ComputedStatic`): steps marked ``once`` make them.
        self.computed = {name for step in steps if step.once for name in step.outputs if name}
        self.iteration_dtype = np.dtype(iteration_dtype)
        self.gathers = [s for s in sources.values() if isinstance(s, GatherSource)]
        # What runs before the iterations, for the plan (plan.HoistedWork records).
        self.work = [g.work for g in self.gathers] + [step.work for step in steps]
        self._last_use = {}  # name -> the last step reading it
        for index, step in enumerate(steps):
            for name in step.inputs:
                if name:
                    self._last_use[name] = index
        self._kept = set(frontier)
        # Per step: which inputs are the body's own constants (`ConstStatic`), the same objects
        # every run, which nothing writes (a once step's results are kept while its inputs come
        # back: `_once`).
        self._fixed = [tuple(isinstance(statics.get(name), ConstStatic) for name in step.inputs)
                       for step in steps]
        # Per step: the inputs it reads last (nor kept for the body), which may die there.
        self._dying_at = [tuple(name for name in dict.fromkeys(step.inputs)
                                if name and self._last_use[name] == index
                                and name not in self._kept) for index, step in enumerate(steps)]
        readers: dict[str, int] = {}  # name -> how many hoisted steps read it
        producer = {}  # name -> the index of the step making it alone
        for index, step in enumerate(steps):
            for name in step.inputs:
                if name:
                    readers[name] = readers.get(name, 0) + 1
            if len(step.outputs) == 1 and step.outputs[0] and not step.once:
                producer[step.outputs[0]] = index
        self._sharing = {name: self._chain(name, readers, producer) for name in frontier}
        # (name, where it is among a run's operands, or None, its value then): `_static` for each
        # static, worked out once. A capture's place counts back from the end of the operands.
        self._static_reads = [(name, *_static_read(where)) for name, where in statics.items()]
        self.sizing = Measured({name: _rows_for(budget) for name, budget in CHUNK_BUDGETS.items()},
                               rounds=CHUNK_ROUNDS, key=None, label=_describe_row, unit="us/row")
        self._default_size = next(iter(CHUNK_BUDGETS))
        self._timing = threading.local()  # this thread's chunk being timed (runs may overlap)

    def _chain(self, name: str, readers: dict, producer: dict) -> list[str]:
        """`name` and the values whose buffer may be its slots in a loop output (`chunk`'s
        `into`): back from the step making it, through one input of each step, each value only
        that step reads and the body does not. Elementwise on one shape, each step then reads
        its input where it writes its result, and nothing reads the input after it."""
        chain = [name]
        while chain[-1] in producer:
            step = self.steps[producer[chain[-1]]]
            feeding = [u for u in step.inputs if u in producer and readers[u] == 1
                       and u not in self._kept and u not in chain]
            if not feeding:
                break
            chain.append(feeding[0])
        return chain

    def _static(self, name, args, n_captures):
        where = self.statics[name]
        if isinstance(where, OuterStatic):
            return args[where.index]
        if isinstance(where, CaptureStatic):
            return args[len(args) - n_captures + where.index]
        return where.value

    def _gather_rows(self, source: GatherSource, args, n_captures):
        """(rows a Gather source has, its data, its axis); no rows for an axis out of range."""
        data = np.asarray(self._static(source.data, args, n_captures))
        axis = source.axis + data.ndim if source.axis < 0 else source.axis
        return (data.shape[axis] if 0 <= axis < data.ndim else 0), data, axis

    def limit(self, args, n_captures: int) -> int:
        """How many iterations the Gather sources and the iteration number's type allow (-1: no
        limit); past it, `past_end`."""
        cap = self._iteration_cap()
        limit = -1 if cap is None else cap
        for source in self.gathers:
            size = min(self._gather_rows(source, args, n_captures)[0], _counts(source))
            limit = size if limit < 0 else min(limit, size)
        return limit

    def _iteration_cap(self):
        """Iterations a (narrow) integer iteration number can count, if the hoisted part reads
        it."""
        if self.iteration_dtype.itemsize < 8 and any(
                isinstance(s, IterationSource) for s in self.sources.values()):
            return int(np.iinfo(self.iteration_dtype).max) + 1
        return None  # 64 bits: no loop gets that far

    def past_end(self, i: int, args, n_captures: int) -> Exception:
        """The error iteration i would have raised: a Gather out of rows, or an iteration number
        out of its type's range (the driver's own OverflowError)."""
        cap = self._iteration_cap()
        if cap is not None and i >= cap:
            return OverflowError(f"Python integer {i} out of bounds for {self.iteration_dtype}")
        for source in self.gathers:
            size, data, axis = self._gather_rows(source, args, n_captures)
            if not 0 <= axis < data.ndim:
                return ExecutionError(f"{source.label} failed: AxisError: axis {source.axis} is "
                                      f"out of bounds for array of dimension {data.ndim}")
            if size <= i:
                return ExecutionError(f"{source.label} failed: IndexError: index {i} is out of "
                                      f"bounds for axis {axis} with size {size}")
            if _counts(source) <= i:
                return ExecutionError(f"{source.label}: its index, the iteration number as "
                                      f"{source.index_type}, wraps at iteration {i}; cyloop "
                                      "reads it as a row of its data only up to there")
        return ExecutionError(f"iteration {i} is past the end of a hoisted input")

    def chunk(self, args, n_captures: int, slicings: dict[int, Slicing], start: int,
              rows: int, into: dict[int, np.ndarray] | None = None,
              computed: dict | None = None) -> list:
        """The frontier values for iterations [start, start + rows): arrays of `rows` rows.
        `slicings`: the run's sliced inputs (`LoopRun.slicings`). `into`: frontier index ->
        where that value's rows go in the end (a loop output's slots): the step making the
        value writes it there if its kernel can (``out=``); the value returned is then that
        array itself. `computed`: the run's own dict, where the first chunk (`start` 0) puts
        the ``once`` steps' results and later chunks find them."""
        targets = {name: dest for k, dest in (into or {}).items()
                   for name in self._sharing[self.frontier[k]]}
        timing, now = self._timing, perf_counter()
        if start > 0:
            self._timed(start, now)
        picked, timing.picked = getattr(timing, "picked", None), None
        timing.running = None if picked is None else (*picked, start, now)
        sampled, timing.sampling = getattr(timing, "sampling", False), False
        env = {}
        for name, source in self.sources.items():
            if isinstance(source, SlicedSource):
                env[name] = _sliced_rows(slicings[source.index], start, rows)
            elif isinstance(source, IterationSource):
                env[name] = np.arange(start, start + rows, dtype=self.iteration_dtype)
            else:
                data = np.asarray(self._static(source.data, args, n_captures))
                env[name] = _rows_along(data, source.axis, start, rows)
        for name, outer, value in self._static_reads:
            env[name] = value if outer is None else args[outer if outer >= 0 else
                                                         len(args) - n_captures - 1 - outer]
        if self.computed:
            if start == 0:
                computed.clear()
            env.update(computed)  # (never a buffer a step may take: not `own`)
        own = set()  # names of buffers this chunk made, which nothing outside can see
        largest = 0  # bytes of the largest value a step made (`row_bytes`)
        # A run's first chunk (a few rows, met once a run) and those of a chunk size on trial
        # (met only while it lasts) are no samples of the kernels' own trials: a trial on their
        # shapes would take a run a sample, or never end, and hold every candidate's prepared
        # weight meanwhile.
        with contextlib.nullcontext() if sampled or not self.steps else untimed():
            for index, step in enumerate(self.steps):
                if step.once:
                    if start == 0:
                        values = _once(step, [env[name] if name else None
                                              for name in step.inputs], self._fixed[index])
                        computed.update(values)
                        env.update(values)
                    continue
                inputs = [env[name] if name else None for name in step.inputs]
                # Inputs dying here whose buffer the chunk made may take the result (in place).
                dying = [name for name in self._dying_at[index] if name in own] if own else ()
                try:
                    if step.probe is not None and start == 0 and not step.exact:
                        # The node as the body has it, on the first row: whatever rank or
                        # shape error it raises at every iteration (every row has one shape)
                        # is raised here, as the body would raise it.
                        _probe(step, [a[0] if b else a for a, b in zip(inputs, step.batched)])
                    reusable = [env[name] for name in dying]
                    target = targets.get(step.outputs[0]) if targets and len(step.outputs) == 1 \
                        else None
                    if target is not None:  # first: the slots the value (or what it is made
                        # from, read only by the step making it) ends in
                        reusable.insert(0, target)
                    results = step.call(inputs, rows, reusable)
                except CyloopError:
                    raise
                except Exception as e:
                    if step.exact and step.probe is not None and start == 0:
                        # (the node's error on the first row, as the body would raise it, if it
                        # has one there: the probe that other steps run first)
                        _probe_failure(step, [a[0] if b else a
                                              for a, b in zip(inputs, step.batched)])
                    raise _failed(step.label, e) from e
                for name in dying:
                    own.discard(name)
                    del env[name]
                if own:  # a buffer some result views is never reused
                    for name in step.inputs:
                        if name in own and any(isinstance(r, np.ndarray)
                                               and np.may_share_memory(r, env[name])
                                               for r in results):
                            own.discard(name)
                for name, value in zip(step.outputs, results):
                    if isinstance(value, np.ndarray):
                        largest = max(largest, value.nbytes)
                        if name:
                            env[name] = value
                            if (value.base is None and value.flags.writeable
                                    and all(value is not a for a in inputs)):
                                own.add(name)
                    elif name:
                        env[name] = value
        timing.largest_row = largest // rows
        return [_every_row(env[name], rows) if name in self.computed else np.asarray(env[name])
                for name in self.frontier]

    def row_bytes(self, arrays: list, rows: int) -> int:
        """The bytes of one row of `chunk`'s arrays: those of values computed once a run, whose
        rows are all one view of them, count for nothing."""
        return sum(a.nbytes for a, name in zip(arrays, self.frontier)
                   if name not in self.computed) // rows

    def next_rows(self, done_rows: int, row_bytes: int) -> int:
        """Rows for the next chunk: a small first one, then the measured budget's worth of rows
        of `row_bytes`, or of the largest value the last chunk made on the way where that is
        more: a chunk's size bounds all it holds at once, so that a step whose result is much
        larger than what the body reads of it (every query's difference from a training row,
        which the next step reduces to a distance) runs a few rows at a time."""
        timing = self._timing
        if done_rows == 0:
            timing.picked, timing.sampling = None, False
            return FIRST_CHUNK_ROWS
        row_bytes = max(row_bytes, getattr(timing, "largest_row", 0))
        name, trial = self.sizing.pick(row_bytes)
        timing.picked = None if trial is None else (trial, name)
        # The chunks the hoisted kernels' own trials sample (`chunk`): all but the first, of the
        # size chosen or, while sizes are on trial, of the default one.
        timing.sampling = trial is None or name == self._default_size
        return self.sizing.candidates[name](row_bytes)

    def sizes_on_trial(self) -> bool:
        """Whether the running chunk's time is a sample of the chunk sizes' trial (on this
        thread; not a chunk of the default size counted while the trial waits): then nothing
        inside it is timed for another measured choice."""
        running = getattr(self._timing, "running", None)
        return running is not None and running[0].open

    def finish(self, iterations: int) -> None:
        """The loop ended after `iterations` iterations: the last chunk's time is known."""
        self._timed(iterations, perf_counter())

    def _timed(self, end: int, now: float) -> None:
        """The running chunk's iterations ended at iteration `end`, at time `now`."""
        running, self._timing.running = getattr(self._timing, "running", None), None
        if running is not None:
            trial, name, start, began = running
            if end > start:
                self.sizing.report(trial, name, (now - began) / (end - start))


def _failed(label: str, error: Exception) -> CyloopError:
    """The error of the node `label` names, as the body raises it (engine/reference.py)."""
    if isinstance(error, MemoryError):
        return ResourceLimitError(f"{label} failed: {error}")
    return ExecutionError(f"{label} failed: {type(error).__name__}: {error}")


def _once(step: HoistStep, inputs: list, fixed: tuple = ()) -> dict:
    """A ``once`` step's results by name, or the error the body would raise for its node.

    Inputs that are the very objects of the last run, each one nobody changes while it lives
    (the body's own constants, `fixed`, or `_lasting`: a model's constant passed into the loop,
    say a layer's weights that the body splits or squeezes), give the results of that run
    again: the step is a pure function of them (`hoist._invariant` takes no random op), and the
    same result objects let the kernels reading them recall what they derived by identity
    (accel/gemm.py `Prepared`) rather than compare values. The inputs are held meanwhile, so no
    other object takes their identity. So do inputs that are other objects of the same small
    values (`_value_of`: a bound or a counter that the run computes afresh, a shape)."""
    kept = step.kept
    if kept is not None and len(kept[0]) == len(inputs) \
            and all((same and a is b) or (v is not None and v == _value_of(b))
                    for a, b, same, v in zip(kept[0], inputs, kept[2], kept[3])):
        return kept[1]
    try:
        with untimed():  # (one call a run: no sample of a trial)
            values = step.call(inputs)
    except CyloopError:
        raise
    except Exception as e:
        raise _failed(step.label, e) from e
    if len(values) != len(step.outputs):
        raise ExecutionError(f"{step.label} returned {len(values)} values for "
                             f"{len(step.outputs)} outputs")
    marked = []
    for value in values:  # (nothing writes them: marked so, kernels may keep what they derive)
        if isinstance(value, np.ndarray):
            if any(value is a for a in inputs):  # (an input handed back, AtLeast's say: a
                value = value.view()             # view of it is marked, not the input itself)
            value.flags.writeable = False
        marked.append(value)
    results = {name: value for name, value in zip(step.outputs, marked) if name}
    # Per input: whether the same object is the same input (it keeps its contents), and its
    # value where it is small.
    same = [constant or _lasting(value)
            for constant, value in itertools.zip_longest(fixed, inputs, fillvalue=False)]
    values = [_value_of(value) for value in inputs]
    known = all(s or v is not None for s, v in zip(same, values))
    step.kept = (tuple(inputs), results, same, values) if known else None
    return results


def _value_of(value):
    """A small input's value, as `_once` compares it with a later run's (its type, shape and
    bytes, for an array or numpy scalar of at most PROBED_VALUES numbers; a tuple of Python
    integers, a shape, as itself), or None for any other."""
    if isinstance(value, (np.ndarray, np.generic)):
        if value.size > PROBED_VALUES or value.dtype.hasobject:
            return None
        return type(value), value.dtype.str, value.shape, value.tobytes()
    if type(value) is tuple and all(type(d) is int for d in value):
        return value
    return None


def _lasting(value) -> bool:
    """Whether `value` keeps its contents while it lives: None, an immutable scalar, a tuple of
    them (a shape), or an array nobody writes (`is_constant`: read-only down to the memory it
    lies in)."""
    if value is None or isinstance(value, (np.generic, int, float, str, bytes)):
        return True
    if isinstance(value, tuple):
        return all(map(_lasting, value))
    return isinstance(value, np.ndarray) and not value.dtype.hasobject and is_constant(value)


def once(fn, multi: bool):
    """A node's own kernel as a ``once`` step's call: its results as a tuple."""
    def call(args):
        result = fn(*args)
        return tuple(result) if multi else (result,)

    return call


def _probe(step: HoistStep, row) -> None:
    """Run `step`'s own kernel on `row` (its inputs at iteration 0), unless it ran without error
    on inputs of the same shapes, dtypes and small values before: a shape or rank error depends
    on nothing else, so probing every run would only repeat itself (a kernel call a run)."""
    key = tuple(_signature(a) for a in row)
    if key in step.probed:
        return
    with untimed():  # a call on one row's shapes, made once: not a trial's sample
        step.probe(*row)
    if len(step.probed) < PROBED_KEYS:
        step.probed.add(key)




def _probe_failure(step: HoistStep, row) -> None:
    """Raise the error `step`'s own kernel raises on `row`, named as `chunk` names a step's, if
    it raises one (for an `exact` step whose call failed)."""
    try:
        _probe(step, row)
    except CyloopError:
        raise
    except Exception as e:
        raise _failed(step.label, e) from e


def _signature(value):
    """What a probe's outcome can depend on, of one input: its shape and dtype, and its values
    when it is small (a Reshape's target shape, a Squeeze's axes)."""
    if value is None:
        return None
    if isinstance(value, np.generic) and not value.dtype.hasobject:
        # (Row 0 of a value with one element a row, say the iteration number's: a scalar.)
        return np.generic, value.dtype.str, value.tobytes()
    if not isinstance(value, np.ndarray) or value.dtype.hasobject:
        return object()  # matches nothing: probed every time
    small = value.tobytes() if value.size <= PROBED_VALUES else None
    return value.shape, value.dtype.str, small


def _rows_for(budget: int):
    """Rows of `row_bytes` bytes in about `budget` bytes, `MIN_CHUNK_ROWS` to `MAX_CHUNK_ROWS`."""
    def rows(row_bytes: int) -> int:
        return int(min(max(budget // max(row_bytes, 1), MIN_CHUNK_ROWS), MAX_CHUNK_ROWS))

    return rows


def _describe_row(row_bytes: int) -> str:
    sizes = ", ".join(f"{name} = {_rows_for(budget)(row_bytes)} rows"
                      for name, budget in CHUNK_BUDGETS.items())
    return f"rows of {row_bytes} B ({sizes})"


def _sliced_rows(slicing: Slicing, start: int, rows: int):
    """Parts start .. start+rows-1 of a sliced input, stacked on a new leading axis (a view)."""
    desc, x, axis = slicing.desc, slicing.value, slicing.axis
    begin = slicing.first + start * desc.stride
    index = [slice(None)] * x.ndim
    index[axis] = slice(begin, begin + desc.part_size)
    part = x[tuple(index)]  # a view (an integer index would give a scalar copy when 1-D)
    if not desc.keep_axis:
        part = part.squeeze(axis)
    step = desc.stride * x.strides[axis] if rows > 1 else 0
    return repeated_rows(part, rows, step)


def _static_read(where) -> tuple:
    """(where a static is among a run's operands, or None; its value then), as `Hoist.chunk`
    reads it: a capture's place counted back from the end, as -1 - its index."""
    if isinstance(where, ConstStatic):
        return None, where.value
    if isinstance(where, OuterStatic):
        return where.index, None
    if isinstance(where, CaptureStatic):
        return -1 - where.index, None
    raise TypeError(f"not a static the chunk reads: {where!r}")


def _every_row(value, rows: int) -> np.ndarray:
    """`rows` rows that are each `value` (computed once a run): one read-only view of it."""
    if type(value) is np.ndarray:
        return repeated_rows(value, rows, 0)
    return np.broadcast_to(value, (rows, *np.shape(value)))


def _rows_along(data, axis: int, start: int, rows: int):
    """data[start : start+rows] along `axis`, that axis moved to the front (a view)."""
    axis = axis + data.ndim if axis < 0 else axis
    if axis == 0:  # (the common case: no index list, no transpose)
        return read_only(data[start:start + rows])
    index = [slice(None)] * data.ndim
    index[axis] = slice(start, start + rows)
    order = (axis, *(d for d in range(data.ndim) if d != axis))  # (np.moveaxis, without its
    return read_only(data[tuple(index)].transpose(order))  # (np.moveaxis without its checks)


# ---------------------------------------------------------------------------------------------
# Batched forms of kernels, by the registry's `batch` trait: call(args, rows, reusable), where a
# batched arg has the rows on a new leading axis; `reusable` are dying buffers the chunk made,
# which may take the result.

def elementwise(fn, batched):
    """Rows of any operand: batched operands get their row axis aligned in front of the static
    ones' dims, then numpy broadcasting does the rest."""
    # A dying buffer the chunk made may take the result (`reusable`): of the result's shape and
    # type, for a ufunc that keeps its operands' type (`registry.type_keeping`).
    keeps = type_keeping(fn)

    def call(args, rows, reusable=()):
        ranks = [np.ndim(a) - 1 if b else np.ndim(a) for a, b in zip(args, batched)
                 if a is not None]
        rank = max(ranks)
        aligned = []
        for a, b in zip(args, batched):
            if b and np.ndim(a) - 1 < rank:  # align the row axis in front of static operands
                a = np.reshape(a, (rows,) + (1,) * (rank - np.ndim(a) + 1) + np.shape(a)[1:])
            aligned.append(a)
        if keeps and reusable:
            shape = np.broadcast(*aligned).shape  # (a ufunc's few operands: a quarter of
            # np.broadcast_shapes' time)
            dtype = np.result_type(*aligned)
            kind = FLOATS if dtype.kind == "f" else INTEGERS if dtype.kind in "iu" else 0
            for buffer in reusable:
                if buffer.shape == shape and buffer.dtype == dtype and keeps & kind:
                    return (fn(*aligned, out=buffer),)
        return (fn(*aligned),)

    return call


def matmul(fn, batched):
    """Rows of the left operand times a static right one: one GEMM over every row of every
    part when the right operand is a matrix (or a vector), else one product per row."""

    def call(args, rows, reusable=()):
        a, w = args
        if np.ndim(w) <= 2 and a.ndim > 2:
            result = fn(np.reshape(a, (-1, a.shape[-1])), w)
            return (np.reshape(result, a.shape[:-1] + result.shape[1:]),)
        if np.ndim(w) <= 2:
            return (fn(a, w),)
        return (np.stack([fn(a[k], w) for k in range(rows)]),)

    return call


class _JoinedBias:
    """``x @ w + b`` (``x @ w^T + b`` if `transposed`) of x's rows as one product: the bias
    joins the GEMM as the weight of a column of ones, ``[x 1] [w; b]`` (``[w b]`` transposed),
    so that no pass over the chunk adds it afterwards (faster than the GEMM and the add:
    docs/performance.md). `product(a, w)` is the node's own weight product: it multiplies the
    joined weight, so its measured choice is the step's.
    Where the product runs on two cores (`splits_now`), BLAS adds b instead (`matmul_plus`): no
    row of x is copied, and the product is K long, not K + 1 (faster there too)."""

    def __init__(self, product, transposed: bool):
        self.product, self.transposed = product, transposed
        self.weights = PreparedPair(self._join)
        self.rows = Prepared(lambda w: w.T if transposed else w)  # w as [K, N] (two cores)
        self.one_row = Prepared(_one_row)  # a bias of rows all alike: its row (once a bias)

    def _join(self, w, b):
        row = b.reshape(-1)
        joined = np.concatenate([w, row[:, None]] if self.transposed else [w, row[None, :]],
                                axis=1 if self.transposed else 0)
        joined.flags.writeable = False
        return joined

    def covers(self, x, w, b) -> bool:
        """Whether x [rows, ..., K], w and b are of one float type and b broadcasts over a
        row's product without widening it, as one row of the product's width ([N], or [1, N]
        on [B, N]), or as rows all alike ([B, N] on [B, N]: a bias jax2onnx broadcast in the
        body, computed once a run, whose row is then found once)."""
        if not (isinstance(x, np.ndarray) and isinstance(w, np.ndarray)
                and isinstance(b, np.ndarray) and x.dtype == w.dtype == b.dtype
                and x.dtype.kind == "f" and w.ndim == 2 and x.ndim >= 2 and b.ndim >= 1):
            return False
        n, k = w.shape if self.transposed else w.shape[::-1]
        if x.shape[-1] != k or b.shape[-1] != n or b.ndim > max(x.ndim - 1, 1):
            return False
        if _one_row_shaped(b):
            return True
        return b.size > 0 \
            and all(d in (1, e) for d, e in zip(b.shape[-2::-1], x.shape[-2:0:-1])) \
            and isinstance(self.one_row(b), np.ndarray)

    def __call__(self, x, w, b):
        if not _one_row_shaped(b):
            b = self.one_row(b)  # (`covers` found its rows alike)
        lead, k = x.shape[:-1], x.shape[-1]
        if splits_now(x.size * b.size):  # BLAS adds b, copied into each piece's block of rows
            return rows_plus(x, self.rows(w), b.reshape(-1))  # (w as [K, N], laid out once)
        ones = np.empty(lead + (k + 1,), x.dtype)
        ones[..., :-1] = x
        ones[..., -1] = 1
        result = self.product(ones.reshape(-1, k + 1), self.weights(w, b))
        return result.reshape(lead + result.shape[-1:])


def _one_row_shaped(b: np.ndarray) -> bool:
    """Whether b is one row by its shape ([N], [1, N], [1, 1, N], ...; N may be 0)."""
    return all(d == 1 for d in b.shape[:-1])


def _one_row(b: np.ndarray):
    """b's row if all its rows (along its last axis; b not empty) are alike, bit for bit (a
    -0.0 is not a 0.0, a NaN its own), as a read-only copy; else () (not None: `Prepared` takes
    None for b itself)."""
    rows = b.reshape(-1, b.shape[-1])
    # (None for a float of another size, a long double: not joined)
    bits = bit_view_type(rows.dtype)
    if bits is None or not (rows.view(bits) == rows[:1].view(bits)).all():
        return ()
    row = rows[0].copy()
    row.flags.writeable = False
    return row


def bias_joined(product, add, transposed: bool, bias_first: bool, labels: tuple[str, str]):
    """(call, probe) of ``MatMul(x, w)`` then ``Add`` of a static bias b, as one step, the bias
    joined to the product (`_JoinedBias`). `product` and `add` are the two nodes' own kernels;
    `labels` name them in errors. Operands the joined form does not cover (other types or
    ranks, a bias of another shape) take the two kernels in turn, failing as each node would."""
    joined = _JoinedBias(product, transposed)
    multiply = matmul(product, [True, False])
    plus = elementwise(add, [False, True] if bias_first else [True, False])

    def call(args, rows, reusable=()):
        x, w, b = args
        if joined.covers(x, w, b):
            return (joined(x, w, b),)
        (y,) = _labelled(labels[0], multiply, [x, w], rows)
        return _labelled(labels[1], plus, [b, y] if bias_first else [y, b], rows)

    def probe(x, w, b):
        y = _labelled(labels[0], product, x, w)
        return _labelled(labels[1], add, *((b, y) if bias_first else (y, b)))

    declare(probe, measured=abilities_of(product).measured)  # (the plan shows the product's)
    form = abilities_of(product).gemm  # (its formulations' weights: a Gemm's are its product's)
    probe.prepared = getattr(form.product if form is not None else product, "prepared", None)
    return call, probe


def gemm(fn, batched):
    """ONNX Gemm with rows of A (not transposed) and a static B and C: one GEMM for every row of
    every part, C added by broadcasting when it is the same for every row of the product ([N],
    [1, N], a scalar) and joined to the product when alpha and beta are 1 (`_JoinedBias`); any
    other C (say [M, N]), or an A that is not a matrix, one Gemm per row, as the body runs it.
    `fn` is the node's kernel (`kernels/onnx/nn.py`), which declares its parts (`GemmForm`)."""
    form = abilities_of(fn).gemm
    joined = _JoinedBias(form.product, form.trans_b) if form.alpha == form.beta == 1.0 else None

    def call(args, rows, reusable=()):
        a, b, c = (list(args) + [None])[:3]
        per_row = c is not None and form.beta != 0.0 and (  # (beta 0: C left out, `nn.gemm`)
            np.ndim(c) > 2 or np.ndim(c) == 2 and np.shape(c)[0] != 1)
        if a.ndim != 3 or per_row:
            return (np.stack([fn(a[k], b, c) for k in range(rows)]),)
        if joined is not None and c is not None and joined.covers(a, b, c):
            return (joined(a, b, c),)
        result = fn(a.reshape(-1, a.shape[-1]), b, c)
        return (result.reshape(a.shape[:-1] + result.shape[-1:]),)

    return call


def _labelled(label, fn, *args):
    """fn(*args), an error it raises named as the node `label` names would name it."""
    try:
        return fn(*args)
    except CyloopError:
        raise
    except Exception as e:
        raise _failed(label, e) from e


def with_axes(fn, batched):
    """Squeeze / Unsqueeze given axes as an input: the axes shift past the row axis."""

    def call(args, rows, reusable=()):
        data, *rest = args
        if rest and rest[0] is not None:
            axes = np.asarray(rest[0], dtype=np.int64)
            return (fn(data, np.where(axes >= 0, axes + 1, axes), *rest[1:]),)
        return (fn(data),)

    return call


def reduced(fn, own, by_attribute: bool, noop: bool = False):
    """A reduction of rows (engine/hoist.py `_reduced_rows`): `fn(x)` reduces every axis of a
    chunk x but the row axis (`by_attribute`), or `fn(x, axes)` reduces the `axes` of the
    node's own numbering (its axes input: shifted past the row axis; none, or none named, every
    axis of a row, unless `noop`, where the node reduces none). Rows of one number each reduce
    by `own`, the node's kernel on a row."""

    def call(args, rows, reusable=()):
        x = args[0]
        if np.ndim(x) < 2:  # (every axis of a number is none: numpy would reduce the rows)
            return (np.stack([own(x[k], *args[1:]) for k in range(rows)]),)
        if by_attribute:
            return (fn(x),)
        axes = args[1] if len(args) > 1 else None
        if axes is None or np.size(axes) == 0:
            if noop:  # (no reduction: element by element, rows as they are)
                return (fn(x, axes),)
            return (fn(x, np.arange(1, x.ndim, dtype=np.int64)),)
        axes = np.asarray(axes, dtype=np.int64)
        return (fn(x, np.where(axes >= 0, axes + 1, axes)),)

    return call


def axis_shifted(fn):
    """OpenVINO's Gather `fn` on rows: its axis input shifts past the row axis (if not
    negative)."""

    def shifted(data, indices, axis):
        axis = int(np.asarray(axis).reshape(()))
        return fn(data, indices, axis + 1 if axis >= 0 else axis)

    return shifted


def gathered(fn, own):
    """A Gather of rows by static indices (`fn`: with the axis shifted past the row axis). An
    index out of range is the same at every row, so the node raises its own error on row 0 (the
    first-row probe does not see it on a run whose indices, too many to be remembered by value,
    changed), naming the row's axis."""

    def call(args, rows, reusable=()):
        try:
            return (fn(*args),)
        except IndexError:
            own(args[0][0], *args[1:])
            raise

    return call


def parts(fn):
    """Split of rows (`fn`: with the axis shifted past the row axis): every part a result, laid
    out contiguous once a chunk (a part along an inner axis is a strided view, which the body's
    kernels would read strided at every iteration; the Split's own choice of views or copies,
    timed by the period of an iteration, has no iterations to time here)."""

    def call(args, rows, reusable=()):
        with untimed():
            split = fn(*args)
        return tuple(np.ascontiguousarray(part) for part in split)

    return call


def concatenated(fn, batched):
    """Concat of rows (`fn`: with the axis shifted past the row axis): a static operand, the
    same in every row, is broadcast along the row axis (a view)."""

    def call(args, rows, reusable=()):
        return (fn(*[a if b else np.broadcast_to(a, (rows, *np.shape(a)))
                     for a, b in zip(args, batched)]),)

    return call


def reshaped(fn, batched):
    """Reshape: the target shape gains the row count in front."""

    def call(args, rows, reusable=()):
        data, shape = args
        return (fn(data, np.concatenate([[rows], np.asarray(shape, np.int64).ravel()])),)

    return call


def broadcast(fn, batched):
    """Expand (or a Broadcast) of rows to a static target shape: the row count goes in front of
    the target and the rows' dims are aligned behind it (ones pad the shorter of the two), so
    numpy broadcasts every row as the node broadcasts it alone."""

    def call(args, rows, reusable=()):
        data, target, *rest = args
        target = np.asarray(target, np.int64).ravel()
        rank = max(data.ndim - 1, target.size)
        data = np.reshape(data, (rows,) + (1,) * (rank - data.ndim + 1) + data.shape[1:])
        target = np.concatenate([[rows], np.ones(rank - target.size, np.int64), target])
        return (fn(data, target, *rest),)

    return call


def leading(fn, multi=False):
    """A kernel that already treats a leading row axis as a batch (a shifted-axes Squeeze, a
    cell's input projection)."""

    def call(args, rows, reusable=()):
        result = fn(*args)
        return tuple(result) if multi else (result,)

    return call


def pack(args, rows, reusable=()):
    """Rows of a sliced input, contiguous: as they are if each part already is, else copied."""
    (parts,) = args
    if rows == 0 or parts[0].flags.c_contiguous:
        return (parts,)
    return (np.ascontiguousarray(parts),)
