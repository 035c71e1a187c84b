"""The `cyloop` command: run, plan, info and bench a model (.onnx or OpenVINO .xml).

``cyloop run`` with no model runs the embedded examples in ``cyloop/data/``: an LSTM
TensorIterator IR and an ONNX Loop with a sequence output.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc
from collections import Counter

import numpy as np

from . import __version__
from .engine.settings import DEFAULT_MAX_ITERATIONS
from .errors import CyloopError, InputError
from .ir import LOOP_DOMAIN, Graph, Value
from .peers import openvino_compiled

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
EXAMPLES = [os.path.join(DATA, "lstm_ti.xml"), os.path.join(DATA, "loop_sequence.onnx")]
SYMBOLIC_SIZE = 4  # what a symbolic dimension becomes in generated inputs
# A run from the command line stops after this many seconds unless --time-limit says otherwise:
# a model whose loop never ends is an error, not a hung terminal.
DEFAULT_TIME_LIMIT = 600.0


# -- inputs and outputs ---------------------------------------------------------------------------

def _parse_inputs(specs: list[str]) -> dict[str, np.ndarray]:
    """The -i inputs: NAME=FILE.npy, or FILE.npz (each array under its own name, as -o writes
    them)."""
    feeds = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not sep and spec.endswith(".npz"):
            try:
                with np.load(spec, allow_pickle=False) as archive:
                    feeds.update({key: archive[key] for key in archive.files})
            except (OSError, ValueError) as e:
                raise InputError(f"-i: cannot read {spec!r} as a .npz file ({e})") from e
            continue
        if not sep or not name or not path:
            raise InputError(f"-i takes NAME=FILE.npy or FILE.npz, got {spec!r}")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise InputError(f"-i {name}: cannot read {path!r} as a .npy file ({e})") from e
    return feeds


def _parse_dims(specs: list[str]) -> dict[str, int]:
    """The --dim NAME=SIZE sizes of symbolic dimensions."""
    sizes = {}
    for spec in specs or []:
        name, sep, size = spec.partition("=")
        if not sep or not name or not size.isdigit():
            raise InputError(f"--dim takes NAME=SIZE (a symbolic dimension's name and a size "
                             f">= 0), got {spec!r}")
        sizes[name] = int(size)
    return sizes


def _random_value(declared, rng, sizes: dict[str, int]):
    """A seeded value of `declared`'s type and shape: a symbolic dimension takes its size in
    `sizes` (the first time it is met, SYMBOLIC_SIZE, noted there), so tied dimensions agree; an
    unnamed one SYMBOLIC_SIZE."""
    shape = tuple(d if isinstance(d, int) and d >= 0 else
                  sizes.setdefault(d, SYMBOLIC_SIZE) if isinstance(d, str) else SYMBOLIC_SIZE
                  for d in (declared.shape or ()))
    dtype = np.dtype(declared.dtype or np.float32)
    if dtype == np.dtype(object) and declared.kind not in ("map", "sequence_map"):  # (text)
        value = np.array(rng.integers(0, 10, shape).astype(str), dtype=object)
    elif dtype == np.bool_:
        value = np.ones(shape, dtype)
    elif dtype.kind in "iu":  # small, so that trip counts and indices stay sensible
        value = rng.integers(1, SYMBOLIC_SIZE + 1, shape).astype(dtype)
    else:
        value = rng.standard_normal(shape).astype(dtype)
    if declared.kind in ("sequence", "optional_sequence"):
        return [value, value.copy()]
    if declared.kind in ("map", "sequence_map"):
        return _random_map(declared, rng)
    return value


def _random_map(declared, rng):
    """A seeded map of `declared`'s types (a list of two for a sequence of maps): keys 0 to
    SYMBOLIC_SIZE - 1 (as text for string keys), each with a value of the value type."""
    maps = []
    for _ in range(2 if declared.kind == "sequence_map" else 1):
        keys = range(SYMBOLIC_SIZE)
        if declared.key_dtype == np.dtype(object):
            keys = [str(key) for key in keys]
        scalar = Value("", declared.dtype, None if declared.value_kind == "tensor" else
                       declared.shape, "tensor" if declared.value_kind == "tensor" else
                       "sequence")
        values = [_random_value(scalar, rng, {}) for _ in keys]
        maps.append(dict(zip(keys, (v.item() if isinstance(v, np.ndarray) else v
                                    for v in values))))
    return maps if declared.kind == "sequence_map" else maps[0]


def _text(array: np.ndarray, declared) -> np.ndarray:
    """`array` as the model's text type (numpy objects holding str) where it declares text and
    the file holds unicode (as -o writes text, so that it loads without pickle)."""
    if declared.dtype == np.dtype(object) and array.dtype.kind in "US":
        return array.astype(str).astype(object)
    return array


def _map_from(feeds: dict, name: str, declared):
    """The map -o writes as NAME_keys and NAME_values, taken out of `feeds`; None if absent."""
    if f"{name}_keys" not in feeds or f"{name}_values" not in feeds:
        return None
    keys, values = feeds.pop(f"{name}_keys"), feeds.pop(f"{name}_values")
    if declared.value_kind != "tensor":
        raise InputError(f"-i {name}: a map whose values are sequences cannot be read from "
                         "files; pass it from Python")
    if keys.ndim != 1 or keys.shape != values.shape:
        raise InputError(f"-i {name}: {name}_keys and {name}_values must be two arrays of one "
                         f"dimension and one length, got shapes {list(keys.shape)} and "
                         f"{list(values.shape)}")
    return dict(zip(keys.tolist(), values.tolist()))


def _gathered(feeds: dict, declared: dict) -> dict:
    """The -i arrays as the values the model declares, spelled as -o writes them: a sequence
    NAME as NAME_0, NAME_1, ...; a map as NAME_keys and NAME_values; a sequence of maps as
    NAME_0_keys, NAME_0_values, NAME_1_keys, ...; text as unicode arrays. Arrays that spell
    none of the model's inputs are left under their own names."""
    feeds = dict(feeds)
    gathered = {}
    for name, value in declared.items():
        if name in feeds:
            arr = feeds.pop(name)
            gathered[name] = _text(arr, value) if isinstance(arr, np.ndarray) else arr
        elif value.kind == "map":
            found = _map_from(feeds, name, value)
            if found is not None:
                gathered[name] = found
        elif value.kind in ("sequence", "optional_sequence", "sequence_map"):
            items = []
            while True:
                item = (_map_from(feeds, f"{name}_{len(items)}", value)
                        if value.kind == "sequence_map" else
                        _text(feeds.pop(f"{name}_{len(items)}"), value)
                        if f"{name}_{len(items)}" in feeds else None)
                if item is None:
                    break
                items.append(item)
            if items:
                gathered[name] = items
    gathered.update(feeds)
    return gathered


def _feeds(model, args, generate=False) -> dict:
    """The -i inputs (gathered as `_gathered` says), and the missing ones generated from their
    declarations if `generate` or --random-inputs (said on stdout, with the sizes picked), else
    an InputError naming them."""
    declared = {v.name: v for v in model.graph.inputs}
    feeds = _gathered(_parse_inputs(args.input), declared)
    unknown = [name for name in feeds if name not in declared]
    if unknown:
        raise InputError(f"-i: unknown inputs {unknown}; the model's inputs are "
                         f"{model.input_names}")
    missing = [name for name in model.input_names if name not in feeds]
    if missing and not (generate or args.random_inputs):
        raise InputError(f"missing inputs {missing}: give them with -i NAME=FILE.npy, or pass "
                         "--random-inputs")
    rng = np.random.default_rng(args.seed)
    sizes = _parse_dims(getattr(args, "dim", None))
    for name, value in feeds.items():  # (a symbolic dim given by a fed input has its size)
        shape = declared[name].shape or ()
        if isinstance(value, np.ndarray) and len(shape) == value.ndim:
            for dim, size in zip(shape, value.shape):
                if isinstance(dim, str):
                    sizes.setdefault(dim, size)
    given = dict(sizes)
    for name in missing:
        feeds[name] = _random_value(declared[name], rng, sizes)
    if missing:
        used = {dim for name in missing for dim in declared[name].shape or ()
                if isinstance(dim, str)}
        picked = [f"{dim}={size}" + ("" if dim in given else " (picked)")
                  for dim, size in sizes.items() if dim in used]
        print(f"  inputs generated from their declared shapes (seed {args.seed}; "
              f"{'dims ' + ', '.join(picked) + '; ' if picked else ''}unnamed dims "
              f"{SYMBOLIC_SIZE}): {', '.join(missing)}")
    return feeds


def _describe(name: str, value, count: int = 5) -> str:
    if value is None:
        return f"{name}: empty optional"
    if isinstance(value, dict):
        shown = ", ".join(f"{key!r}: {_scalar(item)}" for key, item in
                          list(value.items())[:count])
        more = ", ..." if len(value) > count else ""
        return f"{name}: map of {len(value)} entries {{{shown}{more}}}"
    if isinstance(value, list):
        first = f", first {_describe('', value[0]).lstrip(': ')}" if value else ""
        what = "maps" if value and isinstance(value[0], dict) else "tensors"
        return f"{name}: sequence of {len(value)} {what}{first}"
    flat = value.reshape(-1)[:count]
    more = ", ..." if value.size > count else ""
    shown = ", ".join(np.format_float_positional(v, precision=4) if value.dtype.kind == "f"
                      else str(v) for v in flat)
    return f"{name}: shape {list(value.shape)} {value.dtype} [{shown}{more}]"


def _scalar(value) -> str:
    if isinstance(value, float):
        return np.format_float_positional(value, precision=4)
    return repr(value) if isinstance(value, str) else str(value)


def _unpickled(array: np.ndarray) -> np.ndarray:
    """Text (numpy objects holding str) as a unicode array, which an .npz holds without pickle;
    other arrays as they are."""
    return array.astype(str) if array.dtype == np.dtype(object) else array


def _map_arrays(name: str, value: dict) -> dict:
    """A map as two arrays for an .npz archive: NAME_keys and NAME_values, in the map's order."""
    return {f"{name}_keys": np.array(list(value)),
            f"{name}_values": np.array(list(value.values()))}


def _save(path: str, outputs: dict) -> None:
    """`outputs` in an .npz archive at exactly `path` (np.savez given a name would add .npz),
    readable with ``allow_pickle=False`` and by -i: a sequence's element k as NAME_k, a map as
    NAME_keys and NAME_values, text as unicode arrays."""
    arrays = {}
    for name, value in outputs.items():
        if isinstance(value, dict):
            arrays.update(_map_arrays(name, value))
        elif isinstance(value, list):
            for k, item in enumerate(value):
                arrays.update(_map_arrays(f"{name}_{k}", item) if isinstance(item, dict)
                              else {f"{name}_{k}": _unpickled(item)})
        elif value is not None:
            arrays[name] = _unpickled(value)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _output_path(path: str, model_path: str, several: bool) -> str:
    """Where -o puts a model's outputs: `path`, or with several models `path` with the model's
    name before its suffix (out.npz -> out.lstm_ti.npz), so that none overwrites another."""
    if not several:
        return path
    stem, suffix = os.path.splitext(path)
    return f"{stem}.{os.path.splitext(os.path.basename(model_path))[0]}{suffix or '.npz'}"


class _ProgressBars:
    """One tqdm bar per long-running loop, on a terminal only (tqdm is the `cli` extra)."""

    def __init__(self):
        from tqdm import tqdm

        self.tqdm = tqdm
        self.bars = {}

    def __call__(self, label, done, total, finished):
        bar = self.bars.get(label)
        if bar is None:
            bar = self.bars[label] = self.tqdm(total=total, desc=label, unit="it",
                                               leave=False, file=sys.stderr)
        bar.update(done - bar.n)
        if finished:
            bar.close()
            del self.bars[label]


def _progress():
    if not sys.stderr.isatty():
        return None
    try:
        return _ProgressBars()
    except ImportError:  # no tqdm: no bar
        return None


def _load(path, args):
    from .loading import load

    return load(path, driver=getattr(args, "driver", None), max_iterations=args.max_iterations,
                time_limit=getattr(args, "time_limit", None),
                memory_limit=getattr(args, "memory_limit", None), progress=_progress())


# -- subcommands ----------------------------------------------------------------------------------

def _cmd_run(args) -> int:
    models = [args.model] if args.model else EXAMPLES
    if not args.model:
        args.random_inputs = True
    for path in models:
        try:
            model = _load(path, args)
        except ImportError as e:
            if args.model:
                raise
            print(f"{os.path.basename(path)}: skipped ({e})")
            continue
        feeds = _feeds(model, args)
        print(f"{os.path.basename(path)} ({model.settings.driver} driver)")
        start = time.perf_counter()
        outputs = model.run(feeds)
        elapsed = time.perf_counter() - start
        for name, value in outputs.items():
            print("  " + _describe(name, value))
        print(f"  time: {elapsed * 1e3:.3f} ms (the first run, with loading's one-time work: "
              "`cyloop bench` times the runs after it)")
        if args.output:
            path = _output_path(args.output, path, len(models) > 1)
            _save(path, outputs)
            print(f"  outputs saved to {path}")
    return 0


def _cmd_plan(args) -> int:
    model = _load(args.model, args)
    feeds = _feeds(model, args, generate=True)
    tracemalloc.start()
    try:
        model.run(feeds)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(model.plan())
    print(f"\npeak memory of one run (measured with tracemalloc): {peak / 2**20:.3f} MiB")
    return 0


def _walk(graph: Graph, depth=0):
    """(node, depth) for every node, bodies included."""
    for node in graph.nodes:
        yield node, depth
        for sub in node.subgraphs():
            yield from _walk(sub, depth + 1)


def _cmd_info(args) -> int:
    if args.system:
        _print_system()
        if args.model is None:
            return 0
        print()
    elif args.model is None:
        raise InputError("info: give a model, or --system")
    model = _load(args.model, args)
    graph = model.graph

    def fmt(value):
        shape = "?" if value.shape is None else \
            "[" + ", ".join("?" if d is None else str(d) for d in value.shape) + "]"
        dtype = "?" if value.dtype is None else str(value.dtype)
        kind = "" if value.kind == "tensor" else f" ({value.kind})"
        if value.kind in ("map", "sequence_map"):  # (ONNX's spelling: seq(map(int64, float)))
            from .maps import map_type

            spelled = map_type(value)
            return f"  {value.name}: {'seq(' + spelled + ')' if value.kind != 'map' else spelled}"
        return f"  {value.name}: {dtype} {shape}{kind}"

    print(f"{os.path.basename(args.model)}: {len(graph.inputs)} inputs, "
          f"{len(graph.outputs)} outputs")
    print("inputs:")
    print("\n".join(fmt(v) for v in graph.inputs))
    print("outputs:")
    print("\n".join(fmt(v) for v in graph.outputs))
    counts = Counter()
    fallback = set()
    loops = []
    for node, depth in _walk(graph):
        if node.domain == LOOP_DOMAIN:
            loops.append((depth, node))
            counts["Loop"] += 1
        elif node.op_type == "OnnxReference":
            fallback.add(node.attrs["node"].op_type)
            counts[node.attrs["node"].op_type] += 1
        else:
            counts[node.op_type] += 1
    print("ops: " + ", ".join(f"{op} x{n}" for op, n in sorted(counts.items())))
    print("loops:" if loops else "loops: none")
    for depth, node in loops:
        spec = node.attrs["spec"]
        print(f"  {'  ' * depth}{node.label}: {len(spec.inputs)} inputs, {len(spec.outputs)} "
              f"outputs, body of {len(spec.body.nodes)} nodes")
    print("ops served by the onnx.reference fallback: " +
          (", ".join(sorted(fallback)) if fallback else "none"))
    return 0


def _print_system() -> None:
    from .system import describe  # (imports the native paths' checks: only when asked)

    for key, value in describe().items():
        if isinstance(value, dict):
            print(f"{key}:")
            print("\n".join(f"  {name}: {state}" for name, state in value.items()))
        elif isinstance(value, list):
            print(f"{key}: " + "; ".join(value))
        else:
            print(f"{key}: {value}")


def _peers(path, names, model):
    """name -> callable(feeds) for each requested peer that is installed."""
    peers = {}
    for name in names:
        try:
            if name == "onnxruntime" and path.endswith(".onnx"):
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.log_severity_level = 3  # (errors only: its notes on the model's
                # unused initializers would flood the table)
                ort_session = ort.InferenceSession(path, options,
                                                   providers=["CPUExecutionProvider"])
                out_names = [o.name for o in ort_session.get_outputs()]
                peers[name] = lambda feeds, s=ort_session, n=out_names: dict(zip(n, s.run(None,
                                                                                       feeds)))
            elif name == "openvino":
                peers[name] = _openvino_runner(openvino_compiled(path), model.output_names)
            elif name == "reference" and path.endswith(".onnx"):
                from onnx.reference import ReferenceEvaluator

                evaluator = ReferenceEvaluator(path)
                out_names = model.output_names
                peers[name] = lambda feeds, e=evaluator, n=out_names: dict(zip(n, e.run(None,
                                                                                        feeds)))
            else:
                print(f"  {name}: not applicable to {os.path.basename(path)}, skipped")
        except ImportError:
            print(f"  {name}: not installed, skipped")
        except Exception as e:  # noqa: BLE001 - a peer that cannot load the model is reported
            print(f"  {name}: cannot run this model, skipped ({str(e).strip().splitlines()[-1]})")
    return peers


def _openvino_runner(compiled, names: list[str]):
    """feeds -> {output name: value} of an OpenVINO compiled model, keyed as cyloop keys the
    model's outputs: by tensor name where the plugin's outputs carry cyloop's names, else by
    position (an output without tensor names has none to match by)."""
    def run(feeds):
        result = compiled(feeds)
        by_name = {name: value for port, value in result.items() for name in port.get_names()}
        if all(name in by_name for name in names):
            return {name: by_name[name] for name in names}
        return dict(zip(names, result.values()))

    return run


def _difference(a, b) -> str | None:
    """How peer output `b` differs from cyloop's `a` (beyond rtol 1e-3, atol 1e-4), or None."""
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
            return (f"a sequence of {len(a) if isinstance(a, list) else 'no'} tensors against "
                    f"{len(b) if isinstance(b, list) else 'no'}")
        for k, (x, y) in enumerate(zip(a, b)):
            found = _difference(x, y)
            if found is not None:
                return f"tensor #{k}: {found}"
        return None
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if x.shape != y.shape:
        return f"shape {list(x.shape)} against {list(y.shape)}"
    close = np.isclose(x, y, rtol=1e-3, atol=1e-4, equal_nan=True)
    if close.all():
        return None
    gap = np.where(close, -1.0, np.nan_to_num(np.abs(x - y), nan=np.inf))  # (NaN: one side's)
    at = np.unravel_index(int(np.argmax(gap)), x.shape)
    where = f" at {list(map(int, at))}" if x.ndim else ""
    return (f"{int((~close).sum())} of {close.size} values differ; the largest{where}: "
            f"{x[at]:.6g} against {y[at]:.6g}")


def _peak_rss_kib(run) -> int | None:
    """The resident memory `run()` adds at its peak (KiB), from Linux's high-water mark reset
    through /proc/self/clear_refs; None where that is not available."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = _status_kib("VmRSS")
        run()
        return max(_status_kib("VmHWM") - before, 0)
    except OSError:
        return None


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field} in /proc/self/status")


def _iterations(model) -> int:
    """Iterations of the last run's outermost loops (0: the model has no loop)."""
    return sum(loop.counters()["last_iterations"] for loop in model._compiled.loops)


def _cmd_bench(args) -> int:
    model = _load(args.model, args)
    feeds = _feeds(model, args)
    runners = {"cyloop": model.run}
    runners.update(_peers(args.model, args.vs, model))
    reference = model.run(feeds)
    iterations = _iterations(model)
    for name, runner in list(runners.items())[1:]:
        try:
            got = runner(feeds)
        except Exception as e:  # noqa: BLE001 - a peer failing on the model is reported
            print(f"  {name}: failed on this model, left out ({type(e).__name__}: "
                  f"{str(e).strip().splitlines()[-1] if str(e).strip() else ''})")
            del runners[name]
            continue
        found = {out: _difference(value, got[out]) if out in got else "the peer has no such output"
                 for out, value in reference.items()}
        differ = {out: why for out, why in found.items() if why is not None}
        print(f"  {name}: outputs agree" if not differ else
              f"  {name}: outputs DISAGREE: " + "; ".join(f"{out}: {why}"
                                                          for out, why in differ.items()))
    peaks = {name: _peak_rss_kib(lambda r=runner: r(feeds)) for name, runner in runners.items()}
    times = {name: [] for name in runners}
    for _ in range(args.repeat):  # interleaved, so drift hits every runner alike
        for name, runner in runners.items():
            start = time.perf_counter()
            runner(feeds)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["cyloop"])
    per = "us/iter" if iterations else "us/run"
    print(f"{'runner':<14}{'median ms':>12}{'min ms':>12}{per:>10}{'ratio':>8}{'peak MiB':>10}")
    rows = []
    for name, samples in times.items():
        median = statistics.median(samples)
        us = median * 1e6 / max(iterations, 1)
        peak = peaks[name]
        rows.append((name, us, None if peak is None else peak / 1024))
        print(f"{name:<14}{median * 1e3:>12.3f}{min(samples) * 1e3:>12.3f}{us:>10.2f}"
              f"{median / base:>8.2f}{'n/a' if peak is None else f'{peak / 1024:.2f}':>10}")
    print(f"({iterations} iterations of the outermost loops a run; peak: the resident memory "
          "one run adds, first run after the warm-up)" if iterations else
          "(the model has no loop: times are per run)")
    if args.plot:
        _plot(args.plot, os.path.basename(args.model), per, rows)
        print(f"plot saved to {args.plot}")
    return 0


def _plot(path: str, title: str, per: str, rows: list) -> None:
    """Bars of time per iteration and peak memory, one per runner (matplotlib: the `cli`
    extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("--plot needs matplotlib: pip install 'cyloop[cli]'") from e
    names = [name for name, _, _ in rows]
    memory = [(name, peak) for name, _, peak in rows if peak is not None]
    fig, axes = plt.subplots(1, 2 if memory else 1, figsize=(10 if memory else 5.5, 0.6 *
                                                                len(rows) + 1.6), squeeze=False)
    colors = ["tab:blue" if name == "cyloop" else "tab:gray" for name in names]
    axes[0][0].barh(names, [us for _, us, _ in rows], color=colors)
    axes[0][0].set_xlabel(per.replace("us", "µs"))
    if memory:
        axes[0][1].barh([n for n, _ in memory], [p for _, p in memory],
                        color=[c for c, row in zip(colors, rows) if row[2] is not None])
        axes[0][1].set_xlabel("peak MiB a run adds")
    for ax in axes[0]:
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"cyloop bench: {title}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -- entry point ----------------------------------------------------------------------------------

PEERS = ("onnxruntime", "openvino", "reference")


def _common(cmd, model_required=True, runs=True):
    """The options every subcommand takes; `runs`: the ones about running a model too."""
    if model_required:
        cmd.add_argument("model", help="an .onnx file or an OpenVINO IR .xml")
    cmd.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                     help="show tracebacks on errors")
    cmd.add_argument("--max-iterations", type=_limit(int), default=DEFAULT_MAX_ITERATIONS,
                     metavar="N", help="the iterations one run may make in all its loops "
                     f"(default {DEFAULT_MAX_ITERATIONS:.0e}; 'none': no limit)")
    if not runs:
        return
    cmd.add_argument("-i", "--input", action="append", metavar="NAME=FILE.npy",
                     help="an input from a .npy file, or FILE.npz: every input saved in it "
                          "under its name, as -o writes them (a sequence as NAME_0, NAME_1, "
                          "...; a map as NAME_keys and NAME_values) (repeatable)")
    cmd.add_argument("--random-inputs", action="store_true",
                     help="generate the inputs not given with -i (seeded)")
    cmd.add_argument("--seed", type=int, default=0, help="seed for generated inputs")
    cmd.add_argument("--dim", action="append", metavar="NAME=SIZE",
                     help="the size of a symbolic dimension in generated inputs (repeatable; "
                          f"default {SYMBOLIC_SIZE}, the same for every input that names it)")
    cmd.add_argument("--driver", choices=["cython", "python"], default=None,
                     help="loop driver (default: cython, or python if CYLOOP_PURE_PYTHON=1)")
    cmd.add_argument("--time-limit", type=_limit(float), default=DEFAULT_TIME_LIMIT,
                     metavar="SECONDS", help="the seconds one run may take (default "
                     f"{DEFAULT_TIME_LIMIT:g}; 'none': no limit)")
    cmd.add_argument("--memory-limit", type=_limit(int), default=None, metavar="BYTES",
                     help="the bytes any one output buffer of a loop may take (default: none)")


def _positive(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _peer_names(text: str) -> list[str]:
    """An argparse type: comma-separated names from PEERS."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PEERS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown peer {unknown[0]!r}; choose from "
                                         f"{', '.join(PEERS)}")
    return names


def _limit(kind):
    """An argparse type: a number of `kind`, or 'none' for None (no limit)."""
    def parse(text: str):
        if text.strip().lower() == "none":
            return None
        try:
            return kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what} or 'none', got {text!r}") from None

    parse.__name__ = kind.__name__
    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cyloop", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"cyloop {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a model (default: the embedded examples)")
    run.add_argument("model", nargs="?", help="an .onnx file or an OpenVINO IR .xml")
    _common(run, model_required=False)
    run.add_argument("-o", "--output", metavar="OUT.npz",
                     help="save the outputs (several models: OUT.<model>.npz each)")
    _common(sub.add_parser("plan", help="the memory plan of each loop, after one run (inputs "
                                        "not given are generated)"))
    info = sub.add_parser("info", help="inputs, outputs, op counts, loops, fallback ops; with "
                                       "--system, this machine and which native paths are on")
    info.add_argument("model", nargs="?", help="an .onnx file or an OpenVINO IR .xml")
    info.add_argument("--system", action="store_true",
                      help="Python, numpy, its BLAS, the cores and which native paths are on")
    _common(info, model_required=False, runs=False)
    bench = sub.add_parser("bench", help="time cyloop against installed peers")
    _common(bench)
    bench.add_argument("--vs", type=_peer_names, default=list(PEERS), metavar="PEER,...",
                       help=f"comma-separated peers from {', '.join(PEERS)} (default: all)")
    bench.add_argument("--repeat", type=_positive, default=7, help="interleaved rounds")
    bench.add_argument("--plot", metavar="FILE.png",
                       help="save a bar chart of time per iteration and peak memory per runner "
                            "(needs matplotlib: the cli extra)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handlers = {"run": _cmd_run, "plan": _cmd_plan, "info": _cmd_info, "bench": _cmd_bench}
    try:
        return handlers[args.command](args)
    except (CyloopError, OSError, ImportError) as e:
        if args.debug:
            raise
        if isinstance(e, BrokenPipeError):
            return _closed_stdout()
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"cyloop: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("cyloop: interrupted", file=sys.stderr)
        return 130


def _closed_stdout() -> int:
    """The reader of stdout went away (`cyloop run | head -1`): stop quietly, as a command that
    dies of SIGPIPE does (status 128 + 13); stdout goes to /dev/null so that flushing it at exit
    does not complain again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


if __name__ == "__main__":
    sys.exit(main())
