"""What a compiled model chose, read from its structured facts: its loop's plan, the plan's fused
steps, the kernels' measured choices and where loop results live."""

from cyloop.abilities import abilities_of

__all__ = ["fused_making", "loop_plan", "measured_steps", "placements"]


def loop_plan(model):
    """The plan (`engine.plan.LoopPlan`) of `model`'s one loop."""
    (loop,) = model.plan().loops
    return loop


def fused_making(loop, kind, value=None) -> bool:
    """Whether `loop`'s plan has a step of `kind` fused, making `value` first (any if None)."""
    return any(f.kind == kind and (value is None or f.makes[0] == value) for f in loop.fused)


def measured_steps(model):
    """The measured choices (`Measured`) of the kernels in `model`'s loop bodies, in body order:
    tests force each candidate in turn with ``fix``."""
    return [abilities_of(step.fn).measured for loop in model._compiled.loops
            for step in loop.facts().body.steps if abilities_of(step.fn).measured is not None]


def placements(model):
    """Every `Measured` choice of where a loop result lives (`MeasuredPlacement`), in the
    model's Cython loop drivers, nested loops included."""
    found = []

    def walk(loops):
        for loop in loops:
            found.extend(getattr(loop, "placements", {}).values())
            walk(loop.loops)

    walk(model._compiled.loops)
    return found
