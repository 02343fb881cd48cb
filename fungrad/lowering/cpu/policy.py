"""The CPU's :class:`~fungrad.lowering.fusion.Policy`: what the LLVM backend runs well.

Matrix products become :class:`~fungrad.lowering.fusion.Gemm` steps, which the renderer
(``gemm_step.py``) runs through the float32 gemm library (``gemm.py``) or numpy's BLAS
(``blas.py``). Which products need BLAS is decided here from what the library takes: without
BLAS (a numpy that bundles no OpenBLAS), every one-matrix float32 product is still a Gemm step,
run by the library (``gemm.runs``); the others (float64, batched) are inline reductions. Loop
nests compute a row's reduction once per row and accumulate columns serially, so the column
layouts of ``lax.reduce`` and ``lax.dot`` apply here.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from fungrad.lowering.cpu import blas, lapack
from fungrad.lowering.cpu import gemm as library

#: below ~32^3 multiply-adds a fused loop beats a BLAS call
GEMM_MIN_FLOPS = 16384
#: the most products of one batched Gemm (more: the inline reduction, one kernel)
GEMM_MAX_BATCH = 64
#: a column reduction (``lax.reduce._column_reduction``) from this many operand elements on
COLUMN_REDUCTION_MIN_SIZE = 4096
#: the shortest reduced (contracted) axis a column sum is written for
COLUMN_MIN_LENGTH = 8
#: the narrowest output a column dot (``lax.dot._column_dot``) is written for: narrower rows do
#: not fill the column sum's vectors (one core, v @ A with A 65536 x n: n = 8 1.8x and n = 32
#: 1.4x slower than the gemm, n = 64 5.9x, 128 2.6x and 256 3.7x faster; 4096 x n: 0.9x at
#: 64, 2-2.5x faster at 128 and 256; v @ 784 x 512: 0.105 -> 0.053 ms). Batched products stay
#: gemms (64 products of 256 x 256 as column sums: 1.3x slower than the batched gemm).
COLUMN_DOT_MIN_WIDTH = 64


class CpuPolicy:
    """The CPU backend's answers (see :class:`~fungrad.lowering.fusion.Policy`). Stateless:
    whether BLAS is there is asked of :func:`blas.find_blas` at each decision."""

    name = "cpu"
    has_float64 = True
    stores_outer_reductions = False  # a loop nest computes a row's reduction once per row
    #: a blocked, vectorised row sum beats the gemm, which is tiled for wide outputs: 4-7x (one
    #: core: a 1e6 dot 0.41 -> 0.09 ms, 8x1e6 @ v 4.5 -> 1.1 ms, 2000^2 @ v 1.25 -> 0.33 ms,
    #: v @ (2000^2).T 1.9 -> 0.28 ms)
    inline_row_dots = True
    wide_scan_carry = True  # a serial scan loop keeps the wide carry of a line in a register
    joins_across_outputs = True  # one loop nest per shape: each operand read once
    fft_steps = True  # FFTs run in the native FFT library (``steps.FftStep``)
    #: collectives over a process axis are calls into MPI from the native code
    #: (``steps.CollectiveStep``, ``lowering/collectives.py``, ``cpu/mpi.py``)
    mpi_steps = True
    #: the gemm library and BLAS accumulate into their output (``c0`` may be ``c``'s memory);
    #: a kernel's store may overwrite the operand it reads last (one pointer for both)
    writes_in_place = True

    @property
    def gemm_transposes_both(self) -> bool:
        """BLAS takes any transposes; the gemm library not both operands transposed."""
        return blas.find_blas().available

    @property
    def linalg_steps(self) -> bool:
        """The dense linear algebra primitives call LAPACK (``lapack_step.py``,
        ``lapack_decomp_step.py``) when numpy's OpenBLAS exports every routine they use; else
        their rules lower the loop algorithms."""
        info = lapack.find_lapack()
        routines = ("potrf", "trsm", "getrf", "geqrf", "orgqr", "syevd", "gesdd")
        return all(info.has(r, d) for r in routines for d in (np.float32, np.float64))

    def linalg_step(self, op: str, n: int, batch: int) -> bool:
        """Cholesky, triangular solve and LU: LAPACK steps at every size (``linalg_steps``)."""
        return self.linalg_steps

    def wants_gemm(self, m: int, n: int, k: int, batch: int, dtype: np.dtype) -> bool:
        if m * n * k < GEMM_MIN_FLOPS or batch > GEMM_MAX_BATCH:
            return False
        if blas.find_blas().available:
            return True
        return _library_alone(m, n, k, batch, np.dtype(dtype))

    def prepacks_b(self, step) -> int:
        """The gemm library's panel width (``gemm.geometry().nr``) for a loop-invariant b of a
        product the library runs (``gemm.supports``) wider than one vector; else 0. Packed once, the
        LSTM's ``[32, 320] @ W`` runs 254 -> 202 us and ``[32, 1024] @ W^T`` 287 -> 196 us
        (one core)."""
        g = library.geometry()
        ok = step.n > g.vec and not step.b_packed and library.supports(step)
        return g.nr if ok else 0

    def column_reduction(self, size: int, shortest: int) -> bool:
        return size >= COLUMN_REDUCTION_MIN_SIZE and shortest >= COLUMN_MIN_LENGTH

    def column_dot(self, width: int, shortest: int) -> bool:
        return width >= COLUMN_DOT_MIN_WIDTH and shortest >= COLUMN_MIN_LENGTH


def _library_alone(m: int, n: int, k: int, batch: int, dtype: np.dtype) -> bool:
    """Whether the renderer runs this product through the gemm library when BLAS is absent."""
    c = SimpleNamespace(dtype=dtype)
    return library.runs(
        SimpleNamespace(c=c, m=m, n=n, k=k, batch=batch, trans_a=False, trans_b=False)
    )
