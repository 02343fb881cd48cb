"""Staging: trace a Python function into a jaxpr (JAX's ``DynamicJaxprTrace``).

While the function runs, :class:`JaxprTrace` is the current trace; every primitive applied to
its tracers becomes an equation. Values that are not its own tracers are constants: 0-d ones
become :class:`~fungrad.core.Literal` inputs, the rest become constvars (deduplicated by
identity). A tracer of an *enclosing* transform (a closure over an outer tracer) is also a
constvar, whose "value" is that tracer; evaluating the jaxpr inside the outer transform then
binds it there. Tracing is abstract: ``bool(tracer)`` raises ConcretizationTypeError.
"""

from __future__ import annotations

from fungrad import core, dtypes
from fungrad.array import Array


class JaxprTracer(core.Tracer):
    __slots__ = ("_aval", "var")

    def __init__(self, trace: JaxprTrace, aval: core.ShapedArray, var: core.Var):
        self._trace = trace
        self._aval = aval
        self.var = var

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
        self._const_ids: dict[int, core.Var] = {}   # id(value) -> constvar
        self._keepalive: list = []                   # values whose ids key _const_ids

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
                return x.var
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
        invars = [a.var if type(a) is JaxprTracer and a._trace is self else self._input(a)
                  for a in args]
        out = core.cached_abstract_eval(primitive, tuple([v.aval for v in invars]), params)
        if not primitive.multiple_results:
            var = core.Var(out)
            self.eqns.append(core.JaxprEqn(primitive, invars, params, [var]))
            return JaxprTracer(self, out, var)
        outvars = [core.Var(a) for a in out]
        self.eqns.append(core.JaxprEqn(primitive, invars, params, outvars))
        return [JaxprTracer(self, a, v) for a, v in zip(out, outvars)]

    def to_jaxpr(self, in_tracers, out_tracers) -> core.ClosedJaxpr:
        jaxpr = core.Jaxpr(self.constvars, [t.var for t in in_tracers], self.eqns,
                           [t.var for t in out_tracers])
        return core.ClosedJaxpr(jaxpr, self.consts)


def trace_to_jaxpr(fun, in_avals) -> core.ClosedJaxpr:
    """Trace ``fun(*tracers) -> list of outputs`` at ``in_avals`` into a closed jaxpr."""
    trace = JaxprTrace(core.current_trace())
    in_tracers = [trace.new_arg(a) for a in in_avals]
    with core.set_current_trace(trace):
        outs = fun(*in_tracers)
        out_tracers = [trace.to_tracer(o) for o in outs]
    return trace.to_jaxpr(in_tracers, out_tracers)
