"""The `cyloop` command, through subprocess as a user runs it."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import save as onnx_save

from cyloop.cli import EXAMPLES


def cyloop(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "cyloop.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_run_without_a_model_runs_the_embedded_examples():
    code, out, err = cyloop("run")
    assert code == 0, err
    assert "lstm_ti.xml" in out and "loop_sequence.onnx" in out
    assert "all_h: shape [2, 16, 16] float32" in out
    assert "rows: sequence of" in out and "time:" in out


def test_run_with_input_files_and_saved_outputs(tmp_path, rng):
    row = rng.standard_normal(4).astype(np.float32)
    np.save(tmp_path / "row.npy", row)
    np.save(tmp_path / "n.npy", np.array(3, np.int64))
    code, _out, err = cyloop("run", EXAMPLES[1], "-i", f"row={tmp_path / 'row.npy'}",
                            "-i", f"trip_count={tmp_path / 'n.npy'}", "-o", tmp_path / "out.npz")
    assert code == 0, err
    saved = np.load(tmp_path / "out.npz")
    np.testing.assert_array_equal(saved["stacked"], row * np.arange(3, dtype=np.float32)[:, None])
    np.testing.assert_array_equal(saved["rows_2"], row * 2)


def test_plan_shows_each_loop_and_measured_peak():
    code, out, err = cyloop("plan", EXAMPLES[0], "--random-inputs")
    assert code == 0, err
    assert "sliced" in out and "carried" in out and "stacked" in out
    assert "peak memory of one run" in out


def test_info_lists_ios_ops_and_loops():
    code, out, err = cyloop("info", EXAMPLES[1])
    assert code == 0, err
    assert "trip_count: int64 []" in out and "rows: float32 ? (sequence)" in out
    assert "SequenceInsert x1" in out and "Loop" in out
    assert "fallback: none" in out


def test_bench_against_onnxruntime():
    code, out, err = cyloop("bench", EXAMPLES[1], "--random-inputs", "--vs", "onnxruntime",
                            "--repeat", "3")
    assert code == 0, err
    assert "onnxruntime: outputs agree" in out
    assert "cyloop" in out and "ratio" in out


@pytest.mark.parametrize("args,message", [
    (("run", "CORRUPT"), "corrupt or truncated protobuf"),
    (("run", EXAMPLES[0]), "missing inputs ['X', 'H0', 'C0']"),
    (("info", "nowhere.onnx"), "no such file"),
    (("run", EXAMPLES[1], "-i", "row"), "-i takes NAME=FILE.npy"),
], ids=["corrupt", "missing-input", "missing-file", "bad-input-spec"])
def test_errors_are_one_line_and_exit_2(args, message, tmp_path):
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07\x12garbage\xff")
    args = [corrupt if a == "CORRUPT" else a for a in args]
    code, _out, err = cyloop(*args)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("cyloop: error:"), err
    assert message in err
    assert "Traceback" not in err


def test_debug_shows_the_traceback(tmp_path):
    code, _, err = cyloop("--debug", "info", tmp_path / "nowhere.onnx")
    assert code != 0 and "Traceback" in err


def test_console_script_is_installed():
    bindir = os.path.dirname(sys.executable)
    script = os.path.join(bindir, "cyloop")
    assert os.path.exists(script)
    proc = subprocess.run([script, "--version"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("cyloop ")


def _run_in_terminal(args, columns=100):
    """Run the CLI with stdout and stderr on a pseudo-terminal of a real size."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "cyloop.cli", *map(str, args)],
                            stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=300), out.decode(errors="replace")


def _counting_loop(tmp_path, iterations):
    from onnx import TensorProto, helper, save

    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "one"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [])],
        initializer=[helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "acc0"], ["acc"], body=body, name="counter")], "g",
        [helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("acc0", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8),
         str(tmp_path / "count.onnx"))
    np.save(tmp_path / "n.npy", np.array(iterations, np.int64))
    np.save(tmp_path / "acc0.npy", np.array(0, np.float32))
    return ["run", tmp_path / "count.onnx", "-i", f"n={tmp_path / 'n.npy'}",
            "-i", f"acc0={tmp_path / 'acc0.npy'}"]


def test_long_loops_show_a_progress_bar_on_a_terminal_only(tmp_path):
    args = _counting_loop(tmp_path, 400_000)
    code, screen = _run_in_terminal(args)
    assert code == 0, screen
    assert "counter" in screen and "/400000" in screen and "it/s" in screen
    code, out, err = cyloop(*args)  # not a terminal: nothing extra
    assert code == 0 and "it/s" not in out + err and err == ""


def test_a_loop_that_never_ends_is_stopped_by_the_time_limit(tmp_path):
    """The CLI always has a time limit (DEFAULT_TIME_LIMIT unless --time-limit says otherwise):
    a model whose loop never ends is an error naming the loop, not a hung terminal."""
    from tests.support.onnx_models import loop_model

    endless = loop_model(m_given=False, cond_given=False, stop_at=None)
    onnx_save(endless, tmp_path / "endless.onnx")
    code, out, err = cyloop("run", tmp_path / "endless.onnx", "--random-inputs",
                            "--max-iterations", "none", "--time-limit", "0.5")
    assert code == 2, out + err
    assert err.startswith("cyloop: error: node 'v_final' (Loop): stopped at iteration ")
    assert "the run passed time_limit=0.5 s" in err
    code, out, err = cyloop("run", tmp_path / "endless.onnx", "--random-inputs",
                            "--max-iterations", "1000")
    assert code == 2 and "iteration 1000 would pass max_iterations=1000" in err


@pytest.mark.parametrize("option,value", [("--time-limit", "soon"),
                                          ("--max-iterations", "1.5"),
                                          ("--memory-limit", "lots")])
def test_bad_limits_are_usage_errors(option, value):
    code, _out, err = cyloop("run", EXAMPLES[1], option, value)
    assert code == 2
    assert f"argument {option}: expected " in err and f"or 'none', got '{value}'" in err


def test_limits_default_to_finite_values_and_none_lifts_them():
    from cyloop.cli import DEFAULT_TIME_LIMIT

    code, out, err = cyloop("run", "--help")
    assert code == 0, err
    assert f"(default {DEFAULT_TIME_LIMIT:g}; 'none': no limit)" in " ".join(out.split())
    code, out, err = cyloop("run", EXAMPLES[1], "--random-inputs", "--time-limit", "none",
                            "--max-iterations", "none", "--memory-limit", "none")
    assert code == 0, err


def test_output_is_saved_at_exactly_the_path_given(tmp_path):
    code, out, err = cyloop("run", EXAMPLES[1], "--random-inputs", "-o", tmp_path / "out.txt")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    assert f"outputs saved to {tmp_path / 'out.txt'}" in out
    assert "stacked" in np.load(tmp_path / "out.txt").files


def test_several_models_save_to_one_file_each(tmp_path):
    code, _out, err = cyloop("run", "-o", tmp_path / "out.npz")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.loop_sequence.npz",
                                                          "out.lstm_ti.npz"]
    assert "all_h" in np.load(tmp_path / "out.lstm_ti.npz").files
    assert "stacked" in np.load(tmp_path / "out.loop_sequence.npz").files


@pytest.mark.parametrize("args,message", [
    (("run", EXAMPLES[1], "--random-inputs", "--max-iterations", "-1"),
     "max_iterations must be None or >= 0, not -1"),
    (("bench", EXAMPLES[1], "--repeat", "0"), "argument --repeat: expected an integer >= 1"),
    (("bench", EXAMPLES[1], "--vs", "onnxruntime,foo"),
     "argument --vs: unknown peer 'foo'; choose from onnxruntime, openvino, reference"),
    (("info", EXAMPLES[1], "--random-inputs"), "unrecognized arguments: --random-inputs"),
], ids=["negative-limit", "repeat-0", "unknown-peer", "info-takes-no-run-flags"])
def test_bad_options_are_one_line_errors(args, message):
    code, _out, err = cyloop(*args)
    assert code == 2, err
    assert message in err and "Traceback" not in err


def test_debug_works_after_the_subcommand_too(tmp_path):
    code, _out, err = cyloop("run", tmp_path / "nowhere.onnx", "--debug")
    assert code == 1 and "Traceback" in err and "ModelNotFoundError" in err


def test_python_dash_m_cyloop_is_the_command():
    proc = subprocess.run([sys.executable, "-m", "cyloop", "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("cyloop "), proc.stderr


def test_a_closed_pipe_ends_the_command_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "cyloop", "run"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.readline()  # as `cyloop run | head -1` reads one line and leaves
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""


CTRL_C_SCRIPT = textwrap.dedent("""
    import signal, sys, threading
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    from cyloop.cli import main
    threading.Timer(0.5, signal.raise_signal, (signal.SIGINT,)).start()
    sys.exit(main(sys.argv[1:]))
""")


def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    from tests.support.onnx_models import loop_model

    onnx_save(loop_model(m_given=False, cond_given=False, stop_at=None), tmp_path / "e.onnx")
    proc = subprocess.run([sys.executable, "-c", CTRL_C_SCRIPT, "run", tmp_path / "e.onnx",
                           "--random-inputs", "--max-iterations", "none"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "cyloop: interrupted\n"


def test_plan_generates_the_inputs_it_is_not_given():
    code, out, err = cyloop("plan", EXAMPLES[0])
    assert code == 0, err
    assert "inputs generated from their declared shapes (seed 0; unnamed dims 4): X, H0, C0" \
        in out
    assert re.search(r"#0 Result_13 +stacked, axis 1", out), out


def test_plan_of_an_ir_names_values_as_the_model_does():
    """Body values by their tensor and layer names, not the reader's `3/#8:6` (issue 15)."""
    code, out, err = cyloop("plan", EXAMPLES[0])
    assert code == 0, err
    assert re.search(r"\n  xt +sliced", out), out
    assert re.search(r"\n  h +carried +'Result_13'", out), out
    assert re.search(r"\n  #2 Result_14 +last value", out), out
    assert not re.search(r"#\d+:\d|\b\d+/", out), out


def test_info_of_an_ir_shows_the_outputs_its_results_declare(tmp_path):
    code, out, err = cyloop("info", EXAMPLES[0])
    assert code == 0, err
    assert "  all_h: float32 [2, 16, 16]\n  last_h: float32 [2, 16]\n" in out
    import openvino as ov
    import openvino.opset8 as ops

    p = ops.parameter(ov.PartialShape([-1, 3]), np.float32, name="P")
    relu = ops.relu(p)
    relu.output(0).set_names({"y"})
    ov.save_model(ov.Model([relu], [p], "dynamic"), str(tmp_path / "dyn.xml"))
    code, out, err = cyloop("info", tmp_path / "dyn.xml")
    assert code == 0, err
    assert "outputs:\n  y: float32 [?, 3]\n" in out


def test_bench_plots_time_per_iteration_and_peak_memory(tmp_path):
    code, out, err = cyloop("bench", EXAMPLES[1], "--random-inputs", "--vs", "onnxruntime",
                            "--repeat", "2", "--plot", tmp_path / "bench.png")
    assert code == 0, err
    assert "us/iter" in out and "peak MiB" in out
    assert f"plot saved to {tmp_path / 'bench.png'}" in out
    image = (tmp_path / "bench.png").read_bytes()
    assert image.startswith(b"\x89PNG\r\n\x1a\n") and len(image) > 5000


def _written(path, data):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("make,message", [
    (lambda d: _written(d / "empty.onnx", b""), "empty.onnx: the file is empty, not a model"),
    (lambda d: d, ": a directory, not a model file"),
    (lambda d: _written(d / "notes.onnx", b"some notes\n" * 5), "notes.onnx: not an ONNX model"),
], ids=["empty", "directory", "text"])
def test_what_is_not_a_model_says_so(tmp_path, make, message):
    code, _out, err = cyloop("run", make(tmp_path), "--random-inputs")
    assert code == 2, err
    assert message in err and err.count("\n") == 1


def test_bench_matches_openvino_s_unnamed_outputs_by_position(tmp_path):
    """An IR whose Result has no tensor names (as convert_model writes for some torch models):
    OpenVINO's output has no name to match cyloop's by, so it is matched by position."""
    ov = pytest.importorskip("openvino")
    import openvino.opset8 as ops

    x = ops.parameter([2, 3], np.float32, name="x")
    ov.save_model(ov.Model([ops.tanh(x).output(0)], [x], "m"), tmp_path / "m.xml")
    text = (tmp_path / "m.xml").read_text()
    result = re.search(r'<layer id="\d+" name="(\w+)" type="Result"', text).group(1)
    (tmp_path / "m.xml").write_text(text.replace(f' names="{result}"', "")
                                    .replace(f' output_names="{result}"', ""))
    code, out, err = cyloop("bench", tmp_path / "m.xml", "--random-inputs", "--vs", "openvino",
                            "--repeat", "2")
    assert code == 0, err
    assert "openvino: outputs agree" in out


def test_a_disagreement_says_where_and_by_how_much():
    from cyloop.cli import _difference

    ours, theirs = np.zeros((2, 3)), np.zeros((2, 3))
    theirs[1, 2], theirs[0, 1] = 0.5, np.nan
    assert _difference(ours, ours.copy()) is None
    assert _difference(ours, theirs) == "2 of 6 values differ; the largest at [0, 1]: 0 against nan"
    theirs[0, 1] = 0.25
    assert _difference(ours, theirs) == "2 of 6 values differ; the largest at [1, 2]: 0 against 0.5"
    assert _difference(ours, np.zeros(3)) == "shape [2, 3] against [3]"
    assert _difference([ours], [ours, ours]) == "a sequence of 1 tensors against 2"


def test_bench_keeps_onnxruntime_s_notes_on_the_model_out_of_the_table(tmp_path):
    """onnxruntime notes each unused initializer of a jax2onnx fori_loop's body on stderr at
    warning level; `cyloop bench` asks it for errors only."""
    jax = pytest.importorskip("jax")
    pytest.importorskip("onnxruntime")
    from jax2onnx import to_onnx
    from onnx import save

    def double_rows(x):
        return jax.lax.fori_loop(0, 5, lambda i, a: a.at[i].set(a[i] * 2.0), x)

    save(to_onnx(double_rows, [jax.ShapeDtypeStruct((8,), np.float32)]), tmp_path / "m.onnx")
    code, out, err = cyloop("bench", tmp_path / "m.onnx", "--random-inputs", "--vs",
                            "onnxruntime", "--repeat", "2")
    assert code == 0, err
    assert "onnxruntime: outputs agree" in out
    assert "Removing initializer" not in out + err


def _matmul_model(path):
    """y = x @ W + b, x [N, F] with F bound to W's 3 rows only by the product."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"],
                                                                          ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "F"]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])], [w])
    onnx_save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_generated_inputs_say_the_sizes_picked_and_take_dim(tmp_path):
    path = _matmul_model(tmp_path / "m.onnx")
    code, out, err = cyloop("run", path, "--random-inputs")
    assert code == 2 and "MatMul" in err  # (F picked 4, where W has 3 rows)
    assert "dims N=4 (picked), F=4 (picked)" in out
    code, out, err = cyloop("run", path, "--random-inputs", "--dim", "F=3", "--dim", "N=5")
    assert code == 0, err
    assert "dims F=3, N=5;" in out and "y: shape [5, 2] float32" in out


def test_a_symbolic_dim_of_a_given_input_sizes_the_generated_ones(tmp_path, rng):
    path = _matmul_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", rng.standard_normal((6, 3)).astype(np.float32))
    code, out, err = cyloop("run", path, "-i", f"x={tmp_path / 'x.npy'}", "--random-inputs")
    assert code == 0, err
    assert "dims N=6; unnamed dims 4): b" in out and "y: shape [6, 2] float32" in out


def test_inputs_from_an_npz_archive_and_unknown_names(tmp_path, rng):
    row = rng.standard_normal(4).astype(np.float32)
    np.savez(tmp_path / "in.npz", row=row, trip_count=np.array(3, np.int64))
    code, _out, err = cyloop("run", EXAMPLES[1], "-i", tmp_path / "in.npz", "-o",
                             tmp_path / "out.npz")
    assert code == 0, err
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_array_equal(saved["rows_2"], row * 2)
    np.save(tmp_path / "r.npy", row)
    code, _out, err = cyloop("run", EXAMPLES[1], "-i", f"rowz={tmp_path / 'r.npy'}")
    assert code == 2
    assert "unknown inputs ['rowz']; the model's inputs are ['trip_count', 'row']" in err
