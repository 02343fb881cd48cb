"""``fungrad.scipy.special``: special functions with jax.scipy.special's names and semantics.

Written on fungrad.lax / fungrad.numpy only. Integer and bool inputs promote to the default
float dtype. This module is the one home of :func:`logsumexp` (``fungrad.nn`` re-exports it).
The normal-distribution functions follow JAX's (Cephes-derived) algorithms: ``ndtr`` switches
between ``erf`` and ``erfc`` to keep relative accuracy in both tails, ``ndtri`` is a piecewise
rational approximation, and ``log_ndtr`` uses an asymptotic series for very negative ``x`` so
it stays finite where ``log(ndtr(x))`` would underflow to ``-inf``.

The incomplete gamma and beta functions, ``i0e``/``i1e`` and the Hurwitz ``zeta`` are the
``fungrad.lax`` functions of the same family (``lax.igamma``, ...). The series families live
in ``_special_series`` and ``_special_integrals`` and are re-exported here; the iterative ones
(``expn``/``exp1``/``expi``, ``hyp1f1``, ``hyp2f1``, ``dawsn``, ``fresnel``, ``sici``) sum
their series or continued fractions in a ``while_loop`` that freezes each element once it has
converged (``lax.special.iterate_elementwise``), so vmap matches a Python loop; their
derivatives are closed-form ``custom_jvp`` rules (a while_loop has no reverse mode). Functions
JAX has that are absent: ``wofz`` and ``sph_harm_y`` (complex results).
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import core, dtypes, lax
from fungrad.lax import special as lax_special
from fungrad.numpy import util
from fungrad.scipy._special_integrals import (  # noqa: F401  (re-exported)
    bernoulli,
    bessel_jn,
    dawsn,
    fresnel,
    owens_t,
    sici,
    spence,
)
from fungrad.scipy._special_series import exp1, expi, expn, hyp1f1, hyp2f1  # noqa: F401
from fungrad.scipy._special_util import (  # noqa: F401  (gammasgn, gamma re-exported)
    EXP_SQUARE_GRID,
    concrete_int,
    gamma,
    gammasgn,
    inexact,
    lists_as_arrays,
    make_custom_jvp,
    ndtr_unchecked,
    normal_inexact,
)

__all__ = [
    "bernoulli",
    "bessel_jn",
    "beta",
    "betainc",
    "betaln",
    "boxcox",
    "boxcox1p",
    "comb",
    "dawsn",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp1",
    "expi",
    "expit",
    "expn",
    "factorial",
    "fresnel",
    "gamma",
    "gammainc",
    "gammaincc",
    "gammaln",
    "gammasgn",
    "hyp1f1",
    "hyp2f1",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "kl_div",
    "log_ndtr",
    "log_softmax",
    "loggamma",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "owens_t",
    "poch",
    "polygamma",
    "rel_entr",
    "sici",
    "softmax",
    "spence",
    "xlog1py",
    "xlogy",
    "zeta",
]


# -- logsumexp -------------------------------------------------------------------------------


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False, where=None):
    """``log(sum(b * exp(a), axis))``, computed stably.

    The maximum over ``axis`` (replaced by 0 where it is not finite, and held constant under
    differentiation) is subtracted before exponentiating, so large values do not overflow,
    a slice that is all ``-inf`` gives ``-inf`` (not NaN) and a slice containing ``+inf``
    gives ``+inf``.

    Args:
        a: input array.
        axis: int, tuple of ints or None (all axes) to reduce over.
        b: optional scale factors, broadcastable against ``a``; where ``b == 0`` the term is
            dropped even if ``a`` is infinite.
        keepdims: keep the reduced axes as size-1 dimensions.
        return_sign: return ``(log|sum|, sign(sum))`` instead of NaN for negative sums.
        where: optional boolean mask of the elements to include.

    Returns:
        The reduction, or the pair ``(result, sign)`` if ``return_sign``.

    Example:
        >>> logsumexp(fnp.array([1000., 1000.]))   # 1000.6931
    """
    util.check_arraylike("logsumexp", a)
    for name, v in (("b", b), ("where", where)):
        if v is not None:
            util.check_arraylike("logsumexp", v, names=[name])
    if where is not None:
        a = fnp.where(where, a, 0)  # masked-out entries may hold NaN; keep them out entirely
    if b is not None:
        a, b = util.promote_args_inexact("logsumexp", a, b)
        a = fnp.where(b != 0, a, -np.inf)
    else:
        a = inexact("logsumexp", a)
    dims = util.canonicalize_axes(axis, a.ndim, "logsumexp")
    amax = fnp.max(a, dims, where=where, initial=-np.inf, keepdims=True)
    amax = lax.stop_gradient(fnp.where(fnp.isfinite(amax), amax, 0.0))
    exp_a = fnp.exp(a - amax)
    if b is not None:
        exp_a = exp_a * b
    sumexp = fnp.sum(exp_a, dims, where=where, keepdims=True)
    sign = fnp.sign(sumexp)
    out = fnp.log(fnp.abs(sumexp)) + amax
    if not keepdims:
        out, sign = fnp.squeeze(out, dims), fnp.squeeze(sign, dims)
    if return_sign:
        return out, sign
    if b is not None:
        out = fnp.where(sign < 0, np.nan, out)
    return out


# -- error function and logistic ------------------------------------------------------------


def erf(x):
    """Error function ``2/sqrt(pi) * integral_0^x exp(-t**2) dt``."""
    return lax.erf(inexact("erf", x))


def erfc(x):
    """Complementary error function ``1 - erf(x)``, accurate for large ``x``."""
    return lax.erfc(inexact("erfc", x))


def erfinv(x):
    """Inverse error function on ``[-1, 1]`` (``+-inf`` at ``+-1``, NaN outside)."""
    return lax.erf_inv(inexact("erfinv", x))


def expit(x):
    """Logistic sigmoid ``1 / (1 + exp(-x))``."""
    return lax.logistic(inexact("expit", x))


def logit(x):
    """Inverse of :func:`expit`: ``log(x / (1 - x))``."""
    x = inexact("logit", x)
    return lax.log(lax.div(x, lax.sub(1.0, x)))


# -- gamma family ----------------------------------------------------------------------------


def gammaln(x):
    """``log|Gamma(x)|`` (``lax.lgamma``); ``+inf`` at the poles ``0, -1, -2, ...``."""
    return lax.lgamma(inexact("gammaln", x))


def loggamma(x):
    """Principal branch of ``log Gamma(x)`` for real ``x``: ``gammaln(x)`` for ``x > 0``, NaN
    for ``x <= 0`` (where the real-valued result would need a complex logarithm)."""
    x = inexact("loggamma", x)
    return fnp.where(x > 0, lax.lgamma(fnp.where(x > 0, x, 1.0)), np.nan)


def factorial(n, exact: bool = False):
    """``n! = Gamma(n + 1)`` elementwise (0 for ``n < 0``), as a float.

    ``exact=True`` (arbitrary-precision integers) is not supported, as in JAX.
    """
    if exact:
        raise ValueError(
            "factorial: exact=True (arbitrary-precision integer results) is not "
            "supported; use exact=False for the float Gamma(n + 1)"
        )
    n = inexact("factorial", n)
    return fnp.where(n < 0, 0.0, gamma(fnp.where(n < 0, 0.0, n) + 1.0)).astype(n.dtype)


def comb(N, k, *, repetition: bool = False):  # noqa: N803  (scipy's and JAX's name)
    """Binomial coefficient ``N choose k`` as a float, from ``gammaln`` (0 unless
    ``0 <= k <= N``); with ``repetition``, ``(N + k - 1) choose k``."""
    util.check_arraylike("comb", N, k)
    N, k = util.promote_args_inexact("comb", N, k)  # noqa: N806
    if repetition:
        N = N + k - 1.0  # noqa: N806
    ok = (k >= 0) & (k <= N) & (N >= 0)
    kk, nn = fnp.where(ok, k, 0.0), fnp.where(ok, N, 0.0)
    val = fnp.exp(lax.lgamma(nn + 1.0) - lax.lgamma(kk + 1.0) - lax.lgamma(nn - kk + 1.0))
    return fnp.where(ok, val, 0.0).astype(N.dtype)


def poch(z, m):
    """Pochhammer symbol (rising factorial) ``(z)_m = Gamma(z + m) / Gamma(z)``; 1 at
    ``m == 0``."""
    util.check_arraylike("poch", z, m)
    z, m = util.promote_args_inexact("poch", z, m)
    val = (gammasgn(z + m) * gammasgn(z)) * fnp.exp(lax.lgamma(z + m) - lax.lgamma(z))
    return fnp.where(m == 0, 1.0, val).astype(z.dtype)


def multigammaln(a, d):
    """Log of the multivariate gamma function of dimension ``d`` (a concrete positive int):
    ``d (d - 1) / 4 log(pi) + sum_{j=0}^{d-1} gammaln(a - j / 2)``."""
    util.check_arraylike("multigammaln", a)
    d = concrete_int("multigammaln", "the dimension d", d, 1)
    a = inexact("multigammaln", a)
    out = fnp.full_like(a, d * (d - 1) / 4.0 * float(np.log(np.pi)))
    for j in range(d):
        out = out + lax.lgamma(a - j / 2.0)
    return out


def digamma(x):
    """Digamma function ``d/dx log Gamma(x)`` (``lax.digamma``)."""
    return lax.digamma(inexact("digamma", x))


def polygamma(n, x):
    """``psi^(n)(x)``, the ``n``-th derivative of :func:`digamma` (``lax.polygamma``).

    Args:
        n: integer order(s), an int or an integer array broadcasting against ``x``. Negative
            orders give NaN, as in JAX. Concrete orders each use their own formula; a traced
            ``n`` (under jit or vmap) uses lax.polygamma's formula for array orders.
        x: real argument(s); integers promote to the default float.

    Returns:
        ``psi^(n)(x)`` in the dtype JAX promotes ``n`` and ``x`` to.

    Example:
        >>> polygamma(1, 1.0)   # trigamma(1) = pi^2 / 6 = 1.6449341
    """
    util.check_arraylike("polygamma", n, x)
    n_dtype = dtypes.result_type(n)
    if not dtypes.is_int(n_dtype):
        raise ValueError(
            f"polygamma: the order n must have an integer dtype, got "
            f"{n_dtype.name} (pass an int or an integer array)"
        )
    order_of, x = fnp.broadcast_arrays(*util.promote_args_inexact("polygamma", n, x))
    if isinstance(n, core.Tracer) and n.to_concrete_value() is None:
        # a traced order (jit, vmap): lax.polygamma's formula for array orders
        return lax.polygamma(order_of, x)
    orders = np.asarray(util.concrete_or_error(n, "polygamma's order n"))
    out = lax.full_like(x, np.nan)
    for m in np.unique(orders):
        if m >= 0:
            out = lax.select(
                lax.eq(order_of, lax.full_like(x, float(m))), lax.polygamma(int(m), x), out
            )
    return lax.convert_element_type(out, x.dtype, x.weak_type)


# -- incomplete gamma and beta ---------------------------------------------------------------


def gammainc(a, x):
    """Regularized lower incomplete gamma ``P(a, x)`` (``lax.igamma``); differentiable in both
    arguments."""
    util.check_arraylike("gammainc", a, x)
    a, x = util.promote_args_inexact("gammainc", a, x)
    return lax_special.igamma(a, x)


def gammaincc(a, x):
    """Regularized upper incomplete gamma ``Q(a, x) = 1 - P(a, x)`` (``lax.igammac``)."""
    util.check_arraylike("gammaincc", a, x)
    a, x = util.promote_args_inexact("gammaincc", a, x)
    return lax_special.igammac(a, x)


def betaln(a, b):
    """``log |B(a, b)|``; for ``a, b > 0`` without the cancellation of the lgamma formula when
    an argument is large (Stirling's series)."""
    util.check_arraylike("betaln", a, b)
    a, b = util.promote_args_inexact("betaln", a, b)
    return lax_special.betaln(a, b)


def beta(a, b):
    """The beta function ``B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b)``."""
    util.check_arraylike("beta", a, b)
    a, b = util.promote_args_inexact("beta", a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * fnp.exp(lax_special.betaln(a, b))


def betainc(a, b, x):
    """Regularized incomplete beta ``I_x(a, b)`` (``lax.regularized_incomplete_beta``);
    differentiable in ``x`` (not in ``a``, ``b``, as in JAX)."""
    util.check_arraylike("betainc", a, b, x)
    a, b, x = util.promote_args_inexact("betainc", a, b, x)
    return lax_special.regularized_incomplete_beta(a, b, x)


# -- x log y ---------------------------------------------------------------------------------


def _xlogy_value(x, y):
    x_ok = (x != 0) | fnp.isnan(y)
    return fnp.where(x_ok, x * fnp.log(y), fnp.zeros_like(x))


def _xlogy_jvp(primals, tangents):
    # JAX's rule: d/dx = log(y) and d/dy = x / y everywhere, also at x == 0 where the value is
    # defined as 0 (the where's derivative would be 0 there: grad(xlogy)(0., 2.) is log 2)
    (x, y), (dx, dy) = primals, tangents
    return _xlogy(x, y), dx * fnp.log(y) + dy * x / y


def _xlog1py_value(x, y):
    x_ok = (x != 0) | fnp.isnan(y)
    return fnp.where(x_ok, x * fnp.log1p(y), fnp.zeros_like(x))


def _xlog1py_jvp(primals, tangents):
    (x, y), (dx, dy) = primals, tangents
    return _xlog1py(x, y), dx * fnp.log1p(y) + dy * x / (1 + y)


def _xlogx_jvp(primals, tangents):
    # d/dx x log x = log x + 1 (inf at 0: grad(entr)(0.) is +inf, as in JAX)
    ((x,), (dx,)) = primals, tangents
    return _xlogx(x), dx * (fnp.log(x) + 1)


_xlogy = make_custom_jvp(_xlogy_value, _xlogy_jvp)
_xlog1py = make_custom_jvp(_xlog1py_value, _xlog1py_jvp)
_xlogx = make_custom_jvp(lambda x: _xlogy_value(x, x), _xlogx_jvp)


def xlogy(x, y):
    """``x * log(y)``, defined as 0 where ``x == 0`` (unless ``y`` is NaN, as in SciPy). Its
    derivative is JAX's: ``log(y)`` in ``x`` and ``x / y`` in ``y`` everywhere, x == 0 included."""
    util.check_arraylike("xlogy", x, y)
    return _xlogy(*util.promote_args_inexact("xlogy", x, y))


def xlog1py(x, y):
    """``x * log1p(y)``, defined as 0 where ``x == 0`` (unless ``y`` is NaN); derivative
    ``log1p(y)`` in ``x`` and ``x / (1 + y)`` in ``y`` everywhere, as in JAX."""
    util.check_arraylike("xlog1py", x, y)
    return _xlog1py(*util.promote_args_inexact("xlog1py", x, y))


def entr(x):
    """Elementwise entropy ``-x log x`` for ``x >= 0`` (0 at 0), ``-inf`` for ``x < 0``; its
    derivative ``-(log x + 1)`` is ``+inf`` at 0, as in JAX."""
    x = inexact("entr", x)
    return fnp.where(x < 0, -np.inf, -_xlogx(x))


# -- the normal distribution -----------------------------------------------------------------


def _polyval(coeffs, x):
    """Horner evaluation of the polynomial with ``coeffs`` (highest power first)."""
    acc = fnp.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        acc = acc * x + c
    return acc


def ndtr(x):
    """Standard normal CDF ``(1 + erf(x / sqrt(2))) / 2``, accurate in both tails."""
    [x] = lists_as_arrays(x)
    return ndtr_unchecked(normal_inexact("ndtr", x))


# Cephes ndtri coefficients (highest power first): P0/Q0 for the central region
# exp(-2) < p < 1 - exp(-2), P1/Q1 and P2/Q2 for the tails split at z = sqrt(-2 log p) = 8.
_NDTRI_P0 = (
    -5.99633501014107895267e1,
    9.80010754185999661536e1,
    -5.66762857469070293439e1,
    1.39312609387279679503e1,
    -1.23916583867381258016e0,
)
_NDTRI_Q0 = (
    1.0,
    1.95448858338141759834e0,
    4.67627912898881538453e0,
    8.63602421390890590575e1,
    -2.25462687854119370527e2,
    2.00260212380060660359e2,
    -8.20372256168333339912e1,
    1.59056225126211695515e1,
    -1.18331621121330003142e0,
)
_NDTRI_P1 = (
    4.05544892305962419923e0,
    3.15251094599893866154e1,
    5.71628192246421288162e1,
    4.40805073893200834700e1,
    1.46849561928858024014e1,
    2.18663306850790267539e0,
    -1.40256079171354495875e-1,
    -3.50424626827848203418e-2,
    -8.57456785154685413611e-4,
)
_NDTRI_Q1 = (
    1.0,
    1.57799883256466749731e1,
    4.53907635128879210584e1,
    4.13172038254672030440e1,
    1.50425385692907503408e1,
    2.50464946208309415979e0,
    -1.42182922854787788574e-1,
    -3.80806407691578277194e-2,
    -9.33259480895457427372e-4,
)
_NDTRI_P2 = (
    3.23774891776946035970e0,
    6.91522889068984211695e0,
    3.93881025292474443415e0,
    1.33303460815807542389e0,
    2.01485389549179081538e-1,
    1.23716634817820021358e-2,
    3.01581553508235416007e-4,
    2.65806974686737550832e-6,
    6.23974539184983293730e-9,
)
_NDTRI_Q2 = (
    1.0,
    6.02427039364742014255e0,
    3.67983563856160859403e0,
    1.37702099489081330271e0,
    2.16236993594496635890e-1,
    1.34204006088543189037e-2,
    3.28014464682127739104e-4,
    2.89247864745380683936e-6,
    6.79019408009981274425e-9,
)
_EXP_M2 = float(np.exp(-2.0))
_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


def ndtri(p):
    """Inverse of :func:`ndtr`: ``x`` with ``ndtr(x) == p``; ``-inf`` at 0, ``+inf`` at 1 and
    NaN outside ``[0, 1]``."""
    p = normal_inexact("ndtri", p)
    # Work with the smaller of p and 1 - p (the tails are symmetric) and sanitise 0, whose
    # result is replaced below, so no branch produces NaN.
    mcp = fnp.where(p > 1.0 - _EXP_M2, 1.0 - p, p)
    mcp = fnp.where(mcp == 0.0, 0.5, mcp)
    # Central region: x / sqrt(2 pi) = w + w**3 P0(w**2) / Q0(w**2), w = p - 1/2.
    w = mcp - 0.5
    ww = w * w
    x_big = w + w * ww * (_polyval(_NDTRI_P0, ww) / _polyval(_NDTRI_Q0, ww))
    x_big = x_big * -_SQRT_2PI
    # Tails: x = z - log(z) / z - P(1/z) / (z Q(1/z)), z = sqrt(-2 log p).
    z = fnp.sqrt(-2.0 * fnp.log(mcp))
    first = z - fnp.log(z) / z
    inv_z = 1.0 / z
    x_small = first - _polyval(_NDTRI_P2, inv_z) / _polyval(_NDTRI_Q2, inv_z) / z
    x_mid = first - _polyval(_NDTRI_P1, inv_z) / _polyval(_NDTRI_Q1, inv_z) / z
    x = fnp.where(mcp > _EXP_M2, x_big, fnp.where(z >= 8.0, x_small, x_mid))
    x = fnp.where(p > 1.0 - _EXP_M2, x, -x)
    x = fnp.where(p == 0.0, -np.inf, fnp.where(p == 1.0, np.inf, x))
    return fnp.where((p < 0) | (p > 1), np.nan, x)


# log_ndtr switches to the asymptotic series below this (and to log1p(-ndtr(-x)) above 0).
_LOG_NDTR_LOWER = {dtypes.float32: -10.0, dtypes.float64: -20.0}
_LOG_SQRT_2PI = 0.5 * float(np.log(2.0 * np.pi))


def log_ndtr(x, series_order: int = 3):
    """``log(ndtr(x))``, accurate far into both tails.

    For ``x`` below -10 (float32) / -20 (float64) it uses the asymptotic series
    ``log(phi(x) / -x) + log(1 + sum_n (-1)**n (2n-1)!! / x**(2n))`` with ``series_order``
    terms (as JAX does); up to 0, ``log(ndtr(x))``; above 0, ``log1p(-ndtr(-x))``. JAX takes
    ``log(ndtr(x))`` up to 5 (float32) / 8 (float64), where ``ndtr(x)`` is near 1 and one
    rounding of it is an absolute error of an ulp of 1 in the logarithm: at x = 2.46 that
    is ~130 float64 ulps of the result (-0.00694); ``ndtr(-x)`` is small there, so the
    ``log1p`` form keeps ``ndtr(-x)``'s own relative accuracy (~x^2 eps: rounding ``x /
    sqrt(2)`` moves ``erfc``, as in JAX and scipy).
    """
    if isinstance(series_order, bool) or not isinstance(series_order, int):
        raise TypeError(f"log_ndtr: series_order must be a Python int, got {series_order!r}")
    if not 0 <= series_order <= 30:
        raise ValueError(f"log_ndtr: series_order must be in [0, 30], got {series_order}")
    [x] = lists_as_arrays(x)
    x = normal_inexact("log_ndtr", x)
    lower = _LOG_NDTR_LOWER[x.dtype]
    above = x > 0
    # One ndtr call serves both the middle and the upper segment; its argument is clamped so
    # the unused branches stay finite.
    ndtr_res = ndtr_unchecked(fnp.where(above, -x, fnp.maximum(x, lower)))
    return fnp.where(
        above,
        fnp.log1p(-ndtr_res),
        fnp.where(
            x > lower, fnp.log(ndtr_res), _log_ndtr_lower(fnp.minimum(x, lower), series_order)
        ),
    )


def _log_ndtr_lower(x, series_order: int):
    x_2 = x * x
    log_scale = -0.5 * x_2 - fnp.log(-x) - _LOG_SQRT_2PI
    return log_scale + fnp.log(_log_ndtr_asymptotic_series(x, series_order))


def _log_ndtr_asymptotic_series(x, series_order: int):
    """``1 + sum_{n=1}^{order} (-1)**n (2n-1)!! / x**(2n)``."""
    if series_order <= 0:
        return fnp.ones_like(x)
    x_2 = x * x
    even_sum = fnp.zeros_like(x)
    odd_sum = fnp.zeros_like(x)
    x_2n = x_2
    for n in range(1, series_order + 1):
        y = float(np.prod(np.arange(2 * n - 1, 1, -2, dtype=np.float64))) / x_2n
        if n % 2:
            odd_sum = odd_sum + y
        else:
            even_sum = even_sum + y
        x_2n = x_2n * x_2
    return 1.0 + even_sum - odd_sum


# -- entropies -------------------------------------------------------------------------------


def _log_ratio(p, q):
    """``log(p / q)`` for positive ``p``, ``q``: from the ratio (no cancellation when p ~ q)
    unless it overflows or underflows, then ``log p - log q``."""
    ratio = p / q
    ok = fnp.isfinite(ratio) & (ratio > 0)
    return fnp.where(ok, fnp.log(fnp.where(ok, ratio, 1.0)), fnp.log(p) - fnp.log(q))


def rel_entr(p, q):
    """Elementwise relative entropy: ``p log(p / q)`` for ``p, q > 0``, 0 at ``p == 0`` (for
    ``q >= 0``), ``+inf`` otherwise; NaN where either is NaN (SciPy's)."""
    util.check_arraylike("rel_entr", p, q)
    p, q = util.promote_args_inexact("rel_entr", p, q)
    both_pos = (p > 0) & (q > 0)
    safe_p, safe_q = fnp.where(both_pos, p, 1.0), fnp.where(both_pos, q, 1.0)
    val = safe_p * _log_ratio(safe_p, safe_q)
    out = fnp.where(both_pos, val, fnp.where((p == 0) & (q >= 0), 0.0, np.inf))
    return fnp.where(fnp.isnan(p) | fnp.isnan(q), np.nan, out)


def kl_div(p, q):
    """Elementwise Kullback-Leibler term ``rel_entr(p, q) - p + q``: ``p log(p / q) - p + q``
    for ``p, q > 0``, ``q`` at ``p == 0`` (for ``q >= 0``), ``+inf`` otherwise. Written as
    JAX writes it, so its derivative in ``p`` at ``p == 0`` is JAX's ``-1`` (the ``- p``)."""
    util.check_arraylike("kl_div", p, q)
    p, q = util.promote_args_inexact("kl_div", p, q)
    defined = ((p > 0) & (q > 0)) | ((p == 0) & (q >= 0)) | fnp.isnan(p) | fnp.isnan(q)
    # the documented +inf "otherwise" (rel_entr is inf there; minus an infinite p it was NaN)
    return fnp.where(defined, rel_entr(p, q) - p + q, np.inf)


def softmax(x, /, *, axis=None):
    """``exp(x) / sum(exp(x), axis)`` (stable); ``axis=None`` normalises over all axes, as
    jax.scipy.special.softmax does (``fungrad.nn.softmax`` defaults to the last axis)."""
    from fungrad import nn

    return nn.softmax(x, axis=axis)


def log_softmax(x, /, *, axis=None):
    """``x - logsumexp(x, axis, keepdims=True)`` (stable); ``axis=None`` reduces all axes."""
    from fungrad import nn

    return nn.log_softmax(x, axis=axis)


def boxcox(x, lmbda):
    """Box-Cox transform: ``(x**lmbda - 1) / lmbda``, or ``log(x)`` where ``lmbda == 0``."""
    util.check_arraylike("boxcox", x, lmbda)
    x, lmbda = util.promote_args_inexact("boxcox", x, lmbda)
    return _boxcox(fnp.log(x), lmbda)


def boxcox1p(x, lmbda):
    """Box-Cox transform of ``1 + x``: ``((1 + x)**lmbda - 1) / lmbda`` or ``log1p(x)``,
    accurate for small ``x``."""
    util.check_arraylike("boxcox1p", x, lmbda)
    x, lmbda = util.promote_args_inexact("boxcox1p", x, lmbda)
    return _boxcox(fnp.log1p(x), lmbda)


def _boxcox(log_x, lmbda):
    zero = lmbda == 0
    safe = fnp.where(zero, 1.0, lmbda)
    return fnp.where(zero, log_x, fnp.expm1(safe * log_x) / safe)


# -- Bessel functions I0, I1 ---------------------------------------------------------------------


def i0e(x):
    """Exponentially scaled modified Bessel function of order 0: ``exp(-|x|) I0(x)``."""
    return lax_special.bessel_i0e(inexact("i0e", x))


def i0(x):
    """Modified Bessel function of the first kind of order 0."""
    x = inexact("i0", x)
    return fnp.exp(fnp.abs(x)) * lax_special.bessel_i0e(x)


def i1e(x):
    """Exponentially scaled modified Bessel function of order 1: ``exp(-|x|) I1(x)``."""
    return lax_special.bessel_i1e(inexact("i1e", x))


def i1(x):
    """Modified Bessel function of the first kind of order 1."""
    x = inexact("i1", x)
    return fnp.exp(fnp.abs(x)) * lax_special.bessel_i1e(x)


# -- zeta ------------------------------------------------------------------------------------


def zeta(x, q=None):
    """Hurwitz zeta ``sum_{k >= 0} (q + k)^-x`` (``lax.zeta``); with ``q=None``, Riemann's zeta
    function (JAX raises there), continued to ``x < 1`` by the functional equation
    ``zeta(x) = 2^x pi^(x-1) sin(pi x / 2) Gamma(1 - x) zeta(1 - x)``."""
    if q is not None:
        util.check_arraylike("zeta", x, q)
        x, q = util.promote_args_inexact("zeta", x, q)
        return lax_special.zeta(x, q)
    x = inexact("zeta", x)
    one = fnp.ones_like(x)
    reflect = x < 0.5
    s = fnp.where(reflect, 1.0 - x, x)  # s >= 1/2, where the Euler-Maclaurin sum holds
    s_safe = fnp.where(s == 1.0, 2.0, s)
    z = lax_special.zeta_euler_maclaurin(s_safe, one)
    z = fnp.where(s == 1.0, np.inf, z)
    g = fnp.exp(lax.lgamma(s)) * gammasgn(s)  # Gamma(1 - x) at x = 1 - s
    refl = (2.0**x) * (np.pi ** (x - 1.0)) * fnp.sin(0.5 * np.pi * x) * g * z
    # the trivial zeros (negative even integers): sin is exactly 0 there
    refl = fnp.where((x < 0) & (fnp.remainder(x, 2.0) == 0), 0.0, refl)
    out = fnp.where(reflect, refl, z)
    return fnp.where(x == 0, -0.5, out)  # (there the reflection is 0 * inf)


# -- erfcx -------------------------------------------------------------------------------------

_ERFCX_SWITCH = 9.0


def erfcx(x):
    """Scaled complementary error function ``exp(x^2) erfc(x)``, accurate for large ``x``
    (where ``erfc`` underflows) and to a few ulp elsewhere: ``exp(x^2)`` is taken as
    ``exp(hi^2) exp(lo (2 hi + lo))`` with ``hi^2`` exact. ``+inf`` for very negative ``x``."""
    x = normal_inexact("erfcx", x)
    grid = EXP_SQUARE_GRID[x.dtype]
    small = x < _ERFCX_SWITCH
    xs = fnp.where(small, x, 0.0)
    hi = fnp.round(xs * grid) / grid
    lo = xs - hi
    direct = fnp.exp(hi * hi) * fnp.exp(lo * (2.0 * hi + lo)) * lax.erfc(xs)
    # x >= 9: 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2 x^2)^k, twenty terms
    xl = fnp.where(small, 2 * _ERFCX_SWITCH, x)
    w = 1.0 / (2.0 * xl * xl)
    coeffs = [
        (-1) ** k * float(np.prod(np.arange(2 * k - 1, 0, -2, dtype=np.float64))) for k in range(21)
    ]
    acc = fnp.full_like(xl, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc = acc * w + c
    asym = acc / (xl * float(np.sqrt(np.pi)))
    out = fnp.where(small, direct, asym)
    return fnp.where(x == -np.inf, np.inf, out)
