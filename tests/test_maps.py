"""Maps as a user meets them (cyloop/maps.py): map and sequence-of-map feeds, their checks and
their outputs against onnxruntime's, under both drivers; the ONNX reader's map types; maps
refused in loops and branches; `cyloop info` and `cyloop run` on a model with maps."""

import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

import cyloop
from tests.support.maps import (
    assert_same_maps,
    classifier_with_zipmap,
    map_in_model,
    map_type,
    ort_run,
    zipmap_model,
)

DRIVERS = ["cython", "python"]


def _passthrough(type_proto):
    """A model whose output is its input M, of `type_proto`."""
    graph = helper.make_graph([], "g", [helper.make_value_info("M", type_proto)],
                              [helper.make_value_info("M", type_proto)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _castmap(driver="cython"):
    model = map_in_model("CastMap", {"cast_to": "TO_FLOAT"}, "int64", "float", "float")
    return cyloop.load(model.SerializeToString(), driver=driver), model


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("feed", [{3: 2.0, 1: -1.5}, {np.int64(4): np.float32(0.1)},
                                  {2: 7, 0: np.float64(0.2)}, {1: np.array(2.5, np.float32)}],
                         ids=["python", "numpy scalars", "int and double", "0-d array"])
def test_a_map_feed_comes_back_as_onnxruntime_gives_it(feed, driver):
    model = _passthrough(map_type("int64", "float"))
    got = cyloop.load(model, driver=driver).run({"M": feed})["M"]
    assert_same_maps(got, ort_run(model, {"M": feed})["M"])
    assert got is not feed


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_sequence_of_maps_feed_comes_back_as_a_list_of_dicts(driver):
    feed = [{"b": 1.5, "a": 2.0}, {}, {"c": np.float32(0.25)}]
    model = _passthrough(helper.make_sequence_type_proto(map_type("string", "float")))
    got = cyloop.load(model, driver=driver).run({"M": feed})["M"]
    # (onnxruntime's Python API takes no sequence of maps: its own maps' order is by key)
    assert_same_maps(got, [dict(sorted(m.items())) for m in
                           [{"b": 1.5, "a": 2.0}, {}, {"c": 0.25}]])


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_run_never_changes_the_fed_dict_and_a_later_change_reaches_no_run(driver):
    loaded, model = _castmap(driver)
    feed = {2: 1.0, 0: 3.0}
    kept = dict(feed)
    first = loaded.run({"X": feed})["Y"]
    assert feed == kept and list(feed) == list(kept)
    feed[1] = 5.0
    np.testing.assert_array_equal(loaded.run({"X": feed})["Y"], ort_run(model, {"X": feed})["Y"])
    assert first.shape == (1, 2)


@pytest.mark.parametrize("driver", DRIVERS)
def test_zipmap_outputs_are_new_each_run(driver):
    loaded = cyloop.load(zipmap_model([0, 1]), driver=driver)
    x = np.ones((2, 2), np.float32)
    first = loaded.run({"X": x})["Z"]
    first[0][0] = 99.0
    assert loaded.run({"X": x})["Z"][0][0] == 1.0


@pytest.mark.parametrize("feed, message", [
    ([1.0], r"input 'X': expected a map \(a dict, map\(int64, float\)\), got list"),
    ({1.0: 2.0}, r"input 'X': a key of a map\(int64, float\) must be an integer, got float 1.0"),
    ({True: 2.0}, r"a key of a map\(int64, float\) must be an integer, got bool True"),
    ({"a": 2.0}, r"a key of a map\(int64, float\) must be an integer, got str 'a'"),
    ({2**63: 2.0}, r"input 'X': the key 9223372036854775808 does not fit in int64"),
    ({1: "2"}, (r"the value of key 1 must be a float scalar \(the map is map\(int64, float\)\), "
               r"got str '2'")),
    ({1: None}, r"the value of key 1 must be a float scalar .* got NoneType None"),
    ({1: np.ones(2, np.float32)}, (r"the value of key 1 must be a float scalar .* got an array "
                                  r"of shape \[2\]")),
    ({1: 1.0, np.int64(1): 2.0}, None),  # (one key to Python: the later value)
])
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_wrong_map_feed_is_an_input_error_naming_the_input(feed, message, driver):
    loaded, model = _castmap(driver)
    if message is None:
        np.testing.assert_array_equal(loaded.run({"X": feed})["Y"],
                                      ort_run(model, {"X": feed})["Y"])
        return
    with pytest.raises(cyloop.InputError, match=message):
        loaded.run({"X": feed})


@pytest.mark.parametrize("key, value, feed, message", [
    ("string", "float", {1: 1.0}, r"a key of a map\(string, float\) must be a str, got int 1"),
    ("int64", "string", {1: 2}, (r"the value of key 1 must be a str \(the map is "
                                r"map\(int64, string\)\), got int 2")),
    ("string", "int64", {"a": 2.5}, r"the value of key 'a' must be a int64 scalar"),
    ("string", "int64", {"a": 2**64}, r"the value 18446744073709551616 of key 'a' does not fit"),
])
def test_wrong_keys_and_values_of_other_map_types(key, value, feed, message):
    attrs = {"string_vocabulary": ["a"]} if key == "string" else {"int64_vocabulary": [1]}
    loaded = cyloop.load(map_in_model("DictVectorizer", attrs, key, value, value))
    with pytest.raises(cyloop.InputError, match=message):
        loaded.run({"X": feed})


def test_a_sequence_of_maps_feed_is_checked_element_by_element():
    model = _passthrough(helper.make_sequence_type_proto(map_type("int64", "float")))
    loaded = cyloop.load(model)
    with pytest.raises(cyloop.InputError, match=r"input 'M': expected a sequence of maps \(a "
                                                r"list of dicts, map\(int64, float\)\), got dict"):
        loaded.run({"M": {1: 1.0}})
    with pytest.raises(cyloop.InputError, match=r"input 'M' element 1: a key of a "
                                                r"map\(int64, float\) must be an integer"):
        loaded.run({"M": [{1: 1.0}, {"x": 1.0}]})


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_map_of_sequences_is_read_fed_and_handed_back(driver):
    model = _passthrough(map_type("int32", "float", sequence_value=True))
    loaded = cyloop.load(model, driver=driver)
    (declared,) = loaded.inputs
    assert (declared.kind, declared.key_dtype, declared.dtype, declared.value_kind) == \
        ("map", np.dtype(np.int32), np.dtype(np.float32), "sequence")
    items = [np.arange(3, dtype=np.float32), np.ones((2,), np.float32)]
    got = loaded.run({"M": {5: items, -1: []}})["M"]
    assert list(got) == [-1, 5] and got[-1] == []
    for g, e in zip(got[5], items):
        np.testing.assert_array_equal(g, e)
        assert g is not e and g.flags.writeable
    with pytest.raises(cyloop.InputError, match="holds an array of float64, expected float32"):
        loaded.run({"M": {5: [np.zeros(2)]}})


@pytest.mark.parametrize("key", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                 "uint64", "string"])
def test_the_reader_takes_every_key_type_onnx_allows(key):
    number = getattr(TensorProto, key.upper())
    type_proto = helper.make_map_type_proto(number, helper.make_tensor_type_proto(
        TensorProto.DOUBLE, None))
    model = _passthrough(helper.make_sequence_type_proto(type_proto))
    (declared,) = cyloop.load(model).outputs
    expected = np.dtype(object if key == "string" else key)
    assert (declared.kind, declared.key_dtype, declared.dtype) == \
        ("sequence_map", expected, np.dtype(np.float64))
    feed = [{("7" if key == "string" else 7): 1.5}]
    assert cyloop.load(model).run({"M": feed})["M"] == feed


def test_the_reader_refuses_a_map_of_float_keys():
    type_proto = helper.make_map_type_proto(TensorProto.FLOAT, helper.make_tensor_type_proto(
        TensorProto.FLOAT, None))
    with pytest.raises(cyloop.ModelError, match=r"value 'M': a map's keys must be of an integer "
                                                r"type or string, not element type 1"):
        cyloop.load(_passthrough(type_proto))


def _loop_reading(map_name_type, body_nodes, body_outputs):
    """A Loop of 2 iterations whose body runs `body_nodes` and returns `body_outputs`, in a
    graph with the map input M."""
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    body = helper.make_graph(body_nodes, "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []), cond],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                              *body_outputs])
    nodes = [helper.make_node("Loop", ["n", ""], ["ys"], body=body, name="the_loop")]
    graph = helper.make_graph(nodes, "g", [helper.make_value_info("M", map_name_type),
                                           helper.make_tensor_value_info("n", TensorProto.INT64,
                                                                         [])],
                              [helper.make_tensor_value_info("ys", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_loop_reading_a_map_is_refused_naming_it(driver):
    body = [helper.make_node("Identity", ["i"], ["unused"]),
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("CastMap", ["M"], ["y"], domain="ai.onnx.ml")]
    model = _loop_reading(map_type("int64", "float"), body,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(cyloop.ModelError, match=r"node 'the_loop' \(Loop\): reads the map 'M'; "
                                                r"cyloop runs maps outside loops and branches"):
        cyloop.load(model, driver=driver)


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_if_holding_zipmap_is_refused_naming_both(driver):
    def branch(name):
        x = helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 2])
        zipped = helper.make_node("ZipMap", ["X"], ["z"], domain="ai.onnx.ml", name=f"zm_{name}",
                                  classlabels_int64s=[0, 1])
        return helper.make_graph([zipped], name, [], [helper.make_value_info(
            "z", helper.make_sequence_type_proto(map_type("int64", "float")))]), x

    then, _ = branch("then")
    other, _ = branch("else")
    node = helper.make_node("If", ["c"], ["z"], then_branch=then, else_branch=other, name="pick")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                      helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2])],
        [helper.make_value_info("z", helper.make_sequence_type_proto(map_type("int64",
                                                                               "float")))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    with pytest.raises(cyloop.ModelError, match=r"node 'pick' \(If\): its subgraph '(then|else)' "
                                                r"holds node 'zm_(then|else)' \(ZipMap\), an op "
                                                r"on maps"):
        cyloop.load(model, driver=driver)


def test_the_plan_of_a_model_with_maps(tmp_path):
    loaded = cyloop.load(classifier_with_zipmap())
    loaded.run({"X": np.ones((2, 4), np.float32)})
    assert loaded.plan().loops == []


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "cyloop.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_cli_describes_and_runs_a_model_with_maps(tmp_path):
    from onnx import save

    path = tmp_path / "classifier.onnx"
    save(classifier_with_zipmap(labels=("no", "yes")), path)
    info = _cli("info", path)
    assert info.returncode == 0, info.stderr
    assert "output_probability: seq(map(string, float))" in info.stdout
    out = tmp_path / "out.npz"
    ran = _cli("run", path, "--random-inputs", "-o", out)
    assert ran.returncode == 0, ran.stderr
    assert "output_probability: sequence of 4 maps, first map of 2 entries {'no': " in ran.stdout
    with np.load(out) as saved:  # (text saved as unicode: no pickle)
        assert list(saved["output_probability_0_keys"]) == ["no", "yes"]
        assert saved["output_probability_3_values"].shape == (2,)
    path = tmp_path / "vectorizer.onnx"
    save(map_in_model("DictVectorizer", {"string_vocabulary": ["0", "2", "9"]}, "string",
                      "double", "double"), path)
    ran = _cli("run", path, "--random-inputs")
    assert ran.returncode == 0, ran.stderr
    assert "Y: shape [1, 3] float64" in ran.stdout


@pytest.mark.parametrize("key", ["string", "int64"])
def test_cli_reads_a_map_input_as_it_writes_a_map_output(tmp_path, key):
    """-i FILE.npz takes a map as NAME_keys and NAME_values, the spelling -o writes; a run of a
    model whose output is its input gives the same arrays back, which load without pickle."""
    from onnx import save

    rng = np.random.default_rng(0)
    keys = np.array(["b", "a", "c"]) if key == "string" else np.array([7, -2, 40])
    values = rng.standard_normal(3)
    np.savez(tmp_path / "in.npz", M_keys=keys, M_values=values)
    save(_passthrough(map_type(key, "float")), tmp_path / "m.onnx")
    ran = _cli("run", tmp_path / "m.onnx", "-i", tmp_path / "in.npz", "-o", tmp_path / "out.npz")
    assert ran.returncode == 0, ran.stderr
    expected = ort_run(_passthrough(map_type(key, "float")),
                       {"M": dict(zip(keys.tolist(), values.tolist()))})["M"]
    with np.load(tmp_path / "out.npz") as saved:  # (no allow_pickle: text is unicode)
        assert saved["M_keys"].tolist() == list(expected)
        assert saved["M_values"].tolist() == list(expected.values())


def test_cli_reads_sequences_of_maps_and_of_tensors_by_their_numbered_names(tmp_path):
    """A sequence of maps as NAME_k_keys / NAME_k_values and a sequence of text tensors as
    NAME_k, k = 0, 1, ...: DictVectorizer's result on them against onnxruntime's, and a
    sequence passed through comes back element by element."""
    from onnx import save

    model = map_in_model("DictVectorizer", {"string_vocabulary": ["a", "b", "c"]}, "string",
                         "float", "float")
    save(model, tmp_path / "vectorizer.onnx")
    np.savez(tmp_path / "map.npz", X_keys=np.array(["c", "a"]), X_values=np.array([2.5, -1.0]))
    ran = _cli("run", tmp_path / "vectorizer.onnx", "-i", tmp_path / "map.npz", "-o",
               tmp_path / "y.npz")
    assert ran.returncode == 0, ran.stderr
    with np.load(tmp_path / "y.npz") as saved:
        expected = ort_run(model, {"X": {"c": 2.5, "a": -1.0}})["Y"]
        np.testing.assert_array_equal(saved["Y"], expected)

    sequence = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.STRING,
                                                                             None))
    save(_passthrough(sequence), tmp_path / "seq.onnx")
    items = [np.array([["p", "qq"]]), np.array(["r"])]
    np.savez(tmp_path / "seq.npz", M_0=items[0], M_1=items[1], unrelated=np.zeros(2))
    ran = _cli("run", tmp_path / "seq.onnx", "-i", tmp_path / "seq.npz")
    assert ran.returncode != 0 and "unknown inputs ['unrelated']" in ran.stderr
    np.savez(tmp_path / "seq.npz", M_0=items[0], M_1=items[1])
    ran = _cli("run", tmp_path / "seq.onnx", "-i", tmp_path / "seq.npz", "-o",
               tmp_path / "out.npz")
    assert ran.returncode == 0, ran.stderr
    with np.load(tmp_path / "out.npz") as saved:
        assert sorted(saved.files) == ["M_0", "M_1"]
        for k, item in enumerate(items):
            np.testing.assert_array_equal(saved[f"M_{k}"], item)
