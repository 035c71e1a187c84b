"""Tests of the recurrent cells and layers (cyloop.kernels.recurrent)."""
