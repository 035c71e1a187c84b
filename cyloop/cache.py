"""The on-disk cache of read models (`cyloop.load(..., cache=...)`), so that a process loading a
model another has loaded skips reading it: no ``import onnx``, no shape inference, no lowering.

What is kept is what a frontend makes of a model file, the format-neutral `Graph`: compiling it
(fusion, hoisting, the plan) runs on every load, and measured choices are measured afresh in
every process, as without the cache. An entry is keyed by

- the model: a digest of its bytes (an IR's ``.xml`` and its weights; BLAKE2b, or SHA-256 for
  many bytes);
- what read it: cyloop's version and directory, Python's and numpy's version;
- the machine: its architecture, its CPU's model and flags, the cores the process may use and
  numpy's BLAS; nothing kept depends on them today, but a choice measured on one machine must
  never be used on another.

cyloop's own modules are checked by their size and time, as Python checks a module's bytecode
against its source: an entry names those of cyloop's modules the writing process had loaded,
which made the graph (``cyloop.ir``, the frontend, and whatever they use), with their sizes and
times, and is a miss where one of them is another file now (a source checkout edited, say).
Stamping only those makes a hit stat the fifty-odd modules a read loads, not every file of the
package; a module the read did not load cannot have shaped the graph (a changed one that loads
it is a miss), and compiling, which uses the kernels, runs on every load.

The optional packages a read may use, onnx (shape inference, the fallback's op classes) and
ml_dtypes (the narrow types), are not in the key: most models are read without either. An entry
names those the process had imported when it was written, with their versions, and is used only
where the same versions are installed; an entry that names none holds a graph read without them.

An entry names its key in its header, and checksums (CRC-32) cover the header, the pickle and the
arrays: an entry that cannot be read, is corrupt or truncated, or was made for another key is
read as a miss (with a warning saying why), and the model is read from its file and the entry
written again. Nothing read from a bad entry is used, and nothing raised by reading one reaches
the caller. Entries are written to a temporary file beside their final name and renamed onto it
(`os.replace`), so a reader sees a whole entry or none, and processes writing the same entry at
once each write a whole one.

An entry is a pickle, and reading a pickle can run code: the cache is trusted as the user's own
files are. Where the directory or an entry is owned by another user or writable by others
(POSIX), the cache is not used, and a warning says so. Models the cache does not keep: an
``onnx.ModelProto`` (it is in memory already) and an ONNX model whose tensors are in external
data files.

Layout of an entry, ``<directory>/<key digest>.cyloop``::

    MAGIC | header length (u64) | header CRC (u32) | header (a pickled dict: the key, cyloop's
    modules, the optional packages, the warnings reading gave, the pickle's and the arrays'
    lengths and CRCs) | the pickle | the arrays' bytes

Arrays of the graph (weights) are not in the pickle: each is a persistent id (its dtype, shape,
flags) and its bytes follow the pickle, read straight into an array laid out as the frontend
laid it out (on a 64-byte boundary where it was, read-only where it was).
"""

from __future__ import annotations

import functools
import os
import pickle
import struct
import sys
import warnings

import numpy as np

from .accel.aligned import ALIGNMENT, SMALL_WEIGHT_BYTES, aligned_empty
from .errors import InputError
from .ir import Graph
from .tuning import HASH_CHUNK, OPENSSL_FROM

__all__ = ["ENVIRONMENT_VARIABLE", "FORMAT", "default_directory", "directory_of", "read_graph"]

# The variable naming the cache's directory, read when `cyloop.load` is given no `cache`.
ENVIRONMENT_VARIABLE = "CYLOOP_CACHE_DIR"
# The version of the entries' layout (part of the key: another layout is another entry).
FORMAT = 3
_MAGIC = b"cyloop-cache\r\n\x1a\n"
_PREFIX = struct.Struct("<QI")  # header length, header CRC
_SUFFIX = ".cyloop"
# The most header bytes an entry may declare: a header holds a key, the modules' stamps and a
# few warnings.
_HEADER_LIMIT = 1 << 20
# The directory cyloop's modules are in (part of the key: another checkout is another entry; the
# modules an entry names are stamped relative to it).
_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def default_directory() -> str:
    """Where entries go when the cache is on and no directory is given: the platform's per-user
    cache directory (``$XDG_CACHE_HOME/cyloop``, else ``~/.cache/cyloop``; macOS
    ``~/Library/Caches/cyloop``; Windows ``%LOCALAPPDATA%\\cyloop\\Cache``)."""
    if sys.platform == "win32":
        root = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
        return os.path.join(root, "cyloop", "Cache")
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/cyloop")
    root = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(root):  # (the XDG spec: a relative path is ignored)
        root = os.path.expanduser("~/.cache")
    return os.path.join(root, "cyloop")


def directory_of(cache) -> str | None:
    """The directory `cyloop.load`'s ``cache`` option names, or None (no cache): False, none;
    None, ``$CYLOOP_CACHE_DIR`` if set and not empty, else none; True, ``$CYLOOP_CACHE_DIR``
    or else `default_directory`; a path, that directory."""
    if cache is None or cache is True:
        named = os.environ.get(ENVIRONMENT_VARIABLE, "")
        if named:
            return os.path.abspath(os.path.expanduser(named))
        return default_directory() if cache else None
    if cache is False:
        return None
    if isinstance(cache, (str, os.PathLike)) and os.fspath(cache):
        return os.path.abspath(os.path.expanduser(os.fspath(cache)))
    raise InputError(f"cache must be True, False, None or a directory, not "
                     f"{type(cache).__name__} {cache!r}")


def read_graph(source, xml: bool, weights, directory: str) -> Graph:
    """The `Graph` of the model `source` (a path or its bytes; `xml`: an OpenVINO IR, with
    `weights` as `cyloop.load` takes them), from its entry in `directory` if there is a good
    one, else from the frontend, then kept there."""
    model = _Model(source, xml, weights)
    try:
        digests = model.digests()
    except OSError:  # (a file that cannot be read: the frontend says so, naming it)
        return model.read()[0]
    key = repr({"format": FORMAT, "model": digests, **_environment(model.format)})
    path = os.path.join(directory, _digest(key.encode()).partition(":")[2] + _SUFFIX)
    trusted = _trusted(directory)
    if trusted:
        found = _read(path, key)
        if found is not None:
            graph, warned = found
            for message in warned:  # (what reading the model warned of, said again)
                warnings.warn(message, stacklevel=3)
            return graph
    graph, warned, keep = model.read()
    if trusted and keep:
        if _digests_now(model) != digests:  # (it changed while it was read)
            _warn(f"{model.name} changed while cyloop read it; it is not cached")
        else:
            _write(directory, path, key, graph, warned, _packages_loaded(), _modules_loaded())
    return graph


def _digests_now(model) -> dict | None:
    try:
        return model.digests()
    except OSError:
        return None


def _warn(message: str) -> None:
    warnings.warn(f"cyloop cache: {message}", stacklevel=4)


class _Model:
    """A model `read_graph` is given: what keys it and how to read it."""

    def __init__(self, source, xml: bool, weights):
        self.source, self.xml, self.weights = source, xml, weights
        self.format = "openvino" if xml else "onnx"
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.name = "the model's bytes"
        else:
            self.name = os.fspath(source)
        if not xml:
            self.parts = {"model": source}
        elif weights is not None:
            self.parts = {"xml": source, "weights": weights}
        elif isinstance(source, (bytes, bytearray, memoryview)):
            self.parts = {"xml": source, "weights": None}
        else:  # (the frontend reads the .bin beside the .xml, if there is one)
            path = os.path.splitext(self.name)[0] + ".bin"
            self.parts = {"xml": source, "weights": path if os.path.exists(path) else None}

    def digests(self) -> dict[str, str | None]:
        """The digest (`_digest`) of each part's bytes (None: no weights)."""
        return {part: None if value is None else _digest(value)
                for part, value in self.parts.items()}

    def read(self) -> tuple[Graph, list[str], bool]:
        """The model read by its frontend: its graph, what reading it warned of, and whether
        the cache may keep it."""
        if self.xml:
            from .frontends import openvino

            return openvino.read_graph(self.source, weights=self.weights), [], True
        from .frontends import onnx

        lowered = onnx.lower(self.source)
        if lowered.external_data:
            _warn(f"{self.name} keeps tensors in external data files, which the cache does not "
                  "key; it is loaded without the cache")
        return lowered.graph, lowered.warned, not lowered.external_data


def _digest(value) -> str:
    """A 256-bit digest of bytes, or of a file's, named by its algorithm (`_hasher`), in
    hexadecimal."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        name, hasher = _hasher(len(value))
        hasher.update(value)
        return f"{name}:{hasher.hexdigest()}"
    with open(value, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        name, hasher = _hasher(size)
        # (a small file's size: a buffer of HASH_CHUNK zeroed bytes costs a small model's read)
        buffer = memoryview(bytearray(max(1, min(size, HASH_CHUNK))))
        while count := file.readinto(buffer):
            hasher.update(buffer[:count])
    return f"{name}:{hasher.hexdigest()}"


def _hasher(size: int):
    """(its name, a hasher) for `size` bytes, the algorithm chosen by the size alone, so that the
    same bytes always have the same digest: BLAKE2b (256 bits) below `OPENSSL_FROM`, from
    CPython's own ``_blake2`` module, which ``hashlib`` falls back on too, without the OpenSSL
    that importing ``hashlib`` loads; SHA-256 from there on, OpenSSL's, whose hashing is faster
    on enough bytes to pay for the import. (CPython's own SHA-256 hashes a third as fast as its
    BLAKE2b: a model of a few hundred kilobytes took a millisecond.)"""
    if size < OPENSSL_FROM:
        try:
            from _blake2 import blake2b
        except ImportError:  # pragma: no cover - (a Python without it: hashlib's is the same)
            from hashlib import blake2b
        return "blake2b", blake2b(digest_size=32)
    import hashlib

    return "sha256", hashlib.sha256()


# -- the key ------------------------------------------------------------------------------------

def _environment(format: str) -> dict:
    """The key's parts besides the model: what read it, and the machine."""
    from . import __version__

    return {"frontend": format, "cyloop": __version__, "package": _PACKAGE,
            "python": sys.version, "numpy": np.__version__, "machine": _machine()}


# The packages a frontend imports only for some models; an entry names those it was read with.
_OPTIONAL_PACKAGES = ("onnx", "ml_dtypes")


def _packages_loaded() -> dict[str, str | None]:
    """The optional packages this process has imported (a read made now may have used them),
    with their versions."""
    return {name: _package_version(name) for name in _OPTIONAL_PACKAGES if name in sys.modules}


def _other_packages(recorded) -> str | None:
    """Which of the packages an entry was read with is installed at another version now (a
    sentence), or None."""
    for name, version in recorded.items():
        if _package_version(name) != version:
            return f"{name} {version}"
    return None


def _modules_loaded() -> tuple[tuple[str, int, int], ...]:
    """The stamps (`_stamp`) of cyloop's modules this process has loaded, by their paths in
    `_PACKAGE`; a module loaded from elsewhere by its full path."""
    found = []
    for name, module in list(sys.modules.items()):
        if name == "cyloop" or name.startswith("cyloop."):
            path = getattr(module, "__file__", None)
            if path:
                path = os.path.abspath(path)
                if path.startswith(_PACKAGE + os.sep):
                    path = path[len(_PACKAGE) + 1:]
                found.append((path, *_stamp(path)))
    return tuple(sorted(found))


def _stamp(path: str) -> tuple[int, int]:
    """A module's size and modification time (nanoseconds), by its path in `_PACKAGE`; (-1, -1)
    where there is no such file."""
    try:
        stat = os.stat(os.path.join(_PACKAGE, path))
    except OSError:
        return -1, -1
    return stat.st_size, stat.st_mtime_ns


def _modules_changed(stamps) -> bool:
    """Whether one of the modules an entry names (`_modules_loaded` when it was written) is
    another file now (docs/design.md, Start-up)."""
    return any(_stamp(path) != (size, time) for path, size, time in stamps)


@functools.cache
def _package_version(name: str) -> str | None:
    """An installed package's version, read from its metadata beside it without importing it
    (the name of its ``.dist-info`` directory); else the size and time of its module; None if
    it is not installed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    origin = spec.origin
    root = os.path.dirname(os.path.dirname(origin)) if spec.submodule_search_locations \
        else os.path.dirname(origin)
    prefix = name.replace("-", "_") + "-"
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.name.startswith(prefix) and entry.name.endswith(".dist-info"):
                    return entry.name[len(prefix):-len(".dist-info")]
        stat = os.stat(origin)
    except OSError:
        return None
    return f"{origin} {stat.st_size} {stat.st_mtime_ns}"


@functools.cache
def _machine() -> dict:
    """The machine: its architecture, its CPU (model and flags), the cores this process may use
    and numpy's BLAS."""
    import platform

    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
        blas = " ".join(str(blas.get(k, "")) for k in ("name", "version",
                                                        "openblas configuration"))
    except (AttributeError, KeyError, TypeError):
        blas = "unknown"
    return {"system": sys.platform, "architecture": platform.machine(), "byteorder": sys.byteorder,
            "cpu": _cpu(), "cores": cores, "blas": blas}


# /proc/cpuinfo's fields that name a CPU and what it can do (x86, then ARM), not its state.
_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags",
               "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "Features")


def _cpu() -> str:
    """A digest of the first CPU's fields in /proc/cpuinfo (Linux); on Windows the processor's
    name (``PROCESSOR_IDENTIFIER``); elsewhere nothing (the architecture and BLAS still key)."""
    try:
        with open("/proc/cpuinfo", "rb") as file:
            first = file.read(1 << 16).decode(errors="replace").split("\n\n")[0]
    except OSError:
        return os.environ.get("PROCESSOR_IDENTIFIER", "")
    fields = [line for line in first.splitlines()
              if line.split(":")[0].strip() in _CPU_FIELDS]
    return _digest("\n".join(fields).encode())


# -- trust -------------------------------------------------------------------------------------

def _trusted(directory: str) -> bool:
    """Whether the cache may use `directory` (making it if it is missing): a directory only the
    user (or root) may write into. Where it may not, a warning says why."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        stat = os.stat(directory)
    except OSError as e:
        _warn(f"cannot use {directory} ({e.strerror or e}); the model is loaded without the "
              "cache")
        return False
    why = _untrusted(stat)
    if why:
        _warn(f"{directory} is {why}, and an entry is a pickle, trusted as the user's own files "
              "are; the model is loaded without the cache")
        return False
    return True


def _untrusted(stat) -> str | None:
    """Why a file or directory is not the user's own, or None (always None where there are no
    POSIX owners)."""
    if not hasattr(os, "getuid"):
        return None
    if stat.st_uid not in (os.getuid(), 0):
        return f"owned by another user (uid {stat.st_uid})"
    if stat.st_mode & 0o022:
        return "writable by other users"
    return None


# -- entries -----------------------------------------------------------------------------------

class _Unreadable(Exception):
    """Why an entry is not used."""


def _read(path: str, key: str):
    """(graph, warnings) from the entry at `path` made for `key`, or None: no entry, one written
    by cyloop's modules before one of them changed, or one that cannot be used (a warning says
    why)."""
    try:
        with open(path, "rb") as file:
            return _read_entry(file, key)
    except FileNotFoundError:
        return None
    except _Unreadable as e:
        _warn(f"the entry {path} {e}; the model is read from its file")
    except Exception as e:  # noqa: BLE001 - whatever a bad entry raises, the model is read
        _warn(f"cannot read the entry {path} ({type(e).__name__}: {e}); the model is read from "
              "its file")
    return None


def _read_entry(file, key: str):
    import zlib

    stat = os.fstat(file.fileno())
    why = _untrusted(stat)
    if why:
        raise _Unreadable(f"is {why}")
    if file.read(len(_MAGIC)) != _MAGIC:
        raise _Unreadable("is not a cyloop cache entry")
    prefix = file.read(_PREFIX.size)
    if len(prefix) != _PREFIX.size:
        raise _Unreadable("is truncated")
    length, crc = _PREFIX.unpack(prefix)
    if not 0 < length <= min(_HEADER_LIMIT, stat.st_size):
        raise _Unreadable("is corrupt (its header's length)")
    header = file.read(length)
    if len(header) != length or zlib.crc32(header) != crc:
        raise _Unreadable("is corrupt or truncated (its header's checksum)")
    header = pickle.loads(header)
    if not isinstance(header, dict) or header.get("key") != key:
        raise _Unreadable("was made for another model, cyloop, Python, numpy or machine")
    if _modules_changed(header["modules"]):  # (an edited checkout: a miss, as another version
        return None  # of cyloop is, not a bad entry: no warning; the entry is written over)
    other = _other_packages(header["packages"])
    if other is not None:
        raise _Unreadable(f"was read with {other}, not the version installed")
    pickled_length, pickled_crc = header["pickle"]
    data_length, data_crc = header["data"]
    if len(_MAGIC) + _PREFIX.size + length + pickled_length + data_length != stat.st_size:
        raise _Unreadable("is truncated or has bytes past its end")
    pickled = file.read(pickled_length)
    if len(pickled) != pickled_length or zlib.crc32(pickled) != pickled_crc:
        raise _Unreadable("is corrupt (its pickle's checksum)")
    unpickler = _Unpickler(pickled)
    graph = unpickler.load()
    if not isinstance(graph, Graph):
        raise _Unreadable(f"holds a {type(graph).__name__}, not a Graph")
    crc, done = 0, 0
    for array, writeable in unpickler.arrays:
        view = memoryview(array.reshape(-1).view(np.uint8))
        count = 0
        while count < len(view):
            read = file.readinto(view[count:count + HASH_CHUNK])
            if not read:
                raise _Unreadable("is truncated (its arrays)")
            crc = zlib.crc32(view[count:count + read], crc)
            count += read
        done += count
        array.flags.writeable = writeable
    if done != data_length or crc != data_crc or file.read(1):
        raise _Unreadable("is corrupt (its arrays' checksum)")
    return graph, [str(message) for message in header["warned"]]


def _write(directory: str, path: str, key: str, graph: Graph, warned: list[str],
           packages: dict[str, str | None], modules: tuple) -> None:
    """Keep `graph` in an entry at `path`, or warn why not."""
    import tempfile
    import zlib

    try:
        pickler = _Pickler()
        pickler.dump(graph)
        pickled = pickler.file.getvalue()
    except Exception as e:  # noqa: BLE001 - an object of the graph that does not pickle
        _warn(f"the model's graph does not pickle ({type(e).__name__}: {e}); it is not cached")
        return
    crc, length = 0, 0
    for array in pickler.arrays:
        data = array.reshape(-1).view(np.uint8)
        crc, length = zlib.crc32(data, crc), length + data.nbytes
    header = pickle.dumps({"key": key, "modules": modules, "warned": warned, "packages": packages,
                           "pickle": (len(pickled), zlib.crc32(pickled)),
                           "data": (length, crc)}, protocol=5)
    temporary = None
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=directory)
        with open(descriptor, "wb") as file:
            file.write(_MAGIC + _PREFIX.pack(len(header), zlib.crc32(header)) + header)
            file.write(pickled)
            for array in pickler.arrays:
                file.write(array.reshape(-1).view(np.uint8))
        os.replace(temporary, path)  # (atomic: readers see the old entry or the new one)
        temporary = None
    except OSError as e:
        _warn(f"cannot write {path} ({e.strerror or e}); the model is loaded without the cache")
    finally:
        if temporary is not None:
            try:
                os.remove(temporary)
            except OSError:
                pass


class _Pickler(pickle.Pickler):
    """Pickles a graph, its arrays by reference: `arrays` holds those whose bytes follow the
    pickle, in order (C-contiguous arrays of fixed-size elements); an array met twice is one
    array when read."""

    def __init__(self):
        import io

        self.file = io.BytesIO()
        super().__init__(self.file, protocol=5)
        self.arrays: list[np.ndarray] = []
        self._seen: dict[int, int] = {}  # id(array) -> its index among the arrays met
        self._held: list[np.ndarray] = []  # (so that no id is reused while pickling)
        self._in_band = None  # an array whose persistent id holds it: pickled there, as itself

    def persistent_id(self, obj):
        if type(obj) is not np.ndarray:
            return None
        if obj is self._in_band:  # (met again inside its own persistent id)
            self._in_band = None
            return None
        index = self._seen.get(id(obj))
        if index is not None:
            return ("same", index)
        self._seen[id(obj)] = len(self._held)
        self._held.append(obj)
        if obj.dtype.hasobject or not obj.flags.c_contiguous:  # (its own pickling keeps order)
            self._in_band = obj
            return ("in band", obj, bool(obj.flags.writeable))
        self.arrays.append(obj)
        # On a boundary where the frontend puts it (`SMALL_WEIGHT_BYTES` and up; a smaller array
        # on one is there by chance, and is not an entry's business).
        on_boundary = obj.nbytes >= SMALL_WEIGHT_BYTES and obj.ctypes.data % ALIGNMENT == 0
        return ("bytes", obj.dtype, obj.shape, bool(obj.flags.writeable), on_boundary)


class _Unpickler(pickle.Unpickler):
    """Unpickles what `_Pickler` pickled: each array kept by reference is made empty, in
    `arrays` with its writeable flag, for its bytes to be read into."""

    def __init__(self, pickled: bytes):
        import io

        super().__init__(io.BytesIO(pickled))
        self.arrays: list[tuple[np.ndarray, bool]] = []
        self._met: list[np.ndarray] = []

    def persistent_load(self, pid):
        kind = pid[0]
        if kind == "same":
            return self._met[pid[1]]
        if kind == "in band":
            _, array, writeable = pid
            if writeable and not array.flags.writeable:
                array = array.copy()
            array.flags.writeable = writeable
        elif kind == "bytes":
            _, dtype, shape, writeable, on_boundary = pid
            array = aligned_empty(shape, dtype) if on_boundary else np.empty(shape, dtype)
            self.arrays.append((array, writeable))
        else:
            raise pickle.UnpicklingError(f"unknown persistent id {kind!r}")
        self._met.append(array)
        return array
