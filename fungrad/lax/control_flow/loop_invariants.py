"""Loop-invariant code motion for loop bodies: the equations of a body that read only its
constants are run once, before the loop, instead of at every iteration.

Reverse mode needs this to keep memory linear in the size of the weights rather than in
``length * size``: the known part of a linearized scan (its forward pass) returns the residuals
the backward pass reads, one per iteration, stacked. A residual that depends only on the scan's
constants (the weight ``W`` of ``h @ W``, whose tangent ``dh @ W`` needs it; ``W.T``; a
broadcast bias) is the same at every step, so stacking it stores ``length`` copies of one value.
:func:`hoist_loop_invariants` splits such a body into a *hoisted* jaxpr, evaluated once on the
constants, and the *loop* body proper, which receives the hoisted values as constants; the
invariant residuals then leave the loop as single values (constants of the backward scan).
Equations with side effects (callbacks) stay in the loop: they must run once per iteration.
"""

from __future__ import annotations

from fungrad import core
from fungrad.ir.passes import dce, drop_unused_consts, has_effects


class LoopSplit:
    """The result of :func:`hoist_loop_invariants`.

    ``hoisted`` maps the body's constants to ``n_loop_consts`` values the loop body reads,
    followed by the hoisted outputs. ``loop`` maps ``(*those values, *the body's other
    inputs)`` to the outputs that stay in the loop. ``out_src[i]`` says where the body's output
    ``i`` went: ``("hoisted", k)`` (hoisted output ``k``) or ``("loop", k)`` (loop output
    ``k``)."""

    __slots__ = ("hoisted", "loop", "n_loop_consts", "out_src")

    def __init__(self, hoisted, loop, n_loop_consts, out_src):
        self.hoisted = hoisted
        self.loop = loop
        self.n_loop_consts = n_loop_consts
        self.out_src = out_src


def _is_var(x) -> bool:
    return type(x) is core.Var


def hoist_loop_invariants(body: core.ClosedJaxpr, n_consts: int, movable) -> LoopSplit | None:
    """Split ``body`` (its first ``n_consts`` inputs are loop constants, the others change per
    iteration) into the equations that depend only on constants (hoisted) and the rest.

    ``movable[i]`` says that output ``i`` may leave the loop when it is loop-invariant (a
    residual: the caller then reads it once instead of per iteration); the other outputs stay
    outputs of the loop body. Returns None when nothing is invariant (the body is unchanged).
    """
    j = body.jaxpr
    const_set = set(j.constvars)
    invariant = set(j.invars[:n_consts]) | const_set
    hoisted_eqns, loop_eqns = [], []
    for eqn in j.eqns:
        if not has_effects(eqn) and all(not _is_var(v) or v in invariant for v in eqn.invars):
            hoisted_eqns.append(eqn)
            invariant.update(eqn.outvars)
        else:
            loop_eqns.append(eqn)

    def leaves(v, m) -> bool:
        return m and (not _is_var(v) or v in invariant)

    moved = [leaves(v, m) for v, m in zip(j.outvars, movable)]
    if not hoisted_eqns and not any(moved):
        return None
    loop_out = [v for v, m in zip(j.outvars, moved) if not m]
    # The invariant values the loop reads (its new constants), in a stable order. Closed-over
    # constants stay constants of the loop body itself.
    reads: dict[core.Var, None] = {}
    for eqn in loop_eqns:
        for v in eqn.invars:
            if _is_var(v) and v in invariant and v not in const_set:
                reads[v] = None
    for v in loop_out:
        if _is_var(v) and v in invariant and v not in const_set:
            reads[v] = None
    loop_consts = list(reads)
    hoisted_out = [v for v, m in zip(j.outvars, moved) if m]
    hoisted = core.ClosedJaxpr(
        dce(core.Jaxpr(j.constvars, j.invars[:n_consts], hoisted_eqns, loop_consts + hoisted_out)),
        body.consts,
    )
    loop = core.ClosedJaxpr(
        core.Jaxpr(j.constvars, loop_consts + j.invars[n_consts:], loop_eqns, loop_out),
        body.consts,
    )
    out_src, n_h, n_l = [], 0, 0
    for m in moved:
        if m:
            out_src.append(("hoisted", n_h))
            n_h += 1
        else:
            out_src.append(("loop", n_l))
            n_l += 1
    hoisted, loop = drop_unused_consts(hoisted), drop_unused_consts(loop)
    return LoopSplit(hoisted, loop, len(loop_consts), out_src)
