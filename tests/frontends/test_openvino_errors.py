"""Bad OpenVINO IRs fail with ModelError naming the layer: entity declarations, missing or short
weights, broken port maps and back edges, bad slicing; plus the older Loop-5 dialect, read to the
same LoopSpec as its current-dialect twin."""

import io
import re
import shutil

import numpy as np
import openvino as ov
import openvino.opset8 as ov_ops
import pytest

import cyloop
from cyloop.frontends import openvino as openvino_frontend
from cyloop.ir import MAX_NESTING

from ..support.openvino_models import loop_model, nested_ti_xml, save, ti_model, to_older_dialect

TI_CASE = ((5, 2, 3), 0, 0, -1, 1, 1, 0, 1)


@pytest.fixture
def ti_path(tmp_path):
    return save(ti_model(*TI_CASE), tmp_path / "ti.xml")


def _feeds(rng):
    return {"X": rng.standard_normal((5, 2, 3)).astype(np.float32),
            "H0": np.zeros((1, 2, 3), np.float32), "W": np.ones((1, 2, 3), np.float32)}


def _edit(path, old, new, count=1):
    text = path.read_text()
    assert text.count(old) >= 1, old
    path.write_text(text.replace(old, new, count))


@pytest.mark.parametrize("before", ["", f"<!--{'x' * 200_000}-->"],
                         ids=["at-the-start", "past-the-first-chunks-read"])
def test_entity_declarations_are_refused(ti_path, before):
    text = ti_path.read_text()
    bomb = ('<!DOCTYPE net [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
            '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;">]>')
    ti_path.write_text(text.replace("<net ", before + bomb + '<net note="&d;" ', 1))
    with pytest.raises(cyloop.ModelError, match="refuses them"):
        cyloop.load(ti_path)


class _CountedReads(io.BytesIO):
    def __init__(self, data):
        super().__init__(data)
        self.reads = []

    def read(self, size=-1):
        self.reads.append(size)
        return super().read(size)


@pytest.mark.parametrize("where", ["comment", "attribute"])
def test_a_long_token_is_read_in_growing_chunks(ti_path, where):
    """expat before 2.6 scans an unfinished token again at every chunk fed to it: the chunks
    grow while no element starts or ends, so a token of n bytes takes O(log n) reads (and
    O(n) scanning)."""
    text, long = ti_path.read_text(), "x" * (8 << 20)
    text = text.replace("<net ", f"<!--{long}--><net " if where == "comment" else
                        f'<net note="{long}" ', 1)
    file = _CountedReads(text.encode())
    events = list(openvino_frontend._parse_events(file, "ti.xml"))
    assert events[0][0] == "start" and events[0][1].tag == "net"
    assert len(file.reads) < 20
    assert max(file.reads) > 8 << 20


def test_a_token_past_the_limit_is_refused(ti_path, monkeypatch):
    monkeypatch.setattr(openvino_frontend, "TOKEN_LIMIT", 1 << 20)
    text = ti_path.read_text()
    ti_path.write_text(text.replace("<net ", f"<!--{'x' * (1 << 20)}--><net ", 1))
    with pytest.raises(cyloop.ModelError, match="more than 1 MiB of XML without an element "
                       "starting or ending"):
        cyloop.load(ti_path)
    ti_path.write_text(text.replace("<net ", f"<!--{'x' * ((1 << 20) - 100)}--><net ", 1))
    assert cyloop.load(ti_path).input_names


def test_missing_weights_name_the_const_layer_and_the_file(ti_path):
    ti_path.with_suffix(".bin").unlink()
    with pytest.raises(cyloop.ModelError, match=r"Const layer \d+ .*: its weights are in .*"
                       r"\.bin, which does not exist \(give the \.bin with weights=\)"):
        cyloop.load(ti_path)


def test_an_ir_and_its_weights_load_from_bytes(ti_path, tmp_path):
    """IR XML given as bytes is read as an IR (not as ONNX), its weights as a path or bytes."""
    xml, blob = ti_path.read_bytes(), ti_path.with_suffix(".bin").read_bytes()
    from_file = cyloop.load(ti_path)
    feeds = {v.name: np.ones([d if isinstance(d, int) else 2 for d in v.shape], v.dtype)
             for v in from_file.graph.inputs if v.name in from_file.input_names}
    expected = from_file.run(feeds)
    for weights in (blob, ti_path.with_suffix(".bin")):
        got = cyloop.load(xml, weights=weights).run(feeds)
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name])
    with pytest.raises(cyloop.ModelError, match="its weights are in \\(no weights given\\)"):
        cyloop.load(xml)
    with pytest.raises(cyloop.ModelError, match=r"run past the end of the weights bytes "
                       r"\(3 bytes\)"):
        cyloop.load(xml, weights=b"abc")


def test_truncated_weights_name_the_const_layer(ti_path):
    blob = ti_path.with_suffix(".bin")
    blob.write_bytes(blob.read_bytes()[:-1])
    with pytest.raises(cyloop.ModelError, match=r"Const layer \d+ .*run past the end"):
        cyloop.load(ti_path)


def test_const_past_the_end_of_the_weights(ti_path):
    text = ti_path.read_text()
    ti_path.write_text(re.sub(r'offset="0"', 'offset="4096"', text, count=1))
    with pytest.raises(cyloop.ModelError, match=r"Const layer \d+ .*\[4096, "):
        cyloop.load(ti_path)


def _const_ir(shape, size, element_type="f32"):
    """An IR of one Const layer (id 0, name 'c') of `shape` and `size` bytes, and a Result."""
    return f"""<?xml version="1.0"?>
<net name="m" version="11"><layers>
<layer id="0" name="c" type="Const" version="opset1">
<data element_type="{element_type}" shape="{shape}" offset="0" size="{size}"/>
<output><port id="0" precision="FP32"><dim>1</dim></port></output></layer>
<layer id="1" name="r" type="Result" version="opset1"><input><port id="0"><dim>1</dim></port>
</input></layer></layers>
<edges><edge from-layer="0" from-port="0" to-layer="1" to-port="0"/></edges></net>""".encode()


@pytest.mark.parametrize("shape,size", [("4294967296,4294967296", 0), ("4611686018427387904,4", 1),
                                        ("3037000500,3037000500", 4)],
                         ids=["wraps-to-0", "wraps-to-0-size-1", "wraps-negative"])
def test_a_const_too_large_to_count_in_int64_is_a_model_error(shape, size):
    """Its element count is computed exactly: counted in int64 it wraps (to 0 for 2^32 x 2^32,
    which passed as an empty constant, and numpy then refused the array with a plain
    ValueError)."""
    needs = 4 * int(np.prod([int(d) for d in shape.split(",")], dtype=object))
    with pytest.raises(cyloop.ModelError, match=rf"Const layer 0 \('c'\): shape \[.*\] of f32 "
                                                rf"needs {needs} bytes, the layer says {size}"):
        cyloop.load(_const_ir(shape, size), weights=bytes(16))


@pytest.mark.parametrize("shape", ["4294967296,4294967296,0", "9223372036854775808,0",
                                   "99999999999999999999,0"], ids=["too-big", "past-intp", "huge"])
@pytest.mark.parametrize("element_type", ["f32", "u4"])
def test_a_const_of_no_elements_numpy_cannot_shape_is_a_model_error(shape, element_type):
    """No element, so no byte to read, but numpy refuses such a shape: a ModelError, not
    numpy's ValueError."""
    with pytest.raises(cyloop.ModelError, match=r"Const layer 0 \('c'\): numpy cannot make an "
                                                r"array of shape \["):
        cyloop.load(_const_ir(shape, 0, element_type), weights=bytes(16))


def test_read_graph_is_the_frontend_loading_uses(ti_path, rng):
    from cyloop.frontends import openvino as openvino_frontend

    graph = openvino_frontend.read_graph(ti_path)
    assert isinstance(graph, cyloop.Graph)
    feeds = _feeds(rng)
    expected = cyloop.load(ti_path).run(feeds)
    got = cyloop.Model(graph).run(feeds)
    assert list(got) == list(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


def test_an_unknown_element_type_attribute_names_the_layer(tmp_path, rng):
    x = ov_ops.parameter([3], np.float32, name="x")
    model = ov.Model([ov_ops.convert(x, "i32")], [x])
    path = save(model, tmp_path / "convert.xml")
    feeds = {"x": np.array([1.7, -2.2, 3.0], np.float32)}
    (converted,) = cyloop.load(path).run(feeds).values()
    np.testing.assert_array_equal(converted, np.array([1, -2, 3], np.int32))
    _edit(path, 'destination_type="i32"', 'destination_type="q17"')
    with pytest.raises(cyloop.ModelError, match=r"layer \d+ .*Convert.*destination_type: element "
                                                r"type 'q17' is not supported"):
        cyloop.load(path)


def test_explicit_weights_path(ti_path, tmp_path):
    moved = tmp_path / "elsewhere.bin"
    shutil.move(ti_path.with_suffix(".bin"), moved)
    model = cyloop.load(ti_path, weights=moved)
    assert model.output_names


@pytest.mark.parametrize("old,new,error", [
    ('internal_layer_id="0" start', 'internal_layer_id="99" start',
     "port_map names body layer 99, which is not a body Parameter"),
    ('<edge from-layer="', '<edge from-layer="77" to-layer="1" /><edge from-layer="',
     "back edge 77 -> 1"),
    ('stride="1" part_size="1" />', 'stride="0" part_size="1" />', "stride 0"),
    ('part_size="1" />', 'part_size="0" />', "part_size 0"),
], ids=["port-map-missing-layer", "back-edge-missing-layer", "stride-0", "part-size-0"])
def test_broken_port_maps(ti_path, old, new, error):
    _edit(ti_path, old, new)
    with pytest.raises(cyloop.ModelError, match=error) as info:
        cyloop.load(ti_path)
    # The layer is named: by the reader ("layer 3 (...)") or, for what LoopSpec.validate checks
    # when the model compiles, by the node's label ("node '3:TensorIterator_13'").
    assert re.search(r"layer \d+ |node '\d+:TensorIterator", str(info.value))


@pytest.mark.parametrize("old, new, shown", [
    ('<input axis="0" external_port_id="0" internal_layer_id="0" start="0"',
     '<input axis="0" external_port_id="0" internal_layer_id="0" start=""', "start=''"),
    ('<input axis="0"', '<input axis="0x10"', "axis='0x10'"),
    ('start="0" end="-1" stride="1"', 'start="0" end="-1" stride="1.5"', "stride='1.5'"),
    ('<output axis="0"', '<output axis="zero"', "axis='zero'"),
], ids=["empty", "hex", "fraction", "output-axis"])
def test_port_map_integers_that_are_not_integers(ti_path, old, new, shown):
    _edit(ti_path, old, new)
    element = "output" if new.startswith("<output") else "input"
    with pytest.raises(cyloop.ModelError, match=rf"layer \d+ \(.*TensorIterator\): <{element}> "
                                                rf"attribute {re.escape(shown)} is not an integer"):
        cyloop.load(ti_path)


def test_sliced_inputs_disagreeing_on_the_count(ti_path, rng):
    # Slice W (one part along axis 0) as well as X (five parts).
    _edit(ti_path, '<input external_port_id="2" internal_layer_id="',
          '<input axis="0" start="0" end="-1" stride="1" part_size="1" external_port_id="2" '
          'internal_layer_id="')
    with pytest.raises(cyloop.ModelError, match=r"disagree on the number of iterations.*5.*1"):
        cyloop.load(ti_path).run(_feeds(rng))


@pytest.mark.parametrize("trip,stop_at", [(5, None), (6, 2), (0, None)],
                         ids=["for", "for-with-cond", "zero"])
def test_older_loop5_dialect_matches_its_current_twin(trip, stop_at, tmp_path, rng):
    current = save(loop_model(trip, stop_at, sliced=True), tmp_path / "current.xml")
    older = to_older_dialect(current, tmp_path / "older.xml")
    assert "internal_operation_id" in older.read_text()
    feeds = {"ACC0": rng.standard_normal((1, 3)).astype(np.float32),
             "X": rng.standard_normal((6, 3)).astype(np.float32)}
    a, b = cyloop.load(current), cyloop.load(older)
    assert [str(x) for x in b._compiled.loops[0].spec.inputs] == \
        [str(x) for x in a._compiled.loops[0].spec.inputs]
    got_a, got_b = a.run(feeds), b.run(feeds)
    for name_a, name_b in zip(a.output_names, b.output_names):
        np.testing.assert_array_equal(got_a[name_a], got_b[name_b])


@pytest.mark.parametrize("trip", [5, 0])
def test_older_loop5_dialect_without_a_condition_input_is_a_for_loop(trip, tmp_path, rng):
    """The older doc's `input (trip_count, "")`: the trip count is the one input port without a
    port_map entry, and the body's condition (mapped nowhere) stops nothing. It once took the
    data input on port 1 for the condition."""
    current = save(loop_model(trip, None, sliced=True), tmp_path / "current.xml")
    older = to_older_dialect(current, tmp_path / "older.xml", condition=False)
    assert 'condition="True"' not in older.read_text()
    feeds = {"ACC0": rng.standard_normal((1, 3)).astype(np.float32),
             "X": rng.standard_normal((6, 3)).astype(np.float32)}
    a, b = cyloop.load(current), cyloop.load(older)
    spec = b._compiled.loops[0].spec
    assert spec.initial_cond is None and spec.cond_result is None
    assert spec.trip_count is not None and spec.iteration_param is not None
    got_a, got_b = a.run(feeds), b.run(feeds)
    for name_a, name_b in zip(a.output_names, b.output_names):
        np.testing.assert_array_equal(got_a[name_a], got_b[name_b])


def test_unknown_layer_type_names_layer_id_name_type_and_version(ti_path):
    _edit(ti_path, 'type="Add" version="opset1"', 'type="Frobnicate" version="opset3"')
    with pytest.raises(cyloop.UnsupportedOpError,
                       match=r"layer \d+ \('[^']+', Frobnicate\).*Frobnicate \(opset 3\)"):
        cyloop.load(ti_path)


def test_ir_v10_outputs_fall_back_to_result_layer_names(ti_path, rng):
    """IR v10 has no tensor names on ports: outputs are named by their Result layers."""
    text = re.sub(r' names="[^"]*"', "", ti_path.read_text()).replace('version="11"',
                                                                       'version="10"', 1)
    ti_path.write_text(text)
    model = cyloop.load(ti_path)
    results = re.findall(r'<layer id="\d+" name="([^"]+)" type="Result"', text)
    assert model.output_names == results[-2:]  # the net's own Results (after the body's)
    assert model.run(_feeds(rng))


@pytest.mark.parametrize("driver", ["cython", "python"])
def test_bodies_nested_past_the_limit_are_a_model_error_not_a_recursion_error(tmp_path, driver):
    """MAX_NESTING bodies deep loads and runs; one deeper, and 450 deeper, are a ModelError."""
    x = np.arange(2, dtype=np.float32).reshape(1, 2)
    for depth in (MAX_NESTING, MAX_NESTING + 1, 450):
        path = tmp_path / f"nested{depth}.xml"
        path.write_text(nested_ti_xml(depth))
        path.with_suffix(".bin").write_bytes(b"")
        if depth == MAX_NESTING:
            np.testing.assert_array_equal(cyloop.load(path, driver=driver).run({"x": x})["y"], x)
            continue
        with pytest.raises(cyloop.ModelError, match=rf"body: bodies nested more than "
                                                    rf"{MAX_NESTING} deep"):
            cyloop.load(path, driver=driver)
