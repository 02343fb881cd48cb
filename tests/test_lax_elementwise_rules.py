"""jvp, transpose and batching rules of the elementwise primitives (fungrad/lax/elementwise.py).

Oracles: analytic derivatives computed with numpy in float64 (independent of the rules),
``check_grads`` (finite differences, the dot-product identity between jvp and vjp, and
second derivatives in both modes, in float64), and for vmap a Python loop of eager calls
over the examples. Derivatives at kinks and ties follow JAX 0.10; the constants in those tests
were checked by hand with jax on CPU.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, lax
from fungrad.lax import elementwise as ew
from fungrad.lax import special_math
from fungrad.testing import check_grads
from fungrad.testing.gradcheck import assert_transforms_commute
from fungrad.transforms.jvp import jvp_rules, no_jvp
from fungrad.transforms.transpose import UndefPrimal, transpose_rules
from fungrad.transforms.vmap import batch_rules
from tests.helpers import assert_array

LINEAR = {
    ew.add_p,
    ew.sub_p,
    ew.neg_p,
    ew.mul_p,
    ew.div_p,
    ew.select_n_p,
    ew.convert_element_type_p,
}

few = settings(max_examples=15)


# -- registry ------------------------------------------------------------------------------------


def test_registry_every_primitive_has_its_rules():
    prims = [v for v in vars(ew).values() if isinstance(v, core.Primitive)]
    assert {p.name for p in prims} == {getattr(ew, n).name for n in ew.__all__ if n.endswith("_p")}
    for p in prims:
        assert p in jvp_rules or p in no_jvp, f"{p} has no jvp rule"
        assert p in batch_rules, f"{p} has no batch rule"
        assert (p in transpose_rules) == (p in LINEAR), f"{p}: transpose rule mismatch"
    assert set(no_jvp) & set(prims) == {ew.nextafter_p}


def _polygamma_reference(m: int, x, terms: int = 100_000):
    """psi^(m)(x) in float64 from its series ``(-1)^(m+1) m! sum_k (x + k)^-(m+1)`` (valid
    for every non-pole x), the tail past ``terms`` by Euler-Maclaurin."""
    x = np.asarray(x, np.float64)[..., None]
    a = x[..., 0] + terms
    head = np.sum((x + np.arange(terms)) ** -(m + 1.0), axis=-1)
    tail = a**-m / m + a ** -(m + 1.0) / 2 + (m + 1) / 12 * a ** -(m + 2.0)
    return (-1) ** (m + 1) * math.factorial(m) * (head + tail)


def test_digamma_derivative_is_trigamma():
    # JAX: d/dx digamma = polygamma(1, x), so lgamma is twice differentiable (issue 15)
    x = np.array([0.3, 1.0, 2.5, 7.25, -0.5, -2.7], np.float32)
    want = _polygamma_reference(1, x.astype(np.float64))
    assert_array(fg.vmap(fg.grad(lax.digamma))(x), want, dtype=np.float32, rtol=2e-6)
    assert_array(fg.vmap(fg.grad(fg.grad(lax.lgamma)))(x), want, dtype=np.float32, rtol=2e-6)
    assert_array(fg.jit(fg.vmap(fg.grad(lax.digamma)))(x), want, dtype=np.float32, rtol=2e-6)


# -- unary primitives: analytic derivatives and check_grads ----------------------------------------


def _uniform(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _away_from_zero(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def _lgamma_domain(rng, shape):
    # positive values and negative ones at least 0.2 away from the poles
    return np.where(
        rng.random(shape) < 0.5,
        rng.uniform(0.3, 4.0, shape),
        -rng.integers(0, 3, shape) - rng.uniform(0.2, 0.8, shape),
    )


_SQPI = math.sqrt(math.pi)

# name -> (function, sampler, derivative as a float64 numpy function, check_grads order)
UNARY = {
    "exp": (lax.exp, _uniform(-2, 2), np.exp, 2),
    "exp2": (lax.exp2, _uniform(-2, 2), lambda x: np.log(2) * np.exp2(x), 2),
    "log": (lax.log, _uniform(0.2, 3), lambda x: 1 / x, 2),
    "log1p": (lax.log1p, _uniform(-0.7, 3), lambda x: 1 / (1 + x), 2),
    "expm1": (lax.expm1, _uniform(-2, 2), np.exp, 2),
    "sqrt": (lax.sqrt, _uniform(0.2, 3), lambda x: 0.5 / np.sqrt(x), 2),
    "rsqrt": (lax.rsqrt, _uniform(0.2, 3), lambda x: -0.5 * x**-1.5, 2),
    "cbrt": (lax.cbrt, _away_from_zero(0.2, 3), lambda x: np.cbrt(x) ** -2 / 3, 2),
    "sin": (lax.sin, _uniform(-3, 3), np.cos, 2),
    "cos": (lax.cos, _uniform(-3, 3), lambda x: -np.sin(x), 2),
    "tan": (lax.tan, _uniform(-1.2, 1.2), lambda x: 1 / np.cos(x) ** 2, 2),
    "asin": (lax.asin, _uniform(-0.9, 0.9), lambda x: 1 / np.sqrt(1 - x * x), 2),
    "acos": (lax.acos, _uniform(-0.9, 0.9), lambda x: -1 / np.sqrt(1 - x * x), 2),
    "atan": (lax.atan, _uniform(-3, 3), lambda x: 1 / (1 + x * x), 2),
    "sinh": (lax.sinh, _uniform(-2, 2), np.cosh, 2),
    "cosh": (lax.cosh, _uniform(-2, 2), np.sinh, 2),
    "tanh": (lax.tanh, _uniform(-2, 2), lambda x: 1 / np.cosh(x) ** 2, 2),
    "asinh": (lax.asinh, _uniform(-3, 3), lambda x: 1 / np.sqrt(x * x + 1), 2),
    "acosh": (lax.acosh, _uniform(1.2, 3), lambda x: 1 / np.sqrt(x * x - 1), 2),
    "atanh": (lax.atanh, _uniform(-0.9, 0.9), lambda x: 1 / (1 - x * x), 2),
    "logistic": (lax.logistic, _uniform(-3, 3), lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2, 2),
    "erf": (lax.erf, _uniform(-2, 2), lambda x: 2 / _SQPI * np.exp(-x * x), 2),
    "erfc": (lax.erfc, _uniform(-2, 2), lambda x: -2 / _SQPI * np.exp(-x * x), 2),
    "erf_inv": (
        lax.erf_inv,
        _uniform(-0.9, 0.9),
        lambda x: _SQPI / 2 * np.exp(special_math.erf_inv(x) ** 2),
        2,
    ),
    "lgamma": (lax.lgamma, _lgamma_domain, special_math.digamma, 2),
    "digamma": (lax.digamma, _lgamma_domain, lambda x: _polygamma_reference(1, x), 1),
    "square": (lax.square, _uniform(-2, 2), lambda x: 2 * x, 2),
    "neg": (lax.neg, _uniform(-2, 2), lambda x: -np.ones_like(x), 2),
    "abs": (lax.abs, _away_from_zero(0.2, 2), np.sign, 2),
    "reciprocal": (lax.reciprocal, _away_from_zero(0.3, 3), lambda x: -1 / (x * x), 2),
    "integer_pow0": (lambda x: lax.integer_pow(x, 0), _uniform(-2, 2), np.zeros_like, 2),
    "integer_pow1": (lambda x: lax.integer_pow(x, 1), _uniform(-2, 2), np.ones_like, 2),
    "integer_pow3": (lambda x: lax.integer_pow(x, 3), _uniform(-2, 2), lambda x: 3 * x * x, 2),
    "integer_pow-2": (
        lambda x: lax.integer_pow(x, -2),
        _away_from_zero(0.3, 2),
        lambda x: -2 * x**-3.0,
        2,
    ),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_check_grads(name, x64):
    fn, sample, _, order = UNARY[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    check_grads(fn, (sample(rng, (3,)),), order=order, modes=("fwd", "rev"))
    check_grads(fn, (sample(rng, ()),), order=1, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_unary_jvp_matches_analytic_derivative(name, dtype):
    fn, sample, deriv, _ = UNARY[name]
    rng = np.random.default_rng(7)
    x = sample(rng, (2, 3)).astype(dtype)
    t = rng.standard_normal((2, 3)).astype(dtype)
    out, tangent = fg.jvp(fn, (x,), (t,))
    expected = deriv(x.astype(np.float64)) * t.astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    assert_array(tangent, expected, dtype=dtype, rtol=tol, atol=tol)
    assert_array(
        fg.grad(lambda x: fnp.sum(fn(x)))(x),
        deriv(x.astype(np.float64)),
        dtype=dtype,
        rtol=tol,
        atol=tol,
    )


# -- binary primitives ---------------------------------------------------------------------------


def _pair(rng, xs, ys, sx, sy):
    return xs(rng, sx), ys(rng, sy)


def _sign(rng, shape):
    return rng.choice([-1.0, 1.0], shape)


def _rem_args(rng, sx, sy):
    # |x / y| stays 0.2 away from integers, where rem jumps; the 0-d operand is drawn first.
    def quotient(shape):
        return (rng.integers(0, 3, shape) + rng.uniform(0.2, 0.8, shape)) * _sign(rng, shape)

    if sx or not sy:
        y = rng.uniform(1, 2, sy) * _sign(rng, sy)
        return y * quotient(sx), y
    x = rng.uniform(1, 3, sx) * _sign(rng, sx)
    return x, x / quotient(sy)


def _distinct_args(rng, sx, sy):
    # max/min: operands at least 0.2 apart (ties are tested separately)
    if sx or not sy:
        y = rng.uniform(-2, 2, sy)
        return y + rng.uniform(0.2, 1, sx) * _sign(rng, sx), y
    x = rng.uniform(-2, 2, sx)
    return x, x + rng.uniform(0.2, 1, sy) * _sign(rng, sy)


BINARY = {
    "add": (lax.add, lambda r, a, b: _pair(r, _uniform(-2, 2), _uniform(-2, 2), a, b)),
    "sub": (lax.sub, lambda r, a, b: _pair(r, _uniform(-2, 2), _uniform(-2, 2), a, b)),
    "mul": (lax.mul, lambda r, a, b: _pair(r, _uniform(-2, 2), _uniform(-2, 2), a, b)),
    "div": (lax.div, lambda r, a, b: _pair(r, _uniform(-2, 2), _away_from_zero(0.5, 2), a, b)),
    "rem": (lax.rem, _rem_args),
    "pow": (lax.pow, lambda r, a, b: _pair(r, _uniform(0.3, 2), _uniform(-2, 2), a, b)),
    "max": (lax.max, _distinct_args),
    "min": (lax.min, _distinct_args),
    "atan2": (
        lax.atan2,
        lambda r, a, b: _pair(r, _away_from_zero(0.3, 2), _away_from_zero(0.3, 2), a, b),
    ),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), ()), ((), (3,)), ((), ())])
def test_binary_check_grads(name, shapes, x64):
    # A 0-d operand is broadcast inside the primitive: its cotangent is the sum over all axes.
    fn, args = BINARY[name]
    rng = np.random.default_rng(len(name) * 10 + len(shapes[0]))
    x, y = args(rng, *shapes)
    check_grads(fn, (np.asarray(x), np.asarray(y)), order=2, modes=("fwd", "rev"))


def test_binary_derivatives_match_analytic(x64):
    rng = np.random.default_rng(3)
    x, y = rng.uniform(0.5, 2, 4), rng.uniform(-2, 2, 4)
    expected = {
        lax.add: (np.ones(4), np.ones(4)),
        lax.sub: (np.ones(4), -np.ones(4)),
        lax.mul: (y, x),
        lax.div: (1 / y, -x / y**2),
        lax.pow: (y * x ** (y - 1), np.log(x) * x**y),
        lax.atan2: (y / (x * x + y * y), -x / (x * x + y * y)),
        lax.rem: (np.ones(4), -np.trunc(x / y)),
    }
    for fn, (dx, dy) in expected.items():
        gx, gy = fg.grad(lambda a, b, fn=fn: fnp.sum(fn(a, b)), argnums=(0, 1))(x, y)
        assert_array(gx, dx, dtype=np.float64, rtol=1e-12, atol=1e-12)
        assert_array(gy, dy, dtype=np.float64, rtol=1e-12, atol=1e-12)


def test_pow_with_integer_exponent(x64):
    rng = np.random.default_rng(4)
    x = rng.uniform(0.3, 2, (2, 3))
    n = np.array([[0, 1, 2], [3, -1, -2]], np.int32)
    check_grads(lambda x: lax.pow(x, n), (x,), order=2)
    check_grads(lambda x: lax.pow(x, 3), (x,), order=2)
    assert_array(
        fg.grad(lambda x: fnp.sum(lax.pow(x, n)))(x),
        np.where(n == 0, 0.0, n * x ** (n - 1.0)),
        dtype=np.float64,
        rtol=1e-12,
    )


def test_kinks_and_ties_follow_jax(x64):
    def g2(f, x, y):
        return [float(v) for v in fg.grad(f, argnums=(0, 1))(x, y)]

    # abs: select(x >= 0, t, -t), so the derivative at +-0 is 1 (JAX; older JAX used sign)
    assert [float(fg.grad(lax.abs)(v)) for v in (0.0, -0.0, -2.0)] == [1.0, 1.0, -1.0]
    # max/min: ties split the tangent 50/50; a NaN result has zero derivatives
    assert g2(lax.max, 1.0, 1.0) == [0.5, 0.5]
    assert g2(lax.min, -0.0, 0.0) == [0.5, 0.5]
    assert g2(lax.max, np.nan, 1.0) == [0.0, 0.0]
    assert g2(lax.max, 3.0, 1.0) == [1.0, 0.0]
    # pow at x = 0: an integer exponent 0 gives exactly 0; d/dy at x = 0 is 0
    assert [float(fg.grad(lambda x, k=k: lax.pow(x, np.int32(k)))(0.0)) for k in (0, 1, 2, -1)] == [
        0.0,
        1.0,
        0.0,
        -np.inf,
    ]
    assert g2(lax.pow, 0.0, 2.0) == [0.0, 0.0]
    assert g2(lax.pow, 0.0, 1.0) == [1.0, 0.0]
    assert np.isnan(g2(lax.pow, 0.0, 0.0)[0])
    ks = (0, 1, 2, 3, -1)
    assert [float(fg.grad(lambda x, k=k: lax.integer_pow(x, k))(0.0)) for k in ks] == [
        0.0,
        1.0,
        0.0,
        0.0,
        -np.inf,
    ]
    # rem: d/dx = 1, d/dy = -trunc(x / y)
    assert g2(lax.rem, 7.0, 2.0) == [1.0, -3.0]
    assert g2(lax.rem, -7.0, 2.0) == [1.0, 3.0]
    assert float(fg.grad(lax.sqrt)(0.0)) == np.inf


def test_clamp_derivatives_follow_jax(x64):
    # Strict inequalities, as JAX: x on a bound gets no derivative, nor does the bound.
    cases = {
        (0.0, 0.0, 1.0): (0, 0, 0),
        (0.0, 1.0, 1.0): (0, 0, 0),
        (0.0, 0.5, 1.0): (0, 1, 0),
        (1.0, 0.5, 0.0): (0, 0, 1),
        (0.0, 2.0, 1.0): (0, 0, 1),
        (0.0, -1.0, 1.0): (1, 0, 0),
    }
    for args, expected in cases.items():
        got = fg.grad(lax.clamp, argnums=(0, 1, 2))(*args)
        assert [float(g) for g in got] == list(expected), args


@pytest.mark.parametrize("bounds", ["scalar", "full", "mixed"])
def test_clamp_check_grads(bounds, x64):
    x = np.array([-2.0, -0.3, 0.4, 1.7, 3.0])
    lo, hi = (
        (-1.0, 1.0)
        if bounds == "scalar"
        else (np.full(5, -1.0) + 0.1 * np.arange(5), np.full(5, 1.0) - 0.1 * np.arange(5))
    )
    if bounds == "mixed":
        lo = np.float64(-1.0)
    check_grads(lax.clamp, (np.asarray(lo), x, np.asarray(hi)), order=2)
    g_lo, g_x, g_hi = fg.grad(lambda a, b, c: fnp.sum(lax.clamp(a, b, c)), argnums=(0, 1, 2))(
        np.asarray(lo), x, np.asarray(hi)
    )
    assert_array(g_x, (x > lo) & (x < hi), dtype=np.float64)
    assert_array(g_lo, np.sum(x < lo) if np.ndim(lo) == 0 else x < lo, dtype=np.float64)
    assert_array(g_hi, np.sum(x > hi) if np.ndim(hi) == 0 else x > hi, dtype=np.float64)


def test_select_n_derivatives(x64):
    rng = np.random.default_rng(5)
    a, b, c = rng.standard_normal((3, 2, 3))
    pred = np.array([[True, False, True], [False, False, True]])
    which = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
    check_grads(lambda a, b: lax.select_n(pred, a, b), (a, b), order=2)
    check_grads(lambda a, b, c: lax.select_n(which, a, b, c), (a, b, c), order=2)
    check_grads(lambda a, b: lax.select_n(True, a, b), (a, b), order=2)
    ga, gb, gc = fg.grad(
        lambda a, b, c: fnp.sum(lax.select_n(which, a, b, c) * c), argnums=(0, 1, 2)
    )(a, b, c)
    assert_array(ga, (which == 0) * c, dtype=np.float64)
    assert_array(gb, (which == 1) * c, dtype=np.float64)
    assert_array(gc, (which == 2) * c + np.choose(which, [a, b, c]), dtype=np.float64, rtol=1e-12)
    # a constant case: only the traced one gets a cotangent
    g = fg.grad(lambda a: fnp.sum(lax.select(pred, a, np.zeros((2, 3)))))(a)
    assert_array(g, pred, dtype=np.float64)


def test_integer_and_piecewise_constant_ops_have_zero_derivatives(x64):
    x = np.array([-1.7, -0.2, 0.6, 2.5])
    t = np.array([1.0, 2.0, 3.0, 4.0])
    for fn in (
        lax.sign,
        lax.floor,
        lax.ceil,
        lax.round,
        lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
    ):
        _, tangent = fg.jvp(fn, (x,), (t,))
        assert_array(tangent, np.zeros(4), dtype=np.float64)
        assert_array(fg.grad(lambda x, fn=fn: fnp.sum(fn(x)))(x), np.zeros(4), dtype=np.float64)
    # nextafter has no derivative rule (as JAX): the error says why and what to do
    with pytest.raises(TypeError, match="nextafter steps its input by one ulp"):
        fg.jvp(lambda x: lax.nextafter(x, np.full(4, np.inf)), (x,), (t,))

    def f(x):
        # comparisons, is_finite and bitwise ops feed only integer/bool values onwards
        mask = lax.and_(lax.lt(x, 0.5), lax.is_finite(x))
        k = lax.convert_element_type(x * 3.0, np.int32)
        bits = lax.population_count(lax.shift_left(k, 1)) + lax.clz(k)
        return fnp.sum(
            x * lax.convert_element_type(mask, x.dtype) + lax.convert_element_type(bits, x.dtype)
        )

    mask = (x < 0.5).astype(np.float64)
    assert_array(fg.grad(f)(x), mask, dtype=np.float64)
    check_grads(f, (x,), order=2)


def test_convert_element_type_derivatives(x64):
    x = np.array([0.25, -1.5, 3.0], np.float32)
    t = np.array([1.0, 2.0, -3.0], np.float32)
    out, tangent = fg.jvp(lambda x: lax.convert_element_type(x, np.float64), (x,), (t,))
    assert_array(tangent, t.astype(np.float64), dtype=np.float64, rtol=0, atol=0)
    y, vjp_fn = fg.vjp(lambda x: lax.convert_element_type(x, np.float64), x)
    (ct,) = vjp_fn(np.array([0.5, 1.0, 2.0]))
    assert_array(ct, [0.5, 1.0, 2.0], dtype=np.float32, rtol=0, atol=0)
    check_grads(
        lambda x: lax.convert_element_type(x, np.float64, weak_type=True) * 2.0,
        (x.astype(np.float64),),
        order=2,
    )
    # to and from integers: zero derivative; a weak input's cotangent is weak (JAX 0.10.2)
    g = fg.grad(
        lambda x: lax.convert_element_type(lax.convert_element_type(x, np.int32), np.float32) + x
    )(2.7)
    assert float(g) == 1.0 and g.weak_type
    _, tangent = fg.jvp(lambda x: lax.convert_element_type(x, np.int32), (x,), (t,))
    assert not np.any(np.asarray(tangent))
    _, tangent = fg.jvp(lambda x: lax.bitcast_convert_type(x, np.int32), (x,), (t,))
    assert not np.any(np.asarray(tangent))


def test_stop_gradient():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    assert_array(fg.grad(lambda x: fnp.sum(x * fg.stop_gradient(x)))(x), x, dtype=np.float32)
    assert_array(
        fg.grad(lambda x: fnp.sum(lax.stop_gradient(x**2) + x))(x), np.ones(3), dtype=np.float32
    )
    _, tangent = fg.jvp(lax.stop_gradient, (x,), (x,))
    assert_array(tangent, np.zeros(3), dtype=np.float32)
    tree = fg.grad(lambda p: fnp.sum(fg.stop_gradient(p)["a"] * p["b"]))({"a": x, "b": 2 * x})
    assert_array(tree["a"], np.zeros(3), dtype=np.float32)
    assert_array(tree["b"], x, dtype=np.float32)
    # second order: d/dx [x * sg(x)^2] = sg(x)^2, whose derivative is 0
    assert float(fg.grad(fg.grad(lambda x: x * fg.stop_gradient(x) ** 2))(3.0)) == 0.0
    xs = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    assert_array(fg.vmap(lax.stop_gradient, in_axes=1)(xs), xs.T, dtype=np.float32)
    jaxpr = str(fg.make_jaxpr(lambda x: fg.stop_gradient(x) * x)(x))
    assert "stop_gradient" in jaxpr


# -- transposes ----------------------------------------------------------------------------------


def test_transposes_of_nonlinear_uses_raise():
    a = core.ShapedArray((3,), np.float32)
    ct = fnp.ones(3, np.float32)
    with pytest.raises(TypeError, match="mul: cannot transpose"):
        transpose_rules[ew.mul_p]([ct], UndefPrimal(a), UndefPrimal(a))
    with pytest.raises(TypeError, match="div: cannot transpose with respect to the divisor"):
        transpose_rules[ew.div_p]([ct], fnp.ones(3, np.float32), UndefPrimal(a))


def test_transposes_give_cotangents_of_the_operand_avals():
    a3, a0 = core.ShapedArray((3,), np.float32), core.ShapedArray((), np.float32)
    ct = fnp.asarray(np.array([1.0, 2.0, 4.0], np.float32))
    two = fnp.asarray(np.float32(2.0))
    cts = transpose_rules[ew.add_p]([ct], UndefPrimal(a3), UndefPrimal(a0))
    assert_array(cts[0], [1, 2, 4], dtype=np.float32)
    assert_array(cts[1], 7.0, dtype=np.float32)
    cts = transpose_rules[ew.sub_p]([ct], UndefPrimal(a0), UndefPrimal(a3))
    assert_array(cts[0], 7.0, dtype=np.float32)
    assert_array(cts[1], [-1, -2, -4], dtype=np.float32)
    cts = transpose_rules[ew.mul_p]([ct], two, UndefPrimal(a3))
    assert cts[0] is None
    assert_array(cts[1], [2, 4, 8], dtype=np.float32)
    cts = transpose_rules[ew.div_p]([ct], UndefPrimal(a0), two)
    assert_array(cts[0], 3.5, dtype=np.float32)
    assert_array(transpose_rules[ew.neg_p]([ct], UndefPrimal(a3))[0], [-1, -2, -4])
    which = fnp.asarray(np.array([2, 0, 7], np.int32))  # out of range picks the last case
    cts = transpose_rules[ew.select_n_p]([ct], which, UndefPrimal(a3), ct, UndefPrimal(a3))
    assert_array(cts[1], [0, 2, 0], dtype=np.float32)
    assert cts[0] is None and cts[2] is None
    assert_array(cts[3], [1, 0, 4], dtype=np.float32)
    cts = transpose_rules[ew.convert_element_type_p](
        [ct],
        UndefPrimal(core.ShapedArray((3,), np.float16, weak_type=True)),
        new_dtype=np.dtype(np.float32),
        weak_type=False,
    )
    assert_array(cts[0], [1, 2, 4], dtype=np.float16, weak_type=False)


def test_weak_scalar_operands_get_summed_cotangents():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    assert float(fg.grad(lambda s: fnp.sum(lax.add(x, s)))(2.0)) == 3.0
    assert float(fg.grad(lambda s: fnp.sum(lax.sub(s, x)))(2.0)) == 3.0
    assert float(fg.grad(lambda s: fnp.sum(lax.mul(x, s)))(2.0)) == 6.0
    np.testing.assert_allclose(
        float(fg.grad(lambda s: fnp.sum(lax.div(s, x)))(2.0)), np.sum(1 / x), rtol=1e-6
    )
    # forward mode: a 0-d tangent of an operand broadcast inside the op gets the output shape
    _, t = fg.jvp(lambda s: lax.add(x, s), (np.float32(2.0),), (np.float32(1.0),))
    assert_array(t, np.ones(3), dtype=np.float32)
    _, t = fg.jvp(lambda s: lax.rem(s, x), (np.float32(2.0),), (np.float32(1.0),))
    assert_array(t, np.ones(3), dtype=np.float32)
    _, t = fg.jvp(lambda s: lax.clamp(s, x, 5.0), (np.float32(2.0),), (np.float32(1.0),))
    assert_array(t, [1, 0, 0], dtype=np.float32)


def test_gradient_jaxprs_use_the_expected_primitives():
    assert "cos" in str(fg.make_jaxpr(fg.grad(lax.sin))(1.0))
    assert "select_n" in str(fg.make_jaxpr(fg.grad(lax.abs))(1.0))
    jaxpr = fg.make_jaxpr(fg.grad(lambda x: fnp.sum(lax.add(x, 2.0) * x)))(np.ones(3, np.float32))
    (g,) = jaxpr(np.ones(3, np.float32))
    assert_array(g, np.full(3, 4.0), dtype=np.float32)
    text = str(
        fg.make_jaxpr(fg.grad(lambda s: fnp.sum(lax.mul(np.ones(3, np.float32), s))))(
            np.float32(1.0)
        )
    )
    assert "reduce_sum[axes=(0,)]" in text


# -- composites: grad, vmap(grad), jacfwd vs jacrev ------------------------------------------------


def _composite(x, y):
    z = lax.tanh(x) * y / (1.0 + lax.square(x)) + lax.max(x, y) - lax.logistic(x * y)
    z = z + lax.atan2(lax.exp(-x * x) + 0.5, y * y + 1.0) + lax.rem(x, 0.7) ** 2
    return fnp.sum(lax.select(x > 0, z, lax.sin(z)) + lax.clamp(-0.5, x * y, 0.5))


def test_composites_commute(x64):
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(5), rng.standard_normal(5)
    check_grads(_composite, (x, y), order=2)
    assert_transforms_commute(_composite, (x, y))
    h = fg.hessian(lambda x: fnp.sum(lax.sin(x) * lax.exp(x)))(x[:3])
    expected = np.diag(2 * np.cos(x[:3]) * np.exp(x[:3]))
    assert_array(h, expected, dtype=np.float64, rtol=1e-12, atol=1e-12)


def test_vmap_of_grad_per_example(x64):
    xs = np.linspace(-1.5, 1.5, 4)
    ys = np.linspace(0.5, 2.0, 4)
    per_example = fg.vmap(fg.grad(lambda x, y: lax.pow(lax.abs(x) + 1.0, y) * lax.erf(x)))
    got = per_example(xs, ys)
    for i, (x, y) in enumerate(zip(xs, ys)):
        want = y * (abs(x) + 1) ** (y - 1) * np.sign(x) * special_math.erf(x) + (
            abs(x) + 1
        ) ** y * 2 / _SQPI * np.exp(-x * x)
        np.testing.assert_allclose(float(got[i]), want, rtol=1e-12)


# -- vmap ----------------------------------------------------------------------------------------

BATCHED_BINARY = {
    "add": (lax.add, "f"),
    "sub": (lax.sub, "f"),
    "mul": (lax.mul, "i"),
    "div": (lax.div, "i"),
    "rem": (lax.rem, "i"),
    "pow": (lax.pow, "f"),
    "max": (lax.max, "f"),
    "min": (lax.min, "i"),
    "nextafter": (lax.nextafter, "f"),
    "atan2": (lax.atan2, "f"),
    "eq": (lax.eq, "i"),
    "lt": (lax.lt, "f"),
    "ge": (lax.ge, "i"),
    "and": (lax.bitwise_and, "b"),
    "xor": (lax.bitwise_xor, "i"),
    "shift_left": (lax.shift_left, "i"),
    "shift_right_arithmetic": (lax.shift_right_arithmetic, "i"),
}


def _values(rng, kind, shape):
    if kind == "f":
        return rng.uniform(0.5, 2.0, shape).astype(np.float32)
    if kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(-5, 6, shape).astype(np.int32)


def _batched(rng, kind, batch, example_shape, axis):
    """Per-example values and their stacked array with the batch along ``axis`` (None: one
    shared, unbatched value)."""
    if axis is None:
        v = _values(rng, kind, example_shape)
        return [v] * batch, v
    vals = [_values(rng, kind, example_shape) for _ in range(batch)]
    return vals, np.stack(vals, axis=axis)


def _axis_strategy(rank):
    return st.one_of(st.none(), st.integers(-rank - 1, rank))


@given(
    st.sampled_from(sorted(BATCHED_BINARY)),
    st.lists(st.integers(0, 3), max_size=2),
    st.integers(1, 3),
    st.booleans(),
    st.booleans(),
    st.data(),
)
@few
def test_vmap_binary_matches_loop(name, example_shape, batch, x_scalar, y_scalar, data):
    fn, kind = BATCHED_BINARY[name]
    shape = tuple(example_shape)
    sx, sy = (() if x_scalar else shape), (() if y_scalar else shape)
    ax = data.draw(_axis_strategy(len(sx)), "x axis")
    ay = (
        data.draw(_axis_strategy(len(sy)), "y axis")
        if ax is not None
        else data.draw(st.integers(-len(sy) - 1, len(sy)), "y axis")
    )
    rng = np.random.default_rng(batch)
    xs, x = _batched(rng, kind, batch, sx, ax)
    ys, y = _batched(rng, "i" if name == "pow" and y_scalar else kind, batch, sy, ay)
    if name.startswith("shift"):
        ys, y = [np.abs(v) for v in ys], np.abs(y)
    got = fg.vmap(fn, in_axes=(ax, ay))(x, y)
    want = np.stack([np.asarray(fn(a, b)) for a, b in zip(xs, ys)])
    assert_array(got, want, dtype=want.dtype, rtol=0, atol=0)


def test_vmap_keeps_unbatched_scalars_unbatched():
    xs = np.ones((4, 3), np.float32)
    for f in (
        lambda x: lax.add(x, 2.0),
        lambda x: lax.mul(x, np.float32(3.0)),
        lambda x: lax.clamp(0.0, x, 1.0),
        lambda x: lax.select_n(True, x, x * 2.0),
        lambda x: lax.pow(x, 2),
        lambda x: lax.max(x, lax.sin(np.float32(1.0))),
    ):
        text = str(fg.make_jaxpr(fg.vmap(f))(xs))
        assert "broadcast_in_dim" not in text and "transpose" not in text, text
    # operands batched along the same non-leading axis keep it: select_n reads the inputs as
    # they are (vmap itself may move the result's batch dim for out_axes afterwards)
    text = str(
        fg.make_jaxpr(fg.vmap(lambda x, w: lax.select_n(w, x, x), in_axes=1, out_axes=1))(
            xs, xs > 0
        )
    )
    assert "c:f32[4,3] = select_n b a a" in text, text
    text = str(fg.make_jaxpr(fg.vmap(lambda lo, x: lax.clamp(lo, x, 1.0), in_axes=1))(xs, xs))
    assert "c:f32[4,3] = clamp a b 1.0" in text, text


UNARY_BATCHED = [
    lax.sin,
    lax.exp,
    lax.tanh,
    lax.is_finite,
    lax.stop_gradient,
    lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
    lambda x: lax.integer_pow(x, 3),
    lambda x: lax.convert_element_type(x, np.int32),
    lambda x: lax.population_count(lax.convert_element_type(x, np.uint32)),
    lambda x: lax.clz(lax.convert_element_type(x, np.int32)),
    lambda x: lax.bitcast_convert_type(x, np.uint8),
    lambda x: lax.not_(lax.convert_element_type(x, np.int32)),
]


@pytest.mark.parametrize("index", range(len(UNARY_BATCHED)))
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_vmap_unary_matches_loop(index, axis):
    fn = UNARY_BATCHED[index]
    x = np.random.default_rng(index).uniform(-3, 3, (2, 3, 4)).astype(np.float32)
    got = fg.vmap(fn, in_axes=axis)(x)
    want = np.stack([np.asarray(fn(v)) for v in np.moveaxis(x, axis, 0)])
    assert_array(got, want, dtype=want.dtype, rtol=0, atol=0)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_vmap_bitcast_widening_keeps_the_batch_dim(axis):
    # per example: a (2, 4)-shaped uint8 block -> 2 uint32 values
    xs = np.random.default_rng(0).integers(0, 256, (3, 2, 4)).astype(np.uint8)
    x = np.moveaxis(xs, 0, axis)
    got = fg.vmap(lambda v: lax.bitcast_convert_type(v, np.uint32), in_axes=axis)(x)
    want = np.stack([np.asarray(lax.bitcast_convert_type(v, np.uint32)) for v in xs])
    assert_array(got, want, dtype=np.uint32)


@given(
    st.lists(st.integers(0, 3), max_size=2),
    st.integers(1, 3),
    st.booleans(),
    st.integers(2, 3),
    st.data(),
)
@few
def test_vmap_select_n_matches_loop(example_shape, batch, which_scalar, n_cases, data):
    shape = tuple(example_shape)
    sw = () if which_scalar else shape
    rng = np.random.default_rng(batch + n_cases)
    axes = [data.draw(_axis_strategy(len(sw)), "which axis")] + [
        data.draw(_axis_strategy(len(shape)), f"case {i} axis") for i in range(n_cases)
    ]
    if all(a is None for a in axes):
        axes[0] = 0
    whichs, which = _batched(rng, "i", batch, sw, axes[0])
    whichs, which = [np.abs(w) % n_cases for w in whichs], np.abs(which) % n_cases
    if n_cases == 2 and data.draw(st.booleans(), "bool which"):
        whichs, which = [w.astype(bool) for w in whichs], which.astype(bool)
    cases = [_batched(rng, "f", batch, shape, a) for a in axes[1:]]
    got = fg.vmap(lax.select_n, in_axes=tuple(axes))(which, *[c[1] for c in cases])
    want = np.stack(
        [np.asarray(lax.select_n(whichs[b], *[c[0][b] for c in cases])) for b in range(batch)]
    )
    assert_array(got, want, dtype=np.float32, rtol=0, atol=0)


@given(
    st.lists(st.integers(0, 3), max_size=2),
    st.integers(1, 3),
    st.booleans(),
    st.booleans(),
    st.data(),
)
@few
def test_vmap_clamp_matches_loop(example_shape, batch, lo_scalar, hi_scalar, data):
    shape = tuple(example_shape)
    slo, shi = (() if lo_scalar else shape), (() if hi_scalar else shape)
    axes = (
        data.draw(_axis_strategy(len(slo)), "lo axis"),
        data.draw(_axis_strategy(len(shape)), "x axis"),
        data.draw(_axis_strategy(len(shi)), "hi axis"),
    )
    if all(a is None for a in axes):
        axes = (axes[0], 0, axes[2])
    rng = np.random.default_rng(batch)
    los, lo = _batched(rng, "f", batch, slo, axes[0])
    xs, x = _batched(rng, "f", batch, shape, axes[1])
    his, hi = _batched(rng, "f", batch, shi, axes[2])
    got = fg.vmap(lax.clamp, in_axes=axes)(lo - 0.5, x * 1.5, hi + 0.5)
    want = np.stack(
        [np.asarray(lax.clamp(a - 0.5, b * 1.5, c + 0.5)) for a, b, c in zip(los, xs, his)]
    )
    assert_array(got, want, dtype=np.float32, rtol=0, atol=0)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("scalar", [False, True])
def test_vmap_select_n_and_clamp_on_a_shared_axis(axis, scalar):
    # every batched operand on the same axis (the rules' no-transpose path); ``which`` and the
    # bounds are either batched there too or unbatched 0-d values
    rng = np.random.default_rng(axis + 5)
    xs = rng.uniform(-2, 2, (4, 2, 3)).astype(np.float32)
    ys = rng.uniform(-2, 2, (4, 2, 3)).astype(np.float32)
    his = rng.uniform(0, 1, (4, 2, 3)).astype(np.float32)
    x, y, hi = (np.moveaxis(v, 0, axis) for v in (xs, ys, his))
    if scalar:
        which_axis, which, whichs = None, np.int32(1), [np.int32(1)] * 4
    else:
        whichs = rng.integers(0, 3, (4, 2, 3)).astype(np.int32)
        which_axis, which = axis, np.moveaxis(whichs, 0, axis)
    got = fg.vmap(lax.select_n, in_axes=(which_axis, axis, axis, axis))(which, x, y, x)
    want = np.stack([np.asarray(lax.select_n(w, a, b, a)) for w, a, b in zip(whichs, xs, ys)])
    assert_array(got, want, dtype=np.float32, rtol=0, atol=0)
    got = fg.vmap(
        lambda lo, x, hi: lax.clamp(lo, x, hi), in_axes=(None, axis, None if scalar else axis)
    )(np.float32(-0.5), x, np.float32(0.5) if scalar else hi)
    want = np.stack(
        [
            np.asarray(lax.clamp(np.float32(-0.5), a, np.float32(0.5) if scalar else h))
            for a, h in zip(xs, his)
        ]
    )
    assert_array(got, want, dtype=np.float32, rtol=0, atol=0)


def test_vmap_of_jvp_and_vjp_of_select_and_clamp(x64):
    rng = np.random.default_rng(8)
    x, lo = rng.standard_normal((4, 3)), rng.standard_normal(4) - 1.0

    def f(lo, x):
        return fnp.sum(lax.clamp(lo, x, 1.0) * lax.select(x > 0, x, lax.exp(x)))

    got = fg.vmap(fg.grad(f, argnums=(0, 1)))(lo, x)
    for i in range(4):
        want = fg.grad(f, argnums=(0, 1))(lo[i], x[i])
        assert_array(got[0][i], want[0], rtol=1e-12, atol=1e-12)
        assert_array(got[1][i], want[1], rtol=1e-12, atol=1e-12)
    jf = fg.jacfwd(lambda x: lax.clamp(-0.5, x, 0.5) * lax.sin(x))(x[0])
    jr = fg.jacrev(lambda x: lax.clamp(-0.5, x, 0.5) * lax.sin(x))(x[0])
    assert_array(jf, np.asarray(jr), rtol=1e-12, atol=1e-12)
