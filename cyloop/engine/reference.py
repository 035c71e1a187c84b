"""The pure-Python reference driver (``CYLOOP_PURE_PYTHON=1``): the loop semantics, read as code.

It has the Cython driver's interface and meaning but none of its memory plan: slices are taken by
plain indexing (still views), each iteration's emitted results are kept in a list and joined once
after the loop, and carried values are handed over as whatever the body returned. The spec is
read by `LoopSpec.resolve`, as the Cython driver reads it. It is the oracle the Cython driver is
tested against, so it stays short and obvious.
"""

import numpy as np

from ..errors import CyloopError, ExecutionError, ResourceLimitError
from ..ir import CarriedInput, ConcatOutput, InvariantInput, read_only, truth
from ._core import RunLimits, current_limits, running
from .destinations import LoopFacts
from .settings import COUNTERS, PROGRESS_EVERY

__all__ = ["LoopDriver", "Program"]


class Program:
    """A compiled graph (see `compile.py`), run step by step."""

    def __init__(self, compiled):
        self.compiled = compiled

    def run(self, args, limits=None):
        """Run on `args`; `limits`: the `RunLimits` its loops share (None: those of the run it is
        part of)."""
        with running(limits):  # (a run's own program: its time limit is read between its nodes)
            return self._run(args, limits if limits is not None and limits.time_limit is not None
                             else None)

    def _run(self, args, timed=None):
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
            if timed is not None:
                timed.before(step.label, "it ran")
            inputs = [slots[i] if i >= 0 else None for i in step.inputs]
            try:
                result = step.fn(*inputs)
            except CyloopError:
                raise
            except MemoryError as e:
                raise ResourceLimitError(f"{step.label} failed: {e}") from e
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


def _iteration_number(i: int, dtype: np.dtype) -> np.ndarray:
    """Iteration i as a 0-d array of the iteration number's type; past the type's range, the
    OverflowError the Cython driver's conversion raises (numpy before 2.0 would wrap it)."""
    if dtype.itemsize < 8 and i > np.iinfo(dtype).max:
        raise OverflowError(f"Python integer {i} out of bounds for {dtype}")
    return np.array(i, dtype=dtype)


class LoopDriver:
    """Runs one loop node by the plain-Python loop in `cyloop.ir`'s docstring."""

    def __init__(self, spec, compiled_body, label, settings, hoist=None, node=None):
        # The reference runs every body as written: it is what hoisting is checked against.
        if hoist is not None:
            raise ValueError("the pure-Python driver does not hoist")
        self.spec = spec
        self.label = label
        self.node = node  # the loop node as the model names it (ir.NodeRef), or None
        self.settings = settings
        self.body = Program(compiled_body)
        self.n_captures = len(compiled_body.input_slots) - len(spec.body.inputs)
        self.iteration_dtype = spec.iteration_dtype
        self.reset_counters()

    loops = property(lambda self: self.body.compiled.loops)

    def counters(self):
        return dict(self._counters)

    def reset_counters(self):
        self._counters = dict.fromkeys(COUNTERS, 0)

    def facts(self):
        """This loop described for the plan (nothing is written into: results are joined)."""
        return LoopFacts(self.label, "pure-Python", self.spec, self.body.compiled, False, {},
                         self.counters(), nested=[loop.facts() for loop in self.loops],
                         node=self.node)

    def __call__(self, *args):
        limits = current_limits()
        if limits is not None:
            return self._loop(args, limits)
        settings = self.settings
        with running(RunLimits(settings.max_iterations, settings.time_limit,
                               settings.memory_limit)) as limits:
            return self._loop(args, limits)

    def _loop(self, args, limits):
        spec, label, counters, settings = self.spec, self.label, self._counters, self.settings
        counters["runs"] += 1
        run = spec.resolve(args, label, limits)
        captures = [read_only(v) for v in args[len(args) - self.n_captures:]]
        values = {k: args[inp.outer] for k, inp in enumerate(spec.inputs)
                  if isinstance(inp, CarriedInput)}
        invariants = {k: read_only(args[inp.outer]) for k, inp in enumerate(spec.inputs)
                      if isinstance(inp, InvariantInput)}
        result_names = [v.name for v in spec.body.outputs]
        emitted = {j: [] for j, out in enumerate(spec.outputs) if isinstance(out, ConcatOutput)}
        last = {}
        go, i = run.go, 0
        while go and (run.trip_count is None or i < run.trip_count):
            if i == run.stop_at:
                raise run.stop_error(i, label)
            limits.step(label, i)
            feed = {}
            if spec.iteration_param:
                feed[spec.iteration_param] = _iteration_number(i, self.iteration_dtype)
            if spec.cond_param:
                feed[spec.cond_param] = np.array(True)
            for k, inp in enumerate(spec.inputs):
                if k in values:
                    feed[inp.param] = values[k]
                elif k in run.slicings:
                    feed[inp.param] = run.slicings[k].part(i)
                else:
                    feed[inp.param] = invariants[k]
            outs = self.body.run([feed[v.name] for v in spec.body.inputs] + captures)
            results = dict(zip(result_names, outs))
            if spec.cond_result:
                go = truth(results[spec.cond_result], "condition result", label)
            for k, inp in enumerate(spec.inputs):
                if k in values:
                    values[k] = results[inp.result]
            for j, out in enumerate(spec.outputs):
                value = results[out.result]
                if j in emitted:
                    self._check_same(emitted[j], np.asarray(value), j, out, i)
                    self._check_size(limits, run, np.asarray(value), j, out, i)
                    emitted[j].append(np.asarray(value))
                else:
                    last[j] = value
            i += 1
            if settings.progress is not None and i % PROGRESS_EVERY == 0:
                settings.progress(label, i, run.trip_count, False)
        if settings.progress is not None and i >= PROGRESS_EVERY:
            settings.progress(label, i, run.trip_count, True)

        counters["iterations"] += i
        counters["steady_iterations"] += max(i - 2, 0)
        counters["last_iterations"] = i
        values.update(invariants)  # (zero iterations: an invariant passed through, as it is)
        return tuple(self._finish(j, out, emitted, last, values, i) for j, out in
                     enumerate(spec.outputs))

    def _check_same(self, parts, value, j, out, i):
        if parts and value.shape != parts[0].shape:
            raise out.changed(self.label, j, i, "shape", parts[0].shape, value.shape)
        if parts and value.dtype != parts[0].dtype:
            raise out.changed(self.label, j, i, "dtype", parts[0].dtype, value.dtype)

    def _check_size(self, limits, run, value, j, out, i):
        """Output #j, with `value` its row of iteration i, within `limits.memory_limit` (as the
        Cython driver's buffer: all the rows at once when their number is known)."""
        rows = run.exact if run.exact is not None else i + 1
        if limits.memory_limit is None or rows * max(value.nbytes, 1) <= limits.memory_limit:
            return
        if run.exact is None:
            rows = limits.memory_limit // max(value.nbytes, 1) + 1
        shape = list(value.shape)
        if out.new_axis:
            shape.insert(out.axis + value.ndim + 1 if out.axis < 0 else out.axis, rows)
        else:
            shape[out.axis] *= rows
        raise limits.too_large(f"{self.label}: concatenated output #{j}", tuple(shape),
                               value.dtype)

    def _finish(self, j, out, emitted, last, values, n):
        if isinstance(out, ConcatOutput):
            parts = emitted[j][::-1] if out.reverse else emitted[j]
            if not parts:
                return out.empty(self.spec.declared_output(j))
            joined = np.stack(parts, out.axis) if out.new_axis else np.concatenate(parts, out.axis)
            self._counters["copies"] += n
            self._counters["bytes_copied"] += joined.nbytes
            self._counters["steady_bytes_copied"] += joined.nbytes * max(n - 2, 0) // n
            self._counters["allocations"] += 1
            self._counters["bytes_allocated"] += joined.nbytes
            return joined
        if n:
            return last[j]
        return self.spec.zero_iteration_value(j, values, self.label)
