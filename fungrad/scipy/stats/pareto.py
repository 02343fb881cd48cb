"""The Pareto distribution (``jax.scipy.stats.pareto``): density ``b / z**(b + 1) / scale``
for ``z = (x - loc) / scale >= 1``."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy.stats._common import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _log_z(fun_name, x, b, loc, scale):
    x, b, loc, scale = promote(fun_name, x, b, loc, scale)
    below = x < loc + scale
    z = fnp.where(below, 1.0, (x - loc) / scale)  # z = 1 below the support (replaced later)
    return fnp.log(z), b, scale, below


def logpdf(x, b, loc=0, scale=1):
    """``log(b / scale) - (b + 1) log z``; ``-inf`` below ``loc + scale``."""
    log_z, b, scale, below = _log_z("pareto.logpdf", x, b, loc, scale)
    return fnp.where(below, -np.inf, fnp.log(b / scale) - (b + 1.0) * log_z)


def pdf(x, b, loc=0, scale=1):
    """Pareto density at ``x``."""
    return fnp.exp(logpdf(x, b, loc, scale))


def logsf(x, b, loc=0, scale=1):
    """``-b log z``; 0 below the support."""
    log_z, b, _, below = _log_z("pareto.logsf", x, b, loc, scale)
    return fnp.where(below, 0.0, -b * log_z)


def sf(x, b, loc=0, scale=1):
    """``z**-b``; 1 below the support."""
    return fnp.exp(logsf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
    """``1 - z**-b`` (as ``-expm1(-b log z)``); 0 below the support."""
    log_z, b, _, below = _log_z("pareto.cdf", x, b, loc, scale)
    return fnp.where(below, 0.0, -fnp.expm1(-b * log_z))


def logcdf(x, b, loc=0, scale=1):
    """``log(1 - z**-b)``; ``-inf`` below the support."""
    log_z, b, _, below = _log_z("pareto.logcdf", x, b, loc, scale)
    return fnp.where(below, -np.inf, fnp.log(-fnp.expm1(-b * log_z)))


def ppf(q, b, loc=0, scale=1):
    """Quantile function ``loc + scale (1 - q)**(-1/b)``; NaN outside ``[0, 1]``."""
    q, b, loc, scale = promote("pareto.ppf", q, b, loc, scale)
    bad = fnp.isnan(q) | (q < 0) | (q > 1)
    q = fnp.where(bad, 0.0, q)
    return fnp.where(bad, np.nan, loc + scale * fnp.exp(-fnp.log1p(-q) / b))
