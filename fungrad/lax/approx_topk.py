"""``approx_max_k`` / ``approx_min_k``: JAX's approximate top-k, computed exactly.

JAX's versions may return a set with a recall below 1 on TPUs; an exact answer meets every
``recall_target``, so fungrad returns the exact top k (from ``lax.top_k``) along
``reduction_dimension``, with JAX's order: best first, ties broken by the lower index.
"""

from __future__ import annotations

import operator

from fungrad import core, dtypes
from fungrad.lax.elementwise import bitwise_not, neg
from fungrad.lax.sort import top_k
from fungrad.lax.utils import operand

__all__ = ["approx_max_k", "approx_min_k"]


def _check(name: str, x, k, reduction_dimension, recall_target):
    aval = core.get_aval(x)
    if aval.ndim == 0:
        raise TypeError(f"{name}: operand must have at least one dimension, got a 0-d array")
    dim = operator.index(reduction_dimension)
    if not -aval.ndim <= dim < aval.ndim:
        raise ValueError(
            f"{name}: reduction_dimension {dim} is out of range for an operand of rank {aval.ndim}"
        )
    k = operator.index(k)
    if not 0 <= k <= aval.shape[dim]:
        raise ValueError(
            f"{name}: k={k} must be in [0, {aval.shape[dim]}] (the size of "
            f"reduction_dimension {dim})"
        )
    if not 0 < float(recall_target) <= 1:
        raise ValueError(f"{name}: recall_target must be in (0, 1], got {recall_target}")
    return aval, k, dim


def approx_max_k(
    operand_,
    k: int,
    reduction_dimension: int = -1,
    recall_target: float = 0.95,
    reduction_input_size_override: int = -1,
    aggregate_to_topk: bool = True,
):
    """The ``k`` largest values along ``reduction_dimension`` and their int32 indices, as
    ``[values, indices]`` (``jax.lax.approx_max_k``; exact here, see the module docstring)."""
    x = operand(operand_, "approx_max_k")
    _, k, dim = _check("approx_max_k", x, k, reduction_dimension, recall_target)
    return list(top_k(x, k, axis=dim))


def approx_min_k(
    operand_,
    k: int,
    reduction_dimension: int = -1,
    recall_target: float = 0.95,
    reduction_input_size_override: int = -1,
    aggregate_to_topk: bool = True,
):
    """The ``k`` smallest values along ``reduction_dimension`` and their int32 indices, as
    ``[values, indices]`` (``jax.lax.approx_min_k``; exact here, see the module docstring)."""
    x = operand(operand_, "approx_min_k")
    aval, k, dim = _check("approx_min_k", x, k, reduction_dimension, recall_target)
    # an order-reversing map that top_k can rank: negation for floats, bitwise not for
    # integers (exact for signed and unsigned alike), logical not for bools
    flip = neg if dtypes.kind(aval.dtype) == "f" else bitwise_not
    values, indices = top_k(flip(x), k, axis=dim)
    return [flip(values), indices]
