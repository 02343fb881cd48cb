"""sin, cos, tan and sinc of large arguments (issue 15): jit on the CPU (float32, float64) and
the GPU (float32) against references whose range reduction is exact integer arithmetic.

Below 2^24 (float32) / 2^53 (float64) the math functions reduce by Cody-Waite; from there on
by Payne-Hanek (trig._large_frac_f32 / _large_pio2_f64). Before, they returned NaN there,
where numpy and JAX are accurate. The reference here does not trust any libm's reduction:
x is an exact rational m 2^e, pi/2 is known to 1600 bits (Machin's formula, in Python
integers), so q = round(x / (pi/2)) and r = x - q pi/2 are exact to 2^-400, and only sin/cos/
tan of |r| <= pi/4 come from long double (x87, 64-bit mantissa). Max errors measured (20000
log-uniform arguments per dtype plus the hardest ones; the tests bound them at llvm_math's
documented bounds, 1 ulp for sin/cos and 1.5 for tan and sinc, on both backends):

    (ulp)           sin    cos    tan    sinc     at the hardest arguments (sin/cos/tan)
    CPU float32     0.60   0.60   1.15   1.37     0.00 / 0.49 / 0.39
    CPU float64     0.71   0.73   1.23   1.40     0.29 / 0.43 / 0.54
    GPU float32     0.74   0.76   1.15   1.36     0.00 / 0.49 / 0.39
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering.math import llvm as llvm_math
from fungrad.lowering.math import trig

LD = np.longdouble
assert np.finfo(LD).nmant >= 63, "these tests need an extended-precision numpy.longdouble"


# ----------------------------------------------------------------------------------------------
# pi in Python integers, and the exact reduction

_BITS = 1600


def _atan_inv(n: int, one: int) -> int:
    """atan(1/n) * one by its Taylor series, in integers."""
    total, term, k, sign = 0, one // n, 1, 1
    while term:
        total += sign * (term // k)
        term //= n * n
        k += 2
        sign = -sign
    return total


def _pi_scaled() -> int:
    """floor(pi 2^_BITS) (Machin: pi = 16 atan(1/5) - 4 atan(1/239); 40 guard bits)."""
    one = 1 << (_BITS + 40)
    return (16 * _atan_inv(5, one) - 4 * _atan_inv(239, one)) >> 40


_PI = _pi_scaled()  # pi 2^_BITS
_PIO2 = _PI >> 1  # pi/2 2^_BITS


def _reduce(x: float) -> tuple[int, LD]:
    """(q mod 4, r) with |x| = q pi/2 + r, |r| <= pi/4, r rounded to long double."""
    num, den = abs(float(x)).as_integer_ratio()  # den is a power of two
    n = (num << _BITS) // den  # exact: den <= 2^1074 < 2^_BITS
    q = (2 * n + _PIO2) // (2 * _PIO2)
    rem = n - q * _PIO2  # r 2^_BITS, error below q 2^-_BITS
    shift = max(0, abs(rem).bit_length() - 64)
    r = LD(rem >> shift if rem >= 0 else -((-rem) >> shift)) * LD(2) ** (shift - _BITS)
    return q % 4, r


def reference(name: str, x: np.ndarray) -> np.ndarray:
    """sin/cos/tan of each element (long double), from the exact reduction."""
    out = np.empty(x.shape, LD)
    for i, v in enumerate(x.ravel()):
        q, r = _reduce(float(v))
        s, c = np.sin(r), np.cos(r)
        if name == "sin":
            val = (s, c, -s, -c)[q]
            val = -val if v < 0 else val
        elif name == "cos":
            val = (c, -s, -c, s)[q]
        else:
            val = s / c if q % 2 == 0 else -c / s
            val = -val if v < 0 else val
        out.flat[i] = val
    return out


def ulp_errors(got: np.ndarray, ref: np.ndarray, dtype) -> np.ndarray:
    """|got - ref| in ulps of ref in ``dtype`` (ref is never 0 or tiny here)."""
    fi = np.finfo(dtype)
    _, e = np.frexp(np.abs(ref))
    ulp = np.ldexp(
        LD(1), (np.maximum(e.astype(np.int64) - 1, fi.minexp) - fi.nmant).astype(np.int32)
    )
    err = np.abs(got.astype(LD) - ref) / ulp
    return np.where(np.isfinite(got), err, np.inf)


def _worst(name, x, got, err) -> str:
    i = int(np.argmax(err))
    return f"{name}({x[i]!r}) = {got[i]!r}: {float(err[i]):.3f} ulp"


# ----------------------------------------------------------------------------------------------
# Arguments

# float32 arguments from 2^24 on closest to a multiple of pi/2: searched exhaustively (every
# mantissa of every binade, x 2/pi mod 1 from a three-piece 2/pi in float64, the candidates
# below 2^-26 checked in integers), the hardest is 16367173 2^72 with |x 2/pi - q| = 2^-29.86
# (|r| = 2^-29.2), then one per binade of the next ones
HARD_F32 = np.float32(
    [
        7.729178919452902e28,
        21999384576.0,
        4.638183382783466e25,
        1522788990976.0,
        8.11762663906456e22,
        4.3865578967101227e33,
        42781604.0,
        1.0341291951386403e27,
        1.5282689358063206e17,
    ]
)
# float64: the hardest double for the reduction (Muller, "Elementary Functions", table 11.1:
# 6381956970095103 2^797, |r| = 2^-60.9), powers of two, the largest finite value
HARD_F64 = np.array(
    [6381956970095103.0 * 2.0**797, 2.0**1023, 2.0**600, 2.0**60, 1e22, 1.7976931348623157e308]
)
EXACT = [1.7e7, 1e8, -(2.0**31), 1e30, 2.0**24, 2.0**53, 1e300, -1e200, 3.0e38]


def arguments(dtype, n: int, seed: int = 0) -> np.ndarray:
    """Log-uniform |x| from 2^24 (float32) / 2^53 (float64) to the largest finite value,
    random signs, the exact cases, the hardest arguments and their neighbours (+-2 ulp),
    all with both signs."""
    fi = np.finfo(dtype)
    rng = np.random.default_rng(seed)
    x = np.power(2.0, rng.uniform(fi.nmant + 1, fi.maxexp, n)) * rng.choice([-1.0, 1.0], n)
    hard = np.asarray(HARD_F32 if dtype == np.float32 else HARD_F64, dtype)
    exact = np.asarray([v for v in EXACT if abs(v) <= float(fi.max)], dtype)
    with np.errstate(over="ignore"):  # the top of the range may round to inf: dropped below
        near = [hard]
        for _ in range(2):
            near = [np.nextafter(near[0], -np.inf), *near, np.nextafter(near[-1], np.inf)]
        special = np.concatenate([exact, [fi.max], *near])
        x = np.concatenate([x.astype(dtype), special, -special]).astype(dtype)
    return x[np.isfinite(x) & (np.abs(x) >= 2.0**24)]


# ----------------------------------------------------------------------------------------------
# Tests

BOUNDS = {"sin": 1.0, "cos": 1.0, "tan": 1.5, "sinc": 1.5}  # llvm_math's documented bounds


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_issue15_cpu_float32_large_arguments(name):
    x = arguments(np.float32, 4000)
    got = np.asarray(fg.jit(getattr(fnp, name))(x))
    err = ulp_errors(got, reference(name, x), np.float32)
    assert err.max() <= BOUNDS[name], _worst(name, x, got, err)


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_issue15_cpu_float64_large_arguments(x64, name):
    x = arguments(np.float64, 4000)
    got = np.asarray(fg.jit(getattr(fnp, name))(x))
    err = ulp_errors(got, reference(name, x), np.float64)
    assert err.max() <= BOUNDS[name], _worst(name, x, got, err)


def test_issue15_the_example_of_the_issue():
    """jit(fnp.sin)([1.7e7, 1e8, -2**31, 1e30]) gave NaN; now eager's (numpy's) values."""
    x = np.float32([1.7e7, 1e8, -(2.0**31), 1e30])
    for name in ("sin", "cos", "tan"):
        f = getattr(fnp, name)
        got, eager = np.asarray(fg.jit(f)(x)), np.asarray(f(x))
        np.testing.assert_allclose(got, eager, rtol=3e-7, err_msg=name)
        assert np.isfinite(got).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_issue15_inf_and_nan_give_nan(x64, dtype):
    x = np.array([np.inf, -np.inf, np.nan, -np.nan], dtype)
    for name in ("sin", "cos", "tan", "sinc"):
        assert np.isnan(np.asarray(fg.jit(getattr(fnp, name))(x))).all(), name


def _sinc_reference(x: np.ndarray) -> np.ndarray:
    """sinc as fnp defines it, sin(y) / y with y = pi x rounded in x's dtype (as JAX), exact
    sin(y)."""
    y = (np.asarray(np.pi, x.dtype) * x).astype(x.dtype)
    return reference("sin", y) / y.astype(LD)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_issue15_sinc_large_arguments(x64, dtype):
    x = arguments(dtype, 2000, seed=3) / (4 if dtype == np.float32 else 4.0)
    x = x.astype(dtype)
    got = np.asarray(fg.jit(fnp.sinc)(x))
    err = ulp_errors(got, _sinc_reference(x), dtype)
    assert err.max() <= BOUNDS["sinc"], _worst("sinc", x, got, err)  # sin's and the division's


@settings(max_examples=20)
@given(
    st.lists(
        st.floats(min_value=2.0**24, max_value=float(np.finfo(np.float32).max), width=32),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from(["sin", "cos", "tan"]),
)
def test_issue15_any_float32_above_2_24(values, name):
    x = np.float32(values) * np.float32(-1) ** np.arange(len(values))
    got = np.asarray(fg.jit(getattr(fnp, name))(x))
    err = ulp_errors(got, reference(name, x), np.float32)
    assert err.max() <= BOUNDS[name], _worst(name, x, got, err)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_issue15_large_and_small_lanes_in_one_vector(x64, name, dtype):
    """The vector loop computes every lane by the small-argument kernel and branches to the
    large-argument lanes function when any lane is large (LLVMBuilder.branch_large): each lane
    must still get its own reduction, whatever its neighbours. 67 elements (vector loop,
    vectorised epilogue and scalar remainder), a large lane at every position in turn, then
    alternating and random masks; against the exact reduction."""
    n, rng = 67, np.random.default_rng(5)
    small = rng.uniform(0.1, 100.0, n) * rng.choice([-1.0, 1.0], n)
    large = arguments(dtype, n, seed=7)[:n]
    masks = [np.arange(n) == i for i in range(n)]
    masks += [np.arange(n) % 2 == 0, np.arange(n) % 3 == 1, rng.random(n) < 0.2, np.ones(n, bool)]
    f = fg.jit(getattr(fnp, name))
    for m in masks:
        x = np.where(m, large, small).astype(dtype)
        got = np.asarray(f(x))
        err = ulp_errors(got, reference(name, x), dtype)
        assert err.max() <= BOUNDS[name], _worst(name, x, got, err)


def test_large_arguments_inside_a_fused_kernel():
    """sin and cos among other math in one kernel: the renderer emits the branching functions
    first in the loop body (llvm.py) and _branch_large tests and calls before the small-argument
    path; the other outputs are unchanged (the same bits as computed without sin)."""
    rng = np.random.default_rng(11)
    small = rng.uniform(-6.0, 6.0, 300).astype(np.float32)
    x = np.where(rng.random(300) < 0.1, arguments(np.float32, 300, seed=2)[:300], small)
    x = x.astype(np.float32)

    def rest(x):
        return fnp.tanh(x) * 0.5 + fnp.exp(-x * x)

    got_rest, got_sin, got_cos = (
        np.asarray(v) for v in fg.jit(lambda x: (rest(x), fnp.sin(x), fnp.cos(x) * 2.0))(x)
    )
    np.testing.assert_array_equal(got_rest, np.asarray(fg.jit(rest)(x)))
    assert ulp_errors(got_sin, reference("sin", x), np.float32).max() <= BOUNDS["sin"]
    assert ulp_errors(got_cos / 2, reference("cos", x), np.float32).max() <= BOUNDS["cos"]


def test_large_argument_that_is_the_same_everywhere():
    """sin of one value broadcast over the loop: every call passes the same constant (LLVM
    may not specialise the large-argument function: its vector variants must keep fitting)."""
    x = np.arange(40, dtype=np.float32)

    def plus_sin_of(v):
        return fg.jit(lambda x: x + fnp.sin(fnp.full_like(x, v)))

    for v in (np.float32(3e30), np.float32(0.5)):
        got = np.asarray(plus_sin_of(v)(x))
        want = x + np.float32(reference("sin", np.array([v]))[0])
        np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-7)


def test_large_argument_functions_are_compiled_once_per_process():
    """Modules declare sin/cos/tan's large-argument functions; each is compiled once, in a
    library of its own (llvm_math.ensure_large_library), and every module calls that one."""
    from fungrad.lowering.cpu import llvm

    x = np.float32([1e30, 0.5, -3e9])
    for f in (fnp.cos, lambda x: fnp.cos(x) * 2):
        exe = fg.jit(f).lower(x).compile()._exe
        text = "\n".join(p.ir_text for p in llvm.render(exe.program))
        assert "declare float @fg_cos_large_f32(" in text
        assert "define internal float @fg_cos_large_f32(" not in text
        got = np.asarray(fg.jit(f)(x)) / (1 if f is fnp.cos else 2)
        assert ulp_errors(got, reference("cos", x), np.float32).max() <= BOUNDS["cos"]
    assert "fg_cos_large_f32" in llvm_math._large_libraries


def test_issue15_two_opi_words_are_2_over_pi():
    """trig's tables of 2/pi's bits (after two zero bits), derived again from pi."""
    n = 1300
    bits = bin((1 << (n + 1 + _BITS)) // _PI)[2:]  # 2^n 2/pi: n bits, the leading one first
    string = "00" + bits.zfill(n)
    for width, words in ((24, trig.TWO_OPI_24), (64, trig.TWO_OPI_64)):
        for i, w in enumerate(words):
            assert w == int(string[width * i : width * (i + 1)], 2), (width, i)


# ----------------------------------------------------------------------------------------------
# GPU (float32 only)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("name", ["sin", "cos", "tan", "sinc"])
def test_issue15_gpu_float32_large_arguments(name):
    x = arguments(np.float32, 4000, seed=4)
    if name == "sinc":
        x = (x / 4).astype(np.float32)
    got = np.asarray(fg.jit(getattr(fnp, name), backend="gpu")(x))
    ref = _sinc_reference(x) if name == "sinc" else reference(name, x)
    err = ulp_errors(got, ref, np.float32)
    assert err.max() <= BOUNDS[name], _worst(name, x, got, err)
