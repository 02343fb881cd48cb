"""Cholesky, triangular solves and LU of matrices too large for one workgroup
(``linalg.WORKGROUP_MAX``): a few dispatches per column (or block of rows), each spread over
the whole device.

Every pass reads the column (or block) it works on from a ``ctl`` word: a pass of one
pipeline serves every column, its grid sized to what is left of the matrix (the commands repeat
the compiled pipeline with another grid). A pass never writes a word another invocation of
the same dispatch reads, so passes need no barriers between workgroups:

* Cholesky (right-looking by blocks of ``CHOLESKY_BLOCK`` columns, ``n + n / 32 + 2``
  dispatches): the lower triangle is copied to the output; column ``j`` of a block is one
  dispatch, one invocation per row ``i >= j`` computing ``L_ij = (A_ij - sum_k L_ik L_jk) /
  L_jj`` over the block's earlier columns ``k`` (each invocation computes ``L_jj`` itself; the
  diagonal goes to the arena, so no invocation writes what another reads); after the block
  one dispatch subtracts its products from the trailing lower triangle, one invocation per
  element. A pivot <= 0 marks the matrix in the arena; the last pass writes the diagonal and
  gives marked matrices a NaN lower triangle.
* Triangular solve (blocks of ``SOLVE_BLOCK`` unknowns, ``1 + m / SOLVE_BLOCK`` dispatches):
  the right-hand sides are copied to the arena; dispatch ``p`` solves block ``p`` in every
  invocation (a triangle of ``SOLVE_BLOCK`` rows, cheap), which then either stores its row's
  unknown or subtracts the block's contribution from its later row of the copy.
* LU (right-looking, two dispatches per column): a workgroup per matrix finds the pivot (a
  tree over its invocations: the first row of largest magnitude), swaps the rows and writes
  the multipliers; then one invocation per element of the trailing block updates it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fungrad.lowering.fusion import LoweringError
from fungrad.lowering.gpu.frame import (
    MAX_GROUPS,
    WORKGROUP,
    Scope,
    Shader,
    Slots,
    flat_shader,
    grid_1d,
    workgroup_text,
)
from fungrad.lowering.gpu.helpers import Prelude

#: columns of a Cholesky block: its columns' passes subtract products within the block only,
#: then one update subtracts the block from the trailing matrix (even: the update reads the
#: column word its last column wrote)
CHOLESKY_BLOCK = 32
#: unknowns a triangular-solve dispatch solves (each invocation solves the block's triangle:
#: SOLVE_BLOCK^2 / 2 products, against SOLVE_BLOCK for its own update)
SOLVE_BLOCK = 16
#: invocations of the LU pivot workgroup (a power of two: its tree halves)
PIVOT_THREADS = 256
_NAN = "bitcast<f32>(0x7fc00000u)"


@dataclass
class Passes:
    """A step's commands: its ``shaders`` (each compiled once) and ``runs``, the order to
    dispatch them in, as (shader index, workgroup grid); ``scratch_words`` past the arena's
    temporaries and ``ctl_words`` after the enclosing loops' counters it uses."""

    shaders: list[Shader]
    runs: list[tuple[int, tuple[int, int, int]]] = field(default_factory=list)
    scratch_words: int = 0
    ctl_words: int = 0


def matrix_grid(batch: int, empty: bool) -> tuple[int, int, int]:
    """One workgroup per matrix: a 2-D grid beyond ``MAX_GROUPS`` matrices."""
    if empty or not batch:
        return (0, 1, 1)
    y = -(-batch // MAX_GROUPS)
    if y > MAX_GROUPS:
        raise LoweringError(f"jit(backend='gpu'): {batch} matrices exceed the workgroup grid")
    return (min(batch, MAX_GROUPS), y, 1)


def _ctl(slots: Slots, word: int, write: bool = False) -> str:
    return slots.word("ctl", 0, f"{word}i", write)


def _param(slots: Slots, name: str, word: int) -> str:
    return f"  let {name} = bitcast<i32>({_ctl(slots, word)});"


def _set_param(slots: Slots, word: int, value: str, cond: str = "flat == 0i") -> str:
    return f"  if ({cond}) {{ {_ctl(slots, word, True)} = bitcast<u32>({value}); }}"


def cholesky_passes(step, place, scope: Scope, base: int, ctl: int) -> Passes:
    """``steps.CholeskyStep`` by blocks of ``CHOLESKY_BLOCK`` columns (see the module
    docstring). The arena holds each matrix's mark (``base``: ``batch`` words) and its
    diagonal (``batch * n`` words after them); the column passes read ``j`` from ``ctl`` or
    ``ctl + 1`` (alternately) and write the next column to the other word, which the block's
    update reads."""
    n, batch, nb = step.n, step.batch, CHOLESKY_BLOCK
    nn = n * n
    diag = base + batch

    slots, src = Slots(place), Prelude(False)
    a = slots.ref(step.a, "flat")
    init = flat_shader(
        f"{step.name}_init",
        slots,
        src,
        scope,
        batch * nn,
        [
            f"  let e = flat % {nn}i;",
            f"  {slots.ref(step.out, 'flat', True)} = select(0u, {a}, e % {n}i <= e / {n}i);",
            f"  if (e == 0i) {{ {slots.word('arena', base, f'flat / {nn}i', True)} = 0u; }}",
            _set_param(slots, ctl, "0i"),
        ],
    )

    def el(slots, i: str, c: str, write: bool = False) -> str:
        ref = slots.ref(step.out, f"mb + {i} * {n}i + {c}", write)
        return ref if write else f"bitcast<f32>({ref})"

    columns = []
    for q in (0, 1):
        slots, src = Slots(place), Prelude(False)
        body = [
            _param(slots, "j", ctl + q),
            _set_param(slots, ctl + 1 - q, "j + 1i"),
            f"  let k0 = j - j % {nb}i;",
            f"  let rows = {n}i - j;",
            f"  if (flat >= {batch}i * rows) {{ return; }}",
            "  let bt = flat / rows;",
            "  let i = j + flat % rows;",
            f"  let mb = bt * {nn}i;",
            "  var djj = 0.0f;",
            "  var dij = 0.0f;",
            "  for (var k = k0; k < j; k++) {",
            f"    let ljk = {el(slots, 'j', 'k')};",
            "    djj = djj + ljk * ljk;",
            f"    dij = dij + {el(slots, 'i', 'k')} * ljk;",
            "  }",
            f"  let d2 = {el(slots, 'j', 'j')} - djj;",
            "  if (i == j) {",
            f"    {slots.word('arena', diag, f'bt * {n}i + j', True)} = bitcast<u32>(sqrt(d2));",
            "    if (d2 <= 0.0f) {",
            f"      {slots.word('arena', base, 'bt', True)} = 1u;",
            "    }",
            "    return;",
            "  }",
            f"  let v = ({el(slots, 'i', 'j')} - dij) / sqrt(d2);",
            f"  {el(slots, 'i', 'j', True)} = bitcast<u32>(v);",
        ]
        columns.append(flat_shader(f"{step.name}_col{q}", slots, src, scope, batch * n, body, nb))

    slots, src = Slots(place), Prelude(False)
    update = flat_shader(
        f"{step.name}_update",
        slots,
        src,
        scope,
        batch * nn,
        [
            _param(slots, "first", ctl),  # the next column: the block before it is done
            f"  let rem = {n}i - first;",
            f"  if (flat >= {batch}i * rem * rem) {{ return; }}",
            "  let bt = flat / (rem * rem);",
            "  let e = flat % (rem * rem);",
            "  let i = first + e / rem;",
            "  let c = first + e % rem;",
            "  if (c > i) { return; }",
            f"  let mb = bt * {nn}i;",
            "  var acc = 0.0f;",
            f"  for (var k = first - {nb}i; k < first; k++) {{",
            f"    acc = acc + {el(slots, 'i', 'k')} * {el(slots, 'c', 'k')};",
            "  }",
            f"  {el(slots, 'i', 'c', True)} = bitcast<u32>({el(slots, 'i', 'c')} - acc);",
        ],
        nb,
    )

    slots, src = Slots(place), Prelude(False)
    final = flat_shader(
        f"{step.name}_finish",
        slots,
        src,
        scope,
        batch * nn,
        [
            f"  let e = flat % {nn}i;",
            f"  let i = e / {n}i;",
            f"  let c = e % {n}i;",
            "  if (c > i) { return; }",
            f"  if ({slots.word('arena', base, f'flat / {nn}i')} != 0u) {{",
            f"    {slots.ref(step.out, 'flat', True)} = bitcast<u32>({_NAN});",
            "  } else if (c == i) {",
            f"    {slots.ref(step.out, 'flat', True)} = "
            f"{slots.word('arena', diag, f'(flat / {nn}i) * {n}i + i')};",
            "  }",
        ],
    )
    runs = [(0, init.grid)]
    for j in range(n):
        runs.append((1 + j % 2, grid_1d(batch * (n - j), WORKGROUP)))
        if j % nb == nb - 1 and j + 1 < n:
            runs.append((3, grid_1d(batch * (n - j - 1) ** 2, WORKGROUP)))
    runs.append((4, final.grid))
    return Passes([init, *columns, update, final], runs, batch + batch * n, 2)


def triangular_solve_passes(step, place, scope: Scope, base: int, ctl: int) -> Passes:
    """``steps.TriangularSolveStep`` by blocks of ``SOLVE_BLOCK`` unknowns (see the module
    docstring); ``base``: the arena word of the right-hand sides' working copy."""
    rows, cols, batch = step.rows, step.cols, step.batch
    m = rows if step.left_side else cols
    systems = cols if step.left_side else rows
    tt = step.transpose_a != (not step.left_side)  # M = aᵀ
    forward = step.lower != tt
    nb = SOLVE_BLOCK
    total = batch * systems

    def at(k: str) -> str:  # element k of system (bt, sys) in b / out
        inner = f"{k} * {cols}i + sys" if step.left_side else f"sys * {cols}i + {k}"
        return f"bt * {rows * cols}i + {inner}"

    def row(u: str) -> str:  # the row solved at position u
        return u if forward else f"({m - 1}i - ({u}))"

    def unpack(flat_rows: str) -> list[str]:
        return [
            f"  let bs = flat / {flat_rows};",
            f"  let bt = bs / {systems}i;",
            f"  let sys = bs % {systems}i;",
        ]

    slots, src = Slots(place), Prelude(False)
    init = flat_shader(
        f"{step.name}_init",
        slots,
        src,
        scope,
        total * m,
        [
            *unpack(f"{m}i"),
            f"  let k = flat % {m}i;",
            f"  {slots.word('arena', base, 'flat', True)} = {slots.ref(step.b, at('k'))};",
            _set_param(slots, ctl, "0i"),
        ],
    )
    blocks = []
    for q in (0, 1):
        slots, src = Slots(place), Prelude(False)

        def mat(i: str, j: str, slots=slots) -> str:  # M[i][j]
            idx = f"({j}) * {m}i + ({i})" if tt else f"({i}) * {m}i + ({j})"
            return f"bitcast<f32>({slots.ref(step.a, f'bt * {m * m}i + {idx}')})"

        def y(k: str, slots=slots, write: bool = False) -> str:
            return slots.word("arena", base, f"bs * {m}i + {k}", write)

        diag = "" if step.unit_diagonal else f" / {mat('r', 'r')}"
        body = [
            _param(slots, "p", ctl + q),
            _set_param(slots, ctl + 1 - q, "p + 1i"),
            f"  let first = p * {nb}i;",
            f"  let left = {m}i - first;",
            f"  if (flat >= {total}i * left) {{ return; }}",
            *unpack("left"),
            "  let u = first + flat % left;",
            f"  let k = {row('u')};",
            f"  let nbk = min({nb}i, left);",
            f"  var xs: array<f32, {nb}>;",
            "  for (var v0 = 0i; v0 < nbk; v0++) {",
            f"    let r = {row('first + v0')};",
            f"    var acc = bitcast<f32>({y('r')});",
            "    for (var v1 = 0i; v1 < v0; v1++) {",
            f"      acc = acc - {mat('r', row('first + v1'))} * xs[v1];",
            "    }",
            f"    xs[v0] = acc{diag};",
            "  }",
            "  if (u < first + nbk) {",
            f"    {slots.ref(step.out, at('k'), True)} = bitcast<u32>(xs[u - first]);",
            "    return;",
            "  }",
            f"  var acc = bitcast<f32>({y('k')});",
            "  for (var v0 = 0i; v0 < nbk; v0++) {",
            f"    acc = acc - {mat('k', row('first + v0'))} * xs[v0];",
            "  }",
            f"  {y('k', write=True)} = bitcast<u32>(acc);",
        ]
        iters = nb * (nb + 1) // 2 + nb
        blocks.append(
            flat_shader(f"{step.name}_block{q}", slots, src, scope, total * m, body, iters)
        )
    runs = [(0, init.grid)]
    for p in range(-(-m // nb)):
        runs.append((1 + p % 2, grid_1d(total * (m - p * nb), WORKGROUP)))
    return Passes([init, *blocks], runs, total * m, 2)


def lu_passes(step, place, scope: Scope, base: int, ctl: int) -> Passes:
    """``steps.LuStep`` column by column (see the module docstring): the pivot pass reads the
    column from ``ctl`` and copies it to ``ctl + 1``, where the update pass reads it and
    writes the next column to ``ctl``."""
    m, n, batch = step.m, step.n, step.batch
    k, mn, T = min(m, n), m * n, PIVOT_THREADS

    def A(slots, i: str, c: str) -> str:
        return f"bitcast<f32>({slots.ref(step.lu, f'mb + {i} * {n}i + {c}')})"

    def set_A(slots, i: str, c: str, v: str) -> str:
        return f"{slots.ref(step.lu, f'mb + {i} * {n}i + {c}', True)} = bitcast<u32>({v});"

    def perm(slots, i: str, write: bool = False) -> str:
        return slots.ref(step.permutation, f"mat * {m}i + {i}", write)

    slots, src = Slots(place), Prelude(False)
    init = flat_shader(
        f"{step.name}_init",
        slots,
        src,
        scope,
        batch * mn,
        [
            f"  {slots.ref(step.lu, 'flat', True)} = {slots.ref(step.a, 'flat')};",
            f"  let e = flat % {mn}i;",
            f"  if (e % {n}i == 0i) {{",
            f"    {slots.ref(step.permutation, f'(flat / {mn}i) * {m}i + e / {n}i', True)} = "
            f"bitcast<u32>(e / {n}i);",
            "  }",
            _set_param(slots, ctl, "0i"),
        ],
    )

    slots, src = Slots(place), Prelude(False)
    src.need("isnan")
    tree = []
    s = T // 2
    while s:
        tree += [
            f"  if (t < {s}i) {{",
            f"    let ov = RV[t + {s}i];",
            f"    let oi = RI[t + {s}i];",
            "    if (ov > RV[t] || (ov == RV[t] && oi < RI[t])) { RV[t] = ov; RI[t] = oi; }",
            "  }",
            "  workgroupBarrier();",
        ]
        s //= 2
    body = [
        _param(slots, "j", ctl),
        _set_param(slots, ctl + 1, "j", "mat == 0i && t == 0i"),
        f"  let mb = mat * {mn}i;",
        "  var best = -1.0f;",
        f"  var bi = {m}i;",
        f"  for (var i = j + t; i < {m}i; i += {T}i) {{",
        f"    let v = abs({A(slots, 'i', 'j')});",
        "    if (v > best) { best = v; bi = i; }",
        "  }",
        "  RV[t] = best;",
        "  RI[t] = bi;",
        "  workgroupBarrier();",
        *tree,
        f"  let ajj = {A(slots, 'j', 'j')};",
        "  var p = RI[0];",
        f"  if (fg_isnan(ajj) || p >= {m}i) {{ p = j; }}",
        f"  let pv = {A(slots, 'p', 'j')};",
        "  let div = select(1.0f, pv, pv != 0.0f);",
        "  storageBarrier();",
        "  if (t == 0i) {",
        f"    {slots.ref(step.pivots, f'mat * {k}i + j', True)} = bitcast<u32>(p);",
        f"    let pj = {perm(slots, 'j')};",
        f"    {perm(slots, 'j', True)} = {perm(slots, 'p')};",
        f"    {perm(slots, 'p', True)} = pj;",
        "  }",
        f"  for (var e = t; e < {n + m}i - j; e += {T}i) {{",
        f"    if (e < {n}i) {{",
        "      if (e != j && p != j) {",
        f"        let x = {A(slots, 'j', 'e')};",
        f"        let y = {A(slots, 'p', 'e')};",
        f"        {set_A(slots, 'j', 'e', 'y')}",
        f"        {set_A(slots, 'p', 'e', 'x')}",
        "      }",
        "    } else {",
        f"      let i = j + e - {n}i;",
        "      if (i == j) {",
        f"        {set_A(slots, 'j', 'j', 'pv')}",
        "      } else {",
        f"        let v = select({A(slots, 'i', 'j')}, ajj, i == p);",
        f"        {set_A(slots, 'i', 'j', 'v / div')}",
        "      }",
        "    }",
        "  }",
    ]
    head, guard = slots.scope_lines(scope)
    head = [
        *head,
        "  let mat = i32(wid.x + wid.y * nwg.x);",
        f"  if (mat >= {batch}i) {{ return; }}",
        "  let t = i32(lid);",
    ]
    shared = [f"var<workgroup> RV: array<f32, {T}>;", f"var<workgroup> RI: array<i32, {T}>;"]
    pivot = Shader(
        f"{step.name}_pivot",
        workgroup_text(slots, src, shared, T, head, guard, body),
        slots.bindings(),
        matrix_grid(batch, False),
        2 * (-(-m // T)) + -(-(n + m) // T),
    )

    slots, src = Slots(place), Prelude(False)
    update = flat_shader(
        f"{step.name}_update",
        slots,
        src,
        scope,
        batch * mn,
        [
            _param(slots, "j", ctl + 1),
            _set_param(slots, ctl, "j + 1i"),
            f"  let r = {m - 1}i - j;",
            f"  let w = {n - 1}i - j;",
            "  if (flat >= " + f"{batch}i * r * w) {{ return; }}",
            "  let bt = flat / (r * w);",
            "  let e = flat % (r * w);",
            "  let i = j + 1i + e / w;",
            "  let c = j + 1i + e % w;",
            f"  let mb = bt * {mn}i;",
            f"  let v = {A(slots, 'i', 'c')} - {A(slots, 'i', 'j')} * {A(slots, 'j', 'c')};",
            f"  {set_A(slots, 'i', 'c', 'v')}",
        ],
    )
    runs = [(0, init.grid)]
    for j in range(k):
        runs.append((1, pivot.grid))
        runs.append((2, grid_1d(batch * (m - 1 - j) * (n - 1 - j), WORKGROUP)))
    return Passes([init, pivot, update], runs, 0, 2)
