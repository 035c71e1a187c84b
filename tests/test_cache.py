"""The on-disk cache of read models (`cyloop.load(..., cache=...)`, cyloop/cache.py): a hit gives
the model an uncached load gives, and every entry that does not fit (another model, another
cyloop, another machine, a corrupt or truncated file, an unusable directory) is read as a miss,
never as a wrong model. The oracle is always the same model loaded without the cache."""

import dataclasses
import os
import re
import subprocess
import sys
import warnings
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

import cyloop
from cyloop import cache
from cyloop.accel.aligned import SMALL_WEIGHT_BYTES

DATA = files("cyloop.data")
CORPUS = Path(__file__).resolve().parents[1] / "asv_benchmarks" / "corpus"
MODELS = [DATA / "loop_sequence.onnx", DATA / "rnn_scan.onnx", DATA / "lstm_ti.xml",
          CORPUS / "torch-lstm-small.onnx", CORPUS / "jax-cond-in-scan-small.onnx",
          CORPUS / "skl-gp-small.onnx", CORPUS / "tf-greedy-decoder-small.onnx"]


@pytest.fixture(autouse=True)
def no_cache_variable(monkeypatch):
    monkeypatch.delenv(cache.ENVIRONMENT_VARIABLE, raising=False)


@pytest.fixture
def reads(monkeypatch):
    """The models the frontends read (a hit reads none), by name, in order."""
    from cyloop.frontends import onnx, openvino

    read = []
    lower, read_ir = onnx.lower, openvino.read_graph

    def spied_lower(source):
        read.append(os.path.basename(os.fspath(source)) if isinstance(source, (str, Path))
                    else "bytes")
        return lower(source)

    def spied_read_ir(source, weights=None):
        read.append(os.path.basename(os.fspath(source)) if isinstance(source, (str, Path))
                    else "bytes")
        return read_ir(source, weights=weights)

    monkeypatch.setattr(onnx, "lower", spied_lower)
    monkeypatch.setattr(openvino, "read_graph", spied_read_ir)
    return read


def feeds_for(model, path):
    """The corpus model's own feeds, else random ones (symbolic dims 3, trip counts 3)."""
    path = Path(path)
    if path.with_suffix(".npz").exists() and path.parent == CORPUS:
        data = np.load(path.with_suffix(".npz"))
        return {key[3:]: data[key] for key in data.files if key.startswith("in:")}
    rng = np.random.default_rng(0)
    feeds = {}
    for value in model.inputs:
        shape = [d if isinstance(d, int) else 3 for d in value.shape]
        if value.dtype.kind in "iu":
            feeds[value.name] = np.full(shape, 3, value.dtype)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(value.dtype)
    return feeds


def assert_same(mine, theirs, where="graph"):
    """The same objects, field for field: arrays of the same type, shape, bytes and flags (on a
    64-byte boundary where the oracle's weights are), protobuf messages of the same bytes."""
    assert type(mine) is type(theirs), where
    if isinstance(theirs, np.ndarray):
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape, where
        assert mine.strides == theirs.strides, where
        assert mine.flags.writeable == theirs.flags.writeable, where
        if theirs.dtype.hasobject:
            assert mine.tolist() == theirs.tolist(), where
        else:
            assert mine.tobytes() == theirs.tobytes(), where
        if theirs.nbytes >= SMALL_WEIGHT_BYTES and theirs.ctypes.data % 64 == 0:
            assert mine.ctypes.data % 64 == 0, where
    elif dataclasses.is_dataclass(theirs):
        for field in dataclasses.fields(theirs):
            assert_same(getattr(mine, field.name), getattr(theirs, field.name),
                        f"{where}.{field.name}")
    elif isinstance(theirs, dict):
        assert list(mine) == list(theirs), where
        for key, value in theirs.items():
            assert_same(mine[key], value, f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)) and not hasattr(theirs, "_fields"):
        assert len(mine) == len(theirs), where
        for k, (a, b) in enumerate(zip(mine, theirs)):
            assert_same(a, b, f"{where}[{k}]")
    elif hasattr(theirs, "SerializeToString"):
        assert mine.SerializeToString() == theirs.SerializeToString(), where
    else:
        assert mine == theirs, where


def assert_same_model(model, oracle, path):
    """`model` (not run yet) is `oracle`: the same graph (`assert_same`), settings, inputs,
    outputs and plan, and bit for bit the same results (against the oracle's graph compiled
    again, with its settings)."""
    assert_same(model.graph, oracle.graph)
    assert model.settings == oracle.settings
    oracle = cyloop.Model(oracle.graph, **dataclasses.asdict(oracle.settings))
    assert [(v.name, v.dtype, v.shape, v.kind) for v in model.inputs] \
        == [(v.name, v.dtype, v.shape, v.kind) for v in oracle.inputs]
    assert [(v.name, v.dtype, v.shape, v.kind) for v in model.outputs] \
        == [(v.name, v.dtype, v.shape, v.kind) for v in oracle.outputs]
    assert str(model.plan()) == str(oracle.plan())
    feeds = feeds_for(oracle, path)
    expected, got = oracle.run(feeds), model.run(feeds)
    assert list(got) == list(expected)
    for name, value in expected.items():
        assert_identical(got[name], value, name)
    assert str(model.plan()) == str(oracle.plan())


def assert_identical(got, expected, name):
    """The same arrays (a sequence output: lists of them), bit for bit."""
    if isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), name
        for mine, theirs in zip(got, expected):
            assert_identical(mine, theirs, name)
        return
    assert got.dtype == expected.dtype and got.shape == expected.shape, name
    assert got.tobytes() == expected.tobytes(), name


def entries(directory):
    return sorted(p for p in Path(directory).iterdir() if p.suffix == ".cyloop")


@pytest.mark.parametrize("path", MODELS, ids=[Path(p).stem for p in MODELS])
def test_a_hit_gives_the_model_an_uncached_load_gives(path, tmp_path, reads):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (none of these warns, cached or not)
        oracle = cyloop.load(path, cache=False, tune=False)
        missed = cyloop.load(path, cache=tmp_path, tune=False)
        hit = cyloop.load(path, cache=tmp_path, tune=False)
    assert reads == [Path(path).name] * 2  # (the oracle's and the miss's)
    assert len(entries(tmp_path)) == 1
    assert_same_model(missed, oracle, path)
    assert_same_model(hit, oracle, path)


def test_a_hit_reads_neither_onnx_nor_a_frontend(tmp_path):
    """In a fresh process, by the modules loaded (not by time)."""
    for path in MODELS[:3]:
        cyloop.load(path, cache=tmp_path)
    script = ("import sys, cyloop\n"
              "for path in sys.argv[2:]:\n"
              "    cyloop.load(path, cache=sys.argv[1]).run\n"
              "print(' '.join(sorted(sys.modules)))\n")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path), *map(str, MODELS[:3])],
                          capture_output=True, text=True, timeout=120, check=True, cwd=root)
    assert "cyloop cache" not in proc.stderr
    loaded = set(proc.stdout.split())
    assert "cyloop.cache" in loaded and "cyloop.kernels.onnx" in loaded
    early = sorted(m for m in loaded if m.split(".")[0] in ("onnx", "google")
                   or m.startswith("cyloop.frontends."))
    assert not early, f"a cache hit loads {early}"


@pytest.mark.parametrize("setting", ["argument", "variable", "true with the variable"])
def test_the_cache_directory_by_argument_or_environment(setting, tmp_path, monkeypatch, reads):
    path = DATA / "loop_sequence.onnx"
    if setting == "argument":
        options = {"cache": str(tmp_path)}
    else:
        monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path))
        options = {} if setting == "variable" else {"cache": True}
    cyloop.load(path, **options)
    cyloop.load(path, **options)
    assert reads == ["loop_sequence.onnx"] and len(entries(tmp_path)) == 1
    cyloop.load(path, cache=False)  # (False: no cache, whatever the variable says)
    assert reads == ["loop_sequence.onnx"] * 2


def test_the_default_directory(tmp_path, monkeypatch):
    if sys.platform in ("win32", "darwin"):
        assert cache.directory_of(True).endswith(os.path.join("cyloop", "Cache")
                                                 if sys.platform == "win32" else "cyloop")
        return
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.directory_of(True) == str(tmp_path / "cyloop")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert cache.directory_of(True) == os.path.expanduser("~/.cache/cyloop")
    assert cache.directory_of(None) is None and cache.directory_of(False) is None


@pytest.mark.parametrize("value", [3, "", b"dir"], ids=["int", "empty", "bytes"])
def test_a_bad_cache_option(value):
    with pytest.raises(cyloop.InputError, match="cache must be True, False, None or a "
                                                "directory, not"):
        cyloop.load(DATA / "loop_sequence.onnx", cache=value)


def test_another_cyloop_version_is_another_entry(tmp_path, monkeypatch, reads):
    path = DATA / "rnn_scan.onnx"
    oracle = cyloop.load(path, cache=False, tune=False)
    cyloop.load(path, cache=tmp_path)
    monkeypatch.setattr(cyloop, "__version__", "0.0.1")
    model = cyloop.load(path, cache=tmp_path, tune=False)
    assert reads == ["rnn_scan.onnx"] * 3 and len(entries(tmp_path)) == 2
    assert_same_model(model, oracle, path)
    cyloop.load(path, cache=tmp_path)
    assert len(reads) == 3  # (a hit, of the entry of this version)


@pytest.mark.parametrize("module", ["ir.py", "frontends/onnx.py", "cache.py"])
def test_a_changed_module_of_cyloop_is_a_miss(module, tmp_path, monkeypatch, reads):
    """A module the read loaded, of another size or time now: a miss, without a warning, and
    the entry written again (over the old one: the same key but for the modules)."""
    path = DATA / "rnn_scan.onnx"
    cyloop.load(path, cache=tmp_path)
    stamp = cache._stamp
    changed = os.path.join(*module.split("/"))
    monkeypatch.setattr(cache, "_stamp", lambda name: (stamp(name)[0], stamp(name)[1] + 1)
                        if name == changed else stamp(name))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cyloop.load(path, cache=tmp_path)
    assert len(reads) == 2 and len(entries(tmp_path)) == 1
    cyloop.load(path, cache=tmp_path)  # (the entry written by the modules as they are now)
    assert len(reads) == 2


def test_another_checkout_of_cyloop_is_another_entry(tmp_path, monkeypatch, reads):
    path = DATA / "rnn_scan.onnx"
    cyloop.load(path, cache=tmp_path)
    monkeypatch.setattr(cache, "_PACKAGE", str(tmp_path / "another" / "cyloop"))
    cyloop.load(path, cache=tmp_path)
    cyloop.load(path, cache=tmp_path)
    assert len(reads) == 2 and len(entries(tmp_path)) == 2


def test_an_entry_names_the_modules_that_read_it(tmp_path):
    """The modules an entry names are those loaded, stamped as they are on disk."""
    cyloop.load(DATA / "rnn_scan.onnx", cache=tmp_path)
    stamps = {path: (size, time) for path, size, time in cache._modules_loaded()}
    assert {"__init__.py", "ir.py", "cache.py", os.path.join("frontends", "onnx.py")} <= \
        set(stamps)
    for path, (size, time) in stamps.items():
        found = os.stat(os.path.join(os.path.dirname(cyloop.__file__), path))
        assert (size, time) == (found.st_size, found.st_mtime_ns)
    assert cache._stamp("no_such_module.py") == (-1, -1)


_EDITED = """
import os, sys
root, directory, model, edit = sys.argv[1:5]
if edit != "-":  # (a module edited: its time moves on)
    found = os.stat(os.path.join(root, "cyloop", edit))
    os.utime(os.path.join(root, "cyloop", edit),
             ns=(found.st_atime_ns, found.st_mtime_ns + 1_000_000_000))
import cyloop
cyloop.load(model, cache=directory)
print("cyloop.frontends.onnx" in sys.modules)
"""


def test_an_edited_checkout_is_a_miss_in_a_fresh_process(tmp_path):
    """A copy of cyloop, loading a model in fresh processes: a module the read loaded, edited,
    makes the next load read the model; one it did not load (the command line's) does not."""
    import shutil

    package = Path(cyloop.__file__).parent
    shutil.copytree(package, tmp_path / "copy" / "cyloop",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "copy")}
    env.pop(cache.ENVIRONMENT_VARIABLE, None)

    def read_the_model(edit):
        proc = subprocess.run([sys.executable, "-W", "error", "-c", _EDITED,
                               str(tmp_path / "copy"), str(tmp_path / "cache"),
                               str(DATA / "rnn_scan.onnx"), edit], capture_output=True,
                              text=True, timeout=120, check=True, env=env, cwd=tmp_path)
        return proc.stdout.split() == ["True"]

    assert read_the_model("-")  # (written)
    assert not read_the_model("-")  # (a hit)
    assert not read_the_model("cli.py")
    assert read_the_model("ir.py")
    assert not read_the_model("-")
    assert read_the_model(os.path.join("frontends", "onnx.py"))
    assert len(entries(tmp_path / "cache")) == 1


def test_an_entry_read_with_onnx_is_a_miss_under_another_onnx(tmp_path, monkeypatch, reads):
    import onnx  # noqa: F401 - (loaded: the entry names it)

    path = DATA / "rnn_scan.onnx"
    oracle = cyloop.load(path, cache=False, tune=False)
    cyloop.load(path, cache=tmp_path)
    real = cache._package_version
    monkeypatch.setattr(cache, "_package_version",
                        lambda name: "0.1" if name == "onnx" else real(name))
    with pytest.warns(UserWarning, match=r"was read with onnx .*, not the version installed"):
        model = cyloop.load(path, cache=tmp_path, tune=False)
    assert reads == ["rnn_scan.onnx"] * 3 and len(entries(tmp_path)) == 1
    assert_same_model(model, oracle, path)
    cyloop.load(path, cache=tmp_path)  # (written again, naming onnx "0.1")
    assert len(reads) == 3


def test_an_entry_read_without_onnx_holds_under_any_onnx(tmp_path):
    """An entry written by a process that never imported onnx or ml_dtypes names neither, and
    another onnx does not make it a miss (fresh processes, by the modules they load)."""
    path = str(CORPUS / "jax-scan-small.onnx")
    script = ("import sys, cyloop\n"
              "from cyloop import cache\n"
              "if sys.argv[3] == 'another':\n"
              "    cache._package_version = lambda name: '0.1'\n"
              "cyloop.load(sys.argv[2], cache=sys.argv[1])\n"
              "print(sorted({'onnx', 'ml_dtypes'} & set(sys.modules)), "
              "'cyloop.frontends.onnx' in sys.modules)\n")
    root = Path(__file__).resolve().parents[1]
    said = []
    for version in ("installed", "another"):
        proc = subprocess.run([sys.executable, "-W", "error", "-c", script, str(tmp_path), path,
                               version], capture_output=True, text=True, timeout=120,
                              check=True, cwd=root)
        said.append(proc.stdout.split("\n")[0])
    assert said == ["[] True", "[] False"]  # (the second read no model: a hit)
    assert len(entries(tmp_path)) == 1


def test_another_model_at_the_same_path_is_a_miss(tmp_path, reads):
    """The key is the model's bytes, not its name: a file written over is read again."""
    path = tmp_path / "model.onnx"
    directory = tmp_path / "cache"
    for source in ("loop_sequence.onnx", "rnn_scan.onnx", "loop_sequence.onnx"):
        path.write_bytes((DATA / source).read_bytes())
        oracle = cyloop.load(path, cache=False, tune=False)
        model = cyloop.load(path, cache=directory, tune=False)
        assert_same_model(model, oracle, DATA / source)
    assert reads == ["model.onnx"] * 5  # (the last load of each, then a hit)
    assert len(entries(directory)) == 2


def test_another_weights_file_is_a_miss(tmp_path, reads):
    """An IR is keyed by its weights too: the .bin beside it, or the `weights` given."""
    xml = tmp_path / "lstm_ti.xml"
    xml.write_bytes((DATA / "lstm_ti.xml").read_bytes())
    weights = (DATA / "lstm_ti.bin").read_bytes()
    # The first float weight reversed (the IR's integer constants as they are).
    start, size = map(int, re.search(r'element_type="f32" shape="[0-9, ]+" offset="([0-9]+)" '
                                     r'size="([0-9]+)"', xml.read_text()).groups())
    end = start + size
    other = weights[:start] + np.frombuffer(weights[start:end], np.float32)[::-1].tobytes() \
        + weights[end:]
    directory = tmp_path / "cache"
    for data in (weights, other):
        xml.with_suffix(".bin").write_bytes(data)
        oracle = cyloop.load(xml, cache=False, tune=False)
        assert_same_model(cyloop.load(xml, cache=directory, tune=False), oracle, xml)
        assert_same_model(cyloop.load(xml, cache=directory, tune=False), oracle, xml)
    given = tmp_path / "given.bin"
    given.write_bytes(weights)
    oracle = cyloop.load(xml, weights=given, cache=False, tune=False)
    assert_same_model(cyloop.load(xml, weights=given, cache=directory, tune=False), oracle, xml)
    assert_same_model(cyloop.load(xml, weights=weights, cache=directory, tune=False), oracle,
                      xml)
    # (The weights given are the .bin's first bytes: the first entry's.)
    assert len(entries(directory)) == 2 and len(reads) == 2 * 2 + 1


def test_bytes_are_cached_too(tmp_path, reads):
    onnx_bytes = (DATA / "rnn_scan.onnx").read_bytes()
    xml_bytes = (DATA / "lstm_ti.xml").read_bytes()
    weights = (DATA / "lstm_ti.bin").read_bytes()
    for source, options, path in ((onnx_bytes, {}, DATA / "rnn_scan.onnx"),
                                  (xml_bytes, {"weights": weights}, DATA / "lstm_ti.xml")):
        oracle = cyloop.load(source, cache=False, tune=False, **options)
        for _ in range(2):
            assert_same_model(cyloop.load(source, cache=tmp_path, tune=False, **options),
                              oracle, path)
    assert reads == ["bytes"] * 4 and len(entries(tmp_path)) == 2


def test_an_in_memory_model_is_not_cached(tmp_path):
    import onnx

    cyloop.load(onnx.load(DATA / "rnn_scan.onnx"), cache=tmp_path)
    assert entries(tmp_path) == []


def make_entry(tmp_path, reads, path=DATA / "rnn_scan.onnx"):
    """An entry for `path` in tmp_path/cache: (the directory, the entry)."""
    directory = tmp_path / "cache"
    cyloop.load(path, cache=directory)
    (entry,) = entries(directory)
    reads.clear()
    return directory, entry


def damaged(data: bytes, how: str) -> bytes:
    """`data` damaged: a byte flipped at a fraction of its length, or cut there."""
    kind, fraction = how.split()
    at = min(int(len(data) * float(fraction)), len(data) - 1)
    if kind == "cut":
        return data[:at]
    return data[:at] + bytes([data[at] ^ 0x10]) + data[at + 1:]


DAMAGE = ["flip 0", "flip 0.02", "flip 0.05", "flip 0.1", "flip 0.3", "flip 0.6", "flip 0.9",
          "flip 1", "cut 0", "cut 0.01", "cut 0.05", "cut 0.5", "cut 0.99"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_entry_is_read_as_a_miss_and_written_again(how, tmp_path, reads):
    path = DATA / "lstm_ti.xml"
    directory, entry = make_entry(tmp_path, reads, path)
    good = entry.read_bytes()
    entry.write_bytes(damaged(good, how))
    oracle = cyloop.load(path, cache=False, tune=False)
    with pytest.warns(UserWarning, match=r"cyloop cache: (the entry|cannot read the entry) "
                                         r".*\.cyloop.*; the model is read from its file"):
        model = cyloop.load(path, cache=directory, tune=False)
    assert reads == ["lstm_ti.xml"] * 2
    assert_same_model(model, oracle, path)
    assert entry.read_bytes() == good  # (written again)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cyloop.load(path, cache=directory)
    assert len(reads) == 2


def test_every_damaged_byte_of_a_small_entry_is_a_miss(tmp_path, reads):
    """Every third byte of an entry flipped in turn: each is read as a miss, with a warning, and the
    model is the one its file holds."""
    from onnx import helper

    from tests.support.onnx_models import model, tensor

    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [tensor("x", np.float32, [4])], [tensor("y", np.float32, [4])],
                              [helper.make_tensor("w", 1, [4], [1.0, 2.0, 3.0, 4.0])])
    path = tmp_path / "add.onnx"
    path.write_bytes(model(graph, 13).SerializeToString())
    directory, entry = make_entry(tmp_path, reads, path)
    good = entry.read_bytes()
    oracle = cyloop.load(path, cache=False, tune=False)
    expected = oracle.run(feeds_for(oracle, path))
    for at in range(0, len(good), 3):
        entry.write_bytes(good[:at] + bytes([good[at] ^ 0x01]) + good[at + 1:])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = cyloop.load(path, cache=directory, tune=False)
        assert len(caught) == 1 and "cyloop cache:" in str(caught[0].message), at
        got = model.run(feeds_for(oracle, path))
        for name, value in expected.items():
            assert_identical(got[name], value, name)


@pytest.mark.parametrize("content", [b"", b"not an entry", b"cyloop-cache\r\n\x1a\n" + b"\0" * 12],
                         ids=["empty", "text", "magic and zeros"])
def test_a_file_that_is_no_entry_is_read_as_a_miss(content, tmp_path, reads):
    directory, entry = make_entry(tmp_path, reads)
    entry.write_bytes(content)
    with pytest.warns(UserWarning, match="cyloop cache: the entry .* (is not a cyloop cache "
                                         "entry|is truncated|is corrupt)"):
        cyloop.load(DATA / "rnn_scan.onnx", cache=directory)
    assert reads == ["rnn_scan.onnx"]


def test_an_entry_of_another_machine_is_never_used(tmp_path, monkeypatch, reads):
    path = DATA / "rnn_scan.onnx"
    machine = cache._machine()
    with monkeypatch.context() as patched:
        patched.setattr(cache, "_machine", lambda: {**machine, "cpu": "another"})
        directory, theirs = make_entry(tmp_path, reads, path)
    oracle = cyloop.load(path, cache=False, tune=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = cyloop.load(path, cache=directory, tune=False)  # (another key: a miss)
    assert len(reads) == 2
    assert_same_model(model, oracle, path)
    mine = next(p for p in entries(directory) if p != theirs)
    # Another machine's entry under this machine's name (copied, say) is refused by its header.
    mine.write_bytes(theirs.read_bytes())
    with pytest.warns(UserWarning, match="was made for another model, cyloop, Python, numpy "
                                         "or machine"):
        model = cyloop.load(path, cache=directory, tune=False)
    assert_same_model(model, oracle, path)
    assert mine.read_bytes() != theirs.read_bytes()


def test_an_entry_of_another_model_is_never_used(tmp_path, reads):
    directory, theirs = make_entry(tmp_path, reads, DATA / "loop_sequence.onnx")
    path = DATA / "rnn_scan.onnx"
    cyloop.load(path, cache=directory)
    (mine,) = [p for p in entries(directory) if p != theirs]
    mine.write_bytes(theirs.read_bytes())
    oracle = cyloop.load(path, cache=False, tune=False)
    with pytest.warns(UserWarning, match="was made for another model"):
        model = cyloop.load(path, cache=directory, tune=False)
    assert_same_model(model, oracle, path)


def test_a_directory_that_cannot_be_made_loads_uncached(tmp_path, reads):
    (tmp_path / "file").write_text("")
    with pytest.warns(UserWarning, match=r"cyloop cache: cannot use .*file.cache .*; the model "
                                         "is loaded without the cache"):
        model = cyloop.load(DATA / "rnn_scan.onnx", cache=tmp_path / "file" / "cache")
    assert reads == ["rnn_scan.onnx"] and model.output_names


def test_a_directory_that_cannot_be_written_loads_uncached(tmp_path, monkeypatch, reads):
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    path = DATA / "lstm_ti.xml"
    oracle = cyloop.load(path, cache=False, tune=False)
    for _ in range(2):
        with pytest.warns(UserWarning, match=r"cyloop cache: cannot write .*\.cyloop \(Permission "
                                             "denied\\); the model is loaded without the cache"):
            model = cyloop.load(path, cache=tmp_path, tune=False)
        assert_same_model(model, oracle, path)
    assert entries(tmp_path) == [] and len(reads) == 3


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
def test_a_directory_others_may_write_is_not_used(tmp_path, reads):
    directory, entry = make_entry(tmp_path, reads)
    directory.chmod(0o777)
    with pytest.warns(UserWarning, match=r"cache is writable by other users, and an entry is a "
                                         "pickle"):
        cyloop.load(DATA / "rnn_scan.onnx", cache=directory)
    directory.chmod(0o700)
    entry.chmod(0o666)
    with pytest.warns(UserWarning, match=r"the entry .* is writable by other users"):
        cyloop.load(DATA / "rnn_scan.onnx", cache=directory)
    assert len(reads) == 2


def test_warnings_of_reading_are_given_on_a_hit_too(tmp_path, reads):
    from onnx import helper

    from tests.support.onnx_models import FALLBACK_OPSET, fallback_node, model, tensor

    graph = helper.make_graph(
        [*fallback_node("x", "r"), helper.make_node("Add", ["r", "r"], ["y"])], "g",
        [tensor("x", np.float32, [3, 4])], [tensor("y", np.float32, [3, 4])])
    path = tmp_path / "momentum.onnx"
    path.write_bytes(model(graph, 13, more_opsets=[FALLBACK_OPSET]).SerializeToString())
    warned = "onnx.reference's kernels.*: ai.onnx.preview.training::Momentum$"
    with pytest.warns(UserWarning, match=warned):
        oracle = cyloop.load(path, cache=False, tune=False)
    for _ in range(2):
        with pytest.warns(UserWarning, match=warned):
            loaded = cyloop.load(path, cache=tmp_path / "cache", tune=False)
        assert_same_model(loaded, oracle, path)
    assert len(reads) == 2  # (the oracle, then the miss: the fallback node pickles)


def test_a_model_with_external_data_is_not_cached(tmp_path, reads):
    import onnx
    from onnx import helper, numpy_helper

    from tests.support.onnx_models import model, tensor

    w = np.arange(6, dtype=np.float32)
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [tensor("x", np.float32, [6])], [tensor("y", np.float32, [6])],
                              [numpy_helper.from_array(w, "w")])
    path = tmp_path / "external.onnx"
    onnx.save(model(graph, 13), path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="external.data", size_threshold=0)
    directory = tmp_path / "cache"
    for _ in range(2):
        with pytest.warns(UserWarning, match="external.onnx keeps tensors in external data "
                                             "files.*loaded without the cache"):
            loaded = cyloop.load(path, cache=directory)
        x = np.ones(6, np.float32)
        np.testing.assert_array_equal(loaded.run({"x": x})["y"], x + w)
    assert entries(directory) == [] and len(reads) == 2


def test_a_model_that_changes_while_it_is_read_is_not_cached(tmp_path, monkeypatch, reads):
    from cyloop.frontends import onnx

    path = tmp_path / "model.onnx"
    path.write_bytes((DATA / "loop_sequence.onnx").read_bytes())
    lower = onnx.lower

    def lower_then_change(source):
        lowered = lower(source)
        path.write_bytes((DATA / "rnn_scan.onnx").read_bytes())
        return lowered

    monkeypatch.setattr(onnx, "lower", lower_then_change)
    with pytest.warns(UserWarning, match="model.onnx changed while cyloop read it; it is not "
                                         "cached"):
        cyloop.load(path, cache=tmp_path / "cache")



_WRITER = """
import sys, cyloop
model = cyloop.load(sys.argv[2], cache=sys.argv[1])
print(",".join(model.output_names))
"""


def test_processes_writing_one_entry_at_once(tmp_path, reads):
    """Each writes a whole entry and renames it into place: the one left is whole, and no
    temporary file stays behind."""
    path = str(CORPUS / "skl-gp-std-large.onnx")  # (3 MB: writing takes a while)
    root = Path(__file__).resolve().parents[1]
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), path],
                              cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and "cyloop cache" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [p.name for p in entries(tmp_path)]
    assert len(entries(tmp_path)) == 1
    oracle = cyloop.load(path, cache=False, tune=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = cyloop.load(path, cache=tmp_path, tune=False)
    assert_same_model(model, oracle, path)
    assert len(reads) == 1


def test_a_file_the_key_cannot_read_is_the_frontends_error(tmp_path):
    missing = tmp_path / "missing.bin"
    with pytest.raises(cyloop.ModelError, match="missing.bin: the weights file does not exist"):
        cyloop.load(DATA / "lstm_ti.xml", weights=missing, cache=tmp_path / "cache")
    assert list(tmp_path.glob("cache/*")) == []


def test_an_entry_keeps_every_kind_of_array(tmp_path):
    """The arrays of a graph come back as they were: values, dtype, shape, order, flags, on a
    64-byte boundary where a frontend puts them, and one array where the graph held one twice
    (kept by reference or, for objects and views that are not contiguous, in the pickle, which
    lays a view out contiguous)."""
    import ml_dtypes

    rng = np.random.default_rng(0)
    weight = cyloop_aligned(rng.standard_normal((300, 70)).astype(np.float32))  # (84 KB)
    small = cyloop_aligned(rng.standard_normal((20, 20)).astype(np.float32))  # (1600 B)
    arrays = {
        "weight": weight, "small": small, "tiny": np.arange(3, dtype=np.int64),
        "scalar": np.array(2.5), "empty": np.zeros((0, 4), np.float16),
        "flags": np.array([True, False]), "bf16": np.ones(5, ml_dtypes.bfloat16),
        "fortran": np.asfortranarray(rng.standard_normal((4, 3))),
        "strided": np.arange(20, dtype=np.int32)[::3],
        "strings": np.array(["a", "bc"], dtype=object), "big-endian": np.arange(4, dtype=">i4"),
        "writeable": np.arange(6.0),
    }
    for name, value in arrays.items():
        if name != "writeable":
            value.flags.writeable = False
    body = cyloop.Graph([cyloop.Node("Identity", ["w"], ["y"], {"value": weight})],
                        [cyloop.Value("w", np.float32, (300, 70))],
                        [cyloop.Value("y", np.float32, (300, 70))], {"w2": small})
    graph = cyloop.Graph([cyloop.Node("If", ["c"], ["out"], {"then_branch": body,
                                                             "else_branch": body})],
                         [cyloop.Value("c", np.bool_, ())], [cyloop.Value("out")], arrays,
                         {"": 17})
    path = str(tmp_path / "entry.cyloop")
    cache._write(str(tmp_path), path, "key", graph, ["a warning"], {}, ())
    read, warned = cache._read(path, "key")
    assert warned == ["a warning"]
    for name, value in arrays.items():
        got = read.initializers[name]
        assert type(got) is np.ndarray and got.dtype == value.dtype, name
        strides = np.empty_like(value, order="A").strides if name == "strided" else value.strides
        assert got.shape == value.shape and got.strides == strides, name
        assert got.flags.writeable == value.flags.writeable, name
        assert got.tolist() == value.tolist(), name
    assert read.initializers["weight"].ctypes.data % 64 == 0
    assert read.initializers["small"].ctypes.data % 64 == 0
    then, other = read.nodes[0].attrs["then_branch"], read.nodes[0].attrs["else_branch"]
    assert then is other and then.nodes[0].attrs["value"] is read.initializers["weight"]
    assert then.initializers["w2"] is read.initializers["small"]


def cyloop_aligned(value):
    from cyloop.accel.aligned import aligned

    return aligned(value, SMALL_WEIGHT_BYTES, own=True)


@pytest.mark.parametrize("size", [0, 1000, 5000], ids=["empty", "few", "many"])
@pytest.mark.parametrize("blake2_module", [True, False], ids=["_blake2", "hashlib's"])
def test_the_digest_of_a_model_is_chosen_by_its_size_alone(size, blake2_module, tmp_path,
                                                           monkeypatch):
    """Bytes and a file of them have one digest: BLAKE2b below `OPENSSL_FROM` bytes (from
    CPython's ``_blake2``, or hashlib's, the same), SHA-256 from there on."""
    import hashlib

    monkeypatch.setattr(cache, "OPENSSL_FROM", 4096)
    if not blake2_module:
        monkeypatch.setitem(sys.modules, "_blake2", None)  # (its import then fails)
    data = np.random.default_rng(size).integers(0, 256, size, np.uint8).tobytes()
    (tmp_path / "model").write_bytes(data)
    expected = (f"sha256:{hashlib.sha256(data).hexdigest()}" if size >= 4096 else
                f"blake2b:{hashlib.blake2b(data, digest_size=32).hexdigest()}")
    assert cache._digest(data) == cache._digest(str(tmp_path / "model")) == expected
