"""MPI collectives in CPU code: a ``steps.CollectiveStep`` is one direct call into the MPI
library that mpi4py loaded, from the native entry function (no Python, no copy).

* The library: the MPI functions are looked up through mpi4py's extension module
  (``ctypes.CDLL(MPI.__file__)``: the dynamic linker searches the module's dependencies, i.e.
  the ``libmpi`` mpi4py was built against and loaded: the ``mpich`` wheel's, or a system MPI),
  and registered for LLVM as ``fg_MPI_<name>`` (:func:`register_symbols`, once per process).
  mpi4py is imported only here, when a collective over a process axis is rendered.
* Handles (communicator, datatype, reduction op) are baked into the code as integer
  constants of their C width (``MPI._sizeof``: ``int`` in MPICH and the standard ABI, a
  pointer in Open MPI; both travel in an integer register). A cached object's key is its IR
  text, so a handle that differs in another process is a cache miss, never a stale handle.
* Datatypes: reductions use the operand's MPI type (``MPI._typedict``; bool ``C_BOOL``);
  the others move bytes (``MPI.BYTE``, the count in bytes), so every dtype travels unchanged.
* Return codes: mpi4py sets ``MPI_ERRORS_RETURN`` on its communicators, so an MPI error comes
  back as a nonzero code. The generated code then stores the code and the step's number in
  ``@fg_mpi_status`` and returns :data:`FAILED` from the entry function at once (no later
  step runs); the executable raises :func:`failure` (a RuntimeError with MPI's error string),
  which ``fungrad.distributed``'s hook turns into an abort of the job, so no rank hangs.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from fungrad.lowering.fusion import LoweringError
from fungrad.lowering.steps import CollectiveStep

__all__ = ["FAILED", "STATUS_SYMBOL", "failure", "register_symbols", "render_collective"]

FAILED = -2
"""What the entry function returns when an MPI call failed (a host callback's is -1)."""

STATUS_SYMBOL = "fg_mpi_status"
"""Two int32: the failing call's return code and its step's number."""

_FUNCTIONS = ("Allreduce", "Allgather", "Reduce_scatter_block", "Sendrecv", "Alltoall")
_status = (ctypes.c_int32 * 2)()
_registered = False
_lock = threading.Lock()
_steps: dict[int, str] = {}  # step number -> its description, for failure()


def _mpi():
    from mpi4py import MPI

    return MPI


def register_symbols() -> None:
    """Make ``@fg_MPI_<function>`` and ``@fg_mpi_status`` resolvable in code loaded from now
    on (idempotent, thread safe)."""
    global _registered
    if _registered:
        return
    from fungrad.lowering.cpu import compiler as cpu
    from fungrad.lowering.cpu import llvm_capi

    with _lock:
        if _registered:
            return
        MPI = _mpi()
        if not MPI.Is_initialized():
            raise LoweringError("a collective over processes: MPI is not initialized")
        lib = ctypes.CDLL(MPI.__file__)
        addresses = {
            f: ctypes.cast(getattr(lib, f"MPI_{f}"), ctypes.c_void_p).value for f in _FUNCTIONS
        }
        cpu.host()  # initialises LLVM
        with cpu.llvm_lock:
            for f, address in addresses.items():
                llvm_capi.add_symbol(f"fg_MPI_{f}", address)
            llvm_capi.add_symbol(STATUS_SYMBOL, ctypes.addressof(_status))
        _registered = True


def _int_type(cls) -> str:
    return f"i{8 * _mpi()._sizeof(cls)}"


def _handle(obj, cls) -> str:
    """``obj``'s handle as an LLVM integer literal of ``cls``'s width (two's complement)."""
    bits = 8 * _mpi()._sizeof(cls)
    v = _mpi()._handleof(obj) & ((1 << bits) - 1)
    return str(v - (1 << bits) if v >> (bits - 1) else v)


def _datatype(dtype: np.dtype, reduces: bool):
    """The MPI datatype of one element (``reduces``) or None: move bytes."""
    MPI = _mpi()
    if not reduces:
        return None
    dt = MPI.C_BOOL if dtype == np.bool_ else MPI._typedict.get(dtype.char)
    if dt is None:
        raise LoweringError(f"MPI has no datatype to reduce {dtype.name} in")
    return dt


def _declarations() -> dict[str, str]:
    d, o, c = (_int_type(k) for k in (_mpi().Datatype, _mpi().Op, _mpi().Comm))
    return {
        "Allreduce": f"declare i32 @fg_MPI_Allreduce(ptr, ptr, i32, {d}, {o}, {c})",
        "Allgather": f"declare i32 @fg_MPI_Allgather(ptr, i32, {d}, ptr, i32, {d}, {c})",
        "Reduce_scatter_block": (
            f"declare i32 @fg_MPI_Reduce_scatter_block(ptr, ptr, i32, {d}, {o}, {c})"
        ),
        "Sendrecv": (
            f"declare i32 @fg_MPI_Sendrecv(ptr, i32, {d}, i32, i32, ptr, i32, {d}, i32, i32, "
            f"{c}, ptr)"
        ),
        "Alltoall": f"declare i32 @fg_MPI_Alltoall(ptr, i32, {d}, ptr, i32, {d}, {c})",
    }


_KIND_FUNCTION = {
    "allreduce": "Allreduce",
    "allgather": "Allgather",
    "reduce_scatter": "Reduce_scatter_block",
    "sendrecv": "Sendrecv",
    "alltoall": "Alltoall",
}


def render_collective(mw, step: CollectiveStep, ptr: dict[int, str]) -> list[str]:
    """The call of ``step``'s MPI function on its buffers, and the return code's check."""
    if step.count == 0:
        return []  # nothing moves (every rank has the same shapes: checked at compile time)
    MPI = _mpi()
    register_symbols()
    fn = _KIND_FUNCTION[step.kind]
    mw.declare(f"fg_MPI_{fn}", _declarations()[fn])
    mw.declare(STATUS_SYMBOL, f"@{STATUS_SYMBOL} = external global [2 x i32]")
    _steps[step.index] = f"{step.name} ({step.describe_body()[0]})"
    reduces = step.kind in ("allreduce", "reduce_scatter")
    dtype = _datatype(step.send.dtype, reduces)
    count = step.count if reduces else step.count * step.send.dtype.itemsize
    if count > 2**31 - 1:
        raise LoweringError(f"{step.name}: {count} bytes per block exceed MPI's int count")
    d = f"{_int_type(MPI.Datatype)} {_handle(MPI.BYTE if dtype is None else dtype, MPI.Datatype)}"
    c = f"{_int_type(MPI.Comm)} {_handle(step.comm, MPI.Comm)}"
    s, r = ptr[step.send.id], ptr[step.recv.id]
    lbl = "mpi" + mw.ops.tmp()[2:]
    lines = []
    if step.kind in ("allreduce", "reduce_scatter"):
        op = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[step.op]
        o = f"{_int_type(MPI.Op)} {_handle(op, MPI.Op)}"
        if step.send is step.recv:  # in place (lowering/collectives.py: _exclusive)
            s = f"inttoptr (i64 {int(MPI.IN_PLACE)} to ptr)"
        call = f"@fg_MPI_{fn}(ptr {s}, ptr {r}, i32 {count}, {d}, {o}, {c})"
    elif step.kind in ("allgather", "alltoall"):
        call = f"@fg_MPI_{fn}(ptr {s}, i32 {count}, {d}, ptr {r}, i32 {count}, {d}, {c})"
    else:
        none = MPI.PROC_NULL
        dest = none if step.dest < 0 else step.dest
        source = none if step.source < 0 else step.source
        lines += [
            f"  %{lbl}.ss = call ptr @llvm.stacksave.p0()",
            f"  %{lbl}.st = alloca i8, i64 {max(MPI._sizeof(MPI.Status), 8)}, align 16",
        ]
        call = (
            f"@fg_MPI_{fn}(ptr {s}, i32 {count}, {d}, i32 {dest}, i32 17, ptr {r}, "
            f"i32 {count}, {d}, i32 {source}, i32 17, {c}, ptr %{lbl}.st)"
        )
    lines.append(f"  %{lbl}.rc = call i32 {call}")
    if step.kind == "sendrecv":
        lines.append(f"  call void @llvm.stackrestore.p0(ptr %{lbl}.ss)")
    return lines + [
        f"  %{lbl}.bad = icmp ne i32 %{lbl}.rc, 0",
        f"  br i1 %{lbl}.bad, label %{lbl}.fail, label %{lbl}.ok",
        f"{lbl}.fail:",
        f"  store i32 %{lbl}.rc, ptr @{STATUS_SYMBOL}",
        f"  %{lbl}.at = getelementptr inbounds i32, ptr @{STATUS_SYMBOL}, i64 1",
        f"  store i32 {step.index}, ptr %{lbl}.at",
        f"  ret i32 {FAILED}",
        f"{lbl}.ok:",
    ]


def failure() -> RuntimeError:
    """The error of the MPI call that made the entry function return :data:`FAILED`."""
    code, index = int(_status[0]), int(_status[1])
    try:
        text = _mpi().Get_error_string(code)
    except Exception:  # noqa: BLE001  (the code is reported either way)
        text = "unknown error"
    where = _steps.get(index, f"collective {index}")
    return RuntimeError(f"jit: the MPI call of {where} failed with code {code}: {text}")
