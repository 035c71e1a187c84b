"""The models real exporters wrote (asv_benchmarks/corpus), each on its own feeds, on cyloop and
on onnxruntime (its default threads, and one), at the steady state: after the runs in which
cyloop's measured choices take their trials."""

import os
import sys

import cyloop

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from corpus import entries  # (asv_benchmarks/corpus, beside this package)

from . import common

_ENTRIES = {entry.name: entry for entry in entries()}


class ExportedModels:
    params = (list(_ENTRIES),)
    param_names = ("model",)
    timeout = 300

    def setup(self, name):
        import onnxruntime as ort

        entry = _ENTRIES[name]
        self.feeds = entry.feeds()
        self.model = cyloop.load(str(entry.path))
        common.warm_up(self.model, lambda: self.model.run(self.feeds))
        self.sessions = {}
        for threads in (0, 1):
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.log_severity_level = 3  # (errors only, not notes on unused initializers)
            self.sessions[threads] = ort.InferenceSession(
                str(entry.path), options, providers=["CPUExecutionProvider"])

    def time_cyloop(self, name):
        self.model.run(self.feeds)

    def time_onnxruntime(self, name):
        self.sessions[0].run(None, self.feeds)

    def time_onnxruntime_1_thread(self, name):
        self.sessions[1].run(None, self.feeds)
