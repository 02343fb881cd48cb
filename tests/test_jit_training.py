"""A whole training step compiled with jit: an MLP (tanh, relu, softmax cross-entropy) whose
``jit(value_and_grad)`` + SGD update is one native function. The loss must fall, and every
step must match the same step evaluated eagerly (the numpy reference)."""

from __future__ import annotations

import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import nn


def init(rng, sizes):
    return [
        (fnp.asarray((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32)), fnp.zeros(n))
        for m, n in zip(sizes[:-1], sizes[1:])
    ]


def loss(params, x, labels):
    (w1, b1), (w2, b2), (w3, b3) = params
    h = fnp.tanh(x @ w1 + b1)
    h = nn.relu(h @ w2 + b2)
    logits = h @ w3 + b3
    return -fnp.mean(fnp.sum(nn.log_softmax(logits) * labels, axis=1))


def sgd_step(params, x, labels, lr=0.1):
    value, grads = fg.value_and_grad(loss)(params, x, labels)
    return fg.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), value


def test_mlp_trains_under_jit_and_matches_eager_steps():
    rng = np.random.default_rng(0)
    sizes = (20, 64, 32, 5)
    params = init(rng, sizes)
    x = fnp.asarray(rng.standard_normal((48, sizes[0])).astype(np.float32))
    labels = fnp.asarray(np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, 5, 48)])
    step = fg.jit(sgd_step)
    eager_params = params
    losses = []
    for _ in range(25):
        params, value = step(params, x, labels)
        eager_params, eager_value = sgd_step(eager_params, x, labels)
        np.testing.assert_allclose(float(value), float(eager_value), rtol=1e-4, atol=1e-5)
        for p, q in zip(fg.tree_util.tree_leaves(params), fg.tree_util.tree_leaves(eager_params)):
            np.testing.assert_allclose(np.asarray(p), np.asarray(q), rtol=2e-3, atol=2e-4)
        losses.append(float(value))
    assert losses[-1] < 0.7 * losses[0], losses
    plan = step.lower(params, x, labels).as_text()
    assert "gemm" in plan and "define" in plan
