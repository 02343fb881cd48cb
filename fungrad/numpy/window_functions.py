"""Window functions of jax.numpy (``bartlett``, ``blackman``, ``hamming``, ``hanning``,
``kaiser``) and the modified Bessel function ``i0`` that ``kaiser`` uses.

Each window has ``M`` points (static), is symmetric and computed in float32 (float64 with
x64), with numpy's formulas: ``M <= 0`` gives an empty array and ``M == 1`` a single 1.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import dtypes
from fungrad import numpy as fnp
from fungrad.numpy import util

__all__ = ["bartlett", "blackman", "hamming", "hanning", "i0", "kaiser"]


def _points(name: str, M):
    try:
        M = operator.index(M)
    except TypeError:
        raise TypeError(f"{name}: M must be a static integer, got {M!r}") from None
    dt = dtypes.default_float_dtype()
    if M <= 1:
        return M, fnp.ones(max(M, 0), dt)
    return M, fnp.arange(M, dtype=dt)


def bartlett(M: int):
    """The triangular Bartlett window of ``M`` points (``jnp.bartlett``)."""
    M, n = _points("bartlett", M)
    if M <= 1:
        return n
    half = (M - 1) / 2
    return 1 - fnp.abs(n - half) / half


def blackman(M: int):
    """The Blackman window of ``M`` points (``jnp.blackman``)."""
    M, n = _points("blackman", M)
    if M <= 1:
        return n
    t = 2 * np.pi * n / (M - 1)
    return 0.42 - 0.5 * fnp.cos(t) + 0.08 * fnp.cos(2 * t)


def hamming(M: int):
    """The Hamming window of ``M`` points (``jnp.hamming``)."""
    M, n = _points("hamming", M)
    if M <= 1:
        return n
    return 0.54 - 0.46 * fnp.cos(2 * np.pi * n / (M - 1))


def hanning(M: int):
    """The Hann window of ``M`` points (``jnp.hanning``)."""
    M, n = _points("hanning", M)
    if M <= 1:
        return n
    return 0.5 - 0.5 * fnp.cos(2 * np.pi * n / (M - 1))


def i0(x):
    """The modified Bessel function of the first kind of order 0 (``jnp.i0``), elementwise;
    integers become floats. Differentiable (its derivative is ``i1``)."""
    from fungrad.scipy import special

    util.check_arraylike("i0", x)
    (x,) = util.promote_dtypes_inexact(x, fun_name="i0")
    return special.i0(x)


def kaiser(M: int, beta):
    """The Kaiser window of ``M`` points with shape parameter ``beta`` (``jnp.kaiser``):
    ``i0(beta * sqrt(1 - (2n / (M - 1) - 1)**2)) / i0(beta)``."""
    M, n = _points("kaiser", M)
    util.check_arraylike("kaiser", beta)
    if M <= 1:
        return n
    beta = util.asarray(beta, fun_name="kaiser").astype(n.dtype)
    alpha = (M - 1) / 2.0
    r = (n - alpha) / alpha
    return i0(beta * fnp.sqrt(fnp.maximum(1 - r * r, 0))) / i0(beta)
