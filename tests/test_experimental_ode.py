"""fungrad.experimental.ode.odeint against scipy.integrate.solve_ivp and closed forms; adjoint
gradients against finite differences; jit against eager; vmap against a loop; pytrees."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.experimental.ode import odeint

TS = np.linspace(0.0, 2.0, 5).astype(np.float32)


def _osc(y, t, k, c):
    return fnp.stack([y[1], -k * y[0] - c * y[1] + fnp.sin(t)])


def test_values_match_scipy_and_closed_form():
    sol = odeint(lambda y, t, k: -k * y, fnp.array([1.0, 2.0]), TS, 0.7)
    np.testing.assert_allclose(np.asarray(sol), np.exp(-0.7 * TS)[:, None] * [1.0, 2.0], rtol=2e-6)
    ys = odeint(_osc, fnp.array([1.0, 0.0]), TS, 2.0, 0.1)
    ref = solve_ivp(
        lambda t, y: [y[1], -2.0 * y[0] - 0.1 * y[1] + np.sin(t)],
        (0, 2),
        [1.0, 0.0],
        t_eval=TS,
        rtol=1e-10,
        atol=1e-10,
    ).y.T
    np.testing.assert_allclose(np.asarray(ys), ref, atol=2e-6)
    assert odeint(_osc, fnp.array([1.0, 0.0]), TS[:1], 2.0, 0.1).shape == (1, 2)


def test_pytree_state_and_loose_tolerance():
    out = odeint(
        lambda y, t: {"a": -y["a"], "b": y["b"] * 0 + 2.0 * y["a"]},
        {"a": 1.0, "b": fnp.zeros(2)},
        TS,
    )
    np.testing.assert_allclose(np.asarray(out["a"]), np.exp(-TS), rtol=2e-6)
    np.testing.assert_allclose(np.asarray(out["b"][:, 1]), 2 * (1 - np.exp(-TS)), atol=3e-6)
    loose = odeint(lambda y, t: -y, fnp.ones(1), TS, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(np.asarray(loose)[:, 0], np.exp(-TS), atol=1e-3)


def test_adjoint_gradients_match_finite_differences():
    def loss(y0, ts, k, c):
        ys = odeint(_osc, y0, ts, k, c)
        return fnp.sum(ys[-1] ** 2) + fnp.sum(ys[2])

    y0 = np.array([1.0, 0.0], np.float32)
    grads = fg.grad(loss, argnums=(0, 1, 2, 3))(y0, TS, 2.0, 0.1)

    def fd(i, direction, eps):
        args = [y0.astype(np.float64), TS.astype(np.float64), 2.0, 0.1]
        plus, minus = list(args), list(args)
        plus[i] = args[i] + eps * direction
        minus[i] = args[i] - eps * direction
        return (
            float(loss(*[fnp.asarray(np.float32(a)) for a in plus]))
            - float(loss(*[fnp.asarray(np.float32(a)) for a in minus]))
        ) / (2 * eps)

    np.testing.assert_allclose(
        [float(g) for g in grads[2:]], [fd(2, 1.0, 1e-3), fd(3, 1.0, 1e-3)], rtol=2e-3
    )
    np.testing.assert_allclose(
        np.asarray(grads[0]), [fd(0, np.eye(2)[i], 1e-3) for i in range(2)], rtol=2e-3, atol=1e-3
    )
    np.testing.assert_allclose(
        np.asarray(grads[1]), [fd(1, np.eye(5)[i], 1e-2) for i in range(5)], rtol=3e-3, atol=1e-3
    )


def test_jit_and_vmap():
    solve = lambda y0: odeint(_osc, y0, TS, 2.0, 0.1)[-1]  # noqa: E731
    y0s = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    loop = np.stack([np.asarray(solve(y)) for y in y0s])
    np.testing.assert_allclose(np.asarray(fg.vmap(solve)(y0s)), loop, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jit(solve)(y0s[0])), loop[0], atol=1e-6)


def test_bad_input():
    with pytest.raises(TypeError, match="odeint: func must be callable"):
        odeint(1.0, fnp.ones(2), TS)
    with pytest.raises(ValueError, match="odeint: t must be a non-empty 1-D"):
        odeint(lambda y, t: -y, fnp.ones(2), np.ones((2, 2)))
    with pytest.raises(TypeError, match="rtol"):
        odeint(lambda y, t: -y, fnp.ones(2), TS, rtol="tight")
