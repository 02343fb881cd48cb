"""What every backend's renderer shares: dispatch of steps and of kernel ops through tables.

A backend renders a :class:`~fungrad.lowering.fusion.Program` step by step. Each step kind is
plain data (``fusion.Kernel``/``Gemm``, the steps of ``steps.py``) and each backend maps the
step's type to the function that renders it, in a :class:`StepRenderers` table.

Adding a step kind: one dataclass (in ``steps.py``, with ``reads()``/``writes()``), the
lowering rule that appends it, and one function per backend registered in that backend's
table (``cpu/llvm.py``'s ``STEP_RENDERERS``; the GPU executable's).
"""

from __future__ import annotations

__all__ = ["StepRenderers"]


class StepRenderers:
    """A backend's table of step renderers: step type -> ``fn(writer, step, *context)``.

    Lookup is by exact type (a step kind is a leaf class); a step without an entry is a
    ``TypeError`` naming the backend and the step, never a silent skip."""

    def __init__(self, backend: str, table: dict[type, object]):
        self.backend = backend
        self.table = dict(table)

    def __call__(self, writer, step, *context):
        fn = self.table.get(type(step))
        if fn is None:
            raise TypeError(f"{self.backend} renderer: no renderer for step kind "
                            f"{type(step).__name__} (register one in its step table)")
        return fn(writer, step, *context)

    def __contains__(self, kind: type) -> bool:
        return kind in self.table
