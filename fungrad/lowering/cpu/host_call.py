"""Host steps on the CPU: compiled code calling Python (``steps.HostCallStep``).

A callback's step runs inside the native entry function (also inside compiled
``scan``/``while``/``cond`` bodies), so the step is a call from native code into Python:

* the generated code (:func:`render_host_call`) loads a function pointer from the
  process-wide cell ``@fg_host_callback_fn`` and calls ``fn(i64 step_index, ptr
  buffer_addresses)``. The cell is registered as a symbol in every process
  (:func:`register_symbol`) and holds the address of one ctypes trampoline; no address is
  baked into the code, so cached objects (``cache.py``) work across processes;
* the entry function is called through ctypes with the GIL released; the trampoline is a
  ctypes callback, which takes the GIL for the duration of the Python call. Steps run on the
  thread that called the entry function (only kernels run on the native thread pool);
* which executable the step belongs to is known from a per-thread stack of running calls
  (:func:`running`): the executable pushes itself before entering native code, so nested
  calls (a callback calling a jitted function) and concurrent calls from several threads each
  find their own;
* a callback that raises makes the trampoline return 1; the generated code then returns -1
  from the entry function at once (no later step runs) and the executable re-raises the
  exception (:func:`raise_failure`).

The step copies its operands out of the program's buffers (which are reused) before calling
the Python function, and copies the checked results into its result buffers.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu import llvm_capi
from fungrad.lowering.kernel import Buffer
from fungrad.lowering.steps import HostCallStep

__all__ = ["SYMBOL", "render_host_call", "running", "current", "raise_failure", "register_symbol"]

SYMBOL = "fg_host_callback_fn"
"""The cell generated code loads the trampoline's address from."""


def render_host_call(mw, step: HostCallStep, ptr: dict[int, str]) -> list[str]:
    register_symbol()
    mw.declare(SYMBOL, f"@{SYMBOL} = external global ptr")
    lbl = "hc" + mw.ops.tmp()[2:]
    bufs = step.operands + step.results
    lines = [
        f"  %{lbl}.ss = call ptr @llvm.stacksave.p0()",
        f"  %{lbl}.ptrs = alloca ptr, i64 {max(len(bufs), 1)}",
    ]
    for i, b in enumerate(bufs):
        lines += [
            f"  %{lbl}.p{i} = getelementptr inbounds ptr, ptr %{lbl}.ptrs, i64 {i}",
            f"  store ptr {ptr[b.id]}, ptr %{lbl}.p{i}",
        ]
    return lines + [
        f"  %{lbl}.fn = load ptr, ptr @{SYMBOL}",
        f"  %{lbl}.st = call i32 %{lbl}.fn(i64 {step.index}, ptr %{lbl}.ptrs)",
        f"  call void @llvm.stackrestore.p0(ptr %{lbl}.ss)",
        f"  %{lbl}.bad = icmp ne i32 %{lbl}.st, 0",
        f"  br i1 %{lbl}.bad, label %{lbl}.fail, label %{lbl}.ok",
        f"{lbl}.fail:",
        "  ret i32 -1",
        f"{lbl}.ok:",
    ]


def execute_at(step: HostCallStep, addresses: list[int]) -> None:
    """Run ``step``'s callback on the buffers at ``addresses`` (operands, then results)."""
    n = len(step.operands)
    values = [_read(a, b) for a, b in zip(addresses[:n], step.operands)]
    outs = step.run(values)
    for a, b, v in zip(addresses[n:], step.results, outs):
        _write(a, b, v)


def _view(address: int, b: Buffer) -> np.ndarray:
    nbytes = b.nbytes
    if not nbytes:
        return np.empty(b.shape, b.dtype)
    raw = (ctypes.c_char * nbytes).from_address(address)
    return np.frombuffer(raw, dtype=b.dtype).reshape(b.shape)


def _read(address: int, b: Buffer) -> np.ndarray:
    return _view(address, b).copy()  # the program reuses its buffers


def _write(address: int, b: Buffer, value: np.ndarray) -> None:
    if b.nbytes:
        np.copyto(_view(address, b), value, casting="unsafe")


# -- the running calls and the trampoline ------------------------------------------------------


class _Frame:
    __slots__ = ("steps", "error")

    def __init__(self, steps: dict[int, HostCallStep]):
        self.steps, self.error = steps, None


class _Running(threading.local):
    def __init__(self):
        self.stack: list[_Frame] = []


_running = _Running()


class running:  # noqa: N801  (used like a function: ``with running(steps):``)
    """The block runs a compiled program whose host steps are ``steps`` on this thread."""

    __slots__ = ("frame",)

    def __init__(self, steps: dict[int, HostCallStep]):
        self.frame = _Frame(steps)

    def __enter__(self):
        _running.stack.append(self.frame)
        return self.frame

    def __exit__(self, *exc):
        _running.stack.pop()
        return False


def current() -> _Frame:
    """The innermost running call of this thread."""
    return _running.stack[-1]


def raise_failure(frame: _Frame):
    """Re-raise the exception a callback of the call ``frame`` raised."""
    err, frame.error = frame.error, None
    if err is None:
        raise RuntimeError("jit: a host callback failed without an exception")
    raise err


def _trampoline(index: int, addresses: int) -> int:
    try:
        frame = _running.stack[-1]
    except IndexError:
        return 1  # not called by an executable (cannot happen): stop the program
    try:
        step = frame.steps[index]
        n = len(step.operands) + len(step.results)
        addrs = list((ctypes.c_void_p * max(n, 1)).from_address(addresses))[:n]
        execute_at(step, [a or 0 for a in addrs])
        return 0
    except BaseException as e:  # noqa: BLE001  (re-raised by the executable)
        frame.error = e
        return 1


_PROTO = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p)
_callback = _PROTO(_trampoline)  # alive for the whole process
_cell = ctypes.c_void_p(ctypes.cast(_callback, ctypes.c_void_p).value)
_registered = False
_lock = threading.Lock()


def register_symbol() -> None:
    """Make ``@fg_host_callback_fn`` resolvable in code loaded from now on (idempotent)."""
    global _registered
    if not _registered:
        with _lock:
            if not _registered:
                cpu.host()  # initialises LLVM
                with cpu.llvm_lock:
                    llvm_capi.add_symbol(SYMBOL, ctypes.addressof(_cell))
                _registered = True
