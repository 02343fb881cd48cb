"""Regressions found by running JAX-style programs (logistic regression, VAE, GP...) through
fungrad.compat and comparing their numbers with JAX's. Each test pins the root cause with an
independent reference: numpy/scipy values, finite differences, a Python loop, eager vs jit."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import nn
from fungrad.testing import check_grads

# -- logaddexp / logaddexp2 / softplus / log_sigmoid derivatives at ties -----------------------
# The max/abs formula differentiated to 0 (not 1/2) at x1 == x2, so log_sigmoid(0) and
# softplus(0) had gradient 0 and a logistic regression started at w = 0 never moved.


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.mark.parametrize("fn, scale", [(fnp.logaddexp, 1.0), (fnp.logaddexp2, np.log(2.0))])
def test_logaddexp_grad_at_ties_and_hessian(fn, scale):
    for v in (0.0, 2.0, -3.5):
        g1, g2 = fg.grad(fn, argnums=(0, 1))(v, v)
        assert float(g1) == 0.5 and float(g2) == 0.5
    # d2/dx1^2 = scale * w (1 - w), 1/4 * scale at a tie
    h = fg.hessian(lambda a: fn(a, 0.0))(0.0)
    np.testing.assert_allclose(float(h), 0.25 * scale, rtol=1e-6)


def test_log_sigmoid_softplus_grad_at_zero():
    np.testing.assert_allclose(float(fg.grad(nn.log_sigmoid)(0.0)), 0.5)
    np.testing.assert_allclose(float(fg.grad(nn.softplus)(0.0)), 0.5)
    np.testing.assert_allclose(float(fg.hessian(nn.softplus)(0.0)), 0.25)


def test_logaddexp_grad_with_infinities():
    inf = np.inf
    g = fg.grad(fnp.logaddexp, argnums=(0, 1))
    cases = {
        (inf, 1.0): (1.0, 0.0),
        (1.0, inf): (0.0, 1.0),
        (-inf, 3.0): (0.0, 1.0),
        (inf, -inf): (1.0, 0.0),
        (inf, inf): (0.5, 0.5),
        (1e30, 1.0): (1.0, 0.0),
    }
    for args, want in cases.items():
        np.testing.assert_allclose([float(t) for t in g(*args)], want)
    assert all(np.isnan(float(t)) for t in g(np.nan, 1.0))


@settings(max_examples=25, deadline=None)
@given(st.floats(-20, 20), st.floats(-20, 20))
def test_logaddexp_grad_matches_sigmoid(a, b):
    a, b = np.float32(a), np.float32(b)
    g1, g2 = fg.grad(fnp.logaddexp, argnums=(0, 1))(a, b)
    w = _sigmoid(np.float64(a) - np.float64(b))
    np.testing.assert_allclose([float(g1), float(g2)], [w, 1 - w], rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(float(fnp.logaddexp(a, b)), np.logaddexp(a, b), rtol=1e-6)


def test_logaddexp_check_grads_vmap_jit():
    x = fnp.asarray(np.array([-1.0, 0.0, 0.5, 3.0], np.float32))
    y = fnp.asarray(np.array([0.0, 0.0, -2.0, 3.0], np.float32))
    check_grads(fnp.logaddexp, (x, y), order=2, modes=("fwd", "rev"))
    check_grads(fnp.logaddexp2, (x, y), order=2, modes=("fwd", "rev"))
    gx = fg.vmap(fg.grad(fnp.logaddexp))(x, y)
    loop = [float(fg.grad(fnp.logaddexp)(a, b)) for a, b in zip(x, y)]
    np.testing.assert_allclose(np.asarray(gx), loop, rtol=1e-6)
    total = fg.grad(lambda a: fnp.sum(fnp.logaddexp(a, y)))
    np.testing.assert_allclose(np.asarray(fg.jit(total)(x)), np.asarray(total(x)), rtol=1e-6)
    assert fnp.logaddexp(fnp.ones(3, "float16"), 2.0).dtype == np.float16
    assert fnp.logaddexp(1, 2).dtype == np.float32


def test_logistic_regression_from_zero_moves():
    rng = np.random.RandomState(0)
    X = rng.randn(32, 3).astype(np.float32)
    y = (rng.rand(32) < 0.5).astype(np.float32)

    def nll(w):
        z = X @ w
        return -fnp.mean(y * nn.log_sigmoid(z) + (1 - y) * nn.log_sigmoid(-z))

    g = np.asarray(fg.grad(nll)(fnp.zeros(3)))
    np.testing.assert_allclose(g, -X.T @ (y - 0.5) / 32, rtol=1e-5, atol=1e-7)


# -- x.at[idx].apply(func) (the "sharp bits" snippets use it) ----------------------------------


def test_at_apply_values_repeats_grad_jit_vmap():
    x = np.arange(5.0, dtype=np.float32)
    a = fnp.asarray(x)
    want = x.copy()
    want[1:3] = np.sin(want[1:3])
    np.testing.assert_allclose(np.asarray(a.at[1:3].apply(fnp.sin)), want, rtol=1e-6)
    # a repeated index applies func once per occurrence; out of bounds is dropped
    np.testing.assert_allclose(
        np.asarray(a.at[np.array([0, 0, 4])].apply(lambda v: v + 1)), [2, 1, 2, 3, 5]
    )
    np.testing.assert_allclose(np.asarray(a.at[7].apply(fnp.sin)), x)
    assert fnp.arange(5).at[2].apply(lambda v: v * 3).dtype == np.int32
    g = fg.grad(lambda t: t.at[np.array([1, 1])].apply(lambda v: v * v).sum())(a)
    np.testing.assert_allclose(np.asarray(g), [1, 4 * 1.0**3, 1, 1, 1])  # d x^4 = 4 x^3
    np.testing.assert_allclose(
        np.asarray(fg.jit(lambda t: t.at[::2].apply(fnp.exp))(a)),
        np.asarray(a.at[::2].apply(fnp.exp)),
        rtol=1e-6,
    )
    rows = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    vm = fg.vmap(lambda r: r.at[0].apply(lambda v: -v))(rows)
    np.testing.assert_allclose(
        np.asarray(vm),
        np.stack([np.asarray(fnp.asarray(r).at[0].apply(lambda v: -v)) for r in rows]),
    )
    with pytest.raises(TypeError, match=r"at\[\].apply: func must be callable"):
        a.at[0].apply(3.0)


# -- nn.initializers.orthogonal ------------------------------------------------------------------


def test_orthogonal_initializer_jax_numbers_and_orthogonality():
    from fungrad import random
    from fungrad.nn import initializers

    key = random.PRNGKey(5)
    # JAX 0.10.2's numbers for this key
    np.testing.assert_allclose(
        np.asarray(initializers.orthogonal()(key, (3, 3)))[0],
        [-0.03379, 0.58029, 0.81371],
        atol=2e-5,
    )
    np.testing.assert_allclose(
        np.asarray(initializers.orthogonal(column_axis=0)(key, (4, 2, 3))).ravel()[:3],
        [-0.02777, 0.45063, -0.27561],
        atol=2e-5,
    )
    for shape, axis in [((2, 5), -1), ((5, 2), -1), ((2, 3, 4), -1), ((4, 2, 3), 0)]:
        w = np.asarray(initializers.orthogonal(scale=2.0, column_axis=axis)(key, shape))
        assert w.shape == shape
        m = np.moveaxis(w, axis, -1).reshape(-1, shape[axis]) / 2.0
        small = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
        np.testing.assert_allclose(small, np.eye(min(m.shape)), atol=2e-6)
    with pytest.raises(ValueError, match="orthogonal: needs a shape of at least 2"):
        initializers.orthogonal()(key, (3,))


# -- float64 (jax_enable_x64) through the loop-based solvers -----------------------------------
# Their fori_loop index is int64 under x64; comparing it with int32 iotas was a TypeError.


def test_x64_linalg_optimize_ode(x64):
    from fungrad.experimental.ode import odeint
    from fungrad.scipy import linalg as fla
    from fungrad.scipy.optimize import minimize

    rng = np.random.RandomState(0)
    a = rng.randn(4, 4)
    s = a @ a.T + 4 * np.eye(4)
    b = rng.randn(4)
    c = fla.cho_factor(s, lower=True)
    x = fla.cho_solve(c, b)
    assert x.dtype == np.float64
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(s, b), rtol=1e-10)
    np.testing.assert_allclose(
        np.asarray(fla.solve_triangular(a, b, lower=False)),
        np.linalg.solve(np.triu(a), b),
        rtol=1e-9,
    )
    q, r = fnp.linalg.qr(a)
    np.testing.assert_allclose(np.asarray(q @ r), a, atol=1e-12)
    np.testing.assert_allclose(
        np.asarray(fnp.linalg.eigvalsh(s)), np.linalg.eigvalsh(s), rtol=1e-12
    )
    np.testing.assert_allclose(
        np.asarray(fnp.linalg.svd(a, compute_uv=False)),
        np.linalg.svd(a, compute_uv=False),
        rtol=1e-12,
    )
    res = minimize(lambda t: fnp.sum((t - 2.0) ** 2) + fnp.sum(t**4), fnp.zeros(2), method="BFGS")
    assert res.x.dtype == np.float64 and bool(res.success)
    ys = odeint(lambda y, t: -y, fnp.ones(1), fnp.linspace(0.0, 1.0, 3))
    np.testing.assert_allclose(np.asarray(ys)[:, 0], np.exp(-np.linspace(0, 1, 3)), rtol=1e-7)


# -- jit of a Cholesky-based loss at n = 30 (GP marginal likelihood) ---------------------------
# The unrolled Cholesky made jit(grad) compile for ~20 s at n = 30 and an unrolled triangular
# solve overflowed the lowering's recursion; both are fori_loops now.


def test_gp_nll_jit_grad_n30():
    from fungrad.scipy.linalg import cho_solve

    rng = np.random.RandomState(0)
    a = rng.randn(30, 30).astype(np.float32)
    s = a @ a.T + 30 * np.eye(30, dtype=np.float32)
    y = rng.randn(30).astype(np.float32)

    def nll(s):
        lower = fnp.linalg.cholesky(s)
        return 0.5 * y @ cho_solve((lower, True), y) + fnp.sum(fnp.log(fnp.diag(lower)))

    g = np.asarray(fg.jit(fg.grad(nll))(s))
    si = np.linalg.inv(s.astype(np.float64))
    want = 0.5 * (si - si @ np.outer(y, y) @ si)  # d/dS of 0.5 y^T S^-1 y + 0.5 logdet S
    np.testing.assert_allclose(g, want, atol=1e-5)


def test_solve_jit_grad_n30_and_det_sign():
    # the unrolled LU solve overflowed the lowering's recursion under jit(grad) at n = 30
    rng = np.random.RandomState(1)
    a = (rng.randn(30, 30) + 6 * np.eye(30)).astype(np.float32)
    b = np.ones(30, np.float32)
    g = np.asarray(fg.jit(fg.grad(lambda m: fnp.sum(fnp.linalg.solve(m, b))))(a))
    ai = np.linalg.inv(a.astype(np.float64))
    want = -np.outer(ai.T @ np.ones(30), ai @ b)  # d sum(A^-1 b) / dA = -A^-T 1 (A^-1 b)^T
    np.testing.assert_allclose(g, want, atol=2e-5)
    perm = np.eye(4, dtype=np.float32)[[1, 0, 3, 2]] * 2.0  # two swaps: det = +16
    assert float(fnp.linalg.det(perm)) == 16.0
    assert float(fnp.linalg.det(np.eye(3, dtype=np.float32)[[1, 0, 2]])) == -1.0


def test_grad_family_accepts_jax_holomorphic_flag():
    # JAX's positional order is (fun, argnums, has_aux, holomorphic, allow_int)
    assert float(fg.grad(lambda x: x**2, 0, False, False, False)(3.0)) == 6.0
    assert float(fg.value_and_grad(lambda x: x**2, holomorphic=False)(3.0)[1]) == 6.0
    for transform in (fg.jacfwd, fg.jacrev, fg.hessian):
        assert float(transform(lambda x: x**3, holomorphic=False)(1.0)) in (3.0, 6.0)
    for transform in (fg.grad, fg.value_and_grad, fg.jacfwd, fg.jacrev, fg.hessian):
        with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex"):
            transform(lambda x: x, holomorphic=True)(1.0)


def test_jit_complex_exp_sinh_cosh_do_not_overflow_where_the_result_is_finite():
    # found.md #6: exp(x) * cos(y) overflowed in exp(x) for x beyond 88.7 (float32)
    z = np.array([89 + 1j, 97.183136 + 1.961847e-05j, 178 + 1e-45j, 150 + 0.3j], np.complex64)
    for f in (fnp.exp, fnp.cosh, fnp.sinh, fnp.sin, fnp.cos, fnp.expm1):
        with np.errstate(all="ignore"):
            want = np.asarray(f(z)).astype(np.complex128)
        got = np.asarray(fg.jit(f)(z)).astype(np.complex128)
        for part in (np.real, np.imag):
            w, g = part(want), part(got)
            np.testing.assert_array_equal(np.isinf(w), np.isinf(g), err_msg=f.__name__)
            fin = np.isfinite(w)
            np.testing.assert_allclose(g[fin], w[fin], rtol=2e-6, err_msg=f.__name__)


def test_jit_tanh_tan_of_complex64_under_x64(x64):
    # found.md #7: a Python 1.0 in ctanh became float64 under x64 and select_n refused it
    z = np.array([1 + 1j, 0.5 - 2j, 30 + 1j], np.complex64)
    for f, ref in ((fnp.tanh, np.tanh), (fnp.tan, np.tan)):
        got = fg.jit(f)(z)
        assert got.dtype == np.complex64
        np.testing.assert_allclose(np.asarray(got), ref(z), rtol=1e-5)
