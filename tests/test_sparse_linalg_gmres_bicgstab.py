"""fungrad.scipy.sparse.linalg.gmres and bicgstab against numpy.linalg.solve: random
nonsymmetric systems (hypothesis sizes), matrices and linear functions, a pytree b with a
block operator, preconditioners, x0, restarts shorter than n (both gmres solve methods), jit
against eager, vmap against a loop, gradients by finite differences in float64 (implicit,
through custom_linear_solve with the transposed operator), and bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.scipy.sparse.linalg import bicgstab, gmres
from fungrad.testing import check_grads

SOLVERS = {
    "gmres": gmres,
    "gmres_incremental": lambda *a, **k: gmres(*a, solve_method="incremental", **k),
    "bicgstab": bicgstab,
}


def _system(n, seed, dtype=np.float32):
    """A well-conditioned nonsymmetric ``A`` (eigenvalues near 2) and a right-hand side."""
    rng = np.random.RandomState(seed)
    A = 2 * np.eye(n) + 0.5 * rng.randn(n, n) / np.sqrt(n)
    return A.astype(dtype), rng.randn(n).astype(dtype)


def _solve(A, b):
    return np.linalg.solve(A.astype(np.float64), b.astype(np.float64))


@settings(max_examples=15)
@given(n=st.integers(1, 12), seed=st.integers(0, 2**16), name=st.sampled_from(sorted(SOLVERS)))
def test_random_systems_matrix_and_function(n, seed, name):
    A, b = _system(n, seed)
    want = _solve(A, b)
    solver = SOLVERS[name]
    x, _ = solver(A, b)
    np.testing.assert_allclose(np.asarray(x), want, atol=1e-4)
    x, _ = solver(lambda v: fnp.asarray(A) @ v, b)
    np.testing.assert_allclose(np.asarray(x), want, atol=1e-4)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_info_dtype_and_integer_b(name):
    A, b = _system(5, 1)
    x, info = SOLVERS[name](A, b)
    assert x.dtype == np.float32
    if name == "bicgstab":
        assert info is None
    else:
        assert int(info) == 0  # JAX's gmres: 0, or -1 when the solution holds NaN
    x, _ = SOLVERS[name](A, np.arange(5))
    assert x.dtype == np.float32
    np.testing.assert_allclose(np.asarray(x), _solve(A, np.arange(5.0)), atol=1e-4)


@pytest.mark.parametrize("method", ["batched", "incremental"])
@pytest.mark.parametrize("restart", [1, 2, 3])
def test_gmres_short_restarts(method, restart):
    A, b = _system(8, 2)
    x, _ = gmres(A, b, restart=restart, solve_method=method, tol=1e-6)
    np.testing.assert_allclose(np.asarray(x), _solve(A, b), atol=1e-4)
    # one cycle of a single step is the 1-d minimal residual step along r = b
    x1, _ = gmres(A, b, restart=1, maxiter=1, solve_method=method)
    Ab = A.astype(np.float64) @ b
    np.testing.assert_allclose(np.asarray(x1), (Ab @ b) / (Ab @ Ab) * b, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_pytree_block_operator_preconditioner_x0(name):
    A, b = _system(6, 3)
    A11, A12, A21, A22 = A[:4, :4], A[:4, 4:], A[4:, :4], A[4:, 4:]

    def block(t):
        return {"u": A11 @ t["u"] + A12 @ t["v"], "v": A21 @ t["u"] + A22 @ t["v"]}

    tree = {"u": b[:4], "v": b[4:]}
    want = _solve(A, b)
    solver = SOLVERS[name]
    x, _ = solver(block, tree)
    np.testing.assert_allclose(np.asarray(x["u"]), want[:4], atol=1e-4)
    np.testing.assert_allclose(np.asarray(x["v"]), want[4:], atol=1e-4)
    # Jacobi preconditioner as a function of trees, and x0 as a tree
    d = np.diag(A)
    jacobi = {"u": 1 / d[:4], "v": 1 / d[4:]}
    x, _ = solver(
        block,
        tree,
        x0={"u": np.ones(4, np.float32), "v": np.ones(2, np.float32)},
        M=lambda t: {k: jacobi[k] * t[k] for k in t},
    )
    np.testing.assert_allclose(np.asarray(x["u"]), want[:4], atol=1e-4)
    np.testing.assert_allclose(np.asarray(x["v"]), want[4:], atol=1e-4)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_preconditioner_matrix_and_x0(name):
    rng = np.random.RandomState(4)
    # badly scaled rows, which the Jacobi preconditioner undoes
    A = (np.diag(np.logspace(0, 3, 7)) @ (2 * np.eye(7) + 0.3 * rng.randn(7, 7))).astype(np.float32)
    b = rng.randn(7).astype(np.float32)
    want = _solve(A, b)
    x, _ = SOLVERS[name](A, b, M=np.diag(1 / np.diag(A)), tol=1e-7)
    np.testing.assert_allclose(np.asarray(x), want, rtol=1e-3, atol=1e-5)
    # starting at the solution needs no iterations
    x, _ = SOLVERS[name](A, b, x0=want.astype(np.float32), maxiter=0)
    np.testing.assert_allclose(np.asarray(x), want, rtol=1e-6)
    # a zero right-hand side gives zero
    x, _ = SOLVERS[name](A, np.zeros(7, np.float32))
    np.testing.assert_array_equal(np.asarray(x), np.zeros(7))


def test_complex_systems():
    A, b = _system(5, 5)
    Ac = A + 0.5j * np.eye(5, dtype=np.float32)
    bc = b + 1j * b[::-1]
    for solver in SOLVERS.values():
        x, _ = solver(Ac, bc)
        assert x.dtype == np.complex64
        np.testing.assert_allclose(np.asarray(x), np.linalg.solve(Ac, bc), atol=1e-4)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_jit_and_vmap(name):
    A, b = _system(6, 6)
    solver = SOLVERS[name]
    np.testing.assert_allclose(
        np.asarray(fg.jit(lambda b: solver(A, b)[0])(b)),
        np.asarray(solver(A, b)[0]),
        atol=1e-6,
    )
    bs = np.stack([b, 2 * b, -b[::-1], np.zeros(6, np.float32)])
    np.testing.assert_allclose(
        np.asarray(fg.vmap(lambda b: solver(A, b)[0])(bs)),
        np.stack([np.asarray(solver(A, b)[0]) for b in bs]),
        atol=1e-5,
    )
    # batched matrices as well (the operator closes over a batched value)
    As = np.stack([A, A.T, A + np.eye(6, dtype=np.float32)])
    got = fg.jit(fg.vmap(lambda A: solver(lambda v: A @ v, b)[0]))(As)
    np.testing.assert_allclose(np.asarray(got), np.stack([_solve(a, b) for a in As]), atol=1e-4)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_gradients_float64(name):
    solver = SOLVERS[name]
    with fg.enable_x64():
        A, b = _system(5, 7, np.float64)
        w = np.random.RandomState(8).randn(5)

        def loss_b(b):
            return fnp.vdot(w, solver(A, b, tol=1e-12)[0])

        def loss_a(a01):
            Am = fnp.asarray(A).at[0, 1].set(a01)
            return fnp.vdot(w, solver(lambda v: Am @ v, b, tol=1e-12)[0])

        # closed forms: d/db = A^-T w; d/dA[0,1] = -(A^-T w)[0] x[1]
        lam = np.linalg.solve(A.T, w)
        np.testing.assert_allclose(np.asarray(fg.grad(loss_b)(b)), lam, rtol=1e-8)
        g = fg.grad(loss_a)(A[0, 1])
        np.testing.assert_allclose(float(g), -lam[0] * _solve(A, b)[1], rtol=1e-8)
        check_grads(loss_b, (b,), order=1, modes=("fwd", "rev"))
        check_grads(loss_a, (A[0, 1],), order=1, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", ["gmres", "bicgstab"])
def test_bad_input(name):
    solver = {"gmres": gmres, "bicgstab": bicgstab}[name]
    A, b = _system(4, 9)
    with pytest.raises(ValueError, match=f"{name}: A must be a square matrix"):
        solver(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match=f"{name}: A is a 4x4 matrix .* pass b with 4 rows"):
        solver(A, np.ones(3))
    with pytest.raises(ValueError, match=rf"{name}: A\(x\) must return arrays shaped like b"):
        solver(lambda v: v[:2], b)
    with pytest.raises(ValueError, match=f"{name}: M is a 4x4 matrix"):
        solver(lambda v: 2 * v, np.ones(3), M=A)
    with pytest.raises(ValueError, match=f"{name}: x0 must have b's shapes"):
        solver(A, b, x0=np.ones(3))
    with pytest.raises(ValueError, match="same tree structure"):
        solver(A, b, x0=[b])
    with pytest.raises(ValueError, match="at least one array"):
        solver(A, {})
    if name == "gmres":
        with pytest.raises(ValueError, match="gmres: invalid solve_method 'qr'"):
            gmres(A, b, solve_method="qr")
        with pytest.raises(ValueError, match="gmres: restart must be a positive integer"):
            gmres(A, b, restart=0)
