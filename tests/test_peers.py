"""The peers' set-up: OpenVINO, as an oracle or a peer, computes in f32 on every CPU."""

import numpy as np
import openvino as ov
import openvino.opset8 as ops
import openvino.properties.hint as hints

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
