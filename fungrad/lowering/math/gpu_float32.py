"""float32 formulations of some math functions for GPUs: no float64, an fma that may round
twice, and llvmpipe's costs (a function costs its longest dependency chain; both sides of a
branch run). They are written against the WGSL builder (``wgsl.WGSLBuilder``: they use its
``split`` and the ``floor`` intrinsic) and take the place of the shared algorithm of the same
name (``functions``) on the GPU.

WGSL has no float64, so the functions whose float32 version works in float64 on the CPU have
float32-only formulations here: ``lgamma`` and ``digamma`` (:func:`_lgamma`, :func:`_digamma`:
recurrence into a unit interval around a zero with a polynomial fitted here, asymptotic series,
reflection; a few ulp of max(|f|, 1), more where reflection cancels); ``erf_inv`` is WGSL text
in ``wgsl``. ``sin``, ``cos`` and ``tan`` have a GPU formulation of their own
(:func:`_reduce_pio2`: an exact reduction from float32 products alone below 2^24, trig's
integer Payne-Hanek above, then Cephes' float32 kernels), about half the instructions of the
algorithms' same-precision path. ``exp`` and ``tanh`` have GPU versions too (:func:`_exp`,
:func:`_tanh`: exp_log's float32 algorithms with a two-piece reduction and 2^k applied by an
exponent add, special ranges by selects), because llvmpipe runs the CPU's two-step ``ldexp``
multiply slowly (the GPU versions make the benchmark chain about 10% faster on llvmpipe).
Denormals may be flushed to zero by the GPU, so results that are denormal on the CPU can be
0 on the GPU.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

from fungrad.lowering.math.builder import F32, Value
from fungrad.lowering.math.exp_log import EXP_P32_SHORT, ROUND_MAGIC, TANH_P
from fungrad.lowering.math.numeric import CONSTANTS, fast_two_sum, finite_only, horner, two_sum
from fungrad.lowering.math.special import HALF_LOG_2PI, LOG_PI
from fungrad.lowering.math.trig import TAN_P32, cos_kernel, large_pio2_f32, sin_kernel

if TYPE_CHECKING:
    from fungrad.lowering.math.wgsl import WGSLBuilder

__all__ = ["FUNCTIONS"]


# sin and cos: the reduction |x| = q pi/2 + r (|x| < 2^24; from there on trig's
# Payne-Hanek in 32-bit integers, selected per element: see _reduce_any) is
# exact with float32 products only, so it needs neither a fused fma nor Dekker splits at run
# time: q (< 2^24) splits into qh = a multiple of 2^12 and |ql| <= 2^11 + 1, and pi/2 into
# pieces of 12 significant bits (_PIO2_12), so every product of a half of q with a piece is
# exact. The products of the first two pieces (and qh with the third) have quanta of at least
# 2^-23 and leave less than 2 (|r| <= pi/4 plus q (pi/2 - P1 - P2) <= 0.81): subtracted in
# order, qh's two first (a - qh P1 - qh P2 is ql pi/2 + r + qh (pi/2 - P1 - P2), below 2^12,
# a multiple of a's quantum or of 2^-11, so exact too; ql arrives later), each result is
# exact. The three smaller terms are ql P3 (< 2^-11.6), qh P4 (< 2^-15.2) and
# ql P4 + q P5 (< 2^-26, rounded); the first two are subtracted by fast two-sums whose tails
# go to rl (where |t| < |ql P3| or |s| < |qh P4| the subtraction is exact: both are multiples
# of a quantum 2^24 times smaller than the bound), so r = rh + rl to about 2^-53 absolute:
# the closest float32 below 2^24 to a multiple of pi/2 lies 2^-27.8 from it (252.898...).
# q itself must be the nearest integer to |x| 2/pi (the kernels hold for |r| <= pi/4): the
# product a (2/pi) rounds by up to 0.5 near 2^23, so with H = ah CH exact (ah: the leading 12
# bits of a, CH: of 2/pi) and X the small rest, qh is the multiple of 2^12 nearest to H and
# ql = rint((H - qh) + X) (H - qh is exact), q = qh + ql. Both halves come straight from H:
# on llvmpipe a function costs its longest dependency chain (docs/architecture.md), and
# rounding q first and splitting it after (floor(q 2^-12) 2^12) made that chain 4 operations
# longer: sin cost ~20% more (bench/gpu_bench.py --only depth).
# Then Cephes' float32 sin and cos kernels with the tail rl (trig's), both computed and
# selected by the quadrant (no branches). Measured on lavapipe (bit-identical to a numpy
# float32 emulation), 2M arguments per range up to 2^24: at most 0.84 ulp, 0.63 ulp on the
# hardest arguments near multiples of pi/2; 80 WGSL statements where the algorithms'
# same-precision path (two_prod reductions, float64-degree kernels) took 130.


def _pieces(v: Fraction, n: int, bits: int) -> tuple[list[float], float]:
    """``n`` float32 pieces of ``bits`` leading significant bits each (truncated) and the
    float32 rest, summing to ``v`` > 0."""
    out = []
    for _ in range(n):
        e = math.floor(math.log2(v))
        scale = Fraction(2) ** (e - bits + 1)
        p = math.floor(v / scale) * scale
        out.append(float(p))
        v -= p
    return out, float(v)


# pi/2 to 150 digits
_PIO2 = Fraction(
    "1.5707963267948966192313216916397514420985846996875529104874722961539082031431"
    "04499314017412671058533991074043256641153323546922304775291115862679704"
)
_PIO2_12, _PIO2_REST = _pieces(_PIO2, 4, 12)
(_TWO_OPI_12,), _TWO_OPI_REST = _pieces(1 / _PIO2, 1, 12)


def _reduce_pio2(b: WGSLBuilder, a: Value) -> tuple[Value, Value, Value]:
    """(rh, rl, q) with a = q pi/2 + rh + rl to about 2^-53, |rh| <= pi/4 and q the nearest
    integer to a 2/pi, for 0 <= a < 2^24 (see above)."""
    p1, p2, p3, p4 = _PIO2_12
    ah, al = b.split(a, 12)
    h = ah * _TWO_OPI_12  # exact
    qh = b.rint(h * 2.0**-12) * 2.0**12
    # h - qh is exact; both terms are kept, or Mesa reassociates the sum (into (x + p) + q
    # for x + (p + q) with products p and q; the difference away) and q can miss the nearest
    # integer (tests/test_gpu_math_exact.py, test_gpu_math_ulp.py)
    ql = b.rint(b.keep(h - qh) + b.keep(ah * _TWO_OPI_REST + al * float(1 / _PIO2)))
    q = qh + ql
    t = (((a - qh * p1) - qh * p2) - ql * p1) - ql * p2  # (qh first: ql comes later)
    t = t - qh * p3
    s, e1 = fast_two_sum(t, -(ql * p3))
    rh, e2 = fast_two_sum(s, -(qh * p4))
    rl = (e1 + e2) - (ql * p4 + q * _PIO2_REST)
    return rh, rl, q


def _reduce_any(b: WGSLBuilder, a: Value) -> tuple[Value, Value, Value]:
    """(rh, rl, quad) with a = quad pi/2 + rh + rl (mod 2 pi; quad an i32) for every finite
    a >= 0: :func:`_reduce_pio2` below 2^24, trig's Payne-Hanek in 32-bit integers
    (``_large_pio2_f32``) from 2^24 on, chosen per element by selects: llvmpipe runs both
    sides of a branch, so every invocation pays for both (about 120 integer statements and 20
    float ones; the benchmark chain measured 1.25-1.3x its time without them, same run). The
    integer digits cost less there than any float formulation: integer operations are short
    on llvmpipe (docs/architecture.md), and a constant table indexed per invocation measured
    slower than the select chains."""
    rh, rl, q = _reduce_pio2(b, a)
    bh, bl, bq = large_pio2_f32(b, a)
    large = b.cmp("oge", a, 2.0**24)
    return (
        b.select(large, bh, rh),
        b.select(large, bl, rl),
        b.select(large, bq, b.cast("fptosi", q, "i32")),
    )


def _sin_cos(b: WGSLBuilder, x: Value, cos: bool) -> Value:
    """float32 sin(x) or cos(x) for the GPU (see above); NaN for NaN and inf."""
    a = b.fabs(x)
    rh, rl, quad = _reduce_any(b, a)
    # Cephes' float32 kernels with the tail (trig's; ``keep`` hides their tails from
    # llvmpipe, which reassociates r + (p + t) into (r + p) + t and loses rl: 1.2 ulp)
    sin_r, cos_r = sin_kernel(b, rh, rl), cos_kernel(b, rh, rl)
    if cos:  # cos(x) = sin(x + pi/2)
        quad = quad + 1
    r = b.select(b.cmp("ne", quad & 1, 0), cos_r, sin_r)
    flip = (quad & 2) << 30  # (-1)^(quad >> 1) in the sign bit
    if not cos:  # sin is odd
        flip = flip ^ (b.cast("bitcast", x, "i32") & -(2**31))
    r = b.cast("bitcast", b.cast("bitcast", r, "i32") ^ flip, "float")
    return finite_only(b, x, r)


# exp and tanh: exp_log's float32 exp (k = rint(x log2 e) by a magic-constant add, a
# degree-6 polynomial on |r| <= ln2/2) with a cheaper reduction and scaling. The reduction
# r = (x - k C1) - k C2 takes ln 2 in two float32 pieces, C1 its leading 16 bits (k C1 and
# x - k C1 are exact for |k| <= 2^8) and C2 the rest rounded: the part of ln 2 left out, k
# times 2^-44, is 2^-36 of r's ulp, so the third piece and its product (what the CPU's fma
# path carries) buy nothing at float32. 2^k scales y in [0.7, 1.42] by adding k to y's
# exponent bits, exact wherever the result is a normal number: on llvmpipe the two-step
# multiply (which also rounds denormal results correctly) cost 1.8 ms of the benchmark
# chain's 22, the exponent add 0.2. Arguments whose result is not normal (beyond
# _EXP_NORMAL, and NaN) take their value from a select: inf above, NaN for NaN, and below a
# second exponent add 64 higher times 2^-64, which rounds the denormal result once (gradual
# underflow, as on the CPU), down to 0 below -104.

_LN2_16, _LN2_REST = _pieces(sum(Fraction(p) for p in CONSTANTS[F32]["ln2"]), 1, 16)
#: the x whose exp is a normal float32 (from 2^-126 up to the largest finite float32)
_EXP_NORMAL = (-87.33654022216797, 88.72283172607422)
_MAGIC_BITS = struct.unpack("<i", struct.pack("<f", ROUND_MAGIC))[0]


def _exp_parts(b: WGSLBuilder, x: Value) -> tuple[Value, Value]:
    """(y, k) with exp(x) = y 2^k, y in [0.7, 1.42] and k an i32, for |x| < 2^21 (NaN gives a
    NaN y); k comes from the bits of x log2(e) + 1.5 2^23, so no float-to-int conversion
    meets a NaN or a huge x."""
    t = b.fma(x, CONSTANTS[F32]["log2e"][0], ROUND_MAGIC)
    ki = b.cast("bitcast", t, "i32") - _MAGIC_BITS
    k = b.cast("sitofp", ki, "float")
    (c1,), c2 = _LN2_16, _LN2_REST
    r = (x - k * c1) - k * c2
    return 1.0 + b.keep(b.fma(r * r, horner(b, r, EXP_P32_SHORT), r)), ki


def _scale(b: WGSLBuilder, y: Value, k: Value) -> Value:
    """y 2^k by adding k to y's exponent: exact where y and the result are normal."""
    return b.cast("bitcast", b.cast("bitcast", y, "i32") + (k << 23), "float")


def _exp(b: WGSLBuilder, x: Value) -> Value:
    """float32 exp for the GPU (see above): within 1 ulp, the CPU's accuracy."""
    y, k = _exp_parts(b, x)
    lo, hi = _EXP_NORMAL
    low = b.cmp("olt", x, lo)
    tiny = _scale(b, y, k + 64) * 2.0**-64  # the denormal result, rounded once
    special = b.select(b.cmp("olt", x, -104.0), 0.0, x * float("inf"))  # NaN stays NaN
    special = b.select(low & b.cmp("oge", x, -104.0), tiny, special)
    return b.select(b.cmp("oge", x, lo) & b.cmp("ole", x, hi), _scale(b, y, k), special)


def _tanh(b: WGSLBuilder, x: Value) -> Value:
    """exp_log's float32 tanh (Cephes' polynomial below |x| = 0.625, else
    1 - 2 / (exp(2|x|) + 1)) on :func:`_exp_parts`; the sign goes on by one xor (the
    magnitude is never negative)."""
    a = b.fabs(x)
    z = x * x
    small = b.fma(a * z, horner(b, z, TANH_P[F32]), a)
    ac = b.select(b.cmp("olt", a, 9.1), a, 9.1)  # tanh rounds to 1 from 9.1 on
    y, k = _exp_parts(b, ac + ac)
    large = 1.0 - 2.0 / (_scale(b, y, k) + 1.0)
    r = b.select(b.cmp("ult", a, 0.625), small, large)  # NaN takes the small branch
    sign = b.cast("bitcast", x, "i32") & -(2**31)
    return b.cast("bitcast", b.cast("bitcast", r, "i32") ^ sign, "float")


def _tan(b: WGSLBuilder, x: Value) -> Value:
    """float32 tan for the GPU: :func:`_reduce_pio2` (its two parts renormalised), then
    trig's kernel (Cephes' tanf
    polynomial on rh, the tail rl carried to first order, and -1/tan for odd q with its
    residual 1 + inv th taken exactly by :meth:`WGSLBuilder.two_prod`, which the CPU's fma
    gives the CPU); NaN for NaN and inf."""
    a = b.fabs(x)
    rh, rl, quad = _reduce_any(b, a)
    # rl may exceed an ulp of rh (it also carries ql p4 + q rest, up to 2^-26) and -1/tan
    # takes it to first order only: near the poles rh is small and that cost 86 ulp
    rh, rl = two_sum(rh, rl)
    z = rh * rh
    th, tl = fast_two_sum(rh, rh * z * horner(b, z, TAN_P32))
    tl = tl + rl * (1.0 + th * th)  # tan(r + rl) = tan r + rl sec^2 r
    inv = -1.0 / th
    p, pe = b.two_prod(inv, th)  # 1 + inv th = (1 + p) + pe, 1 + p exact (p near -1)
    cot = inv + inv * ((b.keep(1.0 + p) + pe) + inv * tl)
    odd = b.cmp("ne", quad & 1, 0)
    r = b.select(odd, cot, th + b.keep(tl))
    sign = b.cast("bitcast", x, "i32") & -(2**31)  # tan is odd
    r = b.cast("bitcast", b.cast("bitcast", r, "i32") ^ sign, "float")
    return finite_only(b, x, r)


# lgamma and digamma in float32 alone (the CPU's float32 rounds the float64 algorithms of
# fungrad/lax/special_math.py, which WGSL cannot run). Both shift the argument by the
# recurrence into a unit interval around a zero of the function, where a polynomial fitted
# here (float32 minimax coefficients, relative error 1.6e-8 / 1.7e-8) keeps relative accuracy
# next to that zero, and use asymptotic series for large arguments and reflection for small
# or negative ones, as the references do. Special values are the CPU's: lgamma is inf at the
# poles (non-positive integers) and at +-inf; digamma NaN at the poles and -inf.

#: lgamma(2 + t) = t Q(t) on |t| <= 1/2 (Q from degree 0 up)
_LGAMMA_Q = (
    0.42278432846069336,
    0.32246702909469604,
    -0.06735147535800934,
    0.02058136649429798,
    -0.007401768583804369,
    0.002880220767110586,
    -0.0010892102727666497,
    0.0005687252851203084,
    -0.0004411507397890091,
)
#: digamma(X0 + t) = t P(t) for X0 + t in [1, 2] (P from degree 0 up); X0 its positive zero
_DIGAMMA_P = (
    0.9676722288131714,
    -0.44276314973831177,
    0.2585020065307617,
    -0.16394318640232086,
    0.10777637362480164,
    -0.07222438603639603,
    0.049133479595184326,
    -0.03257238119840622,
    0.021707767620682716,
    -0.019289040938019753,
    0.012495246715843678,
)
_X0 = Fraction("1.46163214496836234126265954232572132846819620400644635129598840859878644")
(_X0_HI,), _X0_LO = _pieces(_X0, 1, 24)
(_X0M1_HI,), _X0M1_LO = _pieces(_X0 - 1, 1, 24)
_LGAMMA_SHIFT = 8.5  # lgamma: the polynomial below (up to 6 factors), Stirling's series above
_DIGAMMA_SHIFT = 6.0  # digamma: up to 4 recurrence steps below, the asymptotic series above


def _poly_up(b: WGSLBuilder, t: Value, coeffs) -> Value:
    return horner(b, t, coeffs[::-1])


def _lgamma_positive(b: WGSLBuilder, x: Value) -> Value:
    """log |Gamma(x)| for finite x > -1/2 (not 0): x = (t + 2) + k with k = rint(x) - 2 in
    -2..6 below 8.5, |t| <= 1/2 exact, and log Gamma(x) = t Q(t) + log of the recurrence's
    factors ((x - 1) ... (x - k), or 1 / (x (x + 1)) down to k = -2); Stirling's series from
    8.5 on, (x - 1/2)(log x - 1) + log(2 pi)/2 - 1/2 + 1/(12 x) - 1/(360 x^3) + 1/(1260 x^5).
    One log serves both: of the factors' product below 8.5, of x above."""
    small = b.cmp("olt", x, _LGAMMA_SHIFT)
    xs = b.select(small, x, 2.0)
    n = b.rint(xs)  # k + 2: 0 .. 8
    t = xs - n  # exact
    prod = b.select(
        b.cmp("olt", n, 1.0), b.fabs(xs) * (xs + 1.0), b.select(b.cmp("olt", n, 2.0), xs, 1.0)
    )
    for j in range(1, 7):  # (x - 1) ... (x - k) for k = n - 2 >= j, in this order: ``keep``
        # stops Mesa from reordering the chain of products (4318 of 400000 off by an ulp)
        prod = b.keep(prod * b.select(b.cmp("oge", n, j + 2.0), xs - float(j), 1.0))
    log = b.call("fg_log_f32", b.select(small, prod, x))
    poly = t * _poly_up(b, t, _LGAMMA_Q) + b.select(b.cmp("olt", n, 2.0), -log, log)
    w = 1.0 / x
    series = w * horner(b, w * w, (1.0 / 1260, -1.0 / 360, 1.0 / 12))
    stirling = ((x - 0.5) * (log - 1.0) + (HALF_LOG_2PI - 0.5)) + series
    return b.select(small, poly, stirling)


def _lgamma(b: WGSLBuilder, x: Value) -> Value:
    """float32 log |Gamma(x)|: x <= -1/2 by reflection, log(pi / |sin(pi x)|) - lgamma(1 - x)
    (x - rint(x) is exact, so sin(pi x) keeps its relative accuracy)."""
    inf = float("inf")
    finite = b.select(b.cmp("olt", b.fabs(x), inf), x, 1.0)
    refl = b.cmp("ole", finite, -0.5)
    lg = _lgamma_positive(b, b.select(refl, 1.0 - finite, finite))
    sin_pi = b.fabs(b.call("fg_sin_f32", math.pi * (finite - b.rint(finite))))
    lg = b.select(refl, (LOG_PI - b.call("fg_log_f32", sin_pi)) - lg, lg)
    pole = b.cmp("ole", x, 0.0) & b.cmp("oeq", b.rint(x), x)
    lg = b.select(pole | b.cmp("oeq", b.fabs(x), inf), inf, lg)
    return b.select(b.cmp("uno", x, x), x, lg)


def _digamma_positive(b: WGSLBuilder, x: Value) -> Value:
    """psi(x) for finite x >= 1/2: below 6, psi(y) + 1/y + ... + 1/(y + n - 1) with
    y = x - n in [1, 2) (n = -1 for x < 1: psi(x + 1) - 1/x) and psi(y) = t P(t), t = y - X0
    in two exact steps; from 6 on, log x - 1/(2x) - sum B_2k / (2k x^2k)."""
    small = b.cmp("olt", x, _DIGAMMA_SHIFT)
    xs = b.select(small, x, 1.5)
    n = b.intrinsic("floor", xs) - 1.0  # -1 .. 4
    below = b.cmp("olt", n, 0.0)
    y = xs - n  # exact, except x + 1 for x < 1 (t below does not use it)
    t = (b.select(below, xs, y) - b.select(below, _X0M1_HI, _X0_HI, "float")) - b.select(
        below, _X0M1_LO, _X0_LO, "float"
    )
    acc = t * _poly_up(b, t, _DIGAMMA_P) - b.select(below, 1.0 / xs, 0.0)
    for j in range(4):
        acc = acc + b.select(b.cmp("oge", n, j + 1.0), 1.0 / (y + float(j)), 0.0)
    z = 1.0 / (x * x)
    series = z * horner(b, z, (1.0 / 132, -1.0 / 240, 1.0 / 252, -1.0 / 120, 1.0 / 12))
    large = (b.call("fg_log_f32", b.select(small, 1.0, x)) - 0.5 / x) - series
    return b.select(small, acc, large)


def _digamma(b: WGSLBuilder, x: Value) -> Value:
    """float32 psi(x): x < 1/2 by reflection, psi(1 - x) - pi cot(pi x)."""
    inf = float("inf")
    refl = b.cmp("olt", x, 0.5)
    xr = b.select(refl, 1.0 - x, x)
    psi = _digamma_positive(b, b.select(b.cmp("olt", b.fabs(xr), inf), xr, 1.0))
    # pi cot(pi f), f = x - rint(x) exact: beyond |f| = 1/4 as -pi tan(pi (f -+ 1/2)), since
    # pi f rounds and tan amplifies that near pi/2 (measured: 4.9 ulp). pi g = ph + pl in
    # two parts and tan(ph + pl) = t + pl (1 + t^2), and the quotient pi / tan corrected by
    # its exact residual: next to 0 the result is that quotient, and the rounding of pi g and
    # of the division (up to 2.5 ulp on some GPUs) had cost 2.65 ulp on the H100
    f = x - b.rint(x)
    near = b.cmp("ole", b.fabs(f), 0.25)
    g = b.select(near, f, f - b.copysign(0.5, f))
    pi_hi, pi_lo = CONSTANTS[F32]["pi"]
    ph, pe = b.two_prod(g, pi_hi)
    t = b.call("fg_tan_f32", ph)
    tl = (pe + g * pi_lo) * (1.0 + t * t)
    q = pi_hi / t
    cot = q + (b.fma_exact(-q, t, pi_hi) + (pi_lo - q * tl)) / t
    far = -(pi_hi * t + (pi_hi * tl + pi_lo * t))
    psi = b.select(refl, psi - b.select(near, cot, far), psi)
    pole = b.cmp("ole", x, 0.0) & b.cmp("oeq", b.rint(x), x)
    psi = b.select(b.cmp("oeq", x, inf), inf, psi)
    bad = pole | b.cmp("uno", x, x) | b.cmp("oeq", x, -inf)
    return b.select(bad, float("nan"), psi)


FUNCTIONS: dict[str, tuple[int, Callable[..., Value]]] = {
    "sin": (1, lambda b, x: _sin_cos(b, x, False)),
    "cos": (1, lambda b, x: _sin_cos(b, x, True)),
    "tan": (1, _tan),
    "exp": (1, _exp),
    "tanh": (1, _tanh),
    "lgamma": (1, _lgamma),
    "digamma": (1, _digamma),
}
"""Name -> (arity, emitter) of the functions formulated here; they take the GPU's place of
the shared algorithm of the same name."""
