"""The CPU's FFT library: batched 1-D complex-to-complex transforms of any length, written in
LLVM IR, compiled once per process and dtype (float32, float64).

What it computes: for each of ``batch`` rows of ``n`` complex numbers stored interleaved (real,
imaginary adjacent), ``out[k] = sum_j x[j] * exp(sign * 2 pi i j k / n)``, ``sign`` -1 forward
and +1 inverse, unscaled. Exported per dtype::

    void fg_fft_f32(ptr plan, ptr x, ptr out, i64 batch, ptr pool, i64 nthreads)
    void fg_fft_cols_f32(ptr plan, ptr x, ptr out, i64 outer, i64 inner, ptr pool,
                         i64 nthreads)                  (and the f64 pair)

the first along the rows of ``[batch, n]``, the second along the middle axis of
``[outer, n, inner]`` (``fft_cols_ir.py``: groups of columns through the batched passes, no
transposes; 1024 x 1024 complex64 along axis 0 in 2.1 ms, the time of its rows).

``x`` and ``out`` are either the same buffer or disjoint. ``plan`` is a table built here in
Python (:func:`plan`) for one ``(n, dtype, inverse)`` and kept for the life of the process;
generated code reaches it through a symbol registered with LLVM (:func:`plan_symbol`), so the
IR text, and with it the on-disk cache key, holds no address. ``pool`` is ``@fg_parallel_for``
(``runtime.py``) or null: with ``nthreads > 1`` and ``PARALLEL_POINTS`` points, a batch of at
least ``nthreads`` rows is split by rows, else every pass of each transform that has an
explicit-vector form is split into chunks (the arithmetic per output is the same either way:
results are bitwise those of one thread).

Why an own library: numpy's pocketfft and scipy's are C++ inside Python extensions with no C
entry point native code could call, and none is bundled otherwise; these kernels beat them
(and JAX's ducc) at every size measured (bench/fft_bench.py, below).

Algorithms:

- ``n`` whose prime factors are 2, 3, 5, 7: the Stockham autosort FFT (no bit reversal), radix 4
  passes while 4 divides ``n``, then 2, 3, 5, 7. A pass of radix ``p`` on sub-transforms of
  length ``N`` (``s = n / N`` of them interleaved, ``m = N / p``) reads
  ``a_r = x[q + s (j + r m)]`` and writes ``y[q + s (p j + k)] = w^(j k) DFT_p(a)_k`` with
  ``w = exp(sign 2 pi i / N)``; passes alternate between ``out`` and a scratch buffer so that
  the last lands in ``out``. Each pass runs in one of four forms (chosen per pass at run time;
  the code is in ``fft_ir.py``): explicit vectors of ``VEC`` complex numbers over ``q`` when
  ``s`` is a multiple of ``VEC``; explicit vectors over ``(j, q)`` for radix 2 and 4 with ``s``
  1, 2 or 4 (the first passes); else scalar loops over ``j`` (small ``s``) or over ``q``, which
  LLVM's loop vectoriser handles where it can. Loads and stores are of whole interleaved
  vectors, split into real and imaginary vectors by shuffles.
- batches of rows shorter than ``BATCH_BELOW`` (or than ``BATCH_SCALAR_BELOW`` where a pass
  above would be scalar): ``VEC`` rows at a time, transposed so that every pass runs on whole
  vectors (``fft_batch_ir.py``); the rows past the last block as above.
- other lengths: Bluestein's algorithm, the chirp ``exp(sign pi i j^2 / n)`` turning the
  transform into a circular convolution of power-of-two length ``M >= 2 n - 1``, done with two
  forward FFTs of length ``M`` (the second on conjugated data) and the precomputed transform
  of the chirp filter (scaled by ``1 / M``).

Twiddle factors, chirps and the chirp filter's transform are computed once per plan in double
precision with direct ``exp`` of reduced angles (``j k mod N``, ``j^2 mod 2 n``: no recurrence,
no large arguments), then rounded to the dtype: the error against numpy's float64 transform is
at most 0.7 eps log2(n) in the 2-norm, relative (every n up to 129 and the powers of two to
2^16 measured). Scratch memory (``2 n`` complex numbers, ``2 n VEC`` for blocks of rows,
``3 M`` for Bluestein) is allocated and freed per call (per chunk of rows).

Measured (bench/fft_bench.py, Zen 4 with AVX-512, complex64, pinned to one core, the same
process timing JAX 0.10's jit; the library through ctypes): 2^20 points 4.1 ms (JAX 14.8 ms,
scipy.fft 16.8 ms, numpy 23 ms), 1000 points 6.9 us (JAX 23 us, scipy 8.1 us), 997 (Bluestein)
11 us (JAX 43 us), 1024 x 1024 2.7 ms (JAX 3.1 ms); 65536 rows of 8 0.35 ms (JAX 0.72 ms),
4096 rows of 100 0.35 ms (JAX 0.80 ms). Unpinned (2 cores) 2^20 takes 2.0 ms. The library
compiles in ~0.65 s per dtype (then from the on-disk cache).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from fungrad.lowering.cpu.fft_batch_ir import BATCH_BELOW, BATCH_SCALAR_BELOW, batch_functions
from fungrad.lowering.cpu.fft_cols_ir import cols_functions, cols_symbol
from fungrad.lowering.cpu.fft_driver_ir import library_ir as _library_ir
from fungrad.lowering.cpu.fft_ir import (
    HEADER,
    PARALLEL_POINTS,
    PASS_FIELDS,
    RADICES,
    VEC,
)

__all__ = [
    "PARALLEL_POINTS",
    "RADICES",
    "Plan",
    "ensure_library",
    "fft",
    "cols_decl",
    "cols_symbol_of",
    "library_decl",
    "library_ir",
    "plan",
    "plan_symbol",
    "symbol",
]


_KIND_STOCKHAM, _KIND_BLUESTEIN = 0, 1
_TYPES = {np.dtype(np.float32): ("float", "f32"), np.dtype(np.float64): ("double", "f64")}


def _real_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in _TYPES:
        raise TypeError(f"fft: the library computes float32 and float64 data, got {dt}")
    return dt


def symbol(dtype) -> str:
    """The exported function for ``dtype`` (float32 or float64): ``fg_fft_f32``/``fg_fft_f64``."""
    return f"fg_fft_{_TYPES[_real_dtype(dtype)][1]}"


def library_decl(dtype) -> str:
    return f"declare void @{symbol(dtype)}(ptr, ptr, ptr, i64, ptr, i64)"


# -- plans ------------------------------------------------------------------------------------


def _stockham_radices(n: int) -> list[int] | None:
    """``n``'s factors in pass order (4s, then 2, 3, 5, 7), or None if another prime divides it."""
    out = []
    for p in RADICES:
        while n % p == 0:
            out.append(p)
            n //= p
    return out if n == 1 else None


def _blocked(n: int, radices: list[int]) -> bool:
    """Whether rows of length ``n`` go in blocks of ``VEC`` (``fft_batch_ir.py``): below
    ``BATCH_BELOW``, or below ``BATCH_SCALAR_BELOW`` when a pass of the row-by-row code would
    be scalar (radix 2 or 4 with ``s m`` not a multiple of ``VEC``, or another radix with ``s``
    not one): n = 1000 in cache 1.83 -> 1.14 us per row."""
    if not radices:
        return False
    if n < BATCH_BELOW:
        return True
    s, scalar = 1, False
    for p in radices:
        m = n // (s * p)
        vector = s % VEC == 0 or (p in (2, 4) and s in (1, 2, 4) and (m * s) % VEC == 0)
        scalar |= not vector
        s *= p
    return scalar and n < BATCH_SCALAR_BELOW


def _unit(numer: np.ndarray, denom: int, sign: int) -> np.ndarray:
    """``exp(sign * 2 pi i numer / denom)`` in complex128, ``numer`` already reduced mod denom."""
    ang = (2.0 * np.pi / denom) * numer.astype(np.float64)
    return np.cos(ang) + (1j * sign) * np.sin(ang)


class Plan:
    """The tables of one ``(n, dtype, inverse)``: an int64 header (its address is what the
    library reads), and the arrays it points to (twiddles, chirps, a sub-plan), kept alive here.

    Header: ``[n, kind, passes, scratch (complex numbers), M, chirp, filter, sub-plan, sign,
    0]`` then per pass ``[radix, s, m, twiddles]``; addresses as int64."""

    def __init__(self, n: int, dtype: np.dtype, inverse: bool):
        self.n, self.dtype, self.inverse = n, dtype, inverse
        sign = 1 if inverse else -1
        self.keep: list = []
        radices = _stockham_radices(n)
        if radices is not None:
            blocked = _blocked(n, radices)
            scratch = 2 * n * (VEC if blocked else 1)
            head = [n, _KIND_STOCKHAM, len(radices), scratch, 0, 0, 0, 0, sign, int(blocked)]
            s = 1
            for p in radices:
                big = n // s  # the sub-transforms' length N
                m = big // p
                j = np.arange(m, dtype=np.int64)
                k = np.arange(1, p, dtype=np.int64)[:, None]
                tw = self._table(_unit((j * k) % big, big, sign))
                head += [p, s, m, tw.ctypes.data]
                s *= p
        else:
            big = 1 << (2 * n - 2).bit_length()  # M: the least power of two >= 2n - 1
            sub = plan(big, dtype, False)
            j = np.arange(n, dtype=np.int64)
            # chirp exp(sign pi i j^2 / n) = exp(sign 2 pi i (j^2 mod 2n) / 2n)
            chirp = _unit((j * j) % (2 * n), 2 * n, sign)
            filt = np.zeros(big, np.complex128)
            filt[:n] = np.conj(chirp)
            filt[big - n + 1 :] = np.conj(chirp[1:][::-1])
            w = self._table(chirp)
            f = self._table(np.fft.fft(filt) / big)
            head = [n, _KIND_BLUESTEIN, 0, 3 * big, big, w.ctypes.data, f.ctypes.data]
            head += [sub.address, sign, 0]
            self.keep.append(sub)
        assert len(head) == HEADER + PASS_FIELDS * (len(radices) if radices else 0)
        self.header = np.array(head, np.int64)
        self.address = self.header.ctypes.data

    def _table(self, c: np.ndarray) -> np.ndarray:
        """Complex128 values as an interleaved array of the plan's dtype, kept with the plan."""
        c = np.ascontiguousarray(c, np.complex128).reshape(-1)
        out = np.empty(2 * c.size, self.dtype)
        out[0::2], out[1::2] = c.real, c.imag
        self.keep.append(out)
        return out


_plans: dict[tuple, Plan] = {}
_lock = threading.RLock()


def plan(n: int, dtype, inverse: bool) -> Plan:
    """The plan for length ``n`` (>= 1), float32 or float64 data, forward or ``inverse``:
    built once per process and never freed (compiled code may hold its address)."""
    dt = _real_dtype(dtype)
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"fft: the transform length must be a positive integer, got {n!r}")
    key = (int(n), dt, bool(inverse))
    with _lock:
        p = _plans.get(key)
        if p is None:
            p = _plans[key] = Plan(int(n), dt, bool(inverse))
        return p


def plan_symbol(n: int, dtype, inverse: bool) -> str:
    """The name under which generated code finds the plan's header (``external global``):
    registered with LLVM here, so modules compiled afterwards resolve it."""
    from fungrad.lowering.cpu import llvm_capi

    dt = _real_dtype(dtype)
    name = f"fg_fft_plan_{_TYPES[dt][1]}_{n}_{'inv' if inverse else 'fwd'}"
    with _lock:
        if name not in _registered:
            llvm_capi.add_symbol(name, plan(n, dt, inverse).address)
            _registered.add(name)
    return name


_registered: set[str] = set()


def library_ir(dtype) -> str:
    """The library module for ``dtype`` (float32 or float64): ``fft_ir.library_ir``."""
    ty, tag = _TYPES[_real_dtype(dtype)]
    rows = f"fg_fft_{tag}"
    return _library_ir(ty, rows, batch_functions(ty) + cols_functions(ty, rows, tag))


def cols_symbol_of(dtype) -> str:
    """The exported column function for ``dtype``: ``fg_fft_cols_f32``/``fg_fft_cols_f64``."""
    return cols_symbol(_TYPES[_real_dtype(dtype)][1])


def cols_decl(dtype) -> str:
    return f"declare void @{cols_symbol_of(dtype)}(ptr, ptr, ptr, i64, i64, ptr, i64)"


# -- the compiled library ---------------------------------------------------------------------

_modules: dict[np.dtype, object] = {}  # CompiledModule per dtype, kept for the process
_functions: dict[np.dtype, object] = {}  # ctypes function per dtype (fft)
_cols: dict[np.dtype, object] = {}  # ctypes column function per dtype (fft with an axis)


def ensure_library(dtype) -> None:
    """Compile the library for ``dtype`` (once per process; the on-disk cache may hold its
    object) and make ``@fg_fft_<t>`` resolvable by every module compiled afterwards. Thread
    safe (under ``cpu.llvm_lock``, as gemm.py). Cheap after the first call."""
    dt = _real_dtype(dtype)
    if dt in _modules:
        return
    from fungrad.lowering.cpu import compiler as cpu
    from fungrad.lowering.cpu import llvm_capi

    with cpu.llvm_lock:
        if dt in _modules:
            return
        name, cols = symbol(dt), cols_symbol_of(dt)
        module = cpu.compile_module(
            library_ir(dt), [name, cols], name=f"fungrad_fft_{name[-3:]}", library=True
        )
        # generated code calls into it for the rest of the process: never free it
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(module))
        ptr = ctypes.c_void_p
        i64 = ctypes.c_int64
        _functions[dt] = module.function(name, [ptr, ptr, ptr, i64, ptr, i64])
        _cols[dt] = module.function(cols, [ptr, ptr, ptr, i64, i64, ptr, i64])
        llvm_capi.add_symbol(name, module.address(name))
        llvm_capi.add_symbol(cols, module.address(cols))
        _modules[dt] = module


def fft(
    x: np.ndarray,
    inverse: bool = False,
    out: np.ndarray | None = None,
    threads: int = 1,
    axis: int = -1,
) -> np.ndarray:
    """The unscaled DFT (``inverse``: sign +1) along ``axis`` of a complex64 or complex128
    array, through the native library (tests, benchmarks): the last axis by the row driver,
    another by the column one (``fft_cols_ir.py``). ``out``: a C-contiguous array of ``x``'s
    shape and dtype (may be ``x``); a new one when None. ``threads`` > 1 runs it on the
    native thread pool (``runtime.py``) as jitted code does."""
    x = np.asarray(x)
    if x.dtype not in (np.complex64, np.complex128):
        raise TypeError(f"fft: x must be complex64 or complex128, got {x.dtype}")
    if x.ndim == 0:
        raise ValueError("fft: x must have at least one axis, got a 0-d array")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"fft: axis {axis} is out of range for an array of shape {x.shape}")
    axis %= x.ndim
    x = np.ascontiguousarray(x)
    if out is None:
        out = np.empty_like(x)
    elif out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise ValueError(
            f"fft: out must be a C-contiguous {x.dtype} array of shape {x.shape}, got "
            f"{out.dtype} {out.shape}"
        )
    n = x.shape[axis]
    if n == 0 or x.size == 0:
        return out
    real = np.dtype(np.float32 if x.dtype == np.complex64 else np.float64)
    ensure_library(real)
    p = plan(n, real, inverse)
    pool = None
    if threads > 1:
        from fungrad.lowering.cpu import llvm_capi, runtime

        runtime.ensure_registered()
        pool = llvm_capi.address_of_symbol("fg_parallel_for")
    inner = int(np.prod(x.shape[axis + 1 :], dtype=np.int64))
    if inner == 1:
        _functions[real](p.address, x.ctypes.data, out.ctypes.data, x.size // n, pool, threads)
    else:
        outer = x.size // (n * inner)
        _cols[real](p.address, x.ctypes.data, out.ctypes.data, outer, inner, pool, threads)
    return out
