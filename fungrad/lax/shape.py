"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, expand_dims, concatenate,
pad, slice, dynamic_slice, dynamic_update_slice, rev, iota."""

from __future__ import annotations

import numpy as np

from fungrad.core import ShapedArray
from fungrad.lax.utils import operand, standard_primitive

__all__ = ["broadcast_in_dim", "broadcast_in_dim_p"]


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(np.reshape(x, expanded), shape)


def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    name = "broadcast_in_dim"
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"{name}: broadcast_dimensions {broadcast_dimensions} must have one "
                        f"entry per operand dimension (operand shape {x.shape})")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions) or \
            list(broadcast_dimensions) != sorted(set(broadcast_dimensions)):
        raise TypeError(f"{name}: broadcast_dimensions {broadcast_dimensions} must be strictly "
                        f"increasing dimensions of the result shape {shape}")
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] not in (1, shape[d]):
            raise TypeError(f"{name}: operand dimension {i} has size {x.shape[i]}, which cannot "
                            f"broadcast to result dimension {d} of size {shape[d]} "
                            f"(operand shape {x.shape}, result shape {shape})")
    return ShapedArray(shape, x.dtype, x.weak_type)


broadcast_in_dim_p = standard_primitive(
    "broadcast_in_dim", _broadcast_in_dim_impl, _broadcast_in_dim_abstract_eval)


def broadcast_in_dim(operand_, shape, broadcast_dimensions):
    """Broadcast ``operand_`` to ``shape``; operand dim ``i`` maps to ``broadcast_dimensions[i]``."""
    x = operand(operand_, "broadcast_in_dim")
    shape = tuple(int(d) for d in shape)
    broadcast_dimensions = tuple(int(d) for d in broadcast_dimensions)
    if x.shape == shape and broadcast_dimensions == tuple(range(len(shape))):
        return x
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=broadcast_dimensions)
