"""Polynomials as coefficient arrays, highest power first (numpy's legacy ``poly*`` API, as
jax.numpy has it): ``polyval``, ``polyadd``, ``polysub``, ``polymul``, ``polydiv``,
``polyder``, ``polyint``, ``polyfit``, ``vander``, and ``poly`` / ``roots`` between coefficients
and zeros (``roots`` is the eigenvalues of the companion matrix, as in numpy and JAX).

Lengths are static (array shapes), so everything traces, differentiates and compiles.
``polymul``/``polyder``/``polyint``/``polydiv``/``polyfit`` compute in floating point (integers
become floats), ``polyval``/``polyadd``/``polysub``/``vander`` keep the promoted dtype, as in
JAX.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import dtypes
from fungrad import numpy as fnp
from fungrad.numpy import util

__all__ = [
    "poly",
    "polyadd",
    "polyder",
    "polydiv",
    "polyfit",
    "polyint",
    "polymul",
    "polysub",
    "polyval",
    "roots",
    "vander",
]


def _coeffs(name: str, *ps, inexact: bool = False):
    util.check_arraylike(name, *ps)
    ps = (util.promote_dtypes_inexact if inexact else util.promote_dtypes)(*ps, fun_name=name)
    for p in ps:
        if p.ndim != 1:
            raise ValueError(f"{name}: coefficient arrays must be 1-D, got shape {p.shape}")
    return ps


def _order(name: str, what: str, m) -> int:
    try:
        m = operator.index(m)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a static integer, got {m!r}") from None
    if m < 0:
        raise ValueError(f"{name}: {what} must be non-negative, got {m}")
    return m


def polyval(p, x, *, unroll: int = 16):
    """The polynomial with coefficients ``p`` (highest power first) at ``x``, by Horner's
    rule (``jnp.polyval``); ``unroll`` is accepted for JAX's signature (the loop over the
    static number of coefficients is always unrolled)."""
    util.check_arraylike("polyval", p, x)
    p, x = util.promote_dtypes(p, x, fun_name="polyval")
    if p.ndim != 1:
        raise ValueError(f"polyval: p must be 1-D, got shape {p.shape}")
    y = fnp.zeros_like(x)
    for i in range(p.shape[0]):
        y = y * x + p[i]
    return y


def _pad_front(p, n: int):
    return p if p.shape[0] == n else fnp.concatenate([fnp.zeros(n - p.shape[0], p.dtype), p])


def polyadd(a1, a2):
    """The sum of two polynomials (``jnp.polyadd``)."""
    a1, a2 = _coeffs("polyadd", a1, a2)
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n) + _pad_front(a2, n)


def polysub(a1, a2):
    """The difference of two polynomials (``jnp.polysub``)."""
    a1, a2 = _coeffs("polysub", a1, a2)
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n) - _pad_front(a2, n)


def _trim(name: str, p):
    return fnp.trim_zeros(util.concrete_or_error(p, f"{name}(trim_leading_zeros=True)"), "f")


def polymul(a1, a2, *, trim_leading_zeros: bool = False):
    """The product of two polynomials (``jnp.polymul``); ``trim_leading_zeros=True`` drops
    leading zero coefficients first (the inputs must then be concrete)."""
    a1, a2 = _coeffs("polymul", a1, a2, inexact=True)
    if trim_leading_zeros:
        a1, a2 = _trim("polymul", a1), _trim("polymul", a2)
    if a1.shape[0] == 0 or a2.shape[0] == 0:
        return fnp.zeros(0 if trim_leading_zeros else 1, a1.dtype)
    return fnp.convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros: bool = False):
    """Quotient and remainder of polynomial division ``u / v`` (``jnp.polydiv``). As in JAX
    the remainder keeps ``u``'s length (leading entries zero); ``v[0]`` must be non-zero."""
    u, v = _coeffs("polydiv", u, v, inexact=True)
    if trim_leading_zeros:
        u, v = _trim("polydiv", u), _trim("polydiv", v)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    if n < 0:
        raise ValueError("polydiv: the divisor v has no coefficients")
    scale = 1.0 / v[0]
    q = fnp.zeros(max(m - n + 1, 1), u.dtype)
    r = u
    for k in range(m - n + 1):
        d = scale * r[k]
        q = q.at[k].set(d)
        r = r.at[k : k + n + 1].add(-d * v)
    return q, r


def polyder(p, m: int = 1):
    """The ``m``-th derivative of a polynomial (``jnp.polyder``)."""
    (p,) = _coeffs("polyder", p, inexact=True)
    m = _order("polyder", "m", m)
    for _ in range(m):
        n = p.shape[0]
        if n == 0:
            return p
        p = p[:-1] * fnp.arange(n - 1, 0, -1, dtype=p.dtype)
    return p


def polyint(p, m: int = 1, k=None):
    """The ``m``-th antiderivative of a polynomial (``jnp.polyint``); ``k`` gives the
    integration constants (a scalar, or ``m`` values, the first for the first integration;
    zeros by default)."""
    (p,) = _coeffs("polyint", p, inexact=True)
    m = _order("polyint", "m", m)
    if m == 0:
        return p
    k = fnp.zeros(m, p.dtype) if k is None else fnp.atleast_1d(util.asarray(k)).astype(p.dtype)
    if k.ndim != 1 or k.shape[0] not in (1, m):
        raise ValueError(
            f"polyint: k must be a scalar or {m} values (one per integration), got shape {k.shape}"
        )
    if k.shape[0] == 1 and m > 1:
        k = fnp.broadcast_to(k, (m,))
    for i in range(m):
        n = p.shape[0]
        p = fnp.concatenate([p / fnp.arange(n, 0, -1, dtype=p.dtype), k[i : i + 1]])
    return p


def vander(x, N: int | None = None, increasing: bool = False):
    """The Vandermonde matrix of the 1-D ``x``: column ``j`` is ``x ** (N - 1 - j)``, or
    ``x ** j`` with ``increasing=True`` (``jnp.vander``); ``N`` defaults to ``len(x)``."""
    util.check_arraylike("vander", x)
    x = util.asarray(x, fun_name="vander")
    if x.ndim != 1:
        raise ValueError(f"vander: x must be 1-D, got shape {x.shape}")
    n = x.shape[0] if N is None else _order("vander", "N", N)
    if n == 0:
        return fnp.zeros((x.shape[0], 0), x.dtype)
    # repeated products rather than power(): exact for integers, like numpy's cumprod
    cols = [fnp.ones_like(x)]
    for _ in range(1, n):
        cols.append(cols[-1] * x)
    out = fnp.stack(cols, axis=1)
    return out if increasing else out[:, ::-1]


def polyfit(x, y, deg: int, rcond=None, full: bool = False, w=None, cov: bool = False):
    """Least-squares polynomial fit of degree ``deg`` to points ``(x, y)`` (``jnp.polyfit``):
    the coefficients, highest power first (a column per fit when ``y`` is 2-D).

    Solved with the normal equations of the column-scaled Vandermonde matrix (fungrad has no
    SVD); well conditioned for the low degrees polyfit is used for. ``full=True`` (which
    returns singular values) and ``cov=True`` are not supported and raise ValueError.
    """
    if full or cov:
        raise ValueError(
            "polyfit: full=True and cov=True need a singular value decomposition, "
            "which fungrad.numpy.linalg does not provide; call polyfit without them"
        )
    util.check_arraylike("polyfit", x, y)
    x, y = util.promote_dtypes_inexact(x, y, fun_name="polyfit")
    deg = _order("polyfit", "deg", deg)
    if x.ndim != 1 or x.shape[0] == 0 or y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise TypeError(
            f"polyfit: expected a non-empty 1-D x and y of the same length (y may "
            f"be 2-D), got shapes {x.shape} and {y.shape}"
        )
    lhs = vander(x, deg + 1)
    rhs = y
    if w is not None:
        w = util.asarray(w).astype(x.dtype)
        if w.shape != x.shape:
            raise TypeError(f"polyfit: w must have x's shape {x.shape}, got {w.shape}")
        lhs = lhs * w[:, None]
        rhs = rhs * (w if rhs.ndim == 1 else w[:, None])
    scale = fnp.sqrt(fnp.sum(lhs * lhs, axis=0))
    scale = fnp.where(scale == 0, 1, scale)
    lhs = lhs / scale
    gram = lhs.T @ lhs
    c = fnp.linalg.solve(gram, lhs.T @ rhs)
    return (c.T / scale).T


def poly(seq_of_zeros):
    """The coefficients (highest power first, leading 1) of the monic polynomial whose zeros are
    ``seq_of_zeros`` (``jnp.poly``): a 1-D array of zeros, a scalar (one zero), or a non-empty
    square matrix (its characteristic polynomial, from its eigenvalues, so complex).

    As in JAX the result is always inexact and complex whenever the zeros are (numpy returns real
    coefficients when complex zeros come in conjugate pairs), and no zeros give the 0-d ``1``.
    """
    util.check_arraylike("poly", seq_of_zeros)
    (z,) = util.promote_dtypes_inexact(util.asarray(seq_of_zeros, fun_name="poly"))
    z = fnp.atleast_1d(z)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        z = fnp.linalg.eigvals(z)
    if z.ndim != 1:
        raise ValueError(
            f"poly: input must be 1d or non-empty square 2d array, got shape {z.shape}"
        )
    if z.shape[0] == 0:
        return fnp.ones((), z.dtype)
    zero = fnp.zeros(1, z.dtype)
    a = fnp.ones(1, z.dtype)
    for k in range(z.shape[0]):  # a(x) * (x - z[k])
        a = fnp.concatenate([a, zero]) - z[k] * fnp.concatenate([zero, a])
    return a


def _companion(a):
    """The companion matrices [..., N-1, N-1] of the coefficient vectors ``a`` [..., N]
    (inexact, N >= 2): first row ``-a[1:] / a[0]``, ones on the first subdiagonal. Their
    eigenvalues are the polynomials' roots. (Shared with fungrad.scipy.linalg.companion.)"""
    m = a.shape[-1] - 1
    first_row = -a[..., 1:] / a[..., :1]
    rows = np.arange(m)[:, None]
    below = fnp.asarray(np.eye(m, k=-1), dtype=a.dtype)
    return fnp.where(rows == 0, first_row[..., None, :], below)


def roots(p, *, strip_zeros: bool = True):
    """The roots of the polynomial with coefficients ``p`` (highest power first), always complex
    (``jnp.roots``): the eigenvalues of its companion matrix.

    ``strip_zeros=True`` (numpy's behaviour) drops leading zero coefficients, so the number of
    roots depends on ``p``'s values and ``p`` must be concrete (not under jit). With
    ``strip_zeros=False`` the output always has ``len(p) - 1`` entries: each leading zero
    coefficient turns one root into NaN (at the end, after the zero roots), which works under
    jit and the other transformations.
    """
    util.check_arraylike("roots", p)
    (p,) = util.promote_dtypes_inexact(util.asarray(p, fun_name="roots"))
    p = fnp.atleast_1d(p)
    if p.ndim != 1:
        raise ValueError(f"roots: input must be a rank-1 array, got shape {p.shape}")
    n = p.shape[0]
    if n < 2:
        return fnp.zeros(0, dtypes.complex_dtype(p.dtype))
    nonzero = p != 0
    leading = fnp.where(fnp.any(nonzero), fnp.argmax(nonzero), n)  # leading zero coefficients
    if strip_zeros:
        k = int(
            util.concrete_or_error(
                leading,
                "roots(strip_zeros=True), which needs the number of leading zero coefficients; "
                "under jit pass strip_zeros=False (leading zeros then give NaN roots)",
            )
        )
        return _eigvals_of_companion(p[k:])
    # Move the leading zeros to the end: the same roots plus one zero root per leading zero
    # (all ones if p is all zero, so the eigenvalue solver sees finite numbers). The zero roots
    # go last and as many as there were leading zeros become NaN.
    p = fnp.where(leading == n, fnp.ones_like(p), p)
    p = fnp.take(p, (fnp.arange(n) + leading) % n)
    r = _eigvals_of_companion(p)
    r = r[fnp.argsort(r == 0, stable=True)]
    undefined = fnp.arange(n - 1) >= n - 1 - leading
    return fnp.where(undefined, fnp.asarray(complex(np.nan, np.nan), r.dtype), r)


def _eigvals_of_companion(p):
    if p.shape[0] < 2:
        return fnp.zeros(0, dtypes.complex_dtype(p.dtype))
    return fnp.linalg.eigvals(_companion(p))
