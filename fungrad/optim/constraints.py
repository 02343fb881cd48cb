"""optax's transformations that clip, decay, perturb or constrain updates.

- ``clip(max_delta)``: each element into ``[-max_delta, max_delta]``;
- ``clip_by_global_norm(max_norm)``: all updates times ``max_norm / ||g||`` when the global
  norm ``||g||`` exceeds ``max_norm``;
- ``clip_by_block_rms(threshold)``: each leaf divided by ``max(1, rms(u) / threshold)``;
- ``add_decayed_weights(weight_decay, mask)``: ``u + weight_decay * p`` (decoupled weight
  decay), only on the leaves the mask selects;
- ``add_noise(eta, gamma, key)``: Gaussian noise of variance ``eta / t^gamma`` (Neelakantan
  et al. 2015);
- ``keep_params_nonnegative()``: ``u = -p`` where ``p + u`` would go negative.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import fungrad.numpy as jnp
from fungrad import random, tree_util
from fungrad.optim import _numerics as nu
from fungrad.optim.base import EmptyState, GradientTransformation
from fungrad.optim.wrappers import masked

__all__ = [
    "AddDecayedWeightsState",
    "AddNoiseState",
    "ClipByGlobalNormState",
    "ClipState",
    "WeightDecaySchedule",
    "add_decayed_weights",
    "add_noise",
    "clip",
    "clip_by_block_rms",
    "clip_by_global_norm",
    "keep_params_nonnegative",
]

ClipState = EmptyState
ClipByGlobalNormState = EmptyState
AddDecayedWeightsState = EmptyState


def _empty_init(params):
    del params
    return EmptyState()


def clip(max_delta) -> GradientTransformation:
    """Clip every update element into ``[-max_delta, max_delta]``."""

    def update(updates, state, params=None):
        del params
        return tree_util.tree_map(lambda g: jnp.clip(g, -max_delta, max_delta), updates), state

    return GradientTransformation(_empty_init, update)


def clip_by_global_norm(max_norm) -> GradientTransformation:
    """Rescale all updates together so that their global l2 norm is at most ``max_norm``."""

    def update(updates, state, params=None):
        del params
        leaves = tree_util.tree_leaves(updates)
        sq = sum((jnp.sum(nu.abs_sq(x)) for x in leaves), jnp.asarray(0.0))
        # sqrt is evaluated away from 0 only, so a gradient through this transformation at
        # all-zero updates is 0 rather than optax's NaN (0 * d sqrt(0)); values are the same.
        pos = sq > 0
        g_norm = jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)
        small = g_norm < max_norm
        safe = jnp.where(small, 1.0, g_norm)

        def f(t):
            return jnp.where(small, t, (t / safe.astype(t.dtype)) * max_norm)

        return tree_util.tree_map(f, updates), state

    return GradientTransformation(_empty_init, update)


def clip_by_block_rms(threshold) -> GradientTransformation:
    """Divide each leaf by ``max(1, rms(u) / threshold)`` (Adafactor's update clipping)."""

    def update(updates, state, params=None):
        del params

        def f(u):
            denom = jnp.maximum(1.0, jnp.sqrt(jnp.mean(nu.abs_sq(u))) / threshold)
            return u / denom

        return tree_util.tree_map(f, updates), state

    return GradientTransformation(_empty_init, update)


class WeightDecaySchedule(NamedTuple):
    """The step count of a scheduled weight decay."""

    count: Any


def add_decayed_weights(weight_decay=0.0, mask=None) -> GradientTransformation:
    """Add ``weight_decay * p`` to each update (decoupled weight decay); needs params.

    ``weight_decay`` may be a schedule of the step count. ``mask`` (a tree of bools shaped like
    the parameters, a prefix of one, or a callable ``params -> tree``) limits the decay to the
    leaves marked True through :func:`~fungrad.optim.wrappers.masked`, as optax does; the
    others pass through unchanged.
    """
    scheduled = callable(weight_decay)

    def init(params):
        del params
        if scheduled:
            return WeightDecaySchedule(count=jnp.zeros((), dtype=jnp.int32))
        return EmptyState()

    def update(updates, state, params=None):
        if params is None:
            raise ValueError(f"add_decayed_weights: {nu.NO_PARAMS_MSG}")
        if scheduled:
            s = weight_decay(state.count)
            new_state = WeightDecaySchedule(count=nu.safe_increment(state.count))
        else:
            s = weight_decay
            new_state = state
        if isinstance(s, (int, float)) and s == 0.0:
            return updates, new_state
        out = tree_util.tree_map(
            lambda g, p: None if g is None else g + s * p, updates, params, is_leaf=nu.is_none
        )
        return out, new_state

    tx = GradientTransformation(init, update)
    return tx if mask is None else masked(tx, mask)


class AddNoiseState(NamedTuple):
    """The step count and the PRNG key of the next noise draw."""

    count: Any
    rng_key: Any


def add_noise(eta, gamma, key=None, *, seed: int | None = None) -> GradientTransformation:
    """Add Gaussian noise of standard deviation ``sqrt(eta / t^gamma)`` at step ``t`` (1 on
    the first step). ``key`` is a PRNG key or an int seed (``seed=`` is the older spelling)."""
    if key is None:
        if seed is None:
            raise ValueError("add_noise: give a PRNG key (key=fg.random.PRNGKey(0)) or an int.")
        key = seed
    elif seed is not None:
        raise ValueError("add_noise: give key or seed, not both.")

    def init(params):
        del params
        k = random.PRNGKey(key) if isinstance(key, int) else key
        return AddNoiseState(count=jnp.zeros((), dtype=jnp.int32), rng_key=k)

    def update(updates, state, params=None):
        del params
        count_inc = nu.safe_increment(state.count)
        std = jnp.sqrt(eta / count_inc.astype(jnp.float32) ** gamma)
        leaves, treedef = tree_util.tree_flatten(updates)
        keys = random.split(state.rng_key, len(leaves) + 1)
        noisy = [
            g + std.astype(g.dtype) * random.normal(k, jnp.shape(g), dtype=g.dtype)
            for g, k in zip(leaves, keys[1:])
        ]
        new = AddNoiseState(count=count_inc, rng_key=keys[0])
        return tree_util.tree_unflatten(treedef, noisy), new

    return GradientTransformation(init, update)


def keep_params_nonnegative() -> GradientTransformation:
    """Replace an update ``u`` by ``-p`` wherever ``p + u`` would be negative (needs params)."""

    def update(updates, state, params=None):
        if params is None:
            raise ValueError(f"keep_params_nonnegative: {nu.NO_PARAMS_MSG}")
        out = tree_util.tree_map(
            lambda p, u: None if p is None else jnp.where((p + u) < 0.0, -p, u),
            params,
            updates,
            is_leaf=nu.is_none,
        )
        return out, state

    return GradientTransformation(_empty_init, update)
