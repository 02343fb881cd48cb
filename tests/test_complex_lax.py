"""Complex numbers in fungrad.lax: the real/imag/conj/complex primitives, the elementwise
functions with a complex definition, reductions, dot_general and structural ops on complex64 /
complex128, weak Python complex scalars, the type errors of ops without a complex definition,
jvp rules in complex directions and the transposes of the linear ops.

Oracles: values JAX 0.10.2 computed for the same inputs (``JAX_UNARY`` and friends), numpy in
complex128 (the mathematical definition evaluated at higher precision), finite differences in
complex directions for jvps, the bilinear identity ``Re sum(ct * f(x)) = Re sum(f^T(ct) * x)``
for transposes (JAX's transposes do not conjugate), and Python loops for vmap.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
from fungrad import lax
from fungrad.lax import GatherDimensionNumbers, ScatterDimensionNumbers

C64 = np.complex64


def c64(*values):
    return np.array(values, C64)


# -- values ---------------------------------------------------------------------------------------

Z = c64(0.5 + 0.25j, -1.25 + 2j, 3 - 0.5j)
W = c64(1 - 1j, 0.5 + 2j, -2 + 0.5j)

# JAX 0.10.2 (CPU): lax.<name>(Z)
JAX_UNARY = {
    "exp": [
        1.5974664688 + 0.4079001546j,
        -0.1192280725 + 0.2605180740j,
        17.626716614 - 9.629519463j,
    ],
    "exp2": [
        1.3930333853 + 0.2438398898j,
        0.0771341547 + 0.4133122563j,
        7.5243368149 - 2.717417001j,
    ],
    "log": [
        -0.5815753937 + 0.4636476040j,
        0.8580238223 + 2.1293954849j,
        1.1123118401 - 0.1651486754j,
    ],
    "log1p": [
        0.4191645980 + 0.1651486754j,
        0.7008993030 + 1.6951513290j,
        1.3940464258 - 0.1243549957j,
    ],
    "expm1": [
        0.5974665284 + 0.4079001546j,
        -1.1192281246 + 0.2605180740j,
        16.626716614 - 9.629519463j,
    ],
    "sqrt": [
        0.7276733518 + 0.1717803776j,
        0.7444781065 + 1.3432228566j,
        1.7380133867 - 0.1438423842j,
    ],
    "rsqrt": [
        1.3017016649 - 0.3072900474j,
        0.3156581223 - 0.5695253015j,
        0.5714552999 + 0.0472950824j,
    ],
    "sin": [
        0.4944857955 + 0.2216881365j,
        -3.5702660084 + 1.1436302662j,
        0.1591305733 + 0.5158804059j,
    ],
    "cos": [
        0.9051501155 - 0.1211087853j,
        1.1863044500 + 3.4418346882j,
        -1.1163412333 + 0.0735369697j,
    ],
    "tan": [
        0.5045007467 + 0.3124206960j,
        -0.0225778148 + 1.0295327902j,
        -0.1116210520 - 0.4694699943j,
    ],
    "asin": [
        0.5016088486 + 0.2813960612j,
        -0.5206188559 + 1.5724474192j,
        1.3961498737 - 1.7789905071j,
    ],
    "acos": [
        1.0691875219 - 0.2813960612j,
        2.0914151669 - 1.5724474192j,
        0.1746464670 + 1.7789905071j,
    ],
    "atan": [
        0.4842545092 + 0.2005866170j,
        -1.3201642036 + 0.3540816605j,
        1.2563982010 - 0.0489361435j,
    ],
    "sinh": [
        0.5048956871 + 0.2789791226j,
        0.6666335464 + 1.7171388865j,
        8.7915124893 - 4.8266944885j,
    ],
    "cosh": [
        1.0925707818 + 0.1289210320j,
        -0.7858616710 - 1.4566208124j,
        8.8352041245 - 4.8028249741j,
    ],
    "tanh": [
        0.4854872823 + 0.1980554610j,
        -1.1043248177 - 0.1381367743j,
        0.9973164201 - 0.0041604270j,
    ],
    "asinh": [
        0.4926757216 + 0.2243284583j,
        -1.5336432457 + 0.9695115090j,
        1.8301947117 - 0.1570045948j,
    ],
    "acosh": [
        0.2813960612 + 1.0691875219j,
        1.5724474192 + 2.0914151669j,
        1.7789905071 - 0.1746464670j,
    ],
    "atanh": [
        0.5003700256 + 0.3143981695j,
        -0.2005866170 + 1.2108968496j,
        0.3352934718 - 1.5104844570j,
    ],
    "logistic": [
        0.6242751479 + 0.0590029620j,
        -0.0440277420 + 0.3088065088j,
        0.9576359987 - 0.0219010916j,
    ],
    "sign": [
        0.8944271803 + 0.4472135901j,
        -0.5299989581 + 0.8479983211j,
        0.9863939881 - 0.1643989980j,
    ],
    "abs": [0.5590170026, 2.3584952354, 3.0413811207],
    "square": [0.1875 + 0.25j, -2.4375 - 5j, 8.75 - 3j],
    "reciprocal": [1.6 - 0.8j, -0.2247191072 - 0.3595505655j, 0.3243243396 + 0.0540540554j],
    "neg": [-0.5 - 0.25j, 1.25 - 2j, -3 + 0.5j],
}

# JAX 0.10.2: lax.<name>(Z, W)
JAX_BINARY = {
    "pow": [
        0.4458990395 + 0.7688099742j,
        -0.0203159619 + 0.0076666409j,
        0.0742249265 + 0.0909764096j,
    ],
    "atan2": [
        0.1440277547 + 0.3864812255j,
        -2.2601704597 + 0.4470122457j,
        2.1659412384 - 0.0371049941j,
    ],
    "div": [0.125 + 0.375j, 0.7941176295 + 0.8235294223j, -1.4705882072 - 0.1176470593j],
    "mul": [0.75 - 0.25j, -4.625 - 1.5j, -5.75 + 2.5j],
    "add": [1.5 - 0.75j, -0.75 + 4j, 1 + 0j],
    "sub": [-0.5 + 1.25j, -1.75 + 0j, 5 - 1j],
}

UNARY_64 = {  # the definitions in complex128 (numpy), for random inputs
    "exp": np.exp,
    "exp2": lambda z: np.exp(z * np.log(2.0)),
    "log": np.log,
    "log1p": lambda z: np.log(_cplx(1 + z.real, z.imag)),  # keeps the sign of a zero imag
    "expm1": lambda z: np.exp(z) - 1,
    "sqrt": np.sqrt,
    "rsqrt": lambda z: 1 / np.sqrt(z),
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "logistic": lambda z: 1 / (1 + np.exp(-z)),
    "sign": lambda z: np.where(z == 0, 0, z / np.where(z == 0, 1, np.abs(z))),
    "abs": np.abs,
    "square": lambda z: z * z,
    "reciprocal": lambda z: 1 / z,
    "neg": np.negative,
    "real": np.real,
    "imag": np.imag,
    "conj": np.conj,
}


def _cplx(re, im):
    out = np.empty(np.shape(re), np.complex128)
    out.real, out.imag = re, im
    return out


def _lax(name):
    return getattr(lax, name)


def _allclose(got, want, rtol=2e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(JAX_UNARY))
def test_unary_gives_jaxs_values(name):
    got = _lax(name)(Z)
    want = np.array(JAX_UNARY[name])
    assert got.dtype == (np.float32 if name == "abs" else C64) and got.shape == Z.shape
    _allclose(got, want, rtol=3e-6)


@pytest.mark.parametrize("name", sorted(JAX_BINARY))
def test_binary_gives_jaxs_values(name):
    got = _lax(name)(Z, W)
    assert got.dtype == C64
    _allclose(got, np.array(JAX_BINARY[name]), rtol=3e-6)


def _moderate_complex(shape):
    part = st.floats(-3, 3, width=32)
    return hnp.arrays(C64, shape, elements=st.builds(lambda a, b: complex(a, b), part, part))


@settings(max_examples=15, deadline=None)
@given(
    shape=st.sampled_from([(), (0,), (4,), (2, 3)]),
    data=st.data(),
)
@pytest.mark.parametrize("name", sorted(UNARY_64))
def test_unary_against_the_complex128_definition(name, shape, data):
    z = data.draw(_moderate_complex(shape))
    with np.errstate(all="ignore"):
        want = np.asarray(UNARY_64[name](z.astype(np.complex128)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no floating-point or cast warnings from the impls
        got = _lax(name)(z)
    assert got.shape == z.shape
    assert got.dtype == (np.float32 if name in ("abs", "real", "imag") else C64)
    ok = np.isfinite(want) & (np.abs(want) < 1e30)
    got, want = np.asarray(got)[ok], want[ok]
    # complex64 rounding of the input, amplified by the function's condition number: compare
    # against the definition at the rounded input with a tolerance relative to the result
    scale = np.maximum(np.abs(want), 1.0)
    err = np.abs(got.astype(np.complex128) - want) / scale
    tol = 1e-4 if name in ("tan", "tanh", "atanh", "acosh", "asin", "acos", "atan") else 1e-5
    assert np.all(err <= tol), (z[ok][np.argmax(err)], got[np.argmax(err)], want[np.argmax(err)])


def test_special_values_propagate_as_numpy():
    z = c64(complex(np.nan, 0), complex(0, np.nan), complex(np.inf, 0), complex(-np.inf, 1), 0j)
    for name, ref in (
        ("exp", np.exp),
        ("log", np.log),
        ("sqrt", np.sqrt),
        ("sin", np.sin),
        ("tanh", np.tanh),
        ("neg", np.negative),
        ("square", np.square),
        ("conj", np.conj),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # eager impls never warn
            got = np.asarray(_lax(name)(z))
        with np.errstate(all="ignore"):
            want = ref(z)
        for part in (np.real, np.imag):
            np.testing.assert_array_equal(part(got), part(want), err_msg=name)
    got = np.asarray(lax.abs(z))
    np.testing.assert_array_equal(got, np.float32([np.nan, np.nan, np.inf, np.inf, 0]))
    np.testing.assert_array_equal(np.asarray(lax.sign(c64(0j, -0.0 + 0j))), c64(0, 0))


def test_log1p_and_expm1_keep_small_arguments_accurate():
    z = c64(1e-8 + 1e-8j, -3e-7 + 2e-9j, 1e-20j, 0j)
    zz = z.astype(np.complex128)
    _allclose(lax.log1p(z), zz - zz**2 / 2 + zz**3 / 3, rtol=1e-6, atol=0)
    _allclose(lax.expm1(z), zz + zz**2 / 2 + zz**3 / 6, rtol=1e-6, atol=0)
    # and large ones stay finite where the naive formulas overflow
    _allclose(lax.logistic(c64(-100 + 1j, 100 + 1j)), [0j, 1 + 0j], atol=1e-30)


def test_atan2_of_reals_is_the_real_atan2():
    x, y = np.array([1.0, -2.0, 0.5]), np.array([2.0, 1.0, -3.0])
    got = lax.atan2(x.astype(C64), y.astype(C64))
    _allclose(got, np.arctan2(x, y) + 0j)


def test_max_min_are_lexicographic_and_take_the_second_operand_on_nan():
    # JAX 0.10.2's values for the same operands
    x = c64(1 + 2j, 1 + 2j, 2, np.nan, 1)
    y = c64(2 + 0j, 1 + 3j, 2 + 1j, 1, np.nan)
    got = np.asarray(lax.max(x, y))
    np.testing.assert_array_equal(got[:4], c64(2, 1 + 3j, 2 + 1j, 1))
    assert np.isnan(got[4].real)
    np.testing.assert_array_equal(
        np.asarray(lax.min(c64(1 + 2j, 1 + 2j, complex(1, np.nan)), c64(2, 1 + 3j, 1))),
        c64(1 + 2j, 1 + 2j, 1),
    )
    np.testing.assert_array_equal(
        np.asarray(lax.clamp(C64(0), c64(-1 + 5j, 0.5 + 1j, 3), C64(1))), c64(0, 0.5 + 1j, 1)
    )


def test_pow_with_integer_and_complex_exponents():
    z = c64(0, 0, 2, 1j, 1 + 1j)
    _allclose(lax.pow(z, np.array([0, 1, 2, 3, -2], np.int32)), c64(1, 0, 4, -1j, -0.5j))
    _allclose(lax.pow(z[2:], 2), c64(4, -1, 2j))
    _allclose(lax.pow(z[2:], 0.5), np.sqrt(z[2:].astype(np.complex128)))
    _allclose(lax.pow(c64(0), c64(0.5)), c64(0))
    _allclose(lax.integer_pow(Z, 3), Z.astype(np.complex128) ** 3, rtol=1e-5)
    _allclose(lax.integer_pow(Z, -2), Z.astype(np.complex128) ** -2.0, rtol=1e-5)
    assert lax.pow(2.0, c64(1j)).dtype == C64


def test_binary_ops_broadcast_0d_operands():
    s = np.complex64(2 - 1j)
    for name, fn in (
        ("add", np.add),
        ("mul", np.multiply),
        ("div", np.divide),
        ("sub", np.subtract),
    ):
        _allclose(_lax(name)(Z, s), fn(Z, s))
        _allclose(_lax(name)(s, Z), fn(s, Z))
    assert lax.eq(Z, Z).dtype == np.bool_ and bool(np.all(np.asarray(lax.eq(Z, Z))))
    np.testing.assert_array_equal(np.asarray(lax.ne(Z, W)), [True] * 3)
    assert not bool(lax.eq(c64(complex(np.nan, 0)), c64(complex(np.nan, 0)))[0])
    np.testing.assert_array_equal(
        np.asarray(lax.select_n(np.array([True, False, True]), Z, W)), np.where([1, 0, 1], W, Z)
    )


# -- the complex primitives -----------------------------------------------------------------------


def test_real_imag_conj_complex_values_and_dtypes():
    assert repr(lax.real(Z)) == repr(fg.numpy.asarray(Z.real)) and lax.imag(Z).dtype == np.float32
    np.testing.assert_array_equal(np.asarray(lax.conj(Z)), np.conj(Z))
    got = lax.conj(np.array([1.5, -2.0], np.float32))  # a real operand: complex, as JAX
    assert got.dtype == C64
    np.testing.assert_array_equal(np.asarray(got), c64(1.5, -2))
    x, y = np.array([1.0, -0.0], np.float32), np.array([np.inf, np.nan], np.float32)
    z = np.asarray(lax.complex(x, y))
    assert z.dtype == C64 and np.signbit(z[1].real) and np.isinf(z[0].imag) and np.isnan(z[1].imag)
    assert lax.complex(x, 2.0).dtype == C64  # a Python scalar takes the other operand's dtype
    np.testing.assert_array_equal(np.asarray(lax.complex(np.float32(3), x)), c64(3 + 1j, 3))
    assert lax.real(np.zeros((0, 2), C64)).shape == (0, 2)


def test_complex128_under_x64(x64):
    z = lax.complex(np.float64(1), np.float64(2))
    assert z.dtype == np.complex128
    assert lax.real(z).dtype == np.float64 and lax.abs(z).dtype == np.float64
    assert lax.conj(np.float64(1)).dtype == np.complex128
    w = lax.mul(z, 1j)  # a Python complex takes the array's dtype
    assert w.dtype == np.complex128 and complex(np.asarray(w)) == -2 + 1j
    assert fg.numpy.asarray(1j).dtype == np.complex128
    _allclose(lax.exp(z), np.exp(1 + 2j), rtol=1e-14)


def test_complex128_arrays_are_complex64_without_x64():
    assert lax.neg(np.array([1 + 1j])).dtype == C64


def test_weak_types():
    w = lax.real(1 + 2j)
    assert w.dtype == np.float32 and w.weak_type
    w = lax.conj(1.0)
    assert w.dtype == C64 and w.weak_type
    w = lax.add(1j, 2.0)
    assert w.dtype == C64 and w.weak_type and complex(np.asarray(w)) == 2 + 1j
    w = lax.mul(Z, 2.0)  # c64 * 2.0 -> c64
    assert w.dtype == C64 and not w.weak_type
    w = lax.mul(Z, 2j)
    assert w.dtype == C64 and not w.weak_type
    assert not lax.complex(np.float32(1), 2.0).weak_type
    assert lax.complex(1.0, 2.0).weak_type
    assert lax.full((2,), 1j).weak_type and lax.full((2,), 1j).dtype == C64


def test_jaxprs_print_complex_types_and_literals():
    text = str(fg.make_jaxpr(lambda z: lax.add(lax.mul(z, 2j), 0.1 + 0j))(Z))
    assert "a:c64[3]" in text and "2j:c64[]" in text and "(0.1+0j):c64[]" in text
    text = str(fg.make_jaxpr(lambda x: (lax.conj(x), lax.complex(x, x)))(np.float32(1)))
    assert "conj[input_dtype=float32] a" in text and "c64[] = complex a a" in text
    text = str(fg.make_jaxpr(lambda z: (lax.real(z), lax.imag(z), lax.abs(z)))(Z))
    assert "f32[3] = real a" in text and "f32[3] = imag a" in text and "f32[3] = abs a" in text


# -- errors ------------------------------------------------------------------------------------

REJECTED = {  # no complex definition in JAX either: a TypeError naming the op and the dtype
    "lt": lambda z: lax.lt(z, z),
    "le": lambda z: lax.le(z, z),
    "gt": lambda z: lax.gt(z, z),
    "ge": lambda z: lax.ge(z, z),
    "rem": lambda z: lax.rem(z, z),
    "nextafter": lambda z: lax.nextafter(z, z),
    "floor": lax.floor,
    "ceil": lax.ceil,
    "round": lax.round,
    "is_finite": lax.is_finite,
    "cbrt": lax.cbrt,
    "erf": lax.erf,
    "erfc": lax.erfc,
    "erf_inv": lax.erf_inv,
    "lgamma": lax.lgamma,
    "digamma": lax.digamma,
    "argmax": lambda z: lax.argmax(z, 0, np.int32),
    "argmin": lambda z: lax.argmin(z, 0, np.int32),
    "and": lambda z: lax.bitwise_and(z, z),
    "not": lax.bitwise_not,
    "reduce_and": lambda z: lax.reduce_and(z, (0,)),
    "bitcast_convert_type": lambda z: lax.bitcast_convert_type(z, np.float32),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_ops_without_a_complex_definition_reject_it(name):
    with pytest.raises(TypeError, match=rf"{name}.*complex64"):
        REJECTED[name](Z)


def test_bad_dtypes_for_the_complex_primitives():
    f32, i32 = np.float32(1), np.int32(1)
    with pytest.raises(TypeError, match="real does not accept dtype float32"):
        lax.real(f32)
    with pytest.raises(TypeError, match="imag does not accept dtype int32"):
        lax.imag(i32)
    with pytest.raises(TypeError, match="conj does not accept dtype int32"):
        lax.conj(i32)
    with pytest.raises(TypeError, match="conj does not accept dtype float16"):
        lax.conj(np.float16(1))
    with pytest.raises(TypeError, match="complex does not accept dtype int32"):
        lax.complex(i32, i32)
    with pytest.raises(TypeError, match="complex does not accept dtype float16"):
        lax.complex(np.float16(1), np.float16(1))
    with pytest.raises(TypeError, match="complex does not accept dtype complex64"):
        lax.complex(Z, Z)
    with pytest.raises(TypeError, match="incompatible shapes"):
        lax.complex(np.ones(2, np.float32), np.ones(3, np.float32))


def test_mixing_complex_and_real_operands_is_a_type_error():
    with pytest.raises(TypeError, match="mul requires arguments to have the same dtypes"):
        lax.mul(np.float32(1), 1j)
    with pytest.raises(TypeError, match="add requires arguments to have the same dtypes"):
        lax.add(Z, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="pow: a floating or complex exponent"):
        lax.pow(Z, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="full: cannot fill an array of dtype float32"):
        lax.full((2,), 1j, np.float32)
    with pytest.raises(TypeError, match="full_like"):
        lax.full_like(np.ones(2, np.float32), 1 + 1j)


# -- conversion ---------------------------------------------------------------------------------


def test_convert_element_type_to_and_from_complex():
    with pytest.warns(np.exceptions.ComplexWarning, match="discards the imaginary part"):
        got = lax.convert_element_type(Z, np.float32)
    np.testing.assert_array_equal(np.asarray(got), Z.real)
    with pytest.warns(np.exceptions.ComplexWarning):
        got = lax.convert_element_type(c64(2.7 + 1j, -1e10, np.nan), np.int32)
    np.testing.assert_array_equal(np.asarray(got), [2, np.iinfo(np.int32).min, 0])
    # complex -> bool takes the real part first too (JAX/XLA): 1j -> False
    with pytest.warns(np.exceptions.ComplexWarning):
        got = lax.convert_element_type(
            c64(0, 1j, 1, complex(0, -0.0), complex(np.nan, 0)), np.bool_
        )
    np.testing.assert_array_equal(np.asarray(got), [False, False, True, False, True])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = lax.convert_element_type(np.array([1, -2], np.int32), C64)
        np.testing.assert_array_equal(np.asarray(got), c64(1, -2))
        assert lax.convert_element_type(np.bool_(True), C64).dtype == C64


def test_convert_element_type_derivatives_between_real_and_complex():
    x = np.array([1.0, 2.0], np.float32)
    _, t = fg.jvp(lambda a: lax.convert_element_type(a, C64), (x,), (np.ones(2, np.float32),))
    assert t.dtype == C64 and np.array_equal(np.asarray(t), c64(1, 1))
    (ct,) = fg.linear_transpose(lambda a: lax.convert_element_type(a, C64), x)(c64(2 + 3j, 1j))
    assert ct.dtype == np.float32 and np.array_equal(np.asarray(ct), [2, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rules take the real part on purpose
        (ct,) = fg.linear_transpose(lambda a: lax.real(lax.convert_element_type(a, C64)), x)(
            np.ones(2, np.float32)
        )
    assert np.array_equal(np.asarray(ct), [1, 1])


# -- transposes ---------------------------------------------------------------------------------


def _rand_c(rng, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex128)


LINEAR = {  # fn, input kind ("c" complex, "f" real), output kind
    "real": (lax.real, "c", "f"),
    "imag": (lax.imag, "c", "f"),
    "conj_complex": (lax.conj, "c", "c"),
    "conj_real": (lax.conj, "f", "c"),
    "complex_lhs": (lambda x: lax.complex(x, np.full(3, 0.5)), "f", "c"),
    "complex_rhs": (lambda y: lax.complex(np.full(3, 0.5), y), "f", "c"),
    "mul": (lambda z: lax.mul(z, np.array([1 + 2j, -1j, 3.0])), "c", "c"),
    "dot_general": (
        lambda z: lax.dot_general(z, np.array([[1 + 1j], [2j], [-1.0]]), (((0,), (0,)), ((), ()))),
        "c",
        "c",
    ),
    "cumsum": (lax.cumsum, "c", "c"),
    "reduce_sum": (lambda z: lax.reduce_sum(z, (0,)), "c", "c"),
    "to_complex": (lambda x: lax.convert_element_type(x, np.complex128), "f", "c"),
    "complex_scalar_part": (lambda x: lax.complex(x, 0.25), "f", "c"),
}


@pytest.mark.parametrize("name", sorted(LINEAR))
def test_transposes_satisfy_the_bilinear_identity(name, x64):
    fn, kin, kout = LINEAR[name]
    rng = np.random.default_rng(len(name))
    x = _rand_c(rng, 3) if kin == "c" else rng.standard_normal(3)
    if name == "complex_scalar_part":
        x = np.float64(0.7)
    y0 = np.asarray(fn(x))
    ct = _rand_c(rng, y0.shape) if kout == "c" else rng.standard_normal(y0.shape)
    # fn may be affine (a constant part): transpose its linear part f(x) - f(0)
    lin = lambda v: lax.sub(fn(v), fn(np.zeros_like(x)))  # noqa: E731
    (xt,) = fg.linear_transpose(lin, x)(ct)
    assert np.asarray(xt).dtype == np.asarray(x).dtype
    lhs = np.sum(ct * np.asarray(lin(x))).real
    rhs = np.sum(np.asarray(xt) * x).real
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12)


def test_transposes_match_jax():
    (t,) = fg.linear_transpose(lax.real, c64(1))(np.float32([2]))
    np.testing.assert_array_equal(np.asarray(t), c64(2))
    (t,) = fg.linear_transpose(lax.imag, c64(1))(np.float32([2]))
    np.testing.assert_array_equal(np.asarray(t), c64(-2j))
    (t,) = fg.linear_transpose(lax.conj, np.float32([1]))(c64(2 + 1j))
    np.testing.assert_array_equal(np.asarray(t), np.float32([2]))
    ts = fg.linear_transpose(lax.complex, np.float32(1), np.float32(1))(np.complex64(2 + 3j))
    assert [float(np.asarray(t)) for t in ts] == [2.0, -3.0]


# -- jvp in complex directions ----------------------------------------------------------------

JVP = {
    **{name: _lax(name) for name in sorted(JAX_UNARY) if name != "sign"},
    "real": lax.real,
    "imag": lax.imag,
    "conj": lax.conj,
    "integer_pow": lambda z: lax.integer_pow(z, -3),
    "pow_base": lambda z: lax.pow(z, W.astype(np.complex128)),
    "pow_exponent": lambda z: lax.pow(W.astype(np.complex128), z),
    "pow_int": lambda z: lax.pow(z, np.array([0, 2, -1], np.int32)),
    "div": lambda z: lax.div(W.astype(np.complex128), z),
    "atan2": lambda z: lax.atan2(z, W.astype(np.complex128)),
    "max": lambda z: lax.max(z, W.astype(np.complex128)),
    "reduce_prod": lambda z: lax.reduce_prod(z, (0,)),
    "cumprod": lax.cumprod,
    "cumlogsumexp": lax.cumlogsumexp,
    "reduce_max": lambda z: lax.reduce_max(z, (0,)),
    "dot_general": lambda z: lax.dot_general(z, z, (((0,), (0,)), ((), ()))),
}


@pytest.mark.parametrize("name", sorted(JVP))
def test_jvp_matches_finite_differences_in_complex_directions(name, x64):
    fn = JVP[name]
    rng = np.random.default_rng(len(name) + 3)
    x = Z.astype(np.complex128)
    t = _rand_c(rng, 3)
    _, got = fg.jvp(fn, (x,), (t,))
    h = 1e-6
    fd = (np.asarray(fn(x + h * t)) - np.asarray(fn(x - h * t))) / (2 * h)
    np.testing.assert_allclose(np.asarray(got), fd, rtol=1e-6, atol=1e-8)


def test_jvp_of_real_functions_of_complex_inputs(x64):
    x = Z.astype(np.complex128)
    t = c64(1j, 1, 1 + 1j).astype(np.complex128)
    _, got = fg.jvp(lax.abs, (x,), (t,))
    assert np.asarray(got).dtype == np.float64
    np.testing.assert_allclose(np.asarray(got), (np.conj(x) * t).real / np.abs(x))
    _, got = fg.jvp(lax.abs, (np.complex128(0),), (np.complex128(1 + 1j),))  # 0 at 0, as JAX
    assert float(np.asarray(got)) == 0.0
    _, got = fg.jvp(lax.sign, (x,), (t,))  # sign has a zero derivative (JAX's rule)
    np.testing.assert_array_equal(np.asarray(got), 0)
    _, got = fg.jvp(lambda a: lax.complex(a, a), (np.float64(1),), (np.float64(2),))
    assert complex(np.asarray(got)) == 2 + 2j


# -- vmap -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lax.real,
        lax.imag,
        lax.conj,
        lax.abs,
        lax.exp,
        lambda z: lax.complex(lax.imag(z), lax.real(z)),
        lambda z: lax.mul(z, np.complex64(2j)),
        lambda z: lax.reduce_max(z, (0,)),
        lambda z: lax.cumsum(z),
    ],
)
def test_vmap_matches_a_loop(fn):
    zs = np.stack([Z, W, Z * 1j])
    for axis in (0, 1):
        got = fg.vmap(fn, in_axes=axis)(zs if axis == 0 else zs.T)
        want = np.stack([np.asarray(fn(z)) for z in zs])
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    got = fg.vmap(lax.complex, (0, None))(np.ones(3, np.float32), np.float32(2))
    np.testing.assert_array_equal(np.asarray(got), c64(1 + 2j, 1 + 2j, 1 + 2j))


# -- reductions, dot_general, structural ops ------------------------------------------------------


def test_reductions():
    rng = np.random.default_rng(0)
    z = _rand_c(rng, (3, 4)).astype(C64)
    zz = z.astype(np.complex128)
    _allclose(lax.reduce_sum(z, (0,)), zz.sum(0), rtol=1e-6)
    _allclose(lax.reduce_sum(z, (0, 1)), zz.sum(), rtol=1e-6)
    _allclose(lax.reduce_prod(z, (1,)), zz.prod(1), rtol=1e-5)
    _allclose(lax.cumsum(z, 1), zz.cumsum(1), rtol=1e-6)
    _allclose(lax.cumprod(z, 0, reverse=True), zz[::-1].cumprod(0)[::-1], rtol=1e-5)

    def lexmax(v):  # a Python loop in the lexicographic order
        best = v[0]
        for e in v[1:]:
            best = e if (e.real, e.imag) > (best.real, best.imag) else best
        return best

    z[0, 1] = z[0, 0].real + 1j * (z[0, 0].imag + 1)  # a tie in the real part
    np.testing.assert_array_equal(np.asarray(lax.reduce_max(z, (1,))), [lexmax(r) for r in z])
    np.testing.assert_array_equal(np.asarray(lax.reduce_min(z, (1,))), [-lexmax(-r) for r in z])
    np.testing.assert_array_equal(
        np.asarray(lax.cummax(z, 1)), [[lexmax(r[: i + 1]) for i in range(4)] for r in z]
    )
    empty = np.zeros((0, 2), C64)
    np.testing.assert_array_equal(np.asarray(lax.reduce_max(empty, (0,))), c64(-np.inf, -np.inf))
    np.testing.assert_array_equal(np.asarray(lax.reduce_min(empty, (0,))), c64(np.inf, np.inf))
    np.testing.assert_array_equal(np.asarray(lax.reduce_sum(empty, (0,))), c64(0, 0))
    np.testing.assert_array_equal(np.asarray(lax.reduce_prod(empty, (0,))), c64(1, 1))
    assert lax.reduce(z, np.complex64(0), lax.add, (0,)).dtype == C64


def test_dot_general():
    rng = np.random.default_rng(1)
    a, b = _rand_c(rng, (2, 3)).astype(C64), _rand_c(rng, (3, 4)).astype(C64)
    dims = (((1,), (0,)), ((), ()))
    _allclose(lax.dot_general(a, b, dims), a.astype(np.complex128) @ b, rtol=1e-5)
    r = rng.standard_normal((3, 4)).astype(np.float32)
    got = lax.dot_general(a, r, dims)  # mixed operands are promoted, as JAX
    assert got.dtype == C64
    _allclose(got, a.astype(np.complex128) @ r, rtol=1e-5)
    got = lax.dot_general(a, b, dims, preferred_element_type=np.float32)  # the real part
    assert got.dtype == np.float32
    _allclose(got, (a.astype(np.complex128) @ b).real, rtol=1e-5)
    got = lax.dot_general(r.T, r, dims, preferred_element_type=C64)
    assert got.dtype == C64
    _allclose(got, r.T.astype(np.float64) @ r, rtol=1e-5)
    batched = lax.dot_general(np.stack([a, a]), np.stack([b, b]), (((2,), (1,)), ((0,), (0,))))
    _allclose(batched[1], a.astype(np.complex128) @ b, rtol=1e-5)
    assert lax.dot_general(np.zeros((2, 0), C64), np.zeros((0, 3), C64), dims).dtype == C64


def test_structural_ops_carry_the_dtype():
    z = (np.arange(6) + 1j * np.arange(6)[::-1]).astype(C64).reshape(2, 3)
    checks = [
        (lax.reshape(z, (3, 2)), z.reshape(3, 2)),
        (lax.transpose(z, (1, 0)), z.T),
        (lax.concatenate([z, z], 1), np.concatenate([z, z], 1)),
        (lax.pad(z, np.complex64(1j), ((1, 0, 0), (0, 1, 1))), None),
        (lax.slice(z, (0, 1), (2, 3)), z[:, 1:]),
        (lax.dynamic_slice(z, (1, 1), (1, 2)), z[1:, 1:]),
        (lax.rev(z, (0,)), z[::-1]),
        (lax.broadcast_in_dim(z[0], (2, 3), (1,)), np.broadcast_to(z[0], (2, 3))),
        (lax.squeeze(z[None], (0,)), z),
        (lax.iota(C64, 3), c64(0, 1, 2)),
        (lax.full_like(z, 2), np.full((2, 3), 2, C64)),
    ]
    for got, want in checks:
        assert got.dtype == C64
        if want is not None:
            np.testing.assert_array_equal(np.asarray(got), want)
    padded = np.asarray(lax.pad(z, np.complex64(1j), ((1, 0, 0), (0, 1, 1))))
    assert padded.shape == (3, 6) and padded[0, 0] == 1j and padded[1, 0] == z[0, 0]
    rows = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    idx = np.array([[1], [0], [7]], np.int32)
    got = np.asarray(lax.gather(z, idx, rows, (1, 3), mode="fill"))
    np.testing.assert_array_equal(got[:2], z[[1, 0]])
    assert np.all(np.isnan(got[2].real))  # out of bounds: NaN, as JAX
    upd = ScatterDimensionNumbers(
        update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)
    )
    got = lax.scatter_add(z, np.array([[1], [1]], np.int32), np.ones((2, 3), C64) * 1j, upd)
    np.testing.assert_array_equal(np.asarray(got), z + np.array([[0], [2j]]))


def test_scatter_max_orders_lexicographically():
    # JAX 0.10.2: scatter_max([1+2j, 0.5, 1+1j], [0], [5]) is [5, 0.5, 1+1j]
    dn = ScatterDimensionNumbers((), (0,), (0,))
    z = c64(1 + 2j, 0.5, 1 + 1j)
    got = lax.scatter_max(z, np.array([[0], [2]], np.int32), c64(5, 1 + 0.5j), dn)
    np.testing.assert_array_equal(np.asarray(got), c64(5, 0.5, 1 + 1j))
    got = lax.scatter_min(z, np.array([[0], [2]], np.int32), c64(5, 1 + 0.5j), dn)
    np.testing.assert_array_equal(np.asarray(got), c64(1 + 2j, 0.5, 1 + 0.5j))


def test_cumlogsumexp_is_the_principal_log_of_running_sums():
    # JAX 0.10.2: [1+2j, 0.92636883+1.3644035j, 1.6403408+1.175422j]
    z = c64(1 + 2j, 0.5, 1 + 1j)
    want = c64(1 + 2j, 0.92636883 + 1.3644035j, 1.6403408 + 1.175422j)
    _allclose(lax.cumlogsumexp(z), want, rtol=2e-6)
    _allclose(lax.cumlogsumexp(c64(-np.inf, 1j)), c64(-np.inf, 1j))
    got = lax.cumlogsumexp(np.stack([z, z]), 1, reverse=True)
    _allclose(got[1], np.log(np.cumsum(np.exp(z[::-1].astype(np.complex128))))[::-1])


def _any_complex(shape):
    part = st.floats(width=32, allow_nan=True, allow_infinity=True)
    return hnp.arrays(C64, shape, elements=st.builds(complex, part, part))


@settings(max_examples=25, deadline=None)
@given(data=st.data(), shape=st.sampled_from([(), (0,), (3,), (2, 2)]), scalar=st.booleans())
@pytest.mark.parametrize(
    "name, ref",
    [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)],
)
def test_arithmetic_with_any_values_and_a_0d_operand_matches_numpy(name, ref, data, shape, scalar):
    x = data.draw(_any_complex(shape))
    y = data.draw(_any_complex(() if scalar else shape))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = np.asarray(_lax(name)(x, y))
    with np.errstate(all="ignore"):
        want = ref(x, y)
    assert got.dtype == C64 and got.shape == want.shape
    if name == "mul":
        # XLA's textbook product (eager and jit alike): within a few ulps of |x| |y| of the
        # exact product where that is finite (numpy fuses a multiply-add and rounds less;
        # tests/test_complex_edges.py checks the special values against jit)
        bx, by = np.broadcast_arrays(x, y)
        with np.errstate(all="ignore"):
            exact = bx.astype(np.complex128) * by
            scale = np.abs(bx.astype(np.complex128)) * np.abs(by)
        ok = np.isfinite(exact) & np.isfinite(got) & (scale < 1e38)
        assert np.all(np.abs(got[ok] - exact[ok]) <= 4e-7 * scale[ok] + 1e-44)
        return
    if name == "div":
        # numpy's special values differ from XLA's (tests/test_complex_edges.py checks those),
        # and its 1/den overflows for subnormal divisors: compare where both are ordinary.
        bx, by = np.broadcast_arrays(x, y)
        ok = np.isfinite(bx) & np.isfinite(by) & (np.abs(by) > 1e-30) & np.isfinite(want)
        got, want = got[ok], want[ok]
    for part in (np.real, np.imag):
        np.testing.assert_allclose(part(got), part(want), rtol=1e-6, equal_nan=True)


def test_sign_of_a_subnormal_complex_has_unit_modulus():
    # |8e-45 + 8e-45i| is 8 units of 2^-149: dividing by it gave 0.75 + 0.75i before the parts
    # were scaled into the normal range first
    z = np.array([8e-45 + 8e-45j, 1e-45 - 3e-45j, 2e-40j, 3 + 4j], np.complex64)
    want = z.astype(np.complex128) / np.abs(z.astype(np.complex128))
    for got in (fg.lax.sign(z), fg.jit(fg.lax.sign)(z)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
        np.testing.assert_allclose(np.abs(np.asarray(got)), 1, rtol=1e-6)
