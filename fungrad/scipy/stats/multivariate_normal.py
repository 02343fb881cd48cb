"""The multivariate normal distribution (``jax.scipy.stats.multivariate_normal``).

``mean`` is a scalar (then ``x`` and ``cov`` are scalars too: the univariate case) or has
shape ``(..., n)``; ``cov`` is a scalar (the covariance ``cov * I``) or ``(..., n, n)``
symmetric positive definite. Batch dimensions of ``x``, ``mean`` and ``cov`` broadcast. The
log-density is computed from the Cholesky factor ``L`` of ``cov``: the Mahalanobis term is
``|L^-1 (x - mean)|**2`` (forward substitution) and ``log det cov = 2 sum log diag L``.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.numpy import util

__all__ = ["logpdf", "pdf"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def _forward_substitution(chol, b):
    """``L^-1 b`` for lower-triangular ``chol`` ``(..., n, n)`` and ``b`` ``(..., n)``
    (batch dimensions broadcast): column by column, each solved entry is removed from the
    remaining right-hand side."""
    n = chol.shape[-1]
    batch = fnp.broadcast_shapes(chol.shape[:-2], b.shape[:-1])
    chol = fnp.broadcast_to(chol, batch + (n, n))
    rest = fnp.broadcast_to(b, batch + (n,))
    ys = []
    for j in range(n):
        y_j = rest[..., j] / chol[..., j, j]
        ys.append(y_j)
        if j + 1 < n:
            rest = rest - chol[..., :, j] * y_j[..., None]
    return fnp.stack(ys, axis=-1)


def logpdf(x, mean, cov, allow_singular=None):
    """Log density of ``N(mean, cov)`` at ``x`` (last axis: the ``n`` coordinates).

    ``allow_singular`` must be None or False: a singular ``cov`` (which would need a
    pseudo-inverse) is not supported, as in JAX; a covariance that is not positive definite
    gives NaN.
    """
    if allow_singular:
        raise ValueError(
            "multivariate_normal.logpdf: allow_singular=True is not supported "
            "(JAX does not support it either); pass a positive definite cov"
        )
    util.check_arraylike("multivariate_normal.logpdf", x, mean, cov)
    x, mean, cov = util.promote_dtypes_inexact(x, mean, cov, fun_name="multivariate_normal.logpdf")
    if mean.ndim == 0:
        return -0.5 * ((x - mean) ** 2 / cov + _LOG_2PI + fnp.log(cov))
    n = mean.shape[-1]
    try:
        fnp.broadcast_shapes(x.shape, mean.shape)
    except ValueError:
        raise TypeError(
            f"multivariate_normal.logpdf: x of shape {x.shape} and mean of shape "
            f"{mean.shape} do not broadcast (their last axis holds the {n} "
            f"coordinates)"
        ) from None
    y = x - mean
    if cov.ndim == 0:
        return -0.5 * (fnp.sum(y * y, axis=-1) / cov + n * (_LOG_2PI + fnp.log(cov)))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError(
            f"multivariate_normal.logpdf: cov must be a scalar or have shape "
            f"(..., {n}, {n}) for mean of shape {mean.shape}, got cov.shape "
            f"{cov.shape}"
        )
    chol = fnp.linalg.cholesky(cov)
    z = _forward_substitution(chol, y)
    log_det_half = fnp.sum(fnp.log(fnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * (fnp.sum(z * z, axis=-1) + n * _LOG_2PI) - log_det_half


def pdf(x, mean, cov):
    """Density of ``N(mean, cov)`` at ``x``."""
    return fnp.exp(logpdf(x, mean, cov))
