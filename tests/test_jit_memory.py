"""Repeated calls of a jitted function do not leak memory.

100,000 calls of a small compiled function (``x*2+1`` on 8 float32) must grow the process's
resident set by less than 10 MB after a warm-up, both when the same input Array is passed each
time and when every call gets a new Array (the previous call's output) and returns a new one.
Each function must also be traced exactly once (a retrace per call is its own leak) and give
numpy's answer. The RSS probe itself is checked first: it must see a deliberate 32 MB allocation.
"""

from __future__ import annotations

import gc
import mmap
import os
import resource

import numpy as np

import fungrad as fg
import fungrad.numpy as fnp

CALLS = 100_000
WARMUP = 2_000
MAX_GROWTH = 10 * 2**20


def rss_bytes() -> int:
    """The process's current resident set size (``/proc/self/statm``), or its peak
    (``getrusage``) where there is no /proc: a leak raises both."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if os.uname().sysname == "Darwin" else peak * 1024


def settled_rss() -> int:
    gc.collect()
    return rss_bytes()


def traced_counter(fn):
    """``fn`` plus a list that records each time it runs as Python (i.e. is traced)."""
    traces = []

    def counted(x):
        traces.append(1)
        return fn(x)

    return counted, traces


def test_rss_probe_sees_a_32mb_allocation():
    # A fresh anonymous mapping, written page by page: malloc may instead reuse heap pages that
    # are already resident (glibc raises its mmap threshold after large frees by earlier tests).
    before = settled_rss()
    block = mmap.mmap(-1, 32 * 2**20)
    np.frombuffer(block, np.uint8)[::4096] = 1  # touch every page
    grown = settled_rss() - before
    block.close()
    assert grown >= 30 * 2**20, f"RSS probe saw {grown / 2**20:.1f} MB for a 32 MB array"


def test_jit_same_input_100k_calls_rss_flat():
    f, traces = traced_counter(lambda x: x * 2 + 1)
    f = fg.jit(f)
    x = fnp.asarray(np.arange(8, dtype=np.float32) - 3.25)
    expected = np.asarray(x) * 2 + 1
    for _ in range(WARMUP):
        y = f(x)
    np.testing.assert_array_equal(np.asarray(y), expected)
    before = settled_rss()
    for _ in range(CALLS):
        y = f(x)
    grown = settled_rss() - before
    np.testing.assert_array_equal(np.asarray(y), expected)
    assert len(traces) == 1, f"jit traced the function {len(traces)} times, expected once"
    assert grown < MAX_GROWTH, f"{CALLS} jitted calls grew RSS by {grown / 2**20:.1f} MB"


def test_jit_new_arrays_each_call_100k_calls_rss_flat():
    # x -> x/2 + 1 converges to 2 from any finite start, so every call makes new Arrays and
    # passes one on, while the values stay checkable. Two outputs take the executable's general
    # call path (output tuple, pytree rebuilt) rather than the single-output fast path.
    f, traces = traced_counter(lambda x: (x * 0.5 + 1, fnp.sum(x)))
    f = fg.jit(f)
    start = np.arange(8, dtype=np.float32) * 100 - 300
    x = fnp.asarray(start)
    for _ in range(WARMUP):
        x, total = f(x)
    before = settled_rss()
    for i in range(CALLS):
        x, total = f(x)
        if i == CALLS // 2:  # a fresh input from numpy mid-way: must not be traced again
            x = fnp.asarray(start)
    grown = settled_rss() - before
    np.testing.assert_array_equal(np.asarray(x), np.full(8, 2, np.float32))
    assert float(total) == 16.0
    assert len(traces) == 1, f"jit traced the function {len(traces)} times, expected once"
    assert grown < MAX_GROWTH, f"{CALLS} jitted calls grew RSS by {grown / 2**20:.1f} MB"
