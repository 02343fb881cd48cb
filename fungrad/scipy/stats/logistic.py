"""The logistic distribution (``jax.scipy.stats.logistic``): cdf ``expit((x - loc) / scale)``."""

from __future__ import annotations

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]


def logpdf(x, loc=0, scale=1):
    """``-2 log(2 cosh(z / 2)) - log(scale)`` with ``z = (x - loc) / scale``; the
    ``logaddexp`` form stays finite for large ``|z|``."""
    x, loc, scale = promote("logistic.logpdf", x, loc, scale)
    half_z = (x - loc) / (2.0 * scale)
    return -2.0 * fnp.logaddexp(half_z, -half_z) - fnp.log(scale)


def pdf(x, loc=0, scale=1):
    """Logistic density at ``x``."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """``expit((x - loc) / scale)``."""
    x, loc, scale = promote("logistic.cdf", x, loc, scale)
    return special.expit((x - loc) / scale)


def sf(x, loc=0, scale=1):
    """``expit(-(x - loc) / scale)``."""
    x, loc, scale = promote("logistic.sf", x, loc, scale)
    return special.expit((loc - x) / scale)


def ppf(x, loc=0, scale=1):
    """Quantile function ``loc + scale logit(q)`` (the argument is named ``x`` as in JAX)."""
    x, loc, scale = promote("logistic.ppf", x, loc, scale)
    return loc + scale * special.logit(x)


def isf(x, loc=0, scale=1):
    """Inverse survival function ``loc - scale logit(q)``."""
    x, loc, scale = promote("logistic.isf", x, loc, scale)
    return loc - scale * special.logit(x)
