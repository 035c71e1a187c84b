"""What compiling a loop records of its hoisting and fusion, for the plan (`plan.py`, which
reads them in the model's terms): records made while compiling, so light enough to load with
the engine, where the plan itself loads when it is asked for."""

from __future__ import annotations

from .._records import FrozenRecord, set_field
from ..ir import NodeRef, and_list

__all__ = ["HOISTED_HOWS", "NOT_HOISTED", "Fused", "HoistedWork", "NotHoisted"]


class Fused(FrozenRecord):
    """Model nodes run as one step of the engine's: `kind`, the engine's op (``ProductPlusTanh``,
    ``LSTMStep``, ``GRUStep``, ``LSTMGates``, ``GRUGates``, ``ProductPlus``, ``AtLeast``, or
    ``Identity`` for a Cast that changes nothing: `already` is then its input's type); `makes`,
    the values it hands out; `replaces`, the model's nodes it runs, in the body's order."""

    _fields = ("kind", "makes", "replaces", "already")

    def __init__(self, kind: str, makes: tuple[str, ...], replaces: tuple[NodeRef, ...],
                 already: str = ""):
        set_field(self, "kind", kind)
        set_field(self, "makes", makes)
        set_field(self, "replaces", replaces)
        set_field(self, "already", already)

    @classmethod
    def of(cls, node) -> Fused:
        return cls(node.op_type, tuple(node.outputs), tuple(node.attrs["fused_from"]),
                   node.attrs.get("already", ""))

    @property
    def ops(self) -> list[str]:
        """The ops of the nodes it replaces."""
        return [ref.op for ref in self.replaces]


# How hoisted work runs (`HoistedWork.how`).
HOISTED_HOWS = ("rows", "bias joined", "input projection", "gather", "packing", "once", "shape",
                "shape entry")


class NotHoisted(FrozenRecord):
    """A body node that reads no state of its loop, yet runs an iteration at a time: `nodes`
    (the model's) and the `reason` (a key of `NOT_HOISTED`, which says it in words: `why`)."""

    _fields = ("nodes", "reason")

    def __init__(self, nodes: tuple[NodeRef, ...], reason: str):
        set_field(self, "nodes", nodes)
        set_field(self, "reason", reason)

    @property
    def shown(self) -> str:
        return and_list(ref.shown for ref in self.nodes)

    @property
    def why(self) -> str:
        return NOT_HOISTED[self.reason]


# Why a node that reads no state of its loop stays in the body (`NotHoisted.reason`).
NOT_HOISTED = {
    "subgraph": "it runs a subgraph",
    "body output": "it makes a body output, which the loop keeps an iteration at a time",
    "stateful": "its op may keep state between calls",
    "not pure": "its op is not known to be pure",
    "cell operands": "its weights or bias are not the same at every iteration",
    "no rows form": "its op has no form that runs on a chunk of rows",
    "attributes": "its attributes have no form that runs on a chunk of rows",
    "no axes": "its axes are not given, so it would reduce the chunk's row axis too",
    "axis": "its axis is not a constant",
    "operand place": "its form on rows takes the changing operand in another place",
}


class HoistedWork(FrozenRecord):
    """Work moved out of a loop body (hoist.py), run before the iterations that read it.

    `how`: "rows" (a node run on a chunk of rows at a time), "bias joined" (a product and the
    Add of a static bias to it, as one product: the bias a row of the weight), "input
    projection" (a recurrent cell's ``x W + b``: the cell's recurrence stays in the body),
    "gather" (row i of a static value, a view), "packing" (a strided sliced input copied into
    contiguous rows), "once" (a node whose inputs do not change, once a run), "shape" (a
    Shape node whose input's shape does not change, once a run: `why` says why: "every row",
    "initial value" or "follows"), "shape entry" (the shape such a Shape reads, worked out once
    a run). `nodes`: the model's nodes it runs; `makes`: the values it makes; `op`: the op the
    engine runs (the node's own, or the engine's in its place); `fused`: the fusion the hoisted
    node is, if any (a Cast made an Identity); `value`: the value it is about, for "packing"
    (the sliced input packed), "shape" and "shape entry" (the value whose shape is read)."""

    _fields = ("how", "nodes", "makes", "op", "why", "fused", "value")

    def __init__(self, how: str, nodes: tuple[NodeRef, ...] = (), makes: tuple[str, ...] = (),
                 op: str = "", why: str = "", fused: Fused | None = None, value: str = ""):
        set_field(self, "how", how)
        set_field(self, "nodes", nodes)
        set_field(self, "makes", makes)
        set_field(self, "op", op)
        set_field(self, "why", why)
        set_field(self, "fused", fused)
        set_field(self, "value", value)

    @property
    def shown(self) -> str:
        """The work in the model's words."""
        if self.how == "bias joined":
            return f"{self.nodes[0].shown} and {self.nodes[-1].shown} (the bias joined to the " \
                "product)"
        if self.how == "input projection":
            return f"the input projection of {self.nodes[0].shown}"
        if self.how == "packing":
            return f"{self.value!r} packed into contiguous rows"
        if self.how == "shape entry":
            return f"the shape of {self.value!r}"
        if self.fused is not None and self.fused.already:
            return f"{and_list(r.shown for r in self.nodes)} (its input is " \
                f"{self.fused.already} already: nothing to run)"
        if self.fused is not None:
            return f"{and_list(r.shown for r in self.nodes)} (as one step)"
        return and_list(r.shown for r in self.nodes)
