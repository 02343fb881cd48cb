"""Student's t distribution with ``df`` degrees of freedom (``jax.scipy.stats.t``)."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x, df, loc=0, scale=1):
    """``lgamma((df+1)/2) - lgamma(df/2) - log(pi df scale**2)/2
    - (df+1)/2 log1p(z**2 / df)`` with ``z = (x - loc) / scale``."""
    x, df, loc, scale = promote("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half_df = 0.5 * df
    log_norm = (
        special.gammaln(half_df + 0.5)
        - special.gammaln(half_df)
        - 0.5 * fnp.log(np.pi * df * scale * scale)
    )
    return log_norm - (half_df + 0.5) * fnp.log1p(z * z / df)


def pdf(x, df, loc=0, scale=1):
    """Student's t density at ``x``."""
    return fnp.exp(logpdf(x, df, loc, scale))
