"""Lowering of jaxprs to native code.

``compile_jaxpr(closed_jaxpr, backend, name)`` optimises a jaxpr (``fungrad.ir.passes``),
plans kernels (``fusion``: which values live in memory, which loops fuse), renders LLVM IR
(``llvm`` + ``llvm_ops`` + ``llvm_math``) and compiles it (``cpu``; ``cache`` keeps objects on
disk). ``kernel`` is the small set of scalar ops lowering rules produce; the rules themselves
live beside their primitives in ``fungrad/lax``. ``blas`` calls numpy's OpenBLAS from native
code, ``threads`` and ``runtime`` split large loops across cores, ``abi`` lets native code read
array pointers from Python objects.
"""

from __future__ import annotations

from fungrad.lowering.cpu.compiler import CompileError
from fungrad.lowering.fusion import LoweringError

BACKENDS = ("cpu", "gpu")


def compile_jaxpr(closed, backend: str | None = "cpu", name: str = "main"):
    """Compile a ClosedJaxpr for ``backend``: an :class:`Executable` (native code) for
    ``"cpu"``, a :class:`GpuExecutable` (WGSL through wgpu) for ``"gpu"``."""
    if backend == "gpu":
        from fungrad.lowering.gpu.executable import GpuExecutable
        return GpuExecutable(closed, name)
    from fungrad.lowering.cpu.executable import Executable
    if backend not in (None, "cpu"):
        raise ValueError(f"jit: unknown backend {backend!r}; supported backends: "
                         f"{', '.join(BACKENDS)}")
    return Executable(closed, name)


__all__ = ["compile_jaxpr", "CompileError", "LoweringError", "BACKENDS"]
