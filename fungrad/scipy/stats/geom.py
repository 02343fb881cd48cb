"""The geometric distribution (``jax.scipy.stats.geom``): the trial of the first success,
``P(k) = (1 - p)**(k - 1) p`` for ``k >= 1``."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, p, loc=0):
    """``(k - loc - 1) log(1 - p) + log p``; ``-inf`` for ``k - loc < 1``."""
    k, p, loc = promote("geom.logpmf", k, p, loc)
    y = k - loc
    below = y < 1
    y = fnp.where(below, 1.0, y)
    return fnp.where(below, -np.inf, special.xlog1py(y - 1.0, -p) + fnp.log(p))


def pmf(k, p, loc=0):
    """Geometric probability mass at ``k``."""
    return fnp.exp(logpmf(k, p, loc))
