"""Data-parallel training across processes over MPI: a small MLP regression, each process
taking its shard of every global batch, gradients averaged with ``lax.pmean``.

    mpiexec -n 4 python examples/data_parallel.py           # 4 processes (mpi4py + an MPI)
    python examples/data_parallel.py                        # the same run as one process
    python examples/data_parallel.py --smoke                # a few steps (CI)

``fg.distributed.initialize()`` joins the processes the launcher started; ``fg.pmap(step,
axis_name="data")`` runs ``step`` on this process's shard with ``"data"`` spanning the
processes, and ``lax.pmean(grads, "data")`` is one MPI allreduce inside the compiled step.
Every process starts from the same parameters and applies the same averaged gradient, so the
parameters stay identical on every rank, and the losses equal a one-process run on the whole
global batch (to float32 rounding: the sums are grouped differently). ``--save FILE`` writes
the losses and final parameters (rank 0) for that comparison (tests/test_distributed.py).
"""

from __future__ import annotations

import _gallery
import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax

FEATURES, HIDDEN, SAMPLES, GLOBAL_BATCH = 8, 32, 512, 64


def make_data(seed: int):
    """Inputs and targets of a smooth nonlinear regression (the same on every process)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32)
    w = rng.standard_normal((FEATURES,)).astype(np.float32) / np.sqrt(FEATURES)
    y = np.sin(2 * x @ w)[:, None].astype(np.float32)
    return x, y


def init_params(seed: int):
    rng = np.random.default_rng(seed + 1)
    return {
        "w1": (rng.standard_normal((FEATURES, HIDDEN)) / np.sqrt(FEATURES)).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": (rng.standard_normal((HIDDEN, 1)) / np.sqrt(HIDDEN)).astype(np.float32),
        "b2": np.zeros(1, np.float32),
    }


def loss_fn(params, x, y):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    return fnp.mean((h @ params["w2"] + params["b2"] - y) ** 2)


def make_step(lr: float):
    def step(params, x, y):
        """One SGD step on this process's shard: the loss and gradients averaged over the
        processes (equal shards, so the mean over the global batch)."""
        loss, grads = fg.value_and_grad(loss_fn)(params, x, y)
        loss, grads = lax.pmean((loss, grads), axis_name="data")
        return fg.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return fg.pmap(step, axis_name="data")


def main():
    p = _gallery.parser(__doc__.splitlines()[0], steps=200)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--save", default=None, help="write losses and parameters (rank 0) here")
    args = p.parse_args()
    try:
        fg.distributed.initialize()
    except ImportError as e:
        print(f"running as one process without fungrad.distributed ({e})")
    rank, n = fg.process_index(), fg.process_count()
    if GLOBAL_BATCH % n:
        raise SystemExit(f"the global batch {GLOBAL_BATCH} must divide among {n} processes")
    local = GLOBAL_BATCH // n
    x, y = make_data(args.seed)
    # every process holds the same parameters, with pmap's leading device axis (size 1 here)
    params = fg.tree_util.tree_map(lambda a: a[None], init_params(args.seed))
    step = make_step(args.lr)
    steps = 5 if args.smoke else args.steps
    if rank == 0:
        print(f"data parallel: {n} process(es), global batch {GLOBAL_BATCH} ({local} each)")
    losses = []
    for i in range(steps):
        start = (i * GLOBAL_BATCH) % SAMPLES + rank * local  # this process's shard
        xb, yb = x[start : start + local], y[start : start + local]
        params, loss = step(params, xb[None], yb[None])
        losses.append(float(loss[0]))
        if rank == 0 and (i % 50 == 0 or i == steps - 1):
            print(f"step {i:4d}  loss {losses[-1]:.6f}")
    if rank == 0:
        print(f"trained {steps} steps, final loss {losses[-1]:.6f}")
        if args.save:
            flat = {k: np.asarray(v[0]) for k, v in params.items()}
            np.savez(args.save, losses=np.array(losses), **flat)


if __name__ == "__main__":
    main()
