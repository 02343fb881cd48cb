"""lax.custom_linear_solve and lax.custom_root: values against numpy, implicit derivatives
against the closed forms and check_grads (the solvers are wrapped in stop_gradient, so any
derivative must come from the implicit rules), vmap against a loop, jit against eager."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.testing import check_grads

rng = np.random.default_rng(0)
A0 = rng.standard_normal((3, 3)) + 4 * np.eye(3)
S0 = A0 @ A0.T
B0 = rng.standard_normal(3)


def _solve_nodiff(A):
    # a solver whose own derivative is zero: only the implicit rule can differentiate
    return lambda matvec, b: lax.stop_gradient(fnp.linalg.solve(lax.stop_gradient(A), b))


def lsolve(A, b):
    return lax.custom_linear_solve(
        lambda x: A @ x, b, _solve_nodiff(A), lambda vecmat, c: _solve_nodiff(A.T)(vecmat, c)
    )


def jacobi(matvec, b, n=60):
    """An iterative solve (fixed-point iterations of the diagonal of I): x <- x + (b - Ax)/d."""
    d = 5.0
    return lax.fori_loop(0, n, lambda i, x: x + (b - matvec(x)) / d, fnp.zeros_like(b))


def test_linear_solve_values():
    np.testing.assert_allclose(lsolve(A0, B0), np.linalg.solve(A0, B0), rtol=1e-5)
    x = lax.custom_linear_solve(lambda x: A0 @ x, B0, jacobi)
    np.testing.assert_allclose(x, np.linalg.solve(A0, B0), rtol=1e-4, atol=1e-5)
    # a pytree right-hand side
    b = {"u": B0[:2], "v": B0[2]}

    def mv(x):
        full = fnp.concatenate([x["u"], x["v"][None]])
        y = A0 @ full
        return {"u": y[:2], "v": y[2]}

    def solve(matvec, c):
        full = fnp.linalg.solve(A0, fnp.concatenate([c["u"], c["v"][None]]))
        return {"u": full[:2], "v": full[2]}

    x = lax.custom_linear_solve(mv, b, solve)
    want = np.linalg.solve(A0, B0)
    np.testing.assert_allclose(x["u"], want[:2], rtol=1e-5)
    np.testing.assert_allclose(x["v"], want[2], rtol=1e-5)


def test_linear_solve_derivatives():
    check_grads(lsolve, (A0, B0), order=2, modes=("fwd", "rev"))
    # the closed forms: dx = A^-1 (db - dA x)
    dA, db = rng.standard_normal((3, 3)), rng.standard_normal(3)
    x = np.linalg.solve(A0, B0)
    _, t = fg.jvp(lsolve, (A0, B0), (dA, db))
    np.testing.assert_allclose(t, np.linalg.solve(A0, db - dA @ x), rtol=1e-4, atol=1e-5)
    # symmetric: solve doubles as transpose_solve
    sym = lambda S, b: lax.custom_linear_solve(  # noqa: E731
        lambda v: S @ v, b, _solve_nodiff(S), symmetric=True
    )
    check_grads(sym, (S0, B0), order=1, modes=("rev",))
    g = fg.grad(lambda b: sym(S0, b).sum())(B0)
    np.testing.assert_allclose(g, np.linalg.solve(S0, np.ones(3)), rtol=1e-4)


def test_linear_solve_iterative_solver_grad():
    # an iterative solve with implicit derivatives matches the exact solve's derivative
    A = 5 * np.eye(3) + 0.3 * rng.standard_normal((3, 3))

    def f(b):
        return lax.custom_linear_solve(
            lambda x: A @ x, b, jacobi, lambda vecmat, c: jacobi(vecmat, c)
        ).sum()

    np.testing.assert_allclose(fg.grad(f)(B0), np.linalg.solve(A.T, np.ones(3)), rtol=1e-4)


def test_linear_solve_vmap_jit():
    As = np.stack([A0, A0 + np.eye(3), A0 * 2])
    bs = rng.standard_normal((3, 3))
    got = fg.vmap(lsolve)(As, bs)
    for i in range(3):
        np.testing.assert_allclose(got[i], np.linalg.solve(As[i], bs[i]), rtol=1e-4)
    got = fg.vmap(lsolve, (None, 0))(A0, bs)
    for i in range(3):
        np.testing.assert_allclose(got[i], np.linalg.solve(A0, bs[i]), rtol=1e-4)
    np.testing.assert_allclose(fg.jit(lsolve)(A0, B0), lsolve(A0, B0), rtol=1e-6)
    g = lambda A, b: fg.grad(lambda A, b: (lsolve(A, b) ** 2).sum(), (0, 1))(A, b)  # noqa
    for e, j in zip(g(A0, B0), fg.jit(g)(A0, B0)):
        np.testing.assert_allclose(j, e, rtol=1e-5, atol=1e-6)
    per = fg.vmap(lambda A, b: g(A, b)[1])(As, bs)
    for i in range(3):
        np.testing.assert_allclose(per[i], g(As[i], bs[i])[1], rtol=1e-5, atol=1e-6)


def test_linear_solve_has_aux_and_errors():
    def solve(matvec, b):
        return fnp.linalg.solve(A0, b), {"iters": fnp.int32(1)}

    x, aux = lax.custom_linear_solve(lambda v: A0 @ v, B0, solve, has_aux=True)
    np.testing.assert_allclose(x, np.linalg.solve(A0, B0), rtol=1e-5)
    assert int(aux["iters"]) == 1
    # reverse mode needs transpose_solve
    with pytest.raises(TypeError, match="transpose_solve is required"):
        fg.grad(lambda b: lax.custom_linear_solve(lambda v: A0 @ v, b, _solve_nodiff(A0)).sum())(B0)
    # forward mode does not
    fg.jvp(lambda b: lax.custom_linear_solve(lambda v: A0 @ v, b, _solve_nodiff(A0)), (B0,), (B0,))
    with pytest.raises(TypeError, match="solve must return"):
        lax.custom_linear_solve(lambda v: A0 @ v, B0, lambda mv, b: b[:2])
    with pytest.raises(TypeError, match="callable"):
        lax.custom_linear_solve(A0, B0, _solve_nodiff(A0))


# -- custom_root ---------------------------------------------------------------------------------


def newton(f, x0):
    return lax.stop_gradient(lax.fori_loop(0, 40, lambda i, x: x - f(x) / fg.grad(f)(x), x0))


def sqrt_root(a):
    return lax.custom_root(lambda x: x**2 - a, 1.0, newton, lambda g, y: y / g(1.0))


def test_custom_root_scalar():
    a = np.array([0.5, 2.0, 9.0])
    np.testing.assert_allclose(fg.vmap(sqrt_root)(a), np.sqrt(a), rtol=1e-6)
    np.testing.assert_allclose(fg.vmap(fg.grad(sqrt_root))(a), 0.5 / np.sqrt(a), rtol=1e-5)
    np.testing.assert_allclose(fg.grad(fg.grad(sqrt_root))(4.0), -0.25 * 4**-1.5, rtol=1e-5)
    check_grads(sqrt_root, (2.0,), order=2, modes=("fwd", "rev"))
    np.testing.assert_allclose(fg.jit(fg.grad(sqrt_root))(4.0), 0.25, rtol=1e-6)
    for ai in a:
        np.testing.assert_allclose(fg.vmap(sqrt_root)(a)[list(a).index(ai)], sqrt_root(ai))


def test_custom_root_vector_has_aux():
    # f(x) = A x - theta * b, root x* = theta A^-1 b; dx*/dtheta = A^-1 b
    def solve(f, x0):
        x = fnp.linalg.solve(A0, f(fnp.zeros(3)) * -1.0)
        return lax.stop_gradient(x), fnp.int32(3)

    def tangent_solve(g, y):
        return fnp.linalg.solve(fg.jacfwd(g)(y), y)

    def root(theta):
        return lax.custom_root(
            lambda x: A0 @ x - theta * B0, fnp.zeros(3), solve, tangent_solve, has_aux=True
        )

    x, aux = root(2.0)
    np.testing.assert_allclose(x, 2 * np.linalg.solve(A0, B0), rtol=1e-5)
    assert int(aux) == 3
    np.testing.assert_allclose(
        fg.jacfwd(lambda t: root(t)[0])(2.0), np.linalg.solve(A0, B0), rtol=1e-5
    )
    np.testing.assert_allclose(
        fg.grad(lambda t: root(t)[0].sum())(2.0), np.linalg.solve(A0, B0).sum(), rtol=1e-5
    )


def test_custom_root_errors():
    with pytest.raises(TypeError, match="f must return"):
        lax.custom_root(lambda x: x[:1], fnp.zeros(2), newton, lambda g, y: y)
    with pytest.raises(TypeError, match="pair"):
        lax.custom_root(lambda x: x, 1.0, newton, lambda g, y: y, has_aux=True)
    with pytest.raises(TypeError, match="callable"):
        lax.custom_root(lambda x: x, 1.0, None, lambda g, y: y)
