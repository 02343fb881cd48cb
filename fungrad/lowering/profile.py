"""What a profiled executable records, backend-neutral: the steps it times and the equations
each one computes, and where the times go.

``fungrad.profile()`` (``fungrad/profiler.py``) makes jitted calls run *profiled* executables:
a separate build of the same program, made only while a profile is open, that times every
step (CPU: a fused kernel, a matrix product, a library call, a host callback, a control-flow
step and the steps of its bodies; GPU: each dispatch). Ordinary executables carry no timing
code at all.

This module holds what both backends share:

* :func:`step_table`: every step of a :class:`~fungrad.lowering.fusion.Program` (nested bodies
  included) with the name a profile reports it under (:func:`step_label`), its kind and the
  enclosing control-flow step;
* :class:`Coverage`: while a profiled executable's program is planned it records which
  equations of the jaxpr each step computes (``fusion.rule_watch``), so a viewer can lay the
  times over the jaxpr;
* :data:`sinks` and :func:`report`: the open profiles, and how an executable hands them one
  call's times.
"""

from __future__ import annotations

from dataclasses import dataclass

from fungrad.lowering import fusion
from fungrad.lowering.steps import (
    CholeskyStep,
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

__all__ = ["Coverage", "ProgramInfo", "StepInfo", "report", "sinks", "step_label", "step_table"]

#: the open profiles (``fungrad.profiler.Profile``), innermost last: each gets every call's
#: times through ``record(info, seconds, calls, wall_s)``
sinks: list = []

_KINDS = {
    fusion.Kernel: "kernel",
    fusion.Gemm: "gemm",
    CholeskyStep: "lapack",
    TriangularSolveStep: "lapack",
    LuStep: "lapack",
    QRStep: "lapack",
    GeqrfStep: "lapack",
    EighStep: "lapack",
    SVDStep: "lapack",
    GeevStep: "lapack",
    SchurStep: "lapack",
    HessenbergStep: "lapack",
    FftStep: "fft",
    SortStep: "sort",
    HostCallStep: "host_callback",
    CondStep: "cond",
    WhileStep: "while",
    ScanStep: "scan",
}


def step_label(step) -> str:
    """The name a profile reports ``step`` under: a kernel's name as the fusion plan prints it
    (``k3``, ``scatter5``: unique in a program); a matrix product's operation and the buffer it
    writes (``dot_general_t4``, since every product of a program has the same operation name);
    any other step's own name (``cholesky_t2``, ``host1``, ``scan1``)."""
    if isinstance(step, fusion.Gemm):  # (a product folded with an update: dot_general+update)
        return f"{step.name.replace(' + ', '+')}_{step.c.name}"
    return step.name


@dataclass(frozen=True)
class StepInfo:
    """One timed step: ``name`` (:func:`step_label`, made unique in its program), ``kind``
    (``kernel``, ``gemm``, ``lapack``, ``fft``, ``sort``, ``host_callback``, ``cond``,
    ``while``, ``scan``; the GPU's ``dispatch``), ``eqns`` (indices of the equations of the
    program's optimised jaxpr it computes; a step in a control-flow body gives its enclosing
    equation's) and ``parent`` (the name of the enclosing control-flow step, or None)."""

    name: str
    kind: str
    eqns: tuple[int, ...]
    parent: str | None


@dataclass(frozen=True)
class ProgramInfo:
    """What a profiled executable times: its ``name``, the optimised ``jaxpr`` the equation
    indices refer to, and its ``steps`` in the order of its timing slots."""

    name: str
    jaxpr: object
    steps: tuple[StepInfo, ...]


def step_table(steps, coverage: dict[int, tuple[int, ...]] | None = None) -> list:
    """``[(step, StepInfo)]`` for every step of ``steps`` and of its control flow's bodies,
    depth first in program order; ``coverage``: step id -> equation indices (a nested step
    without an entry takes its parent's)."""
    out: list = []
    used: dict[str, int] = {}

    def walk(seq, parent, parent_eqns):
        for step in seq:
            label = step_label(step)
            n = used[label] = used.get(label, 0) + 1
            if n > 1:  # a name some other step has: numbered
                label = f"{label}#{n}"
            eqns = (coverage or {}).get(id(step)) or parent_eqns
            kind = _KINDS.get(type(step), type(step).__name__.lower())
            out.append((step, StepInfo(label, kind, tuple(sorted(eqns)), parent)))
            if isinstance(step, (CondStep, WhileStep, ScanStep)):
                for body in step.sub_programs():
                    walk(body, label, eqns)

    walk(steps, None, ())
    return out


class Coverage:
    """Records, while one jaxpr is planned (installed as ``fusion.rule_watch[0]``), which of
    its equations each top-level step computes:

    * a step appended while an equation's lowering rule runs (a matrix product, a library
      call, a control-flow step; a kernel the rule stores itself, when none of its nodes
      names an equation) computes that equation;
    * a fused kernel computes every equation whose element expressions end up in it: each
      equation's output tensors are wrapped so that the expression nodes they produce are
      attributed to the equation, and a kernel covers the equations of the nodes it holds.

    Equations of nested jaxprs (a scan body) are not recorded: their steps are attributed to
    the equation holding them."""

    def __init__(self, jaxpr):
        self.jaxpr = jaxpr  # the top-level Jaxpr (not closed) being planned
        self.by_step: dict[int, set[int]] = {}
        self.by_node: dict[int, set[int]] = {}
        self._nodes: list = []  # keeps attributed nodes alive, so their ids stay theirs
        self._tensors: dict[int, set[int]] = {}
        self._keep: list = []
        self._before: set[int] = set()

    def before(self, planner, jaxpr, i: int) -> None:
        if jaxpr is self.jaxpr:
            self._before = {id(s) for s in planner.steps}

    def after(self, planner, jaxpr, i: int, outs) -> None:
        if jaxpr is not self.jaxpr:
            return
        for s in planner.steps:
            if id(s) not in self._before:
                self.by_step.setdefault(id(s), set()).add(i)
        for t in outs:
            marks = self._tensors.get(id(t))
            if marks is not None:  # an input passed through (or another output of the rule)
                marks.add(i)
                continue
            marks = self._tensors[id(t)] = {i}
            self._keep.append(t)
            t.fn = self._wrap(t.fn, marks)

    def _wrap(self, fn, marks: set[int]):
        by_node, nodes = self.by_node, self._nodes

        def element(idx):
            e = fn(idx)
            got = by_node.get(id(e))
            if got is None:
                by_node[id(e)] = got = set()
                nodes.append(e)
            got.update(marks)
            return e

        return element

    def result(self, steps) -> dict[int, tuple[int, ...]]:
        """Step id -> the indices of the equations it computes, for the top-level ``steps``."""
        out = {}
        for step in steps:
            eqns: set[int] = set()
            if isinstance(step, fusion.Kernel):
                roots = [
                    e for st in step.stores for e in (st.value, st.index, st.mask) if e is not None
                ]
                for e in fusion._walk(roots):
                    eqns |= self.by_node.get(id(e), set())
            # a kernel built while a rule ran may hold only pending tensors that rule stored
            # first (its inputs): the rule's equation only when no node names another
            out[id(step)] = tuple(sorted(eqns or self.by_step.get(id(step), ())))
        return out


def plan_covered(closed, name: str, policy) -> tuple[fusion.Program, ProgramInfo]:
    """``fusion.plan(closed, name, policy=policy)`` with the equations of each step recorded:
    the program and its :class:`ProgramInfo` (``steps`` in timing-slot order, as
    :func:`step_table` lists them). Call it with the backend's compile lock held."""
    cov = Coverage(closed.jaxpr)
    saved, fusion.rule_watch[0] = fusion.rule_watch[0], cov
    try:
        program = fusion.plan(closed, name, policy=policy)
    finally:
        fusion.rule_watch[0] = saved
    table = step_table(program.steps, cov.result(program.steps))
    return program, ProgramInfo(name, closed, tuple(info for _, info in table))


def report(info: ProgramInfo, seconds, calls, wall_s: float) -> None:
    """Hand one call's step times to every open profile: ``seconds[i]`` and ``calls[i]`` are
    step ``info.steps[i]``'s time and number of runs (a step in a loop body runs many times);
    ``wall_s`` the whole call's."""
    for sink in list(sinks):
        sink.record(info, seconds, calls, wall_s)
