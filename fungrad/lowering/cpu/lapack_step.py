"""LLVM rendering of the dense linear algebra steps (``steps.CholeskyStep``,
``steps.TriangularSolveStep``) as calls to numpy's LAPACK (``lapack.py``).

Each step becomes one function looping over its batch matrices, called once from the entry
point, so the program does not grow with the matrix size or the batch. Buffers are row-major;
``lapack.py``'s docstring says how each routine meets them: ``potrf`` on a row-major buffer
with ``uplo='U'`` factors the row-major lower triangle, and ``trsm`` is cblas with
``CblasRowMajor``. Both write their output in place, so the input is first copied to it.
"""

from __future__ import annotations

import numpy as np

from fungrad.lowering.cpu import blas, lapack
from fungrad.lowering.cpu.llvm_types import literal, llvm_type
from fungrad.lowering.steps import CholeskyStep, TriangularSolveStep

__all__ = ["render_cholesky", "render_triangular_solve"]

_MEMCPY = "llvm.memcpy.p0.p0.i64"
_MEMSET = "llvm.memset.p0.i64"


def _declare_memory(mw) -> None:
    mw.declare(_MEMCPY, f"declare void @{_MEMCPY}(ptr, ptr, i64, i1)")
    mw.declare(_MEMSET, f"declare void @{_MEMSET}(ptr, i8, i64, i1)")


def _routine(mw, routine: str, dtype) -> tuple[lapack.LapackInfo, str]:
    """Register the LAPACK symbols, declare ``routine``'s for ``dtype``; (info, its name)."""
    info = lapack.register_llvm_symbols()
    info.function(routine, dtype)  # raises LapackUnavailableError naming it when missing
    name = info.llvm_name(routine, dtype)
    mw.declare(name, info.decl(routine, dtype))
    return info, name


def _batch_loop(body: list[str], batch: int) -> list[str]:
    """Lines running ``body`` (which may branch, ending with ``br label %next``) for
    ``%b`` in ``[0, batch)``."""
    return [
        "  br label %head",
        "head:",
        "  %b = phi i64 [0, %entry], [%b.next, %next]",
        f"  %more = icmp slt i64 %b, {batch}",
        "  br i1 %more, label %body, label %exit",
        "body:",
        *body,
        "next:",
        "  %b.next = add i64 %b, 1",
        "  br label %head",
        "exit:",
        "  ret void",
    ]


def render_cholesky(mw, step: CholeskyStep, ptr: dict[int, str]) -> list[str]:
    """Copy ``a`` to ``out``, then per matrix: ``potrf``; where LAPACK reports the matrix is
    not positive definite (``info != 0``) fill it with NaN; then zero the upper triangle
    (JAX's result: a NaN lower triangle)."""
    n, batch = step.n, step.batch
    if n == 0 or batch == 0:
        return []
    dt = step.out.dtype
    info, fn = _routine(mw, "potrf", dt)
    _declare_memory(mw)
    ty, ity, isz = llvm_type(dt), f"i{info.int_bits}", dt.itemsize
    nan = literal(np.nan, dt)
    body = [
        f"  %off = mul i64 %b, {n * n}",
        f"  %m = getelementptr inbounds {ty}, ptr %out, i64 %off",
        f"  store {ity} 0, ptr %info",
        # row-major lower = column-major upper: uplo 'U'
        f"  call void @{fn}(ptr %uplo, ptr %n, ptr %m, ptr %n, ptr %info, i64 1)",
        f"  %st = load {ity}, ptr %info",
        f"  %bad = icmp ne {ity} %st, 0",
        "  br i1 %bad, label %fill, label %zero",
        "zero:",
        "  br label %zhead",
        "zhead:",
        "  %i = phi i64 [0, %zero], [%i.next, %zbody]",
        f"  %zmore = icmp slt i64 %i, {n - 1}",
        "  br i1 %zmore, label %zbody, label %next",
        "zbody:",
        "  %i.next = add i64 %i, 1",
        f"  %zo0 = mul i64 %i, {n + 1}",
        "  %zo = add i64 %zo0, 1",
        f"  %zp = getelementptr inbounds {ty}, ptr %m, i64 %zo",
        f"  %zl0 = sub i64 {n - 1}, %i",
        f"  %zl = mul i64 %zl0, {isz}",
        f"  call void @{_MEMSET}(ptr %zp, i8 0, i64 %zl, i1 false)",
        "  br label %zhead",
        "fill:",
        "  br label %fhead",
        "fhead:",
        "  %k = phi i64 [0, %fill], [%k.next, %fbody]",
        f"  %fmore = icmp slt i64 %k, {n * n}",
        "  br i1 %fmore, label %fbody, label %zero",
        "fbody:",
        f"  %fp = getelementptr inbounds {ty}, ptr %m, i64 %k",
        f"  store {ty} {nan}, ptr %fp",
        "  %k.next = add i64 %k, 1",
        "  br label %fhead",
    ]
    lines = [
        f"define internal void @{step.name}(ptr %a, ptr %out) nounwind {{",
        "entry:",
        "  %uplo = alloca i8",
        f"  store i8 {ord('U')}, ptr %uplo",
        f"  %n = alloca {ity}",
        f"  store {ity} {n}, ptr %n",
        f"  %info = alloca {ity}",
        f"  call void @{_MEMCPY}(ptr %out, ptr %a, i64 {step.out.nbytes}, i1 false)",
        *_batch_loop(body, batch),
        "}",
        "",
    ]
    mw.add_function("\n".join(lines), ((step.name, "void", "ptr, ptr"),), glue=True)
    return [f"  call void @{step.name}(ptr {ptr[step.a.id]}, ptr {ptr[step.out.id]})"]


def render_triangular_solve(mw, step: TriangularSolveStep, ptr: dict[int, str]) -> list[str]:
    """Copy ``b`` to ``out``, then per matrix pair: cblas ``trsm`` (row-major) in place."""
    rows, cols, batch = step.rows, step.cols, step.batch
    if rows == 0 or cols == 0 or batch == 0:
        return []
    dt = step.out.dtype
    info, fn = _routine(mw, "trsm", dt)
    _declare_memory(mw)
    ty, ity = llvm_type(dt), f"i{info.int_bits}"
    m = rows if step.left_side else cols
    side = lapack.CBLAS_LEFT if step.left_side else lapack.CBLAS_RIGHT
    uplo = lapack.CBLAS_LOWER if step.lower else lapack.CBLAS_UPPER
    trans = blas.CBLAS_TRANS if step.transpose_a else blas.CBLAS_NO_TRANS
    diag = lapack.CBLAS_UNIT if step.unit_diagonal else lapack.CBLAS_NON_UNIT
    body = [
        f"  %aoff = mul i64 %b, {m * m}",
        f"  %pa = getelementptr inbounds {ty}, ptr %a, i64 %aoff",
        f"  %xoff = mul i64 %b, {rows * cols}",
        f"  %px = getelementptr inbounds {ty}, ptr %out, i64 %xoff",
        f"  call void @{fn}(i32 {blas.CBLAS_ROW_MAJOR}, i32 {side}, i32 {uplo}, i32 {trans}, "
        f"i32 {diag}, {ity} {rows}, {ity} {cols}, {ty} {literal(1.0, dt)}, ptr %pa, "
        f"{ity} {m}, ptr %px, {ity} {cols})",
        "  br label %next",
    ]
    lines = [
        f"define internal void @{step.name}(ptr %a, ptr %x0, ptr %out) nounwind {{",
        "entry:",
        f"  call void @{_MEMCPY}(ptr %out, ptr %x0, i64 {step.out.nbytes}, i1 false)",
        *_batch_loop(body, batch),
        "}",
        "",
    ]
    mw.add_function("\n".join(lines), ((step.name, "void", "ptr, ptr, ptr"),), glue=True)
    args = f"ptr {ptr[step.a.id]}, ptr {ptr[step.b.id]}, ptr {ptr[step.out.id]}"
    return [f"  call void @{step.name}({args})"]
