"""The recurrent cells both formats use: a cell's step (`cells`: LSTM, GRU, RNN, its input
projection hoisted) and a layer's run over a sequence (`sequences`). OpenVINO's cell and
sequence layers are registered here; ONNX's LSTM, GRU and RNN (onnx/rnn.py) run on the same
layer runner."""

from . import cells, sequences  # noqa: F401  (registration happens on import)
