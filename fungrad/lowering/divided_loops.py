"""An innermost loop whose index is divided by a constant, run as two loops.

A kernel storing ``out[b, s, h * 64 + d] = x[b, h, s, d]`` (attention's head merge) loops over
the store's last axis, 256 wide, and reads ``x`` at ``(v // 64, v % 64)``: two divisions per
element, and loads 64 floats apart for consecutive iterations, which the vectoriser turns into
gathers whose address arithmetic LLVM's loop strength reduction then works hard on (the
backward merge: ~17 ms of code generation). :func:`split_divided_loop` runs that loop as ``a``
over 4 and ``b`` over 64 with ``v = a * 64 + b``: the index folding (``Ctx.idiv``/``irem``)
turns the divisions into ``a`` and ``b``, and the inner loop reads and writes consecutive
elements. Measured on the transformer step (Zen 3): its kernel module compiles ~18 ms faster
(min of 8, ~370 against ~385 ms); the merges themselves run as fast or slightly slower (the
forward one 84 -> 97 us, a short inner loop of 64; its step is ~75 ms).

Only an innermost loop that is not also the outermost (that one is what threads split, and
what a call's ``[start, end)`` ranges over) is split, by a divisor of its extent of at least
``MIN_INNER`` elements, and only where the split removes divisions.
"""

from __future__ import annotations

import dataclasses

from fungrad.lowering.fusion import Store, _walk
from fungrad.lowering.kernel import INDEX, Ctx, Expr, Var
from fungrad.lowering.range_split import _post_order

#: the shortest inner loop worth splitting off (a vector of float32 on AVX-512)
MIN_INNER = 16


def _divisions(stores: list[Store], v: Var) -> list[int]:
    """The constant divisors of the ``idiv``/``irem`` nodes of ``stores`` whose dividend
    depends on ``v``."""
    roots = [e for s in stores for e in (s.value, s.index, s.mask) if e is not None]
    return [
        e.args[1].attr
        for e in _walk(roots)
        if e.op in ("idiv", "irem") and e.args[1].is_const and v in e.args[0].free
    ]


def split_divided_loop(
    ctx: Ctx, loops: tuple[Var, ...], stores: list[Store]
) -> tuple[tuple[Var, ...], list[Store]]:
    """``(loops, stores)`` with the innermost loop split in two where its index is divided by
    a constant (see the module docstring); as given otherwise."""
    if len(loops) < 2:
        return loops, stores
    v = loops[-1]
    before = _divisions(stores, v)
    fits = [d for d in before if MIN_INNER <= d < v.extent and v.extent % d == 0]
    if not fits:
        return loops, stores
    d = min(fits)
    a, b = Var(v.extent // d), Var(d)
    by = ctx.iadd(ctx.imul(ctx.index(a), ctx.iconst(d)), ctx.index(b))
    memo: dict = {}

    def sub(e):
        return None if e is None else _substitute(ctx, e, v, by, memo)

    new = [
        dataclasses.replace(s, index=sub(s.index), value=sub(s.value), mask=sub(s.mask))
        for s in stores
    ]
    after = _divisions(new, a) + _divisions(new, b)
    if len(after) >= len(before):
        return loops, stores
    return (*loops[:-1], a, b), new


def _substitute(ctx: Ctx, e: Expr, v: Var, by: Expr, memo: dict) -> Expr:
    """``e`` with loop variable ``v`` replaced by ``by``, its index arithmetic built again
    through the folding constructors (``kernel.substitute`` re-interns nodes as they were,
    which would keep ``(a * 64 + b) // 64`` a division)."""
    # (not ``sub``: ``v - v`` is a pin that keeps a scan's carry load in its loop)
    fold = {"add": ctx.iadd, "mul": ctx.imul, "idiv": ctx.idiv, "irem": ctx.irem}
    for x in _post_order(e):
        if id(x) in memo:
            continue
        if v not in x.free:
            memo[id(x)] = x
        elif x.op == "idx":
            memo[id(x)] = by
        else:
            args = tuple(memo[id(a)] for a in x.args)
            if x.dtype == INDEX and x.op in fold:
                memo[id(x)] = fold[x.op](*args)
            else:
                memo[id(x)] = ctx.node(x.op, args, x.dtype, x.attr)
    return memo[id(e)]
