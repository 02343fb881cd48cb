"""Eager (un-jitted) grad of small functions: the hot path for people exploring.

    sum(tanh(W @ x)), W 16x16 float32, gradient with respect to W
    a 3-layer tanh MLP's mean squared error (8 -> 32 -> 32 -> 4, batch 16), gradient with
    respect to all six weights and biases

Compares fungrad with HIPS autograd and JAX when installed (both optional), checking every
result against the analytic gradient computed with numpy in float64. fungrad and autograd are
timed in alternating batches (the machine's load hits both alike); JAX, much slower eagerly,
is timed on its own.
Run: python bench/eager_grad.py   (pin to one core for steadier numbers: taskset -c 0 ...)
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import max_error, optional, report, timeit, timeit_interleaved  # noqa: E402

import fungrad as fg  # noqa: E402
import fungrad.numpy as fnp  # noqa: E402

MLP_SIZES = (8, 32, 32, 4)
MLP_BATCH = 16


def _check(got, expected, name):
    err, ok = max_error(got, expected, rtol=1e-4, atol=1e-5)
    assert ok, f"{name}: wrong gradient (max scaled error {err:.3g})"


def _mlp_reference(params, xb, yb):
    """The MLP loss gradient by hand-written backpropagation in float64."""
    params = [(w.astype(np.float64), b.astype(np.float64)) for w, b in params]
    hs = [xb.astype(np.float64)]
    for i, (w, b) in enumerate(params):
        z = hs[-1] @ w + b
        hs.append(np.tanh(z) if i < len(params) - 1 else z)
    dz = 2 * (hs[-1] - yb) / hs[-1].size
    grads = []
    for i in reversed(range(len(params))):
        w, _ = params[i]
        grads.append((hs[i].T @ dz, dz.sum(0)))
        if i:
            dz = (dz @ w.T) * (1 - hs[i] ** 2)
    return grads[::-1]


def _mlp_loss(np_mod, dot):
    def loss(params, xb, yb):
        h = xb
        for i, (w, b) in enumerate(params):
            h = dot(h, w) + b
            if i < len(params) - 1:
                h = np_mod.tanh(h)
        return np_mod.mean((h - yb) ** 2)

    return loss


def _compare(title, fg_fn, ag_fn, jax_fn, expected):
    _check(fg_fn(), expected, "fungrad")
    fns, names = [fg_fn], ["fungrad grad"]
    if ag_fn is not None:
        _check(ag_fn(), expected, "autograd")
        fns.append(ag_fn)
        names.append("autograd grad")
    rows = [(n, t[0]) for n, t in zip(names, timeit_interleaved(fns))]
    if jax_fn is not None:
        _check(jax_fn(), expected, "jax")
        rows.append(("jax grad (eager)", timeit(jax_fn)[0]))
    report(title, rows, "autograd grad" if ag_fn is not None else "fungrad grad")


def main():
    rng = np.random.default_rng(0)
    ag, anp = optional("autograd"), optional("autograd.numpy")
    jax, jnp = optional("jax"), optional("jax.numpy")

    w = rng.standard_normal((16, 16)).astype(np.float32)
    x = rng.standard_normal(16).astype(np.float32)
    expected = np.outer(1 - np.tanh(w.astype(np.float64) @ x) ** 2, x)
    g_fg = fg.grad(lambda w: fnp.sum(fnp.tanh(w @ x)))
    g_ag = None if ag is None else ag.grad(lambda w: anp.sum(anp.tanh(anp.dot(w, x))))
    g_jax = None if jax is None else jax.grad(lambda w: jnp.sum(jnp.tanh(w @ x)))
    _compare(
        "eager grad of sum(tanh(W @ x)), W 16x16",
        lambda: g_fg(w),
        None if ag is None else lambda: g_ag(w),
        None if jax is None else lambda: g_jax(w).block_until_ready(),
        expected,
    )

    params = [
        (
            rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a),
            rng.standard_normal(b).astype(np.float32) * 0.1,
        )
        for a, b in zip(MLP_SIZES[:-1], MLP_SIZES[1:])
    ]
    xb = rng.standard_normal((MLP_BATCH, MLP_SIZES[0])).astype(np.float32)
    yb = rng.standard_normal((MLP_BATCH, MLP_SIZES[-1])).astype(np.float32)
    expected = _mlp_reference(params, xb, yb)
    m_fg = fg.grad(_mlp_loss(fnp, fnp.matmul))
    m_ag = None if ag is None else ag.grad(_mlp_loss(anp, anp.dot))
    m_jax = None if jax is None else jax.grad(_mlp_loss(jnp, jnp.matmul))
    _compare(
        "eager grad of a 3-layer MLP loss (8-32-32-4, batch 16)",
        lambda: m_fg(params, xb, yb),
        None if ag is None else lambda: m_ag(params, xb, yb),
        None if jax is None else lambda: jax.block_until_ready(m_jax(params, xb, yb)),
        expected,
    )


if __name__ == "__main__":
    main()
