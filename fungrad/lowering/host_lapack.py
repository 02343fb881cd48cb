"""The host's LAPACK for the eager impls of the primitives numpy has no function for
(``schur``: ``gees``; ``hessenberg``: ``gehrd``).

Eager impls run on the host, in numpy; for most decompositions numpy's own ``linalg`` calls
LAPACK for them. For these it has nothing, so their impls call the same routines of numpy's
bundled OpenBLAS that compiled CPU code calls, through the ctypes callers of
``lowering/cpu/lapack.py``, imported on first use (so ``import fungrad`` loads no LAPACK):
eager and jitted results then come from one library. ``lax`` reaches it only through this
module (the import contract "lax imports no backend" forbids direct imports).
"""

from __future__ import annotations

__all__ = ["gees", "gehrd"]


def _lapack():
    from fungrad.lowering.cpu import lapack

    return lapack


def gees(a, compute_vectors: bool = True):
    """``(t, z, info)``: LAPACK's unsorted Schur decomposition of the square matrix ``a``
    (``lapack.gees``); ``z`` is None unless ``compute_vectors``."""
    return _lapack().gees(a, compute_vectors)


def gehrd(a):
    """``(packed, taus, info)``: LAPACK's Householder reduction of the square matrix ``a`` to
    upper Hessenberg form (``lapack.gehrd``)."""
    return _lapack().gehrd(a)
