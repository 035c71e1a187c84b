"""One Model shared by threads and run many times: each run's results are those of a run on its
own, repeated runs keep memory flat, and nothing a run returned changes afterwards."""

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import cyloop
from cyloop.cli import EXAMPLES

from .engine.test_limits import _nested

THREADS = 4


def _feeds(path, seed):
    """Feeds for an example model: an LSTM TensorIterator IR, or an ONNX Loop (its trip count
    varies with the seed, so threads run loops of different lengths)."""
    rng = np.random.default_rng(seed)
    if path.endswith(".xml"):
        return {"X": rng.standard_normal((2, 16, 8), np.float32),
                "H0": rng.standard_normal((2, 16), np.float32),
                "C0": rng.standard_normal((2, 16), np.float32)}
    return {"trip_count": np.array(50 + 10 * seed, np.int64),
            "row": rng.standard_normal(4, np.float32)}


def _equal(a, b, check=np.testing.assert_array_equal):
    """The same outputs: the same names, lengths and values (compared by `check`)."""
    assert a.keys() == b.keys()
    for name in a:
        got, want = a[name], b[name]
        if isinstance(want, list):
            assert len(got) == len(want), name
            for x, y in zip(got, want):
                check(x, y, err_msg=name)
        else:
            check(got, want, err_msg=name)


def _close(a, b):
    """The same outputs to float32 rounding: what runs of one model agree to when a matrix
    product's shapes or formulation differ between them (a measured choice on trial, a chunk of a
    batch with fewer rows: BLAS picks its kernels by the shapes, and on an AMD EPYC with
    OpenBLAS's Haswell kernels a 1-row and a 10-row product differ in the last bit)."""
    _equal(a, b, lambda x, y, err_msg: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6,
                                                                  err_msg=err_msg))


@pytest.mark.parametrize("tune", [False, True], ids=["fixed", "tuned"])
@pytest.mark.parametrize("path", EXAMPLES, ids=["lstm-ti-ir", "loop-sequence-onnx"])
def test_threads_sharing_a_model_get_what_each_run_alone_gets(path, tune):
    """Exactly with tune=False; to rounding when tuned, where a trial running across the
    threads' runs may run another formulation from one run to the next."""
    model = cyloop.load(path, tune=tune)
    feeds = [_feeds(path, seed) for seed in range(THREADS)]
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
            (_close if tune else _equal)(got, alone[k])


def test_each_thread_has_its_own_limits():
    """A run stopped by its time limit in one thread leaves the runs of other threads alone."""
    graph, feeds = _nested(20, 20, by_condition=True)
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
        _equal(got, expected)


@pytest.mark.parametrize("path", EXAMPLES, ids=["lstm-ti-ir", "loop-sequence-onnx"])
def test_returned_arrays_never_change_after_later_runs(path):
    model = cyloop.load(path)
    first = model.run(_feeds(path, 0))
    kept = {name: [v.copy() for v in value] if isinstance(value, list) else value.copy()
            for name, value in first.items()}
    for seed in range(1, 6):
        model.run(_feeds(path, seed))
    _equal(first, kept)


RSS_SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import cyloop
    from tests.test_concurrency import _feeds
    path = sys.argv[1]
    model = cyloop.load(path)
    feeds = [_feeds(path, seed) for seed in range(4)]

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
