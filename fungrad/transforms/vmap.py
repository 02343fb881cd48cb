"""Vectorising map: ``BatchTrace`` and the table of batching rules.

A ``BatchTracer`` holds a value and the dimension along which it is batched (``bdim``), or
``not_mapped`` (None) for values that are the same for every example. Unbatched values stay
unbatched: a primitive none of whose inputs is batched is bound in the parent trace unchanged.

Rule signature (``batch_rules[prim]``)::

    rule(axis_size, args, dims, **params) -> (outs, out_dims)

``dims[i]`` is an int or None; ``outs``/``out_dims`` are lists for multiple-result primitives.
Helpers for common rule shapes: ``defvectorized`` (unary elementwise), ``defbroadcasting``
(n-ary elementwise), ``defreducer`` (reductions with an ``axes`` param).
"""

from __future__ import annotations

from fungrad import core
from fungrad.core import Trace, Tracer, get_aval, set_current_trace

not_mapped = None

batch_rules: dict[core.Primitive, object] = {}


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
        shape = aval.shape[:self.bdim] + aval.shape[self.bdim + 1:]
        return aval.update(shape=shape)


class BatchTrace(Trace):
    def __init__(self, parent: Trace, axis_size: int):
        self.parent = parent
        self.axis_size = axis_size

    def _unpack(self, x):
        if isinstance(x, BatchTracer) and x._trace is self:
            return x.val, x.bdim
        if isinstance(x, Tracer) and not core.is_ancestor(self, x._trace):
            raise core.escaped_tracer_error(x)
        return x, not_mapped

    def process_primitive(self, primitive, args, params):
        vals, dims = zip(*map(self._unpack, args)) if args else ((), ())
        if all(d is None for d in dims):
            with set_current_trace(self.parent):
                return primitive.bind(*vals, **params)
        rule = batch_rules.get(primitive)
        if rule is None:
            raise TypeError(f"Batching rule for '{primitive}' not implemented")
        with set_current_trace(self.parent):
            outs, out_dims = rule(self.axis_size, list(vals), list(dims), **params)
        if primitive.multiple_results:
            return [self._wrap(o, d) for o, d in zip(outs, out_dims)]
        return self._wrap(outs, out_dims)

    def _wrap(self, val, bdim):
        return val if bdim is None else BatchTracer(self, val, bdim)


def vmap_flat(fun, axis_size: int, args, in_dims):
    """Run ``fun(*tracers) -> list`` batched; returns ``(outs, out_dims)`` (None = unbatched)."""
    trace = BatchTrace(core.current_trace(), axis_size)
    tracers = [a if d is None else BatchTracer(trace, a, d) for a, d in zip(args, in_dims)]
    with set_current_trace(trace):
        outs = fun(*tracers)
        unpacked = [trace._unpack(o) for o in outs]
    return [v for v, _ in unpacked], [d for _, d in unpacked]


# -- moving batch dimensions -------------------------------------------------------------------

def moveaxis(x, src: int, dst: int):
    """``x`` with dimension ``src`` moved to ``dst`` (a transpose, or ``x`` itself)."""
    from fungrad import lax
    if src == dst:
        return x
    perm = [i for i in range(get_aval(x).ndim) if i != src]
    perm.insert(dst, src)
    return lax.transpose(x, tuple(perm))


def bdim_at_front(x, bdim, axis_size: int):
    """``x`` with its batch dimension first; unbatched values are broadcast along it."""
    from fungrad import lax
    if bdim is None:
        aval = get_aval(x)
        return lax.broadcast_in_dim(x, (axis_size, *aval.shape),
                                    tuple(range(1, aval.ndim + 1)))
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
        from fungrad import lax
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
                a = lax.broadcast_in_dim(a, shape, (0,))
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
            shape = shape[:d] + shape[d + 1:]
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
    avals = [a.update(shape=(axis_size, *a.shape)) if b else a
             for a, b in zip(jaxpr.in_avals, in_batched)]
    out_batched: list[bool] = []

    def f(*args):
        dims = [0 if b else None for b in in_batched]
        outs, out_dims = vmap_flat(lambda *xs: core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs),
                                   axis_size, list(args), dims)
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
