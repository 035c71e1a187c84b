"""RandomUniform-8, generating the numbers OpenVINO generates for the same seeds (its reference
implementation's, word for word; its CPU plugin's too for f32, bf16 and i32, the types it
computes in: it generates f16, f64 and i64 as f32 or i32 and converts them).

``alignment="tensorflow"`` (the default): Philox-4x32-10, counter based. Block b of a run is
Philox of the 128-bit counter (n, op_seed) with n = n0 + b, under the 64-bit key global_seed;
each block gives four 32-bit words, taken in order by four outputs (one word each), or by two
(a pair each: i64 and f64). Like OpenVINO, a kernel keeps its place between runs: each run moves
n0 on by 256 per output element, so a layer run again (the next inference, the next iteration
of a loop) gives the next numbers, and a freshly loaded model starts again at n0 = 0.

``alignment="pytorch"``: the Mersenne Twister (MT19937) seeded with global_seed as PyTorch seeds
it, one word per output (two for f64, and for an i64 whose bounds do not fit 32 bits); every run
starts again from the seed, as OpenVINO's does.

A word becomes a float x in [0, 1) as OpenVINO makes it: Philox sets the word's low mantissa
bits under an exponent of 0 and subtracts 1 (f32: 23 bits, f16: 10, bf16: 7; f64: 20 bits of a
pair's first word and 32 of its second); MT keeps the word's low 24 bits (f16: 11, bf16: 8;
f64: 53 of the pair, the first word high) over 2^24. The result is ``x * (maxval - minval) +
minval``: in float32 rounded once for f32 and MT's f16 and bf16, in the 16-bit type an
operation at a time for Philox's f16 and bf16, in float64 for f64; bf16 rounded as OpenVINO
rounds it (`_openvino_bfloat16`). Integers are ``w % (maxval - minval) + minval`` in unsigned
arithmetic of the type's width, w a word (i64 from Philox: a pair, the second word high).

Both seeds 0 ask for numbers that differ from model to model: the kernel then draws its own
global seed once, when it is built.
"""

import threading

import numpy as np

from .._ir_attrs import DOMAIN, as_choice, as_dtype, as_int
from ..registry import kernel

_MASK32 = 0xFFFFFFFF
# Philox-4x32's multipliers and key increments (Salmon et al., "Parallel Random Numbers: As Easy
# as 1, 2, 3", 2011).
_MULTIPLIER_0, _MULTIPLIER_1 = 0xD2511F53, 0xCD9E8D57
_KEY_STEP_0, _KEY_STEP_1 = 0x9E3779B9, 0xBB67AE85
_ROUNDS = 10
_SKIP_PER_ELEMENT = 256  # how far a run moves the counter on, per output element

_OUTPUT_TYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")


def philox_blocks(key: int, counters: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Philox-4x32-10 of the counters (n, counters) (uint64 arrays: n the low 64 bits) under
    the 64-bit `key`: [len(n), 4] uint32 words."""
    c0, c1 = n & _MASK32, n >> np.uint64(32)
    c2, c3 = counters & _MASK32, counters >> np.uint64(32)
    k0, k1 = key & _MASK32, (key >> 32) & _MASK32
    for round_ in range(_ROUNDS):
        p0 = c0 * np.uint64(_MULTIPLIER_0)  # 32 x 32 bits: exact in 64
        p1 = c2 * np.uint64(_MULTIPLIER_1)
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & _MASK32,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & _MASK32)
        if round_ < _ROUNDS - 1:
            k0, k1 = (k0 + _KEY_STEP_0) & _MASK32, (k1 + _KEY_STEP_1) & _MASK32
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def _mersenne_words(seed: int, count: int) -> np.ndarray:
    """The first `count` 32-bit outputs of MT19937 seeded with `seed` by the reference
    init_genrand (numpy's legacy RandomState seeds an integer so; its state then drives an
    MT19937 bit generator, whose raw outputs are the words)."""
    generator = np.random.MT19937()
    generator.state = np.random.RandomState(seed & _MASK32).get_state(legacy=False)
    return generator.random_raw(count).astype(np.uint32)


def _fraction_philox(words, dtype):
    """Philox words as floats in [0, 1) of `dtype` (f16, bf16, f32): the low mantissa bits set
    under a zero exponent, less 1."""
    if dtype == np.float32:
        return (np.uint32(0x3F800000) | (words & np.uint32(0x7FFFFF))).view(np.float32) - \
            np.float32(1)
    ones, mantissa = (0x3C00, 0x3FF) if dtype == np.float16 else (0x3F80, 0x7F)
    bits = (np.uint16(ones) | (words.astype(np.uint16) & np.uint16(mantissa)))
    return bits.view(dtype).astype(np.float32) - np.float32(1)


def _openvino_bfloat16(x):
    """float32 `x` rounded to bfloat16 (returned as float32) as OpenVINO's reference rounds it:
    half a unit added when the kept last bit is 1 (a tie then goes up, to even), none when it is
    0 (the rest then dropped: not quite round-to-nearest-even)."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    bits = (bits + ((bits & np.uint32(0x10000)) >> np.uint32(1))) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def _fraction_pairs(high, low):
    """Pairs of words as float64 in [0, 1): 20 mantissa bits of `high`, 32 of `low`."""
    bits = ((high.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32)) | \
        low.astype(np.uint64)
    return (bits | np.uint64(0x3FF0000000000000)).view(np.float64) - 1.0


def _fraction_mersenne(words, dtype):
    """MT words as floats in [0, 1): their low `digits` bits over 2^digits."""
    digits = {"float16": 11, "bfloat16": 8}.get(dtype.name, 24)
    return (words & np.uint32((1 << digits) - 1)).astype(np.float32) * \
        np.float32(1.0 / (1 << digits))


def _scalar(value, dtype, name):
    flat = np.asarray(value).reshape(-1)
    if flat.size != 1:
        raise ValueError(f"RandomUniform {name} must be one value, got shape "
                         f"{list(np.shape(value))}")
    return flat[0].astype(dtype)


def _scaled(fraction, low, high, dtype):
    """fraction * (high - low) + low in `dtype` (16-bit floats computed in float32 and rounded
    once, bfloat16 as OpenVINO rounds it)."""
    if dtype == np.float64:
        return fraction.astype(np.float64) * (np.float64(high) - np.float64(low)) + \
            np.float64(low)
    if dtype.itemsize == 2 and dtype != np.float16:
        span = _openvino_bfloat16(np.float32(high) - np.float32(low))
        return _openvino_bfloat16(fraction * span + np.float32(low)).astype(dtype)
    span = np.float32(dtype.type(np.float32(high) - np.float32(low)))
    return (fraction.astype(np.float32) * span + np.float32(low)).astype(dtype)


def _integers(words, low, high, dtype):
    """word % (high - low) + low, in the unsigned arithmetic of the type's width."""
    if high <= low:
        raise ValueError(f"RandomUniform needs minval < maxval for integers, got {low} and "
                         f"{high}")
    unsigned = np.uint64 if dtype == np.int64 else np.uint32
    span = unsigned((int(high) - int(low)) & (2 ** (8 * dtype.itemsize) - 1))
    wrapped = unsigned(int(low) & (2 ** (8 * dtype.itemsize) - 1))
    return (words.astype(unsigned) % span + wrapped).astype(unsigned).view(dtype)


class _Philox:
    """The Philox stream of one layer: (n0, counter) moves on after each run."""

    def __init__(self, global_seed, op_seed):
        self.key, self.op_seed = global_seed, op_seed
        self.n, self.counter = 0, 0
        self.lock = threading.Lock()

    def words(self, count, per_block):
        """The words of the next run's `count` outputs: [count, 4 // per_block]."""
        blocks = -(-count // per_block)
        with self.lock:
            n, counter = self.n, self.counter
            self.n = (n + count * _SKIP_PER_ELEMENT) & (2 ** 64 - 1)
            if self.n < count * _SKIP_PER_ELEMENT:  # (the plugin's carry)
                self.counter = counter + 1
        base = counter if counter > 0 else self.op_seed
        index = np.arange(blocks, dtype=np.uint64) + np.uint64(n)
        carried = (index < np.uint64(n)).astype(np.uint64)  # n wrapped past 2^64
        counters = np.uint64(base) + carried
        words = philox_blocks(self.key, counters, index)
        return words.reshape(blocks * per_block, 4 // per_block)[:count]


@kernel("RandomUniform", domain=DOMAIN, since=8, stateful=True)
def random_uniform(attrs):
    """(shape, minval, maxval) -> numbers uniform in [minval, maxval) of ``output_type``, of the
    given shape (the module docstring says which numbers)."""
    dtype = as_dtype(attrs, "output_type")
    if dtype is None or dtype.name not in _OUTPUT_TYPES:
        raise ValueError(f"RandomUniform output_type must be one of f16, bf16, f32, f64, i32, "
                         f"i64, got {attrs.get('output_type')!r}")
    global_seed, op_seed = as_int(attrs, "global_seed", 0), as_int(attrs, "op_seed", 0)
    if global_seed < 0 or op_seed < 0:
        raise ValueError(f"RandomUniform seeds must not be negative, got {global_seed} and "
                         f"{op_seed}")
    if global_seed == 0 and op_seed == 0:
        global_seed = int(np.random.default_rng().integers(1, 2 ** 31))
    pytorch = as_choice(attrs, "alignment", ("tensorflow", "pytorch")) == "pytorch"
    philox = None if pytorch else _Philox(global_seed & (2 ** 64 - 1), op_seed & (2 ** 64 - 1))
    pairs = dtype.itemsize == 8

    def generate(shape, minval, maxval):
        dims = [int(d) for d in np.asarray(shape).reshape(-1)]
        if any(d < 0 for d in dims):
            raise ValueError(f"RandomUniform shape must not be negative, got {dims}")
        count = int(np.prod(dims, dtype=np.int64)) if dims else 1
        low, high = _scalar(minval, dtype, "minval"), _scalar(maxval, dtype, "maxval")
        if pytorch:
            wide = pairs and (dtype == np.float64 or max(int(low), int(high)) > _MASK32)
            words = _mersenne_words(global_seed, count * (2 if wide else 1))
            words = words.reshape(count, 2) if wide else words.reshape(count, 1)
            if dtype.kind == "i":
                value = words[:, 0] if not wide else \
                    (words[:, 0].astype(np.uint64) << np.uint64(32)) | words[:, 1]
                out = _integers(value, low, high, dtype)
            elif dtype == np.float64:
                bits = ((words[:, 0].astype(np.uint64) << np.uint64(32)) | words[:, 1]) & \
                    np.uint64((1 << 53) - 1)
                out = _scaled(bits.astype(np.float64) * 2.0 ** -53, low, high, dtype)
            else:
                out = _scaled(_fraction_mersenne(words[:, 0], dtype), low, high, dtype)
            return out.reshape(dims)
        words = philox.words(count, 2 if pairs else 4)
        if dtype == np.int64:  # the pair's second word is the high half
            value = (words[:, 1].astype(np.uint64) << np.uint64(32)) | words[:, 0]
            out = _integers(value, low, high, dtype)
        elif dtype == np.int32:
            out = _integers(words[:, 0], low, high, dtype)
        elif dtype == np.float64:
            out = _scaled(_fraction_pairs(words[:, 0], words[:, 1]), low, high, dtype)
        elif dtype == np.float16:  # each operation rounded to float16, as OpenVINO's
            out = _fraction_philox(words[:, 0], dtype).astype(dtype) * (high - low) + low
        elif dtype.itemsize == 2:  # bfloat16: each operation rounded as OpenVINO rounds it
            span = _openvino_bfloat16(np.float32(high) - np.float32(low))
            out = _openvino_bfloat16(_openvino_bfloat16(
                _fraction_philox(words[:, 0], dtype) * span) + np.float32(low)).astype(dtype)
        else:
            out = _scaled(_fraction_philox(words[:, 0], dtype), low, high, dtype)
        return out.reshape(dims)

    return generate
