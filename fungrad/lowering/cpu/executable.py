"""A compiled jaxpr: native code plus what a call needs (constants, output specs, scratch).

``Executable.call`` is the hot path of every jitted call: it allocates the outputs, takes a
scratch area from a free list (so concurrent calls from several threads never share one) and
makes one ctypes call; the entry point reads the data pointers from the argument tuple itself
(``abi.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import re
import sys
import threading
import time

import numpy as np

from fungrad import core
from fungrad.array import Array, is_concrete_array
from fungrad.lowering import fusion, host_callback
from fungrad.lowering import profile as step_profile
from fungrad.lowering.cpu import abi, host_call, llvm, mpi, threads
from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu.policy import CpuPolicy

ENTRY = "fg_entry"
#: outputs at least this large are recycled once no one references them (see _OutputPool)
POOL_MIN_BYTES = 1 << 18
_new = object.__new__  # an Array's slots set directly: call() builds one per output


class _OutputPool:
    """Recycles the memory of one large output between calls.

    A fresh ``np.empty`` of a few megabytes comes from ``mmap``: every call then pays a page
    fault per 4 KiB on first write (0.7 ms for the 1.6 MB weight update of the MLP step). The
    pool keeps a few output arrays; one whose reference count shows that only the pool holds
    it (its Array, and every view of it, are gone) is handed out again. The check and the
    hand-out happen under a lock, so concurrent calls never get the same array."""

    __slots__ = ("shape", "dtype", "arrays", "lock")
    KEEP = 3

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.arrays, self.lock = shape, dtype, [], threading.Lock()

    def take(self) -> np.ndarray:
        with self.lock:
            for a in self.arrays:
                if sys.getrefcount(a) == 3:  # the list, the loop variable, the argument
                    return a
            a = np.empty(self.shape, self.dtype)
            if len(self.arrays) < self.KEEP:
                self.arrays.append(a)
            return a


_compile_lock = threading.RLock()  # the planner's interning tables and LLVM are not reentrant


def _blame(err: cpu.CompileError, program: fusion.Program) -> cpu.CompileError:
    """``err`` naming the kernel LLVM failed in and the operations fused into it, when its
    message points at one: a line of the IR text (parse errors) or a function's name."""
    kernels = {}
    stack = list(program.steps)
    while stack:  # the kernels of the program and of its control flow's sub-programs
        step = stack.pop()
        if isinstance(step, fusion.Kernel):
            kernels[step.name] = step
        elif hasattr(step, "__dict__"):
            for v in vars(step).values():
                if isinstance(v, list):
                    stack.extend(x for x in v if not isinstance(x, list))
                    stack.extend(y for x in v if isinstance(x, list) for y in x)
    names = []
    line = re.search(r"<string>:(\d+):", err.llvm_message)
    if line:
        try:
            with open(err.ir_path) as f:
                before = f.read().splitlines()[: int(line.group(1))]
            names = [
                m.group(1)
                for ln in reversed(before)
                if (m := re.match(r"define [^@]*@([-\w.$]+)\(", ln))
            ][:1]
        except OSError:
            pass
    names += re.findall(r"[-\w$]+", err.llvm_message)  # a function LLVM's message names
    kern = next(
        (
            kernels[n.removesuffix(".par")]
            for n in names  # a trampoline: its kernel
            if n.removesuffix(".par") in kernels
        ),
        None,
    )
    if kern is None:
        return err
    ops, seen, stack = [], set(), [st.value for st in kern.stores]
    while stack:  # the kernel ops of its stored values (not of their load indices)
        e = stack.pop()
        if id(e) not in seen:
            seen.add(id(e))
            if e.op not in ("load", "const", "idx"):
                ops.append(e.op)
                stack.extend(reversed(e.args))
    return cpu.CompileError(
        err.module_name,
        err.step,
        err.llvm_message,
        err.ir_path,
        where=f"kernel {kern.name} (the result of {', '.join(kern.origins) or 'a store'}; "
        f"computes {', '.join(dict.fromkeys(ops)) or 'copies'}: jit(f).lower(...)"
        f".as_text() shows the fusion plan)",
    )


class Executable:
    """Native code for one closed jaxpr on the CPU (see :func:`fungrad.lowering.compile_jaxpr`).

    Attributes: ``in_avals``, ``out_avals``, ``program`` (the fusion plan), ``ir`` (LLVM IR
    text), ``jaxpr`` (the optimised jaxpr), ``compile_time_s`` and ``phase_times`` (seconds
    spent optimising the jaxpr, planning the fusion, rendering LLVM IR, compiling and loading it).
    """

    def __init__(self, closed: core.ClosedJaxpr, name: str = "main", profile: bool = False):
        from fungrad.ir import passes

        t0 = time.perf_counter()
        self.name = name
        self.in_avals = list(closed.in_avals)
        self.out_avals = list(closed.out_avals)
        with _compile_lock:
            t1 = time.perf_counter()
            self.jaxpr = passes.optimize(closed)
            t2 = time.perf_counter()
            slots = None
            if profile:  # fungrad.profile(): a build that times each step
                self.program, self.profile_info = step_profile.plan_covered(
                    self.jaxpr, ENTRY, CpuPolicy()
                )
                self.profile_info = dataclasses.replace(self.profile_info, name=name)
                table = step_profile.step_table(self.program.steps)
                slots = {id(step): i for i, (step, _) in enumerate(table)}
            else:
                self.program = fusion.plan(self.jaxpr, ENTRY, policy=CpuPolicy())
            t3 = time.perf_counter()
            llvm.compile_ahead(self.program.steps)
            abi.layout()
            parts = llvm.render(self.program, slots)
            t4 = time.perf_counter()
            # one text, each module under a comment saying how it is compiled
            self.ir = "\n".join(
                f"; module {i}: "
                + ("LLVM O3" if p.passes else "glue: no passes, O0 codegen")
                + f"\n{p.ir_text}"
                for i, p in enumerate(parts)
            )
            try:
                self.module = cpu.compile_modules(parts, [ENTRY], name=name)
            except cpu.CompileError as e:
                raise _blame(e, self.program) from None
            t5 = time.perf_counter()
        # seconds per compile phase (config.update("log_compiles", True) logs them)
        self.phase_times = {
            "optimize": t2 - t1,
            "plan": t3 - t2,
            "render": t4 - t3,
            "compile": t5 - t4,
        }
        # what "compile" spent: LLVM's passes, code generation, loading, and the rest (the
        # process's first compile also builds the runtime libraries it links to)
        st = self.module.stats
        self.compile_detail = {
            "llvm_passes": st.parse_s + st.optimize_s,
            "codegen": st.codegen_s,
            "load": st.load_s,
            "setup": max(0.0, (t5 - t4) - st.total_s),
            "cache_hit": st.cache_hit,
        }
        # the thread budget (FUNGRAD_NUM_THREADS, CPU affinity) is read once per executable; the
        # native pool is compiled only when a parallel step may use it (llvm.parallel_for)
        self._nthreads = threads.num_threads()
        if self._nthreads > 1 and llvm.POOL_SYMBOL in self.ir:
            llvm.enable_thread_pool()
        self._fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.py_object, ctypes.c_int64)(
            self.module.address(ENTRY)
        )
        self._consts = tuple(c for _, c in self.program.consts)
        self._outs = tuple((a.shape, a.dtype, a.weak_type) for a in self.out_avals)
        self._scratch_bytes = self.program.scratch_bytes
        self._scratch: list[np.ndarray] = []
        self._weak = tuple(a.weak_type for a in self.out_avals)
        self._pools = tuple(
            _OutputPool(a.shape, a.dtype) if a.size * a.dtype.itemsize >= POOL_MIN_BYTES else None
            for a in self.out_avals
        )
        # The outputs' avals as the interned objects concrete Arrays carry (core.interned_aval):
        # a jitted function fed its own outputs (a training loop) then finds its cache key by
        # identity, without a Python-level ShapedArray.__eq__ per leaf.
        self._out_avals = tuple(
            core.interned_aval(a.shape, a.dtype, a.weak_type) for a in self.out_avals
        )
        self._aval0 = self._out_avals[0] if self._out_avals else None
        self._hosts = host_callback.host_steps(self.program.steps)
        if self._hosts:  # callbacks: the call registers itself for the trampoline
            self.call = self._call_host
        elif (
            len(self._outs) == 1
            and not self._consts
            and not self._scratch_bytes
            and mpi.STATUS_SYMBOL not in self.ir  # (its retry would repeat a collective)
        ):
            self.call = self._call_simple  # the common small case, without the general packing
        if profile:
            self.call = self._call_profiled
        self.compile_time_s = time.perf_counter() - t0

    def _call_simple(self, args) -> list[Array]:
        shape, dtype, weak = self._outs[0]
        pool = self._pools[0]
        out = np.empty(shape, dtype) if pool is None else pool.take()
        if len(args) == 1:
            a = args[0]
            packed = (a._value if is_concrete_array(a) else a, out)
        else:
            packed = (*[a._value if is_concrete_array(a) else a for a in args], out)
        if self._fn(packed, self._nthreads):
            return Executable.call(self, args)  # a non-contiguous input: the general path
        r = Array(out, weak)
        r._aval = self._aval0  # known: chained calls (y = f(y)) skip rebuilding it
        return [r]

    def call(self, args) -> list[Array]:
        """Run on ``args`` (Arrays or numpy values with exactly ``in_avals``, checked by the
        caller); returns the outputs as Arrays."""
        values = [a._value if is_concrete_array(a) else a for a in args]
        outs = [
            np.empty(s, d) if pool is None else pool.take()
            for (s, d, _), pool in zip(self._outs, self._pools)
        ]
        if self._scratch_bytes:
            try:
                scratch = self._scratch.pop()
            except IndexError:
                scratch = np.empty(self._scratch_bytes, np.uint8)
            packed = (*values, *self._consts, *outs, scratch)
        else:
            scratch = None
            packed = (*values, *self._consts, *outs)
        status = self._fn(packed, self._nthreads)
        while status > 0:  # input status-1 is not a contiguous aligned array: pass a copy
            values[status - 1] = np.ascontiguousarray(values[status - 1])
            packed = (*values, *packed[len(values) :])
            status = self._fn(packed, self._nthreads)
        if status < 0:  # a host callback raised or an MPI call failed (no later step ran)
            if scratch is not None:
                self._scratch.append(scratch)
            if status == mpi.FAILED:
                raise mpi.failure()
            host_call.raise_failure(host_call.current())
        if scratch is not None:
            self._scratch.append(scratch)
        res = []
        for o, w, a in zip(outs, self._weak, self._out_avals):
            o.setflags(write=False)  # what Array() does, less its checks: a fresh, owned array
            r = _new(Array)
            r._value, r.weak_type, r._aval = o, w, a
            res.append(r)
        return res

    def _call_host(self, args) -> list[Array]:
        """``call`` of a program with host callbacks (``host_call``): the trampoline
        finds this call's steps on the thread's stack of running calls."""
        with host_call.running(self._hosts):
            return Executable.call(self, args)

    def _call_profiled(self, args) -> list[Array]:
        """``call`` of a profiled build: the timing words go after the other arguments, and
        the open profiles get this call's times (``lowering/profile.py``)."""
        info = self.profile_info
        values = [a._value if is_concrete_array(a) else a for a in args]
        outs = [
            np.empty(s, d) if pool is None else pool.take()
            for (s, d, _), pool in zip(self._outs, self._pools)
        ]
        timing = np.zeros(2 * len(info.steps), np.int64)
        # the scratch area from the free list, as ``call`` does: a fresh one faults its pages
        # in on first write, time that would land on whichever kernels touch them first
        scratch = ()
        if self._scratch_bytes:
            try:
                scratch = (self._scratch.pop(),)
            except IndexError:
                scratch = (np.empty(self._scratch_bytes, np.uint8),)
        packed = (*values, *self._consts, *outs, *scratch, timing)
        t0 = time.perf_counter()
        with host_call.running(self._hosts) if self._hosts else contextlib.nullcontext():
            status = self._fn(packed, self._nthreads)
            while status > 0:  # input status-1 is not a contiguous aligned array
                values[status - 1] = np.ascontiguousarray(values[status - 1])
                packed = (*values, *packed[len(values) :])
                status = self._fn(packed, self._nthreads)
            wall = time.perf_counter() - t0
            self._scratch.extend(scratch)
            step_profile.report(info, timing[0::2] * 1e-9, timing[1::2], wall)
            if status == mpi.FAILED:
                raise mpi.failure()
            if status < 0:
                host_call.raise_failure(host_call.current())
        res = []
        for o, w, a in zip(outs, self._weak, self._out_avals):
            o.setflags(write=False)
            r = _new(Array)
            r._value, r.weak_type, r._aval = o, w, a
            res.append(r)
        return res

    def as_text(self) -> str:
        """The optimised jaxpr, the fusion plan and the LLVM IR."""
        return (
            f"# optimised jaxpr\n{self.jaxpr}\n\n# {self.program.describe()}\n\n"
            f"# LLVM IR\n{self.ir}"
        )
