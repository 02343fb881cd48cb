"""The normal distribution ``N(loc, scale**2)`` (``jax.scipy.stats.norm``).

The tails use :func:`fungrad.scipy.special.log_ndtr` and ``ndtr``, which keep relative
accuracy far from the mean, so ``logcdf(-40.)`` is finite and ``sf`` is computed as the cdf
of the reflected point rather than ``1 - cdf``.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def logpdf(x, loc=0, scale=1):
    """Log of the normal density ``exp(-((x - loc) / scale)**2 / 2) / (sqrt(2 pi) scale)``."""
    x, loc, scale = promote("norm.logpdf", x, loc, scale)
    var = scale * scale
    return -0.5 * ((x - loc) * (x - loc) / var + fnp.log(var) + _LOG_2PI)


def pdf(x, loc=0, scale=1):
    """Normal density at ``x``."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """``P(X <= x)``: ``ndtr((x - loc) / scale)``."""
    x, loc, scale = promote("norm.cdf", x, loc, scale)
    return special.ndtr((x - loc) / scale)


def logcdf(x, loc=0, scale=1):
    """``log P(X <= x)``, finite far into the lower tail (``log_ndtr``)."""
    x, loc, scale = promote("norm.logcdf", x, loc, scale)
    return special.log_ndtr((x - loc) / scale)


def sf(x, loc=0, scale=1):
    """``P(X > x)``, the cdf of the mirrored point (accurate in the upper tail)."""
    x, loc, scale = promote("norm.sf", x, loc, scale)
    return special.ndtr((loc - x) / scale)


def logsf(x, loc=0, scale=1):
    """``log P(X > x)``."""
    x, loc, scale = promote("norm.logsf", x, loc, scale)
    return special.log_ndtr((loc - x) / scale)


def ppf(q, loc=0, scale=1):
    """Quantile function: the ``x`` with ``cdf(x) == q`` (``-inf``/``inf`` at 0/1, NaN
    outside ``[0, 1]``)."""
    q, loc, scale = promote("norm.ppf", q, loc, scale)
    return special.ndtri(q) * scale + loc


def isf(q, loc=0, scale=1):
    """Inverse survival function: the ``x`` with ``sf(x) == q``."""
    q, loc, scale = promote("norm.isf", q, loc, scale)
    return -special.ndtri(q) * scale + loc
