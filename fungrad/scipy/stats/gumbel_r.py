"""The right-skewed Gumbel (maximum extreme value) distribution
(``jax.scipy.stats.gumbel_r``): cdf ``exp(-exp(-z))`` with ``z = (x - loc) / scale``.
A non-positive ``scale`` gives NaN."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy.stats._common import log1mexp, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _z(fun_name, x, loc, scale):
    x, loc, scale = promote(fun_name, x, loc, scale)
    return (x - loc) / scale, scale, scale > 0


def logpdf(x, loc=0, scale=1):
    """``-z - exp(-z) - log(scale)``."""
    z, scale, ok = _z("gumbel_r.logpdf", x, loc, scale)
    return fnp.where(ok, -z - fnp.exp(-z) - fnp.log(scale), np.nan)


def pdf(x, loc=0, scale=1):
    """Gumbel density at ``x``."""
    return fnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    """``-exp(-z)``."""
    z, _, ok = _z("gumbel_r.logcdf", x, loc, scale)
    return fnp.where(ok, -fnp.exp(-z), np.nan)


def cdf(x, loc=0, scale=1):
    """``exp(-exp(-z))``."""
    return fnp.exp(logcdf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """``log(1 - exp(-exp(-z)))``, accurate in both tails."""
    z, _, ok = _z("gumbel_r.logsf", x, loc, scale)
    return fnp.where(ok, log1mexp(fnp.exp(-z)), np.nan)


def sf(x, loc=0, scale=1):
    """``1 - exp(-exp(-z))`` (as ``-expm1``)."""
    z, _, ok = _z("gumbel_r.sf", x, loc, scale)
    return fnp.where(ok, -fnp.expm1(-fnp.exp(-z)), np.nan)


def ppf(p, loc=0, scale=1):
    """Quantile function ``loc - scale log(-log p)``; ``-inf``/``inf`` at 0/1, NaN outside
    ``[0, 1]``."""
    p, loc, scale = promote("gumbel_r.ppf", p, loc, scale)
    ok = (p >= 0) & (p <= 1)
    p = fnp.where(ok, p, 0.5)
    return fnp.where(ok, loc - scale * fnp.log(-fnp.log(p)), np.nan)
