"""The seed corpus: the test suite's own models (tests/support/onnx_models.py,
openvino_models.py) and the embedded examples (cyloop/data), each with feeds it runs on.

ONNX seeds are serialized protos; IR seeds are the .xml text and .bin bytes `openvino.save_model`
writes (built once, in a scratch directory).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

import cyloop

# The installed package's examples: the tests also run against an installed cyloop, from a
# directory without the source tree (an sdist's tests).
DATA = Path(cyloop.__file__).resolve().parent / "data"


class Seed:
    """A seed model: `kind` "onnx" (`model`: the serialized proto) or "ir" (`xml`, and `bin`
    or None), and `feeds` it runs on."""

    def __init__(self, name, kind, feeds, model=b"", xml=b"", bin=None):
        self.name, self.kind, self.feeds = name, kind, feeds
        self.model, self.xml, self.bin = model, xml, bin

    def __repr__(self):  # short: hypothesis shows the strategy's arguments
        return f"Seed({self.name!r})"


def _rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def onnx_seeds() -> list[Seed]:
    from ..support.onnx_models import if_in_loop_model, loop_model, lstm_loop_model, scan_model

    rng = np.random.default_rng(0)
    i64 = np.int64
    cases = [
        ("onnx.loop", loop_model(True, True, 3),
         {"M": i64(5), "cond": np.bool_(True), "v0": _rand(rng, (2, 3))}),
        ("onnx.loop_while", loop_model(False, True, 4, dtype=np.int32, shape=(3,)),
         {"cond": np.bool_(True), "v0": np.arange(3, dtype=np.int32)}),
        ("onnx.loop_bool", loop_model(True, False, None, dtype=np.bool_),
         {"M": i64(4), "v0": rng.random((2, 3)) > 0.5}),
        ("onnx.scan", scan_model((4, 2, 3), 1, True, 0, False),
         {"s0": _rand(rng, (4, 3)), "x": _rand(rng, (4, 2, 3))}),
        ("onnx.scan_axis2", scan_model((2, 3, 5), 2, False, 1, True, opset=11),
         {"s0": _rand(rng, (2, 3)), "x": _rand(rng, (2, 3, 5))}),
        ("onnx.lstm_loop", lstm_loop_model(hidden=4),
         {"T": i64(3), "X": _rand(rng, (3, 2, 5)), "W": _rand(rng, (5, 16)),
          "R": _rand(rng, (4, 16)), "B": _rand(rng, (16,)), "h0": _rand(rng, (2, 4)),
          "c0": _rand(rng, (2, 4))}),
        ("onnx.if_in_loop", if_in_loop_model(),
         {"M": i64(4), "v0": _rand(rng, (2, 3)), "x": _rand(rng, (2, 3))}),
    ]
    seeds = [Seed(name, "onnx", feeds, model=proto.SerializeToString())
             for name, proto, feeds in cases]
    seeds.append(Seed("onnx.loop_sequence", "onnx", {"trip_count": i64(3),
                                                      "row": _rand(rng, (4,))},
                      model=(DATA / "loop_sequence.onnx").read_bytes()))
    return seeds


def ir_seeds(scratch=None) -> list[Seed]:
    """The IR seeds; `scratch`: where `openvino.save_model` writes them (default: a temporary
    directory, removed after)."""
    if scratch is None:
        with tempfile.TemporaryDirectory(prefix="cyloop-fuzz-seeds-") as tmp:
            return ir_seeds(tmp)
    from ..support.openvino_models import (
        cell_ti_model,
        loop_model,
        nested_ti_xml,
        save,
        ti_model,
        to_older_dialect,
    )

    scratch = Path(scratch)
    rng = np.random.default_rng(1)
    models = [
        ("ir.ti", ti_model((5, 2, 3), 0, 0, -1, 1, 1, 0, 1),
         {"X": _rand(rng, (5, 2, 3)), "H0": _rand(rng, (1, 2, 3)), "W": _rand(rng, (1, 2, 3))}),
        ("ir.ti_reverse_part2", ti_model((4, 6, 3), 1, -1, 0, -2, 2, 1, -1),
         {"X": _rand(rng, (4, 6, 3)), "H0": _rand(rng, (4, 2, 3)), "W": _rand(rng, (4, 2, 3))}),
        ("ir.loop", loop_model(4, stop_at=2, sliced=True),
         {"ACC0": _rand(rng, (1, 3)), "X": _rand(rng, (6, 3))}),
        ("ir.loop_param", loop_model("param"),
         {"ACC0": _rand(rng, (1, 3)), "N": np.int64(3)}),
        ("ir.lstm_cell_ti", cell_ti_model("lstm")[0],
         {"X": _rand(rng, (3, 6, 5)), "H0": _rand(rng, (3, 7)), "C0": _rand(rng, (3, 7))}),
        ("ir.gru_cell_ti", cell_ti_model("gru", linear_before_reset=True)[0],
         {"X": _rand(rng, (3, 6, 5)), "H0": _rand(rng, (3, 7))}),
    ]
    seeds = []
    for name, model, feeds in models:
        path = save(model, scratch / f"{name}.xml")
        seeds.append(Seed(name, "ir", feeds, xml=path.read_bytes(),
                          bin=path.with_suffix(".bin").read_bytes()))
    # The IRs openvino.convert_model writes for ONNX seeds: Gathers by the iteration number
    # (hoisted), an LSTM spelled op by op (fused), If-8 inside Loop-5.
    import openvino as ov

    for seed in onnx_seeds():
        if seed.name not in ("onnx.lstm_loop", "onnx.if_in_loop", "onnx.loop"):
            continue
        source = scratch / f"{seed.name}.onnx"
        source.write_bytes(seed.model)
        path = save(ov.convert_model(str(source)), scratch / f"{seed.name}.xml")
        seeds.append(Seed(seed.name.replace("onnx.", "ir.converted_"), "ir", seed.feeds,
                          xml=path.read_bytes(), bin=path.with_suffix(".bin").read_bytes()))
    current = save(loop_model(6, stop_at=2, sliced=True), scratch / "current.xml")
    older = to_older_dialect(current, scratch / "older.xml")
    seeds.append(Seed("ir.loop_older_dialect", "ir",
                      {"ACC0": _rand(rng, (1, 3)), "X": _rand(rng, (6, 3))},
                      xml=older.read_bytes(), bin=older.with_suffix(".bin").read_bytes()))
    seeds.append(Seed("ir.lstm_ti", "ir",
                      {"X": _rand(rng, (2, 16, 8)), "H0": _rand(rng, (2, 16)),
                       "C0": _rand(rng, (2, 16))},
                      xml=(DATA / "lstm_ti.xml").read_bytes(),
                      bin=(DATA / "lstm_ti.bin").read_bytes()))
    seeds.append(Seed("ir.nested_ti", "ir", {"x": _rand(rng, (1, 2))},
                      xml=nested_ti_xml(3).encode()))
    return seeds
