"""Transformations that wrap other transformations: optax's masking, partitioning,
hyperparameter injection, gradient accumulation, moving averages and NaN guards.

- :func:`masked` runs an inner transformation on the leaves a boolean mask selects and passes
  the others through; :func:`multi_transform` (optax's ``partition``) runs one transformation
  per label of a label tree.
- :func:`inject_hyperparams` turns an optimizer factory into one whose numeric arguments live
  in the state (``state.hyperparams['learning_rate']`` may be changed between steps) and whose
  callable arguments are schedules of the step count.
- :class:`MultiSteps` accumulates ``k`` mini-batch gradients and applies their mean once.
- :func:`ema` is an exponential moving average of the updates; :func:`apply_if_finite` skips
  steps whose updates hold a NaN or an infinity.

Every state is a NamedTuple of arrays (and inner states), and no wrapper branches in Python on
a traced value (selection is ``where``/``lax.cond``), so they all run under ``fg.jit``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol

import numpy as np

import fungrad.numpy as jnp
from fungrad import lax, tree_util
from fungrad.array import Array
from fungrad.optim import _numerics as nu
from fungrad.optim.base import (
    GradientTransformation,
    GradientTransformationExtraArgs,
    with_extra_args_support,
)

__all__ = [
    "ApplyIfFiniteState",
    "EmaState",
    "InjectHyperparamsState",
    "MaskedNode",
    "MaskedState",
    "MultiSteps",
    "MultiStepsState",
    "MultiTransformState",
    "PartitionState",
    "ShouldSkipUpdateFunction",
    "apply_if_finite",
    "ema",
    "inject_hyperparams",
    "masked",
    "multi_transform",
    "partition",
    "skip_large_updates",
    "skip_not_finite",
]


# -- masked ----------------------------------------------------------------------------------


class MaskedState(NamedTuple):
    """The state of :func:`masked`: the inner transformation's state (of the masked leaves)."""

    inner_state: Any


class MaskedNode(NamedTuple):
    """A placeholder for a leaf or subtree the mask leaves out (a node with no children).

    Tree maps of the inner transformation skip it, since it holds no leaves.
    """


def _mask_tree(fun_name: str, tree, mask_tree):
    """``tree`` with every leaf (or subtree) whose mask entry is false replaced by a
    :class:`MaskedNode`; ``mask_tree`` has ``tree``'s structure or a prefix of it."""
    try:
        return tree_util.tree_map(lambda m, x: x if m else MaskedNode(), mask_tree, tree)
    except ValueError as e:
        raise ValueError(
            f"{fun_name}: the mask's structure {tree_util.tree_structure(mask_tree)} is not a "
            f"prefix of the updates' structure {tree_util.tree_structure(tree)}; give a tree "
            f"of bools shaped like the parameters (or a prefix of it), or a callable returning "
            f"one ({e})"
        ) from None


def masked(
    inner: GradientTransformation,
    mask: Any,
    *,
    mask_compatible_extra_args: bool = False,
) -> GradientTransformationExtraArgs:
    """Apply ``inner`` to the leaves ``mask`` selects; pass the other updates through.

    Args:
        inner: the transformation to mask.
        mask: a tree of bools with the parameters' structure (or a prefix of it: a bool for a
            whole subtree), or a callable returning one from the parameters / updates. It must
            be static (Python bools), so the step can be jitted.
        mask_compatible_extra_args: also mask those keyword ``extra_args`` whose structure is
            the updates' structure.

    The inner state holds entries only for the selected leaves.

    Example:
        >>> decay = masked(add_decayed_weights(1e-4), lambda p: tree_map(lambda x: x.ndim > 1, p))
    """
    inner = with_extra_args_support(inner)

    def mask_for(tree):
        return mask(tree) if callable(mask) else mask

    def init(params):
        return MaskedState(inner.init(_mask_tree("masked.init", params, mask_for(params))))

    def update(updates, state, params=None, **extra_args):
        mask_tree = mask_for(updates)
        masked_updates = _mask_tree("masked.update", updates, mask_tree)
        masked_params = None if params is None else _mask_tree("masked.update", params, mask_tree)
        if mask_compatible_extra_args:
            structure = tree_util.tree_structure(updates)
            extra_args = {
                k: _mask_tree("masked.update", v, mask_tree)
                if tree_util.tree_structure(v) == structure
                else v
                for k, v in extra_args.items()
            }
        new_updates, inner_state = inner.update(
            masked_updates, state.inner_state, masked_params, **extra_args
        )
        out = tree_util.tree_map(
            lambda m, new, old: new if m else old, mask_tree, new_updates, updates
        )
        return out, MaskedState(inner_state)

    return GradientTransformationExtraArgs(init, update)


# -- multi_transform -------------------------------------------------------------------------


class MultiTransformState(NamedTuple):
    """The state of :func:`multi_transform`: ``{label: inner state}``."""

    inner_states: Mapping[Hashable, Any]


PartitionState = MultiTransformState


def multi_transform(
    transforms: Mapping[Hashable, GradientTransformation],
    param_labels: Any,
    *,
    mask_compatible_extra_args: bool = False,
) -> GradientTransformationExtraArgs:
    """Apply ``transforms[label]`` to the parameters labelled ``label``.

    Args:
        transforms: ``{label: transformation}``.
        param_labels: a tree of labels with the parameters' structure (or a prefix of it), or
            a callable returning one from the parameters / updates.
        mask_compatible_extra_args: passed on to :func:`masked`.

    Raises:
        ValueError: a label has no transformation.

    Example:
        >>> tx = multi_transform({"adam": adam(1e-3), "sgd": sgd(1e-2)},
        ...                      {"w": "adam", "b": "sgd"})
    """
    transforms = {k: with_extra_args_support(v) for k, v in transforms.items()}

    def labels_for(tree):
        return param_labels(tree) if callable(param_labels) else param_labels

    def masked_txs(labels):
        return {
            group: masked(
                tx,
                tree_util.tree_map(lambda label, g=group: label == g, labels),
                mask_compatible_extra_args=mask_compatible_extra_args,
            )
            for group, tx in transforms.items()
        }

    def init(params):
        labels = labels_for(params)
        missing = set(tree_util.tree_leaves(labels)) - set(transforms)
        if missing:
            raise ValueError(
                f"multi_transform: the labels {sorted(map(repr, missing))} have no "
                f"transformation; transforms has the keys {sorted(map(repr, transforms))}. "
                "Give a transformation for every label (set_to_zero() freezes parameters)."
            )
        return MultiTransformState(
            {group: tx.init(params) for group, tx in masked_txs(labels).items()}
        )

    def update(updates, state, params=None, **extra_args):
        new_states = {}
        for group, tx in masked_txs(labels_for(updates)).items():
            updates, new_states[group] = tx.update(
                updates, state.inner_states[group], params, **extra_args
            )
        return updates, MultiTransformState(new_states)

    return GradientTransformationExtraArgs(init, update)


partition = multi_transform


# -- inject_hyperparams ----------------------------------------------------------------------


class InjectHyperparamsState(NamedTuple):
    """The state of an :func:`inject_hyperparams` transformation.

    ``hyperparams`` holds the values the last step used (scheduled ones included); assigning a
    new value to a numeric, unscheduled entry changes it from the next step on.
    """

    count: Any
    hyperparams: dict
    inner_state: Any


def _float_dtype(tree):
    """The widest real floating dtype among ``tree``'s leaves (complex leaves count as their
    real part's dtype), or None when it has none."""
    dts = []
    for leaf in tree_util.tree_leaves(tree):
        dt = getattr(leaf, "dtype", None)
        if dt is None:
            continue
        dt = np.dtype(dt)
        if np.issubdtype(dt, np.complexfloating):
            dt = np.finfo(dt).dtype
        if np.issubdtype(dt, np.floating):
            dts.append(dt)
    return np.result_type(*dts) if dts else None


def _convert_floats(x, dtype):
    """``x`` as a ``dtype`` array if it is a float (a strongly typed Array stays as it is)."""
    if isinstance(x, Array) and not getattr(x, "weak_type", False):
        return x
    current = x.dtype if hasattr(x, "dtype") else type(x)
    if np.issubdtype(current, np.floating):
        return jnp.asarray(x, dtype=dtype)
    return x


def inject_hyperparams(
    inner_factory: Callable[..., GradientTransformation],
    static_args: str | Iterable[str] = (),
    hyperparam_dtype=None,
) -> Callable[..., GradientTransformationExtraArgs]:
    """Wrap an optimizer factory so its hyperparameters live in the state.

    ``inject_hyperparams(adam)(learning_rate=sched, b1=0.9)`` is Adam whose ``learning_rate``
    is the schedule ``sched`` evaluated at the step count and whose ``b1`` is an array in
    ``state.hyperparams`` (change it between steps by assigning to that dict). Numeric
    arguments (ints, floats, arrays) become state; callables become schedules unless named in
    ``static_args``; bools and everything else stay static. A numeric argument the factory
    branches on in Python or uses as a size (adafactor's ``min_dim_size_to_factor``) is a
    traced array under ``jit``: name it in ``static_args``.

    Args:
        inner_factory: a function returning a :class:`GradientTransformation`.
        static_args: names of callable arguments that are not schedules.
        hyperparam_dtype: the dtype of float hyperparameters; None: the widest float dtype of
            the parameters.

    Returns:
        A function with ``inner_factory``'s signature returning the wrapped transformation.

    Raises:
        ValueError: ``static_args`` names an argument ``inner_factory`` does not have.
    """
    static_args = {static_args} if isinstance(static_args, str) else set(static_args)
    signature = inspect.signature(inner_factory)
    unknown = static_args - set(signature.parameters)
    if unknown:
        raise ValueError(
            f"inject_hyperparams: static_args {sorted(unknown)} are not parameters of "
            f"{getattr(inner_factory, '__name__', inner_factory)!s}, whose parameters are "
            f"{list(signature.parameters)}"
        )

    def wrapped(*args, **kwargs) -> GradientTransformationExtraArgs:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        scheduled, numeric, static = {}, {}, {}
        for name, value in bound.arguments.items():
            if name in static_args or isinstance(value, bool):
                static[name] = value
            elif callable(value):
                scheduled[name] = value
            elif isinstance(value, (int, float, complex, np.ndarray, np.generic, Array)):
                numeric[name] = value
            else:
                static[name] = value

        def dtype_for(tree):
            return hyperparam_dtype if hyperparam_dtype is not None else _float_dtype(tree)

        def evaluate(hparams, count, dtype):
            hparams = {k: _convert_floats(v, dtype) for k, v in hparams.items()}
            hparams.update({k: _convert_floats(f(count), dtype) for k, f in scheduled.items()})
            return hparams

        def init(params):
            count = jnp.zeros((), jnp.int32)
            dtype = dtype_for(params)
            hparams = {k: jnp.asarray(_convert_floats(v, dtype)) for k, v in numeric.items()}
            hparams = evaluate(hparams, count, dtype)
            inner = inner_factory(**static, **hparams)
            return InjectHyperparamsState(count, hparams, inner.init(params))

        def update(updates, state, params=None, **extra_args):
            dtype = dtype_for(updates if params is None else params)
            hparams = evaluate(state.hyperparams, state.count, dtype)
            inner = with_extra_args_support(inner_factory(**static, **hparams))
            updates, inner_state = inner.update(updates, state.inner_state, params, **extra_args)
            return updates, InjectHyperparamsState(
                nu.safe_increment(state.count), hparams, inner_state
            )

        return GradientTransformationExtraArgs(init, update)

    wrapped.__name__ = getattr(inner_factory, "__name__", "inject_hyperparams")
    wrapped.__doc__ = getattr(inner_factory, "__doc__", None)
    return wrapped


# -- MultiSteps ------------------------------------------------------------------------------


class MultiStepsState(NamedTuple):
    """The state of :class:`MultiSteps`.

    Attributes:
        mini_step: mini-batches accumulated since the last applied step.
        gradient_step: applied (inner optimizer) steps so far.
        inner_opt_state: the wrapped optimizer's state.
        acc_grads: the running mean (or sum) of the accumulated gradients.
        skip_state: what ``should_skip_update_fn`` returned last (for monitoring).
    """

    mini_step: Any
    gradient_step: Any
    inner_opt_state: Any
    acc_grads: Any
    skip_state: Any = ()


class ShouldSkipUpdateFunction(Protocol):
    """``fn(updates, gradient_step, params) -> (skip, skip_state)``, ``skip`` a bool scalar."""

    def __call__(self, updates: Any, gradient_step: Any, params: Any) -> tuple[Any, Any]: ...


def skip_not_finite(updates, gradient_step, params):
    """For :class:`MultiSteps`: skip a mini-batch whose updates hold a NaN or an infinity.

    A ``should_skip_update_fn``; its ``skip_state`` counts the non-finite entries.
    """
    del gradient_step, params
    leaves = tree_util.tree_leaves(updates)
    bad = sum(jnp.sum(~jnp.isfinite(x)).astype(jnp.int32) for x in leaves)
    bad = jnp.asarray(bad, dtype=jnp.int32)
    return bad > 0, {"should_skip": bad > 0, "num_not_finite": bad}


def skip_large_updates(updates, gradient_step, params, max_squared_norm):
    """For :class:`MultiSteps`: skip a mini-batch whose squared norm is over a bound (or NaN).

    A ``should_skip_update_fn`` once ``max_squared_norm`` is bound (``functools.partial``).
    """
    del gradient_step, params
    norm_sq = sum(jnp.sum(nu.abs_sq(x)) for x in tree_util.tree_leaves(updates))
    norm_sq = jnp.asarray(norm_sq)
    skip = jnp.logical_or(jnp.isnan(norm_sq), norm_sq > max_squared_norm)
    return skip, {"should_skip": skip, "norm_squared": norm_sq}


def _never_skip(updates, gradient_step, params):
    del updates, gradient_step, params
    return jnp.asarray(False), ()


def _acc_dtype(leaf, accumulator_dtype):
    """The accumulator's dtype for ``leaf``: ``accumulator_dtype``, made complex for complex
    leaves (a real accumulator would drop their imaginary parts)."""
    if accumulator_dtype is None:
        return jnp.asarray(leaf).dtype
    if np.issubdtype(np.dtype(jnp.asarray(leaf).dtype), np.complexfloating):
        return np.promote_types(accumulator_dtype, np.complex64)
    return np.dtype(accumulator_dtype)


class MultiSteps:
    """Gradient accumulation: apply the wrapped optimizer once every ``k`` mini-batches.

    Each ``update`` adds its gradients to a running mean (``use_grad_mean``, the default) or
    sum. On every ``k``-th call the wrapped optimizer gets that mean and its updates are
    returned; the other calls return zeros and leave the inner state as it was, so adding the
    updates to the parameters every call is right.

    Args:
        opt: the wrapped optimizer.
        every_k_schedule: ``k`` (an int >= 1) or a function of the gradient step returning it
            (to grow the effective batch during training).
        use_grad_mean: average (True) or sum (False) the accumulated gradients.
        should_skip_update_fn: ``fn(updates, gradient_step, params) -> (skip, skip_state)``;
            a skipped mini-batch changes nothing but ``skip_state`` (see
            :func:`skip_not_finite`, :func:`skip_large_updates`).
        accumulator_dtype: the dtype of the accumulated gradients (complex leaves accumulate
            in its complex counterpart); None: each parameter's dtype.

    Example:
        >>> opt = MultiSteps(adam(1e-3), every_k_schedule=4)
        >>> state = opt.init(params)  # then opt.update(grads, state, params) per mini-batch
    """

    def __init__(
        self,
        opt: GradientTransformation,
        every_k_schedule: int | Callable[[Any], Any],
        use_grad_mean: bool = True,
        should_skip_update_fn: ShouldSkipUpdateFunction | None = None,
        accumulator_dtype=jnp.float32,
    ):
        self._opt = with_extra_args_support(opt)
        if isinstance(every_k_schedule, (int, np.integer)) and not isinstance(
            every_k_schedule, bool
        ):
            if every_k_schedule < 1:
                raise ValueError(
                    f"MultiSteps: every_k_schedule must be at least 1, got {every_k_schedule}"
                )
            k = int(every_k_schedule)
            self._every_k_schedule = lambda step: k
        elif callable(every_k_schedule):
            self._every_k_schedule = every_k_schedule
        else:
            raise TypeError(
                f"MultiSteps: every_k_schedule must be an int or a function of the gradient "
                f"step, got {type(every_k_schedule).__name__}"
            )
        self._use_grad_mean = use_grad_mean
        self._should_skip_update_fn = should_skip_update_fn or _never_skip
        self._accumulator_dtype = accumulator_dtype

    @property
    def inner_opt(self) -> GradientTransformationExtraArgs:
        """The wrapped optimizer."""
        return self._opt

    def init(self, params) -> MultiStepsState:
        """The initial state for ``params``."""
        step0 = jnp.zeros((), jnp.int32)
        acc = tree_util.tree_map(
            lambda p: jnp.zeros(jnp.shape(p), _acc_dtype(p, self._accumulator_dtype)), params
        )
        _, skip_state = self._should_skip_update_fn(nu.zeros_like(params), step0, params)
        return MultiStepsState(step0, step0, self._opt.init(params), acc, skip_state)

    def update(self, updates, state: MultiStepsState, params=None, **extra_args):
        """Accumulate ``updates``; every ``k``-th call apply the wrapped optimizer."""
        k = self._every_k_schedule(state.gradient_step)
        skip, skip_state = self._should_skip_update_fn(updates, state.gradient_step, params)
        skip = jnp.asarray(skip)
        if skip.dtype != np.bool_ or skip.shape != ():
            raise ValueError(
                "MultiSteps: should_skip_update_fn must return a bool scalar first, got an "
                f"array of dtype {skip.dtype} and shape {skip.shape}"
            )
        n = state.mini_step
        if self._use_grad_mean:  # a running mean (Welford), stable over many mini-batches
            acc = tree_util.tree_map(lambda g, a: a + (g - a) / (n + 1), updates, state.acc_grads)
        else:
            acc = tree_util.tree_map(lambda g, a: a + g, updates, state.acc_grads)
        acc_in = tree_util.tree_map(lambda a, g: a.astype(jnp.asarray(g).dtype), acc, updates)
        new_updates, inner_state = self._opt.update(
            acc_in, state.inner_opt_state, params, **extra_args
        )
        emit = n == k - 1

        def pick(when, a, b):
            b = jnp.asarray(b)
            return jnp.where(when, a, b).astype(b.dtype)

        stepped = MultiStepsState(
            mini_step=nu.safe_increment(n) % k,
            gradient_step=jnp.where(
                emit, nu.safe_increment(state.gradient_step), state.gradient_step
            ),
            inner_opt_state=tree_util.tree_map(
                lambda new, old: pick(emit, new, old), inner_state, state.inner_opt_state
            ),
            acc_grads=tree_util.tree_map(
                lambda a, old: pick(emit, 0, a).astype(jnp.asarray(old).dtype),
                acc,
                state.acc_grads,
            ),
            skip_state=skip_state,
        )
        new_updates = tree_util.tree_map(lambda u: pick(emit, u, jnp.zeros_like(u)), new_updates)
        # A skipped mini-batch: zero updates, the old state with the new skip_state.
        kept = state._replace(skip_state=skip_state)
        out_state = tree_util.tree_map(lambda new, old: pick(skip, old, new), stepped, kept)
        new_updates = tree_util.tree_map(lambda u: pick(skip, jnp.zeros_like(u), u), new_updates)
        return new_updates, out_state

    def has_updated(self, state: MultiStepsState):
        """True when the last ``update`` applied the wrapped optimizer (a bool scalar)."""
        return jnp.logical_and(state.mini_step == 0, state.gradient_step > 0)

    def gradient_transformation(self) -> GradientTransformationExtraArgs:
        """This wrapper as an ``(init, update)`` :class:`GradientTransformationExtraArgs`."""
        return GradientTransformationExtraArgs(self.init, self.update)


# -- ema -------------------------------------------------------------------------------------


class EmaState(NamedTuple):
    """The state of :func:`ema`: the step count and the moving average."""

    count: Any
    ema: Any


def ema(decay, debias: bool = True, accumulator_dtype=None) -> GradientTransformation:
    """An exponential moving average of the updates: ``e = decay * e + (1 - decay) * g``.

    The updates are ``e`` divided by ``1 - decay**t`` (``t`` the step count, from 1) when
    ``debias`` is set, else ``e`` itself. ``accumulator_dtype`` is the dtype of the stored
    average (None: each parameter's dtype).
    """

    def init(params):
        return EmaState(jnp.zeros((), jnp.int32), nu.zeros_like(params, dtype=accumulator_dtype))

    def update(updates, state, params=None):
        del params
        new_ema = nu.update_moment(updates, state.ema, decay, order=1)
        count = nu.safe_increment(state.count)
        out = nu.bias_correction(new_ema, decay, count) if debias else new_ema
        return out, EmaState(count, nu.cast(new_ema, accumulator_dtype))

    return GradientTransformation(init, update)


# -- apply_if_finite -------------------------------------------------------------------------


class ApplyIfFiniteState(NamedTuple):
    """The state of :func:`apply_if_finite`.

    Attributes:
        notfinite_count: consecutive steps with a non-finite update so far.
        last_finite: whether the last step's updates were all finite.
        total_notfinite: steps with a non-finite update in all.
        inner_state: the wrapped transformation's state.
    """

    notfinite_count: Any
    last_finite: Any
    total_notfinite: Any
    inner_state: Any


def apply_if_finite(
    inner: GradientTransformation, max_consecutive_errors: int
) -> GradientTransformationExtraArgs:
    """Skip steps whose updates are not all finite, up to ``max_consecutive_errors`` in a row.

    After more than ``max_consecutive_errors`` such steps in a row the step is applied anyway.
    A skipped step returns zero updates and keeps ``inner``'s state as it was.
    """
    inner = with_extra_args_support(inner)

    def init(params):
        zero = jnp.zeros((), jnp.int32)
        return ApplyIfFiniteState(zero, jnp.asarray(True), zero, inner.init(params))

    def update(updates, state, params=None, **extra_args):
        finite = jnp.asarray(True)
        for leaf in tree_util.tree_leaves(updates):
            finite = jnp.logical_and(finite, jnp.all(jnp.isfinite(leaf)))
        notfinite_count = jnp.where(
            finite, jnp.zeros((), jnp.int32), nu.safe_increment(state.notfinite_count)
        )

        def apply(_):
            return inner.update(updates, state.inner_state, params, **extra_args)

        def reject(_):
            return nu.zeros_like(updates), state.inner_state

        updates, inner_state = lax.cond(
            jnp.logical_or(finite, notfinite_count > max_consecutive_errors), apply, reject, None
        )
        total = jnp.where(finite, state.total_notfinite, nu.safe_increment(state.total_notfinite))
        return updates, ApplyIfFiniteState(notfinite_count, finite, total, inner_state)

    return GradientTransformationExtraArgs(init, update)
