"""Collectives over processes compiled into CPU code, against mpi4py (issue 22).

1. Allreduce (sum) of 1 KB ... 64 MB of float32: ``jit(lambda x: lax.psum(x, "i"))`` under a
   process axis (one native ``MPI_Allreduce`` into the output buffer, plus jit's dispatch and
   the output allocation) against mpi4py's ``comm.Allreduce(send, recv)`` on numpy buffers
   allocated once; the operand is a fungrad Array made once (``device_put``: a numpy argument
   would be copied into a fresh array by every call, as in JAX). Bandwidth is reported as
   ``bytes / time`` per rank; ratio = fungrad's bandwidth / mpi4py's (target >= 0.9). Also
   timed: ``LOOP`` psums inside one jitted ``fori_loop`` (``v = psum(v) / N``), per psum: the
   native call without jit's per-call dispatch (plus the loop's carry copy and the scaling
   kernel). Every result is checked against the sum of all ranks' inputs (small integers:
   exact).
2. The W4 step (relu MLP 784-512-512-10, softmax cross-entropy, SGD, batch 128 global;
   bench/models_bench.py's model) data parallel on every rank (batch 128 / N each, gradients
   ``pmean``-ed inside the jitted step) against one process running the whole batch while the
   other ranks wait in a barrier. The parameters after the timed steps are checked against the
   single-process run (to float32 rounding). Reported: ms per step, scaling = 1-process time /
   N-process time (ideal N).

Run:  FUNGRAD_NUM_THREADS=1 .venv/bin/mpiexec -n 2 .venv/bin/python bench/distributed_bench.py
      [--quick]
Each rank uses one thread (``FUNGRAD_NUM_THREADS=1``; the launcher gives each its own core).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

import fungrad as fg  # noqa: E402
from fungrad import distributed, lax  # noqa: E402

AXIS = "i"
LOOP = 20  # psums per call of the looped program


def timed(fns, comm, reps: list[int], rounds: int = 7) -> list[float]:
    """Seconds per call of each of ``fns`` (``reps[i]`` calls per round): the best over
    ``rounds`` rounds, the functions interleaved within each round (a load that drifts during
    the run hits all of them alike), every rank starting each batch together (barrier) and the
    slowest rank's time counted."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, (fn, k) in enumerate(zip(fns, reps)):
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            dt = (time.perf_counter() - t0) / k
            best[i] = min(best[i], comm.allreduce(dt, op=max_op()))
    return best


def max_op():
    from mpi4py import MPI

    return MPI.MAX


def allreduce_bench(comm, quick: bool) -> list[tuple]:
    """(bytes, fungrad s, mpi4py s) per size; every result checked."""
    from mpi4py import MPI

    rank, n = comm.Get_rank(), comm.Get_size()
    sizes = [2**k for k in range(10, 27, 2 if not quick else 4)]  # 1 KB ... 64 MB
    rows = []
    with distributed.bind_process_axis(AXIS):
        f = fg.jit(lambda x: lax.psum(x, AXIS))
        loop = fg.jit(
            lambda x: lax.fori_loop(0, LOOP, lambda i, v: lax.psum(v, AXIS) * (1.0 / n), x)
        )
        for nbytes in sizes:
            count = nbytes // 4
            x = ((np.arange(count) % 13) + rank).astype(np.float32)
            xa = fg.device_put(x)
            want = (np.arange(count) % 13 * n + n * (n - 1) // 2).astype(np.float32)
            got = np.asarray(f(xa))
            assert np.array_equal(got, want), f"psum of {nbytes} bytes is wrong on rank {rank}"
            np.testing.assert_allclose(np.asarray(loop(xa)), want / n, rtol=1e-6)
            recv = np.empty_like(x)
            comm.Allreduce(x, recv, op=MPI.SUM)
            assert np.array_equal(recv, want)
            reps = max(3, min(2000, int(2e8 // max(nbytes, 1) // 50)))
            if quick:
                reps = max(2, reps // 10)
            t_fg, t_loop, t_mpi = timed(
                [
                    lambda: f(xa),  # noqa: B023
                    lambda: loop(xa),  # noqa: B023
                    lambda: comm.Allreduce(x, recv, op=MPI.SUM),  # noqa: B023
                ],
                comm,
                [reps, max(1, reps // LOOP), reps],
            )
            t_loop /= LOOP
            assert np.array_equal(np.asarray(f(xa)), want)
            rows.append((nbytes, t_fg, t_loop, t_mpi))
    return rows


def w4_bench(comm, quick: bool):
    """(1-process s/step, N-process s/step, max relative parameter difference)."""
    from models_bench import mlp_inputs, mlp_loss

    rank, n = comm.Get_rank(), comm.Get_size()
    params, (x, y) = mlp_inputs((784, 512, 512, 10), batch=128)
    lr = np.float32(0.01)

    def sgd(p, g):
        return [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(p, g)]

    def step1(p, xb, yb):
        return sgd(p, fg.grad(lambda q: mlp_loss(fg, q, (xb, yb)))(p))

    def step_dp(p, xb, yb):
        g = fg.grad(lambda q: mlp_loss(fg, q, (xb, yb)))(p)
        return sgd(p, lax.pmean(g, AXIS))

    steps = 5 if quick else 20
    shard = 128 // n
    xs, ys = x[rank * shard : (rank + 1) * shard], y[rank * shard : (rank + 1) * shard]

    single = fg.jit(step1)
    single(params, x, y)  # compile (every rank: the check below needs rank 0's)
    with distributed.bind_process_axis(AXIS):
        dp = fg.jit(step_dp)
        dp(params, xs, ys)  # compile
    t1 = tn = float("inf")
    for _ in range(3 if quick else 5):  # rounds, the two interleaved; best of each
        comm.Barrier()  # the other ranks wait here while rank 0 runs the whole batch
        if rank == 0:
            t0 = time.perf_counter()
            p1 = params
            for _ in range(steps):
                p1 = single(p1, x, y)
            t1 = min(t1, (time.perf_counter() - t0) / steps)
        comm.Barrier()
        with distributed.bind_process_axis(AXIS):
            comm.Barrier()
            t0 = time.perf_counter()
            pn = params
            for _ in range(steps):
                pn = dp(pn, xs, ys)
            tn = min(tn, comm.allreduce((time.perf_counter() - t0) / steps, op=max_op()))
    err = 0.0
    if rank == 0:
        for (w1, b1), (wn, bn) in zip(p1, pn):
            for a, b in ((w1, wn), (b1, bn)):
                a, b = np.asarray(a), np.asarray(b)
                err = max(err, float(np.max(np.abs(a - b)) / np.max(np.abs(a))))
        assert err < 1e-4, f"data-parallel parameters differ from one process by {err:.2e}"
    same = comm.allgather(float(np.asarray(pn[0][0]).sum()))
    assert all(s == same[0] for s in same), "ranks' parameters diverged"
    return t1, tn, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    args = ap.parse_args()
    distributed.initialize()
    fg.config.update("jit_retrace_warning_threshold", 0)  # one compile per size, on purpose
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    rows = allreduce_bench(comm, args.quick)
    t1, tn, err = w4_bench(comm, args.quick)
    if rank:
        return
    print(f"# {n} processes, {MPI.Get_library_version().splitlines()[0]}, mpi4py")
    print(
        "| size | jit psum per call | in a jitted loop, per psum | mpi4py Allreduce | "
        "jit GB/s | mpi4py GB/s | ratio (call) | ratio (loop) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for nbytes, a, lp, b in rows:
        size = f"{nbytes // 2**20} MB" if nbytes >= 2**20 else f"{nbytes // 2**10} KB"
        print(
            f"| {size} | {a * 1e6:.1f} us | {lp * 1e6:.1f} us | {b * 1e6:.1f} us | "
            f"{nbytes / a / 1e9:.3f} | {nbytes / b / 1e9:.3f} | {b / a:.2f} | {b / lp:.2f} |"
        )
    print(
        f"W4 step (batch 128 global): 1 process {t1 * 1e3:.2f} ms, {n} processes "
        f"{tn * 1e3:.2f} ms per step, scaling {t1 / tn:.2f}x (ideal {n}x); parameters "
        f"equal to one process within {err:.1e} (relative)"
    )


if __name__ == "__main__":
    main()
