"""Per-iteration overhead of the loop driver on a tiny body (W1)."""

import cyloop

from .common import counter_graph, counter_numpy, fixed_cost_onnx


class TinyBodyLoop:
    params = ((1_000, 10_000), ("cython", "python"))
    param_names = ("iterations", "driver")

    def setup(self, iterations, driver):
        graph, self.feeds = counter_graph(iterations)
        self.model = cyloop.Model(graph, driver=driver)
        self.model.run(self.feeds)

    def time_run(self, iterations, driver):
        self.model.run(self.feeds)

    def time_numpy_hand_loop(self, iterations, driver):
        counter_numpy(iterations, self.feeds["acc0"])

    def track_bytes_copied_per_iteration(self, iterations, driver):
        self.model.reset_counters()
        self.model.run(self.feeds)
        (counters,) = self.model.counters().values()
        return counters["bytes_copied"] / counters["iterations"]

    track_bytes_copied_per_iteration.unit = "bytes"

    def peakmem_run(self, iterations, driver):
        self.model.run(self.feeds)


class FixedCost:
    """A run's fixed cost: one Add on [2, 3], and a Loop of one Add of 1 and 100 iterations,
    against onnxruntime on one thread."""

    params = (("add", "loop-1", "loop-100"),)
    param_names = ("model",)

    def setup(self, name):
        import onnxruntime as ort

        kind, _, trips = name.partition("-")
        onnx_model, self.feeds = fixed_cost_onnx(kind, int(trips or 1))
        self.model = cyloop.load(onnx_model)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(onnx_model.SerializeToString(), options,
                                            providers=["CPUExecutionProvider"])
        self.model.run(self.feeds)

    def time_cyloop(self, name):
        self.model.run(self.feeds)

    def time_onnxruntime_1_thread(self, name):
        self.session.run(None, self.feeds)
