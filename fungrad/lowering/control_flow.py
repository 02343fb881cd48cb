"""Native control flow: the steps that ``cond``, ``while`` and ``scan`` lower to.

A control-flow primitive cannot be computed element by element, so its lowering rule (at the end
of ``fungrad/lax/control_flow/conditionals.py`` and ``loops.py``) stores its operands in buffers
and appends one step to the program. Each body (a branch, a loop's cond or body) is planned as a
*sub-program*: a nested :class:`~fungrad.lowering.fusion.Planner` sharing the parent's context,
buffer list, constants and kernel names, whose inputs are tensors reading existing buffers and
whose outputs are stored to buffers the step chooses. Its temporaries are ordinary temporaries
of the program: the step's ``reads()``/``writes()`` list every buffer the sub-program touches,
so the liveness pass keeps them (and the loop state) alive, and distinct, for the whole step.

In the entry function the renderer calls :meth:`render_llvm` (``ModuleWriter.render_steps``
renders a sub-program with a pointer map, once per body, so kernel functions are emitted once):

* ``cond`` is an LLVM ``switch`` on the (clamped) branch index, read from a 0-d buffer;
* ``while`` is a loop: run the cond program, read its 0-d bool result, run the body;
* ``scan`` is a counted loop over ``length`` iterations; per-iteration slices of ``xs`` and
  rows of ``ys`` are pointer offsets into the stacked buffers (a *view* buffer's address is an
  LLVM value computed in the loop), ``reverse`` walks the rows backwards.

Loop carries live in memory, double-buffered: each carry has a ``home`` and a ``spare`` buffer,
and the iteration reads one (the view ``cur``) and writes the other (``nxt``); the two pointers
swap through phi nodes, so no iteration copies a carry and a body may permute its carries
freely. A scan knows its trip count, so its initial value goes where the final value lands in
``home``; a while copies the final value home once, at exit (``llvm.memcpy``, a no-op when it is
already there). A carry the body passes through unchanged is not carried at all: it is a
constant of the loop, and the loop's output is the init tensor itself.
"""

from __future__ import annotations

import numpy as np

from fungrad import core
from fungrad.lowering import kernel as K
from fungrad.lowering.fusion import Planner, Program
from fungrad.lowering.kernel import Buffer, Tensor

__all__ = ["CondStep", "WhileStep", "ScanStep", "lower_cond", "lower_while", "lower_scan"]


# -- buffers of a loop ----------------------------------------------------------------------------

class Carry:
    """One loop-carried value: ``home``/``spare`` hold it alternately; ``cur`` (the value an
    iteration reads) and ``nxt`` (the value it writes) are views whose addresses are phis."""

    __slots__ = ("home", "spare", "cur", "nxt", "start_home")

    def __init__(self, planner: Planner, t: Tensor, name: str, start_home: bool,
                 store_init: bool = True):
        self.home = planner.new_buffer(t.shape, t.dtype, "temp")
        self.spare = planner.new_buffer(t.shape, t.dtype, "temp")
        self.cur = planner.new_buffer(t.shape, t.dtype, "view", f"{name}.cur")
        self.nxt = planner.new_buffer(t.shape, t.dtype, "view", f"{name}.next")
        self.cur.ready = True  # holds the carry when an iteration starts
        self.start_home = start_home
        if store_init:  # (not when nothing can read the initial value)
            init = K.from_fn(t.shape, t.dtype, t.at, f"{name} init")
            init.buffer = self.home if start_home else self.spare
            planner.pending.append(init)  # stored by a kernel before the loop step


class Slice:
    """``view`` is row ``i`` (along the leading axis) of ``whole`` in iteration ``i``."""

    __slots__ = ("view", "whole")

    def __init__(self, view: Buffer, whole: Buffer):
        self.view, self.whole = view, whole


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
        raise RuntimeError(f"lowering: an operand of shape {aval.shape} that a control-flow "
                           "body does not use was read")
    return K.from_fn(aval.shape, aval.dtype, element, "unused operand")


def _step_name(planner: Planner, kind: str) -> str:
    n = planner._n[kind] = planner._n.get(kind, 0) + 1  # shared by all sub-planners
    return f"{kind}{n}"


def _sub_program(parent: Planner, name: str, closed: core.ClosedJaxpr,
                 inputs: list[Buffer | None], targets: list[Buffer | None]) -> Planner:
    """Plan ``closed`` applied to the buffers ``inputs`` (None: an input it does not read);
    output ``k`` is stored into ``targets[k]`` (skipped where None). Returns the sub-planner
    (its ``steps``)."""
    sub = type(parent)(name, parent)  # the backend's planner class
    args = [_unread(v.aval) if b is None else sub.buffer_tensor(b, b.name)
            for b, v in zip(inputs, closed.jaxpr.invars)]
    outs = sub.lower_jaxpr(closed, args)
    for t, target in zip(outs, targets):
        if target is not None:
            store = K.from_fn(t.shape, t.dtype, t.at, t.origin or name)
            store.buffer = target
            sub.pending.append(store)
    sub.flush()
    return sub


def _invariant(closed: core.ClosedJaxpr, n_before: int, n_carry: int) -> list[bool]:
    """Which carries the body returns unchanged (output k is input ``n_before + k``)."""
    j = closed.jaxpr
    return [j.outvars[k] is j.invars[n_before + k] for k in range(n_carry)]


class _ControlStep:
    """What the planner needs of a control-flow step: ``reads()``/``writes()`` cover every
    buffer its sub-programs touch, with this step's views replaced by the buffers behind them.
    Sub-steps are final when the step is built, so both sets are computed once."""

    name: str
    #: its code runs inside the entry function (loops, branches), which is then compiled with
    #: the full pipeline (``llvm.ModuleWriter.render``)
    in_entry = True

    def _collect(self, programs, backing: dict[int, tuple[Buffer, ...]], reads, writes):
        def real(bufs):
            out = set()
            for b in bufs:
                out.update(backing.get(b.id, (b,)))
            return out
        r, w = set(reads), set(writes)
        for steps in programs:
            for s in steps:
                r |= real(s.reads())
                w |= real(s.writes())
        self._reads, self._writes = r, w

    def reads(self) -> set[Buffer]:
        return self._reads

    def writes(self) -> set[Buffer]:
        return self._writes

    def _body_lines(self, title: str, steps: list) -> list[str]:
        """A sub-program's plan as text (``Program.describe`` shows it under the step)."""
        lines = Program(title, [], [], [], [], steps).describe().splitlines()[1:]
        return [f"{title}: {len(steps)} steps"] + lines


def _labels(mw) -> str:
    """A fresh label prefix in the entry function (the renderer's unique value counter)."""
    return "cf" + mw.ops.tmp()[2:]


def _memcpy(mw, dst: str, src: str, nbytes: int) -> str:
    mw.declare("llvm.memcpy.p0.p0.i64",
               "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)")
    return f"  call void @llvm.memcpy.p0.p0.i64(ptr {dst}, ptr {src}, i64 {nbytes}, i1 false)"


def _phi_carries(lbl: str, carries: list[Carry], ptr: dict, inner: dict) -> list[str]:
    """Phis swapping each carry's two buffers on every back edge."""
    lines = []
    for k, c in enumerate(carries):
        cur, nxt = f"%{lbl}.c{k}", f"%{lbl}.n{k}"
        first, second = (c.home, c.spare) if c.start_home else (c.spare, c.home)
        lines.append(f"  {cur} = phi ptr [{ptr[first.id]}, %{lbl}.pre], [{nxt}, %{lbl}.latch]")
        lines.append(f"  {nxt} = phi ptr [{ptr[second.id]}, %{lbl}.pre], [{cur}, %{lbl}.latch]")
        inner[c.cur.id], inner[c.nxt.id] = cur, nxt
    return lines


# -- cond ---------------------------------------------------------------------------------------

class CondStep(_ControlStep):
    """Run ``branches[clamp(index, 0, n - 1)]``; every branch writes all of ``outs``."""

    def __init__(self, name: str, index: Buffer, branches: list[list], outs: list[Buffer]):
        self.name, self.index, self.branches, self.outs = name, index, branches, outs
        self._collect(branches, {}, [index], outs)

    def describe_body(self) -> list[str]:
        return [line for i, steps in enumerate(self.branches)
                for line in self._body_lines(f"branch {i}", steps)]

    def render_llvm(self, mw, ptr: dict[int, str]) -> list[str]:
        from fungrad.lowering.cpu.llvm import llvm_type
        lbl = _labels(mw)
        n = len(self.branches)
        dt = self.index.dtype
        ty = llvm_type(dt)
        lines = [f"  %{lbl}.ix = load {ty}, ptr {ptr[self.index.id]}"]
        # the clamped index as i64 (np.clip(index, 0, n - 1), as the impl)
        if dt.kind == "u":
            lines += [f"  %{lbl}.big = icmp ugt {ty} %{lbl}.ix, {n - 1}",
                      f"  %{lbl}.cl = select i1 %{lbl}.big, {ty} {n - 1}, {ty} %{lbl}.ix"]
            lines.append(f"  %{lbl}.k = zext {ty} %{lbl}.cl to i64" if ty != "i64"
                         else f"  %{lbl}.k = add i64 %{lbl}.cl, 0")
        else:
            wide = f"%{lbl}.ix"
            if ty != "i64":
                lines.append(f"  %{lbl}.w = sext {ty} %{lbl}.ix to i64")
                wide = f"%{lbl}.w"
            lines += [f"  %{lbl}.neg = icmp slt i64 {wide}, 0",
                      f"  %{lbl}.lo = select i1 %{lbl}.neg, i64 0, i64 {wide}",
                      f"  %{lbl}.big = icmp sgt i64 %{lbl}.lo, {n - 1}",
                      f"  %{lbl}.k = select i1 %{lbl}.big, i64 {n - 1}, i64 %{lbl}.lo"]
        cases = " ".join(f"i64 {i}, label %{lbl}.b{i}" for i in range(n - 1))
        lines.append(f"  switch i64 %{lbl}.k, label %{lbl}.b{n - 1} [ {cases} ]")
        for i, steps in enumerate(self.branches):
            lines.append(f"{lbl}.b{i}:")
            lines += mw.render_steps(steps, ptr)
            lines.append(f"  br label %{lbl}.end")
        lines.append(f"{lbl}.end:")
        return lines


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
    progs = [_sub_program(parent, f"{name}.branch{b}", br, ins, outs).steps
             for b, br in enumerate(branches)]
    parent.add_step(CondStep(name, idx, progs, outs))
    return [parent.buffer_tensor(b, name) for b in outs]


# -- while --------------------------------------------------------------------------------------

class WhileStep(_ControlStep):
    """``while pred(cond program): body program``, carries double-buffered (module
    docstring); the cond program stores the predicate in the 0-d bool buffer ``pred``."""

    def __init__(self, name: str, cond: list, pred: Buffer, body: list, carries: list[Carry]):
        self.name, self.cond, self.pred, self.body, self.carries = name, cond, pred, body, carries
        backing = {v.id: (c.home, c.spare) for c in carries for v in (c.cur, c.nxt)}
        both = [b for c in carries for b in (c.home, c.spare)]
        self._collect([cond, body], backing, both, both + [pred])

    def describe_body(self) -> list[str]:
        return self._body_lines("cond", self.cond) + self._body_lines("body", self.body)

    def render_llvm(self, mw, ptr: dict[int, str]) -> list[str]:
        lbl = _labels(mw)
        inner = dict(ptr)
        lines = [f"  br label %{lbl}.pre", f"{lbl}.pre:", f"  br label %{lbl}.head",
                 f"{lbl}.head:"]
        lines += _phi_carries(lbl, self.carries, ptr, inner)
        lines += mw.render_steps(self.cond, inner)
        lines += [f"  %{lbl}.p = load i8, ptr {inner[self.pred.id]}",
                  f"  %{lbl}.go = icmp ne i8 %{lbl}.p, 0",
                  f"  br i1 %{lbl}.go, label %{lbl}.body, label %{lbl}.exit", f"{lbl}.body:"]
        lines += mw.render_steps(self.body, inner)
        lines += [f"  br label %{lbl}.latch", f"{lbl}.latch:", f"  br label %{lbl}.head",
                  f"{lbl}.exit:"]
        for k, c in enumerate(self.carries):  # the final value may be in the spare buffer
            if c.home.nbytes:
                lines.append(_memcpy(mw, ptr[c.home.id], f"%{lbl}.c{k}", c.home.nbytes))
        return lines


def lower_while(ctx: K.Ctx, cond_jaxpr, body_jaxpr, cond_consts, body_consts, init
                ) -> list[Tensor]:
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
            c = Carry(parent, t, f"{name}.carry{k}", start_home=True)
            carries.append(c)
            cur_in.append(c.cur)
            out_tensors.append(parent.buffer_tensor(c.home, name))
            nxt.append(c.nxt)
    pred = parent.new_buffer((), np.bool_, "temp", f"{name}.pred")
    cond = _sub_program(parent, f"{name}.cond", cond_jaxpr, cconsts + cur_in, [pred])
    body = _sub_program(parent, f"{name}.body", body_jaxpr, bconsts + cur_in, nxt)
    parent.add_step(WhileStep(name, cond.steps, pred, body.steps, carries))
    return out_tensors


# -- scan ---------------------------------------------------------------------------------------

class ScanStep(_ControlStep):
    """``for t in range(length)`` (row ``i = t``, or ``length - 1 - t`` when ``reverse``): the
    body program reads row ``i`` of each of ``xs`` and writes row ``i`` of each of ``ys``."""

    def __init__(self, name: str, body: list, carries: list[Carry], xs: list[Slice],
                 ys: list[Slice], length: int, reverse: bool):
        self.name, self.body, self.carries = name, body, carries
        self.xs, self.ys, self.length, self.reverse = xs, ys, length, reverse
        backing = {v.id: (c.home, c.spare) for c in carries for v in (c.cur, c.nxt)}
        backing.update({s.view.id: (s.whole,) for s in xs + ys})
        both = [b for c in carries for b in (c.home, c.spare)]
        self._collect([body], backing, both + [s.whole for s in xs],
                      both + [s.whole for s in ys])

    def describe_body(self) -> list[str]:
        order = "reversed " if self.reverse else ""
        return self._body_lines(f"body ({order}length {self.length})", self.body)

    def render_llvm(self, mw, ptr: dict[int, str]) -> list[str]:
        lbl = _labels(mw)
        inner = dict(ptr)
        lines = [f"  br label %{lbl}.pre", f"{lbl}.pre:", f"  br label %{lbl}.head",
                 f"{lbl}.head:",
                 f"  %{lbl}.t = phi i64 [0, %{lbl}.pre], [%{lbl}.t1, %{lbl}.latch]"]
        lines += _phi_carries(lbl, self.carries, ptr, inner)
        lines += [f"  %{lbl}.go = icmp slt i64 %{lbl}.t, {self.length}",
                  f"  br i1 %{lbl}.go, label %{lbl}.body, label %{lbl}.exit", f"{lbl}.body:"]
        row = f"%{lbl}.t"
        if self.reverse:
            row = f"%{lbl}.i"
            lines.append(f"  {row} = sub i64 {self.length - 1}, %{lbl}.t")
        for s in self.xs + self.ys:
            v = s.view
            off, p = f"%{lbl}.off{v.id}", f"%{lbl}.row{v.id}"
            lines += [f"  {off} = mul i64 {row}, {v.nbytes}",
                      f"  {p} = getelementptr inbounds i8, ptr {ptr[s.whole.id]}, i64 {off}"]
            inner[v.id] = p
        lines += mw.render_steps(self.body, inner)
        lines += [f"  br label %{lbl}.latch", f"{lbl}.latch:",
                  f"  %{lbl}.t1 = add nuw nsw i64 %{lbl}.t, 1", f"  br label %{lbl}.head",
                  f"{lbl}.exit:"]
        return lines


def lower_scan(ctx: K.Ctx, jaxpr, consts, init, xs, length: int, reverse: bool
               ) -> list[Tensor]:
    """Lowering of ``scan[jaxpr num_consts num_carry length reverse] *consts *init *xs``."""
    if length == 0:  # the carries keep their init values; the ys are empty
        return list(init) + [
            K.from_fn((0, *a.shape), a.dtype, lambda idx, a=a: ctx.const(0, a.dtype), "scan")
            for a in jaxpr.out_avals[len(init):]]
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
            c = Carry(parent, t, f"{name}.carry{k}", start_home, used[n_consts + k])
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
    for k, a in enumerate(jaxpr.out_avals[len(init):]):
        whole = parent.new_buffer((length, *a.shape), a.dtype, "temp")
        y_slices.append(Slice(parent.new_buffer(a.shape, a.dtype, "view", f"{name}.y{k}"),
                              whole))
    body = _sub_program(parent, f"{name}.body", jaxpr, const_bufs + cur_in + x_in,
                        targets + [s.view for s in y_slices])
    parent.add_step(ScanStep(name, body.steps, carries, x_slices, y_slices, length, reverse))
    return carry_outs + [parent.buffer_tensor(s.whole, name) for s in y_slices]
