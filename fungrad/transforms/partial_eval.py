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
import itertools
import keyword
import linecache
import re

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
    from fungrad.transforms.staging import hoist_tracer_consts, trace_to_jaxpr

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
# Both are compiled to plain Python functions calling the primitives' numpy impls, so a later
# call with the same signature costs about what numpy does, and the backward pass walks the
# tape in reverse calling the ``bwd`` functions. A primitive whose rule cannot be traced that
# way (higher-order primitives, custom rules, rules that look at values) is linearized as it
# runs, exactly as ``linearize_flat`` does, into a linear jaxpr that the backward pass
# transposes.


class TapeTracer(core.Tracer):
    """A value with a non-zero tangent under a :class:`TapeTrace`: its concrete numpy value,
    its aval, and the tape node its cotangent is accumulated in. The value is made read-only
    when it leaves the tape (``primal``, ``to_concrete_value``): residuals alias it."""

    __slots__ = ("value", "aval", "node")

    def __init__(self, trace: TapeTrace, value, aval, node: int):
        self._trace = trace
        self.value = value
        self.aval = aval
        self.node = node

    @property
    def primal(self):
        """The value as an Array (made on each request: the value stays the tape's)."""
        return core._array_type.from_impl(self.value, self.aval)

    def to_concrete_value(self):
        v = self.value
        if type(v) is np.ndarray:
            v.setflags(write=False)
        return v


_compiled_count = itertools.count()


def python_function(closed: core.ClosedJaxpr, name: str, out_positions=None):
    """Compile ``closed``, a jaxpr of first-order primitives, to a Python function from numpy
    values to a list of numpy values: one call of its primitive's impl per equation, in
    order, with the params and constants bound as globals of the generated code. This is the
    cheapest way to run a small jaxpr many times (no environment to look variables up in):
    numpy's floating-point error state is set once for the whole function, around the impls
    that would each set it (lax.utils.ignore_fp_errors), and a primitive with an entry in
    lax.utils.specialized_impls runs the function that entry makes for the equation's avals
    and params. With ``config.check_impl_avals`` a second version of the code runs, which
    checks each impl's output against its equation.

    ``out_positions`` ``(n, positions)`` spreads the outputs over a list of length ``n``, at
    ``positions``, with None elsewhere."""
    from fungrad.array import Array
    from fungrad.lax import utils as lax_utils

    jaxpr = closed.jaxpr
    env: dict = {"config": config, "check": core._check_impl_avals,
                 "fp_state": lax_utils.FP_STATE, "fp_ignore": lax_utils.FP_IGNORE_ALL}
    names: dict = {}

    def glob(value, prefix: str) -> str:
        n = f"{prefix}{len(env)}"
        env[n] = value
        return n

    for v, c in zip(jaxpr.constvars, closed.consts):
        names[v] = glob(c._value if type(c) is Array else c, "c")
    args = [f"a{i}" for i in range(len(jaxpr.invars))]
    names.update(zip(jaxpr.invars, args))

    def read(x) -> str:
        return glob(x.val, "l") if type(x) is core.Literal else names[x]

    fast, checked, guarded = [], [], False
    for i, e in enumerate(jaxpr.eqns):
        prim, ins = e.primitive, ", ".join(map(read, e.invars))
        if all(k.isidentifier() and not keyword.iskeyword(k) for k in e.params):
            kwargs = [f"{k}={glob(v, 'p')}" for k, v in e.params.items()]
        else:
            kwargs = [f"**{glob(e.params, 'p')}"]
        call_args = ", ".join([ins] * bool(ins) + kwargs)
        impl = lax_utils.unguarded(prim.impl)
        specialize = lax_utils.specialized_impls.get(prim)
        if lax_utils.FP_STATE is not None and specialize is not None and \
                not any(type(x) is core.Literal for x in e.invars):
            call = f"{glob(specialize(*[x.aval for x in e.invars], **e.params), 'g')}({ins})"
            guarded = True
        elif impl is not None:
            call = f"{glob(impl, 'f')}({call_args})"
            guarded = True
        else:
            call = f"{glob(prim.impl, 'f')}({call_args})"
        outs = [f"v{i}_{j}" for j in range(len(e.outvars))]
        names.update(zip(e.outvars, outs))
        avals = [v.aval for v in e.outvars]
        target = ", ".join(outs) + ("," if prim.multiple_results else "") if outs else "_"
        fast.append(f"{target} = {call}")
        checked += [f"out = {call}",
                    f"check({glob(prim, 'q')}, out, "
                    f"{glob(avals if prim.multiple_results else avals[0], 'o')}, "
                    f"{glob(e.params, 'k')})",
                    f"{target} = out"]
    outs = list(map(read, jaxpr.outvars))
    if out_positions is not None:
        n, positions = out_positions
        spread = ["None"] * n
        for i, o in zip(positions, outs):
            spread[i] = o
        outs = spread
    ret = f"return [{', '.join(outs)}]"
    fast.append(ret)
    checked.append(ret)
    if guarded:
        fast, checked = _fp_guarded(fast), _fp_guarded(checked)
    name = re.sub(r"\W", "_", name)  # (primitive names such as scatter-add)
    signature = ", ".join(args)
    source = "\n".join(
        [f"def {name}_checked({signature}):", *["    " + b for b in checked],
         f"def {name}({signature}):",
         f"    if config.check_impl_avals: return {name}_checked({signature})",
         *["    " + b for b in fast]])
    filename = f"<fungrad {name} {next(_compiled_count)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), env)  # noqa: S102
    return env[name]


def _fp_guarded(body: list) -> list:
    """Lines of code: ``body`` run with numpy's floating-point errors ignored."""
    return (["token = fp_state.set(fp_ignore)", "try:"] + ["    " + line for line in body]
            + ["finally:", "    fp_state.reset(token)"])


class _Linearized:
    """One primitive's cached linearization (see the section comment). ``known(*values)``
    gives the primal outputs followed by the residuals; ``bwd(*residuals, *cts)`` maps the
    cotangents of the outputs with a non-zero tangent (``out_nonzero``) to one cotangent per
    input of the primitive (None for the inputs ``ct_inputs`` does not list)."""

    __slots__ = ("known", "n_out", "out_avals", "out_nonzero", "bwd", "ct_avals", "single")

    def __init__(self, primitive, known, n_out, out_nonzero, bwd, n_in, ct_inputs):
        self.known = python_function(known, f"{primitive.name}_known")
        self.n_out = n_out
        self.out_avals = known.jaxpr.out_avals[:n_out]
        self.out_nonzero = out_nonzero
        self.bwd = python_function(bwd, f"{primitive.name}_bwd", (n_in, ct_inputs))
        self.ct_avals = [a for a, nz in zip(self.out_avals, out_nonzero) if nz]
        self.single = n_out == 1 and out_nonzero[0]  # the common case: one differentiable output


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
    """Trace ``primitive``'s jvp rule at ``in_avals`` (``params`` are plain values) into the
    arguments of :class:`_Linearized` after ``primitive``, or None when the rule cannot be
    captured that way (the caller then linearizes as it runs)."""
    from fungrad.transforms.staging import JaxprTracer, hoist_tracer_consts, trace_to_jaxpr
    from fungrad.transforms.transpose import UndefPrimal, backward_pass

    rule = jvp_mod.jvp_rules.get(primitive)
    if rule is None:
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
    tangent_inputs = [i for i, nz in enumerate(nonzero) if nz]
    ct_inputs = tuple(i for i, m in zip(tangent_inputs, in_mask) if m)
    return known_jaxpr, len(p_out), out_nonzero, bwd_jaxpr, len(in_avals), ct_inputs


def _new_linearized(key):
    """The cache entry for ``key`` = (primitive, avals, params items, nonzero, x64), built
    and stored: a :class:`_Linearized`, or ``_GENERAL``. A primitive whose params are not
    plain values (sub-jaxprs, functions: new objects at each call) is always linearized as it
    runs, and not stored: the cache would only keep those objects (and their constants)
    alive."""
    primitive, avals, params, nonzero, _ = key
    if not all(_is_simple_param(v) for _, v in params):
        return _GENERAL
    try:
        parts = _build_linearized(primitive, avals, dict(params), nonzero)
    except Exception:  # noqa: BLE001  (the rule needs values: linearize as it runs)
        parts = None
    if len(_linearized_cache) >= 4096:
        _linearized_cache.clear()
    entry = _linearized_cache[key] = _GENERAL if parts is None else \
        _Linearized(primitive, *parts)
    return entry


class TapeTrace(core.Trace):
    """Eager reverse mode over a concrete parent (the EvalTrace): primals are computed for
    real and each primitive that touches a tangent appends a record to ``tape``:
    ``(bwd, residuals, in_nodes, out_nodes, ct_avals)``, where ``bwd(*residuals, *cts)`` maps
    the cotangents of the ``out_nodes`` to one per input of the primitive, whose nodes are
    ``in_nodes`` (None for an input that is not a node, or where no cotangent flows).
    :meth:`backward` then accumulates cotangents per node in reverse order."""

    def __init__(self, parent: core.Trace):
        self.parent = parent
        self.tape: list = []
        self.num_nodes = 0

    def new_tracer(self, array) -> TapeTracer:
        """A fresh node for the Array ``array`` (an input of the differentiated function)."""
        node = self.num_nodes
        self.num_nodes = node + 1
        return TapeTracer(self, array._value, array.aval, node)

    def process_primitive(self, primitive, args, params):
        array_type = core._array_type
        vals, avals, nodes, nonzero = [], [], [], []
        any_node = False
        for x in args:
            if type(x) is TapeTracer and x._trace is self:
                vals.append(x.value)
                avals.append(x.aval)
                nodes.append(x.node)
                nonzero.append(True)
                any_node = True
                continue
            if type(x) is array_type:
                vals.append(x._value)
                aval = x._aval
                avals.append(x.aval if aval is None else aval)
            elif isinstance(x, core.Tracer):  # the parent is concrete: it has no tracers
                raise core.escaped_tracer_error(x, primitive)
            else:  # a raw Python or numpy value: give it its canonical dtype
                aval = core.get_aval(x)
                vals.append(np.array(x, dtype=dtypes.canonicalize_dtype(aval.dtype))[()])
                avals.append(aval)
            nodes.append(None)
            nonzero.append(False)
        if any_node:
            try:
                key = (primitive, tuple(avals), tuple(params.items()), tuple(nonzero),
                       config.enable_x64)
                entry = _linearized_cache[key]
            except KeyError:
                entry = _new_linearized(key)
            except TypeError:  # unhashable params
                entry = _GENERAL
            if config.eager_checks and (config.debug_nans or config.debug_infs):
                entry = _GENERAL  # every primitive binds eagerly, where the checks run
        if not any_node or entry is _GENERAL:
            state = core._state
            prev = state.trace
            state.trace = self.parent
            try:
                if not any_node:  # no tangent flows through: a plain primitive
                    return self.parent.process_primitive(primitive, args, params)
                return self._linearize_now(primitive, args, nodes, params)
            finally:
                state.trace = prev
        # (The impls of a cached linearization are numpy code: no trace is involved.)
        outs = entry.known(*vals)
        n_out = entry.n_out
        node = self.num_nodes
        if entry.single:
            self.num_nodes = node + 1
            self.tape.append((entry.bwd, outs[1:], nodes, (node,), None))
            out = TapeTracer(self, outs[0], entry.out_avals[0], node)
            return [out] if primitive.multiple_results else out
        results, out_nodes = [], []
        for v, aval, nz in zip(outs, entry.out_avals, entry.out_nonzero):
            if nz:
                results.append(TapeTracer(self, v, aval, node))
                out_nodes.append(node)
                node += 1
            else:
                results.append(array_type.from_impl(v, aval))
        if out_nodes:
            self.num_nodes = node
            self.tape.append((entry.bwd, outs[n_out:], nodes, out_nodes, entry.ct_avals))
        return results if primitive.multiple_results else results[0]

    def _linearize_now(self, primitive, args, nodes, params):
        """The general path: run the jvp rule with the tangents staged (as linearize_flat
        does) and tape the resulting linear jaxpr, residuals included, with a ``bwd`` that
        transposes it by binding the transpose rules eagerly."""
        rule = jvp_mod.jvp_rules.get(primitive)
        if rule is None:
            raise jvp_mod.NotDifferentiableError(primitive)
        pe = PartialEvalTrace(self.parent)
        primals, t_args, tangents = [], [], []
        for x, n in zip(args, nodes):
            if n is None:
                primals.append(x)
                tangents.append(jvp_mod.Zero(jvp_mod.tangent_aval(core.get_aval(x))))
            else:
                primals.append(x.primal)
                t = pe.new_arg(jvp_mod.tangent_aval(x.aval))
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
            if type(p) is not core._array_type:  # a rule may return a raw input as is
                from fungrad.operands import operand
                p = operand(p)
            node = self.num_nodes
            self.num_nodes = node + 1
            results.append(TapeTracer(self, p._value, p.aval, node))
            out_nodes.append(node)
            lin_outs.append(pe.to_tracer(t))
        if out_nodes:
            self.tape.append((_transpose_fn(pe.to_jaxpr(t_args, lin_outs), nodes), (), nodes,
                              out_nodes, None))
        return results if primitive.multiple_results else results[0]

    def backward(self, cts: dict) -> dict:
        """Accumulate cotangents (numpy values by node, seeded with ``cts``) back through the
        tape; returns the cotangent of every node that received one."""
        add = _add_impl()
        pop = cts.pop
        for bwd, residuals, in_nodes, out_nodes, ct_avals in reversed(self.tape):
            if len(out_nodes) == 1:
                ct = pop(out_nodes[0], None)
                if ct is None:
                    continue
                in_cts = bwd(*residuals, ct)
            else:
                out_cts = [pop(n, None) for n in out_nodes]
                if all(ct is None for ct in out_cts):
                    continue
                if ct_avals is not None:  # a cached linearization takes zeros, not None
                    out_cts = [np.zeros(a.shape, a.dtype) if ct is None else ct
                               for ct, a in zip(out_cts, ct_avals)]
                in_cts = bwd(*residuals, *out_cts)
            for n, ct in zip(in_nodes, in_cts):
                if ct is not None:
                    prev = cts.get(n)
                    cts[n] = ct if prev is None else add(prev, ct)
        return cts


def _transpose_fn(linear: core.ClosedJaxpr, nodes):
    """``bwd(*cts)`` for a linear jaxpr taped by the general path (its inputs: the tangents of
    the primitive's inputs that are nodes): numpy cotangents of its outputs (None for none) to
    one numpy cotangent per input of the primitive (None where none flows)."""
    from fungrad.array import Array
    from fungrad.transforms.transpose import UndefPrimal, backward_pass

    jaxpr = linear.jaxpr

    def bwd(*out_cts):
        cts = [jvp_mod.Zero(v.aval) if ct is None else Array.from_impl(ct, v.aval)
               for ct, v in zip(out_cts, jaxpr.outvars)]
        in_cts = iter(backward_pass(jaxpr, linear.consts,
                                    [UndefPrimal(v.aval) for v in jaxpr.invars], cts))
        out = []
        for n in nodes:
            ct = None if n is None else next(in_cts)
            out.append(None if ct is None or type(ct) is jvp_mod.Zero else ct._value)
        return out

    return bwd


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

    Returns ``(primals_out, vjp_flat)``; ``vjp_flat(cts)`` takes one numpy cotangent (or None)
    per output and gives one numpy cotangent per primal (None where none flows), evaluating
    the tape right away: this is for a pullback used once, eagerly (grad's)."""
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
            if n is not None and ct is not None:
                seed[n] = ct if n not in seed else add(seed[n], ct)
        got = trace.backward(seed)
        return [got.get(t.node) if type(t) is TapeTracer else None for t in tracers]

    return primals_out, vjp_flat
