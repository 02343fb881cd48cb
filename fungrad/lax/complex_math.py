"""numpy references for the elementwise functions of complex operands where numpy's own
loop is missing, inaccurate or orders values differently from XLA.

The eager impls of ``fungrad/lax/elementwise.py`` call these for complex dtypes (numpy's
complex loops serve the rest: exp, log, sqrt, sin...). complex64 is computed in complex128
and rounded once, as the real special functions are computed in float64.

* ``log1p``: numpy's complex64 loop loses the real part of small arguments
  (``log1p(1e-8+1e-8j)`` gives ``1e-8j``); here ``log|1+z| = log1p(2x + x^2 + y^2) / 2``.
* ``expm1``: ``exp(x) cos(y) - 1`` as ``expm1(x) cos(y) - 2 sin(y/2)^2``, accurate near 0.
* ``logistic``: ``1 / (1 + exp(-z))``, or ``e / (1 + e)`` with ``e = exp(z)`` for
  ``Re z < 0``, so neither form overflows to NaN.
* ``atan2(x, y) = -i log((y + i x) / sqrt(x^2 + y^2))``, the complex continuation of the real
  atan2 (XLA's definition).
* ``logaddexp``: ``log(exp(a) + exp(b))`` (principal log) with the larger real part shifted
  out, for ``cumlogsumexp``.
* ``div``: Smith's algorithm (numpy's form) with XLA's recovery of the NaN-NaN results
  (C99 Annex G's): a zero divisor gives a signed infinity, an infinite numerator over a
  finite divisor an infinity, a finite numerator over an infinite divisor a signed zero
  (numpy returns NaN for ``(-inf+inf*j) / 3``, XLA ``-inf+inf*j``). Computed in the
  operands' own precision with the formulas of the jit rule
  (``lowering/complex_formulas.py`` ``cdiv``).
* ``max``/``min``: XLA orders complex numbers lexicographically (real part, then imaginary
  part) and, unlike numpy, does not propagate NaN: a comparison with NaN is false, so the
  second operand is taken.
"""

from __future__ import annotations

import numpy as np

__all__ = ["atan2", "div", "expm1", "log1p", "logaddexp", "logistic", "maximum", "minimum"]


def _wide(z):
    """``z`` as complex128 (computation dtype) and the dtype to round the result to."""
    z = np.asarray(z)
    return z.astype(np.complex128), z.dtype


def _pack(re, im, dtype):
    out = np.empty(np.shape(re), np.complex128)
    out.real, out.imag = re, im
    return out.astype(dtype)[()]


def log1p(z):
    """``log(1 + z)``, accurate for small ``|z|``."""
    w, dt = _wide(z)
    with np.errstate(all="ignore"):
        x, y = w.real, w.imag
        near = (np.abs(x) < 0.5) & (np.abs(y) < 0.5)
        re_small = 0.5 * np.log1p(x * (2.0 + x) + y * y)
        re_big = np.log(np.abs(1.0 + w))
        return _pack(np.where(near, re_small, re_big), np.arctan2(y, 1.0 + x), dt)


def expm1(z):
    """``exp(z) - 1``, accurate for small ``|z|``."""
    w, dt = _wide(z)
    with np.errstate(all="ignore"):
        x, y = w.real, w.imag
        s = np.sin(0.5 * y)
        re = np.expm1(x) * np.cos(y) - 2.0 * s * s
        im = np.exp(x) * np.sin(y)
        # cos(y) or sin(y) of 0 with an infinite factor: the real formula's limits
        re = np.where(np.isinf(x) & (y == 0), np.expm1(x), re)
        im = np.where(y == 0, y, im)
        return _pack(re, im, dt)


def logistic(z):
    """``1 / (1 + exp(-z))`` without overflow on either side."""
    w, dt = _wide(z)
    with np.errstate(all="ignore"):
        pos = w.real >= 0
        e = np.exp(np.where(pos, -w, w))
        out = np.where(pos, 1.0 / (1.0 + e), e / (1.0 + e))
        return out.astype(dt)[()]


def atan2(x, y):
    """``-i log((y + i x) / sqrt(x^2 + y^2))``."""
    a, dt = _wide(x)
    b, _ = _wide(y)
    with np.errstate(all="ignore"):
        # i x and -i w are written out by parts: exact, and without the signed zeros a
        # complex multiplication by 1j would invent (they pick the side of log's cut)
        w = np.log(_pack(b.real - a.imag, b.imag + a.real, np.complex128) / np.sqrt(a * a + b * b))
        return _pack(w.imag, -w.real, dt)


def logaddexp(a, b):
    """``log(exp(a) + exp(b))`` (principal branch) for complex128 ``a`` and ``b``: the larger
    real part is shifted out of the exponentials, so they do not overflow."""
    with np.errstate(all="ignore"):
        m = np.maximum(a.real, b.real)
        m = np.where(np.isfinite(m), m, 0.0)
        return m + np.log(np.exp(a - m) + np.exp(b - m))


def _lexicographic_greater(x, y):
    xr, yr = np.real(x), np.real(y)
    return (xr > yr) | ((xr == yr) & (np.imag(x) > np.imag(y)))


def maximum(x, y):
    """The lexicographically larger of ``x`` and ``y`` (``y`` when either holds a NaN)."""
    return np.where(_lexicographic_greater(x, y), x, y)


def minimum(x, y):
    """The lexicographically smaller of ``x`` and ``y`` (``y`` when either holds a NaN)."""
    return np.where(_lexicographic_greater(y, x), x, y)


def div(a, b):
    """``a / b`` for complex arrays of one dtype, as XLA divides them (see the module
    docstring)."""
    a, b = np.asarray(a), np.asarray(b)
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    f = ar.dtype.type
    inf, one, zero = f(np.inf), f(1), f(0)
    with np.errstate(all="ignore"):
        # Smith's algorithm as numpy's loop writes it (the same bits for ordinary values)
        first = np.abs(br) >= np.abs(bi)  # (false with a NaN)
        r1 = bi / br
        s1 = one / (br + bi * r1)
        r2 = br / bi
        s2 = one / (bi + br * r2)
        re = np.where(first, (ar + ai * r1) * s1, (ar * r2 + ai) * s2)
        im = np.where(first, (ai - ar * r1) * s1, (ai * r2 - ar) * s2)
        # recovery of NaN + NaN*j
        zero_den = (br == 0) & (bi == 0) & ~(np.isnan(ar) & np.isnan(ai))
        s = np.copysign(inf, br)
        a_inf_r, a_inf_i = np.isinf(ar), np.isinf(ai)
        inf_num = (a_inf_r | a_inf_i) & np.isfinite(br) & np.isfinite(bi)
        ur = np.copysign(np.where(a_inf_r, one, zero), ar)
        ui = np.copysign(np.where(a_inf_i, one, zero), ai)
        b_inf_r, b_inf_i = np.isinf(br), np.isinf(bi)
        inf_den = (b_inf_r | b_inf_i) & np.isfinite(ar) & np.isfinite(ai)
        vr = np.copysign(np.where(b_inf_r, one, zero), br)
        vi = np.copysign(np.where(b_inf_i, one, zero), bi)
        both_nan = np.isnan(re) & np.isnan(im)
        re_fix = np.where(
            zero_den,
            s * ar,
            np.where(
                inf_num,
                inf * (ur * br + ui * bi),
                np.where(inf_den, zero * (ar * vr + ai * vi), re),
            ),
        )
        im_fix = np.where(
            zero_den,
            s * ai,
            np.where(
                inf_num,
                inf * (ui * br - ur * bi),
                np.where(inf_den, zero * (ai * vr - ar * vi), im),
            ),
        )
        re, im = np.where(both_nan, re_fix, re), np.where(both_nan, im_fix, im)
    out = np.empty(re.shape, a.dtype)
    out.real, out.imag = re, im
    return out[()]
