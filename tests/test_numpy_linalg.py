"""fungrad.numpy.linalg (norms, matrix_power, det/slogdet/solve/inv/cholesky) against
numpy.linalg on well-conditioned random matrices."""

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from tests.helpers import assert_array

la = fnp.linalg


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-4, 5, size=shape).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


def _well_conditioned(batch, n, dtype, seed):
    """Random matrices plus a dominant multiple of a random permutation matrix: far from
    singular, yet partial pivoting has real row swaps to do."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, size=batch + (n, n))
    perm = np.eye(n)[rng.permutation(n)] if n else np.zeros((0, 0))
    return (a + (n + 1) * perm).astype(dtype)


def _spd(batch, n, dtype, seed):
    rng = np.random.default_rng(seed)
    m = rng.uniform(-1, 1, size=batch + (n, n))
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dtype)


batches = hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3)
sizes = st.integers(0, 5)


# -- norms --------------------------------------------------------------------------------------

VECTOR_ORDS = [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5, -1, -2.5]
MATRIX_ORDS = [None, "fro", 1, -1, np.inf, -np.inf]


@given(
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
    st.sampled_from(VECTOR_ORDS),
    st.booleans(),
    st.data(),
)
def test_vector_norms(shape, ord, keepdims, data):
    x = _values(shape, np.float32, len(shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    expected = np.linalg.norm(x.astype(np.float64), ord, axis, keepdims)
    assert_array(la.norm(x, ord, axis, keepdims), expected, dtype=np.float32, rtol=1e-5)
    ord_v = 2 if ord is None else ord
    assert_array(
        la.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord_v),
        expected,
        dtype=np.float32,
        rtol=1e-5,
    )


@given(
    hnp.array_shapes(min_dims=2, max_dims=4, min_side=1, max_side=4),
    st.sampled_from(MATRIX_ORDS),
    st.booleans(),
    st.data(),
)
def test_matrix_norms(shape, ord, keepdims, data):
    x = _values(shape, np.float32, len(shape) + 10)
    axis = tuple(data.draw(st.permutations(range(-len(shape), 0)))[:2])
    expected = np.linalg.norm(x.astype(np.float64), ord, axis, keepdims)
    assert_array(la.norm(x, ord, axis, keepdims), expected, dtype=np.float32, rtol=1e-5)
    expected_last = np.linalg.norm(
        x.astype(np.float64), "fro" if ord is None else ord, (-2, -1), keepdims
    )
    assert_array(
        la.matrix_norm(x, keepdims=keepdims, ord="fro" if ord is None else ord),
        expected_last,
        dtype=np.float32,
        rtol=1e-5,
    )


@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 0])
def test_norm_without_axis(ord):
    x = _values((3, 4), np.float32, 0)
    assert_array(
        la.norm(x[0], ord),
        np.linalg.norm(x[0].astype(np.float64), ord),
        dtype=np.float32,
        rtol=1e-5,
    )
    if ord in (None, 1, np.inf, -np.inf):
        assert_array(
            la.norm(x, ord), np.linalg.norm(x.astype(np.float64), ord), dtype=np.float32, rtol=1e-5
        )
    x3 = _values((2, 3, 4), np.float32, 1)  # ord=None flattens any rank
    assert_array(
        la.norm(x3, keepdims=True),
        np.linalg.norm(x3.astype(np.float64), keepdims=True),
        dtype=np.float32,
    )


def test_norm_dtypes_and_special_values(x64):
    assert_array(la.norm(np.array([3, 4], np.int32)), 5.0, dtype=np.float32)  # JAX: int32->f32
    assert_array(la.norm(np.array([3.0, 4.0])), 5.0, dtype=np.float64)
    assert_array(la.norm(np.array([1.0, np.inf])), np.inf, dtype=np.float64)
    assert_array(la.norm(np.array([1.0, np.nan]), 1), np.nan, dtype=np.float64)
    assert_array(la.norm(np.zeros((0, 3)), np.inf), 0.0, dtype=np.float64)


def test_norm_errors():
    x = np.ones((3, 3), np.float32)
    for ord in (2, -2, "nuc"):  # singular-value norms (fungrad.numpy.linalg_decomp)
        np.testing.assert_allclose(float(la.norm(x, ord)), np.linalg.norm(x, ord), atol=1e-5)
    with pytest.raises(ValueError, match="norm: invalid order 3 for a matrix norm"):
        la.norm(x, 3)
    with pytest.raises(ValueError, match="norm: invalid order 'fro' for a vector norm"):
        la.norm(x, "fro", axis=0)
    with pytest.raises(ValueError, match="norm: improper number of axes"):
        la.norm(np.ones((2, 2, 2)), 1)
    with pytest.raises(ValueError, match="norm: duplicate axes"):
        la.norm(x, None, (0, 0))
    with pytest.raises(TypeError, match="norm"):
        la.norm("x")


# -- LU-based solvers ---------------------------------------------------------------------------


@given(batches, sizes, st.integers(0, 2**16))
def test_det_slogdet(batch, n, seed):
    a = _well_conditioned(batch, n, np.float32, seed)
    a64 = a.astype(np.float64)
    assert_array(la.det(a), np.linalg.det(a64), dtype=np.float32, rtol=1e-4, atol=1e-5)
    sign, logabsdet = la.slogdet(a)
    ref = np.linalg.slogdet(a64)
    assert_array(sign, ref.sign, dtype=np.float32)
    assert_array(logabsdet, ref.logabsdet, dtype=np.float32, rtol=1e-5, atol=1e-5)


@given(batches, sizes, st.integers(0, 3), st.integers(0, 2**16))
def test_solve_and_inv(batch, n, m, seed):
    a = _well_conditioned(batch, n, np.float32, seed)
    b = _values(batch + (n, m), np.float32, seed + 1)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_array(la.solve(a, b), np.linalg.solve(a64, b64), dtype=np.float32, rtol=1e-4, atol=1e-5)
    assert_array(la.inv(a), np.linalg.inv(a64), dtype=np.float32, rtol=1e-4, atol=1e-5)
    v = _values((n,), np.float32, seed + 2)
    assert_array(
        la.solve(a, v),
        np.linalg.solve(a64, v.astype(np.float64)[..., None])[..., 0],
        dtype=np.float32,
        rtol=1e-4,
        atol=1e-5,
    )


def test_solve_broadcasts_batches():
    a = _well_conditioned((2, 1), 3, np.float32, 0)
    b = _values((4, 3, 2), np.float32, 1)
    expected = np.linalg.solve(a.astype(np.float64), b.astype(np.float64))
    assert_array(la.solve(a, b), expected, dtype=np.float32, rtol=1e-4, atol=1e-5)


def test_solvers_float64(x64):
    a = _well_conditioned((2,), 6, np.float64, 3)
    b = _values((2, 6, 2), np.float64, 4)
    assert_array(la.det(a), np.linalg.det(a), dtype=np.float64, rtol=1e-12)
    assert_array(la.solve(a, b), np.linalg.solve(a, b), dtype=np.float64, rtol=1e-10, atol=1e-12)
    assert_array(la.inv(a), np.linalg.inv(a), dtype=np.float64, rtol=1e-10, atol=1e-12)


def test_det_exact_cases():
    perm = np.eye(4, dtype=np.float32)[[2, 0, 3, 1]]
    assert_array(la.det(perm), np.linalg.det(perm), dtype=np.float32, rtol=0, atol=0)
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], np.float32)
    assert_array(la.det(singular), 0.0, dtype=np.float32, atol=0)
    sign, logabsdet = la.slogdet(singular)
    assert_array(sign, 0.0, dtype=np.float32)
    assert_array(logabsdet, -np.inf, dtype=np.float32)
    # Integer input is promoted to float (JAX); empty matrices have determinant 1.
    assert_array(la.det(np.array([[1, 2], [3, 4]], np.int32)), -2.0, dtype=np.float32)
    assert_array(la.det(np.zeros((0, 0), np.float32)), 1.0, dtype=np.float32)


def test_solver_errors():
    with pytest.raises(ValueError, match=r"det: argument must be a square matrix.*\(2, 3\)"):
        la.det(np.ones((2, 3)))
    with pytest.raises(ValueError, match="inv: argument must be a square matrix"):
        la.inv(np.ones(3))
    with pytest.raises(ValueError, match=r"solve: invalid shapes \(3, 3\) and \(2,\)"):
        la.solve(np.eye(3), np.ones(2))
    with pytest.raises(ValueError, match="solve: invalid shapes"):
        la.solve(np.eye(3)[None], np.ones((2, 3)))
    with pytest.raises(ValueError, match="slogdet: method='qr' is not supported"):
        la.slogdet(np.eye(2), method="qr")


def test_det_jaxpr_is_one_lu_primitive():
    a = _well_conditioned((), 5, np.float32, 0)
    jaxpr = fg.make_jaxpr(la.det)(a)
    text = str(jaxpr)
    assert text.count(" lu ") == 1 and "while" not in text
    assert_array(jaxpr(a)[0], np.asarray(la.det(a)), dtype=np.float32)


# -- cholesky, matrix_power ---------------------------------------------------------------------


@given(batches, sizes, st.booleans(), st.integers(0, 2**16))
def test_cholesky(batch, n, upper, seed):
    a = _spd(batch, n, np.float32, seed)
    ref = np.linalg.cholesky(a.astype(np.float64))
    ref = np.swapaxes(ref, -1, -2) if upper else ref
    assert_array(la.cholesky(a, upper=upper), ref, dtype=np.float32, rtol=1e-5, atol=1e-5)


def test_cholesky_reads_lower_triangle_and_flags_non_pd():
    a = _spd((), 4, np.float32, 0)
    garbage_upper = np.tril(a) + np.triu(np.full_like(a, 7.0), 1)
    ref = np.linalg.cholesky(a.astype(np.float64))
    assert_array(
        la.cholesky(garbage_upper, symmetrize_input=False),
        ref,
        dtype=np.float32,
        rtol=1e-5,
        atol=1e-5,
    )
    assert np.isnan(np.asarray(la.cholesky(-np.eye(3, dtype=np.float32)))).any()


@given(batches, st.integers(0, 4), st.integers(-3, 6), st.integers(0, 2**16))
def test_matrix_power(batch, n, power, seed):
    if power >= 0:
        a = _values(batch + (n, n), np.int32, seed)
        assert_array(
            la.matrix_power(a, power),
            np.linalg.matrix_power(a.astype(np.int64), power),
            dtype=np.int32,
        )
    else:
        a = _well_conditioned(batch, n, np.float32, seed)
        assert_array(
            la.matrix_power(a, power),
            np.linalg.matrix_power(a.astype(np.float64), power),
            dtype=np.float32,
            rtol=1e-4,
            atol=1e-5,
        )


def test_matrix_power_errors():
    with pytest.raises(TypeError, match="matrix_power: exponent must be an integer"):
        la.matrix_power(np.eye(2), 1.5)
    with pytest.raises(ValueError, match="matrix_power: argument must be a square matrix"):
        la.matrix_power(np.ones((2, 3)), 2)


# -- array-API re-exports -----------------------------------------------------------------------


def test_reexports():
    x = _values((2, 3, 3), np.float32, 0)
    y = _values((2, 3, 3), np.float32, 1)
    assert_array(la.matmul(x, y), np.matmul(x, y), dtype=np.float32, rtol=1e-5)
    assert_array(la.vecdot(x, y, axis=1), np.vecdot(x, y, axis=1), dtype=np.float32, rtol=1e-5)
    assert_array(
        la.tensordot(x, y.T, axes=1),
        np.tensordot(x, y.T, 1),
        dtype=np.float32,
        rtol=1e-5,
        atol=1e-5,
    )
    assert_array(la.trace(x, offset=1), np.trace(x, 1, -2, -1), dtype=np.float32, rtol=1e-5)
    assert_array(la.diagonal(x, offset=-1), np.diagonal(x, -1, -2, -1), dtype=np.float32)
    assert_array(la.matrix_transpose(x), np.swapaxes(x, -1, -2), dtype=np.float32)
    assert_array(la.outer(x[0, 0], y[0, 1]), np.outer(x[0, 0], y[0, 1]), dtype=np.float32)
    assert_array(
        la.cross(x, y, axis=1), np.cross(x, y, axis=1), dtype=np.float32, rtol=1e-5, atol=1e-6
    )
    with pytest.raises(ValueError, match="linalg.outer: input arrays must be one-dimensional"):
        la.outer(x, y)
    with pytest.raises(ValueError, match="linalg.cross: both inputs need size 3"):
        la.cross(np.ones(2), np.ones(2))
