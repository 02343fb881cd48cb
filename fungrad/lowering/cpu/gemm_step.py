"""LLVM rendering of a product step (``fusion.Gemm``): the CPU's choice between its own gemm
library (``gemm.py``) and numpy's BLAS (``blas.py``), and the calls to them.
"""

from __future__ import annotations

import numpy as np

from fungrad.lowering.cpu import blas
from fungrad.lowering.cpu import gemm as matmul
from fungrad.lowering.cpu.llvm_types import literal, llvm_type
from fungrad.lowering.fusion import Gemm

__all__ = ["render_gemm"]


def render_gemm(mw, step: Gemm, ptr: dict[int, str]) -> list[str]:
    """``c = alpha * op(a) @ op(b) + beta * c0``: small float32 products through the own
    register-blocked kernel (``gemm.py``; it wins below BLAS's blocking sizes and fuses
    the ``c0`` update), the others through BLAS. Large products take BLAS when the call
    may use several threads (BLAS parallelises; the own kernel runs on one core). Without
    BLAS (a numpy that bundles none) every product the library computes at all runs there."""
    have_blas = blas.find_blas().available
    if not (matmul.supports(step) or (not have_blas and matmul.runs(step))):
        return _blas_gemm(mw, step, ptr)
    em = mw.ops  # (its counter names the labels and values, unique in the module)
    em.n += 1
    mw.declare(matmul.SYMBOL, matmul.library_decl())
    c0 = ptr[(step.c0 or step.c).id]
    own = [matmul.library_call(step, ptr[step.a.id], ptr[step.b.id], ptr[step.c.id], c0)]
    if step.m * step.n * step.k < matmul.SERIAL_WORK or not have_blas:
        return own
    t = f"mm{em.n}"
    return (
        [
            f"  %{t}.par = icmp sgt i64 %nthreads, 1",
            f"  br i1 %{t}.par, label %{t}.blas, label %{t}.own",
            f"{t}.blas:",
        ]
        + _blas_gemm(mw, step, ptr)
        + [f"  br label %{t}.done", f"{t}.own:"]
        + own
        + [f"  br label %{t}.done", f"{t}.done:"]
    )


def _blas_gemm(mw, step: Gemm, ptr: dict[int, str]) -> list[str]:
    """A BLAS call per batch matrix (``fg_sgemm`` / ``fg_dgemm``, cblas); a ``c0`` other
    than ``c`` is copied into ``c`` first (BLAS accumulates into its output)."""
    info = blas.register_llvm_symbols()
    dt = step.c.dtype
    single = dt == np.dtype(np.float32)
    sym = "fg_sgemm" if single else "fg_dgemm"
    mw.declare(sym, info.sgemm_decl if single else info.dgemm_decl)
    ty = llvm_type(dt)
    m, n, k = step.m, step.n, step.k
    lda = m if step.trans_a else k
    ldb = k if step.trans_b else n
    ta = 112 if step.trans_a else 111
    tb = 112 if step.trans_b else 111
    alpha, beta = literal(step.alpha, dt), literal(step.beta, dt)
    ity = f"i{info.int_bits}"
    lines = []
    if step.beta and step.c0 is not None and step.c0 is not step.c:
        lines.append(
            f"  call void @llvm.memcpy.p0.p0.i64(ptr {ptr[step.c.id]}, "
            f"ptr {ptr[step.c0.id]}, i64 {step.c.nbytes}, i1 false)"
        )
    isz = dt.itemsize
    for bi in range(step.batch):
        pa, pb, pc = mw.ops.tmp(), mw.ops.tmp(), mw.ops.tmp()
        lines.append(
            f"  {pa} = getelementptr inbounds i8, ptr {ptr[step.a.id]}, i64 {bi * m * k * isz}"
        )
        lines.append(
            f"  {pb} = getelementptr inbounds i8, ptr {ptr[step.b.id]}, i64 {bi * k * n * isz}"
        )
        lines.append(
            f"  {pc} = getelementptr inbounds i8, ptr {ptr[step.c.id]}, i64 {bi * m * n * isz}"
        )
        lines.append(
            f"  call void @{sym}(i32 101, i32 {ta}, i32 {tb}, {ity} {m}, "
            f"{ity} {n}, {ity} {k}, {ty} {alpha}, ptr {pa}, {ity} {lda}, ptr {pb}, "
            f"{ity} {ldb}, {ty} {beta}, ptr {pc}, {ity} {n})"
        )
    return lines
