"""The float32 matmul library: one generic register-blocked gemm, compiled once per process.

``c = alpha * op(a) @ b + beta * c0`` for row-major matrices with run-time shapes and row
strides, ``b`` not transposed (``[k, n]`` rows: each k step loads whole vectors of a row of b),
``a`` either way (``[m, k]`` or, ``trans_a``, ``[k, m]``). BLAS can only accumulate into its own
output (``beta * c``), so ``w - lr * grad`` through BLAS needs ``w`` copied into the output
first; here the epilogue reads ``c0`` (the weights) and writes ``c`` (the new weights) directly,
one pass over the weight-sized arrays fewer.

Why a library: a specialised copy of the kernel per product (shapes baked in) made the MLP
step's module hold six of them, half of its LLVM compile time. Now every program's module calls
the one native function ``@fg_matmul_f32`` (:func:`library_decl`, cblas-like argument order)::

    void fg_matmul_f32(i32 trans_a, i64 m, i64 n, i64 k, float alpha, ptr a, i64 lda,
                       ptr b, i64 ldb, float beta, ptr c0, ptr c, i64 ldc)

``c0`` shares ``c``'s row stride and may be ``c`` itself; it is read only when ``beta != 0``
(so ``beta = 0`` ignores NaNs in it, like BLAS). Its module is hand-vectorised IR (explicit
``<16 x float>`` operations, SSA written directly), so it skips the IR optimiser and only runs
O3 code generation; it is compiled on first use (:func:`ensure_library`, thread safe: under
``cpu.llvm_lock``), stored in the on-disk cache like any module, registered with
``llvm.add_symbol`` and kept for the life of the process (forked children inherit it).

Two schedules (one function each), both built on one register tile of ``MR x NR`` = 8 x 32
(16 ``<16 x float>`` accumulators as phis; per k step one vector load of b per 16 columns, one
broadcast of A per row, one fma per accumulator; outputs of at most 16 columns run the first
vector only) and one epilogue (``alpha * acc + beta * c0``, or ``+ c`` after the first k block
of ``KC``; masked at the right edge, row by row to the bottom edge):

- ``rows`` (A is ``[m, k]``): per k block and column panel, pack the panel of b (``kc x NR``,
  contiguous, zero past n: the k loop never walks b at its power-of-two row stride), then run
  every row tile against it, reading A's rows in place (each row its own pointer).
- ``columns`` (A^T is ``[k, m]``, A's rows strided): per column block (as many panels as the
  ``B_FLOATS`` budget holds) and k block, pack all its panels; then per row tile pack its
  ``kc x MR`` slice of A^T (interleaved: one vector copy per k step) and run it against every
  panel, so each tile of c (the weights of an SGD update) is read and written in row order.

These are the loop orders of the specialised kernels this library replaced, which ran the MLP's
products at OpenBLAS's speed; the MLP step runs as fast as with them (measured in the report
of the change). Rows past m repeat row m-1 (their results are never stored); the packed
buffers live on the stack (``B_FLOATS + MR * KC`` floats, 528 KiB).

``supports`` keeps the shapes this runs at OpenBLAS's speed on one core; larger products stay
with BLAS, which blocks for L3 and uses every core.
"""

from __future__ import annotations

import ctypes

import numpy as np

__all__ = ["SYMBOL", "ensure_library", "gemm", "library_decl", "library_ir", "render_matmul",
           "supports"]

#: from this many multiply-adds on, a call that may use several threads takes BLAS instead
SERIAL_WORK = 1 << 21
MAX_STACK_FLOATS = 1 << 17  # the cache plan of supports(): A or b within 512 KiB
VEC = 16  # float32 lanes of one vector (64 bytes; two AVX2 registers where AVX-512 is absent)
KC = 512  # k block: an 8 x KC slice of A (16 KiB) stays in L1
B_FLOATS = 1 << 17  # packed b (512 KiB): one panel, or a column block of panels for A^T
SYMBOL = "fg_matmul_f32"
MR, NV = 8, 2  # the register tile: MR rows of NV vectors (16 accumulators)
NR = NV * VEC  # columns of a packed panel of b


def supports(step) -> bool:
    """Whether the library runs this :class:`~fungrad.lowering.fusion.Gemm` well: float32, b
    not transposed, one matrix, and the operands small enough for the cache plan (A read from
    L2 per column block, or b packed whole in L2). Larger products stay with BLAS, which blocks
    for L3."""
    if not (step.c.dtype == np.dtype(np.float32) and not step.trans_b and step.batch == 1
            and min(step.m, step.n, step.k) > 0):
        return False
    if step.trans_a:
        return step.k * -(-step.n // NR) * NR <= MAX_STACK_FLOATS
    return step.k * NR <= MAX_STACK_FLOATS and step.m * step.k <= MAX_STACK_FLOATS


def _f(x: float) -> str:
    from fungrad.lowering.llvm import literal
    return literal(x, np.dtype(np.float32))


def library_decl() -> str:
    """The LLVM ``declare`` of ``@fg_matmul_f32`` for modules that call the library."""
    return (f"declare void @{SYMBOL}(i32, i64, i64, i64, float, ptr, i64, ptr, i64, float, ptr, "
            "ptr, i64)")


def render_matmul(step, fn: str, loop_md=None) -> str:
    """The LLVM function ``void @fn(ptr a, ptr b, ptr c, ptr c0)`` computing ``step`` through
    the library (``c0`` is read only when ``step.beta != 0``). The module that holds it must
    declare :func:`library_decl` (the LLVM renderer does when it sees the symbol); ``loop_md``
    is unused (the function has no loops)."""
    del loop_md
    lda = step.m if step.trans_a else step.k
    return (f"define internal void @{fn}(ptr noalias %a, ptr noalias %b, ptr %c, ptr %c0) {{\n"
            f"entry:\n  call void @{SYMBOL}(i32 {int(step.trans_a)}, i64 {step.m}, i64 {step.n}, "
            f"i64 {step.k}, float {_f(step.alpha)}, ptr %a, i64 {lda}, ptr %b, i64 {step.n}, "
            f"float {_f(step.beta)}, ptr %c0, ptr %c, i64 {step.n})\n  ret void\n}}\n")


# -- the library's IR ------------------------------------------------------------------------

_ONES = "<" + ", ".join(["i1 true"] * VEC) + ">"
_ARGS = ("i64 %m, i64 %n, i64 %k, float %alpha, ptr %a, i64 %lda, ptr %b, i64 %ldb, "
         "float %beta, ptr %c0, ptr %c, i64 %ldc")


class _Writer:
    """Emits the driver functions ``@fg_mm_rows`` and ``@fg_mm_columns`` (:meth:`function`)."""

    def __init__(self):
        self.mr, self.nv, self.nr = MR, NV, NR
        self.x = ""  # the schedule being written: a prefix of its names
        self.lines: list[str] = []
        self.n = 0

    def tmp(self, hint: str = "t") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def emit(self, *lines: str) -> None:
        self.lines.extend(lines)

    def op(self, text: str, hint: str = "t") -> str:
        """``%t = text``; returns %t."""
        t = self.tmp(hint)
        self.emit(f"  {t} = {text}")
        return t

    def gep(self, base: str, offset: str | int) -> str:
        return self.op(f"getelementptr float, ptr {base}, i64 {offset}", "p")

    def gep_ptr(self, base: str, i: int) -> str:
        return self.op(f"getelementptr ptr, ptr {base}, i64 {i}", "p")

    def umin(self, x: str, y: str | int) -> str:
        lt = self.op(f"icmp ult i64 {x}, {y}")
        return self.op(f"select i1 {lt}, i64 {x}, i64 {y}")

    def splat(self, scalar: str, lanes: int = VEC) -> str:
        vty = f"<{lanes} x float>"
        ins = self.op(f"insertelement {vty} poison, float {scalar}, i64 0")
        return self.op(f"shufflevector {vty} {ins}, {vty} poison, <{lanes} x i32> zeroinitializer")

    def lane_mask(self, count: str, lanes: int = VEC) -> str:
        """``<lanes x i1>``: lane j set when ``j < count`` (an i64, possibly <= 0 or > lanes),
        built from the bits ``(1 << count) - 1`` (a k-register move on AVX-512)."""
        lo = self.op(f"icmp slt i64 {count}, 0")
        c0 = self.op(f"select i1 {lo}, i64 0, i64 {count}")
        c1 = self.umin(c0, lanes)
        bits = self.op(f"sub i64 {self.op(f'shl i64 1, {c1}')}, 1")
        small = self.op(f"trunc i64 {bits} to i{lanes}")
        return self.op(f"bitcast i{lanes} {small} to <{lanes} x i1>", "mk")

    def masked_load(self, p: str, mask: str, lanes: int = VEC) -> str:
        vty = f"<{lanes} x float>"
        return self.op(f"call {vty} @llvm.masked.load.v{lanes}f32.p0(ptr {p}, i32 4, "
                       f"<{lanes} x i1> {mask}, {vty} zeroinitializer)", "v")

    def loop(self, name: str, start: str | int, stop: str, step: int | str, body, *,
             guarded: bool) -> None:
        """``for %name = start; %name < stop; %name += step: body(%name)``. Unguarded loops
        run their first iteration unconditionally (the caller knows ``start < stop``)."""
        e, iv = self.emit, f"%{name}"
        e(f"  br label %{name}.pre", f"{name}.pre:")
        if guarded:
            go = self.op(f"icmp slt i64 {start}, {stop}")
            e(f"  br i1 {go}, label %{name}.h, label %{name}.x")
        else:
            e(f"  br label %{name}.h")
        e(f"{name}.h:", f"  {iv} = phi i64 [{start}, %{name}.pre], [{iv}.n, %{name}.l]")
        body(iv)
        e(f"  br label %{name}.l", f"{name}.l:", f"  {iv}.n = add nuw nsw i64 {iv}, {step}",
          f"  %{name}.c = icmp slt i64 {iv}.n, {stop}",
          f"  br i1 %{name}.c, label %{name}.h, label %{name}.x", f"{name}.x:")

    # pieces ---------------------------------------------------------------------------------
    def mul(self, x: str, c: int | str) -> str:
        return self.op(f"mul i64 {x}, {c}")

    def col_masks(self, col: str) -> list[str]:
        """Masks of the panel's columns that exist (``col + lane < n``), one per vector."""
        left = self.op(f"sub i64 %n, {col}")
        return [self.lane_mask(self.op(f"sub i64 {left}, {v * VEC}") if v else left)
                for v in range(self.nv)]

    def k_block(self, pc: str) -> str:
        """Per k block: its length (returned) and what the epilogue adds: ``beta * c0`` in the
        first block, ``c`` itself in later ones (``%X.rd``: read it at all)."""
        x, e = self.x, self.emit
        kc = self.umin(self.op(f"sub i64 %k, {pc}"), KC)
        # bt = -0.0 when nothing is read: the masked load gives +0, -0 * +0 = -0, and
        # -0 + t == t for every t (-0 and NaN included), so the sum needs no select
        e(f"  %{x}.later = icmp ne i64 {pc}, 0",
          f"  %{x}.rd = or i1 %{x}.later, %bnz",
          f"  %{x}.b0 = select i1 %bnz, float %beta, float -0.0",
          f"  %{x}.bt = select i1 %{x}.later, float 1.0, float %{x}.b0",
          f"  %{x}.src = select i1 %{x}.later, ptr %c, ptr %c0")
        bt = self.splat(f"%{x}.bt")
        e(f"  %{x}.bt.v = bitcast <{VEC} x float> {bt} to <{VEC} x float>")
        return kc

    def pack_b(self, dst: str, col: str, masks: list[str], kc: str) -> None:
        """``dst[kk][:] = b[pc + kk, col:][:NR]`` (zero past n; ``%ps`` floats per row, 16 for
        outputs of at most 16 columns, so their panel takes half the cache): a contiguous panel,
        so the k loop never walks b at its row stride (a power of two in most networks, which
        maps every row to the same few L1 sets)."""
        src0 = self.gep("%b", self.op(f"add i64 {self.mul(f'%{self.x}.pc', '%ldb')}, {col}"))

        def row(kk):
            src = self.gep(src0, self.mul(kk, "%ldb"))
            to = self.gep(dst, self.mul(kk, "%ps"))
            for v in range(self.nv):
                x = self.masked_load(self.gep(src, v * VEC), masks[v])
                if v:  # (outputs of at most 16 columns: panels of one vector per k step)
                    self.emit(f"  call void @llvm.masked.store.v{VEC}f32.p0(<{VEC} x float> {x}, "
                              f"ptr {self.gep(to, v * VEC)}, i32 64, <{VEC} x i1> %wide.m)")
                else:
                    self.emit(f"  store <{VEC} x float> {x}, ptr {to}, align 64")
        self.loop(f"{self.x}.pb", 0, kc, 1, row, guarded=True)

    def k_loop(self, tag: str, starts: list[str], panel: str, kc: str, nv: int) -> list[list[str]]:
        """The register tile's k loop (blocks ``tag.*``, entered at ``%tag.kp``) over
        ``panel``, for the first ``nv`` vectors of each row (the others stay zero); returns the
        final accumulators (rows of vectors; zero when kc is 0). ``starts`` holds one pointer,
        to a tile of A^T packed interleaved (row r at offset r, MR floats per k step), or one
        per row of A, read in place (each row its own pointer: a run-time row stride cannot be
        an address displacement), indexed by the k counter."""
        e, vty, mr = self.emit, f"<{VEC} x float>", self.mr
        acc = [[f"%{tag}.a{r}_{v}" for v in range(nv)] for r in range(mr)]
        new = [[f"{a}.n" for a in row] for row in acc]
        # one pointer per row would need eight increments per step: rows of A are addressed
        # from their fixed starts by the k counter instead (base + index addressing)
        ap = [f"%{tag}.ap{j}" for j in range(len(starts))] if len(starts) == 1 else []
        go = self.op(f"icmp sgt i64 {kc}, 0")
        e(f"  br i1 {go}, label %{tag}.kl, label %{tag}.kx",
          f"{tag}.kl:", f"  %{tag}.kk = phi i64 [0, %{tag}.kp], [%{tag}.kk.n, %{tag}.kl]",
          f"  %{tag}.bp = phi ptr [{panel}, %{tag}.kp], [%{tag}.bp.n, %{tag}.kl]",
          *(f"  {p} = phi ptr [{s0}, %{tag}.kp], [{p}.n, %{tag}.kl]" for p, s0 in zip(ap, starts)))
        for r in range(mr):
            for v in range(nv):
                e(f"  {acc[r][v]} = phi {vty} [zeroinitializer, %{tag}.kp], "
                  f"[{new[r][v]}, %{tag}.kl]")
        bvec = [self.op(f"load {vty}, ptr {self.gep(f'%{tag}.bp', v * VEC)}, align 64", "b")
                for v in range(nv)]
        for r in range(mr):
            p = self.gep(ap[0], r) if ap else self.gep(starts[r], f"%{tag}.kk")
            spl = self.splat(self.op(f"load float, ptr {p}, align 4", "x"))
            for v in range(nv):
                e(f"  {new[r][v]} = call {vty} @llvm.fma.v{VEC}f32({vty} {spl}, {vty} {bvec[v]}, "
                  f"{vty} {acc[r][v]})")
        e(*(f"  {p}.n = getelementptr float, ptr {p}, i64 {mr}" for p in ap),
          f"  %{tag}.bp.n = getelementptr float, ptr %{tag}.bp, i64 {nv * VEC}",
          f"  %{tag}.kk.n = add nuw nsw i64 %{tag}.kk, 1",
          f"  %{tag}.kc = icmp slt i64 %{tag}.kk.n, {kc}",
          f"  br i1 %{tag}.kc, label %{tag}.kl, label %{tag}.kx", f"{tag}.kx:")
        return [[self.op(f"phi {vty} [zeroinitializer, %{tag}.kp], [{new[r][v]}, %{tag}.kl]",
                         "f") if v < nv else "zeroinitializer"
                 for v in range(self.nv)] for r in range(mr)]

    def tile_product(self, starts: list[str], panel: str, kc: str) -> list[list[str]]:
        """The k loop of one register tile: for outputs of at most 16 columns, a loop over
        the first vector of each row only (an 8 x 16 tile: half the multiply-adds)."""
        x, e, vty = self.x, self.emit, f"<{VEC} x float>"
        e(f"  br i1 %narrow, label %{x}.h.kp, label %{x}.w.kp", f"{x}.w.kp:")
        wide = self.k_loop(f"{x}.w", starts, panel, kc, self.nv)
        e(f"  br label %{x}.kj", f"{x}.h.kp:")
        half = self.k_loop(f"{x}.h", starts, panel, kc, 1)
        e(f"  br label %{x}.kj", f"{x}.kj:")
        return [[self.op(f"phi {vty} [{w}, %{x}.w.kx], [{h}, %{x}.h.kx]", "f")
                 for w, h in zip(wr, hr)] for wr, hr in zip(wide, half)]

    def row_pointers(self, row: str, kc: str) -> list[str]:
        """Pointers to ``A[row + r, pc]`` for the tile's rows (rows past m repeat row m-1).
        They pass through memory (volatile: nothing folds them): computed in the loop's
        preheader, code generation (there is no IR optimiser here) would recompute the run-time
        row offsets inside the k loop; loaded, they stay in registers."""
        e = self.emit
        an = self.gep("%a", self.op(f"add i64 {self.mul(row, '%lda')}, %{self.x}.pc"))
        last = self.op(f"sub i64 {self.umin(self.op(f'sub i64 %m, {row}'), self.mr)}, 1")
        for r in range(self.mr):
            p = self.gep(an, self.mul(self.umin(last, r), "%lda")) if r else an
            e(f"  store ptr {p}, ptr {self.gep_ptr('%rowp', r)}")
        e(f"  br label %{self.x}.rows", f"{self.x}.rows:")
        return [self.op(f"load volatile ptr, ptr {self.gep_ptr('%rowp', r)}", "rp")
                for r in range(self.mr)]

    def epilogue(self, acc, row: str, col: str, masks: list[str]) -> None:
        """``c = alpha * acc + bt * src`` (``src`` read only when ``rd``) for the tile at
        (row, col), straight from the registers: row by row while below m (branches cost less
        than per-row masks), masked to the columns below n."""
        vty, mty, e, x = f"<{VEC} x float>", f"<{VEC} x i1>", self.emit, self.x
        reads = [self.op(f"select i1 %{x}.rd, {mty} {m}, {mty} zeroinitializer", "mk")
                 for m in masks]
        off = self.op(f"add i64 {self.mul(row, '%ldc')}, {col}")
        left = self.op(f"sub i64 %m, {row}")
        src, dst = self.gep(f"%{x}.src", off), self.gep("%c", off)
        for r in range(self.mr):
            if r:
                ok = self.op(f"icmp sgt i64 {left}, {r}")
                e(f"  br i1 {ok}, label %{x}.e{r}, label %{x}.ex", f"{x}.e{r}:")
                src, dst = self.gep(src, "%ldc"), self.gep(dst, "%ldc")
            for v in range(self.nv):
                old = self.masked_load(self.gep(src, v * VEC), reads[v])
                t = self.op(f"fmul {vty} %alpha.v, {acc[r][v]}")
                u = self.op(f"fmul {vty} %{x}.bt.v, {old}")
                val = self.op(f"fadd {vty} {u}, {t}")
                e(f"  call void @llvm.masked.store.v{VEC}f32.p0({vty} {val}, "
                  f"ptr {self.gep(dst, v * VEC)}, i32 4, {mty} {masks[v]})")
        e(f"  br label %{x}.ex", f"{x}.ex:")

    # schedules ------------------------------------------------------------------------------
    def k_blocks(self, body) -> None:
        """``body(kc)`` for each k block (starting at ``%X.pc``); at least one, so that k == 0
        still writes ``alpha * 0 + beta * c0``."""
        x, e = self.x, self.emit
        e(f"  br label %{x}.pc.pre", f"{x}.pc.pre:", f"  br label %{x}.pc.h", f"{x}.pc.h:",
          f"  %{x}.pc = phi i64 [0, %{x}.pc.pre], [%{x}.pc.n, %{x}.pc.l]")
        body(self.k_block(f"%{x}.pc"))
        e(f"  br label %{x}.pc.l", f"{x}.pc.l:", f"  %{x}.pc.n = add nuw nsw i64 %{x}.pc, {KC}",
          f"  %{x}.pc.c = icmp slt i64 %{x}.pc.n, %k",
          f"  br i1 %{x}.pc.c, label %{x}.pc.h, label %{x}.pc.x", f"{x}.pc.x:")

    def rows_schedule(self) -> None:
        """A in rows (``[m, k]``): for each k block and column panel, pack the panel, then run
        every row tile against it, reading A in place (the panel stays in L1/L2 while A's rows
        stream past)."""
        self.x = "n"
        np_ = self.op(f"lshr i64 {self.op(f'add i64 %n, {self.nr - 1}')}, "
                      f"{self.nr.bit_length() - 1}")

        def k_block(kc):
            def panel(jr):
                col = self.mul(jr, self.nr)
                masks = self.col_masks(col)
                self.pack_b("%bpk", col, masks, kc)

                def tile(i):
                    acc = self.tile_product(self.row_pointers(i, kc), "%bpk", kc)
                    self.epilogue(acc, i, col, masks)
                self.loop("n.i", 0, "%m", self.mr, tile, guarded=False)
            self.loop("n.j", 0, np_, 1, panel, guarded=False)
        self.k_blocks(k_block)

    def columns_schedule(self) -> None:
        """A^T (``[k, m]``: A's rows are strided): for each column block (as many panels as the
        packed-b budget holds beside the first, largest k block) and k block, pack all its
        panels; then for each row tile pack its slice of A^T (``kc x MR``, interleaved) and run
        it against every panel. Each tile of c is written whole rows at a time."""
        self.x = "t"
        e, mr = self.emit, self.mr
        k1 = self.umin("%k", KC)
        k1 = self.op(f"select i1 {self.op(f'icmp eq i64 {k1}, 0')}, i64 1, i64 {k1}")
        e(f"  %ncs = and i64 {self.op(f'udiv i64 {B_FLOATS}, {k1}')}, {-self.nr}")

        def col_block(jc):
            nc = self.umin(self.op(f"sub i64 %n, {jc}"), "%ncs")
            np_ = self.op(f"lshr i64 {self.op(f'add i64 {nc}, {self.nr - 1}')}, "
                          f"{self.nr.bit_length() - 1}")

            def k_block(kc):
                panel_size = self.mul(kc, "%ps")

                def pack(p):
                    col = self.op(f"add i64 {jc}, {self.mul(p, self.nr)}")
                    self.pack_b(self.gep("%bpk", self.mul(p, panel_size)), col,
                                self.col_masks(col), kc)
                self.loop("t.pp", 0, np_, 1, pack, guarded=False)

                def tile(i):
                    mask = self.lane_mask(self.op(f"sub i64 %m, {i}"), mr)
                    src0 = self.gep("%a", self.op(f"add i64 {self.mul('%t.pc', '%lda')}, {i}"))

                    def step(kk):
                        v = self.masked_load(self.gep(src0, self.mul(kk, "%lda")), mask, mr)
                        e(f"  store <{mr} x float> {v}, ptr "
                          f"{self.gep('%apk', self.mul(kk, mr))}, align 4")
                    self.loop("t.pa", 0, kc, 1, step, guarded=True)

                    def panel(p):
                        col = self.op(f"add i64 {jc}, {self.mul(p, self.nr)}")
                        masks = self.col_masks(col)
                        acc = self.tile_product(
                            ["%apk"], self.gep("%bpk", self.mul(p, panel_size)), kc)
                        self.epilogue(acc, i, col, masks)
                    self.loop("t.j", 0, np_, 1, panel, guarded=False)
                self.loop("t.i", 0, "%m", mr, tile, guarded=False)
            self.k_blocks(k_block)
        self.loop("t.jc", 0, "%n", "%ncs", col_block, guarded=False)

    def function(self, schedule: str) -> str:
        """The driver of one schedule (``rows`` or ``columns``), a function of its own: code
        generation costs grow faster than linearly with a function's size."""
        self.lines, e = [], self.emit
        e("entry:",
          f"  %bpk = alloca float, i64 {B_FLOATS}, align 64",
          f"  %apk = alloca float, i64 {self.mr * KC}, align 64",
          f"  %rowp = alloca ptr, i64 {self.mr}",
          "  %bnz = fcmp une float %beta, 0.0",
          f"  %narrow = icmp sle i64 %n, {VEC}",
          f"  %ps = select i1 %narrow, i64 {VEC}, i64 {self.nr}",  # floats per panel row
          f"  %wide.m = select i1 %narrow, <{VEC} x i1> zeroinitializer, "
          f"<{VEC} x i1> {_ONES}")
        alpha = self.splat("%alpha")
        e(f"  %alpha.v = bitcast <{VEC} x float> {alpha} to <{VEC} x float>")
        getattr(self, f"{schedule}_schedule")()
        e("  ret void")
        return (f"define internal void @fg_mm_{schedule}({_ARGS}) {{\n"
                + "\n".join(self.lines) + "\n}\n")


def library_ir() -> str:
    """The library module: the exported ``@fg_matmul_f32`` (returns at once when m or n is 0)
    and the driver of each schedule."""
    entry = (f"define void @{SYMBOL}(i32 %trans_a, {_ARGS}) {{\nentry:\n"
             "  %m0 = icmp sle i64 %m, 0\n  %n0 = icmp sle i64 %n, 0\n"
             "  %empty = or i1 %m0, %n0\n  br i1 %empty, label %done, label %go\ngo:\n"
             "  %ta = icmp ne i32 %trans_a, 0\n  br i1 %ta, label %cols, label %rows\n"
             f"rows:\n  call void @fg_mm_rows({_ARGS})\n  br label %done\n"
             f"cols:\n  call void @fg_mm_columns({_ARGS})\n  br label %done\n"
             "done:\n  ret void\n}\n")
    decls = "\n".join([
        f"declare <{VEC} x float> @llvm.fma.v{VEC}f32(<{VEC} x float>, <{VEC} x float>, "
        f"<{VEC} x float>)",
        *(f"declare <{n} x float> @llvm.masked.load.v{n}f32.p0(ptr, i32, <{n} x i1>, "
          f"<{n} x float>)" for n in sorted({VEC, MR})),
        f"declare void @llvm.masked.store.v{VEC}f32.p0(<{VEC} x float>, ptr, i32, "
        f"<{VEC} x i1>)"])
    w = _Writer()
    return "\n".join([decls, "", entry, w.function("rows"), w.function("columns")])


# -- the compiled library ------------------------------------------------------------------

_module = None  # the CompiledModule, kept for the life of the process
_function = None  # ctypes function of fg_matmul_f32 (gemm)


def ensure_library() -> None:
    """Compile the library (once per process; the on-disk cache may hold its object) and make
    ``@fg_matmul_f32`` resolvable by every module compiled afterwards. Thread safe: two
    threads compiling programs at once compile it once (under ``cpu.llvm_lock``, which
    compile_module takes anyway, so there is one lock order). Cheap after the first call."""
    if _module is not None:
        return
    from fungrad.lowering import cpu
    with cpu.llvm_lock:
        if _module is None:
            _compile()


def _compile() -> None:
    global _module, _function
    import llvmlite.binding as llvm

    from fungrad.lowering import cpu
    module = cpu.compile_module(library_ir(), [SYMBOL], name="fungrad_matmul", passes=False)
    # every program's code calls into this one: never free it (a CompiledModule frees its code
    # when collected, e.g. while modules are torn down at interpreter exit)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(module))
    i64, ptr, f32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
    _function = module.function(SYMBOL, [ctypes.c_int32, i64, i64, i64, f32, ptr, i64, ptr, i64,
                                         f32, ptr, ptr, i64])
    llvm.add_symbol(SYMBOL, module.address(SYMBOL))
    _module = module


def _rows(x: np.ndarray, name: str) -> int:
    """The row stride (in elements) of a 2-D float32 array with contiguous rows."""
    if x.dtype != np.float32 or x.ndim != 2:
        raise TypeError(f"matmul.gemm: {name} must be a 2-D float32 array, got {x.dtype} with "
                        f"shape {x.shape}")
    if x.size == 0 or x.shape[0] == 1:
        return x.shape[1]  # (the stride is never used)
    if x.shape[1] > 1 and x.strides[1] != 4 or x.strides[0] % 4 or x.strides[0] <= 0:
        raise ValueError(f"matmul.gemm: the rows of {name} must be contiguous with a positive "
                         f"row stride, got strides {x.strides}; pass np.ascontiguousarray({name})")
    return max(x.strides[0] // 4, x.shape[1])


def gemm(a: np.ndarray, b: np.ndarray, *, trans_a: bool = False, alpha: float = 1.0,
         beta: float = 0.0, c0: np.ndarray | None = None,
         out: np.ndarray | None = None) -> np.ndarray:
    """``alpha * op(a) @ b + beta * c0`` through the native library (tests, benchmarks).

    ``a`` is ``[m, k]`` (``trans_a``: ``[k, m]``), ``b`` ``[k, n]``; every operand is 2-D
    float32 with contiguous rows and any row stride (e.g. a column slice of a wider array).
    ``c0`` (read only when ``beta != 0``) and ``out`` are ``[m, n]`` with the same row stride;
    ``out`` may be ``c0``. Returns ``out`` (a new array when None)."""
    ensure_library()
    lda, ldb = _rows(a, "a"), _rows(b, "b")
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    if b.shape[0] != k:
        raise ValueError(f"matmul.gemm: op(a) is {m}x{k} but b is {b.shape[0]}x{b.shape[1]}; "
                         "their inner dimensions must agree")
    n = b.shape[1]
    if out is None:
        out = np.empty((m, n), np.float32)
    if c0 is None:
        if beta != 0:
            raise ValueError("matmul.gemm: beta != 0 needs c0")
        c0 = out
    for x, name in ((out, "out"), (c0, "c0")):
        if x.shape != (m, n):
            raise ValueError(f"matmul.gemm: {name} must have shape {(m, n)}, got {x.shape}")
    ldc = _rows(out, "out")
    if _rows(c0, "c0") != ldc:
        raise ValueError(f"matmul.gemm: c0 and out must share a row stride, got "
                         f"{c0.strides[0]} and {out.strides[0]} bytes")
    _function(int(trans_a), m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
              c0.ctypes.data, out.ctypes.data, ldc)
    return out
