"""fungrad.numpy sorting, searching and counting against numpy: sort/argsort (stability, NaNs
last, -0.0 == 0.0), lexsort, searchsorted (every method), partition, unique (with size=),
where, nonzero/argwhere/flatnonzero (with size=), compress and extract."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from tests.helpers import assert_array

DTYPES = [np.float32, np.int32, np.uint32, np.bool_, np.float16]
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)


def _elements(dtype):
    kind = np.dtype(dtype).kind
    if kind == "f":  # few distinct values: ties, -0.0 vs 0.0 and NaNs are common
        return st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan])
    if kind == "b":
        return st.booleans()
    return st.sampled_from([0, 1, 2, 7, int(np.iinfo(dtype).max)])


@st.composite
def arrays(draw, shape=shapes, dtypes=DTYPES):
    dtype = draw(st.sampled_from(dtypes))
    return draw(
        hnp.arrays(
            dtype, draw(shape) if not isinstance(shape, tuple) else shape, elements=_elements(dtype)
        )
    )


def _axis(draw, x, allow_none=True):
    axes = [None] if allow_none else []
    axes += list(range(-x.ndim, x.ndim))
    return draw(st.sampled_from(axes)) if axes else None


def _stable_argsort(x, axis, descending=False):
    """Python ``sorted`` (stable) with JAX's key: NaNs largest, -0.0 == 0.0. Descending puts
    NaNs first and keeps equal elements in their original order."""

    def key(v):
        v = v.item()
        if isinstance(v, float) and math.isnan(v):
            big = (1, 0.0)
        else:
            big = (0, v + 0 if not isinstance(v, bool) else int(v))
        return (-big[0], -big[1]) if descending else big

    x = np.moveaxis(x, axis, -1)
    out = np.zeros(x.shape, np.int32)
    for pos in np.ndindex(*x.shape[:-1]):
        row = x[pos]
        out[pos] = sorted(range(row.shape[0]), key=lambda i: key(row[i]))
    return np.moveaxis(out, -1, axis)


@given(st.data())
def test_sort_and_argsort_match_stable_numpy(data):
    x = data.draw(arrays(shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=5, min_side=0)))
    axis = _axis(data.draw, x)
    ref_x = x.ravel() if axis is None else x
    ref_axis = 0 if axis is None else axis
    perm = np.argsort(ref_x, axis=ref_axis, kind="stable")
    assert_array(fnp.argsort(x, axis=axis), perm, dtype=np.int32)
    assert_array(fnp.argsort(x, axis=axis), _stable_argsort(ref_x, ref_axis))
    expected = np.take_along_axis(ref_x, perm, axis=ref_axis)
    got = fnp.sort(x, axis=axis)
    assert_array(got, expected, dtype=x.dtype)
    if x.dtype.kind == "f":  # the same bits: -0.0 and 0.0 keep their (stable) order
        np.testing.assert_array_equal(np.signbit(np.asarray(got)), np.signbit(expected))


@given(st.data())
def test_descending_is_stable_with_nans_first(data):
    # JAX: descending reverses the order but keeps equal elements in input order, and puts
    # NaNs first (numpy has no descending sort).
    x = data.draw(arrays(shape=hnp.array_shapes(min_dims=1, max_dims=2, max_side=5)))
    axis = _axis(data.draw, x, allow_none=False)
    perm = _stable_argsort(x, axis, descending=True)
    assert_array(fnp.argsort(x, axis=axis, descending=True), perm, dtype=np.int32)
    assert_array(
        fnp.sort(x, axis=axis, descending=True),
        np.take_along_axis(x, perm, axis=axis),
        dtype=x.dtype,
    )


def test_sort_errors_and_jaxpr():
    with pytest.raises(TypeError, match="sort: the 'kind' argument is not supported"):
        fnp.sort(np.zeros(3), kind="quicksort")
    with pytest.raises(TypeError, match="argsort: the 'order' argument"):
        fnp.argsort(np.zeros(3), order="a")
    with pytest.raises(np.exceptions.AxisError, match="sort: axis 1 is out of bounds"):
        fnp.sort(np.zeros(3), axis=1)
    with pytest.raises(TypeError, match="argsort: dtype must be an integer dtype"):
        fnp.argsort(np.zeros(3), dtype=np.float32)
    x = np.array([3.0, 1.0, 2.0], np.float32)
    jaxpr = fg.make_jaxpr(lambda a: fnp.argsort(a))(x)
    assert "sort[dimension=0 is_stable=True num_keys=1]" in str(jaxpr)
    assert_array(jaxpr(x)[0], [1, 2, 0])


@given(st.data())
def test_lexsort_matches_numpy(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=5))
    nkeys = data.draw(st.integers(1, 3))
    keys = [
        data.draw(hnp.arrays(np.int32, shape, elements=st.integers(0, 2))) for _ in range(nkeys)
    ]
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    assert_array(fnp.lexsort(keys, axis=axis), np.lexsort(keys, axis=axis), dtype=np.int32)
    with pytest.raises(ValueError, match="lexsort: all keys need to be the same shape"):
        fnp.lexsort([np.zeros(2), np.zeros(3)])


@given(
    st.data(),
    st.sampled_from(["scan", "scan_unrolled", "compare_all", "sort"]),
    st.sampled_from(["left", "right"]),
)
def test_searchsorted_matches_numpy(data, method, side):
    dtype = data.draw(st.sampled_from([np.float32, np.int32, np.uint32]))
    a = np.sort(data.draw(hnp.arrays(dtype, st.integers(0, 9), elements=_elements(dtype))))
    v = data.draw(
        hnp.arrays(
            dtype,
            hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=4),
            elements=_elements(dtype),
        )
    )
    expected = np.searchsorted(a, v, side=side)
    assert_array(fnp.searchsorted(a, v, side=side, method=method), expected, dtype=np.int32)
    # sorter: an unsorted a with the permutation that sorts it
    rng = np.random.default_rng(0)
    shuffled = rng.permutation(a)
    sorter = np.argsort(shuffled, kind="stable")
    assert_array(
        fnp.searchsorted(shuffled, v, side=side, sorter=sorter, method=method),
        np.searchsorted(shuffled, v, side=side, sorter=sorter),
    )


def test_searchsorted_promotes_and_errors():
    assert_array(fnp.searchsorted(np.array([1, 2, 3], np.int32), 2.5), 2, dtype=np.int32)
    with pytest.raises(ValueError, match="searchsorted: a must be 1-dimensional"):
        fnp.searchsorted(np.zeros((2, 2)), 1.0)
    with pytest.raises(ValueError, match="searchsorted: side must be"):
        fnp.searchsorted(np.zeros(2), 1.0, side="middle")
    with pytest.raises(ValueError, match="searchsorted: method must be one of"):
        fnp.searchsorted(np.zeros(2), 1.0, method="bisect")


@given(st.data())
def test_partition_contract(data):
    x = data.draw(
        arrays(
            shape=hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=6),
            dtypes=[np.float32, np.int32],
        )
    )
    axis = _axis(data.draw, x, allow_none=False)
    n = x.shape[axis]
    kth = data.draw(st.integers(-n, n - 1))
    out = np.moveaxis(np.asarray(fnp.partition(x, kth, axis=axis)), axis, -1)
    ref = np.moveaxis(np.sort(x, axis=axis), axis, -1)
    k = kth % n
    np.testing.assert_array_equal(out[..., k], ref[..., k])
    np.testing.assert_array_equal(np.sort(out, axis=-1), ref)  # a permutation of the input
    with np.errstate(invalid="ignore"):
        assert not (out[..., :k] > out[..., k : k + 1]).any()
        assert not (out[..., k + 1 :] < out[..., k : k + 1]).any()
    idx = np.asarray(fnp.argpartition(x, kth, axis=axis))
    np.testing.assert_array_equal(np.take_along_axis(x, idx, axis=axis), np.moveaxis(out, -1, axis))
    with pytest.raises(ValueError, match="partition: kth"):
        fnp.partition(x, n, axis=axis)


# -- unique ---------------------------------------------------------------------------------------


@given(arrays(dtypes=[np.float32, np.int32, np.bool_, np.uint32]))
def test_unique_matches_numpy(x):
    got = fnp.unique(x, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    assert_array(got[0], want[0], dtype=x.dtype)
    for g, w in zip(got[1:], want[1:]):
        assert_array(g, w, dtype=np.int32)
    assert_array(fnp.unique(x), want[0])


@given(arrays(dtypes=[np.float32, np.int32]), st.integers(0, 8), st.booleans())
def test_unique_with_size_pads_and_truncates(x, size, give_fill):
    vals, idx, inv, counts = np.unique(
        x, return_index=True, return_inverse=True, return_counts=True
    )
    if x.size == 0 and size and not give_fill:
        with pytest.raises(ValueError, match="fill_value must be specified"):
            fnp.unique(x, size=size)
        return
    fill = -5 if give_fill else (vals[0] if vals.size else 0)
    got = fnp.unique(
        x,
        return_index=True,
        return_inverse=True,
        return_counts=True,
        size=size,
        fill_value=-5 if give_fill else None,
    )
    m = min(size, vals.size)
    pad = size - m
    # JAX: padding is fill_value (default: the smallest unique value), index padding is the
    # index of the smallest value, counts padding is 0.
    assert_array(got[0], np.concatenate([vals[:m], np.full(pad, fill, x.dtype)]))
    assert_array(got[1], np.concatenate([idx[:m], np.full(pad, idx[0] if idx.size else 0)]))
    assert_array(got[2], inv)
    assert_array(got[3], np.concatenate([counts[:m], np.zeros(pad, np.int64)]))


def test_unique_axis_nan_and_tracing():
    x = np.array([[1, 2], [1, 2], [0, 5], [0, 5], [3, 3]], np.int32)
    got = fnp.unique(x, axis=0, return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(
        got, np.unique(x, axis=0, return_index=True, return_inverse=True, return_counts=True)
    ):
        assert_array(g, w)
    for g, w in zip(
        fnp.unique(x.T, axis=1, return_counts=True), np.unique(x.T, axis=1, return_counts=True)
    ):
        assert_array(g, w)
    f = np.array([np.nan, 1.0, np.nan], np.float32)
    assert_array(fnp.unique(f), [1.0, np.nan])
    assert_array(fnp.unique(f, equal_nan=False), [1.0, np.nan, np.nan])
    jaxpr = fg.make_jaxpr(lambda a: fnp.unique(a, size=3))(f)
    assert "sort[" in str(jaxpr)
    assert_array(jaxpr(f)[0], [1.0, np.nan, 1.0])
    with pytest.raises(
        fg.ConcretizationTypeError,
        match="unique: the size of the result depends on traced values.*size=",
    ):
        fg.make_jaxpr(fnp.unique)(f)


# -- where / nonzero / argwhere / flatnonzero / compress / extract --------------------------------


@given(st.data())
def test_where_three_args_broadcasts_and_promotes(data):
    (cs, xs, ys), _ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, min_side=0))
    cond = data.draw(hnp.arrays(np.bool_, cs))
    x = data.draw(hnp.arrays(np.float32, xs))
    y = data.draw(hnp.arrays(np.int32, ys))
    assert_array(fnp.where(cond, x, y), np.where(cond, x, y), dtype=np.float32)
    # JAX promotion: a Python float stays weak and keeps the int32 ... float32 result
    assert_array(fnp.where(cond, y, 2.0), np.where(cond, y, 2.0), dtype=np.float32)
    assert_array(fnp.where(cond, y, 7), np.where(cond, y, 7), dtype=np.int32)


def test_where_errors():
    with pytest.raises(ValueError, match="where: either both or neither"):
        fnp.where(np.array([True]), 1.0)
    with pytest.raises(ValueError, match="where: size and fill_value"):
        fnp.where(np.array([True]), 1.0, 2.0, size=2)
    with pytest.raises(TypeError, match="where requires ndarray or scalar arguments"):
        fnp.where(np.array([True]), "a", 2.0)


@given(arrays(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)))
def test_nonzero_family_matches_numpy(x):
    for g, w in zip(fnp.nonzero(x), np.nonzero(x)):
        assert_array(g, w, dtype=np.int32)
    for g, w in zip(fnp.where(x), np.where(x)):
        assert_array(g, w, dtype=np.int32)
    assert_array(fnp.argwhere(x), np.argwhere(x), dtype=np.int32)
    assert_array(fnp.flatnonzero(x), np.flatnonzero(x), dtype=np.int32)


@given(
    arrays(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)),
    st.integers(0, 10),
    st.booleans(),
)
def test_nonzero_with_size(x, size, per_dim_fill):
    want = np.nonzero(x)
    fill = tuple(range(-1, -x.ndim - 1, -1)) if per_dim_fill else -7
    got = fnp.nonzero(x, size=size, fill_value=fill)
    for d, (g, w) in enumerate(zip(got, want)):
        f = fill[d] if per_dim_fill else fill
        expected = np.concatenate([w[:size], np.full(max(size - w.size, 0), f)])
        assert_array(g, expected, dtype=np.int32)
    rows = np.argwhere(x)[:size]
    f = np.asarray(fill if per_dim_fill else (fill,) * x.ndim)
    expected = np.concatenate([rows, np.tile(f, (max(size - len(rows), 0), 1))]).reshape(
        size, x.ndim
    )
    assert_array(fnp.argwhere(x, size=size, fill_value=fill), expected)
    assert_array(
        fnp.nonzero(x, size=size)[0],
        np.concatenate([want[0][:size], np.zeros(max(size - want[0].size, 0))]),
    )


def test_nonzero_tracing_and_errors():
    x = np.array([0.0, 2.0, 0.0, np.nan], np.float32)
    jaxpr = fg.make_jaxpr(lambda a: fnp.nonzero(a, size=3))(x)
    assert "cumsum[" in str(jaxpr) and "scatter[" in str(jaxpr)
    assert_array(jaxpr(x)[0], [1, 3, 0])
    with pytest.raises(fg.ConcretizationTypeError, match="nonzero: the size of the result"):
        fg.make_jaxpr(fnp.nonzero)(x)
    with pytest.raises(ValueError, match="nonzero: calling nonzero on 0-d arrays"):
        fnp.nonzero(np.float32(1))
    assert fnp.argwhere(np.float32(3)).shape == (1, 0)
    with pytest.raises(ValueError, match="nonzero: fill_value must be a scalar or a tuple"):
        fnp.nonzero(np.ones((2, 2)), size=3, fill_value=(1, 2, 3))


@given(st.data())
def test_compress_and_extract_match_numpy(data):
    x = data.draw(
        arrays(
            shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4),
            dtypes=[np.float32, np.int32],
        )
    )
    axis = _axis(data.draw, x)
    n = x.size if axis is None else x.shape[axis]
    cond = data.draw(hnp.arrays(np.bool_, data.draw(st.integers(0, n))))
    assert_array(fnp.compress(cond, x, axis=axis), np.compress(cond, x, axis=axis), dtype=x.dtype)
    mask = data.draw(hnp.arrays(np.bool_, x.shape))
    assert_array(fnp.extract(mask, x), np.extract(mask, x), dtype=x.dtype)
    size = data.draw(st.integers(0, x.size))
    want = np.extract(mask, x)[:size]
    assert_array(
        fnp.extract(mask, x, size=size, fill_value=-1),
        np.concatenate([want, np.full(size - want.size, -1, x.dtype)]),
    )


def test_compress_errors():
    x = np.arange(5)
    with pytest.raises(ValueError, match="compress: condition contains entries that are out"):
        fnp.compress(np.array([True] * 6), x)
    assert_array(fnp.compress(np.array([True, False, True, True, False, False]), x), [0, 2, 3])
    with pytest.raises(ValueError, match="compress: condition must be a 1-d array"):
        fnp.compress(np.ones((2, 2), bool), x)
    with pytest.raises(ValueError, match=r"compress: size must be in \[0, 3\]"):
        fnp.extract(np.array([True, False, True]), np.arange(3), size=4)


def test_issue15_lexsort_of_scalar_keys_is_zero_as_in_jax():
    """``keys`` is a sequence: a 1-D array is a sequence of 0-d keys, which JAX sorts to index
    0 (the default int) rather than refusing."""
    for keys in (fnp.asarray([3, 1, 2]), np.array([3, 1, 2]), (fnp.asarray(3), 1)):
        out = fnp.lexsort(keys)
        assert out.shape == () and out.dtype == fnp.int32 and int(out) == 0
    assert_array(fnp.lexsort((np.array([3, 1, 2]),)), np.lexsort((np.array([3, 1, 2]),)))
