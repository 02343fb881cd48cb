""":func:`viz`: trace a function, build its graph(s), lay them out and render the page."""

from __future__ import annotations

import os

import numpy as np

from fungrad import api, core, tree_util
from fungrad.shape_dtype_struct import ShapeDtypeStruct
from fungrad.transforms import autodiff
from fungrad.viz import fusion_map
from fungrad.viz.graph import Graph, build_graph
from fungrad.viz.layout import layout
from fungrad.viz.render import Panel, render_page

__all__ = ["Viz", "viz"]

#: groups holding more equations than this start collapsed (and all of them do in a graph of
#: more than COLLAPSE_ALL equations), so that a large program opens readable
COLLAPSE_ABOVE = 80
COLLAPSE_ALL = 600

_GRAD_WRAPPERS = ("grad_f", "value_and_grad_f")


class Viz:
    """The viewer's result: ``html`` (the page), ``graphs`` (``{"forward": Graph, ...}``: the
    models drawn), ``plan`` (the :class:`~fungrad.viz.fusion_map.FusionPlan` or None),
    ``links`` (``(forward node id, backward node id)`` pairs of equations from one source
    line); ``save(path)`` writes the page."""

    def __init__(self, html: str, graphs: dict[str, Graph], plan, links):
        self.html = html
        self.graphs = graphs
        self.plan = plan
        self.links = links

    def save(self, path) -> str:
        """Write the page to ``path``; returns the path."""
        path = os.fspath(path)
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.html)
        return path

    def _repr_html_(self) -> str:  # notebooks
        return self.html

    def __repr__(self):
        kinds = ", ".join(f"{k}: {len(g.eqn_nodes())} equations" for k, g in self.graphs.items())
        return f"Viz({kinds}{', fusion plan' if self.plan else ''})"


def _unwrap(fun):
    """``(inner, jitted, grad_of)``: ``fun`` without a ``jit`` wrapper (``jitted``: it had
    one), and the function ``fun`` is ``grad``/``value_and_grad`` of (or None)."""
    jitted = False
    if callable(getattr(fun, "lower", None)) and callable(getattr(fun, "cache_info", None)):
        jitted = True
        fun = getattr(fun, "__wrapped__", fun)
    code = getattr(fun, "__code__", None)
    grad_of = None
    if (
        code is not None
        and code.co_name in _GRAD_WRAPPERS
        and code.co_filename == autodiff.__file__
        and hasattr(fun, "__wrapped__")
    ):
        grad_of = fun.__wrapped__
    return fun, jitted, grad_of


def _collapsed(g: Graph) -> set[str]:
    total = len(g.eqn_nodes())
    return {
        gid for gid, grp in g.groups.items() if total > COLLAPSE_ALL or grp.n_eqns > COLLAPSE_ABOVE
    }


def viz(
    fun,
    *args,
    fusion: bool = False,
    backward: bool = False,
    profile: dict | None = None,
    path=None,
    title: str | None = None,
    **kwargs,
) -> Viz:
    """An interactive HTML graph of ``fun``'s jaxpr (fusion plan, backward pass, source lines).

    ``fun`` is traced on ``args``/``kwargs`` (arrays, or ``ShapeDtypeStruct``s standing for
    them).

    * ``fusion=True`` (implied for ``fg.jit(f)``): the program as the CPU backend optimises and
      plans it, each equation coloured by the fused kernel (or matrix product, library call)
      computing it, with a side panel listing the plan's steps and their buffers.
    * ``profile``: a ``fungrad.profile()`` result (its ``times()``) or ``{step name: seconds}``
      (``k3``, ``dot_general_t4``, ``scan1``: the names the profile reports and the side panel
      shows), each step's time as a badge; implies ``fusion=True``.
    * ``backward=True`` (implied for ``fg.grad(f)``): ``f``'s forward program and its gradient
      side by side; hovering an equation highlights the equations of the same source line in
      both.
    * ``path``: also write the page there.

    Returns a :class:`Viz` (``.html``, ``.save(path)``).
    """
    if not callable(fun):
        raise TypeError(
            f"viz: expected a function to trace, got {type(fun).__name__}; "
            "call fg.viz(f, *example_args)"
        )
    if callable(getattr(profile, "times", None)):  # a fungrad.profile() result
        profile = profile.times()
    if profile is not None and not hasattr(profile, "items"):
        raise TypeError(
            f"viz: profile must map step names to seconds ({{'k3': 1.2e-5}}), got "
            f"{type(profile).__name__}"
        )
    args, kwargs = tree_util.tree_map(_concrete, (args, kwargs))
    inner, jitted, grad_of = _unwrap(fun)
    fusion = fusion or jitted or profile is not None
    name = getattr(inner, "__name__", "fun")
    graphs: dict[str, Graph] = {}
    panels: list[Panel] = []
    steps, plan, note = [], None, ""

    def trace(f, planned):
        """``f``'s jaxpr: for the fusion plan the one ``jit`` traces and compiles (the plan,
        and a profile's step names, are then those of the jitted function); else as
        ``make_jaxpr`` prints it."""
        if planned:
            lowerer = fun if jitted and f is inner else api.jit(f)
            return lowerer.lower(*args, **kwargs).jaxpr
        return api.make_jaxpr(f)(*args, **kwargs)

    def add_panel(key, label, closed, planned):
        nonlocal plan, steps, note
        kernels = {}
        if planned:
            if any(a.dtype.kind == "c" for a in _avals(closed)):
                note = "complex values: the plan of their real rewrite is not shown"
            else:
                plan = fusion_map.fusion_plan(closed)
                closed = plan.jaxpr
                steps = plan.summaries
        g = build_graph(closed)
        if plan is not None and plan.jaxpr is closed:
            top_eqns = [g.nodes[n] for n in g.top if g.nodes[n].kind == "eqn"]
            for node, ks in zip(top_eqns, plan.steps):
                kernels[node.id] = ks
                for sub in _descendants(g, node):
                    kernels[sub] = ks
        graphs[key] = g
        panels.append(Panel(label, g, layout(g), kernels, _collapsed(g)))

    backward = backward or grad_of is not None
    links = []
    if backward:
        forward_fun = grad_of if grad_of is not None else inner
        grad_fun = inner if grad_of is not None else autodiff.grad(inner)
        add_panel("forward", f"forward: {name}", trace(forward_fun, False), False)
        grad_jaxpr = trace(grad_fun, fusion)
        add_panel("backward", f"backward: grad({name})", grad_jaxpr, fusion)
        links = _links(graphs["forward"], graphs["backward"])
    else:
        add_panel("forward", name, trace(inner, fusion), fusion)
    summary = ""
    if plan is not None:
        prog = plan.program
        summary = (
            f"{len(prog.inputs)} inputs, {len(prog.outputs)} outputs, {len(prog.consts)} "
            f"constants; {len(prog.temps)} temporaries sharing {prog.scratch_bytes} bytes of "
            "scratch (reused once their last reader has run)"
        )
        if profile:
            summary += f"; profiled: {_fmt_total(profile)} in all"
    html = render_page(
        title or f"fungrad viz: {name}", panels, steps, profile, note, summary=summary
    )
    out = Viz(html, graphs, plan, links)
    if path is not None:
        out.save(path)
    return out


def _fmt_total(profile) -> str:
    total = sum(float(t) for t in profile.values())
    return f"{total * 1e3:.3g} ms" if total >= 1e-3 else f"{total * 1e6:.3g} µs"


def _concrete(x):
    """A ShapeDtypeStruct (or ShapedArray) as an array of its type, for tracing: zeros
    broadcast from one element (no memory for the shape)."""
    if isinstance(x, (ShapeDtypeStruct, core.ShapedArray)):
        return np.broadcast_to(np.zeros((), x.dtype), x.shape)
    return x


def _avals(closed: core.ClosedJaxpr):
    j = closed.jaxpr
    return [v.aval for v in (*j.invars, *j.outvars) if hasattr(v.aval, "dtype")] + [
        v.aval for e in j.eqns for v in e.outvars
    ]


def _descendants(g: Graph, node) -> list[str]:
    out, stack = [], list(node.children)
    while stack:
        grp = g.groups[stack.pop()]
        for nid in grp.nodes:
            out.append(nid)
            stack.extend(g.nodes[nid].children)
    return out


def _links(fwd: Graph, bwd: Graph) -> list[tuple[str, str]]:
    by_key: dict[str, list[str]] = {}
    for n in fwd.eqn_nodes():
        if n.source_key:
            by_key.setdefault(n.source_key, []).append(n.id)
    return [(f, b.id) for b in bwd.eqn_nodes() for f in by_key.get(b.source_key, ())]
