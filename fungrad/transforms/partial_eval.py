"""Partial evaluation: split a computation into a known part, run now, and an unknown part,
staged into a jaxpr; plus dead-code elimination.

``PartialEvalTrace`` is a staging trace whose *unknown* values are its own tracers. A primitive
none of whose inputs is unknown is evaluated right away in the parent trace (eagerly, or by an
enclosing transform); one that touches an unknown value is staged, and the known values it reads
become the staged jaxpr's constvars (the *residuals*).

``linearize`` runs a JVP whose tangents are unknown: the primal computation happens for real and
the tangent computation, linear in the input tangents, is recorded as a jaxpr. Transposing that
jaxpr gives the VJP (see transpose.py); this is how forward and reverse mode share one rule set.
"""

from __future__ import annotations

from fungrad import core, dtypes
from fungrad.core import set_current_trace
from fungrad.ir.passes import dce, drop_unused_consts, simplify
from fungrad.transforms import jvp as jvp_mod
from fungrad.transforms.staging import JaxprTrace, hoist_tracer_consts, trace_to_jaxpr

partial_eval_rules: dict[core.Primitive, object] = {}
"""Primitives that split themselves into known and unknown parts instead of being staged whole
(scan: the known iterations run now and save residuals per step).
``rule(trace, args, params) -> outs``; ``args`` mix the trace's unknown tracers and known values."""


class PartialEvalTrace(JaxprTrace):
    """Stages only the equations that depend on its own (unknown) tracers."""

    def is_unknown(self, x) -> bool:
        return isinstance(x, core.Tracer) and x._trace is self

    def process_primitive(self, primitive, args, params):
        for a in args:
            if isinstance(a, core.Tracer) and a._trace is self:
                rule = partial_eval_rules.get(primitive)
                if rule is not None:
                    return rule(self, args, params)
                return self.stage(primitive, args, params)
        # Every input is known: evaluate now, in the parent trace.
        state = core._state
        prev = state.trace
        state.trace = parent = self.parent
        try:
            return parent.process_primitive(primitive, args, params)
        finally:
            state.trace = prev

    def stage(self, primitive, args, params):
        """Record the equation as unknown (known inputs become residuals)."""
        return JaxprTrace.process_primitive(self, primitive, args, params)


def partial_eval_jaxpr(closed: core.ClosedJaxpr, in_unknowns, instantiate):
    """Split ``closed`` by which inputs are unknown.

    Returns ``(known, unknown, out_unknowns, num_res)``: ``known`` maps the known inputs to the
    known outputs followed by ``num_res`` residuals; ``unknown`` maps ``(*residuals,
    *unknown_inputs)`` to the unknown outputs. ``instantiate`` (a bool or one per output) forces
    outputs to be unknown.
    """

    n_out = len(closed.jaxpr.outvars)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    known_avals = [a for a, u in zip(closed.in_avals, in_unknowns) if not u]
    unknown_avals = [a for a, u in zip(closed.in_avals, in_unknowns) if u]
    box: dict = {}

    def f_known(*known_args):
        pe = PartialEvalTrace(core.current_trace())
        unknown_args = [pe.new_arg(a) for a in unknown_avals]
        k, u = iter(known_args), iter(unknown_args)
        args = [next(u) if unk else next(k) for unk in in_unknowns]
        with set_current_trace(pe):
            outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
            outs = [
                pe.to_tracer(o) if i and not pe.is_unknown(o) else o for o, i in zip(outs, inst)
            ]
        out_unknowns = [pe.is_unknown(o) for o in outs]
        unknown_jaxpr, residuals = hoist_tracer_consts(
            pe.to_jaxpr(unknown_args, [o for o in outs if pe.is_unknown(o)])
        )
        box.update(unknown=unknown_jaxpr, out_unknowns=out_unknowns, num_res=len(residuals))
        return [o for o in outs if not pe.is_unknown(o)] + residuals

    known = trace_to_jaxpr(f_known, known_avals)
    return known, box["unknown"], box["out_unknowns"], box["num_res"]


def linearize_flat(fun, primals):
    """Linearize ``fun(*tracers) -> list`` at ``primals``.

    Returns ``(primals_out, linear_jaxpr, out_zero)`` where ``linear_jaxpr`` is a ClosedJaxpr
    mapping input tangents to the non-zero output tangents (residuals in its consts), and
    ``out_zero[i]`` says that output ``i``'s tangent is symbolically zero (it is then not an
    output of the jaxpr).
    """
    pe = PartialEvalTrace(core.current_trace())
    tangent_args = [pe.new_arg(jvp_mod.tangent_aval(core.get_aval(p))) for p in primals]
    trace = jvp_mod.JVPTrace(pe)
    # Integer and bool inputs have no tangent space: their tangents are symbolic zeros (the
    # jaxpr keeps an unused input for them so its signature matches the primals).
    tracers = [
        jvp_mod.JVPTracer(
            trace, p, t if dtypes.kind(t.aval.dtype) in "fc" else jvp_mod.Zero(t.aval)
        )
        for p, t in zip(primals, tangent_args)
    ]
    with set_current_trace(trace):
        outs = fun(*tracers)
        unpacked = [trace._unpack(o) for o in outs]
    primals_out = [p for p, _ in unpacked]
    out_zero = [type(t) is jvp_mod.Zero for _, t in unpacked]
    with set_current_trace(pe):
        tangent_outs = [pe.to_tracer(t) for _, t in unpacked if type(t) is not jvp_mod.Zero]
    linear = pe.to_jaxpr(tangent_args, tangent_outs)
    # Eagerly the linear jaxpr runs once, right away: dropping dead code (and with it dead
    # residuals) is all that pays. Under an enclosing transform it becomes part of a larger
    # program, so common subexpressions are merged too.
    if isinstance(pe.parent, core.EvalTrace):
        linear = core.ClosedJaxpr(dce(linear.jaxpr), linear.consts)
        linear = drop_unused_consts(linear)
    else:
        linear = simplify(linear)
    return primals_out, linear, out_zero
