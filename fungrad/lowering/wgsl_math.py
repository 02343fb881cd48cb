"""float32 math functions as WGSL, from the same definitions as the CPU's.

``llvm_math.py`` writes each function (exp, log, sin, tanh, erf, ...) once, against a tiny
SSA builder whose values overload the arithmetic operators. This module is a second builder
for that interface that writes WGSL statements instead of LLVM IR, so the GPU gets the same
algorithms, accuracy and NaN/inf/-0 edges as the CPU, rather than WGSL's builtins (whose
precision the spec leaves loose, e.g. 4096 ulp for ``atan``, and llvmpipe's ``tanh`` is off by
1e-3 near 0).

WGSL has no float64: functions whose float32 version works in float64 (``lgamma``,
``digamma``, ``erf_inv``) get no translation here; ``erf_inv`` has a float32 formulation
below, ``lgamma`` and ``digamma`` raise a LoweringError naming the function when a GPU
program needs them. ``pow`` takes llvm_math's same-precision path (the float64 one, in
float32 words: its log in double-word arithmetic), where the CPU's float32 shortcut goes
through float64. ``sin`` and ``cos`` have a GPU formulation of their own (:func:`_sin_cos`:
an exact reduction from float32 products alone, and Cephes' float32 kernels), about half the
instructions of that same-precision path.
Denormals may be flushed to zero by the GPU, so results that are denormal on the CPU can be
0 on the GPU.

Two GPU compiler behaviours shape the output (both measured on Mesa's llvmpipe):
- Where the adapter's ``fma`` rounds twice, the steps that need one rounding are done without
  it: exact products by Dekker's split of 12-bit halves (``two_prod``), Cody-Waite steps by
  splitting the constant (``sub_multiple``), and ``fg_fma`` for the remaining residuals.
- Float algebra is simplified unless prevented ((a + b) - b becomes a): the builder spots a sum
  meeting one of its own operands and hides the inner value behind an opaque integer OR.
  Sums are also reassociated: r + (p + t) became (r + p) + t, dropping a tail t below half an
  ulp of r (sin/cos: 1.2 ulp instead of 0.84); llvm_math marks such tails with ``keep``,
  which the builder here hides the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import struct
from fractions import Fraction

from fungrad.lowering import llvm_math as lm
from fungrad.lowering.fusion import LoweringError

_WGSL_TYPE = {"float": "f32", "i32": "i32", "i1": "bool"}


class _NoFloat64(Exception):
    """The function needs float64 (or 64-bit integers), which WGSL lacks."""


def _wtype(ty: str) -> str:
    t = _WGSL_TYPE.get(ty)
    if t is None:
        raise _NoFloat64(ty)
    return t


def _f32_literal(v: float) -> str:
    bits = struct.unpack("<I", struct.pack("<f", float(v)))[0]
    r = struct.unpack("<f", struct.pack("<I", bits))[0]
    if r == r and abs(r) != float("inf") and (r == 0 or abs(r) >= 1.1754943508222875e-38):
        return f"{r!r}f"
    return f"bitcast<f32>({bits:#010x}u)"


_BINARY = {"fadd": "+", "add": "+", "fsub": "-", "sub": "-", "fmul": "*", "mul": "*",
           "fdiv": "/", "and": "&", "or": "|", "xor": "^", "shl": "<<", "ashr": ">>"}


#: float32 seen as "not the CPU's float32": emitters that give float32 a float64 shortcut
#: (``if x.ft is F32``) take their generic, same-precision path with it
_F32_GENERIC = dataclasses.replace(lm.F32)
_GENERIC = frozenset({"pow"})


class _W(lm._V):
    """A WGSL value (a ``let`` name or a literal) of LLVM type name ``ty``."""

    __slots__ = ()

    @property
    def ft(self):
        ft = lm._FT[self.ty]
        return _F32_GENERIC if ft is lm.F32 and self.b.generic else ft

    def _op(self, fop: str, iop: str, other, swap: bool = False) -> _W:
        o = self.b.lift(other, self.ty)
        a, c = (o, self) if swap else (self, o)
        op = fop if self.ty in lm._FT else iop
        sym = _BINARY.get(op)
        if sym is None:
            raise TypeError(f"wgsl_math: no {op} on {self.ty}")
        if self.ty == "i1" and op == "xor":
            sym = "!="
        if op in ("fadd", "fsub"):
            a, c = self.b.guard_cancellation(a, c)
        right = f"u32({c.ref})" if op in ("shl", "ashr") else c.ref
        out = self.b.emit(f"({a.ref} {sym} {right})", self.ty)
        if op in ("fadd", "fsub"):
            self.b.terms[out.ref] = (self.b.base(a.ref), self.b.base(c.ref))
        return out

    def __neg__(self) -> _W:
        out = self.b.emit(f"(-{self.ref})", self.ty)
        self.b.negations[out.ref] = self.ref
        return out


_FCMP = {"oeq": "{a} == {c}", "ogt": "{a} > {c}", "oge": "{a} >= {c}", "olt": "{a} < {c}",
         "ole": "{a} <= {c}", "une": "!({a} == {c})", "ult": "!({a} >= {c})",
         "ule": "!({a} > {c})", "ugt": "!({a} <= {c})", "uge": "!({a} < {c})",
         "uno": "fg_isnan({a}) || fg_isnan({c})", "ord": "!(fg_isnan({a}) || fg_isnan({c}))",
         "one": "!({a} == {c}) && !(fg_isnan({a}) || fg_isnan({c}))",
         "ueq": "{a} == {c} || fg_isnan({a}) || fg_isnan({c})"}
_ICMP = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}


class _WBuilder(lm._Builder):
    """``llvm_math``'s builder interface, writing WGSL ``let`` statements."""

    def __init__(self, generic: bool = False, fused_fma: bool = True):
        super().__init__()
        self.generic = generic
        self.fused_fma = fused_fma
        self.terms: dict[str, tuple[str, str]] = {}  # sum or difference -> its operands
        self.negations: dict[str, str] = {}  # -v -> v
        self.opaque: dict[str, _W] = {}
        self.zero: _W | None = None

    # Shader compilers simplify float algebra unless told not to, and WGSL cannot tell them:
    # Mesa rewrites (a + b) - b to a and a - (a - b) to b, which turns the error terms of
    # two-sum and of fdlibm's tails into 0 (measured: log1p lost 10 bits near 1e-4), and it
    # moves constants across additions, so even ``(v + z) - b`` with an opaque zero z folds.
    # So where a sum or difference meets one of its own operands, the inner value's bits
    # are first OR-ed with an integer zero the compiler cannot prove is zero.

    def base(self, ref: str) -> str:
        return self.negations.get(ref, ref)

    def keep(self, v: _W) -> _W:
        """Behind the opaque OR: llvmpipe reassociates sums (see the module docstring)."""
        return self._opaque(v)

    def guard_cancellation(self, a: _W, c: _W) -> tuple[_W, _W]:
        """(a, c), with whichever is a sum or difference holding the other made opaque."""
        ra, rc = self.base(a.ref), self.base(c.ref)
        if rc in self.terms.get(ra, ()):
            a = self._opaque(a)
        elif ra in self.terms.get(rc, ()):
            c = self._opaque(c)
        return a, c

    def _opaque(self, v: _W) -> _W:
        got = self.opaque.get(v.ref)
        if got is None:
            if self.zero is None:  # u (u + 1) is even for every u: (u * u + u) & 1 == 0
                u = "bitcast<u32>(a0)"  # every function's first parameter
                self.zero = self.emit(f"(({u} * {u}) + {u}) & 1u", "i32")  # a u32 in WGSL
            got = self.emit(f"bitcast<f32>(bitcast<u32>({v.ref}) | {self.zero.ref})", v.ty)
            self.opaque[v.ref] = got
            if v.ref in self.terms:  # still the same sum to the cancellation check
                self.terms[got.ref] = self.terms[v.ref]
        return got

    def emit(self, rhs: str, ty: str) -> _W:
        name = f"v{len(self.lines)}"
        self.lines.append(f"  let {name} = {rhs};")
        return _W(self, name, ty)

    def lift(self, v, ty: str) -> _W:
        if isinstance(v, lm._V):
            if v.ty != ty:
                raise TypeError(f"wgsl_math: operand of type {v.ty} where {ty} is expected")
            return v
        t = _wtype(ty)
        if t == "f32":
            return _W(self, _f32_literal(v), ty)
        if t == "bool":
            return _W(self, "true" if v else "false", ty)
        v = int(v)
        return _W(self, "bitcast<i32>(0x80000000u)" if v == -2**31 else f"{v}i", ty)

    def cmp(self, pred: str, a, c) -> _W:
        ty = a.ty if isinstance(a, lm._V) else c.ty
        a, c = self.lift(a, ty), self.lift(c, ty)
        if ty in lm._FT:
            _wtype(ty)
            self.callees.add("isnan")
            text = _FCMP[pred].format(a=a.ref, c=c.ref)
        elif pred in _ICMP:
            text = f"{a.ref} {_ICMP[pred]} {c.ref}"
        else:  # unsigned comparisons of i32 bits
            sym = {"ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}[pred]
            text = f"bitcast<u32>({a.ref}) {sym} bitcast<u32>({c.ref})"
        return self.emit(f"({text})", "i1")

    def select(self, cond, a, c, ty: str | None = None) -> _W:
        ty = ty or (a.ty if isinstance(a, lm._V) else c.ty)
        a, c = self.lift(a, ty), self.lift(c, ty)
        return self.emit(f"select({c.ref}, {a.ref}, {cond.ref})", ty)

    def intrinsic(self, name: str, *args) -> _W:
        ty = next(a.ty for a in args if isinstance(a, lm._V))
        _wtype(ty)
        v = [self.lift(a, ty).ref for a in args]
        if name == "copysign":
            return self.emit(f"bitcast<f32>((bitcast<u32>({v[0]}) & 0x7fffffffu) | "
                             f"(bitcast<u32>({v[1]}) & 0x80000000u))", ty)
        if name == "fma" and not self.fused_fma:  # a polynomial step: rounding twice is fine,
            # and on llvmpipe the written-out form measured more accurate than its fma builtin
            return self.emit(f"(({v[0]} * {v[1]}) + {v[2]})", ty)
        fn = {"fma": "fma", "rint": "round", "fabs": "abs", "sqrt": "sqrt", "floor": "floor"}[name]
        return self.emit(f"{fn}({', '.join(v)})", ty)

    def fma_exact(self, a, c, d) -> _W:
        """A residual needs one rounding: in software where the adapter's fma rounds twice."""
        if self.fused_fma:
            return self.fma(a, c, d)
        ty = next(x.ty for x in (a, c, d) if isinstance(x, lm._V))
        v = [self.lift(x, ty).ref for x in (a, c, d)]
        self.callees.add("fma")
        return self.emit(f"fg_fma({', '.join(v)})", ty)

    def two_prod(self, a, c) -> tuple[_W, _W]:
        """Dekker's exact product where the adapter's fma rounds twice: each factor split
        into two 12-bit halves (by masking its bits: a literal at build time, a value with
        one ``&``), so the four partial products are exact. Cheaper than ``fg_fma``: no
        two-sum with the addend and no range checks."""
        if self.fused_fma:
            return super().two_prod(a, c)
        p = a * c
        ah, al = self._split(a, 12)
        ch, cl = self._split(c, 12)
        return p, ((ah * ch - p) + ah * cl + al * ch) + al * cl

    def sub_multiple(self, k, c: float, x, k_bits: int) -> _W:
        """x - k c exactly (see llvm_math) without an exact fma: for a short k (at most 12
        bits) c splits at build time so both k c_hi and k c_lo are exact and x - k c_hi
        cancels exactly; a longer k goes through :meth:`two_prod`."""
        if self.fused_fma:
            return super().sub_multiple(k, c, x, k_bits)
        if k_bits <= 12:
            ch, cl = self._split(c, 24 - k_bits)
            return (x - k * ch) - k * cl
        p, e = self.two_prod(k, c)
        return (x - p) - e

    def _split(self, v, bits: int):
        """(hi, lo): hi keeps the leading ``bits`` significant bits of the float32 ``v``
        (truncated), lo = v - hi exactly."""
        mask = (0xFFFFFFFF << (24 - bits)) & 0xFFFFFFFF
        if not isinstance(v, lm._V):
            raw = struct.unpack("<I", struct.pack("<f", float(v)))[0]
            hi = struct.unpack("<f", struct.pack("<I", raw & mask))[0]
            return hi, float(v) - hi
        hi = self.emit(f"bitcast<f32>(bitcast<u32>({v.ref}) & {mask:#010x}u)", v.ty)
        return hi, v - hi

    def ldexp(self, y, k) -> _W:
        """The two-step multiply: WGSL's ``ldexp`` is undefined for exponents above 128,
        which float32 exp uses."""
        return lm._ldexp_two_step(self, y, k)

    def cast(self, op: str, v, ty: str) -> _W:
        t = _wtype(ty)
        _wtype(v.ty)
        if op == "bitcast":
            return self.emit(f"bitcast<{t}>({v.ref})", ty)
        if op in ("fptosi", "sitofp"):
            return self.emit(f"{t}({v.ref})", ty)
        raise _NoFloat64(op)

    def call(self, fn: str, *args) -> _W:
        if not fn.endswith("_f32"):
            raise _NoFloat64(fn)
        self.callees.add(fn)
        return self.emit(f"{fn}({', '.join(a.ref for a in args)})", args[0].ty)


# sin and cos: the reduction |x| = q pi/2 + r (|x| < 2^24; beyond, NaN as on the CPU) is
# exact with float32 products only, so it needs neither a fused fma nor Dekker splits at run
# time: q (< 2^24) splits into qh = a multiple of 2^12 and ql < 2^12, and pi/2 into pieces of
# 12 significant bits (_PIO2_12), so every product of a half of q with a piece is exact. The
# products of the first two pieces (and qh with the third) have quanta of at least 2^-23 and
# leave less than 2 (|r| <= pi/4 plus q (pi/2 - P1 - P2) <= 0.81): subtracted in order,
# each result is exact. The three smaller terms are ql P3 (< 2^-11.6), qh P4 (< 2^-15.2) and
# ql P4 + q P5 (< 2^-26, rounded); the first two are subtracted by fast two-sums whose tails
# go to rl (where |t| < |ql P3| or |s| < |qh P4| the subtraction is exact: both are multiples
# of a quantum 2^24 times smaller than the bound), so r = rh + rl to about 2^-53 absolute:
# the closest float32 below 2^24 to a multiple of pi/2 lies 2^-27.8 from it (252.898...).
# q itself must be the nearest integer to |x| 2/pi (the kernels hold for |r| <= pi/4): the
# product a (2/pi) rounds by up to 0.5 near 2^23, so q = rint(H) + rint((H - rint(H)) + X)
# with H = ah CH exact (ah: the leading 12 bits of a, CH: of 2/pi) and X the small rest.
# Then Cephes' float32 sin and cos kernels with the tail rl (llvm_math's), both computed and
# selected by the quadrant (no branches). Measured on lavapipe (bit-identical to a numpy
# float32 emulation), 2M arguments per range up to 2^24: at most 0.84 ulp, 0.63 ulp on the
# hardest arguments near multiples of pi/2; 80 WGSL statements where llvm_math's
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
_PIO2 = Fraction("1.5707963267948966192313216916397514420985846996875529104874722961539082031431"
                 "04499314017412671058533991074043256641153323546922304775291115862679704")
_PIO2_12, _PIO2_REST = _pieces(_PIO2, 4, 12)
(_TWO_OPI_12,), _TWO_OPI_REST = _pieces(1 / _PIO2, 1, 12)


def _sin_cos(b: _WBuilder, x: _W, cos: bool) -> _W:
    """float32 sin(x) or cos(x) for the GPU (see above); NaN for NaN, inf and |x| >= 2^24."""
    p1, p2, p3, p4 = _PIO2_12
    a = b.fabs(x)
    ah, al = b._split(a, 12)
    h = ah * _TWO_OPI_12  # exact
    q1 = b.rint(h)
    q = q1 + b.rint((h - q1) + (ah * _TWO_OPI_REST + al * float(1 / _PIO2)))
    qh = b.intrinsic("floor", q * 2.0 ** -12) * 2.0 ** 12
    ql = q - qh
    t = (((a - qh * p1) - ql * p1) - qh * p2) - ql * p2
    t = t - qh * p3
    s, e1 = lm._fast_two_sum(t, -(ql * p3))
    rh, e2 = lm._fast_two_sum(s, -(qh * p4))
    rl = (e1 + e2) - (ql * p4 + q * _PIO2_REST)
    # Cephes' float32 kernels with the tail (llvm_math's; ``keep`` hides their tails from
    # llvmpipe, which reassociates r + (p + t) into (r + p) + t and loses rl: 1.2 ulp)
    sin_r, cos_r = lm._sin_kernel(b, rh, rl), lm._cos_kernel(b, rh, rl)
    quad = b.cast("fptosi", q, "i32")
    if cos:  # cos(x) = sin(x + pi/2)
        quad = quad + 1
    r = b.select(b.cmp("ne", quad & 1, 0), cos_r, sin_r)
    flip = (quad & 2) << 30  # (-1)^(quad >> 1) in the sign bit
    if not cos:  # sin is odd
        flip = flip ^ (b.cast("bitcast", x, "i32") & -(2 ** 31))
    r = b.cast("bitcast", b.cast("bitcast", r, "i32") ^ flip, "float")
    return b.select(b.cmp("olt", a, 2.0 ** 24), r, float("nan"))


_GPU_EMITTERS = {"sin": (1, lambda b, x: _sin_cos(b, x, False)),
                 "cos": (1, lambda b, x: _sin_cos(b, x, True))}


# erf_inv in float32 only: Giles' single-precision approximation ("Approximating the erfinv
# function", GPU Computing Gems 2, 2011), then one Newton step on erf(y) = x in the central
# range (w < 5, |x| < 0.9966), where erf(y) - x keeps its relative accuracy.
_ERF_INV = """fn fg_erf_inv_f32(x: f32) -> f32 {
  let a = abs(x);
  if (fg_isnan(x) || a > 1.0f) { return bitcast<f32>(0x7fc00000u); }
  if (a == 1.0f) { return bitcast<f32>(bitcast<u32>(x) & 0x80000000u | 0x7f800000u); }
  var w = -fg_log_f32((1.0f - x) * (1.0f + x));
  var p: f32;
  if (w < 5.0f) {
    w = w - 2.5f;
    p = 2.81022636e-08f;
    p = fma(p, w, 3.43273939e-07f); p = fma(p, w, -3.5233877e-06f);
    p = fma(p, w, -4.39150654e-06f); p = fma(p, w, 0.00021858087f);
    p = fma(p, w, -0.00125372503f); p = fma(p, w, -0.00417768164f);
    p = fma(p, w, 0.246640727f); p = fma(p, w, 1.50140941f);
    let y = p * x;
    return y - (fg_erf_f32(y) - x) / (1.1283791670955126f * fg_exp_f32(-y * y));
  }
  w = sqrt(w) - 3.0f;
  p = -0.000200214257f;
  p = fma(p, w, 0.000100950558f); p = fma(p, w, 0.00134934322f);
  p = fma(p, w, -0.00367342844f); p = fma(p, w, 0.00573950773f);
  p = fma(p, w, -0.0076224613f); p = fma(p, w, 0.00943887047f);
  p = fma(p, w, 1.00167406f); p = fma(p, w, 2.83297682f);
  return p * x;
}"""

# fma with one rounding, for adapters whose fma is a multiply then an add (llvmpipe): the
# functions' error-free transformations (residuals such as fma(a, b, -a*b)) need it. The
# product's error comes from Dekker's split, the sum's from Knuth's two-sum.
_FMA = """fn fg_fma(a: f32, b: f32, c: f32) -> f32 {
  let p = a * b;
  if (!(abs(p) < 1e30f) || abs(a) > 1e30f || abs(b) > 1e30f || !(abs(c) < 1e30f)) {
    return p + c;
  }
  let ca = 4097.0f * a;
  let ah = ca - (ca - a);
  let al = a - ah;
  let cb = 4097.0f * b;
  let bh = cb - (cb - b);
  let bl = b - bh;
  let e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  let s = p + c;
  let bb = s - p;
  let t = (p - (s - bb)) + (c - bb);
  return s + (t + e);
}"""


@functools.cache
def _define(name: str, fused_fma: bool) -> tuple[str, frozenset[str]]:
    """(WGSL text, called functions) of ``fg_<name>_f32``."""
    if name == "erf_inv":
        return _ERF_INV, frozenset({"fg_log_f32", "fg_erf_f32", "fg_exp_f32", "isnan"})
    arity, emit = _GPU_EMITTERS.get(name) or lm._EMITTERS[name]
    b = _WBuilder(generic=name in _GENERIC, fused_fma=fused_fma)
    params = [_W(b, f"a{i}", "float") for i in range(arity)]
    result = emit(b, *params)
    sig = ", ".join(f"{p.ref}: f32" for p in params)
    text = "\n".join([f"fn fg_{name}_f32({sig}) -> f32 {{", *b.lines,
                      f"  return {result.ref};", "}"])
    return text, frozenset(b.callees)


def function(name: str, fused_fma: bool = True) -> tuple[str, list[tuple[str, str]]]:
    """The WGSL function computing ``name`` on f32 and the definitions it needs, as
    ``(function name, [(key, text), ...])`` in dependency order (callees first); the key
    ``"isnan"`` (empty text) asks for the renderer's own ``fg_isnan`` helper. Without
    ``fused_fma`` (the adapter rounds fma twice) fma is computed in software."""
    out: dict[str, str] = {}

    def add(sym: str) -> None:
        if sym in out:
            return
        if sym == "isnan":  # wgsl.py's helper ``fg_isnan``, shared with the kernels
            out[sym] = ""
            return
        if sym == "fma":
            out[sym] = _FMA
            return
        try:
            text, callees = _define(sym[3:-4], fused_fma)
        except _NoFloat64:
            raise LoweringError(
                f"jit(backend='gpu'): {sym[3:-4]} has no float32-only formulation for the GPU "
                "yet (its float32 version computes in float64, which WGSL lacks); use "
                "backend='cpu' for programs that need it") from None
        for c in sorted(callees):
            add(c)
        out[sym] = text

    add(f"fg_{name}_f32")
    return f"fg_{name}_f32", list(out.items())
