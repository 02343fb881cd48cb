"""float32 math functions as WGSL, from the same definitions as the CPU's: the WGSL builder.

Each function (exp, log, sin, tanh, erf, ...) is written once (``functions``), against the
builder interface of ``builder``, whose values overload the arithmetic operators. This module
is the builder that writes WGSL statements (``llvm`` writes LLVM IR), so the GPU gets the same
algorithms, accuracy and NaN/inf/-0 edges as the CPU, rather than WGSL's builtins (whose
precision the spec leaves loose, e.g. 4096 ulp for ``atan``, and llvmpipe's ``tanh`` is off by
1e-3 near 0). A few functions have float32 formulations for the GPU instead (``gpu_float32``;
``erf_inv`` as WGSL text, below). A function that still needed float64 would be a
LoweringError naming it. ``pow`` takes the algorithms' same-precision path (the float64 one,
in float32 words: its log in double-word arithmetic), where the CPU's float32 shortcut goes
through float64.

Entry points: :func:`function` (a function's WGSL and the definitions it needs) and
:func:`inline` (its statements, for the renderer to interleave).

Two GPU compiler behaviours shape the output (both measured on Mesa's llvmpipe):
- Where the adapter's ``fma`` rounds twice, the steps that need one rounding are done without
  it: exact products by Dekker's split of 12-bit halves (``two_prod``), Cody-Waite steps by
  splitting the constant (``sub_multiple``), and ``fg_fma`` for the remaining residuals.
- Float algebra is simplified unless prevented ((a + b) - b becomes a): the builder spots a sum
  meeting one of its own operands and hides the inner value behind an opaque integer OR.
  Sums are also reassociated, which the algorithms' ``keep`` marks prevent (the builder here
  hides the marked value the same way; on the CPU it is the value itself). Found by evaluating
  each function's WGSL in numpy, one rounding per operation, and comparing the GPU's bits
  (tests/test_gpu_math_exact.py): x + (p + q) with two products p, q became (x + p) + q (sin
  and cos lost their tails: 1.2 ulp instead of 0.84), c + (a + b) with a constant c became
  (c + a) + b (erfc's 1 + (erx + rat); the exp polynomial's 1 + (r + t) in tanh's context),
  and 2t + t t became t (2 + t) (acosh's two-sum). No other function differed from its WGSL
  (2M arguments each): the tails of exp, expm1, log1p, erf, log and the rest are two-sum
  tails used twice or sums of non-products, which Mesa leaves alone.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import struct
from collections.abc import Callable

from fungrad.lowering.fusion import LoweringError
from fungrad.lowering.math import gpu_float32, trig
from fungrad.lowering.math.builder import F32, FLOAT_TYPES, Builder, Value
from fungrad.lowering.math.functions import EMITTERS
from fungrad.lowering.math.numeric import ldexp_two_step

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


_BINARY = {
    "fadd": "+",
    "add": "+",
    "fsub": "-",
    "sub": "-",
    "fmul": "*",
    "mul": "*",
    "fdiv": "/",
    "and": "&",
    "or": "|",
    "xor": "^",
    "shl": "<<",
    "ashr": ">>",
}


#: float32 seen as "not the CPU's float32": emitters that give float32 a float64 shortcut
#: (``if x.ft is F32``) take their generic, same-precision path with it
_F32_GENERIC = dataclasses.replace(F32)
_GENERIC = frozenset({"pow"})


_FCMP = {
    "oeq": "{a} == {c}",
    "ogt": "{a} > {c}",
    "oge": "{a} >= {c}",
    "olt": "{a} < {c}",
    "ole": "{a} <= {c}",
    "une": "!({a} == {c})",
    "ult": "!({a} >= {c})",
    "ule": "!({a} > {c})",
    "ugt": "!({a} <= {c})",
    "uge": "!({a} < {c})",
    "uno": "fg_isnan({a}) || fg_isnan({c})",
    "ord": "!(fg_isnan({a}) || fg_isnan({c}))",
    "one": "!({a} == {c}) && !(fg_isnan({a}) || fg_isnan({c}))",
    "ueq": "{a} == {c} || fg_isnan({a}) || fg_isnan({c})",
}
_ICMP = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}


class WGSLBuilder(Builder):
    """The math builder (``builder``) writing WGSL ``let`` statements (``v<i>``; the
    parameters are ``a<i>``). ``generic``: float32 takes the algorithms' same-precision path
    (no float64 shortcut); ``fused_fma``: the adapter's fma rounds once; ``branches``: rare
    paths go behind an ``if`` (:meth:`rare`; a real GPU), else they are computed for every
    element and chosen by selects (llvmpipe, which runs both sides of a branch anyway)."""

    def __init__(self, generic: bool = False, fused_fma: bool = True, branches: bool = False):
        super().__init__()
        self.generic = generic
        self.fused_fma = fused_fma
        self.branches = branches
        self.terms: dict[str, tuple[str, str]] = {}  # sum or difference -> its operands
        self.negations: dict[str, str] = {}  # -v -> v
        self.opaque: dict[str, Value] = {}
        self.arith: set[str] = set()  # float products, sums, differences and their negations
        self.hidden: set[str] = set()  # the results of opaque ORs
        self.zero: Value | None = None

    # Shader compilers simplify float algebra unless told not to, and WGSL cannot tell them:
    # Mesa rewrites (a + b) - b to a and a - (a - b) to b, which turns the error terms of
    # two-sum and of fdlibm's tails into 0 (measured: log1p lost 10 bits near 1e-4), and it
    # moves constants across additions, so even ``(v + z) - b`` with an opaque zero z folds.
    # So where a sum or difference meets one of its own operands, the inner value's bits
    # are first OR-ed with an integer zero the compiler cannot prove is zero.

    def base(self, ref: str) -> str:
        return self.negations.get(ref, ref)

    def keep(self, v: Value) -> Value:
        """Behind the opaque OR: llvmpipe reassociates sums (see the module docstring)."""
        return self._opaque(v)

    def exact(self, v):
        """Where the adapter has a fused fma (a hardware GPU: its compiler contracts ``a * b +
        c`` into one fma and may reassociate sums, as SPIR-V without NoContraction allows), a
        product or sum an error-free transformation uses goes behind the opaque OR; other
        values (parameters, literals, fma and select results) are leaves already."""
        if self.fused_fma and isinstance(v, Value) and v.ref in self.arith:
            return self._opaque(v)
        return v

    def guard_cancellation(self, a: Value, c: Value) -> tuple[Value, Value]:
        """(a, c), with whichever is a sum or difference holding the other made opaque."""
        ra, rc = self.base(a.ref), self.base(c.ref)
        if rc in self.terms.get(ra, ()):
            a = self._opaque(a)
        elif ra in self.terms.get(rc, ()):
            c = self._opaque(c)
        return a, c

    def _zero(self) -> Value:
        """The opaque u32 zero (defined at its first use)."""
        if self.zero is None:  # u (u + 1) is even for every u: (u * u + u) & 1 == 0
            u = "bitcast<u32>(a0)"  # every function's first parameter
            self.zero = self.emit(f"(({u} * {u}) + {u}) & 1u", "i32")  # a u32 in WGSL
        return self.zero

    def _opaque(self, v: Value) -> Value:
        if v.ref in self.hidden:  # behind an OR already
            return v
        got = self.opaque.get(v.ref)
        if got is None:
            got = self.emit(f"bitcast<f32>(bitcast<u32>({v.ref}) | {self._zero().ref})", v.ty)
            self.opaque[v.ref] = got
            self.hidden.add(got.ref)
            if v.ref in self.terms:  # still the same sum to the cancellation check
                self.terms[got.ref] = self.terms[v.ref]
        return got

    def rare(
        self, cond: Callable[[], Value], build: Callable[[], tuple[Value, ...]]
    ) -> tuple[Value, ...]:
        """The values ``build()`` makes, needed only where ``cond()`` holds (elsewhere any
        value will do): with ``branches``, computed inside ``if (cond)`` into ``var`` s, which a
        real GPU skips unless a lane of the warp needs them; else straight-line (llvmpipe
        runs both sides of a branch, and a select costs less than the branch)."""
        if not self.branches:
            return build()
        test = cond()
        self._zero()  # (defined outside the block: the whole body uses it)
        start, opaque = len(self.lines), dict(self.opaque)
        got = build()
        outs = []
        for v in got:
            name = f"v{len(self.lines)}"
            self.lines.append(f"  {name} = {v.ref};")
            outs.append(Value(self, name, v.ty))
        inner = ["  " + line for line in self.lines[start:]]
        head = [f"  var {v.ref}: {_wtype(v.ty)};" for v in outs]
        self.lines[start:] = [*head, f"  if ({test.ref}) {{", *inner, "  }"]
        self.opaque = opaque  # (values hidden inside the block are out of scope after it)
        return tuple(outs)

    def float_type(self, ty: str):
        ft = FLOAT_TYPES[ty]
        return _F32_GENERIC if ft is F32 and self.generic else ft

    def binary(self, op: str, a: Value, c: Value) -> Value:
        sym = _BINARY.get(op)
        if sym is None:
            raise TypeError(f"wgsl_math: no {op} on {a.ty}")
        if a.ty == "i1" and op == "xor":
            sym = "!="
        if op in ("fadd", "fsub"):
            a, c = self.guard_cancellation(a, c)
        right = f"u32({c.ref})" if op in ("shl", "ashr") else c.ref
        out = self.emit(f"({a.ref} {sym} {right})", a.ty)
        if op in ("fadd", "fsub", "fmul"):
            self.arith.add(out.ref)
        if op in ("fadd", "fsub"):
            self.terms[out.ref] = (self.base(a.ref), self.base(c.ref))
        return out

    def neg(self, v: Value) -> Value:
        out = self.emit(f"(-{v.ref})", v.ty)
        self.negations[out.ref] = v.ref
        if v.ref in self.arith:
            self.arith.add(out.ref)
        return out

    def emit(self, rhs: str, ty: str) -> Value:
        name = f"v{len(self.lines)}"
        self.lines.append(f"  let {name} = {rhs};")
        return Value(self, name, ty)

    def lift(self, v, ty: str) -> Value:
        if isinstance(v, Value):
            if v.ty != ty:
                raise TypeError(f"wgsl_math: operand of type {v.ty} where {ty} is expected")
            return v
        t = _wtype(ty)
        if t == "f32":
            return Value(self, _f32_literal(v), ty)
        if t == "bool":
            return Value(self, "true" if v else "false", ty)
        v = int(v)
        return Value(self, "bitcast<i32>(0x80000000u)" if v == -(2**31) else f"{v}i", ty)

    def cmp(self, pred: str, a, c) -> Value:
        ty = a.ty if isinstance(a, Value) else c.ty
        a, c = self.lift(a, ty), self.lift(c, ty)
        if ty in FLOAT_TYPES:
            _wtype(ty)
            self.callees.add("isnan")
            text = _FCMP[pred].format(a=a.ref, c=c.ref)
        elif pred in _ICMP:
            text = f"{a.ref} {_ICMP[pred]} {c.ref}"
        else:  # unsigned comparisons of i32 bits
            sym = {"ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}[pred]
            text = f"bitcast<u32>({a.ref}) {sym} bitcast<u32>({c.ref})"
        return self.emit(f"({text})", "i1")

    def select(self, cond, a, c, ty: str | None = None) -> Value:
        ty = ty or (a.ty if isinstance(a, Value) else c.ty)
        a, c = self.lift(a, ty), self.lift(c, ty)
        return self.emit(f"select({c.ref}, {a.ref}, {cond.ref})", ty)

    def intrinsic(self, name: str, *args) -> Value:
        ty = next(a.ty for a in args if isinstance(a, Value))
        _wtype(ty)
        v = [self.lift(a, ty).ref for a in args]
        if name == "copysign":
            return self.emit(
                f"bitcast<f32>((bitcast<u32>({v[0]}) & 0x7fffffffu) | "
                f"(bitcast<u32>({v[1]}) & 0x80000000u))",
                ty,
            )
        if name == "fma" and not self.fused_fma:  # a polynomial step: rounding twice is fine,
            # and on llvmpipe the written-out form measured more accurate than its fma builtin
            return self.emit(f"(({v[0]} * {v[1]}) + {v[2]})", ty)
        fn = {"fma": "fma", "rint": "round", "fabs": "abs", "sqrt": "sqrt", "floor": "floor"}[name]
        return self.emit(f"{fn}({', '.join(v)})", ty)

    def fma_exact(self, a, c, d) -> Value:
        """A residual needs one rounding: in software where the adapter's fma rounds twice."""
        if self.fused_fma:
            return self.fma(a, c, d)
        ty = next(x.ty for x in (a, c, d) if isinstance(x, Value))
        v = [self.lift(x, ty).ref for x in (a, c, d)]
        self.callees.add("fma")
        return self.emit(f"fg_fma({', '.join(v)})", ty)

    def two_prod(self, a, c) -> tuple[Value, Value]:
        """Dekker's exact product where the adapter's fma rounds twice: each factor split
        into two 12-bit halves (by masking its bits: a literal at build time, a value with
        one ``&``), so the four partial products are exact. Cheaper than ``fg_fma``: no
        two-sum with the addend and no range checks."""
        if self.fused_fma:
            return super().two_prod(a, c)
        p = a * c
        ah, al = self.split(a, 12)
        ch, cl = self.split(c, 12)
        return p, ((ah * ch - p) + ah * cl + al * ch) + al * cl

    def sub_multiple(self, k, c: float, x, k_bits: int) -> Value:
        """x - k c exactly (see ``Builder.sub_multiple``) without an exact fma: for a short k
        (at most 12 bits) c splits at build time so both k c_hi and k c_lo are exact and
        x - k c_hi cancels exactly; a longer k goes through :meth:`two_prod`."""
        if self.fused_fma:
            return super().sub_multiple(k, c, x, k_bits)
        if k_bits <= 12:
            ch, cl = self.split(c, 24 - k_bits)
            return (x - k * ch) - k * cl
        p, e = self.two_prod(k, c)
        return (x - p) - e

    def split(self, v, bits: int):
        """(hi, lo): hi keeps the leading ``bits`` significant bits of the float32 ``v``
        (truncated), lo = v - hi exactly."""
        mask = (0xFFFFFFFF << (24 - bits)) & 0xFFFFFFFF
        if not isinstance(v, Value):
            raw = struct.unpack("<I", struct.pack("<f", float(v)))[0]
            hi = struct.unpack("<f", struct.pack("<I", raw & mask))[0]
            return hi, float(v) - hi
        hi = self.emit(f"bitcast<f32>(bitcast<u32>({v.ref}) & {mask:#010x}u)", v.ty)
        return hi, v - hi

    def ldexp(self, y, k) -> Value:
        """The two-step multiply: WGSL's ``ldexp`` is undefined for exponents above 128,
        which float32 exp uses."""
        return ldexp_two_step(self, y, k)

    def cast(self, op: str, v, ty: str) -> Value:
        t = _wtype(ty)
        _wtype(v.ty)
        if op == "bitcast":
            return self.emit(f"bitcast<{t}>({v.ref})", ty)
        if op in ("fptosi", "sitofp"):
            return self.emit(f"{t}({v.ref})", ty)
        raise _NoFloat64(op)

    def call(self, fn: str, *args) -> Value:
        if not fn.endswith("_f32"):
            raise _NoFloat64(fn)
        self.callees.add(fn)
        return self.emit(f"{fn}({', '.join(a.ref for a in args)})", args[0].ty)


#: the functions whose GPU formulation (``gpu_float32``) replaces the shared algorithm
_GPU_EMITTERS = dict(gpu_float32.FUNCTIONS)
#: formulations for a real GPU (``branches``), in place of those above: sin and cos reduce
#: small arguments the short way, the exact reduction behind a branch (trig.sin_cos_gpu_f32)
_BRANCH_EMITTERS = {
    name: (1, lambda b, x, cos=cos: trig.sin_cos_gpu_f32(b, x, cos, gpu_float32._reduce_any))
    for name, cos in (("sin", False), ("cos", True))
}


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
# product's error comes from Dekker's product of 12-bit halves (split by masking the bits, not
# by Veltkamp's 4097 a - (4097 a - a), whose product a compiler may fuse into one of its two
# uses), the sum's from Knuth's two-sum.
_FMA = """fn fg_fma(a: f32, b: f32, c: f32) -> f32 {
  let p = a * b;
  if (!(abs(p) < 1e30f) || abs(a) > 1e30f || abs(b) > 1e30f || !(abs(c) < 1e30f)) {
    return p + c;
  }
  let ah = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u);
  let al = a - ah;
  let bh = bitcast<f32>(bitcast<u32>(b) & 0xfffff000u);
  let bl = b - bh;
  let e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  let s = p + c;
  let bb = s - p;
  let t = (p - (s - bb)) + (c - bb);
  return s + (t + e);
}"""


@dataclasses.dataclass(frozen=True)
class _Body:
    """A builder function's straight-line WGSL: ``let`` statements (``v<i>`` the values,
    ``a<i>`` the parameters), the returned value, the functions it calls and the value its
    opaque ORs use as zero (None: it has none)."""

    arity: int
    lines: tuple[str, ...]
    result: str
    callees: frozenset[str]
    zero: str | None


@functools.cache
def _body(name: str, fused_fma: bool, branches: bool = False) -> _Body | None:
    """``fg_<name>_f32``'s body, or None for the function written as WGSL text (erf_inv)."""
    if name == "erf_inv":
        return None
    arity, emit = (
        (branches and _BRANCH_EMITTERS.get(name)) or _GPU_EMITTERS.get(name) or EMITTERS[name]
    )
    b = WGSLBuilder(generic=name in _GENERIC, fused_fma=fused_fma, branches=branches)
    params = [Value(b, f"a{i}", "float") for i in range(arity)]
    result = emit(b, *params)
    return _Body(
        arity,
        tuple(b.lines),
        result.ref,
        frozenset(b.callees),
        b.zero.ref if b.zero is not None else None,
    )


def _define(name: str, fused_fma: bool) -> tuple[str, frozenset[str]]:
    """(WGSL text, called functions) of ``fg_<name>_f32``."""
    body = _body(name, fused_fma)
    if body is None:
        return _ERF_INV, frozenset({"fg_log_f32", "fg_erf_f32", "fg_exp_f32", "isnan"})
    sig = ", ".join(f"a{i}: f32" for i in range(body.arity))
    text = "\n".join(
        [f"fn fg_{name}_f32({sig}) -> f32 {{", *body.lines, f"  return {body.result};", "}"]
    )
    return text, body.callees


def _definitions(syms, fused_fma: bool) -> list[tuple[str, str]]:
    """The WGSL definitions of functions ``syms`` and of all they call, as ``[(key, text),
    ...]`` in dependency order (callees first); the key ``"isnan"`` (empty text) asks for
    the renderer's own ``fg_isnan`` helper."""
    out: dict[str, str] = {}

    def add(sym: str) -> None:
        if sym in out:
            return
        if sym == "isnan":  # gpu/helpers.py's helper ``fg_isnan``, shared with the kernels
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
                "backend='cpu' for programs that need it"
            ) from None
        for c in sorted(callees):
            add(c)
        out[sym] = text

    for sym in syms:
        add(sym)
    return list(out.items())


def function(name: str, fused_fma: bool = True) -> tuple[str, list[tuple[str, str]]]:
    """The WGSL function computing ``name`` on f32 and the definitions it needs, as
    ``(function name, [(key, text), ...])`` in dependency order (callees first); the key
    ``"isnan"`` (empty text) asks for the renderer's own ``fg_isnan`` helper. Without
    ``fused_fma`` (the adapter rounds fma twice) fma is computed in software."""
    return f"fg_{name}_f32", _definitions([f"fg_{name}_f32"], fused_fma)


_NAME = re.compile(r"\b([av])(\d+)\b")


def inline(
    name: str,
    args: list[str],
    prefix: str,
    fused_fma: bool = True,
    zero: str | None = None,
    branches: bool = False,
) -> tuple[list[str], str, list[tuple[str, str]]] | None:
    """``name`` of ``args`` as statements for the caller's body: ``(let statements, the
    result, definitions of what they call)`` (as :func:`function`'s), the values named
    ``<prefix>_v<i>``; None where the function is not straight-line (erf_inv: call it).
    ``zero``: the caller's own opaque u32 zero, used in place of the one the function
    derives from its argument (the caller computes it once, from a uniform value).
    ``branches``: rare paths behind ``if`` blocks (``WGSLBuilder.rare``; the statements are
    then not all ``let`` s).

    The renderer inlines so that it can interleave independent functions' statements
    (:func:`fungrad.lowering.gpu.schedule.schedule`): llvmpipe runs them in about the order written,
    and a function's cost there is its dependency chain."""
    try:
        body = _body(name, fused_fma, branches)
    except _NoFloat64:
        body = None
    if body is None:
        return None

    def rename(m: re.Match) -> str:
        if m.group(1) == "a":
            return args[int(m.group(2))]
        return zero if zero is not None and m.group(0) == body.zero else f"{prefix}_v{m.group(2)}"

    lines = body.lines
    if zero is not None and body.zero is not None:
        lines = [line for line in lines if not line.startswith(f"  let {body.zero} = ")]
    return (
        [_NAME.sub(rename, line) for line in lines],
        _NAME.sub(rename, body.result),
        _definitions(sorted(body.callees), fused_fma),
    )
