"""Shared helpers for the benchmarks: timing (min/median of repeats), optional imports, ratio
tables. Benchmarks print ratios from one run; they never assert on time."""

from __future__ import annotations

import importlib
import statistics
import time


def optional(module: str):
    """The module, or None when it is not installed (JAX and autograd are optional)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def timeit(fn, *, min_time: float = 0.5, repeats: int = 5) -> tuple[float, float]:
    """(min, median) seconds per call of ``fn()`` over ``repeats`` batches of calls."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time / repeats or n >= 1 << 20:
            break
        n *= 2
    per_call = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per_call.append((time.perf_counter() - t0) / n)
    return min(per_call), statistics.median(per_call)


def report(title: str, rows: list[tuple[str, float]], baseline: str) -> None:
    """Print ``rows`` of (name, seconds per call) with calls/s and the ratio to ``baseline``."""
    base = dict(rows)[baseline]
    print(f"\n{title}")
    print(f"  {'implementation':<28}{'time/call':>14}{'calls/s':>12}   vs {baseline}")
    for name, t in rows:
        print(f"  {name:<28}{t * 1e6:>11.1f} us{1 / t:>12.0f}{base / t:>10.2f}x")


def pin_cores(cores: int) -> list[int]:
    """Pin this process (and every thread and child it starts later) to its first ``cores``
    allowed CPUs; ``cores <= 0`` leaves the affinity alone. Returns the CPUs it may run on.

    Call it before importing numpy, JAX or fungrad, so their thread pools see the pinned set
    (OpenBLAS, XLA and fungrad size their pools from the process's CPU affinity)."""
    import os

    if not hasattr(os, "sched_setaffinity"):  # macOS, Windows: no affinity API
        return list(range(os.cpu_count() or 1))
    allowed = sorted(os.sched_getaffinity(0))
    if cores > 0:
        os.sched_setaffinity(0, set(allowed[:cores]))
    return sorted(os.sched_getaffinity(0))


def max_error(got, expected, rtol: float, atol: float) -> tuple[float, bool]:
    """(largest ``|got - expected| / (atol + rtol * |expected|)``, whether every element is within
    it), over two matching pytrees of arrays (tuples, lists, dicts). NaNs must match NaNs."""
    import numpy as np

    def leaves(tree):
        if isinstance(tree, dict):
            return [x for k in sorted(tree) for x in leaves(tree[k])]
        if isinstance(tree, (list, tuple)):
            return [x for t in tree for x in leaves(t)]
        return [tree]

    got_leaves, exp_leaves = leaves(got), leaves(expected)
    if len(got_leaves) != len(exp_leaves):
        raise ValueError(f"result has {len(got_leaves)} arrays, expected {len(exp_leaves)}")
    worst = 0.0
    for g, e in zip(got_leaves, exp_leaves):
        g = np.asarray(g, np.float64)
        e = np.asarray(e, np.float64)
        if g.shape != e.shape:
            raise ValueError(f"result shape {g.shape} != expected {e.shape}")
        if not np.array_equal(np.isnan(g), np.isnan(e)):
            return float("inf"), False
        ok = ~np.isnan(e) & (g != e)  # equal entries (infinities included) have no error
        if ok.any():
            err = np.abs(g[ok] - e[ok]) / (atol + rtol * np.abs(e[ok]))
            worst = max(worst, float(np.max(np.where(np.isnan(err), np.inf, err))))
    return worst, worst <= 1.0


def timeit_interleaved(
    fns, *, min_time: float = 0.5, repeats: int = 5
) -> list[tuple[float, float]]:
    """(min, median) seconds per call of each ``fn()`` in ``fns``, like :func:`timeit`, but with
    the batches of the different callables alternating (a, b, c, a, b, c, ...) so that all of
    them see the same background load on a shared machine; compare them within one call."""
    counts = []
    for fn in fns:  # calibrate each batch to about min_time / repeats
        fn()
        n = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            if time.perf_counter() - t0 >= min_time / repeats or n >= 1 << 20:
                break
            n *= 2
        counts.append(n)
    per_call = [[] for _ in fns]
    for _ in range(repeats):
        for fn, n, times in zip(fns, counts, per_call):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            times.append((time.perf_counter() - t0) / n)
    return [(min(t), statistics.median(t)) for t in per_call]
