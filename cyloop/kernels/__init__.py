"""Pure-Python numpy kernels, one registry (`registry.py`), grouped by format, family and opset.

A family's module registers its kernels as it imports, which the registry makes it do the first
time one of its ops is looked up (../data/kernel_index.txt lists which module registers which
op); `build(node, opsets)` resolves a node's kernel.
"""

from ._ir_attrs import as_bool
from ._shapes import flat_int_list
from .registry import (
    Kernel,
    KernelDef,
    build,
    definition_of,
    kernel,
    lookup,
    node_version,
    registered,
    type_keeping,
)

__all__ = ["Kernel", "KernelDef", "LstmGateOrder", "as_bool", "build", "definition_of",
           "flat_int_list", "kernel", "lookup", "lstm_gate_affine", "node_version", "registered",
           "sigmoid", "sigmoid_cap", "type_keeping"]

# What the native paths outside this package (accel/fused.py) use of the shared maths and the
# LSTM gate orders, by name -> its module here. Imported on first use, not with the package:
# `import cyloop` loads neither module (tests/test_import.py).
_LATER = {"sigmoid": "_math", "sigmoid_cap": "_math", "lstm_gate_affine": "_math",
          "LstmGateOrder": "_gate_orders"}


def __getattr__(name):
    module = _LATER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # (found directly from now on)
    return value
