"""The beta distribution (``jax.scipy.stats.beta``): density
``z**(a - 1) (1 - z)**(b - 1) / (B(a, b) scale)`` for ``z = (x - loc) / scale`` in
``[0, 1]``; NaN for ``a``, ``b`` or ``scale`` not positive."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import log_prob, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x, a, b, loc=0, scale=1):
    """``(a - 1) log z + (b - 1) log(1 - z) - log B(a, b) - log(scale)``; ``-inf`` outside
    ``[loc, loc + scale]``."""
    x, a, b, loc, scale = promote("beta.logpdf", x, a, b, loc, scale)
    outside = (x < loc) | (x > loc + scale)
    z = fnp.where(outside, 0.5, (x - loc) / scale)
    val = (
        special.xlogy(a - 1.0, z)
        + special.xlog1py(b - 1.0, -z)
        - special.betaln(a, b)
        - fnp.log(scale)
    )
    val = fnp.where(outside, -np.inf, val)
    return fnp.where((a <= 0) | (b <= 0) | (scale <= 0), np.nan, val)


def pdf(x, a, b, loc=0, scale=1):
    """Beta density at ``x``."""
    return fnp.exp(logpdf(x, a, b, loc, scale))


def _z(fun_name, x, a, b, loc, scale):
    x, a, b, loc, scale = promote(fun_name, x, a, b, loc, scale)
    return a, b, fnp.clip((x - loc) / scale, 0.0, 1.0)


def cdf(x, a, b, loc=0, scale=1):
    """``I_z(a, b)``, the regularized incomplete beta function."""
    a, b, z = _z("beta.cdf", x, a, b, loc, scale)
    return special.betainc(a, b, z)


def logcdf(x, a, b, loc=0, scale=1):
    """``log(cdf(x))``; near 1 it is ``log1p(-sf(x))``, which keeps its precision."""
    return log_prob(cdf(x, a, b, loc, scale), sf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
    """``I_{1-z}(b, a)`` (the mirrored incomplete beta, accurate where the cdf is near 1)."""
    a, b, z = _z("beta.sf", x, a, b, loc, scale)
    return special.betainc(b, a, 1.0 - z)


def logsf(x, a, b, loc=0, scale=1):
    """``log(sf(x))``; near 1 it is ``log1p(-cdf(x))``, which keeps its precision."""
    return log_prob(sf(x, a, b, loc, scale), cdf(x, a, b, loc, scale))
