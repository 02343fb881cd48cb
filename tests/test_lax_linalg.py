"""fungrad.lax.linalg (jax.lax.linalg's conventions) against numpy/scipy: eigh's
(vectors, values) order, qr's full default, svd, lu with its permutation, triangular_solve's
sides and transposes; one gradient, vmap and jit check."""

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
from fungrad.lax import linalg as L

G = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]], np.float32)
S = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)


def test_decompositions():
    v, w = L.eigh(S)
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(S), atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(v) @ np.diag(np.asarray(w)) @ np.asarray(v).T, S, atol=1e-5
    )
    q, r = L.qr(G[:, :2])
    assert q.shape == (3, 3) and r.shape == (3, 2)
    qn, rn = np.linalg.qr(G[:, :2], mode="complete")
    np.testing.assert_allclose(np.asarray(q), qn, atol=1e-5)
    assert [t.shape for t in L.qr(G[:, :2], full_matrices=False)] == [(3, 2), (2, 2)]
    u, s, vh = L.svd(G)
    np.testing.assert_allclose(np.asarray(s), np.linalg.svd(G, compute_uv=False), atol=1e-5)
    np.testing.assert_allclose((np.asarray(u) * np.asarray(s)) @ np.asarray(vh), G, atol=1e-5)
    np.testing.assert_allclose(np.asarray(L.svd(G, compute_uv=False)), np.asarray(s))
    np.testing.assert_allclose(np.asarray(L.cholesky(S)), np.linalg.cholesky(S), atol=1e-6)
    lu, piv, perm = L.lu(G)
    lo = np.tril(np.asarray(lu), -1) + np.eye(3)
    np.testing.assert_allclose(G[np.asarray(perm)], lo @ np.triu(np.asarray(lu)), atol=1e-5)
    _, piv_s = sla.lu_factor(G)
    np.testing.assert_array_equal(np.asarray(piv), piv_s)
    np.testing.assert_array_equal(
        np.asarray(L.lu_pivots_to_permutation(np.array([2, 2, 3, 3]), 5)), [2, 0, 3, 1, 4]
    )


@pytest.mark.parametrize("left_side", [False, True])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("transpose_a", [False, True])
def test_triangular_solve(left_side, lower, transpose_a):
    a = (np.tril(G) if lower else np.triu(G)) + 3 * np.eye(3, dtype=np.float32)
    b = np.array([[1.0, 2.0, 3.0], [0.0, 1.0, 1.0]], np.float32)
    b = b.T if left_side else b
    x = np.asarray(
        L.triangular_solve(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a)
    )
    op = a.T if transpose_a else a
    np.testing.assert_allclose(op @ x if left_side else x @ op, b, atol=1e-5)


def test_transforms_and_errors():
    g = fg.grad(lambda m: L.eigh(m)[1][-1])(S)
    _, vn = np.linalg.eigh(S)
    np.testing.assert_allclose(np.asarray(g), np.outer(vn[:, -1], vn[:, -1]), atol=1e-5)
    stack = np.stack([S, 2 * S])
    np.testing.assert_allclose(
        np.asarray(fg.vmap(lambda m: L.eigh(m)[1])(stack)),
        np.stack([np.asarray(L.eigh(m)[1]) for m in stack]),
        atol=1e-6,
    )
    np.testing.assert_allclose(
        np.asarray(fg.jit(lambda m: L.lu(m)[0])(G)), np.asarray(L.lu(G)[0]), atol=1e-6
    )
    with pytest.raises(ValueError, match="pivoting"):
        L.qr(G, pivoting=True)
    with pytest.raises(ValueError, match="triangular_solve"):
        L.triangular_solve(G, np.ones(3))


@settings(deadline=None, max_examples=30)
@given(
    st.integers(1, 6),
    st.integers(1, 3),
    st.sampled_from([(), (2,)]),
    st.integers(0, 2**31 - 1),
)
def test_tridiagonal_solve_matches_a_dense_solve(m, n, batch, seed):
    # jax.L.tridiagonal_solve: dl[..., 0] and du[..., m-1] are ignored (JAX 0.10.2
    # solves the same system when they hold garbage); diagonally dominant, so no pivoting.
    rng = np.random.default_rng(seed)
    dl, du = (rng.uniform(-1, 1, (*batch, m)).astype(np.float32) for _ in range(2))
    d = (rng.uniform(2.5, 4, (*batch, m)) * rng.choice([-1, 1], (*batch, m))).astype(np.float32)
    b = rng.standard_normal((*batch, m, n)).astype(np.float32)
    dense = np.zeros((*batch, m, m))
    idx = np.arange(m)
    dense[..., idx, idx] = d
    dense[..., idx[1:], idx[:-1]] = dl[..., 1:]
    dense[..., idx[:-1], idx[1:]] = du[..., :-1]
    want = np.linalg.solve(dense, b.astype(np.float64))
    dl_garbage = dl.copy()
    dl_garbage[..., 0] = 9.0
    got = L.tridiagonal_solve(dl_garbage, d, du, b)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    jitted = fg.jit(L.tridiagonal_solve)(dl, d, du, b)
    np.testing.assert_allclose(np.asarray(jitted), want, rtol=1e-5, atol=1e-5)


def test_tridiagonal_solve_gradient_and_errors():
    dl, d, du = np.array([0.0, 1.0, 1.0]), np.array([2.0, 2.0, 2.0]), np.array([1.0, 1.0, 0.0])
    dl, d, du = (x.astype(np.float32) for x in (dl, d, du))
    b = np.ones((3, 1), np.float32)
    g = fg.grad(lambda d: L.tridiagonal_solve(dl, d, du, b).sum())(d)
    np.testing.assert_allclose(np.asarray(g), [-0.25, 0.0, -0.25], atol=1e-6)  # JAX 0.10.2
    with pytest.raises(TypeError, match="rank at least 2"):
        L.tridiagonal_solve(dl, d, du, b[:, 0])
    with pytest.raises(NotImplementedError, match="perturb_singular"):
        L.tridiagonal_solve(dl, d, du, b, perturb_singular=True)
