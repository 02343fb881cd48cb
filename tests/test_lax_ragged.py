"""lax.ragged_dot / ragged_dot_general / scatter_apply against numpy loops; gradients with
check_grads, vmap against a loop, jit against eager."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.testing import check_grads

D = lax.RaggedDotDimensionNumbers
rng = np.random.default_rng(0)


def ref_ragged_dot(lhs, rhs, gs):
    out = np.zeros((lhs.shape[0], rhs.shape[2]))
    start = 0
    for g, size in enumerate(gs):
        stop = min(start + size, lhs.shape[0])
        out[start:stop] = lhs[start:stop] @ rhs[g]
        start = stop
    return out


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=4), st.integers(0, 7))
def test_ragged_dot_matches_loop(sizes, m):
    lhs = rng.standard_normal((m, 3)).astype(np.float32)
    rhs = rng.standard_normal((len(sizes), 3, 2)).astype(np.float32)
    gs = np.array(sizes, np.int32)
    np.testing.assert_allclose(
        lax.ragged_dot(lhs, rhs, gs), ref_ragged_dot(lhs, rhs, sizes), rtol=1e-5, atol=1e-5
    )


def test_ragged_dot_transforms():
    lhs, rhs = rng.standard_normal((5, 3)), rng.standard_normal((3, 3, 2))
    gs = np.array([2, 0, 3], np.int32)
    f = lambda a, b: lax.ragged_dot(a, b, gs)  # noqa: E731
    check_grads(f, (lhs, rhs), order=2, modes=("fwd", "rev"))
    np.testing.assert_allclose(fg.jit(f)(lhs, rhs), f(lhs, rhs), rtol=1e-5, atol=1e-6)
    ls = rng.standard_normal((2, 5, 3)).astype(np.float32)
    gss = np.array([[1, 1, 3], [5, 0, 0]], np.int32)
    got = fg.vmap(lambda a, g: lax.ragged_dot(a, rhs.astype(np.float32), g))(ls, gss)
    for i in range(2):
        np.testing.assert_allclose(got[i], ref_ragged_dot(ls[i], rhs, gss[i]), rtol=1e-5, atol=1e-5)


def test_ragged_dot_general_modes():
    # ragged non-contracting dim with a batch dim and per-batch group sizes
    L = rng.standard_normal((2, 5, 3))
    R = rng.standard_normal((3, 2, 3, 4))
    gs = np.array([[2, 2, 1], [1, 0, 3]], np.int32)
    got = lax.ragged_dot_general(L, R, gs, D((((2,), (2,)), ((0,), (1,))), (1,), (0,)))
    for b in range(2):
        np.testing.assert_allclose(
            got[b], ref_ragged_dot(L[b], R[:, b], gs[b]), rtol=1e-5, atol=1e-5
        )
    # ragged contracting dim: one output slice per group
    L2, R2 = rng.standard_normal((3, 6)), rng.standard_normal((6, 4))
    got = lax.ragged_dot_general(
        L2, R2, np.array([2, 3, 1], np.int32), D((((1,), (0,)), ((), ())), (1,), ())
    )
    bounds = [0, 2, 5, 6]
    for g in range(3):
        s = slice(bounds[g], bounds[g + 1])
        np.testing.assert_allclose(got[g], L2[:, s] @ R2[s], rtol=1e-5, atol=1e-5)
    # ragged batch dim: dot_general
    L3, R3 = rng.standard_normal((2, 3, 6)), rng.standard_normal((2, 6, 4))
    got = lax.ragged_dot_general(
        L3, R3, np.array([1, 1], np.int32), D((((2,), (1,)), ((0,), (0,))), (0,), ())
    )
    np.testing.assert_allclose(got, np.einsum("bmk,bkn->bmn", L3, R3), rtol=1e-5, atol=1e-5)


def test_ragged_errors():
    with pytest.raises(ValueError, match="expected lhs"):
        lax.ragged_dot(np.ones((2, 3)), np.ones((2, 4, 2)), np.array([1, 1], np.int32))
    with pytest.raises(ValueError, match="group dimension"):
        lax.ragged_dot(np.ones((2, 3)), np.ones((3, 3, 2)), np.array([1, 1], np.int32))
    with pytest.raises(TypeError, match="integer"):
        lax.ragged_dot(np.ones((2, 3)), np.ones((2, 3, 2)), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="group_offset"):
        lax.ragged_dot(
            np.ones((2, 3)),
            np.ones((2, 3, 2)),
            np.array([1, 1], np.int32),
            group_offset=np.array([1], np.int32),
        )


# -- scatter_apply ------------------------------------------------------------------------------

DN = lax.ScatterDimensionNumbers(
    update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)
)


def ref_scatter_apply(x, idx, func, clip=False):
    x = x.copy()
    for i in idx:
        if clip:
            i = min(max(i, 0), len(x) - 1)
        elif not 0 <= i < len(x):
            continue
        x[i] = func(x[i])
    return x


def test_scatter_apply_values_duplicates_and_modes():
    x = np.arange(6.0, dtype=np.float32)
    idx = [1, 3, 3, 9]
    f = lambda v: v * 2 + 1  # noqa: E731
    got = lax.scatter_apply(x, np.array(idx)[:, None], f, DN, update_shape=(4,))
    np.testing.assert_array_equal(got, ref_scatter_apply(x, idx, f))
    got = lax.scatter_apply(x, np.array(idx)[:, None], f, DN, update_shape=(4,), mode="clip")
    np.testing.assert_array_equal(got, ref_scatter_apply(x, idx, f, clip=True))
    got = lax.scatter_apply(
        x, np.array([[0], [5]]), fnp.sin, DN, update_shape=(2,), unique_indices=True
    )
    np.testing.assert_allclose(got, ref_scatter_apply(x, [0, 5], np.sin), rtol=1e-6)
    # no indices: the operand unchanged
    got = lax.scatter_apply(x, np.zeros((0, 1), np.int32), f, DN, update_shape=(0,))
    np.testing.assert_array_equal(got, x)


def test_scatter_apply_transforms():
    idx = np.array([[0], [2], [2]])

    def f(x):
        return lax.scatter_apply(x, idx, fnp.sin, DN, update_shape=(3,))

    x = np.array([0.3, 0.5, 0.7, 0.9])
    check_grads(f, (x,), order=1, modes=("fwd", "rev"))
    np.testing.assert_allclose(fg.jit(f)(x), f(x), rtol=1e-6)
    xs = rng.standard_normal((3, 4)).astype(np.float32)
    got = fg.vmap(f)(xs)
    for i in range(3):
        np.testing.assert_allclose(got[i], ref_scatter_apply(xs[i], [0, 2, 2], np.sin), rtol=1e-6)
    with pytest.raises(TypeError, match="callable"):
        lax.scatter_apply(x, idx, None, DN, update_shape=(3,))
