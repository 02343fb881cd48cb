"""Timing code of profiled CPU executables (``fungrad.profile()``; see ``lowering/profile.py``).

A profiled build passes one more argument in the entry point's argument tuple, after the
scratch area: an int64 array of two words per timed step (nanoseconds, runs). The renderer
(``llvm.ModuleWriter`` with ``profile``) reads the monotonic clock before each step and, after
it, calls ``@fg_prof_add``, which adds the elapsed nanoseconds and one run to the step's
words. Steps inside control-flow bodies are timed each time they run, and so is the
control-flow step around them. Ordinary builds contain none of this.

The clock is libc's ``clock_gettime(CLOCK_MONOTONIC)`` (a vDSO call, ~20 ns), reached as
``@fg_rt_clock_gettime`` (registered with LLVM as the runtime's libc functions are).
"""

from __future__ import annotations

import ctypes
import threading
import time

from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu import llvm_capi

__all__ = ["CLOCK_SYMBOL", "HELPERS", "ensure_clock", "helpers", "step_lines"]

CLOCK_SYMBOL = "fg_rt_clock_gettime"
_lock = threading.Lock()
_registered = False


def ensure_clock() -> None:
    """Make ``@fg_rt_clock_gettime`` resolvable by generated code (once per process)."""
    global _registered
    if _registered:
        return
    with _lock:
        if _registered:
            return
        fn = getattr(ctypes.CDLL(None), "clock_gettime", None)
        if fn is None:
            raise RuntimeError(
                "fungrad.profile: this process has no clock_gettime(); CPU kernels cannot be "
                "timed here"
            )
        with cpu.llvm_lock:
            cpu.host()  # initialises LLVM
            llvm_capi.add_symbol(CLOCK_SYMBOL, ctypes.cast(fn, ctypes.c_void_p).value)
        _registered = True


def helpers() -> str:
    """LLVM text of ``@fg_prof_now`` (monotonic nanoseconds) and ``@fg_prof_add(buf, slot,
    start)`` (adds ``now - start`` and one run to slot ``slot`` of ``buf``)."""
    clock = getattr(time, "CLOCK_MONOTONIC", 1)
    return (
        "define internal i64 @fg_prof_now() optnone noinline {\nentry:\n"
        "  %ts = alloca [2 x i64]\n"
        f"  %r = call i32 @{CLOCK_SYMBOL}(i32 {clock}, ptr %ts)\n"
        "  %s = load i64, ptr %ts\n"
        "  %np = getelementptr inbounds i64, ptr %ts, i64 1\n"
        "  %ns = load i64, ptr %np\n"
        "  %sn = mul i64 %s, 1000000000\n"
        "  %t = add i64 %sn, %ns\n"
        "  ret i64 %t\n}\n"
        "define internal void @fg_prof_add(ptr %buf, i64 %slot, i64 %t0) optnone noinline {\n"
        "entry:\n"
        "  %t1 = call i64 @fg_prof_now()\n"
        "  %d = sub i64 %t1, %t0\n"
        "  %i = shl i64 %slot, 1\n"
        "  %p = getelementptr inbounds i64, ptr %buf, i64 %i\n"
        "  %old = load i64, ptr %p\n"
        "  %new = add i64 %old, %d\n"
        "  store i64 %new, ptr %p\n"
        "  %j = add i64 %i, 1\n"
        "  %q = getelementptr inbounds i64, ptr %buf, i64 %j\n"
        "  %c = load i64, ptr %q\n"
        "  %c1 = add i64 %c, 1\n"
        "  store i64 %c1, ptr %q\n"
        "  ret void\n}\n"
    )


#: the helper functions' (name, return type, parameter types), for linking across modules
HELPERS = (("fg_prof_now", "i64", ""), ("fg_prof_add", "void", "ptr, i64, i64"))


def step_lines(slot: int, body: list[str]) -> list[str]:
    """Entry-function lines timing ``body`` (one step's lines) into slot ``slot`` of
    ``%prof``."""
    return [
        f"  %prof.t{slot} = call i64 @fg_prof_now()",
        *body,
        f"  call void @fg_prof_add(ptr %prof, i64 {slot}, i64 %prof.t{slot})",
    ]
