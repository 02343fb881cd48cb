"""A register-blocked float32 matmul in LLVM IR, with the SGD-style epilogue fused.

``c = alpha * op(a) @ b + beta * c0`` for row-major matrices with static shapes, ``b`` not
transposed (``[k, n]`` rows: each k step loads whole vectors of a row of b), ``a`` either way
(``[m, k]`` or, ``trans_a``, ``[k, m]``). BLAS can only accumulate into its own output
(``beta * c``), so ``w - lr * grad`` through BLAS needs ``w`` copied into the output first;
here the epilogue reads ``c0`` (the weights) and writes ``c`` (the new weights) directly, one
pass over the weight-sized arrays fewer.

The kernel keeps an ``MR x NR`` tile of ``c`` in vector registers (``MR`` rows, ``NR / 16``
``<16 x float>`` accumulators per row; 8 x 32 on wide outputs, 16 x 16 when n <= 16), runs the
whole k loop over it (one vector load of b per 16 columns, one broadcast of a per row, one fma
per accumulator), then applies the epilogue and stores the tile. Column blocks are the outer
loop, so a ``k x NR`` panel of b stays in the nearer caches while the row tiles stream a. The
last column block is masked (``llvm.masked.load/store``), the last row block is a smaller tile.
On a Cascade Lake core this runs the MLP's weight-gradient products (k = 128) at OpenBLAS's
speed (measured in the report of the change that added it); shapes it does not handle stay
with BLAS (:func:`supports`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["supports", "render_matmul"]

#: from this many multiply-adds on, a call that may use several threads takes BLAS instead
SERIAL_WORK = 1 << 21
MAX_STACK_FLOATS = 1 << 17  # packed b lives on the stack: at most 512 KiB
VEC = 16  # float32 lanes of one vector (64 bytes; two AVX2 registers where AVX-512 is absent)


def supports(step) -> bool:
    """Whether :func:`render_matmul` handles this :class:`~fungrad.lowering.fusion.Gemm`
    well: float32, b not transposed, one matrix, and the operands small enough for the cache
    plan (A re-read from L2 per column block, or b packed whole on the stack). Larger products
    stay with BLAS, which blocks for L3."""
    if not (step.c.dtype == np.dtype(np.float32) and not step.trans_b and step.batch == 1
            and min(step.m, step.n, step.k) > 0):
        return False
    _, nv = _tile_shape(step.n)
    if step.trans_a:
        padded_n = -(-step.n // (nv * VEC)) * nv * VEC
        return step.k * padded_n <= MAX_STACK_FLOATS
    return step.k * nv * VEC <= MAX_STACK_FLOATS and step.m * step.k <= MAX_STACK_FLOATS


def _tile_shape(n: int) -> tuple[int, int]:
    """(rows, vectors per row) of the register tile: 16 accumulators either way."""
    return (16, 1) if n <= VEC else (8, 2)


def _f(x: float) -> str:
    from fungrad.lowering.llvm import literal
    return literal(x, np.dtype(np.float32))


class _Writer:
    """Emits the function of one product (see the module docstring)."""

    def __init__(self, step, fn: str, loop_md):
        self.s, self.fn, self.loop_md = step, fn, loop_md
        self.lines: list[str] = []
        self.n = 0

    def tmp(self, hint="t") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def emit(self, *lines: str) -> None:
        self.lines.extend(lines)

    def loop(self, name: str, count: int, body) -> None:
        """``for %name in [0, count): body(%name)`` (``body`` emits straight-line code or
        whole nested loops)."""
        e, iv = self.emit, f"%{name}"
        e(f"  br label %{name}.pre", f"{name}.pre:", f"  br label %{name}.h", f"{name}.h:",
          f"  {iv} = phi i64 [0, %{name}.pre], [{iv}.n, %{name}.l]")
        body(iv)
        e(f"  br label %{name}.l", f"{name}.l:", f"  {iv}.n = add nuw nsw i64 {iv}, 1",
          f"  %{name}.c = icmp ult i64 {iv}.n, {count}",
          f"  br i1 %{name}.c, label %{name}.h, label %{name}.x{self.loop_md()}",
          f"{name}.x:")

    def gep(self, base: str, *offsets: str | int) -> str:
        """``base + sum(offsets)`` floats."""
        idx = "0"
        for o in offsets:
            if idx == "0":
                idx = str(o)
            elif o != 0:
                t = self.tmp()
                self.emit(f"  {t} = add i64 {idx}, {o}")
                idx = t
        p = self.tmp("p")
        self.emit(f"  {p} = getelementptr inbounds float, ptr {base}, i64 {idx}")
        return p

    def mul(self, x: str, c: int) -> str:
        t = self.tmp()
        self.emit(f"  {t} = mul i64 {x}, {c}")
        return t

    def vload(self, p: str, mask: int | None = None, lanes: int = VEC) -> str:
        x, vty = self.tmp(), f"<{lanes} x float>"
        if mask is None:
            self.emit(f"  {x} = load {vty}, ptr {p}, align 4")
        else:
            self.emit(f"  {x} = call {vty} @llvm.masked.load.v{VEC}f32.p0(ptr {p}, i32 4, "
                      f"<{VEC} x i1> {_mask(mask)}, {vty} zeroinitializer)")
        return x

    def vstore(self, x: str, p: str, mask: int | None = None, lanes: int = VEC) -> None:
        vty = f"<{lanes} x float>"
        if mask is None:
            self.emit(f"  store {vty} {x}, ptr {p}, align 4")
        else:
            self.emit(f"  call void @llvm.masked.store.v{VEC}f32.p0({vty} {x}, ptr {p}, i32 4, "
                      f"<{VEC} x i1> {_mask(mask)})")

    # pieces -----------------------------------------------------------------------------------
    def pack_b(self, name: str, dst: str, col: str, nv: int, mask) -> None:
        """``dst[kk, :] = b[kk, col : col + nv * VEC]`` for every kk: a contiguous panel (the k
        loop then never walks b at its row stride, a power of two in most networks, which maps
        every row to the same few L1 sets)."""
        def body(kk):
            src, to = self.mul(kk, self.s.n), self.mul(kk, nv * VEC)
            for v in range(nv):
                x = self.vload(self.gep("%b", src, col, v * VEC), mask if v == nv - 1 else None)
                self.vstore(x, self.gep(dst, to, v * VEC))
        self.loop(name, self.s.k, body)

    def pack_a(self, name: str, row: str, mr: int) -> None:
        """``%apk[kk, r] = A[row + r, kk]`` from a holding A^T (contiguous rows of ``mr``)."""
        def body(kk):
            src, to = self.mul(kk, self.s.m), self.mul(kk, mr)
            x = self.vload(self.gep("%a", src, row), lanes=mr)
            self.vstore(x, self.gep("%apk", to), lanes=mr)
        self.loop(name, self.s.k, body)

    def tile(self, name: str, row: str, col: str, mr: int, nv: int, mask, a_elem, panel: str
             ) -> None:
        """One ``mr x nv * VEC`` tile of c at (row, col): the k loop over registers, then the
        epilogue. ``a_elem(kk, r)`` gives the pointer of A[row + r, kk]; ``panel`` holds the
        packed columns of b."""
        e, vty = self.emit, f"<{VEC} x float>"
        kk = f"%{name}"
        acc = [[f"%{name}a{r}_{v}" for v in range(nv)] for r in range(mr)]
        new = [[f"{a}.n" for a in row_] for row_ in acc]
        e(f"  br label %{name}.pre", f"{name}.pre:", f"  br label %{name}.h", f"{name}.h:",
          f"  {kk} = phi i64 [0, %{name}.pre], [{kk}.n, %{name}.h]")
        for r in range(mr):
            for v in range(nv):
                e(f"  {acc[r][v]} = phi {vty} [zeroinitializer, %{name}.pre], "
                  f"[{new[r][v]}, %{name}.h]")
        brow = self.mul(kk, nv * VEC)
        bvec = [self.vload(self.gep(panel, brow, v * VEC)) for v in range(nv)]
        for r in range(mr):
            x, ins, spl = self.tmp(), self.tmp(), self.tmp()
            e(f"  {x} = load float, ptr {a_elem(kk, r)}",
              f"  {ins} = insertelement {vty} poison, float {x}, i64 0",
              f"  {spl} = shufflevector {vty} {ins}, {vty} poison, <{VEC} x i32> zeroinitializer")
            for v in range(nv):
                e(f"  {new[r][v]} = call {vty} @llvm.fma.v{VEC}f32({vty} {spl}, "
                  f"{vty} {bvec[v]}, {vty} {acc[r][v]})")
        e(f"  {kk}.n = add nuw nsw i64 {kk}, 1", f"  %{name}.c = icmp ult i64 {kk}.n, {self.s.k}",
          f"  br i1 %{name}.c, label %{name}.h, label %{name}.x{self.loop_md()}",
          f"{name}.x:")
        self.epilogue(new, row, col, mr, nv, mask)

    def epilogue(self, acc, row: str, col: str, mr: int, nv: int, mask) -> None:
        """``c = alpha * acc + beta * c0`` for the tile."""
        s, e, vty = self.s, self.emit, f"<{VEC} x float>"

        def splat(x):
            return f"<{', '.join([f'float {_f(x)}'] * VEC)}>"
        for r in range(mr):
            at = self.tmp()
            e(f"  {at} = add i64 {row}, {r}")
            off = self.mul(at, s.n)
            for v in range(nv):
                m_ = mask if v == nv - 1 else None
                val = acc[r][v]
                if s.alpha != 1.0:
                    t = self.tmp()
                    e(f"  {t} = fmul {vty} {val}, {splat(s.alpha)}")
                    val = t
                if s.beta != 0.0:
                    old = self.vload(self.gep("%c0", off, col, v * VEC), m_)
                    if s.beta != 1.0:
                        t = self.tmp()
                        e(f"  {t} = fmul {vty} {old}, {splat(s.beta)}")
                        old = t
                    t = self.tmp()
                    e(f"  {t} = fadd {vty} {old}, {val}")
                    val = t
                self.vstore(val, self.gep("%c", off, col, v * VEC), m_)

    # schedules ----------------------------------------------------------------------------
    def parts(self):
        """Row parts ``(i0, tiles, mr)`` and column parts ``(j0, tiles, nv, mask)``: whole tiles,
        then the ragged rest (a smaller row tile; whole vectors, the last one masked)."""
        s = self.s
        mr, nv = _tile_shape(s.n)
        nr = nv * VEC
        full_i, rest_i = divmod(s.m, mr)
        full_j, rest_j = divmod(s.n, nr)
        rows = ([(0, full_i, mr)] if full_i else []) + \
            ([(full_i * mr, 1, rest_i)] if rest_i else [])
        cols = [(0, full_j, nv, None)] if full_j else []
        if rest_j:
            rv = -(-rest_j // VEC)
            lanes = rest_j - (rv - 1) * VEC
            cols.append((full_j * nr, 1, rv, None if lanes == VEC else (1 << lanes) - 1))
        return rows, cols

    def index(self, iv: str, start: int, step: int) -> str:
        t = self.tmp()
        self.emit(f"  {t} = mul i64 {iv}, {step}")
        u = self.tmp()
        self.emit(f"  {u} = add i64 {t}, {start}")
        return u

    def panel_schedule(self, rows, cols) -> None:
        """a holds A: for each column block, pack its panel of b, then stream the row tiles
        of A past it (the panel stays in L1/L2, A's rows are read sequentially)."""
        s = self.s
        for pj, (j0, tj, nv, mask) in enumerate(cols):
            def col_body(jv, pj=pj, j0=j0, nv=nv, mask=mask):
                col = self.index(jv, j0, nv * VEC)
                self.pack_b(f"pb{pj}", "%pack", col, nv, mask)
                for pi, (i0, ti, mr) in enumerate(rows):
                    def row_body(iv, pi=pi, i0=i0, mr=mr):
                        row = self.index(iv, i0, mr)

                        def a_elem(kk, r, row=row):
                            t = self.tmp()
                            self.emit(f"  {t} = add i64 {row}, {r}")
                            return self.gep("%a", self.mul(t, s.k), kk)
                        self.tile(f"k{pj}_{pi}", row, col, mr, nv, mask, a_elem, "%pack")
                    self.loop(f"i{pj}_{pi}", ti, row_body)
            self.loop(f"j{pj}", tj, col_body)

    def packed_schedule(self, rows, cols) -> None:
        """a holds A^T (its rows of A are strided): pack all of b into panels once, then for
        each row tile pack its ``k x mr`` slice of A and run it against every panel."""
        s = self.s
        offsets, top = [], 0
        for _, tj, nv, _ in cols:
            offsets.append(top)
            top += tj * s.k * nv * VEC
        self.emit(f"  %bpk = alloca float, i64 {top}, align 64",
                  f"  %apk = alloca float, i64 {s.k * max(r[2] for r in rows)}, align 64")
        for pj, (j0, tj, nv, mask) in enumerate(cols):
            def pack_body(jv, pj=pj, j0=j0, nv=nv, mask=mask):
                col = self.index(jv, j0, nv * VEC)
                dst = self.gep("%bpk", offsets[pj], self.mul(jv, s.k * nv * VEC))
                self.pack_b(f"pb{pj}", dst, col, nv, mask)
            self.loop(f"pj{pj}", tj, pack_body)
        for pi, (i0, ti, mr) in enumerate(rows):
            def row_body(iv, pi=pi, i0=i0, mr=mr):
                row = self.index(iv, i0, mr)
                self.pack_a(f"pa{pi}", row, mr)
                for pj, (j0, tj, nv, mask) in enumerate(cols):
                    def col_body(jv, pj=pj, j0=j0, nv=nv, mask=mask):
                        col = self.index(jv, j0, nv * VEC)
                        panel = self.gep("%bpk", offsets[pj], self.mul(jv, s.k * nv * VEC))

                        def a_elem(kk, r, mr=mr):
                            return self.gep("%apk", self.mul(kk, mr), r)
                        self.tile(f"k{pj}_{pi}", row, col, mr, nv, mask, a_elem, panel)
                    self.loop(f"j{pi}_{pj}", tj, col_body)
            self.loop(f"i{pi}", ti, row_body)

    def function(self) -> str:
        s = self.s
        rows, cols = self.parts()
        self.emit("entry:")
        if s.trans_a:
            self.packed_schedule(rows, cols)
        else:
            self.emit(f"  %pack = alloca float, i64 {s.k * cols[0][2] * VEC}, align 64")
            self.panel_schedule(rows, cols)
        self.emit("  ret void")
        return (f"define internal void @{self.fn}(ptr noalias %a, ptr noalias %b, "
                f"ptr noalias %c, ptr noalias %c0) {{\n" + "\n".join(self.lines) + "\n}\n")


def _mask(bits: int) -> str:
    return "<" + ", ".join(f"i1 {'true' if bits >> i & 1 else 'false'}"
                           for i in range(VEC)) + ">"


def render_matmul(step, fn: str, loop_md) -> str:
    """The LLVM function ``void @fn(ptr a, ptr b, ptr c, ptr c0)`` computing ``step``
    (``c0`` is read only when ``step.beta != 0``); ``loop_md()`` gives each back edge's loop
    metadata suffix (the module renderer's, which disables unrolling)."""
    return _Writer(step, fn, loop_md).function()
