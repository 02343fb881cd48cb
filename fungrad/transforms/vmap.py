"""Vectorising map: ``BatchTrace`` and the table of batching rules.

A ``BatchTracer`` holds a value and the dimension along which it is batched (``bdim``), or
``not_mapped`` (None) for values that are the same for every example. Unbatched values stay
unbatched: a primitive none of whose inputs is batched is bound in the parent trace unchanged.

Rule signature (``batch_rules[prim]``)::

    rule(axis_size, args, dims, **params) -> (outs, out_dims)

``dims[i]`` is an int or None; ``outs``/``out_dims`` are lists for multiple-result primitives.
Helpers for common rule shapes: ``defvectorized`` (unary elementwise), ``defbroadcasting``
(n-ary elementwise), ``defreducer`` (reductions with an ``axes`` param).

Named axes (``vmap(f, axis_name="i")``): while ``f`` runs, the name and the axis size are on a
per-thread *axis environment* (``axis_frames``), so collectives (``fungrad.lax.parallel``) can
check that their names are bound and ``lax.axis_size`` can answer. A primitive in
``collective_axes`` names the axes it works over; the BatchTrace whose name is among them runs
its ``collective_rules`` entry, even for unbatched operands (``psum(1.0, "i")`` is the axis
size), and the rule binds the primitive again over the remaining names. Every other BatchTrace
treats a collective as data parallel (its ``batch_rules`` entry). A higher-order primitive
(``jit``, ``cond``, ``scan``...) whose inner jaxpr uses this trace's name is batched even when
its operands are not, since the collective inside makes its result vary along the axis. While a
rule runs, ``current_rule_axis_name`` is that trace's name, so ``batch_jaxpr`` batches inner
jaxprs under the same name.
"""

from __future__ import annotations

import contextlib
import threading

from fungrad import core
from fungrad.core import Trace, Tracer, get_aval, set_current_trace
from fungrad.transforms import array_ops

not_mapped = None

batch_rules: dict[core.Primitive, object] = {}

collective_axes: dict[core.Primitive, object] = {}
"""collective primitive -> ``params -> tuple of axis names`` it communicates over."""

collective_rules: dict[core.Primitive, object] = {}
"""collective primitive -> ``rule(axis_name, axis_size, args, dims, **params) -> (outs,
out_dims)``, run by the BatchTrace named ``axis_name`` (one of the primitive's names)."""


class _AxisState(threading.local):
    def __init__(self):
        self.frames: list = []  # (name, size), innermost last
        self.rule_name = None  # the name of the BatchTrace whose rule is running


_axis_state = _AxisState()


def axis_frames() -> list:
    """The bound axis names and sizes, ``[(name, size), ...]``, innermost last."""
    return _axis_state.frames


@contextlib.contextmanager
def extend_axis_env(name, size: int):
    """Bind ``name`` to an axis of ``size`` while the block runs (a no-op for ``None``)."""
    if name is None:
        yield
        return
    frames = _axis_state.frames
    frames.append((name, size))
    try:
        yield
    finally:
        frames.pop()


def current_rule_axis_name():
    """The axis name of the BatchTrace whose batching rule is running (None when unnamed)."""
    return _axis_state.rule_name


def _uses_axis_name(params, name) -> bool:
    """Whether a sub-jaxpr in ``params`` (a higher-order primitive's) has a collective over
    ``name``."""
    for v in params.values():
        for j in v if isinstance(v, (tuple, list)) else (v,):
            if isinstance(j, core.ClosedJaxpr):
                j = j.jaxpr
            if isinstance(j, core.Jaxpr) and _jaxpr_uses_axis_name(j, name):
                return True
    return False


def _jaxpr_uses_axis_name(jaxpr: core.Jaxpr, name) -> bool:
    for eqn in jaxpr.eqns:
        names_of = collective_axes.get(eqn.primitive)
        if names_of is not None and name in names_of(eqn.params):
            return True
        if _uses_axis_name(eqn.params, name):
            return True
    return False


class BatchTracer(Tracer):
    __slots__ = ("val", "bdim")

    def __init__(self, trace: BatchTrace, val, bdim):
        self._trace = trace
        self.val = val
        self.bdim = bdim

    @property
    def aval(self):
        aval = get_aval(self.val)
        if self.bdim is None:
            return aval
        shape = aval.shape[: self.bdim] + aval.shape[self.bdim + 1 :]
        return aval.update(shape=shape)


class BatchTrace(Trace):
    def __init__(self, parent: Trace, axis_size: int, axis_name=None):
        self.parent = parent
        self.axis_size = axis_size
        self.axis_name = axis_name

    def _unpack(self, x):
        if isinstance(x, BatchTracer) and x._trace is self:
            return x.val, x.bdim
        if isinstance(x, Tracer) and not core.is_ancestor(self, x._trace):
            raise core.escaped_tracer_error(x)
        return x, not_mapped

    def process_primitive(self, primitive, args, params):
        vals, dims = zip(*map(self._unpack, args)) if args else ((), ())
        if self.axis_name is not None:
            return self._process_named(primitive, list(vals), list(dims), params)
        if all(d is None for d in dims):
            with set_current_trace(self.parent):
                return primitive.bind(*vals, **params)
        rule = batch_rules.get(primitive)
        if rule is None:
            raise TypeError(f"Batching rule for '{primitive}' not implemented")
        state = _axis_state
        prev = state.rule_name
        state.rule_name = None
        try:
            with set_current_trace(self.parent):
                outs, out_dims = rule(self.axis_size, list(vals), list(dims), **params)
        finally:
            state.rule_name = prev
        return self._wrap_all(primitive, outs, out_dims)

    def _process_named(self, primitive, vals, dims, params):
        """``process_primitive`` of a named axis: collectives over this name run their
        collective rule; a primitive whose sub-jaxpr has one is batched even if no operand is."""
        name = self.axis_name
        names_of = collective_axes.get(primitive)
        rule = None
        if names_of is not None and name in names_of(params):
            rule = collective_rules[primitive]
            call = lambda: rule(name, self.axis_size, vals, dims, **params)  # noqa: E731
        else:
            if all(d is None for d in dims):
                if names_of is not None or not _uses_axis_name(params, name):
                    with set_current_trace(self.parent):
                        return primitive.bind(*vals, **params)
                if vals:  # batch one operand, so the rule batches the inner jaxpr
                    with set_current_trace(self.parent):
                        vals[0] = bdim_at_front(vals[0], None, self.axis_size)
                    dims[0] = 0
            rule = batch_rules.get(primitive)
            if rule is None:
                raise TypeError(f"Batching rule for '{primitive}' not implemented")
            call = lambda: rule(self.axis_size, vals, dims, **params)  # noqa: E731
        state = _axis_state
        prev = state.rule_name
        state.rule_name = name
        try:
            with set_current_trace(self.parent):
                outs, out_dims = call()
        finally:
            state.rule_name = prev
        return self._wrap_all(primitive, outs, out_dims)

    def _wrap_all(self, primitive, outs, out_dims):
        if primitive.multiple_results:
            return [self._wrap(o, d) for o, d in zip(outs, out_dims)]
        return self._wrap(outs, out_dims)

    def _wrap(self, val, bdim):
        return val if bdim is None else BatchTracer(self, val, bdim)


def vmap_flat(fun, axis_size: int, args, in_dims, axis_name=None):
    """Run ``fun(*tracers) -> list`` batched; returns ``(outs, out_dims)`` (None = unbatched).
    ``axis_name`` (hashable, or None) names the axis for collectives inside ``fun``."""
    trace = BatchTrace(core.current_trace(), axis_size, axis_name)
    tracers = [a if d is None else BatchTracer(trace, a, d) for a, d in zip(args, in_dims)]
    with set_current_trace(trace), extend_axis_env(axis_name, axis_size):
        outs = fun(*tracers)
        unpacked = [trace._unpack(o) for o in outs]
    return [v for v, _ in unpacked], [d for _, d in unpacked]


# -- moving batch dimensions -------------------------------------------------------------------


def moveaxis(x, src: int, dst: int):
    """``x`` with dimension ``src`` moved to ``dst`` (a transpose, or ``x`` itself)."""
    if src == dst:
        return x
    perm = [i for i in range(get_aval(x).ndim) if i != src]
    perm.insert(dst, src)
    return array_ops.transpose(x, tuple(perm))


def bdim_at_front(x, bdim, axis_size: int):
    """``x`` with its batch dimension first; unbatched values are broadcast along it."""
    if bdim is None:
        aval = get_aval(x)
        return array_ops.broadcast_in_dim(
            x, (axis_size, *aval.shape), tuple(range(1, aval.ndim + 1))
        )
    return moveaxis(x, bdim, 0)


# -- helpers for defining rules ----------------------------------------------------------------


def defvectorized(primitive):
    """A unary elementwise primitive: apply it to the batched value, keep its batch dim."""

    def rule(axis_size, args, dims, **params):
        (x,), (d,) = args, dims
        return primitive.bind(x, **params), d

    batch_rules[primitive] = rule


def defbroadcasting(primitive):
    """An n-ary elementwise primitive (equal shapes, 0-d operands broadcast): move batch dims
    to the front; unbatched 0-d operands stay 0-d, other unbatched operands are broadcast."""

    def rule(axis_size, args, dims, **params):
        ranks = [get_aval(a).ndim - (d is not None) for a, d in zip(args, dims)]
        rank = max(ranks)
        out = []
        for a, d, r in zip(args, dims, ranks):
            if d is None and r == 0:
                out.append(a)  # a 0-d unbatched operand broadcasts inside the primitive
                continue
            a = bdim_at_front(a, d, axis_size)
            if r < rank:  # a batched per-example scalar against rank-`rank` operands
                shape = (axis_size,) + _example_shape(args, dims)
                a = array_ops.broadcast_in_dim(a, shape, (0,))
            out.append(a)
        result = primitive.bind(*out, **params)
        if primitive.multiple_results:
            return result, [0] * len(result)
        return result, 0

    batch_rules[primitive] = rule


def _example_shape(args, dims):
    """The common per-example shape of elementwise operands (the largest rank's)."""
    best = ()
    for a, d in zip(args, dims):
        shape = get_aval(a).shape
        if d is not None:
            shape = shape[:d] + shape[d + 1 :]
        if len(shape) > len(best):
            best = shape
    return best


def defreducer(primitive):
    """A reduction with an ``axes`` param: shift the reduced axes past the batch dim."""

    def rule(axis_size, args, dims, *, axes, **params):
        (x,), (d,) = args, dims
        new_axes = tuple(a + (a >= d) for a in axes)
        out = primitive.bind(x, axes=new_axes, **params)
        out_dim = d - sum(1 for a in axes if a < d)
        return out, out_dim

    batch_rules[primitive] = rule


def batch_jaxpr(jaxpr: core.ClosedJaxpr, axis_size: int, in_batched, instantiate):
    """Batch a ClosedJaxpr (with concrete consts); batched inputs/outputs carry the batch axis
    first.

    ``instantiate`` (a bool or one per output) forces outputs to be batched. Returns
    ``(jaxpr, out_batched)``.
    """
    from fungrad.transforms.staging import trace_to_jaxpr

    n_out = len(jaxpr.jaxpr.outvars)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    avals = [
        a.update(shape=(axis_size, *a.shape)) if b else a
        for a, b in zip(jaxpr.in_avals, in_batched)
    ]
    out_batched: list[bool] = []
    name = current_rule_axis_name()  # a rule of a named axis batches its jaxprs by that name

    def f(*args):
        dims = [0 if b else None for b in in_batched]
        outs, out_dims = vmap_flat(
            lambda *xs: core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs),
            axis_size,
            list(args),
            dims,
            axis_name=name,
        )
        res = []
        out_batched.clear()
        for o, d, i in zip(outs, out_dims, inst):
            if d is None and not i:
                res.append(o)
                out_batched.append(False)
            else:
                res.append(bdim_at_front(o, d, axis_size))
                out_batched.append(True)
        return res

    closed = trace_to_jaxpr(f, avals)
    if any(isinstance(c, core.Tracer) for c in closed.consts):
        raise AssertionError("batch_jaxpr: a tracer leaked into the jaxpr's constants")
    return closed, out_batched
