"""The fusion planner: a jaxpr becomes a :class:`Program` of kernels over buffers.

This is the only module that decides fusion; it is backend-neutral (the LLVM renderer and the
WGSL renderer both consume a :class:`Program`).

How it works. Each equation's lowering rule turns lazy input tensors into lazy output tensors
(``kernel.py``), so a chain of elementwise, broadcast, reshape, transpose, slice and reduction
rules composes into one expression per output element without computing anything. A tensor is
*stored* (materialised in a buffer) only when it must be:

* it is a program output;
* a rule needs it in memory (a matmul through BLAS, a sort, a scatter, a loop carry);
* inlining it would recompute a reduction: a reduction evaluated inside loops it does not depend
  on (``s[i] * s[j]`` with ``s`` a row sum), or at several indices of one kernel
  (``s[1:] + s[:-1]``), is stored by an earlier kernel instead.

Stored tensors waiting for a kernel are grouped: consecutive ones with the same shape that do
not read each other become one loop nest with several stores (multi-output fusion), so row
softmax (max, sum of exp, divide) is one kernel. The renderer computes every node of a kernel's
expressions at the outermost loop where its indices are defined, which is what makes a row's
maximum computed once per row.

Temporaries get offsets in one scratch area by liveness (first fit): a buffer's bytes are reused
once its last reader has run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fungrad import core
from fungrad.lowering import kernel as K
from fungrad.lowering.kernel import Buffer, Ctx, Expr, Tensor, Var


@dataclass
class Store:
    """``buffer[index] = value`` (or ``buffer[index] = combine(buffer[index], value)``),
    skipped where ``mask`` (a bool expression) is false."""
    buffer: Buffer
    index: Expr
    value: Expr
    combine: str | None = None
    mask: Expr | None = None


@dataclass
class Kernel:
    """One loop nest: ``for loops: stores``. ``parallel``: iterations of the outermost loop are
    independent, so it may be split across threads."""
    name: str
    loops: tuple[Var, ...]
    stores: list[Store]
    parallel: bool = True
    origins: tuple[str, ...] = ()
    _reads: tuple = field(default=((), frozenset()), repr=False, compare=False)

    def reads(self) -> set[Buffer]:
        # Remembered for the stores it was computed from (the planner asks again and again,
        # and walking the expressions was its largest cost); stores may still be replaced.
        parts = tuple(x for s in self.stores
                      for x in (s.value, s.index, s.mask, s.combine, s.buffer))
        seen, reads = self._reads
        if len(seen) != len(parts) or any(a is not b for a, b in zip(seen, parts)):
            exprs = [e for s in self.stores for e in (s.value, s.index, s.mask) if e is not None]
            reads = frozenset(_loaded_buffers(exprs) | {s.buffer for s in self.stores
                                                        if s.combine})
            self._reads = (parts, reads)
        return set(reads)

    def writes(self) -> set[Buffer]:
        return {s.buffer for s in self.stores}

    def cost(self) -> int:
        """Estimated operation count of one run: every distinct node weighs its op's cost (a
        transcendental ~20 adds) times how often it runs, which is once per iteration of the
        kernel loops out to the innermost one it depends on (renderers hoist it out of the
        others) and of the reduction variables it depends on. Renderers use it to decide whether
        threads pay for themselves and which kernels are worth a full optimising compile."""
        pos = {v: i for i, v in enumerate(self.loops)}
        runs = [1]  # runs[i]: iterations of the i outermost kernel loops
        for v in self.loops:
            runs.append(runs[-1] * v.extent)
        total, seen = runs[-1] * len(self.stores), set()
        stack = [e for s in self.stores for e in (s.value, s.index, s.mask) if e is not None]
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            depth = max((pos[v] + 1 for v in e.free if v in pos), default=0)
            bound = math.prod(v.extent for v in e.free if v not in pos)
            total += _OP_COST.get(e.op, 1) * runs[depth] * bound
            stack.extend(e.args)
        return total


_OP_COST = dict.fromkeys(K.MATH_UNARY, 20) | {"pow": 40, "atan2": 30, "div": 4, "rem": 6,
                                               "sqrt": 4, "rsqrt": 5, "const": 0, "idx": 0}


@dataclass
class Gemm:
    """``c[b] = alpha * a[b] @ b[b] + beta * c0[b]`` for row-major matrices (``trans_a``: a
    holds A^T), ``batch`` matrices one after the other in each buffer; ``c0`` None means c.
    Lowering rules make ``alpha = 1, beta = 0``; the planner folds a scaled update of the
    product (``w - lr * (a @ b)``) into ``alpha``, ``beta = 1`` and ``c0 = w``
    (:func:`_fuse_gemm_updates`). The LLVM renderer runs small float32 products through its
    own kernel (``matmul.py``) and the others through BLAS."""
    name: str
    a: Buffer
    b: Buffer
    c: Buffer
    m: int
    n: int
    k: int
    trans_a: bool
    trans_b: bool
    batch: int = 1
    alpha: float = 1.0
    beta: float = 0.0
    c0: Buffer | None = None

    def reads(self) -> set[Buffer]:
        return {self.a, self.b} | ({self.c0 or self.c} if self.beta else set())

    def writes(self) -> set[Buffer]:
        return {self.c}


@dataclass
class Program:
    """What a renderer turns into code: buffers and an ordered list of steps."""
    name: str
    inputs: list[Buffer]
    outputs: list[Buffer]
    consts: list[tuple[Buffer, np.ndarray]]
    temps: list[Buffer]
    steps: list = field(default_factory=list)
    scratch_bytes: int = 0
    ctx: Ctx | None = None  # the expression context (renderers build substituted nodes)

    def describe(self) -> str:
        """The fusion plan as text (for ``jit(f).lower(...).as_text()``)."""
        lines = [f"fusion plan of {self.name}: {len(self.steps)} steps, "
                 f"{self.scratch_bytes} bytes of temporaries"]
        for s in self.steps:
            if isinstance(s, Kernel):
                shape = [v.extent for v in s.loops]
                outs = ", ".join(st.buffer.name for st in s.stores)
                ins = ", ".join(sorted(b.name for b in s.reads()))
                par = " parallel" if s.parallel else ""
                lines.append(f"  kernel {s.name}{par} loops={shape} writes {outs} reads [{ins}]"
                             f" fuses [{', '.join(s.origins)}]")
            else:
                lines.append(f"  {type(s).__name__.lower()} {s.name}: writes "
                             f"{', '.join(sorted(b.name for b in s.writes()))} reads "
                             f"{', '.join(sorted(b.name for b in s.reads()))}")
                if hasattr(s, "describe_body"):  # control flow: its sub-programs, indented
                    lines.extend(f"    {line}" for line in s.describe_body())
        return "\n".join(lines)


def _walk(roots):
    seen, stack, out = set(), list(roots), []
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        out.append(e)
        stack.extend(e.args)
    return out


def _loaded_buffers(roots) -> set[Buffer]:
    return {e.attr for e in _walk(roots) if e.op == "load"}


class LoweringError(Exception):
    """A jaxpr cannot be lowered: names the primitive and the reason."""


class Planner:
    """Builds a :class:`Program` from a closed jaxpr (see the module docstring)."""

    backend = "cpu"  # rules that choose a layout by backend read this (GpuPlanner: "gpu")

    def __init__(self, name: str, parent: Planner | None = None):
        self.name = name
        if parent is None:
            self.ctx = Ctx(self)
            self.buffers: list[Buffer] = []
            self.consts: list[tuple[Buffer, np.ndarray]] = []
            self._n = {"kernel": 0}
        else:  # a sub-program (a control-flow body): one program's nodes, buffers and names
            self.ctx, self.buffers, self.consts, self._n = (
                parent.ctx, parent.buffers, parent.consts, parent._n)
        self.steps: list = []
        self.pending: list[Tensor] = []
        self.origins: list[str] = []  # primitives lowered since the last flush
        self.eqn: core.JaxprEqn | None = None  # the equation whose rule is running
        self._readers: dict = {}  # var -> the equations reading it (None: a jaxpr output)

    # buffers and tensors
    def new_buffer(self, shape, dtype, kind: str, name: str | None = None) -> Buffer:
        b = Buffer(len(self.buffers), tuple(shape), np.dtype(dtype), kind,
                   name or f"{kind[0]}{len(self.buffers)}", self.ctx)
        self.buffers.append(b)
        return b

    def buffer_tensor(self, buf: Buffer, origin: str) -> Tensor:
        """The tensor reading ``buf``."""
        ctx = self.ctx
        t = Tensor(buf.shape, buf.dtype,
                   lambda idx: ctx.load(buf, ctx.flat_index(idx, buf.shape)), origin)
        t.buffer = buf
        t.view = (buf, tuple(range(len(buf.shape))))
        return t

    def add_const(self, value, aval) -> Buffer:
        """A buffer holding the constant ``value`` (passed to the entry point with the
        program's other constants)."""
        i = len(self.consts)
        b = self.new_buffer(aval.shape, aval.dtype, "const", f"const{i}")
        b.index = i
        self.consts.append((b, np.ascontiguousarray(np.asarray(value, dtype=aval.dtype))))
        return b

    def lower_jaxpr(self, closed: core.ClosedJaxpr, args: list[Tensor]) -> list[Tensor]:
        """Apply the lowering rules of ``closed``'s equations to the tensors ``args``; returns
        the output tensors. Its consts become const buffers. While it runs, rules see this
        planner as ``ctx.planner`` (a sub-program's steps go to the sub-planner)."""
        jaxpr = closed.jaxpr
        env: dict = dict(zip(jaxpr.invars, args))
        for v, c in zip(jaxpr.constvars, closed.consts):
            b = self.add_const(c, v.aval)
            env[v] = self.buffer_tensor(b, b.name)

        def read(x):
            if isinstance(x, core.Literal):
                value, dtype = x.val, x.aval.dtype
                return K.from_fn(x.aval.shape, dtype, lambda idx: self.ctx.const(value, dtype),
                                 "literal")
            return env[x]

        readers: dict = {}
        for eqn in jaxpr.eqns:
            for v in eqn.invars:
                if not isinstance(v, core.Literal):
                    readers.setdefault(v, []).append(eqn)
        for v in jaxpr.outvars:
            if not isinstance(v, core.Literal):
                readers.setdefault(v, []).append(None)
        outer, self.ctx.planner = self.ctx.planner, self
        saved = self.eqn, self._readers
        self._readers = readers
        try:
            for eqn in jaxpr.eqns:
                rule = K.lowering_rules.get(eqn.primitive)
                if rule is None:
                    raise LoweringError(f"jit: the primitive {eqn.primitive.name} has no "
                                        f"lowering rule for the CPU compiler")
                self.eqn = eqn
                outs = rule(self.ctx, *map(read, eqn.invars), **eqn.params)
                if not eqn.primitive.multiple_results:
                    outs = [outs]
                for v, t in zip(eqn.outvars, outs):
                    if t.shape != v.aval.shape or t.dtype != v.aval.dtype:
                        raise LoweringError(f"lowering rule of {eqn.primitive.name} produced "
                                            f"{t.dtype.name}{list(t.shape)}, expected "
                                            f"{v.aval.str_short()}")
                    if not t.origin or t.origin in ("literal",):
                        t.origin = eqn.primitive.name
                    env[v] = t
        finally:
            self.ctx.planner = outer
            self.eqn, self._readers = saved
        return [read(v) for v in jaxpr.outvars]

    def read_permutation(self) -> tuple[int, ...] | None:
        """The permutation every reader of the running equation's (single) output applies to
        it, when all of them are ``transpose`` with the same ``permutation`` (and the output is
        no program output); else None. A rule that can lay its result out in that order (a
        matmul through BLAS computes ``C^T = B^T A^T`` as cheaply as ``C``) spares the readers
        strided loads: the SGD update of a weight reads its gradient, which the transpose rule
        of ``x @ w`` produces as ``transpose(dot_general(g, x))``."""
        eqn = self.eqn
        if eqn is None or len(eqn.outvars) != 1:
            return None
        readers = self._readers.get(eqn.outvars[0], [])
        perms = {r.params["permutation"] if r is not None and r.primitive.name == "transpose"
                 else None for r in readers}
        if len(perms) != 1:
            return None
        perm = perms.pop()
        return None if perm is None else tuple(perm)

    def materialize(self, t: Tensor) -> Tensor:
        if t.buffer is None:
            t.buffer = self.new_buffer(t.shape, t.dtype, "temp")
            self.pending.append(t)
            if t.view is None:  # once stored, transposes/reshapes of t are views of it
                t.view = (t.buffer, tuple(range(len(t.shape))))
        return t

    def add_kernel(self, prefix: str, shape, stores_at, *, parallel: bool = True,
                   origin: str = "") -> None:
        """Append a hand-built loop nest over ``shape`` whose stores are
        ``stores_at(index_exprs)`` (a list of :class:`Store`): for rules that write memory
        themselves (scatter, column reductions). Pending tensors are stored first; reductions
        the nest would recompute are stored by earlier kernels."""
        self.flush()
        self._n["kernel"] += 1  # program-wide count: names stay unique in sub-programs
        name = f"{prefix}{self._n['kernel']}"
        while True:
            loops = tuple(Var(n) for n in shape)  # fresh variables: no stale memo entries
            try:
                idx = tuple(self.ctx.index(v) for v in loops)
                stores = self._guarded(lambda: stores_at(idx))  # noqa: B023 -- called here
            except K.StoreFirst as first:
                self.materialize(first.tensor)
                self.flush()
                continue
            kern = Kernel(name, loops, stores, parallel, (origin or prefix,))
            recomputed = self._recomputed_reductions(kern)
            if not recomputed:
                break
            for t in recomputed:
                self.materialize(t)
            self.flush()
        if 0 in shape:  # no iteration: nothing to write (an index into an empty array is 0)
            for b in kern.writes():
                b.ready = True
            return
        self.add_step(kern)

    def add_step(self, step) -> None:
        """Append a non-kernel step (its inputs are stored first)."""
        self.flush()
        self.steps.append(step)
        for b in step.writes():
            b.ready = True

    # kernels
    def flush(self) -> None:
        """Schedule every pending stored tensor into kernels."""
        while self.pending:
            group = [self.pending.pop(0)]
            while (self.pending and self.pending[0].shape == group[0].shape
                   and not self._reads_any(self.pending[0], group)):
                group.append(self.pending.pop(0))
            self._schedule(group)
        self.origins = []

    def _reads_any(self, t: Tensor, group) -> bool:
        # conservative: would t's element read a buffer one of the group writes?
        written = {g.buffer for g in group}
        probe = [self.ctx.index(Var(n)) for n in t.shape]
        return bool(_loaded_buffers([t.at(probe)]) & written)

    def _schedule(self, group: list[Tensor]) -> None:
        if 0 in group[0].shape:  # nothing to store: no kernel, its elements are never built
            for t in group:
                t.buffer.ready = True
            return
        while True:
            try:
                kern = self._guarded(lambda: self._build(group))
            except K.StoreFirst as first:
                self._store_first(first.tensor)
                continue
            bad = self._recomputed_reductions(kern)
            if not bad:
                break
            for t in bad:  # store those reductions first, then rebuild this kernel
                if t.buffer is None:  # (an earlier one's kernel may have read and stored it)
                    self._store_first(t)
        self.steps.append(kern)
        for t in group:
            t.buffer.ready = True

    def _store_first(self, t: Tensor) -> None:
        """Store ``t`` (not stored, or pending) by a kernel of its own, scheduled now."""
        if t.buffer is None:
            self.materialize(t)
        self.pending.remove(t)
        self._schedule([t])

    def _guarded(self, build):
        """``build()`` (which builds a kernel's expressions), raising :class:`StoreFirst` for a
        reduction tensor that the kernel asks for at a second index and that can still be
        stored first (see ``kernel.StoreFirst``): a reduction is computed once per element."""
        asked: dict = {}

        def note(t: Tensor, idx: tuple) -> None:
            first = asked.setdefault(t, idx)
            if (first is not idx and any(a is not b for a, b in zip(first, idx))
                    and (t.buffer is None or any(p is t for p in self.pending))):
                raise K.StoreFirst(t)
        saved, self.ctx.on_reduce = self.ctx.on_reduce, note
        try:
            return build()
        finally:
            self.ctx.on_reduce = saved

    def _build(self, group: list[Tensor]) -> Kernel:
        shape = group[0].shape
        loops = tuple(Var(n) for n in shape)
        idx = tuple(self.ctx.index(v) for v in loops)
        flat = self.ctx.flat_index(idx, shape)
        stores = []
        for t in group:
            t.memo.pop(idx, None)
            K._building.append((t, idx))
            try:
                value = t.fn(idx)  # the element itself (t.at would read t's own buffer)
            finally:
                K._building.pop()
            stores.append(Store(t.buffer, flat, value))
        self._n["kernel"] += 1
        origins = tuple(dict.fromkeys(t.origin for t in group))
        return Kernel(f"k{self._n['kernel']}", loops, stores, True, origins)

    def _recomputed_reductions(self, kern: Kernel) -> list[Tensor]:
        """Reductions the renderer would evaluate inside loops they do not depend on."""
        chain = {v: kern.loops[:i + 1] for i, v in enumerate(kern.loops)}
        bad = []
        for e in _walk([s.value for s in kern.stores]):
            if e.op != "reduce":
                continue
            outer = _placement_chain(e, chain)
            if not set(outer) <= e.free:
                t = self.ctx.reduce_origin.get(e)
                if t is not None and t.buffer is None and t not in bad:
                    bad.append(t)
        return bad


def _placement_chain(e: Expr, chain: dict) -> tuple[Var, ...]:
    """The loops enclosing the point where reduce node ``e`` is evaluated; records the chains
    of its bound variables in ``chain``."""
    deepest: tuple[Var, ...] = ()
    for v in e.free:
        c = chain.get(v)
        if c is not None and len(c) > len(deepest):
            deepest = c
    for i, v in enumerate(e.attr.vars):
        chain.setdefault(v, deepest + e.attr.vars[:i + 1])
    return deepest


def plan(closed: core.ClosedJaxpr, name: str = "main", planner: type | None = None) -> Program:
    """Lower ``closed`` (already optimised) to a :class:`Program`; ``planner`` is a Planner
    subclass with a backend's placement policy (the GPU's stores more reductions)."""
    p = (planner or Planner)(name)
    jaxpr = closed.jaxpr
    inputs = []
    for i, v in enumerate(jaxpr.invars):
        b = p.new_buffer(v.aval.shape, v.aval.dtype, "input", f"in{i}")
        b.index = i
        inputs.append(b)
    results = p.lower_jaxpr(closed, [p.buffer_tensor(b, b.name) for b in inputs])
    outputs = []
    claimed = set()
    for i, t in enumerate(results):
        if t.buffer is not None and t.buffer.kind == "temp" and id(t.buffer) not in claimed:
            b = t.buffer  # computed into a temporary: make that temporary the output
            b.kind, b.name = "output", f"out{i}"
        else:
            b = p.new_buffer(t.shape, t.dtype, "output", f"out{i}")
            src = t
            t = K.from_fn(t.shape, t.dtype, src.at, src.origin)
            t.buffer = b
            p.pending.append(t)
        claimed.add(id(b))
        b.index = i
        outputs.append(b)
    p.flush()
    _fuse_gemm_updates(p.steps)
    _merge_column_reductions(p.steps, p.ctx)
    used = {b.id for step in p.steps for b in (*step.reads(), *step.writes())}
    temps = [b for b in p.buffers if b.kind == "temp" and b.id in used]
    prog = Program(name, inputs, outputs, p.consts, temps, p.steps, ctx=p.ctx)
    prog.scratch_bytes = _assign_offsets(prog)
    return prog


def _assign_offsets(prog: Program) -> int:
    """First-fit byte offsets (``Buffer.index``) for temporaries by liveness, in 64-byte
    aligned slots; returns the scratch size in bytes."""
    offsets, top = liveness_offsets(prog, lambda b: max(64, -(-b.nbytes // 64) * 64))
    for b in prog.temps:
        b.index = offsets[b.id]
    return top


def liveness_offsets(prog: Program, slot_size) -> tuple[dict[int, int], int]:
    """First-fit offsets of ``prog``'s temporaries, a slot of ``slot_size(buffer)`` units
    each, reused once the buffer's last reader has run: ``({buffer id: offset}, size)``.
    (The GPU sizes slots in 32-bit words, the CPU in bytes.)"""
    first, last = {}, {}
    for i, step in enumerate(prog.steps):
        for b in step.writes():
            first.setdefault(b.id, i)
            last[b.id] = max(last.get(b.id, i), i)
        for b in step.reads():
            last[b.id] = i
    live: list[tuple[int, int, int]] = []  # (offset, size, last step)
    top = 0
    offsets: dict[int, int] = {}
    for b in sorted(prog.temps, key=lambda b: first.get(b.id, 0)):
        start = first.get(b.id, 0)
        live = [x for x in live if x[2] >= start]
        size = slot_size(b)
        offset = 0
        for off, sz, _ in sorted(live):
            if off - offset >= size:
                break
            offset = max(offset, off + sz)
        offsets[b.id] = offset
        live.append((offset, size, last.get(b.id, start)))
        top = max(top, offset + size)
    return offsets, top


# -- peephole passes over a finished step list -------------------------------------------------

def _between(steps, lo: int, hi: int):
    """Buffers read and written by ``steps[lo:hi]``."""
    reads, writes = set(), set()
    for step in steps[lo:hi]:
        reads |= step.reads()
        writes |= step.writes()
    return reads, writes


def _scaled_update(value: Expr, index: Expr, product: Buffer):
    """``(w, alpha)`` when ``value`` is ``w[index] + alpha * product[index]`` (or
    ``w - alpha * product``, either operand order), with the same index everywhere; else None."""
    def load_at(e):
        return e.attr if e.op == "load" and e.args[0] is index else None

    def scaled(e):  # alpha * product[index]
        if load_at(e) is product:
            return 1.0
        if e.op == "mul":
            for c, x in (e.args, e.args[::-1]):
                if c.is_const and load_at(x) is product:
                    return float(c.attr)
        return None
    if value.op not in ("add", "sub"):
        return None
    x, y = value.args
    for w_e, p_e, sign in ((x, y, 1.0), (y, x, 1.0)) if value.op == "add" else ((x, y, -1.0),):
        w, alpha = load_at(w_e), scaled(p_e)
        if w is not None and w is not product and alpha is not None:
            return w, sign * alpha
    return None


def _fuse_gemm_updates(steps: list) -> None:
    """Fold ``out = w + alpha * c`` into the product that computes ``c``.

    An SGD step reads each weight gradient once, in ``w - lr * grad``: a kernel reading ``w``
    and the product and writing ``out``. Instead the product writes ``out`` itself, as
    ``alpha * a @ b + 1 * w``: two passes over the weight-sized arrays fewer (the own kernel's
    epilogue reads ``w``; through BLAS, ``w`` is copied into ``out`` first)."""
    i = 0
    while i < len(steps):
        g = steps[i]
        i += 1
        if not (isinstance(g, Gemm) and g.beta == 0 and g.alpha == 1 and g.c.kind == "temp"):
            continue
        readers = [j for j in range(i, len(steps)) if g.c in steps[j].reads()]
        if len(readers) != 1:
            continue
        j = readers[0]
        kern = steps[j]
        if not (isinstance(kern, Kernel) and len(kern.stores) == 1):
            continue
        st = kern.stores[0]
        out = st.buffer
        if (st.combine is not None or st.mask is not None or out.shape != g.c.shape
                or out.dtype != g.c.dtype or tuple(v.extent for v in kern.loops) != out.shape
                or g.c in kern.writes() or out in (g.a, g.b)):
            continue
        found = _scaled_update(st.value, st.index, g.c)
        if found is None:
            continue
        w, alpha = found
        reads, writes = _between(steps, i, j)  # the steps after the call, before the update
        if w in writes or g.c is w or out in reads | writes or w in g.writes():
            continue
        g.c, g.c0, g.alpha, g.beta = out, w, alpha, 1.0
        g.name = f"{g.name} + update"
        del steps[j]


def _merge_column_reductions(steps: list, ctx: Ctx) -> None:
    """Move a column reduction (``acc[j] += x[i, j]``) into the next kernel over the same loops
    that stores ``x`` itself (a bias gradient and the activation gradient a matmul needs): x is
    then computed once, in one pass."""
    from fungrad.lowering.kernel import substitute
    i = 0
    while i < len(steps):
        red = steps[i]
        i += 1
        if not (isinstance(red, Kernel) and red.stores and red.loops
                and all(s.combine is not None and s.mask is None for s in red.stores)):
            continue
        extents = tuple(v.extent for v in red.loops)
        accs = red.writes()
        for j in range(i, len(steps)):
            kern = steps[j]
            reads, writes = _between(steps, i, j)
            if (accs & (reads | writes)) or (red.reads() & writes):
                break
            if not (isinstance(kern, Kernel) and tuple(v.extent for v in kern.loops) == extents):
                continue
            if accs & (kern.reads() | kern.writes()) or red.reads() & kern.writes() - accs:
                break
            moved = []
            for s in red.stores:
                memo: dict = {}
                value, index = s.value, s.index
                for a, b in zip(red.loops, kern.loops):
                    value = substitute(ctx, value, a, ctx.index(b), memo)
                    index = substitute(ctx, index, a, ctx.index(b), memo)
                    memo = {}
                moved.append(Store(s.buffer, index, value, s.combine))
            stored = {id(s.value) for s in kern.stores if s.combine is None and s.mask is None}
            if not all(id(s.value) in stored for s in moved):
                continue
            kern.stores.extend(moved)
            kern.parallel = kern.parallel and red.parallel
            kern.origins = tuple(dict.fromkeys((*kern.origins, *red.origins)))
            del steps[i - 1]
            i -= 1
            break
