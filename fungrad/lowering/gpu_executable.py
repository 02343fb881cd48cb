"""A jaxpr compiled for the GPU: WGSL pipelines plus what a call needs.

``GpuExecutable(closed)`` plans the program with the shared fusion planner (with the GPU's
placement policy, :class:`GpuPlanner`), renders one shader per kernel (``wgsl.py``), compiles
the pipelines once, and at each call records every dispatch into one command encoder and makes
one queue submission. Inputs that are :class:`~fungrad.devices.GpuArray` are bound as they
are; host arrays are uploaded. Outputs are GpuArrays: they stay on the device.

Where buffers live: each input and output has its own device buffer (slot ``in<i>`` /
``out<i>``); the constants share one buffer uploaded at compile time (``consts``); the
temporaries share one arena per call (``arena``) at word offsets chosen by liveness, as on the
CPU. Bind groups are cached per dispatch and set of buffers, which repeat from call to call
because buffers come from the runtime's pool.
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
        self.shaders: list[wgsl.Shader] = []
        for step in prog.steps:
            if isinstance(step, Kernel):
                self.shaders += [wgsl.render_kernel(k, place, rt.fused_fma)
                                 for k in _split_bindings(step, place, rt.max_bindings)]
            elif isinstance(step, Gemm):
                self.shaders.append(wgsl.render_gemm(step, place))
            else:
                raise LoweringError(
                    f"jit({name}, backend='gpu'): the {type(step).__name__} step {step.name} "
                    "(control flow or sort) has no GPU lowering yet; use backend='cpu' for "
                    "this function")
        self._dispatches = [(rt.pipeline(s.name, s.source), s.bindings, s.grid)
                            for s in self.shaders if s.grid[0]]
        self._bind_groups: OrderedDict = OrderedDict()
        self._out_words = [max(1, int(np.prod(a.shape, dtype=np.int64))) for a in self.out_avals]
        self.compile_time_s = time.perf_counter() - t0

    @property
    def num_dispatches(self) -> int:
        """Dispatches per call (kernels with work to do)."""
        return len(self._dispatches)

    def call(self, args) -> list[GpuArray]:
        """Run on ``args`` (GpuArrays, Arrays or numpy values with ``in_avals``); the outputs
        stay on the GPU."""
        rt = self.rt
        slots = {f"in{i}": device_buffer(a) for i, a in enumerate(args)}
        outs = [rt.alloc(w) for w in self._out_words]
        slots.update((f"out{i}", o) for i, o in enumerate(outs))
        if self._consts is not None:
            slots["consts"] = self._consts
        if self.arena_words:
            slots["arena"] = rt.alloc(self.arena_words)
        encoder = rt.device.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        for i, (pipeline, bindings, grid) in enumerate(self._dispatches):
            cpass.set_pipeline(pipeline)
            cpass.set_bind_group(0, self._bind_group(i, pipeline, bindings, slots))
            cpass.dispatch_workgroups(*grid)
        cpass.end()
        rt.queue.submit([encoder.finish()])
        return [GpuArray(o, a, a.weak_type) for o, a in zip(outs, self.out_avals)]

    def _bind_group(self, i: int, pipeline, bindings, slots):
        bufs = tuple(slots[key].buffer for key, _ in bindings)
        key = (i, *map(id, bufs))
        bg = self._bind_groups.get(key)
        if bg is None:
            bg = self.rt.device.create_bind_group(
                layout=pipeline.get_bind_group_layout(0),
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


def _arena_offsets(prog: fusion.Program, place: dict) -> int:
    """Word offsets of the temporaries in the arena, reusing a slot once its last reader has
    run (first fit by liveness); returns the arena's size in words."""
    first, last = {}, {}
    for i, step in enumerate(prog.steps):
        for b in step.writes():
            first.setdefault(b.id, i)
            last[b.id] = max(last.get(b.id, i), i)
        for b in step.reads():
            last[b.id] = i
    live: list[tuple[int, int, int]] = []
    top = 0
    for b in sorted(prog.temps, key=lambda b: first.get(b.id, 0)):
        start = first.get(b.id, 0)
        live = [x for x in live if x[2] >= start]
        size = -(-_words(b) // 16) * 16
        offset = 0
        for off, sz, _ in sorted(live):
            if off - offset >= size:
                break
            offset = max(offset, off + sz)
        place[b.id] = ("arena", offset)
        live.append((offset, size, last.get(b.id, start)))
        top = max(top, offset + size)
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
