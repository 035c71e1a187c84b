"""The comparison workloads (W1-W6; W4 as a TensorIterator and as an ONNX Loop; the RNN, LSTM
and GRU cells as jax2onnx exports them) on cyloop: time, peak memory, and bytes the planner
copies per iteration. `asv_benchmarks/compare.py` runs the same workloads on the peers."""

import tempfile

import numpy as np

import cyloop

from . import common

# The models the workloads write (IR, jax2onnx exports), removed when the process that made them
# exits (asv's benchmark processes forked from it leave with os._exit, so only it removes them).
_TEMPORARY = tempfile.TemporaryDirectory(prefix="cyloop-asv-")
_DIRECTORY = _TEMPORARY.name

WORKLOADS = {
    "W1": lambda: common.w1_counter_onnx(),
    "W2-loop": lambda: common.w2_rnn_loop_onnx(),
    "W2-scan": lambda: common.w2_rnn_scan_onnx(),
    "W2-ti": lambda: common.w2_rnn_ti_ir(_DIRECTORY),
    "W3-ti-p1": lambda: common.w3_reverse_ti_ir(_DIRECTORY, 1),
    "W3-ti-p2": lambda: common.w3_reverse_ti_ir(_DIRECTORY, 2),
    "W3-scan": lambda: common.w3_reverse_scan_onnx(),
    "W4-ti": lambda: common.lstm_cell_ti_ir(_DIRECTORY)[:2] + (None,),
    "W4-loop": lambda: common.w4_lstm_loop_onnx(),
    "W5": lambda: common.w5_while_onnx(),
    "W6": lambda: (common.sequence_insert_model(),
                   {"N": np.array(2000, np.int64), "row": np.ones(64, np.float32)}, None),
    **{name: (lambda name=name: _exported(name)) for name in common.EXPORTED},
}


def _exported(name):
    """A cell as jax2onnx exports it (`common.EXPORTED`, made in a child interpreter: jax's
    memory is not the run's); skipped without jax2onnx."""
    if not common.exported_available():
        raise NotImplementedError("jax and jax2onnx are not installed")
    return common.exported_file(_DIRECTORY, name)


class Workloads:
    params = (list(WORKLOADS),)
    param_names = ("workload",)
    timeout = 300

    def setup(self, workload):
        model, self.feeds, _ = WORKLOADS[workload]()
        self.model = cyloop.load(model)
        self.model.run(self.feeds)

    def time_run(self, workload):
        self.model.run(self.feeds)

    def peakmem_run(self, workload):
        self.model.run(self.feeds)

    def track_bytes_copied_per_iteration(self, workload):
        self.model.reset_counters()
        self.model.run(self.feeds)
        counters = list(self.model.counters().values())
        iterations = sum(c["iterations"] for c in counters) or 1
        return sum(c["bytes_copied"] for c in counters) / iterations

    track_bytes_copied_per_iteration.unit = "bytes"
