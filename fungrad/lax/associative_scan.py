"""``associative_scan``: all prefix combinations of an associative operation, in parallel.

``associative_scan(fn, elems)`` computes ``[e0, fn(e0, e1), fn(fn(e0, e1), e2), ...]`` along
``axis`` in O(log n) rounds of whole-array operations (the work-efficient scan of Blelloch /
Ladner-Fischer), so under ``jit`` it compiles to a few vectorised kernels instead of a loop:

1. combine neighbours pairwise: ``r[i] = fn(e[2i], e[2i+1])``;
2. scan ``r`` recursively: its results are the prefixes ending at the odd positions;
3. the prefixes at the even positions ``2i`` (``i >= 1``) are ``fn(odd[i-1], e[2i])``;
   position 0 is ``e[0]``;
4. interleave even and odd results.

The operations are expressed with ``fungrad.lax`` (slices, concatenate, reshape), so the scan is
differentiable, batchable and compilable like any other composition. ``fn`` must be
associative; it need not be commutative (the earlier element is always its first argument).
"""

from __future__ import annotations

import operator

from fungrad import core, tree_util
from fungrad.lax.shape import broadcast_in_dim, reshape, rev
from fungrad.lax.slicing import concatenate, slice_in_dim
from fungrad.lax.utils import operand

__all__ = ["associative_scan"]


def _interleave(even, odd, axis: int):
    """``out[2i] = even[i]``, ``out[2i+1] = odd[i]`` along ``axis`` (``len(even)`` is
    ``len(odd)`` or ``len(odd) + 1``)."""
    n_even, n_odd = even.shape[axis], odd.shape[axis]
    if n_even > n_odd:  # give odd a placeholder last element, dropped after interleaving
        odd = concatenate([odd, slice_in_dim(even, n_even - 1, n_even, axis=axis)], axis)
    shape = list(even.shape)
    stacked_shape = (*shape[: axis + 1], 1, *shape[axis + 1 :])
    dims = tuple(d if d <= axis else d + 1 for d in range(len(shape)))
    both = concatenate(
        [broadcast_in_dim(even, stacked_shape, dims), broadcast_in_dim(odd, stacked_shape, dims)],
        axis + 1,
    )
    shape[axis] = 2 * even.shape[axis]
    out = reshape(both, tuple(shape))
    return slice_in_dim(out, 0, n_even + n_odd, axis=axis)


def associative_scan(fn, elems, reverse: bool = False, axis: int = 0):
    """Inclusive scan of ``elems`` with the associative binary operation ``fn``
    (``jax.lax.associative_scan``).

    Args:
      fn: ``fn(a, b)`` combining two pytrees shaped like ``elems`` (with any length along
        ``axis``) elementwise into one of the same structure; associative, ``a`` earlier.
      elems: a pytree of arrays, all with the same length along ``axis``.
      reverse: scan from the end: ``flip(associative_scan(fn, flip(elems)))``, so ``out[i]``
        combines ``elems[i:]`` and ``fn``'s first argument is the *later* element (as in JAX).
      axis: the scanned axis.

    Returns:
      A pytree like ``elems``: ``out[i] = fn(... fn(elems[0], elems[1]) ..., elems[i])``.

    Example::

        lax.associative_scan(lax.add, fnp.arange(5.0))   # [0, 1, 3, 6, 10], as cumsum
    """
    if not callable(fn):
        raise TypeError(f"associative_scan: fn must be callable, got {type(fn).__name__}")
    leaves, tree = tree_util.tree_flatten(elems)
    if not leaves:
        raise ValueError("associative_scan: elems has no arrays; pass a pytree of arrays")
    leaves = [operand(x, "associative_scan") for x in leaves]
    ndim = min(core.get_aval(x).ndim for x in leaves)
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"associative_scan: axis must be an integer, got {axis!r}") from None
    if ndim == 0:
        raise ValueError(
            "associative_scan: elems contains a 0-d array; every array needs the "
            f"axis {axis} to scan along"
        )
    if not -ndim <= axis < ndim:
        raise ValueError(f"associative_scan: axis {axis} is out of range for arrays of rank {ndim}")
    num = leaves[0].shape[axis % leaves[0].ndim]
    if any(x.shape[axis % x.ndim] != num for x in leaves):
        raise ValueError(
            "associative_scan: the arrays of elems must have equal lengths along "
            f"axis {axis}, got shapes {[tuple(x.shape) for x in leaves]}"
        )
    axes = [axis % x.ndim for x in leaves]

    def combine(a_flat, b_flat):
        out = fn(tree_util.tree_unflatten(tree, a_flat), tree_util.tree_unflatten(tree, b_flat))
        out_flat, out_tree = tree_util.tree_flatten(out)
        if out_tree != tree:
            raise ValueError(
                "associative_scan: fn must return a pytree with the structure of "
                f"elems ({tree}), got {out_tree}"
            )
        want = b_flat[0].shape[axes[0]]
        for o, b in zip(out_flat, b_flat):
            if tuple(core.get_aval(o).shape) != tuple(b.shape):
                raise ValueError(
                    "associative_scan: fn must combine elementwise (the result "
                    f"shape must be its arguments' shape {tuple(b.shape)}), got "
                    f"{tuple(core.get_aval(o).shape)} for slices of length {want}"
                )
        return [operand(o, "associative_scan") for o in out_flat]

    def scan(xs):
        n = xs[0].shape[axes[0]]
        if n < 2:
            return xs
        pairs = combine(
            [slice_in_dim(x, 0, n - 1, 2, a) for x, a in zip(xs, axes)],
            [slice_in_dim(x, 1, n, 2, a) for x, a in zip(xs, axes)],
        )
        odd = scan(pairs)  # prefixes ending at positions 1, 3, 5, ...
        # prefixes ending at positions 2, 4, ...: the odd prefix just before, then e[2i]
        k = (n - 1) // 2
        if k:
            evens_tail = combine(
                [slice_in_dim(o, 0, k, axis=a) for o, a in zip(odd, axes)],
                [slice_in_dim(x, 2, n, 2, a) for x, a in zip(xs, axes)],
            )
            even = [
                concatenate([slice_in_dim(x, 0, 1, axis=a), t], a)
                for x, t, a in zip(xs, evens_tail, axes)
            ]
        else:
            even = [slice_in_dim(x, 0, 1, axis=a) for x, a in zip(xs, axes)]
        return [_interleave(e, o, a) for e, o, a in zip(even, odd, axes)]

    if reverse:
        leaves = [rev(x, (a,)) for x, a in zip(leaves, axes)]
        out = [rev(x, (a,)) for x, a in zip(scan(leaves), axes)]
    else:
        out = scan(leaves)
    return tree_util.tree_unflatten(tree, out)
