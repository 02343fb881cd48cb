"""The complex-split rules (:mod:`fungrad.lowering.complex_split`) of the lax primitives whose
complex forms are written with lax operations, so they live here, above the lowering layer,
rather than in ``lowering/complex_rules.py`` (which binds primitives by name):

* ``scatter-mul``, ``scatter-max``, ``scatter-min``: colliding updates combine by complex
  multiplication or the lexicographic order, which is not part by part, so a loop applies one
  scatter position at a time (gather, combine, scatter);
* ``reduce_window_max``, ``reduce_window_min``: the window's elements (strided slices of the
  padded parts) folded in the lexicographic order.
"""

from __future__ import annotations

import math

from fungrad.lax.indexing import (
    GatherDimensionNumbers,
    ScatterDimensionNumbers,
    scatter_max_p,
    scatter_min_p,
    scatter_mul_p,
)
from fungrad.lax.windowed_reductions import (
    _reduce_window_shape,
    _window_patches,
    reduce_window_max_p,
    reduce_window_min_p,
)
from fungrad.lowering.complex_formulas import as_pair, broadcast, cmax, cmin, cmul, constant
from fungrad.lowering.complex_split import Pair, register_split_rule
from fungrad.lowering.fusion import LoweringError

__all__: list[str] = []


def _serial_scatter(combine):
    """The split rule of a combining scatter (``scatter-mul``, ``-max``, ``-min``) of complex
    values. Colliding updates combine by complex multiplication or the lexicographic order,
    which is not part by part, so the updates are applied one scatter position at a time in a
    loop: each reads its window of the operand (a gather with the scatter's own index
    semantics), combines it with the update and writes it back (a one-index scatter, free of
    collisions), in index order as the eager impl. Scatters with batching dimensions (from
    vmap) are not handled."""

    def rule(operand, indices, updates, *, dimension_numbers, mode, **_):
        from fungrad import lax

        dn = dimension_numbers
        if dn.operand_batching_dims:
            raise LoweringError(
                "jit: a complex scatter-mul/-max/-min with batching dimensions (from vmap) "
                f"has no lowering (dimension numbers {dn}); it works eagerly"
            )
        op, upd = as_pair(operand), as_pair(updates)
        n = math.prod(indices.shape[:-1])  # (the index vectors lie along the last dimension)
        idx = lax.reshape(indices, (n, indices.shape[-1]))
        scatter_dims = tuple(d for d in range(upd.re.ndim) if d not in dn.update_window_dims)
        perm = scatter_dims + tuple(dn.update_window_dims)
        window = tuple(upd.re.shape[d] for d in dn.update_window_dims)
        flat_upd = [lax.reshape(lax.transpose(p, perm), (n, *window)) for p in (upd.re, upd.im)]
        one_dn = ScatterDimensionNumbers(
            update_window_dims=tuple(range(1, len(window) + 1)),
            inserted_window_dims=dn.inserted_window_dims,
            scatter_dims_to_operand_dims=dn.scatter_dims_to_operand_dims,
        )
        gather_dn = GatherDimensionNumbers(
            offset_dims=one_dn.update_window_dims,
            collapsed_slice_dims=dn.inserted_window_dims,
            start_index_map=dn.scatter_dims_to_operand_dims,
        )
        sizes = iter(window)
        slice_sizes = tuple(
            1 if d in dn.inserted_window_dims else next(sizes) for d in range(op.re.ndim)
        )

        def body(i, carry):
            re, im, idx, ure, uim = carry
            at = lax.dynamic_slice_in_dim(idx, i, 1, 0)
            u = Pair(*(lax.dynamic_slice_in_dim(p, i, 1, 0) for p in (ure, uim)))
            old = Pair(*(lax.gather(p, at, gather_dn, slice_sizes, mode=mode) for p in (re, im)))
            new = combine(old, u)
            re, im = (
                lax.scatter(p, at, q, one_dn, mode=mode, unique_indices=True)
                for p, q in ((re, new.re), (im, new.im))
            )
            return re, im, idx, ure, uim

        re, im, *_ = lax.fori_loop(0, n, body, (op.re, op.im, idx, *flat_upd))
        return [Pair(re, im)]

    return rule


register_split_rule(scatter_mul_p, _serial_scatter(cmul))
register_split_rule(scatter_max_p, _serial_scatter(cmax))
register_split_rule(scatter_min_p, _serial_scatter(cmin))


# -- windowed max / min: the window's elements folded in XLA's lexicographic order -------------


def _reduce_window_extremum(combine, fill: float):
    def rule(x, **params):
        shape = _reduce_window_shape(x.re.shape, **params)
        if x.re.ndim == 0:
            return [x]
        if 0 in shape or x.re.size == 0:  # every window holds only padding: the identity
            return [
                Pair(
                    broadcast(constant(fill, x.re.dtype), shape),
                    broadcast(constant(0.0, x.re.dtype), shape),
                )
            ]
        res = _window_patches(x.re, fill, shape, **params)
        ims = _window_patches(x.im, 0.0, shape, **params)
        best = Pair(res[0], ims[0])
        for re, im in zip(res[1:], ims[1:]):
            best = combine(best, Pair(re, im))
        return [best]

    return rule


register_split_rule(reduce_window_max_p, _reduce_window_extremum(cmax, -math.inf))
register_split_rule(reduce_window_min_p, _reduce_window_extremum(cmin, math.inf))
