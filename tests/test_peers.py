"""The peers' set-up: OpenVINO, as an oracle or a peer, computes in f32 on every CPU."""

import sys
import threading
import time
import types

import numpy as np
import openvino as ov
import openvino.opset8 as ops
import openvino.properties.hint as hints

from cyloop import peers
from cyloop.peers import openvino_compiled


def _model():
    x = ops.parameter([4, 4], np.float32, name="x")
    return ov.Model([ops.matmul(x, x, False, False)], [x], "square")


def test_openvino_compiled_runs_in_f32():
    compiled = openvino_compiled(_model())
    assert compiled.get_property(hints.inference_precision) == ov.Type.f32
    x = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    got = next(iter(compiled([x]).values()))
    np.testing.assert_allclose(got, x @ x, rtol=1e-5, atol=1e-6)


def test_openvino_compiled_takes_a_thread_count():
    compiled = openvino_compiled(_model(), threads=1)
    assert compiled.get_property("INFERENCE_NUM_THREADS") == 1


class _Sender:
    """Stands in for openvino_telemetry's sender: one message in flight until `sent` is set."""

    def __init__(self):
        self.sent = threading.Event()

    @property
    def queue_size(self):
        return 0 if self.sent.is_set() else 1


def _telemetry_module(sender):
    module = types.ModuleType("openvino_telemetry.main")
    instance = types.SimpleNamespace(sender=sender)
    module.Telemetry = type("Telemetry", (), {"_SingletonMetaClass__single_instance": instance})
    return module


def test_settled_openvino_waits_until_the_telemetry_message_is_sent(monkeypatch):
    sender = _Sender()
    monkeypatch.setitem(sys.modules, "openvino_telemetry.main", _telemetry_module(sender))
    monkeypatch.setattr(peers, "_SETTLED", [])
    timer = threading.Timer(0.2, sender.sent.set)
    timer.start()
    try:
        assert peers.settled_openvino() is ov
        assert sender.sent.is_set()  # it returned only once the message was out
    finally:
        timer.cancel()
    sender.sent.clear()  # a second call does not wait again
    assert peers.settled_openvino() is ov


def test_settled_openvino_gives_up_after_its_limit(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino_telemetry.main", _telemetry_module(_Sender()))
    monkeypatch.setattr(peers, "_SETTLED", [])
    start = time.monotonic()
    assert peers.settled_openvino(limit=0.1) is ov
    assert time.monotonic() - start < 1  # the message never went: bounded by the limit
