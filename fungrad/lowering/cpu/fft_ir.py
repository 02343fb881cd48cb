"""The LLVM IR of the FFT library's Stockham passes (``fft.py`` describes the library; the
transforms and entry points that run these passes are in ``fft_driver_ir.py``,
``fft_batch_ir.py`` and ``fft_cols_ir.py``).

- ``@fgfft.pass<p>j`` / ``@fgfft.pass<p>q``: one pass as scalar loops, the inner one over
  ``j`` or over ``q``; ``@fgfft.pass<p>b<s>`` (radix 2, 4; ``s`` 1, 2, 4) and
  ``@fgfft.pass<p>v`` (``s`` a multiple of ``VEC``): the same with explicit vectors.

Complex values are pairs of SSA values (``_Fn``); every butterfly is written once
(``_butterfly``) for scalar and vector types alike, the sign entering at run time as a +-1
factor of the ``i *`` terms (one library serves both directions).
"""

from __future__ import annotations

import math

import numpy as np

from fungrad.lowering.cpu.llvm_types import literal

__all__ = [
    "BLOCK_RADICES",
    "BLOCK_S",
    "HEADER",
    "J_INNER_BELOW",
    "PARALLEL_POINTS",
    "PASS_FIELDS",
    "RADICES",
    "SCALAR_Q_RADICES",
    "VEC",
]

RADICES = (4, 2, 3, 5, 7)
"""The Stockham passes' radices, in the order the passes run; other prime factors of ``n``
take Bluestein's algorithm."""
J_INNER_BELOW = 8
"""Passes whose ``s`` (interleaved sub-transforms) is below this loop over ``j`` innermost."""
PARALLEL_POINTS = 1 << 15
"""Complex points (of one transform, or of the batch) from which a call given a thread pool
splits its work: the rows of a batch of at least ``nthreads``, else each pass of each row."""
VEC = 8
"""Complex numbers per vector of the passes written with explicit vectors."""
BLOCK_RADICES, BLOCK_S = (2, 4), (1, 2, 4)
"""The radices and values of ``s`` of the block passes (``_block_pass_fn``)."""
SCALAR_Q_RADICES = (3, 5, 7)
"""The radices with a scalar pass over ``q`` (``s`` >= ``J_INNER_BELOW``, not a multiple of
``VEC``): a radix 4 or 2 pass has ``s`` a power of four (the 4s run first), so a multiple of
``VEC`` from 16 on."""
HEADER = 10
"""int64 fields of a plan before its passes: ``n, kind, passes, scratch (complex numbers), M,
chirp, filter, sub-plan, sign, blocked`` (addresses as int64; kind 0 Stockham, 1 Bluestein;
blocked 1: rows in blocks of ``VEC``, ``fft_batch_ir.py``)."""
PASS_FIELDS = 4
"""int64 fields per pass: radix, s, m, twiddle table address (``[k - 1][j]``, interleaved)."""


class _Fn:
    """Lines of one function and a counter for SSA names."""

    def __init__(self, scalar: str, lanes: int = 0):
        self.scalar = scalar
        self.ty = f"<{lanes} x {scalar}>" if lanes else scalar
        self.lines: list[str] = []
        self.k = 0

    def const(self, v: float) -> str:
        """A constant of the function's (scalar or vector) type, rounded to its precision."""
        lit = literal(v, np.dtype(np.float32 if self.scalar == "float" else np.float64))
        return f"splat ({self.scalar} {lit})" if self.ty != self.scalar else lit

    def tmp(self) -> str:
        self.k += 1
        return f"%t{self.k}"

    def op(self, text: str) -> str:
        v = self.tmp()
        self.lines.append(f"  {v} = {text}")
        return v

    def emit(self, *lines: str) -> None:
        self.lines.extend(lines)

    # complex values are (re, im) pairs of SSA names or literals
    def load(self, base: str, idx: str) -> tuple[str, str]:
        ty = self.scalar
        pr = self.op(f"getelementptr inbounds [2 x {ty}], ptr {base}, i64 {idx}, i64 0")
        pi = self.op(f"getelementptr inbounds [2 x {ty}], ptr {base}, i64 {idx}, i64 1")
        return self.op(f"load {ty}, ptr {pr}"), self.op(f"load {ty}, ptr {pi}")

    def store(self, base: str, idx: str, v: tuple[str, str]) -> None:
        ty = self.scalar
        pr = self.op(f"getelementptr inbounds [2 x {ty}], ptr {base}, i64 {idx}, i64 0")
        pi = self.op(f"getelementptr inbounds [2 x {ty}], ptr {base}, i64 {idx}, i64 1")
        self.emit(f"  store {ty} {v[0]}, ptr {pr}", f"  store {ty} {v[1]}, ptr {pi}")

    def f(self, op: str, a: str, b: str) -> str:
        return self.op(f"{op} contract {self.ty} {a}, {b}")

    def add(self, a, b):
        return self.f("fadd", a[0], b[0]), self.f("fadd", a[1], b[1])

    def sub(self, a, b):
        return self.f("fsub", a[0], b[0]), self.f("fsub", a[1], b[1])

    def scale(self, a, c: str):
        return self.f("fmul", a[0], c), self.f("fmul", a[1], c)

    def mul(self, a, b):
        re = self.f("fsub", self.f("fmul", a[0], b[0]), self.f("fmul", a[1], b[1]))
        im = self.f("fadd", self.f("fmul", a[0], b[1]), self.f("fmul", a[1], b[0]))
        return re, im

    def conj(self, a):
        return a[0], self.op(f"fneg {self.ty} {a[1]}")

    def i_times(self, a, sgn: str):
        """``sgn * i * a`` (``sgn`` +-1 at run time)."""
        re = self.op(f"fneg {self.ty} {self.f('fmul', a[1], sgn)}")
        return re, self.f("fmul", a[0], sgn)


def _butterfly(fn: _Fn, a: list, sgn: str) -> list:
    """``DFT_p(a)_k = sum_r a_r exp(sgn 2 pi i r k / p)`` for p = len(a) in (2, 3, 4, 5, 7)."""
    p = len(a)
    if p == 2:
        return [fn.add(a[0], a[1]), fn.sub(a[0], a[1])]
    if p == 4:
        t0, t1 = fn.add(a[0], a[2]), fn.sub(a[0], a[2])
        t2, t3 = fn.add(a[1], a[3]), fn.i_times(fn.sub(a[1], a[3]), sgn)
        return [fn.add(t0, t2), fn.add(t1, t3), fn.sub(t0, t2), fn.sub(t1, t3)]
    # odd p: pairs r, p - r; y_k = a0 + sum cos(2 pi r k / p) S_r + sgn i sum sin(...) D_r
    h = (p - 1) // 2
    s = [fn.add(a[r], a[p - r]) for r in range(1, h + 1)]
    d = [fn.sub(a[r], a[p - r]) for r in range(1, h + 1)]
    y0 = a[0]
    for v in s:
        y0 = fn.add(y0, v)
    out = [y0] + [None] * (p - 1)
    for k in range(1, h + 1):
        acc, bcc = a[0], None
        for r in range(1, h + 1):
            c = fn.const(math.cos(2 * math.pi * r * k / p))
            sn = fn.const(math.sin(2 * math.pi * r * k / p))
            acc = fn.add(acc, fn.scale(s[r - 1], c))
            term = fn.scale(d[r - 1], sn)
            bcc = term if bcc is None else fn.add(bcc, term)
        b = fn.i_times(bcc, sgn)
        out[k], out[p - k] = fn.add(acc, b), fn.sub(acc, b)
    return out


def _pass_fn(p: int, j_inner: bool, ty: str) -> str:
    """``@fgfft.pass<p><q|j>``: one Stockham pass of radix ``p`` (see the module docstring)."""
    fn = _Fn(ty)
    outer, inner = ("q", "j") if j_inner else ("j", "q")
    trip = {"q": "%s", "j": "%m"}
    fn.emit(
        "entry:",
        "  %sm = mul i64 %s, %m",
        f"  %sp = mul i64 %s, {p}",
        "  br label %oh",
        "oh:",
        f"  %{outer} = phi i64 [0, %entry], [%{outer}.n, %ol]",
        f"  %oc = icmp slt i64 %{outer}, {trip[outer]}",
        "  br i1 %oc, label %ob, label %exit",
        "ob:",
        "  br label %ih",
        "ih:",
        f"  %{inner} = phi i64 [0, %ob], [%{inner}.n, %ib]",
        f"  %ic = icmp slt i64 %{inner}, {trip[inner]}",
        "  br i1 %ic, label %ib, label %ol",
        "ib:",
    )
    sj = fn.op("mul i64 %s, %j")
    base_in = fn.op(f"add i64 %q, {sj}")
    spj = fn.op("mul i64 %sp, %j")
    base_out = fn.op(f"add i64 %q, {spj}")
    a = []
    for r in range(p):
        idx = base_in if r == 0 else fn.op(f"add i64 {base_in}, {fn.op(f'mul i64 %sm, {r}')}")
        a.append(fn.load("%x", idx))
    y = _butterfly(fn, a, "%sgn")
    for k in range(p):
        v = y[k]
        if k:
            ti = fn.op(f"add i64 %j, {fn.op(f'mul i64 %m, {k - 1}')}")
            v = fn.mul(v, fn.load("%tw", ti))
        idx = base_out if k == 0 else fn.op(f"add i64 {base_out}, {fn.op(f'mul i64 %s, {k}')}")
        fn.store("%y", idx, v)
    fn.emit(
        f"  %{inner}.n = add i64 %{inner}, 1",
        "  br label %ih, !llvm.loop !0",
        "ol:",
        f"  %{outer}.n = add i64 %{outer}, 1",
        "  br label %oh, !llvm.loop !0",
        "exit:",
        "  ret void",
    )
    name = f"@fgfft.pass{p}{'j' if j_inner else 'q'}"
    head = (
        f"define internal void {name}(ptr noalias %x, ptr noalias %y, ptr noalias %tw, "
        f"i64 %s, i64 %m, {ty} %sgn) nounwind noinline {{"
    )
    return "\n".join([head, *fn.lines, "}", ""])


def _esz(ty: str) -> int:
    """Bytes of ``float``/``double``: the alignment vector loads and stores may assume (the
    data of a complex array is only element-aligned in general)."""
    return 4 if ty == "float" else 8


def _mask(idx) -> str:
    return "<" + ", ".join(f"i32 {i}" for i in idx) + ">"


def _block_pass_fn(p: int, s: int, ty: str) -> str:
    """``@fgfft.pass<p>b<s>``: a Stockham pass of radix ``p`` (2 or 4) with few interleaved
    sub-transforms (``s`` 1, 2 or 4), written with explicit vectors of ``VEC`` complex numbers.

    Input position ``q + s j`` of each of the ``p`` streams is contiguous over ``(j, q)``, so
    one vector holds ``VEC / s`` values of ``j`` times ``s`` of ``q`` (the twiddles, which depend
    on ``j`` only, are each repeated ``s`` times by a shuffle); the ``p`` results of those
    ``j`` fill ``p VEC`` contiguous outputs, interleaved ``s`` at a time by one shuffle. The
    caller runs it when ``s m`` is a multiple of ``VEC``. (LLVM does not vectorise the scalar
    loop over ``j`` here: its stores are ``s p`` apart, ``s`` known only at run time.)"""
    v = VEC
    fn = _Fn(ty, v)
    vt, wide = fn.ty, f"<{2 * v} x {ty}>"
    even, odd = _mask(range(0, 2 * v, 2)), _mask(range(1, 2 * v, 2))
    fn.emit(
        "entry:",
        f"  %sg0 = insertelement <{v} x {ty}> poison, {ty} %sgn, i64 0",
        f"  %sgv = shufflevector <{v} x {ty}> %sg0, <{v} x {ty}> poison, "
        f"<{v} x i32> zeroinitializer",
        f"  %sm = mul i64 %m, {s}",
        "  br label %h",
        "h:",
        "  %t = phi i64 [0, %entry], [%t.n, %b]",
        "  %c = icmp ult i64 %t, %nt",
        "  br i1 %c, label %b, label %exit",
        "b:",
    )
    e0 = fn.op(f"mul i64 %t, {v}")
    j0 = fn.op(f"udiv i64 {e0}, {s}") if s > 1 else e0
    a = []
    for r in range(p):
        idx = e0 if r == 0 else fn.op(f"add i64 {e0}, {fn.op(f'mul i64 %sm, {r}')}")
        ptr = fn.op(f"getelementptr inbounds [2 x {ty}], ptr %x, i64 {idx}")
        w = fn.op(f"load {wide}, ptr {ptr}, align {_esz(ty)}")
        a.append(
            (
                fn.op(f"shufflevector {wide} {w}, {wide} poison, <{v} x i32> {even}"),
                fn.op(f"shufflevector {wide} {w}, {wide} poison, <{v} x i32> {odd}"),
            )
        )
    y = _butterfly(fn, a, "%sgv")
    g = v // s  # values of j per vector
    gt = f"<{2 * g} x {ty}>"
    parts = []
    for k in range(p):
        z = y[k]
        if k:
            ti = fn.op(f"add i64 {j0}, {fn.op(f'mul i64 %m, {k - 1}')}")
            tp = fn.op(f"getelementptr inbounds [2 x {ty}], ptr %tw, i64 {ti}")
            tv = fn.op(f"load {gt}, ptr {tp}, align {_esz(ty)}")
            wr = fn.op(
                f"shufflevector {gt} {tv}, {gt} poison, <{v} x i32> "
                + _mask(2 * (i // s) for i in range(v))
            )
            wi = fn.op(
                f"shufflevector {gt} {tv}, {gt} poison, <{v} x i32> "
                + _mask(2 * (i // s) + 1 for i in range(v))
            )
            z = fn.mul(z, (wr, wi))
        inter = _mask(i // 2 + (i % 2) * v for i in range(2 * v))
        parts.append(fn.op(f"shufflevector {vt} {z[0]}, {vt} {z[1]}, <{2 * v} x i32> {inter}"))
    # the p interleaved results, concatenated (p = 4: pairwise), then put in output order:
    # output complex g p s + k s + q is complex g s + q of result k
    if p == 4:
        lo = fn.op(
            f"shufflevector {wide} {parts[0]}, {wide} {parts[1]}, <{4 * v} x i32> "
            + _mask(range(4 * v))
        )
        hi = fn.op(
            f"shufflevector {wide} {parts[2]}, {wide} {parts[3]}, <{4 * v} x i32> "
            + _mask(range(4 * v))
        )
        src, half = (lo, hi), f"<{4 * v} x {ty}>"
    else:
        src, half = (parts[0], parts[1]), wide
    order = []
    for o in range(p * v):
        gg, k, q = o // (p * s), (o % (p * s)) // s, o % s
        c = k * v + gg * s + q
        order += [2 * c, 2 * c + 1]
    out = fn.op(
        f"shufflevector {half} {src[0]}, {half} {src[1]}, <{2 * p * v} x i32> " + _mask(order)
    )
    oi = fn.op(f"mul i64 {e0}, {p}")
    op = fn.op(f"getelementptr inbounds [2 x {ty}], ptr %y, i64 {oi}")
    fn.emit(
        f"  store <{2 * p * v} x {ty}> {out}, ptr {op}, align {_esz(ty)}",
        "  %t.n = add i64 %t, 1",
        "  br label %h, !llvm.loop !0",
        "exit:",
        "  ret void",
    )
    head = (
        f"define internal void @fgfft.pass{p}b{s}(ptr noalias %x, ptr noalias %y, "
        f"ptr noalias %tw, i64 %s, i64 %m, {ty} %sgn, i64 %nt) nounwind noinline {{"
    )
    return "\n".join([head, *fn.lines, "}", ""])


def vector_pass_head(fn: _Fn, ty: str, p: int, j_count: str, q_count: str):
    """The opening of a vectorised Stockham pass of radix ``p``: the broadcast sign ``%sgv``,
    ``%sm``, ``%sp``, the loop over ``j < j_count`` (``oh``/``ob``, closed by ``ol``) with the
    ``p - 1`` twiddles of ``j`` broadcast to vectors, and the loop over ``q < q_count``
    (``ih``/``ib``). Returns ``(w, base_in, base_out)``: the twiddle pairs (``w[0]`` None) and
    the element indices ``q + s j`` and ``q + s p j``."""
    v, vt = VEC, fn.ty
    fn.emit(
        "entry:",
        f"  %sg0 = insertelement {vt} poison, {ty} %sgn, i64 0",
        f"  %sgv = shufflevector {vt} %sg0, {vt} poison, <{v} x i32> zeroinitializer",
        "  %sm = mul i64 %s, %m",
        f"  %sp = mul i64 %s, {p}",
        "  br label %oh",
        "oh:",
        "  %j = phi i64 [0, %entry], [%j.n, %ol]",
        f"  %oc = icmp ult i64 %j, {j_count}",
        "  br i1 %oc, label %ob, label %exit",
        "ob:",
    )
    w = [None]
    for k in range(1, p):
        ti = fn.op(f"add i64 %j, {fn.op(f'mul i64 %m, {k - 1}')}")
        re, im = fn.load("%tw", ti)
        pair = []
        for c in (re, im):
            e = fn.op(f"insertelement {vt} poison, {ty} {c}, i64 0")
            pair.append(fn.op(f"shufflevector {vt} {e}, {vt} poison, <{v} x i32> zeroinitializer"))
        w.append(tuple(pair))
    sj = fn.op("mul i64 %s, %j")
    spj = fn.op("mul i64 %sp, %j")
    fn.emit(
        "  br label %ih",
        "ih:",
        "  %q = phi i64 [0, %ob], [%q.n, %ib]",
        f"  %ic = icmp ult i64 %q, {q_count}",
        "  br i1 %ic, label %ib, label %ol",
        "ib:",
    )
    return w, fn.op(f"add i64 %q, {sj}"), fn.op(f"add i64 %q, {spj}")


def _vector_pass_fn(p: int, ty: str) -> str:
    """``@fgfft.pass<p>v``: a Stockham pass of radix ``p`` whose ``s`` is a multiple of ``VEC``,
    with explicit vectors of ``VEC`` values of ``q`` (the twiddles, one per ``j``, broadcast).
    LLVM vectorises the scalar loop over ``q`` too, but ``VEC`` times its interleave count
    wide, so that ``s`` of 16 ran its scalar remainder only."""
    v = VEC
    fn = _Fn(ty, v)
    vt, wide = fn.ty, f"<{2 * v} x {ty}>"
    even, odd = _mask(range(0, 2 * v, 2)), _mask(range(1, 2 * v, 2))
    inter = _mask(i // 2 + (i % 2) * v for i in range(2 * v))
    w, base_in, base_out = vector_pass_head(fn, ty, p, "%jcnt", "%qcnt")
    a = []
    for r in range(p):
        idx = base_in if r == 0 else fn.op(f"add i64 {base_in}, {fn.op(f'mul i64 %sm, {r}')}")
        ptr = fn.op(f"getelementptr inbounds [2 x {ty}], ptr %x, i64 {idx}")
        x = fn.op(f"load {wide}, ptr {ptr}, align {_esz(ty)}")
        a.append(
            (
                fn.op(f"shufflevector {wide} {x}, {wide} poison, <{v} x i32> {even}"),
                fn.op(f"shufflevector {wide} {x}, {wide} poison, <{v} x i32> {odd}"),
            )
        )
    y = _butterfly(fn, a, "%sgv")
    for k in range(p):
        z = y[k] if k == 0 else fn.mul(y[k], w[k])
        c = fn.op(f"shufflevector {vt} {z[0]}, {vt} {z[1]}, <{2 * v} x i32> {inter}")
        idx = base_out if k == 0 else fn.op(f"add i64 {base_out}, {fn.op(f'mul i64 %s, {k}')}")
        ptr = fn.op(f"getelementptr inbounds [2 x {ty}], ptr %y, i64 {idx}")
        fn.emit(f"  store {wide} {c}, ptr {ptr}, align {_esz(ty)}")
    fn.emit(
        f"  %q.n = add i64 %q, {v}",
        "  br label %ih, !llvm.loop !0",
        "ol:",
        "  %j.n = add i64 %j, 1",
        "  br label %oh, !llvm.loop !0",
        "exit:",
        "  ret void",
    )
    head = (
        f"define internal void @fgfft.pass{p}v(ptr noalias %x, ptr noalias %y, "
        f"ptr noalias %tw, i64 %s, i64 %m, {ty} %sgn, i64 %jcnt, i64 %qcnt) "
        "nounwind noinline {"
    )
    return "\n".join([head, *fn.lines, "}", ""])


def _field(fn: _Fn, plan: str, i: int, name: str) -> str:
    fn.emit(f"  %{name}.p = getelementptr inbounds i64, ptr {plan}, i64 {i}")
    fn.emit(f"  %{name} = load i64, ptr %{name}.p")
    return f"%{name}"


# the context of one pass (``@fgfft.chunk``): i64 fields
