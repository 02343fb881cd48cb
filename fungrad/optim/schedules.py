"""Step-size schedules: functions of the step count, optax's names, signatures and numbers.

A schedule is a function ``schedule(count) -> value``. ``count`` is a Python int or an int32
array (the step counter an optimizer keeps in its state, traced under ``fg.jit``); every
schedule here is written with ``fungrad.numpy`` selects (``where``, ``clip``, ``minimum``) and no
Python branch on the count, so the same schedule runs eagerly and inside a compiled step.

    sched = optim.warmup_cosine_decay_schedule(0.0, 1e-3, warmup_steps=100, decay_steps=1000)
    opt = optim.adam(learning_rate=sched)

Degenerate arguments behave as optax's: a polynomial or exponential schedule with
``transition_steps <= 0`` (or ``decay_rate == 0``) is the constant ``init_value`` and a negative
``transition_begin`` counts as 0; ``cosine_decay_schedule`` with ``decay_steps <= 0`` and the
one-cycle schedules with ``transition_steps <= 0`` are ValueErrors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import fungrad.numpy as jnp

__all__ = [
    "constant_schedule",
    "cosine_decay_schedule",
    "cosine_onecycle_schedule",
    "exponential_decay",
    "join_schedules",
    "linear_onecycle_schedule",
    "linear_schedule",
    "piecewise_constant_schedule",
    "piecewise_interpolate_schedule",
    "polynomial_schedule",
    "sgdr_schedule",
    "warmup_constant_schedule",
    "warmup_cosine_decay_schedule",
    "warmup_exponential_decay_schedule",
]

Schedule = Callable[[Any], Any]


def constant_schedule(value) -> Schedule:
    """The schedule that returns ``value`` at every step."""
    return lambda count: value


def polynomial_schedule(
    init_value, end_value, power, transition_steps: int, transition_begin: int = 0
) -> Schedule:
    """From ``init_value`` to ``end_value`` along a polynomial of degree ``power``.

    With ``I, E, P, B, T`` the initial value, end value, power, ``transition_begin`` and
    ``transition_steps``: ``I`` for ``t < B``, ``(I - E) * (1 - (t - B) / T) ** P + E`` for
    ``B <= t < B + T`` and ``E`` after. ``T <= 0`` gives the constant ``I``.

    Example:
        >>> s = polynomial_schedule(1.0, 0.01, power=2, transition_steps=100)
        >>> float(s(0)), float(s(100))
        (1.0, 0.01)
    """
    if transition_steps <= 0:
        return constant_schedule(init_value)
    transition_begin = max(transition_begin, 0)

    def schedule(count):
        count = jnp.clip(count - transition_begin, 0, transition_steps)
        frac = 1 - count / transition_steps
        return (init_value - end_value) * (frac**power) + end_value

    return schedule


def linear_schedule(
    init_value, end_value, transition_steps: int, transition_begin: int = 0
) -> Schedule:
    """A straight line from ``init_value`` to ``end_value`` (a polynomial of power 1).

    The value moves over ``transition_steps`` steps starting at ``transition_begin``
    (:func:`polynomial_schedule` with ``power=1``).
    """
    return polynomial_schedule(init_value, end_value, 1, transition_steps, transition_begin)


def _check_scales(name: str, scales: Iterable) -> None:
    bad = [s for s in scales if not s >= 0]
    if bad:
        raise ValueError(
            f"{name}: every scale factor in boundaries_and_scales must be non-negative, got {bad!r}"
        )


def piecewise_constant_schedule(init_value, boundaries_and_scales: Mapping | None = None):
    """``init_value`` times the product of every ``scale`` whose ``boundary <= count``.

    Args:
        init_value: the value before the first boundary.
        boundaries_and_scales: ``{step: scale}``; from ``step`` on the value is multiplied by
            ``scale`` (non-negative).

    Example:
        >>> s = piecewise_constant_schedule(1.0, {100: 0.1, 200: 0.01})
        >>> [round(float(s(t)), 6) for t in (50, 150, 250)]
        [1.0, 0.1, 0.001]
    """
    items = sorted(boundaries_and_scales.items()) if boundaries_and_scales else []
    _check_scales("piecewise_constant_schedule", [s for _, s in items])

    def schedule(count):
        v = init_value
        for boundary, scale in items:
            v = jnp.where(count < boundary, v, v * scale)
        return v

    return schedule


def exponential_decay(
    init_value,
    transition_steps: int,
    decay_rate: float,
    transition_begin: int = 0,
    staircase: bool = False,
    end_value=None,
) -> Schedule:
    """``init_value * decay_rate ** ((count - transition_begin) / transition_steps)``.

    Before ``transition_begin`` the value is ``init_value``. ``staircase`` floors the exponent
    (the value drops every ``transition_steps`` steps). ``end_value`` bounds the value: from
    below when ``decay_rate < 1``, from above otherwise. ``transition_steps <= 0`` or
    ``decay_rate == 0`` give the constant ``init_value``.
    """
    if transition_steps <= 0 or decay_rate == 0:
        return constant_schedule(init_value)
    transition_begin = max(transition_begin, 0)
    bound = jnp.maximum if decay_rate < 1.0 else jnp.minimum

    def schedule(count):
        steps = count - transition_begin
        p = steps / transition_steps
        if staircase:
            p = jnp.floor(p)
        value = jnp.where(steps <= 0, init_value, init_value * jnp.power(decay_rate, p))
        if end_value is not None:
            value = bound(value, end_value)
        return value

    return schedule


def cosine_decay_schedule(init_value, decay_steps: int, alpha=0.0, exponent=1.0) -> Schedule:
    """Cosine decay from ``init_value`` to ``alpha * init_value`` over ``decay_steps``.

    ``init_value * ((1 - alpha) * (0.5 * (1 + cos(pi * t / T))) ** exponent + alpha)`` with
    ``t = min(count, decay_steps)``.

    Raises:
        ValueError: ``decay_steps`` is not positive.
    """
    if not decay_steps > 0:
        raise ValueError(
            f"cosine_decay_schedule: decay_steps must be positive, got {decay_steps!r}"
        )
    # A Python int count or decay_steps becomes a float: an int32 product could overflow.
    steps = float(decay_steps) if isinstance(decay_steps, int) else decay_steps

    def schedule(count):
        if isinstance(count, int):
            count = float(count)
        count = jnp.minimum(count, steps)
        cosine = 0.5 * (1 + jnp.cos(math.pi * count / steps))
        return init_value * ((1 - alpha) * cosine**exponent + alpha)

    return schedule


def _linear_interpolate(start, end, pct):
    return (end - start) * pct + start


def _cosine_interpolate(start, end, pct):
    return end + (start - end) / 2.0 * (jnp.cos(math.pi * pct) + 1)


def piecewise_interpolate_schedule(
    interpolate_type: str, init_value, boundaries_and_scales: Mapping | None = None
) -> Schedule:
    """Interpolation (``'linear'`` or ``'cosine'``) between accumulated scaled values.

    The value at boundary ``b_i`` is ``init_value`` times the product of the scales of every
    boundary up to ``b_i``; between boundaries the schedule interpolates between those values,
    and after the last one it holds the last value.
    """
    if interpolate_type == "linear":
        interpolate = _linear_interpolate
    elif interpolate_type == "cosine":
        interpolate = _cosine_interpolate
    else:
        raise ValueError(
            f"piecewise_interpolate_schedule: interpolate_type must be 'linear' or 'cosine', "
            f"got {interpolate_type!r}"
        )
    items = sorted(boundaries_and_scales.items()) if boundaries_and_scales else []
    _check_scales("piecewise_interpolate_schedule", [s for _, s in items])
    boundaries = tuple(b for b, _ in items)
    scales = tuple(s for _, s in items)

    def schedule(count):
        bounds = jnp.stack((0, *boundaries))
        values = jnp.cumprod(jnp.stack((init_value, *scales)))
        sizes = jnp.maximum(bounds[1:] - bounds[:-1], 1)
        inside = jnp.logical_and(bounds[:-1] <= count, count < bounds[1:])
        pct = (count - bounds[:-1]) / sizes
        pieces = interpolate(values[:-1], values[1:], pct)
        return jnp.sum(jnp.where(inside, pieces, 0)) + (bounds[-1] <= count) * values[-1]

    return schedule


def _check_transition_steps(name: str, transition_steps) -> None:
    if transition_steps <= 0:
        raise ValueError(f"{name}: transition_steps must be positive, got {transition_steps!r}")


def linear_onecycle_schedule(
    transition_steps: int,
    peak_value,
    pct_start: float = 0.3,
    pct_final: float = 0.85,
    div_factor: float = 25.0,
    final_div_factor: float = 1e4,
) -> Schedule:
    """The one-cycle schedule in three linear phases (Smith et al., 2017).

    From ``peak_value / div_factor`` up to ``peak_value`` by ``pct_start * transition_steps``,
    back down by ``pct_final * transition_steps``, then down to ``peak_value / div_factor /
    final_div_factor`` by ``transition_steps``.
    """
    _check_transition_steps("linear_onecycle_schedule", transition_steps)
    return piecewise_interpolate_schedule(
        "linear",
        peak_value / div_factor,
        {
            int(pct_start * transition_steps): div_factor,
            int(pct_final * transition_steps): 1.0 / div_factor,
            transition_steps: 1.0 / final_div_factor,
        },
    )


def cosine_onecycle_schedule(
    transition_steps: int,
    peak_value,
    pct_start: float = 0.3,
    div_factor: float = 25.0,
    final_div_factor: float = 1e4,
) -> Schedule:
    """The one-cycle schedule in two cosine phases (Smith et al., 2017).

    From ``peak_value / div_factor`` up to ``peak_value`` by ``pct_start * transition_steps``,
    then down to ``peak_value / div_factor / final_div_factor`` by ``transition_steps``.
    """
    _check_transition_steps("cosine_onecycle_schedule", transition_steps)
    return piecewise_interpolate_schedule(
        "cosine",
        peak_value / div_factor,
        {
            int(pct_start * transition_steps): div_factor,
            int(transition_steps): 1.0 / (div_factor * final_div_factor),
        },
    )


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """Schedules one after another, each counted from the boundary where it starts.

    ``schedules[0]`` runs until ``boundaries[0]``, then ``schedules[1]`` sees
    ``count - boundaries[0]``, and so on.

    Raises:
        ValueError: ``boundaries`` does not have one entry fewer than ``schedules``.
    """
    schedules, boundaries = list(schedules), list(boundaries)
    if not schedules or len(boundaries) != len(schedules) - 1:
        raise ValueError(
            f"join_schedules: give one boundary fewer than schedules, got {len(schedules)} "
            f"schedules and {len(boundaries)} boundaries"
        )

    def schedule(count):
        out = schedules[0](count)
        for boundary, sched in zip(boundaries, schedules[1:]):
            out = jnp.where(count < boundary, out, sched(count - boundary))
        return out

    return schedule


def warmup_constant_schedule(init_value, peak_value, warmup_steps: int) -> Schedule:
    """A linear warmup from ``init_value`` to ``peak_value``, then ``peak_value``."""
    return linear_schedule(init_value, peak_value, warmup_steps)


def warmup_cosine_decay_schedule(
    init_value, peak_value, warmup_steps: int, decay_steps: int, end_value=0.0, exponent=1.0
) -> Schedule:
    """A linear warmup to ``peak_value``, then a cosine decay to ``end_value``.

    The warmup lasts ``warmup_steps``; ``decay_steps`` is the whole length, warmup included.
    """
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules(
        [
            linear_schedule(init_value, peak_value, warmup_steps),
            cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent),
        ],
        [warmup_steps],
    )


def warmup_exponential_decay_schedule(
    init_value,
    peak_value,
    warmup_steps: int,
    transition_steps: int,
    decay_rate,
    transition_begin: int = 0,
    staircase: bool = False,
    end_value=None,
) -> Schedule:
    """A linear warmup to ``peak_value``, then :func:`exponential_decay` from it.

    The warmup lasts ``warmup_steps``; the decay counts its steps from the end of the warmup.
    """
    return join_schedules(
        [
            linear_schedule(init_value, peak_value, warmup_steps),
            exponential_decay(
                peak_value, transition_steps, decay_rate, transition_begin, staircase, end_value
            ),
        ],
        [warmup_steps],
    )


def sgdr_schedule(cosine_kwargs: Iterable[Mapping[str, Any]]) -> Schedule:
    """SGD with warm restarts (Loshchilov and Hutter, 2017): warmup-cosine cycles joined.

    One :func:`warmup_cosine_decay_schedule` per dict of ``cosine_kwargs``, each lasting its
    ``decay_steps``.
    """
    schedules, boundaries, step = [], [], 0
    for kwargs in cosine_kwargs:
        schedules.append(warmup_cosine_decay_schedule(**kwargs))
        step += kwargs["decay_steps"]
        boundaries.append(step)
    return join_schedules(schedules, boundaries[:-1])
