"""Complex numbers in fungrad.numpy against numpy (values) and JAX's documented behaviour
(dtypes, weak types, lexicographic order, errors): elementwise functions, promotion, creation,
reductions, products, sorting, predicates, printing; 0-d, size-0, NaN and inf included."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.testing import strategies as fst

C64 = np.complex64
SHAPES = st.sampled_from([(), (0,), (3,), (2, 3)])


def cplx(shape=SHAPES, bound=3.0, **kw):
    return fst.arrays(C64, shape, min_value=-bound, max_value=bound, **kw)


def assert_close(got, want, rtol=2e-5, atol=2e-5):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


# -- elementwise -----------------------------------------------------------------------------

_UNARY = [
    "exp",
    "log",
    "sqrt",
    "sin",
    "cos",
    "tan",
    "sinh",
    "cosh",
    "tanh",
    "arcsin",
    "arccos",
    "arctan",
    "arcsinh",
    "arccosh",
    "arctanh",
    "log1p",
    "expm1",
    "log2",
    "log10",
    "exp2",
    "square",
    "reciprocal",
    "negative",
    "positive",
    "conj",
    "conjugate",
    "real",
    "imag",
    "abs",
    "absolute",
    "angle",
    "sign",
    "rint",
    "isnan",
    "isinf",
    "isfinite",
    "iscomplex",
    "isreal",
]
_REAL_RESULT = {"real", "imag", "abs", "absolute", "angle"}
_BOOL_RESULT = {"isnan", "isinf", "isfinite", "iscomplex", "isreal"}


@pytest.mark.parametrize("name", _UNARY)
@settings(max_examples=10, deadline=None)
@given(z=cplx(avoid=(0, 1, -1, 1j, -1j), margin=0.05))
def test_unary_against_numpy(name, z):
    got = getattr(fnp, name)(z)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(z)
    if name in _BOOL_RESULT:
        assert got.dtype == np.bool_
    elif name in _REAL_RESULT:
        assert got.dtype == np.float32
    else:
        assert got.dtype == C64
    tol = 2e-4 if name not in ("tan", "tanh", "arctanh", "arctan") else 2e-3
    assert_close(got, want, rtol=tol, atol=tol)


_BINARY = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "true_divide",
    "power",
    "float_power",
    "maximum",
    "minimum",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "isclose",
]


@pytest.mark.parametrize("name", _BINARY)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_binary_against_numpy(name, data):
    shape = data.draw(SHAPES)
    x = data.draw(cplx(shape, avoid=(0,), margin=0.1))
    y = data.draw(cplx(shape, bound=2.0, avoid=(0,), margin=0.1))
    if name in ("less", "less_equal", "greater", "greater_equal", "maximum", "minimum"):
        # equal real parts exercise the imaginary tie-break of the lexicographic order
        y = np.where(np.arange(y.size).reshape(y.shape) % 2 == 0, x.real + 1j * y.imag, y)
        y = y.astype(C64)
    got = getattr(fnp, name)(x, y)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x, y)
    assert got.dtype == want.dtype or (got.dtype == C64 and want.dtype == np.complex128)
    tol = 5e-4 if "power" in name else 2e-5
    assert_close(got, np.asarray(want).astype(got.dtype), rtol=tol, atol=tol)


def test_promotion_with_python_complex_and_real_arrays():
    x32 = fnp.ones(2, np.float32)
    assert (x32 + 1j).dtype == C64 and not (x32 + 1j).weak_type
    assert (1j * x32).dtype == C64
    i = fnp.int32(1) + 1j
    assert i.dtype == C64 and i.weak_type  # as JAX: int32 + weak complex stays weak
    assert (fnp.float16(1) * 1j).dtype == C64
    z = fnp.asarray(np.array([1 + 2j], C64))
    assert (z * 2.0).dtype == C64 and (z - 1j).dtype == C64
    assert_close(z - 1j, [1 + 1j])
    assert fnp.result_type(np.float32, 1j) == C64
    assert fnp.asarray(1j).weak_type and fnp.asarray(1j).dtype == C64
    assert fnp.asarray(np.complex128(1j)).dtype == C64  # canonicalised without x64
    assert list(np.asarray(z == 1 + 2j)) == [True]


def test_integer_powers_and_special_values():
    z = fnp.asarray(np.array([1 + 2j, -3 + 0.5j, 2 - 1j], C64))
    assert_close(z**2, np.asarray(z) ** 2)
    assert_close(fnp.power(z, -2), np.asarray(z) ** -2.0, rtol=1e-5)
    assert_close(z**0, np.ones(3))
    zn = np.array([complex(np.nan, 1), complex(1, np.inf), complex(-np.inf, 0), 1 + 1j], C64)
    assert list(np.asarray(fnp.isnan(zn))) == [True, False, False, False]
    assert list(np.asarray(fnp.isinf(zn))) == [False, True, True, False]
    assert list(np.asarray(fnp.isfinite(zn))) == [False, False, False, True]
    assert_close(fnp.nan_to_num(zn), np.nan_to_num(zn))
    assert_close(fnp.log10(np.array([0j], C64)), [complex(-np.inf, 0)])


def test_round_rounds_each_part():
    z = np.array([1.3 + 2.6j, -3.9 + 0.65j, 2.5 - 1.5j], C64)
    assert_close(fnp.round(z), np.round(z))
    assert_close(fnp.around(z, 1), np.round(z, 1), rtol=1e-6)
    assert_close(fnp.rint(z), np.rint(z))


def test_logaddexp_of_complex_matches_the_logarithm_of_the_sum():
    x = np.array([1 + 2j, -3 + 0.5j, 0.5j], C64)
    y = np.array([0.5 - 1j, 1 + 1j, -2 + 0j], C64)
    want = np.log(np.exp(x.astype(complex)) + np.exp(y.astype(complex)))
    assert_close(fnp.logaddexp(x, y), want, rtol=1e-5)
    want2 = np.log2(2 ** x.astype(complex) + 2 ** y.astype(complex))
    got2 = np.asarray(fnp.logaddexp2(x, y))
    # the same point of the Riemann surface up to a multiple of 2 pi i / log 2
    assert_close(2**got2, 2**want2, rtol=1e-4)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda z: fnp.floor(z), TypeError, "floor does not accept dtype complex64"),
        (lambda z: fnp.ceil(z), TypeError, "ceil does not accept dtype complex64"),
        (lambda z: fnp.trunc(z), TypeError, "trunc does not accept dtype complex64"),
        (lambda z: fnp.fabs(z), TypeError, "fabs: complex"),
        (lambda z: fnp.clip(z, 0, 1), ValueError, "complex value"),
        (lambda z: fnp.clip(fnp.ones(2), 0, 1j), ValueError, "complex value"),
        (lambda z: fnp.hypot(z, z), ValueError, "hypot is not well defined"),
        (lambda z: fnp.signbit(z), ValueError, "signbit is not well defined for complex64"),
        (lambda z: fnp.isposinf(z), ValueError, "not well defined for complex"),
        (lambda z: fnp.copysign(z, z), TypeError, "copysign does not support complex"),
        (lambda z: fnp.floor_divide(z, 2), TypeError, "floor_divide does not support complex"),
        (lambda z: z // 2, TypeError, "floor_divide does not support complex"),
        (lambda z: fnp.median(z), ValueError, "quantiles of complex values"),
        (lambda z: fnp.arange(1j), ValueError, "complex stop"),
    ],
)
def test_errors_as_jax(call, error, match):
    z = fnp.asarray(np.array([1 + 2j, 0.5j], C64))
    with pytest.raises(error, match=match):
        call(z)


# -- creation, dtypes, printing -----------------------------------------------------------------


def test_creation_with_complex_dtypes():
    assert fnp.zeros(2, fnp.complex64).dtype == C64
    assert fnp.ones(2, complex).dtype == C64
    f = fnp.full(2, 1j)
    assert f.dtype == C64 and f.weak_type
    assert_close(fnp.array([1, 2j]), [1, 2j])
    assert_close(fnp.arange(3, dtype=fnp.complex64), [0, 1, 2])
    assert fnp.arange(3, dtype=fnp.complex64).dtype == C64
    assert_close(fnp.linspace(0, 1 + 1j, 3), [0, 0.5 + 0.5j, 1 + 1j])
    assert_close(fnp.eye(2, dtype=complex), np.eye(2))
    assert_close(fnp.full_like(np.zeros(2, C64), 2j), [2j, 2j])
    assert fnp.zeros((0, 3), C64).shape == (0, 3)
    with pytest.warns(UserWarning, match="complex128 is not available without 64-bit"):
        assert fnp.zeros(2, fnp.complex128).dtype == C64


def test_scalar_types():
    assert fnp.complex_ == fnp.complex128 and fnp.csingle == fnp.complex64
    assert fnp.cdouble == fnp.complex128
    v = fnp.complex64(1 + 2j)
    assert v.dtype == C64 and complex(v) == 1 + 2j
    assert complex(fnp.complex64(3)) == 3 + 0j
    assert np.dtype(fnp.complex64) == C64
    assert fnp.issubdtype(fnp.complex64, fnp.complexfloating)
    assert fnp.issubdtype(fnp.complex64, fnp.inexact)


def test_astype_complex_to_real_keeps_the_real_part_with_a_deprecation_warning():
    z = fnp.asarray(np.array([1 + 2j, -3.5 - 1j], C64))
    with pytest.warns(DeprecationWarning, match="complex to real"):
        r = z.astype(np.float32)
    assert r.dtype == np.float32
    assert_close(r, [1, -3.5])
    with pytest.warns(DeprecationWarning):
        assert fnp.astype(z, "int32").dtype == np.int32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fnp.astype(np.ones(2, np.float32), C64).dtype == C64


def test_repr_and_str():
    z = fnp.asarray(np.array([1 + 2j, -3 + 0.5j], C64))
    assert repr(z) == "Array([ 1.+2.j , -3.+0.5j], dtype=complex64)"
    assert str(z) == str(np.asarray(z))
    assert "1.+2.j" in repr(fnp.complex64(1 + 2j))


# -- parts and predicates -----------------------------------------------------------------------


def test_parts_and_methods():
    zv = np.array([[1 + 2j, -3 + 0.5j], [0j, 2 - 1j]], C64)
    z = fnp.asarray(zv)
    assert_close(z.real, zv.real)
    assert_close(z.imag, zv.imag)
    assert_close(z.conj(), zv.conj())
    assert_close(z.conjugate(), zv.conj())
    assert z.real.dtype == np.float32
    assert_close(fnp.angle(z, deg=True), np.angle(zv, deg=True), rtol=1e-5)
    # real inputs: their own real part and conjugate, zero imaginary part (jnp's dtypes)
    assert fnp.real(3).dtype == np.int32 and fnp.real(3).weak_type
    assert fnp.imag(fnp.float32(3)).dtype == np.float32 and float(fnp.imag(fnp.float32(3))) == 0
    assert fnp.conj(fnp.int32(3)).dtype == np.int32
    assert fnp.angle(-1).dtype == np.float32 and abs(float(fnp.angle(-1)) - np.pi) < 1e-6


def test_type_predicates():
    z = fnp.asarray(np.array([1 + 2j, 3 + 0j], C64))
    assert fnp.iscomplexobj(z) and not fnp.isrealobj(z)
    assert fnp.iscomplexobj(1j) and fnp.iscomplexobj(np.ones(2, complex))
    assert not fnp.iscomplexobj(fnp.ones(2)) and not fnp.iscomplexobj(None)
    assert list(np.asarray(fnp.iscomplex(z))) == [True, False]
    assert list(np.asarray(fnp.isreal(z))) == [False, True]
    assert list(np.asarray(fnp.isreal(np.arange(2.0)))) == [True, True]
    seen = []
    fg.jit(lambda z: seen.append(fnp.iscomplexobj(z)) or z)(z)  # a tracer's dtype decides
    assert seen == [True]


def test_real_if_close():
    z = np.array([1 + 1e-9j, 2 - 1e-10j], C64)
    r = fnp.real_if_close(z)
    assert r.dtype == np.float32 and r.dtype == np.real_if_close(z).dtype
    assert_close(r, [1, 2])
    far = np.array([1 + 1e-3j], C64)
    assert fnp.real_if_close(far).dtype == C64 == np.real_if_close(far).dtype
    assert fnp.real_if_close(far, tol=1e-2).dtype == np.float32  # tol <= 1: absolute
    assert fnp.real_if_close(np.ones(2, np.float32)).dtype == np.float32
    with pytest.raises(fg.ConcretizationTypeError):
        fg.jit(fnp.real_if_close)(fnp.asarray(z))


# -- reductions and products --------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(z=cplx(st.sampled_from([(4,), (2, 3), (3, 0)])), axis=st.sampled_from([None, 0, -1]))
def test_reductions_against_numpy(z, axis):
    for name in ("sum", "prod", "mean", "var", "std", "cumsum", "cumprod"):
        if name in ("mean", "var", "std") and z.size == 0:
            continue
        if name in ("cumsum", "cumprod") and axis is None:
            got, want = getattr(fnp, name)(z), getattr(np, name)(z)
        else:
            got, want = getattr(fnp, name)(z, axis=axis), getattr(np, name)(z, axis=axis)
        want_dtype = np.float32 if name in ("var", "std") else C64
        assert got.dtype == want_dtype, name
        assert_close(got, want, rtol=5e-4, atol=5e-4)
    assert_close(fnp.nansum(z, axis=axis), np.nansum(z, axis=axis), rtol=1e-4, atol=1e-4)


def test_nan_reductions():
    zn = np.array([complex(np.nan, 1), 2 + 1j, complex(1, np.nan), 1 - 1j], C64)
    assert_close(fnp.nansum(zn), 3 + 0j)
    assert_close(fnp.nanmean(zn), 1.5 + 0j)
    assert_close(fnp.nanvar(zn), np.var(np.array([2 + 1j, 1 - 1j])), rtol=1e-6)


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_products_against_numpy(data):
    a = data.draw(cplx((3, 4)))
    b = data.draw(cplx((4, 2)))
    v = data.draw(cplx((4,)))
    w = data.draw(cplx((4,)))
    tol = dict(rtol=1e-4, atol=1e-4)
    assert_close(fnp.dot(a, b), a @ b, **tol)
    assert_close(fnp.matmul(a, v), a @ v, **tol)
    assert_close(a @ fnp.asarray(b), a @ b, **tol)
    assert_close(fnp.einsum("ij,jk->ik", a, b), a @ b, **tol)
    assert_close(fnp.inner(v, w), np.inner(v, w), **tol)
    assert_close(fnp.outer(v, w), np.outer(v, w), **tol)
    assert_close(fnp.vdot(v, w), np.vdot(v, w), **tol)
    assert_close(fnp.vdot(a, a), np.vdot(a, a), **tol)
    assert_close(fnp.vecdot(v, w), np.vecdot(v, w), **tol)
    assert_close(fnp.tensordot(a, b, 1), np.tensordot(a, b, 1), **tol)
    assert_close(fnp.trace(a[:, :3]), np.trace(a[:, :3]), **tol)
    assert_close(fnp.convolve(v, w[:3]), np.convolve(v, w[:3]), **tol)
    assert_close(fnp.correlate(v, w[:3], "full"), np.correlate(v, w[:3], "full"), **tol)
    assert_close(fnp.cov(v), np.cov(v), **tol)
    if np.ptp(np.abs(v)) > 0.1 and np.ptp(np.abs(w)) > 0.1:  # no zero variances
        assert_close(fnp.corrcoef(v, w), np.corrcoef(v, w), rtol=1e-3, atol=1e-3)


def test_isclose_allclose():
    z = np.array([1 + 2j, complex(np.nan, 1), complex(np.inf, 0), 3j], C64)
    y = z + np.array([1e-7, 0, 0, 1e-2], C64)
    assert list(np.asarray(fnp.isclose(z, y))) == list(np.isclose(z, y))
    assert list(np.asarray(fnp.isclose(z, y, equal_nan=True))) == list(
        np.isclose(z, y, equal_nan=True)
    )
    assert bool(fnp.allclose(z[:1], y[:1])) and not bool(fnp.allclose(z, y))


# -- order: sorting and comparisons ------------------------------------------------------------


_SMALL_GRID = st.lists(st.tuples(st.integers(-2, 2), st.integers(-2, 2)), max_size=9).map(
    lambda ps: np.array([complex(a, b) for a, b in ps], C64)
)  # small integer parts: many ties in the real part


@settings(max_examples=15, deadline=None)
@given(z=_SMALL_GRID)
def test_sorting_against_numpy(z):
    assert_close(fnp.sort(z), np.sort(z))
    assert list(np.asarray(fnp.argsort(z))) == list(np.argsort(z, kind="stable"))
    assert_close(fnp.sort(z, descending=True), np.sort(z)[::-1])
    if z.size:
        assert_close(fnp.unique(z), np.unique(z))
        s = np.sort(z)
        for side in ("left", "right"):
            assert list(np.asarray(fnp.searchsorted(s, z, side=side))) == list(
                np.searchsorted(s, z, side=side)
            )
        assert list(np.asarray(fnp.lexsort((z,)))) == list(np.lexsort((z,)))
        assert_close(fnp.max(z), np.max(z))
        assert_close(fnp.min(z), np.min(z))
    assert fnp.sort_complex(np.array([3.0, 1.0], np.float32)).dtype == C64


def test_sort_puts_nans_last_and_sorts_along_an_axis():
    z = np.array([[2 + 1j, complex(np.nan, 0), 2 - 1j], [0j, -1j, 1 + 0j]], C64)
    got = np.asarray(fnp.sort(z, axis=1))
    assert_close(got[0, :2], [2 - 1j, 2 + 1j]) and np.isnan(got[0, 2])
    assert_close(got[1], np.sort(z[1]))


# -- transforms -----------------------------------------------------------------------------------


def test_vmap_matches_a_loop():
    zs = np.array([[1 + 2j, 3 - 1j, -1j], [0.5j, 1 + 0j, 2 + 2j]], C64)

    def f(z):
        return fnp.vdot(z, fnp.sort(z)) + fnp.sum(fnp.conj(z) * fnp.exp(z))

    batched = fg.vmap(f)(zs)
    for i, z in enumerate(zs):
        assert_close(batched[i], f(z), rtol=1e-5)


def test_jit_matches_eager():
    z = fnp.asarray(np.array([1 + 2j, -0.5 + 0.25j, 3j], C64))

    def f(z):
        return fnp.abs(fnp.exp(z) * fnp.conj(z)) + fnp.real(z * z)

    assert_close(fg.jit(f)(z), f(z), rtol=1e-5)


def test_zero_d_and_size_zero():
    z0 = fnp.asarray(np.complex64(3 + 4j))
    assert float(fnp.abs(z0)) == 5.0 and fnp.abs(z0).shape == ()
    assert_close(fnp.sign(z0), 0.6 + 0.8j)
    e = fnp.zeros((0,), C64)
    assert fnp.sum(e).dtype == C64 and complex(fnp.sum(e)) == 0
    assert fnp.real(e).shape == (0,) and fnp.sort(e).shape == (0,)
