"""Helpers shared by the modules of ``fungrad.scipy.special``: argument promotion, dtype
limits, the ``custom_jvp`` wrapper the iterative functions use (a ``while_loop`` has no
reverse mode, so their derivatives are closed-form rules), and the elementary pieces more than
one family needs (the sign of Gamma, the normal CDF, ``exp(-x^2)`` without the rounding of
``x^2``)."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import dtypes, lax
from fungrad.numpy import util

EULER_GAMMA = 0.57721566490153286061
#: split x = hi + lo with hi on a grid fine enough that hi * hi is exact in the dtype
EXP_SQUARE_GRID = {dtypes.float32: 2.0**8, dtypes.float64: 2.0**20}


def inexact(fun_name: str, x):
    """``x`` as an array of its inexact dtype (integers and bools promote to the default
    float); errors name ``fun_name``."""
    [x] = util.promote_args_inexact(fun_name, x)
    return x


def lists_as_arrays(*xs):
    """Lists and tuples among ``xs`` as arrays: the functions whose JAX versions call
    ``jnp.asarray`` on their arguments (ndtr, log_ndtr, spence, expn, hyp1f1, hyp2f1) take
    them, where most of jax.scipy.special refuses them."""
    return [fnp.asarray(x) if isinstance(x, (list, tuple)) else x for x in xs]


def concrete_int(fun_name: str, what: str, value, minimum: int) -> int:
    """``value`` as a Python int of at least ``minimum``: a concrete integer (or integral
    float) scalar. Not a number, or not a scalar, is a TypeError; a fraction or a value below
    ``minimum`` is a ValueError naming ``fun_name`` and ``what``."""
    value = util.concrete_or_error(value, f"{fun_name}'s {what} (a Python int)")
    kind = getattr(
        np.asarray(value) if not isinstance(value, (int, float)) else value, "dtype", None
    )
    if (
        isinstance(value, bool)
        or np.ndim(value) != 0
        or not isinstance(value, (int, float, np.integer, np.floating, np.ndarray))
        or (kind is not None and kind.kind not in "iuf")
    ):
        what_got = (
            f"an array of shape {np.shape(value)}"
            if np.ndim(value)
            else f"{type(value).__name__} {value!r}"
        )
        raise TypeError(f"{fun_name}: {what} must be an integer scalar, got {what_got}")
    number = float(value)
    if not number.is_integer() or number < minimum:
        bound = "non-negative" if minimum == 0 else "positive" if minimum == 1 else f">= {minimum}"
        raise ValueError(f"{fun_name}: {what} must be a {bound} integer, got {value!r}")
    return int(number)


def normal_inexact(fun_name: str, x):
    """``x`` promoted to float32/float64; float16 is refused as in JAX (the polynomial
    approximations below are tuned for single and double precision)."""
    x = inexact(fun_name, x)
    if x.dtype not in (dtypes.float32, dtypes.float64):
        raise TypeError(
            f"{fun_name}: dtype {x.dtype.name} is not supported; use float32 or float64"
        )
    return x


def rounding_eps(x) -> float:
    """The unit roundoff (half the machine epsilon) of ``x``'s dtype: convergence tolerance."""
    return float(np.finfo(x.dtype).eps) / 2


def make_custom_jvp(fn, rule):
    """``fn`` as a ``custom_jvp`` function with the rule ``rule(primals, tangents)``."""
    from fungrad.transforms.custom import custom_jvp

    wrapped = custom_jvp(fn)
    wrapped.defjvp(rule)
    return wrapped


def gammasgn(x):
    """Sign of ``Gamma(x)``: 1 for ``x >= 0`` (and ``+inf``), ``(-1)^ceil(-x)`` below 0, NaN at
    the poles (negative integers), ``-inf`` and NaN."""
    x = inexact("gammasgn", x)
    floor_x = fnp.floor(x)
    neg = fnp.where(fnp.remainder(floor_x, 2.0) == 0, 1.0, -1.0)
    out = fnp.where(x >= 0, 1.0, neg)
    return fnp.where(((x < 0) & (x == floor_x)) | fnp.isnan(x), np.nan, out).astype(x.dtype)


def gamma(x):
    """The gamma function ``Gamma(x) = gammasgn(x) * exp(gammaln(x))`` (``+inf`` at 0, NaN at
    the negative integers)."""
    x = inexact("gamma", x)
    return gammasgn(x) * fnp.exp(lax.lgamma(x))


_HALF_SQRT_2 = 0.5 * float(np.sqrt(2.0))


def ndtr_unchecked(x):
    """The standard normal CDF of a float32/float64 array (``scipy.special.ndtr`` checks the
    dtype first)."""
    w = x * _HALF_SQRT_2
    z = fnp.abs(w)
    # |w| < 1/sqrt(2): erf is accurate; otherwise use erfc of |w| (relative accuracy in the
    # lower tail, where 1 + erf(w) would cancel).
    y = fnp.where(
        z < _HALF_SQRT_2, 1.0 + lax.erf(w), fnp.where(w > 0, 2.0 - lax.erfc(z), lax.erfc(z))
    )
    return 0.5 * y


def exp_neg_square(x, grid: float):
    """``exp(-x^2)`` with ``x = hi + lo`` split so that ``hi^2`` is exact (as ``erfcx`` does)."""
    hi = fnp.round(x * grid) / grid
    lo = x - hi
    return fnp.exp(-(hi * hi)) * fnp.exp(-lo * (2.0 * hi + lo))
