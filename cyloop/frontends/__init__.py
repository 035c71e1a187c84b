"""Model formats lowered to the cyloop IR: ONNX (`onnx.py`)."""
