"""W4: an LSTMCell TensorIterator IR, cyloop against OpenVINO's CPU plugin (1 thread and default,
f32 inference precision)."""

import tempfile

import cyloop

from .common import lstm_cell_ti_ir


class LSTMCellTensorIterator:
    def setup(self):
        import openvino as ov
        import openvino.properties as props
        import openvino.properties.hint as hints

        self.directory = tempfile.mkdtemp()
        path, self.feeds, ov_model = lstm_cell_ti_ir(self.directory)
        self.model = cyloop.load(path)
        core = ov.Core()
        f32 = {hints.inference_precision: ov.Type.f32}
        self.ov_default = core.compile_model(ov_model, "CPU", f32)
        self.ov_single = core.compile_model(ov_model, "CPU",
                                            {**f32, props.inference_num_threads: 1})
        self.inputs = list(self.feeds.values())

    def time_cyloop(self):
        self.model.run(self.feeds)

    def time_openvino_cpu_default(self):
        self.ov_default(self.inputs)

    def time_openvino_cpu_1_thread(self):
        self.ov_single(self.inputs)
