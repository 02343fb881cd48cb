"""Reductions and scatters across invocations: workgroup trees and scatter atomics.

The kernel shader (``shader.py``) computes a reduction as a loop inside one invocation; where
outputs are few, a kernel's top-level reductions can be computed by workgroup trees instead
(:class:`~fungrad.lowering.gpu.schemes.Tree`: :func:`tree_reduce`, :func:`tree_source`); a
scatter (``parallel=False``: updates may collide) runs one invocation per update with atomics
(:class:`~fungrad.lowering.gpu.schemes.Scatter`: :func:`scatter_store`). These functions
write into a kernel shader ``w`` (its lines, names and helpers).
"""

from __future__ import annotations

import math

from fungrad.lowering.gpu.frame import Shader, grid_1d, workgroup_text
from fungrad.lowering.gpu.schedule import schedule
from fungrad.lowering.gpu.schemes import TREE_WG
from fungrad.lowering.gpu.types import from_word, literal, to_word, wgsl_type
from fungrad.lowering.kernel import Expr


def tree_reduce(w, e: Expr) -> str:
    """For the kernel shader ``w``: a top-level reduction computed by the whole workgroup
    (see :class:`~fungrad.lowering.gpu.schemes.Tree`): each invocation folds a strided share
    (of the elements, or of the first pass's partials), then the workgroup combines its
    ``TREE_WG`` values pairwise in workgroup memory."""
    red, tree = e.attr, w.tree
    op, body = red.op, e.args[0]
    arg = op in ("argmax", "argmin")
    dt = body.dtype
    n = math.prod(v.extent for v in red.vars)
    g = tree.groups
    words = w.outputs * g
    at = tree.base + w.tree_at
    w.tree_at += words * (2 if arg else 1)
    vref = lambda i: w.slots.word("arena", at, i, write=tree.partial)  # noqa: E731
    pref = lambda i: w.slots.word("arena", at + words, i, write=tree.partial)  # noqa: E731
    r = w.tmp("r")
    start, step = "i32(lid)", TREE_WG
    if tree.partial:
        start, step = f"grp * {TREE_WG}i + i32(lid)", TREE_WG * g
    w.iterations += -(-(g if g > 1 and not tree.partial else n) // step)
    if g > 1 and not tree.partial:  # fold the partials of this output
        val, const = w.tmp("pv"), False
        pos_of = w.tmp("pp")
        chunk = [
            f"  for (var {r} = i32(lid); {r} < {g}i; {r} += {TREE_WG}i) {{",
            f"    let {val} = {from_word(vref(f'flat * {g}i + {r}'), dt)};",
        ]
        if arg:
            chunk.append(f"    let {pos_of} = bitcast<i32>({pref(f'flat * {g}i + {r}')});")
    else:
        w.open_reduction(e)  # (at the top level)
        for v in red.vars:
            w.trips[v] = -(-n // step)
        val = w.value(body)
        const = body.op == "const"
        pos_of = r
        chunk = [f"  for (var {r} = {start}; {r} < {n}i; {r} += {step}i) {{"]
        stride = n
        for v in red.vars:
            stride //= v.extent
            q = r if stride == 1 else f"({r} / {stride}i)"
            chunk.append(f"  let v{v.id} = {q} % {v.extent}i;")
        for v in red.vars:
            chunk += w.lines.pop(v)
    acc, pos = w.tmp("acc"), w.tmp("pos")
    init = literal(w.reduction_identity(op, dt), dt)
    out = w.lines[None]
    decl, update, final = w.accumulate(op, dt, acc, val, init, const)
    out += [*decl, f"  var {pos}: i32 = 0i;"]
    if arg:
        ties = (pos_of, pos) if g > 1 and not tree.partial else None
        chunk += [
            f"  if {w.better(op, dt, val, acc, ties)} {{",
            f"    {acc} = {val};",
            f"    {pos} = {pos_of};",
            "  }",
        ]
    else:
        chunk += update
    out += [
        *chunk,
        "  }",
        *final,
        f"  fg_tv[lid] = {to_word(acc, dt)};",
        f"  fg_tp[lid] = {pos};",
        "  workgroupBarrier();",
    ]
    s = TREE_WG // 2
    while s:
        a, b = from_word("fg_tv[lid]", dt), from_word(f"fg_tv[lid + {s}u]", dt)
        out.append(f"  if (lid < {s}u) {{")
        if arg:
            better = w.better(op, dt, "rb", "ra", ("qb", "qa"))
            out += [
                f"    let ra = {a};",
                f"    let rb = {b};",
                "    let qa = fg_tp[lid];",
                f"    let qb = fg_tp[lid + {s}u];",
                f"    if {better} {{",
                f"      fg_tv[lid] = {to_word('rb', dt)};",
                "      fg_tp[lid] = qb;",
                "    }",
            ]
        else:
            out.append(f"    fg_tv[lid] = {to_word(w.combine(op, dt, a, b), dt)};")
        out += ["  }", "  workgroupBarrier();"]
        s //= 2
    if tree.partial:
        out.append(f"  if (lid == 0u) {{ {vref(f'flat * {g}i + grp')} = fg_tv[0];")
        if arg:
            out.append(f"    {pref(f'flat * {g}i + grp')} = bitcast<u32>(fg_tp[0]);")
        out.append("  }")
        result = acc  # the partial pass stores nothing: any value of the right type
    else:
        result = w.tmp("red")
        value = "fg_tp[0]" if arg else from_word("fg_tv[0]", dt)
        out.append(f"  let {result} = {value};")
    out.append("  workgroupBarrier();")  # fg_tv is reused by the next reduction
    return result


def tree_source(w, head: list[str], guard: str | None) -> Shader:
    """The shader of the kernel of ``w`` whose top-level reductions are workgroup trees: one
    workgroup per output element (per output and group of elements in the first pass);
    barriers need uniform control flow, so the guard goes through workgroup memory."""
    tree = w.tree
    g = tree.groups if tree.partial else 1
    head = [
        "  let wg = i32(wid.x + wid.y * nwg.x);",
        f"  let flat = wg / {g}i;" if g > 1 else "  let flat = wg;",
        *([f"  let grp = wg % {g}i;"] if tree.partial else []),
        f"  if (flat >= {w.outputs}i) {{ return; }}",
        *head,
    ]
    name = f"{w.kern.name}_partial" if tree.partial else w.kern.name
    text = workgroup_text(
        w.slots,
        w.src,
        [
            f"var<workgroup> fg_tv: array<u32, {TREE_WG}>;",
            f"var<workgroup> fg_tp: array<i32, {TREE_WG}>;",
        ],
        TREE_WG,
        head,
        guard,
        schedule(w.loop_indices() + w.lines[None]),
    )
    grid = grid_1d(w.outputs * g, 1) if w.outputs else (0, 1, 1)
    return Shader(name, text, w.slots.bindings(), grid, w.iterations)


def scatter_store(w, st, val: str, idx: str, mask: str | None, lines: list) -> None:
    """For the kernel shader ``w``: a scatter's store with its iterations in parallel (see
    :class:`~fungrad.lowering.gpu.schemes.Scatter`)."""
    sc, dt = w.scatter, st.buffer.dtype
    t = wgsl_type(dt)
    order = "bitcast<u32>(flat) + 1u"  # the iteration's place in the serial order, + 1
    body: list[str] = []
    if sc.mode == "claim":
        body.append(f"atomicMax({w.slots.word('arena', sc.base, idx, True)}, {order});")
    elif sc.mode == "write":
        won = f"{w.slots.word('arena', sc.base, idx)} == {order}"
        body += [
            f"if ({won}) {{",
            f"  {w.slots.ref(st.buffer, idx, write=True)} = {to_word(val, dt)};",
            "}",
        ]
    else:
        ptr = w.slots.ref(st.buffer, idx, write=True)
        op = st.combine
        builtin = {
            ("add", "i32"): "atomicAdd",
            ("add", "u32"): "atomicAdd",
            ("min", "u32"): "atomicMin",
            ("max", "u32"): "atomicMax",
            ("add", "bool"): "atomicOr",
            ("max", "bool"): "atomicOr",
            ("mul", "bool"): "atomicAnd",
            ("min", "bool"): "atomicAnd",
        }.get((op, t))
        if builtin is not None:
            body.append(f"{builtin}({ptr}, {to_word(val, dt)});")
        else:  # compare-and-swap the combined value's bits until no one came between
            new = w.combine(op, dt, from_word("old", dt), val, st.value.op == "const")
            body += [
                "var old = atomicLoad(" + ptr + ");",
                "loop {",
                f"  let r = atomicCompareExchangeWeak({ptr}, old, {to_word(new, dt)});",
                "  if (r.exchanged) { break; }",
                "  old = r.old_value;",
                "}",
            ]
    if mask is not None:
        body = [f"if ({mask}) {{", *(f"  {b}" for b in body), "}"]
    lines.append("  {")
    lines += [f"    {b}" for b in body]
    lines.append("  }")
