"""The negative binomial distribution (``jax.scipy.stats.nbinom``): the number of failures
before the ``n``-th success, ``C(k + n - 1, k) p**n (1 - p)**k`` (``n`` may be real)."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    """``lgamma(y + n) - lgamma(n) - lgamma(y + 1) + n log p + y log(1 - p)`` with
    ``y = k - loc``; ``-inf`` for ``y < 0``."""
    k, n, p, loc = promote("nbinom.logpmf", k, n, p, loc)
    y = k - loc
    below = y < 0
    y = fnp.where(below, 0.0, y)
    log_comb = special.gammaln(y + n) - special.gammaln(n) - special.gammaln(y + 1.0)
    val = log_comb + special.xlogy(n, p) + special.xlog1py(y, -p)
    return fnp.where(below, -np.inf, val)


def pmf(k, n, p, loc=0):
    """Negative binomial probability mass at ``k``."""
    return fnp.exp(logpmf(k, n, p, loc))
