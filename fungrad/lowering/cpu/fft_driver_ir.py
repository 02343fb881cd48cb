"""The LLVM IR of the FFT library's transforms and entry point (the passes they run are in
``fft_ir.py``; ``fft.py`` describes the library).

- ``@fgfft.chunk(ctx, a, b)``: the part ``[a, b)`` of one pass described in ``ctx``, the unit
  ``@fg_parallel_for`` splits;
- ``@fgfft.run``: one Stockham transform, pass by pass, each whole or on the pool;
- ``@fgfft.blue``: one transform by Bluestein's algorithm (two Stockham transforms);
- the exported row driver: scratch, blocks of rows (``fft_batch_ir.py``), then single rows;
  ``@fgfft.rows``: a range of rows, the unit a split batch runs per thread.
"""

from __future__ import annotations

from fungrad.lowering.cpu.fft_ir import (
    BLOCK_RADICES,
    BLOCK_S,
    HEADER,
    J_INNER_BELOW,
    PARALLEL_POINTS,
    PASS_FIELDS,
    RADICES,
    SCALAR_Q_RADICES,
    VEC,
    _block_pass_fn,
    _field,
    _Fn,
    _pass_fn,
    _vector_pass_fn,
)

__all__ = ["library_ir"]

_CTX = ("key", "src", "dst", "tw", "s", "m", "sg", "split", "range")
_KEY_VECTOR, _KEY_SCALAR_J, _KEY_SCALAR_Q = 100, 200, 300  # + radix; block passes: 8 p + s


def _chunk_fn(ty: str) -> str:
    """``@fgfft.chunk(ctx, a, b)``: the part ``[a, b)`` of one pass (its context: ``_CTX``):
    for a block pass, vectors ``a`` to ``b``; for a vector pass, values ``a`` to ``b`` of ``j``
    (``split`` 0) or vectors ``a`` to ``b`` of ``q`` (``split`` 1), by offsetting the pointers.
    The scalar passes only run whole (``a`` = 0, ``b`` = their range)."""
    fn = _Fn(ty)
    esz = 4 if ty == "float" else 8
    fn.emit("entry:")
    for i, nm in enumerate(_CTX[:-1]):
        _field(fn, "%ctx", i, nm)
    fn.emit(
        "  %x = inttoptr i64 %src to ptr",
        "  %y = inttoptr i64 %dst to ptr",
        "  %t = inttoptr i64 %tw to ptr",
        f"  %sgn = sitofp i64 %sg to {ty}",
        "  %cnt = sub i64 %b, %a",
    )
    cases = [f"i64 {p * 8 + s_}, label %b{p}.{s_}" for p in BLOCK_RADICES for s_ in BLOCK_S]
    cases += [
        f"i64 {k + p}, label %{v}{p}"
        for k, v in ((100, "v"), (200, "j"), (300, "q"))
        for p in RADICES
        if v != "q" or p in SCALAR_Q_RADICES
    ]
    # (no other key occurs: a trap, never a pass silently skipped)
    fn.emit(f"  switch i64 %key, label %bad [ {' '.join(cases)} ]")
    for p in BLOCK_RADICES:
        for s_ in BLOCK_S:
            # vectors a..b: complex a VEC on, j from a VEC / s, outputs p a VEC on
            fn.emit(
                f"b{p}.{s_}:",
                f"  %b{p}.{s_}.e = mul i64 %a, {2 * VEC * esz}",
                f"  %b{p}.{s_}.x = getelementptr inbounds i8, ptr %x, i64 %b{p}.{s_}.e",
                f"  %b{p}.{s_}.o = mul i64 %b{p}.{s_}.e, {p}",
                f"  %b{p}.{s_}.y = getelementptr inbounds i8, ptr %y, i64 %b{p}.{s_}.o",
                f"  %b{p}.{s_}.w0 = udiv i64 %b{p}.{s_}.e, {s_}",
                f"  %b{p}.{s_}.w = getelementptr inbounds i8, ptr %t, i64 %b{p}.{s_}.w0",
                f"  call void @fgfft.pass{p}b{s_}(ptr %b{p}.{s_}.x, ptr %b{p}.{s_}.y, "
                f"ptr %b{p}.{s_}.w, i64 %s, i64 %m, {ty} %sgn, i64 %cnt)",
                "  br label %exit",
            )
    for p in RADICES:
        c = f"v{p}"
        fn.emit(
            f"{c}:",
            f"  %{c}.byq = icmp ne i64 %split, 0",
            # split over q: offset a VEC complex numbers; over j: s a in, s p a out, a twiddles
            f"  %{c}.qo = mul i64 %a, {VEC}",
            f"  %{c}.xi = mul i64 %s, %a",
            f"  %{c}.yi = mul i64 %{c}.xi, {p}",
            f"  %{c}.xo = select i1 %{c}.byq, i64 %{c}.qo, i64 %{c}.xi",
            f"  %{c}.yo = select i1 %{c}.byq, i64 %{c}.qo, i64 %{c}.yi",
            f"  %{c}.wo = select i1 %{c}.byq, i64 0, i64 %a",
            f"  %{c}.x = getelementptr inbounds [2 x {ty}], ptr %x, i64 %{c}.xo",
            f"  %{c}.y = getelementptr inbounds [2 x {ty}], ptr %y, i64 %{c}.yo",
            f"  %{c}.w = getelementptr inbounds [2 x {ty}], ptr %t, i64 %{c}.wo",
            f"  %{c}.qn = mul i64 %cnt, {VEC}",
            f"  %{c}.jc = select i1 %{c}.byq, i64 %m, i64 %cnt",
            f"  %{c}.qc = select i1 %{c}.byq, i64 %{c}.qn, i64 %s",
            f"  call void @fgfft.pass{p}v(ptr %{c}.x, ptr %{c}.y, ptr %{c}.w, i64 %s, i64 %m, "
            f"{ty} %sgn, i64 %{c}.jc, i64 %{c}.qc)",
            "  br label %exit",
        )
        for v in ("j", "q") if p in SCALAR_Q_RADICES else ("j",):
            fn.emit(
                f"{v}{p}:",
                f"  call void @fgfft.pass{p}{v}(ptr %x, ptr %y, ptr %t, i64 %s, i64 %m, {ty} %sgn)",
                "  br label %exit",
            )
    fn.emit("bad:", "  call void @llvm.trap()", "  unreachable", "exit:", "  ret void")
    head = "define internal void @fgfft.chunk(ptr %ctx, i64 %a, i64 %b) nounwind {"
    return "\n".join([head, *fn.lines, "}", ""])


def _run_fn(ty: str) -> str:
    """``@fgfft.run(plan, x, out, scratch, pool, nthreads)``: one Stockham transform, ``x`` !=
    ``out``. Each pass is described in a context for ``@fgfft.chunk``, which runs it whole or,
    with a pool (``@fg_parallel_for``), ``nthreads > 1``, at least ``PARALLEL_POINTS`` points
    and an explicit-vector pass, split over the threads."""
    fn = _Fn(ty)
    esz = 4 if ty == "float" else 8
    fn.emit("entry:", f"  %ctx = alloca i64, i64 {len(_CTX)}")
    _field(fn, "%plan", 0, "n")
    _field(fn, "%plan", 2, "np")
    _field(fn, "%plan", 8, "sg")
    fn.emit(
        "  %hasp = icmp ne ptr %pool, null",
        "  %many = icmp sgt i64 %nthreads, 1",
        f"  %bign = icmp sge i64 %n, {PARALLEL_POINTS}",
        "  %par0 = and i1 %hasp, %many",
        "  %par = and i1 %par0, %bign",
        "  %none = icmp eq i64 %np, 0",
        "  br i1 %none, label %copy, label %start",
        "copy:",
        f"  %bytes = mul i64 %n, {2 * esz}",
        "  call void @llvm.memmove.p0.p0.i64(ptr %out, ptr %x, i64 %bytes, i1 false)",
        "  ret void",
        "start:",
        "  %odd.b = and i64 %np, 1",
        "  %odd = icmp eq i64 %odd.b, 1",
        "  %first = select i1 %odd, ptr %out, ptr %scr",
        "  br label %head",
        "head:",
        "  %i = phi i64 [0, %start], [%i.n, %next]",
        "  %src = phi ptr [%x, %start], [%dst, %next]",
        "  %dst = phi ptr [%first, %start], [%dst.n, %next]",
        "  %more = icmp slt i64 %i, %np",
        "  br i1 %more, label %body, label %exit",
        "body:",
        f"  %f0 = mul i64 %i, {PASS_FIELDS}",
        f"  %f = add i64 %f0, {HEADER}",
        "  %st = getelementptr inbounds i64, ptr %plan, i64 %f",
    )
    for i, nm in enumerate(("radix", "s", "m", "twi")):
        _field(fn, "%st", i, nm)
    fn.emit(
        # which pass: block (s 1, 2, 4 with s m a multiple of VEC, radix 2 or 4), vector
        # (s a multiple of VEC), else scalar over j (s < J_INNER_BELOW) or q
        "  %ms = mul i64 %m, %s",
        f"  %msr = urem i64 %ms, {VEC}",
        "  %whole = icmp eq i64 %msr, 0",
        f"  %sr = urem i64 %s, {VEC}",
        "  %sv = icmp eq i64 %sr, 0",
        "  %r2 = icmp eq i64 %radix, 2",
        "  %r4 = icmp eq i64 %radix, 4",
        "  %r24 = or i1 %r2, %r4",
        "  %s124a = icmp eq i64 %s, 1",
        "  %s124b = icmp eq i64 %s, 2",
        "  %s124c = icmp eq i64 %s, 4",
        "  %s124ab = or i1 %s124a, %s124b",
        "  %s124 = or i1 %s124ab, %s124c",
        "  %blk0 = and i1 %r24, %s124",
        "  %blk = and i1 %blk0, %whole",
        "  %kb0 = mul i64 %radix, 8",
        "  %kb = add i64 %kb0, %s",
        f"  %rb = udiv i64 %ms, {VEC}",
        f"  %jin = icmp slt i64 %s, {J_INNER_BELOW}",
        f"  %kjq = select i1 %jin, i64 {_KEY_SCALAR_J}, i64 {_KEY_SCALAR_Q}",
        f"  %kv0 = select i1 %sv, i64 {_KEY_VECTOR}, i64 %kjq",
        "  %kv = add i64 %kv0, %radix",
        # a vector pass splits over j when m is at least the vectors of q, else over q
        f"  %sq = udiv i64 %s, {VEC}",
        "  %byq = icmp ult i64 %m, %sq",
        "  %spl = zext i1 %byq to i64",
        "  %rv0 = select i1 %byq, i64 %sq, i64 %m",
        "  %rv = select i1 %sv, i64 %rv0, i64 %m",
        "  %key = select i1 %blk, i64 %kb, i64 %kv",
        "  %range = select i1 %blk, i64 %rb, i64 %rv",
        "  %vecp = or i1 %blk, %sv",
        "  %split = and i1 %par, %vecp",
        "  %srci = ptrtoint ptr %src to i64",
        "  %dsti = ptrtoint ptr %dst to i64",
        "  %spl2 = select i1 %blk, i64 0, i64 %spl",
    )
    for i, v in enumerate(("%key", "%srci", "%dsti", "%twi", "%s", "%m", "%sg", "%spl2")):
        fn.emit(
            f"  %c{i} = getelementptr inbounds i64, ptr %ctx, i64 {i}",
            f"  store i64 {v}, ptr %c{i}",
        )
    fn.emit(
        "  br i1 %split, label %threads, label %serial",
        "threads:",
        "  call void %pool(ptr @fgfft.chunk, ptr %ctx, i64 %range, i64 %nthreads)",
        "  br label %next",
        "serial:",
        "  call void @fgfft.chunk(ptr %ctx, i64 0, i64 %range)",
        "  br label %next",
        "next:",
        "  %isout = icmp eq ptr %dst, %out",
        "  %dst.n = select i1 %isout, ptr %scr, ptr %out",
        "  %i.n = add i64 %i, 1",
        "  br label %head",
        "exit:",
        "  ret void",
    )
    head = (
        "define internal void @fgfft.run(ptr %plan, ptr %x, ptr %out, ptr %scr, ptr %pool, "
        "i64 %nthreads) nounwind {"
    )
    return "\n".join([head, *fn.lines, "}", ""])


def _loop(fn: _Fn, tag: str, trip: str, body) -> None:
    """``for %<tag> in [0, trip)``: ``body(fn, index)`` emits the body's lines."""
    fn.emit(
        f"  br label %{tag}.pre",
        f"{tag}.pre:",
        f"  br label %{tag}.h",
        f"{tag}.h:",
        f"  %{tag} = phi i64 [0, %{tag}.pre], [%{tag}.n, %{tag}.b]",
        f"  %{tag}.c = icmp slt i64 %{tag}, {trip}",
        f"  br i1 %{tag}.c, label %{tag}.b, label %{tag}.x",
        f"{tag}.b:",
    )
    body(fn, f"%{tag}")
    fn.emit(
        f"  %{tag}.n = add i64 %{tag}, 1",
        f"  br label %{tag}.h, !llvm.loop !0",
        f"{tag}.x:",
    )


def _bluestein_fn(ty: str) -> str:
    """``@fgfft.blue(plan, x, out, scratch)``: one transform by Bluestein's algorithm;
    scratch holds ``3 M`` complex numbers; ``x`` may be ``out``."""
    fn = _Fn(ty)
    esz = 4 if ty == "float" else 8
    fn.emit("entry:")
    _field(fn, "%plan", 0, "n")
    _field(fn, "%plan", 4, "bm")
    for i, nm in ((5, "wi"), (6, "fi"), (7, "subi")):
        _field(fn, "%plan", i, nm)
        fn.emit(f"  %{nm[:-1]} = inttoptr i64 %{nm} to ptr")
    fn.emit(
        "  %bm2 = mul i64 %bm, 2",
        f"  %ta = getelementptr inbounds {ty}, ptr %scr, i64 0",
        f"  %ua = getelementptr inbounds {ty}, ptr %scr, i64 %bm2",
        "  %bm4 = mul i64 %bm, 4",
        f"  %va = getelementptr inbounds {ty}, ptr %scr, i64 %bm4",
        # zero T past n
        "  %pad = sub i64 %bm, %n",
        f"  %padb = mul i64 %pad, {2 * esz}",
        "  %n2 = mul i64 %n, 2",
        f"  %tpad = getelementptr inbounds {ty}, ptr %ta, i64 %n2",
        "  call void @llvm.memset.p0.i64(ptr %tpad, i8 0, i64 %padb, i1 false)",
    )
    _loop(fn, "a", "%n", lambda f, j: f.store("%ta", j, f.mul(f.load("%x", j), f.load("%w", j))))
    fn.emit("  call void @fgfft.run(ptr %sub, ptr %ta, ptr %ua, ptr %va, ptr %pool, i64 %nthreads)")
    _loop(
        fn,
        "b",
        "%bm",
        lambda f, k: f.store("%ua", k, f.conj(f.mul(f.load("%ua", k), f.load("%f", k)))),
    )
    fn.emit("  call void @fgfft.run(ptr %sub, ptr %ua, ptr %ta, ptr %va, ptr %pool, i64 %nthreads)")
    _loop(
        fn,
        "c",
        "%n",
        lambda f, k: f.store("%out", k, f.mul(f.conj(f.load("%ta", k)), f.load("%w", k))),
    )
    fn.emit("  ret void")
    head = (
        "define internal void @fgfft.blue(ptr %plan, ptr %x, ptr %out, ptr %scr, ptr %pool, "
        "i64 %nthreads) nounwind {"
    )
    return "\n".join([head, *fn.lines, "}", ""])


def _driver_fn(ty: str, name: str) -> str:
    """The exported ``@fg_fft_<t>(plan, x, out, batch)``: scratch, then each row."""
    esz = 4 if ty == "float" else 8
    lines = [
        f"define void @{name}(ptr %plan, ptr %x, ptr %out, i64 %batch, ptr %pool, "
        "i64 %nthreads) nounwind {",
        "entry:",
        "  %n = load i64, ptr %plan",
        "  %kp = getelementptr inbounds i64, ptr %plan, i64 1",
        "  %kind = load i64, ptr %kp",
        "  %scp = getelementptr inbounds i64, ptr %plan, i64 3",
        "  %sc = load i64, ptr %scp",
        "  %nob = icmp sle i64 %batch, 0",
        "  br i1 %nob, label %done, label %check",
        # rows over the threads: a pool, nthreads > 1, at least as many rows, enough points
        # (in units of VEC rows for a blocked plan: the blocks are those of one thread, and so
        # are the results, bit for bit)
        "check:",
        "  %ufp = getelementptr inbounds i64, ptr %plan, i64 9",
        "  %uf = load i64, ptr %ufp",
        "  %ublk = icmp ne i64 %uf, 0",
        f"  %unit = select i1 %ublk, i64 {VEC}, i64 1",
        "  %units0 = add i64 %batch, %unit",
        "  %units1 = sub i64 %units0, 1",
        "  %units = udiv i64 %units1, %unit",
        "  %hasp = icmp ne ptr %pool, null",
        "  %many = icmp sgt i64 %nthreads, 1",
        "  %rows = icmp sge i64 %units, %nthreads",
        "  %pts = mul i64 %batch, %n",
        f"  %bign = icmp sge i64 %pts, {PARALLEL_POINTS}",
        "  %p0 = and i1 %hasp, %many",
        "  %p1 = and i1 %p0, %rows",
        "  %par = and i1 %p1, %bign",
        "  br i1 %par, label %split, label %alloc",
        "split:",
        "  %ctx = alloca ptr, i64 5",
        "  store ptr %plan, ptr %ctx",
        "  %c1 = getelementptr inbounds ptr, ptr %ctx, i64 1",
        "  store ptr %x, ptr %c1",
        "  %c2 = getelementptr inbounds ptr, ptr %ctx, i64 2",
        "  store ptr %out, ptr %c2",
        "  %c3 = getelementptr inbounds ptr, ptr %ctx, i64 3",
        "  store i64 %batch, ptr %c3",
        "  %c4 = getelementptr inbounds ptr, ptr %ctx, i64 4",
        "  store i64 %unit, ptr %c4",
        "  call void %pool(ptr @fgfft.rows, ptr %ctx, i64 %units, i64 %nthreads)",
        "  br label %done",
        "alloc:",
        f"  %scb0 = mul i64 %sc, {2 * esz}",
        "  %scb1 = add i64 %scb0, 63",
        "  %scb = and i64 %scb1, -64",
        "  %scr = call ptr @aligned_alloc(i64 64, i64 %scb)",
        "  %row = mul i64 %n, 2",
        f"  %rowb = mul i64 %row, {esz}",
        f"  %spare = getelementptr inbounds {ty}, ptr %scr, i64 %row",
        "  %blue = icmp eq i64 %kind, 1",
        # blocks of VEC rows first where the plan says so (fft_batch_ir.py), then row by row
        "  %bfp = getelementptr inbounds i64, ptr %plan, i64 9",
        "  %bf = load i64, ptr %bfp",
        "  %blocked = icmp ne i64 %bf, 0",
        f"  %nbk0 = udiv i64 %batch, {VEC}",
        "  %nbk = select i1 %blocked, i64 %nbk0, i64 0",
        f"  %nbv = mul i64 %nbk, {VEC}",
        f"  %blkf = mul i64 %row, {VEC}",
        f"  %bB = getelementptr inbounds {ty}, ptr %scr, i64 %blkf",
        "  br label %bhead",
        "bhead:",
        "  %bb = phi i64 [0, %alloc], [%bb.n, %bbody]",
        "  %bmore = icmp slt i64 %bb, %nbk",
        "  br i1 %bmore, label %bbody, label %byrow",
        "bbody:",
        "  %boff = mul i64 %bb, %blkf",
        f"  %bxb = getelementptr inbounds {ty}, ptr %x, i64 %boff",
        f"  %bob = getelementptr inbounds {ty}, ptr %out, i64 %boff",
        "  call void @fgfft.brun(ptr %plan, ptr %bxb, ptr %bob, ptr %scr, ptr %bB)",
        "  %bb.n = add i64 %bb, 1",
        "  br label %bhead",
        "byrow:",
        "  br label %head",
        "head:",
        "  %b = phi i64 [%nbv, %byrow], [%b.n, %next]",
        "  %more = icmp slt i64 %b, %batch",
        "  br i1 %more, label %body, label %free",
        "body:",
        "  %off = mul i64 %b, %row",
        f"  %xb = getelementptr inbounds {ty}, ptr %x, i64 %off",
        f"  %ob = getelementptr inbounds {ty}, ptr %out, i64 %off",
        "  br i1 %blue, label %bl, label %st",
        "bl:",
        "  call void @fgfft.blue(ptr %plan, ptr %xb, ptr %ob, ptr %scr, ptr %pool, i64 %nthreads)",
        "  br label %next",
        "st:",
        "  %same = icmp eq ptr %xb, %ob",
        "  br i1 %same, label %cp, label %run",
        "cp:",
        "  call void @llvm.memcpy.p0.p0.i64(ptr %spare, ptr %xb, i64 %rowb, i1 false)",
        "  br label %run",
        "run:",
        "  %src = phi ptr [%xb, %st], [%spare, %cp]",
        "  call void @fgfft.run(ptr %plan, ptr %src, ptr %ob, ptr %scr, ptr %pool, i64 %nthreads)",
        "  br label %next",
        "next:",
        "  %b.n = add i64 %b, 1",
        "  br label %head",
        "free:",
        "  call void @free(ptr %scr)",
        "  br label %done",
        "done:",
        "  ret void",
        "}",
        "",
    ]
    return "\n".join(lines)


def _rows_fn(ty: str, name: str) -> str:
    """``@fgfft.rows(ctx, a, b)``: units ``a`` to ``b`` of ``unit`` rows (ctx: plan, x, out,
    batch, unit; the last unit may be short) on this thread."""
    esz = 4 if ty == "float" else 8
    return "\n".join(
        [
            "define internal void @fgfft.rows(ptr %ctx, i64 %a, i64 %b) nounwind {",
            "entry:",
            "  %plan = load ptr, ptr %ctx",
            "  %c1 = getelementptr inbounds ptr, ptr %ctx, i64 1",
            "  %x = load ptr, ptr %c1",
            "  %c2 = getelementptr inbounds ptr, ptr %ctx, i64 2",
            "  %out = load ptr, ptr %c2",
            "  %c3 = getelementptr inbounds ptr, ptr %ctx, i64 3",
            "  %batch = load i64, ptr %c3",
            "  %c4 = getelementptr inbounds ptr, ptr %ctx, i64 4",
            "  %unit = load i64, ptr %c4",
            "  %r0 = mul i64 %a, %unit",
            "  %r1a = mul i64 %b, %unit",
            "  %r1 = call i64 @llvm.smin.i64(i64 %r1a, i64 %batch)",
            "  %n = load i64, ptr %plan",
            f"  %row = mul i64 %n, {2 * esz}",
            "  %off = mul i64 %r0, %row",
            "  %xs = getelementptr inbounds i8, ptr %x, i64 %off",
            "  %os = getelementptr inbounds i8, ptr %out, i64 %off",
            "  %cnt = sub i64 %r1, %r0",
            f"  call void @{name}(ptr %plan, ptr %xs, ptr %os, i64 %cnt, ptr null, i64 1)",
            "  ret void",
            "}",
            "",
        ]
    )


def library_ir(ty: str, name: str, extra: list[str]) -> str:
    """The library module for LLVM type ``ty`` (``float`` or ``double``) exporting ``@name``:
    the driver, the Stockham and Bluestein transforms and the passes they call, and ``extra``
    functions (``fft_batch_ir.batch_functions``)."""
    parts = [
        "declare ptr @aligned_alloc(i64, i64)",
        "declare void @free(ptr)",
        "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
        "declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)",
        "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
        "declare void @llvm.trap()",
        "declare i64 @llvm.smin.i64(i64, i64)",
        "",
        *(_pass_fn(p, True, ty) for p in RADICES),
        *(_pass_fn(p, False, ty) for p in SCALAR_Q_RADICES),
        *(_block_pass_fn(p, s, ty) for p in BLOCK_RADICES for s in BLOCK_S),
        *(_vector_pass_fn(p, ty) for p in RADICES),
        _chunk_fn(ty),
        _run_fn(ty),
        _rows_fn(ty, name),
        _bluestein_fn(ty),
        _driver_fn(ty, name),
        *extra,
        "!0 = distinct !{!0, !1}",
        '!1 = !{!"llvm.loop.unroll.disable"}',
    ]
    return "\n".join(parts)
