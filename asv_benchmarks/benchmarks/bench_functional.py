"""The functional API on every workload (W5 in its in-place form, W1 also in int64), beside the
plain Python loop that calls the same step function: its floor."""

from . import common


class Functional:
    params = (list(common.FUNCTIONAL),)
    param_names = ("workload",)
    timeout = 300

    def setup(self, workload):
        _, self.loop, self.api = common.FUNCTIONAL[workload]()
        self.api()

    def time_functional_api(self, workload):
        self.api()

    def time_python_loop(self, workload):
        self.loop()

    def peakmem_functional_api(self, workload):
        self.api()
