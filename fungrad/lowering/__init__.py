"""Lowering of jaxprs to native code.

``compile_jaxpr(closed_jaxpr, backend, name)`` looks the backend up in :data:`BACKENDS` and
builds its executable, which optimises the jaxpr (``fungrad.ir.passes``), plans kernels
(``fusion``: which values live in memory, which loops fuse, with the backend's
:class:`~fungrad.lowering.fusion.Policy`) and renders them: LLVM IR compiled to native code
(``cpu/``), or WGSL run through wgpu (``gpu/``). ``kernel`` is the small set of scalar ops
lowering rules produce; the rules themselves live beside their primitives in ``fungrad/lax``.
A new backend is one :class:`Backend` entry in :data:`BACKENDS` (its executable class and
its policy). A program with complex values is first rewritten into real values
(``complex_split``), which both backends then compile as any other program.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import threading

from fungrad.lowering import collectives, complex_split
from fungrad.lowering.cpu.compiler import CompileError
from fungrad.lowering.fusion import LoweringError, Policy


def _load(path: str):
    """The object named by ``"package.module:Name"`` (its module imported on first use)."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class Backend:
    """One backend: its executable class and its :class:`~fungrad.lowering.fusion.Policy`,
    as import paths (``"package.module:Name"``) so that ``import fungrad`` imports neither."""

    def __init__(self, name: str, executable: str, policy: str):
        self.name, self._executable, self._policy = name, executable, policy

    def compile(self, closed, name: str = "main", profile: bool = False):
        """The executable of ``closed`` (a ClosedJaxpr) for this backend; ``profile``: a build
        that times each step for ``fungrad.profile()`` (``lowering/profile.py``)."""
        if profile:
            return _load(self._executable)(closed, name, profile=True)
        return _load(self._executable)(closed, name)

    def policy(self) -> Policy:
        """The backend's policy, as its planner uses it."""
        return _load(self._policy)()

    def __repr__(self):
        return f"Backend({self.name!r})"


#: backend name -> :class:`Backend`; ``jit(f, backend=name)`` compiles through the entry
BACKENDS: dict[str, Backend] = {
    "cpu": Backend(
        "cpu", "fungrad.lowering.cpu.executable:Executable", "fungrad.lowering.cpu.policy:CpuPolicy"
    ),
    "gpu": Backend(
        "gpu",
        "fungrad.lowering.gpu.executable:GpuExecutable",
        "fungrad.lowering.gpu.policy:GpuPolicy",
    ),
}


def compile_jaxpr(
    closed, backend: str | None = "cpu", name: str = "main", *, profile: bool = False
):
    """Compile a ClosedJaxpr for ``backend`` (a key of :data:`BACKENDS`; None: ``"cpu"``):
    an ``Executable`` (native code) for ``"cpu"``, a ``GpuExecutable`` (WGSL through wgpu) for
    ``"gpu"``; for a program with complex values, a ``complex_split.SplitExecutable`` holding
    the backend's executable of its real rewrite. ``profile``: a separate build that times
    each step for ``fungrad.profile()`` (``lowering/profile.py``)."""
    entry = (
        BACKENDS.get("cpu" if backend is None else backend)
        if (backend is None or isinstance(backend, str))
        else None
    )
    if entry is None:
        raise ValueError(
            f"jit: unknown backend {backend!r}; supported backends: {', '.join(BACKENDS)}"
        )
    collectives.install()  # collectives over processes (the rules exist once lax is loaded)
    with collection_paused():
        if complex_split.has_complex(closed):
            compile_real = (
                functools.partial(entry.compile, profile=True) if profile else entry.compile
            )
            return complex_split.SplitExecutable(closed, compile_real, name, entry.name)
        return entry.compile(closed, name, profile)


_gc_lock = threading.Lock()
_gc_state = {"depth": 0, "was_enabled": False}


@contextlib.contextmanager
def collection_paused():
    """Python's cyclic garbage collector off while a program compiles, as it was before
    afterwards. Planning and rendering allocate tens of thousands of small objects (kernel
    expressions, IR lines), and the collections they triggered scanned every object the
    process holds: a third of the transformer step's planning time (~20 of ~55 ms). Nothing
    leaks: objects freed by reference counting still are; cycles made meanwhile wait for the
    next collection. Nested and concurrent compiles share one pause (the outermost ends it)."""
    with _gc_lock:
        if _gc_state["depth"] == 0:
            _gc_state["was_enabled"] = gc.isenabled()
            gc.disable()
        _gc_state["depth"] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_state["depth"] -= 1
            if _gc_state["depth"] == 0 and _gc_state["was_enabled"]:
                gc.enable()


__all__ = ["compile_jaxpr", "Backend", "CompileError", "LoweringError", "BACKENDS"]
