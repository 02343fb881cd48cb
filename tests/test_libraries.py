"""Libraries built on JAX run unchanged on fungrad through ``python -m fungrad.compat``: optax
and flax.linen training programs, each checked against an independent reference where one is
short to write (a numpy Adam, numpy's dense layer) and otherwise against JAX 0.10.2's numbers
for the same program, recorded here (same seeds; float32 rounding apart).

The libraries are installed by ``dev.py`` without their dependency on jax/jaxlib (fungrad
stands for them): pinned versions in ``dev.py``'s ``LIBRARIES``. Where they are missing the
tests skip, except under CI (``CI=true``), where they fail.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

_MISSING = [m for m in ("optax", "flax", "chex") if importlib.util.find_spec(m) is None]
if _MISSING:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise RuntimeError(f"CI must run tests/test_libraries.py; missing {_MISSING} (dev.py)")
    pytest.skip(f"not installed: {_MISSING} (python3 dev.py test)", allow_module_level=True)


def run(tmp_path, source: str) -> dict:
    """Run ``source`` through the compat runner; it prints one JSON object last."""
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    proc = subprocess.run(
        [sys.executable, "-m", "fungrad.compat", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_optax_adam_matches_a_numpy_adam(tmp_path):
    out = run(
        tmp_path,
        """
        import json
        import jax, jax.numpy as jnp, numpy as np, optax
        rng = np.random.default_rng(0)
        x = rng.normal(size=(32, 4)).astype(np.float32)
        y = (x @ np.arange(4.0) + 1).astype(np.float32)
        params = {"w": jnp.zeros(4), "b": jnp.zeros(())}
        opt = optax.adam(0.1)
        state = opt.init(params)

        @jax.jit
        def step(p, s):
            g = jax.grad(lambda p: jnp.mean((x @ p["w"] + p["b"] - y) ** 2))(p)
            u, s = opt.update(g, s, p)
            return optax.apply_updates(p, u), s

        for _ in range(25):
            params, state = step(params, state)
        np.save("xy.npy", np.concatenate([x, y[:, None]], axis=1))
        print(json.dumps({"w": np.asarray(params["w"]).tolist(), "b": float(params["b"])}))
        """,
    )
    xy = np.load(tmp_path / "xy.npy").astype(np.float64)
    x, y = xy[:, :4], xy[:, 4]
    w, b = np.zeros(4), 0.0
    m, v = np.zeros(5), np.zeros(5)
    for t in range(1, 26):  # Adam (b1 0.9, b2 0.999, eps 1e-8), as optax.adam defines it
        r = x @ w + b - y
        g = np.concatenate([2 * x.T @ r / len(y), [2 * r.mean()]])
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        step = 0.1 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        w, b = w - step[:4], b - step[4]
    np.testing.assert_allclose(out["w"], w, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(out["b"], b, rtol=2e-4, atol=2e-5)


def test_optax_optimizers_and_losses_match_jax(tmp_path):
    out = run(
        tmp_path,
        """
        import json
        import jax, jax.numpy as jnp, optax
        key = jax.random.PRNGKey(0)
        k1, k2 = jax.random.split(key)
        X = jax.random.normal(k1, (64, 5))
        Y = X @ jnp.arange(5.0) + 0.1 * jax.random.normal(k2, (64,))
        params = {"w": jnp.zeros(5), "b": jnp.zeros(())}
        opts = {
            "adamw": optax.adamw(1e-1, weight_decay=1e-4),
            "sgd_mom": optax.sgd(1e-2, momentum=0.9),
            "chain": optax.chain(
                optax.clip_by_global_norm(1.0), optax.adam(optax.exponential_decay(0.1, 10, 0.9))
            ),
            "lamb": optax.lamb(1e-2),
            "adabelief": optax.adabelief(1e-2),
            "lion": optax.lion(1e-3),
            "rmsprop": optax.rmsprop(1e-2),
            "adafactor": optax.adafactor(1e-2),
            "noisy": optax.noisy_sgd(1e-2, seed=0),
            "multi_steps": optax.MultiSteps(optax.adam(1e-2), every_k_schedule=2),
            "schedule_free": optax.contrib.schedule_free_adamw(1e-2),
        }
        out = {}
        for name, opt in opts.items():
            p, s = params, opt.init(params)

            def loss(p):
                return jnp.mean((X @ p["w"] + p["b"] - Y) ** 2) + optax.l2_loss(p["w"]).sum() * 1e-3

            @jax.jit
            def step(p, s):
                l, g = jax.value_and_grad(loss)(p)
                u, s = opt.update(g, s, p)
                return optax.apply_updates(p, u), s, l

            for _ in range(20):
                p, s, l = step(p, s)
            out[name] = float(l)
        logits = jax.random.normal(k1, (4, 3))
        labels = jnp.array([0, 2, 1, 0])
        out["xent"] = float(optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean())
        onehot = jax.nn.one_hot(labels, 3)
        out["bce"] = float(optax.sigmoid_binary_cross_entropy(logits, onehot).mean())
        out["huber"] = float(optax.huber_loss(logits, 0.5).mean())
        out["cos"] = float(optax.cosine_similarity(logits, logits[::-1]).mean())
        print(json.dumps(out))
        """,
    )
    jax_0_10_2 = {
        "adamw": 7.658637523651123,
        "sgd_mom": 3.5812177658081055,
        "chain": 8.286526679992676,
        "lamb": 35.553001403808594,
        "adabelief": 28.777328491210938,
        "lion": 35.3754997253418,
        "rmsprop": 29.5390567779541,
        "adafactor": 35.85150146484375,
        "noisy": 14.134260177612305,
        "multi_steps": 33.628944396972656,
        "schedule_free": 33.19637680053711,
        "xent": 1.5063297748565674,
        "bce": 0.785319447517395,
        "huber": 0.7322875261306763,
        "cos": 0.03901137039065361,
    }
    assert out.keys() == jax_0_10_2.keys()
    for name, want in jax_0_10_2.items():
        np.testing.assert_allclose(out[name], want, rtol=2e-6, err_msg=name)


def test_flax_dense_layers_are_numpy_layers(tmp_path):
    run(
        tmp_path,
        """
        import json
        import jax, jax.numpy as jnp, numpy as np
        import flax.linen as nn

        class MLP(nn.Module):
            @nn.compact
            def __call__(self, x):
                h = nn.relu(nn.Dense(16, name="hidden")(x))
                return nn.Dense(2, name="out")(h)

        x = jnp.linspace(-1, 1, 12).reshape(4, 3)
        params = MLP().init(jax.random.PRNGKey(0), x)["params"]
        y = MLP().apply({"params": params}, x)
        np.savez("mlp.npz", x=np.asarray(x), y=np.asarray(y),
                 **{f"{k}_{n}": np.asarray(v) for k, d in params.items() for n, v in d.items()})
        print(json.dumps({"sum": float(y.sum())}))
        """,
    )
    d = np.load(tmp_path / "mlp.npz")
    h = np.maximum(d["x"] @ d["hidden_kernel"] + d["hidden_bias"], 0)
    np.testing.assert_allclose(d["y"], h @ d["out_kernel"] + d["out_bias"], atol=1e-6)
    assert d["hidden_kernel"].shape == (3, 16) and not d["hidden_bias"].any()


def test_flax_training_programs_match_jax(tmp_path):
    out = run(
        tmp_path,
        """
        import json
        import jax, jax.numpy as jnp
        import flax.linen as nn
        import optax
        from flax.training import train_state

        class CNN(nn.Module):
            @nn.compact
            def __call__(self, x, train: bool):
                x = nn.Conv(8, (3, 3))(x)
                x = nn.BatchNorm(use_running_average=not train)(x)
                x = nn.relu(x)
                x = nn.max_pool(x, (2, 2), strides=(2, 2))
                x = nn.Conv(16, (3, 3), padding="VALID")(x)
                x = nn.avg_pool(x, (2, 2), strides=(2, 2))
                x = x.reshape((x.shape[0], -1))
                x = nn.Dropout(0.2, deterministic=not train)(x)
                x = nn.LayerNorm()(nn.Dense(32)(x))
                return nn.Dense(10)(nn.gelu(x))

        rng = jax.random.PRNGKey(0)
        x = jax.random.normal(rng, (8, 12, 12, 1))
        y = jnp.arange(8) % 10
        m = CNN()
        variables = m.init({"params": rng, "dropout": rng}, x, train=False)
        state = train_state.TrainState.create(
            apply_fn=m.apply, params=variables["params"], tx=optax.adam(1e-2)
        )
        bs = variables["batch_stats"]

        @jax.jit
        def step(state, bs, key):
            def loss_fn(p):
                logits, upd = m.apply({"params": p, "batch_stats": bs}, x, train=True,
                                      rngs={"dropout": key}, mutable=["batch_stats"])
                return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), upd
            (l, upd), g = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
            return state.apply_gradients(grads=g), upd["batch_stats"], l

        cnn = []
        for i in range(5):
            state, bs, l = step(state, bs, jax.random.fold_in(rng, i))
            cnn.append(float(l))

        class RNN(nn.Module):
            @nn.compact
            def __call__(self, xs):
                cell = nn.scan(nn.LSTMCell, variable_broadcast="params",
                               split_rngs={"params": False}, in_axes=1, out_axes=1)(features=16)
                carry = cell.initialize_carry(jax.random.PRNGKey(1), xs[:, 0].shape)
                carry, ys = cell(carry, xs)
                return nn.Dense(1)(ys[:, -1])

        xs = jax.random.normal(rng, (4, 7, 3))
        r = RNN()
        p = r.init(rng, xs)
        g = jax.grad(lambda p: r.apply(p, xs).sum())(p)

        class Attn(nn.Module):
            @nn.compact
            def __call__(self, t):
                h = nn.Embed(20, 16)(t)
                mask = nn.make_causal_mask(jnp.ones(h.shape[:2]))
                h = h + nn.MultiHeadDotProductAttention(num_heads=4)(h, h, mask=mask)
                return nn.Dense(20)(nn.RMSNorm()(h))

        tok = jnp.arange(10).reshape(2, 5)
        a = Attn()
        print(json.dumps({
            "cnn": cnn,
            "rnn": float(r.apply(p, xs).sum()),
            "rnn_grad": float(sum(jnp.sum(v) for v in jax.tree_util.tree_leaves(g))),
            "attn": float(a.apply(a.init(rng, tok), tok).sum()),
        }))
        """,
    )
    cnn = [2.7267117500305176, 2.171624183654785, 2.1367411613464355, 2.1822900772094727,
           1.9747554063796997]  # fmt: skip
    np.testing.assert_allclose(out["cnn"], cnn, rtol=1e-5)
    np.testing.assert_allclose(out["rnn"], -0.3725738227367401, rtol=2e-5)
    np.testing.assert_allclose(out["rnn_grad"], -0.9426416158676147, rtol=2e-5)
    np.testing.assert_allclose(out["attn"], 7.1727681159973145, rtol=2e-5)
