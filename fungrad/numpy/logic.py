"""Logic functions of fungrad.numpy (NumPy's "logic functions" and "bit-wise operations"):
comparisons (``equal``, ``less``...), ``logical_*``, ``isclose``/``allclose``,
``array_equal``/``array_equiv``, and the bitwise functions (``bitwise_and``, ``invert``,
``left_shift``/``right_shift``, ``bitwise_count``...); jax.numpy keeps them in its ufuncs.

Arguments are checked, promoted with JAX's type lattice and broadcast as in
:mod:`fungrad.numpy.ufuncs` before the lax op is bound. Comparisons and ``logical_*`` return
bool; bitwise functions take integers and bools only (a TypeError otherwise); shifts take
integers only and bind ``shift_left`` / ``shift_right_arithmetic`` (signed) /
``shift_right_logical`` (unsigned).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fungrad import core, dtypes, lax
from fungrad.array import Array
from fungrad.numpy import util
from fungrad.numpy.ufuncs import (
    _require_kinds,
    absolute,
    isfinite,
    isnan,
    promote_args,
    promote_args_inexact,
    promote_args_numeric,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from fungrad.typing import ArrayLike

__all__ = [
    "allclose",
    "array_equal",
    "array_equiv",
    "bitwise_and",
    "bitwise_count",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_not",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "equal",
    "greater",
    "greater_equal",
    "invert",
    "isclose",
    "left_shift",
    "less",
    "less_equal",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "not_equal",
    "right_shift",
]

# ---------------------------------------------------------------------------------------------
# Comparisons and logical functions


def _comparison(name: str, lax_name: str, doc: str) -> Callable[[ArrayLike, ArrayLike], Array]:
    lax_fn = getattr(lax, lax_name)
    ordered = lax_name in ("lt", "le", "gt", "ge")

    def fn(x1: ArrayLike, x2: ArrayLike, /) -> Array:
        x1, x2 = promote_args(name, x1, x2)
        if ordered and dtypes.kind(x1.dtype) == "c":
            # jnp orders complex numbers lexicographically: real parts, then imaginary parts.
            r1, r2 = lax.real(x1), lax.real(x2)
            return lax.select(lax.eq(r1, r2), lax_fn(lax.imag(x1), lax.imag(x2)), lax_fn(r1, r2))
        return lax_fn(x1, x2)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


equal = _comparison("equal", "eq", "Elementwise ``x1 == x2`` after promotion (bool result).")
not_equal = _comparison("not_equal", "ne", "Elementwise ``x1 != x2``.")
less = _comparison("less", "lt", "Elementwise ``x1 < x2``.")
less_equal = _comparison("less_equal", "le", "Elementwise ``x1 <= x2``.")
greater = _comparison("greater", "gt", "Elementwise ``x1 > x2``.")
greater_equal = _comparison("greater_equal", "ge", "Elementwise ``x1 >= x2``.")


def _to_bool(x):
    """``x != 0`` as jnp computes it (against a constant of ``x``'s dtype): weakly typed only
    for a weakly typed 0-d ``x``, as JAX 0.10.2's results are (``logical_or(1, 0)`` and
    ``logical_and(jnp.int32(1), 2.0)`` are weak bools; ``logical_and(bool_array, 2.0)`` and
    ``logical_and(int_array, 0)`` strong ones)."""
    if dtypes.is_bool(x.dtype):
        return x
    aval = core.get_aval(x)
    return lax.ne(x, Array(np.zeros((), x.dtype), aval.weak_type and not aval.shape))


def logical_and(x1, x2, /):
    """Elementwise truth-value and (nonzero is True)."""
    x1, x2 = promote_args("logical_and", x1, x2)
    return lax.bitwise_and(_to_bool(x1), _to_bool(x2))


def logical_or(x1, x2, /):
    """Elementwise truth-value or."""
    x1, x2 = promote_args("logical_or", x1, x2)
    return lax.bitwise_or(_to_bool(x1), _to_bool(x2))


def logical_xor(x1, x2, /):
    """Elementwise truth-value exclusive or."""
    x1, x2 = promote_args("logical_xor", x1, x2)
    return lax.bitwise_xor(_to_bool(x1), _to_bool(x2))


def logical_not(x, /):
    """Elementwise truth-value negation."""
    (x,) = promote_args("logical_not", x)
    return lax.bitwise_not(_to_bool(x))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """Elementwise ``|a - b| <= atol + rtol * |b|``; equal infinities are close, NaNs are close
    to each other only with ``equal_nan``. Integer inputs are compared in floating point."""
    a, b = promote_args_inexact("isclose", a, b)
    util.check_arraylike("isclose", rtol, atol)
    tol_dtype = dtypes.real_dtype(a.dtype)  # |a - b| of complex values is real
    rtol = lax.convert_element_type(rtol, tol_dtype)
    atol = lax.convert_element_type(atol, tol_dtype)
    in_range = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol, lax.mul(rtol, lax.abs(b))))
    out = lax.bitwise_or(lax.eq(a, b), lax.bitwise_and(isfinite(b), in_range))
    if equal_nan:
        out = lax.bitwise_or(out, lax.bitwise_and(isnan(a), isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """Whether every element of ``a`` and ``b`` is close (a 0-d bool array)."""
    close = isclose(a, b, rtol, atol, equal_nan)
    return lax.reduce_and(close, tuple(range(close.ndim)))


def array_equal(a1, a2, equal_nan: bool = False):
    """Whether ``a1`` and ``a2`` have the same shape and elements (a 0-d bool array)."""
    util.check_arraylike("array_equal", a1, a2)
    a1, a2 = util.asarray(a1), util.asarray(a2)
    if a1.shape != a2.shape:
        return Array(np.bool_(False))
    eq = equal(a1, a2)
    if equal_nan:
        eq = lax.bitwise_or(eq, lax.bitwise_and(isnan(a1), isnan(a2)))
    return lax.convert_element_type(lax.reduce_and(eq, tuple(range(eq.ndim))), np.bool_)


def array_equiv(a1, a2):
    """Whether ``a1`` and ``a2`` broadcast to one shape and are equal (a 0-d bool array)."""
    util.check_arraylike("array_equiv", a1, a2)
    a1, a2 = util.asarray(a1), util.asarray(a2)
    try:
        util.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return Array(np.bool_(False))
    eq = equal(a1, a2)
    return lax.convert_element_type(lax.reduce_and(eq, tuple(range(eq.ndim))), np.bool_)


# ---------------------------------------------------------------------------------------------
# Bitwise functions (integers and bools)


def _bitwise_binary(name: str, lax_name: str, doc: str) -> Callable[[ArrayLike, ArrayLike], Array]:
    def fn(x1: ArrayLike, x2: ArrayLike, /) -> Array:
        x1, x2 = promote_args(name, x1, x2)
        _require_kinds(name, x1, "biu", "integer or boolean")
        return getattr(lax, lax_name)(x1, x2)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


bitwise_and = _bitwise_binary("bitwise_and", "bitwise_and", "Elementwise bitwise and.")
bitwise_or = _bitwise_binary("bitwise_or", "bitwise_or", "Elementwise bitwise or.")
bitwise_xor = _bitwise_binary("bitwise_xor", "bitwise_xor", "Elementwise bitwise xor.")


def _bitwise_not(name: str, x):
    (x,) = promote_args(name, x)
    _require_kinds(name, x, "biu", "integer or boolean")
    return lax.bitwise_not(x)


def bitwise_not(x, /):
    """Elementwise bitwise not (``~x``; logical not for bools)."""
    return _bitwise_not("bitwise_not", x)


def bitwise_invert(x, /):
    """Alias of :func:`bitwise_not`."""
    return _bitwise_not("bitwise_invert", x)


def invert(x, /):
    """Alias of :func:`bitwise_not`."""
    return _bitwise_not("invert", x)


def _shift_args(name: str, x1, x2):
    x1, x2 = promote_args_numeric(name, x1, x2)
    _require_kinds(name, x1, "iu", "integer")
    return x1, x2


def left_shift(x1, x2, /):
    """Elementwise ``x1 << x2``; shifts of the bit width or more (or negative) give 0."""
    return lax.shift_left(*_shift_args("left_shift", x1, x2))


def bitwise_left_shift(x1, x2, /):
    """Alias of :func:`left_shift`."""
    return lax.shift_left(*_shift_args("bitwise_left_shift", x1, x2))


def _right_shift(name, x1, x2):
    x1, x2 = _shift_args(name, x1, x2)
    if dtypes.is_unsigned(x1.dtype):
        return lax.shift_right_logical(x1, x2)
    return lax.shift_right_arithmetic(x1, x2)


def right_shift(x1, x2, /):
    """Elementwise ``x1 >> x2`` (arithmetic for signed, logical for unsigned integers)."""
    return _right_shift("right_shift", x1, x2)


def bitwise_right_shift(x1, x2, /):
    """Alias of :func:`right_shift`."""
    return _right_shift("bitwise_right_shift", x1, x2)


def bitwise_count(x, /):
    """Number of one bits in ``|x|`` (uint8), as numpy and jnp."""
    (x,) = promote_args("bitwise_count", x)
    _require_kinds("bitwise_count", x, "biu", "integer or boolean")
    if dtypes.is_bool(x.dtype):
        return lax.convert_element_type(x, np.uint8)
    return lax.convert_element_type(lax.population_count(absolute(x)), np.uint8)
