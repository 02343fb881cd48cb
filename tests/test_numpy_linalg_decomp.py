"""eigh / eigvalsh (Jacobi), qr (Householder), multi_dot and random.orthogonal against numpy
(LAPACK): values, gradients (closed forms and check_grads), vmap against a loop, jit against
eager, size-0 and bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import random
from fungrad.testing import check_grads

la = fnp.linalg


def _sym(rng, n, batch=()):
    a = rng.randn(*batch, n, n).astype(np.float32)
    return a + np.swapaxes(a, -1, -2)


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 7), seed=st.integers(0, 999))
def test_eigh_matches_lapack(n, seed):
    s = _sym(np.random.RandomState(seed), n)
    w, v = la.eigh(s)
    w, v = np.asarray(w), np.asarray(v)
    want = np.linalg.eigvalsh(s.astype(np.float64))
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(w, want, atol=2e-6 * scale * n)
    np.testing.assert_allclose(v @ np.diag(w) @ v.T, s, atol=4e-6 * scale * n)
    np.testing.assert_allclose(v.T @ v, np.eye(n), atol=2e-6 * n)
    np.testing.assert_allclose(np.asarray(la.eigvalsh(s)), w, rtol=0, atol=0)


def test_eigh_uplo_symmetrize_degenerate_and_zero():
    rng = np.random.RandomState(0)
    s = _sym(rng, 4)
    lower_only = np.tril(s) + np.triu(rng.randn(4, 4).astype(np.float32), 1)  # junk above
    w = la.eigh(lower_only, UPLO="L", symmetrize_input=False).eigenvalues
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(s), atol=1e-5)
    w = la.eigh(np.eye(3, dtype=np.float32) * 2).eigenvalues  # repeated eigenvalues
    np.testing.assert_allclose(np.asarray(w), [2, 2, 2])
    np.testing.assert_allclose(np.asarray(la.eigvalsh(np.zeros((3, 3)))), 0)
    w, v = la.eigh(np.zeros((0, 0), np.float32))
    assert w.shape == (0,) and v.shape == (0, 0)


def test_eigh_batched_vmap_jit():
    s = _sym(np.random.RandomState(1), 4, (3,))
    want = np.linalg.eigvalsh(s)
    np.testing.assert_allclose(np.asarray(la.eigvalsh(s)), want, atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(fg.vmap(la.eigvalsh)(s)),
        np.stack([np.asarray(la.eigvalsh(x)) for x in s]),
        atol=1e-6,
    )
    np.testing.assert_allclose(
        np.asarray(fg.jit(la.eigvalsh)(s)), np.asarray(la.eigvalsh(s)), atol=1e-6
    )


def test_eigh_gradients():
    s = _sym(np.random.RandomState(2), 4)
    wn, vn = np.linalg.eigh(s.astype(np.float64))
    # d w_k / d S = v_k v_k^T (symmetrised input)
    g = np.asarray(fg.grad(lambda s: la.eigh(s)[0][-1])(s))
    np.testing.assert_allclose(g, np.outer(vn[:, -1], vn[:, -1]), atol=1e-5)
    sym = lambda x: (x + x.T) / 2  # noqa: E731
    check_grads(
        lambda x: la.eigvalsh(sym(x)),
        (fnp.asarray(s),),
        order=2,
        modes=("fwd", "rev"),
        atol=2e-2,
        rtol=2e-2,
    )
    # eigenvectors up to sign: a sign-invariant function of them
    check_grads(
        lambda x: fnp.sum(la.eigh(sym(x))[1] ** 2 * fnp.arange(4.0)),
        (fnp.asarray(s),),
        order=1,
        modes=("fwd", "rev"),
        atol=2e-2,
        rtol=2e-2,
    )


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (4, 4), (5, 1), (1, 3), (2, 3, 2)])
def test_qr_matches_lapack(shape):
    a = np.random.RandomState(3).randn(*shape).astype(np.float32)
    for mode in ("reduced", "complete"):
        q, r = la.qr(a, mode=mode)
        if a.ndim == 2:
            qn, rn = np.linalg.qr(a, mode=mode)
        else:
            qn, rn = zip(*(np.linalg.qr(x, mode=mode) for x in a))
            qn, rn = np.stack(qn), np.stack(rn)
        assert q.shape == qn.shape and r.shape == rn.shape
        np.testing.assert_allclose(np.asarray(q), qn, atol=2e-6)
        np.testing.assert_allclose(np.asarray(r), rn, atol=2e-6)
    np.testing.assert_allclose(np.asarray(la.qr(a, mode="r")), np.asarray(la.qr(a)[1]))


def test_qr_zero_column_grad_vmap_jit():
    a = np.array([[0.0, 1.0], [0.0, 2.0], [0.0, 3.0]], np.float32)
    q, r = la.qr(a)
    np.testing.assert_allclose(np.asarray(q @ r), a, atol=1e-6)
    b = np.random.RandomState(4).randn(3, 4, 3).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(fg.vmap(lambda x: la.qr(x)[1])(b)),
        np.stack([np.asarray(la.qr(x)[1]) for x in b]),
        atol=1e-6,
    )
    np.testing.assert_allclose(
        np.asarray(fg.jit(lambda x: la.qr(x)[0])(b[0])), np.asarray(la.qr(b[0])[0]), atol=1e-6
    )
    check_grads(
        lambda x: la.qr(x)[1],
        (fnp.asarray(b[0]),),
        order=1,
        modes=("fwd", "rev"),
        atol=2e-2,
        rtol=2e-2,
    )


def test_multi_dot():
    rng = np.random.RandomState(5)
    xs = [rng.randn(3), rng.randn(3, 10), rng.randn(10, 2), rng.randn(2, 4), rng.randn(4)]
    xs = [x.astype(np.float32) for x in xs]
    np.testing.assert_allclose(float(la.multi_dot(xs)), np.linalg.multi_dot(xs), rtol=1e-4)
    np.testing.assert_allclose(
        np.asarray(la.multi_dot(xs[1:4])), np.linalg.multi_dot(xs[1:4]), rtol=1e-5
    )
    with pytest.raises(ValueError, match="multi_dot.*not aligned"):
        la.multi_dot([np.ones((2, 3)), np.ones((2, 3))])
    with pytest.raises(ValueError, match="at least two"):
        la.multi_dot([np.ones((2, 2))])


def test_bad_input():
    with pytest.raises(ValueError, match="eigh.*square"):
        la.eigh(np.ones((2, 3)))
    with pytest.raises(ValueError, match="UPLO"):
        la.eigh(np.eye(2), UPLO="X")
    with pytest.raises(ValueError, match="qr.*mode"):
        la.qr(np.eye(2), mode="economic")
    with pytest.raises(ValueError, match="qr"):
        la.qr(np.ones(3))


def test_random_orthogonal():
    key = random.PRNGKey(3)
    for n, m in [(3, None), (4, 2), (2, 4)]:
        o = np.asarray(random.orthogonal(key, n, m=m))
        mm = n if m is None else m
        assert o.shape == (n, mm)
        small = o.T @ o if n >= mm else o @ o.T
        np.testing.assert_allclose(small, np.eye(min(n, mm)), atol=2e-6)
        # the definition: Q of normal draws with R's diagonal made positive (numpy's QR)
        z = np.asarray(random.normal(key, (max(n, mm), min(n, mm))))
        q, r = np.linalg.qr(z)
        q = q * np.sign(np.diag(r))[None, :]
        np.testing.assert_allclose(o, q if n >= mm else q.T, atol=2e-6)
    # JAX's numbers for PRNGKey(3), n = 3 (jax 0.10.2)
    np.testing.assert_allclose(
        np.asarray(random.orthogonal(key, 3))[0], [-0.52718, 0.75919, -0.38172], atol=2e-5
    )
    assert random.orthogonal(key, 3, (2,)).shape == (2, 3, 3)
    with pytest.raises(TypeError, match="orthogonal"):
        random.orthogonal(key, 2.5)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (5, 5), (6, 1), (2, 3, 2)])
def test_svd_matches_lapack(shape):
    a = np.random.RandomState(6).randn(*shape).astype(np.float32)
    for full in (False, True):
        u, s, vt = la.svd(a, full_matrices=full)
        un, sn, vtn = np.linalg.svd(a, full_matrices=full)
        assert u.shape == un.shape and s.shape == sn.shape and vt.shape == vtn.shape
        u, s, vt = np.asarray(u), np.asarray(s), np.asarray(vt)
        k = s.shape[-1]
        np.testing.assert_allclose(s, sn, atol=2e-6)
        np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vt[..., :k, :], a, atol=3e-6)
        utu, vvt = np.swapaxes(u, -1, -2) @ u, vt @ np.swapaxes(vt, -1, -2)
        np.testing.assert_allclose(utu, np.broadcast_to(np.eye(u.shape[-1]), utu.shape), atol=1e-6)
        np.testing.assert_allclose(vvt, np.broadcast_to(np.eye(vt.shape[-2]), vvt.shape), atol=1e-6)
        np.testing.assert_allclose(np.abs(u[..., :k]), np.abs(un[..., :k]), atol=2e-6)
    np.testing.assert_allclose(np.asarray(la.svdvals(a)), sn, atol=2e-6)


def test_rank_deficient_pinv_lstsq_rank_cond_norm():
    rng = np.random.RandomState(7)
    r = (rng.randn(5, 2) @ rng.randn(2, 4)).astype(np.float32)
    assert int(la.matrix_rank(r)) == 2 and int(la.matrix_rank(r.T)) == 2
    u, s, vt = (np.asarray(t) for t in la.svd(r))
    np.testing.assert_allclose(u.T @ u, np.eye(5), atol=1e-6)  # completed where s == 0
    want = np.linalg.pinv(r.astype(np.float64), rcond=1e-5)  # JAX's default cut-off
    np.testing.assert_allclose(np.asarray(la.pinv(r)), want, atol=1e-5)
    np.testing.assert_allclose(np.asarray(la.pinv(r.T)), want.T, atol=1e-5)
    a = rng.randn(6, 3).astype(np.float32)
    b = rng.randn(6, 2).astype(np.float32)
    x, resid, rank, sv = la.lstsq(a, b)
    xn, rn, kn, sn = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(np.asarray(x), xn, atol=1e-5)
    np.testing.assert_allclose(np.asarray(resid), rn, rtol=1e-4)
    assert int(rank) == kn
    x1, resid1, _, _ = la.lstsq(a, b[:, 0])
    assert x1.shape == (3,) and resid1.shape == (1,)
    assert la.lstsq(a[:2], b[:2, 0], numpy_resid=True)[1].shape == (0,)
    xr = np.asarray(la.lstsq(r, b[:5, 0])[0])  # minimum-norm solution of a deficient system
    np.testing.assert_allclose(
        xr, np.linalg.pinv(r.astype(np.float64), rcond=1e-5) @ b[:5, 0], atol=1e-4
    )
    with pytest.raises(TypeError, match="numpy_resid"):
        fg.jit(lambda a, b: la.lstsq(a, b, numpy_resid=True))(a, b)
    np.testing.assert_allclose(float(la.cond(a)), np.linalg.cond(a), rtol=1e-5)
    np.testing.assert_allclose(float(la.cond(a[:3], 1)), np.linalg.cond(a[:3], 1), rtol=1e-4)
    assert la.svd(np.zeros((0, 3), np.float32)).S.shape == (0,)


def test_svd_pinv_gradients_vmap_jit():
    rng = np.random.RandomState(8)
    a = rng.randn(5, 3).astype(np.float32)
    un, sn, vtn = np.linalg.svd(a)
    g = np.asarray(fg.grad(lambda a: la.svdvals(a)[0])(a))
    np.testing.assert_allclose(g, np.outer(un[:, 0], vtn[0]), atol=1e-5)
    # sign-invariant functions of the singular vectors, tall and wide
    check_grads(
        lambda x: la.svd(x, full_matrices=False)[0] ** 2,
        (fnp.asarray(a),),
        order=1,
        modes=("fwd", "rev"),
        atol=3e-2,
        rtol=3e-2,
    )
    check_grads(
        lambda x: la.svd(x, full_matrices=False)[2] ** 2,
        (fnp.asarray(a.T),),
        order=1,
        modes=("fwd", "rev"),
        atol=3e-2,
        rtol=3e-2,
    )
    check_grads(la.pinv, (fnp.asarray(a),), order=1, modes=("fwd", "rev"), atol=3e-2, rtol=3e-2)
    # pinv of the identity (repeated singular values): d sum(pinv(A)) / dA = -ones
    np.testing.assert_allclose(np.asarray(fg.grad(lambda x: la.pinv(x).sum())(np.eye(3))), -1.0)
    with pytest.raises(TypeError, match="full_matrices=True"):
        fg.grad(lambda x: la.svd(x)[0].sum())(a)
    b = rng.randn(3, 4, 3).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(fg.vmap(la.svdvals)(b)),
        np.stack([np.asarray(la.svdvals(x)) for x in b]),
        atol=1e-6,
    )
    np.testing.assert_allclose(np.asarray(fg.jit(la.pinv)(a)), np.asarray(la.pinv(a)), atol=1e-6)
