"""Complex numbers at the edges, against JAX's behaviour (values computed with JAX 0.10.2 on
CPU and written here as literals): sorting, conversions to non-complex dtypes, eager against
jit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax

NAN, INF = np.nan, np.inf


def c64(*vals):
    return np.array(vals, np.complex64)


def _same(got, want):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# -- sort ---------------------------------------------------------------------------------------

_UNSORTED = c64(
    2 + 1j, 1 + 3j, 1 + 2j, complex(NAN, 0), complex(0, NAN), complex(NAN, NAN),
    complex(1, NAN), complex(-0.0, 1), 0.5j, complex(-INF, 2),
)  # fmt: skip
# jax.lax.sort_key_val(_UNSORTED, arange(10)): real part, then imaginary part, NaNs last
_SORTED_PERM = [9, 8, 7, 4, 2, 1, 6, 0, 3, 5]


@pytest.mark.parametrize("jit", [False, True])
def test_sort_complex_lexicographic_as_jax(jit):
    f = lambda k, v: lax.sort_key_val(k, v)  # noqa: E731
    k, v = (fg.jit(f) if jit else f)(_UNSORTED, np.arange(10, dtype=np.int32))
    _same(v, _SORTED_PERM)
    _same(k, _UNSORTED[_SORTED_PERM])
    _same((fg.jit(lax.sort) if jit else lax.sort)(_UNSORTED), _UNSORTED[_SORTED_PERM])


def test_sort_complex_random_against_numpy_lexsort():
    rng = np.random.default_rng(0)
    z = (rng.integers(-2, 3, (3, 20)) + 1j * rng.integers(-2, 3, (3, 20))).astype(np.complex128)
    want = np.sort(z, axis=1)  # numpy sorts complex lexicographically too (no NaN here)
    with fg.enable_x64():
        _same(lax.sort(z, dimension=1), want)
        _same(fg.jit(lambda a: lax.sort(a, dimension=1))(z), want)
    _same(fg.vmap(lax.sort)(z.astype(np.complex64)), want.astype(np.complex64))


def test_sort_complex_gradient_follows_the_permutation():
    z = c64(3 + 1j, 1 + 2j, 2 + 0j)

    def f(z):
        return fnp.sum(fnp.abs(lax.sort(z)[:2] * np.array([1.0, 2.0], np.float32)))

    # jax.grad(f)(z) with the same f
    want = c64(0, 0.4472136 - 0.8944272j, 2)
    np.testing.assert_allclose(np.asarray(fg.grad(f)(z)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(f))(z)), want, rtol=1e-6)


def test_top_k_rejects_complex_with_valueerror_as_jax():
    with pytest.raises(ValueError, match="top_k: complex"):
        lax.top_k(_UNSORTED, 2)


# -- conversions to non-complex dtypes ----------------------------------------------------------

_CONV = c64(1j, 0, 2.7 + 5j, complex(NAN, 0), complex(0, NAN), -3.5 - 1j, 1e10 + 0j)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize(
    "dtype,want",
    [  # jax.lax.convert_element_type(_CONV, dtype): the real part, then the real cast
        (np.bool_, [False, False, True, True, False, True, True]),
        (np.int32, [0, 0, 2, 0, 0, -3, 2147483647]),
        (np.uint8, [0, 0, 2, 0, 0, 0, 255]),
        (np.float32, [0, 0, 2.7, NAN, 0, -3.5, 1e10]),
    ],
)
def test_convert_complex_to_real_dtypes_takes_the_real_part(jit, dtype, want):
    f = lambda x: lax.convert_element_type(x, dtype)  # noqa: E731
    with pytest.warns(np.exceptions.ComplexWarning):
        got = (fg.jit(f) if jit else f)(_CONV)
    assert np.asarray(got).dtype == dtype
    _same(got, np.array(want, dtype))


@pytest.mark.parametrize("jit", [False, True])
def test_astype_bool_of_complex_is_nonzero_as_jnp(jit):
    # jnp.astype(x, bool) tests x != 0; jnp.array(x, dtype=bool) takes the real part
    x = c64(1j, 0, 2, complex(NAN, 0), complex(0, NAN))
    wrap = fg.jit if jit else (lambda f: f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(wrap(lambda a: a.astype(bool))(x), [True, False, True, True, True])
        _same(wrap(lambda a: fnp.astype(a, bool))(x), [True, False, True, True, True])


# -- complex arrays on the GPU ------------------------------------------------------------------


@pytest.mark.usefixtures("gpu")
def test_device_put_complex64_round_trips_and_feeds_a_gpu_jit():
    z = c64(1 + 2j, 3 - 1j, complex(INF, -0.0), complex(NAN, 1), -2.5j, 1e-40 + 7j).reshape(2, 3)
    g = fg.device_put(z, "gpu")
    assert g.dtype == np.complex64 and g.shape == (2, 3)
    _same(g, z)
    _same(fg.device_put(g, "cpu"), z)
    out = fg.jit(lambda x: x * (2 - 1j) + 1, backend="gpu")(g)
    np.testing.assert_allclose(np.asarray(out), z * np.complex64(2 - 1j) + 1, rtol=1e-6)
    _same(fg.device_put(np.complex64(3 - 4j), "gpu"), np.complex64(3 - 4j))
    assert np.asarray(fg.device_put(np.zeros((0, 3), np.complex64), "gpu")).shape == (0, 3)


@pytest.mark.usefixtures("gpu")
def test_device_put_complex128_is_a_typeerror():
    with fg.enable_x64(), pytest.raises(TypeError, match="complex128 arrays cannot live on"):
        fg.device_put(np.zeros(2, np.complex128), "gpu")


# -- sign and division at infinities (XLA's special values) -------------------------------------

_SIGN_IN = c64(
    complex(INF, 0), complex(INF, 1), complex(1, INF), complex(0, INF), complex(INF, INF),
    complex(-INF, -0.0), complex(0.5, -INF), complex(NAN, 0), complex(1, NAN),
    complex(3e38, 3e38), complex(-0.0, 0), complex(0, -0.0), complex(1e-20, 1e-20), 3 + 4j,
)  # fmt: skip
# jax.lax.sign(_SIGN_IN): each part divided by |z| (|z| overflowing to inf gives 0); z at 0
_SIGN_OUT = c64(
    complex(NAN, 0), complex(NAN, 0), complex(0, NAN), complex(0, NAN), complex(NAN, NAN),
    complex(NAN, -0.0), complex(0, NAN), complex(NAN, NAN), complex(NAN, NAN),
    0, complex(-0.0, 0), complex(0, -0.0), 0.70710677 + 0.70710677j, 0.6 + 0.8j,
)  # fmt: skip

_DIV_A = c64(
    complex(-INF, INF), 1 + 1j, complex(INF, 0), 1 + 2j, -1 + 2j, 0, complex(NAN, 1),
    complex(INF, NAN), 3 - 4j, complex(-0.0, 1), complex(INF, 1), 2,
)  # fmt: skip
_DIV_B = c64(
    3, 0, 1 + 1j, complex(INF, 0), complex(INF, -INF), 0, 0, 1, 1 + 2j, complex(-0.0, 0),
    complex(0, -0.0), complex(NAN, INF),
)  # fmt: skip
# jax.jit(jax.lax.div)(_DIV_A, _DIV_B): Smith's algorithm, NaN + NaN*j results recovered
_DIV_OUT = c64(
    complex(-INF, INF), complex(INF, INF), complex(INF, -INF), 0, complex(-0.0, 0),
    complex(NAN, NAN), complex(NAN, INF), complex(INF, NAN), -1 - 2j, complex(NAN, -INF),
    complex(INF, INF), complex(0, -0.0),
)  # fmt: skip


def _same_bits(got, want):
    """Equal values with equal zero signs (NaNs equal)."""
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    for part in (np.real, np.imag):
        g, w = part(got), part(want)
        zero = (w == 0) & (g == 0)
        np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(w[zero]))


@pytest.mark.parametrize("jit", [False, True])
def test_sign_of_complex_as_xla(jit):
    _same_bits((fg.jit(lax.sign) if jit else lax.sign)(_SIGN_IN), _SIGN_OUT)


@pytest.mark.parametrize("jit", [False, True])
def test_complex_division_special_values_as_xla(jit):
    _same_bits((fg.jit(lax.div) if jit else lax.div)(_DIV_A, _DIV_B), _DIV_OUT)
    with fg.enable_x64():
        a, b = _DIV_A.astype(np.complex128), _DIV_B.astype(np.complex128)
        _same_bits((fg.jit(lax.div) if jit else lax.div)(a, b), _DIV_OUT)


def test_complex_division_eager_equals_jit_and_numpy_where_finite():
    parts = [0.0, -0.0, 1.0, -2.5, 0.5, INF, -INF, NAN, 3e38, 1e-20, 1e20]
    z = c64(*[complex(a, b) for a in parts for b in parts])
    a, b = np.repeat(z, z.size), np.tile(z, z.size)
    eager, jitted = np.asarray(lax.div(a, b)), np.asarray(fg.jit(lax.div)(a, b))
    np.testing.assert_array_equal(eager, jitted)  # the same formulas, bit for bit
    finite = np.isfinite(a) & np.isfinite(b) & (b != 0)
    finite &= (np.abs(a) < 1e19) & (np.abs(b) < 1e19) & ((a == 0) | (np.abs(a) > 1e-19))
    finite &= np.abs(b) > 1e-19
    with np.errstate(all="ignore"):
        want = (a[finite].astype(np.complex128) / b[finite]).astype(np.complex64)
    np.testing.assert_allclose(eager[finite], want, rtol=1e-6, atol=0)


def test_nanmean_with_infinities_as_jax():
    x = c64(complex(INF, 1), complex(1, INF), complex(NAN, 0))
    _same(fnp.nanmean(x), np.complex64(complex(INF, INF)))  # jnp.nanmean(x)
    _same(fg.jit(fnp.nanmean)(x), np.complex64(complex(INF, INF)))
    y = c64(complex(-INF, INF), 2)
    _same(fnp.nanmean(y), np.complex64(complex(-INF, INF)))  # jnp.nanmean(y)


# -- combining scatters of complex values under jit ---------------------------------------------

_AT_X = c64(2 + 1j, 1 + 3j, 1 + 2j, 5 - 1j)
_AT_I = np.array([0, 0, 1, 3, 0])
_AT_U = c64(3, 2 + 5j, 1 + 2.5j, complex(-0.0, -1), 0.5 - 0.5j)


@pytest.mark.parametrize(
    "op,want",
    [  # jnp.asarray(_AT_X).at[_AT_I].<op>(_AT_U)
        ("multiply", c64(16.5 + 19.5j, -6.5 + 5.5j, 1 + 2j, -1 - 5j)),
        ("max", c64(3, 1 + 3j, 1 + 2j, 5 - 1j)),
        ("min", c64(0.5 - 0.5j, 1 + 2.5j, 1 + 2j, complex(-0.0, -1))),
    ],
)
def test_complex_scatter_mul_max_min_with_collisions_as_jax(op, want):
    def f(x, u):
        return getattr(x.at[_AT_I], op)(u)

    _same(f(fnp.asarray(_AT_X), _AT_U), want)
    _same(fg.jit(f)(_AT_X, _AT_U), want)


def test_complex_scatter_mul_windows_modes_and_gradient_eager_equals_jit():
    m = (np.arange(12).reshape(3, 4) + 1j * np.arange(12)[::-1].reshape(3, 4)).astype(np.complex64)
    u = c64(*[1 + 1j, 2 - 1j, -1j, 0.5, 3, 1j]).reshape(3, 2)

    def windows(v, u):
        return v.at[np.array([2, 0, 2]), 1:3].multiply(u)

    want = np.asarray(windows(fnp.asarray(m), u))
    np.testing.assert_allclose(np.asarray(fg.jit(windows)(m, u)), want)
    # out-of-bounds updates dropped: jnp...at[[5, 0, -7]].multiply(u, mode="drop")
    drop = lambda v, u: v.at[np.array([5, 0, -7])].multiply(u, mode="drop")  # noqa: E731
    _same(fg.jit(drop)(_AT_X, _AT_U[:3]), c64(-1 + 12j, 1 + 3j, 1 + 2j, 5 - 1j))

    def loss(v):
        return fnp.abs(fnp.sum(v.at[_AT_I].multiply(_AT_U)))

    np.testing.assert_allclose(
        np.asarray(fg.jit(fg.grad(loss))(_AT_X)), np.asarray(fg.grad(loss)(_AT_X)), rtol=1e-6
    )


# -- complex convolutions -----------------------------------------------------------------------


def _conv(a, b):
    return lax.conv_general_dilated(a, b, (1, 2), "SAME", rhs_dilation=(1, 2))


@pytest.mark.parametrize("jit", [False, True])
def test_complex_conv_is_four_real_convs(jit):
    rng = np.random.default_rng(0)
    x = c64(*(rng.normal(size=60) + 1j * rng.normal(size=60))).reshape(2, 2, 3, 5)
    k = c64(*(rng.normal(size=24) + 1j * rng.normal(size=24))).reshape(2, 2, 2, 3)
    got = np.asarray((fg.jit(_conv) if jit else _conv)(x, k))
    r = lambda a, b: np.asarray(_conv(a, b), np.float64)  # noqa: E731  (real convs)
    want = r(x.real, k.real) - r(x.imag, k.imag) + 1j * (r(x.real, k.imag) + r(x.imag, k.real))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # a real kernel with a complex input: its real and imaginary parts convolved alone
    kr = k.real.astype(np.complex64)
    np.testing.assert_allclose(
        np.asarray((fg.jit(_conv) if jit else _conv)(x, kr)),
        r(x.real, k.real) + 1j * r(x.imag, k.real),
        rtol=1e-5,
        atol=1e-5,
    )


def test_complex_conv_gradients():
    from fungrad.testing import check_grads

    rng = np.random.default_rng(1)
    x = c64(*(rng.normal(size=12) + 1j * rng.normal(size=12))).reshape(1, 1, 3, 4)
    k = c64(*(rng.normal(size=4) + 1j * rng.normal(size=4))).reshape(1, 1, 2, 2)
    with fg.enable_x64():
        x, k = x.astype(np.complex128), k.astype(np.complex128)
        check_grads(_conv, (x, k), order=1)

    def loss(a, b):
        return fnp.sum(fnp.abs(_conv(a, b)) ** 2)

    eager = fg.grad(loss, argnums=(0, 1))(x, k)
    jitted = fg.jit(fg.grad(loss, argnums=(0, 1)))(x, k)
    for e, j in zip(eager, jitted):
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-5)


# -- windowed reductions ------------------------------------------------------------------------


def test_complex_reduce_window_sum_eager_jit_and_gradient_as_jax():
    m = (np.arange(16).reshape(1, 1, 4, 4) * (1 + 1j) + 1j).astype(np.complex64)

    def f(a):
        return lax.reduce_window(a, np.complex64(0), lax.add, (1, 1, 2, 2), (1, 1, 1, 2), "SAME")

    # jax.lax.reduce_window(m, 0j, lax.add, ...) with the same arguments
    want = c64(*[10 + 14j, 18 + 22j, 26 + 30j, 34 + 38j, 42 + 46j, 50 + 54j, 25 + 27j, 29 + 31j])
    _same(f(m), want.reshape(1, 1, 4, 2))
    _same(fg.jit(f)(m), want.reshape(1, 1, 4, 2))

    def loss(a):
        return fnp.abs(fnp.sum(f(a)))

    g = np.asarray(fg.grad(loss)(m))[0, 0]  # jax.grad(loss)(m): rows 0.666-0.746j, then 2x
    np.testing.assert_allclose(g[0], np.full(4, 0.66612893 - 0.7458367j), rtol=1e-6)
    np.testing.assert_allclose(g[1:], np.full((3, 4), 1.3322579 - 1.4916734j), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(loss))(m))[0, 0], g, rtol=1e-6)


# -- every elementwise complex function: jit against eager ---------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

_SPECIAL_PARTS = [0.0, -0.0, INF, -INF, NAN, 3e38, -3e38, 1e-30, -1e-30, 1.0, -2.5]
_FINITE_PARTS = [0.0, -0.0, 1e30, -1e30, 1e-30, -1e-30, 1.0, -2.5, 0.5, 7.0]


def _parts(special: bool, big: float):
    pick = st.sampled_from(
        [float(np.float32(v)) for v in (_SPECIAL_PARTS if special else _FINITE_PARTS)]
    )
    big = float(np.float32(big))
    anything = st.floats(-big, big, width=32)
    return st.one_of(pick, anything).filter(lambda v: not (abs(v) > big and np.isfinite(v)))


def _complex_arrays(special: bool, big: float = 3e38):
    part = _parts(special, big)
    return hnp.arrays(np.complex64, 8, elements=st.builds(complex, part, part))


# jit and eager agree at every value (NaN, inf, signed zeros, the largest and tiny finite
# values; C99's special values, numpy's); the inverse functions are drawn again from finite
# values only, where their Kahan forms and asymptotic forms meet.
_UNARY_ALL = ["neg", "sign", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "abs", "real",
              "imag", "conj", "logistic", "exp2", "sin", "cos", "tan", "sinh", "cosh", "tanh",
              "asin", "acos", "atan", "asinh", "acosh", "atanh", "square"]  # fmt: skip
_UNARY_FINITE = ["asin", "acos", "atan", "asinh", "acosh", "atanh"]
# (square again at moderate values, where no part overflows)
_UNARY_MODERATE = ["square"]


def _agree(eager, jitted, rtol):
    e, j = np.asarray(eager).astype(np.complex128), np.asarray(jitted).astype(np.complex128)
    for part, other in ((np.real, np.imag), (np.imag, np.real)):
        pe, pj = part(e), part(j)
        np.testing.assert_array_equal(np.isnan(pe), np.isnan(pj))
        # C99 leaves the sign of an infinity unspecified next to a NaN part
        sign = ~np.isnan(other(e))
        np.testing.assert_array_equal(
            np.isinf(pe) * np.where(sign, np.sign(pe), 1),
            np.isinf(pj) * np.where(sign, np.sign(pj), 1),
        )
    fin = np.isfinite(e) & np.isfinite(j)
    scale = np.maximum(np.abs(e[fin]), 1e-30)
    assert np.all(np.abs(e[fin] - j[fin]) <= rtol * scale), (e[fin], j[fin])


def _program(names):
    fns = [getattr(lax, n) for n in names]
    return lambda z: tuple(f(z) for f in fns)


_GROUPS = {  # (names, special values drawn, largest finite part)
    "all": (_UNARY_ALL, True, 3e38),
    "finite": (_UNARY_FINITE, False, 3e38),
    "moderate": (_UNARY_MODERATE, False, 1e18),
}
_JITTED = {g: fg.jit(_program(names)) for g, (names, _, _) in _GROUPS.items()}


@settings(max_examples=20, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("group", sorted(_GROUPS))
def test_elementwise_complex_jit_equals_eager(group, data):
    names, special, big = _GROUPS[group]
    z = data.draw(_complex_arrays(special, big))
    with np.errstate(all="ignore"):
        eager = _program(names)(z)
        jitted = _JITTED[group](z)
    for name, e, j in zip(names, eager, jitted):
        try:
            _agree(e, j, 2e-5)
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None


_BINARY_ANY = fg.jit(lambda a, b: (lax.add(a, b), lax.sub(a, b), lax.div(a, b), lax.mul(a, b)))
_BINARY_FINITE = fg.jit(lambda a, b: (lax.mul(a, b), lax.integer_pow(a * 1e-7, 3)))


@settings(max_examples=25, deadline=None)
@given(a=_complex_arrays(True), b=_complex_arrays(True))
def test_complex_add_sub_div_mul_jit_equal_eager_at_any_values(a, b):
    eager = (lax.add(a, b), lax.sub(a, b), lax.div(a, b), lax.mul(a, b))
    for e, j in zip(eager, _BINARY_ANY(a, b)):
        _agree(e, j, 1e-6)


@settings(max_examples=25, deadline=None)
@given(a=_complex_arrays(False, 1e18), b=_complex_arrays(False, 1e18))
def test_complex_mul_pow_jit_equal_eager_at_finite_values(a, b):
    mul, ipow = _BINARY_FINITE(a, b)
    _agree(lax.mul(a, b), mul, 1e-6)
    _agree(lax.integer_pow(a * 1e-7, 3), ipow, 1e-5)


_RW_X = np.array(
    [[2 + 2j, 1 - 2j, -2j, -1 + 2j, -1 - 2j, -2],
     [-2 - 2j, -2 - 1j, -2, 2, 1, 2 - 2j],
     [-2j, 1 - 2j, 2 - 2j, 1 + 1j, 1, 1j],
     [-1j, 2 + 1j, -1 + 1j, 2 - 1j, 1, -2 + 2j],
     [-1 + 2j, 2 + 2j, -1j, -2 + 1j, 1 + 2j, 1 + 1j]], np.complex64,
).reshape(1, 1, 5, 6)  # fmt: skip
# jax.lax.reduce_window(_RW_X, -inf / inf, lax.max / lax.min, (1, 1, 2, 3), (1, 1, 1, 2), "SAME")
_RW_MAX = np.array(
    [[2 + 2j, 2, 2 - 2j], [2 - 2j, 2, 2 - 2j], [2 + 1j, 2 - 1j, 1], [2 + 2j, 2 - 1j, 1 + 2j],
     [2 + 2j, 1 + 2j, 1 + 2j]], np.complex64,
)  # fmt: skip
_RW_MIN = np.array(
    [[-2 - 2j, -2, -2], [-2 - 2j, -2, 1j], [-1 + 1j, -1 + 1j, -2 + 2j], [-1 + 1j, -2 + 1j, -2 + 2j],
     [-1 + 2j, -2 + 1j, 1 + 1j]], np.complex64,
)  # fmt: skip


@pytest.mark.parametrize("op,init,want", [("max", -INF, _RW_MAX), ("min", INF, _RW_MIN)])
def test_complex_reduce_window_max_min_lexicographic_as_jax(op, init, want):
    def f(a):
        return lax.reduce_window(
            a, np.complex64(init), getattr(lax, op), (1, 1, 2, 3), (1, 1, 1, 2), "SAME"
        )

    _same(f(_RW_X)[0, 0], want)
    _same(fg.jit(f)(_RW_X)[0, 0], want)
    # the derivative follows the chosen element (JAX has no complex rule here)
    from fungrad.testing import check_grads

    rng = np.random.default_rng(2)
    with fg.enable_x64():
        z = rng.normal(size=(1, 1, 4, 5)) + 1j * rng.normal(size=(1, 1, 4, 5))
        check_grads(f, (z,), order=1)

    def loss(a):
        return fnp.sum(fnp.abs(f(a) * (1 + 2j)) ** 2)

    np.testing.assert_allclose(
        np.asarray(fg.jit(fg.grad(loss))(_RW_X)), np.asarray(fg.grad(loss)(_RW_X)), rtol=1e-6
    )


def test_complex_iota_under_jit():
    _same(fg.jit(lambda: lax.iota(np.complex64, 3))(), c64(0, 1, 2))
    got = fg.jit(lambda: lax.broadcasted_iota(np.complex64, (2, 3), 0) * (2 - 1j))()
    _same(got, np.array([[0, 0, 0], [2 - 1j] * 3], np.complex64))


@pytest.mark.parametrize("jit", [False, True])
def test_complex_scatter_max_min_with_nans_as_jax(jit):
    x = c64(1 + 1j, complex(NAN, 0), 2)
    u = c64(complex(NAN, 1), 3, complex(0, NAN))
    at = np.array([0, 1, 2])

    def f(x, u):
        return fnp.asarray(x).at[at].max(u), fnp.asarray(x).at[at].min(u)

    mx, mn = (fg.jit(f) if jit else f)(x, u)
    # jnp.asarray(x).at[at].max(u) / .min(u): a comparison with NaN takes the update
    _same(mx, c64(complex(NAN, 1), 3, 2))
    _same(mn, c64(complex(NAN, 1), 3, complex(0, NAN)))


@pytest.mark.parametrize("jit", [False, True])
def test_complex_reduce_window_max_min_with_nans_as_jax(jit):
    m = c64(1 + 1j, complex(NAN, 0), 2, 3j, complex(0, NAN), -1).reshape(1, 6)
    for op, init, want in (  # jax.lax.reduce_window(m, init, op, (1, 2), (1, 1), "VALID")
        (lax.max, -INF, c64(complex(NAN, 0), 2, 2, complex(0, NAN), complex(0, NAN))),
        (lax.min, INF, c64(complex(NAN, 0), 2, 3j, complex(0, NAN), -1)),
    ):

        def f(a, op=op, init=init):
            return lax.reduce_window(a, np.complex64(init), op, (1, 2), (1, 1), "VALID")

        _same((fg.jit(f) if jit else f)(m)[0], want)
