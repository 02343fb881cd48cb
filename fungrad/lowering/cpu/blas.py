"""numpy's bundled BLAS, reachable from ctypes and from jitted LLVM code.

numpy wheels ship OpenBLAS (``numpy.libs/libscipy_openblas64_-<hash>.so`` on Linux and Windows,
``numpy/.dylibs`` on macOS). :func:`find_blas` loads it (``ctypes.CDLL`` returns numpy's already
loaded copy, so the thread setting is shared), probes the cblas ``sgemm``/``dgemm`` symbols and
works out their integer width: the ``64_`` symbols and builds whose config says ``USE64BITINT`` are
ILP64 (``int64`` sizes), the others LP64 (``int32``). :func:`register_llvm_symbols` makes them
callable from LLVM IR as ``@fg_sgemm`` / ``@fg_dgemm``; :attr:`BlasInfo.sgemm_decl` is the matching
``declare`` line. Both follow cblas: ``(order, transA, transB, M, N, K, alpha, A, lda, B, ldb,
beta, C, ldc)`` with ``CBLAS_ROW_MAJOR = 101``, ``CBLAS_NO_TRANS = 111``, ``CBLAS_TRANS = 112``.

When no BLAS is found (e.g. a numpy built against Accelerate), :func:`find_blas` still returns a
:class:`BlasInfo` whose ``reason`` says why and whose functions are None; nothing raises at import.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
from dataclasses import dataclass

__all__ = [
    "CBLAS_NO_TRANS",
    "CBLAS_ROW_MAJOR",
    "CBLAS_TRANS",
    "BlasInfo",
    "find_blas",
    "register_llvm_symbols",
]

CBLAS_ROW_MAJOR = 101
CBLAS_NO_TRANS = 111
CBLAS_TRANS = 112

# (symbol prefix, symbol suffix) in the order to probe; "64_" marks the ILP64 interface.
_PROBES = (("scipy_", "64_"), ("", "64_"), ("scipy_", ""), ("", ""))


@dataclass(frozen=True)
class BlasInfo:
    """What :func:`find_blas` found. ``reason`` is None when BLAS is usable, else the reason not."""

    reason: str | None
    library_path: str | None = None
    sgemm_symbol: str | None = None
    dgemm_symbol: str | None = None
    int_bits: int | None = None  # 64 for ILP64, 32 for LP64
    config: str | None = None  # openblas_get_config(), when the library has it
    sgemm: ctypes._CFuncPtr | None = None
    dgemm: ctypes._CFuncPtr | None = None

    @property
    def available(self) -> bool:
        return self.reason is None

    @property
    def sgemm_address(self) -> int | None:
        return _address(self.sgemm)

    @property
    def dgemm_address(self) -> int | None:
        return _address(self.dgemm)

    @property
    def sgemm_decl(self) -> str | None:
        """The LLVM ``declare`` of ``@fg_sgemm`` for this library's ABI."""
        return _decl("fg_sgemm", "float", self.int_bits) if self.available else None

    @property
    def dgemm_decl(self) -> str | None:
        """The LLVM ``declare`` of ``@fg_dgemm`` for this library's ABI."""
        return _decl("fg_dgemm", "double", self.int_bits) if self.available else None


def _address(fn) -> int | None:
    return None if fn is None else ctypes.cast(fn, ctypes.c_void_p).value


def _decl(name: str, scalar: str, int_bits: int) -> str:
    i = f"i{int_bits}"
    return (
        f"declare void @{name}(i32, i32, i32, {i}, {i}, {i}, {scalar}, ptr, {i}, ptr, {i}, "
        f"{scalar}, ptr, {i})"
    )


def _candidate_libraries() -> list[str]:
    import numpy

    pkg = os.path.dirname(numpy.__file__)
    if sys.platform == "darwin":
        dirs = [os.path.join(pkg, ".dylibs")]
    else:
        dirs = [os.path.join(os.path.dirname(pkg), "numpy.libs"), os.path.join(pkg, ".libs")]
    found = []
    for d in dirs:
        found += sorted(glob.glob(os.path.join(d, "*openblas*")))
    return found


def _gemm_function(lib, symbol: str, scalar, int_type):
    fn = getattr(lib, symbol)
    i, p = int_type, ctypes.c_void_p
    fn.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        i,
        i,
        i,
        scalar,
        p,
        i,
        p,
        i,
        scalar,
        p,
        i,
    ]
    fn.restype = None
    return fn


def _probe(path: str) -> BlasInfo:
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        return BlasInfo(reason=f"cannot load {path}: {e}", library_path=path)
    for prefix, suffix in _PROBES:
        s_name, d_name = f"{prefix}cblas_sgemm{suffix}", f"{prefix}cblas_dgemm{suffix}"
        if not (hasattr(lib, s_name) and hasattr(lib, d_name)):
            continue
        config = None
        get_config = getattr(lib, f"{prefix}openblas_get_config{suffix}", None)
        if get_config is not None:
            get_config.argtypes, get_config.restype = [], ctypes.c_char_p
            config = get_config().decode(errors="replace")
        # NB: an unsuffixed cblas_sgemm is ILP64 only when the build says so in its config.
        ilp64 = suffix == "64_" or (config is not None and "USE64BITINT" in config)
        int_type = ctypes.c_int64 if ilp64 else ctypes.c_int32
        return BlasInfo(
            reason=None,
            library_path=path,
            sgemm_symbol=s_name,
            dgemm_symbol=d_name,
            int_bits=64 if ilp64 else 32,
            config=config,
            sgemm=_gemm_function(lib, s_name, ctypes.c_float, int_type),
            dgemm=_gemm_function(lib, d_name, ctypes.c_double, int_type),
        )
    names = ", ".join(f"{p}cblas_sgemm{s}" for p, s in _PROBES)
    return BlasInfo(
        reason=f"{path} exports none of {names} (with the dgemm twin)", library_path=path
    )


_info: BlasInfo | None = None
_lock = threading.Lock()
_registered = False


def find_blas() -> BlasInfo:
    """numpy's BLAS, found once per process (see the module docstring)."""
    global _info
    with _lock:
        if _info is None:
            libs = _candidate_libraries()
            if not libs:
                _info = BlasInfo(
                    reason="no *openblas* library beside numpy (numpy.libs or "
                    "numpy/.dylibs); this numpy may use another BLAS"
                )
            else:
                infos = [_probe(p) for p in libs]
                _info = next((i for i in infos if i.available), infos[0])
        return _info


def register_llvm_symbols() -> BlasInfo:
    """Make ``@fg_sgemm`` / ``@fg_dgemm`` resolvable by jitted code (idempotent).

    Does nothing when BLAS is unavailable; IR that calls them then fails to compile with a
    CompileError naming the missing symbol (``compiler`` checks externals before loading).
    """
    global _registered
    info = find_blas()
    if info.available and not _registered:
        from fungrad.lowering.cpu import compiler as cpu
        from fungrad.lowering.cpu import llvm_capi

        with cpu.llvm_lock:
            if not _registered:
                llvm_capi.add_symbol("fg_sgemm", info.sgemm_address)
                llvm_capi.add_symbol("fg_dgemm", info.dgemm_address)
                _registered = True
    return info
