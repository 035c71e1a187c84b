"""A Loop growing a sequence by SequenceInsert (W6 shape): cyloop against onnxruntime."""

import numpy as np

import cyloop

from .common import sequence_insert_kept_model, sequence_insert_model


class SequenceInsertLoop:
    """The sequence only stacked after the loop: cyloop runs it as a concatenated output."""

    params = ((500, 2000, 8000),)
    param_names = ("iterations",)
    build = staticmethod(sequence_insert_model)

    def setup(self, iterations):
        import onnxruntime as ort

        onnx_model = self.build()
        self.feeds = {"N": np.array(iterations, np.int64),
                      "row": np.random.default_rng(0).standard_normal(64).astype(np.float32)}
        self.model = cyloop.load(onnx_model)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(onnx_model.SerializeToString(), options,
                                            providers=["CPUExecutionProvider"])

    def time_cyloop(self, iterations):
        self.model.run(self.feeds)

    def time_onnxruntime_1_thread(self, iterations):
        self.session.run(None, self.feeds)


class SequenceInsertLoopKept(SequenceInsertLoop):
    """The sequence returned too: cyloop makes it (O(1) appends to a shared element list)."""

    build = staticmethod(sequence_insert_kept_model)
