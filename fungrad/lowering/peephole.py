"""Rewrites of a finished step list, after :func:`~fungrad.lowering.fusion.plan` has scheduled
every kernel: fold a scaled update of a matrix product into the product's
:class:`~fungrad.lowering.fusion.Gemm`, and move a column reduction into the next kernel that
stores its operand. Both only merge steps the plan already has, so each saves a pass over
memory without changing what is computed."""

from __future__ import annotations

from fungrad.lowering.fusion import Gemm, Kernel, Store, _walk
from fungrad.lowering.kernel import Buffer, Ctx, Expr, replace_nodes, substitute


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


def fuse_gemm_updates(steps: list) -> None:
    """Fold ``out = w + alpha * c`` into the product that computes ``c``.

    An SGD step reads each weight gradient once, in ``w - lr * grad``: a kernel reading ``w``
    and the product and writing ``out``. Instead the product writes ``out`` itself, as
    ``alpha * a @ b + 1 * w``: two passes over the weight-sized arrays fewer (the own kernel's
    epilogue reads ``w``; through BLAS, ``w`` is copied into ``out`` first). The update may be
    one store of a kernel holding others of its shape (the plan stores outputs of one shape
    together): it leaves that kernel, the others stay."""
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
        if (
            not isinstance(kern, Kernel)
            or tuple(v.extent for v in kern.loops) != g.c.shape
            or g.c in kern.writes()
        ):
            continue
        st = _update_store(kern, g.c)
        if st is None:
            continue
        out = st.buffer
        if out.shape != g.c.shape or out.dtype != g.c.dtype or out in (g.a, g.b):
            continue
        found = _scaled_update(st.value, st.index, g.c)
        if found is None:
            continue
        w, alpha = found
        reads, writes = _between(steps, i, j)  # the steps after the call, before the update
        if w in writes or g.c is w or out in reads | writes or w in g.writes():
            continue
        if w in kern.writes() or out in kern.reads():
            continue  # (the kernel's other stores: they run after the product now writes out)
        g.c, g.c0, g.alpha, g.beta = out, w, alpha, 1.0
        g.name = f"{g.name} + update"
        kern.stores = [s for s in kern.stores if s is not st]
        if not kern.stores:
            del steps[j]


def _update_store(kern: Kernel, product: Buffer) -> Store | None:
    """The one store of ``kern`` that reads ``product`` (plain: no mask, no combine), when no
    other store reads it; else None. A kernel may hold other stores of the same shape (the
    updates of several weights of one shape are one kernel): those stay in it."""
    found = None
    for st in kern.stores:
        if product in Kernel(kern.name, kern.loops, [st]).reads():
            if found is not None or st.combine is not None or st.mask is not None:
                return None
            found = st
    return found


def merge_column_reductions(steps: list, ctx: Ctx) -> None:
    """Move a column reduction (``acc[j] += x[i, j]``) into the next kernel over the same loops
    that stores ``x`` itself (a bias gradient and the activation gradient a matmul needs): x is
    then computed once, in one pass. A column reduction that reads ``x`` back from memory (its
    operand stored first because a matmul reads it too) moves into the kernel that stored it,
    summing the stored values as they are made."""
    i = 0
    while i < len(steps):
        red = steps[i]
        i += 1
        if not (
            isinstance(red, Kernel)
            and red.stores
            and red.loops
            and all(s.combine is not None and s.mask is None for s in red.stores)
        ):
            continue
        if _merge_into_producer(steps, i - 1, ctx):
            i -= 1
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


def _merge_into_producer(steps: list, at: int, ctx: Ctx) -> bool:
    """Move column reduction ``steps[at]`` into the latest earlier kernel over the same loops
    that stores every buffer the reduction loads (at the very index it loads them), with each
    such load replaced by the stored value; True if moved. Between the two, nothing may write
    what the reduction reads or touch its accumulators, but for the kernels that only set the
    accumulators (their initial values), which move before the producer."""
    red = steps[at]
    extents = tuple(v.extent for v in red.loops)
    accs, red_reads = red.writes(), red.reads()
    inits: list[int] = []  # steps between that only initialise the accumulators
    for j in range(at - 1, -1, -1):
        kern = steps[j]
        if isinstance(kern, Kernel) and kern.writes() <= accs and not (kern.reads() & accs):
            inits.append(j)
            continue
        between = [steps[k] for k in range(j + 1, at) if k not in inits]
        reads, writes = _between(between, 0, len(between))
        if (accs & (reads | writes)) or (red_reads & writes):
            return False
        if not isinstance(kern, Kernel):
            continue
        if accs & (kern.reads() | kern.writes()):
            return False
        if not (red_reads & kern.writes()):
            continue  # it stores nothing the reduction reads: look further back
        if tuple(v.extent for v in kern.loops) != extents or any(
            init_reads & kern.writes() for init_reads in (steps[k].reads() for k in inits)
        ):
            return False
        moved = []
        for st in red.stores:
            value, index = st.value, st.index
            for a, b in zip(red.loops, kern.loops):
                value = substitute(ctx, value, a, ctx.index(b), {})
                index = substitute(ctx, index, a, ctx.index(b), {})
            moved.append(Store(st.buffer, index, value, st.combine))
        stored = {
            (id(s.buffer), id(s.index)): s.value
            for s in kern.stores
            if s.combine is None and s.mask is None
        }
        by = {}
        for e in _walk([x for st in moved for x in (st.value, st.index)]):
            if e.op == "load" and e.attr in kern.writes():
                got = stored.get((id(e.attr), id(e.args[0])))
                if got is None:
                    return False  # another element of what this kernel writes
                by[id(e)] = got
        memo: dict = {}
        kern.stores.extend(
            Store(
                st.buffer,
                replace_nodes(ctx, st.index, by, memo),
                replace_nodes(ctx, st.value, by, memo),
                st.combine,
            )
            for st in moved
        )
        kern.parallel = kern.parallel and red.parallel
        kern.origins = tuple(dict.fromkeys((*kern.origins, *red.origins)))
        moved_inits = [steps[k] for k in sorted(inits)]
        for k in sorted([at, *inits], reverse=True):
            del steps[k]
        steps[j:j] = moved_inits
        return True
    return False


def kernels_in_place(steps: list) -> None:
    """Let a kernel's store write over the temporary it reads last (``Buffer.alias``), where
    that is safe element by element: the training step of an MLP reads the back-propagated
    gradient once, in the kernel that masks it by the relu and stores the masked gradient, so
    the two 256 KiB arrays of the W4 step need not both be alive (JAX keeps one). The store
    moves to the end of its kernel, so every other store of the kernel reads the operand
    before it is overwritten; its value reads the operand only at the element it stores (one
    interned load node), and LLVM sees one pointer for both (the renderer passes aliases as
    one argument), so it keeps the load before the store. Top-level steps only: in a loop
    body an operand made before the loop is read again by the next iteration."""
    last_use: dict[int, int] = {}
    writers: dict[int, int] = {}
    for i, step in enumerate(steps):
        for b in step.reads() | step.writes():
            last_use[b.root().id] = i
        for b in step.writes():
            writers[b.id] = writers.get(b.id, 0) + 1
    for i, kern in enumerate(steps):
        if not isinstance(kern, Kernel):
            continue
        for st in list(kern.stores):
            out = st.buffer
            if (
                out.kind != "temp"
                or out.alias is not None
                or writers.get(out.id) != 1
                or st.combine is not None
                or st.mask is not None
                or st.once
                or set(st.index.free) != set(kern.loops)  # (each element stored once)
            ):
                continue
            operand = _overwritable(kern, st, i, last_use)
            if operand is None:
                continue
            out.alias = operand
            kern.stores = [s for s in kern.stores if s is not st] + [st]
            last_use[operand.root().id] = max(last_use[operand.root().id], last_use.get(out.id, i))
            break  # (one per kernel: its other operands' last uses changed)


def _overwritable(kern: Kernel, st: Store, at: int, last_use: dict[int, int]) -> Buffer | None:
    """A temporary ``kern`` (step ``at``) reads, whose memory is free after it (no later step
    uses it or an alias of it), of ``st.buffer``'s shape and dtype, read in the whole kernel
    only at ``st.index`` and by ``st.value``; else None."""
    out = st.buffer
    loads: dict[int, list[Expr]] = {}
    for s in kern.stores:
        for e in _walk([x for x in (s.value, s.index, s.mask) if x is not None]):
            if e.op == "load":
                loads.setdefault(e.attr.id, []).append(e)
    in_value = {id(e) for e in _walk([st.value]) if e.op == "load"}
    written = {s.buffer.id for s in kern.stores}
    for nodes in loads.values():
        buf = nodes[0].attr
        if (
            buf.kind != "temp"
            or buf.id in written
            or buf.shape != out.shape
            or buf.dtype != out.dtype
            or last_use.get(buf.root().id) != at
        ):
            continue
        node = nodes[0]
        if all(e is node for e in nodes) and node.args[0] is st.index and id(node) in in_value:
            return buf
    return None


def hoist_output_kernels(steps: list) -> None:
    """Move each top-level kernel that stores only program outputs to just after the last
    step writing what it reads. The planner stores outputs at the end of the program, so a
    loss or a bias update kept its small operands (the logits, a bias gradient) alive through
    the whole backward pass: 5.5 KiB of the W4 MLP step's 0.80 MB, which put it over JAX's
    0.797 MB. An output is written once, by that kernel, and read by no other step, so running
    it earlier changes nothing else."""

    def outputs_only(step) -> bool:
        return (
            isinstance(step, Kernel)
            and bool(step.stores)
            and all(st.buffer.kind == "output" and st.combine is None for st in step.stores)
        )

    for i in range(len(steps)):
        kern = steps[i]
        if not outputs_only(kern) or all(b.root().kind != "temp" for b in kern.reads()):
            continue  # (only a temporary's life can get shorter)
        reads = {b.root().id for b in kern.reads()}
        writes = {b.id for b in kern.writes()}
        at = 0
        for j in range(i):
            touched = {b.root().id for b in steps[j].writes()}
            if touched & reads or {b.id for b in steps[j].reads() | steps[j].writes()} & writes:
                at = j + 1
        while at < i and outputs_only(steps[at]):
            at += 1  # (output kernels keep their order among themselves)
        if at < i:
            steps.insert(at, steps.pop(i))
