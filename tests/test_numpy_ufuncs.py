"""fungrad.numpy elementwise functions against numpy (values) and JAX's documented rules (dtypes).

numpy is the value oracle: inputs are cast to the dtype JAX computes in, then numpy evaluates
the function (in float64 for transcendental functions, rounded back to float32). Where JAX
deliberately differs from numpy the test follows JAX and says so: type promotion
(``int32 + uint32 -> int32`` without x64, numpy gives int64; ``sin(int32) -> float32``, numpy
gives float64), integer division by zero, ``modf(inf)``, and bool handling.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from tests.helpers import assert_array

F32, I32, U32, BOOL = (np.dtype(t) for t in (np.float32, np.int32, np.uint32, np.bool_))
DTYPES = [F32, I32, U32, BOOL]
SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0]
BIG, TINY = float(np.float32(1e30)), float(np.float32(1e-38))

# JAX's promotion of the dtypes above with x64 off (numpy differs: int32+uint32 -> int64,
# float32+int32 -> float64).
_PROMOTE = {
    frozenset([F32]): F32,
    frozenset([I32]): I32,
    frozenset([U32]): U32,
    frozenset([BOOL]): BOOL,
    frozenset([F32, I32]): F32,
    frozenset([F32, U32]): F32,
    frozenset([F32, BOOL]): F32,
    frozenset([I32, U32]): I32,
    frozenset([I32, BOOL]): I32,
    frozenset([U32, BOOL]): U32,
}


def promoted(d1, d2):
    return _PROMOTE[frozenset([d1, d2])]


def elements(dtype, special: bool = True, lo: int = -1000, hi: int = 1000):
    if dtype == F32:
        finite = st.floats(-100, 100, width=32)
        return st.one_of(finite, st.sampled_from(SPECIALS)) if special else finite
    if dtype == I32:
        return st.integers(lo, hi)
    if dtype == U32:
        return st.integers(max(lo, 0), hi)
    return st.booleans()


def arrays(dtype, shape, **kw):
    return hnp.arrays(dtype, shape, elements=elements(dtype, **kw))


def to_fnp(x: np.ndarray):
    return fnp.asarray(x)


# ---------------------------------------------------------------------------------------------
# Unary functions that promote to float

UNARY_INEXACT = {
    "exp": np.exp,
    "exp2": np.exp2,
    "expm1": np.expm1,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "log1p": np.log1p,
    "sqrt": np.sqrt,
    "cbrt": np.cbrt,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "arcsin": np.arcsin,
    "arccos": np.arccos,
    "arctan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "arcsinh": np.arcsinh,
    "arccosh": np.arccosh,
    "arctanh": np.arctanh,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "deg2rad": np.deg2rad,
    "rad2deg": np.rad2deg,
    "degrees": np.degrees,
    "radians": np.radians,
    "fabs": np.fabs,
    "rint": np.rint,
    "reciprocal": lambda x: 1 / x,
    "sinc": np.sinc,
}


@pytest.mark.parametrize("name", sorted(UNARY_INEXACT))
@given(data=st.data())
def test_unary_inexact_matches_numpy(name, data):
    dtype = data.draw(st.sampled_from(DTYPES))
    x = data.draw(arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)))
    got = getattr(fnp, name)(to_fnp(x))
    # JAX: ints and bools compute in float32 (numpy would use float64 or float16).
    x32 = x.astype(np.float32)
    with np.errstate(all="ignore"):
        expected = UNARY_INEXACT[name](x32.astype(np.float64)).astype(np.float32)
    assert_array(got, expected, dtype=np.float32, rtol=2e-6, atol=2e-6)


# ---------------------------------------------------------------------------------------------
# Binary functions: mutually broadcast shapes, every dtype pair, JAX result dtypes

# kind -> how the result dtype follows from the promoted dtype p
#   arith: p; numeric: p with bool -> int32; inexact: p with ints/bools -> float32;
#   bool: bool (comparisons, logical); int_only: p, integer/bool operands only.
BINARY = {
    "add": ("arith", np.add),
    "subtract": ("arith", np.subtract),
    "multiply": ("arith", np.multiply),
    "maximum": ("arith", np.maximum),
    "minimum": ("arith", np.minimum),
    "fmax": ("arith", np.fmax),
    "fmin": ("arith", np.fmin),
    "floor_divide": ("numeric", np.floor_divide),
    "remainder": ("numeric", np.remainder),
    "mod": ("numeric", np.mod),
    "fmod": ("numeric", np.fmod),
    "true_divide": ("inexact", np.true_divide),
    "divide": ("inexact", np.divide),
    "arctan2": ("inexact", np.arctan2),
    "atan2": ("inexact", np.arctan2),
    "hypot": ("inexact", np.hypot),
    "logaddexp": ("inexact", np.logaddexp),
    "logaddexp2": ("inexact", np.logaddexp2),
    "copysign": ("inexact", np.copysign),
    "heaviside": ("inexact", np.heaviside),
    "float_power": ("inexact", np.float_power),
    "equal": ("bool", np.equal),
    "not_equal": ("bool", np.not_equal),
    "less": ("bool", np.less),
    "less_equal": ("bool", np.less_equal),
    "greater": ("bool", np.greater),
    "greater_equal": ("bool", np.greater_equal),
    "logical_and": ("bool", np.logical_and),
    "logical_or": ("bool", np.logical_or),
    "logical_xor": ("bool", np.logical_xor),
    "bitwise_and": ("int_only", np.bitwise_and),
    "bitwise_or": ("int_only", np.bitwise_or),
    "bitwise_xor": ("int_only", np.bitwise_xor),
}


def result_dtype(kind, p):
    if kind == "bool":
        return BOOL
    if kind == "inexact":
        return F32
    if kind == "numeric" and p == BOOL:
        return I32
    return p


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_matches_numpy(name, data):
    kind, np_fn = BINARY[name]
    d1, d2 = data.draw(st.sampled_from(DTYPES)), data.draw(st.sampled_from(DTYPES))
    p = promoted(d1, d2)
    if kind == "int_only":
        assume(p != F32)
    if name == "subtract":
        assume(p != BOOL)  # boolean subtraction is a TypeError (tested below)
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(
            num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=3
        )
    )
    x1 = data.draw(arrays(d1, shapes.input_shapes[0]))
    x2 = data.draw(arrays(d2, shapes.input_shapes[1]))
    out_dtype = result_dtype(kind, p)
    comp = F32 if kind == "inexact" else (I32 if out_dtype == I32 and p == BOOL else p)
    a1, a2 = x1.astype(comp), x2.astype(comp)
    if kind == "numeric" and comp.kind in "iu":
        a2 = np.where(a2 == 0, np.ones_like(a2), a2)  # x // 0 follows JAX: tested below
        x2 = a2
    got = getattr(fnp, name)(to_fnp(x1), to_fnp(x2))
    with np.errstate(all="ignore"):
        if kind == "inexact":
            expected = np_fn(a1.astype(np.float64), a2.astype(np.float64)).astype(np.float32)
        else:
            expected = np_fn(a1, a2)
    assert got.shape == shapes.result_shape
    assert_array(got, expected, dtype=out_dtype, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize(
    "name", ["left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift"]
)
@given(data=st.data())
def test_shifts_match_numpy(name, data):
    # Shift counts past the bit width (and negative ones) give 0 or the sign fill, as XLA
    # and numpy both define them.
    d1 = data.draw(st.sampled_from([I32, U32]))
    x1 = data.draw(
        hnp.arrays(d1, (5,), elements=st.integers(-(2**31) if d1 == I32 else 0, 2**31 - 1))
    )
    x2 = data.draw(hnp.arrays(d1, (5,), elements=st.integers(0 if d1 == U32 else -3, 40)))
    got = getattr(fnp, name)(to_fnp(x1), to_fnp(x2))
    np_fn = np.left_shift if "left" in name else np.right_shift
    assert_array(got, np_fn(x1, x2), dtype=d1)


@given(data=st.data())
def test_power_matches_numpy(data):
    d1, d2 = data.draw(st.sampled_from(DTYPES)), data.draw(st.sampled_from(DTYPES))
    p = promoted(d1, d2)
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(
            num_shapes=2, min_dims=1, max_dims=2, min_side=0, max_side=3
        )
    )
    x1 = data.draw(arrays(d1, shapes.input_shapes[0], lo=-10, hi=10))
    x2 = data.draw(arrays(d2, shapes.input_shapes[1], lo=0, hi=20))
    comp = I32 if p == BOOL else p
    got = fnp.power(to_fnp(x1), to_fnp(x2))
    with np.errstate(all="ignore"):
        if comp == F32:
            expected = np.power(x1.astype(np.float64), x2.astype(np.float64)).astype(F32)
        else:  # integer powers wrap around like numpy's
            expected = np.power(x1.astype(comp), x2.astype(comp))
    assert_array(got, expected, dtype=comp, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Unary functions that keep (or map) the dtype


def _identity(x):
    return x


UNARY_SAME = {
    # name: (accepted dtypes, numpy reference, result dtype or None for "same as input")
    "floor": (DTYPES, lambda x: np.floor(x) if x.dtype == F32 else x, None),
    "ceil": (DTYPES, lambda x: np.ceil(x) if x.dtype == F32 else x, None),
    "trunc": (DTYPES, lambda x: np.trunc(x) if x.dtype == F32 else x, None),
    "fix": (DTYPES, lambda x: np.fix(x) if x.dtype == F32 else x, None),
    "sign": ([F32, I32, U32], np.sign, None),
    "absolute": (DTYPES, lambda x: x if x.dtype == BOOL else np.absolute(x), None),
    "abs": (DTYPES, lambda x: x if x.dtype == BOOL else np.absolute(x), None),
    "negative": ([F32, I32, U32], np.negative, None),
    "positive": (DTYPES, _identity, None),  # numpy rejects bools; jnp does not
    "square": (DTYPES, lambda x: np.square(x.astype(I32) if x.dtype == BOOL else x), "numeric"),
    "isnan": (DTYPES, np.isnan, BOOL),
    "isinf": (DTYPES, np.isinf, BOOL),
    "isfinite": (DTYPES, np.isfinite, BOOL),
    "isposinf": (DTYPES, np.isposinf, BOOL),
    "isneginf": (DTYPES, np.isneginf, BOOL),
    "signbit": (DTYPES, lambda x: np.signbit(x.astype(I32) if x.dtype == BOOL else x), BOOL),
    "logical_not": (DTYPES, np.logical_not, BOOL),
    "invert": ([I32, U32, BOOL], np.invert, None),
    "bitwise_not": ([I32, U32, BOOL], np.invert, None),
    "bitwise_invert": ([I32, U32, BOOL], np.invert, None),
    "bitwise_count": (
        [I32, U32, BOOL],
        lambda x: np.bitwise_count(x.astype(np.int64)),
        np.dtype(np.uint8),
    ),
    "real": (DTYPES, _identity, None),
    "conj": (DTYPES, _identity, None),
    "conjugate": (DTYPES, _identity, None),
    "imag": (DTYPES, np.zeros_like, None),
    "nan_to_num": (DTYPES, np.nan_to_num, None),
}


@pytest.mark.parametrize("name", sorted(UNARY_SAME))
@given(data=st.data())
def test_unary_same_dtype_matches_numpy(name, data):
    accepted, np_fn, out = UNARY_SAME[name]
    dtype = data.draw(st.sampled_from(accepted))
    x = data.draw(
        hnp.arrays(
            dtype,
            hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
            elements=elements(dtype, lo=-(2**31) if dtype == I32 else 0, hi=2**31 - 1),
        )
    )
    got = getattr(fnp, name)(to_fnp(x))
    with np.errstate(all="ignore"):
        expected = np.asarray(np_fn(x))
    out_dtype = {None: dtype, "numeric": I32 if dtype == BOOL else dtype}.get(out, out)
    assert_array(got, expected.astype(out_dtype), dtype=out_dtype, rtol=0, atol=0)


@given(
    hnp.arrays(
        F32,
        hnp.array_shapes(min_dims=0, max_dims=2, max_side=4),
        elements=st.one_of(st.floats(-1e6, 1e6, width=32), st.sampled_from(SPECIALS)),
    )
)
def test_round_rint_half_to_even(x):
    assert_array(fnp.round(to_fnp(x)), np.round(x), dtype=F32, rtol=0, atol=0)
    assert_array(fnp.around(to_fnp(x)), np.round(x), dtype=F32, rtol=0, atol=0)
    assert_array(fnp.rint(to_fnp(x)), np.rint(x), dtype=F32, rtol=0, atol=0)


@given(
    hnp.arrays(
        F32,
        (6,),
        elements=st.one_of(
            st.floats(-BIG, BIG, width=32),
            st.floats(-TINY, TINY, width=32),
            st.sampled_from(SPECIALS),
        ),
    )
)
def test_frexp_ldexp_modf_match_numpy(x):
    m, e = fnp.frexp(to_fnp(x))
    m_ref, e_ref = np.frexp(x)
    assert_array(m, m_ref, dtype=F32, rtol=0, atol=0)
    assert_array(e, e_ref, dtype=I32)
    k = np.arange(-3, 3, dtype=np.int32)
    with np.errstate(all="ignore"):
        assert_array(fnp.ldexp(to_fnp(x), to_fnp(k)), np.ldexp(x, k), dtype=F32, rtol=0, atol=0)
        frac_ref, whole_ref = np.modf(x)
    frac, whole = fnp.modf(to_fnp(x))
    # jnp: the fractional part of +-inf is NaN (numpy gives +-0).
    frac_ref = np.where(np.isinf(x), np.nan, frac_ref)
    assert_array(frac, frac_ref, dtype=F32, rtol=0, atol=0)
    assert_array(whole, whole_ref, dtype=F32, rtol=0, atol=0)


@given(
    hnp.arrays(
        F32, (5,), elements=st.one_of(st.floats(-100, 100, width=32), st.sampled_from(SPECIALS))
    ),
    hnp.arrays(
        F32, (5,), elements=st.one_of(st.floats(-100, 100, width=32), st.sampled_from(SPECIALS))
    ),
)
def test_nextafter_isclose_match_numpy(x, y):
    assert_array(fnp.nextafter(to_fnp(x), to_fnp(y)), np.nextafter(x, y), dtype=F32, rtol=0, atol=0)
    for equal_nan in (False, True):
        got = fnp.isclose(to_fnp(x), to_fnp(y), rtol=1e-3, atol=1e-2, equal_nan=equal_nan)
        assert_array(got, np.isclose(x, y, rtol=1e-3, atol=1e-2, equal_nan=equal_nan), dtype=BOOL)
        got = fnp.allclose(to_fnp(x), to_fnp(y), equal_nan=equal_nan)
        assert_array(got, np.allclose(x, y, equal_nan=equal_nan), dtype=BOOL)


@given(data=st.data())
def test_clip_matches_numpy(data):
    dtype = data.draw(st.sampled_from([F32, I32]))
    x = data.draw(arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4)))
    lo, hi = data.draw(st.integers(-50, 50)), data.draw(st.integers(-50, 50))
    assert_array(fnp.clip(to_fnp(x), lo, hi), np.minimum(np.maximum(x, lo), hi), dtype=dtype)
    assert_array(fnp.clip(to_fnp(x), min=lo), np.maximum(x, lo), dtype=dtype)
    assert_array(fnp.clip(to_fnp(x), max=hi), np.minimum(x, hi), dtype=dtype)
    # numpy's spelling of the bounds; min > max gives max, as jnp and numpy
    assert_array(
        fnp.clip(to_fnp(x), a_min=lo, a_max=hi), np.minimum(np.maximum(x, lo), hi), dtype=dtype
    )


@given(data=st.data())
def test_gcd_lcm_match_numpy(data):
    dtype = data.draw(st.sampled_from([I32, U32]))
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(
            num_shapes=2, min_dims=0, max_dims=2, min_side=0, max_side=3
        )
    )
    x1 = data.draw(arrays(dtype, shapes.input_shapes[0]))
    x2 = data.draw(arrays(dtype, shapes.input_shapes[1]))
    assert_array(fnp.gcd(to_fnp(x1), to_fnp(x2)), np.gcd(x1, x2), dtype=dtype)
    assert_array(fnp.lcm(to_fnp(x1), to_fnp(x2)), np.lcm(x1, x2), dtype=dtype)


def test_gcd_is_a_while_loop_and_rejects_floats():
    x = to_fnp(np.array([12, -12, 0], np.int32))
    y = to_fnp(np.array([18, 18, 0], np.int32))
    jaxpr = fg.make_jaxpr(fnp.gcd)(x, y)
    assert "while[" in str(jaxpr)
    assert_array(jaxpr(x, y)[0], [6, 6, 0], dtype=I32)
    assert_array(fnp.lcm(x, 8), [24, 24, 0], dtype=I32)
    with pytest.raises(TypeError, match="gcd"):
        fnp.gcd(to_fnp(np.ones(2, np.float32)), 2)


# ---------------------------------------------------------------------------------------------
# Hand-checked JAX results (jax 0.10, CPU)


def test_integer_division_by_zero_follows_jax():
    x = to_fnp(np.array([7, -7, 0, 7, -(2**31)], np.int32))
    y = to_fnp(np.array([0, 0, 0, -1, -1], np.int32))
    assert_array(fnp.floor_divide(x, y), [-2, -2, -1, -7, -(2**31)], dtype=I32)
    assert_array(x // y, [-2, -2, -1, -7, -(2**31)], dtype=I32)
    assert_array(fnp.remainder(x, y), [0, 0, 0, 0, 0], dtype=I32)
    assert_array(fnp.fmod(x, y), [0, 0, 0, 0, 0], dtype=I32)
    q, r = fnp.divmod(x, y)
    assert_array(q, [-2, -2, -1, -7, -(2**31)], dtype=I32)
    assert_array(r, [0, 0, 0, 0, 0], dtype=I32)
    u = to_fnp(np.array([7, 0], np.uint32))
    zero_u = to_fnp(np.zeros(2, np.uint32))
    assert_array(fnp.floor_divide(u, zero_u), [2**32 - 1, 2**32 - 1], dtype=U32)
    assert_array(fnp.mod(u, zero_u), [0, 0], dtype=U32)
    assert_array(
        fnp.true_divide(to_fnp(np.array([1, 2], np.int32)), to_fnp(np.array([2, 0], np.int32))),
        [0.5, np.inf],
        dtype=F32,
    )


def test_float_division_special_values_follow_jax():
    x = to_fnp(np.array([7.0, -7, 7, -7, 0, 5], np.float32))
    y = to_fnp(np.array([0.0, 0, np.inf, np.inf, 0, -3], np.float32))
    assert_array(fnp.floor_divide(x, y), [np.inf, -np.inf, 0, -1, np.nan, -2], dtype=F32)
    assert_array(fnp.mod(x, y), [np.nan, np.nan, 7, np.inf, np.nan, -1], dtype=F32)
    q, r = fnp.divmod(
        to_fnp(np.array([7.0, -7, 7, 1], np.float32)),
        to_fnp(np.array([2.0, 2, 0, np.inf], np.float32)),
    )
    assert_array(q, [3, -4, np.inf, 0], dtype=F32)
    assert_array(r, [1, 1, np.nan, 1], dtype=F32)


def test_integer_power_follows_jax():
    x = to_fnp(np.array([2, 1, -1, 0, 3], np.int32))
    # Negative exponents in an array give jnp's binary-exponentiation results.
    assert_array(
        fnp.power(x, to_fnp(np.array([-1, -2, -3, -1, 2], np.int32))), [0, 1, -1, 0, 9], dtype=I32
    )
    assert_array(
        fnp.power(
            to_fnp(np.array([0, 0, 2, -2], np.int32)), to_fnp(np.array([0, 3, 0, 3], np.int32))
        ),
        [1, 0, 1, -8],
        dtype=I32,
    )
    with pytest.raises(TypeError, match="power: integers cannot be raised to negative"):
        fnp.power(x, -1)
    # A static integer exponent keeps the base dtype (lax.integer_pow), as jnp.
    i8 = to_fnp(np.array([2], np.int8))
    assert_array(fnp.power(i8, 3), [8], dtype=np.int8)
    assert_array(fnp.power(i8, np.int32(3)), [8], dtype=np.int8)
    assert_array(i8 ** to_fnp(np.array([3], np.int32)), [8], dtype=I32)
    assert_array(fnp.power(2, 3), 8, dtype=I32, weak_type=True)
    assert_array(fnp.pow(to_fnp(np.array([-8.0], np.float32)), 1 / 3), [np.nan], dtype=F32)
    assert_array(fnp.float_power(2, 3), 8.0, dtype=F32, weak_type=True)


def test_rounding_signs_and_abs_follow_jax():
    x = to_fnp(np.array([0.5, 1.5, 2.5, -0.5, -1.5], np.float32))
    assert_array(fnp.round(x), [0.0, 2.0, 2.0, -0.0, -2.0], dtype=F32)
    assert np.signbit(np.asarray(fnp.round(x))[3])
    assert_array(
        fnp.round(to_fnp(np.array([1.25, 1.35, 12.5], np.float32)), 1), [1.2, 1.4, 12.5], dtype=F32
    )
    assert_array(
        fnp.round(to_fnp(np.array([1.234, 5.678], np.float16)), 2),
        [1.23, 5.68],
        dtype=np.float16,
        rtol=1e-3,
    )
    assert_array(fnp.round(to_fnp(np.array([15, 25], np.int32)), 1), [15, 25], dtype=I32)
    s = fnp.sign(to_fnp(np.array([np.nan, -0.0, 0.0, -3, np.inf], np.float32)))
    assert_array(s, [np.nan, -0.0, 0.0, -1.0, 1.0], dtype=F32)
    assert np.signbit(np.asarray(s)[1])
    assert_array(fnp.abs(to_fnp(np.array([-(2**31)], np.int32))), [-(2**31)], dtype=I32)
    assert_array(abs(to_fnp(np.array([-(2**31), 3], np.int32))), [-(2**31), 3], dtype=I32)
    sb = fnp.signbit(to_fnp(np.array([-0.0, np.nan, -np.nan, -1], np.float32)))
    assert_array(sb, [True, False, True, True], dtype=BOOL)
    assert_array(fnp.copysign(to_fnp(np.array([-1, 1], np.int32)), -1), [-1.0, -1.0], dtype=F32)


def test_bool_and_mixed_dtype_rules_follow_jax():
    b = to_fnp(np.array([True, False]))
    assert_array(fnp.add(b, b), [True, False], dtype=BOOL)  # logical or
    assert_array(fnp.multiply(b, b), [True, False], dtype=BOOL)  # logical and
    assert_array(fnp.square(b), [1, 0], dtype=I32)
    assert_array(fnp.floor_divide(b, b[:1]), [1, 0], dtype=I32)
    assert_array(fnp.floor(b), [True, False], dtype=BOOL)
    assert_array(fnp.fabs(b), [1.0, 0.0], dtype=F32)
    assert_array(fnp.maximum(b, 1), [1, 1], dtype=I32, weak_type=True)
    assert_array(
        fnp.less(to_fnp(np.array([1], np.int32)), to_fnp(np.array([1.5], np.float32))),
        [True],
        dtype=BOOL,
    )
    assert_array(
        fnp.less(to_fnp(np.array([1], np.int32)), to_fnp(np.array([1], np.uint32))),
        [False],
        dtype=BOOL,
    )
    assert_array(
        fnp.bitwise_count(to_fnp(np.array([-1, 3, -(2**31)], np.int32))), [1, 2, 1], dtype=np.uint8
    )
    assert_array(fnp.logical_not(to_fnp(np.array([0, 2], np.int32))), [True, False], dtype=BOOL)
    assert_array(fnp.left_shift(b, b), [2, 0], dtype=I32)


def test_special_value_functions_follow_jax():
    nan, inf = np.nan, np.inf
    f = lambda *v: to_fnp(np.array(v, np.float32))  # noqa: E731
    assert_array(fnp.heaviside(f(-1.0, 0, 2, nan), 0.5), [0, 0.5, 1, nan], dtype=F32)
    assert_array(
        fnp.heaviside(to_fnp(np.array([-1, 0, 1], np.int32)), 5), [0.0, 5.0, 1.0], dtype=F32
    )
    assert_array(fnp.logaddexp(f(inf, -inf, nan), f(inf, -inf, 1.0)), [inf, -inf, nan], dtype=F32)
    assert_array(fnp.logaddexp2(f(1.0), f(1.0)), [2.0], dtype=F32)
    assert_array(
        fnp.hypot(f(3.0, inf, nan, 0, 0), f(4.0, nan, inf, 0, 3)), [5, inf, inf, 0, 3], dtype=F32
    )
    assert_array(fnp.hypot(f(3e30), f(4e30)), [5e30], dtype=F32, rtol=1e-6)
    assert_array(fnp.fmax(f(nan, 1.0, nan), f(2.0, nan, nan)), [2, 1, nan], dtype=F32)
    assert_array(fnp.maximum(f(nan, 1.0), f(2.0, nan)), [nan, nan], dtype=F32)
    assert_array(fnp.sinc(f(0.0, 0.5)), [1.0, 2 / np.pi], dtype=F32)
    assert_array(fnp.nan_to_num(f(nan, inf, -inf)), [0, 3.4028235e38, -3.4028235e38], dtype=F32)
    assert_array(
        fnp.nan_to_num(f(nan, inf, -inf), nan=1.0, posinf=2, neginf=-3), [1, 2, -3], dtype=F32
    )
    assert_array(
        fnp.clip(to_fnp(np.array([1, 5, 9], np.int32)), 3, 6.5),
        [3.0, 5.0, 6.5],
        dtype=F32,
        weak_type=True,
    )
    assert_array(fnp.clip(f(nan, 5.0), 3, 4), [nan, 4.0], dtype=F32)
    assert_array(fnp.clip(f(1.0, 5, 9), 6, 3), [3.0, 3.0, 3.0], dtype=F32)
    assert_array(
        fnp.isclose(f(nan, 1, inf), f(nan, 1.0000001, inf)), [False, True, True], dtype=BOOL
    )
    assert_array(
        fnp.isclose(f(nan, 1, inf), f(nan, 1.0000001, inf), equal_nan=True),
        [True, True, True],
        dtype=BOOL,
    )
    assert_array(fnp.isclose(to_fnp(np.array([1, 2], np.int32)), 2), [False, True], dtype=BOOL)
    m, e = fnp.frexp(f(8.0, 0.0, -3, inf))
    assert_array(m, [0.5, 0.0, -0.75, inf], dtype=F32)
    assert_array(e, [4, 0, 2, 0], dtype=I32)
    assert_array(fnp.ldexp(f(1.0, 3.0), to_fnp(np.array([2, -1], np.int32))), [4.0, 1.5], dtype=F32)
    assert_array(
        fnp.nextafter(1, 2),
        np.nextafter(np.float32(1), np.float32(2)),
        dtype=F32,
        weak_type=True,
        rtol=0,
        atol=0,
    )


def test_array_equal_and_equiv():
    a = to_fnp(np.array([1, 2], np.int32))
    assert_array(fnp.array_equal(a, to_fnp(np.array([1, 2, 3], np.int32))), False, dtype=BOOL)
    assert_array(fnp.array_equal(a, to_fnp(np.array([1.0, 2.0], np.float32))), True, dtype=BOOL)
    assert_array(fnp.array_equal(to_fnp(np.array([[1]])), to_fnp(np.array([1]))), False)
    nan = to_fnp(np.array([np.nan, 1.0], np.float32))
    assert_array(fnp.array_equal(nan, nan), False, dtype=BOOL)
    assert_array(fnp.array_equal(nan, nan, equal_nan=True), True, dtype=BOOL)
    assert_array(fnp.array_equiv(to_fnp(np.array([1, 1])), 1), True, dtype=BOOL)
    assert_array(fnp.array_equiv(a, to_fnp(np.array([1, 2, 3]))), False, dtype=BOOL)
    assert_array(fnp.array_equiv(a, to_fnp(np.array([[1, 2], [1, 3]]))), False, dtype=BOOL)


# ---------------------------------------------------------------------------------------------
# Weak types and dtype results


def test_python_scalars_are_weak():
    x = to_fnp(np.array([1.0, 2.0], np.float32))
    assert_array(x * 2.0, [2.0, 4.0], dtype=F32, weak_type=False)
    assert_array(fnp.multiply(2.0, x), [2.0, 4.0], dtype=F32, weak_type=False)
    i = to_fnp(np.array([1, 2], np.int32))
    assert_array(i + 1, [2, 3], dtype=I32, weak_type=False)
    assert_array(x + 1, [2.0, 3.0], dtype=F32)
    # int32 array + Python float: weak float32, as in JAX
    assert_array(i + 1.5, [2.5, 3.5], dtype=F32, weak_type=True)
    # A Python int wraps into a narrower integer dtype (jnp: int8 + 1000 == -23)
    i8 = to_fnp(np.array([1], np.int8))
    assert_array(i8 + 1000, [-23], dtype=np.int8)
    assert_array(i8 * 1000, [-24], dtype=np.int8)
    assert_array(i8 < 1000, [False], dtype=BOOL)
    assert_array(to_fnp(np.array([1], np.uint8)) + -1, [0], dtype=np.uint8)
    with pytest.raises(OverflowError, match="add"):
        fnp.add(i, 2**40)
    with np.errstate(all="raise"):  # no overflow warning on the way to inf
        assert_array(to_fnp(np.array([1], np.float16)) + 1e10, [np.inf], dtype=np.float16)
    assert_array(fnp.sin(2), np.sin(np.float32(2)), dtype=F32, weak_type=True)
    assert_array(fnp.add(2, 3), 5, dtype=I32, weak_type=True)
    assert_array(fnp.add(2, 3.0), 5.0, dtype=F32, weak_type=True)
    assert_array(fnp.add(True, True), True, dtype=BOOL, weak_type=False)
    assert_array(fnp.divide(1, 2), 0.5, dtype=F32, weak_type=True)
    # numpy scalars are not weak: float32 + float64 scalar follows the lattice (float64 is
    # canonicalised to float32 without x64).
    assert_array(x + np.float64(1), [2.0, 3.0], dtype=F32, weak_type=False)


def test_x64_dtypes(x64):
    x = fnp.asarray(np.array([1.0, 4.0], np.float64))
    assert_array(fnp.sqrt(x), [1.0, 2.0], dtype=np.float64, rtol=0, atol=0)
    assert_array(x * 2.0, [2.0, 8.0], dtype=np.float64)
    i32 = fnp.asarray(np.array([1, 2], np.int32))
    # jnp: int32 -> float32 even with x64 (only 64-bit integers become float64)
    assert_array(fnp.sin(i32), np.sin(np.array([1, 2], np.float32)), dtype=F32)
    assert_array(fnp.sin(fnp.asarray(np.array([1], np.int64))), np.sin([1.0]), dtype=np.float64)
    assert_array(fnp.sin(1), np.sin(1.0), dtype=np.float64, weak_type=True)
    assert_array(i32 + fnp.asarray(np.array([1, 2], np.uint32)), [2, 4], dtype=np.int64)
    assert_array(i32 + 2**40, [1, 2], dtype=I32)  # wraps, as jnp with x64
    assert_array(fnp.true_divide(i32, i32), [1.0, 1.0], dtype=F32)
    with pytest.raises(OverflowError):
        fnp.add(i32, 2**70)


# ---------------------------------------------------------------------------------------------
# Bad input


def test_bad_input_errors_name_the_function():
    x = to_fnp(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="sin"):
        fnp.sin("a")
    with pytest.raises(TypeError, match="add"):
        fnp.add([1.0], x)
    with pytest.raises(TypeError, match="hypot"):
        fnp.hypot(x, object())
    with pytest.raises(TypeError, match=r"add.*\(3,\).*\(4,\)"):
        fnp.add(x, to_fnp(np.ones(4, np.float32)))
    with pytest.raises(TypeError, match="bitwise_and"):
        fnp.bitwise_and(x, 1)
    with pytest.raises(TypeError, match="left_shift"):
        fnp.left_shift(x, 1)
    b = to_fnp(np.array([True]))
    with pytest.raises(TypeError, match="subtract"):
        fnp.subtract(b, b)
    with pytest.raises(TypeError, match="negative"):
        fnp.negative(b)
    with pytest.raises(TypeError, match="sign"):
        fnp.sign(b)
    with pytest.raises(ValueError, match="round"):
        fnp.round(to_fnp(np.array([15], np.int32)), -1)
    with pytest.raises(TypeError, match="round"):
        fnp.round(x, out=x)
    with pytest.raises(TypeError, match="ldexp"):
        fnp.ldexp(x, x)
    with pytest.raises(TypeError, match="clip"):
        fnp.clip(x, 0, a_min=1)
    with pytest.raises(TypeError, match="clip"):
        fnp.clip(min=0)


# ---------------------------------------------------------------------------------------------
# Tracing


def test_make_jaxpr_records_lax_ops_and_evaluates_to_eager():
    x = to_fnp(np.array([7, -7, 3], np.int32))
    y = to_fnp(np.array([2, 2, 0], np.int32))
    jaxpr = fg.make_jaxpr(fnp.floor_divide)(x, y)
    text = str(jaxpr)
    for prim in ("div", "rem", "sign", "select_n"):
        assert f" = {prim} " in text or f"{prim}[" in text, text
    np.testing.assert_array_equal(np.asarray(jaxpr(x, y)[0]), np.asarray(fnp.floor_divide(x, y)))

    f = to_fnp(np.array([0.5, 2.0], np.float32))
    jaxpr = fg.make_jaxpr(lambda a: fnp.sin(a) * 2.0)(x)
    assert "convert_element_type[new_dtype=float32 weak_type=False]" in str(jaxpr)
    assert "mul" in str(jaxpr) and "2.0:f32[]" in str(jaxpr)
    np.testing.assert_allclose(
        np.asarray(jaxpr(x)[0]), np.sin(np.asarray(x, np.float32)) * 2, rtol=1e-6
    )
    jaxpr = fg.make_jaxpr(lambda a: fnp.logaddexp(a, 1.0))(f)
    assert "log1p" in str(jaxpr) and "exp" in str(jaxpr)
    assert_array(jaxpr(f)[0], np.logaddexp(np.asarray(f), 1.0), dtype=F32)


def test_weak_types_of_formula_ufuncs_and_logical_ops_as_jax():
    # JAX 0.10.2: hypot, heaviside, logaddexp2, gcd and lcm are weak when every argument is
    # (Python numbers, weak arrays) and strong otherwise, even where promotion alone would keep
    # the flag (a bool array with a Python int); the logical ops and isnan of weak non-bool
    # input are weak bools.
    b = to_fnp(np.array([True, False]))
    for f in (fnp.hypot, fnp.heaviside, fnp.logaddexp2):
        assert f(2, 3).weak_type and f(2.0, 3.0).weak_type and f(fnp.asarray(1.0), 2).weak_type
        assert not f(b, 2).weak_type and not f(np.float32(2), 3).weak_type
    assert fnp.gcd(4, 6).weak_type and fnp.lcm(4, 6).weak_type
    assert not fnp.gcd(to_fnp(np.array([4], I32)), 6).weak_type
    assert_array(fnp.logical_or(1, 0), True, dtype=BOOL, weak_type=True)
    assert_array(fnp.logical_xor(1.0, 0), True, dtype=BOOL, weak_type=True)
    assert_array(fnp.logical_not(1), False, dtype=BOOL, weak_type=True)
    assert_array(fnp.logical_and(True, False), False, dtype=BOOL, weak_type=False)
    assert_array(fnp.logical_and(to_fnp(np.array([1], I32)), 0), [False], weak_type=False)
    assert_array(fnp.isnan(3), False, dtype=BOOL, weak_type=True)
    assert_array(fnp.isnan(True), False, dtype=BOOL, weak_type=False)
    assert_array(fnp.isinf(2.0), False, dtype=BOOL, weak_type=False)
