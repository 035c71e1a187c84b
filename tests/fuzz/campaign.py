"""A fuzzing campaign: hypothesis draws cases from a strategy, the worker runs them in batches,
the report counts the outcomes. Used by the CI test and by ``python -m tests.fuzz``."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from .harness import Report, Worker


def campaign(worker: Worker, strategy, count: int, report: Report, *, save_dir=None,
             batch: int = 32, derandomize: bool = False, seed: int = 0, on_batch=None) -> Report:
    """Draw `count` cases from `strategy` and run them on `worker`, `batch` at a time; add each
    outcome to `report` (failures saved under `save_dir`). `derandomize` (CI) makes the cases
    a function of the code alone; otherwise `seed` picks them."""
    buffer: list[dict] = []
    report.memory_limited = worker.memory_limited
    if count <= 0:
        return report

    def flush():
        for case, outcome in zip(buffer, worker.run(buffer)):
            report.add(case, outcome, save_dir)
        buffer.clear()
        report.memory_limited = worker.memory_limited
        if on_batch is not None:
            on_batch(report)

    # Only generation: a failure is recorded (and saved), not raised, so nothing is shrunk and
    # every case is run once.
    @settings(max_examples=count, derandomize=derandomize, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck),
              print_blob=False)
    @given(strategy)
    def generate(case):
        case["id"] = report.cases + len(buffer)
        buffer.append(case)
        if len(buffer) >= batch:
            flush()

    if not derandomize:
        generate = hypothesis_seed(seed)(generate)
    generate()
    if buffer:
        flush()
    return report
