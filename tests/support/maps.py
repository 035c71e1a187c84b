"""Models on ONNX maps, built with onnx.helper, for the tests of ZipMap, CastMap, DictVectorizer
and of map feeds and outputs; and the comparison of cyloop's map outputs with onnxruntime's."""

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

__all__ = ["ELEMENT", "assert_same_maps", "classifier_with_zipmap", "map_in_model",
           "map_type", "ort_run", "zipmap_model"]

ELEMENT = {"int64": TensorProto.INT64, "string": TensorProto.STRING,
           "float": TensorProto.FLOAT, "double": TensorProto.DOUBLE,
           "int32": TensorProto.INT32, "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL}


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "maps", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    return model


def map_type(key: str, value: str, sequence_value: bool = False):
    """The TypeProto of ``map(key, value)`` (value: a scalar tensor type, or a sequence)."""
    inner = helper.make_tensor_type_proto(ELEMENT[value], None)
    if sequence_value:
        inner = helper.make_sequence_type_proto(inner)
    return helper.make_map_type_proto(ELEMENT[key], inner)


def zipmap_model(labels, rows_shape=(None, None)):
    """X (float32 of `rows_shape`) -> ZipMap with `labels` (ints or strs) -> Z."""
    key = "string" if isinstance(labels[0], str) else "int64"
    attr = "classlabels_strings" if key == "string" else "classlabels_int64s"
    node = helper.make_node("ZipMap", ["X"], ["Z"], domain="ai.onnx.ml", **{attr: labels})
    z = helper.make_value_info("Z", helper.make_sequence_type_proto(map_type(key, "float")))
    return _model([node], [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                         list(rows_shape))], [z])


def map_in_model(op, attrs, key, value, out_element, name="X"):
    """A map input ``map(key, value)`` -> `op` (CastMap, DictVectorizer) -> a tensor Y."""
    node = helper.make_node(op, [name], ["Y"], domain="ai.onnx.ml", **attrs)
    return _model([node], [helper.make_value_info(name, map_type(key, value))],
                  [helper.make_tensor_value_info("Y", ELEMENT[out_element], None)])


def classifier_with_zipmap(features=4, labels=(0, 1, 2), seed=0):
    """What skl2onnx exports for a linear classifier with its default options: LinearClassifier
    (label and scores) -> Cast of the scores to float -> ZipMap of the class labels."""
    rng = np.random.default_rng(seed)
    string = isinstance(labels[0], str)
    attrs = {"coefficients": rng.standard_normal(len(labels) * features).tolist(),
             "intercepts": rng.standard_normal(len(labels)).tolist(),
             "post_transform": "SOFTMAX", "multi_class": 1,
             ("classlabels_strings" if string else "classlabels_ints"): list(labels)}
    zip_attr = "classlabels_strings" if string else "classlabels_int64s"
    nodes = [helper.make_node("LinearClassifier", ["X"], ["label", "scores"],
                              domain="ai.onnx.ml", **attrs),
             helper.make_node("Cast", ["scores"], ["probabilities"], to=TensorProto.FLOAT),
             helper.make_node("ZipMap", ["probabilities"], ["output_probability"],
                              domain="ai.onnx.ml", **{zip_attr: list(labels)})]
    key = "string" if string else "int64"
    label_type = TensorProto.STRING if string else TensorProto.INT64
    return _model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                        [None, features])],
                  [helper.make_tensor_value_info("label", label_type, [None]),
                   helper.make_value_info("output_probability", helper.make_sequence_type_proto(
                       map_type(key, "float")))])


def ort_run(model, feeds):
    """onnxruntime's outputs by name, or the exception it raised."""
    try:
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(None, feeds)))
    except Exception as error:  # noqa: BLE001 - onnxruntime raises its own types
        return error


def assert_same_maps(got, expected, rtol=0.0):
    """Maps (dicts) or sequences of maps (lists of dicts) equal to onnxruntime's: the same
    container types, the same keys in the same order, keys and values of the same Python types,
    values equal (to `rtol`)."""
    assert type(got) is type(expected), (type(got), type(expected))
    if isinstance(expected, list):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same_maps(g, e, rtol)
        return
    assert list(got) == list(expected)
    assert [type(k) for k in got] == [type(k) for k in expected]
    assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]
    if any(isinstance(v, str) for v in expected.values()):
        assert list(got.values()) == list(expected.values())
    else:
        np.testing.assert_allclose(list(got.values()), list(expected.values()), rtol=rtol)
