"""What a built kernel can do besides being called, as one typed record the engine reads.

A kernel's registration traits (`KernelDef`, kernels/registry.py) hold for every node of its op.
These hold for one built kernel, the callable a factory made for one node's attributes: the
measured choice it makes, whether its products follow the loop's choice of cores, whether it is a
recurrent step that runs many steps in one call. A kernel states them with `declare` where it is
built; the engine reads them with `abilities_of` where it compiles, plans or starts a run, never
once an iteration.

This module imports nothing of cyloop's but its records' base (`_records`): the products in
`accel/`, below the kernels, state theirs too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._records import FrozenRecord, set_field

__all__ = ["NO_ABILITIES", "Abilities", "GemmForm", "Recurrence", "abilities_of", "declare"]


class Recurrence(FrozenRecord):
    """A recurrent step, as a built kernel declares itself (its ``recurrence`` ability):
    argument `per_step` is new each step (x_t, a row of a hoisted projection), and result j is
    the next step's argument ``feedback[j]`` (h', c'); its other arguments stay the same.

    Such a kernel has ``steps_for(*args)`` (an ability too): for a step's arguments, None (a
    choice still being measured, or operands its `steps` do not take), or ``steps(args, rows,
    outs, staged)``, which runs ``len(rows)`` consecutive steps in one call, computing value for
    value what that many calls would: the first on `args` with ``rows[0]`` as argument
    `per_step`, each later one on the results of the one before and its own row; each step's
    first result is written into its row of `outs` (the slots of an emitted output), where the
    next step reads it, or, with `staged`, made in a contiguous buffer the next step reads and
    copied there. It returns the last step's results (a tuple, one per result, whether or not
    the kernel is ``multi``), or None, having written nothing, for operands it does not take."""

    _fields = ("per_step", "feedback")

    def __init__(self, per_step: int, feedback: tuple[int, ...]):
        set_field(self, "per_step", per_step)
        set_field(self, "feedback", feedback)


class GemmForm(FrozenRecord):
    """An ONNX Gemm kernel's own parts, which its form on many rows at once reads (its ``gemm``
    ability; engine/chunks.py `gemm`): ``alpha * A @ B' + beta * C``, B' being B transposed with
    `trans_b`, and `product`, the kernel's product of A by B (taking B as the node has it)."""

    _fields = ("alpha", "beta", "trans_b", "product")

    def __init__(self, alpha: float, beta: float, trans_b: bool, product: Callable):
        set_field(self, "alpha", alpha)
        set_field(self, "beta", beta)
        set_field(self, "trans_b", trans_b)
        set_field(self, "product", product)


class Abilities(FrozenRecord):
    """What one built kernel can do, each field's default being that it cannot.

    - `measured`: its measured choice of equivalent formulations (an `accel.measured.Measured`).
      The engine fixes it to its default when tuning is off and the plan shows it; a kernel
      with one holds state of its own node, so no other node shares it (engine/compile.py).
    - `products`: its matrix products go through `accel.gemm.matmul` (or `weight_product`), so
      that a loop's choice of where they run, one core or two (engine/_core.pyx
      `LoopDriver.products`), reaches them. A loop measures that choice only if a kernel of its
      body or of its hoisted part says this.
    - `cores`: a layer's own choice of where its products run, where no loop decides it
      (kernels/recurrent/sequences.py `_Cores`); fixed and shown as `measured` is.
    - `recurrence`: it is a recurrent step whose results are its own next arguments (a
      `Recurrence`); the loop driver may then run many iterations of a body that is that step
      alone in one call (engine/destinations.py `plan_steps`), as `steps_for` offers them.
    - `steps_for`: ``steps_for(*args)``, a recurrent step's offer of many steps in one call (see
      `Recurrence`). A measured choice's candidates state theirs too, and the choice offers its
      chosen candidate's (`Measured.steps_for`).
    - `steps_hold`: an answer None of `steps_for` holds for the rest of a run (the run's cores
      and its operands' kinds decide it, not a trial). Without it, the question is asked again
      while `measured` is on trial.
    - `updates_first`: it takes ``out=`` and, given its first input's own buffer as ``out=``,
      updates that buffer in place (a scatter writing a few places of a large array). The
      engine hands it that buffer where the input dies at the step and nothing else holds it
      (kernels/registry.py `type_keeping`: `FIRST_INPUT`), so that a loop updating a carried
      buffer a row at a time copies no buffer a step. Its result has its first input's shape
      (the hoister reads a carried buffer's shape once a run on it).
    - `gemm`: it is ONNX's Gemm, whose parts (a `GemmForm`) its hoisted form reads.
    - `casts_to`: it converts its one input to this numpy type as ``np.asarray(x).astype(t)``
      does (given ``out=``, as ``np.copyto(out, x, casting="unsafe")``), so that the runner may
      convert an array or scalar of a number type itself, without calling it (a loop's body
      converts its counters every iteration: engine/_core.pyx `_cast`).
    - `row_by_index`: given an array and one integer (a numpy integer, or a 0-d integer array)
      in range, its result has the values of the array's row at that index along axis 0 (ONNX's
      Gather on axis 0), so that the runner may hand over a read-only view of that row instead
      of calling it (a loop's body reads a row of a sequence each iteration: engine/_core.pyx
      `_row_at`).
    """

    _fields = ("measured", "products", "cores", "recurrence", "steps_for", "steps_hold",
               "updates_first", "gemm", "casts_to", "row_by_index")

    def __init__(self, measured: Any = None, products: bool = False, cores: Any = None,
                 recurrence: Recurrence | None = None,
                 steps_for: Callable[..., Callable | None] | None = None,
                 steps_hold: bool = False, updates_first: bool = False,
                 gemm: GemmForm | None = None, casts_to: Any = None,
                 row_by_index: bool = False):
        # (`measured`: an accel.measured.Measured, not imported here, see the module; `cores`:
        # a kernels.recurrent.sequences._Cores)
        if recurrence is not None and steps_for is None:
            raise ValueError("a recurrent step declares its steps_for too")
        if steps_hold and steps_for is None:
            raise ValueError("steps_hold says how steps_for answers: declare steps_for")
        set_field(self, "measured", measured)
        set_field(self, "products", products)
        set_field(self, "cores", cores)
        set_field(self, "recurrence", recurrence)
        set_field(self, "steps_for", steps_for)
        set_field(self, "steps_hold", steps_hold)
        set_field(self, "updates_first", updates_first)
        set_field(self, "gemm", gemm)
        set_field(self, "casts_to", casts_to)  # (a numpy dtype: numpy is not imported here)
        set_field(self, "row_by_index", row_by_index)

    @property
    def own_node_state(self) -> bool:
        """Whether the kernel keeps a choice of its own node's (`measured`, `cores`)."""
        return self.measured is not None or self.cores is not None


NO_ABILITIES = Abilities()  # what a kernel that declares nothing (a ufunc, a plain function) has

# Where `declare` keeps a kernel's record: one attribute, read by `abilities_of` alone.
_ATTRIBUTE = "_cyloop_abilities"


def declare(fn, like: Abilities | None = None, /, **abilities):
    """`fn`, a built kernel (or a measured choice's candidate), declaring `abilities` (the
    fields of `Abilities`); the fields not given keep what `like` says, or, without it, what
    `fn` declared before (nothing: the defaults). Returns `fn`."""
    record = (abilities_of(fn) if like is None else like).replace(**abilities)
    setattr(fn, _ATTRIBUTE, record)
    return fn


def abilities_of(fn) -> Abilities:
    """What `fn` declared (`declare`); `NO_ABILITIES` for a kernel that declared nothing."""
    return getattr(fn, _ATTRIBUTE, NO_ABILITIES)
