"""fungrad.numpy statistics (cov, corrcoef, bincount, digitize, interp) against numpy, with
every option combination hypothesis can draw; JAX's deliberate differences from numpy are
marked NB; dtypes, errors and traced jaxprs."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from tests.helpers import assert_array

inf, nan = np.inf, np.nan


def _f64(x):
    return np.asarray(x, np.float64)


def _quiet(fn, *args, **kwargs):
    """numpy's result with its RuntimeWarnings (degrees of freedom, 0/0) silenced."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


# -- cov ----------------------------------------------------------------------------------------


def _numpy_fact(nobs, ddof, fw, aw):
    """numpy.cov's normalisation N - ddof (weighted forms), before numpy clamps it at 0."""
    w = None
    if fw is not None:
        w = _f64(fw)
    if aw is not None:
        w = _f64(aw) if w is None else w * aw
    if w is None:
        return nobs - ddof
    w_sum = w.sum()
    if ddof == 0:
        return w_sum
    if aw is None:
        return w_sum - ddof
    return w_sum - ddof * np.sum(w * aw) / w_sum


@st.composite
def cov_cases(draw):
    nvars, nobs = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    one_d = nvars == 1 and draw(st.booleans())
    rowvar = draw(st.booleans())
    elements = st.floats(-100, 100, width=32)
    shape = (nobs,) if one_d else ((nvars, nobs) if rowvar else (nobs, nvars))
    if draw(st.booleans()):
        m = draw(hnp.arrays(np.float32, shape, elements=elements))
    else:  # integer data promotes to float32
        m = draw(hnp.arrays(np.int32, shape, elements=st.integers(-100, 100)))
    y = None
    if draw(st.booleans()):
        ny = draw(st.integers(1, 2))
        yshape = (
            (nobs,) if ny == 1 and draw(st.booleans()) else ((ny, nobs) if rowvar else (nobs, ny))
        )
        y = draw(hnp.arrays(np.float32, yshape, elements=elements))
    bias = draw(st.booleans())
    ddof = draw(st.sampled_from([None, 0, 1, 2]))
    fw = draw(st.none() | hnp.arrays(np.int32, (nobs,), elements=st.integers(1, 4)))
    aw = draw(st.none() | hnp.arrays(np.float32, (nobs,), elements=st.floats(0.25, 2.0, width=32)))
    return m, y, rowvar, bias, ddof, fw, aw


@given(cov_cases())
def test_cov_matches_numpy(case):
    m, y, rowvar, bias, ddof, fw, aw = case
    nobs = m.shape[-1] if (rowvar or m.ndim == 1) else m.shape[0]
    # NB: numpy clamps a non-positive normalisation to 0 (inf results); JAX divides by it
    # (and a tiny positive one amplifies float32 rounding: keep it away from 0)
    assume(_numpy_fact(nobs, (0 if bias else 1) if ddof is None else ddof, fw, aw) > 0.5)
    m64 = _f64(m)
    try:
        ref = np.cov(
            m64,
            None if y is None else _f64(y),
            rowvar=rowvar,
            bias=bias,
            ddof=ddof,
            fweights=fw,
            aweights=aw,
        )
    except ValueError:  # one observation with rowvar=False: y (1, k) is not transposed
        with pytest.raises(ValueError, match="cov"):
            fnp.cov(m, y, rowvar=rowvar, bias=bias, ddof=ddof, fweights=fw, aweights=aw)
        return
    out = fnp.cov(m, y, rowvar=rowvar, bias=bias, ddof=ddof, fweights=fw, aweights=aw)
    scale = 1e-5 * max(1.0, float(np.max(np.abs(m64))) ** 2)
    assert_array(out, ref, dtype=np.float32, rtol=1e-4, atol=scale)


def test_cov_float64_and_int_inputs(x64):
    rng = np.random.default_rng(0)
    m = rng.normal(size=(3, 7))
    fw = np.array([1, 2, 1, 3, 1, 1, 2])
    aw = rng.uniform(0.5, 2, size=7)
    for kwargs in [
        {},
        {"bias": True},
        {"ddof": 3},
        {"fweights": fw},
        {"aweights": aw},
        {"fweights": fw, "aweights": aw, "ddof": 2},
    ]:
        assert_array(
            fnp.cov(m, **kwargs), np.cov(m, **kwargs), dtype=np.float64, rtol=1e-12, atol=1e-14
        )
        assert_array(
            fnp.cov(m.T, rowvar=False, **kwargs), np.cov(m, **kwargs), rtol=1e-12, atol=1e-14
        )
    mi = np.array([[1, 2, 3], [2, 1, 0]], np.int32)
    assert_array(fnp.cov(mi), np.cov(mi), dtype=np.float32)  # JAX: int32 -> float32 with x64
    assert_array(fnp.cov(mi, dtype=np.float32), np.cov(mi), dtype=np.float32)


def test_cov_shapes_and_degenerate_inputs():
    x = np.array([1.0, 2.0, 4.0], np.float32)
    assert_array(fnp.cov(x), np.cov(x), dtype=np.float32)  # one variable -> 0-d
    assert fnp.cov(np.zeros((0, 3), np.float32)).shape == (0, 0)
    assert_array(fnp.cov(np.zeros((2, 0), np.float32)), np.full((2, 2), nan))  # no samples
    # a single sample with ddof=1: 0/0 -> NaN, as in numpy
    assert_array(fnp.cov(np.array([[1.0], [2.0]], np.float32)), np.full((2, 2), nan))
    # NB: JAX (and fungrad) divide by N - ddof even when negative; numpy clamps it to 0
    assert_array(fnp.cov(x, ddof=5), -np.cov(x), rtol=1e-6)
    # NB: JAX takes |weights|; numpy rejects negative weights
    assert_array(
        fnp.cov(x, fweights=np.array([-1, 2, 1])),
        np.cov(x, fweights=np.array([1, 2, 1])),
        rtol=1e-6,
    )


def test_cov_errors():
    m = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="cov"):
        fnp.cov(np.ones((2, 2, 2), np.float32))
    with pytest.raises(ValueError, match="cov"):
        fnp.cov(m, np.ones((2, 2, 3), np.float32))
    with pytest.raises(TypeError, match="cov"):
        fnp.cov(m, fweights=np.array([1.0, 2.0, 1.0]))
    with pytest.raises(RuntimeError, match="cov"):
        fnp.cov(m, fweights=np.array([1, 2]))
    with pytest.raises(RuntimeError, match="cov"):
        fnp.cov(m, aweights=np.ones((3, 1)))
    with pytest.raises(ValueError, match="cov"):
        fnp.cov(m, dtype=np.int32)
    with pytest.raises(TypeError, match="cov"):
        fnp.cov("m")
    with pytest.raises(TypeError, match="cov: ddof"):
        fnp.cov(m, ddof=1.5)
    with pytest.raises(ValueError, match="cov: m and y"):
        fnp.cov(m, np.ones((2, 4), np.float32))  # different numbers of observations


# -- corrcoef -----------------------------------------------------------------------------------


@given(
    m=hnp.arrays(
        np.float32,
        st.tuples(st.integers(1, 4), st.integers(2, 6)),
        elements=st.floats(-100, 100, width=32),
    ),
    rowvar=st.booleans(),
    with_y=st.booleans(),
)
def test_corrcoef_matches_numpy(m, rowvar, with_y):
    y = (m[::-1] * 2 + 1) if with_y else None
    if not rowvar:
        m, y = m.T, None if y is None else y.T
    ref = _quiet(np.corrcoef, _f64(m), None if y is None else _f64(y), rowvar=rowvar)
    # a (near-)constant variable has an ill-conditioned variance in float32: skip those
    var = np.var(_f64(m), axis=1 if rowvar else 0)
    assume(np.all(var > 1e-6 * (1 + np.max(np.abs(_f64(m)))) ** 2))
    out = fnp.corrcoef(m, y, rowvar=rowvar)
    assert_array(out, np.clip(ref, -1, 1), dtype=np.float32, rtol=1e-4, atol=1e-4)


def test_corrcoef_special_cases():
    x = np.array([1.0, 2.0, 4.0], np.float32)
    assert_array(fnp.corrcoef(x), 1.0, dtype=np.float32)
    const = np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]], np.float32)
    assert_array(fnp.corrcoef(const), _quiet(np.corrcoef, const))  # NaN for the constant row
    m = np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]], np.float32)
    assert_array(fnp.corrcoef(m), [[1.0, -1.0], [-1.0, 1.0]], rtol=1e-6)


def test_corrcoef_float64(x64):
    m = np.random.default_rng(1).normal(size=(4, 9))
    assert_array(fnp.corrcoef(m), np.corrcoef(m), dtype=np.float64, rtol=1e-12, atol=1e-14)
    assert_array(fnp.corrcoef(m[0], m[1]), np.corrcoef(m[0], m[1]), rtol=1e-12, atol=1e-14)


# -- bincount -----------------------------------------------------------------------------------


@given(
    x=hnp.arrays(
        st.sampled_from([np.int32, np.uint8, np.int8]),
        st.integers(0, 12),
        elements=st.integers(0, 9),
    ),
    minlength=st.integers(0, 12),
    data=st.data(),
)
def test_bincount_matches_numpy(x, minlength, data):
    weights = data.draw(
        st.none()
        | hnp.arrays(st.sampled_from([np.float32, np.int32]), x.shape, elements=st.integers(-3, 3))
    )
    length = data.draw(st.none() | st.integers(0, 12))
    ref = np.bincount(x, weights, minlength=minlength)
    if length is not None:  # values past length are dropped; the result is padded to length
        ref = np.concatenate([ref, np.zeros(max(0, length - ref.size), ref.dtype)])[:length]
    out = fnp.bincount(x, weights, minlength, length=length)
    dtype = np.int32 if weights is None else weights.dtype
    assert_array(out, ref.astype(dtype), dtype=dtype)


def test_bincount_negative_values_and_bool():
    # NB: JAX counts negative values in bin 0; numpy raises
    x = np.array([-1, 0, 2, -5], np.int32)
    assert_array(fnp.bincount(x), np.array([3, 0, 1], np.int32), dtype=np.int32)
    assert_array(fnp.bincount(np.array([True, False, True])), np.array([1, 2], np.int32))
    assert_array(fnp.bincount(np.array([], np.int32), minlength=2), np.array([0, 0], np.int32))


def test_bincount_under_tracing_needs_length():
    x = np.array([0, 1, 1, 4], np.int32)
    closed = fg.make_jaxpr(lambda v: fnp.bincount(v, length=5))(x)
    assert "scatter-add" in str(closed) or "scatter_add" in str(closed), str(closed)
    [out] = closed(x)
    assert_array(out, np.bincount(x, minlength=5).astype(np.int32), dtype=np.int32)
    with pytest.raises(fg.ConcretizationTypeError, match="length"):
        fg.make_jaxpr(fnp.bincount)(x)


def test_bincount_errors():
    with pytest.raises(TypeError, match="bincount"):
        fnp.bincount(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="bincount"):
        fnp.bincount(np.ones((2, 2), np.int32))
    with pytest.raises(ValueError, match="bincount"):
        fnp.bincount(np.array([0, 1]), weights=np.ones(3, np.float32))
    with pytest.raises(ValueError, match="bincount"):
        fnp.bincount(np.array([0, 1]), minlength=-1)
    with pytest.raises(TypeError, match="bincount"):
        fnp.bincount(np.array([0, 1]), length=2.5)
    with pytest.raises(TypeError, match="bincount"):
        fnp.bincount([0, 1])


# -- digitize -----------------------------------------------------------------------------------


@given(
    x=hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5),
        elements=st.floats(-10, 10, width=32) | st.sampled_from([inf, -inf]),
    ),
    bins=st.lists(st.floats(-10, 10, width=32), min_size=1, max_size=6),
    decreasing=st.booleans(),
    right=st.booleans(),
)
def test_digitize_matches_numpy(x, bins, decreasing, right):
    bins = np.sort(np.array(bins, np.float32))
    if decreasing:
        bins = bins[::-1]
    ref = np.digitize(x, bins, right=right)
    assert_array(fnp.digitize(x, bins, right=right), ref.astype(np.int32), dtype=np.int32)


def test_digitize_int_inputs_empty_bins_and_errors():
    assert_array(
        fnp.digitize(np.array([0, 1, 5], np.int32), np.array([1, 3], np.int32)),
        np.array([0, 1, 2], np.int32),
        dtype=np.int32,
    )
    assert_array(
        fnp.digitize(np.array([0.0, 1.0], np.float32), np.zeros(0, np.float32)),
        np.array([0, 0], np.int32),
        dtype=np.int32,
    )
    with pytest.raises(ValueError, match="digitize"):
        fnp.digitize(np.ones(2, np.float32), np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="digitize"):
        fnp.digitize("x", np.ones(2, np.float32))


# -- interp -------------------------------------------------------------------------------------


@st.composite
def interp_cases(draw):
    n = draw(st.integers(1, 6))
    # increasing sample points at least 1/16 apart (NB: JAX, unlike numpy, treats segments
    # narrower than ~1e-14 as steps, so numpy is no reference for those)
    start = draw(st.floats(-10, 0, width=32))
    gaps = draw(hnp.arrays(np.float32, n - 1, elements=st.floats(0.0625, 3, width=32)))
    xp = (start + np.concatenate([[0.0], np.cumsum(gaps, dtype=np.float64)])).astype(np.float32)
    assume(np.all(np.diff(_f64(xp)) >= 0.06))
    fp = draw(hnp.arrays(np.float32, n, elements=st.floats(-100, 100, width=32)))
    x = draw(
        hnp.arrays(
            np.float32,
            hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5),
            elements=st.floats(-12, 12, width=32) | st.sampled_from([nan]),
        )
    )
    left = draw(st.none() | st.floats(-5, 5, width=32))
    right = draw(st.none() | st.floats(-5, 5, width=32))
    return x, xp, fp, left, right


@given(interp_cases())
def test_interp_matches_numpy(case):
    x, xp, fp, left, right = case
    ref = np.interp(_f64(x), _f64(xp), _f64(fp), left, right)
    out = fnp.interp(x, xp, fp, left, right)
    # float32 rounding of x - xp[i] and of the gap, relative to the gap, scales |df|:
    # a bound of a few eps32 * max|fp| * (1 + max|x| / min gap)
    min_gap = float(np.diff(_f64(xp)).min()) if xp.size > 1 else 1.0
    atol = 4 * 1.2e-7 * 100 * (1 + 13 / min_gap)
    assert_array(out, ref, dtype=np.float32, rtol=1e-5, atol=atol)


def test_interp_extrapolate_and_period():
    xp = np.array([1.0, 2.0, 4.0], np.float32)
    fp = np.array([10.0, 20.0, 0.0], np.float32)
    x = np.array([0.0, 1.5, 3.0, 5.0], np.float32)
    assert_array(
        fnp.interp(x, xp, fp, left="extrapolate", right="extrapolate"),
        [0.0, 15.0, 10.0, -10.0],
        dtype=np.float32,
    )
    assert_array(fnp.interp(x, xp, fp, left="extrapolate"), [0.0, 15.0, 10.0, 0.0])
    xq = np.array([-1.0, 0.5, 3.0, 7.25, 10.0], np.float32)
    xpp = np.array([0.0, 1.0, 2.5, 3.5], np.float32)
    fpp = np.array([1.0, 3.0, -2.0, 0.0], np.float32)
    assert_array(
        fnp.interp(xq, xpp, fpp, period=4.0),
        np.interp(xq, xpp, fpp, period=4.0),
        rtol=1e-6,
        atol=1e-6,
    )
    # a single sample point gives fp[0] everywhere (numpy agrees)
    assert_array(
        fnp.interp(np.array([0.0, 1.0, 2.0]), np.array([1.0]), np.array([7.0])), [7.0, 7.0, 7.0]
    )


def test_interp_dtypes(x64):
    xp = np.linspace(0, 1, 11)
    fp = np.sin(xp)
    x = np.linspace(-0.1, 1.1, 25)
    assert_array(
        fnp.interp(x, xp, fp), np.interp(x, xp, fp), dtype=np.float64, rtol=1e-14, atol=1e-15
    )
    out = fnp.interp(
        np.array([0, 1, 3], np.int32), np.array([1, 2], np.int32), np.array([10, 20], np.int32)
    )
    assert_array(out, [10.0, 10.0, 20.0], dtype=np.float32)  # JAX: int32 -> float32 with x64


def test_interp_errors():
    xp = np.array([1.0, 2.0], np.float32)
    with pytest.raises(ValueError, match="interp"):
        fnp.interp(1.0, xp, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="interp"):
        fnp.interp(1.0, np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="interp"):
        fnp.interp(1.0, xp, xp, left="nearest")
    with pytest.raises(ValueError, match="interp"):
        fnp.interp(1.0, xp, xp, period=np.ones(2))
    with pytest.raises(ValueError, match="interp"):
        fnp.interp(1.0, np.zeros(0), np.zeros(0))
    with pytest.raises(TypeError, match="interp"):
        fnp.interp("a", xp, xp)


# -- tracing -------------------------------------------------------------------------------------


def test_cov_and_interp_jaxprs_evaluate_like_eager():
    m = np.array([[0.0, 1.0, 3.0], [2.0, 1.0, -1.0]], np.float32)
    closed = fg.make_jaxpr(fnp.cov)(m)
    assert "= dot_general" in str(closed), str(closed)
    [out] = closed(m)
    assert_array(out, np.asarray(fnp.cov(m)), rtol=0, atol=0)
    xp = np.array([0.0, 1.0, 2.0], np.float32)
    fp = np.array([0.0, 10.0, 0.0], np.float32)
    x = np.array([0.5, 1.5, math.pi], np.float32)
    closed = fg.make_jaxpr(fnp.interp)(x, xp, fp)
    [out] = closed(x, xp, fp)
    assert_array(out, np.interp(x, xp, fp), rtol=1e-6)
