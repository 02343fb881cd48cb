"""fungrad.optim's wrappers: masked, multi_transform, inject_hyperparams, MultiSteps, ema and
apply_if_finite, checked against numpy references of what they must do, eagerly and under
jit (and vmap where a wrapper's state is what varies)."""

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import optim, tree_util

PARAMS = {"b": fnp.array([0.1, -0.2]), "w": fnp.array([[1.0, -2.0], [0.5, 3.0]])}
GRADS = [
    {
        "b": fnp.array([0.05, -0.3]) / (i + 1),
        "w": fnp.array([[0.3, -0.1], [0.2, 0.4]]) * (i + 1),
    }
    for i in range(6)
]


def _np(tree):
    return tree_util.tree_map(lambda x: np.asarray(x, np.float64), tree)


def _run(tx, grads=GRADS, jit=False, params=PARAMS):
    state = tx.init(params)
    update = fg.jit(tx.update) if jit else tx.update
    out = []
    for g in grads:
        u, state = update(g, state, params)
        out.append(_np(u))
    return out, state


@pytest.mark.parametrize("jit", [False, True])
def test_masked_leaves_pass_through_untouched(jit):
    tx = optim.masked(optim.scale(-0.1), {"b": False, "w": True})
    ups, state = _run(tx, jit=jit)
    for g, u in zip(GRADS, ups):
        np.testing.assert_array_equal(u["b"], np.asarray(g["b"]))
        np.testing.assert_allclose(u["w"], -0.1 * np.asarray(g["w"]), rtol=1e-6)


def test_masked_callable_and_prefix_mask_and_inner_state_only_masked():
    nested = {"dense": PARAMS, "scale": fnp.array(2.0)}
    grads = {"dense": GRADS[0], "scale": fnp.array(0.5)}
    # a prefix mask: one bool for the whole "dense" subtree
    tx = optim.masked(optim.adam(0.1), {"dense": False, "scale": True})
    state = tx.init(nested)
    mu = state.inner_state[0].mu
    assert isinstance(mu["dense"], optim.MaskedNode)
    assert tree_util.tree_leaves(mu) == [mu["scale"]]
    u, _ = tx.update(grads, state, nested)
    np.testing.assert_array_equal(np.asarray(u["dense"]["w"]), np.asarray(GRADS[0]["w"]))
    # adam's first step is -lr * g / (|g| + eps) elementwise
    assert float(np.asarray(u["scale"])) == pytest.approx(-0.1, rel=1e-5)
    # a callable mask: matrices only
    tx = optim.masked(optim.scale(0.0), lambda p: tree_util.tree_map(lambda x: x.ndim == 2, p))
    (u,), _ = _run(tx, grads=GRADS[:1])
    np.testing.assert_array_equal(u["w"], 0.0)
    np.testing.assert_array_equal(u["b"], np.asarray(GRADS[0]["b"]))


def test_masked_bad_mask_structure_is_a_value_error():
    tx = optim.masked(optim.scale(1.0), {"w": True})
    with pytest.raises(ValueError, match="masked.init: the mask's structure"):
        tx.init(PARAMS)


@pytest.mark.parametrize("jit", [False, True])
def test_multi_transform_applies_each_transform_to_its_label(jit):
    tx = optim.multi_transform(
        {"frozen": optim.set_to_zero(), "sgd": optim.sgd(0.5, momentum=0.9)},
        {"b": "frozen", "w": "sgd"},
    )
    ups, state = _run(tx, jit=jit)
    trace = np.zeros((2, 2))
    for g, u in zip(GRADS, ups):
        trace = np.asarray(g["w"]) + 0.9 * trace  # optax's trace: t = g + decay * t
        np.testing.assert_allclose(u["w"], -0.5 * trace, rtol=1e-6)
        np.testing.assert_array_equal(u["b"], 0.0)
    assert set(state.inner_states) == {"frozen", "sgd"}


def test_multi_transform_label_without_transform_is_a_value_error():
    tx = optim.multi_transform({"a": optim.sgd(0.1)}, lambda p: {"b": "a", "w": "b"})
    with pytest.raises(ValueError, match=r"multi_transform: the labels \[\"'b'\"\] have no"):
        tx.init(PARAMS)


@pytest.mark.parametrize("jit", [False, True])
def test_inject_hyperparams_learning_rate_changed_mid_run(jit):
    tx = optim.inject_hyperparams(optim.sgd)(learning_rate=0.1)
    state = tx.init(PARAMS)
    assert state.hyperparams["learning_rate"].dtype == np.float32
    update = fg.jit(tx.update) if jit else tx.update
    g = GRADS[0]
    u, state = update(g, state, PARAMS)
    np.testing.assert_allclose(np.asarray(u["w"]), -0.1 * np.asarray(g["w"]), rtol=1e-6)
    state.hyperparams["learning_rate"] = fnp.asarray(0.01)
    u, state = update(g, state, PARAMS)
    np.testing.assert_allclose(np.asarray(u["w"]), -0.01 * np.asarray(g["w"]), rtol=1e-6)
    assert int(np.asarray(state.count)) == 2


@pytest.mark.parametrize("jit", [False, True])
def test_inject_hyperparams_schedule_follows_the_count(jit):
    sched = optim.linear_schedule(0.1, 0.01, 4)
    tx = optim.inject_hyperparams(optim.sgd)(learning_rate=sched, momentum=None)
    ups, state = _run(tx, jit=jit)
    for t, (g, u) in enumerate(zip(GRADS, ups)):
        lr = 0.1 + (0.01 - 0.1) * min(t, 4) / 4
        np.testing.assert_allclose(u["b"], -lr * np.asarray(g["b"]), rtol=1e-5)
    # the state records the value the last step used
    assert float(np.asarray(state.hyperparams["learning_rate"])) == pytest.approx(0.01)


def test_inject_hyperparams_vmapped_over_learning_rates():
    tx = optim.inject_hyperparams(optim.sgd)(learning_rate=0.1)
    state = tx.init(PARAMS)

    def step(lr):
        s = state._replace(hyperparams={**state.hyperparams, "learning_rate": lr})
        return tx.update(GRADS[1], s, PARAMS)[0]["w"]

    lrs = fnp.array([0.1, 0.2, 0.3])
    got = np.asarray(fg.jit(fg.vmap(step))(lrs))
    want = -np.array([0.1, 0.2, 0.3])[:, None, None] * np.asarray(GRADS[1]["w"])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_inject_hyperparams_errors_and_static_args():
    with pytest.raises(ValueError, match="static_args \\['nope'\\] are not parameters of sgd"):
        optim.inject_hyperparams(optim.sgd, static_args="nope")
    tx = optim.inject_hyperparams(optim.sgd, hyperparam_dtype=np.float32)(0.5, nesterov=True)
    state = tx.init(PARAMS)
    assert set(state.hyperparams) == {"learning_rate"}  # momentum None and bools stay static


@pytest.mark.parametrize("jit", [False, True])
def test_multisteps_accumulates_k_steps_then_applies_the_mean(jit):
    ms = optim.MultiSteps(optim.sgd(1.0), every_k_schedule=3)
    tx = ms.gradient_transformation()
    state = tx.init(PARAMS)
    update = fg.jit(tx.update) if jit else tx.update
    applied = []
    for i, g in enumerate(GRADS):
        u, state = update(g, state, PARAMS)
        applied.append(bool(np.asarray(ms.has_updated(state))))
        if i % 3 < 2:
            assert all(np.all(x == 0) for x in tree_util.tree_leaves(_np(u)))
        else:
            for k in ("b", "w"):
                mean = np.mean([np.asarray(h[k]) for h in GRADS[i - 2 : i + 1]], axis=0)
                np.testing.assert_allclose(np.asarray(u[k]), -mean, rtol=1e-6)
    assert applied == [False, False, True, False, False, True]
    assert int(np.asarray(state.gradient_step)) == 2


def test_multisteps_sum_and_schedule_and_inner_state_frozen_between_steps():
    # k grows with the gradient step: 1, then 2
    ms = optim.MultiSteps(
        optim.adam(0.1),
        every_k_schedule=lambda step: fnp.where(step < 1, 1, 2),
        use_grad_mean=False,
    )
    state = ms.init(PARAMS)
    counts = []
    for g in GRADS[:5]:
        _, state = ms.update(g, state, PARAMS)
        counts.append(int(np.asarray(state.inner_opt_state[0].count)))
    assert counts == [1, 1, 2, 2, 3]
    # summed: sgd(1) on the sum of two mini-batches
    ms = optim.MultiSteps(optim.sgd(1.0), 2, use_grad_mean=False)
    ups, _ = _run(ms.gradient_transformation(), grads=GRADS[:2])
    np.testing.assert_allclose(
        ups[1]["w"], -(np.asarray(GRADS[0]["w"]) + np.asarray(GRADS[1]["w"])), rtol=1e-6
    )


def test_multisteps_skip_not_finite_ignores_a_bad_mini_batch():
    ms = optim.MultiSteps(optim.sgd(1.0), 2, should_skip_update_fn=optim.skip_not_finite)
    bad = tree_util.tree_map(lambda x: x * fnp.nan, GRADS[0])
    ups, state = _run(ms.gradient_transformation(), grads=[GRADS[0], bad, GRADS[1]], jit=True)
    assert np.all(ups[1]["w"] == 0) and np.all(np.isfinite(ups[1]["w"]))
    mean = (np.asarray(GRADS[0]["w"]) + np.asarray(GRADS[1]["w"])) / 2
    np.testing.assert_allclose(ups[2]["w"], -mean, rtol=1e-6)
    assert int(np.asarray(state.skip_state["num_not_finite"])) == 0


def test_multisteps_bad_k_is_an_error():
    with pytest.raises(ValueError, match="every_k_schedule must be at least 1"):
        optim.MultiSteps(optim.sgd(1.0), 0)
    with pytest.raises(TypeError, match="every_k_schedule must be an int"):
        optim.MultiSteps(optim.sgd(1.0), "2")


@pytest.mark.parametrize("debias", [True, False])
def test_ema_numbers(debias):
    decay = 0.9
    ups, state = _run(optim.ema(decay, debias=debias), jit=True)
    e = {k: np.zeros_like(np.asarray(PARAMS[k])) for k in PARAMS}
    for t, (g, u) in enumerate(zip(GRADS, ups), start=1):
        for k in e:
            e[k] = decay * e[k] + (1 - decay) * np.asarray(g[k])
            want = e[k] / (1 - decay**t) if debias else e[k]
            np.testing.assert_allclose(u[k], want, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(state.ema["w"]), e["w"], rtol=1e-5)
    assert int(np.asarray(state.count)) == len(GRADS)


def test_apply_if_finite_skips_then_gives_up():
    tx = optim.apply_if_finite(optim.adam(0.1), max_consecutive_errors=2)
    bad = tree_util.tree_map(lambda x: x.at[0].set(fnp.inf), GRADS[0])
    grads = [GRADS[0], bad, bad, bad, GRADS[1]]
    ups, state = _run(tx, grads=grads, jit=True)
    assert np.all(ups[1]["b"] == 0) and np.all(ups[2]["w"] == 0)
    assert not np.all(np.isfinite(ups[3]["b"]))  # the third in a row is applied
    # (the accepted infinity is now in adam's moments: the wrapper guards a step, not a state)
    assert int(np.asarray(state.total_notfinite)) == 3
    assert int(np.asarray(state.notfinite_count)) == 0
    assert bool(np.asarray(state.last_finite))
    assert int(np.asarray(state.inner_state[0].count)) == 3


def test_wrappers_compose_in_a_jitted_training_loop():
    # weight decay on matrices only, adam everywhere, a warmup schedule, 2-step accumulation
    sched = optim.warmup_cosine_decay_schedule(0.0, 0.1, 2, 20)
    opt = optim.MultiSteps(
        optim.chain(
            optim.masked(optim.add_decayed_weights(1e-2), lambda p: {"b": False, "w": True}),
            optim.inject_hyperparams(optim.adam)(learning_rate=sched),
        ),
        2,
    )

    def loss(p, x):
        return fnp.sum((x @ p["w"] + p["b"]) ** 2)

    @fg.jit
    def step(p, s, x):
        g = fg.grad(loss)(p, x)
        u, s = opt.update(g, s, p)
        return optim.apply_updates(p, u), s

    x = fnp.asarray(np.random.default_rng(0).normal(size=(4, 2)).astype(np.float32))
    p, s = PARAMS, opt.init(PARAMS)
    first = float(np.asarray(loss(p, x)))
    for _ in range(20):
        p, s = step(p, s, x)
    assert float(np.asarray(loss(p, x))) < first
    assert math.isfinite(float(np.asarray(loss(p, x))))


@given(
    k=st.integers(1, 4),
    use_mean=st.booleans(),
    grads=st.lists(hnp.arrays(np.float32, (3,), elements=st.floats(-4, 4, width=32)), max_size=9),
)
def test_multisteps_against_a_python_loop(k, use_mean, grads):
    ms = optim.MultiSteps(optim.sgd(1.0), k, use_grad_mean=use_mean)
    params = fnp.zeros(3)
    state = ms.init(params)
    pending = []
    for g in grads:
        u, state = ms.update(fnp.asarray(g), state, params)
        pending.append(g.astype(np.float64))
        if len(pending) == k:
            total = np.sum(pending, axis=0)
            want = -(total / k if use_mean else total)
            pending = []
            assert bool(np.asarray(ms.has_updated(state)))
        else:
            want = np.zeros(3)
            assert not bool(np.asarray(ms.has_updated(state)))
        np.testing.assert_allclose(np.asarray(u), want, rtol=1e-5, atol=1e-5)
    assert int(np.asarray(state.mini_step)) == len(pending)
