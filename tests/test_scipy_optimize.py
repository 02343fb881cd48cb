"""fungrad.scipy.optimize.minimize (BFGS) against scipy.optimize.minimize: minimisers of
smooth problems, under jit and vmap (against a loop), and bad input."""

import numpy as np
import pytest
import scipy.optimize as so

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import nn
from fungrad.scipy.optimize import minimize


def _rosen(x):
    return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def _np_rosen(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def test_rosenbrock_and_quadratic_match_scipy():
    r = minimize(_rosen, fnp.array([-1.2, 1.0]), method="BFGS")
    want = so.minimize(_np_rosen, np.array([-1.2, 1.0]), method="BFGS").x
    assert bool(r.success) and int(r.status) == 0
    np.testing.assert_allclose(np.asarray(r.x), want, atol=2e-3)
    np.testing.assert_allclose(np.asarray(r.jac), 0.0, atol=1e-4)
    a = np.array([[3.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 1.0]], np.float32)
    b = np.array([1.0, -2.0, 0.5], np.float32)
    r = minimize(lambda x: 0.5 * x @ a @ x - b @ x, fnp.zeros(3), method="bfgs")
    np.testing.assert_allclose(np.asarray(r.x), np.linalg.solve(a, b), atol=1e-4)
    # the inverse-Hessian estimate approaches a^-1 on a quadratic
    np.testing.assert_allclose(np.asarray(r.hess_inv), np.linalg.inv(a), atol=5e-2)


def test_logistic_regression_args_and_options():
    rng = np.random.RandomState(0)
    x = rng.randn(50, 3).astype(np.float32)
    y = (rng.rand(50) < 0.5).astype(np.float32)

    def nll(w, x, y):
        z = x @ w
        return -fnp.mean(y * nn.log_sigmoid(z) + (1 - y) * nn.log_sigmoid(-z)) + 0.01 * w @ w

    def np_nll(w):
        z = x @ w
        return np.mean(np.logaddexp(0, -z) * y + np.logaddexp(0, z) * (1 - y)) + 0.01 * w @ w

    r = minimize(nll, fnp.zeros(3), (x, y), method="BFGS")
    want = so.minimize(np_nll, np.zeros(3), method="BFGS", options={"gtol": 1e-8}).x
    # float32 rounding of the mean NLL (~1e-7) stops the line search near gradient 1e-4
    # (JAX's BFGS stops there too, status 3); the minimiser agrees to about 1e-3.
    np.testing.assert_allclose(np.asarray(r.x), want, atol=1e-3)
    assert int(r.status) in (0, 3)
    r1 = minimize(nll, fnp.zeros(3), (x, y), method="BFGS", options={"maxiter": 1})
    assert int(r1.nit) == 1 and int(r1.status) == 1 and not bool(r1.success)


def test_jit_and_vmap():
    starts = np.array([[-1.2, 1.0], [2.0, 2.0], [0.0, 0.0]], np.float32)
    solve = lambda x0: minimize(_rosen, x0, method="BFGS").x  # noqa: E731
    loop = np.stack([np.asarray(solve(s)) for s in starts])
    np.testing.assert_allclose(np.asarray(fg.vmap(solve)(starts)), loop, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fg.jit(solve)(starts[0])), loop[0], atol=1e-5)
    np.testing.assert_allclose(loop, 1.0, atol=2e-3)


def test_already_optimal_and_errors():
    r = minimize(lambda x: fnp.sum(x**2), fnp.zeros(2), method="BFGS")
    assert int(r.nit) == 0 and bool(r.success)
    with pytest.raises(ValueError, match="method must be 'BFGS'"):
        minimize(_rosen, fnp.zeros(2), method="Nelder-Mead")
    with pytest.raises(ValueError, match="x0 must be 1-D"):
        minimize(_rosen, fnp.zeros((2, 2)), method="BFGS")
    with pytest.raises(TypeError, match="unknown options"):
        minimize(_rosen, fnp.zeros(2), method="BFGS", options={"disp": True})
    with pytest.raises(TypeError, match="args must be a tuple"):
        minimize(_rosen, fnp.zeros(2), [1], method="BFGS")
