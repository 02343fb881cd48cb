"""Constant offsets of a kernel's accesses moved into the pointers it is called with.

A kernel that reads one slice of a wider buffer (``qkv[..., 256:512]``: the key heads out of
an attention block's fused projection; an LSTM's gate ``z[:, H:2H]``) indexes it at
``256 + f(i)``, and its twins reading the other slices at ``512 + f(i)`` or ``f(i)``. The
code of each differs only in that constant, so each was its own function, optimised and
compiled on its own (the transformer step's three head splits: ~15 ms of LLVM time each).
:func:`hoist_constant_offsets` strips a constant that every access of a buffer adds and
returns it, so the caller passes ``buffer + offset`` instead: the three kernels become one
function called three times (``render.kernel_record`` finds them equal).

Only constants reached through additions at the top of an index are taken (``(x + 2) * 64``
keeps its 2), and only positive ones shared by every access of the buffer in the kernel (a
pointer before the buffer's start would not be an in-bounds address).
"""

from __future__ import annotations

import dataclasses

from fungrad.lowering.fusion import Kernel, _walk
from fungrad.lowering.kernel import Ctx, Expr
from fungrad.lowering.range_split import _post_order


def split_constant(ctx: Ctx, e: Expr) -> tuple[int, Expr]:
    """``(c, rest)`` with ``e == c + rest``: ``c`` the sum of the integer constants that are
    terms of ``e``'s top-level additions; ``(0, e)`` itself when there are none."""
    if e.is_const and isinstance(e.attr, int):
        return e.attr, ctx.iconst(0)
    if e.op != "add":
        return 0, e
    (c0, r0), (c1, r1) = (split_constant(ctx, a) for a in e.args)
    if c0 == 0 and c1 == 0:
        return 0, e
    return c0 + c1, ctx.iadd(r0, r1)


def hoist_constant_offsets(
    ctx: Ctx, kern: Kernel, names: dict[int, str]
) -> tuple[Kernel, dict[str, int]]:
    """``(kernel, offsets)``: ``kern`` with the constant offset of each of its parameters'
    accesses stripped, and ``{parameter name: offset in bytes}`` for those stripped
    (``names``: buffer id -> the parameter it is passed as; buffers sharing a parameter share
    its offset). ``kern`` itself and ``{}`` when no parameter has one."""
    if any(v.extent == 0 for v in kern.loops):  # (no access runs: no offset is an address)
        return kern, {}
    roots = [e for s in kern.stores for e in (s.value, s.index, s.mask) if e is not None]
    loads = [e for e in _walk(roots) if e.op == "load"]
    found: dict[str, set] = {}  # parameter -> {(offset in elements, itemsize)}
    for buffer, index in [(e.attr, e.args[0]) for e in loads] + [
        (s.buffer, s.index) for s in kern.stores
    ]:
        c, _ = split_constant(ctx, index)
        found.setdefault(names[buffer.id], set()).add((c, buffer.dtype.itemsize))
    hoisted = {
        name: next(iter(seen))
        for name, seen in found.items()
        if len(seen) == 1 and min(seen)[0] > 0
    }
    if not hoisted:
        return kern, {}

    def strip(buffer, index: Expr) -> Expr:
        return split_constant(ctx, index)[1] if names[buffer.id] in hoisted else index

    memo: dict[int, Expr] = {}

    def rewrite(e: Expr) -> Expr:
        for x in _post_order(e):
            if id(x) in memo:
                continue
            args = tuple(memo[id(a)] for a in x.args)
            if x.op == "load":
                args = (strip(x.attr, args[0]),)
            same = all(a is b for a, b in zip(args, x.args))
            memo[id(x)] = x if same else ctx.node(x.op, args, x.dtype, x.attr)
        return memo[id(e)]

    stores = [
        dataclasses.replace(
            s,
            index=strip(s.buffer, rewrite(s.index)),
            value=rewrite(s.value),
            mask=None if s.mask is None else rewrite(s.mask),
        )
        for s in kern.stores
    ]
    offsets = {name: c * itemsize for name, (c, itemsize) in hoisted.items()}
    return dataclasses.replace(kern, stores=stores, _reads=((), frozenset())), offsets
