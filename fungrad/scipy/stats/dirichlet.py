"""The Dirichlet distribution on the probability simplex (``jax.scipy.stats.dirichlet``).

``x`` has the ``K`` categories on its FIRST axis (shape ``(K, ...)``, as in SciPy and JAX),
or ``K - 1`` of them, the last being ``1 - sum``. ``alpha`` is one-dimensional ``(K,)``.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.numpy import util
from fungrad.scipy import special

__all__ = ["logpdf", "pdf"]

_SIMPLEX_TOL = 1e-6  # how far sum(x) may be from 1 and still count as on the simplex


def logpdf(x, alpha):
    """``sum_i (alpha_i - 1) log x_i - (sum_i lgamma(alpha_i) - lgamma(sum_i alpha_i))``;
    ``-inf`` where ``x`` is not on the simplex (an entry <= 0 or a sum off 1 by 1e-6)."""
    util.check_arraylike("dirichlet.logpdf", x, alpha)
    x, alpha = util.promote_dtypes_inexact(x, alpha, fun_name="dirichlet.logpdf")
    if alpha.ndim != 1:
        raise ValueError(
            f"dirichlet.logpdf: alpha must be one-dimensional (K,), got shape {alpha.shape}"
        )
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise ValueError(
            f"dirichlet.logpdf: x must have K = {k} (or K - 1) entries on its "
            f"first axis for alpha of shape {alpha.shape}, got x.shape "
            f"{x.shape}"
        )
    if x.shape[0] == k - 1:
        x = fnp.concatenate([x, 1.0 - fnp.sum(x, axis=0, keepdims=True)], axis=0)
    alpha_b = alpha.reshape((k,) + (1,) * (x.ndim - 1))
    log_norm = fnp.sum(special.gammaln(alpha)) - special.gammaln(fnp.sum(alpha))
    val = fnp.sum(special.xlogy(alpha_b - 1.0, x), axis=0) - log_norm
    on_simplex = fnp.all(x > 0, axis=0) & (fnp.abs(fnp.sum(x, axis=0) - 1.0) < _SIMPLEX_TOL)
    return fnp.where(on_simplex, val, -np.inf)


def pdf(x, alpha):
    """Dirichlet density at ``x``."""
    return fnp.exp(logpdf(x, alpha))
