"""Reductions: reduce_sum/max/min/prod/and/or, argmax/argmin, cumulative reductions,
reduce_window."""

from __future__ import annotations

import numpy as np

from fungrad.core import ShapedArray
from fungrad.lax.utils import NUMERIC, check_kinds, operand, standard_primitive

__all__ = ["reduce_sum", "reduce_sum_p"]


def _check_axes(name: str, x: ShapedArray, axes) -> None:
    if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"{name}: axes {axes} are not distinct dimensions of an operand of "
                         f"shape {x.shape}")


def _reduced_shape(shape, axes):
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_sum_impl(x, *, axes):
    return np.asarray(np.sum(x, axis=axes, dtype=x.dtype))[()]


def _reduce_sum_abstract_eval(x, *, axes):
    check_kinds("reduce_sum", x.dtype, NUMERIC)
    _check_axes("reduce_sum", x, axes)
    return ShapedArray(_reduced_shape(x.shape, axes), x.dtype, x.weak_type)


reduce_sum_p = standard_primitive("reduce_sum", _reduce_sum_impl, _reduce_sum_abstract_eval)


def reduce_sum(operand_, axes):
    """Sum over ``axes`` (a sequence of distinct dimensions)."""
    x = operand(operand_, "reduce_sum")
    return reduce_sum_p.bind(x, axes=tuple(int(a) for a in axes))
