"""The MLP step's products (784-512-512-10, batch 128) and 1024^3, each alone, in the layouts the
forward and backward need: fungrad's gemm library (``gemm.gemm``, called from Python) against
numpy's OpenBLAS and JAX's jit (when installed), one process, best of 30 batches of 5 calls.
Each result is checked against a float64 product first (normwise error printed).

Run:  PYTHONPATH=. taskset -c 0 /path/to/jax-venv/bin/python bench/gemm_shapes_bench.py [NAME..]
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fungrad.lowering.cpu import gemm as G  # noqa: E402

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = None

#: name, m, n, k, A transposed, b transposed, SGD update (c = c0 - 0.1 * product)
SHAPES = [
    ("x@W1", 128, 512, 784, 0, 0, 0),
    ("h@W2", 128, 512, 512, 0, 0, 0),
    ("h@W3", 128, 10, 512, 0, 0, 0),
    ("dW1 upd", 784, 512, 128, 1, 0, 1),
    ("dW2 upd", 512, 512, 128, 1, 0, 1),
    ("dW3 upd", 512, 10, 128, 1, 0, 1),
    ("dy@W2.T", 128, 512, 512, 0, 1, 0),
    ("dy@W3.T", 128, 512, 10, 0, 1, 0),
    ("1024^3", 1024, 1024, 1024, 0, 0, 0),
]


def best(f, reps=30, inner=5) -> float:
    """Best seconds per call over ``reps`` batches of ``inner`` calls."""
    f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            f()
        times.append((time.perf_counter() - t) / inner)
    return min(times)


def jax_product(ta, tb, upd, alpha):
    """JAX's jitted form of the product (and update)."""
    if ta:
        return jax.jit(lambda a, b, c: c + alpha * (a.T @ b))
    if tb:
        return jax.jit(lambda a, b, c: a @ b.T)
    if upd:
        return jax.jit(lambda a, b, c: c + alpha * (a @ b))
    return jax.jit(lambda a, b, c: a @ b)


def bench(name, m, n, k, ta, tb, upd, rng) -> str:
    """One row: times and GFLOP/s of the three implementations."""
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    out = np.empty((m, n), np.float32)
    alpha, beta = (-0.1, 1.0) if upd else (1.0, 0.0)
    op_a, op_b = (a.T if ta else a), (b.T if tb else b)
    want = alpha * (op_a.astype(np.float64) @ op_b) + (c0 if upd else 0)

    def lib():
        G.gemm(a, b, trans_a=bool(ta), trans_b=bool(tb), alpha=alpha, beta=beta,
               c0=c0 if upd else None, out=out)  # fmt: skip

    lib()
    err = np.abs(out - want).max() / np.abs(want).max()
    flops = 2 * m * n * k
    t_lib = best(lib)
    t_np = best(lambda: np.add(c0, alpha * (op_a @ op_b)) if upd else np.matmul(op_a, op_b))
    row = (
        f"{name:9s} {m:4d}x{n:4d}x{k:4d}  fg {t_lib * 1e3:7.3f} ms {flops / t_lib / 1e9:6.1f} "
        f"GFLOP/s  numpy {flops / t_np / 1e9:6.1f}"
    )
    if jax is not None:
        f = jax_product(ta, tb, upd, alpha)
        ja, jb, jc = jnp.asarray(a), jnp.asarray(b), jnp.asarray(c0)
        t_jax = best(lambda: f(ja, jb, jc).block_until_ready())
        row += f"  jax {flops / t_jax / 1e9:6.1f}  fg/jax {t_lib / t_jax:5.2f}"
    return row + f"  err {err:.1e}"


def main(argv=None) -> int:
    only = set(sys.argv[1:] if argv is None else argv)
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        if not only or shape[0] in only:
            print(bench(*shape, rng), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
