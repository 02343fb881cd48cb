"""LLVM rendering of a sort step (``steps.SortStep``): stable merge sort along one dimension.

``sort`` and ``top_k`` (fungrad/lax/sort.py) cannot be written per element, so their lowering
rules store the operands and append a ``SortStep`` to the program. :func:`render_sort` adds the
sort's internal functions to the module and returns the entry point's lines that call them.

How a row is sorted (a row is one position of every other dimension; its elements lie
``inner`` apart, ``inner`` being the product of the dimensions after the sorted one):

1. Its primary key is loaded once into a contiguous int64 array, mapped to an integer whose
   signed order is the sort order (below), next to an array of positions ``0..n-1``.
2. Runs of 16 are insertion-sorted, then merged bottom-up between the two halves of a scratch
   buffer (``4 n`` int64, a temporary the planner places by liveness), moving (key, position)
   pairs. Equal primary keys fall back to the remaining keys, read from the operands at the
   two positions. Ties keep the earlier position (insertion stops at an equal key; a merge
   takes the right run only when it is strictly smaller), so the sort is stable.
3. Every operand is gathered through the final positions (the first ``k`` of them for top_k),
   so outputs hold the original values, -0.0 and NaN payloads included.

Orders (as the numpy impls):
- ``"sort"``: JAX's order. Floats map to their bits with the magnitude bits of negative values
  flipped (a monotone signed integer), after -0.0 is made +0.0, and every NaN to INT64_MAX: so
  -0.0 == 0.0 and NaNs (of either sign) sort last, equal to each other. Signed integers
  sign-extend, unsigned ones zero-extend (uint64 flips its top bit), bool is 0/1.
- ``"top_k"``: XLA's total order (-NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN) on the raw
  bits, descending: the mapped key is complemented (``~t`` reverses a signed order without
  overflow) and sorted ascending, so equal values keep the lower index first.

Rows are independent: with enough work (``steps.scratch_slots``) they are split into up to 16
*slots*, each with its own part of the scratch buffer, which ``fg_parallel_for`` (runtime.py)
spreads over the cores. The functions are marked ``optsize``: the branchy merge loops gain
nothing from unrolling or vectorisation, and compile about 3x faster.
"""

from __future__ import annotations

import math

from fungrad.lowering.cpu.llvm_types import memory_type
from fungrad.lowering.steps import SortStep

__all__ = ["RUN", "render_sort"]

RUN = 16  # insertion-sorted run length before merging
_I64_MAX = (1 << 63) - 1


def render_sort(module, step: SortStep, ptr: dict[int, str]) -> list[str]:
    """Add the sort functions of ``step`` to ``module`` (an ``llvm.ModuleWriter``); return the
    entry point's lines that run them (through ``fg_parallel_for`` when there are slots)."""
    n = step.shape[step.dimension]
    rows = math.prod(step.shape) // n if n else 0
    if rows == 0 or step.k == 0:
        return []  # nothing to write
    outs = list(step.outputs) + ([step.index_output] if step.index_output else [])
    buffers = [*step.inputs, *outs, step.scratch]
    params = ", ".join(["ptr noalias"] * len(buffers) + ["i64", "i64"])
    module.add_function(_SortWriter(step).function(), ((step.name, "void", params),))
    if step.slots == 1:
        args = ", ".join(f"ptr {ptr[b.id]}" for b in buffers)
        return [f"  call void @{step.name}({args}, i64 0, i64 {rows})"]
    module.add_function(
        _slots_function(step, len(buffers), n, rows),
        ((f"{step.name}.slots", "void", "ptr, i64, i64"),),
    )
    return module.parallel_for(
        f"{step.name}.slots", [ptr[b.id] for b in buffers], step.slots, step.name.replace(".", "_")
    )


def _slots_function(step: SortStep, nbuf: int, n: int, rows: int) -> str:
    """``void @<name>.slots(ptr ctx, i64 start, i64 end)``: slots [start, end), slot s
    sorting rows [s rows / S, (s + 1) rows / S) in scratch part s."""
    S = step.slots
    L = ["entry:"]
    for i in range(nbuf):
        L += [
            f"  %q{i} = getelementptr inbounds ptr, ptr %ctx, i64 {i}",
            f"  %b{i} = load ptr, ptr %q{i}",
        ]
    L += [
        "  br label %head",
        "head:",
        "  %s = phi i64 [%start, %entry], [%s.next, %body]",
        "  %c = icmp slt i64 %s, %end",
        "  br i1 %c, label %body, label %exit",
        "body:",
        f"  %lo0 = mul i64 %s, {rows}",
        f"  %lo = udiv i64 %lo0, {S}",
        "  %s.next = add i64 %s, 1",
        f"  %hi0 = mul i64 %s.next, {rows}",
        f"  %hi = udiv i64 %hi0, {S}",
        f"  %so = mul i64 %s, {4 * n}",
        f"  %scr = getelementptr inbounds i64, ptr %b{nbuf - 1}, i64 %so",
    ]
    args = ", ".join(f"ptr %b{i}" for i in range(nbuf - 1))
    L += [
        f"  call void @{step.name}({args}, ptr %scr, i64 %lo, i64 %hi)",
        "  br label %head",
        "exit:",
        "  ret void",
    ]
    return (
        f"define internal void @{step.name}.slots(ptr %ctx, i64 %start, i64 %end) "
        "nounwind {\n" + "\n".join(L) + "\n}\n"
    )


class _SortWriter:
    """IR text of one SortStep: ``@<name>`` and its comparison ``@<name>.less``."""

    def __init__(self, step: SortStep):
        self.s = step
        self.memory_type = memory_type
        self.n = step.shape[step.dimension]
        self.inner = math.prod(step.shape[step.dimension + 1 :])
        self.rows = math.prod(step.shape) // self.n
        self.count = 0

    def tmp(self, hint: str = "t") -> str:
        self.count += 1
        return f"%{hint}{self.count}"

    # keys -------------------------------------------------------------------------------------
    def key(self, lines: list[str], m: int, offset: str) -> str:
        """Load operand ``m`` at element ``offset`` and map it to its int64 order key."""
        dt = self.s.inputs[m].dtype
        mt = self.memory_type(dt)
        p, x = self.tmp("p"), self.tmp("x")
        lines += [
            f"  {p} = getelementptr inbounds {mt}, ptr %in{m}, i64 {offset}",
            f"  {x} = load {mt}, ptr {p}",
        ]
        top_k = self.s.order == "top_k"
        if dt.kind == "f":
            ity = f"i{8 * dt.itemsize}"
            imax = (1 << (8 * dt.itemsize - 1)) - 1
            src = x
            if not top_k:  # -0.0 sorts as +0.0
                z, src = self.tmp(), self.tmp()
                zero = "0xH0000" if dt.itemsize == 2 else "0.0"
                lines += [
                    f"  {z} = fcmp oeq {mt} {x}, {zero}",
                    f"  {src} = select i1 {z}, {mt} {zero}, {mt} {x}",
                ]
            b, neg, f, t = self.tmp(), self.tmp(), self.tmp(), self.tmp()
            lines += [
                f"  {b} = bitcast {mt} {src} to {ity}",
                f"  {neg} = icmp slt {ity} {b}, 0",
                f"  {f} = xor {ity} {b}, {imax}",
                f"  {t} = select i1 {neg}, {ity} {f}, {ity} {b}",
            ]
            k = self._widen(lines, t, ity, signed=True)
            if not top_k:  # every NaN sorts last, all equal
                nan, kn = self.tmp(), self.tmp()
                lines += [
                    f"  {nan} = fcmp uno {mt} {x}, {x}",
                    f"  {kn} = select i1 {nan}, i64 {_I64_MAX}, i64 {k}",
                ]
                k = kn
        elif dt.kind == "i":
            k = self._widen(lines, x, mt, signed=True)
        else:  # unsigned and bool (i8 0/1 in memory)
            if dt.itemsize == 8:
                k = self.tmp()
                lines.append(f"  {k} = xor i64 {x}, {-(1 << 63)}")
            else:
                k = self._widen(lines, x, mt, signed=False)
        if top_k:
            r = self.tmp()
            lines.append(f"  {r} = xor i64 {k}, -1")
            k = r
        return k

    def _widen(self, lines, v: str, ty: str, signed: bool) -> str:
        if ty == "i64":
            return v
        r = self.tmp()
        lines.append(f"  {r} = {'sext' if signed else 'zext'} {ty} {v} to i64")
        return r

    def less_function(self) -> str:
        """``i1 @<name>.less(ptr in.., i64 base, i64 ka, i64 ia, i64 kb, i64 ib)``: is (ka, ia)
        strictly before (kb, ib)? The primary keys are given; later keys are loaded."""
        s = self.s
        ins = ", ".join(f"ptr noalias %in{m}" for m in range(len(s.inputs)))
        lines = [
            "entry:",
            "  %lt0 = icmp slt i64 %ka, %kb",
            f"  br i1 %lt0, label %yes, label %{'gt0' if s.num_keys > 1 else 'no'}",
        ]
        if s.num_keys > 1:
            lines += [
                "gt0:",
                "  %g0 = icmp sgt i64 %ka, %kb",
                "  br i1 %g0, label %no, label %key1",
                "key1:",
                f"  %oa0 = mul i64 %ia, {self.inner}",
                "  %oa = add i64 %base, %oa0",
                f"  %ob0 = mul i64 %ib, {self.inner}",
                "  %ob = add i64 %base, %ob0",
            ]
            for m in range(1, s.num_keys):
                if m > 1:
                    lines.append(f"key{m}:")
                a = self.key(lines, m, "%oa")
                b = self.key(lines, m, "%ob")
                nxt = f"key{m + 1}" if m + 1 < s.num_keys else "no"
                lt, gt = self.tmp(), self.tmp()
                lines += [
                    f"  {lt} = icmp slt i64 {a}, {b}",
                    f"  br i1 {lt}, label %yes, label %gt{m}",
                    f"gt{m}:",
                    f"  {gt} = icmp sgt i64 {a}, {b}",
                    f"  br i1 {gt}, label %no, label %{nxt}",
                ]
        lines += ["yes:", "  ret i1 true", "no:", "  ret i1 false"]
        return (
            f"define internal i1 @{s.name}.less({ins}{', ' if ins else ''}i64 %base, "
            "i64 %ka, i64 %ia, i64 %kb, i64 %ib) alwaysinline nounwind optsize {\n"
            + "\n".join(lines)
            + "\n}\n"
        )

    def less(self, lines, ka, ia, kb, ib) -> str:
        ins = ", ".join(f"ptr %in{m}" for m in range(len(self.s.inputs)))
        r = self.tmp("lt")
        lines.append(
            f"  {r} = call i1 @{self.s.name}.less({ins}, i64 %base, i64 {ka}, "
            f"i64 {ia}, i64 {kb}, i64 {ib})"
        )
        return r

    # the sort function ------------------------------------------------------------------------
    def function(self) -> str:
        s, n, inner = self.s, self.n, self.inner
        outs = list(s.outputs)
        params = (
            [f"ptr noalias %in{m}" for m in range(len(s.inputs))]
            + [f"ptr noalias %out{m}" for m in range(len(outs))]
            + (["ptr noalias %outidx"] if s.index_output is not None else [])
            + ["ptr noalias %scratch", "i64 %rlo", "i64 %rhi"]
        )
        L: list[str] = ["entry:"]
        L += [
            "  %KA = getelementptr inbounds i64, ptr %scratch, i64 0",
            f"  %IA = getelementptr inbounds i64, ptr %scratch, i64 {n}",
            f"  %KB = getelementptr inbounds i64, ptr %scratch, i64 {2 * n}",
            f"  %IB = getelementptr inbounds i64, ptr %scratch, i64 {3 * n}",
            "  br label %row.head",
            "row.head:",
            "  %r = phi i64 [%rlo, %entry], [%r.next, %row.latch]",
            "  %r.c = icmp slt i64 %r, %rhi",
            "  br i1 %r.c, label %row.body, label %done",
            "row.body:",
            f"  %ro = udiv i64 %r, {inner}",
            f"  %ri = urem i64 %r, {inner}",
            f"  %rb = mul i64 %ro, {n * inner}",
            "  %base = add i64 %rb, %ri",
            f"  %obr = mul i64 %ro, {s.k * inner}",
            "  %obase = add i64 %obr, %ri",
            "  br label %ld.head",
        ]
        # 1. primary keys and positions
        L += [
            "ld.head:",
            "  %j = phi i64 [0, %row.body], [%j.next, %ld.body]",
            f"  %j.c = icmp slt i64 %j, {n}",
            "  br i1 %j.c, label %ld.body, label %ins.pre",
            "ld.body:",
            f"  %jo0 = mul i64 %j, {inner}",
            "  %jo = add i64 %base, %jo0",
        ]
        k0 = self.key(L, 0, "%jo")
        L += [
            "  %ldk = getelementptr inbounds i64, ptr %KA, i64 %j",
            f"  store i64 {k0}, ptr %ldk",
            "  %ldi = getelementptr inbounds i64, ptr %IA, i64 %j",
            "  store i64 %j, ptr %ldi",
            "  %j.next = add i64 %j, 1",
            "  br label %ld.head",
        ]
        # 2a. insertion sort of runs [lo, min(lo + RUN, n))
        L += [
            "ins.pre:",
            "  br label %ins.head",
            "ins.head:",
            "  %clo = phi i64 [0, %ins.pre], [%clo.next, %it.head]",
            f"  %clo.c = icmp slt i64 %clo, {n}",
            "  br i1 %clo.c, label %ins.body, label %pass.pre",
            "ins.body:",
            f"  %chi0 = add i64 %clo, {RUN}",
            f"  %chi.c = icmp slt i64 %chi0, {n}",
            f"  %chi = select i1 %chi.c, i64 %chi0, i64 {n}",
            "  %t0 = add i64 %clo, 1",
            "  br label %it.head",
            "it.head:",
            "  %t = phi i64 [%t0, %ins.body], [%t.next, %it.latch]",
            "  %t.c = icmp slt i64 %t, %chi",
            "  %clo.next = add i64 %clo, " + str(RUN),
            "  br i1 %t.c, label %it.body, label %ins.head",
            "it.body:",
            "  %ptk = getelementptr inbounds i64, ptr %KA, i64 %t",
            "  %kt = load i64, ptr %ptk",
            "  %pti = getelementptr inbounds i64, ptr %IA, i64 %t",
            "  %it = load i64, ptr %pti",
            "  br label %sh.head",
            "sh.head:",
            "  %s = phi i64 [%t, %it.body], [%sp, %sh.move]",
            "  %s.c = icmp sgt i64 %s, %clo",
            "  br i1 %s.c, label %sh.cmp, label %it.latch",
            "sh.cmp:",
            "  %sp = sub i64 %s, 1",
            "  %pspk = getelementptr inbounds i64, ptr %KA, i64 %sp",
            "  %kp = load i64, ptr %pspk",
            "  %pspi = getelementptr inbounds i64, ptr %IA, i64 %sp",
            "  %ip = load i64, ptr %pspi",
        ]
        lt = self.less(L, "%kt", "%it", "%kp", "%ip")
        L += [
            f"  br i1 {lt}, label %sh.move, label %it.latch",
            "sh.move:",
            "  %psk = getelementptr inbounds i64, ptr %KA, i64 %s",
            "  store i64 %kp, ptr %psk",
            "  %psi = getelementptr inbounds i64, ptr %IA, i64 %s",
            "  store i64 %ip, ptr %psi",
            "  br label %sh.head",
            "it.latch:",
            "  %pok = getelementptr inbounds i64, ptr %KA, i64 %s",
            "  store i64 %kt, ptr %pok",
            "  %poi = getelementptr inbounds i64, ptr %IA, i64 %s",
            "  store i64 %it, ptr %poi",
            "  %t.next = add i64 %t, 1",
            "  br label %it.head",
        ]
        # 2b. bottom-up merges of runs of width w, from (sK, sI) into (dK, dI)
        L += [
            "pass.pre:",
            "  br label %pass.head",
            "pass.head:",
            f"  %w = phi i64 [{RUN}, %pass.pre], [%ww, %mo.head]",
            "  %sK = phi ptr [%KA, %pass.pre], [%dK, %mo.head]",
            "  %sI = phi ptr [%IA, %pass.pre], [%dI, %mo.head]",
            "  %dK = phi ptr [%KB, %pass.pre], [%sK, %mo.head]",
            "  %dI = phi ptr [%IB, %pass.pre], [%sI, %mo.head]",
            f"  %w.c = icmp slt i64 %w, {n}",
            "  %ww = shl i64 %w, 1",
            "  br i1 %w.c, label %mo.pre, label %g.pre",
            "mo.pre:",
            "  br label %mo.head",
            "mo.head:",
            "  %lo = phi i64 [0, %mo.pre], [%lo.next, %m.head]",
            f"  %lo.c = icmp slt i64 %lo, {n}",
            "  br i1 %lo.c, label %mo.body, label %pass.head",
            "mo.body:",
            "  %m1 = add i64 %lo, %w",
            f"  %m1.c = icmp slt i64 %m1, {n}",
            f"  %mid = select i1 %m1.c, i64 %m1, i64 {n}",
            "  %h1 = add i64 %lo, %ww",
            f"  %h1.c = icmp slt i64 %h1, {n}",
            f"  %hi = select i1 %h1.c, i64 %h1, i64 {n}",
            "  br label %m.head",
            "m.head:",
            "  %mt = phi i64 [%lo, %mo.body], [%mt.next, %m.latch]",
            "  %ma = phi i64 [%lo, %mo.body], [%ma.next, %m.latch]",
            "  %mb = phi i64 [%mid, %mo.body], [%mb.next, %m.latch]",
            "  %mt.c = icmp slt i64 %mt, %hi",
            "  %lo.next = add i64 %lo, %ww",
            "  br i1 %mt.c, label %m.body, label %mo.head",
            "m.body:",
            "  %a.done = icmp sge i64 %ma, %mid",
            "  br i1 %a.done, label %m.takeb, label %m.chk",
            "m.chk:",
            "  %b.done = icmp sge i64 %mb, %hi",
            "  br i1 %b.done, label %m.takea, label %m.cmp",
            "m.cmp:",
            "  %pka = getelementptr inbounds i64, ptr %sK, i64 %ma",
            "  %ka = load i64, ptr %pka",
            "  %pia = getelementptr inbounds i64, ptr %sI, i64 %ma",
            "  %ia = load i64, ptr %pia",
            "  %pkb = getelementptr inbounds i64, ptr %sK, i64 %mb",
            "  %kb = load i64, ptr %pkb",
            "  %pib = getelementptr inbounds i64, ptr %sI, i64 %mb",
            "  %ib = load i64, ptr %pib",
        ]
        lt = self.less(L, "%kb", "%ib", "%ka", "%ia")
        L += [f"  br i1 {lt}, label %m.takeb, label %m.takea"]
        for side, idx in (("a", "%ma"), ("b", "%mb")):
            L += [
                f"m.take{side}:",
                f"  %qk{side} = getelementptr inbounds i64, ptr %sK, i64 {idx}",
                f"  %vk{side} = load i64, ptr %qk{side}",
                f"  %qi{side} = getelementptr inbounds i64, ptr %sI, i64 {idx}",
                f"  %vi{side} = load i64, ptr %qi{side}",
                f"  %dk{side} = getelementptr inbounds i64, ptr %dK, i64 %mt",
                f"  store i64 %vk{side}, ptr %dk{side}",
                f"  %di{side} = getelementptr inbounds i64, ptr %dI, i64 %mt",
                f"  store i64 %vi{side}, ptr %di{side}",
                f"  %{side}1 = add i64 {idx}, 1",
                "  br label %m.latch",
            ]
        L += [
            "m.latch:",
            "  %ma.next = phi i64 [%a1, %m.takea], [%ma, %m.takeb]",
            "  %mb.next = phi i64 [%mb, %m.takea], [%b1, %m.takeb]",
            "  %mt.next = add i64 %mt, 1",
            "  br label %m.head",
        ]
        # 3. gather every operand (and the positions, for top_k) through the sorted positions
        L += [
            "g.pre:",
            "  br label %g.head",
            "g.head:",
            "  %g = phi i64 [0, %g.pre], [%g.next, %g.body]",
            f"  %g.c = icmp slt i64 %g, {s.k}",
            "  br i1 %g.c, label %g.body, label %row.latch",
            "g.body:",
            "  %pg = getelementptr inbounds i64, ptr %sI, i64 %g",
            "  %gp = load i64, ptr %pg",
            f"  %gs0 = mul i64 %gp, {inner}",
            "  %gs = add i64 %base, %gs0",
            f"  %gd0 = mul i64 %g, {inner}",
            "  %gd = add i64 %obase, %gd0",
        ]
        for m, b in enumerate(s.inputs):
            mt = self.memory_type(b.dtype)
            L += [
                f"  %gq{m} = getelementptr inbounds {mt}, ptr %in{m}, i64 %gs",
                f"  %gv{m} = load {mt}, ptr %gq{m}",
                f"  %gr{m} = getelementptr inbounds {mt}, ptr %out{m}, i64 %gd",
                f"  store {mt} %gv{m}, ptr %gr{m}",
            ]
        if s.index_output is not None:
            L += [
                "  %gpi = trunc i64 %gp to i32",
                "  %gri = getelementptr inbounds i32, ptr %outidx, i64 %gd",
                "  store i32 %gpi, ptr %gri",
            ]
        L += [
            "  %g.next = add i64 %g, 1",
            "  br label %g.head",
            "row.latch:",
            "  %r.next = add i64 %r, 1",
            "  br label %row.head",
            "done:",
            "  ret void",
        ]
        return (
            self.less_function()
            + f"define internal void @{s.name}({', '.join(params)}) nounwind optsize {{\n"
            + "\n".join(L)
            + "\n}\n"
        )
