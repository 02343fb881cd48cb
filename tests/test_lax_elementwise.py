"""lax elementwise primitives against independent references, and special_math's accuracy.

The table OPS lists every elementwise primitive with the dtypes JAX accepts for it and a
reference: a float64 numpy function for floats (rounded to the operand dtype before comparing)
and a function of Python ints/bools for integer and bool dtypes (results wrapped to the dtype's
width), so integer semantics are checked without numpy's casting rules. Edge-case constants in
the explicit tests were checked by hand against JAX 0.10 on CPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
from fungrad import core, lax
from fungrad.lax import elementwise, special_math
from fungrad.testing.strategies import shapes
from tests.helpers import assert_array

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I8, I32, U32, BOOL = np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.uint32), np.dtype(bool)
FLOATS = (F32, F16)
INTS = (I32, U32, I8)
NUMERIC = FLOATS + INTS
ANY = NUMERIC + (BOOL,)
INT_OR_BOOL = INTS + (BOOL,)
TESTED = ANY

# -- references ---------------------------------------------------------------------------------


def _bits(dt) -> int:
    return 8 * np.dtype(dt).itemsize


def _wrap(v, dt):
    """A Python int wrapped to the integer dtype ``dt`` (two's complement), or a bool."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return bool(v)
    m = 1 << _bits(dt)
    v %= m
    return v - m if dt.kind == "i" and v >= m // 2 else v


def _trunc_div(a, b, dt):
    if b == 0:
        return -1  # XLA: x / 0 is all ones
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _c_rem(a, b, dt):
    return a if b == 0 else a - b * _trunc_div(a, b, dt)


def _shift_count(b, dt):
    return b % (1 << _bits(dt))  # counts are read as unsigned


def _shl(a, b, dt):
    c = _shift_count(b, dt)
    return 0 if c >= _bits(dt) else a << c


def _shrl(a, b, dt):
    c = _shift_count(b, dt)
    return 0 if c >= _bits(dt) else (a % (1 << _bits(dt))) >> c


def _shra(a, b, dt):
    s = _wrap(a, np.dtype(f"i{np.dtype(dt).itemsize}"))
    c = _shift_count(b, dt)
    return (-1 if s < 0 else 0) if c >= _bits(dt) else s >> c


def _not(a, dt):
    return (not a) if np.dtype(dt).kind == "b" else ~a


def _float_elementwise(fn):
    """A float64 reference from a Python function of one float."""

    def ref(x):
        return np.array([fn(v) for v in x.ravel().tolist()], np.float64).reshape(x.shape)

    return ref


def _math_or(fn, pole_value):
    def f(v):
        try:
            return fn(v)
        except ValueError:  # math raises at poles
            return pole_value
        except OverflowError:
            return math.inf

    return f


def _round_half_away(v):
    if not math.isfinite(v):
        return v
    return math.copysign(float(math.floor(abs(Fraction(v)) + Fraction(1, 2))), v)


def _round_half_even(v):
    if not math.isfinite(v):
        return v
    return math.copysign(float(round(abs(Fraction(v)))), v)


def _pow(x, y):
    # C's pow, through numpy on contiguous 1-d arrays: numpy shortcuts a scalar exponent of
    # 0.5 to sqrt (pow(-inf, 0.5) = nan, pow(-0.0, 0.5) = -0.0; C and XLA give inf and 0.0).
    shape = np.broadcast_shapes(x.shape, y.shape)
    x, y = (np.array(np.broadcast_to(a, shape), ndmin=1) for a in (x, y))
    return np.power(x, y).reshape(shape)


def _logistic(x):
    return 1.0 / (1.0 + np.exp(-x))


class Op(NamedTuple):
    id: str
    name: str  # primitive name (error messages, jaxprs)
    fn: Callable  # the lax wrapper under test
    nargs: int
    dtypes: tuple  # accepted among the tested dtypes
    fref: Callable | None  # float64 numpy reference for float operands
    iref: Callable | None  # Python reference for int/bool operands: (*values, dtype)
    bool_out: bool = False
    rtol: float = 0.0  # extra relative tolerance (transcendentals) on top of ulps
    atol: float = 0.0
    counts: bool = False  # second operand is a shift count


def _op(name, fn, nargs, dtypes, fref=None, iref=None, **kw):
    return Op(kw.pop("id", name), name, fn, nargs, dtypes, fref, iref, **kw)


_T = dict(rtol=4e-6)  # float32 numpy transcendentals are within a few ulp
OPS = [
    _op("add", lax.add, 2, NUMERIC, np.add, lambda a, b, dt: a + b),
    _op("sub", lax.sub, 2, NUMERIC, np.subtract, lambda a, b, dt: a - b),
    _op("mul", lax.mul, 2, NUMERIC, np.multiply, lambda a, b, dt: a * b),
    _op("div", lax.div, 2, NUMERIC, np.divide, _trunc_div),
    _op("rem", lax.rem, 2, NUMERIC, np.fmod, _c_rem),
    _op("pow", lax.pow, 2, FLOATS, _pow, **_T),
    _op(
        "integer_pow",
        lambda x: lax.integer_pow(x, 3),
        1,
        NUMERIC,
        lambda x: x * x * x,
        lambda a, dt: a**3,
        id="integer_pow_3",
        rtol=3e-7,
    ),
    _op(
        "integer_pow",
        lambda x: lax.integer_pow(x, -2),
        1,
        FLOATS,
        lambda x: 1 / (x * x),
        id="integer_pow_-2",
        rtol=3e-7,
    ),
    _op(
        "integer_pow",
        lambda x: lax.integer_pow(x, 0),
        1,
        NUMERIC,
        lambda x: x**0,
        lambda a, dt: 1,
        id="integer_pow_0",
    ),
    _op("neg", lax.neg, 1, NUMERIC, np.negative, lambda a, dt: -a),
    _op("sign", lax.sign, 1, NUMERIC, np.sign, lambda a, dt: (a > 0) - (a < 0)),
    _op("floor", lax.floor, 1, FLOATS, np.floor),
    _op("ceil", lax.ceil, 1, FLOATS, np.ceil),
    _op("round", lax.round, 1, FLOATS, _float_elementwise(_round_half_away), id="round_away"),
    _op(
        "round",
        lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
        1,
        FLOATS,
        _float_elementwise(_round_half_even),
        id="round_even",
    ),
    _op("abs", lax.abs, 1, FLOATS + (I32, I8), np.abs, lambda a, dt: abs(a)),
    _op("max", lax.max, 2, ANY, np.maximum, lambda a, b, dt: max(a, b)),
    _op("min", lax.min, 2, ANY, np.minimum, lambda a, b, dt: min(a, b)),
    _op("square", lax.square, 1, NUMERIC, np.square, lambda a, dt: a * a),
    _op("exp", lax.exp, 1, FLOATS, np.exp, **_T),
    _op("exp2", lax.exp2, 1, FLOATS, np.exp2, **_T),
    _op("log", lax.log, 1, FLOATS, np.log, **_T),
    _op("log1p", lax.log1p, 1, FLOATS, np.log1p, **_T),
    _op("expm1", lax.expm1, 1, FLOATS, np.expm1, **_T),
    _op("sqrt", lax.sqrt, 1, FLOATS, np.sqrt),
    _op("rsqrt", lax.rsqrt, 1, FLOATS, lambda x: 1 / np.sqrt(x), rtol=2e-7),
    _op("cbrt", lax.cbrt, 1, FLOATS, np.cbrt, **_T),
    _op("sin", lax.sin, 1, FLOATS, np.sin, **_T),
    _op("cos", lax.cos, 1, FLOATS, np.cos, **_T),
    _op("tan", lax.tan, 1, FLOATS, np.tan, **_T),
    _op("asin", lax.asin, 1, FLOATS, np.arcsin, **_T),
    _op("acos", lax.acos, 1, FLOATS, np.arccos, **_T),
    _op("atan", lax.atan, 1, FLOATS, np.arctan, **_T),
    _op("atan2", lax.atan2, 2, FLOATS, np.arctan2, **_T),
    _op("sinh", lax.sinh, 1, FLOATS, np.sinh, **_T),
    _op("cosh", lax.cosh, 1, FLOATS, np.cosh, **_T),
    _op("tanh", lax.tanh, 1, FLOATS, np.tanh, **_T),
    _op("asinh", lax.asinh, 1, FLOATS, np.arcsinh, **_T),
    _op("acosh", lax.acosh, 1, FLOATS, np.arccosh, **_T),
    _op("atanh", lax.atanh, 1, FLOATS, np.arctanh, **_T),
    _op("logistic", lax.logistic, 1, FLOATS, _logistic),
    _op("erf", lax.erf, 1, FLOATS, _float_elementwise(math.erf)),
    _op("erfc", lax.erfc, 1, FLOATS, _float_elementwise(math.erfc)),
    # erf_inv and digamma have no stdlib reference; special_math itself is checked below.
    _op("erf_inv", lax.erf_inv, 1, FLOATS, special_math.erf_inv),
    _op(
        "lgamma",
        lax.lgamma,
        1,
        FLOATS,
        _float_elementwise(_math_or(math.lgamma, math.inf)),
        rtol=1e-13,
        atol=1e-14,
    ),
    _op("digamma", lax.digamma, 1, FLOATS, special_math.digamma),
    _op("is_finite", lax.is_finite, 1, FLOATS, np.isfinite, bool_out=True),
    _op("eq", lax.eq, 2, ANY, np.equal, lambda a, b, dt: a == b, bool_out=True),
    _op("ne", lax.ne, 2, ANY, np.not_equal, lambda a, b, dt: a != b, bool_out=True),
    _op("lt", lax.lt, 2, ANY, np.less, lambda a, b, dt: a < b, bool_out=True),
    _op("le", lax.le, 2, ANY, np.less_equal, lambda a, b, dt: a <= b, bool_out=True),
    _op("gt", lax.gt, 2, ANY, np.greater, lambda a, b, dt: a > b, bool_out=True),
    _op("ge", lax.ge, 2, ANY, np.greater_equal, lambda a, b, dt: a >= b, bool_out=True),
    _op("and", lax.and_, 2, INT_OR_BOOL, None, lambda a, b, dt: a & b),
    _op("or", lax.or_, 2, INT_OR_BOOL, None, lambda a, b, dt: a | b),
    _op("xor", lax.xor, 2, INT_OR_BOOL, None, lambda a, b, dt: a ^ b),
    _op("not", lax.not_, 1, INT_OR_BOOL, None, _not),
    _op("shift_left", lax.shift_left, 2, INTS, None, _shl, counts=True),
    _op("shift_right_logical", lax.shift_right_logical, 2, INTS, None, _shrl, counts=True),
    _op("shift_right_arithmetic", lax.shift_right_arithmetic, 2, INTS, None, _shra, counts=True),
    _op(
        "population_count",
        lax.population_count,
        1,
        INTS,
        None,
        lambda a, dt: bin(a % (1 << _bits(dt))).count("1"),
    ),
    _op(
        "clz", lax.clz, 1, INTS, None, lambda a, dt: _bits(dt) - (a % (1 << _bits(dt))).bit_length()
    ),
]
FLOAT_OPS = [op for op in OPS if F32 in op.dtypes]

# -- operand strategies -------------------------------------------------------------------------

_FLOAT_EDGES = [0.0, -0.0, np.nan, np.inf, -np.inf, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5]


def _elements(dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return st.one_of(st.sampled_from(_FLOAT_EDGES), hnp.from_dtype(dt))
    if dt.kind == "b":
        return st.booleans()
    info = np.iinfo(dt)
    edges = sorted({0, 1, 2, info.max, info.min, int(info.min) + 1} | ({-1} if info.min else set()))
    return st.one_of(st.sampled_from(edges), st.integers(int(info.min), int(info.max)))


def _count_elements(dt):
    return st.one_of(st.integers(0, _bits(dt) + 1), _elements(dt))


@st.composite
def _operands(draw, op, dt):
    """Operands of one dtype: equal shapes, or one of them 0-d (lax's broadcasting rule)."""
    shape = draw(shapes())
    scalar_arg = draw(st.sampled_from([None] + list(range(op.nargs)))) if op.nargs > 1 else None
    args = []
    for i in range(op.nargs):
        elems = _count_elements(dt) if op.counts and i == 1 else _elements(dt)
        args.append(draw(hnp.arrays(dt, () if i == scalar_arg else shape, elements=elems)))
    return args


# -- checking -----------------------------------------------------------------------------------


def _expected(op, dt, args):
    shape = np.broadcast_shapes(*(a.shape for a in args))
    out_dt = BOOL if op.bool_out else dt
    if dt.kind == "f":
        with np.errstate(all="ignore"):
            ref = np.asarray(op.fref(*(a.astype(np.float64) for a in args)))
            return np.broadcast_to(ref, shape), out_dt
    cols = [np.broadcast_to(a, shape).ravel().tolist() for a in args]
    vals = [_wrap(op.iref(*vs, dt), out_dt) for vs in zip(*cols)]
    return np.array(vals, out_dt).reshape(shape), out_dt


def _assert_float_close(out, ref64, dt, rtol, atol):
    """``out`` (of float dtype ``dt``) matches the float64 reference rounded to ``dt`` within a
    couple of ulp (+ ``rtol``); NaNs and infinities must match. Where the true result is within
    that tolerance of the largest finite value, overflowing to inf is accepted too."""
    info = np.finfo(dt)
    rtol = 2 * float(info.eps) + rtol
    got = np.asarray(out).astype(np.float64)
    with np.errstate(all="ignore"):
        want = ref64.astype(dt).astype(np.float64)
    near_max = np.isfinite(ref64) & (np.abs(ref64) >= float(info.max) * (1 - rtol))
    got = np.where(near_max & np.isinf(got), np.sign(got) * float(info.max), got)
    want = np.where(near_max, np.clip(ref64, -float(info.max), float(info.max)), want)
    atol = atol + float(info.smallest_normal)  # subnormal results carry fewer digits
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def _check_op(op, dt, args):
    out = op.fn(*args)
    want, out_dt = _expected(op, dt, args)
    assert isinstance(out, fg.Array)
    assert out.dtype == out_dt, f"{op.id}: dtype {out.dtype} != {out_dt}"
    assert out.shape == want.shape, f"{op.id}: shape {out.shape} != {want.shape}"
    assert out.weak_type is False
    if out_dt.kind == "f":
        _assert_float_close(out, want, out_dt, op.rtol, op.atol)
    else:
        np.testing.assert_array_equal(np.asarray(out), want)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.id)
@settings(max_examples=25)
@given(data=st.data())
def test_op_matches_reference(op, data):
    dt = data.draw(st.sampled_from(op.dtypes), label="dtype")
    _check_op(op, dt, data.draw(_operands(op, dt), label="operands"))


@pytest.mark.parametrize("op", FLOAT_OPS, ids=lambda op: op.id)
@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_op_float64_matches_reference(op, data, x64):
    _check_op(op, F64, data.draw(_operands(op, F64), label="operands"))


def test_ops_keep_float64_only_under_x64(x64):
    out = lax.sin(np.ones(2, np.float64))
    assert out.dtype == F64
    fg.config.update("enable_x64", False)
    assert lax.sin(np.ones(2, np.float64)).dtype == F32  # canonicalised without x64


# -- weak types, Python scalars ----------------------------------------------------------------


def _scalar_for(dt):
    return {"f": 0.75, "i": 3, "u": 3, "b": True}[dt.kind]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.id)
def test_op_weak_type_propagation(op):
    dt = next(d for d in (F32, I32, BOOL) if d in op.dtypes)
    v = _scalar_for(dt)
    strong = np.asarray(v, dt)
    weak = fg.Array(dt.type(v), weak_type=True)
    out_dt = BOOL if op.bool_out else dt
    # Bool Python scalars are never weak; as in JAX, a comparison (or is_finite) of weak
    # operands is a weak bool (no promotion can observe it, but `.weak_type` does)
    all_weak = dt.kind != "b"
    for args, want_weak in [
        ([v] * op.nargs, all_weak),
        ([weak] * op.nargs, all_weak),
        ([strong] * op.nargs, False),
    ]:
        out = op.fn(*args)
        assert out.dtype == out_dt and out.weak_type == want_weak, (args, out.aval)
    if op.nargs == 2:  # a Python scalar takes the array operand's dtype, weakly
        for args in ([strong, v], [v, strong], [weak, strong]):
            out = op.fn(*args)
            assert out.dtype == out_dt and out.weak_type is False


def test_python_scalar_takes_array_dtype():
    # NB: jax.lax rejects lax.add(float16_array, 2); fungrad's lax lets Python scalars take the
    # array's dtype weakly, as jax.numpy does.
    x = np.array([1.0, 2.0], np.float16)
    assert_array(lax.add(x, 2), np.array([3.0, 4.0], np.float16), dtype=F16, weak_type=False)
    assert_array(lax.mul(3, np.int8(5)), np.int8(15), dtype=I8, weak_type=False)
    assert_array(lax.add(1.5, 2.0), np.float32(3.5), dtype=F32, weak_type=True)
    assert_array(lax.shift_left(np.uint32(1), 31), np.uint32(2**31), dtype=U32)


def test_zero_d_operands_broadcast():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_array(lax.sub(np.float32(10), x), 10 - x, dtype=F32)
    assert_array(lax.lt(x, np.float32(2)), x < 2, dtype=BOOL)
    assert_array(lax.add(np.zeros((0, 3), np.int32), np.int32(1)), np.zeros((0, 3)), dtype=I32)


# -- errors -------------------------------------------------------------------------------------


def _trace(fn, *args):
    return fg.make_jaxpr(fn)(*args)


def _both_paths(fn):
    """Run ``fn`` eagerly and under make_jaxpr: bad input must fail the same way in both."""
    return [lambda *args: fn(*args), lambda *args: _trace(fn, *args)]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.id)
def test_op_rejects_unaccepted_dtypes(op):
    for dt in (BOOL, I32, U32, F32, F16):
        if dt in op.dtypes:
            continue
        args = [np.zeros(3, dt)] * op.nargs
        for run in _both_paths(op.fn):
            with pytest.raises(TypeError, match=rf"{op.name}\b.*{dt.name}"):
                run(*args)


@pytest.mark.parametrize("op", [op for op in OPS if op.nargs == 2], ids=lambda op: op.id)
def test_binary_op_rejects_mismatched_dtypes_and_shapes(op):
    a, b = op.dtypes[0], op.dtypes[1]
    for run in _both_paths(op.fn):
        with pytest.raises(TypeError, match=rf"{op.name}\b.*dtype.*{a.name}.*{b.name}"):
            run(np.zeros(3, a), np.zeros(3, b))
        with pytest.raises(TypeError, match=rf"{op.name}\b.*shapes.*\(3,\).*\(4,\)"):
            run(np.zeros(3, a), np.zeros(4, a))
        with pytest.raises(TypeError, match=rf"{op.name}\b.*shapes"):
            run(np.zeros((2, 3), a), np.zeros((3,), a))


def test_non_array_arguments_are_type_errors():
    with pytest.raises(TypeError, match="sin"):
        lax.sin("x")
    with pytest.raises(TypeError, match="add"):
        lax.add([1.0], object())


def test_pow_dtype_rules():
    x = np.array([2.0, -2.0, 0.0], np.float32)
    # An integer exponent of any integer dtype; the base dtype wins.
    for ydt in (I32, I8, U32):
        out = lax.pow(x, np.array([3, 2, 1], ydt))
        assert_array(out, [8.0, 4.0, 0.0], dtype=F32)
    assert_array(lax.pow(x, np.array([-1, -3, -1], np.int32)), [0.5, -0.125, np.inf], dtype=F32)
    assert_array(lax.pow(np.float16(2), np.int32(3)), np.float16(8), dtype=F16)
    for run in _both_paths(lax.pow):
        with pytest.raises(TypeError, match=r"pow.*float32 and float16"):
            run(x, np.float16(2))
    for run in _both_paths(lax.pow):
        with pytest.raises(TypeError, match=r"pow.*int32"):
            run(np.int32(2), np.int32(2))
    for run in _both_paths(lax.pow):
        with pytest.raises(TypeError, match=r"pow.*bool"):
            run(x, np.array([True, False, True]))
    # Python scalars: an int exponent stays a weak int32 (as JAX prints it), a float one takes
    # the base's dtype, a scalar base takes a float exponent's dtype.
    assert "pow a 2:i32[]" in str(_trace(lambda a: lax.pow(a, 2), x))
    assert "pow a 2.0:f16[]" in str(_trace(lambda a: lax.pow(a, 2.0), np.float16(1)))
    assert "pow 2.0:f32[] a" in str(_trace(lambda a: lax.pow(2.0, a), np.int32(1)))
    assert_array(lax.pow(2.0, 3), np.float32(8), dtype=F32, weak_type=True)
    assert_array(lax.pow(np.float32(-8), 1 / 3), np.float32(np.nan), dtype=F32)
    # C pow semantics (JAX), not numpy's scalar-exponent sqrt shortcut:
    for base in (np.float32(-np.inf), np.array([-np.inf, -np.inf], np.float32)):
        assert_array(lax.pow(base, np.float32(0.5)), np.full(np.shape(base), np.inf))
    out = np.asarray(lax.pow(np.float32(-0.0), np.float32(0.5)))
    assert out == 0 and not np.signbit(out)


def test_integer_pow_rules():
    assert_array(lax.integer_pow(np.int32(3), 40), np.int32(689956897), dtype=I32)  # wraps
    assert_array(lax.integer_pow(np.float32(np.nan), 0), np.float32(1))
    assert_array(lax.integer_pow(np.float32(0), -1), np.float32(np.inf))
    for run in _both_paths(lambda a: lax.integer_pow(a, -1)):
        with pytest.raises(TypeError, match=r"integer_pow.*negative"):
            run(np.int32(2))
    for run in _both_paths(lambda a: lax.integer_pow(a, 2)):
        with pytest.raises(TypeError, match=r"integer_pow.*bool"):
            run(np.bool_(True))
    assert_array(lax.reciprocal(np.float32(4)), np.float32(0.25), dtype=F32)


# -- integer division and other integer edge cases ----------------------------------------------

INT_DIV_CASES = [  # (dtype, x, y, div, rem), as JAX gives them
    (I32, 7, 0, -1, 7),
    (I32, -7, 0, -1, -7),
    (I32, 0, 0, -1, 0),
    (I32, -(2**31), -1, -(2**31), 0),
    (I32, -7, 2, -3, -1),
    (I32, 7, -2, -3, 1),
    (I32, -7, -2, 3, -1),
    (I8, -128, -1, -128, 0),
    (I8, 7, 0, -1, 7),
    (I8, -7, 0, -1, -7),
    (U32, 7, 0, 2**32 - 1, 7),
    (U32, 2**32 - 1, 2, 2**31 - 1, 1),
]


@pytest.mark.parametrize("dt,x,y,q,r", INT_DIV_CASES)
def test_integer_division_edge_cases(dt, x, y, q, r):
    xs, ys = np.array([x, x], dt), np.array([y, y], dt)
    assert_array(lax.div(xs, ys), np.array([q, q], dt), dtype=dt)
    assert_array(lax.rem(xs, ys), np.array([r, r], dt), dtype=dt)
    assert_array(lax.div(dt.type(x), dt.type(y)), dt.type(q), dtype=dt)  # numpy scalars too


def test_float_division_and_remainder_specials():
    x = np.array([1.0, -1.0, 0.0, np.inf, -0.0, 5.0, -7.5], np.float32)
    y = np.array([0.0, 0.0, 0.0, 1.0, 1.0, np.inf, 2.0], np.float32)
    assert_array(lax.div(x, y), [np.inf, -np.inf, np.nan, np.inf, -0.0, 0.0, -3.75])
    r = np.asarray(lax.rem(x, y))
    np.testing.assert_array_equal(r, [np.nan, np.nan, np.nan, np.nan, -0.0, 5.0, -1.5])
    assert np.signbit(r[4])


def test_shift_counts_at_or_beyond_bit_width():
    x = np.array([1, -1, 5, -8], np.int32)
    y = np.array([32, 33, -1, 1], np.int32)
    assert_array(lax.shift_left(x, y), [0, 0, 0, -16], dtype=I32)
    assert_array(lax.shift_right_logical(x, y), [0, 0, 0, 2**31 - 4], dtype=I32)
    assert_array(lax.shift_right_arithmetic(x, y), [0, -1, 0, -4], dtype=I32)
    u = np.array([1, 2**31, 5], np.uint32)
    assert_array(lax.shift_right_arithmetic(u, np.uint32(1)), [0, 3 * 2**30, 2], dtype=U32)
    assert_array(
        lax.shift_left(np.array([1, -1, 5], np.int8), np.array([7, 8, -1], np.int8)),
        [-128, 0, 0],
        dtype=I8,
    )


def test_bit_counting():
    x = np.array([0, 1, -1, 127], np.int8)
    assert_array(lax.clz(x), [8, 7, 0, 1], dtype=I8)
    assert_array(lax.population_count(x), [0, 1, 8, 7], dtype=I8)
    assert_array(lax.clz(np.uint32(2**31)), np.uint32(0), dtype=U32)


def test_abs_and_neg_wrap_at_int_min():
    m = np.int32(-(2**31))
    assert_array(lax.abs(m), m, dtype=I32)
    assert_array(lax.neg(m), m, dtype=I32)
    assert_array(lax.neg(np.uint32(3)), np.uint32(2**32 - 3), dtype=U32)


# -- float specials: signed zeros, NaN, rounding ------------------------------------------------


def _bits_of(a):
    return np.asarray(a).view(f"u{np.asarray(a).dtype.itemsize}")


def test_sign_floor_ceil_keep_signed_zero_and_nan():
    x = np.array([-0.0, 0.0, np.nan, -np.inf, 3.0, -0.25], np.float32)
    np.testing.assert_array_equal(
        _bits_of(lax.sign(x)), _bits_of(np.array([-0.0, 0.0, np.nan, -1, 1, -1], np.float32))
    )
    np.testing.assert_array_equal(np.signbit(lax.ceil(x)), [1, 0, 0, 1, 0, 1])
    np.testing.assert_array_equal(np.signbit(lax.floor(np.float32(-0.0))), True)
    assert_array(lax.sign(np.array([-5, 0, 7], np.int8)), [-1, 0, 1], dtype=I8)
    assert_array(lax.sign(np.uint32(7)), np.uint32(1), dtype=U32)


def test_round_methods():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, -0.0, 0.49999997, -0.3], np.float32)
    away = np.asarray(lax.round(x))
    np.testing.assert_array_equal(away, [1, 2, 3, -1, -3, 0, 0, 0])
    np.testing.assert_array_equal(np.signbit(away), [0, 0, 0, 1, 1, 1, 0, 1])
    even = np.asarray(lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN))
    np.testing.assert_array_equal(even, [0, 2, 2, -0.0, -2, 0, 0, 0])
    assert_array(lax.round(x, 1), even)  # plain ints are accepted, as in JAX
    assert int(lax.RoundingMethod.AWAY_FROM_ZERO) == 0
    with pytest.raises(ValueError):
        lax.round(x, 2)


def test_max_min_propagate_nan_and_order_signed_zeros():
    x = np.array([np.nan, 1.0, 0.0, -0.0, -np.inf], np.float32)
    y = np.array([1.0, np.nan, -0.0, 0.0, 3.0], np.float32)
    mx, mn = np.asarray(lax.max(x, y)), np.asarray(lax.min(x, y))
    np.testing.assert_array_equal(mx, [np.nan, np.nan, 0.0, 0.0, 3.0])
    np.testing.assert_array_equal(np.signbit(mx[2:4]), [False, False])
    np.testing.assert_array_equal(mn, [np.nan, np.nan, -0.0, -0.0, -np.inf])
    np.testing.assert_array_equal(np.signbit(mn[2:4]), [True, True])
    assert_array(lax.max(np.array([True, False]), np.array([False, False])), [True, False])


def _ordered_key(a):
    """Integers in the order of the floats they encode (+0 and -0 both map to 0)."""
    a = np.asarray(a)
    u = _bits_of(a).astype(np.int64)
    sign = np.int64(1) << (8 * a.dtype.itemsize - 1)
    return np.where(u >= sign, -(u - sign), u)


@settings(max_examples=40)
@given(data=st.data())
def test_nextafter_steps_one_ulp(data):
    dt = data.draw(st.sampled_from(FLOATS))
    shape = data.draw(shapes(max_dims=1))
    x, y = (data.draw(hnp.arrays(dt, shape, elements=_elements(dt))) for _ in range(2))
    r = np.asarray(lax.nextafter(x, y))
    assert r.dtype == dt and r.shape == shape
    nan = np.isnan(x) | np.isnan(y)
    np.testing.assert_array_equal(np.isnan(r), nan)
    same = ~nan & (x == y)
    np.testing.assert_array_equal(_bits_of(r)[same], _bits_of(y)[same])  # x == y gives y
    move = ~nan & (x != y)
    step = _ordered_key(r)[move] - _ordered_key(x)[move]
    np.testing.assert_array_equal(step, np.where(y[move] > x[move], 1, -1))


def test_nextafter_denormals():
    assert_array(lax.nextafter(np.float32(0), np.float32(1)), np.float32(1.4e-45), rtol=0.01)
    assert float(lax.nextafter(np.float16(0), np.float16(-1))) == -(2.0**-24)


def test_transcendental_special_values():
    nan, inf = np.nan, np.inf
    f = lambda *v: np.array(v, np.float32)  # noqa: E731
    assert_array(lax.logistic(f(-800, 0, 800, nan, inf, -inf)), f(0, 0.5, 1, nan, 1, 0))
    assert_array(lax.rsqrt(f(4, 0, -0.0, inf, -1, nan)), f(0.5, inf, -inf, 0, nan, nan))
    assert_array(lax.cbrt(f(-8, -0.0, inf, -inf)), f(-2, -0.0, inf, -inf))
    assert_array(lax.atan2(f(0, -0.0, 0, -0.0), f(-0.0, -0.0, 0, 0)), f(np.pi, -np.pi, 0, -0.0))
    assert_array(lax.exp2(f(3, -1, inf, -inf)), f(8, 0.5, inf, 0))
    assert_array(lax.acosh(f(0.5, 1, inf)), f(nan, 0, inf))
    assert_array(lax.erf(f(0, -0.0, inf, -inf, nan)), f(0, -0.0, 1, -1, nan))
    assert_array(lax.erfc(f(0, inf, -inf, nan, 10, 30)), f(1, 0, 2, nan, 0, 0), atol=1e-30)
    assert_array(
        lax.erf_inv(f(-1, 1, 0, 1.5, nan, 0.5)), f(-inf, inf, 0, nan, nan, 0.4769362762044699)
    )
    # JAX: lgamma is +inf at the poles and at -inf; digamma is NaN at the poles and at -inf.
    x = f(0, -0.0, -1, -2.5, inf, -inf, nan, 1, 2, 0.5)
    assert_array(
        lax.lgamma(x),
        f(inf, inf, inf, -0.05624371649767405, inf, inf, nan, 0, 0, 0.5723649429247001),
    )
    assert_array(
        lax.digamma(x),
        f(
            nan,
            nan,
            nan,
            1.1031566406452431,
            inf,
            nan,
            nan,
            -0.5772156649015329,
            0.42278433509846713,
            -1.9635100260214235,
        ),
    )
    assert_array(lax.is_finite(f(1, inf, -inf, nan)), [True, False, False, False], dtype=BOOL)


# -- select_n, clamp ----------------------------------------------------------------------------


def test_select_n():
    c = [np.full(4, i, np.float32) for i in range(3)]
    assert_array(lax.select_n(np.array([0, 1, 2, 1], np.int32), *c), [0, 1, 2, 1], dtype=F32)
    # Out-of-range indices pick the nearest case (JAX: unspecified; its select tree does this).
    assert_array(lax.select_n(np.array([-3, 5, 0, 2], np.int32), *c), [0, 2, 0, 2])
    assert_array(lax.select_n(np.array([True, False, True, False]), c[0], c[1]), [1, 0, 1, 0])
    assert_array(lax.select_n(np.True_, c[0], c[1]), c[1])
    assert_array(lax.select_n(np.array([0, 1, 0, 1], np.uint32), c[0], c[1]), [0, 1, 0, 1])
    assert_array(lax.select_n(np.array([0, 1], np.int8), np.zeros(2, np.int32)), [0, 0])
    assert_array(
        lax.select_n(np.zeros((0, 2), bool), np.zeros((0, 2)), np.ones((0, 2))), np.zeros((0, 2))
    )
    assert_array(
        lax.select(
            np.array([True, False]),
            np.float32(1) + np.zeros(2, np.float32),
            np.zeros(2, np.float32),
        ),
        [1, 0],
    )
    out = lax.select_n(True, 1.0, 2.0)
    assert out.weak_type and float(out) == 2.0
    assert not lax.select_n(True, 1.0, np.float32(2.0)).weak_type


def test_select_n_errors():
    c2 = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match="select_n"):
        lax.select_n(np.array([True, False]))
    bad = [
        ((np.array([True, False]), c2, c2, c2), r"select_n.*boolean.*3"),
        ((np.array([1.0, 0.0], np.float32), c2, c2), r"select_n.*`which`.*float32"),
        ((np.array([True, False]), c2, np.zeros(2, np.int32)), r"select_n.*same dtypes"),
        ((np.array([True, False]), np.float32(0), c2), r"select_n.*same shapes"),
        ((np.array([True, False, True]), c2, c2), r"select_n.*`which`.*\(3,\)"),
    ]
    for args, msg in bad:
        for run in _both_paths(lax.select_n):
            with pytest.raises(TypeError, match=msg):
                run(*args)


def test_clamp():
    x = np.array([-1.0, 0.5, 2.0, np.nan], np.float32)
    assert_array(lax.clamp(np.float32(0), x, np.float32(1)), [0, 0.5, 1, np.nan], dtype=F32)
    assert_array(lax.clamp(np.zeros(4, np.float32), x, 1.0), [0, 0.5, 1, np.nan])
    assert_array(lax.clamp(np.float32(np.nan), x, np.float32(1)), [np.nan] * 4)
    assert_array(lax.clamp(np.float32(2), x[:3], np.float32(1)), [1, 1, 1])  # min > max: max
    assert_array(
        lax.clamp(np.int8(-3), np.array([-100, 5, 100], np.int8), np.int8(7)), [-3, 5, 7], dtype=I8
    )
    assert_array(lax.clamp(False, np.array([True, False]), True), [True, False], dtype=BOOL)
    assert lax.clamp(0.0, 1.0, 2.0).weak_type
    assert not lax.clamp(0.0, np.float32(1.0), 2.0).weak_type
    for run in _both_paths(lax.clamp):
        with pytest.raises(TypeError, match=r"clamp.*min.shape"):
            run(np.zeros(4, np.float32), np.float32(1), np.float32(2))
    for run in _both_paths(lax.clamp):
        with pytest.raises(TypeError, match=r"clamp.*max.shape"):
            run(np.float32(0), np.zeros(4, np.float32), np.zeros(3, np.float32))
    for run in _both_paths(lax.clamp):
        with pytest.raises(TypeError, match=r"clamp.*same dtypes"):
            run(np.float32(0), np.zeros(4, np.float16), np.float32(1))


# -- conversions --------------------------------------------------------------------------------


def _saturate(v, dt):
    info = np.iinfo(dt)
    if math.isnan(v):
        return 0
    if v >= info.max + 1:
        return info.max
    if v < info.min:
        return info.min
    return int(v)  # truncates toward zero, exactly


@settings(max_examples=60)
@given(data=st.data())
def test_convert_float_to_int_saturates(data):
    src = data.draw(st.sampled_from(FLOATS))
    dst = data.draw(st.sampled_from(INTS))
    big = 3e9 if src == F32 else 6e4
    x = data.draw(
        hnp.arrays(
            src,
            shapes(max_dims=2),
            elements=st.one_of(_elements(src), st.floats(-big, big, width=8 * src.itemsize)),
        )
    )
    out = lax.convert_element_type(x, dst)
    want = np.array([_saturate(v, dst) for v in x.ravel().tolist()], dst).reshape(x.shape)
    assert_array(out, want, dtype=dst, weak_type=False)


@settings(max_examples=40)
@given(data=st.data())
def test_convert_between_other_dtypes(data):
    src, dst = data.draw(st.sampled_from(TESTED)), data.draw(st.sampled_from(TESTED))
    x = data.draw(hnp.arrays(src, shapes(max_dims=2), elements=_elements(src)))
    out = lax.convert_element_type(x, dst)
    if src.kind == "f" and dst.kind in "iu":
        return  # saturating conversions: tested above
    vals = x.ravel().tolist()
    if dst.kind == "b":
        want = [v != 0 for v in vals]  # NaN is nonzero
    elif dst.kind in "iu":
        want = [_wrap(int(v), dst) for v in vals]
    else:
        with np.errstate(over="ignore"):
            want = np.array(vals, np.float64).astype(dst)
    assert_array(out, np.array(want, dst).reshape(x.shape), dtype=dst, rtol=0, atol=0)


def test_convert_element_type_known_values():
    # JAX on CPU
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, -1.7, 2.7, 255.5, -0.5])
    assert_array(
        lax.convert_element_type(x.astype(np.float32), np.int32),
        [0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), -1, 2, 255, 0],
        dtype=I32,
    )
    assert_array(
        lax.convert_element_type(x.astype(np.float32), np.uint8),
        [0, 255, 0, 255, 0, 0, 2, 255, 0],
        dtype=np.uint8,
    )
    f = np.array([2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0], np.float32)
    assert_array(lax.convert_element_type(f, np.int32), [2147483520, 2**31 - 1, -(2**31), -(2**31)])
    assert_array(
        lax.convert_element_type(np.array([300, -129, 128], np.int32), np.int8),
        [44, 127, -128],
        dtype=I8,
    )
    assert_array(lax.convert_element_type(np.float32(1e5), np.float16), np.float16(np.inf))
    w = lax.convert_element_type(np.float32(2.5), np.int32, weak_type=True)
    assert w.weak_type and int(w) == 2
    assert not lax.convert_element_type(2.5, np.int32).weak_type


def test_convert_float_to_int64_saturates(x64):
    x = np.array([9.3e18, -9.3e18, 2.0**63, -(2.0**63), np.nan, 1e300])
    assert_array(
        lax.convert_element_type(x, np.int64),
        np.array([2**63 - 1, -(2**63), 2**63 - 1, -(2**63), 0, 2**63 - 1], np.int64),
        dtype=np.int64,
    )
    assert_array(
        lax.convert_element_type(x, np.uint64),
        np.array([9300000000000000000, 0, 2**63, 0, 0, 2**64 - 1], np.uint64),
    )


@settings(max_examples=40)
@given(data=st.data())
def test_bitcast_convert_type_reinterprets_bytes(data):
    src = data.draw(st.sampled_from(NUMERIC))
    x = data.draw(hnp.arrays(src, shapes(max_dims=2), elements=_elements(src)))
    same = {1: I8, 2: np.dtype(np.uint16), 4: F32}[src.itemsize]
    out = lax.bitcast_convert_type(x, same)
    assert out.shape == x.shape and out.dtype == same
    assert np.asarray(out).tobytes() == x.tobytes()
    if src.itemsize > 1:  # narrower: a trailing dimension of the element's bytes
        b = lax.bitcast_convert_type(x, np.uint8)
        assert b.shape == x.shape + (src.itemsize,)
        assert np.asarray(b).tobytes() == x.tobytes()
        back = lax.bitcast_convert_type(b, src)
        assert back.shape == x.shape and np.asarray(back).tobytes() == x.tobytes()


def test_bitcast_convert_type_rules():
    assert_array(
        lax.bitcast_convert_type(np.array([1.0, 2.0], np.float32), np.int8),
        [[0, 0, -128, 63], [0, 0, 0, 64]],
        dtype=I8,
    )
    out = lax.bitcast_convert_type(1.0, np.int32)
    assert int(out) == 1065353216 and not out.weak_type
    assert lax.bitcast_convert_type(np.zeros((2, 2), np.float16), np.float32).shape == (2,)
    assert lax.bitcast_convert_type(np.zeros((0,), np.float32), np.int8).shape == (0, 4)
    for run in _both_paths(lambda a: lax.bitcast_convert_type(a, np.float32)):
        with pytest.raises(ValueError, match=r"bitcast_convert_type.*size 4"):
            run(np.zeros((2, 3), np.int8))
    for run in _both_paths(lambda a: lax.bitcast_convert_type(a, np.float32)):
        with pytest.raises(ValueError, match="bitcast_convert_type"):
            run(np.int8(1))
    for run in _both_paths(lambda a: lax.bitcast_convert_type(a, np.int8)):
        with pytest.raises(TypeError, match=r"bitcast_convert_type.*bool"):
            run(np.array([True]))


def test_stop_gradient_is_identity_on_pytrees():
    tree = {"a": np.arange(3, dtype=np.int32), "b": (2.0, np.float32(1.5))}
    out = lax.stop_gradient(tree)
    assert_array(out["a"], np.arange(3), dtype=I32)
    assert_array(out["b"][0], np.float32(2.0), dtype=F32, weak_type=True)
    assert_array(out["b"][1], np.float32(1.5), dtype=F32, weak_type=False)
    assert "stop_gradient a" in str(_trace(lax.stop_gradient, np.float32(1)))


# -- jaxprs and the registry --------------------------------------------------------------------


def test_jaxpr_printing_and_evaluation():
    def f(x, n):
        y = lax.integer_pow(x, 3)
        z = lax.round(y, lax.RoundingMethod.TO_NEAREST_EVEN)
        i = lax.convert_element_type(z, np.int32)
        s = lax.shift_left(i, 2)
        b = lax.bitcast_convert_type(x, np.int32)
        m = lax.and_(s, b)
        c = lax.clamp(0.0, lax.erf(x), 0.5)
        sel = lax.select_n(lax.gt(x, 0.0), lax.neg(x), c)
        out = lax.add(lax.convert_element_type(m, np.float32), lax.stop_gradient(sel))
        return out, lax.rem(n, 3)

    x = np.array([0.3, -1.7, 2.2], np.float32)
    n = np.array([7, -7, 0], np.int32)
    jaxpr = fg.make_jaxpr(f)(x, n)
    text = str(jaxpr)
    for piece in [
        "integer_pow[y=3] a",
        "round[rounding_method=1]",
        "convert_element_type[new_dtype=int32 weak_type=False]",
        "shift_left",
        "2:i32[]",
        "bitcast_convert_type[new_dtype=int32] a",
        " and ",
        "clamp 0.0:f32[]",
        "erf a",
        "gt a 0.0:f32[]",
        "select_n",
        "stop_gradient",
        "rem b 3:i32[]",
    ]:
        assert piece in text, (piece, text)
    got = jaxpr(x, n)
    want = f(x, n)
    assert len(got) == 2
    for g, w in zip(got, want):
        assert_array(g, np.asarray(w), dtype=w.dtype, rtol=0, atol=0)


EXPECTED_PRIMITIVES = sorted(
    {op.name for op in OPS}
    | {
        "select_n",
        "clamp",
        "convert_element_type",
        "bitcast_convert_type",
        "stop_gradient",
        "nextafter",
    }
)


def test_every_elementwise_primitive_is_registered():
    defined = {
        getattr(elementwise, n).name: getattr(elementwise, n)
        for n in elementwise.__all__
        if n.endswith("_p")
    }
    assert sorted(defined) == EXPECTED_PRIMITIVES
    for name, prim in defined.items():
        assert core.primitives[name] is prim
        assert callable(prim.impl) and callable(prim.abstract_eval), name
    for n in elementwise.__all__:
        assert getattr(lax, n) is getattr(elementwise, n), n
    for op in OPS:
        assert op.name in defined


# -- special_math (float64 references) ----------------------------------------------------------

_SPECIAL_POINTS = np.concatenate(
    [
        np.linspace(-7, 7, 1401),
        np.logspace(-300, 2.5, 300),
        -np.logspace(-300, 2.5, 300),
        [0.0, -0.0, 0.46875, -0.46875, 4.0, -4.0, 26.5, 27.5, 1e300],
    ]
)


def _rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.maximum(np.abs(want), np.finfo(np.float64).tiny)
    return np.where(got == want, 0.0, np.abs(got - want) / scale)


def test_special_math_erf_erfc_match_math():
    x = _SPECIAL_POINTS
    assert np.max(_rel_err(special_math.erf(x), [math.erf(v) for v in x])) < 1e-14
    assert np.max(_rel_err(special_math.erfc(x), [math.erfc(v) for v in x])) < 1e-13


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_special_math_erf_erfc_match_math_hypothesis(v):
    assert _rel_err(special_math.erf(v), math.erf(v)) < 1e-14
    assert _rel_err(special_math.erfc(v), math.erfc(v)) < 1e-13


def test_special_math_erf_inv_inverts_erf():
    p = np.concatenate(
        [
            np.linspace(-0.999, 0.999, 2001),
            np.logspace(-300, -1, 100),
            1 - np.logspace(-16, -1, 200),
            -1 + np.logspace(-16, -1, 200),
            [np.nextafter(1.0, 0), np.nextafter(-1.0, 0)],
        ]
    )
    y = special_math.erf_inv(p)
    central = np.abs(p) <= 0.5
    assert np.max(_rel_err([math.erf(v) for v in y[central]], p[central])) < 1e-15
    tail = ~central  # in the tails, 1 - |p| is what carries the information
    q = 1 - np.abs(p[tail])
    assert np.max(_rel_err([math.erfc(v) for v in np.abs(y[tail])], q)) < 1e-13
    assert abs(special_math.erf_inv(0.5) - 0.4769362762044699) < 1e-16
    np.testing.assert_array_equal(
        special_math.erf_inv(np.array([1.0, -1.0, 1.5, -2.0, np.nan])),
        [np.inf, -np.inf, np.nan, np.nan, np.nan],
    )
    assert np.signbit(special_math.erf_inv(-0.0))


def test_special_math_lgamma_matches_math():
    x = np.concatenate([_SPECIAL_POINTS, np.logspace(2.5, 305, 200), [-2.5, -0.5, 5e-324]])
    x = x[~((x <= 0) & (x == np.floor(x)))]
    want = np.array([math.lgamma(v) for v in x])
    got = special_math.lgamma(x)
    # Relative accuracy, except next to the zeros at 1 and 2 where it is absolute.
    err = np.abs(got - want) / np.maximum(np.abs(want), 1.0)
    assert np.max(err) < 1e-13
    np.testing.assert_array_equal(
        special_math.lgamma(np.array([0.0, -0.0, -3.0, np.inf, -np.inf, np.nan])),
        [np.inf, np.inf, np.inf, np.inf, np.inf, np.nan],
    )


EULER = 0.57721566490153286061


def test_special_math_digamma_known_values():
    cases = {
        1.0: -EULER,
        0.5: -EULER - 2 * math.log(2),
        0.25: -EULER - math.pi / 2 - 3 * math.log(2),
        1 / 3: -EULER - math.pi / (2 * math.sqrt(3)) - 1.5 * math.log(3),
        -0.5: -EULER - 2 * math.log(2) + 2,
        10.0: -EULER + sum(1 / k for k in range(1, 10)),
        100.0: -EULER + sum(1 / k for k in range(1, 100)),
    }
    x = np.array(list(cases))
    assert np.max(_rel_err(special_math.digamma(x), list(cases.values()))) < 1e-14
    np.testing.assert_array_equal(
        special_math.digamma(np.array([0.0, -0.0, -2.0, -np.inf, np.inf, np.nan])),
        [np.nan, np.nan, np.nan, np.nan, np.inf, np.nan],
    )


def test_special_math_digamma_is_the_derivative_of_lgamma():
    x = np.concatenate([np.linspace(-6.7, 9.3, 321), np.linspace(0.05, 40, 100)])
    x = x[np.abs(x - np.round(x)) > 0.05]
    h = 1e-3
    lg = special_math.lgamma
    # Five-point central difference (error ~h^4 f^(5) / 30) of lgamma, with math.lgamma as the
    # independent values.
    ml = np.vectorize(math.lgamma)
    fd = (ml(x - 2 * h) - 8 * ml(x - h) + 8 * ml(x + h) - ml(x + 2 * h)) / (12 * h)
    scale = np.maximum(np.abs(fd), 1.0)
    assert np.max(np.abs(special_math.digamma(x) - fd) / scale) < 5e-8
    assert np.max(np.abs(lg(x) - ml(x)) / np.maximum(np.abs(ml(x)), 1.0)) < 1e-13


@given(st.floats(-1e6, 1e6, allow_nan=False).filter(lambda v: abs(v - round(v)) > 1e-6))
def test_special_math_digamma_recurrence_and_reflection(v):
    d = special_math.digamma
    # psi(x + 1) = psi(x) + 1/x;  psi(1 - x) - psi(x) = pi cot(pi x)
    tol = 1e-12 * (1 + abs(d(v)) + abs(1 / v))
    assert abs(d(v + 1) - d(v) - 1 / v) < tol
    cot = math.pi / math.tan(math.pi * (v - round(v)))
    assert abs(d(1 - v) - d(v) - cot) < 1e-12 * (1 + abs(d(1 - v)) + abs(cot))
