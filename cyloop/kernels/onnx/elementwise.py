"""Elementwise arithmetic, comparison and logic (ONNX broadcasting is numpy's).

Most kernels are numpy ufuncs returned as they are: they take ``out=`` and cost one C call.
"""

import operator

import numpy as np

from ..registry import ARITHMETIC_SCALARS, BOOL_SCALARS, NUMBER_SCALARS, kernel

# The maths these share with OpenVINO's (`.._math`) is imported by the factories of the kernels
# that use it, the first time a model has one: most models use none of them.

# op_type -> ufunc. ONNX versions of these ops differ only in the types they allow (and Add-1..6's
# legacy broadcast attribute, which numpy broadcasting subsumes), so one kernel serves every opset.
_UFUNCS = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Neg": np.negative,
    "Abs": np.absolute,
    "Sqrt": np.sqrt,
    "Exp": np.exp,
    "Log": np.log,
    "Reciprocal": np.reciprocal,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Tanh": np.tanh,
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
    "Sign": np.sign,
    "Round": np.rint,  # halves to even, as ONNX Round
    "IsNaN": np.isnan,
    "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or,
    "BitwiseXor": np.bitwise_xor,
    "BitwiseNot": np.invert,
    "Equal": np.equal,
    "Less": np.less,
    "LessOrEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal,
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
    "Not": np.logical_not,
}


# Ops whose kernel, on two numpy scalars of one of these types, is exactly the scalar's operator.
_SCALAR = {
    "Add": (operator.add, ARITHMETIC_SCALARS), "Sub": (operator.sub, ARITHMETIC_SCALARS),
    "Mul": (operator.mul, ARITHMETIC_SCALARS), "Equal": (operator.eq, NUMBER_SCALARS),
    "Less": (operator.lt, NUMBER_SCALARS), "LessOrEqual": (operator.le, NUMBER_SCALARS),
    "Greater": (operator.gt, NUMBER_SCALARS), "GreaterOrEqual": (operator.ge, NUMBER_SCALARS),
    "And": (operator.and_, BOOL_SCALARS), "Or": (operator.or_, BOOL_SCALARS),
    "Xor": (operator.xor, BOOL_SCALARS),
}


def _register_ufunc(op_type, ufunc):
    @kernel(op_type, out=True, batch="elementwise", scalar=_SCALAR.get(op_type))
    def factory(attrs):
        return ufunc


for _op_type, _ufunc in _UFUNCS.items():
    _register_ufunc(_op_type, _ufunc)


def _integer_divide(a, b, out=None):
    """C-style integer division (truncation toward zero), as onnxruntime computes integer Div."""
    if out is None:
        out = np.empty(np.broadcast_shapes(np.shape(a), np.shape(b)), np.result_type(a, b))
    quotient = np.floor_divide(a, b, out=out)
    # floor and trunc differ where the remainder is non-zero and the signs differ: add one back.
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return np.add(quotient, fix.astype(quotient.dtype), out=quotient)


@kernel("Div", out=True, batch="elementwise")
def div(attrs):
    def divide(a, b, out=None):
        if a.dtype.kind in "iu":
            return _integer_divide(a, b, out=out)
        return np.divide(a, b, out=out)

    return divide


@kernel("Pow", batch="elementwise")
def pow_(attrs):
    from .. import _math

    return _math.power  # the base's type, whatever the exponent's


def _variadic(ufunc):
    def apply(first, *rest, out=None):
        if not rest:
            if out is None:
                return np.array(first, copy=True)
            np.copyto(out, first)
            return out
        result = ufunc(first, rest[0], out=out)
        for other in rest[1:]:
            result = ufunc(result, other, out=result if out is not None else None)
        return result

    return apply


@kernel("Max", out=True, batch="elementwise")
def max_(attrs):
    return _variadic(np.maximum)


@kernel("Min", out=True, batch="elementwise")
def min_(attrs):
    return _variadic(np.minimum)


@kernel("Sum", out=True, batch="elementwise")
def sum_(attrs):
    return _variadic(np.add)


@kernel("Mean", out=True, batch="elementwise")
def mean(attrs):
    total = _variadic(np.add)

    def average(*inputs, out=None):
        result = total(*inputs, out=out)
        return np.divide(result, result.dtype.type(len(inputs)), out=out)

    return average


@kernel("Where", batch="elementwise")
def where(attrs):
    return np.where


@kernel("Sigmoid", out=True, batch="elementwise")
def sigmoid(attrs):
    from .. import _math

    return _math.sigmoid


@kernel("Relu", out=True, batch="elementwise")
def relu(attrs):
    def rectify(x, out=None):
        return np.maximum(x, x.dtype.type(0), out=out)

    return rectify


@kernel("Mod", since=10, batch="elementwise")
def mod(attrs):
    if attrs.get("fmod", 0):
        return np.fmod  # C fmod: the result takes the dividend's sign
    return np.mod  # Python-style: the result takes the divisor's sign


@kernel("LeakyRelu", batch="elementwise")
def leaky_relu(attrs):
    alpha = float(attrs.get("alpha", 0.01))
    return lambda x: np.where(x < 0, x * x.dtype.type(alpha), x)


@kernel("Elu", batch="elementwise")
def elu(attrs):
    from .. import _math

    alpha = float(attrs.get("alpha", 1.0))
    return lambda x: _math.elu(x, alpha)


@kernel("HardSigmoid", batch="elementwise")
def hard_sigmoid(attrs):
    from .. import _math

    alpha, beta = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    return lambda x: _math.hard_sigmoid(x, alpha, beta)


@kernel("Softplus", batch="elementwise")
def softplus(attrs):
    return lambda x: np.logaddexp(x, x.dtype.type(0))


@kernel("IsInf", since=10, batch="elementwise")
def is_inf(attrs):
    from .. import _math

    return _math.inf_test(bool(attrs.get("detect_negative", 1)),
                          bool(attrs.get("detect_positive", 1)))


@kernel("BitShift", since=11, batch="elementwise")
def bit_shift(attrs):
    direction = attrs["direction"]
    if direction not in ("LEFT", "RIGHT"):
        raise ValueError(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    shift = np.left_shift if direction == "LEFT" else np.right_shift
    # numpy gives 0 for a shift by the type's width or more, as C leaves undefined.
    return lambda x, amount: shift(x, amount.astype(x.dtype, copy=False))


@kernel("Softsign", batch="elementwise")
def softsign(attrs):
    from .. import _math

    return _math.softsign


@kernel("Selu", batch="elementwise")
def selu(attrs):
    from .. import _math

    alpha = float(attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(attrs.get("gamma", 1.05070102214813232421875))
    return lambda x: _math.selu(x, alpha, gamma)


@kernel("Celu", since=12, batch="elementwise")
def celu(attrs):
    alpha = float(attrs.get("alpha", 1.0))

    def continuous_elu(x):
        a, zero = x.dtype.type(alpha), x.dtype.type(0)
        return np.maximum(x, zero) + np.minimum(a * np.expm1(x / a), zero)

    return continuous_elu


@kernel("ThresholdedRelu", since=10, batch="elementwise")
def thresholded_relu(attrs):
    alpha = float(attrs.get("alpha", 1.0))
    return lambda x: np.where(x > x.dtype.type(alpha), x, x.dtype.type(0))


@kernel("Shrink", since=9, batch="elementwise")
def shrink(attrs):
    bias, lambd = float(attrs.get("bias", 0.0)), float(attrs.get("lambd", 0.5))

    def soft_threshold(x):
        # In the input's type (Shrink allows integers): x - bias above lambd, x + bias below -lambd.
        low, high = x < -lambd, x > lambd
        result = np.zeros_like(x)
        result[low] = (x[low].astype(np.float64) + bias).astype(x.dtype)
        result[high] = (x[high].astype(np.float64) - bias).astype(x.dtype)
        return result

    return soft_threshold


@kernel("PRelu", since=7, batch="elementwise")
def prelu(attrs):
    from .. import _math

    return _math.prelu


@kernel("PRelu", since=1)
def prelu_1(attrs):
    from .. import _math

    # Before opset 7 the slope is one per channel (axis 1), not broadcast from the right.
    return lambda x, slope: _math.prelu(x, slope, per_channel=True)


@kernel("Clip", since=1, batch="first")
@kernel("Clip", since=6, batch="first")
def clip_6(attrs):
    """Clip-1 and 6: bounds as attributes, by default the type's lowest and highest finite
    values (so an infinity is clipped to one; Clip-1's consumed_inputs is a legacy hint). A min
    above the max is refused, as onnxruntime does."""
    low, high = attrs.get("min"), attrs.get("max")
    if low is not None and high is not None and low > high:
        raise ValueError(f"Clip's min {low} is above its max {high}")

    def clip(x):
        info = np.finfo(x.dtype)
        return np.clip(x, info.min if low is None else x.dtype.type(low),
                       info.max if high is None else x.dtype.type(high))

    return clip


@kernel("Clip", since=11, batch="first")
def clip_11(attrs):
    def clip(x, low=None, high=None):
        result = x if low is None else np.maximum(x, low)
        result = result if high is None else np.minimum(result, high)
        return np.array(result, dtype=x.dtype, copy=True) if result is x else result

    return clip


def _softmax_13(log):
    def factory(attrs):
        from .. import _math

        axis = int(attrs.get("axis", -1))

        return lambda x: _math.softmax(x, axis, log)

    return factory


def _softmax_1(log):
    def factory(attrs):
        axis = int(attrs.get("axis", 1))
        inner = _softmax_13(log)({"axis": -1})

        def softmax(x):
            # Opsets < 13 flatten to 2-D at `axis` and normalize over the trailing block.
            axis_ = axis + x.ndim if axis < 0 else axis
            flat = x.reshape(int(np.prod(x.shape[:axis_])), int(np.prod(x.shape[axis_:])))
            return inner(flat).reshape(x.shape)

        return softmax

    return factory


for _op, _log in (("Softmax", False), ("LogSoftmax", True)):
    kernel(_op, since=1)(_softmax_1(_log))
    kernel(_op, since=13)(_softmax_13(_log))
