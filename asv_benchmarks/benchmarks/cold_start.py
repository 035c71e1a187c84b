"""A fresh process's road to its first result, as a user's script, a serverless function or a
worker that loads one model per task walks it: import the runtime, load a model, run it once.
Each probe runs in a new interpreter whose numpy (the user's own data library, which every
runtime here needs) is imported before the clock starts, and prints its times as JSON. Shared by
`bench_cold_start` (asv) and `compare.py --cold-start-only`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ENGINES = ("cyloop", "onnxruntime")

_PROBE = """
import json, sys, time
import numpy as np
path, feeds_path = sys.argv[1:3]
with np.load(feeds_path) as stored:
    feeds = {{key[3:]: stored[key] for key in stored.files if key.startswith("in:")}}
clock = time.perf_counter
start = clock()
{body}
print(json.dumps({{"import": imported - start, "load": loaded - imported,
                  "first_run": ran - loaded}}))
"""

_BODIES = {
    "cyloop": """
import cyloop
imported = clock()
model = cyloop.load(path)
loaded = clock()
model.run(feeds)
ran = clock()
""",
    "onnxruntime": """
import onnxruntime
imported = clock()
options = onnxruntime.SessionOptions()
options.log_severity_level = 3
session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
loaded = clock()
session.run(None, feeds)
ran = clock()
""",
}


def probe_code(engine: str) -> str:
    """The source of one probe of `engine`, run as ``python -c CODE MODEL_PATH FEEDS_PATH``
    (feeds: an .npz whose ``in:NAME`` arrays are the model's inputs)."""
    return _PROBE.format(body=_BODIES[engine])


def environment() -> dict:
    """The probes' environment: this one, writing bytecode (an installed package has its .pyc
    files; a checkout whose environment forbids writing them would time compiling its sources
    on every start)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def probe(engine: str, path, feeds_path, env: dict | None = None) -> dict:
    """One fresh process of `engine` on the model at `path`: seconds to import it, to load the
    model, and to run it once."""
    done = subprocess.run([sys.executable, "-c", probe_code(engine), os.fspath(path),
                           os.fspath(feeds_path)], check=False, capture_output=True, text=True,
                          timeout=600, env=environment() if env is None else env)
    if done.returncode != 0:
        raise RuntimeError(f"{engine} on {path}: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
