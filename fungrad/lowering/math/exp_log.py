"""The exponential and logarithm family, written once against the math builder (``builder``):
exp, exp2, expm1, log, log2, log10, log1p, the hyperbolic functions and logistic (on the exp
and log kernels), pow (a double-word log) and cbrt. Accuracy and edge cases: ``functions``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from fungrad.lowering.math.builder import F32, F64, Builder, Value
from fungrad.lowering.math.numeric import (
    CONSTANTS,
    clamp,
    fast_two_sum,
    horner,
    nan_in_nan_out,
    pow2,
    to_int,
    two_sum,
)

__all__ = ["EXP_P32_SHORT", "FUNCTIONS", "ROUND_MAGIC", "TANH_P", "exp_kernel"]


# ----------------------------------------------------------------------------------------------
# exp family: k = rint(x log2 e), r = x - k ln2 (Cody-Waite with fma, plus the exact tail rl),
# e**r = 1 + r + r^2 P(r); float32 P is Cephes expf, float64 P the Taylor series to r^13.

_EXP_P = {
    F32: (
        1.9875691500e-4,
        1.3981999507e-3,
        8.3334519073e-3,
        4.1665795894e-2,
        1.6666665459e-1,
        5.0000001201e-1,
    ),
    F64: tuple(1.0 / math.factorial(n) for n in range(13, 1, -1)),  # 1/13!, ..., 1/2!
}
# x is clamped into these bounds before reduction: beyond them exp is 0 or inf (also after the
# extra 2**-1 of sinh/cosh), and 2**k splits into two normal powers of two.
_EXP_BOUNDS = {F32: (-104.0, 90.0), F64: (-746.0, 711.0)}


def _exp_reduce(b: Builder, x: Value) -> tuple[Value, Value, Value]:
    c = CONSTANTS[x.ft]
    k = b.rint(x * c["log2e"][0])
    t1 = b.sub_multiple(k, c["ln2"][0], x, 11)  # a short multiple of ulp(ln2_hi); |k| <= 1077
    r, rl = two_sum(t1, -(k * c["ln2"][1]))
    return k, r, rl


def _exp_poly(b: Builder, r: Value, rl: Value) -> tuple[Value, Value]:
    """(r, tail) with e**(r + rl) - 1 = r + tail, |tail| <~ r^2/2."""
    t = r * r * horner(b, r, _EXP_P[r.ft])
    return r, b.fma(rl, 1.0 + b.keep(r + t), t)  # e^(r + rl) = e^r (1 + rl), rl up to ~1e-13


def exp_kernel(b: Builder, x: Value, lo=None, shift: int = 0, dd: bool = False):
    """2**shift * exp(x + lo) for any non-NaN x (|lo| <= ulp(x)); NaN gives garbage.
    With ``dd`` the result comes as an unrounded pair hi + lo (exact scaling unless denormal)."""
    ft = x.ft
    xc = clamp(b, x, *_EXP_BOUNDS[ft])
    k, r, rl = _exp_reduce(b, xc)
    if lo is not None:  # lo only counts when x was in range (it may be NaN otherwise)
        rl = rl + b.select(b.cmp("oeq", xc, x), lo, 0.0)
    r, tail = _exp_poly(b, r, rl)
    s, e = fast_two_sum(1.0, r)
    if dd:
        ki = to_int(b, k, clamped=True) + shift
        hi, lo = fast_two_sum(s, e + tail)
        return b.ldexp(hi, ki), b.ldexp(lo, ki)
    return b.ldexp(s + (e + tail), to_int(b, k, clamped=True) + shift)


# float32 exp: e**r = 1 + r + r^2 P(r) on |r| <= ln2/2 with a degree-4 minimax P fitted with
# float32 coefficients (relative error 3e-9; Cephes' degree 5 buys nothing at float32).
EXP_P32_SHORT = (
    0.0013814599951729178,
    0.008368715643882751,
    0.04166838899254799,
    0.1666652113199234,
    0.4999999403953552,
)
ROUND_MAGIC = 1.5 * 2.0**23  # v + this, rounded to float32, holds rint(v) in its low bits


def _exp_f32(b: Builder, x: Value) -> tuple[Value, Value]:
    """(y, k) with exp(x) = y 2**k, y in [0.7, 1.42] and k an i32, for x already clamped to
    |x| < 2**21 (NaN gives a NaN y). k = rint(x log2 e) comes from one fma with a magic
    constant: its result's low bits are k, converted back to a float exactly (not as
    ``t - constant``, which GPU compilers fold back to ``x log2 e``)."""
    c = CONSTANTS[F32]
    t = b.fma(x, c["log2e"][0], ROUND_MAGIC)
    ki = b.cast("bitcast", t, "i32") - struct.unpack("<i", struct.pack("<f", ROUND_MAGIC))[0]
    k = b.cast("sitofp", ki, "float")
    # x - k ln2_hi is exact (|k| <= 150); the second step's product k ln2_lo (<= 3e-7) may
    # round before the sum without harm, so it needs no exact fma
    r = b.fma(-k, c["ln2"][1], b.sub_multiple(k, c["ln2"][0], x, 8))
    return 1.0 + b.fma(r * r, horner(b, r, EXP_P32_SHORT), r), ki


def _exp(b: Builder, x: Value) -> Value:
    if x.ft is F32:  # float32: one rounding of r, a short polynomial; within 1 ulp
        # the clamp (one maxps, one minps) keeps NaN, and NaN then flows through to the
        # result: k comes from bit arithmetic (no fptosi to turn into poison), and NaN times
        # any power of two is NaN
        lo, hi = _EXP_BOUNDS[F32]
        t = b.select(b.cmp("olt", x, lo), lo, x)
        y, k = _exp_f32(b, b.select(b.cmp("ogt", t, hi), hi, t))
        return b.ldexp(y, k)
    return nan_in_nan_out(b, x, exp_kernel(b, x))


def _exp2(b: Builder, x: Value) -> Value:
    ft = x.ft
    lo, hi = _EXP_BOUNDS[ft]
    xc = clamp(b, x, lo * 1.4427, hi * 1.4427)
    k = b.rint(xc)
    r0 = xc - k  # exact
    ln2 = CONSTANTS[ft]["ln2"]
    r, rl = b.two_prod(r0, ln2[0])
    r, tail = _exp_poly(b, r, rl + r0 * ln2[1])
    s, e = fast_two_sum(1.0, r)
    y = b.ldexp(s + (e + tail), to_int(b, k, clamped=True))
    return nan_in_nan_out(b, x, y)


def _expm1_kernel(b: Builder, x: Value) -> tuple[Value, Value]:
    """expm1(x) as hi + lo, for x up to the threshold in _expm1 (2**k stays finite)."""
    ft = x.ft
    top = 40.0 if ft is F64 else 20.0
    xc = clamp(b, x, -top, top)
    k, r, rl = _exp_reduce(b, xc)
    r, tail = _exp_poly(b, r, rl)
    ki = to_int(b, k, clamped=True)
    two_k = pow2(b, ki, ft)
    # expm1 = (2^k - 1) + 2^k r + 2^k tail; 2^k - 1 is exact while k <= mant, else split off -1.
    small_k = b.cmp("sle", ki, ft.mant)
    a_hi = b.select(small_k, two_k - 1.0, two_k)
    a_lo = b.select(small_k, 0.0, -1.0, ft.ir)
    s, e = two_sum(a_hi, two_k * r)
    return fast_two_sum(s, e + (two_k * tail + a_lo))


def _expm1(b: Builder, x: Value) -> Value:
    top = 40.0 if x.ft is F64 else 20.0
    hi, lo = _expm1_kernel(b, x)
    r = b.select(b.cmp("ogt", x, top), exp_kernel(b, x), hi + lo)
    r = b.select(b.cmp("oeq", x, 0.0), x, r)  # expm1(-0) = -0
    return nan_in_nan_out(b, x, r)


# ----------------------------------------------------------------------------------------------
# log family: u = 2^k m with m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f/(2+f),
# log(1+f) = f - f^2/2 + s (f^2/2 + R(s^2)) (fdlibm e_log.c; float32 uses FreeBSD's e_logf.c
# coefficients), kept as hi + lo and combined with k ln2 in double-word arithmetic.

_LG = {
    F32: (0.66666662693, 0.40000972152, 0.28498786688, 0.24279078841),
    F64: (
        6.666666666666735130e-01,
        3.999999999940941908e-01,
        2.857142874366239149e-01,
        2.222219843214978396e-01,
        1.818357216161805012e-01,
        1.531383769920937332e-01,
        1.479819860511658591e-01,
    ),
}
_SQRTH_BITS = {F32: 0x3F3504F3, F64: 0x3FE6A09E667F3BCD}  # bits of sqrt(1/2)


def _log_split(b: Builder, u: Value) -> tuple[Value, Value]:
    """(k, f) with u = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)); u > 0 finite (denormal ok)."""
    ft = u.ft
    tiny = b.cmp("olt", u, 2.0 ** (1 - ft.bias))
    shift = ft.mant + 2
    us = b.select(tiny, u * 2.0**shift, u)
    one_bits = ft.bias << ft.mant
    ix = b.cast("bitcast", us, ft.int_ir) + (one_bits - _SQRTH_BITS[ft])
    k = (ix >> ft.mant) - ft.bias
    m = b.cast("bitcast", (ix & ((1 << ft.mant) - 1)) + _SQRTH_BITS[ft], ft.ir)
    kf = b.cast("sitofp", k, ft.ir) - b.select(tiny, float(shift), 0.0, ft.ir)
    return kf, m - 1.0


def _log1p_of_f(b: Builder, f: Value) -> tuple[Value, Value]:
    """log(1 + f) as hi + lo for f in [sqrt(1/2) - 1, sqrt(2) - 1]."""
    lg = _LG[f.ft]
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    odd, even = lg[0::2], lg[1::2]  # Lg1, Lg3, ... and Lg2, Lg4, ...
    r = z * horner(b, w, odd[::-1]) + w * horner(b, w, even[::-1])
    hfsq = 0.5 * f * f
    hi = f - hfsq
    lo = ((f - hi) - hfsq) + s * (hfsq + r)  # (f - hi) - hfsq is hi's rounding error, exactly
    return hi, lo


def _log_combine(b: Builder, k: Value, hi: Value, lo: Value, base: str) -> Value:
    """k * log_base(2) + (hi + lo) * log_base(e), rounded once at the end."""
    c = CONSTANTS[k.ft]
    if base == "e":
        ph, pl = hi, lo
    else:
        m = c["log2e" if base == "2" else "log10e"]
        ph, e0 = b.two_prod(hi, m[0])
        pl = e0 + (hi * m[1] + lo * m[0])
    if base == "2":
        kh, kl = k, None
    else:
        cc = c["ln2" if base == "e" else "log10_2"]
        kh, e1 = b.two_prod(k, cc[0])
        kl = e1 + k * cc[1]
    s, e = two_sum(kh, ph)
    low = pl if kl is None else pl + kl
    return s + (e + low)


def _log_core(b: Builder, u: Value, base: str = "e", ul=None, kadd=None) -> Value:
    """log_base(u + ul) (+ kadd log_base 2) with the IEEE special cases of log(u)."""
    safe = b.select(b.cmp("ogt", u, 0.0), u, 1.0)
    safe = b.select(b.cmp("oeq", safe, float("inf")), 1.0, safe)
    k, f = _log_split(b, safe)
    hi, lo = _log1p_of_f(b, f)
    if ul is not None:  # log(u + ul) = log(u) + q - q^2 / 2, q = ul / u
        q = ul / safe
        lo = lo + b.fma(-0.5 * q, q, q)
    if kadd is not None:
        k = k + kadd
    r = _log_combine(b, k, hi, lo, base)
    r = b.select(b.cmp("oeq", u, float("inf")), float("inf"), r)
    r = b.select(b.cmp("oeq", u, 0.0), float("-inf"), r)
    r = b.select(b.cmp("olt", u, 0.0), float("nan"), r)
    return nan_in_nan_out(b, u, r)


def _log1p_tiny(b: Builder, r: Value, yh: Value, yl, use=None) -> Value:
    """r, except log1p(yh + yl) = y - y^2 / 2 where |yh| is tiny: through u = 1 + y the log
    kernel would cancel hi against lo and round a few times too often there."""
    tiny = b.cmp("olt", b.fabs(yh), 2.0 ** (-27 if yh.ft is F64 else -13))
    if use is not None:
        tiny = tiny & use
    series = b.fma(-0.5 * yh, yh, yh if yl is None else yl)
    return b.select(tiny, series if yl is None else yh + series, r)


def _log(b, x):
    return _log_core(b, x, "e")


def _log2(b, x):
    return _log_core(b, x, "2")


def _log10(b, x):
    return _log_core(b, x, "10")


def _log1p(b: Builder, x: Value) -> Value:
    u, ul = two_sum(1.0, x)
    r = _log1p_tiny(b, _log_core(b, u, "e", ul=ul), x, None)
    r = b.select(b.cmp("oeq", x, float("inf")), x, r)
    return b.select(b.cmp("oeq", x, 0.0), x, r)  # log1p(-0) = -0


# ----------------------------------------------------------------------------------------------
# Hyperbolic functions (fdlibm's formulas on top of the kernels above)

TANH_P = {
    F32: (
        -5.70498872745e-3,
        2.06390887954e-2,
        -5.37397155531e-2,
        1.33314422036e-1,
        -3.33332819422e-1,
    )
}
_TANH_PQ = (
    (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3),
    (1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3),
)


def _tanh(b: Builder, x: Value) -> Value:
    a = b.fabs(x)
    z = a * a
    if x.ft is F32:  # Cephes tanhf for |x| < 0.625; else 1 - 2 / (exp(2|x|) + 1)
        small = b.fma(a * z, horner(b, z, TANH_P[F32]), a)
        # tanh rounds to 1 from 9.1 on; below, exp(2|x|) = y 2**k with k <= 27 is scaled by
        # adding k to y's exponent (no clamps, no denormals: 26% fewer instructions than
        # calling exp). NaN takes the small branch (ult) and stays NaN.
        ac = b.select(b.cmp("olt", a, 9.1), a, 9.1)
        y, k = _exp_f32(b, ac + ac)
        e = b.cast("bitcast", b.cast("bitcast", y, "i32") + (k << 23), "float")
        large = 1.0 - 2.0 / (e + 1.0)
        return b.copysign(b.select(b.cmp("ult", a, 0.625), small, large), x)
    p, q = _TANH_PQ
    small = b.fma(a, z * horner(b, z, p) / horner(b, z, q), a)
    e = b.call(f"fg_exp_{x.ft.suffix}", a + a)
    large = 1.0 - 2.0 / (e + 1.0)  # exp overflow gives exactly 1
    r = b.select(b.cmp("olt", a, 0.625), small, large)
    return b.copysign(r, x)  # also keeps -0 and NaN


def _logistic(b: Builder, x: Value) -> Value:
    """1 / (1 + exp(-x)), as e / (1 + e) with e = exp(x) for x < 0 so it underflows gradually;
    e and 1 + e are kept as hi + lo pairs and the quotient corrected by its fma residual."""
    eh, el = exp_kernel(b, -b.fabs(x), dd=True)
    dh, dl = fast_two_sum(1.0, eh)
    dl = dl + el
    pos = b.cmp("oge", x, 0.0)
    nh, nl = b.select(pos, 1.0, eh), b.select(pos, 0.0, el)
    q = nh / dh
    r = q + (b.fma_exact(-q, dh, nh) + (nl - q * dl)) / dh
    return nan_in_nan_out(b, x, r)


def _sinh(b: Builder, x: Value) -> Value:
    a = b.fabs(x)
    top = 40.0 if x.ft is F64 else 20.0  # beyond, sinh = e^|x| / 2 to the last bit
    th, tl = _expm1_kernel(b, a)
    # (t + t / (t + 1)) / 2 with t = expm1|x| = th + tl; the quotient fma-corrected
    dh, dl = fast_two_sum(1.0, th)
    q = th / dh
    q = q + (b.fma_exact(-q, dh, th) + (tl - q * (dl + tl))) / dh
    s, e = two_sum(th, q)
    small = 0.5 * (s + (e + tl))
    large = exp_kernel(b, a, shift=-1)  # overflows only when sinh does
    r = b.select(b.cmp("ole", a, top), small, large)
    return nan_in_nan_out(b, x, b.copysign(r, x))


def _cosh(b: Builder, x: Value) -> Value:
    a = b.fabs(x)
    cut = 0.3465735902799727  # ln(2) / 2
    th, tl = _expm1_kernel(b, b.select(b.cmp("olt", a, cut), a, 0.0))
    t = th + tl
    small = 1.0 + t * t / (2.0 * (1.0 + t))
    h = exp_kernel(b, a, shift=-1)
    large = h + 0.25 / h
    r = b.select(b.cmp("olt", a, cut), small, large)
    return nan_in_nan_out(b, x, r)


def _asinh(b: Builder, x: Value) -> Value:
    ft = x.ft
    a = b.fabs(x)
    huge = b.cmp("ogt", a, 2.0 ** (28 if ft is F64 else 12))  # asinh = log(2a)
    big = b.cmp("ogt", a, 2.0)
    t = a * a
    u_big = 2.0 * a + 1.0 / (b.sqrt(t + 1.0) + a)
    yh, yl = fast_two_sum(a, t / (1.0 + b.sqrt(1.0 + t)))  # asinh = log1p(y)
    u_small, ul_small = two_sum(1.0, yh)
    ul_small = ul_small + yl
    u = b.select(huge, a, b.select(big, u_big, u_small))
    ul = b.select(big, 0.0, ul_small)
    r = _log_core(b, u, "e", ul=ul, kadd=b.select(huge, 1.0, 0.0, ft.ir))
    r = _log1p_tiny(b, r, yh, yl, b.not_(big))
    return b.copysign(r, x)


def _acosh(b: Builder, x: Value) -> Value:
    ft = x.ft
    huge = b.cmp("ogt", x, 2.0 ** (28 if ft is F64 else 12))
    big = b.cmp("ogt", x, 2.0)
    u_big = 2.0 * x - 1.0 / (x + b.sqrt(x * x - 1.0))
    t = x - 1.0  # exact for x in [1, 2]
    t2, t2l = b.two_prod(t, t)
    wh, wl = two_sum(2.0 * t, b.keep(t2))  # 2t + t^2 = wh + wl
    sq = b.sqrt(wh)
    sql = (b.fma_exact(-sq, sq, wh) + (wl + t2l)) / (sq + sq)  # sqrt(w) = sq + sql
    sql = b.select(b.cmp("oeq", sq, 0.0), 0.0, sql)
    yh, yl = fast_two_sum(sq, t)  # acosh = log1p(y), y = t + sqrt(2t + t^2)
    u_small, ul_small = two_sum(1.0, yh)
    ul_small = ul_small + (yl + sql)
    u = b.select(huge, x, b.select(big, u_big, u_small))
    ul = b.select(big, 0.0, ul_small)
    r = _log_core(b, u, "e", ul=ul, kadd=b.select(huge, 1.0, 0.0, ft.ir))
    return b.select(b.cmp("olt", x, 1.0), float("nan"), r)


def _atanh(b: Builder, x: Value) -> Value:
    a = b.fabs(x)
    t = a + a
    small = b.cmp("olt", a, 0.5)
    ys, ysl = fast_two_sum(t, t * a / (1.0 - a))
    yb = t / (1.0 - a)  # 1 - a is exact here
    ybl = b.fma_exact(-yb, 1.0 - a, t) / (1.0 - a)
    yh, yl = b.select(small, ys, yb), b.select(small, ysl, ybl)
    u, ul = two_sum(1.0, yh)  # atanh = log1p(y) / 2
    r = 0.5 * _log1p_tiny(b, _log_core(b, u, "e", ul=ul + yl), yh, yl)
    r = b.select(b.cmp("oeq", a, 1.0), float("inf"), r)
    r = b.select(b.cmp("ogt", a, 1.0), float("nan"), r)
    return b.copysign(r, x)


# ----------------------------------------------------------------------------------------------
# pow and cbrt

_LOG_DD_R = tuple(2.0 / n for n in range(25, 5, -2))  # 2/25, ..., 2/7


def _log_dd(b: Builder, a: Value) -> tuple[Value, Value]:
    """log(a) as a double-word hi + lo, a > 0 finite: 2s + 2/3 s^3 + 2/5 s^5 + ..., s = f /
    (2 + f), with the first three terms in double-word arithmetic (float64: error about 2^-69
    absolute, so y log(a) stays good to 2^-60 relative for every finite pow result; the same
    in float32 words, for the GPU, about 2^-40)."""
    ft = a.ft
    c = CONSTANTS[ft]
    k, f = _log_split(b, a)
    dh, dl = fast_two_sum(2.0, f)
    sh = f / dh
    sl = (b.fma_exact(-sh, dh, f) - sh * dl) / dh  # s = sh + sl
    z, zl = b.two_prod(sh, sh)
    zl = zl + 2.0 * sh * sl  # s^2 = z + zl
    c3h, c3e = b.two_prod(sh, z)  # s^3 = c3h + c3l
    c3l = c3e + (sh * zl + z * sl)
    c5h, c5e = b.two_prod(c3h, z)  # s^5 = c5h + c5l
    c5l = c5e + (c3h * zl + c3l * z)
    two3, two5 = c["2/3"], c["2/5"]
    t3h, t3e = b.two_prod(c3h, two3[0])
    t3l = t3e + (c3l * two3[0] + c3h * two3[1])
    t5h, t5e = b.two_prod(c5h, two5[0])
    t5l = t5e + (c5l * two5[0] + c5h * two5[1])
    u = c5h * z * horner(b, z, _LOG_DD_R)  # 2/7 s^7 + ... + 2/25 s^25, below 2^-19
    lh, e = two_sum(sh + sh, t3h)
    lh, e1 = two_sum(lh, t5h)
    ll = (e + e1) + ((sl + sl) + (t3l + (t5l + u)))
    kh, ke = b.two_prod(k, c["ln2"][0])
    h, e2 = two_sum(kh, lh)
    return fast_two_sum(h, e2 + (ll + (ke + k * c["ln2"][1])))


def _pow_magnitude(b: Builder, ax: Value, y: Value) -> Value:
    """|x|**y for finite |x| > 0, via exp(y log|x|) with log in extra precision: double-word
    arithmetic in the value's own type, except that the CPU's float32 works in float64."""
    if ax.ft is not F32:
        lh, ll = _log_dd(b, ax)
        yh, ye = b.two_prod(y, lh)
        return exp_kernel(b, yh, ye + y * ll)
    axd, yd = b.cast("fpext", ax, "double"), b.cast("fpext", y, "double")
    k, f = _log_split(b, axd)
    hi, lo = _log1p_of_f(b, f)
    return b.cast("fptrunc", exp_kernel(b, yd * _log_combine(b, k, hi, lo, "e")), "float")


def _pow(b: Builder, x: Value, y: Value) -> Value:
    inf = float("inf")
    ax = b.fabs(x)
    y_int = b.cmp("oeq", b.rint(y), y)  # +-inf counts as an even integer
    y_odd = y_int & b.cmp("une", b.rint(y * 0.5), y * 0.5)
    x_neg = b.cmp("olt", x, 0.0)
    finite_nonzero = b.cmp("one", ax, 0.0) & b.cmp("one", ax, inf)
    mag = _pow_magnitude(b, b.select(finite_nonzero, ax, 1.0), y)
    r = b.select(x_neg & y_odd, -mag, mag)
    r = b.select(x_neg & b.not_(y_int), float("nan"), r)
    y_neg = b.cmp("olt", y, 0.0)
    at_zero = b.select(y_neg, b.select(y_odd, b.copysign(inf, x), inf), b.select(y_odd, x, 0.0))
    r = b.select(b.cmp("oeq", ax, 0.0), at_zero, r)
    at_inf = b.select(y_neg, b.select(y_odd, b.copysign(0.0, x), 0.0), b.select(y_odd, x, inf))
    r = b.select(b.cmp("oeq", ax, inf), at_inf, r)
    y_inf = b.select(
        b.cmp("oeq", ax, 1.0), 1.0, b.select(b.cmp("ogt", ax, 1.0) ^ y_neg, inf, 0.0, x.ty)
    )
    r = b.select(b.cmp("oeq", b.fabs(y), inf), y_inf, r)
    r = b.select(b.cmp("uno", x, y), float("nan"), r)
    return b.select(b.cmp("oeq", y, 0.0) | b.cmp("oeq", x, 1.0), 1.0, r)


_CBRT_B = {F32: 709958130, F64: 715094163 << 32}  # fdlibm's biased exponent offsets


def _cbrt(b: Builder, x: Value) -> Value:
    ft = x.ft
    a = b.fabs(x)
    # keep a, y^3 and the residual terms normal: scale by 2^(+-3m), the result back by 2^(-+m)
    tiny = b.cmp("olt", a, 2.0 ** (27 - ft.bias))
    huge = b.cmp("ogt", a, 2.0 ** (ft.bias - 27))
    m = 16 if ft is F32 else 36
    a = b.select(tiny, a * 2.0 ** (3 * m), b.select(huge, a * 2.0 ** (-3 * m), a))
    bits = b.cast("sitofp", b.cast("bitcast", a, ft.int_ir), ft.ir)
    # a's bits / 3 + B approximates the bits of a^(1/3); the quotient fits the integer type
    guess = b.cast("fptosi", bits * (1.0 / 3.0), ft.int_ir) + _CBRT_B[ft]
    y = b.cast("bitcast", guess, ft.ir)  # within a few percent of cbrt(a)
    for _ in range(2 if ft is F32 else 3):  # Halley: cubic convergence
        t = y * y * y
        y = y * ((t + a + a) / (t + t + a))
    h, l = b.two_prod(y, y)
    res = b.fma_exact(-h, y, a) - l * y  # a - y^3, nearly exact
    y = y + res / (3.0 * h)
    y = y * b.select(tiny, 2.0**-m, b.select(huge, 2.0**m, 1.0, ft.ir))
    r = b.copysign(y, x)
    special = b.cmp("oeq", x, 0.0) | b.cmp("oeq", a, float("inf")) | b.cmp("uno", x, x)
    return b.select(special, x, r)


FUNCTIONS: dict[str, tuple[int, Callable[..., Value]]] = {
    "exp": (1, _exp),
    "exp2": (1, _exp2),
    "expm1": (1, _expm1),
    "log": (1, _log),
    "log2": (1, _log2),
    "log10": (1, _log10),
    "log1p": (1, _log1p),
    "tanh": (1, _tanh),
    "logistic": (1, _logistic),
    "sinh": (1, _sinh),
    "cosh": (1, _cosh),
    "asinh": (1, _asinh),
    "acosh": (1, _acosh),
    "atanh": (1, _atanh),
    "pow": (2, _pow),
    "cbrt": (1, _cbrt),
}
"""Name -> (arity, emitter) of this module's functions."""
