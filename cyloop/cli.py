"""The `cyloop` command.

``cyloop run`` runs the built-in example (an RNN loop built with the IR builder) and prints each
output's name, shape, dtype and first values, and the time taken; ``cyloop plan`` prints that
example's memory plan. Model files arrive with the ONNX and OpenVINO frontends.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from . import __version__
from ._compile import DEFAULT_MAX_ITERATIONS
from .errors import CyloopError


def _build_example(args):
    from . import _examples
    from .model import Model

    graph, feeds = _examples.rnn(steps=args.steps)
    model = Model(graph, driver=args.driver, max_iterations=args.max_iterations)
    return model, feeds


def _describe(name: str, value: np.ndarray, count: int = 5) -> str:
    flat = value.reshape(-1)[:count]
    more = " ..." if value.size > count else ""
    values = np.array2string(flat, precision=4, separator=", ", floatmode="maxprec")
    return f"{name}: shape {list(value.shape)} {value.dtype} {values[:-1]}{more}]"


def _cmd_run(args) -> int:
    model, feeds = _build_example(args)
    print(f"example: RNN loop h = tanh(x_t W + h U + b), {args.steps} steps "
          f"({model.settings.driver} driver)")
    start = time.perf_counter()
    outputs = model.run(feeds)
    elapsed = time.perf_counter() - start
    for name, value in outputs.items():
        print(_describe(name, value))
    print(f"time: {elapsed * 1e3:.3f} ms")
    return 0


def _cmd_plan(args) -> int:
    model, feeds = _build_example(args)
    model.run(feeds)
    print(model.plan())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cyloop", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"cyloop {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, helptext in (("run", "run the built-in example and print its outputs"),
                           ("plan", "print the built-in example's memory plan")):
        cmd = sub.add_parser(name, help=helptext)
        cmd.add_argument("--steps", type=int, default=64, help="example sequence length")
        cmd.add_argument("--driver", choices=["cython", "python"], default=None,
                         help="loop driver (default: cython, or python if CYLOOP_PURE_PYTHON=1)")
        cmd.add_argument("--max-iterations", type=int, default=DEFAULT_MAX_ITERATIONS,
                         help="stop any loop that reaches this many iterations")
    args = parser.parse_args(argv)
    try:
        return {"run": _cmd_run, "plan": _cmd_plan}[args.command](args)
    except (CyloopError, OSError) as e:
        if args.debug:
            raise
        print(f"cyloop: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
