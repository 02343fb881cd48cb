"""The lax functions added for JAX programs: reduce_precision, associative_scan, the conv
shape helpers and conv_general_dilated_patches, split/stack/unstack/tile/broadcast_shapes,
approx_max_k/approx_min_k, mulhi, index_take, scatter_sub and the small utilities.

Oracles: numpy (float16 casts, cumulative ufuncs, slicing, int64 products), Python loops for
vmap and for non-commutative scans, the actual convolution output shapes, finite differences
(check_grads), and eager evaluation for jit.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lax.indexing import ScatterDimensionNumbers
from fungrad.testing import check_grads
from tests.helpers import assert_array

F32 = np.float32


# -- reduce_precision -----------------------------------------------------------------------------


def _as_float16_normals(x):
    """XLA's (5, 10) rounding: a float16 cast, but results below float16's smallest normal
    become signed zeros (the reduced format has no subnormals)."""
    with np.errstate(over="ignore"):
        y = x.astype(np.float16).astype(np.float32)
    tiny = np.float32(2.0**-14)
    return np.where(np.abs(y) < tiny, np.copysign(np.float32(0), x), y)


finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite_f32, min_size=0, max_size=12))
def test_reduce_precision_is_float16_rounding(values):
    x = np.array(values, F32)
    got = np.asarray(lax.reduce_precision(x, 5, 10))
    np.testing.assert_array_equal(got.view(np.uint32), _as_float16_normals(x).view(np.uint32))


def test_reduce_precision_special_values_and_bfloat16():
    x = np.array(
        [
            np.nan,
            -np.nan,
            np.inf,
            -np.inf,
            0.0,
            -0.0,
            65504,
            65520,
            1e-8,
            -1e-8,
            1 / 3,
            1 + 2**-8,
            1 + 3 * 2**-8,
        ],
        F32,
    )
    got = np.asarray(lax.reduce_precision(x, 5, 10))
    assert np.isnan(got[:2]).all()
    np.testing.assert_array_equal(got[2:], _as_float16_normals(x[2:]))
    assert np.signbit(got[[5, 9]]).all()
    # bfloat16 (8, 7): round to nearest, ties to even, in the mantissa only
    bf = np.asarray(lax.reduce_precision(x[10:], 8, 7))
    np.testing.assert_array_equal(bf, np.array([0.333984375, 1.0, 1 + 2**-6], F32))
    # as many bits as the dtype has: the identity; a 0-d input keeps its shape
    np.testing.assert_array_equal(lax.reduce_precision(x, 8, 23), x)
    assert lax.reduce_precision(F32(1 / 3), 8, 7).shape == ()
    # exponent_bits=1 leaves no finite normal numbers: everything over/underflows
    one = np.asarray(lax.reduce_precision(np.array([0.5, 1.0, 2.0, -3.0], F32), 1, 4))
    assert np.isinf(one[2:]).all() and (one[:2] == 0).all()


def test_reduce_precision_float64(x64):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200)
    got = np.asarray(lax.reduce_precision(x, 8, 23))
    ref = x.astype(F32).astype(np.float64)
    ref = np.where(np.abs(ref) < 2.0**-126, 0.0, ref)
    np.testing.assert_array_equal(got, ref)
    assert got.dtype == np.float64


def test_reduce_precision_derivatives_apply_it_to_the_tangent():
    x = np.array([0.3, -1.7, 2.5], F32)
    t = np.array([1 / 3, 0.1, -7.7], F32)
    out, tangent = fg.jvp(lambda v: lax.reduce_precision(v, 5, 10), (x,), (t,))
    np.testing.assert_array_equal(out, _as_float16_normals(x))
    np.testing.assert_array_equal(tangent, _as_float16_normals(t))
    _, vjp = fg.vjp(lambda v: lax.reduce_precision(v, 5, 10), x)
    np.testing.assert_array_equal(vjp(t)[0], _as_float16_normals(t))


def test_reduce_precision_check_grads_where_it_is_the_identity(x64):
    x = np.array([0.3, -1.7, 2.5])
    check_grads(lambda v: fnp.sin(lax.reduce_precision(v, 11, 52)), (x,), order=2)


def test_reduce_precision_vmap_jit_and_errors():
    x = np.random.default_rng(1).standard_normal((4, 5)).astype(F32) * 1000
    f = lambda v: lax.reduce_precision(v, 4, 3)  # noqa: E731
    loop = np.stack([np.asarray(f(r)) for r in x])
    np.testing.assert_array_equal(fg.vmap(f)(x), loop)
    np.testing.assert_array_equal(fg.jit(f)(x), f(x))
    with pytest.raises(TypeError, match="reduce_precision: operand must be a floating"):
        lax.reduce_precision(np.arange(3), 5, 10)
    with pytest.raises(ValueError, match="exponent_bits >= 1"):
        lax.reduce_precision(x, 0, 10)
    with pytest.raises(TypeError, match="must be integers"):
        lax.reduce_precision(x, 5.5, 10)


# -- associative_scan -----------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 19), st.booleans())
def test_associative_scan_matches_cumulative_ufuncs(n, reverse):
    x = np.random.default_rng(n).standard_normal((n, 3)).astype(F32)
    flip = (lambda a: a[::-1]) if reverse else (lambda a: a)
    got = lax.associative_scan(lax.add, x, reverse=reverse)
    assert_array(got, flip(np.cumsum(flip(x), axis=0)), rtol=1e-5, atol=1e-5)
    got = lax.associative_scan(lax.max, x, reverse=reverse)
    assert_array(got, flip(np.maximum.accumulate(flip(x), axis=0)))


def _affine_compose(p, q):
    # the map x -> a1 x + b1 followed by x -> a2 x + b2: associative, not commutative
    (a1, b1), (a2, b2) = p, q
    return a1 * a2, a2 * b1 + b2


def test_associative_scan_pytrees_noncommutative_order_and_axis():
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 1.5, (2, 9)).astype(F32)
    b = rng.standard_normal((2, 9)).astype(F32)
    got_a, got_b = lax.associative_scan(_affine_compose, (a, b), axis=1)
    ref_a, ref_b = a.copy(), b.copy()
    for i in range(1, 9):
        ref_a[:, i], ref_b[:, i] = _affine_compose(
            (ref_a[:, i - 1], ref_b[:, i - 1]), (a[:, i], b[:, i])
        )
    assert_array(got_a, ref_a, rtol=1e-5)
    assert_array(got_b, ref_b, rtol=1e-5, atol=1e-5)
    # reverse (as JAX): scan the flipped sequence with fn unchanged, flip back
    rev_a, rev_b = lax.associative_scan(_affine_compose, (a, b), reverse=True, axis=-1)
    fa, fb = lax.associative_scan(_affine_compose, (a[:, ::-1], b[:, ::-1]), axis=1)
    assert_array(rev_a, np.asarray(fa)[:, ::-1])
    assert_array(rev_b, np.asarray(fb)[:, ::-1])
    # matrices: out[i] = m0 @ m1 @ ... @ mi
    m = rng.standard_normal((6, 2, 2)).astype(F32)
    ref = [m[0]]
    for i in range(1, 6):
        ref.append(ref[-1] @ m[i])
    assert_array(lax.associative_scan(fnp.matmul, m), np.stack(ref), rtol=1e-4, atol=1e-5)


def test_associative_scan_transforms():
    x = np.random.default_rng(4).standard_normal((3, 7))
    f = lambda v: lax.associative_scan(lax.mul, v, axis=1)  # noqa: E731
    check_grads(f, (x,), order=1)
    loop = np.stack([np.asarray(lax.associative_scan(lax.mul, r)) for r in x.astype(F32)])
    assert_array(fg.vmap(lambda r: lax.associative_scan(lax.mul, r))(x.astype(F32)), loop)
    assert_array(fg.jit(f)(x.astype(F32)), f(x.astype(F32)), rtol=1e-6)


def test_associative_scan_errors():
    with pytest.raises(ValueError, match="equal lengths along axis 0"):
        lax.associative_scan(lax.add, (np.ones(3), np.ones(4)))
    with pytest.raises(ValueError, match="0-d"):
        lax.associative_scan(lax.add, np.ones(()))
    with pytest.raises(ValueError, match="structure of elems"):
        lax.associative_scan(lambda a, b: (a, b), np.ones(4))
    with pytest.raises(TypeError, match="fn must be callable"):
        lax.associative_scan(3, np.ones(4))


# -- convolution helpers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strides, padding", [((1, 2), "SAME"), ((2, 1), "VALID"), ((1, 2), [(1, 1), (0, 2)])]
)
def test_conv_shape_tuples_match_the_convolutions(strides, padding):
    dn = ("NHWC", "HWIO", "NHWC")
    lhs, rhs = np.ones((2, 10, 12, 3), F32), np.ones((3, 5, 3, 4), F32)
    out = lax.conv_general_dilated(lhs, rhs, strides, padding, dimension_numbers=dn)
    assert lax.conv_general_shape_tuple(lhs.shape, rhs.shape, strides, padding, dn) == out.shape
    t = lax.conv_transpose(lhs, rhs, strides, padding, dimension_numbers=dn)
    assert lax.conv_transpose_shape_tuple(lhs.shape, rhs.shape, strides, padding, dn) == t.shape
    nchw = np.ones((4, 3, 10, 12), F32)
    oihw = np.ones((6, 3, 3, 5), F32)
    pads = (
        lax.padtype_to_pads(nchw.shape[2:], oihw.shape[2:], strides, padding)
        if isinstance(padding, str)
        else padding
    )
    out = lax.conv_general_dilated(nchw, oihw, strides, pads)
    assert lax.conv_shape_tuple(nchw.shape, oihw.shape, strides, pads) == out.shape
    out = lax.conv_general_dilated(
        nchw, np.ones((6, 3, 3, 5), F32), strides, pads, batch_group_count=2
    )
    assert (
        lax.conv_shape_tuple(nchw.shape, oihw.shape, strides, pads, batch_group_count=2)
        == out.shape
    )


def test_reduce_window_shape_tuple_matches_reduce_window():
    x = np.ones((5, 7), F32)
    for base, wdil in [(None, None), ((2, 1), (1, 2))]:
        out = lax.reduce_window(
            x,
            0.0,
            lax.add,
            (2, 3),
            (1, 2),
            [(0, 0), (1, 1)],
            base_dilation=base,
            window_dilation=wdil,
        )
        assert (
            lax.reduce_window_shape_tuple(x.shape, (2, 3), (1, 2), [(0, 0), (1, 1)], base, wdil)
            == out.shape
        )
    assert lax.conv_shape_tuple((1, 1, 4, 4), (1, 1, 2, 2), (1, 1), "SAME") == (1, 1, 4, 4)


def _patches_reference(x, fh, fw):
    """im2col by loops: NCHW input, stride 1, VALID; features ordered (c, i, j)."""
    n, c, h, w = x.shape
    out = np.zeros((n, c * fh * fw, h - fh + 1, w - fw + 1), x.dtype)
    for ci in range(c):
        for i in range(fh):
            for j in range(fw):
                out[:, ci * fh * fw + i * fw + j] = x[:, ci, i : i + h - fh + 1, j : j + w - fw + 1]
    return out


def test_conv_general_dilated_patches():
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 6)).astype(F32)
    got = lax.conv_general_dilated_patches(x, (2, 3), (1, 1), "VALID")
    assert_array(got, _patches_reference(x, 2, 3))
    nhwc = lax.conv_general_dilated_patches(
        np.moveaxis(x, 1, -1), (2, 3), (1, 1), "VALID", dimension_numbers=("NHWC", "OIHW", "NHWC")
    )
    assert_array(nhwc, np.moveaxis(_patches_reference(x, 2, 3), 1, -1))
    assert (
        lax.conv_general_dilated_patches(x.astype(np.int32), (2, 2), (1, 1), "SAME").dtype
        == np.int32
    )
    xd = x.astype(np.float64)
    check_grads(
        lambda v: lax.conv_general_dilated_patches(v, (2, 2), (2, 1), "SAME"),
        (xd[:1, :2],),
        order=1,
    )
    f = lambda v: lax.conv_general_dilated_patches(v, (3, 2), (1, 2), "SAME")  # noqa: E731
    assert_array(fg.jit(f)(x), f(x))


def test_conv_general_dilated_local_is_a_convolution_per_position(x64):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 5, 6)).astype(F32)
    w = rng.standard_normal((4, 3 * 2 * 3, 4, 4)).astype(F32)  # O, C*window, out positions
    got = lax.conv_general_dilated_local(x, w, (1, 1), "VALID", (2, 3))
    patches = _patches_reference(x, 2, 3)  # (N, C*6, 4, 4)
    ref = np.einsum("nipq,oipq->nopq", patches, w)
    assert_array(got, ref, rtol=1e-5, atol=1e-5)
    # other layouts: the same numbers, transposed
    nhwc = lax.conv_general_dilated_local(
        np.moveaxis(x, 1, -1),
        np.moveaxis(w, (0, 1), (-1, -2)),
        (1, 1),
        "VALID",
        (2, 3),
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )
    assert_array(nhwc, np.moveaxis(ref, 1, -1), rtol=1e-5, atol=1e-5)
    f = lambda a, b: lax.conv_general_dilated_local(a, b, (2, 1), "SAME", (2, 2))  # noqa: E731
    xs, ws = x[:1, :2].astype(np.float64), rng.standard_normal((3, 8, 3, 6))
    check_grads(f, (xs, ws), order=1)
    assert_array(
        fg.jit(f)(xs.astype(F32), ws.astype(F32)),
        f(xs.astype(F32), ws.astype(F32)),
        rtol=1e-5,
        atol=1e-6,
    )
    with pytest.raises(TypeError, match="input features"):
        lax.conv_general_dilated_local(x, w[:, :5], (1, 1), "VALID", (2, 3))


# -- split / stack / unstack / tile / broadcast_shapes -----------------------------------------


def test_stacking_functions_match_numpy():
    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    parts = lax.split(x, (1, 3), axis=2)
    for p, r in zip(parts, np.split(x, [1], axis=2)):
        assert_array(p, r)
    assert [p.shape for p in lax.split(x, (0, 2), axis=0)] == [(0, 3, 4), (2, 3, 4)]
    assert_array(lax.stack([x, x + 1], axis=1), np.stack([x, x + 1], axis=1))
    for got, ref in zip(lax.unstack(x, axis=-1), np.moveaxis(x, -1, 0)):
        assert_array(got, ref)
    assert_array(lax.tile(x, (2, 1, 3)), np.tile(x, (2, 1, 3)))
    assert_array(lax.tile(x, (0, 1, 1)), np.tile(x, (0, 1, 1)))
    assert lax.broadcast_shapes((2, 1, 3), (4, 1), ()) == np.broadcast_shapes((2, 1, 3), (4, 1))
    check_grads(
        lambda v: lax.tile(lax.stack(lax.split(v, (2, 2), 1), 0), (1, 2, 1)),
        (x.astype(np.float64)[0],),
        order=1,
    )
    with pytest.raises(ValueError, match="add up to the length 4"):
        lax.split(x, (1, 2), axis=2)
    with pytest.raises(TypeError, match="reps length must be equal"):
        lax.tile(x, (2,))
    with pytest.raises(ValueError, match="incompatible shapes"):
        lax.broadcast_shapes((2, 3), (4, 3))
    with pytest.raises(ValueError, match="same shape"):
        lax.stack([np.ones(2), np.ones(3)])


# -- approx_max_k / approx_min_k ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32])
def test_approx_top_k_is_exact_with_jax_tie_order(dtype):
    x = np.array([[3, 1, 4, 1, 5, 9, 2, 6], [2, 7, 1, 8, 2, 8, 1, 8]], dtype)
    vals, idx = lax.approx_max_k(x, 3)
    order = np.argsort(-x.astype(np.int64), axis=1, kind="stable")[:, :3]
    assert_array(idx, order)
    assert_array(vals, np.take_along_axis(x, order, 1), dtype=dtype)
    vals, idx = lax.approx_min_k(x, 2)
    order = np.argsort(x, axis=1, kind="stable")[:, :2]
    assert_array(idx, order)
    assert_array(vals, np.take_along_axis(x, order, 1), dtype=dtype)
    vals, idx = lax.approx_max_k(x, 1, reduction_dimension=0)
    assert_array(idx, np.argmax(x, axis=0)[None])
    with pytest.raises(ValueError, match="k=9"):
        lax.approx_max_k(x, 9)


def test_approx_max_k_vmap_grad_jit():
    x = np.random.default_rng(6).standard_normal((4, 6))
    f = lambda v: lax.approx_max_k(v, 2)[0]  # noqa: E731
    loop = np.stack([np.asarray(f(r)) for r in x])
    assert_array(fg.vmap(f)(x), loop)
    check_grads(lambda v: lax.approx_min_k(v, 2)[0], (x,), order=1)
    assert_array(fg.jit(f)(x.astype(F32)), f(x.astype(F32)))


# -- mulhi, index_take, scatter_sub and the utilities ---------------------------------------------


@pytest.mark.parametrize(
    "dtype, wide",
    [(np.int32, np.int64), (np.uint32, np.uint64), (np.int8, np.int32), (np.uint16, np.uint32)],
)
def test_mulhi_is_the_high_half_of_the_wide_product(dtype, wide):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    a = rng.integers(info.min, info.max, 300, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, 300, endpoint=True).astype(dtype)
    a[:4] = [info.min, info.max, info.max, 0]
    b[:4] = [info.min, info.max, info.min, info.max]
    bits = 8 * np.dtype(dtype).itemsize
    ref = ((a.astype(wide) * b.astype(wide)) >> bits).astype(dtype)
    assert_array(lax.mulhi(a, b), ref, dtype=dtype)
    assert_array(fg.jit(lax.mulhi)(a, b), ref, dtype=dtype)
    assert_array(lax.mulhi(a[5], b), ((a[5].astype(wide) * b.astype(wide)) >> bits).astype(dtype))
    with pytest.raises(TypeError, match="mulhi: operands must be integers"):
        lax.mulhi(np.ones(2, F32), np.ones(2, F32))


def test_index_take_and_scatter_sub():
    src = np.arange(24, dtype=F32).reshape(2, 3, 4)
    i0, i2 = np.array([[1, 0], [1, 1]]), np.array([[3, 0], [2, 2]])
    assert_array(lax.index_take(src, (i0, i2), (0, 2)), np.moveaxis(src, 1, -1)[i0, i2])
    assert_array(
        lax.index_take(src, (np.array([2, 0, 1]),), (1,)), np.moveaxis(src[:, [2, 0, 1]], 1, 0)
    )
    check_grads(lambda s: lax.index_take(s, (i0, i2), (0, 2)), (src.astype(np.float64),), 1)
    dn = ScatterDimensionNumbers(
        update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)
    )
    x = np.arange(5, dtype=F32)
    idx = np.array([[1], [3], [1]])
    upd = np.array([10.0, 20.0, 5.0], F32)
    ref = x.copy()
    np.subtract.at(ref, idx[:, 0], upd)
    assert_array(lax.scatter_sub(x, idx, upd, dn), ref)
    check_grads(
        lambda o, u: lax.scatter_sub(o, idx, u, dn),
        (x.astype(np.float64), upd.astype(np.float64)),
        order=1,
    )


def test_small_utilities():
    tree = {"a": 1.0, "b": np.arange(3)}
    out = lax.optimization_barrier(tree)
    assert isinstance(out["a"], fg.Array) and out["a"].weak_type
    assert_array(out["b"], np.arange(3))
    assert float(fg.grad(lambda v: lax.optimization_barrier(v * v))(3.0)) == 6.0
    assert float(lax.platform_dependent(2.0, cpu=lambda v: v * 10, default=lambda v: v)) == 20
    assert float(lax.platform_dependent(2.0, cuda=lambda v: v * 10, default=lambda v: v)) == 2
    with pytest.raises(ValueError, match="no branch for the platform 'cpu'"):
        lax.platform_dependent(2.0, cuda=lambda v: v)
    double = lax.composite(lambda v: v * 2, name="my.double")
    assert float(double(3.0)) == 6.0 and float(fg.jit(double)(3.0)) == 6.0
    e = lax.empty((2, 3), np.int32)
    assert e.shape == (2, 3) and e.dtype == np.int32
    assert lax.dtype(1.0) == np.float32 and lax.dtype(1) == np.int32
    assert lax.dtype(np.float64) == np.float32 and lax.dtype(np.ones(2, np.int8)) == np.int8
    assert_array(lax.shape_as_value((2, 3)), np.array([2, 3]), dtype=np.int32)


def test_reduce_precision_and_associative_scan_on_the_gpu(gpu):
    x = np.random.default_rng(8).standard_normal(300).astype(F32) * F32(1e4)
    x[:4] = [np.nan, np.inf, -0.0, 1e-30]
    for e, m in [(5, 10), (8, 7), (4, 3)]:
        got = fg.jit(lax.reduce_precision, static_argnums=(1, 2), backend="gpu")(x, e, m)
        ref = np.asarray(lax.reduce_precision(x, e, m))
        np.testing.assert_array_equal(np.asarray(got).view(np.uint32)[4:], ref.view(np.uint32)[4:])
        assert np.isnan(np.asarray(got)[0])
    y = x[4:68].reshape(4, 16) * F32(1e-4)
    got = fg.jit(lambda v: lax.associative_scan(lax.add, v, axis=1), backend="gpu")(y)
    assert_array(got, np.cumsum(y, axis=1), rtol=1e-5, atol=1e-5)
