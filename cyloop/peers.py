"""The runtimes cyloop is checked against and compared with, set up one way everywhere.

OpenVINO's CPU plugin computes in bfloat16 on CPUs with AMX or AVX512-BF16 unless told otherwise,
so a plugin used as an oracle (tests) or a peer (``cyloop bench``, ``asv_benchmarks/``) is always
compiled here, with f32 inference precision: its results then do not depend on the CPU, and a
benchmark times the same arithmetic cyloop does.
"""

from __future__ import annotations

__all__ = ["openvino_compiled"]


def openvino_compiled(model, threads: int | None = None):
    """`model` (an ``openvino.Model`` or an IR/ONNX path) compiled for the CPU plugin in f32.

    ``threads``: the plugin's inference threads (None: its default). Needs ``openvino``.
    """
    import openvino as ov
    import openvino.properties as props
    import openvino.properties.hint as hints

    config = {hints.inference_precision: ov.Type.f32}
    if threads is not None:
        config[props.inference_num_threads] = threads
    return ov.Core().compile_model(model, "CPU", config)
