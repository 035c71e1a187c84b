"""A fresh process's road to its first result (benchmarks/cold_start.py): `import` of cyloop and
of onnxruntime, and, per model of the corpus real exporters wrote (asv_benchmarks/corpus), its
load and first run on each (cyloop's also from its on-disk cache, the model's entry in it). asv
runs each `timeraw_` body in a new interpreter; the setup it returns beside the body (numpy and
the feeds, and for the load the runtime's import) is not timed."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from corpus import entries  # (asv_benchmarks/corpus, beside this package)

_ENTRIES = {entry.name: entry for entry in entries()}

_FEEDS = """
import numpy as np
with np.load({feeds!r}) as stored:
    feeds = {{key[3:]: stored[key] for key in stored.files if key.startswith("in:")}}
"""


def _feeds(name: str) -> str:
    return _FEEDS.format(feeds=str(_ENTRIES[name].path).replace(".onnx", ".npz"))


_QUIET_ONNXRUNTIME = """
import onnxruntime
options = onnxruntime.SessionOptions()
options.log_severity_level = 3  # (errors only, not notes on unused initializers)
"""


class Import:
    timeout = 120

    def timeraw_cyloop(self):
        return "import cyloop", "import numpy"

    def timeraw_onnxruntime(self):
        return "import onnxruntime", "import numpy"


class LoadAndFirstRun:
    params = (list(_ENTRIES),)
    param_names = ("model",)
    timeout = 600

    def setup(self, name):
        # (the model's entry in an on-disk cache of its own, for the cache hit's timing)
        import tempfile

        import cyloop

        self.cache = tempfile.mkdtemp(prefix="cyloop-cache-")
        cyloop.load(str(_ENTRIES[name].path), cache=self.cache)

    def teardown(self, name):
        import shutil

        shutil.rmtree(self.cache, ignore_errors=True)

    def timeraw_cyloop(self, name):
        path = str(_ENTRIES[name].path)
        return f"cyloop.load({path!r}).run(feeds)", _feeds(name) + "import cyloop\n"

    def timeraw_cyloop_cache_hit(self, name):
        path = str(_ENTRIES[name].path)
        return (f"cyloop.load({path!r}, cache={self.cache!r}).run(feeds)",
                _feeds(name) + "import cyloop\n")

    def timeraw_onnxruntime(self, name):
        path = str(_ENTRIES[name].path)
        body = (f"onnxruntime.InferenceSession({path!r}, options, "
                "providers=['CPUExecutionProvider']).run(None, feeds)")
        return body, _feeds(name) + _QUIET_ONNXRUNTIME
