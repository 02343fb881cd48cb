"""The ``qr``, ``eigh`` and ``svd`` primitives (fungrad/lax/linalg_decomp_primitives.py):
reconstruction identities and values against numpy (eager and jit: LAPACK steps on the CPU),
vmap against a loop, derivatives against finite differences (``check_grads``) on functions
that do not depend on the vectors' signs, NaN for input LAPACK cannot decompose, errors naming
the op, a program whose size does not grow with n, and the loop algorithms the GPU lowers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.ir import passes
from fungrad.lax import linalg as L
from fungrad.lax import linalg_loops
from fungrad.lax.linalg_decomp_primitives import eigh_p, qr_p, svd_p
from fungrad.lowering import fusion
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.lowering.gpu.policy import GpuPolicy
from fungrad.lowering.steps import EighStep, GeqrfStep, QRStep, SVDStep
from fungrad.testing import check_grads
from fungrad.transforms.jvp import NotDifferentiableError

la = fnp.linalg


def _tol(dtype, n):
    return (3e-5 if dtype == np.float32 else 1e-12) * max(n, 1)


def _sym(rng, shape, dtype=np.float64):
    a = rng.standard_normal(shape)
    return (a + np.swapaxes(a, -1, -2)).astype(dtype)


def _mT(x):
    return np.swapaxes(x, -1, -2)


def _eye_like(x):
    return np.broadcast_to(np.eye(x.shape[-1]), x.shape[:-2] + (x.shape[-1],) * 2)


# -- values, eager and jit ----------------------------------------------------------------------


def _check_qr(a, q, r, full):
    m, n = a.shape[-2:]
    k = min(m, n)
    tol = _tol(a.dtype, max(m, n))
    assert q.shape == a.shape[:-2] + (m, m if full else k)
    assert r.shape == a.shape[:-2] + (m if full else k, n)
    np.testing.assert_allclose(q @ r, a, atol=tol)
    np.testing.assert_allclose(_mT(q) @ q, _eye_like(_mT(q) @ q), atol=tol)
    np.testing.assert_array_equal(np.tril(r, -1), 0)
    if 0 not in a.shape:
        qn, rn = np.linalg.qr(a, mode="complete" if full else "reduced")
        np.testing.assert_allclose(r, rn, atol=tol * 10)  # LAPACK's signs


def _check_eigh(a, v, w):
    n = a.shape[-1]
    tol = _tol(a.dtype, n) * max(1.0, float(np.abs(a).max(initial=0)))
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a.astype(np.float64)), atol=tol)
    np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=tol * 4)
    np.testing.assert_allclose(_mT(v) @ v, _eye_like(v), atol=tol)


def _check_svd(a, s, u, vt, full):
    m, n = a.shape[-2:]
    k = min(m, n)
    tol = _tol(a.dtype, max(m, n)) * max(1.0, float(np.abs(a).max(initial=0)))
    assert s.shape == a.shape[:-2] + (k,)
    assert u.shape == a.shape[:-2] + (m, m if full else k)
    assert vt.shape == a.shape[:-2] + (n if full else k, n)
    np.testing.assert_allclose(s, np.linalg.svd(a.astype(np.float64), compute_uv=False), atol=tol)
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vt[..., :k, :], a, atol=tol * 4)
    np.testing.assert_allclose(_mT(u) @ u, _eye_like(_mT(u) @ u), atol=tol)
    np.testing.assert_allclose(vt @ _mT(vt), _eye_like(vt @ _mT(vt)), atol=tol)


SHAPES = [(0, 0), (1, 1), (2, 2), (7, 7), (64, 64), (7, 3), (3, 7), (0, 3), (3, 0), (2, 3, 4, 2)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_qr_eager_and_jit(shape, dtype, x64):
    a = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)
    for full in (True, False):
        e = [np.asarray(t) for t in qr_p.bind(a, full_matrices=full)]
        j = [np.asarray(t) for t in fg.jit(lambda x, f=full: L.qr(x, full_matrices=f))(a)]
        _check_qr(a, *e, full)
        _check_qr(a, *j, full)
        np.testing.assert_allclose(j[0], e[0], atol=_tol(dtype, max(shape[-2:])))


@pytest.mark.parametrize("shape", SHAPES)
def test_qr_raw_is_lapacks_geqrf(shape):
    a = np.random.default_rng(sum(shape) + 5).standard_normal(shape).astype(np.float32)
    h, tau = (np.asarray(t) for t in la.qr(a, mode="raw"))
    k = min(shape[-2:])
    assert h.shape == shape[:-2] + shape[-1:] + shape[-2:-1] and tau.shape == shape[:-2] + (k,)
    if a.ndim == 2 and a.size:
        hn, taun = np.linalg.qr(a, mode="raw")
        np.testing.assert_allclose(h, hn, atol=1e-5)
        np.testing.assert_allclose(tau, taun, atol=1e-6)
    # Q = H_1 ... H_k with H_j = I - tau_j v_j v_jᵀ rebuilds a from the packed R
    batch = int(np.prod(shape[:-2]))
    packed = np.swapaxes(h, -1, -2).reshape((batch,) + shape[-2:])
    for p, t, x in zip(packed, tau.reshape(batch, k), a.reshape((batch,) + shape[-2:])):
        q = np.eye(shape[-2])
        for j in range(k):
            v = np.concatenate([np.zeros(j), [1.0], p[j + 1 :, j]])
            q = q @ (np.eye(shape[-2]) - t[j] * np.outer(v, v))
        np.testing.assert_allclose(q @ np.triu(p), x, atol=2e-5 * max(shape))
    jitted = fg.jit(lambda x: la.qr(x, mode="raw"))(a)
    looped = fg.jit(linalg_loops.geqrf_loop)(a)
    for got, want in ((jitted[0], h), (jitted[1], tau), (_mT(np.asarray(looped[0])), h)):
        np.testing.assert_allclose(np.asarray(got), want, atol=2e-5 * max(shape))
    np.testing.assert_allclose(np.asarray(looped[1]), tau, atol=1e-5)
    with pytest.raises(NotDifferentiableError, match="geqrf"):
        fg.grad(lambda x: fnp.sum(L.geqrf(x)[1]))(a)


@pytest.mark.parametrize("shape", [s for s in SHAPES if s[-1] == s[-2]] + [(2, 3, 5, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eigh_eager_and_jit(shape, dtype, x64):
    a = _sym(np.random.default_rng(sum(shape)), shape, dtype)
    v, w = (np.asarray(t) for t in L.eigh(a))
    _check_eigh(a, v, w)
    vj, wj = (np.asarray(t) for t in fg.jit(L.eigh)(a))
    _check_eigh(a, vj, wj)
    np.testing.assert_allclose(wj, w, atol=_tol(dtype, shape[-1]) * 4)
    # each vector up to sign: v vᵀ projections agree
    np.testing.assert_allclose(vj * vj, v * v, atol=_tol(dtype, shape[-1]) * 20)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_svd_eager_and_jit(shape, dtype, x64):
    a = np.random.default_rng(sum(shape) + 1).standard_normal(shape).astype(dtype)
    for full in (True, False):
        s, u, vt = (np.asarray(t) for t in svd_p.bind(a, full_matrices=full, compute_uv=True))
        _check_svd(a, s, u, vt, full)
        uj, sj, vtj = (
            np.asarray(t) for t in fg.jit(lambda x, f=full: L.svd(x, full_matrices=f))(a)
        )
        _check_svd(a, sj, uj, vtj, full)
        np.testing.assert_allclose(sj, s, atol=_tol(dtype, max(shape[-2:])))
    sv = fg.jit(lambda x: L.svd(x, compute_uv=False))(a)
    np.testing.assert_allclose(np.asarray(sv), s, atol=_tol(dtype, max(shape[-2:])))
    if 0 in shape[-2:]:  # empty: identity full factors, as numpy
        un, _, vtn = np.linalg.svd(a, full_matrices=True)
        _, uf, vtf = svd_p.bind(a, full_matrices=True, compute_uv=True)
        uj, _, vtj = fg.jit(L.svd)(a)
        for got in (uf, uj):
            np.testing.assert_array_equal(np.asarray(got), un)
        for got in (vtf, vtj):
            np.testing.assert_array_equal(np.asarray(got), vtn)


def test_size_300_eager_and_jit():
    rng = np.random.default_rng(300)
    a = rng.standard_normal((300, 300)).astype(np.float32)
    s = a + a.T
    for f in (lambda x: x, fg.jit):
        _check_qr(a, *(np.asarray(t) for t in f(lambda x: L.qr(x))(a)), True)
        _check_eigh(s, *(np.asarray(t) for t in f(L.eigh)(s)))
        u, sv, vt = f(lambda x: L.svd(x, full_matrices=False))(a)
        _check_svd(a, np.asarray(sv), np.asarray(u), np.asarray(vt), False)


@settings(max_examples=10, deadline=None)
@given(
    m=st.integers(1, 6),
    n=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    lower=st.booleans(),
)
def test_eigh_reads_one_triangle_and_qr_svd_any_shape(m, n, seed, lower):
    rng = np.random.default_rng(seed)
    s = _sym(rng, (n, n), np.float32)
    noise = rng.standard_normal((n, n)).astype(np.float32)
    junk = s + (np.triu(noise, 1) if lower else np.tril(noise, -1))  # the other triangle
    w = eigh_p.bind(junk, lower=lower, sort_eigenvalues=True)[1]
    wj = fg.jit(lambda x: L.eigh(x, lower=lower, symmetrize_input=False)[1])(junk)
    for got in (w, wj):
        np.testing.assert_allclose(np.asarray(got), np.linalg.eigvalsh(s), atol=2e-5 * n)
    a = rng.standard_normal((m, n)).astype(np.float32)
    _check_qr(a, *(np.asarray(t) for t in fg.jit(lambda x: L.qr(x))(a)), True)
    _check_svd(
        a, *(np.asarray(t) for t in svd_p.bind(a, full_matrices=True, compute_uv=True)), True
    )


def test_nan_input_gives_nan_eager_and_jit():
    bad = np.full((2, 3, 3), np.nan, np.float32)
    bad[1] = np.eye(3)
    for f in (lambda x: L.eigh(x), lambda x: L.svd(x)):
        for g in (f, fg.jit(f)):
            outs = [np.asarray(t) for t in g(bad)]
            for o in outs:
                assert np.isnan(o[0]).all()
                assert not np.isnan(o[1]).any()
    q, r = fg.jit(L.qr)(bad)
    assert np.isnan(np.asarray(r)[0]).any()


# -- vmap ---------------------------------------------------------------------------------------


def test_vmap_matches_loop():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 5, 4))
    s = _sym(rng, (3, 4, 4))
    for f, x in (
        (lambda x: L.qr(x), a),
        (lambda x: L.qr(x, full_matrices=False), np.swapaxes(a, 1, 2)),
        (lambda x: L.eigh(x), s),
        (lambda x: L.svd(x), a),
        (lambda x: L.svd(x, compute_uv=False), a),
    ):
        want = [np.stack(t) for t in zip(*(fg.tree_util.tree_leaves(f(xi)) for xi in x))]
        for got in (fg.vmap(f)(x), fg.vmap(f, in_axes=2)(np.moveaxis(x, 0, 2))):
            for g, w in zip(fg.tree_util.tree_leaves(got), want):
                np.testing.assert_allclose(np.asarray(g), w, atol=1e-12)


# -- derivatives --------------------------------------------------------------------------------


def _grads(f, *args):
    check_grads(f, args, order=1, modes=("fwd", "rev"))


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (2, 4, 2)])
def test_qr_gradients(shape, x64):
    a = np.random.default_rng(sum(shape)).standard_normal(shape)
    _grads(lambda x: L.qr(x, full_matrices=False), a)
    _grads(lambda x: L.qr(x, full_matrices=True), a)  # tall: the completion's derivative
    _grads(fg.jit(lambda x: L.qr(x)), a)


def test_eigh_gradients(x64):
    rng = np.random.default_rng(7)
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    a = (q * np.array([1.0, 2.0, 4.0, 7.0])) @ q.T + 0.05 * rng.standard_normal((4, 4))
    w, v = np.linalg.eigh((a + a.T) / 2)
    # d w_k / dA = v_k v_kᵀ (of the symmetrized input)
    g = np.asarray(fg.grad(lambda x: L.eigh(x)[1][-1])(a))
    np.testing.assert_allclose(g, np.outer(v[:, -1], v[:, -1]), atol=1e-10)
    _grads(lambda x: L.eigh(x)[1], a)  # the eigenvalues
    _grads(lambda x: fnp.sum(L.eigh(x)[1]) * 1.5, a)
    # sign-invariant functions of the vectors: |v|² weighted, projections v vᵀ
    _grads(lambda x: L.eigh(x)[0] ** 2 * fnp.arange(4.0), a)
    _grads(lambda x: L.eigh(x)[0][:, :2] @ L.eigh(x)[0][:, :2].T, a)
    # one triangle read: the derivative sees only it
    lower_only = lambda x: L.eigh(x, symmetrize_input=False)[1]  # noqa: E731
    _grads(lower_only, np.tril(a) + np.triu(rng.standard_normal((4, 4)), 1))
    _grads(fg.jit(lambda x: la.eigvalsh(x)), a)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 3, 2)])
def test_svd_gradients(shape, x64):
    rng = np.random.default_rng(sum(shape) + 3)
    a = rng.standard_normal(shape)
    _grads(lambda x: L.svd(x, compute_uv=False), a)
    _grads(lambda x: fnp.sum(la.svdvals(x)), a)

    def recon(x):  # f(U diag(s) Vᵀ): sign-invariant
        u, s, vt = L.svd(x, full_matrices=False)
        return (u * s[..., None, :]) @ vt

    _grads(recon, a)
    _grads(lambda x: [t**2 for t in L.svd(x, full_matrices=False)], a)
    _grads(fg.jit(lambda x: L.svd(x, full_matrices=False)[0] ** 2), a)
    if shape[-1] == shape[-2]:
        _grads(lambda x: L.svd(x)[0] ** 2, a)  # square: full factors are the reduced ones
    else:
        with pytest.raises(TypeError, match="svd.*full_matrices=True"):
            fg.grad(lambda x: fnp.sum(L.svd(x)[0]))(a)
    u, s, vt = np.linalg.svd(a[..., :, :] if a.ndim == 2 else a[0])
    x0 = a if a.ndim == 2 else a[0]
    g = np.asarray(fg.grad(lambda x: la.svdvals(x)[0])(x0))
    np.testing.assert_allclose(g, np.outer(u[:, 0], vt[0]), atol=1e-10)


def test_svd_hermitian_goes_through_eigh():
    a = np.array([[2.0, 1.0, 0.0], [1.0, -3.0, 0.5], [0.0, 0.5, 1.0]], np.float32)
    for f in (la.svd, fg.jit(la.svd, static_argnames="hermitian")):
        u, s, vh = (np.asarray(t) for t in f(a, hermitian=True))
        np.testing.assert_allclose(s, np.sort(np.abs(np.linalg.eigvalsh(a)))[::-1], atol=1e-5)
        np.testing.assert_allclose((u * s) @ vh, a, atol=1e-5)
        # JAX 0.10.2's result (its eigh and signs are LAPACK's, as here)
        np.testing.assert_allclose(u[:, 0], [0.18589735, -0.9758371, 0.11482237], atol=1e-5)
        np.testing.assert_allclose(vh[0], [-0.18589735, 0.9758371, -0.11482237], atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(la.svd(a, hermitian=True, compute_uv=False)), s, atol=1e-6
    )
    with pytest.raises(ValueError, match="svd.*square"):
        la.svd(np.ones((2, 3)), hermitian=True)
    b = np.random.default_rng(2).standard_normal((4, 2))
    low_rank = b @ b.T - 2 * np.outer(b[:, 0], b[:, 0])  # symmetric, rank 2, indefinite
    np.testing.assert_allclose(
        np.asarray(la.pinv(low_rank, hermitian=True)),
        np.linalg.pinv(low_rank, hermitian=True),
        atol=1e-5,
    )
    assert int(la.matrix_rank(low_rank, hermitian=True)) == 2


def test_hermitian_gradients(x64):
    c = _sym(np.random.default_rng(3), (3, 3))
    _grads(lambda x: la.pinv(x, hermitian=True), c)
    _grads(lambda x: la.svd(x, hermitian=True, compute_uv=False), c)


def test_pinv_lstsq_norm_through_the_primitives(x64):
    rng = np.random.default_rng(11)
    a = rng.standard_normal((5, 3))
    np.testing.assert_allclose(np.asarray(fg.jit(la.pinv)(a)), np.linalg.pinv(a), atol=1e-12)
    np.testing.assert_allclose(float(la.norm(a, 2)), np.linalg.norm(a, 2), rtol=1e-12)
    np.testing.assert_allclose(float(la.norm(a, "nuc")), np.linalg.norm(a, "nuc"), rtol=1e-12)
    np.testing.assert_allclose(float(fg.jit(la.cond)(a)), np.linalg.cond(a), rtol=1e-10)
    check_grads(lambda x: la.norm(x, 2), (a,), order=1, modes=("fwd", "rev"))


# -- programs and errors ------------------------------------------------------------------------


def _plan(f, args, policy):
    return fusion.plan(passes.optimize(fg.make_jaxpr(f)(*args)), policy=policy)


def test_program_size_does_not_grow_and_cpu_plan_has_one_step():
    def loss(x):
        q, r = L.qr(x)
        v, w = L.eigh(x)
        return fnp.sum(q * r) + fnp.sum(w) + fnp.sum(L.svd(x, compute_uv=False))

    sizes = [
        len(fg.make_jaxpr(fg.grad(loss))(np.random.default_rng(n).standard_normal((n, n))).eqns)
        for n in (2, 9, 40)
    ]
    assert sizes[0] == sizes[1] == sizes[2]
    a = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    kinds = (QRStep, EighStep, SVDStep, GeqrfStep)
    prog = _plan(lambda x: (L.qr(x), L.eigh(x), L.svd(x), L.geqrf(x)), (a,), CpuPolicy())
    if CpuPolicy().linalg_steps:
        for kind in kinds:
            assert sum(isinstance(s, kind) for s in prog.steps) == 1
    gprog = _plan(lambda x: (L.qr(x), L.eigh(x), L.svd(x), L.geqrf(x)), (a,), GpuPolicy())
    assert not any(isinstance(s, kinds) for s in gprog.steps)


def test_errors_name_the_op():
    with pytest.raises(TypeError, match="qr.*int32"):
        qr_p.bind(np.ones((3, 3), np.int32), full_matrices=True)
    with pytest.raises(ValueError, match=r"svd.*\[\.\.\., m, n\].*\(3,\)"):
        svd_p.bind(np.ones(3), full_matrices=True, compute_uv=True)
    with pytest.raises(ValueError, match=r"eigh.*square.*\(2, 3\)"):
        eigh_p.bind(np.ones((2, 3)), lower=True, sort_eigenvalues=True)
    with pytest.raises(ValueError, match="eigh.*subset_by_index"):
        L.eigh(np.eye(3), subset_by_index=(0, 1))
    with pytest.raises(ValueError, match="qr.*pivoting"):
        L.qr(np.eye(3), pivoting=True)
    with pytest.raises(ValueError, match="qr.*mode.*'economic'"):
        la.qr(np.eye(3), mode="economic")


# -- the loop algorithms (the GPU's lowering) ---------------------------------------------------


def test_loop_algorithms_match_numpy(x64):
    rng = np.random.default_rng(12)
    s = _sym(rng, (2, 5, 5))
    v, w = (np.asarray(t) for t in fg.jit(linalg_loops.eigh_loop)(s))
    _check_eigh(s, v, w)
    for shape in [(5, 3), (3, 5), (2, 4, 4)]:
        a = rng.standard_normal(shape)
        for full in (True, False):
            q, r = (
                np.asarray(t)
                for t in fg.jit(lambda x, f=full: linalg_loops.qr_loop(x, full_matrices=f))(a)
            )
            _check_qr(a, q, r, full)
            out = fg.jit(lambda x, f=full: linalg_loops.svd_loop(x, full_matrices=f))(a)
            _check_svd(a, *(np.asarray(t) for t in out), full)


def test_gpu_lowers_the_loop_algorithms(gpu):
    rng = np.random.default_rng(13)
    s = _sym(rng, (2, 5, 5), np.float32)
    v, w = (np.asarray(t) for t in fg.jit(L.eigh, backend="gpu")(s))
    np.testing.assert_allclose(w, np.linalg.eigvalsh(s), atol=1e-4)
    np.testing.assert_allclose(s @ v, v * w[..., None, :], atol=1e-4)
    a = rng.standard_normal((5, 3)).astype(np.float32)
    for x in (a, a.T):
        q, r = (np.asarray(t) for t in fg.jit(L.qr, backend="gpu")(x))
        np.testing.assert_allclose(q @ r, x, atol=1e-5)
        np.testing.assert_allclose(r, np.linalg.qr(x, mode="complete")[1], atol=1e-5)
        u, sv, vt = (np.asarray(t) for t in fg.jit(L.svd, backend="gpu")(x))
        np.testing.assert_allclose(sv, np.linalg.svd(x, compute_uv=False), atol=1e-5)
        k = sv.shape[0]
        np.testing.assert_allclose((u[:, :k] * sv) @ vt[:k], x, atol=1e-5)
