"""W4: an LSTMCell TensorIterator IR, cyloop against OpenVINO's CPU plugin (1 thread and default,
f32 inference precision); and load time against size of model files whose size is one long
token or field (an IR against OpenVINO's read_model, an ONNX file against onnxruntime's)."""

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


class LongFieldONNX:
    """Loading an ONNX file whose size is one long field, the model's doc string or a node's,
    against onnxruntime's session: load time against size (linear)."""

    params = ((10, 50, 200), ("doc_string", "node"))
    param_names = ("megabytes", "field")
    timeout = 300

    def setup(self, megabytes, field):
        from onnx import TensorProto, helper

        self.directory = tempfile.TemporaryDirectory(prefix="cyloop-asv-")
        self.path = f"{self.directory.name}/long.onnx"
        long = b"x" * (megabytes * 10**6)
        nodes = [helper.make_node("Relu", ["x"], ["y"],
                                  doc_string=long.decode() if field == "node" else None)]
        graph = helper.make_graph(
            nodes, "relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        if field == "doc_string":
            model.doc_string = long.decode()
        with open(self.path, "wb") as file:
            file.write(model.SerializeToString())

    def teardown(self, megabytes, field):
        self.directory.cleanup()

    def time_cyloop_load(self, megabytes, field):
        cyloop.load(self.path)

    def time_onnxruntime_session(self, megabytes, field):
        import onnxruntime

        onnxruntime.InferenceSession(self.path, providers=["CPUExecutionProvider"])
