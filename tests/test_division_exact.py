"""float32 division by a loop-invariant divisor on the CPU (llvm_math.DIVIDE): Markstein's
correction instead of a divide per element, with a per-vector test that sends every element it
cannot vouch for (tiny, subnormal, zero, huge or special quotients, divisors out of range) to
the exact fdiv. The result must be numpy's (IEEE) quotient bit for bit: jit and eager agree,
whichever path an element took (issue 15: an ``arcp`` multiply by 1/y was up to 1 ulp off).

The tests compare bit patterns (NaN with NaN) on random bit patterns, quotients next to the
rounding boundaries of float32 (the hard cases for any division scheme), quotients near the
thresholds of the test, every special value of x and y, rows with their own divisor, the
vectorised loop, its scalar remainder and the unoptimised glue path.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering.cpu import llvm
from fungrad.lowering.math import llvm as llvm_math

pytestmark = pytest.mark.filterwarnings("ignore::fungrad.transforms.jit_cache.RetraceWarning")

_div = fg.jit(lambda x, y: x / y)
_div_rows = fg.jit(lambda x, s: x / s[:, None])


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32)


def _assert_same_bits(got, want, what: str = "") -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == np.float32
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        i = np.flatnonzero(~same)[:4]
        raise AssertionError(
            f"{what}{(~same).sum()} of {same.size} quotients differ, e.g. "
            f"got {got.ravel()[i]} want {want.ravel()[i]}"
        )


def _numpy_div(x, y):
    with np.errstate(all="ignore"):
        return np.float32(x) / np.float32(y) if np.ndim(x) == 0 else x / np.float32(y)


def _random_bits(rng, n):
    return _f32(rng.integers(0, 1 << 32, n, dtype=np.uint64))


def _near_midpoints(rng, y, n):
    """x with x / y within about an ulp of a float32 rounding boundary: q + ulp(q)/2 times y,
    rounded to float32, and its neighbours."""
    qb = rng.integers(0x00800000, 0x7F7FFFFF, n, dtype=np.uint64)
    q = _f32(qb).astype(np.float64)
    m = q + (_f32(qb + 1).astype(np.float64) - q) / 2
    with np.errstate(all="ignore"):
        x = (m * np.float64(y)).astype(np.float32)
    x = x[np.isfinite(x)].view(np.uint32).astype(np.int64)
    return _f32(np.concatenate([x + d for d in (-1, 0, 1)]) & 0xFFFFFFFF)


#: divisors: ordinary, at the edges of the range the fast path accepts (2^-100 <= |y| <
#: 2^126), mantissas of all ones (1/y rounds hardest), subnormal, zero, inf, NaN
DIVISORS = [
    3.0,
    -0.1,
    7.25,
    1024.0,
    2.0**-100,
    2.0**-101,
    -(2.0**-99),
    2.0**125,
    2.0**126,
    1.9999999 * 2.0**125,
    float(_f32(0x3FFFFFFF)),
    float(_f32(0x3F7FFFFF)),
    float(_f32(0xBF800001)),
    float(_f32(0x00800000)),
    float(_f32(0x7F7FFFFF)),
    1e-40,
    -1e-45,
    0.0,
    -0.0,
    np.inf,
    -np.inf,
    np.nan,
]


@pytest.mark.parametrize("y", DIVISORS)
def test_division_matches_numpy_bit_for_bit(y):
    rng = np.random.default_rng(abs(hash(repr(y))) % 2**32)
    y = np.float32(y)
    x = _random_bits(rng, 40_000)
    _assert_same_bits(_div(x, y), _numpy_div(x, y), f"random x / {y!r}: ")
    if np.isfinite(y) and y != 0:
        x = _near_midpoints(rng, y, 20_000)
        _assert_same_bits(_div(x, y), _numpy_div(x, y), f"near midpoints / {y!r}: ")


def test_quotients_at_the_thresholds_of_the_fast_path():
    """Around the smallest quotient the fast path accepts for each divisor exponent
    (max(2^(-101 - e(y)), 2^-124)), the subnormal boundary 2^-126 and overflow."""
    rng = np.random.default_rng(7)
    for ey in (-100, -60, -23, -1, 0, 1, 22, 23, 24, 60, 125):
        y = np.float32(np.ldexp(1 + rng.random(), ey))
        xs = []
        for eq in (-101 - ey, -102 - ey, -103 - ey, -124, -125, -126, -127, -149, 127, 128):
            q = np.ldexp(1 + rng.random(2000), eq).astype(np.float64)
            with np.errstate(all="ignore"):
                xs.append((q * np.float64(y)).astype(np.float32))
        x = np.concatenate(xs)
        x = np.concatenate([x, -x, np.nextafter(x, np.float32(np.inf))])
        _assert_same_bits(_div(x, y), _numpy_div(x, y), f"e(y) = {ey}: ")


def test_special_values_and_signed_zeros():
    specials = np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            -np.nan,
            1e-45,
            -1e-45,
            1e-40,
            1.17549435e-38,
            3.4028235e38,
            -3.4028235e38,
            1.0,
            -1.0,
        ],
        np.float32,
    )
    for y in specials:
        _assert_same_bits(_div(specials, y), _numpy_div(specials, y), f"specials / {y!r}: ")
    got = np.asarray(_div(np.array([-0.0, 0.0], np.float32), np.float32(5)))
    assert list(np.signbit(got)) == [True, False]
    got = np.asarray(_div(np.array([-0.0, 0.0], np.float32), np.float32(-5)))
    assert list(np.signbit(got)) == [False, True]


@pytest.mark.parametrize("n", [0, 1, 15, 17, 1000, 4099])
def test_every_length_vector_body_remainder_and_glue(n):
    """Short arrays run in unoptimised glue (the scalar function), longer ones through the
    vectorised loop and its scalar remainder."""
    rng = np.random.default_rng(n)
    x = _random_bits(rng, n)
    for y in (np.float32(3.0), np.float32(1e-30), np.float32(0.0)):
        _assert_same_bits(_div(x, y), _numpy_div(x, y), f"n = {n}, y = {y!r}: ")
    _assert_same_bits(_div(np.float32(1), np.float32(3)), np.float32(1) / np.float32(3))


def test_each_row_has_its_own_divisor():
    """x / s[:, None]: the divisor is invariant in the inner loop only (softmax's shape)."""
    rng = np.random.default_rng(3)
    s = np.concatenate(
        [
            rng.standard_normal(60).astype(np.float32) * 50,
            np.array([0, -0.0, np.inf, np.nan, 1e-40, 2.0**-101, 2.0**126, 1e-30], np.float32),
        ]
    )
    x = _random_bits(rng, (s.size, 257))
    x[:30] = rng.standard_normal((30, 257)).astype(np.float32)
    with np.errstate(all="ignore"):
        want = x / s[:, None]
    _assert_same_bits(_div_rows(x, s), want)


def test_jit_matches_eager_bit_for_bit():
    """softmax's division (its numerator and denominator given): jit as eager."""
    rng = np.random.default_rng(5)
    e = np.exp(rng.standard_normal((37, 300)) * 4).astype(np.float32)
    e[3, :] = 0.0
    e[5, 9] = np.nan
    s = e.sum(axis=-1)
    f = lambda e, s: e / s[:, None]  # noqa: E731
    _assert_same_bits(fg.jit(f)(e, s), np.asarray(f(fnp.asarray(e), fnp.asarray(s))))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=64, max_size=64),
    st.floats(width=32, allow_nan=True, allow_infinity=True),
)
def test_hypothesis_any_floats(xs, y):
    x = np.array(xs, np.float32)
    _assert_same_bits(_div(x, np.float32(y)), _numpy_div(x, np.float32(y)))


def test_constant_divisors_and_means():
    """A constant divisor (x / 7, a mean's / n) keeps plain fdiv; exact either way."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 5000)).astype(np.float32)
    _assert_same_bits(fg.jit(lambda x: x / 7.0)(x), x / np.float32(7))
    _assert_same_bits(fg.jit(lambda x: x / 1e-42)(x), _numpy_div(x, np.float32(1e-42)))
    got = np.asarray(fg.jit(lambda x: fnp.var(x, axis=1))(x), np.float64)
    np.testing.assert_allclose(got, x.astype(np.float64).var(axis=1), rtol=2e-6)


def test_the_fast_path_is_used_for_an_invariant_float32_divisor():
    """The renderer calls llvm_math.DIVIDE for x / (row value) and plain fdiv when the divisor
    changes with the element."""

    def ir(f, *args):
        exe = fg.jit(f).lower(*args).compile()._exe
        return "\n".join(p.ir_text for p in llvm.render(exe.program))

    x = np.ones((64, 512), np.float32)
    assert f"call float @{llvm_math.DIVIDE}(" in ir(
        lambda x: x / fnp.sum(x, axis=-1, keepdims=True), x
    )
    text = ir(lambda x: x / (x + 1), x)
    assert llvm_math.DIVIDE not in text and "fdiv float" in text
