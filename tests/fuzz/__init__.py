"""A fuzzer for cyloop's promise that no bad model or feed escapes as anything but a CyloopError.

For any mutated model and any mutated feeds, ``cyloop.load(...)`` then ``.run(feeds)`` ends in a
result, a `cyloop.CyloopError` (any subclass; `LoopLimitError` for a loop stopped by the harness's
small ``max_iterations``), never another exception, a signal or a hang.

- `corpus`: the seed models (the test suite's own, and ``cyloop/data``) with feeds that run.
- `mutate`: hypothesis strategies that mutate them (ONNX protos and IR documents structurally and
  by bytes) and their feeds.
- `worker`: the subprocess that runs batches of mutants under an address-space cap and reports
  each one's outcome; `harness` drives it, restarts it when a mutant kills or hangs it, counts
  outcomes and saves reproducers; `campaign` feeds it what hypothesis draws.
- ``python -m tests.fuzz --models 10000 --feeds 2000``: the long run (``__main__``);
  ``test_fuzz.py``: the CI run (derandomized, about half a minute).

Only `worker` is imported by the subprocess, so it needs neither hypothesis nor openvino.
"""
