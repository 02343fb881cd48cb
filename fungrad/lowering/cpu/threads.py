"""Run a jitted kernel over an index range on several cores.

Kernels are emitted as ``k(ptrs..., i64 start, i64 end)``; :func:`parallel_for` splits
``[0, n)`` into chunks (multiples of 64 elements, so vector loops stay aligned and threads do not
share cache lines), runs chunks 1.. on a persistent thread pool and chunk 0 on the calling thread,
then waits for all of them. A ``ctypes.CFUNCTYPE`` call releases the GIL, so the chunks really run
in parallel. Small ranges (fewer than two ``min_chunk``) run on the caller alone: one pool round
trip costs ~12 µs (LOWERING.md section 2).

``num_threads()`` is the number of cores this process may use, or ``FUNGRAD_NUM_THREADS``.
Never call a multithreaded BLAS from a chunk: it already uses every core.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a pool is first made: concurrent.futures takes ~7 ms to load,
    from concurrent.futures import ThreadPoolExecutor  # and most processes never need one

__all__ = ["chunk_ranges", "num_threads", "parallel_for"]

ALIGN = 64

_pool: ThreadPoolExecutor | None = None
_pool_workers = 0
_pool_lock = threading.Lock()
_in_worker = threading.local()


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


def _get_pool(workers: int) -> ThreadPoolExecutor:
    """The persistent pool of ``num_threads() - 1`` workers, replaced by a bigger one if a caller
    asks for more. A replaced pool is not shut down (a concurrent caller may still be submitting
    to it); its idle threads exit once it is garbage."""
    global _pool, _pool_workers
    from concurrent.futures import ThreadPoolExecutor

    with _pool_lock:
        if _pool is None or _pool_workers < workers:
            _pool_workers = max(workers, num_threads() - 1)
            _pool = ThreadPoolExecutor(
                max_workers=_pool_workers, thread_name_prefix="fungrad", initializer=_mark_worker
            )
        return _pool


def _mark_worker() -> None:
    _in_worker.active = True


def chunk_ranges(
    n: int, min_chunk: int, threads: int | None = None, align: int = ALIGN
) -> list[tuple[int, int]]:
    """The ``[start, end)`` chunks :func:`parallel_for` would run: at most ``threads`` chunks
    (default :func:`num_threads`), each at least ``min_chunk`` long and a multiple of ``align``
    except the last. One chunk ``[(0, n)]`` when the work is too small to split (or ``n == 0``)."""
    if n < 0 or min_chunk < 1 or align < 1:
        raise ValueError(
            f"chunk_ranges: need n >= 0, min_chunk >= 1 and align >= 1, got "
            f"n={n}, min_chunk={min_chunk}, align={align}"
        )
    threads = num_threads() if threads is None else threads
    parts = max(1, min(threads, n // min_chunk))
    if parts == 1:
        return [(0, n)]
    chunk = -(-n // parts)
    chunk = -(-chunk // align) * align
    return [(s, min(s + chunk, n)) for s in range(0, n, chunk)]


def parallel_for(
    fn: Callable[[int, int], object],
    n: int,
    min_chunk: int,
    *,
    threads: int | None = None,
    align: int = ALIGN,
) -> int:
    """Call ``fn(start, end)`` over chunks covering ``[0, n)``, in parallel; return the number of
    chunks used.

    ``fn`` is typically ``functools.partial(cfunc, ptr_a, ptr_b)`` for a ``CFUNCTYPE`` kernel
    ``k(a, b, start, end)``. Chunks are disjoint, so a kernel that writes only its own range needs
    no locking. Every chunk has finished when this returns, also when one raised (the first error
    is re-raised): the buffers must outlive the workers. Nested calls from inside a chunk run
    serially on that thread, so they cannot deadlock the pool.
    """
    if getattr(_in_worker, "active", False):
        threads = 1
    ranges = chunk_ranges(n, min_chunk, threads, align)
    if len(ranges) == 1:
        fn(0, n)
        return 1
    pool = _get_pool(len(ranges) - 1)
    futures = [pool.submit(fn, s, e) for s, e in ranges[1:]]
    error = None
    try:
        fn(*ranges[0])
    except BaseException as e:  # wait for the workers before raising: they use the buffers
        error = e
    for f in futures:
        try:
            f.result()
        except BaseException as e:
            error = error or e
    if error is not None:
        raise error
    return len(ranges)
