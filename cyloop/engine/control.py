"""Control-flow nodes other than loops: ONNX If and SequenceMap. Each holds compiled subgraphs
and runs them on whichever driver's `Program`; values read from outer scopes arrive as extra
inputs after the node's own (see `compile.py`)."""

import numpy as np

from ..errors import ExecutionError
from ..sequence import TensorSequence

__all__ = ["BatchedScanRunner", "IfRunner", "SequenceMapRunner"]

_BOOL = np.bool_  # (read once: a module attribute looked up at every If is a cost of its own)


class IfRunner:
    """``outputs = then_branch() if cond else else_branch()``."""

    def __init__(self, then_program, else_program, n_outputs, label):
        self.branches = (else_program, then_program)
        self.n_outputs = n_outputs
        self.label = label
        self.loops = then_program.compiled.loops + else_program.compiled.loops

    def __call__(self, cond, *captures):
        if type(cond) is not _BOOL:  # (a comparison's scalar path makes a numpy bool: as it is)
            cond = np.asarray(cond)
            if cond.size != 1:
                raise ExecutionError(f"{self.label}: the condition must be one boolean, got "
                                     f"shape {cond.shape}")
            cond = cond.reshape(-1)[0]
        outputs = self.branches[1 if cond else 0].run(captures)
        if len(outputs) != self.n_outputs:
            raise ExecutionError(f"{self.label}: the branch taken has {len(outputs)} outputs, "
                                 f"the node {self.n_outputs}")
        return tuple(outputs)


class SequenceMapRunner:
    """Applies the body to the i-th element of every sequence input (tensor inputs as they are)
    and gathers each body output into an output sequence."""

    def __init__(self, body_program, n_inputs, n_outputs, label):
        self.body = body_program
        self.n_inputs = n_inputs
        self.n_outputs = n_outputs
        self.label = label
        self.loops = body_program.compiled.loops

    def __call__(self, *args):
        inputs, captures = args[: self.n_inputs], list(args[self.n_inputs:])
        lengths = {len(x) for x in inputs if isinstance(x, TensorSequence)}
        if len(lengths) != 1:
            raise ExecutionError(f"{self.label}: sequence inputs must have one length, got "
                                 f"{sorted(lengths)}")
        (length,) = lengths
        results = [[] for _ in range(self.n_outputs)]
        for i in range(length):
            step = [x[i] if isinstance(x, TensorSequence) else x for x in inputs]
            for k, value in enumerate(self.body.run(step + captures)):
                results[k].append(value)
        return tuple(TensorSequence(items) for items in results)


class BatchedScanRunner:
    """ONNX Scan-8: the scan loop run per batch element b on its first sequence_lens[b] steps;
    final states stacked on the batch axis, scan outputs zero-padded to the longest sequence."""

    def __init__(self, driver, n_states, n_inputs, label):
        self.driver = driver
        self.n_states = n_states
        self.n_inputs = n_inputs
        self.label = label
        self.loops = [driver]

    def __call__(self, sequence_lens, *args):
        inputs, captures = args[: self.n_inputs], args[self.n_inputs:]
        states, scans = inputs[: self.n_states], inputs[self.n_states:]
        batch, max_len = scans[0].shape[0], scans[0].shape[1]
        lens = np.full(batch, max_len, np.int64) if sequence_lens is None else \
            np.asarray(sequence_lens, np.int64).reshape(-1)
        if lens.shape != (batch,) or np.any(lens < 0) or np.any(lens > max_len):
            raise ExecutionError(f"{self.label}: sequence_lens {lens.tolist()} does not fit a "
                                 f"batch of {batch} sequences of at most {max_len} steps")
        per_batch = []
        for b in range(batch):
            outputs = self.driver(*[s[b] for s in states], *[x[b, : lens[b]] for x in scans],
                                  *captures)
            padded = list(outputs[: self.n_states])
            for y in outputs[self.n_states:]:
                pad = [(0, max_len - y.shape[0])] + [(0, 0)] * (y.ndim - 1)
                padded.append(np.pad(y, pad))
            per_batch.append(padded)
        return tuple(np.stack([row[k] for row in per_batch]) for k in range(len(per_batch[0])))
