"""LLVM rendering of the decomposition steps (``steps.QRStep``, ``steps.GeqrfStep``,
``steps.EighStep``, ``steps.SVDStep``, ``steps.GeevStep``) as calls to numpy's LAPACK
(``lapack.py``): ``geqrf`` (+ ``orgqr``), ``syevd``, ``gesdd``, ``geev``.

Each step becomes one function looping over its batch matrices, called once from the entry
point, so the program does not grow with the matrix size or the batch. Workspace sizes come
from LAPACK's own query (``lwork = -1``), asked once here at compile time for the step's
shape; the function allocates its scratch (a private copy of the matrix, the workspace) once
per call with ``malloc`` and frees it before returning.

Buffers are row-major; ``lapack.py``'s docstring says how each routine meets them:

- QR: a row-major matrix is, to LAPACK, its transpose, which has a different QR, so each matrix
  is transposed into a column-major copy, factored, and R and Q are transposed back out.
- eigh: the matrix is symmetric, so ``syevd`` runs on a plain copy with the stored triangle
  flipped (``uplo='U'`` reads the row-major lower one); it leaves the eigenvectors as rows,
  transposed out into ``v``'s columns.
- eig: like QR, ``geev`` runs on a column-major copy and its column-major eigenvector
  matrices are transposed out.
- SVD: ``gesdd`` on the row-major ``m x n`` buffer, with ``(m, n) := (n, m)``, decomposes the
  transpose, whose LAPACK ``VT`` is the row-major ``u`` and ``U`` the row-major ``vt``: they
  are written in place.

Complex steps (``complex=True``: buffers of interleaved (re, im) pairs, the layout of the
complex routines' arrays) call ``cgeqrf``/``cungqr``, ``cheevd``, ``cgesdd`` and ``cgeev`` (``z``
for complex128) the same way, an element being a ``{float, float}`` pair, with one difference:
the row-major copy of a Hermitian matrix is, to LAPACK, its conjugate, so eigh transposes the
matrix into a column-major copy (as QR does) instead of flipping the triangle. Their real
workspaces (``rwork``) follow the complex one in the scratch block.

Where LAPACK reports failure (``info != 0``: no convergence, NaN input), the matrix's results
are filled with NaN, as JAX returns. An empty matrix (k = min(m, n) = 0) gives identity full
factors, as numpy.
"""

from __future__ import annotations

import ctypes

import numpy as np

from fungrad import dtypes
from fungrad.lowering.cpu import lapack
from fungrad.lowering.cpu.lapack_step import _declare_memory, _routine
from fungrad.lowering.cpu.llvm_types import literal, llvm_type
from fungrad.lowering.steps import EighStep, GeevStep, GeqrfStep, QRStep, SVDStep

__all__ = ["render_eigh", "render_geev", "render_geqrf", "render_qr", "render_svd"]

_MEMCPY = "llvm.memcpy.p0.p0.i64"
_MEMSET = "llvm.memset.p0.i64"


# -- compile-time workspace queries --------------------------------------------------------------


def _query(routine: str, dtype, build) -> tuple[int, int]:
    """Ask ``routine`` (``lwork = -1``) for its workspace: ``(lwork, liwork)`` in elements.
    ``build(ints, scratch)`` returns the argument list given the integer maker and a scratch
    pointer; the routine writes its answers into the first float of ``work`` and the first
    integer of ``iwork`` (both ``scratch``-backed)."""
    info = lapack.find_lapack()
    fn = info.function(routine, dtype)
    ints = lapack._Ints(info.int_bits)
    work = np.zeros(1, dtype)
    iwork = np.zeros(1, ints.np_type)
    st = np.zeros(1, ints.np_type)
    dummy = np.zeros(4, dtype)
    fn(*build(ints, lapack._ptr(dummy), lapack._ptr(work), lapack._ptr(iwork), lapack._ptr(st)))
    return lapack._lwork(work[0]), max(1, int(iwork[0]))


def _chars(*cs):
    return [ctypes.c_char_p(c.encode()) for c in cs]


# -- IR helpers ---------------------------------------------------------------------------------


def _helpers(name: str, ty: str, nan: str, ety: str | None = None) -> list[str]:
    """Two internal functions: ``@<name>_tr(src, dst, rows, cols, ld)`` sets
    ``dst[j * rows + i] = src[i * ld + j]`` for ``i < rows``, ``j < cols`` (a transpose with
    the source's leading dimension ``ld``) of elements of type ``ety`` (default ``ty``; a
    ``{float, float}`` pair for complex steps), and ``@<name>_fill(p, count)`` stores NaN in
    ``count`` values of type ``ty``."""
    ety = ety or ty
    return [
        f"define internal void @{name}_tr(ptr %src, ptr %dst, i64 %rows, i64 %cols, i64 %ld) "
        "nounwind {",
        "entry:",
        "  br label %ih",
        "ih:",
        "  %i = phi i64 [0, %entry], [%i.next, %jx]",
        "  %imore = icmp slt i64 %i, %rows",
        "  br i1 %imore, label %jh, label %done",
        "jh:",
        "  %j = phi i64 [0, %ih], [%j.next, %jb]",
        "  %jmore = icmp slt i64 %j, %cols",
        "  br i1 %jmore, label %jb, label %jx",
        "jb:",
        "  %so0 = mul i64 %i, %ld",
        "  %so = add i64 %so0, %j",
        "  %do0 = mul i64 %j, %rows",
        "  %do = add i64 %do0, %i",
        f"  %sp = getelementptr inbounds {ety}, ptr %src, i64 %so",
        f"  %dp = getelementptr inbounds {ety}, ptr %dst, i64 %do",
        f"  %v = load {ety}, ptr %sp",
        f"  store {ety} %v, ptr %dp",
        "  %j.next = add i64 %j, 1",
        "  br label %jh",
        "jx:",
        "  %i.next = add i64 %i, 1",
        "  br label %ih",
        "done:",
        "  ret void",
        "}",
        "",
        f"define internal void @{name}_fill(ptr %p, i64 %count) nounwind {{",
        "entry:",
        "  br label %h",
        "h:",
        "  %k = phi i64 [0, %entry], [%k.next, %b]",
        "  %more = icmp slt i64 %k, %count",
        "  br i1 %more, label %b, label %done",
        "b:",
        f"  %fp = getelementptr inbounds {ty}, ptr %p, i64 %k",
        f"  store {ty} {nan}, ptr %fp",
        "  %k.next = add i64 %k, 1",
        "  br label %h",
        "done:",
        "  ret void",
        "}",
        "",
    ]


def _add_helpers(
    mw, name: str, ty: str, nan: str, extra: list[str] = (), extra_defs=(), ety=None
) -> None:
    """Add :func:`_helpers` (and ``extra`` functions) to the optimised module: element loops
    (the transposes) run several times faster there than in the unoptimised glue."""
    defines = (
        (f"{name}_tr", "void", "ptr, ptr, i64, i64, i64"),
        (f"{name}_fill", "void", "ptr, i64"),
        *extra_defs,
    )
    mw.add_function("\n".join([*_helpers(name, ty, nan, ety), *extra]), defines)


def _int_slots(ity: str, values: dict[str, int]) -> list[str]:
    """Entry lines putting each integer argument in a stack slot ``%<name>`` (LAPACK takes
    them by pointer)."""
    lines = []
    for key, v in values.items():
        lines += [f"  %{key} = alloca {ity}", f"  store {ity} {v}, ptr %{key}"]
    return lines


def _char_slots(values: dict[str, str]) -> list[str]:
    lines = []
    for key, c in values.items():
        lines += [f"  %{key} = alloca i8", f"  store i8 {ord(c)}, ptr %{key}"]
    return lines


def _function(name: str, params: str, setup: list[str], body: list[str], batch: int, nbytes: int):
    """The step function: ``setup`` lines, one ``malloc`` of ``nbytes`` (``%mem``), ``body``
    (ending with ``br label %next``) for ``%b`` in ``[0, batch)``, then ``free``."""
    return [
        f"define internal void @{name}({params}) nounwind {{",
        "entry:",
        *setup,
        f"  %mem = call ptr @malloc(i64 {max(nbytes, 16)})",
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
        "  call void @free(ptr %mem)",
        "  ret void",
        "}",
        "",
    ]


def _declare_alloc(mw) -> None:
    mw.declare("malloc", "declare ptr @malloc(i64)")
    mw.declare("free", "declare void @free(ptr)")
    _declare_memory(mw)


def _align(nbytes: int) -> int:
    return (nbytes + 63) // 64 * 64


def _eye_fill(
    tag: str, ty: str, out_ptr: str, batch: int, rows: int, cols: int, isz: int, parts: int = 1
):
    """Lines (in a function's entry block, which they end in block ``%{tag}.x``) writing
    ``batch`` ``rows x cols`` identities to ``out_ptr``: zeros, then ones on the diagonal.
    ``parts``: values of type ``ty`` per element (2 for interleaved complex; ``isz`` is an
    element's size)."""
    d = min(rows, cols)
    one = literal(1.0, np.dtype(np.float64) if ty == "double" else np.dtype(np.float32))
    return [
        f"  call void @{_MEMSET}(ptr {out_ptr}, i8 0, i64 {batch * rows * cols * isz}, i1 false)",
        f"  br label %{tag}.h",
        f"{tag}.h:",
        f"  %{tag}.t = phi i64 [0, %{tag}.s], [%{tag}.t1, %{tag}.b]",
        f"  %{tag}.more = icmp slt i64 %{tag}.t, {batch * d}",
        f"  br i1 %{tag}.more, label %{tag}.b, label %{tag}.x",
        f"{tag}.b:",
        f"  %{tag}.mat = udiv i64 %{tag}.t, {max(d, 1)}",
        f"  %{tag}.i = urem i64 %{tag}.t, {max(d, 1)}",
        f"  %{tag}.o0 = mul i64 %{tag}.mat, {rows * cols}",
        f"  %{tag}.o1 = mul i64 %{tag}.i, {cols + 1}",
        *(
            [f"  %{tag}.o = add i64 %{tag}.o0, %{tag}.o1"]
            if parts == 1
            else [
                f"  %{tag}.o2 = add i64 %{tag}.o0, %{tag}.o1",
                f"  %{tag}.o = mul i64 %{tag}.o2, {parts}",
            ]
        ),
        f"  %{tag}.p = getelementptr inbounds {ty}, ptr {out_ptr}, i64 %{tag}.o",
        f"  store {ty} {one}, ptr %{tag}.p",
        f"  %{tag}.t1 = add i64 %{tag}.t, 1",
        f"  br label %{tag}.h",
        f"{tag}.x:",
    ]


def _empty(mw, step_name: str, params: str, lines: list[str], call_args: str) -> list[str]:
    """A step function of straight-line ``lines`` (the empty decompositions)."""
    text = [f"define internal void @{step_name}({params}) nounwind {{", "entry:", *lines]
    text += ["  ret void", "}", ""]
    mw.add_function(
        "\n".join(text), ((step_name, "void", ", ".join(["ptr"] * params.count("ptr"))),), glue=True
    )
    return [f"  call void @{step_name}({call_args})"]


def _elements(dt, cplx: bool):
    """``(ty, ety, isz, ldt)`` of a step whose buffers have the real dtype ``dt``: the real
    LLVM type, the element type (a ``{ty, ty}`` pair when ``cplx``), the element size in bytes
    and the dtype of the LAPACK routine to call."""
    ty = llvm_type(dt)
    if not cplx:
        return ty, ty, dt.itemsize, dt
    return ty, f"{{{ty}, {ty}}}", 2 * dt.itemsize, dtypes.complex_dtype(dt)


# -- QR -------------------------------------------------------------------------------------------


def render_qr(mw, step: QRStep, ptr: dict[int, str]) -> list[str]:
    """Per matrix: transpose ``a`` into a column-major copy ``F``; ``geqrf``; R from F's upper
    triangle; ``orgqr`` forms Q's columns in F; Q transposed out."""
    m, n, batch = step.m, step.n, step.batch
    if batch == 0:
        return []
    ty, ety, isz, ldt = _elements(step.q.dtype, step.complex)
    parts = 2 if step.complex else 1
    k = min(m, n)
    qc = m if step.full_matrices else k  # Q's columns
    rr = m if step.full_matrices else k  # R's rows
    call_args = f"ptr {ptr[step.a.id]}, ptr {ptr[step.q.id]}, ptr {ptr[step.r.id]}"
    if k == 0:
        _declare_memory(mw)
        eye = _eye_fill("q", ty, "%q", batch, m, qc, isz, parts)
        lines = ["  br label %q.s", "q.s:", *eye]
        lines.append(f"  call void @{_MEMSET}(ptr %r, i8 0, i64 {step.r.nbytes}, i1 false)")
        return _empty(mw, step.name, "ptr %a, ptr %q, ptr %r", lines, call_args)
    form_q = "ungqr" if step.complex else "orgqr"
    info, geqrf = _routine(mw, "geqrf", ldt)
    _, orgqr = _routine(mw, form_q, ldt)
    _declare_alloc(mw)
    ity = f"i{info.int_bits}"
    w = max(n, qc)  # F's columns: a's, then room for a square Q
    lw1, _ = _query("geqrf", ldt, lambda i, d, wk, iw, st: (i(m), i(n), d, i(m), d, wk, i(-1), st))
    lw2, _ = _query(
        form_q, ldt, lambda i, d, wk, iw, st: (i(m), i(qc), i(k), d, i(m), d, wk, i(-1), st)
    )
    lwork = max(lw1, lw2, 1)
    off_tau = _align(m * w * isz)
    off_work = off_tau + _align(k * isz)
    nbytes = off_work + lwork * isz
    setup = [
        *_int_slots(ity, {"m": m, "n": n, "qc": qc, "k": k, "lwork": lwork}),
        f"  %info = alloca {ity}",
    ]
    body = [
        f"  %tau = getelementptr inbounds i8, ptr %mem, i64 {off_tau}",
        f"  %work = getelementptr inbounds i8, ptr %mem, i64 {off_work}",
        f"  %aoff = mul i64 %b, {m * n}",
        f"  %pa = getelementptr inbounds {ety}, ptr %a, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %pa, ptr %mem, i64 {m}, i64 {n}, i64 {n})",
        f"  call void @{geqrf}(ptr %m, ptr %n, ptr %mem, ptr %m, ptr %tau, ptr %work, "
        "ptr %lwork, ptr %info)",
        f"  %roff = mul i64 %b, {rr * n}",
        f"  %pr = getelementptr inbounds {ety}, ptr %r, i64 %roff",
        f"  call void @{step.name}_tr(ptr %mem, ptr %pr, i64 {n}, i64 {rr}, i64 {m})",
        f"  call void @{step.name}_tril0(ptr %pr)",
        f"  call void @{orgqr}(ptr %m, ptr %qc, ptr %k, ptr %mem, ptr %m, ptr %tau, ptr %work, "
        "ptr %lwork, ptr %info)",
        f"  %qoff = mul i64 %b, {m * qc}",
        f"  %pq = getelementptr inbounds {ety}, ptr %q, i64 %qoff",
        f"  call void @{step.name}_tr(ptr %mem, ptr %pq, i64 {qc}, i64 {m}, i64 {m})",
        "  br label %next",
    ]
    # zeros below R's diagonal: row i (1 <= i < rr) loses its first min(i, n) entries
    tril0 = [
        f"define internal void @{step.name}_tril0(ptr %p) nounwind {{",
        "entry:",
        "  br label %h",
        "h:",
        "  %i = phi i64 [1, %entry], [%i.next, %b]",
        f"  %more = icmp slt i64 %i, {rr}",
        "  br i1 %more, label %b, label %done",
        "b:",
        f"  %lt = icmp slt i64 %i, {n}",
        f"  %len = select i1 %lt, i64 %i, i64 {n}",
        f"  %bytes = mul i64 %len, {isz}",
        f"  %off = mul i64 %i, {n}",
        f"  %rp = getelementptr inbounds {ety}, ptr %p, i64 %off",
        f"  call void @{_MEMSET}(ptr %rp, i8 0, i64 %bytes, i1 false)",
        "  %i.next = add i64 %i, 1",
        "  br label %h",
        "done:",
        "  ret void",
        "}",
        "",
    ]
    tril_def = ((f"{step.name}_tril0", "void", "ptr"),)
    _add_helpers(mw, step.name, ty, literal(np.nan, step.q.dtype), tril0, tril_def, ety)
    text = _function(step.name, "ptr %a, ptr %q, ptr %r", setup, body, batch, nbytes)
    mw.add_function("\n".join(text), ((step.name, "void", "ptr, ptr, ptr"),), glue=True)
    return [f"  call void @{step.name}({call_args})"]


def render_geqrf(mw, step: GeqrfStep, ptr: dict[int, str]) -> list[str]:
    """Per matrix: transpose ``a`` into a column-major copy; ``geqrf`` (the scales straight
    into ``taus``); the packed result transposed out."""
    m, n, batch = step.m, step.n, step.batch
    k = min(m, n)
    if batch == 0 or k == 0:
        return []  # nothing to factor: packed is the (empty) input, taus is empty
    dt = step.packed.dtype
    ty, ety, isz, ldt = _elements(dt, step.complex)
    info, geqrf = _routine(mw, "geqrf", ldt)
    _declare_alloc(mw)
    ity = f"i{info.int_bits}"
    lwork, _ = _query(
        "geqrf", ldt, lambda i, d, wk, iw, st: (i(m), i(n), d, i(m), d, wk, i(-1), st)
    )
    off_work = _align(m * n * isz)
    nbytes = off_work + lwork * isz
    setup = [*_int_slots(ity, {"m": m, "n": n, "lwork": lwork}), f"  %info = alloca {ity}"]
    body = [
        f"  %work = getelementptr inbounds i8, ptr %mem, i64 {off_work}",
        f"  %aoff = mul i64 %b, {m * n}",
        f"  %pa = getelementptr inbounds {ety}, ptr %a, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %pa, ptr %mem, i64 {m}, i64 {n}, i64 {n})",
        f"  %toff = mul i64 %b, {k}",
        f"  %pt = getelementptr inbounds {ety}, ptr %taus, i64 %toff",
        f"  call void @{geqrf}(ptr %m, ptr %n, ptr %mem, ptr %m, ptr %pt, ptr %work, "
        "ptr %lwork, ptr %info)",
        f"  %pp = getelementptr inbounds {ety}, ptr %packed, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %mem, ptr %pp, i64 {n}, i64 {m}, i64 {m})",
        "  br label %next",
    ]
    _add_helpers(mw, step.name, ty, literal(np.nan, dt), ety=ety)
    text = _function(step.name, "ptr %a, ptr %packed, ptr %taus", setup, body, batch, nbytes)
    mw.add_function("\n".join(text), ((step.name, "void", "ptr, ptr, ptr"),), glue=True)
    args = ", ".join(f"ptr {ptr[b.id]}" for b in (step.a, step.packed, step.taus))
    return [f"  call void @{step.name}({args})"]


# -- eigh -----------------------------------------------------------------------------------------


def render_eigh(mw, step: EighStep, ptr: dict[int, str]) -> list[str]:
    """Per matrix: copy ``a``; ``syevd`` (eigenvalues straight into ``w``); the eigenvectors
    (rows of the copy) transposed into ``v``'s columns; NaN in both where ``info != 0``."""
    n, batch = step.n, step.batch
    if n == 0 or batch == 0:
        return []
    if step.complex:
        return _render_heevd(mw, step, ptr)
    dt = step.v.dtype
    info, syevd = _routine(mw, "syevd", dt)
    _declare_alloc(mw)
    ty, isz, ity = llvm_type(dt), dt.itemsize, f"i{info.int_bits}"
    uplo = "U" if step.lower else "L"  # row-major: the stored triangle flips
    jobz_c, uplo_c = _chars("V", uplo)
    lwork, liwork = _query(
        "syevd",
        dt,
        lambda i, d, wk, iw, st: (jobz_c, uplo_c, i(n), d, i(n), d, wk, i(-1), iw, i(-1), st, 1, 1),
    )
    ibytes = info.int_bits // 8
    off_work = _align(n * n * isz)
    off_iwork = off_work + _align(lwork * isz)
    nbytes = off_iwork + liwork * ibytes
    setup = [
        *_int_slots(ity, {"n": n, "lwork": lwork, "liwork": liwork}),
        *_char_slots({"jobz": "V", "uplo": uplo}),
        f"  %info = alloca {ity}",
    ]
    body = [
        f"  %work = getelementptr inbounds i8, ptr %mem, i64 {off_work}",
        f"  %iwork = getelementptr inbounds i8, ptr %mem, i64 {off_iwork}",
        f"  %aoff = mul i64 %b, {n * n}",
        f"  %pa = getelementptr inbounds {ty}, ptr %a, i64 %aoff",
        f"  call void @{_MEMCPY}(ptr %mem, ptr %pa, i64 {n * n * isz}, i1 false)",
        f"  %woff = mul i64 %b, {n}",
        f"  %pw = getelementptr inbounds {ty}, ptr %w, i64 %woff",
        f"  store {ity} 0, ptr %info",
        f"  call void @{syevd}(ptr %jobz, ptr %uplo, ptr %n, ptr %mem, ptr %n, ptr %pw, "
        "ptr %work, ptr %lwork, ptr %iwork, ptr %liwork, ptr %info, i64 1, i64 1)",
        f"  %pv = getelementptr inbounds {ty}, ptr %v, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %mem, ptr %pv, i64 {n}, i64 {n}, i64 {n})",
        f"  %st = load {ity}, ptr %info",
        f"  %bad = icmp ne {ity} %st, 0",
        "  br i1 %bad, label %fail, label %next",
        "fail:",
        f"  call void @{step.name}_fill(ptr %pv, i64 {n * n})",
        f"  call void @{step.name}_fill(ptr %pw, i64 {n})",
        "  br label %next",
    ]
    _add_helpers(mw, step.name, ty, literal(np.nan, dt))
    text = _function(step.name, "ptr %a, ptr %v, ptr %w", setup, body, batch, nbytes)
    mw.add_function("\n".join(text), ((step.name, "void", "ptr, ptr, ptr"),), glue=True)
    args = ", ".join(f"ptr {ptr[b.id]}" for b in (step.a, step.v, step.w))
    return [f"  call void @{step.name}({args})"]


def _render_heevd(mw, step: EighStep, ptr: dict[int, str]) -> list[str]:
    """:func:`render_eigh` of complex matrices: ``a`` transposed into a column-major copy (the
    row-major one is the conjugate to LAPACK), ``heevd`` with the triangle as asked, the
    eigenvectors (columns of the copy) transposed out."""
    n, batch = step.n, step.batch
    ty, ety, isz, ldt = _elements(step.v.dtype, True)
    rsz = step.w.dtype.itemsize
    info, heevd = _routine(mw, "heevd", ldt)
    _declare_alloc(mw)
    ity = f"i{info.int_bits}"
    uplo = "L" if step.lower else "U"
    # workspace query: lwork, lrwork and liwork come back in work[0], rwork[0] and iwork[0]
    fn = info.function("heevd", ldt)
    ints = lapack._Ints(info.int_bits)
    work, rwork = np.zeros(1, ldt), np.zeros(1, step.w.dtype)
    iwork, st, dummy = np.zeros(1, ints.np_type), np.zeros(1, ints.np_type), np.zeros(4, ldt)
    wdummy = np.zeros(max(n, 1), step.w.dtype)
    jobz_c, uplo_c = _chars("V", uplo)
    P = lapack._ptr
    fn(
        *(jobz_c, uplo_c, ints(n), P(dummy), ints(n), P(wdummy), P(work), ints(-1)),
        *(P(rwork), ints(-1), P(iwork), ints(-1), P(st), 1, 1),
    )
    lwork, lrwork = lapack._lwork(work[0]), lapack._lwork(rwork[0])
    liwork = max(1, int(iwork[0]))
    off_work = _align(n * n * isz)
    off_rwork = off_work + _align(lwork * isz)
    off_iwork = off_rwork + _align(lrwork * rsz)
    nbytes = off_iwork + liwork * (info.int_bits // 8)
    setup = [
        *_int_slots(ity, {"n": n, "lwork": lwork, "lrwork": lrwork, "liwork": liwork}),
        *_char_slots({"jobz": "V", "uplo": uplo}),
        f"  %info = alloca {ity}",
    ]
    body = [
        f"  %work = getelementptr inbounds i8, ptr %mem, i64 {off_work}",
        f"  %rwork = getelementptr inbounds i8, ptr %mem, i64 {off_rwork}",
        f"  %iwork = getelementptr inbounds i8, ptr %mem, i64 {off_iwork}",
        f"  %aoff = mul i64 %b, {n * n}",
        f"  %pa = getelementptr inbounds {ety}, ptr %a, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %pa, ptr %mem, i64 {n}, i64 {n}, i64 {n})",
        f"  %woff = mul i64 %b, {n}",
        f"  %pw = getelementptr inbounds {ty}, ptr %w, i64 %woff",
        f"  store {ity} 0, ptr %info",
        f"  call void @{heevd}(ptr %jobz, ptr %uplo, ptr %n, ptr %mem, ptr %n, ptr %pw, "
        "ptr %work, ptr %lwork, ptr %rwork, ptr %lrwork, ptr %iwork, ptr %liwork, ptr %info, "
        "i64 1, i64 1)",
        f"  %pv = getelementptr inbounds {ety}, ptr %v, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %mem, ptr %pv, i64 {n}, i64 {n}, i64 {n})",
        f"  %st = load {ity}, ptr %info",
        f"  %bad = icmp ne {ity} %st, 0",
        "  br i1 %bad, label %fail, label %next",
        "fail:",
        f"  call void @{step.name}_fill(ptr %pv, i64 {2 * n * n})",
        f"  call void @{step.name}_fill(ptr %pw, i64 {n})",
        "  br label %next",
    ]
    _add_helpers(mw, step.name, ty, literal(np.nan, step.w.dtype), ety=ety)
    text = _function(step.name, "ptr %a, ptr %v, ptr %w", setup, body, batch, nbytes)
    mw.add_function("\n".join(text), ((step.name, "void", "ptr, ptr, ptr"),), glue=True)
    args = ", ".join(f"ptr {ptr[b.id]}" for b in (step.a, step.v, step.w))
    return [f"  call void @{step.name}({args})"]


# -- SVD ------------------------------------------------------------------------------------------


def render_svd(mw, step: SVDStep, ptr: dict[int, str]) -> list[str]:
    """Per matrix: copy ``a``; ``gesdd`` of the transpose writes ``s``, ``u`` and ``vt`` in
    place (see the module docstring); NaN in all where ``info != 0``."""
    m, n, batch = step.m, step.n, step.batch
    if batch == 0:
        return []
    dt = step.s.dtype
    ty, ety, isz, ldt = _elements(dt, step.complex)
    parts = 2 if step.complex else 1
    k = min(m, n)
    uv = step.u is not None
    ucols = m if step.full_matrices else k
    vrows = n if step.full_matrices else k
    bufs = [step.a, step.s] + ([step.u, step.vt] if uv else [])
    params = ", ".join(f"ptr %p{i}" for i in range(len(bufs)))
    call_args = ", ".join(f"ptr {ptr[b.id]}" for b in bufs)
    if k == 0:
        if not (uv and step.full_matrices):
            return []
        _declare_memory(mw)
        eye_u = _eye_fill("u", ty, "%p2", batch, m, m, isz, parts)
        eye_v = _eye_fill("v", ty, "%p3", batch, n, n, isz, parts)
        lines = ["  br label %u.s", "u.s:", *eye_u, "  br label %v.s", "v.s:", *eye_v]
        return _empty(mw, step.name, params, lines, call_args)
    info, gesdd = _routine(mw, "gesdd", ldt)
    _declare_alloc(mw)
    ity = f"i{info.int_bits}"
    job = ("A" if step.full_matrices else "S") if uv else "N"
    ldu = max(1, n) if uv else 1  # LAPACK's U: the row-major vt
    ldvt = max(1, ucols) if uv else 1  # LAPACK's VT: the row-major u
    (jobz_c,) = _chars(job)
    lwork, _ = _query(
        "gesdd",
        ldt,
        lambda i, d, wk, iw, st: (
            jobz_c,
            i(n),
            i(m),
            d,
            i(n),
            d,
            d,
            i(ldu),
            d,
            i(ldvt),
            wk,
            i(-1),
            *((d,) if step.complex else ()),  # rwork (complex routines)
            iw,
            st,
            1,
        ),
    )
    ibytes = info.int_bits // 8
    off_work = _align(m * n * isz)
    off_iwork = off_work + _align(lwork * isz)
    nbytes = off_iwork + 8 * k * ibytes
    off_rwork = _align(nbytes)
    if step.complex:  # the real workspace after the integer one
        nbytes = off_rwork + lapack.gesdd_rwork(m, n, uv) * dt.itemsize
    setup = [
        *_int_slots(ity, {"m": m, "n": n, "ldu": ldu, "ldvt": ldvt, "lwork": lwork}),
        *_char_slots({"jobz": job}),
        f"  %info = alloca {ity}",
    ]
    body = [
        f"  %work = getelementptr inbounds i8, ptr %mem, i64 {off_work}",
        f"  %iwork = getelementptr inbounds i8, ptr %mem, i64 {off_iwork}",
        f"  %aoff = mul i64 %b, {m * n}",
        f"  %pa = getelementptr inbounds {ety}, ptr %p0, i64 %aoff",
        f"  call void @{_MEMCPY}(ptr %mem, ptr %pa, i64 {m * n * isz}, i1 false)",
        f"  %soff = mul i64 %b, {k}",
        f"  %ps = getelementptr inbounds {ty}, ptr %p1, i64 %soff",
    ]
    if uv:
        body += [
            f"  %uoff = mul i64 %b, {m * ucols}",
            f"  %pu = getelementptr inbounds {ety}, ptr %p2, i64 %uoff",
            f"  %voff = mul i64 %b, {vrows * n}",
            f"  %pvt = getelementptr inbounds {ety}, ptr %p3, i64 %voff",
        ]
    lap_u, lap_vt = ("%pvt", "%pu") if uv else ("%work", "%work")
    rwork = ""
    if step.complex:
        body.append(f"  %rwork = getelementptr inbounds i8, ptr %mem, i64 {off_rwork}")
        rwork = "ptr %rwork, "
    body += [
        f"  store {ity} 0, ptr %info",
        f"  call void @{gesdd}(ptr %jobz, ptr %n, ptr %m, ptr %mem, ptr %n, ptr %ps, "
        f"ptr {lap_u}, ptr %ldu, ptr {lap_vt}, ptr %ldvt, ptr %work, ptr %lwork, {rwork}"
        "ptr %iwork, ptr %info, i64 1)",
        f"  %st = load {ity}, ptr %info",
        f"  %bad = icmp ne {ity} %st, 0",
        "  br i1 %bad, label %fail, label %next",
        "fail:",
        f"  call void @{step.name}_fill(ptr %ps, i64 {k})",
    ]
    if uv:
        body += [
            f"  call void @{step.name}_fill(ptr %pu, i64 {m * ucols * parts})",
            f"  call void @{step.name}_fill(ptr %pvt, i64 {vrows * n * parts})",
        ]
    body.append("  br label %next")
    _add_helpers(mw, step.name, ty, literal(np.nan, dt), ety=ety)
    text = _function(step.name, params, setup, body, batch, nbytes)
    mw.add_function(
        "\n".join(text), ((step.name, "void", ", ".join(["ptr"] * len(bufs))),), glue=True
    )
    return [f"  call void @{step.name}({call_args})"]


# -- eig ------------------------------------------------------------------------------------------


def render_geev(mw, step: GeevStep, ptr: dict[int, str]) -> list[str]:
    """Per matrix: transpose ``a`` into a column-major copy; ``geev`` (eigenvalues straight
    into ``wr``/``wi``, vectors into column-major scratch, transposed out); NaN in all where
    ``info != 0``."""
    n, batch = step.n, step.batch
    if n == 0 or batch == 0:
        return []
    if step.complex:
        return _render_cgeev(mw, step, ptr)
    dt = step.wr.dtype
    ty, isz = llvm_type(dt), dt.itemsize
    left, right = step.vl is not None, step.vr is not None
    info, geev = _routine(mw, "geev", dt)
    _declare_alloc(mw)
    ity = f"i{info.int_bits}"
    jl, jr = ("V" if left else "N"), ("V" if right else "N")
    ldl, ldr = (n if left else 1), (n if right else 1)
    jl_c, jr_c = _chars(jl, jr)
    lwork, _ = _query(
        "geev",
        dt,
        lambda i, d, wk, iw, st: (
            jl_c, jr_c, i(n), d, i(n), d, d, d, i(ldl), d, i(ldr), wk, i(-1), st, 1, 1
        ),
    )  # fmt: skip
    mat = _align(n * n * isz)
    off_vl, off_vr, off_work = mat, 2 * mat, 3 * mat
    nbytes = off_work + lwork * isz
    bufs = [step.a, step.wr, step.wi] + [b for b in (step.vl, step.vr) if b is not None]
    names = ["%a", "%wr", "%wi"] + (["%vl"] if left else []) + (["%vr"] if right else [])
    params = ", ".join(f"ptr {x}" for x in names)
    setup = [
        *_int_slots(ity, {"n": n, "ldl": ldl, "ldr": ldr, "lwork": lwork}),
        *_char_slots({"jobvl": jl, "jobvr": jr}),
        f"  %info = alloca {ity}",
    ]
    body = [
        f"  %sl = getelementptr inbounds i8, ptr %mem, i64 {off_vl}",
        f"  %sr = getelementptr inbounds i8, ptr %mem, i64 {off_vr}",
        f"  %work = getelementptr inbounds i8, ptr %mem, i64 {off_work}",
        f"  %aoff = mul i64 %b, {n * n}",
        f"  %pa = getelementptr inbounds {ty}, ptr %a, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %pa, ptr %mem, i64 {n}, i64 {n}, i64 {n})",
        f"  %woff = mul i64 %b, {n}",
        f"  %pwr = getelementptr inbounds {ty}, ptr %wr, i64 %woff",
        f"  %pwi = getelementptr inbounds {ty}, ptr %wi, i64 %woff",
        f"  store {ity} 0, ptr %info",
        f"  call void @{geev}(ptr %jobvl, ptr %jobvr, ptr %n, ptr %mem, ptr %n, ptr %pwr, "
        "ptr %pwi, ptr %sl, ptr %ldl, ptr %sr, ptr %ldr, ptr %work, ptr %lwork, ptr %info, "
        "i64 1, i64 1)",
    ]
    fills = [f"{step.name}_fill(ptr %pwr, i64 {n})", f"{step.name}_fill(ptr %pwi, i64 {n})"]
    for flag, out, scratch in ((left, "%vl", "%sl"), (right, "%vr", "%sr")):
        if flag:
            body += [
                f"  {out}.p = getelementptr inbounds {ty}, ptr {out}, i64 %aoff",
                f"  call void @{step.name}_tr(ptr {scratch}, ptr {out}.p, i64 {n}, i64 {n}, "
                f"i64 {n})",
            ]
            fills.append(f"{step.name}_fill(ptr {out}.p, i64 {n * n})")
    body += [
        f"  %st = load {ity}, ptr %info",
        f"  %bad = icmp ne {ity} %st, 0",
        "  br i1 %bad, label %fail, label %next",
        "fail:",
        *(f"  call void @{f}" for f in fills),
        "  br label %next",
    ]
    _add_helpers(mw, step.name, ty, literal(np.nan, dt))
    text = _function(step.name, params, setup, body, batch, nbytes)
    mw.add_function(
        "\n".join(text), ((step.name, "void", ", ".join(["ptr"] * len(bufs))),), glue=True
    )
    args = ", ".join(f"ptr {ptr[b.id]}" for b in bufs)
    return [f"  call void @{step.name}({args})"]


def _render_cgeev(mw, step: GeevStep, ptr: dict[int, str]) -> list[str]:
    """:func:`render_geev` of complex matrices (``cgeev``/``zgeev``): the eigenvalues straight
    into ``wr`` (interleaved complex), the vectors' column-major scratch transposed out."""
    n, batch = step.n, step.batch
    dt = step.wr.dtype
    ty, ety, isz, ldt = _elements(dt, True)
    left, right = step.vl is not None, step.vr is not None
    info, geev = _routine(mw, "geev", ldt)
    _declare_alloc(mw)
    ity = f"i{info.int_bits}"
    jl, jr = ("V" if left else "N"), ("V" if right else "N")
    ldl, ldr = (n if left else 1), (n if right else 1)
    jl_c, jr_c = _chars(jl, jr)
    lwork, _ = _query(
        "geev",
        ldt,
        lambda i, d, wk, iw, st: (
            jl_c, jr_c, i(n), d, i(n), d, d, i(ldl), d, i(ldr), wk, i(-1), d, st, 1, 1
        ),
    )  # fmt: skip
    mat = _align(n * n * isz)
    off_vl, off_vr, off_work = mat, 2 * mat, 3 * mat
    off_rwork = off_work + _align(lwork * isz)
    nbytes = off_rwork + 2 * n * dt.itemsize
    bufs = [step.a, step.wr] + [b for b in (step.vl, step.vr) if b is not None]
    names = ["%a", "%w"] + (["%vl"] if left else []) + (["%vr"] if right else [])
    params = ", ".join(f"ptr {x}" for x in names)
    setup = [
        *_int_slots(ity, {"n": n, "ldl": ldl, "ldr": ldr, "lwork": lwork}),
        *_char_slots({"jobvl": jl, "jobvr": jr}),
        f"  %info = alloca {ity}",
    ]
    body = [
        f"  %sl = getelementptr inbounds i8, ptr %mem, i64 {off_vl}",
        f"  %sr = getelementptr inbounds i8, ptr %mem, i64 {off_vr}",
        f"  %work = getelementptr inbounds i8, ptr %mem, i64 {off_work}",
        f"  %rwork = getelementptr inbounds i8, ptr %mem, i64 {off_rwork}",
        f"  %aoff = mul i64 %b, {n * n}",
        f"  %pa = getelementptr inbounds {ety}, ptr %a, i64 %aoff",
        f"  call void @{step.name}_tr(ptr %pa, ptr %mem, i64 {n}, i64 {n}, i64 {n})",
        f"  %woff = mul i64 %b, {n}",
        f"  %pw = getelementptr inbounds {ety}, ptr %w, i64 %woff",
        f"  store {ity} 0, ptr %info",
        f"  call void @{geev}(ptr %jobvl, ptr %jobvr, ptr %n, ptr %mem, ptr %n, ptr %pw, "
        "ptr %sl, ptr %ldl, ptr %sr, ptr %ldr, ptr %work, ptr %lwork, ptr %rwork, ptr %info, "
        "i64 1, i64 1)",
    ]
    fills = [f"{step.name}_fill(ptr %pw, i64 {2 * n})"]
    for flag, out, scratch in ((left, "%vl", "%sl"), (right, "%vr", "%sr")):
        if flag:
            body += [
                f"  {out}.p = getelementptr inbounds {ety}, ptr {out}, i64 %aoff",
                f"  call void @{step.name}_tr(ptr {scratch}, ptr {out}.p, i64 {n}, i64 {n}, "
                f"i64 {n})",
            ]
            fills.append(f"{step.name}_fill(ptr {out}.p, i64 {2 * n * n})")
    body += [
        f"  %st = load {ity}, ptr %info",
        f"  %bad = icmp ne {ity} %st, 0",
        "  br i1 %bad, label %fail, label %next",
        "fail:",
        *(f"  call void @{f}" for f in fills),
        "  br label %next",
    ]
    _add_helpers(mw, step.name, ty, literal(np.nan, dt), ety=ety)
    text = _function(step.name, params, setup, body, batch, nbytes)
    mw.add_function(
        "\n".join(text), ((step.name, "void", ", ".join(["ptr"] * len(bufs))),), glue=True
    )
    args = ", ".join(f"ptr {ptr[b.id]}" for b in bufs)
    return [f"  call void @{step.name}({args})"]
