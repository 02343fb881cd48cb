"""The GPU's :class:`~fungrad.lowering.fusion.Policy`: what the WGSL backend runs well.

Every output element (or group of them) is an invocation of its own: a reduction that only
the outer loops of a kernel index (a row's maximum) would be recomputed by every invocation of
the row, so the planner stores it first; an accumulation into a row shared by invocations
would race, so no column layouts; WGSL has no float64. Matrix products run in the GPU's tiled
matmul shader, which needs no library and splits long contractions itself (an invocation's own
reduction is serial), so matrix-vector products are Gemm steps too. Cholesky, triangular solves
and LU are steps of their own (``gpu/linalg.py``), not their loop algorithms.
"""

from __future__ import annotations

import numpy as np

#: below ~32^3 multiply-adds the fused kernel's inline reduction wins
GEMM_MIN_FLOPS = 16384
#: the most products of one batched Gemm (more: the inline reduction, one kernel)
GEMM_MAX_BATCH = 64


class GpuPolicy:
    """The GPU backend's answers (see :class:`~fungrad.lowering.fusion.Policy`)."""

    name = "gpu"
    has_float64 = False
    stores_outer_reductions = True
    inline_row_dots = False
    wide_scan_carry = False  # the GPU's scan scheme recognises a scan reading its own output
    #: an invocation runs its outputs' serial loops one after another: joining more outputs
    #: adds up their lengths (llvmpipe stops an invocation's loops at 65535 iterations)
    joins_across_outputs = False
    gemm_transposes_both = True
    linalg_steps = False  # QR, eigh, SVD lower to their loop algorithms (see linalg_step)
    fft_steps = False  # no FFT kernels: compiling an FFT is a LoweringError
    #: WebGPU forbids binding one buffer both read-only and writable in a dispatch
    writes_in_place = False

    def wants_gemm(self, m: int, n: int, k: int, batch: int, dtype: np.dtype) -> bool:
        return m * n * k >= GEMM_MIN_FLOPS and batch <= GEMM_MAX_BATCH

    def prepacks_b(self, step) -> int:
        return 0  # the tiled matmul shaders stage b through workgroup memory themselves

    def linalg_step(self, op: str, n: int, batch: int) -> bool:
        """Cholesky, triangular solve and LU: a step at every size (``gpu/linalg.py``: one
        dispatch for a batch of matrices up to 256 on a side, a few per column above)."""
        return True

    def column_reduction(self, size: int, shortest: int) -> bool:
        return False  # invocations would race on the accumulated row

    def column_dot(self, width: int, shortest: int) -> bool:
        return False
