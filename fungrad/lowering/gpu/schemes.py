"""How a step runs on the GPU: the choices between schemes, the analysis they need, the
tuning constants, and the choices as data for the renderers.

Which reductions become workgroup trees (:func:`tree_groups` -> :class:`Tree`; ``TREE_*``),
which serial kernels run as parallel scatters (:func:`scatter_like` -> :class:`Scatter`),
which kernels are scans (:func:`scan_of` -> :class:`ScanInfo`) and into how many blocks their
lines split (:func:`scan_blocks`; ``SCAN``, ``SCAN_BLOCK``), which sorts take the bitonic
network (:func:`sort_by_ranks`; ``SORT_RANK_MAX_ROW``), how long matmul contractions split
(:func:`split_k` -> :class:`SplitK`), and how a kernel reading more buffers than a shader
may bind splits its stores (:func:`split_bindings`).

The choices read the adapter's properties from the runtime (``loop_limit``: the loop
iterations one invocation may run; ``cpu_adapter``; ``max_bindings``) and, where one depends
on how long the one-pass shader loops, take a function rendering it (called only when the
adapter has a loop limit). The tuning constants and modes are read when a function is
compiled (tests set them).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fungrad.lowering import fusion
from fungrad.lowering.fusion import Kernel, LoweringError, _walk
from fungrad.lowering.kernel import INDEX, Expr, Var

#: Tree reductions (see :func:`tree_groups`): for kernels of at most TREE_MAX_OUTPUTS output
#: elements, reductions of at least TREE_MIN_LENGTH serial iterations, nested reductions
#: included ("auto" mode; :func:`reduction_work`), about
#: TREE_PER_INVOCATION elements per invocation in the first pass, and at most TREE_GROUPS
#: workgroups in all.
TREE_MAX_OUTPUTS = 4096
TREE_MIN_LENGTH = 256
TREE_PER_INVOCATION = 16
TREE_GROUPS = 1024
#: "auto" (trees on real GPUs only), "always" (wherever outputs are few, whatever the
#: adapter and reduction length: tests use it on lavapipe) or "never". The environment
#: variable FUNGRAD_GPU_TREE_REDUCE, when set, wins. Read when a function is compiled.
TREE_REDUCTIONS = "auto"
#: Rows of at most this many elements sort by ranks (one dispatch, O(n) per element), longer
#: ones by a bitonic network (``sort.render_bitonic``); the crossover measured on lavapipe
#: lies between 32 and 128.
SORT_RANK_MAX_ROW = 64
#: Scans (cumulative reductions: :func:`scan_of`, ``scan.render_scan``) run one invocation
#: per line, in order, or split their lines into blocks (three dispatches). "auto": on a
#: real GPU, blocks of about sqrt(n / 2) (:func:`gpu_scan_block`, within SCAN_GPU_BLOCKS)
#: for lines longer than two blocks, unless the lines are SCAN_SERIAL_ROWS or more (an
#: H100: one line of 2^24 took 28.7 ms in blocks of 512, 2^22 1.17 ms in blocks of 2048;
#: 4096 lines of 1024 twice as fast in blocks of 128 as serial); on a CPU adapter, blocks
#: of SCAN_BLOCK where lines are fewer than two per CPU core (lavapipe, 2 cores: blocks 1.6x
#: faster for 2 lines of 60000, 0.7x for 8); "always": blocks of SCAN_BLOCK wherever a line
#: is longer (tests use it with small blocks); "never": one block unless a line would loop
#: past the adapter's limit (``gpu.Runtime.loop_limit``), which splits it in every mode.
#: The environment variable FUNGRAD_GPU_SCAN, when set, wins. Read when a function is
#: compiled.
SCAN = "auto"
SCAN_BLOCK = 512
SCAN_SERIAL_ROWS = 65536
SCAN_GPU_BLOCKS = (128, 4096)


#: Matmuls on real GPUs (CPU adapters keep gemm.py's 64x64 tiles, 4x4 per invocation, KSTEP
#: 16, measured on lavapipe): the tile (:class:`GemmTile`, :func:`gemm_tile`), a larger one
#: for products whose grid of it has at least ``GEMM_LARGE_GROUPS`` workgroups, and split
#: contractions where the tiles leave most of the GPU idle (:func:`gemm_split`). An H200
#: sweep (2026-11-26): 128x128 vec4 k16 33.2 TFLOP/s at 4096^3 and 30.8 at 2048^3, the old
#: scalar 64x64 k32 13.0; 64x64 vec4 best for 128x784x512 (split for filling) and
#: 256x65536x256. Read when a function is compiled; None: the other one everywhere.
GEMM_TILE_GPU = None  # set below, once GemmTile is defined
GEMM_TILE_GPU_LARGE = None
GEMM_LARGE_GROUPS = 256
GEMM_FILL_GROUPS = 1024  # 0: never split for filling
GEMM_SPLIT_MIN_K = 64
GEMM_SPLIT_MAX = 64  # H100: 64 ranges best for 256x65536 @ 65536x256
GEMM_SPLIT_WORDS = 1 << 22  # partial products kept in the arena (16 MiB)


def _mode(variable: str, name: str, default: str) -> str:
    mode = os.environ.get(variable, "").strip().lower() or default
    if mode not in ("auto", "always", "never"):
        raise ValueError(
            f"{variable} / gpu.schemes.{name}: {mode!r} is not one of 'auto', 'always', 'never'"
        )
    return mode


def scan_mode() -> str:
    """The scan mode in force (``SCAN`` or its environment override FUNGRAD_GPU_SCAN)."""
    return _mode("FUNGRAD_GPU_SCAN", "SCAN", SCAN)


def tree_reductions() -> str:
    """The tree-reduction mode in force (``TREE_REDUCTIONS`` or its environment override)."""
    return _mode("FUNGRAD_GPU_TREE_REDUCE", "TREE_REDUCTIONS", TREE_REDUCTIONS)


# -- the choices ----------------------------------------------------------------------------------


def tree_groups(kern: Kernel, rt, serial_iterations: Callable[[], int]) -> int:
    """Workgroups per output element for ``kern``'s top-level reductions as workgroup trees
    (:class:`Tree`), or 0 to keep one invocation per output element. Trees pay where outputs
    are few (a full sum is otherwise one invocation) and the adapter is a real GPU (on a CPU
    adapter such as lavapipe, invocations are CPU threads: the serial loop is faster), and
    they are needed wherever one invocation would loop more often than the adapter allows
    (``serial_iterations()``: the one-invocation shader's loop iterations);
    :func:`tree_reductions` can force them on or off."""
    mode = tree_reductions()
    if mode == "never" or not kern.parallel:
        return 0
    tops = top_reductions(kern)
    outputs = int(np.prod([v.extent for v in kern.loops], dtype=np.int64))
    if not tops or not outputs:
        return 0
    longest = max(int(np.prod([v.extent for v in e.attr.vars])) for e in tops)
    limit = rt.loop_limit
    too_long = limit is not None and serial_iterations() >= limit
    if not too_long and (
        outputs > TREE_MAX_OUTPUTS
        or mode == "auto"
        and (rt.cpu_adapter or max(map(reduction_work, tops)) < TREE_MIN_LENGTH)
    ):
        return 0
    if not reductions_independent(tops):
        return 1
    groups = min(-(-longest // (TREE_WG * TREE_PER_INVOCATION)), TREE_GROUPS // outputs)
    if limit is not None:  # a quarter of the budget: the body may loop too
        groups = max(groups, -(-longest // (TREE_WG * (limit // 4))))
    return max(1, groups)


def scan_rows(kern: Kernel, scan: ScanInfo) -> int:
    """The lines of scan ``kern`` (the iterations of its other loops)."""
    return int(np.prod([v.extent for v in kern.loops], dtype=np.int64)) // scan.var.extent


def gpu_scan_block(n: int) -> int:
    """A real GPU's scan block for lines of ``n``: a block's invocation loops ``block``
    times in the first and last passes, the middle pass ``n / block`` times along the line,
    so about ``sqrt(n / 2)``, as a power of two within ``SCAN_GPU_BLOCKS`` (an H100: 2048
    best for one line of 2^22, 128 for 4096 lines of 1024, 512 for 64 of 65536)."""
    low, high = SCAN_GPU_BLOCKS
    return min(high, max(low, 1 << max(0, math.ceil(math.log2(max(1.0, n / 2)) / 2))))


def scan_blocks(kern: Kernel, scan: ScanInfo, rt, serial_iterations: Callable[[], int]) -> int:
    """Blocks each line of scan ``kern`` splits into (``SCAN``, ``SCAN_BLOCK``): 1 (one
    invocation per line), or more where lines are too few to fill the device, and always
    where one invocation could not loop through a line on this adapter
    (``serial_iterations()``: the one-block shader's loop iterations)."""
    n = scan.var.extent + 1
    mode = scan_mode()
    blocks = 1
    if mode == "auto" and not rt.cpu_adapter:
        block = gpu_scan_block(n)
        if n > 2 * block and scan_rows(kern, scan) < SCAN_SERIAL_ROWS:
            blocks = -(-n // block)
    elif mode == "always" or mode == "auto" and scan_rows(kern, scan) < 2 * (os.cpu_count() or 1):
        blocks = -(-n // max(1, SCAN_BLOCK))
    limit = rt.loop_limit
    if limit is not None:  # (with some room for rounding the blocks up)
        blocks = max(blocks, -(-serial_iterations() // max(1, limit - 256)))
    return -(-n // -(-n // blocks))  # every block full but the last, none empty


def split_k(k: int, iterations: int, limit: int | None, kstep: int, base: int) -> SplitK | None:
    """How a matmul contraction of length ``k`` splits (:class:`SplitK`, partial products at
    arena word ``base``), or None where one invocation may loop through it (``iterations``:
    the one-pass shader's loop iterations; ranges are multiples of ``kstep``)."""
    if limit is None or iterations < limit:
        return None
    chunks = -(-iterations // (limit - 256))
    size = -(-k // chunks // kstep) * kstep
    return SplitK(-(-k // size), size, base)


def gemm_tile(rt, step=None) -> GemmTile | None:
    """The tile of matmul ``step`` (``fusion.Gemm``) on this adapter: None (the constants of
    ``gemm.py``, measured on lavapipe) on a CPU adapter; on a real GPU
    ``GEMM_TILE_GPU_LARGE`` where its grid would have ``GEMM_LARGE_GROUPS`` workgroups or
    more, else ``GEMM_TILE_GPU``."""
    if rt.cpu_adapter:
        return None
    large = GEMM_TILE_GPU_LARGE
    if large is not None and step is not None:
        groups = -(-step.m // large.rows) * -(-step.n // large.cols) * step.batch
        if groups >= GEMM_LARGE_GROUPS:
            return large
    return GEMM_TILE_GPU or large


def gemm_split(step, tile: GemmTile, iterations: int, rt, base: int) -> SplitK | None:
    """How matmul ``step`` (``fusion.Gemm``) splits its contraction: as :func:`split_k`
    says where one invocation could not loop through it, and on a real GPU where its tiles
    would fill fewer than ``GEMM_FILL_GROUPS`` workgroups (an MLP's 128-row products: 16
    tiles for 132 SMs): into up to that many ranges of at least ``GEMM_SPLIT_MIN_K``, at most
    ``GEMM_SPLIT_MAX`` of them, their partial products (at most ``GEMM_SPLIT_WORDS`` words)
    added by a second pass."""
    split = split_k(step.k, iterations, rt.loop_limit, tile.kstep, base)
    if split is not None or rt.cpu_adapter or GEMM_FILL_GROUPS <= 0:
        return split
    tiles = -(-step.m // tile.rows) * -(-step.n // tile.cols) * step.batch
    if not tiles or tiles >= GEMM_FILL_GROUPS:
        return None
    chunks = min(
        -(-GEMM_FILL_GROUPS // tiles),
        step.k // max(1, GEMM_SPLIT_MIN_K),
        GEMM_SPLIT_MAX,
        GEMM_SPLIT_WORDS // (step.batch * step.m * step.n),
    )
    if chunks < 2:
        return None
    size = -(-step.k // chunks // tile.kstep) * tile.kstep
    chunks = -(-step.k // size)
    return SplitK(chunks, size, base) if chunks > 1 else None


def sort_by_ranks(n: int, limit: int | None) -> bool:
    """Do rows of ``n`` elements sort by ranks (else by a bitonic network)?"""
    return n <= max(1, SORT_RANK_MAX_ROW) and (limit is None or n < limit)


def scatter_like(kern: Kernel) -> bool:
    """Is ``kern`` a serial loop whose iterations only collide on the elements they store (a
    scatter), so :class:`Scatter` runs it in parallel exactly? Not when the store reads its
    own buffer (a cumulative sum reads the previous element), nor when it has one
    iteration (a scan's first element: one invocation, one dispatch)."""
    if kern.parallel or len(kern.stores) != 1 or all(v.extent == 1 for v in kern.loops):
        return False
    (st,) = kern.stores
    exprs = [e for e in (st.value, st.index, st.mask) if e is not None]
    return st.buffer not in fusion._loaded_buffers(exprs)


def split_bindings(kern: Kernel, place: dict, limit: int) -> list[Kernel]:
    """``kern`` as kernels binding at most ``limit`` device buffers each: its stores are
    independent, so they can be grouped into several dispatches."""

    def keys(st) -> set[str]:
        exprs = [e for e in (st.value, st.index, st.mask) if e is not None]
        return {place[b.id][0] for b in fusion._loaded_buffers(exprs)} | {place[st.buffer.id][0]}

    groups: list[tuple[set[str], list]] = []
    for st in kern.stores:
        k = keys(st)
        if len(k) > limit:
            raise LoweringError(
                f"jit(backend='gpu'): kernel {kern.name} ({', '.join(kern.origins)}) reads "
                f"{len(k)} arrays in one expression, more than this adapter's {limit} storage "
                "buffers per shader; use backend='cpu' for this function"
            )
        for g in groups:
            if len(g[0] | k) <= limit:
                g[0].update(k)
                g[1].append(st)
                break
        else:
            groups.append((k, [st]))
    if len(groups) == 1:
        return [kern]
    return [
        Kernel(f"{kern.name}_{i}", kern.loops, stores, kern.parallel, kern.origins)
        for i, (_, stores) in enumerate(groups)
    ]


# -- the choices as data, and the analysis --------------------------------------------------------


@dataclass(frozen=True)
class Scatter:
    """A scatter kernel (``parallel=False``: one store whose iterations may hit the same
    element) run with one invocation per iteration, exactly as the serial loop would.
    ``mode="combine"`` (scatter-add/mul/min/max): each invocation combines its update into
    the element atomically (WGSL has no float atomics: a compare-and-swap loop on the bits,
    or ``atomicAdd``/``Min``/``Max``/``Or``/``And`` where they compute the same thing).
    Overwriting scatters keep the serial loop's rule, the last update wins, in three
    dispatches: the arena words at ``base`` (one per element of the output) are zeroed
    (:func:`render_fill`), ``mode="claim"`` has each invocation ``atomicMax`` its iteration
    number + 1 into its element's word, and ``mode="write"`` lets only the winner store."""

    mode: str
    base: int = 0


# -- workgroup-tree reductions --------------------------------------------------------------------

TREE_WG = 256  # invocations per workgroup of a tree reduction (WebGPU's default maximum)


@dataclass(frozen=True)
class Tree:
    """How a kernel's top-level reductions (those evaluated once per output element) run as
    workgroup trees, for kernels with few outputs and long reductions. ``groups == 1``: one
    dispatch, one workgroup per output element; its ``TREE_WG`` invocations fold a strided
    share of the elements each, then combine their values pairwise through workgroup memory
    (log2 steps), and invocation 0 does the stores. ``groups > 1``: a first pass
    (``partial``) of ``groups`` workgroups per output writes one partial result each (and
    its position, for argmax/argmin) to the arena at word ``base``; the second pass (the
    same kernel, ``partial=False``) folds the partials of its output the same way. The
    partials of the reductions of one kernel follow one another (``partial_words``)."""

    groups: int
    base: int
    partial: bool = False


def top_reductions(kern: Kernel) -> list[Expr]:
    """The reductions of ``kern`` evaluated once per output element (at no inner loop)."""
    loops = set(kern.loops)
    roots = [e for st in kern.stores for e in (st.value, st.index, st.mask) if e is not None]
    return [e for e in _walk(roots) if e.op == "reduce" and e.free <= loops]


def reduction_work(e: Expr) -> int:
    """Loop iterations one invocation runs for reduction ``e``: its length times one plus the
    lengths of the reductions nested in its body (a loss summing rows of a row sum: 128 x 10
    is 1408 serial iterations, a tree's worth on a GPU though its own length is 128)."""
    inner = sum(
        int(np.prod([v.extent for v in x.attr.vars]))
        for x in _walk([e.args[0]])
        if x.op == "reduce" and x is not e
    )
    return int(np.prod([v.extent for v in e.attr.vars])) * (1 + inner)


def reductions_independent(tops: list[Expr]) -> bool:
    """No top-level reduction reads another (softmax's sum of exp(x - max) reads the max:
    such a kernel cannot split its reductions into two passes)."""
    ids = {id(e) for e in tops}
    return not any(id(x) in ids for e in tops for x in _walk([e.args[0]]))


def partial_words(kern: Kernel, groups: int) -> int:
    """Arena words the first pass of ``kern``'s tree reductions writes (value and, for
    argmax/argmin, position per output, group and reduction)."""
    outputs = math.prod(v.extent for v in kern.loops)
    return sum(
        outputs * groups * (2 if e.attr.op in ("argmax", "argmin") else 1)
        for e in top_reductions(kern)
    )


@dataclass(frozen=True)
class GemmTile:
    """A matmul shader's tiling (``gemm.render_gemm``): ``rows x cols`` outputs per
    workgroup of ``threads_x x threads_y`` invocations, each computing ``per_row x per_col``
    of them, the contraction read through workgroup memory ``kstep`` elements at a time.

    ``vec = 1``: an invocation's rows are ``ty + threads_y * i``, its columns
    ``tx + threads_x * j`` (scalar workgroup reads). ``vec = 4`` (``gemm.render_gemm_vec4``):
    runs of 4 rows ``4 (ty + threads_y g) + 0..3`` and 4 columns ``4 (tx + threads_x h) +
    0..3``, both tiles k-major ``vec4<f32>`` in workgroup memory, so one contraction step
    reads ``per_row / 4 + per_col / 4`` vectors for ``per_row * per_col`` fmas; its
    workgroup memory, ``(rows + cols) * kstep * 4`` bytes, stays within WebGPU's default
    limit (the runtime's device takes the adapter's: scalar tiles may use more)."""

    rows: int
    cols: int
    threads_x: int = 16
    threads_y: int = 16
    kstep: int = 16
    vec: int = 1
    #: WebGPU's default ``maxComputeWorkgroupStorageSize``
    WORKGROUP_BYTES = 16384

    def __post_init__(self):
        threads = self.threads_x * self.threads_y
        if (
            min(self.rows, self.cols, self.threads_x, self.threads_y, self.kstep) < 1
            or self.rows % self.threads_y
            or self.cols % self.threads_x
            or (self.rows * self.kstep) % threads
            or (self.cols * self.kstep) % threads
            or threads > 256
        ):
            raise ValueError(
                f"GemmTile({self.rows}, {self.cols}, {self.threads_x}, {self.threads_y}, "
                f"{self.kstep}): rows must be a multiple of threads_y and cols of threads_x, "
                "each tile's rows * kstep and cols * kstep a multiple of the invocations, "
                "at most 256 invocations"
            )
        if self.vec not in (1, 4):
            raise ValueError(f"GemmTile vec={self.vec!r}: 1 (scalar) or 4 (vec4 runs)")
        if self.vec == 4 and (self.per_row % 4 or self.per_col % 4):
            raise ValueError(
                f"GemmTile({self.rows}, {self.cols}, {self.threads_x}, {self.threads_y}, "
                f"{self.kstep}, vec=4): each invocation's {self.per_row} x {self.per_col} "
                "outputs must be runs of 4 (rows a multiple of 4 * threads_y, cols of "
                "4 * threads_x)"
            )
        if self.vec == 4 and (self.rows + self.cols) * self.kstep * 4 > self.WORKGROUP_BYTES:
            raise ValueError(
                f"GemmTile({self.rows}, {self.cols}, ..., kstep={self.kstep}, vec=4): "
                f"(rows + cols) * kstep * 4 = {(self.rows + self.cols) * self.kstep * 4} bytes "
                f"of workgroup memory, more than WebGPU's default {self.WORKGROUP_BYTES}"
            )

    @property
    def per_row(self) -> int:
        return self.rows // self.threads_y

    @property
    def per_col(self) -> int:
        return self.cols // self.threads_x

    def __str__(self) -> str:
        return (
            f"{self.rows}x{self.cols}/{self.threads_x}x{self.threads_y}"
            f"({self.per_row}x{self.per_col}) k{self.kstep}" + (" v4" if self.vec == 4 else "")
        )


GEMM_TILE_GPU = GemmTile(64, 64, 16, 16, 16, vec=4)
GEMM_TILE_GPU_LARGE = GemmTile(128, 128, 16, 16, 16, vec=4)


@dataclass(frozen=True)
class SplitK:
    """A matmul whose contraction is split into ``chunks`` ranges of ``size`` (a multiple
    of ``KSTEP``), where one invocation could not loop through all of ``k`` on this
    adapter: the tiles of each range write partial products to the arena at word ``base``
    (``chunks * batch * m * n`` words, range-major), then ``gemm.render_gemm_sum`` adds the
    ranges of each output in order and applies alpha and beta."""

    chunks: int
    size: int
    base: int


@dataclass(frozen=True)
class ScanInfo:
    """A serial kernel recognised as a scan along loop ``var`` (:func:`scan_of`): its one
    store writes ``combine(prev, elem)`` where ``prev`` loads the element the previous
    iteration stored (the first iteration's ``prev`` was stored by an earlier kernel)."""

    var: Var
    prev: Expr
    elem: Expr


def _affine(e: Expr) -> tuple[int, dict] | None:
    """(constant, {var: coefficient}) of an index expression built from constants, loop
    indices, + and -, and products by constants; None for any other expression."""
    if e.op == "const":
        return int(e.attr), {}
    if e.op == "idx":
        return 0, {e.attr: 1}
    if e.dtype != INDEX or e.op not in ("add", "sub", "mul"):
        return None
    a, b = _affine(e.args[0]), _affine(e.args[1])
    if a is None or b is None:
        return None
    if e.op == "mul":
        (scale, constant_terms), (const, terms) = (a, b) if not a[1] else (b, a)
        if constant_terms:  # a product of two loop-dependent factors
            return None
        return scale * const, {v: scale * x for v, x in terms.items()}
    sign = 1 if e.op == "add" else -1
    terms = dict(a[1])
    for v, x in b[1].items():
        terms[v] = terms.get(v, 0) + sign * x
    return a[0] + sign * b[0], {v: x for v, x in terms.items() if x}


def _injective(terms: dict, extents: dict) -> bool:
    """Does ``sum(terms[v] * v)`` take distinct values on the box ``0 <= v < extents[v]``?
    (Sufficient test: each coefficient exceeds the span of the smaller ones, as in a
    row-major layout.)"""
    span = 0
    for v in sorted((v for v in extents if extents[v] > 1), key=lambda v: abs(terms.get(v, 0))):
        coef = abs(terms.get(v, 0))
        if coef <= span:
            return False
        span += coef * (extents[v] - 1)
    return True


_ASSOCIATIVE = frozenset({"add", "mul", "max", "min", "and", "or", "xor"})


def scan_of(kern: Kernel) -> ScanInfo | None:
    """``kern`` as a scan, or None. A scan is a kernel with one store ``buf[I] = value``
    (no mask or combine) whose value reads ``buf`` once, at ``J``, through a combine
    ``value = f(prev, elem)`` with ``prev = buf[J]``, ``elem`` free of ``buf`` and ``f``
    built of constants and ops only; ``I`` and ``J`` are affine with ``J(x + e_s) = I(x)``
    for a loop ``s`` (each iteration reads what the previous one along ``s`` stored) and
    ``I`` is one-to-one even with ``s`` extended to -1 (no store overwrites an element
    read later, nor a first element). ``f`` must be associative, as blocks combine in
    another order: an associative op of ``prev`` and ``elem``, or the cumulative
    logsumexp's combine. The cumulative reductions (lax/reduce.py) lower to such kernels."""
    if len(kern.stores) != 1:
        return None
    (st,) = kern.stores
    if st.combine is not None or st.mask is not None:
        return None
    loads = {
        id(e): e for e in _walk([st.value, st.index]) if e.op == "load" and e.attr is st.buffer
    }
    if len(loads) != 1:
        return None
    (prev,) = loads.values()
    elem = None
    for cand in {
        id(e.args[1]): e.args[1]
        for e in _walk([st.value])
        if len(e.args) == 2 and e.args[0] is prev and e.args[1].free
    }.values():
        if _closed(st.value, prev, cand):
            elem = cand
            break
    if elem is None or st.value.dtype != st.buffer.dtype or elem.dtype != st.buffer.dtype:
        return None
    root = st.value
    if not (
        root.op in _ASSOCIATIVE
        and {id(a) for a in root.args} == {id(prev), id(elem)}
        or kern.origins == ("cumlogsumexp",)
    ):  # (reduce.py's logaddexp combine)
        return None  # e.g. x[i] = x[i - 1] - y[i]: blocks would combine in another order
    ai, aj = _affine(st.index), _affine(prev.args[0])
    if ai is None or aj is None or ai[1] != aj[1] or not set(ai[1]) <= set(kern.loops):
        return None
    extents = {v: v.extent for v in kern.loops}
    for s in kern.loops:
        coef = ai[1].get(s, 0)
        if coef and ai[0] == aj[0] + coef and _injective(ai[1], {**extents, s: s.extent + 1}):
            return ScanInfo(s, prev, elem)
    return None


def _closed(root: Expr, prev: Expr, elem: Expr) -> bool:
    """Is ``root`` a function of ``prev`` and ``elem`` alone (constants aside), with
    ``elem`` not reading ``prev``?"""
    if any(e is prev for e in _walk([elem])):
        return False
    seen, stack = set(), [root]
    while stack:
        e = stack.pop()
        if e is prev or e is elem or id(e) in seen:
            continue
        seen.add(id(e))
        if e.op in ("idx", "load", "reduce"):
            return False
        stack.extend(e.args)
    return True
