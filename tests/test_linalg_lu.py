"""The ``lu`` primitive (fungrad/lax/linalg_lu.py) and what uses it: values against
scipy.linalg.lu_factor / numpy, ``P A = L U`` reconstruction, rectangular and batched input,
singular matrices (no error, LAPACK's factors), jit (one LAPACK step on the CPU) against eager,
vmap against a loop, derivatives against finite differences (``check_grads``) for lu and for
solve/det/inv/slogdet, the GPU's loop algorithm, errors, and the rest of numpy.linalg /
scipy.linalg built on it (tensorsolve, tensorinv, matrix_power, norm, lu_solve, solve with
assume_a, expm, block_diag)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.ir import passes
from fungrad.lax.linalg_lu import lu_p
from fungrad.lowering import fusion
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.lowering.gpu.policy import GpuPolicy
from fungrad.lowering.steps import LuStep
from fungrad.scipy import linalg as fsl
from fungrad.testing import check_grads


def _lu(a):
    """``lax.linalg.lu`` under a fresh jit (one trace per shape, no retrace warnings)."""
    return fg.jit(lambda x: lax.linalg.lu(x))(a)


def _well_conditioned(rng, shape, dtype=np.float64):
    """Random matrices plus a dominant random permutation: far from singular, with real row
    swaps for partial pivoting to do."""
    *batch, m, n = shape
    a = rng.uniform(-1, 1, shape)
    k = min(m, n)
    if k:
        perm = np.eye(max(m, n))[rng.permutation(max(m, n))][:m, :n]
        a = a + (k + 1) * perm
    return a.astype(dtype)


def _unpack(lu, m, n):
    k = min(m, n)
    lower = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
    upper = np.triu(lu[..., :k, :])
    return lower, upper


def _check_factors(a, out, tol):
    """``out`` = (lu, pivots, permutation) of ``a``: dtypes, shapes, the permutation made by
    the pivots, and ``a[perm] == L @ U``."""
    lu, piv, perm = (np.asarray(v) for v in out)
    *batch, m, n = a.shape
    k = min(m, n)
    assert lu.shape == a.shape and lu.dtype == a.dtype
    assert piv.shape == tuple(batch) + (k,) and piv.dtype == np.int32
    assert perm.shape == tuple(batch) + (m,) and perm.dtype == np.int32
    for idx in np.ndindex(*batch):
        want = np.arange(m)
        for i, p in enumerate(piv[idx]):
            want[[i, p]] = want[[p, i]]
        np.testing.assert_array_equal(perm[idx], want)
        lower, upper = _unpack(lu[idx], m, n)
        np.testing.assert_allclose(lower @ upper, a[idx][perm[idx]], rtol=tol, atol=tol)


# -- the primitive -------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 7, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lu_matches_scipy_eager_and_jit(n, dtype, x64):
    a = _well_conditioned(np.random.default_rng(n), (2, n, n), dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    for f in (lax.linalg.lu, _lu):
        out = f(a)
        _check_factors(a, out, tol * max(n, 1))
        for i in range(2):
            if n:
                want_lu, want_piv = sla.lu_factor(a[i])
                np.testing.assert_allclose(np.asarray(out[0])[i], want_lu, rtol=tol, atol=tol)
                np.testing.assert_array_equal(np.asarray(out[1])[i], want_piv)


def test_lu_300_eager_and_jit(x64):
    a = np.random.default_rng(300).standard_normal((300, 300))
    want_lu, want_piv = sla.lu_factor(a)
    for f in (lax.linalg.lu, _lu):
        lu, piv, _ = f(a)
        np.testing.assert_allclose(np.asarray(lu), want_lu, rtol=1e-8, atol=1e-8)
        np.testing.assert_array_equal(np.asarray(piv), want_piv)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (2, 1, 4), (2, 4, 1), (0, 3), (3, 0), (0, 2, 2)])
def test_lu_rectangular_and_empty(shape, x64):
    a = np.random.default_rng(sum(shape)).standard_normal(shape)
    eager, jitted = lax.linalg.lu(a), _lu(a)
    _check_factors(a, eager, 1e-12)
    for e, j in zip(eager, jitted):
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-12, atol=1e-12)
    if a.ndim == 2 and min(shape):
        want_lu, want_piv = sla.lu_factor(a)
        np.testing.assert_allclose(np.asarray(eager[0]), want_lu, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(np.asarray(eager[1]), want_piv)


@settings(max_examples=30, deadline=None)
@given(
    batch=st.sampled_from([(), (1,), (3,), (2, 2)]),
    m=st.integers(0, 6),
    n=st.integers(0, 6),
    seed=st.integers(0, 2**16),
)
def test_lu_reconstructs_any_shape(batch, m, n, seed):
    a = np.random.default_rng(seed).standard_normal(batch + (m, n)).astype(np.float32)
    _check_factors(a, lax.linalg.lu(a), 1e-5)


def test_lu_singular_matrices_no_error():
    a = np.zeros((3, 4, 4), np.float32)
    a[1] = np.arange(16).reshape(4, 4)  # rank 2
    a[2] = np.eye(4)
    a[2, 2, 2] = 0
    for f in (lax.linalg.lu, _lu):
        lu, piv, perm = (np.asarray(v) for v in f(a))
        assert np.isfinite(lu).all()
        _check_factors(a, (lu, piv, perm), 1e-5)
        assert (np.abs(np.diagonal(lu, 0, -2, -1)).min(axis=-1) < 1e-5).all()  # U singular
    b = np.ones((3, 4, 1), np.float32)
    for f in (fnp.linalg.solve, fg.jit(fnp.linalg.solve)):
        assert not np.isfinite(np.asarray(f(a, b))[:2]).all(axis=(-2, -1)).any()
    for f in (fnp.linalg.det, fg.jit(fnp.linalg.det)):
        np.testing.assert_allclose(np.asarray(f(a)), 0, atol=1e-4)


def test_lu_nan_input_propagates(x64):
    a = np.eye(3)
    a[1, 2] = np.nan
    for f in (lax.linalg.lu, _lu):
        assert np.isnan(np.asarray(f(a)[0])).any()


def test_lu_vmap_matches_loop():
    a = _well_conditioned(np.random.default_rng(3), (4, 5, 5), np.float32)
    moved = np.moveaxis(a, 0, 1)  # batch along axis 1
    want = [lax.linalg.lu(a[i]) for i in range(4)]
    for f in (fg.vmap(lax.linalg.lu, in_axes=1), fg.jit(fg.vmap(lax.linalg.lu, in_axes=1))):
        got = f(moved)
        for j in range(3):
            np.testing.assert_allclose(
                np.asarray(got[j]), np.stack([np.asarray(w[j]) for w in want]), rtol=1e-6
            )


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (3, 5), (5, 3)])
def test_lu_gradients(shape, x64):
    a = _well_conditioned(np.random.default_rng(sum(shape)), shape)

    def f(x):
        return lax.linalg.lu(x)[0]

    check_grads(f, (a,), order=1, modes=("fwd", "rev"))
    check_grads(fg.jit(f), (a,), order=1, modes=("fwd", "rev"))


def test_lu_pivots_get_zero_tangents():
    a = _well_conditioned(np.random.default_rng(0), (4, 4))
    _, (dlu, dpiv, dperm) = fg.jvp(lax.linalg.lu, (a,), (np.ones_like(a),))
    for t, shape in ((dpiv, (4,)), (dperm, (4,))):
        t = np.asarray(t)
        assert t.shape == shape and (t.dtype == fg.dtypes.float0 or not t.any())
    assert np.asarray(dlu).any()


def test_lu_errors():
    with pytest.raises(TypeError, match="lu.*int32"):
        lax.linalg.lu(np.ones((3, 3), np.int32))
    with pytest.raises(TypeError, match=r"lu.*rank at least 2.*\(3,\)"):
        lax.linalg.lu(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="lu"):
        lu_p.bind(fnp.zeros((), np.float32))


def _plan(f, args, policy):
    return fusion.plan(passes.optimize(fg.make_jaxpr(f)(*args)), policy=policy)


def test_cpu_plan_has_one_lapack_step_gpu_plan_one_step():
    a = _well_conditioned(np.random.default_rng(4), (3, 64, 64), np.float32)
    if CpuPolicy().linalg_steps:
        prog = _plan(lax.linalg.lu, (a,), CpuPolicy())
        assert sum(isinstance(s, LuStep) for s in prog.steps) == 1
    gprog = _plan(lax.linalg.lu, (a,), GpuPolicy())
    assert sum(isinstance(s, LuStep) for s in gprog.steps) == 1


def test_solve_gradient_program_does_not_grow_with_n():
    def loss(a, b):
        return fnp.sum(fnp.linalg.solve(a, b) ** 2)

    def count(n):
        a = _well_conditioned(np.random.default_rng(n), (n, n), np.float32)
        b = np.ones((n, 2), np.float32)
        return len(fg.make_jaxpr(fg.grad(loss, argnums=(0, 1)))(a, b).eqns)

    assert count(2) == count(9) == count(40)


def test_gpu_runs_the_lu_step(gpu):
    rng = np.random.default_rng(9)
    a = _well_conditioned(rng, (2, 6, 6), np.float32)
    b = rng.standard_normal((2, 6, 3)).astype(np.float32)
    out = fg.jit(lax.linalg.lu, backend="gpu")(a)
    _check_factors(a, out, 1e-4)
    for i in range(2):
        np.testing.assert_array_equal(np.asarray(out[1])[i], sla.lu_factor(a[i])[1])
    wide = rng.standard_normal((3, 5)).astype(np.float32)
    _check_factors(wide, fg.jit(lax.linalg.lu, backend="gpu")(wide), 1e-5)
    a64 = a.astype(np.float64)
    got = fg.jit(fnp.linalg.solve, backend="gpu")(a, b)
    np.testing.assert_allclose(np.asarray(got), np.linalg.solve(a64, b), rtol=1e-4, atol=1e-5)
    got = fg.jit(fnp.linalg.det, backend="gpu")(a)
    np.testing.assert_allclose(np.asarray(got), np.linalg.det(a64), rtol=1e-4)
    got = fg.jit(fnp.linalg.inv, backend="gpu")(a)
    np.testing.assert_allclose(np.asarray(got), np.linalg.inv(a64), rtol=1e-4, atol=1e-5)


# -- numpy.linalg on top of it -----------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 7, 64])
def test_solve_det_inv_slogdet_eager_and_jit(n):
    rng = np.random.default_rng(n + 1)
    a = _well_conditioned(rng, (2, n, n), np.float32)
    b = rng.standard_normal((2, n, 3)).astype(np.float32)
    a64 = a.astype(np.float64)
    tol = 1e-4
    for jit in (False, True):
        wrap = fg.jit if jit else (lambda f: f)
        x = np.asarray(wrap(fnp.linalg.solve)(a, b))
        np.testing.assert_allclose(x, np.linalg.solve(a64, b) if n else b, rtol=tol, atol=tol)
        if n < 10:  # the determinant of the 64 x 64 matrices overflows float32
            np.testing.assert_allclose(
                np.asarray(wrap(fnp.linalg.det)(a)), np.linalg.det(a64), rtol=tol * max(n, 1)
            )
        inv = np.asarray(wrap(fnp.linalg.inv)(a))
        np.testing.assert_allclose(inv, np.linalg.inv(a64) if n else a, rtol=tol, atol=tol)
        sign, logdet = wrap(fnp.linalg.slogdet)(a)
        want_sign, want_log = np.linalg.slogdet(a64)
        np.testing.assert_array_equal(np.asarray(sign), want_sign)
        np.testing.assert_allclose(np.asarray(logdet), want_log, rtol=tol, atol=tol)


def test_solve_broadcasts_and_vmaps(x64):
    rng = np.random.default_rng(11)
    a = _well_conditioned(rng, (3, 4, 4))
    b = rng.standard_normal((2, 1, 4, 2))
    want = np.linalg.solve(a, b)
    np.testing.assert_allclose(np.asarray(fnp.linalg.solve(a, b)), want, rtol=1e-10)
    vec = rng.standard_normal((3, 4))
    got = fg.vmap(fnp.linalg.solve)(a, vec)
    want = np.stack([np.linalg.solve(a[i], vec[i]) for i in range(3)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10)
    got = fg.jit(fg.vmap(fnp.linalg.det, in_axes=2))(np.moveaxis(a, 0, 2))
    np.testing.assert_allclose(np.asarray(got), np.linalg.det(a), rtol=1e-10)


@pytest.mark.parametrize(
    "name",
    ["solve", "det", "inv", "slogdet"],
)
def test_solver_gradients(name, x64):
    rng = np.random.default_rng(12)
    a = _well_conditioned(rng, (2, 4, 4))
    b = rng.standard_normal((2, 4, 2))
    fns = {
        "solve": (lambda a, b: fnp.linalg.solve(a, b), (a, b)),
        "det": (fnp.linalg.det, (a,)),
        "inv": (fnp.linalg.inv, (a,)),
        "slogdet": (lambda a: fnp.linalg.slogdet(a)[1], (a,)),
    }
    f, args = fns[name]
    check_grads(f, args, order=1, modes=("fwd", "rev"))
    check_grads(fg.jit(f), args, order=1, modes=("fwd", "rev"))


def test_solve_second_derivative(x64):
    rng = np.random.default_rng(13)
    a = _well_conditioned(rng, (3, 3))
    b = rng.standard_normal(3)
    check_grads(fnp.linalg.solve, (a, b), order=2, modes=("fwd", "rev"))


def test_tensorsolve_and_tensorinv_match_numpy(x64):
    rng = np.random.default_rng(14)
    a = rng.standard_normal((6, 2, 3)) + 0.0
    a = (a.reshape(6, 6) + 6 * np.eye(6)).reshape(2, 3, 2, 3)
    b = rng.standard_normal((2, 3))
    np.testing.assert_allclose(
        np.asarray(fnp.linalg.tensorsolve(a, b)), np.linalg.tensorsolve(a, b), rtol=1e-10
    )
    ax = np.moveaxis(a, 0, 3)  # a tensor whose solution axes are (1, 3) ... use axes=
    np.testing.assert_allclose(
        np.asarray(fnp.linalg.tensorsolve(ax, b, axes=(0,))),
        np.linalg.tensorsolve(ax, b, axes=(0,)),
        rtol=1e-10,
    )
    np.testing.assert_allclose(
        np.asarray(fnp.linalg.tensorinv(a, 2)), np.linalg.tensorinv(a, 2), rtol=1e-10
    )
    c = a.reshape(6, 6).reshape(6, 3, 2)
    np.testing.assert_allclose(
        np.asarray(fg.jit(lambda c: fnp.linalg.tensorinv(c, 1))(c)),
        np.linalg.tensorinv(c, 1),
        rtol=1e-10,
    )
    with pytest.raises(ValueError, match="tensorinv.*ind"):
        fnp.linalg.tensorinv(a, 0)
    with pytest.raises(ValueError, match="tensorinv.*not square"):
        fnp.linalg.tensorinv(np.ones((2, 3)), 1)
    with pytest.raises(ValueError, match="tensorsolve"):
        fnp.linalg.tensorsolve(np.ones((2, 3)), np.ones(2))


@pytest.mark.parametrize("power", [-3, -1, 0, 1, 2, 5])
def test_matrix_power_matches_numpy(power, x64):
    a = _well_conditioned(np.random.default_rng(15), (2, 3, 3))
    want = np.linalg.matrix_power(a, power)
    np.testing.assert_allclose(np.asarray(fnp.linalg.matrix_power(a, power)), want, rtol=1e-9)


@pytest.mark.parametrize("ord", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norm_every_order(ord, x64):
    a = np.random.default_rng(16).standard_normal((4, 3))
    want = np.linalg.norm(a, ord)
    np.testing.assert_allclose(np.asarray(fnp.linalg.norm(a, ord)), want, rtol=1e-5)


@pytest.mark.parametrize("ord", [None, 0, 1, 2, 3.5, -1, np.inf, -np.inf])
def test_vector_norm_every_order(ord, x64):
    v = np.random.default_rng(17).standard_normal(5)
    np.testing.assert_allclose(np.asarray(fnp.linalg.norm(v, ord)), np.linalg.norm(v, ord))


# -- scipy.linalg ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (0, 0)])
def test_scipy_lu_matches_scipy(shape, x64):
    a = np.random.default_rng(18).standard_normal(shape)
    p, low, up = (np.asarray(v) for v in fsl.lu(a))
    want = sla.lu(a)
    for got, w in zip((p, low, up), want):
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-12)
    pl, up2 = fg.jit(lambda a: fsl.lu(a, permute_l=True))(a)
    np.testing.assert_allclose(np.asarray(pl), want[0] @ want[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(up2), want[2], rtol=1e-12, atol=1e-12)


def test_scipy_lu_batched(x64):
    a = np.random.default_rng(19).standard_normal((2, 3, 4))
    p, low, up = (np.asarray(v) for v in fsl.lu(a))
    np.testing.assert_allclose(p @ low @ up, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_factor_and_lu_solve_match_scipy(trans, x64):
    rng = np.random.default_rng(20)
    a = _well_conditioned(rng, (5, 5))
    b = rng.standard_normal((5, 2))
    lu_piv = fsl.lu_factor(a)
    want = sla.lu_solve(sla.lu_factor(a), b, trans=trans)
    for f in (fsl.lu_solve, fg.jit(fsl.lu_solve, static_argnames="trans")):
        x = np.asarray(f(lu_piv, b, trans=trans))
        np.testing.assert_allclose(x, want, rtol=1e-10)
        x = np.asarray(f(lu_piv, b[:, 0], trans=trans))
        np.testing.assert_allclose(x, want[:, 0], rtol=1e-10)
    batch = np.stack([a, a.T])
    got = fsl.lu_solve(fsl.lu_factor(batch), np.stack([b, b]), trans=trans)
    np.testing.assert_allclose(np.asarray(got)[0], want, rtol=1e-10)
    with pytest.raises(ValueError, match="lu_solve: trans"):
        fsl.lu_solve(lu_piv, b, trans=3)
    with pytest.raises(TypeError, match="lu_solve: the first argument"):
        fsl.lu_solve(a, b)


@pytest.mark.parametrize("assume_a", ["gen", "sym", "her", "pos"])
@pytest.mark.parametrize("lower", [False, True])
def test_scipy_solve_assume_a(assume_a, lower, x64):
    rng = np.random.default_rng(21)
    m = rng.standard_normal((5, 5))
    a = m @ m.T + 5 * np.eye(5)
    b = rng.standard_normal((5, 3))
    messy = np.tril(a) + np.triu(np.full((5, 5), 9.0), 1) if lower else a
    if not lower:
        messy = np.triu(a) + np.tril(np.full((5, 5), 9.0), -1)
    ref_a = messy if assume_a == "gen" else a
    want = np.linalg.solve(ref_a, b)
    got = fsl.solve(messy, b, lower=lower, assume_a=assume_a)
    if assume_a in ("sym", "her"):  # SciPy reads one triangle; fungrad (as JAX) the whole
        got = fsl.solve(a, b, lower=lower, assume_a=assume_a)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9)
    with pytest.raises(ValueError, match="assume_a"):
        fsl.solve(a, b, assume_a="banded")


def test_scipy_det_inv_cho_factor_block_diag(x64):
    rng = np.random.default_rng(22)
    a = _well_conditioned(rng, (4, 4))
    np.testing.assert_allclose(np.asarray(fsl.det(a)), sla.det(a), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(fsl.inv(a)), sla.inv(a), rtol=1e-10)
    spd = a @ a.T
    for lower in (False, True):
        c, low = fsl.cho_factor(spd, lower=lower)
        want = sla.cho_factor(spd, lower=lower)[0]
        tri = np.tril if lower else np.triu
        np.testing.assert_allclose(np.asarray(c), tri(want), rtol=1e-10)
        assert low is lower
    blocks = (np.ones((2, 2)), 3.0, np.arange(3.0), np.zeros((0, 2)))
    np.testing.assert_array_equal(np.asarray(fsl.block_diag(*blocks)), sla.block_diag(*blocks))


def test_expm_values_and_derivative(x64):
    rng = np.random.default_rng(23)
    for scale in (0.1, 3.0, 40.0):
        a = scale * rng.standard_normal((4, 4)) / 4
        np.testing.assert_allclose(np.asarray(fsl.expm(a)), sla.expm(a), rtol=1e-9, atol=1e-12)
    a = rng.standard_normal((3, 3))
    check_grads(fsl.expm, (a,), order=1, modes=("fwd", "rev"))
    check_grads(fg.jit(fsl.expm), (2.0 * a,), order=1, modes=("fwd", "rev"))


def _cofactors(a):
    n = a.shape[-1]
    out = np.zeros_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            out[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return out


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_det_gradient_of_singular_matrices_is_the_cofactor_matrix(n, x64):
    rng = np.random.default_rng(n)
    low_rank = rng.standard_normal((n, n - 1)) @ rng.standard_normal((n - 1, n))  # rank n - 1
    for a in (low_rank, _well_conditioned(rng, (n, n))):
        want = _cofactors(a)
        for g in (fg.grad(fnp.linalg.det), fg.jit(fg.grad(fnp.linalg.det))):
            np.testing.assert_allclose(np.asarray(g(a)), want, rtol=1e-7, atol=1e-9)
    zero_rank = np.zeros((n, n))  # rank < n - 1: a zero gradient (JAX's), not NaN
    if n > 2:
        np.testing.assert_array_equal(np.asarray(fg.grad(fnp.linalg.det)(zero_rank)), 0)


def test_det_second_derivatives(x64):
    a = _well_conditioned(np.random.default_rng(24), (2, 5, 5))
    check_grads(fnp.linalg.det, (a,), order=2, modes=("fwd", "rev"))
