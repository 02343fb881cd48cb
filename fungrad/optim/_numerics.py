"""Leafwise helpers shared by the transformations: moments, bias correction, safe norms.

Private to :mod:`fungrad.optim`; every function takes and returns pytrees (or one array) and
is traceable, so the transformations built on them run under jit, vmap and grad.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as jnp
from fungrad import lax, tree_util

NO_PARAMS_MSG = (
    "this transformation needs the parameters: call update(updates, state, params) with the "
    "current params (optax's convention), not update(updates, state)."
)


def is_none(x) -> bool:
    return x is None


def abs_sq(x):
    """``|x|**2`` elementwise (real for complex ``x``)."""
    x = jnp.asarray(x)
    if jnp.iscomplexobj(x):
        return jnp.real(x * jnp.conj(x))
    return x * x


def safe_increment(count):
    """``count + 1``, saturating at the dtype's maximum instead of wrapping around."""
    count = jnp.asarray(count)
    dt = np.dtype(count.dtype)
    if np.issubdtype(dt, np.integer):
        top = np.iinfo(dt).max
    elif np.issubdtype(dt, np.floating):
        top = np.finfo(dt).max
    else:
        raise ValueError(
            f"safe_increment: the count has dtype {dt}; it must be an integer or float array."
        )
    top = jnp.asarray(top, dtype=dt)
    return jnp.where(count < top, count + jnp.asarray(1, dtype=dt), top)


safe_int32_increment = safe_increment


def zeros_like(tree, dtype=None):
    return tree_util.tree_map(lambda p: jnp.zeros_like(p, dtype=dtype), tree)


def full_like(tree, value, dtype=None):
    return tree_util.tree_map(lambda p: jnp.full_like(p, value, dtype=dtype), tree)


def cast(tree, dtype):
    """The tree with every leaf cast to ``dtype`` (unchanged when ``dtype`` is None)."""
    if dtype is None:
        return tree
    return tree_util.tree_map(lambda t: jnp.asarray(t).astype(dtype), tree)


def update_moment(updates, moments, decay, order):
    """``(1 - decay) * g**order + decay * m`` leaf by leaf (None updates stay None)."""

    def f(g, t):
        if g is None:
            return None
        return (1 - decay) * (g**order) + decay * t

    return tree_util.tree_map(f, updates, moments, is_leaf=is_none)


def update_moment_per_elem_norm(updates, moments, decay, order):
    """``(1 - decay) * |g|**order + decay * m`` leaf by leaf (``|g|**2`` real for complex)."""

    def f(g, t):
        if g is None:
            return None
        if order == 2:
            norm = abs_sq(g)
        else:
            norm = jnp.abs(g) ** order
        return (1 - decay) * norm + decay * t

    return tree_util.tree_map(f, updates, moments, is_leaf=is_none)


def bias_correction(moments, decay, count):
    """``m / (1 - decay**count)`` leaf by leaf, the divisor in each moment's dtype."""

    def f(t):
        scale = 1 - jnp.asarray(decay) ** count
        return t / scale.astype(t.dtype)

    return tree_util.tree_map(f, moments)


def safe_norm(x, min_norm, ord=None, axis=None, keepdims: bool = False):  # noqa: A002
    """``max(norm(x, ord, axis), min_norm)`` whose gradient is 0, not NaN, where the norm is
    at or below ``min_norm`` (``numpy.linalg.norm``'s ``ord``/``axis``/``keepdims``)."""
    x = jnp.asarray(x)
    norm = jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=True)
    small = norm <= min_norm
    masked = jnp.where(small, jnp.ones_like(x), x)
    if not keepdims:
        norm = jnp.squeeze(norm, axis=axis)
        small = norm <= min_norm
    return jnp.where(
        small, min_norm, jnp.linalg.norm(masked, ord=ord, axis=axis, keepdims=keepdims)
    )


def safe_root_mean_squares(x, min_rms):
    """``max(sqrt(mean(|x|**2)), min_rms)`` with a finite gradient where it is ``min_rms``."""
    x = jnp.asarray(x)
    rms = jnp.sqrt(jnp.mean(abs_sq(x)))
    small = rms <= min_rms
    masked = jnp.where(small, jnp.ones_like(x), x)
    return jnp.where(small, min_rms, jnp.sqrt(jnp.mean(abs_sq(masked))))


safe_rms = safe_root_mean_squares


def rsqrt(x):
    return lax.rsqrt(x)
