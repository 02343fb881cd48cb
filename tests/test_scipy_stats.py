"""fungrad.scipy.stats against scipy.stats (a test-only oracle): every function of every
distribution module on grids that include the support's edges, points outside it, +-inf and
NaN (float64 and float32); invalid parameters; gradients in x and the parameters
(check_grads); vmap against a Python loop; jit against eager; mode/rankdata/sem and
gaussian_kde; errors for bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.scipy import stats
from fungrad.testing import check_grads

ss = pytest.importorskip("scipy.stats")

inf, nan = np.inf, np.nan
_RNG = np.random.default_rng(1234)
X_REAL = np.concatenate(
    [_RNG.normal(size=12) * 3, [-40.0, -7.0, 0.0, 1e-3, 1.0, 7.0, 40.0, inf, -inf, nan]]
)
X_POS = np.concatenate(
    [_RNG.uniform(0, 6, size=12), [-1.0, 0.0, 1e-3, 0.3, 1.0, 5.0, 40.0, inf, nan]]
)
X_UNIT = np.concatenate([_RNG.uniform(0, 1, size=10), [-0.5, 0.0, 1e-3, 0.5, 0.999, 1.0, 1.5, nan]])
Q = np.array([0.0, 1e-12, 1e-3, 0.1, 0.3, 0.5, 0.77, 0.999, 1.0 - 1e-12, 1.0, -0.1, 1.1, nan])
K = np.array([-1.0, 0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 10.0, 30.0])

# (module, params, x grid, float64 rtol). Parameters are the positional arguments after x,
# loc and scale included where the family has them.
CONTINUOUS = [
    ("norm", (0.3, 1.7), X_REAL, 1e-9),
    ("cauchy", (0.3, 1.7), X_REAL, 1e-9),
    ("laplace", (0.3, 1.7), X_REAL, 1e-9),
    ("logistic", (0.3, 1.7), X_REAL, 1e-9),
    ("gumbel_l", (0.3, 1.7), X_REAL, 1e-9),
    ("gumbel_r", (0.3, 1.7), X_REAL, 1e-9),
    ("uniform", (-0.5, 2.0), X_REAL, 1e-9),
    ("expon", (0.3, 1.7), X_POS, 1e-9),
    ("pareto", (2.5, 0.2, 1.3), X_POS, 1e-9),
    ("t", (3.5, 0.3, 1.7), X_REAL, 1e-9),
    ("truncnorm", (-0.5, 1.2, 0.3, 1.7), X_REAL, 1e-9),
    ("truncnorm", (2.0, 3.0, 0.3, 1.7), X_REAL, 1e-8),
    ("truncnorm", (-9.0, -8.0, 0.3, 1.7), X_REAL, 1e-8),
    ("gamma", (2.5, 0.3, 1.7), X_POS, 1e-9),
    ("gamma", (0.5,), X_POS, 1e-9),
    ("chi2", (3.0, 0.1, 1.2), X_POS, 1e-9),
    ("beta", (2.0, 3.0, -0.2, 1.5), X_UNIT, 1e-9),
    ("beta", (0.5, 0.7), X_UNIT, 1e-9),
    ("gennorm", (1.5,), X_REAL, 1e-8),
    ("gennorm", (0.7,), X_REAL, 1e-8),
    ("vonmises", (2.5,), X_REAL, 1e-9),
    ("wrapcauchy", (0.4,), X_POS, 1e-9),
]
DISCRETE = [
    ("poisson", (3.2,)),
    ("poisson", (0.0,)),
    ("poisson", (2.0, 1.0)),
    ("binom", (10.0, 0.3)),
    ("binom", (10.0, 0.0)),
    ("binom", (10.0, 1.0)),
    ("binom", (8.0, 0.6, 1.0)),
    ("nbinom", (4.5, 0.3)),
    ("geom", (0.3,)),
    ("geom", (0.5, 1.0)),
    ("betabinom", (10.0, 2.0, 3.5)),
    ("bernoulli", (0.3,)),
]
X_FUNS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
Q_FUNS = ("ppf", "isf")
K_FUNS = ("logpmf", "pmf", "cdf")


def _ids(cases):
    return [f"{c[0]}{c[1]}" for c in cases]


def _funs(mod, names):
    return [n for n in names if n in mod.__all__]


def _assert_close(got, want, rtol, atol=0.0, err_msg=""):
    got = np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=err_msg)


@pytest.mark.parametrize("case", CONTINUOUS, ids=_ids(CONTINUOUS))
def test_continuous_match_scipy_float64(x64, case):
    name, params, xs, rtol = case
    mod, ref = getattr(stats, name), getattr(ss, name)
    with np.errstate(all="ignore"):
        for fun in _funs(mod, X_FUNS):
            _assert_close(
                getattr(mod, fun)(xs, *params),
                getattr(ref, fun)(xs, *params),
                rtol,
                1e-300,
                f"{name}.{fun}",
            )
        for fun in _funs(mod, Q_FUNS):
            _assert_close(
                getattr(mod, fun)(Q, *params),
                getattr(ref, fun)(Q, *params),
                1e-7,
                err_msg=f"{name}.{fun}",
            )


@pytest.mark.parametrize("case", CONTINUOUS, ids=_ids(CONTINUOUS))
def test_continuous_float32(case):
    """float32 in, float32 out, close to the float64 reference where that is representable
    (the finite grid points; tails are compared in log space)."""
    name, params, xs, _ = case
    mod, ref = getattr(stats, name), getattr(ss, name)
    xs32 = xs[np.isfinite(xs) & (np.abs(xs) < 10)].astype(np.float32)
    with np.errstate(all="ignore"):
        for fun in _funs(mod, X_FUNS):
            got = getattr(mod, fun)(xs32, *params)
            assert got.dtype == np.float32, (fun, got.dtype)
            want = getattr(ref, fun)(
                xs32.astype(np.float64), *[np.float64(np.float32(p)) for p in params]
            )
            atol = 2e-5 if fun.startswith("log") else 1e-6
            _assert_close(got, want, 2e-4, atol, f"{name}.{fun}")


@pytest.mark.parametrize("case", DISCRETE, ids=_ids(DISCRETE))
def test_discrete_match_scipy(x64, case):
    name, params = case
    mod, ref = getattr(stats, name), getattr(ss, name)
    ks = K if name != "bernoulli" else np.array([-1.0, 0.0, 1.0, 2.0])
    with np.errstate(all="ignore"):
        for fun in _funs(mod, K_FUNS):
            _assert_close(
                getattr(mod, fun)(ks, *params),
                getattr(ref, fun)(ks, *params),
                1e-9,
                err_msg=f"{name}.{fun}",
            )
        got = getattr(mod, _funs(mod, K_FUNS)[0])(ks.astype(np.float32), *params)
    assert got.dtype == np.float32  # Python-float parameters are weak: k's dtype wins


def test_discrete_float32():
    got = stats.poisson.logpmf(np.arange(6, dtype=np.int32), np.float32(2.5))
    assert got.dtype == np.float32
    _assert_close(got, ss.poisson.logpmf(np.arange(6), 2.5), 1e-5)
    _assert_close(
        stats.binom.pmf(np.arange(11), 10, np.float32(0.3)),
        ss.binom.pmf(np.arange(11), 10, 0.3),
        1e-5,
        1e-7,
    )


def test_discrete_documented_differences_from_scipy(x64):
    # JAX conventions kept: poisson is -inf at non-integer k; bernoulli.ppf(0) is 0 (SciPy
    # gives -1); betabinom floors k.
    assert float(stats.poisson.logpmf(2.5, 3.0)) == -inf
    np.testing.assert_array_equal(
        np.asarray(stats.bernoulli.ppf(Q[:10], 0.3)), [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    )
    assert np.isnan(stats.bernoulli.ppf(1.5, 0.3)) and np.isnan(stats.bernoulli.cdf(0.5, 1.5))
    _assert_close(stats.betabinom.pmf(3.7, 10, 2.0, 3.5), ss.betabinom.pmf(3, 10, 2.0, 3.5), 1e-12)


def test_poisson_entropy(x64):
    mu = np.array([0.0, 1e-3, 0.5, 3.0, 10.0, 50.0, 99.0, 100.0, 150.0, 1e3])
    _assert_close(stats.poisson.entropy(mu), ss.poisson.entropy(mu), 1e-8, 1e-12)
    assert stats.poisson.entropy(np.float32(3.0)).dtype == np.float32
    assert stats.poisson.entropy(np.ones(3), np.zeros((2, 1))).shape == (2, 3)


def test_invalid_parameters_give_nan(x64):
    x = np.array([0.2, 0.5])
    for got in [
        stats.beta.logpdf(x, -1.0, 2.0),
        stats.beta.logpdf(x, 1.0, 0.0),
        stats.gumbel_r.logpdf(x, 0.0, -1.0),
        stats.gumbel_l.cdf(x, 0.0, 0.0),
        stats.vonmises.logpdf(x, 0.0),
        stats.wrapcauchy.pdf(x, 1.0),
        stats.betabinom.logpmf(x, -1.0, 1.0, 1.0),
        stats.truncnorm.logpdf(x, 1.0, 1.0),
        stats.truncnorm.cdf(x, 2.0, 1.0),
        stats.poisson.logpmf(x, -1.0),
        stats.expon.ppf(np.array([-0.1, 1.5])),
    ]:
        assert np.isnan(np.asarray(got)).all(), got


def test_outside_support(x64):
    assert float(stats.expon.logpdf(-1.0)) == -inf and float(stats.expon.pdf(-1.0)) == 0.0
    assert float(stats.gamma.logpdf(-1.0, 2.0)) == -inf and float(stats.gamma.cdf(-1.0, 2.0)) == 0
    assert float(stats.beta.logpdf(1.5, 2.0, 2.0)) == -inf
    assert float(stats.beta.sf(-0.5, 2.0, 2.0)) == 1.0
    assert float(stats.uniform.pdf(2.0)) == 0.0 and float(stats.uniform.cdf(2.0)) == 1.0
    assert float(stats.pareto.logpdf(0.5, 2.0)) == -inf
    assert float(stats.truncnorm.logpdf(2.0, -1.0, 1.0)) == -inf
    assert float(stats.wrapcauchy.logpdf(7.0, 0.5)) == -inf
    assert float(stats.binom.logpmf(11.0, 10.0, 0.5)) == -inf
    assert float(stats.geom.pmf(0.0, 0.5)) == 0.0
    assert float(stats.dirichlet.logpdf(np.array([0.5, 0.6, -0.1]), np.ones(3))) == -inf
    assert float(stats.dirichlet.logpdf(np.array([0.5, 0.6, 0.1]), np.ones(3))) == -inf


def test_tails_stay_finite(x64):
    assert np.isfinite(float(stats.norm.logcdf(-60.0)))
    assert np.isfinite(float(stats.norm.logsf(60.0)))
    _assert_close(stats.norm.logsf(60.0), ss.norm.logsf(60.0), 1e-10)
    _assert_close(
        stats.truncnorm.logpdf(31.0, 30.0, 32.0), ss.truncnorm.logpdf(31.0, 30.0, 32.0), 1e-9
    )
    _assert_close(stats.cauchy.ppf(1e-300), ss.cauchy.ppf(1e-300), 1e-12)
    _assert_close(stats.expon.logcdf(1e-20), ss.expon.logcdf(1e-20), 1e-12)


_hyp_loc = st.floats(-5, 5)
_hyp_scale = st.floats(0.1, 5)
_hyp_x = st.lists(st.floats(-20, 20), min_size=0, max_size=6)


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(
        ["norm", "cauchy", "laplace", "logistic", "gumbel_r", "gumbel_l", "expon", "uniform"]
    ),
    _hyp_x,
    _hyp_loc,
    _hyp_scale,
)
def test_location_scale_families_hypothesis(name, xs, loc, scale):
    mod, ref = getattr(stats, name), getattr(ss, name)
    xs = np.array(xs, np.float32).reshape(-1)
    for fun in _funs(mod, ("logpdf", "cdf", "sf")):
        got = getattr(mod, fun)(xs, loc, scale)
        assert got.shape == xs.shape and got.dtype == np.float32
        with np.errstate(all="ignore"):
            want = getattr(ref, fun)(xs.astype(np.float64), np.float32(loc), np.float32(scale))
            # rounded to float32 (values past float32's range are +-inf)
            want = want.astype(np.float32)
        _assert_close(got, want, 1e-3, 1e-4, f"{name}.{fun}")


def test_shapes_broadcast_0d_and_size_0():
    out = stats.norm.logpdf(np.zeros((2, 1), np.float32), np.zeros(3), 1.0)
    assert out.shape == (2, 3)
    assert stats.gamma.logpdf(np.zeros((0, 3)), 2.0).shape == (0, 3)
    assert stats.poisson.logpmf(np.int32(3), 2.0).shape == ()
    assert stats.norm.cdf(1).dtype == np.float32  # integers promote to the default float


# -- gradients -------------------------------------------------------------------------------

GRAD_CASES = [
    (stats.norm.logpdf, (0.4, 0.3, 1.7)),
    (stats.norm.logcdf, (-2.0, 0.3, 1.7)),
    (stats.norm.logsf, (1.1, 0.3, 1.7)),
    (stats.norm.ppf, (0.3, 0.3, 1.7)),
    (stats.norm.isf, (0.3, 0.3, 1.7)),
    (stats.cauchy.logpdf, (0.4, 0.3, 1.7)),
    (stats.cauchy.ppf, (0.7, 0.3, 1.7)),
    (stats.laplace.logpdf, (0.8, 0.3, 1.7)),
    (stats.laplace.cdf, (0.8, 0.3, 1.7)),
    (stats.logistic.logpdf, (0.8, 0.3, 1.7)),
    (stats.logistic.isf, (0.2, 0.3, 1.7)),
    (stats.expon.logpdf, (0.8, 0.3, 1.7)),
    (stats.expon.logcdf, (0.8, 0.3, 1.7)),
    (stats.uniform.logpdf, (0.2, -0.5, 2.0)),
    (stats.uniform.cdf, (0.2, -0.5, 2.0)),
    (stats.pareto.logpdf, (2.0, 2.5, 0.2, 1.3)),
    (stats.pareto.ppf, (0.4, 2.5, 0.2, 1.3)),
    (stats.gumbel_r.logsf, (0.8, 0.3, 1.7)),
    (stats.gumbel_l.logcdf, (0.8, 0.3, 1.7)),
    (stats.t.logpdf, (0.4, 3.5, 0.3, 1.7)),
    (stats.truncnorm.logpdf, (0.4, -0.5, 1.2, 0.3, 1.7)),
    (stats.truncnorm.logcdf, (0.4, -0.5, 1.2, 0.3, 1.7)),
    (stats.truncnorm.logpdf, (31.0, 30.0, 32.0)),  # far tails: finite, not NaN, gradients
    (stats.truncnorm.logcdf, (-31.0, -32.0, -30.0)),
    (stats.truncnorm.logsf, (1.9, -1.0, 2.0)),
    (stats.poisson.entropy, (2.5,)),
    (stats.gamma.logpdf, (1.3, 2.5, 0.3, 1.7)),
    (stats.gamma.cdf, (1.3, 2.5)),
    (stats.chi2.logpdf, (1.3, 3.0, 0.1, 1.2)),
    (stats.chi2.sf, (1.3, 3.0)),
    (stats.beta.logpdf, (0.3, 2.0, 3.0)),
    (stats.gennorm.logpdf, (0.4, 1.5)),
    (stats.vonmises.logpdf, (0.4, 2.5)),
    (stats.wrapcauchy.logpdf, (0.4, 0.3)),
]


@pytest.mark.parametrize(
    "case",
    GRAD_CASES,
    ids=[f"{f.__module__.rsplit('.', 1)[1]}.{f.__name__}" for f, _ in GRAD_CASES],
)
def test_grads_in_x_and_parameters(x64, case):
    fun, args = case
    check_grads(fun, args, order=1, rtol=1e-4, atol=1e-6)


def test_incomplete_beta_cdfs_differentiate_in_x(x64):
    # as in JAX, betainc has no derivative in a and b, so only x is checked
    check_grads(lambda x: stats.beta.cdf(x, 2.0, 3.0), (0.3,), order=1, rtol=1e-4)
    check_grads(lambda x: stats.beta.logsf(x, 2.0, 3.0, 0.1, 1.2), (0.5,), order=1, rtol=1e-4)


@pytest.mark.parametrize(
    "fun,k,params",
    [
        (stats.poisson.logpmf, 3.0, (2.5,)),
        (stats.binom.logpmf, 3.0, (10.0, 0.3)),
        (stats.nbinom.logpmf, 3.0, (4.5, 0.3)),
        (stats.geom.logpmf, 3.0, (0.3,)),
        (stats.bernoulli.logpmf, 1.0, (0.3,)),
        (stats.betabinom.logpmf, 3.0, (10.0, 2.0, 3.5)),
    ],
    ids=["poisson", "binom", "nbinom", "geom", "bernoulli", "betabinom"],
)
def test_discrete_grads_in_parameters(x64, fun, k, params):
    check_grads(lambda *p: fun(k, *p), params, order=1, rtol=1e-4, atol=1e-6)


def test_multivariate_grads(x64):
    rng = np.random.default_rng(3)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + np.eye(3)
    check_grads(
        stats.multivariate_normal.logpdf,
        (rng.normal(size=3), rng.normal(size=3), cov),
        order=1,
        rtol=1e-4,
        atol=1e-6,
    )
    alpha = np.array([1.5, 2.0, 0.7])
    check_grads(
        lambda a_: stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), a_),
        (alpha,),
        order=1,
        rtol=1e-4,
        atol=1e-6,
    )
    check_grads(
        lambda p: stats.multinomial.logpmf(np.array([1, 2, 3]), 6, p),
        (np.array([0.2, 0.3, 0.5]),),
        order=1,
        rtol=1e-4,
        atol=1e-6,
    )


# -- vmap and jit ----------------------------------------------------------------------------

VMAP_CASES = [
    (stats.norm.logcdf, 2),
    (stats.gamma.cdf, 3),
    (stats.beta.logpdf, 3),
    (stats.truncnorm.logpdf, 3),
    (stats.t.logpdf, 2),
    (stats.poisson.logpmf, 2),
    (stats.binom.logpmf, 3),
    (stats.pareto.logsf, 2),
    (stats.gumbel_l.logpdf, 2),
    (stats.vonmises.logpdf, 2),
    (stats.betabinom.logpmf, 4),
    (stats.cauchy.ppf, 1),
]


@pytest.mark.parametrize(
    "fun,nargs",
    VMAP_CASES,
    ids=[f"{f.__module__.rsplit('.', 1)[1]}.{f.__name__}" for f, _ in VMAP_CASES],
)
def test_vmap_matches_loop(x64, fun, nargs):
    rng = np.random.default_rng(11)
    base = [0.3, 2.0, 3.0, 4.0][:nargs]
    if fun is stats.truncnorm.logpdf:
        base = [0.3, -0.5, 1.2]
    args = [b + rng.uniform(0, 0.5, size=4) for b in base]
    got = fg.vmap(fun)(*args)
    want = [np.asarray(fun(*[a[i] for a in args])) for i in range(4)]
    _assert_close(got, np.stack(want), 1e-12)
    got2 = fg.vmap(fun, in_axes=(0,) + (None,) * (nargs - 1))(args[0], *[a[0] for a in args[1:]])
    _assert_close(got2, [fun(args[0][i], *[a[0] for a in args[1:]]) for i in range(4)], 1e-12)


def test_vmap_multivariate_and_dirichlet(x64):
    rng = np.random.default_rng(12)
    a = rng.normal(size=(4, 3, 3))
    covs = a @ np.swapaxes(a, -1, -2) + np.eye(3)
    xs, means = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    got = fg.vmap(stats.multivariate_normal.logpdf)(xs, means, covs)
    want = [ss.multivariate_normal.logpdf(xs[i], means[i], covs[i]) for i in range(4)]
    _assert_close(got, want, 1e-10)
    _assert_close(stats.multivariate_normal.logpdf(xs, means, covs), want, 1e-10)  # batched
    alphas = rng.uniform(0.5, 3, size=(4, 3))
    x = np.array([0.2, 0.3, 0.5])
    got = fg.vmap(stats.dirichlet.logpdf, in_axes=(None, 0))(x, alphas)
    _assert_close(got, [ss.dirichlet.logpdf(x, al) for al in alphas], 1e-10)


@pytest.mark.parametrize(
    "fun,args",
    [
        (stats.norm.logcdf, (np.linspace(-30, 5, 6, dtype=np.float32), 0.3, 1.7)),
        (stats.gamma.logpdf, (np.linspace(-1, 5, 6, dtype=np.float32), 2.5)),
        (stats.poisson.logpmf, (np.arange(6, dtype=np.float32), 2.5)),
        (stats.truncnorm.logpdf, (np.linspace(-1, 2, 6, dtype=np.float32), -0.5, 1.2)),
        (
            stats.multivariate_normal.logpdf,
            (
                np.ones((2, 2), np.float32),
                np.zeros(2, np.float32),
                np.array([[2.0, 0.3], [0.3, 1.0]], np.float32),
            ),
        ),
    ],
    ids=["norm", "gamma", "poisson", "truncnorm", "multivariate_normal"],
)
def test_jit_matches_eager(fun, args):
    _assert_close(fg.jit(fun)(*args), np.asarray(fun(*args)), 1e-5, 1e-6)


# -- multivariate families -------------------------------------------------------------------


def test_multivariate_normal_matches_scipy(x64):
    rng = np.random.default_rng(4)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + np.eye(3)
    mean, x = rng.normal(size=3), rng.normal(size=(5, 3))
    mvn = stats.multivariate_normal
    _assert_close(mvn.logpdf(x, mean, cov), ss.multivariate_normal.logpdf(x, mean, cov), 1e-10)
    _assert_close(mvn.pdf(x, mean, cov), ss.multivariate_normal.pdf(x, mean, cov), 1e-10)
    _assert_close(mvn.logpdf(x, mean, 2.0), ss.multivariate_normal.logpdf(x, mean, 2.0), 1e-10)
    _assert_close(mvn.logpdf(0.3, 0.1, 2.0), ss.multivariate_normal.logpdf(0.3, 0.1, 2.0), 1e-12)
    assert (
        mvn.logpdf(x.astype(np.float32), mean.astype(np.float32), cov.astype(np.float32)).dtype
        == np.float32
    )
    with pytest.raises(ValueError, match=r"cov must be a scalar or have shape \(\.\.\., 3, 3\)"):
        mvn.logpdf(x, mean, np.eye(2))
    with pytest.raises(ValueError, match="allow_singular=True is not supported"):
        mvn.logpdf(x, mean, cov, allow_singular=True)


def test_dirichlet_matches_scipy(x64):
    rng = np.random.default_rng(5)
    alpha = np.array([1.5, 2.0, 0.7])
    xs = rng.dirichlet(alpha, size=4).T
    _assert_close(stats.dirichlet.logpdf(xs, alpha), ss.dirichlet.logpdf(xs, alpha), 1e-10)
    _assert_close(stats.dirichlet.pdf(xs[:2], alpha), ss.dirichlet.pdf(xs, alpha), 1e-10)
    with pytest.raises(ValueError, match="alpha must be one-dimensional"):
        stats.dirichlet.logpdf(xs, np.ones((3, 1)))
    with pytest.raises(ValueError, match="K = 3"):
        stats.dirichlet.logpdf(np.ones(5) / 5, alpha)


def test_multinomial_matches_scipy(x64):
    x = np.array([[1, 2, 3], [0, 0, 6], [2, 2, 1]])
    p = np.array([0.2, 0.3, 0.5])
    _assert_close(stats.multinomial.logpmf(x, 6, p), ss.multinomial.logpmf(x, 6, p), 1e-12)
    _assert_close(stats.multinomial.pmf(x[0], 6, p), ss.multinomial.pmf(x[0], 6, p), 1e-12)
    with pytest.raises(ValueError, match="integer dtype"):
        stats.multinomial.logpmf(x.astype(float), 6, p)


# -- mode, rankdata, sem ---------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**16), st.sampled_from([0, 1, -1, None]), st.booleans())
def test_mode_matches_scipy(seed, axis, keepdims):
    x = np.random.default_rng(seed).integers(0, 4, size=(3, 6)).astype(np.float32)
    got, want = stats.mode(x, axis=axis, keepdims=keepdims), ss.mode(x, axis, keepdims=keepdims)
    np.testing.assert_array_equal(np.asarray(got.mode), want.mode)
    np.testing.assert_array_equal(np.asarray(got.count), want.count)


def test_mode_sem_vmap_and_jit():
    x = np.random.default_rng(13).integers(0, 3, size=(4, 6)).astype(np.float32)
    got = fg.vmap(lambda r: stats.mode(r).mode)(x)
    np.testing.assert_array_equal(np.asarray(got), [ss.mode(r).mode for r in x])
    res = fg.jit(stats.mode, static_argnames="axis")(x, axis=1)
    np.testing.assert_array_equal(np.asarray(res.count), ss.mode(x, axis=1).count)
    _assert_close(fg.jit(stats.sem)(x), ss.sem(x), 1e-5)
    _assert_close(fg.vmap(stats.sem)(x), [ss.sem(r) for r in x], 1e-5)


def test_mode_edge_cases():
    res = stats.mode(np.array([nan, nan, 1.0]))
    assert np.isnan(res.mode) and int(res.count) == 2
    res = stats.mode(np.array([3, 1, 1, 3], np.int32))
    assert int(res.mode) == 1 and int(res.count) == 2 and res.mode.dtype == np.int32
    empty = stats.mode(np.zeros((0, 3)))
    assert np.isnan(np.asarray(empty.mode)).all() and empty.mode.shape == (3,)
    assert stats.mode(5.0).mode.shape == ()
    assert stats.mode(np.zeros((2, 0)), axis=0).count.shape == (0,)
    with pytest.raises(ValueError, match="nan_policy='omit' is not supported"):
        stats.mode(np.ones(3), nan_policy="omit")


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**16),
    st.sampled_from(["average", "min", "max", "dense", "ordinal"]),
    st.sampled_from([None, 0, 1]),
)
def test_rankdata_matches_scipy(seed, method, axis):
    x = np.random.default_rng(seed).integers(0, 4, size=(3, 5)).astype(np.float32)
    got = stats.rankdata(x, method, axis=axis)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(got), ss.rankdata(x, method, axis=axis))


def test_rankdata_nan_jit_vmap_and_errors():
    x = np.array([[1.0, nan, 2.0], [3.0, 1.0, 1.0]])
    np.testing.assert_array_equal(
        np.asarray(stats.rankdata(x, axis=1)), [[nan, nan, nan], [3.0, 1.5, 1.5]]
    )
    assert np.isnan(np.asarray(stats.rankdata(x))).all()
    y = np.array([[4.0, 1.0, 4.0], [2.0, 2.0, 0.0]], np.float32)
    np.testing.assert_array_equal(
        np.asarray(fg.vmap(stats.rankdata)(y)), [ss.rankdata(r) for r in y]
    )
    np.testing.assert_array_equal(np.asarray(fg.jit(stats.rankdata)(y)), ss.rankdata(y))
    assert stats.rankdata(np.zeros(0)).shape == (0,)
    assert stats.rankdata(np.zeros((2, 0)), "min", axis=1).shape == (2, 0)
    with pytest.raises(ValueError, match="unknown method"):
        stats.rankdata(y, "bogus")


def test_sem_matches_scipy():
    x = np.random.default_rng(6).normal(size=(4, 5)).astype(np.float32)
    for axis in (0, 1, None):
        _assert_close(stats.sem(x, axis=axis), ss.sem(x, axis=axis), 1e-5)
    _assert_close(stats.sem(x, ddof=0, keepdims=True), ss.sem(x, ddof=0, keepdims=True), 1e-5)
    x[1, 2] = nan
    _assert_close(stats.sem(x, nan_policy="omit"), ss.sem(x, nan_policy="omit"), 1e-5)
    assert np.isnan(np.asarray(stats.sem(x))[2])
    check_grads(lambda a: stats.sem(a), (x[:, :2].astype(np.float64) + 1,), order=1, rtol=1e-2)
    with pytest.raises(ValueError, match="nan_policy='raise' is not supported"):
        stats.sem(x, nan_policy="raise")


# -- gaussian_kde ----------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("bw", [None, "silverman", 0.4])
def test_gaussian_kde_matches_scipy(x64, d, bw):
    rng = np.random.default_rng(7)
    data, w = rng.normal(size=(d, 25)), rng.uniform(size=25)
    kde, ref = stats.gaussian_kde(data, bw, w), ss.gaussian_kde(data, bw, w)
    pts = rng.normal(size=(d, 6)) * 2
    _assert_close(kde(pts), ref(pts), 1e-10)
    _assert_close(kde.logpdf(pts), ref.logpdf(pts), 1e-10)
    _assert_close(kde.covariance, ref.covariance, 1e-10)
    _assert_close(kde.neff, ref.neff, 1e-12)
    assert (kde.d, kde.n) == (d, 25)
    _assert_close(
        kde.integrate_gaussian(np.zeros(d), np.eye(d)),
        ref.integrate_gaussian(np.zeros(d), np.eye(d)),
        1e-10,
    )
    other = (stats.gaussian_kde(data[:, :7]), ss.gaussian_kde(data[:, :7]))
    _assert_close(kde.integrate_kde(other[0]), ref.integrate_kde(other[1]), 1e-10)
    if d == 1:
        _assert_close(kde.integrate_box_1d(-0.5, 1.0), ref.integrate_box_1d(-0.5, 1.0), 1e-10)


def test_gaussian_kde_transforms_and_errors(x64):
    data = np.random.default_rng(8).normal(size=(2, 20)).astype(np.float32)
    kde = stats.gaussian_kde(data, bw_method=lambda k: 0.5)
    pts = np.array([[0.0, 1.0], [0.5, -1.0]], np.float32)
    _assert_close(
        fg.jit(lambda k, p: k.logpdf(p))(kde, pts), np.asarray(kde.logpdf(pts)), 1e-5, 1e-5
    )
    g = fg.grad(lambda p: fnp.sum(kde.logpdf(p)))(pts)
    assert g.shape == pts.shape and np.isfinite(np.asarray(g)).all()
    check_grads(
        lambda p: stats.gaussian_kde(data.astype(np.float64)).logpdf(p),
        (pts.astype(np.float64),),
        order=1,
        rtol=1e-3,
    )
    sample = kde.resample(fg.random.PRNGKey(0), (500,))
    assert sample.shape == (2, 500) and sample.dtype == np.float32
    np.testing.assert_allclose(np.asarray(fnp.mean(sample, axis=1)), data.mean(1), atol=0.25)
    with pytest.raises(ValueError, match="more than one element"):
        stats.gaussian_kde(np.ones(1))
    with pytest.raises(ValueError, match="bw_method must be"):
        stats.gaussian_kde(data, "bogus")
    with pytest.raises(ValueError, match="weights must have shape"):
        stats.gaussian_kde(data, weights=np.ones(3))
    with pytest.raises(ValueError, match="points have dimension 3"):
        kde.evaluate(np.ones((3, 2)))
    with pytest.raises(ValueError, match="must be 1-D"):
        kde.integrate_box_1d(0.0, 1.0)


def test_bad_input_errors():
    with pytest.raises(TypeError, match="norm.logpdf"):
        stats.norm.logpdf([1.0, 2.0])
    with pytest.raises((TypeError, ValueError), match="norm.cdf: incompatible shapes"):
        stats.norm.cdf(np.ones(3), np.ones(2))
