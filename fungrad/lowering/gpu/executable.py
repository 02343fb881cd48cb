"""A jaxpr compiled for the GPU: WGSL pipelines plus what a call needs.

``GpuExecutable(closed)`` plans the program with the shared fusion planner (with the GPU's
placement policy, ``policy.GpuPolicy``), turns each step into commands through the
step-renderer table (``dispatches.py``: which scheme a step runs by is asked of
``schemes.py``, its shaders come from ``shader.py``, ``gemm.py``, ``scan.py``, ``sort.py``),
compiles the pipelines once, and at each call records every dispatch into one command
encoder and makes one queue submission. Inputs that are :class:`~fungrad.devices.GpuArray`
are bound as they are; host arrays are uploaded. Outputs are GpuArrays: they stay on the
device. A program of dispatches alone (no host-driven loop or callback) records each call
from a list of (pipeline, bind group, grid) built once per set of buffers, through
wgpu-native's C functions where it can (``_submit_recorded``): about 1 us of host time a
dispatch.

Profiled builds (``fungrad.profile()``) time each dispatch by the device's timestamps where
the adapter has timestamp queries (``_submit_stamped``), else by submitting it alone and
waiting (``_submit_host_timed``).

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

Scratch: what the schemes need (tree partials, scatter winners, scan block totals, sort
positions, partial products of a split contraction) lives past the arena's temporaries
(``scratch_words``).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np

from fungrad import core, dtypes
from fungrad.devices import GpuArray, device_buffer
from fungrad.lowering import fusion
from fungrad.lowering import profile as step_profile
from fungrad.lowering.fusion import LoweringError
from fungrad.lowering.gpu import runtime as gpu
from fungrad.lowering.gpu.dispatches import STEP_RENDERERS, Dispatch, HostCall, HostWhile
from fungrad.lowering.gpu.frame import TOP, Scope, Shader, render_copy
from fungrad.lowering.gpu.policy import GpuPolicy
from fungrad.lowering.gpu.types import DEVICE_DTYPES
from fungrad.lowering.steps import CondStep, ScanStep, WhileStep

_compile_lock = threading.RLock()


def check_dtypes(jaxpr: core.ClosedJaxpr, name: str) -> None:
    """TypeError unless every value of the program has a 32-bit (or bool) dtype."""

    def walk(j):
        for v in [*j.invars, *j.outvars, *j.constvars, *(x for e in j.eqns for x in e.outvars)]:
            aval = getattr(v, "aval", None)
            dt = getattr(aval, "dtype", None)
            if dt is not None and np.dtype(dt) not in DEVICE_DTYPES:
                if dtypes.kind(dt) == "f" and np.dtype(dt).itemsize < 4:  # float16, bfloat16
                    hint = "compute in float32 (astype(float32))"
                elif dtypes.kind(dt) == "f":
                    hint = "use float32 (turn enable_x64 off, or astype(float32))"
                else:
                    hint = "use int32/uint32 (turn enable_x64 off, or astype(int32))"
                raise TypeError(
                    f"jit({name}, backend='gpu'): the program has {np.dtype(dt).name} values "
                    f"({aval.str_short()}), but WGSL has only 32-bit types (float32, int32, "
                    f"uint32, bool): {hint}, or use backend='cpu'"
                )
        for e in j.eqns:
            for p in e.params.values():
                for sub in p if isinstance(p, (list, tuple)) else (p,):
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
                "use backend='cpu'"
            )


class GpuExecutable:
    """GPU code for one closed jaxpr (see the module docstring). Attributes: ``in_avals``,
    ``out_avals``, ``program``, ``shaders`` (the WGSL of each dispatch) and
    ``compile_time_s``."""

    def __init__(self, closed: core.ClosedJaxpr, name: str = "main", profile: bool = False):
        from fungrad.ir import passes

        t0 = time.perf_counter()
        self.name = name
        self._profile = profile  # fungrad.profile(): each dispatch submitted alone and timed
        self.in_avals = list(closed.in_avals)
        self.out_avals = list(closed.out_avals)
        check_dtypes(closed, name)
        rt = self.rt = gpu.runtime()
        with _compile_lock:
            t1 = time.perf_counter()
            self.jaxpr = passes.optimize(closed)
            t2 = time.perf_counter()
            if profile:
                self.program, info = step_profile.plan_covered(self.jaxpr, name, GpuPolicy())
                self._step_eqns = {
                    id(step): s.eqns for step, s in step_profile.step_table(self.program.steps)
                }
                self._step_eqns.update(  # the top-level steps' own (coverage.result's)
                    {id(st): s.eqns for st, s in zip(self.program.steps, info.steps)}
                )
                self._prof_stack: list = []  # steps being rendered (outermost first)
                self._prof_slots: dict[tuple, int] = {}  # (step id, shader name) -> slot
                self._prof_steps: list = []  # StepInfo per slot
                self._prof_of: dict[int, int] = {}  # id(Dispatch) -> slot
            else:
                self.program = fusion.plan(self.jaxpr, name, policy=GpuPolicy())
            t3 = time.perf_counter()
        self._pipeline_s = 0.0  # seconds spent creating pipelines (WGSL -> driver code)
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
                "backend='cpu'"
            )
        for dst, src, words in copies_out:
            self._commands += self._dispatch(render_copy(dst, src, words))
        self._bind_groups: OrderedDict = OrderedDict()
        # a program of dispatches alone records each call's commands from a list built once
        # per set of buffers (``_recorded``): the pool hands the same buffers back call after
        # call, so the bind groups are looked up once, not per dispatch and call
        self._straight = all(type(c) is Dispatch for c in self._commands)
        self._recorded: OrderedDict = OrderedDict()
        self._out_words = [max(1, int(np.prod(a.shape, dtype=np.int64))) for a in self.out_avals]
        if profile:
            self.profile_info = step_profile.ProgramInfo(name, self.jaxpr, tuple(self._prof_steps))
            self.call = self._call_profiled
        t4 = time.perf_counter()
        self.compile_time_s = t4 - t0
        # seconds per compile phase (config.update("log_compiles", True) logs them): "render"
        # is the WGSL text and the buffer layout, "compile" the driver's pipelines
        self.phase_times = {
            "optimize": t2 - t1,
            "plan": t3 - t2,
            "render": t4 - t3 - self._pipeline_s,
            "compile": self._pipeline_s,
        }

    # -- the program as a list of dispatches ------------------------------------------------------
    def _dispatch(self, shader: Shader) -> list:
        limit = self.rt.loop_limit
        if limit is not None and shader.loop_iterations >= limit:
            raise LoweringError(
                f"jit({self.name}, backend='gpu'): shader {shader.name} loops "
                f"{shader.loop_iterations} times per invocation, but {self.rt.name} stops "
                f"an invocation's loops after {limit} iterations (llvmpipe's guard against "
                "endless loops); use backend='cpu' for this function, smaller arrays, or a "
                "real GPU"
            )
        self.shaders.append(shader)
        if not shader.grid[0]:
            return []
        p = self._pipelines.get(shader.source)
        if p is None:
            t = time.perf_counter()
            p = self._pipelines[shader.source] = self.rt.pipeline(shader.name, shader.source)
            self._pipeline_s += time.perf_counter() - t
        d = Dispatch(p, shader.bindings, shader.grid)
        if self._profile:  # a timing slot per step and shader (a loop body's: once per run)
            outer = self._prof_stack[0] if self._prof_stack else None
            key = (id(outer), shader.name)
            slot = self._prof_slots.get(key)
            if slot is None:
                slot = self._prof_slots[key] = len(self._prof_steps)
                eqns, label = (), shader.name
                if outer is not None:
                    eqns = self._step_eqns.get(id(outer), ())
                    if shader.name == outer.name:  # the step's own shader: the CPU's name
                        label = step_profile.step_label(outer)
                used = {s.name for s in self._prof_steps}
                name, n = label, 1
                while name in used:
                    n += 1
                    name = f"{label}#{n}"
                self._prof_steps.append(step_profile.StepInfo(name, "dispatch", eqns, None))
            self._prof_of[id(d)] = slot
        return [d]

    def _flatten(self, steps, scope: Scope) -> list:
        """The commands running ``steps`` in ``scope``: dispatches, host-driven while loops
        and host calls, each step's from its renderer (``dispatches.STEP_RENDERERS``)."""
        out = []
        for step in steps:
            if type(step) not in STEP_RENDERERS:
                raise LoweringError(
                    f"jit({self.name}, backend='gpu'): the {type(step).__name__} step "
                    f"{step.name} has no GPU lowering; use backend='cpu' for this function"
                )
            if self._profile:
                self._prof_stack.append(step)
            try:
                out += STEP_RENDERERS(self, step, scope)
            finally:
                if self._profile:
                    self._prof_stack.pop()
        return out

    @property
    def num_dispatches(self) -> int:
        """Dispatches per call (a while loop's: one iteration's cond and body)."""

        def count(commands) -> int:
            return sum(
                count(c.cond) + count(c.body) if isinstance(c, HostWhile) else type(c) is Dispatch
                for c in commands
            )

        return count(self._commands)

    def call(self, args) -> list[GpuArray]:
        """Run on ``args`` (GpuArrays, Arrays or numpy values with ``in_avals``); the outputs
        stay on the GPU. One queue submission, unless the program has a while loop (whose
        predicate the host reads after each iteration) or host callbacks (``HostCall``)."""
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
        if self._straight and not self._profile:
            self._submit_recorded(slots)
        else:
            self._submit(self._run(self._commands, slots, []), slots)
        return [GpuArray(o, a, a.weak_type) for o, a in zip(outs, self.out_avals)]

    def _submit_recorded(self, slots: dict) -> None:
        """``_submit`` of all the commands (dispatches alone) from the list of (pipeline,
        bind group, grid) built for these buffers, the one built last call when the buffers
        repeat (bounded: the 16 most recent sets)."""
        buffers = tuple(b.buffer for b in slots.values())
        key = tuple(map(id, buffers))
        entry = self._recorded.get(key)
        if entry is None:
            commands = [(d.pipeline, self._bind_group(d, slots), d.grid) for d in self._commands]
            handles = None
            if _RAW_PASS is not None:
                handles = [(p._internal, g._internal, *grid) for p, g, grid in commands]
            entry = self._recorded[key] = (
                commands,  # (the handles' objects: alive while the entry is)
                handles,
                buffers,  # (alive while the entry is: their ids key it)
            )
            if len(self._recorded) > 16:
                self._recorded.popitem(last=False)
        commands, handles, _ = entry
        if not commands:
            return
        encoder = self.rt.device.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        if handles is not None:  # wgpu-native's C calls: a fifth of the wrappers' time
            set_pipeline, set_bind_group, dispatch, null = _RAW_PASS
            c = cpass._internal
            for pipeline, group, x, y, z in handles:
                set_pipeline(c, pipeline)
                set_bind_group(c, 0, group, 0, null)
                dispatch(c, x, y, z)
        else:
            for pipeline, group, grid in commands:
                cpass.set_pipeline(pipeline)
                cpass.set_bind_group(0, group)
                cpass.dispatch_workgroups(*grid)
        cpass.end()  # (a recording error surfaces here or at finish, as through the wrappers)
        self.rt.queue.submit([encoder.finish()])

    def _run(self, commands: list, slots: dict, pending: list) -> list:
        """Run ``commands`` after the dispatches ``pending``: dispatches are collected, and
        each while loop submits what precedes its predicate's read-back; returns the
        dispatches still to submit."""
        for c in commands:
            if type(c) is Dispatch:
                pending.append(c)
                continue
            if type(c) is HostCall:  # the work before it is done, then the host runs it
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

    def _call_profiled(self, args) -> list[GpuArray]:
        """``call`` of a profiled build: each dispatch is submitted alone and waited for
        (``_submit_timed``), and the open profiles get this call's times."""
        n = len(self.profile_info.steps)
        self._prof_times = (np.zeros(n), np.zeros(n, np.int64))
        t0 = time.perf_counter()
        outs = GpuExecutable.call(self, args)  # (each dispatch waited for: the work is done)
        wall = time.perf_counter() - t0
        seconds, runs = self._prof_times
        step_profile.report(self.profile_info, seconds, runs, wall)
        return outs

    def _submit(self, dispatches: list, slots: dict) -> None:
        if not dispatches:
            return
        if self._profile:
            self._submit_timed(dispatches, slots)
            return
        encoder = self.rt.device.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        for d in dispatches:
            cpass.set_pipeline(d.pipeline)
            cpass.set_bind_group(0, self._bind_group(d, slots))
            cpass.dispatch_workgroups(*d.grid)
        cpass.end()
        self.rt.queue.submit([encoder.finish()])

    def _submit_timed(self, dispatches: list, slots: dict) -> None:
        """Profiled builds: the device's own clock where the adapter has timestamp queries
        (:meth:`_submit_stamped`, unless ``PROFILE_CLOCK`` is "host"), else the host's
        (:meth:`_submit_host_timed`)."""
        if self.PROFILE_CLOCK != "host" and self.rt.timestamps is not None:
            self._submit_stamped(dispatches, slots)
        else:
            self._submit_host_timed(dispatches, slots)

    #: how profiled builds time dispatches: "auto" (device timestamps where the adapter has
    #: them, else the host clock) or "host" (tests and comparisons force the fallback)
    PROFILE_CLOCK = "auto"
    #: dispatches per timestamped submission (two queries each: WebGPU allows 4096 per set)
    STAMPED_DISPATCHES = 2048

    def _submit_stamped(self, dispatches: list, slots: dict) -> None:
        """Profiled builds on an adapter with timestamp queries: the dispatches are recorded
        as the ordinary build records them, with the device's clock read before and after
        each (inside the pass where ``rt.timestamps == "inside-passes"``, else by one pass per
        dispatch with timestampWrites), and submitted at once; each dispatch's time is its
        two stamps' difference: the device's time alone, no submission or read-back."""
        rt = self.rt
        seconds, runs = self._prof_times
        stamps = getattr(self, "_stamps", None)
        if stamps is None:
            count = 2 * self.STAMPED_DISPATCHES
            stamps = self._stamps = (
                rt.device.create_query_set(type="timestamp", count=count),
                rt.device.create_buffer(
                    size=8 * count,
                    usage=rt.wgpu.BufferUsage.QUERY_RESOLVE | rt.wgpu.BufferUsage.COPY_SRC,
                ),
            )
        queries, resolved = stamps
        inside = rt.timestamps == "inside-passes"
        for start in range(0, len(dispatches), self.STAMPED_DISPATCHES):
            chunk = dispatches[start : start + self.STAMPED_DISPATCHES]
            encoder = rt.device.create_command_encoder()
            if inside:
                cpass = encoder.begin_compute_pass()
            for i, d in enumerate(chunk):
                if inside:
                    _write_timestamp(cpass, queries, 2 * i)
                else:
                    cpass = encoder.begin_compute_pass(
                        timestamp_writes={
                            "query_set": queries,
                            "beginning_of_pass_write_index": 2 * i,
                            "end_of_pass_write_index": 2 * i + 1,
                        }
                    )
                cpass.set_pipeline(d.pipeline)
                cpass.set_bind_group(0, self._bind_group(d, slots))
                cpass.dispatch_workgroups(*d.grid)
                if inside:
                    _write_timestamp(cpass, queries, 2 * i + 1)
                else:
                    cpass.end()
            if inside:
                cpass.end()
            encoder.resolve_query_set(queries, 0, 2 * len(chunk), resolved, 0)
            rt.queue.submit([encoder.finish()])
            ticks = np.frombuffer(
                rt.queue.read_buffer(resolved, 0, 16 * len(chunk)), np.uint64
            ).astype(np.int64)
            spans = np.maximum(ticks[1::2] - ticks[0::2], 0) * (rt.timestamp_period * 1e-9)
            for d, span in zip(chunk, spans):
                slot = self._prof_of[id(d)]
                seconds[slot] += span
                runs[slot] += 1

    def _submit_host_timed(self, dispatches: list, slots: dict) -> None:
        """Profiled builds without device timestamps: each dispatch in a submission of its
        own, timed from its submit until the queue is idle (a 4-byte read of a buffer it
        binds: wgpu 0.32's work-done callback is not usable from Python), so each time
        includes a submission's and a read's overhead."""
        queue = self.rt.queue
        seconds, runs = self._prof_times
        for d in dispatches:
            encoder = self.rt.device.create_command_encoder()
            cpass = encoder.begin_compute_pass()
            cpass.set_pipeline(d.pipeline)
            cpass.set_bind_group(0, self._bind_group(d, slots))
            cpass.dispatch_workgroups(*d.grid)
            cpass.end()
            command = encoder.finish()
            t = time.perf_counter()
            queue.submit([command])
            self.rt.wait(slots[d.bindings[0][0]])
            slot = self._prof_of[id(d)]
            seconds[slot] += time.perf_counter() - t
            runs[slot] += 1

    def _bind_group(self, d: Dispatch, slots):
        bufs = tuple(slots[key].buffer for key, _ in d.bindings)
        key = (id(d.pipeline), *map(id, bufs))
        bg = self._bind_groups.get(key)
        if bg is None:
            bg = self.rt.device.create_bind_group(
                layout=d.pipeline.get_bind_group_layout(0),
                entries=[
                    {"binding": k, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                    for k, b in enumerate(bufs)
                ],
            )
            self._bind_groups[key] = (bg, bufs)  # the buffers stay alive with their group
            if len(self._bind_groups) > 64:
                self._bind_groups.popitem(last=False)
            return bg
        return bg[0]

    def as_text(self) -> str:
        """The optimised jaxpr, the fusion plan and the WGSL of every shader."""
        shaders = "\n".join(
            f"// shader {s.name}: workgroups {s.grid}, bindings "
            f"{[k for k, _ in s.bindings]}\n{s.source}"
            for s in self.shaders
        )
        return (
            f"# optimised jaxpr\n{self.jaxpr}\n\n# {self.program.describe()}\n\n"
            f"# WGSL on {self.rt.name}\n{shaders}"
        )


def _raw_pass_calls():
    """wgpu-native's C functions setting a compute pass's pipeline and bind group and
    dispatching, with the NULL their dynamic offsets take, or None where this wgpu has
    no such backend. wgpu-py's methods wrap each call in an error capture (about 1.5 us
    a call); a pass records its errors and reports them when it ends or its encoder
    finishes, which still go through the wrappers."""
    try:
        from wgpu.backends.wgpu_native import _api

        lib = _api.lib
        return (
            lib.wgpuComputePassEncoderSetPipeline,
            lib.wgpuComputePassEncoderSetBindGroup,
            lib.wgpuComputePassEncoderDispatchWorkgroups,
            _api.ffi.NULL,
        )
    except Exception:  # another wgpu backend: the methods
        return None


_RAW_PASS = _raw_pass_calls()


def _write_timestamp(cpass, queries, index: int) -> None:
    """The device's clock into ``queries[index]`` at this point of compute pass ``cpass``
    (wgpu-native's extension: WebGPU itself stamps only a pass's start and end)."""
    from wgpu.backends.wgpu_native.extras import write_timestamp

    write_timestamp(cpass, queries, index)


def _carry_buffers(steps) -> list:
    """The home and spare buffers of every loop carry in ``steps`` (sub-programs included)."""
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


def _arena_offsets(prog: fusion.Program, place: dict) -> int:
    """Word offsets of the temporaries in the arena (the planner's liveness first fit, in
    16-word slots); returns the arena's size in words."""
    offsets, top = fusion.liveness_offsets(prog, lambda b: -(-_words(b) // 16) * 16)
    for b in prog.temps:
        place[b.id] = ("arena", offsets[b.id])
    return top
