"""The LLVM kernel writer: one :class:`~fungrad.lowering.fusion.Kernel` becomes one function.

Each kernel becomes an internal function ``@kN(ptr noalias %buf..., i64 %start, i64 %end)``
looping over its index space; the outermost loop runs ``[start, end)`` so a kernel can be split
across threads. Every expression node is emitted once, at the outermost loop where all its
indices are defined (``render.KernelRenderer``: the memo, the scopes, the reduction skeleton,
the op table ``llvm_ops.CODE_FOR_OP``); reductions become inner loops with phi accumulators
(``reassoc`` on float adds/muls so the vectoriser can reorder them), float sums blocked and
combined pairwise. No ``nnan``/``ninf`` flags anywhere. Row kernels (softmax, norms) keep
costly values in stack row buffers and prefetch the next rows.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fungrad.lowering import range_split
from fungrad.lowering.cpu.llvm_ops import CODE_FOR_OP
from fungrad.lowering.cpu.llvm_types import literal, llvm_type, memory_type
from fungrad.lowering.divided_loops import split_divided_loop
from fungrad.lowering.fusion import Kernel, _walk
from fungrad.lowering.kernel import MATH_UNARY, Expr, Var, reduce_identity, substitute
from fungrad.lowering.math import llvm as llvm_math
from fungrad.lowering.render import KernelRenderer

__all__ = ["KernelWriter"]


#: the trip count of a loop the writer leaves out (its body runs once, with the variable at its
#: start): LLVM removes such loops itself, after some of its passes have looked at each; the
#: transformer step's eight (column sums over a leading 1, sums over a kept axis) cost ~5 ms of
#: its ~365 ms module (min of 16 compiles)
ONCE = 1


def _trip_count(lo: str, hi: str, step: int) -> int | None:
    """Iterations of ``range(lo, hi, step)`` when both bounds are literals, else None."""
    if lo.isdigit() and hi.isdigit():
        return max(0, -(-(int(hi) - int(lo)) // step))
    return None


class KernelWriter(KernelRenderer):
    """Writes one kernel as an LLVM function (see the module docstring for placement)."""

    backend = "LLVM"
    value_prefix = "%"
    code_for_op = CODE_FOR_OP

    def __init__(self, module, kern: Kernel, buf_names: dict[int, str]):
        super().__init__(kern)
        self.m = module  # the llvm.ModuleWriter
        self.bufs = buf_names  # buffer id -> the pointer argument's name
        self.row_loads: dict[int, tuple] = {}  # node id -> (row buffer, type, index var)
        self.row_stores: dict[int, list] = {}  # reduce id -> [(node, row buffer, type)]
        self.filled: dict[str, Var | None] = {}  # row buffer -> the scope whose lines fill it
        self.prefetch: tuple | None = None  # (streams, strip) of _plan_prefetch, unplaced
        self.allocas: list[str] = []  # stack slots, placed at the top of the entry block
        # float32 divisor -> the loop-invariant operands of its division (llvm_ops)
        self.recips: dict[str, tuple[str, str]] = {}

    # values
    def operands(self, e: Expr) -> tuple[Expr, ...]:
        return () if e.op == "reduce" or id(e) in self.row_loads else e.args

    def split_reduce(self, e: Expr) -> bool:
        return id(e) not in self.row_loads

    def compute(self, e: Expr) -> str:
        row = self.row_loads.get(id(e))
        if row is None:
            return super().compute(e)
        # computed by a fill loop (_fill_rows), kept in a row buffer
        buf, ty, var = row
        p, name = self.tmp("p"), self.tmp()
        self.lines[var] += [
            f"  {p} = getelementptr inbounds {ty}, ptr {buf}, i64 %v{var.id}",
            f"  {name} = load {ty}, ptr {p}",
        ]
        return name

    def literal(self, value, dtype) -> str:
        return literal(value, dtype)

    def node(self, e: Expr, args: list[str]) -> str:
        """``e``'s instructions (``llvm_ops.CODE_FOR_OP``) appended to the lines of its
        scope, its result named ``%tN``."""
        s = self.scope(e)
        out = self.tmp()
        return self.render_op(e.op, e, self.lines[s], out, args)

    def load(self, lines: list[str], out: str, p: str, dtype) -> str:
        """``out = *p`` for an element of ``dtype`` (bool is an i8 in memory)."""
        if dtype.kind == "b":
            raw = self.tmp()
            lines += [f"  {raw} = load i8, ptr {p}", f"  {out} = icmp ne i8 {raw}, 0"]
        else:
            lines.append(f"  {out} = load {memory_type(dtype)}, ptr {p}")
        return out

    # reductions
    def before_reduction_body(self, e: Expr, parent: Var | None) -> None:
        fills = self.row_stores.get(id(e), ())
        if fills:  # the costly values are computed into row buffers first, then summed
            r = e.attr.vars[0]
            # a buffer another reduction of the same scope filled (earlier in its lines, so
            # earlier in each iteration) is read as it is: softmax's backward needs
            # exp(x - max) in two sums and the stores, and computed it twice
            todo = [f for f in fills if self.filled.get(f[1], self) is not parent]
            if todo:
                self.lines[parent].extend(self._fill_rows(parent, r, todo))
                for _, row, _ in todo:
                    self.filled[row] = parent
            for node, row, ty in fills:
                self.row_loads[id(node)] = (row, ty, r)

    def reduction_loops(self, e: Expr, parent: Var | None, bval: str) -> str:
        """Emit the loops of reduction ``e`` into its scope; returns the accumulator."""
        red = e.attr
        body = e.args[0]
        bt = llvm_type(body.dtype)
        op = red.op
        if op == "add" and body.dtype.kind == "f":
            return self._blocked_sum(parent, red.vars, bval, body.dtype)
        arg = op in ("argmax", "argmin")
        init = literal(self.reduction_identity(op, body.dtype), body.dtype)
        keyed = op in ("max", "min") and body.dtype.kind == "f"
        if keyed:  # float max/min accumulate integer keys (see OpEmitter.float_key)
            ops = self.m.ops
            bt = ops.key_type(body.dtype)
            init = ops.key_literal(reduce_identity(op, body.dtype), body.dtype)
        # loops that run once are none: their variable is 0 where its lines would open
        looped = [v for v in red.vars if v.extent != ONCE]
        acc = [f"%acc{v.id}" for v in looped] or [init]
        pos = [f"%pos{v.id}" for v in looped] or ["0"]
        if looped:
            inner_acc, inner_pos = f"{acc[-1]}.new", f"{pos[-1]}.new"
        else:
            inner_acc, inner_pos = self.tmp(), self.tmp()
        chunk: list[str] = []
        j = 0
        for v in red.vars:  # open the loops, outermost first
            if v.extent == ONCE:
                chunk += [f"  %v{v.id} = add i64 0, 0", *self.lines.pop(v)]
                continue
            lv = f"r{v.id}"
            nxt = acc[j + 1] if j + 1 < len(looped) else inner_acc
            chunk += [
                f"  br label %{lv}.entry",
                f"{lv}.entry:",
                f"  br label %{lv}.head",
                f"{lv}.head:",
                f"  %v{v.id} = phi i64 [0, %{lv}.entry], [%v{v.id}.next, %{lv}.latch]",
                f"  {acc[j]} = phi {bt} [{acc[j - 1] if j else init}, %{lv}.entry], "
                f"[{nxt}, %{lv}.latch]",
            ]
            if arg:
                pnxt = pos[j + 1] if j + 1 < len(looped) else inner_pos
                chunk.append(
                    f"  {pos[j]} = phi i64 [{pos[j - 1] if j else 0}, %{lv}.entry], "
                    f"[{pnxt}, %{lv}.latch]"
                )
            chunk += [
                f"  %{lv}.c = icmp slt i64 %v{v.id}, {v.extent}",
                f"  br i1 %{lv}.c, label %{lv}.body, label %{lv}.exit",
                f"{lv}.body:",
            ]
            chunk += self.lines.pop(v)
            j += 1
        if arg:
            flat = "0"
            for v in looped:  # the position as a flat index over the reduced extents
                t1, t2 = self.tmp(), self.tmp()
                chunk += [
                    f"  {t1} = mul i64 {flat}, {v.extent}",
                    f"  {t2} = add i64 {t1}, %v{v.id}",
                ]
                flat = t2
            better = self.m.ops.arg_better(chunk, op, body.dtype, bval, acc[-1], self)
            chunk += [
                f"  {inner_acc} = select i1 {better}, {bt} {bval}, {bt} {acc[-1]}",
                f"  {inner_pos} = select i1 {better}, i64 {flat}, i64 {pos[-1]}",
            ]
        elif keyed:
            key = ops.float_key(chunk, op, body.dtype, bval)
            chunk.append(f"  {inner_acc} = call {bt} @llvm.s{op}.{bt}({bt} {acc[-1]}, {bt} {key})")
        else:
            self.m.ops.combine(chunk, inner_acc, op, body.dtype, acc[-1], bval)
        for v in reversed(looped):  # close the loops, innermost first
            lv = f"r{v.id}"
            chunk += [
                f"  br label %{lv}.latch",
                f"{lv}.latch:",
                f"  %v{v.id}.next = add nuw nsw i64 %v{v.id}, 1",
                f"  br label %{lv}.head{self.m.loop_md(v.extent)}",
                f"{lv}.exit:",
            ]
        if not looped:  # the one combination is the result
            acc, pos = [inner_acc], [inner_pos]
        self.lines[parent].extend(chunk)
        if keyed:
            return ops.from_key(self.lines[parent], body.dtype, acc[0])
        return pos[0] if arg else acc[0]

    def _blocked_sum(
        self, parent: Var | None, vars_: tuple[Var, ...], bval: str, dtype: np.dtype
    ) -> str:
        """Emit a float sum of ``bval`` over the loops ``vars_`` into ``parent``'s scope, with
        an error bound that does not grow with the number of elements; returns the sum.

        A single accumulator running through every loop (``acc += x``) loses everything
        below its ulp: 2^24 float32 ones sum to 2^24 however many more follow, and a random
        sum of n terms is off by about sqrt(n) ulps of the total. Instead each loop level
        sums its own iterations from zero and hands the level's result to the level
        outside it, and a level longer than its block (``SUM_BLOCK`` for the innermost loop,
        ``SUM_OUTER_BLOCK`` for the others) runs as blocks, each summed from zero, whose
        results combine pairwise (``_push_pairwise``). Only the innermost loop's adds are
        ``reassoc``, so the vectoriser still splits a block over several vector accumulators;
        the error is then about (block / lanes + log2(n)) ulps of ``sum(|x|)``."""
        ty = llvm_type(dtype)
        zero = literal(0, dtype)
        last = len(vars_) - 1

        def level(j: int) -> tuple[list[str], str]:
            """Lines running loop level ``j`` (with the levels inside it) and its sum."""
            v = vars_[j]
            lv, acc = f"r{v.id}", f"%acc{v.id}"
            if v.extent == ONCE:  # no loop; an inner level's sum is never -0.0: 0.0 + it is it
                lines = [f"  %v{v.id} = add i64 0, 0", *self.lines.pop(v)]
                if j == last:
                    return lines + [f"  {acc} = fadd reassoc contract {ty} {zero}, {bval}"], acc
                inner, part = level(j + 1)
                return lines + inner, part
            block = self.SUM_BLOCK if j == last else self.SUM_OUTER_BLOCK
            blocked = v.extent > block
            lines: list[str] = []
            if blocked:  # the loop over blocks; %vN = start + j within a block
                sv = f"%s{v.id}"
                head, tail = self._counted(f"b{v.id}", sv, "0", str(v.extent), block)
                stack, count = self._pairwise_stack(ty)
                lines += (
                    head[:4]
                    + [f"  {count} = phi i64 [0, %b{v.id}.entry], [{count}.next, %b{v.id}.latch]"]
                    + head[4:]
                )
                if v.extent % block == 0:
                    n = str(block)
                else:
                    left, n = self.tmp(), self.tmp()
                    lines += [
                        f"  {left} = sub i64 {v.extent}, {sv}",
                        f"  {n} = call i64 @llvm.smin.i64(i64 {left}, i64 {block})",
                    ]
                iv, lo, hi, trip = f"%j{v.id}", "0", n, block if n.isdigit() else None
            else:
                iv, lo, hi, trip = f"%v{v.id}", "0", str(v.extent), v.extent
            lines += [
                f"  br label %{lv}.entry",
                f"{lv}.entry:",
                f"  br label %{lv}.head",
                f"{lv}.head:",
                f"  {iv} = phi i64 [{lo}, %{lv}.entry], [{iv}.next, %{lv}.latch]",
                f"  {acc} = phi {ty} [{zero}, %{lv}.entry], [{acc}.new, %{lv}.latch]",
                f"  %{lv}.c = icmp slt i64 {iv}, {hi}",
                f"  br i1 %{lv}.c, label %{lv}.body, label %{lv}.exit",
                f"{lv}.body:",
            ]
            if blocked:
                lines.append(f"  %v{v.id} = add nuw nsw i64 %s{v.id}, {iv}")
            lines += self.lines.pop(v)
            if j == last:
                lines.append(f"  {acc}.new = fadd reassoc contract {ty} {acc}, {bval}")
            else:
                inner, part = level(j + 1)
                lines += inner + [f"  {acc}.new = fadd {ty} {acc}, {part}"]
            lines += [
                f"  br label %{lv}.latch",
                f"{lv}.latch:",
                f"  {iv}.next = add nuw nsw i64 {iv}, 1",
                f"  br label %{lv}.head{self.m.loop_md(trip, j == last)}",
                f"{lv}.exit:",
            ]
            if not blocked:
                return lines, acc
            lines += self._push_pairwise(stack, count, acc, ty)
            lines += tail
            fold, total = self._fold_pairwise(stack, count, ty, zero)
            return lines + fold, total

        lines, total = level(0)
        self.lines[parent].extend(lines)
        return total

    #: elements of the innermost loop summed from zero before combining pairwise (16 or 32
    #: per vector accumulator: LLVM interleaves 4 vectors of 8 or 16 lanes)
    SUM_BLOCK = 1024
    #: iterations of an outer reduction loop summed from zero before combining pairwise
    SUM_OUTER_BLOCK = 16

    def _pairwise_stack(self, ty: str) -> tuple[str, str]:
        """A fresh stack of partial sums (64 slots: one per power of two of blocks) on the
        function's stack frame, and the name of its count."""
        stack = self.tmp("stk")
        self.allocas.append(f"  {stack} = alloca {ty}, i64 64, align 64")
        return stack, f"%n{stack[1:]}"

    def _push_pairwise(self, stack: str, count: str, x: str, ty: str) -> list[str]:
        """Lines pushing the block sum ``x`` as the ``count``-th block (``count.next`` after):
        slot k holds the sum of the 2^k blocks before, so ``x`` absorbs one slot per trailing
        one bit of ``count`` (a binary counter's carry, as in numpy's pairwise sum) and lands
        in the next slot. Every combined pair sums equally many blocks."""
        p = stack[1:]
        ones, carry, k, s = self.tmp(), self.tmp(), f"%{p}.k", f"%{p}.s"
        q, y, p2 = self.tmp("p"), self.tmp(), self.tmp("p")
        return [
            f"  {ones} = xor i64 {count}, -1",
            f"  {carry} = call i64 @llvm.cttz.i64(i64 {ones}, i1 true)",
            f"  br label %{p}.pre",
            f"{p}.pre:",
            f"  br label %{p}.push",
            f"{p}.push:",
            f"  {k} = phi i64 [0, %{p}.pre], [{k}.next, %{p}.add]",
            f"  {s} = phi {ty} [{x}, %{p}.pre], [{s}.new, %{p}.add]",
            f"  %{p}.more = icmp ult i64 {k}, {carry}",
            f"  br i1 %{p}.more, label %{p}.add, label %{p}.put",
            f"{p}.add:",
            f"  {q} = getelementptr inbounds {ty}, ptr {stack}, i64 {k}",
            f"  {y} = load {ty}, ptr {q}",
            f"  {s}.new = fadd {ty} {y}, {s}",
            f"  {k}.next = add nuw nsw i64 {k}, 1",
            f"  br label %{p}.push",
            f"{p}.put:",
            f"  {p2} = getelementptr inbounds {ty}, ptr {stack}, i64 {carry}",
            f"  store {ty} {s}, ptr {p2}",
            f"  {count}.next = add nuw nsw i64 {count}, 1",
        ]

    def _fold_pairwise(self, stack: str, count: str, ty: str, zero: str) -> tuple[list[str], str]:
        """Lines adding up the stack's occupied slots (the bits of ``count``), smallest
        first, and the name of the total."""
        p = stack[1:]
        k, r, q, y, rest, bit, add = (
            f"%{p}.fk",
            f"%{p}.fr",
            self.tmp("p"),
            self.tmp(),
            self.tmp(),
            self.tmp(),
            self.tmp(),
        )
        return [
            f"  br label %{p}.fpre",
            f"{p}.fpre:",
            f"  br label %{p}.fold",
            f"{p}.fold:",
            f"  {k} = phi i64 [0, %{p}.fpre], [{k}.next, %{p}.fstep]",
            f"  {r} = phi {ty} [{zero}, %{p}.fpre], [{r}.next, %{p}.fstep]",
            f"  {rest} = lshr i64 {count}, {k}",
            f"  %{p}.fany = icmp ne i64 {rest}, 0",
            f"  br i1 %{p}.fany, label %{p}.fstep, label %{p}.fdone",
            f"{p}.fstep:",
            f"  {bit} = trunc i64 {rest} to i1",
            f"  {q} = getelementptr inbounds {ty}, ptr {stack}, i64 {k}",
            f"  {y} = load {ty}, ptr {q}",
            f"  {add} = fadd {ty} {y}, {r}",
            f"  {r}.next = select i1 {bit}, {ty} {add}, {ty} {r}",
            f"  {k}.next = add nuw nsw i64 {k}, 1",
            f"  br label %{p}.fold",
            f"{p}.fdone:",
        ], r

    def _plan_row_buffers(self) -> None:
        """Compute-at for rows: when a reduction over the innermost extent (softmax's sum of
        ``exp(x - max)``) computes an expensive value that the stores need again at the same
        row (``exp(x - max) / sum``), keep it in a stack row buffer instead of computing it
        twice. A loop of its own fills the buffer (``_fill_rows``), then the reduction and
        the stores read it."""
        kern, ctx = self.kern, self.m.prog.ctx
        if not kern.loops or ctx is None or kern.loops[-1].extent > 16384:
            return
        inner = kern.loops[-1]
        outer = set(kern.loops[:-1])
        used = {id(x) for x in _walk([s.value for s in kern.stores])}
        expensive: dict[int, bool] = {}

        def costly(root):
            # whether a transcendental is at or below the node (post-order, explicit stack)
            stack = [root]
            while stack:
                x = stack[-1]
                if id(x) in expensive:
                    stack.pop()
                    continue
                if x.op in MATH_UNARY or x.op in ("pow", "atan2"):
                    expensive[id(x)] = True
                    stack.pop()
                    continue
                first = [a for a in x.args if id(a) not in expensive]
                if first:
                    stack.extend(first)
                    continue
                expensive[id(x)] = any(expensive[id(a)] for a in x.args)
                stack.pop()
            return expensive[id(root)]

        for red in [x for x in _walk([s.value for s in kern.stores]) if x.op == "reduce"]:
            if (
                len(red.attr.vars) != 1
                or red.attr.vars[0].extent != inner.extent
                or not red.free <= outer
            ):
                continue
            r = red.attr.vars[0]
            stack, seen = [red.args[0]], set()
            while stack:
                x = stack.pop()
                if id(x) in seen or r not in x.free:
                    continue
                seen.add(id(x))
                if x.op == "reduce" or not costly(x):
                    continue
                if x.op in MATH_UNARY or x.op in ("pow", "atan2"):
                    twin = substitute(ctx, x, r, ctx.index(inner))
                    if id(twin) in used:
                        planned = self.row_loads.get(id(twin))
                        if planned is None:
                            ty, row = llvm_type(x.dtype), self.tmp("row")
                            self.lines[None].append(
                                f"  {row} = alloca {ty}, i64 {inner.extent}, align 64"
                            )
                            self.row_loads[id(twin)] = (row, ty, inner)
                        else:  # another reduction of the row needs it too: one buffer
                            row, ty, _ = planned
                        self.row_stores.setdefault(id(red), []).append((x, row, ty))
                        continue
                stack.extend(x.args)

    #: rows are prefetched this many outer iterations ahead (softmax 4096x1024 float32, one
    #: core, prefetches in the store loop: 2 ahead 16% faster than none, 1 ahead 10%, a row's
    #: 64 lines at once 7%; in the fill loop, 2 ahead: 31% faster than none)
    PREFETCH_ROWS_AHEAD = 2

    def _plan_prefetch(self) -> None:
        """Software prefetch for row kernels: when reductions over the innermost extent read
        input rows first (softmax's max and sum, a norm's mean), the loop that stores the row
        runs with no loads of its own, and the next rows' first touch stalls the next
        reductions. A loop over the row without loads of the row's first touch (the fill
        loop of a row buffer, else the store loop) is then strip-mined by cache lines, and
        each strip prefetches the same line of the input rows and of the output rows (for
        writing) ``PREFETCH_ROWS_AHEAD`` ahead: one prefetch per 64 bytes and stream, spread
        over the row's compute (a prefetch inside the vectorised loop would be repeated for
        every lane). Planned here, placed by ``_strip_prefetches``."""
        kern, ctx = self.kern, self.m.prog.ctx
        if len(kern.loops) < 2 or ctx is None:
            return
        inner, outer = kern.loops[-1], kern.loops[-2]

        def row_start(i: Expr, v: Var) -> Expr | None:
            """X where index ``i`` is X + v and X advances with the rows, else None."""
            rest = [a for a in i.args if not (a.op == "idx" and a.attr is v)]
            if i.op != "add" or len(rest) != 1 or v in rest[0].free or outer not in rest[0].free:
                return None
            return rest[0]

        written = {st.buffer.id for st in kern.stores}
        reads: dict[tuple[int, int], tuple] = {}
        for red in [x for x in _walk([s.value for s in kern.stores]) if x.op == "reduce"]:
            if (
                len(red.attr.vars) != 1
                or red.attr.vars[0].extent != inner.extent
                or not red.free <= set(kern.loops[:-1])
            ):
                continue
            for x in _walk([red.args[0]]):
                if x.op == "load" and x.attr.id not in written:
                    base = row_start(x.args[0], red.attr.vars[0])
                    if base is not None:
                        reads.setdefault((x.attr.id, id(base)), (x.attr, base, 0))
        if not reads:
            return
        writes = {}  # the output rows too (measured 5% more): no read-for-ownership stall
        for st in kern.stores:
            base = row_start(st.index, inner)
            if st.mask is None and st.combine is None and base is not None:
                writes.setdefault((st.buffer.id, id(base)), (st.buffer, base, 1))
        streams = [*reads.values(), *writes.values()][:4]
        itemsize = min(b.dtype.itemsize for b, _, _ in streams)
        strip = 64 // itemsize
        if inner.extent % strip or inner.extent * itemsize < 1024:
            return
        self.prefetch = (streams, strip)

    def _strip_prefetches(self, parent: Var | None, extent: int) -> tuple[Var, int]:
        """A strip variable (steps of the planned strip length, below ``parent``) and, in its
        scope, the planned prefetches of the rows ``PREFETCH_ROWS_AHEAD`` ahead."""
        streams, strip = self.prefetch
        self.prefetch = None  # placed once per row: in the first fill loop, or the stores
        ctx, outer = self.m.prog.ctx, self.kern.loops[-2]
        sv = Var(extent)
        self.open_scope(sv, parent)
        ahead = ctx.iadd(ctx.index(outer), ctx.iconst(self.PREFETCH_ROWS_AHEAD))
        for buf, base, write in streams:
            at = ctx.iadd(substitute(ctx, base, outer, ahead), ctx.index(sv))
            idx, p = self.value(at), self.tmp("pf")
            self.lines[sv] += [
                f"  {p} = getelementptr {memory_type(buf.dtype)}, ptr {self.bufs[buf.id]}, "
                f"i64 {idx}",  # no inbounds: past the last row it points anywhere
                f"  call void @llvm.prefetch.p0(ptr {p}, i32 {write}, i32 3, i32 1)",
            ]
        return sv, strip

    def _fill_rows(self, parent: Var | None, r: Var, fills) -> list[str]:
        """The loop storing each ``(node, row buffer, type)`` of ``fills`` for every value of
        the reduction variable ``r``: strip-mined with the row prefetches when planned. A
        loop without the reduction's add vectorises into plain stores, so the prefetches can
        sit between them (measured: softmax 21% faster than with the prefetches in the
        store loop and the sum taken while filling)."""
        ctx = self.m.prog.ctx
        fv = Var(r.extent)
        if self.prefetch is not None and parent is self.kern.loops[-2]:  # once per row
            sv, n = self._strip_prefetches(parent, r.extent)
            self.open_scope(fv, sv)
        else:
            sv, n = None, 1
            self.open_scope(fv, parent)
        for node, row, ty in fills:
            val = self.value(substitute(ctx, node, r, ctx.index(fv)))
            p = self.tmp("p")
            self.lines[fv] += [
                f"  {p} = getelementptr inbounds {ty}, ptr {row}, i64 %v{fv.id}",
                f"  store {ty} {val}, ptr {p}",
            ]
        head, tail = self._loop_open(fv, sv, n)
        return head + self.lines[fv] + tail

    def _loop_open(
        self, v: Var, sv: Var | None, n: int, lo: str = "0", hi: str | None = None
    ) -> tuple[list[str], list[str]]:
        """(lines before the body, lines after it) of loop ``v`` over ``[lo, hi)`` (default
        ``[0, extent)``); with a strip variable ``sv``, as strips of ``n`` iterations whose
        loop runs ``self.lines[sv]`` before the loop over the strip."""
        hi = str(v.extent) if hi is None else hi
        if sv is None:
            return self._counted(f"l{v.id}", f"%v{v.id}", lo, hi, 1)
        sh, st = self._counted(f"l{sv.id}", f"%v{sv.id}", "0", hi, n)
        jh, jt = self._counted(f"l{v.id}", f"%l{v.id}.j", "0", str(n), 1)
        return (
            sh + self.lines[sv] + jh + [f"  %v{v.id} = add nuw nsw i64 %v{sv.id}, %l{v.id}.j"],
            jt + st,
        )

    def _counted(self, lv: str, iv: str, lo: str, hi: str, step: int):
        """Head and tail lines of a loop ``for iv in range(lo, hi, step)`` labelled ``lv``.
        A loop known to run once is no loop: its body runs with ``iv = lo`` (see ONCE)."""
        if _trip_count(lo, hi, step) == ONCE:
            return [f"  {iv} = add i64 {lo}, 0"], []
        head = [
            f"  br label %{lv}.entry",
            f"{lv}.entry:",
            f"  br label %{lv}.head",
            f"{lv}.head:",
            f"  {iv} = phi i64 [{lo}, %{lv}.entry], [{iv}.next, %{lv}.latch]",
            f"  %{lv}.c = icmp slt i64 {iv}, {hi}",
            f"  br i1 %{lv}.c, label %{lv}.body, label %{lv}.exit",
            f"{lv}.body:",
        ]
        tail = [
            f"  br label %{lv}.latch",
            f"{lv}.latch:",
            f"  {iv}.next = add nuw nsw i64 {iv}, {step}",
            f"  br label %{lv}.head{self.m.loop_md(_trip_count(lo, hi, step))}",
            f"{lv}.exit:",
        ]
        return head, tail

    def _store(self, k: int, st, loops: tuple[Var, ...]) -> None:
        """Emit store ``k`` of the kernel (``st``) into the lines of its loop among ``loops``
        (the kernel's, or a piece's of a split): in the innermost loop, or for a ``once``
        store where its value is computed; a masked store branches around itself."""
        val = self.value(st.value)
        idx = self.value(st.index)
        where = loops[-1] if loops else None
        masked = st.mask is not None
        if st.once:  # stored where its value is computed, once: no branch in the inner loops
            used = st.value.free | st.index.free
            where = max((v for v in loops if v in used), default=None, key=loops.index)
            masked = False
        buf = st.buffer
        mt = memory_type(buf.dtype)
        p = self.tmp("p")
        lines = self.lines[where]
        if masked:  # a conditional store: branch around it
            cond = self.value(st.mask)
            lbl = f"st{k}.{self.n}"
            lines += [f"  br i1 {cond}, label %{lbl}.do, label %{lbl}.skip", f"{lbl}.do:"]
        lines.append(f"  {p} = getelementptr inbounds {mt}, ptr {self.bufs[buf.id]}, i64 {idx}")
        if st.combine is not None:
            old = self.load(lines, self.tmp(), p, buf.dtype)
            new = self.tmp()
            self.m.ops.combine(lines, new, st.combine, buf.dtype, old, val, exact=True)
            val = new
        if buf.dtype.kind == "b":
            z = self.tmp()
            lines.append(f"  {z} = zext i1 {val} to i8")
            val = z
        lines.append(f"  store {mt} {val}, ptr {p}")
        if masked:
            lines += [f"  br label %{lbl}.skip", f"{lbl}.skip:"]

    # the kernel function
    def function(self, whole: bool = False) -> str:
        """The function's text. ``whole``: every call runs the outermost loop's whole extent,
        written as constants (the calls still pass ``0, extent``), so LLVM knows the trip
        count of a kernel it cannot see called."""
        kern = self.kern
        ctx = self.m.prog.ctx
        split = None
        if ctx is not None and not _carried_in_memory(kern):
            split = range_split.plan_split(ctx, kern.loops, kern.stores)
        if split is not None:
            _split_divided_leaves(ctx, split)
            return self._wrap(self._split_body(split, whole))
        if ctx is not None:
            loops, stores = split_divided_loop(ctx, kern.loops, kern.stores)
            if loops is not kern.loops:
                kern = self.kern = dataclasses.replace(
                    kern, loops=loops, stores=stores, _reads=((), frozenset())
                )
        outer = None
        for v in kern.loops:
            self.open_scope(v, outer)
            outer = v
        self._plan_row_buffers()
        self._plan_prefetch()
        # the math calls that branch to an out-of-line function first: values computed before
        # such a call would be live across it, and it clobbers every vector register (spills
        # in the hot loop: the benchmark chain's tanh and exp before its sin)
        loops = set(kern.loops)
        for x in _walk([st.value for st in kern.stores]):
            if x.op in llvm_math.BRANCHING and x.free <= loops and id(x) not in self.row_loads:
                self.value(x)
        for k, st in enumerate(kern.stores):
            self._store(k, st, kern.loops)
        sv, n = None, 1
        if self.prefetch is not None:  # no fill loop took them: the store loop runs them
            sv, n = self._strip_prefetches(kern.loops[-2], kern.loops[-1].extent)
        body: list[str] = self.allocas + self.lines[None]
        # nest the kernel loops, innermost last
        tail: list[str] = []
        for depth, v in enumerate(kern.loops):
            strip = sv if v is kern.loops[-1] else None
            bounds = ("%start", "%end") if depth == 0 and not whole else ("0", None)
            head, close = self._loop_open(v, strip, n, *bounds)
            body += head + self.lines[v]
            tail = close + tail
        body += tail
        return self._wrap(body)

    def _wrap(self, body: list[str]) -> str:
        """The function definition around the lines of its body."""
        kern = self.kern
        # (a buffer written over another's memory shares its argument: Buffer.alias)
        params = ", ".join(f"ptr noalias {n}" for n in dict.fromkeys(self.bufs.values()))
        # "stackrealign": the frame aligned to its largest slot (64 bytes for a zmm spill):
        # else spill slots sat wherever the caller's 16-byte alignment put them, and a zmm
        # spill straddling two cache lines made some processes' kernels slower than others'
        return (
            f"define internal void @{kern.name}({params}{', ' if params else ''}"
            f'i64 %start, i64 %end) "stackrealign" {{\nentry:\n'
            + "\n".join(body)
            + "\n  ret void\n}\n"
        )

    # kernels split into pieces by index range (range_split)
    def _split_body(self, split: range_split.Split, whole: bool) -> list[str]:
        """The body of a kernel whose loop at ``split.depth`` runs as consecutive pieces, each
        with its specialised stores (``range_split``): the loops outside the split are the
        kernel's, each piece has loops of its own (values of the outer loops are computed once,
        before the pieces). No row buffers or prefetches: a split kernel has no index tests
        left to share a row between."""
        kern = self.kern
        outer = None
        for v in kern.loops[: split.depth]:
            self.open_scope(v, outer)
            outer = v
        self._open_pieces(split, outer)
        store_no = 0
        for loops, stores in range_split._leaves(kern.loops, kern.stores, split):
            inside = set(loops)
            for x in _walk([st.value for st in stores]):  # as in function(): branching calls first
                if x.op in llvm_math.BRANCHING and x.free <= inside:
                    self.value(x)
            for st in stores:
                self._store(store_no, st, loops)
                store_no += 1
        nest = self._nest(kern.loops, 0, split, whole)
        return self.allocas + self.lines[None] + nest

    def _open_pieces(self, split: range_split.Split, parent: Var | None) -> None:
        """Open the scopes of every piece's loops (and of the pieces' own splits) below
        ``parent``, the scope of the loop outside the split."""
        for p in split.pieces:
            outer = parent
            stop = p.split.depth if p.split is not None else len(p.loops)
            for v in p.loops[split.depth : stop]:
                self.open_scope(v, outer)
                outer = v
            if p.split is not None:
                self._open_pieces(p.split, outer)

    def _nest(
        self, loops: tuple[Var, ...], depth: int, split: range_split.Split | None, whole: bool
    ) -> list[str]:
        """The lines of ``loops[depth:]`` nested, the loop at ``split.depth`` run as its
        pieces one after the other."""
        if depth == len(loops):
            return []
        if split is not None and depth == split.depth:
            out: list[str] = []
            for p in split.pieces:
                w = p.loops[depth]
                if depth == 0 and not whole:  # this call's [start, end) of the outer loop
                    lo, hi = self._piece_bounds(p)
                    head, close = self._counted(f"l{w.id}", f"%v{w.id}", lo, hi, 1)
                else:
                    head, close = self._loop_open(w, None, 1)
                out += head + self.lines[w] + self._nest(p.loops, depth + 1, p.split, whole) + close
            return out
        v = loops[depth]
        bounds = ("%start", "%end") if depth == 0 and not whole else ("0", None)
        head, close = self._loop_open(v, None, 1, *bounds)
        return head + self.lines[v] + self._nest(loops, depth + 1, split, whole) + close

    def _piece_bounds(self, p: range_split.Piece) -> tuple[str, str]:
        """The range of a piece of the outermost loop (``i = lo + w``) within the call's
        ``[start, end)``: ``max(start - lo, 0)`` to ``min(end - lo, hi - lo)``, computed at
        the top of the function."""
        a, lo, b, hi = self.tmp(), self.tmp(), self.tmp(), self.tmp()
        self.lines[None] += [
            f"  {a} = sub i64 %start, {p.lo}",
            f"  {lo} = call i64 @llvm.smax.i64(i64 {a}, i64 0)",
            f"  {b} = sub i64 %end, {p.lo}",
            f"  {hi} = call i64 @llvm.smin.i64(i64 {b}, i64 {p.hi - p.lo})",
        ]
        return lo, hi


def _split_divided_leaves(ctx, split: range_split.Split) -> None:
    """Each leaf nest of ``split`` with its innermost loop split where its index is divided
    by a constant (``divided_loops``: the head merge's concatenation pieces)."""
    for p in split.pieces:
        if p.split is not None:
            _split_divided_leaves(ctx, p.split)
        else:
            p.loops, p.stores = split_divided_loop(ctx, p.loops, p.stores)


def _carried_in_memory(kern: Kernel) -> bool:
    """Whether ``kern`` reads an element of a buffer it writes other than the one the same
    iteration stores (a scan reading its previous step): such a kernel is not range-split,
    whose pieces' loop-invariant loads are computed before all the pieces (a piece of one
    iteration folds its indices to constants), so one would read a value an earlier piece
    had not stored yet (a cumprod over a pad along a second axis)."""
    stored = {}
    for st in kern.stores:
        stored.setdefault(st.buffer.root().id, set()).add(id(st.index))
    roots = [e for st in kern.stores for e in (st.value, st.index, st.mask) if e is not None]
    return any(
        e.op == "load"
        and e.attr.root().id in stored
        and id(e.args[0]) not in stored[e.attr.root().id]
        for e in _walk(roots)
    )
