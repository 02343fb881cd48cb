"""Eager (un-jitted) grad of a small function: the hot path for people exploring.

    sum(tanh(W @ x)), W 16x16 float32, gradient with respect to W

Compares fungrad with HIPS autograd and JAX when installed (both optional), checking every
result against the analytic gradient computed with numpy in float64.
Run: python bench/eager_grad.py   (pin to one core for steadier numbers: taskset -c 0 ...)
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import optional, report, timeit  # noqa: E402

import fungrad as fg  # noqa: E402
import fungrad.numpy as fnp  # noqa: E402


def main():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    x = rng.standard_normal(16).astype(np.float32)
    expected = np.outer(1 - np.tanh(w.astype(np.float64) @ x) ** 2, x)

    def check(g, name):
        err = np.max(np.abs(np.asarray(g, np.float64) - expected))
        assert err < 1e-4, f"{name}: wrong gradient (max error {err})"

    rows = []
    g_fg = fg.grad(lambda w: fnp.sum(fnp.tanh(w @ x)))
    check(g_fg(w), "fungrad")
    rows.append(("fungrad grad", timeit(lambda: g_fg(w))[0]))

    ag = optional("autograd")
    if ag is not None:
        anp = optional("autograd.numpy")
        g_ag = ag.grad(lambda w: anp.sum(anp.tanh(anp.dot(w, x))))
        check(g_ag(w), "autograd")
        rows.append(("autograd grad", timeit(lambda: g_ag(w))[0]))
    jax = optional("jax")
    if jax is not None:
        jnp = optional("jax.numpy")
        g_jax = jax.grad(lambda w: jnp.sum(jnp.tanh(w @ x)))
        check(g_jax(w), "jax")
        rows.append(("jax grad (eager)", timeit(lambda: g_jax(w).block_until_ready())[0]))
    report("eager grad of sum(tanh(W @ x)), W 16x16", rows,
           "autograd grad" if ag is not None else "fungrad grad")


if __name__ == "__main__":
    main()
