"""The corpus of loop-bearing models real exporters wrote (torch.onnx, tf2onnx, jax2onnx,
skl2onnx), as `build.py` beside this file made them: each entry's model file, its feeds, and the
source framework's own outputs on them, which another runtime must reproduce within the entry's
tolerance. Read by the benchmarks (asv, compare.py) and the conformance tests; it needs numpy
only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["DIRECTORY", "Entry", "entries"]

DIRECTORY = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Entry:
    """One model of the corpus (see `build.py` for what each field records)."""

    name: str
    exporter: str
    source: str
    size: str  # "small": its natural size; "large": where the loop dominates
    loop_ops: tuple[str, ...]
    rtol: float
    atol: float

    @property
    def path(self) -> Path:
        return DIRECTORY / f"{self.name}.onnx"

    def _arrays(self, prefix: str) -> dict[str, np.ndarray]:
        with np.load(DIRECTORY / f"{self.name}.npz") as stored:
            return {key[len(prefix):]: stored[key] for key in stored.files
                    if key.startswith(prefix)}

    def feeds(self) -> dict[str, np.ndarray]:
        """Input name -> the seeded value the source outputs were computed on."""
        return self._arrays("in:")

    def expected(self) -> dict[str, np.ndarray]:
        """Output name -> the source framework's value, in the model's output order."""
        return self._arrays("out:")

    def agrees(self, outputs: dict) -> bool:
        """Whether `outputs` (name -> array) are the source's within the entry's tolerance."""
        expected = self.expected()
        return set(outputs) >= set(expected) and all(
            np.allclose(np.asarray(outputs[name], np.float64), np.asarray(value, np.float64),
                        rtol=self.rtol, atol=self.atol, equal_nan=True)
            for name, value in expected.items())


def entries() -> list[Entry]:
    """Every entry of the corpus's manifest, in its order (none where it is not built)."""
    manifest = DIRECTORY / "manifest.json"
    if not manifest.exists():
        return []
    return [Entry(e["name"], e["exporter"], e["source"], e["size"], tuple(e["loop_ops"]),
                  float(e["rtol"]), float(e["atol"])) for e in json.loads(manifest.read_text())]
