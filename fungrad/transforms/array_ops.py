"""The few array operations the transforms apply themselves.

Instantiating a symbolic zero (``full``), adding two tangents (``add``), moving a batch
dimension (``transpose``), broadcasting an unbatched value along one (``broadcast_in_dim``) and
summing one away (``reduce_sum``) are lax's wrappers. The transforms sit below ``fungrad.lax``,
which imports them to attach its rules, so they cannot import it: lax hands its wrappers over
with :func:`register` when it is imported (``fungrad/lax/__init__.py``), and the transforms
call them as ``array_ops.add(x, y)``.
"""

from __future__ import annotations

__all__ = ["add", "broadcast_in_dim", "full", "reduce_sum", "register", "transpose"]


def _not_registered(*args, **kwargs):
    raise RuntimeError("fungrad.transforms.array_ops: fungrad.lax has not registered its "
                       "operations; import fungrad (which imports fungrad.lax) first")


full = add = transpose = broadcast_in_dim = reduce_sum = _not_registered


def register(*, full, add, transpose, broadcast_in_dim, reduce_sum) -> None:
    """Install lax's wrappers (called once, by fungrad.lax)."""
    globals().update(full=full, add=add, transpose=transpose,
                     broadcast_in_dim=broadcast_in_dim, reduce_sum=reduce_sum)
