"""Matmul shaders (``fusion.Gemm``): tiled through workgroup memory, and the sum pass of a
contraction split into ranges (:class:`~fungrad.lowering.gpu.schemes.SplitK`)."""

from __future__ import annotations

import numpy as np

from fungrad.lowering.fusion import Gemm, LoweringError
from fungrad.lowering.gpu.frame import MAX_GROUPS, TOP, Scope, Shader, Slots, flat_shader
from fungrad.lowering.gpu.helpers import Prelude
from fungrad.lowering.gpu.schemes import SplitK
from fungrad.lowering.gpu.types import literal

TILE = 64  # output tile edge per workgroup
#: contraction elements a thread accumulates before adding them to a middle sum, whose
#: GEMM_BLOCK values go into its totals (a multiple of KSTEP): a long k is a blocked sum,
#: not one running fma chain (a matvec over k = 60000 was 25 ulps off float64)
GEMM_BLOCK = 64
THREADS = 16  # threads per tile edge: each computes 4 x 4 outputs
KSTEP = 16


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


def render_gemm(
    step: Gemm,
    place: dict[int, tuple[str, int | str]],
    scope: Scope = TOP,
    split: SplitK | None = None,
) -> Shader:
    """``c = a @ b`` per batch matrix: 64x64 output tiles through workgroup memory, 4x4
    outputs per thread (rows ``ty + 16 i``, columns ``tx + 16 j``: coalesced reads/writes).
    ``split``: this is the first pass of a split contraction (:class:`SplitK`): workgroup
    ``z`` computes range ``z / batch`` of batch matrix ``z % batch``."""
    if step.c.dtype != np.float32:
        raise LoweringError(f"jit(backend='gpu'): matmul of {step.c.dtype.name}")
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
        batch_of, kbeg, kend, size = "i32(wid.z)", "0i", f"{k}i", k
    else:
        c_ref = slots.word("arena", split.base, f"i32(wid.z) * {m * n}i + r * {n}i + c", True)
        result = "tot[{i}]"
        batch_of = f"i32(wid.z) % {step.batch}i"
        kbeg = f"(i32(wid.z) / {step.batch}i) * {split.size}i"
        kend = f"min({kbeg} + {split.size}i, {k}i)"
        size = split.size
    per = TILE * KSTEP // (THREADS * THREADS)

    def flush(indent: str, low: str = "acc", high: str = "mid") -> list[str]:
        """A thread's ``low`` sums into its ``high`` ones (blocked sums: bounded error)."""
        return [
            f"{indent}{high}[{i}] = {high}[{i}] + {low}[{i}]; {low}[{i}] = 0.0f;" for i in range(16)
        ]

    fma = []
    for i in range(4):
        fma.append(f"      let a{i} = ta[(ty + {16 * i}i) * {KSTEP}i + kk];")
    for j in range(4):
        fma.append(f"      let c{j} = tb[kk * {TILE}i + tx + {16 * j}i];")
    for i in range(4):
        for j in range(4):
            fma.append(f"      acc[{4 * i + j}] = fma(a{i}, c{j}, acc[{4 * i + j}]);")
    stores = []
    for i in range(4):
        for j in range(4):
            stores += [
                f"  {{ let r = row0 + ty + {16 * i}i; let c = col0 + tx + {16 * j}i;",
                f"    if (r < {m}i && c < {n}i) {{ {c_ref} = "
                f"bitcast<u32>({result.format(i=4 * i + j)}); }} }}",
            ]
    text = "\n".join(
        [
            *slots.declarations(),
            "",
            f"var<workgroup> ta: array<f32, {TILE * KSTEP}>;",
            f"var<workgroup> tb: array<f32, {TILE * KSTEP}>;",
            *(["var<workgroup> run: u32;"] if guard is not None else []),
            "",
            f"@compute @workgroup_size({THREADS}, {THREADS})",
            "fn main(@builtin(local_invocation_id) lid: vec3<u32>, "
            "@builtin(workgroup_id) wid: vec3<u32>) {",
            *head,
            "  let tx = i32(lid.x); let ty = i32(lid.y);",
            f"  let row0 = i32(wid.y) * {TILE}i; let col0 = i32(wid.x) * {TILE}i;",
            f"  let bt = {batch_of};",
            f"  let abase = bt * {m * k}i; let bbase = bt * {k * n}i; let cbase = bt * {m * n}i;",
            f"  let kbeg = {kbeg}; let kend = {kend};",
            "  var acc: array<f32, 16>;",
            "  var mid: array<f32, 16>;",
            "  var tot: array<f32, 16>;",
            "  let t = ty * 16i + tx;",
            f"  for (var p0: i32 = kbeg; p0 < kend; p0 += {KSTEP}i) {{",
            f"    for (var q: i32 = 0i; q < {per}i; q++) {{",
            f"      let e = t + q * {THREADS * THREADS}i;",
            f"      let gi = row0 + e / {KSTEP}i; let gp = p0 + e % {KSTEP}i;",
            "      var va = 0.0f;",
            f"      if (gi < {m}i && gp < kend) {{ va = bitcast<f32>({a_ref}); }}",
            "      ta[e] = va;",
            f"      let gq = p0 + e / {TILE}i; let gc = col0 + e % {TILE}i;",
            "      var vb = 0.0f;",
            f"      if (gq < kend && gc < {n}i) {{ vb = bitcast<f32>({b_ref}); }}",
            "      tb[e] = vb;",
            "    }",
            "    workgroupBarrier();",
            f"    for (var kk: i32 = 0i; kk < {KSTEP}i; kk++) {{",
            *fma,
            "    }",
            "    workgroupBarrier();",
            f"    if ((p0 - kbeg) % {GEMM_BLOCK}i == {GEMM_BLOCK - KSTEP}i) {{",
            *flush("      "),
            f"      if ((p0 - kbeg) % {GEMM_BLOCK**2}i == {GEMM_BLOCK**2 - KSTEP}i) {{",
            *flush("        ", "mid", "tot"),
            "      }",
            "    }",
            "  }",
            *flush("  "),
            *flush("  ", "mid", "tot"),
            *stores,
            "}",
            "",
        ]
    )
    gx, gy = -(-n // TILE), -(-m // TILE)
    gz = step.batch * (split.chunks if split else 1)
    if max(gx, gy, gz) > MAX_GROUPS:
        raise LoweringError(
            f"jit(backend='gpu'): matmul {m}x{k}x{n} (batch {step.batch}) "
            f"needs more than {MAX_GROUPS} workgroups along one axis"
        )
    grid = (gx, gy, gz) if m and n else (0, 1, 1)
    name = f"{step.name}_split" if split else step.name
    return Shader(name, text, slots.bindings(), grid, -(-size // KSTEP) * (1 + per + KSTEP))


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
