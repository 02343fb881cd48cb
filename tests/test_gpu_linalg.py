"""Cholesky, triangular solve and LU as GPU steps (``lowering/gpu/linalg.py``) against numpy and
scipy: the sizes a GPU user has (batches of small matrices, one larger matrix), matrices that
are not positive definite or singular, every flag of the solve, steps inside loops and
branches, jit against eager, and the dispatch count."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lowering import compile_jaxpr
from fungrad.lowering.gpu import linalg as gpu_linalg
from fungrad.lowering.gpu import linalg_columns as gpu_columns
from fungrad.lowering.steps import CholeskyStep, LuStep, TriangularSolveStep

pytestmark = pytest.mark.usefixtures("gpu")

#: one invocation per matrix up to 32, a workgroup per matrix in workgroup memory (40), in the
#: output buffer (64, 200; Cholesky's column passes at 200)
SIZES = [(1, 1), (1, 2), (1000, 4), (64, 8), (16, 32), (2, 40), (1, 64), (1, 200)]


def _spd(rng, batch, n):
    x = rng.standard_normal((batch, n, n))
    return (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(np.float32)


def _general(rng, batch, m, n=None):
    n = m if n is None else n
    return rng.standard_normal((batch, m, n)).astype(np.float32)


def _gpu(f, *args):
    return [np.asarray(o) for o in fg.tree_util.tree_leaves(fg.jit(f, backend="gpu")(*args))]


def _exe(f, *args):
    args = [fnp.asarray(a) for a in args]
    return compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "test")


def _steps(exe, kind) -> int:
    return sum(isinstance(s, kind) for s in exe.program.steps)


def _nested(steps, kind) -> int:
    """Steps of ``kind`` in ``steps`` and every loop body and branch inside them."""
    out = 0
    for s in steps:
        out += isinstance(s, kind)
        for sub in [getattr(s, "body", None), getattr(s, "cond", None)]:
            out += _nested(sub, kind) if isinstance(sub, list) else 0
        for branch in getattr(s, "branches", ()):
            out += _nested(branch, kind)
    return out


@pytest.mark.parametrize("batch,n", SIZES)
def test_cholesky_matches_numpy(batch, n):
    a = _spd(np.random.default_rng(n), batch, n)
    (got,) = _gpu(lax.linalg.cholesky, a)
    want = np.linalg.cholesky(a.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.sqrt(n))
    assert (got[:, np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] == 0).all()


@pytest.mark.parametrize("batch,n", SIZES)
def test_lu_matches_scipy(batch, n):
    rng = np.random.default_rng(100 + n)
    a = _general(rng, batch, n)
    lu, piv, perm = _gpu(lax.linalg.lu, a)
    assert piv.dtype == np.int32 and perm.dtype == np.int32
    for i in range(0, batch, max(1, batch // 16)):
        want_lu, want_piv = sla.lu_factor(a[i].astype(np.float64))
        np.testing.assert_array_equal(piv[i], want_piv)
        np.testing.assert_allclose(lu[i], want_lu, rtol=1e-4, atol=2e-5 * n)
        L = np.tril(lu[i], -1) + np.eye(n)
        np.testing.assert_allclose(L @ np.triu(lu[i]), a[i][perm[i]], atol=2e-5 * n)
    # the permutation is the pivots' swaps applied to arange
    want_perm = np.tile(np.arange(n), (batch, 1))
    for j in range(n):
        rows = np.arange(batch)
        want_perm[rows, j], want_perm[rows, piv[:, j]] = (
            want_perm[rows, piv[:, j]],
            want_perm[rows, j].copy(),
        )
    np.testing.assert_array_equal(perm, want_perm)


@pytest.mark.parametrize("batch,n", SIZES)
def test_triangular_solve_matches_scipy(batch, n):
    rng = np.random.default_rng(200 + n)
    a = np.tril(_general(rng, batch, n)) + 2 * n * np.eye(n, dtype=np.float32)
    b = _general(rng, batch, n, 3)
    (got,) = _gpu(lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True), a, b)
    for i in range(0, batch, max(1, batch // 16)):
        want = sla.solve_triangular(a[i].astype(np.float64), b[i], lower=True)
        np.testing.assert_allclose(got[i], want, rtol=1e-4, atol=1e-6)


@settings(max_examples=16, deadline=None)
@given(
    left=st.booleans(),
    lower=st.booleans(),
    trans=st.booleans(),
    unit=st.booleans(),
    m=st.integers(1, 7),
    k=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_triangular_solve_every_flag(left, lower, trans, unit, m, k, seed):
    rng = np.random.default_rng(seed)
    # off-diagonal entries ~1/m: a unit diagonal keeps the solution's growth bounded
    a = (rng.standard_normal((2, m, m)) / m + 4 * np.eye(m)).astype(np.float32)
    b = rng.standard_normal((2, m, k) if left else (2, k, m)).astype(np.float32)
    kw = dict(left_side=left, lower=lower, transpose_a=trans, unit_diagonal=unit)
    (got,) = _gpu(lambda a, b: lax.linalg.triangular_solve(a, b, **kw), a, b)
    eager = np.asarray(lax.linalg.triangular_solve(a, b, **kw))
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t[:, np.arange(m), np.arange(m)] = 1
    op = np.swapaxes(t, -1, -2) if trans else t
    x = got.astype(np.float64)
    lhs = op @ x if left else x @ op
    np.testing.assert_allclose(lhs, b, atol=1e-4)
    np.testing.assert_allclose(got, eager, rtol=1e-4, atol=1e-5)


def test_not_positive_definite_gives_a_nan_lower_triangle_only_there():
    rng = np.random.default_rng(1)
    for n in (5, 40, 70):  # one invocation, workgroup memory, the output buffer
        a = _spd(rng, 3, n)
        a[1] = -a[1]
        a[2, n - 1, n - 1] = np.nan
        (got,) = _gpu(lax.linalg.cholesky, a)
        low = np.tril(np.ones((n, n), bool))
        np.testing.assert_allclose(got[0], np.linalg.cholesky(a[0].astype(np.float64)), atol=1e-4)
        assert np.isnan(got[1][low]).all() and (got[1][~low] == 0).all()
        # a NaN pivot is not caught (OpenBLAS): its NaN spreads as on the CPU and eagerly
        eager = np.asarray(lax.linalg.cholesky(a))
        cpu = np.asarray(fg.jit(lax.linalg.cholesky)(a))
        np.testing.assert_array_equal(np.isnan(cpu), np.isnan(eager))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(eager))


def test_singular_lu_keeps_a_zero_pivot_unscaled_and_solves_give_inf_or_nan():
    a = np.float32([[[1, 2, 3], [2, 4, 6], [1, 1, 1]], [[0, 0, 0], [0, 0, 0], [0, 0, 0]]])
    lu, piv, perm = _gpu(lax.linalg.lu, a)
    for want in (lax.linalg.lu(a), fg.jit(lax.linalg.lu)(a)):  # eager, and LAPACK's getrf
        want_lu, want_piv, want_perm = (np.asarray(o) for o in want)
        np.testing.assert_array_equal(piv, want_piv)
        np.testing.assert_array_equal(perm, want_perm)
        np.testing.assert_allclose(lu, want_lu, atol=1e-6)
    assert not np.isnan(lu).any()
    (x,) = _gpu(fnp.linalg.solve, a, np.ones((2, 3, 1), np.float32))
    assert not np.isfinite(x).all()


def test_rectangular_lu():
    rng = np.random.default_rng(3)
    for m, n in [(5, 3), (3, 20), (70, 4), (4, 70), (40, 50), (90, 50), (1, 1)]:
        a = _general(rng, 2, m, n)
        lu, piv, perm = _gpu(lax.linalg.lu, a)
        e_lu, e_piv, e_perm = (np.asarray(o) for o in lax.linalg.lu(a))
        np.testing.assert_array_equal(piv, e_piv)
        np.testing.assert_array_equal(perm, e_perm)
        np.testing.assert_allclose(lu, e_lu, rtol=1e-4, atol=1e-5)


def test_empty_matrices():
    for shape in [(0, 3, 3), (2, 0, 0)]:
        a = np.zeros(shape, np.float32)
        (got,) = _gpu(lax.linalg.cholesky, a)
        assert got.shape == shape
        lu, piv, perm = _gpu(lax.linalg.lu, a)
        assert lu.shape == shape and piv.shape == shape[:2] and perm.shape == shape[:2]


@pytest.mark.parametrize("n,largest", [(6, 256), (40, 256), (6, 4)])  # invocation, workgroup,
def test_steps_inside_loops_and_branches(n, largest, monkeypatch):  # column passes per matrix
    monkeypatch.setattr(gpu_linalg, "WORKGROUP_MAX", largest)
    monkeypatch.setattr(gpu_linalg, "CHOLESKY_WORKGROUP_MAX", largest)
    rng = np.random.default_rng(4)
    a = _spd(rng, 2, n)
    b = rng.standard_normal((2, n, 2)).astype(np.float32)

    def f(a, b, pick):
        def body(i, x):
            return lax.linalg.triangular_solve(
                lax.linalg.cholesky(a), x, left_side=True, lower=True
            )

        x = lax.fori_loop(0, 3, body, b)
        lu = lax.cond(pick, lambda a: lax.linalg.lu(a)[0], lambda a: a * 2, a)
        return x, lu

    for pick in (True, False):
        got = _gpu(f, a, b, pick)
        want = [np.asarray(o) for o in f(a, b, pick)]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    exe = _exe(f, a, b, True)
    steps = exe.program.steps
    assert _nested(steps, TriangularSolveStep) == _nested(steps, LuStep) == 1


def test_batched_small_matrices_take_one_dispatch_per_op():
    rng = np.random.default_rng(5)
    a = _spd(rng, 1000, 4)
    exe = _exe(lax.linalg.cholesky, a)
    assert _steps(exe, CholeskyStep) == 1 and exe.num_dispatches <= 2
    exe = _exe(lax.linalg.lu, a)
    assert _steps(exe, LuStep) == 1 and exe.num_dispatches == 1
    exe = _exe(lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True), a, a)
    assert _steps(exe, TriangularSolveStep) == 1 and exe.num_dispatches == 1


@pytest.fixture
def columns(monkeypatch):
    """Small matrices through the passes for large ones (``linalg_columns.py``)."""
    monkeypatch.setattr(gpu_linalg, "WORKGROUP_MAX", 4)
    monkeypatch.setattr(gpu_linalg, "CHOLESKY_WORKGROUP_MAX", 4)


@pytest.mark.parametrize("batch,n", [(3, 5), (2, 17), (1, 40)])
def test_column_passes_match_the_references(columns, batch, n):
    rng = np.random.default_rng(7 + n)
    a = _spd(rng, batch, n)
    a[0] = -a[0]  # not positive definite: a NaN lower triangle, zeros above
    exe = _exe(lax.linalg.cholesky, a)
    assert _steps(exe, CholeskyStep) == 1  # a column each, an update per block of 32, 3 more
    assert exe.num_dispatches <= n + n // 32 + 3
    (got,) = [np.asarray(o) for o in exe.call([fnp.asarray(a)])]
    low = np.tril(np.ones((n, n), bool))
    assert np.isnan(got[0][low]).all() and (got[0][~low] == 0).all()
    want = np.linalg.cholesky(a[1:].astype(np.float64))
    np.testing.assert_allclose(got[1:], want, rtol=2e-5, atol=2e-5 * np.sqrt(n))
    for shape in [(n, n), (n + 3, n), (n, n + 2)]:
        g = _general(rng, batch, *shape)
        got = _gpu(lax.linalg.lu, g)
        for x, w in zip(got, (np.asarray(o) for o in lax.linalg.lu(g))):
            np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-5)


@settings(max_examples=12, deadline=None)
@given(
    left=st.booleans(),
    lower=st.booleans(),
    trans=st.booleans(),
    unit=st.booleans(),
    m=st.integers(5, 40),
    seed=st.integers(0, 2**16),
)
def test_column_passes_solve_every_flag(left, lower, trans, unit, m, seed):
    old = gpu_linalg.WORKGROUP_MAX
    gpu_linalg.WORKGROUP_MAX = 4
    try:
        test_triangular_solve_every_flag.hypothesis.inner_test(
            left=left, lower=lower, trans=trans, unit=unit, m=m, k=2, seed=seed
        )
    finally:
        gpu_linalg.WORKGROUP_MAX = old


def test_large_matrices_take_a_few_dispatches_per_column():
    rng = np.random.default_rng(8)
    n = 300
    a = _spd(rng, 1, n)
    exe = _exe(lax.linalg.cholesky, a)
    assert _steps(exe, CholeskyStep) == 1  # a column each, an update per block of 32, 3 more
    assert exe.num_dispatches <= n + n // 32 + 3
    L = np.asarray(exe.call([fnp.asarray(a)])[0])
    want = np.linalg.cholesky(a.astype(np.float64))
    np.testing.assert_allclose(L, want, rtol=1e-4, atol=1e-4)
    b = _general(rng, 1, n, 2)
    solve = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True)  # noqa: E731
    exe = _exe(solve, L, b)
    assert exe.num_dispatches == 1 + -(-n // gpu_columns.SOLVE_BLOCK)
    (x,) = [np.asarray(o) for o in exe.call([fnp.asarray(L), fnp.asarray(b)])]
    np.testing.assert_allclose(np.tril(L[0]).astype(np.float64) @ x[0], b[0], atol=1e-3)
    g = _general(rng, 1, n)
    exe = _exe(lax.linalg.lu, g)
    assert exe.num_dispatches == 2 * n  # one copy, then a pivot and an update per column
    lu, piv, perm = [np.asarray(o) for o in exe.call([fnp.asarray(g)])]
    want_lu, want_piv = sla.lu_factor(g[0].astype(np.float64))
    np.testing.assert_array_equal(piv[0], want_piv)
    np.testing.assert_allclose(lu[0], want_lu, rtol=1e-3, atol=1e-3)


def test_float64_hits_the_backend_error(x64):
    with pytest.raises(TypeError, match="float64.*float32"):
        fg.jit(lax.linalg.cholesky, backend="gpu")(np.eye(3))
