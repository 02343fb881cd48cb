"""The LAPACK binding (fungrad/lowering/cpu/lapack.py): numpy's bundled OpenBLAS LAPACK called
from ctypes matches numpy.linalg through reconstruction identities (L Lᵀ = A, P L U = A, Q R = A,
A v = v diag(w), U diag(S) Vᵀ = A) for float32 and float64 and sizes 0, 1, 2, 7, 64; LAPACK's
``info`` reports non-positive-definite and singular input; and jitted LLVM IR can call it."""

import ctypes

import numpy as np
import pytest
import scipy.linalg as scipy_linalg
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu import lapack

INFO = lapack.find_lapack()
pytestmark = pytest.mark.skipif(not INFO.available, reason=f"no LAPACK: {INFO.reason}")

DTYPES = [np.float32, np.float64]
SIZES = [0, 1, 2, 7, 64]
SHAPES = [(0, 0), (1, 1), (2, 2), (7, 7), (64, 64), (7, 3), (3, 7), (0, 4), (4, 0), (64, 7)]


def tol(dtype, n, scale=1.0):
    return 200 * np.finfo(dtype).eps * max(n, 1) * max(scale, 1.0)


def rand(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def spd(n, dtype, seed=0):
    a = rand((n, n), dtype, seed)
    return (a @ a.T + n * np.eye(n, dtype=dtype)).astype(dtype)


def permutation(pivots, m):
    """The rows of A, in order, that LAPACK's row swaps bring to the rows of L U."""
    perm = np.arange(m)
    for i, p in enumerate(pivots):
        perm[[i, p]] = perm[[p, i]]
    return perm


def test_every_routine_resolves_for_both_dtypes():
    assert INFO.int_bits in (32, 64)
    assert INFO.missing == ()
    for routine in lapack.ROUTINES:
        for dtype, letter in zip(DTYPES, "sd"):
            assert INFO.has(routine, dtype)
            assert INFO.address(routine, dtype)
            assert letter + routine in INFO.symbols[(routine, letter)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("lower", [True, False])
def test_potrf_matches_numpy_cholesky(dtype, n, lower):
    a = spd(n, dtype, seed=n)
    # Only the named triangle is read: garbage in the other one must not matter.
    garbage = np.full_like(a, 7.0)
    given_a = np.tril(a) + np.triu(garbage, 1) if lower else np.triu(a) + np.tril(garbage, -1)
    factor, info = lapack.potrf(given_a, lower=lower)
    assert info == 0 and factor.dtype == dtype and factor.shape == (n, n)
    expect = np.linalg.cholesky(a.astype(np.float64))
    if not lower:
        expect = expect.T
    np.testing.assert_allclose(factor, expect, atol=tol(dtype, n, np.abs(expect).max(initial=0)))


@settings(max_examples=25, deadline=None)
@given(hnp.arrays(np.float64, (4, 4), elements=st.floats(-10, 10)))
def test_potrf_random_values(b):
    a = b @ b.T + 1e-3 * np.eye(4)
    factor, info = lapack.potrf(a)
    assert info == 0
    np.testing.assert_allclose(factor @ factor.T, a, atol=1e-9 * max(1.0, np.abs(a).max()))


@pytest.mark.parametrize("dtype", DTYPES)
def test_potrf_info_names_the_failing_minor(dtype):
    a = np.diag([4.0, 1.0, -1.0, 2.0]).astype(dtype)
    _, info = lapack.potrf(a)
    assert info == 3
    # NaN is not caught by the positivity test: it propagates into the factor, info stays 0.
    factor, info = lapack.potrf(np.full((2, 2), np.nan, dtype))
    assert info == 0 and np.isnan(factor[np.tril_indices(2)]).all() and factor[0, 1] == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
@pytest.mark.parametrize("unit_diagonal", [True, False])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_trsm_solves(dtype, left_side, lower, transpose_a, unit_diagonal, n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n)) + 4 * np.eye(n)
    b = rng.standard_normal((n, 3) if left_side else (3, n))
    tri = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        np.fill_diagonal(tri, 1.0)
        a = a + 5.0 * np.eye(n)  # the stored diagonal must be ignored
    op = tri.T if transpose_a else tri
    x = lapack.trsm(a.astype(dtype), b.astype(dtype), left_side, lower, transpose_a, unit_diagonal)
    assert x.dtype == dtype and x.shape == b.shape
    expect = np.linalg.solve(op, b) if left_side else np.linalg.solve(op.T, b.T).T
    np.testing.assert_allclose(x, expect, atol=tol(dtype, n, np.abs(expect).max(initial=0)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_getrf_reconstructs(dtype, shape):
    a = rand(shape, dtype, seed=sum(shape))
    lu, pivots, info = lapack.getrf(a)
    m, n = shape
    k = min(m, n)
    assert info == 0 and lu.shape == shape and pivots.shape == (k,)
    assert pivots.dtype == np.int32 and np.all((pivots >= np.arange(k)) & (pivots < max(m, 1)))
    lower = np.tril(lu, -1)[:, :k] + np.eye(m, k, dtype=dtype)
    upper = np.triu(lu)[:k]
    perm = permutation(pivots, m)
    np.testing.assert_allclose(a[perm], lower @ upper, atol=tol(dtype, max(shape)))
    # P L U = A with P the permutation matrix of perm.
    p = np.eye(m, dtype=dtype)[:, perm] if m else np.zeros((0, 0), dtype)
    np.testing.assert_allclose(p @ lower @ upper, a, atol=tol(dtype, max(shape)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_getrf_info_reports_singular(dtype):
    _, _, info = lapack.getrf(np.array([[1.0, 2.0], [2.0, 4.0]], dtype))
    assert info == 2
    _, _, info = lapack.getrf(np.zeros((3, 3), dtype))
    assert info == 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_geqrf_orgqr_reconstruct(dtype, shape):
    a = rand(shape, dtype, seed=1 + sum(shape))
    m, n = shape
    k = min(m, n)
    qr, tau, info = lapack.geqrf(a)
    assert info == 0 and qr.shape == shape and tau.shape == (k,)
    r = np.triu(qr)
    # Full Q (m x m): pad the reflectors to m columns.
    padded = np.concatenate([qr[:, :k], np.zeros((m, m - k), dtype)], axis=1)
    q, info = lapack.orgqr(padded, tau)
    assert info == 0 and q.shape == (m, m)
    atol = tol(dtype, max(shape))
    np.testing.assert_allclose(q @ r, a, atol=atol)
    np.testing.assert_allclose(q.T @ q, np.eye(m), atol=atol)
    # Reduced Q (m x k).
    q_red, info = lapack.orgqr(qr[:, :k], tau)
    assert info == 0 and q_red.shape == (m, k)
    np.testing.assert_allclose(q_red @ r[:k], a, atol=atol)
    # R agrees with numpy's up to the signs of its rows.
    r_np = np.linalg.qr(a.astype(np.float64), mode="r")
    np.testing.assert_allclose(np.abs(r[:k]), np.abs(r_np), atol=atol * 10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("lower", [True, False])
def test_syevd_eigenpairs(dtype, n, lower):
    b = rand((n, n), dtype, seed=n)
    a = (b + b.T).astype(dtype)
    given_a = np.tril(a) if lower else np.triu(a)
    w, v, info = lapack.syevd(given_a, lower=lower)
    assert info == 0 and w.shape == (n,) and v.shape == (n, n) and w.dtype == dtype
    atol = tol(dtype, n, np.abs(a).max(initial=0))
    np.testing.assert_allclose(a @ v, v * w, atol=atol)
    np.testing.assert_allclose(v.T @ v, np.eye(n), atol=atol)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a.astype(np.float64)), atol=atol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_gesdd_reconstructs(dtype, shape, full_matrices):
    a = rand(shape, dtype, seed=2 + sum(shape))
    m, n = shape
    k = min(m, n)
    s, u, vt, info = lapack.gesdd(a, full_matrices=full_matrices)
    assert info == 0 and s.shape == (k,)
    assert u.shape == ((m, m) if full_matrices else (m, k))
    assert vt.shape == ((n, n) if full_matrices else (k, n))
    atol = tol(dtype, max(shape))
    np.testing.assert_allclose((u[:, :k] * s) @ vt[:k], a, atol=atol)
    np.testing.assert_allclose(u.T @ u, np.eye(u.shape[1]), atol=atol)
    np.testing.assert_allclose(vt @ vt.T, np.eye(vt.shape[0]), atol=atol)
    expect = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    np.testing.assert_allclose(s, expect, atol=atol)
    s_only, u_none, vt_none, info = lapack.gesdd(a, compute_uv=False)
    assert info == 0 and u_none is None and vt_none is None
    np.testing.assert_allclose(s_only, expect, atol=atol)


@settings(max_examples=25, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=6),
        elements=st.floats(-1e3, 1e3),
    )
)
def test_gesdd_random_values(a):
    s, u, vt, info = lapack.gesdd(a, full_matrices=False)
    assert info == 0
    scale = max(1.0, np.abs(a).max(initial=0))
    np.testing.assert_allclose((u * s) @ vt, a, atol=1e-12 * scale * 10)


def test_non_contiguous_and_fortran_input_are_copied_not_changed():
    base = spd(8, np.float64)
    strided = np.zeros((8, 16))
    strided[:, ::2] = base
    view = strided[:, ::2]
    before = view.copy()
    factor, info = lapack.potrf(view)
    assert info == 0
    np.testing.assert_allclose(factor, np.linalg.cholesky(base), atol=1e-12)
    np.testing.assert_array_equal(view, before)
    fortran = np.asfortranarray(base)
    lu, piv, info = lapack.getrf(fortran)
    assert info == 0 and lu.flags.c_contiguous
    np.testing.assert_array_equal(fortran, base)
    s, _, _, _ = lapack.gesdd(view)
    np.testing.assert_allclose(s, np.linalg.svd(base, compute_uv=False), atol=1e-12)


def test_bad_input_errors_name_the_routine():
    with pytest.raises(TypeError, match=r"lapack\.potrf: dtype int64"):
        lapack.potrf(np.eye(2, dtype=np.int64))
    with pytest.raises(TypeError, match="float16"):
        lapack.gesdd(np.eye(2, dtype=np.float16))
    with pytest.raises(ValueError, match=r"lapack\.getrf: expected a matrix.*\(2, 2, 2\)"):
        lapack.getrf(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match=r"lapack\.syevd: expected a square matrix.*\(2, 3\)"):
        lapack.syevd(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"lapack\.trsm: a has shape \(2, 2\) but b \(3, 1\)"):
        lapack.trsm(np.eye(2), np.zeros((3, 1)))
    with pytest.raises(TypeError, match="float32 but b is float64"):
        lapack.trsm(np.eye(2, dtype=np.float32), np.zeros((2, 1)))
    with pytest.raises(ValueError, match=r"lapack\.orgqr"):
        lapack.orgqr(np.zeros((2, 3)), np.zeros(2))


def test_missing_routine_error_says_what_to_install():
    empty = lapack.LapackInfo(reason=None, library_path="/x/libopenblas.so", int_bits=64)
    assert not empty.has("gesdd", np.float64)
    with pytest.raises(lapack.LapackUnavailableError, match=r"dgesdd.*numpy wheel from PyPI"):
        empty.function("gesdd", np.float64)
    none = lapack.LapackInfo(reason="no BLAS library: test")
    with pytest.raises(lapack.LapackUnavailableError, match="spotrf.*no BLAS library: test"):
        none.function("potrf", np.float32)


def test_llvm_declarations_follow_the_abi():
    i = f"i{INFO.int_bits}"
    assert INFO.decl("potrf", np.float32) == (
        "declare void @fg_spotrf(ptr, ptr, ptr, ptr, ptr, i64)"
    )
    assert INFO.decl("trsm", np.float64) == (
        f"declare void @fg_dtrsm(i32, i32, i32, i32, i32, {i}, {i}, double, ptr, {i}, ptr, {i})"
    )
    assert INFO.decl("syevd", np.float64).endswith("ptr, i64, i64)")


def chol_ir(info, scalar):
    """``@chol(a, info)``: potrf of the 3x3 row-major ``a`` in place, lower factor wanted, so
    LAPACK (column-major) is asked for 'U'; its info stored to ``info``."""
    letter = "s" if scalar == "float" else "d"
    dtype = np.float32 if scalar == "float" else np.float64
    i = f"i{info.int_bits}"
    return f"""
{info.decl("potrf", dtype)}
define void @chol(ptr %a, ptr %info) {{
entry:
  %uplo = alloca i8
  store i8 85, ptr %uplo
  %n = alloca {i}
  store {i} 3, ptr %n
  call void @fg_{letter}potrf(ptr %uplo, ptr %n, ptr %a, ptr %n, ptr %info, i64 1)
  ret void
}}
"""


@pytest.mark.parametrize("scalar", ["float", "double"])
def test_jitted_ir_calls_potrf(cache_dir, scalar):
    info = lapack.register_llvm_symbols()
    dtype = np.float32 if scalar == "float" else np.float64
    mod = cpu.compile_module(chol_ir(info, scalar), ["chol"], name=f"chol_{scalar}")
    a = spd(3, dtype, seed=3)
    buf = a.copy()
    status = np.full(1, -5, np.int64 if info.int_bits == 64 else np.int32)
    fn = mod.function("chol", (ctypes.c_void_p, ctypes.c_void_p))
    fn(buf.ctypes.data, status.ctypes.data)
    assert status[0] == 0
    np.testing.assert_allclose(np.tril(buf), np.linalg.cholesky(a), rtol=1e-5, atol=1e-6)
    not_pd = np.diag([1.0, -1.0, 1.0]).astype(dtype)
    fn(not_pd.ctypes.data, status.ctypes.data)
    assert status[0] == 2


def test_jitted_ir_calling_an_unregistered_routine_fails_to_compile(cache_dir):
    lapack.register_llvm_symbols()
    ir = """
declare void @fg_sgbsv(ptr, ptr)
define void @f(ptr %a) {
entry:
  call void @fg_sgbsv(ptr %a, ptr %a)
  ret void
}
"""
    with pytest.raises(cpu.CompileError, match="fg_sgbsv"):
        cpu.compile_module(ir, ["f"], name="no_gbsv")


# -- complex decompositions: geqrf + ungqr, heevd, gesdd, geev ----------------------------------

CDTYPES = [np.complex64, np.complex128]


def _cmat(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _ctol(dtype, n):
    return (3e-5 if dtype == np.complex64 else 1e-12) * max(n, 1)


def test_complex_decompositions_resolve():
    for routine in ("geqrf", "ungqr", "heevd", "gesdd", "geev"):
        for dtype, letter in zip(CDTYPES, "cz"):
            assert INFO.has(routine, dtype) and INFO.address(routine, dtype)
            assert letter + routine in INFO.symbols[(routine, letter)]
    assert INFO.decl("heevd", np.complex64) == (
        "declare void @fg_cheevd(" + ", ".join(["ptr"] * 13 + ["i64"] * 2) + ")"
    )


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (6, 3), (3, 6)])
def test_complex_geqrf_ungqr_reconstruct(dtype, shape):
    a = _cmat(shape, dtype, 1)
    m, n = shape
    k = min(m, n)
    packed, tau, info = lapack.geqrf(a)
    assert info == 0 and packed.dtype == tau.dtype == dtype
    r = np.triu(packed)[:k]
    square = packed[:, :m] if n >= m else np.concatenate([packed, np.zeros((m, m - n), dtype)], 1)
    q, info = lapack.ungqr(square, tau)
    assert info == 0
    tol = _ctol(dtype, max(shape))
    np.testing.assert_allclose(q.conj().T @ q, np.eye(q.shape[1]), atol=tol)
    np.testing.assert_allclose(q[:, :k] @ r, a, atol=tol)
    np.testing.assert_allclose(r, np.linalg.qr(a)[1], atol=tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("n", [0, 1, 5])
@pytest.mark.parametrize("lower", [True, False])
def test_heevd_eigenpairs(dtype, n, lower):
    a = _cmat((n, n), dtype, 2)
    h = ((a + a.conj().T) / 2).astype(dtype)
    junk = np.triu(_cmat((n, n), dtype, 3), 1)
    stored = h + (junk if lower else junk.conj().T)  # the other triangle is never read
    w, v, info = lapack.heevd(stored, lower=lower)
    assert info == 0 and w.dtype == np.dtype(dtype).type(0).real.dtype and v.dtype == dtype
    tol = _ctol(dtype, n)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), atol=tol)
    np.testing.assert_allclose(h @ v, v * w, atol=tol)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(n), atol=tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (4, 4), (6, 3), (3, 6)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_complex_gesdd_reconstructs(dtype, shape, full_matrices):
    a = _cmat(shape, dtype, 4)
    k = min(shape)
    s, u, vt, info = lapack.gesdd(a, full_matrices)
    assert info == 0 and s.dtype == np.real(a).dtype and u.dtype == vt.dtype == dtype
    tol = _ctol(dtype, max(shape))
    np.testing.assert_allclose((u[:, :k] * s) @ vt[:k], a, atol=tol)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=tol)
    s2, none_u, none_vt, info = lapack.gesdd(a, compute_uv=False)
    assert info == 0 and none_u is None and none_vt is None
    np.testing.assert_allclose(s2, s, atol=tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("n", [1, 2, 6])
def test_complex_geev_eigenpairs(dtype, n):
    a = _cmat((n, n), dtype, 5)
    w, vl, vr, info = lapack.geev_complex(a)
    assert info == 0 and w.dtype == vl.dtype == vr.dtype == dtype
    tol = _ctol(dtype, n) * 10
    np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(np.linalg.eigvals(a)), atol=tol)
    np.testing.assert_allclose(a @ vr, vr * w, atol=tol)
    np.testing.assert_allclose(vl.conj().T @ a, w[:, None] * vl.conj().T, atol=tol)
    np.testing.assert_allclose(np.linalg.norm(vr, axis=0), 1, atol=tol)
    w2, none_l, none_r, info = lapack.geev_complex(a, left=False, right=False)
    assert none_l is None and none_r is None
    np.testing.assert_allclose(np.sort_complex(w2), np.sort_complex(w), atol=tol)
    with pytest.raises(TypeError, match="geev_complex"):
        lapack.geev(a)
    with pytest.raises(TypeError, match="heevd.*complex"):
        lapack.heevd(np.eye(2))


# -- complex potrf, trsm, getrf -----------------------------------------------------------------


def _hpd(n, dtype, seed=0):
    a = _cmat((n, n), dtype, seed)
    return (a @ a.conj().T + n * np.eye(n)).astype(dtype)


def test_complex_solvers_resolve_and_declare():
    i = f"i{INFO.int_bits}"
    for routine in ("potrf", "trsm", "getrf"):
        for dtype, letter in zip(CDTYPES, "cz"):
            assert INFO.has(routine, dtype) and INFO.address(routine, dtype)
            assert letter + routine in INFO.symbols[(routine, letter)]
    # cblas takes the complex alpha by pointer
    assert INFO.decl("trsm", np.complex128) == (
        f"declare void @fg_ztrsm(i32, i32, i32, i32, i32, {i}, {i}, ptr, ptr, {i}, ptr, {i})"
    )
    assert (
        INFO.decl("getrf", np.complex64) == "declare void @fg_cgetrf(ptr, ptr, ptr, ptr, ptr, ptr)"
    )


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("lower", [True, False])
def test_complex_potrf_matches_numpy_cholesky(dtype, n, lower):
    a = _hpd(n, dtype, seed=n)
    garbage = np.full_like(a, 7 + 7j)  # the other triangle is never read
    given_a = np.tril(a) + np.triu(garbage, 1) if lower else np.triu(a) + np.tril(garbage, -1)
    factor, info = lapack.potrf(given_a, lower=lower)
    assert info == 0 and factor.dtype == dtype and factor.shape == (n, n)
    expect = np.linalg.cholesky(a.astype(np.complex128))
    if not lower:
        expect = expect.conj().T
    np.testing.assert_allclose(factor, expect, atol=_ctol(dtype, n) * np.sqrt(n))
    _, info = lapack.potrf(np.diag([4.0, 1.0, -1.0]).astype(dtype))
    assert info == 3


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("op", ["N", "T", "C"])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_complex_trsm_solves(dtype, left_side, lower, op, n):
    a = _cmat((n, n), dtype, n) + 4 * np.eye(n, dtype=dtype)
    b = _cmat((n, 3) if left_side else (3, n), dtype, n + 1)
    tri = np.tril(a) if lower else np.triu(a)
    mat = {"N": tri, "T": tri.T, "C": tri.conj().T}[op]
    x = lapack.trsm(a, b, left_side, lower, op != "N", False, conjugate_a=op == "C")
    assert x.dtype == dtype and x.shape == b.shape
    expect = np.linalg.solve(mat, b) if left_side else np.linalg.solve(mat.T, b.T).T
    np.testing.assert_allclose(x, expect, atol=_ctol(dtype, n))
    with pytest.raises(ValueError, match="trsm.*conjugate_a needs transpose_a"):
        lapack.trsm(a, b, left_side, lower, False, False, conjugate_a=True)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_complex_getrf_matches_scipy(dtype, shape):
    a = _cmat(shape, dtype, seed=sum(shape))
    lu, pivots, info = lapack.getrf(a)
    m, n = shape
    k = min(m, n)
    assert info == 0 and lu.dtype == dtype and lu.shape == shape and pivots.shape == (k,)
    lower = np.tril(lu, -1)[:, :k] + np.eye(m, k, dtype=dtype)
    upper = np.triu(lu)[:k]
    np.testing.assert_allclose(a[permutation(pivots, m)], lower @ upper, atol=_ctol(dtype, m))
    if k:
        want_lu, want_piv = scipy_linalg.lu_factor(a)
        np.testing.assert_array_equal(pivots, want_piv)
        np.testing.assert_allclose(lu, want_lu, atol=_ctol(dtype, m))


def test_real_only_routines_refuse_complex():
    with pytest.raises(TypeError, match="lapack.syevd.*complex64.*float32 or float64"):
        lapack.syevd(np.eye(2, dtype=np.complex64))
