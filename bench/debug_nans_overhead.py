"""Cost of ``debug_nans`` (and ``debug_infs``) on a jitted call that makes no NaN.

Issue 20 asks that W4 (bench/jit_workloads.py: one SGD step of a 784-512-512-10 MLP, batch 128)
with debug_nans on and no NaN cost at most 2% more than with it off. With the flag on, a jitted
call takes the general call path (not the per-signature fast table) and screens its outputs
(a max per floating output, and a min with debug_infs: nan_hunt.may_hold_invalid); nothing
else runs unless a NaN is seen. Off and on calls alternate so that drift hits
both alike (each call is timed; the modes take turns call by call); the report gives each
mode's median and the median of the paired differences, pinned to one core.

Run:  python bench/debug_nans_overhead.py [--calls 600] [--cores 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jit_workloads import MLP  # noqa: E402

import fungrad as fg  # noqa: E402
from fungrad import nan_hunt  # noqa: E402


def _call(step, args) -> float:
    t0 = time.perf_counter()
    out = step(*args)
    fg.block_until_ready(out)
    return time.perf_counter() - t0


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=600, help="calls per mode")
    p.add_argument("--cores", default="0", help="CPU cores to pin to ('' for no pinning)")
    a = p.parse_args(argv)
    if a.cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in a.cores.split(",")})
    step, args = MLP.build(fg)
    modes = {"off": (False, False), "debug_nans": (True, False), "debug_nans+infs": (True, True)}
    times: dict[str, list[float]] = {m: [] for m in modes}
    order = list(modes)
    for nans, infs in modes.values():  # warm every path (compile once, caches)
        fg.config.update("debug_nans", nans)
        fg.config.update("debug_infs", infs)
        for _ in range(3):
            _call(step, args)
    for i in range(a.calls):
        for m in order[i % 3 :] + order[: i % 3]:  # each mode first as often as the others
            nans, infs = modes[m]
            fg.config.update("debug_nans", nans)
            fg.config.update("debug_infs", infs)
            times[m].append(_call(step, args))
    fg.config.update("debug_nans", False)
    fg.config.update("debug_infs", False)
    # The screen alone, on the step's outputs, right after the step made them.
    screen = []
    for _ in range(a.calls // 4):
        outs = fg.tree_util.tree_leaves(step(*args))
        fg.config.update("debug_nans", True)
        t0 = time.perf_counter()
        nan_hunt.may_hold_invalid(outs)
        screen.append(time.perf_counter() - t0)
        fg.config.update("debug_nans", False)
    base = statistics.median(times["off"])
    print(f"W4 MLP step, {a.calls} calls per mode interleaved, cores={a.cores or 'all'}")
    for m in modes:
        t = statistics.median(times[m])
        diff = statistics.median([x - y for x, y in zip(times[m], times["off"])])
        print(
            f"  {m:16s} median {t * 1e3:7.3f} ms ({(t / base - 1) * 100:+.2f}%), "
            f"median paired difference {diff * 1e6:+7.1f} us ({diff / base * 100:+.2f}%)"
        )
    s = statistics.median(screen)
    print(f"  output screen alone (debug_nans): {s * 1e6:.1f} us ({s / base * 100:.2f}% of a step)")


if __name__ == "__main__":
    main()
