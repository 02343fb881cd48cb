"""Complex matrices in the ``qr``, ``eigh``, ``svd`` and ``eig`` primitives and the functions built
on them (fungrad/lax/linalg_decomp_primitives.py, linalg_eig.py, numpy/linalg_decomp.py):
the defining identities (Q R = A, QᴴQ = I, A v = λ v, U S Vᴴ = A) and numpy's values for
complex64 and complex128, eager and under jit (the complex LAPACK routines on the CPU), vmap
against a loop, and derivatives (check_grads in both modes) of functions that do not depend on
the phase LAPACK picks for each vector."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.scipy.linalg as fsl
from fungrad.ir import passes
from fungrad.lax import linalg as L
from fungrad.lax.linalg_decomp_primitives import qr_p
from fungrad.lowering import complex_split, fusion
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.lowering.fusion import LoweringError
from fungrad.lowering.steps import EighStep, GeevStep, QRStep, SVDStep
from fungrad.testing import check_grads

_SHAPES = [(0, 0), (1, 1), (2, 2), (7, 7), (64, 64), (5, 3), (3, 5), (2, 3, 4, 4), (0, 3, 3)]
_CDTYPES = [np.complex64, np.complex128]


def _H(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _cplx(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _herm(shape, dtype, seed=0):
    a = _cplx(shape, dtype, seed)
    return ((a + _H(a)) / 2).astype(dtype)


def _tol(a):
    eps = 2e-6 if a.dtype == np.complex64 else 1e-13
    return eps * max(a.shape[-2:] + (1,)) * max(1.0, np.abs(a).max(initial=0))


def _eye(k, dtype):
    return np.eye(k, dtype=dtype)


def _funcs(jit):
    return (lambda f: fg.jit(f)) if jit else (lambda f: f)


# -- values --------------------------------------------------------------------------------------


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("dtype", _CDTYPES)
@pytest.mark.parametrize("shape", _SHAPES)
def test_qr(shape, dtype, jit, x64):
    a = _cplx(shape, dtype, sum(shape))
    wrap, tol = _funcs(jit), _tol(a)
    m, n = shape[-2:]
    for full in (False, True):
        q, r = (np.asarray(t) for t in wrap(functools.partial(L.qr, full_matrices=full))(a))
        k = m if full else min(m, n)
        assert q.dtype == r.dtype == dtype
        assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
        np.testing.assert_allclose(q @ r, a, atol=tol)
        np.testing.assert_allclose(
            _H(q) @ q, np.broadcast_to(_eye(k, dtype), q.shape[:-2] + (k, k)), atol=tol
        )
        np.testing.assert_array_equal(np.tril(r, -1), 0)
        if a.size:  # LAPACK's Householder signs: numpy's (the same routines)
            want = np.linalg.qr(a, mode="complete" if full else "reduced")
            np.testing.assert_allclose(r, want[1], atol=tol * 10)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("dtype", _CDTYPES)
@pytest.mark.parametrize("shape", [s for s in _SHAPES if s[-1] == s[-2]])
def test_eigh(shape, dtype, jit, x64):
    a = _herm(shape, dtype, sum(shape))
    wrap, tol = _funcs(jit), _tol(a)
    rdt = np.float32 if dtype == np.complex64 else np.float64
    for lower in (True, False):
        # only the lower (upper) triangle is read: garbage in the other one is ignored
        junk = np.triu(_cplx(shape, dtype, 9), 1)
        x = a + (junk if lower else _H(junk))
        v, w = (
            np.asarray(t)
            for t in wrap(functools.partial(L.eigh, lower=lower, symmetrize_input=False))(x)
        )
        assert v.dtype == dtype and w.dtype == rdt
        np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=tol)
        np.testing.assert_allclose(a @ v, v * w[..., None, :].astype(dtype), atol=tol * 4)
        n = shape[-1]
        np.testing.assert_allclose(_H(v) @ v, np.broadcast_to(_eye(n, dtype), v.shape), atol=tol)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("dtype", _CDTYPES)
@pytest.mark.parametrize("shape", _SHAPES)
def test_svd(shape, dtype, jit, x64):
    a = _cplx(shape, dtype, sum(shape) + 1)
    wrap, tol = _funcs(jit), _tol(a)
    rdt = np.float32 if dtype == np.complex64 else np.float64
    m, n = shape[-2:]
    k = min(m, n)
    s_only = np.asarray(wrap(lambda x: L.svd(x, compute_uv=False))(a))
    assert s_only.dtype == rdt
    np.testing.assert_allclose(s_only, np.linalg.svd(a, compute_uv=False), atol=tol)
    for full in (False, True):
        u, s, vh = (np.asarray(t) for t in wrap(functools.partial(L.svd, full_matrices=full))(a))
        assert u.dtype == vh.dtype == dtype and s.dtype == rdt
        np.testing.assert_allclose(s, s_only, atol=tol)
        np.testing.assert_allclose(
            (u[..., :k] * s[..., None, :].astype(dtype)) @ vh[..., :k, :], a, atol=tol
        )
        for x in (u, _H(vh)):
            c = x.shape[-1]
            np.testing.assert_allclose(
                _H(x) @ x, np.broadcast_to(_eye(c, dtype), x.shape[:-2] + (c, c)), atol=tol
            )


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("dtype", _CDTYPES)
@pytest.mark.parametrize("shape", [s for s in _SHAPES if s[-1] == s[-2]])
def test_eig(shape, dtype, jit, x64):
    a = _cplx(shape, dtype, sum(shape) + 2)
    wrap, tol = _funcs(jit), _tol(a)
    w, vl, vr = (np.asarray(t) for t in wrap(L.eig)(a))
    assert w.dtype == vl.dtype == vr.dtype == dtype
    want = np.linalg.eigvals(a.astype(np.complex128))
    np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(want), atol=tol * 10)
    np.testing.assert_allclose(a @ vr, vr * w[..., None, :], atol=tol * 10)
    np.testing.assert_allclose(_H(vl) @ a, w[..., :, None] * _H(vl), atol=tol * 10)
    if a.size:  # norm 1, largest component real (LAPACK's convention)
        for v in (vl, vr):
            np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, atol=tol)
            big = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], -2)
            np.testing.assert_allclose(big.imag, 0, atol=tol)
    w2 = np.asarray(wrap(fnp.linalg.eigvals)(a))
    np.testing.assert_allclose(np.sort_complex(w2), np.sort_complex(want), atol=tol * 10)


def test_nan_input():
    """A matrix LAPACK cannot decompose gives NaN results for that matrix only, as JAX."""
    a = np.stack([np.full((3, 3), np.nan, np.complex64), np.eye(3, dtype=np.complex64)])
    for f in (lambda x: L.eigh(x, symmetrize_input=False), L.svd, L.eig):
        for g in (f, fg.jit(f)):
            outs = [np.asarray(t) for t in g(a)]
            for o in outs:
                assert np.isnan(o[0]).all() and not np.isnan(o[1]).any()


@settings(max_examples=25, deadline=None)
@given(
    hnp.arrays(
        np.complex64,
        st.tuples(st.integers(1, 5), st.integers(1, 5)),
        elements=st.complex_numbers(
            max_magnitude=100, allow_nan=False, allow_infinity=False, width=64
        ),
    )
)
def test_identities_for_any_values(a):
    """Q R = A, U S Vᴴ = A and the Hermitian eigen-equation for arbitrary complex64 values
    (zeros, repeated and tiny entries included)."""
    tol = 2e-5 * max(a.shape) * max(1.0, float(np.abs(a).max()))
    q, r = (np.asarray(t) for t in L.qr(a, full_matrices=False))
    np.testing.assert_allclose(q @ r, a, atol=tol)
    u, s, vh = (np.asarray(t) for t in L.svd(a, full_matrices=False))
    np.testing.assert_allclose((u * s.astype(a.dtype)) @ vh, a, atol=tol)
    np.testing.assert_allclose(
        s, np.linalg.svd(a.astype(np.complex128), compute_uv=False), atol=tol
    )
    h = a[: min(a.shape), : min(a.shape)]
    h = (h + _H(h)) / 2
    v, w = (np.asarray(t) for t in L.eigh(h))
    np.testing.assert_allclose(h @ v, v * w.astype(a.dtype), atol=tol * 4)


def test_jit_of_gradients_matches_eager():
    a = _cplx((4, 3), np.complex64, 30)
    h = _herm((3, 3), np.complex64, 31)

    def f(x):
        return fnp.sum(fnp.linalg.svd(x, compute_uv=False)) + fnp.sum(
            fnp.abs(fnp.linalg.qr(x)[1]) ** 2
        )

    def g(x):
        return fnp.sum(fnp.linalg.eigvalsh(x) * fnp.arange(3.0)) + fnp.sum(
            fnp.abs(fnp.linalg.eigvals(x))
        )

    for fn, x in ((f, a), (g, h)):
        np.testing.assert_allclose(fg.jit(fg.grad(fn))(x), fg.grad(fn)(x), atol=1e-5)


# -- vmap ----------------------------------------------------------------------------------------


def test_vmap_matches_loop():
    a = _cplx((3, 2, 4, 4), np.complex64, 5)
    h = (a + _H(a)) / 2
    cases = [
        (lambda x: L.qr(x, full_matrices=False), a),
        (lambda x: L.svd(x, compute_uv=False), a),
        (lambda x: L.eigh(x)[1], h),
        (lambda x: L.eig(x, compute_left_eigenvectors=False, compute_right_eigenvectors=False), a),
    ]
    for f, x in cases:
        for axis in (0, 1):
            got = fg.vmap(f, in_axes=axis)(x)
            want = [f(np.take(x, i, axis)) for i in range(x.shape[axis])]
            got_l, want_l = (
                fg.tree_util.tree_leaves(got),
                [fg.tree_util.tree_leaves(w) for w in want],
            )
            for j, g in enumerate(got_l):
                np.testing.assert_allclose(
                    np.asarray(g), np.stack([np.asarray(w[j]) for w in want_l]), atol=1e-5
                )


# -- derivatives ---------------------------------------------------------------------------------


def _proj(v):
    """``v vᴴ``: independent of the phase of each column of ``v``."""
    return v @ fnp.conj(fnp.swapaxes(v, -1, -2))


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_qr_gradients(shape, x64):
    a = _cplx(shape, np.complex128, 11)
    check_grads(lambda x: L.qr(x, full_matrices=False), (a,), 1)  # QR's phases are fixed
    if shape[0] > shape[1]:
        check_grads(lambda x: L.qr(x, full_matrices=True), (a,), 1)


def test_eigh_gradients(x64):
    a = _cplx((4, 4), np.complex128, 12)
    weights = np.arange(16.0).reshape(4, 4)

    def f(x):
        v, w = L.eigh(x)
        return w, fnp.abs(v) ** 2 * weights, _proj(v[:, :2])

    check_grads(f, (a,), 1)

    def g(x):  # the triangle read: the strict upper one has no effect
        v, w = L.eigh(x, lower=False, symmetrize_input=False)
        return w, _proj(v[:, 1:2])

    check_grads(g, (a,), 1)
    check_grads(lambda x: fnp.linalg.eigvalsh(x), (a.astype(np.complex64),), 1)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_svd_gradients(shape, x64):
    a = _cplx(shape, np.complex128, 13)

    def f(x):
        u, s, vh = L.svd(x, full_matrices=False)
        return s, (u * s.astype(x.dtype)) @ vh, _proj(u[:, :1]), _proj(fnp.conj(vh[:1, :].T))

    check_grads(f, (a,), 1)
    check_grads(lambda x: L.svd(x, compute_uv=False), (a.astype(np.complex64),), 1)


def test_eig_and_wrapper_gradients(x64):
    a = _cplx((3, 3), np.complex128, 14)
    check_grads(fnp.linalg.eigvals, (a,), 1)
    b = _cplx((4, 3), np.complex128, 15)
    check_grads(fnp.linalg.pinv, (b,), 1)
    h = _herm((3, 3), np.complex128, 16)
    check_grads(lambda x: fnp.linalg.pinv(x, hermitian=True), (h,), 1)
    check_grads(lambda x: fnp.linalg.norm(x, 2), (b,), 1)
    check_grads(lambda x: fnp.linalg.norm(x, "nuc"), (b,), 1)
    check_grads(lambda x: fnp.linalg.lstsq(x, b[:, 0])[0], (b,), 1)


# -- the functions built on them -----------------------------------------------------------------


def test_numpy_and_scipy_wrappers(x64):
    a = _cplx((5, 3), np.complex128, 20)
    h = _herm((4, 4), np.complex128, 21)
    np.testing.assert_allclose(fnp.linalg.pinv(a), np.linalg.pinv(a), atol=1e-12)
    np.testing.assert_allclose(fnp.linalg.pinv(h, hermitian=True), np.linalg.pinv(h), atol=1e-12)
    b = _cplx((5, 2), np.complex128, 22)
    x, resid, rank, sv = fnp.linalg.lstsq(a, b)
    wx, wres, wrank, wsv = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(x, wx, atol=1e-12)
    np.testing.assert_allclose(resid, wres, atol=1e-12)
    assert np.asarray(resid).dtype == np.float64 and int(rank) == wrank
    np.testing.assert_allclose(sv, wsv, atol=1e-12)
    low = a[:, :2] @ _cplx((2, 3), np.complex128, 24)
    assert int(fnp.linalg.matrix_rank(low)) == 2 == np.linalg.matrix_rank(low)
    assert int(fnp.linalg.matrix_rank(h, hermitian=True)) == 4
    for p in (None, 2, -2):
        np.testing.assert_allclose(fnp.linalg.cond(a, p), np.linalg.cond(a, p), rtol=1e-12)
    for o in (2, -2, "nuc"):
        np.testing.assert_allclose(fnp.linalg.norm(a, o), np.linalg.norm(a, o), rtol=1e-12)
    np.testing.assert_allclose(
        fnp.linalg.svdvals(a), np.linalg.svd(a, compute_uv=False), atol=1e-12
    )
    u, s, vh = fnp.linalg.svd(h, hermitian=True)
    np.testing.assert_allclose((np.asarray(u) * np.asarray(s)) @ np.asarray(vh), h, atol=1e-12)
    np.testing.assert_allclose(s, np.linalg.svd(h, compute_uv=False), atol=1e-12)
    w, v = fnp.linalg.eig(h + 0.5j * np.eye(4))
    np.testing.assert_allclose(np.asarray(h + 0.5j * np.eye(4)) @ v, np.asarray(v) * w, atol=1e-12)
    # scipy.linalg: the same decompositions, scipy's conventions
    w, v = fsl.eigh(h)
    np.testing.assert_allclose(w, scipy.linalg.eigh(h)[0], atol=1e-12)
    np.testing.assert_allclose(h @ np.asarray(v), np.asarray(v) * np.asarray(w), atol=1e-12)
    q, r = fsl.qr(a)
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a, atol=1e-12)
    np.testing.assert_allclose(r, scipy.linalg.qr(a)[1], atol=1e-12)
    u, s, vh = fsl.svd(a, full_matrices=False)
    np.testing.assert_allclose((np.asarray(u) * np.asarray(s)) @ np.asarray(vh), a, atol=1e-12)
    np.testing.assert_allclose(fsl.svd(a, compute_uv=False), scipy.linalg.svdvals(a), atol=1e-12)


def test_errors():
    with pytest.raises(TypeError, match="qr.*int32"):
        qr_p.bind(np.eye(2, dtype=np.int32), full_matrices=True)
    with pytest.raises(ValueError, match=r"eigh.*square"):
        fnp.linalg.eigh(np.ones((2, 3), np.complex64))


# -- the compiled program ------------------------------------------------------------------------


def test_cpu_program_is_one_library_step_each_and_the_gpu_refuses():
    def f(x):
        return L.qr(x), L.eigh(x), L.svd(x), L.eig(x)

    def split(n):
        return complex_split.split_program(fg.make_jaxpr(f)(_cplx((n, n), np.complex64)))

    assert len(split(2).jaxpr.eqns) == len(split(40).jaxpr.eqns)
    if CpuPolicy().linalg_steps:
        prog = fusion.plan(passes.optimize(split(64)), policy=CpuPolicy())
        for kind in (QRStep, EighStep, SVDStep, GeevStep):
            found = [s for s in prog.steps if isinstance(s, kind)]
            assert len(found) == 1 and found[0].complex
    a = _cplx((3, 3), np.complex64)
    for name, g in [("qr", L.qr), ("eigh", L.eigh), ("svd", L.svd), ("eig", L.eig)]:
        with pytest.raises(LoweringError, match=f"{name} of a complex.*backend='cpu'"):
            fg.jit(g, backend="gpu")(a)


@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (5, 3), (3, 5), (2, 4, 4)])
def test_qr_raw(shape, x64):
    """``qr(mode='raw')`` and ``lax.linalg.geqrf`` of complex matrices: numpy's values (the
    same LAPACK routine, cgeqrf/zgeqrf), eager and under jit."""
    for dtype in _CDTYPES:
        a = _cplx(shape, dtype, 40)
        if a.size:
            want_h, want_tau = np.linalg.qr(a, mode="raw")
        else:
            want_h, want_tau = np.swapaxes(a, -1, -2), np.zeros(shape[:-2] + (0,), dtype)
        for f in (fnp.linalg.qr, fg.jit(fnp.linalg.qr, static_argnums=1)):
            h, tau = (np.asarray(t) for t in f(a, "raw"))
            assert h.dtype == tau.dtype == dtype
            np.testing.assert_allclose(h, want_h, atol=_tol(a) * 10)
            np.testing.assert_allclose(tau, want_tau, atol=_tol(a) * 10)
        packed, taus = (np.asarray(t) for t in fg.jit(L.geqrf)(a))
        np.testing.assert_allclose(packed, np.swapaxes(want_h, -1, -2), atol=_tol(a) * 10)
    with pytest.raises(LoweringError, match="geqrf of a complex.*backend='cpu'"):
        fg.jit(L.geqrf, backend="gpu")(_cplx((3, 3), np.complex64))
