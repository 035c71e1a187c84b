"""Elementwise OpenVINO layers: arithmetic, comparison, logic, activations, Select, Convert."""

import functools
import math
import operator

import numpy as np

from .. import _math
from .._ir_attrs import DOMAIN, as_bool, as_float, as_int, broadcast_batches, broadcasting
from ..registry import ARITHMETIC_SCALARS, BOOL_SCALARS, NUMBER_SCALARS, kernel


def _floor_mod(a, b, out=None):
    return np.mod(a, b, out=out)


def _truncated_mod(a, b, out=None):
    return np.fmod(a, b, out=out)


def _divide_factory(attrs):
    python_division = attrs.get("m_pythondiv", "true").lower() == "true"

    def divide(a, b, out=None):
        if np.result_type(a, b).kind in "iu":
            if python_division:
                return np.floor_divide(a, b, out=out)
            return np.trunc(np.true_divide(a, b)).astype(np.result_type(a, b))
        return np.true_divide(a, b, out=out)

    return divide


def _squared_difference(a, b, out=None):
    result = np.subtract(a, b, out=out)
    return np.multiply(result, result, out=result if out is not None else None)


_BINARY = {
    "Add": np.add, "Subtract": np.subtract, "Multiply": np.multiply, "Maximum": np.maximum,
    "Minimum": np.minimum, "SquaredDifference": _squared_difference,
    "FloorMod": _floor_mod, "Mod": _truncated_mod, "Equal": np.equal,
    "NotEqual": np.not_equal, "Less": np.less, "LessEqual": np.less_equal,
    "Greater": np.greater, "GreaterEqual": np.greater_equal, "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or, "LogicalXor": np.logical_xor,
}


# Layers whose kernel, on two numpy scalars of one of these types, is exactly the scalar's operator
# (whatever auto_broadcast says: two 0-d operands have one shape).
_SCALAR = {
    "Add": (operator.add, ARITHMETIC_SCALARS), "Subtract": (operator.sub, ARITHMETIC_SCALARS),
    "Multiply": (operator.mul, ARITHMETIC_SCALARS), "Equal": (operator.eq, NUMBER_SCALARS),
    "NotEqual": (operator.ne, NUMBER_SCALARS), "Less": (operator.lt, NUMBER_SCALARS),
    "LessEqual": (operator.le, NUMBER_SCALARS), "Greater": (operator.gt, NUMBER_SCALARS),
    "GreaterEqual": (operator.ge, NUMBER_SCALARS), "LogicalAnd": (operator.and_, BOOL_SCALARS),
    "LogicalOr": (operator.or_, BOOL_SCALARS), "LogicalXor": (operator.xor, BOOL_SCALARS),
}


def _register_binary(op_type, fn):
    @kernel(op_type, domain=DOMAIN, since=1, out=True, batch="elementwise",
            batch_if=broadcast_batches, scalar=_SCALAR.get(op_type))
    def factory(attrs):
        return broadcasting(fn, attrs)


for _op_type, _fn in _BINARY.items():
    _register_binary(_op_type, _fn)


@kernel("Power", domain=DOMAIN, since=1, batch="elementwise", batch_if=broadcast_batches)
def power(attrs):
    return broadcasting(_math.power, attrs)  # (integers to negative powers truncate)


@kernel("Divide", domain=DOMAIN, since=1, out=True, batch="elementwise", batch_if=broadcast_batches)
def divide(attrs):
    return broadcasting(_divide_factory(attrs), attrs)


_UNARY = {
    "Negative": np.negative, "Abs": np.absolute, "Exp": np.exp, "Log": np.log,
    "Sqrt": np.sqrt, "Tanh": np.tanh, "Sigmoid": _math.sigmoid, "Floor": np.floor,
    "Ceiling": np.ceil, "LogicalNot": np.logical_not,
}


def _register_unary(op_type, fn):
    @kernel(op_type, domain=DOMAIN, since=1, out=True, batch="elementwise",
            batch_if=broadcast_batches)
    def factory(attrs):
        return fn


for _op_type, _fn in _UNARY.items():
    _register_unary(_op_type, _fn)


def _floating_only(op_type, ufunc):
    """`ufunc` on floating-point input; integer input is refused by name (OpenVINO computes it
    in floating point and converts back to the integer type, which these kernels do not
    imitate)."""
    def apply(x, out=None):
        if x.dtype.kind not in "fc":
            raise ValueError(f"{op_type} of {x.dtype} input is not supported (floating-point "
                             "input only)")
        return ufunc(x, out=out)

    return apply


# The trigonometric and hyperbolic layers (opset1; the inverse hyperbolic ones opset4).
_TRIGONOMETRIC = {
    "Sin": (np.sin, 1), "Cos": (np.cos, 1), "Tan": (np.tan, 1), "Asin": (np.arcsin, 1),
    "Acos": (np.arccos, 1), "Atan": (np.arctan, 1), "Sinh": (np.sinh, 1), "Cosh": (np.cosh, 1),
    "Asinh": (np.arcsinh, 4), "Acosh": (np.arccosh, 4), "Atanh": (np.arctanh, 4),
}


def _register_trigonometric(op_type, ufunc, since):
    @kernel(op_type, domain=DOMAIN, since=since, out=True, batch="elementwise",
            batch_if=broadcast_batches)
    def factory(attrs):
        return _floating_only(op_type, ufunc)


for _op_type, (_fn, _since) in _TRIGONOMETRIC.items():
    _register_trigonometric(_op_type, _fn, _since)


def relu(attrs):
    return lambda x, out=None: np.maximum(x, x.dtype.type(0), out=out)


# The IR spells the layer type "ReLU"; "Relu" is accepted too.
for _name in ("ReLU", "Relu"):
    kernel(_name, domain=DOMAIN, since=1, out=True, batch="elementwise",
           batch_if=broadcast_batches)(relu)


@kernel("Clamp", domain=DOMAIN, since=1, batch="elementwise", batch_if=broadcast_batches)
def clamp(attrs):
    low, high = as_float(attrs, "min"), as_float(attrs, "max")

    def clamped(x):
        if x.dtype.kind in "iu":  # integer bounds: min rounds up, max rounds down
            return np.clip(x, math.ceil(low), math.floor(high)).astype(x.dtype)
        return np.clip(x, x.dtype.type(low), x.dtype.type(high))

    return clamped


@kernel("Elu", domain=DOMAIN, since=1, batch="elementwise", batch_if=broadcast_batches)
def elu(attrs):
    alpha = as_float(attrs, "alpha", 1.0)
    return lambda x: _math.elu(x, alpha)


@kernel("Erf", domain=DOMAIN, since=1, batch="elementwise", batch_if=broadcast_batches)
def erf(attrs):
    return _math.erf


@kernel("Gelu", domain=DOMAIN, since=2, batch="elementwise", batch_if=broadcast_batches)
def gelu(attrs):
    tanh = attrs.get("approximation_mode", "ERF").upper() == "TANH"
    return lambda x: _math.gelu(x, tanh)


@kernel("Swish", domain=DOMAIN, since=4)
def swish(attrs):
    def swished(x, beta=None):
        beta = 1.0 if beta is None else np.asarray(beta).reshape(-1)[0]
        return (x * _math.sigmoid(np.asarray(x * beta, dtype=x.dtype))).astype(x.dtype)

    return swished


@kernel("HSigmoid", domain=DOMAIN, since=5, batch="elementwise", batch_if=broadcast_batches)
def hsigmoid(attrs):
    return lambda x: (np.clip(x + 3, 0, 6) / 6).astype(x.dtype)


@kernel("HSwish", domain=DOMAIN, since=4, batch="elementwise", batch_if=broadcast_batches)
def hswish(attrs):
    return lambda x: (x * np.clip(x + 3, 0, 6) / 6).astype(x.dtype)


@kernel("SoftPlus", domain=DOMAIN, since=4, batch="elementwise", batch_if=broadcast_batches)
def softplus(attrs):
    return lambda x: np.logaddexp(x, x.dtype.type(0))


@kernel("Select", domain=DOMAIN, since=1, batch="elementwise", batch_if=broadcast_batches)
def select(attrs):
    mode = attrs.get("auto_broadcast", "numpy").lower()

    def selected(cond, then, other):
        if mode == "none" and not (np.shape(cond) == np.shape(then) == np.shape(other)):
            raise ValueError("Select with auto_broadcast='none' needs equal shapes")
        return np.where(cond, then, other)

    return selected


@kernel("Convert", domain=DOMAIN, since=1, out=True, batch="elementwise",
        batch_if=broadcast_batches)
def convert(attrs):
    dtype = np.dtype(attrs["destination_type"])

    def converted(x, out=None):
        if dtype == np.bool_:
            return np.not_equal(x, 0, out=out)
        if dtype.kind in "iu" and np.asarray(x).dtype.kind == "f":
            x = np.trunc(x)  # float -> integer truncates toward zero
        if out is None:
            return np.asarray(x).astype(dtype)
        np.copyto(out, x, casting="unsafe")
        return out

    return converted


@kernel("ConvertLike", domain=DOMAIN, since=1)
def convert_like(attrs):
    def converted(x, like):
        if like.dtype.kind in "iu" and x.dtype.kind == "f":
            x = np.trunc(x)
        return np.asarray(x).astype(like.dtype)

    return converted


# Bitwise layers (opset13): on booleans, the logical operation.
for _op_type, _fn in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                      ("BitwiseXor", np.bitwise_xor)):
    kernel(_op_type, domain=DOMAIN, since=13, out=True, batch="elementwise",
           batch_if=broadcast_batches)(functools.partial(broadcasting, _fn))


for _op_type, _since, _fn in (("BitwiseNot", 13, np.invert), ("IsNaN", 10, np.isnan),
                              ("IsFinite", 10, np.isfinite), ("Sign", 1, np.sign)):
    kernel(_op_type, domain=DOMAIN, since=_since, out=True, batch="elementwise",
           batch_if=broadcast_batches)(lambda attrs, fn=_fn: fn)


@kernel("IsInf", domain=DOMAIN, since=10, batch="elementwise", batch_if=broadcast_batches)
def is_inf(attrs):
    return _math.inf_test(as_bool(attrs, "detect_negative", True),
                          as_bool(attrs, "detect_positive", True))


@kernel("Round", domain=DOMAIN, since=5, out=True, batch="elementwise",
        batch_if=broadcast_batches)
def round_(attrs):
    """``mode`` half_to_even (numpy's rint) or half_away_from_zero; integers pass unchanged."""
    mode = str(attrs.get("mode", "half_to_even")).lower()
    if mode == "half_away_from_zero":
        return _math.round_half_away
    if mode != "half_to_even":
        raise ValueError(f"Round mode must be half_to_even or half_away_from_zero, got {mode!r}")

    def half_to_even(x, out=None):
        if x.dtype.kind in "fc":
            return np.rint(x, out=out)
        return _math.round_half_away(x, out=out)  # an integer is its own rounding

    return half_to_even


def _scalar(value, x):
    """A 0-d or one-element parameter input as a scalar of x's type."""
    return x.dtype.type(np.asarray(value).reshape(-1)[0])


@kernel("HardSigmoid", domain=DOMAIN, since=1)
def hard_sigmoid(attrs):
    """(data, alpha, beta) -> max(0, min(1, alpha data + beta))."""
    return lambda x, alpha, beta: _math.hard_sigmoid(x, _scalar(alpha, x), _scalar(beta, x))


@kernel("Selu", domain=DOMAIN, since=1)
def selu(attrs):
    """(data, alpha, lambda) -> lambda data for data > 0, lambda alpha (exp(data) - 1) else."""
    return lambda x, alpha, lambda_: _math.selu(x, _scalar(alpha, x), _scalar(lambda_, x))


@kernel("SoftSign", domain=DOMAIN, since=9, batch="elementwise", batch_if=broadcast_batches)
def soft_sign(attrs):
    return _math.softsign


@kernel("Mish", domain=DOMAIN, since=4, batch="elementwise", batch_if=broadcast_batches)
def mish(attrs):
    return _math.mish


@kernel("PReLU", domain=DOMAIN, since=1)
def prelu(attrs):
    """A 1-D slope as long as the channel axis (axis 1) applies per channel; any other slope
    broadcasts numpy's way."""
    return lambda x, slope: _math.prelu(x, slope, per_channel=True)


@kernel("FakeQuantize", domain=DOMAIN, since=1)
def fake_quantize(attrs):
    """(X, input_low, input_high, output_low, output_high): X at or below min(input_low,
    input_high) gives output_low, above their max output_high; in between it is quantized to
    one of ``levels`` steps, rounded half to even, and mapped onto [output_low, output_high].
    Computed in X's type, as OpenVINO's reference does; the limits broadcast to X under
    ``auto_broadcast`` (numpy or pdpd; none: each the shape of X)."""
    levels = as_int(attrs, "levels")
    if levels is None or levels < 2:
        raise ValueError(f"FakeQuantize needs levels >= 2, got {attrs.get('levels')!r}")
    strict = str(attrs.get("auto_broadcast", "numpy")).lower() == "none"

    def quantized(x, in_low, in_high, out_low, out_high):
        limits = [np.asarray(v, dtype=x.dtype) for v in (in_low, in_high, out_low, out_high)]
        if strict and any(v.shape != x.shape for v in limits):
            raise ValueError(f"FakeQuantize with auto_broadcast='none' needs limits of X's "
                             f"shape {list(x.shape)}, got {[list(v.shape) for v in limits]}")
        in_low, in_high, out_low, out_high = limits
        steps = x.dtype.type(levels - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            inner = np.rint((x - in_low) / (in_high - in_low) * steps) / steps \
                * (out_high - out_low) + out_low
        result = np.where(x <= np.minimum(in_low, in_high), out_low,
                          np.where(x > np.maximum(in_low, in_high), out_high, inner))
        return np.broadcast_to(result, x.shape).astype(x.dtype)

    return quantized


# FakeConvert's emulated types: the ml_dtypes type and its largest finite value.
_FAKE_TYPES = {"f8e4m3": ("float8_e4m3fn", 448.0), "f8e5m2": ("float8_e5m2", 57344.0)}


def _fake_type(attrs):
    """FakeConvert's destination_type (the IR's name, or the dtype the frontend resolved it to)
    as (the 8-bit type, its largest value as float16)."""
    value = attrs.get("destination_type")
    names = {"float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
    name = value if isinstance(value, str) else names.get(np.dtype(value).name, str(value))
    if name not in _FAKE_TYPES:
        raise ValueError(f"FakeConvert destination_type must be f8e4m3 or f8e5m2, got {value!r}")
    try:
        import ml_dtypes
    except ImportError as e:
        raise ValueError("FakeConvert needs the ml_dtypes package for its 8-bit float types: "
                         "pip install ml_dtypes") from e
    type_name, largest = _FAKE_TYPES[name]
    return np.dtype(getattr(ml_dtypes, type_name)), np.float16(largest)


def _emulate_float8(x, f8, largest):
    """float `x` through the 8-bit type `f8` and back, as OpenVINO's CPU plugin rounds it: to
    float16 first (nearest even; a float32 past float16's range becomes infinite), then to `f8`
    (nearest even), every magnitude past `largest`, infinities included, saturating to it. NaN
    stays NaN (the plugin's own answer for NaN is -largest, an artifact of its clamp; OpenVINO's
    reference implementation flushes e4m3 magnitudes below 2^-9 to zero, which the plugin does
    not). Returned as float16."""
    half = np.asarray(x).astype(np.float16)
    clamped = np.clip(half, -largest, largest)  # (NaN passes through np.clip)
    return clamped.astype(f8).astype(np.float16)


@kernel("FakeConvert", domain=DOMAIN, since=13)
def fake_convert(attrs):
    """(data, scale[, shift]) -> (emulate(data * scale - shift) + shift) / scale in data's type
    (float16, bfloat16 or float32): the value data takes through ``destination_type`` (f8e4m3 or
    f8e5m2) and back, rounded as `_emulate_float8`; scale and shift broadcast numpy's way."""
    f8, largest = _fake_type(attrs)

    def fake(x, scale, shift=None):
        if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
            raise ValueError(f"FakeConvert needs floating-point data, got {x.dtype}")
        scale = np.asarray(scale).astype(x.dtype, copy=False)
        shift = np.zeros((), x.dtype) if shift is None else \
            np.asarray(shift).astype(x.dtype, copy=False)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            scaled = (x * scale - shift).astype(x.dtype, copy=False)
            rounded = _emulate_float8(scaled, f8, largest).astype(x.dtype)
            result = ((rounded + shift) / scale).astype(x.dtype, copy=False)
        return np.broadcast_to(result, x.shape).copy() if result.shape != x.shape else result

    return fake
