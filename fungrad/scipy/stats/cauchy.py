"""The Cauchy distribution (``jax.scipy.stats.cauchy``): density
``1 / (pi scale (1 + z**2))`` with ``z = (x - loc) / scale``."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy.stats._common import promote

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x, loc=0, scale=1):
    """``-log(pi scale) - log1p(z**2)``."""
    x, loc, scale = promote("cauchy.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -fnp.log(np.pi * scale) - fnp.log1p(z * z)


def pdf(x, loc=0, scale=1):
    """Cauchy density at ``x``."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """``1/2 + arctan(z) / pi``."""
    x, loc, scale = promote("cauchy.cdf", x, loc, scale)
    return 0.5 + fnp.arctan((x - loc) / scale) / np.pi


def logcdf(x, loc=0, scale=1):
    """``log(cdf(x))``."""
    return fnp.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    """``P(X > x)``: the cdf of the point mirrored about ``loc``."""
    x, loc, scale = promote("cauchy.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1):
    """``log(sf(x))``."""
    return fnp.log(sf(x, loc, scale))


def _standard_ppf(q):
    """``tan(pi (q - 1/2))`` taken from the side that keeps it accurate: near 0 and 1 it is
    ``-+1 / tan(pi q')`` with ``q'`` the distance to that end (exact in floating point), so
    tiny tail probabilities keep their relative precision; ``-+inf`` at 0 and 1, NaN
    outside ``[0, 1]``."""
    lower, upper = q < 0.25, q > 0.75
    central = fnp.tan(np.pi * (fnp.where(lower | upper, 0.5, q) - 0.5))
    tail_q = fnp.where(lower, q, fnp.where(upper, 1.0 - q, 0.25))
    tail = 1.0 / fnp.tan(np.pi * tail_q)
    val = fnp.where(lower, -tail, fnp.where(upper, tail, central))
    return fnp.where((q < 0) | (q > 1), np.nan, val)


def ppf(q, loc=0, scale=1):
    """Quantile function ``loc + scale tan(pi (q - 1/2))``; ``-inf``/``inf`` at 0/1, NaN
    outside ``[0, 1]``."""
    q, loc, scale = promote("cauchy.ppf", q, loc, scale)
    return loc + scale * _standard_ppf(q)


def isf(q, loc=0, scale=1):
    """Inverse survival function ``loc - scale tan(pi (q - 1/2))``."""
    q, loc, scale = promote("cauchy.isf", q, loc, scale)
    return loc - scale * _standard_ppf(q)
