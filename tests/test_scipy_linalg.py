"""fungrad.scipy.linalg against scipy.linalg: values, gradients (check_grads), vmap against a
Python loop, jit against eager, and bad-input errors."""

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.scipy import linalg as fla
from fungrad.testing import check_grads


def _spd(rng, n, batch=()):
    a = rng.randn(*batch, n, n)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(np.float32)


def _tri(rng, n, lower, batch=()):
    a = rng.randn(*batch, n, n) + 3 * np.eye(n)
    return (np.tril(a) if lower else np.triu(a)).astype(np.float32)


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 6),
    k=st.sampled_from([None, 1, 3]),
    lower=st.booleans(),
    trans=st.sampled_from([0, 1, "T", "N"]),
    unit=st.booleans(),
    seed=st.integers(0, 99),
)
def test_solve_triangular_matches_scipy(n, k, lower, trans, unit, seed):
    rng = np.random.RandomState(seed)
    a = rng.randn(n, n).astype(np.float32) + 3 * np.eye(n, dtype=np.float32)  # both triangles
    b = rng.randn(*((n,) if k is None else (n, k))).astype(np.float32)
    got = fla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
    want = sla.solve_triangular(
        a.astype(np.float64), b, trans=trans, lower=lower, unit_diagonal=unit
    )
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-4, atol=2e-5)


def test_solve_triangular_batched_broadcast_and_vmap():
    rng = np.random.RandomState(0)
    a = _tri(rng, 4, True, (3,))
    b = rng.randn(4, 2).astype(np.float32)  # broadcasts against the batch of a
    got = np.asarray(fla.solve_triangular(a, b, lower=True))
    want = np.stack([sla.solve_triangular(ai, b, lower=True) for ai in a])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    bv = rng.randn(3, 4).astype(np.float32)
    vm = fg.vmap(lambda ai, bi: fla.solve_triangular(ai, bi, lower=True))(a, bv)
    loop = [np.asarray(fla.solve_triangular(ai, bi, lower=True)) for ai, bi in zip(a, bv)]
    np.testing.assert_allclose(np.asarray(vm), np.stack(loop), rtol=1e-6)
    # a batch of vectors: b.ndim == a.ndim - 1
    np.testing.assert_allclose(
        np.asarray(fla.solve_triangular(a, bv, lower=True)), np.stack(loop), rtol=1e-6
    )


def test_cholesky_cho_factor_cho_solve():
    rng = np.random.RandomState(1)
    s = _spd(rng, 5)
    b = rng.randn(5, 2).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fla.cholesky(s)), sla.cholesky(s), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(fla.cholesky(s, lower=True)), sla.cholesky(s, lower=True), rtol=1e-5, atol=1e-5
    )
    for lower in (True, False):
        c, low = fla.cho_factor(s, lower=lower)
        assert low is lower
        want = sla.cho_solve(sla.cho_factor(s.astype(np.float64), lower=lower), b)
        np.testing.assert_allclose(
            np.asarray(fla.cho_solve((c, low), b)), want, rtol=1e-4, atol=1e-5
        )
        np.testing.assert_allclose(
            np.asarray(fla.cho_solve((c, low), b[:, 0])), want[:, 0], rtol=1e-4, atol=1e-5
        )


def test_solve_inv_det():
    rng = np.random.RandomState(2)
    s = _spd(rng, 4)
    a = rng.randn(4, 4).astype(np.float32)
    b = rng.randn(4).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fla.solve(a, b)), sla.solve(a, b), rtol=1e-4)
    for lower in (True, False):
        # only the named triangle is read
        junk = np.tril(s) if lower else np.triu(s)
        np.testing.assert_allclose(
            np.asarray(fla.solve(junk, b, lower=lower, assume_a="pos")),
            sla.solve(s, b, assume_a="pos"),
            rtol=1e-4,
        )
    np.testing.assert_allclose(np.asarray(fla.inv(a)), sla.inv(a), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(fla.det(a)), sla.det(a), rtol=1e-4)


def test_gradients_check_grads():
    rng = np.random.RandomState(3)
    lo = fnp.asarray(_tri(rng, 3, True))
    b = fnp.asarray(rng.randn(3, 2).astype(np.float32))
    check_grads(
        lambda a, b: fla.solve_triangular(a, b, lower=True),
        (lo, b),
        order=2,
        modes=("fwd", "rev"),
        atol=5e-2,
        rtol=5e-2,
    )
    s = fnp.asarray(_spd(rng, 3))

    def gp_nll(s, y):
        c = fla.cho_factor(s, lower=True)
        return y @ fla.cho_solve(c, y) + 2 * fnp.sum(fnp.log(fnp.diag(c[0])))

    y = fnp.asarray(rng.randn(3).astype(np.float32))
    check_grads(gp_nll, (s, y), order=1, modes=("rev",), atol=5e-2, rtol=5e-2)
    # d/dS [y^T S^-1 y + logdet S] = -S^-1 y y^T S^-1 + S^-1
    si = np.linalg.inv(np.asarray(s, np.float64))
    yy = np.asarray(y, np.float64)
    want = -si @ np.outer(yy, yy) @ si + si
    got = np.asarray(fg.grad(gp_nll)(s, y))
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_jit_matches_eager_and_larger_n():
    rng = np.random.RandomState(4)
    s = _spd(rng, 30)
    y = rng.randn(30).astype(np.float32)

    def f(s):
        c = fla.cho_factor(s, lower=True)
        return y @ fla.cho_solve(c, y)

    np.testing.assert_allclose(float(fg.jit(f)(s)), float(f(s)), rtol=1e-5)
    np.testing.assert_allclose(float(f(s)), y @ np.linalg.solve(s.astype(np.float64), y), rtol=1e-4)
    g = np.asarray(fg.jit(fg.grad(lambda s: fla.solve_triangular(s, y, lower=True).sum()))(s))
    g_eager = np.asarray(fg.grad(lambda s: fla.solve_triangular(s, y, lower=True).sum())(s))
    np.testing.assert_allclose(g, g_eager, rtol=1e-5, atol=1e-7)


def test_size_zero_and_nan():
    x = fla.solve_triangular(np.zeros((0, 0), np.float32), np.zeros((0, 2), np.float32))
    assert x.shape == (0, 2)
    a = np.array([[0.0, 0.0], [1.0, 1.0]], np.float32)  # zero pivot -> inf/nan like scipy
    got = np.asarray(fla.solve_triangular(a, np.ones(2, np.float32), lower=True))
    assert not np.isfinite(got).all()


def test_bad_input_errors():
    with pytest.raises(ValueError, match="solve_triangular.*square"):
        fla.solve_triangular(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match="solve_triangular.*incompatible shapes"):
        fla.solve_triangular(np.eye(3), np.ones(2))
    with pytest.raises(ValueError, match="trans"):
        fla.solve_triangular(np.eye(2), np.ones(2), trans=3)
    with pytest.raises(TypeError, match="cho_solve.*cho_factor"):
        fla.cho_solve(np.eye(2), np.ones(2))
    with pytest.raises(ValueError, match="assume_a"):
        fla.solve(np.eye(2), np.ones(2), assume_a="banded")
    with pytest.raises(TypeError):
        fla.cholesky("not an array")


def test_expm_matches_scipy_grad_vmap():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]])
    for scale in (0.0, 0.01, 0.3, 1.0):
        got = np.asarray(fla.expm((a * scale).astype(np.float32)))
        np.testing.assert_allclose(got, sla.expm(a * scale), rtol=2e-5, atol=1e-6)
    # d/dt sum(expm(t a)) = sum(a expm(t a))
    g = float(fg.grad(lambda t: fla.expm(a.astype(np.float32) * t).sum())(0.1))
    np.testing.assert_allclose(g, (a @ sla.expm(0.1 * a)).sum(), rtol=1e-4)
    stack = np.stack([a * 0.1, -a * 0.2]).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(fg.vmap(fla.expm)(stack)),
        np.stack([sla.expm(m) for m in stack]),
        rtol=2e-5,
        atol=1e-6,
    )


def test_eigh_svd_qr_lu_scipy_conventions():
    rng = np.random.RandomState(9)
    a = rng.randn(4, 4).astype(np.float32)
    s = _spd(rng, 4)
    np.testing.assert_allclose(
        np.asarray(fla.eigh(np.tril(s), lower=True)[0]), sla.eigh(s, eigvals_only=True), rtol=1e-5
    )
    np.testing.assert_allclose(
        np.asarray(fla.eigh(s, eigvals_only=True)), sla.eigh(s, eigvals_only=True), rtol=1e-5
    )
    np.testing.assert_allclose(np.asarray(fla.svd(a)[1]), sla.svdvals(a), rtol=1e-5)
    assert [x.shape for x in fla.qr(a[:, :2])] == [(4, 4), (4, 2)]
    assert [x.shape for x in fla.qr(a[:, :2], mode="economic")] == [(4, 2), (2, 2)]
    (r,) = fla.qr(a, mode="r")
    np.testing.assert_allclose(np.asarray(r), sla.qr(a, mode="r")[0], atol=1e-5)
    p, lo, up = (np.asarray(t) for t in fla.lu(a))
    pn, ln, un = sla.lu(a)
    np.testing.assert_allclose(p, pn)
    np.testing.assert_allclose(lo, ln, atol=1e-5)
    np.testing.assert_allclose(up, un, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fla.lu(a, permute_l=True)[0]), pn @ ln, atol=1e-5)
    luf = fla.lu_factor(a)
    np.testing.assert_array_equal(np.asarray(luf[1]), sla.lu_factor(a)[1])
    b = rng.randn(4, 2).astype(np.float32)
    for trans in (0, 1):
        np.testing.assert_allclose(
            np.asarray(fla.lu_solve(luf, b, trans=trans)),
            sla.lu_solve(sla.lu_factor(a), b, trans=trans),
            rtol=1e-4,
            atol=1e-5,
        )
    np.testing.assert_allclose(
        np.asarray(fla.lu_solve(luf, b[:, 0])), np.linalg.solve(a, b[:, 0]), rtol=1e-4, atol=1e-5
    )
    with pytest.raises(ValueError, match="generalized"):
        fla.eigh(s, s)


def test_block_diag_toeplitz():
    got = fla.block_diag(np.ones((2, 2)), np.array([3.0, 4.0]), 5.0)
    np.testing.assert_allclose(np.asarray(got), sla.block_diag(np.ones((2, 2)), [3.0, 4.0], 5.0))
    c, r = np.array([1.0, 2.0, 3.0]), np.array([9.0, 5.0, 6.0, 7.0])
    np.testing.assert_allclose(np.asarray(fla.toeplitz(c)), sla.toeplitz(c))
    np.testing.assert_allclose(np.asarray(fla.toeplitz(c, r)), sla.toeplitz(c, r))
