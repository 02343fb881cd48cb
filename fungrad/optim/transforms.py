"""optax's gradient transformations: rescalings by moment estimates, traces, step sizes.

Each function returns a :class:`~fungrad.optim.base.GradientTransformation`; the optimizers of
:mod:`fungrad.optim.alias` are chains of them. Names, arguments, defaults, state layouts and
update rules are optax's, written from its documented formulas: with ``g`` the incoming update,
``t`` the step count after this step (1 on the first step), and moments starting at zero,

- ``scale_by_adam``: ``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) |g|^2``,
  ``u = m_hat / (sqrt(v_hat + eps_root) + eps)`` with ``m_hat = m / (1 - b1^t)``,
  ``v_hat = v / (1 - b2^t)`` (``nesterov``: ``m_hat = b1 m / (1 - b1^(t+1)) + (1-b1) g /
  (1 - b1^t)``);
- ``scale_by_rms``: ``v = decay v + (1-decay) |g|^2``, ``u = g / sqrt(v + eps)``;
- ``trace``: ``t = g + decay t``, ``u = t`` (``nesterov``: ``u = g + decay t``).

States are NamedTuples of arrays with step counts as int32 scalars, so an optimizer step runs
under ``fg.jit``, ``fg.vmap`` and ``fg.grad``. Learning rates may be floats, scalar arrays, or
schedules (callables of the int32 step count).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import fungrad.numpy as jnp
from fungrad import tree_util
from fungrad.optim import _numerics as nu
from fungrad.optim.base import EmptyState, GradientTransformation, identity

__all__ = [
    "ScaleByAdaDeltaState",
    "ScaleByAdamState",
    "ScaleByAmsgradState",
    "ScaleByBeliefState",
    "ScaleByLionState",
    "ScaleByNovogradState",
    "ScaleByRStdDevState",
    "ScaleByRStdDevWithCountState",
    "ScaleByRmsState",
    "ScaleByRmsWithCountState",
    "ScaleByRssState",
    "ScaleByScheduleState",
    "ScaleState",
    "centralize",
    "TraceState",
    "scale",
    "scale_by_adadelta",
    "scale_by_adam",
    "scale_by_adamax",
    "scale_by_amsgrad",
    "scale_by_belief",
    "scale_by_learning_rate",
    "scale_by_lion",
    "scale_by_novograd",
    "scale_by_param_block_norm",
    "scale_by_param_block_rms",
    "scale_by_radam",
    "scale_by_rms",
    "scale_by_rss",
    "scale_by_schedule",
    "scale_by_sign",
    "scale_by_stddev",
    "scale_by_trust_ratio",
    "scale_by_yogi",
    "trace",
]

ScaleState = EmptyState


def _count0():
    return jnp.zeros((), dtype=jnp.int32)


def _empty_init(params):
    del params
    return EmptyState()


def _map(f, *trees):
    """``tree_map`` that leaves None updates as None."""
    return tree_util.tree_map(
        lambda g, *r: None if g is None else f(g, *r), *trees, is_leaf=nu.is_none
    )


# --- step sizes ------------------------------------------------------------------------------


class ScaleByScheduleState(NamedTuple):
    """The step count fed to a schedule."""

    count: Any


def scale(step_size) -> GradientTransformation:
    """Multiply every update by the constant ``step_size``."""

    def update(updates, state, params=None):
        del params
        return _map(lambda g: step_size * g, updates), state

    return GradientTransformation(_empty_init, update)


def scale_by_schedule(step_size_fn: Callable) -> GradientTransformation:
    """Multiply the updates by ``step_size_fn(count)``, ``count`` the steps taken so far."""
    if not callable(step_size_fn):
        raise TypeError(
            f"scale_by_schedule: step_size_fn must be a callable of the step count, got "
            f"{type(step_size_fn).__name__}; use scale(step_size) for a constant."
        )

    def init(params):
        del params
        return ScaleByScheduleState(count=_count0())

    def update(updates, state, params=None):
        del params
        step_size = step_size_fn(state.count)
        updates = _map(lambda g: jnp.asarray(step_size).astype(g.dtype) * g, updates)
        return updates, ScaleByScheduleState(count=nu.safe_increment(state.count))

    return GradientTransformation(init, update)


def scale_by_learning_rate(learning_rate=None, *, flip_sign: bool = True) -> GradientTransformation:
    """Scale by ``-learning_rate`` (``+learning_rate`` with ``flip_sign=False``); a callable
    learning rate is a schedule of the step count. ``None`` gives :func:`identity`."""
    if learning_rate is None:
        return identity()
    m = -1 if flip_sign else 1
    if callable(learning_rate):
        return scale_by_schedule(lambda count: m * learning_rate(count))
    return scale(m * learning_rate)


# --- first- and second-moment rescalings ----------------------------------------------------


class ScaleByAdamState(NamedTuple):
    """Step count and the first (``mu``) and second (``nu``) moment estimates."""

    count: Any
    mu: Any
    nu: Any


def _adam_mu_hat(updates, mu, b1, count_inc, nesterov):
    if nesterov:
        return tree_util.tree_map(
            lambda m, g: b1 * m + (1 - b1) * g,
            nu.bias_correction(mu, b1, nu.safe_increment(count_inc)),
            nu.bias_correction(updates, b1, count_inc),
        )
    return nu.bias_correction(mu, b1, count_inc)


def scale_by_adam(
    b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None, *, nesterov: bool = False
) -> GradientTransformation:
    """Rescale by Adam's bias-corrected moments (Kingma & Ba 2014); ``nesterov=True`` is
    NAdam (Dozat 2016). ``mu_dtype`` is the first moment's storage dtype."""

    def init(params):
        return ScaleByAdamState(
            count=_count0(), mu=nu.zeros_like(params, mu_dtype), nu=nu.zeros_like(params)
        )

    def update(updates, state, params=None):
        del params
        mu = nu.update_moment(updates, state.mu, b1, 1)
        nu_ = nu.update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count_inc = nu.safe_increment(state.count)
        mu_hat = _adam_mu_hat(updates, mu, b1, count_inc, nesterov)
        nu_hat = nu.bias_correction(nu_, b2, count_inc)
        updates = tree_util.tree_map(
            lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_hat
        )
        return updates, ScaleByAdamState(count=count_inc, mu=nu.cast(mu, mu_dtype), nu=nu_)

    return GradientTransformation(init, update)


class ScaleByAmsgradState(NamedTuple):
    """Adam's state plus the running maximum ``nu_max`` of the corrected second moment."""

    count: Any
    mu: Any
    nu: Any
    nu_max: Any


def scale_by_amsgrad(
    b1=0.9,
    b2=0.999,
    eps=1e-8,
    eps_root=0.0,
    mu_dtype=None,
    bias_correction_mu: bool = True,
    bias_correction_nu: bool = True,
) -> GradientTransformation:
    """AMSGrad (Reddi et al. 2018): Adam dividing by the running maximum of ``v_hat``
    (each moment's bias correction can be turned off)."""

    def init(params):
        return ScaleByAmsgradState(
            count=_count0(),
            mu=nu.zeros_like(params, mu_dtype),
            nu=nu.zeros_like(params),
            nu_max=nu.zeros_like(params),
        )

    def update(updates, state, params=None):
        del params
        mu = nu.update_moment(updates, state.mu, b1, 1)
        nu_ = nu.update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count_inc = nu.safe_increment(state.count)
        mu_hat = nu.bias_correction(mu, b1, count_inc) if bias_correction_mu else mu
        nu_hat = nu.bias_correction(nu_, b2, count_inc) if bias_correction_nu else nu_
        nu_max = tree_util.tree_map(jnp.maximum, state.nu_max, nu_hat)
        updates = tree_util.tree_map(
            lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_max
        )
        new = ScaleByAmsgradState(count=count_inc, mu=nu.cast(mu, mu_dtype), nu=nu_, nu_max=nu_max)
        return updates, new

    return GradientTransformation(init, update)


def scale_by_adamax(b1=0.9, b2=0.999, eps=1e-8) -> GradientTransformation:
    """AdaMax: ``v = max(|g| + eps, b2 v)``, ``u = m_hat / v`` (the state is Adam's)."""

    def init(params):
        return ScaleByAdamState(count=_count0(), mu=nu.zeros_like(params), nu=nu.zeros_like(params))

    def update(updates, state, params=None):
        del params
        count_inc = nu.safe_increment(state.count)
        mu = nu.update_moment(updates, state.mu, b1, 1)
        nu_ = tree_util.tree_map(
            lambda g, v: jnp.maximum(jnp.abs(g) + eps, b2 * v), updates, state.nu
        )
        mu_hat = nu.bias_correction(mu, b1, count_inc)
        updates = tree_util.tree_map(lambda m, v: m / v, mu_hat, nu_)
        return updates, ScaleByAdamState(count=count_inc, mu=mu, nu=nu_)

    return GradientTransformation(init, update)


def scale_by_radam(
    b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, threshold=5.0, *, nesterov: bool = False
) -> GradientTransformation:
    """Rectified Adam (Liu et al. 2020): Adam's step times the variance rectification ``r``
    once the approximated SMA length ``rho_t`` reaches ``threshold``, else ``m_hat`` alone."""
    ro_inf = 2.0 / (1.0 - b2) - 1.0

    def init(params):
        return ScaleByAdamState(count=_count0(), mu=nu.zeros_like(params), nu=nu.zeros_like(params))

    def update(updates, state, params=None):
        del params
        mu = nu.update_moment(updates, state.mu, b1, 1)
        nu_ = nu.update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count_inc = nu.safe_increment(state.count)
        b2t = jnp.asarray(b2) ** count_inc
        ro = ro_inf - 2 * count_inc * b2t / (1 - b2t)
        mu_hat = _adam_mu_hat(updates, mu, b1, count_inc, nesterov)
        nu_hat = nu.bias_correction(nu_, b2, count_inc)
        # Where ro < threshold the rectification is undefined; clamp its argument there (the
        # value is discarded by the select) so no NaN reaches a gradient.
        ok = ro >= threshold
        ro_safe = jnp.where(ok, ro, ro_inf)
        r = jnp.sqrt(
            (ro_safe - 4) * (ro_safe - 2) * ro_inf / ((ro_inf - 4) * (ro_inf - 2) * ro_safe)
        )

        def rect(m, v):
            step = r.astype(m.dtype) * m / (jnp.sqrt(v + eps_root) + eps)
            return jnp.where(ok, step, m)

        updates = tree_util.tree_map(rect, mu_hat, nu_hat)
        return updates, ScaleByAdamState(count=count_inc, mu=mu, nu=nu_)

    return GradientTransformation(init, update)


class ScaleByRmsState(NamedTuple):
    """The running mean ``nu`` of squared gradients."""

    nu: Any


class ScaleByRmsWithCountState(NamedTuple):
    """``ScaleByRmsState`` plus the step count (``bias_correction=True``)."""

    count: Any
    nu: Any


def _rms_scaling(nu_hat, eps, eps_in_sqrt):
    if eps_in_sqrt:
        return tree_util.tree_map(lambda n: nu.rsqrt(n + eps), nu_hat)
    return tree_util.tree_map(lambda n: 1 / (jnp.sqrt(n) + eps), nu_hat)


def scale_by_rms(
    decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt: bool = True, bias_correction: bool = False
) -> GradientTransformation:
    """RMSProp's rescaling: divide by the root of a running mean of squared gradients."""

    def init(params):
        v = nu.full_like(params, initial_scale)
        if bias_correction:
            return ScaleByRmsWithCountState(count=_count0(), nu=v)
        return ScaleByRmsState(nu=v)

    def update(updates, state, params=None):
        del params
        v = nu.update_moment_per_elem_norm(updates, state.nu, decay, 2)
        if bias_correction:
            count_inc = nu.safe_increment(state.count)
            v_hat = nu.bias_correction(v, decay, count_inc)
        else:
            v_hat = v
        scaling = _rms_scaling(v_hat, eps, eps_in_sqrt)
        updates = tree_util.tree_map(lambda s, g: s * g, scaling, updates)
        if bias_correction:
            return updates, ScaleByRmsWithCountState(count=count_inc, nu=v)
        return updates, ScaleByRmsState(nu=v)

    return GradientTransformation(init, update)


class ScaleByRStdDevState(NamedTuple):
    """Running means of gradients (``mu``) and of squared gradients (``nu``)."""

    mu: Any
    nu: Any


class ScaleByRStdDevWithCountState(NamedTuple):
    """``ScaleByRStdDevState`` plus the step count (``bias_correction=True``)."""

    count: Any
    mu: Any
    nu: Any


def scale_by_stddev(
    decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt: bool = True, bias_correction: bool = False
) -> GradientTransformation:
    """Centred RMSProp's rescaling: divide by the running standard deviation
    ``sqrt(nu - mu^2)`` of the gradients."""

    def init(params):
        mu = nu.zeros_like(params)
        v = nu.full_like(params, initial_scale)
        if bias_correction:
            return ScaleByRStdDevWithCountState(count=_count0(), mu=mu, nu=v)
        return ScaleByRStdDevState(mu=mu, nu=v)

    def update(updates, state, params=None):
        del params
        mu = nu.update_moment(updates, state.mu, decay, 1)
        v = nu.update_moment_per_elem_norm(updates, state.nu, decay, 2)
        if bias_correction:
            count_inc = nu.safe_increment(state.count)
            mu_hat = nu.bias_correction(mu, decay, count_inc)
            v_hat = nu.bias_correction(v, decay, count_inc)
        else:
            mu_hat, v_hat = mu, v
        var = tree_util.tree_map(lambda m, n: n - nu.abs_sq(m), mu_hat, v_hat)
        scaling = _rms_scaling(var, eps, eps_in_sqrt)
        updates = tree_util.tree_map(lambda s, g: s * g, scaling, updates)
        if bias_correction:
            return updates, ScaleByRStdDevWithCountState(count=count_inc, mu=mu, nu=v)
        return updates, ScaleByRStdDevState(mu=mu, nu=v)

    return GradientTransformation(init, update)


class ScaleByRssState(NamedTuple):
    """The running sum of squared gradients (AdaGrad's accumulator)."""

    sum_of_squares: Any


def scale_by_rss(initial_accumulator_value=0.1, eps=1e-7) -> GradientTransformation:
    """AdaGrad's rescaling: ``s += g^2``, ``u = g / sqrt(s + eps)`` (0 where ``s`` is 0)."""

    def init(params):
        return ScaleByRssState(sum_of_squares=nu.full_like(params, initial_accumulator_value))

    def update(updates, state, params=None):
        del params
        s = tree_util.tree_map(lambda g, t: nu.abs_sq(g) + t, updates, state.sum_of_squares)

        def f(g, t):
            inv = jnp.where(t > 0, nu.rsqrt(jnp.where(t > 0, t, 1) + eps), 0.0)
            return inv.astype(g.dtype) * g

        return tree_util.tree_map(f, updates, s), ScaleByRssState(sum_of_squares=s)

    return GradientTransformation(init, update)


class ScaleByAdaDeltaState(NamedTuple):
    """Running means of squared gradients (``e_g``) and of squared updates (``e_x``)."""

    e_g: Any
    e_x: Any


def scale_by_adadelta(rho=0.9, eps=1e-6) -> GradientTransformation:
    """AdaDelta (Zeiler 2012): ``u = sqrt(e_x + eps) / sqrt(e_g + eps) * g`` with ``e_g``
    updated before and ``e_x`` after the step."""

    def init(params):
        return ScaleByAdaDeltaState(e_g=nu.zeros_like(params), e_x=nu.zeros_like(params))

    def update(updates, state, params=None):
        del params
        e_g = nu.update_moment(updates, state.e_g, rho, 2)
        updates = tree_util.tree_map(
            lambda g, eg, ex: jnp.sqrt(ex + eps) / jnp.sqrt(eg + eps) * g,
            updates,
            e_g,
            state.e_x,
        )
        e_x = nu.update_moment(updates, state.e_x, rho, 2)
        return updates, ScaleByAdaDeltaState(e_g=e_g, e_x=e_x)

    return GradientTransformation(init, update)


class ScaleByBeliefState(NamedTuple):
    """First moment ``mu`` and the second moment ``nu`` of the surprise ``g - mu``."""

    count: Any
    mu: Any
    nu: Any


def scale_by_belief(
    b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16, *, nesterov: bool = False
) -> GradientTransformation:
    """AdaBelief (Zhuang et al. 2020): Adam with ``s = b2 s + (1-b2) (g - m)^2 + eps_root``
    in place of the second moment."""

    def init(params):
        return ScaleByBeliefState(
            count=_count0(), mu=nu.zeros_like(params), nu=nu.zeros_like(params)
        )

    def update(updates, state, params=None):
        del params
        mu = nu.update_moment(updates, state.mu, b1, 1)
        pred = tree_util.tree_map(lambda g, m: g - m, updates, mu)
        s = nu.update_moment_per_elem_norm(pred, state.nu, b2, 2)
        s = tree_util.tree_map(lambda v: v + eps_root, s)
        count_inc = nu.safe_increment(state.count)
        mu_hat = _adam_mu_hat(updates, mu, b1, count_inc, nesterov)
        s_hat = nu.bias_correction(s, b2, count_inc)
        updates = tree_util.tree_map(lambda m, v: m / (jnp.sqrt(v) + eps), mu_hat, s_hat)
        return updates, ScaleByBeliefState(count=count_inc, mu=mu, nu=s)

    return GradientTransformation(init, update)


def scale_by_yogi(
    b1=0.9, b2=0.999, eps=1e-3, eps_root=0.0, initial_accumulator_value=1e-6
) -> GradientTransformation:
    """Yogi (Zaheer et al. 2018): Adam with the additive second moment
    ``v = v - (1-b2) sign(v - g^2) g^2``; both moments start at ``initial_accumulator_value``."""

    def init(params):
        return ScaleByAdamState(
            count=_count0(),
            mu=nu.full_like(params, initial_accumulator_value),
            nu=nu.full_like(params, initial_accumulator_value),
        )

    def update(updates, state, params=None):
        del params
        mu = nu.update_moment(updates, state.mu, b1, 1)

        def second(g, v):
            g2 = nu.abs_sq(g)
            return v - (1 - b2) * jnp.sign(v - g2) * g2

        v = tree_util.tree_map(second, updates, state.nu)
        count_inc = nu.safe_increment(state.count)
        mu_hat = nu.bias_correction(mu, b1, count_inc)
        v_hat = nu.bias_correction(v, b2, count_inc)
        updates = tree_util.tree_map(lambda m, n: m / (jnp.sqrt(n + eps_root) + eps), mu_hat, v_hat)
        return updates, ScaleByAdamState(count=count_inc, mu=mu, nu=v)

    return GradientTransformation(init, update)


class ScaleByLionState(NamedTuple):
    """Step count and Lion's momentum ``mu``."""

    count: Any
    mu: Any


def scale_by_lion(
    b1=0.9, b2=0.99, mu_dtype=None, *, mode: str = "hard", smooth_beta=1.0
) -> GradientTransformation:
    """Lion (Chen et al. 2023): ``u = sign((1-b1) g + b1 m)``, then ``m = b2 m + (1-b2) g``.

    ``mode="smooth"`` uses ``tanh(smooth_beta x)`` and ``mode="refined"`` keeps ``x`` where
    ``|x| < 1`` in place of ``sign(x)``.
    """
    if mode == "hard":
        squash = jnp.sign
    elif mode == "smooth":
        squash = lambda x: jnp.tanh(smooth_beta * x)  # noqa: E731
    elif mode == "refined":
        squash = lambda x: jnp.where(jnp.abs(x) < 1.0, x, jnp.sign(x))  # noqa: E731
    else:
        raise ValueError(
            f"scale_by_lion: unknown mode {mode!r}; use 'hard', 'smooth' or 'refined'."
        )

    def init(params):
        return ScaleByLionState(count=_count0(), mu=nu.zeros_like(params, mu_dtype))

    def update(updates, state, params=None):
        del params
        new = tree_util.tree_map(lambda g, m: squash((1 - b1) * g + b1 * m), updates, state.mu)
        mu = nu.update_moment(updates, state.mu, b2, 1)
        state = ScaleByLionState(count=nu.safe_increment(state.count), mu=nu.cast(mu, mu_dtype))
        return new, state

    return GradientTransformation(init, update)


class ScaleByNovogradState(NamedTuple):
    """Step count, the momentum ``mu`` and the per-layer second moment ``nu`` (a scalar per
    leaf)."""

    count: Any
    mu: Any
    nu: Any


def scale_by_novograd(
    b1=0.9, b2=0.25, eps=1e-8, eps_root=0.0, weight_decay=0.0, mu_dtype=None
) -> GradientTransformation:
    """NovoGrad (Ginsburg et al. 2019): a layerwise second moment ``v = b2 v + (1-b2) ||g||^2``
    (``v = ||g||^2`` on the first step), ``m = b1 m + g / (sqrt(v + eps_root) + eps) + wd p``,
    update ``m``. Needs params."""

    def init(params):
        return ScaleByNovogradState(
            count=_count0(),
            mu=nu.zeros_like(params, mu_dtype),
            nu=tree_util.tree_map(lambda p: jnp.zeros((), dtype=jnp.asarray(p).dtype), params),
        )

    def update(updates, state, params=None):
        _need_params("scale_by_novograd", params)
        count_inc = nu.safe_increment(state.count)
        first = count_inc == 1

        def second(g, v):
            sq = jnp.sum(nu.abs_sq(g)).astype(v.dtype)
            return jnp.where(first, sq, b2 * v + (1 - b2) * sq)

        v = tree_util.tree_map(second, updates, state.nu)
        mu = tree_util.tree_map(
            lambda g, p, m, n: b1 * m + g / (jnp.sqrt(n + eps_root) + eps) + weight_decay * p,
            updates,
            params,
            state.mu,
            v,
        )
        mu = nu.cast(mu, mu_dtype)
        return mu, ScaleByNovogradState(count=count_inc, mu=mu, nu=v)

    return GradientTransformation(init, update)


def centralize() -> GradientTransformation:
    """Gradient centralization (Yong et al. 2020): subtract from each leaf of rank > 1 its
    mean over all axes but the first."""

    def f(g):
        if jnp.ndim(g) > 1:
            return g - jnp.mean(g, axis=tuple(range(1, jnp.ndim(g))), keepdims=True)
        return g

    def update(updates, state, params=None):
        del params
        return _map(f, updates), state

    return GradientTransformation(_empty_init, update)


def scale_by_sign() -> GradientTransformation:
    """Replace every update by its sign (signSGD)."""

    def update(updates, state, params=None):
        del params
        return _map(jnp.sign, updates), state

    return GradientTransformation(_empty_init, update)


# --- parameter-dependent rescalings ----------------------------------------------------------


def _need_params(fun_name, params):
    if params is None:
        raise ValueError(f"{fun_name}: {nu.NO_PARAMS_MSG}")


def scale_by_trust_ratio(min_norm=0.0, trust_coefficient=1.0, eps=0.0) -> GradientTransformation:
    """LARS/LAMB's layerwise trust ratio: each update times
    ``trust_coefficient * ||p|| / (||u|| + eps)`` (1 where either norm is 0); needs params."""

    def update(updates, state, params=None):
        _need_params("scale_by_trust_ratio", params)

        def f(u, p):
            p_norm = nu.safe_norm(p, min_norm)
            u_norm = nu.safe_norm(u, min_norm)
            ratio = trust_coefficient * p_norm / (u_norm + eps)
            zero = jnp.logical_or(p_norm == 0.0, u_norm == 0.0)
            ratio = jnp.where(zero, jnp.asarray(1.0, dtype=p.dtype), ratio)
            return u * ratio

        return tree_util.tree_map(f, updates, params), state

    return GradientTransformation(_empty_init, update)


def scale_by_param_block_norm(min_scale=1e-3) -> GradientTransformation:
    """Multiply each update by ``max(||p||_2, min_scale)`` of its parameter block."""

    def update(updates, state, params=None):
        _need_params("scale_by_param_block_norm", params)
        out = tree_util.tree_map(lambda u, p: u * nu.safe_norm(p, min_scale), updates, params)
        return out, state

    return GradientTransformation(_empty_init, update)


def scale_by_param_block_rms(min_scale=1e-3) -> GradientTransformation:
    """Multiply each update by ``max(rms(p), min_scale)`` of its parameter block
    (Adafactor's relative step size)."""

    def update(updates, state, params=None):
        _need_params("scale_by_param_block_rms", params)
        out = tree_util.tree_map(lambda u, p: u * nu.safe_rms(p, min_scale), updates, params)
        return out, state

    return GradientTransformation(_empty_init, update)


# --- momentum --------------------------------------------------------------------------------


class TraceState(NamedTuple):
    """The momentum accumulator."""

    trace: Any


def trace(decay, nesterov: bool = False, accumulator_dtype=None) -> GradientTransformation:
    """Momentum: ``t = g + decay t``; the update is ``t`` (``g + decay t`` with Nesterov)."""

    def init(params):
        return TraceState(trace=nu.zeros_like(params, accumulator_dtype))

    def update(updates, state, params=None):
        del params
        f = lambda g, t: g + decay * t  # noqa: E731
        new_trace = _map(f, updates, state.trace)
        updates = _map(f, updates, new_trace) if nesterov else new_trace
        return updates, TraceState(trace=nu.cast(new_trace, accumulator_dtype))

    return GradientTransformation(init, update)
