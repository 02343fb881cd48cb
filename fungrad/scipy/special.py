"""``fungrad.scipy.special``: special functions with jax.scipy.special's names and semantics.

Written on fungrad.lax / fungrad.numpy only. Integer and bool inputs promote to the default
float dtype. This module is the one home of :func:`logsumexp` (``fungrad.nn`` re-exports it).
The normal-distribution functions follow JAX's (Cephes-derived) algorithms: ``ndtr`` switches
between ``erf`` and ``erfc`` to keep relative accuracy in both tails, ``ndtri`` is a piecewise
rational approximation, and ``log_ndtr`` uses an asymptotic series for very negative ``x`` so
it stays finite where ``log(ndtr(x))`` would underflow to ``-inf``.

The incomplete gamma and beta functions, ``i0e``/``i1e`` and the Hurwitz ``zeta`` are the
``fungrad.lax`` functions of the same family (``lax.igamma``, ...). The iterative functions
here (``expn``/``exp1``/``expi``, ``hyp1f1``, ``hyp2f1``, ``dawsn``, ``fresnel``, ``sici``) sum
their series or continued fractions in a ``while_loop`` that freezes each element once it has
converged (``lax.special.iterate_elementwise``), so vmap matches a Python loop; their
derivatives are closed-form ``custom_jvp`` rules (a while_loop has no reverse mode). Functions
JAX has that are absent: ``wofz`` and ``sph_harm_y`` (complex results; fungrad has no complex
dtype).
"""

from __future__ import annotations

import math

import numpy as np

import fungrad.numpy as fnp
from fungrad import dtypes, lax
from fungrad.lax import special as lax_special
from fungrad.numpy import util

__all__ = [
    "bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "dawsn",
    "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp1", "expi", "expit", "expn",
    "factorial", "fresnel", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "hyp1f1",
    "hyp2f1", "i0", "i0e", "i1", "i1e", "kl_div", "log_ndtr", "log_softmax", "loggamma", "logit",
    "logsumexp", "multigammaln", "ndtr", "ndtri", "owens_t", "poch", "polygamma", "rel_entr",
    "sici", "softmax", "spence", "xlog1py", "xlogy", "zeta",
]


def _inexact(fun_name: str, x):
    [x] = util.promote_args_inexact(fun_name, x)
    return x


# -- logsumexp -------------------------------------------------------------------------------

def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False,
              where=None):
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
        a = _inexact("logsumexp", a)
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
    return lax.erf(_inexact("erf", x))


def erfc(x):
    """Complementary error function ``1 - erf(x)``, accurate for large ``x``."""
    return lax.erfc(_inexact("erfc", x))


def erfinv(x):
    """Inverse error function on ``[-1, 1]`` (``+-inf`` at ``+-1``, NaN outside)."""
    return lax.erf_inv(_inexact("erfinv", x))


def expit(x):
    """Logistic sigmoid ``1 / (1 + exp(-x))``."""
    return lax.logistic(_inexact("expit", x))


def logit(x):
    """Inverse of :func:`expit`: ``log(x / (1 - x))``."""
    x = _inexact("logit", x)
    return lax.log(lax.div(x, lax.sub(1.0, x)))


# -- gamma family ----------------------------------------------------------------------------

def gammaln(x):
    """``log|Gamma(x)|`` (``lax.lgamma``); ``+inf`` at the poles ``0, -1, -2, ...``."""
    return lax.lgamma(_inexact("gammaln", x))


def gammasgn(x):
    """Sign of ``Gamma(x)``: 1 for ``x >= 0`` (and ``+inf``), ``(-1)^ceil(-x)`` below 0, NaN at
    the poles (negative integers), ``-inf`` and NaN."""
    x = _inexact("gammasgn", x)
    floor_x = fnp.floor(x)
    neg = fnp.where(fnp.remainder(floor_x, 2.0) == 0, 1.0, -1.0)
    out = fnp.where(x >= 0, 1.0, neg)
    return fnp.where(((x < 0) & (x == floor_x)) | fnp.isnan(x), np.nan, out).astype(x.dtype)


def gamma(x):
    """The gamma function ``Gamma(x) = gammasgn(x) * exp(gammaln(x))`` (``+inf`` at 0, NaN at
    the negative integers)."""
    x = _inexact("gamma", x)
    return gammasgn(x) * fnp.exp(lax.lgamma(x))


def loggamma(x):
    """Principal branch of ``log Gamma(x)`` for real ``x``: ``gammaln(x)`` for ``x > 0``, NaN
    for ``x <= 0`` (where the real-valued result would need a complex logarithm)."""
    x = _inexact("loggamma", x)
    return fnp.where(x > 0, lax.lgamma(fnp.where(x > 0, x, 1.0)), np.nan)


def factorial(n, exact: bool = False):
    """``n! = Gamma(n + 1)`` elementwise (0 for ``n < 0``), as a float.

    ``exact=True`` (arbitrary-precision integers) is not supported, as in JAX.
    """
    if exact:
        raise ValueError("factorial: exact=True (arbitrary-precision integer results) is not "
                         "supported; use exact=False for the float Gamma(n + 1)")
    n = _inexact("factorial", n)
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
    d = util.concrete_or_error(d, "multigammaln's dimension d (a Python int)")
    if isinstance(d, bool) or not float(d).is_integer() or int(d) < 1:
        raise ValueError(f"multigammaln: d must be a positive integer, got {d!r}")
    d = int(d)
    a = _inexact("multigammaln", a)
    out = fnp.full_like(a, d * (d - 1) / 4.0 * float(np.log(np.pi)))
    for j in range(d):
        out = out + lax.lgamma(a - j / 2.0)
    return out


def digamma(x):
    """Digamma function ``d/dx log Gamma(x)`` (``lax.digamma``)."""
    return lax.digamma(_inexact("digamma", x))


def polygamma(n, x):
    """``psi^(n)(x)``, the ``n``-th derivative of :func:`digamma` (``lax.polygamma``).

    Args:
        n: integer order(s), an int or an integer array broadcasting against ``x``; its values
            must be concrete (not traced: each order is its own formula). Negative orders give
            NaN, as in JAX.
        x: real argument(s); integers promote to the default float.

    Returns:
        ``psi^(n)(x)`` in the dtype JAX promotes ``n`` and ``x`` to.

    Example:
        >>> polygamma(1, 1.0)   # trigamma(1) = pi^2 / 6 = 1.6449341
    """
    util.check_arraylike("polygamma", n, x)
    n_dtype = dtypes.result_type(n)
    if not dtypes.is_int(n_dtype):
        raise ValueError(f"polygamma: the order n must have an integer dtype, got "
                         f"{n_dtype.name} (pass an int or an integer array)")
    orders = np.asarray(util.concrete_or_error(n, "polygamma's order n (each order is its "
                                                  "own formula; pass n as a concrete value)"))
    order_of, x = fnp.broadcast_arrays(*util.promote_args_inexact("polygamma", n, x))
    out = lax.full_like(x, np.nan)
    for m in np.unique(orders):
        if m >= 0:
            out = lax.select(lax.eq(order_of, lax.full_like(x, float(m))),
                             lax.polygamma(int(m), x), out)
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

def xlogy(x, y):
    """``x * log(y)``, defined as 0 where ``x == 0`` (unless ``y`` is NaN, as in SciPy)."""
    util.check_arraylike("xlogy", x, y)
    x, y = util.promote_args_inexact("xlogy", x, y)
    x_ok = (x != 0) | fnp.isnan(y)
    return fnp.where(x_ok, x * fnp.log(y), fnp.zeros_like(x))


def xlog1py(x, y):
    """``x * log1p(y)``, defined as 0 where ``x == 0`` (unless ``y`` is NaN)."""
    util.check_arraylike("xlog1py", x, y)
    x, y = util.promote_args_inexact("xlog1py", x, y)
    x_ok = (x != 0) | fnp.isnan(y)
    return fnp.where(x_ok, x * fnp.log1p(y), fnp.zeros_like(x))


def entr(x):
    """Elementwise entropy ``-x log x`` for ``x >= 0`` (0 at 0), ``-inf`` for ``x < 0``."""
    x = _inexact("entr", x)
    return fnp.where(x < 0, -np.inf, -xlogy(x, x))


# -- the normal distribution -----------------------------------------------------------------

def _normal_inexact(fun_name: str, x):
    """``x`` promoted to float32/float64; float16 is refused as in JAX (the polynomial
    approximations below are tuned for single and double precision)."""
    x = _inexact(fun_name, x)
    if x.dtype not in (dtypes.float32, dtypes.float64):
        raise TypeError(f"{fun_name}: dtype {x.dtype.name} is not supported; use float32 or "
                        "float64")
    return x


def _polyval(coeffs, x):
    """Horner evaluation of the polynomial with ``coeffs`` (highest power first)."""
    acc = fnp.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        acc = acc * x + c
    return acc


def ndtr(x):
    """Standard normal CDF ``(1 + erf(x / sqrt(2))) / 2``, accurate in both tails."""
    return _ndtr(_normal_inexact("ndtr", x))


_HALF_SQRT_2 = 0.5 * float(np.sqrt(2.0))


def _ndtr(x):
    w = x * _HALF_SQRT_2
    z = fnp.abs(w)
    # |w| < 1/sqrt(2): erf is accurate; otherwise use erfc of |w| (relative accuracy in the
    # lower tail, where 1 + erf(w) would cancel).
    y = fnp.where(z < _HALF_SQRT_2, 1.0 + lax.erf(w),
                  fnp.where(w > 0, 2.0 - lax.erfc(z), lax.erfc(z)))
    return 0.5 * y


# Cephes ndtri coefficients (highest power first): P0/Q0 for the central region
# exp(-2) < p < 1 - exp(-2), P1/Q1 and P2/Q2 for the tails split at z = sqrt(-2 log p) = 8.
_NDTRI_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
             1.39312609387279679503e1, -1.23916583867381258016e0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
             -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
             1.59056225126211695515e1, -1.18331621121330003142e0)
_NDTRI_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
             4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
             -1.40256079171354495875e-1, -3.50424626827848203418e-2,
             -8.57456785154685413611e-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
             1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
             -3.80806407691578277194e-2, -9.33259480895457427372e-4)
_NDTRI_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
             1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
             3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
             2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
             2.89247864745380683936e-6, 6.79019408009981274425e-9)
_EXP_M2 = float(np.exp(-2.0))
_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


def ndtri(p):
    """Inverse of :func:`ndtr`: ``x`` with ``ndtr(x) == p``; ``-inf`` at 0, ``+inf`` at 1 and
    NaN outside ``[0, 1]``."""
    p = _normal_inexact("ndtri", p)
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


# log_ndtr switches to the asymptotic series below LOWER and to -ndtr(-x) above UPPER.
_LOG_NDTR_SEGMENTS = {dtypes.float32: (-10.0, 5.0), dtypes.float64: (-20.0, 8.0)}
_LOG_SQRT_2PI = 0.5 * float(np.log(2.0 * np.pi))


def log_ndtr(x, series_order: int = 3):
    """``log(ndtr(x))``, accurate far into both tails.

    For ``x`` below -10 (float32) / -20 (float64) it uses the asymptotic series
    ``log(phi(x) / -x) + log(1 + sum_n (-1)**n (2n-1)!! / x**(2n))`` with ``series_order``
    terms; for large ``x`` it uses ``log(1 - q) ~ -q`` with ``q = ndtr(-x)``.
    """
    if isinstance(series_order, bool) or not isinstance(series_order, int):
        raise TypeError(f"log_ndtr: series_order must be a Python int, got {series_order!r}")
    if not 0 <= series_order <= 30:
        raise ValueError(f"log_ndtr: series_order must be in [0, 30], got {series_order}")
    x = _normal_inexact("log_ndtr", x)
    lower, upper = _LOG_NDTR_SEGMENTS[x.dtype]
    above = x > upper
    # One ndtr call serves both the middle and the upper segment; its argument is clamped so
    # the unused branches stay finite.
    ndtr_res = _ndtr(fnp.where(above, -x, fnp.maximum(x, lower)))
    return fnp.where(above, -ndtr_res,
                     fnp.where(x > lower, fnp.log(ndtr_res),
                               _log_ndtr_lower(fnp.minimum(x, lower), series_order)))


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
    ``q >= 0``), ``+inf`` otherwise."""
    util.check_arraylike("rel_entr", p, q)
    p, q = util.promote_args_inexact("rel_entr", p, q)
    both_pos = (p > 0) & (q > 0)
    safe_p, safe_q = fnp.where(both_pos, p, 1.0), fnp.where(both_pos, q, 1.0)
    val = safe_p * _log_ratio(safe_p, safe_q)
    out = fnp.where(both_pos, val, fnp.where((p == 0) & (q >= 0), 0.0, np.inf))
    return fnp.where(fnp.isnan(p) | fnp.isnan(q), np.nan, out)


def kl_div(p, q):
    """Elementwise Kullback-Leibler term ``p log(p / q) - p + q`` for ``p, q > 0``; ``q`` at
    ``p == 0`` (for ``q >= 0``), ``+inf`` otherwise."""
    util.check_arraylike("kl_div", p, q)
    p, q = util.promote_args_inexact("kl_div", p, q)
    both_pos = (p > 0) & (q > 0)
    safe_p, safe_q = fnp.where(both_pos, p, 1.0), fnp.where(both_pos, q, 1.0)
    val = safe_p * _log_ratio(safe_p, safe_q) - safe_p + safe_q
    out = fnp.where(both_pos, val, fnp.where((p == 0) & (q >= 0), q, np.inf))
    return fnp.where(fnp.isnan(p) | fnp.isnan(q), np.nan, out)


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
    return lax_special.bessel_i0e(_inexact("i0e", x))


def i0(x):
    """Modified Bessel function of the first kind of order 0."""
    x = _inexact("i0", x)
    return fnp.exp(fnp.abs(x)) * lax_special.bessel_i0e(x)


def i1e(x):
    """Exponentially scaled modified Bessel function of order 1: ``exp(-|x|) I1(x)``."""
    return lax_special.bessel_i1e(_inexact("i1e", x))


def i1(x):
    """Modified Bessel function of the first kind of order 1."""
    x = _inexact("i1", x)
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
    x = _inexact("zeta", x)
    one = fnp.ones_like(x)
    reflect = x < 0.5
    s = fnp.where(reflect, 1.0 - x, x)  # s >= 1/2, where the Euler-Maclaurin sum holds
    s_safe = fnp.where(s == 1.0, 2.0, s)
    z = lax_special.zeta_euler_maclaurin(s_safe, one)
    z = fnp.where(s == 1.0, np.inf, z)
    g = fnp.exp(lax.lgamma(s)) * gammasgn(s)  # Gamma(1 - x) at x = 1 - s
    refl = (2.0 ** x) * (np.pi ** (x - 1.0)) * fnp.sin(0.5 * np.pi * x) * g * z
    # the trivial zeros (negative even integers): sin is exactly 0 there
    refl = fnp.where((x < 0) & (fnp.remainder(x, 2.0) == 0), 0.0, refl)
    out = fnp.where(reflect, refl, z)
    return fnp.where(x == 0, -0.5, out)  # (there the reflection is 0 * inf)


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
    n = util.concrete_or_error(n, "bernoulli's n (a Python int)")
    if isinstance(n, bool) or not float(np.asarray(n)).is_integer() or int(n) < 0:
        raise ValueError(f"bernoulli: n must be a non-negative integer, got {n!r}")
    values = [float(b) for b in _bernoulli_numbers(int(n))]
    return fnp.array(values, dtype=dtypes.canonicalize_dtype(np.float64))


# Li2(z) = sum_n B_n u^(n+1) / (n+1)!, u = -log(1 - z): coefficients B_n / (n+1)!
_LI2_COEFFS = tuple(float(b) / math.factorial(k + 1)
                    for k, b in enumerate(_bernoulli_numbers(30)))
_PI2_6 = math.pi ** 2 / 6


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
    x = _inexact("spence", x)
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


# -- exponential integrals -----------------------------------------------------------------------

_EULER_GAMMA = 0.57721566490153286061
_EXPN_MAX_ITER = 500


def _eps(x) -> float:
    return float(np.finfo(x.dtype).eps) / 2


def _expn_cf(n, x, skip):
    """``E_n(x)`` for ``x > 1``: the continued fraction (modified Lentz)."""
    tiny = 1e-30
    eps = _eps(x)
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
    eps = _eps(x)
    nm1 = n - 1.0
    log_x = fnp.log(x)
    ans = fnp.where(nm1 != 0, 1.0 / fnp.where(nm1 != 0, nm1, 1.0), -log_x - _EULER_GAMMA)
    psi = lax.digamma(n)

    def step(st):
        i, fact, ans = st
        i = i + 1.0
        fact = fact * (-x / i)
        at_pole = i == nm1
        delta = fnp.where(at_pole, fact * (psi - log_x),
                          -fact / fnp.where(at_pole, 1.0, i - nm1))
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


def _make_custom_jvp(fn, rule):
    from fungrad.transforms.custom import custom_jvp
    wrapped = custom_jvp(fn)
    wrapped.defjvp(rule)
    return wrapped


_expn_fn = _make_custom_jvp(_expn_value, _expn_jvp)


def expn(n, x):
    """Generalized exponential integral ``E_n(x) = integral_1^inf exp(-x t) / t^n dt`` for
    integer ``n >= 0`` and ``x >= 0`` (NaN otherwise); differentiable in ``x``
    (``-E_(n-1)(x)``)."""
    util.check_arraylike("expn", n, x)
    n, x = util.promote_args_inexact("expn", n, x)
    return _expn_fn(n, x)


def exp1(x):
    """Exponential integral ``E_1(x) = integral_x^inf exp(-t) / t dt`` for ``x >= 0`` (``+inf``
    at 0, NaN below)."""
    x = _inexact("exp1", x)
    return _expn_fn(fnp.ones_like(x), x)


_EXPI_SWITCH = 50.0


def _expi_series(x, skip):
    """``Ei(x) = gamma + log x + sum_k x^k / (k k!)`` for ``0 < x <= 50`` (positive terms)."""
    eps = _eps(x)

    def step(st):
        k, term, total = st
        k = k + 1.0
        term = term * x / k
        contrib = term / k
        total = total + contrib
        return (k, term, total), contrib <= total * eps

    state = (fnp.zeros_like(x), fnp.ones_like(x), fnp.zeros_like(x))
    total = lax_special.iterate_elementwise(step, state, skip, _EXPN_MAX_ITER)[-1]
    return _EULER_GAMMA + fnp.log(x) + total


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


_expi_fn = _make_custom_jvp(_expi_value, _expi_jvp)


def expi(x):
    """Exponential integral ``Ei(x) = PV integral_-inf^x exp(t) / t dt`` (``-E_1(-x)`` for
    ``x < 0``; ``-inf`` at 0, where JAX gives NaN)."""
    return _expi_fn(_inexact("expi", x))


# -- erfcx -------------------------------------------------------------------------------------

_ERFCX_SWITCH = 9.0
# split x = hi + lo with hi on a grid fine enough that hi * hi is exact in the dtype
_ERFCX_GRID = {dtypes.float32: 2.0 ** 8, dtypes.float64: 2.0 ** 20}


def erfcx(x):
    """Scaled complementary error function ``exp(x^2) erfc(x)``, accurate for large ``x``
    (where ``erfc`` underflows) and to a few ulp elsewhere: ``exp(x^2)`` is taken as
    ``exp(hi^2) exp(lo (2 hi + lo))`` with ``hi^2`` exact. ``+inf`` for very negative ``x``."""
    x = _normal_inexact("erfcx", x)
    grid = _ERFCX_GRID[x.dtype]
    small = x < _ERFCX_SWITCH
    xs = fnp.where(small, x, 0.0)
    hi = fnp.round(xs * grid) / grid
    lo = xs - hi
    direct = fnp.exp(hi * hi) * fnp.exp(lo * (2.0 * hi + lo)) * lax.erfc(xs)
    # x >= 9: 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2 x^2)^k, twenty terms
    xl = fnp.where(small, 2 * _ERFCX_SWITCH, x)
    w = 1.0 / (2.0 * xl * xl)
    coeffs = [(-1) ** k * float(np.prod(np.arange(2 * k - 1, 0, -2, dtype=np.float64)))
              for k in range(21)]
    acc = fnp.full_like(xl, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc = acc * w + c
    asym = acc / (xl * float(np.sqrt(np.pi)))
    out = fnp.where(small, direct, asym)
    return fnp.where(x == -np.inf, np.inf, out)


# -- confluent hypergeometric function -----------------------------------------------------------

_HYP1F1_MAX_ITER = 2000


def _hyp1f1_series(a, b, x, skip):
    eps = _eps(x)

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


_hyp1f1_fn = _make_custom_jvp(_hyp1f1_value, _hyp1f1_jvp)


def hyp1f1(a, b, x):
    """Kummer's confluent hypergeometric function ``M(a, b, x) = sum_k (a)_k / (b)_k x^k / k!``
    (the series, with Kummer's transformation for ``x < 0``); ``+inf`` where ``b`` is a
    non-positive integer (unless ``a`` is one closer to 0), ``exp(x)`` where ``a == b``."""
    util.check_arraylike("hyp1f1", a, b, x)
    a, b, x = util.promote_args_inexact("hyp1f1", a, b, x)
    a, b, x = fnp.broadcast_arrays(a, b, x)
    return _hyp1f1_fn(a, b, x)


# -- Dawson, Fresnel and sine/cosine integrals -------------------------------------------------

def _exp_neg_square(x, grid: float):
    """``exp(-x^2)`` with ``x = hi + lo`` split so that ``hi^2`` is exact (see :func:`erfcx`)."""
    hi = fnp.round(x * grid) / grid
    lo = x - hi
    return fnp.exp(-(hi * hi)) * fnp.exp(-lo * (2.0 * hi + lo))


_DAWSN_SWITCH = 6.0


def _dawsn_value(x):
    ax = fnp.abs(x)
    small = ax < _DAWSN_SWITCH
    xs = fnp.where(small, ax, 1.0)
    q = xs * xs
    eps = _eps(x)

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
    total = lax_special.iterate_elementwise(state=state, step=step, done=~small,
                                            max_iter=_EXPN_MAX_ITER)[-1]
    series = xs * _exp_neg_square(xs, _ERFCX_GRID[x.dtype]) * total
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


_dawsn_fn = _make_custom_jvp(_dawsn_value, _dawsn_jvp)


def dawsn(x):
    """Dawson's integral ``F(x) = exp(-x^2) integral_0^x exp(t^2) dt``; its derivative is
    ``1 - 2 x F(x)``."""
    x = _normal_inexact("dawsn", x)
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
    eps = _eps(x)
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
    out = lax_special.iterate_elementwise(step, state, skip, _EXPN_MAX_ITER)
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
    hr, hi_ = _complex_lentz((fnp.ones_like(xl), -pix2), 4.0,
                             lambda i: -(2.0 * i - 1.0) * (2.0 * i), xl, small)
    hr, hi_ = _cmul((hr, hi_), (xl, -xl))
    grid = _ERFCX_GRID[x.dtype]
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


_fresnel_fn = _make_custom_jvp(_fresnel_value, _fresnel_jvp)


def fresnel(x):
    """Fresnel integrals ``(S(x), C(x))``: ``S = integral_0^x sin(pi t^2 / 2) dt`` and
    ``C = integral_0^x cos(pi t^2 / 2) dt`` (both ``+-1/2`` at ``+-inf``)."""
    x = _normal_inexact("fresnel", x)
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
    ci_small = _EULER_GAMMA + fnp.log(xs) + ci_sum
    # |x| > 2: Ci + i (Si - pi/2) = -E1(i x) by its continued fraction
    xl = fnp.where(small | ~fnp.isfinite(ax), 4.0, ax)
    hr, hi_ = _complex_lentz((fnp.ones_like(xl), xl), 2.0, lambda i: -(i * i), xl,
                             small)
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


_sici_fn = _make_custom_jvp(_sici_value, _sici_jvp)


def sici(x):
    """Sine and cosine integrals ``(Si(x), Ci(x))``: ``Si = integral_0^x sin(t)/t dt``,
    ``Ci = gamma + log|x| + integral_0^x (cos(t) - 1)/t dt`` (the real part for ``x < 0``,
    as in JAX; ``-inf`` at 0)."""
    x = _normal_inexact("sici", x)
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
    z = _normal_inexact("bessel_jn", z)
    start = max(n_iter, v + 1)
    zero = z == 0
    zs = fnp.where(zero, 1.0, z)
    big = 1e10 if z.dtype == dtypes.float32 else 1e100
    f_next = fnp.zeros_like(zs)               # f_(k+1)
    f_cur = fnp.full_like(zs, 1e-30 if z.dtype == dtypes.float32 else 1e-200)  # f_k
    norm = fnp.where(start % 2 == 0, 2.0, 0.0) * f_cur
    kept = {start: f_cur} if start <= v else {}
    for k in range(start, 0, -1):
        f_prev = (2.0 * k) / zs * f_cur - f_next   # f_(k-1)
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


# -- Gauss hypergeometric function ---------------------------------------------------------------

_HYP2F1_MAX_ITER = 20000


def _hyp2f1_series(a, b, c, x, skip):
    eps = _eps(x)

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


_hyp2f1_fn = _make_custom_jvp(_hyp2f1_value, _hyp2f1_jvp)


def hyp2f1(a, b, c, x):
    """Gauss' hypergeometric function ``2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x^k / k!``
    for real ``x <= 1``: the series on ``[0, 1)``, Pfaff's transformation for ``x < 0``,
    Gauss' theorem at ``x = 1`` (``+inf`` where ``c - a - b <= 0``); NaN for ``x > 1``,
    ``+inf`` at the poles ``c = 0, -1, ...`` (unless the series stops before). The series
    needs many terms as its argument nears 1 (up to 20000)."""
    util.check_arraylike("hyp2f1", a, b, c, x)
    a, b, c, x = fnp.broadcast_arrays(*util.promote_args_inexact("hyp2f1", a, b, c, x))
    return _hyp2f1_fn(a, b, c, x)


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
        raise TypeError(f"owens_t: dtype {h.dtype.name} is not supported; use float32 or "
                        "float64")
    ah_, aa = fnp.abs(h), fnp.abs(a)
    small = aa <= 1.0
    t_small = _owens_t_small_a(ah_, fnp.where(small, aa, 0.0))
    a_big = fnp.where(small, 2.0, aa)
    ha = ah_ * a_big
    inv_a = 1.0 / a_big
    front = 0.5 * (_ndtr(ah_) * _ndtr(-ha) + _ndtr(ha) * _ndtr(-ah_))
    t_big = front - _owens_t_small_a(fnp.where(fnp.isfinite(ha), ha, 0.0), inv_a)
    t_big = fnp.where(fnp.isinf(ha), front, t_big)
    out = fnp.sign(a) * fnp.where(small, t_small, t_big)
    return fnp.where(fnp.isnan(h) | fnp.isnan(a), np.nan, out)
