"""LLVM rendering of a host call step (``steps.HostCallStep``): native code calling Python.

The entry function loads the trampoline's address from the cell ``@fg_host_callback_fn``
(``host_callback.register_symbol``), calls ``fn(i64 step_index, ptr buffer_addresses)`` with
the step's operand and result addresses on the stack, and returns -1 at once when the
callback raised (``host_callback`` describes the protocol).
"""

from __future__ import annotations

from fungrad.lowering import host_callback
from fungrad.lowering.steps import HostCallStep

__all__ = ["render_host_call"]


def render_host_call(mw, step: HostCallStep, ptr: dict[int, str]) -> list[str]:
    host_callback.register_symbol()
    sym = host_callback.SYMBOL
    mw.declare(sym, f"@{sym} = external global ptr")
    lbl = "hc" + mw.ops.tmp()[2:]
    bufs = step.operands + step.results
    lines = [f"  %{lbl}.ss = call ptr @llvm.stacksave.p0()",
             f"  %{lbl}.ptrs = alloca ptr, i64 {max(len(bufs), 1)}"]
    for i, b in enumerate(bufs):
        lines += [f"  %{lbl}.p{i} = getelementptr inbounds ptr, ptr %{lbl}.ptrs, i64 {i}",
                  f"  store ptr {ptr[b.id]}, ptr %{lbl}.p{i}"]
    return lines + [
        f"  %{lbl}.fn = load ptr, ptr @{sym}",
        f"  %{lbl}.st = call i32 %{lbl}.fn(i64 {step.index}, ptr %{lbl}.ptrs)",
        f"  call void @llvm.stackrestore.p0(ptr %{lbl}.ss)",
        f"  %{lbl}.bad = icmp ne i32 %{lbl}.st, 0",
        f"  br i1 %{lbl}.bad, label %{lbl}.fail, label %{lbl}.ok",
        f"{lbl}.fail:",
        "  ret i32 -1",
        f"{lbl}.ok:"]
