"""A large OpenVINO IR, written as text, and the peak memory of loading it in a fresh process.

The IR has the shape of a big converted model: a TensorIterator whose body is a long chain of
small layers, then as long a chain at the top level. Each block is Add(Const), Multiply(Const)
and Clamp, written as ``openvino.save_model`` writes them (IR v11: ports with dims and tensor
names, tab indentation), so nearly all of the file is layers and edges; the .bin holds the small
constants. ``expected`` is a numpy re-implementation of the same chain: the oracle.

Measure a load (prints the file size, the peak RSS above the baseline of ``import cyloop, numpy``
and the load time, each in a fresh process)::

    python -m tests.support.openvino_large OUT_DIR [XML_MB] [--phase graph|load]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

STEPS, WIDTH = 4, 16
LAYERS_PER_BLOCK = 5  # two Consts, Add, Multiply, Clamp
RESULT_Y, RESULT_H = 1000000000, 1000000001  # the body's Result layer ids (ids are not indices)
_DIMS = "".join(f"\n{{t}}\t<dim>{d}</dim>" for d in (1, WIDTH))
_DIMS1 = f"\n{{t}}\t<dim>{WIDTH}</dim>"


def _port(tab, pid, dims, names=None):
    named = f' names="{names}"' if names else ""
    return (f'{tab}<port id="{pid}" precision="FP32"{named}>{dims.format(t=tab)}\n'
            f"{tab}</port>")


def _layer(tab, lid, name, kind, data, inputs, outputs, extra=""):
    """A layer as text: `inputs`/`outputs` are (port id, dims template, tensor name) triples."""
    t = tab + "\t"
    parts = [f'{tab}<layer id="{lid}" name="{name}" type="{kind}" version="opset1"{extra}>']
    if data is not None:
        parts.append(f"{t}<data {data} />")
    for section, ports in (("input", inputs), ("output", outputs)):
        if ports:
            parts.append(f"{t}<{section}>")
            parts += [_port(t + "\t", *port) for port in ports]
            parts.append(f"{t}</{section}>")
    parts.append(f"{tab}</layer>")
    return "\n".join(parts) + "\n"


def constants(blocks: int, seed: int = 0):
    """The (add, multiply) constants of each block, in document order (body blocks first)."""
    rng = np.random.default_rng(seed)
    add = (rng.standard_normal((blocks, WIDTH)) * 0.1).astype(np.float32)
    mul = rng.uniform(0.9, 1.1, (blocks, WIDTH)).astype(np.float32)
    return add, mul


def _chain(xml, bin_file, tab, first_id, source, blocks, add, mul, offset, edges, prefix):
    """Write `blocks` blocks reading (layer, port) `source`; returns (next id, last source,
    next .bin offset)."""
    lid = first_id
    for k in range(blocks):
        ids = range(lid, lid + LAYERS_PER_BLOCK)
        c_add, op_add, c_mul, op_mul, clamp = ids
        out = (("2", _DIMS, None),)
        text = [
            _layer(tab, c_add, f"Constant_{c_add}", "Const",
                   f'element_type="f32" shape="{WIDTH}" offset="{offset}" size="{4 * WIDTH}"',
                   (), (("0", _DIMS1, None),)),
            _layer(tab, op_add, f"Add_{op_add}", "Add", 'auto_broadcast="numpy"',
                   (("0", _DIMS), ("1", _DIMS1)), out),
            _layer(tab, c_mul, f"Constant_{c_mul}", "Const",
                   f'element_type="f32" shape="{WIDTH}" offset="{offset + 4 * WIDTH}" '
                   f'size="{4 * WIDTH}"', (), (("0", _DIMS1, None),)),
            _layer(tab, op_mul, f"Multiply_{op_mul}", "Multiply", 'auto_broadcast="numpy"',
                   (("0", _DIMS), ("1", _DIMS1)), out),
            _layer(tab, clamp, f"Clamp_{clamp}", "Clamp", 'min="-3" max="3"', (("0", _DIMS),),
                   (("1", _DIMS, f"{prefix}{k}"),)),
        ]
        bin_file.write(add[k].tobytes() + mul[k].tobytes())
        offset += 8 * WIDTH
        edges += [(*source, op_add, "0"), (c_add, "0", op_add, "1"), (op_add, "2", op_mul, "0"),
                  (c_mul, "0", op_mul, "1"), (op_mul, "2", clamp, "0")]
        xml.write("".join(text))
        source, lid = (clamp, "1"), lid + LAYERS_PER_BLOCK
    return lid, source, offset


def _edges(tab, edges):
    lines = [f"{tab}<edges>\n"]
    lines += [f'{tab}\t<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}" />\n'
              for a, b, c, d in edges]
    return "".join(lines) + f"{tab}</edges>\n"


def write(xml_path, blocks: int, seed: int = 0):
    """Write the IR of `blocks` blocks (half in the body, half after the loop) and its .bin;
    returns `xml_path`."""
    path = os.fspath(xml_path)
    body_blocks = blocks // 2
    add, mul = constants(blocks, seed)
    x_dims = f"\n{{t}}\t<dim>{STEPS}</dim>\n{{t}}\t<dim>{WIDTH}</dim>"
    with open(path, "w") as xml, open(os.path.splitext(path)[0] + ".bin", "wb") as bin_:
        xml.write('<?xml version="1.0"?>\n<net name="large" version="11">\n\t<layers>\n')
        t2, t5 = "\t\t", "\t" * 5
        xml.write(_layer(t2, 0, "X", "Parameter", 'shape="4,16" element_type="f32"', (),
                         (("0", x_dims, "X"),)))
        xml.write(_layer(t2, 1, "H0", "Parameter", 'shape="1,16" element_type="f32"', (),
                         (("0", _DIMS, "H0"),)))
        # The TensorIterator: x_t (one row of X) + h, then the body's chain; h carried, every
        # h emitted along axis 0.
        t3, t4 = "\t" * 3, "\t" * 4
        xml.write(
            f'{t2}<layer id="2" name="TensorIterator_2" type="TensorIterator" '
            f'version="opset1">\n{t3}<port_map>\n'
            f'{t4}<input axis="0" external_port_id="0" internal_layer_id="0" start="0" '
            'end="-1" stride="1" part_size="1" />\n'
            f'{t4}<input external_port_id="1" internal_layer_id="1" />\n'
            f'{t4}<output axis="0" external_port_id="2" internal_layer_id="{RESULT_Y}" start="0" '
            'end="-1" stride="1" part_size="1" />\n'
            f'{t4}<output external_port_id="3" internal_layer_id="{RESULT_H}" />\n'
            f'{t3}</port_map>\n{t3}<back_edges>\n{t4}<edge from-layer="{RESULT_H}" to-layer="1" />'
            f'\n{t3}</back_edges>\n{t3}<input>\n{_port(t4, "0", x_dims)}\n'
            f'{_port(t4, "1", _DIMS)}\n{t3}</input>\n{t3}<output>\n'
            f'{_port(t4, "2", x_dims, "Y")}\n{_port(t4, "3", _DIMS, "H")}\n{t3}</output>\n'
            f"{t3}<body>\n{t4}<layers>\n")
        xml.write(_layer(t5, 0, "xt", "Parameter", 'shape="1,16" element_type="f32"', (),
                         (("0", _DIMS, "xt"),)))
        xml.write(_layer(t5, 1, "h", "Parameter", 'shape="1,16" element_type="f32"', (),
                         (("0", _DIMS, "h"),)))
        xml.write(_layer(t5, 2, "Add_in", "Add", 'auto_broadcast="numpy"',
                         (("0", _DIMS), ("1", _DIMS)), (("2", _DIMS, "h_in"),)))
        edges = [(0, "0", 2, "0"), (1, "0", 2, "1")]
        lid, source, offset = _chain(xml, bin_, t5, 3, (2, "2"), body_blocks, add, mul, 0,
                                     edges, "b")
        for rid, name in ((RESULT_Y, "res_y"), (RESULT_H, "res_h")):
            xml.write(_layer(t5, rid, name, "Result", None, (("0", _DIMS),), ()))
            edges.append((*source, rid, "0"))
        xml.write(f"{t4}</layers>\n{_edges(t4, edges)}{t3}</body>\n{t2}</layer>\n")
        edges = [(0, "0", 2, "0"), (1, "0", 2, "1")]
        lid, source, offset = _chain(xml, bin_, t2, 3, (2, "3"), blocks - body_blocks,
                                     add[body_blocks:], mul[body_blocks:], offset, edges, "t")
        xml.write(_layer(t2, lid, "Z", "Result", None, (("0", _DIMS),), ()))
        xml.write(_layer(t2, lid + 1, "Y", "Result", None, (("0", x_dims),), ()))
        edges += [(*source, lid, "0"), (2, "2", lid + 1, "0")]
        xml.write(f"\t</layers>\n{_edges(t2[:1], edges)}</net>\n")
    return xml_path


def expected(blocks: int, x, h0, seed: int = 0) -> dict:
    """The IR's outputs for feeds X = `x`, H0 = `h0`: "Y", every h of the loop (stacked on axis
    0), and the top chain's result (named by its last Clamp's tensor name)."""
    add, mul = constants(blocks, seed)
    body_blocks = blocks // 2

    def chain(h, a, m):
        for ak, mk in zip(a, m):
            h = np.clip((h + ak) * mk, np.float32(-3), np.float32(3))
        return h

    h, ys = h0, []
    for t in range(x.shape[0]):
        h = chain(h + x[t:t + 1], add[:body_blocks], mul[:body_blocks])
        ys.append(h)
    z = chain(h, add[body_blocks:], mul[body_blocks:])
    return {"Y": np.concatenate(ys, 0), f"t{blocks - body_blocks - 1}": z}


def blocks_for(xml_bytes: int) -> int:
    """About how many blocks make an IR of `xml_bytes`."""
    return max(2, xml_bytes // 2070)


# The child reads its peak RSS from /proc (VmHWM, KiB) where there is one: on Linux a child's
# ru_maxrss starts at its parent's RSS at fork, which would hide a small peak under a large
# parent (pytest); elsewhere ru_maxrss (KiB on Linux, bytes on macOS: the fallback is rough).
_CHILD = """
import json, resource, sys, time
import numpy, cyloop
from cyloop.frontends import openvino

def high_water():
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

base = high_water()
start = time.perf_counter()
loaded = openvino.read_graph(sys.argv[1]) if sys.argv[2] == "graph" else cyloop.load(sys.argv[1])
seconds = time.perf_counter() - start
peak = high_water()
print(json.dumps({"base_kib": base, "above_base_kib": peak - base, "seconds": seconds}))
"""


def measure(xml_path, phase: str = "load") -> dict:
    """Peak RSS above the baseline (KiB) and seconds of ``cyloop.load(xml_path)`` (phase "load")
    or of the reader alone (phase "graph"), in a fresh process; with the file's size."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", _CHILD, os.fspath(xml_path), phase],
                          capture_output=True, text=True, env=env, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["xml_bytes"] = os.path.getsize(xml_path)
    return result


def main(argv):
    out_dir = argv[0]
    megabytes = float(argv[1]) if len(argv) > 1 and not argv[1].startswith("-") else 200
    phase = argv[argv.index("--phase") + 1] if "--phase" in argv else "load"
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"large_{megabytes:g}mb.xml")
    if not os.path.exists(path):
        write(path, blocks_for(int(megabytes * 2**20)))
    result = measure(path, phase)
    mib = 2**20
    print(f"{path}: xml {result['xml_bytes'] / mib:.1f} MiB, bin "
          f"{os.path.getsize(path[:-4] + '.bin') / mib:.1f} MiB; {phase}: peak RSS "
          f"{result['above_base_kib'] / 1024:.1f} MiB above the baseline "
          f"({result['base_kib'] / 1024:.1f} MiB), "
          f"{result['above_base_kib'] * 1024 / result['xml_bytes']:.2f}x the xml, "
          f"{result['seconds']:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
