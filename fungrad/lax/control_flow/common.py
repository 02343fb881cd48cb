"""Shared machinery of the control-flow primitives: tracing bodies, checking their types."""

from __future__ import annotations

from fungrad import core, tree_util
from fungrad.lax.utils import operand

# -- tracing bodies -------------------------------------------------------------------------------

def trace_body(fun, in_tree, in_avals, what: str):
    """Trace ``fun`` (taking the unflattened pytree) at ``in_avals``.

    Returns ``(closed_jaxpr, hoisted, out_tree)``: constants the body closes over that are
    tracers of enclosing transforms are *hoisted*: they become leading invars of the jaxpr and
    ``hoisted`` lists them, to be passed as explicit operands; concrete constants stay in the
    ClosedJaxpr.
    """
    from fungrad.transforms.staging import trace_to_jaxpr

    out_tree_box = []

    def flat_fun(*leaves):
        out = fun(*tree_util.tree_unflatten(in_tree, leaves))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        out_tree_box.append(out_tree)
        return [operand(o, f"{what} output") for o in out_leaves]

    closed = trace_to_jaxpr(flat_fun, in_avals)
    closed, hoisted = hoist_tracer_consts(closed)
    return closed, hoisted, out_tree_box[0]


def hoist_tracer_consts(closed: core.ClosedJaxpr):
    """Move constvars bound to tracers into leading invars; returns (closed, those tracers)."""
    j = closed.jaxpr
    is_tracer = [isinstance(c, core.Tracer) for c in closed.consts]
    if not any(is_tracer):
        return closed, []
    hoisted_vars = [v for v, t in zip(j.constvars, is_tracer) if t]
    hoisted = [c for c, t in zip(closed.consts, is_tracer) if t]
    kept_vars = [v for v, t in zip(j.constvars, is_tracer) if not t]
    kept = [c for c, t in zip(closed.consts, is_tracer) if not t]
    jaxpr = core.Jaxpr(kept_vars, hoisted_vars + j.invars, j.eqns, j.outvars)
    return core.ClosedJaxpr(jaxpr, kept), hoisted


def avals_str(avals) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def check_same_avals(what: str, expected, got, fix: str) -> None:
    exp = [a.strip_weak_type() for a in expected]
    gt = [a.strip_weak_type() for a in got]
    if exp != gt:
        raise TypeError(f"{what}: expected {avals_str(expected)} but got {avals_str(got)}. "
                        f"{fix}")


def eval_closed(closed: core.ClosedJaxpr, *args):
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


