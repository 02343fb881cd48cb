"""Numerical building blocks shared by the math algorithms: multi-part constants, error-free
transformations, polynomial evaluation, clamping, scaling by powers of two and the IEEE
special-value selects. Written against the builder interface (``builder``), so they render
on every target.
"""

from __future__ import annotations

from collections.abc import Iterable

from fungrad.lowering.math.builder import F32, F64, Builder, FloatType, Value

__all__ = [
    "CONSTANTS",
    "clamp",
    "clamp_int",
    "fast_two_sum",
    "finite_only",
    "horner",
    "ldexp_two_step",
    "nan_in_nan_out",
    "pow2",
    "signbit",
    "to_int",
    "two_sum",
]

# Constants as sums of 2 (or 4) numbers of each float type, each part the remainder of the
# ones before rounded to nearest: c[0] + c[1] (+ ...) carries ~2x (4x) the type's precision.
# Written out rather than computed with ``decimal`` at import (importing and running it took ~9 ms
# of every first jit call); tests/test_llvm_math_constants.py derives them again from 90-digit
# values of pi, ln 2 and ln 10 and checks every part.
CONSTANTS: dict[FloatType, dict[str, tuple[float, ...]]] = {
    F32: {
        "ln2": (0.6931471824645996, -1.9046542121259336e-09),
        "log2e": (1.4426950216293335, 1.925963033500011e-08),
        "log10_2": (0.3010300099849701, -1.432098883924482e-08),
        "log10e": (0.4342944920063019, -1.0103049952192578e-08),
        "pio2_4": (
            1.5707963705062866,
            -4.371138828673793e-08,
            -1.7151245100058819e-15,
            1.056299898220315e-23,
        ),
        "pi": (3.1415927410125732, -8.742277657347586e-08),
        "pio2": (1.5707963705062866, -4.371138828673793e-08),
        "pio4": (0.7853981852531433, -2.1855694143368964e-08),
        "3pio4": (2.356194496154785, -5.962440319251527e-09),
        "2/pi": (0.6366197466850281, 2.5682552973194106e-08),
        "2/3": (0.6666666865348816, -1.9868215517249155e-08),
        "2/5": (0.4000000059604645, -5.9604645663569045e-09),
    },
    F64: {
        "ln2": (0.6931471805599453, 2.3190468138462996e-17),
        "log2e": (1.4426950408889634, 2.0355273740931033e-17),
        "log10_2": (0.3010299956639812, -2.8037281277851704e-18),
        "log10e": (0.4342944819032518, 1.098319650216765e-17),
        "pio2_4": (
            1.5707963267948966,
            6.123233995736766e-17,
            -1.4973849048591698e-33,
            5.562271104316826e-50,
        ),
        "pi": (3.141592653589793, 1.2246467991473532e-16),
        "pio2": (1.5707963267948966, 6.123233995736766e-17),
        "pio4": (0.7853981633974483, 3.061616997868383e-17),
        "3pio4": (2.356194490192345, 9.184850993605148e-17),
        "2/pi": (0.6366197723675814, -3.935735335036497e-17),
        "2/3": (0.6666666666666666, 3.700743415417188e-17),
        "2/5": (0.4, -2.2204460492503132e-17),
    },
}


# ----------------------------------------------------------------------------------------------
# Helpers


def horner(b: Builder, v: Value, coeffs: Iterable[float]) -> Value:
    """Polynomial with ``coeffs`` listed from the highest degree down, evaluated with fma."""
    coeffs = list(coeffs)
    p = b.lift(coeffs[0], v.ty)
    for c in coeffs[1:]:
        p = b.fma(p, v, c)
    return p


def _exact(a, c):
    """(a, c) as operands of a two-sum (``Builder.exact``: hidden from a GPU compiler that
    contracts or reassociates), one of them at least a Value."""
    b = a.b if isinstance(a, Value) else c.b
    return b.exact(a), b.exact(c), b


def two_sum(a, c) -> tuple[Value, Value]:
    """s + e == a + c exactly, s = fl(a + c) (Knuth, any magnitudes)."""
    a, c, b = _exact(a, c)
    s = b.exact(a + c)
    bb = b.exact(s - a)
    return s, b.exact(a - b.exact(s - bb)) + (c - bb)


def fast_two_sum(a, c) -> tuple[Value, Value]:
    """s + e == a + c exactly when |a| >= |c| (Dekker)."""
    a, c, b = _exact(a, c)
    s = b.exact(a + c)
    return s, c - b.exact(s - a)


def clamp(b: Builder, x: Value, lo: float, hi: float) -> Value:
    """x limited to [lo, hi]; NaN becomes lo (callers restore NaN at the end). Written as
    max-then-min selects that x86 matches to one maxps and one minps."""
    t = b.select(b.cmp("ogt", x, lo), x, lo)
    return b.select(b.cmp("olt", t, hi), t, hi)


def to_int(b: Builder, v: Value, clamped: bool = False) -> Value:
    """fptosi of an integral float; unless the caller ``clamped`` it, large values and NaN
    map to 0 first (fptosi of those is poison)."""
    if not clamped:
        v = b.select(b.cmp("olt", b.fabs(v), 2.0**30), v, 0.0)
    return b.cast("fptosi", v, v.ft.int_ir)


def pow2(b: Builder, k: Value, ft: FloatType) -> Value:
    """2**k for an integer k in the normal exponent range."""
    return b.cast("bitcast", (k + ft.bias) << ft.mant, ft.ir)


def ldexp_two_step(b: Builder, y: Value, k: Value) -> Value:
    k1 = k >> 1
    return y * pow2(b, k1, y.ft) * pow2(b, k - k1, y.ft)


def signbit(b: Builder, x: Value) -> Value:
    return b.cmp("slt", b.cast("bitcast", x, x.ft.int_ir), 0)


def nan_in_nan_out(b: Builder, x: Value, r: Value) -> Value:
    return b.select(b.cmp("uno", x, x), x, r)


def clamp_int(b: Builder, v: Value, lo: int, hi: int) -> Value:
    v = b.select(b.cmp("slt", v, lo), lo, v)
    return b.select(b.cmp("sgt", v, hi), hi, v)


def finite_only(b: Builder, x: Value, r: Value) -> Value:
    """NaN where x is inf (or NaN): sin, cos and tan of inf are NaN."""
    return b.select(b.cmp("olt", b.fabs(x), float("inf")), r, float("nan"))
