"""Matmul shaders (``fusion.Gemm``): tiled through workgroup memory, and the sum pass of a
contraction split into ranges (:class:`~fungrad.lowering.gpu.schemes.SplitK`)."""

from __future__ import annotations

import math

import numpy as np

from fungrad.lowering.fusion import Gemm, LoweringError
from fungrad.lowering.gpu.frame import MAX_GROUPS, TOP, Scope, Shader, Slots, flat_shader
from fungrad.lowering.gpu.helpers import Prelude
from fungrad.lowering.gpu.schemes import GemmTile, SplitK
from fungrad.lowering.gpu.types import literal

TILE = 64  # output tile edge per workgroup
#: contraction elements a thread accumulates before adding them to a middle sum, whose
#: GEMM_BLOCK values go into its totals (a multiple of KSTEP): a long k is a blocked sum,
#: not one running fma chain (a matvec over k = 60000 was 25 ulps off float64)
GEMM_BLOCK = 64
THREADS = 16  # threads per tile edge: each computes 4 x 4 outputs
KSTEP = 16
#: vec4 tiles (``GemmTile.vec == 4``, :func:`render_gemm_vec4`) keep two sums per output: the
#: contraction's elements go into the first for blocks of at least GEMM_VEC_BLOCK (about the
#: square root of a longer range, a multiple of the tile's kstep), whose sums go into the
#: second (error about block + range / block roundings; ranges of one block: one sum)
GEMM_VEC_BLOCK = 128
_XYZW = "xyzw"


def _gemm_epilogue(step: Gemm, slots: Slots, acc: str, at: str) -> str:
    """``alpha * acc + beta * c0[at]`` (the planner folds an SGD update into a gemm as
    ``c = alpha * a @ b + beta * c0``), as f32 text."""
    alpha, beta, c0 = step.alpha, step.beta, step.c0 or step.c
    result = acc if alpha == 1.0 else f"{literal(alpha, np.float32)} * {acc}"
    if beta:
        old = f"bitcast<f32>({slots.ref(c0, at)})"
        scaled = old if beta == 1.0 else f"{literal(beta, np.float32)} * {old}"
        result = f"{result} + {scaled}"
    return result


def default_tile() -> GemmTile:
    """The tile this module's constants describe (``TILE``, ``THREADS``, ``KSTEP``): 64x64
    outputs per workgroup, 4x4 per invocation, read when a function is compiled."""
    return GemmTile(TILE, TILE, THREADS, THREADS, KSTEP)


def render_gemm(
    step: Gemm,
    place: dict[int, tuple[str, int | str]],
    scope: Scope = TOP,
    split: SplitK | None = None,
    tile: GemmTile | None = None,
) -> Shader:
    """``c = a @ b`` per batch matrix: ``tile.rows x tile.cols`` output tiles through
    workgroup memory (:class:`GemmTile`; default :func:`default_tile`: 64x64, 4x4 outputs
    per invocation at rows ``ty + 16 i``, columns ``tx + 16 j``: coalesced reads/writes),
    the contraction ``tile.kstep`` at a time. ``split``: this is the first pass of a split
    contraction (:class:`SplitK`): workgroup ``z`` computes range ``z / batch`` of batch
    matrix ``z % batch``."""
    if step.c.dtype != np.float32:
        raise LoweringError(f"jit(backend='gpu'): matmul of {step.c.dtype.name}")
    tile = tile or default_tile()
    if tile.vec == 4:
        return render_gemm_vec4(step, place, scope, split, tile)
    rows, cols, tx_n, ty_n, kstep = tile.rows, tile.cols, tile.threads_x, tile.threads_y, tile.kstep
    nr, nc = tile.per_row, tile.per_col
    outs = nr * nc
    slots = Slots(place)
    head, guard = slots.scope_lines(scope)
    if guard is not None:  # uniform for the barriers: through workgroup memory
        head += [
            "  if (lid.x == 0u && lid.y == 0u) {",
            f"    run = select(0u, 1u, {guard});",
            "  }",
            "  if (workgroupUniformLoad(&run) == 0u) { return; }",
        ]
    m, n, k = step.m, step.n, step.k
    ia = f"gp * {m}i + gi" if step.trans_a else f"gi * {k}i + gp"
    ib = f"gc * {k}i + gq" if step.trans_b else f"gq * {n}i + gc"
    a_ref = slots.ref(step.a, f"abase + {ia}")
    b_ref = slots.ref(step.b, f"bbase + {ib}")
    if split is None:
        c_ref = slots.ref(step.c, f"cbase + r * {n}i + c", write=True)
        result = _gemm_epilogue(step, slots, "tot[{i}]", f"cbase + r * {n}i + c")
    else:
        c_ref = slots.word("arena", split.base, f"i32(wid.z) * {m * n}i + r * {n}i + c", True)
        result = "tot[{i}]"
    batch_of, kbeg, kend, size = _contraction(step, split)
    threads = tx_n * ty_n
    per_a, per_b = rows * kstep // threads, kstep * cols // threads
    block = -(-max(GEMM_BLOCK, kstep) // kstep) * kstep
    # a third level (blocks of blocks) only where the range is longer than block**2, or for
    # the 4x4 tile (whose text predates the choice): below that both sum the same way
    three = size > block**2 or outs <= 16
    acc_words = "acc, mid, tot" if three else "acc, tot"

    def flush(indent: str, low: str = "acc", high: str = "mid") -> list[str]:
        """A thread's ``low`` sums into its ``high`` ones (blocked sums: bounded error)."""
        # (unrolled: constant indices keep the sums in registers)
        return [
            f"{indent}{high}[{i}] = {high}[{i}] + {low}[{i}]; {low}[{i}] = 0.0f;"
            for i in range(outs)
        ]

    fma = []
    for i in range(nr):
        fma.append(f"      let a{i} = ta[(ty + {ty_n * i}i) * {kstep}i + kk];")
    for j in range(nc):
        fma.append(f"      let c{j} = tb[kk * {cols}i + tx + {tx_n * j}i];")
    for i in range(nr):
        for j in range(nc):
            fma.append(f"      acc[{nc * i + j}] = fma(a{i}, c{j}, acc[{nc * i + j}]);")
    stores = []
    for i in range(nr):
        for j in range(nc):
            stores += [
                f"  {{ let r = row0 + ty + {ty_n * i}i; let c = col0 + tx + {tx_n * j}i;",
                f"    if (r < {m}i && c < {n}i) {{ {c_ref} = "
                f"bitcast<u32>({result.format(i=nc * i + j)}); }} }}",
            ]
    load_a = [
        f"      let gi = row0 + e / {kstep}i; let gp = p0 + e % {kstep}i;",
        "      var va = 0.0f;",
        f"      if (gi < {m}i && gp < kend) {{ va = bitcast<f32>({a_ref}); }}",
        "      ta[e] = va;",
    ]
    load_b = [
        f"      let gq = p0 + e / {cols}i; let gc = col0 + e % {cols}i;",
        "      var vb = 0.0f;",
        f"      if (gq < kend && gc < {n}i) {{ vb = bitcast<f32>({b_ref}); }}",
        "      tb[e] = vb;",
    ]
    if per_a == per_b:
        loads = [
            f"    for (var q: i32 = 0i; q < {per_a}i; q++) {{",
            f"      let e = t + q * {threads}i;",
            *load_a,
            *load_b,
            "    }",
        ]
    else:
        loads = []
        for per, body in ((per_a, load_a), (per_b, load_b)):
            loads += [
                f"    for (var q: i32 = 0i; q < {per}i; q++) {{",
                f"      let e = t + q * {threads}i;",
                *body,
                "    }",
            ]
    if three:
        flushes = [
            f"    if ((p0 - kbeg) % {block}i == {block - kstep}i) {{",
            *flush("      "),
            f"      if ((p0 - kbeg) % {block**2}i == {block**2 - kstep}i) {{",
            *flush("        ", "mid", "tot"),
            "      }",
            "    }",
        ]
        ends = [*flush("  "), *flush("  ", "mid", "tot")]
    else:
        flushes = [
            f"    if ((p0 - kbeg) % {block}i == {block - kstep}i) {{",
            *flush("      ", "acc", "tot"),
            "    }",
        ]
        ends = flush("  ", "acc", "tot")
    text = "\n".join(
        [
            *slots.declarations(),
            "",
            f"var<workgroup> ta: array<f32, {rows * kstep}>;",
            f"var<workgroup> tb: array<f32, {kstep * cols}>;",
            *(["var<workgroup> run: u32;"] if guard is not None else []),
            "",
            *_main_prologue(step, tile, head, batch_of, kbeg, kend),
            *(f"  var {w}: array<f32, {outs}>;" for w in acc_words.split(", ")),
            f"  let t = ty * {tx_n}i + tx;",
            f"  for (var p0: i32 = kbeg; p0 < kend; p0 += {kstep}i) {{",
            *loads,
            "    workgroupBarrier();",
            f"    for (var kk: i32 = 0i; kk < {kstep}i; kk++) {{",
            *fma,
            "    }",
            "    workgroupBarrier();",
            *flushes,
            "  }",
            *ends,
            *stores,
            "}",
            "",
        ]
    )
    grid, name = _grid(step, rows, cols, split)
    per = per_a if per_a == per_b else per_a + per_b
    return Shader(name, text, slots.bindings(), grid, -(-size // kstep) * (1 + per + kstep))


def _plus(base: str, offset: int) -> str:
    """``base + offset`` as i32 text (``base`` itself for 0)."""
    return base if offset == 0 else f"{base} + {offset}i"


def _vec4_operand(
    name: str, edge: int, kstep: int, threads: int, along_edge: bool, bound: str, element
) -> tuple[list[str], list[str], list[str]]:
    """One operand's ``edge x kstep`` tile (rows of A or columns of B) in workgroup memory
    ``t<name>``: ``array<array<vec4<f32>, edge / 4>, kstep>``, k-major (``t<name>[p][g]``
    holds edge elements ``4 g .. 4 g + 3`` at contraction offset ``p``; two dimensions, so
    the bounds clamp naga adds to a dynamic index is the same, hoistable, for every ``p`` of
    an unrolled step). Returns (lines before the loop: invocation ``t``'s vectors ``q``, their
    k offsets ``k<name>q``, vector indices ``g<name>q`` and edge offsets ``o<name>q``; lines
    loading them into registers
    ``l<name>q`` from contraction offset ``pn``, zeros outside the matrix or range; lines
    storing the registers). ``element(i, p)``: the matrix word at edge index ``i``, k ``p``.

    ``along_edge`` (A^T, B: the matrix is contiguous along the edge): consecutive
    invocations take consecutive vectors (one 16-byte run each). Else (A, B^T: contiguous
    along k) groups of ``w = gcd(8, edge / 4)`` invocations take ``w`` vectors at one k (the
    vec4 stores of 8 invocations hit distinct banks) and the next groups the next k's (each
    row read in runs)."""
    e4 = edge // 4
    total = kstep * e4
    w = math.gcd(8, e4)
    before, loads, stores = [], [], []
    for q in range(-(-total // threads)):
        e = f"(t + {q * threads}i)" if q else "t"
        if along_edge:
            g, p = f"{e} % {e4}i", f"{e} / {e4}i"
        else:
            g, p = f"{e} % {w}i + {e} / {w * kstep}i * {w}i", f"{e} / {w}i % {kstep}i"
        o, kq, gq, lq = (f"{x}{name}{q}" for x in "okgl")
        before += [
            f"  let {kq} = {p}; let {gq} = {g}; let {o} = 4i * {gq};",
            f"  var {lq}: vec4<f32>;",
        ]
        within = "gk < kend"
        if (q + 1) * threads > total:  # the last vectors: fewer than the invocations
            within += f" && t < {total - q * threads}i"
            stores.append(f"    if (t < {total - q * threads}i) {{ t{name}[{kq}][{gq}] = {lq}; }}")
        else:
            stores.append(f"    t{name}[{kq}][{gq}] = {lq};")
        loads += [
            f"    {{ let gk = pn + {kq}; let gi = {{origin}} + {o};",
            "      var v = vec4<f32>(0.0f);",
            f"      if ({within}) {{",
            *(
                f"        if ({_plus('gi', c)} < {bound}) {{ v.{_XYZW[c]} = "
                f"bitcast<f32>({element('gi' if c == 0 else f'(gi + {c}i)', 'gk')}); }}"
                for c in range(4)
            ),
            "      }",
            f"      {lq} = v; }}",
        ]
    return before, loads, stores


def render_gemm_vec4(
    step: Gemm,
    place: dict[int, tuple[str, int | str]],
    scope: Scope,
    split: SplitK | None,
    tile: GemmTile,
) -> Shader:
    """:func:`render_gemm` for a ``GemmTile(vec=4)``: invocation ``(tx, ty)`` computes rows
    ``4 (ty + threads_y g) + 0..3`` by columns ``4 (tx + threads_x h) + 0..3`` in ``vec4``
    accumulators (``acc<row>_<h>``); the A and B tiles are k-major ``vec4`` in workgroup
    memory (:func:`_vec4_operand`), so each contraction step (unrolled) reads
    ``per_row / 4 + per_col / 4`` vectors for ``per_row * per_col`` fmas. The next tile is
    loaded into registers while this one is multiplied. A range longer than a block
    (``GEMM_VEC_BLOCK``) is a blocked sum: each block's sums go into totals ``tot<row>_<h>``.
    ``split`` as for :func:`render_gemm`; a scope guard's flag passes through ``ta[0][0]`` (no
    extra workgroup memory)."""
    rows, cols, tx_n, ty_n, kstep = tile.rows, tile.cols, tile.threads_x, tile.threads_y, tile.kstep
    nr, nh = tile.per_row, tile.per_col // 4
    threads = tx_n * ty_n
    slots = Slots(place)
    head, guard = slots.scope_lines(scope)
    if guard is not None:  # uniform for the barriers: through workgroup memory
        head += [
            "  if (lid.x == 0u && lid.y == 0u) {",
            f"    ta[0][0] = vec4<f32>(select(0.0f, 1.0f, {guard}));",
            "  }",
            "  if (workgroupUniformLoad(&ta[0][0]).x == 0.0f) { return; }",
        ]
    m, n, k = step.m, step.n, step.k
    if step.trans_a:
        a_of = lambda i, p: slots.ref(step.a, f"abase + {p} * {m}i + {i}")  # noqa: E731
    else:
        a_of = lambda i, p: slots.ref(step.a, f"abase + {i} * {k}i + {p}")  # noqa: E731
    if step.trans_b:
        b_of = lambda j, p: slots.ref(step.b, f"bbase + {j} * {k}i + {p}")  # noqa: E731
    else:
        b_of = lambda j, p: slots.ref(step.b, f"bbase + {p} * {n}i + {j}")  # noqa: E731
    a_before, a_loads, a_stores = _vec4_operand(
        "a", rows, kstep, threads, step.trans_a, f"{m}i", a_of
    )
    b_before, b_loads, b_stores = _vec4_operand(
        "b", cols, kstep, threads, not step.trans_b, f"{n}i", b_of
    )
    a_loads = [line.replace("{origin}", "row0") for line in a_loads]
    b_loads = [line.replace("{origin}", "col0") for line in b_loads]
    if split is None:
        at = lambda d: _plus(f"cbase + r * {n}i + c", d)  # noqa: E731
        c_ref = lambda d: slots.ref(step.c, at(d), write=True)  # noqa: E731
        result = lambda v, d: _gemm_epilogue(step, slots, v, at(d))  # noqa: E731
    else:
        at = lambda d: _plus(f"i32(wid.z) * {m * n}i + r * {n}i + c", d)  # noqa: E731
        c_ref = lambda d: slots.word("arena", split.base, at(d), True)  # noqa: E731
        result = lambda v, d: v  # noqa: E731
    batch_of, kbeg, kend, size = _contraction(step, split)
    block = max(GEMM_VEC_BLOCK, math.isqrt(max(size - 1, 0)) + 1)
    block = -(-block // kstep) * kstep
    two = size > block
    sums = ("acc", "tot") if two else ("acc",)
    pairs = [(i, h) for i in range(nr) for h in range(nh)]
    fma = []
    for kk in range(kstep):
        fma.append("    {")
        fma += [f"      let x{g} = ta[{kk}][{_plus('ty', ty_n * g)}];" for g in range(nr // 4)]
        fma += [f"      let y{h} = tb[{kk}][{_plus('tx', tx_n * h)}];" for h in range(nh)]
        fma += [
            f"      acc{i}_{h} = fma(vec4<f32>(x{i // 4}.{_XYZW[i % 4]}), y{h}, acc{i}_{h});"
            for i, h in pairs
        ]
        fma.append("    }")
    step_loop = [
        *a_stores,
        *b_stores,
        "    workgroupBarrier();",
        f"    {{ let pn = p0 + {kstep}i;",  # the next tile, while this one is multiplied
        *("  " + line for line in a_loads + b_loads),
        "    }",
        *fma,
        "    workgroupBarrier();",
    ]
    if two:
        loops = [
            f"  for (var p1: i32 = kbeg; p1 < kend; p1 += {block}i) {{",
            f"    let pe = min(p1 + {block}i, kend);",
            f"    for (var p0: i32 = p1; p0 < pe; p0 += {kstep}i) {{",
            *("  " + line for line in step_loop),
            "    }",
            *(
                f"    tot{i}_{h} = tot{i}_{h} + acc{i}_{h}; acc{i}_{h} = vec4<f32>(0.0f);"
                for i, h in pairs
            ),
            "  }",
        ]
    else:
        loops = [
            f"  for (var p0: i32 = kbeg; p0 < kend; p0 += {kstep}i) {{",
            *step_loop,
            "  }",
        ]
    stores = ["  let r0 = row0 + 4i * ty; let c0 = col0 + 4i * tx;"]
    for i, h in pairs:
        final = f"{sums[-1]}{i}_{h}"
        stores += [
            f"  {{ let r = {_plus('r0', 4 * ty_n * (i // 4) + i % 4)}; "
            f"let c = {_plus('c0', 4 * tx_n * h)};",
            f"    if (r < {m}i) {{",
            *(
                f"      if ({_plus('c', d)} < {n}i) {{ {c_ref(d)} = "
                f"bitcast<u32>({result(f'{final}.{_XYZW[d]}', d)}); }}"
                for d in range(4)
            ),
            "    }",
            "  }",
        ]
    text = "\n".join(
        [
            *slots.declarations(),
            "",
            f"var<workgroup> ta: array<array<vec4<f32>, {rows // 4}>, {kstep}>;",
            f"var<workgroup> tb: array<array<vec4<f32>, {cols // 4}>, {kstep}>;",
            "",
            *_main_prologue(step, tile, head, batch_of, kbeg, kend),
            *(f"  var {w}{i}_{h} = vec4<f32>(0.0f);" for w in sums for i, h in pairs),
            f"  let t = ty * {tx_n}i + tx;",
            *a_before,
            *b_before,
            "  { let pn = kbeg;",  # the first tile
            *a_loads,
            *b_loads,
            "  }",
            *loops,
            *stores,
            "}",
            "",
        ]
    )
    grid, name = _grid(step, rows, cols, split)
    iterations = -(-size // kstep) + (-(-size // block) if two else 0)
    return Shader(name, text, slots.bindings(), grid, iterations)


def _contraction(step: Gemm, split: SplitK | None) -> tuple[str, str, str, int]:
    """``(batch matrix, first k, end of k, range length)`` of a workgroup of a matmul shader:
    the whole contraction of batch matrix ``wid.z``, or of a split's first pass range
    ``wid.z / batch`` of matrix ``wid.z % batch``."""
    if split is None:
        return "i32(wid.z)", "0i", f"{step.k}i", step.k
    kbeg = f"(i32(wid.z) / {step.batch}i) * {split.size}i"
    kend = f"min({kbeg} + {split.size}i, {step.k}i)"
    return f"i32(wid.z) % {step.batch}i", kbeg, kend, split.size


def _main_prologue(step: Gemm, tile: GemmTile, head, batch_of, kbeg, kend) -> list[str]:
    """The entry point's signature and first lines, shared by both matmul shaders: the
    scope ``head``, the invocation's place in its tile, the tile's origin, the batch matrix's
    bases and the contraction range."""
    m, n, k = step.m, step.n, step.k
    return [
        f"@compute @workgroup_size({tile.threads_x}, {tile.threads_y})",
        "fn main(@builtin(local_invocation_id) lid: vec3<u32>, "
        "@builtin(workgroup_id) wid: vec3<u32>) {",
        *head,
        "  let tx = i32(lid.x); let ty = i32(lid.y);",
        f"  let row0 = i32(wid.y) * {tile.rows}i; let col0 = i32(wid.x) * {tile.cols}i;",
        f"  let bt = {batch_of};",
        f"  let abase = bt * {m * k}i; let bbase = bt * {k * n}i; let cbase = bt * {m * n}i;",
        f"  let kbeg = {kbeg}; let kend = {kend};",
    ]


def _grid(step: Gemm, rows: int, cols: int, split: SplitK | None) -> tuple[tuple, str]:
    """(workgroup grid, shader name) of a matmul shader of ``rows x cols`` tiles: x over
    column tiles, y over row tiles, z over batch matrices (times the ranges of a split)."""
    m, n, k = step.m, step.n, step.k
    gx, gy = -(-n // cols), -(-m // rows)
    gz = step.batch * (split.chunks if split else 1)
    if max(gx, gy, gz) > MAX_GROUPS:
        raise LoweringError(
            f"jit(backend='gpu'): matmul {m}x{k}x{n} (batch {step.batch}) "
            f"needs more than {MAX_GROUPS} workgroups along one axis"
        )
    grid = (gx, gy, gz) if m and n else (0, 1, 1)
    return grid, f"{step.name}_split" if split else step.name


def render_gemm_sum(step: Gemm, place, scope: Scope, split: SplitK) -> Shader:
    """The second pass of a split contraction (:class:`SplitK`): one invocation per output
    element adds its ranges' partial products in order, then applies alpha and beta."""
    slots, src = Slots(place), Prelude(False)
    outputs = step.batch * step.m * step.n
    part = slots.word("arena", split.base, f"q * {outputs}i + flat")
    body = [
        "  var acc = 0.0f;",
        f"  for (var q = 0i; q < {split.chunks}i; q++) {{ acc += bitcast<f32>({part}); }}",
        f"  {slots.ref(step.c, 'flat', write=True)} = "
        f"bitcast<u32>({_gemm_epilogue(step, slots, 'acc', 'flat')});",
    ]
    return flat_shader(f"{step.name}_sum", slots, src, scope, outputs, body, split.chunks)
