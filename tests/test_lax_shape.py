"""Shape primitives of fungrad.lax (reshape, transpose, squeeze, concatenate, pad, slice,
dynamic_slice, dynamic_update_slice, rev, iota, broadcast_in_dim) and the wrappers built on
them, against numpy references written independently of the impls."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
from fungrad import lax
from tests.helpers import assert_array

DTYPES = [np.float32, np.int32, np.uint32, np.bool_, np.float16]


@st.composite
def arrays(draw, min_dims=0, max_dims=4, min_side=0, max_side=4, dtypes=DTYPES):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(
        hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)
    )
    return draw(hnp.arrays(dtype, shape))


def exact(actual, expected, dtype=None):
    """Same shape, dtype (``expected``'s, or ``dtype`` for a list) and values (NaNs in the same
    places)."""
    if isinstance(expected, list):
        expected = np.array(expected, dtype=dtype)
    expected = np.asarray(expected)
    assert_array(actual, expected, dtype=expected.dtype, rtol=0, atol=0)


# -- reshape, transpose, squeeze, rev, broadcast ---------------------------------------------


@given(arrays(), st.data())
def test_reshape_matches_numpy(x, data):
    perm = tuple(data.draw(st.permutations(range(x.ndim))))
    dims = data.draw(st.sampled_from([None, perm]))
    # a new shape of the same size: the sizes in a random order, some merged, plus 1s
    sizes = list(data.draw(st.permutations(x.shape))) if x.ndim else []
    if len(sizes) >= 2 and data.draw(st.booleans()):
        sizes = [sizes[0] * sizes[1]] + sizes[2:]
    sizes.insert(data.draw(st.integers(0, len(sizes))), 1)
    out = lax.reshape(x, tuple(sizes), dims)
    ref = np.reshape(x if dims is None else np.transpose(x, dims), sizes)
    exact(out, ref)


def test_reshape_dimensions_ravels_in_that_order():
    x = np.arange(6).reshape(2, 3).astype(np.int32)
    exact(lax.reshape(x, (6,), dimensions=(1, 0)), [0, 3, 1, 4, 2, 5], np.int32)


def test_reshape_error_names_op_and_shapes():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError) as e:
        lax.reshape(x, (4,))
    assert str(e.value) == (
        "reshape: cannot reshape array of shape (2, 3) (size 6) into shape (4,) (size 4)"
    )
    with pytest.raises(TypeError, match="reshape: new_sizes must be non-negative"):
        lax.reshape(x, (-1,))
    with pytest.raises(TypeError, match="reshape: dimensions"):
        lax.reshape(x, (6,), dimensions=(0, 0))


@given(arrays(), st.data())
def test_transpose_matches_numpy(x, data):
    perm = tuple(data.draw(st.permutations(range(x.ndim))))
    exact(lax.transpose(x, perm), np.transpose(x, perm))


def test_transpose_bad_permutation():
    with pytest.raises(TypeError, match=r"transpose: permutation \(0, 0\).*\(2, 3\)"):
        lax.transpose(np.zeros((2, 3), np.float32), (0, 0))


@given(arrays(max_side=2), st.data())
def test_squeeze_matches_numpy(x, data):
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    dims = data.draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    neg = [d - x.ndim if data.draw(st.booleans()) else d for d in dims]  # negative dims work
    exact(lax.squeeze(x, neg), np.squeeze(x, tuple(dims)) if dims else x)


def test_squeeze_non_unit_dimension_errors():
    with pytest.raises(TypeError, match=r"squeeze: .*\(0,\).*\(2, 3\).*size 1"):
        lax.squeeze(np.zeros((2, 3), np.float32), (0,))
    with pytest.raises(ValueError, match="squeeze"):
        lax.squeeze(np.zeros((1, 3), np.float32), (2,))


@given(arrays(), st.data())
def test_rev_matches_numpy_flip(x, data):
    dims = tuple(
        data.draw(st.lists(st.integers(0, max(x.ndim - 1, 0)), unique=True, max_size=x.ndim))
    )
    exact(lax.rev(x, dims), np.flip(x, dims) if dims else x)


def test_rev_then_slice_gives_negative_strides():
    x = np.arange(10, dtype=np.int32)
    out = lax.slice(lax.rev(x, (0,)), (1,), (9,), (3,))
    exact(out, x[::-1][1:9:3])
    exact(out, x[8:0:-3])


@given(arrays(max_dims=3), st.data())
def test_broadcast_in_dim_and_broadcast(x, data):
    lead = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    exact(lax.broadcast(x, lead), np.broadcast_to(x, lead + x.shape))
    # expand every axis of size 1 in x to 3 while inserting a new middle axis
    out_shape = (2,) + tuple(3 if d == 1 else d for d in x.shape)
    exact(
        lax.broadcast_in_dim(x, out_shape, tuple(range(1, x.ndim + 1))),
        np.broadcast_to(x[None], out_shape),
    )


def test_broadcast_in_dim_errors():
    with pytest.raises(TypeError, match=r"broadcast_in_dim: operand dimension 0 has size 2"):
        lax.broadcast_in_dim(np.zeros(2, np.float32), (3,), (0,))


@given(arrays(max_dims=3), st.data())
def test_expand_dims_matches_numpy(x, data):
    n = data.draw(st.integers(1, 2))
    out_nd = x.ndim + n
    dims = data.draw(
        st.lists(
            st.integers(-out_nd, out_nd - 1), min_size=n, max_size=n, unique_by=lambda d: d % out_nd
        )
    )
    exact(lax.expand_dims(x, dims), np.expand_dims(x, tuple(dims)))


def test_expand_dims_repeated_axis():
    with pytest.raises(ValueError, match="expand_dims: repeated axis"):
        lax.expand_dims(np.zeros(2, np.float32), (0, -3))


def test_collapse():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    exact(lax.collapse(x, 0, 2), x.reshape(6, 4))
    exact(lax.collapse(x, 1), x.reshape(2, 12))
    exact(lax.collapse(x, -2, None), x.reshape(2, 12))
    with pytest.raises(ValueError, match="collapse"):
        lax.collapse(x, 2, 1)


# -- concatenate, pad ------------------------------------------------------------------------


@given(arrays(min_dims=1, max_dims=3), st.data())
def test_concatenate_matches_numpy(x, data):
    dim = data.draw(st.integers(0, x.ndim - 1))
    parts = [x]
    for _ in range(data.draw(st.integers(0, 2))):
        shape = list(x.shape)
        shape[dim] = data.draw(st.integers(0, 3))
        parts.append(data.draw(hnp.arrays(x.dtype, tuple(shape))))
    exact(lax.concatenate(parts, dim), np.concatenate(parts, dim))


def test_concatenate_errors_name_shapes_and_dtypes():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(
        TypeError,
        match="concatenate requires arguments to have the same dtypes, got float32, int32",
    ):
        lax.concatenate([x, np.zeros((2, 3), np.int32)], 0)
    with pytest.raises(TypeError, match=r"concatenate: .*dimension 1: shapes \(2, 3\), \(3, 3\)"):
        lax.concatenate([x, np.zeros((3, 3), np.float32)], 1)
    with pytest.raises(ValueError, match="concatenate"):
        lax.concatenate([], 0)


def pad_reference(x, value, config):
    """Independent reference: output position j of a dimension holds x[i] when
    j == lo + i * (interior + 1), else the padding value."""
    out_shape, maps = [], []
    for n, (lo, hi, interior) in zip(x.shape, config):
        size = lo + hi + n + max(n - 1, 0) * interior
        j = np.arange(size) - lo
        i = j // (interior + 1)
        valid = (j >= 0) & (j % (interior + 1) == 0) & (i < n)
        maps.append(np.where(valid, i, -1))
        out_shape.append(size)
    out = np.full(out_shape, value, dtype=x.dtype)
    for idx in np.ndindex(*out_shape):
        src = tuple(m[k] for m, k in zip(maps, idx))
        if all(s >= 0 for s in src):
            out[idx] = x[src]
    return out


@given(arrays(max_dims=3), st.data())
def test_pad_matches_reference(x, data):
    config = []
    for n in x.shape:
        interior = data.draw(st.integers(0, 2))
        inner = n + max(n - 1, 0) * interior
        lo = data.draw(st.integers(-inner - 2, 3))  # negative lo/hi crop
        hi_min = -(inner + lo)  # keeps the result size >= 0
        hi = data.draw(st.integers(hi_min, max(hi_min, 0) + 3))
        config.append((lo, hi, interior))
    value = data.draw(hnp.arrays(x.dtype, ()))
    exact(lax.pad(x, value, config), pad_reference(x, value, config))


def test_pad_examples_and_errors():
    exact(lax.pad(np.array([1, 2], np.int32), 0, ((1, 0, 1),)), [0, 1, 0, 2], np.int32)
    exact(
        lax.pad(np.arange(4, dtype=np.float32), -1.0, ((-1, -2, 2),)),  # JAX's result
        [-1, -1, 1, -1, -1, 2, -1],
        np.float32,
    )
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"pad: .*negative.*\(2, 3\)"):
        lax.pad(x, 0.0, ((-3, 0, 0), (0, 0, 0)))
    with pytest.raises(ValueError, match="pad: interior"):
        lax.pad(x, 0.0, ((0, 0, -1), (0, 0, 0)))
    with pytest.raises(TypeError, match="pad: operand and padding_value must have the same dtype"):
        lax.pad(x, np.int32(0), ((0, 0, 0), (0, 0, 0)))
    with pytest.raises(TypeError, match="pad: padding_config"):
        lax.pad(x, 0.0, ((0, 0, 0),))


# -- slice, dynamic_slice, dynamic_update_slice ----------------------------------------------


@given(arrays(), st.data())
def test_slice_matches_numpy(x, data):
    starts, limits, strides = [], [], []
    for n in x.shape:
        s = data.draw(st.integers(0, n))
        starts.append(s)
        limits.append(data.draw(st.integers(s, n)))
        strides.append(data.draw(st.integers(1, 3)))
    use_strides = data.draw(st.booleans())
    out = lax.slice(x, starts, limits, strides if use_strides else None)
    steps = strides if use_strides else [1] * x.ndim
    exact(out, x[tuple(slice(a, b, c) for a, b, c in zip(starts, limits, steps))])


def test_slice_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"slice: .*\(2, 3\)"):
        lax.slice(x, (0, 0), (3, 3))
    with pytest.raises(TypeError, match="slice: strides must be positive"):
        lax.slice(x, (0, 0), (2, 3), (1, 0))


def clamp_start(i, n, k):
    """JAX's rule: negative starts count from the end, then clamp into [0, n - k]."""
    i = i + n if i < 0 else i
    return min(max(i, 0), n - k)


@given(arrays(), st.data())
def test_dynamic_slice_wraps_and_clamps_like_jax(x, data):
    sizes = [data.draw(st.integers(0, n)) for n in x.shape]
    starts = [data.draw(st.integers(-2 * n - 2, 2 * n + 2)) for n in x.shape]
    # Python ints and numpy ints are wrapped statically, Arrays with lt/select_n
    kind = data.draw(st.sampled_from([int, np.int32, lambda s: fg.Array(np.int32(s))]))
    idx = [kind(s) for s in starts]
    lo = [clamp_start(s, n, k) for s, n, k in zip(starts, x.shape, sizes)]
    ref = x[tuple(slice(a, a + k) for a, k in zip(lo, sizes))]
    exact(lax.dynamic_slice(x, idx, sizes), ref)


def test_dynamic_slice_jax_examples():
    x = np.arange(5, dtype=np.int32)
    exact(lax.dynamic_slice(x, (7,), (2,)), [3, 4], np.int32)  # clamped
    exact(lax.dynamic_slice(x, (-1,), (2,)), [3, 4], np.int32)  # wrapped to 4, then clamped
    exact(lax.dynamic_slice(x, (-7,), (2,)), [0, 1], np.int32)  # wrapped to -2, then clamped
    exact(lax.dynamic_slice(x, fg.Array(np.array([1], np.int32)), (2,)), [1, 2], np.int32)
    # without wrapping, a negative start is clamped to 0
    exact(lax.dynamic_slice(x, (-1,), (2,), allow_negative_indices=False), [0, 1], np.int32)


def test_dynamic_slice_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"dynamic_slice: slice_sizes \(3, 3\).*\(2, 3\)"):
        lax.dynamic_slice(x, (0, 0), (3, 3))
    with pytest.raises(ValueError, match="dynamic_slice: got 1 start indices"):
        lax.dynamic_slice(x, (0,), (1, 1))
    with pytest.raises(TypeError, match="dynamic_slice: start indices must be integer"):
        lax.dynamic_slice(x, (0.5, 0), (1, 1))


@given(arrays(), st.data())
def test_dynamic_update_slice_clamps_like_jax(x, data):
    ushape = tuple(data.draw(st.integers(0, n)) for n in x.shape)
    update = data.draw(hnp.arrays(x.dtype, ushape))
    starts = [data.draw(st.integers(-2 * n - 2, 2 * n + 2)) for n in x.shape]
    ref = x.copy()
    lo = [clamp_start(s, n, k) for s, n, k in zip(starts, x.shape, ushape)]
    ref[tuple(slice(a, a + k) for a, k in zip(lo, ushape))] = update
    exact(lax.dynamic_update_slice(x, update, starts), ref)


def test_dynamic_update_slice_examples_and_errors():
    x = np.arange(5, dtype=np.int32)
    nines = np.array([9, 9], np.int32)
    exact(lax.dynamic_update_slice(x, nines, (-1,)), [0, 1, 2, 9, 9], np.int32)
    exact(lax.dynamic_update_slice(x, nines, (4,)), [0, 1, 2, 9, 9], np.int32)
    with pytest.raises(TypeError, match="dynamic_update_slice: update dtype float32"):
        lax.dynamic_update_slice(x, np.zeros(2, np.float32), (0,))
    with pytest.raises(TypeError, match=r"dynamic_update_slice: update shape \(6,\)"):
        lax.dynamic_update_slice(x, np.zeros(6, np.int32), (0,))


def test_in_dim_wrappers():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    exact(lax.slice_in_dim(x, 1, None, axis=1), x[:, 1:])
    exact(lax.slice_in_dim(x, -2, None, axis=1), x[:, -2:])
    exact(lax.slice_in_dim(x, 0, 3, 2, axis=0), x[0:3:2])
    exact(lax.index_in_dim(x, -1, axis=1, keepdims=False), x[:, -1])
    exact(lax.index_in_dim(x, 1), x[1:2])
    with pytest.raises(IndexError, match="index_in_dim: index 4"):
        lax.index_in_dim(x, 4, axis=1)
    exact(lax.dynamic_slice_in_dim(x, 3, 2, axis=1), x[:, 2:4])  # clamped
    exact(lax.dynamic_slice_in_dim(x, np.int32(1), 2), x[1:3])
    exact(lax.dynamic_index_in_dim(x, 2, axis=1, keepdims=False), x[:, 2])
    exact(lax.dynamic_index_in_dim(x, -1), x[2:3])
    up = np.full((3, 2), -1, np.float32)
    ref = x.copy()
    ref[:, 2:4] = up
    exact(lax.dynamic_update_slice_in_dim(x, up, 3, axis=1), ref)
    ref = x.copy()
    ref[1] = -5
    exact(lax.dynamic_update_index_in_dim(x, np.full(4, -5, np.float32), 1, 0), ref)
    exact(lax.dynamic_update_index_in_dim(x, np.full((1, 4), -5, np.float32), 1, 0), ref)


# -- iota, full ------------------------------------------------------------------------------


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), st.data())
def test_broadcasted_iota(shape, data):
    dim = data.draw(st.integers(0, len(shape) - 1))
    dtype = data.draw(st.sampled_from([np.int32, np.uint32, np.float32, np.float16]))
    ref_shape = [1] * len(shape)
    ref_shape[dim] = shape[dim]
    ref = np.broadcast_to(np.arange(shape[dim], dtype=dtype).reshape(ref_shape), shape)
    exact(lax.broadcasted_iota(dtype, shape, dim), ref)


def test_iota_and_its_errors():
    exact(lax.iota(np.int32, 4), np.arange(4, dtype=np.int32))
    exact(lax.iota(np.float32, 0), np.zeros(0, np.float32))
    with pytest.raises(TypeError, match="iota does not accept dtype bool"):
        lax.iota(np.bool_, 3)


def test_full_and_full_like_dtypes_and_weak_types():
    # values and weak types as JAX gives them
    assert_array(lax.full((2,), 3), [3, 3], dtype=np.int32, weak_type=True)
    assert_array(
        lax.full((2, 1), 1.5, np.float16), np.full((2, 1), 1.5), dtype=np.float16, weak_type=False
    )
    assert_array(lax.full((), np.int32(7)), 7, dtype=np.int32, weak_type=False)
    assert_array(lax.full_like(np.zeros(2, np.int32), 2.7), [2, 2], dtype=np.int32, weak_type=False)
    assert_array(lax.full_like(2.0, 3), 3.0, dtype=np.float32, weak_type=True)
    assert_array(
        lax.full_like(np.zeros((2, 3), np.float32), 1, np.int32, shape=(4,)),
        [1, 1, 1, 1],
        dtype=np.int32,
    )
    assert_array(lax.full((2,), 2**40, np.float32), np.full(2, 2.0**40), dtype=np.float32)
    with pytest.raises(TypeError, match="full: fill_value must be a scalar"):
        lax.full((2,), np.ones(2, np.float32))
    with pytest.raises(TypeError, match="full_like: fill_value must be a scalar"):
        lax.full_like(np.ones(2, np.float32), np.ones(2, np.float32))


# -- tracing -----------------------------------------------------------------------------------


def test_jaxpr_spelling_and_eval():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    u = np.ones((1, 2), np.float32)

    def f(x, u):
        return (
            lax.reshape(x, (3, 2)),
            lax.transpose(x, (1, 0)),
            lax.squeeze(lax.expand_dims(x, (0,)), (0,)),
            lax.concatenate([x, x], 1),
            lax.pad(x, 0.0, ((1, -1, 1), (0, 0, 0))),
            lax.slice(x, (0, 1), (2, 3), (1, 2)),
            lax.dynamic_slice(x, (1, 1), (1, 2)),
            lax.dynamic_update_slice(x, u, (1, 1)),
            lax.rev(x, (0,)),
            lax.broadcasted_iota(np.int32, (2, 3), 1),
        )

    jaxpr = fg.make_jaxpr(f)(x, u)
    text = str(jaxpr)
    for piece in [
        "reshape[dimensions=None new_sizes=(3, 2)] a",
        "transpose[permutation=(1, 0)] a",
        "broadcast_in_dim[broadcast_dimensions=(1, 2) shape=(1, 2, 3)] a",
        "squeeze[dimensions=(0,)]",
        "concatenate[dimension=1] a a",
        "pad[padding_config=((1, -1, 1), (0, 0, 0))] a 0.0:f32[]",
        "slice[limit_indices=(2, 3) start_indices=(0, 1) strides=(1, 2)] a",
        "dynamic_slice[slice_sizes=(1, 2)] a 1:i32[] 1:i32[]",
        "dynamic_update_slice a b 1:i32[] 1:i32[]",
        "rev[dimensions=(0,)] a",
        "iota[dimension=1 dtype=int32 shape=(2, 3)]",
    ]:
        assert piece in text, (piece, text)
    outs = jaxpr(x, u)
    for got, want in zip(outs, f(x, u)):
        exact(got, np.asarray(want))


def test_traced_start_index_wraps_with_select():
    x = np.arange(5, dtype=np.float32)
    jaxpr = fg.make_jaxpr(lambda x, i: lax.dynamic_slice(x, (i,), (2,)))(x, np.int32(0))
    text = str(jaxpr)
    assert "lt b 0:i32[]" in text and "select_n" in text
    assert "dynamic_slice[slice_sizes=(2,)]" in text
    for i in [-7, -1, 0, 2, 4, 9]:
        (out,) = jaxpr(x, np.int32(i))
        exact(out, x[clamp_start(i, 5, 2) :][:2])


def test_identity_wrappers_bind_nothing():
    x = np.zeros((2, 3), np.float32)
    jaxpr = fg.make_jaxpr(
        lambda x: lax.squeeze(
            lax.transpose(lax.reshape(lax.slice(lax.rev(x, ()), (0, 0), (2, 3)), (2, 3)), (0, 1)),
            (),
        )
    )(x)
    assert len(jaxpr.eqns) == 0
    assert math.prod(jaxpr.out_avals[0].shape) == 6
