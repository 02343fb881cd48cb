"""Host steps: compiled programs calling Python functions (``fungrad.callback``'s primitives).

A callback's lowering rule (:func:`lower_host_call`) stores its operands in buffers and
appends a ``steps.HostCallStep`` to the program, whose results are buffers the step writes.
Each backend runs the step its own way: the CPU calls back into Python from native code
(``cpu/host_call.py``), the GPU executable runs it between dispatches on values it read back.
"""

from __future__ import annotations

from fungrad.lowering.steps import CondStep, HostCallStep, ScanStep, WhileStep

__all__ = ["lower_host_call", "host_steps"]


def lower_host_call(ctx, what: str, run, operands, result_avals) -> list:
    """The lowering of a callback: operands stored, one :class:`HostCallStep` appended,
    the result tensors read its result buffers."""
    planner = ctx.planner
    n = planner._n["host"] = planner._n.get("host", 0) + 1  # shared by sub-programs
    ins = [ctx.materialize(t).buffer for t in operands]
    outs = [
        planner.new_buffer(a.shape, a.dtype, "temp", f"host{n}.out{k}")
        for k, a in enumerate(result_avals)
    ]
    planner.add_step(HostCallStep(f"host{n}", n, what, run, ins, outs))
    return [planner.buffer_tensor(b, what) for b in outs]


def host_steps(steps) -> dict[int, HostCallStep]:
    """The host steps of ``steps`` and of their control flow's sub-programs, by index."""
    found: dict[int, HostCallStep] = {}
    stack = list(steps)
    while stack:
        s = stack.pop()
        if isinstance(s, HostCallStep):
            found[s.index] = s
        elif isinstance(s, (CondStep, WhileStep, ScanStep)):
            for program in s.sub_programs():
                stack.extend(program)
    return found
