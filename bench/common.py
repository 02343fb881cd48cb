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
