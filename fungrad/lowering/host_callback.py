"""Host steps: compiled programs calling Python functions (``fungrad.callback``'s primitives).

A callback's lowering rule stores its operands in buffers and appends a ``steps.HostCallStep``
to the program, whose results are buffers the step writes. Steps run inside the native entry
function (also inside compiled ``scan``/``while``/``cond`` bodies), so the step is a call from
native code into Python:

* the generated code loads a function pointer from the process-wide cell
  ``@fg_host_callback_fn`` and calls ``fn(i64 step_index, ptr buffer_addresses)``. The cell is
  registered as a symbol in every process (:func:`register_symbol`) and holds the address of
  one ctypes trampoline; no address is baked into the code, so cached objects
  (``cache.py``) work across processes;
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
the Python function, and copies the checked results into its result buffers. The native call
itself is rendered by ``cpu/host_call.py``; this module holds the planning (``lower_host_call``)
and the process side every call needs (the trampoline and the running calls).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from fungrad.lowering.kernel import Buffer
from fungrad.lowering.steps import HostCallStep

__all__ = ["lower_host_call", "host_steps", "running", "raise_failure", "register_symbol",
           "SYMBOL"]

SYMBOL = "fg_host_callback_fn"
"""The cell generated code loads the trampoline's address from."""


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


def lower_host_call(ctx, what: str, run, operands, result_avals) -> list:
    """The lowering of a callback: operands stored, one :class:`HostCallStep` appended,
    the result tensors read its result buffers."""
    planner = ctx.planner
    n = planner._n["host"] = planner._n.get("host", 0) + 1  # shared by sub-programs
    ins = [ctx.materialize(t).buffer for t in operands]
    outs = [planner.new_buffer(a.shape, a.dtype, "temp", f"host{n}.out{k}")
            for k, a in enumerate(result_avals)]
    planner.add_step(HostCallStep(f"host{n}", n, what, run, ins, outs))
    return [planner.buffer_tensor(b, what) for b in outs]


def host_steps(steps) -> dict[int, HostCallStep]:
    """The host steps of ``steps`` and of their control flow's sub-programs, by index."""
    found: dict[int, HostCallStep] = {}
    stack = list(steps)
    while stack:
        s = stack.pop()
        if isinstance(s, HostCallStep):
            found[s.index] = s
            continue
        for attr in ("cond", "body"):
            sub = getattr(s, attr, None)
            if isinstance(sub, list):
                stack.extend(sub)
        for branch in getattr(s, "branches", None) or ():
            if isinstance(branch, list):
                stack.extend(branch)
    return found


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
                from fungrad.lowering.cpu import compiler as cpu
                from fungrad.lowering.cpu import llvm_capi
                cpu.host()  # initialises LLVM
                with cpu.llvm_lock:
                    llvm_capi.add_symbol(SYMBOL, ctypes.addressof(_cell))
                _registered = True
