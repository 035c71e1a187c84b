"""The corpus of models real exporters wrote (asv_benchmarks/corpus: torch.onnx, tf2onnx,
jax2onnx, skl2onnx), each against the outputs its source framework computed on its feeds, within
the tolerance onnxruntime met (`Entry.rtol`, `Entry.atol`); under the driver CI selects, and
again with the measured choices fixed at their defaults. No model may need onnx.reference's
kernels: its ops all have native kernels (or function bodies)."""

import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import cyloop

_CORPUS = Path(__file__).resolve().parents[2] / "asv_benchmarks" / "corpus" / "__init__.py"


def _entries():
    if not _CORPUS.exists():
        return []
    spec = importlib.util.spec_from_file_location("cyloop_test_corpus", _CORPUS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module.entries()


_ENTRIES = _entries()
pytestmark = pytest.mark.skipif(not _ENTRIES, reason="the corpus (asv_benchmarks/corpus) is not "
                                "here: it is in the repository, not in the sdist")


def _difference(entry, outputs) -> str:
    worst = []
    for name, value in entry.expected().items():
        got = np.asarray(outputs[name], np.float64)
        if got.shape != value.shape:
            return f"{name}: shape {got.shape}, the source's {value.shape}"
        excess = np.abs(got - value) - entry.atol - entry.rtol * np.abs(value)
        worst.append(f"{name}: max excess {np.nanmax(excess, initial=0):.3g}")
    return "; ".join(worst)


@pytest.mark.parametrize("tune", [True, False], ids=["measured", "defaults"])
@pytest.mark.parametrize("entry", _ENTRIES, ids=[e.name for e in _ENTRIES])
def test_an_exported_model_gives_its_source_frameworks_outputs(entry, tune):
    with warnings.catch_warnings():
        # (a model with ops on onnx.reference's kernels warns at load)
        warnings.filterwarnings("error", "cyloop runs these ops with onnx.reference", UserWarning)
        model = cyloop.load(str(entry.path), tune=tune)
    feeds = entry.feeds()
    for _ in range(3):  # (the measured choices' trials run in the first runs)
        outputs = model.run(feeds)
        assert list(outputs) == list(entry.expected()), "the model's outputs, in order"
        assert entry.agrees(outputs), _difference(entry, outputs)


def test_the_corpus_covers_every_exporter_and_size():
    exporters = {e.exporter.split(" ")[0] for e in _ENTRIES}
    assert exporters >= {"torch.onnx.export", "tf2onnx", "jax2onnx", "skl2onnx"}
    assert {e.size for e in _ENTRIES} == {"small", "large"}
    assert all(e.loop_ops for e in _ENTRIES)


def _hoist_choices(loops):
    from cyloop.engine.hoist_choice import HoistChoice

    for loop in loops:
        if isinstance(loop, HoistChoice):
            yield loop
        yield from _hoist_choices(loop.loops)


@pytest.mark.parametrize("entry", _ENTRIES, ids=[e.name for e in _ENTRIES])
def test_an_exported_model_gives_them_with_its_loops_hoisting_nothing(entry):
    """Each loop with hoisted work fixed to run it in the loop (engine/hoist_choice.py), nested
    ones included as they are made."""
    model = cyloop.load(str(entry.path), driver="cython")  # (the reference driver hoists nothing)
    feeds = entry.feeds()
    for _ in range(3):
        for choice in _hoist_choices(model._compiled.loops):
            choice.choice.fix("in the loop")
        outputs = model.run(feeds)
        assert entry.agrees(outputs), _difference(entry, outputs)
        for choice in _hoist_choices(model._compiled.loops):
            for plain in [choice._plain] if choice._plain is not None else []:
                for inner in _hoist_choices(plain.loops):
                    inner.choice.fix("in the loop")
