"""Per-iteration overhead of the loop driver on a tiny body (W1)."""

import cyloop

from .common import counter_graph, counter_numpy


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
