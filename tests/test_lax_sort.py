"""Sorting primitives of fungrad.lax: multi-operand stable ``sort`` (JAX's float order: -0.0
equals 0.0, NaNs last) and ``top_k`` (XLA's total order), against Python ``sorted``
references with explicit keys."""

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


def _elements(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        # few distinct values, so that ties (and -0.0 vs 0.0, NaN vs -NaN) are common
        return st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, -np.nan])
    if dtype.kind == "b":
        return st.booleans()
    info = np.iinfo(dtype)
    return st.sampled_from([0, 1, 2, 7, int(info.max), int(info.min)])


@st.composite
def arrays(draw, shape, dtypes=DTYPES):
    dtype = draw(st.sampled_from(dtypes))
    return draw(hnp.arrays(dtype, shape, elements=_elements(dtype)))


def _jax_sort_key(v):
    """JAX's sort comparator as a key: NaNs (either sign) last and equal; -0.0 == 0.0."""
    if isinstance(v, float):
        return (1, 0.0) if math.isnan(v) else (0, v + 0.0)
    return (0, v)


def _total_order_key(v):
    """XLA's total order: -NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN."""
    if isinstance(v, float):
        if math.isnan(v):
            return (1, 0.0, 0) if math.copysign(1.0, v) > 0 else (-1, 0.0, 0)
        return (0, v, 0 if math.copysign(1.0, v) < 0 else 1)
    return (0, v, 0)


def _py(v):
    return (
        float(v) if isinstance(v, np.floating) else int(v) if isinstance(v, np.integer) else bool(v)
    )


def _assert_same_bits(actual, expected):
    """Exact equality including the sign of zeros and NaNs (so the order of -0.0/0.0 and of
    differently signed NaNs, i.e. stability, is checked)."""
    got, want = np.asarray(actual), np.asarray(expected)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert_array(actual, want, dtype=want.dtype, rtol=0, atol=0)


def _reference_sort(operands, dimension, num_keys):
    """Stable sort of every 1-d slice along ``dimension`` by the first ``num_keys`` operands."""
    moved = [np.moveaxis(x, dimension, -1) for x in operands]
    outs = [np.empty_like(m) for m in moved]
    for idx in np.ndindex(*moved[0].shape[:-1]):
        n = moved[0].shape[-1]
        perm = sorted(
            range(n),
            key=lambda i: tuple(_jax_sort_key(_py(m[idx + (i,)])) for m in moved[:num_keys]),
        )
        for m, o in zip(moved, outs):
            o[idx] = m[idx][perm]
    return [np.moveaxis(o, -1, dimension) for o in outs]


# -- sort ----------------------------------------------------------------------------------------


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5), st.data())
def test_sort_one_operand_matches_stable_reference(shape, data):
    x = data.draw(arrays(shape))
    dimension = data.draw(st.integers(-len(shape), len(shape) - 1))
    out = lax.sort(x, dimension=dimension)
    (ref,) = _reference_sort([x], dimension % len(shape), 1)
    _assert_same_bits(out, ref)


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5), st.data())
def test_sort_many_operands_lexicographic_and_stable(shape, data):
    n_ops = data.draw(st.integers(1, 4))
    xs = [data.draw(arrays(shape)) for _ in range(n_ops)]
    num_keys = data.draw(st.integers(1, n_ops))
    dimension = data.draw(st.integers(0, len(shape) - 1))
    outs = lax.sort(tuple(xs), dimension=dimension, num_keys=num_keys)
    assert isinstance(outs, tuple) and len(outs) == n_ops
    for out, ref in zip(outs, _reference_sort(xs, dimension, num_keys)):
        _assert_same_bits(out, ref)


def test_sort_float_order_matches_jax():
    x = np.array([0.0, -0.0, np.nan, -np.nan, 1.0, -0.0, 0.0], np.float32)
    k, v = lax.sort_key_val(x, np.arange(7, dtype=np.int32))
    # JAX 0.10: [0, -0, -0, 0, 1, nan, nan] with values [0 1 5 6 4 2 3]
    assert_array(v, np.array([0, 1, 5, 6, 4, 2, 3], np.int32), dtype=np.int32)
    assert np.signbit(np.asarray(k)).tolist()[:4] == [False, True, True, False]
    y = np.array([np.nan, 1.0, -np.nan, -np.inf, np.inf, -1.0], np.float32)
    assert_array(lax.sort(y), [-np.inf, -1.0, 1.0, np.inf, np.nan, np.nan], dtype=np.float32)
    assert_array(lax.sort(np.array([True, False, True])), [False, True, True], dtype=np.bool_)


def test_sort_key_val_and_weak_type():
    k, v = lax.sort_key_val(
        np.array([3, 1, 2, 1], np.int32), np.array([0.0, 1.0, 2.0, 3.0], np.float32)
    )
    assert_array(k, np.array([1, 1, 2, 3], np.int32), dtype=np.int32)
    assert_array(v, [1.0, 3.0, 2.0, 0.0], dtype=np.float32)
    w = fg.Array(np.array([2.0, 1.0], np.float32), True)
    assert lax.sort(w).weak_type
    (single,) = lax.sort([np.array([2, 1], np.int32)])
    assert_array(single, np.array([1, 2], np.int32), dtype=np.int32)


def test_sort_in_float64(x64):
    x = np.array([3.0, -0.0, np.nan, 1e-300, -1e300], np.float64)
    assert_array(lax.sort(x), [-1e300, -0.0, 1e-300, 3.0, np.nan], dtype=np.float64, rtol=0, atol=0)


def test_sort_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"sort: dimension 2 is out of range .*\(2, 3\)"):
        lax.sort(x, dimension=2)
    with pytest.raises(ValueError, match="sort: dimension -1 is out of range"):
        lax.sort(np.float32(1.0))
    with pytest.raises(
        ValueError,
        match=r"sort: num_keys=3 must be between 1 and the number "
        r"of operands \(2\)",
    ):
        lax.sort((x, x), num_keys=3)
    with pytest.raises(ValueError, match="sort: num_keys=0"):
        lax.sort((x, x), num_keys=0)
    with pytest.raises(
        TypeError,
        match=r"sort: operands must have equal shapes, got \(2, 3\), "
        r"\(3,\)",
    ):
        lax.sort((x, np.zeros(3, np.float32)))
    with pytest.raises(TypeError, match="sort: needs at least one operand"):
        lax.sort(())


# -- top_k ---------------------------------------------------------------------------------------


def _reference_top_k(x, k, axis):
    moved = np.moveaxis(x, axis, -1)
    vals = np.empty(moved.shape[:-1] + (k,), x.dtype)
    idxs = np.empty(moved.shape[:-1] + (k,), np.int32)
    for idx in np.ndindex(*moved.shape[:-1]):
        row = moved[idx]
        order = sorted(
            range(len(row)), key=lambda i: (tuple(-c for c in _total_order_key(_py(row[i]))), i)
        )[:k]
        vals[idx] = row[order]
        idxs[idx] = order
    return np.moveaxis(vals, -1, axis), np.moveaxis(idxs, -1, axis)


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5), st.data())
def test_top_k_matches_total_order_reference(shape, data):
    x = data.draw(arrays(shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(0, shape[axis]))
    values, indices = (
        lax.top_k(x, k) if axis == -1 and data.draw(st.booleans()) else lax.top_k(x, k, axis=axis)
    )
    ref_values, ref_indices = _reference_top_k(x, k, axis % len(shape))
    _assert_same_bits(values, ref_values)
    assert_array(indices, ref_indices, dtype=np.int32, weak_type=False)


def test_top_k_follows_jax_on_nans_zeros_and_ties():
    # JAX 0.10: values [nan, 3, 3, 1, -inf, -nan], indices [5, 0, 3, 2, 4, 1]
    x = np.array([3.0, -np.nan, 1.0, 3.0, -np.inf, np.nan], np.float32)
    values, indices = lax.top_k(x, 6)
    assert_array(indices, np.array([5, 0, 3, 2, 4, 1], np.int32), dtype=np.int32)
    assert_array(values, [np.nan, 3.0, 3.0, 1.0, -np.inf, np.nan], dtype=np.float32)
    _, indices = lax.top_k(np.array([-0.0, 0.0, -0.0], np.float32), 3)
    assert_array(indices, np.array([1, 0, 2], np.int32))
    values, indices = lax.top_k(np.array([[1.0, 4.0], [3.0, 2.0]], np.float32), 1, axis=0)
    assert_array(values, [[3.0, 4.0]], dtype=np.float32)
    assert_array(indices, np.array([[1, 0]], np.int32))
    values, indices = lax.top_k(np.array([1, 3, 3, 2, 3], np.uint32), 2)
    assert_array(values, np.array([3, 3], np.uint32), dtype=np.uint32)
    assert_array(indices, np.array([1, 2], np.int32))
    w = fg.Array(np.ones(3, np.float32), True)
    assert lax.top_k(w, 1)[0].weak_type


def test_top_k_errors():
    x = np.array([3.0, 1.0, 2.0], np.float32)
    with pytest.raises(ValueError, match=r"top_k: k=4 must be between 0 and the size 3 of axis 0"):
        lax.top_k(x, 4)
    with pytest.raises(ValueError, match="top_k: k must be nonnegative, got -1"):
        lax.top_k(x, -1)
    with pytest.raises(ValueError, match="top_k: dimension -1 is out of range"):
        lax.top_k(np.float32(1.0), 1)
    with pytest.raises(ValueError, match="top_k: k=2 must be between 0 and the size 1"):
        fg.make_jaxpr(lambda x: lax.top_k_p.bind(x, k=2, axis=0))(x[:1])


# -- jaxprs --------------------------------------------------------------------------------------


def test_make_jaxpr_prints_sort_and_top_k_and_evaluates():
    def f(x, y):
        return (
            lax.sort(x),
            *lax.sort_key_val(x, y),
            *lax.top_k(x, 2),
            *lax.sort((x, y), dimension=0, num_keys=2),
        )

    x = np.array([[3.0, 1.0, 2.0, np.nan], [0.0, -0.0, 5.0, 1.0]], np.float32)
    y = np.arange(8, dtype=np.int32).reshape(2, 4)
    jaxpr = fg.make_jaxpr(f)(x, y)
    text = str(jaxpr)
    assert "f32[2,4] = sort[dimension=1 is_stable=True num_keys=1] a\n" in text
    assert "= sort[dimension=1 is_stable=True num_keys=1] a b\n" in text
    assert "= sort[dimension=0 is_stable=True num_keys=2] a b\n" in text
    assert "f32[2,2] g:i32[2,2] = top_k[axis=1 k=2] a\n" in text
    for got, want in zip(jaxpr(x, y), f(x, y)):
        _assert_same_bits(got, np.asarray(want))
