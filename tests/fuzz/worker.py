"""The fuzzing subprocess: runs batches of mutants (cases) and reports one outcome per case.

    python -m tests.fuzz.worker '{"max_iterations": 100000, "address_space": ...}'

Protocol: frames of a 4-byte big-endian length and a pickle, on the descriptors that were stdin
and stdout when the worker started (fd 1 is then pointed at stderr, so that nothing printed by
cyloop, onnx or numpy can corrupt a frame). The worker first sends a hello frame (the options
`cyloop.load` accepts that it will pass); then, for each batch (a list of cases) it reads, one
outcome per case, in order, each as soon as that case ends. A case that kills or hangs the worker
has no outcome: the harness names it by the outcomes that did arrive.

Before each case the worker empties its stderr log (the harness opened it for appending), so
after a crash the log holds that case's output and faulthandler's traceback; SIGUSR1 dumps the
traceback of a hanging case.

This module needs only numpy and cyloop (and onnx for ONNX cases): no hypothesis, no openvino.
"""

from __future__ import annotations

import faulthandler
import gc
import inspect
import json
import os
import pickle
import resource
import signal
import struct
import sys
import time
import traceback
import warnings

import numpy as np

# Outcomes that keep the promise. Any CyloopError subclass name is one too (see `allowed`).
RESULT = "result"
MEMORY = "MemoryError"


def allowed(status: str, memory_limited: bool) -> bool:
    """Whether an outcome keeps cyloop's promise. A MemoryError (numpy meeting the worker's
    address-space cap) is allowed unless cyloop was given its own `memory_limit`."""
    if status == RESULT or status.startswith("cyloop:"):
        return True
    return status == MEMORY and not memory_limited


# -- frames ----------------------------------------------------------------------------------------

def write_frame(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int):
    """The next frame's object; None at end of input."""
    header = _read_exactly(fd, 4)
    if header is None:
        return None
    data = _read_exactly(fd, struct.unpack(">I", header)[0])
    return None if data is None else pickle.loads(data)


# -- feeds -----------------------------------------------------------------------------------------
# A feed spec is plain data the harness can pickle: layouts such as non-contiguous or read-only
# views do not survive pickling, so they are named and applied here.
#   feeds: ("dict", [(key, value spec), ...]) or ("raw", value spec) (feeds that are not a dict)
#   value: ("value", object, [layout, ...]) or ("seq", [value spec, ...], "list" | "tuple")

LAYOUTS = ("fortran", "strided", "reversed", "readonly", "broadcast", "overlapping", "unaligned",
           "masked", "matrix", "subclass", "nonnative")


class OddArray(np.ndarray):
    """An ndarray subclass that carries an attribute, as user subclasses do."""

    def __array_finalize__(self, obj):
        self.note = getattr(obj, "note", "odd")


def apply_layout(value, layout: str):
    """`value` (when an ndarray) in another memory layout or type, with the same values where
    the layout allows (broadcast and overlapping views repeat the first element)."""
    if not isinstance(value, np.ndarray) or type(value) is not np.ndarray:
        return value
    a = value
    if a.ndim == 0 and layout in ("strided", "reversed"):
        return a.copy()  # indexing a 0-d array gives a numpy scalar, not a view
    if layout == "fortran":
        return np.asfortranarray(a)
    if layout == "strided":
        big = np.empty(tuple(2 * d + 1 for d in a.shape), a.dtype)
        view = big[tuple(slice(1, None, 2) for _ in a.shape)]
        view[...] = a
        return view
    if layout == "reversed":
        flip = tuple(slice(None, None, -1) for _ in a.shape)
        return np.ascontiguousarray(a[flip])[flip]
    if layout == "readonly":
        b = a.copy()
        b.flags.writeable = False
        return b
    if layout in ("broadcast", "overlapping"):
        if a.ndim == 0 or a.size == 0:
            return a
        first = a[tuple(slice(0, 1) for _ in a.shape)].copy()
        if layout == "broadcast":
            return np.broadcast_to(first, a.shape)
        return np.lib.stride_tricks.as_strided(first, a.shape, (0,) * a.ndim)
    if layout == "unaligned":
        if a.dtype.hasobject or a.dtype.itemsize <= 1:
            return a
        buf = np.zeros(a.nbytes + 1, np.uint8)
        b = buf[1:].view(a.dtype).reshape(a.shape)
        b[...] = a
        return b
    if layout == "masked":
        return np.ma.masked_array(a, mask=np.zeros(a.shape, bool))
    if layout == "matrix":
        return np.asmatrix(a) if a.ndim == 2 else a
    if layout == "subclass":
        return a.view(OddArray)
    if layout == "nonnative":
        if a.dtype.kind not in "iufc" or a.dtype.itemsize <= 1:
            return a
        return a.astype(a.dtype.newbyteorder())
    raise ValueError(f"unknown layout {layout!r}")


def build_value(spec):
    if spec[0] == "seq":
        items = [build_value(item) for item in spec[1]]
        return tuple(items) if spec[2] == "tuple" else items
    _, value, layouts = spec
    for layout in layouts:
        value = apply_layout(value, layout)
    return value


def build_feeds(spec):
    if spec[0] == "raw":
        return build_value(spec[1])
    return {key: build_value(value) for key, value in spec[1]}


def _arrays(value):
    """The ndarrays in a feed value (lists and tuples searched, once each)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (list, tuple)):
        return [a for item in value for a in _arrays(item)]
    return []


def _feed_arrays(feeds):
    values = feeds.values() if isinstance(feeds, dict) else [feeds]
    return [a for value in values for a in _arrays(value)]


def _snapshot(feeds):
    """(array, its bytes) for every feed array, to check that the run wrote none of them."""
    return [(a, None if a.dtype.hasobject else np.asarray(a).tobytes()) for a in
            _feed_arrays(feeds)]


# -- running one case ------------------------------------------------------------------------------

class _SelfTestModel:
    """Stands in for a model in the harness's own tests: misbehaves as `action` says."""

    def __init__(self, action):
        self.action = action

    def run(self, feeds):
        if self.action == "escape":
            raise KeyError("a deliberate escape")
        if self.action == "segfault":
            import ctypes

            ctypes.string_at(0)
        if self.action == "hang":
            time.sleep(3600)
        if self.action == "memory":
            return bytearray(1 << 46)
        if self.action == "write_feed":
            np.asarray(next(iter(feeds.values())))[...] = 42
        if self.action == "exit":
            os._exit(3)
        return {"y": np.zeros(2)}


class CaseRunner:
    """Loads and runs cases with the harness's options (`max_iterations`, and `time_limit` /
    `memory_limit` where this cyloop's `load` accepts them)."""

    def __init__(self, options: dict, scratch: str):
        import cyloop

        self.cyloop = cyloop
        self.scratch = scratch
        self.selftest = bool(options.get("selftest"))
        self.load_options = {"max_iterations": options.get("max_iterations", 10**5),
                             "tune": False}
        accepted = inspect.signature(cyloop.load).parameters
        for key in ("time_limit", "memory_limit"):
            if key in accepted and options.get(key) is not None:
                self.load_options[key] = options[key]

    def _source(self, case):
        if case["kind"] == "onnx":
            return case["model"]
        xml = os.path.join(self.scratch, "model.xml")
        weights = os.path.join(self.scratch, "model.bin")
        with open(xml, "wb") as f:
            f.write(case["xml"])
        if case.get("bin") is None:
            if os.path.exists(weights):
                os.remove(weights)
        else:
            with open(weights, "wb") as f:
                f.write(case["bin"])
        return xml

    def load(self, case):
        if case["kind"] == "selftest":
            if not self.selftest:
                raise RuntimeError("self-test cases need the worker's selftest option")
            return _SelfTestModel(case["action"])
        options = dict(self.load_options)
        options.update(case.get("options", {}).get("load", {}))
        return self.cyloop.load(self._source(case), **options)

    def run(self, case, catch: bool = True) -> dict:
        """The outcome of `case`: {"id", "status", "error", "message", "traceback", "seconds"}.
        With catch=False (replaying a reproducer) exceptions propagate."""
        start = time.perf_counter()
        outcome = {"id": case.get("id"), "status": RESULT, "error": "", "message": "",
                   "traceback": ""}
        try:
            feeds = build_feeds(case["feeds"])
            snapshot = _snapshot(feeds)
        except Exception as e:  # a fault of the fuzzer, not of cyloop
            if not catch:
                raise
            outcome.update(status=f"harness:{type(e).__name__}", error=type(e).__name__,
                           message=_text(e), traceback=traceback.format_exc()[-6000:])
            outcome["seconds"] = time.perf_counter() - start
            return outcome
        try:
            model = self.load(case)
            for _ in range(case.get("options", {}).get("runs", 1)):
                result = model.run(feeds)
                problem = _check_result(result, feeds, snapshot)
                if problem:
                    if not catch:
                        raise AssertionError(problem)
                    outcome.update(status="bad-result", message=problem)
                    break
        except self.cyloop.CyloopError as e:
            if not catch:
                raise
            outcome.update(status=f"cyloop:{type(e).__name__}", error=type(e).__name__,
                           message=_text(e))
        except MemoryError as e:
            if not catch:
                raise
            outcome.update(status=MEMORY, error="MemoryError", message=_text(e))
        except BaseException as e:  # every other exception is the finding
            if not catch:
                raise
            outcome.update(status=f"escape:{type(e).__name__}", error=type(e).__name__,
                           message=_text(e), traceback=traceback.format_exc()[-6000:])
        outcome["seconds"] = time.perf_counter() - start
        return outcome


def _text(error) -> str:
    try:
        return str(error)[:500]
    except Exception:  # noqa: BLE001 - a message that cannot be shown is still an outcome
        return f"<{type(error).__name__} whose str() fails>"


def _check_result(result, feeds, snapshot) -> str:
    """What is wrong with a run's result (empty: nothing): not a dict of arrays, sequences
    (lists of arrays) and None; an output sharing memory with a feed; a feed written to."""
    if not isinstance(result, dict):
        return f"run returned {type(result).__name__}, not a dict"
    arrays = []
    for name, value in result.items():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item is None and not isinstance(value, list):
                continue
            if not isinstance(item, np.ndarray):
                return f"output {name!r} is a {type(item).__name__}"
            arrays.append((name, item))
    fed = _feed_arrays(feeds)
    for name, array in arrays:
        if any(np.may_share_memory(array, a) for a in fed):
            return f"output {name!r} shares memory with a feed"
    for array, before in snapshot:
        if before is not None and np.asarray(array).tobytes() != before:
            return "a feed array was written to"
    return ""


# -- the process -----------------------------------------------------------------------------------

def main(argv) -> int:
    options = json.loads(argv[1]) if len(argv) > 1 else {}
    if options.get("address_space"):
        cap = int(options["address_space"])
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)  # stray output goes to the log, never into a frame
    faulthandler.enable(sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    scratch = options.get("scratch") or os.getcwd()
    runner = CaseRunner(options, scratch)
    write_frame(proto_out, {"hello": True, "load_options": runner.load_options,
                            "pid": os.getpid()})
    done = 0
    while True:
        batch = read_frame(proto_in)
        if batch is None:
            return 0
        for case in batch:
            _empty_log()
            outcome = runner.run(case)
            write_frame(proto_out, outcome)
            done += 1
            if done % 64 == 0:
                gc.collect()


def _empty_log() -> None:
    try:
        sys.stderr.flush()
        os.ftruncate(2, 0)
    except OSError:  # stderr is not a file (run by hand): keep it
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
