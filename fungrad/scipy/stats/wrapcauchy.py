"""The wrapped Cauchy distribution on ``[0, 2 pi]`` (``jax.scipy.stats.wrapcauchy``):
density ``(1 - c**2) / (2 pi (1 + c**2 - 2 c cos x))`` for ``0 < c < 1`` (NaN otherwise)."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy.stats._common import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x, c):
    """Log density; ``-inf`` outside ``[0, 2 pi]``, NaN unless ``0 < c < 1``."""
    x, c = promote("wrapcauchy.logpdf", x, c)
    c2 = c * c
    val = fnp.log1p(-c2) - np.log(2.0 * np.pi) - fnp.log(1.0 + c2 - 2.0 * c * fnp.cos(x))
    val = fnp.where((x < 0) | (x > 2.0 * np.pi), -np.inf, val)
    return fnp.where((c > 0) & (c < 1), val, np.nan)


def pdf(x, c):
    """Wrapped Cauchy density at ``x``."""
    return fnp.exp(logpdf(x, c))
