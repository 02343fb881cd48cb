"""How many cores compiled code may use: :func:`num_threads`.

The CPU backend spreads large kernels over cores from native code (``runtime.py``'s
``@fg_parallel_for``); this module only answers how many threads that may use:
``$FUNGRAD_NUM_THREADS`` if set, else the cores this process may run on. Never call a
multithreaded BLAS from a parallel chunk: it already uses every core.
"""

from __future__ import annotations

import os

__all__ = ["num_threads"]


def num_threads() -> int:
    """Threads a parallel kernel may use: ``$FUNGRAD_NUM_THREADS`` if set, else the cores this
    process may run on (its CPU affinity, where the OS has one)."""
    raw = os.environ.get("FUNGRAD_NUM_THREADS")
    if raw is not None and raw.strip():
        n = int(raw) if raw.strip().isdigit() else 0
        if n < 1:
            raise ValueError(f"FUNGRAD_NUM_THREADS must be a positive integer, got {raw!r}")
        return n
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1
