"""``jax.flatten_util``: :func:`ravel_pytree`, a pytree of arrays as one flat vector.

The vector's dtype is JAX's promotion of the leaves' dtypes (weak types ignored, as in JAX);
``unravel`` cuts a vector of that length back into the leaves, reshaped and cast back to
their own dtypes. Both sides are compositions of lax operations, so they work under ``jit``,
``grad`` and ``vmap``.
"""

from __future__ import annotations

import numpy as np

from fungrad import dtypes, lax, tree_util

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree):
    """Ravel a pytree of arrays and scalars into one 1-D array.

    Args:
      pytree: a pytree whose leaves are arrays or Python/numpy scalars.

    Returns:
      ``(flat, unravel)``: ``flat`` is the leaves raveled and concatenated, in
      ``tree_leaves`` order, with the promoted dtype of the leaves (float32 and empty for a
      tree without leaves); ``unravel(v)`` rebuilds the pytree from a vector ``v`` of
      ``flat``'s length. When the leaves share one dtype ``unravel`` keeps ``v``'s dtype;
      otherwise ``v`` must have ``flat``'s dtype and each leaf gets its own dtype back.
      ``unravel`` is hashable and compares equal for equal structures (usable as a static
      argument).

    Example:
      >>> flat, unravel = ravel_pytree({'a': 1, 'b': fnp.ones(2)})
      >>> flat
      Array([1., 1., 1.], dtype=float32)
      >>> unravel(flat)['a']
      Array(1, dtype=int32)
    """
    leaves, treedef = tree_util.tree_flatten(pytree)
    if not leaves:
        return lax.full((0,), 0, dtypes.float32), _Unravel(treedef, (), (), None, None)
    from_dtypes = []
    for path, leaf in tree_util.tree_leaves_with_path(pytree):
        try:
            from_dtypes.append(dtypes.dtype_and_weak(leaf)[0])
        except TypeError as e:
            raise TypeError(
                f"ravel_pytree: the leaf at pytree{tree_util.keystr(path)} is a "
                f"{type(leaf).__name__}, not an array or number ({e}); leaves "
                "must be arrays or scalars"
            ) from None
    from_dtypes = tuple(from_dtypes)
    to_dtype = dtypes.result_type(*from_dtypes)
    shapes = tuple(tuple(np.shape(x)) for x in leaves)
    sizes = tuple(int(np.prod(s, dtype=np.int64)) for s in shapes)
    if all(dt == to_dtype for dt in from_dtypes):
        # NB: as in JAX, one dtype means no casts, and an unravel that keeps its input's dtype.
        parts = [lax.reshape(x, (n,)) for x, n in zip(leaves, sizes)]
        return lax.concatenate(parts, 0), _Unravel(treedef, sizes, shapes, None, None)
    parts = [
        lax.reshape(lax.convert_element_type(x, to_dtype), (n,)) for x, n in zip(leaves, sizes)
    ]
    return (lax.concatenate(parts, 0), _Unravel(treedef, sizes, shapes, from_dtypes, to_dtype))


class _Unravel:
    """The ``unravel`` of :func:`ravel_pytree`: vector -> pytree. Hashable and comparable by
    what it does (structure, sizes, shapes and dtypes), like JAX's ``HashablePartial``."""

    __slots__ = ("treedef", "sizes", "shapes", "from_dtypes", "to_dtype")

    def __init__(self, treedef, sizes, shapes, from_dtypes, to_dtype):
        self.treedef, self.sizes, self.shapes = treedef, sizes, shapes
        self.from_dtypes, self.to_dtype = from_dtypes, to_dtype

    def _key(self):
        return (self.treedef, self.sizes, self.shapes, self.from_dtypes, self.to_dtype)

    def __eq__(self, other):
        return type(other) is _Unravel and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"<unravel to {self.treedef}>"

    def __call__(self, flat):
        total = sum(self.sizes)
        if not hasattr(flat, "shape") and not isinstance(flat, (int, float, list, tuple)):
            raise TypeError(
                f"ravel_pytree's unravel: expected an array of shape ({total},), "
                f"got a value of type {type(flat).__name__}"
            )
        shape = tuple(np.shape(flat))
        if shape != (total,):
            raise ValueError(
                f"ravel_pytree's unravel: expected a vector of shape ({total},) "
                f"for {self.treedef}, got shape {shape}; pass an array shaped "
                "like the flat vector ravel_pytree returned"
            )
        if self.to_dtype is not None:
            got = dtypes.dtype_and_weak(flat)[0]
            if got != self.to_dtype:
                raise TypeError(
                    f"ravel_pytree's unravel: given an array of dtype {got}, but "
                    f"the leaves were raveled to dtype {self.to_dtype}; cast it "
                    f"with .astype({self.to_dtype.name!r})"
                )
        leaves, start = [], 0
        for i, (n, s) in enumerate(zip(self.sizes, self.shapes)):
            chunk = lax.reshape(lax.slice(flat, (start,), (start + n,)), s)
            if self.from_dtypes is not None:
                chunk = lax.convert_element_type(chunk, self.from_dtypes[i])
            leaves.append(chunk)
            start += n
        return self.treedef.unflatten(leaves)
