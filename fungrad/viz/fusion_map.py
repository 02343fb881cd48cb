"""Which equation of a jitted program runs in which step of the CPU fusion plan (read only).

:func:`fusion_plan` optimises a closed jaxpr as the CPU executable does (``ir.passes.optimize``)
and plans it with the CPU backend's policy through ``lowering.profile.plan_covered`` (the
planner with the recorder of which equations each step computes, the one profiled builds use),
without rendering or compiling anything. Steps are named as a profile reports them
(``lowering.profile.step_label``: ``k3``, ``dot_general_t4``, ``scan1``), so per-step times
from ``fg.profile`` key the same steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from fungrad import core
from fungrad.lowering import fusion
from fungrad.lowering import profile as lprofile

__all__ = ["FusionPlan", "fusion_plan", "step_summary"]


@dataclass
class FusionPlan:
    """``jaxpr``: the optimised jaxpr that was planned; ``program``: the plan; ``steps``: for
    each equation of ``jaxpr.jaxpr.eqns`` (by index), the names of the top-level steps
    computing it; ``summaries``: every step (bodies' included) as :func:`step_summary` gives."""

    jaxpr: core.ClosedJaxpr
    program: fusion.Program
    steps: list[list[str]]
    summaries: list[dict]


def fusion_plan(closed: core.ClosedJaxpr) -> FusionPlan:
    """Optimise ``closed`` as the CPU executable does and plan it; see the module docstring."""
    from fungrad.ir import passes
    from fungrad.lowering.cpu.executable import _compile_lock
    from fungrad.lowering.cpu.policy import CpuPolicy

    opt = passes.optimize(closed)
    with _compile_lock:  # plan_covered's recorder is global while it plans
        program, info = lprofile.plan_covered(opt, "main", CpuPolicy())
    table = lprofile.step_table(program.steps)
    steps: list[list[str]] = [[] for _ in opt.jaxpr.eqns]
    for s in info.steps:
        if s.parent is None:
            for i in s.eqns:
                steps[i].append(s.name)
    summaries = [step_summary(step, si) for (step, _), si in zip(table, info.steps)]
    return FusionPlan(opt, program, steps, summaries)


def step_summary(step, info) -> dict:
    """A step as plain data for the viewer: name (as a profile reports it), kind, enclosing
    step, loops, buffers written and read (``name (kind) dtype[shape]``), what it fuses."""

    def buf(b):
        return f"{b.name} ({b.kind}) {b.dtype.name}{list(b.shape)}"

    out = {
        "name": info.name,
        "kind": info.kind,
        "parent": info.parent,
        "writes": [buf(b) for b in sorted(step.writes(), key=lambda b: b.id)],
        "reads": [buf(b) for b in sorted(step.reads(), key=lambda b: b.id)],
    }
    if isinstance(step, fusion.Kernel):
        out["loops"] = [v.extent for v in step.loops]
        out["fuses"] = list(step.origins)
        out["parallel"] = bool(step.parallel)
    elif isinstance(step, fusion.Gemm):
        out["gemm"] = f"m={step.m} n={step.n} k={step.k} batch={step.batch}"
    return out
