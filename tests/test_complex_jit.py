"""Complex programs under jit: the complex split (``fungrad/lowering/complex_split.py``) turns
every complex value into a pair of real ones before lowering.

References: numpy in complex128 (or long double) for the values (errors measured relative to
``|z|``, the complex relative error), numpy's own complex64 loop where the split follows its
algorithm exactly (division), the eager primitives for the orders numpy does not define
(lexicographic max/min), and eager evaluation for whole programs.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, lax
from fungrad.lowering import BACKENDS, compile_jaxpr, complex_split
from fungrad.lowering.fusion import LoweringError

EPS32 = float(np.finfo(np.float32).eps)


def _parts(a):
    a = np.asarray(a)
    return (a.real, a.imag) if a.dtype.kind == "c" else (a,)


def assert_close(got, ref, ulps: float = 4, eps: float = EPS32):
    """``|got - ref| <= ulps * eps * |ref|`` where ``ref`` is finite and in the normal range
    of the result's dtype; where it is not finite, the same NaN/inf in each part (a finite
    ``ref`` beyond the range is not checked)."""
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    info = np.finfo(got.real.dtype)
    mag = np.abs(ref)
    ok = np.isfinite(ref) & (mag > float(info.tiny) * 1e8) & (mag < float(info.max) / 4)
    skip = np.isfinite(ref) & ~ok
    g, r = got.astype(np.complex128), ref.astype(np.complex128)
    err = np.abs(g - r)[ok]
    bound = ulps * eps * np.abs(r)[ok]
    assert np.all(err <= bound), (
        f"max error {np.max(err / np.abs(r)[ok]) / eps:.1f} ulps at "
        f"{np.argmax(err / np.abs(r)[ok])}: got {g[ok][np.argmax(err - bound)]}, "
        f"want {r[ok][np.argmax(err - bound)]}"
    )
    for gp, rp in zip(_parts(got[~ok & ~skip]), _parts(ref[~ok & ~skip])):
        close = np.abs(gp - rp) <= ulps * eps * np.abs(rp) + 1e-30
        same = (np.isnan(gp) & np.isnan(rp)) | (gp == rp) | close
        assert np.all(same), (gp[~same], rp[~same])


def c64(re, im):
    """complex64 from real and imaginary parts, exactly (signed zeros, NaNs and infs kept)."""
    re, im = np.asarray(re, np.float32), np.asarray(im, np.float32)
    z = np.empty(np.broadcast(re, im).shape, np.complex64)
    z.real, z.imag = re, im
    return z


# -- every elementwise function: one compiled program, many values --------------------------


def _log1p(z):
    """``log(1 + z)`` in float64 without forming ``1 + z`` (whose rounding would lose small
    ``z``): ``log1p(2x + x^2 + y^2) / 2 + i atan2(y, 1 + x)``."""
    x, y = z.real.astype(np.float64), z.imag.astype(np.float64)
    big = np.hypot(x, y) > 0.5
    out = np.empty(z.shape, np.complex128)
    out.real = np.where(big, np.log(np.hypot(1 + x, y)), 0.5 * np.log1p(x * (2 + x) + y * y))
    out.imag = np.arctan2(y, 1 + x)
    return out


def _expm1(z):
    """``exp(z) - 1`` in float64: ``expm1(x) cos(y) - 2 sin(y/2)^2 + i exp(x) sin(y)``."""
    x, y = z.real.astype(np.float64), z.imag.astype(np.float64)
    out = np.empty(z.shape, np.complex128)
    out.real = np.expm1(x) * np.cos(y) - 2 * np.sin(y / 2) ** 2
    out.imag = np.exp(x) * np.sin(y)
    return out


UNARY = {  # name: (fungrad function, complex128 reference)
    "exp": (lax.exp, np.exp),
    "exp2": (lax.exp2, np.exp2),
    "log": (lax.log, np.log),
    "log1p": (lax.log1p, _log1p),
    "expm1": (lax.expm1, _expm1),
    "sqrt": (lax.sqrt, np.sqrt),
    "rsqrt": (lax.rsqrt, lambda z: 1 / np.sqrt(z)),
    "sin": (lax.sin, np.sin),
    "cos": (lax.cos, np.cos),
    "tan": (lax.tan, np.tan),
    "sinh": (lax.sinh, np.sinh),
    "cosh": (lax.cosh, np.cosh),
    "tanh": (lax.tanh, np.tanh),
    "asin": (lax.asin, np.arcsin),
    "acos": (lax.acos, np.arccos),
    "atan": (lax.atan, np.arctan),
    "asinh": (lax.asinh, np.arcsinh),
    "acosh": (lax.acosh, np.arccosh),
    "atanh": (lax.atanh, np.arctanh),
    "logistic": (lax.logistic, lambda z: 1 / (1 + np.exp(-z))),
    "abs": (lax.abs, np.abs),
    "square": (lax.square, np.square),
    "neg": (lax.neg, np.negative),
    "conj": (lax.conj, np.conj),
    "real": (lax.real, np.real),
    "imag": (lax.imag, np.imag),
    "sign": (lax.sign, lambda z: np.where(z == 0, 0, z / np.where(z == 0, 1, np.abs(z)))),
    "integer_pow3": (lambda z: lax.integer_pow(z, 3), lambda z: z**3),
    "integer_pow-2": (lambda z: lax.integer_pow(z, -2), lambda z: 1 / (z * z)),
    "reciprocal": (lambda z: 1 / z, lambda z: 1 / z),
}
# measured worst cases are 2.5 ulps (logistic) and 6 (exp2, whose z ln 2 is rounded); near
# the branch points and poles of the inverse functions the bound is looser
ULPS = {"exp2": 12, "acos": 6, "acosh": 6, "asin": 6, "asinh": 6, "atan": 6, "atanh": 6}

_PART = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5]),
    st.floats(-10, 10, width=32, allow_subnormal=False),
    st.floats(2.0**-20, 2.0**-7, width=32),
)
_Z16 = hnp.arrays(np.complex64, (16,), elements=st.builds(complex, _PART, _PART))

_unary_program = fg.jit(lambda z: tuple(fn(z) for fn, _ in UNARY.values()))


@given(z=_Z16)
def test_every_elementwise_function_matches_numpy(z):
    outs = _unary_program(fnp.asarray(z))
    with np.errstate(all="ignore"):
        for (name, (_, ref)), got in zip(UNARY.items(), outs):
            want = np.asarray(ref(z.astype(np.complex128)))
            want = want.astype(np.float64 if want.dtype.kind == "f" else np.complex128)
            try:
                assert_close(got, want, ULPS.get(name, 4))
            except AssertionError as e:
                raise AssertionError(f"{name}: {e}") from None


SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-30]


def test_special_values_follow_numpy():
    """NaN, inf, signed zeros and the largest finite values: exp, log, sqrt and abs give
    numpy's (C99's) values, without overflow where the result is finite; division gives the
    eager impl's (XLA's special values, which tests/test_complex_edges.py checks against
    JAX's)."""
    from fungrad.lax import complex_math

    pairs = list(itertools.product(SPECIAL, SPECIAL))
    z = c64([a for a, _ in pairs], [b for _, b in pairs])
    fns = {
        "exp": (lax.exp, np.exp),
        "log": (lax.log, np.log),
        "sqrt": (lax.sqrt, np.sqrt),
        "abs": (lax.abs, np.abs),
        "reciprocal": (lambda v: 1 / v, lambda v: complex_math.div(np.ones_like(v), v)),
        "div": (lambda v: v / z[::-1], lambda v: complex_math.div(v, z[::-1])),
    }
    outs = fg.jit(lambda v: tuple(f(v) for f, _ in fns.values()))(fnp.asarray(z))
    with np.errstate(all="ignore"):
        for (name, (_, ref)), got in zip(fns.items(), outs):
            want = ref(z)
            try:
                assert_close(got, want.astype(np.asarray(got).dtype), 4)
            except AssertionError as e:
                raise AssertionError(f"{name}: {e}") from None
    # the split's own guarantees beyond numpy's
    got = fg.jit(lambda v: (lax.expm1(v), lax.log1p(v)))(fnp.asarray(c64([np.inf, 1e-30], 0)))
    np.testing.assert_array_equal(np.asarray(got[0])[0], np.complex64(np.inf))
    np.testing.assert_array_equal(np.asarray(got[1])[1], np.complex64(1e-30))  # numpy: 0


_BINARY = hnp.arrays(np.complex64, (2, 16), elements=st.builds(complex, _PART, _PART))
_binary_program = fg.jit(
    lambda a, b: (a + b, a - b, a * b, a / b, a == b, a != b, lax.max(a, b), lax.min(a, b))
)


@given(ab=_BINARY)
def test_arithmetic_and_comparisons(ab):
    a, b = ab
    add, sub, mul, div, eq, ne, mx, mn = _binary_program(fnp.asarray(a), fnp.asarray(b))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.asarray(add), a + b)
        np.testing.assert_array_equal(np.asarray(sub), a - b)
        # Smith's algorithm as numpy's loop writes it: the same bits where numpy's result is
        # finite; XLA's special values (the eager impl's) elsewhere
        want = a / b
        finite = np.isfinite(want)
        np.testing.assert_array_equal(np.asarray(div)[finite], want[finite])
        np.testing.assert_array_equal(np.asarray(div), np.asarray(lax.div(a, b)))
        assert_close(mul, a.astype(np.complex128) * b, 2)
    np.testing.assert_array_equal(np.asarray(eq), a == b)
    np.testing.assert_array_equal(np.asarray(ne), a != b)
    # lexicographic, as XLA and the eager primitive (numpy has no such order for complex)
    np.testing.assert_array_equal(np.asarray(mx), np.asarray(lax.max(a, b)))
    np.testing.assert_array_equal(np.asarray(mn), np.asarray(lax.min(a, b)))


def test_pow_atan2_and_clamp():
    rng = np.random.default_rng(0)
    a = c64(rng.uniform(-3, 3, 20), rng.uniform(-3, 3, 20))
    b = c64(rng.uniform(-2, 2, 20), rng.uniform(-2, 2, 20))
    a[:3] = [0, 0, 0]
    b[:3] = [0, 2, -1j]
    pw, at = fg.jit(lambda x, y: (lax.pow(x, y), lax.atan2(x, y)))(fnp.asarray(a), fnp.asarray(b))
    with np.errstate(all="ignore"):
        want = np.power(a.astype(np.complex128), b)
    assert_close(np.asarray(pw)[3:], want[3:], 32)
    # numpy's cases at zero: 0 ** 0 = 1, 0 ** 2 = 0, 0 ** -i = NaN
    np.testing.assert_array_equal(np.asarray(pw)[:2], [1, 0])
    assert np.isnan(np.asarray(pw)[2])
    assert_close(at, np.asarray(lax.atan2(a.astype(np.complex128), b)), 16)
    lo, hi = fnp.asarray(c64(-1, -1)), fnp.asarray(c64(1, 1))
    got = fg.jit(lambda x: lax.clamp(lo, x, hi))(fnp.asarray(a))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(lax.clamp(lo, fnp.asarray(a), hi)))


def test_real_exponents_and_conversions():
    z = c64([1.5, -2, 0], [0.5, 3, 0])
    r = np.array([1.0, -2.5, 3.0], np.float32)
    f = fg.jit(
        lambda z, r: (
            z ** fnp.asarray(2),  # integer exponent array
            lax.complex(r, 2 * r),
            lax.convert_element_type(r, np.complex64),
            lax.convert_element_type(z, np.float32),  # JAX: the real part
            lax.conj(r),
            fnp.exp(1j * r),
        )
    )
    with warnings.catch_warnings():  # complex -> float32 warns, as in JAX and numpy
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        outs = [np.asarray(o) for o in f(fnp.asarray(z), fnp.asarray(r))]
    assert_close(outs[0], z.astype(np.complex128) ** 2, 8)
    np.testing.assert_array_equal(outs[1], r + 2j * r)
    np.testing.assert_array_equal(outs[2], r.astype(np.complex64))
    np.testing.assert_array_equal(outs[3], z.real)
    np.testing.assert_array_equal(outs[4], r.astype(np.complex64))
    assert_close(outs[5], np.exp(1j * r.astype(np.float64)), 4)


# -- shapes: 0-d, size 0, broadcasting, constants --------------------------------------------


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (1,), (2, 3)])
def test_shapes_zero_d_and_empty(shape):
    rng = np.random.default_rng(1)
    z = c64(rng.standard_normal(shape), rng.standard_normal(shape))
    f = fg.jit(lambda v: (v * (2 - 1j) + lax.exp(v), fnp.sum(v), fnp.prod(v), lax.abs(v)))
    outs = f(fnp.asarray(z))
    assert [np.asarray(o).shape for o in outs] == [shape, (), (), shape]
    assert [o.dtype for o in outs] == [np.complex64, np.complex64, np.complex64, np.float32]
    z128 = z.astype(np.complex128)
    assert_close(outs[0], z128 * (2 - 1j) + np.exp(z128), 4)
    assert_close(outs[1], z128.sum(), 8)  # 0 for an empty array
    assert_close(outs[2], z128.prod(), 8)  # 1 for an empty array
    assert_close(outs[3], np.abs(z128), 2)


def test_broadcasting_weak_scalars_and_constants():
    a = c64(np.arange(3.0).reshape(3, 1), 1.0)
    b = c64(np.arange(4.0), -np.arange(4.0))
    const = c64([1, 2, 3, 4], [0.5, 0, -1, 2])
    f = fg.jit(lambda x, y: (x * y + 1j, x / 2 + fnp.asarray(const), (1 + 2j) * x))
    outs = f(fnp.asarray(a), fnp.asarray(b))
    np.testing.assert_allclose(np.asarray(outs[0]), a * b + 1j, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(outs[1]), a / 2 + const, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(outs[2]), (1 + 2j) * a, rtol=1e-6)
    assert outs[2].dtype == np.complex64 and not outs[2].weak_type


# -- structural operations, reductions, products ----------------------------------------------


def test_structural_operations_move_both_parts():
    rng = np.random.default_rng(2)
    x = c64(rng.standard_normal((4, 3)), rng.standard_normal((4, 3)))
    idx = np.array([0, 3, 3, 1])

    def f(v):
        return (
            v.T,
            v.reshape(3, 4),
            v[1:3, ::-1],
            v[idx],
            v.at[idx].add(1j),
            v.at[2].set(5 - 1j),
            fnp.concatenate([v, 2j * v], axis=1),
            fnp.pad(v, 1, constant_values=1 + 1j),
            lax.dynamic_slice(v, (1, 1), (2, 2)),
            lax.dynamic_update_slice(v, v[:1] * 1j, (2, 0)),
            fnp.where(v.real > 0, v, 0j),
            fnp.broadcast_to(v[0], (2, 3)),
            fnp.flip(v, 0),
            fnp.expand_dims(v, 1),
        )

    outs = fg.jit(f)(fnp.asarray(x))
    for got, want in zip(outs, f(fnp.asarray(x))):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_reductions_and_cumulative_operations():
    rng = np.random.default_rng(3)
    x = c64(rng.uniform(-1, 1, (5, 7)), rng.uniform(-1, 1, (5, 7)))
    f = fg.jit(
        lambda v: (
            fnp.sum(v, 0),
            fnp.mean(v),
            fnp.prod(v, 1),
            fnp.prod(v),
            fnp.cumsum(v, 1),
            fnp.cumprod(v, 0),
            lax.cummax(v, axis=1),
            lax.cummin(v, axis=0, reverse=True),
            fnp.max(v, 1),
            fnp.min(v, 0),
        )
    )
    outs = f(fnp.asarray(x))
    z = x.astype(np.complex128)
    assert_close(outs[0], z.sum(0), 8)
    assert_close(outs[1], z.mean(), 8)
    assert_close(outs[2], z.prod(1), 16)
    assert_close(outs[3], z.prod(), 64)
    assert_close(outs[4], np.cumsum(z, 1), 16)
    assert_close(outs[5], np.cumprod(z, 0), 16)
    for got, want in zip(outs[6:], f.__wrapped__(fnp.asarray(x))[6:]):  # exact: comparisons
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_products_four_real_dot_generals():
    rng = np.random.default_rng(4)

    def c(*s):
        return c64(rng.standard_normal(s), rng.standard_normal(s))

    a, b, v = c(6, 5), c(5, 4), c(5)
    r = rng.standard_normal((4, 3)).astype(np.float32)
    f = fg.jit(
        lambda a, b, v: (
            a @ b,
            a @ v,
            fnp.einsum("ij,ik->jk", a, a),
            fnp.einsum("bi,bi->b", a, a),
            (a @ b) @ lax.convert_element_type(fnp.asarray(r), np.complex64),
            fnp.vdot(v, v),
        )
    )
    outs = f(fnp.asarray(a), fnp.asarray(b), fnp.asarray(v))
    A, B, V = (m.astype(np.complex128) for m in (a, b, v))
    wants = [A @ B, A @ V, A.T @ A, (A * A).sum(1), A @ B @ r, np.vdot(V, V)]
    for got, want in zip(outs, wants):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


# -- whole programs -----------------------------------------------------------------------------


def test_polynomial_and_matmul_chain():
    coeffs = [1 + 1j, -2, 0.5j, 3 - 1j]

    def horner(z):
        acc = fnp.zeros_like(z)
        for c in coeffs:
            acc = acc * z + c
        return acc

    z = c64(np.linspace(-2, 2, 50), np.linspace(1, -1, 50))
    assert_close(fg.jit(horner)(fnp.asarray(z)), np.polyval(coeffs, z.astype(np.complex128)), 16)
    rng = np.random.default_rng(5)
    ms = [c64(rng.standard_normal((8, 8)), rng.standard_normal((8, 8))) / 3 for _ in range(3)]
    chain = fg.jit(lambda a, b, c: a @ b @ c @ fnp.conj(a).T)
    got = chain(*map(fnp.asarray, ms))
    m = [x.astype(np.complex128) for x in ms]
    np.testing.assert_allclose(np.asarray(got), m[0] @ m[1] @ m[2] @ m[0].conj().T, atol=1e-5)


def test_control_flow_with_complex_carries():
    rng = np.random.default_rng(6)
    x = c64(rng.standard_normal((5, 3)), rng.standard_normal((5, 3)))

    def scan_fn(v):
        return lax.scan(lambda c, r: (c * r + 1j, (c.real, c * 2)), v[0], v)

    def cond_fn(v):
        return lax.cond(v[0, 0].real > 0, lambda u: u * 2j, lambda u: fnp.conj(u), v)

    def mandelbrot(c):
        def body(s):
            z, n = s
            return z * z + c, n + 1

        return lax.while_loop(lambda s: (fnp.abs(s[0]) < 2) & (s[1] < 40), body, (0j * c, 0))[1]

    for fn, arg in [(scan_fn, x), (cond_fn, x), (cond_fn, -x), (fg.vmap(mandelbrot), x.ravel())]:
        want = fn(fnp.asarray(arg))
        got = fg.jit(fn)(fnp.asarray(arg))
        for g, w in zip(fg.tree_util.tree_leaves(got), fg.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_vmap_grad_calls_and_callbacks_under_jit():
    rng = np.random.default_rng(7)
    x = c64(rng.standard_normal((4, 3)), rng.standard_normal((4, 3)))
    X = fnp.asarray(x)
    rows = fg.jit(fg.vmap(lambda r: fnp.sum(r * fnp.conj(r)).real))(X)
    np.testing.assert_allclose(np.asarray(rows), [np.vdot(r, r).real for r in x], rtol=1e-5)

    def loss(p):
        return fnp.sum(fnp.abs(p * (1 + 2j) - 1) ** 2)

    np.testing.assert_allclose(
        np.asarray(fg.jit(fg.grad(loss))(X)), np.asarray(fg.grad(loss)(X)), rtol=1e-5
    )
    np.testing.assert_allclose(  # JAX's convention for |p a - 1|^2: 2 a conj(p a - 1)
        np.asarray(fg.jit(fg.grad(loss))(X)), 2 * (1 + 2j) * np.conj(x * (1 + 2j) - 1), rtol=1e-5
    )
    inner = fg.jit(lambda v: fg.checkpoint(lambda u: lax.sin(u) * u)(v) + 1j)
    np.testing.assert_allclose(
        np.asarray(fg.jit(lambda v: inner(v) * 2)(X)), (np.sin(x) * x + 1j) * 2, rtol=1e-5
    )
    solved = fg.jit(lambda b: lax.custom_linear_solve(lambda v: v * (2 - 1j), b, _halve))(X)
    np.testing.assert_allclose(np.asarray(solved), x / (2 - 1j), rtol=1e-6)
    seen = []
    f = fg.jit(
        lambda v: fg.pure_callback(
            lambda u: (seen.append(np.asarray(u)), np.asarray(u) * 1j)[1],
            fg.ShapeDtypeStruct(v.shape, v.dtype),
            v * 2,
        )
    )
    np.testing.assert_array_equal(np.asarray(f(X)), x * 2 * 1j)
    np.testing.assert_array_equal(seen[-1], x * 2)
    assert seen[-1].dtype == np.complex64


def _halve(matvec, b):
    return b / (2 - 1j)


def test_debug_print_of_complex_values_under_jit(capsys):
    @fg.jit
    def f(v):
        fg.debug.print("z = {z}", z=v[0] * 1j)
        return v

    f(fnp.asarray(c64([1.5, 2], [-2, 0])))
    assert capsys.readouterr().out.strip() == f"z = {np.complex64(2 + 1.5j)}"


def test_complex128_under_x64(x64):
    rng = np.random.default_rng(8)
    z = rng.standard_normal(10) + 1j * rng.standard_normal(10)
    f = fg.jit(lambda v: (lax.exp(v) / v, lax.sqrt(v), lax.log(v), v @ v, lax.abs(v)))
    outs = f(fnp.asarray(z))
    assert outs[0].dtype == np.complex128 and outs[4].dtype == np.float64
    wants = [np.exp(z) / z, np.sqrt(z), np.log(z), z @ z, np.abs(z)]
    for got, want in zip(outs, wants):
        assert_close(got, want, 8, float(np.finfo(np.float64).eps))


# -- the compiler's boundary -------------------------------------------------------------------


def test_real_programs_are_compiled_as_before():
    closed = fg.make_jaxpr(lambda x: fnp.sin(x) * 2)(np.ones(3, np.float32))
    assert not complex_split.has_complex(closed)
    exe = compile_jaxpr(closed)
    assert type(exe).__name__ == "Executable"
    plan = exe.as_text().split("# LLVM IR")[0]  # the jaxpr and fusion plan the backend makes
    assert plan == BACKENDS["cpu"].compile(closed).as_text().split("# LLVM IR")[0]
    z = fg.make_jaxpr(lambda x: lax.real(x * 2))(np.ones(3, np.complex64))
    assert complex_split.has_complex(z)
    exe = compile_jaxpr(z)
    assert isinstance(exe, complex_split.SplitExecutable)
    assert "complex values split" in exe.as_text()
    # complex only inside a branch: the branch is split, the boundary stays real
    inside = fg.make_jaxpr(lambda x: lax.cond(True, lambda v: lax.abs(v * 1j), lambda v: v, x))(
        np.ones(3, np.float32)
    )
    assert complex_split.has_complex(inside)
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda x: lax.abs(x * 1j))(np.ones(3))), 1)


def test_inputs_are_viewed_and_outputs_are_views():
    z = c64(np.arange(6.0).reshape(2, 3), -1)
    f = fg.jit(lambda v: v * 1)
    out = f(fnp.asarray(z))
    np.testing.assert_array_equal(np.asarray(out), z)
    assert np.asarray(out).base is not None  # a view of the real [..., 2] result
    strided = fnp.asarray(z)[:, ::2]  # a non-contiguous argument is copied once
    np.testing.assert_array_equal(np.asarray(f(strided)), z[:, ::2])
    np.testing.assert_array_equal(np.asarray(f(z)), z)  # numpy arguments
    w = fg.jit(lambda v: v * 2)(1 + 2j)  # a Python complex: a weak 0-d complex64
    assert w.dtype == np.complex64 and w.weak_type and np.asarray(w) == 2 + 4j


def _optimized_split(fn, *args):
    from fungrad.ir import passes

    closed = complex_split.split_program(fg.make_jaxpr(fn)(*map(fnp.asarray, args)))
    return passes.optimize(closed).jaxpr


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 4)])
def test_a_complex_value_passed_through_costs_no_copy(shape):
    """The planes the split slices from an argument, interleaved again for the output, are the
    argument itself (the ``complex_interleave`` rule of ``ir/passes.py``): no equations."""
    z = c64(np.arange(math.prod(shape), dtype=np.float32).reshape(shape), -2)
    j = _optimized_split(lambda v: v, z)
    assert not j.eqns and j.outvars[0] is j.invars[0]
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: v)(z)), z)
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: (v, v))(z)[1]), z)


def test_interleaving_other_planes_is_kept():
    """Planes swapped, or taken from two arrays, or a plane of a non-trailing axis are not the
    array: the interleave stays and the values are right."""
    z = c64(np.arange(6.0).reshape(2, 3), -np.arange(6.0).reshape(2, 3) - 1)
    w = c64(np.ones((2, 3)), 5)
    swap = lambda v: lax.complex(fnp.imag(v), fnp.real(v))  # noqa: E731
    mixed = lambda v, u: lax.complex(fnp.real(v), fnp.imag(u))  # noqa: E731
    for fn, args, want in [
        (swap, (z,), z.imag + 1j * z.real),
        (mixed, (z, w), z.real + 1j * w.imag),
    ]:
        j = _optimized_split(fn, *args)
        assert any(e.primitive is complex_split.interleave_p for e in j.eqns)
        np.testing.assert_array_equal(np.asarray(fg.jit(fn)(*args)), want.astype(np.complex64))
    # a real [.., 2] array's planes along an axis that is not the last: not an interleave of it
    r = np.arange(12.0, dtype=np.float32).reshape(2, 3, 2)

    def rows(a):
        return lax.complex(a[0, :, 0], a[1, :, 0])

    np.testing.assert_array_equal(np.asarray(fg.jit(rows)(r)), (r[0, :, 0] + 1j * r[1, :, 0]))


def test_a_primitive_without_a_split_rule_is_a_clear_error():
    prim = core.Primitive("test_complex_identity_no_split")
    prim.impl = lambda x: x
    prim.abstract_eval = lambda x: x
    try:
        f = fg.jit(lambda v: prim.bind(v) * 2)
        with pytest.raises(LoweringError, match="test_complex_identity_no_split.*no complex"):
            f(fnp.asarray(c64([1.0], 2.0)))
        np.testing.assert_array_equal(  # eagerly it works
            np.asarray(prim.bind(fnp.asarray(c64([1.0], 2.0))) * 2), c64([2.0], 4.0)
        )
    finally:
        del core.primitives[prim.name]


# Primitives taking complex values whose compiled programs raise the clear LoweringError
# (eager ones work). Empty: the combining scatters (scatter-mul/-max/-min, whose colliding
# updates do not combine part by part) apply their updates one at a time in a loop.
NO_COMPLEX_LOWERING: set[str] = set()


def test_every_primitive_accepting_complex_has_a_split_rule(x64):
    """Each registry sample whose primitive accepts complex operands (its float operands made
    complex) traces to a program the split rewrites completely, and all of them, compiled as
    one program, give the eager values."""
    from tests.test_registry_transforms import SAMPLES

    pieces = []
    for name, sample in sorted(SAMPLES.items()):
        fn, args = sample(np.random.default_rng(0))
        cargs = [
            a * (1 + 0.5j) if isinstance(a, (np.ndarray, np.generic)) and a.dtype.kind == "f" else a
            for a in args
        ]
        if not any(isinstance(a, (np.ndarray, np.generic)) and a.dtype.kind == "c" for a in cargs):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                closed = fg.make_jaxpr(fn)(*cargs)
        except (TypeError, ValueError):
            continue  # the primitive (or this sample's use of it) takes no complex values
        prim = core.primitives[name]
        if not _binds_complex(closed.jaxpr, prim):
            continue
        if name in NO_COMPLEX_LOWERING:
            assert not complex_split.has_split_rule(prim)
            with pytest.raises(LoweringError, match=f"{name} has no complex lowering yet"):
                complex_split.split_program(closed)
            continue
        assert complex_split.has_split_rule(prim), f"{name} takes complex values but has no rule"
        pieces.append((name, fn, [fnp.asarray(a) for a in cargs]))
    names = {name for name, _, _ in pieces}
    assert {"add", "mul", "exp", "dot_general", "scan", "while", "cond", "reduce_prod"} <= names

    def program(*flat):
        outs, it = [], iter(flat)
        for _, fn, args in pieces:
            outs.append(fn(*[next(it) for _ in args]))
        return outs

    flat = [a for _, _, args in pieces for a in args]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, want = fg.jit(program)(*flat), program(*flat)
    for (name, _, _), g, w in zip(pieces, got, want):
        for gl, wl in zip(fg.tree_util.tree_leaves(g), fg.tree_util.tree_leaves(w)):
            np.testing.assert_allclose(
                np.asarray(gl), np.asarray(wl), rtol=1e-12, atol=1e-14, err_msg=name
            )


def _binds_complex(jaxpr, prim) -> bool:
    for e in jaxpr.eqns:
        if e.primitive is prim and any(
            v.aval.dtype.kind == "c" for v in [*e.invars, *e.outvars] if hasattr(v, "aval")
        ):
            return True
        for sub in complex_split._sub_jaxprs(e.params):
            if _binds_complex(sub, prim):
                return True
    return False


# -- the GPU backend ----------------------------------------------------------------------------


def test_gpu_runs_complex64_programs(gpu):
    rng = np.random.default_rng(9)
    x = c64(rng.standard_normal((4, 5)), rng.standard_normal((4, 5)))
    f = fg.jit(lambda v: (lax.exp(v) * fnp.conj(v) / (v + 2), fnp.sum(v * v, 1)), backend="gpu")
    e, s = f(fnp.asarray(x))
    z = x.astype(np.complex128)
    np.testing.assert_allclose(np.asarray(e), np.exp(z) * z.conj() / (z + 2), rtol=2e-5)
    np.testing.assert_allclose(np.asarray(s), (z * z).sum(1), rtol=2e-5, atol=1e-5)
    assert isinstance(e, fg.GpuArray) and e.dtype == np.complex64
    again = fg.jit(lambda v: v * 1j, backend="gpu")(e)  # a complex GPU array as an argument
    np.testing.assert_allclose(np.asarray(again), np.asarray(e) * 1j, rtol=1e-6)
    carry = fg.jit(lambda v: lax.scan(lambda c, r: (c * r, c), v[0], v), backend="gpu")
    got = carry(fnp.asarray(x))
    want = carry.__wrapped__(fnp.asarray(x))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6)


def test_gpu_refuses_complex128(gpu, x64):
    f = fg.jit(lambda v: v * 2, backend="gpu")
    with pytest.raises(TypeError, match="complex128.*complex64"):
        f(fnp.asarray(np.ones(3, np.complex128)))
