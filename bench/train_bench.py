"""Adam training steps: fungrad's jitted step against JAX + optax's, in steps per second.

Two workloads, both one jitted function ``step(params, opt_state, x, y) -> (params, opt_state,
loss)`` on float32: a relu MLP with softmax cross-entropy, Adam (lr 1e-3, optax's defaults),
batch 128.

- ``w4``: the MLP of the jit benchmark, 784-512-512-10.
- ``digits``: the digits classifier's MLP, 64-128-10 (small matrices: per-call overhead and
  kernel count dominate).

Before timing, both frameworks take one step from the same parameters and batch and the new
parameters, Adam moments and loss are compared against a float64 numpy step (hand-written
backpropagation and optax's Adam formulas); a result off the tolerance is reported, never timed.
Timed as a training loop (each step fed the previous step's parameters and Adam state), the
frameworks' batches of calls alternating (bench/common.timeit_interleaved): wall time (min and
median), and the process's CPU time per step (``cpu/step``: on a loaded shared host, pinned
to one core, the steadier measure of the work itself).

fungrad's Adam is ``fungrad.optim.adam`` when that module exists, else the same formulas by
hand (``mu = b1 mu + (1-b1) g``, ``nu = b2 nu + (1-b2) g^2``, bias corrections by the step
count, ``-lr mu_hat / (sqrt(nu_hat) + eps)``). JAX's side is ``optax.adam`` (falls back to the
hand-written formulas when optax is absent).

Run:  PYTHONPATH=. /path/to/jax-venv/bin/python bench/train_bench.py [--only w4,digits]
      [--cores 1,0] [--quick]
``--cores`` lists the pinnings to run, each in a fresh process (1: one core, as ``taskset -c 0``;
0: the affinity left alone).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from common import max_error, optional, pin_cores, timeit_interleaved  # noqa: E402

WORKLOADS = {
    "w4": ("MLP 784-512-512-10 relu, Adam, batch 128", (784, 512, 512, 10)),
    "digits": ("digits MLP 64-128-10 relu, Adam, batch 128", (64, 128, 10)),
}
BATCH = 128
LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8
# Float32 first step against the float64 reference: (rtol, atol) of the loss, the moments and
# the new parameters. Adam's first update is -lr g / (|g| + eps): for gradients near eps it
# is ill-conditioned (float32 rounding of a 1e-8 gradient moves it by a sizable part of lr),
# so the parameters get an absolute tolerance of 5% of lr; the moments, linear in g, are tight.
TOLERANCES = {
    "loss": (1e-5, 1e-6),
    "mu": (2e-3, 1e-8),
    "nu": (2e-3, 1e-12),
    "params": (2e-3, 0.05 * LR),
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    p.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(WORKLOADS)}")
    p.add_argument(
        "--cores",
        default="1,0",
        help="comma-separated pinnings, each run in its own process (1: one core; "
        "0: leave the affinity alone); default 1,0",
    )
    args = p.parse_args(argv)
    args.only = [n for n in args.only.split(",") if n] or list(WORKLOADS)
    unknown = sorted(set(args.only) - set(WORKLOADS))
    if unknown:
        p.error(f"--only: unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    args.cores = [int(c) for c in args.cores.split(",") if c]
    return args


# -- inputs and the float64 reference ------------------------------------------------------------


def inputs(sizes):
    """(params, x, one-hot y) as float32 numpy: params a list of (W, b), W ~ N(0, 1/fan_in).

    The first seed whose hidden pre-activations all lie at least 1e-6 from relu's kink (in
    float64): one nearer could round to the other side in float32 and flip that unit's gradient,
    which would fail the first-step check for a reason no implementation controls."""
    import numpy as np

    for seed in range(100):
        rng = np.random.default_rng(seed)
        params = [
            (
                rng.standard_normal((m, n)).astype(np.float32) / np.float32(np.sqrt(m)),
                (0.01 * rng.standard_normal(n)).astype(np.float32),
            )
            for m, n in zip(sizes[:-1], sizes[1:])
        ]
        x = rng.standard_normal((BATCH, sizes[0])).astype(np.float32)
        y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], BATCH)]
        h, margin = x.astype(np.float64), np.inf
        for w, b in params[:-1]:
            z = h @ w + b
            margin = min(margin, float(np.abs(z).min()))
            h = np.maximum(z, 0)
        if margin >= 1e-6:  # float32 sums of 784 unit terms err by ~1e-7
            return params, x, y
    raise RuntimeError(f"no seed below 100 keeps the pre-activations of {sizes} off the kink")


def reference_step(params, x, y):
    """One Adam step from zero moments in float64 numpy: (new params, (mu, nu), loss)."""
    import numpy as np

    ws = [np.asarray(w, np.float64) for w, _ in params]
    bs = [np.asarray(b, np.float64) for _, b in params]
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    hs, zs = [x], []
    for i, (w, b) in enumerate(zip(ws, bs)):
        z = hs[-1] @ w + b
        zs.append(z)
        if i < len(ws) - 1:
            hs.append(np.maximum(z, 0))
    logits = zs[-1]
    shifted = logits - logits.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    loss = -np.mean(np.sum(y * logp, -1))
    d = (np.exp(logp) * y.sum(-1, keepdims=True) - y) / x.shape[0]
    grads = [None] * len(ws)
    for i in reversed(range(len(ws))):
        grads[i] = (hs[i].T @ d, d.sum(0))
        if i:
            d = (d @ ws[i].T) * (zs[i - 1] > 0)
    new, mus, nus = [], [], []
    for (w, b), (gw, gb) in zip(zip(ws, bs), grads):
        layer_p, layer_mu, layer_nu = [], [], []
        for p, g in ((w, gw), (b, gb)):
            mu = (1 - B1) * g
            nu = (1 - B2) * g * g
            mu_hat, nu_hat = mu / (1 - B1), nu / (1 - B2)
            layer_p.append(p - LR * mu_hat / (np.sqrt(nu_hat) + EPS))
            layer_mu.append(mu)
            layer_nu.append(nu)
        new.append(tuple(layer_p))
        mus.append(tuple(layer_mu))
        nus.append(tuple(layer_nu))
    return new, (mus, nus), loss


# -- the step, written once for fungrad and JAX -----------------------------------------------


def hand_adam(fw):
    """(init, update) of Adam by optax's formulas, written against ``fw`` (fungrad or jax)."""
    jnp, tu = fw.numpy, fw.tree_util

    def init(params):
        zeros = tu.tree_map(jnp.zeros_like, params)
        return (jnp.zeros((), jnp.int32), zeros, tu.tree_map(jnp.zeros_like, params))

    def update(grads, state, params=None):
        count, mu, nu = state
        count = count + 1
        mu = tu.tree_map(lambda m, g: B1 * m + (1 - B1) * g, mu, grads)
        nu = tu.tree_map(lambda v, g: B2 * v + (1 - B2) * g * g, nu, grads)
        c1 = 1 - B1 ** count.astype(jnp.float32)
        c2 = 1 - B2 ** count.astype(jnp.float32)
        updates = tu.tree_map(lambda m, v: -LR * (m / c1) / (jnp.sqrt(v / c2) + EPS), mu, nu)
        return updates, (count, mu, nu)

    return init, update, lambda p, u: tu.tree_map(lambda a, b: a + b, p, u)


def optimizer(fw, name: str):
    """(init, update, apply_updates, label) for ``fw``: the library Adam when there is one."""
    if name == "fungrad":
        optim = optional("fungrad.optim")
        if optim is not None and hasattr(optim, "adam"):
            opt = optim.adam(LR, b1=B1, b2=B2, eps=EPS)
            return opt.init, opt.update, optim.apply_updates, "fungrad.optim.adam"
    else:
        optax = optional("optax")
        if optax is not None:
            opt = optax.adam(LR, b1=B1, b2=B2, eps=EPS)
            return opt.init, opt.update, optax.apply_updates, "optax.adam"
    return (*hand_adam(fw), "hand-written Adam")


def build(fw, name: str):
    """(jitted step, opt init, label) on framework module ``fw`` named ``name``."""
    jnp = fw.numpy
    init, update, apply_updates, label = optimizer(fw, name)

    def loss_fn(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = fw.nn.relu(h @ w + b)
        w, b = params[-1]
        logits = h @ w + b
        return -jnp.mean(jnp.sum(y * fw.nn.log_softmax(logits), axis=-1))

    def step(params, opt_state, x, y):
        loss, grads = fw.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = update(grads, opt_state, params)
        return apply_updates(params, updates), opt_state, loss

    return fw.jit(step), init, label


def moments(opt_state, fw):
    """(mu, nu) out of an Adam state of any of the three forms (optax's, fungrad's, by hand)."""
    for s in fw.tree_util.tree_leaves(opt_state, is_leaf=lambda s: hasattr(s, "mu")):
        if hasattr(s, "mu") and hasattr(s, "nu"):
            return s.mu, s.nu
    _, mu, nu = opt_state
    return mu, nu


def to_numpy(tree):
    import numpy as np

    if isinstance(tree, (list, tuple)):
        return [to_numpy(t) for t in tree]
    return np.asarray(tree)


def prepare(fw, name, sizes, expected):
    """A row: ``run`` (a timed no-argument callable), ``err``, ``label``; or ``error``."""
    row = {"label": name}
    try:
        step, init, row["opt"] = build(fw, name)
        params, x, y = inputs(sizes)
        params = [tuple(fw.numpy.asarray(a) for a in layer) for layer in params]
        x, y = fw.numpy.asarray(x), fw.numpy.asarray(y)
        state = init(params)
        new, new_state, loss = step(params, state, x, y)
        mu, nu = moments(new_state, fw)
        exp_params, (exp_mu, exp_nu), exp_loss = expected
        pairs = {
            "loss": (float(loss), exp_loss),
            "mu": (to_numpy(mu), exp_mu),
            "nu": (to_numpy(nu), exp_nu),
            "params": (to_numpy(new), exp_params),
        }
        errs = {k: max_error(g, e, *TOLERANCES[k])[0] for k, (g, e) in pairs.items()}
        bad = {k: f"{e:.3g}x" for k, e in errs.items() if not e <= 1.0}
        if bad:
            row["error"] = f"WRONG FIRST STEP: error over the tolerance in {bad}"
            return row
        row["err"] = max(errs.values())
        block = fw.block_until_ready
        carry = [new, new_state]

        def run():  # a training loop: each step takes the last one's parameters and state
            carry[0], carry[1], loss = step(carry[0], carry[1], x, y)
            block(loss)

        row["run"] = run
    except Exception as e:  # noqa: BLE001 - reported in the table, the other rows still run
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return row


def cpu_times(runs, walls, rounds: int = 7, batch_s: float = 0.05) -> list[float]:
    """Process CPU seconds per call of each ``run`` (best of ``rounds`` alternating batches of
    about ``batch_s`` wall seconds, sized from ``walls``). On a shared host, pinned to one core,
    this is the work a step costs, free of the time other processes hold the core; unpinned it
    adds every thread's time (spinning thread pools included)."""
    counts = [max(1, int(batch_s / w)) for w in walls]
    best = [float("inf")] * len(runs)
    for _ in range(rounds):
        for i, (run, n) in enumerate(zip(runs, counts)):
            t0 = time.process_time()
            for _ in range(n):
                run()
            best[i] = min(best[i], (time.process_time() - t0) / n)
    return best


def run_pinned(args, cores: int) -> int:
    cpus = pin_cores(cores)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpy as np

    import fungrad as fg

    jax = optional("jax")
    frameworks = [("fungrad", fg)] + ([("jax", jax)] if jax is not None else [])
    timing = dict(min_time=0.3, repeats=3) if args.quick else dict(min_time=1.5, repeats=7)
    print(
        f"\nAdam training step: cpus {cpus} ({'pinned' if cores else 'unpinned'}), "
        f"numpy {np.__version__}, jax {jax.__version__ if jax else 'absent'}, timing {timing}"
    )
    failed = False
    for key in args.only:
        title, sizes = WORKLOADS[key]
        expected = reference_step(*inputs(sizes))
        rows = [prepare(fw, name, sizes, expected) for name, fw in frameworks]
        live = [r for r in rows if "run" in r]
        for r, (best, med) in zip(live, timeit_interleaved([r["run"] for r in live], **timing)):
            r["time"], r["median"] = best, med
        for r, cpu in zip(live, cpu_times([r["run"] for r in live], [r["time"] for r in live])):
            r["cpu"] = cpu
        print(f"[{key}] {title}   (first step checked against float64)")
        print(
            f"  {'framework':<10}{'optimizer':<22}{'min':>11}{'median':>11}{'steps/s':>10}"
            f"{'cpu/step':>11}{'err/tol':>9}"
        )
        for r in rows:
            if "error" in r:
                failed = True
                print(f"  {r['label']:<10}FAILED: {r['error']}")
                continue
            print(
                f"  {r['label']:<10}{r['opt']:<22}{r['time'] * 1e6:>8.1f} us"
                f"{r['median'] * 1e6:>8.1f} us{1 / r['time']:>10.0f}{r['cpu'] * 1e6:>8.1f} us"
                f"{r['err']:>9.2f}"
            )
        if len(rows) == 2 and all("time" in r for r in rows):
            ratio = rows[0]["time"] / rows[1]["time"]
            print(
                f"  fungrad/JAX time {ratio:.3f} (steps/s {1 / ratio:.2f}x JAX's; CPU time "
                f"{rows[0]['cpu'] / rows[1]['cpu']:.3f}); "
                f"target <= 1.0: {'PASS' if ratio <= 1.0 else 'MISS'}"
            )
    return 1 if failed else 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if len(args.cores) == 1:
        return run_pinned(args, args.cores[0])
    rc = 0
    for cores in args.cores:  # each pinning in a fresh process: pools size at import
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--cores",
            str(cores),
            "--only",
            ",".join(args.only),
        ] + (["--quick"] if args.quick else [])
        rc |= subprocess.call(cmd)
    return rc


if __name__ == "__main__":
    sys.exit(main())
