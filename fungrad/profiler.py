"""``fungrad.profile()``: per-kernel wall times of the jitted programs run inside a block.

    with fg.profile() as prof:
        for _ in range(10):
            params = step(params, x, y)
    print(prof.table())          # kernels sorted by total time
    prof.kernels()               # KernelRecord per timed step
    fg.viz(step, params, x, y, profile=prof.times())   # times laid over the graph

While a profile is open, jitted calls run a *profiled build* of their program instead of the
ordinary one: the same plan, compiled separately (once per signature, on first use inside a
profile), that times each step (see ``fungrad/lowering/profile.py``). On the CPU every fused
kernel, matrix product (own kernel or BLAS), LAPACK/FFT library call, sort, host callback and
control-flow step is timed with the monotonic clock, and the steps in a loop body each time
they run; on the GPU each dispatch is submitted alone and waited for. The ordinary builds and
the fast path of jitted calls carry no timing code: a profile only sends calls through the
general path (``config.jit_general_only``) while it is open.

The results are identical with and without profiling (the same plan and code, plus clock
reads between steps). Times include what a step costs at that place in the program (caches
warmed or not by the previous step). The timing costs ~0.15 us per step run (two clock reads
and an add; a 200 000-iteration loop of two tiny kernels ran 0.32 us per iteration slower), so
times of sub-microsecond steps in loop bodies are mostly the timer's.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from fungrad.config import config
from fungrad.lowering import profile as step_profile

__all__ = ["KernelRecord", "Profile", "ProgramRecord", "profile"]


class KernelRecord(NamedTuple):
    """One timed step of one program.

    ``program``: the jitted function's name (``f#2`` for a second program of that name, as
    ``grad(jit(f))``'s forward and backward parts); ``name``: the step's name in the fusion
    plan (``k3`` for a kernel, ``dot_general_t4`` for a matrix product writing ``t4``,
    ``cholesky_t2``, ``host1``, ``scan1``...); ``kind``: ``kernel``, ``gemm``, ``lapack``,
    ``fft``, ``sort``, ``host_callback``, ``cond``, ``while``, ``scan`` or (GPU) ``dispatch``;
    ``eqns``: indices of the equations of the program's optimised jaxpr
    (:meth:`Profile.programs`) the step computes; ``total_s`` and ``calls``: seconds and runs
    summed over the block (a step in a loop body runs once per iteration); ``parent``: the
    control-flow step it runs in (its time is part of the parent's), or None."""

    program: str
    name: str
    kind: str
    eqns: tuple[int, ...]
    total_s: float
    calls: int
    parent: str | None

    @property
    def mean_s(self) -> float:
        """Seconds per run."""
        return self.total_s / self.calls if self.calls else 0.0


class ProgramRecord(NamedTuple):
    """One profiled program: its ``name`` (as in :class:`KernelRecord`), ``calls``, ``total_s``
    (wall seconds of its calls, measured around the native call) and the optimised ``jaxpr``
    that :attr:`KernelRecord.eqns` index."""

    name: str
    calls: int
    total_s: float
    jaxpr: object


class _Program:
    __slots__ = ("info", "name", "seconds", "runs", "calls", "wall")

    def __init__(self, info, name: str):
        self.info, self.name = info, name
        self.seconds = np.zeros(len(info.steps))
        self.runs = np.zeros(len(info.steps), np.int64)
        self.calls, self.wall = 0, 0.0


_open_lock = threading.Lock()


class Profile:
    """An open (or finished) profile: use :func:`profile` (a context manager)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._programs: dict[int, _Program] = {}  # id(ProgramInfo) -> accumulated times
        self._infos: list = []  # keeps the ProgramInfos alive (their ids key _programs)
        self._names: dict[str, int] = {}
        self._open = False

    def __enter__(self) -> Profile:
        if self._open:
            raise RuntimeError("fungrad.profile: this profile is already open")
        with _open_lock:
            self._open = True
            step_profile.sinks.append(self)
            config._profiling = True
        return self

    def __exit__(self, *exc) -> None:
        with _open_lock:
            self._open = False
            if self in step_profile.sinks:
                step_profile.sinks.remove(self)
            config._profiling = bool(step_profile.sinks)

    def record(self, info, seconds, runs, wall_s: float) -> None:
        """One call of a profiled program (called by the executable; see
        ``lowering/profile.py``)."""
        with self._lock:
            p = self._programs.get(id(info))
            if p is None:
                n = self._names[info.name] = self._names.get(info.name, 0) + 1
                name = info.name if n == 1 else f"{info.name}#{n}"
                p = self._programs[id(info)] = _Program(info, name)
                self._infos.append(info)
            p.seconds += seconds
            p.runs += runs
            p.calls += 1
            p.wall += wall_s

    def programs(self) -> list[ProgramRecord]:
        """The programs run inside the block, in the order they first ran."""
        with self._lock:
            return [
                ProgramRecord(p.name, p.calls, p.wall, p.info.jaxpr)
                for p in self._programs.values()
            ]

    def kernels(self) -> list[KernelRecord]:
        """Every timed step of every program run inside the block (steps that never ran
        included, with zero calls), sorted by total time, longest first."""
        with self._lock:
            out = [
                KernelRecord(
                    p.name, s.name, s.kind, s.eqns, float(p.seconds[i]), int(p.runs[i]), s.parent
                )
                for p in self._programs.values()
                for i, s in enumerate(p.info.steps)
            ]
        out.sort(key=lambda r: -r.total_s)
        return out

    def times(self, program: str | None = None) -> dict[str, float]:
        """``{step name: total seconds}`` of one program (what ``fg.viz(..., profile=)``
        overlays). ``program`` may be omitted when only one program ran."""
        names = [p.name for p in self.programs()]
        if program is None:
            if len(names) != 1:
                raise ValueError(
                    f"Profile.times: {len(names)} programs ran in the profile "
                    f"({', '.join(names) or 'none'}); name one: times(program=...)"
                )
            program = names[0]
        if program not in names:
            raise ValueError(
                f"Profile.times: no program {program!r} ran in the profile; the programs are "
                f"{', '.join(names) or 'none'}"
            )
        return {r.name: r.total_s for r in self.kernels() if r.program == program}

    def table(self, limit: int | None = None) -> str:
        """The steps as a text table, longest total first: program, name, kind, calls, total
        and mean time, and share of the program's wall time (steps nested in a control-flow
        step are indented under it; their time is also part of it). ``limit``: at most that
        many rows."""
        walls = {p.name: p.total_s for p in self.programs()}
        rows = self.kernels()
        if limit is not None:
            rows = rows[:limit]
        head = ("program", "kernel", "kind", "calls", "total", "mean", "% of program")
        body = [
            (
                r.program,
                ("  " if r.parent else "") + r.name,
                r.kind,
                str(r.calls),
                _seconds(r.total_s),
                _seconds(r.mean_s),
                f"{100 * r.total_s / walls[r.program]:.1f}" if walls[r.program] else "-",
            )
            for r in rows
        ]
        width = [max(len(row[i]) for row in (head, *body)) for i in range(len(head))]
        lines = [
            "  ".join(
                c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, width))
            )
            for row in (head, *body)
        ]
        lines.insert(1, "-" * len(lines[0]))
        total = sum(walls.values())
        calls = sum(p.calls for p in self.programs())
        lines.append(f"{len(walls)} program(s), {calls} call(s), {_seconds(total)} in all")
        return "\n".join(lines)

    def __repr__(self) -> str:
        state = "open" if self._open else "closed"
        return f"<fungrad.profile ({state}): {len(self._programs)} program(s)>"


def _seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def profile() -> Profile:
    """Per-kernel wall times of the jitted programs run inside a ``with`` block.

    Returns a :class:`Profile`; use it as a context manager. Inside the block every jitted
    call (at top level, inside ``grad``/``vmap`` evaluated eagerly, a ``Compiled`` from
    ``jit(f).lower(...).compile()``) runs a build of its program that times each step: on the
    CPU each fused kernel, matrix product, library call (LAPACK, FFT, sort), host callback and
    control-flow step; on the GPU each dispatch. The build is compiled once per signature, the
    first time the function runs inside a profile; results are bitwise identical to the
    ordinary build, and outside the block calls run the ordinary build at full speed.

    Afterwards ``prof.table()`` prints the steps sorted by total time, ``prof.kernels()``
    gives :class:`KernelRecord` s (program, name, kind, equations covered, total seconds,
    calls), ``prof.programs()`` the programs with their jaxprs, and ``prof.times()`` a
    ``{kernel name: seconds}`` dict for ``fg.viz(..., profile=...)``.

    Example::

        with fg.profile() as prof:
            loss, grads = step(params, batch)
        print(prof.table())
    """
    return Profile()
