"""fungrad.scipy.linalg.polar, expm_frechet and eigh_tridiagonal against SciPy (the test-only
oracle): values for hypothesis-drawn sizes in float32 and float64 (x64), real and complex;
properties (u unitary, p Hermitian positive semidefinite, u p == a); the Frechet derivative
against finite differences of expm; jit against eager, vmap against a loop; JAX's errors."""

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
from fungrad.scipy import linalg as fla
from fungrad.testing import check_grads

DTYPES = ("float32", "float64", "complex64", "complex128")
# float32/complex64 results are compared with a float64 oracle
TOL = {"float32": 2e-4, "complex64": 2e-4, "float64": 1e-10, "complex128": 1e-10}


def _sample(rng, shape, dtype):
    x = rng.randn(*shape)
    if dtype.startswith("complex"):
        x = x + 1j * rng.randn(*shape)
    return x.astype(dtype)


def _h(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _check_polar(a, u, p, side, dtype):
    """u has a's shape with orthonormal columns (rows when wide), p is Hermitian PSD and the
    product gives back a."""
    tol = TOL[dtype]
    m, n = a.shape[-2:]
    u, p = np.asarray(u), np.asarray(p)
    assert u.dtype == dtype and p.dtype == dtype and u.shape == a.shape
    assert p.shape == a.shape[:-2] + ((n, n) if side == "right" else (m, m))
    k = min(m, n)
    gram = _h(u) @ u if m >= n else u @ _h(u)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(k), gram.shape), atol=10 * tol)
    np.testing.assert_allclose(p, _h(p), atol=10 * tol)
    scale = max(1.0, np.abs(a).max())
    assert np.linalg.eigvalsh(p.astype(np.complex128)).min() >= -10 * tol * scale
    back = u @ p if side == "right" else p @ u
    np.testing.assert_allclose(back, a, atol=10 * tol * scale)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 8),
    n=st.integers(1, 8),
    side=st.sampled_from(["right", "left"]),
    method=st.sampled_from(["qdwh", "svd"]),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 999),
)
def test_polar_matches_scipy(m, n, side, method, dtype, seed):
    if method == "qdwh":  # JAX's qdwh supports these shapes only (errors tested below)
        m, n = (max(m, n), min(m, n)) if side == "right" else (min(m, n), max(m, n) + 1)
    a = _sample(np.random.RandomState(seed), (m, n), dtype)
    with fg.enable_x64():
        u, p = fla.polar(a, side, method=method)
        _check_polar(a, u, p, side, dtype)
        # u is unique where a has full rank (random a does, well conditioned enough here)
        us, ps = sla.polar(a.astype(np.complex128 if "complex" in dtype else np.float64), side)
        tol = TOL[dtype]
        np.testing.assert_allclose(np.asarray(u), us, atol=100 * tol, rtol=100 * tol)
        np.testing.assert_allclose(np.asarray(p), ps, atol=100 * tol, rtol=100 * tol)


def test_polar_float32_default_and_int_error():
    a = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    u, p = fla.polar(a)
    _check_polar(a, u, p, "right", "float32")
    # float64 input without x64 computes in float32, as JAX
    assert fla.polar(a.astype(np.float64))[0].dtype == np.float32
    with pytest.raises(ValueError, match="not inexact"):
        fla.polar(np.eye(3, dtype=np.int32))


@pytest.mark.parametrize("method", ["qdwh", "svd"])
def test_polar_ill_conditioned_and_singular(method):
    rng = np.random.RandomState(1)
    q = sla.qr(rng.randn(4, 4))[0]
    a = (q * np.array([1.0, 1e-3, 1e-6, 1e-9])) @ sla.qr(rng.randn(4, 4))[0]
    with fg.enable_x64():
        u, p = fla.polar(a, method=method)
        _check_polar(a, u, p, "right", "float64")
        np.testing.assert_allclose(np.asarray(u), sla.polar(a)[0], atol=1e-6)
    # a zero matrix: p is zero (u is not unique; JAX's qdwh gives 0, its svd the identity)
    u, p = fla.polar(np.zeros((3, 3), np.float32), method=method)
    np.testing.assert_array_equal(np.asarray(p), 0)


def test_polar_batched_jit_vmap():
    rng = np.random.RandomState(2)
    a = rng.randn(3, 5, 4).astype(np.float32)
    for method, side, x in (("qdwh", "right", a), ("qdwh", "left", _h(a)), ("svd", "left", a)):
        loop = [fla.polar(xi, side, method=method) for xi in x]
        fn = lambda y, side=side, method=method: fla.polar(y, side, method=method)  # noqa: E731
        for got in (fla.polar(x, side, method=method), fg.jit(fn)(x), fg.vmap(fn)(x)):
            for g, w in zip(got, zip(*loop)):
                np.testing.assert_allclose(np.asarray(g), np.stack(w), atol=2e-5)


def test_polar_errors():
    a = np.ones((3, 5), np.float32)
    with pytest.raises(ValueError, match="at least a 2-D"):
        fla.polar(np.ones(3))
    with pytest.raises(ValueError, match="'right' or 'left'"):
        fla.polar(np.eye(3), side="up")
    with pytest.raises(ValueError, match="unknown polar decomposition method"):
        fla.polar(np.eye(3), method="newton")
    for x, side in ((a, "right"), (a.T, "left"), (np.eye(3), "left")):
        with pytest.raises(NotImplementedError, match="qdwh"):
            fla.polar(x, side)
        fla.polar(x, side, method="svd")  # the SVD handles every shape


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 8), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_expm_frechet_matches_scipy(n, dtype, seed):
    rng = np.random.RandomState(seed)
    a, e = _sample(rng, (n, n), dtype), _sample(rng, (n, n), dtype)
    with fg.enable_x64():
        expm_a, frechet = fla.expm_frechet(a, e)
        want_expm, want = sla.expm_frechet(a.astype(np.complex128), e.astype(np.complex128))
        only = fla.expm_frechet(a, e, compute_expm=False)
    tol = TOL[dtype]
    assert expm_a.dtype == dtype and frechet.dtype == dtype and only.dtype == dtype
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(np.asarray(expm_a), want_expm, rtol=10 * tol, atol=10 * tol)
    np.testing.assert_allclose(np.asarray(frechet), want, atol=10 * tol * scale)
    np.testing.assert_allclose(np.asarray(only), np.asarray(frechet), rtol=1e-6)


def test_expm_frechet_finite_differences():
    rng = np.random.RandomState(3)
    for dtype in ("float64", "complex128"):
        a, e = _sample(rng, (4, 4), dtype), _sample(rng, (4, 4), dtype)
        with fg.enable_x64():
            got = np.asarray(fla.expm_frechet(a, e, compute_expm=False))
            h = 1e-6
            fd = (np.asarray(fla.expm(a + h * e)) - np.asarray(fla.expm(a - h * e))) / (2 * h)
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6)


def test_expm_frechet_batched_jit_vmap():
    rng = np.random.RandomState(4)
    a, e = rng.randn(3, 4, 4).astype(np.float32), rng.randn(3, 4, 4).astype(np.float32)
    loop = [fla.expm_frechet(ai, ei) for ai, ei in zip(a, e)]
    want = [np.stack([np.asarray(x[i]) for x in loop]) for i in range(2)]
    for got in (
        fla.expm_frechet(a, e),
        fg.jit(fla.expm_frechet)(a, e),
        fg.vmap(fla.expm_frechet)(a, e),
    ):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)
    # method is ignored, as in JAX
    np.testing.assert_array_equal(
        np.asarray(fla.expm_frechet(a, e, method="blockEnlarge")[1]), want[1]
    )


def test_expm_frechet_errors():
    with pytest.raises(ValueError, match="same shape"):
        fla.expm_frechet(np.eye(3), np.eye(2))
    with pytest.raises(ValueError, match="same shape"):
        fla.expm_frechet(np.ones((2, 3, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="square"):
        fla.expm_frechet(np.ones((3, 4)), np.ones((3, 4)))
    with pytest.raises(ValueError, match="square"):
        fla.expm_frechet(np.ones(3), np.ones(3))
    with pytest.raises(TypeError):
        fla.expm_frechet(np.eye(3, dtype=np.int32), np.eye(3, dtype=np.int32))
    with pytest.raises(TypeError):
        fla.expm_frechet(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.complex64))


def _tridiagonal(d, e):
    return np.diag(d.real) + np.diag(e, 1) + np.diag(np.conj(e), -1)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 8),
    dtype=st.sampled_from(DTYPES),
    select=st.sampled_from(["a", "i"]),
    data=st.data(),
    seed=st.integers(0, 999),
)
def test_eigh_tridiagonal_matches_scipy(n, dtype, select, data, seed):
    rng = np.random.RandomState(seed)
    d, e = _sample(rng, (n,), dtype), _sample(rng, (n - 1,), dtype)
    lo = data.draw(st.integers(0, n - 1))
    rng_ = (lo, data.draw(st.integers(lo, n - 1))) if select == "i" else None
    t = _tridiagonal(d.astype(np.complex128), e.astype(np.complex128))
    want = sla.eigh(t, eigvals_only=True)
    if "complex" not in dtype:  # SciPy's eigh_tridiagonal is real only
        want2 = sla.eigh_tridiagonal(d.astype(np.float64), e.astype(np.float64), True)
        np.testing.assert_allclose(want, want2, atol=1e-12)
    if select == "i":
        want = want[rng_[0] : rng_[1] + 1]
    real = np.finfo(dtype).dtype
    tol = TOL[dtype] * max(1.0, np.abs(want).max())
    with fg.enable_x64():
        w = fla.eigh_tridiagonal(d, e, eigvals_only=True, select=select, select_range=rng_)
        w2, v = fla.eigh_tridiagonal(d, e, select=select, select_range=rng_)
    assert w.dtype == real and w2.dtype == real and v.dtype == dtype
    assert v.shape == (n, len(want))
    np.testing.assert_allclose(np.asarray(w), want, atol=10 * tol)
    np.testing.assert_allclose(np.asarray(w2), want, atol=10 * tol)
    v = np.asarray(v)
    np.testing.assert_allclose(_h(v) @ v, np.eye(len(want)), atol=10 * TOL[dtype])
    np.testing.assert_allclose(t @ v, v * want, atol=10 * tol)


def test_eigh_tridiagonal_float32_jit_vmap_and_edges():
    d = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    e = np.ones(3, np.float32)
    w = fla.eigh_tridiagonal(d, e, eigvals_only=True)
    assert w.dtype == np.float32
    np.testing.assert_allclose(np.asarray(w), [0.2547188, 1.8227171, 3.1772828, 4.745281], 1e-5)
    fn = lambda d, e: fla.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(1, 2))  # noqa: E731
    np.testing.assert_allclose(np.asarray(fg.jit(fn)(d, e)), np.asarray(w[1:3]), rtol=1e-6)
    ds, es = np.stack([d, -d, 2 * d]), np.stack([e, 2 * e, -e])
    np.testing.assert_allclose(
        np.asarray(fg.vmap(fn)(ds, es)), np.stack([np.asarray(fn(*x)) for x in zip(ds, es)]), 1e-5
    )
    # tol is accepted (the result is exact to rounding anyway); n = 1 and n = 0
    np.testing.assert_allclose(
        np.asarray(fla.eigh_tridiagonal(d, e, eigvals_only=True, tol=0.1)), w, 1e-6
    )
    w1, v1 = fla.eigh_tridiagonal(np.array([2.0 + 1j], np.complex64), np.zeros(0, np.complex64))
    assert w1.dtype == np.float32 and v1.dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(w1), [2.0])
    np.testing.assert_array_equal(np.asarray(v1), [[1.0]])
    w0, v0 = fla.eigh_tridiagonal(np.zeros(0, np.float32), np.zeros(0, np.float32))
    assert w0.shape == (0,) and v0.shape == (0, 0)


def test_eigh_tridiagonal_errors():
    d, e = np.ones(4, np.float32), np.ones(3, np.float32)
    with pytest.raises(NotImplementedError, match="select='v'"):
        fla.eigh_tridiagonal(d, e, eigvals_only=True, select="v", select_range=(0.0, 1.0))
    with pytest.raises(ValueError, match="select must"):
        fla.eigh_tridiagonal(d, e, select="x")
    with pytest.raises(ValueError, match="select_range must be specified"):
        fla.eigh_tridiagonal(d, e, select="i")
    with pytest.raises(ValueError, match="empty index range"):
        fla.eigh_tridiagonal(d, e, select="i", select_range=(2, 1))
    with pytest.raises(ValueError, match="outside"):  # JAX returns garbage here
        fla.eigh_tridiagonal(d, e, select="i", select_range=(1, 4))
    with pytest.raises(TypeError, match="same dtype"):
        with fg.enable_x64():
            fla.eigh_tridiagonal(d.astype(np.float64), e)
    with pytest.raises(TypeError, match="supported"):
        fla.eigh_tridiagonal(d.astype(np.int32), e.astype(np.int32))
    with pytest.raises(TypeError, match="shape"):
        fla.eigh_tridiagonal(d, e[:2])
    with pytest.raises(TypeError, match="shape"):
        fla.eigh_tridiagonal(np.ones((2, 4)), np.ones((2, 3)))


def test_polar_derivatives():
    """Forward mode through QDWH agrees with the SVD method's; reverse mode needs the SVD
    method (QDWH's convergence loop has a dynamic trip count, as in JAX)."""
    rng = np.random.RandomState(5)
    a, t = rng.randn(4, 3), rng.randn(4, 3)
    with fg.enable_x64():
        jq = fg.jvp(lambda x: fla.polar(x)[0], (a,), (t,))[1]
        js = fg.jvp(lambda x: fla.polar(x, method="svd")[0], (a,), (t,))[1]
        np.testing.assert_allclose(np.asarray(jq), np.asarray(js), atol=1e-8)
        check_grads(lambda x: fla.polar(x, method="svd")[0], (a,), order=1, modes=["rev"])
        check_grads(
            lambda d: fla.eigh_tridiagonal(d, np.ones(2), eigvals_only=True),
            (np.array([1.0, 2.5, 4.0]),),
            order=1,
        )
