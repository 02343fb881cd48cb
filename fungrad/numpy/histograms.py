"""Histograms (jax.numpy's ``histogram``, ``histogram_bin_edges``, ``histogram2d``,
``histogramdd``), computed with ``searchsorted`` and ``bincount``, so they work under ``jit``
when the number of bins is static.

Bins are numpy's: half-open ``[e_i, e_{i+1})`` except the last, which includes its right
edge; values outside the range are not counted. An integer ``bins`` spans ``range`` (default:
the data's minimum and maximum, widened by 0.5 on each side when they are equal).
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import dtypes
from fungrad import numpy as fnp
from fungrad.numpy import util

__all__ = ["histogram", "histogram2d", "histogram_bin_edges", "histogramdd"]


def _float_dtype(a):
    return util.inexact_dtype(a.dtype) if dtypes.kind(a.dtype) != "f" else a.dtype


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The bin edges :func:`histogram` uses (``jnp.histogram_bin_edges``): ``bins + 1``
    evenly spaced edges over ``range`` for an integer ``bins``, else ``bins`` itself."""
    util.check_arraylike("histogram_bin_edges", a)
    a = fnp.ravel(util.asarray(a, fun_name="histogram_bin_edges"))
    dt = _float_dtype(a)
    if not isinstance(bins, int) and np.ndim(bins) == 1:
        edges = util.asarray(bins, fun_name="histogram_bin_edges").astype(dt)
        if edges.shape[0] < 1:
            raise ValueError("histogram_bin_edges: bins must hold at least one edge")
        return edges
    try:
        n = operator.index(bins)
    except TypeError:
        raise TypeError(
            f"histogram_bin_edges: bins must be an integer or a 1-D array of edges, got {bins!r}"
        ) from None
    if n < 1:
        raise ValueError(f"histogram_bin_edges: bins must be positive, got {n}")
    if range is None:
        if a.shape[0] == 0:
            lo, hi = fnp.asarray(0.0, dt), fnp.asarray(1.0, dt)
        else:
            lo, hi = fnp.min(a).astype(dt), fnp.max(a).astype(dt)
    else:
        lo, hi = (util.asarray(v).astype(dt) for v in range)
    same = lo == hi
    lo, hi = fnp.where(same, lo - 0.5, lo), fnp.where(same, hi + 0.5, hi)
    return fnp.linspace(lo, hi, n + 1, dtype=dt)


def _bin_index(values, edges):
    """0 below the first edge, ``len(edges)`` above the last, else the 1-based bin (the last
    edge belongs to the last bin)."""
    idx = fnp.searchsorted(edges, values, side="right")
    return fnp.where(values == edges[-1], edges.shape[0] - 1, idx)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """Counts (or weight sums) of ``a``'s values in each bin, and the bin edges
    (``jnp.histogram``); ``density=True`` normalises to a probability density."""
    util.check_arraylike("histogram", a)
    a = fnp.ravel(util.asarray(a, fun_name="histogram"))
    edges = histogram_bin_edges(a, bins, range)
    dt = edges.dtype
    w = (
        fnp.ones(a.shape, dt)
        if weights is None
        else fnp.ravel(util.asarray(weights, fun_name="histogram")).astype(dt)
    )
    if w.shape != a.shape:
        raise ValueError(f"histogram: weights must have a's shape {a.shape}, got {w.shape}")
    idx = _bin_index(a.astype(dt), edges)
    counts = fnp.bincount(idx, w, length=edges.shape[0] + 1)[1:-1]
    if density:
        counts = counts / (fnp.diff(edges) * fnp.sum(counts))
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """The ``D``-dimensional histogram of ``N`` points ``sample`` (shape ``(N, D)``), and the
    list of each dimension's edges (``jnp.histogramdd``). ``bins`` is an integer, or one
    integer or edge array per dimension; ``range`` one ``(lo, hi)`` (or None) per dimension.
    Counts are integers unless ``weights`` or ``density`` are given."""
    util.check_arraylike("histogramdd", sample)
    sample = util.asarray(sample, fun_name="histogramdd")
    if sample.ndim != 2:
        raise ValueError(f"histogramdd: sample must have shape (N, D), got {sample.shape}")
    d = sample.shape[1]
    bins_list = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    ranges = [None] * d if range is None else list(range)
    if len(bins_list) != d or len(ranges) != d:
        raise ValueError(f"histogramdd: bins and range need one entry per dimension ({d})")
    edges = [
        histogram_bin_edges(sample[:, i], b, r) for i, (b, r) in enumerate(zip(bins_list, ranges))
    ]
    dims = tuple(e.shape[0] + 1 for e in edges)
    idx = [_bin_index(sample[:, i].astype(e.dtype), e) for i, e in enumerate(edges)]
    flat = fnp.ravel_multi_index(tuple(idx), dims, mode="clip")
    w = None if weights is None else fnp.ravel(util.asarray(weights, fun_name="histogramdd"))
    counts = fnp.bincount(flat, w, length=int(np.prod(dims))).reshape(dims)
    counts = counts[(slice(1, -1),) * d]
    if density:
        counts = counts.astype(edges[0].dtype)
        volume = fnp.ones((), counts.dtype)
        for i, e in enumerate(edges):
            shape = [1] * d
            shape[i] = e.shape[0] - 1
            volume = volume * fnp.diff(e).reshape(shape)
        counts = counts / (volume * fnp.sum(counts))
    return counts, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """The 2-D histogram of points ``(x[i], y[i])`` and the edges along x and y
    (``jnp.histogram2d``)."""
    util.check_arraylike("histogram2d", x, y)
    x, y = util.promote_dtypes(x, y, fun_name="histogram2d")
    if isinstance(bins, (list, tuple)) and len(bins) != 2:
        raise ValueError("histogram2d: bins must be an integer, an edge array, or two of them")
    if not isinstance(bins, (list, tuple)) and np.ndim(bins) == 1:
        bins = [bins, bins]
    counts, (ex, ey) = histogramdd(fnp.stack([x, y], axis=1), bins, range, weights, density)
    return counts, ex, ey
