"""CPU runtime: LLVM IR text in, callable native functions out (llvmlite 0.50's LLVM 22).

``compile_module(ir_text, entry_points, name=...)`` parses and verifies the text, checks that every
external it declares can be resolved, runs the new pass manager's default pipeline (O3 with loop
and SLP vectorization by default; none with ``passes=False``), emits an object file with the
host TargetMachine and loads it into its own MCJIT engine. The object is stored in the on-disk
cache (cache.py), so the same IR in a later process is loaded in ~1-2 ms instead of compiled.
Any failure raises :class:`CompileError` (with the IR written to a temp file) and caches nothing.
``compile_modules(parts, ...)`` compiles several modules, each with its own pipeline and cache
entry, and links their objects in one engine (a jitted program's kernels and its glue).

LLVM is reached through ``llvm_capi`` (llvmlite's shared library, without its Python package).
All LLVM work runs under ``llvm_lock``: LLVM's global context is not thread-safe. Compile times
are recorded per module (:class:`CompileStats`) and in process-wide totals (:func:`compile_stats`).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import os
import queue
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from fungrad.lowering.cpu import blas, cache, llvm_capi

__all__ = [
    "CompileError",
    "CompileStats",
    "CompiledModule",
    "Part",
    "compile_module",
    "compile_modules",
    "compile_stats",
    "ctypes_function",
    "host",
    "llvm_lock",
    "reset_compile_stats",
]

llvm_lock = threading.RLock()
"""Held around every call into LLVM (reentrant, so helpers may nest)."""

#: LLVM command-line options set for fungrad's hand-written, codegen-only modules (``passes=False``:
#: the gemm library), with the values they are put back to afterwards (LLVM's
#: defaults; the options are process wide, and another llvmlite user in this process, e.g.
#: numba, should compile as it would without fungrad). ``disable-lsr``: loop strength reduction
#: was a third of the gemm library's code generation (37 -> 24 ms) and changed none of its
#: products' speed. Not for optimised kernels, although it cut the transformer step's code
#: generation 107 -> 68 ms: a column mean over 4096 x 4096 went 3.5 -> 5.3 ms, its inner loop
#: the same six instructions either way (registers and placement differ; not understood).
LLVM_OPTIONS = {"-disable-lsr": "-disable-lsr=false"}


class CompileError(RuntimeError):
    """LLVM rejected a module. ``step`` is where (parse, verify, link, optimize, codegen, load),
    ``ir_path`` a file holding the IR text, ``llvm_message`` LLVM's own words."""

    def __init__(
        self, module_name: str, step: str, llvm_message: str, ir_path: str, where: str | None = None
    ):
        self.module_name = module_name
        self.step = step
        self.llvm_message = llvm_message
        self.ir_path = ir_path
        self.where = where  # the kernel and the operations behind it, when known
        super().__init__(
            f"LLVM {step} failed for module {module_name!r}: {llvm_message}\n"
            + (f"  in {where}\n" if where else "")
            + f"  the IR text is in {ir_path}"
        )

    def __reduce__(self):  # picklable, e.g. from a fuzzing subprocess
        return CompileError, (
            self.module_name,
            self.step,
            self.llvm_message,
            self.ir_path,
            self.where,
        )


@dataclass(frozen=True)
class Host:
    """The machine code target: this process's triple, cpu and features."""

    triple: str
    cpu: str
    features: str
    data_layout: str
    target_machine: object = field(repr=False)  # opt=3: passes and emit; never given away
    target_machine_o0: object = field(repr=False)  # opt=0 codegen (FastISel): ~6x cheaper

    def new_target_machine(self):
        """A fresh TargetMachine: an MCJIT engine takes ownership of (and frees) the one it gets,
        so each engine needs its own."""
        return llvm_capi.create_target_machine(self.triple, self.cpu, self.features, 3)


_host: Host | None = None


def host() -> Host:
    """Initialise LLVM once (native target + asm printer; ``llvm.initialize()`` raises in
    0.50) and describe the host. Also registers numpy's BLAS as ``@fg_sgemm``/``@fg_dgemm``."""
    global _host
    if _host is None:
        with llvm_lock:
            if _host is None:
                capi = llvm_capi
                capi.lib()  # loads LLVM, initialises the native target
                triple = capi.process_triple()
                cpu, features = capi.host_cpu_name(), capi.host_cpu_features()
                if "+avx512f" in features.split(","):
                    # LLVM prefers 256-bit vectors on AVX-512 CPUs; full-width zmm loops were
                    # 1.35-1.4x faster on our math kernels (measured, Zen 4)
                    features += ",-prefer-256-bit"
                tm = capi.create_target_machine(triple, cpu, features, 3)
                tm0 = capi.create_target_machine(triple, cpu, features, 0)
                # libc/libm symbols become resolvable (for the link check below) only once an
                # MCJIT engine exists in the process: create and drop one now
                capi.dispose_engine(
                    capi.create_engine(
                        capi.parse_module(""), capi.create_target_machine(triple, "", "", 2)
                    )
                )
                blas.register_llvm_symbols()
                _host = Host(triple, cpu, features, capi.data_layout(tm), tm, tm0)
    return _host


@dataclass
class CompileStats:
    """Seconds spent per step of one compile_module call (all 0 but load_s on a cache hit)."""

    parse_s: float = 0.0  # parse + verify + external check
    optimize_s: float = 0.0
    codegen_s: float = 0.0  # emit_object
    load_s: float = 0.0  # MCJIT engine + object load (+ cache read on a hit)
    cache_hit: bool = False
    object_bytes: int = 0

    @property
    def total_s(self) -> float:
        return self.parse_s + self.optimize_s + self.codegen_s + self.load_s


_totals = {
    "modules": 0,
    "cache_hits": 0,
    "parse_s": 0.0,
    "optimize_s": 0.0,
    "codegen_s": 0.0,
    "load_s": 0.0,
}


def compile_stats() -> dict[str, float]:
    """Process-wide totals: modules compiled or loaded, cache hits, and seconds per step."""
    with llvm_lock:
        return dict(_totals)


def reset_compile_stats() -> None:
    """Zero the process-wide totals (for benchmarks)."""
    with llvm_lock:
        for k in _totals:
            _totals[k] = type(_totals[k])(0)


def _record(stats: CompileStats) -> None:
    with llvm_lock:
        _totals["modules"] += 1
        _totals["cache_hits"] += stats.cache_hit
        for k in ("parse_s", "optimize_s", "codegen_s", "load_s"):
            _totals[k] += getattr(stats, k)


class CompiledModule:
    """Native code of one module, alive as long as this object (it owns the MCJIT engine: keep it
    referenced while any address or ctypes function from it may be called)."""

    def __init__(
        self,
        name: str,
        engine,
        addresses: dict[str, int],
        stats: CompileStats,
        optimized_ir: str | None = None,
        assembly: str | None = None,
    ):
        self.name = name
        self.stats = stats
        self.optimized_ir = optimized_ir  # set only with debug_info=True
        self.assembly = assembly  # set only with debug_info=True
        self._engine = engine
        self._addresses = dict(addresses)

    def __repr__(self) -> str:
        return (
            f"CompiledModule({self.name!r}, entry_points={sorted(self._addresses)}, "
            f"cache_hit={self.stats.cache_hit})"
        )

    def address(self, name: str) -> int:
        """The native address of function ``name`` (an entry point or any other global)."""
        addr = self._addresses.get(name)
        if addr is None:
            if self._engine is None:
                raise ValueError(f"CompiledModule {self.name!r} is closed")
            with llvm_lock:
                addr = llvm_capi.function_address(self._engine, name)
            if not addr:
                raise KeyError(
                    f"module {self.name!r} has no function {name!r}; entry points: "
                    f"{sorted(self._addresses)}"
                )
            self._addresses[name] = addr
        return addr

    def function(self, name: str, argtypes, restype=None):
        """A ctypes callable for ``name`` that keeps this module alive."""
        return ctypes_function(self.address(name), argtypes, restype, keepalive=self)

    def close(self) -> None:
        """Free the machine code (now, or once ``llvm_lock`` is free); addresses from this
        module must no longer be called."""
        engine, self._engine = self._engine, None
        self._addresses.clear()
        if engine is not None:
            _retired.append(engine)
            _dispose_retired()

    def __del__(self, _is_finalizing=sys.is_finalizing):
        # at interpreter exit the binding's own globals (this module's ``sys`` included) may
        # already be gone: leave the memory. The default argument keeps the check reachable.
        if _is_finalizing():
            return
        if getattr(self, "_engine", None) is not None and llvm_lock is not None:
            self.close()


#: engines of closed modules not freed yet: a module collected while another thread holds
#: ``llvm_lock`` must not wait for it (the collector may run on one of the compile threads that
#: the lock's holder is waiting for: a deadlock), so it leaves its engine here for the next
#: thread that takes the lock (list.append and pop are atomic)
_retired: list = []


def _dispose_retired() -> None:
    """Free the retired engines if ``llvm_lock`` is free (or held by this thread)."""
    if not llvm_lock.acquire(blocking=False):
        return
    try:
        while _retired:
            llvm_capi.dispose_engine(_retired.pop())
    finally:
        llvm_lock.release()


def ctypes_function(address: int, argtypes, restype=None, *, keepalive=None):
    """``CFUNCTYPE(restype, *argtypes)(address)``: the call releases the GIL. ``keepalive`` (e.g.
    the CompiledModule) is referenced from the function object so the code outlives it."""
    fn = ctypes.CFUNCTYPE(restype, *argtypes)(address)
    fn._fungrad_keepalive = keepalive
    return fn


def _pipeline_options(opt_level: int, passes: bool = True) -> dict[str, object]:
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"compile_module: opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    vectorize = opt_level >= 2  # O1 is the cheap pipeline for small modules: no vectorizers
    # codegen at opt 1 or 2 costs the same as at 3 (measured); only opt 0 (FastISel) is cheaper
    options = {
        "speed_level": opt_level,
        "loop_vectorization": vectorize,
        "slp_vectorization": vectorize,
        "codegen_opt": 0 if opt_level == 0 else 3,
    }
    if not passes:  # (only then: the cache keys of other modules stay as they were)
        options["passes"] = False
        options["llvm_options"] = sorted(LLVM_OPTIONS)  # (see _compile_objects)
    return options


@dataclass(frozen=True)
class Part:
    """One module of :func:`compile_modules`: IR text and how to compile it (``opt_level`` and
    ``passes`` as in :func:`compile_module`)."""

    ir_text: str
    opt_level: int = 3
    passes: bool = True


def compile_module(
    ir_text: str,
    entry_points,
    *,
    name: str,
    opt_level: int = 3,
    passes: bool = True,
    debug_info: bool = False,
    library: bool = False,
) -> CompiledModule:
    """Compile LLVM IR text for this CPU and return its native code.

    Args:
      ir_text: a whole module; its target triple and data layout are set to the host's.
      entry_points: names of the functions to resolve now (each must be defined in the module).
      name: module name, used in errors and stats.
      opt_level: 3 (default) runs the O3 pipeline with loop and SLP vectorization; 1 a cheaper
        O1 pipeline without vectorizers (small modules); 0 no optimisation and the fast
        instruction selector and register allocator (run-once code: ~0.15 ms of codegen per
        function instead of ~1.4 ms for a small loop).
      passes: False skips the IR optimiser, leaving only code generation at ``opt_level``:
        for hand-vectorised IR written in SSA form (gemm.py's library), which the passes
        cannot improve and which they would take several times longer to optimise than to
        compile.
      debug_info: keep the optimised IR and the assembly on the result (``optimized_ir``,
        ``assembly``); this bypasses the cache lookup, since a cached object has neither.
      library: the module is one of fungrad's own libraries (fixed code, not a program's):
        it stays cached when only programs' caching is off (cache.py).

    Returns:
      A :class:`CompiledModule`; ``.address(entry)`` gives the function pointers.

    Raises:
      CompileError: LLVM failed at some step; nothing is cached.
    """
    return compile_modules(
        [Part(ir_text, opt_level, passes)],
        entry_points,
        name=name,
        debug_info=debug_info,
        library=library,
    )


def compile_modules(
    parts, entry_points, *, name: str, debug_info: bool = False, library: bool = False
) -> CompiledModule:
    """Compile several modules, each at its own level, into one engine where they call each
    other's external functions (a program's glue at ``opt_level=0`` beside its kernels at 3:
    see llvm.py). Each part is cached on its own; arguments, result and errors are as for
    :func:`compile_module`, and ``stats`` sums the parts."""
    if isinstance(entry_points, str):
        raise TypeError(
            f"compile_module: entry_points must be a sequence of names, got the "
            f"string {entry_points!r}; write [{entry_points!r}]"
        )
    entry_points = tuple(entry_points)
    parts = list(parts)
    pipelines = [_pipeline_options(p.opt_level, p.passes) for p in parts]
    h = host()
    store = cache.default_cache(library)
    keys = [None] * len(parts)
    if store is not None:
        keys = [
            cache.cache_key(p.ir_text, triple=h.triple, cpu=h.cpu, features=h.features, pipeline=pl)
            for p, pl in zip(parts, pipelines)
        ]
    built: list = [None] * len(parts)  # (object, meta, stats, optimized IR, assembly)
    for attempt in (0, 1):
        pending = []
        for i in range(len(parts)):
            if built[i] is not None:
                continue
            if keys[i] is not None and not debug_info and attempt == 0:
                t0 = time.perf_counter()
                entry = store.get(keys[i])
                if entry is not None:
                    stats = CompileStats(cache_hit=True, load_s=time.perf_counter() - t0)
                    built[i] = (entry[0], entry[1], stats, None, None)
                    continue
            pending.append(i)
        jobs = [(parts[i].ir_text, name, pipelines[i], debug_info) for i in pending]
        for i, result in zip(pending, _compile_objects(jobs)):
            built[i] = result
        _check_links(parts, name, entry_points, [b[1] for b in built])
        t0 = time.perf_counter()
        try:
            engine, addresses = _load(entry_points, [b[0] for b in built])
            break
        except RuntimeError as e:
            cached = [i for i, b in enumerate(built) if b[2].cache_hit]
            if attempt or not cached:
                raise _error("\n".join(p.ir_text for p in parts), name, "load", str(e)) from None
            for i in cached:  # an unloadable cache entry: rebuild it
                store.invalidate(keys[i])
                built[i] = None
    total = CompileStats(cache_hit=all(b[2].cache_hit for b in built))
    for obj, _meta, stats, _, _ in built:
        for k in ("parse_s", "optimize_s", "codegen_s", "load_s"):
            setattr(total, k, getattr(total, k) + getattr(stats, k))
        total.object_bytes += len(obj)
        _record(stats)
    total.load_s += time.perf_counter() - t0
    with llvm_lock:
        _totals["load_s"] += time.perf_counter() - t0
    module = CompiledModule(name, engine, addresses, total)
    if debug_info:
        module.optimized_ir = "\n".join(b[3] for b in built)
        module.assembly = "\n".join(b[4] for b in built)
    if store is not None:
        for key, (obj, meta, stats, _, _) in zip(keys, built):
            if not stats.cache_hit:
                store.put(key, obj, meta)
    return module


#: target machines (opt 3, opt 0) of the compile threads, one pair per thread, made on first
#: use and kept (a TargetMachine is used by one thread at a time)
_thread_machines: list[tuple] = []


def _compile_objects(jobs) -> list:
    """Compile ``(ir_text, name, pipeline, debug_info)`` jobs to ``(object, meta, stats,
    optimised IR, assembly)``, in order. With several jobs and several threads allowed
    (``threads.num_threads()``: ``FUNGRAD_NUM_THREADS`` or the CPU affinity), each job runs on
    its own thread, in a private LLVM context with its own target machines: LLVM's passes and
    code generation are most of a first call, and independent modules compile in parallel
    (llvm.py splits a program's optimised kernels into one module per thread: the
    transformer step's 21 kernels 230 -> 118 ms on two cores). One thread compiles in LLVM's
    global context, as before. ``llvm_lock`` is held throughout, with ``LLVM_OPTIONS`` set when
    every job is codegen-only."""
    from fungrad.lowering.cpu import threads

    h = host()
    n = min(len(jobs), threads.num_threads())
    # (global options: only a batch of codegen-only modules takes them)
    options = LLVM_OPTIONS if all(not job[2].get("passes", True) for job in jobs) else {}
    with llvm_lock:
        _set_options(options)
        try:
            if n <= 1:
                return [
                    _compile_object(*job, h.target_machine, h.target_machine_o0) for job in jobs
                ]
            while len(_thread_machines) < n:
                _thread_machines.append(
                    (
                        h.new_target_machine(),
                        llvm_capi.create_target_machine(h.triple, h.cpu, h.features, 0),
                    )
                )
            free = queue.SimpleQueue()
            for pair in _thread_machines[:n]:
                free.put(pair)

            def run(job):
                tm3, tm0 = free.get()
                try:
                    return _compile_object(*job, tm3, tm0, llvm_capi.create_context())
                finally:
                    free.put((tm3, tm0))

            with concurrent.futures.ThreadPoolExecutor(n, "fungrad-llvm") as pool:
                return list(pool.map(run, jobs))
        finally:
            _set_options(options.values())
            _dispose_retired()  # (modules collected on the compile threads meanwhile)


def _compile_object(ir_text, name, pipeline, debug_info, tm3, tm0, context=None):
    """parse -> verify -> optimise -> emit_object with the target machines ``tm3`` (opt 3) and
    ``tm0`` (FastISel), in ``context`` (freed here) or LLVM's global one (the caller holds
    ``llvm_lock``); returns the object, its meta (functions it defines, externals it
    declares), its :class:`CompileStats`, and the optimised IR and assembly when
    ``debug_info``."""
    capi = llvm_capi
    h = host()
    stats = CompileStats()
    t0 = time.perf_counter()
    step = "parse"
    mod = None
    try:
        mod = capi.parse_module(ir_text, context)
        step = "verify"
        capi.verify_module(mod)
        capi.set_module_target(mod, name, h.triple, h.data_layout)
        listed = capi.module_functions(mod)
        local = (capi.LINKAGE_INTERNAL, capi.LINKAGE_PRIVATE)
        functions = [f for f, decl, linkage in listed if not decl and linkage not in local]
        externals = [f for f, decl, _ in listed if decl and not f.startswith("llvm.")]
        t1 = time.perf_counter()
        step = "optimize"
        if pipeline.get("passes", True):
            capi.optimize(
                mod,
                tm3,
                pipeline["speed_level"],
                pipeline["loop_vectorization"],
                pipeline["slp_vectorization"],
            )
        t2 = time.perf_counter()
        step = "codegen"
        tm = tm0 if pipeline["codegen_opt"] == 0 else tm3
        obj = capi.emit(tm, mod)
        t3 = time.perf_counter()
        optimized_ir = capi.module_text(mod) if debug_info else None
        assembly = capi.emit(tm, mod, object_file=False).decode() if debug_info else None
    except RuntimeError as e:
        if isinstance(e, CompileError):
            raise
        raise _error(ir_text, name, step, str(e)) from None
    finally:
        if mod is not None:
            capi.dispose_module(mod)
        if context is not None:
            capi.dispose_context(context)
    stats.parse_s, stats.optimize_s, stats.codegen_s = t1 - t0, t2 - t1, t3 - t2
    stats.object_bytes = len(obj)
    meta = {"name": name, "functions": functions, "externals": externals}
    return obj, meta, stats, optimized_ir, assembly


def _set_options(options) -> None:
    for option in options:
        llvm_capi.set_option(option)


def _check_links(parts, name, entry_points, metas):
    """Every entry point is defined by some part; every external a part declares is defined by
    another part or resolvable in this process."""
    defined = {f for m in metas for f in m.get("functions", [])}
    _check_entry_points("\n".join(p.ir_text for p in parts), name, entry_points, defined)
    for part, meta in zip(parts, metas):
        _check_externals(
            part.ir_text, name, [f for f in meta.get("externals", []) if f not in defined]
        )


def _check_entry_points(ir_text, name, entry_points, functions):
    missing = [e for e in entry_points if e not in functions]
    if missing:
        raise _error(
            ir_text,
            name,
            "link",
            f"entry point(s) {missing} are not defined as external functions in the module",
        )


def _check_externals(ir_text, name, externals):
    """Refuse to load code that calls a symbol this process cannot resolve: MCJIT would link it
    to address 0 and the first call would crash the interpreter."""
    if "fg_parallel_for" in externals:  # the native thread pool: compiled on first use
        from fungrad.lowering.cpu import runtime

        runtime.ensure_registered()
    if "fg_matmul_f32" in externals:  # the matmul library: likewise
        from fungrad.lowering.cpu import gemm as matmul

        matmul.ensure_library()
    with llvm_lock:
        missing = [s for s in externals if llvm_capi.address_of_symbol(s) is None]
    if missing:
        why = ""
        if any(s in ("fg_sgemm", "fg_dgemm") for s in missing):
            why = f" (BLAS unavailable: {blas.find_blas().reason})"
        raise _error(ir_text, name, "link", f"unresolved external symbol(s) {missing}{why}")


def _load(entry_points, objects) -> tuple[object, dict[str, int]]:
    """A fresh MCJIT engine holding the object files (linked to each other, then finalised) and
    the entry points' addresses; RuntimeError (LLVM's message) if they do not load."""
    capi = llvm_capi
    h = host()
    with llvm_lock:
        engine = None
        try:
            engine = capi.create_engine(
                capi.parse_module(f'target triple = "{h.triple}"'), h.new_target_machine()
            )
            for obj in objects:
                capi.engine_add_object(engine, obj)
            capi.finalize_engine(engine)
            addresses = {e: capi.function_address(engine, e) for e in entry_points}
        except RuntimeError:
            if engine is not None:
                capi.dispose_engine(engine)
            raise
        missing = [e for e, a in addresses.items() if not a]
        if missing:
            capi.dispose_engine(engine)
            raise RuntimeError(f"entry point(s) {missing} not in the object file")
    return engine, addresses


def _error(ir_text: str, name: str, step: str, message: str) -> CompileError:
    """A CompileError for ``step``, with the IR text saved to a fresh temp file."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60] or "module"
    fd, path = tempfile.mkstemp(prefix=f"fungrad-{safe}-", suffix=".ll")
    with os.fdopen(fd, "w") as f:
        f.write(ir_text)
    return CompileError(name, step, message.strip(), path)
