"""The special functions, written once against the math builder (``builder``): erf and erfc
(fdlibm), lgamma, digamma and erf_inv (the float64 algorithms of fungrad/lax/special_math.py;
float32 rounds their float64 result once). Accuracy and edge cases: ``functions``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from fungrad.lowering.math.builder import F32, Builder, Value
from fungrad.lowering.math.exp_log import exp_kernel
from fungrad.lowering.math.numeric import fast_two_sum, horner, nan_in_nan_out, two_sum

__all__ = ["FUNCTIONS", "HALF_LOG_2PI", "LOG_PI"]


# ----------------------------------------------------------------------------------------------
# erf/erfc: fdlibm s_erf.c (float32 uses the same coefficients rounded, as FreeBSD s_erff.c);
# the four intervals' rational functions are evaluated once, with per-lane selected coefficients.

_ERX = 8.45062911510467529297e-01
_ERF_PQ = (  # (P ascending, Q ascending) per interval
    (
        (
            1.28379167095512558561e-01,
            -3.25042107247001499370e-01,
            -2.84817495755985104766e-02,
            -5.77027029648944159157e-03,
            -2.37630166566501626084e-05,
        ),
        (
            1.0,
            3.97917223959155352819e-01,
            6.50222499887672944485e-02,
            5.08130628187576562776e-03,
            1.32494738004321644526e-04,
            -3.96022827877536812320e-06,
        ),
    ),
    (
        (
            -2.36211856075265944077e-03,
            4.14856118683748331666e-01,
            -3.72207876035701323847e-01,
            3.18346619901161753674e-01,
            -1.10894694282396677476e-01,
            3.54783043256182359371e-02,
            -2.16637559486879084300e-03,
        ),
        (
            1.0,
            1.06420880400844228286e-01,
            5.40397917702171048937e-01,
            7.18286544141962662868e-02,
            1.26171219808761642112e-01,
            1.36370839120290507362e-02,
            1.19844998467991074170e-02,
        ),
    ),
    (
        (
            -9.86494403484714822705e-03,
            -6.93858572707181764372e-01,
            -1.05586262253232909814e01,
            -6.23753324503260060396e01,
            -1.62396669462573470355e02,
            -1.84605092906711035994e02,
            -8.12874355063065934246e01,
            -9.81432934416914548592e00,
        ),
        (
            1.0,
            1.96512716674392571292e01,
            1.37657754143519042600e02,
            4.34565877475229228821e02,
            6.45387271733267880336e02,
            4.29008140027567833386e02,
            1.08635005541779435134e02,
            6.57024977031928170135e00,
            -6.04244152148580987438e-02,
        ),
    ),
    (
        (
            -9.86494292470009928597e-03,
            -7.99283237680523006574e-01,
            -1.77579549177547519889e01,
            -1.60636384855821916062e02,
            -6.37566443368389627722e02,
            -1.02509513161107724954e03,
            -4.83519191608651397019e02,
        ),
        (
            1.0,
            3.03380607434824582924e01,
            3.25792512996573918826e02,
            1.53672958608443695994e03,
            3.19985821950859553908e03,
            2.55305040643316442583e03,
            4.74528541206955367215e02,
            -2.24409524465858183362e01,
        ),
    ),
)


def _erf_parts(b: Builder, x: Value, a_max: float):
    """Interval masks of |x|, the rational function value, and exp(-x^2 - 0.5625 + rat)/|x|,
    with |x| limited to a_max (beyond it the result is a constant; this also keeps erf free
    of slow denormal arithmetic)."""
    a = b.select(b.cmp("olt", b.fabs(x), a_max), b.fabs(x), a_max)
    i0 = b.cmp("olt", a, 0.84375)
    i1 = b.cmp("olt", a, 1.25)
    i2 = b.cmp("olt", a, 1.0 / 0.35)
    inv = 1.0 / (a * a)
    v = b.select(i0, a * a, b.select(i1, a - 1.0, inv))

    def coeff(kind: int, i: int):
        vals = [pq[kind][i] if i < len(pq[kind]) else 0.0 for pq in _ERF_PQ]
        last = b.select(i2, vals[2], vals[3], x.ty)
        return b.select(i0, vals[0], b.select(i1, vals[1], last))

    num = horner(b, v, [coeff(0, i) for i in range(7, -1, -1)])
    den = horner(b, v, [coeff(1, i) for i in range(8, -1, -1)])
    rat = num / den
    # exp(-a^2 - 0.5625 + rat) with -a^2 exact as h + l (fdlibm truncates a instead)
    h, l = b.two_prod(a, a)
    s1, e1 = fast_two_sum(-h, -0.5625)
    s2, e2 = fast_two_sum(s1, rat)
    big = exp_kernel(b, s2, (e1 + e2) - l) / a
    return a, i0, i1, rat, big


def _erf(b: Builder, x: Value) -> Value:
    a, i0, i1, rat, big = _erf_parts(b, x, 6.0)
    r = b.select(i0, b.fma(a, rat, a), b.select(i1, _ERX + rat, 1.0 - big))
    r = b.select(b.cmp("oge", a, 6.0), 1.0, r)
    return nan_in_nan_out(b, x, b.copysign(r, x))


def _erfc(b: Builder, x: Value) -> Value:
    a, i0, i1, rat, big = _erf_parts(b, x, 28.0)
    pos = b.cmp("ogt", x, 0.0)
    h, e = two_sum(1.0, -x)
    r0 = h + b.fma_exact(-x, rat, e)  # 1 - x - x rat with one rounding (fdlibm rounds twice)
    r1 = b.select(pos, (1.0 - _ERX) - rat, 1.0 + b.keep(_ERX + rat))
    r2 = b.select(pos, big, 2.0 - big)
    r = b.select(i0, r0, b.select(i1, r1, r2))
    r = b.select(b.cmp("oge", a, 28.0), b.select(pos, 0.0, 2.0, x.ty), r)
    return nan_in_nan_out(b, x, r)


# ----------------------------------------------------------------------------------------------
# lgamma, digamma, erf_inv: the float64 algorithms of fungrad/lax/special_math.py (the numpy
# impls of these primitives), operation for operation, on top of the functions above; float32
# extends to float64 and rounds once, as the impls do (``_via_float64``). Integer tests use
# x == rint(x) (rint is exact; floor is not in the intrinsic set).

_LANCZOS_G = 7.0
_LANCZOS_P = (
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
)
HALF_LOG_2PI = 0.91893853320467274178
LOG_PI = 1.14472988584940017414


def _via_f64(b: Builder, name: str, x: Value) -> Value:
    """A float32 function as its float64 version, rounded once."""
    return b.cast("fptrunc", b.call(f"fg_{name}_f64", b.cast("fpext", x, "double")), "float")


def _is_integer(b: Builder, x: Value) -> Value:
    return b.cmp("oeq", b.rint(x), x)


def _lgamma_lanczos(b: Builder, x: Value) -> Value:
    """log Gamma(x) for x >= 0.5 (Lanczos, g = 7, n = 9)."""
    z = x - 1.0
    s = b.lift(_LANCZOS_P[0], x.ty)
    for k, p in enumerate(_LANCZOS_P[1:], start=1):
        s = s + p / (z + float(k))
    t = z + (_LANCZOS_G + 0.5)
    log_t = b.call("fg_log_f64", t)
    return ((HALF_LOG_2PI + (z + 0.5) * (log_t - 1.0)) - _LANCZOS_G) + b.call("fg_log_f64", s)


def _lgamma(b: Builder, x: Value) -> Value:
    if x.ft is F32:
        return _via_f64(b, "lgamma", x)
    inf = float("inf")
    finite = b.select(b.cmp("olt", b.fabs(x), inf), x, 1.0)
    # x >= 0.5 directly; |x| < 0.5 by Gamma(x) = Gamma(1 + x) / x; x <= -0.5 by reflection
    arg = b.select(
        b.cmp("oge", finite, 0.5),
        finite,
        b.select(b.cmp("ogt", finite, -0.5), 1.0 + finite, 1.0 - finite),
    )
    lg = _lgamma_lanczos(b, arg)
    lg = b.select(b.cmp("olt", b.fabs(finite), 0.5), lg - b.call("fg_log_f64", b.fabs(finite)), lg)
    sin_pi = b.fabs(b.call("fg_sin_f64", math.pi * (finite - b.rint(finite))))
    refl = (LOG_PI - b.call("fg_log_f64", sin_pi)) - lg
    lg = b.select(b.cmp("ole", finite, -0.5), refl, lg)
    pole = b.cmp("ole", x, 0.0) & _is_integer(b, x)
    lg = b.select(pole | b.cmp("oeq", b.fabs(x), inf), inf, lg)
    return nan_in_nan_out(b, x, lg)


_DIGAMMA_ASYMPTOTIC = (
    1.0 / 12,
    -1.0 / 120,
    1.0 / 252,
    -1.0 / 240,
    1.0 / 132,
    -691.0 / 32760,
    1.0 / 12,
)


def _digamma_positive(b: Builder, x: Value) -> Value:
    """psi(x) for finite x >= 0.5: ten recurrence steps up to x >= 10, then the asymptotic
    series."""
    acc = b.lift(0.0, x.ty)
    for _ in range(10):
        small = b.cmp("olt", x, 10.0)
        acc = acc - b.select(small, 1.0 / x, 0.0)
        x = b.select(small, x + 1.0, x)
    z = 1.0 / (x * x)
    series = b.lift(0.0, x.ty)
    for c in reversed(_DIGAMMA_ASYMPTOTIC):
        series = (series + c) * z
    return ((acc + b.call("fg_log_f64", x)) - 0.5 / x) - series


def _digamma(b: Builder, x: Value) -> Value:
    if x.ft is F32:
        return _via_f64(b, "digamma", x)
    inf = float("inf")
    refl = b.cmp("olt", x, 0.5)
    xr = b.select(refl, 1.0 - x, x)
    psi = _digamma_positive(b, b.select(b.cmp("olt", b.fabs(xr), inf), xr, 1.0))
    cot = math.pi / b.call("fg_tan_f64", math.pi * (x - b.rint(x)))
    psi = b.select(refl, psi - cot, psi)
    pole = b.cmp("ole", x, 0.0) & _is_integer(b, x)
    psi = b.select(b.cmp("oeq", x, inf), inf, psi)
    bad = pole | b.cmp("uno", x, x) | b.cmp("oeq", x, -inf)
    return b.select(bad, float("nan"), psi)


# Giles, "Approximating the erfinv function" (GPU Computing Gems 2, 2011), double precision:
# erf_inv(a) = a p(w), w = -log((1 - a)(1 + a)), p a polynomial in w - 3.125 (w < 6.25), in
# sqrt(w) - 3.25 (w < 16) or in sqrt(w) - 5; coefficients from the highest degree down.
_GILES_64 = (
    (
        -3.6444120640178196996e-21,
        -1.685059138182016589e-19,
        1.2858480715256400167e-18,
        1.115787767802518096e-17,
        -1.333171662854620906e-16,
        2.0972767875968561637e-17,
        6.6376381343583238325e-15,
        -4.0545662729752068639e-14,
        -8.1519341976054721522e-14,
        2.6335093153082322977e-12,
        -1.2975133253453532498e-11,
        -5.4154120542946279317e-11,
        1.051212273321532285e-09,
        -4.1126339803469836976e-09,
        -2.9070369957882005086e-08,
        4.2347877827932403518e-07,
        -1.3654692000834678645e-06,
        -1.3882523362786468719e-05,
        0.0001867342080340571352,
        -0.00074070253416626697512,
        -0.0060336708714301490533,
        0.24015818242558961693,
        1.6536545626831027356,
    ),
    (
        2.2137376921775787049e-09,
        9.0756561938885390979e-08,
        -2.7517406297064545428e-07,
        1.8239629214389227755e-08,
        1.5027403968909827627e-06,
        -4.013867526981545969e-06,
        2.9234449089955446044e-06,
        1.2475304481671778723e-05,
        -4.7318229009055733981e-05,
        6.8284851459573175448e-05,
        2.4031110387097893999e-05,
        -0.0003550375203628474796,
        0.00095328937973738049703,
        -0.0016882755560235047313,
        0.0024914420961078508066,
        -0.0037512085075692412107,
        0.005370914553590063617,
        1.0052589676941592334,
        3.0838856104922207635,
    ),
    (
        -2.7109920616438573243e-11,
        -2.5556418169965252055e-10,
        1.5076572693500548083e-09,
        -3.7894654401267369937e-09,
        7.6157012080783393804e-09,
        -1.4960026627149240478e-08,
        2.9147953450901080826e-08,
        -6.7711997758452339498e-08,
        2.2900482228026654717e-07,
        -9.9298272942317002539e-07,
        4.5260625972231537039e-06,
        -1.9681778105531670567e-05,
        7.5995277030017761139e-05,
        -0.00021503011930044477347,
        -0.00013871931833623122026,
        1.0103004648645343977,
        4.8499064014085844221,
    ),
)
_2_SQRT_PI = 2.0 * 5.6418958354775628695e-1
_ERF_INV_STEPS = (1, 1)  # Halley steps in the centre, Newton steps in the tail


def _erf_small(b: Builder, y: Value) -> Value:
    """erf(y) for 0 <= y < 0.84375 (fdlibm's first interval: y + y P(y^2) / Q(y^2))."""
    p, q = _ERF_PQ[0]
    z = y * y
    return b.fma(y, horner(b, z, p[::-1]) / horner(b, z, q[::-1]), y)


def _erf_inv(b: Builder, x: Value) -> Value:
    """Giles' double-precision approximation polished like the reference: Halley steps on
    erf(y) = a in the centre (a <= 1/2, where y < 0.48 needs only erf's first interval),
    Newton steps on log(erfc(y) / (1 - a)) in the tail (full relative accuracy as a -> 1).
    The reference starts from Giles' single-precision guess and takes four steps; from this
    guess one step reaches the same fixed point. float32 needs no step: the guess is within
    4 ulp of float64, so it rounds to the reference's float32 result."""
    if x.ft is F32:
        return b.cast("fptrunc", _erf_inv_f64(b, b.cast("fpext", x, "double"), (0, 0)), "float")
    return _erf_inv_f64(b, x, _ERF_INV_STEPS)


def _erf_inv_f64(b: Builder, x: Value, steps: tuple[int, int]) -> Value:
    a = b.fabs(x)
    a_in = b.select(b.cmp("olt", a, 1.0), a, 0.0)
    w = -b.call("fg_log_f64", (1.0 - a_in) * (1.0 + a_in))
    sw = b.sqrt(w)
    mid = b.cmp("olt", w, 6.25)
    v = b.select(mid, w - 3.125, b.select(b.cmp("olt", w, 16.0), sw - 3.25, sw - 5.0))
    hi = b.cmp("olt", w, 16.0)

    def coeff(i: int):
        c = [p[i - (23 - len(p))] if i >= 23 - len(p) else 0.0 for p in _GILES_64]
        return b.select(mid, c[0], b.select(hi, c[1], c[2], x.ty))

    y0 = horner(b, v, [coeff(i) for i in range(23)]) * a_in
    tail = b.cmp("ogt", a_in, 0.5)
    yc = b.select(tail, 0.0, y0)
    for _ in range(steps[0]):  # Halley on erf(y) = a
        slope = _2_SQRT_PI * b.call("fg_exp_f64", -yc * yc)
        step = (_erf_small(b, yc) - a_in) / slope
        yc = yc - step / (1.0 + yc * step)
    yt = b.select(tail, y0, 1.0)
    one_minus_a = b.select(tail, 1.0 - a_in, 0.5)
    for _ in range(steps[1]):  # Newton on log(erfc(y) / (1 - a))
        slope = _2_SQRT_PI * b.call("fg_exp_f64", -yt * yt)
        ec = b.call("fg_erfc_f64", yt)
        yt = yt + (b.call("fg_log_f64", ec / one_minus_a) * ec) / slope
    y = b.select(tail, yt, yc)
    y = b.select(b.cmp("oeq", a, 1.0), float("inf"), y)
    y = b.select(b.cmp("ogt", a, 1.0), float("nan"), y)
    return nan_in_nan_out(b, x, b.copysign(y, x))


FUNCTIONS: dict[str, tuple[int, Callable[..., Value]]] = {
    "erf": (1, _erf),
    "erfc": (1, _erfc),
    "lgamma": (1, _lgamma),
    "digamma": (1, _digamma),
    "erf_inv": (1, _erf_inv),
}
"""Name -> (arity, emitter) of this module's functions."""
