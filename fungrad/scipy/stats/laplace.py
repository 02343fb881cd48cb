"""The Laplace (double exponential) distribution (``jax.scipy.stats.laplace``): density
``exp(-|x - loc| / scale) / (2 scale)``."""

from __future__ import annotations

import fungrad.numpy as fnp
from fungrad.scipy.stats._common import promote

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x, loc=0, scale=1):
    """``-|x - loc| / scale - log(2 scale)``."""
    x, loc, scale = promote("laplace.logpdf", x, loc, scale)
    return -fnp.abs(x - loc) / scale - fnp.log(2.0 * scale)


def pdf(x, loc=0, scale=1):
    """Laplace density at ``x``."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """``exp(z) / 2`` for ``z = (x - loc) / scale <= 0``, ``1 - exp(-z) / 2`` above."""
    x, loc, scale = promote("laplace.cdf", x, loc, scale)
    z = (x - loc) / scale
    neg_abs = -fnp.abs(z)  # the exponent both branches use, never positive
    half_tail = 0.5 * fnp.exp(neg_abs)
    return fnp.where(z <= 0, half_tail, 1.0 - half_tail)
