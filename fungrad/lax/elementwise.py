"""Elementwise primitives: arithmetic, transcendental, comparison, bitwise, select, convert.

Each primitive is defined once here with all of its rules beside it: impl, abstract_eval, jvp
(JAX's derivative formulas, written with lax functions so they differentiate again and batch),
transpose for the primitives linear in some operand (add, sub, neg, mul, div in its numerator,
select_n in its cases, float -> float convert_element_type) and batching (unary ops keep their
batch dim; n-ary ops move batch dims to the front, leaving unbatched 0-d operands alone).

Operands of an n-ary op share one dtype and have equal shapes, except that 0-d operands
broadcast; Python scalars take the dtype of the array operands weakly (``operands_same_dtype``).
The impls are the numpy references the compilers are tested against. They follow XLA where
numpy differs: integer division truncates toward zero and never traps (``x / 0`` is -1, or
all ones for unsigned; ``x % 0`` is ``x``; ``INT_MIN / -1`` is ``INT_MIN``), ``max``/``min``
propagate NaN and order -0.0 below +0.0, shifts by at least the bit width give 0 (or the sign
for ``shift_right_arithmetic``), and float -> int conversion saturates with NaN -> 0.
Special functions (erf, lgamma...) are computed in float64 (``special_math``) and rounded.
"""

from __future__ import annotations

import enum
import math
import operator
from typing import TypeVar

import numpy as np

from fungrad import core, dtypes, tree_util
from fungrad.array import Array
from fungrad.core import ShapedArray
from fungrad.lax import complex_math, special_math
from fungrad.lax.accuracy import check_accuracy
from fungrad.lax.utils import (
    ANY,
    ANY_OR_COMPLEX,
    COMPLEX,
    FLOAT,
    INEXACT,
    INT,
    INT_OR_BOOL,
    NUMERIC,
    NUMERIC_OR_COMPLEX,
    SIGNED,
    broadcasting_shape,
    check_kinds,
    full_like_scalar,
    ignore_fp_errors,
    operand,
    operands_same_dtype,
    standard_naryop,
    standard_primitive,
)
from fungrad.lowering import kernel
from fungrad.transforms.jvp import (
    Zero,
    defjvp,
    defjvp2,
    defjvp_zero,
    deflinear,
    instantiate_zeros,
    jvp_rules,
    no_jvp,
    tangent_aval,
)
from fungrad.transforms.transpose import deflinear_transpose, is_undefined_primal
from fungrad.transforms.vmap import (
    batch_rules,
    bdim_at_front,
    defbroadcasting,
    defvectorized,
    moveaxis,
)

__all__ = [
    # arithmetic
    "add",
    "sub",
    "mul",
    "div",
    "rem",
    "pow",
    "integer_pow",
    "neg",
    "sign",
    "floor",
    "ceil",
    "round",
    "RoundingMethod",
    "abs",
    "max",
    "min",
    "nextafter",
    "square",
    "reciprocal",
    # transcendental
    "exp",
    "exp2",
    "log",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "cbrt",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "logistic",
    "erf",
    "erfc",
    "erf_inv",
    "lgamma",
    "digamma",
    "polygamma",
    "is_finite",
    # comparison, bitwise, logical
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "and_",
    "or_",
    "not_",
    "xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_not",
    "bitwise_xor",
    "shift_left",
    "shift_right_logical",
    "shift_right_arithmetic",
    "population_count",
    "clz",
    # selection, conversion
    "select_n",
    "select",
    "clamp",
    "convert_element_type",
    "bitcast_convert_type",
    "stop_gradient",
    # primitives
    "add_p",
    "sub_p",
    "mul_p",
    "div_p",
    "rem_p",
    "pow_p",
    "integer_pow_p",
    "neg_p",
    "sign_p",
    "floor_p",
    "ceil_p",
    "round_p",
    "abs_p",
    "max_p",
    "min_p",
    "nextafter_p",
    "square_p",
    "exp_p",
    "exp2_p",
    "log_p",
    "log1p_p",
    "expm1_p",
    "sqrt_p",
    "rsqrt_p",
    "cbrt_p",
    "sin_p",
    "cos_p",
    "tan_p",
    "asin_p",
    "acos_p",
    "atan_p",
    "atan2_p",
    "sinh_p",
    "cosh_p",
    "tanh_p",
    "asinh_p",
    "acosh_p",
    "atanh_p",
    "logistic_p",
    "erf_p",
    "erfc_p",
    "erf_inv_p",
    "lgamma_p",
    "digamma_p",
    "is_finite_p",
    "eq_p",
    "ne_p",
    "lt_p",
    "le_p",
    "gt_p",
    "ge_p",
    "and_p",
    "or_p",
    "not_p",
    "xor_p",
    "shift_left_p",
    "shift_right_logical_p",
    "shift_right_arithmetic_p",
    "population_count_p",
    "clz_p",
    "select_n_p",
    "clamp_p",
    "convert_element_type_p",
    "bitcast_convert_type_p",
    "stop_gradient_p",
]

FLOAT_OR_SIGNED = FLOAT | SIGNED


def _is_python_scalar(x) -> bool:
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def _unsigned(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def _signed(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"i{dtype.itemsize}")


def _all_ones(dtype: np.dtype):
    """-1 for signed integers, the maximum for unsigned ones (every bit set)."""
    return np.invert(np.zeros((), dtype))


# -- helpers for the rules ------------------------------------------------------------------
# Rules are written with the lax wrappers of this module (and lax.broadcast_in_dim / full_like /
# reduce_sum, imported at call time), so they are traceable, batchable and differentiable again.


def _const(x, value):
    """``value`` as a weak 0-d array of ``x``'s dtype: it broadcasts against any operand."""
    return full_like_scalar(value, x)


def _shape(x) -> tuple[int, ...]:
    return core.get_aval(x).shape


def _out_shape(*xs) -> tuple[int, ...]:
    """The shape of an elementwise op's result: the operands' common shape (0-d broadcast)."""
    # Operand shapes are equal or 0-d, so the first non-0-d one is the result's.
    return next((_shape(x) for x in xs if _shape(x)), ())


def _broadcast_to(x, shape):
    """``x`` (0-d or already of ``shape``) as an array of ``shape``."""
    if _shape(x) == tuple(shape):
        return x
    from fungrad import lax

    return lax.broadcast_in_dim(x, shape, ())


def _zeros_like(x):
    from fungrad import lax

    return lax.full_like(x, 0)


def _unbroadcast(aval: ShapedArray, ct):
    """The cotangent of an operand of ``aval`` given ``ct`` of the op's result: a 0-d operand
    broadcast inside the primitive receives the sum of ``ct`` over all axes."""
    if _shape(ct) == aval.shape:
        return ct
    from fungrad import lax

    return lax.reduce_sum(ct, tuple(range(len(_shape(ct)))))


def _select_tangent(pred, t, shape):
    """``t`` where ``pred`` holds and 0 elsewhere, as an array of ``shape``."""
    t = _broadcast_to(t, shape)
    return select_n_p.bind(_broadcast_to(pred, shape), _zeros_like(t), t)


def _replace_zero(x):
    """``x`` with its zeros replaced by ones (keeps log / reciprocal finite where a select
    discards them, so that higher derivatives do not pick up ``0 * inf``)."""
    return select_n_p.bind(eq(x, _const(x, 0)), x, _broadcast_to(_const(x, 1), _shape(x)))


def _is_float(x) -> bool:
    return dtypes.kind(core.get_aval(x).dtype) == "f"


def _is_inexact(x) -> bool:
    return dtypes.kind(core.get_aval(x).dtype) in "fc"


def _is_complex(x) -> bool:
    return dtypes.kind(core.get_aval(x).dtype) == "c"


# -- arithmetic -----------------------------------------------------------------------------

add_p = standard_naryop("add", np.add, NUMERIC_OR_COMPLEX)


def add(x, y):
    """Elementwise ``x + y`` (operands of one dtype; Python scalars take it weakly)."""
    return add_p.bind(*operands_same_dtype("add", x, y))


sub_p = standard_naryop("sub", np.subtract, NUMERIC_OR_COMPLEX)


def sub(x, y):
    """Elementwise ``x - y``."""
    return sub_p.bind(*operands_same_dtype("sub", x, y))


def _multiply(x, y):
    """``x * y``; complex operands by the textbook formula in their own precision, as XLA
    (numpy's loop fuses a multiply-add, so it overflows differently: (-2.5+1j) * (inf+3e38j)
    is -inf+inf*j there, -inf+nan*j in XLA)."""
    x, y = np.asarray(x), np.asarray(y)
    if dtypes.kind(x.dtype) != "c":
        return np.multiply(x, y)
    with np.errstate(all="ignore"):
        xr, xi, yr, yi = x.real, x.imag, y.real, y.imag
        re, im = xr * yr - xi * yi, xr * yi + xi * yr
    out = np.empty(re.shape, x.dtype)
    out.real, out.imag = re, im
    return out[()]


mul_p = standard_naryop("mul", _multiply, NUMERIC_OR_COMPLEX)


def mul(x, y):
    """Elementwise ``x * y``."""
    return mul_p.bind(*operands_same_dtype("mul", x, y))


def _add_jvp_operand(t, x, y):
    return _broadcast_to(t, _out_shape(x, y))


def _add_transpose(ct, x, y):
    return [_unbroadcast(v.aval, ct) if is_undefined_primal(v) else None for v in (x, y)]


def _sub_transpose(ct, x, y):
    return [
        _unbroadcast(x.aval, ct) if is_undefined_primal(x) else None,
        _unbroadcast(y.aval, neg(ct)) if is_undefined_primal(y) else None,
    ]


def _mul_transpose(ct, x, y):
    if is_undefined_primal(x) and is_undefined_primal(y):
        raise TypeError(
            "mul: cannot transpose a product of two linear operands (the "
            "expression is not linear in its inputs)"
        )
    if is_undefined_primal(x):
        return [_unbroadcast(x.aval, mul(ct, y)), None]
    return [None, _unbroadcast(y.aval, mul(x, ct))]


defjvp(add_p, _add_jvp_operand, _add_jvp_operand)
deflinear_transpose(add_p, _add_transpose)
defjvp(sub_p, _add_jvp_operand, lambda t, x, y: _broadcast_to(neg(t), _out_shape(x, y)))
deflinear_transpose(sub_p, _sub_transpose)
defjvp(mul_p, lambda t, x, y: mul(t, y), lambda t, x, y: mul(x, t))
deflinear_transpose(mul_p, _mul_transpose)


def _safe_divisor(x, y):
    """``y`` with the trapping integer divisors (0, and -1 under INT_MIN) replaced by 1."""
    zero = y == 0
    bad = zero
    if dtypes.kind(x.dtype) == "i":
        bad = zero | ((x == np.iinfo(x.dtype).min) & (y == -1))
    return np.where(bad, 1, y).astype(x.dtype), zero


def _div_impl(x, y):
    if dtypes.kind(x.dtype) == "c":  # XLA's special values (numpy gives NaN for (-inf+inf*j) / 3)
        return complex_math.div(x, y)
    if dtypes.kind(x.dtype) == "f":
        return np.true_divide(x, y)
    safe_y, zero = _safe_divisor(x, y)
    # C division truncates toward zero; x - fmod(x, y) is an exact multiple of y.
    q = (x - np.fmod(x, safe_y)) // safe_y
    return np.where(zero, _all_ones(x.dtype), q)


div_p = standard_naryop("div", _div_impl, NUMERIC_OR_COMPLEX)


def div(x, y):
    """Elementwise division. Integers truncate toward zero (C semantics); ``x / 0`` is -1
    (all ones for unsigned) and ``INT_MIN / -1`` is ``INT_MIN``, as XLA defines them."""
    return div_p.bind(*operands_same_dtype("div", x, y))


def _div_transpose(ct, x, y):
    if is_undefined_primal(y):
        raise TypeError(
            "div: cannot transpose with respect to the divisor (div is linear in "
            "its numerator only)"
        )
    return [_unbroadcast(x.aval, div(ct, y)), None]


defjvp(div_p, lambda t, x, y: div(t, y), lambda t, x, y: mul(mul(neg(t), x), integer_pow(y, -2)))
deflinear_transpose(div_p, _div_transpose)


def _rem_impl(x, y):
    if dtypes.kind(x.dtype) == "f":
        return np.fmod(x, y)
    safe_y, zero = _safe_divisor(x, y)
    return np.where(zero, x, np.fmod(x, safe_y))


rem_p = standard_naryop("rem", _rem_impl, NUMERIC)


def rem(x, y):
    """Elementwise remainder with the sign of the dividend (C ``fmod``); ``x % 0`` is ``x``
    for integers (NaN for floats)."""
    return rem_p.bind(*operands_same_dtype("rem", x, y))


def _rem_jvp_rhs(t, x, y):
    # rem(x, y) = x - y * trunc(x / y): d/dy = -trunc(x / y) (JAX's rule).
    q = div(x, y)
    return mul(neg(t), mul(sign(q), floor(abs(q))))


defjvp(rem_p, _add_jvp_operand, _rem_jvp_rhs)


def _pow_impl(x, y):
    # An integer exponent is converted to the base's float dtype first, as XLA lowers it.
    # NOTE: the exponent is passed as a contiguous array of at least one dimension: for a
    # scalar (or broadcast) exponent numpy takes shortcuts (0.5 -> sqrt) that give
    # pow(-inf, 0.5) = nan and pow(-0.0, 0.5) = -0.0, where C's pow and XLA give inf and 0.0.
    shape = np.broadcast_shapes(np.shape(x), np.shape(y))
    y = np.array(np.broadcast_to(np.asarray(y).astype(x.dtype), shape), ndmin=1)
    with np.errstate(all="ignore"):
        return np.power(x, y).reshape(shape)


def _pow_abstract_eval(x, y):
    check_kinds("pow", x.dtype, INEXACT, "base (first argument)")
    check_kinds("pow", y.dtype, NUMERIC_OR_COMPLEX, "exponent (second argument)")
    if dtypes.kind(y.dtype) in "fc" and y.dtype != x.dtype:
        raise TypeError(
            f"pow: a floating or complex exponent must have the base's dtype, got "
            f"{x.dtype.name} and {y.dtype.name}; convert one of them, or use "
            "fungrad.numpy.power for type promotion"
        )
    shape = broadcasting_shape("pow", x, y)
    return ShapedArray(shape, x.dtype, x.weak_type and y.weak_type)


pow_p = standard_primitive("pow", _pow_impl, _pow_abstract_eval)


def _weak_float(v, other):
    """A Python scalar operand of pow as a weak float (or complex): ``other``'s float or
    complex dtype if it has one."""
    if isinstance(v, bool):
        return operand(v, "pow")
    if not _is_python_scalar(other) and dtypes.kind(other.dtype) in "fc":
        return full_like_scalar(v if isinstance(v, complex) else float(v), other)
    if isinstance(v, complex) or isinstance(other, complex):
        return Array(dtypes.default_complex_dtype().type(v), True)
    return Array(dtypes.default_float_dtype().type(v), True)


def pow(x, y):
    """Elementwise ``x ** y`` for a floating or complex base. The exponent has the base's
    dtype or is any integer array; a Python int exponent stays a (weak) integer."""
    x = x if _is_python_scalar(x) else operand(x, "pow")
    y = y if _is_python_scalar(y) else operand(y, "pow")
    if _is_python_scalar(y):
        y = operand(y, "pow") if type(y) is int else _weak_float(y, x)
    if _is_python_scalar(x):
        x = _weak_float(x, y)
    return pow_p.bind(x, y)


def _pow_jvp_lhs(t, ans, x, y):
    # JAX's _pow_jvp_lhs: y * x^(y-1), exactly 0 for an integer exponent 0 (even at x = 0).
    if _is_inexact(y):
        return mul(t, mul(y, pow(x, sub(y, _const(y, 1)))))
    shape = _shape(ans)
    yf = _broadcast_to(convert_element_type(y, core.get_aval(x).dtype), shape)
    jac = mul(_replace_zero(yf), pow(_broadcast_to(x, shape), sub(yf, _const(yf, 1))))
    return mul(t, select_n_p.bind(eq(yf, _const(yf, 0)), jac, _zeros_like(jac)))


def _pow_jvp_rhs(t, ans, x, y):
    # d/dy x^y = log(x) x^y, taken as 0 at x = 0 (JAX's convention).
    return mul(t, mul(log(_replace_zero(x)), ans))


defjvp2(pow_p, _pow_jvp_lhs, _pow_jvp_rhs)


def _integer_pow_impl(x, *, y):
    # Square-and-multiply in the operand's dtype (integers wrap), then a reciprocal for y < 0:
    # the same sequence of roundings as XLA's lowering.
    with np.errstate(all="ignore"):
        if y == 0:
            return np.ones_like(x)
        acc, n = None, -y if y < 0 else y
        while n > 0:
            if n & 1:
                acc = x if acc is None else _multiply(acc, x)
            n >>= 1
            if n:
                x = _multiply(x, x)
        if y < 0:
            return _complex_reciprocal(acc) if dtypes.kind(acc.dtype) == "c" else np.reciprocal(acc)
        return acc


def _integer_pow_abstract_eval(x, *, y):
    check_kinds("integer_pow", x.dtype, NUMERIC_OR_COMPLEX)
    if y < 0 and dtypes.kind(x.dtype) in "iu":
        raise TypeError(
            f"integer_pow: integers cannot be raised to negative powers, got "
            f"dtype {x.dtype.name} and y={y}; convert to a float dtype first"
        )
    return x


integer_pow_p = standard_primitive("integer_pow", _integer_pow_impl, _integer_pow_abstract_eval)


def integer_pow(x, y: int):
    """Elementwise ``x ** y`` for a static Python int ``y`` (negative only for floats)."""
    return integer_pow_p.bind(operand(x, "integer_pow"), y=operator.index(y))


def _integer_pow_jvp(t, x, *, y):
    if y == 0:
        return Zero(tangent_aval(core.get_aval(t)))
    if y == 1:
        return t
    if y == 2:
        return mul(t, mul(_const(x, 2), x))
    return mul(t, mul(_const(x, y), integer_pow(x, y - 1)))


defjvp(integer_pow_p, _integer_pow_jvp)


def reciprocal(x):
    """Elementwise ``1 / x`` (``integer_pow(x, -1)``, as in JAX)."""
    return integer_pow(x, -1)


neg_p = standard_naryop("neg", np.negative, NUMERIC_OR_COMPLEX)


def neg(x):
    """Elementwise ``-x``."""
    return neg_p.bind(operand(x, "neg"))


deflinear(neg_p)
deflinear_transpose(neg_p, lambda ct, x: [neg(ct)])


def _sign_impl(x):
    if dtypes.kind(x.dtype) == "f":  # keep the sign of zeros (numpy's sign(-0.0) is +0.0)
        return np.where(x == 0, x, np.sign(x))
    if dtypes.kind(x.dtype) == "c":
        # XLA's rule: each part divided by |x| (so an infinite part gives NaN, a finite part
        # next to an infinite one 0, and |x| overflowing makes both 0); x itself at 0. A
        # subnormal |x| has too few bits: x is first scaled, exactly, into the normal range.
        info = np.finfo(x.real.dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            tiny = np.abs(x) < info.tiny
            y = np.where(tiny, x * x.real.dtype.type(2.0 ** (info.nmant + 1)), x)
            a = np.abs(y)
            zero = a == 0
            a = np.where(zero, 1, a)
            out = np.empty_like(x)
            out.real, out.imag = y.real / a, y.imag / a  # (not re + 1j*im: 1j*nan is nan+nanj)
        return np.where(zero, x, out)
    return np.sign(x)


sign_p = standard_naryop("sign", _sign_impl, NUMERIC_OR_COMPLEX)


def sign(x):
    """Elementwise sign: -1, 0 or 1 (-0.0 and NaN for those float inputs); for complex
    ``x`` its real and imaginary parts each divided by ``|x|`` (``x`` itself at 0), as XLA:
    ``sign(1+inf*j)`` is ``0+nan*j``."""
    return sign_p.bind(operand(x, "sign"))


floor_p = standard_naryop("floor", np.floor, FLOAT)


def floor(x):
    """Elementwise floor."""
    return floor_p.bind(operand(x, "floor"))


ceil_p = standard_naryop("ceil", np.ceil, FLOAT)


def ceil(x):
    """Elementwise ceiling."""
    return ceil_p.bind(operand(x, "ceil"))


class RoundingMethod(enum.IntEnum):
    """How ``round`` breaks ties between two integers."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1

    def __str__(self):  # jaxprs print ``round[rounding_method=1]``, as JAX does
        return str(self.value)


def _round_impl(x, *, rounding_method):
    if rounding_method == RoundingMethod.TO_NEAREST_EVEN:
        return np.rint(x)
    # NB: trunc-and-compare, not trunc(x + 0.5), which rounds 0.49999997 up in float32.
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


round_p = standard_naryop("round", _round_impl, FLOAT)


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Elementwise rounding to the nearest integer; ties go away from zero by default, or to
    even with ``RoundingMethod.TO_NEAREST_EVEN``."""
    return round_p.bind(operand(x, "round"), rounding_method=RoundingMethod(rounding_method))


@ignore_fp_errors
def _abs_impl(x):
    # complex: the modulus in the real dtype of the same precision (hypot: no overflow)
    return (
        np.abs(x) if dtypes.kind(x.dtype) != "c" else np.abs(x).astype(dtypes.real_dtype(x.dtype))
    )


def _abs_abstract_eval(x):
    check_kinds("abs", x.dtype, FLOAT_OR_SIGNED | COMPLEX)
    return ShapedArray(x.shape, dtypes.real_dtype(x.dtype), x.weak_type)


abs_p = standard_primitive("abs", _abs_impl, _abs_abstract_eval)


def abs(x):
    """Elementwise absolute value (floats and signed integers; ``abs(INT_MIN)`` wraps); the
    modulus of complex values, in their real dtype (complex64 -> float32)."""
    return abs_p.bind(operand(x, "abs"))


def _abs_jvp(t, ans, x):
    if _is_complex(x):
        # d|x| = Re(conj(x) t) / |x|, taken as 0 at x = 0 (JAX's rule)
        from fungrad.lax.complex_ops import complex as make_complex
        from fungrad.lax.complex_ops import conj, real

        modulus = make_complex(_replace_zero(ans), _zeros_like(ans))
        return real(mul(t, div(conj(x), modulus)))
    # JAX's rule: the derivative at 0 (and -0.0) is 1, i.e. select(x >= 0, t, -t).
    return select_n_p.bind(ge(x, _const(x, 0)), neg(t), t)


defjvp2(abs_p, _abs_jvp)


def _max_impl(x, y):
    if dtypes.kind(x.dtype) == "c":  # lexicographic, as XLA
        return complex_math.maximum(x, y)
    if dtypes.kind(x.dtype) != "f":
        return np.maximum(x, y)
    # NaN propagates, and +0.0 counts as larger than -0.0 (numpy returns either zero).
    take_x = (x > y) | np.isnan(x) | ((x == y) & ~np.signbit(x))
    return np.where(take_x, x, y)


def _min_impl(x, y):
    if dtypes.kind(x.dtype) == "c":
        return complex_math.minimum(x, y)
    if dtypes.kind(x.dtype) != "f":
        return np.minimum(x, y)
    take_x = (x < y) | np.isnan(x) | ((x == y) & np.signbit(x))
    return np.where(take_x, x, y)


max_p = standard_naryop("max", _max_impl, ANY_OR_COMPLEX)


def max(x, y):
    """Elementwise maximum; NaN if either operand is NaN; ``max(-0.0, 0.0)`` is 0.0. Complex
    values compare lexicographically (real part, then imaginary part), as in XLA, where a
    comparison with NaN is false and picks ``y``."""
    return max_p.bind(*operands_same_dtype("max", x, y))


min_p = standard_naryop("min", _min_impl, ANY_OR_COMPLEX)


def min(x, y):
    """Elementwise minimum; NaN if either operand is NaN; ``min(-0.0, 0.0)`` is -0.0.
    Complex values compare lexicographically, as in :func:`max`."""
    return min_p.bind(*operands_same_dtype("min", x, y))


def _balanced_eq(x, z, y):
    """1 where ``x == z != y``, 1/2 where ``x == z == y`` (ties share the derivative 50/50, as
    JAX's ``_balanced_eq``), 0 elsewhere (NaN results included)."""
    dt = core.get_aval(z).dtype
    hit = convert_element_type(eq(x, z), dt)
    return div(hit, add(_const(hit, 1), convert_element_type(eq(y, z), dt)))


for _p in (max_p, min_p):
    defjvp2(
        _p,
        lambda t, ans, x, y: mul(t, _balanced_eq(x, ans, y)),
        lambda t, ans, x, y: mul(t, _balanced_eq(y, ans, x)),
    )


def _nextafter_impl(x1, x2):
    # C's nextafter returns x2 when x1 == x2 (so nextafter(0.0, -0.0) is -0.0); numpy's
    # float16 version returns x1.
    return np.where(x1 == x2, x2, np.nextafter(x1, x2))


nextafter_p = standard_naryop("nextafter", _nextafter_impl, FLOAT)


def nextafter(x1, x2):
    """The next representable value after ``x1`` in the direction of ``x2``."""
    return nextafter_p.bind(*operands_same_dtype("nextafter", x1, x2))


square_p = standard_naryop("square", lambda x: _multiply(x, x), NUMERIC_OR_COMPLEX)


def square(x):
    """Elementwise ``x * x``."""
    return square_p.bind(operand(x, "square"))


defjvp(square_p, lambda t, x: mul(t, mul(_const(x, 2), x)))

# Piecewise-constant or integer-valued results: zero tangents.
for _p in (sign_p, floor_p, ceil_p, round_p):
    defjvp_zero(_p)
# nextafter(x, y) is x moved by one ulp: a zero tangent would be wrong and the identity in x is
# a guess, so (as JAX) it has no derivative rule.
no_jvp[nextafter_p] = (
    "nextafter steps its input by one ulp and has no derivative rule (as in "
    "JAX); apply lax.stop_gradient to its operands if a zero derivative is "
    "what you want"
)
for _p in (neg_p, sign_p, floor_p, ceil_p, round_p, abs_p, square_p, integer_pow_p):
    defvectorized(_p)
for _p in (add_p, sub_p, mul_p, div_p, rem_p, pow_p, max_p, min_p, nextafter_p):
    defbroadcasting(_p)


# -- transcendental ---------------------------------------------------------------------------

# JAX's unary functions that take ``accuracy=`` (a lax.Tolerance or lax.AccuracyMode): fungrad
# has one implementation of each, so the request is checked and that one is used (see
# fungrad/lax/accuracy.py).
_WITH_ACCURACY = frozenset(
    {
        "exp",
        "exp2",
        "expm1",
        "log",
        "log1p",
        "tanh",
        "logistic",
        "sin",
        "cos",
        "tan",
        "sqrt",
        "rsqrt",
        "cbrt",
    }
)


def _float_unop(name: str, numpy_fn, doc: str, complex_fn=None):
    """A unary primitive of floats (and, with ``complex_fn``, the numpy function for complex
    operands, of complex values too) and its wrapper (the wrapper's docstring is ``doc``)."""
    if complex_fn is None:
        prim = standard_naryop(name, numpy_fn, FLOAT)
    else:

        def numpy_or_complex(x):
            return complex_fn(x) if dtypes.kind(x.dtype) == "c" else numpy_fn(x)

        numpy_or_complex.__name__ = getattr(numpy_fn, "__name__", name)
        prim = standard_naryop(name, numpy_or_complex, INEXACT)

    if name in _WITH_ACCURACY:

        def wrapper(x, *, accuracy=None):
            check_accuracy(name, accuracy)
            return prim.bind(operand(x, name))

        doc += (
            " ``accuracy`` (None, a :class:`Tolerance` or an :class:`AccuracyMode`) is "
            "accepted as in JAX; fungrad has one implementation, used for every request."
        )
    else:

        def wrapper(x):
            return prim.bind(operand(x, name))

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = doc
    return prim, wrapper


def _via_float64(fn):
    """An impl computing ``fn`` in float64 and rounding to the operand's dtype (overflow to
    inf included, without a warning)."""

    def impl(x):
        with np.errstate(all="ignore"):
            return np.asarray(fn(x), np.float64).astype(x.dtype)[()]

    impl.__name__ = fn.__name__
    return impl


def _logistic(x):
    x = np.asarray(x, np.float64)
    e = np.exp(-np.abs(x))  # never overflows; 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _complex_reciprocal(x):
    """``1 / x`` with XLA's complex division (``1 / 0`` is ``inf + nan*j``, not NaN)."""
    return complex_math.div(np.ones_like(x), x)


def _rsqrt(x):
    if dtypes.kind(np.asarray(x).dtype) == "c":
        return _complex_reciprocal(np.sqrt(x))
    return np.reciprocal(np.sqrt(x))


exp_p, exp = _float_unop("exp", np.exp, "Elementwise natural exponential.", np.exp)
exp2_p, exp2 = _float_unop("exp2", np.exp2, "Elementwise base-2 exponential.", np.exp2)
log_p, log = _float_unop("log", np.log, "Elementwise natural logarithm.", np.log)
log1p_p, log1p = _float_unop(
    "log1p",
    np.log1p,
    "Elementwise ``log(1 + x)``, accurate near 0.",
    complex_math.log1p,
)
expm1_p, expm1 = _float_unop(
    "expm1",
    np.expm1,
    "Elementwise ``exp(x) - 1``, accurate near 0.",
    complex_math.expm1,
)
sqrt_p, sqrt = _float_unop("sqrt", np.sqrt, "Elementwise square root.", np.sqrt)
rsqrt_p, rsqrt = _float_unop("rsqrt", _rsqrt, "Elementwise reciprocal square root.", _rsqrt)
cbrt_p, cbrt = _float_unop("cbrt", np.cbrt, "Elementwise cube root.")
sin_p, sin = _float_unop("sin", np.sin, "Elementwise sine.", np.sin)
cos_p, cos = _float_unop("cos", np.cos, "Elementwise cosine.", np.cos)
tan_p, tan = _float_unop("tan", np.tan, "Elementwise tangent.", np.tan)


def _widened(fn):
    """``fn`` of a complex64 array computed in complex128 and rounded once: numpy's complex64
    inverse trigonometric loops overflow for parts beyond ~1e38 (the jit formulas do not)."""

    def complex_fn(x):
        x = np.asarray(x)
        with np.errstate(all="ignore"):
            return np.asarray(fn(x.astype(np.complex128))).astype(x.dtype)[()]

    complex_fn.__name__ = fn.__name__
    return complex_fn


asin_p, asin = _float_unop("asin", np.arcsin, "Elementwise arc sine.", _widened(np.arcsin))
acos_p, acos = _float_unop("acos", np.arccos, "Elementwise arc cosine.", _widened(np.arccos))
atan_p, atan = _float_unop("atan", np.arctan, "Elementwise arc tangent.", _widened(np.arctan))
sinh_p, sinh = _float_unop("sinh", np.sinh, "Elementwise hyperbolic sine.", np.sinh)
cosh_p, cosh = _float_unop("cosh", np.cosh, "Elementwise hyperbolic cosine.", np.cosh)
tanh_p, tanh = _float_unop("tanh", np.tanh, "Elementwise hyperbolic tangent.", np.tanh)
asinh_p, asinh = _float_unop(
    "asinh",
    np.arcsinh,
    "Elementwise inverse hyperbolic sine.",
    _widened(np.arcsinh),
)
acosh_p, acosh = _float_unop(
    "acosh",
    np.arccosh,
    "Elementwise inverse hyperbolic cosine.",
    _widened(np.arccosh),
)
atanh_p, atanh = _float_unop(
    "atanh",
    np.arctanh,
    "Elementwise inverse hyperbolic tangent.",
    _widened(np.arctanh),
)
logistic_p, logistic = _float_unop(
    "logistic",
    _via_float64(_logistic),
    "Elementwise logistic sigmoid ``1 / (1 + exp(-x))``.",
    complex_math.logistic,
)
erf_p, erf = _float_unop("erf", _via_float64(special_math.erf), "Elementwise error function.")
erfc_p, erfc = _float_unop(
    "erfc",
    _via_float64(special_math.erfc),
    "Elementwise complementary error function ``1 - erf(x)``.",
)
erf_inv_p, erf_inv = _float_unop(
    "erf_inv",
    _via_float64(special_math.erf_inv),
    "Elementwise inverse error function (+-inf at +-1).",
)
lgamma_p, lgamma = _float_unop(
    "lgamma",
    _via_float64(special_math.lgamma),
    "Elementwise ``log |Gamma(x)|`` (inf at the poles).",
)
digamma_p, digamma = _float_unop(
    "digamma",
    _via_float64(special_math.digamma),
    "Elementwise digamma ``d/dx lgamma(x)`` (NaN at the poles).",
)

_SQRT_PI = float(np.sqrt(np.pi))


# -- polygamma: psi^(m)(x) written with the primitives above (so it differentiates, batches and
# lowers in both compilers like them); digamma's derivative is polygamma(1, x).

_BERNOULLI_2K = (
    1 / 6,
    -1 / 30,
    1 / 42,
    -1 / 30,
    5 / 66,
    -691 / 2730,
    7 / 6,
    -3617 / 510,
    43867 / 798,
    -174611 / 330,
)


def _cot_derivative(m: int) -> np.ndarray:
    """Coefficients (ascending) of ``P_m`` with ``d^m/dx^m cot(pi x) = pi^m P_m(cot(pi x))``:
    ``P_0(c) = c``, ``P_{k+1}(c) = -(1 + c^2) P_k'(c)``."""
    p = np.array([0.0, 1.0])
    for _ in range(m):
        p = -np.polynomial.polynomial.polymul([1.0, 0.0, 1.0], np.polynomial.polynomial.polyder(p))
    return p


def _horner(coeffs, v):
    """``sum(coeffs[i] * v**i)`` for Python float ``coeffs`` (ascending)."""
    acc = _const(v, float(coeffs[-1]))
    for c in coeffs[-2::-1]:
        acc = add(mul(acc, v), _const(v, float(c)))
    return acc


def _polygamma_at_least_half(m: int, y):
    """``psi^(m)(y)`` for ``m >= 1`` and ``y >= 1/2``: the recurrence
    ``psi^(m)(y) = psi^(m)(y + 1) + (-1)^(m+1) m! / y^(m+1)`` lifts ``y`` by ``8 + m`` (a fixed
    number of steps: no loop), then the asymptotic series at ``z = y + 8 + m``:
    ``(-1)^(m+1) [(m-1)!/z^m + m!/(2 z^(m+1)) + sum_k B_2k (2k+m-1)!/(2k)! / z^(2k+m)]``
    (ten terms: below float64's rounding there)."""
    shift = 8 + m
    total = integer_pow(reciprocal(y), m + 1)
    for k in range(1, shift):
        total = add(total, integer_pow(reciprocal(add(y, _const(y, float(k)))), m + 1))
    w = reciprocal(add(y, _const(y, float(shift))))
    series = [math.factorial(m - 1), math.factorial(m) / 2]  # coefficients of w^(m + i)
    for k, b in enumerate(_BERNOULLI_2K, start=1):
        series += [b * math.factorial(2 * k + m - 1) / math.factorial(2 * k), 0.0]
    series.pop()
    tail = mul(integer_pow(w, m), _horner(series, w))
    value = add(mul(_const(y, float(math.factorial(m))), total), tail)
    return value if m % 2 else neg(value)


def _concrete_order(m):
    """``m`` as a Python int when it is a concrete integer-valued scalar; NaN for a concrete
    scalar that is not a valid order (negative or fractional: polygamma is then NaN, as in
    JAX); None when it is traced or an array (the general formula handles it)."""
    if isinstance(m, (bool, np.bool_)):
        raise TypeError(f"polygamma: the order m must be a number, got {m!r}")
    if isinstance(m, core.Tracer):  # transformed (jit, vmap, or differentiated in m)
        return None
    if isinstance(m, Array):
        m = np.asarray(m)
    if isinstance(m, np.ndarray):
        if m.ndim != 0:
            return None
        m = m[()]
    if isinstance(m, (int, np.integer)):
        return int(m) if m >= 0 else math.nan
    if isinstance(m, (float, np.floating)):
        return int(m) if math.isfinite(m) and m >= 0 and float(m).is_integer() else math.nan
    raise TypeError(f"polygamma: the order m must be a number or an array, got {type(m).__name__}")


def polygamma(m, x):
    """Elementwise ``psi^(m)(x)``, the ``m``-th derivative of :func:`digamma` (``m = 1`` is
    trigamma, digamma's derivative); as in JAX, ``m`` is a float (or int) array or scalar,
    integer-valued: negative or fractional orders give NaN. Only ``x`` is differentiable
    (``d/dx psi^(m) = psi^(m+1)``); a derivative in ``m`` is a ValueError, as in JAX.

    A concrete scalar ``m`` (the usual case) picks its own formula, computed in ``x``'s dtype
    (float16 in float32): for ``x >= 1/2`` the recurrence and asymptotic series of
    ``_polygamma_at_least_half``; below, the reflection
    ``psi^(m)(x) = (-1)^m psi^(m)(1 - x) - pi^(m+1) P_m(cot(pi x))`` with ``cot(pi x)`` taken
    at ``r``, ``x`` minus its nearest integer (exact), as ``sin(pi (1/2 - |r|)) / sin(pi r)``.
    Poles (``x = 0, -1, ...``) give +-inf, ``psi^(m)(inf) = 0``. Relative error: a few ulp
    for ``x >= 1/2``; by reflection, the absolute error near a zero of ``psi^(m)`` is a few ulp
    of the two cancelling terms.

    A traced or array ``m`` uses ``(-1)^(m+1) m! zeta(m + 1, x)`` (digamma for ``m = 0``),
    elementwise after broadcasting ``m`` against ``x``: a few ulp more error than the
    specialised formulas, and (a limit of :func:`fungrad.lax.zeta`) NaN for ``x <= -12``.
    """
    order = _concrete_order(m)
    if order is None:
        return _polygamma_array_order(m, x)
    x = operand(x, "polygamma")
    if dtypes.kind(x.dtype) != "f":
        raise TypeError(
            f"polygamma requires a floating-point x, got {x.dtype.name} (convert "
            "it with lax.convert_element_type)"
        )
    if not isinstance(order, int):  # a negative or fractional order
        from fungrad import lax

        return lax.full_like(x, np.nan)
    return _polygamma_int(order, x)


def _polygamma_int(m: int, x):
    """``psi^(m)(x)`` for a Python int ``m >= 0`` and a float array ``x``."""
    if m == 0:
        return digamma(x)
    if x.dtype == np.float16:
        return convert_element_type(
            _polygamma_int(m, convert_element_type(x, np.float32)), np.float16, x.weak_type
        )
    from fungrad import lax

    reflect = lt(x, _const(x, 0.5))
    value = _polygamma_at_least_half(m, select(reflect, sub(_const(x, 1), x), x))
    # cot(pi x) for the reflected elements only (elsewhere a harmless 1/4, so that no inf or
    # NaN from an unselected branch reaches a derivative)
    r = sub(x, floor(add(x, _const(x, 0.5))))
    r = select(reflect, r, lax.full_like(x, 0.25))
    # cos(pi r) as sin(pi (1/2 - |r|)): exact zeros at r = +-1/2, where pi * r rounds
    pi = _const(x, np.pi)
    cot = div(sin(mul(pi, sub(_const(x, 0.5), abs(r)))), sin(mul(pi, r)))
    cot_term = mul(_const(x, np.pi ** (m + 1)), _horner(_cot_derivative(m), cot))
    reflected = sub(value if m % 2 == 0 else neg(value), cot_term)
    return select(reflect, reflected, value)


_POLYGAMMA_GENERAL = []


def _polygamma_array_order(m, x):
    """``polygamma`` for a traced or array order ``m``: ``m`` and ``x`` broadcast to one shape
    in ``x``'s float dtype, then the zeta formula, whose x-derivative is the next order."""
    from fungrad import lax

    x = operand(x, "polygamma")
    m = operand(m, "polygamma")
    if dtypes.kind(x.dtype) != "f":
        raise TypeError(
            f"polygamma requires a floating-point x, got {x.dtype.name} (convert "
            "it with lax.convert_element_type)"
        )
    if dtypes.kind(m.dtype) not in "fiu":
        raise TypeError(
            f"polygamma: the order m must be a float or integer array, got {m.dtype.name}"
        )
    shape = np.broadcast_shapes(m.shape, x.shape) if m.shape != x.shape else x.shape
    m = lax.broadcast_in_dim(
        convert_element_type(m, x.dtype, x.weak_type),
        shape,
        tuple(range(len(shape) - m.ndim, len(shape))),
    )
    x = lax.broadcast_in_dim(x, shape, tuple(range(len(shape) - x.ndim, len(shape))))
    if not _POLYGAMMA_GENERAL:
        from fungrad.transforms.custom import SymbolicZero, custom_jvp
        from fungrad.transforms.jvp import Zero

        fn = custom_jvp(_polygamma_zeta)

        def rule(primals, tangents):
            (mm, xx), (mt, xt) = primals, tangents
            if not isinstance(mt, (Zero, SymbolicZero)):
                raise ValueError(
                    "polygamma gradient with respect to m is not supported (as "
                    "in JAX); apply lax.stop_gradient to m"
                )
            out = fn(mm, xx)
            if isinstance(xt, (Zero, SymbolicZero)):
                return out, lax.full_like(out, 0)
            return out, mul(xt, fn(add(mm, _const(mm, 1)), xx))

        fn.defjvp(rule, symbolic_zeros=True)
        _POLYGAMMA_GENERAL.append(fn)
    return _POLYGAMMA_GENERAL[0](m, x)


_POLYGAMMA_SHIFT = 16  # x in (-16, 1/2) is lifted by this many steps of the recurrence


def _polygamma_zeta(m, x):
    """``(-1)^(m+1) m! zeta(m + 1, x)``, ``digamma(x)`` where ``m = 0``, NaN where ``m`` is
    negative or fractional (``m`` and ``x`` of one float dtype and shape). Below ``x = 1/2``
    the recurrence ``psi^(m)(x) = psi^(m)(x + K) - (-1)^m m! sum_{k<K} (x + k)^-(m+1)``
    (``K = 16``) moves the zeta sum to ``x + K > 1/2``, where it is accurate; ``x <= -16``
    gives NaN (a limit of this formula; concrete orders use the reflection formula)."""
    from fungrad import lax
    from fungrad.lax import special

    def full(v):
        return lax.full_like(m, v)

    valid = and_(eq(m, floor(m)), ge(m, full(0)))
    safe = select(valid, m, full(1))
    safe = select(eq(safe, full(0)), full(1), safe)  # zeta(1, x) is a pole
    s = add(safe, full(1))
    odd = eq(rem(safe, full(2)), full(1))
    factorial = exp(lgamma(s))
    low = lt(x, full(0.5))
    shifted = select(low, add(x, full(float(_POLYGAMMA_SHIFT))), x)
    total = special.zeta(s, select(gt(shifted, full(0.0)), shifted, full(1.0)))
    # + sum_k (x + k)^-s for the lifted elements: |x + k|^-s, negative where x + k < 0 and
    # s = m + 1 is odd (m even); a pole (x + k = 0) gives +inf
    neg_s = neg(s)
    even = not_(odd)
    for k in range(_POLYGAMMA_SHIFT):
        v = select(low, add(x, full(float(k))), full(1.0))
        term = pow(abs(v), neg_s)
        term = select(and_(lt(v, full(0.0)), even), neg(term), term)
        total = select(low, add(total, term), total)
    value = mul(factorial, total)  # m! zeta(m + 1, x), continued below 1/2
    value = select(odd, value, neg(value))
    value = select(eq(x, full(np.inf)), full(0.0), value)
    value = select(le(x, full(-float(_POLYGAMMA_SHIFT))), full(np.nan), value)
    value = select(eq(m, full(0)), digamma(x), value)
    return select(valid, value, full(np.nan))


# JAX's derivative formulas (jax/_src/lax/lax.py and special.py); ``ans`` is the primal output.
defjvp2(exp_p, lambda t, ans, x: mul(t, ans))
defjvp2(exp2_p, lambda t, ans, x: mul(t, mul(ans, _const(x, float(np.log(2))))))
defjvp(log_p, lambda t, x: div(t, x))
defjvp(log1p_p, lambda t, x: div(t, add(x, _const(x, 1))))
defjvp2(expm1_p, lambda t, ans, x: mul(t, add(ans, _const(ans, 1))))
defjvp2(sqrt_p, lambda t, ans, x: mul(t, div(_const(x, 0.5), ans)))
defjvp2(rsqrt_p, lambda t, ans, x: mul(t, mul(_const(x, -0.5), div(ans, x))))
defjvp2(cbrt_p, lambda t, ans, x: mul(t, mul(_const(x, 1 / 3), integer_pow(ans, -2))))
defjvp(sin_p, lambda t, x: mul(t, cos(x)))
defjvp(cos_p, lambda t, x: neg(mul(t, sin(x))))
defjvp2(tan_p, lambda t, ans, x: mul(t, add(_const(x, 1), square(ans))))
defjvp(asin_p, lambda t, x: mul(t, rsqrt(sub(_const(x, 1), square(x)))))
defjvp(acos_p, lambda t, x: mul(t, neg(rsqrt(sub(_const(x, 1), square(x))))))
defjvp(atan_p, lambda t, x: div(t, add(_const(x, 1), square(x))))
defjvp(sinh_p, lambda t, x: mul(t, cosh(x)))
defjvp(cosh_p, lambda t, x: mul(t, sinh(x)))
defjvp2(tanh_p, lambda t, ans, x: mul(add(t, mul(t, ans)), sub(_const(x, 1), ans)))
defjvp(asinh_p, lambda t, x: mul(t, rsqrt(add(square(x), _const(x, 1)))))


def _acosh_jvp(t, x):
    one = _const(x, 1)
    if _is_complex(x):
        # 1 / (sqrt(x - 1) sqrt(x + 1)): acosh's branch cut. (JAX's rsqrt(x^2 - 1), right
        # for real x >= 1, has the wrong sign on parts of the complex plane.)
        return mul(t, mul(rsqrt(sub(x, one)), rsqrt(add(x, one))))
    return mul(t, rsqrt(sub(square(x), one)))


defjvp(acosh_p, _acosh_jvp)
defjvp(atanh_p, lambda t, x: mul(reciprocal(add(_const(x, 1), x)), div(t, sub(_const(x, 1), x))))
defjvp2(logistic_p, lambda t, ans, x: mul(t, mul(ans, sub(_const(ans, 1), ans))))
defjvp(erf_p, lambda t, x: mul(_const(x, 2 / _SQRT_PI), mul(t, exp(neg(square(x))))))
defjvp(erfc_p, lambda t, x: mul(_const(x, -2 / _SQRT_PI), mul(t, exp(neg(square(x))))))
defjvp2(erf_inv_p, lambda t, ans, x: mul(_const(x, _SQRT_PI / 2), mul(t, exp(square(ans)))))
defjvp(lgamma_p, lambda t, x: mul(t, digamma(x)))
defjvp(digamma_p, lambda t, x: mul(t, polygamma(1, x)))  # JAX: polygamma(1, x), trigamma
for _p in (
    exp_p,
    exp2_p,
    log_p,
    log1p_p,
    expm1_p,
    sqrt_p,
    rsqrt_p,
    cbrt_p,
    sin_p,
    cos_p,
    tan_p,
    asin_p,
    acos_p,
    atan_p,
    sinh_p,
    cosh_p,
    tanh_p,
    asinh_p,
    acosh_p,
    atanh_p,
    logistic_p,
    erf_p,
    erfc_p,
    erf_inv_p,
    lgamma_p,
    digamma_p,
):
    defvectorized(_p)


def _atan2_impl(x, y):
    return complex_math.atan2(x, y) if dtypes.kind(x.dtype) == "c" else np.arctan2(x, y)


atan2_p = standard_naryop("atan2", _atan2_impl, INEXACT)


def atan2(x, y):
    """Elementwise arc tangent of ``x / y`` in the quadrant of ``(y, x)``; for complex
    operands its continuation ``-i log((y + i x) / sqrt(x^2 + y^2))``, as in XLA."""
    return atan2_p.bind(*operands_same_dtype("atan2", x, y))


defjvp(
    atan2_p,
    lambda t, x, y: mul(t, div(y, add(square(x), square(y)))),
    lambda t, x, y: mul(t, div(neg(x), add(square(x), square(y)))),
)
defbroadcasting(atan2_p)


is_finite_p = standard_naryop("is_finite", np.isfinite, FLOAT, result_dtype=dtypes.bool_)


def is_finite(x):
    """Elementwise test for neither infinite nor NaN (bool result)."""
    return is_finite_p.bind(operand(x, "is_finite"))


defjvp_zero(is_finite_p)
defvectorized(is_finite_p)


# -- comparisons ------------------------------------------------------------------------------

eq_p = standard_naryop("eq", np.equal, ANY_OR_COMPLEX, result_dtype=dtypes.bool_)
ne_p = standard_naryop("ne", np.not_equal, ANY_OR_COMPLEX, result_dtype=dtypes.bool_)
lt_p = standard_naryop("lt", np.less, ANY, result_dtype=dtypes.bool_)
le_p = standard_naryop("le", np.less_equal, ANY, result_dtype=dtypes.bool_)
gt_p = standard_naryop("gt", np.greater, ANY, result_dtype=dtypes.bool_)
ge_p = standard_naryop("ge", np.greater_equal, ANY, result_dtype=dtypes.bool_)


def eq(x, y):
    """Elementwise ``x == y`` (bool result)."""
    return eq_p.bind(*operands_same_dtype("eq", x, y))


def ne(x, y):
    """Elementwise ``x != y`` (bool result; True where either is NaN)."""
    return ne_p.bind(*operands_same_dtype("ne", x, y))


def lt(x, y):
    """Elementwise ``x < y`` (bool result)."""
    return lt_p.bind(*operands_same_dtype("lt", x, y))


def le(x, y):
    """Elementwise ``x <= y`` (bool result)."""
    return le_p.bind(*operands_same_dtype("le", x, y))


def gt(x, y):
    """Elementwise ``x > y`` (bool result)."""
    return gt_p.bind(*operands_same_dtype("gt", x, y))


def ge(x, y):
    """Elementwise ``x >= y`` (bool result)."""
    return ge_p.bind(*operands_same_dtype("ge", x, y))


for _p in (eq_p, ne_p, lt_p, le_p, gt_p, ge_p):
    defjvp_zero(_p)
    defbroadcasting(_p)


# -- bitwise and logical ------------------------------------------------------------------------

and_p = standard_naryop("and", np.bitwise_and, INT_OR_BOOL)
or_p = standard_naryop("or", np.bitwise_or, INT_OR_BOOL)
xor_p = standard_naryop("xor", np.bitwise_xor, INT_OR_BOOL)
not_p = standard_naryop("not", np.invert, INT_OR_BOOL)


def and_(x, y):
    """Elementwise bitwise AND (logical AND for bool)."""
    return and_p.bind(*operands_same_dtype("and", x, y))


def or_(x, y):
    """Elementwise bitwise OR (logical OR for bool)."""
    return or_p.bind(*operands_same_dtype("or", x, y))


def xor(x, y):
    """Elementwise bitwise XOR (logical XOR for bool)."""
    return xor_p.bind(*operands_same_dtype("xor", x, y))


def not_(x):
    """Elementwise bitwise NOT (logical NOT for bool)."""
    return not_p.bind(operand(x, "not"))


# JAX's current names for the same primitives.
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = and_, or_, xor, not_


def _shift_counts(x, y):
    """Shift counts read as unsigned (as XLA does) and the mask of counts >= the bit width."""
    uy = np.asarray(y).view(_unsigned(x.dtype))
    too_big = uy >= 8 * x.dtype.itemsize
    return np.where(too_big, 0, uy).astype(x.dtype), too_big


def _shift_left_impl(x, y):
    s, too_big = _shift_counts(x, y)
    return np.where(too_big, 0, np.left_shift(x, s))


def _shift_right_logical_impl(x, y):
    s, too_big = _shift_counts(x, y)
    u = _unsigned(x.dtype)
    out = np.right_shift(np.asarray(x).view(u), s.view(u)).view(x.dtype)
    return np.where(too_big, 0, out)


def _shift_right_arithmetic_impl(x, y):
    s, too_big = _shift_counts(x, y)
    i = _signed(x.dtype)
    sx = np.asarray(x).view(i)
    out = np.where(too_big, np.where(sx < 0, -1, 0).astype(i), np.right_shift(sx, s.view(i)))
    return out.view(x.dtype)


shift_left_p = standard_naryop("shift_left", _shift_left_impl, INT)
shift_right_logical_p = standard_naryop("shift_right_logical", _shift_right_logical_impl, INT)
shift_right_arithmetic_p = standard_naryop(
    "shift_right_arithmetic", _shift_right_arithmetic_impl, INT
)


def shift_left(x, y):
    """Elementwise ``x << y``; counts >= the bit width (or negative) give 0."""
    return shift_left_p.bind(*operands_same_dtype("shift_left", x, y))


def shift_right_logical(x, y):
    """Elementwise logical right shift (zero fill); counts >= the bit width give 0."""
    return shift_right_logical_p.bind(*operands_same_dtype("shift_right_logical", x, y))


def shift_right_arithmetic(x, y):
    """Elementwise arithmetic right shift (sign fill, also for unsigned dtypes); counts >= the
    bit width give -1 for negative ``x`` and 0 otherwise."""
    return shift_right_arithmetic_p.bind(*operands_same_dtype("shift_right_arithmetic", x, y))


def _population_count_impl(x):
    return np.bitwise_count(np.asarray(x).view(_unsigned(x.dtype)))


population_count_p = standard_naryop("population_count", _population_count_impl, INT)


def population_count(x):
    """Elementwise number of set bits."""
    return population_count_p.bind(operand(x, "population_count"))


def _clz_impl(x):
    bits = 8 * x.dtype.itemsize
    v = np.asarray(x).view(_unsigned(x.dtype)).astype(np.uint64)
    length = np.zeros(v.shape, np.int64)  # bit length, by binary search over shifts
    for s in (32, 16, 8, 4, 2, 1):
        big = (v >> np.uint64(s)) != 0
        length += np.where(big, s, 0)
        v = np.where(big, v >> np.uint64(s), v)
    return bits - (length + (v != 0))


clz_p = standard_naryop("clz", _clz_impl, INT)


def clz(x):
    """Elementwise count of leading zero bits."""
    return clz_p.bind(operand(x, "clz"))


# Bitwise ops act on integers and bools: no tangent space.
for _p in (and_p, or_p, xor_p, shift_left_p, shift_right_logical_p, shift_right_arithmetic_p):
    defjvp_zero(_p)
    defbroadcasting(_p)
for _p in (not_p, population_count_p, clz_p):
    defjvp_zero(_p)
    defvectorized(_p)


# -- selection --------------------------------------------------------------------------------


def _select_n_impl(which, *cases):
    # Out-of-range ``which`` picks the nearest case (JAX leaves it unspecified; this is what
    # its binary tree of selects does).
    out = cases[0]
    for i, case in enumerate(cases[1:], start=1):
        out = np.where(which >= i, case, out)
    return out


def _select_n_abstract_eval(which, *cases):
    name = "select_n"
    if not cases:
        raise TypeError(f"{name} must have at least one case")
    if dtypes.kind(which.dtype) not in "biu":
        raise TypeError(f"{name}: `which` must be boolean or integer, got {which.dtype.name}")
    if dtypes.kind(which.dtype) == "b" and len(cases) > 2:
        raise TypeError(
            f"{name} with a boolean `which` takes at most 2 cases, got "
            f"{len(cases)}; use an integer `which`"
        )
    if any(c.dtype != cases[0].dtype for c in cases):
        raise TypeError(
            f"{name} requires cases to have the same dtypes, got "
            + ", ".join(c.dtype.name for c in cases)
        )
    if any(c.shape != cases[0].shape for c in cases):
        raise TypeError(
            f"{name} requires cases to have the same shapes, got "
            + ", ".join(str(c.shape) for c in cases)
        )
    if which.shape and which.shape != cases[0].shape:
        raise TypeError(
            f"{name}: `which` must be scalar or have the cases' shape, got "
            f"`which` shape {which.shape} and case shape {cases[0].shape}"
        )
    return ShapedArray(cases[0].shape, cases[0].dtype, all(c.weak_type for c in cases))


select_n_p = standard_primitive("select_n", _select_n_impl, _select_n_abstract_eval)


def select_n(which, *cases):
    """Pick elementwise from ``cases`` by ``which``: a bool (2 cases at most: False picks
    ``cases[0]``) or an integer index. Cases share one dtype and shape; ``which`` is scalar
    or has that shape."""
    if not cases:
        raise ValueError("select_n() must have at least one case")
    return select_n_p.bind(operand(which, "select_n"), *operands_same_dtype("select_n", *cases))


def select(pred, on_true, on_false):
    """Elementwise ``on_true if pred else on_false`` (``select_n(pred, on_false, on_true)``)."""
    return select_n(pred, on_false, on_true)


def _select_n_jvp(primals, tangents):
    # Linear in the cases; ``which`` (bool or integer) has no tangent.
    which, *cases = primals
    out = select_n_p.bind(which, *cases)
    case_tangents = tangents[1:]
    if all(type(t) is Zero for t in case_tangents):
        return out, Zero(tangent_aval(core.get_aval(out)))
    return out, select_n_p.bind(which, *map(instantiate_zeros, case_tangents))


def _select_n_transpose(ct, which, *cases):
    # Case i receives ct where ``which`` picks it (out-of-range picks included: the same
    # select_n routes them) and 0 elsewhere.
    if is_undefined_primal(which):
        raise TypeError(
            "select_n: cannot transpose with respect to `which` (the predicate is "
            "not differentiable)"
        )
    zeros = _zeros_like(ct)
    n = len(cases)
    return [None] + [
        select_n_p.bind(which, *[ct if j == i else zeros for j in range(n)])
        if is_undefined_primal(c)
        else None
        for i, c in enumerate(cases)
    ]


def _example_shape(x, d):
    shape = _shape(x)
    return shape if d is None else shape[:d] + shape[d + 1 :]


def _batch_scalar_or_full(x, d, axis_size, example_shape):
    """A ``which``/bound operand (0-d or of the main operand's per-example shape) for a
    primitive whose main operand has its batch dim at the front: unbatched 0-d values stay
    0-d, a batched per-example scalar is broadcast along ``example_shape``."""
    if d is None and not _shape(x):
        return x
    if d is not None and len(_shape(x)) == 1 and example_shape:
        from fungrad import lax

        return lax.broadcast_in_dim(x, (axis_size, *example_shape), (0,))
    return bdim_at_front(x, d, axis_size)


def _fits(x, d, out_dim, example_shape) -> bool:
    """``x`` can be used as is next to operands batched at ``out_dim``."""
    if d is None:
        return not _shape(x)
    return d == out_dim and _example_shape(x, d) == example_shape


def _select_n_batch(axis_size, args, dims):
    which, *cases = args
    which_dim, *case_dims = dims
    example_shape = _example_shape(cases[0], case_dims[0])
    d = case_dims[0]
    if (
        d is not None
        and all(cd == d for cd in case_dims)
        and _fits(which, which_dim, d, example_shape)
    ):
        return select_n_p.bind(which, *cases), d
    cases = [bdim_at_front(c, cd, axis_size) for c, cd in zip(cases, case_dims)]
    which = _batch_scalar_or_full(which, which_dim, axis_size, example_shape)
    return select_n_p.bind(which, *cases), 0


jvp_rules[select_n_p] = _select_n_jvp
deflinear_transpose(select_n_p, _select_n_transpose)
batch_rules[select_n_p] = _select_n_batch


def _clamp_impl(lo, x, hi):
    with np.errstate(all="ignore"):
        return np.asarray(_min_impl(_max_impl(x, lo), hi), x.dtype)[()]


def _clamp_abstract_eval(lo, x, hi):
    if not lo.dtype == x.dtype == hi.dtype:
        raise TypeError(
            f"clamp requires arguments to have the same dtypes, got "
            f"{lo.dtype.name}, {x.dtype.name}, {hi.dtype.name}"
        )
    check_kinds("clamp", x.dtype, ANY_OR_COMPLEX)
    for what, bound in (("min", lo), ("max", hi)):
        if bound.shape and bound.shape != x.shape:
            raise TypeError(
                f"clamp requires {what}.shape == operand.shape or {what}.shape == "
                f"(), got {what}.shape={bound.shape}, operand.shape={x.shape}"
            )
    return ShapedArray(x.shape, x.dtype, lo.weak_type and x.weak_type and hi.weak_type)


clamp_p = standard_primitive("clamp", _clamp_impl, _clamp_abstract_eval)


def clamp(min, x, max):
    """Elementwise ``min(max(x, min), max)`` (NaN propagates); ``min``/``max`` are scalar or
    have ``x``'s shape."""
    return clamp_p.bind(*operands_same_dtype("clamp", min, x, max))


# JAX's rule: x's tangent passes where min < x < max (strictly: 0 on the boundary), min's where
# min > x (and min < max), max's where max < x.
defjvp(
    clamp_p,
    lambda t, lo, x, hi: _select_tangent(and_(gt(lo, x), lt(lo, hi)), t, _shape(x)),
    lambda t, lo, x, hi: _select_tangent(and_(gt(x, lo), lt(x, hi)), t, _shape(x)),
    lambda t, lo, x, hi: _select_tangent(lt(hi, x), t, _shape(x)),
)


def _clamp_batch(axis_size, args, dims):
    lo, x, hi = args
    lo_dim, x_dim, hi_dim = dims
    example_shape = _example_shape(x, x_dim)
    if (
        x_dim is not None
        and _fits(lo, lo_dim, x_dim, example_shape)
        and _fits(hi, hi_dim, x_dim, example_shape)
    ):
        return clamp_p.bind(lo, x, hi), x_dim
    x = bdim_at_front(x, x_dim, axis_size)
    lo = _batch_scalar_or_full(lo, lo_dim, axis_size, example_shape)
    hi = _batch_scalar_or_full(hi, hi_dim, axis_size, example_shape)
    return clamp_p.bind(lo, x, hi), 0


batch_rules[clamp_p] = _clamp_batch


# -- conversion -------------------------------------------------------------------------------


def _float_to_int(x, new_dtype):
    # Saturating with NaN -> 0, as XLA does (numpy's cast is undefined out of range). Every
    # float16/32/64 value is exact in float64, and the bounds 2**(bits-1) and 2**bits too.
    info = np.iinfo(new_dtype)
    x = np.asarray(x, np.float64)
    too_big = x >= float(info.max) + 1.0
    too_small = x < float(info.min)
    safe = np.where(too_big | too_small | np.isnan(x), 0.0, np.trunc(x))
    out = np.where(too_big, info.max, np.where(too_small, info.min, safe.astype(new_dtype)))
    return np.asarray(out, new_dtype)[()]


def _convert_element_type_impl(x, *, new_dtype, weak_type):
    with np.errstate(all="ignore"):
        if dtypes.kind(x.dtype) == "c" and dtypes.kind(new_dtype) != "c":
            # JAX (XLA) drops the imaginary part first, also for bool: 1j -> False.
            x = np.real(x)  # (the wrapper warns)
        if dtypes.kind(x.dtype) == "f" and dtypes.kind(new_dtype) in "iu":
            return _float_to_int(x, new_dtype)
        return np.asarray(x).astype(new_dtype)[()]


def _convert_element_type_abstract_eval(x, *, new_dtype, weak_type):
    check_kinds("convert_element_type", x.dtype, ANY_OR_COMPLEX)
    check_kinds("convert_element_type", new_dtype, ANY_OR_COMPLEX, "new_dtype")
    return ShapedArray(x.shape, new_dtype, weak_type)


convert_element_type_p = standard_primitive(
    "convert_element_type", _convert_element_type_impl, _convert_element_type_abstract_eval
)


def convert_element_type(operand_, new_dtype, weak_type: bool = False):
    """Cast to ``new_dtype`` (canonicalised). Float -> int truncates toward zero, saturates at
    the integer range and maps NaN to 0; int -> narrower int wraps; bool -> 0/1;
    nonzero (and NaN) -> True. Complex -> any non-complex dtype keeps the real part and
    warns (numpy's ComplexWarning), as JAX does: complex -> bool is True where the real part
    is nonzero (``jnp.astype`` instead tests ``x != 0``)."""
    x = operand(operand_, "convert_element_type")
    aval = x.aval
    if aval.dtype == new_dtype and aval.weak_type == weak_type:  # nothing to do (the common case)
        return x
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    if aval.dtype == new_dtype and aval.weak_type == weak_type:
        return x
    if dtypes.kind(aval.dtype) == "c" and dtypes.kind(new_dtype) != "c":
        import warnings

        warnings.warn(
            "Casting complex values to real discards the imaginary part",
            np.exceptions.ComplexWarning,
            stacklevel=2,
        )
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))


def _convert_element_type_jvp(t, ans, x, *, new_dtype, weak_type):
    # Between float and complex dtypes it is linear (complex -> real keeps the real part);
    # to or from integers/bool the tangent is zero.
    if dtypes.kind(new_dtype) not in "fc" or not _is_inexact(x):
        return Zero(tangent_aval(core.get_aval(ans)))
    return _convert_quietly(t, new_dtype)


def _convert_quietly(x, new_dtype):
    """``convert_element_type(x, new_dtype)`` without the complex -> real warning: the rules
    take the real part on purpose."""
    if dtypes.kind(core.get_aval(x).dtype) == "c" and dtypes.kind(new_dtype) != "c":
        return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=False)
    return convert_element_type(x, new_dtype)


def _convert_element_type_transpose(ct, x, *, new_dtype, weak_type):
    # real -> complex transposes to the real part, complex -> real to ``ct + 0j`` (JAX)
    old = x.aval.strip_weak_type()
    if dtypes.kind(new_dtype) not in "fc" or dtypes.kind(old.dtype) not in "fc":
        return [Zero(old)]
    return [_convert_quietly(ct, old.dtype)]


defjvp2(convert_element_type_p, _convert_element_type_jvp)
deflinear_transpose(convert_element_type_p, _convert_element_type_transpose)
defvectorized(convert_element_type_p)


def _bitcast_convert_type_impl(x, *, new_dtype):
    x = np.asarray(x).copy(order="C")  # views need contiguous memory
    old, new = x.dtype.itemsize, new_dtype.itemsize
    if old == new:
        return x.view(new_dtype)
    if old > new:  # each element becomes a trailing dimension of old // new elements
        return x.reshape(x.shape + (1,)).view(new_dtype)
    return x.view(new_dtype).reshape(x.shape[:-1])


def _bitcast_convert_type_abstract_eval(x, *, new_dtype):
    name = "bitcast_convert_type"
    check_kinds(name, x.dtype, ANY_OR_COMPLEX)
    check_kinds(name, new_dtype, ANY_OR_COMPLEX, "new_dtype")
    if (dtypes.kind(x.dtype) in "bc" or dtypes.kind(new_dtype) in "bc") and x.dtype != new_dtype:
        raise TypeError(
            f"{name} does not convert to or from bool or complex dtypes (got "
            f"{x.dtype.name} -> {new_dtype.name}), as in JAX; use convert_element_type, or "
            "lax.real/lax.imag for the parts of complex values"
        )
    old, new = x.dtype.itemsize, new_dtype.itemsize
    if old == new:
        shape = x.shape
    elif old > new:
        shape = x.shape + (old // new,)
    else:
        if not x.shape or x.shape[-1] != new // old:
            raise ValueError(
                f"{name}: converting {x.str_short()} to the wider "
                f"{new_dtype.name} needs a last dimension of size {new // old}, "
                f"got shape {x.shape}"
            )
        shape = x.shape[:-1]
    return ShapedArray(shape, new_dtype)


bitcast_convert_type_p = standard_primitive(
    "bitcast_convert_type", _bitcast_convert_type_impl, _bitcast_convert_type_abstract_eval
)


def bitcast_convert_type(operand_, new_dtype):
    """Reinterpret the bits of each element as ``new_dtype``. A narrower ``new_dtype`` adds
    a trailing dimension of ``old_size // new_size``; a wider one consumes the last
    dimension, which must have size ``new_size // old_size``. The result is never weak."""
    x = operand(operand_, "bitcast_convert_type")
    return bitcast_convert_type_p.bind(x, new_dtype=dtypes.canonicalize_dtype(new_dtype))


def _bitcast_convert_type_batch(axis_size, args, dims, *, new_dtype):
    (x,), (d,) = args, dims
    aval = core.get_aval(x)
    if new_dtype.itemsize > aval.dtype.itemsize and d == aval.ndim - 1:
        x, d = moveaxis(x, d, 0), 0  # widening consumes the last dimension: keep the batch dim
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), d


defjvp_zero(bitcast_convert_type_p)  # reinterpreting bits is not differentiable (as in JAX)
batch_rules[bitcast_convert_type_p] = _bitcast_convert_type_batch


# -- autodiff markers -------------------------------------------------------------------------


def _stop_gradient_impl(x):
    return x


def _stop_gradient_abstract_eval(x):
    return x


stop_gradient_p = standard_primitive(
    "stop_gradient", _stop_gradient_impl, _stop_gradient_abstract_eval
)


_T = TypeVar("_T")


def stop_gradient(x: _T) -> _T:
    """The identity on each array of the pytree ``x``, which autodiff treats as a constant:
    no gradient flows through it."""
    return tree_util.tree_map(lambda leaf: stop_gradient_p.bind(operand(leaf, "stop_gradient")), x)


defjvp_zero(stop_gradient_p)
defvectorized(stop_gradient_p)

del _p  # the loop variable of the rule registrations above


# -- lowering to kernel ops (fungrad/lowering/kernel.py) --------------------------------------

for _p, _op in (
    (add_p, "add"),
    (sub_p, "sub"),
    (mul_p, "mul"),
    (div_p, "div"),
    (rem_p, "rem"),
    (neg_p, "neg"),
    (sign_p, "sign"),
    (floor_p, "floor"),
    (ceil_p, "ceil"),
    (abs_p, "abs"),
    (max_p, "max"),
    (min_p, "min"),
    (nextafter_p, "nextafter"),
    (atan2_p, "atan2"),
    (is_finite_p, "is_finite"),
    (eq_p, "eq"),
    (ne_p, "ne"),
    (lt_p, "lt"),
    (le_p, "le"),
    (gt_p, "gt"),
    (ge_p, "ge"),
    (and_p, "and"),
    (or_p, "or"),
    (xor_p, "xor"),
    (not_p, "not"),
    (shift_left_p, "shl"),
    (shift_right_logical_p, "shr_logical"),
    (shift_right_arithmetic_p, "shr_arith"),
    (population_count_p, "popcnt"),
    (clz_p, "clz"),
    (sqrt_p, "sqrt"),
    (rsqrt_p, "rsqrt"),
    (cbrt_p, "cbrt"),
    (exp_p, "exp"),
    (exp2_p, "exp2"),
    (log_p, "log"),
    (log1p_p, "log1p"),
    (expm1_p, "expm1"),
    (sin_p, "sin"),
    (cos_p, "cos"),
    (tan_p, "tan"),
    (asin_p, "asin"),
    (acos_p, "acos"),
    (atan_p, "atan"),
    (sinh_p, "sinh"),
    (cosh_p, "cosh"),
    (tanh_p, "tanh"),
    (asinh_p, "asinh"),
    (acosh_p, "acosh"),
    (atanh_p, "atanh"),
    (logistic_p, "logistic"),
    (erf_p, "erf"),
    (erfc_p, "erfc"),
):
    kernel.elementwise_lowering(_p, _op)


def _round_lowering(ctx, x, *, rounding_method):
    op = "round_even" if rounding_method == RoundingMethod.TO_NEAREST_EVEN else "round_away"
    return kernel.map_op(ctx, op, x, origin="round")


def _square_lowering(ctx, x):
    return kernel.map_fn(ctx, lambda a: ctx.op("mul", a, a), x, dtype=x.dtype, origin="square")


def _integer_pow_lowering(ctx, x, *, y):
    def element(a):  # the impl's square-and-multiply sequence, so results round identically
        if y == 0:
            return ctx.const(1, x.dtype)
        acc, n = None, -y if y < 0 else y
        while n > 0:
            if n & 1:
                acc = a if acc is None else ctx.op("mul", acc, a)
            n >>= 1
            if n:
                a = ctx.op("mul", a, a)
        return ctx.op("div", ctx.const(1, x.dtype), acc) if y < 0 else acc

    return kernel.map_fn(ctx, element, x, dtype=x.dtype, origin="integer_pow")


def _pow_lowering(ctx, x, y):
    return kernel.map_fn(
        ctx,
        lambda a, b: ctx.op("pow", a, ctx.convert(b, x.dtype)),
        x,
        y,
        dtype=x.dtype,
        origin="pow",
    )


def _select_n_lowering(ctx, which, *cases):
    def element(w, *cs):
        out = cs[0]
        for i, c in enumerate(cs[1:], start=1):
            pred = w if dtypes.kind(w.dtype) == "b" else ctx.op("ge", w, ctx.const(i, w.dtype))
            out = ctx.select(pred, c, out)
        return out

    return kernel.map_fn(ctx, element, which, *cases, dtype=cases[0].dtype, origin="select_n")


def _clamp_lowering(ctx, lo, x, hi):
    return kernel.map_fn(
        ctx,
        lambda a, b, c: ctx.op("min", ctx.op("max", b, a), c),
        lo,
        x,
        hi,
        dtype=x.dtype,
        origin="clamp",
    )


def _convert_lowering(ctx, x, *, new_dtype, weak_type):
    return kernel.map_fn(
        ctx, lambda a: ctx.convert(a, new_dtype), x, dtype=new_dtype, origin="convert_element_type"
    )


def _bitcast_lowering(ctx, x, *, new_dtype):
    old, new = x.dtype.itemsize, new_dtype.itemsize
    old_int, new_int = np.dtype(f"u{old}"), np.dtype(f"u{new}")
    if old == new:
        return kernel.map_fn(
            ctx,
            lambda a: ctx.bitcast(a, new_dtype),
            x,
            dtype=new_dtype,
            origin="bitcast_convert_type",
        )
    if old > new:  # one element becomes old // new little-endian pieces along a new last axis

        def narrow(idx):
            bits = ctx.bitcast(x.at(idx[:-1]), old_int)
            shift = ctx.convert(ctx.imul(idx[-1], ctx.iconst(8 * new)), old_int)
            piece = ctx.convert(ctx.op("shr_logical", bits, shift), new_int)
            return ctx.bitcast(piece, new_dtype)

        return kernel.from_fn((*x.shape, old // new), new_dtype, narrow, "bitcast_convert_type")

    def widen(idx):  # the last axis's pieces, little-endian, become one element
        acc = ctx.const(0, new_int)
        for k in range(new // old):
            piece = ctx.convert(ctx.bitcast(x.at((*idx, ctx.iconst(k))), old_int), new_int)
            acc = ctx.op("or", acc, ctx.op("shl", piece, ctx.const(8 * old * k, new_int)))
        return ctx.bitcast(acc, new_dtype)

    return kernel.from_fn(x.shape[:-1], new_dtype, widen, "bitcast_convert_type")


kernel.register_lowering(round_p, _round_lowering)
kernel.register_lowering(square_p, _square_lowering)
kernel.register_lowering(integer_pow_p, _integer_pow_lowering)
kernel.register_lowering(pow_p, _pow_lowering)
kernel.register_lowering(select_n_p, _select_n_lowering)
kernel.register_lowering(clamp_p, _clamp_lowering)
kernel.register_lowering(convert_element_type_p, _convert_lowering)
kernel.register_lowering(bitcast_convert_type_p, _bitcast_lowering)
kernel.register_lowering(stop_gradient_p, lambda ctx, x: x)
kernel.elementwise_lowering(lgamma_p, "lgamma")
kernel.elementwise_lowering(digamma_p, "digamma")
kernel.elementwise_lowering(erf_inv_p, "erf_inv")
