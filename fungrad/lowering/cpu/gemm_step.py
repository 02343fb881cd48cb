"""LLVM rendering of a product step (``fusion.Gemm``): the CPU's choice between its own gemm
library (``gemm.py``) and numpy's BLAS (``blas.py``), and the calls to them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fungrad.lowering.cpu import blas
from fungrad.lowering.cpu import gemm as matmul
from fungrad.lowering.cpu.llvm_types import literal, llvm_type
from fungrad.lowering.fusion import Gemm

__all__ = ["render_gemm", "splits_over_threads", "uses_library"]


def _batched(step: Gemm) -> bool:
    """A batch of products the library runs one matrix at a time (``_split_batch``)."""
    return step.batch > 1 and matmul.supports(dataclasses.replace(step, batch=1))


def uses_library(step: Gemm) -> bool:
    """Whether ``step`` runs in the own gemm library (else through BLAS): see
    :func:`render_gemm`."""
    batched = _batched(step)
    own = batched or step.b_packed or matmul.supports(step)  # (a packed b: only the library)
    return own or (not blas.find_blas().available and matmul.runs(step))


def render_gemm(mw, step: Gemm, ptr: dict[int, str]) -> list[str]:
    """``c = alpha * op(a) @ op(b) + beta * c0``: float32 products through the own
    register-blocked library (``gemm.py``; it wins at these sizes and fuses the ``c0``
    update), the others through BLAS. A product of ``SERIAL_WORK`` or more that the library
    runs well is split into blocks of ``COLUMN_BLOCK`` columns over the native thread pool
    when the call may use several threads (:func:`_split_columns`; a narrower one into blocks
    of rows, :func:`_split_rows`): OpenBLAS's own threads
    spin, and on a loaded host an LSTM step on two threads took 4.5x its one-thread time
    through them, while the pool backs off to one thread there. Without BLAS (a numpy that
    bundles none) every product the library computes at all runs there."""
    if not uses_library(step):
        return _blas_gemm(mw, step, ptr)
    batched = _batched(step)
    em = mw.ops  # (its counter names the labels and values, unique in the module)
    em.n += 1
    mw.declare(matmul.SYMBOL, matmul.library_decl())
    a, b, c = ptr[step.a.id], ptr[step.b.id], ptr[step.c.id]
    c0 = ptr[(step.c0 or step.c).id]
    if batched:
        return _split_batch(mw, step, f"mm{em.n}", [a, b, c, c0])
    split = _split(step)
    if split == "columns":
        return _split_columns(mw, step, f"mm{em.n}", [a, b, c, c0], -(-step.n // COLUMN_BLOCK))
    if split == "rows":  # a narrow product (a convolution's)
        return _split_rows(mw, step, f"mm{em.n}", [a, b, c, c0], -(-step.m // row_step()))
    return [matmul.library_call(step, a, b, c, c0)]


def _split(step: Gemm) -> str | None:
    """How a product in the library (not batched) is split over threads: ``"columns"``,
    ``"rows"`` or not at all (None: under ``SERIAL_WORK``, or one block either way)."""
    if step.m * step.n * step.k < matmul.SERIAL_WORK:
        return None
    if step.n > COLUMN_BLOCK:
        return "columns"
    return "rows" if step.m > row_step() else None


def splits_over_threads(step: Gemm) -> bool:
    """Whether ``step`` (a product in the library) calls the thread pool: a batch always
    (:func:`_split_batch`), one matrix when :func:`_split` splits it."""
    batched = _batched(step)
    return batched or _split(step) is not None


#: columns of one chunk of a product split over threads (a multiple of the library's panel
#: width, ``gemm.geometry().nr``): each thread packs only its columns of b and reads A in place
COLUMN_BLOCK = 64


def _split_columns(mw, step: Gemm, name: str, pointers: list[str], blocks: int) -> list[str]:
    """The library on column blocks ``[s, e) * COLUMN_BLOCK`` of ``c``, through
    ``mw.parallel_for`` (one call over every block where one thread runs): a trampoline
    ``@<name>.par(ctx, s, e)`` offsets b, c and c0 to the first column and calls the library
    for that many columns with the whole product's leading dimensions."""
    # floats from one column of op(b) to the next (a packed b: k per column, gemm.pack_b)
    b_step = step.k if step.trans_b or step.b_packed else 1
    text = (
        f"{_trampoline_head(name, COLUMN_BLOCK, step.n)}"
        f"  %bo = mul i64 %n0, {b_step}\n"
        "  %b1 = getelementptr inbounds float, ptr %x1, i64 %bo\n"
        "  %c1 = getelementptr inbounds float, ptr %x2, i64 %n0\n"
        "  %d1 = getelementptr inbounds float, ptr %x3, i64 %n0\n"
        f"{matmul.block_call(step, '%len', '%x0', '%b1', '%c1', '%d1')}\n"
    )
    return _over_threads(mw, name, text, pointers, blocks)


def row_step() -> int:
    """Rows of one item of a narrow product split over threads: two register tiles (the
    library packs A^T two row tiles at a time; 16 rows with AVX-512, 12 with AVX2). The pool
    runs one contiguous range of items per thread, one library call each, so each thread
    packs b once."""
    return 2 * matmul.geometry().mr


def _split_rows(mw, step: Gemm, name: str, pointers: list[str], items: int) -> list[str]:
    """The library on row blocks ``[s, e) * row_step()`` of ``c`` through ``mw.parallel_for``,
    for products too narrow for column blocks (at most ``COLUMN_BLOCK`` columns: the
    convolutions' ``[N*H*W, C]`` outputs): a trampoline ``@<name>.par(ctx, s, e)`` offsets A
    (a row of A, or a column of A^T), c and c0 to the first row and calls the library for that
    many rows with the whole product's leading dimensions."""
    a_step = 1 if step.trans_a else step.k  # floats from one row of op(A) to the next
    text = (
        f"{_trampoline_head(name, row_step(), step.m)}"
        f"  %ao = mul i64 %n0, {a_step}\n"
        f"  %co = mul i64 %n0, {step.n}\n"
        "  %a1 = getelementptr inbounds float, ptr %x0, i64 %ao\n"
        "  %c1 = getelementptr inbounds float, ptr %x2, i64 %co\n"
        "  %d1 = getelementptr inbounds float, ptr %x3, i64 %co\n"
        f"{matmul.block_call(step, step.n, '%a1', '%x1', '%c1', '%d1', m='%len')}\n"
    )
    return _over_threads(mw, name, text, pointers, items)


def _split_batch(mw, step: Gemm, name: str, pointers: list[str]) -> list[str]:
    """A batch of products the library runs well, one library call per matrix, the batch
    split over the native thread pool (``mw.parallel_for``) where several threads may run:
    a trampoline ``@<name>.par(ctx, s, e)`` runs matrices ``[s, e)`` (the transformer's 32
    attention products of 128x64 @ 64x128 went one by one to BLAS)."""
    m, n, k = step.m, step.n, step.k
    text = (
        f"define internal void @{name}.par(ptr %ctx, i64 %s, i64 %e) {{\nentry:\n"
        f"{_context_loads(4)}\n"
        "  br label %head\n"
        "head:\n"
        "  %i = phi i64 [%s, %entry], [%i1, %body]\n"
        "  %more = icmp slt i64 %i, %e\n"
        "  br i1 %more, label %body, label %done\n"
        "body:\n"
        f"  %ao = mul i64 %i, {m * k}\n"
        f"  %bo = mul i64 %i, {k * n}\n"
        f"  %co = mul i64 %i, {m * n}\n"
        "  %a1 = getelementptr inbounds float, ptr %x0, i64 %ao\n"
        "  %b1 = getelementptr inbounds float, ptr %x1, i64 %bo\n"
        "  %c1 = getelementptr inbounds float, ptr %x2, i64 %co\n"
        "  %d1 = getelementptr inbounds float, ptr %x3, i64 %co\n"
        f"{matmul.block_call(step, n, '%a1', '%b1', '%c1', '%d1')}\n"
        "  %i1 = add i64 %i, 1\n"
        "  br label %head\n"
        "done:\n"
    )
    return _over_threads(mw, name, text, pointers, step.batch)


def _over_threads(mw, name: str, body: str, pointers: list[str], items: int) -> list[str]:
    """Adds the trampoline ``@<name>.par`` (``body`` and its ``ret``) to the glue and returns
    the entry lines running it over ``[0, items)`` (``mw.parallel_for``)."""
    text = body + "  ret void\n}\n"
    mw.add_function(text, ((f"{name}.par", "void", "ptr, i64, i64"),), glue=True)
    return mw.parallel_for(f"{name}.par", pointers, items, name)


def _trampoline_head(name: str, block: int, extent: int) -> str:
    """The start of ``@<name>.par(ctx, s, e)`` over blocks ``[s, e)`` of ``block`` rows or
    columns: the four pointers ``%x0-3`` (A, b, c, c0) loaded from ``ctx``, the first index
    ``%n0 = s * block`` and the count ``%len`` (the last block clipped to ``extent``)."""
    return (
        f"define internal void @{name}.par(ptr %ctx, i64 %s, i64 %e) {{\nentry:\n"
        f"{_context_loads(4)}\n"
        f"  %n0 = mul i64 %s, {block}\n"
        f"  %n1a = mul i64 %e, {block}\n"
        f"  %over = icmp ugt i64 %n1a, {extent}\n"
        f"  %n1 = select i1 %over, i64 {extent}, i64 %n1a\n"
        "  %len = sub i64 %n1, %n0\n"
    )


def _context_loads(count: int) -> str:
    """IR loading ``%x0 ... %x<count-1>`` from the pointer array ``%ctx``."""
    return "\n".join(
        f"  %p{i} = getelementptr inbounds ptr, ptr %ctx, i64 {i}\n  %x{i} = load ptr, ptr %p{i}"
        for i in range(count)
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
