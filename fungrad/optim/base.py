"""The gradient-transformation protocol of optax, on fungrad arrays.

A :class:`GradientTransformation` is a pair of pure functions:

- ``init(params) -> state``: the state for a pytree of parameters (moments, step counts, ...);
- ``update(updates, state, params=None) -> (updates, state)``: turns gradients (or the
  updates of an earlier transformation) into new updates and the next state.

States are pytrees (NamedTuples of arrays, step counts as int32 arrays), so an optimizer step
runs under ``fg.jit``, ``fg.vmap`` and ``fg.grad`` and compiles into the same native function as
the loss. :func:`chain` composes transformations left to right; :func:`apply_updates` adds the
final updates to the parameters, keeping each parameter's dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import fungrad.numpy as jnp
from fungrad import tree_util

__all__ = [
    "EmptyState",
    "GradientTransformation",
    "GradientTransformationExtraArgs",
    "OptState",
    "Params",
    "ScalarOrSchedule",
    "Schedule",
    "TransformInitFn",
    "TransformUpdateFn",
    "TransformUpdateExtraArgsFn",
    "Updates",
    "apply_updates",
    "chain",
    "global_norm",
    "identity",
    "incremental_update",
    "periodic_update",
    "set_to_zero",
    "stateless",
    "stateless_with_tree_map",
    "with_extra_args_support",
]

Params = Any
"""A pytree of parameter arrays."""
Updates = Any
"""A pytree of gradients or updates with the structure of the parameters."""
OptState = Any
"""A pytree holding an optimizer's state (NamedTuples of arrays)."""
Schedule = Callable[[Any], Any]
"""A function of the step count (an int32 array) returning a scalar (a learning rate, ...)."""
ScalarOrSchedule = Any
"""A float, a scalar array, or a :data:`Schedule`."""


class TransformInitFn(Protocol):
    """``init(params) -> state``."""

    def __call__(self, params: Params) -> OptState: ...


class TransformUpdateFn(Protocol):
    """``update(updates, state, params=None) -> (updates, state)``."""

    def __call__(
        self, updates: Updates, state: OptState, params: Params | None = None
    ) -> tuple[Updates, OptState]: ...


class TransformUpdateExtraArgsFn(Protocol):
    """``update(updates, state, params=None, **extra_args) -> (updates, state)``."""

    def __call__(
        self, updates: Updates, state: OptState, params: Params | None = None, **extra_args: Any
    ) -> tuple[Updates, OptState]: ...


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none (an empty pytree)."""


class GradientTransformation(NamedTuple):
    """A pair ``(init, update)`` of pure functions; see the module docstring."""

    init: Callable
    update: Callable


class GradientTransformationExtraArgs(GradientTransformation):
    """A :class:`GradientTransformation` whose ``update`` also takes keyword ``**extra_args``
    (a loss value, a key, ...), which it may ignore; :func:`chain` passes them along."""


def _is_none(x) -> bool:
    return x is None


def apply_updates(params: Params, updates: Updates) -> Params:
    """``params + updates`` leaf by leaf, each result cast back to its parameter's dtype.

    A ``None`` parameter stays ``None`` (optax's convention for absent leaves), so a float32
    parameter updated by a float64 update (under x64) stays float32.
    """

    def add(p, u):
        if p is None:
            return None
        p = jnp.asarray(p)
        return jnp.asarray(p + u).astype(p.dtype)

    return tree_util.tree_map(add, params, updates, is_leaf=_is_none)


def incremental_update(new_tensors, old_tensors, step_size):
    """``step_size * new + (1 - step_size) * old`` leaf by leaf: a Polyak average, e.g. of a
    target network's parameters."""
    return tree_util.tree_map(
        lambda new, old: None if new is None else step_size * new + (1.0 - step_size) * old,
        new_tensors,
        old_tensors,
        is_leaf=_is_none,
    )


def periodic_update(new_tensors, old_tensors, steps, update_period: int):
    """``new_tensors`` on the steps that are multiples of ``update_period``, else
    ``old_tensors`` (``steps`` may be a traced int array)."""
    take_new = jnp.asarray(steps) % update_period == 0
    return tree_util.tree_map(
        lambda new, old: None if new is None else jnp.where(take_new, new, old),
        new_tensors,
        old_tensors,
        is_leaf=_is_none,
    )


def global_norm(updates: Updates):
    """The l2 norm of all the leaves of ``updates`` taken together (a scalar array)."""
    leaves = tree_util.tree_leaves(updates)
    if not leaves:
        return jnp.asarray(0.0)
    total = sum(jnp.sum(jnp.real(x * jnp.conj(x))) for x in leaves)
    return jnp.sqrt(total)


def with_extra_args_support(tx: GradientTransformation) -> GradientTransformationExtraArgs:
    """``tx`` as a :class:`GradientTransformationExtraArgs` (its ``update`` drops the extras)."""
    if isinstance(tx, GradientTransformationExtraArgs):
        return tx
    tx = GradientTransformation(*tx)

    def update(updates, state, params=None, **extra_args):
        del extra_args
        return tx.update(updates, state, params)

    return GradientTransformationExtraArgs(tx.init, update)


def chain(*args: GradientTransformation) -> GradientTransformationExtraArgs:
    """Apply the transformations one after the other; the state is the tuple of their states.

    Keyword ``extra_args`` given to the chained ``update`` reach every member that takes them.
    """
    for i, tx in enumerate(args):
        if not (isinstance(tx, tuple) and len(tx) == 2 and all(map(callable, tx))):
            raise TypeError(
                f"chain: argument {i} is {type(tx).__name__}, not a GradientTransformation "
                "(an (init, update) pair); build one with fungrad.optim's transforms."
            )
    txs = [with_extra_args_support(GradientTransformation(*tx)) for tx in args]

    def init(params):
        return tuple(tx.init(params) for tx in txs)

    def update(updates, state, params=None, **extra_args):
        if len(state) != len(txs):
            raise ValueError(
                f"chain.update: the state has {len(state)} members but the chain has "
                f"{len(txs)} transformations; pass the state returned by this chain's init."
            )
        new_state = []
        for s, tx in zip(state, txs):
            updates, s = tx.update(updates, s, params, **extra_args)
            new_state.append(s)
        return updates, tuple(new_state)

    return GradientTransformationExtraArgs(init, update)


def identity() -> GradientTransformation:
    """The transformation that returns its updates unchanged and keeps no state."""

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return updates, state

    return GradientTransformation(init, update)


def set_to_zero() -> GradientTransformation:
    """The transformation that turns every update into zeros (freezes the parameters)."""

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return tree_util.tree_map(jnp.zeros_like, updates), state

    return GradientTransformation(init, update)


def stateless(f: Callable[[Updates, Params | None], Updates]) -> GradientTransformation:
    """A transformation from ``f(updates, params) -> updates`` with no state."""

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        return f(updates, params), state

    return GradientTransformation(init, update)


def stateless_with_tree_map(f: Callable[[Any, Any], Any]) -> GradientTransformation:
    """A stateless transformation applying ``f(g, p) -> u`` to each leaf (``p`` may be None)."""

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        if params is None:
            out = tree_util.tree_map(lambda g: f(g, None), updates)
        else:
            out = tree_util.tree_map(f, updates, params)
        return out, state

    return GradientTransformation(init, update)
