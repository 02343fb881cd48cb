"""The Bernoulli distribution (``jax.scipy.stats.bernoulli``): ``P(1) = p``, ``P(0) = 1 - p``.

As in JAX the pmf is the continuous extension ``p**k (1 - p)**(1 - k)`` on ``[0, 1]`` (no
integer check on ``k``); points outside ``[0, 1]`` have pmf 0.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["cdf", "logpmf", "pmf", "ppf"]


def logpmf(k, p, loc=0):
    """``k log p + (1 - k) log(1 - p)`` for ``0 <= k - loc <= 1`` (``0 log 0 = 0``), else
    ``-inf``."""
    k, p, loc = promote("bernoulli.logpmf", k, p, loc)
    y = k - loc
    val = special.xlogy(y, p) + special.xlog1py(1.0 - y, -p)
    return fnp.where((y < 0) | (y > 1), -np.inf, val)


def pmf(k, p, loc=0):
    """Bernoulli probability mass at ``k``."""
    return fnp.exp(logpmf(k, p, loc))


def cdf(k, p):
    """0 below 0, ``1 - p`` on ``[0, 1)``, 1 from 1 on; NaN for NaN inputs or ``p`` outside
    ``[0, 1]``."""
    k, p = promote("bernoulli.cdf", k, p)
    val = fnp.where(k < 0, 0.0, fnp.where(k < 1, 1.0 - p, 1.0))
    return fnp.where(fnp.isnan(k) | fnp.isnan(p) | (p < 0) | (p > 1), np.nan, val)


def ppf(q, p):
    """Smallest ``k`` in ``{0, 1}`` with ``cdf(k) >= q``; NaN for ``q`` or ``p`` outside
    ``[0, 1]`` (``ppf(0) == 0``, as in JAX)."""
    q, p = promote("bernoulli.ppf", q, p)
    bad = fnp.isnan(q) | fnp.isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    return fnp.where(bad, np.nan, fnp.where(q <= 1.0 - p, 0.0, 1.0))
