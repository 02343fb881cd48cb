"""The ``cholesky`` and ``triangular_solve`` primitives (fungrad/lax/linalg_primitives.py):
values against numpy/scipy, jit (LAPACK steps on the CPU) against eager, vmap against a loop,
derivatives against finite differences (``check_grads``), NaN/inf for singular input, errors,
and a program whose size does not grow with n."""

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
from fungrad.lax.linalg_primitives import cholesky_p, triangular_solve_p
from fungrad.lowering import fusion
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.lowering.gpu.policy import GpuPolicy
from fungrad.lowering.steps import CholeskyStep
from fungrad.scipy import linalg as fsl
from fungrad.testing import check_grads


def _spd(rng, shape, dtype=np.float64):
    n = shape[-1]
    m = rng.standard_normal(shape)
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dtype)


def _lower(rng, shape, dtype=np.float64):
    n = shape[-1]
    t = np.tril(rng.uniform(-0.5, 0.5, shape)) + 2 * np.eye(n)
    return t.astype(dtype)


# -- cholesky ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 7, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_matches_numpy_eager_and_jit(n, dtype, x64):
    a = _spd(np.random.default_rng(n), (2, 3, n, n), dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    want = np.linalg.cholesky(a) if n else a
    for f in (fnp.linalg.cholesky, fg.jit(fnp.linalg.cholesky)):
        got = np.asarray(f(a))
        assert got.dtype == dtype and got.shape == a.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(n, 1))
        np.testing.assert_allclose(got @ np.swapaxes(got, -1, -2), a, rtol=tol, atol=tol * n)
        assert not np.triu(got, 1).any()


def test_cholesky_reads_lower_triangle_and_upper_option():
    a = _spd(np.random.default_rng(1), (5, 5))
    junk = np.tril(a) + np.triu(np.full((5, 5), 7.0), 1)
    want = np.linalg.cholesky(a)
    for f in (lambda x: fnp.linalg.cholesky(x, symmetrize_input=False), lax.linalg.cholesky):
        arg = junk if f is not lax.linalg.cholesky else a
        np.testing.assert_allclose(np.asarray(f(arg)), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(fg.jit(f)(arg)), want, rtol=1e-5, atol=1e-5)
    up = fsl.cholesky(a)  # scipy's default: upper
    np.testing.assert_allclose(np.asarray(up), want.T, rtol=1e-5, atol=1e-5)


def test_cholesky_not_positive_definite_gives_nan_triangle():
    rng = np.random.default_rng(2)
    a = _spd(rng, (3, 4, 4), np.float32)
    a[1] = -a[1]
    low = np.tril(np.ones((4, 4), bool))
    for f in (fnp.linalg.cholesky, fg.jit(fnp.linalg.cholesky)):
        got = np.asarray(f(a))
        assert np.isnan(got[1][low]).all() and (got[1][~low] == 0).all()  # JAX's result
        np.testing.assert_allclose(got[[0, 2]], np.linalg.cholesky(a[[0, 2]]), rtol=1e-5)


def test_cholesky_vmap_matches_loop():
    a = _spd(np.random.default_rng(3), (4, 5, 5), np.float32)
    moved = np.moveaxis(a, 0, 2)  # batch along the last axis
    want = np.stack([np.linalg.cholesky(a[i]) for i in range(4)])
    for f in (fg.vmap(fnp.linalg.cholesky, in_axes=2), fg.jit(fg.vmap(fnp.linalg.cholesky, 2))):
        np.testing.assert_allclose(np.asarray(f(moved)), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_cholesky_gradients(n, x64):
    a = _spd(np.random.default_rng(n + 10), (2, n, n))
    f = fnp.linalg.cholesky  # symmetrizes its input: derivatives in every direction agree
    check_grads(f, (a,), order=1, modes=("fwd", "rev"))
    check_grads(fg.jit(f), (a,), order=1, modes=("fwd", "rev"))


def test_cholesky_program_does_not_grow_with_n():
    def loss(x):
        return fnp.sum(fnp.linalg.cholesky(x) ** 2)

    sizes = [
        len(fg.make_jaxpr(fg.grad(loss))(_spd(np.random.default_rng(n), (n, n))).eqns)
        for n in (2, 9, 40)
    ]
    assert sizes[0] == sizes[1] == sizes[2]


def _plan(f, args, policy):
    return fusion.plan(passes.optimize(fg.make_jaxpr(f)(*args)), policy=policy)


def test_cpu_plan_has_one_lapack_step_gpu_plan_one_step():
    a = _spd(np.random.default_rng(4), (64, 64), np.float32)
    prog = _plan(fnp.linalg.cholesky, (a,), CpuPolicy())
    if CpuPolicy().linalg_steps:
        assert sum(isinstance(s, CholeskyStep) for s in prog.steps) == 1
    gprog = _plan(fnp.linalg.cholesky, (a,), GpuPolicy())
    assert sum(isinstance(s, CholeskyStep) for s in gprog.steps) == 1


def test_cholesky_errors():
    with pytest.raises(TypeError, match="cholesky.*int32"):
        cholesky_p.bind(fnp.zeros((3, 3), np.int32))
    with pytest.raises(ValueError, match=r"cholesky.*\(2, 3\)"):
        cholesky_p.bind(fnp.zeros((2, 3)))
    with pytest.raises(ValueError, match="cholesky"):
        fnp.linalg.cholesky(fnp.zeros((3,)))


# -- triangular_solve --------------------------------------------------------------------------

_FLAGS = [
    dict(left_side=ls, lower=lo, transpose_a=tr, unit_diagonal=ud)
    for ls in (True, False)
    for lo in (True, False)
    for tr in (True, False)
    for ud in (False, True)
]


def _reference(a, b, left_side, lower, transpose_a, unit_diagonal):
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        t = t - np.diag(np.diag(t)) + np.eye(t.shape[-1])
    op = t.T if transpose_a else t
    return np.linalg.solve(op, b) if left_side else np.linalg.solve(op.T, b.T).T


@pytest.mark.parametrize("flags", _FLAGS, ids=lambda f: "-".join(k for k, v in f.items() if v))
def test_triangular_solve_values_and_jit(flags):
    rng = np.random.default_rng(5)
    a = rng.uniform(-0.5, 0.5, (6, 6)) + 2 * np.eye(6)  # both triangles hold values
    a = a.astype(np.float32)
    b = rng.standard_normal((6, 3) if flags["left_side"] else (3, 6)).astype(np.float32)
    want = _reference(a.astype(np.float64), b.astype(np.float64), **flags)

    def f(a, b):
        return lax.linalg.triangular_solve(a, b, **flags)

    np.testing.assert_allclose(np.asarray(f(a, b)), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(a, b)), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("flags", _FLAGS[::3], ids=lambda f: "-".join(k for k, v in f.items() if v))
def test_triangular_solve_gradients(flags, x64):
    rng = np.random.default_rng(6)
    a = _lower(rng, (2, 4, 4))
    a = a if flags["lower"] else np.swapaxes(a, -1, -2).copy()
    b = rng.standard_normal((2, 4, 3) if flags["left_side"] else (2, 3, 4))

    def f(a, b):
        return lax.linalg.triangular_solve(a, b, **flags)

    check_grads(f, (a, b), order=1, modes=("fwd", "rev"))
    check_grads(fg.jit(f), (a, b), order=1, modes=("fwd", "rev"))


def test_triangular_solve_vmap_matches_loop():
    rng = np.random.default_rng(7)
    a = _lower(rng, (5, 5), np.float32)
    bs = rng.standard_normal((4, 5, 2)).astype(np.float32)

    def f(a, b):
        return lax.linalg.triangular_solve(a, b, left_side=True, lower=True)

    want = np.stack([np.asarray(f(a, bs[i])) for i in range(4)])
    got = fg.vmap(f, in_axes=(None, 0))(a, bs)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    got = fg.jit(fg.vmap(f, in_axes=(None, 2)))(a, np.moveaxis(bs, 0, 2))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_triangular_solve_zero_pivot_gives_inf_or_nan():
    a = np.tril(np.ones((3, 3), np.float32))
    a[1, 1] = 0
    b = np.ones((3, 1), np.float32)

    def f(a, b):
        return lax.linalg.triangular_solve(a, b, left_side=True, lower=True)

    for g in (f, fg.jit(f)):
        assert not np.isfinite(np.asarray(g(a, b))[1:]).all()


@settings(max_examples=25, deadline=None)
@given(
    batch=st.sampled_from([(), (0,), (2,), (2, 1)]),
    n=st.integers(0, 6),
    k=st.integers(0, 3),
    lower=st.booleans(),
    trans=st.sampled_from([0, 1]),
)
def test_scipy_solve_triangular_matches_scipy(batch, n, k, lower, trans):
    rng = np.random.default_rng(n * 7 + k)
    a = _lower(rng, batch + (n, n))
    a = a if lower else np.swapaxes(a, -1, -2)
    b = rng.standard_normal(batch + (n, k))
    got = np.asarray(fsl.solve_triangular(a, b, trans=trans, lower=lower))
    want = np.zeros(batch + (n, k))
    for idx in np.ndindex(*batch):
        if n:
            want[idx] = sla.solve_triangular(a[idx], b[idx], trans=trans, lower=lower)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_cho_solve_jit():
    rng = np.random.default_rng(8)
    a = _spd(rng, (7, 7), np.float32)
    b = rng.standard_normal((7, 2)).astype(np.float32)
    for lower in (True, False):
        c = fsl.cho_factor(a, lower=lower)
        want = np.linalg.solve(a.astype(np.float64), b)
        got = fg.jit(lambda c, b, lower=lower: fsl.cho_solve((c, lower), b))(c[0], b)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


def test_triangular_solve_errors():
    a, b = fnp.zeros((3, 3)), fnp.zeros((3, 2))
    kw = dict(left_side=True, lower=True, transpose_a=False, conjugate_a=False, unit_diagonal=False)
    with pytest.raises(ValueError, match=r"triangular_solve.*\(2, 3\)"):
        triangular_solve_p.bind(a, fnp.zeros((2, 3)), **kw)
    with pytest.raises(TypeError, match="triangular_solve.*one dtype"):
        triangular_solve_p.bind(a, fnp.zeros((3, 2), np.int32), **kw)
    with pytest.raises(ValueError, match="triangular_solve.*square"):
        triangular_solve_p.bind(fnp.zeros((3, 2)), b, **kw)


def test_gpu_runs_the_cholesky_and_solve_steps(gpu):
    rng = np.random.default_rng(9)
    a = _spd(rng, (2, 6, 6), np.float32)
    b = rng.standard_normal((2, 6, 3)).astype(np.float32)
    L = np.linalg.cholesky(a)
    got = fg.jit(fnp.linalg.cholesky, backend="gpu")(a)
    np.testing.assert_allclose(np.asarray(got), L, rtol=1e-5, atol=1e-5)
    bad = fg.jit(fnp.linalg.cholesky, backend="gpu")(-a)
    low = np.tril(np.ones((6, 6), bool))
    assert np.isnan(np.asarray(bad)[:, low]).all() and (np.asarray(bad)[:, ~low] == 0).all()
    got = fg.jit(lambda c, b: fsl.solve_triangular(c, b, trans=1, lower=True), backend="gpu")(L, b)
    want = np.linalg.solve(np.swapaxes(L, -1, -2).astype(np.float64), b)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)
