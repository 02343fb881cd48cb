"""The LLVM renderer: a :class:`~fungrad.lowering.fusion.Program` becomes LLVM IR modules.

A program has one entry point, ``i32 @<name>(ptr %args, i64 %nthreads)``. ``%args`` is a
Python tuple object (``(inputs..., consts..., outputs..., scratch)``, numpy arrays or numpy
scalars) whose data pointers the entry reads itself (``abi.py`` measured the object layout at
start-up), so a jitted call is one ctypes call with no per-argument pointer extraction in
Python. The entry returns 0, or ``i + 1`` when input ``i`` is not a C-contiguous aligned array
(the caller then passes a contiguous copy).

Each kernel becomes an internal function looping over its index space (``kernel.py``); large
ones are split across threads (:meth:`ModuleWriter.parallel_for`). The other steps render
through the step table ``STEP_RENDERERS`` (control flow, sort, host calls, products).

LLVM's full pipeline costs ~3 ms per loop, even a trivial one, so not every function gets it.
The entry point, the trampolines and the kernels that do little work (``COLD_COST``,
``COLD_SHARE``) are *glue*: when a program has such small kernels, the glue is a second module
compiled without IR passes and with FastISel (~0.15 ms per function), linked to the first in
one engine (``cpu.compile_modules``). Kernels whose bodies are the same up to the names of their
values are defined once.
"""

from __future__ import annotations

import ctypes
import math
import re
import threading
from dataclasses import dataclass

import numpy as np

from fungrad.lowering.cpu import (
    abi,
    control_flow,
    fft_step,
    gemm_step,
    host_call,
    lapack_decomp_step,
    lapack_schur_step,
    lapack_step,
    llvm_capi,
    mpi,
    sort,
    threads,
)
from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu import gemm as matmul
from fungrad.lowering.cpu import profile as step_profile
from fungrad.lowering.cpu.kernel import KernelWriter
from fungrad.lowering.cpu.llvm_ops import OpEmitter
from fungrad.lowering.fusion import Gemm, Kernel, Program, _walk
from fungrad.lowering.math import llvm as llvm_math
from fungrad.lowering.offsets import hoist_constant_offsets
from fungrad.lowering.profile import step_table
from fungrad.lowering.render import StepRenderers, kernel_record
from fungrad.lowering.steps import (
    CholeskyStep,
    CollectiveStep,
    CondStep,
    EighStep,
    FftStep,
    GeevStep,
    GeqrfStep,
    HessenbergStep,
    HostCallStep,
    LuStep,
    QRStep,
    ScanStep,
    SchurStep,
    SortStep,
    SVDStep,
    TriangularSolveStep,
    WhileStep,
)

#: loops known to run fewer times than this are not vectorised (``ModuleWriter.loop_md``)
SHORT_LOOP = 16
#: vector accumulators of a float sum's innermost loop: LLVM chose one for softmax's row sum, a
#: chain of dependent adds (3-4 cycles each) where the loads allow one or two per cycle
INTERLEAVE_SUMS = 4
#: attributes of functions that only pass their arguments on (trampolines, the entry point
#: without control flow): no IR passes and FastISel, which cost a fraction of LLVM's full
#: per-function pipeline (~1 ms per function, even an empty one: measured)
_GLUE = "optnone noinline"


class ModuleWriter:
    """Renders a whole :class:`Program` (see the module docstring)."""

    def __init__(self, prog: Program, profile: dict[int, int] | None = None):
        self.prog = prog
        # profiled builds (fungrad.profile()): step id -> its timing slot (cpu/profile.py)
        self.profile = profile
        self.ops = OpEmitter(self)
        self.math: set[tuple[str, str]] = set()  # (function, float dtype name)
        self.helpers: set[str] = set()  # llvm_math's helper symbols called (llvm_math.DIVIDE)
        self.externals: dict[str, str] = {}  # symbol -> declare line
        self.functions: list[Function] = []  # compiled with LLVM's full pipeline
        self.glue: list[Function] = []  # compiled without optimisation (see _cold_kernels)
        self.cold: set[int] = set()  # ids of the kernels among the glue
        # Kernel.cost by kernel id: a walk over every expression, asked for by the tiering
        # (_cold_kernels, _work) and the thread split; computed once per kernel
        self.costs: dict[int, int] = {}
        # kernels defined, by a cheap outline of their structure: [[kernel, buffer ids, its
        # render.kernel_record or None until compared]] (see _define)
        self.kernels: dict[tuple, list[list]] = {}
        self.trampolines: set[str] = set()
        self.n_loops = 0
        self.short_loops: set[int] = set()  # metadata ids of loops run fewer than SHORT_LOOP
        self.interleaved: set[int] = set()  # metadata ids of sum loops (INTERLEAVE_SUMS)
        self.serial_for = False  # @fg_serial_for added (parallel_for)
        self.max_ctx = 0  # the most pointers a parallel_for passes (the entry's %pf.ctx)
        self.input_helper = False  # @fg_input_data added (_input_pointer)
        self.large_libraries: set[str] = set()  # llvm_math's large-argument functions called

    def loop_md(self, trip: int | None = None, interleave: bool = False) -> str:
        """Loop metadata for a back edge: no unrolling. Fully unrolling a short inner loop
        (say 32 columns) made LLVM vectorise the outer loop with gathers and scatters, 20x
        slower; the vectoriser still interleaves the loops it vectorises. A loop known to run
        fewer than ``SHORT_LOOP`` times (``trip``) is not vectorised either: its vector body
        would run at most once beside a scalar remainder, two copies of the body (with any
        inlined exp or log) for LLVM to optimise and compile; the MLP step's ten-class
        softmax loops cost 17 ms of its ~150 ms module compile that way (measured)."""
        self.n_loops += 1
        if trip is not None and trip < SHORT_LOOP:
            self.short_loops.add(self.n_loops + 1)
        elif interleave:
            self.interleaved.add(self.n_loops + 1)
        return f", !llvm.loop !{self.n_loops + 1}"

    def need_math(self, fn: str, dtype: np.dtype) -> str:
        self.math.add((fn, dtype.name))
        return llvm_math.math_symbol(fn, dtype)

    def declare(self, symbol: str, line: str) -> None:
        self.externals[symbol] = line

    def render(self) -> list[cpu.Part]:
        """The program as one or two modules: kernels worth LLVM's full pipeline, and glue
        (the entry point, trampolines, small kernels) compiled without optimisation."""
        prog = self.prog
        self.cold = _cold_kernels(prog.steps, self.costs)
        entry: list[str] = []
        lay = abi.layout()
        slots = [*prog.inputs, *(b for b, _ in prog.consts), *prog.outputs]
        ptr = {}
        for i, b in enumerate(slots):
            obj, data = f"%obj{i}", f"%buf{b.id}"
            entry.append(
                f"  %slot{i} = getelementptr inbounds i8, ptr %args, i64 {lay.tuple_items + 8 * i}"
            )
            entry.append(f"  {obj} = load ptr, ptr %slot{i}")
            if b.kind == "input":
                entry.extend(self._input_pointer(i, obj, data))
            else:
                entry.append(
                    f"  %dp{i} = getelementptr inbounds i8, ptr {obj}, i64 {lay.array_data}"
                )
                entry.append(f"  {data} = load ptr, ptr %dp{i}")
            ptr[b.id] = data
        if prog.temps:
            i = len(slots)
            entry.append(
                f"  %slot{i} = getelementptr inbounds i8, ptr %args, i64 {lay.tuple_items + 8 * i}"
            )
            entry.append(f"  %scratchobj = load ptr, ptr %slot{i}")
            entry.append(
                f"  %sp = getelementptr inbounds i8, ptr %scratchobj, i64 {lay.array_data}"
            )
            entry.append("  %scratch = load ptr, ptr %sp")
            for b in prog.temps:
                entry.append(
                    f"  %buf{b.id} = getelementptr inbounds i8, ptr %scratch, i64 {b.index}"
                )
                ptr[b.id] = f"%buf{b.id}"
        if self.profile is not None:  # the timing words: the argument after the scratch area
            i = len(slots) + bool(prog.temps)
            entry.append(
                f"  %slot{i} = getelementptr inbounds i8, ptr %args, i64 {lay.tuple_items + 8 * i}"
            )
            entry.append(f"  %profobj = load ptr, ptr %slot{i}")
            entry.append(
                f"  %profp = getelementptr inbounds i8, ptr %profobj, i64 {lay.array_data}"
            )
            entry.append("  %prof = load ptr, ptr %profp")
            self.declare(
                step_profile.CLOCK_SYMBOL,
                f"declare i32 @{step_profile.CLOCK_SYMBOL}(i32, ptr) nounwind",
            )
            self.add_function(step_profile.helpers(), step_profile.HELPERS, glue=True)
        entry.extend(self.render_steps(prog.steps, ptr))
        # Glue (read the arguments, call the kernels) is not worth optimising, nor are the loops
        # of control flow that call kernels a few thousand times (see ENTRY_LOOP_TRIPS)
        hot_entry = _entry_trips(prog.steps) > ENTRY_LOOP_TRIPS
        attrs = "" if hot_entry else f" {_GLUE}"
        head = (
            f"define i32 @{prog.name}(ptr noalias %args, i64 %nthreads){attrs} {{\nentry:\n"
            + "\n".join([*self._entry_prologue(), *entry])
            + "\n  ret i32 0\n}\n"
        )
        if self.input_helper:
            # (defines: the optimised functions may be split over several modules, and the
            # entry need not land in the helper's)
            self.add_function(
                _input_data_helper(abi.layout(), attrs),
                (("fg_input_data", "i1", "ptr, ptr"),),
                glue=not hot_entry,
            )
        self.add_function(head, glue=not hot_entry)  # (external: nothing calls it)
        decls = "\n".join(sorted(self.externals.values()))
        novec = f"!{self.n_loops + 2}"  # the extra property of short loops
        inter = f"!{self.n_loops + 3}"  # ... and of sum loops

        def props(i: int) -> str:
            return (", " + novec) * (i in self.short_loops) + (", " + inter) * (
                i in self.interleaved
            )

        md = "\n".join(
            ['!1 = !{!"llvm.loop.unroll.disable"}']
            + [f"!{i} = distinct !{{!{i}, !1{props(i)}}}" for i in range(2, self.n_loops + 2)]
            + [
                f'{novec} = !{{!"llvm.loop.vectorize.enable", i1 false}}',
                f'{inter} = !{{!"llvm.loop.interleave.count", i32 {INTERLEAVE_SUMS}}}',
            ]
        )
        if self.functions and not self.cold:
            # glue alone in its own module cost more than it saved (~3 ms: the chain, softmax)
            self.functions, self.glue = self.functions + self.glue, []
        modules = [(funcs, 3) for funcs in _split(self.functions, threads.num_threads())]
        modules += [(self.glue, 0)] if self.glue else []
        declared = _link([funcs for funcs, _ in modules]) if len(modules) > 1 else {}
        parts = []
        for funcs, level in modules:
            text = "\n".join([*declared.get(id(funcs), ()), *(f.text for f in funcs)])
            # the math functions this module calls (a module without passes would compile
            # any other one it defined)
            used = [
                (f, d) for f, d in self.math if f"@{llvm_math.math_symbol(f, np.dtype(d))}(" in text
            ]
            helpers = sorted(h for h in self.helpers if f"@{h}(" in text)
            pre = ""
            if used or helpers:
                pre = llvm_math.prelude(
                    sorted({d for _, d in used}),
                    sorted({f for f, _ in used}),
                    declare_intrinsics=False,
                    helpers=helpers,
                    shared_large=True,
                )
                self.large_libraries.update(llvm_math.large_functions_declared(pre))
            ir = "\n".join(x for x in (decls, pre, text, md) if x)
            parts.append(cpu.Part(ir, level, passes=level > 0))
        return parts

    def render_steps(self, steps, ptr: dict[int, str]) -> list[str]:
        """Entry-function lines running ``steps`` in order; ``ptr`` maps a buffer id to the
        LLVM value holding its address (control-flow steps render their bodies with it, each
        body once, binding loop-carried buffers to phi values)."""
        lines: list[str] = []
        for step in steps:
            if self.profile is None:
                lines.extend(STEP_RENDERERS(self, step, ptr))
            else:
                lines.extend(
                    step_profile.step_lines(self.profile[id(step)], STEP_RENDERERS(self, step, ptr))
                )
        return lines

    def _input_pointer(self, i: int, obj: str, data: str) -> list[str]:
        """Data pointer of input ``i``: an ndarray's data, or a numpy scalar's inline value;
        non-contiguous or misaligned arrays make the entry return ``i + 1``. The test is one
        shared function (``@fg_input_data``, :func:`_input_data_helper`) called per input:
        written out for each, it made up half of a large program's entry function, whose
        code generation is most of the glue module's compile time."""
        if not self.input_helper:
            self.input_helper = True
            self.declare("fg_ndarray_type", "@fg_ndarray_type = external global ptr")
        return [
            f"  %in.ok{i} = call i1 @fg_input_data(ptr {obj}, ptr %in.data)",
            f"  br i1 %in.ok{i}, label %got{i}, label %bad{i}",
            f"bad{i}:",
            f"  ret i32 {i + 1}",
            f"got{i}:",
            f"  {data} = load ptr, ptr %in.data",
        ]

    def _entry_prologue(self) -> list[str]:
        """The entry's first lines: the slot :meth:`_input_pointer` reads data pointers
        through, and what every :meth:`parallel_for` shares (the context array, sized for
        the largest, and the pool-or-serial choice, made once per call)."""
        lines = ["  %in.data = alloca ptr"] if self.input_helper else []
        if self.serial_for:
            lines += [
                f"  %pf.ctx = alloca ptr, i64 {max(self.max_ctx, 1)}",
                f"  %pf.pool = load ptr, ptr @{POOL_SYMBOL}",
                "  %pf.nopool = icmp eq ptr %pf.pool, null",
                "  %pf.one = icmp sle i64 %nthreads, 1",
                "  %pf.serial = or i1 %pf.nopool, %pf.one",
                "  %pf.for = select i1 %pf.serial, ptr @fg_serial_for, ptr %pf.pool",
            ]
        return lines

    def _kernel_call(self, kern: Kernel, ptr: dict[int, str]) -> list[str]:
        bufs = {s.buffer.id: s.buffer for s in kern.stores} | {b.id: b for b in kern.reads()}
        # a store written over its operand (Buffer.alias) gets the operand's pointer: one
        # argument, so LLVM sees the load before the store at the same address
        names = {bid: f"%b{bufs[bid].root().id}" for bid in sorted(bufs)}
        first = {}
        for bid, name in names.items():
            first.setdefault(name, bid)
        n = kern.loops[0].extent if kern.loops else 1
        cold = id(kern) in self.cold
        par = not cold and kern.parallel and n >= 2 and _cost(kern, self.costs) >= PARALLEL_COST
        # a constant offset of every access to a buffer goes into the pointer passed, so
        # kernels reading different slices of one buffer are one function (offsets.py)
        body, offsets = kern, {}
        if self.prog.ctx is not None:
            body, offsets = hoist_constant_offsets(self.prog.ctx, kern, names)
        fn = self._define(body, names, cold, whole=not par)
        used = list(first.values())  # one buffer per argument
        lines, pointers = [], []
        for bid in used:
            p = ptr[bid]
            if offsets.get(names[bid]):
                lines.append(
                    f"  %{kern.name}.off{len(lines)} = getelementptr inbounds i8, ptr {p}, "
                    f"i64 {offsets[names[bid]]}"
                )
                p = f"%{kern.name}.off{len(lines) - 1}"
            pointers.append(p)
        args = ", ".join(f"ptr {p}" for p in pointers)
        sep = ", " if args else ""
        # kernels are called ``noinline``: inlined, a kernel's body went through LLVM's
        # function simplification passes twice (~10% more LLVM time on the MLP step of
        # bench/first_call.py, no faster code)
        if not par:
            return [*lines, f"  call void @{fn}({args}{sep}i64 0, i64 {n}) noinline"]
        # large: split the outermost loop across threads; a trampoline unpacks the pointers
        m = len(used)
        if fn not in self.trampolines:
            self.trampolines.add(fn)
            loads = [
                f"  %p{i} = getelementptr inbounds ptr, ptr %ctx, i64 {i}\n"
                f"  %a{i} = load ptr, ptr %p{i}"
                for i in range(m)
            ]
            targs = ", ".join(f"ptr %a{i}" for i in range(m))
            self.add_function(
                f"define internal void @{fn}.par(ptr %ctx, i64 %s, i64 %e) {_GLUE} {{\nentry:\n"
                + "\n".join(loads)
                + ("\n" if loads else "")
                + f"  call void @{fn}({targs}{', ' if targs else ''}i64 %s, i64 %e) noinline\n"
                "  ret void\n}\n",
                ((f"{fn}.par", "void", "ptr, i64, i64"),),
                glue=True,
            )
        return lines + self.parallel_for(f"{fn}.par", pointers, n, kern.name)

    def _define(self, kern: Kernel, names: dict[int, str], cold: bool, whole: bool) -> str:
        """Adds the function of kernel ``kern`` (its buffers ``names``) unless a kernel with
        the same record (``render.kernel_record``: the same code up to the names of its
        values) is there; returns the name of the function to call. The twin is still
        rendered, so the names and loop metadata numbers of what follows do not depend on
        whether a kernel had a twin."""
        text = KernelWriter(self, kern, names).function(whole=whole)
        # the record walks every expression: only kernels of the same outline are compared
        params = list(dict.fromkeys(names.values()))
        outline = (
            cold,
            whole,
            tuple(v.extent for v in kern.loops),
            tuple(params.index(v) for v in names.values()),  # (which buffers share one)
            tuple((st.buffer.dtype, st.combine, st.once, st.mask is None) for st in kern.stores),
        )
        twins = self.kernels.setdefault(outline, [])
        record = kernel_record(kern, list(names)) if twins else None
        for twin in twins:
            if twin[2] is None:
                twin[2] = kernel_record(twin[0], twin[1])
            if twin[2] == record:
                return twin[0].name
        twins.append([kern, list(names), record])
        types = ", ".join(["ptr noalias"] * len(params) + ["i64", "i64"])
        self.add_function(text, ((kern.name, "void", types),), glue=cold)
        return kern.name

    def add_function(
        self, text: str, defines: tuple[tuple[str, str, str], ...] = (), glue: bool = False
    ) -> None:
        """Add the LLVM text of one or more functions to the optimised module (or, ``glue``,
        to the unoptimised one). ``defines``: the ``internal`` functions the text defines that
        the other module may call, each as (name, return type, parameter types)."""
        (self.glue if glue else self.functions).append(Function(text, defines))

    def parallel_for(self, fn: str, pointers: list[str], n: int, tag: str) -> list[str]:
        """Entry lines running ``void @fn(ptr ctx, i64 start, i64 end)`` over ``[0, n)``, ``ctx``
        being ``pointers`` stored on the stack: on the native thread pool (runtime.py) when the
        call has ``%nthreads > 1`` and the pool is compiled (:func:`enable_thread_pool`), else as
        one call ``fn(ctx, 0, n)`` on this thread. The callee is chosen at run time, so the pool
        is compiled only by processes that use threads; ``@fn`` is only ever called through a
        pointer, so LLVM keeps one copy of its body."""
        self.declare("fg_parallel_for_fn", f"@{POOL_SYMBOL} = external global ptr")
        if not self.serial_for:
            self.serial_for = True
            self.add_function(
                _SERIAL_FOR, (("fg_serial_for", "void", "ptr, ptr, i64, i64"),), glue=True
            )
        # The calls are synchronous, so every one reuses the entry's context array and the
        # pool-or-serial choice made at its start (_entry_prologue).
        self.max_ctx = max(self.max_ctx, len(pointers))
        lines = []
        for i, p in enumerate(pointers):
            slot = f"%{tag}.c{i}" if i else "%pf.ctx"
            if i:
                lines.append(f"  {slot} = getelementptr inbounds ptr, ptr %pf.ctx, i64 {i}")
            lines.append(f"  store ptr {p}, ptr {slot}")
        return [*lines, f"  call void %pf.for(ptr @{fn}, ptr %pf.ctx, i64 {n}, i64 %nthreads)"]


STEP_RENDERERS = StepRenderers(
    "LLVM",
    {
        Kernel: lambda mw, step, ptr: mw._kernel_call(step, ptr),
        Gemm: gemm_step.render_gemm,
        CondStep: control_flow.render_cond,
        WhileStep: control_flow.render_while,
        ScanStep: control_flow.render_scan,
        SortStep: sort.render_sort,
        HostCallStep: host_call.render_host_call,
        CholeskyStep: lapack_step.render_cholesky,
        TriangularSolveStep: lapack_step.render_triangular_solve,
        LuStep: lapack_step.render_lu,
        QRStep: lapack_decomp_step.render_qr,
        GeqrfStep: lapack_decomp_step.render_geqrf,
        EighStep: lapack_decomp_step.render_eigh,
        SVDStep: lapack_decomp_step.render_svd,
        GeevStep: lapack_decomp_step.render_geev,
        SchurStep: lapack_schur_step.render_schur,
        HessenbergStep: lapack_schur_step.render_hessenberg,
        FftStep: fft_step.render_fft,
        CollectiveStep: mpi.render_collective,
    },
)
"""How each step kind becomes entry-function lines (``ModuleWriter.render_steps``)."""

#: the entry function is glue (no IR passes, FastISel) while the loops of the control flow it
#: holds (``_entry_trips``) run at most this many iterations per call, and gets the full
#: pipeline beyond. Unoptimised, an iteration of a loop calling two small kernels took ~0.5 ns
#: more (5.5 -> 6.0 ns, a while loop of 1e5 iterations), while the full pipeline cost the
#: entry of the LSTM step (two scans of 64 steps) ~14 ms of its ~120 ms of LLVM time
ENTRY_LOOP_TRIPS = 4096


def _entry_trips(steps) -> float:
    """Iterations the entry function's control-flow loops run per call, nested loops
    multiplied: a scan its length, a while loop unknown (infinity), a cond its largest
    branch; the bodies' steps render inside the entry, so their loops count too."""
    trips = 0.0
    for s in steps:
        if isinstance(s, ScanStep):
            trips += s.length * (1 + _entry_trips(s.body))
        elif isinstance(s, WhileStep):
            return math.inf
        elif isinstance(s, CondStep):
            trips += max((_entry_trips(b) for b in s.branches), default=0.0)
    return trips


POOL_SYMBOL = "fg_parallel_for_fn"
"""Generated code's pointer to the native pool's ``fg_parallel_for``; null until
:func:`enable_thread_pool` compiled the pool, and then always called with ``%nthreads > 1``."""

# ``noinline``: inlined, the indirect call would become direct calls, each inlining its kernel
# a second time (twice the kernel code to optimise and compile)
_SERIAL_FOR = (
    "define internal void @fg_serial_for(ptr %fn, ptr %ctx, i64 %n, i64 %nthreads) "
    f"{_GLUE} {{\nentry:\n  call void %fn(ptr %ctx, i64 0, i64 %n)\n  ret void\n}}\n"
)


def _input_data_helper(lay, attrs: str) -> str:
    """``i1 @fg_input_data(ptr %obj, ptr %out)``: stores the data pointer of the argument
    object ``obj`` (an ndarray's data, or a numpy scalar's inline value) in ``out`` and returns
    true, or returns false for an ndarray that is not C-contiguous and aligned (``lay``: the
    object layout abi.py measured; ``attrs``: the entry function's, glue or optimised)."""
    return f"""define internal i1 @fg_input_data(ptr %obj, ptr %out){attrs} {{
entry:
  %tp = getelementptr inbounds i8, ptr %obj, i64 {lay.object_type}
  %ty = load ptr, ptr %tp
  %nd = load ptr, ptr @fg_ndarray_type
  %isarr = icmp eq ptr %ty, %nd
  br i1 %isarr, label %arr, label %scal
arr:
  %fp = getelementptr inbounds i8, ptr %obj, i64 {lay.array_flags}
  %fl = load i32, ptr %fp
  %m = and i32 %fl, {lay.required_flags}
  %ok = icmp eq i32 %m, {lay.required_flags}
  br i1 %ok, label %arrok, label %bad
bad:
  ret i1 false
arrok:
  %dp = getelementptr inbounds i8, ptr %obj, i64 {lay.array_data}
  %ad = load ptr, ptr %dp
  store ptr %ad, ptr %out
  ret i1 true
scal:
  %sd = getelementptr inbounds i8, ptr %obj, i64 {lay.scalar_data}
  store ptr %sd, ptr %out
  ret i1 true
}}
"""


_pool_cell = ctypes.c_void_p(0)
_pool_cell_registered = False


def register_pool_symbol() -> None:
    """Make ``@fg_parallel_for_fn`` resolvable (a cell holding null until the pool exists); every
    module that :meth:`ModuleWriter.parallel_for` wrote needs it. Idempotent, thread safe."""
    global _pool_cell_registered
    if not _pool_cell_registered:
        with cpu.llvm_lock:
            if not _pool_cell_registered:
                cpu.host()  # initialises LLVM
                llvm_capi.add_symbol(POOL_SYMBOL, ctypes.addressof(_pool_cell))
                _pool_cell_registered = True


def enable_thread_pool() -> None:
    """Compile the native thread pool (once per process: runtime.py) and point generated code's
    ``@fg_parallel_for_fn`` at it. Executables call this when they may use more than one thread:
    a process that never does (one core, ``FUNGRAD_NUM_THREADS=1``) never compiles the pool."""
    if _pool_cell.value:
        return
    from fungrad.lowering.cpu import runtime

    register_pool_symbol()
    runtime.ensure_registered()
    with cpu.llvm_lock:
        _pool_cell.value = llvm_capi.address_of_symbol("fg_parallel_for")


def compile_ahead(steps) -> None:
    """Start compiling the process-wide native code a program of ``steps`` will call, on
    another thread, when this process may run several (``threads.num_threads()``) and the
    program multiplies matrices in the gemm library (``gemm_step.uses_library``): the library
    (~25 ms of code generation) and, when a product is split over threads
    (``gemm_step.splits_over_threads``), the thread pool (runtime.py, ~6 ms). Both then overlap
    the program's rendering (Python, ~50 ms for a transformer block) instead of following it.
    ``render`` and the executable still call ``gemm.ensure_library`` and
    :func:`enable_thread_pool`, which wait for these compiles (``cpu.llvm_lock``) or, if one
    failed, compile again and raise there: the program needs both, so neither is still
    compiling when its first call returns (a fork then finds ``llvm_lock`` free). A program
    without such products compiles nothing ahead: its own compile would only wait for the
    lock."""
    if threads.num_threads() < 2:
        return
    products = [
        s for s, _ in step_table(steps) if isinstance(s, Gemm) and gemm_step.uses_library(s)
    ]
    if not products:
        return
    library = not matmul.compiled()
    pool = not _pool_cell.value and any(gemm_step.splits_over_threads(s) for s in products)
    if library or pool:
        threading.Thread(
            target=_compile_quietly, args=(library, pool), name="fungrad-ahead", daemon=True
        ).start()


def _compile_quietly(library: bool, pool: bool) -> None:
    try:
        if library:
            matmul.ensure_library()
        if pool:
            from fungrad.lowering.cpu import runtime

            runtime.ensure_registered()
    except Exception:  # noqa: BLE001 - the program's own calls raise it again (compile_ahead)
        pass


#: a kernel estimated at this many operations (~20-50 us on one core) is split across threads;
#: a fork-join of the native pool costs ~0.3 us with awake workers, ~3 us waking them
PARALLEL_COST = 300_000


#: kernels estimated (``Kernel.cost``) at most this many operations are compiled without
#: optimisation, as glue: their code runs ~3-10x slower, under a microsecond here, and LLVM's
#: full pipeline costs ~3 ms per loop (measured: 20 small loop functions took 67 ms at O3,
#: 3 ms without passes and with FastISel)
COLD_COST = 1024
#: ... and so are those under this share of the program's estimated work, a product counting
#: one operation per ``GEMM_FLOPS_PER_OP`` flops (the MLP step's loss, its gradient and the
#: bias updates: ~55 ms less compile time, ~1% slower steps)
COLD_SHARE = 1 / 200
GEMM_FLOPS_PER_OP = 8
#: ... but never above this many: code without optimisation costs ~1 ns per estimated
#: operation against ~0.03 ns vectorised (the transformer step's layer norm, 4.7 M: 5 ms
#: against 0.14 ms), so a kernel of this size loses ~65 us a call, ~20 calls of the ~3 ms its
#: optimised compile costs. Without the cap a program of large products (the transformer's
#: 1 G estimated operations) left every element-wise kernel under 5 M unoptimised: 25 kernels,
#: ~20 ms of its ~80 ms step
COLD_MAX = 1 << 16
#: Small programs (``COLD_SHARE`` of their work under ``COLD_MAX``: under ~1 ms of products)
#: are called many times and each unoptimised kernel is a visible share of a call, so there a
#: kernel is glue only under ``SMALL_SHARE`` of the work, about 1% of the call's time (1 ns
#: per operation unoptimised against ~0.08 ns per product operation), and a kernel with a
#: reduction loop counts ``REDUCE_WEIGHT`` times its cost: unoptimised, the accumulator goes
#: through memory every iteration (a 128 x 10 column sum: 10 us against 0.5 us optimised).
#: The MLP 64-128-128-10 step: 219 -> 205 us, the digits MLP with Adam 113 -> 104 us (one
#: core), each a few ms more compile time; larger programs are unchanged
SMALL_SHARE = 1 / 1250
REDUCE_WEIGHT = 8


def _cold_kernels(steps, costs: dict[int, int] | None = None) -> set[int]:
    """Ids of the top-level kernels of ``steps`` to compile without optimisation (see
    COLD_COST, COLD_SHARE, COLD_MAX and SMALL_SHARE). Kernels inside control flow may run many
    times: they are always optimised. ``costs``: the kernels' costs known so far, by id (gains
    the rest)."""
    costs = {} if costs is None else costs
    work = _work(steps, costs)
    kernels = [s for s in steps if isinstance(s, Kernel)]
    if work * COLD_SHARE >= COLD_MAX:
        limit = max(COLD_COST, COLD_MAX)
        return {id(s) for s in kernels if costs[id(s)] <= limit}
    small = work * SMALL_SHARE
    return {
        id(s)
        for s in kernels
        if costs[id(s)] <= COLD_COST or costs[id(s)] * _reduce_weight(s) <= small
    }


def _reduce_weight(kern: Kernel) -> int:
    """``REDUCE_WEIGHT`` for a kernel with a reduction loop, else 1 (see SMALL_SHARE)."""
    roots = [x for st in kern.stores for x in (st.value, st.index, st.mask) if x is not None]
    return REDUCE_WEIGHT if any(e.op == "reduce" for e in _walk(roots)) else 1


def _cost(kern: Kernel, costs: dict[int, int]) -> int:
    """``kern.cost()``, remembered in ``costs`` by kernel id."""
    c = costs.get(id(kern))
    if c is None:
        c = costs[id(kern)] = kern.cost()
    return c


def _work(steps, costs: dict[int, int]) -> float:
    """Estimated operations of one run of ``steps``: kernels' ``cost``, products' flops over
    ``GEMM_FLOPS_PER_OP``, a scan's body ``length`` times, a while loop's cond and body once
    (their trip count is unknown), a cond's largest branch. (Counting the loops' work: the
    LSTM step's two scans are ~98% of it; without them its small top-level kernels of 25-41 k
    operations each took a full optimising compile, ~7 ms each, to save ~30 us a run.)"""
    total = 0.0
    for s in steps:
        if isinstance(s, Kernel):
            total += _cost(s, costs)
        elif isinstance(s, Gemm):
            total += 2 * s.m * s.n * s.k * s.batch / GEMM_FLOPS_PER_OP
        elif isinstance(s, ScanStep):
            total += s.length * _work(s.body, costs)
        elif isinstance(s, WhileStep):
            total += _work(s.cond, costs) + _work(s.body, costs)
        elif isinstance(s, CondStep):
            total += max((_work(b, costs) for b in s.branches), default=0.0)
    return total


@dataclass
class Function:
    """The LLVM text of one or more functions of a module and the ``internal`` functions it
    defines that another module may call: (name, return type, parameter types)."""

    text: str
    defines: tuple[tuple[str, str, str], ...] = ()


def _link(modules: list[list[Function]]) -> dict[int, list[str]]:
    """Let modules' function lists call each other: a function one module calls and another
    defines loses its ``internal`` linkage there and is declared where it is called.
    Returns the declarations each list (by ``id``) needs.

    The names a module refers to are read from its finished text (one regular expression
    for ``@symbol``): references come from every step renderer (calls, trampolines and
    kernels passed to the thread pool by address), and scanning the text once is simpler and
    surer than threading a list of uses through each of them. What is defined, and with
    which signature, is recorded when the function is added (``ModuleWriter.add_function``)."""
    declared: dict[int, list[str]] = {id(m): [] for m in modules}
    called = {id(m): set(_SYMBOL.findall("\n".join(f.text for f in m))) for m in modules}
    for defs in modules:
        for f in defs:
            for fn, ret, params in f.defines:
                users = [m for m in modules if m is not defs and fn in called[id(m)]]
                if users:
                    f.text = f.text.replace(
                        f"define internal {ret} @{fn}(", f"define {ret} @{fn}(", 1
                    )
                for m in users:
                    declared[id(m)].insert(0, f"declare {ret} @{fn}({params})\n")
    return declared


#: LLVM's passes and code generation of a program's optimised functions run on several threads
#: (``cpu.compile_modules``) when they are split into modules: one per thread allowed, each with
#: at least ``SPLIT_MIN_LINES`` lines of IR (~3-4 small kernels; LLVM's cost is ~3 ms a loop,
#: a module's own ~1 ms, and the math functions it calls are compiled once per module)
SPLIT_MIN_LINES = 300
#: ... and into at most this many modules (each compile thread keeps two target machines)
SPLIT_MAX = 8


def _split(functions: list[Function], nthreads: int) -> list[list[Function]]:
    """``functions`` in up to ``nthreads`` (at most ``SPLIT_MAX``) lists of about equal IR
    size (largest first into the smallest list: LLVM's time grows with a function's size),
    each with at least ``SPLIT_MIN_LINES`` lines; one list (or none) when that leaves one.
    Deterministic for a given thread count, so the modules' cache keys are too."""
    if not functions:
        return []
    sizes = [f.text.count("\n") + 1 for f in functions]
    n = max(1, min(nthreads, SPLIT_MAX, sum(sizes) // SPLIT_MIN_LINES, len(functions)))
    if n == 1:
        return [functions]
    bins: list[list[int]] = [[] for _ in range(n)]
    load = [0] * n
    for i in sorted(range(len(functions)), key=lambda i: -sizes[i]):
        j = load.index(min(load))
        bins[j].append(i)
        load[j] += sizes[i]
    return [[functions[i] for i in sorted(b)] for b in bins]


_SYMBOL = re.compile(r"@([-\w.$]+)")


def render(prog: Program, profile: dict[int, int] | None = None) -> list[cpu.Part]:
    """The LLVM modules of ``prog`` (see :meth:`ModuleWriter.render`); the symbols they need are
    registered: :func:`register_pool_symbol`, ``abi.layout``, the matmul library, the
    large-argument library of sin/cos/tan (llvm_math.ensure_large_library). ``profile``
    (step id -> timing slot): a profiled build timing each step (``cpu/profile.py``)."""
    if profile is not None:
        step_profile.ensure_clock()
    writer = ModuleWriter(prog, profile)
    parts = writer.render()
    if writer.serial_for:
        register_pool_symbol()
    if matmul.SYMBOL in writer.externals:
        matmul.ensure_library()
    if writer.large_libraries:
        llvm_math.ensure_large_library(writer.large_libraries)
    return parts


__all__ = ["POOL_SYMBOL", "compile_ahead", "enable_thread_pool", "register_pool_symbol", "render"]
