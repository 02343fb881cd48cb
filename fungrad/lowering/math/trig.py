"""The trigonometric functions, written once against the math builder (``builder``): sin, cos
and tan (Cody-Waite reduction below 2^24 / 2^53, Payne-Hanek above), atan, atan2, asin, acos.
Accuracy and edge cases: ``functions``.

On the CPU, sin, cos and tan test for large arguments and branch to a function of their own
(``Builder.branch_large``, LLVM only; :data:`LARGE_FUNCTIONS`); the GPU has float32
formulations of them (``wgsl``) built from :func:`large_pio2_f32` and the kernels here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from fungrad.lowering.math.builder import F32, F64, Builder, FloatType, Value
from fungrad.lowering.math.numeric import (
    CONSTANTS,
    clamp_int,
    fast_two_sum,
    finite_only,
    horner,
    signbit,
    to_int,
    two_sum,
)

__all__ = [
    "FUNCTIONS",
    "LARGE_FUNCTIONS",
    "TAN_P32",
    "TWO_OPI_24",
    "TWO_OPI_64",
    "TWO_OPI_TABLE",
    "cos_kernel",
    "large_pio2_f32",
    "SHORT_LIMIT",
    "sin_cos_gpu_f32",
    "sin_kernel",
]


# ----------------------------------------------------------------------------------------------
# sin/cos/tan: q = nearest integer to |x| 2/pi, r = |x| - q pi/2 with pi/2 in four parts (the
# first product exact under fma, the next two recovered by two_prod), kept as rh + rl; kernels
# are fdlibm's k_sin/k_cos (float64), Cephes sinf/cosf/tanf (float32) and Cephes tan (float64).

_SIN_P = {
    F32: (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1),
    F64: (
        1.58969099521155010221e-10,
        -2.50507602534068634195e-08,
        2.75573137070700676789e-06,
        -1.98412698298579493134e-04,
        8.33333333332248946124e-03,
        -1.66666666666666324348e-01,
    ),
}
_COS_P = {
    F32: (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2),
    F64: (
        -1.13596475577881948265e-11,
        2.08757232129817482790e-09,
        -2.75573143513906633035e-07,
        2.48015872894767294178e-05,
        -1.38888888888741095749e-03,
        4.16666666666666019037e-02,
    ),
}
TAN_P32 = (
    9.38540185543e-3,
    3.11992232697e-3,
    2.44301354525e-2,
    5.34112807005e-2,
    1.33387994085e-1,
    3.33331568548e-1,
)
_TAN_PQ64 = (
    (-1.30936939181383777646e4, 1.15351664838587416140e6, -1.79565251976484877988e7),
    (
        1.0,
        1.36812963470692954678e4,
        -1.32089234440210967447e6,
        2.50083801823357915839e7,
        -5.38695755929454629881e7,
    ),
)


def _reduce_pio2(b: Builder, a: Value) -> tuple[Value, Value, Value]:
    """(rh, rl, q mod 4) with a = q pi/2 + rh + rl, |rh| <~ pi/4, for a = |x| >= 0."""
    c = CONSTANTS[a.ft]
    p1, p2, p3, p4 = c["pio2_4"]
    # q = nearest integer to a 2/pi: rint of the rounded product, then +-1 from the exact rest
    # (the product's rounding error exceeds 1/2 ulp of q once a is large)
    ph, pl = b.two_prod(a, c["2/pi"][0])
    q = b.rint(ph)
    frac = (ph - q) + (pl + a * c["2/pi"][1])
    q = q + b.select(
        b.cmp("ogt", frac, 0.5), 1.0, b.select(b.cmp("olt", frac, -0.5), -1.0, 0.0, a.ty)
    )
    t1 = b.sub_multiple(q, p1, a, a.ft.mant + 1)  # a short multiple of ulp(p1)
    m2, m2e = b.two_prod(q, p2)
    s, e = two_sum(t1, -m2)
    m3, m3e = b.two_prod(q, p3)
    rh, rl = fast_two_sum(s, ((e - m2e) - m3) - (m3e + q * p4))
    quad = to_int(b, q - 4.0 * b.rint(q * 0.25)) & 3
    return rh, rl, quad


# Large arguments: Payne-Hanek. a = m 2^e with an integer mantissa m, and a (2/pi) mod 4 is
# m (2^e 2/pi mod 4): only the bits of 2/pi from weight 2^-(e - 1) down matter (the higher
# ones give multiples of 4), as many as the fraction's precision needs. _TWO_OPI_BITS is the
# string S of 2/pi's bits after two zero bits (2/pi = sum S[j] 2^-(j-1)), so 2^t 2/pi mod 4
# is the window S[t], S[t + 1], ... with S[t] weighing 2; words hold 24 (float32) or 64
# (float64) bits of S, most significant first. tests/test_trig_large_args.py derives them
# again from pi.
TWO_OPI_24 = (
    0x28BE60,
    0xDB9391,
    0x054A7F,
    0x09D5F4,
    0x7D4D37,
    0x7036D8,
    0xA5664F,
    0x10E410,
    0x7F9458,
)
TWO_OPI_64 = (
    0x28BE60DB9391054A,
    0x7F09D5F47D4D3770,
    0x36D8A5664F10E410,
    0x7F9458EAF7AEF158,
    0x6DC91B8E909374B8,
    0x01924BBA82746487,
    0x3F877AC72C4A69CF,
    0xBA208D7D4BAED121,
    0x3A671C09AD17DF90,
    0x4E64758E60D4CE7D,
    0x272117E2EF7E4A0E,
    0xC7FE25FFF7816603,
    0xFBCBC462D6829B47,
    0xDB4D9FB3C9F2C26D,
    0xD3D18FD9A797FA8B,
    0x5D49EEB1FAF97C5E,
    0xCF41CE7DE294A4BA,
    0x9AFED7EC47E35742,
    0x1580CC11BF1EDAEA,
    0xFC33EF0826BD0D87,
)
TWO_OPI_TABLE = "fg_two_opi_bits"  # the float64 words as an IR constant (a pseudo-function)


def _large_frac_f32(b: Builder, a: Value, t: int, offset: int = 0):
    """Payne-Hanek for float32 ``a`` >= 2^24, in 32-bit integer operations only (the GPU has
    no wider ones): (q, A, B, C) with a 2^t (2/pi) - offset/2^22 = q + F, q an i32 integer
    (only q mod 4 is right), F = A 2^-22 + B 2^-46 + C 2^-70 in [-1/2, 1/2] to about 2^-57
    (A signed, |A| <= 2^21; 0 <= B, C < 2^24). ``t`` is 0 (reduction by pi/2) or -1 (by pi).
    The float32 closest to a multiple of pi/2 from 2^24 on, 16367173 2^72, has |F| = 2^-29.9,
    so r = F pi/2 keeps a relative error below 2^-27 everywhere.

    a = m 2^e (m the 24-bit mantissa, 1 <= e <= 104), and m times the 96-bit window
    W = S[e + t ...] of 2/pi's bits (W 2^-94 = 2^(e + t) 2/pi mod 4 to 2^-94) is computed in
    columns of 12-bit digits: m = mh 2^12 + ml, W = sum L_c 2^(12 c), column c (weight
    2^(12 c - 94)) = ml L_c + mh L_(c-1) < 2^25, carried upwards from c = 2; columns 0 and 1
    (below 2^-57; every statement costs on llvmpipe) are left out. The digits' top 24 bits
    mod 2^24 are (q + F) mod 4 in units of 2^-22.
    Every intermediate is below 2^31 or is masked to its low bits (the lanes that take the
    small-argument path compute garbage in range)."""
    ai = b.cast("bitcast", a, "i32")
    o = (ai >> 23) + (t - 150)  # the window starts at S[o]; o <= 105 for every a >= 0
    o = b.select(b.cmp("slt", o, 0), 0, o)  # (lanes below 2^24 compute garbage in range)
    d = (o * 2731) >> 16  # o // 24 for 0 <= o < 2000
    s = o - d * 24
    at = [b.cmp("eq", d, k) for k in range(1, 5)]
    words = []  # S's 24-bit words d, d + 1, ..., d + 4
    for i in range(5):
        w = b.lift(TWO_OPI_24[i], "i32")
        for k in range(1, 5):
            w = b.select(at[k - 1], TWO_OPI_24[i + k], w)
        words.append(w)
    limbs = []  # L_7 (W's top 12 bits) down to L_1
    rest = 24 - s
    for i in range(4):  # the window's 24-bit words
        w = ((words[i] << s) & 0xFFFFFF) | (words[i + 1] >> rest)
        limbs += [w >> 12] if i == 3 else [w >> 12, w & 0xFFF]
    L = [None, *limbs[::-1]]
    m = (ai & 0x7FFFFF) | 0x800000
    mh, ml = m >> 12, m & 0xFFF
    col = {c: ml * L[c] + mh * L[c - 1] for c in range(2, 8)}
    digit = {}
    for c in range(2, 7):
        digit[c] = col[c] & 0xFFF
        col[c + 1] = col[c + 1] + (col[c] >> 12)
    top = (col[7] << 12) + digit[6]
    top = (top - offset if offset else top) & 0xFFFFFF  # (q + F) mod 4, units 2^-22
    q = (top + (1 << 21)) >> 22
    return (q, top - (q << 22), (digit[5] << 12) | digit[4], (digit[3] << 12) | digit[2])


def large_pio2_f32(b: Builder, a: Value) -> tuple[Value, Value, Value]:
    """(rh, rl, q) with a = q pi/2 + rh + rl (rh + rl to about 2^-48 relative), |rh| <= pi/4
    and q an i32 whose low two bits are right, for float32 a >= 2^24, in float32 arithmetic
    (the GPU's): F of :func:`_large_frac_f32` as a double-word fh + fl (A 2^-22 + B 2^-46 is
    exact by a fast two-sum: |A| >= 1 or A = 0), times pi/2 by an exact product.

    The caller selects these values only from 2^24 on, so a builder that can branch
    (``WGSLBuilder.rare``, for a real GPU) computes them behind ``if (a >= 2^24)``: about 140
    integer and float operations that a warp then skips unless one of its lanes has such an
    argument; elsewhere (LLVM, llvmpipe) they are straight-line code."""
    rare = getattr(b, "rare", None)  # (the WGSL builder's; LLVM branches in branch_large)
    if rare is None:
        return _large_pio2_f32_body(b, a)
    return rare(lambda: b.cmp("oge", a, 2.0**24), lambda: _large_pio2_f32_body(b, a))


def _large_pio2_f32_body(b: Builder, a: Value) -> tuple[Value, Value, Value]:
    q, ia, ib, ic = _large_frac_f32(b, a, 0)
    fa = b.cast("sitofp", ia, "float") * 2.0**-22
    fb = b.cast("sitofp", ib, "float") * 2.0**-46
    fh, fl = fast_two_sum(fa, fb)
    fl = fl + b.cast("sitofp", ic, "float") * 2.0**-70
    p1, p2 = CONSTANTS[F32]["pio2"]
    ph, pe = b.two_prod(fh, p1)
    rh, rl = fast_two_sum(ph, pe + b.keep(fh * p2 + fl * p1))
    return rh, rl, q


def _large_pio2_f64(b: Builder, a: Value) -> tuple[Value, Value, Value]:
    """(rh, rl, q mod 4) with a = q pi/2 + rh + rl, |rh| <= pi/4, for float64 a >= 2^53
    (valid from 2^52): a = m 2^e with m < 2^53 and 0 <= e <= 971; the 192-bit window
    W = S[e ...] (W 2^-190 = 2^e 2/pi mod 4 to 2^-190) from three 64-bit words of the table,
    m W mod 2^192 by 64 x 64 -> 128-bit products (its low word left out), so the top 128 bits
    hi:lo are (q + F) mod 4 in units of 2^-126, F to about 2^-135 (at least 64 significant
    bits where |F| >= 2^-62; the float64 closest to a multiple of pi/2 has |F| = 2^-61.5). F
    becomes a double-word (three exact conversions and a two-sum), times pi/2 exactly."""
    i64, i128 = "i64", "i128"
    ai = b.cast("bitcast", a, i64)
    o = clamp_int(b, (ai >> 52) - 1075, 0, 972)
    d, s = o >> 6, o & 63
    v = [b.load_word(TWO_OPI_TABLE, TWO_OPI_64, d + i) for i in range(4)]
    z = [(v[i] << s) | b.lshr(b.lshr(v[i + 1], 1), 63 - s) for i in range(3)]
    m = (ai & ((1 << 52) - 1)) | (1 << 52)
    m128 = b.cast("zext", m, i128)
    p1 = m128 * b.cast("zext", z[1], i128)
    p2 = m128 * b.cast("zext", z[2], i128)
    t = p1 + b.lshr(p2, 64)
    lo = b.cast("trunc", t, i64)
    hi = b.cast("trunc", b.lshr(t, 64), i64) + m * z[0]
    q = b.lshr(hi + (1 << 61), 62)
    f = hi - (q << 62)  # F = f 2^-62 + lo 2^-126, -2^61 <= f < 2^61
    x1 = b.cast("sitofp", f, "double")
    e1 = f - b.cast("fptosi", x1, i64)  # what x1 rounded off, |e1| <= 2^8
    x2 = b.cast("sitofp", (e1 << 52) + b.lshr(lo, 12), "double") * 2.0**-114
    x3 = b.cast("uitofp", lo & 0xFFF, "double") * 2.0**-126
    fh, fl = two_sum(x1 * 2.0**-62, x2)
    fl = fl + x3
    c1, c2 = CONSTANTS[F64]["pio2"]
    ph, pe = b.two_prod(fh, c1)
    rh, rl = fast_two_sum(ph, pe + (fh * c2 + fl * c1))
    return rh, rl, q


def sin_kernel(b: Builder, r: Value, rl: Value) -> Value:
    z = r * r
    v = z * r
    if r.ft is F32:
        return r + b.keep(v * horner(b, z, _SIN_P[F32]) + rl * (1.0 - 0.5 * z))
    p = _SIN_P[F64]
    rr = horner(b, z, p[:-1])
    return r - ((z * (0.5 * rl - v * rr) - rl) - v * p[-1])  # fdlibm __sin(x, y, 1)


def cos_kernel(b: Builder, r: Value, rl: Value) -> Value:
    z = r * r
    hz = 0.5 * z
    w = 1.0 - hz
    return w + b.keep(((1.0 - w) - hz) + (z * z * horner(b, z, _COS_P[r.ft]) - r * rl))


# sin(r) for |r| <= pi/2 by one odd minimax polynomial (relative error 6e-9, 0.1 ulp of
# float32), rounded once: at most 0.61 ulp in all. sin(x) = (-1)^q sin(r); cos(x) =
# (-1)^(q+1) sin(r) with half-integer q. No cos kernel, no quadrant selects, no double-word
# tails: 3.1 instructions per element where the float32 reduction took 5.1.
_SIN_PI_P32 = (
    2.6055898577500727e-06,
    -0.00019809521275607992,
    0.008333065203243754,
    -0.16666659513002852,
)


def _sin_pi_f32(b: Builder, x: Value, q: Value, r: Value, cos: bool) -> Value:
    """float32 sin(x) (or cos(x)) from |x| = q pi + r (q + 1/2 for cos; q an i32 of the
    right parity, r float64 with |r| <= pi/2)."""
    z = r * r
    s = b.cast("fptrunc", b.fma(r * z, horner(b, z, _SIN_PI_P32), r), "float")
    flip = q << 31  # (-1)^q in the sign bit
    if cos:
        flip = flip ^ -(2**31)
    else:  # sin is odd
        flip = flip ^ (b.cast("bitcast", x, "i32") & -(2**31))
    return b.cast("bitcast", b.cast("bitcast", s, "i32") ^ flip, "float")


def _sin_cos_f32(b: Builder, x: Value, cos: bool) -> Value:
    """float32 sin(x) or cos(x) through float64 (see above); from 2^24 on, inf and NaN by
    :func:`_sin_cos_f32_large`."""
    ad = b.cast("fpext", b.fabs(x), "double")
    pi = CONSTANTS[F64]["pi"]
    q = b.rint(ad * (1.0 / math.pi) - (0.5 if cos else 0.0))
    m = q + 0.5 if cos else q  # exact
    r = b.fma_exact(-m, pi[1], b.fma_exact(-m, pi[0], ad))
    qi = b.cast("fptosi", q, "i32")  # poison from 2^31 on, where the branch takes over
    return b.branch_large(x, _sin_pi_f32(b, x, qi, r, cos), "cos" if cos else "sin")


def _sin_cos_f32_large(b: Builder, x: Value, cos: bool) -> Value:
    """float32 sin(x) or cos(x) for |x| >= 2^24: :func:`_large_frac_f32` by pi (t = -1),
    F = A 2^-22 + B 2^-46 (exact in float64) + C 2^-70, r = F pi; NaN for inf and NaN."""
    q, ia, ib, ic = _large_frac_f32(b, b.fabs(x), -1, 1 << 21 if cos else 0)
    f = b.fma(b.cast("sitofp", ib, "double"), 2.0**-46, b.cast("sitofp", ia, "double") * 2.0**-22)
    f = b.fma(b.cast("sitofp", ic, "double"), 2.0**-70, f)
    return finite_only(b, x, _sin_pi_f32(b, x, q, f * math.pi, cos))


def _reduce_large(b: Builder, a: Value) -> tuple[Value, Value, Value]:
    """:func:`large_pio2_f32` / :func:`_large_pio2_f64` with the quadrant in _reduce_pio2's
    integer type."""
    rh, rl, q = (_large_pio2_f64 if a.ft is F64 else large_pio2_f32)(b, a)
    return rh, rl, q & 3


def _sin_cos_f64(b: Builder, x: Value, rh: Value, rl: Value, quad: Value, cos: bool) -> Value:
    """float64 sin(x) or cos(x) from |x| = quad pi/2 + rh + rl (mod 2 pi)."""
    s, c = sin_kernel(b, rh, rl), cos_kernel(b, rh, rl)
    if cos:
        r = b.select(b.cmp("ne", quad & 1, 0), s, c)
        return b.select(b.cmp("ne", (quad + 1) & 2, 0), -r, r)
    r = b.select(b.cmp("ne", quad & 1, 0), c, s)
    r = b.select(b.cmp("ne", quad & 2, 0), -r, r)
    return b.select(signbit(b, x), -r, r)  # sin is odd; sin(-0) = -0


def _sin(b: Builder, x: Value) -> Value:
    if x.ft is F32:
        return _sin_cos_f32(b, x, cos=False)
    return b.branch_large(x, _sin_cos_f64(b, x, *_reduce_pio2(b, b.fabs(x)), False), "sin")


def _cos(b: Builder, x: Value) -> Value:
    if x.ft is F32:
        return _sin_cos_f32(b, x, cos=True)
    return b.branch_large(x, _sin_cos_f64(b, x, *_reduce_pio2(b, b.fabs(x)), True), "cos")


def _sin_large(b: Builder, x: Value) -> Value:
    if x.ft is F32:
        return _sin_cos_f32_large(b, x, cos=False)
    return finite_only(b, x, _sin_cos_f64(b, x, *_reduce_large(b, b.fabs(x)), False))


def _cos_large(b: Builder, x: Value) -> Value:
    if x.ft is F32:
        return _sin_cos_f32_large(b, x, cos=True)
    return finite_only(b, x, _sin_cos_f64(b, x, *_reduce_large(b, b.fabs(x)), True))


def _tan_parts(b: Builder, x: Value, rh: Value, rl: Value, quad: Value) -> Value:
    """tan(x) from |x| = quad pi/2 + rh + rl (mod pi)."""
    z = rh * rh
    if x.ft is F32:
        u = rh * z * horner(b, z, TAN_P32)
    else:
        p, q = _TAN_PQ64
        u = rh * (z * horner(b, z, p) / horner(b, z, q))
    th, tl = fast_two_sum(rh, u)
    tl = tl + rl * (1.0 + th * th)  # tan(r + rl) = tan r + rl sec^2 r
    inv = -1.0 / th
    # -1/(th + tl) = inv (1 + e) + inv^2 tl to first order, e = 1 + inv th exactly (fma)
    cot = inv + inv * (b.fma(inv, th, 1.0) + inv * tl)
    r = b.select(b.cmp("ne", quad & 1, 0), cot, th + tl)
    return b.select(signbit(b, x), -r, r)


def _tan(b: Builder, x: Value) -> Value:
    return b.branch_large(x, _tan_parts(b, x, *_reduce_pio2(b, b.fabs(x))), "tan")


def _tan_large(b: Builder, x: Value) -> Value:
    return finite_only(b, x, _tan_parts(b, x, *_reduce_large(b, b.fabs(x))))


LARGE_FUNCTIONS: dict[str, Callable[..., Value]] = {
    "sin_large": _sin_large,
    "cos_large": _cos_large,
    "tan_large": _tan_large,
}
"""The functions ``Builder.branch_large`` calls (one argument; not in MATH_FUNCTIONS)."""


# ----------------------------------------------------------------------------------------------
# float32 sin and cos for a real GPU (the WGSL builder with ``branches``: shader.kernel_style
# "gpu"), where a branch no lane of a warp takes costs nearly nothing: below SHORT_LIMIT a short
# reduction, the exact one (``gpu_float32``'s, about 45 operations, and Payne-Hanek from 2^24
# on) behind ``rare``. The short one: q = rint(a 2/pi) < 2^12 (the product is off by less than
# 2^-12, so q misses the nearest integer only where a 2/pi is that close to a half-integer:
# |r| <= pi/4 + 2^-11, within the kernels' reach); r1 = a - q P1 is exact (one fma: a
# multiple of 2^-24 below 0.8; P1 = pi/2 rounded); r1 - q (P2 + P3) as a double-word rh + rl
# by an exact product and a two-sum (its operands hidden from contraction: ``Builder.exact``);
# the part of pi/2 beyond P1 + P2 + P3 times q is below 2^-60, and the float32 closest to a
# multiple of pi/2 lies 2^-27.8 from it, so rh + rl keeps 2^-32 relative accuracy there.
# About 15 operations. Then the same kernels as the exact path: at most 0.77 ulp on
# lavapipe and in the contraction emulation (tests/test_gpu_kernel_style.py).

SHORT_LIMIT = 4096.0


def _short_pio2_f32(b: Builder, a: Value) -> tuple[Value, Value, Value]:
    """(rh, rl, q) with a = q pi/2 + rh + rl (q an i32) for 0 <= a < SHORT_LIMIT."""
    p1, p2, p3 = CONSTANTS[F32]["pio2_4"][:3]
    q = b.rint(a * CONSTANTS[F32]["2/pi"][0])
    r1 = b.sub_multiple(q, p1, a, 12)
    p, pe = b.two_prod(q, p2)
    rh, e = two_sum(r1, -p)
    return rh, (e - pe) - q * p3, b.cast("fptosi", q, "i32")


def sin_cos_gpu_f32(b: Builder, x: Value, cos: bool, exact_reduce: Callable) -> Value:
    """float32 sin(x) or cos(x) for a real GPU (see above); ``exact_reduce(b, a)`` is the
    exact reduction for any a >= 0 as (rh, rl, quad), computed only where a lane needs it
    (``rare``); NaN for NaN and inf."""
    a = b.fabs(x)
    sh, sl, sq = _short_pio2_f32(b, a)
    short = b.cmp("olt", a, SHORT_LIMIT)  # (false for NaN: the exact path gives NaN)
    eh, el, eq = b.rare(lambda: b.not_(short), lambda: exact_reduce(b, a))
    rh, rl = b.select(short, sh, eh), b.select(short, sl, el)
    quad = b.select(short, sq, eq)
    if cos:  # cos(x) = sin(x + pi/2)
        quad = quad + 1
    r = b.select(b.cmp("ne", quad & 1, 0), cos_kernel(b, rh, rl), sin_kernel(b, rh, rl))
    flip = (quad & 2) << 30  # (-1)^(quad >> 1) in the sign bit
    if not cos:  # sin is odd
        flip = flip ^ (b.cast("bitcast", x, "i32") & -(2**31))
    r = b.cast("bitcast", b.cast("bitcast", r, "i32") ^ flip, "float")
    return finite_only(b, x, r)


# ----------------------------------------------------------------------------------------------
# Inverse trigonometric functions: Cephes atanf/asinf (float32), Cephes atan and fdlibm asin
# rational functions (float64); pi/2, pi/4, pi added as hi + lo.

_ATAN_P32 = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)
_ATAN_PQ64 = (
    (
        -8.750608600031904122785e-1,
        -1.615753718733365076637e1,
        -7.500855792314704667340e1,
        -1.228866684490136173410e2,
        -6.485021904942025371773e1,
    ),
    (
        1.0,
        2.485846490142306297962e1,
        1.650270098316988542046e2,
        4.328810604912902668951e2,
        4.853903996359136964868e2,
        1.945506571482613964425e2,
    ),
)
_ASIN_P32 = (4.2163199048e-2, 2.4181311049e-2, 4.5470025998e-2, 7.4953002686e-2, 1.6666752422e-1)
_ASIN_PQ64 = (
    (
        3.47933107596021167570e-05,
        7.91534994289814532176e-04,
        -4.00555345006794114027e-02,
        2.01212532134862925881e-01,
        -3.25565818622400915405e-01,
        1.66666666666666657415e-01,
    ),
    (
        7.70381505559019352791e-02,
        -6.88283971605453293030e-01,
        2.02094576023350569471e00,
        -2.40339491173441421878e00,
        1.0,
    ),
)


def _pio4_multiple(b: Builder, m: Value, ft: FloatType) -> tuple[Value, Value]:
    """m * pi/4 as hi + lo for an integer m in 0..4."""
    c = CONSTANTS[ft]
    his, los = zip((0.0, 0.0), c["pio4"], c["pio2"], c["3pio4"], c["pi"])
    hi, lo = b.lift(0.0, ft.ir), b.lift(0.0, ft.ir)
    for i in range(1, 5):
        hit = b.cmp("eq", m, i)
        hi, lo = b.select(hit, his[i], hi), b.select(hit, los[i], lo)
    return hi, lo


def _atan_parts(b: Builder, num: Value, den: Value) -> tuple[Value, Value]:
    """(m, p) with atan(num / den) = m pi/4 + p, for num, den >= 0 finite, den > 0 unless
    num is inf. The reduced argument t = (num - den) / (num + den) or -den / num is formed
    with its rounding error tl (two_sum, fma residual), so only the final sum rounds."""
    ft = num.ft
    big = b.cmp("ogt", num, den * 2.414213562373095)  # tan(3 pi / 8)
    mid = b.cmp("ogt", num, den * (0.4142135623730950 if ft is F32 else 0.66))
    dh, dl = two_sum(num, den)
    nh, nl = two_sum(num, -den)
    n_hi = b.select(big, -den, b.select(mid, nh, num))
    n_lo = b.select(mid, b.select(big, 0.0, nl), 0.0)
    d_hi = b.select(big, num, b.select(mid, dh, den))
    d_lo = b.select(mid, b.select(big, 0.0, dl), 0.0)
    t = n_hi / d_hi
    tl = (b.fma_exact(-t, d_hi, n_hi) + (n_lo - t * d_lo)) / d_hi
    tl = b.select(b.cmp("oeq", d_hi, float("inf")), 0.0, tl)
    z = t * t
    if ft is F32:
        p = b.fma(t * z, horner(b, z, _ATAN_P32), t)
    else:
        pp, qq = _ATAN_PQ64
        p = b.fma(t, z * horner(b, z, pp) / horner(b, z, qq), t)
    p = b.fma(tl, 1.0 - z, p)  # atan(t + tl) = atan(t) + tl / (1 + t^2)
    m = b.select(big, 2, b.select(mid, 1, 0, ft.int_ir))
    return m, p


def _atan(b: Builder, x: Value) -> Value:
    m, p = _atan_parts(b, b.fabs(x), b.lift(1.0, x.ty))
    hi, lo = _pio4_multiple(b, m, x.ft)
    return b.copysign(hi + (p + lo), x)


def _atan2(b: Builder, y: Value, x: Value) -> Value:
    ax, ay = b.fabs(x), b.fabs(y)
    swap = b.cmp("ogt", ay, ax)
    num, den = b.select(swap, ax, ay), b.select(swap, ay, ax)
    both_inf = b.cmp("oeq", num, float("inf"))  # then den is inf too: atan(1)
    zero = b.cmp("oeq", num, 0.0)  # atan(0), also for 0/0
    num = b.select(both_inf, 1.0, b.select(zero, 0.0, num))
    den = b.select(both_inf | zero, 1.0, den)
    # scale tiny pairs up (exactly) so that den * threshold in _atan_parts does not round,
    # huge ones down so that num + den does not overflow
    tiny = b.cmp("olt", den, 2.0 ** (x.ft.mant + 3 - x.ft.bias))
    huge = b.cmp("ogt", den, 2.0 ** (x.ft.bias - 2))
    scale = b.select(tiny, 2.0 ** (x.ft.mant + 3), b.select(huge, 0.25, 1.0, x.ty))
    num, den = num * scale, den * scale
    m, p = _atan_parts(b, num, den)
    # atan2 = sign(y) (B + s (m pi/4 + p)) with (B, s) = (0, +), (pi/2, -) if swapped,
    # (pi, -) if x < 0 (x = -0 included), (pi/2, +) if both; summed with one rounding.
    x_neg = signbit(b, x)
    base = b.select(swap, 2, b.select(x_neg, 4, 0, x.ft.int_ir))
    minus = swap ^ x_neg
    hi, lo = _pio4_multiple(b, base + b.select(minus, -m, m), x.ft)
    r = b.copysign(hi + (b.select(minus, -p, p) + lo), y)
    return b.select(b.cmp("uno", x, y), x + y, r)


def _asin_acos_parts(b: Builder, x: Value):
    """|x| <= 1/2: (a, w) with asin(a) = a + w; else (s, w) with asin(a) = pi/2 - 2 (s + w)."""
    a = b.fabs(x)
    small = b.cmp("ole", a, 0.5)
    z = b.select(small, a * a, (1.0 - a) * 0.5)
    s = b.sqrt(z)
    if x.ft is F32:
        rat = z * horner(b, z, _ASIN_P32)
    else:
        pp, qq = _ASIN_PQ64
        rat = z * horner(b, z, pp) / horner(b, z, qq)
    corr = b.fma_exact(-s, s, z) / (s + s)  # sqrt(z) = s + corr to second order
    corr = b.select(b.cmp("oeq", s, 0.0), 0.0, corr)
    base = b.select(small, a, s)
    w = base * rat
    return a, small, s, b.select(small, w, corr + w)


def _asin(b: Builder, x: Value) -> Value:
    c = CONSTANTS[x.ft]
    a, small, s, w = _asin_acos_parts(b, x)
    h, e = two_sum(c["pio2"][0], -2.0 * s)
    large = h + (e + (c["pio2"][1] - 2.0 * w))
    return b.copysign(b.select(small, a + w, large), x)


def _acos(b: Builder, x: Value) -> Value:
    c = CONSTANTS[x.ft]
    _, small, s, w = _asin_acos_parts(b, x)
    mid = c["pio2"][0] - (x - (c["pio2"][1] - b.copysign(w, x)))
    pos = 2.0 * (s + w)
    h, e = two_sum(c["pi"][0], -2.0 * s)
    neg = h + (e + (c["pi"][1] - 2.0 * w))
    return b.select(small, mid, b.select(b.cmp("ogt", x, 0.0), pos, neg))


FUNCTIONS: dict[str, tuple[int, Callable[..., Value]]] = {
    "sin": (1, _sin),
    "cos": (1, _cos),
    "tan": (1, _tan),
    "atan": (1, _atan),
    "atan2": (2, _atan2),
    "asin": (1, _asin),
    "acos": (1, _acos),
}
"""Name -> (arity, emitter) of this module's functions."""
