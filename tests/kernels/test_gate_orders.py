"""An LSTM's gate orders by name (kernels/_gate_orders.py): each as its format spells it, and the
re-layout from one to another that the kernels make of weights."""

import itertools

import numpy as np
import pytest

from cyloop.kernels._gate_orders import ARRANGED_LSTM, ONNX_LSTM, OPENVINO_LSTM, LstmGateOrder
from cyloop.kernels.onnx import rnn

_SPELLED = {"ONNX": (ONNX_LSTM, "iofc"), "OpenVINO": (OPENVINO_LSTM, "fico"),
            "arranged": (ARRANGED_LSTM, "fioc")}
_FIELD_LETTERS = dict(zip(LstmGateOrder._fields, "fico"))


@pytest.mark.parametrize("name", list(_SPELLED))
def test_each_order_puts_each_gate_in_the_block_its_format_spells(name):
    order, letters = _SPELLED[name]
    for field, letter in _FIELD_LETTERS.items():
        assert letters[getattr(order, field)] == letter, field
    assert sorted(order) == list(range(len(letters)))


def test_an_order_is_the_tuple_of_its_blocks_and_pickles_as_itself():
    """(`accel._gate_passes` reads it as a tuple; a pickle of it, the cache's, is one again)"""
    import pickle

    order = LstmGateOrder(2, 0, 3, 1)
    assert order == ONNX_LSTM == (2, 0, 3, 1) and hash(order) == hash((2, 0, 3, 1))
    assert (order.forget, order.input, order.cell, order.output) == (2, 0, 3, 1)
    again = pickle.loads(pickle.dumps(order, protocol=5))
    assert type(again) is LstmGateOrder and again == order
    assert repr(order) == "LstmGateOrder(forget=2, input=0, cell=3, output=1)"


def test_the_arranged_order_has_the_sigmoid_gates_first():
    """(the cells halve the sigmoid blocks' rows as one run: kernels/recurrent/cells.py)"""
    assert ARRANGED_LSTM.cell == max(ARRANGED_LSTM)


_EVERY_SPELLING = ["".join(p) for p in itertools.permutations("fico")]


@pytest.mark.parametrize("source,target",
                         list(itertools.product(_EVERY_SPELLING, ["iofc", "fico", "fioc", "ocif"])))
def test_taken_by_lays_out_one_order_s_blocks_as_another_has_them(source, target):
    taken = LstmGateOrder.spelled(source).taken_by(LstmGateOrder.spelled(target))
    assert [source[k] for k in taken] == list(target)


@pytest.mark.parametrize("letters", ["fic", "ficoo", "fixo", "ffio"])
def test_a_spelling_must_name_each_gate_once(letters):
    with pytest.raises(ValueError, match="names each of 'fico' once"):
        LstmGateOrder.spelled(letters)


def test_onnx_weights_are_laid_out_in_openvino_s_order():
    """ONNX's LSTM W [D, 4H, I] (i, o, f, c) as the OpenVINO layer runner takes it (f, i, c, o)."""
    hidden, rows = 2, []
    for gate in "iofc":
        rows.append(np.full((hidden, 3), "iofc".index(gate)))
    w = np.concatenate(rows)[None]
    reordered = rnn._gates_reordered(w)[0]
    blocks = [int(reordered[k * hidden, 0]) for k in range(4)]
    assert ["iofc"[b] for b in blocks] == list("fico")
