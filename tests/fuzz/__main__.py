"""The long fuzz run, or the replay of one saved reproducer.

    python -m tests.fuzz --models 10000 --feeds 2000        # prints counts per class and outcome
    python -m tests.fuzz --replay /tmp/cyloop-fuzz-XXXX/000-escape-TypeError-onnx.loop

Run from the checkout (``tests`` is imported from it). One worker process runs every case;
reproducers of failures are saved under ``--out`` (default: a new temporary directory).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

DRIVERS = {"both": ("cython", "python"), "cython": ("cython",), "python": ("python",),
           "default": (None,)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=1000, help="mutated-model cases")
    parser.add_argument("--feeds", type=int, default=200, help="mutated-feed cases")
    parser.add_argument("--formats", default="onnx,ir", help="seed formats (onnx,ir)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed")
    parser.add_argument("--batch", type=int, default=64, help="cases per batch sent to the worker")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    parser.add_argument("--address-space", type=int, default=4096,
                        help="the worker's RLIMIT_AS, MiB")
    parser.add_argument("--max-iterations", type=int, default=10**5)
    parser.add_argument("--time-limit", type=float, default=10.0,
                        help="cyloop.load(time_limit=), where it is accepted")
    parser.add_argument("--memory-limit", type=int, default=1024,
                        help="cyloop.load(memory_limit=) in MiB, where it is accepted")
    parser.add_argument("--drivers", choices=sorted(DRIVERS), default="both",
                        help="drivers drawn per case (default: the CYLOOP_PURE_PYTHON one)")
    parser.add_argument("--out", help="where reproducers go (default: a new temporary dir)")
    parser.add_argument("--replay", help="run one saved reproducer in this process")
    args = parser.parse_args(argv)

    from .harness import Report, Worker, replay

    if args.replay:
        return replay(args.replay)

    from .campaign import campaign
    from .corpus import ir_seeds, onnx_seeds
    from .mutate import feed_cases, model_cases

    out = Path(args.out or tempfile.mkdtemp(prefix="cyloop-fuzz-"))
    out.mkdir(parents=True, exist_ok=True)
    formats = set(args.formats.split(","))
    seeds = (onnx_seeds() if "onnx" in formats else []) + \
        (ir_seeds(out / "seeds") if "ir" in formats else [])
    drivers = DRIVERS[args.drivers]
    print(f"reproducers and logs: {out}", flush=True)
    start = time.monotonic()
    report = Report()
    last = [0.0]

    def progress(rep):
        now = time.monotonic()
        if now - last[0] >= 10:
            last[0] = now
            print(f"  {rep.cases} cases, {rep.cases / (now - start):.0f}/s, "
                  f"{len(rep.failures)} failures", flush=True)

    with Worker(out / "worker", timeout=args.timeout, address_space=args.address_space << 20,
                max_iterations=args.max_iterations, time_limit=args.time_limit,
                memory_limit=args.memory_limit << 20) as worker:
        for name, strategy, count in (("models", model_cases(seeds, drivers), args.models),
                                      ("feeds", feed_cases(seeds, drivers), args.feeds)):
            print(f"{name}: {count} cases", flush=True)
            campaign(worker, strategy, count, report, save_dir=out / "failures",
                     batch=args.batch, seed=args.seed, on_batch=progress)
        print(f"cyloop.load options: {worker.load_options}; worker starts: {worker.starts}")
    report.seconds = time.monotonic() - start
    print(f"\n{report.cases} cases in {report.seconds:.0f} s "
          f"({report.cases / max(report.seconds, 1e-9):.0f}/s)\n")
    print(report.table())
    print(f"\nslowest cases:\n{report.describe_slowest()}")
    if report.failures:
        print(f"\n{len(report.failures)} failures (reproducers under {out / 'failures'}):")
        print(report.describe_failures(limit=50))
        return 1
    print("\nno failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
