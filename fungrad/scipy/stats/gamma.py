"""The gamma distribution with shape ``a`` (``jax.scipy.stats.gamma``): density
``z**(a - 1) exp(-z) / (Gamma(a) scale)`` with ``z = (x - loc) / scale >= 0``."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import log_prob, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x, a, loc=0, scale=1):
    """``(a - 1) log z - z - lgamma(a) - log(scale)``; ``-inf`` below ``loc``."""
    x, a, loc, scale = promote("gamma.logpdf", x, a, loc, scale)
    below = x < loc
    z = fnp.where(below, 1.0, (x - loc) / scale)
    val = special.xlogy(a - 1.0, z) - z - special.gammaln(a) - fnp.log(scale)
    return fnp.where(below, -np.inf, val)


def pdf(x, a, loc=0, scale=1):
    """Gamma density at ``x``."""
    return fnp.exp(logpdf(x, a, loc, scale))


def _z(fun_name, x, a, loc, scale):
    x, a, loc, scale = promote(fun_name, x, a, loc, scale)
    return a, fnp.maximum((x - loc) / scale, 0.0)


def cdf(x, a, loc=0, scale=1):
    """``P(a, z)``, the regularized lower incomplete gamma function (0 below ``loc``)."""
    a, z = _z("gamma.cdf", x, a, loc, scale)
    return special.gammainc(a, z)


def logcdf(x, a, loc=0, scale=1):
    """``log(cdf(x))``; near 1 it is ``log1p(-sf(x))``, which keeps its precision."""
    return log_prob(cdf(x, a, loc, scale), sf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
    """``Q(a, z)``, the regularized upper incomplete gamma function (1 below ``loc``)."""
    a, z = _z("gamma.sf", x, a, loc, scale)
    return special.gammaincc(a, z)


def logsf(x, a, loc=0, scale=1):
    """``log(sf(x))``; near 1 it is ``log1p(-cdf(x))``, which keeps its precision."""
    return log_prob(sf(x, a, loc, scale), cdf(x, a, loc, scale))
