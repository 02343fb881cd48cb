"""numpy's bundled LAPACK, reachable from ctypes and from jitted LLVM code.

The OpenBLAS that numpy wheels ship (found by :func:`blas.find_blas`) also exports LAPACK with the
same symbol decoration as its cblas: where cblas ``sgemm`` is ``<prefix>cblas_sgemm<suffix>``,
the Fortran routine ``spotrf`` is ``<prefix>spotrf_<suffix>`` (``scipy_spotrf_64_`` in the
ILP64 ``scipy-openblas64`` build) and cblas ``strsm`` is ``<prefix>cblas_strsm<suffix>``.
:func:`find_lapack` resolves, for float32 and float64, ``potrf``, ``trsm`` (cblas), ``getrf``,
``geqrf``, ``orgqr``, ``syevd``, ``gesdd``, ``geev``, ``gees`` and ``gehrd`` (:data:`ROUTINES`),
and for complex64 and complex128 (``c``/``z``) those of :data:`COMPLEX_ROUTINES`; a routine the
library lacks is listed in :attr:`LapackInfo.missing` and only its callers raise
(:class:`LapackUnavailableError`). Complex matrices are numpy's interleaved (re, im) pairs.

Calling convention. The Fortran routines take every argument by pointer, integers are
``int_bits`` wide (the BLAS's), and each ``CHARACTER`` argument adds a hidden ``size_t`` length
after the others (gfortran's ABI; OpenBLAS's own C ``potrf``/``getrf`` ignore it, which the C
calling convention allows). :meth:`LapackInfo.decl` gives the matching LLVM ``declare`` of
``@fg_<s|d><routine>`` registered by :func:`register_llvm_symbols`.

Layout. LAPACK reads column-major (Fortran-order) matrices; fungrad's buffers are row-major
(C order), and a row-major ``m x n`` buffer is, to LAPACK, the column-major ``n x m`` transpose.
Each eager caller below works on a private copy of its input (LAPACK overwrites it), so any
input layout is accepted: non-contiguous or Fortran-order input is copied, never rejected. How
each routine meets the row-major buffer, which jitted code must reproduce:

- ``potrf`` / ``syevd``: the matrix is symmetric, so the transpose is the matrix itself; only
  the stored triangle flips. A row-major call with ``lower`` passes ``uplo='U'`` and vice versa.
  ``syevd`` then leaves the eigenvectors as the *rows* of the row-major buffer.
- ``gesdd``: the SVD of the transpose swaps the roles: calling it on the row-major buffer with
  ``(m, n) := (n, m)``, LAPACK's ``VT`` buffer is the row-major ``u`` and its ``U`` buffer the
  row-major ``vt``; no copy is needed.
- ``trsm``: cblas with ``CblasRowMajor``.
- ``getrf`` / ``geqrf`` / ``orgqr`` / ``geev`` / ``gees`` / ``gehrd``: the transpose is a
  different factorisation, so the matrix is copied to Fortran order (a transpose in jitted
  code) and the results copied back.
- complex ``geqrf`` / ``ungqr`` / ``heevd`` / ``gesdd`` / ``geev`` / ``gees`` / ``gehrd``: the
  same, Fortran order for all of them (a Hermitian matrix's transpose is its conjugate, whose
  eigenvectors are conjugated; the SVD of the transpose has conjugated factors). Complex
  ``gesdd``'s real workspace has no query: :func:`gesdd_rwork` gives LAPACK's bound.

Workspace sizes come from LAPACK's own query (``lwork = -1``).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field

import numpy as np

from fungrad.lowering.cpu import blas

__all__ = [
    "ROUTINES",
    "CBLAS_LEFT",
    "CBLAS_RIGHT",
    "CBLAS_UPPER",
    "CBLAS_LOWER",
    "CBLAS_NON_UNIT",
    "CBLAS_UNIT",
    "CBLAS_CONJ_TRANS",
    "COMPLEX_ROUTINES",
    "LapackInfo",
    "LapackUnavailableError",
    "find_lapack",
    "register_llvm_symbols",
    "potrf",
    "trsm",
    "getrf",
    "geqrf",
    "orgqr",
    "syevd",
    "gesdd",
    "geev",
    "heevd",
    "ungqr",
    "gesdd_complex",
    "gesdd_rwork",
    "geev_complex",
    "gees",
    "gehrd",
]

CBLAS_UPPER, CBLAS_LOWER = 121, 122
CBLAS_NON_UNIT, CBLAS_UNIT = 131, 132
CBLAS_LEFT, CBLAS_RIGHT = 141, 142
CBLAS_CONJ_TRANS = 113


@dataclass(frozen=True)
class _Signature:
    """A routine's argument list: ``kinds`` is one letter per argument, ``c`` a character, ``i``
    an integer, ``p`` an array (all by pointer for Fortran); cblas routines (``cblas=True``)
    take ``e`` (a cblas enum, i32), ``i`` by value and ``s`` (a scalar of the dtype) by value."""

    kinds: str
    cblas: bool = False

    @property
    def n_chars(self) -> int:
        return self.kinds.count("c")


ROUTINES: dict[str, _Signature] = {
    # uplo, n, a, lda, info
    "potrf": _Signature("ciipi"),
    # order, side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb
    "trsm": _Signature("eeeeeiispipi", cblas=True),
    # m, n, a, lda, ipiv, info
    "getrf": _Signature("iipipi"),
    # m, n, a, lda, tau, work, lwork, info
    "geqrf": _Signature("iipippii"),
    # m, n, k, a, lda, tau, work, lwork, info
    "orgqr": _Signature("iiipippii"),
    # jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info
    "syevd": _Signature("cciipipipii"),
    # jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info
    "gesdd": _Signature("ciipippipipipi"),
    # jobvl, jobvr, n, a, lda, wr, wi, vl, ldvl, vr, ldvr, work, lwork, info
    "geev": _Signature("ccipipppipipii"),
    # jobvs, sort, select, n, a, lda, sdim, wr, wi, vs, ldvs, work, lwork, bwork, info
    "gees": _Signature("ccpipiipppipipi"),
    # n, ilo, ihi, a, lda, tau, work, lwork, info
    "gehrd": _Signature("iiipippii"),
}
"""The routines bound here for float32 and float64 and their argument lists (see
:class:`_Signature`)."""

COMPLEX_ROUTINES: dict[str, _Signature] = {
    # uplo, n, a, lda, info (a Hermitian; only the uplo triangle read)
    "potrf": _Signature("ciipi"),
    # order, side, uplo, transa, diag, m, n, alpha (by pointer), a, lda, b, ldb
    "trsm": _Signature("eeeeeiippipi", cblas=True),
    # m, n, a, lda, ipiv, info
    "getrf": _Signature("iipipi"),
    # m, n, a, lda, tau, work, lwork, info
    "geqrf": _Signature("iipippii"),
    # m, n, k, a, lda, tau, work, lwork, info (Q of geqrf's reflectors: orgqr's complex twin)
    "ungqr": _Signature("iiipippii"),
    # jobz, uplo, n, a, lda, w (real), work, lwork, rwork, lrwork, iwork, liwork, info
    "heevd": _Signature("cciipipipipii"),
    # jobz, m, n, a, lda, s (real), u, ldu, vt, ldvt, work, lwork, rwork, iwork, info
    "gesdd": _Signature("ciipippipipippi"),
    # jobvl, jobvr, n, a, lda, w, vl, ldvl, vr, ldvr, work, lwork, rwork, info
    "geev": _Signature("ccipippipipipi"),
    # jobvs, sort, select, n, a, lda, sdim, w, vs, ldvs, work, lwork, rwork (real), bwork, info
    "gees": _Signature("ccpipiippipippi"),
    # n, ilo, ihi, a, lda, tau, work, lwork, info
    "gehrd": _Signature("iiipippii"),
}
"""The routines bound here for complex64 (``c``) and complex128 (``z``). Their arrays hold
interleaved (re, im) pairs, numpy's complex layout; cblas passes complex scalars by pointer."""

_PREFIX = {
    np.dtype(np.float32): "s",
    np.dtype(np.float64): "d",
    np.dtype(np.complex64): "c",
    np.dtype(np.complex128): "z",
}
_LETTER_DTYPE = {letter: dt for dt, letter in _PREFIX.items()}


class LapackUnavailableError(RuntimeError):
    """A LAPACK routine is not in numpy's bundled OpenBLAS (or there is none)."""


@dataclass(frozen=True)
class LapackInfo:
    """What :func:`find_lapack` found. ``reason`` is None when the library loaded, else why not.

    ``symbols[(routine, 's'|'d')]`` is the resolved symbol, ``functions`` the ctypes function
    for it, ``missing`` the ``(routine, 's'|'d')`` pairs the library lacks."""

    reason: str | None
    library_path: str | None = None
    int_bits: int | None = None
    symbols: dict = field(default_factory=dict)
    functions: dict = field(default_factory=dict)
    missing: tuple = ()

    @property
    def available(self) -> bool:
        return self.reason is None

    def has(self, routine: str, dtype) -> bool:
        return (routine, _letter(dtype)) in self.functions

    def function(self, routine: str, dtype):
        """The ctypes function of ``routine`` for ``dtype``; raises when it is missing."""
        key = (routine, _letter(dtype))
        fn = self.functions.get(key)
        if fn is None:
            name = key[1] + routine
            why = self.reason or f"{self.library_path} does not export it"
            raise LapackUnavailableError(
                f"LAPACK routine {name} is unavailable: {why}. numpy's bundled OpenBLAS lacks "
                "it; install a numpy wheel from PyPI (which bundles OpenBLAS with LAPACK)"
            )
        return fn

    def address(self, routine: str, dtype) -> int:
        return ctypes.cast(self.function(routine, dtype), ctypes.c_void_p).value

    def llvm_name(self, routine: str, dtype) -> str:
        """The name jitted code calls: ``fg_spotrf``, ``fg_dgesdd``, ``fg_strsm``, ..."""
        return f"fg_{_letter(dtype)}{routine}"

    def decl(self, routine: str, dtype) -> str:
        """The LLVM ``declare`` of :meth:`llvm_name` for this library's ABI."""
        letter = _letter(dtype)
        sig = (ROUTINES if letter in "sd" else COMPLEX_ROUTINES)[routine]
        i = f"i{self.int_bits}"
        scalar = "float" if letter == "s" else "double"
        if sig.cblas:
            types = {"e": "i32", "i": i, "s": scalar, "p": "ptr"}
            args = [types[k] for k in sig.kinds]
        else:
            args = ["ptr"] * len(sig.kinds) + ["i64"] * sig.n_chars
        return f"declare void @{self.llvm_name(routine, dtype)}({', '.join(args)})"


def _letter(dtype) -> str:
    dt = np.dtype(dtype)
    if dt not in _PREFIX:
        raise TypeError(
            f"LAPACK: dtype {dt} is not supported; use float32, float64, complex64 or complex128"
        )
    return _PREFIX[dt]


def _bind(lib, symbol: str, sig: _Signature, scalar, int_type):
    fn = getattr(lib, symbol)
    if sig.cblas:
        types = {"e": ctypes.c_int, "i": int_type, "s": scalar, "p": ctypes.c_void_p}
        fn.argtypes = [types[k] for k in sig.kinds]
    else:
        fn.argtypes = [ctypes.c_void_p] * len(sig.kinds) + [ctypes.c_size_t] * sig.n_chars
    fn.restype = None
    return fn


def _probe() -> LapackInfo:
    b = blas.find_blas()
    if not b.available:
        return LapackInfo(reason=f"no BLAS library: {b.reason}")
    prefix, suffix = b.sgemm_symbol.split("cblas_sgemm")
    try:
        lib = ctypes.CDLL(b.library_path)
    except OSError as e:  # pragma: no cover - find_blas loaded it already
        return LapackInfo(reason=f"cannot load {b.library_path}: {e}")
    int_type = ctypes.c_int64 if b.int_bits == 64 else ctypes.c_int32
    symbols, functions, missing = {}, {}, []
    table = [(r, sig, "sd") for r, sig in ROUTINES.items()]
    table += [(r, sig, "cz") for r, sig in COMPLEX_ROUTINES.items()]
    for routine, sig, letters in table:
        for letter in letters:
            scalar = ctypes.c_float if letter == "s" else ctypes.c_double
            if sig.cblas:
                symbol = f"{prefix}cblas_{letter}{routine}{suffix}"
            else:
                symbol = f"{prefix}{letter}{routine}_{suffix}"
            if not hasattr(lib, symbol):
                missing.append((routine, letter))
                continue
            symbols[(routine, letter)] = symbol
            functions[(routine, letter)] = _bind(lib, symbol, sig, scalar, int_type)
    return LapackInfo(
        reason=None,
        library_path=b.library_path,
        int_bits=b.int_bits,
        symbols=symbols,
        functions=functions,
        missing=tuple(missing),
    )


_info: LapackInfo | None = None
_lock = threading.Lock()
_registered = False


def find_lapack() -> LapackInfo:
    """numpy's LAPACK, found once per process (see the module docstring)."""
    global _info
    with _lock:
        if _info is None:
            _info = _probe()
        return _info


def register_llvm_symbols() -> LapackInfo:
    """Make ``@fg_<s|d><routine>`` resolvable by jitted code for every routine found
    (idempotent). IR calling a missing one fails to compile with a CompileError naming it."""
    global _registered
    info = find_lapack()
    if info.available and not _registered:
        from fungrad.lowering.cpu import compiler as cpu
        from fungrad.lowering.cpu import llvm_capi

        with cpu.llvm_lock:
            if not _registered:
                for routine, letter in info.functions:
                    dtype = _LETTER_DTYPE[letter]
                    llvm_capi.add_symbol(
                        info.llvm_name(routine, dtype), info.address(routine, dtype)
                    )
                _registered = True
    return info


# --- eager callers -------------------------------------------------------------------------------


class _Ints:
    """Integer arguments passed by pointer, at the library's width; kept alive by this object."""

    def __init__(self, int_bits: int):
        self.type = ctypes.c_int64 if int_bits == 64 else ctypes.c_int32
        self.np_type = np.int64 if int_bits == 64 else np.int32
        self._keep = []

    def __call__(self, value: int):
        v = self.type(int(value))
        self._keep.append(v)
        return ctypes.byref(v)


def _matrix(name: str, a, *, square: bool = False, order: str = "C") -> np.ndarray:
    """A private copy of ``a`` in ``order``, checked to be a matrix of a dtype ``name`` is
    bound for (float32/float64; complex64/complex128 too for :data:`COMPLEX_ROUTINES`)."""
    a = np.asarray(a)
    letters = "sdcz" if name in COMPLEX_ROUTINES else "sd"
    if _PREFIX.get(a.dtype, "?") not in letters:
        kinds = (
            "float32, float64, complex64 or complex128"
            if name in COMPLEX_ROUTINES
            else "float32 or float64"
        )
        raise TypeError(f"lapack.{name}: dtype {a.dtype} is not supported; cast to {kinds}")
    if a.ndim != 2:
        raise ValueError(f"lapack.{name}: expected a matrix (2 dimensions), got shape {a.shape}")
    if square and a.shape[0] != a.shape[1]:
        raise ValueError(f"lapack.{name}: expected a square matrix, got shape {a.shape}")
    return np.array(a, order=order, copy=True)


def _ptr(x: np.ndarray):
    return ctypes.c_void_p(x.ctypes.data)


def _chars(*cs: str):
    return [ctypes.c_char_p(c.encode()) for c in cs]


def _lwork(value) -> int:
    """A workspace size LAPACK reported in a float (rounded up; float32 loses low bits)."""
    return max(1, int(np.ceil(float(np.real(value)) * (1 + 4 * np.finfo(np.float32).eps))))


def potrf(a, lower: bool = True):
    """Cholesky factor of the symmetric (complex: Hermitian) positive-definite ``a`` from the
    ``lower`` (or upper) triangle. Returns ``(factor, info)``: ``factor`` is L (lower) with
    ``a = L Lᴴ`` or U with ``a = Uᴴ U``, the other triangle zeroed; ``info > 0`` when the
    leading minor of that order is not positive definite (the factor is then partial). A
    row-major Hermitian buffer is, to LAPACK, its conjugate, whose factor read back row-major
    is again ours: the same ``uplo`` flip serves both kinds."""
    c = _matrix("potrf", a, square=True)
    info = find_lapack()
    fn = info.function("potrf", c.dtype)
    n = c.shape[0]
    ints = _Ints(info.int_bits)
    st = np.zeros(1, ints.np_type)
    (uplo,) = _chars("U" if lower else "L")  # row-major: the stored triangle flips
    fn(uplo, ints(n), _ptr(c), ints(max(1, n)), _ptr(st), 1)
    return (np.tril(c) if lower else np.triu(c)), int(st[0])


def trsm(
    a,
    b,
    left_side: bool = True,
    lower: bool = True,
    transpose_a: bool = False,
    unit_diagonal: bool = False,
    conjugate_a: bool = False,
):
    """Solve ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` for ``x``, ``a`` triangular
    (only its ``lower`` or upper triangle is read; the diagonal taken as ones when
    ``unit_diagonal``), ``op(a) = aᵀ`` when ``transpose_a`` (``aᴴ`` with ``conjugate_a`` too,
    for complex dtypes; cblas has no conjugate without the transpose). Returns ``x`` (BLAS has
    no info: a zero on the diagonal gives inf/NaN, as in LAPACK)."""
    a = _matrix("trsm", a, square=True)
    x = _matrix("trsm", b)
    if a.dtype != x.dtype:
        raise TypeError(f"lapack.trsm: a is {a.dtype} but b is {x.dtype}; use one dtype")
    m, n = x.shape
    k = m if left_side else n
    if a.shape[0] != k:
        side = "rows" if left_side else "columns"
        raise ValueError(
            f"lapack.trsm: a has shape {a.shape} but b {x.shape}: a must be {k}x{k} (b's {side})"
        )
    if conjugate_a and not transpose_a:
        raise ValueError(
            "lapack.trsm: conjugate_a needs transpose_a (cblas solves with a, aᵀ or aᴴ); "
            "conjugate a first"
        )
    info = find_lapack()
    fn = info.function("trsm", a.dtype)
    cplx = a.dtype.kind == "c"
    trans = blas.CBLAS_NO_TRANS
    if transpose_a:
        trans = CBLAS_CONJ_TRANS if conjugate_a and cplx else blas.CBLAS_TRANS
    one = np.ones(1, a.dtype)
    fn(
        blas.CBLAS_ROW_MAJOR,
        CBLAS_LEFT if left_side else CBLAS_RIGHT,
        CBLAS_LOWER if lower else CBLAS_UPPER,
        trans,
        CBLAS_UNIT if unit_diagonal else CBLAS_NON_UNIT,
        m,
        n,
        _ptr(one) if cplx else 1.0,
        _ptr(a),
        max(1, k),
        _ptr(x),
        max(1, n),
    )
    return x


def getrf(a):
    """LU factorisation with partial pivoting of the ``m x n`` matrix ``a``.

    Returns ``(lu, pivots, info)``: ``lu`` holds L below its diagonal (unit diagonal implied)
    and U on and above it; ``pivots`` (int32, length ``min(m, n)``) are 0-based row swaps,
    row ``i`` swapped with row ``pivots[i]`` in turn (LAPACK's are 1-based); ``info > 0`` when
    ``U[info-1, info-1]`` is exactly zero (the factorisation is complete, U singular)."""
    f = _matrix("getrf", a, order="F")
    info = find_lapack()
    fn = info.function("getrf", f.dtype)
    m, n = f.shape
    ints = _Ints(info.int_bits)
    ipiv = np.zeros(min(m, n), ints.np_type)
    st = np.zeros(1, ints.np_type)
    fn(ints(m), ints(n), _ptr(f), ints(max(1, m)), _ptr(ipiv), _ptr(st))
    return np.ascontiguousarray(f), (ipiv - 1).astype(np.int32), int(st[0])


def geqrf(a):
    """Householder QR of the ``m x n`` matrix ``a``. Returns ``(qr, tau, info)``: R on and above
    the diagonal of ``qr``, the reflectors' vectors below it, their scales in ``tau``
    (length ``min(m, n)``); :func:`orgqr` forms Q from them."""
    f = _matrix("geqrf", a, order="F")
    info = find_lapack()
    fn = info.function("geqrf", f.dtype)
    m, n = f.shape
    ints = _Ints(info.int_bits)
    tau = np.zeros(min(m, n), f.dtype)
    st = np.zeros(1, ints.np_type)
    query = np.zeros(1, f.dtype)
    lda = ints(max(1, m))
    fn(ints(m), ints(n), _ptr(f), lda, _ptr(tau), _ptr(query), ints(-1), _ptr(st))
    if st[0] == 0:
        work = np.zeros(_lwork(query[0]), f.dtype)
        fn(ints(m), ints(n), _ptr(f), lda, _ptr(tau), _ptr(work), ints(work.size), _ptr(st))
    return np.ascontiguousarray(f), tau, int(st[0])


def orgqr(a, tau):
    """The first ``n`` columns of Q from :func:`geqrf`'s output: ``a`` is ``m x n`` (``m >= n``)
    with the ``k = len(tau)`` reflectors in its first columns. Pass ``a`` padded with columns
    (any values) to ``m x m`` for the full Q. Returns ``(q, info)``."""
    return _form_q("orgqr", a, tau)


def ungqr(a, tau):
    """:func:`orgqr` for complex matrices (LAPACK's ``cungqr``/``zungqr``): the first ``n``
    columns of the unitary Q of :func:`geqrf`'s complex output. Returns ``(q, info)``."""
    return _form_q("ungqr", a, tau)


def _form_q(name: str, a, tau):
    f = _matrix(name, a, order="F")
    tau = np.asarray(tau)
    m, n = f.shape
    if tau.dtype != f.dtype or tau.ndim != 1 or not (tau.size <= n <= m):
        raise ValueError(
            f"lapack.{name}: a {f.shape} {f.dtype} and tau {tau.shape} {tau.dtype} must satisfy "
            "len(tau) <= a.shape[1] <= a.shape[0] with one dtype"
        )
    tau = np.ascontiguousarray(tau)
    info = find_lapack()
    fn = info.function(name, f.dtype)
    ints = _Ints(info.int_bits)
    st = np.zeros(1, ints.np_type)
    query = np.zeros(1, f.dtype)
    dims = (ints(m), ints(n), ints(tau.size))
    lda = ints(max(1, m))
    fn(*dims, _ptr(f), lda, _ptr(tau), _ptr(query), ints(-1), _ptr(st))
    if st[0] == 0:
        work = np.zeros(_lwork(query[0]), f.dtype)
        fn(*dims, _ptr(f), lda, _ptr(tau), _ptr(work), ints(work.size), _ptr(st))
    return np.ascontiguousarray(f), int(st[0])


def syevd(a, lower: bool = True):
    """Eigen-decomposition of the symmetric ``a`` read from its ``lower`` (or upper) triangle,
    by divide and conquer. Returns ``(w, v, info)``: eigenvalues ``w`` ascending and the
    orthonormal eigenvectors as the columns of ``v`` (``a v = v diag(w)``); ``info > 0`` when
    the algorithm failed to converge."""
    c = _matrix("syevd", a, square=True)
    info = find_lapack()
    fn = info.function("syevd", c.dtype)
    n = c.shape[0]
    ints = _Ints(info.int_bits)
    w = np.zeros(n, c.dtype)
    st = np.zeros(1, ints.np_type)
    jobz, uplo = _chars("V", "U" if lower else "L")  # row-major: the stored triangle flips
    query, iquery = np.zeros(1, c.dtype), np.zeros(1, ints.np_type)
    head = (jobz, uplo, ints(n), _ptr(c), ints(max(1, n)), _ptr(w))
    fn(*head, _ptr(query), ints(-1), _ptr(iquery), ints(-1), _ptr(st), 1, 1)
    if st[0] == 0:
        work = np.zeros(_lwork(query[0]), c.dtype)
        iwork = np.zeros(max(1, int(iquery[0])), ints.np_type)
        fn(*head, _ptr(work), ints(work.size), _ptr(iwork), ints(iwork.size), _ptr(st), 1, 1)
    # LAPACK's eigenvector columns are the rows of the row-major buffer.
    return w, np.ascontiguousarray(c.T), int(st[0])


def heevd(a, lower: bool = True):
    """Eigen-decomposition of the complex Hermitian ``a`` read from its ``lower`` (or upper)
    triangle (the imaginary parts of its diagonal ignored), by divide and conquer. Returns
    ``(w, v, info)``: real eigenvalues ``w`` ascending, the orthonormal eigenvectors as the
    columns of ``v``; ``info > 0`` when it failed to converge. (The row-major buffer is the
    conjugate of the matrix to LAPACK, so the matrix is passed column-major here.)"""
    f = _matrix("heevd", a, square=True, order="F")
    if f.dtype.kind != "c":
        raise TypeError(f"lapack.heevd: a must be complex64 or complex128, got {f.dtype}")
    info = find_lapack()
    fn = info.function("heevd", f.dtype)
    n = f.shape[0]
    rdt = np.float32 if f.dtype == np.complex64 else np.float64
    ints = _Ints(info.int_bits)
    w = np.zeros(n, rdt)
    st = np.zeros(1, ints.np_type)
    jobz, uplo = _chars("V", "L" if lower else "U")
    query, rquery = np.zeros(1, f.dtype), np.zeros(1, rdt)
    iquery = np.zeros(1, ints.np_type)
    head = (jobz, uplo, ints(n), _ptr(f), ints(max(1, n)), _ptr(w))
    fn(*head, _ptr(query), ints(-1), _ptr(rquery), ints(-1), _ptr(iquery), ints(-1), _ptr(st), 1, 1)
    if st[0] == 0:
        work = np.zeros(_lwork(query[0]), f.dtype)
        rwork = np.zeros(_lwork(rquery[0]), rdt)
        iwork = np.zeros(max(1, int(iquery[0])), ints.np_type)
        fn(
            *head,
            *(_ptr(work), ints(work.size), _ptr(rwork), ints(rwork.size)),
            *(_ptr(iwork), ints(iwork.size), _ptr(st)),
            1,
            1,
        )
    return w, np.ascontiguousarray(f), int(st[0])


def gesdd_rwork(m: int, n: int, compute_uv: bool) -> int:
    """The length of complex ``gesdd``'s real workspace (LAPACK 3.7's bound; not queried)."""
    mn, mx = min(m, n), max(m, n)
    if not compute_uv:
        return max(1, 7 * mn)
    return max(1, mn * max(5 * mn + 7, 2 * mx + 2 * mn + 1))


def gesdd(a, full_matrices: bool = True, compute_uv: bool = True):
    """Singular value decomposition of the ``m x n`` matrix ``a`` by divide and conquer.

    Returns ``(s, u, vt, info)`` with ``a = u diag(s) vt``, ``s`` descending (length
    ``k = min(m, n)``); ``u`` is ``m x m`` and ``vt`` ``n x n`` when ``full_matrices``, else
    ``m x k`` and ``k x n``; both None unless ``compute_uv``. ``info > 0`` when it did not
    converge. An empty ``a`` gives identity ``u``/``vt`` (LAPACK itself leaves them unset:
    jitted code must fill them)."""
    c = _matrix("gesdd", a)
    if c.dtype.kind == "c":
        return gesdd_complex(c, full_matrices, compute_uv)
    info = find_lapack()
    fn = info.function("gesdd", c.dtype)
    m, n = c.shape
    k = min(m, n)
    ints = _Ints(info.int_bits)
    s = np.zeros(k, c.dtype)
    st = np.zeros(1, ints.np_type)
    if not compute_uv:
        job, u, vt = "N", np.zeros(1, c.dtype), np.zeros(1, c.dtype)
    elif full_matrices:
        job, u, vt = "A", np.zeros((m, m), c.dtype), np.zeros((n, n), c.dtype)
    else:
        job, u, vt = "S", np.zeros((m, k), c.dtype), np.zeros((k, n), c.dtype)
    # LAPACK sees the row-major m x n buffer as the n x m transpose; the SVD of the transpose
    # swaps the factors, so LAPACK's U (n x ., leading dim n) is our vt and its VT our u.
    ldu = max(1, n) if compute_uv else 1
    ldvt = max(1, (m if full_matrices else k)) if compute_uv else 1
    (jobz,) = _chars(job)
    iwork = np.zeros(max(1, 8 * k), ints.np_type)
    head = (jobz, ints(n), ints(m), _ptr(c), ints(max(1, n)), _ptr(s))
    mats = (_ptr(vt), ints(ldu), _ptr(u), ints(ldvt))
    query = np.zeros(1, c.dtype)
    fn(*head, *mats, _ptr(query), ints(-1), _ptr(iwork), _ptr(st), 1)
    if st[0] == 0:
        work = np.zeros(_lwork(query[0]), c.dtype)
        fn(*head, *mats, _ptr(work), ints(work.size), _ptr(iwork), _ptr(st), 1)
    if not compute_uv:
        return s, None, None, int(st[0])
    if k == 0:
        # LAPACK returns at once for an empty matrix, leaving u and vt unset; the full
        # factors are then identities (as numpy.linalg.svd gives).
        u[...], vt[...] = np.eye(*u.shape, dtype=c.dtype), np.eye(*vt.shape, dtype=c.dtype)
    return s, u, vt, int(st[0])


def geev(a, left: bool = True, right: bool = True):
    """Eigenvalues and eigenvectors of the general square ``a``, in LAPACK's real form.

    Returns ``(wr, wi, vl, vr, info)``: the eigenvalues ``wr + i wi`` (complex conjugate pairs
    adjacent, the one with positive imaginary part first); ``vr`` (``vl``) holds the right
    (left) eigenvectors as columns, each of Euclidean norm 1 with its largest component real: a
    real eigenvalue's vector is column ``j``, a pair's is ``v[:, j] ± i v[:, j + 1]``. ``vl`` /
    ``vr`` are None unless ``left`` / ``right``; ``info > 0`` when the QR algorithm failed."""
    f = _matrix("geev", a, square=True, order="F")
    if f.dtype.kind == "c":
        raise TypeError(
            f"lapack.geev: a is {f.dtype}; the real form takes float32 or float64 (use "
            "geev_complex for complex matrices)"
        )
    info = find_lapack()
    fn = info.function("geev", f.dtype)
    n = f.shape[0]
    ints = _Ints(info.int_bits)
    wr, wi = np.zeros(n, f.dtype), np.zeros(n, f.dtype)
    vl = np.zeros((n, n), f.dtype, order="F") if left else np.zeros(1, f.dtype)
    vr = np.zeros((n, n), f.dtype, order="F") if right else np.zeros(1, f.dtype)
    st = np.zeros(1, ints.np_type)
    jobvl, jobvr = _chars("V" if left else "N", "V" if right else "N")
    head = (jobvl, jobvr, ints(n), _ptr(f), ints(max(1, n)), _ptr(wr), _ptr(wi))
    mats = (_ptr(vl), ints(max(1, n) if left else 1), _ptr(vr), ints(max(1, n) if right else 1))
    query = np.zeros(1, f.dtype)
    fn(*head, *mats, _ptr(query), ints(-1), _ptr(st), 1, 1)
    if st[0] == 0:
        work = np.zeros(_lwork(query[0]), f.dtype)
        fn(*head, *mats, _ptr(work), ints(work.size), _ptr(st), 1, 1)
    return (
        wr,
        wi,
        np.ascontiguousarray(vl) if left else None,
        np.ascontiguousarray(vr) if right else None,
        int(st[0]),
    )


def gesdd_complex(a, full_matrices: bool = True, compute_uv: bool = True):
    """:func:`gesdd` of a complex matrix (``cgesdd``/``zgesdd``): ``(s, u, vt, info)`` with
    ``a = u diag(s) vt``, ``s`` real. The matrix is passed column-major (the row-major buffer
    would be its transpose, whose factors are conjugated)."""
    f = _matrix("gesdd", a, order="F")
    if f.dtype.kind != "c":
        raise TypeError(f"lapack.gesdd_complex: a must be complex, got {f.dtype}")
    info = find_lapack()
    fn = info.function("gesdd", f.dtype)
    m, n = f.shape
    k = min(m, n)
    rdt = np.float32 if f.dtype == np.complex64 else np.float64
    ints = _Ints(info.int_bits)
    s = np.zeros(k, rdt)
    st = np.zeros(1, ints.np_type)
    if not compute_uv:
        job, u, vt = "N", np.zeros(1, f.dtype), np.zeros(1, f.dtype)
    elif full_matrices:
        job = "A"
        u, vt = np.zeros((m, m), f.dtype, order="F"), np.zeros((n, n), f.dtype, order="F")
    else:
        job = "S"
        u, vt = np.zeros((m, k), f.dtype, order="F"), np.zeros((k, n), f.dtype, order="F")
    ldu = max(1, m) if compute_uv else 1
    ldvt = max(1, (n if full_matrices else k)) if compute_uv else 1
    (jobz,) = _chars(job)
    rwork = np.zeros(gesdd_rwork(m, n, compute_uv), rdt)
    iwork = np.zeros(max(1, 8 * k), ints.np_type)
    head = (jobz, ints(m), ints(n), _ptr(f), ints(max(1, m)), _ptr(s))
    mats = (_ptr(u), ints(ldu), _ptr(vt), ints(ldvt))
    query = np.zeros(1, f.dtype)
    fn(*head, *mats, _ptr(query), ints(-1), _ptr(rwork), _ptr(iwork), _ptr(st), 1)
    if st[0] == 0:
        work = np.zeros(_lwork(query[0]), f.dtype)
        fn(*head, *mats, _ptr(work), ints(work.size), _ptr(rwork), _ptr(iwork), _ptr(st), 1)
    if not compute_uv:
        return s, None, None, int(st[0])
    if k == 0:
        u[...], vt[...] = np.eye(*u.shape, dtype=f.dtype), np.eye(*vt.shape, dtype=f.dtype)
    return s, np.ascontiguousarray(u), np.ascontiguousarray(vt), int(st[0])


def geev_complex(a, left: bool = True, right: bool = True):
    """Eigenvalues and eigenvectors of the complex square ``a`` (``cgeev``/``zgeev``):
    ``(w, vl, vr, info)``, the right (left) eigenvectors as the columns of ``vr`` (``vl``),
    each of norm 1 with its largest component real; None unless requested."""
    f = _matrix("geev", a, square=True, order="F")
    if f.dtype.kind != "c":
        raise TypeError(f"lapack.geev_complex: a must be complex, got {f.dtype}")
    info = find_lapack()
    fn = info.function("geev", f.dtype)
    n = f.shape[0]
    rdt = np.float32 if f.dtype == np.complex64 else np.float64
    ints = _Ints(info.int_bits)
    w = np.zeros(n, f.dtype)
    vl = np.zeros((n, n), f.dtype, order="F") if left else np.zeros(1, f.dtype)
    vr = np.zeros((n, n), f.dtype, order="F") if right else np.zeros(1, f.dtype)
    rwork = np.zeros(max(1, 2 * n), rdt)
    st = np.zeros(1, ints.np_type)
    jobvl, jobvr = _chars("V" if left else "N", "V" if right else "N")
    head = (jobvl, jobvr, ints(n), _ptr(f), ints(max(1, n)), _ptr(w))
    mats = (_ptr(vl), ints(max(1, n) if left else 1), _ptr(vr), ints(max(1, n) if right else 1))
    query = np.zeros(1, f.dtype)
    fn(*head, *mats, _ptr(query), ints(-1), _ptr(rwork), _ptr(st), 1, 1)
    if st[0] == 0:
        work = np.zeros(_lwork(query[0]), f.dtype)
        fn(*head, *mats, _ptr(work), ints(work.size), _ptr(rwork), _ptr(st), 1, 1)
    return (
        w,
        np.ascontiguousarray(vl) if left else None,
        np.ascontiguousarray(vr) if right else None,
        int(st[0]),
    )


def gees(a, compute_vectors: bool = True):
    """Schur decomposition of the square ``a`` (``sgees``/``dgees``, ``cgees``/``zgees``),
    unsorted: ``a = z t zᴴ`` with ``z`` unitary and ``t`` upper triangular (complex) or
    quasi-upper-triangular (real: 2 x 2 diagonal blocks hold complex conjugate eigenvalue
    pairs, each block with equal diagonal entries and off-diagonal entries of opposite signs,
    LAPACK's standard form). Returns ``(t, z, info)``; ``z`` is None unless
    ``compute_vectors``; ``info > 0`` when the QR algorithm failed to converge."""
    f = _matrix("gees", a, square=True, order="F")
    info = find_lapack()
    fn = info.function("gees", f.dtype)
    n = f.shape[0]
    ints = _Ints(info.int_bits)
    cplx = f.dtype.kind == "c"
    rdt = np.float32 if f.dtype in (np.float32, np.complex64) else np.float64
    z = np.zeros((n, n), f.dtype, order="F") if compute_vectors else np.zeros(1, f.dtype)
    sdim, st = np.zeros(1, ints.np_type), np.zeros(1, ints.np_type)
    eig = [np.zeros(n, f.dtype)] if cplx else [np.zeros(n, f.dtype), np.zeros(n, f.dtype)]
    rwork = [np.zeros(max(1, n), rdt)] if cplx else []
    bwork = np.zeros(max(1, n), ints.np_type)  # not referenced: no sorting
    jobvs, sort = _chars("V" if compute_vectors else "N", "N")
    head = (jobvs, sort, None, ints(n), _ptr(f), ints(max(1, n)), _ptr(sdim))
    head += tuple(_ptr(w) for w in eig) + (_ptr(z), ints(max(1, n) if compute_vectors else 1))
    tail = (*(_ptr(r) for r in rwork), _ptr(bwork), _ptr(st), 1, 1)
    query = np.zeros(1, f.dtype)
    fn(*head, _ptr(query), ints(-1), *tail)
    if st[0] == 0:
        work = np.zeros(_lwork(query[0]), f.dtype)
        fn(*head, _ptr(work), ints(work.size), *tail)
    return (
        np.ascontiguousarray(f),
        (np.ascontiguousarray(z) if compute_vectors else None),
        int(st[0]),
    )


def gehrd(a):
    """Householder reduction of the square ``a`` to upper Hessenberg form (``sgehrd``/
    ``dgehrd``, ``cgehrd``/``zgehrd``, ``ilo = 1``, ``ihi = n``). Returns ``(packed, taus,
    info)``: the Hessenberg matrix on and above the first subdiagonal of ``packed``, the
    reflectors' vectors below it (reflector ``i`` is ``I - tau_i v vᴴ`` with ``v[i + 1] = 1``
    implied and ``v[i + 2:]`` in column ``i``), their scales in ``taus`` (length ``n - 1``)."""
    f = _matrix("gehrd", a, square=True, order="F")
    info = find_lapack()
    fn = info.function("gehrd", f.dtype)
    n = f.shape[0]
    ints = _Ints(info.int_bits)
    tau = np.zeros(max(n - 1, 0), f.dtype)
    tau_buf = tau if tau.size else np.zeros(1, f.dtype)
    st = np.zeros(1, ints.np_type)
    head = (ints(n), ints(1), ints(n), _ptr(f), ints(max(1, n)), _ptr(tau_buf))
    query = np.zeros(1, f.dtype)
    fn(*head, _ptr(query), ints(-1), _ptr(st))
    if st[0] == 0:
        work = np.zeros(_lwork(query[0]), f.dtype)
        fn(*head, _ptr(work), ints(work.size), _ptr(st))
    return np.ascontiguousarray(f), tau, int(st[0])
