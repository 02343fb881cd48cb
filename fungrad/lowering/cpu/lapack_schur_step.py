"""LLVM rendering of ``steps.SchurStep`` and ``steps.HessenbergStep`` as calls to numpy's
LAPACK (``lapack.py``): ``gees`` (unsorted, no selection function) and ``gehrd``
(``ilo = 1``, ``ihi = n``), real (``s``/``d``) or, for ``complex`` steps of interleaved
(re, im) buffers, complex (``c``/``z``).

As for ``geev`` (``lapack_decomp_step.py``), a row-major matrix is to LAPACK its transpose,
which has a different Schur form and Hessenberg reduction: each matrix is transposed into a
column-major scratch copy, decomposed there, and the results are transposed out. One function
loops over the step's batch, called once from the entry point, with its scratch allocated once
per call; workspace sizes come from LAPACK's own query at compile time. Where LAPACK reports
failure (``info != 0``: no convergence), the matrix's results are NaN, as JAX returns.
"""

from __future__ import annotations

import numpy as np

from fungrad.lowering.cpu import lapack
from fungrad.lowering.cpu.lapack_decomp_step import (
    _add_helpers,
    _align,
    _char_slots,
    _chars,
    _declare_alloc,
    _elements,
    _function,
    _int_slots,
)
from fungrad.lowering.cpu.lapack_step import _routine
from fungrad.lowering.cpu.llvm_types import literal
from fungrad.lowering.steps import HessenbergStep, SchurStep

__all__ = ["render_hessenberg", "render_schur"]


def _gees_lwork(dtype, n: int, vectors: bool) -> int:
    """``gees``'s workspace for an ``n x n`` matrix, from LAPACK's query on a zero matrix."""
    info = lapack.find_lapack()
    fn = info.function("gees", dtype)
    ints = lapack._Ints(info.int_bits)
    P = lapack._ptr
    rdt = np.float32 if dtype in (np.float32, np.complex64) else np.float64
    a, vs = np.zeros((n, n), dtype), np.zeros((n, n), dtype)
    eig = [np.zeros(n, dtype)] if dtype.kind == "c" else [np.zeros(n, dtype)] * 2
    rwork = [np.zeros(n, rdt)] if dtype.kind == "c" else []
    sdim, st, bwork = (np.zeros(max(1, k), ints.np_type) for k in (1, 1, n))
    query = np.zeros(1, dtype)
    jobvs, sort = _chars("V" if vectors else "N", "N")
    fn(
        *(jobvs, sort, None, ints(n), P(a), ints(n), P(sdim), *(P(w) for w in eig)),
        *(P(vs), ints(n if vectors else 1), P(query), ints(-1)),
        *(*(P(r) for r in rwork), P(bwork), P(st), 1, 1),
    )
    return lapack._lwork(query[0])


def _gehrd_lwork(dtype, n: int) -> int:
    """``gehrd``'s workspace for an ``n x n`` matrix, from LAPACK's query."""
    info = lapack.find_lapack()
    fn = info.function("gehrd", dtype)
    ints = lapack._Ints(info.int_bits)
    P = lapack._ptr
    a, tau = np.zeros((n, n), dtype), np.zeros(max(1, n), dtype)
    query, st = np.zeros(1, dtype), np.zeros(1, ints.np_type)
    fn(ints(n), ints(1), ints(n), P(a), ints(n), P(tau), P(query), ints(-1), P(st))
    return lapack._lwork(query[0])


def _finish(mw, step, ty: str, ety: str, dt, bufs, names, setup, body, nbytes, ptr):
    """Add the step's helpers and batch function; the entry line calling it."""
    _add_helpers(mw, step.name, ty, literal(np.nan, dt), ety=ety)
    params = ", ".join(f"ptr {x}" for x in names)
    text = _function(step.name, params, setup, body, step.batch, nbytes)
    mw.add_function(
        "\n".join(text), ((step.name, "void", ", ".join(["ptr"] * len(bufs))),), glue=True
    )
    args = ", ".join(f"ptr {ptr[b.id]}" for b in bufs)
    return [f"  call void @{step.name}({args})"]


def render_schur(mw, step: SchurStep, ptr: dict[int, str]) -> list[str]:
    """Per matrix: transpose ``a`` into a column-major copy; ``gees`` (the Schur form in place,
    the vectors into column-major scratch); both transposed out; NaN in both where
    ``info != 0``."""
    n, batch = step.n, step.batch
    if n == 0 or batch == 0:
        return []
    dt = step.t.dtype
    ty, ety, isz, ldt = _elements(dt, step.complex)
    parts = 2 if step.complex else 1
    vectors = step.z is not None
    info, gees = _routine(mw, "gees", ldt)
    _declare_alloc(mw)
    ity, ibytes = f"i{info.int_bits}", info.int_bits // 8
    lwork = _gees_lwork(np.dtype(ldt), n, vectors)
    mat = _align(n * n * isz)
    off_vs = mat
    off_w = off_vs + (mat if vectors else _align(isz))
    n_w = 1 if step.complex else 2  # eigenvalues: w (complex) or wr, wi (real)
    off_rwork = off_w + n_w * _align(n * isz)
    off_bwork = off_rwork + (_align(n * dt.itemsize) if step.complex else 0)
    off_work = off_bwork + _align(n * ibytes)
    nbytes = off_work + lwork * isz
    setup = [
        *_int_slots(ity, {"n": n, "ldvs": n if vectors else 1, "lwork": lwork}),
        *_char_slots({"jobvs": "V" if vectors else "N", "sort": "N"}),
        f"  %sdim = alloca {ity}",
        f"  %info = alloca {ity}",
    ]
    eig_args = ["ptr %w0"] if step.complex else ["ptr %w0", "ptr %w1"]
    body = [
        f"  %vs = getelementptr inbounds i8, ptr %mem, i64 {off_vs}",
        f"  %w0 = getelementptr inbounds i8, ptr %mem, i64 {off_w}",
        f"  %w1 = getelementptr inbounds i8, ptr %mem, i64 {off_w + _align(n * isz)}",
        f"  %rwork = getelementptr inbounds i8, ptr %mem, i64 {off_rwork}",
        f"  %bwork = getelementptr inbounds i8, ptr %mem, i64 {off_bwork}",
        f"  %work = getelementptr inbounds i8, ptr %mem, i64 {off_work}",
        f"  %aoff = mul i64 %b, {n * n}",
        f"  %pa = getelementptr inbounds {ety}, ptr %a, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %pa, ptr %mem, i64 {n}, i64 {n}, i64 {n})",
        f"  store {ity} 0, ptr %info",
        f"  call void @{gees}(ptr %jobvs, ptr %sort, ptr null, ptr %n, ptr %mem, ptr %n, "
        f"ptr %sdim, {', '.join(eig_args)}, ptr %vs, ptr %ldvs, ptr %work, ptr %lwork, "
        + ("ptr %rwork, " if step.complex else "")
        + "ptr %bwork, ptr %info, i64 1, i64 1)",
        f"  %pt = getelementptr inbounds {ety}, ptr %t, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %mem, ptr %pt, i64 {n}, i64 {n}, i64 {n})",
    ]
    fills = [f"{step.name}_fill(ptr %pt, i64 {n * n * parts})"]
    if vectors:
        body += [
            f"  %pz = getelementptr inbounds {ety}, ptr %z, i64 %aoff",
            f"  call void @{step.name}_tr(ptr %vs, ptr %pz, i64 {n}, i64 {n}, i64 {n})",
        ]
        fills.append(f"{step.name}_fill(ptr %pz, i64 {n * n * parts})")
    body += [
        f"  %st = load {ity}, ptr %info",
        f"  %bad = icmp ne {ity} %st, 0",
        "  br i1 %bad, label %fail, label %next",
        "fail:",
        *(f"  call void @{f}" for f in fills),
        "  br label %next",
    ]
    bufs = [step.a, step.t] + ([step.z] if vectors else [])
    names = ["%a", "%t"] + (["%z"] if vectors else [])
    return _finish(mw, step, ty, ety, dt, bufs, names, setup, body, nbytes, ptr)


def render_hessenberg(mw, step: HessenbergStep, ptr: dict[int, str]) -> list[str]:
    """Per matrix: transpose ``a`` into a column-major copy; ``gehrd`` (the scales straight
    into ``taus``); the packed result transposed out; NaN in both where ``info != 0``."""
    n, batch = step.n, step.batch
    if n == 0 or batch == 0:
        return []
    dt = step.packed.dtype
    ty, ety, isz, ldt = _elements(dt, step.complex)
    parts = 2 if step.complex else 1
    info, gehrd = _routine(mw, "gehrd", ldt)
    _declare_alloc(mw)
    ity = f"i{info.int_bits}"
    lwork = _gehrd_lwork(np.dtype(ldt), n)
    off_tau = _align(n * n * isz)  # scratch taus for n = 1, where the buffer has none
    off_work = off_tau + _align(n * isz)
    nbytes = off_work + lwork * isz
    setup = [
        *_int_slots(ity, {"n": n, "ilo": 1, "lwork": lwork}),
        f"  %info = alloca {ity}",
    ]
    tau_ptr = "%ptau" if n > 1 else "%stau"
    body = [
        f"  %stau = getelementptr inbounds i8, ptr %mem, i64 {off_tau}",
        f"  %work = getelementptr inbounds i8, ptr %mem, i64 {off_work}",
        f"  %aoff = mul i64 %b, {n * n}",
        f"  %pa = getelementptr inbounds {ety}, ptr %a, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %pa, ptr %mem, i64 {n}, i64 {n}, i64 {n})",
        f"  %toff = mul i64 %b, {n - 1}",
        f"  %ptau = getelementptr inbounds {ety}, ptr %taus, i64 %toff",
        f"  store {ity} 0, ptr %info",
        f"  call void @{gehrd}(ptr %n, ptr %ilo, ptr %n, ptr %mem, ptr %n, ptr {tau_ptr}, "
        "ptr %work, ptr %lwork, ptr %info)",
        f"  %pp = getelementptr inbounds {ety}, ptr %packed, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %mem, ptr %pp, i64 {n}, i64 {n}, i64 {n})",
        f"  %st = load {ity}, ptr %info",
        f"  %bad = icmp ne {ity} %st, 0",
        "  br i1 %bad, label %fail, label %next",
        "fail:",
        f"  call void @{step.name}_fill(ptr %pp, i64 {n * n * parts})",
        f"  call void @{step.name}_fill(ptr %ptau, i64 {(n - 1) * parts})",
        "  br label %next",
    ]
    bufs = [step.a, step.packed, step.taus]
    return _finish(
        mw, step, ty, ety, dt, bufs, ["%a", "%packed", "%taus"], setup, body, nbytes, ptr
    )
