"""LLVM rendering of an FFT step (``steps.FftStep``) as a call to the FFT library (``fft.py``).

The step's plan (twiddles, chirps) is built here, at compile time, and reached by a symbol the
library registers (``fft.plan_symbol``), so the module's text holds no address. The call gets
the native thread pool (``@fg_parallel_for_fn``, null until a multi-threaded executable enabled
it) and the entry's ``%nthreads``: the library splits a large batch by rows, or each pass of a
large transform, over the threads (``fft.PARALLEL_POINTS``).
"""

from __future__ import annotations

from fungrad.lowering.cpu import fft
from fungrad.lowering.steps import FftStep

__all__ = ["render_fft"]


def render_fft(mw, step: FftStep, ptr: dict[int, str]) -> list[str]:
    """``out = DFT(x)`` row by row (``fg_fft_f32``/``fg_fft_f64``, unscaled), or along the
    middle axis of ``[batch, n, inner]`` (``fg_fft_cols_f32``/``f64``)."""
    from fungrad.lowering.cpu.llvm import POOL_SYMBOL, register_pool_symbol

    n, batch, inner = step.n, step.batch, step.inner
    if n == 0 or batch == 0 or inner == 0:
        return []
    dt = step.out.dtype
    fft.ensure_library(dt)
    plan = fft.plan_symbol(n, dt, step.inverse)
    mw.declare(plan, f"@{plan} = external global i8")
    x, out = ptr[step.x.id], ptr[step.out.id]
    if inner == 1:
        lib = fft.symbol(dt)
        mw.declare(lib, fft.library_decl(dt))
        call = f"@{lib}(ptr @{plan}, ptr {x}, ptr {out}, i64 {batch}"
    else:
        lib = fft.cols_symbol_of(dt)
        mw.declare(lib, fft.cols_decl(dt))
        call = f"@{lib}(ptr @{plan}, ptr {x}, ptr {out}, i64 {batch}, i64 {inner}"
    if batch * n * inner < fft.PARALLEL_POINTS:
        return [f"  call void {call}, ptr null, i64 1)"]
    register_pool_symbol()  # (llvm.render registers it only for its own parallel loops)
    mw.declare(POOL_SYMBOL, f"@{POOL_SYMBOL} = external global ptr")
    pool = f"%{step.name}.pool"
    return [
        f"  {pool} = load ptr, ptr @{POOL_SYMBOL}",
        f"  call void {call}, ptr {pool}, i64 %nthreads)",
    ]
