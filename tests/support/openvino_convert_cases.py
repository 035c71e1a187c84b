"""Convert every ONNX backend node case to OpenVINO IR with `openvino.convert_model`, for
test_openvino_sweep.py, in a process of its own:

    python -m tests.support.openvino_convert_cases OUT_DIR

writes OUT_DIR/<case>/model.xml (+ .bin) and OUT_DIR/conversions.json, ``{case: ""}`` for a case
converted and ``{case: "<the error's most telling line>"}`` for one OpenVINO cannot convert.

A separate process because after convert_model numpy's multithreaded OpenBLAS can hang in the
process that ran it (seen on this project's machines), and because OpenVINO's teardown is slow.
"""

import json
import os
import sys

_MARKERS = ("No conversion rule found", "not supported", "Not supported", "Conversion failed",
            "is not implemented", "Unsupported", "unsupported")


def telling_line(message: str) -> str:
    """The line of an OpenVINO error that says what failed (its first is a source location)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for marker in _MARKERS:
        for line in lines:
            if marker in line:
                return line
    plain = [line for line in lines if not line.startswith(("Check ", "Exception from"))]
    return (plain or lines or ["(no message)"])[0]


def tensor_io(case) -> bool:
    """Whether every input and output of the case's model is a tensor (no sequence, optional)."""
    graph = case.model.graph
    return all(v.type.WhichOneof("value") == "tensor_type"
               for v in list(graph.input) + list(graph.output))


def node_cases():
    import warnings

    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [case for case in load_model_tests(kind="node") if tensor_io(case)]


def main(out_dir: str) -> None:
    import openvino as ov

    results = {}
    for case in node_cases():
        case_dir = os.path.join(out_dir, case.name)
        os.makedirs(case_dir, exist_ok=True)
        source = os.path.join(case_dir, "model.onnx")
        with open(source, "wb") as f:
            f.write(case.model.SerializeToString())
        try:
            ov.save_model(ov.convert_model(source), os.path.join(case_dir, "model.xml"),
                          compress_to_fp16=False)
            results[case.name] = ""
        except Exception as e:  # noqa: BLE001 -- every failure is the result
            results[case.name] = telling_line(str(e) or type(e).__name__)
    with open(os.path.join(out_dir, "conversions.json"), "w") as f:
        json.dump(results, f, indent=0)


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    main(sys.argv[1])
    sys.stdout.flush()
    os._exit(0)  # skip OpenVINO's teardown (seconds, for nothing)
