"""The exponential distribution (``jax.scipy.stats.expon``): density
``exp(-(x - loc) / scale) / scale`` for ``x >= loc``."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy.stats._common import log1mexp, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _z(fun_name, x, loc, scale):
    x, loc, scale = promote(fun_name, x, loc, scale)
    below = x < loc
    # Points below the support use z = 0 so no branch overflows; the result is replaced.
    return fnp.where(below, 0.0, (x - loc) / scale), below, scale


def logpdf(x, loc=0, scale=1):
    """``-(x - loc) / scale - log(scale)``; ``-inf`` below ``loc``."""
    z, below, scale = _z("expon.logpdf", x, loc, scale)
    return fnp.where(below, -np.inf, -z - fnp.log(scale))


def pdf(x, loc=0, scale=1):
    """Exponential density at ``x`` (0 below ``loc``)."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """``1 - exp(-z)`` (as ``-expm1(-z)``, accurate for small ``z``); 0 below ``loc``."""
    z, below, _ = _z("expon.cdf", x, loc, scale)
    return fnp.where(below, 0.0, -fnp.expm1(-z))


def logcdf(x, loc=0, scale=1):
    """``log(1 - exp(-z))``, accurate for small and large ``z``; ``-inf`` below ``loc``."""
    z, below, _ = _z("expon.logcdf", x, loc, scale)
    return fnp.where(below, -np.inf, log1mexp(z))


def sf(x, loc=0, scale=1):
    """``exp(-z)``; 1 below ``loc``."""
    return fnp.exp(logsf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """``-z``; 0 below ``loc``."""
    z, _, _ = _z("expon.logsf", x, loc, scale)
    return -z


def ppf(q, loc=0, scale=1):
    """Quantile function ``loc - scale log1p(-q)``; NaN outside ``[0, 1]``."""
    q, loc, scale = promote("expon.ppf", q, loc, scale)
    bad = fnp.isnan(q) | (q < 0) | (q > 1)
    return fnp.where(bad, np.nan, loc - scale * fnp.log1p(-fnp.where(bad, 0.0, q)))
