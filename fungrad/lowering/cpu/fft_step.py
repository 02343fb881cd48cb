"""LLVM rendering of an FFT step (``steps.FftStep``) as a call to the FFT library (``fft.py``).

The step's plan (twiddles, chirps) is built here, at compile time, and reached by a symbol the
library registers (``fft.plan_symbol``), so the module's text holds no address. A batch of
transforms large enough to pay for a fork-join (``PARALLEL_POINTS``) is split across the
native thread pool (``ModuleWriter.parallel_for``), a contiguous range of rows per chunk; each
chunk allocates its own scratch inside the library.
"""

from __future__ import annotations

from fungrad.lowering.cpu import fft
from fungrad.lowering.cpu.llvm_types import llvm_type
from fungrad.lowering.steps import FftStep

__all__ = ["render_fft", "PARALLEL_POINTS"]

PARALLEL_POINTS = 1 << 15
"""Complex points (batch x n) from which a batch of two or more transforms runs on threads."""


def render_fft(mw, step: FftStep, ptr: dict[int, str]) -> list[str]:
    """``out = DFT(x)`` row by row (``fg_fft_f32``/``fg_fft_f64``, unscaled)."""
    n, batch = step.n, step.batch
    if n == 0 or batch == 0:
        return []
    dt = step.out.dtype
    fft.ensure_library(dt)
    lib = fft.symbol(dt)
    mw.declare(lib, fft.library_decl(dt))
    plan = fft.plan_symbol(n, dt, step.inverse)
    mw.declare(plan, f"@{plan} = external global i8")
    x, out = ptr[step.x.id], ptr[step.out.id]
    if batch < 2 or batch * n < PARALLEL_POINTS:
        return [f"  call void @{lib}(ptr @{plan}, ptr {x}, ptr {out}, i64 {batch})"]
    ty = llvm_type(dt)
    fn = f"{step.name}.par"
    mw.add_function(
        "\n".join(
            [
                f"define internal void @{fn}(ptr %ctx, i64 %s, i64 %e) nounwind {{",
                "entry:",
                "  %x = load ptr, ptr %ctx",
                "  %op = getelementptr inbounds ptr, ptr %ctx, i64 1",
                "  %out = load ptr, ptr %op",
                f"  %off = mul i64 %s, {2 * n}",
                f"  %xs = getelementptr inbounds {ty}, ptr %x, i64 %off",
                f"  %os = getelementptr inbounds {ty}, ptr %out, i64 %off",
                "  %rows = sub i64 %e, %s",
                f"  call void @{lib}(ptr @{plan}, ptr %xs, ptr %os, i64 %rows)",
                "  ret void",
                "}",
                "",
            ]
        ),
        ((fn, "void", "ptr, i64, i64"),),
        glue=True,
    )
    return mw.parallel_for(fn, [x, out], batch, step.name)
