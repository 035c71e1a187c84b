"""Kernels for OpenVINO IR layers (domain ``openvino``), registered by the opset version each
behaviour appeared in, a module a family, which the registry imports the first time one of its
ops is looked up. IR attributes arrive as strings; `../_ir_attrs.py` parses them. The cell and
sequence layers are in ../recurrent/, which both formats share."""
