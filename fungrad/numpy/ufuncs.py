"""Elementwise functions of fungrad.numpy (jax.numpy's ufuncs), written on fungrad.lax.
Comparisons, logical and bitwise functions live in logic.py, which uses the argument handling
defined here.

Arguments are checked (:func:`fungrad.numpy.util.check_arraylike`), promoted with JAX's type
lattice and broadcast with numpy's rules before the lax op is bound. Arithmetic keeps the
promoted dtype (``int32 + int32 -> int32``); transcendental functions promote integers and bools
to the default float (``sin(int32) -> float32``). Python scalars are weak: ``x * 2.0`` keeps
``x``'s float32 and ``int8 array + 1000`` wraps the 1000 into int8, as JAX does.

Integer division follows JAX: ``floor_divide``/``remainder`` use Python's floor semantics, and
division by zero never traps (``7 // 0 == -2``, ``7 % 0 == 0`` for int32, as XLA computes them).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import numpy as np

from fungrad import core, dtypes, lax
from fungrad.array import Array
from fungrad.numpy import util

if TYPE_CHECKING:
    from collections.abc import Callable

    from fungrad.typing import ArrayLike

__all__ = [
    "abs",
    "absolute",
    "acos",
    "acosh",
    "add",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctan2",
    "arctanh",
    "around",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cbrt",
    "ceil",
    "clip",
    "copysign",
    "cos",
    "cosh",
    "deg2rad",
    "degrees",
    "divide",
    "divmod",
    "exp",
    "exp2",
    "expm1",
    "fabs",
    "fix",
    "float_power",
    "floor",
    "floor_divide",
    "fmax",
    "fmin",
    "fmod",
    "frexp",
    "gcd",
    "heaviside",
    "hypot",
    "isfinite",
    "isinf",
    "isnan",
    "isneginf",
    "isposinf",
    "lcm",
    "ldexp",
    "log",
    "log10",
    "log1p",
    "log2",
    "logaddexp",
    "logaddexp2",
    "maximum",
    "minimum",
    "mod",
    "modf",
    "multiply",
    "nan_to_num",
    "negative",
    "nextafter",
    "positive",
    "pow",
    "power",
    "rad2deg",
    "radians",
    "reciprocal",
    "remainder",
    "rint",
    "round",
    "sign",
    "signbit",
    "sin",
    "sinc",
    "sinh",
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "true_divide",
    "trunc",
]

# ---------------------------------------------------------------------------------------------
# Argument handling


def promote_args(fun_name: str, *args):
    """Check, promote (JAX's lattice, weak Python scalars) and broadcast ``args``."""
    return util.promote_args(fun_name, *args)


inexact_dtype = util.inexact_dtype


def promote_dtypes_inexact(fun_name: str, *args):
    """Promote dtypes (not shapes); integers and bools become floating (:func:`inexact_dtype`)."""
    util.check_arraylike(fun_name, *args)
    return util.promote_dtypes_inexact(*args, fun_name=fun_name)


def promote_args_inexact(fun_name: str, *args):
    """As :func:`promote_args`, then integers and bools become floating (:func:`inexact_dtype`)."""
    return util.promote_args_inexact(fun_name, *args)


def promote_args_numeric(fun_name: str, *args):
    """As :func:`promote_args`, then bools become int32, also with x64 (JAX's
    ``to_numeric_dtype``), for arithmetic that has no boolean meaning: floor_divide, power,
    shifts, square..."""
    args = promote_args(fun_name, *args)
    if args and dtypes.is_bool(args[0].dtype):
        args = [lax.convert_element_type(a, dtypes.int32, a.weak_type) for a in args]
    return args


def _strong(x):
    """``x`` strongly typed: isinf, isposinf, isneginf and signbit compare with strong
    constants, as jnp does."""
    return lax.convert_element_type(x, x.dtype, False) if x.weak_type else x


def _weak_only_if_all_weak(out, *args):
    """``out`` weakly typed only when every argument is (Python numbers, weak arrays), as
    jnp's hypot, heaviside, logaddexp2, gcd and lcm give (JAX 0.10.2: ``hypot(3, 4)`` is
    weak, ``hypot(bool_array, 2)`` is not, though the promoted operands are weak)."""
    if all(_is_weak_arg(a) for a in args):
        return out
    return _strong(out)


def _is_weak_arg(a) -> bool:
    if type(a) in (int, float, complex):
        return True
    aval = getattr(a, "aval", None)
    return bool(getattr(aval, "weak_type", False))


def _const(x, value) -> Array:
    """``value`` as a weak 0-d constant of ``x``'s dtype (lax broadcasts 0-d operands)."""
    with np.errstate(all="ignore"):
        return Array(np.asarray(value).astype(x.dtype)[()], True)


def _full_like(x, value, dtype=None):
    """An array of ``x``'s shape filled with ``value`` (weak like ``x`` when dtype is None)."""
    dt = x.dtype if dtype is None else np.dtype(dtype)
    weak = dtype is None and x.weak_type
    with np.errstate(all="ignore"):
        fill = Array(np.asarray(value).astype(dt)[()], weak)
    return util.broadcast_to_shape(fill, x.shape)


def _where(condition, x, y):
    """``lax.select`` with numpy broadcasting of its three array operands."""
    shape = util.broadcast_shapes(condition.shape, x.shape, y.shape, fun_name="where")
    condition, x, y = (util.broadcast_to_shape(a, shape) for a in (condition, x, y))
    return lax.select(condition, x, y)


def _require_kinds(fun_name: str, x, kinds: str, what: str) -> None:
    if dtypes.kind(x.dtype) not in kinds:
        raise TypeError(f"{fun_name} requires {what} arguments, got dtype {x.dtype.name}")


def _is_float(x) -> bool:
    return dtypes.is_float(x.dtype)


def _is_complex(x) -> bool:
    return dtypes.kind(x.dtype) == "c"


def _reject_complex(fun_name: str, x, error: type[Exception], message: str) -> None:
    """``error(message)`` when the argument ``x`` (array-like) is complex: functions with no
    complex definition, with JAX's exception type and message."""
    dt = getattr(x, "dtype", None)
    if isinstance(x, complex) or (dt is not None and dtypes.kind(np.dtype(dt)) == "c"):
        raise error(f"{fun_name}: {message}")


def _complex_parts_map(fn, x):
    """``fn`` applied to the real and imaginary parts of complex ``x`` separately."""
    return lax.complex(fn(lax.real(x)), fn(lax.imag(x)))


# ---------------------------------------------------------------------------------------------
# Functions that promote to floating point and apply one lax op


def _inexact_unary(name: str, lax_name: str, doc: str) -> Callable[[ArrayLike], Array]:
    lax_fn = getattr(lax, lax_name)

    def fn(x: ArrayLike, /) -> Array:
        y = util.plain_operand(x)
        if (
            y is None or dtypes.kind(y.aval.dtype) not in "fc"
        ):  # promotion (ints, scalars, lists...)
            (y,) = promote_args_inexact(name, x)
        return lax_fn(y)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


exp = _inexact_unary("exp", "exp", "Elementwise ``e**x`` (integers promote to float).")
exp2 = _inexact_unary("exp2", "exp2", "Elementwise ``2**x``.")
expm1 = _inexact_unary("expm1", "expm1", "Elementwise ``exp(x) - 1``, accurate near 0.")
log = _inexact_unary("log", "log", "Elementwise natural logarithm.")
log1p = _inexact_unary("log1p", "log1p", "Elementwise ``log(1 + x)``, accurate near 0.")
sqrt = _inexact_unary("sqrt", "sqrt", "Elementwise non-negative square root.")
cbrt = _inexact_unary("cbrt", "cbrt", "Elementwise real cube root.")
sin = _inexact_unary("sin", "sin", "Elementwise sine.")
cos = _inexact_unary("cos", "cos", "Elementwise cosine.")
tan = _inexact_unary("tan", "tan", "Elementwise tangent.")
arcsin = _inexact_unary("arcsin", "asin", "Elementwise inverse sine.")
arccos = _inexact_unary("arccos", "acos", "Elementwise inverse cosine.")
arctan = _inexact_unary("arctan", "atan", "Elementwise inverse tangent.")
sinh = _inexact_unary("sinh", "sinh", "Elementwise hyperbolic sine.")
cosh = _inexact_unary("cosh", "cosh", "Elementwise hyperbolic cosine.")
tanh = _inexact_unary("tanh", "tanh", "Elementwise hyperbolic tangent.")
arcsinh = _inexact_unary("arcsinh", "asinh", "Elementwise inverse hyperbolic sine.")
arccosh = _inexact_unary("arccosh", "acosh", "Elementwise inverse hyperbolic cosine.")
arctanh = _inexact_unary("arctanh", "atanh", "Elementwise inverse hyperbolic tangent.")
_fabs = _inexact_unary("fabs", "abs", "Elementwise absolute value as a float (ints promote).")


def fabs(x, /):
    """Elementwise absolute value as a float (ints promote); complex input is a TypeError, as
    numpy's and jnp's ``fabs`` (use :func:`absolute` for the modulus)."""
    _reject_complex("fabs", x, TypeError, "complex dtypes are not supported (as in numpy)")
    return _fabs(x)


# The array-API spellings.
asin = _inexact_unary("asin", "asin", "Alias of :func:`arcsin`.")
acos = _inexact_unary("acos", "acos", "Alias of :func:`arccos`.")
atan = _inexact_unary("atan", "atan", "Alias of :func:`arctan`.")
asinh = _inexact_unary("asinh", "asinh", "Alias of :func:`arcsinh`.")
acosh = _inexact_unary("acosh", "acosh", "Alias of :func:`arccosh`.")
atanh = _inexact_unary("atanh", "atanh", "Alias of :func:`arctanh`.")


def _log_base(x, base: float):
    out = lax.log(x)
    if _is_complex(x):  # divide both parts by the real log(base): log10(0) is -inf+0j
        inv = Array(np.asarray(1 / np.log(base), dtypes.real_dtype(x.dtype)), True)
        return _complex_parts_map(lambda p: lax.mul(p, inv), out)
    return lax.div(out, lax.log(_const(x, base)))


def log2(x, /):
    """Elementwise base-2 logarithm."""
    (x,) = promote_args_inexact("log2", x)
    return _log_base(x, 2)


def log10(x, /):
    """Elementwise base-10 logarithm."""
    (x,) = promote_args_inexact("log10", x)
    return _log_base(x, 10)


def reciprocal(x, /):
    """Elementwise ``1 / x`` (integers promote to float, as in jnp)."""
    (x,) = promote_args_inexact("reciprocal", x)
    return lax.div(_const(x, 1), x)


def arctan2(x1, x2, /):
    """Elementwise arc tangent of ``x1 / x2`` choosing the quadrant by the signs of both."""
    return lax.atan2(*promote_args_inexact("arctan2", x1, x2))


def atan2(x1, x2, /):
    """Alias of :func:`arctan2`."""
    return lax.atan2(*promote_args_inexact("atan2", x1, x2))


def deg2rad(x, /):
    """Convert angles from degrees to radians."""
    (x,) = promote_args_inexact("deg2rad", x)
    return lax.mul(x, _const(x, np.pi / 180))


def rad2deg(x, /):
    """Convert angles from radians to degrees."""
    (x,) = promote_args_inexact("rad2deg", x)
    return lax.mul(x, _const(x, 180 / np.pi))


def radians(x, /):
    """Alias of :func:`deg2rad`."""
    return deg2rad(x)


def degrees(x, /):
    """Alias of :func:`rad2deg`."""
    return rad2deg(x)


def nextafter(x1, x2, /):
    """The next representable float after ``x1`` in the direction of ``x2``."""
    return lax.nextafter(*promote_args_inexact("nextafter", x1, x2))


def float_power(x1, x2, /):
    """``x1 ** x2`` computed in floating point (default float, as jnp; numpy uses float64)."""
    return lax.pow(*promote_args_inexact("float_power", x1, x2))


def hypot(x1, x2, /):
    """Elementwise ``sqrt(x1**2 + x2**2)`` without intermediate overflow; inf wins over NaN."""
    args = (x1, x2)
    x1, x2 = promote_args_inexact("hypot", x1, x2)
    if _is_complex(x1):
        raise ValueError(
            "hypot is not well defined for complex-valued inputs (as in jnp); convert to "
            "real values first, such as with abs(x)"
        )
    x1, x2 = lax.abs(x1), lax.abs(x2)
    any_inf = lax.bitwise_or(isposinf(x1), isposinf(x2))
    big, small = lax.max(x1, x2), lax.min(x1, x2)
    is_zero = lax.eq(big, _const(big, 0))
    safe_big = _where(is_zero, _full_like(big, 1), big)
    ratio = lax.div(small, safe_big)
    out = lax.mul(big, lax.sqrt(lax.add(_const(big, 1), lax.mul(ratio, ratio))))
    out = _where(is_zero, big, out)
    return _weak_only_if_all_weak(_where(any_inf, _full_like(out, np.inf), out), *args)


def _logaddexp_value(x1, x2):
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    out = lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta)))))
    # delta is NaN for NaN inputs and for infinities of one sign, where x1 + x2 is the answer.
    return _where(lax.ne(delta, delta), lax.add(x1, x2), out)


def _logaddexp2_value(x1, x2):
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    tail = lax.mul(lax.log1p(lax.exp2(lax.neg(lax.abs(delta)))), _const(x1, 1 / np.log(2)))
    return _where(lax.ne(delta, delta), lax.add(x1, x2), lax.add(amax, tail))


def _logaddexp_weight(x1, x2, scale):
    """``d out / d x1`` of logaddexp (``scale`` 1) or logaddexp2 (``scale`` ln 2):
    ``sigmoid(scale * (x1 - x2))``, 1/2 where ``x1 == x2`` (also for two equal infinities,
    whose difference is NaN; the finite branch stays differentiable for second derivatives)."""
    delta = lax.sub(x1, x2)
    both_inf = lax.bitwise_and(lax.eq(x1, x2), lax.ne(delta, delta))
    delta = _where(both_inf, _full_like(delta, 0.0), delta)
    if scale != 1:
        delta = lax.mul(delta, _const(delta, scale))
    return lax.logistic(delta)


def _with_weight_jvp(value_fn, scale):
    """``value_fn`` under a custom_jvp: the tangent is ``w t1 + (1 - w) t2`` with the smooth
    weight of :func:`_logaddexp_weight`. Differentiating the max/abs formula instead gives 0
    (not 1/2) at ``x1 == x2`` and a zero second derivative there, so ``log_sigmoid(0)`` and
    ``softplus(0)`` had gradient 0 and a logistic regression started at zero never moved."""
    from fungrad.transforms.custom import custom_jvp  # late: the transforms import numpy

    fn = custom_jvp(value_fn)

    def jvp(primals, tangents):
        x1, x2 = primals
        t1, t2 = tangents
        w1 = _logaddexp_weight(x1, x2, scale)
        w2 = lax.sub(_full_like(w1, 1.0), w1)
        return fn(x1, x2), lax.add(lax.mul(t1, w1), lax.mul(t2, w2))

    fn.defjvp(jvp)
    return fn


_custom = {}


def _logaddexp_fn(name):
    fn = _custom.get(name)
    if fn is None:
        value_fn, scale = (
            (_logaddexp_value, 1.0)
            if name == "logaddexp"
            else (_logaddexp2_value, float(np.log(2)))
        )
        fn = _custom[name] = _with_weight_jvp(value_fn, scale)
    return fn


def _wrap_between(x, a: float):
    """``x`` wrapped into ``[-a, a)`` (the imaginary part of a complex logarithm)."""
    two_a = _const(x, 2 * a)
    rem = lax.rem(lax.add(x, _const(x, a)), two_a)
    rem = _where(lax.lt(rem, _const(rem, 0)), lax.add(rem, two_a), rem)
    return lax.sub(rem, _const(rem, a))


def _logaddexp_complex(x1, x2, base2: bool):
    """JAX's complex logaddexp(2): ``m + log(1 + exp(x1 + x2 - 2m))`` around the
    lexicographic maximum ``m``, the imaginary part wrapped into ``[-pi, pi)`` (divided by
    ``log 2`` for base 2)."""
    amax = lax.max(x1, x2)
    delta = lax.sub(lax.add(x1, x2), lax.mul(amax, _const(amax, 2)))
    if base2:
        tail = lax.div(lax.log1p(lax.exp2(delta)), _const(delta, np.log(2)))
        out = lax.add(amax, tail)
        return lax.complex(lax.real(out), _wrap_between(lax.imag(out), np.pi / np.log(2)))
    out = lax.add(amax, lax.log1p(lax.exp(delta)))
    return lax.complex(lax.real(out), _wrap_between(lax.imag(out), np.pi))


def logaddexp(x1, x2, /):
    """Elementwise ``log(exp(x1) + exp(x2))`` without overflow; its derivative is
    ``sigmoid(x1 - x2)`` in ``x1`` (1/2 at ties), as JAX's custom JVP gives."""
    x1, x2 = promote_args_inexact("logaddexp", x1, x2)
    if _is_complex(x1):
        return _logaddexp_complex(x1, x2, False)
    return _logaddexp_fn("logaddexp")(x1, x2)


def logaddexp2(x1, x2, /):
    """Elementwise ``log2(2**x1 + 2**x2)`` without overflow (derivative as for logaddexp)."""
    args = (x1, x2)
    x1, x2 = promote_args_inexact("logaddexp2", x1, x2)
    if _is_complex(x1):
        return _weak_only_if_all_weak(_logaddexp_complex(x1, x2, True), *args)
    return _weak_only_if_all_weak(_logaddexp_fn("logaddexp2")(x1, x2), *args)


def sinc(x, /):
    """Normalised sinc: ``sin(pi x) / (pi x)``, and 1 at 0."""
    (x,) = promote_args_inexact("sinc", x)
    is_zero = lax.eq(x, _const(x, 0))
    pi_x = lax.mul(_const(x, np.pi), x)
    safe = _where(is_zero, _full_like(pi_x, 1), pi_x)
    return _where(is_zero, _full_like(safe, 1), lax.div(lax.sin(safe), safe))


# ---------------------------------------------------------------------------------------------
# Arithmetic


def add(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Elementwise ``x1 + x2`` (for bools: logical or, as jnp)."""
    x1, x2 = promote_args("add", x1, x2)
    return lax.bitwise_or(x1, x2) if dtypes.is_bool(x1.dtype) else lax.add(x1, x2)


def multiply(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Elementwise ``x1 * x2`` (for bools: logical and, as jnp)."""
    x1, x2 = promote_args("multiply", x1, x2)
    return lax.bitwise_and(x1, x2) if dtypes.is_bool(x1.dtype) else lax.mul(x1, x2)


def subtract(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Elementwise ``x1 - x2``. Boolean subtraction is a TypeError (use logical_xor)."""
    x1, x2 = promote_args("subtract", x1, x2)
    if dtypes.is_bool(x1.dtype):
        raise TypeError(
            "subtract: boolean subtraction is not supported (both operands are "
            "bool); use logical_xor or convert to an integer dtype"
        )
    return lax.sub(x1, x2)


def negative(x: ArrayLike, /) -> Array:
    """Elementwise ``-x``. Negating a bool array is a TypeError (use logical_not)."""
    (x,) = promote_args("negative", x)
    if dtypes.is_bool(x.dtype):
        raise TypeError(
            "negative: boolean negation is not supported; use logical_not or "
            "convert to an integer dtype"
        )
    return lax.neg(x)


def positive(x, /):
    """Elementwise ``+x`` (a copy)."""
    (x,) = promote_args("positive", x)
    return x


def true_divide(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Elementwise ``x1 / x2`` in floating point (integers promote to the default float)."""
    return lax.div(*promote_args_inexact("true_divide", x1, x2))


def divide(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Alias of :func:`true_divide`."""
    return lax.div(*promote_args_inexact("divide", x1, x2))


def _float_divmod(x1, x2):
    """Floor quotient and remainder of floats (the remainder has the divisor's sign)."""
    mod = lax.rem(x1, x2)
    dividend = _where(lax.eq(x2, _const(x2, 0)), x1, lax.sub(x1, mod))
    div = lax.div(dividend, x2)
    adjust = lax.bitwise_and(lax.ne(mod, _const(mod, 0)), lax.ne(lax.sign(x2), lax.sign(mod)))
    mod = _where(adjust, lax.add(mod, x2), mod)
    div = _where(adjust, lax.sub(div, _const(div, 1)), div)
    return lax.round(div), mod


def floor_divide(x1, x2, /):
    """Elementwise ``x1 // x2``, rounding toward negative infinity.

    Integer division by zero does not trap: it gives what XLA computes (``7 // 0 == -2``,
    ``-7 // 0 == 0`` for int32; ``x // 0 == max`` for unsigned), as in JAX.
    """
    x1, x2 = promote_args_numeric("floor_divide", x1, x2)
    if _is_complex(x1):
        raise TypeError("floor_divide does not support complex-valued inputs (as in jnp)")
    if dtypes.is_unsigned(x1.dtype):
        return lax.div(x1, x2)
    if dtypes.is_signed(x1.dtype):
        quotient = lax.div(x1, x2)
        inexact = lax.ne(lax.rem(x1, x2), _const(x1, 0))
        fix_down = lax.bitwise_and(lax.ne(lax.sign(x1), lax.sign(x2)), inexact)
        return _where(fix_down, lax.sub(quotient, _const(quotient, 1)), quotient)
    return _float_divmod(x1, x2)[0]


def remainder(x1, x2, /):
    """Elementwise ``x1 % x2`` with the sign of the divisor (Python's ``%``).

    Integer ``x % 0`` is 0, as in JAX.
    """
    x1, x2 = promote_args_numeric("remainder", x1, x2)
    if dtypes.is_int(x2.dtype):
        x2 = _where(lax.eq(x2, _const(x2, 0)), _full_like(x2, 1), x2)
    trunc_mod = lax.rem(x1, x2)
    zero = _const(trunc_mod, 0)
    signs_differ = lax.ne(lax.lt(trunc_mod, zero), lax.lt(x2, _const(x2, 0)))
    do_plus = lax.bitwise_and(signs_differ, lax.ne(trunc_mod, zero))
    return _where(do_plus, lax.add(trunc_mod, x2), trunc_mod)


def mod(x1, x2, /):
    """Alias of :func:`remainder`."""
    return remainder(x1, x2)


def fmod(x1, x2, /):
    """Elementwise remainder with the sign of the dividend (C's ``fmod``); integer
    ``x fmod 0`` is 0, as in JAX."""
    x1, x2 = promote_args_numeric("fmod", x1, x2)
    if dtypes.is_int(x2.dtype):
        x2 = _where(lax.eq(x2, _const(x2, 0)), _full_like(x2, 1), x2)
    return lax.rem(x1, x2)


def divmod(x1, x2, /):
    """``(floor_divide(x1, x2), remainder(x1, x2))``."""
    x1, x2 = promote_args_numeric("divmod", x1, x2)
    if _is_complex(x1):
        raise TypeError("divmod does not support complex-valued inputs (as in jnp)")
    if dtypes.is_float(x1.dtype):
        return _float_divmod(x1, x2)
    return floor_divide(x1, x2), remainder(x1, x2)


def _concrete_int_exponent(x):
    """The exponent as a Python int when it is statically a 0-d integer, else None."""
    if isinstance(x, core.Tracer):
        return None
    if isinstance(x, (int, np.integer)) or (
        isinstance(x, (Array, np.ndarray)) and x.ndim == 0 and dtypes.kind(x.dtype) in "biu"
    ):
        return operator.index(x) if not isinstance(x, (Array, np.ndarray)) else int(x)
    return None


def _pow_int_int(x1, x2):
    """Integer power by binary exponentiation (jnp's algorithm: 6 bits of the exponent, since
    any larger exponent overflows for |x1| > 1). Negative exponents give jnp's results."""
    zero, one = _const(x2, 0), _const(x2, 1)
    base_zero = lax.bitwise_and(lax.eq(x1, _const(x1, 0)), lax.ne(x2, zero))
    acc = _where(base_zero, _full_like(x1, 0), _full_like(x1, 1))
    acc = util.broadcast_to_shape(acc, util.broadcast_shapes(x1.shape, x2.shape))
    for _ in range(6):
        bit_set = lax.ne(lax.bitwise_and(x2, one), zero)
        acc = _where(bit_set, lax.mul(acc, x1), acc)
        x1 = lax.mul(x1, x1)
        x2 = lax.shift_right_logical(x2, one)
    return acc


def power(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Elementwise ``x1 ** x2``.

    A static integer exponent uses ``lax.integer_pow`` and keeps ``x1``'s dtype (as jnp);
    raising integers to a static negative power is a TypeError. Integer arrays use binary
    exponentiation; everything else ``lax.pow`` after promotion.
    """
    util.check_arraylike("power", x1, x2)
    n = _concrete_int_exponent(x2)
    if n is not None:
        (x1,) = promote_args_numeric("power", x1)
        if n < 0 and not dtypes.is_inexact(x1.dtype):
            raise TypeError(
                f"power: integers cannot be raised to negative powers, got {x1.dtype.name} ** {n}"
            )
        return lax.integer_pow(x1, n)
    x1, x2 = promote_args_numeric("power", x1, x2)
    if dtypes.is_int(x1.dtype):
        return _pow_int_int(x1, x2)
    return lax.pow(x1, x2)


def pow(x1, x2, /):
    """Alias of :func:`power`."""
    return power(x1, x2)


def square(x: ArrayLike, /) -> Array:
    """Elementwise ``x * x`` (bools promote to int, as jnp)."""
    (x,) = promote_args_numeric("square", x)
    return lax.mul(x, x)


def absolute(x: ArrayLike, /) -> Array:
    """Elementwise absolute value. Unsigned and bool inputs are returned unchanged; the
    absolute value of the most negative integer is itself (two's complement), as in JAX."""
    (x,) = promote_args("absolute", x)
    if dtypes.is_bool(x.dtype) or dtypes.is_unsigned(x.dtype):
        return x
    return lax.abs(x)


def abs(x: ArrayLike, /) -> Array:
    """Alias of :func:`absolute`."""
    return absolute(x)


def sign(x, /):
    """Elementwise sign: -1, 0 or 1 (NaN for NaN, and -0. for -0.). Bool is a TypeError."""
    (x,) = promote_args("sign", x)
    if dtypes.is_bool(x.dtype):
        raise TypeError("sign does not accept dtype bool; accepted dtypes are integer and floating")
    return lax.sign(x)


def maximum(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Elementwise maximum; NaN if either operand is NaN."""
    return lax.max(*promote_args("maximum", x1, x2))


def minimum(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Elementwise minimum; NaN if either operand is NaN."""
    return lax.min(*promote_args("minimum", x1, x2))


def fmax(x1, x2, /):
    """Elementwise maximum ignoring NaN (NaN only where both are NaN)."""
    x1, x2 = promote_args("fmax", x1, x2)
    out = lax.max(x1, x2)
    if _is_float(x1):
        out = _where(isnan(x1), x2, _where(isnan(x2), x1, out))
    return out


def fmin(x1, x2, /):
    """Elementwise minimum ignoring NaN (NaN only where both are NaN)."""
    x1, x2 = promote_args("fmin", x1, x2)
    out = lax.min(x1, x2)
    if _is_float(x1):
        out = _where(isnan(x1), x2, _where(isnan(x2), x1, out))
    return out


_NO_VALUE = object()


def clip(arr=None, /, min=None, max=None, *, a=_NO_VALUE, a_min=_NO_VALUE, a_max=_NO_VALUE):
    """Clip values to ``[min, max]`` (either may be None); ``maximum`` then ``minimum``, so
    ``min > max`` gives ``max`` and NaNs propagate, as in jnp. ``a``, ``a_min`` and ``a_max``
    are numpy's spellings of the same arguments."""
    for old, value, new in (("a", a, arr), ("a_min", a_min, min), ("a_max", a_max, max)):
        if value is not _NO_VALUE and new is not None:
            raise TypeError(f"clip: got both {old!r} and its new spelling; pass only one")
    arr = arr if a is _NO_VALUE else a
    min = min if a_min is _NO_VALUE else a_min
    max = max if a_max is _NO_VALUE else a_max
    if arr is None:
        raise TypeError("clip: the array argument is required")
    util.check_arraylike("clip", arr)
    for v in (arr, min, max):
        _reject_complex(
            "clip",
            v,
            ValueError,
            "received a complex value either through the input or the min/max keywords. "
            "Complex values have no ordering and cannot be clipped; take the real or "
            "imaginary part first (fnp.real / fnp.imag)",
        )
    if min is not None:
        arr = maximum(min, arr)
    if max is not None:
        arr = minimum(max, arr)
    return util.asarray(arr)


# ---------------------------------------------------------------------------------------------
# Rounding


def _no_complex_rounding(fun_name: str, x) -> None:
    if _is_complex(x):
        raise TypeError(
            f"{fun_name} does not accept dtype {x.dtype.name}. Accepted dtypes are subtypes "
            "of floating (round the real and imaginary parts separately)."
        )


def floor(x, /):
    """Elementwise floor (integers and bools are returned unchanged, as jnp)."""
    (x,) = promote_args("floor", x)
    _no_complex_rounding("floor", x)
    return lax.floor(x) if _is_float(x) else x


def ceil(x, /):
    """Elementwise ceiling (integers and bools are returned unchanged)."""
    (x,) = promote_args("ceil", x)
    _no_complex_rounding("ceil", x)
    return lax.ceil(x) if _is_float(x) else x


def trunc(x, /):
    """Round toward zero (integers and bools are returned unchanged)."""
    (x,) = promote_args("trunc", x)
    _no_complex_rounding("trunc", x)
    if not _is_float(x):
        return x
    return _where(lax.lt(x, _const(x, 0)), lax.ceil(x), lax.floor(x))


def fix(x, /):
    """Round toward zero (numpy's name; same as :func:`trunc`)."""
    (x,) = promote_args("fix", x)
    return trunc(x)


def rint(x, /):
    """Round to the nearest integer, halves to even (integers and bools become the default
    float dtype, float64 with x64, as jnp: no rounding is needed)."""
    util.check_arraylike("rint", x)
    x = util.asarray(x, fun_name="rint")
    if _is_complex(x):  # each part rounded, as jnp
        return _complex_parts_map(lambda p: lax.round(p, lax.RoundingMethod.TO_NEAREST_EVEN), x)
    if not dtypes.is_float(x.dtype):
        return lax.convert_element_type(x, dtypes.default_float_dtype())
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


def round(a, decimals: int = 0, out=None):
    """Round to ``decimals`` decimal places, halves to even (``x * 10**d``, rint, divide).

    Integer arrays are returned unchanged for ``decimals >= 0``; ``decimals < 0`` on integers
    is a ValueError, as in jnp (convert to float first). Bools are a TypeError.
    """
    util.check_arraylike("round", a)
    _check_out("round", out)
    decimals = operator.index(decimals)
    a = util.asarray(a)
    if _is_complex(a):  # each part rounded, as jnp
        return _complex_parts_map(lambda p: round(p, decimals), a)
    if dtypes.is_bool(a.dtype):
        raise TypeError("round: bool arrays cannot be rounded; convert to a numeric dtype")
    if not _is_float(a):
        if decimals < 0:
            raise ValueError(
                "round: decimals < 0 is not supported for integer arrays (as in "
                "jax.numpy); convert to a float dtype first"
            )
        return a
    if decimals == 0:
        return lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN)
    # float16 is rescaled in float32 so that 10**decimals does not overflow, as in jnp.
    x = lax.convert_element_type(a, dtypes.float32, a.weak_type) if a.dtype == np.float16 else a
    factor = _const(x, 10.0**decimals)
    out_ = lax.div(lax.round(lax.mul(x, factor), lax.RoundingMethod.TO_NEAREST_EVEN), factor)
    return lax.convert_element_type(out_, a.dtype, a.weak_type)


def around(a, decimals: int = 0, out=None):
    """Alias of :func:`round`."""
    return round(a, decimals, out)


def _check_out(fun_name: str, out) -> None:
    if out is not None:
        raise TypeError(
            f"{fun_name}: the 'out' argument is not supported (fungrad arrays are "
            "immutable); use the returned array"
        )


def modf(x, /, out=None):
    """``(fractional part, integral part)``, both with ``x``'s sign. As in jnp, the fractional
    part of +-inf is NaN (numpy gives 0)."""
    _check_out("modf", out)
    (x,) = promote_args_inexact("modf", x)
    whole = _where(lax.ge(x, _const(x, 0)), lax.floor(x), lax.ceil(x))
    return lax.sub(x, whole), whole


# ---------------------------------------------------------------------------------------------
# Floating-point classification and bit-level functions


def isnan(x, /):
    """Elementwise test for NaN (always False for integers and bools)."""
    (x,) = promote_args("isnan", x)
    if _is_complex(x):
        return lax.bitwise_or(isnan(lax.real(x)), isnan(lax.imag(x)))
    # x != x for every real dtype, as jnp: False for integers, weak when x is (isnan(3))
    return lax.ne(x, x)


def isinf(x, /):
    """Elementwise test for +-inf."""
    (x,) = promote_args("isinf", x)
    if _is_complex(x):
        return lax.bitwise_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    if not _is_float(x):
        return _full_like(x, False, np.bool_)
    return _strong(lax.eq(lax.abs(x), _const(x, np.inf)))  # jnp compares with a strong inf


def isfinite(x, /):
    """Elementwise test for finite values (not inf, not NaN)."""
    (x,) = promote_args("isfinite", x)
    if _is_complex(x):
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.is_finite(x) if _is_float(x) else _full_like(x, True, np.bool_)


def _no_complex_inf(fun_name: str, x) -> None:
    if _is_complex(x):
        raise ValueError(
            f"{fun_name}: isposinf/isneginf are not well defined for complex types (as in "
            "jnp); test the real and imaginary parts"
        )


def isposinf(x, /, out=None):
    """Elementwise test for +inf."""
    _check_out("isposinf", out)
    (x,) = promote_args("isposinf", x)
    _no_complex_inf("isposinf", x)
    return _strong(lax.eq(x, _const(x, np.inf))) if _is_float(x) else _full_like(x, False, np.bool_)


def isneginf(x, /, out=None):
    """Elementwise test for -inf."""
    _check_out("isneginf", out)
    (x,) = promote_args("isneginf", x)
    _no_complex_inf("isneginf", x)
    return (
        _strong(lax.eq(x, _const(x, -np.inf))) if _is_float(x) else _full_like(x, False, np.bool_)
    )


_SAME_WIDTH_INT = {2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}


def signbit(x, /):
    """Elementwise test of the sign bit (True for -0. and for NaNs with the sign bit set)."""
    (x,) = promote_args("signbit", x)
    if _is_complex(x):
        raise ValueError(f"signbit is not well defined for {x.dtype.name} (as in jnp)")
    if dtypes.is_bool(x.dtype) or dtypes.is_unsigned(x.dtype):
        return _full_like(x, False, np.bool_)
    if dtypes.is_signed(x.dtype):
        return _strong(lax.lt(x, _const(x, 0)))
    bits = lax.bitcast_convert_type(x, _SAME_WIDTH_INT[x.dtype.itemsize])
    return _strong(lax.lt(bits, _const(bits, 0)))


def copysign(x1, x2, /):
    """``|x1|`` with the sign (bit) of ``x2``; integers promote to float, as jnp."""
    x1, x2 = promote_args_inexact("copysign", x1, x2)
    if _is_complex(x1):
        raise TypeError("copysign does not support complex-valued inputs (as in jnp)")
    magnitude = lax.abs(x1)
    return _where(signbit(x2), lax.neg(magnitude), magnitude)


def heaviside(x1, x2, /):
    """Heaviside step: 0 where ``x1 < 0``, ``x2`` where ``x1 == 0``, 1 where ``x1 > 0``,
    NaN where ``x1`` is NaN."""
    args = (x1, x2)
    x1, x2 = promote_args_inexact("heaviside", x1, x2)
    zero = _const(x1, 0)
    out = _where(lax.gt(x1, zero), _full_like(x1, 1), _where(isnan(x1), x1, x2))
    return _weak_only_if_all_weak(_where(lax.lt(x1, zero), _full_like(x1, 0), out), *args)


def nan_to_num(x, copy: bool = True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN by ``nan`` and +-inf by ``posinf``/``neginf`` (default: the dtype's largest
    and smallest finite values). Integer and bool arrays are returned unchanged."""
    del copy  # arrays are immutable
    (x,) = promote_args("nan_to_num", x)
    if _is_complex(x):  # each part on its own, as jnp
        return _complex_parts_map(lambda p: nan_to_num(p, nan=nan, posinf=posinf, neginf=neginf), x)
    if not _is_float(x):
        return x
    info = np.finfo(x.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = _where(isnan(x), _full_like(x, nan), x)
    out = _where(isposinf(out), _full_like(out, posinf), out)
    return _where(isneginf(out), _full_like(out, neginf), out)


def _float_int_parts(x):
    """``(bits, extra_exponent)`` of floats with subnormals scaled into the normal range."""
    info = np.finfo(x.dtype)
    int_dtype = _SAME_WIDTH_INT[x.dtype.itemsize]
    subnormal = lax.lt(lax.abs(x), _const(x, info.tiny))
    x = _where(subnormal, lax.mul(x, _const(x, 2.0**info.nmant)), x)
    extra = _where(subnormal, _full_like(x, -info.nmant, int_dtype), _full_like(x, 0, int_dtype))
    return lax.bitcast_convert_type(x, int_dtype), extra


def frexp(x, /):
    """Split ``x`` into mantissa in ``[0.5, 1)`` and an int32 exponent: ``x = m * 2**e``.
    Zeros, infinities and NaNs give ``(x, 0)``."""
    (x,) = promote_args_inexact("frexp", x)
    info = np.finfo(x.dtype)
    mask = (1 << info.nexp) - 1
    bias = 1 - info.minexp
    bits, exponent = _float_int_parts(x)
    biased = lax.bitwise_and(
        lax.shift_right_logical(bits, _const(bits, info.nmant)), _const(bits, mask)
    )
    exponent = lax.add(exponent, lax.sub(biased, _const(biased, bias - 1)))
    bits = lax.bitwise_and(bits, _const(bits, ~(mask << info.nmant)))
    bits = lax.bitwise_or(bits, _const(bits, (bias - 1) << info.nmant))
    mantissa = lax.bitcast_convert_type(bits, x.dtype)
    special = lax.bitwise_or(lax.bitwise_not(lax.is_finite(x)), lax.eq(x, _const(x, 0)))
    exponent = _where(special, _full_like(exponent, 0), exponent)
    return _where(special, x, mantissa), lax.convert_element_type(exponent, np.int32)


def ldexp(x1, x2, /):
    """``x1 * 2**x2`` for float ``x1`` and integer ``x2``, without intermediate overflow."""
    util.check_arraylike("ldexp", x1, x2)
    x2 = util.asarray(x2)
    if dtypes.is_bool(x2.dtype):
        x2 = lax.convert_element_type(x2, dtypes.default_int_dtype())
    if not dtypes.is_int(x2.dtype):
        raise TypeError(f"ldexp: the exponent must be an integer array, got {x2.dtype.name}")
    (x1,) = promote_args_inexact("ldexp", x1)
    if _is_complex(x1):
        raise ValueError(
            f"ldexp is not supported for complex input ({x1.dtype.name}), as in jnp; scale "
            "the real and imaginary parts"
        )
    x1, x2 = util.promote_shapes("ldexp", x1, x2)
    mantissa, exponent = frexp(x1)
    exponent = lax.add(lax.convert_element_type(exponent, x2.dtype), x2)
    exponent = lax.convert_element_type(exponent, x1.dtype)
    # The exponent may overflow by one and still give a finite result.
    positive_ = lax.gt(exponent, _const(exponent, 0))
    mantissa = _where(positive_, lax.mul(mantissa, _const(mantissa, 2)), mantissa)
    exponent = _where(positive_, lax.sub(exponent, _const(exponent, 1)), exponent)
    out = lax.mul(mantissa, lax.pow(_full_like(exponent, 2), exponent))
    keep = lax.bitwise_or(isinf(x1), lax.eq(x1, _const(x1, 0)))
    return _where(keep, x1, out)


# ---------------------------------------------------------------------------------------------
# Integer functions (gcd, lcm)


def _integer_args(fun_name: str, x1, x2):
    x1, x2 = promote_args_numeric(fun_name, x1, x2)
    _require_kinds(fun_name, x1, "iu", "integer")
    shape = util.broadcast_shapes(x1.shape, x2.shape)
    return util.broadcast_to_shape(x1, shape), util.broadcast_to_shape(x2, shape)


def _gcd_cond(carry):
    _, x2 = carry
    return lax.reduce_or(lax.ne(x2, _const(x2, 0)), tuple(range(x2.ndim)))


def _gcd_body(carry):
    """One Euclid step on every element whose remainder is still nonzero, keeping x1 >= x2."""
    x1, x2 = carry
    nonzero = lax.ne(x2, _const(x2, 0))
    safe_x2 = _where(nonzero, x2, _full_like(x2, 1))
    x1, x2 = (_where(nonzero, x2, x1), _where(nonzero, lax.rem(x1, safe_x2), _full_like(x2, 0)))
    swap = lax.lt(x1, x2)
    return _where(swap, x2, x1), _where(swap, x1, x2)


def gcd(x1, x2, /):
    """Elementwise greatest common divisor of the absolute values (``gcd(0, 0) == 0``); a
    ``lax.while_loop`` of Euclid steps, as in jnp."""
    args = (x1, x2)
    x1, x2 = _integer_args("gcd", x1, x2)
    x1, x2 = absolute(x1), absolute(x2)
    return _weak_only_if_all_weak(lax.while_loop(_gcd_cond, _gcd_body, (x1, x2))[0], *args)


def lcm(x1, x2, /):
    """Elementwise least common multiple of the absolute values (0 if either is 0)."""
    args = (x1, x2)
    x1, x2 = _integer_args("lcm", x1, x2)
    x1, x2 = absolute(x1), absolute(x2)
    d = gcd(x1, x2)
    is_zero = lax.eq(d, _const(d, 0))
    safe_d = _where(is_zero, _full_like(d, 1), d)
    out = _where(is_zero, _full_like(d, 0), lax.mul(x1, lax.div(x2, safe_d)))
    return _weak_only_if_all_weak(out, *args)
