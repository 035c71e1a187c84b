"""The fallback for standard ONNX ops cyloop has no kernel for: onnx.reference's kernel, built once
per node (the ONNX frontend rewrites such nodes to this op and lists them in a warning)."""

from ...sequence import TensorSequence
from ..registry import kernel

FALLBACK_DOMAIN = "cyloop.onnx_reference"


def _to_reference(value):
    return list(value) if isinstance(value, TensorSequence) else value


def _from_reference(value):
    return TensorSequence(value) if isinstance(value, list) else value


@kernel("OnnxReference", domain=FALLBACK_DOMAIN, multi=True)
def onnx_reference(attrs, n_outputs):
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.ops import load_op

    proto = attrs["node"]
    domain = "" if proto.domain == "ai.onnx" else proto.domain
    op_class = load_op(domain, proto.op_type, attrs["version"])
    run_params = {"log": lambda *args: None, "opsets": attrs["opsets"], "verbose": 0,
                  "new_ops": None, "existing_functions": {}, "evaluator_cls": ReferenceEvaluator}
    op = op_class(proto, run_params)

    def run(*inputs):
        outputs = op.run(*(_to_reference(x) for x in inputs))
        return tuple(_from_reference(x) for x in outputs)

    return run
