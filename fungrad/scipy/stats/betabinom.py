"""The beta-binomial distribution (``jax.scipy.stats.betabinom``): a binomial whose success
probability is Beta(``a``, ``b``): ``C(n, k) B(k + a, n - k + b) / B(a, b)``. ``k`` is
floored, as in JAX; NaN for ``n < 0``, ``a <= 0`` or ``b <= 0``."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, a, b, loc=0):
    """``-log(n + 1) - log B(n - y + 1, y + 1) + log B(y + a, n - y + b) - log B(a, b)`` with
    ``y = floor(k) - loc``; ``-inf`` outside ``[0, n]``."""
    k, n, a, b, loc = promote("betabinom.logpmf", k, n, a, b, loc)
    y = fnp.floor(k) - loc
    outside = (y < 0) | (y > n)
    y = fnp.where(outside, 0.0, y)
    log_comb = -fnp.log1p(n) - special.betaln(n - y + 1.0, y + 1.0)
    val = log_comb + special.betaln(y + a, n - y + b) - special.betaln(a, b)
    val = fnp.where(outside, -np.inf, val)
    return fnp.where((n < 0) | (a <= 0) | (b <= 0), np.nan, val)


def pmf(k, n, a, b, loc=0):
    """Beta-binomial probability mass at ``k``."""
    return fnp.exp(logpmf(k, n, a, b, loc))
