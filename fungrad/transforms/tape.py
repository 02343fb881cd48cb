"""Eager reverse mode: a tape of per-primitive linearizations (``grad`` outside ``jit``).

``grad`` of a function run eagerly needs no jaxpr of the whole computation: each primitive can
be linearized on its own, as it runs. The linearization of one primitive depends only on its
input avals, its params and which inputs carry a tangent, so it is built once per such
signature (by tracing the jvp rule abstractly) into two small jaxprs of first-order
primitives: ``known`` computes the primal outputs and the residuals, ``bwd`` maps the
residuals and the output cotangents to the input cotangents (the transposed linear part).
Both are compiled to plain Python functions calling the primitives' numpy impls, so a later
call with the same signature costs about what numpy does, and the backward pass walks the
tape in reverse calling the ``bwd`` functions. A primitive whose rule cannot be traced that
way (higher-order primitives, custom rules, rules that look at values) is linearized as it
runs, exactly as ``linearize_flat`` does, into a linear jaxpr that the backward pass
transposes.
"""

from __future__ import annotations

import enum

import numpy as np

from fungrad import core, dtypes, nan_hunt, source_info
from fungrad.array import Array
from fungrad.config import config
from fungrad.core import set_current_trace
from fungrad.ir.passes import simplify
from fungrad.operands import operand
from fungrad.transforms import jvp as jvp_mod
from fungrad.transforms.memo import CacheDict
from fungrad.transforms.partial_eval import PartialEvalTrace
from fungrad.transforms.pycodegen import python_function
from fungrad.transforms.staging import JaxprTrace, JaxprTracer, hoist_tracer_consts, trace_to_jaxpr
from fungrad.transforms.transpose import UndefPrimal, backward_pass

__all__ = ["TapeTrace", "TapeTracer", "tape_vjp_flat"]


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


class _Linearized:
    """One primitive's cached linearization (see the section comment). ``known(*values)``
    gives the primal outputs followed by the residuals; ``bwd(*residuals, *cts)`` maps the
    cotangents of the outputs with a non-zero tangent (``out_nonzero``) to one cotangent per
    input of the primitive (None for the inputs ``ct_inputs`` does not list).

    Where only some of those outputs receive a cotangent (``lax.sort``'s keys unused, say),
    :meth:`bwd_for` gives the backward function of that subset: the others are symbolic
    zeros, as in ``grad`` under ``jit``, so no zero cotangent reaches an input whose
    derivative is infinite or NaN (``0 * nan``: the gradient of ``sort((sqrt(x), x))[1]`` at
    a negative x was NaN eagerly, finite under jit and in JAX)."""

    __slots__ = (
        "known", "n_out", "out_avals", "out_nonzero", "bwd", "ct_avals", "single", "name",
        "lin", "n_res", "n_in", "tangent_inputs", "variants",
    )  # fmt: skip

    def __init__(self, primitive, known, n_out, out_nonzero, lin, n_res, n_in, nonzero, full):
        self.name = primitive.name
        self.known = python_function(known, f"{primitive.name}_known")
        self.n_out = n_out
        self.out_avals = known.jaxpr.out_avals[:n_out]
        self.out_nonzero = out_nonzero
        self.lin, self.n_res, self.n_in = lin, n_res, n_in
        self.tangent_inputs = [i for i, nz in enumerate(nonzero) if nz]
        self.ct_avals = [a for a, nz in zip(self.out_avals, out_nonzero) if nz]
        self.bwd = self._function(*full)  # every output's cotangent (traced by the builder)
        self.variants: dict = {(True,) * len(self.ct_avals): self.bwd}
        self.single = n_out == 1 and out_nonzero[0]  # the common case: one differentiable output

    def bwd_for(self, present: tuple):
        """``bwd(*residuals, *cts)`` for the cotangents of the differentiable outputs where
        ``present`` is true (the others are zero); one cotangent per input, None where none
        flows. Built once per subset."""
        fn = self.variants.get(present)
        if fn is None:
            with set_current_trace(core.EvalTrace()):
                fn = self.variants[present] = self._function(
                    *_bwd_jaxpr(self.lin, self.n_res, present)
                )
        return fn

    def _function(self, jaxpr: core.ClosedJaxpr, in_mask: list):
        """The Python function of a backward jaxpr (:func:`_bwd_jaxpr`), one cotangent per
        input. A subset's jaxpr holds fewer equations of the full one's first-order kinds."""
        ct_inputs = tuple(i for i, m in zip(self.tangent_inputs, in_mask) if m)
        return python_function(jaxpr, f"{self.name}_bwd", (self.n_in, ct_inputs))


_GENERAL = object()  # cache entry: this signature is linearized as it runs
_linearized_cache: dict = CacheDict()  # (emptied by clear_caches)


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
        tangents = [
            next(it) if nz else jvp_mod.Zero(tangent_aval(a)) for a, nz in zip(in_avals, nonzero)
        ]
        with set_current_trace(pe):
            p_out, t_out = rule(primals, tangents, **params)
        if not primitive.multiple_results:
            p_out, t_out = [p_out], [t_out]
        out_nonzero = [type(t) is not jvp_mod.Zero for t in t_out]
        lin_outs = [t for t in t_out if type(t) is not jvp_mod.Zero]
        if not all(pe.is_unknown(t) for t in lin_outs):
            return None  # a tangent that does not depend on the input tangents
        lin, residuals = hoist_tracer_consts(simplify(pe.to_jaxpr(t_args, lin_outs)))
        if not all(type(r) is JaxprTracer and r._trace is known for r in residuals):
            return None
        known_jaxpr = simplify(
            known.to_jaxpr(primals, [known.to_tracer(p) for p in p_out] + residuals)
        )
        n_res = len(residuals)
        full = _bwd_jaxpr(lin, n_res, (True,) * len(lin.jaxpr.outvars))
    if not (_first_order(known_jaxpr.jaxpr) and _first_order(full[0].jaxpr)):
        return None
    return known_jaxpr, len(p_out), out_nonzero, lin, n_res, len(in_avals), nonzero, full


def _bwd_jaxpr(lin: core.ClosedJaxpr, n_res: int, present: tuple):
    """The transpose of the linear jaxpr ``lin`` (its first ``n_res`` inputs residuals) as a
    jaxpr of ``(*residuals, *cts)``, the cotangents of the outputs where ``present`` is true
    (the others symbolic zeros), and which tangent inputs receive a cotangent (a list of
    bools, filled while tracing)."""
    lin_in, outs = lin.jaxpr.invars, lin.jaxpr.outvars
    in_mask: list[bool] = []

    def bwd(*xs):
        args = list(xs[:n_res]) + [UndefPrimal(v.aval) for v in lin_in[n_res:]]
        given = iter(xs[n_res:])
        cts = [next(given) if p else jvp_mod.Zero(v.aval) for v, p in zip(outs, present)]
        cts = backward_pass(lin.jaxpr, lin.consts, args, cts)[n_res:]
        in_mask[:] = [type(c) is not jvp_mod.Zero for c in cts]
        return [c for c in cts if type(c) is not jvp_mod.Zero]

    avals = [v.aval for v in lin_in[:n_res]] + [v.aval for v, p in zip(outs, present) if p]
    return simplify(trace_to_jaxpr(bwd, avals)), in_mask


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
    entry = _linearized_cache[key] = _GENERAL if parts is None else _Linearized(primitive, *parts)
    return entry


class TapeTrace(core.Trace):
    """Eager reverse mode over a concrete parent (the EvalTrace): primals are computed for
    real and each primitive that touches a tangent appends a record to ``tape``:
    ``(bwd, residuals, in_nodes, out_nodes, entry)``, where ``bwd(*residuals, *cts)`` maps
    the cotangents of the ``out_nodes`` to one per input of the primitive, whose nodes are
    ``in_nodes`` (None for an input that is not a node, or where no cotangent flows), and
    ``entry`` is the cached :class:`_Linearized` of a primitive with several differentiable
    outputs (None otherwise).
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
                key = (
                    primitive,
                    tuple(avals),
                    tuple(params.items()),
                    tuple(nonzero),
                    config.enable_x64,
                )
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
            self.tape.append((entry.bwd, outs[n_out:], nodes, out_nodes, entry))
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
        fwd = source_info.begin_forward(primitive)  # what the rule stages differentiates it
        try:
            with set_current_trace(pe):
                p_out, t_out = rule(primals, tangents, **params)
        except FloatingPointError as e:  # debug_nans in the rule: show the primal inputs
            values = [np.asarray(getattr(p, "_value", p)) for p in primals]
            raise nan_hunt.add_forward_inputs(e, primitive, values) from None
        finally:
            source_info.end_forward(fwd)
        if not primitive.multiple_results:
            p_out, t_out = [p_out], [t_out]
        results, out_nodes, lin_outs = [], [], []
        for p, t in zip(p_out, t_out):
            if type(t) is jvp_mod.Zero:
                results.append(p)
                continue
            if type(p) is not core._array_type:  # a rule may return a raw input as is
                p = operand(p)
            node = self.num_nodes
            self.num_nodes = node + 1
            results.append(TapeTracer(self, p._value, p.aval, node))
            out_nodes.append(node)
            lin_outs.append(pe.to_tracer(t))
        if out_nodes:
            self.tape.append(
                (
                    _transpose_fn(pe.to_jaxpr(t_args, lin_outs), nodes, primitive, primals),
                    (),
                    nodes,
                    out_nodes,
                    None,
                )
            )
        return results if primitive.multiple_results else results[0]

    def backward(self, cts: dict) -> dict:
        """Accumulate cotangents (numpy values by node, seeded with ``cts``) back through the
        tape; returns the cotangent of every node that received one."""
        add = _add_impl()
        pop = cts.pop
        for bwd, residuals, in_nodes, out_nodes, entry in reversed(self.tape):
            if len(out_nodes) == 1:
                ct = pop(out_nodes[0], None)
                if ct is None:
                    continue
                in_cts = bwd(*residuals, ct)
            else:
                out_cts = [pop(n, None) for n in out_nodes]
                if all(ct is None for ct in out_cts):
                    continue
                if entry is not None and any(ct is None for ct in out_cts):  # the subset's bwd
                    bwd = entry.bwd_for(tuple(ct is not None for ct in out_cts))
                    out_cts = [ct for ct in out_cts if ct is not None]
                in_cts = bwd(*residuals, *out_cts)
            for n, ct in zip(in_nodes, in_cts):
                if ct is not None:
                    prev = cts.get(n)
                    cts[n] = ct if prev is None else add(prev, ct)
        return cts


def _transpose_fn(linear: core.ClosedJaxpr, nodes, primitive, primals):
    """``bwd(*cts)`` for a linear jaxpr taped by the general path (its inputs: the tangents of
    the primitive's inputs that are nodes): numpy cotangents of its outputs (None for none) to
    one numpy cotangent per input of the primitive (None where none flows). With debug_nans /
    debug_infs on, the primal inputs are kept so that a NaN made in this backward pass can
    show them."""
    jaxpr = linear.jaxpr
    if not (config.debug_nans or config.debug_infs):
        primals = None

    def bwd(*out_cts):
        cts = [
            jvp_mod.Zero(v.aval) if ct is None else Array.from_impl(ct, v.aval)
            for ct, v in zip(out_cts, jaxpr.outvars)
        ]
        try:
            in_cts = iter(
                backward_pass(
                    jaxpr, linear.consts, [UndefPrimal(v.aval) for v in jaxpr.invars], cts
                )
            )
        except FloatingPointError as e:
            if primals is None:
                raise
            values = [np.asarray(getattr(p, "_value", p)) for p in primals]
            raise nan_hunt.add_forward_inputs(e, primitive, values) from None
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
        _add = core.primitives["add"].impl
    return _add


_add = None


def tape_vjp_flat(fun, primals):
    """Eager reverse mode of ``fun(*tracers) -> list`` at concrete ``primals`` (Arrays).

    Returns ``(primals_out, vjp_flat)``; ``vjp_flat(cts)`` takes one numpy cotangent (or None)
    per output and gives one numpy cotangent per primal (None where none flows), evaluating
    the tape right away: this is for a pullback used once, eagerly (grad's)."""
    trace = TapeTrace(core.current_trace())
    tracers = [trace.new_tracer(p) if dtypes.kind(p.aval.dtype) in "fc" else p for p in primals]
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
