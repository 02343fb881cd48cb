"""Native control flow: the steps that ``cond``, ``while`` and ``scan`` lower to.

A control-flow primitive cannot be computed element by element, so its lowering rule (at the end
of ``fungrad/lax/control_flow/conditionals.py`` and ``loops.py``) stores its operands in buffers
and appends one step to the program. Each body (a branch, a loop's cond or body) is planned as a
*sub-program*: a nested :class:`~fungrad.lowering.fusion.Planner` sharing the parent's context,
buffer list, constants and kernel names, whose inputs are tensors reading existing buffers and
whose outputs are stored to buffers the step chooses. Its temporaries are ordinary temporaries
of the program: the step's ``reads()``/``writes()`` list every buffer the sub-program touches,
so the liveness pass keeps them (and the loop state) alive, and distinct, for the whole step.

The steps themselves are plain data (``steps.py``); each backend renders them
(``cpu/control_flow.py`` for the CPU: a ``switch``, and loops whose carries swap through phis).

Loop carries live in memory, double-buffered (``steps.Carry``). A scan knows its trip count,
so its initial value goes where the final value lands in ``home``; a while copies the final
value home once, at exit. A carry the body passes through unchanged is not carried at all: it
is a constant of the loop, and the loop's output is the init tensor itself.
"""

from __future__ import annotations

import numpy as np

from fungrad import core
from fungrad.lowering import kernel as K
from fungrad.lowering.fusion import Gemm, Kernel, Planner
from fungrad.lowering.kernel import Buffer, Tensor
from fungrad.lowering.steps import Carry, CondStep, ScanStep, Slice, WhileStep

__all__ = [
    "lower_cond",
    "lower_while",
    "lower_scan",
    "carries_in_place",
    "pack_invariant_operands",
]


# -- buffers of a loop ----------------------------------------------------------------------------


def _carry(
    planner: Planner, t: Tensor, name: str, start_home: bool, store_init: bool = True
) -> Carry:
    """The buffers of a loop carry of ``t``'s type; unless ``store_init`` is False (nothing
    can read the initial value), a kernel before the loop step stores ``t`` into the buffer
    the first iteration reads."""
    home = planner.new_buffer(t.shape, t.dtype, "temp")
    spare = planner.new_buffer(t.shape, t.dtype, "temp")
    cur = planner.new_buffer(t.shape, t.dtype, "view", f"{name}.cur")
    nxt = planner.new_buffer(t.shape, t.dtype, "view", f"{name}.next")
    cur.ready = True  # holds the carry when an iteration starts
    if store_init:
        init = K.from_fn(t.shape, t.dtype, t.at, f"{name} init")
        init.buffer = home if start_home else spare
        planner.pending.append(init)  # stored by a kernel before the loop step
    return Carry(home, spare, cur, nxt, start_home)


def _stored(ctx: K.Ctx, t: Tensor, used: bool = True) -> Buffer | None:
    """A buffer holding ``t`` (stored by the parent program before the step), or None when
    no sub-program reads it (then it is not stored at all)."""
    return ctx.materialize(t).buffer if used else None


def _used_invars(closed: core.ClosedJaxpr) -> list[bool]:
    """Which inputs of ``closed`` its equations or outputs read."""
    j = closed.jaxpr
    read = {id(x) for e in j.eqns for x in e.invars} | {id(x) for x in j.outvars}
    return [id(v) in read for v in j.invars]


def _unread(aval) -> Tensor:
    """The input tensor of a sub-program for an operand it never reads."""

    def element(idx):
        raise RuntimeError(
            f"lowering: an operand of shape {aval.shape} that a control-flow "
            "body does not use was read"
        )

    return K.from_fn(aval.shape, aval.dtype, element, "unused operand")


def _step_name(planner: Planner, kind: str) -> str:
    n = planner._n[kind] = planner._n.get(kind, 0) + 1  # shared by all sub-planners
    return f"{kind}{n}"


def _sub_program(
    parent: Planner,
    name: str,
    closed: core.ClosedJaxpr,
    inputs: list[Buffer | None],
    targets: list[Buffer | None],
) -> Planner:
    """Plan ``closed`` applied to the buffers ``inputs`` (None: an input it does not read);
    output ``k`` is stored into ``targets[k]`` (skipped where None). Returns the sub-planner
    (its ``steps``). Where ``targets[k]`` is a per-iteration view (a loop's) and the body computed
    output ``k`` into a temporary of its own, that temporary becomes the view and replaces
    ``targets[k]`` (the caller reads the list back)."""
    sub = type(parent)(name, parent)  # the backend's planner class
    args = [
        _unread(v.aval) if b is None else sub.buffer_tensor(b, b.name)
        for b, v in zip(inputs, closed.jaxpr.invars)
    ]
    n_before = len(parent.buffers)
    outs = sub.lower_jaxpr(closed, args)
    # a nested loop's buffers stay its own: it alternates a carry between two buffers, which
    # the GPU places in one slot (a view is placed per iteration, in its loop's slot)
    claimed = {
        b.id for st in sub.steps if isinstance(st, (WhileStep, ScanStep)) for b in st.writes()
    }
    for k, (t, target) in enumerate(zip(outs, targets)):
        if target is None:
            continue
        if target.kind == "view" and _own_temp(t, n_before, claimed):
            targets[k] = _become_view(t.buffer, target)
            claimed.add(t.buffer.id)
            continue
        store = K.from_fn(t.shape, t.dtype, t.at, t.origin or name)
        store.buffer = target
        sub.pending.append(store)
    sub.flush()
    return sub


def _own_temp(t: Tensor, n_before: int, claimed: set[int]) -> bool:
    """Whether ``t`` is exactly the contents of a temporary its sub-program created (buffers
    from ``n_before`` on) that nothing else has claimed (another output, a nested loop): an
    operand some step needed in memory (the ``[x, h]`` a matrix product reads), or a
    product's result."""
    b = t.buffer
    return (
        b is not None
        and b.kind == "temp"
        and b.id >= n_before
        and b.id not in claimed
        and b.shape == t.shape
        and b.dtype == t.dtype
        and (t.view is None or t.view == (b, tuple(range(len(b.shape)))))
    )


def _become_view(temp: Buffer, target: Buffer) -> Buffer:
    """Make the body's temporary ``temp`` the per-iteration view ``target`` stands for (a ys
    row, a carry's next value), so the steps that compute it write there directly instead of a
    kernel copying it there afterwards. Returns ``temp``, which replaces ``target``."""
    temp.kind, temp.name = "view", target.name
    return temp


def _invariant(closed: core.ClosedJaxpr, n_before: int, n_carry: int) -> list[bool]:
    """Which carries the body returns unchanged (output k is input ``n_before + k``)."""
    j = closed.jaxpr
    return [j.outvars[k] is j.invars[n_before + k] for k in range(n_carry)]


# -- cond ---------------------------------------------------------------------------------------


def lower_cond(ctx: K.Ctx, index: Tensor, operands, branches) -> list[Tensor]:
    """Lowering of ``cond[branches] index *operands``."""
    parent = ctx.planner
    i = index.at(())
    if len(branches) == 1 or i.is_const:  # the branch is known: inline it, no step
        k = 0 if len(branches) == 1 else int(np.clip(i.attr, 0, len(branches) - 1))
        return parent.lower_jaxpr(branches[k], list(operands))
    name = _step_name(parent, "cond")
    idx = _stored(ctx, index)
    used = [any(u) for u in zip(*map(_used_invars, branches))]
    ins = [_stored(ctx, t, u) for t, u in zip(operands, used)]
    outs = [parent.new_buffer(a.shape, a.dtype, "temp") for a in branches[0].out_avals]
    progs = [
        _sub_program(parent, f"{name}.branch{b}", br, ins, outs).steps
        for b, br in enumerate(branches)
    ]
    parent.add_step(CondStep(name, idx, progs, outs))
    return [parent.buffer_tensor(b, name) for b in outs]


# -- while --------------------------------------------------------------------------------------


def lower_while(ctx: K.Ctx, cond_jaxpr, body_jaxpr, cond_consts, body_consts, init) -> list[Tensor]:
    """Lowering of ``while[cond_jaxpr body_jaxpr ...] *cond_consts *body_consts *init``."""
    parent = ctx.planner
    name = _step_name(parent, "while")
    nc, nb = len(cond_consts), len(body_consts)
    cond_used, body_used = _used_invars(cond_jaxpr), _used_invars(body_jaxpr)
    cconsts = [_stored(ctx, t, u) for t, u in zip(cond_consts, cond_used)]
    bconsts = [_stored(ctx, t, u) for t, u in zip(body_consts, body_used)]
    fixed = _invariant(body_jaxpr, nb, len(init))
    carries, cur_in, out_tensors, nxt = [], [], [], []
    for k, (t, inv) in enumerate(zip(init, fixed)):
        if inv:  # passed through unchanged: a constant of the loop
            cur_in.append(_stored(ctx, t, cond_used[nc + k] or body_used[nb + k]))
            out_tensors.append(t)
            nxt.append(None)
        else:
            c = _carry(parent, t, f"{name}.carry{k}", start_home=True)
            carries.append(c)
            cur_in.append(c.cur)
            out_tensors.append(parent.buffer_tensor(c.home, name))
            nxt.append(c.nxt)
    pred = parent.new_buffer((), np.bool_, "temp", f"{name}.pred")
    cond = _sub_program(parent, f"{name}.cond", cond_jaxpr, cconsts + cur_in, [pred])
    body = _sub_program(parent, f"{name}.body", body_jaxpr, bconsts + cur_in, nxt)
    for c, b in zip(carries, [b for b in nxt if b is not None]):
        c.nxt = b  # (the body's own temporary, when it computed the value into one)
    pack_invariant_operands(parent, body.steps, bconsts)
    parent.add_step(WhileStep(name, cond.steps, pred, body.steps, carries))
    return out_tensors


# -- scan ---------------------------------------------------------------------------------------


def lower_scan(ctx: K.Ctx, jaxpr, consts, init, xs, length: int, reverse: bool) -> list[Tensor]:
    """Lowering of ``scan[jaxpr num_consts num_carry length reverse] *consts *init *xs``."""
    if length == 0:  # the carries keep their init values; the ys are empty
        return list(init) + [
            K.from_fn((0, *a.shape), a.dtype, lambda idx, a=a: ctx.const(0, a.dtype), "scan")
            for a in jaxpr.out_avals[len(init) :]
        ]
    parent = ctx.planner
    name = _step_name(parent, "scan")
    n_consts, n_carry = len(consts), len(init)
    used = _used_invars(jaxpr)
    const_bufs = [_stored(ctx, t, u) for t, u in zip(consts, used)]
    # after `length` swaps the final value is where the initial one was iff length is even
    start_home = length % 2 == 0
    fixed = _invariant(jaxpr, n_consts, n_carry)
    carries, cur_in, carry_outs, targets = [], [], [], []
    for k, (t, inv) in enumerate(zip(init, fixed)):
        if inv:  # passed through unchanged: a constant of the loop
            cur_in.append(_stored(ctx, t, used[n_consts + k]))
            carry_outs.append(t)
            targets.append(None)
        else:
            # the body runs at least once: an initial value it never reads is never seen
            c = _carry(parent, t, f"{name}.carry{k}", start_home, used[n_consts + k])
            carries.append(c)
            cur_in.append(c.cur)
            carry_outs.append(parent.buffer_tensor(c.home, name))
            targets.append(c.nxt)
    x_slices, x_in = [], []
    for k, t in enumerate(xs):
        if not used[n_consts + n_carry + k]:
            x_in.append(None)
            continue
        view = parent.new_buffer(t.shape[1:], t.dtype, "view", f"{name}.x{k}")
        view.ready = True
        x_slices.append(Slice(view, _stored(ctx, t)))
        x_in.append(view)
    y_slices = []
    for k, a in enumerate(jaxpr.out_avals[len(init) :]):
        whole = parent.new_buffer((length, *a.shape), a.dtype, "temp")
        y_slices.append(Slice(parent.new_buffer(a.shape, a.dtype, "view", f"{name}.y{k}"), whole))
    targets += [s.view for s in y_slices]
    body = _sub_program(parent, f"{name}.body", jaxpr, const_bufs + cur_in + x_in, targets)
    for c, b in zip(carries, [b for b in targets[:n_carry] if b is not None]):
        c.nxt = b  # (the body's own temporary, when it computed the value into one)
    for s, b in zip(y_slices, targets[n_carry:]):
        s.view = b
    if length > 1:
        pack_invariant_operands(parent, body.steps, const_bufs)
    parent.add_step(ScanStep(name, body.steps, carries, x_slices, y_slices, length, reverse))
    return carry_outs + [parent.buffer_tensor(s.whole, name) for s in y_slices]


# -- carries updated in place ---------------------------------------------------------------------


def carries_in_place(steps: list) -> None:
    """Give one buffer, not two, to each carry of the loops in ``steps`` that a matrix product
    updates in place (for backends whose :class:`~fungrad.lowering.fusion.Gemm` may read ``c0``
    from the memory it writes ``c`` to: ``Policy.writes_in_place``).

    A scan's backward pass sums each weight gradient over the steps: the carry's next value is
    ``cur + a @ b``, one :class:`Gemm` with ``c0 = cur``. With two alternating buffers every
    iteration reads the whole gradient from one and writes it to the other, twice the memory
    traffic of an update in place (the LSTM's ``dW``, 320 x 1024: 0.29 ms in two buffers, 0.24
    ms in one, per step, one core). The product may run in place when nothing after it in the
    body reads ``cur``; the loop then starts in ``home`` (a kernel that stored the initial value
    in ``spare`` stores it in ``home`` instead) and never swaps. Call it on the innermost step
    lists first: a control step's buffer sets include its bodies'."""
    for i, step in enumerate(steps):
        if isinstance(step, (ScanStep, WhileStep)):
            for c in step.carries:
                if c.home is not c.spare and _product_updates(step.body, c):
                    if c.start_home or _store_init_home(steps[:i], steps[i + 1 :], c):
                        c.spare, c.start_home = c.home, True
        if isinstance(step, (ScanStep, WhileStep, CondStep)):
            step.__post_init__()  # the buffers it touches, again (its own or a body's carries)


def _product_updates(body: list, c: Carry) -> bool:
    """Whether the one step of ``body`` that writes ``c.nxt`` is a product accumulating onto
    ``c.cur`` (``c0``) that reads it in no other role, and no later step reads ``c.cur``."""
    writers = [j for j, s in enumerate(body) if c.nxt in s.writes() or c.cur in s.writes()]
    if len(writers) != 1:
        return False
    j = writers[0]
    g = body[j]
    if not (isinstance(g, Gemm) and g.c is c.nxt and g.c0 is c.cur and g.beta != 0):
        return False
    if c.cur in (g.a, g.b) or c.nxt in (g.a, g.b):
        return False
    return not any(c.cur in s.reads() for s in body[j + 1 :])


def _store_init_home(before: list, after: list, c: Carry) -> bool:
    """Move the stores of the carry's initial value (kernels among ``before``, the steps ahead
    of the loop) from ``c.spare`` to ``c.home``; False (nothing changed) unless only plain
    kernel stores touch ``spare`` and ``home`` is untouched there, and no step reads ``spare``
    after the loop."""
    stores = []
    for s in before:
        if c.home in s.reads() or c.home in s.writes() or c.spare in s.reads():
            return False
        if c.spare in s.writes():
            if not isinstance(s, Kernel):
                return False
            for st in s.stores:
                if st.buffer is c.spare:
                    if st.combine is not None:
                        return False
                    stores.append(st)
    if any(c.spare in s.reads() or c.spare in s.writes() for s in after):
        return False
    for st in stores:
        st.buffer = c.home
    return True


# -- loop-invariant product operands packed once ----------------------------------------------


def pack_invariant_operands(parent: Planner, body: list, consts: list[Buffer | None]) -> None:
    """Pack, once before the loop, the ``b`` of each matrix product in ``body`` that reads a
    constant of the loop (``consts``: buffers no iteration writes), where the backend's
    :meth:`~fungrad.lowering.fusion.Policy.prepacks_b` asks for it: the products of an LSTM's
    gates (``[x, h] @ W`` forward, ``dz @ W^T`` backward) read the same weights every step,
    and the CPU gemm library packed them into its panels on every call (a fixed ~55 us of the
    255 us of ``[32, 320] @ [320, 1024]``, ~100 us of 287 for ``W^T``, one core). A kernel
    before the loop stores op(b) in the panels instead (``cpu/gemm.py: pack_b``) and the
    product reads them in place (``Gemm.b_packed``)."""
    invariant = {b.id for b in consts if b is not None}
    packed: dict[tuple[int, bool], Buffer] = {}
    for g in body:
        if not (isinstance(g, Gemm) and g.b.id in invariant and not g.b_packed):
            continue
        width = parent.policy.prepacks_b(g)
        if not width:
            continue
        key = (g.b.id, g.trans_b)
        if key not in packed:
            packed[key] = _pack_b(parent, g, width)
        g.b, g.trans_b, g.b_packed = packed[key], False, True


def _pack_b(parent: Planner, g: Gemm, width: int) -> Buffer:
    """A buffer the kernel stores op(g.b) into as panels of ``width`` columns:
    ``[ceil(n / width), k, width]``, panel ``q`` row ``kk`` = ``op(b)[kk, q*width:][:width]``,
    zero past n."""
    ctx, n, k, trans_b = parent.ctx, g.n, g.k, g.trans_b  # (element runs later: g changes)
    src = parent.buffer_tensor(g.b, "packed b")
    zero = ctx.const(0, g.b.dtype)

    def element(idx):
        q, kk, r = idx
        col = ctx.iadd(ctx.imul(q, ctx.iconst(width)), r)
        inside = ctx.op("lt", col, ctx.iconst(n))
        safe = ctx.select(inside, col, ctx.iconst(n - 1))
        value = src.at((safe, kk) if trans_b else (kk, safe))
        return ctx.select(inside, value, zero)

    shape = (-(-n // width), k, width)
    t = K.from_fn(shape, g.b.dtype, element, f"{g.name} b packed")
    t.buffer = parent.new_buffer(shape, g.b.dtype, "temp")
    parent.pending.append(t)
    return t.buffer
