"""Sorts (``steps.SortStep``): rank sorts for short rows (:func:`render_sort`), bitonic
networks for long ones (:func:`render_bitonic`)."""

from __future__ import annotations

import math

import numpy as np

from fungrad.lowering.gpu.frame import (
    TOP,
    Scope,
    Shader,
    Slots,
    flat_shader,
    grid_1d,
    workgroup_text,
)
from fungrad.lowering.gpu.helpers import Prelude
from fungrad.lowering.gpu.types import from_word, wgsl_type


def _sort_key(value: str, dtype, order: str) -> str:
    """An i32 whose signed order is the sort order of ``value`` (the orders of ``cpu/sort.py``):
    ``"sort"`` merges -0.0 with 0.0 and puts every NaN last; ``"top_k"`` is the total order
    on the bits, reversed (descending)."""
    t = wgsl_type(dtype)
    if t == "f32":
        bits = f"bitcast<i32>({value})"
        if order == "sort":
            bits = f"select(select({bits}, 0i, {value} == 0.0f), 2147483647i, fg_isnan({value}))"
        key = f"select({bits}, {bits} ^ 2147483647i, {bits} < 0i)"
    elif t == "u32":
        key = f"bitcast<i32>({value} ^ 0x80000000u)"
    elif t == "bool":
        key = f"select(0i, 1i, {value})"
    else:
        key = value
    return f"(~{key})" if order == "top_k" else key


def _sort_keys(
    step, slots: Slots, src: Prelude, row: str, pos: str, name: str, indent: str = "    "
) -> list[str]:
    """Lines binding ``<name><m>`` to the ``m``-th sort key of the element at position
    ``pos`` of the row starting at word ``row`` (a line of a sort lies ``inner`` apart)."""
    inner = math.prod(step.shape[step.dimension + 1 :])
    out = []
    for m in range(step.num_keys):
        buf = step.inputs[m]
        if buf.dtype == np.float32:
            src.need("isnan")
        v = from_word(slots.ref(buf, f"{row} + {pos} * {inner}i"), buf.dtype)
        out.append(f"{indent}let {name}{m} = {_sort_key(v, buf.dtype, step.order)};")
    return out


def _sort_gather(step, slots: Slots, o: str, q: str, rank: str, pos: str) -> list[str]:
    """Lines writing the element at position ``pos`` of row (``o``, ``q``) to sorted position
    ``rank``: every operand, and the position itself for top_k."""
    n, inner = step.shape[step.dimension], math.prod(step.shape[step.dimension + 1 :])
    lines = [
        f"  let at = ({o} * {step.k}i + {rank}) * {inner}i + {q};",
        f"  let src_at = {o} * {n * inner}i + {pos} * {inner}i + {q};",
    ]
    for src_buf, dst in zip(step.inputs, step.outputs):
        lines.append(f"  {slots.ref(dst, 'at', write=True)} = {slots.ref(src_buf, 'src_at')};")
    if step.index_output is not None:
        lines.append(f"  {slots.ref(step.index_output, 'at', write=True)} = bitcast<u32>({pos});")
    return lines


def render_sort(step, place, scope: Scope = TOP) -> Shader:
    """A stable sort (``steps.SortStep``) by ranks: one invocation per element counts the
    elements of its row that sort before it (smaller keys, or equal keys at smaller
    positions) and writes every operand there. O(n) per element: for short rows (long ones
    take :func:`render_bitonic`)."""
    slots, src = Slots(place), Prelude(False)
    shape, d = step.shape, step.dimension
    n = shape[d]
    inner = math.prod(shape[d + 1 :])
    lines = [
        f"  let q = flat % {inner}i;",
        f"  let i = (flat / {inner}i) % {n}i;",
        f"  let o = flat / {inner * n}i;",
        f"  let base = o * {n * inner}i + q;",
        "  var rank = 0i;",
        f"  for (var j = 0i; j < {n}i; j++) {{",
        "    var before = false;",
        "    var decided = false;",
        *_sort_keys(step, slots, src, "base", "i", "ki"),
        *_sort_keys(step, slots, src, "base", "j", "kj"),
    ]
    for m in range(step.num_keys):
        lines += [
            f"    if (!decided && kj{m} != ki{m}) {{ before = kj{m} < ki{m}; decided = true; }}"
        ]
    lines += [
        "    if (!decided) { before = j < i; }",
        "    rank += select(0i, 1i, before);",
        "  }",
        f"  if (rank >= {step.k}i) {{ return; }}",
        *_sort_gather(step, slots, "o", "q", "rank", "i"),
    ]
    total = math.prod(shape) if step.k else 0
    return flat_shader(step.name, slots, src, scope, total, lines, iterations=n)


def bitonic_width(step) -> int:
    """The power of two a bitonic sort pads the rows of ``step`` to."""
    return 1 << max(0, step.shape[step.dimension] - 1).bit_length()


SORT_TILE = 512  # positions a workgroup sorts in its memory (TILE / 2 invocations)


def bitonic_stages(width: int) -> list[tuple[str, int]]:
    """The dispatches of a bitonic sort of rows of ``width`` (a power of two): ``("tile",
    0)`` sorts every tile of ``SORT_TILE`` positions (all blocks up to a tile), then for each
    larger block ``("global", jj)`` compare-exchanges at each distance ``jj`` >= a tile, and
    ``("local", 0)`` the distances within a tile."""
    tile = min(width, SORT_TILE)
    out = [("tile", 0)]
    kk = 2 * tile
    while kk <= width:
        jj = kk // 2
        while jj >= tile:
            out.append(("global", jj))
            jj //= 2
        out.append(("local", 0))
        kk *= 2
    return out


def render_bitonic(step, place, scope: Scope, base: int, ctl: int) -> list[Shader]:
    """A stable sort (``steps.SortStep``) of long rows by a bitonic network on positions
    (``O(n log^2 n)`` work; rows padded to a power of two, the padding ordered last; the
    dispatches are :func:`bitonic_stages`). Each row's positions live in the arena at word
    ``base`` (``bitonic_width`` words per row); two elements compare by their keys, then by
    position, a total order, so the network's result is the stable sort. Distances within a
    tile of ``SORT_TILE`` positions are done by one workgroup in its memory, one dispatch for
    all of them; larger ones take a dispatch each (one invocation per pair). The block size
    and distance of a dispatch are two ``ctl`` words (``ctl``, ``ctl + 1`` or ``ctl + 2``,
    ``ctl + 3``): its first invocation writes the next dispatch's to the other pair, so one
    shader per kind and parity serves every stage. The last dispatch gathers the operands."""
    shape, d = step.shape, step.dimension
    n, inner = shape[d], math.prod(shape[d + 1 :])
    rows = math.prod(shape) // n
    width = bitonic_width(step)
    tile = min(width, SORT_TILE)
    src = Prelude(False)

    def ctl_word(slots, w: int, write: bool = False) -> str:
        return slots.word("ctl", 0, f"{ctl + w}i", write)

    def idx(slots, at: str, write: bool = False) -> str:
        return slots.word("arena", base, at, write)

    def compare(slots) -> list[str]:
        """``swap``: does position ``y`` come before ``x`` (keys, then position)?"""
        lines = [
            "  var swap = y < x;",
            f"  if (x < {n}i && y < {n}i) {{",
            *_sort_keys(step, slots, src, "rowbase", "x", "kx"),
            *_sort_keys(step, slots, src, "rowbase", "y", "ky"),
            "    var decided = false;",
        ]
        lines += [
            f"    if (!decided && kx{m} != ky{m}) {{ swap = ky{m} < kx{m}; decided = true; }}"
            for m in range(step.num_keys)
        ]
        return lines + ["  }"]

    def exchange(slots, i: str, jj: str, kk: str, load, store, pos: str) -> list[str]:
        """Compare-exchange places ``i`` and ``i + jj``: ascending where bit ``kk`` of the
        row position ``pos`` (of place ``i``) is clear, descending elsewhere."""
        return [
            f"  let a = {load(i)};",
            f"  let b = {load(f'{i} + {jj}')};",
            f"  let up = ({pos} & {kk}) == 0i;",
            "  let x = select(b, a, up);",
            "  let y = select(a, b, up);",
            *compare(slots),
            "  if (swap) {",
            f"  {store(i, 'b')}",
            f"  {store(f'{i} + {jj}', 'a')}",
            "  }",
        ]

    def next_params(slots, w: int, kk: str, jj: str, first: str) -> list[str]:
        return [
            f"  if ({first}) {{",
            f"    {ctl_word(slots, w, True)} = bitcast<u32>({kk});",
            f"    {ctl_word(slots, w + 1, True)} = bitcast<u32>({jj});",
            "  }",
        ]

    def global_stage(parity: int) -> Shader:
        slots = Slots(place)
        r, w = 2 * parity, 2 - 2 * parity
        body = [
            f"  let kk = bitcast<i32>({ctl_word(slots, r)});",
            f"  let jj = bitcast<i32>({ctl_word(slots, r + 1)});",
            *next_params(slots, w, "kk", "jj / 2i", "flat == 0i"),
            f"  let row = flat / {width // 2}i;",
            f"  let p = flat % {width // 2}i;",
            "  let i = (p / jj) * 2i * jj + p % jj;",
            f"  let rowbase = (row / {inner}i) * {n * inner}i + row % {inner}i;",
            *exchange(
                slots,
                "i",
                "jj",
                "kk",
                lambda at: f"bitcast<i32>({idx(slots, f'row * {width}i + {at}')})",
                lambda at, v: (
                    f"  {idx(slots, f'row * {width}i + {at}', True)} = bitcast<u32>({v});"
                ),
                "i",
            ),
        ]
        return flat_shader(f"{step.name}_stage", slots, src, scope, rows * (width // 2), body)

    def tile_stage(kind: str, parity: int) -> Shader:
        slots = Slots(place)
        head, guard = slots.scope_lines(scope)
        per_row = width // tile
        head += [
            "  let wg = i32(wid.x + wid.y * nwg.x);",
            f"  let row = wg / {per_row}i;",
            f"  let t0 = (wg % {per_row}i) * {tile}i;",
            f"  if (row >= {rows}i) {{ return; }}",
        ]
        half = tile // 2
        body = [
            f"  let rowbase = (row / {inner}i) * {n * inner}i + row % {inner}i;",
            f"  let at = row * {width}i + t0;",
        ]
        if kind == "tile":  # the positions start as 0 .. width - 1
            body += [
                "  fg_sp[lid] = t0 + i32(lid);",
                f"  fg_sp[lid + {half}u] = t0 + i32(lid) + {half}i;",
            ]
            body += next_params(slots, 0, f"{2 * tile}i", f"{tile}i", "wg == 0i && lid == 0u")
            loops = [
                f"  for (var kk = 2i; kk <= {tile}i; kk *= 2i) {{",
                "  for (var jj = kk / 2i; jj > 0i; jj /= 2i) {",
            ]
        else:
            r, w = 2 * parity, 2 - 2 * parity
            body += [
                f"  let kk = bitcast<i32>({ctl_word(slots, r)});",
                *next_params(slots, w, "kk * 2i", "kk", "wg == 0i && lid == 0u"),
                f"  fg_sp[lid] = bitcast<i32>({idx(slots, 'at + i32(lid)')});",
                f"  fg_sp[lid + {half}u] = bitcast<i32>({idx(slots, f'at + i32(lid) + {half}i')});",
            ]
            loops = [f"  for (var jj = {half}i; jj > 0i; jj /= 2i) {{"]
        body += [
            "  workgroupBarrier();",
            *loops,
            "  let i = (i32(lid) / jj) * 2i * jj + i32(lid) % jj;",
            "  let g = t0 + i;",
            *exchange(
                slots,
                "i",
                "jj",
                "kk",
                lambda at: f"fg_sp[{at}]",
                lambda at, v: f"  fg_sp[{at}] = {v};",
                "g",
            ),
            "  workgroupBarrier();",
            *["  }"] * len(loops),
        ]
        body += [
            f"  {idx(slots, 'at + i32(lid)', True)} = bitcast<u32>(fg_sp[lid]);",
            f"  {idx(slots, f'at + i32(lid) + {half}i', True)} = "
            f"bitcast<u32>(fg_sp[lid + {half}u]);",
        ]
        text = workgroup_text(
            slots, src, [f"var<workgroup> fg_sp: array<i32, {tile}>;"], half, head, guard, body
        )
        levels = tile.bit_length() - 1
        iterations = levels * (levels + 3) // 2 if kind == "tile" else levels
        return Shader(
            f"{step.name}_{kind}", text, slots.bindings(), grid_1d(rows * per_row, 1), iterations
        )

    made: dict = {}
    shaders = []
    for t, (kind, _) in enumerate(bitonic_stages(width)):
        parity = (t - 1) % 2  # the tile dispatch writes pair 0, read by dispatch 1
        key = (kind, parity if kind != "tile" else 0)
        if key not in made:
            made[key] = global_stage(parity) if kind == "global" else tile_stage(kind, parity)
        shaders.append(made[key])
    slots = Slots(place)
    body = [
        f"  let row = flat / {step.k}i;",
        f"  let rank = flat % {step.k}i;",
        f"  let pos = bitcast<i32>({idx(slots, f'row * {width}i + rank')});",
        *_sort_gather(step, slots, f"(row / {inner}i)", f"(row % {inner}i)", "rank", "pos"),
    ]
    shaders.append(flat_shader(f"{step.name}_gather", slots, src, scope, rows * step.k, body))
    return shaders
