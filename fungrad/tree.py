"""``jax.tree``: the pytree functions under short names (``fungrad.tree.map`` is
:func:`fungrad.tree_util.tree_map`, ...), plus :func:`static` for dataclass fields.

The functions are :mod:`fungrad.tree_util`'s own; see there for pytrees, treedefs and key
paths.
"""

from __future__ import annotations

import dataclasses

from fungrad import tree_util

__all__ = [
    "all",
    "broadcast",
    "flatten",
    "flatten_with_path",
    "leaves",
    "leaves_with_path",
    "map",
    "map_with_path",
    "reduce",
    "reduce_associative",
    "static",
    "structure",
    "transpose",
    "unflatten",
]

all = tree_util.tree_all  # noqa: A001  (JAX's name shadows the builtin here, as in jax.tree)
broadcast = tree_util.tree_broadcast
flatten = tree_util.tree_flatten
flatten_with_path = tree_util.tree_flatten_with_path
leaves = tree_util.tree_leaves
leaves_with_path = tree_util.tree_leaves_with_path
map = tree_util.tree_map  # noqa: A001
map_with_path = tree_util.tree_map_with_path
reduce = tree_util.tree_reduce
reduce_associative = tree_util.tree_reduce_associative
structure = tree_util.tree_structure
transpose = tree_util.tree_transpose
unflatten = tree_util.tree_unflatten


def static(**kwargs):
    """A ``dataclasses.field(**kwargs)`` marked ``metadata={'static': True}``: a meta field of
    a :func:`fungrad.tree_util.register_dataclass` dataclass (part of the treedef, not a
    leaf)."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)
