"""W4: an LSTMCell TensorIterator IR, cyloop against OpenVINO's CPU plugin (1 thread and default,
f32 inference precision)."""

import tempfile

import cyloop
from cyloop.peers import openvino_compiled

from .common import lstm_cell_ti_ir


class LSTMCellTensorIterator:
    def setup(self):
        self.directory = tempfile.TemporaryDirectory(prefix="cyloop-asv-")
        path, self.feeds, ov_model = lstm_cell_ti_ir(self.directory.name)
        self.model = cyloop.load(path)
        self.ov_default = openvino_compiled(ov_model)
        self.ov_single = openvino_compiled(ov_model, threads=1)
        self.inputs = list(self.feeds.values())

    def teardown(self):
        self.directory.cleanup()

    def time_cyloop(self):
        self.model.run(self.feeds)

    def time_openvino_cpu_default(self):
        self.ov_default(self.inputs)

    def time_openvino_cpu_1_thread(self):
        self.ov_single(self.inputs)
