"""Each step kind's dispatches on the GPU: the step-renderer table and the commands.

:data:`STEP_RENDERERS` maps a step's type (``fusion.Kernel``/``Gemm``, the steps of
``lowering/steps.py``) to the function giving its commands, ``fn(exe, step, scope)``: ``exe``
is the :class:`~fungrad.lowering.gpu.executable.GpuExecutable` being built (buffer places,
``_dispatch`` to compile a shader, ``_flatten`` for sub-programs, the ``scratch_words`` and
``ctl_words`` it reserves), ``scope`` the loops and cond branches around the step. Which
scheme a step runs by is asked of ``schemes.py``; the shaders come from the renderers
(``shader.py``, ``gemm.py``, ``scan.py``, ``sort.py``, ``linalg.py``, ``frame.py``). A new step
kind is one function here and one entry in the table.

Commands: a :class:`Dispatch` (a compiled pipeline, its bindings and grid), a
:class:`HostWhile` (a while loop run from the host, its predicate read back after each
iteration) or a :class:`HostCall` (a host callback between dispatches).
"""

from __future__ import annotations

import numpy as np

from fungrad.lowering.fusion import Gemm, Kernel, LoweringError
from fungrad.lowering.gpu import runtime as gpu
from fungrad.lowering.gpu.frame import Scope, render_copy, render_counter, render_fill
from fungrad.lowering.gpu.gemm import default_tile, render_gemm, render_gemm_sum
from fungrad.lowering.gpu.linalg import render_linalg
from fungrad.lowering.gpu.scan import render_scan
from fungrad.lowering.gpu.schemes import (
    ScanInfo,
    Scatter,
    Tree,
    gemm_split,
    gemm_tile,
    partial_words,
    scan_blocks,
    scan_of,
    scan_rows,
    scatter_like,
    sort_by_ranks,
    split_bindings,
    tree_groups,
)
from fungrad.lowering.gpu.shader import render_kernel
from fungrad.lowering.gpu.sort import bitonic_width, render_bitonic, render_sort
from fungrad.lowering.render import StepRenderers
from fungrad.lowering.steps import (
    CholeskyStep,
    CondStep,
    HostCallStep,
    LuStep,
    ScanStep,
    SortStep,
    TriangularSolveStep,
    WhileStep,
)


def _words(b) -> int:
    return max(1, b.size)


# -- the step renderers ---------------------------------------------------------------------------


def _kernel_step(exe, kern: Kernel, scope: Scope) -> list:
    """A kernel: a scan's passes, or the kernel (split where it binds too many buffers) with
    its reductions in one invocation or as workgroup trees."""
    place, rt = exe._place, exe.rt
    scan = scan_of(kern)
    if scan is not None:
        return _scan(exe, kern, scan, scope)
    groups = tree_groups(
        kern, rt, lambda: render_kernel(kern, place, rt.fused_fma, scope).loop_iterations
    )
    out = []
    for k in split_bindings(kern, place, rt.max_bindings - bool(groups)):
        out += _kernel(exe, k, groups, scope)
    return out


def _kernel(exe, kern: Kernel, groups: int, scope: Scope) -> list:
    """The dispatches of one kernel: one, a tree reduction's one or two passes, or a
    parallel scatter's one or three (``Scatter``). Tree partials and the scatter's
    winners live past the arena's temporaries (``scratch_words``)."""
    place, fma = exe._place, exe.rt.fused_fma
    base = exe.arena_words
    if scatter_like(kern):
        (st,) = kern.stores
        if st.combine is not None:
            return exe._dispatch(render_kernel(kern, place, fma, scope, scatter=Scatter("combine")))
        words = _words(st.buffer)
        exe.scratch_words = max(exe.scratch_words, words)
        out = exe._dispatch(render_fill(("arena", base), words, scope))
        for mode in ("claim", "write"):
            out += exe._dispatch(
                render_kernel(kern, place, fma, scope, scatter=Scatter(mode, base))
            )
        return out
    if not groups:
        return exe._dispatch(render_kernel(kern, place, fma, scope))
    out = []
    if groups > 1:
        exe.scratch_words = max(exe.scratch_words, partial_words(kern, groups))
        first = Tree(groups, base, partial=True)
        out += exe._dispatch(render_kernel(kern, place, fma, scope, first))
    return out + exe._dispatch(render_kernel(kern, place, fma, scope, Tree(groups, base)))


def _scan(exe, kern: Kernel, scan: ScanInfo, scope: Scope) -> list:
    """A scan's dispatches (``render_scan``): one invocation per line, or blocks of lines
    (``schemes.scan_blocks``) whose totals live past the arena's temporaries."""
    place, fma = exe._place, exe.rt.fused_fma
    split_bindings(kern, place, exe.rt.max_bindings)  # (says so when too many)
    blocks = scan_blocks(
        kern, scan, exe.rt, lambda: render_scan(kern, scan, place, fma, scope)[0].loop_iterations
    )
    if blocks > 1:
        exe.scratch_words = max(exe.scratch_words, scan_rows(kern, scan) * blocks)
    out = []
    for shader in render_scan(kern, scan, place, fma, scope, blocks, exe.arena_words):
        out += exe._dispatch(shader)
    return out


def _gemm_step(exe, step: Gemm, scope: Scope) -> list:
    """A matmul's dispatches: one, or, where one invocation would loop through ``k`` more
    often than the adapter allows or its tiles would leave a real GPU idle, the contraction
    split into ranges (``schemes.gemm_split``; the tile: ``schemes.gemm_tile``):
    partial products past the arena's temporaries, then their sum."""
    tile = gemm_tile(exe.rt, step) or default_tile()
    shader = render_gemm(step, exe._place, scope, tile=tile)
    split = gemm_split(step, tile, shader.loop_iterations, exe.rt, exe.arena_words)
    if split is None:
        return exe._dispatch(shader)
    exe.scratch_words = max(exe.scratch_words, split.chunks * step.batch * step.m * step.n)
    return exe._dispatch(render_gemm(step, exe._place, scope, split, tile)) + exe._dispatch(
        render_gemm_sum(step, exe._place, scope, split)
    )


def _sort_step(exe, step: SortStep, scope: Scope) -> list:
    """A sort's dispatches: the rank sort (one invocation per element, a loop over its row)
    for short rows, else a bitonic network (``render_bitonic``), whose positions live past
    the arena's temporaries and whose stage parameters take four ``ctl`` words after the
    enclosing loops' counters."""
    n = step.shape[step.dimension]
    if sort_by_ranks(n, exe.rt.loop_limit):
        return exe._dispatch(render_sort(step, exe._place, scope))
    rows = int(np.prod(step.shape, dtype=np.int64)) // n
    exe.scratch_words = max(exe.scratch_words, rows * bitonic_width(step))
    exe.ctl_words = max(exe.ctl_words, scope.loops + 4)
    out = []
    for shader in render_bitonic(step, exe._place, scope, exe.arena_words, scope.loops):
        out += exe._dispatch(shader)
    return out


def _linalg_step(exe, step, scope: Scope) -> list:
    """A Cholesky, triangular solve or LU step (``linalg.render_linalg``): one dispatch for
    the batch, or, for large matrices, passes repeated per column with their grids (each
    shader compiled once), their scratch past the arena's temporaries and their parameters
    in ``ctl`` words after the enclosing loops' counters."""
    passes = render_linalg(step, exe._place, scope, exe.arena_words, scope.loops)
    exe.scratch_words = max(exe.scratch_words, passes.scratch_words)
    exe.ctl_words = max(exe.ctl_words, scope.loops + passes.ctl_words)
    compiled = [exe._dispatch(s) for s in passes.shaders]
    out = []
    for index, grid in passes.runs:
        if compiled[index] and grid[0]:
            (d,) = compiled[index]
            out.append(Dispatch(d.pipeline, d.bindings, grid))
    return out


def _cond_step(exe, step: CondStep, scope: Scope) -> list:
    """Every branch dispatched, each guarded by the index: doing nothing unless selected."""
    n = len(step.branches)
    out = []
    for b, sub in enumerate(step.branches):
        out += exe._flatten(sub, Scope(scope.loops, (*scope.guards, (step.index, b, n))))
    return out


def _scan_step(exe, step: ScanStep, scope: Scope) -> list:
    """A scan loop: its body dispatched once per iteration (one submission for all), its
    per-iteration views (rows of ``xs``/``ys``, the double-buffered carries) offsets in the
    loop counter ``it<d>``."""
    place, d = exe._place, scope.loops
    exe.ctl_words = max(exe.ctl_words, d + 1)
    it = f"it{d}"
    _place_carries(place, step.carries, d)
    for sl in step.xs + step.ys:
        key, base = place[sl.whole.id]
        row = f"({step.length - 1}i - {it})" if step.reverse else it
        size = max(1, sl.view.size)
        place[sl.view.id] = (
            key,
            LoopOffset(
                f"({_offset(base)} + {row} * {size}i)",
                lambda env, base=base, d=d, step=step, size=size: (
                    word_offset(base, env)
                    + size * (step.length - 1 - env[d] if step.reverse else env[d])
                ),
            ),
        )
    body = exe._flatten(step.body, Scope(d + 1, scope.guards))
    out = exe._dispatch(render_counter(d, "0i", place, scope))
    step_it = exe._dispatch(render_counter(d, f"{it} + 1i", place, scope))
    for _ in range(step.length):
        out += body + step_it
    return out


def _while_step(exe, step: WhileStep, scope: Scope) -> list:
    """A while loop run from the host (:class:`HostWhile`), wherever it is: inside a scan's
    body it runs once per iteration of the scan (its counter is the next ``ctl`` word),
    inside another while loop once per iteration of that one, and inside a cond's branch
    its predicate is cleared first, unguarded, so an unselected branch runs no iteration
    (its guarded cond program never sets the predicate)."""
    place, d = exe._place, scope.loops
    exe.ctl_words = max(exe.ctl_words, d + 1)
    _place_carries(place, step.carries, d)
    inner = Scope(d + 1, scope.guards)
    cond = exe._flatten(step.cond, inner)
    body = exe._flatten(step.body, inner) + exe._dispatch(
        render_counter(d, f"it{d} + 1i", place, inner)
    )
    homes = []  # (no guard: they run only after iterations, in a selected branch)
    for c in step.carries:  # after an odd number of iterations: spare -> home
        homes += exe._dispatch(
            render_copy(place[c.home.id], place[c.spare.id], max(1, c.home.size), Scope(d))
        )
    pred = place[step.pred.id]
    if not isinstance(pred[1], int):
        raise LoweringError(f"GPU lowering: the predicate of {step.name} has no fixed place")
    start = exe._dispatch(render_counter(d, "0i", place, scope))
    if scope.guards:
        start += exe._dispatch(render_fill(pred, 1, Scope(d)))
    return [HostWhile(start, cond, pred, body, homes)]


def _host_call_step(exe, step: HostCallStep, scope: Scope) -> list:
    return [HostCall(step, scope, exe._place)]


#: step type -> ``fn(exe, step, scope)`` giving the step's commands
STEP_RENDERERS = StepRenderers(
    "gpu",
    {
        Kernel: _kernel_step,
        Gemm: _gemm_step,
        SortStep: _sort_step,
        CondStep: _cond_step,
        ScanStep: _scan_step,
        WhileStep: _while_step,
        HostCallStep: _host_call_step,
        CholeskyStep: _linalg_step,
        TriangularSolveStep: _linalg_step,
        LuStep: _linalg_step,
    },
)


# -- places in loops ------------------------------------------------------------------------------


class LoopOffset(str):
    """A word offset that changes with the enclosing loops' iterations: its text is the i32
    WGSL expression the shaders compute it with (of the counters ``it<d>``), and
    ``value(counters)`` computes it on the host, where a host call reads and writes
    (``counters``: ``{d: iteration of loop d}``)."""

    def __new__(cls, text: str, value):
        self = super().__new__(cls, text)
        self.value = value
        return self


def word_offset(offset: int | LoopOffset, counters: dict[int, int]) -> int:
    """A place's word offset at the loop iterations ``counters`` (``{d: iteration}``)."""
    return offset if isinstance(offset, int) else offset.value(counters)


def _offset(base: int | str) -> str:
    return base if isinstance(base, str) else f"{base}i"


def _place_carries(place: dict, carries, d: int) -> None:
    """Loop carries alternate between two buffers: iteration ``it<d>`` of loop ``d`` reads
    ``cur`` from the first (even iterations) or the second, and writes ``nxt`` to the
    other."""
    it = f"it{d}"
    for c in carries:
        first, second = (c.home, c.spare) if c.start_home else (c.spare, c.home)
        (k1, o1), (k2, o2) = place[first.id], place[second.id]
        if k1 != k2:
            raise LoweringError("GPU lowering: a loop carry's two buffers must share a slot")
        even = f"({it} % 2i == 0i)"
        place[c.cur.id] = (
            k1,
            LoopOffset(
                f"select({_offset(o2)}, {_offset(o1)}, {even})",
                lambda env, a=o1, b=o2: word_offset(a if env[d] % 2 == 0 else b, env),
            ),
        )
        place[c.nxt.id] = (
            k1,
            LoopOffset(
                f"select({_offset(o1)}, {_offset(o2)}, {even})",
                lambda env, a=o2, b=o1: word_offset(a if env[d] % 2 == 0 else b, env),
            ),
        )


# -- the commands ---------------------------------------------------------------------------------


class Dispatch:
    """One compute dispatch: its pipeline, the slot keys bound, the workgroup grid."""

    __slots__ = ("pipeline", "bindings", "grid")

    def __init__(self, pipeline, bindings, grid):
        self.pipeline, self.bindings, self.grid = pipeline, bindings, grid


class HostWhile:
    """A while loop run from the host: ``start`` resets the counter, then ``cond`` is
    submitted and its predicate (``pred``: slot key, word offset) read back before each
    ``body``; ``homes`` copy carries left in their spare buffers home."""

    __slots__ = ("start", "cond", "pred", "body", "homes")

    def __init__(self, start, cond, pred, body, homes):
        self.start, self.cond, self.pred, self.body, self.homes = start, cond, pred, body, homes


class HostCall:
    """A host callback (``steps.HostCallStep``) between dispatches: the queue's work so
    far is submitted, the operands are read back, the callback runs, its results are written
    to their buffers. Inside loops and branches, where places are expressions of the loop
    counters and steps are guarded by branch indices, the counters and indices are read back
    first: the call happens only in the selected branch, once per iteration."""

    __slots__ = ("step", "scope", "ins", "outs", "guards")

    def __init__(self, step, scope: Scope, place: dict):
        self.step, self.scope = step, scope
        self.ins = [(place[b.id], b) for b in step.operands]
        self.outs = [(place[b.id], b) for b in step.results]
        self.guards = [(place[index.id], index, branch, n) for index, branch, n in scope.guards]

    def run(self, rt, slots: dict) -> None:
        env: dict = {}
        if self.scope.loops:
            ctl = np.frombuffer(
                rt.queue.read_buffer(slots["ctl"].buffer, 0, 4 * self.scope.loops), np.int32
            )
            env.update((d, int(v)) for d, v in enumerate(ctl))
        for (key, off), index, branch, n in self.guards:
            word = _read_words(rt, slots, key, word_offset(off, env), 1)
            raw = word.view(np.int32)[0] if index.dtype != np.bool_ else int(word[0] != 0)
            if min(max(int(raw), 0), n - 1) != branch:
                return  # an unselected branch: its steps do nothing
        values = []
        for (key, off), b in self.ins:
            words = _read_words(rt, slots, key, word_offset(off, env), b.size)
            values.append(
                (words != 0).reshape(b.shape)
                if b.dtype == np.bool_
                else words.view(b.dtype).reshape(b.shape).copy()
            )
        outs = self.step.execute(values)
        for ((key, off), b), v in zip(self.outs, outs):
            if b.size:
                rt.queue.write_buffer(
                    slots[key].buffer,
                    4 * word_offset(off, env),
                    gpu.to_words(np.asarray(v, b.dtype)),
                )


def _read_words(rt, slots: dict, key: str, offset: int, n: int) -> np.ndarray:
    if not n:
        return np.zeros(0, np.uint32)
    return np.frombuffer(rt.queue.read_buffer(slots[key].buffer, 4 * offset, 4 * n), np.uint32)
