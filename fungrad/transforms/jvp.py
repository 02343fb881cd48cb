"""Forward-mode autodiff: ``JVPTrace`` and the table of jvp rules.

A ``JVPTracer`` carries a primal and a tangent. The tangent may be a symbolic :class:`Zero`,
which is never materialised: a primitive whose inputs all have zero tangents is bound on the
primals alone, and rules skip the terms of zero tangents.

Rule signature (``jvp_rules[prim]``)::

    rule(primals: list, tangents: list[value | Zero], **params) -> (primal_out, tangent_out)

(lists for ``multiple_results`` primitives). Rules run with the *parent* trace current and are
written with lax functions, so the tangent computation is itself traceable: this is what makes
``linearize`` (tangents staged into a jaxpr) and higher-order derivatives work.

Helpers for the common shapes of rules (as JAX's ``ad.defjvp`` family):
``defjvp(prim, *per_operand_fns)``, ``deflinear(prim)``, ``defjvp_zero(prim)``.
"""

from __future__ import annotations

from fungrad import core, source_info
from fungrad.core import Trace, Tracer, get_aval, set_current_trace
from fungrad.transforms import array_ops


class Zero:
    """A symbolic zero tangent/cotangent of abstract value ``aval``."""

    __slots__ = ("aval",)

    def __init__(self, aval: core.ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


jvp_rules: dict[core.Primitive, object] = {}
"""primitive -> ``rule(primals, tangents, **params) -> (primal_out, tangent_out)``."""

no_jvp: dict[core.Primitive, str] = {}
"""primitives that declare they cannot be differentiated, with the reason shown to users."""


def tangent_aval(aval: core.ShapedArray) -> core.ShapedArray:
    """The aval of a tangent for a primal of ``aval`` (same shape and dtype, not weak)."""
    return aval.strip_weak_type()


def zeros_like_aval(aval: core.ShapedArray):
    return array_ops.full(aval.shape, 0, aval.dtype)


def instantiate_zeros(t):
    """``t`` as a real array (a Zero becomes an array of zeros)."""
    return zeros_like_aval(t.aval) if type(t) is Zero else t


def add_tangents(a, b):
    """Sum of two tangents, keeping symbolic zeros symbolic."""
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    return array_ops.add(a, b)


class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    def __init__(self, trace: JVPTrace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        p = self.primal
        if type(p) is core._array_type:
            aval = p._aval
            if aval is not None:
                return aval
        return get_aval(p)

    def to_concrete_value(self):
        p = self.primal
        if isinstance(p, Tracer):
            return p.to_concrete_value()
        return getattr(p, "_value", p)


class JVPTrace(Trace):
    """Propagates tangents alongside primals (see the module docstring)."""

    def __init__(self, parent: Trace):
        self.parent = parent

    def _unpack(self, x):
        if type(x) is JVPTracer and x._trace is self:
            return x.primal, x.tangent
        if isinstance(x, Tracer) and x._trace is not self and not core.is_ancestor(self, x._trace):
            raise core.escaped_tracer_error(x)
        return x, Zero(tangent_aval(get_aval(x)))

    def process_primitive(self, primitive, args, params):
        # One pass over the arguments: this trace's tracers give (primal, tangent); anything
        # else is a constant of this trace, whose zero tangent is only built when needed.
        primals = []
        any_tangent = False
        for x in args:
            if type(x) is JVPTracer and x._trace is self:
                primals.append(x.primal)
                if type(x.tangent) is not Zero:
                    any_tangent = True
            else:
                if isinstance(x, Tracer) and not core.is_ancestor(self, x._trace):
                    raise core.escaped_tracer_error(x)
                primals.append(x)
        state = core._state
        prev = state.trace
        state.trace = self.parent
        try:
            if not any_tangent:  # no perturbation flows through: a plain primitive
                return primitive.bind(*primals, **params)
            rule = jvp_rules.get(primitive)
            if rule is None:
                raise NotDifferentiableError(primitive)
            tangents = [
                x.tangent
                if type(x) is JVPTracer and x._trace is self
                else Zero(tangent_aval(get_aval(x)))
                for x in args
            ]
            fwd = source_info.begin_forward(primitive)  # what it stages differentiates it
            try:
                primal_out, tangent_out = rule(primals, tangents, **params)
            finally:
                source_info.end_forward(fwd)
        finally:
            state.trace = prev
        if primitive.multiple_results:
            return [JVPTracer(self, p, t) for p, t in zip(primal_out, tangent_out)]
        return JVPTracer(self, primal_out, tangent_out)


class NotDifferentiableError(TypeError):
    """Raised when differentiating a primitive that has no jvp rule."""

    def __init__(self, primitive):
        reason = no_jvp.get(primitive)
        if reason is not None:
            msg = f"Differentiation of {primitive} is not supported: {reason}"
        else:
            msg = f"Differentiation rule for '{primitive}' not implemented"
        super().__init__(msg)


def jvp_flat(fun, primals, tangents):
    """Run ``fun(*tracers) -> list`` under a new JVPTrace; returns (primals_out, tangents_out).

    Tangent entries may be :class:`Zero`; output tangents may be Zero too.
    """
    trace = JVPTrace(core.current_trace())
    tracers = [JVPTracer(trace, p, t) for p, t in zip(primals, tangents)]
    with set_current_trace(trace):
        outs = fun(*tracers)
        unpacked = [trace._unpack(o) for o in outs]
    return [p for p, _ in unpacked], [t for _, t in unpacked]


# -- helpers for defining rules ---------------------------------------------------------------


def defjvp(primitive, *jvp_fns):
    """A jvp rule from one function per operand: ``fn(t_i, *primals, **params)`` gives that
    operand's contribution to the output tangent (None for operands with no derivative).
    The contributions of non-zero tangents are summed; the primal is ``primitive.bind``."""

    def rule(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        tangent = Zero(tangent_aval(get_aval(out)))
        for fn, t in zip(jvp_fns, tangents):
            if fn is not None and type(t) is not Zero:
                tangent = add_tangents(tangent, fn(t, *primals, **params))
        return out, tangent

    jvp_rules[primitive] = rule


def defjvp2(primitive, *jvp_fns):
    """Like :func:`defjvp`, but each ``fn(t_i, out, *primals, **params)`` also gets the primal
    output (e.g. exp's derivative is its own output)."""

    def rule(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        tangent = Zero(tangent_aval(get_aval(out)))
        for fn, t in zip(jvp_fns, tangents):
            if fn is not None and type(t) is not Zero:
                tangent = add_tangents(tangent, fn(t, out, *primals, **params))
        return out, tangent

    jvp_rules[primitive] = rule


def deflinear(primitive):
    """The jvp of a primitive linear in all its operands: apply it to the tangents (zeros
    instantiated only when some but not all tangents are zero)."""

    def rule(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        ts = [instantiate_zeros(t) for t in tangents]
        return out, primitive.bind(*ts, **params)

    jvp_rules[primitive] = rule


def defjvp_zero(primitive):
    """Outputs have zero tangent (comparisons, integer-valued ops, iota...)."""

    def rule(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        if primitive.multiple_results:
            return out, [Zero(tangent_aval(get_aval(o))) for o in out]
        return out, Zero(tangent_aval(get_aval(out)))

    jvp_rules[primitive] = rule


def jvp_jaxpr(jaxpr: core.ClosedJaxpr, nonzeros, instantiate):
    """The JVP of a ClosedJaxpr (whose consts are concrete), as a ClosedJaxpr.

    The result takes ``(*primals, *tangents_of_nonzero_inputs)`` and returns
    ``(*primal_outs, *tangents_of_nonzero_outputs)``; an output tangent is nonzero if it is not
    symbolically zero or ``instantiate`` (a bool or one per output) asks for it. Returns
    ``(jaxpr, out_nonzeros)``.
    """
    from fungrad.transforms.staging import trace_to_jaxpr

    n_out = len(jaxpr.jaxpr.outvars)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    in_avals = jaxpr.in_avals
    t_avals = [tangent_aval(a) for a, nz in zip(in_avals, nonzeros) if nz]
    out_nz: list[bool] = []

    def f(*args):
        primals = list(args[: len(in_avals)])
        it = iter(args[len(in_avals) :])
        tangents = [next(it) if nz else Zero(tangent_aval(a)) for a, nz in zip(in_avals, nonzeros)]
        outs, touts = jvp_flat(
            lambda *xs: core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs), primals, tangents
        )
        touts = [instantiate_zeros(t) if i and type(t) is Zero else t for t, i in zip(touts, inst)]
        out_nz[:] = [type(t) is not Zero for t in touts]
        return outs + [t for t in touts if type(t) is not Zero]

    closed = trace_to_jaxpr(f, list(in_avals) + t_avals)
    if any(isinstance(c, core.Tracer) for c in closed.consts):
        raise AssertionError("jvp_jaxpr: a tracer leaked into the jaxpr's constants")
    return closed, out_nz
