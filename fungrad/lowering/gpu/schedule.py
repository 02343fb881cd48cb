"""The order a shader's ``let`` statements are written in (see :func:`schedule`)."""

from __future__ import annotations

import re

# This pass reads the statements back from their text, the one place the GPU renderer does.
# It stays because part of what it orders arrives as text: the math functions written out in
# a kernel come from ``lowering.math.wgsl.inline`` as finished ``let`` lines, and the names a
# statement uses also hide in the places of its loads (a loop counter ``it<d>`` in a carry's
# offset). Ordering while rendering needs every emitter to hand over (name, operands): the
# math inliner first.
_LET = re.compile(r"\s*let (\w+) = (.*);$")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def schedule(lines: list[str]) -> list[str]:
    """``lines`` with each run of consecutive ``let`` statements in dependency levels: a
    statement comes after those it uses, as early as they allow (ties keep their order), so
    independent computations (say, three math functions written out in one kernel) are
    interleaved. Any other line (a store, a loop, a brace) ends a run and stays in place.

    Why: llvmpipe, the CPU driver CI runs, runs a shader in about the order written, each
    invocation's dependency chain setting its cost; interleaved, the CPU's out-of-order
    window overlaps the independent chains (the benchmark chain: 1.19x -> 1.09x the
    hand-written kernel, same run). A GPU's compiler schedules for itself."""
    out: list[str] = []
    run: list[tuple[int, int, str]] = []  # (level, position, line)
    level: dict[str, int] = {}

    def flush() -> None:
        out.extend(line for _, _, line in sorted(run))
        run.clear()
        level.clear()

    for line in lines:
        m = _LET.fullmatch(line)
        if m is None:
            flush()
            out.append(line)
            continue
        name, rhs = m.groups()
        lv = 1 + max((level.get(w, -1) for w in _IDENT.findall(rhs)), default=-1)
        level[name] = lv
        run.append((lv, len(run), line))
    flush()
    return out
