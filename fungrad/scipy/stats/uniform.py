"""The uniform distribution on ``[loc, loc + scale]`` (``jax.scipy.stats.uniform``)."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy.stats._common import promote

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x, loc=0, scale=1):
    """``-log(scale)`` on the closed support, ``-inf`` outside."""
    x, loc, scale = promote("uniform.logpdf", x, loc, scale)
    outside = (x < loc) | (x > loc + scale)
    return fnp.where(outside, -np.inf, fnp.where(fnp.isnan(x), np.nan, -fnp.log(scale)))


def pdf(x, loc=0, scale=1):
    """Uniform density at ``x``."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """``(x - loc) / scale`` clipped to ``[0, 1]``; NaN for NaN input."""
    x, loc, scale = promote("uniform.cdf", x, loc, scale)
    ramp = (x - loc) / scale
    return fnp.where(x < loc, 0.0, fnp.where(x > loc + scale, 1.0, ramp))


def ppf(q, loc=0, scale=1):
    """Quantile function ``loc + scale q``; NaN outside ``[0, 1]``."""
    q, loc, scale = promote("uniform.ppf", q, loc, scale)
    return fnp.where(fnp.isnan(q) | (q < 0) | (q > 1), np.nan, loc + scale * q)
