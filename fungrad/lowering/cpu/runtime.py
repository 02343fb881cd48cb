"""Native fork-join threading for generated code: ``@fg_parallel_for``.

The CPU compiler emits one native entry point per jitted function, so its large kernels cannot be
spread over cores from Python (threads.py); they call this instead, from native code::

    declare void @fg_parallel_for(ptr %fn, ptr %ctx, i64 %n, i64 %nthreads) nounwind
    ; fn: void (ptr %ctx, i64 %start, i64 %end)

``fg_parallel_for`` splits ``[0, n)`` into ``k = min(nthreads, n, 256)`` contiguous chunks whose
sizes differ by at most one (chunk i starts at ``i*(n/k) + min(i, n%k)``), runs chunk 0 on the
calling thread and the others on a persistent pool of worker threads, and returns once every chunk
has finished. ``n <= 0`` calls nothing; ``nthreads <= 1`` or ``n == 1`` is one call
``fn(ctx, 0, n)``. The split depends only on ``(n, k)``, but ``fn`` must give the same result for
any split, since a busy or backing-off pool runs the whole range in one call (below).

How the pool works (all of it is LLVM IR text compiled here once per process; no C compiler):
- Workers are pthreads created on demand (up to ``nthreads - 1``, at most 255) with 8 MiB stacks and
  every asynchronous signal blocked, so Ctrl-C and friends still reach Python's main thread.
- A job is published by one atomic 64-bit word, ``generation << 32 | chunks left to claim``.
  Workers and the caller claim chunks with compare-and-swap on that word, so a worker that wakes
  late can never take a chunk of a later job, and the caller itself takes any chunk no worker has
  claimed yet: no call waits on a sleeping thread, and correctness never depends on the workers
  (a failed ``pthread_create`` or a forked child just runs more chunks on the caller).
- An idle worker spins on the word (2000 ``pause``: ~8 µs on Zen 4, ~10x that on recent Intel
  cores), calls ``sched_yield`` 16 times, then sleeps on a pthread condition variable; the caller
  signals only as many sleepers as it has chunks. So back-to-back kernels cost no wake-up (a
  fork-join then costs ~0.3-0.4 µs), and an idle pool costs no CPU.
- The caller, out of chunks, waits for the workers' ones (the join): it spins as long as its own
  chunks took (5 to 50 µs), then blocks on a second condition variable that the worker finishing
  a chunk signals while the caller is blocked. On an idle host the join ends while spinning, at
  no extra cost; on a loaded one a worker descheduled mid-chunk (another process has its core)
  gets the caller's core instead of the caller spinning or yielding for whole scheduler slices.
- Back-off: a join that blocked for longer than twice the caller's own chunks plus 250 µs had a
  worker off its core. The pool then runs every call inline on its caller for a back-off period
  (1 ms, doubled at each such join up to 128 ms) and afterwards tries the workers again; a
  back-off with no slow join for four periods is halved, and ends below 1 ms. So a loaded host
  costs about what one thread does (plus one slow join per period), and a host that quiets down
  gets its cores back within a period. Calls read a monotonic clock once (twice when they wait).
- Chunks stay one per thread: a descheduled worker holds its chunk whatever its size, and the
  caller already takes every chunk no worker has claimed, so finer chunks would only add the
  per-chunk cost (packing in products) to every call.
- One job at a time: a caller that finds the pool busy (another Python thread, or ``fn`` itself
  calling ``fg_parallel_for``) runs ``fn(ctx, 0, n)`` inline. Nested and concurrent calls are
  therefore always correct and never deadlock.
- Workers never exit: at interpreter exit they are asleep in the condition variable (or spinning
  over the pool's own state) and the process's exit ends them. The module's machine code is
  therefore kept alive for the life of the process. After ``os.fork()`` the child resets the pool
  (its workers did not survive the fork) and creates new ones when needed.

libc and pthread functions are reached through private symbols (``fg_rt_pthread_create`` ...)
registered with ``llvm.add_symbol``: fungrad's external check (cpu.py) only accepts symbols LLVM
can resolve, which excludes libc names until an MCJIT engine has loaded the process.

Public API: :func:`ensure_registered` compiles and registers ``fg_parallel_for`` (idempotent,
thread safe; call it before compiling IR that declares it), :func:`parallel_for_decl` is the IR
``declare`` line, :func:`default_threads` the thread count to pass (``threads.num_threads()``:
``FUNGRAD_NUM_THREADS`` or the CPU affinity mask). :func:`native_parallel_for` calls the native
function from Python (tests, benchmarks), :func:`pool_workers` counts the workers created and
:func:`pool_backoff_ns` reads (tests: sets) the back-off. bench/thread_pool_load.py times the pool
on an idle and a loaded host.

POSIX only (Linux and macOS have pthreads in every process) on 64-bit hosts; Windows is out of
scope: :func:`ensure_registered` raises there.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import string
import sys
import time

from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu import threads

__all__ = [
    "MAX_THREADS",
    "default_threads",
    "ensure_registered",
    "native_parallel_for",
    "parallel_for_decl",
    "pool_backoff_ns",
    "pool_workers",
]

MAX_THREADS = 256
"""Most threads one ``fg_parallel_for`` call uses (the caller plus 255 workers)."""

_STACK_BYTES = 8 << 20
# Spin counts. One pause iteration takes ~4 ns on the Zen 4 VM this was measured on, so an idle
# worker spins ~8 µs, then yields 16 times (~10 µs more when the core is free) before it sleeps:
# long enough to catch the next kernel of the same jitted call, or the next call from Python.
_WORKER_SPIN = 2000
_WORKER_YIELDS = 16
# The caller's join: it spins while the workers' chunks may still be running on other cores (as
# long as its own chunks took, between these bounds), then blocks until the last one finishes.
_JOIN_SPIN_MIN_NS = 5_000
_JOIN_SPIN_MAX_NS = 50_000
# A join that waited longer than twice the caller's own work plus this slack had a worker off its
# core (a loaded host): the pool then runs calls inline for a back-off period, doubled at each
# such join between these bounds, halved after four periods without one.
_SLOW_JOIN_SLACK_NS = 250_000
_BACKOFF_MIN_NS = 1_000_000
_BACKOFF_MAX_NS = 128_000_000

# libc/pthread functions the runtime calls, each registered as fg_rt_<name>.
_LIBC = (
    "pthread_create",
    "pthread_attr_init",
    "pthread_attr_setstacksize",
    "pthread_attr_destroy",
    "pthread_mutex_init",
    "pthread_mutex_lock",
    "pthread_mutex_unlock",
    "pthread_cond_init",
    "pthread_cond_wait",
    "pthread_cond_signal",
    "clock_gettime",
    "pthread_sigmask",
    "sigfillset",
    "sigdelset",
    "sched_yield",
)

_ENTRY_POINTS = (
    "fg_parallel_for",
    "fg_runtime_backoff_ns",
    "fg_runtime_init",
    "fg_runtime_after_fork",
    "fg_runtime_workers",
)

_module: cpu.CompiledModule | None = None
_pfor = None  # ctypes function of fg_parallel_for
_workers = None  # ctypes function of fg_runtime_workers
_backoff = None  # ctypes function of fg_runtime_backoff_ns


def parallel_for_decl() -> str:
    """The LLVM ``declare`` line of ``@fg_parallel_for`` for generated modules."""
    return "declare void @fg_parallel_for(ptr, ptr, i64, i64) nounwind"


def default_threads() -> int:
    """Threads a parallel kernel may use: ``$FUNGRAD_NUM_THREADS`` if set, else the cores in this
    process's CPU affinity mask (:func:`fungrad.lowering.cpu.threads.num_threads`)."""
    return threads.num_threads()


def ensure_registered() -> None:
    """Compile the runtime (once per process) and make ``@fg_parallel_for`` resolvable by every
    module compiled afterwards. Idempotent and thread safe; cheap after the first call.

    Raises:
      RuntimeError: on Windows or a 32-bit host, or when a libc/pthread function is missing.
    """
    if _module is not None:
        return
    with cpu.llvm_lock:  # the lock compile_module takes anyway: one lock order, no deadlock
        if _module is not None:
            return
        _register()


def native_parallel_for(fn_address: int, ctx: int | None, n: int, nthreads: int) -> None:
    """Call the native ``fg_parallel_for(fn, ctx, n, nthreads)`` (releases the GIL).

    ``fn_address`` is the address of a ``void (ptr, i64, i64)`` function, e.g. from
    ``CompiledModule.address`` or a ``ctypes.CFUNCTYPE`` callback (keep it referenced).
    """
    ensure_registered()
    _pfor(fn_address, ctx, n, nthreads)


def pool_workers() -> int:
    """Worker threads the native pool has created so far in this process (0 before first use)."""
    ensure_registered()
    return _workers()


def pool_backoff_ns(start: int | None = None) -> int:
    """The pool's current back-off in ns (0: none), during which calls run inline on the caller.

    ``start`` (tests) first sets it to that many ns and starts a back-off period of that length
    now; ``0`` ends any back-off.
    """
    ensure_registered()
    if start is not None and start < 0:
        raise ValueError(f"back-off must be >= 0 ns, got {start}")
    return _backoff(-1 if start is None else start)


def _register() -> None:
    global _module, _pfor, _workers, _backoff
    if os.name != "posix":
        raise RuntimeError(
            f"fungrad.lowering.cpu.runtime: native threading needs POSIX threads; "
            f"{platform.system()} is not supported (jit code runs on one thread)"
        )
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        raise RuntimeError("fungrad.lowering.cpu.runtime: native threading needs a 64-bit host")
    from fungrad.lowering.cpu import llvm_capi

    cpu.host()  # initialises LLVM
    process = ctypes.CDLL(None)
    for name in _LIBC:
        fn = getattr(process, name, None)
        if fn is None:
            raise RuntimeError(
                f"fungrad.lowering.cpu.runtime: the process has no {name}(); "
                f"native threading is unavailable on {sys.platform}"
            )
        llvm_capi.add_symbol(f"fg_rt_{name}", ctypes.cast(fn, ctypes.c_void_p).value)
    # hand-written SSA at O0 (FastISel): 6 ms against 57 at O2, the same fork-join timings
    module = cpu.compile_module(
        runtime_ir(), _ENTRY_POINTS, name="fungrad_runtime", opt_level=0, library=True
    )
    module.function("fg_runtime_init", [])()
    # NB: workers run this module's code until the process exits, so it must never be freed (a
    # CompiledModule frees its code when collected, e.g. while modules are torn down at exit).
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(module))
    pfor = module.function(
        "fg_parallel_for", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    )
    workers = module.function("fg_runtime_workers", [], ctypes.c_int64)
    backoff = module.function("fg_runtime_backoff_ns", [ctypes.c_int64], ctypes.c_int64)
    after_fork = module.function("fg_runtime_after_fork", [])
    os.register_at_fork(after_in_child=after_fork)
    llvm_capi.add_symbol("fg_parallel_for", module.address("fg_parallel_for"))
    _pfor, _workers, _backoff = pfor, workers, backoff
    _module = module


_PAUSE = {  # arch -> (declaration, spin-wait hint); other architectures spin without a hint
    "x86_64": ("declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()"),
    "aarch64": ("declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)"),
}
_PAUSE["arm64"] = _PAUSE["aarch64"]  # macOS spelling of the triple


def runtime_ir(arch: str | None = None) -> str:
    """The runtime module's IR text for ``arch`` (default: this host's, from its triple): the
    spin-wait hint (x86 ``pause``, AArch64 ``yield``) and this platform's signal numbers."""
    arch = cpu.host().triple.split("-")[0] if arch is None else arch
    declare, pause = _PAUSE.get(arch, ("", ""))
    unblocked = [
        signal.SIGSEGV,
        signal.SIGBUS,
        signal.SIGFPE,
        signal.SIGILL,
        signal.SIGABRT,
        signal.SIGTRAP,
    ]
    keep = "\n".join(f"  call i32 @fg_rt_sigdelset(ptr %newmask, i32 {int(s)})" for s in unblocked)
    return _IR.substitute(
        PAUSE=pause,
        PAUSE_DECLARE=declare,
        MAX_THREADS=MAX_THREADS,
        MAX_WORKERS=MAX_THREADS - 1,
        STACK_BYTES=_STACK_BYTES,
        WORKER_SPIN=_WORKER_SPIN,
        WORKER_YIELDS=_WORKER_YIELDS,
        JOIN_SPIN_MIN=_JOIN_SPIN_MIN_NS,
        JOIN_SPIN_MAX=_JOIN_SPIN_MAX_NS,
        SLOW_JOIN_SLACK=_SLOW_JOIN_SLACK_NS,
        BACKOFF_MIN=_BACKOFF_MIN_NS,
        BACKOFF_MAX=_BACKOFF_MAX_NS,
        CLOCK_MONOTONIC=int(time.CLOCK_MONOTONIC),
        SIG_BLOCK=int(signal.SIG_BLOCK),
        SIG_SETMASK=int(signal.SIG_SETMASK),
        KEEP_SIGNALS=keep,
    )


# The runtime, in LLVM IR. State (one pool per process):
#   @word      generation << 32 | chunks of the current job not yet claimed (chunk 0 is the
#              caller's and never counted)
#   @done      chunks finished by workers in the current job
#   @busy      1 while a caller owns the pool (one job at a time)
#   @sleepers  workers asleep (or about to sleep) on @cond; changed under @mutex
#   @job_state fn, ctx, n, k of the current job: written by the owning caller before it publishes
#              @word (release), read by a worker only after its claim succeeded (acquire), which
#              also keeps the caller from starting another job before that chunk is done
#   @join_waiting  1 while the owning caller is blocked (or about to block) on @join_cond; set
#              and cleared under @join_mutex
#   @backoff, @serial_until, @calm_since  the back-off (ns; 0: none), the end of its current
#              period and when it last grew or halved (monotonic ns); written by the owning
#              caller (and fg_runtime_backoff_ns), read by any caller
# Each hot variable sits on its own cache line. pthread objects get 256 bytes, more than any
# 64-bit platform's pthread_mutex_t / pthread_cond_t / pthread_attr_t / sigset_t needs.
_IR = string.Template(r"""
%job = type { ptr, ptr, i64, i64 }

@word = internal global i64 0, align 64
@done = internal global i64 0, align 64
@busy = internal global i32 0, align 64
@sleepers = internal global i32 0, align 64
@job_state = internal global %job zeroinitializer, align 64
@nworkers = internal global i32 0, align 64
@maxworkers = internal global i32 ${MAX_WORKERS}, align 4
@mutex = internal global [256 x i8] zeroinitializer, align 64
@cond = internal global [256 x i8] zeroinitializer, align 64
@tids = internal global [${MAX_WORKERS} x i64] zeroinitializer, align 8
@join_waiting = internal global i32 0, align 64
@join_mutex = internal global [256 x i8] zeroinitializer, align 64
@join_cond = internal global [256 x i8] zeroinitializer, align 64
@backoff = internal global i64 0, align 64
@serial_until = internal global i64 0, align 8
@calm_since = internal global i64 0, align 8

declare i32 @fg_rt_pthread_create(ptr, ptr, ptr, ptr) nounwind
declare i32 @fg_rt_pthread_attr_init(ptr) nounwind
declare i32 @fg_rt_pthread_attr_setstacksize(ptr, i64) nounwind
declare i32 @fg_rt_pthread_attr_destroy(ptr) nounwind
declare i32 @fg_rt_pthread_mutex_init(ptr, ptr) nounwind
declare i32 @fg_rt_pthread_mutex_lock(ptr) nounwind
declare i32 @fg_rt_pthread_mutex_unlock(ptr) nounwind
declare i32 @fg_rt_pthread_cond_init(ptr, ptr) nounwind
declare i32 @fg_rt_pthread_cond_wait(ptr, ptr) nounwind
declare i32 @fg_rt_pthread_cond_signal(ptr) nounwind
declare i32 @fg_rt_pthread_sigmask(i32, ptr, ptr) nounwind
declare i32 @fg_rt_sigfillset(ptr) nounwind
declare i32 @fg_rt_sigdelset(ptr, i32) nounwind
declare i32 @fg_rt_sched_yield() nounwind
declare i32 @fg_rt_clock_gettime(i32, ptr) nounwind
declare i64 @llvm.smin.i64(i64, i64)
declare i64 @llvm.smax.i64(i64, i64)
declare i64 @llvm.umin.i64(i64, i64)
${PAUSE_DECLARE}

define internal void @pause() alwaysinline nounwind {
  ${PAUSE}
  ret void
}

; monotonic clock, nanoseconds
define internal i64 @now() nounwind {
  %ts = alloca { i64, i64 }, align 8
  call i32 @fg_rt_clock_gettime(i32 ${CLOCK_MONOTONIC}, ptr %ts)
  %sec = load i64, ptr %ts, align 8
  %pns = getelementptr inbounds { i64, i64 }, ptr %ts, i32 0, i32 1
  %ns = load i64, ptr %pns, align 8
  %secns = mul i64 %sec, 1000000000
  %t = add i64 %secns, %ns
  ret i64 %t
}

define internal i64 @gen_of(i64 %w) alwaysinline nounwind {
  %g = lshr i64 %w, 32
  ret i64 %g
}

; start of chunk i of n split in k: i*(n/k) + min(i, n%k) (no overflow for any n)
define internal i64 @chunk_start(i64 %i, i64 %q, i64 %r) alwaysinline nounwind {
  %a = mul i64 %i, %q
  %lt = icmp ult i64 %i, %r
  %m = select i1 %lt, i64 %i, i64 %r
  %s = add i64 %a, %m
  ret i64 %s
}

define internal void @run_chunk(i64 %i) nounwind {
  %fn = load ptr, ptr @job_state, align 8
  %pctx = getelementptr inbounds %job, ptr @job_state, i32 0, i32 1
  %ctx = load ptr, ptr %pctx, align 8
  %pn = getelementptr inbounds %job, ptr @job_state, i32 0, i32 2
  %n = load i64, ptr %pn, align 8
  %pk = getelementptr inbounds %job, ptr @job_state, i32 0, i32 3
  %k = load i64, ptr %pk, align 8
  %q = udiv i64 %n, %k
  %r = urem i64 %n, %k
  %s = call i64 @chunk_start(i64 %i, i64 %q, i64 %r)
  %i1 = add i64 %i, 1
  %e = call i64 @chunk_start(i64 %i1, i64 %q, i64 %r)
  call void %fn(ptr %ctx, i64 %s, i64 %e)
  ret void
}

; claim one chunk of job %gen: its index, or -1 when none is left or that job is over
define internal i64 @claim(i64 %gen) nounwind {
entry:
  %w0 = load atomic i64, ptr @word acquire, align 8
  br label %loop
loop:
  %w = phi i64 [ %w0, %entry ], [ %seen, %try ]
  %g = call i64 @gen_of(i64 %w)
  %left = and i64 %w, 4294967295
  %same = icmp eq i64 %g, %gen
  %some = icmp ne i64 %left, 0
  %ok = and i1 %same, %some
  br i1 %ok, label %try, label %none
try:
  %w1 = sub i64 %w, 1
  %cx = cmpxchg ptr @word, i64 %w, i64 %w1 acquire acquire, align 8
  %seen = extractvalue { i64, i1 } %cx, 0
  %won = extractvalue { i64, i1 } %cx, 1
  br i1 %won, label %got, label %loop
got:
  %pk = getelementptr inbounds %job, ptr @job_state, i32 0, i32 3
  %k = load i64, ptr %pk, align 8
  %idx = sub i64 %k, %left
  ret i64 %idx
none:
  ret i64 -1
}

; wait until the generation differs from %mine: spin, then yield, then sleep on @cond
define internal i64 @wait_job(i64 %mine) nounwind {
entry:
  br label %spin
spin:
  %i = phi i64 [ 0, %entry ], [ %i1, %spin_next ]
  %w = load atomic i64, ptr @word acquire, align 8
  %g = call i64 @gen_of(i64 %w)
  %changed = icmp ne i64 %g, %mine
  br i1 %changed, label %found, label %spin_next
spin_next:
  call void @pause()
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, ${WORKER_SPIN}
  br i1 %more, label %spin, label %yield
yield:
  %j = phi i64 [ 0, %spin_next ], [ %j1, %yield_next ]
  %wy = load atomic i64, ptr @word acquire, align 8
  %gy = call i64 @gen_of(i64 %wy)
  %changed_y = icmp ne i64 %gy, %mine
  br i1 %changed_y, label %found_y, label %yield_next
yield_next:
  call i32 @fg_rt_sched_yield()
  %j1 = add i64 %j, 1
  %more_y = icmp ult i64 %j1, ${WORKER_YIELDS}
  br i1 %more_y, label %yield, label %sleep
sleep:
  call i32 @fg_rt_pthread_mutex_lock(ptr @mutex)
  atomicrmw add ptr @sleepers, i32 1 seq_cst, align 4
  br label %sleep_check
sleep_check:
  %ws = load atomic i64, ptr @word seq_cst, align 8
  %gs = call i64 @gen_of(i64 %ws)
  %changed_s = icmp ne i64 %gs, %mine
  br i1 %changed_s, label %woke, label %sleep_wait
sleep_wait:
  call i32 @fg_rt_pthread_cond_wait(ptr @cond, ptr @mutex)
  br label %sleep_check
woke:
  atomicrmw sub ptr @sleepers, i32 1 seq_cst, align 4
  call i32 @fg_rt_pthread_mutex_unlock(ptr @mutex)
  ret i64 %gs
found:
  ret i64 %g
found_y:
  ret i64 %gy
}

; %arg is the generation before the job its creator is about to publish: that job is not missed
define internal ptr @worker(ptr %arg) nounwind {
entry:
  %g0 = ptrtoint ptr %arg to i64
  br label %wait
wait:
  %mine = phi i64 [ %g0, %entry ], [ %gen, %work ]
  %gen = call i64 @wait_job(i64 %mine)
  br label %work
work:
  %idx = call i64 @claim(i64 %gen)
  %has = icmp sge i64 %idx, 0
  br i1 %has, label %run, label %wait
run:
  call void @run_chunk(i64 %idx)
  ; seq_cst add then seq_cst load of @join_waiting: a caller about to block either sees this
  ; chunk counted or is seen waiting (and waits under @join_mutex: the signal is not lost)
  atomicrmw add ptr @done, i64 1 seq_cst, align 8
  %waiting = load atomic i32, ptr @join_waiting seq_cst, align 4
  %blocked = icmp ne i32 %waiting, 0
  br i1 %blocked, label %wake_caller, label %work
wake_caller:
  call i32 @fg_rt_pthread_mutex_lock(ptr @join_mutex)
  call i32 @fg_rt_pthread_cond_signal(ptr @join_cond)
  call i32 @fg_rt_pthread_mutex_unlock(ptr @join_mutex)
  br label %work
}

; make the pool hold at least %want workers (fewer if pthread_create fails); the new count
define internal i64 @grow(i64 %want) nounwind {
entry:
  %attr = alloca [256 x i8], align 16
  %newmask = alloca [256 x i8], align 16
  %oldmask = alloca [256 x i8], align 16
  %have32 = load atomic i32, ptr @nworkers monotonic, align 4
  %have = sext i32 %have32 to i64
  %max32 = load i32, ptr @maxworkers, align 4
  %max = sext i32 %max32 to i64
  %target = call i64 @llvm.smin.i64(i64 %want, i64 %max)
  %short = icmp slt i64 %have, %target
  br i1 %short, label %setup, label %enough
enough:
  ret i64 %have
setup:
  call i32 @fg_rt_pthread_attr_init(ptr %attr)
  call i32 @fg_rt_pthread_attr_setstacksize(ptr %attr, i64 ${STACK_BYTES})
  ; workers inherit the creator's signal mask: block everything but synchronous faults
  call i32 @fg_rt_sigfillset(ptr %newmask)
${KEEP_SIGNALS}
  call i32 @fg_rt_pthread_sigmask(i32 ${SIG_BLOCK}, ptr %newmask, ptr %oldmask)
  %w = load atomic i64, ptr @word monotonic, align 8
  %g = call i64 @gen_of(i64 %w)
  %garg = inttoptr i64 %g to ptr
  br label %spawn
spawn:
  %i = phi i64 [ %have, %setup ], [ %i1, %spawned ]
  %slot = getelementptr inbounds [${MAX_WORKERS} x i64], ptr @tids, i64 0, i64 %i
  %rc = call i32 @fg_rt_pthread_create(ptr %slot, ptr %attr, ptr @worker, ptr %garg)
  %failed = icmp ne i32 %rc, 0
  br i1 %failed, label %give_up, label %spawned
spawned:
  %i1 = add i64 %i, 1
  %i1_32 = trunc i64 %i1 to i32
  store atomic i32 %i1_32, ptr @nworkers monotonic, align 4
  %more = icmp slt i64 %i1, %target
  br i1 %more, label %spawn, label %finish
give_up:
  %i_32 = trunc i64 %i to i32
  store i32 %i_32, ptr @maxworkers, align 4
  br label %finish
finish:
  %count = phi i64 [ %i1, %spawned ], [ %i, %give_up ]
  call i32 @fg_rt_pthread_sigmask(i32 ${SIG_SETMASK}, ptr %oldmask, ptr null)
  call i32 @fg_rt_pthread_attr_destroy(ptr %attr)
  ret i64 %count
}

; wait until workers have finished %need chunks. %t1: when the caller ran out of chunks; it
; spins for up to %limit ns, then blocks on @join_cond until the worker finishing the last chunk
; signals it (a descheduled worker may need this core). Returns ns waited, 0 if only spun.
define internal i64 @wait_done(i64 %need, i64 %t1, i64 %limit) nounwind {
entry:
  br label %spin
spin:
  %i = phi i64 [ 0, %entry ], [ %i1, %spin_next ], [ %i1, %spin_clock ]
  %d = load atomic i64, ptr @done acquire, align 8
  %finished = icmp sge i64 %d, %need
  br i1 %finished, label %spun, label %spin_next
spin_next:
  call void @pause()
  %i1 = add i64 %i, 1
  %lap = and i64 %i1, 63
  %clock = icmp eq i64 %lap, 0
  br i1 %clock, label %spin_clock, label %spin
spin_clock:
  %t = call i64 @now()
  %spent = sub i64 %t, %t1
  %more = icmp slt i64 %spent, %limit
  br i1 %more, label %spin, label %block
block:
  call i32 @fg_rt_pthread_mutex_lock(ptr @join_mutex)
  store atomic i32 1, ptr @join_waiting seq_cst, align 4
  br label %block_check
block_check:
  %db = load atomic i64, ptr @done seq_cst, align 8
  %finished_b = icmp sge i64 %db, %need
  br i1 %finished_b, label %woke, label %block_wait
block_wait:
  call i32 @fg_rt_pthread_cond_wait(ptr @join_cond, ptr @join_mutex)
  br label %block_check
woke:
  store atomic i32 0, ptr @join_waiting seq_cst, align 4
  call i32 @fg_rt_pthread_mutex_unlock(ptr @join_mutex)
  %t2 = call i64 @now()
  %waited = sub i64 %t2, %t1
  ret i64 %waited
spun:
  ret i64 0
}

; after a join at %t1 that took the caller %own ns of chunks and %waited ns of blocking: a slow
; join (a worker off its core) starts or doubles the back-off, during which calls run inline;
; four back-off periods without one halve it (and end it below ${BACKOFF_MIN} ns)
define internal void @adapt(i64 %t1, i64 %own, i64 %waited) nounwind {
entry:
  %own2 = shl i64 %own, 1
  %bound = add i64 %own2, ${SLOW_JOIN_SLACK}
  %slow = icmp sgt i64 %waited, %bound
  %b = load atomic i64, ptr @backoff monotonic, align 8
  br i1 %slow, label %grow, label %calm
grow:
  %b2 = shl i64 %b, 1
  %b3 = call i64 @llvm.smax.i64(i64 %b2, i64 ${BACKOFF_MIN})
  %b4 = call i64 @llvm.smin.i64(i64 %b3, i64 ${BACKOFF_MAX})
  %t = add i64 %t1, %waited
  %until = add i64 %t, %b4
  store atomic i64 %b4, ptr @backoff monotonic, align 8
  store atomic i64 %until, ptr @serial_until monotonic, align 8
  store atomic i64 %t, ptr @calm_since monotonic, align 8
  ret void
calm:
  %backing = icmp ne i64 %b, 0
  br i1 %backing, label %check_calm, label %out
check_calm:
  %since = load atomic i64, ptr @calm_since monotonic, align 8
  %calm_for = sub i64 %t1, %since
  %b4x = shl i64 %b, 2
  %long = icmp sgt i64 %calm_for, %b4x
  br i1 %long, label %halve, label %out
halve:
  %h = lshr i64 %b, 1
  %small = icmp slt i64 %h, ${BACKOFF_MIN}
  %h1 = select i1 %small, i64 0, i64 %h
  store atomic i64 %h1, ptr @backoff monotonic, align 8
  store atomic i64 %t1, ptr @calm_since monotonic, align 8
  br label %out
out:
  ret void
}

define void @fg_parallel_for(ptr %fn, ptr %ctx, i64 %n, i64 %nthreads) nounwind {
entry:
  %nonempty = icmp sgt i64 %n, 0
  br i1 %nonempty, label %check, label %return
check:
  %t2 = icmp sgt i64 %nthreads, 1
  %n2 = icmp sgt i64 %n, 1
  %split = and i1 %t2, %n2
  br i1 %split, label %backing_off, label %inline
backing_off:
  %b = load atomic i64, ptr @backoff monotonic, align 8
  %backing = icmp ne i64 %b, 0
  br i1 %backing, label %check_serial, label %acquire
check_serial:
  %until = load atomic i64, ptr @serial_until monotonic, align 8
  %tb = call i64 @now()
  %serial = icmp slt i64 %tb, %until
  br i1 %serial, label %inline, label %acquire
inline:
  call void %fn(ptr %ctx, i64 0, i64 %n)
  br label %return
acquire:
  %cx = cmpxchg ptr @busy, i32 0, i32 1 acquire monotonic, align 4
  %owner = extractvalue { i32, i1 } %cx, 1
  br i1 %owner, label %pool, label %inline
pool:
  %k0 = call i64 @llvm.smin.i64(i64 %nthreads, i64 %n)
  %k1 = call i64 @llvm.smin.i64(i64 %k0, i64 ${MAX_THREADS})
  %want = sub i64 %k1, 1
  %have = call i64 @grow(i64 %want)
  %alone = icmp eq i64 %have, 0
  br i1 %alone, label %release_inline, label %publish
release_inline:
  store atomic i32 0, ptr @busy release, align 4
  br label %inline
publish:
  %have1 = add i64 %have, 1
  %k = call i64 @llvm.smin.i64(i64 %k1, i64 %have1)
  store ptr %fn, ptr @job_state, align 8
  %pctx = getelementptr inbounds %job, ptr @job_state, i32 0, i32 1
  store ptr %ctx, ptr %pctx, align 8
  %pn = getelementptr inbounds %job, ptr @job_state, i32 0, i32 2
  store i64 %n, ptr %pn, align 8
  %pk = getelementptr inbounds %job, ptr @job_state, i32 0, i32 3
  store i64 %k, ptr %pk, align 8
  store atomic i64 0, ptr @done monotonic, align 8
  %w = load atomic i64, ptr @word monotonic, align 8
  %g = call i64 @gen_of(i64 %w)
  %g1 = add i64 %g, 1
  %gen = and i64 %g1, 4294967295
  %hi = shl i64 %gen, 32
  %rest = sub i64 %k, 1
  %nw = or i64 %hi, %rest
  ; seq_cst store then seq_cst load of @sleepers: a worker going to sleep either sees this job
  ; or is counted (and waits under @mutex, so the signal below cannot be lost)
  store atomic i64 %nw, ptr @word seq_cst, align 8
  %s32 = load atomic i32, ptr @sleepers seq_cst, align 4
  %s = sext i32 %s32 to i64
  %nsignal = call i64 @llvm.smin.i64(i64 %s, i64 %rest)
  %wake = icmp sgt i64 %nsignal, 0
  br i1 %wake, label %signal_lock, label %run0
signal_lock:
  call i32 @fg_rt_pthread_mutex_lock(ptr @mutex)
  br label %signal
signal:
  %j = phi i64 [ 0, %signal_lock ], [ %j1, %signal ]
  call i32 @fg_rt_pthread_cond_signal(ptr @cond)
  %j1 = add i64 %j, 1
  %more_signals = icmp slt i64 %j1, %nsignal
  br i1 %more_signals, label %signal, label %signal_unlock
signal_unlock:
  call i32 @fg_rt_pthread_mutex_unlock(ptr @mutex)
  br label %run0
run0:
  %t0 = call i64 @now()
  call void @run_chunk(i64 0)
  br label %claim
claim:
  %mine = phi i64 [ 1, %run0 ], [ %mine1, %run_more ]
  %idx = call i64 @claim(i64 %gen)
  %has = icmp sge i64 %idx, 0
  br i1 %has, label %run_more, label %join
run_more:
  call void @run_chunk(i64 %idx)
  %mine1 = add i64 %mine, 1
  br label %claim
join:
  %need = sub i64 %k, %mine
  %d = load atomic i64, ptr @done acquire, align 8
  %early = icmp sge i64 %d, %need
  br i1 %early, label %joined_early, label %join_wait
joined_early:
  ; the workers' chunks are done already: a calm join, dated by %t0 (saves a clock read)
  call void @adapt(i64 %t0, i64 0, i64 0)
  br label %release
join_wait:
  %t1 = call i64 @now()
  %own = sub i64 %t1, %t0
  %lim0 = call i64 @llvm.smax.i64(i64 %own, i64 ${JOIN_SPIN_MIN})
  %limit = call i64 @llvm.smin.i64(i64 %lim0, i64 ${JOIN_SPIN_MAX})
  %waited = call i64 @wait_done(i64 %need, i64 %t1, i64 %limit)
  call void @adapt(i64 %t1, i64 %own, i64 %waited)
  br label %release
release:
  store atomic i32 0, ptr @busy release, align 4
  br label %return
return:
  ret void
}

define void @fg_runtime_init() nounwind {
  call i32 @fg_rt_pthread_mutex_init(ptr @mutex, ptr null)
  call i32 @fg_rt_pthread_cond_init(ptr @cond, ptr null)
  call i32 @fg_rt_pthread_mutex_init(ptr @join_mutex, ptr null)
  call i32 @fg_rt_pthread_cond_init(ptr @join_cond, ptr null)
  ret void
}

; in the child of fork(): no worker survived, and a job another thread ran is gone with it
define void @fg_runtime_after_fork() nounwind {
  store atomic i32 0, ptr @nworkers monotonic, align 4
  store atomic i32 0, ptr @sleepers monotonic, align 4
  store atomic i64 0, ptr @done monotonic, align 8
  %w = load atomic i64, ptr @word monotonic, align 8
  %closed = and i64 %w, -4294967296
  store atomic i64 %closed, ptr @word monotonic, align 8
  store atomic i32 0, ptr @busy monotonic, align 4
  store atomic i32 0, ptr @join_waiting monotonic, align 4
  store atomic i64 0, ptr @backoff monotonic, align 8
  call void @fg_runtime_init()
  ret void
}

; the current back-off (ns; 0: none); %set >= 0 first sets it, starting a back-off period of
; that length now (tests)
define i64 @fg_runtime_backoff_ns(i64 %set) nounwind {
entry:
  %setting = icmp sge i64 %set, 0
  br i1 %setting, label %store, label %read
store:
  %t = call i64 @now()
  %until = add i64 %t, %set
  store atomic i64 %set, ptr @backoff monotonic, align 8
  store atomic i64 %until, ptr @serial_until monotonic, align 8
  store atomic i64 %t, ptr @calm_since monotonic, align 8
  br label %read
read:
  %b = load atomic i64, ptr @backoff monotonic, align 8
  ret i64 %b
}

define i64 @fg_runtime_workers() nounwind {
  %c = load atomic i32, ptr @nworkers monotonic, align 4
  %c64 = sext i32 %c to i64
  ret i64 %c64
}
""")
