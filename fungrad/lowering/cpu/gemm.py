"""The float32 matmul library: one generic register-blocked gemm, compiled once per process.

``c = alpha * op(a) @ op(b) + beta * c0`` for row-major matrices with run-time shapes and row
strides, ``a`` either way (``[m, k]`` or, ``trans_a``, ``[k, m]``), ``b`` either way (``[k, n]``
or, ``trans_b``, ``[n, k]``: the backward products ``dy @ W^T``), not both transposed. BLAS can
only accumulate into its own output (``beta * c``), so ``w - lr * grad`` through BLAS needs
``w`` copied into the output first; here the epilogue reads ``c0`` (the weights) and writes
``c`` (the new weights) directly, one pass over the weight-sized arrays fewer.

Why a library: a specialised copy of the kernel per product (shapes baked in) made the MLP
step's module hold six of them, half of its LLVM compile time. Now every program's module calls
the one native function ``@fg_matmul_f32`` (:func:`library_decl`, cblas-like argument order)::

    void fg_matmul_f32(i32 trans, i64 m, i64 n, i64 k, float alpha, ptr a, i64 lda,
                       ptr b, i64 ldb, float beta, ptr c0, ptr c, i64 ldc)

(``trans``: bit 0 for A transposed, bit 1 for b transposed, bit 2 for b *packed*.)

A packed b (:func:`pack_b`) is ``op(b)`` laid out in the panels the schedule reads:
``[ceil(n / NR), k, NR]`` floats, panel ``q`` row ``kk`` holding ``op(b)[kk, q*NR:][:NR]``
(zero past n). The schedule then reads its panels in place instead of packing b per call. A
product inside a loop whose b does not change (an LSTM's gate weights, forward ``[x, h] @ W``
and backward ``dz @ W^T``) gets b packed once before the loop (``fusion.Gemm.b_packed``): at
the LSTM's 32 x 320 x 1024 packing was a fixed ~55 us of the call's 255 (W), ~100 us of 287
(W^T), per step.

``c0`` shares ``c``'s row stride and may be ``c`` itself; it is read only when ``beta != 0``
(so ``beta = 0`` ignores NaNs in it, like BLAS). Its module is hand-vectorised IR (explicit
``<16 x float>`` operations, SSA written directly), so it skips the IR optimiser and only runs
O3 code generation; it is compiled on first use (:func:`ensure_library`, thread safe: under
``cpu.llvm_lock``), stored in the on-disk cache like any module, registered with
``llvm.add_symbol`` and kept for the life of the process (forked children inherit it).

Two functions: the exported one holds the whole schedule, one loop nest for every layout
(run-time flags choose how b is packed and A read), and calls one register tile,
``@fg_mm_tile``, of ``mr x nr`` sized to the host's vector registers (:class:`Geometry`:
8 x 32 with AVX-512, 16 ``<16 x float>`` accumulators as phis; 6 x 16 with AVX2, 12
``<8 x float>``; per k step one vector load of b per vector of columns, one broadcast of A
per row, one fma per accumulator; outputs of at most one vector of columns run the first
vector only) and its epilogue (``alpha * acc +
beta * c0``, or ``+ c`` after the first k block; masked at the right edge, row by row to the
bottom edge). Per k block and column block, pack the block's panels of b (``kc x NR``,
contiguous, zero past n: the k loop never walks b at its power-of-two row stride; copied row by
row of b, each row read left to right; from b^T, 16 x 16 blocks transposed in registers), then
run every row tile against every panel:

- A is ``[m, k]``: column blocks of one panel, A's rows read in place while the panel stays
  in cache; k blocks of ``kc_wide`` (128) for outputs wider than 16 columns from b in rows
  (the panel, 16 KiB, stays in L1: 3-10% faster at the MLP's forward shapes than ``KC``,
  whose 64 KiB panel streams from L2 for every row tile), else ``KC`` (narrow outputs and
  b^T gained nothing; and c past ``C_L2`` floats: every k block reads and writes c from L3,
  so 1024^3 ran at 91 GFLOP/s with ``kc_wide`` and 101-105 with ``KC``, OpenBLAS 98-102).
  These are the AVX-512 tile's choices; the AVX2 tile packs whole rows of b instead
  (:class:`Geometry`).
- A^T is ``[k, m]`` (A's rows strided): column blocks of as many panels as the ``B_FLOATS``
  budget holds; per two row tiles their ``kc x 2 MR`` slice of A^T is packed (interleaved: one
  vector copy per k step, each cache line of A^T read once; packing per tile read each twice
  and cost the narrow ``dW = x^T @ dy`` of a 10-class output a tenth of its time) and each tile
  runs against every panel, so each tile of c (the weights of an SGD update) is read and
  written in row order. Packing the column block's panels row by row of b (rather than
  panel by panel: a new cache line every ``ldb`` floats, which the hardware prefetcher does not
  follow) made the MLP's ``dW1`` 2-7% and ``dW2`` 1-9% faster. The same for A in place (all panels
  first, then panel by panel) was 3-9% slower: the panels then come from L2, not L1, and a
  software prefetch of the next panel's lines during the tiles gained nothing measurable.

Long contractions: each k block's tile sums start from zero and are added into c, so c took
``k / kc`` serial additions (64x64 @ k = 1e6: 37-41 eps of ``|a| @ |b|`` off on positive data).
The k blocks past the first ``SUPER`` (64) therefore run in super-blocks of ``SUPER`` blocks
that sum into a scratch C (``m x ldc`` floats, ``aligned_alloc``-ed per call when k is that
long), added into c after each super-block (one vector pass over m x n): c takes
``k / (SUPER * kc)`` additions. 64x64x1e6 5 eps, 8x8x1e6 17 -> 1.7, 256x256x65536 12 -> 2.1,
at the same speed within 1.5% (one core); shorter products run as before.

The constants ``KC``, ``C_L2``, ``B_FLOATS`` and ``SUPER`` below were tuned on Zen 4 (AVX-512,
1 MiB L2) and serve both tiles; what differs per tile is in :class:`Geometry`.

These are the loop orders of the specialised kernels this library replaced, which ran the MLP's
products at OpenBLAS's speed. One loop nest instead of one function per layout cut
the library's code generation by a fifth at the same speed. Rows past m repeat row m-1 (their
results are never stored); the packed buffers live on the stack (``B_FLOATS + 2 * MR * KC``
floats, 544 KiB).

Against OpenBLAS on one core at the MLP's shapes (same process, best of 40 runs of 3 ms,
Zen 4): ``x @ W1`` 0.90x BLAS's time, ``h @ W2`` 0.95x, ``h @ W3`` 0.95x, ``dy @ W^T`` 0.85x with W
512 x 512 (BLAS takes its slower NT path) and 0.93x with W 512 x 10; the weight updates
``W - lr * x^T @ dy`` 1.1x (W 512 x 512 and 784 x 512) and 1.15x (512 x 10), BLAS timed updating
its output in place (its callers first copy ``c0`` there, which the times leave out).

``supports`` keeps the shapes this runs at OpenBLAS's speed or better on one core (A in place
up to 1024 x 1024: 1024^3 0.96x BLAS's time; A^T at any size; one panel of b with A of any
height); larger products stay with BLAS, which blocks for L3. Where several threads may run,
products of ``SERIAL_WORK`` or more are split into column blocks over the native thread pool,
one library call per block (``gemm_step._split_columns``; narrow ones into row blocks,
``_split_rows``).
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import numpy as np

from fungrad.lowering.cpu.llvm_types import literal

__all__ = [
    "SYMBOL",
    "compiled",
    "ensure_library",
    "gemm",
    "library_call",
    "library_decl",
    "library_ir",
    "pack_b",
    "packed_b_floats",
    "supports",
]

#: from this many multiply-adds on, a call that may use several threads splits the product into
#: column blocks over them (gemm_step._split_columns)
SERIAL_WORK = 1 << 21
MAX_STACK_FLOATS = 1 << 17  # supports(), A in place: a k x nr panel of b within 512 KiB
#: supports(): A in place up to 4 MiB (1024 x 1024), re-read from L3 per panel of b at 2 bytes
#: per cycle; one core, best of 8 interleaved, lib/OpenBLAS time: 1024^3 0.96, b^T 0.94,
#: 2048x1024x512 0.96, 512x2048x512 0.94, 1024x64x1024 0.93, 1024x128x1024 1.01
MAX_A_FLOATS = 1 << 20
KC = 512  # k block (A^T, b^T or narrow outputs): an 8 x KC slice of A (16 KiB) stays in L1
C_L2 = 1 << 17  # floats of c (512 KiB) from which wide products take KC, not kc_wide
B_FLOATS = 1 << 17  # packed b (512 KiB): one panel, or a column block of panels for A^T
SUPER = 64  # k blocks per super-block: later super-blocks sum into a scratch C, then into c
SYMBOL = "fg_matmul_f32"


@dataclass(frozen=True)
class Geometry:
    """The register tile and blocking for the host's vector registers: ``mr`` rows of ``nv``
    vectors of ``vec`` float32 lanes (``mr * nv`` accumulators), ``nr = nv * vec`` columns of
    a packed panel of b (a power of two); with A in place and an output wider than one
    vector, k blocks of ``kc_wide`` and column blocks of one panel (``pack_all`` False: the
    panel is packed, then every row tile runs against it while it stays in L1) or of every
    panel the packed-b budget holds (``pack_all``: b's rows read whole, left to right).

    AVX-512 (32 zmm registers, tuned on Zen 4): 8 x 2 vectors of 16 (16 accumulators), k
    blocks of 128, one panel per block. AVX2 has 16 ymm registers: 6 x 2 vectors of 8 (12
    accumulators, 2 of b, 1 broadcast of A), the tile BLIS and OpenBLAS use there. The
    AVX-512 tile compiled for an AVX2 host (each ``<16 x float>`` two ymm registers, 32
    accumulators in 16 registers) spilled every k step: 13-19 GFLOP/s on Zen 3 against
    OpenBLAS's 75-90. On Zen 3 (512 KiB L2), with b's rows read whole and k blocks of 256,
    ``128 x 784 @ 784 x 512`` ran 5-14% faster than with one panel and k blocks of 128 (an 8
    MiB buffer touched between calls, as in a training step where the weights were last
    read a step earlier: 62 -> 68-73 GFLOP/s); packing one panel read one line per row of
    b at b's row stride, a stream the hardware prefetcher does not follow (a software
    prefetch of the next panel during the tiles gained ~5%, the whole rows more).
    ``prefetch``: the packing of A^T's slice for two row tiles prefetches the next two
    tiles' slice (``dW = x^T @ dy`` with x from L3: 3-4%), and each of A^T's tiles the lines
    of c of the next (4-7%: ``_Writer.tile``). With A in place the row tiles run in blocks
    of ``mc`` rows, every panel against one block before the next (A's block, 96 x 512
    floats, stays in L2: 1024^3 89 -> 93 GFLOP/s on Zen 3, whose peak is 103)."""

    vec: int
    mr: int
    nv: int
    kc_wide: int
    pack_all: bool
    prefetch: bool
    mc: int | None  # None: no row blocks

    def __post_init__(self):
        # a row block's last tile must not reach into the next block (c += twice)
        if self.mc is not None and self.mc % self.mr:
            raise ValueError(f"gemm.Geometry: mc={self.mc} is not a multiple of mr={self.mr}")

    @property
    def nr(self) -> int:
        return self.nv * self.vec


AVX512 = Geometry(vec=16, mr=8, nv=2, kc_wide=128, pack_all=False, prefetch=False, mc=None)
AVX2 = Geometry(vec=8, mr=6, nv=2, kc_wide=256, pack_all=True, prefetch=True, mc=96)


@functools.cache
def geometry() -> Geometry:
    """The host's register tile (:class:`Geometry`): :data:`AVX512` where the CPU has it,
    else :data:`AVX2` (which LLVM also lowers, slower, on older x86 and other CPUs)."""
    from fungrad.lowering.cpu import compiler as cpu

    return AVX512 if _has_avx512(cpu.host().features) else AVX2


def _has_avx512(features: str) -> bool:
    return "+avx512f" in features.split(",")


def runs(step) -> bool:
    """Whether the library computes this Gemm at all (any size: it blocks for the cache with
    fixed-size packed buffers): float32, one matrix, not both operands transposed. Without BLAS
    the renderer runs every such product here."""
    return (
        step.c.dtype == np.dtype(np.float32)
        and not (step.trans_a and step.trans_b)
        and step.batch == 1
        and min(step.m, step.n, step.k) > 0
    )


def supports(step) -> bool:
    """Whether the library runs this :class:`~fungrad.lowering.fusion.Gemm` well: float32, not
    both operands transposed, one matrix, and, with A in place, A small enough to be re-read
    from L2 per panel of b, or one panel of b (at most ``NR`` columns, three quarters of their
    vector lanes used) so that A is read once. A^T runs at any size (its slices are packed per
    row tile pair; one core against OpenBLAS on one thread: 0.90-1.03x its time from 144 x 32
    x 12544 to 2048 x 2048 x 512, the CNN's and transformer's weight gradients), as do the
    convolutions' tall products (12544 x 32 x 144: 0.81x, 12544 x 16 x 288: 0.70x; a
    20-column one 1.24x: BLAS keeps it). Larger products with A in place stay with BLAS, which
    blocks for L3. Products of at least ``SERIAL_WORK`` split over threads where several may
    run (``gemm_step.render_gemm``); calling BLAS there would start OpenBLAS's own spinning
    threads beside fungrad's (the CNN step on two cores: 10.5 ms with OpenBLAS on one thread,
    15-17 ms with its default two)."""
    if not (
        step.c.dtype == np.dtype(np.float32)
        and not (step.trans_a and step.trans_b)
        and step.batch == 1
        and min(step.m, step.n, step.k) > 0
    ):
        return False
    if step.trans_a:
        return True
    g = geometry()
    if step.k * g.nr > MAX_STACK_FLOATS:
        return False
    # one panel of b: A is read once, however large (unless most vector lanes would idle)
    one_panel = step.n <= g.nr and 4 * step.n >= 3 * -(-step.n // g.vec) * g.vec
    return one_panel or step.m * step.k <= MAX_A_FLOATS


def _f(x: float) -> str:
    return literal(x, np.dtype(np.float32))


def library_decl() -> str:
    """The LLVM ``declare`` of ``@fg_matmul_f32`` for modules that call the library."""
    return (
        f"declare void @{SYMBOL}(i32, i64, i64, i64, float, ptr, i64, ptr, i64, float, ptr, "
        "ptr, i64)"
    )


def _trans(trans_a: bool, trans_b: bool, b_packed: bool = False) -> int:
    """The library's first argument: bit 0 for A transposed, bit 1 for b transposed, bit 2
    for b packed (:func:`pack_b`)."""
    return int(trans_a) | int(trans_b) << 1 | int(b_packed) << 2


def packed_b_floats(n: int, k: int) -> int:
    """Floats of op(b) (``[k, n]``) packed in panels (:func:`pack_b`)."""
    nr = geometry().nr
    return -(-n // nr) * k * nr


def library_call(step, a: str, b: str, c: str, c0: str) -> str:
    """The IR line calling the library for ``step`` with the pointer values ``a``, ``b``, ``c``
    and ``c0`` (read only when ``step.beta != 0``); the module that holds it must declare
    :func:`library_decl` (the LLVM renderer does when it sees the symbol). A direct call: a
    wrapper function per product cost ~3 ms of LLVM time each (every function pays LLVM's
    per-function pass pipeline), and the call is all a wrapper held."""
    return block_call(step, step.n, a, b, c, c0)


def block_call(step, n, a: str, b: str, c: str, c0: str, m=None) -> str:
    """The IR line calling the library for ``n`` columns and ``m`` rows (ints or ``i64``
    values; default all rows) of ``step``'s product, ``a``, ``b``, ``c`` and ``c0`` pointing
    at the first of them; the leading dimensions stay the whole product's (``gemm_step``
    splits products into column or row blocks; with b packed, a block's b starts ``k`` floats
    per column further on)."""
    lda = step.m if step.trans_a else step.k
    ldb = step.k if step.trans_b else step.n
    trans = _trans(step.trans_a, step.trans_b, step.b_packed)
    return (
        f"  call void @{SYMBOL}(i32 {trans}, i64 {step.m if m is None else m}, "
        f"i64 {n}, i64 {step.k}, float {_f(step.alpha)}, ptr {a}, i64 {lda}, ptr {b}, "
        f"i64 {ldb}, "
        f"float {_f(step.beta)}, ptr {c0}, ptr {c}, i64 {step.n})"
    )


# -- the library's IR ------------------------------------------------------------------------

_ARGS = (
    "i64 %m, i64 %n, i64 %k, float %alpha, ptr %a, i64 %lda, ptr %b, i64 %ldb, "
    "float %beta, ptr %c0, ptr %c, i64 %ldc"
)
_VPERM = "llvm.x86.avx512.vpermi2var.ps.512"
_TILE_ARGS = (
    "ptr %an, i64 %rs, i64 %s, ptr %panel, i64 %kc, i1 %narrow, ptr %dst, ptr %src, "
    "i64 %ldc, i64 %left, i64 %cleft, i1 %rd, float %bt, float %alpha"
)


class _Writer:
    """Emits ``@fg_matmul_f32`` (:meth:`function`) and ``@fg_mm_tile`` (:meth:`tile_function`)."""

    def __init__(self, g: Geometry, avx512: bool, symbol: str = SYMBOL):
        self.mr, self.nv, self.nr, self.vec = g.mr, g.nv, g.nr, g.vec
        self.kc_wide, self.pack_all, self.prefetch = g.kc_wide, g.pack_all, g.prefetch
        self.mc = g.mc
        self.ones = "<" + ", ".join(["i1 true"] * g.vec) + ">"
        self.avx512 = avx512 and g.vec == 16  # vpermi2ps for b^T's blocks (see transpose)
        self.symbol = symbol
        self.masked_lanes = {g.vec}  # vector widths of the masked loads and stores written
        self.perms: dict[tuple[int, ...], str] = {}  # shuffle index vectors -> their slots
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

    def splat(self, scalar: str, lanes: int | None = None) -> str:
        lanes = lanes or self.vec
        vty = f"<{lanes} x float>"
        ins = self.op(f"insertelement {vty} poison, float {scalar}, i64 0")
        return self.op(f"shufflevector {vty} {ins}, {vty} poison, <{lanes} x i32> zeroinitializer")

    def lane_mask(self, count: str, lanes: int | None = None) -> str:
        """``<lanes x i1>``: lane j set when ``j < count`` (an i64, possibly <= 0 or > lanes),
        built from the bits ``(1 << count) - 1`` (a k-register move on AVX-512), or without
        AVX-512 as ``<0, 1, ..> < splat(count)`` (one vector compare: the bits' conversion
        cost the AVX2 library 10% more code generation, its products the same)."""
        lanes = lanes or self.vec
        lo = self.op(f"icmp slt i64 {count}, 0")
        c0 = self.op(f"select i1 {lo}, i64 0, i64 {count}")
        c1 = self.umin(c0, lanes)
        if not self.avx512:  # one vector compare (vpcmpgtd)
            c32 = self.op(f"trunc i64 {c1} to i32")
            ins = self.op(f"insertelement <{lanes} x i32> poison, i32 {c32}, i64 0")
            spl = self.op(
                f"shufflevector <{lanes} x i32> {ins}, <{lanes} x i32> poison, "
                f"<{lanes} x i32> zeroinitializer"
            )
            iota = ", ".join(f"i32 {j}" for j in range(lanes))
            return self.op(f"icmp slt <{lanes} x i32> <{iota}>, {spl}", "mk")
        bits = self.op(f"sub i64 {self.op(f'shl i64 1, {c1}')}, 1")
        small = self.op(f"trunc i64 {bits} to i{lanes}")
        return self.op(f"bitcast i{lanes} {small} to <{lanes} x i1>", "mk")

    def masked_load(self, p: str, mask: str, lanes: int | None = None) -> str:
        lanes = lanes or self.vec
        self.masked_lanes.add(lanes)
        vty = f"<{lanes} x float>"
        return self.op(
            f"call {vty} @llvm.masked.load.v{lanes}f32.p0(ptr {p}, i32 4, "
            f"<{lanes} x i1> {mask}, {vty} zeroinitializer)",
            "v",
        )

    def loop(
        self, name: str, start: str | int, stop: str, step: int | str, body, *, guarded: bool
    ) -> None:
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
        e(
            f"  br label %{name}.l",
            f"{name}.l:",
            f"  {iv}.n = add nuw nsw i64 {iv}, {step}",
            f"  %{name}.c = icmp slt i64 {iv}.n, {stop}",
            f"  br i1 %{name}.c, label %{name}.h, label %{name}.x",
            f"{name}.x:",
        )

    # pieces ---------------------------------------------------------------------------------
    def mul(self, x: str, c: int | str) -> str:
        return self.op(f"mul i64 {x}, {c}")

    def col_masks(self, col: str) -> list[str]:
        """Masks of the panel's columns that exist (``col + lane < n``), one per vector."""
        left = self.op(f"sub i64 %n, {col}")
        return [
            self.lane_mask(self.op(f"sub i64 {left}, {v * self.vec}") if v else left)
            for v in range(self.nv)
        ]

    def k_block(self, pc: str) -> str:
        """Per k block: its length (returned) and what its tiles add: ``beta * c0`` in the
        first block, ``c`` itself in later ones (``%X.rd``: read it at all; ``%X.bt``: its
        factor; ``%X.src``: where)."""
        x, e = self.x, self.emit
        kc = self.umin(self.op(f"sub i64 %k, {pc}"), "%kcb")
        # the first super-block (SUPER k blocks) adds into c, later ones into the scratch %sc
        # (added to c after each, see super_end): c then takes k / (SUPER * kc) sums, not
        # k / kc. bt = -0.0 when nothing is read: the masked load gives +0, -0 * +0 = -0, and
        # -0 + t == t for every t (-0 and NaN included), so the sum needs no select
        e(
            f"  %{x}.sb = urem i64 {pc}, %sbk",
            f"  %{x}.later = icmp ne i64 %{x}.sb, 0",
            f"  %{x}.first = icmp ult i64 {pc}, %sbk",
            f"  %{x}.dst = select i1 %{x}.first, ptr %c, ptr %sc",
            f"  %{x}.fb = and i1 %{x}.first, %bnz",
            f"  %{x}.rd = or i1 %{x}.later, %{x}.fb",
            f"  %{x}.b0 = select i1 %{x}.fb, float %beta, float -0.0",
            f"  %{x}.bt = select i1 %{x}.later, float 1.0, float %{x}.b0",
            f"  %{x}.src = select i1 %{x}.later, ptr %{x}.dst, ptr %c0",
        )
        return kc

    def super_end(self, pc: str) -> None:
        """After the last k block of a super-block past the first: ``c += scratch`` over the
        m x n results (row stride ldc in both)."""
        x, e = self.x, self.emit
        nxt = self.op(f"add i64 {pc}, %kcb")
        at_end = self.op(f"icmp eq i64 {self.op(f'urem i64 {nxt}, %sbk')}, 0")
        last = self.op(f"icmp sge i64 {nxt}, %k")
        done = self.op(f"or i1 {at_end}, {last}")
        go = self.op(f"and i1 {done}, {self.op(f'xor i1 %{x}.first, true')}")
        e(f"  br i1 {go}, label %{x}.ad0, label %{x}.adx", f"{x}.ad0:")

        vty, mty = f"<{self.vec} x float>", f"<{self.vec} x i1>"

        def row(i):
            off = self.mul(i, "%ldc")
            cr, sr = self.gep("%c", off), self.gep("%sc", off)

            def cols(j):
                mask = self.lane_mask(self.op(f"sub i64 %n, {j}"))
                pc_, ps = self.gep(cr, j), self.gep(sr, j)
                a, b = self.masked_load(pc_, mask), self.masked_load(ps, mask)
                e(
                    f"  call void @llvm.masked.store.v{self.vec}f32.p0({vty} "
                    f"{self.op(f'fadd {vty} {a}, {b}')}, ptr {pc_}, i32 4, {mty} {mask})"
                )

            self.loop(f"{x}.adj", 0, "%n", self.vec, cols, guarded=False)

        self.loop(f"{x}.adi", 0, "%m", 1, row, guarded=False)
        e(f"  br label %{x}.adx", f"{x}.adx:")

    def pack_rows(self, jc: str, np_: str, kc: str, panel_size: str) -> None:
        """The ``np_`` panels of b's k block from column ``jc`` (``panel p, row kk`` holds
        ``b[pc + kk, jc + p * NR:][:NR]``, zero past n; ``%ps`` floats per row, 16 for outputs
        of at most 16 columns, so their panel takes half the cache), copied row by row of b:
        with several panels (A^T's column blocks) each row is read from left to right, a
        stream the hardware prefetcher follows; panel by panel (down a column slice of b, a
        new cache line every ``ldb`` floats, two rows per page at the MLP's strides) the copy
        waited on memory (with one panel per block, A in place, it still does). Contiguous
        panels keep the k loop from walking b at its row stride (a power of two in most
        networks, which maps every row to the same few L1 sets)."""
        x, e = self.x, self.emit
        mty, vty = f"<{self.vec} x i1>", f"<{self.vec} x float>"
        last = self.op(f"sub i64 {np_}, 1")
        edge = self.col_masks(self.op(f"add i64 {jc}, {self.mul(last, self.nr)}"))
        src0 = self.gep("%b", self.op(f"add i64 {self.mul(f'%{x}.pc', '%ldb')}, {jc}"))

        def row(kk):
            src = self.gep(src0, self.mul(kk, "%ldb"))
            to = self.gep("%bpk", self.mul(kk, "%ps"))

            def panel(p):
                at_edge = self.op(f"icmp eq i64 {p}, {last}")
                s, t = self.gep(src, self.mul(p, self.nr)), self.gep(to, self.mul(p, panel_size))
                for v in range(self.nv):
                    mask = self.op(f"select i1 {at_edge}, {mty} {edge[v]}, {mty} {self.ones}", "mk")
                    val = self.masked_load(self.gep(s, v * self.vec), mask)
                    if v and self.avx512:  # (narrow outputs: panels of one vector per k step)
                        e(
                            f"  call void @llvm.masked.store.v{self.vec}f32.p0({vty} {val}, "
                            f"ptr {self.gep(t, v * self.vec)}, i32 64, {mty} %wide.m)"
                        )
                    elif v:  # (AVX2: a branch, not a microcoded masked store)
                        go = self.tmp("w")[1:]
                        e(f"  br i1 %narrow, label %{go}.x, label %{go}", f"{go}:")
                        e(f"  store {vty} {val}, ptr {self.gep(t, v * self.vec)}, align 64")
                        e(f"  br label %{go}.x", f"{go}.x:")
                    else:
                        e(f"  store <{self.vec} x float> {val}, ptr {t}, align 64")

            self.loop(f"{x}.rp", 0, np_, 1, panel, guarded=False)

        self.loop(f"{x}.rb", 0, kc, 1, row, guarded=True)

    def pack_bt(self, dst: str, col: str, kc: str) -> None:
        """:meth:`pack_rows` for ``b`` transposed (``[n, k]`` rows: ``b[pc + kk, col + j]`` is
        ``bt[col + j, pc + kk]``): per 16 k steps and vector of the panel, 16 vector loads
        along rows of b^T (masked past kc; rows past n repeat row n-1, whose results are never
        stored) and a 16 x 16 transpose in registers. Rows of the panel past kc (up to the
        next multiple of 16) are written but never read."""
        x = self.x
        base = self.gep("%b", self.op(f"add i64 {self.mul(col, '%ldb')}, %{x}.pc"))
        last = self.op(f"sub i64 {self.op(f'sub i64 %n, {col}')}, 1")

        def row(j):  # the row pointers of the panel, in %btp
            p = self.gep(base, self.mul(self.umin(last, j), "%ldb"))
            self.emit(f"  store ptr {p}, ptr {self.op(f'getelementptr ptr, ptr %btp, i64 {j}')}")

        self.loop(f"{x}.pr", 0, self.nr, 1, row, guarded=False)

        def block(kk0):
            mask = self.lane_mask(self.op(f"sub i64 {kc}, {kk0}"))
            to = self.gep(dst, self.mul(kk0, "%ps"))

            def vector(j0):
                ptrs = self.op(f"getelementptr ptr, ptr %btp, i64 {j0}")
                rows = [
                    self.masked_load(
                        self.gep(self.op(f"load ptr, ptr {self.gep_ptr(ptrs, r)}"), kk0), mask
                    )
                    for r in range(self.vec)
                ]
                q = self.gep(to, j0)
                for kk, v in enumerate(self.transpose(rows)):
                    if kk:
                        q = self.gep(q, "%ps")
                    self.emit(f"  store <{self.vec} x float> {v}, ptr {q}, align 64")

            self.loop(f"{x}.pv", 0, "%ps", self.vec, vector, guarded=False)

        self.loop(f"{x}.pt", 0, kc, self.vec, block, guarded=True)

    def transpose(self, rows: list[str]) -> list[str]:
        """The ``vec`` columns of ``vec`` rows ``<vec x float>`` (16 or 8), in two-vector
        shuffles that are one instruction each: interleave 32-bit, then 64-bit pairs within
        128-bit lanes (lane L of vector 4i + q then holds column 4L + q of rows 4i..4i+3),
        then transpose the 128-bit lanes of each q: 4 x 4 in two rounds of lane shuffles (16
        lanes, 64 shuffles), 2 x 2 in one (8 lanes, 24 shuffles).

        With AVX-512 each shuffle is a ``vpermi2ps`` whose index vector is loaded (volatile)
        from the stack (:attr:`perms`, stored at the function's entry): instruction selection
        then has nothing to match or combine. As ``shufflevector`` with constant masks, the
        16-lane network cost ~15 ms of code generation (x86 shuffle lowering and combining), a
        third of the whole library's."""
        vec = self.vec
        vty = f"<{vec} x float>"

        def shuf(x, y, idx):
            if self.avx512:
                slot = self.perms.setdefault(tuple(idx), f"%perm{len(self.perms)}")
                ix = self.op(f"load volatile <{vec} x i32>, ptr {slot}, align 64", "ix")
                return self.op(
                    f"call {vty} @{_VPERM}({vty} {x}, <{vec} x i32> {ix}, {vty} {y})", "s"
                )
            mask = ", ".join(f"i32 {j}" for j in idx)
            return self.op(f"shufflevector {vty} {x}, {vty} {y}, <{vec} x i32> <{mask}>", "s")

        lanes = range(0, vec, 4)
        lo32 = [i for j in lanes for i in (j, j + vec, j + 1, j + vec + 1)]
        lo64 = [i for j in lanes for i in (j, j + 1, j + vec, j + vec + 1)]
        t = [shuf(rows[i & ~1], rows[i | 1], [j + 2 * (i & 1) for j in lo32]) for i in range(vec)]
        u = [
            shuf(
                t[i & ~3 | i >> 1 & 1],
                t[(i & ~3 | i >> 1 & 1) + 2],
                [j + 2 * (i & 1) for j in lo64],
            )
            for i in range(vec)
        ]
        out = [None] * vec
        if vec == 8:  # column 4L + q: lane L of u[q] (rows 0-3) and of u[4 + q] (rows 4-7)
            for q in range(4):
                for lane in range(2):
                    idx = [i + 4 * lane for i in (0, 1, 2, 3, 8, 9, 10, 11)]
                    out[4 * lane + q] = shuf(u[q], u[4 + q], idx)
            return out
        even = [i for j in (0, 8, 16, 24) for i in range(j, j + 4)]  # lanes 0, 2 of x and y
        odd = [i + 4 for i in even]
        for q in range(4):
            w = [u[4 * i + q] for i in range(4)]
            h = [
                shuf(w[0], w[1], even),
                shuf(w[0], w[1], odd),
                shuf(w[2], w[3], even),
                shuf(w[2], w[3], odd),
            ]
            for lane in range(4):
                out[4 * lane + q] = shuf(h[lane & 1], h[(lane & 1) + 2], odd if lane & 2 else even)
        return out

    # the register tile (@fg_mm_tile) --------------------------------------------------------
    def k_loop(self, tag: str, starts: list[str], kc: str, nv: int) -> list[list[str]]:
        """The register tile's k loop (blocks ``tag.*``, entered at ``%tag.kp``) over
        ``%panel``, for the first ``nv`` vectors of each row (the others stay zero); returns
        the final accumulators (rows of vectors; zero when kc is 0). Row r of A is read at
        ``starts[r] + s * kk`` (base + index addressing: one offset for all rows)."""
        e, vty, mr = self.emit, f"<{self.vec} x float>", self.mr
        acc = [[f"%{tag}.a{r}_{v}" for v in range(nv)] for r in range(mr)]
        new = [[f"{a}.n" for a in row] for row in acc]
        go = self.op(f"icmp sgt i64 {kc}, 0")
        end = self.mul(kc, "%s")
        e(
            f"  br i1 {go}, label %{tag}.kl, label %{tag}.kx",
            f"{tag}.kl:",
            f"  %{tag}.o = phi i64 [0, %{tag}.kp], [%{tag}.o.n, %{tag}.kl]",
            f"  %{tag}.bp = phi ptr [%panel, %{tag}.kp], [%{tag}.bp.n, %{tag}.kl]",
        )
        for r in range(mr):
            for v in range(nv):
                e(
                    f"  {acc[r][v]} = phi {vty} [zeroinitializer, %{tag}.kp], "
                    f"[{new[r][v]}, %{tag}.kl]"
                )
        bvec = [  # (unaligned loads: a caller's packed b need not start on a cache line)
            self.op(f"load {vty}, ptr {self.gep(f'%{tag}.bp', v * self.vec)}, align 4", "b")
            for v in range(nv)
        ]
        for r in range(mr):
            p = self.gep(starts[r], f"%{tag}.o")
            spl = self.splat(self.op(f"load float, ptr {p}, align 4", "x"))
            for v in range(nv):
                e(
                    f"  {new[r][v]} = call {vty} @llvm.fma.v{self.vec}f32({vty} {spl}, "
                    f"{vty} {bvec[v]}, {vty} {acc[r][v]})"
                )
        e(
            f"  %{tag}.bp.n = getelementptr float, ptr %{tag}.bp, i64 {nv * self.vec}",
            f"  %{tag}.o.n = add nuw nsw i64 %{tag}.o, %s",
            f"  %{tag}.kc = icmp slt i64 %{tag}.o.n, {end}",
            f"  br i1 %{tag}.kc, label %{tag}.kl, label %{tag}.kx",
            f"{tag}.kx:",
        )
        return [
            [
                self.op(f"phi {vty} [zeroinitializer, %{tag}.kp], [{new[r][v]}, %{tag}.kl]", "f")
                if v < nv
                else "zeroinitializer"
                for v in range(self.nv)
            ]
            for r in range(mr)
        ]

    def epilogue(self, acc) -> None:
        """``dst = alpha * acc + bt * src`` (``src`` read only when ``rd``), straight from
        the registers: row by row while below ``left`` rows (branches cost less than per-row
        masks), masked to the ``cleft`` columns that exist.

        AVX2 has no mask registers: a masked store is ``vmaskmovps``, microcoded on AMD (Zen 3:
        about 12 cycles each), so tiles of full width there take a copy with plain loads and
        stores (and none of ``src`` unless ``rd``): 128 x 512 x 784 ran at 62 GFLOP/s with
        masked stores only. AVX-512's masked stores run at full speed: one path."""
        vty, mty, e = f"<{self.vec} x float>", f"<{self.vec} x i1>", self.emit
        alpha = bt = None
        if not self.avx512:
            alpha, bt = self.splat("%alpha"), self.splat("%bt")
            full = self.op(f"icmp sge i64 %cleft, {self.nr}")
            e(f"  br i1 {full}, label %ef, label %em", "ef:", "  br i1 %rd, label %er, label %ez")
            for tag in ("er", "ez"):
                e(f"{tag}:")

                def plain(src, dst, r, v, tag=tag):
                    t = self.op(f"fmul {vty} {alpha}, {acc[r][v]}")
                    if tag == "er":
                        old = self.op(f"load {vty}, ptr {self.gep(src, v * self.vec)}, align 4")
                        t = self.op(f"fadd {vty} {self.op(f'fmul {vty} {bt}, {old}')}, {t}")
                    e(f"  store {vty} {t}, ptr {self.gep(dst, v * self.vec)}, align 4")

                self.tile_rows(tag, plain)
            e("em:")
        masks = [
            self.lane_mask(self.op(f"sub i64 %cleft, {v * self.vec}") if v else "%cleft")
            for v in range(self.nv)
        ]
        reads = [self.op(f"select i1 %rd, {mty} {m}, {mty} zeroinitializer", "mk") for m in masks]
        if alpha is None:
            alpha, bt = self.splat("%alpha"), self.splat("%bt")

        def masked(src, dst, r, v):
            old = self.masked_load(self.gep(src, v * self.vec), reads[v])
            t = self.op(f"fmul {vty} {alpha}, {acc[r][v]}")
            u = self.op(f"fmul {vty} {bt}, {old}")
            val = self.op(f"fadd {vty} {u}, {t}")
            e(
                f"  call void @llvm.masked.store.v{self.vec}f32.p0({vty} {val}, "
                f"ptr {self.gep(dst, v * self.vec)}, i32 4, {mty} {masks[v]})"
            )

        self.tile_rows("e", masked)
        e("ex:")

    def tile_rows(self, tag: str, store) -> None:
        """``store(src, dst, r, v)`` for vector v of each row r of the tile that exists (below
        ``left``; blocks ``tag<r>``), ``src`` and ``dst`` pointing at the row; then on to
        ``%ex``."""
        e, src, dst = self.emit, "%src", "%dst"
        for r in range(self.mr):
            if r:
                ok = self.op(f"icmp sgt i64 %left, {r}")
                e(f"  br i1 {ok}, label %{tag}{r}, label %ex", f"{tag}{r}:")
                src, dst = self.gep(src, "%ldc"), self.gep(dst, "%ldc")
            for v in range(self.nv):
                store(src, dst, r, v)
        e("  br label %ex")

    def tile_function(self) -> str:
        """``@fg_mm_tile``: one register tile of ``MR x NR`` (16 ``<16 x float>`` accumulators
        as phis; per k step one vector load of the packed panel per 16 columns, one broadcast
        of A per row, one fma per accumulator; outputs of at most 16 columns, ``%narrow``, run
        the first vector only) and its epilogue; A's row r at ``%an + min(r, left - 1) * %rs``
        (rows past m repeat the last one), ``%s`` floats per k step. A function of its own:
        code generation costs grow faster than the code, and a call per tile is nothing beside
        its k loop."""
        self.lines, e, vty = [], self.emit, f"<{self.vec} x float>"
        e("entry:")
        last = self.op(f"sub i64 {self.umin('%left', self.mr)}, 1")
        starts = ["%an"] + [
            self.gep("%an", self.mul(self.umin(last, r), "%rs")) for r in range(1, self.mr)
        ]
        e("  br i1 %narrow, label %h.kp, label %w.kp", "w.kp:")
        wide = self.k_loop("w", starts, "%kc", self.nv)
        e("  br label %kj", "h.kp:")
        half = self.k_loop("h", starts, "%kc", 1)
        e("  br label %kj", "kj:")
        self.epilogue(
            [
                [self.op(f"phi {vty} [{w}, %w.kx], [{h}, %h.kx]", "f") for w, h in zip(wr, hr)]
                for wr, hr in zip(wide, half)
            ]
        )
        e("  ret void")
        return (
            f"define internal void @fg_mm_tile({_TILE_ARGS}) {{\n" + "\n".join(self.lines) + "\n}\n"
        )

    # schedules ------------------------------------------------------------------------------
    def tile(
        self, panel: str, kc: str, row: str, col: str, an: str = "%an", ahead: bool = False
    ) -> None:
        """Calls ``@fg_mm_tile`` for the tile of c at (row, col), A's rows from ``an``;
        ``ahead``: first prefetch the lines of c (and of what its epilogue reads) that the
        next tile along the row writes (past c's edge: harmless prefetches of other memory).
        With A^T (a weight gradient's update ``W - lr x^T @ dy``, W last touched a step
        earlier) on Zen 3: 784 x 512 x 128 4-7% faster; with A in place (tiles down a panel)
        the same prefetch of the tile below changed nothing, so only A^T's tiles take it."""
        x = self.x
        off = self.op(f"add i64 {self.mul(row, '%ldc')}, {col}")
        dst, src = self.gep(f"%{x}.dst", off), self.gep(f"%{x}.src", off)
        left, cleft = self.op(f"sub i64 %m, {row}"), self.op(f"sub i64 %n, {col}")
        if ahead:
            d, r = self.gep(dst, self.nr), self.gep(src, self.nr)
            for i in range(self.mr):
                if i:
                    d, r = self.gep(d, "%ldc"), self.gep(r, "%ldc")
                for q, rw in ((d, 1), (r, 0)):
                    self.emit(f"  call void @llvm.prefetch.p0(ptr {q}, i32 {rw}, i32 3, i32 1)")
        self.emit(
            f"  call void @fg_mm_tile(ptr {an}, i64 %rs, i64 %s, ptr {panel}, i64 {kc}, "
            f"i1 %narrow, ptr {dst}, ptr {src}, i64 %ldc, i64 {left}, i64 {cleft}, "
            f"i1 %{x}.rd, float %{x}.bt, float %alpha)"
        )

    def a_rows(self, row: str, kc: str) -> None:
        """Where the tile reads A for the rows from ``row``: ``%an``, its first row, then every
        ``%rs`` floats (``%s`` per k step): A's rows in place (``&A[row, pc]``) or, ``%ta``,
        from the slice of A^T packed here for this row tile and the next (``kc x 2 MR``,
        interleaved: one vector copy per k step, a whole cache line of A^T; read in place,
        A^T's strided rows would make the k loop wait on the cache)."""
        x, e, w = self.x, self.emit, 2 * self.mr
        # 0 for the first tile of the pair, else mr
        odd = self.op(f"and i64 {row}, {w - 1}" if w & (w - 1) == 0 else f"urem i64 {row}, {w}")
        first = self.op(f"icmp eq i64 {odd}, 0")
        e(
            f"  %{x}.pk = and i1 %ta, {first}",
            f"  br i1 %{x}.pk, label %{x}.ap, label %{x}.ad",
            f"{x}.ap:",
        )
        # the slice's rows in vectors of powers of two (12 floats for the AVX2 tile: 8 + 4)
        pieces, at = [], 0
        while at < w:
            size = min(self.vec, 1 << (w - at).bit_length() - 1)
            left = self.op(f"sub i64 %m, {row}")
            left = self.op(f"sub i64 {left}, {at}") if at else left
            pieces.append((at, size, self.lane_mask(left, size)))
            at += size
        src0 = self.gep("%a", self.op(f"add i64 {self.mul(f'%{x}.pc', '%lda')}, {row}"))

        def step(kk):
            src = self.gep(src0, self.mul(kk, "%lda"))
            vals = [
                self.masked_load(self.gep(src, at) if at else src, mask, size)
                for at, size, mask in pieces
            ]
            dst = self.gep("%apk", self.mul(kk, w))
            for (at, size, _), v in zip(pieces, vals):
                align = min(64, (w * 4) & -(w * 4), (at * 4 or 64) & -(at * 4 or 64))
                to = self.gep(dst, at) if at else dst
                e(f"  store <{size} x float> {v}, ptr {to}, align {align}")
            if self.prefetch:  # the next pair's slice: its first and last float's lines
                for at in (w, 2 * w - 1):
                    q = self.gep(src, at)
                    e(f"  call void @llvm.prefetch.p0(ptr {q}, i32 0, i32 3, i32 1)")

        self.loop(f"{x}.pa", 0, kc, 1, step, guarded=True)
        e(f"  br label %{x}.ad", f"{x}.ad:")
        an = self.gep("%a", self.op(f"add i64 {self.mul(row, '%lda')}, %{x}.pc"))
        e(f"  %an = select i1 %ta, ptr {self.gep('%apk', odd)}, ptr {an}")

    def k_blocks(self, body) -> None:
        """``body(kc)`` for each k block (starting at ``%X.pc``); at least one, so that k == 0
        still writes ``alpha * 0 + beta * c0``."""
        x, e = self.x, self.emit
        e(
            f"  br label %{x}.pc.pre",
            f"{x}.pc.pre:",
            f"  br label %{x}.pc.h",
            f"{x}.pc.h:",
            f"  %{x}.pc = phi i64 [0, %{x}.pc.pre], [%{x}.pc.n, %{x}.pc.l]",
        )
        body(self.k_block(f"%{x}.pc"))
        self.super_end(f"%{x}.pc")
        e(
            f"  br label %{x}.pc.l",
            f"{x}.pc.l:",
            f"  %{x}.pc.n = add nuw nsw i64 %{x}.pc, %kcb",
            f"  %{x}.pc.c = icmp slt i64 %{x}.pc.n, %k",
            f"  br i1 %{x}.pc.c, label %{x}.pc.h, label %{x}.pc.x",
            f"{x}.pc.x:",
        )

    def schedule(self) -> None:
        """For each k block and column block (as many panels as the packed-b budget holds),
        pack its panels (from b row by row, or, ``%tb``, from b^T), then run the tiles: A in
        place, panel by panel, every row tile against the panel while it stays in L1; A^T,
        row tile by row tile (each packed slice of A^T serves every panel), so each tile of c
        (the weights of an SGD update) is read and written in row order."""
        self.x, e = "s", self.emit
        np_ = f"%{self.x}.np"

        def k_block(kc):
            panel_size = self.mul(kc, "%ps")

            def col_block(jc):
                nc = self.umin(self.op(f"sub i64 %n, {jc}"), "%ncs")
                e(
                    f"  {np_} = lshr i64 {self.op(f'add i64 {nc}, {self.nr - 1}')}, "
                    f"{self.nr.bit_length() - 1}",
                    "  br i1 %pb, label %s.pkd, label %s.pk0",
                    "s.pk0:",
                    "  br i1 %tb, label %s.pkt, label %s.pkn",
                    "s.pkt:",
                )

                def pack_t(p):
                    col = self.op(f"add i64 {jc}, {self.mul(p, self.nr)}")
                    self.pack_bt(self.gep("%bpk", self.mul(p, panel_size)), col, kc)

                self.loop("s.pp", 0, np_, 1, pack_t, guarded=False)
                e("  br label %s.pkd", "s.pkn:")
                self.pack_rows(jc, np_, kc, panel_size)
                e("  br label %s.pkd", "s.pkd:", "  br i1 %ta, label %s.tt, label %s.tn", "s.tt:")

                def panel_of(p):
                    col = self.op(f"add i64 {jc}, {self.mul(p, self.nr)}")
                    packed = self.gep("%bpk", self.mul(p, panel_size))
                    # b packed by the caller: panel col / NR, row pc (see pack_b)
                    at = self.op(f"add i64 {self.mul(col, '%k')}, {self.mul('%s.pc', self.nr)}")
                    given = self.gep("%b", at)
                    return self.op(f"select i1 %pb, ptr {given}, ptr {packed}"), col

                def row_tile(i):
                    self.a_rows(i, kc)

                    def against(p):
                        panel, col = panel_of(p)
                        self.tile(panel, kc, i, col, ahead=self.prefetch)

                    self.loop("s.j", 0, np_, 1, against, guarded=False)

                self.loop("s.i", 0, "%m", self.mr, row_tile, guarded=False)
                e("  br label %s.td", "s.tn:")

                def row_block(ib, stop):

                    def by_panel(p):
                        panel, col = panel_of(p)

                        def rows(i):
                            an = self.gep("%a", self.op(f"add i64 {self.mul(i, '%lda')}, %s.pc"))
                            self.tile(panel, kc, i, col, an)

                        self.loop("s.ni", ib, stop, self.mr, rows, guarded=False)

                    self.loop("s.nj", 0, np_, 1, by_panel, guarded=False)

                if self.mc is None:
                    row_block(0, "%m")
                else:

                    def block(ib):
                        row_block(ib, self.umin(self.op(f"add i64 {ib}, {self.mc}"), "%m"))

                    self.loop("s.nb", 0, "%m", self.mc, block, guarded=False)
                e("  br label %s.td", "s.td:")

            self.loop("s.jc", 0, "%n", "%ncs", col_block, guarded=False)

        self.k_blocks(k_block)

    def function(self) -> str:
        """The exported ``@fg_matmul_f32`` (returns at once when m or n is 0): the schedule,
        one loop nest for every layout, run-time flags choosing how b is packed and A read
        (code generation costs grow with the code, so each piece exists once)."""
        self.lines, e, mr = [], self.emit, self.mr
        mty = f"<{self.vec} x i1>"
        e(
            "entry:",
            f"  %bpk = alloca float, i64 {B_FLOATS}, align 64",
            f"  %apk = alloca float, i64 {2 * mr * KC}, align 64",
            f"  %btp = alloca ptr, i64 {self.nr}",
            "  %m0 = icmp sle i64 %m, 0",
            "  %n0 = icmp sle i64 %n, 0",
            "  %empty = or i1 %m0, %n0",
            "  br i1 %empty, label %done, label %go",
            "go:",
            "  %ta = trunc i32 %trans to i1",
            "  %tb.b = and i32 %trans, 2",
            "  %tb = icmp ne i32 %tb.b, 0",
            "  %pb.b = and i32 %trans, 4",
            "  %pb = icmp ne i32 %pb.b, 0",  # b packed by the caller: panels of NR columns
            f"  %s = select i1 %ta, i64 {2 * mr}, i64 1",  # floats per k step of A's rows
            "  %rs = select i1 %ta, i64 1, i64 %lda",  # floats from one of A's rows to the next
            "  %bnz = fcmp une float %beta, 0.0",
            f"  %narrow.n = icmp sle i64 %n, {self.vec}",
            "  %pb.not = xor i1 %pb, true",
            "  %narrow = and i1 %narrow.n, %pb.not",
            f"  %ps = select i1 %narrow, i64 {self.vec}, i64 {self.nr}",  # floats per panel row
            f"  %wide.m = select i1 %narrow, {mty} zeroinitializer, {mty} {self.ones}",
        )
        # columns per block: what the packed-b budget holds beside the first (largest) k block
        fast = self.op(f"or i1 {self.op('or i1 %ta, %tb')}, %narrow")
        # c past L2: each k block reads and writes c from L3, so fewer, longer blocks
        c_big = self.op(f"icmp sgt i64 {self.mul('%m', '%ldc')}, {C_L2}")
        fast = self.op(f"or i1 {fast}, {c_big}")
        e(f"  %kcb = select i1 {fast}, i64 {KC}, i64 {self.kc_wide}")
        k1 = self.umin("%k", "%kcb")
        k1 = self.op(f"select i1 {self.op(f'icmp eq i64 {k1}, 0')}, i64 1, i64 {k1}")
        many = self.op(f"and i64 {self.op(f'udiv i64 {B_FLOATS}, {k1}')}, {-self.nr}")
        e(
            f"  %ncs = select i1 %ta, i64 {many}, i64 {many if self.pack_all else self.nr}",
            f"  %sbk = mul i64 %kcb, {SUPER}",
            "  %big = icmp sgt i64 %k, %sbk",
            "  br i1 %big, label %sc.m, label %sc.x",
            "sc.m:",
            "  %sc.fl = mul i64 %m, %ldc",
            "  %sc.b4 = shl i64 %sc.fl, 2",
            "  %sc.b63 = add i64 %sc.b4, 63",
            "  %sc.b = and i64 %sc.b63, -64",
            "  %sc.p = call ptr @aligned_alloc(i64 64, i64 %sc.b)",
            "  br label %sc.x",
            "sc.x:",
            "  %sc = phi ptr [null, %go], [%sc.p, %sc.m]",
        )
        self.perms = {}
        self.schedule()
        e("  call void @free(ptr %sc)", "  br label %done", "done:", "  ret void")
        ity = f"<{self.vec} x i32>"
        self.lines[1:1] = [
            line
            for idx, slot in self.perms.items()
            for line in (
                f"  {slot} = alloca {ity}, align 64",
                f"  store {ity} <{', '.join(f'i32 {j}' for j in idx)}>, ptr {slot}, align 64",
            )
        ]
        return (
            f"define void @{self.symbol}(i32 %trans, {_ARGS}) {{\n"
            + "\n".join(self.lines)
            + "\n}\n"
        )


def library_ir(
    avx512: bool | None = None, tile: Geometry | None = None, symbol: str = SYMBOL
) -> str:
    """The library module: the exported ``@<symbol>`` (the schedule; returns at once when
    m or n is 0) and the register tile it calls. ``tile`` (default: the host's
    :func:`geometry`) sizes the register tile; ``avx512`` (default: whether the host has it)
    picks how b^T's blocks are transposed with the 16-lane tile (see ``_Writer.transpose``).
    Tests build the AVX2 tile on an AVX-512 host under another ``symbol``."""
    from fungrad.lowering.cpu import compiler as cpu

    if avx512 is None:
        avx512 = _has_avx512(cpu.host().features)
    g = tile or geometry()
    w = _Writer(g, avx512, symbol)
    body = [w.function(), w.tile_function()]
    vec = g.vec
    decls = [
        "declare ptr @aligned_alloc(i64, i64)",
        "declare void @free(ptr)",
        f"declare <{vec} x float> @llvm.fma.v{vec}f32(<{vec} x float>, <{vec} x float>, "
        f"<{vec} x float>)",
    ]
    for n in sorted(w.masked_lanes):
        decls += [
            f"declare <{n} x float> @llvm.masked.load.v{n}f32.p0(ptr, i32, <{n} x i1>, "
            f"<{n} x float>)",
            f"declare void @llvm.masked.store.v{n}f32.p0(<{n} x float>, ptr, i32, <{n} x i1>)",
        ]
    if g.prefetch:
        decls.append("declare void @llvm.prefetch.p0(ptr, i32, i32, i32)")
    if w.avx512:
        decls.append(
            f"declare <{vec} x float> @{_VPERM}(<{vec} x float>, <{vec} x i32>, <{vec} x float>)"
        )
    return "\n".join(["\n".join(decls), "", *body])


# -- the compiled library ------------------------------------------------------------------

_module = None  # the CompiledModule, kept for the life of the process
_function = None  # ctypes function of fg_matmul_f32 (gemm)


def compiled() -> bool:
    """Whether the library is compiled and loaded in this process."""
    return _module is not None


def ensure_library() -> None:
    """Compile the library (once per process; the on-disk cache may hold its object) and make
    ``@fg_matmul_f32`` resolvable by every module compiled afterwards. Thread safe: two
    threads compiling programs at once compile it once (under ``cpu.llvm_lock``, which
    compile_module takes anyway, so there is one lock order). Cheap after the first call."""
    if _module is not None:
        return
    from fungrad.lowering.cpu import compiler as cpu

    with cpu.llvm_lock:
        if _module is None:
            _compile()


def _compile() -> None:
    global _module, _function
    from fungrad.lowering.cpu import compiler as cpu
    from fungrad.lowering.cpu import llvm_capi

    module = cpu.compile_module(
        library_ir(), [SYMBOL], name="fungrad_matmul", passes=False, library=True
    )
    # every program's code calls into this one: never free it (a CompiledModule frees its code
    # when collected, e.g. while modules are torn down at interpreter exit)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(module))
    i64, ptr, f32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
    _function = module.function(
        SYMBOL, [ctypes.c_int32, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, ptr, i64]
    )
    llvm_capi.add_symbol(SYMBOL, module.address(SYMBOL))
    _module = module


def _rows(x: np.ndarray, name: str) -> int:
    """The row stride (in elements) of a 2-D float32 array with contiguous rows."""
    if x.dtype != np.float32 or x.ndim != 2:
        raise TypeError(
            f"matmul.gemm: {name} must be a 2-D float32 array, got {x.dtype} with shape {x.shape}"
        )
    if x.size == 0 or x.shape[0] == 1:
        return x.shape[1]  # (the stride is never used)
    if x.shape[1] > 1 and x.strides[1] != 4 or x.strides[0] % 4 or x.strides[0] <= 0:
        raise ValueError(
            f"matmul.gemm: the rows of {name} must be contiguous with a positive "
            f"row stride, got strides {x.strides}; pass np.ascontiguousarray({name})"
        )
    return max(x.strides[0] // 4, x.shape[1])


def gemm(
    a: np.ndarray,
    b: np.ndarray,
    *,
    trans_a: bool = False,
    trans_b: bool = False,
    alpha: float = 1.0,
    beta: float = 0.0,
    c0: np.ndarray | None = None,
    out: np.ndarray | None = None,
    prepack: bool = False,
) -> np.ndarray:
    """``alpha * op(a) @ op(b) + beta * c0`` through the native library (tests, benchmarks).

    ``a`` is ``[m, k]`` (``trans_a``: ``[k, m]``), ``b`` ``[k, n]`` (``trans_b``: ``[n, k]``;
    not both transposed); every operand is 2-D
    float32 with contiguous rows and any row stride (e.g. a column slice of a wider array).
    ``c0`` (read only when ``beta != 0``) and ``out`` are ``[m, n]`` with the same row stride;
    ``out`` may be ``c0``. ``prepack``: pack op(b) first (:func:`pack_b`) and run the
    library's path for a packed b. Returns ``out`` (a new array when None)."""
    if trans_a and trans_b:
        raise ValueError(
            "matmul.gemm: a and b cannot both be transposed; pass "
            "np.ascontiguousarray(b.T) as b with trans_b=False"
        )
    ensure_library()
    lda, ldb = _rows(a, "a"), _rows(b, "b")
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if kb != k:
        raise ValueError(
            f"matmul.gemm: op(a) is {m}x{k} but op(b) is {kb}x{n}; their inner "
            "dimensions must agree"
        )
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
        raise ValueError(
            f"matmul.gemm: c0 and out must share a row stride, got "
            f"{c0.strides[0]} and {out.strides[0]} bytes"
        )
    if prepack:
        b, ldb = pack_b(b, trans_b), k
    _function(
        _trans(trans_a, trans_b and not prepack, prepack),
        m,
        n,
        k,
        alpha,
        a.ctypes.data,
        lda,
        b.ctypes.data,
        ldb,
        beta,
        c0.ctypes.data,
        out.ctypes.data,
        ldc,
    )
    return out


def pack_b(b: np.ndarray, trans_b: bool = False, nr: int | None = None) -> np.ndarray:
    """``op(b)`` (``b``, or ``b.T`` when ``trans_b``; ``[k, n]``) in the library's panels:
    ``[ceil(n / nr), k, nr]`` float32, zero past n (what a packing kernel computes before a
    loop for ``fusion.Gemm.b_packed``; here for tests). ``nr``: the panel width, by default
    the host's (``geometry().nr``)."""
    ob = np.asarray(b, np.float32).T if trans_b else np.asarray(b, np.float32)
    k, n = ob.shape
    nr = nr or geometry().nr
    q = -(-n // nr)
    padded = np.pad(ob, ((0, 0), (0, q * nr - n)))
    return np.ascontiguousarray(padded.reshape(k, q, nr).transpose(1, 0, 2))
