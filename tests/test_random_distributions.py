"""fungrad.random's distributions beyond uniform/normal: gamma and its family, the discrete
samplers, and the implicit-reparameterisation gradient of gamma.

* Values: for a fixed key every sampler gives jax.random's numbers (GOLDEN was produced by JAX
  0.10.2 on CPU; the samplers use the same algorithms and key splits). Floats agree to a few
  ulps (log/pow/erf_inv round differently here), integers exactly.
* Distributions: many samples against scipy.stats (Kolmogorov-Smirnov for continuous laws,
  mean/variance for discrete ones), independent of JAX.
* Gradients: gamma's d sample / d a against the implicit-function formula with scipy's
  gammainc; check_grads through the reparameterised samplers.
* vmap against a Python loop over keys; jit against eager.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
from fungrad import random
from fungrad.random_gamma import random_gamma_grad
from fungrad.testing import check_grads

KEY = random.PRNGKey(1234)
A = np.array([0.05, 0.7, 1.0, 3.5, 30.0], np.float32)

# jax.random outputs for KEY (JAX 0.10.2, CPU): name -> (shape, values).
GOLDEN = {
    "gamma": (
        (5,),
        [
            4.5290536945685744e-05,
            0.3992314636707306,
            0.21409642696380615,
            1.6106321811676025,
            25.747888565063477,
        ],
    ),
    "gamma_scalar_shape": (
        (2, 2),
        [2.765296697616577, 3.743901252746582, 0.8554251790046692, 0.626985490322113],
    ),
    "loggamma": (
        (5,),
        [
            -10.002411842346191,
            -0.9182137250900269,
            -1.5413286685943604,
            0.47662681341171265,
            3.248352527618408,
        ],
    ),
    "beta": (
        (5,),
        [2.772751713564503e-06, 0.7177257537841797, 0.748509407043457, 0.9090345501899719, 1.0],
    ),
    "dirichlet": (
        (2, 3),
        [
            7.383851334452629e-05,
            0.6508786082267761,
            0.34904757142066956,
            9.801379928831011e-05,
            0.5832735300064087,
            0.41662847995758057,
        ],
    ),
    "chisquare": (
        (5,),
        [
            2.663171461136926e-09,
            0.08090855181217194,
            0.675428569316864,
            0.9649555087089539,
            23.93081283569336,
        ],
    ),
    "f": (
        (5,),
        [
            4.045577586852308e-17,
            0.030580252408981323,
            1.1897798776626587,
            2.3445093631744385,
            0.9711062908172607,
        ],
    ),
    "t": (
        (5,),
        [
            -141592832.0,
            2.3064804077148438,
            0.33831217885017395,
            -2.9219257831573486,
            -1.5347557067871094,
        ],
    ),
    "pareto": (
        (5,),
        [
            2.4766791473430528e17,
            10.405452728271484,
            1.580838918685913,
            1.7125158309936523,
            1.005098819732666,
        ],
    ),
    "lognormal": (
        (5,),
        [
            1.735943078994751,
            1.5396130084991455,
            0.8442208170890808,
            1.671335220336914,
            0.584621787071228,
        ],
    ),
    "rayleigh": (
        (5,),
        [
            0.02692730724811554,
            0.4598052501678467,
            1.4150882959365845,
            2.010928153991699,
            59.32749557495117,
        ],
    ),
    "wald": (
        (5,),
        [
            0.061842162162065506,
            0.5244849324226379,
            0.6937626600265503,
            0.2447967529296875,
            0.5506057739257812,
        ],
    ),
    "triangular": (
        (5,),
        [
            1.1702669858932495,
            1.0051817893981934,
            0.1970611810684204,
            1.1191041469573975,
            -0.25711989402770996,
        ],
    ),
    "weibull_min": (
        (5,),
        [
            3.17749285697937,
            2.7809557914733887,
            1.1882622241973877,
            3.049607515335083,
            0.5710646510124207,
        ],
    ),
    "maxwell": (
        (5,),
        [
            1.4409772157669067,
            1.5219380855560303,
            0.8959431648254395,
            1.6650018692016602,
            2.17773175239563,
        ],
    ),
    "rademacher": ((8,), [-1, -1, 1, -1, 1, -1, -1, 1]),
    "double_sided_maxwell": (
        (4,),
        [-1.1560215950012207, 5.790657997131348, 5.023300647735596, 2.595869541168213],
    ),
    "generalized_normal": (
        (5,),
        [
            -0.9298716187477112,
            1.0222561359405518,
            0.8768102526664734,
            0.25173595547676086,
            0.4202147126197815,
        ],
    ),
    "ball": (
        (2, 3),
        [
            0.1621350795030594,
            -0.199422687292099,
            -0.6320566534996033,
            0.4536915719509125,
            0.8571998476982117,
            -0.06978479027748108,
        ],
    ),
    "geometric": ((3,), [3, 1, 1]),
    "poisson": ((7,), [0, 0, 1, 3, 9, 66, 2049]),
    "binomial": ((7,), [0.0, 1.0, 12.0, 59.0, 19.0, 48.0, 2.0]),
    "multinomial": ((2, 3), [3.0, 6.0, 1.0, 57.0, 149.0, 94.0]),
    "random_gamma_grad": (
        (7,),
        [
            5.119692802429199,
            0.09354404360055923,
            1.9379113912582397,
            0.6507936716079712,
            1.112329363822937,
            0.9498277306556702,
            0.0,
        ],
    ),
    "gamma_grad": (
        (5,),
        [
            0.00860974844545126,
            0.9191662073135376,
            0.48183876276016235,
            0.6928425431251526,
            0.9306773543357849,
        ],
    ),
    "gumbel_highest": (
        (5,),
        [
            -0.6944183111190796,
            -0.4944716691970825,
            0.7809827923774719,
            -0.6327989101409912,
            1.8801000118255615,
        ],
    ),
    "categorical_highest": ((8,), [2, 1, 2, 2, 2, 0, 0, 2]),
    "loggamma_grad": (
        (5,),
        [
            190.10035705566406,
            2.3023388385772705,
            2.2505686283111572,
            0.430168092250824,
            0.036145761609077454,
        ],
    ),
}

SAMPLES = {
    "gamma": lambda: random.gamma(KEY, A),
    "gamma_scalar_shape": lambda: random.gamma(KEY, 2.0, (2, 2)),
    "loggamma": lambda: random.loggamma(KEY, A),
    "beta": lambda: random.beta(KEY, A, A[::-1]),
    "dirichlet": lambda: random.dirichlet(KEY, A[:3], (2,)),
    "chisquare": lambda: random.chisquare(KEY, A),
    "f": lambda: random.f(KEY, A, 4.0),
    "t": lambda: random.t(KEY, A),
    "pareto": lambda: random.pareto(KEY, A),
    "lognormal": lambda: random.lognormal(KEY, 0.5, (5,)),
    "rayleigh": lambda: random.rayleigh(KEY, A),
    "wald": lambda: random.wald(KEY, A),
    "triangular": lambda: random.triangular(KEY, -1.0, 0.3, 2.0, (5,)),
    "weibull_min": lambda: random.weibull_min(KEY, 2.0, 1.5, (5,)),
    "maxwell": lambda: random.maxwell(KEY, (5,)),
    "rademacher": lambda: random.rademacher(KEY, (8,)),
    "double_sided_maxwell": lambda: random.double_sided_maxwell(KEY, 1.0, 2.0, (4,)),
    "generalized_normal": lambda: random.generalized_normal(KEY, 1.5, (5,)),
    "ball": lambda: random.ball(KEY, 3, 2, (2,)),
    "geometric": lambda: random.geometric(KEY, np.array([0.05, 0.5, 0.95], np.float32)),
    "poisson": lambda: random.poisson(
        KEY, np.array([0.0, 0.3, 4.0, 9.9, 10.0, 60.0, 2000.0], np.float32)
    ),
    "binomial": lambda: random.binomial(
        KEY,
        np.array([0.0, 5.0, 20.0, 100.0, 1000.0, 50.0, 7.5], np.float32),
        np.array([0.3, 0.3, 0.7, 0.5, 0.02, 0.95, 0.5], np.float32),
    ),
    "multinomial": lambda: random.multinomial(
        KEY,
        np.array([10.0, 300.0], np.float32),
        np.array([0.2, 0.5, 0.3], np.float32),
        shape=(2, 3),
    ),
    "random_gamma_grad": lambda: random_gamma_grad(
        fg.numpy.asarray(np.array([0.1, 0.5, 1.0, 2.5, 10.0, 100.0, 3.0], np.float32)),
        fg.numpy.asarray(np.array([0.5, 0.01, 3.0, 1.0, 12.0, 90.0, 0.0], np.float32)),
    ),
    "gumbel_highest": lambda: random.gumbel(KEY, (5,), mode="highest"),
    "categorical_highest": lambda: random.categorical(
        KEY, np.log(np.array([0.2, 0.3, 0.5], np.float32)), shape=(8,), mode="highest"
    ),
    "gamma_grad": lambda: fg.grad(lambda a: random.gamma(KEY, a).sum())(A),
    "loggamma_grad": lambda: fg.grad(lambda a: random.loggamma(KEY, a).sum())(A),
}

INT_RESULTS = {"rademacher", "geometric", "poisson", "categorical_highest"}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_same_numbers_as_jax(name):
    shape, values = GOLDEN[name]
    out = np.asarray(SAMPLES[name]())
    assert out.shape == shape
    if name in INT_RESULTS:
        assert out.dtype == np.int32
        np.testing.assert_array_equal(out, np.array(values).reshape(shape))
    else:
        assert out.dtype == np.float32
        # t, f and pareto amplify a few ulps of a tiny gamma / exponential sample; wald's
        # formula cancels (mean=30 loses ~12 bits in float32, in JAX as here).
        rtol = {"t": 1e-4, "f": 1e-4, "pareto": 1e-4, "wald": 5e-4}.get(name, 2e-5)
        np.testing.assert_allclose(
            out, np.array(values, np.float32).reshape(shape), rtol=rtol, atol=1e-30
        )


def test_key_impl():
    assert random.key_impl(KEY) == "threefry2x32"
    assert random.key_impl(random.split(KEY, 3)) == "threefry2x32"
    with pytest.raises(TypeError, match="key_impl: expected a single PRNG key"):
        random.key_impl(np.zeros(3, np.uint32))


def test_exp_loggamma_is_gamma():
    a = np.array([0.3, 1.0, 2.0, 9.0], np.float32)
    np.testing.assert_allclose(
        np.exp(np.asarray(random.loggamma(KEY, a))), np.asarray(random.gamma(KEY, a)), rtol=1e-5
    )


# -- distributions against scipy.stats ---------------------------------------------------------

N = 2000
CONTINUOUS = {
    "gamma_small": (lambda k: random.gamma(k, 0.4, (N,)), scipy.stats.gamma(0.4)),
    "gamma_large": (lambda k: random.gamma(k, 6.0, (N,)), scipy.stats.gamma(6.0)),
    "beta": (lambda k: random.beta(k, 0.8, 2.5, (N,)), scipy.stats.beta(0.8, 2.5)),
    "chisquare": (lambda k: random.chisquare(k, 3.0, (N,)), scipy.stats.chi2(3.0)),
    "f": (lambda k: random.f(k, 4.0, 7.0, (N,)), scipy.stats.f(4.0, 7.0)),
    "t": (lambda k: random.t(k, 3.0, (N,)), scipy.stats.t(3.0)),
    "pareto": (lambda k: random.pareto(k, 2.5, (N,)), scipy.stats.pareto(2.5)),
    "lognormal": (lambda k: random.lognormal(k, 0.7, (N,)), scipy.stats.lognorm(0.7)),
    "rayleigh": (lambda k: random.rayleigh(k, 2.0, (N,)), scipy.stats.rayleigh(scale=2.0)),
    "wald": (lambda k: random.wald(k, 1.5, (N,)), scipy.stats.invgauss(1.5)),
    "triangular": (
        lambda k: random.triangular(k, -1.0, 0.5, 2.0, (N,)),
        scipy.stats.triang(0.5, loc=-1.0, scale=3.0),
    ),
    "weibull_min": (
        lambda k: random.weibull_min(k, 2.0, 1.7, (N,)),
        scipy.stats.weibull_min(1.7, scale=2.0),
    ),
    "maxwell": (lambda k: random.maxwell(k, (N,)), scipy.stats.maxwell()),
    "double_sided_maxwell": (lambda k: random.double_sided_maxwell(k, 0.5, 2.0, (N,)), None),
    "generalized_normal": (
        lambda k: random.generalized_normal(k, 1.3, (N,)),
        scipy.stats.gennorm(1.3),
    ),
    "gumbel_highest": (lambda k: random.gumbel(k, (N,), mode="highest"), scipy.stats.gumbel_r()),
}


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_ks_against_scipy(name):
    sampler, dist = CONTINUOUS[name]
    x = np.asarray(sampler(random.PRNGKey(5)), np.float64)
    if name == "double_sided_maxwell":
        # |X - loc| / scale is Maxwell, so sign * ((X - loc) / scale)**2 / 2 is a two-sided
        # Gamma(3/2) (scipy's dgamma)
        y = (x - 0.5) / 2.0
        x, dist = np.sign(y) * y * y / 2, scipy.stats.dgamma(1.5)
    assert np.all(np.isfinite(x))
    assert scipy.stats.kstest(x, dist.cdf).pvalue > 1e-3


def test_dirichlet_moments():
    alpha = np.array([0.5, 2.0, 4.0], np.float32)
    x = np.asarray(random.dirichlet(random.PRNGKey(2), alpha, (N,)), np.float64)
    assert x.shape == (N, 3)
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-5)
    ref = scipy.stats.dirichlet(alpha)
    np.testing.assert_allclose(x.mean(0), ref.mean(), atol=0.02)
    np.testing.assert_allclose(x.var(0), ref.var(), rtol=0.15)


def test_ball_inside_and_uniform_radius():
    d = 3
    x = np.asarray(random.ball(random.PRNGKey(3), d, 2, (N,)), np.float64)
    r = np.linalg.norm(x, axis=-1)
    assert x.shape == (N, d) and np.all(r <= 1.0)
    # uniform in the ball: P(r <= s) = s**d
    assert scipy.stats.kstest(r**d, "uniform").pvalue > 1e-3


def _moments_close(x, mean, var, tol=0.1):
    x = np.asarray(x, np.float64)
    assert abs(x.mean() - mean) < tol * max(1.0, np.sqrt(var)) + 4 * np.sqrt(var / x.size)
    assert abs(x.var() - var) / max(var, 1e-9) < 0.15


@pytest.mark.parametrize("lam", [0.5, 4.0, 15.0, 300.0])
def test_poisson_moments(lam):
    x = random.poisson(random.PRNGKey(7), lam, (N,))
    assert x.dtype == np.int32 and np.all(np.asarray(x) >= 0)
    _moments_close(x, lam, lam)


@pytest.mark.parametrize("n,p", [(5, 0.3), (40, 0.2), (200, 0.5), (60, 0.9), (1000, 0.01)])
def test_binomial_moments(n, p):
    x = np.asarray(random.binomial(random.PRNGKey(8), n, p, (N,)))
    assert x.dtype == np.float32 and np.all((x >= 0) & (x <= n)) and np.all(x == np.floor(x))
    _moments_close(x, n * p, n * p * (1 - p))


@pytest.mark.parametrize("p", [0.05, 0.3, 0.9])
def test_geometric_moments(p):
    x = np.asarray(random.geometric(random.PRNGKey(9), p, (N,)))
    assert np.all(x >= 1)
    _moments_close(x, 1 / p, (1 - p) / p**2)


def test_multinomial_counts():
    p = np.array([0.1, 0.6, 0.3], np.float32)
    x = np.asarray(random.multinomial(random.PRNGKey(4), 50.0, p, shape=(N, 3)), np.float64)
    np.testing.assert_array_equal(x.sum(-1), 50.0)
    ref = scipy.stats.multinomial(50, p)
    np.testing.assert_allclose(x.mean(0), ref.mean(), rtol=0.05)


def test_rademacher_values():
    x = np.asarray(random.rademacher(random.PRNGKey(1), (N,), dtype=np.float32))
    assert x.dtype == np.float32 and set(np.unique(x)) == {-1.0, 1.0}
    assert abs(x.mean()) < 0.1


# -- edge cases ----------------------------------------------------------------------------------


def test_size_zero_and_scalar_shapes():
    assert random.gamma(KEY, 2.0, (0, 3)).shape == (0, 3)
    assert random.beta(KEY, np.ones((0,)), 1.0).shape == (0,)
    assert random.poisson(KEY, 3.0, (0,)).shape == (0,)
    assert random.binomial(KEY, 5, 0.5, (2, 0)).shape == (2, 0)
    for f in (
        lambda: random.gamma(KEY, 2.0),
        lambda: random.t(KEY, 3.0),
        lambda: random.poisson(KEY, 3.0),
        lambda: random.geometric(KEY, 0.5),
        lambda: random.binomial(KEY, 4, 0.5),
        lambda: random.maxwell(KEY),
    ):
        assert f().shape == ()


def test_invalid_parameters_give_nan_or_edge_values():
    assert np.isnan(float(random.binomial(KEY, np.nan, 0.5)))
    assert np.isnan(float(random.binomial(KEY, -1.0, 0.5)))
    assert np.isnan(float(random.binomial(KEY, 5.0, np.nan)))
    assert float(random.binomial(KEY, np.inf, 0.5)) == np.inf
    assert int(random.poisson(KEY, 0.0)) == 0
    np.testing.assert_array_equal(
        np.asarray(random.binomial(KEY, 7.0, np.array([0.0, 1.0]))), [0.0, 7.0]
    )
    g = np.asarray(
        random_gamma_grad(
            fg.numpy.asarray(np.array([-1.0, 2.0, np.nan])),
            fg.numpy.asarray(np.array([1.0, -1.0, 1.0])),
        )
    )
    assert np.all(np.isnan(g))


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (
            lambda: random.gamma(KEY, 1.0, dtype=np.int32),
            ValueError,
            "gamma: dtype must be a float",
        ),
        (
            lambda: random.poisson(KEY, 1.0, dtype=np.float32),
            ValueError,
            "poisson: dtype must be an",
        ),
        (lambda: random.geometric(KEY, 0.5, dtype=np.float32), ValueError, "geometric: dtype"),
        (lambda: random.beta(KEY, np.ones(3), 1.0, (2,)), ValueError, "beta"),
        (lambda: random.dirichlet(KEY, 1.0), ValueError, "dirichlet: alpha must have at least"),
        (lambda: random.dirichlet(KEY, np.ones((2, 3)), (4,)), ValueError, "dirichlet"),
        (lambda: random.ball(KEY, 2.5), TypeError, "ball: the dimension d must be a concrete"),
        (lambda: random.gamma(np.zeros(3, np.uint32), 1.0), TypeError, "gamma: expected a single"),
        (lambda: random.multinomial(KEY, 10.0, np.float32(0.5)), ValueError, "multinomial: p"),
        (lambda: random.t(KEY, "3"), TypeError, "t"),
        # as JAX (TypePromotionError, a ValueError): array parameters must cast safely to dtype
        (
            lambda: random.pareto(KEY, np.float32(2.0), dtype=np.float16),
            ValueError,
            "pareto: cannot safely cast a parameter of dtype float32 to the sample dtype float16",
        ),
        (lambda: random.lognormal(KEY, dtype=np.float16), ValueError, "lognormal: cannot safely"),
    ],
)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# -- gradients -----------------------------------------------------------------------------------


def _implicit_gamma_grad(a, x, h=1e-6):
    """-(dP/da) / (dP/dx) with P = scipy's regularized lower incomplete gamma."""
    dp_da = (scipy.special.gammainc(a + h, x) - scipy.special.gammainc(a - h, x)) / (2 * h)
    return -dp_da / scipy.stats.gamma(a).pdf(x)


@settings(max_examples=15)
@given(st.floats(0.05, 50.0), st.integers(0, 2**31 - 1))
def test_gamma_grad_is_implicit_reparameterisation(a, seed):
    key = random.PRNGKey(seed)
    a32 = np.float32(a)
    x = float(random.gamma(key, a32))
    g = float(fg.grad(lambda a: random.gamma(key, a))(a32))
    if x < 1e-30:  # tiny samples: the pdf underflows; the gradient is ~0 as well
        assert abs(g) < 1e-20
        return
    np.testing.assert_allclose(g, _implicit_gamma_grad(float(a32), x), rtol=2e-3, atol=1e-6)
    gl = float(fg.grad(lambda a: random.loggamma(key, a))(a32))
    np.testing.assert_allclose(gl, g / x, rtol=2e-3, atol=1e-6)


def test_gamma_grad_jvp_vmap_jit_agree():
    a = np.array([0.3, 2.0, 11.0], np.float32)

    def f(a):
        return random.gamma(KEY, a)

    _, tangent = fg.jvp(f, (a,), (np.ones(3, np.float32),))
    rev = fg.grad(lambda a: f(a).sum())(a)
    jitted = fg.jit(fg.grad(lambda a: f(a).sum()))(a)
    np.testing.assert_allclose(np.asarray(tangent), np.asarray(rev), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(rev))


@pytest.mark.parametrize(
    "name,f,args",
    [
        ("pareto", lambda b: random.pareto(KEY, b, (3,)), (np.float32(2.0),)),
        ("lognormal", lambda s: random.lognormal(KEY, s, (3,)), (np.float32(0.6),)),
        ("rayleigh", lambda s: random.rayleigh(KEY, s, (3,)), (np.float32(1.5),)),
        ("wald", lambda m: random.wald(KEY, m, (3,)), (np.float32(1.2),)),
        (
            "weibull_min",
            lambda s, c: random.weibull_min(KEY, s, c, (3,)),
            (np.float32(2.0), np.float32(1.5)),
        ),
        (
            "triangular",
            lambda lo, hi: random.triangular(KEY, lo, 0.3, hi, (3,)),
            (np.float32(-1.0), np.float32(2.0)),
        ),
        (
            "double_sided_maxwell",
            lambda loc, s: random.double_sided_maxwell(KEY, loc, s, (3,)),
            (np.float32(0.5), np.float32(2.0)),
        ),
    ],
)
def test_check_grads_reparameterised(name, f, args):
    check_grads(f, args, order=1, modes=("fwd", "rev"), rtol=2e-2, atol=2e-2)


def test_beta_and_t_gradients_follow_gamma():
    # beta = Ga / (Ga + Gb): its a-derivative by the chain rule from the two gamma gradients
    ka, kb = random.split(KEY)
    a, b = np.float32(1.7), np.float32(2.4)
    ga, gb = float(random.gamma(ka, a)), float(random.gamma(kb, b))
    dga = float(fg.grad(lambda a: random.gamma(ka, a))(a))
    expected = dga * gb / (ga + gb) ** 2
    np.testing.assert_allclose(
        float(fg.grad(lambda a: random.beta(KEY, a, b))(a)), expected, rtol=1e-3
    )
    assert np.isfinite(float(fg.grad(lambda d: random.t(KEY, d))(np.float32(3.0))))


# -- vmap and jit --------------------------------------------------------------------------------

KEYS = random.split(random.PRNGKey(99), 3)
PER_KEY = {
    "gamma": lambda k: random.gamma(k, np.array([0.5, 3.0], np.float32)),
    "beta": lambda k: random.beta(k, 2.0, 0.5, (2,)),
    "dirichlet": lambda k: random.dirichlet(k, np.array([1.0, 2.0, 0.3], np.float32)),
    "t": lambda k: random.t(k, 4.0, (2,)),
    "poisson": lambda k: random.poisson(k, np.array([2.0, 50.0], np.float32)),
    "binomial": lambda k: random.binomial(k, np.array([8.0, 300.0]), 0.4),
    "multinomial": lambda k: random.multinomial(k, 12.0, np.array([0.2, 0.8], np.float32)),
    "geometric": lambda k: random.geometric(k, 0.3, (2,)),
    "ball": lambda k: random.ball(k, 2, 1.5),
    "wald": lambda k: random.wald(k, 2.0, (2,)),
}


@pytest.mark.parametrize("name", sorted(PER_KEY))
def test_vmap_over_keys_matches_loop(name):
    f = PER_KEY[name]
    loop = np.stack([np.asarray(f(k)) for k in KEYS])
    np.testing.assert_array_equal(np.asarray(fg.vmap(f)(KEYS)), loop)


def test_vmap_over_parameter_matches_loop():
    a = np.array([0.2, 1.0, 4.0], np.float32)
    out = fg.vmap(lambda a: random.poisson(KEY, a, (2,)))(a)
    loop = np.stack([np.asarray(random.poisson(KEY, x, (2,))) for x in a])
    np.testing.assert_array_equal(np.asarray(out), loop)
    out = fg.vmap(lambda a: random.gamma(KEY, a))(a)
    np.testing.assert_array_equal(np.asarray(out), [np.asarray(random.gamma(KEY, x)) for x in a])
    # keys and parameters batched together, and the gradient under vmap
    out = fg.vmap(random.gamma)(KEYS, a)
    np.testing.assert_array_equal(
        np.asarray(out), [np.asarray(random.gamma(k, x)) for k, x in zip(KEYS, a)]
    )
    grads = fg.vmap(fg.grad(random.gamma, argnums=1))(KEYS, a)
    np.testing.assert_allclose(
        np.asarray(grads),
        [float(fg.grad(random.gamma, argnums=1)(k, x)) for k, x in zip(KEYS, a)],
        rtol=1e-6,
    )


@pytest.mark.parametrize("name", ["gamma", "poisson", "binomial"])
def test_jit_matches_eager(name):
    f = PER_KEY[name]
    np.testing.assert_array_equal(np.asarray(fg.jit(f)(KEYS[0])), np.asarray(f(KEYS[0])))


def test_jit_matches_eager_simple_samplers():
    def f(k):
        k1, k2, k3 = random.split(k, 3)
        return (
            random.pareto(k1, 2.0, (3,)),
            random.triangular(k2, 0.0, 0.5, 1.0, (3,)),
            random.geometric(k3, 0.4, (3,)),
            random.maxwell(k, (2,)),
        )

    for jitted, eager in zip(fg.jit(f)(KEY), f(KEY)):
        np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-6)


@pytest.mark.parametrize("method", ["cholesky", "svd", "eigh"])
def test_multivariate_normal_methods_have_the_covariance(method):
    cov = np.array([[2.0, 0.6, 0.2], [0.6, 1.0, 0.3], [0.2, 0.3, 0.5]], np.float32)
    mean = np.array([1.0, -1.0, 0.5], np.float32)
    x = np.asarray(
        random.multivariate_normal(random.PRNGKey(0), mean, cov, (40000,), method=method)
    )
    assert x.shape == (40000, 3)
    np.testing.assert_allclose(x.mean(0), mean, atol=0.03)
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.07)  # 5 standard errors
    # A semi-definite covariance (rank 1): svd samples it, along its one direction (eigh's
    # zero eigenvalues may round below 0 and give NaN, in JAX too).
    if method == "svd":
        v = np.array([1.0, 2.0, -1.0], np.float32)
        y = np.asarray(
            random.multivariate_normal(
                random.PRNGKey(4), np.zeros(3, np.float32), np.outer(v, v), (500,), method=method
            )
        )
        np.testing.assert_allclose(np.cross(y, v), 0, atol=1e-3)
    with pytest.raises(ValueError, match="method must be one of"):
        random.multivariate_normal(random.PRNGKey(0), mean, cov, method="qr")
