"""The LLVM IR of the FFT library's transforms along an axis that is not the last: columns.

``fg_fft_cols_<t>(plan, x, out, outer, inner, pool, nthreads)`` transforms the middle axis of
``[outer, n, inner]`` arrays of interleaved complex numbers (``x`` is ``out`` or disjoint from
it): ``fft(x, axis=-2)`` of a 3-D array without moving the axis to the end and back.

``VEC`` neighbouring columns are what a block of rows becomes after its transpose
(``fft_batch_ir.py``): element ``e`` of columns ``i0 .. i0 + VEC - 1`` is one contiguous
vector of ``VEC`` complex numbers, so moving it into the transposed block is one load and two
shuffles (``@fgfft.ctin``; ``@fgfft.ctout`` back), and the block's passes are the batched
path's (``@fgfft.bpasses``). Columns past the last whole group, Bluestein plans and lengths
above ``COL_BLOCK_MAX`` go one column at a time: gathered into a contiguous row, transformed by
the row driver in place, scattered back. The work is cut in units of one group of ``VEC``
columns of one ``outer`` index, split over the thread pool like rows (``PARALLEL_POINTS``), so
that threads keep the one-thread result bit for bit.
"""

from __future__ import annotations

from fungrad.lowering.cpu.fft_batch_ir import _vbytes
from fungrad.lowering.cpu.fft_ir import PARALLEL_POINTS, VEC, _Fn, _mask

__all__ = ["COL_BLOCK_MAX", "cols_functions", "cols_symbol"]

COL_BLOCK_MAX = 1 << 14
"""Columns at most this long go in blocks of ``VEC`` (scratch ``2 n VEC WIDE`` complex)."""
WIDE = 4
"""Blocks moved together: each row of the array is visited once per ``WIDE VEC`` columns."""


def cols_symbol(tag: str) -> str:
    """The exported function for ``tag`` (``f32``/``f64``)."""
    return f"fg_fft_cols_{tag}"


def _ctrans_fn(ty: str, into: bool, w: int) -> str:
    """``@fgfft.ctin<w>(src, dst, n, inner)``: element ``e`` of ``w VEC`` neighbouring columns
    (at ``src + e inner``) into ``w`` transposed blocks, ``n VEC`` complex numbers apart from
    ``dst`` on; ``@fgfft.ctout<w>``: back."""
    v = VEC
    fn = _Fn(ty, v)
    vt, wide = fn.ty, f"<{2 * v} x {ty}>"
    esz = 4 if ty == "float" else 8
    fn.emit(
        "entry:",
        "  br label %h",
        "h:",
        "  %e = phi i64 [0, %entry], [%e.n, %b]",
        "  %c = icmp ult i64 %e, %n",
        "  br i1 %c, label %b, label %exit",
        "b:",
        "  %off = mul i64 %e, %inner",
    )
    rows, blk = ("%src", "%dst") if into else ("%dst", "%src")
    al = _vbytes(ty)
    for k in range(w):
        col = fn.op(f"add i64 %off, {k * v}")
        rp = fn.op(f"getelementptr inbounds [2 x {ty}], ptr {rows}, i64 {col}")
        el = fn.op(f"add i64 %e, {fn.op(f'mul i64 %n, {k}')}") if k else "%e"
        pr = fn.op(f"getelementptr inbounds [2 x {vt}], ptr {blk}, i64 {el}, i64 0")
        pi = fn.op(f"getelementptr inbounds [2 x {vt}], ptr {blk}, i64 {el}, i64 1")
        if into:
            x = fn.op(f"load {wide}, ptr {rp}, align {esz}")
            even, odd = _mask(range(0, 2 * v, 2)), _mask(range(1, 2 * v, 2))
            re = fn.op(f"shufflevector {wide} {x}, {wide} poison, <{v} x i32> {even}")
            im = fn.op(f"shufflevector {wide} {x}, {wide} poison, <{v} x i32> {odd}")
            fn.emit(
                f"  store {vt} {re}, ptr {pr}, align {al}",
                f"  store {vt} {im}, ptr {pi}, align {al}",
            )
        else:
            re = fn.op(f"load {vt}, ptr {pr}, align {al}")
            im = fn.op(f"load {vt}, ptr {pi}, align {al}")
            inter = _mask(i // 2 + (i % 2) * v for i in range(2 * v))
            x = fn.op(f"shufflevector {vt} {re}, {vt} {im}, <{2 * v} x i32> {inter}")
            fn.emit(f"  store {wide} {x}, ptr {rp}, align {esz}")
    fn.emit("  %e.n = add i64 %e, 1", "  br label %h, !llvm.loop !0", "exit:", "  ret void")
    head = (
        f"define internal void @fgfft.{'ctin' if into else 'ctout'}{w}(ptr noalias %src, "
        "ptr noalias %dst, i64 %n, i64 %inner) nounwind noinline {"
    )
    return "\n".join([head, *fn.lines, "}", ""])


def _strided_copy(tag: str, src: str, dst: str, src_stride: str, dst_stride: str, ty: str):
    """Lines copying ``%n`` complex numbers from ``src`` to ``dst`` with the given strides (in
    complex numbers)."""
    return [
        f"  br label %{tag}.h",
        f"{tag}.h:",
        f"  %{tag}.e = phi i64 [0, %{tag}.pre], [%{tag}.en, %{tag}.b]",
        f"  %{tag}.c = icmp ult i64 %{tag}.e, %n",
        f"  br i1 %{tag}.c, label %{tag}.b, label %{tag}.x",
        f"{tag}.b:",
        f"  %{tag}.si = mul i64 %{tag}.e, {src_stride}",
        f"  %{tag}.di = mul i64 %{tag}.e, {dst_stride}",
        f"  %{tag}.sp = getelementptr inbounds [2 x {ty}], ptr {src}, i64 %{tag}.si",
        f"  %{tag}.dp = getelementptr inbounds [2 x {ty}], ptr {dst}, i64 %{tag}.di",
        f"  %{tag}.v = load <2 x {ty}>, ptr %{tag}.sp, align {4 if ty == 'float' else 8}",
        f"  store <2 x {ty}> %{tag}.v, ptr %{tag}.dp, align {4 if ty == 'float' else 8}",
        f"  %{tag}.en = add i64 %{tag}.e, 1",
        f"  br label %{tag}.h, !llvm.loop !0",
        f"{tag}.x:",
    ]


def _cunits_fn(ty: str, rows: str) -> str:
    """``@fgfft.cunits(ctx, a, b)``: units ``a`` to ``b`` (ctx: plan, x, out, outer, inner,
    groups), each ``VEC`` columns of one ``outer`` index, with scratch of its own."""
    esz = 4 if ty == "float" else 8
    v = VEC
    lines = [
        "define internal void @fgfft.cunits(ptr %ctx, i64 %a, i64 %b) nounwind {",
        "entry:",
    ]
    for i, nm in enumerate(("plan", "x", "out")):
        lines += [
            f"  %c{i} = getelementptr inbounds ptr, ptr %ctx, i64 {i}",
            f"  %{nm} = load ptr, ptr %c{i}",
        ]
    for i, nm in ((4, "inner"), (5, "groups")):
        lines += [
            f"  %c{i} = getelementptr inbounds ptr, ptr %ctx, i64 {i}",
            f"  %{nm} = load i64, ptr %c{i}",
        ]
    lines += [
        "  %n = load i64, ptr %plan",
        "  %kp = getelementptr inbounds i64, ptr %plan, i64 1",
        "  %kind = load i64, ptr %kp",
        "  %npp = getelementptr inbounds i64, ptr %plan, i64 2",
        "  %np = load i64, ptr %npp",
        "  %stk = icmp eq i64 %kind, 0",
        "  %hasp = icmp sgt i64 %np, 0",
        f"  %short = icmp sle i64 %n, {COL_BLOCK_MAX}",
        "  %blk0 = and i1 %stk, %hasp",
        "  %blk = and i1 %blk0, %short",
        # scratch: two blocks (when blocks run) and one column
        f"  %bsz = mul i64 %n, {2 * v * WIDE}",
        "  %bs = select i1 %blk, i64 %bsz, i64 0",
        "  %sz0 = add i64 %bs, %n",
        f"  %sz1 = mul i64 %sz0, {2 * esz}",
        "  %sz2 = add i64 %sz1, 63",
        "  %sz = and i64 %sz2, -64",
        "  %scr = call ptr @aligned_alloc(i64 64, i64 %sz)",
        f"  %bo = mul i64 %n, {2 * v * WIDE}",
        f"  %bB = getelementptr inbounds {ty}, ptr %scr, i64 %bo",
        "  %npo = and i64 %np, 1",
        "  %npodd = icmp ne i64 %npo, 0",
        "  %res = select i1 %npodd, ptr %bB, ptr %scr",
        "  %co = mul i64 %bs, 2",
        f"  %col = getelementptr inbounds {ty}, ptr %scr, i64 %co",
        "  %slab = mul i64 %n, %inner",
        "  br label %uh",
        "uh:",
        "  %u = phi i64 [%a, %entry], [%u.n, %un]",
        "  %um = icmp slt i64 %u, %b",
        "  br i1 %um, label %ub, label %done",
        "ub:",
        "  %o = udiv i64 %u, %groups",
        "  %g = urem i64 %u, %groups",
        f"  %i0 = mul i64 %g, {v * WIDE}",
        "  %ob = mul i64 %o, %slab",
        "  %base = add i64 %ob, %i0",
        f"  %xb = getelementptr inbounds [2 x {ty}], ptr %x, i64 %base",
        f"  %yb = getelementptr inbounds [2 x {ty}], ptr %out, i64 %base",
        f"  %i1 = add i64 %i0, {v * WIDE}",
        "  %full = icmp sle i64 %i1, %inner",
        "  %vec = and i1 %full, %blk",
        "  br i1 %vec, label %wide, label %part",
        # WIDE blocks: each row's WIDE VEC columns read and written at once
        "wide:",
        f"  call void @fgfft.ctin{WIDE}(ptr %xb, ptr %scr, i64 %n, i64 %inner)",
        "  br label %wh",
        "wh:",
        "  %wk = phi i64 [0, %wide], [%wk.n, %wb]",
        f"  %wm = icmp slt i64 %wk, {WIDE}",
        "  br i1 %wm, label %wb, label %wx",
        "wb:",
        f"  %wo = mul i64 %wk, {2 * v}",
        "  %wo2 = mul i64 %wo, %n",
        f"  %wa = getelementptr inbounds {ty}, ptr %scr, i64 %wo2",
        f"  %wbb = getelementptr inbounds {ty}, ptr %bB, i64 %wo2",
        "  %wr = call ptr @fgfft.bpasses(ptr %plan, ptr %wa, ptr %wbb)",
        "  %wk.n = add i64 %wk, 1",
        "  br label %wh",
        "wx:",
        f"  call void @fgfft.ctout{WIDE}(ptr %res, ptr %yb, i64 %n, i64 %inner)",
        "  br label %un",
        # the last columns: whole groups of VEC as single blocks, the rest one by one
        "part:",
        "  %cend = call i64 @llvm.smin.i64(i64 %i1, i64 %inner)",
        "  %cnum = sub i64 %cend, %i0",
        f"  %cgr = and i64 %cnum, {-v}",
        "  %cgv = select i1 %blk, i64 %cgr, i64 0",
        "  br label %bh",
        "bh:",
        "  %bc = phi i64 [0, %part], [%bc.n, %bb]",
        "  %bm = icmp slt i64 %bc, %cgv",
        "  br i1 %bm, label %bb, label %single",
        "bb:",
        f"  %bxb = getelementptr inbounds [2 x {ty}], ptr %xb, i64 %bc",
        f"  %byb = getelementptr inbounds [2 x {ty}], ptr %yb, i64 %bc",
        "  call void @fgfft.ctin1(ptr %bxb, ptr %scr, i64 %n, i64 %inner)",
        "  %br = call ptr @fgfft.bpasses(ptr %plan, ptr %scr, ptr %bB)",
        "  call void @fgfft.ctout1(ptr %br, ptr %byb, i64 %n, i64 %inner)",
        f"  %bc.n = add i64 %bc, {v}",
        "  br label %bh",
        # one column at a time: gather, transform in place, scatter
        "single:",
        "  br label %ch",
        "ch:",
        "  %cc = phi i64 [%cgv, %single], [%cc.n, %gs.x]",
        "  %cm = icmp slt i64 %cc, %cnum",
        "  br i1 %cm, label %cb, label %un",
        "cb:",
        f"  %xc = getelementptr inbounds [2 x {ty}], ptr %xb, i64 %cc",
        f"  %yc = getelementptr inbounds [2 x {ty}], ptr %yb, i64 %cc",
        "  br label %gg.pre",
        "gg.pre:",
        *_strided_copy("gg", "%xc", "%col", "%inner", "1", ty),
        f"  call void @{rows}(ptr %plan, ptr %col, ptr %col, i64 1, ptr null, i64 1)",
        "  br label %gs.pre",
        "gs.pre:",
        *_strided_copy("gs", "%col", "%yc", "1", "%inner", ty),
        "  %cc.n = add i64 %cc, 1",
        "  br label %ch",
        "un:",
        "  %u.n = add i64 %u, 1",
        "  br label %uh",
        "done:",
        "  call void @free(ptr %scr)",
        "  ret void",
        "}",
        "",
    ]
    return "\n".join(lines)


def _cols_driver_fn(ty: str, name: str) -> str:
    """The exported ``@fg_fft_cols_<t>(plan, x, out, outer, inner, pool, nthreads)``."""
    v = VEC
    return "\n".join(
        [
            f"define void @{name}(ptr %plan, ptr %x, ptr %out, i64 %outer, i64 %inner, "
            "ptr %pool, i64 %nthreads) nounwind {",
            "entry:",
            "  %ctx = alloca ptr, i64 6",
            "  %z0 = icmp sle i64 %outer, 0",
            "  %z1 = icmp sle i64 %inner, 0",
            "  %z = or i1 %z0, %z1",
            "  br i1 %z, label %done, label %go",
            "go:",
            f"  %g0 = add i64 %inner, {v * WIDE - 1}",
            f"  %groups = udiv i64 %g0, {v * WIDE}",
            "  %units = mul i64 %outer, %groups",
            "  store ptr %plan, ptr %ctx",
            "  %c1 = getelementptr inbounds ptr, ptr %ctx, i64 1",
            "  store ptr %x, ptr %c1",
            "  %c2 = getelementptr inbounds ptr, ptr %ctx, i64 2",
            "  store ptr %out, ptr %c2",
            "  %c3 = getelementptr inbounds ptr, ptr %ctx, i64 3",
            "  store i64 %outer, ptr %c3",
            "  %c4 = getelementptr inbounds ptr, ptr %ctx, i64 4",
            "  store i64 %inner, ptr %c4",
            "  %c5 = getelementptr inbounds ptr, ptr %ctx, i64 5",
            "  store i64 %groups, ptr %c5",
            "  %n = load i64, ptr %plan",
            "  %pts0 = mul i64 %outer, %inner",
            "  %pts = mul i64 %pts0, %n",
            f"  %big = icmp sge i64 %pts, {PARALLEL_POINTS}",
            "  %hasp = icmp ne ptr %pool, null",
            "  %many = icmp sgt i64 %nthreads, 1",
            "  %two = icmp sgt i64 %units, 1",
            "  %p0 = and i1 %hasp, %many",
            "  %p1 = and i1 %p0, %two",
            "  %par = and i1 %p1, %big",
            "  br i1 %par, label %threads, label %serial",
            "threads:",
            "  call void %pool(ptr @fgfft.cunits, ptr %ctx, i64 %units, i64 %nthreads)",
            "  br label %done",
            "serial:",
            "  call void @fgfft.cunits(ptr %ctx, i64 0, i64 %units)",
            "  br label %done",
            "done:",
            "  ret void",
            "}",
            "",
        ]
    )


def cols_functions(ty: str, rows: str, tag: str) -> list[str]:
    """The functions of this path for the library module of ``ty``; ``rows`` is the row
    driver's name (single columns run through it), ``tag`` ``f32``/``f64``."""
    return [
        *(_ctrans_fn(ty, into, w) for into in (True, False) for w in sorted({1, WIDE})),
        _cunits_fn(ty, rows),
        _cols_driver_fn(ty, cols_symbol(tag)),
    ]
