"""The runtimes cyloop is checked against and compared with, set up one way everywhere.

OpenVINO's CPU plugin computes in bfloat16 on CPUs with AMX or AVX512-BF16 unless told otherwise,
so a plugin used as an oracle (tests) or a peer (``cyloop bench``, ``asv_benchmarks/``) is always
compiled here, with f32 inference precision: its results then do not depend on the CPU, and a
benchmark times the same arithmetic cyloop does.
"""

from __future__ import annotations

import sys
import time

__all__ = ["openvino_compiled", "settled_openvino"]

_SETTLED = []  # [the openvino module] once `settled_openvino` has waited in this process


def settled_openvino(limit: float = 5.0):
    """The `openvino` module, once what its import sets off is done (at most `limit` seconds).

    Unless its user opted out (or ``CI=true``), ``import openvino`` sends a telemetry event from
    a worker thread, which forks a process to send it, a few ms after the import. A fork
    while numpy's OpenBLAS is inside a multithreaded product on another thread can leave the
    product waiting for good, for a worker thread the fork shut down: a compare.py memory cell
    hung so, in OpenBLAS's ``exec_blas``. So a peer is compiled, and compare.py measures, only
    once the event is sent (or given up: the sender stops its process after 3 s). The wait reads
    the sender's count of messages in flight; should that attribute go, it is a fixed pause."""
    if _SETTLED:
        return _SETTLED[0]
    import openvino

    deadline = time.monotonic() + limit
    telemetry = sys.modules.get("openvino_telemetry.main")
    if telemetry is not None:
        instance = getattr(getattr(telemetry, "Telemetry", None),
                           "_SingletonMetaClass__single_instance", None)
        sender = getattr(instance, "sender", None)
        if hasattr(sender, "queue_size"):
            while sender.queue_size > 0 and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            time.sleep(0.25)
    _SETTLED.append(openvino)
    return openvino


def openvino_compiled(model, threads: int | None = None):
    """`model` (an ``openvino.Model`` or an IR/ONNX path) compiled for the CPU plugin in f32.

    ``threads``: the plugin's inference threads (None: its default). Needs ``openvino``.
    """
    ov = settled_openvino()
    import openvino.properties as props
    import openvino.properties.hint as hints

    config = {hints.inference_precision: ov.Type.f32}
    if threads is not None:
        config[props.inference_num_threads] = threads
    return ov.Core().compile_model(model, "CPU", config)
