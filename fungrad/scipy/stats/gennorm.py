"""The generalized normal distribution with shape ``beta`` (``jax.scipy.stats.gennorm``):
density ``beta / (2 Gamma(1 / beta)) exp(-|x|**beta)`` (``beta = 2``: a normal with
variance 1/2, ``beta = 1``: Laplace)."""

from __future__ import annotations

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x, beta):
    """``log(beta / 2) - lgamma(1 / beta) - |x|**beta``."""
    x, beta = promote("gennorm.logpdf", x, beta)
    return fnp.log(0.5 * beta) - special.gammaln(1.0 / beta) - fnp.abs(x) ** beta


def pdf(x, beta):
    """Generalized normal density at ``x``."""
    return fnp.exp(logpdf(x, beta))


def cdf(x, beta):
    """``Q(1/beta, |x|**beta) / 2`` below 0 and ``1 - Q(1/beta, x**beta) / 2`` above, with
    ``Q`` the regularized upper incomplete gamma function (so the lower tail keeps its
    relative precision)."""
    x, beta = promote("gennorm.cdf", x, beta)
    half_tail = 0.5 * special.gammaincc(1.0 / beta, fnp.abs(x) ** beta)
    return fnp.where(x < 0, half_tail, 1.0 - half_tail)
