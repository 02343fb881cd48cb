"""LLVM rendering of the control-flow steps (``steps.CondStep``, ``WhileStep``, ``ScanStep``).

Their code goes into the entry function, which then gets LLVM's full pipeline (``llvm.py``).
Each body is a sub-program rendered with ``ModuleWriter.render_steps`` and a pointer map, once
per body, so its kernel functions are emitted once:

* ``cond`` is a ``switch`` on the (clamped) branch index, read from a 0-d buffer;
* ``while`` is a loop: run the cond program, read its 0-d bool result, run the body;
* ``scan`` is a counted loop over ``length`` iterations; per-iteration slices of ``xs`` and
  rows of ``ys`` are pointer offsets into the stacked buffers (a *view* buffer's address is an
  LLVM value computed in the loop), ``reverse`` walks the rows backwards.

A carry's two buffers swap through phi nodes on every back edge, so no iteration copies a
carry and a body may permute its carries freely; a while copies each final value home at exit
(``llvm.memcpy``, a no-op when it is already there).
"""

from __future__ import annotations

from fungrad.lowering.cpu.llvm_types import llvm_type
from fungrad.lowering.steps import Carry, CondStep, ScanStep, WhileStep

__all__ = ["render_cond", "render_while", "render_scan"]


def _labels(mw) -> str:
    """A fresh label prefix in the entry function (the renderer's unique value counter)."""
    return "cf" + mw.ops.tmp()[2:]


def _memcpy(mw, dst: str, src: str, nbytes: int) -> str:
    mw.declare("llvm.memcpy.p0.p0.i64", "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)")
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


def render_cond(mw, step: CondStep, ptr: dict[int, str]) -> list[str]:
    lbl = _labels(mw)
    n = len(step.branches)
    dt = step.index.dtype
    ty = llvm_type(dt)
    lines = [f"  %{lbl}.ix = load {ty}, ptr {ptr[step.index.id]}"]
    # the clamped index as i64 (np.clip(index, 0, n - 1), as the impl)
    if dt.kind == "u":
        lines += [
            f"  %{lbl}.big = icmp ugt {ty} %{lbl}.ix, {n - 1}",
            f"  %{lbl}.cl = select i1 %{lbl}.big, {ty} {n - 1}, {ty} %{lbl}.ix",
        ]
        lines.append(
            f"  %{lbl}.k = zext {ty} %{lbl}.cl to i64"
            if ty != "i64"
            else f"  %{lbl}.k = add i64 %{lbl}.cl, 0"
        )
    else:
        wide = f"%{lbl}.ix"
        if ty != "i64":
            lines.append(f"  %{lbl}.w = sext {ty} %{lbl}.ix to i64")
            wide = f"%{lbl}.w"
        lines += [
            f"  %{lbl}.neg = icmp slt i64 {wide}, 0",
            f"  %{lbl}.lo = select i1 %{lbl}.neg, i64 0, i64 {wide}",
            f"  %{lbl}.big = icmp sgt i64 %{lbl}.lo, {n - 1}",
            f"  %{lbl}.k = select i1 %{lbl}.big, i64 {n - 1}, i64 %{lbl}.lo",
        ]
    cases = " ".join(f"i64 {i}, label %{lbl}.b{i}" for i in range(n - 1))
    lines.append(f"  switch i64 %{lbl}.k, label %{lbl}.b{n - 1} [ {cases} ]")
    for i, steps in enumerate(step.branches):
        lines.append(f"{lbl}.b{i}:")
        lines += mw.render_steps(steps, ptr)
        lines.append(f"  br label %{lbl}.end")
    lines.append(f"{lbl}.end:")
    return lines


def render_while(mw, step: WhileStep, ptr: dict[int, str]) -> list[str]:
    lbl = _labels(mw)
    inner = dict(ptr)
    lines = [f"  br label %{lbl}.pre", f"{lbl}.pre:", f"  br label %{lbl}.head", f"{lbl}.head:"]
    lines += _phi_carries(lbl, step.carries, ptr, inner)
    lines += mw.render_steps(step.cond, inner)
    lines += [
        f"  %{lbl}.p = load i8, ptr {inner[step.pred.id]}",
        f"  %{lbl}.go = icmp ne i8 %{lbl}.p, 0",
        f"  br i1 %{lbl}.go, label %{lbl}.body, label %{lbl}.exit",
        f"{lbl}.body:",
    ]
    lines += mw.render_steps(step.body, inner)
    lines += [
        f"  br label %{lbl}.latch",
        f"{lbl}.latch:",
        f"  br label %{lbl}.head",
        f"{lbl}.exit:",
    ]
    for k, c in enumerate(step.carries):  # the final value may be in the spare buffer
        if c.home.nbytes:
            lines.append(_memcpy(mw, ptr[c.home.id], f"%{lbl}.c{k}", c.home.nbytes))
    return lines


def render_scan(mw, step: ScanStep, ptr: dict[int, str]) -> list[str]:
    lbl = _labels(mw)
    inner = dict(ptr)
    lines = [
        f"  br label %{lbl}.pre",
        f"{lbl}.pre:",
        f"  br label %{lbl}.head",
        f"{lbl}.head:",
        f"  %{lbl}.t = phi i64 [0, %{lbl}.pre], [%{lbl}.t1, %{lbl}.latch]",
    ]
    lines += _phi_carries(lbl, step.carries, ptr, inner)
    lines += [
        f"  %{lbl}.go = icmp slt i64 %{lbl}.t, {step.length}",
        f"  br i1 %{lbl}.go, label %{lbl}.body, label %{lbl}.exit",
        f"{lbl}.body:",
    ]
    row = f"%{lbl}.t"
    if step.reverse:
        row = f"%{lbl}.i"
        lines.append(f"  {row} = sub i64 {step.length - 1}, %{lbl}.t")
    for s in step.xs + step.ys:
        v = s.view
        off, p = f"%{lbl}.off{v.id}", f"%{lbl}.row{v.id}"
        lines += [
            f"  {off} = mul i64 {row}, {v.nbytes}",
            f"  {p} = getelementptr inbounds i8, ptr {ptr[s.whole.id]}, i64 {off}",
        ]
        inner[v.id] = p
    lines += mw.render_steps(step.body, inner)
    lines += [
        f"  br label %{lbl}.latch",
        f"{lbl}.latch:",
        f"  %{lbl}.t1 = add nuw nsw i64 %{lbl}.t, 1",
        f"  br label %{lbl}.head",
        f"{lbl}.exit:",
    ]
    return lines
