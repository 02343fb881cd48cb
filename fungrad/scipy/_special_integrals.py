"""``fungrad.scipy.special``'s integrals and number families: Bernoulli numbers and Spence's
dilogarithm, Dawson's integral, the Fresnel and sine/cosine integrals (series near 0, complex
continued fractions on (re, im) pairs beyond), Owen's T function (Gauss-Legendre quadrature)
and the integer-order Bessel functions ``J_n`` (Miller's recurrence)."""

from __future__ import annotations

import math

import numpy as np

import fungrad.numpy as fnp
from fungrad import dtypes
from fungrad.lax import special as lax_special
from fungrad.numpy import util
from fungrad.scipy._special_util import (
    EULER_GAMMA,
    EXP_SQUARE_GRID,
    concrete_int,
    exp_neg_square,
    inexact,
    lists_as_arrays,
    make_custom_jvp,
    ndtr_unchecked,
    normal_inexact,
    rounding_eps,
)

__all__ = ["bernoulli", "bessel_jn", "dawsn", "fresnel", "owens_t", "sici", "spence"]

_MAX_ITER = 500


# -- Bernoulli numbers and the dilogarithm -----------------------------------------------------


def _bernoulli_numbers(n: int) -> list:
    """``B_0 .. B_n`` as exact fractions (Akiyama-Tanigawa), with ``B_1 = -1/2``."""
    from fractions import Fraction

    out, row = [], []
    for m in range(n + 1):
        row.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
        out.append(row[0])
    if n >= 1:
        out[1] = -out[1]  # the algorithm gives B_1 = +1/2
    return out


def bernoulli(n):
    """The Bernoulli numbers ``B_0 .. B_n`` (``B_1 = -1/2``) as an array of length ``n + 1``;
    ``n`` must be a concrete non-negative integer."""
    n = concrete_int("bernoulli", "n", n, 0)
    values = [float(b) for b in _bernoulli_numbers(n)]
    return fnp.array(values, dtype=dtypes.canonicalize_dtype(np.float64))


# Li2(z) = sum_n B_n u^(n+1) / (n+1)!, u = -log(1 - z): coefficients B_n / (n+1)!
_LI2_COEFFS = tuple(float(b) / math.factorial(k + 1) for k, b in enumerate(_bernoulli_numbers(30)))
_PI2_6 = math.pi**2 / 6


def _li2_small(z):
    """The dilogarithm for ``|z| <= 1/2`` (``|u| <= log 2``: the series is far inside its
    radius ``2 pi``)."""
    u = -fnp.log1p(-z)
    acc = fnp.full_like(u, _LI2_COEFFS[-1])
    for c in _LI2_COEFFS[-2::-1]:
        acc = acc * u + c
    return acc * u


def spence(x):
    """Spence's function ``integral_1^x log(t) / (1 - t) dt = Li2(1 - x)`` for ``x >= 0``
    (NaN below). The dilogarithm identities map every ``x`` to a series argument of modulus
    at most 1/2."""
    [x] = lists_as_arrays(x)
    x = inexact("spence", x)
    half = 0.5
    # 0 < x < 1/2: Li2(1 - x) = pi^2/6 - log(x) log(1 - x) - Li2(x)
    xa = fnp.where((x > 0) & (x < half), x, 0.25)
    low = _PI2_6 - fnp.log(xa) * fnp.log1p(-xa) - _li2_small(xa)
    # 1/2 <= x <= 3/2: directly
    xb = fnp.where((x >= half) & (x <= 1.5), x, 1.0)
    mid = _li2_small(1.0 - xb)
    # 3/2 < x < 2: Li2(z) = -Li2(z / (z - 1)) - log(1 - z)^2 / 2 with z = 1 - x
    xc = fnp.where((x > 1.5) & (x < 2.0), x, 1.75)
    lc = fnp.log(xc)
    upper = -_li2_small((xc - 1.0) / xc) - 0.5 * lc * lc
    # x >= 2: the inversion z -> 1/z followed by the reflection, ending at Li2(1/x)
    xd = fnp.where((x >= 2.0) & fnp.isfinite(x), x, 4.0)
    ld = fnp.log(xd)
    far = -_PI2_6 - fnp.log1p(-1.0 / xd) * ld + _li2_small(1.0 / xd) - 0.5 * ld * ld
    out = fnp.where(x < half, low, fnp.where(x <= 1.5, mid, fnp.where(x < 2.0, upper, far)))
    out = fnp.where(x == 0, _PI2_6, out)
    out = fnp.where(x == np.inf, -np.inf, out)
    return fnp.where((x < 0) | fnp.isnan(x), np.nan, out)


# -- Dawson, Fresnel and sine/cosine integrals -------------------------------------------------

_DAWSN_SWITCH = 6.0


def _dawsn_value(x):
    ax = fnp.abs(x)
    small = ax < _DAWSN_SWITCH
    xs = fnp.where(small, ax, 1.0)
    q = xs * xs
    eps = rounding_eps(x)

    # F(x) = x exp(-x^2) sum_k x^(2k) / (k! (2k + 1)) (Kummer's transformation of
    # x 1F1(1; 3/2; -x^2): positive terms, so no cancellation)
    def step(st):
        k, term, total = st
        k = k + 1.0
        term = term * q / k
        contrib = term / (2.0 * k + 1.0)
        total = total + contrib
        return (k, term, total), contrib <= total * eps

    state = (fnp.zeros_like(x), fnp.ones_like(x), fnp.ones_like(x))
    total = lax_special.iterate_elementwise(
        state=state, step=step, done=~small, max_iter=_MAX_ITER
    )[-1]
    series = xs * exp_neg_square(xs, EXP_SQUARE_GRID[x.dtype]) * total
    # |x| >= 6: F(x) ~ 1/(2x) sum_k (2k-1)!! / (2x^2)^k, nested so no coefficient overflows
    xl = fnp.where(small, 2 * _DAWSN_SWITCH, ax)
    w = 1.0 / (2.0 * xl * xl)
    acc = fnp.ones_like(xl)
    for k in range(36, 0, -1):
        acc = 1.0 + ((2 * k - 1) * w) * acc
    asym = acc / (2.0 * xl)
    return fnp.sign(x) * fnp.where(small, series, asym)


def _dawsn_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    f = _dawsn_fn(x)
    return f, t * (1.0 - 2.0 * x * f)


_dawsn_fn = make_custom_jvp(_dawsn_value, _dawsn_jvp)


def dawsn(x):
    """Dawson's integral ``F(x) = exp(-x^2) integral_0^x exp(t^2) dt``; its derivative is
    ``1 - 2 x F(x)``."""
    x = normal_inexact("dawsn", x)
    return _dawsn_fn(x)


# complex arithmetic on (real, imaginary) pairs, for the continued fractions below
def _cmul(a, b):
    return a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]


def _cinv(a):
    den = a[0] * a[0] + a[1] * a[1]
    return a[0] / den, -a[1] / den


def _complex_lentz(b0, step_b, coef, x, skip):
    """Modified Lentz evaluation of ``1 / (b0 + a1 / (b1 + a2 / (b2 + ...)))`` with complex
    ``b_i = b0 + i * step_b`` and real ``a_i = coef(i)``, on (re, im) pairs."""
    eps = rounding_eps(x)
    tiny = 1e-30
    d = _cinv(b0)
    c = (fnp.full_like(x, 1.0 / tiny), fnp.zeros_like(x))

    def step(st):
        i, br, bi, cr, ci, dr, di, hr, hi = st
        i = i + 1.0
        a = coef(i)
        br = br + step_b
        dr, di = _cinv((a * dr + br, a * di + bi))
        cr, ci = (lambda inv: (br + a * inv[0], bi + a * inv[1]))(_cinv((cr, ci)))
        delr, deli = _cmul((cr, ci), (dr, di))
        hr, hi = _cmul((hr, hi), (delr, deli))
        conv = fnp.abs(delr - 1.0) + fnp.abs(deli) <= eps
        return (i, br, bi, cr, ci, dr, di, hr, hi), conv

    state = (fnp.zeros_like(x), b0[0], b0[1], c[0], c[1], d[0], d[1], d[0], d[1])
    out = lax_special.iterate_elementwise(step, state, skip, _MAX_ITER)
    return out[7], out[8]


_FRESNEL_SWITCH = 1.5


def _fresnel_value(x):
    ax = fnp.abs(x)
    small = ax <= _FRESNEL_SWITCH
    # series: C = x sum_k (-1)^k t^(2k) / ((2k)! (4k+1)), S = x sum_k (-1)^k t^(2k+1) /
    # ((2k+1)! (4k+3)), t = pi x^2 / 2 <= 3.6 (36 terms: below rounding)
    xs = fnp.where(small, ax, 1.0)
    t = 0.5 * np.pi * xs * xs
    term = fnp.ones_like(xs)
    c_sum, s_sum = fnp.ones_like(xs), fnp.zeros_like(xs)
    for n in range(1, 36):
        term = term * t / n
        sign = 1.0 if (n // 2) % 2 == 0 else -1.0
        if n % 2:
            s_sum = s_sum + sign * term / (2 * n + 1)
        else:
            c_sum = c_sum + sign * term / (2 * n + 1)
    c_small, s_small = xs * c_sum, xs * s_sum
    # |x| > 1.5: the continued fraction for erfc of a complex argument (as in Numerical
    # Recipes' frenel), with pi x^2 / 2 reduced modulo 2 pi exactly (x^2 split into hi^2 + rest)
    xl = fnp.where(small | ~fnp.isfinite(ax), 2.0, ax)
    pix2 = np.pi * xl * xl
    hr, hi_ = _complex_lentz(
        (fnp.ones_like(xl), -pix2), 4.0, lambda i: -(2.0 * i - 1.0) * (2.0 * i), xl, small
    )
    hr, hi_ = _cmul((hr, hi_), (xl, -xl))
    grid = EXP_SQUARE_GRID[x.dtype]
    xh = fnp.round(xl * grid) / grid
    xlo = xl - xh
    sq_hi = xh * xh
    red = sq_hi - 4.0 * fnp.floor(sq_hi / 4.0) + xlo * (2.0 * xh + xlo)  # x^2 mod 4
    ang = 0.5 * np.pi * red
    er, ei = _cmul((fnp.cos(ang), fnp.sin(ang)), (hr, hi_))
    one_minus = (1.0 - er, -ei)
    c_big = 0.5 * one_minus[0] - 0.5 * one_minus[1]
    s_big = 0.5 * one_minus[0] + 0.5 * one_minus[1]
    c_big = fnp.where(ax == np.inf, 0.5, c_big)
    s_big = fnp.where(ax == np.inf, 0.5, s_big)
    sign = fnp.sign(x)
    s = sign * fnp.where(small, s_small, s_big)
    c = sign * fnp.where(small, c_small, c_big)
    return s, c


def _fresnel_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    s, c = _fresnel_fn(x)
    ang = 0.5 * np.pi * x * x
    return (s, c), (t * fnp.sin(ang), t * fnp.cos(ang))


_fresnel_fn = make_custom_jvp(_fresnel_value, _fresnel_jvp)


def fresnel(x):
    """Fresnel integrals ``(S(x), C(x))``: ``S = integral_0^x sin(pi t^2 / 2) dt`` and
    ``C = integral_0^x cos(pi t^2 / 2) dt`` (both ``+-1/2`` at ``+-inf``)."""
    x = normal_inexact("fresnel", x)
    return _fresnel_fn(x)


_SICI_SWITCH = 2.0


def _sici_value(x):
    ax = fnp.abs(x)
    small = ax <= _SICI_SWITCH
    # series: Si = sum_k (-1)^k x^(2k+1) / ((2k+1) (2k+1)!),
    # Ci = gamma + log x + sum_(k>=1) (-1)^k x^(2k) / (2k (2k)!)   (|x| <= 2: 30 terms)
    xs = fnp.where(small & (ax > 0), ax, 1.0)
    term = fnp.ones_like(xs)
    si_sum, ci_sum = fnp.zeros_like(xs), fnp.zeros_like(xs)
    for n in range(1, 31):
        term = term * xs / n
        sign = 1.0 if ((n - 1) // 2 if n % 2 else n // 2) % 2 == 0 else -1.0
        if n % 2:
            si_sum = si_sum + sign * term / n
        else:
            ci_sum = ci_sum + sign * term / n
    ci_small = EULER_GAMMA + fnp.log(xs) + ci_sum
    # |x| > 2: Ci + i (Si - pi/2) = -E1(i x) by its continued fraction
    xl = fnp.where(small | ~fnp.isfinite(ax), 4.0, ax)
    hr, hi_ = _complex_lentz((fnp.ones_like(xl), xl), 2.0, lambda i: -(i * i), xl, small)
    hr, hi_ = _cmul((fnp.cos(xl), -fnp.sin(xl)), (hr, hi_))
    si = fnp.where(small, si_sum, 0.5 * np.pi + hi_)
    ci = fnp.where(small, ci_small, -hr)
    si = fnp.where(ax == np.inf, 0.5 * np.pi, si)
    ci = fnp.where(ax == np.inf, 0.0, fnp.where(ax == 0, -np.inf, ci))
    ci = fnp.where((x == -np.inf) | fnp.isnan(x), np.nan, ci)
    return fnp.sign(x) * si, ci


def _sici_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    si, ci = _sici_fn(x)
    xs = fnp.where(x == 0, 1.0, x)
    sinc = fnp.where(x == 0, 1.0, fnp.sin(xs) / xs)
    return (si, ci), (t * sinc, t * fnp.where(x == 0, np.inf, fnp.cos(xs) / xs))


_sici_fn = make_custom_jvp(_sici_value, _sici_jvp)


def sici(x):
    """Sine and cosine integrals ``(Si(x), Ci(x))``: ``Si = integral_0^x sin(t)/t dt``,
    ``Ci = gamma + log|x| + integral_0^x (cos(t) - 1)/t dt`` (the real part for ``x < 0``,
    as in JAX; ``-inf`` at 0)."""
    x = normal_inexact("sici", x)
    return _sici_fn(x)


# -- Bessel functions of the first kind, integer order -------------------------------------------


def bessel_jn(z, *, v: int, n_iter: int = 50):
    """Bessel functions of the first kind ``J_0(z) .. J_v(z)`` for real ``z``, stacked: shape
    ``(v + 1, *z.shape)``.

    Miller's algorithm: the recurrence ``J_(k-1) = (2k / z) J_k - J_(k+1)`` run downward from
    order ``n_iter`` (static; larger ``n_iter`` is needed for larger ``|z|``, as in JAX:
    roughly ``n_iter > |z| + 25``), normalised by ``J_0 + 2 sum_k J_2k = 1``; the running
    values are rescaled whenever they grow large, so float32 does not overflow.
    """
    v = util.concrete_or_error(v, "bessel_jn's order v (a Python int)")
    n_iter = util.concrete_or_error(n_iter, "bessel_jn's n_iter (a Python int)")
    for name, val in (("v", v), ("n_iter", n_iter)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
            raise TypeError(f"bessel_jn: {name} must be an int, got {val!r}")
    v, n_iter = int(v), int(n_iter)
    if v < 0:
        raise ValueError(f"bessel_jn: the order v must be non-negative, got {v}")
    if n_iter < 1:
        raise ValueError(f"bessel_jn: n_iter must be positive, got {n_iter}")
    z = normal_inexact("bessel_jn", z)
    start = max(n_iter, v + 1)
    zero = z == 0
    zs = fnp.where(zero, 1.0, z)
    big = 1e10 if z.dtype == dtypes.float32 else 1e100
    f_next = fnp.zeros_like(zs)  # f_(k+1)
    f_cur = fnp.full_like(zs, 1e-30 if z.dtype == dtypes.float32 else 1e-200)  # f_k
    norm = fnp.where(start % 2 == 0, 2.0, 0.0) * f_cur
    kept = {start: f_cur} if start <= v else {}
    for k in range(start, 0, -1):
        f_prev = (2.0 * k) / zs * f_cur - f_next  # f_(k-1)
        scale = fnp.where(fnp.abs(f_prev) > big, 1.0 / big, 1.0)
        f_next, f_cur = f_cur * scale, f_prev * scale
        norm = norm * scale
        kept = {order: val * scale for order, val in kept.items()}
        if k - 1 <= v:
            kept[k - 1] = f_cur
        if (k - 1) % 2 == 0:
            norm = norm + (2.0 if k - 1 > 0 else 1.0) * f_cur
    outs = []
    for order in range(v + 1):
        j = kept[order] / norm
        outs.append(fnp.where(zero, 1.0 if order == 0 else 0.0, j))
    return fnp.stack(outs)


# -- Owen's T function -------------------------------------------------------------------------

_OWENS_NODES, _OWENS_WEIGHTS = np.polynomial.legendre.leggauss(64)
_OWENS_CUT = 12.0  # exp(-h^2 x^2 / 2) < exp(-72) past x = 12 / h


def _owens_t_small_a(h, a):
    """``T(h, a)`` for ``h >= 0`` and ``0 <= a <= 1``: 64-point Gauss-Legendre quadrature of
    ``exp(-h^2 (1 + x^2) / 2) / (1 + x^2) / (2 pi)`` over ``[0, min(a, 12 / h)]`` (beyond it
    the integrand is below rounding, and the cut keeps the Gaussian resolved for large h)."""
    upper = fnp.minimum(a, _OWENS_CUT / fnp.maximum(h, 1e-30))
    half = 0.5 * upper
    hh = h * h
    total = fnp.zeros_like(h)
    for t, w in zip(_OWENS_NODES, _OWENS_WEIGHTS):
        x = half * (1.0 + float(t))
        x2 = 1.0 + x * x
        total = total + float(w) * fnp.exp(-0.5 * hh * x2) / x2
    return total * half / (2.0 * np.pi)


def owens_t(h, a):
    """Owen's T function ``T(h, a) = 1/(2 pi) integral_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2)
    dx``: quadrature for ``|a| <= 1`` and, above, Owen's identity
    ``T(h, a) = (Phi(h) Q(ah) + Phi(ah) Q(h)) / 2 - T(ah, 1/a)`` (``Q = 1 - Phi``), with
    ``T(-h, a) = T(h, a)`` and ``T(h, -a) = -T(h, a)``. Differentiable in both arguments."""
    util.check_arraylike("owens_t", h, a)
    h, a = util.promote_args_inexact("owens_t", h, a)
    h, a = fnp.broadcast_arrays(h, a)
    if h.dtype not in (dtypes.float32, dtypes.float64):
        raise TypeError(f"owens_t: dtype {h.dtype.name} is not supported; use float32 or float64")
    ah_, aa = fnp.abs(h), fnp.abs(a)
    small = aa <= 1.0
    t_small = _owens_t_small_a(ah_, fnp.where(small, aa, 0.0))
    a_big = fnp.where(small, 2.0, aa)
    ha = ah_ * a_big
    inv_a = 1.0 / a_big
    phi = ndtr_unchecked
    front = 0.5 * (phi(ah_) * phi(-ha) + phi(ha) * phi(-ah_))
    t_big = front - _owens_t_small_a(fnp.where(fnp.isfinite(ha), ha, 0.0), inv_a)
    t_big = fnp.where(fnp.isinf(ha), front, t_big)
    out = fnp.sign(a) * fnp.where(small, t_small, t_big)
    return fnp.where(fnp.isnan(h) | fnp.isnan(a), np.nan, out)
