"""fungrad.scipy.ndimage.map_coordinates: values against a small numpy reference (np.pad gives
each mode's index mapping) and against scipy.ndimage.map_coordinates (test-only oracle) for
every mode and both orders on 1-d to 3-d inputs with size-1 axes, eagerly and under jit;
JAX 0.10's documented differences from SciPy ('constant'/'wrap' are SciPy's 'grid-constant'/
'grid-wrap', order 0 rounds halves away from zero); dtypes, NaN and huge coordinates with the
values JAX gives; gradients (check_grads, float64) with respect to the input, the coordinates
and cval; vmap against a Python loop; the errors for bad input."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.scipy
from fungrad.scipy.ndimage import map_coordinates
from fungrad.testing import check_grads

nd = pytest.importorskip("scipy.ndimage")

MODES = ("constant", "nearest", "wrap", "mirror", "reflect")
ORDERS = (0, 1)
# numpy.pad's name for each mode's extension of the input beyond its edges
_NP_PAD = {
    "constant": "constant",
    "nearest": "edge",
    "wrap": "wrap",
    "mirror": "reflect",
    "reflect": "symmetric",
}
# JAX's 'constant' and 'wrap' are SciPy's grid modes (JAX's documentation)
_SCIPY_MODE = {"constant": "grid-constant", "wrap": "grid-wrap"}


def _reference(x, coordinates, order, mode, cval=0.0):
    """float64 interpolation of ``x`` padded by numpy (``|coordinates| < 3 * size + 3``)."""
    x = np.asarray(x, np.float64)
    coords = np.broadcast_arrays(*[np.asarray(c, np.float64) for c in coordinates])
    pad = 4 * max(x.shape) + 4
    kw = {"constant_values": cval} if mode == "constant" else {}
    padded = np.pad(x, pad, mode=_NP_PAD[mode], **kw)
    if order == 0:  # round half away from zero
        nodes = [[(np.sign(c) * np.floor(np.abs(c) + 0.5), 1.0)] for c in coords]
    else:
        nodes = [
            [(np.floor(c), 1 - (c - np.floor(c))), (np.floor(c) + 1, c - np.floor(c))]
            for c in coords
        ]
    out = np.zeros(coords[0].shape if coords else ())
    for corner in itertools.product(*nodes):
        index = tuple(i.astype(np.int64) + pad for i, _ in corner)
        out = out + np.prod([w for _, w in corner], axis=0) * padded[index]
    return out


def _scipy(x, coordinates, order, mode, cval=0.0):
    coords = np.broadcast_arrays(*[np.asarray(c, np.float64) for c in coordinates])
    flat = nd.map_coordinates(
        np.asarray(x, np.float64),
        np.stack([c.ravel() for c in coords]),
        order=order,
        mode=_SCIPY_MODE.get(mode, mode),
        cval=cval,
    )
    return flat.reshape(coords[0].shape)


def _has_half(coordinates):
    """Points with a coordinate exactly halfway between samples (SciPy's order 0 rounds
    those differently from JAX)."""
    coords = np.broadcast_arrays(*[np.asarray(c, np.float64) for c in coordinates])
    return np.any([c - np.floor(c) == 0.5 for c in coords], axis=0)


@st.composite
def _cases(draw):
    """(x, coordinates): a 1-d to 3-d input with axes of size 1 to 4 and coordinate arrays
    inside and outside it, on the quarter grid (integers, halves) or anywhere."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    n = draw(st.integers(0, 6))
    coordinates = []
    for size in shape:
        value = st.one_of(
            st.integers(-8 * size - 8, 12 * size + 8).map(lambda k: k / 4),
            st.floats(-2 * size - 2, 3 * size + 2),
        )
        coordinates.append(np.array(draw(st.lists(value, min_size=n, max_size=n))))
    seed = draw(st.integers(0, 2**16))
    return np.random.default_rng(seed).normal(size=shape), coordinates


@given(_cases(), st.sampled_from(MODES), st.sampled_from(ORDERS), st.sampled_from([0.0, -1.5]))
def test_values_match_reference_and_scipy_float64(case, mode, order, cval):
    x, coordinates = case
    with fg.enable_x64():
        got = map_coordinates(x, coordinates, order, mode=mode, cval=cval)
        assert got.dtype == np.float64
    got = np.asarray(got)
    assert got.shape == coordinates[0].shape
    np.testing.assert_allclose(got, _reference(x, coordinates, order, mode, cval), atol=1e-12)
    agree = ~_has_half(coordinates) if order == 0 else np.ones(got.shape, bool)
    want = _scipy(x, coordinates, order, mode, cval)
    np.testing.assert_allclose(got[agree], want[agree], atol=1e-12)


def _float32_points(shape):
    """Coordinates for each axis: inside, on the samples, halfway, and beyond both edges."""
    rng = np.random.default_rng(len(shape))
    out = []
    for size in shape:
        special = [0.0, size - 1.0, 0.5, -0.5, size - 0.5, -1.0, size + 0.0, -1.7, 2 * size + 0.3]
        c = np.concatenate([special, rng.uniform(-2 * size - 1, 3 * size + 1, 7)])
        out.append(rng.permutation(c).astype(np.float32))
    return out


@pytest.mark.parametrize("shape", [(5,), (3, 1, 4)], ids=str)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_float32_eager_and_jit(shape, order, mode):
    x = np.random.default_rng(1).normal(size=shape).astype(np.float32)
    coordinates = _float32_points(shape)
    eager = map_coordinates(x, coordinates, order, mode=mode, cval=2.5)
    jitted = fg.jit(lambda x, c: map_coordinates(x, c, order, mode=mode, cval=2.5))(x, coordinates)
    assert eager.dtype == jitted.dtype == np.float32
    want = _reference(x, coordinates, order, mode, 2.5)
    np.testing.assert_allclose(np.asarray(eager), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_nan_coordinates(mode, order):
    """Order 1: NaN. Order 0: JAX's int32 conversion makes NaN index 0, so the point reads
    the input's first sample along that axis."""
    x = fnp.arange(12.0).reshape(3, 4)
    rows, cols = np.array([np.nan, 1.0, np.nan]), np.array([2.0, np.nan, np.nan])
    for f in (map_coordinates, fg.jit(map_coordinates, static_argnums=(2, 3))):
        got = np.asarray(f(x, [rows, cols], order, mode))
        want = [np.nan] * 3 if order == 1 else [2.0, 4.0, 0.0]
        np.testing.assert_array_equal(got, want)


def test_huge_and_infinite_coordinates():
    """Values JAX 0.10 gives: indices saturate to int32, so far points read cval or the edge
    (order 1 at +-inf is NaN: inf - floor(inf))."""
    x = fnp.arange(5.0)
    c = [np.array([1e10, -1e10, np.inf, -np.inf], np.float32)]
    nan = np.nan
    np.testing.assert_array_equal(np.asarray(map_coordinates(x, c, 1)), [0, 0, nan, nan])
    np.testing.assert_array_equal(np.asarray(map_coordinates(x, c, 0)), [0, 0, 0, 0])
    np.testing.assert_array_equal(np.asarray(map_coordinates(x, c, 0, "nearest")), [4, 0, 4, 0])
    got = np.asarray(map_coordinates(x, c, 1, "nearest"))
    np.testing.assert_array_equal(got, [4, 0, nan, nan])


def test_order0_rounds_half_away_from_zero():
    x = fnp.arange(5.0)
    got = map_coordinates(x, [np.array([0.5, 1.5, 2.5, -0.5, 1.49999, 3.5])], 0, "nearest")
    np.testing.assert_array_equal(np.asarray(got), [1, 2, 3, 0, 1, 4])
    got = map_coordinates(x, [np.array([-0.5, -1.5, -2.5])], 0, "wrap")
    np.testing.assert_array_equal(np.asarray(got), [4, 3, 2])  # -1, -2, -3 wrapped


def test_documented_examples_and_mode_values():
    x = fnp.arange(12.0).reshape(3, 4)
    got = map_coordinates(x, [fnp.array([0.5, 1.5]), fnp.array([1.5, 2.5])], order=1)
    np.testing.assert_array_equal(np.asarray(got), [3.5, 8.5])
    # JAX 0.10's values at points beyond both edges of arange(5.0)
    c = [np.array([-1.5, -0.5, 0.4, 0.5, 2.5, 4.5, 5.5])]
    want = {
        ("constant", 1): [-9, -4.5, 0.4, 0.5, 2.5, -2.5, -9],
        ("nearest", 1): [0, 0, 0.4, 0.5, 2.5, 4, 4],
        ("wrap", 1): [3.5, 2, 0.4, 0.5, 2.5, 2, 0.5],
        ("mirror", 1): [1.5, 0.5, 0.4, 0.5, 2.5, 3.5, 2.5],
        ("reflect", 1): [0.5, 0, 0.4, 0.5, 2.5, 4, 3.5],
        ("constant", 0): [-9, -9, 0, 1, 3, -9, -9],
        ("nearest", 0): [0, 0, 0, 1, 3, 4, 4],
        ("wrap", 0): [3, 4, 0, 1, 3, 0, 1],
        ("mirror", 0): [2, 1, 0, 1, 3, 3, 2],
        ("reflect", 0): [1, 0, 0, 1, 3, 4, 3],
    }
    for (mode, order), values in want.items():
        got = map_coordinates(fnp.arange(5.0), c, order, mode=mode, cval=-9.0)
        np.testing.assert_allclose(np.asarray(got), values, rtol=1e-6, err_msg=f"{mode} {order}")


@pytest.mark.parametrize("mode", MODES)
def test_size_one_axis_reads_its_sample(mode):
    got = map_coordinates(fnp.full((1,), 7.0), [np.array([-3.0, -1.5, 0.0, 0.5, 2.3])], 1, mode)
    if mode == "constant":  # blends with cval=0 away from the sample
        np.testing.assert_allclose(np.asarray(got), [0, 0, 7, 3.5, 0], rtol=1e-6)
    else:
        np.testing.assert_array_equal(np.asarray(got), [7.0] * 5)


def test_coordinates_broadcast_and_accepted_forms():
    x = fnp.arange(6.0).reshape(2, 3)
    rows, cols = np.array([[0.5], [1.0]]), np.array([0.5, 1.5, 2.0])
    got = map_coordinates(x, [rows, cols], 1)
    assert got.shape == (2, 3)
    np.testing.assert_allclose(np.asarray(got), _reference(x, [rows, cols], 1, "constant"))
    assert map_coordinates(x, [0.5, 1.0], 1).shape == ()
    assert map_coordinates(x, [np.zeros(0), np.zeros(0)], 1).shape == (0,)
    points = np.array([[0.5, 1.0], [1.5, 2.0]])  # (ndim, n): one array per axis
    want = np.asarray(map_coordinates(x, list(points), 1))
    np.testing.assert_array_equal(np.asarray(map_coordinates(x, points, 1)), want)
    np.testing.assert_array_equal(np.asarray(map_coordinates(x, points.tolist(), 1)), want)
    assert float(map_coordinates([0.0, 1.0, 2.0], [[0.5]], 1)[0]) == 0.5


def test_dtypes_as_jax():
    ints = fnp.arange(5)
    c = [np.array([0.5, 1.5, 0.25, -0.5], np.float32)]
    got = map_coordinates(ints, c, 1)  # 0.5, 1.5, 0.25, -0.5 * 0 + 0.5 * 0: rounded away
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), [1, 2, 0, 0])
    assert map_coordinates(ints, [np.array([1, 2])], 1).dtype == np.int32
    assert map_coordinates(fnp.arange(5.0), [np.array([1, 2])], 0).dtype == np.float32
    # cval is cast to the input's dtype: int8 3.7 -> 3; uint8 7
    got = map_coordinates(fnp.array([1, 3], np.int8), [np.array([-0.5, 0.5])], 1, cval=3.7)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(got), [2, 2])
    got = map_coordinates(fnp.array([1, 3], np.uint8), [np.array([-0.5, 0.5])], 1, cval=7)
    np.testing.assert_array_equal(np.asarray(got), [4, 2])
    # integers go through the weights' float32, as in JAX (2**24 + 1 is not a float32)
    big = fnp.array([2**24 + 1, 5], np.int32)
    assert int(map_coordinates(big, [np.array([0.2], np.float32)], 0)[0]) == 2**24
    assert int(map_coordinates(big, [np.array([0])], 0)[0]) == 2**24 + 1
    got = map_coordinates(fnp.array([True, False, True]), [np.array([0.5, 1.2])], 1)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(got), [True, True])
    got = map_coordinates(fnp.array([1 + 2j, 3 + 0j]), [np.array([0.5])], 1)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(got), [2 + 1j])
    # float16 input: Python-scalar (weak) coordinates interpolate in float16, float32 ones
    # in float32 (JAX's promotion); the result is float16 either way
    half = fnp.array([1.0, 2.0], np.float16)
    weak = map_coordinates(half, [0.3], 1)
    strong = map_coordinates(half, [np.float32(0.3)], 1)
    assert weak.dtype == strong.dtype == np.float16
    assert float(weak) == float(np.float16(1.301)) and float(strong) == float(np.float16(1.3))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_grad_wrt_input(x64, mode, order):
    x = np.random.default_rng(2).normal(size=(3, 1, 4))
    coordinates = _float32_points(x.shape)
    coordinates = [c.astype(np.float64) for c in coordinates]
    check_grads(lambda x: map_coordinates(x, coordinates, order, mode, 0.5), (x,), order=1)


@pytest.mark.parametrize("mode", MODES)
def test_grad_wrt_coordinates_linear(x64, mode):
    """Away from whole coordinates order 1 is smooth in them: finite differences agree."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 3))
    whole = np.array([[-2, -1, 0, 1, 2, 3, 4, 6], [-1, 0, 1, 2, 3, 0, -3, 5]], np.float64)
    rows, cols = whole + rng.uniform(0.1, 0.9, whole.shape)
    f = lambda r, c: map_coordinates(x, [r, c], 1, mode, -0.7)  # noqa: E731
    check_grads(f, (rows, cols), order=2)


def test_grad_wrt_coordinates_at_whole_values_and_order0():
    """At a whole coordinate JAX's order 1 gives the slope towards the next sample (the
    weight is c - floor(c)); order 0 is piecewise constant: zero gradient."""
    x = fnp.arange(5.0) ** 2
    c = fnp.array([0.0, 1.0, 1.5, 4.0, -1.0, 4.5, -0.5])
    for grad in (fg.grad, lambda f: fg.jit(fg.grad(f))):
        g = grad(lambda c: fnp.sum(map_coordinates(x, [c], 1)))(c)
        np.testing.assert_array_equal(np.asarray(g), [1, 3, 3, -16, 0, -16, 0])
    g = fg.grad(lambda c: fnp.sum(map_coordinates(x, [c], 0)))(c)
    np.testing.assert_array_equal(np.asarray(g), np.zeros(7))


def test_grad_wrt_cval(x64):
    """cval may be traced here (JAX makes it static): its gradient is the weight of the
    corners outside the input."""
    x = np.arange(6.0).reshape(2, 3)
    coordinates = [np.array([-0.25, 0.5, 1.5, 2.0]), np.array([0.5, -1.0, 2.75, 1.0])]
    check_grads(lambda v: map_coordinates(x, coordinates, 1, cval=v), (np.float64(1.5),), 2)
    g = fg.grad(lambda v: fnp.sum(map_coordinates(x, coordinates, 1, cval=v)))(0.0)
    want = _reference(np.zeros_like(x), coordinates, 1, "constant", 1.0).sum()
    np.testing.assert_allclose(float(g), want)


@pytest.mark.parametrize(("mode", "order"), [(m, 1) for m in MODES] + [("constant", 0)])
def test_vmap_matches_loop(mode, order):
    rng = np.random.default_rng(4)
    xs = rng.normal(size=(3, 4, 2)).astype(np.float32)
    rows = rng.uniform(-2, 6, size=(3, 5)).astype(np.float32)
    cols = rng.uniform(-2, 3, size=(3, 5)).astype(np.float32)
    f = lambda x, r, c: map_coordinates(x, [r, c], order, mode, 1.5)  # noqa: E731
    loop = np.stack([np.asarray(f(xs[i], rows[i], cols[i])) for i in range(3)])
    np.testing.assert_allclose(np.asarray(fg.vmap(f)(xs, rows, cols)), loop, rtol=1e-6)
    one_input = np.stack([np.asarray(f(xs[0], rows[i], cols[i])) for i in range(3)])
    got = fg.vmap(f, in_axes=(None, 0, 0))(xs[0], rows, cols)
    np.testing.assert_allclose(np.asarray(got), one_input, rtol=1e-6)
    one_point = np.stack([np.asarray(f(xs[i], rows[0], cols[0])) for i in range(3)])
    got = fg.vmap(f, in_axes=(0, None, None))(xs, rows[0], cols[0])
    np.testing.assert_allclose(np.asarray(got), one_point, rtol=1e-6)


def test_module_is_reachable_as_jax_scipy_ndimage():
    assert fungrad.scipy.ndimage.map_coordinates is map_coordinates


def test_errors_name_the_function_the_shapes_and_the_fix():
    x = fnp.zeros((3, 4))
    with pytest.raises(ValueError, match=r"map_coordinates.*input.ndim=2.*\(3, 4\).*got 1.*p\.T"):
        map_coordinates(x, [np.zeros(2)], 1)
    with pytest.raises(ValueError, match="got 3"):
        map_coordinates(x, [np.zeros(2)] * 3, 1)
    with pytest.raises(NotImplementedError, match=r"map_coordinates: mode 'bogus'.*'reflect'"):
        map_coordinates(x, [np.zeros(2)] * 2, 1, mode="bogus")
    with pytest.raises(NotImplementedError, match=r"SciPy's 'grid-wrap' is JAX's 'wrap'"):
        map_coordinates(x, [np.zeros(2)] * 2, 1, mode="grid-wrap")
    with pytest.raises(NotImplementedError, match=r"'grid-constant' is JAX's 'constant'"):
        map_coordinates(x, [np.zeros(2)] * 2, 1, mode="grid-constant")
    for order in (2, 3, -1):
        with pytest.raises(NotImplementedError, match=r"order=.*0 \(nearest.*1 \(linear\)"):
            map_coordinates(x, [np.zeros(2)] * 2, order)
    with pytest.raises(TypeError, match=r"map_coordinates: coordinates must be a sequence"):
        map_coordinates(x, 0.5, 1)
    with pytest.raises(TypeError, match=r"integer or real floating.*bool"):
        map_coordinates(x, [np.zeros(2, bool)] * 2, 0)
    with pytest.raises(TypeError, match=r"integer or real floating.*complex"):
        map_coordinates(x, [np.zeros(2, np.complex64)] * 2, 1)
    with pytest.raises(TypeError, match=r"broadcast together.*\(2,\), \(3,\)"):
        map_coordinates(x, [np.zeros(2), np.zeros(3)], 1)
    with pytest.raises(TypeError, match=r"zero-size axis.*\(0, 4\)"):
        map_coordinates(fnp.zeros((0, 4)), [np.zeros(2)] * 2, 1)
    with pytest.raises(TypeError, match=r"at least one axis.*\(\)"):
        map_coordinates(fnp.zeros(()), [], 1)
