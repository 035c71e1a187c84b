"""The pure-Python reference driver (``CYLOOP_PURE_PYTHON=1``): the loop semantics, read as code.

It has the Cython driver's interface and meaning but none of its memory plan: slices are taken by
plain indexing (still views), each iteration's emitted results are kept in a list and joined once
after the loop, and carried values are handed over as whatever the body returned. It is the oracle
the Cython driver is tested against, so it stays short and obvious.
"""

import numpy as np

from ._compile import PROGRESS_EVERY
from .errors import CyloopError, ExecutionError, LoopLimitError, ModelError
from .ir import CarriedInput, ConcatOutput, InvariantInput, OuterInput, SlicedInput, slice_count

__all__ = ["LoopDriver", "Program"]


class Program:
    """A compiled graph (see `_compile.py`), run step by step."""

    def __init__(self, compiled):
        self.compiled = compiled

    def run(self, args):
        compiled = self.compiled
        if len(args) != len(compiled.input_slots):
            raise TypeError(f"program {compiled.name!r} takes {len(compiled.input_slots)} "
                            f"inputs, got {len(args)}")
        slots = [None] * len(compiled.slot_names)
        for slot, value in compiled.constants.items():
            slots[slot] = value
        for slot, value in zip(compiled.input_slots, args):
            slots[slot] = value
        for step in compiled.steps:
            inputs = [slots[i] if i >= 0 else None for i in step.inputs]
            try:
                result = step.fn(*inputs)
            except CyloopError:
                raise
            except Exception as e:
                raise ExecutionError(f"{step.label} failed: {type(e).__name__}: {e}") from e
            results = tuple(result) if step.multi else (result,)
            if len(results) != len(step.outputs):
                raise ExecutionError(f"{step.label} returned {len(results)} values for "
                                     f"{len(step.outputs)} outputs")
            for slot, value in zip(step.outputs, results):
                if slot >= 0:
                    slots[slot] = value
            for slot in step.kills:
                slots[slot] = None
        return [slots[i] for i in compiled.output_slots]


def _readonly(value):
    if isinstance(value, np.ndarray) and value.flags.writeable:
        value = value.view()
        value.flags.writeable = False
    return value


def _trip_count(spec, args, label):
    trip = spec.trip_count
    if isinstance(trip, OuterInput):
        trip = args[trip.index]
        if trip is None:
            return None
        trip = np.asarray(trip)
        if trip.size != 1 or trip.dtype.kind not in "iu":
            raise ModelError(f"{label}: the trip count must be one integer, got shape "
                             f"{trip.shape} dtype {trip.dtype}")
        trip = int(trip.reshape(-1)[0])
    if trip is not None and trip < 0:
        return None if spec.negative_trip_count_unbounded else 0
    return trip


def _truth(value, what, label):
    value = np.asarray(value)
    if value.size != 1:
        raise ModelError(f"{label}: the {what} must be one boolean, got shape {value.shape}")
    return bool(value.reshape(-1)[0])


class _Slicer:
    """Part i of one sliced input, by DESIGN's rule, taken with plain indexing."""

    def __init__(self, desc, value, label):
        self.desc = desc
        self.x = _readonly(np.asarray(value))
        self.axis = desc.axis + self.x.ndim if desc.axis < 0 else desc.axis
        if not 0 <= self.axis < self.x.ndim:
            raise ModelError(f"{label}: sliced input {desc.param!r} has axis {desc.axis}, but the "
                             f"value has rank {self.x.ndim} (shape {self.x.shape})")
        try:
            self.n, self.first = slice_count(self.x.shape[self.axis], desc.start, desc.end,
                                             desc.stride, desc.part_size)
        except ValueError as e:
            raise ModelError(f"{label}: sliced input {desc.param!r}: {e}") from None

    def part(self, i):
        lo = self.first + i * self.desc.stride
        index = [slice(None)] * self.x.ndim
        index[self.axis] = slice(lo, lo + self.desc.part_size) if self.desc.keep_axis else lo
        return self.x[tuple(index)]


class LoopDriver:
    """Runs one loop node by the plain-Python loop in `cyloop.ir`'s docstring."""

    def __init__(self, spec, compiled_body, label, settings, destinations, hoist=None):
        # The reference runs every body as written: it is what hoisting is checked against.
        if hoist is not None:
            raise ValueError("the pure-Python driver does not hoist")
        self.spec = spec
        self.label = label
        self.settings = settings
        self.body = Program(compiled_body)
        self.destinations = dict(destinations)
        self.n_captures = len(compiled_body.input_slots) - len(spec.body.inputs)
        declared = {v.name: v.dtype for v in spec.body.inputs}.get(spec.iteration_param)
        self.iteration_dtype = declared if declared is not None and declared.kind in "iu" \
            else np.dtype(np.int64)
        self.reset_counters()

    loops = property(lambda self: self.body.compiled.loops)
    plans_write_into = False  # no out= destinations: emitted results are joined after the loop

    def counters(self):
        return dict(self._counters)

    def reset_counters(self):
        self._counters = dict.fromkeys(
            ["runs", "iterations", "copies", "bytes_copied", "steady_bytes_copied",
             "growth_bytes_copied", "allocations", "bytes_allocated", "in_place_writes",
             "last_preallocated_bytes", "last_iterations", "steady_iterations"], 0)

    def plan(self):
        from .plan import describe_loop

        return describe_loop(self)

    def __call__(self, *args):
        spec, label, counters = self.spec, self.label, self._counters
        counters["runs"] += 1
        captures = [_readonly(v) for v in args[len(args) - self.n_captures:]]
        n_max = _trip_count(spec, args, label)
        go = True
        if isinstance(spec.initial_cond, OuterInput):
            if args[spec.initial_cond.index] is not None:
                go = _truth(args[spec.initial_cond.index], "condition", label)
        elif spec.initial_cond is not None:
            go = bool(spec.initial_cond)

        slicers = {k: _Slicer(inp, args[inp.outer], label)
                   for k, inp in enumerate(spec.inputs) if isinstance(inp, SlicedInput)}
        slice_limit = None
        if slicers:
            counts = {s.n for s in slicers.values()}
            if spec.slices_set_trip_count:
                if len(counts) > 1:
                    detail = ", ".join(f"{s.desc.param!r}: {s.n}" for s in slicers.values())
                    raise ModelError(f"{label}: sliced inputs disagree on the number of "
                                     f"iterations ({detail})")
                n_slices = counts.pop()
                n_max = n_slices if n_max is None else min(n_max, n_slices)
            else:
                slice_limit = min(counts)

        values = {k: args[inp.outer] for k, inp in enumerate(spec.inputs)
                  if isinstance(inp, CarriedInput)}
        invariants = {k: _readonly(args[inp.outer]) for k, inp in enumerate(spec.inputs)
                      if isinstance(inp, InvariantInput)}
        result_names = [v.name for v in spec.body.outputs]
        emitted = {j: [] for j, out in enumerate(spec.outputs) if isinstance(out, ConcatOutput)}
        last = {}
        limit = self.settings.max_iterations
        i = 0
        while go and (n_max is None or i < n_max):
            if limit is not None and i >= limit:
                raise LoopLimitError(f"{label}: reached max_iterations={limit} without "
                                     "finishing; raise max_iterations, or check the loop's trip "
                                     "count and condition")
            if slice_limit is not None and i >= slice_limit:
                name = next(s.desc.param for s in slicers.values() if s.n <= i)
                raise ModelError(f"{label}: iteration {i} runs past the last slice of sliced "
                                 f"input {name!r} ({slice_limit} parts)")
            feed = {}
            if spec.iteration_param:
                feed[spec.iteration_param] = np.array(i, dtype=self.iteration_dtype)
            if spec.cond_param:
                feed[spec.cond_param] = np.array(True)
            for k, inp in enumerate(spec.inputs):
                if k in values:
                    feed[inp.param] = values[k]
                elif k in slicers:
                    feed[inp.param] = slicers[k].part(i)
                else:
                    feed[inp.param] = invariants[k]
            outs = self.body.run([feed[v.name] for v in spec.body.inputs] + captures)
            results = dict(zip(result_names, outs))
            if spec.cond_result:
                go = _truth(results[spec.cond_result], "condition result", label)
            for k, inp in enumerate(spec.inputs):
                if k in values:
                    values[k] = results[inp.result]
            for j, out in enumerate(spec.outputs):
                value = results[out.result]
                if j in emitted:
                    self._check_same(emitted[j], np.asarray(value), j, out, i)
                    emitted[j].append(np.asarray(value))
                else:
                    last[j] = value
            i += 1
            if self.settings.progress is not None and i % PROGRESS_EVERY == 0:
                self.settings.progress(label, i, n_max, False)
        if self.settings.progress is not None and i >= PROGRESS_EVERY:
            self.settings.progress(label, i, n_max, True)

        counters["iterations"] += i
        counters["steady_iterations"] += max(i - 2, 0)
        counters["last_iterations"] = i
        return tuple(self._finish(j, out, emitted, last, values, i) for j, out in
                     enumerate(spec.outputs))

    def _check_same(self, parts, value, j, out, i):
        if parts and (value.shape != parts[0].shape or value.dtype != parts[0].dtype):
            what = "shape" if value.shape != parts[0].shape else "dtype"
            before = parts[0].shape if what == "shape" else parts[0].dtype
            now = value.shape if what == "shape" else value.dtype
            raise ModelError(f"{self.label}: concatenated output #{j} (body output "
                             f"{out.result!r}) changed {what} at iteration {i}: {before} before, "
                             f"{now} now")

    def _finish(self, j, out, emitted, last, values, n):
        spec = self.spec
        if isinstance(out, ConcatOutput):
            parts = emitted[j][::-1] if out.reverse else emitted[j]
            if not parts:
                return out.empty(next((v for v in spec.body.outputs if v.name == out.result),
                                      None))
            joined = np.stack(parts, out.axis) if out.new_axis else np.concatenate(parts, out.axis)
            self._counters["copies"] += n
            self._counters["bytes_copied"] += joined.nbytes
            self._counters["steady_bytes_copied"] += joined.nbytes * max(n - 2, 0) // n
            self._counters["allocations"] += 1
            self._counters["bytes_allocated"] += joined.nbytes
            return joined
        if n:
            return last[j]
        for k, inp in enumerate(spec.inputs):
            if isinstance(inp, CarriedInput) and inp.result == out.result:
                return values[k]
        raise ModelError(f"{self.label}: output #{j} (body output {out.result!r}) has no value: "
                         "the loop ran zero iterations and it is not a carried value")
