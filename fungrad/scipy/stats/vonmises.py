"""The von Mises (circular normal) distribution (``jax.scipy.stats.vonmises``): density
``exp(kappa cos x) / (2 pi I0(kappa))``, periodic in ``x``; NaN for ``kappa <= 0``."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.scipy import special
from fungrad.scipy.stats._common import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x, kappa):
    """``kappa (cos x - 1) - log(2 pi i0e(kappa))``: the exponentially scaled Bessel
    function keeps large ``kappa`` finite."""
    x, kappa = promote("vonmises.logpdf", x, kappa)
    ok = kappa > 0
    kappa_ok = fnp.where(ok, kappa, 1.0)
    val = kappa_ok * (fnp.cos(x) - 1.0) - fnp.log(2.0 * np.pi * special.i0e(kappa_ok))
    return fnp.where(ok, val, np.nan)


def pdf(x, kappa):
    """Von Mises density at ``x``."""
    return fnp.exp(logpdf(x, kappa))
