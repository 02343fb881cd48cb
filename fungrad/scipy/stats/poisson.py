"""The Poisson distribution (``jax.scipy.stats.poisson``): ``P(k) = mu**k exp(-mu) / k!``."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["cdf", "entropy", "logpmf", "pmf"]


def logpmf(k, mu, loc=0):
    """``y log mu - mu - lgamma(y + 1)`` with ``y = k - loc``; ``-inf`` for negative or
    non-integer ``k``, NaN for ``mu < 0``."""
    k, mu, loc = promote("poisson.logpmf", k, mu, loc)
    y = k - loc
    off = (y < 0) | (fnp.round(k) != k)
    y = fnp.where(off, 0.0, y)
    val = special.xlogy(y, mu) - mu - special.gammaln(y + 1.0)
    return fnp.where(mu < 0, np.nan, fnp.where(off, -np.inf, val))


def pmf(k, mu, loc=0):
    """Poisson probability mass at ``k``."""
    return fnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """``P(X <= k) = Q(floor(k - loc) + 1, mu)`` (the regularized upper incomplete gamma
    function); 0 below ``loc``."""
    k, mu, loc = promote("poisson.cdf", k, mu, loc)
    y = k - loc
    below = y < 0
    y = fnp.where(below, 0.0, y)
    return fnp.where(below, 0.0, special.gammaincc(fnp.floor(y) + 1.0, mu))


# Below this mean the entropy is summed term by term over k = 0 .. _ENTROPY_TERMS - 1 (the
# mass beyond is under 1e-20); above, the asymptotic series in 1/mu is exact to ~1e-10.
_ENTROPY_SERIES_FROM = 100.0
_ENTROPY_TERMS = 256


def entropy(mu, loc=0):
    """Entropy ``-sum_k P(k) log P(k)`` of Poisson(``mu``) (``loc`` shifts the support and
    leaves the entropy unchanged; it only broadcasts). 0 at ``mu == 0``."""
    mu, loc = promote("poisson.entropy", mu, loc)
    shape = fnp.broadcast_shapes(mu.shape, loc.shape)
    small = mu < _ENTROPY_SERIES_FROM
    mu_small = fnp.where(small & (mu > 0), mu, 1.0)  # stand-ins keep unused terms finite
    ks = fnp.arange(_ENTROPY_TERMS, dtype=mu.dtype).reshape((_ENTROPY_TERMS,) + (1,) * mu.ndim)
    log_p = logpmf(ks, mu_small[None])
    # -p log p from log p; terms whose mass underflows are 0 (and stay out of gradients)
    kept = log_p > -700.0
    log_p = fnp.where(kept, log_p, 0.0)
    summed = fnp.sum(fnp.where(kept, -fnp.exp(log_p) * log_p, 0.0), axis=0)
    mu_big = fnp.where(small, 100.0, mu)
    inv = 1.0 / mu_big
    series = 0.5 * fnp.log(2.0 * np.pi * np.e * mu_big) - inv * (
        1.0 / 12.0 + inv * (1.0 / 24.0 + inv * (19.0 / 360.0))
    )
    out = fnp.where(mu == 0, 0.0, fnp.where(small, summed, series))
    return fnp.broadcast_to(out, shape)
