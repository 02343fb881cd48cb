"""Matrix products whose result only slices read compute just the part the slices cover.

The backward scan of ``concatenate([x, h]) @ W`` computes the cotangent of the whole
concatenation, ``dz @ W.T`` (``[B, I + H]``), and then keeps only the carry's part, a slice of
columns ``I:``: the ``x`` part is dropped because the scanned inputs are not differentiated.
The slice's columns are the rows ``I:`` of ``W``, so ``dz @ W[I:].T`` gives the same values
with ``H / (I + H)`` of the flops. :func:`narrow_sliced_products` rewrites a body this way; the
slice of ``W`` reads only the loop's constants, so loop-invariant code motion then runs it once,
before the loop (a per-iteration copy of the weight would cost more than the flops it saves).
"""

from __future__ import annotations

from fungrad import core
from fungrad.lax.dot import dot_general_p
from fungrad.lax.slicing import slice_p


def _free_dims(ndim: int, contract, batch) -> list[int]:
    taken = set(contract) | set(batch)
    return [d for d in range(ndim) if d not in taken]


def _operand_dims(eqn: core.JaxprEqn) -> list[tuple[int, int] | None]:
    """For each output dimension of the ``dot_general`` ``eqn``: ``(operand, dim)`` of the
    free operand dimension it comes from, or None for a batch dimension."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = (v.aval.ndim for v in eqn.invars)
    return (
        [None] * len(lb)
        + [(0, d) for d in _free_dims(lhs, lc, lb)]
        + [(1, d) for d in _free_dims(rhs, rc, rb)]
    )


def _covered(out: core.Var, readers) -> list[tuple[int, int]] | None:
    """Per dimension of ``out``, the ``[lo, hi)`` that its readers' unit-stride slices cover
    together; None when a reader is not such a slice."""
    if not readers or any(r is None or r.primitive is not slice_p for r in readers):
        return None
    if any(r.params["strides"] not in (None, (1,) * out.aval.ndim) for r in readers):
        return None
    return [
        (
            min(r.params["start_indices"][d] for r in readers),
            max(r.params["limit_indices"][d] for r in readers),
        )
        for d in range(out.aval.ndim)
    ]


def _slice_eqn(x, starts, limits) -> tuple[core.JaxprEqn, core.Var]:
    shape = tuple(hi - lo for lo, hi in zip(starts, limits))
    out = core.Var(x.aval.update(shape=shape))
    params = {"start_indices": tuple(starts), "limit_indices": tuple(limits), "strides": None}
    return core.JaxprEqn(slice_p, [x], params, [out]), out


def narrow_sliced_products(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """``closed`` with each ``dot_general`` whose result only unit-stride ``slice`` s read,
    and that together leave part of a free dimension unread, computed on slices of its
    operands instead (the readers then slice the narrower product, or read it whole). Returns
    ``closed`` itself when no product narrows."""
    j = closed.jaxpr
    readers: dict = {}
    for eqn in j.eqns:
        for v in eqn.invars:
            if type(v) is core.Var:
                readers.setdefault(v, []).append(eqn)
    for v in j.outvars:
        if type(v) is core.Var:
            readers.setdefault(v, []).append(None)
    shifts: dict = {}  # old product var -> (new var, per-dimension start)
    eqns = []
    for eqn in j.eqns:
        if eqn.primitive is dot_general_p:
            new = _narrowed(eqn, readers.get(eqn.outvars[0]))
            if new is not None:
                new_eqns, var, starts = new
                eqns += new_eqns
                shifts[eqn.outvars[0]] = (var, starts)
                continue
        if eqn.primitive is slice_p and eqn.invars[0] in shifts:
            var, starts = shifts[eqn.invars[0]]
            lo = [s - o for s, o in zip(eqn.params["start_indices"], starts)]
            hi = [s - o for s, o in zip(eqn.params["limit_indices"], starts)]
            params = dict(eqn.params, start_indices=tuple(lo), limit_indices=tuple(hi))
            eqns.append(core.JaxprEqn(slice_p, [var], params, eqn.outvars, eqn.source_info))
            continue
        eqns.append(eqn)
    if not shifts:
        return closed
    return core.ClosedJaxpr(core.Jaxpr(j.constvars, j.invars, eqns, j.outvars), closed.consts)


def _narrowed(eqn: core.JaxprEqn, readers):
    """``(equations, product var, per-dimension start)`` computing the part of ``eqn``'s
    product its slice readers cover, or None when they cover every free dimension whole."""
    out = eqn.outvars[0]
    cover = _covered(out, readers)
    if cover is None:
        return None
    src = _operand_dims(eqn)
    bounds = [[(0, n) for n in v.aval.shape] if type(v) is core.Var else None for v in eqn.invars]
    narrowed = False
    for d, (lo, hi) in enumerate(cover):
        if (lo, hi) == (0, out.aval.shape[d]):
            continue
        if src[d] is None or bounds[src[d][0]] is None:
            cover[d] = (0, out.aval.shape[d])  # a batch dimension: both operands; left whole
            continue
        k, od = src[d]
        bounds[k][od] = (lo, hi)
        narrowed = True
    if not narrowed:
        return None
    new_eqns, args = [], []
    for v, b in zip(eqn.invars, bounds):
        if b is not None and any((lo, hi) != (0, n) for (lo, hi), n in zip(b, v.aval.shape)):
            e, v = _slice_eqn(v, [lo for lo, _ in b], [hi for _, hi in b])
            new_eqns.append(e)
        args.append(v)
    shape = tuple(hi - lo for lo, hi in cover)
    var = core.Var(out.aval.update(shape=shape))
    new_eqns.append(core.JaxprEqn(dot_general_p, args, eqn.params, [var], eqn.source_info))
    return new_eqns, var, [lo for lo, _ in cover]
