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

import enum

import numpy as np

from fungrad import core, dtypes
from fungrad.config import config
from fungrad.core import set_current_trace
from fungrad.ir.passes import dce, drop_unused_consts, simplify
from fungrad.transforms import jvp as jvp_mod
from fungrad.transforms.staging import JaxprTrace

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
    from fungrad.lax.control_flow import hoist_tracer_consts
    from fungrad.transforms.staging import trace_to_jaxpr

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
            outs = [pe.to_tracer(o) if i and not pe.is_unknown(o) else o
                    for o, i in zip(outs, inst)]
        out_unknowns = [pe.is_unknown(o) for o in outs]
        unknown_jaxpr, residuals = hoist_tracer_consts(
            pe.to_jaxpr(unknown_args, [o for o in outs if pe.is_unknown(o)]))
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
    tracers = [jvp_mod.JVPTracer(trace, p, t if t.aval.dtype.kind == "f" else
                                 jvp_mod.Zero(t.aval))
               for p, t in zip(primals, tangent_args)]
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


# ---------------------------------------------------------------------------------------------
# Eager reverse mode: a tape of per-primitive linearizations
#
# ``grad`` of a function run eagerly needs no jaxpr of the whole computation: each primitive can
# be linearized on its own, as it runs. The linearization of one primitive depends only on its
# input avals, its params and which inputs carry a tangent, so it is built once per such
# signature (by tracing the jvp rule abstractly) into two small jaxprs of first-order
# primitives: ``known`` computes the primal outputs and the residuals, ``bwd`` maps the
# residuals and the output cotangents to the input cotangents (the transposed linear part).
# Later calls evaluate them with the primitives' numpy impls directly, and the backward pass
# walks the tape in reverse. A primitive whose rule cannot be traced that way (higher-order
# primitives, custom rules, rules that look at values) is linearized as it runs, exactly as
# ``linearize_flat`` does, into a linear jaxpr that the backward pass transposes.


class TapeTracer(core.Tracer):
    """A value with a non-zero tangent under a :class:`TapeTrace`: its concrete primal (an
    Array) and the tape node its cotangent is accumulated in."""

    __slots__ = ("primal", "node")

    def __init__(self, trace: TapeTrace, primal, node: int):
        self._trace = trace
        self.primal = primal
        self.node = node

    @property
    def aval(self):
        p = self.primal
        aval = getattr(p, "_aval", None)
        return core.get_aval(p) if aval is None else aval

    def to_concrete_value(self):
        p = self.primal
        return getattr(p, "_value", p)


class _Program:
    """A jaxpr of first-order primitives compiled for :meth:`run`: numpy values in, numpy
    values out, each equation calling its primitive's impl, values held in a list by slot
    (constants and literals first, then the inputs, then each equation's outputs)."""

    __slots__ = ("slots", "n_in", "steps", "outs", "out_avals")

    def __init__(self, closed: core.ClosedJaxpr):
        from fungrad.array import Array
        jaxpr = closed.jaxpr
        slots = [c._value if type(c) is Array else c for c in closed.consts]
        index = {v: i for i, v in enumerate(jaxpr.constvars)}

        def slot(x):
            if type(x) is core.Literal:
                slots.append(x.val)
                return len(slots) - 1
            return index[x]

        literal_slots = [[slot(x) if type(x) is core.Literal else None for x in e.invars]
                         for e in jaxpr.eqns]
        out_literals = [slot(x) if type(x) is core.Literal else None for x in jaxpr.outvars]
        self.slots = slots
        self.n_in = len(jaxpr.invars)
        n = len(slots)
        for v in jaxpr.invars:
            index[v] = n
            n += 1
        steps = []
        for e, lits in zip(jaxpr.eqns, literal_slots):
            ins = tuple(i if i is not None else index[x] for i, x in zip(lits, e.invars))
            steps.append((e.primitive, ins, e.params, [v.aval for v in e.outvars]))
            for v in e.outvars:
                index[v] = n
                n += 1
        self.steps = steps
        self.outs = [i if i is not None else index[x] for i, x in zip(out_literals,
                                                                      jaxpr.outvars)]
        self.out_avals = [x.aval for x in jaxpr.outvars]

    def run(self, args) -> list:
        env = self.slots + args
        check = config.check_impl_avals
        for prim, ins, params, avals in self.steps:
            out = prim.impl(*[env[i] for i in ins], **params)
            if prim.multiple_results:
                if check:
                    core._check_impl_avals(prim, out, avals, params)
                env.extend(out)
            else:
                if check:
                    core._check_impl_avals(prim, out, avals[0], params)
                env.append(out)
        return [env[i] for i in self.outs]


class _Linearized:
    """One primitive's cached linearization (see the section comment): ``known`` maps the
    primal inputs to the primal outputs and the residuals, ``bwd`` maps the residuals and the
    cotangents of the outputs with a non-zero tangent to the cotangents of the inputs that
    ``in_mask`` marks (the other tangent inputs get none)."""

    __slots__ = ("known", "out_avals", "out_nonzero", "bwd", "ct_avals", "in_mask")

    def __init__(self, known, n_out, out_nonzero, bwd, in_mask):
        self.known = _Program(known)
        self.out_avals = self.known.out_avals[:n_out]
        self.out_nonzero = out_nonzero
        self.bwd = _Program(bwd)
        self.ct_avals = [v.aval for v in bwd.jaxpr.invars[len(bwd.jaxpr.invars)
                                                           - sum(out_nonzero):]]
        self.in_mask = in_mask


_GENERAL = object()   # cache entry: this signature is linearized as it runs
_linearized_cache: dict = {}


_SIMPLE_PARAM_TYPES = (int, float, str, type(None), np.dtype, np.generic, enum.Enum)


def _is_simple_param(v) -> bool:
    if isinstance(v, tuple):  # namedtuples included (gather's dimension numbers...)
        return all(_is_simple_param(x) for x in v)
    return isinstance(v, _SIMPLE_PARAM_TYPES)


def _first_order(jaxpr: core.Jaxpr) -> bool:
    """Every equation's params are plain values (no sub-jaxprs or functions): its impl is a
    numpy computation that binds nothing."""
    return all(_is_simple_param(v) for e in jaxpr.eqns for v in e.params.values())


def _build_linearized(primitive, in_avals, params, nonzero):
    """Trace ``primitive``'s jvp rule at ``in_avals`` into a :class:`_Linearized`, or None
    when the rule cannot be captured that way (the caller then linearizes as it runs)."""
    from fungrad.lax.control_flow import hoist_tracer_consts
    from fungrad.transforms.staging import JaxprTracer, trace_to_jaxpr
    from fungrad.transforms.transpose import UndefPrimal, backward_pass

    rule = jvp_mod.jvp_rules.get(primitive)
    if rule is None or not all(_is_simple_param(v) for v in params.values()):
        return None
    tangent_aval = jvp_mod.tangent_aval
    with set_current_trace(core.EvalTrace()):
        known = JaxprTrace(core.current_trace())
        primals = [known.new_arg(a) for a in in_avals]
        pe = PartialEvalTrace(known)
        t_args = [pe.new_arg(tangent_aval(a)) for a, nz in zip(in_avals, nonzero) if nz]
        it = iter(t_args)
        tangents = [next(it) if nz else jvp_mod.Zero(tangent_aval(a))
                    for a, nz in zip(in_avals, nonzero)]
        with set_current_trace(pe):
            p_out, t_out = rule(primals, tangents, **params)
        if not primitive.multiple_results:
            p_out, t_out = [p_out], [t_out]
        out_nonzero = [type(t) is not jvp_mod.Zero for t in t_out]
        lin_outs = [t for t in t_out if type(t) is not jvp_mod.Zero]
        if not all(pe.is_unknown(t) for t in lin_outs):
            return None   # a tangent that does not depend on the input tangents
        lin, residuals = hoist_tracer_consts(simplify(pe.to_jaxpr(t_args, lin_outs)))
        if not all(type(r) is JaxprTracer and r._trace is known for r in residuals):
            return None
        known_jaxpr = simplify(known.to_jaxpr(
            primals, [known.to_tracer(p) for p in p_out] + residuals))
        n_res = len(residuals)
        lin_in = lin.jaxpr.invars
        in_mask: list[bool] = []

        def bwd(*xs):
            args = list(xs[:n_res]) + [UndefPrimal(v.aval) for v in lin_in[n_res:]]
            cts = backward_pass(lin.jaxpr, lin.consts, args, list(xs[n_res:]))[n_res:]
            in_mask[:] = [type(c) is not jvp_mod.Zero for c in cts]
            return [c for c in cts if type(c) is not jvp_mod.Zero]

        bwd_jaxpr = simplify(trace_to_jaxpr(
            bwd, [v.aval for v in lin_in[:n_res]] + [v.aval for v in lin.jaxpr.outvars]))
    if not (_first_order(known_jaxpr.jaxpr) and _first_order(bwd_jaxpr.jaxpr)):
        return None
    return _Linearized(known_jaxpr, len(p_out), out_nonzero, bwd_jaxpr, in_mask)


def _cached_linearized(primitive, avals, params, nonzero):
    try:
        key = (primitive, avals, tuple(params.items()), nonzero, config.enable_x64)
        entry = _linearized_cache.get(key)
    except TypeError:  # unhashable params
        return None
    if entry is None:
        try:
            entry = _build_linearized(primitive, avals, params, nonzero)
        except Exception:  # noqa: BLE001  (the rule needs values: linearize as it runs)
            entry = None
        if len(_linearized_cache) >= 4096:
            _linearized_cache.clear()
        _linearized_cache[key] = _GENERAL if entry is None else entry
    return None if entry is _GENERAL else entry


class TapeTrace(core.Trace):
    """Eager reverse mode over a concrete parent (the EvalTrace): primals are computed for
    real and each primitive that touches a tangent appends its linearization to ``tape``;
    :meth:`backward` then accumulates cotangents per node in reverse order."""

    def __init__(self, parent: core.Trace):
        self.parent = parent
        self.tape: list = []
        self.num_nodes = 0

    def new_tracer(self, primal) -> TapeTracer:
        node = self.num_nodes
        self.num_nodes = node + 1
        return TapeTracer(self, primal, node)

    def process_primitive(self, primitive, args, params):
        primals, in_nodes = [], []
        any_node = False
        for x in args:
            if type(x) is TapeTracer and x._trace is self:
                primals.append(x.primal)
                in_nodes.append(x.node)
                any_node = True
            else:
                if isinstance(x, core.Tracer) and not core.is_ancestor(self, x._trace):
                    raise core.escaped_tracer_error(x, primitive)
                primals.append(x)
                in_nodes.append(None)
        state = core._state
        prev = state.trace
        state.trace = parent = self.parent
        try:
            if not any_node:  # no tangent flows through: a plain primitive
                return parent.process_primitive(primitive, primals, params)
            avals = tuple([core.get_aval(p) for p in primals])
            entry = _cached_linearized(primitive, avals, params,
                                       tuple([n is not None for n in in_nodes]))
            if entry is None:
                return self._linearize_now(primitive, primals, in_nodes, params)
            return self._run_linearized(primitive, entry, primals, avals, in_nodes)
        finally:
            state.trace = prev

    def _run_linearized(self, primitive, entry: _Linearized, primals, avals, in_nodes):
        array_type = core._array_type
        vals = [p._value if type(p) is array_type else
                np.array(p, dtype=dtypes.canonicalize_dtype(a.dtype))[()]
                for p, a in zip(primals, avals)]
        outs = entry.known.run(vals)
        results, out_nodes = [], []
        node = self.num_nodes
        for v, aval, nz in zip(outs, entry.out_avals, entry.out_nonzero):
            arr = array_type.from_impl(v, aval)
            if nz:
                results.append(TapeTracer(self, arr, node))
                out_nodes.append(node)
                node += 1
            else:
                results.append(arr)
        if out_nodes:
            self.num_nodes = node
            self.tape.append((entry, outs[len(entry.out_avals):],
                              [n for n in in_nodes if n is not None], out_nodes))
        return results if primitive.multiple_results else results[0]

    def _linearize_now(self, primitive, primals, in_nodes, params):
        """The general path: run the jvp rule with the tangents staged (as linearize_flat
        does) and tape the resulting linear jaxpr, residuals included."""
        rule = jvp_mod.jvp_rules.get(primitive)
        if rule is None:
            raise jvp_mod.NotDifferentiableError(primitive)
        pe = PartialEvalTrace(self.parent)
        t_args, tangents = [], []
        for p, n in zip(primals, in_nodes):
            aval = jvp_mod.tangent_aval(core.get_aval(p))
            if n is None:
                tangents.append(jvp_mod.Zero(aval))
            else:
                t = pe.new_arg(aval)
                t_args.append(t)
                tangents.append(t)
        with set_current_trace(pe):
            p_out, t_out = rule(primals, tangents, **params)
        if not primitive.multiple_results:
            p_out, t_out = [p_out], [t_out]
        results, out_nodes, lin_outs = [], [], []
        for p, t in zip(p_out, t_out):
            if type(t) is jvp_mod.Zero:
                results.append(p)
                continue
            tracer = self.new_tracer(p)
            results.append(tracer)
            out_nodes.append(tracer.node)
            lin_outs.append(pe.to_tracer(t))
        if out_nodes:
            self.tape.append((pe.to_jaxpr(t_args, lin_outs), None,
                              [n for n in in_nodes if n is not None], out_nodes))
        return results if primitive.multiple_results else results[0]

    def backward(self, cts: dict) -> dict:
        """Accumulate cotangents (numpy values by node, seeded with ``cts``) back through the
        tape; returns the cotangent of every node that received one."""
        from fungrad.array import Array
        from fungrad.transforms.transpose import UndefPrimal, backward_pass

        add = _add_impl()
        for entry, residuals, in_nodes, out_nodes in reversed(self.tape):
            out_cts = [cts.pop(n, None) for n in out_nodes]
            if all(ct is None for ct in out_cts):
                continue
            if type(entry) is _Linearized:
                out_cts = [np.zeros(a.shape, a.dtype) if ct is None else ct
                           for ct, a in zip(out_cts, entry.ct_avals)]
                it = iter(entry.bwd.run(residuals + out_cts))
                in_cts = [next(it) if m else None for m in entry.in_mask]
            else:  # a linear jaxpr, transposed by binding its transpose rules eagerly
                lin = entry
                cts_arrays = [jvp_mod.Zero(v.aval) if ct is None else Array.from_impl(ct, v.aval)
                              for ct, v in zip(out_cts, lin.jaxpr.outvars)]
                in_cts = [None if ct is None or type(ct) is jvp_mod.Zero else ct._value
                          for ct in backward_pass(lin.jaxpr, lin.consts,
                                                  [UndefPrimal(v.aval) for v in lin.jaxpr.invars],
                                                  cts_arrays)]
            for n, ct in zip(in_nodes, in_cts):
                if ct is not None:
                    prev = cts.get(n)
                    cts[n] = ct if prev is None else add(prev, ct)
        return cts


def _add_impl():
    """The numpy impl of ``add`` (cotangents are accumulated with it)."""
    global _add
    if _add is None:
        from fungrad.lax import add_p
        _add = add_p.impl
    return _add


_add = None


def tape_vjp_flat(fun, primals):
    """Eager reverse mode of ``fun(*tracers) -> list`` at concrete ``primals`` (Arrays).

    Returns ``(primals_out, vjp_flat)``; ``vjp_flat(cts)`` takes one concrete cotangent Array
    per output and gives one cotangent per primal (a :class:`~jvp.Zero` where none flows),
    evaluating the tape right away: this is for a pullback used once, eagerly (grad's)."""
    from fungrad.array import Array

    trace = TapeTrace(core.current_trace())
    tracers = [trace.new_tracer(p) if p.aval.dtype.kind == "f" else p for p in primals]
    with set_current_trace(trace):
        outs = fun(*tracers)
    primals_out, out_nodes = [], []
    for o in outs:
        if type(o) is TapeTracer and o._trace is trace:
            primals_out.append(o.primal)
            out_nodes.append(o.node)
        else:
            if isinstance(o, core.Tracer) and not core.is_ancestor(trace, o._trace):
                raise core.escaped_tracer_error(o)
            primals_out.append(o)
            out_nodes.append(None)

    def vjp_flat(cts):
        seed: dict = {}
        add = _add_impl()
        for n, ct in zip(out_nodes, cts):
            if n is not None and type(ct) is not jvp_mod.Zero:
                v = ct._value
                seed[n] = v if n not in seed else add(seed[n], v)
        got = trace.backward(seed)
        out = []
        for t in tracers:
            aval = jvp_mod.tangent_aval(core.get_aval(t))
            ct = got.get(t.node) if type(t) is TapeTracer else None
            out.append(jvp_mod.Zero(aval) if ct is None else Array.from_impl(ct, aval))
        return out

    return primals_out, vjp_flat
