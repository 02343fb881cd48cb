"""The truncated normal distribution (``jax.scipy.stats.truncnorm``): ``N(loc, scale**2)``
restricted to ``[a, b]``, where ``a`` and ``b`` are in standard units (``(x - loc) / scale``),
as in SciPy. ``a >= b`` gives NaN.

The normalising mass ``Phi(b) - Phi(a)`` is computed in log space from whichever tail keeps
it accurate (see :func:`_log_gauss_mass`), so intervals far in the tails (``a = 30``) work.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats import norm
from fungrad.scipy.stats._common import log1mexp, log_diff_exp, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def _log_gauss_mass(a, b):
    """``log(Phi(b) - Phi(a))`` for ``a <= b``.

    Both ends in the lower half (``b <= 0``): the difference of ``log_ndtr`` values. Both in
    the upper half (``a > 0``): the same for the mirrored interval ``[-b, -a]``. Straddling 0:
    ``log1p(-Phi(a) - Phi(-b))``, both subtracted masses being below 1/2.
    """
    a, b = fnp.broadcast_arrays(a, b)
    tail = (b <= 0) | (a > 0)
    # Each formula gets harmless stand-in arguments where the other is used, so neither
    # produces inf/NaN values or gradients that the selection would not mask.
    lo = fnp.where(a > 0, -b, fnp.where(tail, a, -2.0))
    hi = fnp.where(a > 0, -a, fnp.where(tail, b, -1.0))
    tail_mass = log_diff_exp(special.log_ndtr(hi), special.log_ndtr(lo))
    a_c, b_c = fnp.where(tail, -1.0, a), fnp.where(tail, 1.0, b)
    central_mass = fnp.log1p(-special.ndtr(a_c) - special.ndtr(-b_c))
    return fnp.where(tail, tail_mass, central_mass)


def logpdf(x, a, b, loc=0, scale=1):
    """``norm.logpdf(x, loc, scale) - log(Phi(b) - Phi(a))`` on the support, ``-inf``
    outside it."""
    x, a, b, loc, scale = promote("truncnorm.logpdf", x, a, b, loc, scale)
    z = (x - loc) / scale
    val = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    val = fnp.where((z < a) | (z > b), -np.inf, val)
    return fnp.where(a >= b, np.nan, val)


def pdf(x, a, b, loc=0, scale=1):
    """Truncated normal density at ``x``."""
    return fnp.exp(logpdf(x, a, b, loc, scale))


def logcdf(x, a, b, loc=0, scale=1):
    """``log((Phi(z) - Phi(a)) / (Phi(b) - Phi(a)))``; near 0 it is taken as
    ``log(1 - sf)`` so values close to 1 keep their precision. ``-inf`` below the support,
    0 above it."""
    x, a, b, loc, scale = promote("truncnorm.logcdf", x, a, b, loc, scale)
    x, a, b = fnp.broadcast_arrays(x, a, b)
    zs = (x - loc) / scale
    inside = (zs > a) & (zs < b)
    # Outside the open support z is a stand-in midpoint (the result is replaced), so the
    # masses below stay positive and their gradients finite.
    z = fnp.where(inside, zs, 0.5 * (a + b))
    log_mass = _log_gauss_mass(a, b)
    log_lower = _log_gauss_mass(a, z) - log_mass
    log_upper = _log_gauss_mass(z, b) - log_mass
    near_one = log_lower > -0.1
    val = fnp.where(near_one, log1mexp(-fnp.where(near_one, log_upper, -1.0)), log_lower)
    val = fnp.where(zs >= b, 0.0, fnp.where(zs <= a, -np.inf, val))
    return fnp.where((a >= b) | fnp.isnan(zs), np.nan, val)


def cdf(x, a, b, loc=0, scale=1):
    """``P(X <= x)``."""
    return fnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0, scale=1):
    """``log P(X > x)``: the logcdf of the mirrored distribution at ``-x``."""
    x, a, b, loc, scale = promote("truncnorm.logsf", x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x, a, b, loc=0, scale=1):
    """``P(X > x)``."""
    return fnp.exp(logsf(x, a, b, loc, scale))
