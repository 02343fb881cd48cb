"""Vectorisable float32/float64 math functions as LLVM IR text, for the CPU renderer's prelude.

Why: LLVM lowers ``llvm.exp.*``/``llvm.tanh.*`` (and libm calls) inside a vectorised loop into one
scalar libm call per lane. Measured for the lowering notes (LOWERING.md, section 1):
``tanh(x)*2 + exp(-x)`` over 4M float32 took 80 ms that way, 12.4 ms in numpy, and 3.3 ms with
inline polynomials written with fma/rint/bitcast/select only, which the loop vectoriser widens to
ymm/zmm code. LLVM 22 dropped ``-vector-library``, so polynomials in IR are the portable route.

Entry points: ``prelude(dtypes_needed, fns_needed)`` returns the IR text of the requested
``define internal <ty> @fg_<name>_<f32|f64>(...) alwaysinline`` functions (plus the functions they
call, e.g. tanh calls exp, and the intrinsic declarations); ``math_symbol(name, dtype)`` names one
of them; ``MATH_FUNCTIONS`` maps each name to its arity (atan2(y, x) and pow(x, y) take two).

Contract (tests/test_lowering_llvm_math.py measures it against long-double references):
- Bodies are straight-line code of fadd/fsub/fmul/fdiv, integer ops, bitcast, fptosi/sitofp of
  clamped values, select/fcmp/icmp and the intrinsics fma, rint, fabs, copysign, sqrt (and
  ldexp where it is one vector instruction: x86-64 with AVX-512): no branches, no libm, no
  fast-math flags (they would delete the NaN/inf handling), so a loop over them vectorises
  fully. The exceptions: sin/cos/tan branch to a noinline large-argument function; the
  vectoriser calls its masked vector variant, which is inlined after it (see _branch_large;
  the renderer compiles those functions once per process: ensure_large_library). And the
  renderer's float32 division by a loop-invariant divisor (DIVIDE) is exact without a divide
  per element.
  They need hardware fma to be fast (x86-64-v3, AArch64); results are bit-identical on every
  host.
- Accuracy: max error <= 1 ulp for exp, exp2, log, log2, log10, log1p, logistic, sin, cos, asin,
  acos, erf, cbrt, pow; <= 1.5 ulp for expm1, tanh, tan, atan, atan2, sinh, cosh, asinh,
  acosh, atanh; <= 2.5 ulp for erfc (fdlibm's formulas near |x| = 1). The same in float32 and
  float64; the per-function numbers are in the test file. Kernels: Cephes (float32 tan, atan,
  asin, tanh polynomials; float64 tan, atan, tanh rational functions), fdlibm (log, float64
  sin/cos kernels, asin, erf/erfc), Taylor series (float64 exp; float64 log for pow), own
  minimax fits (float32 exp, float32 sin/cos); error-free transformations (two_sum, fma
  residuals) carry the low parts that make the difference.
- Edge cases follow numpy (C99 Annex F): NaN in -> NaN out, +-inf and +-0 (odd functions keep
  the sign of -0), overflow to +-inf, gradual underflow to correctly scaled denormals (2**k is
  applied in two steps), denormal inputs, domain errors -> NaN, every special case of pow.
- sin/cos/tan reduce |x| by pi/2 Cody-Waite style in four parts, with fma and an exact tail,
  below 2**24 in float32 and 2**53 in float64; float32 sin and cos instead reduce by pi in
  float64 (two fma, exact enough below 2**24) and need no quadrant selects. From there on up to
  the largest finite value, Payne-Hanek (a = m 2^e times the window of 2/pi's bits that
  matters mod 4): float32 in 32-bit integer digits (_large_frac_f32, shared with the GPU),
  float64 with 64 x 64 -> 128-bit products of three words of a table (_large_pio2_f64). The
  same ulp bounds hold over the whole range (tests/test_trig_large_args.py); inf gives NaN.
- float32 pow, sin and cos work in float64 internally (fpext/fptrunc; 8 lanes per zmm, still
  2x fewer instructions than the float32 four-part reduction for sin); everything else works
  in its own precision, so float32 loops get 8 lanes per ymm or 16 per zmm register.
- lgamma, digamma and erf_inv are the rare special functions: they follow the float64 numpy
  impls of those primitives (fungrad/lax/special_math.py) operation for operation (erf_inv from
  Giles' double-precision guess plus one polishing step instead of four), built on the
  functions above, and float32 rounds their float64 result once, as the impls do. Against those
  impls: float32 0.5 ulp; float64 erf_inv 5 ulp, lgamma 12 ulp of max(|f|, 1), digamma 4 ulp
  of max(|f|, 1, log(1 + |x|)) (next to their zeros, where terms of those sizes cancel, both
  lose relative accuracy as the impls do).
"""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

__all__ = ["BRANCHING", "DIVIDE", "MATH_FUNCTIONS", "ensure_large_library",
           "large_functions_declared", "large_library_ir", "large_symbols", "math_symbol",
           "prelude"]


# ----------------------------------------------------------------------------------------------
# Float types and constants


@dataclass(frozen=True)
class _FloatType:
    ir: str      # "float" | "double"
    suffix: str  # "f32" | "f64"
    int_ir: str  # integer type of the same width, for bit manipulation
    mant: int    # explicit mantissa bits
    bias: int    # exponent bias

    def round(self, v: float) -> float:
        """``v`` rounded to this type (float32 rounding goes through struct)."""
        if self.ir == "double":
            return float(v)
        return struct.unpack("<f", struct.pack("<f", float(v)))[0]

    def literal(self, v: float) -> str:
        """LLVM spells every float constant as the hex bits of the equal double."""
        bits = struct.unpack("<Q", struct.pack("<d", self.round(v)))[0]
        return f"0x{bits:016X}"


F32 = _FloatType("float", "f32", "i32", 23, 127)
F64 = _FloatType("double", "f64", "i64", 52, 1023)
_FT = {"float": F32, "double": F64}
_BY_DTYPE = {"float32": F32, "float64": F64}

# Constants as sums of 2 (or 4) numbers of each float type, each part the remainder of the
# ones before rounded to nearest: c[0] + c[1] (+ ...) carries ~2x (4x) the type's precision.
# Written out rather than computed with ``decimal`` at import (importing and running it took ~9 ms
# of every first jit call); tests/test_llvm_math_constants.py derives them again from 90-digit
# values of pi, ln 2 and ln 10 and checks every part.
_C = {
    F32: {
        "ln2": (0.6931471824645996, -1.9046542121259336e-09),
        "log2e": (1.4426950216293335, 1.925963033500011e-08),
        "log10_2": (0.3010300099849701, -1.432098883924482e-08),
        "log10e": (0.4342944920063019, -1.0103049952192578e-08),
        "pio2_4": (1.5707963705062866, -4.371138828673793e-08,
                   -1.7151245100058819e-15, 1.056299898220315e-23),
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
        "pio2_4": (1.5707963267948966, 6.123233995736766e-17,
                   -1.4973849048591698e-33, 5.562271104316826e-50),
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
# A tiny SSA builder: _V values overload the arithmetic operators and emit IR lines.


class _V:
    """An SSA name or literal of IR type ``ty`` in a _Builder."""

    __slots__ = ("b", "ref", "ty")

    def __init__(self, b: _Builder, ref: str, ty: str):
        self.b, self.ref, self.ty = b, ref, ty

    @property
    def ft(self) -> _FloatType:
        return _FT[self.ty]

    def _op(self, fop: str, iop: str, other, swap: bool = False) -> _V:
        o = self.b.lift(other, self.ty)
        a, c = (o, self) if swap else (self, o)
        op = fop if self.ty in _FT else iop
        return self.b.emit(f"{op} {self.ty} {a.ref}, {c.ref}", self.ty)

    def __add__(self, o): return self._op("fadd", "add", o)
    def __radd__(self, o): return self._op("fadd", "add", o, True)
    def __sub__(self, o): return self._op("fsub", "sub", o)
    def __rsub__(self, o): return self._op("fsub", "sub", o, True)
    def __mul__(self, o): return self._op("fmul", "mul", o)
    def __rmul__(self, o): return self._op("fmul", "mul", o, True)
    def __truediv__(self, o): return self._op("fdiv", "<no int div>", o)
    def __rtruediv__(self, o): return self._op("fdiv", "<no int div>", o, True)
    def __and__(self, o): return self._op("<float and>", "and", o)
    def __or__(self, o): return self._op("<float or>", "or", o)
    def __xor__(self, o): return self._op("<float xor>", "xor", o)
    def __lshift__(self, o): return self._op("<float shl>", "shl", o)
    def __rshift__(self, o): return self._op("<float ashr>", "ashr", o)

    def __neg__(self) -> _V:
        if self.ty in _FT:
            return self.b.emit(f"fneg {self.ty} {self.ref}", self.ty)
        return 0 - self


class _Builder:
    """Collects the instructions of one function body, its callees and its intrinsics."""

    def __init__(self):
        self.lines: list[str] = []
        self.callees: set[str] = set()
        self.intrinsics: dict[str, str] = {}

    def emit(self, rhs: str, ty: str) -> _V:
        name = f"%v{len(self.lines)}"
        self.lines.append(f"  {name} = {rhs}")
        return _V(self, name, ty)

    def lift(self, v, ty: str) -> _V:
        if isinstance(v, _V):
            if v.ty != ty:
                raise TypeError(f"llvm_math: operand of type {v.ty} where {ty} is expected")
            return v
        if ty in _FT:
            return _V(self, _FT[ty].literal(v), ty)
        if ty == "i1":
            return _V(self, "true" if v else "false", ty)
        return _V(self, str(int(v)), ty)

    def cmp(self, pred: str, a, c) -> _V:
        ty = a.ty if isinstance(a, _V) else c.ty
        a, c = self.lift(a, ty), self.lift(c, ty)
        op = "fcmp" if ty in _FT else "icmp"
        return self.emit(f"{op} {pred} {ty} {a.ref}, {c.ref}", "i1")

    def select(self, cond: _V, a, c, ty: str | None = None) -> _V:
        ty = ty or (a.ty if isinstance(a, _V) else c.ty)
        a, c = self.lift(a, ty), self.lift(c, ty)
        return self.emit(f"select i1 {cond.ref}, {ty} {a.ref}, {ty} {c.ref}", ty)

    def not_(self, c: _V) -> _V:
        return c ^ True

    def intrinsic(self, name: str, *args) -> _V:
        ty = next(a.ty for a in args if isinstance(a, _V))
        vals = [self.lift(a, ty) for a in args]
        fn = f"llvm.{name}.{_FT[ty].suffix}"
        self.intrinsics[fn] = f"declare {ty} @{fn}({', '.join([ty] * len(vals))})"
        argtext = ", ".join(f"{ty} {v.ref}" for v in vals)
        return self.emit(f"call {ty} @{fn}({argtext})", ty)

    def fma(self, a, c, d) -> _V: return self.intrinsic("fma", a, c, d)

    def fma_exact(self, a, c, d) -> _V:
        """fma whose single rounding the algorithm relies on (the residual of an error-free
        transformation, e.g. ``fma(a, c, -a*c)``); a polynomial step uses :meth:`fma`. The
        same instruction here; a target whose fma rounds twice computes this one exactly."""
        return self.fma(a, c, d)

    def keep(self, v: _V) -> _V:
        """``v`` as a value the compiler must not reassociate with its neighbours, where a
        small tail inside it would be lost (``r + (p + t)`` turned into ``(r + p) + t``). LLVM
        without fast-math never does that: here it is ``v`` itself (wgsl_math hides it)."""
        return v

    def two_prod(self, a, c) -> tuple[_V, _V]:
        """(p, e) with p = fl(a c) and p + e == a c exactly (no underflow or overflow)."""
        p = a * c
        return p, self.fma_exact(a, c, -p)

    def sub_multiple(self, k, c: float, x, k_bits: int) -> _V:
        """x - k c, exactly, for an integral k with |k| < 2**k_bits where the caller knows the
        difference is representable (a Cody-Waite reduction step: x is close to k c). One fma
        here; a target whose fma rounds twice splits c instead (see wgsl_math)."""
        return self.fma_exact(-k, c, x)

    def ldexp(self, y, k) -> _V:
        """y * 2**k for an integer k (see :func:`_ldexp`): ``llvm.ldexp`` where it vectorises
        (x86-64 with AVX-512), else the two-step multiply."""
        if not _vector_ldexp():
            return _ldexp_two_step(self, y, k)
        fn = f"llvm.ldexp.{y.ft.suffix}.i32"
        self.intrinsics[fn] = f"declare {y.ty} @{fn}({y.ty}, i32)"
        k32 = k if k.ty == "i32" else self.cast("trunc", k, "i32")
        return self.emit(f"call {y.ty} @{fn}({y.ty} {y.ref}, i32 {k32.ref})", y.ty)
    def rint(self, a) -> _V: return self.intrinsic("rint", a)
    def fabs(self, a) -> _V: return self.intrinsic("fabs", a)
    def copysign(self, a, s) -> _V: return self.intrinsic("copysign", a, s)
    def sqrt(self, a) -> _V: return self.intrinsic("sqrt", a)

    def cast(self, op: str, v: _V, ty: str) -> _V:
        return self.emit(f"{op} {v.ty} {v.ref} to {ty}", ty)

    def call(self, fn: str, *args: _V) -> _V:
        self.callees.add(fn)
        argtext = ", ".join(f"{a.ty} {a.ref}" for a in args)
        return self.emit(f"call {args[0].ty} @{fn}({argtext})", args[0].ty)


# ----------------------------------------------------------------------------------------------
# Shared numerical helpers (error-free transformations, polynomials, scaling)


def _horner(b: _Builder, v: _V, coeffs: Iterable[float]) -> _V:
    """Polynomial with ``coeffs`` listed from the highest degree down, evaluated with fma."""
    coeffs = list(coeffs)
    p = b.lift(coeffs[0], v.ty)
    for c in coeffs[1:]:
        p = b.fma(p, v, c)
    return p


def _two_sum(a, c) -> tuple[_V, _V]:
    """s + e == a + c exactly, s = fl(a + c) (Knuth, any magnitudes)."""
    s = a + c
    bb = s - a
    return s, (a - (s - bb)) + (c - bb)


def _fast_two_sum(a, c) -> tuple[_V, _V]:
    """s + e == a + c exactly when |a| >= |c| (Dekker)."""
    s = a + c
    return s, c - (s - a)


def _clamp(b: _Builder, x: _V, lo: float, hi: float) -> _V:
    """x limited to [lo, hi]; NaN becomes lo (callers restore NaN at the end). Written as
    max-then-min selects that x86 matches to one maxps and one minps."""
    t = b.select(b.cmp("ogt", x, lo), x, lo)
    return b.select(b.cmp("olt", t, hi), t, hi)


def _to_int(b: _Builder, v: _V, clamped: bool = False) -> _V:
    """fptosi of an integral float; unless the caller ``clamped`` it, large values and NaN
    map to 0 first (fptosi of those is poison)."""
    if not clamped:
        v = b.select(b.cmp("olt", b.fabs(v), 2.0 ** 30), v, 0.0)
    return b.cast("fptosi", v, v.ft.int_ir)


def _pow2(b: _Builder, k: _V, ft: _FloatType) -> _V:
    """2**k for an integer k in the normal exponent range."""
    return b.cast("bitcast", (k + ft.bias) << ft.mant, ft.ir)


@functools.cache
def _vector_ldexp() -> bool:
    """Does ``llvm.ldexp`` become one vector instruction on this host? On x86-64 with AVX-512
    it is ``vscalefps``/``vscalefpd`` (measured: float32 exp 18% faster than the two-step
    multiply); elsewhere LLVM 22 lowers a vector ldexp to one libm call per lane."""
    from fungrad.lowering.cpu import compiler as cpu
    h = cpu.host()
    return h.triple.startswith("x86_64") and "+avx512f" in h.features.split(",")


def _ldexp(b: _Builder, y: _V, k: _V) -> _V:
    """y * 2**k for integer k, rounded once (overflow gives inf, a denormal result is rounded
    correctly): ``llvm.ldexp`` where it vectorises, else two multiplications by powers of two
    (2**k itself may be out of range; the first step is exact). Both give the same bits."""
    return b.ldexp(y, k)


def _ldexp_two_step(b: _Builder, y: _V, k: _V) -> _V:
    k1 = k >> 1
    return y * _pow2(b, k1, y.ft) * _pow2(b, k - k1, y.ft)


def _signbit(b: _Builder, x: _V) -> _V:
    return b.cmp("slt", b.cast("bitcast", x, x.ft.int_ir), 0)


def _nan_in_nan_out(b: _Builder, x: _V, r: _V) -> _V:
    return b.select(b.cmp("uno", x, x), x, r)


# ----------------------------------------------------------------------------------------------
# exp family: k = rint(x log2 e), r = x - k ln2 (Cody-Waite with fma, plus the exact tail rl),
# e**r = 1 + r + r^2 P(r); float32 P is Cephes expf, float64 P the Taylor series to r^13.

_EXP_P = {
    F32: (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
          5.0000001201e-1),
    F64: tuple(1.0 / math.factorial(n) for n in range(13, 1, -1)),  # 1/13!, ..., 1/2!
}
# x is clamped into these bounds before reduction: beyond them exp is 0 or inf (also after the
# extra 2**-1 of sinh/cosh), and 2**k splits into two normal powers of two.
_EXP_BOUNDS = {F32: (-104.0, 90.0), F64: (-746.0, 711.0)}


def _exp_reduce(b: _Builder, x: _V) -> tuple[_V, _V, _V]:
    c = _C[x.ft]
    k = b.rint(x * c["log2e"][0])
    t1 = b.sub_multiple(k, c["ln2"][0], x, 11)  # a short multiple of ulp(ln2_hi); |k| <= 1077
    r, rl = _two_sum(t1, -(k * c["ln2"][1]))
    return k, r, rl


def _exp_poly(b: _Builder, r: _V, rl: _V) -> tuple[_V, _V]:
    """(r, tail) with e**(r + rl) - 1 = r + tail, |tail| <~ r^2/2."""
    t = r * r * _horner(b, r, _EXP_P[r.ft])
    return r, b.fma(rl, 1.0 + b.keep(r + t), t)  # e^(r + rl) = e^r (1 + rl), rl up to ~1e-13


def _exp_kernel(b: _Builder, x: _V, lo=None, shift: int = 0, dd: bool = False):
    """2**shift * exp(x + lo) for any non-NaN x (|lo| <= ulp(x)); NaN gives garbage.
    With ``dd`` the result comes as an unrounded pair hi + lo (exact scaling unless denormal)."""
    ft = x.ft
    xc = _clamp(b, x, *_EXP_BOUNDS[ft])
    k, r, rl = _exp_reduce(b, xc)
    if lo is not None:  # lo only counts when x was in range (it may be NaN otherwise)
        rl = rl + b.select(b.cmp("oeq", xc, x), lo, 0.0)
    r, tail = _exp_poly(b, r, rl)
    s, e = _fast_two_sum(1.0, r)
    if dd:
        ki = _to_int(b, k, clamped=True) + shift
        hi, lo = _fast_two_sum(s, e + tail)
        return _ldexp(b, hi, ki), _ldexp(b, lo, ki)
    return _ldexp(b, s + (e + tail), _to_int(b, k, clamped=True) + shift)


# float32 exp: e**r = 1 + r + r^2 P(r) on |r| <= ln2/2 with a degree-4 minimax P fitted with
# float32 coefficients (relative error 3e-9; Cephes' degree 5 buys nothing at float32).
_EXP_P32_SHORT = (0.0013814599951729178, 0.008368715643882751, 0.04166838899254799,
                  0.1666652113199234, 0.4999999403953552)
_ROUND_MAGIC = 1.5 * 2.0 ** 23  # v + this, rounded to float32, holds rint(v) in its low bits


def _exp_f32(b: _Builder, x: _V) -> tuple[_V, _V]:
    """(y, k) with exp(x) = y 2**k, y in [0.7, 1.42] and k an i32, for x already clamped to
    |x| < 2**21 (NaN gives a NaN y). k = rint(x log2 e) comes from one fma with a magic
    constant: its result's low bits are k, converted back to a float exactly (not as
    ``t - constant``, which GPU compilers fold back to ``x log2 e``)."""
    c = _C[F32]
    t = b.fma(x, c["log2e"][0], _ROUND_MAGIC)
    ki = b.cast("bitcast", t, "i32") - struct.unpack("<i", struct.pack("<f", _ROUND_MAGIC))[0]
    k = b.cast("sitofp", ki, "float")
    # x - k ln2_hi is exact (|k| <= 150); the second step's product k ln2_lo (<= 3e-7) may
    # round before the sum without harm, so it needs no exact fma
    r = b.fma(-k, c["ln2"][1], b.sub_multiple(k, c["ln2"][0], x, 8))
    return 1.0 + b.fma(r * r, _horner(b, r, _EXP_P32_SHORT), r), ki


def _exp(b: _Builder, x: _V) -> _V:
    if x.ft is F32:  # float32: one rounding of r, a short polynomial; within 1 ulp
        # the clamp (one maxps, one minps) keeps NaN, and NaN then flows through to the
        # result: k comes from bit arithmetic (no fptosi to turn into poison), and NaN times
        # any power of two is NaN
        lo, hi = _EXP_BOUNDS[F32]
        t = b.select(b.cmp("olt", x, lo), lo, x)
        y, k = _exp_f32(b, b.select(b.cmp("ogt", t, hi), hi, t))
        return _ldexp(b, y, k)
    return _nan_in_nan_out(b, x, _exp_kernel(b, x))


def _exp2(b: _Builder, x: _V) -> _V:
    ft = x.ft
    lo, hi = _EXP_BOUNDS[ft]
    xc = _clamp(b, x, lo * 1.4427, hi * 1.4427)
    k = b.rint(xc)
    r0 = xc - k  # exact
    ln2 = _C[ft]["ln2"]
    r, rl = b.two_prod(r0, ln2[0])
    r, tail = _exp_poly(b, r, rl + r0 * ln2[1])
    s, e = _fast_two_sum(1.0, r)
    y = _ldexp(b, s + (e + tail), _to_int(b, k, clamped=True))
    return _nan_in_nan_out(b, x, y)


def _expm1_kernel(b: _Builder, x: _V) -> tuple[_V, _V]:
    """expm1(x) as hi + lo, for x up to the threshold in _expm1 (2**k stays finite)."""
    ft = x.ft
    top = 40.0 if ft is F64 else 20.0
    xc = _clamp(b, x, -top, top)
    k, r, rl = _exp_reduce(b, xc)
    r, tail = _exp_poly(b, r, rl)
    ki = _to_int(b, k, clamped=True)
    two_k = _pow2(b, ki, ft)
    # expm1 = (2^k - 1) + 2^k r + 2^k tail; 2^k - 1 is exact while k <= mant, else split off -1.
    small_k = b.cmp("sle", ki, ft.mant)
    a_hi = b.select(small_k, two_k - 1.0, two_k)
    a_lo = b.select(small_k, 0.0, -1.0, ft.ir)
    s, e = _two_sum(a_hi, two_k * r)
    return _fast_two_sum(s, e + (two_k * tail + a_lo))


def _expm1(b: _Builder, x: _V) -> _V:
    top = 40.0 if x.ft is F64 else 20.0
    hi, lo = _expm1_kernel(b, x)
    r = b.select(b.cmp("ogt", x, top), _exp_kernel(b, x), hi + lo)
    r = b.select(b.cmp("oeq", x, 0.0), x, r)  # expm1(-0) = -0
    return _nan_in_nan_out(b, x, r)


# ----------------------------------------------------------------------------------------------
# log family: u = 2^k m with m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f/(2+f),
# log(1+f) = f - f^2/2 + s (f^2/2 + R(s^2)) (fdlibm e_log.c; float32 uses FreeBSD's e_logf.c
# coefficients), kept as hi + lo and combined with k ln2 in double-word arithmetic.

_LG = {
    F32: (0.66666662693, 0.40000972152, 0.28498786688, 0.24279078841),
    F64: (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
          2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
          1.479819860511658591e-01),
}
_SQRTH_BITS = {F32: 0x3F3504F3, F64: 0x3FE6A09E667F3BCD}  # bits of sqrt(1/2)


def _log_split(b: _Builder, u: _V) -> tuple[_V, _V]:
    """(k, f) with u = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)); u > 0 finite (denormal ok)."""
    ft = u.ft
    tiny = b.cmp("olt", u, 2.0 ** (1 - ft.bias))
    shift = ft.mant + 2
    us = b.select(tiny, u * 2.0 ** shift, u)
    one_bits = ft.bias << ft.mant
    ix = b.cast("bitcast", us, ft.int_ir) + (one_bits - _SQRTH_BITS[ft])
    k = (ix >> ft.mant) - ft.bias
    m = b.cast("bitcast", (ix & ((1 << ft.mant) - 1)) + _SQRTH_BITS[ft], ft.ir)
    kf = b.cast("sitofp", k, ft.ir) - b.select(tiny, float(shift), 0.0, ft.ir)
    return kf, m - 1.0


def _log1p_of_f(b: _Builder, f: _V) -> tuple[_V, _V]:
    """log(1 + f) as hi + lo for f in [sqrt(1/2) - 1, sqrt(2) - 1]."""
    lg = _LG[f.ft]
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    odd, even = lg[0::2], lg[1::2]  # Lg1, Lg3, ... and Lg2, Lg4, ...
    r = z * _horner(b, w, odd[::-1]) + w * _horner(b, w, even[::-1])
    hfsq = 0.5 * f * f
    hi = f - hfsq
    lo = ((f - hi) - hfsq) + s * (hfsq + r)  # (f - hi) - hfsq is hi's rounding error, exactly
    return hi, lo


def _log_combine(b: _Builder, k: _V, hi: _V, lo: _V, base: str) -> _V:
    """k * log_base(2) + (hi + lo) * log_base(e), rounded once at the end."""
    c = _C[k.ft]
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
    s, e = _two_sum(kh, ph)
    low = pl if kl is None else pl + kl
    return s + (e + low)


def _log_core(b: _Builder, u: _V, base: str = "e", ul=None, kadd=None) -> _V:
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
    return _nan_in_nan_out(b, u, r)


def _log1p_tiny(b: _Builder, r: _V, yh: _V, yl, use=None) -> _V:
    """r, except log1p(yh + yl) = y - y^2 / 2 where |yh| is tiny: through u = 1 + y the log
    kernel would cancel hi against lo and round a few times too often there."""
    tiny = b.cmp("olt", b.fabs(yh), 2.0 ** (-27 if yh.ft is F64 else -13))
    if use is not None:
        tiny = tiny & use
    series = b.fma(-0.5 * yh, yh, yh if yl is None else yl)
    return b.select(tiny, series if yl is None else yh + series, r)


def _log(b, x): return _log_core(b, x, "e")
def _log2(b, x): return _log_core(b, x, "2")
def _log10(b, x): return _log_core(b, x, "10")


def _log1p(b: _Builder, x: _V) -> _V:
    u, ul = _two_sum(1.0, x)
    r = _log1p_tiny(b, _log_core(b, u, "e", ul=ul), x, None)
    r = b.select(b.cmp("oeq", x, float("inf")), x, r)
    return b.select(b.cmp("oeq", x, 0.0), x, r)  # log1p(-0) = -0


# ----------------------------------------------------------------------------------------------
# Hyperbolic functions (fdlibm's formulas on top of the kernels above)

_TANH_P = {
    F32: (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
          -3.33332819422e-1),
}
_TANH_PQ = ((-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3),
            (1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3))


def _tanh(b: _Builder, x: _V) -> _V:
    a = b.fabs(x)
    z = a * a
    if x.ft is F32:  # Cephes tanhf for |x| < 0.625; else 1 - 2 / (exp(2|x|) + 1)
        small = b.fma(a * z, _horner(b, z, _TANH_P[F32]), a)
        # tanh rounds to 1 from 9.1 on; below, exp(2|x|) = y 2**k with k <= 27 is scaled by
        # adding k to y's exponent (no clamps, no denormals: 26% fewer instructions than
        # calling exp). NaN takes the small branch (ult) and stays NaN.
        ac = b.select(b.cmp("olt", a, 9.1), a, 9.1)
        y, k = _exp_f32(b, ac + ac)
        e = b.cast("bitcast", b.cast("bitcast", y, "i32") + (k << 23), "float")
        large = 1.0 - 2.0 / (e + 1.0)
        return b.copysign(b.select(b.cmp("ult", a, 0.625), small, large), x)
    p, q = _TANH_PQ
    small = b.fma(a, z * _horner(b, z, p) / _horner(b, z, q), a)
    e = b.call(f"fg_exp_{x.ft.suffix}", a + a)
    large = 1.0 - 2.0 / (e + 1.0)  # exp overflow gives exactly 1
    r = b.select(b.cmp("olt", a, 0.625), small, large)
    return b.copysign(r, x)  # also keeps -0 and NaN


def _logistic(b: _Builder, x: _V) -> _V:
    """1 / (1 + exp(-x)), as e / (1 + e) with e = exp(x) for x < 0 so it underflows gradually;
    e and 1 + e are kept as hi + lo pairs and the quotient corrected by its fma residual."""
    eh, el = _exp_kernel(b, -b.fabs(x), dd=True)
    dh, dl = _fast_two_sum(1.0, eh)
    dl = dl + el
    pos = b.cmp("oge", x, 0.0)
    nh, nl = b.select(pos, 1.0, eh), b.select(pos, 0.0, el)
    q = nh / dh
    r = q + (b.fma_exact(-q, dh, nh) + (nl - q * dl)) / dh
    return _nan_in_nan_out(b, x, r)


def _sinh(b: _Builder, x: _V) -> _V:
    a = b.fabs(x)
    top = 40.0 if x.ft is F64 else 20.0  # beyond, sinh = e^|x| / 2 to the last bit
    th, tl = _expm1_kernel(b, a)
    # (t + t / (t + 1)) / 2 with t = expm1|x| = th + tl; the quotient fma-corrected
    dh, dl = _fast_two_sum(1.0, th)
    q = th / dh
    q = q + (b.fma_exact(-q, dh, th) + (tl - q * (dl + tl))) / dh
    s, e = _two_sum(th, q)
    small = 0.5 * (s + (e + tl))
    large = _exp_kernel(b, a, shift=-1)  # overflows only when sinh does
    r = b.select(b.cmp("ole", a, top), small, large)
    return _nan_in_nan_out(b, x, b.copysign(r, x))


def _cosh(b: _Builder, x: _V) -> _V:
    a = b.fabs(x)
    cut = 0.3465735902799727  # ln(2) / 2
    th, tl = _expm1_kernel(b, b.select(b.cmp("olt", a, cut), a, 0.0))
    t = th + tl
    small = 1.0 + t * t / (2.0 * (1.0 + t))
    h = _exp_kernel(b, a, shift=-1)
    large = h + 0.25 / h
    r = b.select(b.cmp("olt", a, cut), small, large)
    return _nan_in_nan_out(b, x, r)


def _asinh(b: _Builder, x: _V) -> _V:
    ft = x.ft
    a = b.fabs(x)
    huge = b.cmp("ogt", a, 2.0 ** (28 if ft is F64 else 12))  # asinh = log(2a)
    big = b.cmp("ogt", a, 2.0)
    t = a * a
    u_big = 2.0 * a + 1.0 / (b.sqrt(t + 1.0) + a)
    yh, yl = _fast_two_sum(a, t / (1.0 + b.sqrt(1.0 + t)))  # asinh = log1p(y)
    u_small, ul_small = _two_sum(1.0, yh)
    ul_small = ul_small + yl
    u = b.select(huge, a, b.select(big, u_big, u_small))
    ul = b.select(big, 0.0, ul_small)
    r = _log_core(b, u, "e", ul=ul, kadd=b.select(huge, 1.0, 0.0, ft.ir))
    r = _log1p_tiny(b, r, yh, yl, b.not_(big))
    return b.copysign(r, x)


def _acosh(b: _Builder, x: _V) -> _V:
    ft = x.ft
    huge = b.cmp("ogt", x, 2.0 ** (28 if ft is F64 else 12))
    big = b.cmp("ogt", x, 2.0)
    u_big = 2.0 * x - 1.0 / (x + b.sqrt(x * x - 1.0))
    t = x - 1.0  # exact for x in [1, 2]
    t2, t2l = b.two_prod(t, t)
    wh, wl = _two_sum(2.0 * t, b.keep(t2))  # 2t + t^2 = wh + wl
    sq = b.sqrt(wh)
    sql = (b.fma_exact(-sq, sq, wh) + (wl + t2l)) / (sq + sq)  # sqrt(w) = sq + sql
    sql = b.select(b.cmp("oeq", sq, 0.0), 0.0, sql)
    yh, yl = _fast_two_sum(sq, t)  # acosh = log1p(y), y = t + sqrt(2t + t^2)
    u_small, ul_small = _two_sum(1.0, yh)
    ul_small = ul_small + (yl + sql)
    u = b.select(huge, x, b.select(big, u_big, u_small))
    ul = b.select(big, 0.0, ul_small)
    r = _log_core(b, u, "e", ul=ul, kadd=b.select(huge, 1.0, 0.0, ft.ir))
    return b.select(b.cmp("olt", x, 1.0), float("nan"), r)


def _atanh(b: _Builder, x: _V) -> _V:
    a = b.fabs(x)
    t = a + a
    small = b.cmp("olt", a, 0.5)
    ys, ysl = _fast_two_sum(t, t * a / (1.0 - a))
    yb = t / (1.0 - a)  # 1 - a is exact here
    ybl = b.fma_exact(-yb, 1.0 - a, t) / (1.0 - a)
    yh, yl = b.select(small, ys, yb), b.select(small, ysl, ybl)
    u, ul = _two_sum(1.0, yh)  # atanh = log1p(y) / 2
    r = 0.5 * _log1p_tiny(b, _log_core(b, u, "e", ul=ul + yl), yh, yl)
    r = b.select(b.cmp("oeq", a, 1.0), float("inf"), r)
    r = b.select(b.cmp("ogt", a, 1.0), float("nan"), r)
    return b.copysign(r, x)


# ----------------------------------------------------------------------------------------------
# sin/cos/tan: q = nearest integer to |x| 2/pi, r = |x| - q pi/2 with pi/2 in four parts (the
# first product exact under fma, the next two recovered by two_prod), kept as rh + rl; kernels
# are fdlibm's k_sin/k_cos (float64), Cephes sinf/cosf/tanf (float32) and Cephes tan (float64).

_SIN_P = {
    F32: (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1),
    F64: (1.58969099521155010221e-10, -2.50507602534068634195e-08, 2.75573137070700676789e-06,
          -1.98412698298579493134e-04, 8.33333333332248946124e-03, -1.66666666666666324348e-01),
}
_COS_P = {
    F32: (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2),
    F64: (-1.13596475577881948265e-11, 2.08757232129817482790e-09, -2.75573143513906633035e-07,
          2.48015872894767294178e-05, -1.38888888888741095749e-03, 4.16666666666666019037e-02),
}
_TAN_P32 = (9.38540185543e-3, 3.11992232697e-3, 2.44301354525e-2, 5.34112807005e-2,
            1.33387994085e-1, 3.33331568548e-1)
_TAN_PQ64 = ((-1.30936939181383777646e4, 1.15351664838587416140e6, -1.79565251976484877988e7),
             (1.0, 1.36812963470692954678e4, -1.32089234440210967447e6, 2.50083801823357915839e7,
              -5.38695755929454629881e7))


def _reduce_pio2(b: _Builder, a: _V) -> tuple[_V, _V, _V]:
    """(rh, rl, q mod 4) with a = q pi/2 + rh + rl, |rh| <~ pi/4, for a = |x| >= 0."""
    c = _C[a.ft]
    p1, p2, p3, p4 = c["pio2_4"]
    # q = nearest integer to a 2/pi: rint of the rounded product, then +-1 from the exact rest
    # (the product's rounding error exceeds 1/2 ulp of q once a is large)
    ph, pl = b.two_prod(a, c["2/pi"][0])
    q = b.rint(ph)
    frac = (ph - q) + (pl + a * c["2/pi"][1])
    q = q + b.select(b.cmp("ogt", frac, 0.5), 1.0, b.select(b.cmp("olt", frac, -0.5), -1.0, 0.0,
                                                             a.ty))
    t1 = b.sub_multiple(q, p1, a, a.ft.mant + 1)  # a short multiple of ulp(p1)
    m2, m2e = b.two_prod(q, p2)
    s, e = _two_sum(t1, -m2)
    m3, m3e = b.two_prod(q, p3)
    rh, rl = _fast_two_sum(s, ((e - m2e) - m3) - (m3e + q * p4))
    quad = _to_int(b, q - 4.0 * b.rint(q * 0.25)) & 3
    return rh, rl, quad


# Large arguments: Payne-Hanek. a = m 2^e with an integer mantissa m, and a (2/pi) mod 4 is
# m (2^e 2/pi mod 4): only the bits of 2/pi from weight 2^-(e - 1) down matter (the higher
# ones give multiples of 4), as many as the fraction's precision needs. _TWO_OPI_BITS is the
# string S of 2/pi's bits after two zero bits (2/pi = sum S[j] 2^-(j-1)), so 2^t 2/pi mod 4
# is the window S[t], S[t + 1], ... with S[t] weighing 2; words hold 24 (float32) or 64
# (float64) bits of S, most significant first. tests/test_trig_large_args.py derives them
# again from pi.
_TWO_OPI_24 = (0x28be60, 0xdb9391, 0x054a7f, 0x09d5f4, 0x7d4d37, 0x7036d8, 0xa5664f, 0x10e410,
               0x7f9458)
_TWO_OPI_64 = (0x28be60db9391054a, 0x7f09d5f47d4d3770, 0x36d8a5664f10e410, 0x7f9458eaf7aef158,
               0x6dc91b8e909374b8, 0x01924bba82746487, 0x3f877ac72c4a69cf, 0xba208d7d4baed121,
               0x3a671c09ad17df90, 0x4e64758e60d4ce7d, 0x272117e2ef7e4a0e, 0xc7fe25fff7816603,
               0xfbcbc462d6829b47, 0xdb4d9fb3c9f2c26d, 0xd3d18fd9a797fa8b, 0x5d49eeb1faf97c5e,
               0xcf41ce7de294a4ba, 0x9afed7ec47e35742, 0x1580cc11bf1edaea, 0xfc33ef0826bd0d87)
_TWO_OPI_TABLE = "fg_two_opi_bits"  # the float64 words as an IR constant (a pseudo-function)


def _clamp_int(b: _Builder, v: _V, lo: int, hi: int) -> _V:
    v = b.select(b.cmp("slt", v, lo), lo, v)
    return b.select(b.cmp("sgt", v, hi), hi, v)


def _large_frac_f32(b: _Builder, a: _V, t: int, offset: int = 0):
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
        w = b.lift(_TWO_OPI_24[i], "i32")
        for k in range(1, 5):
            w = b.select(at[k - 1], _TWO_OPI_24[i + k], w)
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
    return (q, top - (q << 22), (digit[5] << 12) | digit[4],
            (digit[3] << 12) | digit[2])


def _large_pio2_f32(b: _Builder, a: _V) -> tuple[_V, _V, _V]:
    """(rh, rl, q) with a = q pi/2 + rh + rl (rh + rl to about 2^-48 relative), |rh| <= pi/4
    and q an i32 whose low two bits are right, for float32 a >= 2^24, in float32 arithmetic
    (the GPU's): F of :func:`_large_frac_f32` as a double-word fh + fl (A 2^-22 + B 2^-46 is
    exact by a fast two-sum: |A| >= 1 or A = 0), times pi/2 by an exact product."""
    q, ia, ib, ic = _large_frac_f32(b, a, 0)
    fa = b.cast("sitofp", ia, "float") * 2.0 ** -22
    fb = b.cast("sitofp", ib, "float") * 2.0 ** -46
    fh, fl = _fast_two_sum(fa, fb)
    fl = fl + b.cast("sitofp", ic, "float") * 2.0 ** -70
    p1, p2 = _C[F32]["pio2"]
    ph, pe = b.two_prod(fh, p1)
    rh, rl = _fast_two_sum(ph, pe + b.keep(fh * p2 + fl * p1))
    return rh, rl, q


def _lshr(b: _Builder, v: _V, n) -> _V:
    """Logical shift right (LLVM only: the float64 path)."""
    n = b.lift(n, v.ty)
    return b.emit(f"lshr {v.ty} {v.ref}, {n.ref}", v.ty)


def _two_opi_word(b: _Builder, i: _V) -> _V:
    """Word ``i`` of _TWO_OPI_64, loaded from the table constant (a gather when vectorised)."""
    b.callees.add(f"{_TWO_OPI_TABLE}_f64")
    n = len(_TWO_OPI_64)
    p = b.emit(f"getelementptr inbounds [{n} x i64], ptr @{_TWO_OPI_TABLE}, i64 0, "
               f"i64 {i.ref}", "ptr")
    return b.emit(f"load i64, ptr {p.ref}", "i64")


def _two_opi_table_ir() -> str:
    words = ", ".join(f"i64 {w - (1 << 64) if w >> 63 else w}" for w in _TWO_OPI_64)
    return (f"@{_TWO_OPI_TABLE} = internal unnamed_addr constant [{len(_TWO_OPI_64)} x i64] "
            f"[{words}], align 8\n")


def _large_pio2_f64(b: _Builder, a: _V) -> tuple[_V, _V, _V]:
    """(rh, rl, q mod 4) with a = q pi/2 + rh + rl, |rh| <= pi/4, for float64 a >= 2^53
    (valid from 2^52): a = m 2^e with m < 2^53 and 0 <= e <= 971; the 192-bit window
    W = S[e ...] (W 2^-190 = 2^e 2/pi mod 4 to 2^-190) from three 64-bit words of the table,
    m W mod 2^192 by 64 x 64 -> 128-bit products (its low word left out), so the top 128 bits
    hi:lo are (q + F) mod 4 in units of 2^-126, F to about 2^-135 (at least 64 significant
    bits where |F| >= 2^-62; the float64 closest to a multiple of pi/2 has |F| = 2^-61.5). F
    becomes a double-word (three exact conversions and a two-sum), times pi/2 exactly."""
    i64, i128 = "i64", "i128"
    ai = b.cast("bitcast", a, i64)
    o = _clamp_int(b, (ai >> 52) - 1075, 0, 972)
    d, s = o >> 6, o & 63
    v = [_two_opi_word(b, d + i) for i in range(4)]
    z = [(v[i] << s) | _lshr(b, _lshr(b, v[i + 1], 1), 63 - s) for i in range(3)]
    m = (ai & ((1 << 52) - 1)) | (1 << 52)
    m128 = b.cast("zext", m, i128)
    p1 = m128 * b.cast("zext", z[1], i128)
    p2 = m128 * b.cast("zext", z[2], i128)
    t = p1 + _lshr(b, p2, 64)
    lo = b.cast("trunc", t, i64)
    hi = b.cast("trunc", _lshr(b, t, 64), i64) + m * z[0]
    q = _lshr(b, hi + (1 << 61), 62)
    f = hi - (q << 62)  # F = f 2^-62 + lo 2^-126, -2^61 <= f < 2^61
    x1 = b.cast("sitofp", f, "double")
    e1 = f - b.cast("fptosi", x1, i64)  # what x1 rounded off, |e1| <= 2^8
    x2 = b.cast("sitofp", (e1 << 52) + _lshr(b, lo, 12), "double") * 2.0 ** -114
    x3 = b.cast("uitofp", lo & 0xFFF, "double") * 2.0 ** -126
    fh, fl = _two_sum(x1 * 2.0 ** -62, x2)
    fl = fl + x3
    c1, c2 = _C[F64]["pio2"]
    ph, pe = b.two_prod(fh, c1)
    rh, rl = _fast_two_sum(ph, pe + (fh * c2 + fl * c1))
    return rh, rl, q


def _sin_kernel(b: _Builder, r: _V, rl: _V) -> _V:
    z = r * r
    v = z * r
    if r.ft is F32:
        return r + b.keep(v * _horner(b, z, _SIN_P[F32]) + rl * (1.0 - 0.5 * z))
    p = _SIN_P[F64]
    rr = _horner(b, z, p[:-1])
    return r - ((z * (0.5 * rl - v * rr) - rl) - v * p[-1])  # fdlibm __sin(x, y, 1)


def _cos_kernel(b: _Builder, r: _V, rl: _V) -> _V:
    z = r * r
    hz = 0.5 * z
    w = 1.0 - hz
    return w + b.keep(((1.0 - w) - hz) + (z * z * _horner(b, z, _COS_P[r.ft]) - r * rl))


def _finite_only(b: _Builder, x: _V, r: _V) -> _V:
    """NaN where x is inf (or NaN): sin, cos and tan of inf are NaN."""
    return b.select(b.cmp("olt", b.fabs(x), float("inf")), r, float("nan"))


# Large arguments on the CPU. Every element computing both reductions (a select) made float32
# sin 4-7x slower on small arguments (the Payne-Hanek path is 40-60 vector operations where the
# whole small-argument sin is 25; a table lookup is a gather, slower still on this x86-64
# host). So sin/cos/tan branch instead: |x| >= 2^24 (float32) / 2^53 (float64), inf and NaN
# call fg_<fn>_large_<f32|f64>, and the call names masked vector variants of itself (the
# "vector-function-abi-variant" attribute, kept by @llvm.compiler.used): the loop vectoriser
# turns the conditional call into one call per vector with the lanes' mask. The variants are
# alwaysinline and llvm_capi.optimize runs the always-inliner once more after the vectoriser,
# so what stays in the vector loop is a test of the mask (a compare and kortest/movmsk) and a
# branch around one call of fg_<fn>_large_<f32|f64>_lanes<n>, which runs the scalar function
# on every lane; both are noinline and cold, and the branch weighs 1 : 2^20 (so the register
# allocator saves registers around the call rather than reloading constants in the hot path).
# The call per vector (the variants noinline) cost float32 sin/cos 1.2-1.3x their time
# before large arguments, the benchmark chain 1.15-1.3x; the branch 1.04-1.07x and 0.94-1.06x
# (bench/RESULTS.md, session 9). Tried and dropped: the lanes function preserve_allcc (on
# AVX-512 that keeps only ymm0-15, and LLVM's vzeroupper before its return broke even those:
# wrong results in the other lanes); the Payne-Hanek body vectorised and inlined behind the
# branch (large arguments 6x faster, but 3x the compile time of every module using it).
_VARIANT_LANES = (2, 4, 8, 16)
_LARGE_DECL = re.compile(r"^declare \S+ @(fg_\w+_large_f(?:32|64))\(", re.M)
#: the functions whose body holds that branch (lgamma and digamma call sin and tan)
BRANCHING = frozenset({"sin", "cos", "tan", "lgamma", "digamma"})


def _branch_large(b: _Builder, x: _V, r: _V, fn: str) -> _V:
    """``r`` (the small-argument result, all of ``b``'s lines so far), or fg_<fn>_large(x)
    where |x| is at least the Cody-Waite limit, inf or NaN (see above). The test and the call
    come first, the small-argument lines after the join: across the call (which clobbers every
    vector register) only x and the loop's constants are live, not the small path's
    temporaries (fewer spills in the hot loop: the benchmark chain). An ``entry`` block, the
    call's block, and the join holding the rest."""
    limit = 2.0 ** (x.ft.mant + 1)
    sym = f"fg_{fn}_large_{x.ft.suffix}"
    b.callees.add(sym)
    suffix = x.ft.suffix
    b.intrinsics[f"llvm.fabs.{suffix}"] = f"declare {x.ty} @llvm.fabs.{suffix}({x.ty})"
    variants = ",".join(f"_ZGV_LLVM_M{n}v_{sym}({sym}_v{n})" for n in _VARIANT_LANES)
    small, b.lines = b.lines, [
        f"  %large.abs = call {x.ty} @llvm.fabs.{suffix}({x.ty} {x.ref})",
        f"  %large.big = fcmp uge {x.ty} %large.abs, {x.ft.literal(limit)}",  # also NaN
        "  br i1 %large.big, label %large, label %join",
        "large:",
        f"  %large.got = call {x.ty} @{sym}({x.ty} {x.ref}) "
        f"\"vector-function-abi-variant\"=\"{variants}\"",
        "  br label %join",
        "join:",
        f"  %large.r = phi {x.ty} [poison, %entry], [%large.got, %large]"]
    b.lines += small
    return b.select(_V(b, "%large.big", "i1"), _V(b, "%large.r", x.ty), r)


def _large_functions(sym: str, ty: str, body: list[str], result: str,
                     part: str = "all") -> str:
    """IR of the large-argument function ``sym`` (see above): ``sym`` itself (the scalar
    body; the vectoriser maps it to the variants, the scalar remainder loop calls it) and, for
    each width n, ``<sym>_lanes<n>`` (``sym`` on every lane), all noinline and cold, and the
    alwaysinline masked variants ``<sym>_v<n>``, which call the lanes function only when any
    lane is masked (the other lanes' results are poison). ``part``: "all" of it, internal;
    "library" (:func:`large_library_ir`): the scalar and lanes functions, external; "module":
    the variants, calling the library's functions (declared)."""
    link = "" if part == "library" else "internal "
    attrs = "noinline nounwind cold"
    text = []
    if part == "module":
        text.append(f"declare {ty} @{sym}({ty}) nounwind cold memory(none)")
    else:
        text += [f"define {link}{ty} @{sym}({ty} %a0) {attrs} {{",
                 "entry:", *body, f"  ret {ty} {result}", "}", ""]
    for n in _VARIANT_LANES:
        vt = f"<{n} x {ty}>"
        if part == "module":
            text.append(f"declare {vt} @{sym}_lanes{n}({vt}) nounwind cold memory(none)")
        else:
            text += [f"define {link}{vt} @{sym}_lanes{n}({vt} %x) {attrs} {{"]
            prev = "poison"
            for i in range(n):  # every lane (sym is pure): no branch per lane
                text += [f"  %x{i} = extractelement {vt} %x, i32 {i}",
                         f"  %r{i} = call {ty} @{sym}({ty} %x{i})",
                         f"  %v{i} = insertelement {vt} {prev}, {ty} %r{i}, i32 {i}"]
                prev = f"%v{i}"
            text += [f"  ret {vt} {prev}", "}", ""]
        if part == "library":
            continue
        text += [f"define internal {vt} @{sym}_v{n}({vt} %x, <{n} x i1> %m) "
                 "alwaysinline nounwind {",
                 "entry:", f"  %bits = bitcast <{n} x i1> %m to i{n}",
                 f"  %any = icmp ne i{n} %bits, 0",
                 "  br i1 %any, label %lanes, label %none, "
                 "!prof !{!\"branch_weights\", i32 1, i32 1048575}",
                 "none:", f"  ret {vt} poison",
                 "lanes:", f"  %r = call {vt} @{sym}_lanes{n}({vt} %x)", f"  ret {vt} %r",
                 "}", ""]
    return "\n".join(text)


# The large-argument functions are the costliest part of a module that uses sin, cos or tan
# (~60 ms of LLVM's time for float32 sin: measured), and they are the same in every module, so
# the renderer compiles each once per process instead (the on-disk cache may hold the object),
# as a library whose symbols every later module resolves (prelude(..., shared_large=True)).
_large_libraries: dict[str, object] = {}  # fg_<fn>_large_<f32|f64> -> its compiled library


def large_symbols(sym: str) -> tuple[str, ...]:
    """The functions of ``sym``'s library: ``sym`` (fg_<fn>_large_<f32|f64>) and its lanes
    functions."""
    return (sym, *(f"{sym}_lanes{n}" for n in _VARIANT_LANES))


def large_library_ir(sym: str) -> str:
    """IR of the library of the large-argument function ``sym`` (fg_<fn>_large_<f32|f64>):
    its scalar and lanes functions with external linkage."""
    pending, done = [sym], {}
    while pending:
        s = pending.pop()
        if s not in done:
            done[s], callees, _ = _define(s[3:-4], F32 if s.endswith("f32") else F64,
                                          "library")
            pending.extend(callees)
    return "\n".join(done[s] for s in sorted(done))


def ensure_large_library(syms: Iterable[str]) -> None:
    """Compile the libraries of the large-argument functions ``syms`` (each once per process)
    and make their symbols resolvable by every module compiled afterwards. Thread safe (as
    matmul.ensure_library)."""
    missing = [s for s in syms if s not in _large_libraries]
    if not missing:
        return
    import ctypes

    from fungrad.lowering.cpu import compiler as cpu
    from fungrad.lowering.cpu import llvm_capi
    with cpu.llvm_lock:
        for sym in missing:
            if sym in _large_libraries:
                continue
            module = cpu.compile_module(large_library_ir(sym), large_symbols(sym),
                                        name=f"fungrad_{sym[3:]}")
            # every module using the function calls into it: never free it
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(module))
            for s in large_symbols(sym):
                llvm_capi.add_symbol(s, module.address(s))
            _large_libraries[sym] = module


def large_functions_declared(text: str) -> list[str]:
    """The large-argument functions a module's IR ``text`` declares (prelude with
    ``shared_large``): the libraries to ensure before compiling it."""
    return sorted({m for m in _LARGE_DECL.findall(text)})


# float32 sin/cos work in float64: |x| = q pi + r with two fma (q < 2^23 and |r| < 2, so the
# first is exact; the second rounds once, and the part of pi left out weighs q 2^-106), then
# sin(r) for |r| <= pi/2 by one odd minimax polynomial (relative error 6e-9, 0.1 ulp of
# float32), rounded once: at most 0.61 ulp in all. sin(x) = (-1)^q sin(r); cos(x) =
# (-1)^(q+1) sin(r) with half-integer q. No cos kernel, no quadrant selects, no double-word
# tails: 3.1 instructions per element where the float32 reduction took 5.1.
_SIN_PI_P32 = (2.6055898577500727e-06, -0.00019809521275607992, 0.008333065203243754,
               -0.16666659513002852)


def _sin_pi_f32(b: _Builder, x: _V, q: _V, r: _V, cos: bool) -> _V:
    """float32 sin(x) (or cos(x)) from |x| = q pi + r (q + 1/2 for cos; q an i32 of the
    right parity, r float64 with |r| <= pi/2)."""
    z = r * r
    s = b.cast("fptrunc", b.fma(r * z, _horner(b, z, _SIN_PI_P32), r), "float")
    flip = q << 31  # (-1)^q in the sign bit
    if cos:
        flip = flip ^ -(2 ** 31)
    else:  # sin is odd
        flip = flip ^ (b.cast("bitcast", x, "i32") & -(2 ** 31))
    return b.cast("bitcast", b.cast("bitcast", s, "i32") ^ flip, "float")


def _sin_cos_f32(b: _Builder, x: _V, cos: bool) -> _V:
    """float32 sin(x) or cos(x) through float64 (see above); from 2^24 on, inf and NaN by
    :func:`_sin_cos_f32_large`."""
    ad = b.cast("fpext", b.fabs(x), "double")
    pi = _C[F64]["pi"]
    q = b.rint(ad * (1.0 / math.pi) - (0.5 if cos else 0.0))
    m = q + 0.5 if cos else q  # exact
    r = b.fma_exact(-m, pi[1], b.fma_exact(-m, pi[0], ad))
    qi = b.cast("fptosi", q, "i32")  # poison from 2^31 on, where the branch takes over
    return _branch_large(b, x, _sin_pi_f32(b, x, qi, r, cos), "cos" if cos else "sin")


def _sin_cos_f32_large(b: _Builder, x: _V, cos: bool) -> _V:
    """float32 sin(x) or cos(x) for |x| >= 2^24: :func:`_large_frac_f32` by pi (t = -1),
    F = A 2^-22 + B 2^-46 (exact in float64) + C 2^-70, r = F pi; NaN for inf and NaN."""
    q, ia, ib, ic = _large_frac_f32(b, b.fabs(x), -1, 1 << 21 if cos else 0)
    f = b.fma(b.cast("sitofp", ib, "double"), 2.0 ** -46,
              b.cast("sitofp", ia, "double") * 2.0 ** -22)
    f = b.fma(b.cast("sitofp", ic, "double"), 2.0 ** -70, f)
    return _finite_only(b, x, _sin_pi_f32(b, x, q, f * math.pi, cos))


def _reduce_large(b: _Builder, a: _V) -> tuple[_V, _V, _V]:
    """:func:`_large_pio2_f32` / :func:`_large_pio2_f64` with the quadrant in _reduce_pio2's
    integer type."""
    rh, rl, q = (_large_pio2_f64 if a.ft is F64 else _large_pio2_f32)(b, a)
    return rh, rl, q & 3


def _sin_cos_f64(b: _Builder, x: _V, rh: _V, rl: _V, quad: _V, cos: bool) -> _V:
    """float64 sin(x) or cos(x) from |x| = quad pi/2 + rh + rl (mod 2 pi)."""
    s, c = _sin_kernel(b, rh, rl), _cos_kernel(b, rh, rl)
    if cos:
        r = b.select(b.cmp("ne", quad & 1, 0), s, c)
        return b.select(b.cmp("ne", (quad + 1) & 2, 0), -r, r)
    r = b.select(b.cmp("ne", quad & 1, 0), c, s)
    r = b.select(b.cmp("ne", quad & 2, 0), -r, r)
    return b.select(_signbit(b, x), -r, r)  # sin is odd; sin(-0) = -0


def _sin(b: _Builder, x: _V) -> _V:
    if x.ft is F32:
        return _sin_cos_f32(b, x, cos=False)
    return _branch_large(b, x, _sin_cos_f64(b, x, *_reduce_pio2(b, b.fabs(x)), False), "sin")


def _cos(b: _Builder, x: _V) -> _V:
    if x.ft is F32:
        return _sin_cos_f32(b, x, cos=True)
    return _branch_large(b, x, _sin_cos_f64(b, x, *_reduce_pio2(b, b.fabs(x)), True), "cos")


def _sin_large(b: _Builder, x: _V) -> _V:
    if x.ft is F32:
        return _sin_cos_f32_large(b, x, cos=False)
    return _finite_only(b, x, _sin_cos_f64(b, x, *_reduce_large(b, b.fabs(x)), False))


def _cos_large(b: _Builder, x: _V) -> _V:
    if x.ft is F32:
        return _sin_cos_f32_large(b, x, cos=True)
    return _finite_only(b, x, _sin_cos_f64(b, x, *_reduce_large(b, b.fabs(x)), True))


def _tan_parts(b: _Builder, x: _V, rh: _V, rl: _V, quad: _V) -> _V:
    """tan(x) from |x| = quad pi/2 + rh + rl (mod pi)."""
    z = rh * rh
    if x.ft is F32:
        u = rh * z * _horner(b, z, _TAN_P32)
    else:
        p, q = _TAN_PQ64
        u = rh * (z * _horner(b, z, p) / _horner(b, z, q))
    th, tl = _fast_two_sum(rh, u)
    tl = tl + rl * (1.0 + th * th)  # tan(r + rl) = tan r + rl sec^2 r
    inv = -1.0 / th
    # -1/(th + tl) = inv (1 + e) + inv^2 tl to first order, e = 1 + inv th exactly (fma)
    cot = inv + inv * (b.fma(inv, th, 1.0) + inv * tl)
    r = b.select(b.cmp("ne", quad & 1, 0), cot, th + tl)
    return b.select(_signbit(b, x), -r, r)


def _tan(b: _Builder, x: _V) -> _V:
    return _branch_large(b, x, _tan_parts(b, x, *_reduce_pio2(b, b.fabs(x))), "tan")


def _tan_large(b: _Builder, x: _V) -> _V:
    return _finite_only(b, x, _tan_parts(b, x, *_reduce_large(b, b.fabs(x))))


#: the functions :func:`_branch_large` calls (one argument; not in MATH_FUNCTIONS)
_LARGE_EMITTERS = {"sin_large": _sin_large, "cos_large": _cos_large, "tan_large": _tan_large}


# ----------------------------------------------------------------------------------------------
# Inverse trigonometric functions: Cephes atanf/asinf (float32), Cephes atan and fdlibm asin
# rational functions (float64); pi/2, pi/4, pi added as hi + lo.

_ATAN_P32 = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)
_ATAN_PQ64 = ((-8.750608600031904122785e-1, -1.615753718733365076637e1,
               -7.500855792314704667340e1, -1.228866684490136173410e2,
               -6.485021904942025371773e1),
              (1.0, 2.485846490142306297962e1, 1.650270098316988542046e2,
               4.328810604912902668951e2, 4.853903996359136964868e2,
               1.945506571482613964425e2))
_ASIN_P32 = (4.2163199048e-2, 2.4181311049e-2, 4.5470025998e-2, 7.4953002686e-2, 1.6666752422e-1)
_ASIN_PQ64 = ((3.47933107596021167570e-05, 7.91534994289814532176e-04, -4.00555345006794114027e-02,
               2.01212532134862925881e-01, -3.25565818622400915405e-01, 1.66666666666666657415e-01),
              (7.70381505559019352791e-02, -6.88283971605453293030e-01, 2.02094576023350569471e+00,
               -2.40339491173441421878e+00, 1.0))


def _pio4_multiple(b: _Builder, m: _V, ft: _FloatType) -> tuple[_V, _V]:
    """m * pi/4 as hi + lo for an integer m in 0..4."""
    c = _C[ft]
    his, los = zip((0.0, 0.0), c["pio4"], c["pio2"], c["3pio4"], c["pi"])
    hi, lo = b.lift(0.0, ft.ir), b.lift(0.0, ft.ir)
    for i in range(1, 5):
        hit = b.cmp("eq", m, i)
        hi, lo = b.select(hit, his[i], hi), b.select(hit, los[i], lo)
    return hi, lo


def _atan_parts(b: _Builder, num: _V, den: _V) -> tuple[_V, _V]:
    """(m, p) with atan(num / den) = m pi/4 + p, for num, den >= 0 finite, den > 0 unless
    num is inf. The reduced argument t = (num - den) / (num + den) or -den / num is formed
    with its rounding error tl (two_sum, fma residual), so only the final sum rounds."""
    ft = num.ft
    big = b.cmp("ogt", num, den * 2.414213562373095)  # tan(3 pi / 8)
    mid = b.cmp("ogt", num, den * (0.4142135623730950 if ft is F32 else 0.66))
    dh, dl = _two_sum(num, den)
    nh, nl = _two_sum(num, -den)
    n_hi = b.select(big, -den, b.select(mid, nh, num))
    n_lo = b.select(mid, b.select(big, 0.0, nl), 0.0)
    d_hi = b.select(big, num, b.select(mid, dh, den))
    d_lo = b.select(mid, b.select(big, 0.0, dl), 0.0)
    t = n_hi / d_hi
    tl = (b.fma_exact(-t, d_hi, n_hi) + (n_lo - t * d_lo)) / d_hi
    tl = b.select(b.cmp("oeq", d_hi, float("inf")), 0.0, tl)
    z = t * t
    if ft is F32:
        p = b.fma(t * z, _horner(b, z, _ATAN_P32), t)
    else:
        pp, qq = _ATAN_PQ64
        p = b.fma(t, z * _horner(b, z, pp) / _horner(b, z, qq), t)
    p = b.fma(tl, 1.0 - z, p)  # atan(t + tl) = atan(t) + tl / (1 + t^2)
    m = b.select(big, 2, b.select(mid, 1, 0, ft.int_ir))
    return m, p


def _atan(b: _Builder, x: _V) -> _V:
    m, p = _atan_parts(b, b.fabs(x), b.lift(1.0, x.ty))
    hi, lo = _pio4_multiple(b, m, x.ft)
    return b.copysign(hi + (p + lo), x)


def _atan2(b: _Builder, y: _V, x: _V) -> _V:
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
    x_neg = _signbit(b, x)
    base = b.select(swap, 2, b.select(x_neg, 4, 0, x.ft.int_ir))
    minus = swap ^ x_neg
    hi, lo = _pio4_multiple(b, base + b.select(minus, -m, m), x.ft)
    r = b.copysign(hi + (b.select(minus, -p, p) + lo), y)
    return b.select(b.cmp("uno", x, y), x + y, r)


def _asin_acos_parts(b: _Builder, x: _V):
    """|x| <= 1/2: (a, w) with asin(a) = a + w; else (s, w) with asin(a) = pi/2 - 2 (s + w)."""
    a = b.fabs(x)
    small = b.cmp("ole", a, 0.5)
    z = b.select(small, a * a, (1.0 - a) * 0.5)
    s = b.sqrt(z)
    if x.ft is F32:
        rat = z * _horner(b, z, _ASIN_P32)
    else:
        pp, qq = _ASIN_PQ64
        rat = z * _horner(b, z, pp) / _horner(b, z, qq)
    corr = b.fma_exact(-s, s, z) / (s + s)  # sqrt(z) = s + corr to second order
    corr = b.select(b.cmp("oeq", s, 0.0), 0.0, corr)
    base = b.select(small, a, s)
    w = base * rat
    return a, small, s, b.select(small, w, corr + w)


def _asin(b: _Builder, x: _V) -> _V:
    c = _C[x.ft]
    a, small, s, w = _asin_acos_parts(b, x)
    h, e = _two_sum(c["pio2"][0], -2.0 * s)
    large = h + (e + (c["pio2"][1] - 2.0 * w))
    return b.copysign(b.select(small, a + w, large), x)


def _acos(b: _Builder, x: _V) -> _V:
    c = _C[x.ft]
    _, small, s, w = _asin_acos_parts(b, x)
    mid = c["pio2"][0] - (x - (c["pio2"][1] - b.copysign(w, x)))
    pos = 2.0 * (s + w)
    h, e = _two_sum(c["pi"][0], -2.0 * s)
    neg = h + (e + (c["pi"][1] - 2.0 * w))
    return b.select(small, mid, b.select(b.cmp("ogt", x, 0.0), pos, neg))


# ----------------------------------------------------------------------------------------------
# erf/erfc: fdlibm s_erf.c (float32 uses the same coefficients rounded, as FreeBSD s_erff.c);
# the four intervals' rational functions are evaluated once, with per-lane selected coefficients.

_ERX = 8.45062911510467529297e-01
_ERF_PQ = (  # (P ascending, Q ascending) per interval
    ((1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
      -5.77027029648944159157e-03, -2.37630166566501626084e-05),
     (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
      1.32494738004321644526e-04, -3.96022827877536812320e-06)),
    ((-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
      3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
      -2.16637559486879084300e-03),
     (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
      1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)),
    ((-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
      -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
      -8.12874355063065934246e+01, -9.81432934416914548592e+00),
     (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
      6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
      6.57024977031928170135e+00, -6.04244152148580987438e-02)),
    ((-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
      -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
      -4.83519191608651397019e+02),
     (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
      3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
      -2.24409524465858183362e+01)),
)


def _erf_parts(b: _Builder, x: _V, a_max: float):
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

    num = _horner(b, v, [coeff(0, i) for i in range(7, -1, -1)])
    den = _horner(b, v, [coeff(1, i) for i in range(8, -1, -1)])
    rat = num / den
    # exp(-a^2 - 0.5625 + rat) with -a^2 exact as h + l (fdlibm truncates a instead)
    h, l = b.two_prod(a, a)
    s1, e1 = _fast_two_sum(-h, -0.5625)
    s2, e2 = _fast_two_sum(s1, rat)
    big = _exp_kernel(b, s2, (e1 + e2) - l) / a
    return a, i0, i1, rat, big


def _erf(b: _Builder, x: _V) -> _V:
    a, i0, i1, rat, big = _erf_parts(b, x, 6.0)
    r = b.select(i0, b.fma(a, rat, a), b.select(i1, _ERX + rat, 1.0 - big))
    r = b.select(b.cmp("oge", a, 6.0), 1.0, r)
    return _nan_in_nan_out(b, x, b.copysign(r, x))


def _erfc(b: _Builder, x: _V) -> _V:
    a, i0, i1, rat, big = _erf_parts(b, x, 28.0)
    pos = b.cmp("ogt", x, 0.0)
    h, e = _two_sum(1.0, -x)
    r0 = h + b.fma_exact(-x, rat, e)  # 1 - x - x rat with one rounding (fdlibm rounds twice)
    r1 = b.select(pos, (1.0 - _ERX) - rat, 1.0 + b.keep(_ERX + rat))
    r2 = b.select(pos, big, 2.0 - big)
    r = b.select(i0, r0, b.select(i1, r1, r2))
    r = b.select(b.cmp("oge", a, 28.0), b.select(pos, 0.0, 2.0, x.ty), r)
    return _nan_in_nan_out(b, x, r)


# ----------------------------------------------------------------------------------------------
# pow and cbrt

_LOG_DD_R = tuple(2.0 / n for n in range(25, 5, -2))  # 2/25, ..., 2/7


def _log_dd(b: _Builder, a: _V) -> tuple[_V, _V]:
    """log(a) as a double-word hi + lo, a > 0 finite: 2s + 2/3 s^3 + 2/5 s^5 + ..., s = f /
    (2 + f), with the first three terms in double-word arithmetic (float64: error about 2^-69
    absolute, so y log(a) stays good to 2^-60 relative for every finite pow result; the same
    in float32 words, for the GPU, about 2^-40)."""
    ft = a.ft
    c = _C[ft]
    k, f = _log_split(b, a)
    dh, dl = _fast_two_sum(2.0, f)
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
    u = c5h * z * _horner(b, z, _LOG_DD_R)  # 2/7 s^7 + ... + 2/25 s^25, below 2^-19
    lh, e = _two_sum(sh + sh, t3h)
    lh, e1 = _two_sum(lh, t5h)
    ll = (e + e1) + ((sl + sl) + (t3l + (t5l + u)))
    kh, ke = b.two_prod(k, c["ln2"][0])
    h, e2 = _two_sum(kh, lh)
    return _fast_two_sum(h, e2 + (ll + (ke + k * c["ln2"][1])))


def _pow_magnitude(b: _Builder, ax: _V, y: _V) -> _V:
    """|x|**y for finite |x| > 0, via exp(y log|x|) with log in extra precision: double-word
    arithmetic in the value's own type, except that the CPU's float32 works in float64."""
    if ax.ft is not F32:
        lh, ll = _log_dd(b, ax)
        yh, ye = b.two_prod(y, lh)
        return _exp_kernel(b, yh, ye + y * ll)
    axd, yd = b.cast("fpext", ax, "double"), b.cast("fpext", y, "double")
    k, f = _log_split(b, axd)
    hi, lo = _log1p_of_f(b, f)
    return b.cast("fptrunc", _exp_kernel(b, yd * _log_combine(b, k, hi, lo, "e")), "float")


def _pow(b: _Builder, x: _V, y: _V) -> _V:
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
    at_zero = b.select(y_neg, b.select(y_odd, b.copysign(inf, x), inf),
                       b.select(y_odd, x, 0.0))
    r = b.select(b.cmp("oeq", ax, 0.0), at_zero, r)
    at_inf = b.select(y_neg, b.select(y_odd, b.copysign(0.0, x), 0.0),
                      b.select(y_odd, x, inf))
    r = b.select(b.cmp("oeq", ax, inf), at_inf, r)
    y_inf = b.select(b.cmp("oeq", ax, 1.0), 1.0,
                     b.select(b.cmp("ogt", ax, 1.0) ^ y_neg, inf, 0.0, x.ty))
    r = b.select(b.cmp("oeq", b.fabs(y), inf), y_inf, r)
    r = b.select(b.cmp("uno", x, y), float("nan"), r)
    return b.select(b.cmp("oeq", y, 0.0) | b.cmp("oeq", x, 1.0), 1.0, r)


_CBRT_B = {F32: 709958130, F64: 715094163 << 32}  # fdlibm's biased exponent offsets


def _cbrt(b: _Builder, x: _V) -> _V:
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
    y = y * b.select(tiny, 2.0 ** -m, b.select(huge, 2.0 ** m, 1.0, ft.ir))
    r = b.copysign(y, x)
    special = b.cmp("oeq", x, 0.0) | b.cmp("oeq", a, float("inf")) | b.cmp("uno", x, x)
    return b.select(special, x, r)


# ----------------------------------------------------------------------------------------------
# lgamma, digamma, erf_inv: the float64 algorithms of fungrad/lax/special_math.py (the numpy
# impls of these primitives), operation for operation, on top of the functions above; float32
# extends to float64 and rounds once, as the impls do (``_via_float64``). Integer tests use
# x == rint(x) (rint is exact; floor is not in the intrinsic set).

_LANCZOS_G = 7.0
_LANCZOS_P = (0.99999999999980993, 676.5203681218851, -1259.1392167224028,
              771.32342877765313, -176.61502916214059, 12.507343278686905,
              -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)
_HALF_LOG_2PI = 0.91893853320467274178
_LOG_PI = 1.14472988584940017414


def _via_f64(b: _Builder, name: str, x: _V) -> _V:
    """A float32 function as its float64 version, rounded once."""
    return b.cast("fptrunc", b.call(f"fg_{name}_f64", b.cast("fpext", x, "double")), "float")


def _is_integer(b: _Builder, x: _V) -> _V:
    return b.cmp("oeq", b.rint(x), x)


def _lgamma_lanczos(b: _Builder, x: _V) -> _V:
    """log Gamma(x) for x >= 0.5 (Lanczos, g = 7, n = 9)."""
    z = x - 1.0
    s = b.lift(_LANCZOS_P[0], x.ty)
    for k, p in enumerate(_LANCZOS_P[1:], start=1):
        s = s + p / (z + float(k))
    t = z + (_LANCZOS_G + 0.5)
    log_t = b.call("fg_log_f64", t)
    return ((_HALF_LOG_2PI + (z + 0.5) * (log_t - 1.0)) - _LANCZOS_G) + b.call("fg_log_f64", s)


def _lgamma(b: _Builder, x: _V) -> _V:
    if x.ft is F32:
        return _via_f64(b, "lgamma", x)
    inf = float("inf")
    finite = b.select(b.cmp("olt", b.fabs(x), inf), x, 1.0)
    # x >= 0.5 directly; |x| < 0.5 by Gamma(x) = Gamma(1 + x) / x; x <= -0.5 by reflection
    arg = b.select(b.cmp("oge", finite, 0.5), finite,
                   b.select(b.cmp("ogt", finite, -0.5), 1.0 + finite, 1.0 - finite))
    lg = _lgamma_lanczos(b, arg)
    lg = b.select(b.cmp("olt", b.fabs(finite), 0.5),
                  lg - b.call("fg_log_f64", b.fabs(finite)), lg)
    sin_pi = b.fabs(b.call("fg_sin_f64", math.pi * (finite - b.rint(finite))))
    refl = (_LOG_PI - b.call("fg_log_f64", sin_pi)) - lg
    lg = b.select(b.cmp("ole", finite, -0.5), refl, lg)
    pole = b.cmp("ole", x, 0.0) & _is_integer(b, x)
    lg = b.select(pole | b.cmp("oeq", b.fabs(x), inf), inf, lg)
    return _nan_in_nan_out(b, x, lg)


_DIGAMMA_ASYMPTOTIC = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132,
                       -691.0 / 32760, 1.0 / 12)


def _digamma_positive(b: _Builder, x: _V) -> _V:
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


def _digamma(b: _Builder, x: _V) -> _V:
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
    (-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
     1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
     6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
     2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
     1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
     4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
     0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
     0.24015818242558961693, 1.6536545626831027356),
    (2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
     1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
     2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
     6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
     0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
     -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
     3.0838856104922207635),
    (-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
     -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
     2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
     -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
     7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
     1.0103004648645343977, 4.8499064014085844221),
)
_2_SQRT_PI = 2.0 * 5.6418958354775628695e-1
_ERF_INV_STEPS = (1, 1)  # Halley steps in the centre, Newton steps in the tail


def _erf_small(b: _Builder, y: _V) -> _V:
    """erf(y) for 0 <= y < 0.84375 (fdlibm's first interval: y + y P(y^2) / Q(y^2))."""
    p, q = _ERF_PQ[0]
    z = y * y
    return b.fma(y, _horner(b, z, p[::-1]) / _horner(b, z, q[::-1]), y)


def _erf_inv(b: _Builder, x: _V) -> _V:
    """Giles' double-precision approximation polished like the reference: Halley steps on
    erf(y) = a in the centre (a <= 1/2, where y < 0.48 needs only erf's first interval),
    Newton steps on log(erfc(y) / (1 - a)) in the tail (full relative accuracy as a -> 1).
    The reference starts from Giles' single-precision guess and takes four steps; from this
    guess one step reaches the same fixed point. float32 needs no step: the guess is within
    4 ulp of float64, so it rounds to the reference's float32 result."""
    if x.ft is F32:
        return b.cast("fptrunc", _erf_inv_f64(b, b.cast("fpext", x, "double"), (0, 0)), "float")
    return _erf_inv_f64(b, x, _ERF_INV_STEPS)


def _erf_inv_f64(b: _Builder, x: _V, steps: tuple[int, int]) -> _V:
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

    y0 = _horner(b, v, [coeff(i) for i in range(23)]) * a_in
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
    return _nan_in_nan_out(b, x, b.copysign(y, x))


# ----------------------------------------------------------------------------------------------
# float32 division by a loop-invariant divisor y (softmax's row sum), correctly rounded without
# a divide per element. Markstein's correction: with rf = RN(1/y) computed once,
#   q0 = RN(x rf),  rem = x - q0 y (one fma: exact),  q = RN(q0 + rem rf) (one fma)
# is x / y correctly rounded (Markstein's theorem: rf within half an ulp of 1/y and q0 within
# an ulp of x / y), provided nothing leaves the normal range: 1/y normal, q0 and q normal and
# rem exact, which holds when e(q0) + e(y) >= -103 (rem is then a multiple of 2^-149 below
# ulp(q0) |y|); e() is the binary exponent. All of that follows from one test per element:
# s = q S is normal, S = 2^min(e(y) - 25, -2) (loop-invariant), i.e. |q| >= max(2^(-101 -
# e(y)), 2^-124) up to rounding, with a factor 2 to spare. Elements that fail it (zero,
# subnormal or tiny quotients, overflow, inf and NaN) and divisors outside 2^-100 <= |y| <
# 2^126 (S is NaN then: every element fails) take fdiv. tests/test_division_exact.py checks
# the result bit for bit against numpy on random and near-midpoint quotients and every
# special value. The old ``arcp`` multiply by 1/y was up to 1 ulp off (issue 15).
#
# The test's branch is per vector: the call of fg_div_inv_f32 in the loop names vector
# variants of itself (as the large trig arguments do, see above), which the vectoriser calls
# and the second always-inliner inlines. Each computes q and s for all lanes, tests them at
# once (one vfpclassps with AVX-512; and, sub, unsigned compare elsewhere) and branches
# around one vector fdiv. Measured on x86-64 (Zen 4, AVX-512), a row of 1024 floats in L1:
# 5.1 cycles per 16 elements where vdivps took 6.1 and the inexact multiply 2.4. The scalar
# function (remainder loops, unoptimised glue) does the same with a scalar test.
DIVIDE = "fg_div_inv_f32"
"""``float @fg_div_inv_f32(float x, float y, float rf, float s)``: x / y correctly rounded,
given ``rf``, ``s`` from :func:`divisor_lines` (computed once, outside the loop)."""
_NEVER = "!prof !{!\"branch_weights\", i32 1, i32 1048575}"


def divisor_lines(y: str, rf: str, s: str) -> list[str]:
    """IR lines computing :data:`DIVIDE`'s loop-invariant operands ``rf`` (1/y) and ``s`` (the
    test's scale, NaN for a divisor out of range) for the float32 value ``y``."""
    return [f"  {rf} = fdiv float 1.0, {y}",
            f"  {s}.b = bitcast float {y} to i32",
            f"  {s}.e = lshr i32 {s}.b, 23",
            f"  {s}.eb = and i32 {s}.e, 255",  # e(y) + 127
            f"  {s}.lo = sub i32 {s}.eb, 27",
            f"  {s}.ok = icmp ult i32 {s}.lo, 226",  # -100 <= e(y) <= 125
            f"  {s}.k = call i32 @llvm.smin.i32(i32 {s}.eb, i32 150)",
            f"  {s}.kb = sub i32 {s}.k, 25",  # min(e(y) - 25, -2) + 127
            f"  {s}.sb = shl i32 {s}.kb, 23",
            f"  {s}.v = bitcast i32 {s}.sb to float",
            f"  {s} = select i1 {s}.ok, float {s}.v, float 0x7FF8000000000000"]


def divide_call(out: str, x: str, y: str, rf: str, s: str) -> str:
    """The IR line ``out = x / y`` by :data:`DIVIDE`, naming its vector variants."""
    variants = ",".join(f"_ZGV_LLVM_N{n}vvvv_{DIVIDE}({DIVIDE}_n{n})" for n in _divide_lanes())
    return (f"  {out} = call float @{DIVIDE}(float {x}, float {y}, float {rf}, float {s}) "
            f"\"vector-function-abi-variant\"=\"{variants}\"")


@functools.cache
def _divide_lanes() -> tuple[int, ...]:
    """The vector widths :data:`DIVIDE` has variants for: the host's float32 vectors and half
    of them (fewer variants compile faster: each is a function of its own in every module)."""
    from fungrad.lowering.cpu import compiler as cpu
    h = cpu.host()
    features = h.features.split(",")
    if not h.triple.startswith("x86_64"):
        return (2, 4)
    return (8, 16) if "+avx512f" in features else (4, 8) if "+avx" in features else (2, 4)


@functools.cache
def _fpclass_test() -> bool:
    """Does this host have AVX-512DQ's vfpclassps (a one-instruction normal-number test)?"""
    from fungrad.lowering.cpu import compiler as cpu
    h = cpu.host()
    return h.triple.startswith("x86_64") and "+avx512dq" in h.features.split(",")


def _divide_ir() -> str:
    """:data:`DIVIDE` (scalar, noinline: the vectoriser must see the call) and its alwaysinline
    vector variants ``<DIVIDE>_n<lanes>``."""
    text = []
    for n in (1, *_divide_lanes()):
        vt, it = (f"<{n} x float>", f"<{n} x i32>") if n > 1 else ("float", "i32")
        fma = f"llvm.fma.v{n}f32" if n > 1 else "llvm.fma.f32"

        def k(c: int, n=n) -> str:
            return f"splat (i32 {c})" if n > 1 else str(c)
        if n == 1:
            text.append(f"define internal float @{DIVIDE}(float %x, float %y, float %rf, "
                        "float %s) noinline nounwind memory(none) {")
        else:
            text.append(f"define internal {vt} @{DIVIDE}_n{n}({vt} %x, {vt} %y, {vt} %rf, "
                        f"{vt} %s) alwaysinline nounwind {{")
        text += ["entry:",
                 f"  %q0 = fmul {vt} %x, %rf",
                 f"  %nq0 = fneg {vt} %q0",
                 f"  %rem = call {vt} @{fma}({vt} %nq0, {vt} %y, {vt} %x)",
                 f"  %q = call {vt} @{fma}({vt} %rem, {vt} %rf, {vt} %q0)",
                 f"  %t = fmul {vt} %q, %s"]
        if n == 16 and _fpclass_test():  # QNaN, +-0, +-inf, subnormal, SNaN: not normal
            text.append("  %bad = call <16 x i1> @llvm.x86.avx512.fpclass.ps.512("
                        "<16 x float> %t, i32 191)")
        else:  # |t| - 2^-126 (as integers) beyond the normal numbers' span, NaN included
            text += [f"  %tb = bitcast {vt} %t to {it}",
                     f"  %ta = and {it} %tb, {k(0x7FFFFFFF)}",
                     f"  %tn = sub {it} %ta, {k(0x00800000)}",
                     f"  %bad = icmp uge {it} %tn, {k(0x7F000000)}"]
        if n > 1:
            text += [f"  %bits = bitcast <{n} x i1> %bad to i{n}",
                     f"  %any = icmp ne i{n} %bits, 0"]
        else:
            text.append("  %any = or i1 %bad, false")
        text += [f"  br i1 %any, label %div, label %ok, {_NEVER}",
                 "ok:", f"  ret {vt} %q",
                 "div:", f"  %e = fdiv {vt} %x, %y", f"  ret {vt} %e", "}", ""]
    return "\n".join(text)


# ----------------------------------------------------------------------------------------------
# Registry and prelude

_EMITTERS: dict[str, tuple[int, Callable[..., _V]]] = {
    "exp": (1, _exp), "exp2": (1, _exp2), "expm1": (1, _expm1),
    "log": (1, _log), "log2": (1, _log2), "log10": (1, _log10), "log1p": (1, _log1p),
    "tanh": (1, _tanh), "logistic": (1, _logistic),
    "sin": (1, _sin), "cos": (1, _cos), "tan": (1, _tan),
    "atan": (1, _atan), "atan2": (2, _atan2), "asin": (1, _asin), "acos": (1, _acos),
    "sinh": (1, _sinh), "cosh": (1, _cosh),
    "asinh": (1, _asinh), "acosh": (1, _acosh), "atanh": (1, _atanh),
    "erf": (1, _erf), "erfc": (1, _erfc), "pow": (2, _pow), "cbrt": (1, _cbrt),
    "lgamma": (1, _lgamma), "digamma": (1, _digamma), "erf_inv": (1, _erf_inv),
}

MATH_FUNCTIONS: dict[str, int] = {name: arity for name, (arity, _) in _EMITTERS.items()}
"""Name -> arity of every function the prelude provides (atan2(y, x) and pow(x, y) take two)."""


def _float_type(dtype) -> _FloatType:
    name = np.dtype(dtype).name
    if name not in _BY_DTYPE:
        raise ValueError(f"llvm_math: no math functions for dtype {name!r}; "
                         f"use one of {sorted(_BY_DTYPE)}")
    return _BY_DTYPE[name]


def math_symbol(name: str, dtype) -> str:
    """IR symbol of math function ``name`` for ``dtype``, e.g. ``fg_exp_f32``."""
    if name not in MATH_FUNCTIONS:
        raise ValueError(f"llvm_math: unknown math function {name!r}; "
                         f"known: {', '.join(sorted(MATH_FUNCTIONS))}")
    return f"fg_{name}_{_float_type(dtype).suffix}"


@functools.cache
def _define(name: str, ft: _FloatType, part: str = "all"
            ) -> tuple[str, frozenset[str], tuple[str, ...]]:
    """(IR text, called fg_ symbols, intrinsic declarations) of one function (or of the
    table of 2/pi's bits, which float64 sin/cos/tan ask for as if it were one); ``part`` of a
    large-argument function as in :func:`_large_functions`."""
    if name == _TWO_OPI_TABLE[3:]:
        return _two_opi_table_ir(), frozenset(), ()
    if f"fg_{name}_{ft.suffix}" == DIVIDE:
        return _divide_ir(), frozenset(), ()
    large = name in _LARGE_EMITTERS
    arity, emit = (1, _LARGE_EMITTERS[name]) if large else _EMITTERS[name]
    b = _Builder()
    params = [_V(b, f"%a{i}", ft.ir) for i in range(arity)]
    result = emit(b, *params)
    sig = ", ".join(f"{ft.ir} {p.ref}" for p in params)
    sym = f"fg_{name}_{ft.suffix}"
    if large and part == "module":  # (the library has the body and its callees)
        return _large_functions(sym, ft.ir, [], "", part), frozenset(), ()
    if large:
        text = _large_functions(sym, ft.ir, b.lines, result.ref, part)
    else:
        text = "\n".join([f"define internal {ft.ir} @{sym}({sig}) alwaysinline nounwind {{",
                          "entry:", *b.lines, f"  ret {ft.ir} {result.ref}", "}", ""])
    return text, frozenset(b.callees), tuple(sorted(b.intrinsics.values()))


def prelude(dtypes_needed=None, fns_needed=None, *, declare_intrinsics: bool = True,
            helpers: Iterable[str] = (), shared_large: bool = False) -> str:
    """IR text defining the requested math functions, to prepend to a module.

    Args:
      dtypes_needed: float dtypes (``"float32"``, ``np.float64``, ...); None means both.
      fns_needed: names from ``MATH_FUNCTIONS``; None means all. Functions they call (tanh calls
        exp) are included too.
      declare_intrinsics: also emit ``declare`` lines for the llvm.* intrinsics used. LLVM 22's
        parser declares intrinsics itself and rejects a second identical ``declare``, so a
        renderer that declares its own intrinsics passes False.
      helpers: symbols of the renderer's own helpers to define too (:data:`DIVIDE`).
      shared_large: declare sin/cos/tan's large-argument functions instead of defining them
        (the caller runs :func:`ensure_large_library` before compiling).

    Returns:
      The text, e.g. ``prelude(["float32"], ["tanh"])`` defines ``@fg_tanh_f32`` and
      ``@fg_exp_f32``; call them as ``call float @fg_tanh_f32(float %x)``.
    """
    fts = [F32, F64] if dtypes_needed is None else sorted(
        {_float_type(d) for d in dtypes_needed}, key=lambda f: f.suffix)
    names = sorted(MATH_FUNCTIONS) if fns_needed is None else sorted(set(fns_needed))
    for n in names:
        if n not in MATH_FUNCTIONS:
            raise ValueError(f"llvm_math: unknown math function {n!r}; "
                             f"known: {', '.join(sorted(MATH_FUNCTIONS))}")
    for h in helpers:
        if h != DIVIDE:
            raise ValueError(f"llvm_math: unknown helper {h!r}; known: {DIVIDE}")
    pending = [f"fg_{n}_{ft.suffix}" for ft in fts for n in names] + list(helpers)
    done: dict[str, tuple[str, frozenset[str], tuple[str, ...]]] = {}
    while pending:
        sym = pending.pop()
        if sym in done:
            continue
        part = "module" if shared_large and sym[3:-4] in _LARGE_EMITTERS else "all"
        done[sym] = _define(sym[3:-4], F32 if sym.endswith("f32") else F64, part)
        pending.extend(done[sym][1])
    decls = sorted({d for _, _, ds in done.values() for d in ds}) if declare_intrinsics else []
    bodies = [done[s][0] for s in sorted(done)]
    # The vector variants are only named in an attribute: keep them. So are the scalar
    # functions that name them: used, LLVM may not drop or specialise a parameter (a constant
    # divisor made IPSCCP delete three, and the variants' names no longer fit: an abort).
    variants = [f"ptr @{s}{v}" for s in sorted(done) if s[3:-4] in _LARGE_EMITTERS
                for v in ("",) * (not shared_large) + tuple(f"_v{n}" for n in _VARIANT_LANES)]
    if DIVIDE in done:
        variants += [f"ptr @{DIVIDE}{v}" for v in ("", *(f"_n{n}" for n in _divide_lanes()))]
    if variants:
        bodies.append(f"@llvm.compiler.used = appending global [{len(variants)} x ptr] "
                      f"[{', '.join(variants)}], section \"llvm.metadata\"\n")
    return "\n".join(decls + [""] + bodies) if decls else "\n".join(bodies)
