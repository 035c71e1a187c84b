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


class LongTokenIR:
    """Loading an IR whose size is one long token, a comment or an attribute value, against
    OpenVINO's read_model: load time against size (linear, not quadratic, on every expat)."""

    params = ((10, 50, 200), ("comment", "attribute"))
    param_names = ("megabytes", "token")
    timeout = 300

    def setup(self, megabytes, token):
        import shutil

        from cyloop.cli import EXAMPLES

        self.directory = tempfile.TemporaryDirectory(prefix="cyloop-asv-")
        self.path = f"{self.directory.name}/long.xml"
        with open(EXAMPLES[0]) as file:
            text = file.read()
        long = "x" * (megabytes * 10**6)
        text = text.replace("<net ", f"<!--{long}--><net " if token == "comment" else
                            f'<net note="{long}" ', 1)
        with open(self.path, "w") as file:
            file.write(text)
        shutil.copy(EXAMPLES[0][:-4] + ".bin", self.path[:-4] + ".bin")

    def teardown(self, megabytes, token):
        self.directory.cleanup()

    def time_cyloop_load(self, megabytes, token):
        cyloop.load(self.path)

    def time_openvino_read_model(self, megabytes, token):
        import openvino

        openvino.Core().read_model(self.path)
