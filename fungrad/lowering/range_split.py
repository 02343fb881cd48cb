"""Index-set splitting: a kernel loop split into the ranges where its index tests are constant.

pad, concatenate, the transpose of a slice (a pad) and dynamic_update_slice with a static start
lower to index arithmetic (``fungrad/lax/slicing.py``): an element is
``select(lo <= i < hi, x[clamp(i - lo)], fill)``, and a sum of pads (the gradient of an LSTM's
four gate slices ``z[:, :H]``, ``z[:, H:2H]``, ...) selects between every operand at every
element. Evaluated as written, each element computes every branch and throws all but one away:
the select only picks the value afterwards, and a vectorised loop cannot branch per lane.

This module finds the loop variables such tests depend on (a test: a bool index expression of
one kernel loop variable and constants, used by a select) and the points where one of them
changes value (the expression evaluated for every index, so clamps, offsets and comparisons of
any form are covered). The loop is split at those points into consecutive *pieces*; each piece
runs a loop of its own over its range (``i = lo + w``) whose stores are the kernel's
*specialised* to that range: rebuilt with interval arithmetic on index values
(:class:`Specialiser`), so the tests fold to constants, the selects pick their live side,
clamps that cannot bind drop out and loads become contiguous. A piece may be split again at a
deeper loop (a pad of two axes). A split is taken only where the pieces cost less than the
kernel (the planner's cost measure: every distinct node times how often it runs).

The result (:class:`Split`) is backend-neutral data beside the :class:`~fungrad.lowering.fusion.
Kernel`, which is unchanged: a renderer that writes consecutive loops asks :func:`plan_split`
(the LLVM kernel writer, ``cpu/kernel.py``), one that does not keeps the selects (the GPU's
shader, one invocation per element, where pieces would be separate dispatches).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fungrad.lowering.fusion import Store, _walk, loop_nest_cost
from fungrad.lowering.kernel import BOOL, COMPARE, INDEX, Ctx, Expr, Reduction, Var

__all__ = ["Piece", "Split", "Specialiser", "plan_split", "split_cost"]

#: the most pieces one loop is split into (each is a copy of the kernel's body)
MAX_PIECES = 8
#: the most leaf pieces a kernel's splits may make in all (a pad of several axes)
MAX_LEAVES = 16
#: the longest loop whose tests are evaluated index by index to find their change points
MAX_EVAL_EXTENT = 1 << 20


@dataclass
class Piece:
    """The iterations ``lo <= i < hi`` of the split loop ``i``: ``loops`` is the kernel's loop
    nest for them (the loops outside the split shared with the kernel, the split loop replaced by
    a fresh variable ``w`` over ``hi - lo`` with ``i = lo + w``, the loops inside it fresh
    copies), ``stores`` the kernel's stores specialised to them, ``split`` a further split of a
    deeper loop or None."""

    lo: int
    hi: int
    loops: tuple[Var, ...]
    stores: list[Store]
    split: Split | None = None


@dataclass
class Split:
    """A loop nest's loop at position ``depth`` run as consecutive ``pieces``."""

    depth: int
    pieces: list[Piece] = field(default_factory=list)


# -- finding the tests and where they change ----------------------------------------------------


def _atoms(pred: Expr) -> list[Expr]:
    """The conditions a select's predicate combines with and/or/not/xor."""
    out, stack, seen = [], [pred], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if e.dtype == BOOL and e.op in ("and", "or", "xor", "not"):
            stack.extend(e.args)
        else:
            out.append(e)
    return out


_EVAL_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "and": np.logical_and,
    "or": np.logical_or,
    "xor": np.logical_xor,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


def _evaluate(e: Expr, var: Var) -> np.ndarray | None:
    """``e`` (an index or bool expression of ``var`` and constants) at every value of ``var``,
    or None where it holds another op (a load, a float) or divides a negative value (the index
    division is unsigned)."""
    values: dict[int, np.ndarray] = {}
    for x in _post_order(e):
        if x.op == "const":
            v = np.asarray(x.attr)
        elif x.op == "idx":
            if x.attr is not var:
                return None
            v = np.arange(var.extent, dtype=np.int64)
        else:
            args = [values[id(a)] for a in x.args]
            if x.op in _EVAL_BINARY:
                v = _EVAL_BINARY[x.op](*args)
            elif x.op == "not":
                v = np.logical_not(args[0])
            elif x.op == "select":
                v = np.where(args[0], args[1], args[2])
            elif x.op in ("idiv", "irem"):
                if np.any(args[0] < 0) or np.any(args[1] <= 0):
                    return None
                v = (np.floor_divide if x.op == "idiv" else np.remainder)(*args)
            elif x.op == "convert" and x.dtype.kind in "iub" and x.args[0].dtype.kind in "iub":
                v = args[0].astype(x.dtype)
            else:
                return None
        values[id(x)] = v
    return np.broadcast_to(values[id(e)], (var.extent,))


def _post_order(e: Expr) -> list[Expr]:
    """The nodes of ``e``, each after its operands (explicit stack: deep expressions)."""
    out, done, stack = [], set(), [e]
    while stack:
        x = stack[-1]
        if id(x) in done:
            stack.pop()
            continue
        first = [a for a in x.args if id(a) not in done]
        if first:
            stack.extend(first)
            continue
        done.add(id(x))
        out.append(x)
        stack.pop()
    return out


def range_cuts(loops: tuple[Var, ...], stores: list[Store]) -> dict[Var, list[int]]:
    """For each of ``loops`` that a select's condition tests (an index expression of that
    loop's variable alone), the sorted points ``0 < c < extent`` where one of those conditions
    changes value. A condition with more than ``MAX_PIECES - 1`` changes (interior padding's
    every other element) is no test to split on; nor is a variable whose tests change too
    often together."""
    candidates = {v for v in loops if 1 < v.extent <= MAX_EVAL_EXTENT}
    cuts: dict[Var, set[int]] = {}
    seen: set[int] = set()
    roots = [x for st in stores for x in (st.value, st.index)]
    for e in _walk(roots):
        if e.op != "select":
            continue
        for atom in _atoms(e.args[0]):
            if id(atom) in seen or len(atom.free) != 1 or atom.is_const:
                continue
            seen.add(id(atom))
            (v,) = atom.free
            if v not in candidates:
                continue
            values = _evaluate(atom, v)
            if values is None:
                continue
            changes = np.flatnonzero(values[1:] != values[:-1]) + 1
            if 0 < len(changes) < MAX_PIECES:
                cuts.setdefault(v, set()).update(int(c) for c in changes)
    return {v: sorted(c) for v, c in cuts.items() if len(c) < MAX_PIECES}


# -- specialising expressions to a range ---------------------------------------------------------


def _bounds_add(a, b):
    return (
        None if a[0] is None or b[0] is None else a[0] + b[0],
        None if a[1] is None or b[1] is None else a[1] + b[1],
    )


def _min_end(x, y, lower: bool):
    """min of two interval ends (None: unbounded on that side)."""
    if x is None or y is None:
        return None if lower else (y if x is None else x)
    return min(x, y)


def _max_end(x, y, lower: bool):
    """max of two interval ends (None: unbounded on that side)."""
    if x is None or y is None:
        return (y if x is None else x) if lower else None
    return max(x, y)


_UNKNOWN = (None, None)


class Specialiser:
    """Rebuilds expressions with loop variables replaced (``by``: variable -> index
    expression) and simplified by the value ranges of index expressions: every loop variable
    ``v`` lies in ``[0, v.extent)``, so ``w + 256`` with ``w < 256`` is in ``[256, 511]``, a
    comparison both of whose sides' ranges decide it is a constant, ``max(w + 256 - 256, 0)`` is
    ``w``, a select of a constant picks a side, ``and``/``or`` with a constant fold. Float
    arithmetic is rebuilt as it was (constants still fold as :meth:`Ctx.op` folds them); a
    reduction whose body depends on a replaced variable gets fresh variables of its own (a
    renderer opens one loop per variable)."""

    def __init__(self, ctx: Ctx, by: dict[Var, Expr]):
        self.ctx = ctx
        self.by = dict(by)
        self.memo: dict[int, Expr] = {}
        self.ranges: dict[int, tuple] = {}

    def __call__(self, e: Expr | None) -> Expr | None:
        if e is None:
            return None
        self._fresh_reductions(e)
        memo = self.memo
        stack = [e]
        while stack:
            x = stack[-1]
            if id(x) in memo:
                stack.pop()
                continue
            if x.op == "const" or not (x.free & self.by.keys()):
                memo[id(x)] = x
                stack.pop()
                continue
            first = [a for a in x.args if id(a) not in memo]
            if first:
                stack.extend(first)
                continue
            memo[id(x)] = self._rebuild(x, [memo[id(a)] for a in x.args])
            stack.pop()
        return memo[id(e)]

    def _fresh_reductions(self, e: Expr) -> None:
        """Give every reduction under ``e`` whose body reads a replaced variable fresh bound
        variables (nested reductions see their outer one's new variables: a fixpoint)."""
        reduces = [x for x in _walk([e]) if x.op == "reduce"]
        changed = True
        while changed:
            changed = False
            for r in reduces:
                if r.attr.vars[0] in self.by:
                    continue
                if r.args[0].free & self.by.keys():
                    for v in r.attr.vars:
                        self.by[v] = self.ctx.index(Var(v.extent, bound=True))
                    changed = True

    # value ranges of index expressions
    def range_of(self, e: Expr) -> tuple:
        """``(lo, hi)`` bounds of index expression ``e`` (None: unbounded on that side)."""
        got = self.ranges.get(id(e))
        if got is not None:
            return got
        r = _UNKNOWN
        if e.op == "const" and e.dtype.kind in "iu":
            r = (int(e.attr), int(e.attr))
        elif e.op == "idx":
            r = (0, e.attr.extent - 1)
        elif e.dtype == INDEX and e.args:
            a = self.range_of(e.args[0])
            b = self.range_of(e.args[-1])
            r = self._range_op(e.op, a, b, e)
        self.ranges[id(e)] = r
        return r

    def _range_op(self, op: str, a: tuple, b: tuple, e: Expr) -> tuple:
        if op == "add":
            return _bounds_add(a, b)
        if op == "sub":
            return _bounds_add(
                a, (None if b[1] is None else -b[1], None if b[0] is None else -b[0])
            )
        if op == "mul" and None not in a and None not in b:
            p = [x * y for x in a for y in b]
            return (min(p), max(p))
        if op == "min":
            return (_min_end(a[0], b[0], True), _min_end(a[1], b[1], False))
        if op == "max":
            return (_max_end(a[0], b[0], True), _max_end(a[1], b[1], False))
        if op == "select":
            m = self.range_of(e.args[1])
            return (_min_end(m[0], b[0], True), _max_end(m[1], b[1], False))
        if op in ("idiv", "irem") and a[0] is not None and a[0] >= 0 and b[0] == b[1]:
            c = b[0]  # a constant divisor (the lowering rules' only kind)
            if c is None or c <= 0:
                return _UNKNOWN
            if op == "irem":
                return a if a[1] is not None and a[1] < c else (0, c - 1)
            return (a[0] // c, None if a[1] is None else a[1] // c)
        return _UNKNOWN

    def _decide(self, op: str, a: Expr, b: Expr) -> bool | None:
        """The value of comparison ``a op b`` of index values where their ranges decide it."""
        (alo, ahi), (blo, bhi) = self.range_of(a), self.range_of(b)
        if None in (alo, ahi, blo, bhi):
            return None
        if op == "lt":
            return True if ahi < blo else False if alo >= bhi else None
        if op == "le":
            return True if ahi <= blo else False if alo > bhi else None
        if op == "gt":
            return self._decide("lt", b, a)
        if op == "ge":
            return self._decide("le", b, a)
        if op in ("eq", "ne"):
            if alo == ahi == blo == bhi:
                return op == "eq"
            if ahi < blo or bhi < alo:
                return op == "ne"
        return None

    # rebuilding
    def _rebuild(self, x: Expr, args: list[Expr]) -> Expr:
        ctx, op = self.ctx, x.op
        if op == "idx":
            return self.by.get(x.attr, x)
        if op == "reduce":
            red = x.attr
            vars_ = tuple(self.by[v].attr if v in self.by else v for v in red.vars)
            if vars_ == red.vars and args[0] is x.args[0]:
                return x
            out = ctx.node("reduce", tuple(args), x.dtype, Reduction(red.op, vars_))
            if x in ctx.reduce_origin:
                ctx.reduce_origin.setdefault(out, ctx.reduce_origin[x])
            return out
        if op == "sub" and x.dtype == INDEX and x.args[0] is x.args[1]:
            # a pin (``v - v``, lax/reduce.py ``_pinned``) keeps a scan's load of its own carry
            # inside its loop; folded to 0, the load left the pieces' loops and read the carry
            # once (a cumsum over a pad summed wrong: fuzz seed 346783). The pin is on the
            # piece's own variable: its index may fold to a constant (a piece of one element)
            a = x.args[0]
            free = self.by[a.attr].free if a.op == "idx" and a.attr in self.by else ()
            u = ctx.index(next(iter(free))) if free else args[0]
            return ctx.node("sub", (u, u), INDEX)
        if x.dtype == INDEX:
            folded = self._index_op(op, args)
            if folded is not None:
                r = self.range_of(folded)
                if r[0] is not None and r[0] == r[1]:
                    return ctx.iconst(r[0])
                return folded
        if op in COMPARE and args[0].dtype == INDEX:
            known = self._decide(op, *args)
            if known is not None:
                return ctx.const(known, BOOL)
        if x.dtype == BOOL and op in ("and", "or", "not"):
            return self._logic(op, args)
        if op == "select":
            return ctx.select(*args)
        if op == "convert":
            return ctx.convert(args[0], x.dtype)
        if op in ("load", "bitcast"):
            return ctx.node(op, tuple(args), x.dtype, x.attr)
        return ctx.op(op, *args, dtype=x.dtype)

    def _index_op(self, op: str, args: list[Expr]) -> Expr | None:
        """An index op on rebuilt operands, folded by ranges (None: not an index op)."""
        ctx = self.ctx
        if op == "add":
            (ba, ca), (bb, cb) = _affine(args[0]), _affine(args[1])
            base = ba if bb is None else bb if ba is None else ctx.node("add", (ba, bb), INDEX)
            return ctx.iconst(ca + cb) if base is None else ctx.iadd(base, ctx.iconst(ca + cb))
        if op == "sub":
            if args[1].is_const:
                return self._index_op("add", [args[0], ctx.iconst(-args[1].attr)])
            return ctx.isub(*args)
        if op == "mul":
            return ctx.imul(*args)
        if op in ("min", "max"):
            a, b = args
            (alo, ahi), (blo, bhi) = self.range_of(a), self.range_of(b)
            a_below = ahi is not None and blo is not None and ahi <= blo
            b_below = bhi is not None and alo is not None and bhi <= alo
            if a_below or b_below:
                return (a if a_below else b) if op == "min" else (b if a_below else a)
            return ctx.op(op, a, b)
        if op in ("idiv", "irem"):
            a, b = args
            (alo, ahi), (blo, _) = self.range_of(a), self.range_of(b)
            if op == "irem" and alo is not None and alo >= 0 and ahi is not None:
                if blo is not None and ahi < blo:
                    return a
            return ctx.idiv(a, b) if op == "idiv" else ctx.irem(a, b)
        return None

    def _logic(self, op: str, args: list[Expr]) -> Expr:
        ctx = self.ctx
        if op == "not":
            a = args[0]
            return ctx.const(not a.attr, BOOL) if a.is_const else ctx.op("not", a)
        a, b = args
        for c, other in ((a, b), (b, a)):
            if c.is_const:
                if op == "and":
                    return other if c.attr else ctx.const(False, BOOL)
                return ctx.const(True, BOOL) if c.attr else other
        return ctx.op(op, a, b)


def _affine(e: Expr) -> tuple[Expr | None, int]:
    """``(base, c)`` with ``e == base + c`` (base None: ``e`` is the constant c)."""
    if e.is_const:
        return None, int(e.attr)
    if e.op == "add":
        a, b = e.args
        if b.is_const:
            return a, int(b.attr)
        if a.is_const:
            return b, int(a.attr)
    return e, 0


def specialise(
    ctx: Ctx, loops: tuple[Var, ...], stores: list[Store], depth: int, lo: int, hi: int
) -> Piece:
    """The piece ``lo <= loops[depth] < hi`` of a loop nest: fresh variables for that loop
    (``lo + w``) and the loops inside it, the stores rebuilt by a :class:`Specialiser`; a
    store whose mask folds to false is dropped, one whose mask folds to true loses it."""
    w = Var(hi - lo)
    inner = tuple(Var(v.extent) for v in loops[depth + 1 :])
    by = {loops[depth]: ctx.iadd(ctx.index(w), ctx.iconst(lo))}
    by.update((v, ctx.index(u)) for v, u in zip(loops[depth + 1 :], inner))
    spec = Specialiser(ctx, by)
    out = []
    for st in stores:
        mask = spec(st.mask)
        if mask is not None and mask.is_const:
            if not mask.attr:
                continue
            mask = None
        once = st.once and mask is not None
        out.append(Store(st.buffer, spec(st.index), spec(st.value), st.combine, mask, once))
    return Piece(lo, hi, (*loops[:depth], w, *inner), out)


# -- costs and the plan ---------------------------------------------------------------------------


def split_cost(loops: tuple[Var, ...], stores: list[Store], split: Split | None = None) -> int:
    """The operation count of one run of a loop nest (``fusion.Kernel.cost``'s measure: every
    distinct node weighs its op's cost times the iterations of the loops out to the innermost
    one it depends on and of its reductions' variables), or of its pieces where ``split``:
    a node the pieces share (one of the loops outside the split) counts once."""
    seen: set = set()
    return sum(
        loop_nest_cost(g_loops, g_stores, seen)
        for g_loops, g_stores in _leaves(loops, stores, split)
    )


def _leaves(loops, stores, split) -> list[tuple[tuple[Var, ...], list[Store]]]:
    if split is None:
        return [(loops, stores)]
    out = []
    for p in split.pieces:
        out += _leaves(p.loops, p.stores, p.split)
    return out


def count_leaves(split: Split | None) -> int:
    """The loop nests a split runs (1 without one)."""
    if split is None:
        return 1
    return sum(count_leaves(p.split) for p in split.pieces)


def plan_split(
    ctx: Ctx, loops: tuple[Var, ...], stores: list[Store], first: int = 0, budget: int = MAX_LEAVES
) -> Split | None:
    """The cheapest split of one of ``loops[first:]`` at the change points of the tests on it
    (:func:`range_cuts`), its pieces split again at deeper loops while the number of leaf
    nests stays within ``budget``; None where no split costs less than the nest as it is
    (no fresh variables are made then unless a split was tried)."""
    cuts = range_cuts(loops[first:], stores)
    if not cuts:
        return None
    base = split_cost(loops, stores)
    best, best_cost = None, base
    for depth in range(first, len(loops)):
        points = cuts.get(loops[depth])
        if not points or len(points) + 1 > budget:
            continue
        ends = [0, *points, loops[depth].extent]
        split = Split(
            depth, [specialise(ctx, loops, stores, depth, a, b) for a, b in zip(ends, ends[1:])]
        )
        cost = split_cost(loops, stores, split)
        if cost < best_cost:
            best, best_cost = split, cost
    if best is None:
        return None
    share = budget // len(best.pieces)
    for p in best.pieces:
        if share > 1:
            p.split = plan_split(ctx, p.loops, p.stores, best.depth + 1, share)
    return best
