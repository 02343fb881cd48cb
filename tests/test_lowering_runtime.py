"""The native parallel-for of generated code (fungrad/lowering/runtime.py): every index of [0, n)
is covered exactly once by balanced contiguous chunks for any n and nthreads; generated IR calls it
(also nested, and from several Python threads at once) and matches numpy; a busy pool runs inline;
workers are real threads with asynchronous signals blocked; a slow join (a worker off its core)
starts a back-off that doubles, during which calls run inline, and calm joins end it; results stay
right with busy processes beside; a fresh process registers it once from many threads, a forked
child gets a new pool, and the interpreter exits promptly with live workers.
"""

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu import runtime, threads

CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
LOG_CAP = 1024

# Test kernels, in one module with the declaration generated code uses.
#   mark(ctx = {i32* counts, i64* log, i64* nlog}, start, end): counts[i] += 1 (atomically) and
#     logs (start, end) in the next free slot of log.
#   square_plus_one(x, y, n, nthreads): y = x*x + 1 through fg_parallel_for(@sq_chunk).
#   square_rows(x, y, rows, cols, nthreads): the same over rows, each row's chunk calling
#     fg_parallel_for over its columns (nested).
#   mark_all(ctx, n, nthreads): fg_parallel_for(@mark, ctx, n, nthreads) from native code.
TEST_IR = f"""
{runtime.parallel_for_decl()}
%mark_ctx = type {{ ptr, ptr, ptr }}
%sq_ctx = type {{ ptr, ptr }}
%rows_ctx = type {{ ptr, ptr, i64, i64 }}

define void @mark(ptr %c, i64 %s, i64 %e) {{
entry:
  %counts = load ptr, ptr %c, align 8
  %plog = getelementptr inbounds %mark_ctx, ptr %c, i32 0, i32 1
  %log = load ptr, ptr %plog, align 8
  %pn = getelementptr inbounds %mark_ctx, ptr %c, i32 0, i32 2
  %nlog = load ptr, ptr %pn, align 8
  %slot = atomicrmw add ptr %nlog, i64 1 seq_cst, align 8
  %fits = icmp slt i64 %slot, {LOG_CAP}
  br i1 %fits, label %record, label %check
record:
  %j = mul i64 %slot, 2
  %ps = getelementptr inbounds i64, ptr %log, i64 %j
  store i64 %s, ptr %ps, align 8
  %j1 = add i64 %j, 1
  %pe = getelementptr inbounds i64, ptr %log, i64 %j1
  store i64 %e, ptr %pe, align 8
  br label %check
check:
  %ne = icmp slt i64 %s, %e
  br i1 %ne, label %loop, label %out
loop:
  %i = phi i64 [ %s, %check ], [ %i1, %loop ]
  %pc = getelementptr inbounds i32, ptr %counts, i64 %i
  atomicrmw add ptr %pc, i32 1 monotonic, align 4
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %e
  br i1 %more, label %loop, label %out
out:
  ret void
}}

define void @mark_all(ptr %c, i64 %n, i64 %nt) {{
  call void @fg_parallel_for(ptr @mark, ptr %c, i64 %n, i64 %nt)
  ret void
}}

define internal void @sq_chunk(ptr %c, i64 %s, i64 %e) {{
entry:
  %x = load ptr, ptr %c, align 8
  %py = getelementptr inbounds %sq_ctx, ptr %c, i32 0, i32 1
  %y = load ptr, ptr %py, align 8
  %ne = icmp slt i64 %s, %e
  br i1 %ne, label %loop, label %out
loop:
  %i = phi i64 [ %s, %entry ], [ %i1, %loop ]
  %ax = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %ax, align 4
  %v2 = fmul float %v, %v
  %r = fadd float %v2, 1.0
  %ay = getelementptr inbounds float, ptr %y, i64 %i
  store float %r, ptr %ay, align 4
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %e
  br i1 %more, label %loop, label %out
out:
  ret void
}}

define void @square_plus_one(ptr %x, ptr %y, i64 %n, i64 %nt) {{
  %c = alloca %sq_ctx, align 8
  store ptr %x, ptr %c, align 8
  %py = getelementptr inbounds %sq_ctx, ptr %c, i32 0, i32 1
  store ptr %y, ptr %py, align 8
  call void @fg_parallel_for(ptr @sq_chunk, ptr %c, i64 %n, i64 %nt)
  ret void
}}

define internal void @rows_chunk(ptr %c, i64 %s, i64 %e) {{
entry:
  %inner = alloca %sq_ctx, align 8
  %x = load ptr, ptr %c, align 8
  %py = getelementptr inbounds %rows_ctx, ptr %c, i32 0, i32 1
  %y = load ptr, ptr %py, align 8
  %pcols = getelementptr inbounds %rows_ctx, ptr %c, i32 0, i32 2
  %cols = load i64, ptr %pcols, align 8
  %pnt = getelementptr inbounds %rows_ctx, ptr %c, i32 0, i32 3
  %nt = load i64, ptr %pnt, align 8
  %ne = icmp slt i64 %s, %e
  br i1 %ne, label %loop, label %out
loop:
  %r = phi i64 [ %s, %entry ], [ %r1, %loop ]
  %off = mul i64 %r, %cols
  %xr = getelementptr inbounds float, ptr %x, i64 %off
  %yr = getelementptr inbounds float, ptr %y, i64 %off
  store ptr %xr, ptr %inner, align 8
  %piy = getelementptr inbounds %sq_ctx, ptr %inner, i32 0, i32 1
  store ptr %yr, ptr %piy, align 8
  call void @fg_parallel_for(ptr @sq_chunk, ptr %inner, i64 %cols, i64 %nt)
  %r1 = add i64 %r, 1
  %more = icmp slt i64 %r1, %e
  br i1 %more, label %loop, label %out
out:
  ret void
}}

define void @square_rows(ptr %x, ptr %y, i64 %rows, i64 %cols, i64 %nt) {{
  %c = alloca %rows_ctx, align 8
  store ptr %x, ptr %c, align 8
  %py = getelementptr inbounds %rows_ctx, ptr %c, i32 0, i32 1
  store ptr %y, ptr %py, align 8
  %pcols = getelementptr inbounds %rows_ctx, ptr %c, i32 0, i32 2
  store i64 %cols, ptr %pcols, align 8
  %pnt = getelementptr inbounds %rows_ctx, ptr %c, i32 0, i32 3
  store i64 %nt, ptr %pnt, align 8
  call void @fg_parallel_for(ptr @rows_chunk, ptr %c, i64 %rows, i64 %nt)
  ret void
}}
"""

P, I64 = ctypes.c_void_p, ctypes.c_int64


@pytest.fixture(scope="module")
def kernels():
    runtime.ensure_registered()
    return cpu.compile_module(
        TEST_IR,
        ["mark", "mark_all", "square_plus_one", "square_rows"],
        name="runtime_test",
        opt_level=2,
    )


@pytest.fixture(autouse=True)
def no_backoff():
    """Each test starts with the pool out of back-off (a slow join in an earlier test, or on a
    loaded host, makes calls run inline for a while; tests that check the split need the pool)."""
    runtime.pool_backoff_ns(0)
    yield
    runtime.pool_backoff_ns(0)


def expected_chunks(n, k):
    """Balanced split of [0, n) into k chunks: sizes n//k + 1 for the first n % k, then n//k."""
    q, r = divmod(n, k)
    starts = [i * q + min(i, r) for i in range(k + 1)]
    return [(starts[i], starts[i + 1]) for i in range(k)]


def run_mark(kernels, n, nthreads, *, native_caller=False, reset_backoff=True):
    """Run @mark over [0, n); return (counts per index, logged chunks in call order)."""
    counts = np.zeros(max(n, 0), np.int32)
    log = np.full(2 * LOG_CAP, -1, np.int64)
    nlog = np.zeros(1, np.int64)
    ctx = (ctypes.c_void_p * 3)(counts.ctypes.data, log.ctypes.data, nlog.ctypes.data)
    ctx_addr = ctypes.addressof(ctx)
    if reset_backoff:  # the split is then the pool's, not a back-off's inline call
        runtime.pool_backoff_ns(0)
    if native_caller:
        kernels.function("mark_all", [P, I64, I64])(ctx_addr, n, nthreads)
    else:
        runtime.native_parallel_for(kernels.address("mark"), ctx_addr, n, nthreads)
    calls = int(nlog[0])
    assert calls <= LOG_CAP
    return counts, [tuple(int(v) for v in log[2 * i : 2 * i + 2]) for i in range(calls)]


def check_split(kernels, n, nthreads, native_caller=False):
    counts, chunks = run_mark(kernels, n, nthreads, native_caller=native_caller)
    np.testing.assert_array_equal(counts, np.ones(max(n, 0), np.int32))  # each index once
    if n <= 0:
        assert chunks == []  # nothing to do: fn is not called
        return
    k = min(max(nthreads, 1), n, runtime.MAX_THREADS, runtime.pool_workers() + 1)
    assert sorted(chunks) == expected_chunks(n, k), (n, nthreads, k)


@pytest.mark.parametrize(
    "n,nthreads",
    [
        (0, 0),
        (0, 2),
        (-5, 2),
        (1, 1),
        (1, 2),
        (2, 2),
        (3, 2),
        (5, 8),
        (7, 3),
        (100, 1),
        (100, 2),
        (100, 7),
        (1000, 2),
        (1001, 4),
        (65537, 2),
        (3, 2**62),
        (300, 2**62),
        (100, -1),
        (100, 0),
        (1 << 20, 2),
    ],
)
def test_parallel_for_covers_each_index_once_in_balanced_chunks(kernels, n, nthreads):
    check_split(kernels, n, nthreads)


@given(n=st.integers(-2, 3000), nthreads=st.one_of(st.integers(-2, 12), st.just(2**63 - 1)))
def test_parallel_for_split_property(kernels, n, nthreads):
    check_split(kernels, n, nthreads, native_caller=n % 2 == 0)


def test_huge_nthreads_caps_threads_and_chunks(kernels):
    check_split(kernels, 10_000, 2**62)
    workers = runtime.pool_workers()
    assert 1 <= workers <= runtime.MAX_THREADS - 1
    _, chunks = run_mark(kernels, 10_000, 2**62)
    assert len(chunks) == min(runtime.MAX_THREADS, workers + 1)


def test_generated_ir_calls_parallel_for_and_matches_numpy(kernels):
    fn = kernels.function("square_plus_one", [P, P, I64, I64])
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 3, 63, 64, 65, 1000, 4097, 250_000):
        for nthreads in (1, 2, 3, 8):
            x = rng.standard_normal(n).astype(np.float32)
            y = np.full_like(x, np.nan)
            fn(x.ctypes.data, y.ctypes.data, n, nthreads)
            np.testing.assert_array_equal(y, x * x + np.float32(1))


def run_in_thread(target, timeout=60.0):
    """Run target() on a daemon thread and fail (instead of hanging) if it does not finish."""
    errors = []

    def body():
        try:
            target()
        except BaseException as e:  # reported below
            errors.append(e)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "fg_parallel_for did not return (deadlock?)"
    if errors:
        raise errors[0]


def test_nested_parallel_for_runs_inline_and_is_correct(kernels):
    fn = kernels.function("square_rows", [P, P, I64, I64, I64])
    rng = np.random.default_rng(1)
    for rows, cols, nthreads in [
        (1, 1000, 2),
        (2, 1000, 2),
        (7, 333, 2),
        (64, 4096, 3),
        (5, 0, 2),
        (0, 10, 2),
    ]:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        y = np.full_like(x, np.nan)
        run_in_thread(lambda: fn(x.ctypes.data, y.ctypes.data, rows, cols, nthreads))  # noqa: B023
        np.testing.assert_array_equal(y, x * x + np.float32(1))


def test_calls_from_several_python_threads_at_once(kernels):
    fn = kernels.function("square_plus_one", [P, P, I64, I64])
    results = {}
    barrier = threading.Barrier(4)

    def caller(tid):
        rng = np.random.default_rng(tid)
        barrier.wait()
        ok = True
        for rep in range(40):
            n = int(rng.integers(0, 200_000)) if rep % 4 else 100_000
            x = rng.standard_normal(n).astype(np.float32)
            y = np.full_like(x, np.nan)
            fn(x.ctypes.data, y.ctypes.data, n, 2 + tid % 2)
            ok &= bool(np.array_equal(y, x * x + np.float32(1)))
        results[tid] = ok

    def all_callers():
        ts = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    run_in_thread(all_callers, timeout=120)
    assert results == {0: True, 1: True, 2: True, 3: True}


def test_busy_pool_runs_the_second_caller_inline():
    """While one call owns the pool, a call from another Python thread runs fn(ctx, 0, n) once on
    its own thread; a worker thread (not the caller) runs chunk 1 of the first call."""
    seen = {}  # chunk -> thread ident
    second_chunks, second_thread, waits = [], [], []
    worker_ran = threading.Event()
    second_done = threading.Event()

    @CALLBACK
    def second(ctx, start, end):
        second_chunks.append((start, end, threading.get_ident()))

    def run_second():
        second_thread.append(threading.get_ident())
        runtime.native_parallel_for(ctypes.cast(second, P).value, None, 10, 2)
        second_done.set()

    @CALLBACK
    def first(ctx, start, end):  # NB: an exception in a ctypes callback is only printed
        seen[(start, end)] = threading.get_ident()
        if start == 0:  # the caller's chunk: hold the pool until both checks have happened
            waits.append(worker_ran.wait(30))
            threading.Thread(target=run_second, daemon=True).start()
            waits.append(second_done.wait(30))
        else:
            worker_ran.set()

    caller = []

    def run_first():
        caller.append(threading.get_ident())
        runtime.native_parallel_for(ctypes.cast(first, P).value, None, 2, 2)

    run_in_thread(run_first)
    assert waits == [True, True]
    assert set(seen) == {(0, 1), (1, 2)}
    assert seen[(0, 1)] == caller[0] and seen[(1, 2)] != caller[0]
    assert second_chunks == [(0, 10, second_thread[0])]


def test_returns_only_after_every_chunk_finished():
    started, finished, waits = threading.Event(), [], []

    @CALLBACK
    def chunk(ctx, start, end):
        if start == 0:  # the caller's chunk ends while a worker's chunk is still running
            waits.append(started.wait(30))
        else:
            started.set()
            time.sleep(0.2)
            finished.append((start, end))

    run_in_thread(lambda: runtime.native_parallel_for(ctypes.cast(chunk, P).value, None, 2, 2))
    assert waits == [True]
    assert finished == [(1, 2)]


def test_workers_block_asynchronous_signals():
    masks = {}
    worker_ran = threading.Event()

    @CALLBACK
    def chunk(ctx, start, end):
        if start == 0:
            worker_ran.wait(30)
        else:
            masks["worker"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])
            worker_ran.set()

    run_in_thread(lambda: runtime.native_parallel_for(ctypes.cast(chunk, P).value, None, 2, 2))
    mask = masks["worker"]
    assert {signal.SIGINT, signal.SIGTERM, signal.SIGALRM} <= mask
    assert not {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL} & mask


def slow_join():
    """One 2-chunk call whose worker's chunk takes 0.2 s after the caller's returned: the caller
    blocks in its join, which then counts as slow. Returns whether a worker ran chunk 1."""
    idents, started, caller = {}, threading.Event(), []

    @CALLBACK
    def chunk(ctx, start, end):
        idents[start] = threading.get_ident()
        if start == 0:
            started.wait(30)
        else:
            started.set()
            time.sleep(0.2)

    def call():
        caller.append(threading.get_ident())
        runtime.native_parallel_for(ctypes.cast(chunk, P).value, None, 2, 2)

    run_in_thread(call)
    assert set(idents) == {0, 1}
    return idents[1] != caller[0]


def test_slow_join_starts_a_backoff_that_doubles():
    assert runtime.pool_backoff_ns() == 0
    assert slow_join()
    assert runtime.pool_backoff_ns() == runtime._BACKOFF_MIN_NS
    time.sleep(0.01)  # the back-off period ends: the next call uses the pool again
    assert slow_join()
    assert runtime.pool_backoff_ns() == 2 * runtime._BACKOFF_MIN_NS
    runtime.pool_backoff_ns(runtime._BACKOFF_MAX_NS)
    time.sleep(0.001)
    runtime.pool_backoff_ns(0)
    assert slow_join()
    assert runtime.pool_backoff_ns() == runtime._BACKOFF_MIN_NS


def test_calls_run_inline_during_a_backoff_and_split_after(kernels):
    runtime.pool_backoff_ns(60 * 10**9)
    for n, native in [(1000, False), (7, True), (2, False)]:
        counts, chunks = run_mark(kernels, n, 2, native_caller=native, reset_backoff=False)
        np.testing.assert_array_equal(counts, np.ones(n, np.int32))
        assert chunks == [(0, n)]  # one inline call on the caller
    fn = kernels.function("square_rows", [P, P, I64, I64, I64])  # nested, during the back-off
    x = np.random.default_rng(3).standard_normal((9, 500)).astype(np.float32)
    y = np.full_like(x, np.nan)
    fn(x.ctypes.data, y.ctypes.data, 9, 500, 2)
    np.testing.assert_array_equal(y, x * x + np.float32(1))
    assert runtime.pool_backoff_ns() == 60 * 10**9  # inline calls do not change it
    runtime.pool_backoff_ns(0)
    counts, chunks = run_mark(kernels, 1000, 2, reset_backoff=False)
    np.testing.assert_array_equal(counts, np.ones(1000, np.int32))
    assert sorted(chunks) == expected_chunks(1000, 2)


def test_backoff_halves_after_calm_joins_and_ends(kernels):
    """A back-off of 2 minimums: a join four periods after it started halves it, the next such
    join ends it (below the minimum). A slow join meanwhile (a loaded host) doubles it again,
    so the loop only asserts that it ends and that every result is right."""
    with pytest.raises(ValueError):
        runtime.pool_backoff_ns(-1)
    runtime.pool_backoff_ns(2 * runtime._BACKOFF_MIN_NS)
    seen = []
    for _ in range(200):
        time.sleep(0.02)  # > 4 back-off periods of 2 ms
        counts, _ = run_mark(kernels, 1000, 2, reset_backoff=False)
        np.testing.assert_array_equal(counts, np.ones(1000, np.int32))
        seen.append(runtime.pool_backoff_ns())
        if seen[-1] == 0:
            break
    assert seen[-1] == 0, seen
    if len(seen) == 2:  # no slow join happened: halved, then ended
        assert seen == [runtime._BACKOFF_MIN_NS, 0]


def test_results_with_busy_processes_beside(kernels):
    """Two busy processes on this (small) host: workers get descheduled mid-chunk, joins block
    and back-offs start and end, from several Python threads at once and nested; every result
    must still match numpy and every call return."""
    square = kernels.function("square_plus_one", [P, P, I64, I64])
    rows = kernels.function("square_rows", [P, P, I64, I64, I64])
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    results = {}

    def caller(tid):
        rng = np.random.default_rng(10 + tid)
        ok = True
        deadline = time.perf_counter() + 1.5
        while time.perf_counter() < deadline:
            n = int(rng.integers(0, 50_000))
            x = rng.standard_normal(n).astype(np.float32)
            y = np.full_like(x, np.nan)
            square(x.ctypes.data, y.ctypes.data, n, 2 + tid % 2)
            ok &= bool(np.array_equal(y, x * x + np.float32(1)))
            r, c = int(rng.integers(1, 9)), int(rng.integers(0, 3000))
            x2 = rng.standard_normal((r, c)).astype(np.float32)
            y2 = np.full_like(x2, np.nan)
            rows(x2.ctypes.data, y2.ctypes.data, r, c, 2)
            ok &= bool(np.array_equal(y2, x2 * x2 + np.float32(1)))
            counts, _ = run_mark(kernels, n, 2, reset_backoff=False)
            ok &= bool(np.array_equal(counts, np.ones(n, np.int32)))
        results[tid] = ok

    def all_callers():
        ts = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    try:
        run_in_thread(all_callers, timeout=120)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    assert results == {0: True, 1: True, 2: True}


def test_ensure_registered_is_idempotent_and_registers_the_symbol(kernels):
    runtime.ensure_registered()
    runtime.ensure_registered()
    assert llvm.address_of_symbol("fg_parallel_for") == runtime._module.address("fg_parallel_for")
    decl = runtime.parallel_for_decl()
    assert decl.startswith("declare void @fg_parallel_for(ptr, ptr, i64, i64)")
    llvm.parse_assembly(decl).verify()


def test_default_threads_honours_fungrad_num_threads(monkeypatch):
    monkeypatch.setenv("FUNGRAD_NUM_THREADS", "1")
    assert runtime.default_threads() == 1
    monkeypatch.setenv("FUNGRAD_NUM_THREADS", "3")
    assert runtime.default_threads() == 3
    monkeypatch.setenv("FUNGRAD_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="FUNGRAD_NUM_THREADS"):
        runtime.default_threads()
    monkeypatch.delenv("FUNGRAD_NUM_THREADS")
    assert runtime.default_threads() == threads.num_threads() >= 1
    if hasattr(os, "sched_getaffinity"):  # Linux: the affinity mask, not the machine's cores
        mask = os.sched_getaffinity(0)
        assert runtime.default_threads() == len(mask)
        os.sched_setaffinity(0, {min(mask)})  # this thread pinned to one core
        try:
            assert runtime.default_threads() == 1
        finally:
            os.sched_setaffinity(0, mask)


SUBPROCESS = textwrap.dedent("""
    import ctypes, os, sys, threading
    import numpy as np
    from fungrad.lowering.cpu import compiler as cpu
    from fungrad.lowering.cpu import runtime

    # many threads register at once: one compile, one module
    barrier = threading.Barrier(8)
    def reg():
        barrier.wait()
        runtime.ensure_registered()
    ts = [threading.Thread(target=reg) for _ in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    assert cpu.compile_stats()["modules"] == 1, cpu.compile_stats()

    # the first call ever: the worker created by it runs chunk 1 (it must not miss that job)
    idents, worker_ran = {}, threading.Event()
    @ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    def chunk(ctx, start, end):
        idents[start] = threading.get_ident()
        if start == 0:
            worker_ran.wait(30)
        else:
            worker_ran.set()
    runtime.native_parallel_for(ctypes.cast(chunk, ctypes.c_void_p).value, None, 2, 2)
    assert idents[0] == threading.get_ident() != idents[1], idents
    mod = cpu.compile_module(sys.argv[1], ["square_plus_one"], name="t", opt_level=1)
    fn = mod.function("square_plus_one", [ctypes.c_void_p] * 2 + [ctypes.c_int64] * 2)

    def check(n):
        x = np.arange(n, dtype=np.float32) / n
        y = np.zeros_like(x)
        fn(x.ctypes.data, y.ctypes.data, n, 2)
        return np.array_equal(y, x * x + np.float32(1))

    assert check(100_000) and runtime.pool_workers() == 1
    pid = os.fork()
    if pid == 0:  # the child: no workers survived the fork; the pool starts again
        ok = runtime.pool_workers() == 0 and check(100_000) and runtime.pool_workers() == 1
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert check(50_000)
    print("ok", flush=True)
    # exit right after a parallel call, the worker still spinning: no hang, no crash
""")


def test_fresh_process_registers_once_forks_and_exits_cleanly(tmp_path):
    env = dict(os.environ, FUNGRAD_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("FUNGRAD_NUM_THREADS", None)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [sys.executable, "-c", SUBPROCESS, TEST_IR],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


@pytest.mark.parametrize(
    "triple,hint",
    [
        ("x86_64-unknown-linux-gnu", "pause"),
        ("aarch64-unknown-linux-gnu", "yield"),
        ("arm64-apple-darwin23.0.0", "yield"),
    ],
)
def test_runtime_ir_compiles_for_each_architecture(triple, hint):
    with cpu.llvm_lock:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        mod = llvm.parse_assembly(runtime.runtime_ir(triple.split("-")[0]))
        mod.verify()
        mod.triple = triple
        asm = llvm.Target.from_triple(triple).create_target_machine().emit_assembly(mod)
    assert hint in asm and "fg_parallel_for" in asm
