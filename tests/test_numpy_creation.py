"""fungrad.numpy array creation against numpy: array/asarray, arange, linspace, logspace,
geomspace, zeros/ones/full/empty and their *_like forms, eye/identity/tri/tril/triu,
meshgrid, indices, fromfunction, astype, copy. Dtypes follow JAX (float32 default, weak Python
scalars), which the tests check explicitly where numpy differs."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.testing import strategies as fst
from tests.helpers import assert_array

DTYPES = [np.float32, np.int32, np.uint32, np.bool_]


def exact(actual, expected, dtype=None):
    expected = np.asarray(expected)
    assert_array(actual, expected, dtype=dtype or expected.dtype, rtol=0, atol=0)


# -- array / asarray / astype / copy -------------------------------------------------------


def test_array_of_python_scalars_is_weak():
    exact(fnp.array(1.0), np.float32(1.0))
    assert fnp.array(1.0).weak_type and fnp.asarray(3).weak_type
    assert fnp.asarray(3).dtype == np.int32
    assert not fnp.array(1.0, dtype="float32").weak_type
    # a list is not weak (JAX), and float64 numpy input canonicalises to float32
    assert not fnp.array([1.0, 2.0]).weak_type
    exact(fnp.array(np.arange(3.0)), np.arange(3.0, dtype=np.float32))


def test_array_nested_lists_and_ndmin():
    exact(fnp.array([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]], np.int32))
    exact(fnp.array([[True], [False]]), np.array([[True], [False]]))
    exact(fnp.array([1, 2.5]), np.array([1, 2.5], np.float32))
    x = fnp.array(1.0, ndmin=3)
    assert x.shape == (1, 1, 1) and x.weak_type
    assert fnp.array([1, 2], ndmin=2, dtype="float32").shape == (1, 2)
    exact(fnp.array(fnp.arange(3), dtype=np.int8), np.arange(3, dtype=np.int8))


def test_array_bad_input():
    with pytest.raises(TypeError, match="array"):
        fnp.array("abc")
    with pytest.raises(ValueError, match="ragged"):  # numpy's and JAX 0.10.2's class
        fnp.array([[1, 2], [3]])
    with pytest.raises(ValueError, match="ragged"):
        fnp.asarray([1, [2, 3]])
    with pytest.raises(ValueError, match="order"):
        fnp.array([1], order="F")
    with pytest.raises(TypeError, match="not supported"):
        fnp.array([1], dtype="U3")


@given(st.sampled_from(DTYPES), st.sampled_from(DTYPES), st.data())
def test_astype_matches_numpy(src, dt, data):
    # non-negative values: numpy's float -> uint cast of negatives is undefined (JAX saturates)
    x = data.draw(fst.arrays(src, min_value=0))
    out = fnp.astype(fnp.asarray(x), dt)
    exact(out, x.astype(dt))
    assert not fnp.astype(1.0, np.float32).weak_type
    assert fnp.astype(fnp.arange(2), None).dtype == np.float32  # JAX: None is the default float


def test_copy_keeps_value_and_weak_type():
    exact(fnp.copy(fnp.arange(3)), np.arange(3, dtype=np.int32))
    assert fnp.copy(1.0).weak_type
    with pytest.raises(TypeError, match="copy"):
        fnp.copy([1, 2])


# -- arange ----------------------------------------------------------------------------------


@given(st.integers(-20, 20), st.integers(-20, 20), st.integers(-5, 5).filter(bool))
def test_arange_int_matches_numpy(start, stop, step):
    exact(fnp.arange(start, stop, step), np.arange(start, stop, step, dtype=np.int32))
    exact(fnp.arange(start, stop), np.arange(start, stop, dtype=np.int32))
    exact(fnp.arange(stop), np.arange(stop, dtype=np.int32))


@given(
    st.floats(-10, 10),
    st.floats(-10, 10),
    st.floats(0.05, 3).flatmap(lambda s: st.sampled_from([s, -s])),
)
def test_arange_float_matches_numpy(start, stop, step):
    want = np.arange(start, stop, step)
    got = fnp.arange(start, stop, step)
    # JAX computes start + step * i in float32 (numpy in float64, then casts)
    assert_array(got, want, dtype=np.float32, rtol=1e-5, atol=1e-5)
    assert not got.weak_type


def test_arange_dtypes_and_edge_cases():
    exact(fnp.arange(0), np.zeros(0, np.int32))
    exact(fnp.arange(-3), np.zeros(0, np.int32))
    exact(fnp.arange(5, 0, -2), np.array([5, 3, 1], np.int32))
    exact(fnp.arange(5.0), np.arange(5, dtype=np.float32))
    exact(fnp.arange(np.uint8(5)), np.arange(5, dtype=np.uint8))
    exact(fnp.arange(1, 4, dtype=np.float32), np.arange(1, 4, dtype=np.float32))
    exact(fnp.arange(0.5, 3), np.arange(0.5, 3, dtype=np.float32))
    exact(fnp.arange(fnp.array(3)), np.arange(3, dtype=np.int32))  # concrete Array bound
    exact(fnp.arange(0, 1, 0.25, dtype=np.float16), np.arange(0, 1, 0.25, dtype=np.float16))


def test_arange_errors():
    with pytest.raises(ZeroDivisionError, match="arange"):
        fnp.arange(0, 5, 0)
    with pytest.raises(ValueError, match="arange: arguments must be scalars"):
        fnp.arange(fnp.array([1, 2]))
    with pytest.raises(TypeError, match="arange"):
        fnp.arange("3")
    with pytest.raises(fg.ConcretizationTypeError, match="arange argument 'stop'"):
        fg.make_jaxpr(lambda n: fnp.arange(n))(3)
    with pytest.raises(fg.ConcretizationTypeError, match="arange argument 'step'"):
        fg.make_jaxpr(lambda s: fnp.arange(0, 5, s))(1)


def test_arange_x64(x64):
    exact(fnp.arange(3), np.arange(3, dtype=np.int64))
    exact(fnp.arange(0.0, 1.0, 0.1), np.arange(0.0, 1.0, 0.1))


# -- linspace / logspace / geomspace ------------------------------------------------------------


@given(st.floats(-100, 100), st.floats(-100, 100), st.integers(0, 20), st.booleans())
def test_linspace_matches_numpy(start, stop, num, endpoint):
    got, step = fnp.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    want, want_step = np.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    assert_array(got, want, dtype=np.float32, rtol=1e-5, atol=1e-4)
    if num > 1 or (num == 1 and not endpoint):
        assert_array(step, np.asarray(want_step), dtype=np.float32, rtol=1e-5, atol=1e-4)
    else:  # JAX: NaN spacing when it is undefined (numpy gives NaN for num=1 with endpoint)
        assert np.isnan(np.asarray(step))
    if num > 1 and endpoint:  # the endpoints are exact
        assert np.asarray(got)[0] == np.float32(start) and np.asarray(got)[-1] == np.float32(stop)


@given(fst.broadcastable_shapes(2, max_dims=2), st.integers(0, 6), st.booleans(), st.data())
def test_linspace_array_bounds_and_axis(shapes, num, endpoint, data):
    s0, s1 = shapes
    lo = data.draw(fst.arrays(np.float32, s0))
    hi = data.draw(fst.arrays(np.float32, s1))
    nd = len(np.broadcast_shapes(s0, s1)) + 1
    axis = data.draw(st.integers(-nd, nd - 1))
    got = fnp.linspace(lo, hi, num, endpoint=endpoint, axis=axis)
    want = np.linspace(lo.astype(np.float64), hi, num, endpoint=endpoint, axis=axis)
    assert_array(got, want, dtype=np.float32, rtol=1e-5, atol=1e-5)


def test_linspace_integer_dtype_floors():
    exact(fnp.linspace(0, 10, 4, dtype=np.int32), np.array([0, 3, 6, 10], np.int32))
    exact(
        fnp.linspace(-5, 5, 4, dtype=np.int32), np.linspace(-5, 5, 4, dtype=np.int32)
    )  # numpy >= 2 floors too
    exact(fnp.linspace(0, 1, 0), np.zeros(0, np.float32))
    exact(fnp.linspace(2, 3, 1), np.array([2], np.float32))
    exact(fnp.linspace(2, 3, 1, endpoint=False, retstep=True)[1], np.float32(1))


def test_linspace_errors():
    with pytest.raises(ValueError, match="linspace: number of samples"):
        fnp.linspace(0, 1, -1)
    with pytest.raises(fg.ConcretizationTypeError, match="linspace argument 'num'"):
        fg.make_jaxpr(lambda n: fnp.linspace(0, 1, n))(3)
    with pytest.raises(ValueError, match="linspace"):
        fnp.linspace(fnp.zeros(2), fnp.zeros(3), 4)


def test_linspace_x64(x64):
    got = fnp.linspace(0, 1, 7)
    assert_array(got, np.linspace(0, 1, 7), dtype=np.float64, rtol=1e-15, atol=1e-15)


@given(
    st.floats(-3, 3),
    st.floats(-3, 3),
    st.integers(0, 10),
    st.booleans(),
    st.sampled_from([2.0, 10.0, 0.5]),
)
def test_logspace_matches_numpy(start, stop, num, endpoint, base):
    got = fnp.logspace(start, stop, num, endpoint=endpoint, base=base)
    want = np.logspace(start, stop, num, endpoint=endpoint, base=base)
    assert_array(got, want, dtype=np.float32, rtol=2e-5, atol=0)


@given(
    st.floats(0.01, 1000),
    st.floats(0.01, 1000),
    st.integers(0, 10),
    st.booleans(),
    st.sampled_from([1.0, -1.0]),
)
def test_geomspace_matches_numpy(start, stop, num, endpoint, sign):
    got = fnp.geomspace(sign * start, sign * stop, num, endpoint=endpoint)
    want = np.geomspace(sign * start, sign * stop, num, endpoint=endpoint)
    assert_array(got, want, dtype=np.float32, rtol=3e-5, atol=0)


def test_geomspace_axis_and_dtype():
    got = fnp.geomspace(fnp.array([1.0, 100.0]), fnp.array([8.0, 1.0]), 3, axis=1)
    want = np.geomspace(np.array([1.0, 100.0]), np.array([8.0, 1.0]), 3, axis=1)
    assert_array(got, want, dtype=np.float32, rtol=1e-5)
    exact(fnp.logspace(0, 3, 4, base=2, dtype=np.int32), np.array([1, 2, 4, 8], np.int32))


# -- filled arrays ---------------------------------------------------------------------------


@given(fst.shapes(max_dims=4), st.sampled_from([None] + DTYPES))
def test_zeros_ones_empty_full(shape, dt):
    want_dt = np.float32 if dt is None else dt
    exact(fnp.zeros(shape, dt), np.zeros(shape, want_dt))
    exact(fnp.ones(shape, dt), np.ones(shape, want_dt))
    exact(fnp.empty(shape, dt), np.zeros(shape, want_dt))  # empty is zeros (immutable arrays)
    exact(fnp.full(shape, 7, dt), np.full(shape, 7, np.int32 if dt is None else dt))
    assert fnp.full(shape, 7).weak_type and not fnp.zeros(shape).weak_type


def test_full_scalar_dtypes_and_array_fill():
    exact(fnp.full((2,), 1.5), np.full((2,), 1.5, np.float32))
    assert fnp.full((2,), 1.5).weak_type
    exact(fnp.full(3, True), np.full(3, True))
    exact(fnp.full((2, 3), fnp.arange(3)), np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3)))
    exact(
        fnp.full((2, 3), np.arange(3.0), dtype=np.int32),
        np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3)),
    )
    exact(fnp.zeros(np.int64(2)), np.zeros(2, np.float32))
    exact(fnp.zeros(fnp.array([2, 1])), np.zeros((2, 1), np.float32))


def test_full_and_zeros_errors():
    with pytest.raises(ValueError, match="broadcast"):
        fnp.full((2, 3), fnp.arange(2))
    with pytest.raises(ValueError, match="zeros: negative dimensions"):
        fnp.zeros(-1)
    with pytest.raises(TypeError, match="zeros: shape must be"):
        fnp.zeros(2.0)
    with pytest.raises(TypeError, match=r"Did you mean zeros\(\(2, 3\)\)"):
        fnp.zeros(2, 3)
    with pytest.raises(TypeError, match="fill_value"):
        fnp.full((2,), "x")
    with pytest.raises(fg.ConcretizationTypeError, match="shape argument of ones"):
        fg.make_jaxpr(lambda n: fnp.ones(n))(3)


@given(fst.arrays(np.float32), st.sampled_from([None] + DTYPES), st.data())
def test_like_functions(x, dt, data):
    a = fnp.asarray(x)
    want_dt = x.dtype if dt is None else dt
    exact(fnp.zeros_like(a, dt), np.zeros_like(x, want_dt))
    exact(fnp.ones_like(a, dt), np.ones_like(x, want_dt))
    exact(fnp.empty_like(a, dt), np.zeros_like(x, want_dt))
    exact(fnp.full_like(a, 2, dt), np.full_like(x, 2, want_dt))
    shape = data.draw(fst.shapes(max_dims=3))
    exact(fnp.zeros_like(a, dt, shape=shape), np.zeros(shape, want_dt))


def test_like_functions_dtypes_and_weak_types():
    exact(fnp.full_like(fnp.arange(3), 2.5), np.full(3, 2, np.int32))
    out = fnp.full_like(1.0, 2)
    exact(out, np.float32(2))
    assert out.weak_type and fnp.zeros_like(1.0).weak_type
    assert not fnp.zeros_like(1.0, dtype=np.float32).weak_type
    exact(
        fnp.full_like(fnp.zeros((2, 3)), fnp.arange(3)),
        np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)),
    )
    assert not fnp.full_like(fnp.full((3,), 1.0), fnp.arange(3)).weak_type  # as in JAX
    exact(fnp.ones_like(np.zeros(2, np.float64)), np.ones(2, np.float32))
    with pytest.raises(TypeError, match="zeros_like"):
        fnp.zeros_like([1, 2])


def test_filled_x64(x64):
    exact(fnp.zeros(2), np.zeros(2))
    exact(fnp.full((2,), 1), np.full(2, 1, np.int64))
    exact(fnp.eye(2), np.eye(2))


# -- eye / identity / tri / tril / triu --------------------------------------------------------


@given(
    st.integers(0, 5),
    st.sampled_from([None, 0, 1, 3, 6]),
    st.integers(-7, 7),
    st.sampled_from([None] + DTYPES),
)
def test_eye_tri_match_numpy(n, m, k, dt):
    want_dt = np.float32 if dt is None else dt
    exact(fnp.eye(n, m, k, dt), np.eye(n, m, k, dtype=want_dt))
    exact(fnp.tri(n, m, k, dt), np.tri(n, m, k, dtype=want_dt))
    exact(fnp.identity(n, dt), np.identity(n, dtype=want_dt))


@given(
    fst.arrays(np.float32, fst.shapes(min_dims=2, max_dims=4)),
    st.integers(-5, 5),
    st.sampled_from(DTYPES),
)
def test_tril_triu_match_numpy(x, k, dt):
    x = x.astype(dt)
    out = fnp.tril(x, k)
    exact(out, np.tril(x, k))
    exact(fnp.triu(x, k), np.triu(x, k))


def test_tril_keeps_weak_type_and_rejects_1d():
    w = fnp.full((2, 2), 3.0)
    assert fnp.tril(w).weak_type and fnp.triu(w).weak_type
    with pytest.raises(ValueError, match="tril: argument must be at least 2-D"):
        fnp.tril(fnp.arange(3))  # NB: numpy broadcasts 1-D input, JAX rejects it


def test_tril_traced_k():
    x = fnp.ones((3, 3))
    jaxpr = fg.make_jaxpr(lambda k: fnp.triu(x, k))(1)
    exact(jaxpr(1)[0], np.triu(np.ones((3, 3), np.float32), 1))
    exact(jaxpr(-1)[0], np.triu(np.ones((3, 3), np.float32), -1))


# -- grids --------------------------------------------------------------------------------------


@given(
    st.lists(fst.shapes(min_dims=1, max_dims=1), min_size=0, max_size=4),
    st.sampled_from(["xy", "ij"]),
    st.booleans(),
    st.data(),
)
def test_meshgrid_matches_numpy(shapes, indexing, sparse, data):
    xs = [
        data.draw(fst.arrays(data.draw(st.sampled_from([np.float32, np.int32])), s)) for s in shapes
    ]
    got = fnp.meshgrid(*xs, indexing=indexing, sparse=sparse)
    want = np.meshgrid(*xs, indexing=indexing, sparse=sparse)
    assert isinstance(got, list) and len(got) == len(want)
    for g, w in zip(got, want):
        exact(g, w)


def test_meshgrid_errors():
    with pytest.raises(ValueError, match="meshgrid: arguments must be 1-D"):
        fnp.meshgrid(fnp.zeros((2, 2)))
    with pytest.raises(ValueError, match="meshgrid: indexing"):
        fnp.meshgrid(fnp.zeros(2), indexing="xx")
    with pytest.raises(TypeError, match="meshgrid"):
        fnp.meshgrid([1, 2])


@given(fst.shapes(max_dims=4), st.booleans(), st.sampled_from([None, np.int32, np.float32]))
def test_indices_matches_numpy(dims, sparse, dt):
    got = fnp.indices(dims, dtype=dt, sparse=sparse)
    want = np.indices(dims, dtype=np.int32 if dt is None else dt, sparse=sparse)
    if sparse:
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            exact(g, w)
    else:
        exact(got, want)


def test_fromfunction_matches_numpy():
    def f(i, j):
        return i * 10 + j

    exact(fnp.fromfunction(f, (2, 3)), np.fromfunction(f, (2, 3), dtype=np.float32))
    exact(
        fnp.fromfunction(f, (3, 2), dtype=np.int32),
        np.fromfunction(f, (3, 2), dtype=int).astype(np.int32),
    )
    assert fnp.fromfunction(lambda: fnp.zeros(()), ()).shape == ()


# -- tracing -----------------------------------------------------------------------------------


def test_creation_jaxprs():
    def f(x):
        return fnp.zeros((2, 3)) + x, fnp.arange(4), fnp.eye(2), fnp.linspace(0, x, 3)

    jaxpr = fg.make_jaxpr(f)(1.0)
    text = str(jaxpr)
    assert "broadcast_in_dim[" in text and "shape=(2, 3)" in text
    assert "iota[" in text and "eq " in text
    outs = jaxpr(2.0)
    for got, want in zip(outs, f(2.0)):
        exact(got, np.asarray(want))
    exact(outs[3], np.array([0, 1, 2], np.float32))


def test_python_integers_out_of_the_dtype_range_overflow():
    # JAX 0.10.2 hands Python numbers to numpy's conversion: out of range is an OverflowError,
    # not a wrapped value; numpy scalars and arrays convert (and wrap) as astype does.
    for make in (
        lambda: fnp.int8(200),
        lambda: fnp.uint8(-1),
        lambda: fnp.uint8(300.0),
        lambda: fnp.array([100, 200], dtype=fnp.int8),
        lambda: fnp.array([1, 2**40]),  # the default int32
        lambda: fnp.asarray(2**31, dtype=fnp.int32),
    ):
        with pytest.raises(OverflowError):
            make()
    assert_array(fnp.int8(3.7), np.array(3, np.int8), dtype=np.int8)
    assert_array(fnp.array(np.int64(300), dtype=fnp.int8), np.array(44, np.int8), dtype=np.int8)
    assert_array(fnp.array([1.5, 2**40]), np.array([1.5, 2.0**40]), dtype=np.float32)
    assert_array(fnp.array([True, 2], dtype=fnp.uint8), np.array([1, 2]), dtype=np.uint8)
