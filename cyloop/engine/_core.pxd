# Declarations of the Cython core; the bodies are in _core.pyx.

cimport numpy as cnp


cdef enum:
    MAX_SIG = 256  # entries of a step's input signature (dtype, rank, dims per input)
    MAX_DIMS = 64  # dims of a view the driver builds (numpy's own limit)


cdef class RunLimits:
    cdef readonly object max_iterations  # iterations of every loop of a run together, or None
    cdef readonly object time_limit  # seconds, or None
    cdef readonly object memory_limit  # bytes of one planner allocation, or None
    cdef readonly long long left  # iterations the run may still make
    cdef long long check_at  # a checkpoint is due when `left` drops below this
    cdef long long stride  # iterations between clock reads (adapted to the loops' pace)
    cdef double started, checked, deadline

    cdef int tick(self, str label, Py_ssize_t i) except -1
    cdef long long ticks_free(self)
    cdef int _checkpoint(self, str label, Py_ssize_t i) except -1
    cpdef int before(self, str label, str work) except -1
    cdef void _schedule(self)


cdef class Program:
    cdef readonly object compiled
    cdef list fns
    cdef list template
    cdef list sigs
    cdef list scalar_ops
    cdef list scalar_taken
    cdef list casts
    cdef signed char[::1] rows  # per step: 1 where its kernel takes a row by an index
    cdef Py_ssize_t n_steps
    cdef Py_ssize_t n_slots
    # Per step (a large graph has hundreds of thousands): 32-bit slot tables, 8-bit flags.
    cdef int[::1] in_off
    cdef int[::1] in_idx
    cdef int[::1] out_off
    cdef int[::1] out_idx
    cdef int[::1] kill_off
    cdef int[::1] kill_idx
    cdef signed char[::1] multi
    cdef signed char[::1] positional_out
    cdef signed char[::1] keeps
    cdef Py_ssize_t[::1] overwrites
    cdef signed char[::1] planned
    cdef Py_ssize_t[::1] scalar_calls
    cdef signed char[::1] wrapping
    cdef Py_ssize_t[::1] generation
    cdef Py_ssize_t[::1] input_slots
    cdef Py_ssize_t[::1] output_slots
    # The shape arithmetic remembered per input shapes (engine/shape_memo.py): per step, 1 for
    # its steps; per slot, its place among the values remembered, or -1; the inputs whose shapes
    # key them, their slots, and the values by key (None: nothing remembered).
    cdef signed char[::1] memo_step
    cdef Py_ssize_t[::1] memo_place
    cdef tuple memo_keys
    cdef tuple memo_slots
    cdef dict memo

    cdef str _label(self, Py_ssize_t s)
    cdef object _scalar_call(self, Py_ssize_t s, list slots)
    cdef object _spare_input(self, Py_ssize_t s, list slots)
    cdef object _kernel_call(self, Py_ssize_t s, list slots, list dests)
    cdef int execute(self, list slots, list dests, RunLimits timed=*, bint skip=*,
                     list made=*) except -1
    cdef _remember(self, tuple key, list made)


cdef class _Counters:
    # One field per name in settings.COUNTERS, summed over every call of a loop.
    cdef public long long runs
    cdef public long long iterations
    cdef public long long copies
    cdef public long long bytes_copied
    cdef public long long steady_bytes_copied
    cdef public long long growth_bytes_copied
    cdef public long long allocations
    cdef public long long bytes_allocated
    cdef public long long in_place_writes
    cdef public long long last_preallocated_bytes
    cdef public long long last_iterations
    cdef public long long steady_iterations
    cdef public long long hoist_chunks
    cdef public long long hoisted_bytes
    cdef public long long step_calls
    cdef public long long stepped_iterations


cdef class _CoresSample:
    # A run that is a sample of the trial of where the loop's matrix products run
    # (`LoopDriver.products`): what it reports when it ends.
    cdef object choice  # the Measured choice (LoopDriver.products)
    cdef object name  # the candidate this run takes (accel/gemm.py, `product_candidates`)
    cdef object trial  # the trial it is a sample of
    cdef object split_before  # products_split() as the run began (none split: no choice)


cdef class _Run:
    # The per-call state of one loop run: where its values are, what it writes into.
    cdef object run  # the ir.LoopRun: trip count, first condition, slicings, where to stop
    cdef Py_ssize_t n_max, stop_at, exact, bound  # -1: none
    cdef list args
    cdef list sliced  # _Sliced, for the parts the body reads
    cdef list fixed  # invariants and captures, as read-only views
    cdef Py_ssize_t[::1] fixed_slot
    cdef list values  # the carried values
    cdef list last_values
    cdef list concats  # _Concat, every concatenated output
    cdef list per_iteration  # ... those emitted iteration by iteration
    cdef list in_place  # ... those whose result a kernel writes straight into its slot
    cdef list emitted  # ... those filled a chunk at a time by the hoisted part
    cdef list pools  # _Pool, one per carried result written in place
    cdef list dests  # slot -> the destination its producer writes into, or None
    cdef list hoisted  # the current chunk of hoisted rows, as _Sliced
    cdef dict computed  # the hoisted part's values computed once a run (chunks.Hoist.once)
    cdef Py_ssize_t chunk_start, chunk_end, hoist_limit, row_bytes
    cdef list placing  # (Measured, candidate, trial) of each placement this run times
    cdef _CoresSample cores  # where this run's products run, on trial; None: not timed
    cdef double started  # perf_counter() when the run's iterations began
    cdef object steps_out  # the _Concat a `RecurrentSteps` call fills, None: no such calls
    cdef bint stepped  # whether a call of the steps ran in this run
    cdef bint steps_go  # after a call of the steps: the condition its last iteration gave


cdef class LoopDriver:
    cdef readonly object spec
    cdef readonly object label
    cdef readonly object node  # the loop node as the model names it (ir.NodeRef), or None
    cdef readonly tuple not_hoisted  # plan.NotHoisted records of the body's nodes
    cdef readonly Program body
    cdef readonly dict destinations
    cdef readonly dict placements  # result slot -> the Measured choice of a MeasuredPlacement
    cdef readonly object products  # the Measured choice of where the matrix products run, or None
    cdef readonly bint runs_products  # whether its kernels' products follow that choice
    cdef readonly _Counters tally
    cdef object settings
    cdef Py_ssize_t n_params
    cdef Py_ssize_t n_captures
    cdef Py_ssize_t iter_slot
    cdef Py_ssize_t cond_slot
    cdef Py_ssize_t cond_result_slot
    cdef int iter_type
    cdef list carried
    cdef list sliced
    cdef list invariants
    cdef list capture_slots
    cdef Py_ssize_t[::1] fixed_slot  # the slots of the invariants, then of the captures
    cdef list producer
    # Slot numbers the iteration loop indexes with, as C arrays (no Python ints per iteration).
    cdef Py_ssize_t[::1] carried_param
    cdef Py_ssize_t[::1] carried_result
    cdef Py_ssize_t[::1] last_index
    cdef Py_ssize_t[::1] last_slot
    cdef dict last_carried  # output index -> index into the run's carried values
    cdef Py_ssize_t[::1] reset_slots
    cdef readonly object hoist
    cdef list hoist_slots
    cdef list hoist_bound
    # Hoisted slot -> the view a run bound as every row of a value computed once a run, while
    # that value is one nobody writes (`_same_row`): the next runs bind it again.
    cdef dict same_rows
    cdef readonly object steps  # destinations.RecurrentSteps, or None
    cdef Py_ssize_t steps_row_slot  # ... the slot of its step's per-step argument
    cdef tuple steps_inputs  # ... the slots of its step's arguments
    # ... and its step's abilities (cyloop/abilities.py `Abilities`) that `_run_steps` reads
    cdef object steps_for
    cdef bint steps_hold
    cdef object steps_measured
    # Where the state its calls carry lives within a call, when it is measured (a
    # MeasuredPlacement's result slot, and a Measured choice timed a call at a time), or -1, None.
    cdef Py_ssize_t steps_slot
    cdef readonly object steps_placement
    cdef bint steps_ran  # whether the last run made a call of the steps
    # What a run's concatenated outputs are made from that only the spec decides, one
    # _ConcatOutput per output (in the spec's order), and the carried values' outer operands.
    cdef list concat_outputs
    cdef list carried_outer

    cdef tuple _loop(self, list args, RunLimits limits)
    cdef tuple _iterate(self, _Run r, RunLimits limits)
    cdef _Run _start(self, list args, RunLimits limits)
    cdef int _next_chunk(self, _Run r, Py_ssize_t i) except -1
    cdef Py_ssize_t _run_steps(self, _Run r, Py_ssize_t i, list slots,
                               RunLimits limits) except -1
    cdef object _hoisted(self, _Run r, Py_ssize_t slot)
    cdef Py_ssize_t _while_true(self, _Run r, Py_ssize_t i, Py_ssize_t count,
                                Py_ssize_t slot) except -1
    cdef void _reset_slots(self, list slots)
    cdef tuple _zero_iterations(self, _Run r, dict finished)
    cdef tuple _finish(self, _Run r, Py_ssize_t n)
