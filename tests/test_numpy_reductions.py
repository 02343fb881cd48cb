"""fungrad.numpy reductions against numpy, with JAX's dtype rules.

numpy computes the reference values (in float64 where accumulation order matters, with
tolerances). Dtype results follow JAX, which differs from numpy: ``sum(int32) -> int32``
without x64 (numpy: int64), ``mean(int) -> float32`` (numpy: float64), ``argmax -> int32``,
``var`` with ``N - ddof <= 0`` is NaN (numpy: inf or NaN), ``nanargmax`` of an all-NaN slice
is -1 (numpy raises) and the ``nearest`` quantile method breaks ties toward the lower index
(numpy: toward the even index).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from tests.helpers import assert_array

F16, F32, I8, I32, U8, U32, BOOL = (
    np.dtype(t) for t in (np.float16, np.float32, np.int8, np.int32, np.uint8, np.uint32, np.bool_)
)


def quiet(fn, *args, **kwargs):
    """Call a numpy reference, silencing its empty-slice and invalid-value warnings."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def elements(dtype, nan: bool = False, small: bool = False):
    if dtype == F32:
        finite = st.floats(-2, 2, width=32) if small else st.floats(-100, 100, width=32)
        return st.one_of(finite, st.just(np.nan)) if nan else finite
    if dtype == I32:
        return st.integers(-3, 3) if small else st.integers(-1000, 1000)
    if dtype == U32:
        return st.integers(0, 3) if small else st.integers(0, 1000)
    return st.booleans()


SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


@st.composite
def axis_args(draw, ndim):
    """``axis`` as None, an int or a tuple (negative entries included), and keepdims."""
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none" or ndim == 0:
        axis = None
    elif kind == "int":
        axis = draw(st.integers(-ndim, ndim - 1))
    else:
        dims = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
        axis = tuple(d - ndim if draw(st.booleans()) else d for d in dims)
    return axis, draw(st.booleans())


def reduced_size(shape, axis):
    if axis is None:
        return math.prod(shape)
    axes = axis if isinstance(axis, tuple) else (axis,)
    return math.prod(shape[a] for a in axes)


def sum_dtype(dtype):
    # JAX: bools and narrow ints accumulate in the default int (numpy uses int64).
    return {BOOL: I32, I32: I32, U32: U32, F32: F32}[dtype]


# name -> (dtypes, small values, reference(x, axis, keepdims, where), result dtype(dtype))
REDUCTIONS = {
    "sum": (
        [F32, I32, U32, BOOL],
        False,
        lambda x, ax, kd, w: np.sum(
            x, ax, dtype=sum_dtype(x.dtype) if x.dtype != F32 else np.float64, keepdims=kd, where=w
        ),
        sum_dtype,
    ),
    "prod": (
        [F32, I32, U32, BOOL],
        True,
        lambda x, ax, kd, w: np.prod(
            x, ax, dtype=sum_dtype(x.dtype) if x.dtype != F32 else np.float64, keepdims=kd, where=w
        ),
        sum_dtype,
    ),
    "mean": (
        [F32, I32, U32, BOOL],
        False,
        lambda x, ax, kd, w: np.mean(x, ax, dtype=np.float64, keepdims=kd, where=w),
        lambda d: F32,
    ),
    "all": (
        [F32, I32, BOOL],
        True,
        lambda x, ax, kd, w: np.all(x, ax, keepdims=kd, where=w),
        lambda d: BOOL,
    ),
    "any": (
        [F32, I32, BOOL],
        True,
        lambda x, ax, kd, w: np.any(x, ax, keepdims=kd, where=w),
        lambda d: BOOL,
    ),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@given(data=st.data())
def test_reductions_match_numpy(name, data):
    dtypes_, small, np_fn, out_dtype = REDUCTIONS[name]
    dtype = data.draw(st.sampled_from(dtypes_))
    x = data.draw(hnp.arrays(dtype, SHAPES, elements=elements(dtype, nan=True, small=small)))
    axis, keepdims = data.draw(axis_args(x.ndim))
    where = None
    if data.draw(st.booleans()):
        where_shape = hnp.broadcastable_shapes(x.shape, min_side=0, max_side=4)
        where = data.draw(hnp.arrays(BOOL, where_shape))
        assume(np.broadcast_shapes(where.shape, x.shape) == x.shape)
    got = getattr(fnp, name)(
        fnp.asarray(x),
        axis=axis,
        keepdims=keepdims,
        where=None if where is None else fnp.asarray(where),
    )
    expected = quiet(np_fn, x, axis, keepdims, True if where is None else where)
    assert_array(
        got,
        np.asarray(expected).astype(out_dtype(dtype)),
        dtype=out_dtype(dtype),
        rtol=1e-5,
        atol=1e-3,
    )


@pytest.mark.parametrize("name", ["max", "min", "amax", "amin"])
@given(data=st.data())
def test_max_min_match_numpy(name, data):
    dtype = data.draw(st.sampled_from([F32, I32, U32, BOOL]))
    x = data.draw(hnp.arrays(dtype, SHAPES, elements=elements(dtype, nan=True)))
    axis, keepdims = data.draw(axis_args(x.ndim))
    np_fn = np.max if name in ("max", "amax") else np.min
    initial = None if data.draw(st.booleans()) else np.asarray(7).astype(dtype).item()
    where = None
    if initial is not None and data.draw(st.booleans()):
        where = data.draw(hnp.arrays(BOOL, x.shape))
    kwargs = {} if initial is None else {"initial": initial}
    if where is not None:
        kwargs["where"] = where
    if initial is None and reduced_size(x.shape, axis) == 0 and x.size == 0:
        with pytest.raises(
            ValueError,
            match=f"zero-size array to reduction operation "
            f"{np_fn.__name__[:3]} which has no identity",
        ):
            getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims)
        return
    expected = quiet(np_fn, x, axis=axis, keepdims=keepdims, **kwargs)
    got = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims, **kwargs)
    assert_array(got, expected, dtype=dtype, rtol=0, atol=0)


@given(data=st.data())
def test_sum_prod_initial_and_dtype(data):
    dtype = data.draw(st.sampled_from([F32, I32]))
    x = data.draw(hnp.arrays(dtype, SHAPES, elements=elements(dtype, small=True)))
    axis, keepdims = data.draw(axis_args(x.ndim))
    initial = data.draw(st.integers(-5, 5))
    for fn, np_fn in ((fnp.sum, np.sum), (fnp.prod, np.prod)):
        got = fn(fnp.asarray(x), axis, keepdims=keepdims, initial=initial)
        # integer products wrap modulo 2**32 (as JAX): an int64 reference cast down is exact
        ref_dtype = np.int64 if dtype == I32 else np.float64
        expected = np_fn(x, axis, keepdims=keepdims, initial=initial, dtype=ref_dtype)
        assert_array(got, expected.astype(dtype), dtype=dtype, rtol=1e-5, atol=1e-3)
        got = fn(fnp.asarray(x), axis, dtype=np.float32, keepdims=keepdims)
        assert_array(
            got,
            np_fn(x, axis, keepdims=keepdims, dtype=np.float64),
            dtype=F32,
            rtol=1e-5,
            atol=1e-3,
        )


@pytest.mark.parametrize("name", ["var", "std"])
@given(data=st.data())
def test_var_std_match_numpy(name, data):
    dtype = data.draw(st.sampled_from([F32, I32, BOOL]))
    x = data.draw(hnp.arrays(dtype, SHAPES, elements=elements(dtype, nan=True)))
    axis, keepdims = data.draw(axis_args(x.ndim))
    ddof = data.draw(st.integers(0, 2))
    use_correction = data.draw(st.booleans())
    kwargs = {"correction": ddof} if use_correction else {"ddof": ddof}
    got = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims, **kwargs)
    expected = quiet(
        getattr(np, name), x.astype(np.float64), axis=axis, keepdims=keepdims, ddof=ddof
    )
    if reduced_size(x.shape, axis) - ddof <= 0:
        expected = np.full_like(expected, np.nan)  # JAX: NaN, numpy: inf or NaN
    assert_array(got, np.asarray(expected), dtype=F32, rtol=1e-4, atol=1e-3)


@given(data=st.data())
def test_var_mean_where_and_ptp_count_nonzero(data):
    x = data.draw(
        hnp.arrays(
            F32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=elements(F32)
        )
    )
    where = data.draw(hnp.arrays(BOOL, x.shape))
    axis, keepdims = data.draw(axis_args(x.ndim))
    got = fnp.var(fnp.asarray(x), axis=axis, keepdims=keepdims, where=fnp.asarray(where))
    expected = quiet(np.var, x.astype(np.float64), axis=axis, keepdims=keepdims, where=where)
    assert_array(got, np.asarray(expected), dtype=F32, rtol=1e-4, atol=1e-3)
    got = fnp.mean(fnp.asarray(x), axis=axis, keepdims=keepdims, where=fnp.asarray(where))
    expected = quiet(np.mean, x.astype(np.float64), axis=axis, keepdims=keepdims, where=where)
    assert_array(got, np.asarray(expected), dtype=F32, rtol=1e-5, atol=1e-4)
    if x.size and reduced_size(x.shape, axis):
        assert_array(
            fnp.ptp(fnp.asarray(x), axis=axis, keepdims=keepdims),
            np.ptp(x, axis=axis, keepdims=keepdims),
            dtype=F32,
            rtol=1e-6,
        )
    assert_array(
        fnp.count_nonzero(fnp.asarray(where), axis=axis, keepdims=keepdims),
        np.count_nonzero(where, axis=axis, keepdims=keepdims),
        dtype=I32,
    )


@pytest.mark.parametrize("name", ["argmax", "argmin", "nanargmax", "nanargmin"])
@given(data=st.data())
def test_arg_reductions_match_numpy(name, data):
    dtype = data.draw(st.sampled_from([F32, I32, BOOL]))
    x = data.draw(
        hnp.arrays(
            dtype,
            hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4),
            elements=elements(dtype, nan=True),
        )
    )
    axis = (
        None
        if x.ndim == 0 or data.draw(st.booleans())
        else data.draw(st.integers(-x.ndim, x.ndim - 1))
    )
    keepdims = data.draw(st.booleans())
    got = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims)
    if name.startswith("nan") and dtype == F32:
        # JAX: all-NaN slices give -1 (numpy raises); the others ignore NaNs.
        fill = -np.inf if name == "nanargmax" else np.inf
        base = getattr(np, name[3:])(np.where(np.isnan(x), fill, x), axis=axis, keepdims=keepdims)
        all_nan = np.all(np.isnan(x), axis=axis, keepdims=keepdims)
        expected = np.where(all_nan, -1, base)
    else:
        expected = getattr(np, name.removeprefix("nan"))(x, axis=axis, keepdims=keepdims)
    assert_array(got, expected, dtype=I32)


# ---------------------------------------------------------------------------------------------
# NaN-ignoring reductions

NAN_REDUCTIONS = {
    "nansum": lambda x, ax, kd: np.nansum(x.astype(np.float64), ax, keepdims=kd),
    "nanprod": lambda x, ax, kd: np.nanprod(x.astype(np.float64), ax, keepdims=kd),
    "nanmean": lambda x, ax, kd: np.nanmean(x.astype(np.float64), ax, keepdims=kd),
    "nanmax": lambda x, ax, kd: np.nanmax(x, ax, keepdims=kd),
    "nanmin": lambda x, ax, kd: np.nanmin(x, ax, keepdims=kd),
    "nanvar": lambda x, ax, kd: np.nanvar(x.astype(np.float64), ax, keepdims=kd),
    "nanstd": lambda x, ax, kd: np.nanstd(x.astype(np.float64), ax, keepdims=kd),
    "nanmedian": lambda x, ax, kd: np.nanmedian(x.astype(np.float64), ax, keepdims=kd),
}


@pytest.mark.parametrize("name", sorted(NAN_REDUCTIONS))
@given(data=st.data())
def test_nan_reductions_match_numpy(name, data):
    x = data.draw(hnp.arrays(F32, SHAPES, elements=elements(F32, nan=True, small=True)))
    axis, keepdims = data.draw(axis_args(x.ndim))
    if name in ("nanmax", "nanmin") and reduced_size(x.shape, axis) == 0 and x.size == 0:
        return  # no identity: same ValueError as max/min (tested there)
    got = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims)
    expected = np.asarray(quiet(NAN_REDUCTIONS[name], x, axis, keepdims))
    if name == "nanmedian" and x.ndim == 0 and keepdims:
        expected = expected.reshape(1)  # jnp counts a 0-d input as 1-d (numpy keeps ())
    assert_array(got, expected.astype(F32), dtype=F32, rtol=1e-4, atol=1e-4)


def test_nan_reductions_of_integers_are_plain_reductions():
    x = fnp.asarray(np.array([[1, 5], [3, 2]], np.int32))
    assert_array(fnp.nanmax(x), 5, dtype=I32)
    assert_array(fnp.nanargmin(x, axis=1), [0, 1], dtype=I32)
    assert_array(fnp.nanmean(x), 2.75, dtype=F32)
    assert_array(fnp.nansum(x, axis=0), [4, 7], dtype=I32)
    assert_array(fnp.nancumsum(x, axis=1), [[1, 6], [3, 5]], dtype=I32)


# ---------------------------------------------------------------------------------------------
# Quantiles

NICE_Q = [0.0, 0.125, 0.25, 0.375, 0.5, 0.75, 1.0]  # exact in binary: no index rounding noise


def _jax_nearest(x, q, axis):
    """jnp's ``nearest``: ties go to the lower index."""
    s = np.sort(x, axis=axis)
    n = s.shape[axis]
    pos = np.asarray(q) * (n - 1)
    idx = np.where(pos - np.floor(pos) <= 0.5, np.floor(pos), np.ceil(pos)).astype(int)
    return (
        np.moveaxis(np.take(s, idx, axis=axis), axis, 0)
        if np.ndim(q)
        else np.take(s, idx, axis=axis)
    )


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
@given(data=st.data())
def test_quantile_matches_numpy(method, data):
    x = data.draw(
        hnp.arrays(
            F32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), elements=elements(F32)
        )
    )
    axis = data.draw(st.sampled_from([None, -1, 0]))
    q = data.draw(
        st.one_of(
            st.sampled_from(NICE_Q), st.lists(st.sampled_from(NICE_Q), min_size=1, max_size=3)
        )
    )
    qa = np.asarray(q, np.float32)
    got = fnp.quantile(
        fnp.asarray(x), fnp.asarray(qa) if np.ndim(q) else q, axis=axis, method=method
    )
    if method == "nearest":
        flat = x.ravel() if axis is None else x
        expected = _jax_nearest(flat, qa, 0 if axis is None else axis)
    else:
        expected = np.quantile(x.astype(np.float64), qa, axis=axis, method=method)
    assert_array(got, np.asarray(expected), dtype=F32, rtol=1e-5, atol=1e-5)
    if method == "linear":
        got = fnp.percentile(fnp.asarray(x), qa * 100, axis=axis, keepdims=True)
        expected = np.percentile(x.astype(np.float64), qa * 100, axis=axis, keepdims=True)
        assert_array(got, expected, dtype=F32, rtol=1e-5, atol=1e-5)


@given(data=st.data())
def test_median_and_nan_quantiles_match_numpy(data):
    dtype = data.draw(st.sampled_from([F32, I32]))
    x = data.draw(
        hnp.arrays(
            dtype,
            hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
            elements=elements(dtype, nan=True),
        )
    )
    axis, keepdims = data.draw(axis_args(x.ndim))
    got = fnp.median(fnp.asarray(x), axis=axis, keepdims=keepdims)
    expected = np.asarray(quiet(np.median, x.astype(np.float64), axis=axis, keepdims=keepdims))
    if x.ndim == 0 and keepdims:
        expected = expected.reshape(1)  # jnp counts a 0-d input as 1-d (numpy keeps ())
    assert_array(got, expected, dtype=F32, rtol=1e-6, atol=1e-6)
    if x.ndim:
        q = data.draw(st.sampled_from(NICE_Q))
        got = fnp.nanquantile(fnp.asarray(x), q, axis=axis, keepdims=keepdims)
        expected = quiet(np.nanquantile, x.astype(np.float64), q, axis=axis, keepdims=keepdims)
        assert_array(got, np.asarray(expected), dtype=F32, rtol=1e-5, atol=1e-5)
        got = fnp.nanpercentile(fnp.asarray(x), q * 100, axis=axis, keepdims=keepdims)
        assert_array(got, np.asarray(expected), dtype=F32, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# average and cumulative reductions


@given(data=st.data())
def test_average_matches_numpy(data):
    x = data.draw(
        hnp.arrays(
            F32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=elements(F32)
        )
    )
    axis = data.draw(st.sampled_from([None] + list(range(-x.ndim, x.ndim))))
    avg, wsum = fnp.average(fnp.asarray(x), axis=axis, returned=True)
    ref_avg, ref_wsum = quiet(np.average, x.astype(np.float64), axis=axis, returned=True)
    assert_array(avg, ref_avg, dtype=F32, rtol=1e-5, atol=1e-4)
    assert_array(wsum, ref_wsum, dtype=F32)
    if axis is not None:
        w = data.draw(hnp.arrays(F32, (x.shape[axis],), elements=st.floats(0.5, 2, width=32)))
        avg, wsum = fnp.average(fnp.asarray(x), axis=axis, weights=fnp.asarray(w), returned=True)
        ref_avg, ref_wsum = np.average(x.astype(np.float64), axis=axis, weights=w, returned=True)
        assert_array(avg, ref_avg, dtype=F32, rtol=1e-5, atol=1e-4)
        assert_array(wsum, ref_wsum, dtype=F32, rtol=1e-6)


def test_average_weights_along_a_tuple_of_axes():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    w = np.arange(1, 9, dtype=np.float32).reshape(4, 2)
    got = fnp.average(fnp.asarray(x), axis=(2, 0), weights=fnp.asarray(w))
    assert_array(got, np.average(x, axis=(2, 0), weights=w), dtype=F32, rtol=1e-6)
    assert_array(
        fnp.average(fnp.asarray(np.array([1, 2], np.int32)), returned=True)[0], 1.5, dtype=F32
    )
    assert_array(
        fnp.average(
            fnp.asarray(np.array([1.0, 2.0], np.float32)),
            weights=fnp.asarray(np.zeros(2, np.float32)),
        ),
        np.nan,
        dtype=F32,
    )


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "nancumsum", "nancumprod"])
@given(data=st.data())
def test_cumulative_reductions_match_numpy(name, data):
    dtype = data.draw(st.sampled_from([F32, I32, U32, BOOL, I8]))
    elems = st.integers(-3, 3) if dtype == I8 else elements(dtype, nan=True, small=True)
    x = data.draw(hnp.arrays(dtype, SHAPES, elements=elems))
    axis = (
        None
        if x.ndim == 0 or data.draw(st.booleans())
        else data.draw(st.integers(-x.ndim, x.ndim - 1))
    )
    got = getattr(fnp, name)(fnp.asarray(x), axis=axis)
    # jnp keeps integer dtypes (int8 stays int8); only bools count in the default int.
    out_dtype = I32 if dtype == BOOL else dtype
    expected = quiet(
        getattr(np, name), x.astype(np.float64 if dtype == F32 else out_dtype), axis=axis
    )
    assert_array(got, expected.astype(out_dtype), dtype=out_dtype, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
@given(data=st.data())
def test_cumulative_array_api_matches_numpy(name, data):
    dtype = data.draw(st.sampled_from([F32, I8, U8, BOOL]))
    elems = st.integers(0, 3) if dtype in (I8, U8) else elements(dtype, small=True)
    x = data.draw(
        hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=elems)
    )
    axis = (
        None
        if x.ndim == 1 and data.draw(st.booleans())
        else data.draw(st.integers(-x.ndim, x.ndim - 1))
    )
    include_initial = data.draw(st.booleans())
    got = getattr(fnp, name)(fnp.asarray(x), axis=axis, include_initial=include_initial)
    # cumulative_sum promotes narrow integers like sum does; jnp's cumulative_prod keeps them
    out_dtype = {F32: F32, I8: I32, U8: U32, BOOL: I32}[dtype]
    if name == "cumulative_prod" and dtype in (I8, U8):
        out_dtype = dtype
    expected = getattr(np, name)(
        x.astype(np.float64 if dtype == F32 else out_dtype),
        axis=axis,
        include_initial=include_initial,
    )
    assert_array(got, expected.astype(out_dtype), dtype=out_dtype, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# Dtype rules and special cases checked by hand against JAX


def test_dtype_rules_follow_jax():
    i8 = fnp.asarray(np.array([1, 2, 3], np.int8))
    u8 = fnp.asarray(np.array([1, 2], np.uint8))
    b = fnp.asarray(np.array([True, False, True]))
    f16 = fnp.asarray(np.array([60000, 60000], np.float16))
    assert_array(fnp.sum(i8), 6, dtype=I32)
    assert_array(fnp.sum(u8), 3, dtype=U32)
    assert_array(fnp.sum(b), 2, dtype=I32)
    assert_array(fnp.prod(b), 0, dtype=I32)
    assert_array(fnp.sum(i8, promote_integers=False), 6, dtype=I8)
    assert_array(fnp.sum(i8, dtype=np.int8), 6, dtype=I8)
    with np.errstate(over="raise"):
        assert_array(fnp.sum(f16), np.inf, dtype=F16)  # summed in float32, rounded back
        assert_array(fnp.mean(f16), 60000, dtype=F16)
    assert_array(fnp.max(b), True, dtype=BOOL)
    assert_array(fnp.min(b), False, dtype=BOOL)
    assert_array(fnp.mean(i8), 2.0, dtype=F32)
    assert_array(fnp.mean(b), 2 / 3, dtype=F32)
    assert_array(fnp.mean(fnp.asarray(np.array([1, 2], np.int32)), dtype=np.int32), 1, dtype=I32)
    assert_array(fnp.var(u8), 0.25, dtype=F32)
    assert_array(fnp.median(u8), 1.5, dtype=F32)
    assert_array(fnp.ptp(i8), 2, dtype=I8)
    assert_array(fnp.argmax(i8), 2, dtype=I32)
    assert_array(fnp.count_nonzero(i8), 3, dtype=I32)
    assert_array(fnp.cumsum(i8), [1, 3, 6], dtype=I8)
    assert_array(fnp.cumsum(b), [1, 1, 2], dtype=I32)
    assert_array(fnp.cumulative_sum(i8), [1, 3, 6], dtype=I32)
    assert_array(fnp.sum(2.0), 2.0, dtype=F32, weak_type=False)  # reductions are strong
    assert_array(fnp.max(2), 2, dtype=I32, weak_type=False)


def test_x64_dtype_rules(x64):
    i32 = fnp.asarray(np.array([1, 2], np.int32))
    assert_array(fnp.sum(i32), 3, dtype=np.int64)
    assert_array(fnp.argmax(i32), 1, dtype=np.int64)
    assert_array(fnp.count_nonzero(i32), 2, dtype=np.int64)
    assert_array(fnp.mean(i32), 1.5, dtype=F32)  # jnp: int32 -> float32 even with x64
    assert_array(fnp.cumsum(i32), [1, 3], dtype=I32)
    x = fnp.asarray(np.array([1.0, 2.0, 4.0], np.float64))
    assert_array(fnp.std(x), np.std([1.0, 2.0, 4.0]), dtype=np.float64, rtol=1e-12)
    assert_array(fnp.median(x), 2.0, dtype=np.float64)


def test_empty_reductions():
    empty = fnp.asarray(np.zeros((0, 3), np.float32))
    assert_array(fnp.sum(empty), 0.0, dtype=F32)
    assert_array(fnp.prod(empty, axis=0), [1.0, 1.0, 1.0], dtype=F32)
    assert_array(fnp.max(empty, axis=1), np.zeros((0,)), dtype=F32)
    assert_array(fnp.max(empty, initial=3.0), 3.0, dtype=F32)
    assert_array(fnp.mean(empty), np.nan, dtype=F32)
    assert_array(fnp.var(empty), np.nan, dtype=F32)
    assert_array(fnp.all(empty), True, dtype=BOOL)
    assert_array(fnp.any(empty), False, dtype=BOOL)
    assert_array(fnp.median(empty), np.nan, dtype=F32)
    assert_array(fnp.nanmax(fnp.asarray(np.array([np.nan, np.nan], np.float32))), np.nan, dtype=F32)
    assert_array(
        fnp.nanmedian(fnp.asarray(np.array([np.nan, np.nan], np.float32))), np.nan, dtype=F32
    )
    assert_array(
        fnp.median(fnp.asarray(np.array([np.nan, 1, 2, 7], np.float32))), np.nan, dtype=F32
    )
    with pytest.raises(
        ValueError, match="zero-size array to reduction operation max which has no identity"
    ):
        fnp.max(empty)
    with pytest.raises(ValueError, match="zero-size array to reduction operation min"):
        fnp.min(empty, axis=0)
    with pytest.raises(ValueError, match="argmax"):
        fnp.argmax(empty)
    with pytest.raises(ValueError, match="argmin"):
        fnp.argmin(empty, axis=0)


def test_bad_arguments_raise():
    x = fnp.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="sum"):
        fnp.sum("abc")
    with pytest.raises(TypeError, match="mean"):
        fnp.mean([1.0, 2.0])
    with pytest.raises(TypeError, match="out"):
        fnp.sum(x, out=x)
    with pytest.raises(TypeError, match="out"):
        fnp.quantile(x, 0.5, out=x)
    with pytest.raises(ValueError, match="sum.*out of bounds"):
        fnp.sum(x, axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        fnp.sum(x, axis=(0, -2))
    with pytest.raises(TypeError, match="axis"):
        fnp.sum(x, axis=1.0)
    with pytest.raises(ValueError, match="where"):
        fnp.sum(x, where=fnp.asarray(np.ones(3, np.int32)))
    with pytest.raises(ValueError, match="max.*identity.*initial"):
        fnp.max(x, where=fnp.asarray(np.ones(3, bool)))
    with pytest.raises(ValueError, match="initial value must be a scalar"):
        fnp.max(x, initial=fnp.asarray(np.ones(2, np.float32)))
    with pytest.raises(ValueError, match="ddof and correction"):
        fnp.var(x, ddof=1, correction=1)
    with pytest.raises(ValueError, match="method"):
        fnp.quantile(x, 0.5, method="foo")
    with pytest.raises(ValueError, match="q must be"):
        fnp.quantile(x, fnp.asarray(np.ones((2, 2), np.float32)))
    with pytest.raises(ValueError, match="overwrite_input"):
        fnp.median(x, overwrite_input=True)
    with pytest.raises(ValueError, match="non-scalar"):
        fnp.cumulative_sum(fnp.asarray(np.float32(1)))
    with pytest.raises(ValueError, match="axis must be given"):
        fnp.cumulative_sum(x)
    with pytest.raises(TypeError, match="ptp"):
        fnp.ptp(fnp.asarray(np.array([True])))
    with pytest.raises(ValueError, match="average"):
        fnp.average(x, weights=fnp.asarray(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match="average"):
        fnp.average(x, axis=0, weights=fnp.asarray(np.ones(3, np.float32)))


def test_make_jaxpr_prints_reduction_primitives_and_evaluates_to_eager():
    x = fnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))

    def f(a):
        return (
            fnp.sum(a, axis=0),
            fnp.max(a, axis=-1, keepdims=True),
            fnp.argmax(a, axis=1),
            fnp.cumsum(a, axis=0),
            fnp.median(a, axis=1),
            fnp.mean(a),
            fnp.any(a > 2.0),
        )

    jaxpr = fg.make_jaxpr(f)(x)
    text = str(jaxpr)
    for s in (
        "reduce_sum[axes=(0,)]",
        "reduce_max[axes=(1,)]",
        "argmax[axes=(1,)",
        "cumsum[axis=0 reverse=False]",
        "sort[dimension=1",
        "reduce_or[axes=(0, 1)]",
        "div",
    ):
        assert s in text, (s, text)
    for got, want in zip(jaxpr(x), f(x)):
        assert_array(got, np.asarray(want), dtype=want.dtype)
