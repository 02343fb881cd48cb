"""The multinomial distribution (``jax.scipy.stats.multinomial``): counts ``x`` (integers,
categories on the LAST axis) of ``n`` trials with category probabilities ``p``."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import dtypes
from fungrad.numpy import util
from fungrad.scipy import special

__all__ = ["logpmf", "pmf"]


def logpmf(x, n, p):
    """``lgamma(n + 1) + sum_i (x_i log p_i - lgamma(x_i + 1))``; ``-inf`` where the counts
    do not sum to ``n``. ``x`` and ``n`` must be integers (a ValueError otherwise, as JAX)."""
    util.check_arraylike("multinomial.logpmf", x, n, p)
    [p] = util.promote_dtypes_inexact(p, fun_name="multinomial.logpmf")
    x, n = util.promote_dtypes(x, n, fun_name="multinomial.logpmf")
    if not dtypes.is_int(x.dtype):
        raise ValueError(
            f"multinomial.logpmf: x and n must have an integer dtype, got "
            f"x.dtype={x.dtype.name}, n.dtype={n.dtype.name} (cast the counts "
            "with .astype(int))"
        )
    if x.ndim == 0:
        raise ValueError(
            "multinomial.logpmf: x must have the categories on its last axis, got a 0-d array"
        )
    counts_match = fnp.sum(x, axis=-1) == n
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    val = special.gammaln(n + 1.0) + fnp.sum(
        special.xlogy(x, p) - special.gammaln(x + 1.0), axis=-1
    )
    return fnp.where(counts_match, val, -np.inf)


def pmf(x, n, p):
    """Multinomial probability mass at ``x``."""
    return fnp.exp(logpmf(x, n, p))
