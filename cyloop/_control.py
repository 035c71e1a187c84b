"""Control-flow nodes other than loops: ONNX If and SequenceMap. Each holds compiled subgraphs
and runs them on whichever driver's `Program`; values read from outer scopes arrive as extra
inputs after the node's own (see `_compile.py`)."""

import numpy as np

from .errors import ExecutionError
from .sequence import TensorSequence

__all__ = ["IfRunner", "SequenceMapRunner"]


class IfRunner:
    """``outputs = then_branch() if cond else else_branch()``."""

    def __init__(self, then_program, else_program, n_outputs, label):
        self.branches = (else_program, then_program)
        self.n_outputs = n_outputs
        self.label = label
        self.loops = then_program.compiled.loops + else_program.compiled.loops

    def __call__(self, cond, *captures):
        cond = np.asarray(cond)
        if cond.size != 1:
            raise ExecutionError(f"{self.label}: the condition must be one boolean, got shape "
                                 f"{cond.shape}")
        outputs = self.branches[bool(cond.reshape(-1)[0])].run(list(captures))
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
