"""Trace-time cost of recording the user's source line on every traced equation.

Staging calls :func:`fungrad.source_info.current` once per equation (issue 20 asks that this
cost at most 5% of trace time). This bench traces four representative programs with capture
on and with capture off (``source_info.current`` replaced by a function returning None, so
the remaining cost is the rest of tracing) and prints the ratio on/off:

  mlp          value_and_grad of the W4 MLP loss (784-512-512-10, as bench/jit_workloads.py)
  transformer  grad of a TransformerDecoderBlock (fungrad.nn) on (8, 16, 64)
  lstm         grad of an LSTM (fungrad.nn.RNN over lax.scan) on (16, 8, 32)
  chain        a 2000-op elementwise chain (sin, mul, add) in one function

Each program is timed two ways: ``make_jaxpr(f)(*args)`` (tracing alone) and a fresh
``jit(f).lower(*args)`` (jit's first-call tracing and simplification, no compile). On and off
runs alternate within each repeat so drift hits both alike; the reported time is the median
(and, as a check, the ratio of the minima) over ``--repeats`` (each one call) of the thread's
CPU time (``time.thread_time``, so that
another process taking the core does not count). The process is pinned to one core
(``--cores``).

Run:  python bench/trace_overhead.py [--repeats 60] [--cores 1] [--only mlp,chain]

To compare against a checkout without source capture, point PYTHONPATH at it: when it has
no ``fungrad.source_info`` the bench prints its times alone.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.path.dirname(HERE) not in sys.path:
    sys.path.append(os.path.dirname(HERE))  # PYTHONPATH (another checkout) wins
from common import pin_cores  # noqa: E402

CHAIN_OPS = 2000


def programs():
    """name -> (function, args): the functions whose tracing is measured."""
    import numpy as np

    import fungrad as fg
    import fungrad.numpy as fnp
    from fungrad import nn

    rng = np.random.default_rng(0)
    out = {}

    sizes, batch = (784, 512, 512, 10), 128
    params = [
        (rng.standard_normal((m, n)).astype(np.float32) / np.sqrt(m).astype(np.float32),
         np.zeros(n, np.float32))
        for m, n in zip(sizes[:-1], sizes[1:])
    ]  # fmt: skip
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]

    def mlp_loss(params, x, y):
        (w1, b1), (w2, b2), (w3, b3) = params
        h = fnp.tanh(x @ w1 + b1)
        h = fg.nn.relu(h @ w2 + b2)
        logits = h @ w3 + b3
        return -fnp.mean(fnp.sum(y * fg.nn.log_softmax(logits), axis=-1))

    out["mlp"] = (fg.value_and_grad(mlp_loss), (params, x, y))

    block = nn.TransformerDecoderBlock(64, 4, key=fg.random.PRNGKey(0))
    xb = rng.standard_normal((8, 16, 64)).astype(np.float32)
    out["transformer"] = (fg.grad(lambda b, x: fnp.mean(b(x) ** 2)), (block, xb))

    lstm = nn.RNN(nn.LSTMCell(32, 64, key=fg.random.PRNGKey(1)))
    xs = rng.standard_normal((16, 8, 32)).astype(np.float32)
    out["lstm"] = (fg.grad(lambda m, xs: fnp.mean(m(xs) ** 2)), (lstm, xs))

    def chain(x):
        for i in range(CHAIN_OPS // 3):
            x = fnp.sin(x) * 1.0001 + 0.001 * (i % 7)
        return x

    out["chain"] = (chain, (rng.standard_normal(256).astype(np.float32),))
    return out


def timed(fn) -> float:
    """CPU seconds of this thread in ``fn()``: unlike wall time, not inflated when another
    process takes the core (benchmarks here share a loaded machine)."""
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated program names")
    ns = ap.parse_args()
    cpus = pin_cores(ns.cores)

    import fungrad as fg

    try:
        from fungrad import source_info
    except ImportError:
        source_info = None
    capture = source_info.current if source_info is not None else None

    def off(depth=2):
        return None

    progs = programs()
    names = [n for n in progs if not ns.only or n in ns.only.split(",")]
    print(f"fungrad from {os.path.dirname(fg.__file__)}; CPUs {cpus}; {ns.repeats} repeats")
    print(f"{'program':<12}{'mode':<12}{'on (ms)':>10}{'off (ms)':>10}{'on/off':>9}"
          f"{'min on/off':>12}")  # fmt: skip
    for name in names:
        f, args = progs[name]
        modes = {
            "make_jaxpr": lambda f=f, args=args: fg.make_jaxpr(f)(*args),
            "jit.lower": lambda f=f, args=args: fg.jit(f).lower(*args),
        }
        for mode, run in modes.items():
            run()  # warm the abstract-eval and import caches
            on, off_t = [], []
            gc.collect()
            gc.disable()
            try:
                for _ in range(ns.repeats):
                    on.append(timed(run))
                    if source_info is not None:
                        source_info.current = off
                        try:
                            off_t.append(timed(run))
                        finally:
                            source_info.current = capture
            finally:
                gc.enable()
            t_on = statistics.median(on)
            if off_t:
                t_off = statistics.median(off_t)
                print(f"{name:<12}{mode:<12}{t_on * 1e3:>10.2f}{t_off * 1e3:>10.2f}"
                      f"{t_on / t_off:>9.3f}{min(on) / min(off_t):>12.3f}")  # fmt: skip
            else:
                print(f"{name:<12}{mode:<12}{t_on * 1e3:>10.2f}{'-':>10}{'-':>9}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
