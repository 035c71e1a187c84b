"""Beyond one process: a Model pickles (and compiles again when unpickled), and `run_batched`
splits a batch into chunks, runs them here, on a concurrent.futures pool or on a Dask cluster,
and joins the outputs back into what one run over the whole batch gives."""

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from importlib.resources import files

import numpy as np
import pytest

import cyloop
from cyloop.cli import EXAMPLES
from cyloop.ir import CarriedInput, ConcatOutput, GraphBuilder, LastOutput, SlicedInput

from .support.loops import nested
from .support.onnx_models import lstm_loop_model
from .support.outputs import assert_close_outputs, assert_same_outputs, example_feeds

T, B, I, H = 12, 10, 6, 16
AXES = {"X": 1, "h0": 0, "c0": 0}
OUT_AXES = {"h_last": 0, "c_last": 0, "hs": 1}


def _lstm(**options):
    """An LSTM spelled as an ONNX Loop over X [T, batch, I], and feeds with a batch of B."""
    rng = np.random.default_rng(7)
    feeds = {"T": np.array(T, np.int64), "X": rng.standard_normal((T, B, I), np.float32),
             "W": rng.standard_normal((I, 4 * H), np.float32) * 0.3,
             "R": rng.standard_normal((H, 4 * H), np.float32) * 0.3,
             "B": rng.standard_normal(4 * H, np.float32),
             "h0": rng.standard_normal((B, H), np.float32),
             "c0": rng.standard_normal((B, H), np.float32)}
    return cyloop.load(lstm_loop_model(hidden=H).SerializeToString(), **options), feeds


@pytest.mark.parametrize("path", EXAMPLES, ids=["lstm-ti-ir", "loop-sequence-onnx"])
def test_an_unpickled_model_runs_as_the_original(path):
    model = cyloop.load(path, max_iterations=10**6, time_limit=30.0, memory_limit=2**30,
                        hoist=False, tune=False)
    data = pickle.dumps(model)
    copy = pickle.loads(data)
    assert copy is not model and copy.settings == model.settings
    for seed in range(3):
        feeds = example_feeds(path, seed)
        assert_same_outputs(copy.run(feeds), model.run(feeds))
    # Compact: the graph and its weights, no compiled kernels.
    with open(path, "rb") as f:
        source = len(f.read())
    assert len(data) < 4 * source + 8192, (len(data), source)


def test_a_model_built_in_code_pickles_and_measures_afresh():
    graph, feeds = nested(5, 7, by_condition=True)
    model = cyloop.Model(graph, driver="python")
    copy = pickle.loads(pickle.dumps(model))
    assert copy.settings.driver == "python"
    assert_same_outputs(copy.run(dict(feeds)), model.run(dict(feeds)))
    lstm, lstm_feeds = _lstm()
    lstm.run(lstm_feeds)
    fresh = pickle.loads(pickle.dumps(lstm))
    # The copy has run nothing: its measured choices are its own to make.
    assert all(c["runs"] == 0 for c in fresh.counters().values())
    np.testing.assert_allclose(fresh.run(lstm_feeds)["hs"], lstm.run(lstm_feeds)["hs"],
                               rtol=1e-5, atol=1e-6)


def _per_chunk(model, feeds, chunk_size):
    """The LSTM run on each chunk of the batch's rows in turn, joined: what `run_batched` gives
    bit for bit (with tune=False), whatever the chunks' products round to."""
    runs = []
    for start in range(0, B, chunk_size):
        rows = range(start, min(start + chunk_size, B))
        chunk = {name: np.take(feeds[name], rows, axis=axis) for name, axis in AXES.items()}
        runs.append(model.run({**feeds, **chunk}))
    return {name: np.concatenate([run[name] for run in runs], axis=axis)
            for name, axis in OUT_AXES.items()}


@pytest.mark.parametrize("chunk_size", [1, 3, B, 4 * B])
def test_run_batched_here_is_one_run_over_the_batch(chunk_size):
    model, feeds = _lstm(tune=False)
    whole = model.run(feeds)
    got = model.run_batched(feeds, AXES, chunk_size=chunk_size, output_axis=OUT_AXES)
    # Exactly the chunks' own runs joined; the whole batch's run to rounding (a chunk's products
    # have its rows, and BLAS may round them otherwise), exactly when a chunk is the whole.
    assert_same_outputs(got, _per_chunk(model, feeds, chunk_size))
    (assert_same_outputs if chunk_size >= B else assert_close_outputs)(got, whole)
    # Tuned, measured choices may differ from chunk to chunk: to rounding.
    tuned, _ = _lstm()
    batched = tuned.run_batched(feeds, AXES, chunk_size=chunk_size, output_axis=OUT_AXES)
    assert_close_outputs(batched, whole)


def _running_sum():
    """h <- h + x[:, t] over x [batch, T] (a sliced input on axis 1); outputs h [batch] and every
    h, stacked on axis 1 ([batch, T]): batch axis 0 throughout."""
    body = GraphBuilder("body")
    h = body.input("h", np.float64, ("N",))
    x_t = body.input("x_t", np.float64, ("N",))
    body.output(body.node("Add", h, x_t, outputs=["h_next"]))
    g = GraphBuilder()
    g.input("h0", np.float64, ("N",))
    g.input("x", np.float64, ("N", "T"))
    g.loop(body.build(), inputs=[("h0", CarriedInput(0, "h", "h_next")),
                                 ("x", SlicedInput(0, "x_t", axis=1))],
           outputs=[LastOutput("h_next"), ConcatOutput("h_next", axis=1)],
           output_names=["h", "hs"])
    g.output("h", "hs")
    return g.build()


def test_run_batched_on_an_int_axis_splits_every_feed_and_joins_every_output():
    model = cyloop.Model(_running_sum())
    rng = np.random.default_rng(3)
    feeds = {"h0": rng.standard_normal(7), "x": rng.standard_normal((7, 5))}
    whole = model.run(feeds)
    np.testing.assert_array_equal(whole["hs"][:, -1], whole["h"])
    for chunk_size in (1, 2, 7):
        assert_same_outputs(model.run_batched(feeds, 0, chunk_size=chunk_size), whole)


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_run_batched_on_a_concurrent_futures_pool(kind):
    model, feeds = _lstm(tune=False)
    whole = model.run(feeds)
    if kind == "threads":
        executor = ThreadPoolExecutor(max_workers=2)
    else:
        executor = ProcessPoolExecutor(max_workers=2,
                                       mp_context=multiprocessing.get_context("spawn"))
    with executor:
        got = model.run_batched(feeds, AXES, chunk_size=4, output_axis=OUT_AXES,
                                executor=executor)
    assert_same_outputs(got, _per_chunk(model, feeds, 4))
    assert_close_outputs(got, whole)  # (chunks of 4 rows: to rounding)


def test_run_batched_on_a_dask_cluster_of_two_worker_processes():
    distributed = pytest.importorskip("distributed")
    model, feeds = _lstm(tune=False)
    whole = model.run(feeds)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        got = model.run_batched(feeds, AXES, chunk_size=3, output_axis=OUT_AXES,
                                executor=client)
        pids = client.run(lambda: __import__("os").getpid())
    assert len(set(pids.values())) == 2
    assert_same_outputs(got, _per_chunk(model, feeds, 3))
    assert_close_outputs(got, whole)  # (chunks of 3 rows: to rounding)


@pytest.mark.parametrize("call,error", [
    (lambda m, f: m.run_batched(f, AXES, chunk_size=0, output_axis=OUT_AXES),
     "chunk_size must be a positive integer, not 0"),
    (lambda m, f: m.run_batched(f, {"X": 1, "h0": 1, "c0": 0}, chunk_size=2,
                                output_axis=OUT_AXES),
     r"the split inputs disagree on the batch size: \{'X': 10, 'h0': 16, 'c0': 10\}"),
    (lambda m, f: m.run_batched(f, 0, chunk_size=2),
     "input 'T' is a scalar: it has no batch axis to split"),
    (lambda m, f: m.run_batched(f, {"X": 1, "h": 0}, chunk_size=2, output_axis=OUT_AXES),
     r"batch_axis names inputs that are not fed: \['h'\]"),
    (lambda m, f: m.run_batched(f, {"X": 3}, chunk_size=2, output_axis=OUT_AXES),
     "input 'X': batch axis 3 is out of range for rank 3"),
    (lambda m, f: m.run_batched(f, AXES, chunk_size=2, output_axis={"hs": 1}),
     r"output_axis does not say how to join outputs \['h_last', 'c_last'\]"),
    (lambda m, f: m.run_batched(f, AXES, chunk_size=2, output_axis=OUT_AXES, executor=3),
     (r"executor must be None, a dask.distributed.Client or an object whose submit\(fn, "
      r"\*args\) returns a future")),
])
def test_bad_batching_arguments_are_input_errors(call, error):
    model, feeds = _lstm()
    with pytest.raises(cyloop.InputError, match=error):
        call(model, feeds)


def test_a_sequence_output_is_taken_whole_only_when_said():
    model = cyloop.load(EXAMPLES[1])
    feeds = {"trip_count": np.array(3, np.int64), "row": np.ones(4, np.float32)}
    with pytest.raises(cyloop.InputError, match="output 'rows' is a sequence: it cannot be "
                       "joined along a batch axis"):
        model.run_batched(feeds, {"row": 0}, chunk_size=4)
    got = model.run_batched(feeds, {"row": 0}, chunk_size=4,
                            output_axis={"rows": None, "stacked": 1})
    assert_same_outputs(got, model.run(feeds))


@pytest.mark.parametrize("batch", [1, 3, 7])
def test_the_embedded_batchable_rnn_runs_any_batch_as_onnxruntime(batch):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the oracle) is not installed")
    path = str(files("cyloop.data") / "rnn_scan.onnx")
    rng = np.random.default_rng(batch)
    feeds = {"X": rng.standard_normal((5, batch, 8), np.float32),
             "H0": rng.standard_normal((batch, 16), np.float32)}
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    model = cyloop.load(path)
    assert [v.shape for v in model.inputs] == [("time", "batch", 8), ("batch", 16)]
    got = model.run(feeds)
    for value, oracle in zip(got.values(), expected):
        np.testing.assert_allclose(value, oracle, rtol=1e-5, atol=1e-6)
    joined = model.run_batched(feeds, {"X": 1, "H0": 0}, chunk_size=2,
                               output_axis={"h_last": 0, "hs": 1})
    assert_close_outputs(joined, got)
