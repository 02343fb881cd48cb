"""``jax.experimental.shard_map``: the older spelling of :func:`fungrad.shard_map`."""

from __future__ import annotations

from fungrad.shard_map_impl import shard_map as _shard_map

__all__ = ["shard_map"]


def shard_map(f, mesh, in_specs, out_specs, check_rep: bool = True):
    """``jax.experimental.shard_map.shard_map``: ``jax.shard_map(f, mesh=mesh,
    in_specs=in_specs, out_specs=out_specs, check_vma=check_rep)`` (deprecated in JAX in
    favour of ``jax.shard_map``; the same behaviour here)."""
    return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_rep)
