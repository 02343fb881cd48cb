"""fungrad.scipy.special against float64 references from Python's math and statistics modules
(vectorised with np.vectorize), an independent continued fraction for the normal tail, and
known values; dtypes, errors and traced jaxprs."""

import math
import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import nn
from fungrad.scipy import special
from tests.helpers import assert_array

inf, nan = np.inf, np.nan
EULER = 0.57721566490153286061

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])
_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])


def _f64(x):
    return np.asarray(x, np.float64)


def arrays(elements, max_side=5):
    return hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=max_side),
        elements=elements,
    )


# -- references -------------------------------------------------------------------------------


def _inv_cdf_scalar(p):
    """Standard normal quantile (statistics.NormalDist: Wichura's AS241, ~1e-16)."""
    p = float(p)
    if math.isnan(p):  # (ordered comparisons with NaN would set the FP invalid flag)
        return nan
    if p == 0:
        return -inf
    if p == 1:
        return inf
    if not 0 < p < 1:
        return nan
    return statistics.NormalDist().inv_cdf(p)


_inv_cdf = np.vectorize(_inv_cdf_scalar, otypes=[np.float64])


def _erfinv_ref(y):
    # erfinv(y) = -ndtri((1 - |y|) / 2) / sqrt(2) * sign(y); 1 - |y| is exact for float32 y
    y = _f64(y)
    with np.errstate(invalid="ignore"):
        return -np.sign(y) * _inv_cdf((1 - np.abs(y)) / 2) / math.sqrt(2)


def _digamma_scalar(x):
    """Digamma in float64: reflection for x < 1/2, recurrence up to x >= 10, then the
    asymptotic series log x - 1/(2x) - sum B_2k / (2k x^2k)."""
    if math.isnan(x) or x == -inf:
        return nan
    if x == inf:
        return inf
    if x <= 0 and x == math.floor(x):
        return nan  # poles (JAX gives NaN)
    if x < 0.5:
        return _digamma_scalar(1 - x) - math.pi / math.tan(math.pi * x)
    acc = 0.0
    while x < 10:
        acc -= 1 / x
        x += 1
    x2 = 1 / (x * x)
    series = x2 * (1 / 12 - x2 * (1 / 120 - x2 * (1 / 252 - x2 * (1 / 240 - x2 / 132))))
    return acc + math.log(x) - 0.5 / x - series


_digamma = np.vectorize(_digamma_scalar, otypes=[np.float64])


def _log_ndtr_scalar(x):
    """log Phi(x): erfc where it is accurate, a continued fraction for the Mills ratio
    R(t) = 1 / (t + 1/(t + 2/(t + 3/(t + ...)))) in the far lower tail."""
    x = float(x)
    if math.isnan(x):
        return nan
    if x < -5:
        t = -x
        f = t
        for k in range(400, 0, -1):
            f = t + k / f
        return -0.5 * t * t - 0.5 * math.log(2 * math.pi) - math.log(f)
    if x <= 0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2)))
    return math.log1p(-0.5 * math.erfc(x / math.sqrt(2)))


_log_ndtr = np.vectorize(_log_ndtr_scalar, otypes=[np.float64])


def _ndtr_ref(x):
    return 0.5 * _erfc(-_f64(x) / math.sqrt(2))


def _expit_ref(x):
    x = _f64(x)
    with np.errstate(all="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def _xlogy_ref(x, y, log=np.log):
    # 0 where x == 0 unless y is NaN (SciPy's and JAX's convention)
    x, y = np.broadcast_arrays(_f64(x), _f64(y))
    with np.errstate(all="ignore"):
        return np.where((x == 0) & ~np.isnan(y), 0.0, x * log(y))


# -- erf family ----------------------------------------------------------------------------------


@given(arrays(st.floats(-8, 8, width=32) | st.sampled_from([-inf, inf, nan, 0.0])))
def test_erf_erfc_match_math(x):
    assert_array(special.erf(x), _erf(_f64(x)), dtype=np.float32, rtol=2e-6, atol=1e-7)
    assert_array(special.erfc(x), _erfc(_f64(x)), dtype=np.float32, rtol=2e-5, atol=1e-37)


@given(arrays(st.floats(-1, 1, width=32) | st.sampled_from([-1.5, 2.0, nan])))
def test_erfinv_matches_inverse_normal_cdf(y):
    assert_array(special.erfinv(y), _erfinv_ref(y), dtype=np.float32, rtol=1e-5, atol=1e-6)


def test_erf_family_known_values_and_float64(x64):
    assert_array(
        special.erfinv(np.array([-1.0, 0.0, 0.5, 1.0])),
        [-inf, 0.0, 0.4769362762044699, inf],
        dtype=np.float64,
        rtol=1e-13,
    )
    x = np.linspace(-6, 6, 49)
    assert_array(special.erf(x), _erf(x), dtype=np.float64, rtol=1e-14, atol=1e-16)
    assert_array(special.erfc(x), _erfc(x), dtype=np.float64, rtol=1e-13, atol=0)
    y = np.linspace(-0.999, 0.999, 37)
    assert_array(special.erfinv(y), _erfinv_ref(y), dtype=np.float64, rtol=1e-12, atol=1e-15)


# -- expit, logit ---------------------------------------------------------------------------------


@given(arrays(st.floats(-100, 100, width=32) | st.sampled_from([-inf, inf, nan])))
def test_expit_matches_stable_logistic(x):
    assert_array(special.expit(x), _expit_ref(x), dtype=np.float32, rtol=2e-6, atol=1e-37)


@given(arrays(st.floats(0, 1, width=32) | st.sampled_from([-0.5, 1.5, nan])))
def test_logit_matches_definition(p):
    p64 = _f64(p)
    with np.errstate(all="ignore"):
        ref = np.log(p64 / (1 - p64))
    # f32 rounding of 1 - p amplifies near p = 1: compare in the relative error of 1 - p
    assert_array(special.logit(p), ref, dtype=np.float32, rtol=2e-5, atol=2e-5)


def test_expit_logit_roundtrip_and_ints():
    x = np.array([-3, 0, 2], np.int32)
    assert_array(special.expit(x), _expit_ref(x), dtype=np.float32, rtol=2e-6)
    assert_array(special.logit(special.expit(x)), x, dtype=np.float32, rtol=1e-5, atol=1e-6)
    assert_array(special.logit(np.array([0, 1])), [-inf, inf], dtype=np.float32)


# -- gamma family --------------------------------------------------------------------------------


def _off_poles(x):
    return not (x <= 0 and abs(x - round(x)) < 1e-2)


@given(arrays(st.floats(-30, 60, width=32).filter(_off_poles)))
def test_gammaln_matches_math_lgamma(x):
    assert_array(special.gammaln(x), _lgamma(_f64(x)), dtype=np.float32, rtol=1e-5, atol=1e-5)


@given(arrays(st.floats(-30, 60, width=32).filter(_off_poles)))
def test_digamma_matches_series_reference(x):
    with np.errstate(over="ignore"):  # -1/x for tiny x overflows float32, correctly
        ref = _digamma(_f64(x)).astype(np.float32)
    assert_array(special.digamma(x), ref, dtype=np.float32, rtol=1e-5, atol=1e-5)


def test_gamma_family_poles_and_special_values():
    x = np.array([0.0, -1.0, -2.0, inf, -inf, nan, 1e30], np.float32)
    # gammaln: +inf at the poles and at +-inf (log|Gamma(-inf)| as in JAX), NaN for NaN
    assert_array(
        special.gammaln(x),
        [inf, inf, inf, inf, inf, nan, 1e30 * (math.log(1e30) - 1)],
        dtype=np.float32,
        rtol=1e-6,
    )
    # digamma: NaN at the poles and at -inf (as in JAX), +inf at +inf
    assert_array(
        special.digamma(x),
        [nan, nan, nan, inf, nan, nan, math.log(1e30)],
        dtype=np.float32,
        rtol=1e-6,
    )


def test_gamma_family_known_values_float64(x64):
    assert_array(
        special.gammaln(np.array([1.0, 2.0, 0.5, 10.0])),
        [0.0, 0.0, 0.5 * math.log(math.pi), math.log(362880.0)],
        dtype=np.float64,
        rtol=1e-13,
        atol=1e-14,
    )
    assert_array(
        special.digamma(np.array([1.0, 0.5, 2.0])),
        [-EULER, -EULER - 2 * math.log(2), 1 - EULER],
        dtype=np.float64,
        rtol=1e-13,
    )
    x = np.linspace(-9.75, 40.25, 51)
    assert_array(special.gammaln(x), _lgamma(x), dtype=np.float64, rtol=1e-12, atol=1e-12)
    assert_array(special.digamma(x), _digamma(x), dtype=np.float64, rtol=1e-12, atol=1e-12)


def test_gamma_family_int_inputs_promote():
    n = np.arange(1, 8, dtype=np.int32)
    assert_array(
        special.gammaln(n),
        [math.lgamma(k) for k in range(1, 8)],
        dtype=np.float32,
        rtol=1e-6,
        atol=1e-6,
    )
    assert_array(special.digamma(n), _digamma(_f64(n)), dtype=np.float32, rtol=1e-6)


# -- xlogy, xlog1py, entr -------------------------------------------------------------------------

special_vals = st.sampled_from([0.0, -1.0, nan, inf, -inf])


@given(
    arrays(st.floats(-5, 5, width=32) | special_vals, max_side=3),
    arrays(st.floats(-5, 5, width=32) | special_vals, max_side=3),
)
def test_xlogy_xlog1py_match_convention(x, y):
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        with pytest.raises(TypeError, match="xlogy"):
            special.xlogy(x, y)
        return
    assert_array(special.xlogy(x, y), _xlogy_ref(x, y), dtype=np.float32, rtol=2e-6, atol=1e-6)
    assert_array(
        special.xlog1py(x, y), _xlogy_ref(x, y, np.log1p), dtype=np.float32, rtol=2e-6, atol=1e-6
    )


def test_xlogy_zero_cases_and_dtypes():
    assert_array(special.xlogy(0.0, 0.0), 0.0, dtype=np.float32)
    assert_array(special.xlogy(0.0, -1.0), 0.0)
    assert_array(special.xlogy(0.0, nan), nan)  # NaN in y propagates, as in SciPy
    assert_array(special.xlog1py(0.0, -1.0), 0.0)
    assert_array(
        special.xlogy(np.array([1, 2]), np.array([1, 2])),
        [0.0, 2 * math.log(2)],
        dtype=np.float32,
        rtol=1e-6,
    )


@given(arrays(st.floats(-2, 1e6, width=32) | st.sampled_from([0.0, inf, nan, -inf])))
def test_entr_matches_definition(x):
    x64 = _f64(x)
    with np.errstate(all="ignore"):
        ref = np.where(x64 < 0, -inf, np.where(x64 == 0, 0.0, -x64 * np.log(x64)))
    assert_array(special.entr(x), ref, dtype=np.float32, rtol=2e-6, atol=1e-6)


# -- ndtr, ndtri, log_ndtr ------------------------------------------------------------------------


@given(arrays(st.floats(-12, 12, width=32) | st.sampled_from([-inf, inf, nan])))
def test_ndtr_matches_erfc(x):
    assert_array(special.ndtr(x), _ndtr_ref(x), dtype=np.float32, rtol=2e-5, atol=1e-37)


@given(arrays(st.floats(0, 1, width=32) | st.sampled_from([0.0, 1.0, 1e-30, -0.1, 1.1, nan])))
def test_ndtri_matches_inverse_cdf(p):
    assert_array(special.ndtri(p), _inv_cdf(_f64(p)), dtype=np.float32, rtol=2e-5, atol=2e-6)


@given(arrays(st.floats(-1e4, 40, width=32) | st.sampled_from([-inf, inf, nan, -10.0, 5.0])))
def test_log_ndtr_matches_tail_reference(x):
    assert_array(special.log_ndtr(x), _log_ndtr(_f64(x)), dtype=np.float32, rtol=2e-5, atol=1e-37)


def test_normal_functions_float64(x64):
    x = np.concatenate([np.linspace(-37, 37, 75), [-1e3, -50.0, -20.5, -19.5, 8.5]])
    assert_array(special.ndtr(x[:75]), _ndtr_ref(x[:75]), dtype=np.float64, rtol=1e-12, atol=1e-300)
    # the 3-term asymptotic series below -20 is good to ~1e-11 relative (as in JAX)
    assert_array(special.log_ndtr(x), _log_ndtr(x), dtype=np.float64, rtol=1e-10, atol=1e-300)
    # above 0, log1p(-ndtr(-x)): relative accuracy where JAX's log(ndtr(x)) keeps an absolute
    # error of ~eps64 (at 2.46: 1.1e-16 of -0.00694, 130 ulps), under jit as eagerly. What is
    # left is ndtr's own: x / sqrt(2) rounded once moves erfc by ~x^2 eps relative (as in
    # scipy and JAX)
    pos = np.concatenate([np.linspace(0.01, 9.0, 61), [2.4607, 37.0]])
    want = _log_ndtr(pos)
    bound = (4 + 2 * pos * pos) * np.finfo(np.float64).eps * np.abs(want)
    for got in (special.log_ndtr(pos), fg.jit(special.log_ndtr)(pos)):
        err = np.abs(np.asarray(got, np.float64) - want)
        assert np.all(err <= bound), (pos[err > bound], (err / np.abs(want))[err > bound])
    p = np.array([1e-300, 1e-20, 0.01, 0.3, 0.5, 0.975, 1 - 1e-12])
    assert_array(special.ndtri(p), _inv_cdf(p), dtype=np.float64, rtol=1e-12)
    assert_array(special.ndtri(np.array([0.975])), [1.959963984540054], rtol=1e-13)


def test_log_ndtr_stays_finite_far_in_the_tail():
    out = np.asarray(special.log_ndtr(np.array([-50.0, -100.0], np.float32)))
    np.testing.assert_allclose(out, [_log_ndtr_scalar(-50.0), _log_ndtr_scalar(-100.0)], rtol=1e-6)
    assert np.all(np.isfinite(out))
    # series_order changes the asymptotic series, not the middle segment
    x = np.array([-15.0, 0.0], np.float32)
    assert_array(special.log_ndtr(x, series_order=0)[1], math.log(0.5))
    assert_array(special.log_ndtr(x, series_order=8), _log_ndtr(_f64(x)), rtol=1e-6)


def test_normal_functions_int_inputs_promote():
    assert_array(
        special.ndtr(np.array([0, 1], np.int32)), _ndtr_ref([0, 1]), dtype=np.float32, rtol=1e-6
    )


# -- polygamma ----------------------------------------------------------------------------------


def _polygamma_ref(m: int, x, terms: int = 100_000):
    """psi^(m)(x) in float64 from its series ``(-1)^(m+1) m! sum_k (x + k)^-(m+1)`` (valid for
    every non-pole x; not the algorithm under test), the tail past ``terms`` by Euler-Maclaurin."""
    x = np.asarray(x, np.float64)[..., None]
    a = x[..., 0] + terms
    head = np.sum((x + np.arange(terms)) ** -(m + 1.0), axis=-1)
    tail = a**-m / m + a ** -(m + 1.0) / 2 + (m + 1) / 12 * a ** -(m + 2.0)
    return (-1) ** (m + 1) * math.factorial(m) * (head + tail)


POLYGAMMA_X = np.array(
    [1e-3, 0.1, 0.3, 0.5, 0.7, 1.0, 2.5, 7.3, 30.0, 1e3, -0.3, -1.5, -2.5, -10.3, -100.7]
)


@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_polygamma_matches_series_reference(m, x64):
    # float64 within 1e-13 relative; float32 within 4 ulp (of the float64 value at the
    # float32 argument), also by reflection: these points are not next to zeros of psi^(m)
    got = special.polygamma(m, POLYGAMMA_X)
    assert_array(got, _polygamma_ref(m, POLYGAMMA_X), dtype=np.float64, rtol=1e-13, atol=0)
    x32 = POLYGAMMA_X.astype(np.float32)
    ref = _polygamma_ref(m, x32.astype(np.float64))
    ulps = np.abs(np.asarray(special.polygamma(m, x32), np.float64) - ref) / np.abs(ref)
    assert np.max(ulps / np.finfo(np.float32).eps) < 4


def test_polygamma_special_values_orders_and_dtypes():
    assert_array(
        special.polygamma(0, np.float32(2.5)), special.digamma(np.float32(2.5)), dtype=np.float32
    )
    # orders broadcast against x; negative orders are NaN (as in JAX)
    got = special.polygamma(np.array([[0], [1], [-1]]), np.array([1.0, 2.0], np.float32))
    ref = [[-EULER, 1 - EULER], _polygamma_ref(1, [1.0, 2.0]), [nan, nan]]
    assert_array(got, ref, dtype=np.float32, rtol=1e-6)
    # poles of odd orders are +inf; psi^(m)(inf) is 0
    assert_array(
        special.polygamma(1, np.array([0.0, -1.0, -4.0, inf], np.float32)),
        [inf, inf, inf, 0.0],
        dtype=np.float32,
    )
    assert special.polygamma(1, 2.0).weak_type  # both weak: a weak float, as JAX
    assert special.polygamma(1, np.array([1, 2], np.int32)).dtype == np.float32
    assert special.polygamma(1, np.float16(2.0)).dtype == np.float16
    with pytest.raises(ValueError, match="polygamma: the order n must have an integer dtype"):
        special.polygamma(1.0, 2.0)
    # a traced order (JAX: jit(polygamma)(1, 2.0) is 0.64493406)
    assert_array(fg.jit(special.polygamma)(1, 2.0), np.pi**2 / 6 - 1, dtype=np.float32, rtol=1e-6)
    orders = np.array([0, 1, 3, -1])
    assert_array(
        fg.jit(special.polygamma)(orders, np.float32(2.5)),
        [special.polygamma(int(m), np.float32(2.5)) for m in orders],
        dtype=np.float32,
        rtol=2e-6,
    )
    # it is written with primitives: it compiles, and differentiates to the next order
    x = np.array([0.3, 4.0, -1.5], np.float32)
    assert_array(
        fg.jit(lambda x: special.polygamma(2, x))(x),
        _polygamma_ref(2, x),
        dtype=np.float32,
        rtol=1e-5,
    )
    assert_array(
        fg.vmap(fg.grad(lambda x: special.polygamma(1, x)))(x),
        _polygamma_ref(2, x),
        dtype=np.float32,
        rtol=1e-4,
    )


# -- errors, identity, tracing --------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "erf",
        "erfc",
        "erfinv",
        "expit",
        "logit",
        "gammaln",
        "digamma",
        "entr",
        "ndtr",
        "ndtri",
        "log_ndtr",
    ],
)
def test_unary_rejects_non_arrays(name):
    with pytest.raises(TypeError, match=name):
        getattr(special, name)("1.0")


def test_errors_name_the_function():
    with pytest.raises(TypeError, match="ndtr"):
        special.ndtr(np.array([1.0], np.float16))  # as in JAX: float32/float64 only
    with pytest.raises(TypeError, match="log_ndtr"):
        special.log_ndtr(np.ones(2, np.float32), series_order=2.0)
    with pytest.raises(ValueError, match="log_ndtr"):
        special.log_ndtr(np.ones(2, np.float32), series_order=31)
    with pytest.raises(TypeError, match="xlogy"):
        special.xlogy([1.0], 2.0)
    with pytest.raises(TypeError, match="xlog1py"):
        special.xlog1py(np.ones(2, np.float32), np.ones(3, np.float32))


def test_float16_kept_where_supported():
    x = np.array([-1.0, 0.5, 2.0], np.float16)
    assert_array(special.erf(x), _erf(_f64(x)), dtype=np.float16, rtol=2e-3, atol=1e-3)
    assert_array(special.expit(x), _expit_ref(x), dtype=np.float16, rtol=2e-3)


def test_logsumexp_is_shared_with_nn():
    assert special.logsumexp is nn.logsumexp
    assert_array(
        special.logsumexp(np.array([1000.0, 1000.0], np.float32)), 1000 + math.log(2), rtol=1e-7
    )


@pytest.mark.parametrize(
    "name, prim",
    [
        ("erf", "erf"),
        ("erfc", "erfc"),
        ("erfinv", "erf_inv"),
        ("expit", "logistic"),
        ("gammaln", "lgamma"),
        ("digamma", "digamma"),
        ("log_ndtr", "erfc"),
    ],
)
def test_jaxpr_uses_the_lax_primitive_and_evaluates(name, prim):
    fn = getattr(special, name)
    x = np.array([-12.0, -0.5, 0.25, 3.0], np.float32)
    closed = fg.make_jaxpr(fn)(x)
    assert f"= {prim} " in str(closed), str(closed)
    [out] = closed(x)
    assert_array(out, np.asarray(fn(x)), rtol=0, atol=0)


def test_issue15_erfc_keeps_its_denormal_results(x64):
    # eager float64 erfc returned 0 from y = 27 on (and lost bits from 26.6), where the true
    # value and the compiled one are denormal: ndtr(-38.4) was 0 eagerly, 6.9e-323 under jit
    # (fuzz found.md #4)
    y = np.linspace(26.0, 27.4, 2001)
    got = np.asarray(special.erfc(fnp.asarray(y)))
    want = np.array([math.erfc(v) for v in y])
    tiny = np.finfo(np.float64).tiny
    assert np.all(np.abs(got - want) <= 4e-15 * want + 4 * 5e-324)
    assert np.any((want < tiny) & (got > 0))
    x = fnp.array([-38.4])
    assert float(special.ndtr(x)[0]) == pytest.approx(math.erfc(38.4 / math.sqrt(2)) / 2, rel=0.1)
    np.testing.assert_allclose(
        np.asarray(special.ndtr(x)), np.asarray(fg.jit(special.ndtr)(x)), rtol=0.1
    )
