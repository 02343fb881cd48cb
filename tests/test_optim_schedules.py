"""fungrad.optim's schedules against their formulas, written here in plain Python/numpy, eager
on Python ints and on int32 arrays, and compiled (one jit per schedule over a vector of
counts, through vmap)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import optim

COUNTS = [0, 1, 2, 5, 6, 9, 10, 11, 15, 29, 30, 37, 50, 99, 100, 101, 104, 105, 150, 250, 1000]


def _poly(t, init, end, power, steps, begin=0):
    if steps <= 0:
        return init
    begin = max(begin, 0)
    c = min(max(t - begin, 0), steps)
    return (init - end) * (1 - c / steps) ** power + end


def _piecewise(t, init, bs):
    v = init
    for b, s in sorted(bs.items()):
        if t >= b:
            v *= s
    return v


def _expo(t, init, steps, rate, begin=0, staircase=False, end=None):
    if steps <= 0 or rate == 0:
        return init
    begin = max(begin, 0)
    if t - begin <= 0:
        v = init
    else:
        p = (t - begin) / steps
        v = init * rate ** (math.floor(p) if staircase else p)
    if end is not None:
        v = max(v, end) if rate < 1 else min(v, end)
    return v


def _cosine(t, init, steps, alpha=0.0, exponent=1.0):
    c = min(t, steps)
    return init * ((1 - alpha) * (0.5 * (1 + math.cos(math.pi * c / steps))) ** exponent + alpha)


def _join(t, fns, boundaries):
    out = fns[0](t)
    for b, f in zip(boundaries, fns[1:]):
        if t >= b:
            out = f(t - b)
    return out


def _interp(t, kind, init, bs):
    bounds = [0, *sorted(bs)]
    values = [init]
    for b in sorted(bs):
        values.append(values[-1] * bs[b])
    if t >= bounds[-1]:
        return values[-1]
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        if lo <= t < hi:
            pct = (t - lo) / max(hi - lo, 1)
            a, b = values[i], values[i + 1]
            if kind == "linear":
                return a + (b - a) * pct
            return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1)
    return 0.0


def _warmup_cos(t, init, peak, warm, decay, end=0.0, exponent=1.0):
    alpha = 0.0 if peak == 0 else end / peak
    return _join(
        t,
        [
            lambda s: _poly(s, init, peak, 1, warm),
            lambda s: _cosine(s, peak, decay - warm, alpha, exponent),
        ],
        [warm],
    )


# (schedule, reference) pairs
CASES = {
    "constant": (optim.constant_schedule(0.3), lambda t: 0.3),
    "polynomial": (
        optim.polynomial_schedule(1.0, 0.01, 2, 100, transition_begin=5),
        lambda t: _poly(t, 1.0, 0.01, 2, 100, 5),
    ),
    "polynomial_negative_begin": (
        optim.polynomial_schedule(1.0, 0.5, 1.5, 10, transition_begin=-3),
        lambda t: _poly(t, 1.0, 0.5, 1.5, 10, -3),
    ),
    "linear": (optim.linear_schedule(1.0, 0.01, 100), lambda t: _poly(t, 1.0, 0.01, 1, 100)),
    "piecewise_constant": (
        optim.piecewise_constant_schedule(1.0, {100: 0.1, 200: 0.01, 5: 2.0}),
        lambda t: _piecewise(t, 1.0, {100: 0.1, 200: 0.01, 5: 2.0}),
    ),
    "exponential": (optim.exponential_decay(1.0, 10, 0.5), lambda t: _expo(t, 1.0, 10, 0.5)),
    "exponential_staircase": (
        optim.exponential_decay(1.0, 10, 0.5, 7, staircase=True, end_value=0.1),
        lambda t: _expo(t, 1.0, 10, 0.5, 7, True, 0.1),
    ),
    "exponential_growth_capped": (
        optim.exponential_decay(0.1, 10, 2.0, end_value=0.5),
        lambda t: _expo(t, 0.1, 10, 2.0, end=0.5),
    ),
    "cosine": (
        optim.cosine_decay_schedule(1.0, 100, alpha=0.1, exponent=2.0),
        lambda t: _cosine(t, 1.0, 100, 0.1, 2.0),
    ),
    "warmup_cosine": (
        optim.warmup_cosine_decay_schedule(0.0, 1.0, 10, 100, end_value=0.05),
        lambda t: _warmup_cos(t, 0.0, 1.0, 10, 100, 0.05),
    ),
    "warmup_exponential": (
        optim.warmup_exponential_decay_schedule(0.0, 1.0, 10, 20, 0.5, 3, True, 0.2),
        lambda t: _join(
            t,
            [lambda s: _poly(s, 0.0, 1.0, 1, 10), lambda s: _expo(s, 1.0, 20, 0.5, 3, True, 0.2)],
            [10],
        ),
    ),
    "warmup_constant": (
        optim.warmup_constant_schedule(0.1, 1.0, 10),
        lambda t: _poly(t, 0.1, 1.0, 1, 10),
    ),
    "join": (
        optim.join_schedules(
            [optim.constant_schedule(1.0), optim.linear_schedule(1.0, 0.0, 20)], [10]
        ),
        lambda t: 1.0 if t < 10 else _poly(t - 10, 1.0, 0.0, 1, 20),
    ),
    "cosine_onecycle": (
        optim.cosine_onecycle_schedule(100, 1.0),
        lambda t: _interp(t, "cosine", 1.0 / 25, {30: 25.0, 100: 1 / (25 * 1e4)}),
    ),
    "linear_onecycle": (
        optim.linear_onecycle_schedule(100, 1.0),
        lambda t: _interp(t, "linear", 1.0 / 25, {30: 25.0, 85: 1 / 25, 100: 1e-4}),
    ),
    "sgdr": (
        optim.sgdr_schedule(
            [
                dict(init_value=0.0, peak_value=1.0, warmup_steps=5, decay_steps=50),
                dict(
                    init_value=0.1, peak_value=0.5, warmup_steps=3, decay_steps=40, end_value=0.01
                ),
            ]
        ),
        lambda t: _join(
            t,
            [
                lambda s: _warmup_cos(s, 0.0, 1.0, 5, 50),
                lambda s: _warmup_cos(s, 0.1, 0.5, 3, 40, 0.01),
            ],
            [50],
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_schedule_matches_formula_eager_and_jit(name):
    sched, ref = CASES[name]
    want = np.array([ref(t) for t in COUNTS])
    eager_int = np.array([float(np.asarray(sched(t))) for t in COUNTS])
    eager_i32 = np.array([float(np.asarray(sched(fnp.int32(t)))) for t in COUNTS])
    counts = fnp.asarray(np.array(COUNTS, np.int32))
    compiled = np.asarray(fg.jit(fg.vmap(lambda c: fnp.asarray(sched(c), fnp.float32)))(counts))
    np.testing.assert_allclose(eager_int, want, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(eager_i32, want, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(compiled, want, rtol=2e-6, atol=1e-7)


@given(
    init=st.floats(0.01, 10.0),
    end=st.floats(0.0, 1.0),
    steps=st.integers(1, 50),
    begin=st.integers(0, 10),
    t=st.integers(0, 100),
)
def test_linear_schedule_any_arguments(init, end, steps, begin, t):
    got = float(np.asarray(optim.linear_schedule(init, end, steps, begin)(fnp.int32(t))))
    assert got == pytest.approx(_poly(t, init, end, 1, steps, begin), rel=1e-5, abs=1e-6)


@given(rate=st.floats(0.05, 3.0), steps=st.integers(1, 20), t=st.integers(0, 60))
def test_exponential_decay_any_arguments(rate, steps, t):
    got = float(np.asarray(optim.exponential_decay(2.0, steps, rate)(t)))
    assert got == pytest.approx(_expo(t, 2.0, steps, rate), rel=1e-5)


def test_degenerate_schedules_are_constant():
    assert optim.polynomial_schedule(0.7, 0.1, 2, 0)(5) == 0.7
    assert optim.exponential_decay(0.7, 0, 0.5)(5) == 0.7
    assert optim.exponential_decay(0.7, 10, 0.0)(50) == 0.7
    assert float(np.asarray(optim.piecewise_constant_schedule(0.4)(fnp.int32(9)))) == 0.4


def test_schedule_errors_name_the_function():
    with pytest.raises(ValueError, match="cosine_decay_schedule: decay_steps must be positive"):
        optim.cosine_decay_schedule(1.0, 0)
    with pytest.raises(ValueError, match="piecewise_constant_schedule.*non-negative"):
        optim.piecewise_constant_schedule(1.0, {10: -0.5})
    with pytest.raises(ValueError, match="cosine_onecycle_schedule: transition_steps"):
        optim.cosine_onecycle_schedule(0, 1.0)
    with pytest.raises(ValueError, match="interpolate_type must be 'linear' or 'cosine'"):
        optim.piecewise_interpolate_schedule("cubic", 1.0)
    with pytest.raises(ValueError, match="join_schedules: give one boundary fewer"):
        optim.join_schedules([optim.constant_schedule(1.0)], [3])


def test_schedule_drives_an_optimizer_under_jit():
    # sgd's step is -lr(count) * g: the count in the state reaches the schedule traced.
    sched = optim.exponential_decay(1.0, 1, 0.5)
    opt = optim.sgd(sched)
    params = {"x": fnp.zeros(2)}
    state = opt.init(params)
    step = fg.jit(opt.update)
    got = []
    for _ in range(4):
        updates, state = step({"x": fnp.ones(2)}, state, params)
        got.append(float(np.asarray(updates["x"])[0]))
    np.testing.assert_allclose(got, [-1.0, -0.5, -0.25, -0.125], rtol=1e-6)
