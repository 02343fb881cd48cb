"""The LLVM renderer: a :class:`~fungrad.lowering.fusion.Program` becomes LLVM IR modules.

A program has one entry point, ``i32 @<name>(ptr %args, i64 %nthreads)``. ``%args`` is a
Python tuple object (``(inputs..., consts..., outputs..., scratch)``, numpy arrays or numpy
scalars) whose data pointers the entry reads itself (``abi.py`` measured the object layout at
start-up), so a jitted call is one ctypes call with no per-argument pointer extraction in
Python. The entry returns 0, or ``i + 1`` when input ``i`` is not a C-contiguous aligned array
(the caller then passes a contiguous copy).

Each kernel becomes an internal function ``@kN(ptr noalias %buf..., i64 %start, i64 %end)``
looping over its index space; the outermost loop runs ``[start, end)`` so a kernel can be split
across threads. Every expression node is emitted once, at the outermost loop where all its
indices are defined; reductions become inner loops with phi accumulators (``reassoc`` on float
adds/muls so the vectoriser can reorder them). No ``nnan``/``ninf`` flags anywhere.

LLVM's full pipeline costs ~3 ms per loop, even a trivial one, so not every function gets it.
The entry point, the trampolines and the kernels that do little work (``COLD_COST``,
``COLD_SHARE``) are *glue*: when a program has such small kernels, the glue is a second module
compiled without IR passes and with FastISel (~0.15 ms per function), linked to the first in
one engine (``cpu.compile_modules``). Kernels whose bodies are the same up to the names of their
values are defined once.
"""

from __future__ import annotations

import ctypes
import re

import numpy as np

from fungrad.lowering.cpu import abi, control_flow, host_call, llvm_capi, sort
from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu import gemm as matmul
from fungrad.lowering.cpu.llvm_types import literal, llvm_type, memory_type
from fungrad.lowering.fusion import Gemm, Kernel, Program, _walk
from fungrad.lowering.kernel import (
    MATH_UNARY,
    Expr,
    Var,
    innermost_loop,
    reduce_identity,
    substitute,
)
from fungrad.lowering.math import llvm as llvm_math
from fungrad.lowering.render import StepRenderers
from fungrad.lowering.steps import CondStep, HostCallStep, ScanStep, SortStep, WhileStep

#: loops known to run fewer times than this are not vectorised (``ModuleWriter.loop_md``)
SHORT_LOOP = 16
#: vector accumulators of a float sum's innermost loop: LLVM chose one for softmax's row sum, a
#: chain of dependent adds (3-4 cycles each) where the loads allow one or two per cycle
INTERLEAVE_SUMS = 4
#: attributes of functions that only pass their arguments on (trampolines, the entry point
#: without control flow): no IR passes and FastISel, which cost a fraction of LLVM's full
#: per-function pipeline (~1 ms per function, even an empty one: measured)
_GLUE = "optnone noinline"


def _trip_count(lo: str, hi: str, step: int) -> int | None:
    """Iterations of ``range(lo, hi, step)`` when both bounds are literals, else None."""
    if lo.isdigit() and hi.isdigit():
        return max(0, -(-(int(hi) - int(lo)) // step))
    return None

# -- kernels -----------------------------------------------------------------------------------

class _KernelWriter:
    """Emits the body of one kernel function (see the module docstring for placement)."""

    def __init__(self, module: ModuleWriter, kern: Kernel, buf_names: dict[int, str]):
        self.m = module
        self.kern = kern
        self.bufs = buf_names  # buffer id -> the pointer argument's name
        self.lines: dict[Var | None, list[str]] = {None: []}
        self.chain: dict[Var, tuple[Var, ...]] = {}
        self.names: dict[int, str] = {}
        self.n = 0
        self.row_loads: dict[int, tuple] = {}  # node id -> (row buffer, type, index var)
        self.row_stores: dict[int, list] = {}  # reduce id -> [(node, row buffer, type)]
        self.prefetch: tuple | None = None     # (streams, strip) of _plan_prefetch, unplaced
        self.allocas: list[str] = []  # stack slots, placed at the top of the entry block
        # float32 divisor -> the loop-invariant operands of its division (llvm_ops)
        self.recips: dict[str, tuple[str, str]] = {}

    def tmp(self, hint: str = "t") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def scope(self, e: Expr) -> Var | None:
        return innermost_loop(self.chain, e)

    def emit(self, scope: Var | None, line: str) -> None:
        self.lines[scope].append(line)

    # values
    def value(self, e: Expr) -> str:
        name = self.names.get(id(e))
        if name is not None:
            return name
        op = e.op
        row = self.row_loads.get(id(e))
        if row is not None:  # computed by a fill loop (_fill_rows), kept in a row buffer
            buf, ty, var = row
            p, name = self.tmp("p"), self.tmp()
            self.lines[var] += [f"  {p} = getelementptr inbounds {ty}, ptr {buf}, i64 %v{var.id}",
                                f"  {name} = load {ty}, ptr {p}"]
        elif op == "const":
            name = literal(e.attr, e.dtype)
        elif op == "idx":
            name = f"%v{e.attr.id}"
        elif op == "reduce":
            name = self._reduce(e)
        else:
            args = [self.value(a) for a in e.args]
            name = self._instruction(e, args)
        self.names[id(e)] = name
        return name

    def _instruction(self, e: Expr, args: list[str]) -> str:
        s = self.scope(e)
        out = self.tmp()
        lines = self.lines[s]
        ty = llvm_type(e.dtype)
        op = e.op
        a0 = e.args[0] if e.args else None
        if op == "load":
            buf = e.attr
            p = self.tmp("p")
            lines.append(f"  {p} = getelementptr inbounds {memory_type(buf.dtype)}, "
                         f"ptr {self.bufs[buf.id]}, i64 {args[0]}")
            return self._load(lines, out, p, buf.dtype)
        if op == "select":
            lines.append(f"  {out} = select i1 {args[0]}, {ty} {args[1]}, {ty} {args[2]}")
            return out
        if op == "convert":
            return self.m.ops.convert(lines, out, a0.dtype, e.dtype, args[0], self)
        if op == "bitcast":
            src, dst = llvm_type(a0.dtype), ty
            lines.append(f"  {out} = bitcast {src} {args[0]} to {dst}")
            return out
        return self.m.ops.emit(lines, out, e, args, self)

    def _load(self, lines: list[str], out: str, p: str, dtype) -> str:
        """``out = *p`` for an element of ``dtype`` (bool is an i8 in memory)."""
        if dtype.kind == "b":
            raw = self.tmp()
            lines += [f"  {raw} = load i8, ptr {p}", f"  {out} = icmp ne i8 {raw}, 0"]
        else:
            lines.append(f"  {out} = load {memory_type(dtype)}, ptr {p}")
        return out

    def _reduce(self, e: Expr) -> str:
        """Emit the loops of reduction ``e`` into its scope; returns the accumulator."""
        red = e.attr
        parent = self.scope(e)
        base = self.chain[parent] if parent is not None else ()
        for i, v in enumerate(red.vars):
            self.chain[v] = base + red.vars[:i + 1]
            self.lines[v] = []
        body = e.args[0]
        fills = self.row_stores.get(id(e), ())
        if fills:  # the costly values are computed into row buffers first, then summed
            self.lines[parent].extend(self._fill_rows(parent, red.vars[0], fills))
            for node, row, ty in fills:
                self.row_loads[id(node)] = (row, ty, red.vars[0])
        bval = self.value(body)
        bt = llvm_type(body.dtype)
        op = red.op
        if op == "add" and body.dtype.kind == "f":
            return self._blocked_sum(parent, red.vars, bval, body.dtype)
        arg = op in ("argmax", "argmin")
        init = literal(reduce_identity({"argmax": "max", "argmin": "min"}.get(op, op),
                                       body.dtype), body.dtype)
        keyed = op in ("max", "min") and body.dtype.kind == "f"
        if keyed:  # float max/min accumulate integer keys (see OpEmitter.float_key)
            ops = self.m.ops
            bt = ops.key_type(body.dtype)
            init = ops.key_literal(reduce_identity(op, body.dtype), body.dtype)
        vars_ = red.vars
        acc = [f"%acc{v.id}" for v in vars_]
        pos = [f"%pos{v.id}" for v in vars_]
        inner_acc, inner_pos = f"{acc[-1]}.new", f"{pos[-1]}.new"
        chunk: list[str] = []
        for j, v in enumerate(vars_):  # open the loops, outermost first
            lv = f"r{v.id}"
            nxt = acc[j + 1] if j + 1 < len(vars_) else inner_acc
            chunk += [f"  br label %{lv}.entry", f"{lv}.entry:", f"  br label %{lv}.head",
                      f"{lv}.head:",
                      f"  %v{v.id} = phi i64 [0, %{lv}.entry], [%v{v.id}.next, %{lv}.latch]",
                      f"  {acc[j]} = phi {bt} [{acc[j - 1] if j else init}, %{lv}.entry], "
                      f"[{nxt}, %{lv}.latch]"]
            if arg:
                pnxt = pos[j + 1] if j + 1 < len(vars_) else inner_pos
                chunk.append(f"  {pos[j]} = phi i64 [{pos[j - 1] if j else 0}, %{lv}.entry], "
                             f"[{pnxt}, %{lv}.latch]")
            chunk += [f"  %{lv}.c = icmp slt i64 %v{v.id}, {v.extent}",
                      f"  br i1 %{lv}.c, label %{lv}.body, label %{lv}.exit", f"{lv}.body:"]
            chunk += self.lines.pop(v)
        if arg:
            flat = "0"
            for v in vars_:  # the position as a flat index over the reduced extents
                t1, t2 = self.tmp(), self.tmp()
                chunk += [f"  {t1} = mul i64 {flat}, {v.extent}",
                          f"  {t2} = add i64 {t1}, %v{v.id}"]
                flat = t2
            better = self.m.ops.arg_better(chunk, op, body.dtype, bval, acc[-1], self)
            chunk += [f"  {inner_acc} = select i1 {better}, {bt} {bval}, {bt} {acc[-1]}",
                      f"  {inner_pos} = select i1 {better}, i64 {flat}, i64 {pos[-1]}"]
        elif keyed:
            key = ops.float_key(chunk, op, body.dtype, bval)
            chunk.append(f"  {inner_acc} = call {bt} @llvm.s{op}.{bt}({bt} {acc[-1]}, "
                         f"{bt} {key})")
        else:
            self.m.ops.combine(chunk, inner_acc, op, body.dtype, acc[-1], bval)
        for v in reversed(vars_):  # close the loops, innermost first
            lv = f"r{v.id}"
            chunk += [f"  br label %{lv}.latch", f"{lv}.latch:",
                      f"  %v{v.id}.next = add nuw nsw i64 %v{v.id}, 1",
                      f"  br label %{lv}.head{self.m.loop_md(v.extent)}", f"{lv}.exit:"]
        self.lines[parent].extend(chunk)
        if keyed:
            return ops.from_key(self.lines[parent], body.dtype, acc[0])
        return pos[0] if arg else acc[0]

    def _blocked_sum(self, parent: Var | None, vars_: tuple[Var, ...], bval: str,
                     dtype: np.dtype) -> str:
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
            block = self.SUM_BLOCK if j == last else self.SUM_OUTER_BLOCK
            blocked = v.extent > block
            lines: list[str] = []
            if blocked:  # the loop over blocks; %vN = start + j within a block
                sv = f"%s{v.id}"
                head, tail = self._counted(f"b{v.id}", sv, "0", str(v.extent), block)
                stack, count = self._pairwise_stack(ty)
                lines += head[:4] + [f"  {count} = phi i64 [0, %b{v.id}.entry], "
                                     f"[{count}.next, %b{v.id}.latch]"] + head[4:]
                if v.extent % block == 0:
                    n = str(block)
                else:
                    left, n = self.tmp(), self.tmp()
                    lines += [f"  {left} = sub i64 {v.extent}, {sv}",
                              f"  {n} = call i64 @llvm.smin.i64(i64 {left}, i64 {block})"]
                iv, lo, hi, trip = f"%j{v.id}", "0", n, block if n.isdigit() else None
            else:
                iv, lo, hi, trip = f"%v{v.id}", "0", str(v.extent), v.extent
            lines += [f"  br label %{lv}.entry", f"{lv}.entry:", f"  br label %{lv}.head",
                      f"{lv}.head:",
                      f"  {iv} = phi i64 [{lo}, %{lv}.entry], [{iv}.next, %{lv}.latch]",
                      f"  {acc} = phi {ty} [{zero}, %{lv}.entry], [{acc}.new, %{lv}.latch]",
                      f"  %{lv}.c = icmp slt i64 {iv}, {hi}",
                      f"  br i1 %{lv}.c, label %{lv}.body, label %{lv}.exit", f"{lv}.body:"]
            if blocked:
                lines.append(f"  %v{v.id} = add nuw nsw i64 %s{v.id}, {iv}")
            lines += self.lines.pop(v)
            if j == last:
                lines.append(f"  {acc}.new = fadd reassoc contract {ty} {acc}, {bval}")
            else:
                inner, part = level(j + 1)
                lines += inner + [f"  {acc}.new = fadd {ty} {acc}, {part}"]
            lines += [f"  br label %{lv}.latch", f"{lv}.latch:",
                      f"  {iv}.next = add nuw nsw i64 {iv}, 1",
                      f"  br label %{lv}.head{self.m.loop_md(trip, j == last)}",
                      f"{lv}.exit:"]
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
        return [f"  {ones} = xor i64 {count}, -1",
                f"  {carry} = call i64 @llvm.cttz.i64(i64 {ones}, i1 true)",
                f"  br label %{p}.pre", f"{p}.pre:", f"  br label %{p}.push",
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
                f"  {count}.next = add nuw nsw i64 {count}, 1"]

    def _fold_pairwise(self, stack: str, count: str, ty: str, zero: str
                       ) -> tuple[list[str], str]:
        """Lines adding up the stack's occupied slots (the bits of ``count``), smallest
        first, and the name of the total."""
        p = stack[1:]
        k, r, q, y, rest, bit, add = (f"%{p}.fk", f"%{p}.fr", self.tmp("p"), self.tmp(),
                                      self.tmp(), self.tmp(), self.tmp())
        return [f"  br label %{p}.fpre", f"{p}.fpre:", f"  br label %{p}.fold",
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
                f"{p}.fdone:"], r

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

        def costly(x):
            c = expensive.get(id(x))
            if c is None:
                c = expensive[id(x)] = (x.op in MATH_UNARY or x.op in ("pow", "atan2")
                                        or any(costly(a) for a in x.args))
            return c
        for red in [x for x in _walk([s.value for s in kern.stores]) if x.op == "reduce"]:
            if len(red.attr.vars) != 1 or red.attr.vars[0].extent != inner.extent \
                    or not red.free <= outer:
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
                    if id(twin) in used and id(twin) not in self.row_loads:
                        ty, row = llvm_type(x.dtype), self.tmp("row")
                        self.lines[None].append(f"  {row} = alloca {ty}, i64 {inner.extent}, "
                                                f"align 64")
                        self.row_loads[id(twin)] = (row, ty, inner)
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
            if len(red.attr.vars) != 1 or red.attr.vars[0].extent != inner.extent \
                    or not red.free <= set(kern.loops[:-1]):
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
        self.chain[sv] = (self.chain[parent] if parent is not None else ()) + (sv,)
        self.lines[sv] = []
        ahead = ctx.iadd(ctx.index(outer), ctx.iconst(self.PREFETCH_ROWS_AHEAD))
        for buf, base, write in streams:
            at = ctx.iadd(substitute(ctx, base, outer, ahead), ctx.index(sv))
            idx, p = self.value(at), self.tmp("pf")
            self.lines[sv] += [
                f"  {p} = getelementptr {memory_type(buf.dtype)}, ptr {self.bufs[buf.id]}, "
                f"i64 {idx}",  # no inbounds: past the last row it points anywhere
                f"  call void @llvm.prefetch.p0(ptr {p}, i32 {write}, i32 3, i32 1)"]
        return sv, strip

    def _fill_rows(self, parent: Var | None, r: Var, fills) -> list[str]:
        """The loop storing each ``(node, row buffer, type)`` of ``fills`` for every value of
        the reduction variable ``r``: strip-mined with the row prefetches when planned. A
        loop without the reduction's add vectorises into plain stores, so the prefetches can
        sit between them (measured: softmax 21% faster than with the prefetches in the
        store loop and the sum taken while filling)."""
        ctx = self.m.prog.ctx
        fv = Var(r.extent)
        self.lines[fv] = []
        if self.prefetch is not None and parent is self.kern.loops[-2]:  # once per row
            sv, n = self._strip_prefetches(parent, r.extent)
            self.chain[fv] = self.chain[sv] + (fv,)
        else:
            sv, n = None, 1
            self.chain[fv] = (self.chain[parent] if parent is not None else ()) + (fv,)
        for node, row, ty in fills:
            val = self.value(substitute(ctx, node, r, ctx.index(fv)))
            p = self.tmp("p")
            self.lines[fv] += [f"  {p} = getelementptr inbounds {ty}, ptr {row}, i64 %v{fv.id}",
                               f"  store {ty} {val}, ptr {p}"]
        head, tail = self._loop_open(fv, sv, n)
        return head + self.lines[fv] + tail

    def _loop_open(self, v: Var, sv: Var | None, n: int, lo: str = "0",
                   hi: str | None = None) -> tuple[list[str], list[str]]:
        """(lines before the body, lines after it) of loop ``v`` over ``[lo, hi)`` (default
        ``[0, extent)``); with a strip variable ``sv``, as strips of ``n`` iterations whose
        loop runs ``self.lines[sv]`` before the loop over the strip."""
        hi = str(v.extent) if hi is None else hi
        if sv is None:
            return self._counted(f"l{v.id}", f"%v{v.id}", lo, hi, 1)
        sh, st = self._counted(f"l{sv.id}", f"%v{sv.id}", "0", hi, n)
        jh, jt = self._counted(f"l{v.id}", f"%l{v.id}.j", "0", str(n), 1)
        return (sh + self.lines[sv] + jh
                + [f"  %v{v.id} = add nuw nsw i64 %v{sv.id}, %l{v.id}.j"], jt + st)

    def _counted(self, lv: str, iv: str, lo: str, hi: str, step: int):
        """Head and tail lines of a loop ``for iv in range(lo, hi, step)`` labelled ``lv``."""
        head = [f"  br label %{lv}.entry", f"{lv}.entry:", f"  br label %{lv}.head",
                f"{lv}.head:", f"  {iv} = phi i64 [{lo}, %{lv}.entry], [{iv}.next, %{lv}.latch]",
                f"  %{lv}.c = icmp slt i64 {iv}, {hi}",
                f"  br i1 %{lv}.c, label %{lv}.body, label %{lv}.exit", f"{lv}.body:"]
        tail = [f"  br label %{lv}.latch", f"{lv}.latch:",
                f"  {iv}.next = add nuw nsw i64 {iv}, {step}",
                f"  br label %{lv}.head{self.m.loop_md(_trip_count(lo, hi, step))}",
                f"{lv}.exit:"]
        return head, tail

    # the kernel function
    def function(self, whole: bool = False) -> str:
        """The function's text. ``whole``: every call runs the outermost loop's whole extent,
        written as constants (the calls still pass ``0, extent``), so LLVM knows the trip
        count of a kernel it cannot see called."""
        kern = self.kern
        for i, v in enumerate(kern.loops):
            self.chain[v] = kern.loops[:i + 1]
            self.lines[v] = []
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
            val = self.value(st.value)
            idx = self.value(st.index)
            where = kern.loops[-1] if kern.loops else None
            masked = st.mask is not None
            if st.once:  # stored where its value is computed, once: no branch in the inner loops
                used = st.value.free | st.index.free
                where = max((v for v in kern.loops if v in used), default=None,
                            key=kern.loops.index)
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
                old = self._load(lines, self.tmp(), p, buf.dtype)
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
        params = ", ".join(f"ptr noalias {n}" for n in self.bufs.values())
        # "stackrealign": the frame aligned to its largest slot (64 bytes for a zmm spill):
        # else spill slots sat wherever the caller's 16-byte alignment put them, and a zmm
        # spill straddling two cache lines made some processes' kernels slower than others'
        return (f"define internal void @{kern.name}({params}{', ' if params else ''}"
                f"i64 %start, i64 %end) \"stackrealign\" {{\nentry:\n" + "\n".join(body)
                + "\n  ret void\n}\n")


class ModuleWriter:
    """Renders a whole :class:`Program` (see the module docstring)."""

    def __init__(self, prog: Program):
        from fungrad.lowering.cpu.llvm_ops import OpEmitter
        self.prog = prog
        self.ops = OpEmitter(self)
        self.math: set[tuple[str, str]] = set()   # (function, float dtype name)
        self.helpers: set[str] = set()  # llvm_math's helper symbols called (llvm_math.DIVIDE)
        self.externals: dict[str, str] = {}       # symbol -> declare line
        self.functions: list[str] = []  # compiled with LLVM's full pipeline
        self.glue: list[str] = []  # compiled without optimisation (see _cold_kernels)
        self.cold: set[int] = set()  # ids of the kernels among the glue
        # (text without digits, cold) -> [(function, text)]: see _define
        self.bodies: dict[tuple[str, bool], list[tuple[str, str]]] = {}
        self.trampolines: set[str] = set()
        self.n_loops = 0
        self.short_loops: set[int] = set()  # metadata ids of loops run fewer than SHORT_LOOP
        self.interleaved: set[int] = set()  # metadata ids of sum loops (INTERLEAVE_SUMS)
        self.serial_for = False  # @fg_serial_for added (parallel_for)
        self.large_libraries: set[str] = set()  # llvm_math's large-argument functions called

    def loop_md(self, trip: int | None = None, interleave: bool = False) -> str:
        """Loop metadata for a back edge: no unrolling. Fully unrolling a short inner loop
        (say 32 columns) made LLVM vectorise the outer loop with gathers and scatters, 20x
        slower; the vectoriser still interleaves the loops it vectorises. A loop known to run
        fewer than ``SHORT_LOOP`` times (``trip``) is not vectorised either: its vector body
        would run at most once beside a scalar remainder, two copies of the body (with any
        inlined exp or log) for LLVM to optimise and compile; the MLP step's ten-class
        softmax loops cost 17 ms of its ~150 ms module compile that way (measured)."""
        self.n_loops += 1
        if trip is not None and trip < SHORT_LOOP:
            self.short_loops.add(self.n_loops + 1)
        elif interleave:
            self.interleaved.add(self.n_loops + 1)
        return f", !llvm.loop !{self.n_loops + 1}"

    def need_math(self, fn: str, dtype: np.dtype) -> str:
        self.math.add((fn, dtype.name))
        return llvm_math.math_symbol(fn, dtype)

    def declare(self, symbol: str, line: str) -> None:
        self.externals[symbol] = line

    def render(self) -> list[cpu.Part]:
        """The program as one or two modules: kernels worth LLVM's full pipeline, and glue
        (the entry point, trampolines, small kernels) compiled without optimisation."""
        prog = self.prog
        self.cold = _cold_kernels(prog.steps)
        entry: list[str] = []
        lay = abi.layout()
        slots = [*prog.inputs, *(b for b, _ in prog.consts), *prog.outputs]
        ptr = {}
        for i, b in enumerate(slots):
            obj, data = f"%obj{i}", f"%buf{b.id}"
            entry.append(f"  %slot{i} = getelementptr inbounds i8, ptr %args, "
                         f"i64 {lay.tuple_items + 8 * i}")
            entry.append(f"  {obj} = load ptr, ptr %slot{i}")
            if b.kind == "input":
                entry.extend(self._input_pointer(i, obj, data, lay))
            else:
                entry.append(f"  %dp{i} = getelementptr inbounds i8, ptr {obj}, "
                             f"i64 {lay.array_data}")
                entry.append(f"  {data} = load ptr, ptr %dp{i}")
            ptr[b.id] = data
        if prog.temps:
            i = len(slots)
            entry.append(f"  %slot{i} = getelementptr inbounds i8, ptr %args, "
                         f"i64 {lay.tuple_items + 8 * i}")
            entry.append(f"  %scratchobj = load ptr, ptr %slot{i}")
            entry.append(f"  %sp = getelementptr inbounds i8, ptr %scratchobj, "
                         f"i64 {lay.array_data}")
            entry.append("  %scratch = load ptr, ptr %sp")
            for b in prog.temps:
                entry.append(f"  %buf{b.id} = getelementptr inbounds i8, ptr %scratch, "
                             f"i64 {b.index}")
                ptr[b.id] = f"%buf{b.id}"
        entry.extend(self.render_steps(prog.steps, ptr))
        # Straight-line glue (read the arguments, call the kernels) is not worth optimising;
        # entry functions that hold control flow's loops get the full pipeline
        hot_entry = any(isinstance(s, ENTRY_CODE_STEPS) for s in prog.steps)
        attrs = "" if hot_entry else f" {_GLUE}"
        head = (f"define i32 @{prog.name}(ptr noalias %args, i64 %nthreads){attrs} {{\nentry:\n"
                + "\n".join(entry) + "\n  ret i32 0\n}\n")
        (self.functions if hot_entry else self.glue).append(head)
        decls = "\n".join(sorted(self.externals.values()))
        novec = f"!{self.n_loops + 2}"  # the extra property of short loops
        inter = f"!{self.n_loops + 3}"  # ... and of sum loops

        def props(i: int) -> str:
            return ((", " + novec) * (i in self.short_loops)
                    + (", " + inter) * (i in self.interleaved))
        md = "\n".join(['!1 = !{!"llvm.loop.unroll.disable"}']
                       + [f"!{i} = distinct !{{!{i}, !1{props(i)}}}"
                          for i in range(2, self.n_loops + 2)]
                       + [f'{novec} = !{{!"llvm.loop.vectorize.enable", i1 false}}',
                          f'{inter} = !{{!"llvm.loop.interleave.count", i32 '
                          f'{INTERLEAVE_SUMS}}}'])
        if self.functions and not self.cold:
            # glue alone in its own module cost more than it saved (~3 ms: the chain, softmax)
            self.functions, self.glue = self.functions + self.glue, []
        modules = [(funcs, level) for funcs, level in ((self.functions, 3), (self.glue, 0))
                   if funcs]
        if len(modules) == 2:
            _link(self.functions, self.glue)
        parts = []
        for funcs, level in modules:
            text = "\n".join(funcs)
            # the math functions this module calls (a module without passes would compile
            # any other one it defined)
            used = [(f, d) for f, d in self.math
                    if f"@{llvm_math.math_symbol(f, np.dtype(d))}(" in text]
            helpers = sorted(h for h in self.helpers if f"@{h}(" in text)
            pre = ""
            if used or helpers:
                pre = llvm_math.prelude(sorted({d for _, d in used}),
                                        sorted({f for f, _ in used}),
                                        declare_intrinsics=False, helpers=helpers,
                                        shared_large=True)
                self.large_libraries.update(llvm_math.large_functions_declared(pre))
            ir = "\n".join(x for x in (decls, pre, text, md) if x)
            parts.append(cpu.Part(ir, level, passes=level > 0))
        return parts

    def render_steps(self, steps, ptr: dict[int, str]) -> list[str]:
        """Entry-function lines running ``steps`` in order; ``ptr`` maps a buffer id to the
        LLVM value holding its address (control-flow steps render their bodies with it, each
        body once, binding loop-carried buffers to phi values)."""
        lines: list[str] = []
        for step in steps:
            lines.extend(STEP_RENDERERS(self, step, ptr))
        return lines

    def _input_pointer(self, i: int, obj: str, data: str, lay) -> list[str]:
        """Data pointer of input ``i``: an ndarray's data, or a numpy scalar's inline value;
        non-contiguous or misaligned arrays make the entry return ``i + 1``."""
        self.declare("fg_ndarray_type", "@fg_ndarray_type = external global ptr")
        return [
            f"  %tp{i} = getelementptr inbounds i8, ptr {obj}, i64 {lay.object_type}",
            f"  %ty{i} = load ptr, ptr %tp{i}",
            f"  %nd{i} = load ptr, ptr @fg_ndarray_type",
            f"  %isarr{i} = icmp eq ptr %ty{i}, %nd{i}",
            f"  br i1 %isarr{i}, label %arr{i}, label %scal{i}",
            f"arr{i}:",
            f"  %fp{i} = getelementptr inbounds i8, ptr {obj}, i64 {lay.array_flags}",
            f"  %fl{i} = load i32, ptr %fp{i}",
            f"  %ok{i}.m = and i32 %fl{i}, {lay.required_flags}",
            f"  %ok{i} = icmp eq i32 %ok{i}.m, {lay.required_flags}",
            f"  br i1 %ok{i}, label %arrok{i}, label %bad{i}",
            f"bad{i}:",
            f"  ret i32 {i + 1}",
            f"arrok{i}:",
            f"  %dp{i} = getelementptr inbounds i8, ptr {obj}, i64 {lay.array_data}",
            f"  %ad{i} = load ptr, ptr %dp{i}",
            f"  br label %got{i}",
            f"scal{i}:",
            f"  %sd{i} = getelementptr inbounds i8, ptr {obj}, i64 {lay.scalar_data}",
            f"  br label %got{i}",
            f"got{i}:",
            f"  {data} = phi ptr [%ad{i}, %arrok{i}], [%sd{i}, %scal{i}]",
        ]

    def _kernel_call(self, kern: Kernel, ptr: dict[int, str]) -> list[str]:
        used = sorted({s.buffer.id for s in kern.stores} | {b.id for b in kern.reads()})
        names = {bid: f"%b{bid}" for bid in used}
        n = kern.loops[0].extent if kern.loops else 1
        cold = id(kern) in self.cold
        par = not cold and kern.parallel and n >= 2 and kern.cost() >= PARALLEL_COST
        text = _KernelWriter(self, kern, names).function(whole=not par)
        fn = self._define(kern.name, text, cold)
        args = ", ".join(f"ptr {ptr[bid]}" for bid in used)
        sep = ", " if args else ""
        # kernels are called ``noinline``: inlined, a kernel's body went through LLVM's
        # function simplification passes twice (~10% more LLVM time on the MLP step of
        # bench/first_call.py, no faster code)
        if not par:
            return [f"  call void @{fn}({args}{sep}i64 0, i64 {n}) noinline"]
        # large: split the outermost loop across threads; a trampoline unpacks the pointers
        m = len(used)
        if fn not in self.trampolines:
            self.trampolines.add(fn)
            loads = [f"  %p{i} = getelementptr inbounds ptr, ptr %ctx, i64 {i}\n"
                     f"  %a{i} = load ptr, ptr %p{i}" for i in range(m)]
            targs = ", ".join(f"ptr %a{i}" for i in range(m))
            self.glue.append(
                f"define internal void @{fn}.par(ptr %ctx, i64 %s, i64 %e) {_GLUE} {{\nentry:\n"
                + "\n".join(loads) + ("\n" if loads else "")
                + f"  call void @{fn}({targs}{', ' if targs else ''}i64 %s, i64 %e) noinline\n"
                "  ret void\n}\n")
        return self.parallel_for(f"{fn}.par", [ptr[bid] for bid in used], n, kern.name)

    def _define(self, name: str, text: str, cold: bool) -> str:
        """Adds kernel function ``text`` (of function ``name``) unless a kernel with the same
        body up to the names of its values is there (the MLP step updates two bias vectors with
        the same code); returns the name of the function to call. Only kernels whose texts
        agree without their digits are compared name by name."""
        text_ = text.replace(f"@{name}(", "@(", 1)
        twins = self.bodies.setdefault((text_.translate(_NO_DIGITS), cold), [])
        for other, other_text in twins:
            if self._canonical(other_text) == self._canonical(text_):
                return other
        twins.append((name, text_))
        (self.glue if cold else self.functions).append(text)
        return name

    def _canonical(self, text: str) -> str:
        """``text`` with its values and labels renamed in order of appearance and its loop
        metadata reduced to what it says (short loop or not)."""
        local: dict[str, str] = {}
        def kind(m) -> str:
            i = int(m.group(1))
            return "!S" if i in self.short_loops else "!I" if i in self.interleaved else "!L"
        text = _LOOP_MD.sub(kind, text)
        return _LOCAL.sub(lambda m: local.setdefault(m.group(0).lstrip("%"), f"%{len(local)}"),
                          text)

    def parallel_for(self, fn: str, pointers: list[str], n: int, tag: str) -> list[str]:
        """Entry lines running ``void @fn(ptr ctx, i64 start, i64 end)`` over ``[0, n)``, ``ctx``
        being ``pointers`` stored on the stack: on the native thread pool (runtime.py) when the
        call has ``%nthreads > 1`` and the pool is compiled (:func:`enable_thread_pool`), else as
        one call ``fn(ctx, 0, n)`` on this thread. The callee is chosen at run time, so the pool
        is compiled only by processes that use threads; ``@fn`` is only ever called through a
        pointer, so LLVM keeps one copy of its body."""
        self.declare("fg_parallel_for_fn", f"@{POOL_SYMBOL} = external global ptr")
        if not self.serial_for:
            self.serial_for = True
            self.glue.append(_SERIAL_FOR)
        lines = [f"  %{tag}.ss = call ptr @llvm.stacksave.p0()",
                 f"  %{tag}.ctx = alloca ptr, i64 {max(len(pointers), 1)}"]
        for i, p in enumerate(pointers):
            lines += [f"  %{tag}.c{i} = getelementptr inbounds ptr, ptr %{tag}.ctx, i64 {i}",
                      f"  store ptr {p}, ptr %{tag}.c{i}"]
        return lines + [
            f"  %{tag}.pool = load ptr, ptr @{POOL_SYMBOL}",
            f"  %{tag}.nopool = icmp eq ptr %{tag}.pool, null",
            f"  %{tag}.one = icmp sle i64 %nthreads, 1",
            f"  %{tag}.serial = or i1 %{tag}.nopool, %{tag}.one",
            f"  %{tag}.for = select i1 %{tag}.serial, ptr @fg_serial_for, ptr %{tag}.pool",
            f"  call void %{tag}.for(ptr @{fn}, ptr %{tag}.ctx, i64 {n}, i64 %nthreads)",
            f"  call void @llvm.stackrestore.p0(ptr %{tag}.ss)"]


STEP_RENDERERS = StepRenderers("LLVM", {
    Kernel: lambda mw, step, ptr: mw._kernel_call(step, ptr),
    Gemm: lambda mw, step, ptr: mw.ops.gemm(step, ptr),
    CondStep: control_flow.render_cond,
    WhileStep: control_flow.render_while,
    ScanStep: control_flow.render_scan,
    SortStep: sort.render_sort,
    HostCallStep: host_call.render_host_call,
})
"""How each step kind becomes entry-function lines (``ModuleWriter.render_steps``)."""

#: steps whose code (loops, branches) runs inside the entry function, which then gets the full
#: pipeline; the other steps only call functions from it
ENTRY_CODE_STEPS = (CondStep, WhileStep, ScanStep)

POOL_SYMBOL = "fg_parallel_for_fn"
"""Generated code's pointer to the native pool's ``fg_parallel_for``; null until
:func:`enable_thread_pool` compiled the pool, and then always called with ``%nthreads > 1``."""

# ``noinline``: inlined, the indirect call would become direct calls, each inlining its kernel
# a second time (twice the kernel code to optimise and compile)
_SERIAL_FOR = ("define internal void @fg_serial_for(ptr %fn, ptr %ctx, i64 %n, i64 %nthreads) "
               f"{_GLUE} {{\nentry:\n  call void %fn(ptr %ctx, i64 0, i64 %n)\n  ret void\n}}\n")

_pool_cell = ctypes.c_void_p(0)
_pool_cell_registered = False


def register_pool_symbol() -> None:
    """Make ``@fg_parallel_for_fn`` resolvable (a cell holding null until the pool exists); every
    module that :meth:`ModuleWriter.parallel_for` wrote needs it. Idempotent, thread safe."""
    global _pool_cell_registered
    if not _pool_cell_registered:
        with cpu.llvm_lock:
            if not _pool_cell_registered:
                cpu.host()  # initialises LLVM
                llvm_capi.add_symbol(POOL_SYMBOL, ctypes.addressof(_pool_cell))
                _pool_cell_registered = True


def enable_thread_pool() -> None:
    """Compile the native thread pool (once per process: runtime.py) and point generated code's
    ``@fg_parallel_for_fn`` at it. Executables call this when they may use more than one thread:
    a process that never does (one core, ``FUNGRAD_NUM_THREADS=1``) never compiles the pool."""
    if _pool_cell.value:
        return
    from fungrad.lowering.cpu import runtime

    register_pool_symbol()
    runtime.ensure_registered()
    with cpu.llvm_lock:
        _pool_cell.value = llvm_capi.address_of_symbol("fg_parallel_for")


#: a kernel estimated at this many operations (~20-50 us on one core) is split across threads;
#: a fork-join of the native pool costs ~0.3 us with awake workers, ~3 us waking them
PARALLEL_COST = 300_000


#: kernels estimated (``Kernel.cost``) at most this many operations are compiled without
#: optimisation, as glue: their code runs ~3-10x slower, under a microsecond here, and LLVM's
#: full pipeline costs ~3 ms per loop (measured: 20 small loop functions took 67 ms at O3,
#: 3 ms without passes and with FastISel)
COLD_COST = 1024
#: ... and so are those under this share of the program's estimated work, a product counting
#: one operation per ``GEMM_FLOPS_PER_OP`` flops (the MLP step's loss, its gradient and the
#: bias updates: ~55 ms less compile time, ~1% slower steps)
COLD_SHARE = 1 / 200
GEMM_FLOPS_PER_OP = 8


def _cold_kernels(steps) -> set[int]:
    """Ids of the top-level kernels of ``steps`` to compile without optimisation (see
    COLD_COST). Kernels inside control flow may run many times: they are always optimised."""
    costs = {id(s): s.cost() for s in steps if isinstance(s, Kernel)}
    total = sum(costs.values()) + sum(2 * s.m * s.n * s.k * s.batch // GEMM_FLOPS_PER_OP
                                      for s in steps if isinstance(s, Gemm))
    limit = max(COLD_COST, total * COLD_SHARE)
    return {i for i, c in costs.items() if c <= limit}


def _link(a: list[str], b: list[str]) -> None:
    """Let two modules' function lists call each other: a function one module calls and the
    other defines loses its ``internal`` linkage there and is declared where it is called."""
    for defs, users in ((a, b), (b, a)):
        called = set(_GLOBAL.findall("\n".join(users)))
        for i, f in enumerate(defs):
            for m in _HEADER.finditer(f):
                ret, fn, params = m.groups()
                if fn in called:
                    defs[i] = defs[i].replace(f"define internal {ret} @{fn}(",
                                              f"define {ret} @{fn}(", 1)
                    params = re.sub(r"\s*%[-\w.$]+", "", params)
                    users.insert(0, f"declare {ret} @{fn}({params})\n")


_GLOBAL = re.compile(r"@([-\w.$]+)")
_HEADER = re.compile(r"^define (?:internal )?(\S+) @([-\w.$]+)\(([^)]*)\)", re.M)
_LOCAL = re.compile(r"%[-\w.$]+|^[-\w.$]+(?=:)", re.M)  # local names and label definitions
_LOOP_MD = re.compile(r"!llvm\.loop !(\d+)")
_NO_DIGITS = str.maketrans("", "", "0123456789")


def render(prog: Program) -> list[cpu.Part]:
    """The LLVM modules of ``prog`` (see :meth:`ModuleWriter.render`); the symbols they need are
    registered: :func:`register_pool_symbol`, ``abi.layout``, the matmul library, the
    large-argument library of sin/cos/tan (llvm_math.ensure_large_library)."""
    writer = ModuleWriter(prog)
    parts = writer.render()
    if writer.serial_for:
        register_pool_symbol()
    if matmul.SYMBOL in writer.externals:
        matmul.ensure_library()
    if writer.large_libraries:
        llvm_math.ensure_large_library(writer.large_libraries)
    return parts


__all__ = ["POOL_SYMBOL", "enable_thread_pool", "register_pool_symbol", "render"]
