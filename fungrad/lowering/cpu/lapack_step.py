"""LLVM rendering of the dense linear algebra steps (``steps.CholeskyStep``,
``steps.TriangularSolveStep``, ``steps.LuStep``) as calls to numpy's LAPACK (``lapack.py``).

Each step becomes one function looping over its batch matrices, called once from the entry
point, so the program does not grow with the matrix size or the batch. Buffers are row-major;
``lapack.py``'s docstring says how each routine meets them: ``potrf`` on a row-major buffer
with ``uplo='U'`` factors the row-major lower triangle, and ``trsm`` is cblas with
``CblasRowMajor``. Both write their output in place, so the input is first copied to it.
``getrf`` factors a column-major matrix and the transpose of ours is a different
factorisation, so each matrix is transposed into a column-major work matrix, factored there and
transposed back into the output.

A step with ``complex`` set holds complex numbers as interleaved (re, im) pairs of its buffers'
real dtype (the complex split's ``[..., 2]`` arrays: numpy's complex layout) and calls the
``c``/``z`` routines: offsets count two reals per element, ``trsm``'s ``alpha`` goes by
pointer, and the transposes move pairs.
"""

from __future__ import annotations

import numpy as np

from fungrad import dtypes
from fungrad.lowering.cpu import blas, lapack
from fungrad.lowering.cpu.llvm_types import literal, llvm_type
from fungrad.lowering.steps import CholeskyStep, LuStep, TriangularSolveStep

__all__ = ["render_cholesky", "render_lu", "render_triangular_solve"]

_MEMCPY = "llvm.memcpy.p0.p0.i64"
_MEMSET = "llvm.memset.p0.i64"


def _declare_memory(mw) -> None:
    mw.declare(_MEMCPY, f"declare void @{_MEMCPY}(ptr, ptr, i64, i1)")
    mw.declare(_MEMSET, f"declare void @{_MEMSET}(ptr, i8, i64, i1)")


def _routine(mw, routine: str, dtype, cplx: bool = False) -> tuple[lapack.LapackInfo, str]:
    """Register the LAPACK symbols, declare ``routine``'s for ``dtype`` (its complex dtype when
    ``cplx``); (info, its name)."""
    if cplx:
        dtype = dtypes.complex_dtype(dtype)
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
    not positive definite (``info != 0``) fill it with NaN (complex: NaN + 0i); then zero the
    upper triangle (JAX's result: a NaN lower triangle)."""
    n, batch = step.n, step.batch
    if n == 0 or batch == 0:
        return []
    dt = step.out.dtype
    w = 2 if step.complex else 1  # reals per element
    info, fn = _routine(mw, "potrf", dt, step.complex)
    _declare_memory(mw)
    ty, ity, isz = llvm_type(dt), f"i{info.int_bits}", dt.itemsize * w
    nan = literal(np.nan, dt)
    if step.complex:  # element k: NaN at real 2k, 0 at 2k + 1
        fill = [
            "  %k2 = shl i64 %k, 1",
            f"  %fp = getelementptr inbounds {ty}, ptr %m, i64 %k2",
            f"  store {ty} {nan}, ptr %fp",
            "  %k2i = or i64 %k2, 1",
            f"  %fpi = getelementptr inbounds {ty}, ptr %m, i64 %k2i",
            f"  store {ty} {literal(0.0, dt)}, ptr %fpi",
        ]
        zo = ["  %zo = add i64 %zo0, 1", "  %zoe = shl i64 %zo, 1"]
        zat = "%zoe"
    else:
        fill = [
            f"  %fp = getelementptr inbounds {ty}, ptr %m, i64 %k",
            f"  store {ty} {nan}, ptr %fp",
        ]
        zo, zat = ["  %zo = add i64 %zo0, 1"], "%zo"
    body = [
        f"  %off = mul i64 %b, {n * n * w}",
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
        *zo,
        f"  %zp = getelementptr inbounds {ty}, ptr %m, i64 {zat}",
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
        *fill,
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
    """Copy ``b`` to ``out``, then per matrix pair: cblas ``trsm`` (row-major) in place
    (complex: ``op(a)`` may be ``aᴴ``, ``conjugate_a``; ``alpha = 1`` by pointer)."""
    rows, cols, batch = step.rows, step.cols, step.batch
    if rows == 0 or cols == 0 or batch == 0:
        return []
    dt = step.out.dtype
    w = 2 if step.complex else 1  # reals per element
    info, fn = _routine(mw, "trsm", dt, step.complex)
    _declare_memory(mw)
    ty, ity = llvm_type(dt), f"i{info.int_bits}"
    m = rows if step.left_side else cols
    side = lapack.CBLAS_LEFT if step.left_side else lapack.CBLAS_RIGHT
    uplo = lapack.CBLAS_LOWER if step.lower else lapack.CBLAS_UPPER
    trans = blas.CBLAS_TRANS if step.transpose_a else blas.CBLAS_NO_TRANS
    if step.complex and step.transpose_a and step.conjugate_a:
        trans = lapack.CBLAS_CONJ_TRANS
    diag = lapack.CBLAS_UNIT if step.unit_diagonal else lapack.CBLAS_NON_UNIT
    alpha, entry = f"{ty} {literal(1.0, dt)}", []
    if step.complex:  # cblas takes a complex alpha by pointer
        alpha = "ptr %alpha"
        entry = [
            f"  %alpha = alloca [2 x {ty}]",
            f"  store {ty} {literal(1.0, dt)}, ptr %alpha",
            f"  %alpha.im = getelementptr inbounds {ty}, ptr %alpha, i64 1",
            f"  store {ty} {literal(0.0, dt)}, ptr %alpha.im",
        ]
    body = [
        f"  %aoff = mul i64 %b, {m * m * w}",
        f"  %pa = getelementptr inbounds {ty}, ptr %a, i64 %aoff",
        f"  %xoff = mul i64 %b, {rows * cols * w}",
        f"  %px = getelementptr inbounds {ty}, ptr %out, i64 %xoff",
        f"  call void @{fn}(i32 {blas.CBLAS_ROW_MAJOR}, i32 {side}, i32 {uplo}, i32 {trans}, "
        f"i32 {diag}, {ity} {rows}, {ity} {cols}, {alpha}, ptr %pa, "
        f"{ity} {m}, ptr %px, {ity} {cols})",
        "  br label %next",
    ]
    lines = [
        f"define internal void @{step.name}(ptr %a, ptr %x0, ptr %out) nounwind {{",
        "entry:",
        *entry,
        f"  call void @{_MEMCPY}(ptr %out, ptr %x0, i64 {step.out.nbytes}, i1 false)",
        *_batch_loop(body, batch),
        "}",
        "",
    ]
    mw.add_function("\n".join(lines), ((step.name, "void", "ptr, ptr, ptr"),), glue=True)
    args = f"ptr {ptr[step.a.id]}, ptr {ptr[step.b.id]}, ptr {ptr[step.out.id]}"
    return [f"  call void @{step.name}({args})"]


def _for(tag: str, count, body: list[str], start="0", step: int = 1) -> list[str]:
    """Lines running ``body`` (which falls through; it may hold loops of its own) for the i64
    ``%{tag}`` from ``start`` while below ``count`` (literals or i64 values) by ``step``,
    entered from the current block."""
    return [
        f"  br label %{tag}.pre",
        f"{tag}.pre:",
        f"  br label %{tag}.head",
        f"{tag}.head:",
        f"  %{tag} = phi i64 [{start}, %{tag}.pre], [%{tag}.next, %{tag}.latch]",
        f"  %{tag}.more = icmp slt i64 %{tag}, {count}",
        f"  br i1 %{tag}.more, label %{tag}.body, label %{tag}.exit",
        f"{tag}.body:",
        *body,
        f"  br label %{tag}.latch",
        f"{tag}.latch:",
        f"  %{tag}.next = add i64 %{tag}, {step}",
        f"  br label %{tag}.head",
        f"{tag}.exit:",
    ]


_TILE = 16  # the transpose's square tiles: 16 source and 16 destination cache lines (float32)


def _transpose_function(name: str, ty: str, align: str = "") -> str:
    """``void @name(ptr src, ptr dst, i64 rows, i64 cols)``: ``dst[j, i] = src[i, j]`` for the
    row-major ``rows x cols`` ``src``, tile by tile (both sides stay in cache: a plain double
    loop writes with a stride of ``rows``). In the optimised module: it runs per element.
    ``align`` (``", align 4"``) states the elements' alignment where ``ty``'s own is larger (a
    complex element as a vector of two reals)."""
    inner = _for(
        "i",
        "%iend",
        [
            "  %srow = mul i64 %i, %cols",
            *_for(
                "j",
                "%jend",
                [
                    "  %s = add i64 %srow, %j",
                    f"  %ps = getelementptr inbounds {ty}, ptr %src, i64 %s",
                    f"  %v = load {ty}, ptr %ps{align}",
                    "  %d0 = mul i64 %j, %rows",
                    "  %d = add i64 %d0, %i",
                    f"  %pd = getelementptr inbounds {ty}, ptr %dst, i64 %d",
                    f"  store {ty} %v, ptr %pd{align}",
                ],
                start="%jb",
            ),
        ],
        start="%ib",
    )
    body = _for(
        "ib",
        "%rows",
        [
            f"  %iend0 = add i64 %ib, {_TILE}",
            "  %iend = call i64 @llvm.smin.i64(i64 %iend0, i64 %rows)",
            *_for(
                "jb",
                "%cols",
                [
                    f"  %jend0 = add i64 %jb, {_TILE}",
                    "  %jend = call i64 @llvm.smin.i64(i64 %jend0, i64 %cols)",
                    *inner,
                ],
                step=_TILE,
            ),
        ],
        step=_TILE,
    )
    lines = [
        f"define internal void @{name}(ptr noalias %src, ptr noalias %dst, i64 %rows, "
        "i64 %cols) nounwind {",
        "entry:",
        *body,
        "  ret void",
        "}",
        "",
    ]
    return "\n".join(lines)


def render_lu(mw, step: LuStep, ptr: dict[int, str]) -> list[str]:
    """Per matrix: transpose ``a`` into the column-major work matrix, ``getrf`` there, transpose
    the factors back into ``lu``; the library's 1-based pivots become 0-based int32 ``pivots``
    and the swaps they make, applied to ``0..m-1``, the ``permutation``. A singular matrix
    (``info > 0``) keeps LAPACK's factors: an exact zero on U's diagonal, no error."""
    m, n, batch = step.m, step.n, step.batch
    if m == 0 or batch == 0:
        return []
    k = min(m, n)
    dt = step.lu.dtype
    ty = llvm_type(dt)
    if n == 0:  # nothing to factor: no pivots, the identity permutation
        return _render_identity_permutation(mw, step, ptr)
    info, fn = _routine(mw, "getrf", dt, step.complex)
    ity = f"i{info.int_bits}"
    transpose = f"{step.name}_transpose"
    mw.declare("llvm.smin.i64", "declare i64 @llvm.smin.i64(i64, i64)")
    if step.complex:  # a complex element moves as a vector of its two reals
        fn_text = _transpose_function(transpose, f"<2 x {ty}>", f", align {dt.itemsize}")
    else:
        fn_text = _transpose_function(transpose, ty)
    mw.add_function(fn_text, ((transpose, "void", "ptr, ptr, i64, i64"),))
    body = [
        f"  %off = mul i64 %b, {m * n * (2 if step.complex else 1)}",
        f"  %pa = getelementptr inbounds {ty}, ptr %a, i64 %off",
        f"  %pl = getelementptr inbounds {ty}, ptr %lu, i64 %off",
        f"  call void @{transpose}(ptr %pa, ptr %work, i64 {m}, i64 {n})",
        f"  call void @{fn}(ptr %m, ptr %n, ptr %work, ptr %m, ptr %ipiv, ptr %info)",
        f"  call void @{transpose}(ptr %work, ptr %pl, i64 {n}, i64 {m})",
        f"  %poff = mul i64 %b, {k}",
        "  %pp = getelementptr inbounds i32, ptr %piv, i64 %poff",
        f"  %qoff = mul i64 %b, {m}",
        "  %pq = getelementptr inbounds i32, ptr %perm, i64 %qoff",
        *_for(
            "t",
            k,
            [
                f"  %pt = getelementptr inbounds {ity}, ptr %ipiv, i64 %t",
                f"  %v = load {ity}, ptr %pt",
                *(["  %v32 = trunc i64 %v to i32"] if ity == "i64" else ["  %v32 = add i32 %v, 0"]),
                "  %v0 = sub i32 %v32, 1",
                "  %pd = getelementptr inbounds i32, ptr %pp, i64 %t",
                "  store i32 %v0, ptr %pd",
            ],
        ),
        *_permutation_lines(m, k),
    ]
    lines = [
        f"define internal void @{step.name}(ptr %a, ptr %lu, ptr %piv, ptr %perm, ptr %work, "
        "ptr %ipiv) nounwind {",
        "entry:",
        f"  %m = alloca {ity}",
        f"  store {ity} {m}, ptr %m",
        f"  %n = alloca {ity}",
        f"  store {ity} {n}, ptr %n",
        f"  %info = alloca {ity}",
        *_for("b", batch, body),
        "  ret void",
        "}",
        "",
    ]
    mw.add_function(
        "\n".join(lines), ((step.name, "void", "ptr, ptr, ptr, ptr, ptr, ptr"),), glue=True
    )
    bufs = (step.a, step.lu, step.pivots, step.permutation, step.work, step.ipiv)
    return [f"  call void @{step.name}({', '.join(f'ptr {ptr[b.id]}' for b in bufs)})"]


def _permutation_lines(m: int, k: int) -> list[str]:
    """Lines filling ``%pq`` (``m`` int32) with ``0..m-1`` and applying the swaps
    ``s <-> %pp[s]`` (int32 pivots) for ``s < k``."""
    fill = _for(
        "q",
        m,
        [
            "  %q32 = trunc i64 %q to i32",
            "  %pqq = getelementptr inbounds i32, ptr %pq, i64 %q",
            "  store i32 %q32, ptr %pqq",
        ],
    )
    if k == 0:
        return fill
    swaps = _for(
        "s",
        k,
        [
            "  %ps = getelementptr inbounds i32, ptr %pp, i64 %s",
            "  %p32 = load i32, ptr %ps",
            "  %p = sext i32 %p32 to i64",
            "  %x1 = getelementptr inbounds i32, ptr %pq, i64 %s",
            "  %x2 = getelementptr inbounds i32, ptr %pq, i64 %p",
            "  %y1 = load i32, ptr %x1",
            "  %y2 = load i32, ptr %x2",
            "  store i32 %y2, ptr %x1",
            "  store i32 %y1, ptr %x2",
        ],
    )
    return fill + swaps


def _render_identity_permutation(mw, step: LuStep, ptr: dict[int, str]) -> list[str]:
    """An ``m x 0`` matrix per batch entry: no pivots, ``permutation = 0..m-1``."""
    m, batch = step.m, step.batch
    body = [
        f"  %qoff = mul i64 %b, {m}",
        "  %pq = getelementptr inbounds i32, ptr %perm, i64 %qoff",
    ]
    body += _permutation_lines(m, 0)
    lines = [
        f"define internal void @{step.name}(ptr %perm) nounwind {{",
        "entry:",
        *_for("b", batch, body),
        "  ret void",
        "}",
        "",
    ]
    mw.add_function("\n".join(lines), ((step.name, "void", "ptr"),), glue=True)
    return [f"  call void @{step.name}(ptr {ptr[step.permutation.id]})"]
