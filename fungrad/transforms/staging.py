"""Staging: trace a Python function into a jaxpr (JAX's ``DynamicJaxprTrace``).

While the function runs, :class:`JaxprTrace` is the current trace; every primitive applied to
its tracers becomes an equation. Values that are not its own tracers are constants: 0-d ones
become :class:`~fungrad.core.Literal` inputs, the rest become constvars (deduplicated by
identity). A tracer of an *enclosing* transform (a closure over an outer tracer) is also a
constvar, whose "value" is that tracer; evaluating the jaxpr inside the outer transform then
binds it there. Tracing is abstract: ``bool(tracer)`` raises ConcretizationTypeError.

Higher-order primitives and transforms stage their bodies with :func:`trace_body` (a pytree
function, its tracer constants hoisted) or :func:`trace_to_jaxpr` plus
:func:`hoist_tracer_consts`.
"""

from __future__ import annotations

from fungrad import core, dtypes, source_info, tree_util
from fungrad.array import Array
from fungrad.operands import operand


class JaxprTracer(core.Tracer):
    __slots__ = ("_aval", "_var")

    def __init__(self, trace: JaxprTrace, aval: core.ShapedArray, var: core.Var):
        self._trace = trace
        self._aval = aval
        self._var = var

    @property
    def aval(self):
        return self._aval


class JaxprTrace(core.Trace):
    """Records equations. Create one per traced function; see :func:`trace_to_jaxpr`."""

    def __init__(self, parent: core.Trace):
        self.parent = parent
        self.eqns: list[core.JaxprEqn] = []
        self.constvars: list[core.Var] = []
        self.consts: list = []
        self._const_ids: dict[int, core.Var] = {}  # id(value) -> constvar
        self._keepalive: list = []  # values whose ids key _const_ids

    # -- inputs -----------------------------------------------------------------------------
    def new_arg(self, aval: core.ShapedArray) -> JaxprTracer:
        return JaxprTracer(self, aval, core.Var(aval))

    def _const_var(self, x) -> core.Var:
        var = self._const_ids.get(id(x))
        if var is None:
            var = core.Var(core.get_aval(x))
            self._const_ids[id(x)] = var
            self._keepalive.append(x)
            self.constvars.append(var)
            self.consts.append(x)
        return var

    def _input(self, x):
        """The Var or Literal that stands for ``x`` in an equation."""
        if isinstance(x, core.Tracer):
            if x._trace is self:
                return x._var
            if not core.is_ancestor(self, x._trace):
                raise core.escaped_tracer_error(x)
            return self._const_var(x)
        aval = core.get_aval(x)
        if type(x) is not Array:
            aval = aval.update(dtype=dtypes.canonicalize_dtype(aval.dtype))
        if not aval.shape:
            val = x._value if type(x) is Array else aval.dtype.type(x)
            return core.Literal(val, aval)
        return self._const_var(x)

    def to_tracer(self, x) -> JaxprTracer:
        """``x`` as one of this trace's tracers (constants become constvar-backed tracers)."""
        if isinstance(x, core.Tracer) and x._trace is self:
            return x
        if isinstance(x, core.Tracer) and not core.is_ancestor(self, x._trace):
            raise core.escaped_tracer_error(x)
        var = self._const_var(x)
        return JaxprTracer(self, var.aval, var)

    # -- primitives ---------------------------------------------------------------------------
    def process_primitive(self, primitive, args, params):
        invars = [
            a._var if type(a) is JaxprTracer and a._trace is self else self._input(a) for a in args
        ]
        out = core.cached_abstract_eval(primitive, tuple([v.aval for v in invars]), params)
        src = source_info.current(3)  # skip bind: process_primitive is only called internally
        if not primitive.multiple_results:
            var = core.Var(out)
            self.eqns.append(core.JaxprEqn(primitive, invars, params, [var], src))
            return JaxprTracer(self, out, var)
        outvars = [core.Var(a) for a in out]
        self.eqns.append(core.JaxprEqn(primitive, invars, params, outvars, src))
        return [JaxprTracer(self, a, v) for a, v in zip(out, outvars)]

    def to_jaxpr(self, in_tracers, out_tracers) -> core.ClosedJaxpr:
        jaxpr = core.Jaxpr(
            self.constvars, [t._var for t in in_tracers], self.eqns, [t._var for t in out_tracers]
        )
        return core.ClosedJaxpr(jaxpr, self.consts)


def trace_to_jaxpr(fun, in_avals) -> core.ClosedJaxpr:
    """Trace ``fun(*tracers) -> list of outputs`` at ``in_avals`` into a closed jaxpr."""
    trace = JaxprTrace(core.current_trace())
    in_tracers = [trace.new_arg(a) for a in in_avals]
    with core.set_current_trace(trace):
        outs = fun(*in_tracers)
        out_tracers = [trace.to_tracer(o) for o in outs]
    return trace.to_jaxpr(in_tracers, out_tracers)


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


def trace_body(fun, in_tree, in_avals, what: str):
    """Trace ``fun`` (taking the unflattened pytree) at ``in_avals``.

    Returns ``(closed_jaxpr, hoisted, out_tree)``: constants the body closes over that are
    tracers of enclosing transforms are *hoisted*: they become leading invars of the jaxpr and
    ``hoisted`` lists them, to be passed as explicit operands; concrete constants stay in the
    ClosedJaxpr.
    """
    out_tree_box = []

    def flat_fun(*leaves):
        out = fun(*tree_util.tree_unflatten(in_tree, leaves))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        out_tree_box.append(out_tree)
        return [operand(o, f"{what} output") for o in out_leaves]

    closed = trace_to_jaxpr(flat_fun, in_avals)
    closed, hoisted = hoist_tracer_consts(closed)
    return closed, hoisted, out_tree_box[0]
