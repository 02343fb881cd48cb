"""The Schur decomposition and Hessenberg reduction (lax.linalg.schur / hessenberg, LAPACK gees /
gehrd) and scipy.linalg's functions built on them (schur, rsf2csf, hessenberg, sqrtm, funm,
solve_sylvester).

Oracles: the definitions (``Z T Zᴴ == A`` with ``Z`` unitary and ``T`` (quasi-)triangular,
``Q H Qᴴ == A``, ``sqrtm(A)² == A``, the Sylvester residual), scipy.linalg (eigenvalues,
expm, sqrtm, solve_sylvester) and, where the result is not unique, JAX 0.10.2's answers
recorded as literals. Tolerances scale with the dtype's eps, the size and the matrix norm.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.scipy.linalg as fsl
from fungrad import lax
from fungrad.lowering.fusion import LoweringError
from fungrad.transforms.jvp import NotDifferentiableError

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
_SETTINGS = settings(max_examples=12, deadline=None)


def _rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _eps(dtype) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def _close(got, want, dtype, scale=1.0, n=1, k=50):
    """``got`` within ``k * n * eps * max(1, scale)`` of ``want`` (entrywise, absolute)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    atol = k * max(n, 1) * _eps(dtype) * max(1.0, float(scale))
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)


def _adj(x):
    return np.conj(np.swapaxes(np.asarray(x), -1, -2))


def _norm(a) -> float:
    return float(np.abs(np.asarray(a)).max(initial=0.0)) * max(1, np.shape(a)[-1])


def _check_schur(a, t, z, dtype):
    a, t, z = np.asarray(a), np.asarray(t), np.asarray(z)
    n = a.shape[-1]
    assert t.dtype == z.dtype == np.dtype(dtype)
    _close(z @ t @ _adj(z), a, dtype, _norm(a), n)
    _close(_adj(z) @ z, np.broadcast_to(np.eye(n), z.shape), dtype, 1, n)
    # strictly below the subdiagonal: zero; the subdiagonal only for real 2 x 2 blocks
    assert not np.tril(t, -2).any()
    sub = np.diagonal(t, -1, -2, -1)
    if np.dtype(dtype).kind == "c":
        assert not sub.any()
    else:
        assert not ((sub[..., 1:] != 0) & (sub[..., :-1] != 0)).any()  # 2 x 2 blocks only
    for idx in np.ndindex(a.shape[:-2]):
        if n == 0:
            continue
        # T's eigenvalues (its diagonal, 2 x 2 blocks solved) are A's: each near one of scipy's
        want = sl.eigvals(a[idx].astype(np.complex128))
        got = sl.eigvals(t[idx].astype(np.complex128))
        gap = np.abs(got[:, None] - want[None, :]).min(axis=1)
        assert gap.max() <= np.sqrt(_eps(dtype)) * max(1.0, _norm(a[idx])), (got, want)


class _x64:
    """enable_x64 inside a hypothesis test (function-scoped fixtures do not reset per example)."""

    def __enter__(self):
        self.old = fg.config.enable_x64
        fg.config.update("enable_x64", True)

    def __exit__(self, *exc):
        fg.config.update("enable_x64", self.old)


sizes = st.integers(0, 6)
batches = st.sampled_from([(), (2,), (2, 1)])
dtypes_st = st.sampled_from(DTYPES)


# -- lax.linalg.schur -----------------------------------------------------------------------------


@_SETTINGS
@given(n=sizes, batch=batches, dtype=dtypes_st, seed=st.integers(0, 2**16))
def test_schur_is_a_schur_decomposition(n, batch, dtype, seed):
    a = _rand(np.random.default_rng(seed), batch + (n, n), dtype)
    with _x64():
        t, z = lax.linalg.schur(a)
        _check_schur(a, t, z, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (2, 2), (5, 5), (3, 4, 4), (0, 3, 3)])
def test_schur_jit_matches_eager(dtype, shape, x64):
    a = _rand(np.random.default_rng(1), shape, dtype)
    want = lax.linalg.schur(a)
    got = fg.jit(lax.linalg.schur)(a)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == np.dtype(dtype)
        _close(g, w, dtype, _norm(a), shape[-1], k=10)
    (t,) = fg.jit(lambda x: lax.linalg.schur(x, compute_schur_vectors=False))(a)
    _close(t, want[0], dtype, _norm(a), shape[-1], k=10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_schur_vmap_matches_loop(dtype, x64):
    a = _rand(np.random.default_rng(2), (3, 4, 4), dtype)
    t, z = fg.vmap(lax.linalg.schur)(a)
    tj, zj = fg.jit(fg.vmap(lax.linalg.schur, in_axes=2, out_axes=0))(np.moveaxis(a, 0, 2))
    for i in range(3):
        ti, zi = lax.linalg.schur(a[i])
        _close(t[i], ti, dtype, _norm(a), 4, k=10)
        _close(z[i], zi, dtype, _norm(a), 4, k=10)
        _close(tj[i], ti, dtype, _norm(a), 4, k=10)
        _close(zj[i], zi, dtype, _norm(a), 4, k=10)


# JAX 0.10.2 (x64): jax.lax.linalg.schur of _A and of _AC (LAPACK's choice among Schur forms)
_A = np.array([[0.0, 3.0, 3.0], [0.0, 1.0, 2.0], [2.0, 0.0, 1.0]])
_AC = _A + 1j * np.array([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0], [0.0, -1.0, 1.0]])
_JAX_SCHUR_T = [
    [3.756321357587, -1.382624939409, 2.168157699245],
    [0.0, -0.878160678793, 2.36929864087],
    [0.0, -0.348685992664, -0.878160678793],
]
_JAX_SCHUR_Z = [
    [-0.744589662849, -0.366673645324, 0.557796263705],
    [-0.39202818634, -0.436128529763, -0.810003584339],
    [-0.540277831392, 0.821792153377, -0.18099039078],
]
_JAX_SCHUR_CT = [
    [3.996539695362 + 1.074022412073j, -0.874688054882 - 0.369668830721j,
     -0.881678612251 - 2.338889128979j],
    [0j, -1.539156868635 - 0.544046951601j, -1.745018439511 - 0.839256795588j],
    [0j, 0j, -0.457382826727 + 2.470024539528j],
]  # fmt: skip
_JAX_SCHUR_CZ = [
    [-0.42974146743 + 0.495293278302j, -0.605213864941 - 0.372195801803j,
     -0.129750259995 - 0.219904916895j],
    [-0.498535472825 + 0.061357163078j, -0.028044894961 + 0.601463963035j,
     0.59423540649 - 0.178987562655j],
    [-0.253918291235 + 0.503219655708j, 0.357126118215 - 0.071428170418j,
     0.047027520898 + 0.739893805842j],
]  # fmt: skip


@pytest.mark.parametrize("jit", [False, True])
def test_schur_matches_jax(jit, x64):
    f = fg.jit(lax.linalg.schur) if jit else lax.linalg.schur
    for a, (t_want, z_want) in [
        (_A, (_JAX_SCHUR_T, _JAX_SCHUR_Z)),
        (_AC, (_JAX_SCHUR_CT, _JAX_SCHUR_CZ)),
    ]:
        t, z = f(a)
        np.testing.assert_allclose(np.asarray(t), t_want, atol=1e-10)
        np.testing.assert_allclose(np.asarray(z), z_want, atol=1e-10)


def test_schur_errors_and_params():
    a = np.eye(3, dtype=np.float32)
    with pytest.raises(TypeError, match="schur does not accept dtype int32"):
        lax.linalg.schur(np.eye(3, dtype=np.int32))
    with pytest.raises(ValueError, match=r"schur must be a square matrix.*\(2, 3\)"):
        lax.linalg.schur(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="rank at least 2"):
        lax.linalg.schur(np.ones(3, np.float32))
    with pytest.raises(TypeError):
        lax.linalg.schur(a, False)  # keyword-only, as in JAX
    with pytest.raises(NotImplementedError, match="sort feature"):
        lax.linalg.schur(a, sort_eig_vals=True)
    with pytest.raises(NotImplementedError, match="sort feature"):
        fg.jit(lambda x: lax.linalg.schur(x, sort_eig_vals=True))(a)
    t, z = lax.linalg.schur(a, select_callable=lambda w: w > 0)  # unused, as in JAX
    np.testing.assert_array_equal(np.asarray(t), np.eye(3))
    with pytest.raises(NotDifferentiableError, match="schur"):
        fg.grad(lambda x: lax.linalg.schur(x)[0].sum())(a)
    with pytest.raises(NotDifferentiableError, match="hessenberg"):
        fg.jvp(lambda x: lax.linalg.hessenberg(x)[0], (a,), (a,))
    jaxpr = str(fg.make_jaxpr(lax.linalg.schur)(a))
    assert "compute_schur_vectors=True" in jaxpr and "sort_eig_vals=False" in jaxpr


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_schur_and_hessenberg_need_the_cpu(dtype):
    a = np.eye(3, dtype=dtype)
    for f, name in [(lax.linalg.schur, "schur"), (lax.linalg.hessenberg, "hessenberg")]:
        with pytest.raises(LoweringError, match=f"{name}.*backend='cpu'"):
            fg.jit(f, backend="gpu")(a)


# -- hessenberg -----------------------------------------------------------------------------------


@_SETTINGS
@given(n=sizes, batch=batches, dtype=dtypes_st, seed=st.integers(0, 2**16))
def test_hessenberg_is_a_hessenberg_reduction(n, batch, dtype, seed):
    a = _rand(np.random.default_rng(seed), batch + (n, n), dtype)
    with _x64():
        h, q = fsl.hessenberg(a, calc_q=True)
        assert h.dtype == q.dtype == np.dtype(dtype) and h.shape == q.shape == a.shape
        h, q = np.asarray(h), np.asarray(q)
        assert not np.tril(h, -2).any()
        _close(q @ h @ _adj(q), a, dtype, _norm(a), n)
        _close(_adj(q) @ q, np.broadcast_to(np.eye(n), a.shape), dtype, 1, n)
        if n > 2 and not batch:  # scipy returns n <= 2 matrices unreduced
            _close(h, sl.hessenberg(a), dtype, _norm(a), n)
        packed, taus = lax.linalg.hessenberg(a)
        assert taus.shape == batch + (max(n - 1, 0),)
        np.testing.assert_array_equal(np.triu(np.asarray(packed), -1), h)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (2, 3, 3)])
def test_hessenberg_jit_and_vmap(dtype, shape, x64):
    a = _rand(np.random.default_rng(3), shape, dtype)
    want = lax.linalg.hessenberg(a)
    for got in (fg.jit(lax.linalg.hessenberg)(a), fg.vmap(lax.linalg.hessenberg)(a[None])):
        for g, w in zip(got, want):
            _close(np.asarray(g).reshape(np.shape(w)), w, dtype, _norm(a), shape[-1], k=10)
    h, q = fg.jit(lambda x: fsl.hessenberg(x, calc_q=True))(a)
    h0, q0 = fsl.hessenberg(a, calc_q=True)
    _close(h, h0, dtype, _norm(a), shape[-1], k=10)
    _close(q, q0, dtype, 1, shape[-1], k=10)


def test_hessenberg_matches_jax(x64):
    # JAX 0.10.2: jax.lax.linalg.hessenberg(_AC) (LAPACK's zgehrd)
    packed, taus = lax.linalg.hessenberg(_AC)
    want = [
        [1j, -2.12132034356 - 1.414213562373j, -3.478505426185 - 0.632455532034j],
        [-2.828427124746 + 0j, 1.5 + 0j, 0.67082039325 - 0.894427191j],
        [0.471404520791 - 0.333333333333j, 1.11803398875 + 0j, 0.5 + 2j],
    ]
    np.testing.assert_allclose(np.asarray(packed), want, atol=1e-10)
    want_taus = [1 + 0.707106781187j, 1.123494624356 + 0.992345241212j]
    np.testing.assert_allclose(np.asarray(taus), want_taus, atol=1e-10)
    with pytest.raises(TypeError):
        fsl.hessenberg(_A, True)  # calc_q is keyword-only, as in JAX
    with pytest.raises(TypeError, match="int32"):
        fsl.hessenberg(np.eye(2, dtype=np.int32))
    assert fsl.hessenberg(np.zeros((0, 0)), calc_q=True)[1].shape == (0, 0)


# -- schur (scipy), rsf2csf -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES + [np.int32])
def test_scipy_schur_outputs(dtype, x64):
    a = (_A * 2).astype(dtype)
    cdt = np.complex128 if dtype in (np.float64, np.complex128) else np.complex64
    t, z = fsl.schur(a, output="complex")
    assert t.dtype == z.dtype == cdt
    _check_schur(a.astype(cdt), t, z, cdt)
    if dtype == np.int32:
        with pytest.raises(TypeError, match="int32"):
            fsl.schur(a)
    else:
        t, z = fsl.schur(a)
        _check_schur(a, t, z, dtype)
    with pytest.raises(ValueError, match="'real' or 'complex'"):
        fsl.schur(a, output="x")


def test_rsf2csf(x64):
    t, z = fsl.rsf2csf(*fsl.schur(_A))
    want_t = [
        [3.756321357587 + 0j, -0.776577170568 - 1.290894618818j, -0.495219957375 - 2.024311168509j],
        [0j, -0.878160678793 + 0.908923125743j, -2.020612648206 + 0j],
        [0j, 0j, -0.878160678793 - 0.908923125743j],
    ]  # fmt: skip (JAX 0.10.2)
    np.testing.assert_allclose(np.asarray(t), want_t, atol=1e-10)
    _check_schur(_A.astype(np.complex128), t, z, np.complex128)
    # batches broadcast; float32 -> complex64; jit and vmap agree with the eager result
    a = _rand(np.random.default_rng(4), (3, 4, 4), np.float32)
    tr, zr = fsl.schur(a)
    tc, zc = fsl.rsf2csf(tr, zr)
    assert tc.dtype == np.complex64
    _check_schur(a.astype(np.complex64), tc, zc, np.complex64)
    tj, zj = fg.jit(fsl.rsf2csf)(tr, zr)
    _close(tj, tc, np.complex64, _norm(a), 4)
    tv, _ = fg.vmap(fsl.rsf2csf)(tr, zr)
    _close(tv, tc, np.complex64, _norm(a), 4)
    tb, _ = fsl.rsf2csf(tr, zr[0])
    assert tb.shape == (3, 4, 4)
    with pytest.raises(ValueError, match="shapes must match"):
        fsl.rsf2csf(np.ones((2, 2)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="'T' must be square"):
        fsl.rsf2csf(np.ones((2, 3)), np.ones((2, 3)))


# -- sqrtm, funm ----------------------------------------------------------------------------------


@_SETTINGS
@given(n=st.integers(0, 5), dtype=dtypes_st, seed=st.integers(0, 2**16))
def test_sqrtm_squares_back(n, dtype, seed):
    rng = np.random.default_rng(seed)
    a = (_rand(rng, (n, n), dtype) + 3 * n * np.eye(n)).astype(dtype)  # away from the cut
    with _x64():
        s = fsl.sqrtm(a)
        cdt = (
            np.complex64
            if np.dtype(dtype).itemsize == 4 or dtype == np.complex64
            else np.complex128
        )
        assert s.dtype == cdt and s.shape == (n, n)
        s = np.asarray(s)
        _close(s @ s, a, dtype, _norm(a), n, k=200)
        if n:
            _close(s, sl.sqrtm(a.astype(np.complex128)), dtype, _norm(s), n, k=200)


def test_sqrtm_matches_jax_and_its_errors(x64):
    want = [
        [0.152223442807, 2.015234083694, 0.998993238515],
        [-0.677493896786, 1.84020898255, 1.004742440736],
        [1.343489389129, -1.016240845179, 0.823968137372],
    ]  # JAX 0.10.2 (imaginary parts 0)
    for f in (fsl.sqrtm, fg.jit(fsl.sqrtm)):
        np.testing.assert_allclose(np.asarray(f(_A)), want, atol=1e-10)
    a = np.stack([_A, 2 * _A])
    v = fg.vmap(fsl.sqrtm)(a)
    np.testing.assert_allclose(np.asarray(v[1]), np.asarray(fsl.sqrtm(2 * _A)), atol=1e-12)
    assert fsl.sqrtm(np.array([[1, 2], [3, 4]])).dtype == np.complex128  # int64 under x64
    with pytest.raises(NotImplementedError, match="Blocked"):
        fsl.sqrtm(_A, blocksize=2)
    with pytest.raises(ValueError, match="vmap"):
        fsl.sqrtm(a)
    with pytest.raises(NotDifferentiableError, match="schur"):
        fg.grad(lambda x: fnp.real(fsl.sqrtm(x)).sum())(_A)


@_SETTINGS
@given(n=st.integers(1, 5), dtype=dtypes_st, seed=st.integers(0, 2**16))
def test_funm_exp_is_expm(n, dtype, seed):
    a = _rand(np.random.default_rng(seed), (n, n), dtype) / 2
    with _x64():
        f = fsl.funm(a, fnp.exp)
        cdt = np.complex128 if dtype in (np.float64, np.complex128) else np.complex64
        assert f.dtype == cdt
        want = sl.expm(a.astype(np.complex128))
        _close(f, want, dtype, _norm(want), n, k=1000)


def test_funm_matches_jax(x64):
    want = [
        [-1.4397719072, 1.133686369091, 0.366792624426],
        [-0.511262496443, -0.294982706171, 0.500159664506],
        [0.755790912727, -0.766893744665, -1.061876450836],
    ]  # JAX 0.10.2: funm(_A, jnp.sin)
    np.testing.assert_allclose(np.asarray(fsl.funm(_A, fnp.sin)), want, atol=1e-10)
    f, err = fsl.funm(_A, fnp.sin, disp=False)
    assert err.dtype == np.float64 and err.shape == ()
    np.testing.assert_allclose(float(err), 5.013670944128053e-16, rtol=1e-6)  # JAX's estimate
    f32, err32 = fsl.funm(_A.astype(np.float32), fnp.sin, disp=False)
    assert f32.dtype == np.complex64 and err32.dtype == np.float32
    np.testing.assert_allclose(
        np.asarray(fg.jit(lambda x: fsl.funm(x, fnp.sin))(_A)), want, atol=1e-10
    )
    with pytest.raises(ValueError, match="expected square array_like input"):
        fsl.funm(np.stack([_A, _A]), fnp.exp)
    with pytest.raises(TypeError, match="int32"):
        fsl.funm(np.eye(2, dtype=np.int32), fnp.exp)


# -- solve_sylvester ------------------------------------------------------------------------------


@_SETTINGS
@given(
    m=st.integers(1, 4),
    n=st.integers(1, 4),
    dtype=dtypes_st,
    method=st.sampled_from(["schur", "eigen"]),
    seed=st.integers(0, 2**16),
)
def test_solve_sylvester_residual(m, n, dtype, method, seed):
    rng = np.random.default_rng(seed)
    a = (_rand(rng, (m, m), dtype) + 2 * m * np.eye(m)).astype(dtype)
    b = (_rand(rng, (n, n), dtype) + 2 * n * np.eye(n)).astype(dtype)
    c = _rand(rng, (m, n), dtype)
    with _x64():
        x = fsl.solve_sylvester(a, b, c, method=method)
        assert x.dtype == np.dtype(dtype)
        x = np.asarray(x)
        scale = _norm(a) * _norm(x) + _norm(b) * _norm(x) + _norm(c)
        _close(a @ x + x @ b, c, dtype, scale, m + n, k=500)
        _close(x, sl.solve_sylvester(a, b, c), dtype, _norm(x), m + n, k=2000)


def test_solve_sylvester_matches_jax_batches_and_errors(x64):
    b = np.array([[2.0, 1.0], [0.0, 3.0]])
    c = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    want = [[-2.75, -0.083333333333], [-1.333333333333, 1.0], [3.5, 0.666666666667]]  # JAX
    np.testing.assert_allclose(np.asarray(fsl.solve_sylvester(_A, b, c)), want, atol=1e-10)
    np.testing.assert_allclose(np.asarray(fg.jit(fsl.solve_sylvester)(_A, b, c)), want, atol=1e-10)
    # batch dimensions broadcast; vmap over A alone agrees
    x = fsl.solve_sylvester(np.stack([_A, 2 * _A]), b, c)
    assert x.shape == (2, 3, 2)
    x1 = fsl.solve_sylvester(2 * _A, b, c)
    np.testing.assert_allclose(np.asarray(x[1]), np.asarray(x1), atol=1e-12)
    xv = fg.vmap(fsl.solve_sylvester, in_axes=(0, None, None))(np.stack([_A, 2 * _A]), b, c)
    np.testing.assert_allclose(np.asarray(xv), np.asarray(x), atol=1e-12)
    # complex C makes a complex result; integer inputs promote
    assert fsl.solve_sylvester(_A, b, c.astype(np.complex128)).dtype == np.complex128
    eye = np.eye(2, dtype=np.int32)
    assert fsl.solve_sylvester(eye, eye, eye).dtype == np.float32
    # no unique solution: NaN everywhere (|λ + μ| < tol)
    assert np.isnan(np.asarray(fsl.solve_sylvester(np.eye(2), -np.eye(2), np.ones((2, 2))))).all()
    with pytest.raises(ValueError, match="Incompatible shapes"):
        fsl.solve_sylvester(_A, b, c.T)
    with pytest.raises(ValueError, match="Unrecognized method"):
        fsl.solve_sylvester(_A, b, c, method="x")
    # linear in C (differentiable there), not in A (as in JAX)
    _, tangent = fg.jvp(lambda cc: fsl.solve_sylvester(_A, b, cc), (c,), (np.ones_like(c),))
    np.testing.assert_allclose(
        np.asarray(tangent), np.asarray(fsl.solve_sylvester(_A, b, np.ones_like(c))), atol=1e-12
    )
    with pytest.raises(NotDifferentiableError, match="schur"):
        fg.grad(lambda aa: fsl.solve_sylvester(aa, b, c).sum())(_A)
