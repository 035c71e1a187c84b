"""The fallback for ONNX ops cyloop has no kernel for (and whose schema has no function body the
frontend could expand): onnx.reference's kernel, built once per node (the ONNX frontend rewrites
such nodes to this op and lists them in a warning). The reference has kernels for the default
domain, ai.onnx.ml and the preview domains."""

from ...errors import ModelError
from ...sequence import TensorSequence
from ..registry import kernel

FALLBACK_DOMAIN = "cyloop.onnx_reference"


def _to_reference(value):
    return list(value) if isinstance(value, TensorSequence) else value


def _from_reference(value):
    return TensorSequence(value) if isinstance(value, list) else value


def reference_op_class(domain: str, op_type: str, version: int):
    """onnx.reference's class for an op, or an exception saying why there is none."""
    if domain in ("", "ai.onnx"):
        from onnx.reference.ops import load_op
    elif domain == "ai.onnx.ml":
        from onnx.reference.ops.aionnxml import load_op
    elif domain == "ai.onnx.preview":
        from onnx.reference.ops.aionnx_preview import load_op
    elif domain == "ai.onnx.preview.training":
        from onnx.reference.ops.aionnx_preview_training import load_op
    else:
        raise NotImplementedError(f"onnx.reference has no kernels in domain {domain!r}")
    return load_op("" if domain == "ai.onnx" else domain, op_type, version)


@kernel("OnnxReference", domain=FALLBACK_DOMAIN, multi=True)
def onnx_reference(attrs, n_outputs):
    from onnx.reference import ReferenceEvaluator

    proto = attrs["node"]
    op_class = reference_op_class(proto.domain, proto.op_type, attrs["version"])
    run_params = {"log": lambda *args: None, "opsets": attrs["opsets"], "verbose": 0,
                  "new_ops": None, "existing_functions": {}, "evaluator_cls": ReferenceEvaluator}
    try:
        op = op_class(proto, run_params)
    except Exception as e:  # onnx.reference raises several types for bad nodes
        name = proto.name or (proto.output[0] if proto.output else "?")
        raise ModelError(f"{proto.op_type} node {name!r}: onnx.reference cannot build its "
                         f"kernel: {type(e).__name__}: {e}") from e

    def run(*inputs):
        outputs = op.run(*(_to_reference(x) for x in inputs))
        # A reference kernel may compute optional outputs the node does not declare (Attention
        # returns its intermediate scores too): only the node's own are its results.
        return tuple(_from_reference(x) for x in outputs[:n_outputs])

    return run
