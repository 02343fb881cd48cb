"""Dense linear algebra steps on the GPU: Cholesky (``steps.CholeskyStep``), triangular solves
(``steps.TriangularSolveStep``) and LU with partial pivoting (``steps.LuStep``), each one
dispatch for a whole batch of matrices up to ``WORKGROUP_MAX`` on a side (Cholesky: up to
``CHOLESKY_WORKGROUP_MAX``).

* Cholesky and LU of matrices up to ``SERIAL_MAX`` (32) on a side: one invocation per matrix
  runs the right-looking algorithm in its own array (or, above ``SERIAL_ARRAY_WORDS``, in its
  output buffer), with no barriers (a batch of 1000 4x4 matrices: 64-invocation workgroups,
  16 of them).
* Cholesky and LU of larger matrices: one workgroup per matrix runs it column by column, its
  invocations sharing each column's work (the column's scaling, the trailing update) and
  meeting at barriers. The matrix lives in workgroup memory where it fits (``SHARED_WORDS``:
  16 KiB, WebGPU's guaranteed minimum), else in the output buffer itself, with storage
  barriers.
* Triangular solve: one invocation per right-hand side (a column of ``b``, or a row for
  ``x op(a) = b``) substitutes serially, reading the triangle of ``a`` from memory; no
  barriers.
* Matrices larger than ``WORKGROUP_MAX`` (256; Cholesky ``CHOLESKY_WORKGROUP_MAX``, 128) on a
  side: a few dispatches per column, each spread over the device (``linalg_columns.py``);
  :func:`render_linalg` chooses.

Semantics as on the CPU (OpenBLAS's LAPACK): a matrix that is not positive definite (a pivot
<= 0) gets a NaN lower triangle and zeros above (a NaN pivot is not caught: its NaN spreads
through what depends on it, as in OpenBLAS); LU swaps in the first row of largest magnitude
(``|v| > best``, so ties keep the first), applies each swap to whole rows, leaves a column
with a zero pivot unscaled (division by one), and writes 0-based int32 pivots and the
permutation they make. Float32 only (the GPU has no float64).
"""

from __future__ import annotations

from fungrad.lowering.fusion import LoweringError
from fungrad.lowering.gpu.frame import (
    Scope,
    Shader,
    Slots,
    flat_shader,
    workgroup_text,
)
from fungrad.lowering.gpu.helpers import Prelude
from fungrad.lowering.gpu.linalg_columns import (
    Passes,
    cholesky_passes,
    lu_passes,
    matrix_grid,
    triangular_solve_passes,
)
from fungrad.lowering.steps import CholeskyStep, LuStep, TriangularSolveStep

#: workgroup-memory words a matrix may take (WebGPU guarantees 16 KiB of workgroup storage;
#: a few words are left for the guard flag)
SHARED_WORDS = 4000
#: the largest matrix side the one-dispatch kernels take; larger matrices take a few
#: dispatches per column (``linalg_columns.py``). An LU workgroup's first invocation loops
#: about 55000 times at 256 (its pivot searches and its share of the updates; lavapipe stops
#: at 65535), a triangular solve's invocations 33000.
WORKGROUP_MAX = 256
#: Cholesky's: on lavapipe its column passes beat a workgroup per matrix from about here (ms,
#: a workgroup against the passes, noisy: one 150x150 17 / 9-13, one 200x200 53-80 / 17-24,
#: 16 of 128x128 90-470 / 33-68); LU's were about even at 200 (46 / 48, 112 / 56), so LU keeps
#: its workgroup up to ``WORKGROUP_MAX`` (a real GPU runs a workgroup's barriers far cheaper
#: than lavapipe's coroutine switches, and the passes cost a dispatch per column)
CHOLESKY_WORKGROUP_MAX = 128
#: the most invocations of a factorisation's workgroup
MAX_THREADS = 256
_NAN = "bitcast<f32>(0x7fc00000u)"


def _threads(work: int) -> int:
    """Invocations per workgroup for a matrix whose widest column step has ``work``
    elements: a power of two, about a quarter of them (each invocation loops over a few),
    from 1 to ``MAX_THREADS``."""
    t = 1
    while t < MAX_THREADS and 4 * t < work:
        t *= 2
    return t


def _f32(step, dtype) -> None:
    if str(dtype) != "float32":
        raise LoweringError(
            f"jit(backend='gpu'): {type(step).__name__} {step.name} of {dtype}: the GPU "
            "runs float32 linear algebra only; use float32 or backend='cpu'"
        )


#: matrices up to this side are factored by one invocation each (no barriers; the matrix in
#: the invocation's own array). lavapipe, ms per call, serial against a workgroup per matrix:
#: Cholesky / LU of 1000 4x4 0.6 / 0.6 against 2.1 / 4.4, 1000 16x16 9.4 / 11.3 against 43 /
#: 77, 16 32x32 1.5 / 1.7 against 5.4 / 9.8, one 32x32 1.1 / 0.9 against 1.1 / 2.5 (its barriers
#: are coroutine switches). Its loops run ~n^3/3 times: 11000 at 32 (lavapipe stops at 65535).
SERIAL_MAX = 32
#: the most words of a matrix an invocation keeps in its own array (larger: in its output
#: buffer). llvmpipe's compile time grows steeply with the array: LU 16x16 0.19 s, 24x24
#: 0.8 s, 32x32 3.3 s (Cholesky 32x32 0.25 s), against 0.05 s in the output buffer, which ran
#: 1.3-3x slower (ms, noisy: 1000 8x8 3.0 / 10.2, 16 24x24 1.0 / 9.3)
SERIAL_ARRAY_WORDS = 300


class _Layout:
    """Where a matrix is factored and by whom: ``"serial"`` (one invocation per matrix, the
    matrix in a function-scope array ``S`` up to ``SERIAL_ARRAY_WORDS``, else in its output
    buffer), ``"shared"`` (a workgroup per matrix, ``S`` in
    workgroup memory) or ``"global"`` (a workgroup per matrix, the matrix in its output
    buffer ``buf`` at word ``base``, storage barriers). Gives the matrix's elements as f32
    text, the barrier, and the shader."""

    def __init__(self, slots: Slots, buf, n: int, words: int, threads: int):
        self.slots, self.buf, self.base = slots, buf, "base"
        if n <= SERIAL_MAX:
            self.mode, self.threads = "serial", 1
        else:
            self.mode = "shared" if words <= SHARED_WORDS else "global"
            self.threads = threads
        self.words = words
        self.bar = {"serial": "", "shared": "  workgroupBarrier();"}.get(
            self.mode, "  storageBarrier();"
        )

    @property
    def local(self) -> bool:
        """Whether the matrix is in ``S`` (to be stored to its output at the end)."""
        if self.mode == "serial":
            return self.words <= SERIAL_ARRAY_WORDS
        return self.mode != "global"

    def get(self, at: str) -> str:
        if self.local:
            return f"S[{at}]"
        return f"bitcast<f32>({self.slots.ref(self.buf, f'{self.base} + {at}')})"

    def set(self, at: str, value: str) -> str:
        if self.local:
            return f"S[{at}] = {value};"
        ref = self.slots.ref(self.buf, f"{self.base} + {at}", write=True)
        return f"{ref} = bitcast<u32>({value});"

    def shader(self, name, src, scope, variables, batch, body, iters, empty) -> Shader:
        """``variables``: (name, WGSL type) the invocation or its workgroup shares, ``S``
        added where the matrix is local."""
        if self.local:
            variables = [("S", f"array<f32, {max(1, self.words)}>"), *variables]
        slots = self.slots
        if self.mode == "serial":
            body = [
                *(f"  var {v}: {t};" for v, t in variables),
                "  let mat = flat;",
                "  let t = 0i;",
                *body,
            ]
            return flat_shader(name, slots, src, scope, 0 if empty else batch, body, iters)
        head, guard = slots.scope_lines(scope)
        head = [
            *head,
            "  let mat = i32(wid.x + wid.y * nwg.x);",
            f"  if (mat >= {batch}i) {{ return; }}",
            "  let t = i32(lid);",
        ]
        decl = [f"var<workgroup> {v}: {t};" for v, t in variables]
        text = workgroup_text(slots, src, decl, self.threads, head, guard, body)
        return Shader(name, text, slots.bindings(), matrix_grid(batch, empty), iters)


def render_cholesky(step, place, scope: Scope) -> Shader:
    """``steps.CholeskyStep``: one invocation (up to ``SERIAL_MAX``) or one workgroup per
    matrix (``_Layout``). Column ``j``: every invocation reads
    the pivot ``a_jj`` (not positive: the matrix is marked bad), the column below is
    divided by its square root, then the trailing lower triangle loses the column's outer
    product. The result is the lower triangle (NaN where bad), zeros above."""
    _f32(step, step.out.dtype)
    n, batch = step.n, step.batch
    slots, src = Slots(place), Prelude(False)
    s = _Layout(slots, step.out, n, n * n, _threads(n * n))
    T, bar = s.threads, s.bar
    a = f"bitcast<f32>({slots.ref(step.a, 'base + e')})"
    body = [
        f"  let base = mat * {n * n}i;",
        f"  for (var e = t; e < {n * n}i; e += {T}i) {{",
        f"    {s.set('e', f'select(0.0f, {a}, e % {n}i <= e / {n}i)')}",
        "  }",
        bar,
        "  var bad = false;",
        f"  for (var j = 0i; j < {n}i; j++) {{",
        f"    let d2 = {s.get(f'j * {n}i + j')};",
        "    bad = bad || d2 <= 0.0f;",
        "    let d = sqrt(d2);",
        f"  {bar}",
        f"    for (var i = j + 1i + t; i < {n}i; i += {T}i) {{",
        f"      {s.set(f'i * {n}i + j', s.get(f'i * {n}i + j') + ' / d')}",
        "    }",
        f"    if (t == 0i) {{ {s.set(f'j * {n}i + j', 'd')} }}",
        f"  {bar}",
        f"    let r = {n - 1}i - j;",
        f"    for (var e = t; e < r * r; e += {T}i) {{",
        "      let i = j + 1i + e / r;",
        "      let c = j + 1i + e % r;",
        "      if (c <= i) {",
        f"        let v = {s.get(f'i * {n}i + c')} - {s.get(f'i * {n}i + j')} * "
        f"{s.get(f'c * {n}i + j')};",
        f"        {s.set(f'i * {n}i + c', 'v')}",
        "      }",
        "    }",
        f"  {bar}",
        "  }",
        f"  for (var e = t; e < {n * n}i; e += {T}i) {{",
        f"    let low = e % {n}i <= e / {n}i;",
        f"    let v = select(0.0f, select({s.get('e')}, {_NAN}, bad), low);",
        f"    {slots.ref(step.out, 'base + e', write=True)} = bitcast<u32>(v);",
        "  }",
    ]
    iters = 2 * -(-n * n // T) + sum(
        -(-(n - j) // T) + -(-((n - j - 1) ** 2) // T) for j in range(n)
    )
    return s.shader(step.name, src, scope, [], batch, body, iters, n == 0)


def render_lu(step, place, scope: Scope) -> Shader:
    """``steps.LuStep``: one invocation (up to ``SERIAL_MAX``) or one workgroup per matrix
    (``_Layout``). Column ``j``: invocation 0 finds the pivot row ``p`` (the first of largest
    magnitude at or below ``j``), records it and the permutation, and shares it; then rows
    ``j`` and ``p`` swap in every other column while column ``j`` takes the pivot on the
    diagonal and the multipliers below (divided by the pivot, by one if it is zero); then the
    trailing block loses the outer product of the multipliers and row ``j``."""
    _f32(step, step.lu.dtype)
    m, n, batch = step.m, step.n, step.batch
    k = min(m, n)
    slots, src = Slots(place), Prelude(False)
    s = _Layout(slots, step.lu, max(m, n), m * n + m, _threads(max(m, n) ** 2))
    T, bar, shared = s.threads, s.bar, s.local

    def perm(at: str) -> str:
        return (
            f"P[{at}]"
            if shared
            else f"bitcast<i32>({slots.ref(step.permutation, f'pbase + {at}')})"
        )

    def set_perm(at: str, value: str) -> str:
        if shared:
            return f"P[{at}] = {value};"
        return (
            f"{slots.ref(step.permutation, f'pbase + {at}', write=True)} = bitcast<u32>({value});"
        )

    a = f"bitcast<f32>({slots.ref(step.a, 'base + e')})"
    body = [
        f"  let base = mat * {m * n}i;",
        f"  let pbase = mat * {m}i;",
        f"  for (var e = t; e < {m * n}i; e += {T}i) {{ {s.set('e', a)} }}",
        f"  for (var e = t; e < {m}i; e += {T}i) {{ {set_perm('e', 'e')} }}",
        bar,
        f"  for (var j = 0i; j < {k}i; j++) {{",
        "    if (t == 0i) {",
        "      var p = j;",
        f"      var best = abs({s.get(f'j * {n}i + j')});",
        f"      for (var i = j + 1i; i < {m}i; i++) {{",
        f"        let v = abs({s.get(f'i * {n}i + j')});",
        "        if (v > best) { best = v; p = i; }",
        "      }",
        "      W_p = p;",
        f"      W_pv = {s.get(f'p * {n}i + j')};",
        f"      W_ajj = {s.get(f'j * {n}i + j')};",
        f"      {slots.ref(step.pivots, f'mat * {k}i + j', write=True)} = bitcast<u32>(p);",
        f"      let pj = {perm('j')};",
        f"      {set_perm('j', perm('p'))}",
        f"      {set_perm('p', 'pj')}",
        "    }",
        "    let p = W_p;" if s.mode == "serial" else "    let p = workgroupUniformLoad(&W_p);",
        *([bar] if s.mode == "global" else []),
        "    let pv = W_pv;",
        "    let ajj = W_ajj;",
        "    let div = select(1.0f, pv, pv != 0.0f);",
        f"    for (var e = t; e < {n + m}i - j; e += {T}i) {{",
        f"      if (e < {n}i) {{",
        "        if (e != j && p != j) {",
        f"          let x = {s.get(f'j * {n}i + e')};",
        f"          let y = {s.get(f'p * {n}i + e')};",
        f"          {s.set(f'j * {n}i + e', 'y')}",
        f"          {s.set(f'p * {n}i + e', 'x')}",
        "        }",
        "      } else {",
        f"        let i = j + e - {n}i;",
        "        if (i == j) {",
        f"          {s.set(f'j * {n}i + j', 'pv')}",
        "        } else {",
        f"          let v = select({s.get(f'i * {n}i + j')}, ajj, i == p);",
        f"          {s.set(f'i * {n}i + j', 'v / div')}",
        "        }",
        "      }",
        "    }",
        f"  {bar}",
        f"    let r = {m - 1}i - j;",
        f"    let w = {n - 1}i - j;",
        f"    for (var e = t; e < r * w; e += {T}i) {{",
        "      let i = j + 1i + e / w;",
        "      let c = j + 1i + e % w;",
        f"      let v = {s.get(f'i * {n}i + c')} - {s.get(f'i * {n}i + j')} * "
        f"{s.get(f'j * {n}i + c')};",
        f"      {s.set(f'i * {n}i + c', 'v')}",
        "    }",
        f"  {bar}",
        "  }",
    ]
    if shared:
        body += [
            f"  for (var e = t; e < {m * n}i; e += {T}i) {{",
            f"    {slots.ref(step.lu, 'base + e', write=True)} = bitcast<u32>(S[e]);",
            "  }",
            f"  for (var e = t; e < {m}i; e += {T}i) {{",
            f"    {slots.ref(step.permutation, 'pbase + e', write=True)} = bitcast<u32>(P[e]);",
            "  }",
        ]
    iters = 2 * (-(-m * n // T) + -(-m // T)) + sum(
        (m - j) + -(-(n + m - j) // T) + -(-((m - j - 1) * (n - j - 1)) // T) for j in range(k)
    )
    variables = [("W_p", "i32"), ("W_pv", "f32"), ("W_ajj", "f32")]
    if shared:
        variables.append(("P", f"array<i32, {max(1, m)}>"))
    return s.shader(step.name, src, scope, variables, batch, body, iters, m == 0)


def render_triangular_solve(step, place, scope: Scope) -> Shader:
    """``steps.TriangularSolveStep``: one invocation per right-hand side substitutes through
    the triangle. ``x op(a) = b`` is ``op(a)ᵀ xᵀ = bᵀ``: the right-hand sides are then the rows
    of ``b``. With ``M`` the effective matrix (``a`` or its transpose), ``x_i = (b_i - sum_j
    M_ij x_j) / M_ii`` over the solved ``j``, forward where ``M`` is lower triangular."""
    _f32(step, step.out.dtype)
    rows, cols, batch = step.rows, step.cols, step.batch
    m = rows if step.left_side else cols
    systems = cols if step.left_side else rows
    tt = step.transpose_a != (not step.left_side)  # M = aᵀ
    forward = step.lower != tt
    slots, src = Slots(place), Prelude(False)

    def at(i: str) -> str:  # element i of this system in b / out
        return f"bb + {i} * {cols}i" if step.left_side else f"bb + {i}"

    def mat(i: str, j: str) -> str:  # M[i][j]
        idx = f"({j}) * {m}i + ({i})" if tt else f"({i}) * {m}i + ({j})"
        return f"bitcast<f32>({slots.ref(step.a, f'ab + {idx}')})"

    order = (
        (f"for (var q = 0i; q < {m}i; q++) {{", "q", "for (var j = 0i; j < i; j++) {")
        if forward
        else (
            f"for (var q = 0i; q < {m}i; q++) {{",
            f"{m - 1}i - q",
            f"for (var j = i + 1i; j < {m}i; j++) {{",
        )
    )
    head, i_of, inner = order
    x = f"bitcast<f32>({slots.ref(step.out, at('j'))})"
    body = [
        f"  let bt = flat / {systems}i;",
        f"  let sys = flat % {systems}i;",
        f"  let ab = bt * {m * m}i;",
        f"  let bb = bt * {rows * cols}i + " + ("sys;" if step.left_side else f"sys * {cols}i;"),
        f"  {head}",
        f"    let i = {i_of};",
        f"    var acc = bitcast<f32>({slots.ref(step.b, at('i'))});",
        f"    {inner}",
        f"      acc = acc - {mat('i', 'j')} * {x};",
        "    }",
        f"    let xi = {'acc' if step.unit_diagonal else 'acc / ' + mat('i', 'i')};",
        f"    {slots.ref(step.out, at('i'), write=True)} = bitcast<u32>(xi);",
        "  }",
    ]
    iters = m + m * (m - 1) // 2
    return flat_shader(step.name, slots, src, scope, batch * systems, body, iters)


def render_linalg(step, place, scope: Scope, base: int, ctl: int) -> Passes:
    """The dispatches of a Cholesky, triangular solve or LU step: one shader for matrices up
    to ``WORKGROUP_MAX`` (``CHOLESKY_WORKGROUP_MAX``) on a side, else ``linalg_columns.py``'s
    passes (``base``: the arena word their scratch starts at, ``ctl``: the first ``ctl`` word
    they may use)."""
    if isinstance(step, CholeskyStep):
        if step.n > CHOLESKY_WORKGROUP_MAX:
            _f32(step, step.out.dtype)
            return cholesky_passes(step, place, scope, base, ctl)
        shader = render_cholesky(step, place, scope)
    elif isinstance(step, TriangularSolveStep):
        if (step.rows if step.left_side else step.cols) > WORKGROUP_MAX:
            _f32(step, step.out.dtype)
            return triangular_solve_passes(step, place, scope, base, ctl)
        shader = render_triangular_solve(step, place, scope)
    elif isinstance(step, LuStep):
        if min(step.m, step.n) and max(step.m, step.n) > WORKGROUP_MAX:
            _f32(step, step.lu.dtype)
            return lu_passes(step, place, scope, base, ctl)
        shader = render_lu(step, place, scope)
    else:
        raise TypeError(f"render_linalg: {type(step).__name__} is no linear algebra step")
    return Passes([shader], [(0, shader.grid)])


__all__ = ["render_linalg", "render_cholesky", "render_lu", "render_triangular_solve"]
