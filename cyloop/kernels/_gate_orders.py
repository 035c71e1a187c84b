"""Where an LSTM's four gates lie along its gate axis, by name: each format's order, and the one
the cells arrange theirs in, instead of block numbers at each call.

An LSTM's W, R and B stack four blocks of rows, one per gate: forget (f), input (i), cell (c,
the candidate tanh makes; the kernels' arithmetic calls it g, c being the cell state) and output
(o). The formats stack them in different orders, spelled as their specifications spell them:
ONNX's LSTM "iofc", OpenVINO's LSTMCell and LSTMSequence "fico". (A GRU's z, r, h are in that
order in both.)
"""

from __future__ import annotations

from operator import itemgetter

__all__ = ["ARRANGED_LSTM", "ONNX_LSTM", "OPENVINO_LSTM", "LstmGateOrder"]

_GATES = "fico"  # the fields' order, by their letters


# A tuple with named fields, written out: collections' namedtuple compiles its methods from
# generated source, which costs a process's first recurrent load as much as the rest of this
# module (typing's NamedTuple costs its annotations' evaluation besides).
class LstmGateOrder(tuple):
    """The block each gate of an LSTM is, a permutation of 0-3: `forget`, `input`, `cell` (the
    candidate: its block goes through tanh, the others through a sigmoid) and `output`.
    `accel._gate_passes` reads the fields in this order, as a tuple."""

    __slots__ = ()
    _fields = ("forget", "input", "cell", "output")

    def __new__(cls, forget: int, input: int, cell: int, output: int):
        return tuple.__new__(cls, (forget, input, cell, output))

    forget = property(itemgetter(0), doc="The forget gate's block.")
    input = property(itemgetter(1), doc="The input gate's block.")
    cell = property(itemgetter(2), doc="The candidate's block.")
    output = property(itemgetter(3), doc="The output gate's block.")

    def __getnewargs__(self) -> tuple[int, int, int, int]:  # (pickling and copying)
        return tuple(self)

    def __repr__(self) -> str:
        return (f"LstmGateOrder(forget={self[0]!r}, input={self[1]!r}, cell={self[2]!r}, "
                f"output={self[3]!r})")

    @classmethod
    def spelled(cls, letters: str) -> LstmGateOrder:
        """The order a format spells block by block with the gates' letters ("iofc": block 0
        is i, ...)."""
        if sorted(letters) != sorted(_GATES):
            raise ValueError(f"an LSTM's gate order names each of {_GATES!r} once, not "
                             f"{letters!r}")
        return cls(*(letters.index(gate) for gate in _GATES))

    def taken_by(self, order: LstmGateOrder) -> list[int]:
        """For each block of `order`, the block of this order holding its gate: the index
        along the gate axis that lays out blocks in this order as `order` has them."""
        taken = [0] * len(self)
        for at, block in zip(order, self):
            taken[at] = block
        return taken


ONNX_LSTM = LstmGateOrder.spelled("iofc")  # ONNX's LSTM: W, R and B
OPENVINO_LSTM = LstmGateOrder.spelled("fico")  # OpenVINO's LSTMCell and LSTMSequence
# The cells' arranged gates (kernels/recurrent/cells.py): the three sigmoid blocks first, as one
# block, and the tanh block last.
ARRANGED_LSTM = LstmGateOrder.spelled("fioc")
