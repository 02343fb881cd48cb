"""The chi-squared distribution with ``df`` degrees of freedom (``jax.scipy.stats.chi2``):
a gamma distribution with shape ``df / 2`` and scale ``2 scale``."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import log_prob, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]

_LOG2 = float(np.log(2.0))


def logpdf(x, df, loc=0, scale=1):
    """``(df/2 - 1) log z - z/2 - lgamma(df/2) - (df/2) log 2 - log(scale)``; ``-inf``
    below ``loc``."""
    x, df, loc, scale = promote("chi2.logpdf", x, df, loc, scale)
    below = x < loc
    z = fnp.where(below, 1.0, (x - loc) / scale)
    half_df = 0.5 * df
    val = (
        special.xlogy(half_df - 1.0, z)
        - 0.5 * z
        - special.gammaln(half_df)
        - half_df * _LOG2
        - fnp.log(scale)
    )
    return fnp.where(below, -np.inf, val)


def pdf(x, df, loc=0, scale=1):
    """Chi-squared density at ``x``."""
    return fnp.exp(logpdf(x, df, loc, scale))


def _half(fun_name, x, df, loc, scale):
    x, df, loc, scale = promote(fun_name, x, df, loc, scale)
    return 0.5 * df, fnp.maximum((x - loc) / (2.0 * scale), 0.0)


def cdf(x, df, loc=0, scale=1):
    """``P(df / 2, z / 2)`` (regularized lower incomplete gamma); 0 below ``loc``."""
    return special.gammainc(*_half("chi2.cdf", x, df, loc, scale))


def logcdf(x, df, loc=0, scale=1):
    """``log(cdf(x))``; near 1 it is ``log1p(-sf(x))``, which keeps its precision."""
    return log_prob(cdf(x, df, loc, scale), sf(x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
    """``Q(df / 2, z / 2)`` (regularized upper incomplete gamma); 1 below ``loc``."""
    return special.gammaincc(*_half("chi2.sf", x, df, loc, scale))


def logsf(x, df, loc=0, scale=1):
    """``log(sf(x))``; near 1 it is ``log1p(-cdf(x))``, which keeps its precision."""
    return log_prob(sf(x, df, loc, scale), cdf(x, df, loc, scale))
