"""One Model shared by threads and run many times: each run's results are those of a run on its
own, repeated runs keep memory flat, and nothing a run returned changes afterwards."""

import subprocess
import sys
import textwrap
import threading

import pytest

import cyloop
from cyloop.cli import EXAMPLES

from .support.loops import nested
from .support.outputs import assert_close_outputs, assert_same_outputs, example_feeds

THREADS = 4




@pytest.mark.parametrize("tune", [False, True], ids=["fixed", "tuned"])
@pytest.mark.parametrize("path", EXAMPLES, ids=["lstm-ti-ir", "loop-sequence-onnx"])
def test_threads_sharing_a_model_get_what_each_run_alone_gets(path, tune):
    """Exactly with tune=False; to rounding when tuned, where a trial running across the
    threads' runs may run another formulation from one run to the next."""
    model = cyloop.load(path, tune=tune)
    feeds = [example_feeds(path, seed) for seed in range(THREADS)]
    alone = [model.run(f) for f in feeds]
    results = {}
    start = threading.Barrier(THREADS)

    def work(k):
        start.wait()
        results[k] = [model.run(feeds[k]) for _ in range(25)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == list(range(THREADS))
    for k in range(THREADS):
        for got in results[k]:
            (assert_close_outputs if tune else assert_same_outputs)(got, alone[k])


def test_each_thread_has_its_own_limits():
    """A run stopped by its time limit in one thread leaves the runs of other threads alone."""
    graph, feeds = nested(20, 20, by_condition=True)
    model = cyloop.Model(graph)
    expected = model.run(dict(feeds))
    outcomes = {}

    def limited():
        try:
            model.run(dict(feeds), time_limit=1e-9)
        except cyloop.LoopLimitError as e:
            outcomes["limited"] = e

    def free():
        outcomes["free"] = [model.run(dict(feeds)) for _ in range(20)]

    threads = [threading.Thread(target=limited), threading.Thread(target=free)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert "time_limit=1e-09" in str(outcomes["limited"])
    for got in outcomes["free"]:
        assert_same_outputs(got, expected)


@pytest.mark.parametrize("path", EXAMPLES, ids=["lstm-ti-ir", "loop-sequence-onnx"])
def test_returned_arrays_never_change_after_later_runs(path):
    model = cyloop.load(path)
    first = model.run(example_feeds(path, 0))
    kept = {name: [v.copy() for v in value] if isinstance(value, list) else value.copy()
            for name, value in first.items()}
    for seed in range(1, 6):
        model.run(example_feeds(path, seed))
    assert_same_outputs(first, kept)


RSS_SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import cyloop
    from tests.support.outputs import example_feeds
    path = sys.argv[1]
    model = cyloop.load(path)
    feeds = [example_feeds(path, seed) for seed in range(4)]

    def rss_kib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() // 1024

    for k in range(300):  # warm up: allocator pools, the measured choices, caches
        model.run(feeds[k % 4])
    before = rss_kib()
    for k in range(3000):
        model.run(feeds[k % 4])
    print(before, rss_kib())
""")


@pytest.mark.parametrize("path", EXAMPLES, ids=["lstm-ti-ir", "loop-sequence-onnx"])
def test_repeated_runs_keep_memory_flat(path):
    """3,000 runs after a warm-up grow the resident set by less than 2 MiB (a leak of one output
    a run would grow it by several)."""
    proc = subprocess.run([sys.executable, "-c", RSS_SCRIPT, path], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    before, after = map(int, proc.stdout.split())
    assert after - before < 2048, (before, after)
