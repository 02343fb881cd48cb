"""Adafactor's factored second-moment estimate (Shazeer & Stern 2018), optax's
``scale_by_factored_rms``.

For a parameter whose two largest dimensions are both at least ``min_dim_size_to_factor``,
the running mean of ``g^2 + epsilon`` is kept as a row vector (mean over the largest dim
``d0``) and a column vector (mean over the second largest ``d1``); the update is
``g / sqrt(v_row / mean(v_row) (x) v_col)``. Smaller parameters keep the full ``v`` and get
``g / sqrt(v)``. The decay at step count ``c`` (before the step) is
``decay_rate_fn(c - step_offset, decay_rate)``, by default ``1 - (c + 1)^-decay_rate``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import fungrad.numpy as jnp
from fungrad import tree_util
from fungrad.optim import _numerics as nu
from fungrad.optim.base import GradientTransformation

__all__ = ["FactoredState", "scale_by_factored_rms"]


class FactoredState(NamedTuple):
    """Step count and, per parameter, the row/column factors or the full second moment
    (the unused ones are zeros of shape ``(1,)``)."""

    count: Any
    v_row: Any
    v_col: Any
    v: Any


def _decay_rate_pow(i, exponent=0.8):
    """Adafactor's second-moment decay ``1 - (i + 1)^-exponent``."""
    t = jnp.asarray(i).astype(jnp.float32) + 1.0
    return 1.0 - t ** (-exponent)


def _factored_dims(shape, factored, min_dim_size_to_factor):
    """``(d1, d0)``: the second largest and the largest dimension, or None if not factored."""
    if not factored or len(shape) < 2:
        return None
    order = np.argsort(shape, kind="stable")
    if shape[order[-2]] < min_dim_size_to_factor:
        return None
    return int(order[-2]), int(order[-1])


def scale_by_factored_rms(
    factored: bool = True,
    decay_rate=0.8,
    step_offset=0,
    min_dim_size_to_factor: int = 128,
    epsilon=1e-30,
    decay_rate_fn: Callable = _decay_rate_pow,
) -> GradientTransformation:
    """Scale by Adafactor's factored estimate of the gradients' root mean square; see the
    module docstring. Needs params (for their shapes)."""

    def init(params):
        def one(p):
            p = jnp.asarray(p)
            dims = _factored_dims(p.shape, factored, min_dim_size_to_factor)
            small = jnp.zeros((1,), dtype=p.dtype)
            if dims is None:
                return small, small, jnp.zeros_like(p)
            d1, d0 = dims
            row = jnp.zeros(tuple(np.delete(p.shape, d0)), dtype=p.dtype)
            col = jnp.zeros(tuple(np.delete(p.shape, d1)), dtype=p.dtype)
            return row, col, small

        flat, treedef = tree_util.tree_flatten(params)
        out = [one(p) for p in flat]
        return FactoredState(
            count=jnp.zeros((), dtype=jnp.int32),
            v_row=tree_util.tree_unflatten(treedef, [o[0] for o in out]),
            v_col=tree_util.tree_unflatten(treedef, [o[1] for o in out]),
            v=tree_util.tree_unflatten(treedef, [o[2] for o in out]),
        )

    def update(updates, state, params=None):
        if params is None:
            raise ValueError(f"scale_by_factored_rms: {nu.NO_PARAMS_MSG}")
        decay_t = decay_rate_fn(state.count - step_offset, decay_rate)

        def one(g, v_row, v_col, v, p):
            dtype = jnp.asarray(p).dtype
            dims = _factored_dims(jnp.shape(p), factored, min_dim_size_to_factor)
            g_sq = nu.abs_sq(g) + epsilon
            d = decay_t.astype(dtype)
            small = jnp.zeros((1,), dtype=dtype)
            if dims is None:
                new_v = (d * v + (1.0 - d) * g_sq).astype(dtype)
                return g * new_v**-0.5, small, small, new_v
            d1, d0 = dims
            new_row = (d * v_row + (1.0 - d) * jnp.mean(g_sq, axis=d0)).astype(dtype)
            new_col = (d * v_col + (1.0 - d) * jnp.mean(g_sq, axis=d1)).astype(dtype)
            reduced_d1 = d1 - 1 if d1 > d0 else d1
            row_mean = jnp.mean(new_row, axis=reduced_d1, keepdims=True)
            row_factor = (new_row / row_mean) ** -0.5
            col_factor = new_col**-0.5
            u = g * jnp.expand_dims(row_factor, d0) * jnp.expand_dims(col_factor, d1)
            return u, new_row, new_col, small

        flat_g, treedef = tree_util.tree_flatten(updates)
        rest = [treedef.flatten_up_to(t) for t in (state.v_row, state.v_col, state.v, params)]
        out = [one(g, *r) for g, *r in zip(flat_g, *rest)]
        unflat = [tree_util.tree_unflatten(treedef, [o[i] for o in out]) for i in range(4)]
        new = FactoredState(
            count=nu.safe_increment(state.count), v_row=unflat[1], v_col=unflat[2], v=unflat[3]
        )
        return unflat[0], new

    return GradientTransformation(init, update)
