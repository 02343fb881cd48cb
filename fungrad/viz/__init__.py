"""``fg.viz``: an interactive graph viewer of a traced function, as one self-contained page.

The page shows the jaxpr as a graph (equations as nodes, values as edges typed
``f32[128,784]``), nested jaxprs as collapsible groups, each equation's source line on hover;
for a jitted function the CPU fusion plan laid over it (which equations run in which kernel,
with buffers and per-kernel times when profiled); for a gradient the forward and backward
programs side by side, linked by the user's line each backward equation carries.

Modules: :mod:`~fungrad.viz.graph` (the graph model), :mod:`~fungrad.viz.fusion_map` (equations
to plan steps), :mod:`~fungrad.viz.layout` (positions), :mod:`~fungrad.viz.render` (HTML),
:mod:`~fungrad.viz.cli` (``python -m fungrad viz``).
"""

from __future__ import annotations

from fungrad.viz.view import Viz, viz

__all__ = ["Viz", "viz"]
