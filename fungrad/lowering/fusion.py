"""The fusion planner: a jaxpr becomes a :class:`Program` of kernels over buffers.

This is the only module that decides fusion; it is backend-neutral (the LLVM renderer and the
WGSL renderer both consume a :class:`Program`). What differs between backends -- whether a
matrix product is worth a :class:`Gemm` step, which reduction layouts run well, whether float64
exists -- each backend states once in a :class:`Policy`; the planner carries it
(``planner.policy``) and the lowering rules in ``fungrad/lax`` ask it, never a backend's name.

How it works. Each equation's lowering rule turns lazy input tensors into lazy output tensors
(``kernel.py``), so a chain of elementwise, broadcast, reshape, transpose, slice and reduction
rules composes into one expression per output element without computing anything. A tensor is
*stored* (materialised in a buffer) only when it must be:

* it is a program output;
* a rule needs it in memory (a matmul through BLAS, a sort, a scatter, a loop carry);
* inlining it would recompute a reduction: a reduction evaluated inside loops it does not depend
  on (``s[i] * s[j]`` with ``s`` a row sum), or at several indices of one kernel
  (``s[1:] + s[:-1]``), is stored by an earlier kernel instead;
* any tensor one kernel reads at several indices, once recomputing its element at each passes
  :data:`RECOMPUTE_BOUND` (a stencil of nine ``tanh(x)`` reads; each level of the log-depth
  chain in a cumulative product's derivative, read at ``i`` and ``i - 2**k``, whose inlined
  expression doubled per level) -- but not for reads that differ only by a reduction's
  variable (a row read elementwise and inside its own sum);
* it is a float sum or product that two kernels would compute (each might round it its own
  way): the first stores it, the others load it (:meth:`Planner._share`).

Stored tensors waiting for a kernel are grouped: the first with every later one of its shape
that reads neither the group nor the tensors of other shapes queued between them becomes one
loop nest with several stores (multi-output fusion), so row softmax (max, sum of exp, divide)
is one kernel, and so is an Adam update of one weight (new weight, first and second moment:
outputs listed apart, all weights first). The renderer computes every node of a kernel's
expressions at the outermost loop where its indices are defined, which is what makes a row's
maximum computed once per row.

Temporaries get offsets in one scratch area by liveness (first fit): a buffer's bytes are reused
once its last reader has run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from fungrad import core
from fungrad.lowering import kernel as K
from fungrad.lowering.kernel import Buffer, Ctx, Expr, Tensor, Var


@dataclass
class Store:
    """``buffer[index] = value`` (or ``buffer[index] = combine(buffer[index], value)``),
    skipped where ``mask`` (a bool expression) is false. ``once``: the mask only selects the
    first iteration of the kernel loops that the value and index do not depend on (a value
    an outer loop computes, stored once): a renderer may store it unmasked in the innermost
    loop it depends on instead."""

    buffer: Buffer
    index: Expr
    value: Expr
    combine: str | None = None
    mask: Expr | None = None
    once: bool = False


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
        parts = tuple(
            x for s in self.stores for x in (s.value, s.index, s.mask, s.combine, s.buffer)
        )
        seen, reads = self._reads
        if len(seen) != len(parts) or any(a is not b for a, b in zip(seen, parts)):
            exprs = [e for s in self.stores for e in (s.value, s.index, s.mask) if e is not None]
            reads = frozenset(_loaded_buffers(exprs) | {s.buffer for s in self.stores if s.combine})
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
        return loop_nest_cost(self.loops, self.stores, set())


def loop_nest_cost(loops, stores, seen: set) -> int:
    """:meth:`Kernel.cost` of stores ``stores`` inside loops ``loops`` (outermost first), the
    nodes whose ids are in ``seen`` counted already (``seen`` gains those counted here: the
    pieces of a split loop share the nodes outside it, ``range_split.split_cost``)."""
    pos = {v: i for i, v in enumerate(loops)}
    runs = [1]  # runs[i]: iterations of the i outermost kernel loops
    for v in loops:
        runs.append(runs[-1] * v.extent)
    total = runs[-1] * len(stores)
    stack = [e for s in stores for e in (s.value, s.index, s.mask) if e is not None]
    runs_of: dict[frozenset, int] = {}  # a node's runs by its free variables (few distinct sets)
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        n = runs_of.get(e.free)
        if n is None:
            depth = max((pos[v] + 1 for v in e.free if v in pos), default=0)
            bound = math.prod(v.extent for v in e.free if v not in pos)
            n = runs_of[e.free] = runs[depth] * bound
        total += _OP_COST.get(e.op, 1) * n
        stack.extend(e.args)
    return total


_OP_COST = dict.fromkeys(K.MATH_UNARY, 20) | {
    "pow": 40,
    "atan2": 30,
    "div": 4,
    "rem": 6,
    "sqrt": 4,
    "rsqrt": 5,
    "const": 0,
    "idx": 0,
}


@dataclass
class Gemm:
    """``c[b] = alpha * a[b] @ b[b] + beta * c0[b]`` for row-major matrices (``trans_a``: a
    holds A^T), ``batch`` matrices one after the other in each buffer; ``c0`` None means c.
    Lowering rules make ``alpha = 1, beta = 0``; the planner folds a scaled update of the
    product (``w - lr * (a @ b)``) into ``alpha``, ``beta = 1`` and ``c0 = w``
    (``peephole.fuse_gemm_updates``). The LLVM renderer runs small float32 products through
    its own kernel (``cpu/gemm.py``) and the others through BLAS."""

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
    #: ``b`` holds op(b) packed in the CPU gemm library's panels (``cpu/gemm.py: pack_b``;
    #: ``trans_b`` is then False): a loop-invariant b packed once before the loop
    #: (``control_flow.pack_invariant_operands``)
    b_packed: bool = False

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
        lines = [
            f"fusion plan of {self.name}: {len(self.steps)} steps, "
            f"{self.scratch_bytes} bytes of temporaries"
        ]
        for s in self.steps:
            if isinstance(s, Kernel):
                shape = [v.extent for v in s.loops]
                outs = ", ".join(_written_name(st.buffer) for st in s.stores)
                ins = ", ".join(sorted(b.name for b in s.reads()))
                par = " parallel" if s.parallel else ""
                lines.append(
                    f"  kernel {s.name}{par} loops={shape} writes {outs} reads [{ins}]"
                    f" fuses [{', '.join(s.origins)}]"
                )
            else:
                lines.append(
                    f"  {type(s).__name__.lower()} {s.name}: writes "
                    f"{', '.join(sorted(b.name for b in s.writes()))} reads "
                    f"{', '.join(sorted(b.name for b in s.reads()))}"
                )
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


class _Unshareable(Exception):
    """A float sum :meth:`Planner._share` cannot store before the kernel it must precede."""


class LoweringError(Exception):
    """A jaxpr cannot be lowered: names the primitive and the reason."""


class Policy(Protocol):
    """A backend's answers to the choices the planner and the lowering rules make: each backend
    implements one (``lowering/cpu/policy.py``, ``lowering/gpu/policy.py``) and the planner
    carries it as ``planner.policy`` (sub-planners share their parent's). Rules branch on these
    answers, never on ``name``; a new backend is one more implementation.

    ``name``: the backend ("cpu", "gpu"), for messages only.

    ``has_float64``: whether kernels compute in float64 (a float32 scan then carries float64,
    as the impl; WGSL has no float64).

    ``stores_outer_reductions``: whether a reduction that depends on a kernel's outer loops only
    (a row's maximum, read by every element of the row) is stored by an earlier kernel. A loop
    nest computes it once per row (False); where every element is its own invocation (a GPU),
    each would recompute it (True).

    ``inline_row_dots``: whether a matrix-vector product that reads the matrix along its rows is
    an inline reduction (a vectorised, blocked row sum) instead of a :class:`Gemm`.

    ``joins_across_outputs``: whether a pending tensor may join the kernel of an earlier one
    of its shape across pending tensors of other shapes (an optimizer's new parameter and
    moments, listed apart, in one kernel); else only adjacent tensors of one shape share a
    kernel.

    ``wide_scan_carry``: whether a cumulative reduction with a wider accumulator than its
    operand may keep that accumulator per line in a buffer of its own (a serial loop holds it
    in a register); else the scan reads its own previous output element back.

    ``gemm_transposes_both``: whether a :class:`Gemm` may read both operands transposed (else
    the rule stores one of them in the other order first).

    ``linalg_steps``: whether the dense linear algebra primitives (cholesky, triangular_solve,
    lu, qr, eigh, svd) become library steps (``steps.CholeskyStep``, ``LuStep``, ``QRStep``,
    ...); else their rules lower a loop algorithm inline. Cholesky, triangular solve and LU ask
    :meth:`linalg_step` instead, which may answer per size.

    ``fft_steps``: whether the 1-D complex FFTs the FFT primitive is split into become library
    steps (``steps.FftStep``); else compiling an FFT is a LoweringError.

    ``writes_in_place``: whether a step may write its result over memory it reads: a
    :class:`Gemm` its ``c`` over ``c0`` (a loop carry that a product updates, a weight gradient
    summed over a scan's steps, then lives in one buffer instead of two alternating ones:
    ``control_flow.carries_in_place``), a kernel a store over the operand it reads last, at
    the same element (``peephole.kernels_in_place``: the buffers share memory,
    ``Buffer.alias``).
    """

    name: str
    has_float64: bool
    stores_outer_reductions: bool
    inline_row_dots: bool
    wide_scan_carry: bool
    joins_across_outputs: bool
    gemm_transposes_both: bool
    linalg_steps: bool
    fft_steps: bool
    writes_in_place: bool

    def wants_gemm(self, m: int, n: int, k: int, batch: int, dtype: np.dtype) -> bool:
        """Whether ``batch`` products of ``[m, k] @ [k, n]`` in ``dtype`` (a float; operands,
        accumulator and result all of it, none of m, n, k zero) should be a :class:`Gemm`
        step rather than an inline reduction per output element."""
        ...

    def prepacks_b(self, step: Gemm) -> int:
        """For a product inside a loop whose ``b`` no iteration changes: the panel width
        (columns) to pack op(b) into once before the loop (``Gemm.b_packed``), or 0 to read b
        as it is."""
        ...

    def column_reduction(self, size: int, shortest: int) -> bool:
        """Whether a reduction that keeps the operand's last axis (a bias gradient's sum over
        the batch), of a ``size``-element operand whose shortest reduced axis is ``shortest``
        long, should walk the operand in memory order and accumulate into the output row
        (``lax.reduce._column_reduction``) rather than reduce each output element inline."""
        ...

    def column_dot(self, width: int, shortest: int) -> bool:
        """Whether a vector times a matrix read down its columns (``v @ A``), ``width`` outputs
        and its shortest contracted axis ``shortest`` long, should be a column sum of the
        products in the matrix's memory order (``lax.dot._column_dot``) rather than a
        :class:`Gemm`."""
        ...

    def linalg_step(self, op: str, n: int, batch: int) -> bool:
        """Whether ``op`` (``"cholesky"``, ``"triangular_solve"`` or ``"lu"``) of ``batch``
        float32/float64 matrices whose longer side is ``n`` should be one library step
        (``steps.CholeskyStep``, ``steps.TriangularSolveStep``, ``steps.LuStep``) rather than
        its loop algorithm lowered inline."""
        ...


#: the recorder of which equations each step computes while a profiled executable is planned
#: (``lowering/profile.py``'s ``Coverage``); None otherwise
rule_watch: list = [None]


class Planner:
    """Builds a :class:`Program` from a closed jaxpr (see the module docstring) with a
    backend's :class:`Policy`; a sub-planner (``parent`` given: a control-flow body) shares
    its parent's."""

    def __init__(self, name: str, parent: Planner | None = None, policy: Policy | None = None):
        self.name = name
        if parent is None:
            if policy is None:
                raise TypeError(
                    f"Planner({name!r}): a top-level planner needs the backend's "
                    f"policy (e.g. fungrad.lowering.cpu.policy.CpuPolicy())"
                )
            self.policy = policy
            self.ctx = Ctx(self)
            self.buffers: list[Buffer] = []
            self.consts: list[tuple[Buffer, np.ndarray]] = []
            self._n = {"kernel": 0}
            self._ready: list = [None]  # the buffers ready when elements were last forgotten
        else:  # a sub-program (a control-flow body): one program's nodes, buffers and names
            self.policy = parent.policy
            self.ctx, self.buffers, self.consts, self._n, self._ready = (
                parent.ctx,
                parent.buffers,
                parent.consts,
                parent._n,
                parent._ready,
            )
        self.steps: list = []
        self.pending: list[Tensor] = []
        self.origins: list[str] = []  # primitives lowered since the last flush
        self.eqn: core.JaxprEqn | None = None  # the equation whose rule is running
        self._readers: dict = {}  # var -> the equations reading it (None: a jaxpr output)
        # float sums/products computed inline by kernels of self.steps: tensor -> [(kernel,
        # index, element)]; a second kernel asking for one stores it instead (_share)
        self._inlined: dict[Tensor, list[tuple[Kernel, tuple, Expr]]] = {}
        self._unshared: set = set()  # ids of float sums that _share could not store once
        self._later: list = []  # while _schedule_before builds: the steps after the position

    # buffers and tensors
    def new_buffer(self, shape, dtype, kind: str, name: str | None = None) -> Buffer:
        b = Buffer(
            len(self.buffers),
            tuple(shape),
            np.dtype(dtype),
            kind,
            name or f"{kind[0]}{len(self.buffers)}",
            self.ctx,
        )
        self.buffers.append(b)
        return b

    def buffer_tensor(self, buf: Buffer, origin: str) -> Tensor:
        """The tensor reading ``buf``."""
        ctx = self.ctx
        t = Tensor(
            buf.shape, buf.dtype, lambda idx: ctx.load(buf, ctx.flat_index(idx, buf.shape)), origin
        )
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
                return K.from_fn(
                    x.aval.shape, dtype, lambda idx: self.ctx.const(value, dtype), "literal"
                )
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
        watch = rule_watch[0]
        try:
            for i, eqn in enumerate(jaxpr.eqns):
                if watch is not None:
                    watch.before(self, jaxpr, i)
                rule = K.lowering_rules.get(eqn.primitive)
                if rule is None:
                    raise LoweringError(
                        f"jit: the primitive {eqn.primitive.name} has no "
                        f"lowering rule for the {self.policy.name.upper()} "
                        f"compiler"
                    )
                self.eqn = eqn
                outs = rule(self.ctx, *map(read, eqn.invars), **eqn.params)
                if not eqn.primitive.multiple_results:
                    outs = [outs]
                for v, t in zip(eqn.outvars, outs):
                    if t.shape != v.aval.shape or t.dtype != v.aval.dtype:
                        raise LoweringError(
                            f"lowering rule of {eqn.primitive.name} produced "
                            f"{t.dtype.name}{list(t.shape)}, expected "
                            f"{v.aval.str_short()}"
                        )
                    if not t.origin or t.origin in ("literal",):
                        t.origin = eqn.primitive.name
                    env[v] = t
                if watch is not None:
                    watch.after(self, jaxpr, i, outs)
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
        perms = {
            r.params["permutation"] if r is not None and r.primitive.name == "transpose" else None
            for r in readers
        }
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

    def add_kernel(
        self, prefix: str, shape, stores_at, *, parallel: bool = True, origin: str = ""
    ) -> None:
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
            if recomputed:
                for t in recomputed:
                    self.materialize(t)
                self.flush()
                continue
            sums = self._float_sums(kern)
            shared = self._shared_sums(sums, ())
            if not shared:
                break
            for t in shared:
                self._share(t)
        if 0 in shape:  # no iteration: nothing to write (an index into an empty array is 0)
            for b in kern.writes():
                b.ready = True
            return
        self.add_step(kern)
        self._register(kern, sums)

    def add_step(self, step) -> None:
        """Append a non-kernel step (its inputs are stored first)."""
        self.flush()
        self.steps.append(step)
        for b in step.writes():
            b.ready = True

    # kernels
    def flush(self) -> None:
        """Schedule every pending stored tensor into kernels: the first pending tensor with
        every later one of its shape that may join it (:meth:`_joins`)."""
        while self.pending:
            group = [self.pending.pop(0)]
            skipped = []
            for t in list(self.pending):
                if t.shape != group[0].shape:
                    skipped.append(t)
                elif self._joins(t, group, skipped):
                    group.append(t)
                    self.pending.remove(t)
                else:
                    break  # t stays after the group; so do the tensors behind it
            self._schedule(group)
        self.origins = []

    def _joins(self, t: Tensor, group, skipped) -> bool:
        """Whether pending ``t`` may be stored by ``group``'s kernel, ahead of the pending
        tensors ``skipped`` (of other shapes) queued between them: it reads none of their
        buffers. Programs list their outputs by pytree position, so an optimizer's new
        parameters, first and second moments of one weight are pending apart (all parameters,
        then all moments); one kernel for the three reads the gradient once, not three times."""
        if self._reads_any(t, group):
            return False
        if skipped and not self.policy.joins_across_outputs:
            return False
        return not skipped or not self._reads_any(t, skipped)

    def _reads_any(self, t: Tensor, group) -> bool:
        # conservative: would t's element read a buffer one of the group writes? (True where
        # building it would store a tensor first: t then gets a kernel of its own)
        written = {g.buffer for g in group}
        probe = [self.ctx.index(Var(n)) for n in t.shape]
        saved, K._on_read[0] = K._on_read[0], self._recompute_guard()
        try:
            return bool(_loaded_buffers([t.at(probe)]) & written)
        except K.StoreFirst:
            return True
        finally:
            K._on_read[0] = saved

    def _schedule(self, group: list[Tensor]) -> None:
        """Store ``group`` by one kernel appended to the steps, after the kernels of the
        tensors it must store first. Those nest (a chain of stencils stores each level before
        the next), so the kernels being scheduled are an explicit stack of
        :meth:`_scheduling` generators, each yielding a tensor to store before it goes on."""
        work = [self._scheduling(group)]
        while work:
            try:
                t = next(work[-1])
            except StopIteration:
                work.pop()
                continue
            if t.buffer is None:
                self.materialize(t)
            self.pending.remove(t)
            work.append(self._scheduling([t]))

    def _scheduling(self, group: list[Tensor]):
        """:meth:`_schedule` of ``group``, yielding each tensor to store (by a kernel of its
        own, scheduled before this one goes on) first."""
        if 0 in group[0].shape:  # nothing to store: no kernel, its elements are never built
            for t in group:
                t.buffer.ready = True
            return
        while True:
            try:
                kern = self._guarded(lambda: self._build(group))  # noqa: B023 -- called here
            except K.StoreFirst as first:
                kern, store = None, first.tensor
            if kern is None:
                yield store
                continue
            bad = self._recomputed_reductions(kern)
            if bad:
                for t in bad:  # store those reductions first, then rebuild this kernel
                    if t.buffer is None:  # (an earlier one's kernel may have read and stored it)
                        yield t
                continue
            sums = self._float_sums(kern)
            shared = self._shared_sums(sums, group)
            if not shared:
                break
            for t in shared:
                self._share(t)
            group = [
                t
                for t in group  # without those _share stored
                if not (t.buffer.ready and any(t is u for u in shared))
            ]
            if not group:
                return
        self.steps.append(kern)
        for t in group:
            t.buffer.ready = True
        self._register(kern, sums)

    def _guarded(self, build):
        """``build()`` (which builds a kernel's expressions), raising :class:`StoreFirst` for a
        tensor that can still be stored first (see ``kernel.StoreFirst``) when the kernel asks
        for a reduction's element at a second index (a reduction is computed once per
        element), or for any tensor's element at so many indices that recomputing it at each
        passes :data:`RECOMPUTE_BOUND` (:meth:`_recompute_guard`)."""
        asked: dict = {}
        ready = [b for b in self.buffers if b.ready]
        if ready != self._ready[0]:  # an element memoised since may inline a stored tensor
            self._ready[0] = ready
            K.new_generation()

        def note(t: Tensor, idx: tuple) -> None:
            first = asked.setdefault(t, idx)
            if (
                first is not idx
                and any(a is not b for a, b in zip(first, idx))
                and self._storable(t)
            ):
                raise K.StoreFirst(t)

        saved, self.ctx.on_reduce = self.ctx.on_reduce, note
        saved_read, K._on_read[0] = K._on_read[0], self._recompute_guard()
        try:
            return build()
        finally:
            self.ctx.on_reduce = saved
            K._on_read[0] = saved_read

    def _storable(self, t: Tensor) -> bool:
        """Whether ``t`` may still be stored before the kernel being built: not stored yet, or
        pending (not a member of the group being built)."""
        return t.buffer is None or any(p is t for p in self.pending)

    def _recompute_guard(self):
        """A read hook (``kernel._on_read``) for one kernel build: it counts the distinct
        indices each tensor is read at, and raises :class:`StoreFirst` for a tensor that could
        still be stored once ``(indices - 1) * cost`` of its element passes
        :data:`RECOMPUTE_BOUND`. An elementwise producer read at one index (the common fusion)
        is never stored; one read at ``i`` and ``i - 2**k`` by each level of a log-depth chain
        is, before the recomputed expression doubles again (it doubled per level: the
        derivative of a 300-element cumprod built one kernel of 150000 nodes).

        An index that differs from one seen before only where either has a reduction's
        variable (``y[i, r]`` in a row sum, ``y[i, j]`` beside it: softmax, a normalisation)
        does not count: the row pattern stays one kernel, and cannot grow exponentially (each
        reduction is computed at one index, :meth:`_guarded`)."""
        indices: dict = {}  # tensor -> (distinct indices in order, the same as a set, count)
        costs: dict = {}  # tensor -> recompute cost of one element

        def read(t: Tensor, idx: tuple) -> None:
            seen = indices.get(t)
            if seen is None:
                indices[t] = ([idx], {idx}, [0])
                return
            order, distinct, counted = seen
            if idx in distinct:
                return
            along = any(_along_reduction(s, idx) for s in order[:_ALONG_SCAN])
            order.append(idx)
            distinct.add(idx)
            if along:
                return
            counted[0] += 1
            cost = costs.get(t)
            if cost is None:
                elem = t.memo.get(order[0])
                cost = costs[t] = 0 if elem is None else _recompute_cost(elem, RECOMPUTE_BOUND)
            if counted[0] * cost > RECOMPUTE_BOUND and self._storable(t):
                raise K.StoreFirst(t)

        return read

    # one value per float sum: a reduction computed by two kernels may be rounded differently
    # by each (vectorised in another order, an optimised and a cold module), and a comparison
    # of it (relu's mask, a sort, argmax) then goes different ways in one program.
    def _float_sums(self, kern: Kernel) -> dict[Tensor, list[tuple[tuple, Expr]]]:
        """The not-yet-stored tensors whose elements ``kern`` computes with a float sum or
        product: tensor -> [(index, element)] (the element expressions found in ``kern``)."""
        nodes = {
            id(e)
            for e in _walk(
                [x for st in kern.stores for x in (st.value, st.index, st.mask) if x is not None]
            )
        }
        found: dict = {}
        for e in _walk([st.value for st in kern.stores]):
            if e.op == "reduce" and e.attr.op in ("add", "mul") and e.dtype.kind in "fc":
                t = self.ctx.reduce_origin.get(e)
                if t is not None and t not in found and not (t.buffer and t.buffer.ready):
                    found[t] = [(idx, x) for idx, x in t.memo.items() if id(x) in nodes]
        return found

    def _shared_sums(self, sums: dict, group) -> list[Tensor]:
        """Float sums the kernel being built must not compute itself: those an earlier kernel
        computes inline, and pending ones another kernel will store (a group member computed
        inline earlier is stored by that kernel instead, see :meth:`_share`)."""
        shared = [t for t in group if t in self._inlined and id(t) not in self._unshared]
        for t in sums:
            if t in shared or any(t is g for g in group) or id(t) in self._unshared:
                continue
            if t in self._inlined or t.buffer is not None:
                shared.append(t)
        if self._later:  # a kernel moved before later steps cannot share what they compute
            later = {id(k) for k in self._later}
            written = {b for k in self._later for b in k.writes()}
            for t in shared:
                if t.buffer in written or any(
                    id(k) in later for k, _, _ in self._inlined.get(t, ())
                ):
                    raise _Unshareable(t)
        return shared

    def _register(self, kern: Kernel, sums: dict) -> None:
        for t, found in sums.items():
            self._inlined.setdefault(t, []).extend((kern, idx, x) for idx, x in found)

    def _position(self, kern) -> int:
        return next(i for i, s in enumerate(self.steps) if s is kern)

    def _share(self, t: Tensor) -> None:
        """Store float sum ``t`` once, for every kernel: by the first kernel that computes it
        inline when that kernel's loops cover t's elements (a store added to it), else by a
        kernel of its own inserted before that one; every other kernel that computed it loads
        it instead. If t is pending, it is no longer. Where the inserted kernel would need a
        value that only later steps compute, ``t`` stays computed inline (``_unshared``)."""
        registered = self._inlined.pop(t, [])
        entries = [x for x in registered if any(s is x[0] for s in self.steps)]
        pending = any(p is t for p in self.pending)
        if pending:
            self.pending.remove(t)
        saved = t.buffer, t.view
        if t.buffer is None:
            t.buffer = self.new_buffer(t.shape, t.dtype, "temp")
            if t.view is None:
                t.view = (t.buffer, tuple(range(len(t.shape))))
        if not entries:  # only pending: store it now, before the kernel that asked for it
            self._schedule([t])
            return
        entries.sort(key=lambda x: self._position(x[0]))
        first, idx, elem = entries[0]
        store = self._covering_store(first, t, idx, elem)
        if store is not None:
            first.stores.append(store)
            t.buffer.ready = True
            rest = entries[1:]
        elif self._schedule_before(t, self._position(first)):
            rest = entries
        else:  # as before: computed where it is read
            t.buffer, t.view = saved
            if pending:
                self.pending.append(t)
            self._inlined[t] = registered
            self._unshared.add(id(t))
            return
        for kern, idx, elem in rest:
            self._load_instead(
                kern, elem, self.ctx.load(t.buffer, self.ctx.flat_index(idx, t.shape))
            )

    def _covering_store(self, kern: Kernel, t: Tensor, idx: tuple, elem: Expr):
        """A store of ``t[idx] = elem`` for ``kern`` when ``idx`` is distinct loops of ``kern``
        spanning t's dimensions (the kernel computes every element); other loops are masked to
        their first iteration. None otherwise."""
        pos = {v: i for i, v in enumerate(kern.loops)}
        used = []
        for d, i in zip(t.shape, idx):
            v = i.attr if i.op == "idx" else None
            if v not in pos or v.extent != d or v in used:
                return None
            used.append(v)
        mask = None
        for v in kern.loops:
            if v not in used:
                first = self.ctx.op("eq", self.ctx.index(v), self.ctx.iconst(0))
                mask = first if mask is None else self.ctx.op("and", mask, first)
        return Store(
            t.buffer, self.ctx.flat_index(idx, t.shape), elem, mask=mask, once=mask is not None
        )

    def _schedule_before(self, t: Tensor, at: int) -> bool:
        """Schedule ``t``'s kernel at position ``at`` of the steps: buffers the later steps
        write count as not yet written while it is built. False (nothing scheduled for t)
        where it would compute a float sum that a later step computes or stores."""
        tail = self.steps[at:]
        del self.steps[at:]
        later = [b for s in tail for b in s.writes() if b.ready and b.kind == "temp"]
        for b in later:
            b.ready = False
        saved, self._later = self._later, self._later + tail
        try:
            self._schedule([t])
        except _Unshareable:
            return False
        finally:
            self._later = saved
            for b in later:
                b.ready = True
            self.steps.extend(tail)
        for u, entries in list(self._inlined.items()):  # computed by t's kernel and a later one
            if len({id(k) for k, _, _ in entries}) > 1 and id(u) not in self._unshared:
                self._share(u)
        return True

    def _load_instead(self, kern: Kernel, elem: Expr, load: Expr) -> None:
        """Replace the element ``elem`` in ``kern``'s stores by ``load``."""
        by, memo = {id(elem): load}, {}
        for st in kern.stores:
            st.value = K.replace_nodes(self.ctx, st.value, by, memo)
            st.index = K.replace_nodes(self.ctx, st.index, by, memo)
            if st.mask is not None:
                st.mask = K.replace_nodes(self.ctx, st.mask, by, memo)
        for entries in self._inlined.values():  # elements of other tensors it was part of
            for n, (k, idx, x) in enumerate(entries):
                if k is kern and id(x) in memo:
                    entries[n] = (k, idx, memo[id(x)])

    def _build(self, group: list[Tensor]) -> Kernel:
        shape = group[0].shape
        loops = tuple(Var(n) for n in shape)
        idx = tuple(self.ctx.index(v) for v in loops)
        flat = self.ctx.flat_index(idx, shape)
        stores = []
        for t in group:
            t.memo.pop(idx, None)
            value = K.build_element(t, idx)  # (t.at would read t's own buffer)
            stores.append(Store(t.buffer, flat, value))
        self._n["kernel"] += 1
        origins = tuple(dict.fromkeys(t.origin for t in group))
        return Kernel(f"k{self._n['kernel']}", loops, stores, True, origins)

    def _recomputed_reductions(self, kern: Kernel) -> list[Tensor]:
        """Reductions the renderer would evaluate inside loops they do not depend on, and, where
        the policy ``stores_outer_reductions`` (every element its own invocation), those that
        do not depend on all of the kernel's loops."""
        chain = {v: kern.loops[: i + 1] for i, v in enumerate(kern.loops)}
        bad = []
        for e in _walk([s.value for s in kern.stores]):
            if e.op != "reduce":
                continue
            outer = _placement_chain(e, chain)
            if not set(outer) <= e.free:
                t = self.ctx.reduce_origin.get(e)
                if t is not None and t.buffer is None and t not in bad:
                    bad.append(t)
        if self.policy.stores_outer_reductions:
            loops = set(kern.loops)
            for e in _walk([s.value for s in kern.stores]):
                if e.op == "reduce" and not loops <= e.free:
                    t = self.ctx.reduce_origin.get(e)
                    if t is not None and t.buffer is None and t not in bad:
                        bad.append(t)
        return bad


#: The most operations (``_OP_COST`` units: a transcendental is 20) one kernel may spend
#: recomputing an element of a tensor at indices other than the first it reads it at; past it
#: the tensor is stored by an earlier kernel (:meth:`Planner._recompute_guard`). Two cheap
#: reads (``x[1:] - x[:-1]`` of ``tanh(a) * b``) stay fused; a stencil of 9 reads of a tanh
#: does not.
RECOMPUTE_BOUND = 64


_ALONG_SCAN = 8  # indices compared by _along_reduction per new index (they are few)


def _along_reduction(a: tuple, b: tuple) -> bool:
    """Whether index tuples ``a`` and ``b`` differ only in components where one of them is a
    reduction's variable (a row read along the reduced axis and elementwise)."""
    return all(
        x is y or (x.op == "idx" and x.attr.bound) or (y.op == "idx" and y.attr.bound)
        for x, y in zip(a, b)
    )


def _recompute_cost(elem: Expr, bound: int) -> int:
    """The cost of computing ``elem`` again (more than ``bound`` once known to pass it):
    its distinct nodes weighed by ``_OP_COST``; index arithmetic, loads and constants are
    free (a view of a stored array costs nothing), and a reduction counts as one node (one
    read at another index is stored first anyway, :meth:`Planner._guarded`)."""
    total, seen, stack = 0, set(), [elem]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if e.dtype != K.INDEX and e.op != "load":
            total += _OP_COST.get(e.op, 1)
            if total > bound:
                return total
        if e.op != "reduce":
            stack.extend(e.args)
    return total


def _placement_chain(e: Expr, chain: dict) -> tuple[Var, ...]:
    """The loops enclosing the point where reduce node ``e`` is evaluated; records the chains
    of its bound variables in ``chain``."""
    deepest: tuple[Var, ...] = ()
    for v in e.free:
        c = chain.get(v)
        if c is not None and len(c) > len(deepest):
            deepest = c
    for i, v in enumerate(e.attr.vars):
        chain.setdefault(v, deepest + e.attr.vars[: i + 1])
    return deepest


def plan(closed: core.ClosedJaxpr, name: str = "main", *, policy: Policy) -> Program:
    """Lower ``closed`` (already optimised) to a :class:`Program` for the backend whose
    :class:`Policy` is ``policy``."""
    p = Planner(name, policy=policy)
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
    from fungrad.lowering import peephole  # (it reads this module's step classes)

    for steps in _step_lists(p.steps):
        peephole.fuse_gemm_updates(steps)
        peephole.merge_column_reductions(steps, p.ctx)
    if p.policy.writes_in_place:  # (once the bodies' products hold their updates)
        from fungrad.lowering.control_flow import carries_in_place

        for steps in reversed(_step_lists(p.steps)):  # innermost first
            carries_in_place(steps)
        peephole.kernels_in_place(p.steps)
    peephole.hoist_output_kernels(p.steps)
    used = {b.id for step in p.steps for b in (*step.reads(), *step.writes())}
    temps = [b for b in p.buffers if b.kind == "temp" and b.id in used]
    prog = Program(name, inputs, outputs, p.consts, temps, p.steps, ctx=p.ctx)
    prog.scratch_bytes = _assign_offsets(prog)
    return prog


def _written_name(b: Buffer) -> str:
    """A stored buffer's name in the plan text; ``t16 (over t15)`` where it is written over
    another temporary's memory (``Buffer.alias``)."""
    return b.name if b.alias is None else f"{b.name} (over {b.alias.name})"


def _step_lists(steps: list) -> list[list]:
    """``steps`` and the step lists of the control-flow bodies in it, nested ones too (a
    scan's body, a while loop's cond and body, a cond's branches): the peephole rewrites that
    see one list at a time apply to each (the backward scan of an LSTM computes its gates'
    gradient for the bias's column sum and for the matmuls: merged, once per step)."""
    out, todo = [], [steps]
    while todo:
        cur = todo.pop()
        out.append(cur)
        for step in cur:
            for name in ("body", "cond"):
                sub = getattr(step, name, None)
                if isinstance(sub, list):
                    todo.append(sub)
            todo.extend(b for b in getattr(step, "branches", None) or () if isinstance(b, list))
    return out


def _assign_offsets(prog: Program) -> int:
    """First-fit byte offsets (``Buffer.index``) for temporaries by liveness, in 64-byte
    aligned slots; returns the scratch size in bytes."""
    offsets, top = liveness_offsets(prog, lambda b: max(64, -(-b.nbytes // 64) * 64))
    for b in prog.temps:
        b.index = offsets[b.id]
    return top


def liveness_offsets(prog: Program, slot_size) -> tuple[dict[int, int], int]:
    """Offsets of ``prog``'s temporaries, a slot of ``slot_size(buffer)`` units each, where two
    temporaries share memory only when their lives (first writer to last reader, steps
    inclusive) do not overlap: ``({buffer id: offset}, size)``. (The GPU sizes slots in 32-bit
    words, the CPU in bytes.)

    A temporary with an ``alias`` shares its root's slot (their lives joined).

    Largest first, each at the lowest offset clear of the already placed temporaries whose
    lives overlap its own (greedy by size, as TFLite's arena planner): placing them in the
    order they are first written left holes the later large ones did not fit (the W4 MLP's
    step, five 256 KiB activations and gradients of which three live at once, took 1.31 MB;
    0.79 MB this way)."""
    first, last = {}, {}  # (of a temporary and its aliases together, by the root's id)
    for i, step in enumerate(prog.steps):
        for b in step.writes():
            first.setdefault(b.root().id, i)
            last[b.root().id] = max(last.get(b.root().id, i), i)
        for b in step.reads():
            last[b.root().id] = max(last.get(b.root().id, i), i)
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, first step, last step)
    top = 0
    offsets: dict[int, int] = {}
    roots = [b for b in prog.temps if b.alias is None]
    for b in sorted(roots, key=lambda b: (-slot_size(b), first.get(b.id, 0), b.id)):
        start = first.get(b.id, 0)
        end = last.get(b.id, start)
        size = slot_size(b)
        offset = 0
        for off, sz, f, l in sorted(placed):
            if l < start or f > end:
                continue  # (their lives do not overlap)
            if off - offset >= size:
                break
            offset = max(offset, off + sz)
        offsets[b.id] = offset
        placed.append((offset, size, start, end))
        top = max(top, offset + size)
    for b in prog.temps:
        if b.alias is not None:
            offsets[b.id] = offsets[b.root().id]
    return offsets, top
