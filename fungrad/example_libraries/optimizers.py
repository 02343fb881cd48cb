"""Optimizers as function triples over pytrees (``jax.example_libraries.optimizers``).

An optimizer is a triple ``(init_fun, update_fun, get_params)``:

- ``init_fun(params) -> opt_state``: the state for the pytree ``params`` (the parameters
  and whatever the method keeps per leaf: momentum, moment estimates, ...);
- ``update_fun(step, grads, opt_state) -> opt_state``: one step; ``step`` is the iteration
  index fed to the step-size schedule, ``grads`` has the structure of ``params``;
- ``get_params(opt_state) -> params``, with ``get_params(init_fun(params)) == params``.

The state is an :class:`OptimizerState`, a registered pytree, so a training step taking and
returning it can be ``jit``-ed. :func:`optimizer` turns a triple written for one array into one
for pytrees; every optimizer here is built that way. Update rules, defaults and state layouts
are JAX's (the same numbers step by step; :func:`unpack_optimizer_state` gives the same
structure), so states carry over between programs written for either.

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    opt_state = opt_init(params)

    @fungrad.jit
    def step(i, opt_state, batch):
        grads = fungrad.grad(loss)(get_params(opt_state), batch)
        return opt_update(i, grads, opt_state)
"""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

import fungrad.numpy as jnp
from fungrad import tree_util

__all__ = [
    "Array",
    "InitFn",
    "JoinPoint",
    "Optimizer",
    "OptimizerState",
    "Params",
    "ParamsFn",
    "Schedule",
    "State",
    "Step",
    "UpdateFn",
    "Updates",
    "adagrad",
    "adam",
    "adamax",
    "clip_grads",
    "constant",
    "exponential_decay",
    "inverse_time_decay",
    "l2_norm",
    "make_schedule",
    "momentum",
    "nesterov",
    "optimizer",
    "pack_optimizer_state",
    "piecewise_constant",
    "polynomial_decay",
    "rmsprop",
    "rmsprop_momentum",
    "sgd",
    "sm3",
    "unpack_optimizer_state",
]

# The pytree of parameters is the "outer" tree; each of its leaves gets an "inner" state
# pytree from the per-array init. OptimizerState keeps both flattened: packed_state[k] is
# the leaf list of leaf k's inner state, tree_def the outer structure, subtree_defs[k] the
# inner structure of leaf k (static: they go into the pytree's auxiliary data).
OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
OptimizerState.__doc__ = (
    "An optimizer's state, a pytree whose children are the arrays of ``packed_state``.\n\n"
    "``packed_state`` holds, per parameter leaf, the leaves of its state; ``tree_def`` the "
    "parameters' structure and ``subtree_defs`` each state's structure (static data)."
)
tree_util.register_pytree_node(
    OptimizerState,
    lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
    lambda aux, children: OptimizerState(children[0], aux[0], aux[1]),
)

Array = Any
Params = Any  # a pytree of arrays
State = Any  # the per-array state of one optimizer
Updates = Params  # gradients: the structure of the parameters
InitFn = Callable[[Params], OptimizerState]
Step = int
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]
Schedule = Callable[[Step], float]


class Optimizer(NamedTuple):
    """The ``(init_fn, update_fn, params_fn)`` triple an optimizer constructor returns."""

    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _flatten_states(states):
    flat = [tree_util.tree_flatten(s) for s in states]
    return tuple(leaves for leaves, _ in flat), tuple(tdef for _, tdef in flat)


def _unpack(where: str, opt_state):
    """``opt_state`` as an OptimizerState, and the per-leaf states it holds."""
    if not isinstance(opt_state, OptimizerState):
        if not (isinstance(opt_state, (tuple, list)) and len(opt_state) == 3):
            raise TypeError(
                f"optimizers.{where}: expected the OptimizerState made by init_fun "
                f"(or update_fun), got {type(opt_state).__name__}"
            )
        opt_state = OptimizerState(*opt_state)
    return opt_state, [
        tree_util.tree_unflatten(tdef, leaves)
        for tdef, leaves in zip(opt_state.subtree_defs, opt_state.packed_state)
    ]


def optimizer(
    opt_maker: Callable[..., tuple[Callable, Callable, Callable]],
) -> Callable[..., Optimizer]:
    """Decorator lifting an optimizer written for one array to pytrees of arrays.

    ``opt_maker`` returns ``(init, update, get_params)`` for ONE array; the result returns the
    triple for pytrees of arrays (each leaf with its own state).

    ``init(x0) -> state`` (any pytree), ``update(i, g, state) -> state`` (the same structure),
    ``get_params(state) -> x``. The lifted ``update_fun`` raises TypeError when the gradient
    tree's structure is not the parameters', or when ``update`` changes a state's structure."""

    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            x0_flat, tree = tree_util.tree_flatten(x0_tree)
            states_flat, subtrees = _flatten_states([init(x0) for x0 in x0_flat])
            return OptimizerState(states_flat, tree, subtrees)

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            opt_state, states = _unpack("update_fun", opt_state)
            grad_flat, grad_def = tree_util.tree_flatten(grad_tree)
            if grad_def != opt_state.tree_def:
                raise TypeError(
                    "optimizers.update_fun: the gradient tree does not match the parameter "
                    f"tree the optimizer was initialized with: parameter tree "
                    f"{opt_state.tree_def} and gradient tree {grad_def}; pass gradients of "
                    "get_params(opt_state)"
                )
            new_flat, new_subtrees = _flatten_states(
                [update(i, g, s) for g, s in zip(grad_flat, states)]
            )
            for old, new in zip(opt_state.subtree_defs, new_subtrees):
                if old != new:
                    raise TypeError(
                        "optimizers.update_fun: the per-array update returned a state of "
                        f"structure {new} for a state of structure {old}; it must keep the "
                        "structure init gave"
                    )
            return OptimizerState(new_flat, opt_state.tree_def, opt_state.subtree_defs)

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            opt_state, states = _unpack("get_params", opt_state)
            params = [get_params(s) for s in states]
            return tree_util.tree_unflatten(opt_state.tree_def, params)

        return Optimizer(tree_init, tree_update, tree_get_params)

    return tree_opt_maker


# --------------------------------------------------------------------------- optimizers


@optimizer
def sgd(step_size):
    """Stochastic gradient descent: ``x -= step_size(i) * g``. State: ``x``.

    ``step_size``: a positive scalar or a schedule ``i -> scalar``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0

    def update(i, g, x):
        return x - step_size(i) * g

    def get_params(x):
        return x

    return Optimizer(init, update, get_params)


@optimizer
def momentum(step_size: Schedule, mass: float):
    """SGD with (heavy-ball) momentum: ``v = mass * v + g; x -= step_size(i) * v``.

    State: ``(x, v)``, ``v`` starting at zero."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity

    def get_params(state):
        return state[0]

    return init, update, get_params


@optimizer
def nesterov(step_size: Schedule, mass: float):
    """SGD with Nesterov momentum: ``v = mass * v + g; x -= step_size(i) * (mass * v + g)``.

    State: ``(x, v)``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity

    def get_params(state):
        return state[0]

    return init, update, get_params


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (Duchi et al. 2011) with momentum.

    ``G += g**2``; ``m = (1 - momentum) * g / sqrt(G) + momentum * m`` (0 where ``G == 0``);
    ``x -= step_size(i) * m``. State: ``(x, G, m)``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        inv_sqrt = jnp.where(g_sq > 0, 1.0 / jnp.sqrt(g_sq), 0.0)
        m = (1.0 - momentum) * (g * inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m

    def get_params(state):
        return state[0]

    return init, update, get_params


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: ``a = gamma * a + (1 - gamma) * g**2; x -= step_size(i) * g / sqrt(a + eps)``.

    State: ``(x, a)``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps), avg_sq_grad

    def get_params(state):
        return state[0]

    return init, update, get_params


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum: ``m = momentum * m + step_size(i) * g / sqrt(a + eps); x -= m``.

    ``a`` as in :func:`rmsprop`. State: ``(x, a, m)``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom

    def get_params(state):
        return state[0]

    return init, update, get_params


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma & Ba 2015): ``x -= step_size(i) * mhat / (sqrt(vhat) + eps)``.

    Moment estimates ``m``, ``v`` with decays ``b1``, ``b2``, bias-corrected by
    ``1 - b**(i + 1)`` into ``mhat``, ``vhat``. State: ``(x, m, v)``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        mhat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        vhat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        return x - step_size(i) * mhat / (jnp.sqrt(vhat) + eps), m, v

    def get_params(state):
        return state[0]

    return init, update, get_params


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax, Adam with the infinity norm: ``u = max(b2 * u, |g|)`` in place of ``v``.

    ``m`` as in Adam; ``x -= step_size(i) / (1 - b1**(i + 1)) * m / (u + eps)``. State:
    ``(x, m, u)``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        corrected = step_size(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        return x - corrected * m / (u + eps), m, u

    def get_params(state):
        return state[0]

    return init, update, get_params


def _broadcast_along(ndim: int, v, axis: int):
    """The 1-d ``v`` as an ``ndim``-d array varying along ``axis`` only."""
    return v[tuple(slice(None) if d == axis else None for d in range(ndim))]


class _StaticShape(tuple):
    """A shape kept in an optimizer state as static pytree data (no leaves), so it stays a
    tuple of ints under ``jit``."""

    __slots__ = ()


tree_util.register_pytree_node(
    _StaticShape, lambda s: ((), tuple(s)), lambda aux, _: _StaticShape(aux)
)


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (Anil et al. 2019): a memory-efficient Adagrad with one accumulator per axis.

    ``accum = min over axes of the accumulators + g**2``; ``m`` and ``x`` as in
    :func:`adagrad` with ``accum`` for ``G``; each axis keeps the max of ``accum`` over the
    other axes. State: ``(x, m, [v_axis ...], x_shape)`` (``x`` at least 1-d).

    NB: ``x_shape`` is static pytree data here (in JAX its ints are leaves, which become
    tracers under ``jit``), so ``get_params`` of an SM3 state also works inside ``jit``."""
    step_size = make_schedule(step_size)

    def init(x0):
        x_shape = _StaticShape(jnp.shape(x0))
        x0 = jnp.atleast_1d(x0)
        vs = [jnp.zeros(n, dtype=x0.dtype) for n in x0.shape]
        return x0, jnp.zeros_like(x0), vs, x_shape

    def update(i, g, state):
        x, m, vs, x_shape = state
        g = jnp.reshape(g, x.shape)
        accum = functools.reduce(
            jnp.minimum, [_broadcast_along(x.ndim, v, ax) for ax, v in enumerate(vs)]
        )
        accum = accum + jnp.square(g)
        inv_sqrt = jnp.where(accum > 0, 1.0 / jnp.sqrt(accum), 0)
        m = (1.0 - momentum) * (g * inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        vs = [accum.max(tuple(a for a in range(x.ndim) if a != ax)) for ax in range(x.ndim)]
        return x, m, vs, x_shape

    def get_params(state):
        x, _, _, x_shape = state
        return x.reshape(x_shape)

    return init, update, get_params


# --------------------------------------------------------------------------- schedules


def constant(step_size) -> Schedule:
    """The schedule ``i -> step_size``."""

    def schedule(i):
        return step_size

    return schedule


def exponential_decay(step_size, decay_steps, decay_rate):
    """The schedule ``i -> step_size * decay_rate ** (i / decay_steps)``."""

    def schedule(i):
        return step_size * decay_rate ** (i / decay_steps)

    return schedule


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    """The schedule ``i -> step_size / (1 + decay_rate * i / decay_steps)``.

    With ``staircase``, ``floor(i / decay_steps)`` in place of ``i / decay_steps``."""
    if staircase:

        def schedule(i):
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    else:

        def schedule(i):
            return step_size / (1 + decay_rate * i / decay_steps)

    return schedule


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    """The schedule from ``step_size`` at 0 to ``final_step_size`` at ``decay_steps`` and after.

    At step ``i`` it has gone ``1 - (1 - min(i, decay_steps) / decay_steps) ** power`` of the
    way."""

    def schedule(step_num):
        step_num = jnp.minimum(step_num, decay_steps)
        step_mult = (1 - step_num / decay_steps) ** power
        return step_mult * (step_size - final_step_size) + final_step_size

    return schedule


def piecewise_constant(boundaries: Any, values: Any):
    """The schedule ``i -> values[k]``, ``k`` the number of ``boundaries`` below ``i``.

    ``len(values)`` must be ``len(boundaries) + 1``."""
    boundaries = jnp.array(boundaries)
    values = jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError(
            "optimizers.piecewise_constant: boundaries and values must be 1-d "
            f"sequences, got shapes {boundaries.shape} and {values.shape}"
        )
    if boundaries.shape[0] != values.shape[0] - 1:
        raise ValueError(
            "optimizers.piecewise_constant: boundaries must be one shorter than "
            f"values, got {boundaries.shape[0]} boundaries and "
            f"{values.shape[0]} values"
        )

    def schedule(i):
        return values[jnp.sum(i > boundaries)]

    return schedule


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    """A schedule from a schedule (returned as is) or a scalar (:func:`constant`)."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(
        f"optimizers.make_schedule: the step size must be a scalar or a callable "
        f"i -> scalar, got {type(scalar_or_schedule).__name__} of shape "
        f"{jnp.shape(scalar_or_schedule)}"
    )


# --------------------------------------------------------------------------- utilities


def l2_norm(tree):
    """The l2 norm of all the leaves of ``tree`` together: ``sqrt(sum of x . x)``."""
    leaves = tree_util.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree, max_norm):
    """``grad_tree`` scaled down to l2 norm ``max_norm`` if its norm is at least that.

    Below ``max_norm`` it is returned unchanged (as a new tree)."""
    norm = l2_norm(grad_tree)
    return tree_util.tree_map(
        lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree
    )


class JoinPoint:
    """A pytree leaf holding a subtree: the mark :func:`unpack_optimizer_state` puts at leaves.

    There, a parameter leaf's optimizer state joins the parameter tree."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        # Serializers that walk containers see the subtree inside.
        yield self.subtree

    def __repr__(self) -> str:
        return f"JoinPoint({self.subtree!r})"


def unpack_optimizer_state(opt_state):
    """An :class:`OptimizerState` as a parameter tree of :class:`JoinPoint` s (to serialize).

    Each JoinPoint holds that leaf's state pytree: plain containers throughout."""
    opt_state, states = _unpack("unpack_optimizer_state", opt_state)
    return tree_util.tree_unflatten(opt_state.tree_def, [JoinPoint(s) for s in states])


def pack_optimizer_state(marked_pytree):
    """The inverse of :func:`unpack_optimizer_state`: JoinPoint-leaved tree -> OptimizerState."""
    joins, tree_def = tree_util.tree_flatten(marked_pytree)
    bad = [type(j).__name__ for j in joins if not isinstance(j, JoinPoint)]
    if bad:
        raise TypeError(
            "optimizers.pack_optimizer_state: every leaf must be a JoinPoint (as "
            f"unpack_optimizer_state makes), got leaves of type {bad[:3]}"
        )
    states_flat, subtree_defs = _flatten_states([j.subtree for j in joins])
    return OptimizerState(states_flat, tree_def, subtree_defs)
