"""Tests of cyloop.accel: the native paths, against numpy."""
