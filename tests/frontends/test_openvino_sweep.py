"""OpenVINO opset coverage, measured: every ONNX backend node case (tensor inputs and outputs),
converted to IR by `openvino.convert_model` and run by cyloop against the case's expected outputs
with the case's tolerances.

Each case ends one of five ways, and only these:
- it passes;
- OpenVINO cannot convert it: xfail, the reason OpenVINO's own error (listed in the run's
  summary, not hidden);
- its IR holds a layer type in MISSING_LAYERS, cyloop's explicit list of the OpenVINO layers it
  has no kernel for yet: xfail naming the layer (`test_missing_layers_are_still_missing` keeps the
  list from going stale);
- it is in KNOWN_FAILURES, each with its reason: a strict xfail (a fixed case fails the run until
  it is taken off the list);
- its outputs are random numbers no generator can reproduce (RANDOM_OUTPUTS, each with its
  reason): it runs and its outputs' shapes and dtypes are checked, then it xfails, its values
  not compared.
"""

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import cyloop
from cyloop import kernels
from cyloop.ir import OPENVINO_DOMAIN

from ..support.openvino_convert_cases import node_cases

# OpenVINO layer types (and the opset versions convert_model writes) cyloop has no kernel for,
# with how many node cases each one stops (onnx 1.23, OpenVINO 2026.4).
MISSING_LAYERS = {}

# Cases that convert, need no missing layer, and still fail (case-name patterns), each with why.
KNOWN_FAILURES = {
    # The IR is not the ONNX model's meaning; OpenVINO's own plugin gives cyloop's answer:
    r"^test_cast(like)?_(e8m0_)?FLOAT(16)?_to_FLOAT8E(4M3FN|5M2|8M0)(_expanded)?$":
        "the IR's Convert to f8 does not saturate / round as ONNX's Cast does (OpenVINO agrees "
        "with cyloop)",
    r"^test_bitshift_right_int(8|32)_(shift_ge_width|negative_shift)$":
        "the IR spells a signed BitShift as Divide by Power(2, shift), which is not a shift for "
        "negative values or shifts past the width",
    r"^test_(gru|lstm|simple_rnn)_batchwise$":
        "the IR of a batch-first (layout=1) RNN gives the wrong Y_h shape and values (OpenVINO's "
        "own answer is as wrong)",
    r"^test_lstm_with_peepholes$":
        "the IR drops the peephole weights (OpenVINO's own answer is as wrong)",
    r"^test_attention_(4d_with_past_and_present_qk_matmul_bias_[34]d_mask_causal"
    r"|local_window_(ext_cache_rank(2_mask|3_head_mask|4_batch_mask)|gqa_rank4_mask))$":
        "the IR's decomposition of Attention with a causal mask over a past KV cache, or with a "
        "local window, is not ONNX's Attention (OpenVINO's own answer is cyloop's, to 2e-7)",
    r"^test_attention_(3d_)?local_window(_rank1_boolean_mask|_with_past)?$"
    r"|^test_attention_bidirectional_window$":
        "the IR's ScaledDotProductAttention attends past ONNX's left/right window: the converter "
        "drops left_window_size and right_window_size (OpenVINO's own answer is cyloop's)",
    r"^test_attention_(4d_causal|4d_attn_mask_causal|3d_causal)_bf16$":
        "the expected bf16 output is up to one bf16 ulp (2^-8) from the attention computed in "
        "float32 and rounded once, past the case's rtol of 1e-3 (OpenVINO's own answer misses "
        "it as often, by the same ulp)",
    r"^test_attention_4d_(causal_)?padded_kv_bf16$":
        "the IR computes the attention in bf16 op by op, each result rounded to bf16; the "
        "expected output is up to 3 bf16 ulps away, past the case's rtol of 1e-3 (OpenVINO's "
        "own answer is off by 1.4)",
    r"^test_maxpool_2d_ceil_output_size_reduce_by_one$":
        "the IR's MaxPool says rounding_type=ceil, which keeps a last window starting past the "
        "input (a [1, 1, 2, 2] result); ONNX's ceil_mode is ceil_torch ([1, 1, 1, 1]); "
        "OpenVINO's own answer has cyloop's shape",
    r"^test_spacetodepth_crd_mode_example$":
        "the IR's SpaceToDepth says mode=blocks_first: the converter drops ONNX's mode=CRD "
        "(OpenVINO's own answer is cyloop's)",
    r"^test_dynamicquantizelinear(_expanded)?$":
        "the IR quantizes x * 255 / (max - min), ONNX x / ((max - min) / 255): one value rounds "
        "to the other side of a half (OpenVINO's own answer is cyloop's)",
    r"^test_quantizelinear_uint16$":
        "the IR's FakeQuantize counts its 65536 levels from input_low = -zero_point * scale, so "
        "3 / 2 lands on 32768.5 and rounds half to even to 32768 where ONNX rounds 1.5 to 2 "
        "(32769) (OpenVINO's own answer is cyloop's)",
    r"^test_resize_downsample_scales_(linear|cubic)_align_corners$":
        "the IR's Interpolate divides by the rounded output length less 1 for align_corners, "
        "ONNX by scale * length less 1, unrounded (OpenVINO's own answer is cyloop's)",
    r"^test_resize_(up|down)sample_scales_cubic_A_n0p5_exclude_outside$":
        "the IR's Interpolate has no exclude_outside: the converter drops it (OpenVINO's own "
        "answer is cyloop's)",
    r"^test_resize_downsample_(scales|sizes)_(linear|cubic)_antialias$":
        "the IR's Interpolate says mode=linear_onnx or cubic with antialias=true, which those "
        "modes ignore (OpenVINO's own answer is cyloop's)",
    r"^test_resize_(up|down)sample_sizes_nearest_not_(larger|smaller)$":
        "the IR's Interpolate resizes to the sizes as given: the converter drops "
        "keep_aspect_ratio_policy (OpenVINO's own answer has cyloop's shape and values)",
    r"^test_dft_axis$":
        "the IR's DFT transforms axis 1 whatever the axis input says (2 here): the converter "
        "drops the input (OpenVINO's own answer is cyloop's)",
    r"^test_dft_(rfft|irfft)(_opset19)?$":
        "the IR's RDFT takes the real signal's trailing axis of 1 as one more signal axis "
        "([1, 6, 10, 1, 2] for ONNX's [1, 6, 10, 2]) and its IRDFT returns no such axis "
        "([1, 10, 10] for [1, 10, 10, 1]); the values are ONNX's (OpenVINO's own answer has "
        "cyloop's shapes)",
    r"^test_roialign_mode_max$":
        "ONNX's RoiAlign max mode takes the largest of each sample's four weighted corners "
        "(w * v, not the interpolated value); the IR's ROIAlign mode=max, by OpenVINO's spec, "
        "the largest interpolated sample (OpenVINO's own answer is cyloop's, to 5e-7)",
    # The IR is right by OpenVINO's spec and OpenVINO's plugin departs from it:
    r"^test_div_int32_trunc$":
        "the IR's Divide says m_pythondiv=true (floor), ONNX truncates; cyloop follows the IR's "
        "spec, OpenVINO's CPU plugin truncates whatever the attribute says",
}

# Cases whose expected outputs are random draws (case-name patterns), each with why.
RANDOM_OUTPUTS = {
    r"^test_bernoulli_(double|seed)_expanded$":
        "the IR's RandomUniform has both seeds 0, which asks for new numbers each time (cyloop "
        "and OpenVINO each draw a seed); the expected values are numpy's draws",
}

_STRUCTURAL = {"Parameter", "Const", "Result", "TensorIterator", "Loop", "If"}
_CASES = {case.name: case for case in node_cases()}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Every case's IR, converted in a child process (see
    tests/support/openvino_convert_cases.py)."""
    out = tmp_path_factory.mktemp("openvino_ir")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", "tests.support.openvino_convert_cases", str(out)],
                   check=True, env=env, timeout=1200,
                   cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    with open(out / "conversions.json") as f:
        return out, json.load(f)


def _missing_layers(xml_path):
    missing = set()
    for layer in ET.parse(xml_path).getroot().iter("layer"):
        kind, version = layer.get("type"), layer.get("version", "opset1")
        if kind in _STRUCTURAL:
            continue
        number = int(version.removeprefix("opset")) if version.startswith("opset") else 1
        try:
            kernels.lookup(OPENVINO_DOMAIN, kind, number)
        except cyloop.UnsupportedOpError:
            missing.add(f"{kind}-{number}")
    return missing


def _array(value):
    """A case's input or output as numpy (the cases keep some as TensorProto: float8, int4...)."""
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else \
        np.asarray(value)


def _feeds(model, case, inputs):
    """The case's inputs by IR input name where the names match, else in order; a converter may
    drop an input it only read the type of (CastLike's `like`)."""
    names = [value.name for value in case.model.graph.input]
    ir_names = model.input_names
    if set(ir_names) <= set(names):
        pairs = [(name, value) for name, value in zip(names, inputs) if name in ir_names]
    else:
        pairs = list(zip(ir_names, inputs))
    declared = {value.name: value.dtype for value in model.graph.inputs}
    return {name: np.asarray(value).astype(declared[name] or np.asarray(value).dtype,
                                           copy=False) for name, value in pairs}


def _outputs(model, case, results):
    names = [value.name for value in case.model.graph.output]
    if set(names) <= set(results):
        return [results[name] for name in names]
    return [results[name] for name in model.output_names]


@pytest.mark.parametrize("name", list(_CASES))
def test_node_case_through_openvino_ir(name, converted, request):
    out, conversions = converted
    if conversions[name]:
        pytest.xfail(f"OpenVINO cannot convert it: {conversions[name]}")
    xml_path = out / name / "model.xml"
    missing = _missing_layers(xml_path)
    if missing:
        unlisted = sorted(missing - set(MISSING_LAYERS))
        assert not unlisted, f"layers neither supported nor in MISSING_LAYERS: {unlisted}"
        pytest.xfail(f"cyloop has no kernel for {', '.join(sorted(missing))}")
    known = [reason for pattern, reason in KNOWN_FAILURES.items() if re.search(pattern, name)]
    if known:  # run it all the same: a fixed case fails the run until it comes off the list
        request.applymarker(pytest.mark.xfail(reason=known[0], strict=True))
    random = [reason for pattern, reason in RANDOM_OUTPUTS.items() if re.search(pattern, name)]
    case = _CASES[name]
    model = cyloop.load(xml_path)
    for inputs, expected in case.data_sets:
        inputs, expected = [_array(v) for v in inputs], [_array(v) for v in expected]
        got = _outputs(model, case, model.run(_feeds(model, case, inputs)))
        assert len(got) == len(expected)
        for value, want in zip(got, expected):
            assert value.shape == want.shape
            assert value.dtype == want.dtype
            if random:
                continue
            if want.dtype.kind in "biuO":
                np.testing.assert_array_equal(value, want)
            else:
                np.testing.assert_allclose(value.astype(np.float64), want.astype(np.float64),
                                           rtol=case.rtol, atol=case.atol)
    if random:
        pytest.xfail(f"random outputs, their shapes and dtypes checked: {random[0]}")


def test_missing_layers_are_still_missing():
    """A layer given a kernel comes off MISSING_LAYERS (its cases then run for real)."""
    supported = []
    for entry in MISSING_LAYERS:
        kind, number = entry.rsplit("-", 1)
        try:
            kernels.lookup(OPENVINO_DOMAIN, kind, int(number))
            supported.append(entry)
        except cyloop.UnsupportedOpError:
            pass
    assert not supported, f"cyloop has kernels for these now: take them off the list: {supported}"
