"""A jaxpr compiled for the GPU: WGSL pipelines plus what a call needs.

``GpuExecutable(closed)`` plans the program with the shared fusion planner (with the GPU's
placement policy, ``policy.GpuPolicy``), renders one shader per step (``shader.py``,
``gemm.py``, ``scan.py``, ``sort.py``), compiles the pipelines once, and at each call
records every dispatch into one command encoder and makes one queue submission. Inputs that
are :class:`~fungrad.devices.GpuArray` are bound as they are; host arrays are uploaded.
Outputs are GpuArrays: they stay on the device.

Where buffers live: each input and output has its own device buffer (slot ``in<i>`` /
``out<i>``); the constants share one buffer uploaded at compile time (``consts``); the
temporaries share one arena per call (``arena``) at word offsets chosen by liveness, as on the
CPU; loop counters live in ``ctl``. Bind groups are cached per pipeline and set of buffers,
which repeat from call to call because buffers come from the runtime's pool.

Control flow: a scan's body is dispatched once per iteration, its per-iteration views (the
rows of ``xs``/``ys``, the double-buffered carries) being offsets computed in the shaders from
the loop counter; a cond dispatches every branch, each guarded by the index; a while loop is
run from the host, reading its predicate back after each iteration (anywhere: inside scans,
conds and other while loops).

Policies: which reductions become workgroup trees (``TREE_REDUCTIONS``, ``_tree_groups``),
which serial kernels run as parallel scatters (``_scatter_like``), which scans split their
lines into blocks (``SCAN``, ``SCAN_BLOCK``), which sorts take the bitonic network
(``SORT_RANK_MAX_ROW``), and how long matmul contractions split (``_gemm``); the scratch
these need (tree partials, scatter winners, scan block totals, sort positions, partial
products) lives past the arena's temporaries (``scratch_words``).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import OrderedDict

import numpy as np

from fungrad import core
from fungrad.devices import GpuArray, device_buffer
from fungrad.lowering import fusion
from fungrad.lowering.fusion import Gemm, Kernel, LoweringError
from fungrad.lowering.gpu import runtime as gpu
from fungrad.lowering.gpu.frame import TOP, Scope, Shader, render_copy, render_counter, render_fill
from fungrad.lowering.gpu.gemm import KSTEP, render_gemm, render_gemm_sum
from fungrad.lowering.gpu.policy import GpuPolicy
from fungrad.lowering.gpu.scan import render_scan
from fungrad.lowering.gpu.schemes import (
    TREE_WG,
    ScanInfo,
    Scatter,
    SplitK,
    Tree,
    partial_words,
    reductions_independent,
    scan_of,
    top_reductions,
)
from fungrad.lowering.gpu.shader import render_kernel
from fungrad.lowering.gpu.sort import bitonic_width, render_bitonic, render_sort
from fungrad.lowering.gpu.types import DEVICE_DTYPES

_compile_lock = threading.RLock()


#: Tree reductions (see ``GpuExecutable._tree_groups``): for kernels of at most
#: TREE_MAX_OUTPUTS output elements, reductions of at least TREE_MIN_LENGTH elements
#: ("auto" mode), about TREE_PER_INVOCATION elements per invocation in the first pass, and
#: at most TREE_GROUPS workgroups in all.
TREE_MAX_OUTPUTS = 4096
TREE_MIN_LENGTH = 256
TREE_PER_INVOCATION = 16
TREE_GROUPS = 1024
#: "auto" (trees on real GPUs only), "always" (wherever outputs are few, whatever the
#: adapter and reduction length: tests use it on lavapipe) or "never". The environment
#: variable FUNGRAD_GPU_TREE_REDUCE, when set, wins. Read when a function is compiled.
TREE_REDUCTIONS = "auto"
#: Rows of at most this many elements sort by ranks (one dispatch, O(n) per element), longer
#: ones by a bitonic network (``render_bitonic``); the crossover measured on lavapipe
#: lies between 32 and 128.
SORT_RANK_MAX_ROW = 64


#: Scans (cumulative reductions: ``scan_of``, ``render_scan``) run one invocation
#: per line, in order, or split their lines into blocks (three dispatches). "auto": blocks
#: of about SCAN_BLOCK elements where lines are too few to fill the device: fewer than
#: SCAN_SERIAL_ROWS on a GPU, fewer than two per CPU core on a CPU adapter (lavapipe, 2
#: cores: blocks 1.6x faster for 2 lines of 60000, 0.7x for 8); "always": blocks of
#: SCAN_BLOCK wherever a line is longer (tests use it with small blocks); "never": one
#: block unless a line would loop past the adapter's limit (``gpu.Runtime.loop_limit``),
#: which splits it in every mode. The environment variable FUNGRAD_GPU_SCAN, when set,
#: wins. Read when a function is compiled.
SCAN = "auto"
SCAN_BLOCK = 512
SCAN_SERIAL_ROWS = 4096


def _mode(variable: str, name: str, default: str) -> str:
    mode = os.environ.get(variable, "").strip().lower() or default
    if mode not in ("auto", "always", "never"):
        raise ValueError(f"{variable} / gpu_executable.{name}: {mode!r} is not one of 'auto', "
                         "'always', 'never'")
    return mode


def scan_mode() -> str:
    """The scan mode in force (``SCAN`` or its environment override FUNGRAD_GPU_SCAN)."""
    return _mode("FUNGRAD_GPU_SCAN", "SCAN", SCAN)


def tree_reductions() -> str:
    """The tree-reduction mode in force (``TREE_REDUCTIONS`` or its environment override)."""
    return _mode("FUNGRAD_GPU_TREE_REDUCE", "TREE_REDUCTIONS", TREE_REDUCTIONS)


def check_dtypes(jaxpr: core.ClosedJaxpr, name: str) -> None:
    """TypeError unless every value of the program has a 32-bit (or bool) dtype."""
    def walk(j):
        for v in [*j.invars, *j.outvars, *j.constvars,
                  *(x for e in j.eqns for x in e.outvars)]:
            aval = getattr(v, "aval", None)
            dt = getattr(aval, "dtype", None)
            if dt is not None and np.dtype(dt) not in DEVICE_DTYPES:
                hint = ("use float32 (turn enable_x64 off, or astype(float32))"
                        if np.dtype(dt).kind == "f" else
                        "use int32/uint32 (turn enable_x64 off, or astype(int32))")
                raise TypeError(
                    f"jit({name}, backend='gpu'): the program has {np.dtype(dt).name} values "
                    f"({aval.str_short()}), but WGSL has only 32-bit types (float32, int32, "
                    f"uint32, bool): {hint}, or use backend='cpu'")
        for e in j.eqns:
            for p in e.params.values():
                for sub in (p if isinstance(p, (list, tuple)) else (p,)):
                    if isinstance(sub, core.ClosedJaxpr):
                        walk(sub.jaxpr)
                    elif isinstance(sub, core.Jaxpr):
                        walk(sub)
    walk(jaxpr.jaxpr)


def _words(b) -> int:
    return max(1, b.size)


def _check_sizes(prog: fusion.Program, rt, name: str) -> None:
    """ValueError naming the first array of ``prog`` that no storage binding of this adapter
    can hold (``max_binding_bytes``) or whose elements an i32 cannot number: found when the
    function is compiled, before any shader is written."""
    for b in [*prog.inputs, *prog.outputs, *prog.temps, *(c for c, _ in prog.consts)]:
        nbytes = 4 * b.size
        if nbytes > rt.max_binding_bytes or b.size >= 2**31:
            raise ValueError(
                f"jit({name}, backend='gpu'): the {b.kind} array {b.dtype.name}"
                f"{list(b.shape)} needs {nbytes} bytes, more than this adapter's largest "
                f"storage binding ({rt.max_binding_bytes} bytes) holds; split the array or "
                "use backend='cpu'")


class GpuExecutable:
    """GPU code for one closed jaxpr (see the module docstring). Attributes: ``in_avals``,
    ``out_avals``, ``program``, ``shaders`` (the WGSL of each dispatch) and
    ``compile_time_s``."""

    def __init__(self, closed: core.ClosedJaxpr, name: str = "main"):
        from fungrad.ir import passes
        t0 = time.perf_counter()
        self.name = name
        self.in_avals = list(closed.in_avals)
        self.out_avals = list(closed.out_avals)
        check_dtypes(closed, name)
        rt = self.rt = gpu.runtime()
        with _compile_lock:
            self.jaxpr = passes.optimize(closed)
            self.program = fusion.plan(self.jaxpr, name, policy=GpuPolicy())
        prog = self.program
        _check_sizes(prog, rt, name)
        place: dict[int, tuple[str, int]] = {}
        for b in prog.inputs:
            place[b.id] = (f"in{b.index}", 0)
        for b in prog.outputs:
            place[b.id] = (f"out{b.index}", 0)
        words, at = [], 0
        for b, value in prog.consts:
            place[b.id] = ("consts", at)
            w = gpu.to_words(value)
            words.append(w)
            at += w.size
        self._consts = rt.upload(np.concatenate(words)) if words else None
        self.arena_words = _arena_offsets(prog, place)
        # A loop carry's two buffers alternate in one binding, so a carry whose home is a
        # program output lives in the arena and is copied out at the end.
        copies_out = []
        for b in _carry_buffers(prog.steps):
            if b.kind == "output":
                copies_out.append((place[b.id], ("arena", self.arena_words), max(1, b.size)))
                place[b.id] = ("arena", self.arena_words)
                self.arena_words += -(-max(1, b.size) // 16) * 16
        self._place = place
        self.shaders: list[Shader] = []
        self._pipelines: dict[str, object] = {}
        self.ctl_words = 0
        self.scratch_words = 0
        self._commands = self._flatten(prog.steps, TOP)
        self.arena_words += self.scratch_words
        if 4 * self.arena_words > rt.max_binding_bytes:
            raise ValueError(
                f"jit({name}, backend='gpu'): the program's temporaries need "
                f"{4 * self.arena_words} bytes in one buffer, more than this adapter's largest "
                f"storage binding ({rt.max_binding_bytes} bytes) holds; use smaller arrays or "
                "backend='cpu'")
        for dst, src, words in copies_out:
            self._commands += self._dispatch(render_copy(dst, src, words))
        self._bind_groups: OrderedDict = OrderedDict()
        self._out_words = [max(1, int(np.prod(a.shape, dtype=np.int64))) for a in self.out_avals]
        self.compile_time_s = time.perf_counter() - t0

    # -- the program as a list of dispatches ------------------------------------------------------
    def _dispatch(self, shader: Shader) -> list:
        limit = self.rt.loop_limit
        if limit is not None and shader.loop_iterations >= limit:
            raise LoweringError(
                f"jit({self.name}, backend='gpu'): shader {shader.name} loops "
                f"{shader.loop_iterations} times per invocation, but {self.rt.name} stops "
                f"an invocation's loops after {limit} iterations (llvmpipe's guard against "
                "endless loops); use backend='cpu' for this function, smaller arrays, or a "
                "real GPU")
        self.shaders.append(shader)
        if not shader.grid[0]:
            return []
        p = self._pipelines.get(shader.source)
        if p is None:
            p = self._pipelines[shader.source] = self.rt.pipeline(shader.name, shader.source)
        return [_Dispatch(p, shader.bindings, shader.grid)]

    def _tree_groups(self, kern: Kernel, scope: Scope) -> int:
        """Workgroups per output element for ``kern``'s top-level reductions as workgroup
        trees (``Tree``), or 0 to keep one invocation per output element. Trees pay
        where outputs are few (a full sum is otherwise one invocation) and the adapter is a
        real GPU (on a CPU adapter such as lavapipe, invocations are CPU threads: the serial
        loop is faster), and they are needed wherever one invocation would loop more often
        than the adapter allows (``gpu.Runtime.loop_limit``); ``tree_reductions()`` can
        force them on or off."""
        mode = tree_reductions()
        if mode == "never" or not kern.parallel:
            return 0
        tops = top_reductions(kern)
        outputs = int(np.prod([v.extent for v in kern.loops], dtype=np.int64))
        if not tops or not outputs:
            return 0
        longest = max(int(np.prod([v.extent for v in e.attr.vars])) for e in tops)
        limit = self.rt.loop_limit
        too_long = limit is not None and render_kernel(
            kern, self._place, self.rt.fused_fma, scope).loop_iterations >= limit
        if not too_long and (outputs > TREE_MAX_OUTPUTS or mode == "auto" and (
                self.rt.cpu_adapter or longest < TREE_MIN_LENGTH)):
            return 0
        if not reductions_independent(tops):
            return 1
        groups = min(-(-longest // (TREE_WG * TREE_PER_INVOCATION)),
                     TREE_GROUPS // outputs)
        if limit is not None:  # a quarter of the budget: the body may loop too
            groups = max(groups, -(-longest // (TREE_WG * (limit // 4))))
        return max(1, groups)

    def _kernel(self, kern: Kernel, groups: int, scope: Scope) -> list:
        """The dispatches of one kernel: one, a tree reduction's one or two passes, or a
        parallel scatter's one or three (``Scatter``). Tree partials and the scatter's
        winners live past the arena's temporaries (``scratch_words``)."""
        place, fma = self._place, self.rt.fused_fma
        base = self.arena_words
        if _scatter_like(kern):
            st, = kern.stores
            if st.combine is not None:
                return self._dispatch(render_kernel(kern, place, fma, scope,
                                                         scatter=Scatter("combine")))
            words = _words(st.buffer)
            self.scratch_words = max(self.scratch_words, words)
            out = self._dispatch(render_fill(("arena", base), words, scope))
            for mode in ("claim", "write"):
                out += self._dispatch(render_kernel(kern, place, fma, scope,
                                                         scatter=Scatter(mode, base)))
            return out
        if not groups:
            return self._dispatch(render_kernel(kern, place, fma, scope))
        out = []
        if groups > 1:
            self.scratch_words = max(self.scratch_words, partial_words(kern, groups))
            first = Tree(groups, base, partial=True)
            out += self._dispatch(render_kernel(kern, place, fma, scope, first))
        return out + self._dispatch(render_kernel(kern, place, fma, scope,
                                                       Tree(groups, base)))

    def _scan(self, kern: Kernel, scan: ScanInfo, scope: Scope) -> list:
        """A scan's dispatches (``render_scan``): one invocation per line, or blocks of
        lines (``SCAN``, ``SCAN_BLOCK``) whose totals live past the arena's temporaries;
        lines an invocation could not loop through on this adapter are always split."""
        place, fma = self._place, self.rt.fused_fma
        _split_bindings(kern, place, self.rt.max_bindings)  # (says so when too many)
        n = scan.var.extent + 1
        rows = int(np.prod([v.extent for v in kern.loops], dtype=np.int64)) // (n - 1)
        mode = scan_mode()
        blocks = 1
        few = 2 * (os.cpu_count() or 1) if self.rt.cpu_adapter else SCAN_SERIAL_ROWS
        if mode == "always" or mode == "auto" and rows < few:
            blocks = -(-n // max(1, SCAN_BLOCK))
        limit = self.rt.loop_limit
        if limit is not None:  # (with some room for rounding the blocks up)
            serial = render_scan(kern, scan, place, fma, scope)[0].loop_iterations
            blocks = max(blocks, -(-serial // max(1, limit - 256)))
        blocks = -(-n // -(-n // blocks))  # every block full but the last, none empty
        if blocks > 1:
            self.scratch_words = max(self.scratch_words, rows * blocks)
        out = []
        for shader in render_scan(kern, scan, place, fma, scope, blocks,
                                       self.arena_words):
            out += self._dispatch(shader)
        return out

    def _gemm(self, step: Gemm, scope: Scope) -> list:
        """A matmul's dispatches: one, or, where one invocation would loop through ``k``
        more often than the adapter allows, the contraction split into ranges
        (``SplitK``): partial products past the arena's temporaries, then their sum."""
        shader = render_gemm(step, self._place, scope)
        limit = self.rt.loop_limit
        if limit is None or shader.loop_iterations < limit:
            return self._dispatch(shader)
        chunks = -(-shader.loop_iterations // (limit - 256))
        size = -(-step.k // chunks // KSTEP) * KSTEP
        split = SplitK(-(-step.k // size), size, self.arena_words)
        self.scratch_words = max(self.scratch_words,
                                 split.chunks * step.batch * step.m * step.n)
        return (self._dispatch(render_gemm(step, self._place, scope, split))
                + self._dispatch(render_gemm_sum(step, self._place, scope, split)))

    def _sort(self, step, scope: Scope) -> list:
        """A sort's dispatches: the rank sort (one invocation per element, a loop over its
        row) for short rows, else a bitonic network (``render_bitonic``), whose
        positions live past the arena's temporaries and whose stage parameters take four
        ``ctl`` words after the enclosing loops' counters."""
        n = step.shape[step.dimension]
        limit = self.rt.loop_limit
        if n <= max(1, SORT_RANK_MAX_ROW) and (limit is None or n < limit):
            return self._dispatch(render_sort(step, self._place, scope))
        rows = int(np.prod(step.shape, dtype=np.int64)) // n
        self.scratch_words = max(self.scratch_words, rows * bitonic_width(step))
        self.ctl_words = max(self.ctl_words, scope.loops + 4)
        out = []
        for shader in render_bitonic(step, self._place, scope, self.arena_words,
                                          scope.loops):
            out += self._dispatch(shader)
        return out

    def _while(self, step, scope: Scope) -> _HostWhile:
        """A while loop run from the host (``_HostWhile``), wherever it is: inside a scan's
        body it runs once per iteration of the scan (its counter is the next ``ctl`` word),
        inside another while loop once per iteration of that one, and inside a cond's branch
        its predicate is cleared first, unguarded, so an unselected branch runs no iteration
        (its guarded cond program never sets the predicate)."""
        place, d = self._place, scope.loops
        self.ctl_words = max(self.ctl_words, d + 1)
        _place_carries(place, step.carries, f"it{d}")
        inner = Scope(d + 1, scope.guards)
        cond = self._flatten(step.cond, inner)
        body = self._flatten(step.body, inner) + self._dispatch(
            render_counter(d, f"it{d} + 1i", place, inner))
        homes = []  # (no guard: they run only after iterations, in a selected branch)
        for c in step.carries:  # after an odd number of iterations: spare -> home
            homes += self._dispatch(render_copy(place[c.home.id], place[c.spare.id],
                                                     max(1, c.home.size), Scope(d)))
        pred = place[step.pred.id]
        if not isinstance(pred[1], int):
            raise LoweringError(f"GPU lowering: the predicate of {step.name} has no fixed place")
        start = self._dispatch(render_counter(d, "0i", place, scope))
        if scope.guards:
            start += self._dispatch(render_fill(pred, 1, Scope(d)))
        return _HostWhile(start, cond, pred, body, homes)

    def _flatten(self, steps, scope: Scope) -> list:
        """The commands running ``steps`` in ``scope``: dispatches, and host-driven while
        loops. A scan's body is dispatched once per iteration (one submission for all);
        a cond's branches are all dispatched, each doing nothing unless selected."""
        from fungrad.lowering.steps import CondStep, HostCallStep, ScanStep, SortStep, WhileStep
        place, rt, out = self._place, self.rt, []
        for step in steps:
            if isinstance(step, Kernel) and (scan := scan_of(step)) is not None:
                out += self._scan(step, scan, scope)
            elif isinstance(step, Kernel):
                tree = self._tree_groups(step, scope)
                for k in _split_bindings(step, place, rt.max_bindings - bool(tree)):
                    out += self._kernel(k, tree, scope)
            elif isinstance(step, Gemm):
                out += self._gemm(step, scope)
            elif isinstance(step, SortStep):
                out += self._sort(step, scope)
            elif isinstance(step, CondStep):
                n = len(step.branches)
                for b, sub in enumerate(step.branches):
                    inner = Scope(scope.loops, (*scope.guards, (step.index, b, n)))
                    out += self._flatten(sub, inner)
            elif isinstance(step, ScanStep):
                d = scope.loops
                self.ctl_words = max(self.ctl_words, d + 1)
                it = f"it{d}"
                _place_carries(place, step.carries, it)
                for sl in step.xs + step.ys:
                    key, base = place[sl.whole.id]
                    row = f"({step.length - 1}i - {it})" if step.reverse else it
                    place[sl.view.id] = (key, f"({_offset(base)} + {row} * "
                                              f"{max(1, sl.view.size)}i)")
                body = self._flatten(step.body, Scope(d + 1, scope.guards))
                out += self._dispatch(render_counter(d, "0i", place, scope))
                step_it = self._dispatch(render_counter(d, f"{it} + 1i", place, scope))
                for _ in range(step.length):
                    out += body + step_it
            elif isinstance(step, WhileStep):
                out.append(self._while(step, scope))
            elif isinstance(step, HostCallStep):
                out.append(_HostCall(step, scope, place))
            else:
                raise LoweringError(
                    f"jit({self.name}, backend='gpu'): the {type(step).__name__} step "
                    f"{step.name} has no GPU lowering; use backend='cpu' for this function")
        return out

    @property
    def num_dispatches(self) -> int:
        """Dispatches per call (a while loop's: one iteration's cond and body)."""
        def count(commands) -> int:
            return sum(count(c.cond) + count(c.body) if isinstance(c, _HostWhile) else
                       type(c) is _Dispatch for c in commands)
        return count(self._commands)

    def call(self, args) -> list[GpuArray]:
        """Run on ``args`` (GpuArrays, Arrays or numpy values with ``in_avals``); the outputs
        stay on the GPU. One queue submission, unless the program has a while loop (whose
        predicate the host reads after each iteration) or host callbacks (``_HostCall``)."""
        rt = self.rt
        slots = {f"in{i}": device_buffer(a) for i, a in enumerate(args)}
        outs = [rt.alloc(w) for w in self._out_words]
        slots.update((f"out{i}", o) for i, o in enumerate(outs))
        if self._consts is not None:
            slots["consts"] = self._consts
        if self.arena_words:
            slots["arena"] = rt.alloc(self.arena_words)
        if self.ctl_words:
            slots["ctl"] = rt.alloc(self.ctl_words)
        self._submit(self._run(self._commands, slots, []), slots)
        return [GpuArray(o, a, a.weak_type) for o, a in zip(outs, self.out_avals)]

    def _run(self, commands: list, slots: dict, pending: list) -> list:
        """Run ``commands`` after the dispatches ``pending``: dispatches are collected, and
        each while loop submits what precedes its predicate's read-back; returns the
        dispatches still to submit."""
        for c in commands:
            if type(c) is _Dispatch:
                pending.append(c)
                continue
            if type(c) is _HostCall:  # the work before it is done, then the host runs it
                self._submit(pending, slots)
                pending = []
                c.run(self.rt, slots)
                continue
            pending += c.start
            iterations = 0
            key, offset = c.pred
            while True:
                pending = self._run(c.cond, slots, pending)
                self._submit(pending, slots)
                pending = []
                if not self.rt.queue.read_buffer(slots[key].buffer, 4 * offset, 4)[0]:
                    break
                pending = self._run(c.body, slots, pending)
                iterations += 1
            if iterations % 2:
                pending += c.homes
        return pending

    def _submit(self, dispatches: list, slots: dict) -> None:
        if not dispatches:
            return
        encoder = self.rt.device.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        for d in dispatches:
            cpass.set_pipeline(d.pipeline)
            cpass.set_bind_group(0, self._bind_group(d, slots))
            cpass.dispatch_workgroups(*d.grid)
        cpass.end()
        self.rt.queue.submit([encoder.finish()])

    def _bind_group(self, d: _Dispatch, slots):
        bufs = tuple(slots[key].buffer for key, _ in d.bindings)
        key = (id(d.pipeline), *map(id, bufs))
        bg = self._bind_groups.get(key)
        if bg is None:
            bg = self.rt.device.create_bind_group(
                layout=d.pipeline.get_bind_group_layout(0),
                entries=[{"binding": k, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                         for k, b in enumerate(bufs)])
            self._bind_groups[key] = (bg, bufs)  # the buffers stay alive with their group
            if len(self._bind_groups) > 64:
                self._bind_groups.popitem(last=False)
            return bg
        return bg[0]

    def as_text(self) -> str:
        """The optimised jaxpr, the fusion plan and the WGSL of every shader."""
        shaders = "\n".join(f"// shader {s.name}: workgroups {s.grid}, bindings "
                            f"{[k for k, _ in s.bindings]}\n{s.source}" for s in self.shaders)
        return (f"# optimised jaxpr\n{self.jaxpr}\n\n# {self.program.describe()}\n\n"
                f"# WGSL on {self.rt.name}\n{shaders}")


class _Dispatch:
    """One compute dispatch: its pipeline, the slot keys bound, the workgroup grid."""

    __slots__ = ("pipeline", "bindings", "grid")

    def __init__(self, pipeline, bindings, grid):
        self.pipeline, self.bindings, self.grid = pipeline, bindings, grid


class _HostWhile:
    """A while loop run from the host: ``start`` resets the counter, then ``cond`` is
    submitted and its predicate (``pred``: slot key, word offset) read back before each
    ``body``; ``homes`` copy carries left in their spare buffers home."""

    __slots__ = ("start", "cond", "pred", "body", "homes")

    def __init__(self, start, cond, pred, body, homes):
        self.start, self.cond, self.pred, self.body, self.homes = start, cond, pred, body, homes


class _HostCall:
    """A host callback (``host_callback.HostCallStep``) between dispatches: the queue's work so
    far is submitted, the operands are read back, the callback runs, its results are written
    to their buffers. Inside loops and branches, where places are expressions of the loop
    counters and steps are guarded by branch indices, the counters and indices are read back
    first: the call happens only in the selected branch, once per iteration."""

    __slots__ = ("step", "scope", "ins", "outs", "guards")

    def __init__(self, step, scope: Scope, place: dict):
        self.step, self.scope = step, scope
        self.ins = [(place[b.id], b) for b in step.operands]
        self.outs = [(place[b.id], b) for b in step.results]
        self.guards = [(place[index.id], index, branch, n)
                       for index, branch, n in scope.guards]

    def run(self, rt, slots: dict) -> None:
        env: dict = {}
        if self.scope.loops:
            ctl = np.frombuffer(rt.queue.read_buffer(slots["ctl"].buffer, 0,
                                                     4 * self.scope.loops), np.int32)
            env.update((f"it{d}", int(v)) for d, v in enumerate(ctl))
        for (key, off), index, branch, n in self.guards:
            word = _read_words(rt, slots, key, _word_offset(off, env), 1)
            raw = word.view(np.int32)[0] if index.dtype != np.bool_ else int(word[0] != 0)
            if min(max(int(raw), 0), n - 1) != branch:
                return  # an unselected branch: its steps do nothing
        values = []
        for (key, off), b in self.ins:
            words = _read_words(rt, slots, key, _word_offset(off, env), b.size)
            values.append((words != 0).reshape(b.shape) if b.dtype == np.bool_ else
                          words.view(b.dtype).reshape(b.shape).copy())
        outs = self.step.execute(values)
        for ((key, off), b), v in zip(self.outs, outs):
            if b.size:
                rt.queue.write_buffer(slots[key].buffer, 4 * _word_offset(off, env),
                                      gpu.to_words(np.asarray(v, b.dtype)))


def _read_words(rt, slots: dict, key: str, offset: int, n: int) -> np.ndarray:
    if not n:
        return np.zeros(0, np.uint32)
    return np.frombuffer(rt.queue.read_buffer(slots[key].buffer, 4 * offset, 4 * n),
                         np.uint32)


_WGSL_INT = re.compile(r"\b(\d+)i\b")


def _word_offset(offset: int | str, env: dict) -> int:
    """A place's word offset: an int, or an i32 WGSL expression of the loop counters
    ``it<d>`` (``_offset``, ``_place_carries``: integer literals, + - * %, comparisons and
    ``select(false_value, true_value, condition)``) evaluated with the counters' values."""
    if isinstance(offset, int):
        return offset
    text = _WGSL_INT.sub(r"\1", offset)
    return int(eval(text, {"__builtins__": {}, "select": _select}, env))  # noqa: S307


def _select(if_false, if_true, cond):
    return if_true if cond else if_false


def _carry_buffers(steps) -> list:
    """The home and spare buffers of every loop carry in ``steps`` (sub-programs included)."""
    from fungrad.lowering.steps import CondStep, ScanStep, WhileStep
    out = []
    for step in steps:
        if isinstance(step, (ScanStep, WhileStep)):
            out += [b for c in step.carries for b in (c.home, c.spare)]
            out += _carry_buffers(step.body)
            if isinstance(step, WhileStep):
                out += _carry_buffers(step.cond)
        elif isinstance(step, CondStep):
            for branch in step.branches:
                out += _carry_buffers(branch)
    return out


def _offset(base: int | str) -> str:
    return base if isinstance(base, str) else f"{base}i"


def _place_carries(place: dict, carries, it: str) -> None:
    """Loop carries alternate between two buffers: iteration ``it`` reads ``cur`` from the
    first (even iterations) or the second, and writes ``nxt`` to the other."""
    for c in carries:
        first, second = (c.home, c.spare) if c.start_home else (c.spare, c.home)
        (k1, o1), (k2, o2) = place[first.id], place[second.id]
        if k1 != k2:
            raise LoweringError("GPU lowering: a loop carry's two buffers must share a slot")
        even = f"({it} % 2i == 0i)"
        place[c.cur.id] = (k1, f"select({_offset(o2)}, {_offset(o1)}, {even})")
        place[c.nxt.id] = (k1, f"select({_offset(o1)}, {_offset(o2)}, {even})")


def _arena_offsets(prog: fusion.Program, place: dict) -> int:
    """Word offsets of the temporaries in the arena (the planner's liveness first fit, in
    16-word slots); returns the arena's size in words."""
    offsets, top = fusion.liveness_offsets(prog, lambda b: -(-_words(b) // 16) * 16)
    for b in prog.temps:
        place[b.id] = ("arena", offsets[b.id])
    return top


def _scatter_like(kern: Kernel) -> bool:
    """Is ``kern`` a serial loop whose iterations only collide on the elements they store (a
    scatter), so ``Scatter`` runs it in parallel exactly? Not when the store reads its
    own buffer (a cumulative sum reads the previous element), nor when it has one
    iteration (a scan's first element: one invocation, one dispatch)."""
    if kern.parallel or len(kern.stores) != 1 or all(v.extent == 1 for v in kern.loops):
        return False
    st, = kern.stores
    exprs = [e for e in (st.value, st.index, st.mask) if e is not None]
    return st.buffer not in fusion._loaded_buffers(exprs)


def _split_bindings(kern: Kernel, place: dict, limit: int) -> list[Kernel]:
    """``kern`` as kernels binding at most ``limit`` device buffers each: its stores are
    independent, so they can be grouped into several dispatches."""
    def keys(st) -> set[str]:
        exprs = [e for e in (st.value, st.index, st.mask) if e is not None]
        return {place[b.id][0] for b in fusion._loaded_buffers(exprs)} | {
            place[st.buffer.id][0]}
    groups: list[tuple[set[str], list]] = []
    for st in kern.stores:
        k = keys(st)
        if len(k) > limit:
            raise LoweringError(
                f"jit(backend='gpu'): kernel {kern.name} ({', '.join(kern.origins)}) reads "
                f"{len(k)} arrays in one expression, more than this adapter's {limit} storage "
                "buffers per shader; use backend='cpu' for this function")
        for g in groups:
            if len(g[0] | k) <= limit:
                g[0].update(k)
                g[1].append(st)
                break
        else:
            groups.append((k, [st]))
    if len(groups) == 1:
        return [kern]
    return [Kernel(f"{kern.name}_{i}", kern.loops, stores, kern.parallel, kern.origins)
            for i, (_, stores) in enumerate(groups)]
