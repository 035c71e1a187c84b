# Declarations of the Cython core; the bodies are in _core.pyx.

cimport numpy as cnp


cdef class Program:
    cdef readonly object compiled
    cdef list fns
    cdef list labels
    cdef list template
    cdef list sigs
    cdef list scalar_ops
    cdef Py_ssize_t n_steps
    cdef Py_ssize_t n_slots
    cdef Py_ssize_t[::1] in_off
    cdef Py_ssize_t[::1] in_idx
    cdef Py_ssize_t[::1] out_off
    cdef Py_ssize_t[::1] out_idx
    cdef Py_ssize_t[::1] kill_off
    cdef Py_ssize_t[::1] kill_idx
    cdef Py_ssize_t[::1] multi
    cdef Py_ssize_t[::1] positional_out
    cdef Py_ssize_t[::1] planned
    cdef Py_ssize_t[::1] scalar_calls
    cdef Py_ssize_t[::1] generation
    cdef Py_ssize_t[::1] input_slots
    cdef Py_ssize_t[::1] output_slots

    cdef object _scalar_call(self, Py_ssize_t s, list slots)
    cdef object _kernel_call(self, Py_ssize_t s, list slots, list dests)
    cdef int execute(self, list slots, list dests) except -1


cdef class LoopDriver:
    cdef readonly object spec
    cdef readonly object label
    cdef readonly Program body
    cdef readonly dict destinations
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
    cdef list outputs
    cdef list last_outputs
    cdef list producer
    # Slot numbers the iteration loop indexes with, as C arrays (no Python ints per iteration).
    cdef Py_ssize_t[::1] carried_param
    cdef Py_ssize_t[::1] carried_result
    cdef Py_ssize_t[::1] last_index
    cdef Py_ssize_t[::1] last_slot
    cdef Py_ssize_t[::1] reset_slots
    cdef readonly object hoist
    cdef list hoist_slots
    cdef list hoist_bound
    # counters, accumulated over every call
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
