"""GPU Cholesky, triangular solve and LU: the steps (``lowering/gpu/linalg.py``: one dispatch
up to 256 x 256, a few per column above) against the loop algorithms the GPU lowered before
(one ``fori_loop`` iteration per column, forced here by a policy answering no).

For each op and batch x n: dispatches per call, compile time, and the median wall time of a
call on device-resident inputs, its first output read back (a call is one submission, so it
has finished then; reading LU's three outputs would add two read-backs to both columns).
Every result is checked against numpy/scipy. On a software adapter (lavapipe) the times
measure llvmpipe, not a GPU: read the dispatch counts as the portable number.

Run: python bench/gpu_linalg_bench.py [--sizes 1000x4 64x8 16x32 1x64 1x200] [--reps 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.linalg as sla

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.devices import device_put
from fungrad.lowering import compile_jaxpr
from fungrad.lowering.gpu import policy as gpu_policy


def _ops(rng, batch, n):
    x = rng.standard_normal((batch, n, n))
    spd = (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(np.float32)
    L = np.linalg.cholesky(spd.astype(np.float64)).astype(np.float32)
    b = rng.standard_normal((batch, n, 4)).astype(np.float32)
    gen = x.astype(np.float32)

    def check_chol(out):
        np.testing.assert_allclose(out[0], L, rtol=1e-3, atol=1e-3)

    def check_trsm(out):
        want = sla.solve_triangular(L[0].astype(np.float64), b[0], lower=True)
        np.testing.assert_allclose(out[0][0], want, rtol=1e-3, atol=1e-4)

    def check_lu(out):
        np.testing.assert_array_equal(out[1][0], sla.lu_factor(gen[0].astype(np.float64))[1])

    trsm = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True)  # noqa: E731
    return [
        ("cholesky", lax.linalg.cholesky, (spd,), check_chol),
        ("triangular_solve", trsm, (L, b), check_trsm),
        ("lu", lax.linalg.lu, (gen,), check_lu),
    ]


def _measure(f, args, reps, loops: bool):
    old = gpu_policy.GpuPolicy.linalg_step
    if loops:
        gpu_policy.GpuPolicy.linalg_step = lambda self, op, n, batch: False
    try:
        t0 = time.perf_counter()
        dev = [device_put(fnp.asarray(a), "gpu") for a in args]
        exe = compile_jaxpr(fg.make_jaxpr(f)(*[fnp.asarray(a) for a in args]), "gpu", "bench")
        compile_s = time.perf_counter() - t0
    finally:
        gpu_policy.GpuPolicy.linalg_step = old
    out = [np.asarray(o) for o in exe.call(dev)]
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        np.asarray(exe.call(dev)[0])  # (one submission: done when its first output is read)
        times.append(time.perf_counter() - t)
    return out, exe.num_dispatches, compile_s, float(np.median(times))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--sizes", nargs="*", default=["1000x4", "64x8", "16x32", "1x64", "1x200", "1x300"]
    )
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--no-loops", action="store_true", help="skip the loop algorithms")
    args = p.parse_args()
    from fungrad.lowering.gpu import runtime

    print(f"adapter: {runtime.runtime().name}")
    print(
        f"{'op':17} {'batch x n':>9} | {'step: disp':>10} {'compile':>8} {'call':>9} | "
        f"{'loop: disp':>10} {'compile':>8} {'call':>9}"
    )
    rng = np.random.default_rng(0)
    for size in args.sizes:
        batch, n = (int(v) for v in size.split("x"))
        for name, f, fargs, check in _ops(rng, batch, n):
            out, d, c, t = _measure(f, fargs, args.reps, False)
            check(out)
            row = f"{name:17} {size:>9} | {d:>10} {c:>7.2f}s {t * 1e3:>7.2f}ms |"
            if not args.no_loops:
                out, d, c, t = _measure(f, fargs, args.reps, True)
                check(out)
                row += f" {d:>10} {c:>7.2f}s {t * 1e3:>7.2f}ms"
            print(row, flush=True)


if __name__ == "__main__":
    main()
