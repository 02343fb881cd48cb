"""The LLVM IR of the FFT library's path for batches of short rows: ``VEC`` rows at a time.

A short transform gives the passes little to vectorise (for n = 8 or 16 every pass has
``s m`` below ``VEC``, so the per-row code is scalar), while a batch has as many independent
rows as one likes. So the driver (``fft_ir._driver_fn``) hands each block of ``VEC`` rows of a
Stockham plan with ``n < BATCH_BELOW`` to ``@fgfft.brun``, which transposes the block into
scratch (element ``e`` of the ``VEC`` rows as one vector of real parts and one of imaginary
parts: ``[n][2][VEC]``), runs every pass on whole vectors (``@fgfft.bpass<p>``: the scalar
algorithm with each complex number replaced by ``VEC`` of them, so no shuffle at all, and the
same twiddle for every lane) and transposes the result back into the rows. The rows past the
last whole block take the per-row path. Each lane computes the butterflies and twiddles of the
per-row code (LLVM may fuse a multiply and add differently: equal within rounding).

The transposes move ``VEC`` elements of the ``VEC`` rows at once: one interleaved vector load
per row, three rounds of two-source shuffles, a vector store per real and imaginary part (and
the way back); the elements past the last whole group go one by one.
"""

from __future__ import annotations

from fungrad.lowering.cpu.fft_ir import (
    HEADER,
    PASS_FIELDS,
    RADICES,
    VEC,
    _butterfly,
    _field,
    _Fn,
    vector_pass_head,
)

assert VEC == 8  # the transposes' three rounds of shuffles

__all__ = ["BATCH_BELOW", "BATCH_SCALAR_BELOW", "batch_functions"]

BATCH_BELOW = 512
"""Stockham plans with ``n`` below this run blocks of ``VEC`` rows together (scratch: two
blocks, ``2 n VEC`` complex numbers). Measured per row, rows in cache, one core (row by row ->
blocks): complex64 n = 8 27 -> 5.5 ns, 64 71 -> 47 ns, 100 353 -> 85 ns, 256 289 -> 219 ns,
512 614 -> 621 ns; complex128 n = 16 42 -> 16 ns, 128 240 -> 180 ns."""
BATCH_SCALAR_BELOW = 4096
"""... and those below this whose row-by-row passes are not all vectorised (``fft._blocked``)."""


def _vbytes(ty: str) -> int:
    """The alignment of a block's vectors: blocks start 64-byte aligned in the scratch, and
    every vector lies at a multiple of its own size."""
    return VEC * (4 if ty == "float" else 8)


def _bpass_fn(p: int, ty: str) -> str:
    """``@fgfft.bpass<p>(x, y, tw, s, m, sgn)``: one Stockham pass of radix ``p`` over
    transposed blocks (each element ``VEC`` lanes of real parts, then of imaginary parts)."""
    v = VEC
    fn = _Fn(ty, v)
    vt = fn.ty
    el = f"[2 x {vt}]"
    w, base_in, base_out = vector_pass_head(fn, ty, p, "%m", "%s")

    def vload(idx):
        pr = fn.op(f"getelementptr inbounds {el}, ptr %x, i64 {idx}, i64 0")
        pi = fn.op(f"getelementptr inbounds {el}, ptr %x, i64 {idx}, i64 1")
        return fn.op(f"load {vt}, ptr {pr}, align {_vbytes(ty)}"), fn.op(
            f"load {vt}, ptr {pi}, align {_vbytes(ty)}"
        )

    a = []
    for r in range(p):
        idx = base_in if r == 0 else fn.op(f"add i64 {base_in}, {fn.op(f'mul i64 %sm, {r}')}")
        a.append(vload(idx))
    y = _butterfly(fn, a, "%sgv")
    for k in range(p):
        z = y[k] if k == 0 else fn.mul(y[k], w[k])
        idx = base_out if k == 0 else fn.op(f"add i64 {base_out}, {fn.op(f'mul i64 %s, {k}')}")
        pr = fn.op(f"getelementptr inbounds {el}, ptr %y, i64 {idx}, i64 0")
        pi = fn.op(f"getelementptr inbounds {el}, ptr %y, i64 {idx}, i64 1")
        fn.emit(f"  store {vt} {z[0]}, ptr {pr}, align {_vbytes(ty)}")
        fn.emit(f"  store {vt} {z[1]}, ptr {pi}, align {_vbytes(ty)}")
    fn.emit(
        "  %q.n = add i64 %q, 1",
        "  br label %ih, !llvm.loop !0",
        "ol:",
        "  %j.n = add i64 %j, 1",
        "  br label %oh, !llvm.loop !0",
        "exit:",
        "  ret void",
    )
    head = (
        f"define internal void @fgfft.bpass{p}(ptr noalias %x, ptr noalias %y, "
        f"ptr noalias %tw, i64 %s, i64 %m, {ty} %sgn) nounwind noinline {{"
    )
    return "\n".join([head, *fn.lines, "}", ""])


def _shuffle(fn: _Fn, a: tuple, b: tuple, want: list) -> tuple:
    """One ``shufflevector`` of the labelled vectors ``a`` and ``b`` (each ``(value, labels)``,
    one label per lane, same width) whose lanes carry the labels ``want``."""
    ty = fn.scalar
    where = {lab: i for i, lab in enumerate(a[1])}
    for i, lab in enumerate(b[1]):
        where.setdefault(lab, len(a[1]) + i)
    w = len(a[1])
    mask = _mask_text(where[lab] for lab in want)
    v = fn.op(f"shufflevector <{w} x {ty}> {a[0]}, <{w} x {ty}> {b[0]}, <{len(want)} x i32> {mask}")
    return v, list(want)


def _mask_text(idx) -> str:
    return "<" + ", ".join(f"i32 {i}" for i in idx) + ">"


def _transpose_in(fn: _Fn, e0: str) -> None:
    """Lines moving elements ``e0 .. e0 + VEC - 1`` of the ``VEC`` rows at ``%src`` (row
    length ``%n``) into the block at ``%dst``: one interleaved vector load per row, then three
    rounds of two-source shuffles (pairs of rows, of pairs, of quads; labels (row, element,
    part)) and the real and imaginary vectors of each element."""
    v, ty = VEC, fn.scalar
    wide = f"<{2 * v} x {ty}>"
    rows = []
    for r in range(v):
        idx = fn.op(f"add i64 {e0}, {fn.op(f'mul i64 %n, {r}')}")
        ptr = fn.op(f"getelementptr inbounds [2 x {ty}], ptr %src, i64 {idx}")
        val = fn.op(f"load {wide}, ptr {ptr}, align {4 if ty == 'float' else 8}")
        rows.append((val, [(r, e, c) for e in range(v) for c in (0, 1)]))
    s1 = {
        (i, h): _shuffle(
            fn,
            rows[2 * i],
            rows[2 * i + 1],
            [
                (r, e, c)
                for e in range(4 * h, 4 * h + 4)
                for r in (2 * i, 2 * i + 1)
                for c in (0, 1)
            ],
        )
        for i in range(4)
        for h in range(2)
    }
    s2 = {
        (g, h, q): _shuffle(
            fn,
            s1[2 * g, h],
            s1[2 * g + 1, h],
            [
                (r, e, c)
                for e in (4 * h + 2 * q, 4 * h + 2 * q + 1)
                for r in range(4 * g, 4 * g + 4)
                for c in (0, 1)
            ],
        )
        for g in range(2)
        for h in range(2)
        for q in range(2)
    }
    for e in range(v):
        h, q = e // 4, (e % 4) // 2
        src = (s2[0, h, q], s2[1, h, q])
        re = _shuffle(fn, *src, [(r, e, 0) for r in range(v)])[0]
        im = _shuffle(fn, *src, [(r, e, 1) for r in range(v)])[0]
        idx = fn.op(f"add i64 {e0}, {e}")
        for part, val in ((0, re), (1, im)):
            ptr = fn.op(f"getelementptr inbounds [2 x {fn.ty}], ptr %dst, i64 {idx}, i64 {part}")
            fn.emit(f"  store {fn.ty} {val}, ptr {ptr}, align {_vbytes(ty)}")


def _transpose_out(fn: _Fn, e0: str) -> None:
    """The inverse of :func:`_transpose_in`: elements ``e0 ..`` of the block at ``%src`` back
    into the ``VEC`` rows at ``%dst``."""
    v, ty = VEC, fn.scalar
    z = []
    for e in range(v):
        idx = fn.op(f"add i64 {e0}, {e}")
        parts = []
        for part in (0, 1):
            ptr = fn.op(f"getelementptr inbounds [2 x {fn.ty}], ptr %src, i64 {idx}, i64 {part}")
            val = fn.op(f"load {fn.ty}, ptr {ptr}, align {_vbytes(ty)}")
            parts.append((val, [(r, e, part) for r in range(v)]))
        z.append(_shuffle(fn, *parts, [(r, e, c) for r in range(v) for c in (0, 1)]))
    b1 = {
        (i, rh): _shuffle(
            fn,
            z[2 * i],
            z[2 * i + 1],
            [
                (r, e, c)
                for r in range(4 * rh, 4 * rh + 4)
                for e in (2 * i, 2 * i + 1)
                for c in (0, 1)
            ],
        )
        for i in range(4)
        for rh in range(2)
    }
    b2 = {
        (rh, eq, rp): _shuffle(
            fn,
            b1[2 * eq, rh],
            b1[2 * eq + 1, rh],
            [
                (r, e, c)
                for r in (4 * rh + 2 * rp, 4 * rh + 2 * rp + 1)
                for e in range(4 * eq, 4 * eq + 4)
                for c in (0, 1)
            ],
        )
        for rh in range(2)
        for eq in range(2)
        for rp in range(2)
    }
    wide = f"<{2 * v} x {ty}>"
    for r in range(v):
        rh, rp = r // 4, (r % 4) // 2
        row = _shuffle(
            fn, b2[rh, 0, rp], b2[rh, 1, rp], [(r, e, c) for e in range(v) for c in (0, 1)]
        )
        idx = fn.op(f"add i64 {e0}, {fn.op(f'mul i64 %n, {r}')}")
        ptr = fn.op(f"getelementptr inbounds [2 x {ty}], ptr %dst, i64 {idx}")
        fn.emit(f"  store {wide} {row[0]}, ptr {ptr}, align {4 if ty == 'float' else 8}")


def _transpose_fn(ty: str, into: bool) -> str:
    """``@fgfft.tin(rows, block, n)``: ``VEC`` rows of ``n`` interleaved complex numbers into
    the transposed block; ``@fgfft.tout(block, rows, n)``: back. Whole groups of ``VEC``
    elements by shuffles (:func:`_transpose_in`, :func:`_transpose_out`: ~0.5 shuffle per
    complex number; element by element, inserting and extracting lanes, took 1-3 ns per
    complex number, most of the time of a batch of rows of 32 or 64), the rest one by one."""
    v = VEC
    fn = _Fn(ty, v)
    vt = fn.ty
    el = f"[2 x {vt}]"
    fn.emit(
        "entry:",
        f"  %ng = and i64 %n, {-v}",
        "  br label %gh",
        "gh:",
        "  %g = phi i64 [0, %entry], [%g.n, %gb]",
        "  %gc = icmp ult i64 %g, %ng",
        "  br i1 %gc, label %gb, label %h0",
        "gb:",
    )
    (_transpose_in if into else _transpose_out)(fn, "%g")
    fn.emit(
        f"  %g.n = add i64 %g, {v}",
        "  br label %gh, !llvm.loop !0",
        "h0:",
        "  br label %h",
        "h:",
        "  %e = phi i64 [%ng, %h0], [%e.n, %b]",
        "  %c = icmp ult i64 %e, %n",
        "  br i1 %c, label %b, label %exit",
        "b:",
    )
    blk = "%dst" if into else "%src"
    rows = "%src" if into else "%dst"
    pr = fn.op(f"getelementptr inbounds {el}, ptr {blk}, i64 %e, i64 0")
    pi = fn.op(f"getelementptr inbounds {el}, ptr {blk}, i64 %e, i64 1")
    al = _vbytes(ty)
    if into:
        re, im = "poison", "poison"
        for lane in range(v):
            idx = fn.op(f"add i64 %e, {fn.op(f'mul i64 %n, {lane}')}")
            r, i = fn.load(rows, idx)
            re = fn.op(f"insertelement {vt} {re}, {ty} {r}, i64 {lane}")
            im = fn.op(f"insertelement {vt} {im}, {ty} {i}, i64 {lane}")
        fn.emit(
            f"  store {vt} {re}, ptr {pr}, align {al}", f"  store {vt} {im}, ptr {pi}, align {al}"
        )
    else:
        re = fn.op(f"load {vt}, ptr {pr}, align {al}")
        im = fn.op(f"load {vt}, ptr {pi}, align {al}")
        for lane in range(v):
            idx = fn.op(f"add i64 %e, {fn.op(f'mul i64 %n, {lane}')}")
            r = fn.op(f"extractelement {vt} {re}, i64 {lane}")
            i = fn.op(f"extractelement {vt} {im}, i64 {lane}")
            fn.store(rows, idx, (r, i))
    fn.emit(
        "  %e.n = add i64 %e, 1",
        "  br label %h, !llvm.loop !0",
        "exit:",
        "  ret void",
    )
    name = "tin" if into else "tout"
    head = (
        f"define internal void @fgfft.{name}(ptr noalias %src, ptr noalias %dst, i64 %n) "
        "nounwind noinline {"
    )
    return "\n".join([head, *fn.lines, "}", ""])


def _bpasses_fn(ty: str) -> str:
    """``ptr @fgfft.bpasses(plan, a, b)``: every pass of ``plan`` (with passes) on the
    transposed block in ``a``, alternating with ``b``; returns the block holding the result."""
    fn = _Fn(ty)
    fn.emit("entry:")
    _field(fn, "%plan", 2, "np")
    _field(fn, "%plan", 8, "sg")
    fn.emit(
        f"  %sgn = sitofp i64 %sg to {ty}",
        "  br label %head",
        "head:",
        "  %i = phi i64 [0, %entry], [%i.n, %next]",
        "  %src = phi ptr [%a, %entry], [%dst, %next]",
        "  %dst = phi ptr [%b, %entry], [%src, %next]",
        "  %more = icmp slt i64 %i, %np",
        "  br i1 %more, label %body, label %exit",
        "body:",
        f"  %f0 = mul i64 %i, {PASS_FIELDS}",
        f"  %f = add i64 %f0, {HEADER}",
        "  %st = getelementptr inbounds i64, ptr %plan, i64 %f",
    )
    for i, nm in enumerate(("radix", "s", "m", "twi")):
        _field(fn, "%st", i, nm)
    cases = " ".join(f"i64 {p}, label %r{p}" for p in RADICES)
    fn.emit("  %tw = inttoptr i64 %twi to ptr", f"  switch i64 %radix, label %bad [ {cases} ]")
    for p in RADICES:
        fn.emit(
            f"r{p}:",
            f"  call void @fgfft.bpass{p}(ptr %src, ptr %dst, ptr %tw, i64 %s, i64 %m, {ty} %sgn)",
            "  br label %next",
        )
    fn.emit(
        "bad:",
        "  call void @llvm.trap()",
        "  unreachable",
        "next:",
        "  %i.n = add i64 %i, 1",
        "  br label %head",
        "exit:",
        "  ret ptr %src",
    )
    head = "define internal ptr @fgfft.bpasses(ptr %plan, ptr %a, ptr %b) nounwind {"
    return "\n".join([head, *fn.lines, "}", ""])


def _brun_fn(ty: str) -> str:
    """``@fgfft.brun(plan, x, out, a, b)``: ``VEC`` rows (a plan with passes), through the
    transposed blocks ``a`` and ``b`` (``n VEC`` complex numbers each); ``x`` may be ``out``."""
    return "\n".join(
        [
            "define internal void @fgfft.brun(ptr %plan, ptr %x, ptr %out, ptr %a, ptr %b) "
            "nounwind {",
            "entry:",
            "  %n = load i64, ptr %plan",
            "  call void @fgfft.tin(ptr %x, ptr %a, i64 %n)",
            "  %r = call ptr @fgfft.bpasses(ptr %plan, ptr %a, ptr %b)",
            "  call void @fgfft.tout(ptr %r, ptr %out, i64 %n)",
            "  ret void",
            "}",
            "",
        ]
    )


def batch_functions(ty: str) -> list[str]:
    """The functions of this path, for the library module of ``ty`` (``float``/``double``)."""
    return [
        *(_bpass_fn(p, ty) for p in RADICES),
        _transpose_fn(ty, True),
        _transpose_fn(ty, False),
        _bpasses_fn(ty),
        _brun_fn(ty),
    ]
