"""Complex arithmetic on pairs of real values, for the split rules (``complex_rules.py``).

A complex value is a :class:`~fungrad.lowering.complex_split.Pair` ``(re, im)`` of real
values, tracers of the complex split's trace: each function here binds real primitives,
which append equations to the real program being built. The real helpers (``add``,
``select``, ``hypot``...) take Python numbers for constants of the other operand's dtype.

Formulas (the numerics follow numpy on ordinary values and C99 Annex G where it is cheap):

* ``cmul``: ``(ac - bd) + (ad + bc)i`` (numpy's loop, no fused multiply-add); ``cdiv``:
  Smith's algorithm exactly as numpy writes it (scale by the larger part of the divisor; a
  zero divisor gives complex inf/NaN);
* ``cabs``: ``sqrt(x^2 + y^2)``, both parts first scaled by a power of 2 where the squares
  would overflow or underflow; inf when a part is infinite (even with a NaN part, as
  ``hypot``);
* ``csqrt``: Kahan's ``t = sqrt((|x| + |z|) / 2)`` (halved first where the sum would
  overflow), then ``y / 2t`` or ``|y| / 2t``: no cancellation on either half-plane;
* ``cexp``: ``e^x (cos y + i sin y)``, exactly real when ``y == 0`` (so ``exp(inf) = inf``);
  like XLA, it overflows where ``e^x`` does even when ``e^x cos y`` would be finite;
* ``clog``: ``log|z| + i atan2(y, x)``, with ``log|z| = log1p((m - 1)(m + 1) + n^2) / 2`` for
  ``1/2 <= m <= 2`` (``m``, ``n`` the larger and smaller of ``|x|``, ``|y|``), accurate near
  ``|z| = 1``; ``clog1p`` and ``cexpm1`` keep their accuracy near 0 the same way;
* ``csin``, ``ccos``, ``ctan`` through ``csinh``, ``ccosh``, ``ctanh`` of ``iz``; ``ctanh`` by
  Kahan's formula (``tan y``, ``sinh x``), ``+-1`` beyond ``|x| = 20``;
* ``casin``, ``cacos``, ``cacosh`` by Kahan's formulas (``atan2`` and the real ``asinh`` of
  products of square roots, no cancellation), ``casinh`` and ``catan`` through ``casin`` and
  ``catanh`` of ``iz``; ``catanh`` as ``log1p(4x / ((1 - x)^2 + y^2)) / 4 + i atan2(2y,
  (1 - x)(1 + x) - y^2) / 2``;
* ``cpow``: ``exp(b log a)``, with numpy's special cases ``a ** 0 = 1`` and ``0 ** b = 0``
  for real ``b > 0`` (NaN for other ``b``); ``cinteger_pow`` by repeated squaring (and a
  division for negative powers);
* ``cmax``/``cmin`` compare lexicographically, as XLA: a comparison with NaN is false and
  picks the second operand.
"""

from __future__ import annotations

import math

import numpy as np

from fungrad import core
from fungrad.lowering.complex_split import Pair, constant

# ---------------------------------------------------------------------------------------------
# Real operations (Python numbers become constants of the other operand's dtype)


def _p(prim_name: str, /, *args, **params):
    return core.primitives[prim_name].bind(*args, **params)


def _two(x, y):
    if not isinstance(x, core.Tracer):
        x = constant(x, y.dtype)
    if not isinstance(y, core.Tracer):
        y = constant(y, x.dtype)
    return x, y


def add(x, y):
    return _p("add", *_two(x, y))


def sub(x, y):
    return _p("sub", *_two(x, y))


def mul(x, y):
    return _p("mul", *_two(x, y))


def div(x, y):
    return _p("div", *_two(x, y))


def neg(x):
    return _p("neg", x)


def _cmp(name):
    return lambda x, y: _p(name, *_two(x, y))


lt, le, gt, ge, eq, ne = (_cmp(n) for n in ("lt", "le", "gt", "ge", "eq", "ne"))


def and_(x, y):
    return _p("and", x, y)


def or_(x, y):
    return _p("or", x, y)


def not_(x):
    return _p("not", x)


def _un(name):
    return lambda x: _p(name, x)


rabs, sqrt, exp, log, log1p, expm1 = map(_un, ("abs", "sqrt", "exp", "log", "log1p", "expm1"))
sin, cos, tan, sinh, cosh, asinh = map(_un, ("sin", "cos", "tan", "sinh", "cosh", "asinh"))


def atan2(y, x):
    return _p("atan2", *_two(y, x))


def rmax(x, y):
    return _p("max", *_two(x, y))


def rmin(x, y):
    return _p("min", *_two(x, y))


def _shape_of(*xs):
    shapes = [x.shape for x in xs if isinstance(x, core.Tracer) and x.shape]
    return shapes[0] if shapes else ()


def broadcast(x, shape):
    """``x`` (0-d or already of ``shape``) of ``shape``."""
    if x.shape == tuple(shape):
        return x
    return _p("broadcast_in_dim", x, shape=tuple(shape), broadcast_dimensions=())


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` else ``on_false`` (0-d cases broadcast)."""
    on_true, on_false = _two(on_true, on_false)
    shape = _shape_of(pred, on_true, on_false)
    return _p("select_n", pred, broadcast(on_false, shape), broadcast(on_true, shape))


def is_nan(x):
    return ne(x, x)


def is_inf(x):
    return eq(rabs(x), math.inf)


def signbit(x):
    """Whether the sign bit of float ``x`` is set (-0.0 and NaNs with the bit included)."""
    int_dtype = np.dtype(f"int{8 * x.dtype.itemsize}")
    bits = _p("bitcast_convert_type", x, new_dtype=int_dtype)
    return lt(bits, constant(0, int_dtype))


def copysign(mag, sgn):
    """``|mag|`` with the sign of ``sgn`` (a Python number ``mag`` in ``sgn``'s dtype)."""
    if isinstance(mag, (int, float)):
        mag = constant(mag, sgn.dtype)
    a = rabs(mag)
    return select(signbit(sgn), neg(a), a)


def zeros_like(x):
    return broadcast(constant(0, x.dtype), x.shape)


# ---------------------------------------------------------------------------------------------
# Complex operations on pairs


def as_pair(x) -> Pair:
    """A complex operand as a Pair (a real value gets a zero imaginary part)."""
    return x if type(x) is Pair else Pair(x, constant(0, x.dtype))


def cadd(a, b):
    return Pair(add(a.re, b.re), add(a.im, b.im))


def csub(a, b):
    return Pair(sub(a.re, b.re), sub(a.im, b.im))


def cneg(a):
    return Pair(neg(a.re), neg(a.im))


def cmul(a, b):
    return Pair(sub(mul(a.re, b.re), mul(a.im, b.im)), add(mul(a.re, b.im), mul(a.im, b.re)))


def cscale(a, s):
    """``a`` times the real ``s``."""
    return Pair(mul(a.re, s), mul(a.im, s))


def cdiv(a, b):
    """``a / b`` by Smith's algorithm (numpy's form) with XLA's recovery of NaN + NaN*j
    results (a zero divisor, an infinite numerator or an infinite divisor;
    ``lax/complex_math.py`` ``div``, the eager impl, computes the same formulas)."""
    ar, ai, br, bi = a.re, a.im, b.re, b.im
    # Smith's algorithm as numpy's loop writes it (the same bits for ordinary values)
    first = ge(rabs(br), rabs(bi))  # (false with a NaN)
    r1 = div(bi, br)
    s1 = div(1.0, add(br, mul(bi, r1)))
    r2 = div(br, bi)
    s2 = div(1.0, add(bi, mul(br, r2)))
    re = select(first, mul(add(ar, mul(ai, r1)), s1), mul(add(mul(ar, r2), ai), s2))
    im = select(first, mul(sub(ai, mul(ar, r1)), s1), mul(sub(mul(ai, r2), ar), s2))
    # recovery of NaN + NaN*j
    zero_den = and_(and_(eq(br, 0.0), eq(bi, 0.0)), not_(and_(is_nan(ar), is_nan(ai))))
    one, zero = constant(1.0, br.dtype), constant(0.0, br.dtype)
    s = copysign(constant(math.inf, br.dtype), br)
    a_inf_r, a_inf_i = is_inf(ar), is_inf(ai)
    inf_num = and_(or_(a_inf_r, a_inf_i), and_(is_finite(br), is_finite(bi)))
    ur = copysign(select(a_inf_r, one, zero), ar)
    ui = copysign(select(a_inf_i, one, zero), ai)
    b_inf_r, b_inf_i = is_inf(br), is_inf(bi)
    inf_den = and_(or_(b_inf_r, b_inf_i), and_(is_finite(ar), is_finite(ai)))
    vr = copysign(select(b_inf_r, one, zero), br)
    vi = copysign(select(b_inf_i, one, zero), bi)
    re_fix = select(
        zero_den,
        mul(s, ar),
        select(
            inf_num,
            mul(math.inf, add(mul(ur, br), mul(ui, bi))),
            select(inf_den, mul(0.0, add(mul(ar, vr), mul(ai, vi))), re),
        ),
    )
    im_fix = select(
        zero_den,
        mul(s, ai),
        select(
            inf_num,
            mul(math.inf, sub(mul(ui, br), mul(ur, bi))),
            select(inf_den, mul(0.0, sub(mul(ai, vr), mul(ar, vi))), im),
        ),
    )
    both_nan = and_(is_nan(re), is_nan(im))
    return Pair(select(both_nan, re_fix, re), select(both_nan, im_fix, im))


def is_finite(x):
    return lt(rabs(x), math.inf)


def _limits(dtype):
    """(small, big): where ``x * x`` neither underflows nor overflows for ``small < |x| <
    big``."""
    return (2.0**-60, 2.0**60) if np.dtype(dtype).itemsize == 4 else (2.0**-500, 2.0**500)


def hypot(x, y):
    """``sqrt(x^2 + y^2)`` without overflow or underflow: where the larger part is outside
    ``_limits``, both parts are first scaled by a power of 2 (exact) that brings the squares
    into the normal range (1 ulp, like the direct formula, and no division); inf if either
    part is infinite (even with a NaN, as C's ``hypot``)."""
    m = rmax(rabs(x), rabs(y))
    small, big = _limits(x.dtype)
    k = 66 if x.dtype.itemsize == 4 else 600  # big: m / 2^k squares below the maximum
    j = 100 if x.dtype.itemsize == 4 else 600  # small: 2^j times a subnormal squares normally
    dt = x.dtype
    hi, lo = gt(m, big), lt(m, small)
    s = select(hi, constant(2.0**-k, dt), select(lo, constant(2.0**j, dt), 1.0))
    inv = select(hi, constant(2.0**k, dt), select(lo, constant(2.0**-j, dt), 1.0))
    xs, ys = mul(x, s), mul(y, s)
    h = mul(sqrt(add(mul(xs, xs), mul(ys, ys))), inv)
    return select(or_(is_inf(x), is_inf(y)), math.inf, h)


def cabs(z):
    return hypot(z.re, z.im)


def _log_modulus(x, y):
    """``log |x + iy|``: ``log1p((m - 1)(m + 1) + n^2) / 2`` near ``|z| = 1``, else
    ``log m + log1p((n/m)^2) / 2`` (no overflow for the largest finite values); inf when a
    part is infinite."""
    ax, ay = rabs(x), rabs(y)
    m, n = rmax(ax, ay), rmin(ax, ay)
    r = div(n, select(eq(m, 0.0), 1.0, m))
    near = and_(ge(m, 0.5), le(m, 2.0))
    arg = select(near, add(mul(sub(m, 1.0), add(m, 1.0)), mul(n, n)), mul(r, r))
    out = add(select(near, constant(0, x.dtype), log(m)), mul(0.5, log1p(arg)))
    return select(or_(is_inf(x), is_inf(y)), math.inf, out)


def clog(z):
    return Pair(_log_modulus(z.re, z.im), atan2(z.im, z.re))


def _exp_times(f, x):
    """``f * e^x`` without overflowing where the product is finite: beyond the point where
    ``e^x`` overflows, as four factors ``e^(x/4)`` (``x / 4`` is exact, and each factor finite
    wherever the product can be, for ``|f|`` down to the tiniest subnormal)."""
    q = exp(mul(x, 0.25))
    limit = 88.0 if x.dtype.itemsize == 4 else 709.0
    return select(gt(x, limit), mul(mul(mul(mul(f, q), q), q), q), mul(exp(x), f))


def cexp(z):
    x, y = z
    re, im = _exp_times(cos(y), x), _exp_times(sin(y), x)
    im = select(eq(y, 0.0), y, im)  # exp of a real number is real (exp(inf) = inf)
    # exp(-inf + iy) = 0 and exp(inf + iy) = inf + i nan for an infinite or NaN y (C99)
    odd_y = not_(_p("is_finite", y))
    vanish, blow = and_(eq(x, -math.inf), odd_y), and_(eq(x, math.inf), odd_y)
    re, im = select(blow, math.inf, re), select(blow, math.nan, im)
    return Pair(select(vanish, 0.0, re), select(vanish, 0.0, im))


def csqrt(z):
    x, y = z
    # scaled by a power of 4 where |x| + |z| would overflow or lose the bits of subnormals
    small, big = (2.0**-100, 2.0**124) if x.dtype.itemsize == 4 else (2.0**-900, 2.0**1020)
    m = rmax(rabs(x), rabs(y))
    up, down = lt(m, small), gt(m, big)
    dt = x.dtype
    scale_in = select(up, constant(1 / small, dt), select(down, constant(0.25, dt), 1.0))
    scale_out = select(up, constant(math.sqrt(small), dt), select(down, constant(2, dt), 1.0))
    x, y = mul(x, scale_in), mul(y, scale_in)
    ax, ay = rabs(x), rabs(y)
    a = hypot(x, y)
    t = sqrt(mul(add(ax, a), 0.5))
    two_t = add(t, t)
    right = ge(x, 0.0)
    re = mul(select(right, t, div(ay, two_t)), scale_out)
    im = mul(select(right, div(y, two_t), copysign(t, y)), scale_out)
    zero = eq(a, 0.0)
    re, im = select(zero, 0.0, re), select(zero, y, im)
    inf_y = is_inf(y)  # sqrt(x +- i inf) = inf +- i inf, for any x
    return Pair(select(inf_y, math.inf, re), select(inf_y, y, im))


def one_like(z):
    return Pair(constant(1, z.re.dtype), constant(0, z.re.dtype))


def _hyperbolic_times(f, x, odd: bool):
    """``f * sinh(x)`` (``odd``) or ``f * cosh(x)`` without overflowing where the product is
    finite: beyond the point where cosh overflows, ``e^|x| / 2`` as four factors ``e^(|x|/4)``
    (``sin(3e38 + 90i)``'s imaginary part is finite in float32, though cosh(90) is not)."""
    direct = mul(sinh(x) if odd else cosh(x), f)
    q = exp(mul(rabs(x), 0.25))  # |x| / 4 is exact; e^(|x|/4) finite wherever the product is
    far = mul(mul(mul(mul(mul(f, q), 0.5), q), q), q)  # (0.5 * f first would flush a tiny f)
    if odd:
        far = mul(far, _p("sign", x))
    limit = 88.0 if x.dtype.itemsize == 4 else 709.0
    return select(gt(rabs(x), limit), far, direct)


def csinh(z):
    x, y = z
    re, im = _hyperbolic_times(cos(y), x, True), _hyperbolic_times(sin(y), x, False)
    # exact zeros stay (C99's csinh(0 + i inf) = 0 + nan*i, csinh(nan + 0i) = nan + 0i)
    re = select(and_(is_inf(x), not_(is_finite(y))), x, re)  # C99: +-inf + nan*i
    return Pair(select(eq(x, 0.0), _zero_times(x, cos(y)), re), select(eq(y, 0.0), y, im))


def ccosh(z):
    x, y = z
    re, im = _hyperbolic_times(cos(y), x, False), _hyperbolic_times(sin(y), x, True)
    im = select(eq(x, 0.0), _zero_times(x, sin(y)), im)  # C99: ccosh(0 + i inf) = nan + 0i
    re = select(and_(is_inf(x), not_(is_finite(y))), rabs(x), re)  # C99: inf + nan*i
    sign_x = select(is_nan(x), constant(1.0, x.dtype), _p("sign", x))  # ccosh(nan) = nan + 0i
    return Pair(re, select(eq(y, 0.0), mul(sign_x, y), im))


def _zero_times(zero, f):
    """``zero * f`` for a signed zero ``zero``: the signed zero (``zero`` itself where ``f`` is
    not finite, where the product would be NaN)."""
    return select(lt(rabs(f), math.inf), mul(zero, f), zero)


def ctanh(z):
    x, y = z
    t = tan(y)
    beta = add(1.0, mul(t, t))
    s = sinh(x)
    rho = sqrt(add(1.0, mul(s, s)))
    denom = add(1.0, mul(beta, mul(s, s)))
    re = div(mul(mul(beta, rho), s), denom)
    im = div(t, denom)
    far = gt(rabs(x), 20.0)  # tanh(x) rounds to +-1 here in both precisions
    far_im = mul(mul(mul(4.0, sin(y)), cos(y)), exp(mul(-2.0, rabs(x))))
    re, im = select(far, copysign(1.0, x), re), select(far, far_im, im)
    # C99's special values (numpy's): an infinite or NaN y gives NaN + NaN*i, except for
    # x = +-inf (+-1 +- 0i) and x = 0 (0 + nan*i); exact zeros stay
    y_bad, x_inf = not_(is_finite(y)), is_inf(x)
    re = select(y_bad, constant(math.nan, x.dtype), re)
    re = select(eq(x, 0.0), x, select(x_inf, copysign(1.0, x), re))
    im = select(and_(x_inf, y_bad), copysign(0.0, y), im)
    return Pair(re, select(eq(y, 0.0), y, im))


def _times_i(z):
    """``i z``."""
    return Pair(neg(z.im), z.re)


def _times_minus_i(z):
    """``-i z``."""
    return Pair(z.im, neg(z.re))


def csin(z):
    return _times_minus_i(csinh(_times_i(z)))


def ccos(z):
    return ccosh(_times_i(z))


def ctan(z):
    return _times_minus_i(ctanh(_times_i(z)))


def cexpm1(z):
    x, y = z
    h = sin(mul(y, 0.5))
    limit = 88.0 if x.dtype.itemsize == 4 else 709.0  # beyond it expm1(x) is e^x
    re = select(gt(x, limit), _exp_times(cos(y), x), mul(expm1(x), cos(y)))
    re = sub(re, mul(2.0, mul(h, h)))
    im = _exp_times(sin(y), x)
    return Pair(re, select(eq(y, 0.0), y, im))


def clog1p(z):
    x, y = z
    m = rmax(rabs(x), rabs(y))
    small = mul(0.5, log1p(add(mul(x, add(x, 2.0)), mul(y, y))))
    x1 = add(x, 1.0)
    re = select(lt(m, 0.5), small, _log_modulus(x1, y))
    return Pair(re, atan2(y, x1))


def _sqrt_pm(z, sign: float):
    """``sqrt(1 + sign z)``."""
    return csqrt(Pair(add(1.0, mul(sign, z.re)), mul(sign, z.im)))


def _conj(z):
    return Pair(z.re, neg(z.im))


def _far(z):
    """Where ``|z|`` is so large that the products of the Kahan forms below overflow and
    ``sqrt(1 - z^2) = -+ i z`` to working precision; and ``log|z| + log 2`` there."""
    far = gt(rmax(rabs(z.re), rabs(z.im)), _limits(z.re.dtype)[1])
    # an infinite part too: the asymptotic forms give C99's special values there
    far = or_(and_(far, and_(is_finite(z.re), is_finite(z.im))), or_(is_inf(z.re), is_inf(z.im)))
    return far, add(_log_modulus(z.re, z.im), math.log(2.0))


def casin(z):
    # Kahan: asin z = atan2(Re z, Re(s1 s2)) + i asinh(Im(conj(s1) s2)), s1 = sqrt(1 - z),
    # s2 = sqrt(1 + z); for huge |z|, atan2(x, |y|) + i copysign(log 2|z|, y)
    s1, s2 = _sqrt_pm(z, -1.0), _sqrt_pm(z, 1.0)
    re, im = atan2(z.re, cmul(s1, s2).re), asinh(cmul(_conj(s1), s2).im)
    far, log2z = _far(z)
    re = select(far, atan2(z.re, rabs(z.im)), re)
    re = select(eq(z.re, 0.0), z.re, re)  # asin(0 + iy) = i asinh(y), also for a NaN y
    return Pair(re, select(far, copysign(log2z, z.im), im))


def cacos(z):
    # Kahan: acos z = 2 atan2(Re s1, Re s2) + i asinh(Im(conj(s2) s1)); for huge |z|,
    # atan2(|y|, x) - i copysign(log 2|z|, y)
    s1, s2 = _sqrt_pm(z, -1.0), _sqrt_pm(z, 1.0)
    re, im = mul(2.0, atan2(s1.re, s2.re)), asinh(cmul(_conj(s2), s1).im)
    far, log2z = _far(z)
    re = select(far, atan2(rabs(z.im), z.re), re)
    re = select(eq(z.re, 0.0), constant(math.pi / 2, z.re.dtype), re)  # also for a NaN y
    return Pair(re, select(far, neg(copysign(log2z, z.im)), im))


def cacosh(z):
    # Kahan: acosh z = asinh(Re(conj(s1) s2)) + 2i atan2(Im s1, Re s2), s1 = sqrt(z - 1),
    # s2 = sqrt(z + 1); for huge |z|, log 2z
    s1 = csqrt(Pair(sub(z.re, 1.0), z.im))
    s2 = csqrt(Pair(add(z.re, 1.0), z.im))
    re, im = asinh(cmul(_conj(s1), s2).re), mul(2.0, atan2(s1.im, s2.re))
    far, log2z = _far(z)
    im = select(far, atan2(z.im, z.re), im)
    im = select(and_(eq(z.re, 0.0), is_nan(z.im)), constant(math.pi / 2, im.dtype), im)
    return Pair(select(far, log2z, re), im)


def casinh(z):
    return _times_minus_i(casin(_times_i(z)))


def catanh(z):
    # atanh(-z) = -atanh(z): computed for Re z >= 0, where 4x / ((1 - x)^2 + y^2) cannot
    # cancel against log1p's 1; for |z| beyond where the squares overflow, 1/z's real part
    # and +-pi/2
    x, y = z
    flip = signbit(x)
    ax, y = rabs(x), select(flip, neg(y), y)
    one_minus = sub(1.0, ax)
    den = add(mul(one_minus, one_minus), mul(y, y))
    q = mul(div(ax, den), 4.0)
    # near z = 1 (where den underflows), (log|1 + z| - log|1 - z|) / 2: no cancellation
    near_one = mul(0.5, sub(_log_modulus(add(1.0, ax), y), _log_modulus(one_minus, y)))
    re = select(ge(q, 1.0), near_one, mul(0.25, log1p(q)))
    im = mul(0.5, atan2(mul(2.0, y), sub(mul(one_minus, add(1.0, ax)), mul(y, y))))
    m = rmax(ax, rabs(y))
    xs, ys = div(ax, m), div(y, m)
    far_re = div(div(xs, m), add(mul(xs, xs), mul(ys, ys)))
    far_re = select(eq(m, math.inf), 0.0, far_re)
    far = gt(m, _limits(x.dtype)[1])
    re = select(far, far_re, re)
    im = select(far, copysign(math.pi / 2, y), im)
    re, im = select(flip, neg(re), re), select(flip, neg(im), im)
    # C99's special values with a NaN part: atanh(0 + i nan) = 0 + i nan,
    # atanh(+-inf + i nan) = +-0 + i nan, atanh(nan +- i inf) = 0 +- i pi/2
    x0, y0 = z.re, z.im
    re = select(eq(x0, 0.0), x0, re)
    re = select(and_(is_inf(x0), is_nan(y0)), copysign(0.0, x0), re)
    nan_inf = and_(is_nan(x0), is_inf(y0))
    re = select(nan_inf, constant(0.0, x0.dtype), re)
    return Pair(re, select(nan_inf, copysign(math.pi / 2, y0), im))


def catan(z):
    return _times_minus_i(catanh(_times_i(z)))


def _is_zero(z):
    return and_(eq(z.re, 0.0), eq(z.im, 0.0))


def cpow(a, b):
    """``a ** b``: ``exp(b log a)``; ``a ** 0 = 1``, ``0 ** b = 0`` for real ``b > 0`` (and
    NaN for other ``b``), as numpy."""
    la = clog(a)
    if type(b) is Pair:
        r = cexp(cmul(b, la))
        b_zero = _is_zero(b)
        b_real_positive = and_(gt(b.re, 0.0), eq(b.im, 0.0))
    else:  # an integer (or real) exponent
        if b.dtype != a.re.dtype:
            b = _p("convert_element_type", b, new_dtype=a.re.dtype, weak_type=False)
        r = cexp(cscale(la, b))
        b_zero, b_real_positive = eq(b, 0.0), gt(b, 0.0)
    a_zero = _is_zero(a)
    at_zero = select(b_real_positive, constant(0, r.re.dtype), math.nan)
    re, im = select(a_zero, at_zero, r.re), select(a_zero, at_zero, r.im)
    return Pair(select(b_zero, 1.0, re), select(b_zero, 0.0, im))


def cinteger_pow(z, y: int):
    if y == 0:
        return one_like(z)
    acc, base, n = None, z, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else cmul(acc, base)
        n >>= 1
        if n:
            base = cmul(base, base)
    return cdiv(one_like(z), acc) if y < 0 else acc


def clogistic(z):
    # near the imaginary axis (the poles i pi (2k + 1)), (1 + tanh(z / 2)) / 2: tanh keeps its
    # accuracy near its poles, where 1 + exp(-z) cancels; elsewhere 1 / (1 + exp(-z)), or
    # e / (1 + e) with e = exp(z) where Re z < 0, so that neither overflows
    th = ctanh(cscale(z, 0.5))
    mid = Pair(mul(add(th.re, 1.0), 0.5), mul(th.im, 0.5))
    e_neg = cexp(cneg(z))
    pos = cdiv(one_like(z), Pair(add(1.0, e_neg.re), e_neg.im))
    e = cexp(z)
    negative = cdiv(e, Pair(add(1.0, e.re), e.im))
    out = cselect(lt(z.re, 0.0), negative, pos)
    # (an infinite or NaN imaginary part makes every form NaN but tanh's C99 special values)
    return cselect(and_(lt(rabs(z.re), 1.0), is_finite(z.im)), mid, out)


def csign(z):
    """``z / |z|``, each part divided by ``|z|`` as XLA does (an infinite part gives NaN, ``|z|``
    overflowing gives 0), ``z`` itself at 0. Where ``|z|`` is subnormal it has too few bits
    (``|8e-45 + 8e-45i|`` is 8 units of 2^-149, so the parts came out 0.75): there ``z`` is first
    scaled by 2^(mantissa bits + 1), exactly, into the normal range."""
    dt = core.get_aval(z.re).dtype
    info = np.finfo(dt)
    a = cabs(z)
    up = constant(2.0 ** (info.nmant + 1), dt)
    scale = select(lt(a, float(info.tiny)), up, constant(1.0, dt))
    re, im = mul(z.re, scale), mul(z.im, scale)
    a = cabs(Pair(re, im))
    zero = eq(a, 0.0)
    return Pair(select(zero, z.re, div(re, a)), select(zero, z.im, div(im, a)))


def lex_gt(a, b):
    """``a > b`` comparing real parts, then imaginary parts (false with a NaN)."""
    return or_(gt(a.re, b.re), and_(eq(a.re, b.re), gt(a.im, b.im)))


def lex_lt(a, b):
    return or_(lt(a.re, b.re), and_(eq(a.re, b.re), lt(a.im, b.im)))


def cselect(pred, a, b):
    return Pair(select(pred, a.re, b.re), select(pred, a.im, b.im))


def cmax(a, b):
    return cselect(lex_gt(a, b), a, b)


def cmin(a, b):
    return cselect(lex_lt(a, b), a, b)


def catan2(x, y):
    # -i log((y + i x) / sqrt(x^2 + y^2)), the continuation of the real atan2 (XLA's)
    num = cadd(y, _times_i(x))
    den = csqrt(cadd(cmul(x, x), cmul(y, y)))
    return _times_minus_i(clog(cdiv(num, den)))


def clogaddexp(a, b):
    """``log(exp(a) + exp(b))`` (principal branch): the larger real part is shifted out of
    the exponentials, so they do not overflow."""
    m = rmax(a.re, b.re)
    m = select(_p("is_finite", m), m, 0.0)
    ea, eb = cexp(Pair(sub(a.re, m), a.im)), cexp(Pair(sub(b.re, m), b.im))
    s = clog(cadd(ea, eb))
    return Pair(add(s.re, m), s.im)
