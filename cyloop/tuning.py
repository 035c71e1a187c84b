"""Every tuning constant of cyloop's Python code, each with the reason for its value (those of
its native code are in include/cyloop/tuning.h). A tuning constant sets how cyloop goes about
its work, never what a run computes; the modules that use one import it from here.
"""

from __future__ import annotations

__all__ = ["AFFINITY_EVERY", "CHECK_LATE", "CHECK_SOON", "CHUNK_BUDGETS", "CHUNK_ROUNDS", "CLEAR",
           "CLOSE", "COLUMNS_SCRATCH", "EARLY_ROUNDS", "FIRST_CHUNK_ROWS", "FIRST_GROWING_BYTES",
           "FOLDED_SIZE", "HASH_CHUNK", "HOIST_ROUNDS", "HOIST_WAIT_RUNS", "IR_CHUNK",
           "MAPPED_BYTES", "MAX_CHUNK_ROWS", "MAX_CLOCK_STRIDE", "MAX_KEYS", "MAX_ROUNDS_FACTOR",
           "MIN_CHUNK_ROWS", "OPENSSL_FROM", "PAYBACK", "PROBED_KEYS", "PROBED_VALUES",
           "PROGRESS_EVERY", "QUIET_KEEP", "ROUNDS", "RUN_ROUNDS", "SHAPE_MEMO_BYTES",
           "SHAPE_MEMO_KEYS", "SMALL_WEIGHT_BYTES", "SPLIT_ROUNDS", "TIMER_SAMPLES"]

# -- measured choices (accel/measured.py) --------------------------------------------------------

# Timed calls each candidate of a trial takes (`Measured`'s `rounds`) where its samples are calls
# of a kernel: a median of five shrugs off an outlier or two (a page fault, a noisy neighbour).
ROUNDS = 5
# ... where its samples are whole runs of a loop, or whole calls of a layer outside loops (where a
# result lives, where products run: engine/_core.pyx, kernels/recurrent/sequences.py): each
# round is a run the user waits for, and the slower candidate's are half of them.
RUN_ROUNDS = 2
# ... whether a loop hoists (engine/hoist_choice.py), whole runs too: the loops it matters on are
# short ones of small steps, whose runs cost little each and move more from run to run.
HOIST_ROUNDS = 4
# Runs that choice leaves to a loop driver's own trials before it counts runs again: a trial of a
# kernel the driver calls every run ends within a few dozen runs (three candidates of ROUNDS
# samples and a warm-up each); one whose key no later run meets would hold the choice for good.
HOIST_WAIT_RUNS = 64
# ... the hoisted chunks' size (engine/chunks.py): a sample is a chunk and the iterations that
# read it, many rows already, and three sizes take turns.
CHUNK_ROUNDS = 3
# ... a Split's views or copies (kernels/_shapes.py), timed by period: a sample is one iteration
# with whatever else it does, cheap to take and noisy.
SPLIT_ROUNDS = 9
# Keys (operand shapes) a measured choice keeps a trial for; past them, new keys take the default
# untimed, so that an unbounded series of shapes (a growing operand) keeps no trial per shape.
MAX_KEYS = 16
# Pairs of clock readings whose median is a timing's own cost (`timer_cost`, once a process):
# odd, so that the median is one of them, and enough that a pair or two preempted do not move it.
TIMER_SAMPLES = 201

# Medians within this fraction of each other are too close to call on a few samples (a noisy
# neighbour, a page fault): each candidate runs `rounds` more, up to this factor times `rounds`.
CLOSE = 0.1
MAX_ROUNDS_FACTOR = 3
# A candidate whose fastest sample is this many times the slowest of the best one's, after
# EARLY_ROUNDS timed calls each, drops out of the trial then: a clearly slower candidate (a GEMM
# orientation far off the best, say) does not keep its turns for all the rounds. Trials run in a
# model's first runs, so every turn it keeps costs the user.
CLEAR = 1.3
EARLY_ROUNDS = 2
# A key's trial opens once the default has made PAYBACK times as many calls on it (its first one
# aside) as the trial adds of the other candidates: the work done so far is the best guess of
# the work to come, and a trial whose candidates take up to twice the default's time then costs
# at most a quarter of it, paid back by a candidate a quarter faster.
PAYBACK = 4

# -- a run's loops (engine/) ----------------------------------------------------------------------

# A progress callback hears from a loop every this many iterations, and once when it ends; the
# Cython driver also lets other Python threads run this often (it holds the GIL otherwise).
PROGRESS_EVERY = 1024
# Bytes a concatenated output takes at first when its length is not known (a while loop, a loop
# that may stop early); it doubles each time the loop runs past it, so a short loop holds little
# and a long one copies its rows about once more in all.
FIRST_GROWING_BYTES = 64 * 1024

# Run limits (engine/_core.pyx, `RunLimits`): loops read the clock every `stride` iterations;
# the stride doubles while reads come under CHECK_SOON seconds apart and halves past CHECK_LATE,
# so a time limit is read every few milliseconds of work whatever an iteration costs, never
# every iteration, and at most every MAX_CLOCK_STRIDE iterations.
CHECK_SOON = 1e-3
CHECK_LATE = 1e-2
MAX_CLOCK_STRIDE = 1 << 16

# Hoisting (engine/hoist.py): the first chunk is small, since many loops stop early and it sizes
# the rest; later chunks hold about one of CHUNK_BUDGETS' bytes of hoisted rows, the one that runs
# fastest here (a measured choice, engine/chunks.py; the first is the default): bigger chunks make
# bigger GEMMs, smaller ones stay in a smaller cache until the body reads them. The largest is
# the memory a chunk may take (larger chunks ran no faster, and raised a loop's peak memory over
# its outputs: docs/performance.md). Whatever the budget, a chunk has MIN_CHUNK_ROWS to
# MAX_CHUNK_ROWS rows.
CHUNK_BUDGETS = {"512 KiB": 512 * 1024, "256 KiB": 256 * 1024, "128 KiB": 128 * 1024}
FIRST_CHUNK_ROWS = 16
MIN_CHUNK_ROWS = 4
MAX_CHUNK_ROWS = 4096
# Shapes a hoisted step remembers passing its probe on (engine/chunks.py; a loop fed ever-new
# shapes re-probes, and the memory of them stays bounded) ...
PROBED_KEYS = 8
# ... its inputs of at most this many elements counting by value too (axes, a target shape, a
# scalar: what decides a result's shape is small); and a value computed once a run keeps the
# last run's where its inputs of at most this many elements have the same values
# (engine/chunks.py `_once`).
PROBED_VALUES = 64
# Shape arithmetic remembered per input shapes (engine/shape_memo.py): values of at most this
# many bytes in all, for at most this many input shapes (a model fed ever-new shapes keeps the
# last ones).
SHAPE_MEMO_BYTES = 1 << 20
SHAPE_MEMO_KEYS = 8
# Constants folded while hoisting (engine/hoist.py), to decide what a Reshape's target holds:
# shape arithmetic of at most this many elements (a larger value is data, not a shape).
FOLDED_SIZE = 64

# -- native acceleration (accel/) -----------------------------------------------------------------

# Seconds between reads of the cores the process may use, at a run's start (to hold numpy's BLAS
# to them: accel/gemm.py, engine/_core.pyx): a read costs a one-node model's run a sixth; a
# process narrowed while it runs is seen this late at most.
AFFINITY_EVERY = 0.1

# Arrays this large or larger get a mapping of their own (accel/aligned.py): at most a page in 16
# of it is rounding, and a mapping costs a system call each way, which a weight prepared once
# repays.
MAPPED_BYTES = 64 * 1024
# What a frontend reads a weight of fewer bytes than this into is numpy's own allocation
# (`smallest=`): misaligned, a weight that small costs little (it sits in L1), and a large IR
# holds many small constants, for which an aligned array's extra bytes and view add up.
SMALL_WEIGHT_BYTES = 1024
# Bytes of scratch the transposed product (accel/gemm.py's ``columns``) computes a block of rows
# in: a block stays in L2 while it is transposed back.
COLUMNS_SCRATCH = 64 * 1024
# Quiet floating-point settings kept, one per setting a caller had (accel/float_state.py): most
# programs have one; one making a new setting per call would fill the cache, and past this the
# quiet value is made anew each run.
QUIET_KEEP = 64

# -- reading models (frontends/, cache.py) --------------------------------------------------------

# An IR is read in chunks of this many bytes (frontends/openvino.py): a large IR is never held
# whole, as bytes or as a tree.
IR_CHUNK = 1 << 16
# The on-disk cache (cache.py) hashes and checksums a model file this many bytes at a time.
HASH_CHUNK = 1 << 20
# Bytes from which the cache hashes with hashlib's SHA-256 (OpenSSL's) rather than CPython's own
# BLAKE2b: importing hashlib loads OpenSSL, whose faster hashing pays that import back only on a
# file of several MB (docs/performance.md, "A fresh process's first result").
OPENSSL_FROM = 8 << 20
