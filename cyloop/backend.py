"""cyloop as an ONNX backend: the interface of ``onnx.backend.base.Backend``, as
``onnxruntime.backend`` implements it, so that ONNX's own backend test suite can drive cyloop::

    import onnx.backend.test
    import cyloop.backend
    globals().update(onnx.backend.test.BackendTest(cyloop.backend, __name__).test_cases)

or, for one model, ``cyloop.backend.run_model(model, [x, y])``. Needs the ``onnx`` extra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

try:
    import onnx
    from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict
except ImportError as e:  # pragma: no cover - the onnx extra is missing
    raise ImportError("cyloop.backend needs onnx: pip install 'cyloop[onnx]'") from e

from .errors import InputError
from .loading import load
from .model import Model

__all__ = ["CyloopBackend", "CyloopRep", "is_compatible", "prepare", "run_model", "run_node",
           "supports_device"]

# Options of `cyloop.load` a caller may pass through prepare / run_model / run_node.
_LOAD_OPTIONS = ("driver", "max_iterations", "time_limit", "memory_limit", "progress", "hoist",
                 "tune")


class CyloopRep(BackendRep):
    """A prepared model: `run` takes the inputs as a list (in the graph's input order, inputs
    with an initializer left out unless given) or a dict by name, and returns the outputs as a
    named tuple in the graph's output order; a sequence output is a list of arrays."""

    def __init__(self, model: Model):
        self.model = model

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        feeds = self._feeds(inputs)
        outputs = self.model.run(feeds)
        names = self.model.output_names
        return namedtupledict("Outputs", names)(*[outputs[name] for name in names])

    def _feeds(self, inputs) -> dict:
        if isinstance(inputs, Mapping):
            return dict(inputs)
        if isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
            inputs = [inputs]
        names = self.model.input_names
        if len(inputs) > len(names):
            every = [v.name for v in self.model.graph.inputs]
            if len(inputs) > len(every):
                raise InputError(f"{len(inputs)} inputs given; the model takes {len(every)} "
                                 f"({every})")
            names = every  # inputs with an initializer given too, in the graph's order
        return dict(zip(names, inputs))


class CyloopBackend(Backend):
    """`onnx.backend.base.Backend` for cyloop: CPU only."""

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError):
            return False

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs: Any) -> CyloopRep:
        """Load and compile `model` (a ModelProto, its bytes or a path); keyword arguments
        `cyloop.load` takes (driver, max_iterations, tune, ...) pass through, others are
        ignored, as backends do."""
        if not cls.supports_device(device):
            raise RuntimeError(f"cyloop runs on the CPU only, not on {device!r}")
        options = {k: v for k, v in kwargs.items() if k in _LOAD_OPTIONS}
        return CyloopRep(load(model, **options))

    @classmethod
    def run_model(cls, model, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs: Any, device: str = "CPU", outputs_info=None,
                 **kwargs: Any) -> tuple:
        """Run one NodeProto on `inputs` (a list in the node's input order, "" inputs skipped,
        or a dict by name), in a one-node model of ``opset_version`` (default: the newest)."""
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        else:
            feeds = dict(zip([name for name in node.input if name], inputs))
        graph_inputs = [onnx.helper.make_tensor_value_info(
            name, onnx.helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype),
            np.shape(value)) for name, value in feeds.items()]
        graph_outputs = [onnx.helper.make_empty_tensor_value_info(name)
                         for name in node.output if name]
        graph = onnx.helper.make_graph([node], f"{node.op_type}_node", graph_inputs,
                                       graph_outputs)
        version = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        opsets = [onnx.helper.make_opsetid("", version)]
        if node.domain not in ("", "ai.onnx"):
            opsets.append(onnx.helper.make_opsetid(node.domain, 1))
        model = onnx.helper.make_model(graph, opset_imports=opsets)
        return cls.prepare(model, device, **kwargs).run(feeds)


is_compatible = CyloopBackend.is_compatible
prepare = CyloopBackend.prepare
run_model = CyloopBackend.run_model
run_node = CyloopBackend.run_node
supports_device = CyloopBackend.supports_device
