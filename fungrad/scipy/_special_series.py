"""``fungrad.scipy.special``'s series and continued-fraction families: the exponential
integrals (``expn``, ``exp1``, ``expi``) and the hypergeometric functions (``hyp1f1``,
``hyp2f1``). Each sums in a ``while_loop`` that freezes an element once it has converged
(``lax.special.iterate_elementwise``), so vmap matches a Python loop; derivatives are
closed-form ``custom_jvp`` rules."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lax import special as lax_special
from fungrad.numpy import util
from fungrad.scipy._special_util import (
    EULER_GAMMA,
    gamma,
    inexact,
    lists_as_arrays,
    make_custom_jvp,
    rounding_eps,
)

__all__ = ["exp1", "expi", "expn", "hyp1f1", "hyp2f1"]


# -- exponential integrals -----------------------------------------------------------------------

_EXPN_MAX_ITER = 500


def _expn_cf(n, x, skip):
    """``E_n(x)`` for ``x > 1``: the continued fraction (modified Lentz)."""
    tiny = 1e-30
    eps = rounding_eps(x)
    b = x + n
    c = fnp.full_like(x, 1.0 / tiny)
    d = 1.0 / b
    h = d

    def step(st):
        i, b, c, d, h = st
        i = i + 1.0
        an = -i * (n - 1.0 + i)
        b = b + 2.0
        d = 1.0 / (an * d + b)
        c = b + an / c
        delta = c * d
        h = h * delta
        return (i, b, c, d, h), fnp.abs(delta - 1.0) <= eps

    state = (fnp.zeros_like(x), b, c, d, h)
    h = lax_special.iterate_elementwise(step, state, skip, _EXPN_MAX_ITER)[-1]
    return h * fnp.exp(-x)


def _expn_series(n, x, skip):
    """``E_n(x)`` for ``0 < x <= 1``: the power series; the ``i == n - 1`` term carries
    ``psi(n) - log x``."""
    eps = rounding_eps(x)
    nm1 = n - 1.0
    log_x = fnp.log(x)
    ans = fnp.where(nm1 != 0, 1.0 / fnp.where(nm1 != 0, nm1, 1.0), -log_x - EULER_GAMMA)
    psi = lax.digamma(n)

    def step(st):
        i, fact, ans = st
        i = i + 1.0
        fact = fact * (-x / i)
        at_pole = i == nm1
        delta = fnp.where(at_pole, fact * (psi - log_x), -fact / fnp.where(at_pole, 1.0, i - nm1))
        ans = ans + delta
        # (stop only once the i == n - 1 term is in)
        return (i, fact, ans), (fnp.abs(delta) <= fnp.abs(ans) * eps) & (i >= nm1)

    state = (fnp.zeros_like(x), fnp.ones_like(x), ans)
    return lax_special.iterate_elementwise(step, state, skip, _EXPN_MAX_ITER)[-1]


def _expn_value(n, x):
    bad = (n < 0) | (n != fnp.floor(n)) | (x < 0) | fnp.isnan(n) | fnp.isnan(x)
    zero_x = x == 0
    n0 = n == 0
    regular = ~(bad | zero_x | n0 | (x == np.inf))
    big = x > 1.0
    ns = fnp.where(regular, n, 1.0)
    x_cf = fnp.where(regular & big, x, 2.0)
    x_ser = fnp.where(regular & ~big, x, 0.5)
    cf = _expn_cf(ns, x_cf, ~(regular & big))
    series = _expn_series(ns, x_ser, ~(regular & ~big))
    out = fnp.where(big, cf, series)
    xs = fnp.where(zero_x | bad, 1.0, x)
    out = fnp.where(n0, fnp.exp(-xs) / xs, out)
    at_zero = fnp.where(n > 1, 1.0 / fnp.where(n > 1, n - 1.0, 1.0), np.inf)
    out = fnp.where(zero_x, at_zero, out)
    out = fnp.where(x == np.inf, 0.0, out)
    return fnp.where(bad, np.nan, out)


def _expn_jvp(primals, tangents):
    n, x = primals
    _, tx = tangents
    out = _expn_fn(n, x)
    # d/dx E_n(x) = -E_(n-1)(x); E_(-1)(x) = e^-x (1/x + 1/x^2)
    prev = _expn_fn(fnp.maximum(n - 1.0, 0.0), x)  # (itself differentiable again)
    xs = fnp.where(x > 0, x, 1.0)
    e_minus1 = fnp.exp(-xs) * (1.0 / xs + 1.0 / (xs * xs))
    d = -fnp.where(n == 0, e_minus1, prev)
    return out, tx * d


_expn_fn = make_custom_jvp(_expn_value, _expn_jvp)


def expn(n, x):
    """Generalized exponential integral ``E_n(x) = integral_1^inf exp(-x t) / t^n dt`` for
    integer ``n >= 0`` and ``x >= 0`` (NaN otherwise); differentiable in ``x``
    (``-E_(n-1)(x)``)."""
    n, x = lists_as_arrays(n, x)
    util.check_arraylike("expn", n, x)
    n, x = util.promote_args_inexact("expn", n, x)
    return _expn_fn(n, x)


def exp1(x):
    """Exponential integral ``E_1(x) = integral_x^inf exp(-t) / t dt`` for ``x >= 0`` (``+inf``
    at 0, NaN below)."""
    x = inexact("exp1", x)
    return _expn_fn(fnp.ones_like(x), x)


_EXPI_SWITCH = 50.0


def _expi_series(x, skip):
    """``Ei(x) = gamma + log x + sum_k x^k / (k k!)`` for ``0 < x <= 50`` (positive terms)."""
    eps = rounding_eps(x)

    def step(st):
        k, term, total = st
        k = k + 1.0
        term = term * x / k
        contrib = term / k
        total = total + contrib
        return (k, term, total), contrib <= total * eps

    state = (fnp.zeros_like(x), fnp.ones_like(x), fnp.zeros_like(x))
    total = lax_special.iterate_elementwise(step, state, skip, _EXPN_MAX_ITER)[-1]
    return EULER_GAMMA + fnp.log(x) + total


def _expi_value(x):
    pos_small = (x > 0) & (x <= _EXPI_SWITCH)
    xs = fnp.where(pos_small, x, 1.0)
    series = _expi_series(xs, ~pos_small)
    # x > 50: Ei(x) ~ e^x / x sum_k k! / x^k (forty terms: below rounding there)
    xl = fnp.where(x > _EXPI_SWITCH, x, 2 * _EXPI_SWITCH)
    w = 1.0 / xl
    acc = fnp.ones_like(xl)  # nested: 1 + (1/x)(1 + (2/x)(1 + ... (40/x)))
    for k in range(40, 0, -1):
        acc = 1.0 + (k * w) * acc
    asym = fnp.exp(xl) * w * acc
    neg = -_expn_value(fnp.ones_like(x), fnp.where(x < 0, -x, 1.0))
    out = fnp.where(x < 0, neg, fnp.where(x > _EXPI_SWITCH, asym, series))
    out = fnp.where(x == 0, -np.inf, out)
    return fnp.where(x == np.inf, np.inf, fnp.where(x == -np.inf, 0.0, out))


def _expi_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    xs = fnp.where(x == 0, 1.0, x)
    return _expi_fn(x), t * fnp.where(x == 0, np.inf, fnp.exp(xs) / xs)


_expi_fn = make_custom_jvp(_expi_value, _expi_jvp)


def expi(x):
    """Exponential integral ``Ei(x) = PV integral_-inf^x exp(t) / t dt`` (``-E_1(-x)`` for
    ``x < 0``; ``-inf`` at 0, where JAX gives NaN)."""
    return _expi_fn(inexact("expi", x))


# -- confluent hypergeometric function -----------------------------------------------------------

_HYP1F1_MAX_ITER = 2000


def _hyp1f1_series(a, b, x, skip):
    eps = rounding_eps(x)

    def step(st):
        k, term, total, proxy = st
        ak = a + k
        bk = b + k  # zero only past a polynomial order a > b, where the terms are 0 already
        ratio = x / (fnp.where(bk == 0, 1.0, bk) * (k + 1.0))
        term = term * ak * ratio
        total = total + term
        # the convergence test uses the terms with a zero factor a + k left out: past a
        # polynomial order the terms vanish but their derivatives in a do not
        proxy = proxy * fnp.where(ak == 0, 1.0, ak) * ratio
        conv = fnp.abs(proxy) <= fnp.abs(total) * eps
        return (k + 1.0, term, total, proxy), conv

    state = (fnp.zeros_like(x), fnp.ones_like(x), fnp.ones_like(x), fnp.ones_like(x))
    return lax_special.iterate_elementwise(step, state, skip, _HYP1F1_MAX_ITER)[2]


def _hyp1f1_value(a, b, x):
    b_pole = (b <= 0) & (b == fnp.floor(b))
    a_poly = (a <= 0) & (a == fnp.floor(a)) & (a > b)  # the series stops before b's pole
    nan = fnp.isnan(a) | fnp.isnan(b) | fnp.isnan(x)
    regular = ~((b_pole & ~a_poly) | nan | (a == b))
    # Kummer's transformation M(a, b, x) = e^x M(b - a, b, -x) keeps the series positive
    # for x < 0 (no cancellation), except where a is a polynomial order
    kummer = (x < 0) & ~a_poly
    aa = fnp.where(kummer, b - a, a)
    xx = fnp.where(kummer, -x, x)
    aa, bb, xx = (fnp.where(regular, v, 1.0) for v in (aa, b, xx))
    series = _hyp1f1_series(aa, bb, xx, ~regular)
    out = fnp.where(kummer, fnp.exp(x) * series, series)
    out = fnp.where(a == b, fnp.exp(x), out)
    out = fnp.where(b_pole & ~a_poly & (a != b), np.inf, out)
    return fnp.where(nan, np.nan, out)


def _hyp1f1_param_grad(i: int, a, b, x):
    from fungrad.transforms.autodiff import jvp

    def f(p):
        return _hyp1f1_value(p, b, x) if i == 0 else _hyp1f1_value(a, p, x)

    return jvp(f, ((a, b)[i],), (fnp.ones_like(x),))[1]


def _hyp1f1_jvp(primals, tangents):
    a, b, x = primals
    ta, tb, tx = tangents
    out = _hyp1f1_fn(a, b, x)
    # d/dx M(a, b, x) = a / b M(a + 1, b + 1, x); in a, b: forward mode through the series,
    # as a primal coefficient
    dx = a / b * _hyp1f1_fn(a + 1.0, b + 1.0, x)
    t = tx * dx + ta * _hyp1f1_param_grad(0, a, b, x) + tb * _hyp1f1_param_grad(1, a, b, x)
    return out, t


_hyp1f1_fn = make_custom_jvp(_hyp1f1_value, _hyp1f1_jvp)


def hyp1f1(a, b, x):
    """Kummer's confluent hypergeometric function ``M(a, b, x) = sum_k (a)_k / (b)_k x^k / k!``
    (the series, with Kummer's transformation for ``x < 0``); ``+inf`` where ``b`` is a
    non-positive integer (unless ``a`` is one closer to 0), ``exp(x)`` where ``a == b``."""
    a, b, x = lists_as_arrays(a, b, x)
    util.check_arraylike("hyp1f1", a, b, x)
    a, b, x = util.promote_args_inexact("hyp1f1", a, b, x)
    a, b, x = fnp.broadcast_arrays(a, b, x)
    return _hyp1f1_fn(a, b, x)


# -- Gauss hypergeometric function ---------------------------------------------------------------

_HYP2F1_MAX_ITER = 20000


def _hyp2f1_series(a, b, c, x, skip):
    eps = rounding_eps(x)

    def step(st):
        k, term, total, proxy = st
        ak, bk, ck = a + k, b + k, c + k
        ratio = x / (fnp.where(ck == 0, 1.0, ck) * (k + 1.0))
        term = term * ak * bk * ratio
        total = total + term
        # (as in hyp1f1: zero factors a + k, b + k are left out of the convergence test)
        proxy = proxy * fnp.where(ak == 0, 1.0, ak) * fnp.where(bk == 0, 1.0, bk) * ratio
        return (k + 1.0, term, total, proxy), fnp.abs(proxy) <= fnp.abs(total) * eps

    one = fnp.ones_like(x)
    state = (fnp.zeros_like(x), one, one, one)
    return lax_special.iterate_elementwise(step, state, skip, _HYP2F1_MAX_ITER)[2]


def _is_nonpos_int(v):
    return (v <= 0) & (v == fnp.floor(v))


def _hyp2f1_value(a, b, c, x):
    nan = fnp.isnan(a) | fnp.isnan(b) | fnp.isnan(c) | fnp.isnan(x)
    # a polynomial (a or b a non-positive integer above c) survives a pole of c
    poly = (_is_nonpos_int(a) & (a > c)) | (_is_nonpos_int(b) & (b > c))
    c_pole = _is_nonpos_int(c) & ~poly
    at_one = x == 1.0
    regular = ~(nan | c_pole | at_one | (x > 1.0) | (x == -np.inf))
    # x < 0: Pfaff's transformation F(a, b; c; x) = (1 - x)^-a F(a, c - b; c; x / (x - 1))
    # maps to [0, 1), where the series converges (slowly as the argument nears 1)
    pfaff = (x < 0) & ~poly
    bb = fnp.where(pfaff, c - b, b)
    xx = fnp.where(pfaff, x / (x - 1.0), x)
    aa, bb, cc, xx = (fnp.where(regular, val, 0.5) for val in (a, bb, c, xx))
    series = _hyp2f1_series(aa, bb, cc, xx, ~regular)
    xs = fnp.where(regular, x, 0.0)
    out = fnp.where(pfaff, fnp.exp(-a * fnp.log1p(-xs)) * series, series)
    # x == 1: Gauss's theorem where c - a - b > 0, else +inf
    s = c - a - b
    ss_ = fnp.where(s > 0, s, 1.0)
    gauss = gamma(c) * gamma(ss_) / (gamma(c - a) * gamma(c - b))
    out = fnp.where(at_one, fnp.where(s > 0, gauss, np.inf), out)
    out = fnp.where(c_pole, np.inf, out)
    return fnp.where(nan | (x > 1.0) | (x == -np.inf), np.nan, out)


def _hyp2f1_jvp(primals, tangents):
    from fungrad.transforms.autodiff import jvp

    a, b, c, x = primals
    out = _hyp2f1_fn(a, b, c, x)
    # d/dx F(a, b; c; x) = a b / c F(a + 1, b + 1; c + 1; x); the parameters: forward mode
    # through the series, each with a unit tangent (a primal coefficient)
    total = tangents[3] * (a * b / c) * _hyp2f1_fn(a + 1.0, b + 1.0, c + 1.0, x)
    params = [a, b, c]
    for i in range(3):

        def f(p, i=i):
            args = list(params)
            args[i] = p
            return _hyp2f1_value(*args, x)

        total = total + tangents[i] * jvp(f, (params[i],), (fnp.ones_like(x),))[1]
    return out, total


_hyp2f1_fn = make_custom_jvp(_hyp2f1_value, _hyp2f1_jvp)


def hyp2f1(a, b, c, x):
    """Gauss' hypergeometric function ``2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x^k / k!``
    for real ``x <= 1``: the series on ``[0, 1)``, Pfaff's transformation for ``x < 0``,
    Gauss' theorem at ``x = 1`` (``+inf`` where ``c - a - b <= 0``); NaN for ``x > 1``,
    ``+inf`` at the poles ``c = 0, -1, ...`` (unless the series stops before). The series
    needs many terms as its argument nears 1 (up to 20000)."""
    a, b, c, x = lists_as_arrays(a, b, c, x)
    util.check_arraylike("hyp2f1", a, b, c, x)
    a, b, c, x = fnp.broadcast_arrays(*util.promote_args_inexact("hyp2f1", a, b, c, x))
    return _hyp2f1_fn(a, b, c, x)
