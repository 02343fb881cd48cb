"""The binomial distribution (``jax.scipy.stats.binom``): ``C(n, k) p**k (1 - p)**(n - k)``.

``n`` and ``k`` may be non-integer: the binomial coefficient is the gamma-function
extension, as in JAX.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    """``log C(n, y) + y log p + (n - y) log(1 - p)`` with ``y = k - loc``; ``-inf`` outside
    ``[0, n]``."""
    k, n, p, loc = promote("binom.logpmf", k, n, p, loc)
    y = k - loc
    outside = (y < 0) | (y > n)
    y = fnp.where(outside, 0.0, y)
    log_comb = special.gammaln(n + 1.0) - special.gammaln(y + 1.0) - special.gammaln(n - y + 1.0)
    val = log_comb + special.xlogy(y, p) + special.xlog1py(n - y, -p)
    return fnp.where(outside, -np.inf, val)


def pmf(k, n, p, loc=0):
    """Binomial probability mass at ``k``."""
    return fnp.exp(logpmf(k, n, p, loc))
