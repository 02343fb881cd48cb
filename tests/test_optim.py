"""fungrad.optim: the optimizers' first steps against their update rules written out in numpy
(float64), a few final parameters against numbers optax computed once, and the protocol under
jit, vmap and grad."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import optim
from fungrad.testing import check_grads

P0 = {"w": np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.5]]), "b": np.array([0.1, -0.2, 0.3])}
GS = [
    {"w": [[0.126, -0.132, 0.64], [0.105, -0.536, 0.362]], "b": [1.304, 0.947, -0.704]},
    {"w": [[-1.265, -0.623, 0.041], [-2.325, -0.219, -1.246]], "b": [-0.732, -0.544, -0.316]},
    {"w": [[0.412, 1.043, -0.129], [1.366, -0.665, 0.352]], "b": [0.903, 0.094, -0.743]},
]
GS = [{k: np.array(v) for k, v in g.items()} for g in GS]


def _run(opt, steps=3, params=P0, grads=GS):
    """``steps`` optimizer steps on ``params`` with the gradients ``grads`` in turn."""
    p = {k: fnp.asarray(v) for k, v in params.items()}
    s = opt.init(p)
    for i in range(steps):
        g = {k: fnp.asarray(v) for k, v in grads[i % len(grads)].items()}
        u, s = opt.update(g, s, p)
        p = optim.apply_updates(p, u)
    return {k: np.asarray(v) for k, v in p.items()}


def _run_ref(step, steps=3):
    """The numpy reference: ``step(g, p, s, t) -> u`` per leaf, ``s`` a dict it keeps."""
    p = {k: v.copy() for k, v in P0.items()}
    states = {k: {} for k in p}
    for i in range(steps):
        for k in p:
            p[k] = p[k] + step(GS[i % 3][k], p[k], states[k], i + 1)
    return p


def _norm(x):
    return np.sqrt(np.sum(x * x))


def _adam_core(g, s, t, b1, b2, eps, nesterov=False, eps_root=0.0):
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    if nesterov:
        mh = b1 * s["m"] / (1 - b1 ** (t + 1)) + (1 - b1) * g / (1 - b1**t)
    else:
        mh = s["m"] / (1 - b1**t)
    vh = s["v"] / (1 - b2**t)
    return mh / (np.sqrt(vh + eps_root) + eps)


def _trust(u, p, coef=1.0, eps=0.0):
    pn, un = _norm(p), _norm(u)
    return u if pn == 0 or un == 0 else u * (coef * pn / (un + eps))


def ref_sgd(lr, momentum=None, nesterov=False):
    def step(g, p, s, t):
        if momentum is None:
            return -lr * g
        s["tr"] = g + momentum * s.get("tr", 0.0)
        return -lr * (g + momentum * s["tr"] if nesterov else s["tr"])

    return step


def ref_adam(lr, b1=0.9, b2=0.999, eps=1e-8, nesterov=False, wd=0.0, eps_root=0.0):
    return lambda g, p, s, t: -lr * (_adam_core(g, s, t, b1, b2, eps, nesterov, eps_root) + wd * p)


def ref_adamax(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    def step(g, p, s, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = np.maximum(np.abs(g) + eps, b2 * s.get("v", 0.0))
        return -lr * (s["m"] / (1 - b1**t) / s["v"] + wd * p)

    return step


def ref_amsgrad(lr, b1=0.9, b2=0.999, eps=1e-8):
    def step(g, p, s, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        s["vmax"] = np.maximum(s.get("vmax", 0.0), s["v"] / (1 - b2**t))
        return -lr * (s["m"] / (1 - b1**t)) / (np.sqrt(s["vmax"]) + eps)

    return step


def ref_radam(lr, b1=0.9, b2=0.999, eps=1e-8, threshold=5.0):
    ro_inf = 2 / (1 - b2) - 1

    def step(g, p, s, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        mh, vh = s["m"] / (1 - b1**t), s["v"] / (1 - b2**t)
        ro = ro_inf - 2 * t * b2**t / (1 - b2**t)
        if ro < threshold:
            return -lr * mh
        r = np.sqrt((ro - 4) * (ro - 2) * ro_inf / ((ro_inf - 4) * (ro_inf - 2) * ro))
        return -lr * r * mh / (np.sqrt(vh) + eps)

    return step


def ref_rmsprop(lr, decay=0.9, eps=1e-8, centered=False, momentum=None, nesterov=False):
    def step(g, p, s, t):
        s["v"] = decay * s.get("v", 0.0) + (1 - decay) * g * g
        var = s["v"]
        if centered:
            s["mu"] = decay * s.get("mu", 0.0) + (1 - decay) * g
            var = var - s["mu"] ** 2
        u = -lr * g / np.sqrt(var + eps)
        if momentum is None:
            return u
        s["tr"] = u + momentum * s.get("tr", 0.0)
        return u + momentum * s["tr"] if nesterov else s["tr"]

    return step


def ref_adagrad(lr, init=0.1, eps=1e-7):
    def step(g, p, s, t):
        s["ss"] = s.get("ss", init) + g * g
        return -lr * g / np.sqrt(s["ss"] + eps)

    return step


def ref_adadelta(lr, rho=0.9, eps=1e-6):
    def step(g, p, s, t):
        s["eg"] = rho * s.get("eg", 0.0) + (1 - rho) * g * g
        u = np.sqrt(s.get("ex", 0.0) + eps) / np.sqrt(s["eg"] + eps) * g
        s["ex"] = rho * s.get("ex", 0.0) + (1 - rho) * u * u
        return -lr * u

    return step


def ref_adafactor(lr, decay_rate=0.8, clip=1.0, eps=1e-30):
    """Adafactor with every 2-D leaf factored (min_dim_size_to_factor=2)."""

    def step(g, p, s, t):
        c = np.float32(t)  # the decay is computed in float32, as optax does
        d = float(np.float32(1.0) - c ** np.float32(-decay_rate))
        gsq = g * g + eps
        if g.ndim == 2:
            d1, d0 = (0, 1) if g.shape[1] >= g.shape[0] else (1, 0)
            s["row"] = d * s.get("row", 0.0) + (1 - d) * gsq.mean(axis=d0)
            s["col"] = d * s.get("col", 0.0) + (1 - d) * gsq.mean(axis=d1)
            rf = (s["row"] / s["row"].mean()) ** -0.5
            cf = s["col"] ** -0.5
            u = g * np.expand_dims(rf, d0) * np.expand_dims(cf, d1)
        else:
            s["v"] = d * s.get("v", 0.0) + (1 - d) * gsq
            u = g / np.sqrt(s["v"])
        u = u / max(1.0, np.sqrt(np.mean(u * u)) / clip)
        u = u * lr * max(np.sqrt(np.mean(p * p)), 1e-3)
        return -u

    return step


def ref_lamb(lr, b1=0.9, b2=0.999, eps=1e-6, wd=0.0):
    def step(g, p, s, t):
        return -lr * _trust(_adam_core(g, s, t, b1, b2, eps) + wd * p, p)

    return step


def ref_lars(lr, wd=0.0, coef=0.001, momentum=0.9):
    def step(g, p, s, t):
        u = -lr * _trust(g + wd * p, p, coef)
        s["tr"] = u + momentum * s.get("tr", 0.0)
        return s["tr"]

    return step


def ref_lion(lr, b1=0.9, b2=0.99, wd=1e-3):
    def step(g, p, s, t):
        m = s.get("m", 0.0)
        u = np.sign((1 - b1) * g + b1 * m) + wd * p
        s["m"] = b2 * m + (1 - b2) * g
        return -lr * u

    return step


def ref_adabelief(lr, b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16):
    def step(g, p, s, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["s"] = b2 * s.get("s", 0.0) + (1 - b2) * (g - s["m"]) ** 2 + eps_root
        mh, sh = s["m"] / (1 - b1**t), s["s"] / (1 - b2**t)
        return -lr * mh / (np.sqrt(sh) + eps)

    return step


def ref_yogi(lr, b1=0.9, b2=0.999, eps=1e-3, init=1e-6):
    def step(g, p, s, t):
        s["m"] = b1 * s.get("m", init) + (1 - b1) * g
        v = s.get("v", init)
        s["v"] = v - (1 - b2) * np.sign(v - g * g) * g * g
        mh, vh = s["m"] / (1 - b1**t), s["v"] / (1 - b2**t)
        return -lr * mh / (np.sqrt(vh) + eps)

    return step


def ref_novograd(lr, b1=0.9, b2=0.25, eps=1e-6, wd=0.0):
    def step(g, p, s, t):
        sq = np.sum(g * g)
        s["v"] = sq if t == 1 else b2 * s["v"] + (1 - b2) * sq
        s["m"] = b1 * s.get("m", 0.0) + g / (np.sqrt(s["v"]) + eps) + wd * p
        return -lr * s["m"]

    return step


def ref_centralized_sgd(lr):
    def step(g, p, s, t):
        if g.ndim > 1:
            g = g - g.mean(axis=tuple(range(1, g.ndim)), keepdims=True)
        return -lr * g

    return step


CASES = [
    ("sgd", optim.sgd(0.1), ref_sgd(0.1), 3),
    ("sgd_momentum", optim.sgd(0.1, momentum=0.9), ref_sgd(0.1, 0.9), 3),
    ("sgd_nesterov", optim.sgd(0.1, 0.9, nesterov=True), ref_sgd(0.1, 0.9, True), 3),
    ("adam", optim.adam(0.1), ref_adam(0.1), 3),
    ("adam_eps_root", optim.adam(0.1, eps_root=1e-3), ref_adam(0.1, eps_root=1e-3), 3),
    ("nadam", optim.nadam(0.1), ref_adam(0.1, nesterov=True), 3),
    ("adamw", optim.adamw(0.1, weight_decay=0.05), ref_adam(0.1, wd=0.05), 3),
    ("nadamw", optim.nadamw(0.1, weight_decay=0.05), ref_adam(0.1, nesterov=True, wd=0.05), 3),
    ("adamax", optim.adamax(0.1), ref_adamax(0.1), 3),
    ("adamaxw", optim.adamaxw(0.1, weight_decay=0.05), ref_adamax(0.1, wd=0.05), 3),
    ("amsgrad", optim.amsgrad(0.1), ref_amsgrad(0.1), 3),
    ("radam", optim.radam(0.1, b2=0.99), ref_radam(0.1, b2=0.99), 8),
    ("rmsprop", optim.rmsprop(0.1), ref_rmsprop(0.1), 3),
    (
        "rmsprop_centered_nesterov",
        optim.rmsprop(0.1, centered=True, momentum=0.9, nesterov=True),
        ref_rmsprop(0.1, centered=True, momentum=0.9, nesterov=True),
        3,
    ),
    ("adagrad", optim.adagrad(0.1), ref_adagrad(0.1), 3),
    ("adadelta", optim.adadelta(0.5), ref_adadelta(0.5), 3),
    ("adafactor", optim.adafactor(0.1, min_dim_size_to_factor=2), ref_adafactor(0.1), 3),
    ("lamb", optim.lamb(0.1, weight_decay=0.01), ref_lamb(0.1, wd=0.01), 3),
    ("lars", optim.lars(0.1, weight_decay=0.01), ref_lars(0.1, wd=0.01), 3),
    ("lion", optim.lion(0.1), ref_lion(0.1), 3),
    ("adabelief", optim.adabelief(0.1), ref_adabelief(0.1), 3),
    ("yogi", optim.yogi(0.1), ref_yogi(0.1), 3),
    ("novograd", optim.novograd(0.1, weight_decay=0.01), ref_novograd(0.1, wd=0.01), 3),
    (
        "centralize",
        optim.chain(optim.centralize(), optim.sgd(0.1)),
        ref_centralized_sgd(0.1),
        3,
    ),
    ("sign_sgd", optim.sign_sgd(0.1), lambda g, p, s, t: -0.1 * np.sign(g), 3),
]


@pytest.mark.parametrize("name,opt,ref,steps", CASES, ids=[c[0] for c in CASES])
def test_optimizer_steps_match_the_update_rule(x64, name, opt, ref, steps):
    got = _run(opt, steps)
    want = _run_ref(ref, steps)
    for k in want:
        assert got[k].dtype == np.float64
        np.testing.assert_allclose(got[k], want[k], rtol=1e-9, atol=1e-12, err_msg=f"{name}/{k}")


# Final parameters optax 0.2.8 computed once (float64) from P0 and GS: an external check of the
# chains' composition, not only of the formulas above.
OPTAX = {
    "adam": (
        optim.adam(0.1),
        {
            "w": [
                [0.9972732533051032, -1.8329441591593945, 0.2867016042960492],
                [0.2365064372559818, 3.2841307558208204, -1.5245863516546472],
            ],
            "b": [-0.06956884166091644, -0.34268136168257207, 0.5869291003210243],
        },
    ),
    "nadamw": (
        optim.nadamw(0.1, weight_decay=0.01),
        {
            "w": [
                [0.9678715530539185, -1.7880131600161904, 0.28457703146230956],
                [0.19982130187853786, 3.3378874703597514, -1.5385989146660595],
            ],
            "b": [-0.09161937229423991, -0.34352754200099234, 0.6463083885367409],
        },
    ),
    "rmsprop": (
        optim.rmsprop(0.1, centered=True, momentum=0.9, nesterov=True),
        {
            "w": [
                [0.547508352118309, -0.47238267635983866, -0.5727241745111321],
                [-0.31497919215164244, 5.055027166789705, -1.9653492200571971],
            ],
            "b": [-0.9505871404150454, -0.9573522539145249, 2.3503344670100708],
        },
    ),
    "adafactor": (
        optim.adafactor(0.1, min_dim_size_to_factor=2),
        {
            "w": [
                [0.9246098575369548, -2.0075722153597804, 0.3327885534445544],
                [0.13574939657859725, 3.4185069355936095, -1.5118447416072829],
            ],
            "b": [0.07324446157710182, -0.2086011289498639, 0.3635548407813365],
        },
    ),
    "lamb": (
        optim.lamb(0.1, weight_decay=0.01),
        {
            "w": [
                [1.0928569519326572, -1.6987471456976486, 0.010354851360386136],
                [0.30146060503024996, 3.703931652664538, -1.4483943519335376],
            ],
            "b": [0.05020278924816164, -0.23874876236563364, 0.3972453323138315],
        },
    ),
    "lars": (
        optim.lars(0.1, weight_decay=0.01),
        {
            "w": [
                [1.0000700352667136, -1.9998706013145617, 0.49924106639510385],
                [0.2501770122996065, 3.000791207384209, -1.500163321183081],
            ],
            "b": [0.0999497025410182, -0.2000172291779549, 0.300087151942913],
        },
    ),
    "radam": (
        optim.radam(0.1, b2=0.99),
        {
            "w": [
                [1.1344038826083633, -1.959159169799398, 0.3184306104977323],
                [0.4681822498214794, 3.2593421301855745, -1.429297421344566],
            ],
            "b": [-0.2250218309393175, -0.38562715288210964, 0.6256598639230195],
        },
    ),
    "adafactor_momentum": (
        optim.adafactor(
            0.1,
            min_dim_size_to_factor=2,
            momentum=0.9,
            weight_decay_rate=0.01,
            dtype_momentum=fnp.float64,
        ),
        {
            "w": [
                [0.9470531690787355, -1.9083643053786006, 0.4333490245626795],
                [0.22072019877597857, 2.9955776468264737, -1.4610967414607392],
            ],
            "b": [0.09217250225944063, -0.1972258870040822, 0.30192904453391867],
        },
    ),
    "adamw_masked": (
        optim.adamw(0.1, weight_decay=0.1, mask={"w": True, "b": False}),
        {
            "w": [
                [0.9688881562452447, -1.7763989714495463, 0.2745573878434124],
                [0.2303580219766026, 3.1921359443306954, -1.478572613110413],
            ],
            "b": [-0.06956884166091644, -0.34268136168257207, 0.5869291003210243],
        },
    ),
    "novograd": (
        optim.novograd(0.1, weight_decay=0.01),
        {
            "w": [
                [1.0295313216744613, -1.9547667639790172, 0.31486912401802625],
                [0.32122484191869477, 3.1855281166462444, -1.5233838516302523],
            ],
            "b": [-0.06295549049266783, -0.2673975017285267, 0.5189017913969562],
        },
    ),
    "yogi": (
        optim.yogi(0.1),
        {
            "w": [
                [1.0008578797349055, -1.8366779717458324, 0.2874538358948158],
                [0.24154501418953564, 3.283094929508874, -1.5240586866793449],
            ],
            "b": [-0.06934466310496826, -0.3424164246786019, 0.5861618293372414],
        },
    ),
}


@pytest.mark.parametrize("name", sorted(OPTAX))
def test_final_params_match_optax(x64, name):
    opt, want = OPTAX[name]
    got = _run(opt, 8 if name == "radam" else 3)
    for k in want:
        np.testing.assert_allclose(got[k], np.array(want[k]), rtol=1e-6, atol=1e-9)


# --- transformations -------------------------------------------------------------------------


def _tree(**kw):
    return {k: fnp.asarray(np.asarray(v, dtype=np.float64)) for k, v in kw.items()}


def test_chain_and_identity(x64):
    g = _tree(a=[1.0, -2.0], b=3.0)
    tx = optim.chain(optim.scale(2.0), optim.identity(), optim.scale(-3.0))
    state = tx.init(g)
    assert state == (optim.EmptyState(), optim.EmptyState(), optim.EmptyState())
    u, state2 = tx.update(g, state)
    np.testing.assert_allclose(np.asarray(u["a"]), [-6.0, 12.0])
    np.testing.assert_allclose(np.asarray(u["b"]), -18.0)
    assert state2 == state
    u, _ = optim.identity().update(g, optim.identity().init(g))
    assert u is g
    # A chain of chains and a chain passing extra keyword arguments along.
    tx2 = optim.chain(tx, optim.chain())
    u, _ = tx2.update(g, tx2.init(g), loss=1.0)
    np.testing.assert_allclose(np.asarray(u["a"]), [-6.0, 12.0])


def test_chain_rejects_non_transformations():
    with pytest.raises(TypeError, match="chain: argument 1"):
        optim.chain(optim.identity(), 0.1)


def test_apply_updates_keeps_param_dtypes(x64):
    params = {"f32": fnp.ones(3, dtype=fnp.float32), "f64": fnp.ones(2), "none": None}
    updates = {"f32": fnp.full(3, 0.5), "f64": fnp.full(2, 0.25, dtype=fnp.float32), "none": None}
    out = optim.apply_updates(params, updates)
    assert out["f32"].dtype == np.float32 and out["f64"].dtype == np.float64
    assert out["none"] is None
    np.testing.assert_allclose(np.asarray(out["f32"]), 1.5)
    np.testing.assert_allclose(np.asarray(out["f64"]), 1.25)


def test_global_norm(x64):
    t = {"a": fnp.asarray([3.0, 4.0]), "b": [fnp.asarray(12.0)], "c": fnp.zeros((0, 2))}
    np.testing.assert_allclose(float(optim.global_norm(t)), 13.0)
    assert float(optim.global_norm({})) == 0.0
    np.testing.assert_allclose(float(optim.global_norm(fnp.asarray([3 + 4j]))), 5.0)


def test_clipping_transforms(x64):
    g = _tree(a=[3.0, -4.0], b=[12.0])
    u, _ = optim.clip(2.5).update(g, optim.EmptyState())
    np.testing.assert_allclose(np.asarray(u["a"]), [2.5, -2.5])
    np.testing.assert_allclose(np.asarray(u["b"]), [2.5])
    u, _ = optim.clip_by_global_norm(6.5).update(g, optim.EmptyState())
    np.testing.assert_allclose(np.asarray(u["a"]), [1.5, -2.0])
    np.testing.assert_allclose(np.asarray(u["b"]), [6.0])
    u, _ = optim.clip_by_global_norm(100.0).update(g, optim.EmptyState())
    np.testing.assert_allclose(np.asarray(u["a"]), [3.0, -4.0])
    u, _ = optim.clip_by_block_rms(1.0).update(g, optim.EmptyState())
    rms = np.sqrt(12.5)
    np.testing.assert_allclose(np.asarray(u["a"]), np.array([3.0, -4.0]) / rms)
    np.testing.assert_allclose(np.asarray(u["b"]), [1.0])


def test_clip_by_global_norm_has_finite_gradient_at_zero(x64):
    tx = optim.clip_by_global_norm(1.0)
    f = lambda x: fnp.sum(tx.update({"x": x}, tx.init(None))[0]["x"] ** 2)  # noqa: E731
    np.testing.assert_allclose(np.asarray(fg.grad(f)(fnp.zeros(3))), 0.0)
    check_grads(f, (fnp.asarray([2.0, -1.0, 0.5]),), order=1, modes=["rev"])


def test_add_decayed_weights_with_mask_and_schedule(x64):
    p = _tree(w=[1.0, 2.0], b=[-1.0])
    g = _tree(w=[0.5, 0.5], b=[0.5])
    tx = optim.add_decayed_weights(0.1, mask={"w": True, "b": False})
    u, _ = tx.update(g, tx.init(p), p)
    np.testing.assert_allclose(np.asarray(u["w"]), [0.6, 0.7])
    np.testing.assert_allclose(np.asarray(u["b"]), [0.5])
    tx = optim.add_decayed_weights(0.1, mask=lambda params: {k: k == "b" for k in params})
    u, _ = tx.update(g, tx.init(p), p)
    np.testing.assert_allclose(np.asarray(u["w"]), [0.5, 0.5])
    np.testing.assert_allclose(np.asarray(u["b"]), [0.4])
    tx = optim.add_decayed_weights(lambda c: 0.1 * (c + 1))
    s = tx.init(p)
    u, s = tx.update(g, s, p)
    u, s = tx.update(g, s, p)
    np.testing.assert_allclose(np.asarray(u["w"]), [0.7, 0.9])
    assert int(s.count) == 2
    with pytest.raises(ValueError, match="add_decayed_weights: .*params"):
        tx.update(g, s)
    with pytest.raises(ValueError, match="the mask.s structure"):
        optim.add_decayed_weights(0.1, mask={"x": True}).update(g, optim.EmptyState(), p)


def test_keep_params_nonnegative(x64):
    p = _tree(a=[1.0, 0.5, 0.0])
    u, _ = optim.keep_params_nonnegative().update(_tree(a=[-2.0, 0.25, -1.0]), None, p)
    np.testing.assert_allclose(np.asarray(u["a"]), [-1.0, 0.25, 0.0])


def test_rms_and_stddev_with_bias_correction(x64):
    g1, g2 = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    for centered in (False, True):
        fn = optim.scale_by_stddev if centered else optim.scale_by_rms
        tx = fn(decay=0.8, eps=1e-3, eps_in_sqrt=False, bias_correction=True, initial_scale=0.5)
        s = tx.init(fnp.zeros(2))
        for g in (g1, g2):
            u, s = tx.update(fnp.asarray(g), s)
        v = 0.8 * (0.8 * 0.5 + 0.2 * g1**2) + 0.2 * g2**2
        mu = 0.8 * 0.2 * g1 + 0.2 * g2
        vh, muh = v / (1 - 0.8**2), mu / (1 - 0.8**2)
        denom = np.sqrt(vh - muh**2 if centered else vh) + 1e-3
        np.testing.assert_allclose(np.asarray(u), g2 / denom, rtol=1e-12)
        assert int(s.count) == 2


def test_scale_by_factored_rms_shapes():
    tx = optim.scale_by_factored_rms(min_dim_size_to_factor=4)
    p = {"big": fnp.ones((6, 4, 5)), "small": fnp.ones((3, 8)), "vec": fnp.ones(9)}
    s = tx.init(p)
    # The two largest dims of (6, 4, 5) are 6 (d0) and 5 (d1): rows drop axis 0, cols axis 2.
    assert s.v_row["big"].shape == (4, 5) and s.v_col["big"].shape == (6, 4)
    assert s.v["big"].shape == (1,) and s.v["small"].shape == (3, 8)
    assert s.v["vec"].shape == (9,)
    u, s = tx.update({k: 2.0 * v for k, v in p.items()}, s, p)
    for k in p:
        # A constant gradient c is scaled to c / sqrt(c^2) = 1 on the first step.
        np.testing.assert_allclose(np.asarray(u[k]), 1.0, rtol=1e-5)


def test_add_noise_and_noisy_sgd():
    tx = optim.noisy_sgd(1.0, eta=0.04, gamma=0.5, key=fg.random.PRNGKey(3))
    g = {"a": fnp.zeros(20000), "b": fnp.zeros(())}
    s = tx.init(g)
    u1, s = tx.update(g, s)
    u2, s = tx.update(g, s)
    # Variance eta / t^gamma at step t.
    np.testing.assert_allclose(np.std(np.asarray(u1["a"])), np.sqrt(0.04), rtol=0.05)
    np.testing.assert_allclose(np.std(np.asarray(u2["a"])), np.sqrt(0.04 / 2**0.5), rtol=0.05)
    assert not np.allclose(np.asarray(u1["a"]), np.asarray(u2["a"]))
    again, _ = tx.update(g, tx.init(g))
    np.testing.assert_array_equal(np.asarray(again["a"]), np.asarray(u1["a"]))
    with pytest.raises(ValueError, match="add_noise: give key or seed"):
        optim.add_noise(0.1, 0.5, key=1, seed=2)


def test_lars_trust_ratio_mask(x64):
    p = _tree(w=[3.0, 4.0], b=[1.0])
    g = _tree(w=[0.6, 0.8], b=[2.0])
    tx = optim.lars(
        1.0, trust_coefficient=0.5, momentum=0.0, trust_ratio_mask={"w": True, "b": False}
    )
    u, _ = tx.update(g, tx.init(p), p)
    np.testing.assert_allclose(np.asarray(u["w"]), -0.5 * 5.0 * np.array([0.6, 0.8]))
    np.testing.assert_allclose(np.asarray(u["b"]), [-2.0])


def test_errors_name_the_function():
    with pytest.raises(TypeError, match="scale_by_schedule"):
        optim.scale_by_schedule(0.1)
    p = {"w": fnp.ones(2)}
    for tx in (optim.lamb(0.1), optim.adafactor(0.1), optim.keep_params_nonnegative()):
        with pytest.raises(ValueError, match="params"):
            tx.update(p, tx.init(p))
    tx = optim.adam(0.1)
    with pytest.raises(ValueError, match="chain.update: the state has 1 members"):
        tx.update(p, (tx.init(p)[0],))


# --- under transformations -------------------------------------------------------------------


def test_jit_update_equals_eager(x64):
    # float64: in float32 Adam's bias correction 1 - b2^t cancels (a 1-ulp difference in b2^t
    # is ~1e-5 relative at t=3), so eager and compiled pow may differ in the last digits.
    opt = optim.adamw(0.05, weight_decay=0.01)
    p = {"w": fnp.asarray(P0["w"], dtype=fnp.float64), "b": fnp.asarray(P0["b"], dtype=fnp.float64)}
    jitted = fg.jit(opt.update)
    s_e = s_j = opt.init(p)
    for g in GS:
        g = {k: fnp.asarray(v, dtype=fnp.float64) for k, v in g.items()}
        u_e, s_e = opt.update(g, s_e, p)
        u_j, s_j = jitted(g, s_j, p)
        for k in p:
            np.testing.assert_allclose(
                np.asarray(u_j[k]), np.asarray(u_e[k]), rtol=1e-12, atol=1e-15
            )
        p = optim.apply_updates(p, u_e)
    assert s_j[0].count.dtype == np.int32 and int(s_j[0].count) == 3


def test_jitted_train_step_decreases_a_quadratic():
    rng = np.random.default_rng(1)
    a = fnp.asarray(rng.normal(size=(8, 4)), dtype=fnp.float32)
    w_true = np.array([1.0, -2.0, 0.5, 0.0])
    y = fnp.asarray(np.asarray(a) @ w_true + 0.3 + 0.1 * rng.normal(size=8), dtype=fnp.float32)

    def loss(params):
        return fnp.mean((a @ params["w"] + params["b"] - y) ** 2)

    opt = optim.chain(optim.clip_by_global_norm(10.0), optim.adam(0.1))

    @fg.jit
    def step(params, state):
        val, grads = fg.value_and_grad(loss)(params)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state, val

    params = {"w": fnp.zeros(4), "b": fnp.zeros(())}
    state = opt.init(params)
    first = float(loss(params))
    for _ in range(100):
        params, state, _ = step(params, state)
    # The least-squares optimum, for reference.
    design = np.c_[np.asarray(a), np.ones(8)]
    best = np.linalg.lstsq(design, np.asarray(y), rcond=None)[1][0] / 8
    assert float(loss(params)) < first * 0.05
    assert float(loss(params)) < best + 0.05 * (first - best)
    assert params["w"].dtype == np.float32


def test_vmap_over_a_batch_of_param_trees():
    rng = np.random.default_rng(2)
    ps = {
        "w": rng.normal(size=(5, 3)).astype(np.float32),
        "b": rng.normal(size=5).astype(np.float32),
    }
    gs = {
        "w": rng.normal(size=(5, 3)).astype(np.float32),
        "b": rng.normal(size=5).astype(np.float32),
    }
    opt = optim.lamb(0.1, weight_decay=0.1)

    def one(p, g):
        u, s = opt.update(g, opt.init(p), p)
        u, s = opt.update(g, s, optim.apply_updates(p, u))
        return u

    got = fg.vmap(one)(
        {k: fnp.asarray(v) for k, v in ps.items()}, {k: fnp.asarray(v) for k, v in gs.items()}
    )
    for i in range(5):
        want = one(
            {k: fnp.asarray(v[i]) for k, v in ps.items()},
            {k: fnp.asarray(v[i]) for k, v in gs.items()},
        )
        for k in ps:
            np.testing.assert_allclose(
                np.asarray(got[k][i]), np.asarray(want[k]), rtol=1e-5, atol=1e-7
            )


def test_learning_rate_schedule_eager_and_jit(x64):
    opt = optim.sgd(lambda count: 0.1 * (count + 1))
    g = {"x": fnp.asarray([1.0, -2.0])}
    for update in (opt.update, fg.jit(opt.update)):
        s = opt.init(g)
        for t in range(1, 4):
            u, s = update(g, s)
            np.testing.assert_allclose(np.asarray(u["x"]), -0.1 * t * np.array([1.0, -2.0]))
    # A schedule from fungrad.optim.schedules-like callables, inside adam.
    opt = optim.adam(lambda c: 0.2 / (1.0 + c))
    lr2 = ref_adam(0.1)  # the second step's learning rate is 0.2 / 2
    p = {"w": fnp.asarray(P0["w"])}
    s = opt.init(p)
    _, s = opt.update({"w": fnp.asarray(GS[0]["w"])}, s, p)
    u, s = opt.update({"w": fnp.asarray(GS[1]["w"])}, s, p)
    st = {}
    lr2(GS[0]["w"], P0["w"], st, 1)
    np.testing.assert_allclose(np.asarray(u["w"]), lr2(GS[1]["w"], P0["w"], st, 2), rtol=1e-12)


def test_grad_through_an_optimizer_step(x64):
    opt = optim.adam(0.1)
    g0 = fnp.asarray([0.3, -0.7, 1.1])

    def after_two_steps(p):
        s = opt.init(p)
        u, s = opt.update(p * g0, s, p)
        p = optim.apply_updates(p, u)
        u, s = opt.update(p * p, s, p)
        return fnp.sum(optim.apply_updates(p, u) ** 2)

    check_grads(after_two_steps, (fnp.asarray([1.0, 2.0, -0.5]),), order=1, modes=["rev", "fwd"])


@given(
    shape=st.sampled_from([(), (0,), (3,), (2, 3)]),
    seed=st.integers(0, 2**16),
    name=st.sampled_from(["adam", "rmsprop", "lion", "adagrad"]),
)
def test_leaf_shapes_and_jit_agree(shape, seed, name):
    """0-d and size-0 leaves, eager against jit, and the state's structure kept by update."""
    rng = np.random.default_rng(seed)
    opt = getattr(optim, name)(0.01)
    p = {"x": fnp.asarray(rng.normal(size=shape).astype(np.float32))}
    g = {"x": fnp.asarray(rng.normal(size=shape).astype(np.float32))}
    s = opt.init(p)
    u_e, s_e = opt.update(g, s, p)
    u_j, s_j = fg.jit(opt.update)(g, s, p)
    assert fg.tree_util.tree_structure(s_e) == fg.tree_util.tree_structure(s)
    assert u_e["x"].shape == shape and u_e["x"].dtype == np.float32
    np.testing.assert_allclose(np.asarray(u_j["x"]), np.asarray(u_e["x"]), rtol=1e-5, atol=1e-7)
    for a, b in zip(fg.tree_util.tree_leaves(s_e), fg.tree_util.tree_leaves(s_j)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)


def test_mu_dtype_and_nan_propagation(x64):
    opt = optim.adam(0.1, mu_dtype=fnp.float32)
    p = {"x": fnp.asarray([1.0, 2.0])}
    s = opt.init(p)
    assert s[0].mu["x"].dtype == np.float32 and s[0].nu["x"].dtype == np.float64
    u, s = opt.update({"x": fnp.asarray([np.nan, 1.0])}, s, p)
    assert s[0].mu["x"].dtype == np.float32
    assert np.isnan(np.asarray(u["x"])[0]) and np.isfinite(np.asarray(u["x"])[1])


@pytest.mark.parametrize("name", ["adamw", "lamb", "adafactor", "rmsprop"])
def test_update_on_the_gpu_backend(gpu, name):
    p = {"w": fnp.asarray(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)), "b": fnp.ones(3)}
    g = {
        "w": fnp.asarray(GS[0]["w"], dtype=fnp.float32),
        "b": fnp.asarray(GS[0]["b"], dtype=fnp.float32),
    }
    opt = getattr(optim, name)(0.1)
    s = opt.init(p)
    u_cpu, s_cpu = opt.update(g, s, p)
    u_gpu, s_gpu = fg.jit(opt.update, backend="gpu")(g, s, p)
    for a, b in zip(
        fg.tree_util.tree_leaves((u_gpu, s_gpu)), fg.tree_util.tree_leaves((u_cpu, s_cpu))
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)


def test_incremental_and_periodic_update(x64):
    new, old = _tree(a=[1.0, 2.0]), _tree(a=[3.0, 6.0])
    np.testing.assert_allclose(
        np.asarray(optim.incremental_update(new, old, 0.25)["a"]), [2.5, 5.0]
    )
    f = fg.jit(lambda s: optim.periodic_update(new, old, s, 3)["a"])
    np.testing.assert_allclose(np.asarray(f(fnp.asarray(6))), [1.0, 2.0])
    np.testing.assert_allclose(np.asarray(f(fnp.asarray(7))), [3.0, 6.0])


def test_safe_numerics(x64):
    x = fnp.asarray(np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(float(optim.safe_norm(x, 0.0)), np.linalg.norm(np.arange(6.0)))
    np.testing.assert_allclose(
        np.asarray(optim.safe_norm(x, 3.0, axis=1)), [3.0, np.linalg.norm([3.0, 4.0, 5.0])]
    )
    np.testing.assert_allclose(
        np.asarray(fg.grad(lambda v: optim.safe_norm(v, 0.0))(fnp.zeros(3))), 0.0
    )
    np.testing.assert_allclose(
        np.asarray(fg.grad(lambda v: optim.safe_root_mean_squares(v, 1e-3))(fnp.zeros(2))), 0.0
    )
    top = np.iinfo(np.int32).max
    assert int(optim.safe_int32_increment(fnp.asarray(top, dtype=fnp.int32))) == top
    assert int(optim.safe_increment(fnp.asarray(4, dtype=fnp.int32))) == 5


def test_lion_modes(x64):
    g, m0 = np.array([3.0, -0.5, 0.2]), np.array([0.0, 0.0, 0.0])
    x = 0.1 * g + 0.9 * m0
    for mode, want in (
        ("hard", np.sign(x)),
        ("smooth", np.tanh(2.0 * x)),
        ("refined", np.where(np.abs(x) < 1, x, np.sign(x))),
    ):
        tx = optim.scale_by_lion(mode=mode, smooth_beta=2.0)
        u, _ = tx.update(fnp.asarray(g), tx.init(fnp.zeros(3)))
        np.testing.assert_allclose(np.asarray(u), want)
    with pytest.raises(ValueError, match="scale_by_lion: unknown mode"):
        optim.scale_by_lion(mode="soft")
