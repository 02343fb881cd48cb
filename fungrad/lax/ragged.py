"""Ragged (grouped) matrix products and ``scatter_apply``, with JAX's ``lax`` names.

``ragged_dot_general`` multiplies with the rows (or contracted elements, or batch entries) of
``lhs`` split into consecutive groups of sizes ``group_sizes``: group ``g`` covers positions
``[sum(sizes[:g]), sum(sizes[:g+1]))`` of the ragged dimension (positions past the last group
take part in nothing, and sizes beyond the dimension are cut off there). It is written as
``dot_general`` on ``lhs`` masked per group, stacked along a new leading axis: group ``g``
pairs with ``rhs``'s group ``g`` (ragged non-contracting dimension) or gives output slice
``g`` (ragged contracting dimension); a ragged batch dimension changes nothing (every batch
entry meets its own rhs entry), so that mode is ``dot_general``, as JAX computes it.
Being lax compositions, they differentiate, batch and compile like user code.

``scatter_apply`` replaces the operand's elements at scattered positions by ``func`` of
them, ``func`` applied once per time an index names the element, as XLA's scatter does.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fungrad import core, dtypes
from fungrad.core import get_aval
from fungrad.lax.utils import operand

__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general", "scatter_apply"]


class RaggedDotDimensionNumbers(NamedTuple):
    """The dimensions of a ``ragged_dot_general`` (JAX's): ``dot_dimension_numbers`` as for
    ``dot_general``, the lhs ragged dimension (one) and the rhs group dimension (at most
    one)."""

    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple


def _ints(xs) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _group_mask(fname, gs, lhs_shape, ragged: int, outer_dims, group_count):
    """Boolean mask ``[g, *lhs_shape]``: position ``i`` of the ragged dimension is in group
    ``g``. ``gs`` has shape ``[*sizes of outer_dims, g]`` (or ``[g]``, broadcast)."""
    from fungrad import lax

    gshape = get_aval(gs).shape
    outer_shape = tuple(lhs_shape[d] for d in outer_dims)
    if gshape == (group_count,):
        gs = lax.broadcast_in_dim(gs, (*outer_shape, group_count), (len(outer_shape),))
    elif gshape != (*outer_shape, group_count):
        raise ValueError(
            f"{fname}: group_sizes must have shape {(group_count,)} or "
            f"{(*outer_shape, group_count)} for these operands, got {gshape}"
        )
    gs = lax.convert_element_type(gs, np.int32)
    nout = len(outer_shape)
    ends = lax.cumsum(gs, nout)
    starts = lax.sub(ends, gs)
    # [outer..., g] -> [g, outer dims in lhs order], then broadcast into [g, *lhs_shape]
    order = sorted(range(nout), key=lambda i: outer_dims[i])
    perm = (nout, *order)
    full = (group_count, *lhs_shape)
    bdims = (0, *(1 + outer_dims[i] for i in order))
    starts = lax.broadcast_in_dim(lax.transpose(starts, perm), full, bdims)
    ends = lax.broadcast_in_dim(lax.transpose(ends, perm), full, bdims)
    pos = lax.broadcasted_iota(np.int32, full, 1 + ragged)
    return lax.bitwise_and(lax.le(starts, pos), lax.lt(pos, ends))


def ragged_dot_general(
    lhs,
    rhs,
    group_sizes,
    ragged_dot_dimension_numbers,
    precision=None,
    preferred_element_type=None,
    group_offset=None,
    out_sharding=None,
):
    """``dot_general`` with the lhs ragged dimension split into groups
    (``jax.lax.ragged_dot_general``); see the module docstring. ``group_sizes`` has shape
    ``[g]`` (broadcast) or ``[b..., x..., g]`` as JAX documents. ``group_offset`` (which
    JAX's own CPU backend rejects too) and ``out_sharding`` (meshes) are not supported."""
    from fungrad import lax

    fname = "ragged_dot_general"
    if group_offset is not None:
        raise ValueError(
            f"{fname}: group_offset is not supported (pass None); slice the groups you need instead"
        )
    if out_sharding is not None:
        raise ValueError(
            f"{fname}: out_sharding needs a device mesh; fungrad runs on one device (pass None)"
        )
    lhs, rhs = operand(lhs, fname), operand(rhs, fname)
    gs = operand(group_sizes, fname)
    if dtypes.kind(get_aval(gs).dtype) not in "iu" or get_aval(gs).ndim < 1:
        raise TypeError(
            f"{fname}: group_sizes must be an integer array with a trailing group "
            f"dimension, got {get_aval(gs).str_short()}"
        )
    dn = ragged_dot_dimension_numbers
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    lc, rc, lb, rb = _ints(lc), _ints(rc), _ints(lb), _ints(rb)
    ragged, groups = _ints(dn.lhs_ragged_dimensions), _ints(dn.rhs_group_dimensions)
    if len(ragged) != 1 or len(groups) > 1:
        raise ValueError(
            f"{fname}: need exactly one lhs ragged dimension and at most one rhs "
            f"group dimension, got {ragged} and {groups}"
        )
    r = ragged[0]
    lshape, rshape = get_aval(lhs).shape, get_aval(rhs).shape
    g = get_aval(gs).shape[-1]
    # group_sizes is [b..., x..., g]: x are the lhs dims of the ragged one's kind before it
    if r in lc:
        mode, outer = "contracting", [*lb, *lc[: lc.index(r)]]
    elif r in lb:
        mode, outer = "batch", list(lb[: lb.index(r)])
    else:
        mode, outer = "noncontracting", [*lb, *[d for d in range(r) if d not in lb + lc]]
    if (mode == "noncontracting") != bool(groups):
        raise ValueError(
            f"{fname}: rhs must have a group dimension exactly when the lhs "
            f"ragged dimension {r} is a non-contracting one"
        )
    if groups and rshape[groups[0]] != g:
        raise ValueError(
            f"{fname}: rhs group dimension {groups[0]} has size "
            f"{rshape[groups[0]]}, but group_sizes has {g} groups"
        )
    if mode == "batch":
        # each batch entry pairs with its own rhs entry whatever its group: as in JAX, this
        # is dot_general (group_sizes is only checked)
        _group_mask(fname, gs, lshape, r, outer, g)
        return lax.dot_general(
            lhs,
            rhs,
            ((lc, rc), (lb, rb)),
            precision=precision,
            preferred_element_type=preferred_element_type,
        )
    mask = _group_mask(fname, gs, lshape, r, outer, g)
    lhs_g = lax.broadcast_in_dim(lhs, (g, *lshape), tuple(range(1, len(lshape) + 1)))
    masked = lax.select_n(mask, lax.full((g, *lshape), 0, get_aval(lhs).dtype), lhs_g)
    shift = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    if mode == "noncontracting":
        gr = groups[0]
        out = lax.dot_general(
            masked,
            rhs,
            ((shift(lc), rc), ((0, *shift(lb)), (gr, *rb))),
            precision=precision,
            preferred_element_type=preferred_element_type,
        )
        return lax.reduce_sum(out, (0,))
    out = lax.dot_general(
        masked,
        rhs,
        ((shift(lc), rc), (shift(lb), rb)),
        precision=precision,
        preferred_element_type=preferred_element_type,
    )
    nb = len(lb)
    perm = (nb, *range(nb), *range(nb + 1, get_aval(out).ndim))
    return lax.transpose(out, perm)


def ragged_dot(
    lhs,
    rhs,
    group_sizes,
    precision=None,
    preferred_element_type=None,
    group_offset=None,
    out_sharding=None,
):
    """Grouped matmul (``jax.lax.ragged_dot``): ``lhs`` ``(m, k)``, ``rhs`` ``(g, k, n)``,
    ``group_sizes`` ``(g,)``; rows of ``lhs`` in group ``i`` (consecutive, in order) are
    multiplied by ``rhs[i]``, rows past the groups give zeros. Result ``(m, n)``."""
    lshape = np.shape(lhs) if not isinstance(lhs, core.Tracer) else get_aval(lhs).shape
    rshape = np.shape(rhs) if not isinstance(rhs, core.Tracer) else get_aval(rhs).shape
    if len(lshape) != 2 or len(rshape) != 3 or lshape[1] != rshape[1]:
        raise ValueError(
            f"ragged_dot: expected lhs (m, k) and rhs (g, k, n), got shapes "
            f"{tuple(lshape)} and {tuple(rshape)}"
        )
    dn = RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))
    return ragged_dot_general(
        lhs, rhs, group_sizes, dn, precision, preferred_element_type, group_offset, out_sharding
    )


def scatter_apply(
    operand_,
    scatter_indices,
    func,
    dimension_numbers,
    *,
    update_shape=(),
    indices_are_sorted=False,
    unique_indices=False,
    mode=None,
):
    """``operand_`` with each element that the scatter addresses replaced by ``func`` of it,
    once per index that names it (``jax.lax.scatter_apply``). ``func`` maps a scalar to a
    scalar (it is applied elementwise); ``update_shape`` is the shape the updates of the
    equivalent scatter would have; ``mode`` handles out-of-bounds indices as for scatter
    (dropped by default). Unlike JAX's, it is differentiable (a bounded loop of selects).
    """
    from fungrad import lax
    from fungrad.transforms.vmap_api import vmap

    if not callable(func):
        raise TypeError(f"scatter_apply: func must be callable, got {type(func).__name__}")
    x = operand(operand_, "scatter_apply")
    aval = get_aval(x)
    ones = lax.full(tuple(update_shape), 1, np.int32)
    counts = lax.scatter_add(
        lax.full(aval.shape, 0, np.int32),
        scatter_indices,
        ones,
        dimension_numbers,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
    )

    def apply(v):
        flat = lax.reshape(v, (int(np.prod(aval.shape, dtype=int)),))
        out = vmap(func)(flat)
        out = operand(out, "scatter_apply func")
        if get_aval(out).shape != flat.shape[:1] or get_aval(out).dtype != aval.dtype:
            raise TypeError(
                f"scatter_apply: func must map a {aval.dtype} scalar to a "
                f"{aval.dtype} scalar, got {get_aval(out).str_short()} per element"
            )
        return lax.reshape(out, aval.shape)

    def body(state):
        v, c = state
        hit = lax.gt(c, lax.full(aval.shape, 0, np.int32))
        v = lax.select_n(hit, v, apply(v))
        return v, lax.sub(c, lax.convert_element_type(hit, np.int32))

    def more(state):
        return lax.gt(lax.reduce_max(state[1], tuple(range(aval.ndim))), lax.full((), 0, np.int32))

    # an element is addressed at most once per index vector (the last dimension of
    # scatter_indices holds the vectors): that bounds the loop, so it is differentiable
    n_index = int(np.prod(np.shape(scatter_indices)[:-1], dtype=int))
    if n_index == 0:
        return x
    if unique_indices or n_index == 1:
        return body((x, counts))[0]
    return lax.while_loop(more, body, (x, counts), max_steps=n_index)[0]
