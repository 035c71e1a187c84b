"""Side-by-side: the loop workloads on cyloop, onnxruntime, OpenVINO, onnx.reference and a numpy
hand loop, interleaved in one process so machine drift hits every runner alike. With jax and
jax2onnx (the test extra), the RNN, LSTM and GRU cells as jax2onnx exports them too (J2O-*),
and the IR openvino.convert_model writes for them (J2O-*-ir).

    python asv_benchmarks/compare.py [--repeat 7] [--only W2-loop,W6] [--no-memory]
                                     [--startup-only] [--functional-only] [--spellings-only]
                                     [--sweep-only] [--corpus-only] [--cold-start-only]

Every runner's outputs are checked against the numpy loop. Times are medians of at least
`--repeat` interleaved rounds (each runner in every place equally often), in µs per iteration;
peak memory is measured in a fresh subprocess per cell, with that runner's engine alone loaded:
the resident set size sampled during the first run, above its level after loading, so that
native allocations count too (one-time costs such as thread pools count as well). Then cyloop on
the IR spelling of W1-W5 (and J2O-*) against the ONNX ones, interleaved in the same rounds; the
time of `import cyloop` in a fresh interpreter and of `cyloop.load` on each workload's file, and
a fresh process's first model (import, load, first run) with and without cyloop's on-disk cache
against onnxruntime's.
Then the functional API: each workload's step as one Python function, run by cyloop.scan /
while_loop / fori_loop and by the plain Python loop that calls the same function (its floor);
W2 and W4 over batch x hidden against the best peer; last, the models real exporters wrote
(asv_benchmarks/corpus) against onnxruntime and OpenVINO, and on the IR convert_model writes;
and, for the same models, a fresh process's import, load and first run against onnxruntime's.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmarks import common

import cyloop
from cyloop.peers import openvino_compiled, settled_openvino

_TEMPORARY = tempfile.TemporaryDirectory(prefix="cyloop-compare-")  # removed at exit
DIRECTORY = _TEMPORARY.name
IDLE_SECONDS = 0.1  # pause before each timed run (see `measure`)
_LOADED: dict = {}  # workload id -> the cyloop Model measured on it (its plan shows its choices)


def cpu_name() -> str:
    """The CPU's model name and its widest SIMD / matrix features (figures depend on them)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                 if line.startswith("model name")), platform.machine())
    flags = set(next((line.split(":", 1)[1].split() for line in text.splitlines()
                      if line.startswith("flags")), []))
    features = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    return f"{name} ({', '.join(features) or 'no AVX2'})"


def workloads():
    """id -> (builder returning (model or path, feeds, numpy_loop), iterations)."""
    return {
        "W1": (lambda: common.w1_counter_onnx(), 10_000),
        "W1-ir": (lambda: common.converted_ir(DIRECTORY, "w1", common.w1_counter_onnx), 10_000),
        "W1-int64": (lambda: common.w1_counter_int64_onnx(), 10_000),
        "W2-loop": (lambda: common.w2_rnn_loop_onnx(), 1000),
        "W2-scan": (lambda: common.w2_rnn_scan_onnx(), 1000),
        "W2-ti": (lambda: common.w2_rnn_ti_ir(DIRECTORY), 1000),
        "W3-ti-p1": (lambda: common.w3_reverse_ti_ir(DIRECTORY, 1), 4096),
        "W3-ti-p2": (lambda: common.w3_reverse_ti_ir(DIRECTORY, 2), 2048),
        "W3-scan": (lambda: common.w3_reverse_scan_onnx(), 4096),
        "W4-ti": (lambda: _w4_ti(), 200),
        "W4-loop": (lambda: common.w4_lstm_loop_onnx(), 200),
        "W4-loop-ir": (lambda: common.converted_ir(DIRECTORY, "w4", common.w4_lstm_loop_onnx),
                       200),
        "W5": (lambda: common.w5_while_onnx(), 5000),
        "W5-ir": (lambda: common.converted_ir(DIRECTORY, "w5", common.w5_while_onnx), 5000),
        "W6": (lambda: _w6(), 2000),
        "W6-seq": (lambda: _w6(kept=True), 2000),
        # The cells as jax2onnx exports them (with jax and jax2onnx, the test extra, only), and
        # the IR convert_model writes for them.
        **({name: (build, _J2O_STEPS.get(name, 200))
            for name, build in common.EXPORTED.items()} if common.exported_available() else {}),
        **({f"{name}-ir": (lambda name=name: common.converted_ir(DIRECTORY, name.lower(),
                                                                 common.EXPORTED[name]),
                           _J2O_STEPS.get(name, 200))
            for name in common.EXPORTED if name not in _NO_IR}
           if common.exported_available() else {}),
    }


_J2O_STEPS = {"J2O-rnn": 1000, "J2O-buffer": 4000, "J2O-dus": 2000,
              "J2O-rows": 2000, "J2O-while": 2000}  # (the others: 200)
# Exported models OpenVINO's convert_model refuses (2026.4: the fori_loops' Loops, "canonical
# inputs ... loop_carried_dependencies").
_NO_IR = {"J2O-buffer", "J2O-dus", "J2O-rows"}


def _w4_ti():
    path, feeds, _ = common.lstm_cell_ti_ir(DIRECTORY)
    return path, feeds, None  # no numpy loop: checked against OpenVINO's fused cell instead


def _w6(kept=False):
    """W6; `kept`: W6-seq, which returns the sequence too."""
    model = common.sequence_insert_kept_model() if kept else common.sequence_insert_model()
    feeds = {"N": np.array(2000, np.int64),
             "row": np.random.default_rng(6).standard_normal(64).astype(np.float32)}

    def numpy_loop(fd):
        rows = [fd["row"] + np.float32(i) for i in range(int(fd["N"]))]
        return [np.stack(rows), rows] if kept else [np.stack(rows)]

    return model, feeds, numpy_loop


def _path(model, name):
    if isinstance(model, str):
        return model
    import onnx

    path = os.path.join(DIRECTORY, f"{name}.onnx")
    onnx.save(model, path)
    return path


def _failing(error):
    def run():
        raise error

    return run


def runners(name, model, feeds, numpy_loop, only=None):
    """runner name -> callable() returning the outputs as a list; with `only`, that runner
    alone (a memory cell: another engine's model loaded in the process shares its resident
    set, its allocator and its idle threads with the one measured)."""
    def wanted(label):
        return only is None or label == only

    path = _path(model, name)
    out = {}
    if wanted("cyloop"):
        cy = _LOADED[name] = cyloop.load(path)
        out["cyloop"] = lambda: list(cy.run(feeds).values())
    if path.endswith(".onnx") and (wanted("onnxruntime") or wanted("onnxruntime-1")):
        try:
            import onnxruntime as ort

            for label, threads in (("onnxruntime-1", 1), ("onnxruntime", 0)):
                if not wanted(label):
                    continue
                options = ort.SessionOptions()
                options.intra_op_num_threads = threads
                options.log_severity_level = 3  # (errors only, not notes on unused initializers)
                session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
                out[label] = lambda s=session: s.run(None, feeds)
        except ImportError:
            pass
    try:
        import openvino  # noqa: F401  (only to know it is installed)

        for label, threads in (("openvino-1", 1), ("openvino", None)):
            if not wanted(label):
                continue
            try:
                compiled = openvino_compiled(path, threads)
            except Exception:  # noqa: BLE001 - OpenVINO cannot read every model (sequences)
                break
            out[label] = lambda c=compiled: list(c(list(feeds.values())).values())
    except ImportError:
        pass
    if path.endswith(".onnx") and wanted("onnx.reference"):
        try:
            from onnx.reference import ReferenceEvaluator

            evaluator = ReferenceEvaluator(path)
            out["onnx.reference"] = lambda e=evaluator: e.run(None, feeds)
        except ImportError:
            pass
        except Exception as e:  # noqa: BLE001 - it refuses some models: report, do not stop
            out["onnx.reference"] = _failing(e)
    if numpy_loop is not None and wanted("numpy"):
        out["numpy"] = lambda: numpy_loop(feeds)
    return out


def _agrees(got, expected) -> str:
    try:
        for g, e in zip(got, expected):
            if not np.allclose(np.asarray(g, np.float64), np.asarray(e, np.float64), rtol=1e-3,
                               atol=1e-3):
                return "no"
        return "yes"
    except Exception as e:  # noqa: BLE001 - a malformed result is a disagreement
        return f"no ({type(e).__name__})"


def _rounds(cells: dict, repeat: int, pause: float = 0.0) -> dict:
    """name -> seconds of each of at least `repeat` rounds that run every cell once, in an order
    that turns by one place each round, for as many rounds as put every cell in every place
    equally often (a multiple of the cells' count): a run right after another may pay for it
    (measured: the functional API right after the plain loop on W1 took 4% more, 0.7% in the
    other order), and the median of a cell that took the costly place more often than another
    would lean against it."""
    names = list(cells)
    times = {name: [] for name in names}
    for k in range(-(-repeat // len(names)) * len(names) if names else 0):
        for name in names[k % len(names):] + names[:k % len(names)]:
            time.sleep(pause)
            start = time.perf_counter()
            cells[name]()
            times[name].append(time.perf_counter() - start)
    return times


def measure(workload_id, repeat):
    build, iterations = workloads()[workload_id]
    model, feeds, numpy_loop = build()
    cells = runners(workload_id, model, feeds, numpy_loop)
    results = {}
    expected = None
    for name, run in list(cells.items()):
        try:
            outputs = run()
        except Exception as e:  # noqa: BLE001 - report the runner as failing, keep the others
            results[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:60]}"}
            del cells[name]
            continue
        if name == "numpy" or (expected is None and numpy_loop is None and name == "openvino"):
            expected = outputs
        results[name] = {"outputs": outputs}
    if expected is None and "numpy" in results:
        expected = results["numpy"]["outputs"]
    # Each run follows a pause, in which the previous runner's worker threads go idle:
    # onnxruntime's pool spins after a run, and on a 2-core machine it takes the core the next
    # runner's BLAS threads use (measured on W4-loop: cyloop 42 us/step alone, 118 right after
    # an onnxruntime run, 42 again after this pause).
    times = _rounds(cells, repeat, IDLE_SECONDS)
    for name, samples in times.items():
        results[name]["us_per_iteration"] = statistics.median(samples) / iterations * 1e6
        results[name]["agrees"] = "ref" if results[name]["outputs"] is expected else \
            (_agrees(results[name]["outputs"], expected) if expected is not None else "?")
        results[name]["output_bytes"] = sum(np.asarray(o).nbytes for o in
                                            results[name]["outputs"])
    return results


def peak_memory(workload_id, runner):
    """Peak RSS growth (bytes) of one run in a fresh process, or None."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--cell", workload_id,
                           runner], capture_output=True, text=True, timeout=900, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("PEAK "):
            return int(line.split()[1])
    return None


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cell(workload_id, runner):
    """Peak RSS above the pre-run level during the first run after loading, sampled every 0.5 ms
    by a thread (so native allocations, which tracemalloc does not see, count too)."""
    import gc
    import threading

    build, _ = workloads()[workload_id]
    model, feeds, numpy_loop = build()
    run = runners(workload_id, model, feeds, numpy_loop, only=runner)[runner]
    gc.collect()  # no warm-up run: its freed memory would hide the next run's peak
    baseline, peak, done = _rss(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.0005)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    outputs = run()
    peak[0] = max(peak[0], _rss())
    done.set()
    watcher.join()
    del outputs
    print(f"PEAK {max(peak[0] - baseline, 0)}")


def startup(chosen, repeat):
    """`import cyloop` in a fresh interpreter, and `cyloop.load` of each workload's model file
    (parsing included): medians, in milliseconds."""
    code = "import time; t = time.perf_counter(); import cyloop; print(time.perf_counter() - t)"
    imports = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                     check=True).stdout) for _ in range(repeat)]
    print()
    print(f"`import cyloop` (fresh interpreter): {statistics.median(imports) * 1e3:.0f} ms")
    print()
    print("| workload | cyloop.load, ms |")
    print("|---|---:|")
    for workload_id in chosen:
        model, _, _ = workloads()[workload_id][0]()
        path = _path(model, workload_id)
        cyloop.load(path)  # warm: the frontend's own imports are counted once, above
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            cyloop.load(path)
            times.append(time.perf_counter() - start)
        print(f"| {workload_id} | {statistics.median(times) * 1e3:.1f} |")


# A workload's IR spelling against its ONNX ones, for the spellings table.
SPELLINGS = {
    "W1": ("W1-ir", ("W1",)),
    "W2": ("W2-ti", ("W2-loop", "W2-scan")),
    "W3": ("W3-ti-p1", ("W3-scan",)),
    "W4": ("W4-loop-ir", ("W4-loop",)),
    "W5": ("W5-ir", ("W5",)),
    **{name: (f"{name}-ir", (name,)) for name in common.EXPORTED if name not in _NO_IR},
}


# Untimed runs of a model the main table has not run: until its measured choices are made
# (common.warm_up; trials open once the work pays for them, which may take many runs).
warm_up = common.warm_up


def spellings(chosen, repeat):
    """cyloop on each workload's IR and ONNX spellings, interleaved in the same rounds: the
    target "IR within 1.2x of ONNX" compares the spellings, and the main table's cells, run
    minutes apart, drift apart on a shared host (W5's numpy loop once took 1.7x longer in
    W5-ir's cell than in W5's). Each spelling's model is the main table's, its measured choices
    made, or one warmed until they are (`warm_up`), so that the spellings are compared at their
    steady state (the main table's medians include each model's trials); three times `repeat`
    rounds, as its runs are short."""
    print()
    print("| workload | IR spelling, µs / iteration | ONNX spellings | IR / best ONNX | agree |")
    print("|---|---:|---|---:|---|")
    for workload, (ir, onnx_ids) in SPELLINGS.items():
        if chosen is not None and workload.split("-")[0] not in chosen or ir not in workloads():
            continue
        cells, iterations, agree = {}, {}, []
        for workload_id in (ir, *onnx_ids):
            build, iterations[workload_id] = workloads()[workload_id]
            model, feeds, numpy_loop = build()
            loaded = _LOADED.get(workload_id)
            if loaded is None:
                run = runners(workload_id, model, feeds, None, only="cyloop")["cyloop"]
                warm_up(_LOADED[workload_id], run)
            else:
                def run(m=loaded, f=feeds):
                    return list(m.run(f).values())
            agree.append(_agrees(run(), numpy_loop(feeds)))
            cells[workload_id] = run
        times = _rounds(cells, 3 * repeat, IDLE_SECONDS)
        us = {w: statistics.median(times[w]) / iterations[w] * 1e6 for w in cells}
        best = min(us[w] for w in onnx_ids)
        shown = ", ".join(f"{w} {us[w]:.2f}" for w in onnx_ids)
        print(f"| {workload} | {ir} {us[ir]:.2f} | {shown} | {us[ir] / best:.2f} | "
              f"{'yes' if set(agree) == {'yes'} else 'no'} |", flush=True)


def functional(chosen, repeat):
    """The functional-API table: interleaved medians of the API and of the plain loop, each
    first in every other round (see `_rounds`). Their ratio is the median of each round's own
    (the two run back to back), with the quartiles of those: a host busy for a while slows
    both runs of a round, and the ratio of the medians would take runs of different rounds."""
    print()
    print("| workload | Python loop, µs / iteration | functional API | API / loop | "
          "quartiles | agrees |")
    print("|---|---:|---:|---:|---|---|")
    for workload_id, build in common.FUNCTIONAL.items():
        if chosen is not None and workload_id.split("-")[0] not in chosen:
            continue
        iterations, loop, api = build()
        agrees = _agrees(api(), loop())
        times = _rounds({"loop": loop, "api": api}, repeat)
        loop_us, api_us = (statistics.median(times[k]) / iterations * 1e6 for k in ("loop", "api"))
        ratios = [a / b for a, b in zip(times["api"], times["loop"])]
        low, _, high = statistics.quantiles(ratios, n=4)
        print(f"| {workload_id} | {loop_us:.3f} | {api_us:.3f} | {statistics.median(ratios):.2f} "
              f"| {low:.2f}-{high:.2f} | {agrees} |", flush=True)


def _calibrated(run, floor=2e-3) -> int:
    """How many calls of `run` make a sample of at least `floor` seconds (a model of a few µs is
    timed over many calls: one call is within the clock's and the scheduler's noise)."""
    calls = 1
    while calls < 1 << 16:
        start = time.perf_counter()
        for _ in range(calls):
            run()
        if time.perf_counter() - start >= floor:
            break
        calls *= 2
    return calls


def _us_per_call(cells: dict, repeat: int) -> dict:
    """runner -> µs per call of `cells`' callables: medians of interleaved rounds (`_rounds`),
    each sample over as many calls as last 2 ms (`_calibrated`)."""
    calls = {name: _calibrated(run) for name, run in cells.items()}

    def repeated(run, n):
        def samples():
            for _ in range(n):
                run()

        return samples

    times = _rounds({name: repeated(run, calls[name]) for name, run in cells.items()}, repeat,
                    IDLE_SECONDS)
    return {name: statistics.median(t) / calls[name] * 1e6 for name, t in times.items()}


def _corpus_peers(path, feeds) -> dict:
    """runner -> callable() for onnxruntime and OpenVINO (default threads and one) on `path`,
    where each loads it and runs the feeds."""
    peers = {}
    try:
        import onnxruntime as ort

        for label, threads in (("onnxruntime", 0), ("onnxruntime-1", 1)):
            if path.endswith(".onnx"):
                options = ort.SessionOptions()
                options.intra_op_num_threads = threads
                options.log_severity_level = 3
                session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
                peers[label] = lambda s=session: s.run(None, feeds)
    except ImportError:
        pass
    for label, threads in (("openvino", None), ("openvino-1", 1)):
        try:
            compiled = openvino_compiled(path, threads)
            compiled(dict(feeds))
        except Exception:  # noqa: BLE001 - OpenVINO cannot run every model, or is not installed
            break
        peers[label] = lambda c=compiled: c(dict(feeds))
    return peers


def _converted_corpus_ir(path) -> str | None:
    """The IR `openvino.convert_model` writes for the ONNX model at `path` (in a child
    interpreter, as `common.converted_ir` explains), or None where it cannot convert it."""
    ir = os.path.join(DIRECTORY, os.path.basename(path).replace(".onnx", ".xml"))
    convert = ("import sys, openvino as ov; ov.save_model(ov.convert_model(sys.argv[1]), "
               "sys.argv[2], compress_to_fp16=False)")
    done = subprocess.run([sys.executable, "-c", convert, path, ir], capture_output=True,
                          check=False)
    return ir if done.returncode == 0 else None


def _geometric_summary(ratios: dict) -> str:
    if not ratios:
        return "none"
    mean = statistics.geometric_mean(ratios.values())
    worst = max(ratios, key=ratios.get)
    return f"geometric mean {mean:.2f}, worst {ratios[worst]:.2f} ({worst}), {len(ratios)} models"


def plot_ratios(path: str, title: str, series: dict[str, dict[str, float]]) -> None:
    """Save horizontal bars of each model's ratios (`series`: a label -> {model: ratio}, cyloop's
    time over a peer's), from 1 on a log axis (left of 1: cyloop is faster), as the
    image `path` (its suffix names the format: .svg, .png; matplotlib, the `cli` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise SystemExit("--plot needs matplotlib: pip install 'cyloop[cli]'") from e
    models = list(dict.fromkeys(name for ratios in series.values() for name in ratios))
    height = 0.8 / max(len(series), 1)
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.22 * len(models) * max(len(series), 1) ** 0.5))
    for k, (label, ratios) in enumerate(series.items()):
        at = [i + (k - (len(series) - 1) / 2) * height for i, name in enumerate(models)
              if name in ratios]
        mean = statistics.geometric_mean(ratios.values())
        ax.barh(at, [ratios[name] - 1 for name in models if name in ratios], left=1,
                height=height, label=f"{label} (geometric mean {mean:.2f})")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(models)), models, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("cyloop's time / the peer's (log scale; under 1: cyloop is faster)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"\nplot saved to {path}")


def _machine_line() -> str:
    return f"{cpu_name()}, {os.cpu_count()} cores, numpy {np.__version__}"


def corpus_table(chosen, repeat, plot=None):
    """The models real exporters wrote (asv_benchmarks/corpus), each on its own feeds: cyloop at
    its steady state (warmed until its choices are made: `warm_up`) against onnxruntime and
    OpenVINO on the same file (the better of one thread and their default), then cyloop against
    OpenVINO on the IR convert_model writes for it; µs per run, in interleaved rounds, each
    sample over enough calls to last 2 ms. "agrees": cyloop's outputs are the source
    framework's within the tolerance onnxruntime met."""
    import warnings

    from corpus import entries

    print()
    print("| model | cyloop, µs | onnxruntime | cyloop / ort | OpenVINO | cyloop / OV | agrees |")
    print("|---|---:|---:|---:|---:|---:|---|")
    vs_ort, vs_ov, ir_ratios = {}, {}, {}
    for entry in entries():
        if chosen is not None and entry.name not in chosen:
            continue
        path, feeds = str(entry.path), entry.feeds()
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            model = cyloop.load(path)
        fallback = [str(w.message).split(":")[-1].strip() for w in said
                    if "onnx.reference" in str(w.message)]
        warm_up(model, lambda m=model, f=feeds: m.run(f))
        outputs = model.run(feeds)
        us = _us_per_call({"cyloop": lambda m=model, f=feeds: m.run(f),
                           **_corpus_peers(path, feeds)}, repeat)
        ort = min((us[k] for k in ("onnxruntime", "onnxruntime-1") if k in us), default=None)
        ov = min((us[k] for k in ("openvino", "openvino-1") if k in us), default=None)
        if ort:
            vs_ort[entry.name] = us["cyloop"] / ort
        if ov:
            vs_ov[entry.name] = us["cyloop"] / ov
        agrees = "yes" if entry.agrees(outputs) else "no"
        if fallback:
            agrees += f" (onnx.reference: {', '.join(fallback)})"
        print(f"| {entry.name} | {us['cyloop']:.1f} | {f'{ort:.1f}' if ort else '-'} | "
              f"{f'{vs_ort[entry.name]:.2f}' if ort else '-'} | {f'{ov:.1f}' if ov else '-'} | "
              f"{f'{vs_ov[entry.name]:.2f}' if ov else '-'} | {agrees} |", flush=True)
    print()
    print(f"cyloop / onnxruntime: {_geometric_summary(vs_ort)}")
    print(f"cyloop / OpenVINO: {_geometric_summary(vs_ov)}")
    print()
    print("| model (IR from convert_model) | cyloop, µs | OpenVINO, µs | cyloop / OV | agrees |")
    print("|---|---:|---:|---:|---|")
    for entry in entries():
        if chosen is not None and entry.name not in chosen:
            continue
        ir = _converted_corpus_ir(str(entry.path))
        if ir is None:
            continue
        feeds = entry.feeds()
        try:
            model = cyloop.load(ir)
            warm_up(model, lambda m=model, f=feeds: m.run(f))
            outputs = model.run(feeds)
        except Exception as e:  # noqa: BLE001 - report, keep on with the others
            print(f"| {entry.name} | failed: {type(e).__name__}: {str(e)[:60]} | | | |")
            continue
        peers = _corpus_peers(ir, feeds)
        if not peers:
            continue
        us = _us_per_call({"cyloop": lambda m=model, f=feeds: m.run(f), **peers}, repeat)
        ov = min(us[k] for k in us if k != "cyloop")
        ir_ratios[entry.name] = us["cyloop"] / ov
        got = dict(zip(entry.expected(), outputs.values()))
        print(f"| {entry.name} | {us['cyloop']:.1f} | {ov:.1f} | {ir_ratios[entry.name]:.2f} | "
              f"{'yes' if entry.agrees(got) else 'no'} |", flush=True)
    print()
    print(f"cyloop / OpenVINO on the IR: {_geometric_summary(ir_ratios)}")
    if plot:
        plot_ratios(plot, f"The exported models, µs a run: {_machine_line()}",
                    {"cyloop / onnxruntime": vs_ort, "cyloop / OpenVINO": vs_ov})


def cold_start_table(chosen, repeat, plot=None):
    """A fresh process per sample (benchmarks/cold_start.py): `import` of each runtime, then per
    corpus model its load and first run, cyloop (without its on-disk cache, and with the model's
    entry in it: a hit) against onnxruntime; medians of `repeat` rounds, the runners in turn
    going first, after one round unmeasured (which writes the bytecode an installed package has,
    and the cache's entries)."""
    import shutil

    from benchmarks import cold_start
    from corpus import entries

    chosen_entries = [e for e in entries() if chosen is None or e.name in chosen]
    if not chosen_entries:
        return
    env = cold_start.environment()
    cache = tempfile.mkdtemp(prefix="cyloop-cache-")
    runners = {"cyloop": ("cyloop", env), "cyloop, cache hit": (
        "cyloop", {**env, "CYLOOP_CACHE_DIR": cache}), "onnxruntime": ("onnxruntime", env)}
    names = list(runners)
    samples = {(e.name, runner): [] for e in chosen_entries for runner in runners}
    try:
        for round_ in range(repeat + 1):
            for entry in chosen_entries:
                feeds_path = str(entry.path).replace(".onnx", ".npz")
                for runner in names[round_ % 3:] + names[:round_ % 3]:
                    engine, its_env = runners[runner]
                    times = cold_start.probe(engine, entry.path, feeds_path, its_env)
                    if round_:
                        samples[entry.name, runner].append(times)
    finally:
        shutil.rmtree(cache)

    def median(name, runner, *parts):
        return statistics.median(sum(t[p] for p in parts) for t in samples[name, runner]) * 1e3

    print()
    print("Fresh process, numpy already imported (ms, medians):")
    print()
    print("| step | cyloop | onnxruntime | cyloop / ort |")
    print("|---|---:|---:|---:|")
    imports = {runner: statistics.median(t["import"] for e in chosen_entries
                                         for t in samples[e.name, runner]) * 1e3
               for runner in ("cyloop", "onnxruntime")}
    print(f"| import | {imports['cyloop']:.1f} | {imports['onnxruntime']:.1f} | "
          f"{imports['cyloop'] / imports['onnxruntime']:.2f} |")
    print()
    print("Load + first run (ms, medians), and cyloop's against onnxruntime's:")
    print()
    print("| model | cyloop load | first run | with a cache hit | onnxruntime load | first run | "
          "cyloop / ort | with a cache hit / ort |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    cold, hit = {}, {}
    for entry in chosen_entries:
        theirs = median(entry.name, "onnxruntime", "load", "first_run")
        cold[entry.name] = median(entry.name, "cyloop", "load", "first_run") / theirs
        hit[entry.name] = median(entry.name, "cyloop, cache hit", "load", "first_run") / theirs
        print(f"| {entry.name} | {median(entry.name, 'cyloop', 'load'):.1f} | "
              f"{median(entry.name, 'cyloop', 'first_run'):.1f} | "
              f"{median(entry.name, 'cyloop, cache hit', 'load', 'first_run'):.1f} | "
              f"{median(entry.name, 'onnxruntime', 'load'):.1f} | "
              f"{median(entry.name, 'onnxruntime', 'first_run'):.1f} | "
              f"{cold[entry.name]:.2f} | {hit[entry.name]:.2f} |", flush=True)
    print()
    print(f"load + first run, cyloop / onnxruntime: {_geometric_summary(cold)}")
    print(f"with a cache hit: {_geometric_summary(hit)}")
    if plot:
        plot_ratios(plot, f"A fresh process's load and first run: {_machine_line()}",
                    {"cyloop / onnxruntime": cold, "with a cache hit": hit})


# The batch x hidden sweep: per workload, (batch, hidden, steps); the steps shrink as a step
# grows, so that every cell takes about as long.
SWEEP = {
    "W2": ((1, 64, 1000), (16, 256, 1000), (64, 512, 200), (256, 1024, 20)),
    "W4": ((1, 64, 1000), (8, 128, 200), (64, 256, 100), (256, 512, 20)),
}


def _sweep_spellings(workload, batch, hidden, steps):
    """spelling -> (model or path, feeds, numpy loop or None) of `workload` at one shape."""
    if workload == "W2":
        shape = {"steps": steps, "batch": batch, "hidden": hidden}
        return {"loop": common.w2_rnn_loop_onnx(**shape),
                "scan": common.w2_rnn_scan_onnx(**shape)}
    directory = os.path.join(DIRECTORY, f"sweep-{batch}x{hidden}")
    os.makedirs(directory, exist_ok=True)
    path, feeds, _ = common.lstm_cell_ti_ir(directory, steps=steps, batch=batch, hidden=hidden)
    return {"loop": common.w4_lstm_loop_onnx(steps=steps, batch=batch, hidden=hidden),
            "ti": (path, feeds, None)}


def sweep(chosen, repeat):
    """W2 and W4 over batch x hidden: cyloop's best spelling against the best peer (onnxruntime
    or OpenVINO, one thread or their default), in µs per step, every runner of a shape in the
    same interleaved rounds. Outputs are checked against the numpy loop (W4-ti: against
    OpenVINO, which runs the same IR)."""
    print()
    print("| workload | batch x hidden | steps | cyloop, µs / step | best peer | peer µs / step | "
          "cyloop / peer | agree |")
    print("|---|---|---:|---:|---|---:|---:|---|")
    for workload, shapes in SWEEP.items():
        if chosen is not None and workload not in chosen:
            continue
        for batch, hidden, steps in shapes:
            cells, agree = {}, []
            for spelling, (model, feeds, numpy_loop) in _sweep_spellings(
                    workload, batch, hidden, steps).items():
                found = runners(f"{workload}-{spelling}-{batch}x{hidden}", model, feeds,
                                numpy_loop)
                found.pop("onnx.reference", None)  # (10-100x the others: not a contender)
                oracle = found.pop("numpy", None) or found.get("openvino-1")
                expected = oracle() if oracle is not None else None
                for runner, run in found.items():
                    outputs = run()
                    if runner == "cyloop":
                        agree.append(_agrees(outputs, expected) if expected else "?")
                        # (its trials end here: the steady state is compared)
                        warm_up(_LOADED[f"{workload}-{spelling}-{batch}x{hidden}"], run)
                    cells[f"{spelling}/{runner}"] = run
            times = _rounds(cells, repeat, IDLE_SECONDS)
            us = {key: statistics.median(t) / steps * 1e6 for key, t in times.items()}
            ours = min((v, k) for k, v in us.items() if k.endswith("/cyloop"))
            peers = [(v, k) for k, v in us.items() if not k.endswith("/cyloop")]
            best = min(peers) if peers else None
            peer_text = f"{best[1]} | {best[0]:.1f} | {ours[0] / best[0]:.2f}" if best \
                else "none | | "
            print(f"| {workload} | {batch} x {hidden} | {steps} | {ours[0]:.1f} "
                  f"({ours[1].split('/')[0]}) | {peer_text} | "
                  f"{'yes' if set(agree) == {'yes'} else 'no'} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default="", help="comma-separated workload ids")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--startup-only", action="store_true",
                        help="only the import, load and first-model times")
    parser.add_argument("--functional-only", action="store_true",
                        help="only the functional API against the plain Python loop")
    parser.add_argument("--spellings-only", action="store_true",
                        help="only cyloop on the IR spellings against the ONNX ones")
    parser.add_argument("--corpus-only", action="store_true",
                        help="only the models real exporters wrote (asv_benchmarks/corpus); "
                        "--only takes their names")
    parser.add_argument("--sweep-only", action="store_true",
                        help="only W2 and W4 over batch x hidden against the best peer")
    parser.add_argument("--cold-start-only", action="store_true",
                        help="only a fresh process's import, load and first run of each corpus "
                        "model, against onnxruntime; --only takes their names")
    parser.add_argument("--plot", metavar="PATH",
                        help="with --corpus-only or --cold-start-only: also save the ratios as "
                        "bars, an image (.svg, .png; needs matplotlib)")
    parser.add_argument("--cell", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:  # (see settled_openvino: its import's telemetry must not fork during a run)
        settled_openvino()
    except ImportError:
        pass
    if args.cell:
        _cell(*args.cell)
        return
    chosen = [w for w in workloads() if not args.only or w in args.only.split(",")]
    print(f"{time.strftime('%Y-%m-%d')} on {cpu_name()}, {os.cpu_count()} cores, "
          f"{platform.python_implementation()} {platform.python_version()}, numpy "
          f"{np.__version__}, cyloop {cyloop.__version__}; medians of at least {args.repeat} "
          "interleaved rounds, each runner in every place equally often")
    if args.startup_only:
        startup(chosen, args.repeat)
        return
    workload_prefixes = {w.split("-")[0] for w in chosen} if args.only else None
    if args.functional_only:
        functional(workload_prefixes, args.repeat)
        return
    if args.spellings_only:
        spellings(workload_prefixes, args.repeat)
        return
    if args.sweep_only:
        sweep(workload_prefixes, args.repeat)
        return
    if args.corpus_only:
        corpus_table(args.only.split(",") if args.only else None, args.repeat, args.plot)
        return
    if args.cold_start_only:
        cold_start_table(args.only.split(",") if args.only else None, args.repeat, args.plot)
        return
    print()
    print("| workload | runner | µs / iteration | vs cyloop | peak MiB | agrees |")
    print("|---|---|---:|---:|---:|---|")
    for workload_id in chosen:
        results = measure(workload_id, args.repeat)
        base = results.get("cyloop", {}).get("us_per_iteration")
        for name, cell in results.items():
            if "error" in cell:
                print(f"| {workload_id} | {name} | failed: {cell['error']} | | | |")
                continue
            us = cell["us_per_iteration"]
            ratio = f"{us / base:.2f}" if base else ""
            peak = "" if args.no_memory else peak_memory(workload_id, name)
            peak_text = "" if peak in ("", None) else f"{peak / 2**20:.1f}"
            print(f"| {workload_id} | {name} | {us:.2f} | {ratio} | {peak_text} | "
                  f"{cell['agrees']} |", flush=True)
    print("\ncyloop's measured choices on this machine (Model.plan()):")
    for workload_id, model in _LOADED.items():
        plan = model.plan()
        choices = [c for loop in plan.loops for c in loop.choices] + plan.choices
        for line in (line for choice in choices for line in choice.lines()):
            print(f"- {workload_id}: {line}")
    spellings(workload_prefixes, args.repeat)
    startup(chosen, args.repeat)
    functional(workload_prefixes, args.repeat)
    sweep(workload_prefixes, args.repeat)
    if not args.only:
        corpus_table(None, args.repeat)
        cold_start_table(None, args.repeat)


if __name__ == "__main__":
    main()
