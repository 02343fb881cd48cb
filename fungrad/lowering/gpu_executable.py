"""A jaxpr compiled for the GPU: WGSL pipelines plus what a call needs.

``GpuExecutable(closed)`` plans the program with the shared fusion planner (with the GPU's
placement policy, :class:`GpuPlanner`), renders one shader per kernel (``wgsl.py``), compiles
the pipelines once, and at each call records every dispatch into one command encoder and makes
one queue submission. Inputs that are :class:`~fungrad.devices.GpuArray` are bound as they
are; host arrays are uploaded. Outputs are GpuArrays: they stay on the device.

Where buffers live: each input and output has its own device buffer (slot ``in<i>`` /
``out<i>``); the constants share one buffer uploaded at compile time (``consts``); the
temporaries share one arena per call (``arena``) at word offsets chosen by liveness, as on the
CPU; loop counters live in ``ctl``. Bind groups are cached per pipeline and set of buffers,
which repeat from call to call because buffers come from the runtime's pool.

Control flow: a scan's body is dispatched once per iteration, its per-iteration views (the
rows of ``xs``/``ys``, the double-buffered carries) being offsets computed in the shaders from
the loop counter; a cond dispatches every branch, each guarded by the index; a while loop is
run from the host, reading its predicate back after each iteration.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np

from fungrad import core
from fungrad.devices import GpuArray, device_buffer
from fungrad.lowering import fusion, gpu, wgsl
from fungrad.lowering.fusion import Gemm, Kernel, LoweringError

_compile_lock = threading.RLock()


class GpuPlanner(fusion.Planner):
    """The planner with the GPU's placement policy. On the CPU a reduction that depends on
    the outer loops only (a row's maximum) is computed once per row by the loop nest; on the
    GPU every invocation computes its own element, so such a reduction would be recomputed by
    every invocation of the row: it is stored by an earlier kernel instead."""

    backend = "gpu"

    def _recomputed_reductions(self, kern: Kernel) -> list:
        bad = super()._recomputed_reductions(kern)
        loops = set(kern.loops)
        for e in fusion._walk([s.value for s in kern.stores]):
            if e.op == "reduce" and not loops <= e.free:
                t = self.ctx.reduce_origin.get(e)
                if t is not None and t.buffer is None and t not in bad:
                    bad.append(t)
        return bad


def check_dtypes(jaxpr: core.ClosedJaxpr, name: str) -> None:
    """TypeError unless every value of the program has a 32-bit (or bool) dtype."""
    def walk(j):
        for v in [*j.invars, *j.outvars, *j.constvars,
                  *(x for e in j.eqns for x in e.outvars)]:
            aval = getattr(v, "aval", None)
            dt = getattr(aval, "dtype", None)
            if dt is not None and np.dtype(dt) not in wgsl.DEVICE_DTYPES:
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
            self.program = fusion.plan(self.jaxpr, name, planner=GpuPlanner)
        prog = self.program
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
        self.shaders: list[wgsl.Shader] = []
        self._pipelines: dict[str, object] = {}
        self.ctl_words = 0
        self._commands = self._flatten(prog.steps, wgsl.TOP)
        for dst, src, words in copies_out:
            self._commands += self._dispatch(wgsl.render_copy(dst, src, words))
        self._bind_groups: OrderedDict = OrderedDict()
        self._out_words = [max(1, int(np.prod(a.shape, dtype=np.int64))) for a in self.out_avals]
        self.compile_time_s = time.perf_counter() - t0

    # -- the program as a list of dispatches ------------------------------------------------------
    def _dispatch(self, shader: wgsl.Shader) -> list:
        self.shaders.append(shader)
        if not shader.grid[0]:
            return []
        p = self._pipelines.get(shader.source)
        if p is None:
            p = self._pipelines[shader.source] = self.rt.pipeline(shader.name, shader.source)
        return [_Dispatch(p, shader.bindings, shader.grid)]

    def _flatten(self, steps, scope: wgsl.Scope) -> list:
        """The commands running ``steps`` in ``scope``: dispatches, and host-driven while
        loops. A scan's body is dispatched once per iteration (one submission for all);
        a cond's branches are all dispatched, each doing nothing unless selected."""
        from fungrad.lowering.control_flow import CondStep, ScanStep, WhileStep
        from fungrad.lowering.sort_step import SortStep
        place, rt, out = self._place, self.rt, []
        for step in steps:
            if isinstance(step, Kernel):
                for k in _split_bindings(step, place, rt.max_bindings):
                    out += self._dispatch(wgsl.render_kernel(k, place, rt.fused_fma, scope))
            elif isinstance(step, Gemm):
                out += self._dispatch(wgsl.render_gemm(step, place, scope))
            elif isinstance(step, SortStep):
                out += self._dispatch(wgsl.render_sort(step, place, scope))
            elif isinstance(step, CondStep):
                n = len(step.branches)
                for b, sub in enumerate(step.branches):
                    inner = wgsl.Scope(scope.loops, (*scope.guards, (step.index, b, n)))
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
                body = self._flatten(step.body, wgsl.Scope(d + 1, scope.guards))
                out += self._dispatch(wgsl.render_counter(d, "0i", place, scope))
                step_it = self._dispatch(wgsl.render_counter(d, f"{it} + 1i", place, scope))
                for _ in range(step.length):
                    out += body + step_it
            elif isinstance(step, WhileStep):
                if scope.loops or scope.guards:
                    raise LoweringError(
                        f"jit({self.name}, backend='gpu'): a while_loop inside another loop or "
                        "a cond has no GPU lowering yet (the GPU runs while loops from the "
                        "host); use fori_loop/scan, or backend='cpu'")
                self.ctl_words = max(self.ctl_words, 1)
                _place_carries(place, step.carries, "it0")
                inner = wgsl.Scope(1, ())
                cond = self._flatten(step.cond, inner)
                body = self._flatten(step.body, inner) + self._dispatch(
                    wgsl.render_counter(0, "it0 + 1i", place, inner))
                homes = []
                for c in step.carries:  # after an odd number of iterations: spare -> home
                    words = max(1, c.home.size)
                    homes += self._dispatch(wgsl.render_copy(place[c.home.id],
                                                             place[c.spare.id], words))
                out.append(_HostWhile(self._dispatch(wgsl.render_counter(0, "0i", place)),
                                      cond, place[step.pred.id], body, homes))
            else:
                raise LoweringError(
                    f"jit({self.name}, backend='gpu'): the {type(step).__name__} step "
                    f"{step.name} has no GPU lowering; use backend='cpu' for this function")
        return out

    @property
    def num_dispatches(self) -> int:
        """Dispatches per call (a while loop's: one iteration's cond and body)."""
        n = 0
        for c in self._commands:
            n += len(c.cond) + len(c.body) if isinstance(c, _HostWhile) else 1
        return n

    def call(self, args) -> list[GpuArray]:
        """Run on ``args`` (GpuArrays, Arrays or numpy values with ``in_avals``); the outputs
        stay on the GPU. One queue submission, unless the program has a while loop (whose
        predicate the host reads after each iteration)."""
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
        pending: list = []
        for c in self._commands:
            if isinstance(c, _Dispatch):
                pending.append(c)
                continue
            self._submit(pending + c.start, slots)
            pending = []
            iterations = 0
            while True:
                self._submit(c.cond, slots)
                key, offset = c.pred
                if not rt.queue.read_buffer(slots[key].buffer, 4 * offset, 4)[0]:
                    break
                self._submit(c.body, slots)
                iterations += 1
            if iterations % 2:
                pending += c.homes
        self._submit(pending, slots)
        return [GpuArray(o, a, a.weak_type) for o, a in zip(outs, self.out_avals)]

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


def _carry_buffers(steps) -> list:
    """The home and spare buffers of every loop carry in ``steps`` (sub-programs included)."""
    from fungrad.lowering.control_flow import CondStep, ScanStep, WhileStep
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
