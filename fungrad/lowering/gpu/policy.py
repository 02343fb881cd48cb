"""The GPU's :class:`~fungrad.lowering.fusion.Policy`: what the WGSL backend runs well.

Every output element (or group of them) is an invocation of its own: a reduction that only
the outer loops of a kernel index (a row's maximum) would be recomputed by every invocation of
the row, so the planner stores it first; an accumulation into a row shared by invocations
would race, so no column layouts; WGSL has no float64. Matrix products run in the GPU's tiled
matmul shader, which needs no library and splits long contractions itself (an invocation's own
reduction is serial), so matrix-vector products are Gemm steps too. Cholesky, triangular solves
and LU of matrices up to ``LINALG_STEP_MAX`` run as one dispatch (``gpu/linalg.py``); larger
ones lower their loop algorithms (one ``fori_loop`` iteration per column).
"""

from __future__ import annotations

import numpy as np

#: below ~32^3 multiply-adds the fused kernel's inline reduction wins
GEMM_MIN_FLOPS = 16384
#: the most products of one batched Gemm (more: the inline reduction, one kernel)
GEMM_MAX_BATCH = 64
#: the largest matrix side the one-workgroup linear algebra kernels take (``gpu/linalg.py``):
#: a workgroup's invocations loop about n^3 / 768 times (Cholesky; lavapipe stops at 65535)
LINALG_STEP_MAX = 256


class GpuPolicy:
    """The GPU backend's answers (see :class:`~fungrad.lowering.fusion.Policy`)."""

    name = "gpu"
    has_float64 = False
    stores_outer_reductions = True
    inline_row_dots = False
    wide_scan_carry = False  # the GPU's scan scheme recognises a scan reading its own output
    gemm_transposes_both = True
    linalg_steps = False  # QR, eigh, SVD lower to their loop algorithms (see linalg_step)
    fft_steps = False  # no FFT kernels: compiling an FFT is a LoweringError

    def wants_gemm(self, m: int, n: int, k: int, batch: int, dtype: np.dtype) -> bool:
        return m * n * k >= GEMM_MIN_FLOPS and batch <= GEMM_MAX_BATCH

    def linalg_step(self, op: str, n: int, batch: int) -> bool:
        """Cholesky, triangular solve and LU of matrices up to ``LINALG_STEP_MAX`` on a side:
        one workgroup per matrix (one dispatch for the batch, ``gpu/linalg.py``); larger ones
        by their loop algorithms, whose dispatches spread each column over the device."""
        return n <= LINALG_STEP_MAX

    def column_reduction(self, size: int, shortest: int) -> bool:
        return False  # invocations would race on the accumulated row

    def column_dot(self, width: int, shortest: int) -> bool:
        return False
