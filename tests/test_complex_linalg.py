"""Complex matrices in cholesky, triangular_solve and lu (and what builds on them: solve, inv,
det, slogdet, norm, scipy.linalg's solvers): reconstruction identities against numpy/scipy for
complex64 and complex128, eager and under jit (the complex split's interleaved forms calling
cpotrf/zpotrf, ctrsm/ztrsm, cgetrf/zgetrf), vmap against a loop, derivatives against finite
differences, and the GPU's clear refusal."""

import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lax import linalg as lla
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.lowering.fusion import LoweringError
from fungrad.scipy import linalg as fsl
from fungrad.testing import check_grads

pytestmark = pytest.mark.skipif(
    not CpuPolicy().linalg_steps, reason="no LAPACK in numpy's OpenBLAS"
)

SIZES = [0, 1, 2, 7, 64]


@pytest.fixture(params=[np.complex64, np.complex128], ids=["c64", "c128"])
def cdtype(request):
    """Each complex dtype; complex128 with x64 on."""
    if request.param == np.complex64:
        yield np.dtype(np.complex64)
        return
    old = fg.config.enable_x64
    fg.config.update("enable_x64", True)
    try:
        yield np.dtype(np.complex128)
    finally:
        fg.config.update("enable_x64", old)


def tol(dtype, n=1):
    return 100 * np.finfo(dtype).eps * max(n, 1)


def crand(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dtype)


def hpd(shape, dtype, seed=0):
    """Hermitian positive definite matrices of ``shape`` [..., n, n]."""
    a = crand(shape, dtype, seed)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def adj(x):
    return np.conj(np.swapaxes(x, -1, -2))


def close(got, want, dtype, n=1, scale=1.0):
    np.testing.assert_allclose(
        np.asarray(got), want, rtol=tol(dtype, n), atol=tol(dtype, n) * scale
    )


# -- cholesky -----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_cholesky_reconstructs_eager_and_jit(cdtype, n):
    batch = (3,) if n < 8 else ()
    a = hpd(batch + (n, n), cdtype, seed=n)
    for f in (lla.cholesky, fg.jit(lla.cholesky)):
        L = np.asarray(f(a))
        assert L.dtype == cdtype and L.shape == a.shape
        np.testing.assert_array_equal(L, np.tril(L))
        close(L @ adj(L), a, cdtype, n, scale=n)
        if n:
            close(L, np.linalg.cholesky(a), cdtype, n, scale=np.sqrt(n))


def test_cholesky_not_positive_definite_and_upper(cdtype):
    a = hpd((2, 4, 4), cdtype)
    a[1, 2, 2] = -50  # the second matrix is not positive definite
    want = np.tril(np.full((4, 4), np.nan, cdtype))
    for f in (fnp.linalg.cholesky, fg.jit(fnp.linalg.cholesky)):
        L = np.asarray(f(a))
        close(L[0] @ adj(L[0]), a[0], cdtype, 4, scale=4)
        np.testing.assert_array_equal(L[1], want)  # NaN + 0j below, zeros above: as eager
    # the wrapper symmetrizes with (a + aᴴ)/2; upper is Lᴴ (numpy, SciPy)
    skew = a[0] + np.triu(crand((4, 4), cdtype), 1)
    sym = (skew + adj(skew)) / 2
    close(fnp.linalg.cholesky(skew), np.linalg.cholesky(sym), cdtype, 4, scale=2)
    close(fnp.linalg.cholesky(a[0], upper=True), adj(np.linalg.cholesky(a[0])), cdtype, 4, 2)
    close(fsl.cholesky(a[0]), sla.cholesky(a[0]), cdtype, 4, scale=2)
    close(fsl.cholesky(a[0], lower=True), sla.cholesky(a[0], lower=True), cdtype, 4, scale=2)


# -- triangular_solve ---------------------------------------------------------------------------


def _op(a, lower, transpose_a, conjugate_a, unit_diagonal):
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        t = t - np.diag(np.diag(t)) + np.eye(a.shape[-1])
    if transpose_a:
        t = t.T
    return np.conj(t) if conjugate_a else t


@pytest.mark.parametrize("n", [0, 1, 7])
def test_triangular_solve_every_op_eager_and_jit(cdtype, n):
    a = crand((n, n), cdtype, 1) + 3 * np.eye(n, dtype=cdtype)
    b_left, b_right = crand((n, 3), cdtype, 2), crand((3, n), cdtype, 3)
    cases = []
    for left in (True, False):
        for lower in (True, False):
            for trans in (False, True):
                for conj in (False, True):
                    for unit in (False, True):
                        cases.append(
                            dict(
                                left_side=left,
                                lower=lower,
                                transpose_a=trans,
                                conjugate_a=conj,
                                unit_diagonal=unit,
                            )
                        )

    def solve_all(a, bl, br):
        return [lla.triangular_solve(a, bl if c["left_side"] else br, **c) for c in cases]

    eager = solve_all(a, b_left, b_right)
    jitted = fg.jit(solve_all)(a, b_left, b_right)
    for c, x, xj in zip(cases, eager, jitted):
        op = _op(a, c["lower"], c["transpose_a"], c["conjugate_a"], c["unit_diagonal"])
        x = np.asarray(x)
        got, want = (op @ x, b_left) if c["left_side"] else (x @ op, b_right)
        close(got, want, cdtype, n, scale=4)
        close(xj, x, cdtype, n, scale=4)


def test_scipy_triangular_solvers(cdtype):
    n = 6
    a = crand((2, n, n), cdtype, 4) + 3 * np.eye(n, dtype=cdtype)
    b = crand((2, n, 2), cdtype, 5)
    for trans in (0, 1, 2, "N", "T", "C"):
        for lower in (True, False):
            got = fsl.solve_triangular(a, b, trans=trans, lower=lower)
            for i in range(2):
                want = sla.solve_triangular(a[i], b[i], trans=trans, lower=lower)
                close(got[i], want, cdtype, n, scale=4)
    h = hpd((n, n), cdtype, 6)
    for lower in (True, False):
        c = fsl.cho_factor(h, lower=lower)
        close(fsl.cho_solve(c, b[0]), np.linalg.solve(h, b[0]), cdtype, n, scale=4)
        close(fsl.solve(h, b[0], assume_a="pos", lower=lower), np.linalg.solve(h, b[0]), cdtype, n)
    close(fsl.solve(h, b[0], assume_a="her"), np.linalg.solve(h, b[0]), cdtype, n)


# -- lu -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (2, 2), (7, 7), (64, 64), (5, 3), (3, 5)])
def test_lu_reconstructs_with_lapacks_pivots(cdtype, shape):
    batch = (2,) if max(shape) < 8 else ()
    a = crand(batch + shape, cdtype, seed=sum(shape))
    m, n = shape
    k = min(m, n)
    eager = [np.asarray(o) for o in lla.lu(a)]
    jitted = [np.asarray(o) for o in fg.jit(lla.lu)(a)]
    for lu_, piv, perm in (eager, jitted):
        assert lu_.dtype == cdtype and piv.dtype == perm.dtype == np.int32
        L = np.tril(lu_[..., :, :k], -1) + np.eye(m, k, dtype=cdtype)
        U = np.triu(lu_[..., :k, :])
        pa = np.take_along_axis(a, perm[..., :, None], axis=-2)
        close(L @ U, pa, cdtype, max(shape), scale=max(shape))
        for i in np.ndindex(batch):
            if k:  # LAPACK's own pivots (zgetrf: the first largest |re| + |im|)
                np.testing.assert_array_equal(piv[i], sla.lu_factor(a[i])[1])
    np.testing.assert_array_equal(eager[1], jitted[1])
    np.testing.assert_array_equal(eager[2], jitted[2])
    close(jitted[0], eager[0], cdtype, max(shape), scale=max(shape))


def test_lu_pivots_on_the_one_norm_of_each_entry():
    # |3 + 3j| > |4| but |re| + |im|: 6 > 4, and |4.5| < |3+3j| while 4.5 < 6: LAPACK's izamax
    a = np.array([[4.5, 1], [3 + 3j, 2]], np.complex64)
    for f in (lla.lu, fg.jit(lla.lu)):
        np.testing.assert_array_equal(np.asarray(f(a)[1]), sla.lu_factor(a)[1])
    assert sla.lu_factor(a)[1][0] == 1


def test_scipy_lu_family(cdtype):
    a = crand((5, 5), cdtype, 7)
    b = crand((5, 2), cdtype, 8)
    p, L, U = fsl.lu(a)
    close(np.asarray(p) @ np.asarray(L) @ np.asarray(U), a, cdtype, 5, scale=5)
    pl, U2 = fsl.lu(a, permute_l=True)
    close(np.asarray(pl) @ np.asarray(U2), a, cdtype, 5, scale=5)
    fac = fsl.lu_factor(a)
    for trans in (0, 1, 2):
        close(
            fsl.lu_solve(fac, b, trans=trans),
            sla.lu_solve(sla.lu_factor(a), b, trans=trans),
            cdtype,
            5,
            scale=10,
        )
    close(fsl.det(a), np.linalg.det(a), cdtype, 5, scale=10)
    close(fsl.inv(a), np.linalg.inv(a), cdtype, 5, scale=10)


# -- solve, inv, det, slogdet -------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 64])
def test_solve_inv_det_slogdet_against_numpy(cdtype, n):
    batch = (2,) if n < 8 else ()
    a = (crand(batch + (n, n), cdtype, n) / np.sqrt(2 * max(n, 1)) + np.eye(n)).astype(cdtype)
    b = crand(batch + (n, 2), cdtype, n + 1)

    def all_of(a, b):
        sign, logabs = fnp.linalg.slogdet(a)
        return fnp.linalg.solve(a, b), fnp.linalg.inv(a), fnp.linalg.det(a), sign, logabs

    want_sign, want_log = np.linalg.slogdet(a)
    wants = (np.linalg.solve(a, b), np.linalg.inv(a), np.linalg.det(a), want_sign, want_log)
    eager = all_of(a, b)
    for outs in (eager, fg.jit(all_of)(a, b)):
        solve, inv, det, sign, logabs = (np.asarray(o) for o in outs)
        assert logabs.dtype == np.finfo(cdtype).dtype and sign.dtype == cdtype
        close(solve, wants[0], cdtype, n, scale=10)
        close(inv, wants[1], cdtype, n, scale=10)
        np.testing.assert_allclose(det, wants[2], rtol=tol(cdtype, n) * 10)
        close(sign, want_sign, cdtype, n)
        close(logabs, want_log, cdtype, n, scale=10)
        if n:
            close(np.abs(sign), np.ones(batch), cdtype)


def test_singular_complex_slogdet_and_det():
    a = np.array([[1 + 1j, 2 + 2j, 0], [1, 2, 0], [0, 0, 0]], np.complex64)
    a[2, 2] = 0
    sign, logabs = fnp.linalg.slogdet(np.stack([a, a]))
    np.testing.assert_array_equal(np.asarray(sign), 0)
    np.testing.assert_array_equal(np.asarray(logabs), -np.inf)
    assert np.asarray(fnp.linalg.det(np.eye(4, dtype=np.complex64) * 1j)) == 1


# -- vmap, derivatives --------------------------------------------------------------------------


def test_vmap_matches_a_loop():
    dt = np.complex64
    a = hpd((3, 4, 4), dt, 9)
    b = crand((3, 4, 2), dt, 10)

    def f(a, b):
        L = lla.cholesky(a)
        x = lla.triangular_solve(
            L, b, left_side=True, lower=True, transpose_a=True, conjugate_a=True
        )
        lu_, piv, perm = lla.lu(a)
        return L, x, lu_, piv, perm, fnp.linalg.solve(a, b), fnp.linalg.slogdet(a)[0]

    got = fg.vmap(f)(a, b)
    for i in range(3):
        want = f(a[i], b[i])
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g)[i], np.asarray(w), rtol=1e-5, atol=1e-5)
    jitted = fg.jit(fg.vmap(f))(a, b)
    for g, j in zip(got, jitted):
        np.testing.assert_allclose(np.asarray(j), np.asarray(g), rtol=1e-5, atol=1e-5)


@pytest.fixture
def c128(x64):
    return np.complex128


def test_cholesky_grads(c128):
    r = crand((3, 3), c128, 11)

    def f(x):  # a Hermitian positive definite function of any complex x
        return lla.cholesky(x @ fnp.conj(x.T) + 3 * fnp.eye(3))

    check_grads(f, (r,), order=1, modes=("fwd", "rev"))
    check_grads(
        lambda x: fnp.linalg.cholesky(x, symmetrize_input=True),
        (hpd((3, 3), c128),),
        order=1,
        modes=("fwd", "rev"),
    )


@pytest.mark.parametrize("conj", [False, True])
def test_triangular_solve_grads(c128, conj):
    a = crand((3, 3), c128, 12) + 3 * np.eye(3)
    b = crand((3, 2), c128, 13)
    for left, trans in ((True, False), (True, True), (False, True)):
        bb = b if left else b.T

        def f(a, b, left=left, trans=trans):
            return lla.triangular_solve(
                a, b, left_side=left, lower=True, transpose_a=trans, conjugate_a=conj
            )

        check_grads(f, (a, bb), order=1, modes=("fwd", "rev"))


def test_lu_and_solver_grads(c128):
    a = crand((4, 4), c128, 14) + 2 * np.eye(4)
    b = crand((4, 2), c128, 15)
    check_grads(lambda a: lla.lu(a)[0], (a,), order=1, modes=("fwd", "rev"))
    check_grads(fnp.linalg.solve, (a, b), order=1, modes=("fwd", "rev"))
    check_grads(fnp.linalg.inv, (a,), order=1, modes=("fwd", "rev"))
    check_grads(fnp.linalg.det, (a,), order=1, modes=("fwd", "rev"))
    check_grads(lambda a: fnp.linalg.slogdet(a)[1], (a,), order=1, modes=("fwd", "rev"))
    check_grads(lambda a: fnp.linalg.slogdet(a)[0], (a,), order=1, modes=("fwd", "rev"))
    check_grads(
        lambda a, b: fsl.lu_solve(fsl.lu_factor(a), b, trans=2),
        (a, b),
        order=1,
        modes=("fwd", "rev"),
    )


def test_grad_under_jit_matches_eager(c128):
    a = hpd((4, 4), c128, 16)

    def loss(a):
        L = fnp.linalg.cholesky(a)
        return fnp.real(fnp.sum(L * fnp.conj(L))) + fnp.linalg.slogdet(a)[1]

    g = fg.grad(loss)(a)
    close(fg.jit(fg.grad(loss))(a), np.asarray(g), c128, 4, scale=10)


# -- norm ---------------------------------------------------------------------------------------


def test_norm_of_complex_is_real():
    z = crand((3, 4), np.complex64, 17)
    z[0, 0] = 0
    for ord, axis in [
        (None, None),
        (None, 1),
        (2, 1),
        (1, 0),
        (np.inf, 1),
        (-np.inf, 1),
        (0, 1),
        (3, 1),
        (0.5, 0),
        ("fro", None),
        (1, None),
        (np.inf, None),
        (-1, None),
    ]:
        got = fnp.linalg.norm(z, ord=ord, axis=axis)
        want = np.linalg.norm(z, ord=ord, axis=axis)
        assert np.asarray(got).dtype == np.float32, (ord, axis)
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6, err_msg=f"{ord} {axis}")
    jitted = fg.jit(lambda z: fnp.linalg.norm(z, axis=1))(z)
    assert np.asarray(jitted).dtype == np.float32
    np.testing.assert_allclose(np.asarray(jitted), np.linalg.norm(z, axis=1), rtol=2e-6)
    assert np.asarray(fnp.linalg.vector_norm(z)).dtype == np.float32
    g = fg.grad(lambda z: fnp.linalg.norm(z))(z)  # d|z| / dz̄ convention: z / |z| (conj'd)
    np.testing.assert_allclose(np.asarray(g), np.conj(z) / np.linalg.norm(z), rtol=1e-5)


# -- errors -------------------------------------------------------------------------------------


def test_gpu_refuses_complex_linear_algebra_clearly():
    a = hpd((3, 3), np.complex64)
    for f, name in (
        (lla.cholesky, "cholesky"),
        (lambda x: lla.lu(x)[0], "lu"),
        (lambda x: lla.triangular_solve(x, x, lower=True), "triangular_solve"),
    ):
        with pytest.raises(LoweringError, match=f"{name}.*complex.*backend='cpu'"):
            fg.jit(f, backend="gpu")(a)


def test_bad_dtypes_are_type_errors():
    with pytest.raises(TypeError, match="cholesky.*int32"):
        lax.linalg.cholesky_p.bind(np.eye(2, dtype=np.int32))
    with pytest.raises(TypeError, match="triangular_solve.*one dtype"):
        lax.linalg.triangular_solve_p.bind(
            np.eye(2, dtype=np.complex64),
            np.eye(2, dtype=np.float32),
            left_side=True,
            lower=True,
            transpose_a=False,
            conjugate_a=False,
            unit_diagonal=False,
        )


def test_compiled_program_calls_the_complex_routines(cdtype):
    from fungrad.lowering import compile_jaxpr

    def f(a):
        L = lla.cholesky(a)
        lu_ = lla.lu(a)[0]
        return lla.triangular_solve(
            L, lu_, left_side=True, lower=True, transpose_a=True, conjugate_a=True
        )

    text = compile_jaxpr(fg.make_jaxpr(f)(np.eye(3, dtype=cdtype))).as_text()
    letter = "c" if cdtype == np.complex64 else "z"
    for routine in ("potrf", "getrf", "trsm"):
        assert f"call void @fg_{letter}{routine}(" in text
    assert "@fg_spotrf(" not in text and "@fg_dpotrf(" not in text


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(0, 6),
    n=st.integers(0, 6),
    batch=st.sampled_from([(), (2,), (1, 2)]),
    seed=st.integers(0, 2**16),
)
def test_lu_any_shape_matches_scipy(m, n, batch, seed):
    a = crand(batch + (m, n), np.complex64, seed)
    a[..., :, :1] *= seed % 3  # sometimes a zero first column: a zero pivot, no error
    lu_, piv, perm = (np.asarray(o) for o in lla.lu(a))
    k = min(m, n)
    L = np.tril(lu_[..., :, :k], -1) + np.eye(m, k, dtype=a.dtype)
    U = np.triu(lu_[..., :k, :])
    pa = np.take_along_axis(a, perm[..., :, None], axis=-2)
    np.testing.assert_allclose(L @ U, pa, rtol=1e-5, atol=1e-5)
    for i in np.ndindex(batch):
        if k:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", sla.LinAlgWarning)  # a zero pivot
                want_lu, want_piv = sla.lu_factor(a[i], check_finite=False)
            np.testing.assert_array_equal(piv[i], want_piv)
            np.testing.assert_allclose(lu_[i], want_lu, rtol=1e-5, atol=1e-5)
