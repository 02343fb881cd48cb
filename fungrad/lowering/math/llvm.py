"""The math functions as LLVM IR text, for the CPU renderer's prelude: the LLVM builder.

Why: LLVM lowers ``llvm.exp.*``/``llvm.tanh.*`` (and libm calls) inside a vectorised loop into one
scalar libm call per lane. Measured for the lowering notes (LOWERING.md, section 1):
``tanh(x)*2 + exp(-x)`` over 4M float32 took 80 ms that way, 12.4 ms in numpy, and 3.3 ms with
inline polynomials written with fma/rint/bitcast/select only, which the loop vectoriser widens to
ymm/zmm code. LLVM 22 dropped ``-vector-library``, so polynomials in IR are the portable route.

The algorithms are written once (``functions``; contract and accuracy there); this module is
the builder that renders them as IR (:class:`LLVMBuilder`) and the prelude around them.

Entry points: ``prelude(dtypes_needed, fns_needed)`` returns the IR text of the requested
``define internal <ty> @fg_<name>_<f32|f64>(...) alwaysinline`` functions (plus the functions they
call, e.g. tanh calls exp, and the intrinsic declarations); ``math_symbol(name, dtype)`` names one
of them; ``MATH_FUNCTIONS`` maps each name to its arity (atan2(y, x) and pow(x, y) take two).

What the IR is: straight-line fadd/fsub/fmul/fdiv, integer ops, bitcast, fptosi/sitofp of
clamped values, select/fcmp/icmp and the intrinsics fma, rint, fabs, copysign, sqrt (and
ldexp where it is one vector instruction: x86-64 with AVX-512): no branches, no libm, no
fast-math flags (they would delete the NaN/inf handling), so a loop over them vectorises
fully. The exceptions: sin/cos/tan branch to a noinline large-argument function; the
vectoriser calls its masked vector variant, which is inlined after it (see
:meth:`LLVMBuilder.branch_large`; the renderer compiles those functions once per process:
ensure_large_library). And the renderer's float32 division by a loop-invariant divisor
(DIVIDE) is exact without a divide per element.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import numpy as np

from fungrad.lowering.math import trig
from fungrad.lowering.math.builder import F32, F64, FLOAT_TYPES, Builder, FloatType, Value
from fungrad.lowering.math.functions import EMITTERS, LARGE_EMITTERS, MATH_FUNCTIONS
from fungrad.lowering.math.numeric import ldexp_two_step

__all__ = [
    "BRANCHING",
    "DIVIDE",
    "MATH_FUNCTIONS",
    "LLVMBuilder",
    "divide_call",
    "divisor_lines",
    "ensure_large_library",
    "large_functions_declared",
    "large_library_ir",
    "large_symbols",
    "math_symbol",
    "prelude",
]

_BY_DTYPE = {"float32": F32, "float64": F64}


# ----------------------------------------------------------------------------------------------
# The builder: Values are SSA names (%v<i>) or literals, each operation one IR line.


class LLVMBuilder(Builder):
    """Collects the instructions of one function body, its callees and its intrinsics."""

    def __init__(self):
        super().__init__()
        self.intrinsics: dict[str, str] = {}

    def emit(self, rhs: str, ty: str) -> Value:
        name = f"%v{len(self.lines)}"
        self.lines.append(f"  {name} = {rhs}")
        return Value(self, name, ty)

    def lift(self, v, ty: str) -> Value:
        if isinstance(v, Value):
            if v.ty != ty:
                raise TypeError(f"llvm_math: operand of type {v.ty} where {ty} is expected")
            return v
        if ty in FLOAT_TYPES:
            return Value(self, FLOAT_TYPES[ty].literal(v), ty)
        if ty == "i1":
            return Value(self, "true" if v else "false", ty)
        return Value(self, str(int(v)), ty)

    def binary(self, op: str, a: Value, c: Value) -> Value:
        return self.emit(f"{op} {a.ty} {a.ref}, {c.ref}", a.ty)

    def neg(self, v: Value) -> Value:
        if v.ty in FLOAT_TYPES:
            return self.emit(f"fneg {v.ty} {v.ref}", v.ty)
        return 0 - v

    def cmp(self, pred: str, a, c) -> Value:
        ty = a.ty if isinstance(a, Value) else c.ty
        a, c = self.lift(a, ty), self.lift(c, ty)
        op = "fcmp" if ty in FLOAT_TYPES else "icmp"
        return self.emit(f"{op} {pred} {ty} {a.ref}, {c.ref}", "i1")

    def select(self, cond: Value, a, c, ty: str | None = None) -> Value:
        ty = ty or (a.ty if isinstance(a, Value) else c.ty)
        a, c = self.lift(a, ty), self.lift(c, ty)
        return self.emit(f"select i1 {cond.ref}, {ty} {a.ref}, {ty} {c.ref}", ty)

    def intrinsic(self, name: str, *args) -> Value:
        ty = next(a.ty for a in args if isinstance(a, Value))
        vals = [self.lift(a, ty) for a in args]
        fn = f"llvm.{name}.{FLOAT_TYPES[ty].suffix}"
        self.intrinsics[fn] = f"declare {ty} @{fn}({', '.join([ty] * len(vals))})"
        argtext = ", ".join(f"{ty} {v.ref}" for v in vals)
        return self.emit(f"call {ty} @{fn}({argtext})", ty)

    def ldexp(self, y, k) -> Value:
        """y * 2**k for an integer k: ``llvm.ldexp`` where it vectorises (x86-64 with
        AVX-512), else the two-step multiply (2**k itself may be out of range; the first
        step is exact). Both give the same bits."""
        if not _vector_ldexp():
            return ldexp_two_step(self, y, k)
        fn = f"llvm.ldexp.{y.ft.suffix}.i32"
        self.intrinsics[fn] = f"declare {y.ty} @{fn}({y.ty}, i32)"
        k32 = k if k.ty == "i32" else self.cast("trunc", k, "i32")
        return self.emit(f"call {y.ty} @{fn}({y.ty} {y.ref}, i32 {k32.ref})", y.ty)

    def cast(self, op: str, v: Value, ty: str) -> Value:
        return self.emit(f"{op} {v.ty} {v.ref} to {ty}", ty)

    def call(self, fn: str, *args: Value) -> Value:
        self.callees.add(fn)
        argtext = ", ".join(f"{a.ty} {a.ref}" for a in args)
        return self.emit(f"call {args[0].ty} @{fn}({argtext})", args[0].ty)

    # The float64 paths' extensions (WGSL has no 64-bit integers)

    def lshr(self, v: Value, n) -> Value:
        """Logical shift right."""
        n = self.lift(n, v.ty)
        return self.emit(f"lshr {v.ty} {v.ref}, {n.ref}", v.ty)

    def load_word(self, table: str, words: tuple[int, ...], i: Value) -> Value:
        """Word ``i`` of the i64 constant table ``@<table>`` holding ``words`` (a gather when
        vectorised); the table is defined as if it were the function ``<table>_f64``."""
        self.callees.add(f"{table}_f64")
        p = self.emit(
            f"getelementptr inbounds [{len(words)} x i64], ptr @{table}, i64 0, i64 {i.ref}", "ptr"
        )
        return self.emit(f"load i64, ptr {p.ref}", "i64")

    def branch_large(self, x: Value, r: Value, fn: str) -> Value:
        """``r`` (the small-argument result, all of this body's lines so far), or
        fg_<fn>_large(x) where |x| is at least the Cody-Waite limit, inf or NaN (see the
        large-argument notes below). The test and the call come first, the small-argument
        lines after the join: across the call (which clobbers every vector register) only x
        and the loop's constants are live, not the small path's temporaries (fewer spills in
        the hot loop: the benchmark chain). An ``entry`` block, the call's block, and the
        join holding the rest."""
        limit = 2.0 ** (x.ft.mant + 1)
        sym = f"fg_{fn}_large_{x.ft.suffix}"
        self.callees.add(sym)
        suffix = x.ft.suffix
        self.intrinsics[f"llvm.fabs.{suffix}"] = f"declare {x.ty} @llvm.fabs.{suffix}({x.ty})"
        variants = ",".join(f"_ZGV_LLVM_M{n}v_{sym}({sym}_v{n})" for n in _VARIANT_LANES)
        small, self.lines = (
            self.lines,
            [
                f"  %large.abs = call {x.ty} @llvm.fabs.{suffix}({x.ty} {x.ref})",
                f"  %large.big = fcmp uge {x.ty} %large.abs, {x.ft.literal(limit)}",  # also NaN
                "  br i1 %large.big, label %large, label %join",
                "large:",
                f"  %large.got = call {x.ty} @{sym}({x.ty} {x.ref}) "
                f'"vector-function-abi-variant"="{variants}"',
                "  br label %join",
                "join:",
                f"  %large.r = phi {x.ty} [poison, %entry], [%large.got, %large]",
            ],
        )
        self.lines += small
        return self.select(Value(self, "%large.big", "i1"), Value(self, "%large.r", x.ty), r)


@functools.cache
def _vector_ldexp() -> bool:
    """Does ``llvm.ldexp`` become one vector instruction on this host? On x86-64 with AVX-512
    it is ``vscalefps``/``vscalefpd`` (measured: float32 exp 18% faster than the two-step
    multiply); elsewhere LLVM 22 lowers a vector ldexp to one libm call per lane."""
    from fungrad.lowering.cpu import compiler as cpu

    h = cpu.host()
    return h.triple.startswith("x86_64") and "+avx512f" in h.features.split(",")


def _two_opi_table_ir() -> str:
    """The IR constant of :data:`trig.TWO_OPI_64` that ``load_word`` reads."""
    words = ", ".join(f"i64 {w - (1 << 64) if w >> 63 else w}" for w in trig.TWO_OPI_64)
    return (
        f"@{trig.TWO_OPI_TABLE} = internal unnamed_addr constant "
        f"[{len(trig.TWO_OPI_64)} x i64] [{words}], align 8\n"
    )


# ----------------------------------------------------------------------------------------------
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
# (bench/RESULTS.md). Tried and dropped: the lanes function preserve_allcc (on
# AVX-512 that keeps only ymm0-15, and LLVM's vzeroupper before its return broke even those:
# wrong results in the other lanes); the Payne-Hanek body vectorised and inlined behind the
# branch (large arguments 6x faster, but 3x the compile time of every module using it).
_VARIANT_LANES = (2, 4, 8, 16)
_LARGE_DECL = re.compile(r"^declare \S+ @(fg_\w+_large_f(?:32|64))\(", re.M)
#: the functions whose body holds that branch (lgamma and digamma call sin and tan)
BRANCHING = frozenset({"sin", "cos", "tan", "lgamma", "digamma"})


def _large_functions(sym: str, ty: str, body: list[str], result: str, part: str = "all") -> str:
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
        text += [
            f"define {link}{ty} @{sym}({ty} %a0) {attrs} {{",
            "entry:",
            *body,
            f"  ret {ty} {result}",
            "}",
            "",
        ]
    for n in _VARIANT_LANES:
        vt = f"<{n} x {ty}>"
        if part == "module":
            text.append(f"declare {vt} @{sym}_lanes{n}({vt}) nounwind cold memory(none)")
        else:
            text += [f"define {link}{vt} @{sym}_lanes{n}({vt} %x) {attrs} {{"]
            prev = "poison"
            for i in range(n):  # every lane (sym is pure): no branch per lane
                text += [
                    f"  %x{i} = extractelement {vt} %x, i32 {i}",
                    f"  %r{i} = call {ty} @{sym}({ty} %x{i})",
                    f"  %v{i} = insertelement {vt} {prev}, {ty} %r{i}, i32 {i}",
                ]
                prev = f"%v{i}"
            text += [f"  ret {vt} {prev}", "}", ""]
        if part == "library":
            continue
        text += [
            f"define internal {vt} @{sym}_v{n}({vt} %x, <{n} x i1> %m) alwaysinline nounwind {{",
            "entry:",
            f"  %bits = bitcast <{n} x i1> %m to i{n}",
            f"  %any = icmp ne i{n} %bits, 0",
            "  br i1 %any, label %lanes, label %none, "
            '!prof !{!"branch_weights", i32 1, i32 1048575}',
            "none:",
            f"  ret {vt} poison",
            "lanes:",
            f"  %r = call {vt} @{sym}_lanes{n}({vt} %x)",
            f"  ret {vt} %r",
            "}",
            "",
        ]
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
            done[s], callees, _ = _define(s[3:-4], F32 if s.endswith("f32") else F64, "library")
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
            module = cpu.compile_module(
                large_library_ir(sym),
                large_symbols(sym),
                name=f"fungrad_{sym[3:]}",
                library=True,
            )
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
_NEVER = '!prof !{!"branch_weights", i32 1, i32 1048575}'


def divisor_lines(y: str, rf: str, s: str) -> list[str]:
    """IR lines computing :data:`DIVIDE`'s loop-invariant operands ``rf`` (1/y) and ``s`` (the
    test's scale, NaN for a divisor out of range) for the float32 value ``y``."""
    return [
        f"  {rf} = fdiv float 1.0, {y}",
        f"  {s}.b = bitcast float {y} to i32",
        f"  {s}.e = lshr i32 {s}.b, 23",
        f"  {s}.eb = and i32 {s}.e, 255",  # e(y) + 127
        f"  {s}.lo = sub i32 {s}.eb, 27",
        f"  {s}.ok = icmp ult i32 {s}.lo, 226",  # -100 <= e(y) <= 125
        f"  {s}.k = call i32 @llvm.smin.i32(i32 {s}.eb, i32 150)",
        f"  {s}.kb = sub i32 {s}.k, 25",  # min(e(y) - 25, -2) + 127
        f"  {s}.sb = shl i32 {s}.kb, 23",
        f"  {s}.v = bitcast i32 {s}.sb to float",
        f"  {s} = select i1 {s}.ok, float {s}.v, float 0x7FF8000000000000",
    ]


def divide_call(out: str, x: str, y: str, rf: str, s: str) -> str:
    """The IR line ``out = x / y`` by :data:`DIVIDE`, naming its vector variants."""
    variants = ",".join(f"_ZGV_LLVM_N{n}vvvv_{DIVIDE}({DIVIDE}_n{n})" for n in _divide_lanes())
    return (
        f"  {out} = call float @{DIVIDE}(float {x}, float {y}, float {rf}, float {s}) "
        f'"vector-function-abi-variant"="{variants}"'
    )


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
            text.append(
                f"define internal float @{DIVIDE}(float %x, float %y, float %rf, "
                "float %s) noinline nounwind memory(none) {"
            )
        else:
            text.append(
                f"define internal {vt} @{DIVIDE}_n{n}({vt} %x, {vt} %y, {vt} %rf, "
                f"{vt} %s) alwaysinline nounwind {{"
            )
        text += [
            "entry:",
            f"  %q0 = fmul {vt} %x, %rf",
            f"  %nq0 = fneg {vt} %q0",
            f"  %rem = call {vt} @{fma}({vt} %nq0, {vt} %y, {vt} %x)",
            f"  %q = call {vt} @{fma}({vt} %rem, {vt} %rf, {vt} %q0)",
            f"  %t = fmul {vt} %q, %s",
        ]
        if n == 16 and _fpclass_test():  # QNaN, +-0, +-inf, subnormal, SNaN: not normal
            text.append(
                "  %bad = call <16 x i1> @llvm.x86.avx512.fpclass.ps.512(<16 x float> %t, i32 191)"
            )
        else:  # |t| - 2^-126 (as integers) beyond the normal numbers' span, NaN included
            text += [
                f"  %tb = bitcast {vt} %t to {it}",
                f"  %ta = and {it} %tb, {k(0x7FFFFFFF)}",
                f"  %tn = sub {it} %ta, {k(0x00800000)}",
                f"  %bad = icmp uge {it} %tn, {k(0x7F000000)}",
            ]
        if n > 1:
            text += [
                f"  %bits = bitcast <{n} x i1> %bad to i{n}",
                f"  %any = icmp ne i{n} %bits, 0",
            ]
        else:
            text.append("  %any = or i1 %bad, false")
        text += [
            f"  br i1 %any, label %div, label %ok, {_NEVER}",
            "ok:",
            f"  ret {vt} %q",
            "div:",
            f"  %e = fdiv {vt} %x, %y",
            f"  ret {vt} %e",
            "}",
            "",
        ]
    return "\n".join(text)


# ----------------------------------------------------------------------------------------------
# The prelude


def _float_type(dtype) -> FloatType:
    name = np.dtype(dtype).name
    if name not in _BY_DTYPE:
        raise ValueError(
            f"llvm_math: no math functions for dtype {name!r}; use one of {sorted(_BY_DTYPE)}"
        )
    return _BY_DTYPE[name]


def math_symbol(name: str, dtype) -> str:
    """IR symbol of math function ``name`` for ``dtype``, e.g. ``fg_exp_f32``."""
    if name not in MATH_FUNCTIONS:
        raise ValueError(
            f"llvm_math: unknown math function {name!r}; known: {', '.join(sorted(MATH_FUNCTIONS))}"
        )
    return f"fg_{name}_{_float_type(dtype).suffix}"


@functools.cache
def _define(
    name: str, ft: FloatType, part: str = "all"
) -> tuple[str, frozenset[str], tuple[str, ...]]:
    """(IR text, called fg_ symbols, intrinsic declarations) of one function (or of the
    table of 2/pi's bits, which float64 sin/cos/tan ask for as if it were one); ``part`` of a
    large-argument function as in :func:`_large_functions`."""
    if name == trig.TWO_OPI_TABLE[3:]:
        return _two_opi_table_ir(), frozenset(), ()
    if f"fg_{name}_{ft.suffix}" == DIVIDE:
        return _divide_ir(), frozenset(), ()
    large = name in LARGE_EMITTERS
    arity, emit = (1, LARGE_EMITTERS[name]) if large else EMITTERS[name]
    b = LLVMBuilder()
    params = [Value(b, f"%a{i}", ft.ir) for i in range(arity)]
    result = emit(b, *params)
    sig = ", ".join(f"{ft.ir} {p.ref}" for p in params)
    sym = f"fg_{name}_{ft.suffix}"
    if large and part == "module":  # (the library has the body and its callees)
        return _large_functions(sym, ft.ir, [], "", part), frozenset(), ()
    if large:
        text = _large_functions(sym, ft.ir, b.lines, result.ref, part)
    else:
        text = "\n".join(
            [
                f"define internal {ft.ir} @{sym}({sig}) alwaysinline nounwind {{",
                "entry:",
                *b.lines,
                f"  ret {ft.ir} {result.ref}",
                "}",
                "",
            ]
        )
    return text, frozenset(b.callees), tuple(sorted(b.intrinsics.values()))


def prelude(
    dtypes_needed=None,
    fns_needed=None,
    *,
    declare_intrinsics: bool = True,
    helpers: Iterable[str] = (),
    shared_large: bool = False,
) -> str:
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
    fts = (
        [F32, F64]
        if dtypes_needed is None
        else sorted({_float_type(d) for d in dtypes_needed}, key=lambda f: f.suffix)
    )
    names = sorted(MATH_FUNCTIONS) if fns_needed is None else sorted(set(fns_needed))
    for n in names:
        if n not in MATH_FUNCTIONS:
            raise ValueError(
                f"llvm_math: unknown math function {n!r}; "
                f"known: {', '.join(sorted(MATH_FUNCTIONS))}"
            )
    for h in helpers:
        if h != DIVIDE:
            raise ValueError(f"llvm_math: unknown helper {h!r}; known: {DIVIDE}")
    pending = [f"fg_{n}_{ft.suffix}" for ft in fts for n in names] + list(helpers)
    done: dict[str, tuple[str, frozenset[str], tuple[str, ...]]] = {}
    while pending:
        sym = pending.pop()
        if sym in done:
            continue
        part = "module" if shared_large and sym[3:-4] in LARGE_EMITTERS else "all"
        done[sym] = _define(sym[3:-4], F32 if sym.endswith("f32") else F64, part)
        pending.extend(done[sym][1])
    decls = sorted({d for _, _, ds in done.values() for d in ds}) if declare_intrinsics else []
    bodies = [done[s][0] for s in sorted(done)]
    # The vector variants are only named in an attribute: keep them. So are the scalar
    # functions that name them: used, LLVM may not drop or specialise a parameter (a constant
    # divisor made IPSCCP delete three, and the variants' names no longer fit: an abort).
    variants = [
        f"ptr @{s}{v}"
        for s in sorted(done)
        if s[3:-4] in LARGE_EMITTERS
        for v in ("",) * (not shared_large) + tuple(f"_v{n}" for n in _VARIANT_LANES)
    ]
    if DIVIDE in done:
        variants += [f"ptr @{DIVIDE}{v}" for v in ("", *(f"_n{n}" for n in _divide_lanes()))]
    if variants:
        bodies.append(
            f"@llvm.compiler.used = appending global [{len(variants)} x ptr] "
            f'[{", ".join(variants)}], section "llvm.metadata"\n'
        )
    return "\n".join(decls + [""] + bodies) if decls else "\n".join(bodies)
