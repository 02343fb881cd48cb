"""fungrad.scipy.integrate.trapezoid and fungrad.scipy.fft's type-2 DCTs against SciPy (the
test-only oracle): values for hypothesis-drawn shapes (0-d where valid, size-1 and size-0 axes),
dtypes, ``n`` / ``s``, ``norm`` and axes; round trips; jit against eager; gradients by finite
differences in float64; vmap against a Python loop; JAX's dtypes, its quirks (``s`` paired with
``axes`` by ``zip``, constant spacings) and its errors for what it does not support."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import fungrad as fg
from fungrad.scipy import fft, integrate
from fungrad.testing import check_grads

sfft = pytest.importorskip("scipy.fft")
sint = pytest.importorskip("scipy.integrate")

NORMS = (None, "backward", "ortho")
# float64 and int64 keep their precision only with x64 (the value tests enable it)
DTYPES = ("float32", "float64", "int32", "int64", "bool", "complex64", "complex128")


def _sample(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-5, 6, shape).astype(dtype)
    x = rng.normal(size=shape)
    if dtype.startswith("complex"):
        x = x + 1j * rng.normal(size=shape)
    return x.astype(dtype)


def _result_dtype(dtype):
    """JAX's result dtype of a DCT under x64: complex stays, float64 and int64 give float64,
    everything else float32."""
    if dtype.startswith("complex"):
        return np.dtype(dtype)
    return np.dtype("float64" if dtype in ("float64", "int64") else "float32")


def _assert_close(got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    single = np.dtype(dtype) in (np.float32, np.complex64)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    tol = 2e-5 if single else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


shapes = st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple)
# a shape and one of its axes, negative or not
shapes_and_axes = shapes.flatmap(lambda s: st.tuples(st.just(s), st.integers(-len(s), len(s) - 1)))


# -- trapezoid ----------------------------------------------------------------------------------


@settings(max_examples=40)
@given(
    shapes_and_axes,
    st.sampled_from(["dx", "dx_array", "x_1d", "x_full"]),
    st.sampled_from(["float32", "float64", "int32"]),
    st.integers(0, 2**16),
)
def test_trapezoid_matches_scipy(shape_and_axis, spacing, dtype, seed):
    shape, axis = shape_and_axis
    n = shape[axis]
    assume(n > 0 or spacing.startswith("x"))  # constant spacing needs a sample (JAX)
    rng = np.random.default_rng(seed)
    y = _sample(shape, dtype, seed)
    # the spacings' precision is y's, or they would promote the result (JAX, NumPy)
    sdt = np.float64 if dtype == "float64" else np.float32
    kwargs = {}
    if spacing == "dx":
        kwargs["dx"] = float(rng.uniform(0.1, 2.0))
    elif spacing == "dx_array":  # one spacing per interval, laid out like y
        intervals = list(shape)
        intervals[axis] = max(n - 1, 0)
        kwargs["dx"] = rng.uniform(0.1, 2.0, intervals).astype(sdt)
    elif spacing == "x_1d":
        kwargs["x"] = np.cumsum(rng.uniform(0.1, 2.0, n)).astype(sdt)
    else:
        kwargs["x"] = np.cumsum(rng.uniform(0.1, 2.0, shape), axis=axis).astype(sdt)
    with fg.enable_x64():
        got = integrate.trapezoid(y, axis=axis, **kwargs)
        assert got.dtype == _result_dtype(dtype)
        want = sint.trapezoid(y.astype(np.float64), axis=axis, **kwargs)
        _assert_close(got, want, got.dtype)


def test_trapezoid_dtypes_follow_jax():
    y32 = np.arange(6, dtype=np.float32)
    assert integrate.trapezoid(np.arange(4)).dtype == np.float32  # integers integrate as floats
    assert integrate.trapezoid(np.array([True, False, True])).dtype == np.float32
    assert integrate.trapezoid(y32, dx=2).dtype == np.float32  # a Python dx is weak
    assert integrate.trapezoid(np.ones((2, 3)), axis=0).dtype == np.float32  # float64 w/o x64
    # a complex dx makes the result complex (NumPy's rule, JAX's too)
    got = integrate.trapezoid(y32, dx=2j)
    assert got.dtype == np.complex64 and complex(got) == 25j
    with fg.enable_x64():
        assert integrate.trapezoid(y32, dx=np.float64(0.5)).dtype == np.float64
        assert integrate.trapezoid(y32, dx=0.5).dtype == np.float32
        assert integrate.trapezoid(y32, x=np.arange(6.0)).dtype == np.float64
        assert integrate.trapezoid(np.arange(4, dtype=np.int64)).dtype == np.float64


def test_trapezoid_jax_semantics():
    y = np.arange(12.0).reshape(3, 4)
    # a dx array is laid out like y (its integration axis in y's): one spacing per row here
    got = integrate.trapezoid(y, dx=np.array([[1.0], [2.0], [3.0]]))
    np.testing.assert_allclose(np.asarray(got), [4.5, 33.0, 85.5])
    np.testing.assert_allclose(np.asarray(integrate.trapezoid(y, dx=[2.0])), [9, 33, 57])
    # x of two points is one spacing for every interval, whatever y's length (JAX)
    np.testing.assert_allclose(float(integrate.trapezoid(np.ones(5), x=np.array([0.0, 2.0]))), 8)
    # x broadcasts against y
    got = integrate.trapezoid(y, x=np.array([[0.0], [1.0], [5.0]]), axis=0)
    np.testing.assert_allclose(np.asarray(got), [26, 31, 36, 41])
    # one sample: no interval; no samples: 0 with x, an IndexError with a constant spacing
    np.testing.assert_array_equal(np.asarray(integrate.trapezoid(np.ones((3, 1)))), 0)
    empty = np.zeros((3, 0), np.float32)
    np.testing.assert_array_equal(np.asarray(integrate.trapezoid(empty, x=np.zeros(0))), 0)
    assert integrate.trapezoid(np.zeros((0, 3))).shape == (0,)
    with pytest.raises(IndexError, match="trapezoid: y has no samples along axis"):
        integrate.trapezoid(empty)


def test_trapezoid_errors():
    y = np.ones((3, 4))
    with pytest.raises(ValueError, match="trapezoid: axis -1 is out of bounds"):
        integrate.trapezoid(np.float32(1))
    with pytest.raises(ValueError, match="trapezoid: axis 2 is out of bounds"):
        integrate.trapezoid(y, axis=2)
    with pytest.raises(TypeError, match="trapezoid: axis must be an int"):
        integrate.trapezoid(y, axis=1.0)
    with pytest.raises(TypeError, match="trapezoid requires ndarray"):
        integrate.trapezoid([1.0, 2.0])
    with pytest.raises(TypeError, match="trapezoid requires ndarray"):
        integrate.trapezoid(y, x=[0, 1, 2, 3])
    with pytest.raises(ValueError, match="diff"):
        integrate.trapezoid(y, x=np.float32(2))
    # spacings that do not fit y's intervals: JAX's types (ValueError when the ranks differ)
    with pytest.raises(ValueError, match=r"trapezoid: the spacings .* shape \(2,\)"):
        integrate.trapezoid(y, x=np.arange(3.0))
    with pytest.raises(TypeError, match=r"trapezoid: the spacings .* shape \(1, 4\)"):
        integrate.trapezoid(y, dx=np.ones(4))


def test_trapezoid_gradients(x64):
    rng = np.random.default_rng(0)
    y, x = rng.normal(size=(3, 5)), np.cumsum(rng.uniform(0.5, 1.5, 5))
    check_grads(lambda y, x: integrate.trapezoid(y, x), (y, x), order=2)
    check_grads(lambda y, d: integrate.trapezoid(y, dx=d, axis=0), (y, 0.7), order=2)
    check_grads(lambda y, d: integrate.trapezoid(y, dx=d), (y, rng.uniform(size=4)), order=1)


def test_trapezoid_jit_and_vmap():
    rng = np.random.default_rng(1)
    y = rng.normal(size=(4, 6)).astype(np.float32)
    x = np.cumsum(rng.uniform(0.5, 1.5, (4, 6)), axis=1).astype(np.float32)
    eager = integrate.trapezoid(y, x)
    np.testing.assert_allclose(np.asarray(fg.jit(integrate.trapezoid)(y, x)), eager, rtol=1e-6)
    batched = fg.vmap(lambda yi, xi: integrate.trapezoid(yi, xi, axis=0), in_axes=(0, 0))(y, x)
    loop = [integrate.trapezoid(y[i], x[i], axis=0) for i in range(4)]
    np.testing.assert_allclose(np.asarray(batched), np.stack(loop), rtol=1e-6)
    batched = fg.vmap(lambda yi: integrate.trapezoid(yi, dx=0.5), in_axes=1)(y)
    loop = [integrate.trapezoid(y[:, j], dx=0.5) for j in range(6)]
    np.testing.assert_allclose(np.asarray(batched), np.stack(loop), rtol=1e-6)


# -- dct and idct -------------------------------------------------------------------------------


@settings(max_examples=60)
@given(
    shapes_and_axes,
    st.one_of(st.none(), st.integers(1, 8)),
    st.sampled_from(NORMS),
    st.sampled_from(DTYPES),
    st.sampled_from(["dct", "idct"]),
    st.integers(0, 2**16),
)
def test_dct_idct_match_scipy(shape_and_axis, n, norm, dtype, name, seed):
    shape, axis = shape_and_axis
    assume(n is not None or shape[axis] > 0)  # JAX: no transform of length 0
    x = _sample(shape, dtype, seed)
    with fg.enable_x64():
        got = getattr(fft, name)(x, n=n, axis=axis, norm=norm)
        assert got.dtype == _result_dtype(dtype)
        ref_x = x.astype(np.complex128 if dtype.startswith("complex") else np.float64)
        want = getattr(sfft, name)(ref_x, n=n, axis=axis, norm=norm)
        _assert_close(got, want, got.dtype)


@settings(max_examples=60)
@given(
    st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple),
    st.data(),
    st.sampled_from(NORMS),
    st.sampled_from(["float32", "float64", "int32", "complex128"]),
    st.sampled_from(["dctn", "idctn"]),
    st.integers(0, 2**16),
)
def test_dctn_idctn_match_scipy(shape, data, norm, dtype, name, seed):
    ndim = len(shape)
    if data.draw(st.booleans(), "axes given"):
        axes = data.draw(st.permutations(range(ndim)), "order")[: data.draw(st.integers(0, ndim))]
        axes = [a - ndim if data.draw(st.booleans(), "negative") else a for a in axes]
        transformed = axes
    else:
        axes = None
    s = None
    if data.draw(st.booleans(), "s given"):
        k = len(axes) if axes is not None else data.draw(st.integers(0, ndim), "len(s)")
        s = data.draw(st.lists(st.integers(1, 5), min_size=k, max_size=k), "s")
    if axes is None:
        transformed = range(ndim - len(s), ndim) if s is not None else range(ndim)
    sizes = dict(zip(transformed, s)) if s is not None else {}
    assume(all(sizes.get(a, shape[a]) > 0 for a in transformed))
    x = _sample(shape, dtype, seed)
    with fg.enable_x64():
        got = getattr(fft, name)(x, s=s, axes=axes, norm=norm)
        if list(transformed):
            assert got.dtype == _result_dtype(dtype)
        else:  # nothing transformed: x itself, integers included (JAX)
            assert got.dtype == x.dtype
        ref_x = x.astype(np.complex128 if dtype.startswith("complex") else np.float64)
        want = getattr(sfft, name)(ref_x, s=s, axes=axes, norm=norm)
        _assert_close(got, want, got.dtype)


@settings(max_examples=20)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
    st.sampled_from(NORMS),
    st.sampled_from(["float32", "complex64"]),
    st.integers(0, 2**16),
)
def test_round_trips(shape, norm, dtype, seed):
    x = _sample(shape, dtype, seed)
    for forward, inverse in ((fft.dct, fft.idct), (fft.idct, fft.dct)):
        _assert_close(inverse(forward(x, norm=norm), norm=norm), x, dtype)
        _assert_close(inverse(forward(x, axis=0, norm=norm), axis=0, norm=norm), x, dtype)
    for forward, inverse in ((fft.dctn, fft.idctn), (fft.idctn, fft.dctn)):
        _assert_close(inverse(forward(x, norm=norm), norm=norm), x, dtype)


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("dct", dict(n=7, axis=0, norm="ortho")),
        ("idct", dict(n=3, axis=-1)),
        ("dctn", dict(s=(5, 2), axes=(1, 0))),
        ("idctn", dict(norm="ortho")),
    ],
)
def test_jit_matches_eager(name, kwargs):
    x = _sample((4, 6), "float32", 3)
    f = getattr(fft, name)
    eager = f(x, **kwargs)
    compiled = fg.jit(lambda a: f(a, **kwargs))(x)
    assert compiled.dtype == eager.dtype == np.float32
    _assert_close(compiled, eager, "float32")


def test_default_dtypes_without_x64():
    for name in ("dct", "idct", "dctn", "idctn"):
        f = getattr(fft, name)
        for dtype in ("float16", "float32", "float64", "int32", "int64", "uint8", "bool"):
            assert f(np.ones((2, 3), dtype)).dtype == np.float32, (name, dtype)
        assert f(np.ones((2, 3), np.complex128)).dtype == np.complex64
    # float16 computes in float32: the inverse is accurate to float32, not float16
    x = np.linspace(-1, 1, 7).astype(np.float16)
    _assert_close(fft.idct(x, norm="ortho"), sfft.idct(x.astype(np.float64), norm="ortho"), "f4")


def test_dctn_jax_conventions():
    x = _sample((3, 4, 5), "float64", 7)
    # s pairs with axes by zip (JAX; SciPy requires equal lengths): only axis 0 is resized here
    got = fft.dctn(x, s=[2], axes=(0, 1))
    _assert_close(got, sfft.dctn(x, s=[2, 4], axes=(0, 1)), "float32")
    got = fft.idctn(x, s=[2, 6], axes=(2,))
    _assert_close(got, sfft.idct(x, n=2, axis=2), "float32")
    # axes may be an int; axes=() (or a 0-d x) returns x unchanged, dtype included
    _assert_close(fft.dctn(x, axes=-1), sfft.dct(x, axis=-1), "float32")
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert fft.dctn(ints, axes=()).dtype == np.int32
    assert fft.idctn(np.int32(3)).dtype == np.int32 and int(fft.idctn(np.int32(3))) == 3
    # s alone picks the last len(s) axes; an int s is one length
    _assert_close(fft.dctn(x, s=3), sfft.dct(x, n=3), "float32")
    # a size-0 axis is fine when n pads it, or when it is not transformed
    got = fft.dct(np.zeros((2, 0), np.float32), n=3)
    assert got.shape == (2, 3) and not np.asarray(got).any()
    assert fft.dctn(np.zeros((0, 3), np.float32), axes=(1,)).shape == (0, 3)


def test_gradients(x64):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 5))
    for norm in (None, "ortho"):
        for f in (fft.dct, fft.idct):
            check_grads(lambda a, f=f, norm=norm: f(a, n=4, axis=0, norm=norm), (x,), order=2)
            check_grads(lambda a, f=f, norm=norm: f(a, n=7, norm=norm), (x,), order=1)
            check_grads(lambda a, f=f, norm=norm: f(a * (1 + 2j), norm=norm), (x,), order=1)
        for f in (fft.dctn, fft.idctn):
            check_grads(lambda a, f=f, norm=norm: f(a, s=(4, 6), norm=norm), (x,), order=2)
            check_grads(lambda a, f=f, norm=norm: f(a, axes=(0,), norm=norm), (x,), order=1)


def test_vmap_matches_loop():
    x = _sample((3, 4, 5), "float32", 11)
    for f, kwargs in (
        (fft.dct, dict(n=6, norm="ortho")),
        (fft.idct, dict(axis=0)),
        (fft.dctn, dict(s=(3, 2))),
        (fft.idctn, dict(axes=(1,), norm="ortho")),
    ):
        for in_axis in (0, 2):
            batched = fg.vmap(lambda a, f=f, kw=kwargs: f(a, **kw), in_axes=in_axis)(x)
            loop = np.stack(
                [f(np.take(x, i, axis=in_axis), **kwargs) for i in range(x.shape[in_axis])]
            )
            _assert_close(batched, loop, "float32")


@pytest.mark.parametrize("name", ["dct", "idct", "dctn", "idctn"])
def test_errors(name):
    f = getattr(fft, name)
    x = np.ones((3, 4), np.float32)
    length = "s" if name.endswith("n") else "n"
    for bad_type in (1, 3, 4, "2", None):
        with pytest.raises(NotImplementedError, match=f"{name}: type=.* only the type-2 DCT"):
            f(x, type=bad_type)
    for bad_norm in ("forward", "bad"):
        with pytest.raises(ValueError, match=f"{name}: norm='{bad_norm}' is not implemented"):
            f(x, norm=bad_norm)
    with pytest.raises(NotImplementedError):  # type is checked before norm, as in JAX
        f(x, type=3, norm="forward")
    with pytest.raises(TypeError, match=f"{name} requires ndarray"):
        f([1.0, 2.0])
    with pytest.raises(TypeError, match=f"{name}: x has size 0 along axis 1"):
        f(np.zeros((3, 0)))
    with pytest.raises(TypeError, match=f"{name}: {length} is 0"):
        f(x, **{length: 0} if length == "n" else {"s": (0,)})
    with pytest.raises(ValueError, match=f"{name}: {length} must be positive"):
        f(x, **{length: -1} if length == "n" else {"s": (2, -1)})
    with pytest.raises(TypeError, match=f"{name}: {length} must be"):
        f(x, **{length: 2.0})
    if length == "n":
        assert f(x, type=2.0).shape == (3, 4)  # JAX compares type with 2
        with pytest.raises(ValueError, match=f"{name}: axis -1 is out of bounds"):
            f(np.float32(2))
        with pytest.raises(ValueError, match=f"{name}: axis 2 is out of bounds"):
            f(x, axis=2)
        with pytest.raises(TypeError, match=f"{name}: axis must be an int"):
            f(x, axis=(0,))
    else:
        with pytest.raises(ValueError, match=f"{name}: s must have at most x.ndim"):
            f(x, s=(1, 2, 3))
        with pytest.raises(ValueError, match=f"{name}: repeated axis"):
            f(x, axes=(1, -1))
        with pytest.raises(ValueError, match=f"{name}: axis -3 is out of bounds"):
            f(x, axes=(0, -3))
