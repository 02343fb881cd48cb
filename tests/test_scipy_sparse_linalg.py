"""fungrad.scipy.sparse.linalg.cg against numpy.linalg.solve: matrices, linear functions,
preconditioners, pytrees, gradients (implicit, via custom_linear_solve) against the closed
form, jit against eager, vmap against a loop, and bad input."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.scipy.sparse.linalg import cg

RNG = np.random.RandomState(0)
_A = RNG.randn(6, 6).astype(np.float32)
S = _A @ _A.T + 6 * np.eye(6, dtype=np.float32)
B = RNG.randn(6).astype(np.float32)


def test_values():
    x, info = cg(S, B)
    assert info is None
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(S, B), atol=1e-5)
    x, _ = cg(lambda v: fnp.asarray(S) @ v, B, M=np.diag(1 / np.diag(S)), tol=1e-6)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(S, B), atol=1e-5)
    x, _ = cg(S, B, x0=np.linalg.solve(S, B).astype(np.float32), maxiter=0)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(S, B), atol=1e-5)
    tree, _ = cg(
        lambda t: {"a": t["a"] * 2.0, "b": t["b"] * 3.0}, {"a": fnp.ones(2), "b": fnp.ones(())}
    )
    np.testing.assert_allclose(np.asarray(tree["a"]), [0.5, 0.5])
    np.testing.assert_allclose(float(tree["b"]), 1 / 3, rtol=1e-6)


def test_gradients_jit_vmap():
    g = fg.grad(lambda b: cg(S, b)[0].sum())(B)
    np.testing.assert_allclose(np.asarray(g), np.linalg.solve(S, np.ones(6)), atol=1e-5)
    g = fg.grad(lambda t: cg(lambda v: fnp.asarray(S) @ v + t * v, B)[0].sum())(0.5)
    si = np.linalg.inv(S.astype(np.float64) + 0.5 * np.eye(6))
    np.testing.assert_allclose(float(g), -(np.ones(6) @ si @ si @ B), rtol=1e-3)
    np.testing.assert_allclose(
        np.asarray(fg.jit(lambda b: cg(S, b)[0])(B)), np.asarray(cg(S, B)[0]), atol=1e-6
    )
    bs = np.stack([B, 2 * B, -B])
    np.testing.assert_allclose(
        np.asarray(fg.vmap(lambda b: cg(S, b)[0])(bs)),
        np.stack([np.asarray(cg(S, b)[0]) for b in bs]),
        atol=1e-5,
    )


def test_errors():
    with pytest.raises(ValueError, match="cg: A must be a square matrix"):
        cg(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match="same tree structure"):
        cg(S, B, x0=[B])
